"""rmqlab.workload: recorded workloads — what a run consists of (mode and
configuration, client operations, fault schedule, seed), the Parquet file that stores it with its
recorded trace and outcome (schema in datasets/README.md), the runner that records it (simulator
or real processes) and replays it on the simulator, and the outcome: the Jepsen total-queue view,
the invariants and recovery time, as canonical JSON.

    from rmqlab.workload import load_workload, run_workload, outcome_json
    recorded = load_workload("datasets/workloads/ctrl-embedded-kill-master.parquet")
    run = run_workload(recorded.workload)                   # replay on the simulator
    outcome_json(run.outcome) == outcome_json(recorded.outcome)   # a simulator recording replays exactly

`rmqlab record` / `rmqlab replay` (rmqlab.workload.cli); the public practice workloads are
`rmqlab.workload.catalog.CATALOG`.
"""

from rmqlab.workload.outcome import CONDITIONAL_INVARIANTS, INVARIANTS, outcome, outcome_json, promises_no_loss, summary
from rmqlab.workload.parquet_format import (SCHEMA, SCHEMA_VERSION, RecordedWorkload, WorkloadFormatError,
                                            WorkloadVersionError, load_workload, load_workload_bytes, read_header, read_spec,
                                            save_workload, workload_bytes)
from rmqlab.workload.runner import WorkloadRun, run_workload
from rmqlab.workload.spec import TopicSpec, Workload, WorkloadClient, schedule_of

__all__ = ["CONDITIONAL_INVARIANTS", "INVARIANTS", "outcome", "outcome_json", "promises_no_loss", "summary", "SCHEMA", "SCHEMA_VERSION",
           "RecordedWorkload", "WorkloadFormatError", "WorkloadVersionError", "load_workload", "load_workload_bytes",
           "read_header", "read_spec", "save_workload", "workload_bytes", "WorkloadRun", "run_workload", "TopicSpec", "Workload",
           "WorkloadClient", "schedule_of", "record"]


def record(workload: Workload, *, runtime: str = "sim", seed: int | None = None) -> RecordedWorkload:
    """Run `workload` (on `runtime`) and keep what a file holds: trace, outcome, meta."""
    import datetime

    import rmqlab

    run = run_workload(workload.replace(recorded_runtime=runtime), seed=seed, runtime=runtime)
    meta = {"runtime": runtime, "recorded_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "rmqlab_version": rmqlab.__version__, "wall_s": round(run.wall_s, 3),
            "trace_span_ms": (run.events[-1].time_ms - run.events[0].time_ms) if run.events else 0.0}
    return RecordedWorkload(run.workload, run.events, run.outcome, meta)
