"""What the Proxy knows about the brokers behind it (proxy/service in RocketMQ): routes, metadata
and transactions."""
