"""The Apache RocketMQ C++ client (PyPI `rocketmq` 0.4.4) consuming with failures against rmqlab's
NameServer and Broker as real OS processes: its listener fails the first delivery of each message,
the C++ core sends the message back (CONSUMER_SEND_MSG_BACK, 36), and the broker delivers it again
through ``%RETRY%<group>`` after the delay level's time, which the C++ consumer subscribes to on its
own.

Bounded: the broker runs with short delay levels (``messageDelayLevel``, level 3 = 1 s), and the
retry topic is created up front with ``rmqlab admin updateTopic`` (mqadmin's way) so the C++
consumer finds its route at start instead of at its first 30 s route refresh.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rmqlab.runtime.real_cluster import RealCluster, free_ports
from tests.oracles import run_cpp
from tests.cpp_helpers import lines, template, write_conf

pytestmark = pytest.mark.real

TOPIC = "TopicRetry"
GROUP = "CID-retry"
RETRY_TOPIC = "%RETRY%" + GROUP
SHORT_DELAY_LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
COUNT = 4


def start_single_master(tmp_path, overrides: dict) -> tuple[RealCluster, str]:
    """A NameServer and conf/broker.conf's broker (with ``overrides``) on free ports, once the
    broker has registered (as tests/test_cpp_client.py's start_cluster)."""
    cluster = RealCluster(str(tmp_path / "cluster"))
    ns_port, listen, ha = free_ports(3)
    namesrv = f"127.0.0.1:{ns_port}"
    conf = write_conf(tmp_path / "namesrv.conf", {"listenPort": ns_port})
    cluster.add_node("namesrv", [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=[ns_port])
    values = template("broker.conf") | {"namesrvAddr": namesrv, "listenPort": listen, "haListenPort": ha,
                                        "storePathRootDir": cluster.store_dir("broker-a"),
                                        "mappedFileSizeCommitLog": 1024 * 1024} | overrides
    conf = write_conf(tmp_path / "broker-a.properties", values)
    cluster.add_node("broker-a", [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf], ports=[listen, ha])
    cluster.start_all(timeout_s=60)
    deadline = time.monotonic() + 30
    while not any(e.kind == "namesrv.broker_register" for e in cluster.events("namesrv")):
        assert time.monotonic() < deadline, "the broker did not register with the name server"
        time.sleep(0.05)
    return cluster, namesrv


def test_cpp_push_consumer_sends_back_and_gets_the_message_again_from_the_retry_topic(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    cluster, namesrv = start_single_master(tmp_path, {"messageDelayLevel": SHORT_DELAY_LEVELS})
    try:
        sent = lines(run_cpp("cpp_producer.py", namesrv, TOPIC, str(COUNT), "rb", home=home))
        assert [s.get("status") for s in sent] == [0] * COUNT, sent
        created = subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", "updateTopic", "-n", namesrv,
                                  "-c", "DefaultCluster", "-t", RETRY_TOPIC, "-r", "1", "-w", "1"],
                                 capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stderr

        deliveries = lines(run_cpp("cpp_push_retry.py", namesrv, TOPIC, GROUP, str(COUNT), "45", home=home,
                                   timeout=90))
        keys = {f"rb-key-{i}" for i in range(COUNT)}
        by_key: dict[str, list[dict]] = {}
        for d in deliveries:
            by_key.setdefault(d["keys"], []).append(d)
        assert set(by_key) == keys
        for key, attempts in by_key.items():
            first, second = attempts[0], attempts[1]
            i = int(key.rsplit("-", 1)[1])
            assert first["body"] == second["body"] == f"rb body {i}"
            assert (first["attempt"], first["reconsume_times"], first["retry_topic"]) == (1, 0, "")
            # Back through %RETRY%<group>; the C++ client shows it with its original topic.
            assert (second["attempt"], second["reconsume_times"], second["topic"]) == (2, 1, TOPIC)
            assert second["retry_topic"] == TOPIC
            assert len(second["origin_msg_id"]) == 32  # the first copy's offset message id
            assert len(attempts) == 2, attempts  # consumed successfully once, then never again

        # The broker's side: one CONSUMER_SEND_MSG_BACK per message, each answered SUCCESS, and
        # each message parked in SCHEDULE_TOPIC_XXXX, then put on the retry topic.
        events = cluster.events("broker-a")
        backs = [e for e in events if e.kind == "frame.recv" and e.fields.get("code") == 36]
        assert len(backs) == COUNT
        answers = [e for e in events if e.kind == "frame.send" and e.fields.get("flag", 0) & 1
                   and e.fields.get("opaque") in {b.fields.get("opaque") for b in backs}
                   and e.fields.get("peer") in {b.fields.get("peer") for b in backs}]
        assert [e.fields.get("code") for e in answers] == [0] * COUNT
    finally:
        cluster.close()
