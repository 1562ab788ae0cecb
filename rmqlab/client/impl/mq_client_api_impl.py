"""MQClientAPIImpl: every request a client sends, and how it reads the answer
(``client/impl/MQClientAPIImpl.java``; the codes and fields the C++ client, PyPI ``rocketmq``
0.4.4, uses too).

One RemotingClient carries everything (one connection per address, requests multiplexed on it).
Every request carries the client's MQVersion (``CURRENT_VERSION``, as a Java client does), so the
name server answers routes in standard JSON.

Name servers. ``namesrvAddr`` "a;b" lists several; the client talks to one at a time, chosen at
random at first (``NettyRemotingClient.getAndCreateNameserverChannel``), and keeps it while its
connection lives. A request whose connection cannot be made or is lost moves to the next name
server and is tried there, until each was tried once; a timeout is not retried elsewhere (the
name server may be slow, not gone), but the next request starts from the next one.

Requests to brokers:

    SEND_MESSAGE_V2 (310)            send_message            SendMessageRequestHeaderV2
    PULL_MESSAGE (11)                pull_message            PullMessageRequestHeader
    HEART_BEAT (34)                  send_heartbeat          HeartbeatData body
    UNREGISTER_CLIENT (35)           unregister_client
    GET_CONSUMER_LIST_BY_GROUP (38)  get_consumer_id_list_by_group
    QUERY_CONSUMER_OFFSET (14)       query_consumer_offset
    UPDATE_CONSUMER_OFFSET (15)      update_consumer_offset  oneway or two-way
    CONSUMER_SEND_MSG_BACK (36)      consumer_send_message_back
    POP_MESSAGE (200050)             pop_message             PopMessageRequestHeader -> PopResult
    ACK_MESSAGE (200051)             ack_message             AckMessageRequestHeader -> AckResult
    CHANGE_MESSAGE_INVISIBLETIME (200053)  change_invisible_time  -> AckResult with the new handle
    GET_MAX_OFFSET (30), GET_MIN_OFFSET (31)
    SEARCH_OFFSET_BY_TIMESTAMP (29)  search_offset           SearchOffsetRequestHeader (LOWER/UPPER)
    GET_EARLIEST_MSG_STORETIME (32)  get_earliest_msg_storetime
    GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25)  get_broker_config / update_broker_config (admin)
    LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42)  lock_batch_mq, unlock_batch_mq  (orderly consumption)
    UPDATE_AND_CREATE_TOPIC (17), GET_BROKER_RUNTIME_INFO (28), GET_CONSUME_STATS (208)  (admin)

and to name servers GET_ROUTEINFO_BY_TOPIC (105) and GET_BROKER_CLUSTER_INFO (106). An error code
becomes MQBrokerException (MQClientException for the name server's answers, as in Java).

Controller mode, what ``mqadmin`` sends (``tools/.../command/controller``):

    CONTROLLER_GET_METADATA_INFO (1005)    get_controller_meta_data       any controller answers
    CONTROLLER_GET_SYNC_STATE_DATA (1006)  get_in_sync_state_data         to the leader
    CONTROLLER_ELECT_MASTER (1002)         elect_master                   to the leader (admin trigger)
    CLEAN_BROKER_DATA (1011)               clean_controller_broker_data   to the leader
    GET_BROKER_EPOCH_CACHE (1007)          get_broker_epoch_cache         to a broker

The requests that only the leader serves first ask a controller for the leader's address (1005),
as RocketMQ's client does. Deviations, both for an operator's tool that must not fail for want
of trying: ``controller_address`` may be a list "a;b;c" (RocketMQ sends to the one address given,
mqadmin getSyncStateSet takes the first of a list); the controllers are asked in order until one
names a leader. And a leader that answers CONTROLLER_NOT_LEADER (leadership moved between the two
requests) naming another leader in its extFields (rmqlab's controller adds them, see
rmqlab.controller.impl.raft_controller) is followed once; nothing was applied by the refusal.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.client.consumer.pull_result import PullResult, PullStatus, client_msg_id
from rmqlab.client.exceptions import ClientErrorCode, MQBrokerException, MQClientException, request_never_sent
from rmqlab.client.producer.send_result import STATUS_BY_CODE, SendResult
from rmqlab.common.boundary_type import BoundaryType
from rmqlab.common.message.message import Message, MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.topic_config import TopicConfig
from rmqlab.config.addresses import parse_addr, split_addr_list
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.broker_replicas_info import BrokerReplicasInfo
from rmqlab.remoting.protocol.body.cluster_info import ClusterInfo
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
from rmqlab.remoting.protocol.body.lock_batch_body import (LockBatchRequestBody, LockBatchResponseBody,
                                                          UnlockBatchRequestBody)
from rmqlab.remoting.protocol.header.broker.admin import (ConsumeStats, CreateTopicRequestHeader,
                                                          GetConsumeStatsRequestHeader, KVTable, MessageQueue)
from rmqlab.remoting.protocol.header.broker.client import (GetConsumerListByGroupRequestHeader,
                                                           GetConsumerListByGroupResponseBody,
                                                           UnregisterClientRequestHeader)
from rmqlab.remoting.protocol.header.broker.consumer_offset import (GetMaxOffsetRequestHeader,
                                                                    GetMaxOffsetResponseHeader,
                                                                    GetMinOffsetRequestHeader,
                                                                    GetMinOffsetResponseHeader,
                                                                    QueryConsumerOffsetRequestHeader,
                                                                    QueryConsumerOffsetResponseHeader,
                                                                    UpdateConsumerOffsetRequestHeader)
from rmqlab.remoting.protocol.header.broker.consumer_send_msg_back import ConsumerSendMsgBackRequestHeader
from rmqlab.remoting.protocol.header.broker.heartbeat import HeartbeatData
from rmqlab.remoting.protocol.header.broker.offset_query import (GetEarliestMsgStoretimeRequestHeader,
                                                                 GetEarliestMsgStoretimeResponseHeader,
                                                                 SearchOffsetRequestHeader, SearchOffsetResponseHeader)
from rmqlab.remoting.protocol.header.broker.pull_message import PullMessageRequestHeader, PullMessageResponseHeader
from rmqlab.remoting.protocol.header.broker.send_message import (SendMessageRequestHeader,
                                                                 SendMessageRequestHeaderV2,
                                                                 SendMessageResponseHeader)
from rmqlab.remoting.protocol.header.command_custom_header import CommandCustomHeader
from rmqlab.remoting.protocol.header.controller import (CleanControllerBrokerDataRequestHeader,
                                                        ElectMasterRequestHeader, ElectMasterResponseHeader,
                                                        GetMetaDataResponseHeader)
from rmqlab.remoting.protocol.header.namesrv.get_route_info_request_header import GetRouteInfoRequestHeader
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.protocol.route.topic_route_data import TopicRouteData
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import ExtValue, RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.client.consumer.ack_result import AckResult
    from rmqlab.client.consumer.pop_result import PopResult
    from rmqlab.remoting.protocol.header.broker.ack_message import AckMessageRequestHeader
    from rmqlab.remoting.protocol.header.broker.change_invisible_time import ChangeInvisibleTimeRequestHeader
    from rmqlab.remoting.protocol.header.broker.pop_message import PopMessageRequestHeader
    from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.client")


def controller_address_list(controller_address: str) -> list[str]:
    """The entries of ``controller_address`` ("a;b;c"); ValueError naming the bad entry."""
    if controller_address is None or not controller_address.strip():
        raise ValueError("no controller address given (expected host:port, or a list \"a;b;c\")")
    addrs = split_addr_list(controller_address)
    for addr in addrs:
        try:
            parse_addr(addr)
        except ValueError as e:
            raise ValueError(f"controller address {controller_address!r}: {e}") from None
    return addrs


def _request(code: int, header: CommandCustomHeader | None = None, body: bytes | None = None) -> RemotingCommand:
    request = RemotingCommand.create_request_command(code, header.to_ext_fields() if header else None, body)
    request.version = MQVersion.CURRENT_VERSION
    return request


class MQClientAPIImpl:
    def __init__(self, node: Node, remoting_client: RemotingClient):
        self.node = node
        self.remoting_client = remoting_client
        self.namesrv_addr_list: list[str] = []
        self._namesrv_index = 0
        self._namesrv_chosen: str | None = None

    # -- name servers ------------------------------------------------------------------------------
    @property
    def namesrv_addr_chosen(self) -> str | None:
        """The name server the last request went to (``getNamesrvAddrChoosed``); None after it failed."""
        return self._namesrv_chosen

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Set the name servers; the first one asked is chosen at random among them."""
        if addrs != self.namesrv_addr_list:
            self.namesrv_addr_list = list(addrs)
            self._namesrv_index = self.node.random.randrange(len(addrs)) if addrs else 0
            self._namesrv_chosen = None

    def _namesrv_order(self) -> list[str]:
        """The chosen name server if its connection is up, then the others in turn."""
        addrs = self.namesrv_addr_list
        if not addrs:
            raise MQClientException(ClientErrorCode.NO_NAME_SERVER_EXCEPTION,
                                    "No name server address, please set it.")
        chosen = self._namesrv_chosen
        if chosen is not None and chosen in addrs and self.remoting_client.channel(chosen) is not None:
            start = addrs.index(chosen)
        else:
            start = self._namesrv_index % len(addrs)
            self._namesrv_index += 1
        return [addrs[(start + i) % len(addrs)] for i in range(len(addrs))]

    async def invoke_namesrv(self, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``request`` to a name server, moving to the next one when the connection fails."""
        last_error: RemotingConnectError | None = None
        for addr in self._namesrv_order():
            self._namesrv_chosen = addr
            try:
                return await self.remoting_client.invoke_sync(addr, request, timeout_ms)
            except RemotingConnectError as e:
                log.warning("name server %s unreachable: %s", addr, e.reason)
                self._namesrv_chosen = None
                last_error = e
        assert last_error is not None
        raise last_error

    async def get_topic_route_info_from_name_server(self, topic: str, timeout_ms: float) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; MQClientException with TOPIC_NOT_EXIST (17) for an unknown topic."""
        response = await self.invoke_namesrv(
            _request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic)), timeout_ms)
        if response.code == ResponseCode.SUCCESS and response.body:
            return TopicRouteData.decode(response.body)
        raise MQClientException(response.code, response.remark or f"no route for topic {topic}")

    async def get_default_topic_route_info_from_name_server(self, timeout_ms: float) -> TopicRouteData:
        """The route of TBW102, the auto-create template topic."""
        return await self.get_topic_route_info_from_name_server(TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC,
                                                                timeout_ms)

    async def get_broker_cluster_info(self, timeout_ms: float) -> ClusterInfo:
        response = await self.invoke_namesrv(_request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return ClusterInfo.decode(response.body)
        raise MQBrokerException(response.code, response.remark)

    # -- broker requests ---------------------------------------------------------------------------
    async def _invoke_broker(self, addr: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        return await self.remoting_client.invoke_sync(addr, request, timeout_ms)

    async def send_message(self, addr: str, broker_name: str, msg: Message, header: SendMessageRequestHeader,
                           timeout_ms: float, oneway: bool = False) -> SendResult | None:
        """SEND_MESSAGE_V2 (sendSmartMsg, the Java default): the V1 header's fields under one-letter
        names. None for a oneway send."""
        request = _request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(header), msg.body)
        if oneway:
            await self.remoting_client.invoke_oneway(addr, request)
            return None
        response = await self._invoke_broker(addr, request, timeout_ms)
        return self.process_send_response(broker_name, msg, response, addr)

    async def end_transaction_oneway(self, addr: str, header, remark: str | None) -> None:
        """``endTransactionOneway``: END_TRANSACTION (37), oneway, to ``addr``."""
        request = RemotingCommand.create_request_command(RequestCode.END_TRANSACTION, header.to_ext_fields())
        request.version = MQVersion.CURRENT_VERSION
        request.remark = remark
        await self.remoting_client.invoke_oneway(addr, request)

    @staticmethod
    def send_message_request(ext_fields: dict[str, ExtValue], body: bytes | None) -> RemotingCommand:
        """The SEND_MESSAGE_V2 request of ``send_message`` from the header's wire fields
        (``SendMessageRequestHeaderV2.ext_fields_of``): the producer's hot path, without the two
        header objects."""
        return RemotingCommand(RequestCode.SEND_MESSAGE_V2, version=MQVersion.CURRENT_VERSION, ext_fields=ext_fields,
                               body=body)

    async def invoke_send_message(self, addr: str, mq: MessageQueue, msg: Message, request: RemotingCommand,
                                  timeout_ms: float, async_send: bool = False) -> SendResult:
        """Send a request of :meth:`send_message_request` and read the answer: ``sendMessageSync``,
        or with `async_send` ``sendMessageAsync``, which like RocketMQ's ``invokeAsync`` arms no
        timer (the response-table scan fails it, up to 2 s after its timeout). On a live
        connection straight to it (one coroutine fewer per message)."""
        channel = self.remoting_client.channel(addr)
        if channel is not None and timeout_ms > 0:
            invoke = channel.invoke_async if async_send else channel.invoke
            response = await invoke(request, timeout_ms)
        elif async_send:
            response = await self.remoting_client.invoke_async(addr, request, timeout_ms)
        else:
            response = await self.remoting_client.invoke_sync(addr, request, timeout_ms)
        return self.process_send_response(mq.broker_name, msg, response, addr, mq)

    @staticmethod
    def process_send_response(broker_name: str, msg: Message, response: RemotingCommand, addr: str,
                              mq: MessageQueue | None = None) -> SendResult:
        """``processSendResponse``. ``mq``: the queue the request went to, reused as the result's
        queue when the broker answers for it (MessageQueue is immutable)."""
        status = STATUS_BY_CODE.get(response.code)  # SendStatus.from_response_code
        if status is None:
            raise MQBrokerException(response.code, response.remark, addr)
        header = SendMessageResponseHeader.decode(response)
        ext = response.ext_fields or {}
        region = ext.get(MessageConst.PROPERTY_MSG_REGION) or "DefaultRegion"
        trace_on = ext.get(MessageConst.PROPERTY_TRACE_SWITCH)
        queue_id = header.queue_id
        if mq is None or mq.queue_id != queue_id or mq.topic != msg.topic or mq.broker_name != broker_name:
            mq = MessageQueue(msg.topic, broker_name, queue_id)
        return SendResult(
            send_status=status,
            msg_id=msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            message_queue=mq,
            queue_offset=header.queue_offset,
            offset_msg_id=header.msg_id,
            transaction_id=header.transaction_id,
            region_id=region if type(region) is str else str(region),
            trace_on=trace_on == "true" or str(trace_on).lower() != "false")

    async def pull_message(self, addr: str, header: PullMessageRequestHeader, timeout_ms: float) -> PullResult:
        """PULL_MESSAGE; the result still holds the raw body (PullAPIWrapper decodes it)."""
        response = await self._invoke_broker(addr, _request(RequestCode.PULL_MESSAGE, header), timeout_ms)
        return self.process_pull_response(response, addr)

    @staticmethod
    def process_pull_response(response: RemotingCommand, addr: str) -> PullResult:
        status = PullStatus.from_response_code(response.code)
        if status is None:
            raise MQBrokerException(response.code, response.remark, addr)
        header = PullMessageResponseHeader.decode(response)
        return PullResult(status, header.next_begin_offset, header.min_offset, header.max_offset,
                          suggest_which_broker_id=header.suggest_which_broker_id, message_binary=response.body,
                          broker_addr=addr)

    async def send_heartbeat(self, addr: str, heartbeat: HeartbeatData, timeout_ms: float) -> int:
        """HEART_BEAT; returns the broker's version."""
        response = await self._invoke_broker(addr, _request(RequestCode.HEART_BEAT, body=heartbeat.encode()),
                                             timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)
        return response.version

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None, timeout_ms: float) -> None:
        header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        response = await self._invoke_broker(addr, _request(RequestCode.UNREGISTER_CLIENT, header), timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def get_consumer_id_list_by_group(self, addr: str, consumer_group: str, timeout_ms: float) -> list[str]:
        response = await self._invoke_broker(
            addr, _request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(consumer_group)),
            timeout_ms)
        if response.code == ResponseCode.SUCCESS and response.body:
            return GetConsumerListByGroupResponseBody.decode(response.body).consumer_id_list
        raise MQBrokerException(response.code, response.remark, addr)

    async def query_consumer_offset(self, addr: str, consumer_group: str, mq: MessageQueue, timeout_ms: float) -> int:
        """QUERY_CONSUMER_OFFSET; MQBrokerException QUERY_NOT_FOUND (22) when the group has none."""
        header = QueryConsumerOffsetRequestHeader(consumer_group, mq.topic, mq.queue_id)
        response = await self._invoke_broker(addr, _request(RequestCode.QUERY_CONSUMER_OFFSET, header), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return QueryConsumerOffsetResponseHeader.decode(response).offset
        raise MQBrokerException(response.code, response.remark, addr)

    async def update_consumer_offset(self, addr: str, consumer_group: str, mq: MessageQueue, offset: int,
                                     timeout_ms: float, oneway: bool = True) -> None:
        header = UpdateConsumerOffsetRequestHeader(consumer_group, mq.topic, mq.queue_id, offset)
        request = _request(RequestCode.UPDATE_CONSUMER_OFFSET, header)
        if oneway:
            await self.remoting_client.invoke_oneway(addr, request)
            return
        response = await self._invoke_broker(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def consumer_send_message_back(self, addr: str, broker_name: str | None, msg: MessageExt,
                                         consumer_group: str, delay_level: int, timeout_ms: float,
                                         max_consume_retry_times: int) -> None:
        """CONSUMER_SEND_MSG_BACK: hand ``msg`` (a message this group failed to consume) back to the
        broker that stores it, by its commit-log offset; MQBrokerException unless SUCCESS."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=consumer_group, delay_level=delay_level,
            origin_msg_id=client_msg_id(msg), origin_topic=msg.topic, unit_mode=False,
            max_reconsume_times=max_consume_retry_times, broker_name=broker_name)
        response = await self._invoke_broker(addr, _request(RequestCode.CONSUMER_SEND_MSG_BACK, header), timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout_ms: float) -> int:
        response = await self._invoke_broker(
            addr, _request(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(mq.topic, mq.queue_id)), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return GetMaxOffsetResponseHeader.decode(response).offset
        raise MQBrokerException(response.code, response.remark, addr)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout_ms: float) -> int:
        response = await self._invoke_broker(
            addr, _request(RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(mq.topic, mq.queue_id)), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return GetMinOffsetResponseHeader.decode(response).offset
        raise MQBrokerException(response.code, response.remark, addr)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp: int, boundary_type: BoundaryType,
                            timeout_ms: float) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the queue offset of the message stored at ``timestamp`` (ms),
        the first (LOWER) or last (UPPER) of those stored then; see the broker's
        ``get_offset_in_queue_by_time`` for the edges."""
        header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp, boundary_type.name)
        response = await self._invoke_broker(addr, _request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header),
                                             timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return SearchOffsetResponseHeader.decode(response).offset
        raise MQBrokerException(response.code, response.remark, addr)

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue, timeout_ms: float) -> int:
        """GET_EARLIEST_MSG_STORETIME: the store time of the queue's first message, -1 if none."""
        header = GetEarliestMsgStoretimeRequestHeader(mq.topic, mq.queue_id)
        response = await self._invoke_broker(addr, _request(RequestCode.GET_EARLIEST_MSG_STORETIME, header),
                                             timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return GetEarliestMsgStoretimeResponseHeader.decode(response).timestamp
        raise MQBrokerException(response.code, response.remark, addr)

    async def get_broker_config(self, addr: str, timeout_ms: float) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's settings (``MixAll.string2Properties`` of the body)."""
        from rmqlab.config.properties import parse_properties

        response = await self._invoke_broker(addr, _request(RequestCode.GET_BROKER_CONFIG), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return {e.key: e.value for e in parse_properties((response.body or b"").decode("utf-8"), addr)}
        raise MQBrokerException(response.code, response.remark, addr)

    async def update_broker_config(self, addr: str, properties: dict[str, str], timeout_ms: float) -> None:
        """UPDATE_BROKER_CONFIG: ``key=value`` lines (``MixAll.properties2String``); nothing is sent
        for no properties, as in Java. MQBrokerException with the broker's reason unless SUCCESS."""
        text = "".join(f"{k}={v}\n" for k, v in properties.items())
        if not text:
            return
        response = await self._invoke_broker(addr, _request(RequestCode.UPDATE_BROKER_CONFIG, body=text.encode("utf-8")),
                                             timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def delete_expired_commit_log(self, addr: str, timeout_ms: float) -> bool:
        """DELETE_EXPIRED_COMMITLOG (no header, no body): True on SUCCESS, else MQClientException
        with the broker's answer, as MQClientAPIImpl.deleteExpiredCommitLog."""
        response = await self._invoke_broker(addr, _request(RequestCode.DELETE_EXPIRED_COMMITLOG), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return True
        raise MQClientException(response.code, response.remark)

    # -- POP (RocketMQ 5) ----------------------------------------------------------------------------
    # PullAPIWrapper.popAsync: a long-polling pop waits pollTime on the broker; the client gives the
    # request 10 s more than that ("fix the too earlier timeout of client when long polling").
    POP_POLL_TIMEOUT_RESERVE_MS = 10_000

    async def pop_message(self, addr: str, broker_name: str, header: PopMessageRequestHeader,
                          timeout_ms: float) -> PopResult:
        """POP_MESSAGE (``popMessageAsync`` + ``processPopResponse``): a PopResult whose messages
        carry their ``POP_CK`` handle, ``1ST_POP_TIME`` and the topic asked for. With
        ``header.poll_time`` > 0, a missing ``born_time`` is set to this node's clock and the call
        waits at least poll_time + 10 s. MQBrokerException for any code but SUCCESS, POLLING_FULL,
        POLLING_TIMEOUT and PULL_NOT_FOUND."""
        if header.poll_time and header.poll_time > 0:
            if not header.born_time:
                header.born_time = self.node.now_ms()
            timeout_ms = max(timeout_ms, header.poll_time + self.POP_POLL_TIMEOUT_RESERVE_MS)
        response = await self._invoke_broker(addr, _request(RequestCode.POP_MESSAGE, header), timeout_ms)
        return self.process_pop_response(broker_name, response, header.topic, header, addr)

    @staticmethod
    def process_pop_response(broker_name: str, response: RemotingCommand, topic: str, request_header,
                             addr: str | None = None) -> PopResult:
        """``processPopResponse``: status by code, then each message's POP_CK rebuilt from the
        header's startOffsetInfo / msgOffsetInfo (orderly: reconsumeTimes from orderCountInfo)."""
        from rmqlab.client.consumer.pop_result import PopResult, PopStatus
        from rmqlab.common.message.message_decoder import decodes
        from rmqlab.remoting.protocol.header import extra_info_util as eiu
        from rmqlab.remoting.protocol.header.broker.pop_message import PopMessageResponseHeader

        msgs: list[MessageExt] = []
        code = response.code
        if code == ResponseCode.SUCCESS:
            status = PopStatus.FOUND
            msgs = decodes(response.body or b"", check_crc=False)
        elif code == ResponseCode.POLLING_FULL:
            status = PopStatus.POLLING_FULL
        elif code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            status = PopStatus.POLLING_NOT_FOUND
        else:
            raise MQBrokerException(code, response.remark, addr)
        result = PopResult(status, msgs)
        try:
            rh = PopMessageResponseHeader.decode(response)
        except ValueError:
            if status is PopStatus.FOUND:
                raise
            return result  # e.g. "pop message is timeout too much": no header fields
        result.rest_num = rh.rest_num
        if status is not PopStatus.FOUND:
            return result
        result.invisible_time, result.pop_time = rh.invisible_time, rh.pop_time
        start_offset_info = eiu.parse_start_offset_info(rh.start_offset_info)
        msg_offset_info = eiu.parse_msg_offset_info(rh.msg_offset_info)
        order_count_info = eiu.parse_order_count_info(rh.order_count_info)
        sort_map: dict[str, list[int]] = {}  # buildQueueOffsetSortedMap
        for m in msgs:
            key = eiu.get_start_offset_info_map_key(m.topic, m.queue_id, m.properties.get(MessageConst.PROPERTY_POP_CK))
            sort_map.setdefault(key, []).append(m.queue_offset)
        first_of_queue: dict[str, str] = {}
        is_order = bool(getattr(request_header, "order", False))
        for m in msgs:
            props = m.properties
            if start_offset_info is None:
                key = f"{m.topic}{m.queue_id}"
                if key not in first_of_queue:
                    first_of_queue[key] = eiu.build_extra_info(m.queue_offset, rh.pop_time, rh.invisible_time,
                                                               rh.revive_qid, m.topic, broker_name, m.queue_id)
                props[MessageConst.PROPERTY_POP_CK] = f"{first_of_queue[key]} {m.queue_offset}"
            elif props.get(MessageConst.PROPERTY_POP_CK) is None:
                queue_id_key = eiu.get_start_offset_info_map_key(m.topic, m.queue_id)
                queue_offset_key = eiu.get_queue_offset_map_key(m.topic, m.queue_id, m.queue_offset)
                index = sort_map[queue_id_key].index(m.queue_offset)
                msg_queue_offset = msg_offset_info[queue_id_key][index]
                if msg_queue_offset != m.queue_offset:
                    log.warning("Queue offset[%s] of msg is strange, not equal to the stored in msg, %s",
                                msg_queue_offset, m)
                props[MessageConst.PROPERTY_POP_CK] = eiu.build_extra_info(
                    start_offset_info[queue_id_key], rh.pop_time, rh.invisible_time, rh.revive_qid, m.topic,
                    broker_name, m.queue_id, msg_queue_offset)
                if is_order and order_count_info is not None:
                    count = order_count_info.get(queue_offset_key)
                    if count is None:
                        count = order_count_info.get(queue_id_key)
                    if count is not None and count > 0:
                        m.reconsume_times = count
            props.setdefault(MessageConst.PROPERTY_FIRST_POP_TIME, str(rh.pop_time))
            m.topic = topic
        return result

    async def ack_message(self, addr: str, header: AckMessageRequestHeader, timeout_ms: float) -> AckResult:
        """ACK_MESSAGE (``ackMessageAsync``): AckResult OK on SUCCESS, else NO_EXIST (the broker's
        code and remark kept in the result)."""
        from rmqlab.client.consumer.ack_result import AckResult, AckStatus
        response = await self._invoke_broker(addr, _request(RequestCode.ACK_MESSAGE, header), timeout_ms)
        ok = response.code == ResponseCode.SUCCESS
        return AckResult(AckStatus.OK if ok else AckStatus.NO_EXIST, response_code=response.code,
                         remark=response.remark)

    async def change_invisible_time(self, addr: str, broker_name: str, header: ChangeInvisibleTimeRequestHeader,
                                    timeout_ms: float) -> AckResult:
        """CHANGE_MESSAGE_INVISIBLETIME (``changeInvisibleTimeAsync``): on SUCCESS an AckResult OK
        with ``pop_time`` and the message's new handle ``extra_info`` (built from the broker's
        popTime, invisibleTime and reviveQid, the header's offset, topic and queue)."""
        from rmqlab.client.consumer.ack_result import AckResult, AckStatus
        from rmqlab.remoting.protocol.header import extra_info_util as eiu
        from rmqlab.remoting.protocol.header.broker.change_invisible_time import ChangeInvisibleTimeResponseHeader
        response = await self._invoke_broker(addr, _request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header),
                                             timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            return AckResult(AckStatus.NO_EXIST, response_code=response.code, remark=response.remark)
        rh = ChangeInvisibleTimeResponseHeader.decode(response)
        extra_info = eiu.build_extra_info(header.offset, rh.pop_time, rh.invisible_time, rh.revive_qid, header.topic,
                                          broker_name, header.queue_id) + f" {header.offset}"
        return AckResult(AckStatus.OK, extra_info=extra_info, pop_time=rh.pop_time, response_code=response.code,
                         remark=response.remark)

    # -- admin -------------------------------------------------------------------------------------
    async def create_topic(self, addr: str, default_topic: str, topic_config: TopicConfig, timeout_ms: float) -> None:
        """UPDATE_AND_CREATE_TOPIC with the config's fields (attributes as "+k=v,..." as mqadmin sends)."""
        attributes = ",".join(f"+{k}={v}" for k, v in sorted(topic_config.attributes.items()))
        header = CreateTopicRequestHeader(
            topic=topic_config.topic_name, default_topic=default_topic, read_queue_nums=topic_config.read_queue_nums,
            write_queue_nums=topic_config.write_queue_nums, perm=topic_config.perm,
            topic_filter_type=topic_config.topic_filter_type.value, topic_sys_flag=topic_config.topic_sys_flag,
            order=topic_config.order, attributes=attributes or None)
        response = await self._invoke_broker(addr, _request(RequestCode.UPDATE_AND_CREATE_TOPIC, header), timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQClientException(response.code, response.remark or "create topic failed")

    async def get_broker_runtime_info(self, addr: str, timeout_ms: float) -> KVTable:
        response = await self._invoke_broker(addr, _request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return KVTable.decode(response.body)
        raise MQBrokerException(response.code, response.remark, addr)

    async def get_consume_stats(self, addr: str, consumer_group: str, topic: str | None,
                                timeout_ms: float) -> ConsumeStats:
        header = GetConsumeStatsRequestHeader(consumer_group, topic)
        response = await self._invoke_broker(addr, _request(RequestCode.GET_CONSUME_STATS, header), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return ConsumeStats.decode(response.body)
        raise MQBrokerException(response.code, response.remark, addr)

    async def get_topic_config(self, addr: str, topic: str, timeout_ms: float) -> TopicConfig:
        """GET_TOPIC_CONFIG (351): one topic's config on one broker (the Proxy's message type)."""
        from rmqlab.remoting.protocol.header.broker.admin import GetTopicConfigRequestHeader

        response = await self._invoke_broker(
            addr, _request(RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(topic)), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return TopicConfig.from_json_dict(remoting_serializable.decode_json(response.body, "TopicConfig"),
                                              "TopicConfig")
        raise MQBrokerException(response.code, response.remark, addr)

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig, timeout_ms: float) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), the group's config as the JSON body."""
        response = await self._invoke_broker(addr, _request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=remoting_serializable.encode(config.to_json_dict())),
            timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def get_subscription_group_config(self, addr: str, group: str, timeout_ms: float) -> SubscriptionGroupConfig:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""
        from rmqlab.remoting.protocol.header.broker.admin import GetSubscriptionGroupConfigRequestHeader
        from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig

        response = await self._invoke_broker(addr, _request(
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, GetSubscriptionGroupConfigRequestHeader(group)), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return SubscriptionGroupConfig.from_json_dict(
                remoting_serializable.decode_json(response.body, "SubscriptionGroupConfig"), "SubscriptionGroupConfig")
        raise MQBrokerException(response.code, response.remark, addr)

    # -- controllers -------------------------------------------------------------------------------
    async def get_controller_meta_data(self, controller_address: str, timeout_ms: float) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO to one controller: its group, the leader it knows of (id and
        address, None while there is none), whether it is the leader, and the peers."""
        parse_addr(controller_address)  # one address here; lists are for the leader's requests
        response = await self.remoting_client.invoke_sync(
            controller_address, _request(RequestCode.CONTROLLER_GET_METADATA_INFO), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return GetMetaDataResponseHeader.decode(response)
        raise MQBrokerException(response.code, response.remark, controller_address)

    async def get_controller_leader_address(self, controller_address: str, timeout_ms: float) -> str:
        """The leader's address, as the first controller of ``controller_address`` ("a;b;c") that
        names one says. MQClientException when no controller answered (code
        CONNECT_BROKER_EXCEPTION) or none knows a leader (code CONTROLLER_NOT_LEADER), naming
        what each said."""
        addrs = controller_address_list(controller_address)
        failures: list[str] = []
        answered = False
        for addr in addrs:
            try:
                meta = await self.get_controller_meta_data(addr, timeout_ms)
            except (RemotingConnectError, RemotingTimeoutError, MQBrokerException) as e:
                failures.append(f"{addr}: {e}" if not isinstance(e, RemotingConnectError) else str(e))
                continue
            answered = True
            if meta.controller_leader_address:
                return meta.controller_leader_address
            failures.append(f"{addr}: knows no leader")
        if not answered:
            raise MQClientException(ClientErrorCode.CONNECT_BROKER_EXCEPTION,
                                    f"no controller reachable ({'; '.join(failures)})")
        raise MQClientException(ResponseCode.CONTROLLER_NOT_LEADER,
                                f"no controller leader known ({'; '.join(failures)})")

    async def _invoke_controller_leader(self, controller_address: str, request: RemotingCommand,
                                        timeout_ms: float) -> tuple[str, RemotingCommand]:
        """Send ``request`` to the leader; the leader's address and its answer."""
        leader = await self.get_controller_leader_address(controller_address, timeout_ms)
        response = await self._invoke_named_leader(leader, request, timeout_ms)
        if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
            named = (response.ext_fields or {}).get("controllerLeaderAddress")
            if isinstance(named, str) and named and named != leader:
                leader = named
                response = await self._invoke_named_leader(leader, request, timeout_ms)
        return leader, response

    async def _invoke_named_leader(self, leader: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        try:
            return await self.remoting_client.invoke_sync(leader, request, timeout_ms)
        except RemotingConnectError as e:
            if not request_never_sent(e):
                raise  # the request may have been applied: the caller must not take it for refused
            # The controllers still name a leader that is gone (until they elect another).
            raise MQClientException(ClientErrorCode.CONNECT_BROKER_EXCEPTION,
                                    f"the controller leader {leader} is unreachable ({e.reason}); the controllers "
                                    f"have not elected another yet, or it is on the wrong side of a partition",
                                    e) from e

    async def get_in_sync_state_data(self, controller_address: str, brokers: list[str],
                                     timeout_ms: float) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA for the broker sets ``brokers`` (body: their names as a
        JSON array): per known set its master, epochs, and replicas in and out of the SyncStateSet
        with their liveness. Sets the controller does not know are left out of the answer."""
        if isinstance(brokers, str) or not brokers or not all(isinstance(b, str) and b for b in brokers):
            raise ValueError(f"brokers: expected a non-empty list of broker names, got {brokers!r}")
        request = _request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=remoting_serializable.encode(list(brokers)))
        leader, response = await self._invoke_controller_leader(controller_address, request, timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return BrokerReplicasInfo.decode(response.body)
        raise MQBrokerException(response.code, response.remark, leader)

    async def get_broker_epoch_cache(self, broker_addr: str, timeout_ms: float) -> EpochEntryCache:
        """GET_BROKER_EPOCH_CACHE to a broker in controller mode: its identity, its epoch entries and
        its commitlog max offset."""
        response = await self._invoke_broker(broker_addr, _request(RequestCode.GET_BROKER_EPOCH_CACHE), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return EpochEntryCache.decode(response.body)
        raise MQBrokerException(response.code, response.remark, broker_addr)

    async def elect_master(self, controller_addr: str, cluster_name: str, broker_name: str, broker_id: int,
                           timeout_ms: float) -> tuple[ElectMasterResponseHeader, BrokerMemberGroup | None]:
        """An admin-triggered CONTROLLER_ELECT_MASTER (designateElect) of ``broker_id`` to the leader:
        the new master (id, address, epochs) and the set's members.

        Deviation: RocketMQ decodes the SUCCESS body as a BrokerMemberGroup although it is an
        ElectMasterResponseBody, so mqadmin never lists the members (``MQClientAPIImpl.electMaster``); here the
        body is read as what it is and its brokerMemberGroup returned."""
        request = _request(RequestCode.CONTROLLER_ELECT_MASTER,
                           ElectMasterRequestHeader.of_admin_trigger(cluster_name, broker_name, broker_id))
        leader, response = await self._invoke_controller_leader(controller_addr, request, timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            body = ElectMasterResponseBody.decode(response.body) if response.body else None
            return ElectMasterResponseHeader.decode(response), body.broker_member_group if body else None
        raise MQBrokerException(response.code, response.remark, leader)

    async def clean_controller_broker_data(self, controller_addr: str, cluster_name: str | None, broker_name: str,
                                           broker_controller_ids_to_clean: str | None, is_clean_living_broker: bool,
                                           timeout_ms: float) -> None:
        """CLEAN_BROKER_DATA to the leader: forget the replicas ``broker_controller_ids_to_clean``
        ("1;2") of ``broker_name``, or the whole set when None."""
        header = CleanControllerBrokerDataRequestHeader(cluster_name, broker_name, broker_controller_ids_to_clean,
                                                        is_clean_living_broker)
        leader, response = await self._invoke_controller_leader(
            controller_addr, _request(RequestCode.CLEAN_BROKER_DATA, header), timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, leader)

    # -- queue locks (orderly consumption) ---------------------------------------------------------
    async def lock_batch_mq(self, addr: str, body: LockBatchRequestBody, timeout_ms: float) -> list[MessageQueue]:
        """LOCK_BATCH_MQ (41, ``lockBatchMQ``) to the master (or the acting master) of a group:
        the queues of ``body`` the broker granted; MQBrokerException unless SUCCESS."""
        request = _request(RequestCode.LOCK_BATCH_MQ, body=body.encode())
        request.ext_fields = {}  # LockBatchMqRequestHeader: no field set, an empty map on the wire
        response = await self._invoke_broker(addr, request, timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return LockBatchResponseBody.decode(response.body).lock_ok_mq_set
        raise MQBrokerException(response.code, response.remark, addr)

    async def unlock_batch_mq(self, addr: str, body: UnlockBatchRequestBody, timeout_ms: float,
                              oneway: bool = False) -> None:
        """UNLOCK_BATCH_MQ (42, ``unlockBatchMQ``): oneway, or waiting for SUCCESS
        (MQBrokerException otherwise)."""
        request = _request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode())
        request.ext_fields = {}  # UnlockBatchMqRequestHeader, as above
        if oneway:
            await self.remoting_client.invoke_oneway(addr, request)
            return
        response = await self._invoke_broker(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)
