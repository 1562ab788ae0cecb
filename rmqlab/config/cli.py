"""The configuration half of ``rmqlab namesrv|broker|controller|proxy`` (see rmqlab/cli.py).

Mirrors RocketMQ's start scripts: ``-c`` names the configuration file (``-pc`` for the proxy's
rmq-proxy.json), ``-n`` the name server list, and ``-p`` prints the effective configuration and
exits (BrokerStartup, NamesrvStartup and ControllerStartup all do this with
MixAll.printObjectProperties). The servers themselves arrive in later issues; until then a
command without ``-p`` validates the configuration and says so.

Exit codes: 0 after ``-p``, 1 for a configuration error, 2 when the configuration is fine but
the server does not exist yet.
"""

from __future__ import annotations

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
    a ConfigError is printed to stderr (no traceback) and returns 1; otherwise returns 2,
    because the servers are not built yet."""
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
    if getattr(args, "print_config", False):
        sys.stdout.write(format_config(bundle))
        return 0
    source = bundle.configFile or "built-in defaults"
    print(f"rmqlab {component}: configuration OK ({source}); the {component} server is built in a later issue "
          f"— use -p to print the effective configuration", file=sys.stderr)
    return 2
