"""The trace schema: its name and version, and the catalog of event kinds.

Every event kind has a one-line meaning and declares its required and optional fields with their
types. `Tracer.emit` checks events against this catalog, so a mistyped kind or a forgotten field
fails where it is emitted instead of silently starving a checker. Fields beyond the declared ones
are allowed (a protocol adds its own decoded fields); names starting with "_" are reserved for the
trace tooling (`merge_traces` adds `_src` and `_src_seq`).

Types are written as names joined by "|": ``str``, ``int``, ``number`` (int or float), ``bool``,
``list``, ``dict``, ``null`` (None) and ``any``. A str field may also list its allowed values.

Versioning: `SCHEMA_VERSION` changes when the envelope or the files change shape, or when an
existing kind loses a field, changes a field's type or meaning. Adding a kind, an optional field
or a value of an open field does not change it, so readers accept kinds they do not know. A new
component adds its kinds here with `_kind(...)` (or, outside this module, `register_kind`) and
regenerates the catalog section of datasets/README.md with ``python -m rmqlab.trace catalog``; a test
keeps the two identical.

A `log` event is for people. A fact that a figure, a checker or the workload outcome needs gets a
kind of its own, emitted beside the log line, and readers use its fields, never the line's text
(tests/test_trace_contract.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA_NAME = "rmqlab.trace"
# 2: the facts that readers took from `log` lines (a master found inactive, the re-elect scan, a
# broker registered with or dropped by a name server, a doTruncate decision, a SyncStateSet proposal,
# the workload's t=0) became kinds of their own (controller.*, namesrv.*, ha.*, workload.*), and the
# `log` lines no longer carry those fields: a version-1 trace read by this version has no triggers,
# truncations or t=0 for its readers to find.
SCHEMA_VERSION = 2

_TYPE_CHECKS = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    # Tuples are accepted: they are stored as lists (rmqlab.trace.event.json_value).
    "list": lambda v: isinstance(v, (list, tuple)),
    "dict": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
    "any": lambda v: True,
}


_ISINSTANCE = {"str": (str,), "int": (int,), "number": (int, float), "bool": (bool,), "list": (list, tuple),
               "dict": (dict,), "null": (type(None),), "any": (object,)}


def _isinstance_test(type_: str) -> tuple[tuple[type, ...], bool]:
    """(types, bool allowed) equivalent to the _TYPE_CHECKS of `type_` ("int|null" etc.): a
    quick pre-check; a value it rejects goes through the exact check."""
    names = type_.split("|")
    types = tuple(t for n in names for t in _ISINSTANCE[n])
    return types, "bool" in names or "any" in names


@dataclass(frozen=True)
class FieldSpec:
    """One field of an event kind: its name, type (see module docstring), meaning, and for a str
    field optionally the values it may take."""

    name: str
    type: str
    meaning: str
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or self.name.startswith("_"):
            raise ValueError(f"field name {self.name!r}: must be non-empty and not start with '_' (reserved)")
        unknown = [t for t in self.type.split("|") if t not in _TYPE_CHECKS]
        if unknown:
            raise ValueError(f"field {self.name!r}: unknown type {'|'.join(unknown)!r} "
                             f"(known: {', '.join(_TYPE_CHECKS)})")
        if "|" in self.meaning or "\n" in self.meaning:
            raise ValueError(f"field {self.name!r}: the meaning is one line without '|' (a Markdown table cell)")
        if self.choices and "str" not in self.type.split("|"):
            raise ValueError(f"field {self.name!r}: only a str field can list choices")

    @property
    def _checks(self) -> tuple:
        # Compiled once per field (frozen dataclass: cached in __dict__): emit runs this a lot.
        checks = self.__dict__.get("_compiled")
        if checks is None:
            checks = tuple(_TYPE_CHECKS[t] for t in self.type.split("|"))
            object.__setattr__(self, "_compiled", checks)
        return checks

    def check(self, kind: str, value: Any) -> None:
        """ValueError naming the kind and field when `value` does not fit this field."""
        for fits in self._checks:
            if fits(value):
                break
        else:
            raise ValueError(f"trace event {kind!r}: field {self.name!r} must be {self.type}, "
                             f"not {type(value).__name__} {value!r}")
        if self.choices and isinstance(value, str) and value not in self.choices:
            raise ValueError(f"trace event {kind!r}: field {self.name!r} = {value!r} is not one of "
                             f"{', '.join(self.choices)}")


@dataclass(frozen=True)
class KindSpec:
    """An event kind: its name, one-line meaning (which says what `node` is for it), and fields."""

    kind: str
    meaning: str
    required: tuple[FieldSpec, ...] = ()
    optional: tuple[FieldSpec, ...] = ()

    def __post_init__(self) -> None:
        names = [f.name for f in (*self.required, *self.optional)]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"event kind {self.kind!r} declares {', '.join(duplicated)} twice")

    def validate(self, fields: Mapping[str, Any]) -> None:
        """ValueError naming the kind and field for a missing required field, a declared field of
        the wrong type or value, or a reserved ("_") field name. Extra fields are allowed."""
        plan = self.__dict__.get("_plan")
        if plan is None:  # compiled once per kind: emit runs this for every event
            plan = tuple((s, s.name, *_isinstance_test(s.type), True) for s in self.required) + \
                tuple((s, s.name, *_isinstance_test(s.type), False) for s in self.optional)
            object.__setattr__(self, "_plan", plan)
        for spec, name, types, bool_ok, required in plan:
            if name not in fields:
                if required:
                    raise ValueError(f"trace event {self.kind!r}: missing required field {name!r}")
                continue
            value = fields[name]
            if spec.choices or not isinstance(value, types) or (not bool_ok and type(value) is bool):
                spec.check(self.kind, value)  # the exact check: explains, and checks the choices
        for name in fields:
            if name.startswith("_"):
                raise ValueError(f"trace event {self.kind!r}: field name {name!r} is reserved "
                                 "('_' names belong to the trace tooling)")

    @property
    def fast_check(self) -> Any:
        """A function `check(fields) -> bool` compiled once for this kind: True when every declared
        field is present as required and its value has exactly one of the plain types its type
        names (and, for a choice field, one of the choices). False does not mean invalid, only
        "ask `validate`", which explains or accepts (a str subclass, say). The Tracer's hot path:
        it does not look at extra fields or "_" names, which the Tracer checks itself."""
        check = self.__dict__.get("_fast_check")
        if check is None:
            check = _compile_fast_check(self)
            object.__setattr__(self, "_fast_check", check)
        return check


# The exact types a value of each type name may have on the fast path (`KindSpec.fast_check`);
# "any" accepts everything. Subclasses (an IntEnum, a str Enum) fall back to the exact check.
_FAST_TYPES: dict[str, tuple[type, ...] | None] = {
    "str": (str,), "int": (int,), "number": (int, float), "bool": (bool,), "list": (list, tuple), "dict": (dict,),
    "null": (type(None),), "any": None}
_MISSING = object()


def _compile_fast_check(spec: KindSpec) -> Any:
    """Generate `KindSpec.fast_check` for `spec`: straight-line code, one test per declared field."""
    namespace: dict[str, Any] = {"_MISSING": _MISSING}
    lines = ["def check(f):"]
    for i, (field_spec, required) in enumerate([(s, True) for s in spec.required] +
                                               [(s, False) for s in spec.optional]):
        lines.append(f"    v = f.get({field_spec.name!r}, _MISSING)")
        names = field_spec.type.split("|")
        allowed = [_FAST_TYPES[n] for n in names]
        tests = []
        if None not in allowed:
            namespace[f"T{i}"] = frozenset(t for ts in allowed for t in ts)
            tests.append(f"type(v) not in T{i}")
        if field_spec.choices:
            namespace[f"C{i}"] = frozenset(field_spec.choices)
            tests.append(f"(type(v) is str and v not in C{i})")
        if required:
            lines.append("    if v is _MISSING: return False")
            if tests:
                lines.append(f"    if {' or '.join(tests)}: return False")
        elif tests:
            lines.append(f"    if v is not _MISSING and ({' or '.join(tests)}): return False")
    lines.append("    return True")
    exec("\n".join(lines), namespace)  # our own catalog's names, quoted with repr
    return namespace["check"]


KINDS: dict[str, KindSpec] = {}


def register_kind(spec: KindSpec) -> KindSpec:
    """Add `spec` to the catalog. Registering the same spec again is a no-op; a different spec
    under a registered name raises ValueError (two meanings for one kind would corrupt traces)."""
    existing = KINDS.get(spec.kind)
    if existing is not None and existing != spec:
        raise ValueError(f"event kind {spec.kind!r} is already registered with a different definition")
    KINDS[spec.kind] = spec
    return spec


def kind_spec(kind: str) -> KindSpec:
    """The catalog entry of `kind`; ValueError naming the unknown kind and the closest known ones."""
    try:
        return KINDS[kind]
    except KeyError:
        close = difflib.get_close_matches(str(kind), KINDS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"unknown trace event kind {kind!r}{hint}") from None


def validate_fields(kind: str, fields: Mapping[str, Any]) -> None:
    """Check `fields` against the catalog entry of `kind` (see `KindSpec.validate`)."""
    kind_spec(kind).validate(fields)


def _kind(kind: str, meaning: str, required: Iterable[tuple] = (), optional: Iterable[tuple] = ()) -> None:
    """Register a kind from (name, type, meaning[, choices]) tuples."""
    register_kind(KindSpec(kind, meaning, tuple(FieldSpec(*f) for f in required),
                           tuple(FieldSpec(*f) for f in optional)))


# Fields several kinds share.
_PID = ("pid", "int", "operating-system process id (real runtime)")
_FAULT_ID = ("fault_id", "int", "identifies the fault; the fault.heal that removes it carries the same id")
_NODES = ("nodes", "list", "names of the nodes whose links (to or from them) are affected; all links when absent")
_PEER = ("peer", "str", "the node at the other end (its name, or host:port when the name is unknown)")
_CONN_ID = ("conn_id", "int|str", "identifies the connection across its connect/accept, frame and close events")
_PROTO = ("proto", "str", "wire protocol: remoting, ha, raft, ...")

# --- node lifecycle: `node` is the node the event is about, whoever emits it -----------------
_kind("node.start", "A node started serving: its process (or simulated component) is up and listening.",
      required=[("component", "str", "what the node runs: namesrv, broker, controller, proxy or client")],
      optional=[("addr", "str", "host:port it listens on"), _PID,
                ("incarnation", "int", "0 on the first start, one more on each restart")])
_kind("node.stop", "A node shut down cleanly: shutdown hooks ran and its files were flushed.",
      optional=[("reason", "str", "why it was stopped")])
_kind("node.kill", "A node's process was killed without warning (SIGKILL): what it had written survives "
                   "in the OS page cache, nothing else runs.",
      optional=[_PID, ("signal", "int", "the signal number delivered")])
_kind("node.crash", "The machine under a node crashed: the process dies and every byte not flushed to disk "
                    "is lost (the crash model of rmqlab.runtime.page_cache).",
      optional=[("torn", "bool", "a random prefix of the unflushed bytes survived (torn write-back)"),
                ("lost_bytes", "int", "unflushed bytes discarded")])
_kind("node.restart", "The runtime restarts a stopped, killed or crashed node; its node.start follows once it "
                      "serves.",
      optional=[("incarnation", "int", "the incarnation being started")])
_kind("node.suspend", "A node was frozen (SIGSTOP; on the simulator its timers and deliveries stop): it keeps "
                      "its state and connections but does nothing.",
      optional=[_PID])
_kind("node.resume", "A suspended node runs again (SIGCONT).", optional=[_PID])

# --- faults: `node` is the injector, normally "nemesis" ---------------------------------------
_kind("fault.partition", "The network was split: nodes in different groups cannot reach each other, and "
                         "messages in flight between them are dropped.",
      required=[("groups", "list", "the sides, each a list of node names")],
      optional=[_FAULT_ID])
_kind("fault.heal", "A network fault was removed.",
      required=[("fault", "str", "which faults: one kind, or all of them",
                 ("partition", "loss", "delay", "all"))],
      optional=[_FAULT_ID])
_kind("fault.loss", "Messages on the affected links are dropped with probability `rate`.",
      required=[("rate", "number", "drop probability, 0 to 1")],
      optional=[_NODES, _FAULT_ID])
_kind("fault.delay", "Messages on the affected links are delivered `delay_ms` late (plus up to `jitter_ms`).",
      required=[("delay_ms", "number", "added latency in milliseconds")],
      optional=[("jitter_ms", "number", "extra random latency, 0 to this many milliseconds"), _NODES, _FAULT_ID])
_kind("fault.clock", "A node's clock was paused or resumed: while paused its time stands still and its timers "
                     "do not fire.",
      required=[("target", "str", "the node whose clock changed"),
                ("action", "str", "what happened to the clock", ("pause", "resume"))],
      optional=[_FAULT_ID])

# --- network: `node` is the node that observes the event ---------------------------------------
_kind("net.connect", "An outgoing connection was established.",
      required=[_PEER], optional=[_PROTO, _CONN_ID, ("local", "str", "local host:port")])
_kind("net.accept", "A listening node accepted a connection.",
      required=[_PEER], optional=[_PROTO, _CONN_ID, ("local", "str", "local host:port")])
_kind("net.close", "A connection was closed.",
      required=[_PEER, ("reason", "str", "why: local (this node closed it), remote (the peer did), reset, "
                                         "timeout, partition, or an error message")],
      optional=[_CONN_ID])
_FRAME_OPTIONAL = [
    ("code", "int", "remoting: the request code, or the response code of a response"),
    ("opaque", "int", "remoting: the request id, echoed by its response"),
    ("flag", "int", "remoting: bit 0 set for a response, bit 1 for a oneway request"),
    ("remark", "str|null", "remoting: the header's remark"),
    ("ext_fields", "dict", "remoting: the header's extFields"),
    ("body_size", "int", "bytes of the body"),
    ("hex", "str", "hex preview of the first bytes of the frame"),
    _CONN_ID,
]
_kind("frame.send", "A frame was written to a connection; `node` is the sender. Other decoded fields of the "
                    "protocol (an HA frame's offsets, a Raft message's term) are added under their own names.",
      required=[_PROTO, _PEER, ("size", "int", "bytes on the wire, length prefix included")],
      optional=_FRAME_OPTIONAL)
_kind("frame.recv", "A whole frame was read from a connection; `node` is the receiver, `peer` the sender. "
                    "Decoded fields as for frame.send.",
      required=[_PROTO, _PEER, ("size", "int", "bytes on the wire, length prefix included")],
      optional=_FRAME_OPTIONAL)

# --- component state: `node` is the node whose state changed -----------------------------------
_kind("role", "A component's role changed (a broker's MASTER/SLAVE, a controller's leadership).",
      required=[("from", "str|null", "the previous role; null for the first one"),
                ("to", "str", "the new role")],
      optional=[("component", "str", "which component of the node (broker, controller, ha, ...)"),
                ("epoch", "int", "the master epoch that goes with the role (controller mode)"),
                ("term", "int", "the Raft term that goes with the role")])
_kind("state", "A protocol state machine moved (for example the HA client READY, HANDSHAKE, TRANSFER).",
      required=[("machine", "str", "which state machine"),
                ("from", "str|null", "the previous state; null for the initial one"),
                ("to", "str", "the new state")],
      optional=[("reason", "str", "what caused the transition")])
_kind("epoch", "A broker set entered a new epoch: an entry of the epoch file, the epoch and the commit-log "
               "offset where it starts.",
      required=[("broker_set", "str", "the broker set (brokerName)"),
                ("epoch", "int", "the epoch number"),
                ("start_offset", "int", "commit-log offset where the epoch starts")],
      optional=[("end_offset", "int", "commit-log offset where the epoch ends, when known")])
_kind("offset", "A commit-log offset of the node's store moved.",
      required=[("which", "str", "written: end of the appended data (max physical offset); flushed: end of "
                                 "the data on disk; confirmed: end of the data the in-sync replicas hold "
                                 "(confirm offset); dispatched: end of the data the consume queues index "
                                 "(reput offset)",
                 ("written", "flushed", "confirmed", "dispatched")),
                ("value", "int", "the offset, in commit-log bytes")])
_kind("client", "A client operation, Jepsen style: an invoke, then exactly one completion (ok, fail or info) "
                "with the same process and op_id; `node` is the client node.",
      required=[("type", "str", "invoke; ok (it happened); fail (it certainly did not); info (unknown, "
                                "for example a timeout)",
                 ("invoke", "ok", "fail", "info")),
                ("process", "int", "the logical client process (one operation at a time)"),
                ("f", "str", "the operation: send, pull, ..."),
                ("op_id", "int", "identifies the operation within the client node"),
                ("value", "any", "the argument on invoke, the result on completion (null when none)")],
      optional=[("error", "any", "on fail or info: what went wrong")])
_kind("raft", "A Raft node's view changed: a new term, or a new (or no) leader.",
      required=[("term", "int", "the current term"),
                ("leader", "str|null", "the leader this node knows of; null when none")],
      optional=[("group", "str", "the Raft group (for example the controller cluster)"),
                ("commit_index", "int", "the commit index")])
_CONTROLLER_ENTRIES = ("ApplyBrokerIdEvent", "ElectMasterEvent", "AlterSyncStateSetEvent", "CleanBrokerDataEvent",
                       "UpdateBrokerAddressEvent", "OpenTerm")
_kind("controller.event", "A controller applied an entry of its replicated event log (RIP-44 events, through "
                          "Raft) to its metadata state machine; `node` is the applying controller. Every replica "
                          "emits one per event it applies, a restarted one again as it replays its journal.",
      required=[("event", "str", "the event type (RocketMQ's EventType names); OpenTerm: the entry a new leader "
                                 "commits before it serves (DLedger's empty entry), or a read's barrier with "
                                 "processReadEvent", _CONTROLLER_ENTRIES),
                ("index", "int", "the Raft log index of the entry"),
                ("term", "int", "the Raft term of the leader that computed the entry"),
                ("writer", "str", "that leader (its controllerDLegerSelfId)"),
                ("applied", "bool", "false: the entry was fenced (its writer is no longer the current one) and "
                                    "changed nothing")],
      optional=[("broker_set", "str", "the broker set (brokerName) the event is about"),
                ("body", "dict", "the event as stored in the log (its JSON, with RocketMQ's field names)"),
                ("position", "int", "the event's place among the events of its entry (one request's events "
                                    "share an entry), from 0")])

# --- what components decide: the facts readers use, each beside the log line an operator sees ---------
_BROKER_SET = ("broker_set", "str", "the broker set (brokerName)")
_kind("controller.master_inactive",
      "The controller leader found that a broker whose heartbeat lapsed or whose channel closed is the master of "
      "its set, and elects a new one (ControllerManager.onBrokerInactive; election trigger a.i); `node` is the "
      "leader.",
      required=[_BROKER_SET, ("broker_id", "int", "the inactive master's broker id")])
_kind("controller.need_reelect",
      "The controller leader's periodic scan found a broker set whose master is not alive while replicas are "
      "(ReplicasInfoManager.scanNeedReelectBrokerSets; election trigger a.ii), and elects a new master; `node` is "
      "the leader.",
      required=[_BROKER_SET])
_NAMESRV_BROKER = [("cluster", "str", "the broker's cluster (clusterName)"),
                   ("broker_addr", "str", "the broker's host:port (brokerAddr)")]
_kind("namesrv.broker_register",
      "A name server registered a broker address it did not hold (RouteInfoManager.registerBroker, \"new broker "
      "registered\"); `node` is the name server.",
      required=[*_NAMESRV_BROKER, _BROKER_SET, ("broker_id", "int", "the broker's id (brokerId)")],
      optional=[("ha_server_addr", "str|null", "the broker's HA address (haServerAddr)")])
_kind("namesrv.channel_expired",
      "A name server's scan found a broker whose last heartbeat is older than its timeout and drops it "
      "(RouteInfoManager.scanNotActiveBroker, \"The broker channel expired\"); `node` is the name server.",
      required=[*_NAMESRV_BROKER, ("timeout_ms", "int", "the broker's heartbeat timeout (heartbeatTimeoutMillis)")])
_kind("namesrv.channel_destroy",
      "A name server unregisters a broker address because its channel closed or expired "
      "(RouteInfoManager.onChannelDestroy); `node` is the name server.",
      required=[*_NAMESRV_BROKER, _BROKER_SET, ("broker_id", "int", "the broker's id (brokerId)")])
_kind("ha.truncate",
      "A slave decided, on the master's handshake, where its commit log and epoch file agree with the master's "
      "(AutoSwitchHAClient.doTruncate); `node` is the slave.",
      required=[("ok", "bool", "false: no consistent point; the slave keeps its log and stops replicating"),
                ("truncate_offset", "int|null", "where the log is cut; null: nothing to cut"),
                ("consistent_epoch", "int|null", "the last epoch both epoch files agree on; null when none"),
                ("local_max_offset", "int", "the slave's log end before the cut"),
                ("master_max_offset", "int", "the master's log end, from its handshake"),
                ("reason", "str", "the decision in words, as the log line gives it")])
_kind("ha.sync_state_set_change",
      "A master's HA service proposes a new SyncStateSet to the controller (AutoSwitchHAService "
      "maybeShrinkSyncStateSet, maybeExpandInSyncStateSet, removeConnection); the controller confirms it, or not, "
      "as an AlterSyncStateSetEvent; `node` is the master.",
      required=[("change", "str", "whether replicas leave or join the set", ("shrink", "expand")),
                ("sync_state_set", "list", "the proposed SyncStateSet: broker ids, ascending"),
                ("reason", "str", "why, in words, as the log line gives it")],
      optional=[("broker_id", "int|null", "the master's own broker id")])
_DLEDGER_GROUP = ("group", "str", "the DLedger group (dLegerGroup)")
_DLEDGER_SELF = ("self_id", "str", "the member's id in the group (dLegerSelfId)")
_kind("dledger.role",
      "A DLedger member's role, term or leader changed (DLedgerLeaderElector: changeRoleToLeader, "
      "changeRoleToFollower, changeRoleToCandidate, and a candidate's nextTerm); `node` is the member's node.",
      required=[_DLEDGER_GROUP, _DLEDGER_SELF,
                ("role", "str", "the member's role now", ("CANDIDATE", "LEADER", "FOLLOWER")),
                ("term", "int", "the member's current term (currTerm)"),
                ("leader", "str|null", "the leader's id it knows of; null when none"),
                ("ledger_end_index", "int", "the index of its last log entry (-1: empty log)"),
                ("ledger_end_term", "int", "the term of its last log entry (-1: empty log)")])
_kind("dledger.commit",
      "A DLedger leader's commit index advanced: one QuorumAckChecker pass found that a majority of the group "
      "(the leader included) holds the log up to `commit_index`, and completed the appends waiting on it; "
      "`node` is the leader's node.",
      required=[_DLEDGER_GROUP, _DLEDGER_SELF, ("term", "int", "the leader's term"),
                ("commit_index", "int", "the new commit index (the quorum index of the term's watermarks)"),
                ("previous", "int", "the commit index this leader had traced in the same term; -1 when none"),
                ("acked", "int", "appends this pass acknowledged to their callers"),
                ("ledger_end_index", "int", "the leader's own log end at that moment")])
_kind("workload.start",
      "A workload's t=0: the cluster is up and its topics exist; fault and client times count from here; `node` "
      "is the workload runner.",
      required=[("workload", "str", "the workload's name"), ("seed", "int", "the simulator seed"),
                ("mode", "str", "the deployment mode")])
_kind("log", "A notable log line, for people to read: no reader takes a fact from its text (each fact it "
                 "reports has a kind of its own).",
      required=[("level", "str", "severity", ("DEBUG", "INFO", "WARN", "ERROR")),
                ("message", "str", "the text")],
      optional=[("logger", "str", "the logger's name")])


def _type_text(type_: str, choices: tuple[str, ...]) -> str:
    # "|" would split a Markdown table cell.
    text = " or ".join(type_.split("|"))
    if choices:
        text += ": " + ", ".join(f"`{c}`" for c in choices)
    return text


def catalog_markdown() -> str:
    """The event-kind catalog as Markdown, the section datasets/README.md embeds verbatim."""
    parts = []
    for spec in KINDS.values():
        parts.append(f"#### `{spec.kind}`\n\n{spec.meaning}\n")
        fields = [(f, "yes") for f in spec.required] + [(f, "no") for f in spec.optional]
        if fields:
            rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
            rows += [f"| `{f.name}` | {_type_text(f.type, f.choices)} | {need} | {f.meaning} |" for f, need in fields]
            parts.append("\n".join(rows) + "\n")
        else:
            parts.append("No fields of its own.\n")
    return "\n".join(parts)
