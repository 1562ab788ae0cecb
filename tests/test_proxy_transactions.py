"""Transactional messages through the 5.x Proxy on the simulator (framed RPC), both Proxy modes,
with rmqlab's 5.x Producer (rmqlab.client.grpc.producer: Transaction, transaction_checker):

* commit: the half message becomes the real one and is delivered once;
* rollback: never delivered;
* unknown (neither end): the broker's check reaches the Proxy (which heartbeats the topic's group
  to the brokers) and goes to the producer as RecoverOrphanedTransactionCommand on its Telemetry
  stream; the checker's COMMIT comes back as EndTransaction with SOURCE_SERVER_CHECK;
* EndTransaction with a blank or an unknown transaction id gets RocketMQ's status;
* SendMessage's orphaned_transaction_recovery_duration and TransactionDataManager's limits.

What RocketMQ does is in rmqlab.proxy.service.transaction_service and
rmqlab.proxy.grpc.v2.end_transaction_activity (RocketMQ's proxy/.../transaction/ classes).
"""

from __future__ import annotations

import collections

import pytest

from rmqlab.checker import check_total_queue
from rmqlab.client.client_process import ClientProcess
from rmqlab.client.grpc import ClientConfiguration, ClientException, Producer
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proxy.grpc.v2.common import GrpcProxyException
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext
from rmqlab.proxy.grpc.v2.send_message_activity import SendMessageActivity
from rmqlab.proxy.service.transaction_service import TransactionDataManager
from rmqlab.trace import client_ops

TOPIC = "ProxyTxTopic"
GROUP = "GID_proxy_tx"
# RocketMQ's keys, shortened so a check comes within seconds (defaults: 30 s / 6 s).
FAST = {"transactionCheckInterval": 2000, "transactionTimeOut": 1000, "transactionOpBatchInterval": 200}


def start(mode: str, root: str, checker) -> tuple[Cluster, Producer]:
    c = Cluster("2m-noslave", seed=11, proxy=mode, root_dir=root, overrides={"*": FAST})
    c.add_consumer("consumer", topic=TOPIC, group=GROUP, protocol="grpc", start=False)
    c.start()
    c.create_topic(TOPIC, message_type="TRANSACTION")
    c.start_client("consumer")
    endpoints = ";".join(c.proxy_endpoints)
    c.add_client("txp", lambda: ClientProcess(producer=Producer(
        ClientConfiguration(endpoints), topics=[TOPIC], transaction_checker=checker)))
    return c, c.sim.components["txp"]["producer"]


def received(c: Cluster) -> dict[str, int]:
    out: dict[str, int] = collections.Counter()
    for op in client_ops(c.events()):
        if op.f == "receive" and op.type == "ok":
            for m in op.value["messages"]:
                out[m["uniq_key"]] += 1
    return out


