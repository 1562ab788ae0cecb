"""A controller-mode deployment (conf/controller/: a name server, three controllers, broker set
broker-a of three replicas) built with rmqlab.cluster on the simulator, driven with rmqlab's
producer and pull consumer, and its replicas' files compared. Shared by the controller-mode tests
and tests/test_lab_truncation.py.
"""

from __future__ import annotations

import os

from rmqlab.client import ClientProcess, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPullConsumer
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.trace import client_ops
from tests.sim_helpers import track

TOPIC = "SeedTopic"
BROKERS = ("broker-n0", "broker-n1", "broker-n2")
ALL_IDS = {1, 2, 3}


def start(seed: int, mode: str = "controller-standalone", *, controllers: int = 3,
          controller_overrides: dict | None = None, **broker_overrides) -> Cluster:
    """The deployment running, the topic routed, every replica in the SyncStateSet and the slaves
    knowing the topic (SlaveSynchronize copies it every 10 s in controller mode)."""
    c = Cluster(mode, seed=seed, controllers=controllers, controller_overrides=controller_overrides,
                overrides={"*": {"slaveReadEnable": True, **broker_overrides}})
    track(c)
    c.start(60_000)
    c.create_topic(TOPIC)
    c.add_client("producer", lambda: ClientProcess(producer=DefaultMQProducer("PG", c.namesrv_addr)))
    c.add_client("admin", lambda: ClientProcess(admin=DefaultMQAdminExt(c.namesrv_addr)))
    c.run_until(lambda: sync_state_set(c) == ALL_IDS, 60_000)
    c.run_for(12_000)
    return c


def rm(c: Cluster, name: str):
    return c.components[name].replicas_manager


def sync_state_set(c: Cluster) -> set[int]:
    """The SyncStateSet the current master holds (confirmed by the controller)."""
    master = c.master()
    return set(rm(c, master).sync_state_set) if master else set()


def controller_id(c: Cluster, name: str) -> int:
    return rm(c, name).broker_controller_id


def send(c: Cluster, n: int, tag: str) -> list:
    """n sends one after another from the cluster's producer; failures are kept, not raised."""
    p = c.sim.components["producer"]["producer"]

    async def go():
        out = []
        for i in range(n):
            try:
                out.append(await p.send(Message(TOPIC, f"{tag}-{i}".encode())))
            except Exception as e:  # MQClientException / MQBrokerException after the retries
                out.append(e)
        return out

    return c.sim.run(go())


def ok(results: list) -> list:
    return [r for r in results if not isinstance(r, Exception)]


def wait_writable(c: Cluster, tag: str, timeout_ms: float = 60_000) -> float:
    """Virtual ms until a send is acknowledged again (one try a second: the producer's retries,
    then its 30 s route refresh, find the new master)."""
    t0 = c.sim.now_ms()
    p, node = c.sim.components["producer"]["producer"], c.sim.nodes["producer"]

    async def go():
        i = 0
        while c.sim.now_ms() - t0 < timeout_ms:
            try:
                await p.send(Message(TOPIC, f"{tag}-{i}".encode()))
                return c.sim.now_ms() - t0
            except Exception:
                i += 1
                await node.sleep(1_000)
        raise TimeoutError(f"no send acknowledged within {timeout_ms:.0f} virtual ms")

    return c.sim.run(go())


def acked_keys(c: Cluster) -> set[str]:
    return {op.invoke_value["uniq_key"] for op in client_ops(c.events()) if op.f == "send" and op.type == "ok"}


def routed(c: Cluster) -> bool:
    """Every name server routes broker-a's master id 0 to the current master (it registers anew
    after each role change)."""
    master = c.master()
    addr = master and f"127.0.0.1:{c.components[master].netty_server_config.listenPort}"
    tables = [c.components[n].route_info_manager.broker_addr_table.get("broker-a") for n in c.namesrvs]
    return bool(addr) and all(t is not None and t.broker_addrs.get(0) == addr for t in tables)


