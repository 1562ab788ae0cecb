"""BrokerOuterAPI: every request a broker sends to others.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/out/BrokerOuterAPI.java``, over one
RemotingClient:

* to the name servers: REGISTER_BROKER (103) with a RegisterBrokerBody (the topic table and its
  DataVersion) and ``bodyCrc32``, sent to every name server in parallel and bounded by
  ``registerBrokerTimeoutMills``; the results name a slave's master and the master's HA address.
  UNREGISTER_BROKER (104) on a clean shutdown. QUERY_DATA_VERSION (322) when ``forceRegister`` is
  off, to skip a registration whose topic table the name servers already hold;
* slave acting master (RIP-32, ``enableSlaveActingMaster``): the lightweight heartbeat to every name
  server, oneway (``sendHeartbeatViaDataVersion``: QUERY_DATA_VERSION carrying the topic
  DataVersion, for ``compatibleWithOldNameSrv``; ``sendHeartbeat``: BROKER_HEARTBEAT, 904), and the
  member group from one name server (``syncBrokerMemberGroup``: GET_ROUTEINFO_BY_TOPIC on
  ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`` for an old name server, else GET_BROKER_MEMBER_GROUP,
  901); EXCHANGE_BROKER_HA_INFO (906) to a member of the group (``retrieveBrokerHaInfo``,
  ``sendBrokerHaInfo``); LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) to the other members, for the
  strict-mode lock quorum (``lockBatchMQAsync``, ``unlockBatchMQAsync``);
  for the EscapeBridge, a topic's route (GET_ROUTEINFO_BY_TOPIC,
  ``getTopicRouteInfoFromNameServer``), a message sent to another group's master (SEND_MESSAGE_V2,
  ``sendMessageToSpecificBroker``) and one read from it (PULL_MESSAGE,
  ``pullMessageFromSpecificBrokerAsync``);
* to the master (a slave's SlaveSynchronize): GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
  GET_ALL_DELAY_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG; and the other way, from a returning
  master's pre-online (BrokerPreOnlineService) to each member: GET_ALL_DELAY_OFFSET,
  GET_ALL_CONSUMER_OFFSET, GET_TIMER_CHECK_POINT (60, ``getTimerCheckPoint``);
* to the controllers, in controller mode (the ReplicasManager's calls):
  CONTROLLER_GET_METADATA_INFO (1005) to find the leader; CONTROLLER_GET_NEXT_BROKER_ID (1012),
  CONTROLLER_APPLY_BROKER_ID (1013) and CONTROLLER_REGISTER_BROKER (1003) to register;
  CONTROLLER_GET_REPLICA_INFO (1004) to poll the set's master; CONTROLLER_ELECT_MASTER (1002, broker
  trigger) to nominate itself; CONTROLLER_ALTER_SYNC_STATE_SET (1001) as master; and the oneway
  BROKER_HEARTBEAT (904). Each waits 3000 ms; an answer other than the ones RocketMQ
  accepts raises MQBrokerException with the controller's code and remark.

Every request carries ``version`` = MQVersion.CURRENT_VERSION, as a Java broker's do (the name
server reads a registration's body format from it). A failed request raises; the callers log and
carry on (the next period tries again), as RocketMQ's do.

Deviation: a request RocketMQ sends to "a name server" (``invokeSync(null, ...)``: the chosen one,
else the next of the list that connects) goes to the first name server of the list that connects;
the others are tried in order only when that one cannot be reached.

Deviation: RocketMQ sends GET_ALL_TOPIC_CONFIG to the master's "VIP channel" (listenPort - 2, its
fast remoting server); rmqlab's broker has one remoting server, so everything goes to listenPort.
The paging fields of the GET_ALL requests (``enableSplitMetadata``, off by default) are not sent, so
the master answers with everything at once, as RocketMQ's does for an old slave.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.client.consumer.pull_result import PullResult, PullStatus
from rmqlab.client.producer.send_result import STATUS_BY_CODE, SendResult
from rmqlab.common.data_version import DataVersion
from rmqlab.common.java_compat import crc32
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decodes, message_properties_to_string
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingError
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup, GetBrokerMemberGroupResponseBody
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.body.lock_batch_body import (LockBatchRequestBody, LockBatchResponseBody,
                                                          UnlockBatchRequestBody)
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.body.register_broker_body import RegisterBrokerBody, TopicConfigAndMappingSerializeWrapper
from rmqlab.remoting.protocol.header.broker.admin import (ConsumerOffsetSerializeWrapper, KVTable, MessageQueue,
                                                          SubscriptionGroupWrapper)
from rmqlab.remoting.protocol.header.broker.heartbeat import SUB_ALL, ExpressionType
from rmqlab.remoting.protocol.header.broker.pull_message import (PullMessageRequestHeader, PullMessageResponseHeader,
                                                                 PullSysFlag)
from rmqlab.remoting.protocol.header.broker.send_message import (SendMessageRequestHeader, SendMessageRequestHeaderV2,
                                                                 SendMessageResponseHeader)
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                                        ApplyBrokerIdResponseHeader, ElectMasterRequestHeader,
                                                        ElectMasterResponseHeader, GetMetaDataResponseHeader,
                                                        GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
                                                        GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
                                                        RegisterBrokerToControllerRequestHeader,
                                                        RegisterBrokerToControllerResponseHeader)
from rmqlab.remoting.protocol.header.exchange_ha_info_header import (ExchangeHAInfoRequestHeader,
                                                                    ExchangeHAInfoResponseHeader)
from rmqlab.remoting.protocol.header.get_broker_member_group_request_header import GetBrokerMemberGroupRequestHeader
from rmqlab.remoting.protocol.header.namesrv import (BrokerHeartbeatRequestHeader, QueryDataVersionRequestHeader,
                                                    QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
                                                    RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader)
from rmqlab.remoting.protocol.header.namesrv.get_route_info_request_header import GetRouteInfoRequestHeader
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.protocol.namesrv.register_broker_result import RegisterBrokerResult
from rmqlab.remoting.protocol.route import TopicRouteData
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.timer.timer_checkpoint import DecodedTimerCheckpoint

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.broker")

GET_ALL_TIMEOUT_MS = 30_000    # getAllTopicConfig / getAllSubscriptionGroupConfig
GET_OFFSETS_TIMEOUT_MS = 3_000  # getAllConsumerOffset / getAllDelayOffset / getTimerCheckPoint
UNREGISTER_TIMEOUT_MS = 3_000
CONTROLLER_TIMEOUT_MS = 3_000  # every controller request of BrokerOuterAPI
MEMBER_GROUP_TIMEOUT_MS = 3_000  # getBrokerMemberGroup / getBrokerMemberGroupCompatible
HA_INFO_TIMEOUT_MS = 3_000       # retrieveBrokerHaInfo / sendBrokerHaInfo


class MQBrokerException(RemotingError):
    """``MQBrokerException``: the peer answered, but not with SUCCESS."""

    def __init__(self, code: int, remark: str | None, addr: str):
        super().__init__(f"CODE: {code}  DESC: {remark}  BROKER: {addr}")
        self.code, self.remark, self.addr = code, remark, addr


class BrokerOuterAPI:
    def __init__(self, node: Node, connect_timeout_ms: float = 3000):
        self.node = node
        self.remoting_client = RemotingClient(node, connect_timeout_ms)
        self.name_server_address_list: list[str] = []

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        self.name_server_address_list = list(addrs)

    async def shutdown(self) -> None:
        await self.remoting_client.shutdown()

    async def _invoke(self, addr: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        request.version = MQVersion.CURRENT_VERSION
        return await self.remoting_client.invoke_sync(addr, request, timeout_ms)

    # -- name servers --------------------------------------------------------------------------
    async def register_broker_all(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                                  ha_server_addr: str, topic_config_wrapper: TopicConfigAndMappingSerializeWrapper,
                                  filter_server_list: list[str], oneway: bool, timeout_ms: int,
                                  enable_acting_master: bool, heartbeat_timeout_millis: int | None = None,
                                  ) -> list[RegisterBrokerResult]:
        """``registerBrokerAll``: register with every name server at once; the results of those
        that answered within ``timeout_ms`` (failures are logged)."""
        if not self.name_server_address_list:
            return []
        body = RegisterBrokerBody(topic_config_wrapper, list(filter_server_list)).encode(False)
        header = RegisterBrokerRequestHeader(
            broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster_name,
            ha_server_addr=ha_server_addr, broker_id=broker_id, heartbeat_timeout_millis=heartbeat_timeout_millis,
            enable_acting_master=enable_acting_master, compressed=False, body_crc32=crc32(body))
        results: list[RegisterBrokerResult] = []

        async def one(namesrv_addr: str) -> None:
            try:
                result = await self.register_broker(namesrv_addr, oneway, timeout_ms, header, body)
                if result is not None:
                    results.append(result)
                log.info("Registering current broker to name server completed. TargetHost=%s", namesrv_addr)
            except (RemotingError, ValueError, OSError) as e:
                log.error("Failed to register current broker to name server. TargetHost=%s: %s", namesrv_addr, e)

        # Each registration is bounded by timeout_ms (the remoting layer's timer on the node's
        # clock), so waiting for all of them is RocketMQ's countDownLatch.await(timeoutMills).
        tasks = [self.node.spawn(one(addr), name=f"register-broker {addr}") for addr in self.name_server_address_list]
        await asyncio.wait(tasks)
        return results

    async def register_broker(self, namesrv_addr: str, oneway: bool, timeout_ms: int,
                              header: RegisterBrokerRequestHeader, body: bytes) -> RegisterBrokerResult | None:
        request = RemotingCommand.create_request_command(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
        if oneway:
            request.version = MQVersion.CURRENT_VERSION
            await self.remoting_client.invoke_oneway(namesrv_addr, request)
            return None
        response = await self._invoke(namesrv_addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, header.broker_addr)
        response_header = RegisterBrokerResponseHeader.decode(response)
        return RegisterBrokerResult(ha_server_addr=response_header.ha_server_addr,
                                    master_addr=response_header.master_addr,
                                    kv_table=KVTable.decode(response.body).table if response.body else None)

    async def unregister_broker_all(self, cluster_name: str, broker_addr: str, broker_name: str,
                                    broker_id: int) -> None:
        for namesrv_addr in self.name_server_address_list:
            try:
                await self.unregister_broker(namesrv_addr, cluster_name, broker_addr, broker_name, broker_id)
                log.info("unregisterBroker OK, NamesrvAddr: %s", namesrv_addr)
            except (RemotingError, OSError) as e:
                log.warning("unregisterBroker Exception, NamesrvAddr: %s: %s", namesrv_addr, e)

    async def unregister_broker(self, namesrv_addr: str, cluster_name: str, broker_addr: str, broker_name: str,
                                broker_id: int) -> None:
        header = UnRegisterBrokerRequestHeader(broker_name=broker_name, broker_addr=broker_addr,
                                               cluster_name=cluster_name, broker_id=broker_id)
        request = RemotingCommand.create_request_command(RequestCode.UNREGISTER_BROKER, header.to_ext_fields())
        response = await self._invoke(namesrv_addr, request, UNREGISTER_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, broker_addr)

    async def need_register(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                            data_version: DataVersion, timeout_ms: int) -> list[bool]:
        """``needRegister``: one True per name server whose copy of the topic table is stale (or
        that could not be asked)."""
        changed_list: list[bool] = []

        async def one(namesrv_addr: str) -> None:
            header = QueryDataVersionRequestHeader(broker_name=broker_name, broker_addr=broker_addr,
                                                   cluster_name=cluster_name, broker_id=broker_id)
            request = RemotingCommand.create_request_command(RequestCode.QUERY_DATA_VERSION, header.to_ext_fields(),
                                                             data_version.to_json().encode("utf-8"))
            try:
                response = await self._invoke(namesrv_addr, request, timeout_ms)
                if response.code == ResponseCode.SUCCESS:
                    changed = QueryDataVersionResponseHeader.decode(response).changed
                    if response.body is not None:
                        remote = DataVersion.from_json_dict(
                            remoting_serializable.decode_json(response.body, "DataVersion"))
                        if remote != data_version:
                            changed = True
                    if changed is None or changed:
                        changed_list.append(True)
            except (RemotingError, ValueError, OSError) as e:
                changed_list.append(True)
                log.error("Query data version from name server %s exception: %s", namesrv_addr, e)

        tasks = [self.node.spawn(one(addr), name=f"query-data-version {addr}") for addr in self.name_server_address_list]
        if tasks:
            await asyncio.wait(tasks)
        return changed_list

    # -- slave acting master (RIP-32): heartbeats and the member group --------------------------
    def _oneway_to_name_servers(self, what: str, build) -> None:
        """One oneway request to every name server, each from a task of its own (Java: the
        brokerOuterExecutor); a failure is logged."""
        for namesrv_addr in self.name_server_address_list:
            async def send(addr: str = namesrv_addr) -> None:
                request = build()
                request.version = MQVersion.CURRENT_VERSION
                try:
                    await self.remoting_client.invoke_oneway(addr, request)
                except (RemotingError, OSError) as e:
                    log.error("sendHeartbeat Exception %s: %s", addr, e)

            self.node.spawn(send(), name=f"{what} {namesrv_addr}")

    def send_heartbeat_via_data_version(self, cluster_name: str, broker_addr: str, broker_name: str,
                                        broker_id: int, data_version: DataVersion) -> None:
        """``sendHeartbeatViaDataVersion``: the heartbeat an old name server understands
        (QUERY_DATA_VERSION refreshes the broker's live entry), oneway. Its DataVersion is the one
        of the moment the heartbeat is built. (``sendHeartbeatTimeoutMillis`` bounds RocketMQ's
        oneway send; here a oneway send does not wait.)"""
        header = QueryDataVersionRequestHeader(broker_name=broker_name, broker_addr=broker_addr,
                                               cluster_name=cluster_name, broker_id=broker_id)
        body = data_version.to_json().encode("utf-8")
        self._oneway_to_name_servers("heartbeat-via-data-version", lambda: RemotingCommand.create_request_command(
            RequestCode.QUERY_DATA_VERSION, header.to_ext_fields(), body))

    def send_heartbeat(self, cluster_name: str, broker_addr: str, broker_name: str) -> None:
        """``sendHeartbeat``: BROKER_HEARTBEAT (904), oneway; RocketMQ's header carries cluster,
        address and name only (no broker id)."""
        header = BrokerHeartbeatRequestHeader(cluster_name=cluster_name, broker_addr=broker_addr,
                                              broker_name=broker_name)
        self._oneway_to_name_servers("heartbeat", lambda: RemotingCommand.create_request_command(
            RequestCode.BROKER_HEARTBEAT, header.to_ext_fields()))

    async def _invoke_name_server(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """``invokeSync(null, ...)``: to a name server (see the module docstring's deviation)."""
        error: RemotingError | None = None
        for namesrv_addr in self.name_server_address_list:
            try:
                return await self._invoke(namesrv_addr, request, timeout_ms)
            except RemotingConnectError as e:
                error = e
        raise error if error is not None else RemotingConnectError("", "no name server address")

    async def sync_broker_member_group(self, cluster_name: str, broker_name: str,
                                       compatible_with_old_name_srv: bool) -> BrokerMemberGroup:
        """``syncBrokerMemberGroup``: the members of the group the name server holds."""
        if compatible_with_old_name_srv:
            return await self.get_broker_member_group_compatible(cluster_name, broker_name)
        return await self.get_broker_member_group(cluster_name, broker_name)

    async def get_broker_member_group(self, cluster_name: str, broker_name: str) -> BrokerMemberGroup:
        """GET_BROKER_MEMBER_GROUP (901); an answer other than SUCCESS with a body is an empty group."""
        header = GetBrokerMemberGroupRequestHeader(cluster_name=cluster_name, broker_name=broker_name)
        request = RemotingCommand.create_request_command(RequestCode.GET_BROKER_MEMBER_GROUP, header.to_ext_fields())
        response = await self._invoke_name_server(request, MEMBER_GROUP_TIMEOUT_MS)
        if response.code == ResponseCode.SUCCESS and response.body is not None:
            group = GetBrokerMemberGroupResponseBody.decode(response.body).broker_member_group
            if group is not None:
                return group
        return BrokerMemberGroup(cluster_name, broker_name)

    async def get_broker_member_group_compatible(self, cluster_name: str, broker_name: str) -> BrokerMemberGroup:
        """The member group from the route of ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`` (every
        broker creates that topic, so any name server knows its route): the members of the
        route's BrokerData of this name and cluster. No route is an empty group."""
        header = GetRouteInfoRequestHeader(topic=TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX + broker_name)
        request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        response = await self._invoke_name_server(request, MEMBER_GROUP_TIMEOUT_MS)
        group = BrokerMemberGroup(cluster_name, broker_name)
        if response.code == ResponseCode.SUCCESS and response.body is not None:
            for broker_data in TopicRouteData.decode(response.body).broker_datas:
                if broker_data.broker_name == broker_name and broker_data.cluster == cluster_name:
                    group.broker_addrs.update(broker_data.broker_addrs)
                    break
        return group

    async def retrieve_broker_ha_info(self, master_broker_addr: str) -> ExchangeHAInfoResponseHeader:
        """``retrieveBrokerHaInfo``: EXCHANGE_BROKER_HA_INFO without an HA address asks the master
        for its HA address, initial max offset (masterFlushOffset) and address."""
        request = RemotingCommand.create_request_command(RequestCode.EXCHANGE_BROKER_HA_INFO,
                                                         ExchangeHAInfoRequestHeader().to_ext_fields())
        response = await self._invoke(master_broker_addr, request, HA_INFO_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, master_broker_addr)
        return ExchangeHAInfoResponseHeader.decode(response)

    async def send_broker_ha_info(self, broker_addr: str, master_ha_addr: str, broker_init_max_offset: int,
                                  master_addr: str) -> None:
        """``sendBrokerHaInfo``: a master tells a member of its group where to replicate from."""
        header = ExchangeHAInfoRequestHeader(master_ha_address=master_ha_addr,
                                             master_flush_offset=broker_init_max_offset, master_address=master_addr)
        request = RemotingCommand.create_request_command(RequestCode.EXCHANGE_BROKER_HA_INFO, header.to_ext_fields())
        response = await self._invoke(broker_addr, request, HA_INFO_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, broker_addr)

    # -- the master (SlaveSynchronize) ---------------------------------------------------------
    async def _get_all(self, addr: str, code: int, timeout_ms: int) -> RemotingCommand:
        response = await self._invoke(addr, RemotingCommand.create_request_command(code), timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)
        return response

    async def get_all_topic_config(self, addr: str) -> TopicConfigAndMappingSerializeWrapper:
        response = await self._get_all(addr, RequestCode.GET_ALL_TOPIC_CONFIG, GET_ALL_TIMEOUT_MS)
        return TopicConfigAndMappingSerializeWrapper.from_json_dict(
            remoting_serializable.decode_json(response.body, "TopicConfigAndMappingSerializeWrapper"))

    async def get_all_consumer_offset(self, addr: str) -> ConsumerOffsetSerializeWrapper:
        response = await self._get_all(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, GET_OFFSETS_TIMEOUT_MS)
        return ConsumerOffsetSerializeWrapper.decode(response.body)

    async def get_all_delay_offset(self, addr: str) -> str | None:
        response = await self._get_all(addr, RequestCode.GET_ALL_DELAY_OFFSET, GET_OFFSETS_TIMEOUT_MS)
        return response.body.decode("utf-8") if response.body else None

    async def get_timer_check_point(self, addr: str) -> DecodedTimerCheckpoint:
        """``getTimerCheckPoint``: GET_TIMER_CHECK_POINT (60), the member's timer checkpoint."""
        response = await self._get_all(addr, RequestCode.GET_TIMER_CHECK_POINT, GET_OFFSETS_TIMEOUT_MS)
        return DecodedTimerCheckpoint.decode(response.body or b"")

    async def get_all_subscription_group_config(self, addr: str) -> SubscriptionGroupWrapper:
        response = await self._get_all(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_TIMEOUT_MS)
        return SubscriptionGroupWrapper.decode(response.body)

    # -- the controllers (controller mode) -------------------------------------------------------
    async def _controller_request(self, addr: str, code: int, header, body: bytes | None = None,
                                  accepted: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        if not addr:
            # Java would call invokeSync with an empty address and fail to connect.
            raise RemotingError("no controller leader address known")
        ext = header.to_ext_fields() if header is not None else None
        request = RemotingCommand.create_request_command(code, ext, body)
        response = await self._invoke(addr, request, CONTROLLER_TIMEOUT_MS)
        if response.code not in accepted:
            raise MQBrokerException(response.code, response.remark, addr)
        return response

    async def check_address_reachable(self, addr: str) -> bool:
        """``checkAddressReachable`` (NettyRemotingClient.isAddressReachable): a connection to
        ``addr`` exists or can be made now."""
        return await self.remoting_client.is_address_reachable(addr)

    async def get_controller_meta_data(self, controller_addr: str) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO: any controller answers who the leader is."""
        response = await self._controller_request(controller_addr, RequestCode.CONTROLLER_GET_METADATA_INFO, None)
        return GetMetaDataResponseHeader.decode(response)

    async def alter_sync_state_set(self, controller_addr: str, broker_name: str, master_broker_id: int,
                                   master_epoch: int, new_sync_state_set: set[int],
                                   sync_state_set_epoch: int) -> SyncStateSet:
        """CONTROLLER_ALTER_SYNC_STATE_SET: the master proposes a set based on epoch
        ``sync_state_set_epoch``; the answer is the set the controller now holds, with its epoch."""
        header = AlterSyncStateSetRequestHeader(broker_name, master_broker_id, master_epoch,
                                                invoke_time=self.node.now_ms())
        body = SyncStateSet(new_sync_state_set, sync_state_set_epoch).encode()
        response = await self._controller_request(controller_addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                                                  header, body)
        return SyncStateSet.decode(response.body)

    async def broker_elect(self, controller_addr: str, cluster_name: str, broker_name: str,
                           broker_id: int) -> tuple[ElectMasterResponseHeader, frozenset[int]]:
        """CONTROLLER_ELECT_MASTER, broker trigger (the broker nominates itself). SUCCESS and
        CONTROLLER_MASTER_STILL_EXIST both name the master; anything else raises."""
        header = ElectMasterRequestHeader.of_broker_trigger(cluster_name, broker_name, broker_id)
        header.invoke_time = self.node.now_ms()
        response = await self._controller_request(
            controller_addr, RequestCode.CONTROLLER_ELECT_MASTER, header,
            accepted=(ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST))
        return ElectMasterResponseHeader.decode(response), ElectMasterResponseBody.decode(response.body).sync_state_set

    async def get_next_broker_id(self, cluster_name: str, broker_name: str,
                                 controller_addr: str) -> GetNextBrokerIdResponseHeader:
        header = GetNextBrokerIdRequestHeader(cluster_name, broker_name)
        response = await self._controller_request(controller_addr, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, header)
        return GetNextBrokerIdResponseHeader.decode(response)

    async def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, register_check_code: str,
                              controller_addr: str) -> ApplyBrokerIdResponseHeader:
        header = ApplyBrokerIdRequestHeader(cluster_name, broker_name, broker_id, register_check_code)
        response = await self._controller_request(controller_addr, RequestCode.CONTROLLER_APPLY_BROKER_ID, header)
        return ApplyBrokerIdResponseHeader.decode(response)

    async def register_broker_to_controller(self, cluster_name: str, broker_name: str, broker_id: int,
                                            broker_address: str, controller_addr: str
                                            ) -> tuple[RegisterBrokerToControllerResponseHeader, frozenset[int]]:
        """CONTROLLER_REGISTER_BROKER: the header names the master (if alive); the body is the set."""
        header = RegisterBrokerToControllerRequestHeader(cluster_name, broker_name, broker_id, broker_address,
                                                         invoke_time=self.node.now_ms())
        response = await self._controller_request(controller_addr, RequestCode.CONTROLLER_REGISTER_BROKER, header)
        return (RegisterBrokerToControllerResponseHeader.decode(response),
                SyncStateSet.decode(response.body).sync_state_set)

    async def get_replica_info(self, controller_addr: str, broker_name: str
                               ) -> tuple[GetReplicaInfoResponseHeader, SyncStateSet]:
        header = GetReplicaInfoRequestHeader(broker_name)
        response = await self._controller_request(controller_addr, RequestCode.CONTROLLER_GET_REPLICA_INFO, header)
        return GetReplicaInfoResponseHeader.decode(response), SyncStateSet.decode(response.body)

    def send_heartbeat_to_controller(self, controller_addr: str, cluster_name: str, broker_addr: str,
                                     broker_name: str, broker_id: int | None, epoch: int, max_offset: int,
                                     confirm_offset: int, controller_heartbeat_timeout_mills: int,
                                     election_priority: int) -> None:
        """BROKER_HEARTBEAT to one controller, oneway, sent from a task of its own (Java: the
        brokerOuterExecutor); a failure is logged."""
        if not controller_addr:
            return
        header = BrokerHeartbeatRequestHeader(
            cluster_name=cluster_name, broker_addr=broker_addr, broker_name=broker_name, broker_id=broker_id,
            epoch=epoch, max_offset=max_offset, confirm_offset=confirm_offset,
            heartbeat_timeout_mills=controller_heartbeat_timeout_mills, election_priority=election_priority)

        async def send() -> None:
            request = RemotingCommand.create_request_command(RequestCode.BROKER_HEARTBEAT, header.to_ext_fields())
            request.version = MQVersion.CURRENT_VERSION
            try:
                await self.remoting_client.invoke_oneway(controller_addr, request)
            except (RemotingError, OSError) as e:
                log.error("Error happen when send heartbeat to controller %s: %s", controller_addr, e)

        self.node.spawn(send(), name=f"heartbeat-to-controller {controller_addr}")

    # -- queue locks: the strict-mode lock quorum (RIP-32) ---------------------------------------
    async def lock_batch_mq_async(self, addr: str, body: LockBatchRequestBody,
                                  timeout_ms: int) -> list[MessageQueue]:
        """``lockBatchMQAsync``: LOCK_BATCH_MQ (41) to another member of the group; the queues it
        granted. Like RocketMQ's ``invokeAsync``, the timeout is the response-table scan's (the
        request fails at the first scan after ``timeout_ms``), so an unanswered lock fails after
        the caller's wait for the quorum is over. MQBrokerException unless SUCCESS."""
        request = RemotingCommand.create_request_command(RequestCode.LOCK_BATCH_MQ, {}, body.encode())
        request.version = MQVersion.CURRENT_VERSION
        response = await self.remoting_client.invoke_async(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)
        return LockBatchResponseBody.decode(response.body).lock_ok_mq_set

    async def unlock_batch_mq_async(self, addr: str, body: UnlockBatchRequestBody, timeout_ms: int) -> None:
        """``unlockBatchMQAsync``: UNLOCK_BATCH_MQ (42) to a member of the group (this broker
        included); MQBrokerException unless SUCCESS."""
        request = RemotingCommand.create_request_command(RequestCode.UNLOCK_BATCH_MQ, {}, body.encode())
        request.version = MQVersion.CURRENT_VERSION
        response = await self.remoting_client.invoke_async(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    # -- slave acting master (RIP-32): the EscapeBridge's route, send and pull ------------------
    async def get_topic_route_info_from_name_server(self, topic: str, timeout_ms: int) -> TopicRouteData:
        """``getTopicRouteInfoFromNameServer`` (GET_ROUTEINFO_BY_TOPIC, to a name server): the route,
        else MQBrokerException with the answer's code (TOPIC_NOT_EXIST for an unknown topic)."""
        header = GetRouteInfoRequestHeader(topic=topic)
        request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        response = await self._invoke_name_server(request, timeout_ms)
        if response.code == ResponseCode.SUCCESS and response.body is not None:
            return TopicRouteData.decode(response.body)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            log.warning("get Topic [%s] RouteInfoFromNameServer is not exist value", topic)
        raise MQBrokerException(response.code, response.remark, "")

    async def send_message_to_specific_broker(self, broker_addr: str, broker_name: str, msg: MessageExt,
                                              group: str, timeout_ms: int) -> SendResult:
        """``sendMessageToSpecificBroker``: SEND_MESSAGE_V2 with the message as it is (its topic,
        queue, flags and the properties *map*, serialized as ``messageProperties2String`` does);
        the SendResult of a stored message, else MQBrokerException with the broker's code."""
        request = self._build_send_message_request(msg, group)
        response = await self._invoke(broker_addr, request, timeout_ms)
        return self._process_send_response(broker_name, msg, response, broker_addr)

    async def send_message_to_specific_broker_async(self, broker_addr: str, broker_name: str, msg: MessageExt,
                                                    group: str, timeout_ms: int) -> SendResult:
        """``sendMessageToSpecificBrokerAsync``: the same request over ``invokeAsync`` (its timeout
        is the remoting layer's periodic scan, as RocketMQ's)."""
        request = self._build_send_message_request(msg, group)
        request.version = MQVersion.CURRENT_VERSION
        response = await self.remoting_client.invoke_async(broker_addr, request, timeout_ms)
        return self._process_send_response(broker_name, msg, response, broker_addr)

    @staticmethod
    def _build_send_message_request(msg: MessageExt, group: str) -> RemotingCommand:
        """``buildSendMessageRequest``: the V1 header's fields, sent as SEND_MESSAGE_V2."""
        header = SendMessageRequestHeader(
            producer_group=group, topic=msg.topic, default_topic=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_nums=8, queue_id=msg.queue_id, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, flag=msg.flag,
            properties=message_properties_to_string(msg.properties), reconsume_times=msg.reconsume_times,
            unit_mode=False, batch=False)
        return RemotingCommand.create_request_command(
            RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(header).to_ext_fields(), msg.body)

    @staticmethod
    def _process_send_response(broker_name: str, msg: MessageExt, response: RemotingCommand,
                               addr: str) -> SendResult:
        """``processSendResponse``: SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and
        SLAVE_NOT_AVAILABLE are a SendResult; any other code raises MQBrokerException."""
        status = STATUS_BY_CODE.get(response.code)
        if status is None:
            raise MQBrokerException(response.code, response.remark, addr)
        header = SendMessageResponseHeader.decode(response)
        return SendResult(send_status=status,
                          msg_id=msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                          message_queue=MessageQueue(msg.topic, broker_name, header.queue_id),
                          queue_offset=header.queue_offset, offset_msg_id=header.msg_id,
                          transaction_id=header.transaction_id)

    async def pull_message_from_specific_broker_async(self, broker_name: str, broker_addr: str, consumer_group: str,
                                                      topic: str, queue_id: int, offset: int, max_nums: int,
                                                      timeout_ms: int) -> tuple[PullResult | None, str, bool]:
        """``pullMessageFromSpecificBrokerAsync``: PULL_MESSAGE (no suspension, no commit, ``*``)
        for ``max_nums`` messages from ``offset``. Returns (PullResult, status name, False) when
        the broker answered with a pull status (found or not: no retry), (None, "Response
        Code:<code>", True) for another answer, (None, reason, True) when the request failed.
        Deviation: the header has no ``brokerName`` (rmqlab's PullMessageRequestHeader lacks the
        field; it matters to a proxy only)."""
        header = PullMessageRequestHeader(
            consumer_group=consumer_group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_nums,
            sys_flag=PullSysFlag.build_sys_flag(False, False, True, False), commit_offset=0,
            suspend_timeout_millis=0, subscription=SUB_ALL, sub_version=self.node.now_ms(),
            max_msg_bytes=0x7FFFFFFF, expression_type=ExpressionType.TAG)
        request = RemotingCommand.create_request_command(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        request.version = MQVersion.CURRENT_VERSION
        try:
            response = await self.remoting_client.invoke_async(broker_addr, request, timeout_ms)
        except (RemotingError, OSError) as e:
            return None, str(e), True
        status = PullStatus.from_response_code(response.code)
        if status is None:
            return None, f"Response Code:{response.code}", True
        try:
            rh = PullMessageResponseHeader.decode(response)
            result = PullResult(status, rh.next_begin_offset, rh.min_offset, rh.max_offset,
                                suggest_which_broker_id=rh.suggest_which_broker_id, message_binary=response.body,
                                broker_addr=broker_addr)
            if status is PullStatus.FOUND:  # processPullResult
                for msg in decodes(response.body or b""):
                    msg.properties[MessageConst.PROPERTY_MIN_OFFSET] = str(rh.min_offset)
                    msg.properties[MessageConst.PROPERTY_MAX_OFFSET] = str(rh.max_offset)
                    msg.queue_id = queue_id  # (rmqlab's MessageExt has no brokerName to set)
                    if rh.offset_delta is not None:
                        msg.queue_offset += rh.offset_delta
                    result.msg_found_list.append(msg)
        except ValueError:
            return None, f"Response Code:{response.code}", True
        return result, status.name, False
