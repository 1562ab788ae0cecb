"""A real controller-mode deployment (name server, three controllers, three brokers from
conf/controller/, as OS processes on free ports) and what its own admin requests say about it.
Shared by the C++ and Proxy failover tests and bench/.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass

from rmqlab.controller.impl.raft_controller import RAFT_PORT_OFFSET
from rmqlab.runtime.real_cluster import RealCluster, free_ports
from tests.controller_helpers import controller_ports
from tests.cpp_helpers import template, write_conf

BROKER_NAME = "broker-a"
BROKERS = ("broker-n0", "broker-n1", "broker-n2")
CONTROLLERS = ("n0", "n1", "n2")
# The lab's short timeouts (RocketMQ's defaults in the comments). With SIGKILL none of them is on
# the path to the new master: the kernel closes the dead broker's connections, and the controller
# leader elects on the channel close. They bound the other failures (a hung or partitioned
# master) and the catch-up after the election.
LAB_CONTROLLER = {
    "scanNotActiveBrokerInterval": 1000,   # 5000: scan for replicas whose heartbeats stopped
    "scanInactiveMasterInterval": 1000,    # 5000: the leader's scan for sets without a live master
}
LAB_BROKER = {
    "brokerHeartbeatInterval": 300,             # 1000: BROKER_HEARTBEAT to every controller
    "controllerHeartBeatTimeoutMills": 3000,    # 10000: the controller drops a replica this long silent
    "syncBrokerMetadataPeriod": 1000,           # 5000: a replica polls GET_REPLICA_INFO (a lost notify)
    "checkSyncStateSetPeriod": 1000,            # 5000: a master shrinks its SyncStateSet
    "syncControllerMetadataPeriod": 2000,       # 10000: a replica looks up the controller leader
    "mappedFileSizeCommitLog": 1024 * 1024,     # 1 GiB: small files for a test's disk
}


@dataclass
class Deployment:
    cluster: RealCluster
    namesrv: str
    controllers: dict[str, str]     # node -> controller address (its peer port)
    brokers: dict[str, str]         # node -> listen address (brokerIP1:listenPort)
    conf_dir: str

    def controller_addr(self) -> str:
        return ";".join(self.controllers.values())

    def broker_node(self, addr: str) -> str:
        return next(n for n, a in self.brokers.items() if a == addr)


def start_deployment(root: str, lab_timeouts: bool = True) -> Deployment:
    """namesrv + 3 standalone controllers + 3 controller-mode brokers from conf/controller/ on free
    ports (controller ports whose Raft port, +RAFT_PORT_OFFSET, is free too), started at once; returns
    when every process traced node.start (the election is awaited by `wait_ready`). Without
    `lab_timeouts` the processes keep RocketMQ's default timeouts (only the commit-log file size
    stays small)."""
    lab_controller = LAB_CONTROLLER if lab_timeouts else {}
    lab_broker = LAB_BROKER if lab_timeouts else {"mappedFileSizeCommitLog": LAB_BROKER["mappedFileSizeCommitLog"]}
    conf_dir = os.path.join(root, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    cports = controller_ports(len(CONTROLLERS))
    taken = set(cports) | {p + RAFT_PORT_OFFSET for p in cports}
    ns_port, *bports = [p for p in free_ports(1 + 2 * len(BROKERS) + len(taken)) if p not in taken][
        :1 + 2 * len(BROKERS)]
    cluster = RealCluster(os.path.join(root, "cluster"), relay=False, startup_timeout_s=60)
    namesrv = f"127.0.0.1:{ns_port}"
    conf = write_conf(os.path.join(conf_dir, "namesrv.conf"), {"listenPort": ns_port})
    cluster.add_node("namesrv", [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=[ns_port])
    controllers = {f"controller-{n}": f"127.0.0.1:{p}" for n, p in zip(CONTROLLERS, cports)}
    peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in zip(CONTROLLERS, cports))
    for n, port in zip(CONTROLLERS, cports):
        node = f"controller-{n}"
        values = template(f"controller/controller-{n}.conf") | {
            "controllerDLegerPeers": peers, "controllerStorePath": cluster.store_dir(node)} | lab_controller
        conf = write_conf(os.path.join(conf_dir, f"{node}.conf"), values)
        cluster.add_node(node, [sys.executable, "-m", "rmqlab.cli", "controller", "-c", conf],
                         ports=[port, port + RAFT_PORT_OFFSET])
    brokers = {}
    for i, node in enumerate(BROKERS):
        listen, ha = bports[2 * i], bports[2 * i + 1]
        values = template(f"controller/{node}.conf") | {
            "namesrvAddr": namesrv, "controllerAddr": ";".join(controllers.values()), "listenPort": listen,
            "haListenPort": ha, "storePathRootDir": cluster.store_dir(node)} | lab_broker
        conf = write_conf(os.path.join(conf_dir, f"{node}.conf"), values)
        cluster.add_node(node, [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf], ports=[listen, ha])
        brokers[node] = f"127.0.0.1:{listen}"
    try:
        cluster.start_all(timeout_s=60)
    except BaseException:
        cluster.close()
        raise
    return Deployment(cluster, namesrv, controllers, brokers, conf_dir)


def admin_call(namesrv: str, fn, timeout_ms: int = 2000):
    """`await fn(admin)` with a DefaultMQAdminExt on a throwaway RealNode (what `rmqlab admin` does)."""
    from rmqlab.client.admin import DefaultMQAdminExt
    from rmqlab.runtime.real import RealNode

    async def main():
        with tempfile.TemporaryDirectory(prefix="rmqlab-admin-") as d:
            node = RealNode("test-admin", d)
            admin = DefaultMQAdminExt(namesrv, timeout_millis=timeout_ms)
            try:
                await admin.start(node)
                return await fn(admin)
            finally:
                await admin.shutdown()
                await node.close()

    return asyncio.run(main())


def broker_addrs(dep: Deployment) -> dict[int, str]:
    """broker-a's members as the name server lists them ({brokerId: address}; 0 is the master)."""
    async def fn(admin):
        info = await admin.examine_broker_cluster_info()
        data = info.broker_addr_table.get(BROKER_NAME)
        return dict(data.broker_addrs) if data is not None else {}
    return admin_call(dep.namesrv, fn)


