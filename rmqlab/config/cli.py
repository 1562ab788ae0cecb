"""The configuration half of ``rmqlab namesrv|broker|controller|proxy`` (see rmqlab/cli.py).

Mirrors RocketMQ's start scripts: ``-c`` names the configuration file (``-pc`` for the proxy's
rmq-proxy.json), ``-n`` the name server list, and ``-p`` prints the effective configuration and
exits (BrokerStartup, NamesrvStartup and ControllerStartup all do this with
MixAll.printObjectProperties). Without ``-p`` the server runs as this OS process (logs under
``~/logs/rmqlab/`` like RocketMQ's ``~/logs/rocketmqlogs/``, one file per instance named after it
and its port, e.g. ``namesrv-9876.log``; a boot line on stdout, clean shutdown on SIGTERM). A start
that fails says why on stderr, e.g. ``rmqlab namesrv: cannot listen on 127.0.0.1:9876: address
already in use``. A standalone controller (``mqcontroller -c``) keeps its Raft journal under
controllerStorePath. ``broker --enable-proxy`` runs a Local-mode Proxy in the broker's process.

Exit codes: 0 after ``-p`` or a clean shutdown, 1 for a configuration error or a failed server.
"""

from __future__ import annotations

import os
import sys
import warnings
from argparse import Namespace

from rmqlab.config.errors import ConfigError, ConfigWarning
from rmqlab.config.loader import (
    format_config,
    load_broker_config,
    load_controller_config,
    load_namesrv_config,
    load_proxy_config,
)


def _config_path(component: str, args: Namespace) -> str | None:
    path = getattr(args, "config_file", None)
    if component == "broker" and getattr(args, "proxy_config_path", None) and not getattr(args, "enable_proxy", False):
        raise ConfigError("-pc names the Local-mode proxy's rmq-proxy.json: it needs --enable-proxy")
    if component == "proxy":
        proxy_path = getattr(args, "proxy_config_path", None)
        if path and proxy_path and path != proxy_path:
            raise ConfigError(f"-c {path} and -pc {proxy_path} name different proxy configuration files; give one")
        path = proxy_path or path
    return path


def _load(component: str, args: Namespace, notes: list[str]):
    path = _config_path(component, args)
    namesrv_addr = getattr(args, "namesrv_addr", None)
    if component == "broker":
        return load_broker_config(path, namesrv_addr=namesrv_addr)
    if component == "proxy":
        return load_proxy_config(path, namesrv_addr=namesrv_addr)
    if namesrv_addr is not None:
        # mqnamesrv and mqcontroller accept -n (ServerUtil's common options) but have no
        # namesrvAddr setting, so RocketMQ drops it silently; rmqlab says so.
        notes.append(f"-n {namesrv_addr} has no effect on the {'name server' if component == 'namesrv' else 'controller'}")
    if component == "namesrv":
        return load_namesrv_config(path)
    if component == "controller":
        return load_controller_config(path)
    raise ConfigError(f"unknown component {component!r}; expected namesrv, broker, controller or proxy")


def run_component_command(component: str, args: Namespace) -> int:
    """Load and check ``component``'s configuration from the parsed command line ``args``
    (config_file, namesrv_addr, print_config, and proxy_config_path for the proxy).

    Prints warnings to stderr; with ``-p`` prints the configuration to stdout and returns 0;
    a ConfigError is printed to stderr (no traceback) and returns 1; the server then runs until
    stopped."""
    notes: list[str] = []
    try:
        with warnings.catch_warnings():
            # The bundle collects every warning; printing them here once, prefixed, is clearer
            # than Python's default "file:line: ConfigWarning:" rendering of the same text.
            warnings.simplefilter("ignore", ConfigWarning)
            bundle = _load(component, args, notes)
    except ConfigError as e:
        print(f"rmqlab {component}: error: {e}", file=sys.stderr)
        return 1
    for message in notes + bundle.warnings:
        print(f"rmqlab {component}: warning: {message}", file=sys.stderr)
    proxy_bundle = None
    if component == "broker" and getattr(args, "enable_proxy", False):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConfigWarning)
                proxy_bundle = load_proxy_config(getattr(args, "proxy_config_path", None), local=True)
        except ConfigError as e:
            print(f"rmqlab proxy: error: {e}", file=sys.stderr)
            return 1
        for message in proxy_bundle.warnings:
            print(f"rmqlab proxy: warning: {message}", file=sys.stderr)
    if getattr(args, "print_config", False):
        sys.stdout.write(format_config(bundle))
        if proxy_bundle is not None:
            sys.stdout.write(format_config(proxy_bundle))
        return 0
    return _serve(component, bundle, proxy_bundle)


