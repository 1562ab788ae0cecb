"""The exercise registry, the sandboxed function server and its policy, and the decision points
at which a student's function decides in the simulator (rmqlab.lab.exercises)."""

from __future__ import annotations

import json
import os
import time

import pytest

from rmqlab.lab.exercises import EXERCISES, Example, SandboxedFunction, StudentFunctionError
from rmqlab.lab.exercises import election, sync_state_set, transfer, truncation
from rmqlab.trace import trace_hash


# --- the sandbox ---------------------------------------------------------------------------------------
def call(fn, *args, **kwargs):
    """(status, value or error) of one call in a fresh sandbox."""
    with SandboxedFunction(fn, "f", **kwargs) as sf:
        try:
            return "ok", sf(*args), sf
        except StudentFunctionError as e:
            return e.status, e, sf


@pytest.fixture
def hidden(tmp_path):
    d = tmp_path / "hidden-workloads"
    d.mkdir()
    (d / "w1.parquet").write_text("secret")
    return str(d)


def test_a_sandboxed_function_serves_many_calls_and_answers_json():
    def f(a, b):
        return {"sum": a + b, "pair": (a, b), "set": {b, a}}

    with SandboxedFunction(f, "f") as sf:
        assert sf(1, 2) == {"sum": 3, "pair": [1, 2], "set": [1, 2]}
        assert [sf(i, 1)["sum"] for i in range(50)] == list(range(1, 51))
        assert sf.calls == 51 and sf.violations == []
        assert "audit-hook" in sf.isolation
    with pytest.raises(ValueError, match="JSON"):
        SandboxedFunction(f, "f")(object())
    with pytest.raises(ValueError, match="identifier"):
        SandboxedFunction(f, "not a name")


def test_reading_or_listing_a_denied_dir_is_refused_and_recorded_even_if_caught(hidden):
    def reads(path):
        try:
            return open(os.path.join(path, "w1.parquet")).read()
        except PermissionError as e:
            return str(e)

    status, e, sf = call(reads, hidden, deny_paths=[hidden])
    assert status == "sandbox-violation", e
    assert any("reading the file" in v and "w1.parquet" in v for v in e.details["violations"])
    assert sf.violations == e.details["violations"]

    status, e, _ = call(lambda p: os.listdir(p), hidden, deny_paths=[hidden])
    assert status == "sandbox-violation" and "listing the directory" in e.message
    # outside any allowed dir, not only in the denied one
    status, e, _ = call(lambda: open("/etc/hostname").read())
    assert status == "sandbox-violation" and "/etc/hostname" in e.message


def test_the_scratch_dir_is_the_working_directory_and_the_only_writable_one(tmp_path):
    def writes():
        with open("notes.txt", "w") as f:
            f.write("ok")
        with open("notes.txt") as f:
            return [os.getcwd(), f.read(), sorted(os.listdir("."))]

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    status, value, _ = call(writes, scratch_dir=str(scratch))
    assert status == "ok" and value == [os.path.realpath(scratch), "ok", ["notes.txt"]]
    status, e, _ = call(lambda p: open(p, "w").write("x"), str(tmp_path / "outside.txt"), scratch_dir=str(scratch))
    assert status == "sandbox-violation" and "writing the file" in e.message
    assert not (tmp_path / "outside.txt").exists()


def test_network_processes_and_ctypes_are_refused():
    def connects():
        import socket

        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.connect(("127.0.0.1", 9))

    def runs():
        import subprocess

        return subprocess.run(["true"]).returncode

    def forks():
        return os.fork()

    def kills_parent():
        os.kill(os.getppid(), 9)

    def uses_ctypes():
        import ctypes

        return ctypes.CDLL(None).getpid()

    def system():
        return os.system("true")

    for fn, what in ((connects, "network socket"), (runs, "subprocess"), (forks, "os.fork"),
                     (kills_parent, "signalling another process"), (uses_ctypes, "ctypes"), (system, "os.system")):
        status, e, _ = call(fn)
        assert status == "sandbox-violation", (fn.__name__, e)
        assert what in e.message, (fn.__name__, e.message)


