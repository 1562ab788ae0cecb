"""Raft in the data path against controller mode's SyncStateSet, on the simulator: the same
failure, the same workload, judged from the trace alone.

Apache RocketMQ's DLedger CommitLog mode (RocketMQ 4.5, `DLedgerCommitLog`) makes every message a
DLedger (Raft) log entry: the leader answers a put once a majority of the group stores the entry
(DLedger's QuorumAckChecker), so a group of three stops taking writes when two are gone. Controller
mode (RIP-44) keeps the classic commitlog and replicates it with the AutoSwitch HA service: the
master answers once the replicas its settings ask for have it, counted among the *SyncStateSet*,
which the master shrinks (haMaxTimeSlaveNotCatchup, 15 s) when a replica stops catching up — down
to the master alone. What the put then waits for (RocketMQ's `CommitLog.asyncPutMessage` /
`handleHA`, rmqlab.ha.autoswitch.auto_switch_ha_protocol.decide_write_ack):

* `allAckInSyncStateSet=true` (conf/controller/'s brokers set it): every SyncStateSet member;
  while the dead replicas are still members the puts wait and time out (FLUSH_SLAVE_TIMEOUT),
  after the shrink the master alone acknowledges.
* `allAckInSyncStateSet=false` (RocketMQ's default): `inSyncReplicas` (default 1) replicas.
* `minInSyncReplicas` (default 1): fewer SyncStateSet members than this and the put is refused
  (IN_SYNC_REPLICAS_NOT_ENOUGH) — `minInSyncReplicas=2` makes controller mode stop writes like a
  Raft majority does.

`failure_run` kills the two followers of the group at once (the master stays, so no client has to
find a new route) under a producer sending every 100 ms; `cost_run` sends the same messages with
nothing failing and measures send latency and the bytes the replicas sent one another per
acknowledged message (the trace's frame.send events between two members of the group: DLedger's
push / heartbeat requests and their answers; HA transfer, heartbeat and ack frames).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rmqlab.cluster import Cluster
from rmqlab.trace import client_ops

TOPIC = "DataPlaneTopic"
SEND_EVERY_MS = 100
WARM_MS = 5_000            # sending before the failure
AFTER_MS = 40_000          # sending after it: past haMaxTimeSlaveNotCatchup (15 s) and a few send timeouts
COST_MESSAGES = 200
BUCKET_MS = 1_000          # the figure's bins
# The producer's final error codes (RocketMQ's ResponseCode and ClientErrorCode) by name.
RESPONSE_CODES = {1: "SYSTEM_ERROR", 2: "SYSTEM_BUSY", 10002: "send timeout", 10005: "no route"}

# Each variant: (label, mode, broker settings on top of the templates).
VARIANTS: dict[str, tuple[str, dict[str, object]]] = {
    "dledger": ("dledger", {}),
    "controller": ("controller-standalone", {}),   # conf/controller/: allAckInSyncStateSet=true
    "controller, allAckInSyncStateSet=false": ("controller-standalone", {"allAckInSyncStateSet": False}),
    "controller, minInSyncReplicas=2": ("controller-standalone", {"minInSyncReplicas": 2}),
}


@dataclass
class Send:
    invoke_ms: float          # relative to the failure (negative: before it)
    complete_ms: float | None
    ok: bool
    error: str | None


@dataclass
class FailureRun:
    variant: str
    master: str
    killed: list[str]
    sends: list[Send]
    sync_state_sets: list[tuple[float, set[int]]] = field(default_factory=list)  # (ms after the failure, set)

    def acked(self, start_ms: float, end_ms: float = float("inf")) -> int:
        """Sends invoked in [start_ms, end_ms) after the failure and acknowledged."""
        return sum(s.ok for s in self.sends if start_ms <= s.invoke_ms < end_ms)

    def sent(self, start_ms: float, end_ms: float = float("inf")) -> int:
        return sum(1 for s in self.sends if start_ms <= s.invoke_ms < end_ms)

    def first_ack_after_failure(self) -> float | None:
        """Ms after the failure when a send invoked after it was first acknowledged (None: never)."""
        times = [s.complete_ms for s in self.sends if s.ok and s.invoke_ms >= 0]
        return min(times) if times else None

    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.sends:
            if not s.ok and s.invoke_ms >= 0:
                code = re.search(r"CODE: (-?\d+)", s.error or "")
                key = RESPONSE_CODES.get(int(code.group(1)), code.group(1)) if code else (s.error or "no answer")[:40]
                out[key] = out.get(key, 0) + 1
        return out


@dataclass
class CostRun:
    variant: str
    acked: int
    latencies_ms: list[float]
    replica_bytes: int                   # frame bytes sent between members while the messages went
    replica_bytes_by_frame: dict[str, int]

    def percentile(self, p: float) -> float:
        return percentile(self.latencies_ms, p)

    @property
    def bytes_per_message(self) -> float:
        return self.replica_bytes / self.acked


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def _cluster(variant: str, seed: int) -> Cluster:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")
    mode, settings = VARIANTS[variant]
    c = Cluster(mode, seed=seed, overrides={"*": dict(settings)} if settings else None)
    try:
        c.start(60_000)
        c.create_topic(TOPIC)
        c.run_until(lambda: _settled(c), 60_000, 200)
    except BaseException:
        c.close()
        raise
    return c


def _group(c: Cluster) -> str:
    return next(iter({c.broker_template(n).brokerName for n in c.brokers}))


def _settled(c: Cluster) -> bool:
    """A master, and every replica holding all it has: DLedger's followers at the leader's ledger
    end, controller mode's SyncStateSet of all three."""
    master = c.master(_group(c))
    if master is None:
        return False
    broker = c.components[master]
    rm = getattr(broker, "replicas_manager", None)
    if rm is not None:
        return len(rm.sync_state_set) == len(c.brokers)
    store = broker.message_store
    ends = {c.components[n].message_store.get_max_phy_offset() for n in c.brokers}
    return len(ends) == 1 and store.get_max_phy_offset() >= 0


