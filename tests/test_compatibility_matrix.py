"""The compatibility table of controller mode (RocketMQ's docs/en/controller/deploy.md "Compatibility",
docs/cn/controller/deploy.md "兼容性"), cell by cell, on the simulator.

    |                                   | old NS        | old NS + standalone | new NS, controller | new NS, controller |
    |                                   |               | controller          | enabled            | disabled           |
    | old broker                        | runs, no failover (every column)                                            |
    | new broker, controller mode       | cannot go     | runs, can fail over | runs, can fail over| cannot go online   |
    |                                   | online        |                     |                    |                    |
    | new broker, controller mode off   | runs, no failover (every column)                                            |

How rmqlab represents each (it has one version; "old" is what an old version's configuration says):

* old broker: a classic master and slave (conf/2m-2s-async templates) with no controller key at
  all (controllerAddr empty). An old broker ignores the controller keys it does not know, so this
  row and "controller mode off" run the same code in rmqlab; they differ in their files only.
* new broker, controller mode: the same two brokers with enableControllerMode=true and
  controllerAddr (the controllers' peer address, 127.0.0.1:9877 in every column, where an operator
  would put them; in the first and last columns nothing listens there).
* new broker, controller mode off: enableControllerMode=false with controllerAddr set.
* old NS: `rmqlab namesrv` with the defaults. Old NS + standalone controller: the same, beside
  `rmqlab controller -c conf/controller/controller-n0.conf`. New NS, controller enabled:
  conf/controller/namesrv-n0.conf (enableControllerInNamesrv=true). New NS, controller disabled:
  the same file with enableControllerInNamesrv=false (the controller keys stay, unused).

The three rows run side by side in one cluster per column (groups broker-old, broker-ctrl,
broker-off, a master and a slave each), so the table costs four short simulations. Each group is
"running" when every name server routes its master (brokerId 0) and a send to its queue is
acknowledged; its master is then SIGKILLed and the group "can fail over" when another of its
brokers becomes master, the name server routes it, and a fresh producer's send to the group is
acknowledged again.

"Cannot go online": the controller-mode broker's ReplicasManager cannot reach a controller
(ReplicasManager.startBasicService fails at its first step, "Failed to init controller metadata",
and is retried every 5 s); until it succeeds the broker is isolated (BrokerController: "Skip
register for broker is isolated"): no name server ever registers the group, and its store is a
SLAVE's, which takes no writes. RocketMQ agrees: BrokerController.recoverAndInitService builds
the ReplicasManager fenced (setFenced(true): isolated, the store's running flags fenced), and only
ReplicasManager.startBasicService reaching RUNNING unfences it; ReplicasManager.start retries it
every 5 s. The broker process runs, but it is never routed. The name server of the last column
warns at start that its controller keys have no effect (a ConfigWarning).

Also: brokers registering without enableSlaveActingMaster in an acting-master deployment (RIP-32,
conf/acting-master/): the name server rewrites the route of a group whose master is gone only for
brokers that registered with enableActingMaster (RouteInfoManager.pickupTopicRouteData); a group
that did not keeps no brokerId 0 in its route, so nobody takes its master's place.
"""

from __future__ import annotations

import warnings

import logging

import pytest

from rmqlab.client import ClientProcess, DefaultMQProducer
from rmqlab.cluster import EMBEDDED, STANDALONE, Cluster, DeploymentMode
from rmqlab.common.message.message import Message
from rmqlab.config.errors import ConfigWarning
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.common.topic_config import TopicConfig
from rmqlab.config.broker import BrokerRole
from tests.sim_helpers import track

TOPIC = "CompatTopic"
CONTROLLER_ADDR = "127.0.0.1:9877"   # where the controller is, or would be: controller n0's peer address
ROWS = ("old", "ctrl", "off")
ROW_NAMES = {"old": "old broker", "ctrl": "new broker, controller mode", "off": "new broker, controller mode off"}
COLUMNS = ("old-ns", "old-ns+standalone", "new-ns-enabled", "new-ns-disabled")
RUNS, FAILS_OVER, OFFLINE = "runs, cannot fail over", "runs, can fail over", "cannot go online"
# The docs' table.
EXPECTED = {
    "old": dict.fromkeys(COLUMNS, RUNS),
    "ctrl": {"old-ns": OFFLINE, "old-ns+standalone": FAILS_OVER, "new-ns-enabled": FAILS_OVER,
             "new-ns-disabled": OFFLINE},
    "off": dict.fromkeys(COLUMNS, RUNS),
}
ROW_SETTINGS = {
    "old": {"controllerAddr": ""},
    "ctrl": {"enableControllerMode": True, "controllerAddr": CONTROLLER_ADDR},
    "off": {"enableControllerMode": False, "controllerAddr": CONTROLLER_ADDR},
}


