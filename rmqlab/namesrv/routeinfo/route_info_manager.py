"""RouteInfoManager: the name server's route tables, pure in-memory state
(``namesrv/.../routeinfo/RouteInfoManager.java``).

Implements ``namesrv/src/main/java/org/apache/rocketmq/namesrv/routeinfo/RouteInfoManager.java``.
No I/O: the clock is injected, channels are opaque objects compared by identity, and what the
caller must do on the network (close an expired broker's channel, send a NOTIFY_MIN_BROKER_ID_CHANGE)
is handed back to it, so the tables can be unit-tested without a runtime and reused.

The tables (Java's names):

* ``topic_queue_table``   topic -> brokerName -> QueueData (the topic's queues on each group);
* ``broker_addr_table``   brokerName -> BrokerData (the group's cluster and members by broker id);
* ``cluster_addr_table``  clusterName -> its brokerNames;
* ``broker_live_table``   (cluster, brokerAddr) -> BrokerLiveInfo (last heartbeat, timeout, the
  topic table's DataVersion, the channel, the HA address);
* ``filter_server_table`` (cluster, brokerAddr) -> filter servers.

How they change:

* **REGISTER_BROKER** (``register_broker``): the group and cluster entries are created; another id
  on the same address is dropped (a role switch); the **stateVersion fence** (``registerBroker``): a
  registration for an id whose stored address differs is ignored when the stored broker's
  ``DataVersion.stateVersion`` (the master epoch in controller mode) is higher, which keeps a stale
  master out; then the master (id 0), or the smallest-id slave of a group without master (a "prime
  slave", RIP-32 brokers only), writes each topic that is new or whose table version changed; the
  live entry is refreshed; a slave learns the master's address and HA address.
* **UNREGISTER_BROKER**, a closed channel (``on_channel_destroy``) and **expiry**
  (``scan_not_active_broker``: ``lastUpdate + timeout < now``, timeout 120 s unless the broker sent
  one) remove the address; a group left empty disappears with its queues, and a cluster left empty
  too; a group with ``enableActingMaster`` left without id 0 has its queues lose PERM_WRITE.
* **BROKER_HEARTBEAT** and **QUERY_DATA_VERSION** refresh the live entry's timestamp.

RIP-32, slave acting master (RocketMQ's "RIP 32 Slave Acting Master Mode" design page;
``RouteInfoManager.registerBroker``, ``unRegisterBroker``, ``pickupTopicRouteData``). The tables
follow the brokers' ``enableActingMaster``; the notices and the route rewrite are behind the name
server's two switches, both off by default:

* registration: every member's ``enableActingMaster`` overwrites the group's flag (none sent: a
  broker from before RIP-32); the smallest-id slave of a group without id 0 (the "prime slave",
  RIP-32 brokers only) writes the topics, with PERM_WRITE cleared when the group's flag is set
  (6 -> 4); a master registering again writes its own perm back (its first registration under id 0
  rewrites every topic);
* ``notifyMinBrokerIdChanged``: a registration whose id is below the group's smallest, and an
  unregistration of the smallest id from a group with ``enableActingMaster`` that keeps members,
  call for NOTIFY_MIN_BROKER_ID_CHANGE (905) to the members (``_notify_min_broker_id_changed``).
  No I/O here: each is queued as a :class:`MinBrokerIdChange` (the header and its targets) that
  the caller takes with ``take_min_broker_id_changes`` and sends, as it closes the channels the
  expiry scan returns;
* ``supportActingMaster``: GET_ROUTEINFO_BY_TOPIC shows, on a copy of the route, the smallest-id
  member of a masterless acting-master group whose queues are not writeable as brokerId 0, so
  clients use it as a read-only master (``pickup_topic_route_data``). The stored tables never
  change by reading.

Java iteration order: the bodies built from these tables (TopicRouteData, ClusterInfo,
BrokerMemberGroup) list maps in the order Java's HashMap / ConcurrentHashMap iterate them. Every
table that reaches a body is therefore kept in that order: a new key is put, then the table is
stably re-sorted by bucket, which is exactly how a HashMap orders (and re-splits on resize) its
entries (``_java_put``).

Concurrency: Java guards the tables with a read-write lock; here every method runs to completion
on the event loop without awaiting, which gives the same atomicity.

Deviations (each also commented where it happens):

* NOTIFY_MIN_BROKER_ID_CHANGE: Java starts the oneway sends from inside the registration or
  unregistration, under the tables' lock; here the notices are queued and sent by the
  NamesrvController right after the request, channel close or scan that caused them
  (``NamesrvController.send_min_broker_id_changes``): the tables stay free of I/O.
* Unregistration is synchronous (Java queues it to a BatchUnregistrationService thread).
* Static topics (RIP-21): a registration's topic-queue mappings are not kept, so
  ``topicQueueMappingByBroker`` is never set in a route.
* **Quirk fixed**: Java never removes a live entry whose address is no longer a member of any group
  (the address was replaced under the same id, or the registration was fenced): such an entry is
  "expired" and logged at every scan forever. Here it is dropped when its channel closes or it
  expires.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.data_version import DataVersion
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.topic_config import TopicConfig
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.cluster_info import ClusterInfo
from rmqlab.remoting.protocol.body.register_broker_body import (TopicConfigAndMappingSerializeWrapper,
                                                                TopicConfigSerializeWrapper)
from rmqlab.remoting.protocol.header.namesrv.unregister_broker_request_header import UnRegisterBrokerRequestHeader
from rmqlab.remoting.protocol.header.notify_min_broker_id_change_request_header import (
    NotifyMinBrokerIdChangeRequestHeader)
from rmqlab.remoting.protocol.namesrv.register_broker_result import RegisterBrokerResult
from rmqlab.remoting.protocol.remoting_serializable import (copy_capacity, hash_map_order, hash_set_copy_capacity,
                                                            long_hash_map_order)
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID, BrokerData, QueueData, TopicRouteData
from rmqlab.remoting.remoting_helper import clip

# RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME: the live-entry timeout when the broker
# sends none (RocketMQ brokers send one only with slave acting master enabled).
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 1000 * 60 * 2

# LoggerName.NAMESRV_LOGGER_NAME
NAMESRV_LOGGER_NAME = "RocketmqNamesrv"

# Table sizes of the Java maps whose order reaches a body: HashMap and HashSet start at 16;
# ConcurrentHashMap(128) and (32) get tables of 256 and 64.
_HASH_MAP_CAPACITY = 16
_BROKER_ADDR_TABLE_CAPACITY = 256
_CLUSTER_ADDR_TABLE_CAPACITY = 64

# The longest message logged (the tables' names are short; a peer's junk is clipped to this).
_LOG_LINE_MAX = 1000

LOG_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR}

# (level, message) of a notable event: a broker registered, fenced, expired or removed.
EventListener = Callable[[str, str], None]
# (kind, **fields): the typed trace event of a fact readers use (rmqlab.trace.kinds, namesrv.*).
TraceListener = Callable[..., None]


@dataclass(frozen=True)
class BrokerAddrInfo:
    """The live table's key (``BrokerAddrInfo``): a broker address within a cluster."""

    cluster_name: str
    broker_addr: str

    def __str__(self) -> str:
        return f"BrokerIdentityInfo [clusterName={self.cluster_name}, brokerAddr={self.broker_addr}]"


