"""The Apache RocketMQ C++ client (PyPI `rocketmq` 0.4.4, which nobody here wrote) against rmqlab's
NameServer and Broker running as real OS processes, started from conf files the way an operator
starts RocketMQ (issue 4 §7; ../shared/reference/real-clients.md §3).

The client runs from its own venv as a subprocess with HOME in a temp dir; the servers run under a
RealCluster (rmqlab.runtime.real_cluster), which stops them by PID.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from rmqlab.runtime.real_cluster import RealCluster, free_ports
from tests.oracles import run_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_conf(path, lines: dict) -> str:
    with open(path, "w") as f:
        for k, v in lines.items():
            f.write(f"{k}={v}\n")
    return str(path)


def template(name: str) -> dict:
    """A conf/ template as key=value pairs (comments dropped)."""
    out = {}
    with open(os.path.join(ROOT, "conf", name)) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


def start_cluster(tmp_path, brokers: dict[str, str]):
    """A NameServer plus the given brokers ({node name: conf/ template}), on free ports, once the
    name server has registered them all (see rmqlab.cluster.Cluster.start)."""
    cluster = RealCluster(str(tmp_path / "cluster"))
    ns_port, *ports = free_ports(1 + 2 * len(brokers))
    namesrv = f"127.0.0.1:{ns_port}"
    conf = write_conf(tmp_path / "namesrv.conf", {"listenPort": ns_port})
    cluster.add_node("namesrv", [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=[ns_port])
    for i, (name, tmpl) in enumerate(brokers.items()):
        listen, ha = ports[2 * i], ports[2 * i + 1]
        values = template(tmpl) | {"namesrvAddr": namesrv, "listenPort": listen, "haListenPort": ha,
                                   "storePathRootDir": cluster.store_dir(name),
                                   "mappedFileSizeCommitLog": 1024 * 1024}
        conf = write_conf(tmp_path / f"{name}.properties", values)
        cluster.add_node(name, [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf], ports=[listen, ha])
    cluster.start_all(timeout_s=60)
    deadline = time.monotonic() + 30
    while sum(1 for e in cluster.events("namesrv") if e.kind == "log"
              and e.fields.get("message", "").startswith("new broker registered")) < len(brokers):
        assert time.monotonic() < deadline, "brokers did not register with the name server"
        time.sleep(0.05)
    return cluster, namesrv


def lines(result) -> list[dict]:
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_send_pull_and_push_consume_round_trip(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    cluster, namesrv = start_cluster(tmp_path, {"broker-a": "broker.conf"})
    try:
        sent = lines(run_cpp("cpp_producer.py", namesrv, "TopicTest", "8", "rt", home=home))
        assert [s.get("status") for s in sent] == [0] * 8, sent  # SEND_OK, via the TBW102 auto-create path
        assert all(len(s["msg_id"]) == 32 for s in sent)  # offset message id: storeIP + port + offset

        pulled = lines(run_cpp("cpp_pull.py", namesrv, "TopicTest", "CID-pull", home=home))
        assert sorted(p["keys"] for p in pulled) == sorted(f"rt-key-{i}" for i in range(8))
        for p in pulled:
            i = int(p["seq"])
            assert p["body"] == f"rt body {i}" and p["tags"] == ("TagA" if i % 2 == 0 else "TagB")
        by_queue: dict[int, list[int]] = {}
        for p in pulled:
            by_queue.setdefault(p["queue_id"], []).append(p["queue_offset"])
        assert all(offsets == list(range(len(offsets))) for offsets in by_queue.values())

        pushed = lines(run_cpp("cpp_push.py", namesrv, "TopicTest", "CID-push", "8", "40", home=home, timeout=90))
        assert {p["keys"] for p in pushed} == {f"rt-key-{i}" for i in range(8)}
        assert all(p["body"] == f"rt body {p['seq']}" for p in pushed)
    finally:
        cluster.close()