def _sends(c: Cluster, producer: str, zero_ms: float) -> list[Send]:
    return [Send(op.invoke_time_ms - zero_ms,
                 None if op.complete_time_ms is None else op.complete_time_ms - zero_ms,
                 op.type == "ok", None if op.type == "ok" else str(op.error))
            for op in client_ops(c.events()) if op.node == producer and op.f == "send"]


def failure_run(variant: str, seed: int = 7) -> FailureRun:
    """Kill both followers of the group at once under a steady producer."""
    c = _cluster(variant, seed)
    try:
        c.add_producer("writer", topic=TOPIC, interval_ms=SEND_EVERY_MS)
        c.run_for(WARM_MS)
        master = c.master(_group(c))
        killed = [n for n in c.brokers if n != master]
        failed_at = c.now_ms()
        for n in killed:
            c.nemesis.kill(n)
        c.run_for(AFTER_MS)
        c.backend.stop("writer")
        c.run_for(5_000)   # the last sends time out or finish
        sss = [(e.time_ms - failed_at, set(e.fields["sync_state_set"])) for e in c.events()
               if e.kind == "ha.sync_state_set_change" and e.node == master and e.time_ms >= failed_at]
        return FailureRun(variant, master, killed, _sends(c, "writer", failed_at), sss)
    finally:
        c.close()


def cost_run(variant: str, seed: int = 7, messages: int = COST_MESSAGES) -> CostRun:
    """`messages` sends, one every 100 ms, nothing failing."""
    c = _cluster(variant, seed)
    try:
        members = set(c.brokers)
        start = len(c.events())
        c.add_producer("writer", topic=TOPIC, count=messages, interval_ms=SEND_EVERY_MS)
        c.run_until(lambda: sum(op.complete_time_ms is not None for op in client_ops(c.events())
                                if op.node == "writer" and op.f == "send") == messages, 120_000, 500)
        events = c.events()
        owner = address_owners(events)
        by_frame: dict[str, int] = {}
        for e in events[start:]:
            if e.kind == "frame.send" and e.node in members and owner.get(e.fields["peer"]) in members - {e.node}:
                key = f"{e.fields.get('proto')} {e.fields.get('name')}"
                by_frame[key] = by_frame.get(key, 0) + e.fields["size"]
        ops = [op for op in client_ops(events) if op.node == "writer" and op.f == "send"]
        return CostRun(variant, sum(op.type == "ok" for op in ops),
                       [op.complete_time_ms - op.invoke_time_ms for op in ops if op.type == "ok"],
                       sum(by_frame.values()), by_frame)
    finally:
        c.close()


