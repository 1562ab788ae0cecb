"""EXCHANGE_BROKER_HA_INFO (906) request and response headers (``header/ExchangeHAInfoRequestHeader.java``,
``header/ExchangeHAInfoResponseHeader.java``).

A master sends its HA address (and its initial max offset as masterFlushOffset) to the members of
its group; a request without masterHaAddress asks a master for its own (RIP-32 pre-online).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import LONG, STRING, CommandCustomHeader, header_field


@dataclass
class ExchangeHAInfoRequestHeader(CommandCustomHeader):
    master_ha_address: str | None = header_field("masterHaAddress", STRING)
    master_flush_offset: int | None = header_field("masterFlushOffset", LONG)
    master_address: str | None = header_field("masterAddress", STRING)


@dataclass
class ExchangeHAInfoResponseHeader(CommandCustomHeader):
    master_ha_address: str | None = header_field("masterHaAddress", STRING)
    master_flush_offset: int | None = header_field("masterFlushOffset", LONG)
    master_address: str | None = header_field("masterAddress", STRING)