DEFAULT_LOGS_DIR = os.path.join("~", "logs", "rmqlab")


def _serve(component: str, bundle, proxy_bundle=None) -> int:
    """Run the server as this process (a RealCluster's RMQLAB_* environment takes precedence)."""
    from rmqlab.runtime.real import ProcessSettings, run_process

    settings = ProcessSettings.from_environ()
    logs_dir = settings.logs_dir or os.path.expanduser(DEFAULT_LOGS_DIR)
    if component == "namesrv":
        from rmqlab.namesrv import NamesrvController

        controller = NamesrvController.from_startup_config(bundle)
        name = settings.name or "namesrv"
        store_dir = settings.store_dir or os.path.expanduser(os.path.join("~", "rmqlab", "namesrv"))
    elif component == "controller":
        from rmqlab.controller.controller_manager import ControllerManager

        controller = ControllerManager.from_startup_config(bundle)
        cc = bundle.controllerConfig
        name = settings.name or f"controller-{cc.controllerDLegerSelfId}"
        # The Raft journal lives under controllerStorePath (RocketMQ's DLedger store); the node's
        # own store directory (RealCluster's, or the same path) holds nothing else.
        store_dir = settings.store_dir or cc.get_controller_store_path()
    elif component == "proxy":
        from rmqlab.proxy.proxy_controller import ProxyController

        controller = ProxyController.from_startup_config(bundle)
        name = settings.name or "proxy"
        store_dir = settings.store_dir or os.path.expanduser(os.path.join("~", "rmqlab", "proxy"))
    else:
        from rmqlab.broker import BrokerController

        controller = BrokerController(bundle)
        if proxy_bundle is not None:  # Local mode: the Proxy starts the broker it lives in
            from rmqlab.proxy.proxy_controller import ProxyController

            controller = ProxyController(proxy_bundle.proxyConfig, broker=controller)
        bc = bundle.brokerConfig
        # A node is named like the conf templates: broker-a, broker-a-s (slave id 1), broker-a-s2, ...
        # In controller mode the role and id come from the controller, in DLedger mode from the
        # DLedger election, so the file's say nothing: the node is named after its store directory
        # (conf/controller, conf/dledger: broker-n0, ...).
        if bc.enableControllerMode or bundle.messageStoreConfig.enableDLegerCommitLog:
            default_name = os.path.basename(os.path.normpath(bundle.messageStoreConfig.storePathRootDir))
        else:
            default_name = bc.brokerName if bc.brokerId == 0 else \
                f"{bc.brokerName}-s" + ("" if bc.brokerId == 1 else str(bc.brokerId))
        name = settings.name or default_name
        store_dir = bundle.messageStoreConfig.storePathRootDir
    # The log is named after the instance, its node name and the port it serves (namesrv-9876.log,
    # broker-a-10911.log): RocketMQ writes namesrv.log / broker.log per ~/logs/rocketmqlogs, and two
    # instances on one machine would share it. In a RealCluster each node has a logs dir of its own.
    if component == "proxy":
        port = bundle.proxyConfig.grpcServerPort
    elif component == "controller":  # it serves on its own address among controllerDLegerPeers
        port = int(bundle.controllerConfig.get_self_addr().rsplit(":", 1)[1])
    else:
        port = bundle.nettyServerConfig.listenPort
    log_name = name if settings.logs_dir else f"{name}-{port}"
    return run_process(controller, name, store_dir=store_dir, logs_dir=logs_dir,
                       boot_line=controller.boot_success_message, role=component, log_name=log_name)
