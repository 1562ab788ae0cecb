"""Controller events (``org.apache.rocketmq.controller.impl.event``): the Raft log's entries."""

from rmqlab.controller.impl.event.alter_sync_state_set_event import AlterSyncStateSetEvent
from rmqlab.controller.impl.event.apply_broker_id_event import ApplyBrokerIdEvent
from rmqlab.controller.impl.event.clean_broker_data_event import CleanBrokerDataEvent
from rmqlab.controller.impl.event.controller_result import ControllerResult
from rmqlab.controller.impl.event.elect_master_event import ElectMasterEvent
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_serializer import EventSerializer
from rmqlab.controller.impl.event.event_type import EventType
from rmqlab.controller.impl.event.list_event_serializer import ListEventSerializer
from rmqlab.controller.impl.event.update_broker_address_event import UpdateBrokerAddressEvent

__all__ = ["AlterSyncStateSetEvent", "ApplyBrokerIdEvent", "CleanBrokerDataEvent", "ControllerResult",
           "ElectMasterEvent", "EventMessage", "EventSerializer", "EventType", "ListEventSerializer",
           "UpdateBrokerAddressEvent"]
