"""rmqlab.chaos: chaos campaigns in OpenChaos's shape (openmessaging/openchaos) — cases of a
deployment mode, a configuration and one fault kind on one kind of target, each fault held for a
duration and followed by an interval to recover, repeated over a run and over seeds — run on the
simulator (in a process pool or as Spark tasks), judged by rmqlab.checker's checkers, written as
Parquet rows and aggregated with Spark SQL into a report.

    case.py      Case: one case, plain data
    campaign.py  Campaign: conf/chaos/*.toml expanded into cases (`seed003`, `smoke`)
    runner.py    run_case / run_task: one case and seed on the simulator, per-mode readiness and convergence
    results.py   the run and fault rows, their Parquet schemas
    execute.py   a process pool over tasks, and the summary table
    spark_runner.py  the same tasks as one Spark job (local[N] or a spark:// master)
    report.py    Spark SQL over the Parquet results (the conclusion table, RTO, loss) and the HTML page
    cli.py       `rmqlab chaos list | run | report`
"""

from rmqlab.chaos.campaign import Campaign, load_campaign
from rmqlab.chaos.case import Case
from rmqlab.chaos.runner import run_case, run_task

__all__ = ["Campaign", "Case", "load_campaign", "run_case", "run_task"]
