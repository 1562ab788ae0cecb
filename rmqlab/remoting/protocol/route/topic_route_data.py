"""TopicRouteData, QueueData, BrokerData: where a topic's queues live (the GET_ROUTEINFO_BY_TOPIC body).

RocketMQ's ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/route/``.
fastjson writes the beans' properties in alphabetical order and leaves null ones
out, so the name server's answer to a client older than V4_9_4 (the C++ client sends 63) is::

    {"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",
      "cluster":"DefaultCluster","enableActingMaster":false}],
     "filterServerTable":{},
     "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,
      "writeQueueNums":2}]}

(one line on the wire), and the same with ``"0"`` for newer clients (standard JSON, see
``remoting_serializable``). ``brokerAddrs`` maps a broker id (0 = master) to ``host:port``;
``zoneName`` appears only when the broker registered one, ``orderTopicConf`` only for a topic with
an order configuration, ``topicQueueMappingByBroker`` only for static topics.

The dicts and lists here are kept in the order Java iterates them (the name server builds them
so); encoding writes that order, or sorted maps in the standard dialect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_bool, check_int, check_object, check_str
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.remoting_serializable import copy_capacity, long_hash_map_order

MASTER_ID = 0  # MixAll.MASTER_ID: the id a master registers with


def _check_long_key(key: str, where: str) -> int:
    text = key.strip()
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"{where}: key {key!r} is not a broker id")
    return check_int(int(text), f"{where}[{key}]", "long")


def _check_optional_str(value: Any, where: str) -> str | None:
    return None if value is None else check_str(value, where)


@dataclass
class QueueData:
    """One broker group's queues of a topic (``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def copy(self) -> QueueData:
        return QueueData(self.broker_name, self.read_queue_nums, self.write_queue_nums, self.perm,
                         self.topic_sys_flag)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "queueData") -> QueueData:
        # Absent ints keep Java's field default 0, as fastjson leaves them.
        obj = check_object(data, where)
        return cls(
            broker_name=check_str(obj.get("brokerName"), f"{where}.brokerName"),
            read_queue_nums=check_int(obj.get("readQueueNums", 0), f"{where}.readQueueNums"),
            write_queue_nums=check_int(obj.get("writeQueueNums", 0), f"{where}.writeQueueNums"),
            perm=check_int(obj.get("perm", 0), f"{where}.perm"),
            topic_sys_flag=check_int(obj.get("topicSysFlag", 0), f"{where}.topicSysFlag"),
        )


@dataclass
class BrokerData:
    """A broker group (one brokerName) and the address of each member by broker id (``BrokerData``)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    # RIP-32: the group's brokers allow a slave to act as read-only master (``RouteInfoManager``).
    enable_acting_master: bool = False

    def copy(self) -> BrokerData:
        """``new BrokerData(other)``: the address map is a fresh HashMap, so its iteration order is
        that of a table sized for the copy (``copy_capacity``)."""
        order = long_hash_map_order(self.broker_addrs, copy_capacity(len(self.broker_addrs)))
        return BrokerData(self.cluster, self.broker_name, {i: self.broker_addrs[i] for i in order},
                          self.zone_name, self.enable_acting_master)

    def select_broker_addr(self, rng) -> str | None:
        """``selectBrokerAddr``: the master's address, else a random member's (``rng`` is a
        random.Random, the node's own); None for an empty group."""
        master = self.broker_addrs.get(MASTER_ID)
        if master is not None:
            return master
        addrs = list(self.broker_addrs.values())
        return addrs[rng.randrange(len(addrs))] if addrs else None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrs": dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
            "zoneName": self.zone_name,  # None: left out
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "brokerData") -> BrokerData:
        obj = check_object(data, where)
        raw_addrs = obj.get("brokerAddrs")
        addrs: dict[int, str] = {}
        if raw_addrs is not None:
            for key, addr in check_object(raw_addrs, f"{where}.brokerAddrs").items():
                addrs[_check_long_key(key, f"{where}.brokerAddrs")] = check_str(addr, f"{where}.brokerAddrs.{key}")
        return cls(
            cluster=check_str(obj.get("cluster"), f"{where}.cluster"),
            broker_name=check_str(obj.get("brokerName"), f"{where}.brokerName"),
            broker_addrs=addrs,
            zone_name=_check_optional_str(obj.get("zoneName"), f"{where}.zoneName"),
            enable_acting_master=check_bool(obj.get("enableActingMaster", False), f"{where}.enableActingMaster"),
        )


@dataclass
class TopicRouteData:
    """A topic's route (``TopicRouteData``): its queues per broker group and the groups' members."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    # broker address -> its filter servers (RocketMQ 3's class filter; always empty in 5.x).
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None
    # Static topics (RIP-21): brokerName -> TopicQueueMappingInfo, kept as the JSON that arrived.
    # rmqlab's name server never fills it (static topics are not implemented).
    topic_queue_mapping_by_broker: dict[str, Any] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerDatas": [b.to_json_dict() for b in self.broker_datas],
            "filterServerTable": {addr: list(servers) for addr, servers in self.filter_server_table.items()},
            "orderTopicConf": self.order_topic_conf,
            "queueDatas": [q.to_json_dict() for q in self.queue_datas],
            "topicQueueMappingByBroker": self.topic_queue_mapping_by_broker,
        }

    def encode(self, standard_json: bool = False) -> bytes:
        """The body bytes: fastjson's default dialect, or standard JSON (``ClientRequestProcessor``
        uses it for clients from V4_9_4 on and for ``acceptStandardJsonOnly``)."""
        return remoting_serializable.encode(self.to_json_dict(), standard=standard_json)

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "topicRouteData") -> TopicRouteData:
        obj = check_object(data, where)
        queue_datas = obj.get("queueDatas") or []
        broker_datas = obj.get("brokerDatas") or []
        if not isinstance(queue_datas, list) or not isinstance(broker_datas, list):
            raise ValueError(f"{where}: queueDatas and brokerDatas must be arrays")
        filters: dict[str, list[str]] = {}
        for addr, servers in check_object(obj.get("filterServerTable") or {}, f"{where}.filterServerTable").items():
            if not isinstance(servers, list):
                raise ValueError(f"{where}.filterServerTable.{addr}: expected an array")
            filters[addr] = [check_str(s, f"{where}.filterServerTable.{addr}[]") for s in servers]
        mapping = obj.get("topicQueueMappingByBroker")
        return cls(
            queue_datas=[QueueData.from_json_dict(q, f"{where}.queueDatas[{i}]") for i, q in enumerate(queue_datas)],
            broker_datas=[BrokerData.from_json_dict(b, f"{where}.brokerDatas[{i}]")
                          for i, b in enumerate(broker_datas)],
            filter_server_table=filters,
            order_topic_conf=_check_optional_str(obj.get("orderTopicConf"), f"{where}.orderTopicConf"),
            topic_queue_mapping_by_broker=None if mapping is None else check_object(
                mapping, f"{where}.topicQueueMappingByBroker"),
        )

    @classmethod
    def decode(cls, body: bytes | None) -> TopicRouteData:
        """Parse a GET_ROUTEINFO_BY_TOPIC body (either dialect); ``ValueError`` when malformed."""
        return cls.from_json_dict(remoting_serializable.decode_json(body, "TopicRouteData"))
