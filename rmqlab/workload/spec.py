"""The workload specification: what a recorded run consists of, as plain JSON.

A workload = a deployment mode (RocketMQ's deployment guide, "部署方式") and its configuration +
the client operations (who sends and consumes what, from when to when) + a fault schedule + a seed:

    Workload(name="ctrl-kill-master", mode="controller-embedded", seed=7,
             topics=(TopicSpec("WorkloadTopic", 4),),
             clients=(WorkloadClient("producer", ProducerSpec(topic="WorkloadTopic", interval_ms=100), 0, None),),
             faults=schedule_of([FaultOp(4_000, "kill", "@master", {}, 0), FaultOp(12_000, "restart", "@master", {}, 0)]),
             duration_ms=20_000)
    Workload.from_dict(w.to_dict()) == w      # from_dict validates: ValueError naming the field

Times are virtual ms after the workload's t=0 (the cluster is up and the topics exist; see
rmqlab.workload.runner). Fault ops are rmqlab.checker.schedule's `FaultOp`s; a process fault may
name a node or "@master" (the broker that is master when the op is applied; its undo names
"@master" too and goes to the same broker). Client descriptions are rmqlab.example.benchmark's
ProducerSpec / ConsumerSpec (`to_dict()`), so the same workload runs on the simulator and as OS
processes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rmqlab.checker.schedule import FAULTS, MASTER, UNDO, FaultOp, FaultSchedule
from rmqlab.example.benchmark import ConsumerSpec, ProducerSpec, client_spec_from_dict

RUNTIMES = ("sim", "real")
PROXIES = (None, "local", "cluster")
FAULT_OPS = (*FAULTS, *UNDO.values())            # kill crash suspend partition loss + their undos
PROCESS_OPS = ("kill", "crash", "suspend", "restart", "resume")
# Node names the runner uses itself (rmqlab.workload.runner; also every "workload-*"): a client may
# not take them.
RESERVED_NODES = ("mqadmin", "nemesis", "workload", "workload-reader", "workload-admin", "chaos")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_DURATION_MS = 600_000
# Client settings a workload may change, RocketMQ's ClientConfig names -> rmqlab's ClientConfig
# attribute and type. The lab sets pollNameServerInterval to 1 s (RocketMQ: 30 s) so producers
# follow a failover within a short workload (rmqlab.demo.mode_comparison does the same).
CLIENT_SETTINGS = {"pollNameServerInterval": ("poll_name_server_interval", int),
                   "heartbeatBrokerInterval": ("heartbeat_broker_interval", int),
                   "persistConsumerOffsetInterval": ("persist_consumer_offset_interval", int),
                   "sendLatencyFaultEnable": ("send_latency_enable", bool)}


def _cluster_modes() -> tuple[dict, tuple]:
    from rmqlab.cluster import CONTROLLER_COUNTS, MODES

    return MODES, CONTROLLER_COUNTS


def server_nodes(mode: str, controllers: int | None = None, proxy: str | None = None) -> list[str]:
    """The server nodes rmqlab.cluster.Cluster builds for this deployment (name servers,
    controllers, brokers, proxy): the mode's own list (rmqlab.cluster.modes)."""
    return [n.name for n in _cluster_modes()[0][mode].server_nodes(controllers or 3, proxy)]


@dataclass(frozen=True)
class TopicSpec:
    """A topic created on every broker (slaves too) before t=0, with `queues` read/write queues."""

    topic: str
    queues: int = 4

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "queues": self.queues}


@dataclass(frozen=True)
class WorkloadClient:
    """A client node: `spec` (a ProducerSpec or ConsumerSpec) started at `start_ms`, stopped
    cleanly (SIGTERM) at `stop_ms`; None: a producer stops at the workload's duration_ms, a
    consumer runs until the final read-back is over."""

    name: str
    spec: ProducerSpec | ConsumerSpec
    start_ms: float = 0.0
    stop_ms: float | None = None

    @property
    def kind(self) -> str:
        return self.spec.kind

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.spec.kind, "spec": self.spec.to_dict(),
                "start_ms": self.start_ms, "stop_ms": self.stop_ms}


