"""rmqlab.checker: Maelstrom-style chaos testing — seeded fault schedules (the nemesis), a queue
workload, and checkers that read only the history (the event trace, plus the replicas' store files
for the byte-for-byte check). The three meet only at the history, so the checkers serve a lab's
invariant panel and the grading pipeline on any recorded trace.

    from rmqlab.checker import run_and_check
    report = run_and_check(7)                   # one seeded schedule on the simulator
    report.valid, report.results["total-queue"].first

Pieces: `random_schedule` / `interval_schedule` (OpenChaos's fault loop) / `run_schedule` (schedule), `QueueWorkload` (queue_clients),
`check_total_queue`, `check_replicas`, `check_single_master`, `check_elections` (the elected master
was in the SyncStateSet), `check_truncations` (every cut at the consistent point), `check_order` (orderly consumption, per
queue), `check_recovery` / `check_queue_order` (RTO per fault, unavailability, queue order:
recovery) (checkers, returning `CheckResult`
with `Violation`s), `run_chaos` / `check_all` / `run_and_check` (chaos).
"""

from rmqlab.checker.chaos import ChaosReport, ChaosRun, check_all, converged, run_and_check, run_chaos
from rmqlab.checker.checkers import (check_elections, check_replicas, check_single_master, check_total_queue,
                                     check_truncations, read_commitlog, read_epochs, send_acknowledged)
from rmqlab.checker.order import check_order
from rmqlab.checker.recovery import check_queue_order, check_recovery, fault_windows, recoveries, unavailability_windows
from rmqlab.checker.queue_clients import QueueWorkload
from rmqlab.checker.result import CheckResult, Violation
from rmqlab.checker.schedule import (FAULTS, FaultOp, FaultSchedule, MasterResolver, apply_op, interval_schedule,
                                     random_schedule, run_schedule)

__all__ = ["ChaosReport", "ChaosRun", "check_all", "converged", "run_and_check", "run_chaos",
           "check_elections", "check_order", "check_replicas", "check_single_master", "check_total_queue", "check_truncations", "read_commitlog", "read_epochs",
           "send_acknowledged", "CheckResult", "Violation", "FAULTS", "FaultOp", "FaultSchedule", "apply_op",
           "random_schedule", "run_schedule", "MasterResolver", "QueueWorkload", "interval_schedule",
           "check_queue_order", "check_recovery", "fault_windows", "recoveries", "unavailability_windows"]
