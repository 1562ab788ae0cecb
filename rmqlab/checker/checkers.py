"""The checkers: each reads only the history — the event trace (datasets/README.md) and, for the
replica checker, the store files the brokers left — and returns a CheckResult.

    check_total_queue(events)              Jepsen's total-queue: every acknowledged send is read
    check_replicas(events, stores)         replicas equal byte for byte on the committed prefix
    check_single_master(events)            at most one master per broker set and epoch

They know nothing of the workload or the faults that produced the history (Maelstrom: workload,
nemesis and checker meet only at the history), so a lab's invariant panel and the grading pipeline
run them on any recorded trace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from rmqlab.checker.result import CheckResult, Violation, result
from rmqlab.trace import ClientOp, TraceEvent, client_ops

MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


def send_acknowledged(op: ClientOp) -> bool:
    """A send the producer was told is safe: ok with SendStatus SEND_OK. An ok with another status
    (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_DISK_TIMEOUT) means the master stored it but
    could not confirm the replication or flush allAckInSyncStateSet asks for: RocketMQ promises
    nothing for it, so it counts as indeterminate, not acknowledged."""
    return op.type == "ok" and isinstance(op.value, dict) and op.value.get("send_status") == "SEND_OK"


# --- the broker sets' masters, from the `role` events -------------------------------------------------
def broker_sets(events: Iterable[TraceEvent]) -> dict[str, str]:
    """node -> broker set (brokerName), learnt from the nodes' `epoch` events."""
    return {e.node: e.fields["broker_set"] for e in events if e.kind == "epoch"}


def master_elections(events: list[TraceEvent]) -> list[TraceEvent]:
    """Every `role` event of a broker (component broker) taking a master role, in trace order."""
    return [e for e in events if e.kind == "role" and e.fields.get("component", "broker") == "broker"
            and e.fields.get("to") in MASTER_ROLES]


def _masters_around(elections: list[TraceEvent], seq: int) -> dict:
    """The master of the highest epoch elected before `seq`, and the next election after it: where
    a lost message was acknowledged, and the election that probably dropped it."""
    before = [e for e in elections if e.seq < seq]
    then = max(before, key=lambda e: (e.fields.get("epoch") or 0, e.seq)) if before else None
    epoch = (then.fields.get("epoch") or 0) if then else 0
    after = [e for e in elections if e.seq > seq and (e.fields.get("epoch") or 0) > epoch]
    nxt = after[0] if after else None
    return {"master": then.node if then else None, "master_epoch": epoch,
            "next_master": nxt.node if nxt else None, "next_epoch": nxt.fields.get("epoch") if nxt else None,
            "next_master_seq": nxt.seq if nxt else None, "next_master_time_ms": nxt.time_ms if nxt else None}