def test_time_limit_memory_limit_output_flood_exits_and_errors():
    def loops():
        while True:
            pass

    with SandboxedFunction(loops, "loops", time_limit_s=0.3) as sf:
        t0 = time.monotonic()
        with pytest.raises(StudentFunctionError) as first:
            sf()
        assert first.value.status == "timeout" and "0.3 s" in first.value.message
        with pytest.raises(StudentFunctionError) as later:  # at once: the child is gone
            sf()
        assert later.value.status == "timeout" and time.monotonic() - t0 < 3

    status, e, _ = call(lambda: len(bytearray(4 << 30)))  # 4 GB beyond the 512 MB allowance
    assert status == "error" and "MemoryError" in e.message

    def floods():
        for _ in range(10):
            print("x" * (1 << 20))  # 10 MB in all
        return 7

    status, value, sf = call(floods, output_limit=1000)
    assert status == "ok" and value == 7
    assert sf.output.startswith("x" * 1000) and len(sf.output) < 1100 and "more characters not kept" in sf.output

    status, e, _ = call(lambda: exit(3))
    assert status == "error" and "SystemExit: 3" in e.message
    status, e, sf = call(lambda: os._exit(7))
    assert status == "crashed" and "exit status 7" in e.message
    with pytest.raises(StudentFunctionError):  # later calls too
        sf()

    def raises():
        raise KeyError("nope")

    status, e, _ = call(raises)
    assert status == "error" and "KeyError: 'nope'" in e.message and "in raises" in e.details["traceback"]
    status, e, _ = call(lambda: (_ for _ in ()).throw(NotImplementedError))
    assert status == "todo"
    status, e, _ = call(lambda: object())
    assert status == "wrong-type" and e.details["type"] == "object"
    status, e, _ = call(lambda: float("nan"))
    assert status == "wrong-type"


def test_random_and_time_are_allowed():
    def uses():
        import random

        return [random.random() < 1, time.time() > 0, time.monotonic() > 0]

    assert call(uses)[:2] == ("ok", [True, True, True])


def test_source_text_is_executed_after_the_policy_with_helpers_and_imports(hidden):
    source = "import math\n\ndef helper(x):\n    return math.floor(x)\n\ndef f(x):\n    return helper(x) + 1\n"
    with SandboxedFunction(source, "f") as sf:
        assert sf(2.5) == 3
    snoops = f"data = open({os.path.join(hidden, 'w1.parquet')!r}).read()\n\ndef f():\n    return data\n"
    with SandboxedFunction(snoops, "f", deny_paths=[hidden]) as sf:
        with pytest.raises(StudentFunctionError) as e:
            sf()
        assert e.value.status == "error" and "PermissionError" in e.value.message
        assert sf.violations == [] and "w1.parquet" in e.value.message
    with SandboxedFunction("def g():\n    return 1\n", "f") as sf:
        with pytest.raises(StudentFunctionError, match="does not define a function f"):
            sf()
    with SandboxedFunction("def f(:\n", "f") as sf:
        with pytest.raises(StudentFunctionError, match="SyntaxError"):
            sf()


# --- the registry --------------------------------------------------------------------------------------
def test_the_registry_lists_the_five_exercises_with_their_labs():
    assert set(EXERCISES) == {"truncation_point", "elect_master", "sync_state_set", "transfer_ok", "acting_master"}
    labs = {name: ex.lab for name, ex in EXERCISES.items()}
    assert labs == {"truncation_point": "04-log-truncation", "elect_master": "02-raft-controller",
                    "sync_state_set": "03-ha-handshake", "transfer_ok": "01-deployment-modes",
                    "acting_master": "05-slave-acting-master"}
    for ex in EXERCISES.values():
        assert os.path.exists(f"labs/{ex.lab}.ipynb")
        names = [e.name for e in ex.public_examples]
        assert len(names) == len(set(names)) >= 8
        assert all(e.hint and e.source for e in ex.public_examples)
        # Each exercise cites a document a student can open: a design document (RocketMQ's docs/ or
        # a RIP page of its wiki) or RocketMQ's docs.
        assert any("design.md" in e.source or "deploymentOperations" in e.source or "/wiki/RIP-" in e.source
                   for e in ex.public_examples)
        report = ex.check(ex.reference)
        assert report.passed and report.n_passed == len(names), str(report)
        for e in ex.public_examples:  # the examples are JSON data
            assert Example.from_dict(json.loads(json.dumps(e.to_dict()))) == e


