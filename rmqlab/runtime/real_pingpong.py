"""One PingPong node as its own OS process: the real runtime's test component.

    python -m rmqlab.runtime.real_pingpong --name n0 --port 20000 --peer n1=20001 --peer n2=20002 \\
        --store-dir /tmp/n0/store --logs-dir /tmp/n0/logs --trace /tmp/n0/trace.jsonl

Under a RealCluster the name, directories and trace file come from the RMQLAB_* environment the
cluster sets (rmqlab.runtime.real.ProcessSettings), so the command line needs only the port and
the peers; `build(cluster, n)` adds n such nodes to a cluster, as pingpong.build does to a
Simulation. `main(argv, component_class=...)` runs a PingPong subclass the same way (a test's
node that also writes a store, for instance).
"""

from __future__ import annotations

import argparse
import sys

from rmqlab.runtime.pingpong import PingPong
from rmqlab.runtime.real import run_process

PROG = "python -m rmqlab.runtime.real_pingpong"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG,
                                 description="run one PingPong node as an OS process")
    ap.add_argument("--name", help="node name (default: $RMQLAB_NODE)")
    ap.add_argument("--port", type=int, required=True, help="port to listen on (127.0.0.1)")
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=PORT", help="a node to ping (repeatable)")
    ap.add_argument("--interval-ms", type=float, default=10.0, help="pause between two pings to a peer")
    ap.add_argument("--process", type=int, default=0, help="the client process number traced with each ping")
    ap.add_argument("--store-dir", help="default: $RMQLAB_STORE_DIR")
    ap.add_argument("--logs-dir", help="default: $RMQLAB_LOGS_DIR")
    ap.add_argument("--trace", help="JSONL trace file to create (default: $RMQLAB_TRACE)")
    args = ap.parse_args(argv)
    peers = {}
    for item in args.peer:
        name, sep, port = item.partition("=")
        if not sep or not port.isdigit():
            ap.error(f"--peer {item!r}: expected NAME=PORT")
        peers[name] = int(port)
    args.peers = peers
    return args


def main(argv: list[str] | None = None, component_class: type[PingPong] = PingPong) -> int:
    args = parse_args(argv)
    component = component_class(args.port, args.peers, args.interval_ms, args.process)

    def boot_line() -> str:
        return (f"The PingPong node {component.node.name} boot success. listening on 127.0.0.1:{args.port}, "
                f"pinging {', '.join(args.peers) or 'nobody'}")

    try:
        return run_process(component, args.name, store_dir=args.store_dir, logs_dir=args.logs_dir,
                           trace_path=args.trace, boot_line=boot_line)
    except ValueError as e:  # a missing name or directory: a usage error, not a crash
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2


def pingpong_argv(port: int, peers: dict[str, int], interval_ms: float = 10.0, process: int = 0) -> list[str]:
    """The command line of a PingPong node process (the rest comes from the cluster's environment)."""
    argv = [sys.executable, "-m", "rmqlab.runtime.real_pingpong", "--port", str(port),
            "--interval-ms", str(interval_ms), "--process", str(process)]
    for name, p in peers.items():
        argv += ["--peer", f"{name}={p}"]
    return argv


def build(cluster, nodes: int, *, ports: list[int] | None = None, interval_ms: float = 10.0) -> list[str]:
    """Add `nodes` PingPong nodes n0, n1, ... to a RealCluster, each pinging all others; their names."""
    from rmqlab.runtime.real_cluster import free_ports

    names = [f"n{i}" for i in range(nodes)]
    ports = ports or free_ports(nodes, cluster.listen_host)
    port_of = dict(zip(names, ports))
    for i, n in enumerate(names):
        peers = {p: port_of[p] for p in names if p != n}
        cluster.add_node(n, pingpong_argv(port_of[n], peers, interval_ms, i), ports=[port_of[n]])
    return names


if __name__ == "__main__":
    raise SystemExit(main())
