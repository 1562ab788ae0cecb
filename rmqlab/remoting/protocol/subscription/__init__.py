"""Consumer group settings (``org.apache.rocketmq.remoting.protocol.subscription``)."""