def wrong_elect_by_offset(candidates, old_master, prefer_broker_id):
    """Wrong: the most data wins, the epoch is ignored."""
    if not candidates:
        return None
    if old_master in [c[0] for c in candidates] and prefer_broker_id is None:
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in [c[0] for c in candidates] else None
    return max(candidates, key=lambda c: (c[1][1] if c[1] else -1, -c[0]))[0]


def wrong_elect_higher_priority(candidates, old_master, prefer_broker_id):
    """Wrong: the larger electionPriority wins."""
    if not candidates:
        return None
    if old_master in [c[0] for c in candidates] and prefer_broker_id is None:
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in [c[0] for c in candidates] else None
    return min(candidates, key=lambda c: (c[1] is None, -(c[1] or [0])[0], -(c[1] or [0, 0])[1],
                                          -(c[1] or [0, 0, 0])[2], c[0]))[0]


def wrong_expand_behind(sss, master, slaves, confirm, epoch_start, now, max_ms):
    """Wrong: a connected slave joins whatever its ack."""
    keep = sync_state_set.reference(sss, master, slaves, confirm, epoch_start, now, max_ms)
    return sorted(set(keep) | {s for s, ack, _ in slaves if ack is not None})


def wrong_never_shrinks(sss, master, slaves, confirm, epoch_start, now, max_ms):
    """Wrong: members never leave."""
    return sorted(set(sss) | set(sync_state_set.reference(sss, master, slaves, confirm, epoch_start, now, max_ms)))


def wrong_answer_before_ack(next_offset, ack_nums, acks, push2):
    """Wrong: a connected slave is enough, whatever it acknowledged."""
    return len(acks) + 1 >= ack_nums


def wrong_strictly_greater(next_offset, ack_nums, acks, push2):
    """Wrong: ack > next_offset."""
    if ack_nums <= 1:
        return push2 > next_offset
    return 1 + sum(a > next_offset for a in acks) >= ack_nums


def wrong_truncate_larger_end(local, local_max, master, master_max):
    """Wrong: the larger end of the consistent epoch."""
    ref = truncation.reference(local, local_max, master, master_max)
    return -1 if ref < 0 else max(ref, min(local_max, master_max))


@pytest.mark.parametrize("exercise, wrong, must_fail", [
    ("elect_master", wrong_elect_by_offset, "higher epoch wins over more data"),
    ("elect_master", wrong_elect_higher_priority, "same data: lower priority value wins"),
    ("sync_state_set", wrong_expand_behind, "a slave behind the confirm offset"),
    ("sync_state_set", wrong_never_shrinks, "a slave falls behind"),
    ("transfer_ok", wrong_answer_before_ack, "the slave is behind"),
    ("transfer_ok", wrong_strictly_greater, "exactly at the offset"),
    ("truncation_point", wrong_truncate_larger_end, "old master with an unreplicated tail"),
])
def test_a_typical_wrong_answer_fails_naming_the_example(exercise, wrong, must_fail):
    ex = EXERCISES[exercise]
    report = ex.check(wrong)
    assert not report.passed and not report.todo
    failed = {r.name: r for r in report.results if not r.passed}
    assert must_fail in failed, str(report)
    r = failed[must_fail]
    assert r.status == "fail" and f"example '{must_fail}'" in r.message and "Hint:" in r.message
    assert f"FAIL {must_fail}: " in str(report)


