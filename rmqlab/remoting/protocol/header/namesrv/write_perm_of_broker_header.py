"""WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327) headers.

RocketMQ's ``WipeWritePermOfBrokerRequestHeader.java`` / ``...ResponseHeader.java`` and the
``AddWritePermOfBroker`` pair: ``mqadmin wipeWritePerm -b broker-a`` takes a broker group's queues
out of producers' routes (perm loses WRITE) before it is shut down for maintenance, and
``addWritePerm`` gives it back (perm becomes READ|WRITE); the response counts the topics changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import INTEGER, STRING, CommandCustomHeader, header_field


@dataclass
class WipeWritePermOfBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = header_field("brokerName", STRING, not_null=True)


@dataclass
class WipeWritePermOfBrokerResponseHeader(CommandCustomHeader):
    wipe_topic_count: int = header_field("wipeTopicCount", INTEGER, not_null=True)


@dataclass
class AddWritePermOfBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = header_field("brokerName", STRING, not_null=True)


@dataclass
class AddWritePermOfBrokerResponseHeader(CommandCustomHeader):
    add_topic_count: int = header_field("addTopicCount", INTEGER, not_null=True)
