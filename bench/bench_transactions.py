"""Transactional messages (4.x model) on the simulator: what a transaction costs beside a plain
send, and how long a half message whose producer died waits for the check.

    .venv/bin/python bench/bench_transactions.py [--count 2000] [--json FILE]

One run each, on the two-master cluster of tests/client_helpers.py (broker-a, broker-b, RocketMQ's
defaults: transactionCheckInterval 30 s, transactionTimeOut 6 s, transactionOpBatchInterval 3 s):

* sends/s:  ``--count`` sync sends by one DefaultMQProducer, then as many
            ``send_message_in_transaction`` calls (committed) by one TransactionMQProducer, each
            timed in wall-clock seconds (the simulator's CPU cost: a transaction is a send, a local
            transaction and a oneway END_TRANSACTION, then an op record) and in virtual seconds;
            the ratio transactional / plain;
* death -> resolved: producer p1 sends a transaction left UNKNOW and is killed at once; p2, a
            live producer of the same group, answers the check with COMMIT. Measured in virtual
            time from the kill to the broker's COMMITTED event of that half message (the state
            event of machine TransactionalMessage.half): the wait for a check run (every 30 s,
            after the 6 s immunity) plus the check round trip.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rmqlab.client import DefaultMQProducer  # noqa: E402
from rmqlab.client.producer.local_transaction_state import LocalTransactionState  # noqa: E402
from rmqlab.client.producer.transaction_mq_producer import TransactionMQProducer  # noqa: E402
from rmqlab.common.message import Message  # noqa: E402
from tests.client_helpers import TOPIC, Lab  # noqa: E402


class Listener:
    def __init__(self, local, checked):
        self.local, self.checked = local, checked

    def execute_local_transaction(self, msg, arg):
        return self.local

    def check_local_transaction(self, msg):
        return self.checked


def throughput(count: int) -> dict:
    lab = Lab()
    lab.create_topic()
    lab.add_client("plain", lambda: {"producer": DefaultMQProducer("PG_PLAIN", lab.namesrv_addr)})
    lab.add_client("tx", lambda: {"producer": TransactionMQProducer(
        "PG_TX", lab.namesrv_addr, transaction_listener=Listener(LocalTransactionState.COMMIT_MESSAGE,
                                                                 LocalTransactionState.COMMIT_MESSAGE))})
    plain, tx = lab.client("plain", "producer"), lab.client("tx", "producer")

    async def run(send):
        for i in range(count):
            await send(Message(TOPIC, f"m{i}".encode()))

    lab.run(plain.send(Message(TOPIC, b"warm-up")))
    lab.run(tx.send_message_in_transaction(Message(TOPIC, b"warm-up")))
    out = {}
    for name, send in (("plain", plain.send), ("transactional", tx.send_message_in_transaction)):
        v0, w0 = lab.sim.now_ms(), time.perf_counter()
        lab.run(run(send))
        wall, virtual = time.perf_counter() - w0, (lab.sim.now_ms() - v0) / 1000
        out[name] = {"count": count, "wall_s": round(wall, 3), "sends_per_wall_s": round(count / wall, 1),
                     "virtual_s": round(virtual, 3), "sends_per_virtual_s": round(count / virtual, 1)}
    lab.close()
    out["ratio_wall"] = round(out["transactional"]["sends_per_wall_s"] / out["plain"]["sends_per_wall_s"], 3)
    out["ratio_virtual"] = round(out["transactional"]["sends_per_virtual_s"] / out["plain"]["sends_per_virtual_s"], 3)
    return out


def death_to_resolved() -> dict:
    lab = Lab()
    lab.create_topic()
    S = LocalTransactionState
    for node, listener in (("p1", Listener(S.UNKNOW, S.COMMIT_MESSAGE)), ("p2", Listener(S.UNKNOW, S.COMMIT_MESSAGE))):
        lab.add_client(node, lambda listener=listener: {"producer": TransactionMQProducer(
            "PG_TX", lab.namesrv_addr, transaction_listener=listener)})
    p2 = lab.client("p2", "producer")
    lab.run(p2.send_message_in_transaction(Message(TOPIC, b"p2 registers")))
    lab.sim.run_for(35_000)  # p2 heartbeats to both brokers
    result = lab.run(lab.client("p1", "producer").send_message_in_transaction(Message(TOPIC, b"orphan")))
    killed = lab.sim.now_ms()
    lab.sim.nemesis.kill("p1")
    committed = None
    while committed is None and lab.sim.now_ms() - killed < 300_000:
        lab.sim.run_for(100)
        committed = next((e for e in lab.sim.tracer.events if e.kind == "state"
                          and e.fields.get("machine") == "TransactionalMessage.half"
                          and e.fields["to"] == "COMMITTED" and e.fields["uniq_key"] == result.msg_id), None)
    lab.close()
    if committed is None:
        return {"resolved": False}
    return {"resolved": True, "death_to_resolved_virtual_s": round((committed.time_ms - killed) / 1000, 3),
            "broker": committed.fields["broker_name"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = {"throughput": throughput(args.count), "death": death_to_resolved()}
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