@dataclass
class BrokerLiveInfo:
    """One registered broker address (``BrokerLiveInfo``)."""

    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str | None


class ActingMaster(Protocol):
    """The decision point ``acting_master`` (rmqlab.common.decision_points): which member of a
    broker group a route of `topic` lists as brokerId 0, or None to list the members as they are.
    `broker_ids`: the group's registered ids, ascending; `enable_acting_master`: the group's flag
    (its brokers' enableSlaveActingMaster); `perm`: the group's queue perm for the topic."""

    def __call__(self, topic: str, broker_ids: list[int], enable_acting_master: bool, perm: int) -> int | None: ...


def acting_master(topic: str, broker_ids: list[int], enable_acting_master: bool, perm: int) -> int | None:
    """RocketMQ's rule (``RouteInfoManager.pickupTopicRouteData``, supportActingMaster): the
    smallest id of a group that has members but no master (id 0), has enableActingMaster, and
    whose queues for the topic are not writeable (its prime slave registered them read-only, or
    the master's departure took PERM_WRITE away). Never for the member-group sync's own topic
    (``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>``): a broker learns who is alive from its route,
    which must show the real ids."""
    if topic.startswith(TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX):
        return None
    if not broker_ids or MASTER_ID in broker_ids or not enable_acting_master or PermName.is_writeable(perm):
        return None
    return min(broker_ids)


_ROCKETMQ_ACTING_MASTER = acting_master  # the parameter of the same name shadows it in __init__


@dataclass(frozen=True)
class MinBrokerIdChange:
    """One NOTIFY_MIN_BROKER_ID_CHANGE (905) to send, oneway, to each of ``broker_addrs`` (the
    members ``chooseBrokerAddrsToNotify`` picks, in the group's map order)."""

    header: NotifyMinBrokerIdChangeRequestHeader
    broker_addrs: tuple[str, ...]


def _queue_data_text(qd: QueueData) -> str:
    return (f"QueueData [brokerName={qd.broker_name}, readQueueNums={qd.read_queue_nums}, "
            f"writeQueueNums={qd.write_queue_nums}, perm={qd.perm}, topicSysFlag={qd.topic_sys_flag}]")


