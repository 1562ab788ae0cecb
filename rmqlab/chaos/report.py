"""A campaign's report: its Parquet results aggregated with Spark SQL, and an HTML page of tables
and figures.

    tables = aggregate(spark, out_dir)             # {"conclusion": [...], "rto": [...], ...} via SQL
    path = write_report(out_dir, tables, runs, faults, worst_events=...)

The queries (QUERIES, each over the views `runs` and `faults` of rmqlab.chaos.results' schemas):

  conclusion   the article's conclusion table ("一文详解 RocketMQ 如何利用 Raft 进行高可用保障",
               "实验结论"): per fault kind and the servers it hit (brokers, controllers, both), the
               acknowledged messages lost, whether every safety checker held (consistency), and the
               RTO to an acknowledged send (median, 90th percentile, max) — over the configurations
               that promise no loss (`promises_no_loss`) and over the others apart
  rto          per mode, fault kind and target: injections, RTO to an acknowledged send and to a
               consumption (median, p90, max), the faults with no recovery in the run
  loss         per mode and configuration: runs, injections, acknowledged, lost, runs with loss,
               duplicated, unordered, invalid runs, runs that raised
  violations   every run a safety checker failed: case, seed, first violation, replay command
  worst        the worst run: invalid first, then most lost, then unrecovered, then the largest RTO

A fault that never recovered has a null RTO; the percentiles skip it and `not_recovered` counts it:
it is never drawn as a fast recovery. The figures: RTO per fault kind (box per mode, unrecovered
faults counted in the legend), acknowledged loss by configuration (every bar labelled, zeros too),
and the worst run's sends over time with its faults (rmqlab.viz.sends.sends_figure on the run
replayed from its seed: the simulator gives the same trace again).
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

from rmqlab.chaos.results import FAULTS_FILE, RUNS_FILE

# The servers a target hits, as the article groups its cases (Broker, Controller, Broker+Controller).
_SERVERS = """CASE
  WHEN target IN ('master', 'broker', 'brokers', 'brokers-majority', 'broker-broker') THEN 'brokers'
  WHEN target IN ('controller-leader', 'controller', 'controllers', 'controllers-majority', 'controllers-all',
                  'controller-controller') THEN 'controllers'
  ELSE 'brokers+controllers' END"""

# Configurations whose guarantee is "no acknowledged message lost": the controller modes with
# allAckInSyncStateSet (the controller-mode deployment guide's recommendation, apache/rocketmq
# docs/cn/controller/deploy.md) or inSyncReplicas=2, and DLedger (a majority acks each entry).
PROMISING_CONFIGS = ("allAck", "inSyncReplicas2")


def promises_no_loss_sql() -> str:
    configs = ", ".join(f"'{c}'" for c in PROMISING_CONFIGS)
    return f"(mode LIKE 'dledger%' OR (mode LIKE 'controller%' AND config IN ({configs})))"


QUERIES: dict[str, str] = {
    "conclusion": f"""
        SELECT f.kind, {_SERVERS.replace('target', 'f.target')} AS servers,
               {promises_no_loss_sql().replace('mode', 'f.mode').replace('config', 'f.config')} AS promises_no_loss,
               COUNT(*) AS injections,
               COUNT(DISTINCT f.campaign, f.`case`, f.seed) AS runs,
               SUM(CASE WHEN f.fault_index = 0 THEN r.lost ELSE 0 END) AS lost,
               BOOL_AND(r.valid) AS consistent,
               percentile_approx(f.rto_send_ms, 0.5) AS rto_p50_ms,
               percentile_approx(f.rto_send_ms, 0.9) AS rto_p90_ms,
               MAX(f.rto_send_ms) AS rto_max_ms,
               SUM(CASE WHEN f.rto_send_ms IS NULL THEN 1 ELSE 0 END) AS not_recovered
        FROM faults f JOIN runs r ON f.campaign = r.campaign AND f.`case` = r.`case` AND f.seed = r.seed
        GROUP BY 1, 2, 3 ORDER BY 3 DESC, 1, 2""",
    "rto": """
        SELECT mode, kind, target, COUNT(*) AS injections,
               percentile_approx(rto_send_ms, 0.5) AS rto_send_p50_ms,
               percentile_approx(rto_send_ms, 0.9) AS rto_send_p90_ms, MAX(rto_send_ms) AS rto_send_max_ms,
               percentile_approx(rto_consume_ms, 0.5) AS rto_consume_p50_ms, MAX(rto_consume_ms) AS rto_consume_max_ms,
               SUM(CASE WHEN rto_send_ms IS NULL THEN 1 ELSE 0 END) AS not_recovered
        FROM faults GROUP BY mode, kind, target ORDER BY mode, kind, target""",
    "loss": f"""
        SELECT mode, config, {promises_no_loss_sql()} AS promises_no_loss, COUNT(*) AS runs,
               SUM(injections) AS injections, SUM(acknowledged) AS acknowledged, SUM(lost) AS lost,
               SUM(CASE WHEN lost > 0 THEN 1 ELSE 0 END) AS runs_with_loss, SUM(duplicated) AS duplicated,
               SUM(unordered) AS unordered, SUM(CASE WHEN valid THEN 0 ELSE 1 END) AS invalid,
               SUM(CASE WHEN error IS NULL THEN 0 ELSE 1 END) AS errors
        FROM runs GROUP BY mode, config ORDER BY mode, config""",
    "violations": """
        SELECT `case`, seed, first_violation, error, replay FROM runs WHERE NOT valid ORDER BY `case`, seed""",
    "worst": """
        SELECT * FROM runs
        ORDER BY valid ASC, lost DESC NULLS LAST, recovered ASC NULLS FIRST, rto_send_max_ms DESC NULLS FIRST,
                 `case`, seed
        LIMIT 1""",
}


def aggregate(spark, out_dir: str) -> dict[str, list[dict[str, Any]]]:
    """Run QUERIES over out_dir's runs.parquet and faults.parquet; each table as a list of dicts."""
    spark.read.parquet(os.path.join(out_dir, RUNS_FILE)).createOrReplaceTempView("runs")
    spark.read.parquet(os.path.join(out_dir, FAULTS_FILE)).createOrReplaceTempView("faults")
    return {name: [row.asDict() for row in spark.sql(sql).collect()] for name, sql in QUERIES.items()}


