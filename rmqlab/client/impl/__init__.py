"""The shared client machinery (``org.apache.rocketmq.client.impl``): MQClientInstance and the
MQClientManager that holds them, MQClientAPIImpl (every request), MQAdminImpl (queue offsets)."""

from rmqlab.client.impl.mq_admin_impl import MQAdminImpl
from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
from rmqlab.client.impl.mq_client_instance import FindBrokerResult, MQClientInstance
from rmqlab.client.impl.mq_client_manager import MQClientManager

__all__ = ["MQAdminImpl", "MQClientAPIImpl", "FindBrokerResult", "MQClientInstance", "MQClientManager"]
