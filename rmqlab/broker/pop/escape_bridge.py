"""EscapeBridge (RocketMQ 5 ``broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java``),
local only: ``putMessage`` for the special services, and the two calls POP uses.

``putMessage`` (``put_message``): how the special services (delay-level delivery, the timer
messages' dequeue) store a message that falls due. On the group's master (``peekMasterBroker``:
brokerId 0) it goes into the local store. On a slave acting as master (RIP-32) RocketMQ escapes it
to another group's master when ``enableRemoteEscape`` is on (``putMessageToRemoteBroker``); rmqlab
has no remote escape (the broker refuses ``enableRemoteEscape``), so an acting slave's put answers
SERVICE_NOT_AVAILABLE, as RocketMQ's does with ``enableRemoteEscape=false``: the delay level retries
it every 100 ms, the timer dequeue three times and then drops it (RocketMQ's rules; the returning
master delivers it again from its own checkpoint), and nothing is written into the slave's own store.

``putMessageToSpecificQueue``: the broker writes its own records (checkpoints, acks, revived
messages) straight into the store, to the queue the message names. RocketMQ's goes through the
store's put hooks, where a message carrying ``TIMER_DELIVER_MS`` (every checkpoint and ack does)
is parked in the timer wheel until that time; rmqlab's revive service applies the times itself
(see rmqlab.broker.pop.pop_revive_service), so records go into the revive topic at once.
``getMessageAsync``: read the message at one queue offset (RocketMQ may read it from another
broker of the group when it is not local; here only the local store is asked).

Without slave-acting-master (RIP-32) a slave has nothing to escape to: its puts are refused
(SERVICE_NOT_AVAILABLE), as a SLAVE store refuses every put.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.broker_util import wait_completable
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_decoder import decode
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")


async def put_message(broker: BrokerController, msg: MessageExtBrokerInner) -> PutMessageResult | None:
    """``EscapeBridge.putMessage``: into the store of the group's master when this broker is it,
    else (an acting slave) SERVICE_NOT_AVAILABLE, there being no remote escape (module docstring).
    The local put's result is the store's, unchanged (None when the store answered nothing)."""
    if broker.peek_master_broker() is not None:
        return await wait_completable(broker.message_store.async_put_message(msg))
    # Remote escape plugs in here: with enableSlaveActingMaster and enableRemoteEscape, RocketMQ
    # sends the message to the master of another group (putMessageToRemoteBroker) and maps the
    # SendResult to a PutMessageResult (transformSendResult2PutResult).
    bc = broker.broker_config
    log.warning("Put message failed, enableSlaveActingMaster=%s, enableRemoteEscape=%s.",
                bc.enableSlaveActingMaster, bc.enableRemoteEscape)
    return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)


async def put_message_to_specific_queue(broker: BrokerController, msg: MessageExtBrokerInner) -> PutMessageResult:
    store = broker.message_store
    if store is None or not store.running:
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
    result = await wait_completable(store.async_put_message(msg))
    return result if result is not None else PutMessageResult(PutMessageStatus.UNKNOWN_ERROR)


def is_put_ok(result: PutMessageResult | None) -> bool:
    """What the pop processors accept as stored: PUT_OK, or a flush/replication wait that failed."""
    return result is not None and result.put_message_status in (
        PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE)


def get_message(broker: BrokerController, topic: str, queue_offset: int, queue_id: int) -> MessageExt | None:
    """The message at ``queue_offset`` of the queue, or None when it is not (or no longer) there.

    As RocketMQ since ISSUE #7724, the message returned is the one at exactly that offset (a read
    "from" the offset could return a later message when the queue's head was cleaned)."""
    store = broker.message_store
    if store is None or not store.running:
        return None
    result = store.get_message("", topic, queue_id, queue_offset, 1, None)
    if result.status is not GetMessageStatus.FOUND or not result.message_buffers:
        return None
    if result.queue_offsets[0] != queue_offset:
        return None
    try:
        msg = decode(result.message_buffers[0], check_crc=False)
    except ValueError:
        return None
    msg.queue_offset = queue_offset
    return msg
