"""ClientHousekeepingService and Broker2Client: the broker side of its client connections.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/client/ClientHousekeepingService.java``
(a closed channel leaves the producer and consumer tables at once; every 10 s channels silent for
two minutes are dropped), ``DefaultConsumerIdsChangeListener.java`` and ``net/Broker2Client.java``
(NOTIFY_CONSUMER_IDS_CHANGED, oneway, to every member of a group whose membership changed, so the
clients rebalance now).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rmqlab.broker.client.consumer_manager import ConsumerGroupEvent
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingError
from rmqlab.remoting.protocol.header.broker.client import NotifyConsumerIdsChangedRequestHeader
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import clip
from rmqlab.remoting.request_code import RequestCode

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")

SCAN_PERIOD_MS = 10_000


class ClientHousekeepingService:
    """The RemotingServer's ChannelEventListener, plus the periodic scan of silent channels."""

    def __init__(self, broker: BrokerController):
        self.broker = broker

    def start(self) -> None:
        self.broker.schedule_at_fixed_rate("ClientHousekeepingService", SCAN_PERIOD_MS, SCAN_PERIOD_MS,
                                           self.scan_exception_channel)

    def scan_exception_channel(self) -> None:
        self.broker.producer_manager.scan_not_active_channel()
        self.broker.consumer_manager.scan_not_active_channel()

    def on_channel_connect(self, remote_addr: str, channel: Any) -> None:
        pass

    def on_channel_close(self, remote_addr: str, channel: Any) -> None:
        self.broker.producer_manager.do_channel_close_event(remote_addr, channel)
        self.broker.consumer_manager.do_channel_close_event(remote_addr, channel)


class Broker2Client:
    """Requests the broker sends to its clients over their own connections."""

    def __init__(self, broker: BrokerController):
        self.broker = broker

    def notify_consumer_ids_changed(self, channel: Any, consumer_group: str) -> None:
        """Oneway NOTIFY_CONSUMER_IDS_CHANGED; a closed channel is one WARN line, as in Java."""
        if consumer_group is None:
            log.error("notifyConsumerIdsChanged consumerGroup is null")
            return
        if self.broker.is_shutdown():
            return  # a crashed or stopping broker's closing channels notify nobody
        header = NotifyConsumerIdsChangedRequestHeader(consumer_group)
        request = RemotingCommand.create_request_command(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header.to_ext_fields())
        request.version = self.broker.remoting_version

        async def send() -> None:
            try:
                await channel.invoke_oneway(request)
            except (RemotingConnectError, ConnectionError) as e:
                # Java's invokeOneway to a closed channel does not throw: writeAndFlush fails later and
                # NettyRemotingAbstract.invokeOnewayImpl logs one WARN line ("send a request command to
                # channel <addr> failed."). A client that disconnects is expected, not an ERROR.
                log.warning("send a request command to channel <%s> failed. (%s)", clip(getattr(channel, 'remote_addr', channel)), e)
            except (RemotingError, OSError) as e:
                log.error("notifyConsumerIdsChanged exception. group=%s, error=%s", clip(consumer_group), e)

        self.broker.node.spawn(send(), name=f"notify-consumer-ids-changed {consumer_group}")

    def check_producer_transaction_state(self, group: str, channel: Any, header: Any, msg_ext: Any) -> None:
        """``checkProducerTransactionState``: oneway CHECK_TRANSACTION_STATE, body = the half
        message encoded (``MessageDecoder.encode``) with its real topic and queue (the caller
        restored them). A failed write is logged, as in Java; the next check tries again."""
        from rmqlab.common.message.message import MessageExtBrokerInner
        from rmqlab.store.message_ext_encoder import MessageExtEncoder

        inner = MessageExtBrokerInner(topic=msg_ext.topic, body=msg_ext.body, flag=msg_ext.flag)
        for name in ("queue_id", "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
                     "reconsume_times", "prepared_transaction_offset"):
            setattr(inner, name, getattr(msg_ext, name))
        inner.properties = dict(msg_ext.properties)
        body = MessageExtEncoder(self.broker.message_store_config.maxMessageSize).encode(
            inner, queue_offset=msg_ext.queue_offset, physical_offset=msg_ext.commit_log_offset)
        request = RemotingCommand.create_request_command(RequestCode.CHECK_TRANSACTION_STATE,
                                                         header.to_ext_fields(), body)
        request.version = self.broker.remoting_version

        async def send() -> None:
            try:
                await channel.invoke_oneway(request)
            except (RemotingError, OSError) as e:
                log.error("Check transaction failed because invoke producer exception. group=%s, msgId=%s, "
                          "error=%s", clip(group), header.msg_id, e)

        self.broker.node.spawn(send(), name=f"check-transaction-state {group}")


class DefaultConsumerIdsChangeListener:
    """Turns a group's CHANGE event into notifications (``realTimeNotifyConsumerChange``, the
    default: at once). The other events drive RocketMQ's SQL92 filter manager, which rmqlab does
    not implement (property filtering is off by default, ``enablePropertyFilter``)."""

    def __init__(self, broker: BrokerController):
        self.broker = broker

    def __call__(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        if event is ConsumerGroupEvent.CHANGE:
            if not args:
                return
            channels = args[0]
            if channels is not None and self.broker.broker_config.notifyConsumerIdsChangedEnable:
                for channel in channels:
                    self.broker.broker2client.notify_consumer_ids_changed(channel, group)
