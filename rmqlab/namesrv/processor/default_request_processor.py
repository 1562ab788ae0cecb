"""DefaultRequestProcessor: every name-server request but GET_ROUTEINFO_BY_TOPIC.

Implements ``namesrv/src/main/java/org/apache/rocketmq/namesrv/processor/DefaultRequestProcessor.java``
for the requests brokers and admin tools send:

| code | request | answer |
|---|---|---|
| 103 | REGISTER_BROKER | SUCCESS, header ``haServerAddr``/``masterAddr`` (the master, for a slave); the errors are below the table |
| 104 | UNREGISTER_BROKER | SUCCESS |
| 106 | GET_BROKER_CLUSTER_INFO | SUCCESS, ClusterInfo body |
| 205 | WIPE_WRITE_PERM_OF_BROKER | SUCCESS, header ``wipeTopicCount`` |
| 322 | QUERY_DATA_VERSION | SUCCESS, header ``changed``, the stored DataVersion as body (none for an unknown broker); refreshes the broker's heartbeat |
| 327 | ADD_WRITE_PERM_OF_BROKER | SUCCESS, header ``addTopicCount`` |
| 901 | GET_BROKER_MEMBER_GROUP | SUCCESS, GetBrokerMemberGroupResponseBody |
| 904 | BROKER_HEARTBEAT | SUCCESS; refreshes the broker's heartbeat |

With ``notifyMinBrokerIdChanged`` (RIP-32, off by default) a REGISTER_BROKER or UNREGISTER_BROKER
that changes a group's smallest broker id makes the name server send NOTIFY_MIN_BROKER_ID_CHANGE
(905) to the group's members (``NamesrvController.send_min_broker_id_changes``).

REGISTER_BROKER fails with SYSTEM_ERROR "crc32 not match", "register broker failed" or the body's
decoding error, and with INVALID_PARAMETER for a bad name or address (the deviation below).

Any other code: REQUEST_CODE_NOT_SUPPORTED (3), remark ``" request type N not supported"``, as
Java's switch answers. Not implemented (so answered that way): the key-value configuration
(PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE), topic lists and topic registration/deletion
(GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER, ..., REGISTER/DELETE_TOPIC_IN_NAMESRV)
and the namesrv's runtime configuration (UPDATE/GET_NAMESRV_CONFIG).

A malformed header (a missing ``@CFNotNull`` field, a value of the wrong type) is answered
SYSTEM_ERROR with the problem as the remark, e.g. ``the custom field <brokerId> is null``, before
any table is touched (see ``command_custom_header`` for how that differs from Java).

Deviation: REGISTER_BROKER's names are validated before any table is touched (RocketMQ's name
server takes any string, so one client can fill its tables with junk of any size): the cluster
and broker names as ``TopicValidator`` checks a group (``^[%|a-zA-Z0-9_-]+$``, at most
``NAME_MAX_LENGTH`` characters), every topic of the body with ``TopicValidator.validateTopic``,
and the broker and HA addresses as ``host:port``. A registration that fails is answered
INVALID_PARAMETER (29, what a RocketMQ broker answers a topic that fails ``validateTopic``)
with the reason as the remark, e.g. ``The specified clusterName: a b, contains illegal
characters, allowing only ^[%|a-zA-Z0-9_-]+$``.

Response headers: like Java, a response built for a header class (REGISTER_BROKER,
QUERY_DATA_VERSION, the write-permission requests) always carries ``extFields``, empty when no field
is set; the others carry none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.common.topic.topic_validator import TopicValidator

from rmqlab.common.data_version import DataVersion
from rmqlab.common.java_compat import crc32
from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.broker_member_group import GetBrokerMemberGroupResponseBody
from rmqlab.remoting.protocol.body.register_broker_body import RegisterBrokerBody, TopicConfigSerializeWrapper
from rmqlab.remoting.protocol.header.get_broker_member_group_request_header import GetBrokerMemberGroupRequestHeader
from rmqlab.remoting.protocol.header.namesrv import (ZONE_NAME, AddWritePermOfBrokerRequestHeader,
                                                    AddWritePermOfBrokerResponseHeader, BrokerHeartbeatRequestHeader,
                                                    QueryDataVersionRequestHeader, QueryDataVersionResponseHeader,
                                                    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
                                                    UnRegisterBrokerRequestHeader,
                                                    WipeWritePermOfBrokerRequestHeader,
                                                    WipeWritePermOfBrokerResponseHeader)
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import clip
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import RemotingSysResponseCode, ResponseCode

if TYPE_CHECKING:
    from rmqlab.namesrv.namesrv_controller import NamesrvController
    from rmqlab.remoting.remoting_channel import RemotingChannel

Handler = Callable[["RemotingChannel", RemotingCommand], RemotingCommand]

# The longest cluster or broker name a registration may carry: TopicValidator's topic limit (a
# broker name is also a topic: every broker creates a topic named after itself).
NAME_MAX_LENGTH = TopicValidator.TOPIC_MAX_LENGTH
# host:port as brokers send it (an IPv4 address, a host name, or a bracketed IPv6 address).
_ADDRESS = re.compile(r"(?:[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}")


def _name_problem(what: str, name: str) -> str | None:
    if not name or not name.strip():
        return f"The specified {what} is blank."
    if TopicValidator.is_topic_or_group_illegal(name):
        return (f"The specified {what}: {clip(name, 64)}, contains illegal characters, "
                "allowing only ^[%|a-zA-Z0-9_-]+$")
    if len(name) > NAME_MAX_LENGTH:
        return f"The specified {what}: {clip(name, 64)}, is longer than its max length: {NAME_MAX_LENGTH}"
    return None


def _address_problem(what: str, addr: str) -> str | None:
    if _ADDRESS.fullmatch(addr) is None or int(addr.rsplit(":", 1)[1]) > 65535:
        return f"The specified {what}: {clip(addr, 64)}, is not host:port"
    return None


def registration_problem(header: RegisterBrokerRequestHeader, wrapper: TopicConfigSerializeWrapper) -> str | None:
    """Why a REGISTER_BROKER must not reach the tables, or None (module docstring)."""
    problem = (_name_problem("clusterName", header.cluster_name) or _name_problem("brokerName", header.broker_name)
               or _address_problem("brokerAddr", header.broker_addr))
    if problem is None and header.ha_server_addr:  # Java brokers always send it; empty is harmless
        problem = _address_problem("haServerAddr", header.ha_server_addr)
    if problem is None:
        for topic in wrapper.topic_config_table:
            result = TopicValidator.validate_topic(topic)
            if not result.valid:
                return clip(result.remark)
    return problem


def _success(ext_fields: dict | None = None, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand.create_response_command(ResponseCode.SUCCESS, ext_fields=ext_fields, body=body)


def _system_error(remark: str, ext_fields: dict | None = None) -> RemotingCommand:
    return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, remark, ext_fields=ext_fields)


class DefaultRequestProcessor:
    """The name server's default processor (registered for every code without its own)."""

    def __init__(self, namesrv_controller: NamesrvController):
        self.namesrv_controller = namesrv_controller
        self._handlers: dict[int, Handler] = {
            RequestCode.QUERY_DATA_VERSION: self.query_broker_topic_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
        }

    @property
    def route_info_manager(self):
        return self.namesrv_controller.route_info_manager

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        handler = self._handlers.get(request.code)
        if handler is None:
            return RemotingCommand.create_response_command(RemotingSysResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                           f" request type {request.code} not supported")
        try:
            return handler(channel, request)
        except RemotingCommandError as e:
            return _system_error(clip(e))

    # -- REGISTER_BROKER ------------------------------------------------------------------------
    def register_broker(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.decode(request)
        if not self._checksum(channel, request, header):
            return _system_error("crc32 not match", {})

        filter_server_list: list[str] | None = None
        if request.version >= MQVersion.V3_0_11:
            body = self._extract_register_broker_body_from_request(request, header)
            wrapper: TopicConfigSerializeWrapper = body.topic_config_serialize_wrapper
            filter_server_list = body.filter_server_list
        else:
            # A broker older than V3_0_11 sends only its topic table (and no filter servers).
            wrapper = self._extract_register_topic_config_from_request(request)
        problem = registration_problem(header, wrapper)
        if problem is not None:
            self.namesrv_controller.node.log.warning("registerBroker refused, from %s: %s", channel.remote_addr,
                                                     problem)
            return RemotingCommand.create_response_command(ResponseCode.INVALID_PARAMETER, problem, ext_fields={})

        if not channel.is_active():
            # Closed after this request was read (a bad frame right behind it, say): its close was
            # handled already, so nothing would remove the registration before it expires.
            # Deviation: Java registers it anyway; the response could not be sent either way.
            self.namesrv_controller.node.log.info("registerBroker dropped, %s closed before it was processed",
                                                  channel.remote_addr)
            return None
        result = self.route_info_manager.register_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id, header.ha_server_addr,
            request.ext_str(ZONE_NAME, None), header.heartbeat_timeout_millis, header.enable_acting_master,
            wrapper, filter_server_list, channel)
        # RIP-32: the group's members hear of a new smallest broker id (notifyMinBrokerIdChanged).
        self.namesrv_controller.send_min_broker_id_changes()
        if result is None:
            return _system_error("register broker failed", {})
        # Java also returns the ORDER_TOPIC_CONFIG key-value table as the body
        # (returnOrderTopicConfigToBroker); with no key-value configuration there is none.
        return _success(RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr).to_ext_fields())

    def _checksum(self, channel: RemotingChannel, request: RemotingCommand,
                  header: RegisterBrokerRequestHeader) -> bool:
        if header.body_crc32 != 0:
            body_crc32 = crc32(request.body) if request.body is not None else 0  # UtilAll.crc32(null) = 0
            if body_crc32 != header.body_crc32:
                self.namesrv_controller.node.log.warning(
                    "receive registerBroker request,crc32 not match,from %s", channel.remote_addr)
                return False
        return True

    @staticmethod
    def _extract_register_broker_body_from_request(request: RemotingCommand,
                                                   header: RegisterBrokerRequestHeader) -> RegisterBrokerBody:
        try:
            return RegisterBrokerBody.decode(request.body, header.compressed, request.version)
        except ValueError as e:
            raise RemotingCommandError(f"Failed to decode RegisterBrokerBody: {e}") from e

    @staticmethod
    def _extract_register_topic_config_from_request(request: RemotingCommand) -> TopicConfigSerializeWrapper:
        if request.body is None:
            return TopicConfigSerializeWrapper()
        try:
            return TopicConfigSerializeWrapper.from_json_dict(
                remoting_serializable.decode_json(request.body, "TopicConfigSerializeWrapper"))
        except ValueError as e:
            raise RemotingCommandError(f"Failed to decode TopicConfigSerializeWrapper: {e}") from e

    # -- QUERY_DATA_VERSION, heartbeat, unregister ----------------------------------------------
    def query_broker_topic_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.decode(request)
        data_version: DataVersion | None = None
        if request.body is not None:
            try:
                data_version = DataVersion.from_json_dict(
                    remoting_serializable.decode_json(request.body, "DataVersion"), "DataVersion")
            except ValueError as e:
                raise RemotingCommandError(f"Failed to decode DataVersion: {e}") from e
        rim = self.route_info_manager
        # Compared before the heartbeat is recorded, as in Java.
        changed = rim.is_broker_topic_config_changed(header.cluster_name, header.broker_addr, data_version)
        rim.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        stored = rim.query_broker_topic_config(header.cluster_name, header.broker_addr)
        body = stored.to_json().encode("utf-8") if stored is not None else None
        return _success(QueryDataVersionResponseHeader(changed).to_ext_fields(), body)

    def unregister_broker(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.decode(request)
        self.route_info_manager.submit_un_register_broker_request(header)
        self.namesrv_controller.send_min_broker_id_changes()
        return _success()

    def broker_heartbeat(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = BrokerHeartbeatRequestHeader.decode(request)
        self.route_info_manager.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        return _success()

    # -- queries --------------------------------------------------------------------------------
    def get_broker_member_group(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetBrokerMemberGroupRequestHeader.decode(request)
        group = self.route_info_manager.get_broker_member_group(header.cluster_name, header.broker_name)
        return _success(body=GetBrokerMemberGroupResponseBody(group).encode())

    def get_broker_cluster_info(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        return _success(body=self.route_info_manager.get_all_cluster_info().encode())

    # -- write permission -----------------------------------------------------------------------
    def wipe_write_perm_of_broker(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.decode(request)
        count = self.route_info_manager.wipe_write_perm_of_broker_by_lock(header.broker_name)
        self.namesrv_controller.log_event(
            "INFO", f"wipe write perm of broker[{clip(header.broker_name, 130)}], client: {channel.remote_addr}, "
                    f"{count}")
        return _success(WipeWritePermOfBrokerResponseHeader(count).to_ext_fields())

    def add_write_perm_of_broker(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.decode(request)
        count = self.route_info_manager.add_write_perm_of_broker_by_lock(header.broker_name)
        self.namesrv_controller.log_event(
            "INFO", f"add write perm of broker[{clip(header.broker_name, 130)}], client: {channel.remote_addr}, "
                    f"{count}")
        return _success(AddWritePermOfBrokerResponseHeader(count).to_ext_fields())
