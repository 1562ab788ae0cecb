"""The labs on Binder's budget, measured: every lab notebook headless inside a cgroup limited to
one CPU (a CFS quota, as Binder's Kubernetes limit is) and 2 GiB of memory (no swap).

    .venv/bin/python bench/bench_binder_budget.py [--cpus 1] [--memory-mib 2048] [labs/01-*.ipynb ...]

Run as root (it creates cgroups). Default: labs/*.ipynb and labs/instructor/*.ipynb. Each
notebook runs in a fresh cgroup of its own: cgroup v2 if the CPU and memory controllers are
there, else cgroup v1 (cpu, memory and, if mounted, cpuacct hierarchies). It is created under
this process's own cgroup, so any limit above still applies (in cgroup v2, beside it when its own
cannot have children with controllers). Inside the cgroup: a Python process that executes a
temporary copy of the notebook with nbclient (as `rmqlab.lab.notebooks execute` does, cwd: the
copy's folder; the committed notebook is never written), its kernel and every process the kernel
starts (the real-process sections start name servers and brokers; the dashboard starts Spark's
JVM). The nbclient process stands in for the Jupyter server, so the peak is a little pessimistic.

Recorded per notebook: wall seconds; CPU seconds (cgroup accounting) and how often the quota
throttled it; the cgroup's peak memory (v1 memory.max_usage_in_bytes, v2 memory.peak: page cache
charged to the cgroup included, as the limit counts it) and the peak of its anonymous memory
(sampled every 100 ms from memory.stat); OOM kills (v1 memory.oom_control, v2 memory.events);
what `rmqlab.common.cpu_quota.available_processors()` said inside. Targets: no OOM kill, each
notebook <= 120 s, peak <= 1.5 GiB (JupyterLab itself needs the rest of the 2 GiB).

Prints a markdown table (with `uptime` beside it: other work on the machine slows the wall times,
not the memory) and exits 1 if a target is missed. If no cgroup can be created (an unprivileged
container), it says so and measures nothing: taskset plus RLIMIT_AS is not the same budget.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PERIOD_US = 100_000
TARGET_S = 120.0
TARGET_PEAK = 1.5 * 1024 ** 3


class NoCgroup(Exception):
    """No cgroup could be created with CPU and memory limits."""


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _keyed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _own_cgroups() -> tuple[str | None, dict[str, str]]:
    """This process's cgroup v2 path (or None) and its v1 paths by controller."""
    v2, v1 = None, {}
    for line in _read("/proc/self/cgroup").splitlines():
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            v2 = path
        for c in controllers.split(","):
            if c:
                v1[c] = path
    return v2, v1


def _mount_points() -> dict[str, tuple[str, str]]:
    """{"v2" or a v1 controller: (mount root, mount point)} from mountinfo."""
    out = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if tail and tail[0] == "cgroup2":
            out.setdefault("v2", (fields[3], fields[4]))
        elif tail and tail[0] == "cgroup":
            for c in tail[2].split(","):
                out.setdefault(c, (fields[3], fields[4]))
    return out


def _dir(mount: tuple[str, str], path: str) -> str:
    mount_root, point = mount
    rel = os.path.relpath(path, mount_root) if path.startswith(mount_root) else "."
    return os.path.normpath(os.path.join(point, rel))


