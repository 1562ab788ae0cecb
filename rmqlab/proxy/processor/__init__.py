"""MessagingProcessor: what the gRPC activities ask of the brokers (proxy/processor in RocketMQ)."""
