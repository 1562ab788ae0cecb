"""Slave acting master (RIP-32) on real processes with the Apache C++ client: how soon after a
master's SIGKILL its group serves again through the acting slave.

    .venv/bin/python bench/bench_acting_master.py [--runs 10] [--json FILE] [--keep]

Each run starts a fresh deployment as tests/test_cpp_acting_master.py does (`rmqlab namesrv` and
`rmqlab broker` for broker-a's three replicas and broker-b's master from conf/acting-master/, free
ports, RealCluster without the fault relay), creates the topic on every broker and waits until the
route shows broker-a's master read-write. A C++ push consumer, group CID-live, consumes from the
start; the C++ producer sends plain messages, then DELAYED messages at delay level 2 (5 s). Once both
slaves hold broker-a's share, broker-a's master gets SIGKILL DUE_AFTER_KILL_S before the first
delayed message falls due, and a C++ push consumer of a new group, CID-fresh, starts at once.

Measured from the kill (wall clock, right after the signal was sent):

* route:    this script's poll (every 20 ms) first saw broker-a-s1 as broker-a's brokerId 0, read-only;
* delayed:  CID-live received the first delayed message broker-a held (due DUE_AFTER_KILL_S after the
            kill; the acting master's schedule service delivers it through EscapeBridge to broker-b);
* late:     how late the delayed messages broker-a held arrived, median over the run (receipt minus
            send end minus 5 s);
* consume:  CID-fresh received the first message broker-a held, from the acting master. This
            includes the C++ client's own start (process, route, rebalance), which a consumer already
            running would not pay; a consumer that was running had nothing left to read on broker-a.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rmqlab.common.constant.perm_name import PermName  # noqa: E402
from rmqlab.common.topic.topic_validator import TopicValidator  # noqa: E402
from tests.cpp_helpers import CppClient, stored_copies, write_keys  # noqa: E402
from tests.deployment_helpers import ACTING_TOPIC as TOPIC  # noqa: E402
from tests.deployment_helpers import create_topic, poll, route_of_a, start_acting_deployment  # noqa: E402

SCHEDULE_TOPIC = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC

DELAY_LEVEL, DELAY_S = "2", 5.0
DUE_AFTER_KILL_S = 0.3
ROUTE_POLL_S = 0.020


def one_run(root: str) -> dict:
    from pathlib import Path

    tmp = Path(root)
    os.makedirs(tmp / "home", exist_ok=True)
    dep = start_acting_deployment(root)
    master, acting = dep.brokers["broker-a"], dep.brokers["broker-a-s1"]
    store = {node: dep.cluster.store_dir(node) for node in dep.brokers}
    clients: list[CppClient] = []

    def run(name: str, script: str, *args: str) -> CppClient:
        client = CppClient(tmp, name, script, *args)
        clients.append(client)
        return client

    try:
        poll(lambda: create_topic(dep, TOPIC) or True, 30, "the topic created on every broker")
        poll(lambda: route_of_a(dep) == (master, PermName.PERM_READ | PermName.PERM_WRITE), 30,
             "broker-a's master in the route, read-write")
        live_keys = tmp / "live-keys.txt"
        live = run("live", "cpp_push_keys.py", dep.namesrv, TOPIC, "CID-live", str(live_keys), "90")
        plain = run("plain", "cpp_producer.py", dep.namesrv, TOPIC, "16", "pl").finish(60)
        poll(lambda: len(live.lines()) >= len(plain), 30, "CID-live to consume the plain messages")
        delayed = run("delayed", "cpp_producer.py", dep.namesrv, TOPIC, "8", "dl", DELAY_LEVEL).finish(60)
        assert all(r.get("status") == 0 for r in plain + delayed), plain + delayed
        on_master = set(stored_copies(store["broker-a"], TOPIC))
        delayed_on_master = set(stored_copies(store["broker-a"], SCHEDULE_TOPIC))
        for slave in ("broker-a-s1", "broker-a-s2"):
            poll(lambda: on_master <= set(stored_copies(store[slave], TOPIC))
                 and delayed_on_master <= set(stored_copies(store[slave], SCHEDULE_TOPIC)), 20,
                 f"{slave} to replicate broker-a's messages")
        due = {f"dl-key-{r['i']}": r["end"] + DELAY_S for r in delayed}
        first_due = min(due[k] for k in delayed_on_master)
        wait = first_due - DUE_AFTER_KILL_S - time.time()
        assert wait > 0, f"the replication wait ran {-wait:.2f} s past the kill time"
        time.sleep(wait)

        dep.cluster.nemesis.kill("broker-a")
        killed_at = time.time()
        fresh_keys = tmp / "fresh-keys.txt"
        write_keys(fresh_keys, on_master)
        fresh = run("fresh", "cpp_push_keys.py", dep.namesrv, TOPIC, "CID-fresh", str(fresh_keys), "60")
        poll(lambda: route_of_a(dep) == (acting, PermName.PERM_READ), 20, "the acting master in the route",
             interval_s=ROUTE_POLL_S)
        route_s = time.time() - killed_at
        write_keys(live_keys, set(due) | {f"pl-key-{r['i']}" for r in plain})
        got: dict[str, float] = {}
        for c in live.finish(90):
            got.setdefault(c["keys"], c["t"])
        consumed = fresh.finish(90)
        missing = delayed_on_master - set(got)
        assert not missing, f"delayed messages never delivered: {sorted(missing)}"
        first_fresh = min(c["t"] for c in consumed if c["keys"] in on_master)
        return {"route_s": route_s,
                "delayed_s": min(got[k] for k in delayed_on_master) - killed_at,
                "late_s": statistics.median(got[k] - due[k] for k in delayed_on_master),
                "consume_s": first_fresh - killed_at,
                "delayed_on_a": len(delayed_on_master), "plain_on_a": len(on_master)}
    finally:
        for client in clients:
            client.kill()
        dep.cluster.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--json", help="also write every run's numbers here")
    p.add_argument("--keep", action="store_true", help="keep each run's directory (logs, traces, stores)")
    args = p.parse_args()
    results = []
    for i in range(args.runs):
        root = tempfile.mkdtemp(prefix=f"rmqlab-bench-acting-{i}-")
        try:
            r = one_run(root)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        results.append(r)
        print(f"run {i + 1}: route {r['route_s'] * 1000:.0f} ms, first delayed {r['delayed_s']:.2f} s "
              f"(due {DUE_AFTER_KILL_S} s after the kill; median lateness {r['late_s']:.2f} s), "
              f"first consumed by a group started at the kill {r['consume_s']:.2f} s", flush=True)
    print(f"\nmedians of {len(results)} runs:")
    for key, label in (("route_s", "kill -> route shows the acting master"),
                       ("delayed_s", "kill -> first delayed message delivered"),
                       ("late_s", "lateness of delayed messages due in the outage"),
                       ("consume_s", "kill -> first consumption (group started at the kill)")):
        values = sorted(r[key] for r in results)
        print(f"  {label:<52} {statistics.median(values):6.2f} s   (min {values[0]:.2f}, max {values[-1]:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
