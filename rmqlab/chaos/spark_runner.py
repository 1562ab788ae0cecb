"""A campaign on Spark: each (case, seed) is one task, run on an executor by
rmqlab.chaos.runner.run_task; the rows come back to the driver, which writes them as Parquet
(rmqlab.chaos.results) for Spark SQL to aggregate (rmqlab.chaos.report).

    run_rows, fault_rows = run_on_spark(cases, seeds, master="local[2]")     # or "spark://host:7077"

local[N] runs N tasks at once in this machine's Python workers; a `spark://` master gets rmqlab
shipped to its executors (rmqlab.spark.session.ship_package) when they lack it. The tasks are
independent and seeded, so where a task runs does not change its rows (only `wall_s`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rmqlab.chaos.case import Case

APP_NAME = "rmqlab-chaos"


def spark_task(_ctx: Any, item: tuple[dict[str, Any], int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One task on an executor (rmqlab.spark.jobs.run_job calls it with the job's context)."""
    from rmqlab.chaos.runner import run_task

    return run_task(*item)


def run_on_spark(cases: Sequence[Case], seeds: Iterable[int], *, master: str = "local[2]", spark=None,
                 progress: bool = False) -> tuple[list[dict], list[dict]]:
    """Every case with every seed as one Spark job; the run rows in task order, and the fault rows."""
    from rmqlab.spark.jobs import run_job
    from rmqlab.spark.session import get_spark, ship_package

    spark = spark or get_spark(master, app_name=APP_NAME)
    sc = spark.sparkContext
    ship_package(sc, sc.master)
    tasks = [(case.to_dict(), seed) for case in cases for seed in seeds]
    results = run_job(sc, tasks, ("rmqlab.chaos.spark_runner", "spark_task"), None, "chaos", progress)
    run_rows = [run_row for run_row, _ in results]
    fault_rows = [f for _, faults in results for f in faults]
    return run_rows, fault_rows
