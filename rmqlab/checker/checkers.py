"""The checkers: each reads only the history — the event trace (datasets/README.md) and, for the
replica checker, the store files the brokers left — and returns a CheckResult.

    check_total_queue(events)              Jepsen's total-queue: every acknowledged send is read
    check_replicas(events, stores)         replicas equal byte for byte on the committed prefix
    check_single_master(events)            at most one master per broker set and epoch
    check_elections(events)                every elected master came from the SyncStateSet (else: unclean)
    check_truncations(events)              each returning slave cut its log at the consistent point,
                                           never below what it had confirmed

They know nothing of the workload or the faults that produced the history (Maelstrom: workload,
nemesis and checker meet only at the history), so a lab's invariant panel and the grading pipeline
run them on any recorded trace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rmqlab.checker.result import CheckResult, Violation, result
from rmqlab.remoting.request_code import RequestCode
from rmqlab.trace import ClientOp, TraceEvent, client_ops, messages_read

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
    indeterminate send (info, or ok without SEND_OK) may or may not be read.

    Transactions (TransactionMQProducer's `transaction` operations, and `transaction_check` for
    the broker's checks) count as sends whose fate the producer decides: COMMIT_MESSAGE (from the
    local transaction, or from the last check answered when that was UNKNOW) makes it acknowledged,
    so never reading it is `lost`; ROLLBACK_MESSAGE means it must never be read (`rolled-back-read`);
    still UNKNOW at the end, it is indeterminate."""
    events = list(events)
    ops = client_ops(events)
    sends: dict[str, list[ClientOp]] = {}
    for op in ops:
        if (op.f in ("send", "transaction") and isinstance(op.invoke_value, dict)
                and (topic is None or op.invoke_value.get("topic") == topic)):
            key = op.invoke_value.get("uniq_key")
            if key:
                sends.setdefault(key, []).append(op)
    decided = _transaction_decisions(ops)

    def is_acked(op: ClientOp) -> bool:
        """`acknowledged` for a send; for a transaction, its producer's decision to commit."""
        if op.f == "transaction":
            return decided.get(op.invoke_value.get("uniq_key")) == _COMMIT
        return acknowledged(op)
    reads: dict[str, list[tuple[ClientOp, dict]]] = {}
    for op in ops:
        for m in messages_read(op):  # remoting pulls, 5.x receives, listener consumes
            if (topic is None or m.get("topic") == topic) and m.get("uniq_key"):
                reads.setdefault(m["uniq_key"], []).append((op, m))

    elections = master_elections(events)
    violations: list[Violation] = []
    acked = {k for k, s in sends.items() if any(is_acked(op) for op in s)}
    failed = {k for k, s in sends.items() if all(op.type == "fail" for op in s)}
    indeterminate = set(sends) - acked - failed
    for key in sorted(acked - set(reads)):
        op = min((o for o in sends[key] if is_acked(o)), key=lambda o: o.complete_seq)
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
    rolled_back = {k for k, d in decided.items() if d == _ROLLBACK and k in sends}
    for key in sorted(rolled_back & set(reads)):
        op, m = reads[key][0]
        violations.append(Violation("rolled-back-read", f"{key} read although its transaction was rolled back",
                                    op.node, op.complete_seq, op.complete_time_ms,
                                    {"uniq_key": key, "queue_id": m.get("queue_id"),
                                     "queue_offset": m.get("queue_offset")}))
    indeterminate -= rolled_back
    stats = {"attempted": len(sends), "acknowledged": len(acked), "failed": len(failed),
             "indeterminate": len(indeterminate), "read": len(reads),
             "lost": len(acked - set(reads)), "duplicated": sum(1 for r in reads.values() if len(r) > 1),
             "recovered": len(indeterminate & set(reads)), "unexpected": len(set(reads) - set(sends))}
    if decided:  # only then: the stats of a trace without transactions stay as they were
        stats["rolled_back"] = len(rolled_back)
    return result("total-queue", violations, stats)


