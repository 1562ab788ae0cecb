"""Remoting server and client settings: NettyServerConfig and NettyClientConfig.

remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyServerConfig.java and
NettyClientConfig.java (defaults from NettySystemConfig). RocketMQ feeds the same ``-c`` file to
these as to the component's own config, so ``listenPort=10911`` in broker.conf lands here. Only
the settings rmqlab's asyncio remoting layer can honour are fields; Netty thread-pool and
allocator knobs are recognised by the loader and reported as not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.config.fields import bool_field, int_field, long_field, str_field

BROKER_LISTEN_PORT = 10911  # BrokerStartup sets it before applying the file
NAMESRV_LISTEN_PORT = 9876  # NamesrvStartup
CONTROLLER_LISTEN_PORT = 19876  # ControllerStartup


@dataclass
class NettyServerConfig:
    """Where a component's remoting server listens."""

    # RocketMQ binds 0.0.0.0 (all interfaces). rmqlab's tests and labs bind loopback only, so a
    # student's half-configured cluster is never reachable from the network.
    bindAddress: str = str_field("127.0.0.1", nonempty=True)
    # RocketMQ's class default is 0 (an ephemeral port); every start-up class sets its own before
    # reading the file: mqbroker 10911, mqnamesrv 9876, mqcontroller 19876. The default here is
    # the broker's, and the namesrv and controller bundles set theirs the same way.
    listenPort: int = int_field(BROKER_LISTEN_PORT, min=0, max=65535)
    serverOnewaySemaphoreValue: int = int_field(256, min=1)
    serverAsyncSemaphoreValue: int = int_field(64, min=1)
    # A connection without a whole frame read or written for this long is closed (Netty's
    # IdleStateHandler, ALL_IDLE); 0 never. See rmqlab.remoting.remoting_server.
    serverChannelMaxIdleTimeSeconds: int = int_field(120, min=0)
    serverSocketBacklog: int = int_field(1024, min=0)


@dataclass
class NettyClientConfig:
    """How a component connects to others (name servers, controllers, masters)."""

    connectTimeoutMillis: int = int_field(3000, min=1)
    channelNotActiveInterval: int = long_field(1000 * 60, min=1)
    clientChannelMaxIdleTimeSeconds: int = int_field(120, min=0)
    clientCloseSocketIfTimeout: bool = bool_field(True)
    clientOnewaySemaphoreValue: int = int_field(65535, min=1)
    clientAsyncSemaphoreValue: int = int_field(65535, min=1)