def _java_put(table: dict, key: Any, value: Any, order: Callable[[list], list]) -> None:
    """``table.put(key, value)`` keeping ``table`` in its Java iteration order (module docstring)."""
    new = key not in table
    table[key] = value
    if new:
        ordered = order(list(table))
        if ordered != list(table):
            items = [(k, table[k]) for k in ordered]
            table.clear()
            table.update(items)


def _str_order(capacity: int) -> Callable[[list], list]:
    return lambda keys: hash_map_order(keys, capacity)


def _long_order(keys: list) -> list:
    return long_hash_map_order(keys, _HASH_MAP_CAPACITY)


class RouteInfoManager:
    """The route tables (see the module docstring).

    ``clock`` gives epoch milliseconds (the node's ``now_ms``); ``logger`` receives every line
    RocketMQ's RouteInfoManager logs; ``on_event(level, message)`` the notable ones only (a broker
    registered, fenced, expired, removed), for the event trace; ``on_trace(kind, **fields)`` the
    facts among them as typed events (a broker registered, its channel expired or destroyed).
    """

    def __init__(self, namesrv_config: NamesrvConfig, clock: Callable[[], int], *,
                 logger: logging.Logger | None = None, on_event: EventListener | None = None,
                 on_trace: TraceListener | None = None, acting_master: ActingMaster | None = None):
        self.namesrv_config = namesrv_config
        # The decision point acting_master (rmqlab.common.decision_points): RocketMQ's rule unless given.
        self.acting_master: ActingMaster = acting_master or _ROCKETMQ_ACTING_MASTER
        self.clock = clock
        self.log = logger or logging.getLogger(NAMESRV_LOGGER_NAME)
        self.on_event = on_event
        self.on_trace = on_trace
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        # clusterName -> brokerNames (an insertion-ordered set: dict keys, values None).
        self.cluster_addr_table: dict[str, dict[str, None]] = {}
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddrInfo, list[str]] = {}
        # NOTIFY_MIN_BROKER_ID_CHANGE notices not yet taken by the caller (module docstring).
        self._min_broker_id_changes: list[MinBrokerIdChange] = []

    # -- logging ------------------------------------------------------------------------------
    def _log(self, level: str, message: str, notable: bool = False) -> None:
        # Names come from the peers (an UNREGISTER_BROKER may carry any string): a line stays short.
        message = clip(message, _LOG_LINE_MAX)
        self.log.log(LOG_LEVELS[level], "%s", message)
        if notable and self.on_event is not None:
            self.on_event(level, message)

    def _trace(self, kind: str, **fields: Any) -> None:
        if self.on_trace is not None:
            self.on_trace(kind, **fields)

    # -- registration -------------------------------------------------------------------------
    def register_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str | None, zone_name: str | None, timeout_millis: int | None,
                        enable_acting_master: bool | None, topic_config_wrapper: TopicConfigSerializeWrapper,
                        filter_server_list: list[str] | None, channel: Any) -> RegisterBrokerResult | None:
        """``registerBroker``: None when refused (a single-topic registration before the broker's
        first one; the processor answers SYSTEM_ERROR "register broker failed"). A fenced
        registration returns an empty result, as Java does (SUCCESS without a master).

        **Quirk fixed**: in Java both refusals come after the cluster and group entries were
        created, so a refused first registration leaves a cluster and a group without members
        in GET_BROKER_CLUSTER_INFO forever (and any client can add such junk at will). Here a
        refusal takes back the entries this call created (``_undo_new_entries``).
        """
        result = RegisterBrokerResult()
        new_cluster = cluster_name not in self.cluster_addr_table
        broker_names = self.cluster_addr_table.get(cluster_name)
        if broker_names is None:
            broker_names = {}
            _java_put(self.cluster_addr_table, cluster_name, broker_names, _str_order(_CLUSTER_ADDR_TABLE_CAPACITY))
        new_name_in_cluster = broker_name not in broker_names
        _java_put(broker_names, broker_name, None, _str_order(_HASH_MAP_CAPACITY))

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster_name, broker_name, {})
            _java_put(self.broker_addr_table, broker_name, broker_data, _str_order(_BROKER_ADDR_TABLE_CAPACITY))

        # A broker from before RIP-32 sends no enableActingMaster; every registration of any
        # member overwrites the group's flag (as ``registerBroker`` does), and its zone name.
        is_old_version_broker = enable_acting_master is None
        broker_data.enable_acting_master = not is_old_version_broker and bool(enable_acting_master)
        broker_data.zone_name = zone_name
        addrs = broker_data.broker_addrs

        # RIP-32: does this id become the group's smallest? An empty group counts as 0 (as Java's
        # prevMinBrokerId), so the first member of a group never triggers a notice.
        prev_min_broker_id = min(addrs) if addrs else MASTER_ID
        is_min_broker_id_changed = broker_id < prev_min_broker_id

        # Switching slave to master: the same host:port keeps one record, under its new id.
        for stale_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[stale_id]

        # The stateVersion fence: a stale master (lower epoch) cannot take an id back.
        old_broker_addr = addrs.get(broker_id)
        if old_broker_addr is not None and old_broker_addr != broker_addr:
            old_info = self.broker_live_table.get(BrokerAddrInfo(cluster_name, old_broker_addr))
            if old_info is not None:
                old_state_version = old_info.data_version.state_version
                new_state_version = topic_config_wrapper.data_version.state_version
                if old_state_version > new_state_version:
                    self._log("WARN", f"Registering Broker conflicts with the existed one, just ignore.: "
                                      f"Cluster:{cluster_name}, BrokerName:{broker_name}, BrokerId:{broker_id}, "
                                      f"Old BrokerAddr:{old_broker_addr}, Old Version:{old_state_version}, "
                                      f"New BrokerAddr:{broker_addr}, New Version:{new_state_version}.", True)
                    self.broker_live_table.pop(BrokerAddrInfo(cluster_name, broker_addr), None)
                    self._undo_new_entries(cluster_name, broker_name, new_cluster, new_name_in_cluster)
                    return result

        topic_config_table = topic_config_wrapper.topic_config_table
        if broker_id not in addrs and len(topic_config_table) == 1:
            # registerSingleTopicAll before the broker's first full registration.
            self._log("WARN", f"Can't register topicConfigWrapper={list(topic_config_table)} because "
                              f"broker[{broker_id}]={broker_addr} has not registered.")
            self._undo_new_entries(cluster_name, broker_name, new_cluster, new_name_in_cluster)
            return None

        old_addr = addrs.get(broker_id)
        _java_put(addrs, broker_id, broker_addr, _long_order)
        register_first = register_first or not old_addr

        is_master = broker_id == MASTER_ID
        is_prime_slave = not is_old_version_broker and not is_master and broker_id == min(addrs)
        if is_master or is_prime_slave:
            self._update_topics(cluster_name, broker_addr, broker_name, broker_data, topic_config_wrapper,
                                register_first, is_prime_slave)

        addr_info = BrokerAddrInfo(cluster_name, broker_addr)
        prev_live = self.broker_live_table.get(addr_info)
        self.broker_live_table[addr_info] = BrokerLiveInfo(
            self.clock(), DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout_millis is None else timeout_millis,
            topic_config_wrapper.data_version.copy(), channel, ha_server_addr)
        if prev_live is None:
            self._log("INFO", f"new broker registered, {addr_info} HAService: {ha_server_addr}", True)
            self._trace("namesrv.broker_register", cluster=cluster_name, broker_addr=broker_addr,
                        broker_set=broker_name, broker_id=broker_id, ha_server_addr=ha_server_addr)

        if filter_server_list is not None:
            if not filter_server_list:
                self.filter_server_table.pop(addr_info, None)
            else:
                self.filter_server_table[addr_info] = list(filter_server_list)

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, master_addr))
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr

        # RIP-32: the members learn their new smallest id. Unlike the unregistration path, this one
        # does not look at the group's enableActingMaster (as in Java).
        if is_min_broker_id_changed and self.namesrv_config.notifyMinBrokerIdChanged:
            self._notify_min_broker_id_changed(addrs, None, self.broker_live_table[addr_info].ha_server_addr)
        return result

    def _undo_new_entries(self, cluster_name: str, broker_name: str, new_cluster: bool,
                          new_name_in_cluster: bool) -> None:
        """A refused registration: drop the group if it has no member, the group's name from the
        cluster if this call added it there, and the cluster if this call created it and it is
        empty (see ``register_broker``)."""
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None and not broker_data.broker_addrs:
            del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None and new_name_in_cluster and broker_name not in self.broker_addr_table:
            names.pop(broker_name, None)
        if names is not None and new_cluster and not names:
            del self.cluster_addr_table[cluster_name]

    def _update_topics(self, cluster_name: str, broker_addr: str, broker_name: str, broker_data: BrokerData,
                       wrapper: TopicConfigSerializeWrapper, register_first: bool, is_prime_slave: bool) -> None:
        table = wrapper.topic_config_table
        mapping = TopicConfigAndMappingSerializeWrapper.from_wrapper(wrapper).topic_queue_mapping_info_map
        # deleteTopicWithBrokerRegistration: the group's topics missing from this table go
        # (not for brokers with static topics).
        if self.namesrv_config.deleteTopicWithBrokerRegistration and not mapping:
            for topic in [t for t, qdm in self.topic_queue_table.items() if broker_name in qdm and t not in table]:
                queue_data_map = self.topic_queue_table[topic]
                removed = queue_data_map.pop(broker_name, None)
                if removed is not None:
                    self._log("INFO", f"deleteTopic, remove one broker's topic {broker_name} {topic} "
                                      f"{_queue_data_text(removed)}")
                if not queue_data_map:
                    self._log("INFO", f"deleteTopic, remove the topic all queue {topic}")
                    del self.topic_queue_table[topic]
        for topic_config in table.values():
            if register_first or self.is_topic_config_changed(cluster_name, broker_addr, wrapper.data_version,
                                                              broker_name, topic_config.topic_name):
                perm = topic_config.perm
                if is_prime_slave and broker_data.enable_acting_master:
                    # RIP-32: the surviving smallest-id slave serves read-only (``registerBroker``).
                    # Java changes the registration's TopicConfig in place; the stored perm is the same.
                    perm &= ~PermName.PERM_WRITE
                self._create_and_update_queue_data(broker_name, topic_config, perm)
        # Static topics (RIP-21) are not implemented: the registration's topicQueueMappingInfoMap
        # is not stored, so no route carries topicQueueMappingByBroker.

    def _create_and_update_queue_data(self, broker_name: str, topic_config: TopicConfig, perm: int) -> None:
        queue_data = QueueData(broker_name, topic_config.read_queue_nums, topic_config.write_queue_nums, perm,
                               topic_config.topic_sys_flag)
        topic = topic_config.topic_name
        queue_data_map = self.topic_queue_table.get(topic)
        if queue_data_map is None:
            self.topic_queue_table[topic] = {broker_name: queue_data}
            self._log("INFO", f"new topic registered, {topic} {_queue_data_text(queue_data)}")
            return
        existed = queue_data_map.get(broker_name)
        if existed is None:
            _java_put(queue_data_map, broker_name, queue_data, _str_order(_HASH_MAP_CAPACITY))
        elif existed != queue_data:
            self._log("INFO", f"topic changed, {topic} OLD: {_queue_data_text(existed)} "
                              f"NEW: {_queue_data_text(queue_data)}")
            queue_data_map[broker_name] = queue_data

    # -- data versions and heartbeats ---------------------------------------------------------
    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        """``queryBrokerTopicConfig``: the DataVersion of the broker's last registration."""
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        return live.data_version if live is not None else None

    def is_broker_topic_config_changed(self, cluster_name: str, broker_addr: str,
                                       data_version: DataVersion | None) -> bool:
        """``isBrokerTopicConfigChanged``: unknown broker, or a different version."""
        prev = self.query_broker_topic_config(cluster_name, broker_addr)
        return prev is None or prev != data_version

    def is_topic_config_changed(self, cluster_name: str, broker_addr: str, data_version: DataVersion,
                                broker_name: str, topic: str) -> bool:
        """``isTopicConfigChanged``: the broker's table changed, or the topic lacks this group."""
        if self.is_broker_topic_config_changed(cluster_name, broker_addr, data_version):
            return True
        queue_data_map = self.topic_queue_table.get(topic)
        if not queue_data_map:
            return True
        return broker_name not in queue_data_map

    def update_broker_info_update_timestamp(self, cluster_name: str, broker_addr: str) -> None:
        """``updateBrokerInfoUpdateTimestamp``: a heartbeat (unknown brokers are ignored)."""
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        if live is not None:
            live.last_update_timestamp = self.clock()

    # -- unregistration -----------------------------------------------------------------------
    def submit_un_register_broker_request(self, request: UnRegisterBrokerRequestHeader) -> bool:
        """``submitUnRegisterBrokerRequest``. Deviation: applied at once, not queued to a
        BatchUnregistrationService thread; so it always succeeds."""
        self.un_register_broker([request])
        return True

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """``unregisterBroker``: one address leaves."""
        self.un_register_broker([UnRegisterBrokerRequestHeader(broker_name, broker_addr, cluster_name, broker_id)])

    def un_register_broker(self, requests: Iterable[UnRegisterBrokerRequestHeader]) -> None:
        """``unRegisterBroker``: remove each address; drop emptied groups and clusters and the
        queues of dropped groups."""
        removed_broker: dict[str, None] = {}
        reduced_broker: dict[str, None] = {}
        # brokerName -> the address that left, for the groups whose smallest id left (RIP-32).
        need_notify_broker_map: dict[str, str] = {}
        for request in requests:
            broker_name, cluster_name, broker_addr = request.broker_name, request.cluster_name, request.broker_addr
            addr_info = BrokerAddrInfo(cluster_name, broker_addr)
            live = self.broker_live_table.pop(addr_info, None)
            self._log("INFO", f"unregisterBroker, remove from brokerLiveTable {'OK' if live else 'Failed'}, "
                              f"{addr_info}", live is not None)
            self.filter_server_table.pop(addr_info, None)

            remove_broker_name = False
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is not None:
                addrs = broker_data.broker_addrs
                # Java compares the request's brokerId (not the removed address's) with the minimum.
                is_min_broker_id_changed = bool(addrs) and request.broker_id == min(addrs)
                gone = [i for i, a in addrs.items() if a == broker_addr]
                for broker_id in gone:
                    del addrs[broker_id]
                self._log("INFO", f"unregisterBroker, remove addr from brokerAddrTable "
                                  f"{'OK' if gone else 'Failed'}, {addr_info}")
                if not addrs:
                    del self.broker_addr_table[broker_name]
                    self._log("INFO", f"unregisterBroker, remove name from brokerAddrTable OK, {broker_name}", True)
                    remove_broker_name = True
                elif is_min_broker_id_changed:
                    need_notify_broker_map[broker_name] = broker_addr

            if remove_broker_name:
                name_set = self.cluster_addr_table.get(cluster_name)
                if name_set is not None:
                    removed = broker_name in name_set
                    name_set.pop(broker_name, None)
                    self._log("INFO", f"unregisterBroker, remove name from clusterAddrTable "
                                      f"{'OK' if removed else 'Failed'}, {broker_name}")
                    if not name_set:
                        del self.cluster_addr_table[cluster_name]
                        self._log("INFO", f"unregisterBroker, remove cluster from clusterAddrTable {cluster_name}",
                                  True)
                removed_broker[broker_name] = None
            else:
                reduced_broker[broker_name] = None
        self._clean_topic_by_un_register_requests(removed_broker, reduced_broker)
        if need_notify_broker_map and self.namesrv_config.notifyMinBrokerIdChanged:
            for broker_name, offline_broker_addr in need_notify_broker_map.items():
                # The group as it is after the whole batch; acting-master groups only.
                broker_data = self.broker_addr_table.get(broker_name)
                if broker_data is not None and broker_data.enable_acting_master:
                    self._notify_min_broker_id_changed(broker_data.broker_addrs, offline_broker_addr, None)

    def _clean_topic_by_un_register_requests(self, removed_broker: dict[str, None],
                                             reduced_broker: dict[str, None]) -> None:
        for topic in list(self.topic_queue_table):
            queue_data_map = self.topic_queue_table[topic]
            for broker_name in removed_broker:
                removed = queue_data_map.pop(broker_name, None)
                if removed is not None:
                    self._log("DEBUG", f"removeTopicByBrokerName, remove one broker's topic {topic} "
                                       f"{_queue_data_text(removed)}")
            if not queue_data_map:
                self._log("DEBUG", f"removeTopicByBrokerName, remove the topic all queue {topic}")
                del self.topic_queue_table[topic]
                continue
            for broker_name in reduced_broker:
                queue_data = queue_data_map.get(broker_name)
                broker_data = self.broker_addr_table.get(broker_name)
                # Java dereferences the group without a check (an NPE that aborts the clean-up
                # when a queue names a group already gone); here such a queue is left alone.
                if queue_data is not None and broker_data is not None and broker_data.enable_acting_master:
                    if self._is_no_master_exists(broker_name):
                        # RIP-32: the master left an acting-master group; its queues go read-only.
                        queue_data.perm &= ~PermName.PERM_WRITE

    def _is_no_master_exists(self, broker_name: str) -> bool:
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or not broker_data.broker_addrs:
            return True
        return min(broker_data.broker_addrs) > 0

    # -- NOTIFY_MIN_BROKER_ID_CHANGE ------------------------------------------------------------
    def _notify_min_broker_id_changed(self, broker_addr_map: dict[int, str], offline_broker_addr: str | None,
                                      ha_broker_addr: str | None) -> None:
        """``notifyMinBrokerIdChanged``: queue the notice for the caller to send (module docstring)."""
        if not broker_addr_map:
            return
        min_broker_id = min(broker_addr_map)
        # Java fills four of the header's five fields: brokerName stays null (the broker does not read it).
        header = NotifyMinBrokerIdChangeRequestHeader(min_broker_id=min_broker_id,
                                                      min_broker_addr=broker_addr_map[min_broker_id],
                                                      offline_broker_addr=offline_broker_addr,
                                                      ha_broker_addr=ha_broker_addr)
        targets = self._choose_broker_addrs_to_notify(broker_addr_map, offline_broker_addr)
        self._log("INFO", f"min broker id changed to {min_broker_id}, notify [{', '.join(targets)}], "
                          f"offline broker addr {offline_broker_addr}", True)
        self._min_broker_id_changes.append(MinBrokerIdChange(header, tuple(targets)))

    @staticmethod
    def _choose_broker_addrs_to_notify(broker_addr_map: dict[int, str], offline_broker_addr: str | None) -> list[str]:
        """``chooseBrokerAddrsToNotify``: after an unregistration (or for a group of one) every
        member; after a registration every member but the new smallest id, which knows already."""
        if offline_broker_addr is not None or len(broker_addr_map) == 1:
            return list(broker_addr_map.values())
        min_broker_id = min(broker_addr_map)
        return [addr for broker_id, addr in broker_addr_map.items() if broker_id != min_broker_id]

    def take_min_broker_id_changes(self) -> list[MinBrokerIdChange]:
        """The NOTIFY_MIN_BROKER_ID_CHANGE notices queued since the last call, oldest first; the
        caller sends them (``NamesrvController.send_min_broker_id_changes``)."""
        changes, self._min_broker_id_changes = self._min_broker_id_changes, []
        return changes

    # -- channels and expiry ------------------------------------------------------------------
    def scan_not_active_broker(self) -> list[BrokerLiveInfo]:
        """``scanNotActiveBroker``: unregister every broker whose heartbeat is older than its
        timeout. Returns their live entries: the caller closes their channels (Java closes each
        channel here, before unregistering; the outcome is the same)."""
        # Java logs "start scanNotActiveBroker" at INFO every 5 s; debug keeps the log readable.
        self._log("DEBUG", "start scanNotActiveBroker")
        now = self.clock()
        expired: list[BrokerLiveInfo] = []
        for addr_info, live in list(self.broker_live_table.items()):
            if live.last_update_timestamp + live.heartbeat_timeout_millis < now:
                self._log("WARN", f"The broker channel expired, {addr_info} {live.heartbeat_timeout_millis}ms", True)
                self._trace("namesrv.channel_expired", cluster=addr_info.cluster_name,
                            broker_addr=addr_info.broker_addr, timeout_ms=live.heartbeat_timeout_millis)
                expired.append(live)
                self.on_channel_destroy_by_addr(addr_info)
        return expired

    def on_channel_destroy(self, channel: Any) -> None:
        """``onChannelDestroy(Channel)``: the broker behind a closed connection leaves.

        Deviation: every address registered over the connection leaves, where Java unregisters
        the first it finds. A broker registers one address per connection, so that is the same
        for brokers; a client that registered many over one connection would otherwise leave the
        rest behind until they expire."""
        if channel is None:
            return
        for addr_info in [a for a, live in self.broker_live_table.items() if live.channel is channel]:
            self.on_channel_destroy_by_addr(addr_info)

    def on_channel_destroy_by_addr(self, addr_info: BrokerAddrInfo) -> None:
        """``onChannelDestroy(BrokerAddrInfo)``: unregister the address, found by its group membership."""
        request = self._setup_un_register_request(addr_info)
        if request is None:
            # Deviation (quirk fixed, see the module docstring): Java keeps this entry forever.
            if self.broker_live_table.pop(addr_info, None) is not None:
                self.filter_server_table.pop(addr_info, None)
                self._log("INFO", f"the broker's channel destroyed, {addr_info} is a member of no broker "
                                  "group; its live entry is removed")
            return
        result = self.submit_un_register_broker_request(request)
        self._log("INFO", f"the broker's channel destroyed, submit the unregister request at once, broker info: "
                          f"clusterName={request.cluster_name}, brokerAddr={request.broker_addr}, "
                          f"brokerName={request.broker_name}, brokerId={request.broker_id}, "
                          f"submit result: {str(result).lower()}", notable=True)
        self._trace("namesrv.channel_destroy", cluster=request.cluster_name, broker_addr=request.broker_addr,
                    broker_set=request.broker_name, broker_id=request.broker_id)

    def _setup_un_register_request(self, addr_info: BrokerAddrInfo) -> UnRegisterBrokerRequestHeader | None:
        for broker_data in self.broker_addr_table.values():
            if broker_data.cluster != addr_info.cluster_name:
                continue
            for broker_id, broker_addr in broker_data.broker_addrs.items():
                if broker_addr == addr_info.broker_addr:
                    return UnRegisterBrokerRequestHeader(broker_data.broker_name, broker_addr,
                                                         addr_info.cluster_name, broker_id)
        return None

    # -- queries ------------------------------------------------------------------------------
    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """``pickupTopicRouteData``: the topic's route, or None when no live group serves it.

        The route is a copy: with ``supportActingMaster`` its acting-master rewrite
        (``_rewrite_acting_master``) never reaches the stored tables.
        """
        queue_data_map = self.topic_queue_table.get(topic)
        if queue_data_map is None:
            return None
        queue_datas = [qd.copy() for qd in queue_data_map.values()]
        # Java walks a HashSet copy of the map's broker names.
        names = hash_map_order(list(queue_data_map), hash_set_copy_capacity(len(queue_data_map)))
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, list[str]] = {}
        for broker_name in names:
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            clone = broker_data.copy()
            broker_datas.append(clone)
            if not self.filter_server_table:
                continue
            for broker_addr in clone.broker_addrs.values():
                servers = self.filter_server_table.get(BrokerAddrInfo(clone.cluster, broker_addr))
                if servers is not None:  # Java puts null, which fastjson leaves out
                    _java_put(filter_servers, broker_addr, list(servers), _str_order(_HASH_MAP_CAPACITY))
        if not broker_datas:
            return None
        route = TopicRouteData(queue_datas, broker_datas, filter_servers)
        if self.namesrv_config.supportActingMaster:
            self._rewrite_acting_master(topic, route)
        return route

    def _rewrite_acting_master(self, topic: str, route: TopicRouteData) -> None:
        """RIP-32 (``pickupTopicRouteData`` under ``supportActingMaster``): for each group of the
        route, the decision point ``acting_master`` names the member listed as brokerId 0 (RocketMQ's
        rule, ``acting_master`` below: the smallest id of a masterless acting-master group whose
        queues for this topic are not writeable). Its queues keep their stored perm (read-only), so
        clients see a read-only master: consumers pull from it, producers send elsewhere. Changes
        ``route`` (a copy) only.

        RocketMQ first returns when no group of the route lacks id 0, and looks at the queue data
        of each group only after its own checks; asking the rule about every group gives the same
        routes (the rule answers None for a group with a master), and lets a replaced rule see
        every case."""
        if not route.broker_datas or not route.queue_datas:
            return
        for broker_data in route.broker_datas:
            addrs = broker_data.broker_addrs
            perm = next((qd.perm for qd in route.queue_datas if qd.broker_name == broker_data.broker_name), None)
            if perm is None:
                continue
            chosen = self.acting_master(topic, sorted(addrs), broker_data.enable_acting_master, perm)
            if chosen is None:
                continue
            if chosen not in addrs or chosen == MASTER_ID:
                raise ValueError(f"acting_master chose broker id {chosen!r} for {broker_data.broker_name}, whose "
                                 f"members are {sorted(addrs)}: the answer must be a member's id other than 0, "
                                 f"or None")
            # HashMap.remove then put(0, addr) on the copy: its table stays sized for the copy,
            # where 0 lands in the first bucket.
            capacity = copy_capacity(len(addrs))
            acting_master_addr = addrs.pop(chosen)
            addrs[MASTER_ID] = acting_master_addr
            order = long_hash_map_order(list(addrs), capacity)
            broker_data.broker_addrs = {i: addrs[i] for i in order}

    def get_all_cluster_info(self) -> ClusterInfo:
        """``getAllClusterInfo``: a snapshot of the broker and cluster tables."""
        brokers = {name: BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs), bd.zone_name,
                                    bd.enable_acting_master)
                   for name, bd in self.broker_addr_table.items()}
        clusters = {name: list(members) for name, members in self.cluster_addr_table.items()}
        return ClusterInfo(brokers, clusters)

    def get_broker_member_group(self, cluster_name: str, broker_name: str) -> BrokerMemberGroup:
        """``getBrokerMemberGroup``: every registered member of the group (none if unknown)."""
        group = BrokerMemberGroup(cluster_name, broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            addrs = broker_data.broker_addrs
            # new HashMap<>() then putAll: a table sized for the copy.
            group.broker_addrs = {i: addrs[i] for i in long_hash_map_order(addrs, copy_capacity(len(addrs)))}
        return group

    # -- write permission ---------------------------------------------------------------------
    def wipe_write_perm_of_broker_by_lock(self, broker_name: str) -> int:
        """``wipeWritePermOfBrokerByLock``: the group's queues lose WRITE; returns the topic count."""
        return self._operate_write_perm_of_broker(broker_name, wipe=True)

    def add_write_perm_of_broker_by_lock(self, broker_name: str) -> int:
        """``addWritePermOfBrokerByLock``: the group's queues become READ|WRITE; returns the count."""
        return self._operate_write_perm_of_broker(broker_name, wipe=False)

    def _operate_write_perm_of_broker(self, broker_name: str, wipe: bool) -> int:
        count = 0
        for queue_data_map in self.topic_queue_table.values():
            queue_data = queue_data_map.get(broker_name)
            if queue_data is None:
                continue
            if wipe:
                queue_data.perm &= ~PermName.PERM_WRITE
            else:
                queue_data.perm = PermName.PERM_READ | PermName.PERM_WRITE
            count += 1
        return count
