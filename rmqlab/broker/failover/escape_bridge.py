"""EscapeBridge (RocketMQ 5 ``broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java``):
where the broker's own services put the messages they make, and read the messages they need.

The special services (delay-level delivery, the timer messages' dequeue, POP checkpoints, acks and
revival) write into "the master's" commit log. On a group's master that is the local store. On a
slave acting as master (RIP-32, the smallest-id live slave while its group has no master) the
slave's log must stay a copy of its master's, so RIP-32 "escapes" the message to another group's
master (RIP-32, "Special message escape"; rmqlab has no broker container, so there is no local
escape into a master of the same process).

``put_message`` (``putMessage``: delayed and timer messages that fall due):

* this broker is its group's master (``peekMasterBroker``): into the local store, its result as is;
* else, with ``enableSlaveActingMaster`` and ``enableRemoteEscape``: ``WAIT=false``, then
  ``put_message_to_remote_broker``: a queue of the topic's publish info (the broker's route cache,
  ``rmqlab.broker.topic.topic_route_info_manager``) avoiding the own broker name, sent as
  SEND_MESSAGE_V2 to that group's master (3000 ms) with the message's properties map (so the
  ``DELAY`` level that ``messageTimeUp`` cleared from the map is not sent, and the receiving broker
  does not park it again). SEND_OK is PUT_OK; anything else, no route, no other group, no
  address or a failed request is PUT_TO_REMOTE_BROKER_FAIL;
* else SERVICE_NOT_AVAILABLE (the delay level retries 100 ms later; the timer dequeue three times,
  then drops it).

**Quirk** kept from RocketMQ: ``putMessageToRemoteBroker`` returns a SendResult only for SEND_OK,
so on this synchronous path a message the other master stored with FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is PUT_TO_REMOTE_BROKER_FAIL and the delay level sends it
again (a duplicate). ``transformSendResult2PutResult``'s 1:1 mapping of those three applies on the
asynchronous paths (``async_put_message``, the specific-queue put), which hand the SendResult over
as it is.

``put_message_to_specific_queue`` (POP checkpoints and acks, revived messages): the local store on
the master; on a slave acting as master (with remote escape) the queue
``floorMod(hash(topic + storeHost), queueCount)`` of the topic's publish info, ``hash`` being Java's
``String.hashCode`` and ``storeHost`` Java's ``InetSocketAddress.toString()`` ("/127.0.0.1:10911").
The same slave thus always writes a given revive topic to the same queue of the same master: its
checkpoints and the acks that cancel them meet in one revive queue of one master, whose revive
service matches them (RIP-32: "the same master is required; otherwise, CK/ACK cannot cancel and
the message is duplicated"). That master reads the popped message back from the acting slave
(``get_message_async`` with the checkpoint's broker name) and revives it into its own retry topic.

``get_message_async`` (``getMessageAsync``): the message at an offset of a queue of broker name
``broker_name``: from the local store when this broker is that name (``getMessageStoreByBrokerName``);
else pulled (one message, 10 s) from that group's id-0 member as the route cache knows it
(``findBrokerAddressInSubscribe(name, 0, false)``; unknown: the topic's route is fetched first).
The answer is (message, info, need_retry): a local miss is not retried; an unreachable or refusing
broker is.

Transactions: a half message (the transaction check on a slave acting as master) is converted
back to its real topic before it is escaped
(``TransactionalMessageUtil.buildTransactionalMessageFromHalfMessage``): ``TRAN_MSG=true`` and the
PREPARED sysFlag, so the other group's master stores it as a half message of its own and its own
check asks the producer group (``PGROUP`` travels with it).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING

from rmqlab.broker.broker_util import wait_completable
from rmqlab.client.producer.send_result import SendResult, SendStatus
from rmqlab.client.consumer.pull_result import PullStatus
from rmqlab.common.java_compat import java_string_hash_code
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.config.broker import MASTER_ID
from rmqlab.remoting.exceptions import RemotingError
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")

SEND_TIMEOUT_MS = 3_000
DEFAULT_PULL_TIMEOUT_MILLIS = 10_000

_PUT_STATUS_BY_SEND_STATUS = {  # transformSendResult2PutResult
    SendStatus.SEND_OK: PutMessageStatus.PUT_OK,
    SendStatus.SLAVE_NOT_AVAILABLE: PutMessageStatus.SLAVE_NOT_AVAILABLE,
    SendStatus.FLUSH_DISK_TIMEOUT: PutMessageStatus.FLUSH_DISK_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
}


def java_socket_address_string(host: tuple[str, int] | None) -> str:
    """``InetSocketAddress.toString()`` of a resolved IP-literal address (what ``getStoreHost``
    builds from ``brokerIP1``): "/127.0.0.1:10911"; IPv6 as Java 14+ prints it, "/[0:0:0:0:0:0:0:1]:10911"
    (``Inet6Address.getHostAddress``: eight groups, no leading zeros, no "::"). None is "null", as
    Java's string concatenation writes a null reference."""
    if host is None:
        return "null"
    ip, port = host
    address = ipaddress.ip_address(ip)
    if address.version == 6:
        groups = ":".join(f"{int(g, 16):x}" for g in address.exploded.split(":"))
        return f"/[{groups}]:{port}"
    return f"/{address}:{port}"


