"""Protocol bodies and custom headers of the remoting protocol, shared by the name server, the broker
and clients (RocketMQ's ``org.apache.rocketmq.remoting.protocol`` packages ``route``, ``body``,
``header``, ``namesrv``).

* ``remoting_serializable`` - fastjson's JSON dialects (default with bare integer keys, and the
  standard one newer clients get) and Java's HashMap iteration order;
* ``mq_version`` - the ``version`` numbers that change a format;
* ``route`` - TopicRouteData, QueueData, BrokerData;
* ``body`` - RegisterBrokerBody and its topic-config wrappers, ClusterInfo, BrokerMemberGroup;
* ``header`` - CommandCustomHeader and the name-server request/response headers;
* ``namesrv`` - RegisterBrokerResult.

Every class reads and writes the exact bytes RocketMQ does; each module names its Java source.
"""

from rmqlab.remoting.protocol.mq_version import MQVersion

__all__ = ["MQVersion"]
