"""DLedger groups of 3 and 5 members on the simulator: election, quorum-acknowledged appends,
failover, a partitioned leader's append, a majority down, leadership transfer, determinism."""

from __future__ import annotations

import pytest

from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.dledger_member import DLedgerMember
from rmqlab.dledger.protocol.dledger_request_code import DLedgerRequestCode
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode as Code
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash

BASE_PORT = 20911
# DLedger's defaults: a follower gives up on its leader after maxHeartBeatLeak * heartBeatTimeIntervalMs;
# a candidate's vote round waits at most 2000 + maxVoteIntervalMs, then 300..1000 ms before the next.
LEAK_MS = 3 * 2000
VOTE_ROUND_MS = 2000 + 1000
VOTE_DELAY_MS = 1000


class RecordingHandler:
    """A RoleChangeHandler that records (term, role) per call."""

    def __init__(self):
        self.calls: list[tuple[int, str]] = []

    def handle(self, term: int, role) -> None:
        self.calls.append((term, role.name))

    def startup(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def build(seed: int, n: int, root, **config) -> tuple[Simulation, list[str]]:
    sim = Simulation(seed=seed, root_dir=str(root))
    names = [f"n{i}" for i in range(n)]
    peers = ";".join(f"{name}-127.0.0.1:{BASE_PORT + i}" for i, name in enumerate(names))
    for name in names:
        sim.add_node(name, lambda name=name: DLedgerMember(DLedgerConfig(group="g0", self_id=name, peers=peers,
                                                                         **config)))
    sim.start_all()
    return sim, names


def member(sim, name) -> DLedgerMember:
    return sim.components[name]


def leader(sim, names) -> str | None:
    """The member every running member of `names` follows, when they agree and it leads."""
    alive = [n for n in names if sim.nodes[n].alive]
    leaders = [n for n in alive if member(sim, n).server.member_state.is_leader()]
    if len(leaders) != 1:
        return None
    if any(member(sim, n).server.member_state.leader_id != leaders[0] for n in alive):
        return None
    return leaders[0]


def elect(sim, names, timeout_ms=30_000) -> str:
    sim.run_until(lambda: leader(sim, names), timeout_ms=timeout_ms, poll_ms=5)
    return leader(sim, names)


def term(sim, name) -> int:
    return member(sim, name).server.member_state.curr_term


def ends(sim, names) -> dict[str, int]:
    return {n: member(sim, n).server.dledger_store.get_ledger_end_index() for n in names if sim.nodes[n].alive}


def append_watched(sim, name, body: bytes, names):
    """Append on `name`; when the answer comes, record how many members hold the entry then."""
    future = member(sim, name).append_future(body)
    seen = {}

    def on_done(f):
        response = f.result()
        seen["response"] = response
        seen["holders"] = sum(1 for n in names if sim.nodes[n].alive
                              and member(sim, n).server.dledger_store.get_ledger_end_index() >= response.index)
        seen["at"] = sim.now_ms()

    future.add_done_callback(on_done)
    return future, seen


def append(sim, name, body: bytes, timeout_ms: float = 10_000):
    """Append on `name` and wait (in virtual time, bounded) for the answer."""
    future = member(sim, name).append_future(body)
    sim.run_until(future.done, timeout_ms=timeout_ms, poll_ms=5)
    return future.result()


def body_at(sim, name, index) -> bytes | None:
    store = member(sim, name).server.dledger_store
    if store.get_ledger_end_index() < index:
        return None
    return store.get(index).body


@pytest.mark.parametrize("n", [3, 5])
def test_a_leader_is_elected_and_appends_are_acked_only_once_a_majority_stores_them(tmp_path, n):
    sim, names = build(seed=1, n=n, root=tmp_path)
    try:
        first = elect(sim, names)
        assert all(term(sim, x) == term(sim, first) >= 1 for x in names)
        followers = [x for x in names if x != first]
        # Slow the pushes: an ack that came before a majority stored the entry would show.
        majority = n // 2 + 1
        sim.nemesis.set_delay([first], followers, 50, 50)
        watched = [append_watched(sim, first, b"m%d" % i, names) for i in range(10)]
        sim.run_until(lambda: all("response" in seen for _, seen in watched), timeout_ms=5_000, poll_ms=5)
        for i, (_future, seen) in enumerate(watched):
            assert seen["response"].code == Code.SUCCESS and seen["response"].index == i
            assert seen["holders"] >= majority, seen
        # Entries reach every member, in order, with the leader's term.
        sim.run_until(lambda: set(ends(sim, names).values()) == {9}, timeout_ms=5_000, poll_ms=5)
        for x in names:
            assert [body_at(sim, x, i) for i in range(10)] == [b"m%d" % i for i in range(10)]
        commits = [e for e in sim.tracer.events if e.kind == "dledger.commit" and e.node == first]
        assert commits and commits[-1].fields["commit_index"] == 9
        assert [e.fields["commit_index"] for e in commits] == sorted({e.fields["commit_index"] for e in commits})
        roles = [e for e in sim.tracer.events if e.kind == "dledger.role" and e.fields["role"] == "LEADER"]
        assert [e.node for e in roles] == [first]
    finally:
        sim.close()


@pytest.mark.parametrize("n", [3, 5])
def test_leader_kill_elects_a_new_leader_with_a_larger_term_within_dledgers_timeouts(tmp_path, n):
    sim, names = build(seed=2, n=n, root=tmp_path)
    try:
        first = elect(sim, names)
        assert append(sim, first, b"before").code == Code.SUCCESS
        old_term = term(sim, first)
        rest = [x for x in names if x != first]
        handled = {x: RecordingHandler() for x in rest}
        for x in rest:
            member(sim, x).server.get_dledger_leader_elector().add_role_change_handler(handled[x])
        sim.nemesis.kill(first)
        failover_ms = sim.run_until(lambda: leader(sim, rest), timeout_ms=30_000, poll_ms=5)
        second = leader(sim, rest)
        assert term(sim, second) > old_term
        # The role-change handlers (the broker's DLedgerRoleChangeHandler registers one) saw it.
        new_term = term(sim, second)
        assert ("CANDIDATE" in [r for _, r in handled[second].calls]
                and handled[second].calls[-1] == (new_term, "LEADER"))
        for x in rest:
            if x != second:
                assert handled[x].calls[-1] == (new_term, "FOLLOWER")
        # Nobody moves before the leak has passed; one or two vote rounds later there is a leader.
        assert LEAK_MS < failover_ms <= LEAK_MS + 2 * (VOTE_ROUND_MS + VOTE_DELAY_MS), failover_ms
        response = append(sim, second, b"after")
        assert response.code == Code.SUCCESS and response.index == 1 and response.term == term(sim, second)
        assert body_at(sim, second, 0) == b"before"
        if n == 5:  # a second kill still leaves a majority of 3
            sim.nemesis.kill(second)
            rest = [x for x in rest if x != second]
            third = elect(sim, rest)
            assert append(sim, third, b"three left").code == Code.SUCCESS
    finally:
        sim.close()


def test_partitioned_minority_leader_times_out_and_its_entry_is_truncated_after_the_heal(tmp_path):
    sim, names = build(seed=3, n=3, root=tmp_path)
    try:
        old = elect(sim, names)
        for i in range(3):
            assert append(sim, old, b"ok%d" % i).code == Code.SUCCESS
        rest = [x for x in names if x != old]
        sim.nemesis.partition([old], rest)
        start = sim.now_ms()
        response = append(sim, old, b"doomed")
        assert response.code == Code.WAIT_QUORUM_ACK_TIMEOUT and response.index == 3
        assert sim.now_ms() - start >= 2500  # maxWaitAckTimeMs
        assert body_at(sim, old, 3) == b"doomed"
        new = elect(sim, rest)
        assert term(sim, new) > term(sim, old) or not member(sim, old).server.member_state.is_leader()
        replacement = append(sim, new, b"replacement")
        assert replacement.code == Code.SUCCESS and replacement.index == 3
        healed = sim.now_ms()
        sim.nemesis.heal()
        sim.run_until(lambda: leader(sim, names) == new and body_at(sim, old, 3) == b"replacement",
                      timeout_ms=30_000, poll_ms=5)
        # The old leader's log now is the new leader's: its unacknowledged entry is gone.
        for x in names:
            assert [body_at(sim, x, i) for i in range(4)] == [b"ok0", b"ok1", b"ok2", b"replacement"]
        # It got there by the new leader's pushes (COMPARE, TRUNCATE, APPEND) after the heal.
        pushes = [e for e in sim.tracer.events if e.kind == "frame.recv" and e.node == old and e.time_ms >= healed
                  and e.fields.get("code") == DLedgerRequestCode.PUSH]
        assert len(pushes) >= 3
    finally:
        sim.close()


def test_two_of_three_down_no_append_succeeds(tmp_path):
    sim, names = build(seed=4, n=3, root=tmp_path)
    try:
        first = elect(sim, names)
        assert append(sim, first, b"x").code == Code.SUCCESS
        for x in names:
            if x != first:
                sim.nemesis.kill(x)
        futures = [member(sim, first).append_future(b"y%d" % i) for i in range(3)]
        sim.run_until(lambda: all(f.done() for f in futures), timeout_ms=5_000, poll_ms=5)
        assert [f.result().code for f in futures] == [Code.WAIT_QUORUM_ACK_TIMEOUT] * 3
        # After the leak the lone leader steps down; appends are then refused outright.
        sim.run_until(lambda: not member(sim, first).server.member_state.is_leader(), timeout_ms=10_000, poll_ms=5)
        refused = append(sim, first, b"z")
        assert refused.code == Code.NOT_LEADER
        sim.run_for(20_000)
        assert not member(sim, first).server.member_state.is_leader()
        commits = [e for e in sim.tracer.events if e.kind == "dledger.commit"]
        assert max(e.fields["commit_index"] for e in commits) == 0
    finally:
        sim.close()


def test_preferred_leader_takes_over_by_leadership_transfer(tmp_path):
    # Seed 1 elects n2 first (same as without a preferred leader: the first elections do not look at it).
    sim, names = build(seed=1, n=3, root=tmp_path, preferred_leader_ids="n0")
    try:
        first = elect(sim, names)
        assert first != "n0"
        first_term = term(sim, first)
        assert append(sim, first, b"a").code == Code.SUCCESS
        sim.run_until(lambda: leader(sim, names) == "n0", timeout_ms=20_000, poll_ms=5)
        assert term(sim, "n0") == first_term + 1
        transfers = [e for e in sim.tracer.events if e.kind == "frame.send"
                     and e.fields.get("code") == DLedgerRequestCode.LEADERSHIP_TRANSFER]
        assert {e.node for e in transfers} >= {first}
        # The new leader has the entry and serves appends; the old one follows.
        response = append(sim, "n0", b"b")
        assert response.code == Code.SUCCESS and response.index == 1
        assert member(sim, first).server.member_state.is_follower()
    finally:
        sim.close()


def _scenario(seed: int, root) -> str:
    sim, names = build(seed=seed, n=3, root=root)
    try:
        first = elect(sim, names)
        for i in range(3):
            append(sim, first, b"d%d" % i)
        sim.nemesis.kill(first)
        elect(sim, [x for x in names if x != first])
        sim.run_for(2_000)
        return trace_hash(sim.tracer.events)
    finally:
        sim.close()


def test_same_seed_same_trace(tmp_path):
    a = _scenario(7, tmp_path / "a")
    b = _scenario(7, tmp_path / "b")
    c = _scenario(8, tmp_path / "c")
    assert a == b != c


def test_batch_push_replicates_and_acks_the_same_way(tmp_path):
    sim, names = build(seed=5, n=3, root=tmp_path, is_enable_batch_push=True)
    try:
        first = elect(sim, names)
        futures = [member(sim, first).append_future(b"b%d" % i) for i in range(20)]
        sim.run_until(lambda: all(f.done() for f in futures), timeout_ms=5_000, poll_ms=5)
        assert [f.result().code for f in futures] == [Code.SUCCESS] * 20
        sim.run_until(lambda: set(ends(sim, names).values()) == {19}, timeout_ms=5_000, poll_ms=5)
        for x in names:
            assert [body_at(sim, x, i) for i in range(20)] == [b"b%d" % i for i in range(20)]
        # Batches: fewer pushes than entries went from the leader to each follower.
        pushes = [e for e in sim.tracer.events if e.kind == "frame.send" and e.node == first
                  and e.fields.get("code") == DLedgerRequestCode.PUSH]
        assert len(pushes) < 2 * 20
    finally:
        sim.close()
