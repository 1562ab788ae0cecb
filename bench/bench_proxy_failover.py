"""Controller-mode failover seen through the Proxy by Apache's 5.x gRPC client.

    .venv/bin/python bench/bench_proxy_failover.py [--runs 3] [--refresh-s 20]

Per run, real processes: a NameServer, three standalone controllers, broker set broker-a of three
replicas (conf/controller/, the lab's short timeouts of tests/test_cpp_controller_failover.py) and
a Cluster-mode Proxy (topicRouteServiceCacheRefreshSeconds = --refresh-s; RocketMQ's default 20).
Once all three replicas are in the SyncStateSet, the official client sends one message every
20 ms through the Proxy; 2 s in, the master gets SIGKILL. Printed per run: how many sends failed
after the client's 3 attempts, and the time from the kill to the first acknowledged send after it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--refresh-s", type=int, default=20)
    args = ap.parse_args()

    from rmqlab.cluster import Cluster
    from tests.deployment_helpers import LAB_BROKER, LAB_CONTROLLER, poll
    from tests.proxy_helpers import in_sync_replicas, start_py5

    home = tempfile.mkdtemp(prefix="rmqlab-bench-home-")
    recoveries = []
    for run in range(args.runs):
        c = Cluster("controller-standalone", runtime="real", relay=False, proxy="cluster",
                    overrides={"*": dict(LAB_BROKER)}, controller_overrides=dict(LAB_CONTROLLER),
                    proxy_overrides={"topicRouteServiceCacheRefreshSeconds": args.refresh_s})
        producer = None
        try:
            c.start()
            c.create_topic("BenchFailover")
            poll(lambda: in_sync_replicas(c) == 3, 60, "all three replicas in the SyncStateSet", 0.3)
            master = c.master()
            producer = start_py5(home, "produce", c.proxy_endpoints[0], "BenchFailover", "200", "b", "normal", "0",
                                 "0.02")
            time.sleep(2)
            c.nemesis.kill(master)
            killed = time.time()
            out, err = producer.communicate(timeout=120)
            rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            failed = sum(1 for r in rows if "error" in r)
            first_ok = min(r["sent_at"] - killed for r in rows if "message_id" in r and r["sent_at"] > killed)
            recoveries.append(first_ok)
            print(f"run {run}: {failed} sends failed, first acknowledged send {first_ok:.2f} s after the kill",
                  flush=True)
        finally:
            if producer is not None and producer.poll() is None:
                producer.kill()
            c.close()
    print(f"median {statistics.median(recoveries):.2f} s (range {min(recoveries):.2f}-{max(recoveries):.2f} s), "
          f"route refresh {args.refresh_s} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