def half_states(c: Cluster) -> dict[str, list[str]]:
    out = collections.defaultdict(list)
    for e in c.events():
        if e.kind == "state" and e.fields.get("machine") == "TransactionalMessage.half":
            out[e.fields["uniq_key"]].append(e.fields["to"])
    return out


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_commit_delivered_rollback_never_unknown_resolved_by_the_check(mode, tmp_path):
    checks: list[str] = []

    def checker(view):
        checks.append(view.message_id)
        return pb.COMMIT

    c, p = start(mode, str(tmp_path), checker)
    try:
        ids = {}
        for name, end in (("commit", "commit"), ("rollback", "rollback"), ("unknown", None)):
            tx = p.begin_transaction()
            receipt = c.sim.run(tx.send(Message(TOPIC, name.encode())))
            assert receipt.transaction_id, "the Proxy answers the broker's transaction id"
            ids[name] = receipt.message_id
            if end is not None:
                c.sim.run(getattr(tx, end)())
        c.run_for(50_000)  # a check within transactionTimeOut + transactionCheckInterval; receive rounds
        got = received(c)
        assert got[ids["commit"]] == 1
        assert got[ids["unknown"]] == 1, "resolved by the check, delivered once"
        assert ids["rollback"] not in got
        # Only the unknown one was checked; its COMMIT came from the check, the others from the client.
        assert set(checks) == {ids["unknown"]}
        states = half_states(c)
        assert states[ids["commit"]] == ["COMMITTED"] and states[ids["rollback"]] == ["ROLLED_BACK"]
        assert states[ids["unknown"]][0] == "CHECKING" and states[ids["unknown"]][-1] == "COMMITTED"
        ended = [e for e in c.events() if e.kind == "state" and e.fields.get("machine") == "TransactionalMessage.half"
                 and e.fields["uniq_key"] == ids["unknown"] and e.fields["to"] == "COMMITTED"]
        assert [e.fields.get("from_transaction_check") for e in ended] == [True]
        # The client's trace says the same as TransactionMQProducer's would: a transaction each (not a
        # send: the half messages are not delivered as such), decided by the client or by its check.
        ops = {op.invoke_value["uniq_key"]: op for op in client_ops(c.events()) if op.f == "transaction"}
        assert {k: (op.type, (op.value or {}).get("local_transaction_state")) for k, op in ops.items()} == {
            ids["commit"]: ("ok", "COMMIT_MESSAGE"), ids["rollback"]: ("ok", "ROLLBACK_MESSAGE"),
            ids["unknown"]: ("info", None)}
        assert [op.value["local_transaction_state"] for op in client_ops(c.events())
                if op.f == "transaction_check" and op.type == "ok"] == ["COMMIT_MESSAGE"]
        r = check_total_queue(c.events(), topic=TOPIC)
        assert r.valid, r.violations
        assert (r.stats["acknowledged"], r.stats["rolled_back"], r.stats["read"]) == (2, 1, 2)
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_unknown_answer_sends_nothing_and_the_broker_checks_again(mode, tmp_path):
    checks: list[str] = []

    def checker(view):
        checks.append(view.message_id)
        return pb.ROLLBACK if len(checks) >= 3 else pb.TRANSACTION_RESOLUTION_UNSPECIFIED

    c, p = start(mode, str(tmp_path), checker)
    try:
        tx = p.begin_transaction()
        receipt = c.sim.run(tx.send(Message(TOPIC, b"ask-me-thrice")))
        c.run_for(30_000)
        assert checks[:3] == [receipt.message_id] * 3 and len(checks) == 3
        assert half_states(c)[receipt.message_id][-1] == "ROLLED_BACK"
        assert receipt.message_id not in received(c)
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_a_producer_killed_after_its_half_message_is_resolved_through_another_producer_of_the_topic(mode, tmp_path):
    """The Proxy forgets the dead producer's channel when its Telemetry stream ends and relays the
    broker's check to the other producer of the group (= the topic)."""
    dead_checks: list[str] = []
    c, p = start(mode, str(tmp_path), lambda view: dead_checks.append(view.message_id) or pb.COMMIT)
    try:
        other_checks: list[str] = []
        endpoints = ";".join(c.proxy_endpoints)
        c.add_client("txp2", lambda: ClientProcess(producer=Producer(
            ClientConfiguration(endpoints), topics=[TOPIC],
            transaction_checker=lambda view: other_checks.append(view.message_id) or pb.COMMIT)))
        tx = p.begin_transaction()
        receipt = c.sim.run(tx.send(Message(TOPIC, b"orphan")))
        c.sim.nemesis.kill("txp")  # before transactionTimeOut: no check has been sent yet
        c.run_for(50_000)
        assert dead_checks == [] and receipt.message_id in other_checks
        assert received(c)[receipt.message_id] == 1
        proxies = [c.sim.components[n] for n in (["proxy"] if mode == "cluster" else ["broker-a", "broker-b"])]
        for proxy in proxies:
            channels = proxy.transactions.producer_channels.get(TOPIC, {})
            assert all(cid.startswith("txp2@") for cid in channels), channels
    finally:
        c.close()


