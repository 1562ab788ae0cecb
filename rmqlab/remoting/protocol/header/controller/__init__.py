"""Custom headers of the controller requests 1001-1013 (``org.apache.rocketmq.remoting.protocol.header.controller``).

| code | request | request header | response header | body |
|---|---|---|---|---|
| 1001 | CONTROLLER_ALTER_SYNC_STATE_SET | AlterSyncStateSetRequestHeader | AlterSyncStateSetResponseHeader | SyncStateSet both ways |
| 1002 | CONTROLLER_ELECT_MASTER | ElectMasterRequestHeader | ElectMasterResponseHeader | ElectMasterResponseBody |
| 1003 | CONTROLLER_REGISTER_BROKER | RegisterBrokerToControllerRequestHeader | RegisterBrokerToControllerResponseHeader | SyncStateSet |
| 1004 | CONTROLLER_GET_REPLICA_INFO | GetReplicaInfoRequestHeader | GetReplicaInfoResponseHeader | SyncStateSet |
| 1005 | CONTROLLER_GET_METADATA_INFO | – | GetMetaDataResponseHeader | – |
| 1006 | CONTROLLER_GET_SYNC_STATE_DATA | – | – | request: JSON array of broker names; answer: BrokerReplicasInfo |
| 1007 | GET_BROKER_EPOCH_CACHE (to a broker) | – | – | EpochEntryCache |
| 1008 | NOTIFY_BROKER_ROLE_CHANGED | NotifyBrokerRoleChangedRequestHeader | – | SyncStateSet |
| 1009 / 1010 | UPDATE / GET_CONTROLLER_CONFIG | – | – | properties text |
| 1011 | CLEAN_BROKER_DATA | CleanControllerBrokerDataRequestHeader | – | – |
| 1012 | CONTROLLER_GET_NEXT_BROKER_ID | GetNextBrokerIdRequestHeader | GetNextBrokerIdResponseHeader | – |
| 1013 | CONTROLLER_APPLY_BROKER_ID | ApplyBrokerIdRequestHeader | ApplyBrokerIdResponseHeader | – |

Bodies are in ``rmqlab.remoting.protocol.body`` (sync_state_set, elect_master_response_body,
broker_replicas_info, epoch_entry_cache).
"""

from rmqlab.remoting.protocol.header.controller.admin import CleanControllerBrokerDataRequestHeader
from rmqlab.remoting.protocol.header.controller.alter_sync_state_set_header import (AlterSyncStateSetRequestHeader,
                                                                                   AlterSyncStateSetResponseHeader)
from rmqlab.remoting.protocol.header.controller.elect_master_header import (ElectMasterRequestHeader,
                                                                           ElectMasterResponseHeader)
from rmqlab.remoting.protocol.header.controller.get_meta_data_response_header import GetMetaDataResponseHeader
from rmqlab.remoting.protocol.header.controller.get_replica_info_header import (GetReplicaInfoRequestHeader,
                                                                               GetReplicaInfoResponseHeader)
from rmqlab.remoting.protocol.header.controller.notify_broker_role_changed_request_header import (
    NotifyBrokerRoleChangedRequestHeader)
from rmqlab.remoting.protocol.header.controller.register import (ApplyBrokerIdRequestHeader,
                                                                 ApplyBrokerIdResponseHeader,
                                                                 GetNextBrokerIdRequestHeader,
                                                                 GetNextBrokerIdResponseHeader,
                                                                 RegisterBrokerToControllerRequestHeader,
                                                                 RegisterBrokerToControllerResponseHeader)

__all__ = [
    "AlterSyncStateSetRequestHeader", "AlterSyncStateSetResponseHeader", "ElectMasterRequestHeader",
    "ElectMasterResponseHeader", "GetMetaDataResponseHeader", "GetReplicaInfoRequestHeader",
    "GetReplicaInfoResponseHeader", "NotifyBrokerRoleChangedRequestHeader", "CleanControllerBrokerDataRequestHeader",
    "ApplyBrokerIdRequestHeader", "ApplyBrokerIdResponseHeader", "GetNextBrokerIdRequestHeader",
    "GetNextBrokerIdResponseHeader", "RegisterBrokerToControllerRequestHeader",
    "RegisterBrokerToControllerResponseHeader",
]
