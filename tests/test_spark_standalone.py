"""A non-local Spark master: a standalone cluster (one master, two workers) started on 127.0.0.1
from pyspark's own launcher, and `rmqlab grade --master spark://...` run against it in a process of
its own (a process has one SparkSession). The grades must be the ones local[2] gives: a correct
submission full marks, "takes the larger end" zero on the property it breaks."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import nbformat
import pytest

pytest.importorskip("pyspark")

from rmqlab.grading.samples import VARIANTS, make_submission  # noqa: E402
from rmqlab.spark.standalone import SparkStandalone  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = "truncation_point"
WORKLOAD = "ctrl-embedded-partition-master"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = SparkStandalone(workers=2, cores=1, root_dir=str(tmp_path_factory.mktemp("spark-standalone")))
    c.start()
    yield c
    c.stop()
    assert all(not os.path.exists(f"/proc/{pid}") for pid in c.pids)


@pytest.mark.real
@pytest.mark.spark
def test_the_cluster_is_on_loopback_and_every_worker_registers(cluster):
    state = cluster.state()
    assert state["aliveworkers"] == 2 and state["cores"] == 2
    assert cluster.master_url.startswith("spark://127.0.0.1:")
    assert {w["host"] for w in state["workers"]} == {"127.0.0.1"}


@pytest.mark.real
@pytest.mark.spark
def test_grading_on_a_standalone_master_gives_local_modes_grades(cluster, tmp_path):
    from rmqlab.lab.exercises import jail
    if not jail.available():
        pytest.skip("bubblewrap cannot start a sandbox here")
    from rmqlab.workload import RecordedWorkload, save_workload
    from rmqlab.workload.catalog import CATALOG

    subs, hidden, out = tmp_path / "subs", tmp_path / "hidden", tmp_path / "out"
    subs.mkdir()
    hidden.mkdir()
    for student, variant in [("alice", "correct"), ("carol", "larger-end")]:
        nbformat.write(make_submission(None, {EX: VARIANTS[EX][variant].source}), str(subs / f"{student}.ipynb"))
    save_workload(str(hidden / f"{WORKLOAD}.parquet"), RecordedWorkload(CATALOG[WORKLOAD], [], None, {"test": True}))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "rmqlab.cli", "grade", "--submissions", str(subs),
                           "--workloads", str(hidden), "--out", str(out), "--master", cluster.master_url,
                           "--notebook-time-limit", "30", "--no-progress"],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out / "gradebook.csv") as f:
        book = list(csv.DictReader(f))
    alice = [r for r in book if r["student"] == "alice"]
    carol = {r["property"]: r for r in book if r["student"] == "carol"}
    assert alice and all(float(r["points"]) == float(r["max_points"]) for r in alice), alice
    assert float(carol["truncation-at-consistent-point"]["partial_credit"]) == 0.0
    # The work ran on the cluster's executors: the master lists the grader as a finished application.
    apps = cluster.state()["completedapps"]
    assert any(a["name"] == "rmqlab-grade" and a["cores"] >= 1 for a in apps), apps


@pytest.mark.real
@pytest.mark.spark
def test_a_chaos_campaign_on_a_standalone_master_gives_the_local_rows(cluster, tmp_path):
    from rmqlab.chaos.campaign import load_campaign
    from rmqlab.chaos.execute import run_tasks
    from rmqlab.chaos.results import read_results

    case = "2m-2s-sync/template/partition-one:brokers"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "rmqlab.cli", "chaos", "run", "smoke", "--case", case,
                           "--seeds", "1-2", "--master", cluster.master_url, "--no-report", "--out", str(tmp_path)],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs, faults = read_results(str(tmp_path))
    local_runs, local_faults = run_tasks(load_campaign("smoke").select(case), [1, 2], workers=1)
    assert [{k: v for k, v in r.items() if k != "wall_s"} for r in runs] == \
        [{k: v for k, v in r.items() if k != "wall_s"} for r in local_runs]
    assert faults == local_faults
    apps = cluster.state()["completedapps"]
    assert any(a["name"] == "rmqlab-chaos" for a in apps), apps
