"""One BrokerController on the simulator and a client that speaks like the C++ client of PyPI
``rocketmq`` 0.4.4 (raw JSON frames, language CPP, version 63; see tests/test_broker.py).
Shared by the broker, pop, retry and timer-message tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct

from rmqlab.broker import BrokerController
from rmqlab.config import load_broker_config
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import FrameDecoder, RemotingCommand, RequestCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation

BROKER = "127.0.0.1:10911"
NS = "127.0.0.1:9876"
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


class Idle(Component):
    component_type = "client"

    async def start(self, node):
        self.node = node


def broker_factory(sim: Simulation, name: str, *, port: int = 10911, namesrv: str | None = None,
                   controller_kwargs: dict | None = None, **overrides):
    def factory() -> BrokerController:
        props = {"brokerName": "broker-a", "listenPort": port, "storePathRootDir": os.path.join(sim.store_dir(name), "store"),
                 "mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 20 * 100}
        props.update(overrides)
        cfg = load_broker_config(None, namesrv_addr=namesrv, overrides={k: str(v) for k, v in props.items()})
        return BrokerController(cfg, **(controller_kwargs or {}))
    return factory


def world(seed: int = 1, clients: tuple[str, ...] = ("client",), controller_kwargs: dict | None = None,
          **overrides) -> Simulation:
    sim = Simulation(seed=seed)
    sim.add_node("broker-a", broker_factory(sim, "broker-a", controller_kwargs=controller_kwargs, **overrides))
    for name in clients:
        sim.add_node(name, Idle)
    sim.start_all()
    return sim


class CppClient:
    """A client speaking like the C++ core: see the module docstring. ``notifications`` records the
    requests the broker sends it (NOTIFY_CONSUMER_IDS_CHANGED)."""

    def __init__(self, sim: Simulation, node: str, addr: str = BROKER):
        self.sim, self.node, self.addr = sim, sim.nodes[node], addr
        self.opaque = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.notifications: list[RemotingCommand] = []
        self.writer = None
        self.client_id = f"127.0.0.1@{node}"

    async def _connect(self) -> None:
        host, port = self.addr.rsplit(":", 1)
        reader, self.writer = await self.node.connect(host, int(port))
        self.node.spawn(self._read(reader))

    async def _read(self, reader) -> None:
        decoder = FrameDecoder()
        while True:
            data = await reader.read(65536)
            if not data:
                return
            for cmd in decoder.feed(data):
                if cmd.is_response_type():
                    fut = self.pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                else:
                    self.notifications.append(cmd)

    async def request(self, code: int, ext: dict, body: bytes = b"", timeout_ms: float = 40_000) -> RemotingCommand:
        if self.writer is None:
            await self._connect()
        self.opaque += 1
        opaque = self.opaque
        fields = dict(ext)
        fields.update({"Signature": "", "OnsChannel": "ALIYUN", "AccessKey": ""})
        header = json.dumps({"code": code, "language": "CPP", "version": 63, "opaque": opaque, "flag": 0,
                             "remark": "", "extFields": fields}).encode()
        self.writer.write(struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body)
        fut = asyncio.get_running_loop().create_future()
        self.pending[opaque] = fut
        timer = self.node.call_later(timeout_ms, lambda: fut.done() or fut.set_exception(TimeoutError(code)))
        try:
            return await fut
        finally:
            timer.cancel()

    def call(self, code: int, ext: dict, body: bytes = b"", timeout_ms: float = 40_000) -> RemotingCommand:
        return self.sim.run(self.request(code, ext, body, timeout_ms))

    # -- what the C++ client sends -------------------------------------------------------------
    def send_ext(self, topic: str, properties: str, queue_id: int = 0, **extra) -> dict:
        ext = {"producerGroup": "PID_TEST", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
               "queueId": queue_id, "sysFlag": 0, "bornTimestamp": self.node.now_ms(), "flag": 0,
               "properties": properties, "reconsumeTimes": 0, "unitMode": "0", "batch": "0"}
        ext.update(extra)
        return ext

    def send(self, topic: str, body: bytes, properties: str = "", queue_id: int = 0, timeout_ms: float = 40_000,
             **extra) -> RemotingCommand:
        return self.call(RequestCode.SEND_MESSAGE, self.send_ext(topic, properties, queue_id, **extra), body, timeout_ms)

    def pull_ext(self, topic: str, offset: int, queue_id: int = 0, sys_flag: int = 4, subscription: str = "*",
                 group: str = "CID_TEST", suspend_ms: int = 20000, commit_offset: int = 0) -> dict:
        return {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
                "sysFlag": sys_flag, "commitOffset": commit_offset, "suspendTimeoutMillis": suspend_ms,
                "subscription": subscription, "subVersion": 0}

    def pull(self, topic: str, offset: int, **kw) -> RemotingCommand:
        return self.call(RequestCode.PULL_MESSAGE, self.pull_ext(topic, offset, **kw))

    def heartbeat(self, body: dict) -> RemotingCommand:
        return self.call(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())


def props(**kv: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in kv.items())


def close(sim: Simulation) -> None:
    sim.close()


def cluster(seed: int = 3, sync_period_ms: int = 5000, master_role: str = "ASYNC_MASTER") -> Simulation:
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", NamesrvController)
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv=NS, brokerRole=master_role))
    sim.add_node("broker-a-s", broker_factory(sim, "broker-a-s", port=10921, namesrv=NS, brokerRole="SLAVE",
                                              brokerId=1, slaveReadEnable="true",
                                              controller_kwargs={"slave_synchronize_period_ms": sync_period_ms}))
    sim.add_node("client", Idle)
    sim.start_all()
    return sim


def acting_master_group(seed: int = 7, slaves: int = 2, master_overrides: dict | None = None,
                        **overrides) -> Simulation:
    """A name server with its defaults, broker-a (master, id 0), broker-a-s<i> (SLAVE, id i, slave
    reads on) and an idle "client" node, every broker with ``enableSlaveActingMaster=true`` and
    `overrides` (the master also `master_overrides`); started."""
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", NamesrvController)
    acting = {"enableSlaveActingMaster": "true", **overrides}
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv=NS, **{**acting, **(master_overrides or {})}))
    for i in range(1, slaves + 1):
        sim.add_node(f"broker-a-s{i}", broker_factory(sim, f"broker-a-s{i}", port=10911 + 10 * i, namesrv=NS,
                                                      brokerRole="SLAVE", brokerId=i, slaveReadEnable="true",
                                                      **acting))
    sim.add_node("client", Idle)
    sim.start_all()
    return sim