# --- (a) total queue ------------------------------------------------------------------------------------
def check_total_queue(events: Iterable[TraceEvent], *, topic: str | None = None,
                      acknowledged: Callable[[ClientOp], bool] = send_acknowledged) -> CheckResult:
    """Jepsen's total-queue over `send` operations and the messages `pull` / `consume` operations
    read (matched by UNIQ_KEY). Violations: `lost` (acknowledged, never read), `unexpected` (read,
    never sent), `read-after-fail` (read although its send failed: `fail` means it certainly did
    not happen), `corrupted` (read with another body CRC than sent). Reading a message twice
    (a producer retry, a redelivery) is at-least-once delivery, counted, not a violation; an
    indeterminate send (info, or ok without SEND_OK) may or may not be read."""
    events = list(events)
    ops = client_ops(events)
    sends: dict[str, list[ClientOp]] = {}
    for op in ops:
        if op.f == "send" and isinstance(op.invoke_value, dict) and (topic is None or op.invoke_value.get("topic") == topic):
            key = op.invoke_value.get("uniq_key")
            if key:
                sends.setdefault(key, []).append(op)
    reads: dict[str, list[tuple[ClientOp, dict]]] = {}
    for op in ops:
        if op.type != "ok":
            continue
        if op.f == "pull" and isinstance(op.value, dict):
            found = op.value.get("messages") or []
        elif op.f == "consume" and isinstance(op.invoke_value, dict):
            found = [op.invoke_value]
        else:
            continue
        for m in found:
            if (topic is None or m.get("topic") == topic) and m.get("uniq_key"):
                reads.setdefault(m["uniq_key"], []).append((op, m))

    elections = master_elections(events)
    violations: list[Violation] = []
    acked = {k for k, s in sends.items() if any(acknowledged(op) for op in s)}
    failed = {k for k, s in sends.items() if all(op.type == "fail" for op in s)}
    indeterminate = set(sends) - acked - failed
    for key in sorted(acked - set(reads)):
        op = min((o for o in sends[key] if acknowledged(o)), key=lambda o: o.complete_seq)
        where = {k: op.value.get(k) for k in ("broker_name", "queue_id", "queue_offset", "msg_id")}
        violations.append(Violation(
            "lost", f"send of {key} acknowledged at seq {op.complete_seq} but never read "
            f"({where['broker_name']} queue {where['queue_id']} offset {where['queue_offset']})",
            op.node, op.complete_seq, op.complete_time_ms,
            {"uniq_key": key, **where, **_masters_around(elections, op.complete_seq)}))
    for key in sorted(set(reads) - set(sends)):
        op, m = reads[key][0]
        violations.append(Violation("unexpected", f"{key} read but never sent", op.node, op.complete_seq,
                                    op.complete_time_ms, {"uniq_key": key, "queue_id": m.get("queue_id"),
                                                          "queue_offset": m.get("queue_offset")}))
    for key in sorted(failed & set(reads)):
        op, m = reads[key][0]
        violations.append(Violation("read-after-fail", f"{key} read although its send failed "
                                    f"(seq {sends[key][-1].complete_seq})", op.node, op.complete_seq,
                                    op.complete_time_ms, {"uniq_key": key}))
    for key in sorted(set(reads) & set(sends)):
        crcs = {op.invoke_value.get("body_crc") for op in sends[key]}
        for op, m in reads[key]:
            if m.get("body_crc") not in crcs:
                violations.append(Violation("corrupted", f"{key} read with body CRC {m.get('body_crc')}, "
                                            f"sent with {sorted(crcs)}", op.node, op.complete_seq,
                                            op.complete_time_ms, {"uniq_key": key}))
                break
    stats = {"attempted": len(sends), "acknowledged": len(acked), "failed": len(failed),
             "indeterminate": len(indeterminate), "read": len(reads),
             "lost": len(acked - set(reads)), "duplicated": sum(1 for r in reads.values() if len(r) > 1),
             "recovered": len(indeterminate & set(reads)), "unexpected": len(set(reads) - set(sends))}
    return result("total-queue", violations, stats)


# --- (c) one master per broker set and epoch -------------------------------------------------------------
def check_single_master(events: Iterable[TraceEvent]) -> CheckResult:
    """Election safety: in each broker set, no two brokers took a master role with the same
    epoch (a stale master of an older epoch may linger; that is what epochs fence). Violation
    `two-masters` at the second broker's `role` event."""
    events = list(events)
    sets = broker_sets(events)  # a whole-trace pass: a slave may trace its first epoch after its role
    first: dict[tuple[str, int], TraceEvent] = {}
    violations: list[Violation] = []
    for e in events:
        if e.kind == "role" and e.fields.get("component", "broker") == "broker" and e.fields.get("to") in MASTER_ROLES:
            key = (sets.get(e.node, e.node), int(e.fields.get("epoch") or 0))
            other = first.setdefault(key, e)
            if other.node != e.node:
                violations.append(Violation(
                    "two-masters", f"{e.node} became master of {key[0]} in epoch {key[1]}, which {other.node} "
                    f"took at seq {other.seq}", e.node, e.seq, e.time_ms,
                    {"broker_set": key[0], "epoch": key[1], "first": other.node, "first_seq": other.seq}))
    return result("single-master", violations, {"elections": len(first),
                                                "epochs": sorted({epoch for _, epoch in first})})


# --- (b) the replicas' files ----------------------------------------------------------------------------
def read_commitlog(store_root: str) -> bytes:
    """The commit log of a store as one byte string: its mapped files in offset order (each is
    named by its start offset, 20 digits), zero-filled tails included."""
    d = os.path.join(store_root, "commitlog")
    if not os.path.isdir(d):
        return b""
    data = bytearray()
    for name in sorted(os.listdir(d)):
        if name.isdigit():
            if int(name) != len(data):
                break  # a gap: nothing after it is reachable
            with open(os.path.join(d, name), "rb") as f:
                data += f.read()
    return bytes(data)


