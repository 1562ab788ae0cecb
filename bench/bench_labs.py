"""The labs on a Binder-sized budget: one kernel runs every lab notebook,
top to bottom, as a student would in one session; then each notebook alone, headless.

    .venv/bin/python bench/bench_labs.py [labs/01-*.ipynb ...]     # default: every labs/*.ipynb

Printed: per notebook, the wall seconds in the shared kernel and the kernel's resident memory
after it; the kernel's peak RSS (VmHWM) and the peak RSS of the kernel plus every process it
started (the real-process sections spawn name servers and brokers), sampled every 100 ms; then
each notebook's own headless run time through `rmqlab.lab.notebooks.execute`'s path (a fresh
kernel each, as nbval and papermill run them). Target: peak ≤ 1.2 GB.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _rss_kib(pid: int, field: str = "VmRSS") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class PeakSampler(threading.Thread):
    """Peak of the summed RSS of a process tree, sampled every 100 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self._done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak_kib = max(self.peak_kib, sum(_rss_kib(p) for p in _descendants(self.pid)))
            self._done.wait(0.1)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak_kib


def run_in_one_kernel(paths: list[str]) -> None:
    import nbformat
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    pid = km.provisioner.process.pid
    sampler = PeakSampler(pid)
    sampler.start()
    try:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            start = time.monotonic()
            errors = []

            def collect(msg, errors=errors):
                if msg["msg_type"] == "error":
                    errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

            kc.execute_interactive(f"import os; os.chdir({os.path.dirname(os.path.abspath(path))!r})", timeout=60)
            for cell in nb.cells:
                if cell.cell_type == "code":
                    kc.execute_interactive(cell.source, timeout=600, output_hook=collect)
                    if errors:
                        raise SystemExit(f"{path}: a cell failed: {errors[0]}")
            print(f"{os.path.basename(path):<32} {time.monotonic() - start:6.1f} s in the shared kernel; "
                  f"kernel RSS now {_rss_kib(pid) / 1024:6.0f} MiB", flush=True)
        print(f"kernel peak RSS (VmHWM): {_rss_kib(pid, 'VmHWM') / 1024:.0f} MiB")
    finally:
        peak = sampler.stop()
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    print(f"peak RSS of the kernel and the processes it started: {peak / 1024:.0f} MiB (target <= 1.2 GB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    paths = args.paths or sorted(glob.glob(os.path.join(ROOT, "labs", "*.ipynb")))
    print(f"python {sys.version.split()[0]}, {len(paths)} notebooks, {os.cpu_count()} cores")
    run_in_one_kernel(paths)
    from rmqlab.lab.notebooks import execute

    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            copy = os.path.join(tmp, os.path.basename(path))
            shutil.copy(path, copy)  # execute() saves in place: never rewrite the committed notebook here
            took = execute(copy)
            total += took
            print(f"{os.path.basename(path):<32} {took:6.1f} s headless, fresh kernel (target <= 60 s)")
    print(f"all notebooks headless: {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
