"""BrokerHousekeepingService: a broker's connection closed, so its registrations go.

Implements ``namesrv/src/main/java/org/apache/rocketmq/namesrv/routeinfo/BrokerHousekeepingService.java``,
the name server's ChannelEventListener: when a broker's channel closes (the broker process died,
its machine was partitioned away long enough for the connection to reset, or the name server
closed an expired one) ``RouteInfoManager.on_channel_destroy`` unregisters whatever registered over
it, without waiting for the 120 s expiry.

Java also reacts to a channel exception and to an idle channel (Netty closes a connection without
a whole frame for ``serverChannelMaxIdleTimeSeconds``); rmqlab's remoting layer reports neither
separately (an exception closes the channel, and so does idleness, see ``RemotingServer``), so
the close is the one event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqlab.namesrv.namesrv_controller import NamesrvController
    from rmqlab.remoting.remoting_channel import RemotingChannel


class BrokerHousekeepingService:
    """The ChannelEventListener of the name server's RemotingServer."""

    def __init__(self, namesrv_controller: NamesrvController):
        self.namesrv_controller = namesrv_controller

    def on_channel_connect(self, remote_addr: str, channel: RemotingChannel) -> None:
        """Nothing to do: a broker becomes known when it registers."""

    def on_channel_close(self, remote_addr: str, channel: RemotingChannel) -> None:
        self.namesrv_controller.route_info_manager.on_channel_destroy(channel)
        # RIP-32: the remaining members hear that the smallest broker id left (notifyMinBrokerIdChanged).
        self.namesrv_controller.send_min_broker_id_changes()
