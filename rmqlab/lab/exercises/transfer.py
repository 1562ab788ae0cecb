"""Lab 01's exercise: the classic sync-replication wait — may a SYNC_MASTER answer this write yet?
(the deployment guide 「多节点(集群)多副本模式-同步双写」, the article 「RocketMQ原理解析-HA」
"同步复制和异步复制"; RocketMQ's `store/.../ha/GroupTransferService`).

The student writes

    def transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset) -> bool

A SYNC_MASTER put that needs more than one copy (needAckNums = inSyncReplicas, 2 in the repo's
conf/2m-2s-sync) waits in GroupTransferService as a GroupCommitRequest: `next_offset` is the end
of the message in the commitlog (wroteOffset + wroteBytes), `ack_nums` how many replicas, the
master included, must hold it. `slave_ack_offsets` has one entry per HA connection: the offset
that connection's slave last acknowledged (slaveAckOffset). `push2slave_max_offset` is the
largest offset any slave acknowledged (push2SlaveMaxOffset). The answer: True when the write is
replicated enough to be answered PUT_OK now (otherwise it waits; after slaveTimeout it fails with
FLUSH_SLAVE_TIMEOUT).

RocketMQ's rule (GroupTransferService.doWaitTransfer, rmqlab.ha.group_transfer_service):

* ack_nums <= 1 (and not -1): True when push2slave_max_offset >= next_offset;
* otherwise count the master (1) plus every connection whose ack offset >= next_offset; True as
  soon as the count reaches ack_nums. Connections, not distinct slaves, are counted — RocketMQ's
  known imprecision, kept.

The function is the decision point ``transfer_ok`` (rmqlab.common.decision_points), which
GroupTransferService asks for the classic DefaultHAService's requests (mode 2m-2s-sync: ack_nums =
inSyncReplicas = 2); `EXERCISE.decision_points(fn)` makes the brokers ask it. In controller mode
AutoSwitchGroupTransferService answers ack_nums == -1 (allAckInSyncStateSet: every SyncStateSet
member) itself and does not ask; its other requests reach the point too, with the same rule.
"""

from __future__ import annotations

from typing import Any

from rmqlab.ha.group_transfer_service import transfer_ok
from rmqlab.lab.exercises.registry import Example, Exercise


def reference(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset) -> bool:
    """GroupTransferService's transferOK (`GroupTransferService.doWaitTransfer`): the broker's own
    rule, the one a run uses when no student function is given."""
    return transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset)


def _normalize(answer: Any) -> bool:
    if not isinstance(answer, bool):
        raise ValueError("the answer must be True or False")
    return answer


def _describe(args) -> str:
    next_offset, ack_nums, acks, push2 = args
    return f"next offset {next_offset}, ack nums {ack_nums}, slave acks {acks}, push2SlaveMaxOffset {push2}"


_SEED = ("deployment guide (rocketmq.apache.org/zh/docs/deploymentOperations/01deploy) 「同步双写」 / "
         "「RocketMQ原理解析-HA」 \"同步复制和异步复制\"")
_REF = "RocketMQ's GroupTransferService (store/src/main/java/org/apache/rocketmq/store/ha)"


def _ex(name, next_offset, ack_nums, acks, push2, expected, hint, source=_REF) -> Example:
    return Example(name, (next_offset, ack_nums, acks, push2), expected, hint, source)


PUBLIC_EXAMPLES: tuple[Example, ...] = (
    _ex("the slave has it", 1200, 2, [1200], 1200, True,
        "同步双写: the answer goes back once the master AND the slave hold the message (ack 1200 >= 1200).", _SEED),
    _ex("the slave is behind", 1200, 2, [1000], 1000, False,
        "The slave acknowledged only up to 1000: the write waits (and times out after slaveTimeout).", _SEED),
    _ex("no slave connected", 1200, 2, [], 0, False,
        "No connection: only the master holds it, 1 < 2 copies. The put fails with FLUSH_SLAVE_TIMEOUT "
        "after slaveTimeout.", _SEED),
    _ex("the slave is past it", 1200, 2, [5000], 5000, True,
        "An ack beyond next_offset covers it: the slave holds everything up to 5000.", _REF),
    _ex("the master counts as one", 800, 3, [800, 700], 800, False,
        "ackNums 3 = the master + 2 slaves; only one slave has 800: 2 copies < 3.", _REF),
    _ex("three copies", 800, 3, [800, 900], 900, True,
        "The master + two slaves at or beyond 800: 3 copies.", _REF),
    _ex("one ack is enough", 800, 1, [100], 900, True,
        "ackNums <= 1: RocketMQ looks at push2SlaveMaxOffset (900 >= 800), not at the connections.", _REF),
    _ex("one ack: push2SlaveMaxOffset behind", 800, 1, [900], 700, False,
        "ackNums <= 1 compares push2SlaveMaxOffset only: 700 < 800.", _REF),
    _ex("connections, not slaves, are counted", 800, 3, [800, 800], 800, True,
        "Two connections (even from the same slave, reconnecting) count twice: RocketMQ's known imprecision.",
        _REF),
    _ex("exactly at the offset", 1000, 2, [999, 1000], 1000, True,
        "ack >= next_offset, not >: the second connection holds exactly up to 1000.", _REF),
)


def _strategies(ask) -> dict:
    """The decision point transfer_ok: GroupTransferService's values, to `ask`."""

    def transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2_slave_max_offset) -> bool:
        return ask(next_offset, ack_nums, list(slave_ack_offsets), push2_slave_max_offset)

    return {"transfer_ok": transfer_ok}


EXERCISE = Exercise(
    name="transfer_ok", function="transfer_ok", lab="01-deployment-modes", modes=("2m-2s-sync",),
    reference=reference, public_examples=PUBLIC_EXAMPLES, normalize_answer=_normalize, strategies=_strategies,
    describe=_describe, answer_kind="True or False",
    arg_names=("next_offset", "ack_nums", "slave_ack_offsets", "push2slave_max_offset"), points=("transfer_ok",),
    reference_workload="sync-kill-master",
    summary="may a SYNC_MASTER write be answered yet (GroupTransferService)")


def check(student_fn, examples=None, **kwargs):
    """EXERCISE.check: the public examples (or `examples`), each in a sandboxed child."""
    return EXERCISE.check(student_fn, examples, **kwargs)


__all__ = ["reference", "PUBLIC_EXAMPLES", "EXERCISE", "check"]
