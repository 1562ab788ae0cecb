"""`rmqlab demo`: a headless walkthrough that prints what happened and writes an HTML report.

At this stage it walks through the storage engine (storage_walkthrough); cluster scenarios join
it as the deployment modes are built.
"""

from __future__ import annotations

import os

from rmqlab.demo.report import write_report
from rmqlab.demo.storage_walkthrough import run_walkthrough


def run_demo(out_dir: str = "rmqlab-demo", seed: int = 7) -> int:
    os.makedirs(out_dir, exist_ok=True)
    print("rmqlab demo — the storage engine: what survives a crash?\n")
    print("A producer sends 120 messages of 1 KiB, one every 10 ms, to a broker store with 64 KiB commitlog")
    print("files. Each run ends with a different crash; then the store restarts and recovers.\n")
    results = run_walkthrough(out_dir, seed)
    for r in results:
        print(f"== {r.title}")
        print(f"   sent {r.sent}, acknowledged {r.acknowledged}; commitlog written to {r.written_offset}, "
              f"flushed to {r.flushed_offset} ({r.flush_rounds} flush rounds), dispatched to {r.dispatched_offset}")
        print(f"   commitlog files: {', '.join(r.commitlog_files)}")
        print(f"   restart: {r.recovery_mode} recovery, log cut at {r.recovered_offset}, "
              f"{r.discarded_bytes} bytes discarded; {r.survivors} messages readable, "
              f"{r.acknowledged_lost} acknowledged messages lost")
        print(f"   {r.explanation}\n")
    path = write_report(results, os.path.join(out_dir, "report.html"))
    print(f"Report: {path}")
    print(f"Store files (RocketMQ's on-disk format) are under {os.path.abspath(out_dir)}/<run>/store/")
    return 0
