"""Binder: the CPU quota is what sizes worker pools, the budget bench measures a real cgroup, and
repo2docker builds the image from binder/."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import shutil
import subprocess
import sys
import types

import pytest

from rmqlab.common import cpu_quota
from rmqlab.common.cpu_quota import available_processors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


def _tree(tmp_path, cgroup: str, mountinfo: list[str], files: dict[str, str]) -> str:
    """A made-up / with proc/self/{cgroup,mountinfo} and cgroup files."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup)
    (tmp_path / "proc" / "self" / "mountinfo").write_text("\n".join(mountinfo) + "\n")
    for path, text in files.items():
        p = tmp_path / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


V2_MOUNT = "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate"


def test_cgroup_v2_quota_of_a_container(tmp_path):
    # Binder: a cgroup namespace, the pod's limit on the root of what the container sees
    root = _tree(tmp_path, "0::/\n", [V2_MOUNT], {"/sys/fs/cgroup/cpu.max": "100000 100000\n"})
    assert cpu_quota.cpu_quota(root) == 1.0
    assert available_processors(root) == 1


def test_cgroup_v2_tightest_ancestor_counts_and_is_rounded_up(tmp_path):
    root = _tree(tmp_path, "0::/user.slice/job\n", [V2_MOUNT], {
        "/sys/fs/cgroup/cpu.max": "max 100000\n",
        "/sys/fs/cgroup/user.slice/cpu.max": "150000 100000\n",
        "/sys/fs/cgroup/user.slice/job/cpu.max": "max 100000\n",
    })
    assert cpu_quota.cpu_quota(root) == 1.5
    assert available_processors(root) == min(_affinity(), 2)  # as Java's availableProcessors(): ceil


def test_cgroup_v1_cfs_quota_with_cpu_and_cpuacct_mounted_together(tmp_path):
    mount = "35 25 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct"
    d = "/sys/fs/cgroup/cpu,cpuacct/docker/abc"
    root = _tree(tmp_path, "12:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n", [mount], {
        f"{d}/cpu.cfs_quota_us": "50000\n", f"{d}/cpu.cfs_period_us": "100000\n",
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    })
    assert cpu_quota.cpu_quota(root) == 0.5
    assert available_processors(root) == 1


def test_cgroup_v1_container_without_a_cgroup_namespace(tmp_path):
    # /proc/self/cgroup names the host's path; the container's mount root is that path
    mount = "35 25 0:30 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu"
    root = _tree(tmp_path, "3:cpu:/docker/abc\n", [mount], {
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "200000\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"})
    assert cpu_quota.cpu_quota(root) == 2.0


def test_no_quota_means_the_affinity_mask(tmp_path):
    mount = "35 25 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu"
    root = _tree(tmp_path, "3:cpu:/\n0::/\n", [mount, V2_MOUNT], {
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        "/sys/fs/cgroup/cpu.max": "max 100000\n"})
    assert cpu_quota.cpu_quota(root) is None
    assert available_processors(root) == _affinity()
    assert cpu_quota.cpu_quota(str(tmp_path / "nothing")) is None  # no /proc at all


def test_unreadable_quota_files_are_no_quota(tmp_path):
    root = _tree(tmp_path, "0::/a\n", [V2_MOUNT], {"/sys/fs/cgroup/a/cpu.max": "garbled\n",
                                                   "/sys/fs/cgroup/cpu.max": "\n"})
    assert cpu_quota.cpu_quota(root) is None


def test_lab01_comparison_runs_in_process_on_one_cpu(monkeypatch):
    """Lab 01 asks for workers=2; under a 1-CPU quota the modes run one after the other in the
    kernel instead of in a pool of processes sharing the one CPU."""
    from rmqlab.demo import mode_comparison as mc

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool on one CPU")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(mc, "available_processors", lambda: 1)
    monkeypatch.setattr(mc, "simulate_mode", lambda name, seed: (name, seed))
    assert mc.simulate_modes(7, ["2m-2s-async", "controller-embedded"], workers=2) == {
        "2m-2s-async": ("2m-2s-async", 7), "controller-embedded": ("controller-embedded", 7)}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_binder_budget", os.path.join(ROOT, "bench", "bench_binder_budget.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _notebook(path, source: str) -> str:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, str(path))
    return str(path)


