"""RoleChangeNotifyEntry: an election's result, as pushed to the brokers
(``remoting/.../protocol/body/RoleChangeNotifyEntry.java``).

Built from a SUCCESS answer of CONTROLLER_ELECT_MASTER: the header's master id, address and
epochs, and the body's (ElectMasterResponseBody) broker member group and SyncStateSet. The
ControllerManager sends it as NOTIFY_BROKER_ROLE_CHANGED (1008) to every live member of the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.header.controller import ElectMasterResponseHeader
from rmqlab.remoting.remoting_command import RemotingCommand


@dataclass
class RoleChangeNotifyEntry:
    broker_member_group: BrokerMemberGroup | None
    master_address: str | None
    master_broker_id: int | None
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def convert(cls, elect_master_response: RemotingCommand) -> RoleChangeNotifyEntry:
        """``RoleChangeNotifyEntry.convert(RemotingCommand)``."""
        header = ElectMasterResponseHeader.decode(elect_master_response)
        body = (ElectMasterResponseBody.decode(elect_master_response.body)
                if elect_master_response.body else ElectMasterResponseBody())
        return cls(body.broker_member_group, header.master_address, header.master_broker_id,
                   header.master_epoch if header.master_epoch is not None else 0,
                   header.sync_state_set_epoch if header.sync_state_set_epoch is not None else 0,
                   frozenset(body.sync_state_set))