def test_orphaned_transaction_recovery_duration_delays_the_first_check(tmp_path):
    """The client's recovery duration reaches the broker as CHECK_IMMUNITY_TIME_IN_SECONDS: no check
    before it has passed (without it: transactionTimeOut, 1 s here)."""
    c, p = start("cluster", str(tmp_path), lambda view: pb.COMMIT)
    try:
        plain, immune = p.begin_transaction(), p.begin_transaction()
        sent_at = c.sim.now_ms()
        plain_id = c.sim.run(plain.send(Message(TOPIC, b"plain"))).message_id
        msg = Message(TOPIC, b"immune")
        msg.put_property("CHECK_IMMUNITY_TIME_IN_SECONDS", "7")
        immune_id = c.sim.run(immune.send(msg)).message_id
        c.run_for(20_000)
        first_check = {}
        for e in c.events():
            if e.kind == "state" and e.fields.get("machine") == "TransactionalMessage.half" \
                    and e.fields["to"] == "CHECKING":
                first_check.setdefault(e.fields["uniq_key"], e.time_ms)
        assert first_check[plain_id] - sent_at < 7_000 <= first_check[immune_id] - sent_at, (sent_at, first_check)
        assert half_states(c)[immune_id][-1] == "COMMITTED"
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_bad_end_transaction_gets_rocketmqs_status(mode, tmp_path):
    c, p = start(mode, str(tmp_path), lambda view: pb.COMMIT)
    try:
        endpoint = c.proxy_endpoints[0]
        with pytest.raises(ClientException) as e:
            c.sim.run(p.end_transaction(endpoint, TOPIC, "01AB", "  ", pb.COMMIT, pb.SOURCE_CLIENT))
        assert e.value.code == pb.INVALID_TRANSACTION_ID
        with pytest.raises(ClientException) as e:
            c.sim.run(p.end_transaction(endpoint, TOPIC, "01AB", "no-such-transaction", pb.COMMIT,
                                        pb.SOURCE_CLIENT))
        assert e.value.code == pb.INTERNAL_SERVER_ERROR and e.value.message == "cannot found transaction data"
        # The same transaction ended twice: the first end takes the Proxy's data.
        tx = p.begin_transaction()
        c.sim.run(tx.send(Message(TOPIC, b"once")))
        c.sim.run(tx.commit())
        with pytest.raises(ClientException) as e:
            c.sim.run(tx.rollback())
        assert e.value.code == pb.INTERNAL_SERVER_ERROR
    finally:
        c.close()


# -- units -------------------------------------------------------------------------------------------
class _Clock:
    def __init__(self):
        self.t = 1_700_000_000_000

    def now_ms(self):
        return self.t


def _tx_message(**system) -> pb.Message:
    return pb.Message(topic=pb.Resource(name="T"), body=b"hello",
                      system_properties=pb.SystemProperties(message_id="01ABC", message_type=pb.TRANSACTION, **system))


def test_send_maps_the_recovery_duration_to_check_immunity_and_refuses_over_an_hour():
    activity = SendMessageActivity(_Clock(), ProxyConfig())
    m = _tx_message()
    m.system_properties.orphaned_transaction_recovery_duration.FromSeconds(3600)
    p = activity.build_message(ProxyContext(), m, "T").properties
    assert (p["TRAN_MSG"], p["CHECK_IMMUNITY_TIME_IN_SECONDS"], p["PGROUP"]) == ("true", "3600", "T")
    assert "CHECK_IMMUNITY_TIME_IN_SECONDS" not in activity.build_message(ProxyContext(), _tx_message(), "T").properties
    m.system_properties.orphaned_transaction_recovery_duration.FromSeconds(3601)
    with pytest.raises(GrpcProxyException) as e:
        activity.build_message(ProxyContext(), m, "T")
    assert e.value.code == pb.BAD_REQUEST


