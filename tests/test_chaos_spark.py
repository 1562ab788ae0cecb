"""Campaigns on Spark: the same tasks give the same rows on Spark's executors as in this process
(only the wall time differs); Spark SQL's aggregation agrees with the rows it aggregates; the
report page holds every table and figure, and counts unrecovered faults instead of drawing them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from rmqlab.chaos.campaign import load_campaign  # noqa: E402
from rmqlab.chaos.execute import run_tasks  # noqa: E402
from rmqlab.chaos.report import aggregate, write_report  # noqa: E402
from rmqlab.chaos.results import read_results, write_results  # noqa: E402
from rmqlab.chaos.spark_runner import run_on_spark  # noqa: E402

CASES = ("controller-standalone/allAck/kill:master", "2m-2s-async/template/loss:broker-broker")


def _without_wall(rows):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


@pytest.fixture(scope="module")
def spark():
    from rmqlab.spark.session import get_spark, stop_spark
    session = get_spark("local[2]")
    yield session
    stop_spark()


@pytest.fixture(scope="module")
def campaign_dir(spark, tmp_path_factory):
    cases = [c for c in load_campaign("smoke").cases if c.name in CASES]
    assert [c.name for c in cases] == list(CASES)
    run_rows, fault_rows = run_on_spark(cases, [1, 2], spark=spark)
    local_rows, local_faults = run_tasks(cases, [1, 2], workers=1)
    assert _without_wall(run_rows) == _without_wall(local_rows) and fault_rows == local_faults
    out = tmp_path_factory.mktemp("campaign")
    write_results(str(out), run_rows, fault_rows)
    return out


@pytest.mark.spark
def test_spark_sql_aggregates_agree_with_the_rows(spark, campaign_dir):
    runs, faults = read_results(str(campaign_dir))
    tables = aggregate(spark, str(campaign_dir))
    assert sum(r["injections"] for r in tables["conclusion"]) == len(faults)
    assert sum(r["runs"] for r in tables["loss"]) == len(runs)
    assert sum(r["lost"] for r in tables["loss"]) == sum(r["lost"] for r in runs)
    for row in tables["rto"]:
        mine = [f for f in faults if (f["mode"], f["kind"], f["target"]) == (row["mode"], row["kind"], row["target"])]
        assert row["injections"] == len(mine)
        assert row["not_recovered"] == sum(f["rto_send_ms"] is None for f in mine)
        recovered = [f["rto_send_ms"] for f in mine if f["rto_send_ms"] is not None]
        assert row["rto_send_max_ms"] == (max(recovered) if recovered else None)
    # allAck promises no loss in controller mode; the async baseline promises nothing
    promises = {(r["mode"], r["config"]): r["promises_no_loss"] for r in tables["loss"]}
    assert promises == {("controller-standalone", "allAck"): True, ("2m-2s-async", "template"): False}
    worst = tables["worst"][0]
    assert worst["valid"] is False or worst["lost"] == max(r["lost"] for r in runs)
    assert json.loads(worst["case_json"])["name"] == worst["case"]


@pytest.mark.spark
def test_the_report_page_has_its_tables_and_figures(spark, campaign_dir):
    tables = aggregate(spark, str(campaign_dir))
    _, faults = read_results(str(campaign_dir))
    page = open(write_report(str(campaign_dir), tables, faults), encoding="utf-8").read()
    for heading in ("Conclusion table", "Violations", "RTO per fault kind", "Acknowledged messages lost",
                    "RTO by mode, fault kind and target", "Loss by configuration"):
        assert f"<h2>{heading}" in page, heading
    assert (campaign_dir / "plotly.min.js").exists()
    unrecovered = sum(f["rto_send_ms"] is None for f in faults if f["mode"] == "controller-standalone")
    if unrecovered:  # a fault with no recovery is counted in the legend, never drawn as an RTO
        assert f"{unrecovered} not recovered in the run" in page
