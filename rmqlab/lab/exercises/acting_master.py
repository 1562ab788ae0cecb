"""Lab 05's exercise: which broker a route shows as the master of a group that lost its master
(the design page "RIP 32 Slave Acting Master Mode", section "Slave Acting Master"; RocketMQ's
`namesrv/.../routeinfo/RouteInfoManager.pickupTopicRouteData` under `supportActingMaster`).

The student writes

    def acting_master(topic, broker_ids, enable_acting_master, perm) -> int | None

The name server asks it for each broker group of a route it answers (GET_ROUTEINFO_BY_TOPIC), with
`topic` the topic asked for, `broker_ids` the group's registered broker ids in ascending order,
`enable_acting_master` the group's flag (its brokers run with enableSlaveActingMaster; a broker from
before RIP-32 clears it), and `perm` the group's queue permission for that topic (PermName bits:
PERM_READ 4, PERM_WRITE 2, PERM_INHERIT 1). The answer is the id of the member the route lists as
brokerId 0 — the "acting master" clients will pull from and ask master-only questions — or None to
list the group as it is.

RocketMQ's rule (rmqlab.namesrv.routeinfo.route_info_manager.acting_master):

* never for the member-group sync's own topic, `rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`: brokers
  learn who is alive from that route, so it must show the real ids;
* only for a group with members, none of them id 0, with enable_acting_master set, and whose
  queues for the topic are not writeable (the name server took PERM_WRITE away when the master
  left; 6 -> 4): the smallest id;
* otherwise None.

The function is the decision point ``acting_master`` (rmqlab.common.decision_points);
`EXERCISE.decision_points(fn)` makes the name servers ask it (only those with
supportActingMaster=true ever do).
"""

from __future__ import annotations

from rmqlab.common.constant.perm_name import PermName
from rmqlab.lab.exercises.election import normalize_broker_id
from rmqlab.lab.exercises.registry import Example, Exercise


def reference(topic, broker_ids, enable_acting_master, perm):
    """pickupTopicRouteData's choice for one group (RouteInfoManager). Imported when first asked:
    the sandbox that runs a student's function imports every exercise, and the name server's
    package would add a tenth of a second to each of those processes."""
    from rmqlab.namesrv.routeinfo.route_info_manager import acting_master as rocketmq_rule

    return rocketmq_rule(topic, list(broker_ids), bool(enable_acting_master), int(perm))


def _describe(args) -> str:
    topic, broker_ids, enable, perm = args
    return (f"topic {topic!r}, broker ids {list(broker_ids)}, enableActingMaster {bool(enable)}, "
            f"perm {perm} ({PermName.perm2string(perm)})")


_SEED = ('design page "RIP 32 Slave Acting Master Mode", "Slave Acting Master" '
         '(https://github.com/apache/rocketmq/wiki/RIP-32-Slave-Acting-Master-Mode)')
_REF = "RocketMQ's RouteInfoManager.pickupTopicRouteData (namesrv/src/main/java/org/apache/rocketmq/namesrv/routeinfo)"
_TOPIC = "TopicTest"
_SYNC_TOPIC = "rmq_sys_SYNC_BROKER_MEMBER_broker-a"


def _ex(name, args, expected, hint, source=_REF) -> Example:
    return Example(name, tuple(args), expected, hint, source)


PUBLIC_EXAMPLES: tuple[Example, ...] = (
    _ex("the master is there", (_TOPIC, [0, 1, 2], True, 6), None,
        "A group with a master (id 0) is listed as it is.", _SEED),
    _ex("master gone, slaves read-only", (_TOPIC, [1, 2], True, 4), 1,
        "No id 0, acting master enabled, queues read-only: the living slave with the smallest id acts as "
        "a read-only master.", _SEED),
    _ex("master and first slave gone", (_TOPIC, [2], True, 4), 2,
        "The smallest id ALIVE: here broker 2.", _SEED),
    _ex("a group of old brokers", (_TOPIC, [1, 2], False, 4), None,
        "enableActingMaster is false (old brokers, or the switch off): no rewrite; clients see no master.", _REF),
    _ex("queues still writeable", (_TOPIC, [1, 2], True, 6), None,
        "Only a group whose queues are not writeable gets an acting master: a writeable perm means clients "
        "could send to it.", _REF),
    _ex("the member-group sync's own topic", (_SYNC_TOPIC, [1, 2], True, 4), None,
        "Brokers read who is alive from this route: it must show the real ids.", _REF),
    _ex("an empty group", (_TOPIC, [], True, 4), None, "No members, nobody to list.", _REF),
    _ex("read and inherit, no write", (_TOPIC, [1, 3], True, 5), 1,
        "perm 5 is R-X: not writeable, so the smallest id acts.", _REF),
    _ex("write without read", (_TOPIC, [1, 3], True, 2), None,
        "perm 2 has PERM_WRITE: writeable, no rewrite.", _REF),
)


def _strategies(ask) -> dict:
    """The decision point acting_master: the group as pickupTopicRouteData sees it, to `ask`."""

    def acting_master(topic, broker_ids, enable_acting_master, perm):
        return ask(topic, list(broker_ids), bool(enable_acting_master), int(perm))

    return {"acting_master": acting_master}


EXERCISE = Exercise(
    name="acting_master", function="acting_master", lab="05-slave-acting-master", modes=("acting-master",),
    reference=reference, public_examples=PUBLIC_EXAMPLES, normalize_answer=normalize_broker_id, strategies=_strategies,
    describe=_describe, answer_kind="a broker id or None",
    arg_names=("topic", "broker_ids", "enable_acting_master", "perm"), points=("acting_master",),
    reference_workload="acting-kill-master",
    summary="which member a route shows as the master of a group without one (pickupTopicRouteData)")


def check(student_fn, examples=None, **kwargs):
    """EXERCISE.check: the public examples (or `examples`), each in a sandboxed child."""
    return EXERCISE.check(student_fn, examples, **kwargs)


__all__ = ["reference", "PUBLIC_EXAMPLES", "EXERCISE", "check"]
