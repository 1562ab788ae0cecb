"""RocketMQ's ``common/.../common/topic`` package."""
