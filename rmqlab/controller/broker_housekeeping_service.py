"""BrokerHousekeepingService: a broker's connection to the controller closed (``BrokerHousekeepingService.java``).

The ChannelEventListener of the controller's remoting server: when a channel closes, the replica
that sent its heartbeats over it is inactive at once
(``BrokerHeartbeatManager.on_broker_channel_close``), without waiting for its heartbeat timeout.
Java reacts to a channel exception and to an idle channel too; rmqlab's remoting layer closes the
channel on an exception and has no idle detection, so the close is the one event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqlab.controller.controller_manager import ControllerManager
    from rmqlab.remoting.remoting_channel import RemotingChannel


class BrokerHousekeepingService:
    def __init__(self, controller_manager: ControllerManager):
        self.controller_manager = controller_manager

    def on_channel_connect(self, remote_addr: str, channel: RemotingChannel) -> None:
        """Nothing to do: a replica becomes known with its first heartbeat."""

    def on_channel_close(self, remote_addr: str, channel: RemotingChannel) -> None:
        self.controller_manager.heartbeat_manager.on_broker_channel_close(channel)