@pytest.mark.real
def test_bench_measures_a_real_cgroup_and_records_an_oom_kill(tmp_path):
    """The bench on two tiny notebooks in a 1-CPU, 256 MiB cgroup: one fits (and sees 1 CPU
    through available_processors), the other allocates 512 MiB and is OOM-killed."""
    if os.geteuid() != 0:
        pytest.skip("creating cgroups needs root")
    bench = _bench()
    try:
        bench.Cgroup(f"rmqlab-binder-probe-{os.getpid()}", 1.0, 256 * 1024 ** 2).remove()
    except bench.NoCgroup as e:
        pytest.skip(f"no writable cgroup here: {e}")
    small = _notebook(tmp_path / "small.ipynb", "x = 1")
    big = _notebook(tmp_path / "big.ipynb", "b = bytearray(512 * 1024 * 1024)")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_binder_budget.py"),
                        "--memory-mib", "256", "--cell-timeout", "60", small, big],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 1, r.stderr  # a notebook missed its target
    rows = [line.split("|")[1:-1] for line in r.stdout.splitlines() if line.startswith("| ") and ".ipynb" in line]
    by_name = {os.path.basename(row[0].strip()): [c.strip() for c in row] for row in rows}
    # columns: notebook, time, CPU, slowest cell, throttled, peak, peak anon, OOM kills, CPUs seen, result
    small, big = by_name["small.ipynb"], by_name["big.ipynb"]
    assert small[7] == "0" and small[8] == "1" and small[9] == "ok"
    assert int(big[7]) >= 1 and big[9].startswith("FAILED")
    assert int(big[5].replace(",", "")) <= 256  # the limit held


@pytest.mark.real  # the bench runs `uptime` for the load it reports
def test_bench_without_a_cgroup_says_so_and_measures_nothing(tmp_path, monkeypatch, capsys):
    bench = _bench()
    monkeypatch.setattr(bench, "_mount_points", lambda: {})  # as in a container without /sys/fs/cgroup
    assert bench.main([_notebook(tmp_path / "small.ipynb", "x = 1")]) == 2
    out = capsys.readouterr()
    assert "Nothing was measured" in out.err and "RLIMIT_AS" in out.err and "|" not in out.out


def _repo2docker(repo: str) -> subprocess.CompletedProcess:
    """`jupyter-repo2docker --no-build --debug repo`: the Dockerfile it would build, on stdout.
    In a network namespace of its own when possible: it must fetch nothing."""
    cmd = [sys.executable, "-m", "repo2docker", "--no-build", "--debug", repo]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        cmd = ["unshare", "-n", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=repo)
    assert r.returncode == 0, r.stderr
    return r


def _environment_file(dockerfile: str) -> str:
    for line in dockerfile.splitlines():
        if "env update" in line and "--file" in line:
            return line.split("--file", 1)[1].split()[0].strip('"')
    raise AssertionError("no conda environment file in the Dockerfile")


@pytest.mark.real
def test_repo2docker_builds_from_binder():
    r = _repo2docker(ROOT)
    dockerfile = r.stdout
    assert _environment_file(dockerfile) == "binder/environment.yml"
    assert "COPY --chown=0:0 src/binder/environment.yml ${REPO_DIR}/binder/environment.yml" in dockerfile
    assert "src/environment.yml" not in dockerfile  # the root one is ignored
    assert "RUN ./binder/postBuild" in dockerfile
    assert "Building conda environment for python=3.11" in r.stderr
    with open(os.path.join(ROOT, "binder", "environment.yml")) as f:
        assert "- openjdk=17" in {line.strip() for line in f}  # Spark's JVM comes with that file


@pytest.mark.real
def test_repo2docker_without_binder_would_use_the_root_files(tmp_path):
    """The check above can tell: the same repository without binder/ builds from the root."""
    for name in ("environment.yml", "pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    assert _environment_file(_repo2docker(str(tmp_path)).stdout) == "environment.yml"


def test_grading_extracts_one_notebook_at_a_time_on_one_cpu(tmp_path, monkeypatch):
    """rmqlab grade's extraction asks for 2 notebooks at a time; on a 1-CPU quota it runs one (two
    would share the CPU against the same per-cell time limit). The child processes are stand-ins
    that exit at once: what is counted is how many run together."""
    import nbformat

    from rmqlab.grading import extract as ext

    running, most = set(), []

    class Process:
        pid = 0

        def __init__(self, target, args, daemon):
            self.exitcode = None

        def start(self):
            running.add(self)
            most.append(len(running))
            self.exitcode = 0

        def join(self):
            running.discard(self)

    monkeypatch.setattr(ext, "_context", lambda: types.SimpleNamespace(Process=Process))
    monkeypatch.setattr(cpu_quota, "available_processors", lambda root="/": 1)
    subs = tmp_path / "subs"
    subs.mkdir()
    for student in ("ann", "bob", "cy"):
        nb = nbformat.v4.new_notebook(metadata={"rmqlab": {"exercises": ["truncation_point"]}})
        nb.cells = [nbformat.v4.new_code_cell("def truncation_point():\n    return -1")]
        nbformat.write(nb, str(subs / f"{student}.ipynb"))
    found = ext.find_submissions(str(subs))
    assert len(found) == 3
    out = ext.extract_all(found, {"truncation_point": "truncation_point"}, scratch_root=str(tmp_path / "scratch"),
                          workers=2)
    assert len(out) == 3 and max(most) == 1
