"""The broker's view of its clients (RocketMQ ``broker/client``): connected producers and consumers,
their subscriptions, and the housekeeping of their connections."""

from rmqlab.broker.client.client_channel_info import ClientChannelInfo
from rmqlab.broker.client.client_housekeeping_service import (Broker2Client, ClientHousekeepingService,
                                                              DefaultConsumerIdsChangeListener)
from rmqlab.broker.client.consumer_manager import ConsumerGroupEvent, ConsumerGroupInfo, ConsumerManager
from rmqlab.broker.client.producer_manager import ProducerManager

__all__ = ["ClientChannelInfo", "ClientHousekeepingService", "Broker2Client", "DefaultConsumerIdsChangeListener",
           "ConsumerGroupEvent", "ConsumerGroupInfo", "ConsumerManager", "ProducerManager"]
