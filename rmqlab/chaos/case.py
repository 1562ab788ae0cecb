"""A case of a chaos campaign: one mode, one configuration, one fault kind on one kind of target,
run as OpenChaos runs a fault: `duration_ms` of fault, `interval_ms` to recover, again and again
for `run_ms` (rmqlab.checker.schedule.interval_schedule), repeated over seeds.

A Case is plain data (`to_dict` / `from_dict`: JSON values only), so a task shipped to a worker
process or a Spark executor is just `(case.to_dict(), seed)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rmqlab.checker.queue_clients import QueueWorkload
from rmqlab.checker.schedule import interval_targets
from rmqlab.cluster.modes import MODES


@dataclass(frozen=True)
class Case:
    """`config`: the preset's name; `broker` / `controller`: its settings (every broker, every
    controller; controller settings apply only in the modes that have controllers). `kind` and
    `target` as interval_schedule takes them. `workload`: QueueWorkload fields (interval_ms, queues,
    ...) and `orderly` (the live consumer is a MessageListenerOrderly one). `campaign`: where the
    case comes from (for the replay command of a violation)."""

    name: str
    mode: str
    kind: str
    target: str
    config: str = "template"
    broker: dict[str, Any] = field(default_factory=dict)
    controller: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 60_000
    interval_ms: float = 60_000
    run_ms: float = 3_600_000
    quiet_ms: float = 10_000
    loss_rate: float = 0.8
    controllers: int = 3
    workload: dict[str, Any] = field(default_factory=dict)
    campaign: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"case {self.name!r}: unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.target not in interval_targets(self.kind):  # also rejects an unknown kind
            raise ValueError(f"case {self.name!r}: {self.kind} takes targets {', '.join(interval_targets(self.kind))}, "
                             f"not {self.target!r}")
        known = {f.name for f in fields(QueueWorkload)} | {"orderly"}
        if set(self.workload) - known:
            raise ValueError(f"case {self.name!r}: unknown workload settings "
                             f"{', '.join(sorted(set(self.workload) - known))}; known: {', '.join(sorted(known))}")

    @property
    def fault(self) -> str:
        return f"{self.kind}:{self.target}"

    def injections(self) -> int:
        """How many faults a run of this case injects (the schedule's loop, before any is skipped
        for want of a master)."""
        lead = min(self.interval_ms, 5_000)
        return max(0, int((self.run_ms - lead - self.duration_ms) // (self.duration_ms + self.interval_ms)) + 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        return cls(**d)
