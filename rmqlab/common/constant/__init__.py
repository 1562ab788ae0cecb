"""RocketMQ's ``common/.../common/constant`` package."""