def test_transaction_data_manager_keeps_15_per_key_for_30_s_and_gives_the_newest():
    clock = _Clock()
    m = TransactionDataManager(clock.now_ms)
    for i in range(20):
        clock.t += 1
        m.add_transaction_data("T", "broker-a", "T", i, 1000 + i, "tx")
    assert len(m.data["T@tx"]) == 15 and m.data["T@tx"][0].tran_state_table_offset == 5
    newest = m.poll_no_expire_transaction_data("T", "tx")
    assert (newest.tran_state_table_offset, newest.commit_log_offset) == (19, 1019)
    clock.t += 30_000 - 5  # entries 5..13 are expired now, 14..18 not yet
    assert m.poll_no_expire_transaction_data("T", "tx").tran_state_table_offset == 18
    clock.t += 100
    assert m.poll_no_expire_transaction_data("T", "tx") is None
    assert "T@tx" not in m.data
    assert m.poll_no_expire_transaction_data("T", "other") is None


def test_controller_mode_master_failover_between_half_message_and_check_through_the_proxy(tmp_path):
    """Controller mode, a Cluster-mode Proxy: the master dies after two half messages reached the
    replicas and before any check. The new master runs the check service; the Proxy's next
    heartbeat (every 20 s, to the masters of the topic's route) makes it the channel of the group
    there, and the checks come through it to the producer: the committed one written once to the
    real topic on the new master, the rolled-back one never."""
    from tests.controller_mode_helpers import ALL_IDS, fail_over, rm, sync_state_set

    # transactionTimeOut 3 s: the old master cannot check before it dies; checks do not run out
    # while the Proxy learns the new master (route refresh, then heartbeat).
    c = Cluster("controller-standalone", seed=5, proxy="cluster", root_dir=str(tmp_path),
                overrides={"*": {**FAST, "transactionTimeOut": 3000, "transactionCheckMax": 1000}})
    answers: dict[str, int] = {}
    checks: list[str] = []
    try:
        c.start(60_000)
        c.create_topic(TOPIC, message_type="TRANSACTION")
        c.run_until(lambda: sync_state_set(c) == ALL_IDS, 60_000)  # every replica can take over
        endpoints = ";".join(c.proxy_endpoints)
        c.add_client("txp", lambda: ClientProcess(producer=Producer(
            ClientConfiguration(endpoints), topics=[TOPIC],
            transaction_checker=lambda view: checks.append(view.message_id) or answers[view.message_id])))
        p = c.sim.components["txp"]["producer"]
        commit_id = c.sim.run(p.begin_transaction().send(Message(TOPIC, b"commit-me"))).message_id
        rollback_id = c.sim.run(p.begin_transaction().send(Message(TOPIC, b"roll-me-back"))).message_id
        answers[commit_id], answers[rollback_id] = pb.COMMIT, pb.ROLLBACK
        c.run_for(300)  # replicated; a check waits transactionTimeOut (3 s)
        old, new, _ = fail_over(c, lambda name: c.sim.nemesis.kill(name))
        c.run_for(90_000)
        assert commit_id in checks and rollback_id in checks
        store = c.components[new].message_store

        def copies(uniq):
            return [m for q in range(8) for m in store.get_message("r", TOPIC, q, 0, 1000).messages()
                    if m.properties.get("UNIQ_KEY") == uniq]

        assert len(copies(commit_id)) == 1 and copies(rollback_id) == []
        ended = {e.fields["uniq_key"]: (e.node, e.fields["to"]) for e in c.events() if e.kind == "state"
                 and e.fields.get("machine") == "TransactionalMessage.half" and e.fields["to"] != "CHECKING"}
        assert ended == {commit_id: (new, "COMMITTED"), rollback_id: (new, "ROLLED_BACK")}
        assert rm(c, new).master_epoch > 1 and old != new
    finally:
        c.close()
