"""Lab 03's exercise: the master's SyncStateSet shrink-or-expand decision (the controller design
document, "SyncStateSet change" (Shrink, Expand) / 「SyncStateSet 变更」; RocketMQ's
`AutoSwitchHAService.maybeShrinkSyncStateSet` and `maybeExpandInSyncStateSet`).

The student writes one function that says which SyncStateSet the master wants now:

    def new_sync_state_set(sync_state_set, master_id, slaves, confirm_offset, epoch_start_offset,
                           now_ms, max_not_catchup_ms) -> list[int]

* `sync_state_set`: the set the controller last confirmed (sorted broker ids), the master included;
* `master_id`: this broker's id;
* `slaves`: every other replica the master knows, sorted by id, each
  `[slave_id, ack_offset, last_caught_up_ms]`: `ack_offset` is what its connection last
  acknowledged (None: no connection now), `last_caught_up_ms` the connectionCaughtUpTimeTable entry
  (lastCaughtUpTimeMs: the last time it had everything the master had sent; None: it never
  caught up since this master took over — "never connected");
* `confirm_offset`: the master's confirm offset (the smallest max offset in the set);
* `epoch_start_offset`: where the master's current epoch begins (its last epoch entry);
* `now_ms`, `max_not_catchup_ms`: the clock and haMaxTimeSlaveNotCatchup (15000 ms by default).

The answer is the set the master wants (a list or set of ids). RocketMQ's rule, in one place:

* Shrink: a member that has not caught up for longer than max_not_catchup_ms
  (now_ms - last_caught_up_ms > max_not_catchup_ms) leaves; a member other than the master that
  never caught up (no entry) leaves too. The master stays.
* Expand: a replica outside the set joins when its ack_offset >= confirm_offset and
  ack_offset >= epoch_start_offset (it caught up into the current epoch). No ack: it stays out.

How it maps onto RocketMQ (and onto the simulator's decision points, rmqlab.common.decision_points):
RocketMQ makes the two halves in two places, and so does rmqlab (AutoSwitchHAService in
rmqlab.ha.autoswitch.auto_switch_ha_service asks the points ``sync_state_set_shrink`` and
``sync_state_set_expand``); `EXERCISE.decision_points(fn)` makes both ask the function:

* maybeShrinkSyncStateSet (every checkSyncStateSetPeriod, 5 s): the service keeps only the answer's
  **removals** (the confirmed set minus what the answer leaves out);
* maybeExpandInSyncStateSet (on a slave's ack that caught up, for a slave outside the set): only
  **that slave's addition** is taken (whether the answer contains it).

So a function that wrongly adds at shrink time, or wrongly drops members at expand time, is not
punished twice; what it decides for the part the call site uses is. A disconnect
(removeConnection proposing the set without the slave) is not part of the exercise.
"""

from __future__ import annotations

import numbers
from typing import Any

from rmqlab.lab.exercises.registry import Example, Exercise


def reference(sync_state_set, master_id, slaves, confirm_offset, epoch_start_offset, now_ms, max_not_catchup_ms):
    """The SyncStateSet RocketMQ's master wants (`AutoSwitchHAService`: shrink in
    maybeShrinkSyncStateSet, expand in maybeExpandInSyncStateSet)."""
    members = set(sync_state_set)
    caught_up = {s: last for s, _, last in slaves if last is not None}
    result = set()
    for m in members:
        last = caught_up.get(m)
        if last is not None:
            if now_ms - last <= max_not_catchup_ms:
                result.add(m)
        elif m == master_id:
            result.add(m)
    for slave_id, ack, _ in slaves:
        if slave_id not in members and ack is not None and ack >= confirm_offset and ack >= epoch_start_offset:
            result.add(slave_id)
    return sorted(result)


def _normalize(answer: Any) -> list[int]:
    if isinstance(answer, dict) or isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        raise ValueError("the answer must be a list (or set) of broker ids")
    out = set()
    for x in answer:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise ValueError(f"the answer must be a list of broker ids (ints); it holds {x!r}")
        out.add(int(x))
    return sorted(out)


def _describe(args) -> str:
    sss, master, slaves, confirm, epoch_start, now, max_ms = args
    shown = ", ".join(f"{s}: ack {'-' if ack is None else ack}, caught up "
                      f"{'never' if last is None else f'at {last}'}" for s, ack, last in slaves) or "none"
    return (f"set {sss}, master {master}, slaves [{shown}], confirm {confirm}, epoch start {epoch_start}, "
            f"now {now}, max not-caught-up {max_ms}")


_SEED = "controller design document (docs/en/controller/design.md) \"SyncStateSet change\" / 「SyncStateSet 变更」"
_REF = "RocketMQ's AutoSwitchHAService (store/src/main/java/org/apache/rocketmq/store/ha/autoswitch)"
_MAX = 15_000


def _ex(name, sss, master, slaves, confirm, epoch_start, now, expected, hint, source=_SEED) -> Example:
    return Example(name, (sss, master, slaves, confirm, epoch_start, now, _MAX), expected, hint, source)