def test_the_todo_stub_and_wrong_types_are_reported():
    def transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset):
        raise NotImplementedError

    report = EXERCISES["transfer_ok"].check(transfer_ok)
    assert report.todo and str(report).startswith("transfer_ok is still the TODO stub")
    report = EXERCISES["transfer_ok"].check(lambda *a: 1, EXERCISES["transfer_ok"].public_examples[:1])
    assert report.results[0].status == "wrong-type" and "expected True or False" in report.results[0].message
    report = EXERCISES["sync_state_set"].check(lambda *a: "1,2", EXERCISES["sync_state_set"].public_examples[:1])
    assert report.results[0].status == "wrong-type"
    assert EXERCISES["sync_state_set"].normalize({3, 1}) == [1, 3]
    with pytest.raises(StudentFunctionError) as e:
        EXERCISES["elect_master"].normalize(True)
    assert e.value.status == "wrong-type"


# --- the references are the components' rules -------------------------------------------------------------
def test_the_election_reference_is_default_elect_policy():
    from types import SimpleNamespace

    from rmqlab.controller.elect.impl.default_elect_policy import DefaultElectPolicy

    for ex in election.PUBLIC_EXAMPLES:
        candidates, old_master, prefer = ex.args
        live = {b: (None if info is None else SimpleNamespace(epoch=info[0], max_offset=info[1],
                                                                election_priority=info[2]))
                for b, info in candidates}
        with_info = any(v is not None for v in live.values())
        policy = DefaultElectPolicy(lambda c, n, b: b in live, (lambda c, n, b: live.get(b)) if with_info else None)
        pool = set(live) | {9}  # 9: registered but not alive, filtered out
        assert policy._try_elect("c", "broker-a", pool, old_master, prefer) == ex.expected, ex.name


def test_the_sync_state_set_reference_is_maybe_shrink_plus_maybe_expand():
    from rmqlab.ha.autoswitch.auto_switch_ha_protocol import SyncStateSetState

    for ex in sync_state_set.PUBLIC_EXAMPLES:
        sss, master, slaves, confirm, epoch_start, now, max_ms = ex.args
        state = SyncStateSetState(local_broker_id=master, local=set(sss),
                                  caught_up={s: last for s, _, last in slaves if last is not None})
        kept = state.maybe_shrink(now, max_ms)
        added = set()
        for s, ack, _ in slaves:
            if ack is not None:
                state = SyncStateSetState(local_broker_id=master, local=set(sss))
                if state.maybe_expand(s, ack, confirm, epoch_start) is not None:
                    added.add(s)
        assert sorted(kept | added) == ex.expected, ex.name


def test_the_transfer_reference_is_group_transfer_service():
    from types import SimpleNamespace

    from rmqlab.ha.group_transfer_service import GroupTransferService

    for ex in transfer.PUBLIC_EXAMPLES:
        next_offset, ack_nums, acks, push2 = ex.args
        service = GroupTransferService.__new__(GroupTransferService)
        service.ha_service = SimpleNamespace(push2_slave_max_offset=push2,
                                             connection_list=[SimpleNamespace(slave_ack_offset=a) for a in acks])
        assert service._transfer_ok(SimpleNamespace(next_offset=next_offset, ack_nums=ack_nums)) == ex.expected


# --- the decision points: byte-identical traces with the reference, and graded runs do ask them -----------
def _chaos(points=None):
    from rmqlab.checker.chaos import run_chaos
    from rmqlab.checker.schedule import MASTER, FaultOp, FaultSchedule

    # The master dies and comes back: an election, a returning old master that truncates, shrink
    # checks every 5 s and an expand when it catches up.
    schedule = FaultSchedule(5, (FaultOp(1_000, "kill", MASTER, fault_id=1),
                                 FaultOp(6_000, "restart", MASTER, fault_id=1)), 8_000, 6_000)
    run = run_chaos(5, schedule=schedule, converge_timeout_ms=20_000, decision_points=points)
    run.cleanup()
    assert run.converged
    return trace_hash(run.events)


@pytest.fixture(scope="module")
def chaos_baseline():
    return _chaos()