def address_owners(events) -> dict[str, str]:
    """host:port -> the node it belongs to: the local end of every connection a node opened
    (net.connect) and every listening address a node accepted on (net.accept)."""
    out: dict[str, str] = {}
    for e in events:
        if e.kind in ("net.connect", "net.accept") and e.fields.get("local"):
            out[e.fields["local"]] = e.node
    return out


def acked_per_bucket(run: FailureRun, bucket_ms: int = BUCKET_MS) -> list[tuple[float, int]]:
    """(bucket start in s after the failure, acknowledgements that arrived in it)."""
    lo = -WARM_MS // bucket_ms + 1
    hi = AFTER_MS // bucket_ms
    counts = dict.fromkeys(range(lo, hi), 0)
    for s in run.sends:
        if s.ok and s.complete_ms is not None and lo <= s.complete_ms // bucket_ms < hi:
            counts[int(s.complete_ms // bucket_ms)] += 1
    return [(b * bucket_ms / 1000, n) for b, n in counts.items()]


def failure_table(runs: list[FailureRun]) -> str:
    lines = [f"{'variant':<42}{'acked before':>13}{'acked after':>12}{'first ack after (s)':>21}"
             f"{'acked in last 10 s':>20}  errors after"]
    for r in runs:
        first = r.first_ack_after_failure()
        lines.append(f"{r.variant:<42}{r.acked(-WARM_MS, 0):>6}/{r.sent(-WARM_MS, 0):<6}"
                     f"{r.acked(0):>5}/{r.sent(0):<6}"
                     f"{'never' if first is None else f'{first / 1000:.1f}':>21}"
                     f"{r.acked(AFTER_MS - 10_000):>13}/{r.sent(AFTER_MS - 10_000):<6}  {r.errors()}")
    return "\n".join(lines)


def cost_table(runs: list[CostRun]) -> str:
    lines = [f"{'variant':<42}{'acked':>6}{'p50 ms':>8}{'p99 ms':>8}{'bytes/msg':>11}  largest frames (bytes/msg)"]
    for r in runs:
        top = sorted(r.replica_bytes_by_frame.items(), key=lambda kv: -kv[1])[:3]
        lines.append(f"{r.variant:<42}{r.acked:>6}{r.percentile(50):>8.1f}{r.percentile(99):>8.1f}"
                     f"{r.bytes_per_message:>11.0f}  "
                     + ", ".join(f"{k}: {v / r.acked:.0f}" for k, v in top))
    return "\n".join(lines)


def figure(runs: list[FailureRun], title: str = "Both followers killed at t = 0: acknowledgements per second"):
    """Acknowledgements per second (when they arrived), a row per variant (plotly). The y axis
    stops at twice the sending rate: a burst above it (the producer catching up) is written on it."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    top = 2 * 1000 // SEND_EVERY_MS
    fig = make_subplots(rows=len(runs), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[r.variant for r in runs])
    for row, r in enumerate(runs, 1):
        points = acked_per_bucket(r)
        fig.add_trace(go.Scatter(x=[t for t, _ in points], y=[n for _, n in points], mode="lines",
                                 line_shape="hv", name=r.variant, showlegend=False), row=row, col=1)
        for t, n in points:
            if n > top:
                fig.add_annotation(x=t + 0.5, y=top, text=f"{n} (the producer catching up)", showarrow=False,
                                   yanchor="top", xanchor="left", row=row, col=1)
        fig.add_vline(x=0, line_dash="dash", row=row, col=1)
        fig.update_yaxes(range=[0, top], row=row, col=1)
    fig.update_xaxes(title_text="seconds after the failure", row=len(runs), col=1)
    fig.update_layout(title=title, height=130 * len(runs) + 120, margin=dict(t=80))
    return fig