def worst_run_events(tables: dict[str, list[dict]]) -> list | None:
    """The worst run's trace, by running its case and seed again on the simulator (deterministic:
    the same run); None when the campaign had no run."""
    from rmqlab.chaos.case import Case
    from rmqlab.chaos.runner import run_case

    if not tables.get("worst"):
        return None
    import logging

    row = tables["worst"][0]
    was = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the cluster's WARN lines, as run_task silences them
    try:
        return run_case(Case.from_dict(json.loads(row["case_json"])), int(row["seed"]), keep_events=True).events
    finally:
        logging.disable(was)


# --- the page -------------------------------------------------------------------------------------------
def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return html.escape(str(v))


def table_html(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "<p><i>none</i></p>"
    columns = columns or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_report(out_dir: str, tables: dict[str, list[dict]], fault_rows: list[dict], *,
                 worst_events: list | None = None, title: str = "Chaos campaign") -> str:
    """out_dir/report.html (and plotly.min.js beside it); returns the page's path."""
    import plotly.io as pio

    from rmqlab.viz.chaos import loss_by_config_figure, rto_figure

    figures = [("RTO per fault kind", rto_figure(fault_rows)),
               ("Acknowledged messages lost, by configuration", loss_by_config_figure(tables["loss"]))]
    if worst_events is not None:
        from rmqlab.viz.sends import sends_figure
        worst = tables["worst"][0]
        figures.append((f"The worst run: {worst['case']}, seed {worst['seed']}", sends_figure(worst_events)))
    plotly_js = os.path.join(out_dir, "plotly.min.js")
    if not os.path.exists(plotly_js):
        from plotly.offline import get_plotlyjs
        with open(plotly_js, "w", encoding="utf-8") as f:
            f.write(get_plotlyjs())
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<script src='plotly.min.js'></script>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             "<h2>Conclusion table</h2>", table_html(tables["conclusion"]),
             "<h2>Violations (each replayable from its seed)</h2>", table_html(tables["violations"])]
    for name, fig in figures:
        parts += [f"<h2>{html.escape(name)}</h2>", pio.to_html(fig, include_plotlyjs=False, full_html=False)]
    parts += ["<h2>RTO by mode, fault kind and target</h2>", table_html(tables["rto"]),
              "<h2>Loss by configuration</h2>", table_html(tables["loss"]),
              "</body></html>"]
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return path
