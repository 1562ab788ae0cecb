"""Facts lab 01 states in prose, computed from a mode's run so the text follows the run.

`restart_hazard`: what a classic master that lost its unflushed tail did after it restarted behind
its slave. RocketMQ's master takes a slave's offset report at its word (`DefaultHAConnection`'s
read service stores it and calls `DefaultHAService.notifyTransferSome`, which only ever raises
`push2SlaveMaxOffset`); so a SYNC_MASTER that restarted behind its slave acknowledges sync sends
at offsets the slave already holds with other messages, and nothing reports it. rmqlab can refuse
such a report instead (`rmqlabRejectImpossibleHaReport=true`, an rmqlab-only option): then no sync
send to that master completes. The function reports what the run shows, whichever happened.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.checker.checkers import send_acknowledged
from rmqlab.common.message.message_decoder import decode_message_id
from rmqlab.demo.mode_comparison import acked_behind_slave
from rmqlab.trace import client_ops
from rmqlab.viz.sends import send_rows


@dataclass(frozen=True)
class RestartHazard:
    master: str
    slave: str
    master_end: int | None        # the restarted master's commit-log end, as it recovered it
    slave_end: int | None         # its slave's end at that moment
    acked_after_restart: int      # sends the broker set acknowledged after the restart
    acked_behind_slave: int       # of those, the ones the master wrote where its slave holds other bytes
    sends_after_restart: int      # sends the producer made to any broker after the restart

    @property
    def behind(self) -> int:
        """Bytes the restarted master was behind its slave (0 when it was not behind)."""
        if self.master_end is None or self.slave_end is None:
            return 0
        return max(0, self.slave_end - self.master_end)

    def describe(self, mode: str) -> str:
        if not self.behind:
            return f"{mode}: {self.master} did not restart behind {self.slave}."
        head = (f"{mode}: {self.master} restarted with its commit log ending at {self.master_end}, "
                f"{self.behind} bytes behind {self.slave} ({self.slave_end}).")
        if self.acked_behind_slave:
            return (head + f" After the restart {self.master} acknowledged {self.acked_after_restart} sends; "
                    f"{self.acked_behind_slave} of them it wrote below offset {self.slave_end}, where {self.slave} "
                    f"already holds other messages. The two logs now differ at the same offsets, and nothing "
                    f"reported it.")
        if self.acked_after_restart:
            return (head + f" After the restart {self.master} acknowledged {self.acked_after_restart} sends, "
                    f"none of them below {self.slave}'s end.")
        # No ack says nothing about why (the slave may not have reported yet, or rmqlab's option
        # rmqlabRejectImpossibleHaReport refused its reports): say only what the run shows.
        return (head + f" After the restart {self.master} acknowledged no send ({self.sends_after_restart} sends "
                f"went elsewhere or timed out).")


def restart_hazard(events, restart_at_ms: float, topic: str | None = None,
                   master: str = "broker-a", slave: str = "broker-a-s", broker_set: str = "broker-a") -> RestartHazard:
    """What `master` (restarted at `restart_at_ms`) and its slave held, and what it acknowledged after.

    The master's end is where it stored its first message after the restart (the offset in the
    message id of its first send response); the slave's, the offset of its first HA report to the
    restarted master (a classic slave reports its max offset)."""
    events = list(events)
    after = [e for e in events if e.time_ms >= restart_at_ms]
    stored = []
    for e in after:
        if e.node == master and e.kind == "frame.send" and e.fields.get("proto") == "remoting" \
                and (e.fields.get("ext_fields") or {}).get("msgId"):
            try:
                stored.append(decode_message_id(e.fields["ext_fields"]["msgId"])[1])
            except ValueError:
                continue
    reports = [e.fields["offset"] for e in after if e.node == slave and e.kind == "frame.send"
               and e.fields.get("proto") == "ha" and e.fields.get("name") == "report"]
    rows = [r for r in send_rows(events, topic) if r["time_s"] * 1000 >= restart_at_ms]
    acked = sum(r["outcome"] == "acknowledged" and r["broker_set"] == broker_set for r in rows)
    # The same count as the claims table's (one definition of "behind its slave").
    sends = [op for op in client_ops(events) if op.f == "send" and isinstance(op.invoke_value, dict)
             and (topic is None or op.invoke_value.get("topic") == topic)]
    behind = acked_behind_slave(events, [op for op in sends if send_acknowledged(op)], master, restart_at_ms)
    return RestartHazard(master, slave, min(stored) if stored else None, reports[0] if reports else None,
                         acked, behind, len(rows))