class Cgroup:
    """One cgroup (v2) or one per v1 hierarchy (cpu, memory, cpuacct), limited to `cpus` CPUs
    and `memory` bytes, no swap."""

    def __init__(self, name: str, cpus: float, memory: int):
        self.version, self.dirs = None, {}
        mounts = _mount_points()
        v2, v1 = _own_cgroups()
        errors = []
        if "v2" in mounts and v2 is not None:
            parent = _dir(mounts["v2"], v2)
            try:
                available = _read(os.path.join(parent, "cgroup.controllers")).split()
                if {"cpu", "memory"} <= set(available):
                    self._make_v2(os.path.join(parent, name), cpus, memory)
                    return
                errors.append(f"cgroup v2 at {parent}: cpu and memory controllers not available ({available})")
            except OSError as e:
                self.remove()
                self.version, self.dirs = None, {}
                errors.append(f"cgroup v2 at {parent}: {e}")
        if "cpu" in mounts and "memory" in mounts:
            try:
                self._make_v1(name, mounts, v1, cpus, memory)
                return
            except OSError as e:
                self.remove()
                errors.append(f"cgroup v1: {e}")
        else:
            errors.append("no cgroup v1 cpu and memory hierarchies mounted")
        raise NoCgroup("; ".join(errors))

    def _make_v2(self, path: str, cpus: float, memory: int) -> None:
        parent = os.path.dirname(path)
        enabled = _read(os.path.join(parent, "cgroup.subtree_control")).split()
        missing = [c for c in ("cpu", "memory") if c not in enabled]
        if missing:
            try:
                _write(os.path.join(parent, "cgroup.subtree_control"), " ".join("+" + c for c in missing))
            except OSError:
                # EBUSY: our own cgroup holds processes (this one, its shell), and cgroup v2 lets no
                # cgroup with processes enable controllers for children. Its parent has them
                # enabled (our cgroup.controllers lists them): make a sibling instead.
                path = os.path.join(os.path.dirname(parent), os.path.basename(path))
        os.mkdir(path)
        self.version, self.dirs = 2, {"v2": path}
        _write(os.path.join(path, "cpu.max"), f"{int(cpus * PERIOD_US)} {PERIOD_US}")
        _write(os.path.join(path, "memory.max"), str(memory))
        if os.path.exists(os.path.join(path, "memory.swap.max")):
            _write(os.path.join(path, "memory.swap.max"), "0")

    def _make_v1(self, name: str, mounts, v1: dict[str, str], cpus: float, memory: int) -> None:
        if "cpu" not in v1 or "memory" not in v1:
            raise OSError("/proc/self/cgroup names no v1 cpu and memory cgroups")
        self.version = 1
        for c in ("cpu", "memory", "cpuacct"):
            if c not in mounts or c not in v1:
                continue
            d = os.path.join(_dir(mounts[c], v1[c]), name)
            if d in self.dirs.values():  # cpu,cpuacct mounted together
                self.dirs[c] = d
                continue
            os.mkdir(d)
            self.dirs[c] = d
        _write(os.path.join(self.dirs["cpu"], "cpu.cfs_period_us"), str(PERIOD_US))
        _write(os.path.join(self.dirs["cpu"], "cpu.cfs_quota_us"), str(int(cpus * PERIOD_US)))
        mem = self.dirs["memory"]
        _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory))
        if os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")):  # no swap either
            _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(memory))

    def join(self, pid: int) -> None:
        for d in set(self.dirs.values()):
            _write(os.path.join(d, "cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        out = set()
        for d in set(self.dirs.values()):
            try:
                out |= {int(p) for p in _read(os.path.join(d, "cgroup.procs")).split()}
            except OSError:
                pass
        return out

    def _mem(self, v2_file: str, v1_file: str) -> str:
        if self.version == 2:
            return _read(os.path.join(self.dirs["v2"], v2_file))
        return _read(os.path.join(self.dirs["memory"], v1_file))

    def memory_now(self) -> tuple[int, int]:
        """(charged bytes, anonymous bytes) now."""
        if self.version == 2:
            return int(self._mem("memory.current", "")), _keyed(self._mem("memory.stat", ""))["anon"]
        stat = _keyed(self._mem("", "memory.stat"))
        return int(self._mem("", "memory.usage_in_bytes")), stat.get("total_rss", stat.get("rss", 0))

    def peak(self) -> int | None:
        """The kernel's own high-water mark, or None (cgroup v2 before Linux 5.19)."""
        try:
            return int(self._mem("memory.peak", "memory.max_usage_in_bytes"))
        except OSError:
            return None

    def oom_kills(self) -> int:
        if self.version == 2:
            return _keyed(self._mem("memory.events", "")).get("oom_kill", 0)
        return _keyed(self._mem("", "memory.oom_control")).get("oom_kill", 0)

    def cpu(self) -> tuple[float | None, int]:
        """(CPU seconds used, periods in which the quota throttled it)."""
        if self.version == 2:
            stat = _keyed(_read(os.path.join(self.dirs["v2"], "cpu.stat")))
            return stat["usage_usec"] / 1e6, stat.get("nr_throttled", 0)
        stat = _keyed(_read(os.path.join(self.dirs["cpu"], "cpu.stat")))
        used = None
        if "cpuacct" in self.dirs:
            used = int(_read(os.path.join(self.dirs["cpuacct"], "cpuacct.usage"))) / 1e9
        return used, stat.get("nr_throttled", 0)

    def kill_all(self) -> None:
        """SIGKILL whatever is left in the cgroup (all started by this run), until it is empty."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def remove(self) -> None:
        for d in sorted(set(self.dirs.values()), reverse=True):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still emptying
                    time.sleep(0.1)


def _process(pid: int) -> tuple[int, str]:
    """(RSS in bytes, a short command line) of `pid`, (0, "") if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return 0, ""
    words = [os.path.basename(argv[0])] + [a for a in argv[1:] if not a.startswith("-")][:2] if argv else []
    return rss, " ".join(words)[:60]


class Sampler(threading.Thread):
    """Peak of the cgroup's charged and anonymous memory, sampled every 100 ms, and the largest
    processes at the anonymous peak."""

    def __init__(self, cg: Cgroup):
        super().__init__(daemon=True)
        self.cg, self.charged, self.anon, self._done = cg, 0, 0, threading.Event()
        self.at_peak: list[tuple[int, str]] = []
        self.started = time.monotonic()
        self.peak_at = 0.0

    def run(self) -> None:
        while not self._done.is_set():
            try:
                charged, anon = self.cg.memory_now()
                self.charged = max(self.charged, charged)
                if anon > self.anon:
                    self.anon, self.peak_at = anon, time.monotonic() - self.started
                    self.at_peak = sorted((_process(p) for p in self.cg.pids()), reverse=True)[:4]
            except OSError:
                pass
            self._done.wait(0.1)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _cell_seconds(cell) -> float:
    """A code cell's run time from nbclient's timing metadata (ISO timestamps), 0 if none."""
    from datetime import datetime
    timing = cell.get("metadata", {}).get("execution", {})
    try:
        return (datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
                - datetime.fromisoformat(timing["iopub.status.busy"].replace("Z", "+00:00"))).total_seconds()
    except (KeyError, ValueError):
        return 0.0


def run_one(path: str, timeout_s: int) -> int:
    """Inside the cgroup: execute a temporary copy of `path`; print one JSON line."""
    import nbformat
    from nbclient import NotebookClient

    from rmqlab.common.cpu_quota import available_processors

    result = {"available_processors": available_processors(), "error": None}
    with tempfile.TemporaryDirectory(prefix="rmqlab-binder-") as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        shutil.copy(path, copy)
        nb = nbformat.read(copy, as_version=4)
        client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", record_timing=True,
                                resources={"metadata": {"path": tmp}})
        start = time.monotonic()
        try:
            client.execute()
        except Exception as e:  # a failed cell (or a dead kernel): recorded, the run goes on
            result["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:300]
        result["seconds"] = time.monotonic() - start
        cells = sorted(((_cell_seconds(c), i) for i, c in enumerate(nb.cells)), reverse=True)
        result["slowest_cell"] = cells[0] if cells else (0.0, -1)
        result["slow_cells"] = cells[:4]
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if result["error"] is None else 1


def measure(path: str, index: int, cpus: float, memory: int, timeout_s: int) -> dict:
    cg = Cgroup(f"rmqlab-binder-{os.getpid()}-{index}", cpus, memory)
    try:
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        start = time.monotonic()
        # The child joins the cgroup before it execs: everything it starts is born inside.
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--run-one", path,
                                  "--cell-timeout", str(timeout_s)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                 cwd=ROOT, preexec_fn=lambda: cg.join(os.getpid()))
        sampler = Sampler(cg)
        sampler.start()
        out, _ = child.communicate()
        wall = time.monotonic() - start
        cg.kill_all()  # a broker or JVM the notebook left behind
        sampler.stop()
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        result = json.loads(lines[-1][7:]) if lines else {
            "error": f"exit code {child.returncode}: {out.strip().splitlines()[-1:] or ''}",
            "available_processors": None, "seconds": wall, "slowest_cell": (0.0, -1)}
        used, throttled = cg.cpu()
        peak = cg.peak()
        return {"notebook": os.path.relpath(path, ROOT), "seconds": result["seconds"], "wall": wall,
                "cpu_s": used, "throttled": throttled, "peak": peak if peak is not None else sampler.charged,
                "peak_source": "kernel" if peak is not None else "sampled", "anon_peak": sampler.anon,
                "oom_kills": cg.oom_kills(), "available_processors": result["available_processors"],
                "error": result["error"], "cgroup": f"v{cg.version}", "peak_at": sampler.peak_at,
                "slowest_cell": result["slowest_cell"], "slow_cells": result.get("slow_cells", []),
                "at_peak": sampler.at_peak}
    finally:
        cg.kill_all()
        cg.remove()


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1024 ** 2:,.0f}"