def test_elect_master_point_with_the_reference_leaves_the_run_unchanged(chaos_baseline):
    from rmqlab.lab.exercises import combine

    ex, calls, transfer_calls = EXERCISES["elect_master"], [], []
    with SandboxedFunction(ex.reference, ex.function) as fn:
        # transfer_ok's point too: controller mode's allAckInSyncStateSet path must not reach it
        points = combine(ex.decision_points(fn, calls),
                         EXERCISES["transfer_ok"].decision_points(transfer.reference, transfer_calls))
        assert _chaos(points) == chaos_baseline
    assert calls and all(c["answer"] == election.reference(*c["args"]) for c in calls)
    assert any(c["answer"] is not None and c["args"][1] is not None and c["answer"] != c["args"][1] for c in calls)
    assert transfer_calls == []


def test_truncation_point_with_the_reference_leaves_the_run_unchanged(chaos_baseline):
    ex, calls = EXERCISES["truncation_point"], []
    with SandboxedFunction(ex.reference, ex.function) as fn:
        assert _chaos(ex.decision_points(fn, calls)) == chaos_baseline
    assert calls and all(c["answer"] == truncation.reference(*c["args"]) for c in calls)


def test_sync_state_set_points_with_the_reference_leave_the_run_unchanged(chaos_baseline):
    ex, calls = EXERCISES["sync_state_set"], []
    with SandboxedFunction(ex.reference, ex.function) as fn:
        assert _chaos(ex.decision_points(fn, calls)) == chaos_baseline
    assert calls and all(c["answer"] == sync_state_set.reference(*c["args"]) for c in calls)
    assert any(set(c["answer"]) - set(c["args"][0]) for c in calls)  # the expand site was reached


def test_a_wrong_function_at_a_point_changes_the_run(chaos_baseline):
    def elect_lowest_id(candidates, old_master, prefer_broker_id):
        return min((c[0] for c in candidates), default=None)

    calls = []
    assert _chaos(EXERCISES["elect_master"].decision_points(elect_lowest_id, calls)) != chaos_baseline
    assert any(c["answer"] != election.reference(*c["args"]) for c in calls)


def _sync_run(points=None) -> tuple[str, list]:
    from tests.cluster_helpers import send, start

    c = start("2m-2s-sync", seed=3, decision_points=points)
    try:
        results = send(c, 10, "sync")
        c.run_for(1_000)
        return trace_hash(c.events()), results
    finally:
        c.close()


def test_transfer_ok_point_with_the_reference_leaves_a_sync_master_run_unchanged():
    ex, calls = EXERCISES["transfer_ok"], []
    baseline, results = _sync_run()
    assert all(not isinstance(r, Exception) for r in results)
    with SandboxedFunction(ex.reference, ex.function) as fn:
        assert _sync_run(ex.decision_points(fn, calls))[0] == baseline
    assert calls and {c["args"][1] for c in calls} == {2}  # ackNums = inSyncReplicas = 2 in 2m-2s-sync
    assert any(c["answer"] for c in calls) and all(c["answer"] == transfer.reference(*c["args"]) for c in calls)


def test_a_failing_function_at_a_point_is_recorded_in_calls():
    def loops(*args):
        while True:
            pass

    calls = []
    with SandboxedFunction(loops, "transfer_ok", time_limit_s=0.2) as fn:
        _, results = _sync_run(EXERCISES["transfer_ok"].decision_points(fn, calls))
    # The broker absorbs the exception (SYSTEM_ERROR to the producer): the sends fail, and every
    # call is recorded with its error — the first a timeout, the later ones at once.
    assert results and all(isinstance(r, Exception) for r in results)
    assert calls and all("error" in c for c in calls)
    assert {c["error"]["status"] for c in calls} == {"timeout"}


