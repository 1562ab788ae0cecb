"""Runs inside the venv of Apache's 5.x gRPC client (rocketmq-python-client 5.1.2), against a Proxy:
its transactional Producer (begin_transaction, send(message, transaction), commit / rollback) with
a TransactionChecker. One JSON line per event on stdout; the caller checks them.

  transact ENDPOINT TOPIC PREFIX SECONDS
      three transactions, one message each, bodies PREFIX-commit, PREFIX-rollback and
      PREFIX-unknown: the first committed, the second rolled back, the third left open (as if the
      producer had died before ending it). The checker answers COMMIT for PREFIX-unknown and
      ROLLBACK for anything else, and the script waits until the unknown one was checked (or
      SECONDS), then 2 s for the checker's EndTransaction to go out. Lines: {"sent", "message_id",
      "transaction_id"} or {"sent", "error"}, {"ended", "resolution"} or {"ended", "error"},
      {"checked", "message_id", "body", "answer"}.
"""
import sys
import threading
import time

from py5_client import config, out
from rocketmq import Message, Producer, TransactionChecker, TransactionResolution


class Checker(TransactionChecker):
    def __init__(self, prefix):
        self.prefix = prefix
        self.unknown_checked = threading.Event()

    def check(self, message):
        body = message.body.decode()
        unknown = body == f"{self.prefix}-unknown"
        answer = TransactionResolution.COMMIT if unknown else TransactionResolution.ROLLBACK
        out(checked=message.message_id, body=body, answer="COMMIT" if unknown else "ROLLBACK")
        if unknown:
            self.unknown_checked.set()
        return answer


def transact(endpoint, topic, prefix, seconds):
    checker = Checker(prefix)
    producer = Producer(config(endpoint), (topic,), checker)
    producer.startup()
    try:
        for name in ("commit", "rollback", "unknown"):
            msg = Message()
            msg.topic = topic
            msg.body = f"{prefix}-{name}".encode()
            msg.tag = "TagTx"
            try:
                transaction = producer.begin_transaction()
                receipt = producer.send(msg, transaction)
                out(sent=name, message_id=receipt.message_id, transaction_id=receipt.transaction_id)
            except Exception as e:
                out(sent=name, error=f"{type(e).__name__}: {e}")
                continue
            if name == "unknown":
                continue
            try:
                (transaction.commit if name == "commit" else transaction.rollback)()
                out(ended=name, resolution=name)
            except Exception as e:
                out(ended=name, error=f"{type(e).__name__}: {e}")
        checker.unknown_checked.wait(float(seconds))
        time.sleep(2)  # the checker's answer is sent asynchronously after check() returns
    finally:
        producer.shutdown()


if __name__ == "__main__":
    {"transact": transact}[sys.argv[1]](*sys.argv[2:])
