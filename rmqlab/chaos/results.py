"""A campaign's results as rows, and as Parquet: `runs.parquet` (one row per run: a case and a
seed) and `faults.parquet` (one row per fault injected in a run), schemas RUN_SCHEMA and
FAULT_SCHEMA below, each column documented in the schema's field metadata ("doc"). Spark SQL reads
them as they are (`spark.read.parquet(dir + "/runs.parquet")`); a run row of a violation carries
its seed and the command that replays it.

    write_results(out_dir, run_rows, fault_rows)
    runs, faults = read_results(out_dir)          # lists of dicts again
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rmqlab.chaos.case import Case

RUNS_FILE, FAULTS_FILE = "runs.parquet", "faults.parquet"


def _f(name: str, type_: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


_CASE_FIELDS = [
    _f("campaign", pa.string(), "the campaign the case comes from"),
    _f("case", pa.string(), "the case's name: mode/config/kind:target[/duration]"),
    _f("seed", pa.int64(), "the run's seed (cluster and schedule): the same seed gives the same run"),
    _f("mode", pa.string(), "deployment mode (rmqlab.cluster.modes.MODES)"),
    _f("config", pa.string(), "the configuration preset's name (the campaign file's [configs.NAME])"),
]

RUN_SCHEMA = pa.schema(_CASE_FIELDS + [
    _f("fault_kind", pa.string(), "kill, crash, suspend, partition-one, partition-halves, ring, bridge or loss"),
    _f("fault_target", pa.string(), "what the fault hits (rmqlab.checker.schedule.interval_targets)"),
    _f("duration_ms", pa.float64(), "how long each fault lasts"),
    _f("interval_ms", pa.float64(), "recovery time between faults"),
    _f("run_ms", pa.float64(), "the fault loop's length (virtual ms)"),
    _f("workload", pa.string(), "JSON object: the case's workload settings (send interval_ms, queues, orderly)"),
    _f("case_json", pa.string(), "JSON object: the whole case (Case.from_dict of it runs this case again)"),
    _f("valid", pa.bool_(), "every safety checker valid (all but `recovery`); false for a run that failed"),
    _f("recovered", pa.bool_(), "after every fault an acknowledged send came (the recovery checker)", True),
    _f("converged", pa.bool_(), "the cluster converged before the final drain", True),
    _f("verdicts", pa.string(), "JSON object: checker -> valid"),
    _f("failed_checkers", pa.list_(pa.string()), "the checkers that found a violation"),
    _f("acknowledged", pa.int64(), "sends acknowledged with SEND_OK", True),
    _f("lost", pa.int64(), "acknowledged sends never read (total-queue)", True),
    _f("consumed", pa.int64(), "messages handed to the live consumer's listener (orderly or concurrently)", True),
    _f("duplicated", pa.int64(), "messages one reader read more than once (at-least-once redelivery; not a violation)", True),
    _f("unordered", pa.int64(), "out-of-order messages: queue-order plus orderly consumption", True),
    _f("injections", pa.int64(), "faults injected, as the trace shows them", True),
    _f("planned_injections", pa.int64(), "faults in the schedule (a fault on the master is skipped when there is none)", True),
    _f("rto_send_max_ms", pa.float64(), "the largest per-fault RTO to an acknowledged send (null: none recovered)", True),
    _f("unavailable_ms", pa.float64(), "total time of gaps between acknowledged sends longer than 1 s", True),
    _f("wall_s", pa.float64(), "wall-clock seconds the run took"),
    _f("virtual_s", pa.float64(), "simulated seconds the run covered", True),
    _f("first_violation", pa.string(), "the first violation of the first failing checker", True),
    _f("replay", pa.string(), "the command that runs this case and seed again (set for invalid runs)", True),
    _f("error", pa.string(), "the exception that stopped the run, if one did", True),
])

FAULT_SCHEMA = pa.schema(_CASE_FIELDS + [
    _f("fault_index", pa.int64(), "the fault's position in its run (0 first)"),
    _f("kind", pa.string(), "as the trace shows it: kill, crash, suspend, partition, ring, bridge or loss"),
    _f("target", pa.string(), "the case's target (master, controllers-all, broker-controller, ...)"),
    _f("nodes", pa.list_(pa.string()), "the nodes the fault touched"),
    _f("start_ms", pa.float64(), "when it was injected, ms after the schedule began"),
    _f("duration_ms", pa.float64(), "how long it lasted (null: never undone)", True),
    _f("rto_send_ms", pa.float64(), "to the first acknowledged send invoked after the fault (null: none came)", True),
    _f("rto_send_reason", pa.string(), "why rto_send_ms is null", True),
    _f("rto_consume_ms", pa.float64(), "to the first message consumed after the fault (null: none came)", True),
    _f("rto_consume_reason", pa.string(), "why rto_consume_ms is null", True),
    _f("unavailable_ms", pa.float64(), "acknowledged-send gap time from this fault to the next"),
])


def _case_cells(case: Case, seed: int) -> dict[str, Any]:
    return {"campaign": case.campaign, "case": case.name, "seed": seed, "mode": case.mode, "config": case.config}


def _run_cells(case: Case) -> dict[str, Any]:
    return {"fault_kind": case.kind, "fault_target": case.target, "duration_ms": float(case.duration_ms),
            "interval_ms": float(case.interval_ms), "run_ms": float(case.run_ms),
            "workload": json.dumps(case.workload, sort_keys=True),
            "case_json": json.dumps(case.to_dict(), sort_keys=True)}


def rows(run) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A CaseRun (rmqlab.chaos.runner) as one run row and its fault rows."""
    from rmqlab.chaos.runner import LIVENESS, replay_command

    case, seed = run.case, run.seed
    failed = [name for name, r in run.results.items() if not r.valid and name not in LIVENESS]
    queue = run.results["total-queue"].stats
    first = run.results[failed[0]].first if failed else None
    recovery = run.results["recovery"].stats
    run_row = {**_case_cells(case, seed), **_run_cells(case),
               "valid": not failed, "recovered": recovery["not_recovered"] == 0, "converged": run.converged,
               "verdicts": json.dumps({name: r.valid for name, r in run.results.items()}, sort_keys=True),
               "failed_checkers": failed, "acknowledged": queue["acknowledged"], "lost": queue["lost"],
               "consumed": run.meta["consumed"], "duplicated": run.meta["duplicated"],
               "unordered": run.results["queue-order"].stats["out_of_order"] + run.results["order"].stats["out_of_order"],
               "injections": recovery["faults"], "planned_injections": len(run.schedule.faults),
               "rto_send_max_ms": recovery["rto_send_max_ms"], "unavailable_ms": recovery["unavailable_ms"],
               "wall_s": run.wall_s, "virtual_s": run.virtual_ms / 1000,
               "first_violation": str(first) if first else None,
               "replay": replay_command(case, seed) if failed else None, "error": None}
    fault_rows = []
    for i, r in enumerate(run.recoveries):
        fault_rows.append({**_case_cells(case, seed), "fault_index": i, "kind": r.fault.kind, "target": case.target,
                           "nodes": list(r.fault.nodes), "start_ms": r.fault.start_ms - run.schedule_start_ms,
                           "duration_ms": r.fault.duration_ms, "rto_send_ms": r.rto_send_ms,
                           "rto_send_reason": r.rto_send_reason, "rto_consume_ms": r.rto_consume_ms,
                           "rto_consume_reason": r.rto_consume_reason, "unavailable_ms": r.unavailable_ms})
    return run_row, fault_rows


