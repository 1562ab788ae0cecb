"""`rmqlab demo`: a headless walkthrough that prints what happened and writes an HTML report.

Three parts, each on the deterministic simulator:
1. the storage engine (storage_walkthrough): what a process crash and a machine crash keep under
   ASYNC_FLUSH and SYNC_FLUSH;
2. the headline (controller_failover): controller mode, the master's machine crashes, a new master
   is elected from the SyncStateSet and nothing acknowledged is lost — judged by the chaos checkers;
3. every deployment mode of RocketMQ's deployment guide ("部署方式", "主备自动切换模式部署") side by
   side under the same workload and the same master machine crash (mode_comparison, lab 01's
   comparison), the guide's pros and cons beside the numbers.
The report carries the labs' figures (rmqlab.viz, drawn from each run's trace), offline.
"""

from __future__ import annotations

import os

from rmqlab.demo.controller_failover import run_failover
from rmqlab.demo.mode_comparison import OUTAGE_MS, SEND_EVERY_MS, claims, simulate_modes
from rmqlab.demo.report import write_report
from rmqlab.demo.storage_walkthrough import run_walkthrough


def _failover_figures(f) -> list:
    from rmqlab.viz.controller import raft_figure
    from rmqlab.viz.invariants import evaluate, invariant_figure
    from rmqlab.viz.offsets import offsets_figure
    from rmqlab.viz.sends import sends_figure
    from rmqlab.viz.sync_state_set import sync_state_set_figure

    events = f.run.events
    return [sends_figure(events, title="Send results around the failover"),
            sync_state_set_figure(events, "broker-a", title="SyncStateSet, master and epochs of broker-a"),
            offsets_figure(events), raft_figure(events, title="The controllers' Raft roles and terms"),
            invariant_figure(evaluate(events, f.run.stores), events)]


def run_demo(out_dir: str = "rmqlab-demo", seed: int = 7, workers: int = 2) -> int:
    from rmqlab.viz import quiet_logs

    with quiet_logs():  # the trace tells the story
        return _run_demo(out_dir, seed, workers)


def _run_demo(out_dir: str, seed: int, workers: int) -> int:
    os.makedirs(out_dir, exist_ok=True)
    print("rmqlab demo — the storage engine: what survives a crash?\n")
    print("A producer sends 120 messages of 1 KiB, one every 10 ms, to a broker store with 64 KiB commitlog")
    print("files. Each run ends with a different crash; then the store restarts and recovers.\n")
    results = run_walkthrough(out_dir, seed)
    for r in results:
        print(f"== {r.title}")
        print(f"   sent {r.sent}, acknowledged {r.acknowledged}; commitlog written to {r.written_offset}, "
              f"flushed to {r.flushed_offset} ({r.flush_rounds} flush rounds), dispatched to {r.dispatched_offset}")
        print(f"   commitlog files: {', '.join(r.commitlog_files)}")
        print(f"   restart: {r.recovery_mode} recovery, log cut at {r.recovered_offset}, "
              f"{r.discarded_bytes} bytes discarded; {r.survivors} messages readable, "
              f"{r.acknowledged_lost} acknowledged messages lost")
        print(f"   {r.explanation}\n")

    print("rmqlab demo — controller mode: the master's machine crashes\n")
    failover = run_failover(seed)
    try:
        f = failover
        print("Three controllers (Raft), broker set broker-a of three replicas, allAckInSyncStateSet=true.")
        print(f"{f.crashed} (master) lost power; {f.new_master or 'no replica'} was elected "
              f"{_s(f.elected_after_ms)} later (the controller's 10 s heartbeat timeout: a machine crash is silent);")
        print(f"the first send acknowledged after the crash: {_s(f.first_ack_after_ms)} after it. "
              f"{f.acknowledged} sends acknowledged, {f.unknown} with an unknown outcome.")
        for name, r in f.checks.items():
            print(f"  checker {name}: {'valid' if r.valid else 'INVALID'}" + ("" if r.valid else f" — {r.first}"))
        print()
        failover_figures = _failover_figures(f)

        print("rmqlab demo — the deployment modes of RocketMQ's deployment guide, "
              "one master machine crash each\n")
        print(f"Same workload everywhere: one message every {SEND_EVERY_MS} ms; broker-a's master loses power and "
              f"stays down {OUTAGE_MS // 1000} s (past the name server's 120 s expiry), then comes back.\n")
        runs = simulate_modes(seed, workers=workers)
        modes = [run.result for run in runs.values()]
        print(f"{'mode':<22}{'acked':>7}{'unknown':>9}{'acked in outage':>17}{'read in outage':>16}"
              f"{'lost':>6}{'new master':>20}{'p50 ms':>8}")
        for m in modes:
            elected = f"{m.new_master} ({_s(m.failover_ms)})" if m.new_master else "—"
            print(f"{m.mode:<22}{m.acknowledged:>7}{m.indeterminate:>9}"
                  f"{f'{m.acked_during_outage}/{m.sends_during_outage}':>17}"
                  f"{f'{m.readable_during_outage}/{m.on_broker_a}':>16}{m.acknowledged_lost:>6}{elected:>20}"
                  f"{m.p50_ms:>8.2f}")
        print("\n  acked in outage: sends acknowledged while broker-a's master was down / sends attempted then")
        print("  read in outage: broker-a's acknowledged messages a new consumer group could read while it was down")
        print("  lost: acknowledged and on no broker any more\n")
        found = claims(modes)
        for c in found:
            print(f"  {c.mode}: {c.source} says 「{c.quote}」 ({c.gloss}) — "
                  f"measured: {c.measured} — {'holds' if c.holds else 'does NOT hold'}")
        print()
        from rmqlab.viz.sends import sends_by_mode_figure

        mode_figures = [sends_by_mode_figure({name: run.events for name, run in runs.items()})]
        path = write_report(results, os.path.join(out_dir, "report.html"), modes, failover=f,
                            failover_figures=failover_figures, mode_figures=mode_figures, claims=found)
    finally:
        failover.run.cleanup()
    print(f"Report: {path}")
    print(f"Store files (RocketMQ's on-disk format) are under {os.path.abspath(out_dir)}/<run>/store/")
    return 0


def _s(ms: float | None) -> str:
    return "—" if ms is None else f"{ms / 1000:.2f} s"
