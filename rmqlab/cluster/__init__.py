"""rmqlab.cluster: a deployment mode of RocketMQ (its docs' "部署方式", conf/README.md) as running
software, on either runtime.

    c = Cluster("2m-2s-async")                      # the simulator, seeded
    c.start()
    c.nemesis.crash("broker-a")                       # kill / crash / restart / suspend / partition ...
    c.run_for(5_000)                                  # virtual ms (simulator); a sleep on the real runtime
    c.events()                                        # the event trace

    c = Cluster("2m-2s-sync", runtime="real", root_dir="/tmp/lab")   # the same, as OS processes
    c.close()                                         # without root_dir: its temporary directory is removed

Clients are described once for both runtimes (rmqlab.example.benchmark: plain, serializable values):

    c.add_consumer("consumer", topic="TopicTest", group="CG", start=False)
    c.add_producer("producer", topic="TopicTest", count=100, interval_ms=10, start=False)
    c.start()
    c.create_topic("TopicTest")                       # mqadmin updateTopic -c, then wait for the route
    c.start_client("consumer"); c.start_client("producer")
    c.run_until(lambda: ..., 30_000)                  # e.g. on c.events()

On the simulator the description builds the client component on a node; on the real runtime it
is a `rmqlab producer|consumer` process (a RealCluster node: kill, crash, restart, stop, and its
trace merged into `events()`), so the same code drives either runtime and the trace holds the
same kinds of client operations. A real cluster is given every node before its first process
starts, so there clients are added before `start()`. `add_client(name, factory)` still runs any
component on the simulator.

A classic cluster is one NameServer ("namesrv", listening on 127.0.0.1:9876 on the simulator) and
the brokers of the mode, each configured from its conf/ template exactly as an operator would start
it (`rmqlab broker -c conf/2m-2s-async/broker-a.properties`): only the store directory — and on
the real runtime the ports, which must be free on this machine — are changed. Node names are the
template names: broker-a, broker-a-s, broker-b, broker-b-s.

Controller mode ("主备自动切换模式部署", apache/rocketmq docs/cn/controller/deploy.md; conf/controller/),
broker set broker-a of three replicas broker-n0..n2 (enableControllerMode=true; the controllers
elect the master):

    Cluster("controller-embedded")     name servers namesrv-n0..n2, each also a controller
                                       (enableControllerInNamesrv=true); brokers get -n "all three"
    Cluster("controller-standalone")   one name server "namesrv" and controllers controller-n0..n2
                                       (`rmqlab controller -c conf/controller/controller-n0.conf`)
    Cluster(..., controllers=1 | 3 | 5)  the deploy guide: "a single controller still performs failover";
                                       n3, n4 are written like n0..n2 (next peer ports 9880, 9881)
    Cluster(..., controller_overrides={"enableElectUncleanMaster": True})   every controller

`namesrv_addr` is then the ";" list of the name servers, `controller_addr` the brokers'
controllerAddr list; `master()` names the broker that is master now and `controller_leader()` the
controller serving as leader, both read from the trace (the brokers' and the controllers' `role`
events), so they work the same on either runtime; `master_changes()` lists every election a
broker took part in (time, node, epoch), from which a lab measures failover times.

DLedger CommitLog mode ("Dledger集群搭建", apache/rocketmq docs/cn/dledger/deploy_guide.md; conf/dledger/):
one group RaftNode00 of three replicas broker-n0..n2 (`Cluster("dledger")`, or five with
`Cluster("dledger-5")`) whose commitlog is a DLedger Raft log; the members elect the leader, which
becomes master once its log is committed and dispatched; no controller, no HA service. `master()`
reads the brokers' `role` events (their `epoch` is the DLedger term). On the real runtime each
member also gets a free DLedger peer port, behind the relay, and dLegerPeers names them.

Proxy (RocketMQ's docs/cn/proxy/deploy_guide.md: Local and Cluster mode), for clients of the 5.x
protocol, on either runtime:

    Cluster("2m-noslave", proxy="cluster")   a node "proxy": `rmqlab proxy -n <name servers> -pc
                                       rmq-proxy.json` (conf/rmq-proxy.json); it survives a broker
                                       crash and sends to the brokers that are left
    Cluster("2m-noslave", proxy="local")     every broker runs `rmqlab broker ... --enable-proxy`, on
                                       a host of its own (brokerIP1 = brokerIP2 = bindAddress =
                                       127.0.0.x): a Local-mode route names each broker's host with
                                       the one gRPC port, as if each were a machine of its own; a
                                       broker's crash takes its Proxy down with it
    Cluster(..., proxy_overrides={"topicRouteServiceCacheRefreshSeconds": 1})   rmq-proxy.json keys

`proxy_endpoints` lists the addresses clients dial ("host:port"). On the real runtime the Proxy
serves gRPC (grpcio; proxy="local" needs relay=False, each Proxy on its node's loopback address,
with a free gRPC port); on the simulator, where grpcio cannot open sockets, it serves the same
MessagingService over framed RPC on the simulated streams (rmqlab.proto.framed, a deviation
from RocketMQ), at the template's port 8081, local hosts 127.0.0.2, 127.0.0.3, ... in broker order.

rmqlab's 5.x clients (rmqlab.client.grpc: Producer, SimpleConsumer) are described like the others,
with protocol="grpc"; they connect to `proxy_endpoints` (all of them: the access point), over
framed RPC on the simulator and gRPC on the real runtime (`rmqlab producer --protocol grpc
--endpoints ...`):

    c = Cluster("2m-noslave", proxy="cluster", seed=7)
    c.add_consumer("consumer", topic="TopicTest", group="CG", protocol="grpc", start=False)   # SimpleConsumer
    c.add_producer("producer", topic="TopicTest", interval_ms=50, duration_ms=20_000, protocol="grpc", start=False)
    c.start(); c.create_topic("TopicTest"); c.start_client("consumer"); c.start_client("producer")

Their operations are `send`, `receive` and `ack` client events (rmqlab.client.grpc).

On the real runtime each controller also listens on its peer port + 1000 for Raft (pysyncobj binds
it itself, see rmqlab.controller.impl.raft_controller): the Cluster picks peer ports whose +1000 is
free too. That port is not behind the relay, so link faults (partitions, loss, delay) do not reach
Raft traffic between controllers on the real runtime (they reach everything on the simulator);
process faults (kill, crash, suspend) reach controllers alike on both.

The package, one concept per module:

    modes.py         DeploymentMode: a mode as data (its nodes' roles and conf/ templates); MODES
    deployment.py    Deployment: a mode resolved for one Cluster, and each node's settings
    backend.py       Backend: the interface a Cluster runs a Deployment on
    sim_backend.py   SimBackend, over rmqlab.runtime.sim.Simulation
    real_backend.py  RealBackend, over rmqlab.runtime.real_cluster.RealCluster
    cluster.py       Cluster: what a lab, a workload or a test drives, on either backend
    leader_scan.py   who is master / controller leader now, from the trace

A new mode is a DeploymentMode (in MODES, or given to Cluster as `mode`): both backends run it
unchanged.
"""

from rmqlab.cluster.backend import ADMIN_NODE, Backend, Endpoints
from rmqlab.cluster.cluster import BACKENDS, MASTER_ROLES, Cluster
from rmqlab.cluster.deployment import Deployment
from rmqlab.cluster.modes import (BROKER, CONF_DIR, CONTROLLER, CONTROLLER_COUNTS, EMBEDDED, MODES, NAMESRV, PROXY,
                                  STANDALONE, DeploymentMode, ServerNode, controller_modes)

__all__ = ["ADMIN_NODE", "BACKENDS", "BROKER", "CONF_DIR", "CONTROLLER", "CONTROLLER_COUNTS", "EMBEDDED",
           "MASTER_ROLES", "MODES", "NAMESRV", "PROXY", "STANDALONE", "Backend", "Cluster", "Deployment",
           "DeploymentMode", "Endpoints", "ServerNode", "controller_modes"]