_COMMIT, _ROLLBACK = "COMMIT_MESSAGE", "ROLLBACK_MESSAGE"


def _transaction_decisions(ops: list[ClientOp]) -> dict[str, str]:
    """uniq_key -> the producer's decision on its transaction: the local transaction's COMMIT or
    ROLLBACK; while that was UNKNOW, the first check answered with one (the broker resolves the half
    message at the first decisive answer; a check answered UNKNOW decides nothing)."""
    decided: dict[str, str] = {}
    for op in ops:
        if op.f not in ("transaction", "transaction_check") or op.type != "ok" or not isinstance(op.value, dict):
            continue
        key, state = (op.invoke_value or {}).get("uniq_key"), op.value.get("local_transaction_state")
        if not key or state not in (_COMMIT, _ROLLBACK):
            continue
        if op.f == "transaction":
            decided[key] = state
        else:
            decided.setdefault(key, state)
    return decided


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


def check_dledger_replicas(events: Iterable[TraceEvent], stores: Mapping[str, str]) -> CheckResult:
    """DLedger CommitLog mode: the members of each DLedger group (their `dledger.role` events)
    hold the same log up to the group's commit index (the highest `dledger.commit` index traced:
    what a majority held when a leader acknowledged it, so every member must end with it once the
    group converged). Entry i is compared by its 32-byte index unit and its bytes in the data files
    (DLedgerMmapFileStore's layout under <storePathRootDir>/dledger-<selfId>/); entries above the
    commit index may differ (a leader's uncommitted tail is truncated by the next one).
    `stores`: broker node -> its storePathRootDir, read after the run. Violations: `short-replica`,
    `entries-diverged` (files only: no seq; time is the end of the trace)."""
    events = list(events)
    end_ms = events[-1].time_ms if events else 0.0
    members: dict[str, dict[str, str]] = {}   # group -> node -> selfId
    committed: dict[str, int] = {}
    last_leader: dict[str, str] = {}   # group -> the node of its last commit: the reference
    for e in events:
        if e.kind == "dledger.role":
            members.setdefault(e.fields["group"], {})[e.node] = e.fields["self_id"]
        elif e.kind == "dledger.commit":
            committed[e.fields["group"]] = max(committed.get(e.fields["group"], -1), e.fields["commit_index"])
            last_leader[e.fields["group"]] = e.node
    violations: list[Violation] = []
    stats: dict = {}
    for group, nodes in sorted(members.items()):
        nodes = {n: i for n, i in nodes.items() if n in stores}
        upto = committed.get(group, -1)
        logs = {n: _dledger_entries(os.path.join(stores[n], f"dledger-{i}"), upto) for n, i in sorted(nodes.items())}
        ref = last_leader.get(group) if last_leader.get(group) in logs else \
            max(logs, key=lambda n: (len(logs[n]), n)) if logs else None
        stats[group] = {"members": sorted(nodes), "committed_index": upto, "reference": ref}
        for n, log in logs.items():
            if len(log) < upto + 1:
                violations.append(Violation("short-replica", f"{n} holds {len(log)} entries of the {upto + 1} "
                                            f"committed in DLedger group {group}", n, None, end_ms, {"group": group}))
            elif n != ref:
                at = next((i for i, (a, b) in enumerate(zip(logs[ref], log)) if a != b), None)
                if at is not None:
                    violations.append(Violation(
                        "entries-diverged", f"{n}'s DLedger entry {at} differs from {ref}'s, at or below the commit "
                        f"index {upto} of group {group}", n, None, end_ms,
                        {"group": group, "index": at, "reference": ref, "committed_index": upto}))
    return result("replicas", violations, stats)