def specific_queue_index(topic: str, store_host: tuple[str, int] | None, queue_count: int) -> int:
    """``Math.floorMod((topic + storeHost).hashCode(), queueCount)``."""
    return java_string_hash_code(topic + java_socket_address_string(store_host)) % queue_count  # floorMod


def is_put_ok(result: PutMessageResult | None) -> bool:
    """What the pop processors accept as stored: PUT_OK, or a flush/replication wait that failed."""
    return result is not None and result.put_message_status in (
        PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE)


class EscapeBridge:
    """See the module docstring. One per broker (``BrokerController.escape_bridge``)."""

    def __init__(self, broker: BrokerController):
        self.broker = broker
        bc = broker.broker_config
        self.inner_producer_group_name = f"InnerProducerGroup_{bc.brokerName}_{bc.brokerId}"
        self.inner_consumer_group_name = f"InnerConsumerGroup_{bc.brokerName}_{bc.brokerId}"

    def _remote_escape_enabled(self) -> bool:
        bc = self.broker.broker_config
        return bc.enableSlaveActingMaster and bc.enableRemoteEscape

    # -- putMessage ---------------------------------------------------------------------------
    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        """``putMessage`` (module docstring). The local put's result is the store's, unchanged
        (None when the store answered nothing)."""
        master = self.broker.peek_master_broker()
        if master is not None:
            return await wait_completable(master.message_store.async_put_message(msg))
        if self._remote_escape_enabled():
            try:
                # setWaitStoreMsgOK(false): the map only; the remote send serializes the map.
                msg.properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
                return self.transform_send_result2_put_result(await self.put_message_to_remote_broker(msg, None))
            except Exception:  # RocketMQ catches every Exception here
                log.exception("sendMessageInFailover to remote failed")
                return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        return self._service_not_available("Put message failed")

    def _service_not_available(self, what: str) -> PutMessageResult:
        bc = self.broker.broker_config
        log.warning("%s, enableSlaveActingMaster=%s, enableRemoteEscape=%s.", what,
                    bc.enableSlaveActingMaster, bc.enableRemoteEscape)
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)

    async def put_message_to_remote_broker(self, msg: MessageExtBrokerInner,
                                           broker_name_to_send: str | None) -> SendResult | None:
        """``putMessageToRemoteBroker``: the SendResult of a SEND_OK, else None (logged)."""
        broker = self.broker
        own = broker.broker_config.brokerName
        if own == broker_name_to_send:  # not a remote broker
            return None
        if msg.topic == TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC:
            # buildTransactionalMessageFromHalfMessage: sent as a half message of its real topic.
            from rmqlab.broker.transaction.queue.transactional_message_util import (
                build_transactional_message_from_half_message)
            msg = build_transactional_message_from_half_message(msg)
        rim = broker.topic_route_info_manager
        info = await rim.try_to_find_topic_publish_info(msg.topic)
        if info is None or not info.ok():
            log.warning("putMessageToRemoteBroker: no route info of topic %s when escaping message, msgId=%s",
                        msg.topic, msg.msg_id)
            return None
        if not broker_name_to_send:
            # selectOneMessageQueue(lastBrokerName): one turn avoiding the own name, then any queue.
            mq = info.select_one_message_queue(lambda q: q.broker_name != own) or info.select_one_message_queue()
            msg.queue_id = mq.queue_id
            broker_name_to_send = mq.broker_name
            if own == broker_name_to_send:
                log.warning("putMessageToRemoteBroker failed, remote broker not found. Topic: %s, MsgId: %s, "
                            "Broker: %s", msg.topic, msg.msg_id, broker_name_to_send)
                return None
        else:
            mq = MessageQueue(msg.topic, broker_name_to_send, msg.queue_id)
        addr = rim.find_broker_address_in_publish(broker_name_to_send)
        if addr is None:
            log.warning("putMessageToRemoteBroker failed, remote broker address not found. Topic: %s, MsgId: %s, "
                        "Broker: %s", msg.topic, msg.msg_id, broker_name_to_send)
            return None
        begin = broker.node.now_ms()
        try:
            result = await broker.broker_outer_api.send_message_to_specific_broker(
                addr, broker_name_to_send, msg, self.get_producer_group(msg), SEND_TIMEOUT_MS)
            if result is not None and result.send_status is SendStatus.SEND_OK:
                return result
            log.error("Escaping failed! cost %sms, Topic: %s, MsgId: %s, Broker: %s",
                      broker.node.now_ms() - begin, msg.topic, msg.msg_id, broker_name_to_send)
        except (RemotingError, OSError) as e:  # MQBrokerException is a RemotingError
            log.error("putMessageToRemoteBroker exception, MsgId: %s, RT: %sms, Broker: %s: %s",
                      msg.msg_id, broker.node.now_ms() - begin, mq, e)
        return None

    async def async_put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        """``asyncPutMessage``: as ``put_message``, but any queue of the publish info (RocketMQ's
        ``selectOneMessageQueue()`` here does not avoid the own name) and the SendResult mapped as
        it is (module docstring)."""
        master = self.broker.peek_master_broker()
        if master is not None:
            return await wait_completable(master.message_store.async_put_message(msg))
        if not self._remote_escape_enabled():
            return self._service_not_available("Put message failed")
        rim = self.broker.topic_route_info_manager
        msg.properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        info = await rim.try_to_find_topic_publish_info(msg.topic)
        if info is None or not info.ok():  # RocketMQ: a NullPointer/ArithmeticException, caught
            log.error("sendMessageInFailover to remote failed: no route info of topic %s", msg.topic)
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        mq = info.select_one_message_queue()
        msg.queue_id = mq.queue_id
        return await self._send_async(mq.broker_name, msg, swallow_errors=True)

    async def _send_async(self, broker_name: str, msg: MessageExtBrokerInner, swallow_errors: bool
                          ) -> PutMessageResult:
        """``sendMessageToSpecificBrokerAsync`` to that group's master, mapped. A failed send is
        PUT_TO_REMOTE_BROKER_FAIL (``exceptionally(null)``) with ``swallow_errors``, else raised
        (RocketMQ's specific-queue future completes exceptionally)."""
        addr = self.broker.topic_route_info_manager.find_broker_address_in_publish(broker_name)
        if addr is None:
            # RocketMQ would hand a null address to invokeAsync, which then talks to a name
            # server; rmqlab fails the put instead.
            log.warning("remote broker address not found. Topic: %s, Broker: %s", msg.topic, broker_name)
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        try:
            result = await self.broker.broker_outer_api.send_message_to_specific_broker_async(
                addr, broker_name, msg, self.get_producer_group(msg), SEND_TIMEOUT_MS)
        except (RemotingError, OSError):
            if not swallow_errors:
                raise
            result = None
        return self.transform_send_result2_put_result(result)

    def get_producer_group(self, msg: MessageExtBrokerInner | None) -> str:
        """``getProducerGroup``: the message's PGROUP, else ``InnerProducerGroup_<name>_<id>``."""
        group = msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) if msg is not None else None
        return group or self.inner_producer_group_name

    # -- putMessageToSpecificQueue ------------------------------------------------------------
    async def put_message_to_specific_queue(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """``putMessageToSpecificQueue``: the local store on the master (SERVICE_NOT_AVAILABLE when
        it is not running, UNKNOWN_ERROR when it answers nothing); else the remote put of
        ``async_remote_put_message_to_specific_queue``, a failed request being UNKNOWN_ERROR."""
        master = self.broker.peek_master_broker()
        if master is not None:
            store = master.message_store
            if store is None or not store.running:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
            result = await wait_completable(store.async_put_message(msg))
            return result if result is not None else PutMessageResult(PutMessageStatus.UNKNOWN_ERROR)
        try:
            return await self.async_remote_put_message_to_specific_queue(msg)
        except (RemotingError, OSError) as e:
            log.error("Put message to specific queue error: %s", e)
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR)

    async def async_put_message_to_specific_queue(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        """``asyncPutMessageToSpecificQueue``: a failed remote request raises."""
        master = self.broker.peek_master_broker()
        if master is not None:
            return await wait_completable(master.message_store.async_put_message(msg))
        return await self.async_remote_put_message_to_specific_queue(msg)

    async def async_remote_put_message_to_specific_queue(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """``asyncRemotePutMessageToSpecificQueue`` (module docstring): the queue of index
        ``specific_queue_index`` among all the publish info's queues."""
        if not self._remote_escape_enabled():
            return self._service_not_available("Put message to specific queue failed")
        msg.properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        info = await self.broker.topic_route_info_manager.try_to_find_topic_publish_info(msg.topic)
        mqs = info.message_queue_list if info is not None else []
        if not mqs:
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        mq = mqs[specific_queue_index(msg.topic, msg.store_host, len(mqs))]
        msg.queue_id = mq.queue_id
        return await self._send_async(mq.broker_name, msg, swallow_errors=False)

    @staticmethod
    def transform_send_result2_put_result(send_result: SendResult | None) -> PutMessageResult:
        """``transformSendResult2PutResult``."""
        if send_result is None:
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        return PutMessageResult(_PUT_STATUS_BY_SEND_STATUS.get(send_result.send_status,
                                                               PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL))

    # -- getMessage ---------------------------------------------------------------------------
    async def get_message_async(self, topic: str, offset: int, queue_id: int, broker_name: str | None,
                                de_compress_body: bool = False) -> tuple[MessageExt | None, str, bool]:
        """``getMessageAsync`` (module docstring): (message, info, need_retry); check info and
        retry only when the message is None. rmqlab stores bodies uncompressed, so
        ``de_compress_body`` changes nothing."""
        if self._owns(broker_name):
            msg = self._get_local_message(topic, offset, queue_id)
            if msg is None:
                log.warning("Can not get msg , topic %s, offset %s, queueId %s", topic, offset, queue_id)
                return None, "Can not get msg", False
            return msg, "", False
        return await self.get_message_from_remote_async(topic, offset, queue_id, broker_name)

    get_message = get_message_async  # ``getMessage`` is its join(); here both are awaited

    def _owns(self, broker_name: str | None) -> bool:
        """``getMessageStoreByBrokerName(name) != null``: the own broker name (rmqlab has no
        broker container, whose other brokers' stores RocketMQ would also find here)."""
        return self.broker.broker_config.brokerName == broker_name

    def _get_local_message(self, topic: str, offset: int, queue_id: int) -> MessageExt | None:
        """The message at ``offset`` of the local queue, or None when it is not (or no longer)
        there. As RocketMQ since ISSUE #7724, the message returned is the one at exactly that
        offset (a read "from" the offset could return a later message when the queue's head was
        cleaned)."""
        store = self.broker.message_store
        if store is None or not store.running:
            return None
        result = store.get_message("", topic, queue_id, offset, 1, None)
        if result.status is not GetMessageStatus.FOUND or not result.message_buffers:
            return None
        if result.queue_offsets[0] != offset:
            return None
        try:
            msg = decode(result.message_buffers[0], check_crc=False)
        except ValueError:
            return None
        msg.queue_offset = offset
        return msg

    async def get_message_from_remote_async(self, topic: str, offset: int, queue_id: int,
                                            broker_name: str | None) -> tuple[MessageExt | None, str, bool]:
        """``getMessageFromRemoteAsync``: pull one message from the group's id-0 member."""
        rim = self.broker.topic_route_info_manager
        try:
            addr = rim.find_broker_address_in_subscribe(broker_name, MASTER_ID, False)
            if addr is None:
                await rim.update_topic_route_info_from_name_server(topic, True, False)
                addr = rim.find_broker_address_in_subscribe(broker_name, MASTER_ID, False)
                if addr is None:
                    log.warning("can't find broker address for topic %s, %s", topic, broker_name)
                    return None, "brokerAddress not found", True  # maybe offline for a while: retry
            result, info, need_retry = await self.broker.broker_outer_api.pull_message_from_specific_broker_async(
                broker_name, addr, self.inner_consumer_group_name, topic, queue_id, offset, 1,
                DEFAULT_PULL_TIMEOUT_MILLIS)
            if result is not None and result.pull_status is PullStatus.FOUND and result.msg_found_list:
                return result.msg_found_list[0], "", False
            return None, info, need_retry
        except (RemotingError, OSError, ValueError) as e:
            log.error("Get message from remote failed. %s, %s, %s, %s: %s", topic, offset, queue_id, broker_name, e)
        return None, "Get message from remote failed", True
