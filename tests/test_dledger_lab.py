"""DLedger CommitLog mode where students meet it: the live fault panel, the catalog workloads'
invariants (no acknowledged loss while a majority's disks survive, the members' logs identical up
to the commit index) and lab 01's reading of which member was master."""

from __future__ import annotations

import os
import struct

import pytest

from rmqlab.checker.checkers import check_dledger_replicas
from rmqlab.checker.schedule import MASTER, FaultOp
from rmqlab.demo import mode_comparison as mc
from rmqlab.dledger.entry import dledger_entry_coder as coder
from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.trace import TraceEvent, client_ops
from rmqlab.workload.catalog import CATALOG
from rmqlab.workload.outcome import promises_no_loss
from rmqlab.workload.spec import schedule_of

FILE = "0" * 20  # the first mapped file of a list: named by its start offset


# --- the live panel ----------------------------------------------------------------------------------------------
def test_the_fault_panel_crashes_restarts_and_partitions_dledger_members():
    from rmqlab.viz.controls import FaultPanel

    live = mc.start_live("dledger", seed=3)
    try:
        panel = FaultPanel(live, nodes=[*live.brokers, *live.namesrvs])
        leader = live.master()
        assert leader is not None
        # The display shows each member's DLedger role beside its broker role.
        assert f"<b>{leader}</b></td><td>SYNC_MASTER · DLedger LEADER, term 1" in panel.roles.value
        followers = [b for b in live.brokers if b != leader]
        assert all(f"<b>{b}</b></td><td>SLAVE · DLedger FOLLOWER, term 1" in panel.roles.value for b in followers)

        t_crash = live.now_ms()
        assert panel.act("crash", leader)
        assert f"<b>{leader}</b></td><td>down: crash (was SYNC_MASTER)" in panel.roles.value
        panel.run(10_000)  # the followers miss 3 heartbeats (6 s), elect a leader; it applies its log
        new = live.master()
        assert new in followers
        assert f"<b>{new}</b></td><td>SYNC_MASTER · DLedger LEADER, term 2" in panel.roles.value
        acked = [op for op in client_ops(live.events()) if op.node == mc.PRODUCER and op.f == "send"
                 and op.type == "ok" and op.invoke_time_ms > t_crash + 8_000]
        assert acked, "the workload's producer writes to the new master"

        assert panel.act("restart", leader)
        panel.run(4_000)
        assert f"<b>{leader}</b></td><td>SLAVE · DLedger FOLLOWER, term 2" in panel.roles.value

        other = next(b for b in followers if b != new)
        assert panel.act("partition", new)  # the leader cut off: the two others elect one of them
        panel.run(10_000)
        assert live.master() in (leader, other)
        assert panel.act("heal")
        panel.run(4_000)
        assert "DLedger LEADER, term 3" in panel.roles.value and "refused" not in panel.status.value
        assert not panel.act("restart", other)  # running: refused, shown, not raised
        assert "refused" in panel.status.value
    finally:
        live.close()


# --- the catalog's invariants in DLedger mode ---------------------------------------------------------------------
def _write_member(root, self_id: str, bodies: list[bytes]) -> None:
    """A DLedger member's files as DLedgerMmapFileStore lays them out: entries back to back in
    data/, a 32-byte index unit per entry in index/."""
    data, index = bytearray(), bytearray()
    for i, body in enumerate(bodies):
        entry = DLedgerEntry(index=i, term=1, pos=len(data), body=body)
        raw = coder.encode(entry)
        index += coder.encode_index(len(data), len(raw), entry.magic, i, 1)
        data += raw
    for sub, content in (("data", data), ("index", index)):
        os.makedirs(root / f"dledger-{self_id}" / sub)
        (root / f"dledger-{self_id}" / sub / FILE).write_bytes(bytes(content) + bytes(64))  # a zero tail


def _events(commit_index: int) -> list[TraceEvent]:
    roles = [TraceEvent(i, 1.0, f"broker-n{i}", "dledger.role",
                        {"group": "g", "self_id": f"n{i}", "role": "FOLLOWER", "term": 1, "leader": "n0",
                         "ledger_end_index": -1, "ledger_end_term": -1}) for i in range(3)]
    return roles + [TraceEvent(3, 2.0, "broker-n0", "dledger.commit",
                               {"group": "g", "self_id": "n0", "term": 1, "commit_index": commit_index,
                                "previous": -1, "acked": 1, "ledger_end_index": commit_index})]