def group(row: str) -> str:
    return f"broker-{row}"


def members(row: str) -> tuple[str, str]:
    return f"{row}-m", f"{row}-s"


def _mode(column: str) -> DeploymentMode:
    brokers, settings = {}, {}
    for i, row in enumerate(ROWS):
        master, slave = members(row)
        brokers[master] = "2m-2s-async/broker-a.properties"
        brokers[slave] = "2m-2s-async/broker-a-s.properties"
        for j, node in enumerate((master, slave)):
            port = 20911 + 100 * i + 20 * j   # three groups from one pair of templates: ports of their own
            settings[node] = {"brokerName": group(row), "listenPort": port, "haListenPort": port + 1,
                              **ROW_SETTINGS[row]}
    controllers = {"old-ns": None, "old-ns+standalone": STANDALONE}.get(column, EMBEDDED)
    return DeploymentMode(f"compat-{column}", brokers, controllers=controllers, broker_settings=settings)


def _routed_master(c: Cluster, row: str) -> str | None:
    """The address every name server routes as the group's brokerId 0 (None: not all, or none)."""
    addrs = set()
    for ns in c.namesrvs:
        data = c.components[ns].route_info_manager.broker_addr_table.get(group(row))
        addrs.add(data.broker_addrs.get(0) if data else None)
    return addrs.pop() if len(addrs) == 1 else None


def _addr(c: Cluster, node: str) -> str:
    return f"127.0.0.1:{c.components[node].netty_server_config.listenPort}"


def _send(c: Cluster, client: str, row: str) -> bool:
    """A fresh producer (its own route) sends one message to the group's queue 0."""
    c.add_client(client, lambda: ClientProcess(producer=DefaultMQProducer("CompatPG", c.namesrv_addr)), start=False)
    c.start_client(client)
    producer = c.sim.components[client]["producer"]

    async def go() -> bool:
        try:
            await producer.send(Message(TOPIC, b"x"), MessageQueue(TOPIC, group(row), 0))
            return True
        except Exception:
            return False

    return c.sim.run(go())


def _sync_state_set(c: Cluster, row: str) -> set[int]:
    master = c.master(group(row))
    return set(c.components[master].replicas_manager.sync_state_set) if master else set()


