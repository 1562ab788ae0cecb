"""The Broker, mirroring RocketMQ's ``broker`` module: BrokerController (a Component),
its request processors, long polling, client management, the metadata managers (topics, consumer
offsets, subscription groups, delay offsets), BrokerOuterAPI and SlaveSynchronize.

    from rmqlab.broker import BrokerController
    sim.add_node("broker-a", lambda: BrokerController(load_broker_config(path, overrides=...)))

The names below are imported on first use, so that importing one of the broker's modules does not
load them all.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BrokerController": "rmqlab.broker.broker_controller",
    "BrokerOuterAPI": "rmqlab.broker.broker_outer_api",
    "BrokerStats": "rmqlab.broker.broker_stats",
    "SlaveSynchronize": "rmqlab.broker.slave_synchronize",
    "SendMessageProcessor": "rmqlab.broker.processor",
    "PullMessageProcessor": "rmqlab.broker.processor",
    "ConsumerManageProcessor": "rmqlab.broker.processor",
    "ClientManageProcessor": "rmqlab.broker.processor",
    "AdminBrokerProcessor": "rmqlab.broker.processor",
    "PullRequestHoldService": "rmqlab.broker.longpolling",
    "PullRequest": "rmqlab.broker.longpolling",
    "ConsumerManager": "rmqlab.broker.client",
    "ConsumerGroupInfo": "rmqlab.broker.client",
    "ProducerManager": "rmqlab.broker.client",
    "ClientChannelInfo": "rmqlab.broker.client",
    "ExpressionMessageFilter": "rmqlab.broker.filter",
    "TopicConfigManager": "rmqlab.broker.topic",
    "ConsumerOffsetManager": "rmqlab.broker.offset",
    "SubscriptionGroupManager": "rmqlab.broker.subscription",
    "ScheduleMessageService": "rmqlab.broker.schedule",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rmqlab.broker' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
