"""ClientChannelInfo: one client connection as the broker's client tables know it.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/client/ClientChannelInfo.java``: the
channel (the table key: equality is by channel only), the client id from the heartbeat
(``ip@instance`` for Java clients), the client's language and version from the request header, and
when the client last proved alive (a heartbeat). ``channel`` is a
:class:`rmqlab.remoting.RemotingChannel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class ClientChannelInfo:
    channel: Any
    client_id: str | None = None
    language: str | None = None
    version: int = 0
    last_update_timestamp: int = field(default=0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientChannelInfo) and other.channel is self.channel

    def __hash__(self) -> int:
        return id(self.channel)

    def __str__(self) -> str:
        return (f"ClientChannelInfo [channel={getattr(self.channel, 'remote_addr', self.channel)}, "
                f"clientId={self.client_id}, language={self.language}, version={self.version}, "
                f"lastUpdateTimestamp={self.last_update_timestamp}]")
