"""The orderly-consumption checker: per-queue order, read from the history only.

An orderly consumer (MessageListenerOrderly, ConsumeMessageOrderlyService) promises that the
messages of one queue are consumed one at a time, in queue-offset order, by one consumer of the
group at a time (it holds the queue's lock on the broker, LOCK_BATCH_MQ). Its `consume` operations
say so (`orderly: true`, with the group, the queue and the message's queue offset); this checker
reads them, successful or not, in invoke order:

* `out-of-order`: a message was first consumed after a message behind it in the same queue had been
  (the two messages are named). Consuming a message again (a SUSPEND retry, a redelivery after a
  failover: at-least-once) is counted as `reconsumed`, not a violation.
* `two-consumers`: the queue went from one consumer to another and back while both were consuming
  it (A, B, A): two members of the group held it at once, which a lock exists to prevent (RIP-32's
  lockInStrictMode hazard: a master and an acting slave each granting the lock).

A queue that moves to another consumer for good (a rebalance, a consumer's death) is neither, and
the history alone cannot tell a queue consumed again by its next owner (stale committed offsets:
at-least-once) from one whose lock two consumers held one after the other: RIP-32's non-strict
hazard, as tests/test_orderly_acting_master.py runs it, shows here as `reconsumed` only; the locks
themselves are the brokers' (RebalanceLockManager).
"""

from __future__ import annotations

from collections.abc import Iterable

from rmqlab.checker.result import CheckResult, Violation, result
from rmqlab.trace import ClientOp, TraceEvent, client_ops


def _consumer(op: ClientOp) -> str:
    return f"{op.node}#{op.incarnation}"


def check_order(events: Iterable[TraceEvent], *, topic: str | None = None) -> CheckResult:
    """Per-queue order of orderly `consume` operations (module docstring)."""
    ops = [op for op in client_ops(list(events)) if op.f == "consume" and isinstance(op.invoke_value, dict)
           and op.invoke_value.get("orderly") and (topic is None or op.invoke_value.get("topic") == topic)]
    violations: list[Violation] = []
    queues: dict[tuple, dict] = {}
    reconsumed = 0
    for op in ops:
        m = op.invoke_value
        key = (m.get("group"), m.get("topic"), m.get("broker_name"), m.get("queue_id"))
        q = queues.setdefault(key, {"first": {}, "last": None, "consumers": []})
        offset = m.get("queue_offset")
        where = f"{key[1]} {key[2]} queue {key[3]} (group {key[0]})"
        if offset in q["first"]:
            reconsumed += 1
        else:
            if q["last"] is not None and offset < q["last"]["queue_offset"]:
                ahead = q["last"]
                violations.append(Violation(
                    "out-of-order", f"{where}: offset {offset} ({m.get('uniq_key')}) first consumed after offset "
                    f"{ahead['queue_offset']} ({ahead['uniq_key']})", op.node, op.invoke_seq, op.invoke_time_ms,
                    {"group": key[0], "topic": key[1], "broker_name": key[2], "queue_id": key[3],
                     "first": {"queue_offset": offset, "uniq_key": m.get("uniq_key")},
                     "ahead": {k: ahead.get(k) for k in ("queue_offset", "uniq_key")}}))
            q["first"][offset] = op
            if q["last"] is None or offset > q["last"]["queue_offset"]:
                q["last"] = m
        who, seen = _consumer(op), q["consumers"]
        if not seen or seen[-1] != who:
            if who in seen and len(seen) >= 2 and seen[-2] == who:  # A, B, A
                violations.append(Violation(
                    "two-consumers", f"{where}: consumed by {who} and {seen[-1]} in turn (offset {offset})",
                    op.node, op.invoke_seq, op.invoke_time_ms,
                    {"group": key[0], "topic": key[1], "broker_name": key[2], "queue_id": key[3],
                     "consumers": sorted({who, seen[-1]})}))
            seen.append(who)
    stats = {"orderly_consumes": len(ops), "queues": len(queues), "reconsumed": reconsumed,
             "out_of_order": sum(v.what == "out-of-order" for v in violations),
             "two_consumers": sum(v.what == "two-consumers" for v in violations)}
    return result("order", violations, stats)
