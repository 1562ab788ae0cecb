"""``rmqlab producer`` / ``rmqlab consumer`` as OS processes: a benchmark client on the real runtime.

Like ``rmqlab namesrv`` and ``rmqlab broker`` (rmqlab.config.cli): rmqlab.runtime.real.run_process
runs the component, with the RMQLAB_* environment a RealCluster sets (node name, directories,
trace file, loopback address) taking precedence over the defaults: node name ``producer`` or
``consumer``, logs under ``~/logs/rmqlab/``, client operations to ``$RMQLAB_TRACE`` when set.
A boot line when the client has started, a clean stop on SIGTERM, and the summary line last. The
producer exits with code 1 when it tried sends and none succeeded, a pull or simple consumer when
it consumed nothing and its lookups, pulls or receives failed; the first failure's cause goes to
stderr (RocketMQ's tools exit 0 whatever happened).
"""

from __future__ import annotations

import os
import sys
from argparse import Namespace

from rmqlab.config.addresses import check_addr_list
from rmqlab.example.benchmark import consumer, producer

DEFAULT_LOGS_DIR = os.path.join("~", "logs", "rmqlab")
NAMESRV_ADDR_ENV = "NAMESRV_ADDR"  # what RocketMQ's clients read when -n is not given


def namesrv_addr_from(args: Namespace) -> str:
    """``-n``, else $NAMESRV_ADDR; ValueError saying which is missing or malformed."""
    addr = args.namesrv_addr if args.namesrv_addr is not None else os.environ.get(NAMESRV_ADDR_ENV)
    where = "-n/--namesrvAddr" if args.namesrv_addr is not None else f"${NAMESRV_ADDR_ENV}"
    if addr is None or not addr.strip():
        raise ValueError(f"no name server: give -n/--namesrvAddr (or set ${NAMESRV_ADDR_ENV}), "
                         'e.g. -n "127.0.0.1:9876;127.0.0.1:9877"')
    expected = check_addr_list(addr)
    if expected is not None:
        raise ValueError(f"{where} {addr!r}: expected {expected}")
    return addr


def endpoints_from(args: Namespace) -> str:
    """``--endpoints`` (the Proxy addresses of a ``--protocol grpc`` client); ValueError if missing."""
    if not args.endpoints or not args.endpoints.strip():
        raise ValueError('--protocol grpc: give the Proxy endpoints with --endpoints, e.g. --endpoints "127.0.0.1:8081"')
    expected = check_addr_list(args.endpoints)
    if expected is not None:
        raise ValueError(f"--endpoints {args.endpoints!r}: expected {expected}")
    if args.namesrv_addr is not None:
        raise ValueError("--protocol grpc: the client talks to the Proxy (--endpoints), not to the name servers (-n)")
    return args.endpoints


def build_client(command: str, args: Namespace):
    """The component of ``rmqlab <command>`` from its parsed flags, and the address it starts from
    (the name servers, or the Proxy endpoints with ``--protocol grpc``); ValueError naming a bad flag."""
    if command not in ("producer", "consumer"):
        raise ValueError(f"unknown benchmark client {command!r}; expected producer or consumer")
    if args.protocol == "grpc":
        address = endpoints_from(args)
    else:
        if args.endpoints is not None:
            raise ValueError("--endpoints names Proxy addresses: it needs --protocol grpc")
        address = namesrv_addr_from(args)
    if command == "producer":
        return producer.BenchmarkProducer(producer.spec_from_args(args), address), address
    return consumer.BenchmarkConsumer(consumer.spec_from_args(args), address), address


def run_client_command(command: str, client, address: str) -> int:
    """Run ``client`` (built by ``build_client``) as this OS process until it finishes or SIGTERM."""
    from rmqlab.runtime.real import ProcessSettings, run_process

    settings = ProcessSettings.from_environ()
    name = settings.name or command
    logs_dir = settings.logs_dir or os.path.expanduser(DEFAULT_LOGS_DIR)
    store_dir = settings.store_dir or os.path.expanduser(os.path.join("~", "rmqlab", name))
    spec = client.spec

    def boot_line() -> str:
        fields = " ".join(f"{k}={v}" for k, v in spec.to_dict().items() if k != "kind")
        where = "endpoints" if spec.protocol == "grpc" else "namesrv"
        return f"The benchmark {command}[{name}] boot success. {where}={address} {fields}"

    code = run_process(client, name, store_dir=store_dir, logs_dir=logs_dir, boot_line=boot_line, role=command)
    print(client.summary_line(), flush=True)
    failure = client.failure() if code == 0 and hasattr(client, "failure") else None
    if failure:
        print(f"rmqlab {command}: {failure}", file=sys.stderr, flush=True)
        return 1
    return code
