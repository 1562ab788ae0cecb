"""rmqlab's configuration system: RocketMQ's configuration classes, files and start-up checks.

Each component's settings are dataclasses whose field names are RocketMQ's property keys
(``brokerClusterName``, ``haListenPort``, ...), so a line of a RocketMQ ``.properties`` file maps
1:1 to a field. The loaders read a file the way RocketMQ's start-up classes do (one file offered
to all of a process's configuration objects, ``-n`` applied afterwards) and report what RocketMQ
silently ignores. Deployment modes as in RocketMQ's deployment guide ("部署方式") and
"主备自动切换模式部署"; defaults from ``BrokerConfig``, ``MessageStoreConfig``, ``ControllerConfig``
and ``NamesrvConfig``.

    from rmqlab.config import load_broker_config, format_config
    cfg = load_broker_config("conf/2m-2s-sync/broker-a.properties", namesrv_addr="127.0.0.1:9876")
    cfg.brokerConfig.brokerName, cfg.messageStoreConfig.get_store_path_commit_log()
"""

from rmqlab.config.broker import BrokerConfig, BrokerIdentity, BrokerRole, FlushDiskType, MessageStoreConfig
from rmqlab.config.controller import ControllerConfig
from rmqlab.config.errors import ConfigError, ConfigWarning
from rmqlab.config.loader import (
    BrokerStartupConfig,
    ControllerStartupConfig,
    NamesrvStartupConfig,
    ProxyStartupConfig,
    format_config,
    load_broker_config,
    load_controller_config,
    load_namesrv_config,
    load_proxy_config,
)
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import NettyClientConfig, NettyServerConfig
from rmqlab.config.properties import PropertyEntry, parse_properties, read_properties_file
from rmqlab.config.proxy import ProxyConfig

__all__ = [
    "BrokerConfig",
    "BrokerIdentity",
    "BrokerRole",
    "BrokerStartupConfig",
    "ConfigError",
    "ConfigWarning",
    "ControllerConfig",
    "ControllerStartupConfig",
    "FlushDiskType",
    "MessageStoreConfig",
    "NamesrvConfig",
    "NamesrvStartupConfig",
    "NettyClientConfig",
    "NettyServerConfig",
    "PropertyEntry",
    "ProxyConfig",
    "ProxyStartupConfig",
    "format_config",
    "load_broker_config",
    "load_controller_config",
    "load_namesrv_config",
    "load_proxy_config",
    "parse_properties",
    "read_properties_file",
]
