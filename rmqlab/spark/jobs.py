"""One Spark job of independent tasks, with progress: the grader's stages and the chaos campaigns
both run this way.

    results = run_job(sc, items, ("rmqlab.grading.tasks", "run_stage"), ctx, "replay", progress=True)

Each item becomes one task (`module.func(ctx, item)` on an executor, through
`rmqlab.spark.session.boot_task`, so an executor without rmqlab boots from the shipped archive);
the results come back in item order. The tqdm bar on stderr follows Spark's status tracker (the
completed tasks of the job's stages), polled from the calling thread while the job runs in another.
"""

from __future__ import annotations

import functools
import sys
import threading
import uuid
from typing import Any


def run_job(sc, items: list, task: tuple[str, str], ctx: Any, desc: str, progress: bool) -> list:
    if not items:
        return []
    from tqdm import tqdm

    from rmqlab.spark.session import boot_task
    fn = functools.partial(boot_task(*task), ctx)
    rdd = sc.parallelize(items, len(items)).map(fn)
    group = f"rmqlab-{desc}-{uuid.uuid4().hex[:8]}"
    box: dict = {}

    def work():
        try:
            sc.setJobGroup(group, desc)
            box["value"] = rdd.collect()
        except BaseException as e:  # noqa: BLE001 — re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=work, name=f"rmqlab-{desc}", daemon=True)
    t.start()
    bar = tqdm(total=len(items), desc=desc, file=sys.stderr, disable=not progress, leave=progress, unit="task")
    tracker = sc.statusTracker()
    while t.is_alive():
        t.join(0.25)
        done = 0
        for jid in tracker.getJobIdsForGroup(group) or []:
            job = tracker.getJobInfo(jid)
            for sid in (job.stageIds if job else []):
                info = tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
        if done > bar.n:
            bar.update(min(done, len(items)) - bar.n)
    bar.update(len(items) - bar.n)
    bar.close()
    if "error" in box:
        raise box["error"]
    return box["value"]