class _Messages(logging.Handler):
    """The broker log's messages (ReplicasManager logs through the "rmqlab.broker" logger)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run_column(column: str) -> dict[str, dict]:
    """Every row's outcome in this column: `outcome` (one of the table's three) and the evidence."""
    mode = _mode(column)
    broker_log = logging.getLogger("rmqlab.broker")
    messages = _Messages()
    broker_log.addHandler(messages)
    try:
        return _run_column(column, mode, messages)
    finally:
        broker_log.removeHandler(messages)


def _run_column(column: str, mode: DeploymentMode, messages: _Messages) -> dict[str, dict]:
    overrides = {"enableControllerInNamesrv": False} if column == "new-ns-disabled" else None
    c = track(Cluster(mode, seed=3, controllers=1 if mode.controllers else 3, controller_overrides=overrides))
    with warnings.catch_warnings():
        # "new NS, controller disabled": the controller keys left in the file are loaded with a
        # warning that they have no effect, which is this column's point.
        warnings.filterwarnings("ignore", ".* is a ControllerConfig setting; it has no effect", ConfigWarning)
        c.backend.start_servers([n.name for n in c.deployment.nodes])
    online_expected = [r for r in ROWS if EXPECTED[r][column] != OFFLINE]
    c.run_until(lambda: all(_routed_master(c, r) for r in online_expected), 30_000, 100)
    if "ctrl" in online_expected:  # only a SyncStateSet member can be elected: wait for the slave to join
        c.run_until(lambda: len(_sync_state_set(c, "ctrl")) == 2, 30_000, 100)
    c.run_for(3_000)  # let a group that cannot come online try (and retry) as long as the others took

    async def create(admin, now_ms) -> None:
        await admin.create_and_update_topic_config_by_cluster("DefaultCluster", TopicConfig(TOPIC, 4, 4))

    c.admin(create)
    c.run_for(1_000)
    out: dict[str, dict] = {}
    masters = {}
    for row in ROWS:
        routed = _routed_master(c, row)
        ok = routed is not None and _send(c, f"before-{row}", row)
        master = next((n for n in members(row) if routed == _addr(c, n)), None)
        out[row] = {"online": routed is not None, "send_before": ok, "master": master}
        masters[row] = master
    for master in masters.values():
        if master is not None:
            c.nemesis.kill(master)
    c.run_for(20_000)  # the controller's broker heartbeat timeout is 10 s; its scan, 5 s
    for row in ROWS:
        o, master = out[row], masters[row]
        if not o["online"]:
            ctrl_broker = members(row)[0]
            o["registered_ever"] = any(e.kind == "namesrv.broker_register"
                                       and e.fields.get("broker_set") == group(row) for e in c.events())
            o["isolated"] = c.components[ctrl_broker].is_isolated
            o["role"] = c.components[ctrl_broker].message_store_config.brokerRole
            o["rm_state"] = c.components[ctrl_broker].replicas_manager.state.value
            o["state_events"] = [e for e in c.events() if e.node == ctrl_broker and e.kind == "state"]
            o["no_controller_log"] = [m for m in messages.messages
                                      if m.startswith("Failed to init controller metadata")]
            o["outcome"] = OFFLINE
            continue
        other = next(n for n in members(row) if n != master)
        new_routed = _routed_master(c, row)
        o["new_master"] = c.master(group(row))
        o["routed_after"] = new_routed
        o["send_after"] = _send(c, f"after-{row}", row)
        failed_over = o["new_master"] == other and new_routed == _addr(c, other) and o["send_after"]
        o["slave_role_after"] = c.components[other].message_store_config.brokerRole
        o["outcome"] = FAILS_OVER if failed_over else RUNS
    c.close()
    return out


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, dict]]:
    return {column: run_column(column) for column in COLUMNS}


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("column", COLUMNS)
def test_cell(table, row, column):
    cell = table[column][row]
    assert cell["outcome"] == EXPECTED[row][column], (ROW_NAMES[row], column, cell)
    if cell["outcome"] == OFFLINE:
        # How it fails to come online: no controller answers, the broker stays isolated and is
        # never registered, its store a SLAVE's.
        assert not cell["registered_ever"] and cell["isolated"] and cell["role"] == BrokerRole.SLAVE, cell
        assert cell["rm_state"] == "INITIAL" and not cell["state_events"] and cell["no_controller_log"], cell
        return
    assert cell["send_before"], cell
    if cell["outcome"] == RUNS:
        # The master's death leaves the group without one: its slave stays a slave, no name
        # server routes a brokerId 0, sends to the group fail.
        assert cell["new_master"] is None and cell["routed_after"] is None and not cell["send_after"], cell
        assert cell["slave_role_after"] == BrokerRole.SLAVE


def test_the_rows_differ_only_where_the_docs_say(table):
    """The table as a whole: only the controller-mode row changes from column to column."""
    got = {row: {column: table[column][row]["outcome"] for column in COLUMNS} for row in ROWS}
    assert got == EXPECTED


def test_a_group_registering_without_enable_acting_master_gets_no_acting_master():
    """conf/acting-master (supportActingMaster=true on the name server), group broker-b started
    with enableSlaveActingMaster=false: each registration carries the broker's flag, and the name
    server keeps it per group (RouteInfoManager.registerBroker; an old broker that sends no flag
    counts as false). With both masters killed, the route shows broker-a's smallest-id slave as a
    read-only brokerId 0 and nothing for broker-b: its readers and its special services (delayed
    messages, transaction checks) wait for the master."""
    off = {"enableSlaveActingMaster": False}
    c = track(Cluster("acting-master", seed=3, overrides={n: off for n in ("broker-b", "broker-b-s1", "broker-b-s2")}))
    c.start(30_000)
    c.create_topic(TOPIC)
    ns = c.components["namesrv"].route_info_manager
    assert {bd.broker_name: bd.enable_acting_master for bd in ns.broker_addr_table.values()} == \
        {"broker-a": True, "broker-b": False}
    c.nemesis.kill("broker-a")
    c.nemesis.kill("broker-b")
    c.run_for(5_000)
    route = ns.pickup_topic_route_data(TOPIC)
    ids = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
    perms = {qd.broker_name: qd.perm for qd in route.queue_datas}
    assert ids["broker-a"].get(0) == _addr(c, "broker-a-s1") and perms["broker-a"] == 4, (ids, perms)
    assert 0 not in ids["broker-b"], ids
