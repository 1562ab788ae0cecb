"""TransactionService (proxy/service/transaction/: TransactionDataManager, AbstractTransactionService,
ClusterTransactionService, LocalTransactionService) and the check relay
(proxy/service/relay/AbstractProxyRelayService.processCheckTransactionState,
proxy/grpc/v2/channel/GrpcClientChannel.processCheckTransaction).

* TransactionDataManager: what an END_TRANSACTION needs and a 5.x client does not have (the broker,
  the half message's queue offset and commit-log offset), kept per (producer group, transaction id)
  for transactionDataExpireMillis (30 s), at most transactionDataMaxNum (15) per key; an end takes
  the newest unexpired entry. Filled by a transactional send and by each check the Proxy relays
  (the check names a copy of the half message, so the answer ends that copy). Expired entries
  are also swept at each heartbeat round (RocketMQ: a cleaner every 10 s); an end never takes one.
* Producer channels (the Proxy's ProducerManager of GrpcClientChannels): group -> client id ->
  the client's Telemetry stream. A producer's group is its topic ("here use topicName as
  producerGroup for transactional checker", SendMessageActivity).
* Heartbeats: the Proxy heartbeats each transactional group (ProducerData) to the master of every
  broker of the group's topic with client id "rmq-proxy-producer-client", every
  transactionHeartbeatPeriodSecond (20 s), so the broker's check service sends
  CHECK_TRANSACTION_STATE over the Proxy's own connection; the Proxy relays it to one producer of
  the group as a RecoverOrphanedTransactionCommand on its Telemetry stream, and the client answers
  with EndTransaction (source SERVER_CHECK).

Deviations: RocketMQ subscribes a group for heartbeats on every producer's settings
(addTransactionSubscription) and heartbeats the whole cluster; rmqlab subscribes a topic's group
at its first transactional send and heartbeats the brokers the topic is written to, so a Proxy
whose clients send no transactional message sends nothing more than before. Local mode: RocketMQ's
LocalTransactionService registers the gRPC channel in its broker's ProducerManager inside the JVM;
rmqlab's Local-mode Proxy reaches its broker over remoting (see MessagingProcessor), so it
heartbeats its broker like a Cluster-mode Proxy does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException
from rmqlab.remoting.protocol.header.broker.heartbeat import HeartbeatData, ProducerData
from rmqlab.remoting.protocol.header.end_transaction_request_header import EndTransactionRequestHeader

log = logging.getLogger("rmqlab.proxy")

MC = MessageConst
TRANS_HEARTBEAT_CLIENT_ID = "rmq-proxy-producer-client"  # ClusterTransactionService
# ProxyConfig defaults (proxy/config/ProxyConfig.java).
TRANSACTION_DATA_EXPIRE_MILLIS = 30_000
TRANSACTION_DATA_MAX_NUM = 15
TRANSACTION_HEARTBEAT_PERIOD_SECOND = 20
MAX_TRANSACTION_RECOVERY_SECOND = 3600
HEARTBEAT_TIMEOUT_MS = 3000


def proxy_config_value(config: Any, name: str, default: int) -> int:
    """A transaction key of ProxyConfig, RocketMQ's default when rmqlab's ProxyConfig has no such key."""
    value = getattr(config, name, None)
    return default if value is None else value


@dataclass(frozen=True, order=True)
class TransactionData:
    """TransactionData, ordered as RocketMQ's compareTo: expire time first."""

    expire_time: int
    broker_name: str
    commit_log_offset: int
    tran_state_table_offset: int
    transaction_id: str
    topic: str = field(compare=False)


class TransactionDataManager:
    def __init__(self, now_ms: Callable[[], int], expire_ms: int = TRANSACTION_DATA_EXPIRE_MILLIS,
                 max_num: int = TRANSACTION_DATA_MAX_NUM):
        self.now_ms = now_ms
        self.expire_ms = expire_ms
        self.max_num = max_num
        self.data: dict[str, list[TransactionData]] = {}  # "group@transactionId" -> sorted entries

    @staticmethod
    def build_key(producer_group: str, transaction_id: str) -> str:
        return f"{producer_group}@{transaction_id}"

    def add_transaction_data(self, producer_group: str, broker_name: str, topic: str, tran_state_table_offset: int,
                             commit_log_offset: int, transaction_id: str) -> TransactionData:
        data = TransactionData(self.now_ms() + self.expire_ms, broker_name, commit_log_offset,
                               tran_state_table_offset, transaction_id, topic)
        entries = self.data.setdefault(self.build_key(producer_group, transaction_id), [])
        if data not in entries:
            entries.append(data)
            entries.sort()
        if len(entries) > self.max_num:
            entries.pop(0)  # pollFirst: the one that expires first
        return data

    def poll_no_expire_transaction_data(self, producer_group: str, transaction_id: str) -> TransactionData | None:
        """pollNoExpireTransactionData: the newest entry, dropping expired ones on the way."""
        key = self.build_key(producer_group, transaction_id)
        entries = self.data.get(key)
        if entries is None:
            return None
        now = self.now_ms()
        found = None
        while entries:
            data = entries.pop()
            if data.expire_time >= now:
                found = data
                break
        if not entries:
            del self.data[key]
        return found

    def remove_transaction_data(self, producer_group: str, data: TransactionData) -> None:
        key = self.build_key(producer_group, data.transaction_id)
        entries = self.data.get(key)
        if entries is not None and data in entries:
            entries.remove(data)
            if not entries:
                del self.data[key]

    def clean_expire_transaction_data(self) -> None:
        now = self.now_ms()
        for key in list(self.data):
            kept = [d for d in self.data[key] if d.expire_time >= now]
            if kept:
                self.data[key] = kept
            else:
                del self.data[key]