def read_epochs(store_root: str) -> list[tuple[int, int]]:
    """(epoch, start offset) of each entry of the store's epoch file (`epochFileCheckpoint`)."""
    from rmqlab.store.epoch_file_cache import EpochFileCache

    path = os.path.join(store_root, "epochFileCheckpoint")
    cache = EpochFileCache(path)
    cache.init_cache_from_file()
    return [(e.epoch, e.start_offset) for e in cache.get_all_entries()]


def confirm_offsets(events: Iterable[TraceEvent]) -> dict[str, TraceEvent]:
    """node -> its last `offset` event of which=confirmed."""
    last: dict[str, TraceEvent] = {}
    for e in events:
        if e.kind == "offset" and e.fields.get("which") == "confirmed":
            last[e.node] = e
    return last


def _first_difference(a: bytes, b: bytes, end: int) -> int | None:
    """The first offset below `end` where `a` and `b` differ (both hold at least `end` bytes)."""
    if a[:end] == b[:end]:
        return None
    step = 4096
    for lo in range(0, end, step):
        hi = min(lo + step, end)
        if a[lo:hi] != b[lo:hi]:
            return next(i for i in range(lo, hi) if a[i] != b[i])
    return None


def check_replicas(events: Iterable[TraceEvent], stores: Mapping[str, str]) -> CheckResult:
    """The replicas of each broker set (grouped by their `epoch` events) agree on the committed
    prefix: up to the lowest confirm offset any of them last traced, their commit logs are equal
    byte for byte, and their epoch files agree on the epochs that start inside it and on every
    epoch they both hold (same start offset). `stores`: broker node -> its storePathRootDir, read
    after the run. Violations: `short-replica`, `commitlog-diverged`, `epochs-diverged` (files
    only: no seq; time is the end of the trace)."""
    events = list(events)
    end_ms = events[-1].time_ms if events else 0.0
    confirms = confirm_offsets(events)
    sets = broker_sets(events)
    groups: dict[str, list[str]] = {}
    for node in sorted(stores):
        groups.setdefault(sets.get(node, node), []).append(node)
    violations: list[Violation] = []
    stats: dict = {}
    for set_name, nodes in sorted(groups.items()):
        logs = {n: read_commitlog(stores[n]) for n in nodes}
        epochs = {n: read_epochs(stores[n]) for n in nodes}
        confirm = {n: (confirms[n].fields["value"] if n in confirms else 0) for n in nodes}
        committed = min(confirm.values()) if confirm else 0
        # The reference: the replica that confirmed the most (the master, once converged).
        ref = max(nodes, key=lambda n: (confirm[n], n))
        ref_committed_epochs = [x for x in epochs[ref] if x[1] < committed]
        stats[set_name] = {"replicas": nodes, "committed_offset": committed, "confirm_offsets": confirm,
                           "reference": ref, "epochs": epochs[ref]}
        for n in nodes:
            if len(logs[n]) < committed:
                violations.append(Violation("short-replica", f"{n} holds {len(logs[n])} bytes of the committed "
                                            f"prefix of {committed}", n, None, end_ms, {"broker_set": set_name}))
                continue
            if n == ref:
                continue
            at = _first_difference(logs[ref], logs[n], committed)
            if at is not None:
                epoch = next((e for e, s in reversed(epochs[ref]) if s <= at), None)
                violations.append(Violation(
                    "commitlog-diverged", f"{n}'s commitlog differs from {ref}'s at offset {at} (epoch {epoch}), "
                    f"inside the committed prefix of {committed} bytes", n, None, end_ms,
                    {"broker_set": set_name, "offset": at, "reference": ref, "epoch": epoch,
                     "committed_offset": committed}))
            mine = [x for x in epochs[n] if x[1] < committed]
            shared = {e: s for e, s in epochs[n]}
            clash = [(e, s, shared[e]) for e, s in epochs[ref] if e in shared and shared[e] != s]
            if mine != ref_committed_epochs or clash:
                violations.append(Violation(
                    "epochs-diverged", f"{n}'s epoch file {epochs[n]} disagrees with {ref}'s {epochs[ref]} "
                    f"(committed prefix {committed})", n, None, end_ms,
                    {"broker_set": set_name, "reference": ref, "epochs": epochs[n], "reference_epochs": epochs[ref]}))
    return result("replicas", violations, stats)
