"""Broker helpers (RocketMQ ``broker/util``): the put hooks of ``HookUtils``."""
