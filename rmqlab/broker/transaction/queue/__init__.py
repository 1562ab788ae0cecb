"""The half/op queue side of transactional messages (RocketMQ ``broker/.../transaction/queue/``)."""