def test_dledger_replicas_are_compared_entry_by_entry_up_to_the_commit_index(tmp_path):
    bodies = [b"m-%d" % i for i in range(5)]
    stores = {}
    for i, log in enumerate([bodies, bodies[:3] + [b"other", b"m-4"], bodies[:2]]):
        stores[f"broker-n{i}"] = str(tmp_path / f"s{i}")
        _write_member(tmp_path / f"s{i}", f"n{i}", log)
    # Up to index 2: broker-n2 holds only 0..1; the others agree.
    r = check_dledger_replicas(_events(2), stores)
    assert [(v.what, v.node) for v in r.violations] == [("short-replica", "broker-n2")]
    assert r.stats["g"]["committed_index"] == 2
    # Up to index 4: broker-n1's entry 3 differs from broker-n0's.
    r = check_dledger_replicas(_events(4), stores)
    assert sorted((v.what, v.node, v.details.get("index")) for v in r.violations) == \
        [("entries-diverged", "broker-n1", 3), ("short-replica", "broker-n2", None)]
    # Entries above the commit index may differ (an uncommitted tail, truncated by the next leader).
    del stores["broker-n2"]
    assert check_dledger_replicas(_events(2), stores).valid


def test_a_corrupt_index_unit_ends_a_members_log(tmp_path):
    _write_member(tmp_path / "s0", "n0", [b"a", b"b"])
    _write_member(tmp_path / "s1", "n1", [b"a", b"b"])
    unit = tmp_path / "s1" / "dledger-n1" / "index" / FILE
    raw = bytearray(unit.read_bytes())
    struct.pack_into(">q", raw, 32 + 20, 7)  # unit 1 names index 7
    unit.write_bytes(bytes(raw))
    r = check_dledger_replicas(_events(1)[:2] + _events(1)[3:], {"broker-n0": str(tmp_path / "s0"),
                                                                   "broker-n1": str(tmp_path / "s1")})
    assert [(v.what, v.node) for v in r.violations] == [("short-replica", "broker-n1")]


@pytest.mark.parametrize("crashed, promised", [
    ((), True), (("broker-n1",), True), ((MASTER,), True),
    (("broker-n1", "broker-n2"), False),   # a majority loses power: what it had not flushed may be gone
    ((MASTER, "broker-n2"), False),        # "@master" may be another member
])
def test_dledger_mode_promises_no_acknowledged_loss_unless_a_majority_loses_power(crashed, promised):
    w = CATALOG["dledger-kill-leader"]
    ops = [FaultOp(1_000.0 + i, "crash", node, {}, i) for i, node in enumerate(crashed)]
    ops += [FaultOp(5_000.0 + i, "restart", node, {}, i) for i, node in enumerate(crashed)]
    from dataclasses import replace

    assert promises_no_loss(replace(w, faults=schedule_of(ops))) is promised


def test_the_dledger_workloads_are_judged_by_every_invariant_that_applies_to_them():
    from pathlib import Path

    from rmqlab.workload import read_header

    root = Path(__file__).resolve().parent.parent / "datasets" / "workloads"
    names = [n for n, w in CATALOG.items() if w.mode == "dledger"]
    assert sorted(names) == ["dledger-crash-follower", "dledger-kill-leader", "dledger-partition-leader",
                             "dledger-two-down"]
    for name in names:
        o = read_header(root / f"{name}.parquet").outcome
        applies = {k for k, v in o["invariants"].items() if v["applies"]}
        assert applies == {"single-master", "no-acknowledged-loss", "replicas-identical"}, name
        assert all(v["holds"] for v in o["invariants"].values()), name
        assert o["lost"] == 0 and o["acknowledged"] > 0, name


# --- lab 01: the master role follows the Raft role ----------------------------------------------------------------
def _role(seq, t, node, to, epoch):
    return TraceEvent(seq, t, node, "role", {"from": "SLAVE", "to": to, "component": "broker", "epoch": epoch})


def _raft(seq, t, node, role, term):
    return TraceEvent(seq, t, node, "dledger.role", {"group": "g", "self_id": node[-2:], "role": role, "term": term,
                                                     "leader": None, "ledger_end_index": -1, "ledger_end_term": -1})


def test_masters_not_raft_leader_counts_a_master_role_without_the_leadership_of_its_term():
    ok = [_raft(0, 1, "broker-n0", "LEADER", 1), _role(1, 2, "broker-n0", "SYNC_MASTER", 1)]
    assert mc.masters_not_raft_leader(ok) == 0
    stale = ok + [_raft(2, 3, "broker-n0", "CANDIDATE", 2), _role(3, 4, "broker-n0", "SYNC_MASTER", 2),
                  _raft(4, 5, "broker-n1", "LEADER", 1), _role(5, 6, "broker-n1", "SYNC_MASTER", 2)]
    assert mc.masters_not_raft_leader(stale) == 2
    # A member restarted: the leadership of its earlier life does not count.
    restarted = ok + [TraceEvent(2, 3, "broker-n0", "node.crash", {}), TraceEvent(3, 4, "broker-n0", "node.start", {}),
                      _role(4, 5, "broker-n0", "SYNC_MASTER", 1)]
    assert mc.masters_not_raft_leader(restarted) == 1
    assert mc.masters_not_raft_leader([_role(0, 1, "broker-a", "SYNC_MASTER", 0)]) is None