Push = Callable[[Any], Awaitable[None]]


class TransactionService:
    def __init__(self, node, api, routes, config):
        self.node = node
        self.api = api
        self.routes = routes
        self.config = config
        self.manager = TransactionDataManager(
            node.now_ms, proxy_config_value(config, "transactionDataExpireMillis", TRANSACTION_DATA_EXPIRE_MILLIS),
            proxy_config_value(config, "transactionDataMaxNum", TRANSACTION_DATA_MAX_NUM))
        self.producer_channels: dict[str, dict[str, Push]] = {}  # group -> client id -> Telemetry writer
        self.group_topics: dict[str, set[str]] = {}  # transactional groups heartbeated, with their topics
        self.broker_addr_name: dict[str, str] = {}  # broker address -> name, from the last heartbeat
        self._heartbeat_task = None
        self._running = True

    # -- producer channels (ProducerManager of the Proxy) -----------------------------------------------
    def register_producer(self, group: str, client_id: str, push: Push) -> None:
        self.producer_channels.setdefault(group, {})[client_id] = push

    def unregister_client(self, client_id: str) -> None:
        for group in list(self.producer_channels):
            channels = self.producer_channels[group]
            channels.pop(client_id, None)
            if not channels:
                del self.producer_channels[group]

    def group_online(self, group: str) -> bool:
        return bool(self.producer_channels.get(group))

    # -- heartbeats (ClusterTransactionService.addTransactionSubscription, scanProducerHeartBeat) -------
    def add_transaction_subscription(self, group: str, topic: str) -> None:
        topics = self.group_topics.setdefault(group, set())
        if topic in topics:
            return
        topics.add(topic)
        # At once (a check may come before the next period), without holding up the caller.
        self.node.spawn(self.scan_producer_heartbeat(), name="proxy tx heartbeat")
        if self._heartbeat_task is None:
            period_ms = proxy_config_value(self.config, "transactionHeartbeatPeriodSecond",
                                           TRANSACTION_HEARTBEAT_PERIOD_SECOND) * 1000
            self._heartbeat_task = self.node.spawn(self._heartbeat_loop(period_ms), name="proxy tx heartbeat")

    async def _heartbeat_loop(self, period_ms: int) -> None:
        while self._running:
            await self.node.sleep(period_ms)
            if self._running:
                self.manager.clean_expire_transaction_data()
                await self.scan_producer_heartbeat()

    async def scan_producer_heartbeat(self) -> None:
        by_broker: dict[str, tuple[str, list[ProducerData]]] = {}
        for group in sorted(self.group_topics):
            if not self.group_online(group):
                continue  # groupOnline: no producer left, nothing to check through this Proxy
            for topic in sorted(self.group_topics[group]):
                try:
                    # The brokers the Proxy writes the topic to: all of the route's masters in
                    # Cluster mode, its own broker in Local mode (LocalTransactionService).
                    view = await self.routes.get_current_message_queue_view(topic)
                except Exception as e:
                    log.error("get cluster data failed in txHeartBeat. topic: %s, err: %s", topic, e)
                    continue
                for q in view.write_selector.broker_acting_queues:
                    _, groups = by_broker.setdefault(q.broker_addr, (q.broker_name, []))
                    if all(p.group_name != group for p in groups):
                        groups.append(ProducerData(group))
        for addr, (name, groups) in sorted(by_broker.items()):
            self.broker_addr_name[addr] = name
            heartbeat = HeartbeatData(client_id=TRANS_HEARTBEAT_CLIENT_ID, producer_data_set=groups)
            try:
                await self.api.send_heartbeat(addr, heartbeat, HEARTBEAT_TIMEOUT_MS)
            except Exception as e:
                log.error("Send transactionHeartbeat to broker err. brokerAddr: %s, %s", addr, e)

    # -- transaction data ---------------------------------------------------------------------------
    def add_transaction_data(self, producer_group: str, broker_name: str, topic: str, tran_state_table_offset: int,
                             commit_log_offset: int, transaction_id: str) -> TransactionData | None:
        if not broker_name:
            return None
        return self.manager.add_transaction_data(producer_group, broker_name, topic, tran_state_table_offset,
                                                 commit_log_offset, transaction_id)

    def gen_end_transaction_request_header(self, topic: str, producer_group: str, commit_or_rollback: int,
                                           from_transaction_check: bool, msg_id: str, transaction_id: str
                                           ) -> tuple[str, EndTransactionRequestHeader] | None:
        data = self.manager.poll_no_expire_transaction_data(producer_group, transaction_id)
        if data is None:
            return None
        header = EndTransactionRequestHeader(
            topic=topic, producer_group=producer_group, tran_state_table_offset=data.tran_state_table_offset,
            commit_log_offset=data.commit_log_offset, commit_or_rollback=commit_or_rollback,
            from_transaction_check=from_transaction_check, msg_id=msg_id, transaction_id=transaction_id)
        return data.broker_name, header

    async def end_transaction(self, topic: str, transaction_id: str, message_id: str, producer_group: str,
                              commit_or_rollback: int, from_transaction_check: bool) -> None:
        """TransactionProcessor.endTransaction: END_TRANSACTION oneway to the master of the broker
        that holds the half message; TRANSACTION_DATA_NOT_FOUND (INTERNAL_SERVER_ERROR) without data."""
        found = self.gen_end_transaction_request_header(topic, producer_group, commit_or_rollback,
                                                        from_transaction_check, message_id, transaction_id)
        if found is None:
            raise GrpcProxyException(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        broker_name, header = found
        header.broker_name = broker_name
        addr = await self.routes.get_broker_addr(broker_name, topic)
        if addr is None:
            raise GrpcProxyException(Code.INTERNAL_SERVER_ERROR, f"cannot find master of broker {broker_name}")
        await self.api.end_transaction_oneway(addr, header, None)

    # -- the check relay ----------------------------------------------------------------------------
    async def process_check_transaction_state(self, channel: Any, request: Any) -> None:
        """CHECK_TRANSACTION_STATE from a broker (oneway): remember where the half message is, then
        ask one producer of its group through its Telemetry stream."""
        from rmqlab.proto.v2 import service_pb2 as spb
        from rmqlab.proxy.grpc.v2.grpc_converter import build_message
        from rmqlab.remoting.protocol.header.check_transaction_state_request_header import decode_check_request

        header, msg_ext = decode_check_request(request)
        if msg_ext is None:
            log.warning("checkTransactionState, decode message failed")
            return None
        group = msg_ext.properties.get(MC.PROPERTY_PRODUCER_GROUP)
        broker_addr = getattr(channel, "remote_addr", None)
        broker_name = self.broker_addr_name.get(broker_addr) or header.broker_name
        transaction_id = header.transaction_id or msg_ext.properties.get(MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not group or not transaction_id:
            log.warning("checkTransactionState, no producer group or transaction id: %s", header)
            return None
        data = self.add_transaction_data(group, broker_name or "", msg_ext.topic, header.tran_state_table_offset,
                                         header.commit_log_offset, transaction_id)
        if data is None:
            log.error("add transaction data failed. broker address %s", broker_addr)
            return None
        channels = self.producer_channels.get(group)
        if not channels:
            log.warning("check transaction failed, channel is empty. groupId=%s", group)
            self.manager.remove_transaction_data(group, data)
            return None
        # ProducerManager.getAvailableChannel picks among the group's channels; the first by client id here.
        client_id = min(channels)
        command = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=build_message(msg_ext, self.node.now_ms()), transaction_id=transaction_id))
        try:
            await channels[client_id](command)
        except Exception as e:
            log.warning("relay check transaction to client %s failed: %s", client_id, e)
            self.manager.remove_transaction_data(group, data)
        return None

    def shutdown(self) -> None:
        self._running = False
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()


def commit_or_rollback_of(resolution: int) -> int:
    """TransactionProcessor.buildCommitOrRollback of the gRPC resolution."""
    from rmqlab.proto.v2 import definition_pb2 as pb

    if resolution == pb.COMMIT:
        return MessageSysFlag.TRANSACTION_COMMIT_TYPE
    if resolution == pb.ROLLBACK:
        return MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    return MessageSysFlag.TRANSACTION_NOT_TYPE
