"""Name-server results shared with the broker (``org.apache.rocketmq.remoting.protocol.namesrv``)."""

from rmqlab.remoting.protocol.namesrv.register_broker_result import RegisterBrokerResult

__all__ = ["RegisterBrokerResult"]