def test_decision_points_serve_one_run_after_another_and_refuse_two_rules_for_one_point():
    from rmqlab.common.decision_points import DecisionPoints
    from rmqlab.lab.exercises import combine

    ex = EXERCISES["transfer_ok"]
    points = ex.decision_points(transfer.reference)
    assert points.replaced() == ("transfer_ok",) and DecisionPoints().replaced() == ()
    assert combine(points, EXERCISES["elect_master"].decision_points(election.reference)).replaced() == \
        ("elect_master", "transfer_ok")
    with pytest.raises(ValueError, match="set twice"):
        combine(points, ex.decision_points(transfer.reference))
    with pytest.raises(TypeError):
        DecisionPoints(transfer_ok=3)


def test_the_real_runtime_refuses_decision_points():
    from rmqlab.cluster import Cluster
    from rmqlab.workload import run_workload
    from rmqlab.workload.catalog import CATALOG

    points = EXERCISES["transfer_ok"].decision_points(transfer.reference)
    with pytest.raises(ValueError, match="real process"):
        Cluster("2m-2s-sync", "real", decision_points=points)
    with pytest.raises(ValueError, match="decision_points"):
        run_workload(CATALOG["sync-kill-master"], runtime="real", decision_points=points)


# --- the lab notebooks -----------------------------------------------------------------------------------
@pytest.mark.real
@pytest.mark.parametrize("lab", ["01-deployment-modes", "02-raft-controller", "03-ha-handshake", "04-log-truncation"])
def test_each_lab_declares_its_exercises_and_only_they_run_under_grading(lab):
    import nbformat

    from rmqlab.lab.exercises import exercises_of_lab

    nb = nbformat.read(f"labs/{lab}.ipynb", as_version=4)
    names = [ex.name for ex in exercises_of_lab(lab)]
    assert nb.metadata["rmqlab"] == {"lab": lab, "exercises": names}
    graded = [c for c in nb.cells if c.cell_type == "code" and "rmqlab-grading-skip" not in c.metadata.get("tags", [])]
    assert "parameters" in graded[0].metadata["tags"]
    cells = graded[1:]
    assert [c.metadata["rmqlab"]["exercise"] for c in cells] == names
    assert all("exercise" in c.metadata["tags"] for c in cells)
    namespace = {}
    exec(graded[0].source, namespace)  # what papermill runs with grading=True: parameters, exercise cells
    for cell in cells:
        exec(cell.source, namespace)
    for name in names:
        ex = EXERCISES[name]
        assert callable(namespace[ex.function]) and namespace[ex.function].__doc__
        report = ex.check(namespace[ex.function], ex.public_examples[:1])
        assert report.todo, f"{lab}: the committed {ex.function} is the TODO stub"


def test_a_submission_sees_the_arguments_as_the_notebook_shows_them():
    source = ("def truncation_point(local, local_max, master, master_max):\n"
              "    return local[-1].start_offset if local and local[-1] in master else -1\n")
    with EXERCISES["truncation_point"].sandbox(source, time_limit_s=2.0) as fn:
        assert fn([[1, 0], [2, 500]], 900, [[1, 0], [2, 500]], 900) == 500
        assert fn.name == "truncation_point"


def test_the_policy_is_installed_once_and_says_which_layers_are_active():
    def reinstall():
        from rmqlab.lab.exercises import install_sandbox_policy
        from rmqlab.lab.exercises.policy import installed_policy

        policy = installed_policy()
        try:
            install_sandbox_policy()
        except RuntimeError as e:
            return [list(policy.isolation), str(e)]

    status, value, sf = call(reinstall)
    assert status == "ok" and value[0] == list(sf.isolation) and "already installed" in value[1]
    assert value[0][0] == "audit-hook" and "chdir" in value[0]


def test_checking_a_source_that_never_loads_stays_within_the_budget():
    source = "while True:\n    pass\n"
    t0 = time.monotonic()
    report = EXERCISES["transfer_ok"].check(source, time_limit_s=0.2, budget_s=0.5)
    assert time.monotonic() - t0 < 10
    statuses = [r.status for r in report.results]
    assert statuses[0] == "timeout" and "skipped" in statuses and set(statuses) <= {"timeout", "skipped"}