def readable_keys(c: Cluster, name: str) -> set[str]:
    """Every message a fresh pull consumer reads now (from the master, or a readable slave)."""
    c.run_until(lambda: routed(c), 30_000)
    c.add_client(name, lambda: ClientProcess(consumer=DefaultMQPullConsumer(name, c.namesrv_addr)))
    consumer = c.sim.components[name]["consumer"]

    async def read():
        keys = set()
        for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
            offset = 0
            while True:
                r = await consumer.pull(mq, "*", offset, 32)
                if not r.msg_found_list:
                    break
                keys.update(m.get_property("UNIQ_KEY") for m in r.msg_found_list)
                offset = r.next_begin_offset
        return keys

    return c.sim.run(read())


def fail_over(c: Cluster, fault, timeout_ms: float = 60_000) -> tuple[str, str, float]:
    """Apply `fault` to the master; (old master, new master, virtual ms until the new one took the role)."""
    old = c.master()
    epoch = rm(c, old).master_epoch
    t0 = c.sim.now_ms()
    fault(old)
    c.run_until(lambda: c.master() not in (None, old), timeout_ms)
    new = c.master()
    took = [t for t, node, e in c.master_changes() if node == new and e > epoch][0] - t0
    return old, new, took


def log_lines(c: Cluster, node: str, prefix: str, since_ms: float = 0.0) -> list:
    return [e for e in c.events() if e.node == node and e.kind == "log" and e.time_ms >= since_ms
            and e.fields.get("message", "").startswith(prefix)]


def commitlog_bytes(c: Cluster, name: str) -> bytes:
    store = c.components[name].message_store
    d = os.path.join(store.config.storePathRootDir, "commitlog")
    data = b"".join(open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d)))
    return data[:store.get_max_phy_offset()]


def epoch_file_bytes(c: Cluster, name: str) -> bytes:
    with open(c.components[name].message_store_config.get_store_path_epoch_file(), "rb") as f:
        return f.read()


def assert_replicas_consistent(c: Cluster, timeout_ms: float = 60_000) -> int:
    """Once every replica caught up with the master: the same epoch entries and epoch file, and
    commitlogs equal byte for byte up to the master's confirm offset (returned)."""
    master = c.master()
    store = c.components[master].message_store
    c.run_until(lambda: all(c.sim.nodes[n].alive and c.components[n].message_store.get_max_phy_offset()
                            == store.get_max_phy_offset() for n in BROKERS), timeout_ms)
    c.run_for(1_000)  # the last confirm offset travels with the next transfer header
    confirm = rm(c, master).ha_service.get_confirm_offset()
    assert confirm == store.get_max_phy_offset() > 0
    reference = commitlog_bytes(c, master)[:confirm]
    entries = rm(c, master).get_epoch_entries()
    for name in BROKERS:
        assert commitlog_bytes(c, name)[:confirm] == reference, f"{name}'s commitlog differs from {master}'s"
        assert rm(c, name).get_epoch_entries() == entries, f"{name}'s epochs differ from {master}'s"
        assert epoch_file_bytes(c, name) == epoch_file_bytes(c, master), f"{name}'s epoch file differs"
    return confirm


def unclean_schedule(seed: int, unclean: bool) -> tuple[Cluster, dict]:
    """A master A with slaves X and Y. Y is cut off from the other brokers (not from the
    controllers): A shrinks the SyncStateSet to {A, X}. A dies: X is elected (epoch 2) with the
    set {X}, and acknowledges writes alone. X dies too. Unclean: Y, alive but never in X's set,
    is elected (epoch 3) without X's epoch-2 writes. Clean: nobody is, until X returns."""
    c = start(seed, controller_overrides={"enableElectUncleanMaster": unclean})
    assert len(ok(send(c, 10, "warm"))) == 10
    a = c.master()
    x, y = [n for n in BROKERS if n != a]
    c.nemesis.partition([y], [a, x])
    c.run_until(lambda: sync_state_set(c) == {controller_id(c, a), controller_id(c, x)}, 60_000)
    y_has = acked_keys(c)  # acknowledged while Y was in the SyncStateSet: Y has every one of them
    assert len(ok(send(c, 10, "before"))) == 10
    _, new, _ = fail_over(c, c.nemesis.kill)
    assert new == x
    wait_writable(c, "x-alone")
    x_acked = ok(send(c, 20, "epoch2"))
    assert len(x_acked) == 20
    t0 = c.sim.now_ms()
    c.nemesis.kill(x)
    c.run_for(20_000)
    return c, {"a": a, "x": x, "y": y, "y_has": y_has, "x_acked": {r.msg_id for r in x_acked}, "t0": t0}
