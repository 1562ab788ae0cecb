"""ProducerManager: the producer groups whose clients heartbeat to this broker.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/client/ProducerManager.java``. A broker
needs its producers only to call them back (transaction checks) and for ``mqadmin
producerConnection``; sends never require a registration (the producer of the C++
client, PyPI ``rocketmq`` 0.4.4, may send before, or without, any heartbeat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmqlab.broker.client.client_channel_info import ClientChannelInfo

log = logging.getLogger("rmqlab.broker")

CHANNEL_EXPIRED_TIMEOUT_MS = 1000 * 120  # ProducerManager.CHANNEL_EXPIRED_TIMEOUT
GET_AVAILABLE_CHANNEL_RETRY_COUNT = 3  # ProducerManager.GET_AVAILABLE_CHANNEL_RETRY_COUNT


class ProducerManager:
    def __init__(self, clock: Callable[[], int]):
        self.clock = clock
        # group -> channel id -> info (insertion ordered)
        self.group_channel_table: dict[str, dict[int, ClientChannelInfo]] = {}
        self.client_channel_table: dict[str, Any] = {}
        self._positive_atomic_counter = 0  # PositiveAtomicCounter of getAvailableChannel

    def group_size(self) -> int:
        return len(self.group_channel_table)

    def group_online(self, group: str) -> bool:
        return bool(self.group_channel_table.get(group))

    def register_producer(self, group: str, client_channel_info: ClientChannelInfo) -> None:
        table = self.group_channel_table.setdefault(group, {})
        found = table.get(id(client_channel_info.channel))
        if found is None:
            table[id(client_channel_info.channel)] = client_channel_info
            self.client_channel_table[client_channel_info.client_id] = client_channel_info.channel
            client_channel_info.last_update_timestamp = self.clock()
            log.info("new producer connected, group: %s channel: %s", group, client_channel_info)
        else:
            found.last_update_timestamp = self.clock()

    def unregister_producer(self, group: str, client_channel_info: ClientChannelInfo) -> None:
        table = self.group_channel_table.get(group)
        if not table:
            return
        old = table.pop(id(client_channel_info.channel), None)
        self.client_channel_table.pop(client_channel_info.client_id, None)
        if old is not None:
            log.info("unregister a producer[%s] from groupChannelTable %s", group, client_channel_info)
        if not table:
            del self.group_channel_table[group]
            log.info("unregister a producer group[%s] from groupChannelTable", group)

    def do_channel_close_event(self, remote_addr: str, channel: Any) -> bool:
        removed = False
        for group, table in list(self.group_channel_table.items()):
            info = table.pop(id(channel), None)
            if info is None:
                continue
            removed = True
            if self.client_channel_table.get(info.client_id) is channel:
                del self.client_channel_table[info.client_id]
            log.info("NETTY EVENT: remove channel[%s][%s] from ProducerManager groupChannelTable, producer group: %s",
                     info, remote_addr, group)
            if not table:
                del self.group_channel_table[group]
        return removed

    def scan_not_active_channel(self) -> None:
        """Drop (and close) producer channels silent for two minutes."""
        now = self.clock()
        for group, table in list(self.group_channel_table.items()):
            for key, info in list(table.items()):
                if now - info.last_update_timestamp > CHANNEL_EXPIRED_TIMEOUT_MS:
                    del table[key]
                    if self.client_channel_table.get(info.client_id) is info.channel:
                        del self.client_channel_table[info.client_id]
                    log.warning("ProducerManager#scanNotActiveChannel: remove expired channel[%s] from "
                                "ProducerManager groupChannelTable, producer group name: %s",
                                getattr(info.channel, "remote_addr", "?"), group)
                    close = getattr(info.channel, "close", None)
                    if close is not None:
                        close("expired")
            if not table:
                log.warning("SCAN: remove expired channel from ProducerManager groupChannelTable, all clear, group=%s",
                            group)
                del self.group_channel_table[group]

    def get_available_channel(self, group: str | None) -> Any:
        """``getAvailableChannel``: one channel of ``group`` for a transaction check, round robin
        from a counter; the first active one within 4 looks (the first and 3 retries), else None."""
        if group is None:
            return None
        table = self.group_channel_table.get(group)
        channels = [info.channel for info in table.values()] if table else []
        if not channels:
            log.warning("Check transaction failed, channel table is empty. groupId=%s", group)
            return None
        self._positive_atomic_counter = (self._positive_atomic_counter + 1) & 0x7FFFFFFF
        index = self._positive_atomic_counter % len(channels)
        # Java also remembers an active but unwritable channel as a fallback; rmqlab's channels
        # have no writability of their own, so active is the whole test.
        for _ in range(GET_AVAILABLE_CHANNEL_RETRY_COUNT + 1):
            channel = channels[index]
            if getattr(channel, "is_active", lambda: True)():
                return channel
            index = (index + 1) % len(channels)
        return None