@dataclass(frozen=True)
class Workload:
    """A workload (module docstring). `overrides`: broker settings by node name or "*" (as
    rmqlab.cluster.Cluster takes them); `controller_overrides`: every controller's (controller
    modes); `proxy_overrides`: rmq-proxy.json keys (with a proxy); `client_overrides`: the
    remoting clients' ClientConfig settings (CLIENT_SETTINGS); `faults`: the schedule, times
    relative to t=0; `recorded_runtime`: where the recording in a file came from."""

    name: str
    mode: str
    seed: int = 0
    description: str = ""
    proxy: str | None = None
    controllers: int | None = None
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    controller_overrides: Mapping[str, Any] = field(default_factory=dict)
    proxy_overrides: Mapping[str, Any] = field(default_factory=dict)
    client_overrides: Mapping[str, Any] = field(default_factory=dict)
    topics: tuple[TopicSpec, ...] = ()
    clients: tuple[WorkloadClient, ...] = ()
    faults: FaultSchedule = field(default_factory=lambda: FaultSchedule(0, (), 0.0, 0.0))
    duration_ms: float = 20_000.0
    recorded_runtime: str = "sim"

    def __post_init__(self) -> None:
        validate(self)

    # -- views ---------------------------------------------------------------------------------
    @property
    def is_controller_mode(self) -> bool:
        return _cluster_modes()[0][self.mode].controllers is not None

    @property
    def nodes(self) -> list[str]:
        """The cluster's server nodes."""
        return server_nodes(self.mode, self.controllers, self.proxy)

    @property
    def brokers(self) -> list[str]:
        return list(_cluster_modes()[0][self.mode].brokers)

    @property
    def fault_kinds(self) -> list[str]:
        """The kinds of fault the schedule injects, in FAULTS order."""
        kinds = {op.f for op in self.faults.ops}
        return [f for f in FAULTS if f in kinds]

    def cluster_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of rmqlab.cluster.Cluster for this deployment (besides runtime,
        seed and root_dir)."""
        kwargs: dict[str, Any] = {"overrides": {k: dict(v) for k, v in self.overrides.items()},
                                  "proxy": self.proxy, "proxy_overrides": dict(self.proxy_overrides)}
        if self.is_controller_mode:
            kwargs.update(controllers=self.controllers or 3, controller_overrides=dict(self.controller_overrides))
        return kwargs

    def replace(self, **changes: Any) -> Workload:
        import dataclasses

        return dataclasses.replace(self, **changes)

    # -- JSON ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (canonical_json gives one spelling); `from_dict` reads it back equal."""
        return {
            "name": self.name, "description": self.description, "mode": self.mode, "proxy": self.proxy,
            "controllers": self.controllers, "seed": self.seed,
            "overrides": {k: dict(v) for k, v in self.overrides.items()},
            "controller_overrides": dict(self.controller_overrides),
            "proxy_overrides": dict(self.proxy_overrides),
            "client_overrides": dict(self.client_overrides),
            "topics": [t.to_dict() for t in self.topics],
            "clients": [c.to_dict() for c in self.clients],
            "faults": [op.to_dict() for op in self.faults.ops],
            "duration_ms": self.duration_ms, "recorded_runtime": self.recorded_runtime,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Workload:
        """The workload `data` describes; ValueError naming the field that is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(f"workload: expected a JSON object, not {type(data).__name__}")
        known = {"name", "description", "mode", "proxy", "controllers", "seed", "overrides", "controller_overrides",
                 "proxy_overrides", "client_overrides", "topics", "clients", "faults", "duration_ms",
                 "recorded_runtime"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"workload: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        for required in ("name", "mode"):
            if required not in data:
                raise ValueError(f"workload: missing field {required!r}")
        name = data["name"]
        topics = _list(data.get("topics", []), "topics")
        clients = _list(data.get("clients", []), "clients")
        faults = _list(data.get("faults", []), "faults")
        seed = data.get("seed", 0)
        _check(_is_int(seed) and seed >= 0, "seed", "an integer >= 0", seed)
        return cls(
            name=name, mode=data["mode"], seed=seed, description=data.get("description", ""),
            proxy=data.get("proxy"), controllers=data.get("controllers"),
            overrides=_object(data.get("overrides", {}), "overrides"),
            controller_overrides=_object(data.get("controller_overrides", {}), "controller_overrides"),
            proxy_overrides=_object(data.get("proxy_overrides", {}), "proxy_overrides"),
            client_overrides=_object(data.get("client_overrides", {}), "client_overrides"),
            topics=tuple(_topic(t, f"topics[{i}]") for i, t in enumerate(topics)),
            clients=tuple(_client(c, f"clients[{i}]") for i, c in enumerate(clients)),
            faults=schedule_of([_fault(op, f"faults[{i}]") for i, op in enumerate(faults)]),
            duration_ms=data.get("duration_ms", 20_000.0),
            recorded_runtime=data.get("recorded_runtime", "sim"))


def schedule_of(ops, seed: int = 0) -> FaultSchedule:
    """A workload's fault schedule: `ops` as given (times relative to t=0), no quiet period
    (the workload's duration_ms is its end)."""
    ops = tuple(ops)
    window = max((op.time_ms for op in ops), default=0.0)
    return FaultSchedule(seed, ops, float(window), 0.0)


# --- validation --------------------------------------------------------------------------------------------
def _check(ok: bool, where: str, what: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"workload {where}: must be {what}, not {value!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _list(v: Any, where: str) -> list:
    _check(isinstance(v, (list, tuple)), where, "a list", v)
    return list(v)


def _object(v: Any, where: str) -> dict:
    _check(isinstance(v, Mapping), where, "a JSON object", v)
    return dict(v)


def _topic(t: Any, where: str) -> TopicSpec:
    _check(isinstance(t, Mapping), where, "an object {topic, queues}", t)
    unknown = sorted(set(t) - {"topic", "queues"})
    if unknown:
        raise ValueError(f"workload {where}: unknown field(s) {', '.join(unknown)}")
    if "topic" not in t:
        raise ValueError(f"workload {where}: missing field 'topic'")
    return TopicSpec(t["topic"], t.get("queues", 4))


def _client(c: Any, where: str) -> WorkloadClient:
    _check(isinstance(c, Mapping), where, "an object {name, kind, spec, start_ms, stop_ms}", c)
    unknown = sorted(set(c) - {"name", "kind", "spec", "start_ms", "stop_ms"})
    if unknown:
        raise ValueError(f"workload {where}: unknown field(s) {', '.join(unknown)}")
    for required in ("name", "spec"):
        if required not in c:
            raise ValueError(f"workload {where}: missing field {required!r}")
    spec_data = c["spec"]
    _check(isinstance(spec_data, Mapping), f"{where}.spec", "a ProducerSpec/ConsumerSpec object", spec_data)
    spec_data = dict(spec_data)
    kind = c.get("kind", spec_data.get("kind"))
    _check(kind in ("producer", "consumer"), f"{where}.kind", "'producer' or 'consumer'", kind)
    if spec_data.setdefault("kind", kind) != kind:
        raise ValueError(f"workload {where}: kind {kind!r} but spec.kind {spec_data['kind']!r}")
    try:
        spec = client_spec_from_dict(spec_data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"workload {where}.spec: {e}") from None
    return WorkloadClient(c["name"], spec, c.get("start_ms", 0.0), c.get("stop_ms"))


def _fault(op: Any, where: str) -> FaultOp:
    _check(isinstance(op, Mapping), where, "an object {time_ms, f, node, value, fault_id}", op)
    unknown = sorted(set(op) - {"time_ms", "f", "node", "value", "fault_id"})
    if unknown:
        raise ValueError(f"workload {where}: unknown field(s) {', '.join(unknown)}")
    for required in ("time_ms", "f"):
        if required not in op:
            raise ValueError(f"workload {where}: missing field {required!r}")
    value = op.get("value") or {}
    _check(isinstance(value, Mapping), f"{where}.value", "a JSON object", value)
    fault_id = op.get("fault_id", 0)
    _check(_is_int(fault_id), f"{where}.fault_id", "an integer", fault_id)
    return FaultOp(op["time_ms"], op["f"], op.get("node"), dict(value), fault_id)


def _json_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool)) or _is_number(v)


def validate(w: Workload) -> None:
    """ValueError naming the first field of `w` that is wrong."""
    modes, controller_counts = _cluster_modes()
    _check(isinstance(w.name, str) and bool(NAME_PATTERN.match(w.name)), "name",
           "a name of letters, digits, '.', '_' and '-' (it names the file)", w.name)
    _check(isinstance(w.description, str), "description", "a str", w.description)
    _check(w.mode in modes, "mode", f"one of {', '.join(modes)}", w.mode)
    _check(_is_int(w.seed) and w.seed >= 0, "seed", "an integer >= 0", w.seed)
    _check(w.proxy in PROXIES, "proxy", "null, 'local' or 'cluster'", w.proxy)
    _check(w.recorded_runtime in RUNTIMES, "recorded_runtime", "'sim' or 'real'", w.recorded_runtime)
    _check(_is_number(w.duration_ms) and 0 < w.duration_ms <= MAX_DURATION_MS, "duration_ms",
           f"a number of ms in (0, {MAX_DURATION_MS}]", w.duration_ms)
    controller_mode = modes[w.mode].controllers is not None
    if controller_mode:
        _check(w.controllers is None or w.controllers in controller_counts, "controllers",
               f"null (3) or one of {controller_counts}", w.controllers)
    else:
        _check(w.controllers is None, "controllers", f"null: mode {w.mode} has no controllers", w.controllers)
        _check(not w.controller_overrides, "controller_overrides", f"empty: mode {w.mode} has no controllers",
               dict(w.controller_overrides))
    nodes = server_nodes(w.mode, w.controllers, w.proxy)
    brokers = list(modes[w.mode].brokers)
    # overrides: node -> settings
    _check(isinstance(w.overrides, Mapping), "overrides", "an object {broker node or '*': settings}", w.overrides)
    for node, settings in w.overrides.items():
        _check(node == "*" or node in brokers, f"overrides key {node!r}", f"'*' or a broker ({', '.join(brokers)})", node)
        _check(isinstance(settings, Mapping), f"overrides[{node!r}]", "an object of broker settings", settings)
        for k, v in settings.items():
            _check(isinstance(k, str) and _json_scalar(v), f"overrides[{node!r}][{k!r}]", "a JSON scalar", v)
    for attr in ("controller_overrides", "proxy_overrides"):
        value = getattr(w, attr)
        _check(isinstance(value, Mapping), attr, "an object", value)
        for k, v in value.items():
            _check(isinstance(k, str) and _json_scalar(v), f"{attr}[{k!r}]", "a JSON scalar", v)
    if w.proxy is None:
        _check(not w.proxy_overrides, "proxy_overrides", "empty without a proxy", dict(w.proxy_overrides))
    _check(isinstance(w.client_overrides, Mapping), "client_overrides", "an object", w.client_overrides)
    for k, v in w.client_overrides.items():
        _check(k in CLIENT_SETTINGS, f"client_overrides key {k!r}", f"one of {', '.join(CLIENT_SETTINGS)}", k)
        kind = CLIENT_SETTINGS[k][1]
        ok = isinstance(v, bool) if kind is bool else (_is_int(v) and v > 0)
        _check(ok, f"client_overrides[{k!r}]", "a bool" if kind is bool else "an integer of ms > 0", v)
    # topics
    _check(isinstance(w.topics, tuple) and len(w.topics) >= 1, "topics", "a non-empty list", w.topics)
    from rmqlab.common.topic.topic_validator import TopicValidator

    seen: set[str] = set()
    for i, t in enumerate(w.topics):
        _check(isinstance(t, TopicSpec), f"topics[{i}]", "a TopicSpec", t)
        _check(isinstance(t.topic, str), f"topics[{i}].topic", "a str", t.topic)
        check = TopicValidator.validate_topic(t.topic)
        if not check.valid:
            raise ValueError(f"workload topics[{i}].topic: {check.remark}")
        _check(t.topic not in seen, f"topics[{i}].topic", "unique", t.topic)
        seen.add(t.topic)
        _check(_is_int(t.queues) and 1 <= t.queues <= 64, f"topics[{i}].queues", "an integer in [1, 64]", t.queues)
    # clients
    _check(isinstance(w.clients, tuple), "clients", "a list", w.clients)
    names: set[str] = set()
    for i, c in enumerate(w.clients):
        where = f"clients[{i}]"
        _check(isinstance(c, WorkloadClient), where, "a WorkloadClient", c)
        _check(isinstance(c.name, str) and bool(NAME_PATTERN.match(c.name)), f"{where}.name",
               "a node name of letters, digits, '.', '_' and '-'", c.name)
        _check(c.name not in names, f"{where}.name", "unique", c.name)
        _check(c.name not in nodes and c.name not in RESERVED_NODES and not c.name.startswith("workload-"),
               f"{where}.name", f"not a server node or a name the runner uses ({', '.join([*nodes, *RESERVED_NODES])}, "
               "workload-*)", c.name)
        names.add(c.name)
        _check(isinstance(c.spec, (ProducerSpec, ConsumerSpec)), f"{where}.spec", "a ProducerSpec or ConsumerSpec",
               c.spec)
        _check(c.spec.topic in seen, f"{where}.spec.topic", f"one of the workload's topics ({', '.join(seen)})",
               c.spec.topic)
        if c.spec.protocol == "grpc":
            _check(w.proxy is not None, f"{where}.spec.protocol", "'remoting' without a proxy (grpc clients talk "
                   "to a Proxy: set proxy to 'local' or 'cluster')", c.spec.protocol)
        _check(_is_number(c.start_ms) and 0 <= c.start_ms < w.duration_ms, f"{where}.start_ms",
               f"a number of ms in [0, duration_ms={w.duration_ms})", c.start_ms)
        _check(c.stop_ms is None or (_is_number(c.stop_ms) and c.start_ms < c.stop_ms <= w.duration_ms),
               f"{where}.stop_ms", f"null or a number of ms in (start_ms, duration_ms={w.duration_ms}]", c.stop_ms)
    # faults
    _check(isinstance(w.faults, FaultSchedule), "faults", "a FaultSchedule", w.faults)
    previous = 0.0
    for i, op in enumerate(w.faults.ops):
        where = f"faults[{i}]"
        _check(_is_number(op.time_ms) and 0 <= op.time_ms <= w.duration_ms, f"{where}.time_ms",
               f"a number of ms in [0, duration_ms={w.duration_ms}]", op.time_ms)
        _check(op.time_ms >= previous, f"{where}.time_ms", f"not before the previous op ({previous})", op.time_ms)
        previous = op.time_ms
        _check(op.f in FAULT_OPS, f"{where}.f", f"one of {', '.join(FAULT_OPS)}", op.f)
        if op.f in PROCESS_OPS:
            _check(op.node == MASTER or op.node in nodes, f"{where}.node",
                   f"'{MASTER}' or a server node ({', '.join(nodes)})", op.node)
            if op.node == MASTER:
                _check(op.f in ("kill", "crash", "suspend") or any(
                    o.node == MASTER and o.fault_id == op.fault_id and o.f in FAULTS for o in w.faults.ops[:i]),
                    f"{where}.node", f"'{MASTER}' only on an undo whose fault (same fault_id) came first "
                    f"with '{MASTER}'", op.node)
            if op.f == "crash":
                torn = op.value.get("torn_bytes", 0)
                _check(_is_int(torn) and torn >= 0, f"{where}.value.torn_bytes", "an integer >= 0", torn)
                _check(op.node == MASTER or op.node in brokers, f"{where}.node",
                       "a broker or '@master' (a machine crash loses a store's unflushed bytes)", op.node)
        elif op.f == "partition":
            groups = op.value.get("groups")
            _check(isinstance(groups, list) and len(groups) >= 2 and all(isinstance(g, list) and g for g in groups),
                   f"{where}.value.groups", "a list of >= 2 non-empty lists of nodes", groups)
            flat = [n for g in groups for n in g]
            for n in flat:
                _check(n in nodes, f"{where}.value.groups", f"server nodes ({', '.join(nodes)})", n)
            _check(len(flat) == len(set(flat)), f"{where}.value.groups", "disjoint groups", groups)
        elif op.f in ("loss", "loss-heal"):
            v = op.value
            _check(v.get("node") in nodes, f"{where}.value.node", f"a server node ({', '.join(nodes)})", v.get("node"))
            peers = v.get("peers")
            _check(isinstance(peers, list) and peers and all(p in nodes and p != v.get("node") for p in peers),
                   f"{where}.value.peers", "a non-empty list of other server nodes", peers)
            _check(_is_number(v.get("rate")) and 0 <= v["rate"] <= 1, f"{where}.value.rate", "a number in [0, 1]",
                   v.get("rate"))
        elif op.f == "heal":
            pass
    _check(isinstance(w.faults.ops, tuple), "faults", "a tuple of FaultOps", w.faults.ops)