def _dledger_entries(member_root: str, upto: int) -> list[tuple[bytes, bytes]]:
    """(index unit, entry bytes) of entries 0..upto of a DLedger member's files, stopping at the
    first one missing (an empty unit, a unit of another index, or data cut short)."""
    from rmqlab.dledger.entry.dledger_entry_coder import INDEX_UNIT_SIZE, decode_index

    index_files, data_files = _mapped_files(os.path.join(member_root, "index")), \
        _mapped_files(os.path.join(member_root, "data"))
    out: list[tuple[bytes, bytes]] = []
    for i in range(upto + 1):
        unit = _read_mapped(index_files, i * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if len(unit) < INDEX_UNIT_SIZE:
            break
        _magic, pos, size, index, _term = decode_index(unit)
        if index != i or size <= 0:
            break
        data = _read_mapped(data_files, pos, size)
        if len(data) < size:
            break
        out.append((unit, data))
    return out


def _mapped_files(directory: str) -> list[tuple[int, str]]:
    """(start offset, path) of the mapped files in `directory` (each named by its start offset)."""
    names = sorted(n for n in os.listdir(directory) if n.isdigit()) if os.path.isdir(directory) else []
    return [(int(n), os.path.join(directory, n)) for n in names]


def _read_mapped(files: list[tuple[int, str]], offset: int, size: int) -> bytes:
    """`size` bytes at `offset` of a mapped-file list (never across a file end: DLedger entries and
    index units do not straddle files); fewer when the file is missing or shorter."""
    start, path = next(((s, p) for s, p in reversed(files) if s <= offset), (None, None))
    if path is None:
        return b""
    with open(path, "rb") as f:
        f.seek(offset - start)
        return f.read(size)


def commitlog_end(store_root: str) -> int:
    """Where a store's commit log ends: the offset after its last whole, CRC-valid record (what
    recovery would find; a torn or zero tail is not data). Files are walked in offset order; a
    BLANK filler moves on to the next file."""
    from rmqlab.common.message.message_decoder import MessageFormatError, decode
    from rmqlab.common.message.message_version import BLANK_MAGIC_CODE

    d = os.path.join(store_root, "commitlog")
    names = sorted(n for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []
    end = int(names[0]) if names else 0  # expired files may have gone: the log starts at the first left
    for name in names:
        if int(name) != end:
            break  # a gap: nothing after it is reachable
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 8 <= len(data):
            if int.from_bytes(data[pos + 4:pos + 8], "big", signed=True) == BLANK_MAGIC_CODE:
                break  # the rest of the file is filler: the log goes on in the next one
            try:
                pos += decode(data, pos).store_size
            except MessageFormatError:
                return end + pos
        else:
            if pos < len(data):
                return end + pos  # a tail too short to be a record
        end += len(data)
    return end


# --- the controllers' replicated log, and the replica info it builds --------------------------------------
# One reading of the `controller.event`s, shared by check_elections, the labs' SyncStateSet figures
# (rmqlab.viz.sync_state_set, rmqlab.viz.controller) and the lab notebooks.
ELECT_MASTER, ALTER_SYNC_STATE_SET = "ElectMasterEvent", "AlterSyncStateSetEvent"


def controller_log(events: Iterable[TraceEvent]) -> list[TraceEvent]:
    """The controllers' replicated event log, once: of the `controller.event`s every controller
    emits as it applies an entry, the first per (Raft index, position in the entry), in log order;
    fenced entries (applied false) and OpenTerm barriers are left out."""
    first: dict[tuple[int, int], TraceEvent] = {}
    for e in events:
        if e.kind == "controller.event" and e.fields.get("applied") and e.fields.get("event") != "OpenTerm":
            first.setdefault((e.fields["index"], e.fields.get("position", 0)), e)
    return [first[key] for key in sorted(first)]


@dataclass(frozen=True)
class SyncStatePoint:
    """A broker set's replica info right after one event of the controllers' log: its
    SyncStateInfo (master, masterEpoch, SyncStateSet, syncStateSetEpoch) and the broker ids its
    BrokerReplicaInfo has registered. `seq`, `time_ms` and `node`: the event's first application."""

    seq: int
    time_ms: float
    node: str
    index: int                     # the Raft log index of the entry
    event: str                     # the RIP-44 event type (ElectMasterEvent, ...)
    broker_set: str
    master: int | None
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int
    broker_ids: tuple[int, ...]


def sync_state_history(events: Iterable[TraceEvent], broker_set: str | None = None) -> list[SyncStatePoint]:
    """Every change of a broker set's replica info (of every set if None), one point per event of
    the controllers' log, replayed as ReplicasInfoManager.applyEvent does: an
    ElectMasterEvent sets master := the elected id, SyncStateSet := {it} (a new syncStateSetEpoch),
    or with nobody elected only forgets the master, and bumps masterEpoch either way; an
    AlterSyncStateSetEvent sets the SyncStateSet (a new syncStateSetEpoch); an ApplyBrokerIdEvent
    registers an id, the set's first one starting both tables afresh; a CleanBrokerDataEvent forgets
    ids (no new epoch; a table left empty is dropped), or the whole set. Elections and alters of a
    set missing from either table change nothing.

    A model written from RocketMQ's ReplicasInfoManager (controller/src/main/java/org/apache/rocketmq/
    controller/impl/manager/ReplicasInfoManager.java, applyEvent) rather than a call into rmqlab's
    controller: a checker that
    judged the controllers with their own state machine would inherit its bugs
    (tests/test_lab_controller.py checks that the two agree). Deviation, for synthetic and partial
    traces: an election or alter of a set the log never named before starts it, unregistered, where
    ReplicasInfoManager ignores it (the controllers never write one: their requests check first)."""
    ids: dict[str, frozenset[int]] = {}  # replicaInfoTable: the registered broker ids
    infos: dict[str, dict] = {}          # syncStateSetInfoTable: master, epochs, SyncStateSet
    out = []
    for e in controller_log(events):
        body = e.fields.get("body") or {}
        name = e.fields.get("broker_set") or body.get("brokerName")
        kind = e.fields["event"]
        if kind in (ELECT_MASTER, ALTER_SYNC_STATE_SET) and name not in ids and name not in infos:
            ids[name], infos[name] = frozenset(), _new_sync_state_info()
        info, known = infos.get(name), name in ids and name in infos
        if kind == ELECT_MASTER and known:
            info["master_epoch"] += 1
            if body.get("newMasterElected"):
                info.update(master=body["newMasterBrokerId"], sync_state_set=frozenset({body["newMasterBrokerId"]}),
                            sync_state_set_epoch=info["sync_state_set_epoch"] + 1)
            else:
                info["master"] = None
        elif kind == ALTER_SYNC_STATE_SET and known:
            info.update(sync_state_set=frozenset(body.get("newSyncStateSet") or ()),
                        sync_state_set_epoch=info["sync_state_set_epoch"] + 1)
        elif kind == "ApplyBrokerIdEvent":
            if known:
                ids[name] |= {body["newBrokerId"]}
            else:
                ids[name], infos[name] = frozenset({body["newBrokerId"]}), _new_sync_state_info()
        elif kind == "CleanBrokerDataEvent" and not body.get("brokerIdSetToClean"):
            ids.pop(name, None)
            infos.pop(name, None)
        elif kind == "CleanBrokerDataEvent" and known:
            gone = set(body["brokerIdSetToClean"])
            ids[name] -= gone
            info["sync_state_set"] -= gone
            if not ids[name]:
                del ids[name]
            if not info["sync_state_set"]:
                del infos[name]
        if broker_set is None or name == broker_set:
            info = infos.get(name) or _new_sync_state_info()
            out.append(SyncStatePoint(e.seq, e.time_ms, e.node, e.fields["index"], kind, name, info["master"],
                                      info["master_epoch"], tuple(sorted(info["sync_state_set"])),
                                      info["sync_state_set_epoch"], tuple(sorted(ids.get(name, ())))))
    return out


def _new_sync_state_info() -> dict:
    return {"master": None, "master_epoch": 0, "sync_state_set": frozenset(), "sync_state_set_epoch": 0}


def sync_state_sets(events: Iterable[TraceEvent]) -> dict[str, list[int]]:
    """broker set -> its SyncStateSet (controller-assigned broker ids, sorted) as the controllers'
    replicated log has it at the end of `events`; a set with none (yet, or any more) is left out."""
    last: dict[str, SyncStatePoint] = {}
    for p in sync_state_history(events):
        last[p.broker_set] = p
    return {name: list(p.sync_state_set) for name, p in sorted(last.items()) if p.sync_state_set}


def broker_id_nodes(events: Iterable[TraceEvent]) -> dict[tuple[str, int], str]:
    """(broker set, controller-assigned broker id) -> the broker node holding it: the sender of a
    CONTROLLER_REGISTER_BROKER request naming the brokerName and brokerId (a broker registers with
    the id the controllers applied for it, at every start)."""
    out = {}
    for e in events:
        if e.kind == "frame.send" and e.fields.get("code") == RequestCode.CONTROLLER_REGISTER_BROKER \
                and not e.fields.get("flag", 0) & 1:
            ext = e.fields.get("ext_fields") or {}
            if ext.get("brokerName") and str(ext.get("brokerId", "")).lstrip("-").isdigit():
                out[(ext["brokerName"], int(ext["brokerId"]))] = e.node
    return out


def check_elections(events: Iterable[TraceEvent], *, unclean_allowed: bool = False) -> CheckResult:
    """Each master the controllers elect is a member of its broker set's SyncStateSet as their
    replicated log has it at that point (AlterSyncStateSetEvent sets it, an ElectMasterEvent
    resets it to {the new master}); a set's first election, before any SyncStateSet, may pick any
    replica. An election from outside is unclean (enableElectUncleanMaster, RocketMQ's "主备自动切换模式部署"
    documentation: "可能会选取数据落后的副本作为 Master 而丢失消息"): violation `unclean-election` at the event,
    naming the elected broker — unless `unclean_allowed` (the trace does not carry the controllers'
    configuration; a lab that enabled it says so), when it is listed in the stats only."""
    events = list(events)
    nodes = broker_id_nodes(events)
    elections, unclean, violations = 0, [], []
    before: dict[str, tuple[int, ...]] = {}  # broker set -> its SyncStateSet before the event at hand
    for p in sync_state_history(events):
        members, before[p.broker_set] = before.get(p.broker_set, ()), p.sync_state_set
        if p.event != ELECT_MASTER or p.master is None:
            continue  # not an election, or no candidate: the set has no master in this epoch
        elections += 1
        if not members or p.master in members:
            continue
        node = nodes.get((p.broker_set, p.master))
        entry = {"broker_set": p.broker_set, "broker_id": p.master, "node": node, "epoch": p.master_epoch,
                 "sync_state_set": list(members), "seq": p.seq, "time_ms": p.time_ms}
        unclean.append(entry)
        if not unclean_allowed:
            who = f"{node} (id {p.master})" if node else f"broker id {p.master}"
            violations.append(Violation(
                "unclean-election", f"{who} elected master of {p.broker_set} in epoch {p.master_epoch} from outside "
                f"its SyncStateSet {list(members)}", node or p.node, p.seq, p.time_ms, entry))
    return result("elections", violations, {"elections": elections, "unclean": unclean,
                                            "unclean_allowed": unclean_allowed})


# --- the slaves' truncations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Truncation:
    """One handshake decision of a slave (AutoSwitchHAClient.doTruncate), from its `ha.truncate`
    event (ok, truncate_offset, consistent_epoch, local_max_offset, master_max_offset, reason;
    datasets/README.md) and the master's handshake frame just
    before it. `point`: where the slave cuts its log (None: nothing to cut); `epoch`: the consistent
    epoch (None when no epochs were compared); `local_max` / `master_max`: both log ends as
    compared; `local_entries`: the slave's epoch file then, as the `epoch` events and earlier
    truncations left it; `master_entries`: the master's, from the handshake frame's `epoch_entries`
    (else replayed from the master's own `epoch` events); `reason`: the decision in words."""

    seq: int
    time_ms: float
    node: str
    ok: bool
    point: int | None
    epoch: int | None
    local_max: int | None
    master_max: int | None
    master: str | None
    local_entries: tuple[tuple[int, int], ...]
    master_entries: tuple[tuple[int, int], ...] | None
    reason: str


def truncations(events: Iterable[TraceEvent]) -> list[Truncation]:
    """Every handshake decision of the trace, in order, each with both epoch files as they were."""
    return _walk_epoch_files(events)[1]


def replay_epochs(events: Iterable[TraceEvent], until_seq: int | None = None) -> dict[str, list[tuple[int, int]]]:
    """node -> its epoch file, (epoch, start offset) ascending, as the `epoch` events and the
    handshake truncations of the trace (up to `until_seq`) leave it. What the trace does not show
    (a torn tail cut at start-up, AutoSwitchHAService.truncateInvalidMsg) is not replayed; the store's file
    (read_epochs) is the authority after a run."""
    return _walk_epoch_files(e for e in events if until_seq is None or e.seq <= until_seq)[0]


def _walk_epoch_files(events: Iterable[TraceEvent]) -> tuple[dict[str, list[tuple[int, int]]], list[Truncation]]:
    files: dict[str, list[tuple[int, int]]] = {}
    listening: dict[str, str] = {}  # host:port -> the node that accepted connections there
    handshake: dict[str, TraceEvent] = {}  # node -> the master handshake it received last
    out: list[Truncation] = []
    for e in events:
        if e.kind == "epoch":
            epoch, start = e.fields["epoch"], e.fields["start_offset"]
            # An append needs a greater epoch and start: whatever stood in its way was cut first.
            files[e.node] = [x for x in files.get(e.node, []) if x[0] < epoch and x[1] < start] + [(epoch, start)]
        elif e.kind == "net.accept" and e.fields.get("local"):
            listening[e.fields["local"]] = e.node
        elif e.kind == "frame.recv" and e.fields.get("proto") == "ha" and e.fields.get("name") == "handshake" \
                and "slave_broker_id" not in e.fields:
            handshake[e.node] = e
        elif e.kind == "ha.truncate":
            frame = handshake.get(e.node)
            master = listening.get(frame.fields.get("peer")) if frame is not None else None
            if frame is not None and frame.fields.get("epoch_entries") is not None:
                master_entries = tuple(tuple(x) for x in frame.fields["epoch_entries"])
            else:
                master_entries = tuple(files.get(master, ())) if master else None
            f = e.fields
            point = f["truncate_offset"]
            out.append(Truncation(e.seq, e.time_ms, e.node, f["ok"], point, f.get("consistent_epoch"),
                                  f.get("local_max_offset"), f.get("master_max_offset"), master,
                                  tuple(files.get(e.node, ())), master_entries, f["reason"]))
            if point is not None:  # EpochFileCache.truncate_suffix_by_offset
                files[e.node] = [x for x in files.get(e.node, []) if x[1] < point]
    return files, out


def consistent_point(local: list[tuple[int, int]], local_max: int, master: list[tuple[int, int]], master_max: int):
    """The slave's handshake decision on these epoch files and log ends (rmqlab's doTruncate, a
    TruncateDecision: ok, truncate_offset, reason)."""
    from rmqlab.ha.autoswitch.auto_switch_ha_protocol import do_truncate
    from rmqlab.remoting.protocol.epoch_entry import EpochEntry

    return do_truncate([EpochEntry(e, s) for e, s in local], local_max,
                       [EpochEntry(e, s) for e, s in master], master_max)


def check_truncations(events: Iterable[TraceEvent]) -> CheckResult:
    """Each slave's handshake truncation (AutoSwitchHAClient.doTruncate; the controller design
document's 「截断算法」, docs/cn/controller/design.md): the point it chose
    is the consistent point of its epoch file and the master's (recomputed from the trace), its
    log was cut exactly there, and the cut spared what it had confirmed (the highest confirm offset
    it traced since its previous cut, capped by its log end): cutting below that discards committed
    messages, which a clean election never asks of a replica. Violations: `wrong-truncation-point`,
    `not-truncated`, `cut-committed`. A refusal (no consistent point: the slave keeps its log and
    waits for an operator) is counted, not a violation."""
    events = list(events)
    by_node: dict[str, list[TraceEvent]] = {}
    for e in events:
        by_node.setdefault(e.node, []).append(e)
    position = {e.seq: i for node_events in by_node.values() for i, e in enumerate(node_events)}
    # The most a node confirmed since its last cut: a restart reloads an older confirm offset from
    # the checkpoint (written at flushes), which says nothing about what was committed before.
    confirmed: dict[str, int] = {}
    confirms_at: dict[int, int | None] = {}  # truncation seq -> the slave's confirm offset before it
    found = {t.seq: t for t in truncations(events)}
    for e in events:
        if e.kind == "offset" and e.fields.get("which") == "confirmed":
            confirmed[e.node] = max(confirmed.get(e.node, 0), e.fields["value"])
        elif e.seq in found:
            confirms_at[e.seq] = confirmed.get(e.node)
            if found[e.seq].point is not None and e.node in confirmed:
                confirmed[e.node] = min(confirmed[e.node], found[e.seq].point)
    violations: list[Violation] = []
    cut = refused = 0
    for t in found.values():
        where = f"{t.node}'s handshake" + (f" with {t.master}" if t.master else "")
        if not t.ok:
            refused += 1
            continue
        if t.master_entries is not None and t.local_max is not None and t.local_entries:
            decision = consistent_point(list(t.local_entries), t.local_max, list(t.master_entries),
                                        t.master_max if t.master_max is not None else 0)
            if decision.truncate_offset != t.point:
                violations.append(Violation(
                    "wrong-truncation-point", f"{where} truncated to {t.point}, but its epochs "
                    f"{list(t.local_entries)} (max {t.local_max}) and the master's {list(t.master_entries)} "
                    f"(max {t.master_max}) agree up to {decision.truncate_offset}", t.node, t.seq, t.time_ms,
                    {"point": t.point, "consistent_point": decision.truncate_offset, "master": t.master}))
        if t.point is None:
            continue
        cut += 1
        # The cut shows as the slave's next `written` offset (before its HA state moves on).
        after = next((e for e in by_node[t.node][position[t.seq] + 1:]
                      if (e.kind == "offset" and e.fields.get("which") == "written")
                      or e.kind in ("state", "net.close", "node.kill", "node.crash", "node.stop")), None)
        if after is not None and after.kind == "offset" and after.fields.get("value") != t.point:
            violations.append(Violation(
                "not-truncated", f"{where} decided to truncate to {t.point} but its log then ended at "
                f"{after.fields.get('value')}", t.node, after.seq, after.time_ms, {"point": t.point}))
        confirm = confirms_at.get(t.seq)
        if confirm is not None and t.local_max is not None and t.point < min(confirm, t.local_max):
            committed = min(confirm, t.local_max)
            violations.append(Violation(
                "cut-committed", f"{where} cut its log to {t.point}, below the {committed} bytes it had confirmed: "
                f"{committed - t.point} committed bytes discarded", t.node, t.seq, t.time_ms,
                {"point": t.point, "confirmed": committed, "master": t.master, "epoch": t.epoch}))
    return result("truncation", violations, {"handshakes": len(found), "truncated": cut, "refused": refused})