def error_row(case: Case, seed: int, error: str, wall_s: float) -> dict[str, Any]:
    """The row of a run that raised: invalid, with the error and the replay command."""
    from rmqlab.chaos.runner import replay_command

    row = {name: None for name in RUN_SCHEMA.names}
    row.update({**_case_cells(case, seed), **_run_cells(case), "valid": False, "verdicts": "{}",
                "failed_checkers": [], "wall_s": wall_s, "error": error, "replay": replay_command(case, seed)})
    return row


def write_results(out_dir: str, run_rows: list[dict], fault_rows: list[dict]) -> tuple[str, str]:
    """runs.parquet and faults.parquet in `out_dir` (made if missing); returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = os.path.join(out_dir, RUNS_FILE), os.path.join(out_dir, FAULTS_FILE)
    for path, schema, data in ((paths[0], RUN_SCHEMA, run_rows), (paths[1], FAULT_SCHEMA, fault_rows)):
        pq.write_table(pa.Table.from_pylist(data, schema=schema), path)
    return paths


def read_results(out_dir: str) -> tuple[list[dict], list[dict]]:
    return (pq.read_table(os.path.join(out_dir, RUNS_FILE)).to_pylist(),
            pq.read_table(os.path.join(out_dir, FAULTS_FILE)).to_pylist())
