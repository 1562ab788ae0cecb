"""DefaultMQAdminExt: what ``mqadmin`` asks of a cluster (``tools/admin/DefaultMQAdminExt.java`` with
``DefaultMQAdminExtImpl.java``; the commands ``clusterList``, ``topicRoute``, ``updateTopic``,
``brokerStatus``, ``consumerProgress``, and for controller mode ``getControllerMetaData``,
``getSyncStateSet``, ``getBrokerEpoch``, ``electMaster``, ``cleanBrokerMetadata``).

    admin = DefaultMQAdminExt(namesrv_addr="127.0.0.1:9876")
    await admin.start(node)
    info = await admin.examine_broker_cluster_info()                  # clusterList
    route = await admin.examine_topic_route_info("TopicTest")         # topicRoute
    await admin.create_and_update_topic_config_by_cluster("DefaultCluster", TopicConfig("T", 8, 8))
    kv = await admin.fetch_broker_runtime_stats("127.0.0.1:10911")    # brokerStatus
    props = await admin.get_broker_config("127.0.0.1:10911")          # getBrokerConfig
    await admin.update_broker_config("127.0.0.1:10911", {"brokerPermission": "4"})  # updateBrokerConfig
    offset = await admin.search_offset(MessageQueue("TopicTest", "broker-a", 0), 1_700_000_000_000)
    stats = await admin.examine_consume_stats("CG", "TopicTest")      # consumerProgress
    meta = await admin.get_controller_meta_data("127.0.0.1:9878")     # getControllerMetaData
    info = await admin.get_in_sync_state_data("127.0.0.1:9878;127.0.0.1:9868", ["broker-a"])  # getSyncStateSet
    cache = await admin.get_broker_epoch_cache("127.0.0.1:30911")     # getBrokerEpoch
    header, members = await admin.elect_master("127.0.0.1:9878", "DefaultCluster", "broker-a", 2)  # electMaster
    await admin.clean_controller_broker_data("127.0.0.1:9878", "DefaultCluster", "broker-a", "3")  # cleanBrokerMetadata

* ``examine_broker_cluster_info`` - GET_BROKER_CLUSTER_INFO (106) from a name server: every broker
  group, its members' addresses, and which cluster each belongs to;
* ``examine_topic_route_info`` - GET_ROUTEINFO_BY_TOPIC (105);
* ``create_and_update_topic_config`` - UPDATE_AND_CREATE_TOPIC (17) to one broker (the broker
  registers the topic with the name servers at once); ``..._by_cluster`` sends it to the master of
  every group of a cluster, as ``mqadmin updateTopic -c`` does;
* ``fetch_broker_runtime_stats`` - GET_BROKER_RUNTIME_INFO (28), the broker's key/value table;
* ``get_broker_config`` / ``update_broker_config`` - GET_BROKER_CONFIG (26) / UPDATE_BROKER_CONFIG
  (25) to one broker: its settings as properties; a refused key or value is MQBrokerException with
  the broker's reason;
* ``search_offset``, ``max_offset``, ``min_offset``, ``earliest_msg_store_time`` - the queue
  queries of MQAdminImpl (29, 30, 31, 32), sent to the route's brokerId 0 (a RIP-32 acting
  master while the group's master is down);
* ``examine_consume_stats`` - GET_CONSUME_STATS (208) from every group that holds the consumer
  group's retry topic (or the topic): per queue the broker's max offset, the group's committed
  offset and the last consumed store time; ``compute_total_diff`` is the backlog;
* ``get_controller_meta_data`` - CONTROLLER_GET_METADATA_INFO (1005) from a controller (the first
  of a list "a;b;c" that answers): group, leader id and address, isLeader, peers;
* ``get_in_sync_state_data`` - CONTROLLER_GET_SYNC_STATE_DATA (1006) from the leader: per broker
  set its master, epochs and replicas in and out of the SyncStateSet, each alive or not;
* ``get_broker_epoch_cache`` - GET_BROKER_EPOCH_CACHE (1007) from a broker: its epoch entries;
* ``elect_master`` - an admin-triggered CONTROLLER_ELECT_MASTER (1002) of a designated broker id;
* ``clean_controller_broker_data`` - CLEAN_BROKER_DATA (1011): the controller forgets replicas.

The last two are writes; like the reads of 1006 they go to the controller leader, found by asking
the given controllers (MQClientAPIImpl). Arguments are checked here before anything is sent
(RocketMQ checks some in the mqadmin subcommands, some not at all; see each method).

An admin client registers no producer or consumer, so it sends no heartbeats; its instance name
defaults to ``<node>-admin`` so that it does not share a client id with the node's producers.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from rmqlab.client.client_config import DEFAULT_INSTANCE_NAME, ClientConfig
from rmqlab.client.exceptions import MQClientException
from rmqlab.client.impl.mq_client_api_impl import controller_address_list
from rmqlab.client.impl.mq_client_manager import MQClientManager
from rmqlab.common.boundary_type import BoundaryType
from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.topic_config import TopicConfig
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.broker_replicas_info import BrokerReplicasInfo
from rmqlab.remoting.protocol.body.cluster_info import ClusterInfo
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
from rmqlab.remoting.protocol.header.broker.admin import ConsumeStats, KVTable, MessageQueue
from rmqlab.remoting.protocol.header.controller import ElectMasterResponseHeader, GetMetaDataResponseHeader
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID, TopicRouteData
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.admin")
_BROKER_ID = re.compile(r"-?[0-9]{1,19}")
ADMIN_EXT_GROUP = "admin_ext_group"  # DefaultMQAdminExt's default adminExtGroup


class DefaultMQAdminExt:
    def __init__(self, namesrv_addr: str | None = None, *, client_config: ClientConfig | None = None,
                 admin_ext_group: str = ADMIN_EXT_GROUP, timeout_millis: int = 5000,
                 create_topic_key: str = TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC):
        self.client_config = client_config or ClientConfig()
        if namesrv_addr is not None:
            self.client_config.namesrv_addr = namesrv_addr
        self.admin_ext_group = admin_ext_group
        self.timeout_millis = timeout_millis
        self.create_topic_key = create_topic_key
        self.client_factory: MQClientInstance | None = None
        self._running = False

    async def start(self, node: Node) -> None:
        if self._running:
            return
        if self.client_config.instance_name == DEFAULT_INSTANCE_NAME:
            self.client_config.instance_name = f"{node.name}-admin"
        self.client_factory = MQClientManager.get_instance(node).get_or_create_mq_client_instance(self.client_config)
        if not self.client_factory.register_admin_ext(self.admin_ext_group, self):
            raise MQClientException(-1, f"The adminExt group[{self.admin_ext_group}] has created already")
        self.client_factory.start()
        self._running = True

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        self.client_factory.unregister_admin_ext(self.admin_ext_group)
        await self.client_factory.shutdown()

    def on_crash(self) -> None:
        self._running = False
        if self.client_factory is not None:
            self.client_factory.unregister_admin_ext(self.admin_ext_group)
            self.client_factory.on_crash()

    @property
    def _api(self):
        if not self._running:
            raise MQClientException(-1, "The admin client is not started")
        return self.client_factory.mq_client_api_impl

    @property
    def _admin_impl(self):
        self._api  # noqa: B018 - the same refusal when not started
        return self.client_factory.mq_admin_impl

    # -- clusterList, topicRoute -----------------------------------------------------------------
    async def examine_broker_cluster_info(self) -> ClusterInfo:
        return await self._api.get_broker_cluster_info(self.timeout_millis)

    async def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        return await self._api.get_topic_route_info_from_name_server(topic, self.timeout_millis)

    # -- updateTopic -----------------------------------------------------------------------------
    async def create_and_update_topic_config(self, addr: str, config: TopicConfig) -> None:
        await self._api.create_topic(addr, self.create_topic_key, config, self.timeout_millis)

    async def create_and_update_topic_config_by_cluster(self, cluster_name: str, config: TopicConfig) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on the master of every group of ``cluster_name``; the masters'
        addresses, in broker-name order."""
        return await self._on_masters(cluster_name, lambda addr: self.create_and_update_topic_config(addr, config))

    # -- updateSubGroup --------------------------------------------------------------------------
    async def create_and_update_subscription_group_config_by_cluster(self, cluster_name: str, config) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (``mqadmin updateSubGroup -c``) on every master of
        ``cluster_name``, e.g. a FIFO group (consumeMessageOrderly=true) for the 5.x Proxy."""
        return await self._on_masters(cluster_name, lambda addr: self._api.create_subscription_group(
            addr, config, self.timeout_millis))

    async def _on_masters(self, cluster_name: str, action) -> list[str]:
        info = await self.examine_broker_cluster_info()
        names = info.cluster_addr_table.get(cluster_name)
        if not names:
            raise MQClientException(-1, f"cluster [{cluster_name}] not exist")
        masters = []
        for broker_name in sorted(names):
            bd = info.broker_addr_table.get(broker_name)
            addr = bd.broker_addrs.get(MASTER_ID) if bd is not None else None
            if addr is not None:
                await action(addr)
                masters.append(addr)
        return masters

    # -- deleteExpiredCommitLog --------------------------------------------------------------------
    async def delete_expired_commit_log(self, cluster: str | None) -> bool:
        """``deleteExpiredCommitLog(cluster)``: every broker (masters and slaves) of `cluster`, or of
        every cluster when it is empty; the result is the last broker's, as in Java."""
        info = await self.examine_broker_cluster_info()
        result = False
        for target in (info.retrieve_all_cluster_names() if not cluster else [cluster]):
            for addr in info.retrieve_all_addr_by_cluster(target):
                result = await self.delete_expired_commit_log_by_addr(addr)
        return result

    async def delete_expired_commit_log_by_addr(self, addr: str) -> bool:
        result = await self._api.delete_expired_commit_log(addr, self.timeout_millis)
        log.warning("Delete expired CommitLog on target broker=%s, execute result=%s", addr, result)
        return result

    # -- brokerStatus ----------------------------------------------------------------------------
    async def fetch_broker_runtime_stats(self, broker_addr: str) -> KVTable:
        return await self._api.get_broker_runtime_info(broker_addr, self.timeout_millis)

    # -- getBrokerConfig, updateBrokerConfig ----------------------------------------------------------
    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        return await self._api.get_broker_config(broker_addr, self.timeout_millis)

    async def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> None:
        await self._api.update_broker_config(broker_addr, properties, self.timeout_millis)

    # -- queue offsets (MQAdminImpl: asked of the route's brokerId 0) --------------------------------
    async def search_offset(self, mq: MessageQueue, timestamp: int,
                            boundary_type: BoundaryType = BoundaryType.LOWER) -> int:
        """``searchOffset`` (LOWER); ``searchLowerBoundaryOffset`` / ``searchUpperBoundaryOffset``
        are this with the boundary given."""
        return await self._admin_impl.search_offset(mq, timestamp, boundary_type)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self._admin_impl.max_offset(mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._admin_impl.min_offset(mq)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        return await self._admin_impl.earliest_msg_store_time(mq)

    # -- consumerProgress ------------------------------------------------------------------------
    async def examine_consume_stats(self, consumer_group: str, topic: str | None = None) -> ConsumeStats:
        """The group's progress over every broker group holding its retry topic (or ``topic``),
        merged (``examineConsumeStats``)."""
        route: TopicRouteData | None = None
        candidates = [RETRY_GROUP_TOPIC_PREFIX + consumer_group] + ([topic] if topic else [])
        for i, name in enumerate(candidates):
            try:
                route = await self.examine_topic_route_info(name)
                break
            except MQClientException:
                if i == len(candidates) - 1:
                    raise
        result = ConsumeStats()
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = bd.select_broker_addr(self.client_factory.node.random)
            if addr is None:
                continue
            stats = await self._api.get_consume_stats(addr, consumer_group, topic, self.timeout_millis * 3)
            result.offset_table.update(stats.offset_table)
            result.consume_tps += stats.consume_tps
        if not result.offset_table:
            raise MQClientException(ResponseCode.CONSUMER_NOT_ONLINE,
                                    "Not found the consumer group consume stats, because return offset table is "
                                    "empty, maybe the consumer not consume any message")
        return result

    # -- controller mode: getControllerMetaData, getSyncStateSet, getBrokerEpoch ---------------------
    async def get_controller_meta_data(self, controller_addr: str) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO from ``controller_addr``; for a list "a;b;c", from the first
        controller that answers (the remoting error of the last one when none does)."""
        *first, last = controller_address_list(controller_addr)
        for addr in first:
            try:
                return await self._api.get_controller_meta_data(addr, self.timeout_millis)
            except (RemotingConnectError, RemotingTimeoutError):
                continue
        return await self._api.get_controller_meta_data(last, self.timeout_millis)

    async def get_in_sync_state_data(self, controller_address: str, brokers: list[str]) -> BrokerReplicasInfo:
        """The SyncStateSet data of the broker sets named ``brokers``, from the controller leader;
        sets unknown to the controller are absent from ``replicas_info_table``."""
        return await self._api.get_in_sync_state_data(controller_address, brokers, self.timeout_millis)

    async def get_broker_epoch_cache(self, broker_addr: str) -> EpochEntryCache:
        return await self._api.get_broker_epoch_cache(broker_addr, self.timeout_millis)

    # -- controller mode: electMaster, cleanBrokerMetadata -----------------------------------------
    async def elect_master(self, controller_addr: str, cluster_name: str, broker_name: str,
                           broker_id: int) -> tuple[ElectMasterResponseHeader, BrokerMemberGroup | None]:
        """Ask the controller leader to make ``broker_id`` the master of ``broker_name`` (the policy
        elects it only if it is alive and in the SyncStateSet, or among all replicas with
        enableElectUncleanMaster). MQBrokerException with the controller's code otherwise:
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED (unknown set), CONTROLLER_MASTER_STILL_EXIST (it is
        the master already), CONTROLLER_ELECT_MASTER_FAILED (not electable).

        Deviation: the id must be a controller broker id (>= 1). RocketMQ sends any Long, and -1
        makes the controller take the request for its own trigger, which, with no electable
        broker, drops the current master."""
        _require_name(cluster_name, "clusterName")
        _require_name(broker_name, "brokerName")
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 1:
            raise ValueError(f"brokerId: expected a controller broker id (an integer >= 1), got {broker_id!r}")
        return await self._api.elect_master(controller_addr, cluster_name, broker_name, broker_id,
                                            self.timeout_millis)

    async def clean_controller_broker_data(self, controller_addr: str, cluster_name: str | None, broker_name: str,
                                           broker_controller_ids_to_clean: str | None = None,
                                           is_clean_living_broker: bool = False) -> None:
        """Make the controllers forget the replicas ``broker_controller_ids_to_clean`` ("1;2;3") of
        ``broker_name``, or the whole set when None. Unless ``is_clean_living_broker``, the
        controller refuses to forget a live replica (or a whole set that has a master), and the
        cluster name is required, as mqadmin cleanBrokerMetadata requires it."""
        _require_name(broker_name, "brokerName")
        if broker_controller_ids_to_clean is not None:
            ids = broker_controller_ids_to_clean.strip()
            parts = [p.strip() for p in ids.split(";")]
            if not all(_BROKER_ID.fullmatch(p) for p in parts):
                raise ValueError("brokerControllerIdsToClean: please set it according to the format, broker ids "
                                 f"separated by ';' (e.g. 1;2;3), got {broker_controller_ids_to_clean!r}")
            broker_controller_ids_to_clean = ";".join(parts)
        if not is_clean_living_broker and (cluster_name is None or not cluster_name.strip()):
            raise ValueError("clusterName: cleanLivingBroker is false, so clusterName can not be empty")
        await self._api.clean_controller_broker_data(controller_addr, cluster_name, broker_name,
                                                     broker_controller_ids_to_clean, is_clean_living_broker,
                                                     self.timeout_millis)


def _require_name(value: str | None, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what}: expected a non-empty name, got {value!r}")
