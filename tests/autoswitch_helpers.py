"""Two controller-mode replicas on the simulator, reduced to a store and an AutoSwitchHAService
(RocketMQ's ``store/.../ha/autoswitch/``) whose roles a test drives as ReplicasManager would.
Shared by tests/test_autoswitch_ha.py and tests/test_controller_mode_bugs.py.
"""

from __future__ import annotations

from rmqlab.config import MessageStoreConfig
from rmqlab.config.broker import BrokerRole
from rmqlab.ha.autoswitch import AutoSwitchHAService
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from rmqlab.store import DefaultMessageStore
from tests.sim_helpers import track
from tests.store_helpers import make_message

COMMITLOG = 64 * 1024
CQ = 20 * 100
HA_PORT = {"A": 31912, "B": 31922}
BROKER_ID = {"A": 1, "B": 2}
TOPIC = "TopicTest"


class ControllerModeBroker(Component):
    """Just enough broker: a store, its services on Node timers, and an AutoSwitchHAService whose
    role the test drives as ReplicasManager would (brokerRole set around the HA role change)."""

    component_type = "broker"

    def __init__(self, name: str, ha_port: int | None = None, **overrides):
        self.name, self.overrides = name, overrides
        self.ha_port = HA_PORT[name] if ha_port is None else ha_port
        self.alter_requests: list[set[int]] = []

    async def start(self, node) -> None:
        self.node = node
        cfg = MessageStoreConfig(storePathRootDir=node.store_dir, mappedFileSizeCommitLog=COMMITLOG,
                                 mappedFileSizeConsumeQueue=CQ, brokerRole=BrokerRole.SLAVE,
                                 haListenPort=self.ha_port, allAckInSyncStateSet=True)
        for key, value in self.overrides.items():
            setattr(cfg, key, value)
        self.config = cfg
        self.store = DefaultMessageStore(cfg, clock=node.now_ms)
        self.store.load()
        self.ha = AutoSwitchHAService(node, self.store, cfg, host="127.0.0.1", local_broker_id=BROKER_ID[self.name],
                                      broker_name="broker-a")
        self.ha.register_sync_state_set_changed_listener(self.alter_requests.append)
        await self.ha.start()
        for name, interval, step in self.store.periodic_services():
            node.spawn(self._every(interval, step), name=name)
        self.store.reput_message_service.start(node.call_later)

    async def _every(self, interval_ms: int, step) -> None:
        while True:
            step()
            await self.node.sleep(interval_ms)

    async def become_master(self, epoch: int, sync_state_set: set[int]) -> bool:
        self.ha.set_sync_state_set(sync_state_set)
        ok = await self.ha.change_to_master(epoch)
        self.config.brokerRole = BrokerRole.SYNC_MASTER
        return ok

    async def become_slave(self, master: str, epoch: int, master_ha_addr: str | None = None) -> bool:
        self.config.brokerRole = BrokerRole.SLAVE
        ok = self.ha.change_to_slave(master, epoch, BROKER_ID[self.name])
        self.ha.update_ha_master_address(master_ha_addr or f"127.0.0.1:{HA_PORT[master]}")
        return ok

    async def shutdown(self) -> None:
        self.ha.shutdown()
        self.store.shutdown()

    def on_crash(self) -> None:
        self.ha.on_crash()
        self.store.kill()


def world(seed: int, **overrides) -> Simulation:
    sim = Simulation(seed=seed)
    track(sim)
    for name in ("A", "B"):
        sim.add_node(name, lambda name=name: ControllerModeBroker(name, **overrides.get(name, {})))
        sim.start(name)
    return sim


def b(sim, name) -> ControllerModeBroker:
    return sim.components[name]


def put(sim, name, i):
    broker = b(sim, name)
    return broker.store.async_put_message(make_message(broker.node.now_ms, i))
