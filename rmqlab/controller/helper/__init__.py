"""Callables the controller core is parameterised with (``org.apache.rocketmq.controller.helper``)."""

from rmqlab.controller.helper.broker_lifecycle_listener import BrokerLifecycleListener
from rmqlab.controller.helper.broker_live_info_getter import BrokerLiveInfoGetter
from rmqlab.controller.helper.broker_valid_predicate import BrokerValidPredicate

__all__ = ["BrokerLifecycleListener", "BrokerLiveInfoGetter", "BrokerValidPredicate"]
