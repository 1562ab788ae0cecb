"""The demo's headline scenario: controller-mode failover, measured from the trace.

Controller mode as RocketMQ's docs deploy it (「主备自动切换模式部署」): three controllers (standalone,
Raft over pysyncobj) and broker set broker-a of three replicas, allAckInSyncStateSet=true. A
producer sends every 50 ms; 5 s in, the master's machine loses power (the `@master` of the chaos
schedules: whoever is master then); 10 s later it comes back and rejoins as a slave, truncating
to the consistent point. The run is rmqlab.checker.chaos with this one fixed schedule, so the
same checkers judge it: Jepsen's total queue (nothing acknowledged lost), the replicas byte for
byte up to the confirm offset, one master per broker set and epoch. Every number below comes
from the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.checker.chaos import ChaosRun, check_all, run_chaos
from rmqlab.checker.checkers import send_acknowledged
from rmqlab.checker.queue_clients import QueueWorkload
from rmqlab.checker.result import CheckResult
from rmqlab.checker.schedule import MASTER, FaultOp, FaultSchedule
from rmqlab.trace import client_ops
from rmqlab.viz.sends import in_flight_ops

CRASH_AT_MS = 5_000
DOWN_FOR_MS = 10_000
QUIET_MS = 10_000
SEND_EVERY_MS = 50


@dataclass
class FailoverResult:
    seed: int
    crashed: str                 # the master whose machine crashed
    new_master: str | None
    crash_ms: float              # virtual time of the crash
    elected_after_ms: float | None     # crash -> the new master's role event
    first_ack_after_ms: float | None   # crash -> the first send acknowledged after it
    acknowledged: int            # SEND_OK (rmqlab.checker's send_acknowledged, as the figures count)
    unknown: int                 # sends whose outcome the client never learned (timeouts, other statuses)
    in_flight: int               # sends still waiting for their answer when the run ended: no outcome yet
    checks: dict[str, CheckResult]
    run: ChaosRun                # its events and store files (the report draws from them)

    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.checks.values())


def schedule(seed: int) -> FaultSchedule:
    return FaultSchedule(seed, (FaultOp(CRASH_AT_MS, "crash", MASTER, fault_id=1),
                                FaultOp(CRASH_AT_MS + DOWN_FOR_MS, "restart", MASTER, fault_id=1)),
                         fault_window_ms=CRASH_AT_MS + DOWN_FOR_MS, quiet_ms=QUIET_MS)


def run_failover(seed: int) -> FailoverResult:
    """Run the scenario; the caller owns `result.run` (call `result.run.cleanup()` when done)."""
    run = run_chaos(seed, mode="controller-standalone", schedule=schedule(seed),
                    workload=QueueWorkload(topic="DemoFailover", interval_ms=SEND_EVERY_MS))
    events = run.events
    crash = next(e for e in events if e.kind == "node.crash")
    elected = next((e for e in events if e.kind == "role" and e.fields.get("component") == "broker"
                    and "MASTER" in e.fields["to"] and e.seq > crash.seq), None)
    sends = [op for op in client_ops(events) if op.f == "send"]
    pending = in_flight_ops(events)
    in_flight = [op for op in sends if (op.node, op.process, op.op_id, op.invoke_time_ms) in pending]
    acked = [op for op in sends if send_acknowledged(op)]
    acks_after = [op.complete_time_ms for op in acked if op.invoke_time_ms > crash.time_ms]
    return FailoverResult(
        seed=seed, crashed=crash.node, new_master=elected.node if elected else None, crash_ms=crash.time_ms,
        elected_after_ms=elected.time_ms - crash.time_ms if elected else None,
        first_ack_after_ms=min(acks_after) - crash.time_ms if acks_after else None,
        acknowledged=len(acked), unknown=len(sends) - len(acked) - sum(op.type == "fail" for op in sends)
        - len(in_flight), in_flight=len(in_flight),
        checks=check_all(run), run=run)
