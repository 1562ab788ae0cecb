"""ControllerRequestProcessor: the controller's remoting requests (``processor/ControllerRequestProcessor.java``).

RIP-44, "New RequestCode".

| code | request | served by |
|---|---|---|
| 1001 | CONTROLLER_ALTER_SYNC_STATE_SET | the leader (a write) |
| 1002 | CONTROLLER_ELECT_MASTER | the leader (a write); SUCCESS notifies the set's live brokers |
| 1003 | CONTROLLER_REGISTER_BROKER | the leader (a write when the address changed) |
| 1004 | CONTROLLER_GET_REPLICA_INFO | the leader (a read) |
| 1005 | CONTROLLER_GET_METADATA_INFO | every controller |
| 1006 | CONTROLLER_GET_SYNC_STATE_DATA | the leader (a read; body: JSON array of broker names) |
| 904 | BROKER_HEARTBEAT | every controller (liveness is local to each) |
| 1009 / 1010 | UPDATE / GET_CONTROLLER_CONFIG | every controller (its own configuration) |
| 1011 | CLEAN_BROKER_DATA | the leader (a write) |
| 1012 | CONTROLLER_GET_NEXT_BROKER_ID | the leader (a read) |
| 1013 | CONTROLLER_APPLY_BROKER_ID | the leader (a write) |

Each leader request waits for its result at most 5 s (RocketMQ's WAIT_TIMEOUT_OUT); the Raft
layer bounds the wait itself (RaftController.APPEND_WAIT_MS).

Deviation: UPDATE_CONTROLLER_CONFIG changes the running configuration only; RocketMQ's
Configuration also rewrites the file at configStorePath.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.config.fields import BadValue, config_fields, format_value, parse_text, spec_of
from rmqlab.config.errors import ConfigError
from rmqlab.config.properties import parse_properties
from rmqlab.controller.role_change_notify_entry import RoleChangeNotifyEntry
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                                        CleanControllerBrokerDataRequestHeader,
                                                        ElectMasterRequestHeader, GetNextBrokerIdRequestHeader,
                                                        GetReplicaInfoRequestHeader,
                                                        RegisterBrokerToControllerRequestHeader)
from rmqlab.remoting.protocol.header.namesrv.broker_heartbeat_request_header import BrokerHeartbeatRequestHeader
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.controller.controller_manager import ControllerManager
    from rmqlab.remoting.remoting_channel import RemotingChannel

# The codes ControllerManager.registerProcessor registers.
CONTROLLER_REQUEST_CODES = (
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, RequestCode.CONTROLLER_ELECT_MASTER,
    RequestCode.CONTROLLER_REGISTER_BROKER, RequestCode.CONTROLLER_GET_REPLICA_INFO,
    RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
    RequestCode.BROKER_HEARTBEAT, RequestCode.UPDATE_CONTROLLER_CONFIG, RequestCode.GET_CONTROLLER_CONFIG,
    RequestCode.CLEAN_BROKER_DATA, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, RequestCode.CONTROLLER_APPLY_BROKER_ID,
)


class ControllerRequestProcessor:
    def __init__(self, controller_manager: ControllerManager):
        self.controller_manager = controller_manager
        self.heartbeat_manager = controller_manager.heartbeat_manager

    @property
    def controller(self):
        return self.controller_manager.controller

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET:
            header = AlterSyncStateSetRequestHeader.decode(request)
            return await self.controller.alter_sync_state_set(header, SyncStateSet.decode(request.body))
        if code == RequestCode.CONTROLLER_ELECT_MASTER:
            return await self._elect_master(request)
        if code == RequestCode.CONTROLLER_REGISTER_BROKER:
            header = RegisterBrokerToControllerRequestHeader.decode(request)
            response = await self.controller.register_broker(header)
            if response.code == ResponseCode.SUCCESS:
                # Deviation: the registering broker is a new incarnation; what the last one
                # reported of its log no longer ranks it in elections (see the heartbeat manager).
                self.heartbeat_manager.forget_broker_log_position(header.cluster_name, header.broker_name,
                                                                  header.broker_id)
            return response
        if code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            return await self.controller.get_replica_info(GetReplicaInfoRequestHeader.decode(request))
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return self.controller.get_controller_metadata()
        if code == RequestCode.BROKER_HEARTBEAT:
            return self._broker_heartbeat(channel, request)
        if code == RequestCode.CONTROLLER_GET_SYNC_STATE_DATA:
            return await self._get_sync_state_data(request)
        if code == RequestCode.UPDATE_CONTROLLER_CONFIG:
            return self._update_controller_config(request)
        if code == RequestCode.GET_CONTROLLER_CONFIG:
            return self._get_controller_config()
        if code == RequestCode.CLEAN_BROKER_DATA:
            return await self.controller.clean_broker_data(CleanControllerBrokerDataRequestHeader.decode(request))
        if code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            return await self.controller.get_next_broker_id(GetNextBrokerIdRequestHeader.decode(request))
        if code == RequestCode.CONTROLLER_APPLY_BROKER_ID:
            return await self.controller.apply_broker_id(ApplyBrokerIdRequestHeader.decode(request))
        return RemotingCommand.create_response_command(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                       f" request type {code} not supported")

    async def _elect_master(self, request: RemotingCommand) -> RemotingCommand:
        header = ElectMasterRequestHeader.decode(request)
        response = await self.controller.elect_master(header)
        if response.code == ResponseCode.SUCCESS and self.controller_manager.controller_config.notifyBrokerRoleChanged:
            self.controller_manager.notify_broker_role_changed(RoleChangeNotifyEntry.convert(response))
        return response

    def _broker_heartbeat(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = BrokerHeartbeatRequestHeader.decode(request)
        if header.broker_id is None:
            return RemotingCommand.create_response_command(ResponseCode.CONTROLLER_INVALID_REQUEST,
                                                           "Heart beat with empty brokerId")
        self.heartbeat_manager.on_broker_heartbeat(header.cluster_name, header.broker_name, header.broker_addr,
                                                   header.broker_id, header.heartbeat_timeout_mills, channel,
                                                   header.epoch, header.max_offset, header.confirm_offset,
                                                   header.election_priority)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, "Heart beat success")

    async def _get_sync_state_data(self, request: RemotingCommand) -> RemotingCommand:
        if request.body is not None:
            names = remoting_serializable.decode_json(request.body, "CONTROLLER_GET_SYNC_STATE_DATA body")
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return RemotingCommand.create_response_command(
                    ResponseCode.SYSTEM_ERROR, "CONTROLLER_GET_SYNC_STATE_DATA: the body must be a JSON array of "
                                               "broker names")
            if names:
                return await self.controller.get_sync_state_data(names)
        # RemotingCommand.createResponseCommand(null): no code was ever set.
        return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "not set any response code")

    # -- configuration ---------------------------------------------------------------------------
    def _config_objects(self):
        return [self.controller_manager.controller_config, self.controller_manager.netty_server_config]

    def _get_controller_config(self) -> RemotingCommand:
        """GET_CONTROLLER_CONFIG (1010): every setting as ``key=value`` lines
        (Configuration.getAllConfigsFormatString)."""
        lines = [f"{f.name}={format_value(getattr(obj, f.name))}" for obj in self._config_objects()
                 for f in config_fields(obj)]
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, None,
                                                       body=("\n".join(lines) + "\n").encode("utf-8"))

    def _update_controller_config(self, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_CONTROLLER_CONFIG (1009): a properties body; keys of configBlackList (and
        rocketmqHome) are refused with NO_PERMISSION; unknown keys are ignored as in RocketMQ."""
        if request.body is None:
            return RemotingCommand.create_response_command(ResponseCode.SUCCESS, None)
        try:
            entries = [(e.key, e.value) for e in parse_properties(request.body.decode("utf-8"), "request body")]
        except (UnicodeDecodeError, ValueError, ConfigError) as e:
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, f"string2Properties error {e}")
        black = {k.strip() for k in self.controller_manager.controller_config.configBlackList.split(";")} | {
            "rocketmqHome"}
        if any(key in black for key, _ in entries):
            return RemotingCommand.create_response_command(ResponseCode.NO_PERMISSION,
                                                           "Can not update config in black list.")
        fields = {f.name: (obj, f) for obj in self._config_objects() for f in config_fields(obj)}
        parsed = []
        for key, value in entries:
            if key not in fields:
                continue
            obj, f = fields[key]
            try:
                parsed.append((obj, key, parse_text(spec_of(f), value)))
            except BadValue as e:
                return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR,
                                                               f"{key} = '{value}': expected {e.expected}")
        for obj, key, value in parsed:
            setattr(obj, key, value)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, None)