def table(rows: list[dict], cpus: float, memory: int, uptimes: tuple[str, str], command: str) -> str:
    out = [f"Command: `{command}`", "",
           f"Limits: {cpus:g} CPU (CFS quota {int(cpus * PERIOD_US)}/{PERIOD_US} µs), {memory / 1024 ** 2:,.0f} MiB, "
           f"no swap; cgroup {rows[0]['cgroup'] if rows else '?'}. Machine: {os.cpu_count()} cores; "
           f"`uptime` before: `{uptimes[0]}`; after: `{uptimes[1]}`", "",
           "| notebook | time (s) | CPU (s) | slowest cell (s) | throttled periods | peak, cgroup (MiB) "
           "| peak anon (MiB) | OOM kills | CPUs seen | result |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = r["error"] is None and r["oom_kills"] == 0 and r["seconds"] <= TARGET_S and r["peak"] <= TARGET_PEAK
        verdict = "ok" if ok else ("FAILED: " + r["error"] if r["error"] else "over target")
        cpu = "?" if r["cpu_s"] is None else f"{r['cpu_s']:.1f}"
        seconds, index = r["slowest_cell"]
        out.append(f"| {r['notebook']} | {r['seconds']:.1f} | {cpu} | {seconds:.1f} (cell {index}) "
                   f"| {r['throttled']} | {_mib(r['peak'])} "
                   f"| {_mib(r['anon_peak'])} | {r['oom_kills']} | {r['available_processors']} | {verdict} |")
    out += ["", f"Targets: every notebook completes, no OOM kill, each <= {TARGET_S:.0f} s, "
                f"peak <= {TARGET_PEAK / 1024 ** 3:g} GiB."]
    return "\n".join(out)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--cpus", type=float, default=1.0)
    ap.add_argument("--memory-mib", type=int, default=2048)
    ap.add_argument("--cell-timeout", type=int, default=600)
    ap.add_argument("--run-one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_one:
        return run_one(args.run_one, args.cell_timeout)
    paths = args.paths or (sorted(glob.glob(os.path.join(ROOT, "labs", "*.ipynb")))
                           + sorted(glob.glob(os.path.join(ROOT, "labs", "instructor", "*.ipynb"))))
    memory = args.memory_mib * 1024 ** 2
    uptimes = [_uptime()]
    rows = []
    for i, path in enumerate(paths):
        try:
            row = measure(os.path.abspath(path), i, args.cpus, memory, args.cell_timeout)
        except NoCgroup as e:
            print(f"No cgroup with a CPU quota and a memory limit could be created here ({e}). "
                  "Nothing was measured: run it as root on a machine (or a privileged container) "
                  "where /sys/fs/cgroup is writable. taskset and RLIMIT_AS would not be the same "
                  "budget (RLIMIT_AS limits each process's address space, not the group's memory).",
                  file=sys.stderr)
            return 2
        rows.append(row)
        largest = ", ".join(f"{cmd} {_mib(rss)} MiB" for rss, cmd in row["at_peak"])
        print(f"{row['notebook']}: {row['seconds']:.1f} s, peak {_mib(row['peak'])} MiB, "
              f"OOM kills {row['oom_kills']}, {row['error'] or 'ok'}; at the anonymous peak "
              f"({row['peak_at']:.0f} s in): {largest}; slowest cells: "
              + ", ".join(f"{i}: {t:.1f} s" for t, i in row["slow_cells"]), file=sys.stderr, flush=True)
    command = "python " + " ".join([os.path.relpath(os.path.abspath(__file__), ROOT)] + (argv if argv is not None else sys.argv[1:]))
    uptimes.append(_uptime())
    print(table(rows, args.cpus, memory, tuple(uptimes), command))
    failed = [r for r in rows if r["error"] or r["oom_kills"] or r["seconds"] > TARGET_S or r["peak"] > TARGET_PEAK]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