def replicas_info(dep: Deployment):
    """broker-a's ReplicasInfo from the controller leader (master, epoch, SyncStateSet)."""
    async def fn(admin):
        meta = await admin.get_controller_meta_data(dep.controller_addr())
        if not meta.controller_leader_address:
            return None
        info = await admin.get_in_sync_state_data(meta.controller_leader_address, [BROKER_NAME])
        return info.replicas_info_table.get(BROKER_NAME)
    return admin_call(dep.namesrv, fn)


def poll(condition, timeout_s: float, what: str, interval_s: float = 0.1):
    """condition()'s first truthy value; an exception counts as not yet (a process in between states)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except Exception:
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(interval_s)


def wait_ready(dep: Deployment, timeout_s: float = 60) -> str:
    """Wait until the elected master is the name server's brokerId 0 and the controller's
    SyncStateSet holds all three replicas, alive; returns the master's address. Only then is every
    acknowledged message on every replica (allAckInSyncStateSet), and any other replica electable."""
    def ready():
        info = replicas_info(dep)
        if info is None or info.master_address is None:
            return None
        members = {r.broker_address for r in info.in_sync_replicas if r.alive}
        if members != set(dep.brokers.values()):
            return None
        return info.master_address if broker_addrs(dep).get(0) == info.master_address else None
    return poll(ready, timeout_s, "a master registered as id 0 with all three replicas in its SyncStateSet",
                interval_s=0.3)


# -- slave acting master (RIP-32): conf/acting-master/ -----------------------------------------------

ACTING_GROUP_A = ("broker-a", "broker-a-s1", "broker-a-s2")


@dataclass
class ActingDeployment:
    cluster: RealCluster
    namesrv: str
    brokers: dict[str, str]     # node -> address clients dial (brokerIP1:listenPort)

    def admin(self, fn, timeout_ms: int = 2000):
        return admin_call(self.namesrv, fn, timeout_ms)


def start_acting_deployment(root: str, *, skip_pre_online: bool = False,
                            brokers: tuple[str, ...] = (*ACTING_GROUP_A, "broker-b")) -> ActingDeployment:
    """The name server and `brokers` of conf/acting-master/ (supportActingMaster,
    notifyMinBrokerIdChanged, enableSlaveActingMaster, enableRemoteEscape, three replicas per group)
    on free ports, with small commit-log files and `skipPreOnline` as asked; returns once every
    process traced node.start.

    Each broker is on a host of its own, as on a machine of its own: brokerIP1 = brokerIP2 =
    bindAddress = its node's loopback address, the one its outgoing connections come from. A
    returning broker's pre-online finds a member's HA connection by that member's host
    (BrokerPreOnlineService.waitForHaHandshakeComplete compares hosts only), so a broker must
    connect from the host it advertises."""
    conf_dir = os.path.join(root, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    ns_port, *bports = free_ports(1 + 2 * len(brokers))
    cluster = RealCluster(os.path.join(root, "cluster"), relay=False, startup_timeout_s=60)
    namesrv = f"127.0.0.1:{ns_port}"
    conf = write_conf(os.path.join(conf_dir, "namesrv.conf"),
                      template("acting-master/namesrv.conf") | {"listenPort": ns_port})
    cluster.add_node("namesrv", [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=[ns_port])
    listen_addrs = {}
    for i, node in enumerate(brokers):
        listen, ha = bports[2 * i], bports[2 * i + 1]
        cluster.add_node(node, [sys.executable, "-m", "rmqlab.cli", "broker", "-c",
                                os.path.join(conf_dir, f"{node}.properties")], ports=[listen, ha])
        host = cluster.node_ip(node)
        values = template(f"acting-master/{node}.properties") | {
            "namesrvAddr": namesrv, "listenPort": listen, "haListenPort": ha,
            "brokerIP1": host, "brokerIP2": host, "bindAddress": host,
            "storePathRootDir": cluster.store_dir(node), "skipPreOnline": str(skip_pre_online).lower(),
            "mappedFileSizeCommitLog": LAB_BROKER["mappedFileSizeCommitLog"]}
        write_conf(os.path.join(conf_dir, f"{node}.properties"), values)
        listen_addrs[node] = f"{host}:{listen}"
    try:
        cluster.start_all(timeout_s=60)
    except BaseException:
        cluster.close()
        raise
    return ActingDeployment(cluster, namesrv, listen_addrs)


ACTING_TOPIC = "TopicActing"


def create_topic(dep: ActingDeployment, topic: str) -> None:
    """updateTopic on every broker: a slave copies a new topic from its master only at its
    SlaveSynchronize run, a minute after it started, and an acting slave without the topic would
    answer pulls TOPIC_NOT_EXIST."""
    from rmqlab.common.topic_config import TopicConfig

    async def fn(admin):
        for addr in dep.brokers.values():
            await admin.create_and_update_topic_config(addr, TopicConfig(topic, 4, 4))
    dep.admin(fn)


def route_of_a(dep: ActingDeployment, topic: str = ACTING_TOPIC) -> tuple[str | None, int | None]:
    """(brokerId 0's address, queue perm) of broker-a in the route the name server gives clients."""
    async def fn(admin):
        route = await admin.examine_topic_route_info(topic)
        data = next(b for b in route.broker_datas if b.broker_name == "broker-a")
        queue = next(q for q in route.queue_datas if q.broker_name == "broker-a")
        return data.broker_addrs.get(0), queue.perm
    return dep.admin(fn)
