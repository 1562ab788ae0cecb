"""Lab 02's exercise: which replica the controller elects (the controller design document
`docs/en/controller/design.md` "Elect Master", `docs/cn/controller/design.md` 「Master 选举」; RocketMQ's
`controller/.../elect/impl/DefaultElectPolicy`).

The student writes

    def elect_master(candidates, old_master, prefer_broker_id) -> int | None

`candidates` are the replicas of one pool that passed the validity filter (alive: the controller's
heartbeat manager), sorted by broker id, each `[broker_id, live]` where `live` is
`[epoch, max_offset, election_priority]` from the replica's last heartbeat, or None when the
controller knows nothing about it. `old_master` is the current master's id (or None);
`prefer_broker_id` the id an admin asked for (electMaster -b), or None. The answer is the new
master's id, or None for "nobody from this pool".

RocketMQ's rule (DefaultElectPolicy.tryElect after the filter; rmqlab's DefaultElectPolicy):

1. no candidate: None;
2. the old master is a candidate and nobody else is preferred (or it is the preferred one): keep it;
3. a preferred id: that id if it is a candidate, otherwise None — never a substitute;
4. otherwise the best candidate: higher epoch first, then higher max_offset, then **lower**
   election_priority; candidates without live info rank after all others; ties go to the
   lowest broker id (Java's TreeSet keeps the first inserted, in ascending-id order for the small
   ids of a broker set).

The controller calls it twice per election: with the SyncStateSet, and — only if that gives None
and unclean election is enabled — with every registered replica (`elect`). The function is the
decision point ``elect_master`` (rmqlab.common.decision_points; DefaultElectPolicy asks it for both
pools, after the validity filter): `EXERCISE.decision_points(fn)` makes the controllers ask it, so a
graded run exercises it on every election the controller makes.
"""

from __future__ import annotations

import numbers
from typing import Any

from rmqlab.lab.exercises.registry import Example, Exercise


def reference(candidates, old_master, prefer_broker_id):
    """DefaultElectPolicy's choice among `candidates` (`DefaultElectPolicy.elect`)."""
    ids = [c[0] for c in candidates]
    if not ids:
        return None
    if old_master in ids and (prefer_broker_id is None or prefer_broker_id == old_master):
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in ids else None

    def rank(candidate):
        broker_id, live = candidate
        if live is None:
            return (1, 0, 0, 0, broker_id)
        epoch, max_offset, priority = live
        return (0, -epoch, -max_offset, priority, broker_id)

    return min(candidates, key=rank)[0]


def normalize_broker_id(answer: Any) -> int | None:
    """An answer that is a broker id or None (lab 05's exercise asks the same)."""
    if answer is None:
        return None
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        raise ValueError("the answer must be a broker id (an int) or None")
    return int(answer)


def _describe(args) -> str:
    candidates, old_master, prefer = args
    shown = ", ".join(f"{b}: " + ("no live info" if live is None else
                                  f"epoch {live[0]} maxOffset {live[1]} priority {live[2]}")
                      for b, live in candidates) or "none"
    return f"candidates [{shown}], old master {old_master}, preferred {prefer}"


_SEED = "controller design document (docs/en/controller/design.md) \"Elect Master\" / 「Master 选举」"
_REF = "RocketMQ's DefaultElectPolicy (controller/src/main/java/org/apache/rocketmq/controller/elect/impl)"


def _ex(name, candidates, old_master, prefer, expected, hint, source=_REF) -> Example:
    return Example(name, (candidates, old_master, prefer), expected, hint, source)


PUBLIC_EXAMPLES: tuple[Example, ...] = (
    _ex("master died, one slave left", [[2, [1, 1000, 0]]], None, None, 2,
        "The only alive member of the SyncStateSet becomes the master.", _SEED),
    _ex("nobody alive in the pool", [], 1, None, None,
        "No candidate: None (the controller then tries every replica, if unclean election is on).", _SEED),
    _ex("the old master is still alive", [[1, [2, 1000, 0]], [2, [2, 1200, 0]]], 1, None, 1,
        "The old master is a candidate and nobody else is preferred: keep it (CONTROLLER_MASTER_STILL_EXIST), "
        "even though broker 2 has more data.", _REF),
    _ex("higher epoch wins over more data", [[2, [3, 800, 0]], [3, [2, 5000, 0]]], 1, None, 2,
        "Compare epochs first: broker 3 wrote its 5000 bytes under an older epoch.", _REF),
    _ex("same epoch: more data wins", [[2, [3, 800, 0]], [3, [3, 900, 0]]], 1, None, 3,
        "Same epoch: the larger max_offset loses the least.", _REF),
    _ex("same data: lower priority value wins", [[2, [3, 900, 5]], [3, [3, 900, 1]]], 1, None, 3,
        "electionPriority: the SMALLER value is preferred.", _REF),
    _ex("a full tie goes to the lowest id", [[2, [3, 900, 1]], [3, [3, 900, 1]]], 1, None, 2,
        "Equal epoch, offset and priority: Java's TreeSet keeps the first inserted, the lowest id.", _REF),
    _ex("the admin prefers a candidate", [[1, [2, 1000, 0]], [2, [2, 900, 0]]], 1, 2, 2,
        "electMaster -b 2: broker 2 is a candidate, so it is elected even though the old master is alive.", _REF),
    _ex("the preferred broker is not a candidate", [[2, [2, 1000, 0]], [3, [2, 900, 0]]], 1, 4, None,
        "A preferred id that is not in the pool gives None: never a substitute.", _REF),
    _ex("the old master is the preferred one", [[1, [2, 1000, 0]], [2, [2, 2000, 0]]], 1, 1, 1,
        "Preferring the old master keeps it.", _REF),
    _ex("no live info for one candidate", [[2, None], [3, [1, 10, 9]]], 1, None, 3,
        "A candidate the controller has no heartbeat for ranks after every candidate with one (rmqlab's rule: "
        "RocketMQ's comparator would throw on it).", _REF),
    _ex("no live info at all", [[3, None], [5, None]], None, None, 3,
        "Without live info every candidate ties: the lowest id.", _REF),
    _ex("the old master is gone, first election ever", [[1, [0, 0, 0]], [2, [0, 0, 0]], [3, [0, 0, 0]]], None,
        None, 1, "A new broker set: everyone is equal, the lowest id becomes the first master.", _SEED),
)


def _strategies(ask) -> dict:
    """The decision point elect_master: DefaultElectPolicy's filtered pool, as JSON, to `ask`."""

    def elect_master(candidates, old_master, prefer_broker_id):
        return ask([[broker_id, None if info is None else
                     [int(info.epoch), int(info.max_offset), int(info.election_priority)]]
                    for broker_id, info in candidates], old_master, prefer_broker_id)

    return {"elect_master": elect_master}


EXERCISE = Exercise(
    name="elect_master", function="elect_master", lab="02-raft-controller",
    modes=("controller-standalone", "controller-embedded"), reference=reference, public_examples=PUBLIC_EXAMPLES,
    normalize_answer=normalize_broker_id, strategies=_strategies, describe=_describe, answer_kind="a broker id or None",
    arg_names=("candidates", "old_master", "prefer_broker_id"), points=("elect_master",),
    reference_workload="ctrl-standalone-kill-master",
    summary="the controller's election candidate choice (DefaultElectPolicy)")


def check(student_fn, examples=None, **kwargs):
    """EXERCISE.check: the public examples (or `examples`), each in a sandboxed child."""
    return EXERCISE.check(student_fn, examples, **kwargs)


__all__ = ["reference", "PUBLIC_EXAMPLES", "EXERCISE", "check"]