PUBLIC_EXAMPLES: tuple[Example, ...] = (
    _ex("everyone in step", [1, 2, 3], 1, [[2, 1000, 99_000], [3, 1000, 99_500]], 1000, 0, 100_000, [1, 2, 3],
        "Both slaves caught up within the last 15 s: nothing changes."),
    _ex("a slave falls behind", [1, 2, 3], 1, [[2, 1000, 99_000], [3, 400, 80_000]], 400, 0, 100_000, [1, 2],
        "Shrink: broker 3 last caught up 20 s ago (> haMaxTimeSlaveNotCatchUp 15 s): it is out of sync."),
    _ex("exactly at the limit", [1, 2], 1, [[2, 1000, 85_000]], 1000, 0, 100_000, [1, 2],
        "now - lastCaughtUpTimeMs = 15000 is not MORE than 15000: it stays."),
    _ex("a member never caught up", [1, 2, 3], 1, [[2, 1000, 99_000], [3, None, None]], 1000, 0, 100_000, [1, 2],
        "Broker 3 has no lastCaughtUpTimeMs since this master took over (never connected): it leaves.", _REF),
    _ex("the master stays", [1], 1, [], 500, 0, 100_000, [1],
        "The master has no entry in the table and never leaves its own set.", _REF),
    _ex("a slave catches up", [1, 2], 1, [[2, 1000, 99_000], [3, 1000, 99_900]], 1000, 0, 100_000, [1, 2, 3],
        "Expand: broker 3 acknowledged 1000 >= confirmOffset 1000 (slaveAckOffset >= ConfirmOffset): it joins."),
    _ex("a slave behind the confirm offset", [1, 2], 1, [[2, 1000, 99_000], [3, 900, 99_900]], 1000, 0, 100_000,
        [1, 2], "Expand needs slaveAckOffset >= ConfirmOffset: 900 < 1000, broker 3 stays out."),
    _ex("caught up, but not into the current epoch", [1], 1, [[2, 700, 99_900]], 700, 800, 100_000, [1],
        "The master's epoch starts at 800; broker 2's ack 700 is still in an older epoch: it stays out.", _REF),
    _ex("no connection, no expand", [1], 1, [[2, None, 99_000]], 0, 0, 100_000, [1],
        "Broker 2 has no connection now (ack None): nothing proves it caught up.", _REF),
    _ex("one leaves, one joins", [1, 2], 1, [[2, 300, 70_000], [3, 1200, 99_990]], 1200, 1000, 100_000, [1, 3],
        "Both halves at once: broker 2 is 30 s behind, broker 3 acknowledged 1200 >= 1200 and >= 1000.", _REF),
    _ex("a recent election: the new master's table is empty", [2, 3], 2, [[3, None, None]], 0, 1000, 5_000, [2],
        "Right after an election the new master has no caught-up entry for broker 3 yet: it leaves the set "
        "(it rejoins once it catches up).", _REF),
)


def _arguments(view) -> tuple:
    """The function's arguments from a SyncStateSetView (rmqlab.ha.autoswitch.auto_switch_ha_protocol):
    every replica the master knows besides itself, with its ack and its caught-up time."""
    local = sorted(view.sync_state_set)
    ids = set(view.caught_up) | set(view.acks) | (set(local) - {view.local_broker_id})
    slaves = [[s, view.acks.get(s), view.caught_up.get(s)] for s in sorted(ids)]
    return (local, view.local_broker_id, slaves, view.confirm_offset, view.epoch_start_offset, view.now_ms,
            view.max_not_catchup_ms)


def _strategies(ask) -> dict:
    """The decision points sync_state_set_shrink (the service keeps the answer's removals) and
    sync_state_set_expand (whether the answer holds the slave)."""

    def shrink(view):
        return set(ask(*_arguments(view)))

    def expand(view, slave_id) -> bool:
        return slave_id in ask(*_arguments(view))

    return {"sync_state_set_shrink": shrink, "sync_state_set_expand": expand}


EXERCISE = Exercise(
    name="sync_state_set", function="new_sync_state_set", lab="03-ha-handshake",
    modes=("controller-standalone", "controller-embedded"), reference=reference, public_examples=PUBLIC_EXAMPLES,
    normalize_answer=_normalize, strategies=_strategies, describe=_describe, answer_kind="a list of broker ids",
    arg_names=("sync_state_set", "master_id", "slaves", "confirm_offset", "epoch_start_offset", "now_ms",
               "max_not_catchup_ms"), points=("sync_state_set_shrink", "sync_state_set_expand"),
    reference_workload="ctrl-standalone-slow-replication",
    summary="the master's SyncStateSet shrink-or-expand decision")


def check(student_fn, examples=None, **kwargs):
    """EXERCISE.check: the public examples (or `examples`), each in a sandboxed child."""
    return EXERCISE.check(student_fn, examples, **kwargs)


__all__ = ["reference", "PUBLIC_EXAMPLES", "EXERCISE", "check"]
