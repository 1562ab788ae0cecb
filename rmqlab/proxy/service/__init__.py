"""What the Proxy knows about the brokers behind it (proxy/service in RocketMQ): routes and metadata."""
