"""One replica of the Raft counter as its own OS process, with a control channel.

    python -m rmqlab.raft.counter_process --self n0 \\
        --peers "n0-127.0.0.1:7800;n1-127.0.0.1:7801;n2-127.0.0.1:7802" \\
        --control-port 7900 --store-dir /tmp/raft/n0 [--journal] [--full-dump] [--trace n0.jsonl]

The replica runs on the real runtime (RealNode, `run_process`): pysyncobj's TCP transport on its
peer address (or on `--bind`, pysyncobj's bindAddress, when a relay sits in front of it) and its
autoTick thread. `--peers` uses RocketMQ's controllerDLegerPeers syntax. A boot line is printed
once the replica serves; SIGTERM stops it cleanly.

The control channel listens on 127.0.0.1:<control-port>: JSON objects, one per line, each
answered by one line that echoes the request's "id" (requests on one connection are served
concurrently, so a status query is not stuck behind a write that waits for a leader):

  {"id": 1, "op": "status"}        -> {"id": 1, "ok": true, "status": {"name": "n0", "role": "LEADER",
                                        "term": 1, "leader": "n0", "value": 3, "commit_index": 5, ...}}
  {"id": 2, "op": "incr", "by": 5} -> {"id": 2, "ok": true, "value": 8}   once applied on this replica
                                   -> {"id": 2, "ok": false, "error": "DISCARDED"}   (a FailReason name)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from rmqlab.config.addresses import parse_dleger_peers
from rmqlab.raft.counter import CounterReplica
from rmqlab.raft.fail_reason import RaftError
from rmqlab.runtime.control_channel import CONTROL_HOST, listen_control
from rmqlab.runtime.node import Node
from rmqlab.runtime.real import run_process



class ControlledCounterReplica(CounterReplica):
    """A CounterReplica that also serves the JSON-lines control channel."""

    def __init__(self, self_id: str, peers: Mapping[str, str], control_port: int, **options: Any):
        super().__init__(self_id, peers, **options)
        self.control_port = control_port

    async def start(self, node: Node) -> None:
        await super().start(node)
        self.control_port = await listen_control(node, self.control_port, self.handle, "raft-control")

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply fields for one control request."""
        op = request.get("op")
        if op == "status":
            return {"ok": True, "status": self.status()}
        if op == "incr":
            by = request.get("by", 1)
            if not isinstance(by, int) or isinstance(by, bool):
                return {"ok": False, "error": f"bad request: by must be an integer, not {by!r}"}
            try:
                return {"ok": True, "value": await self.incr(by)}
            except RaftError as e:
                return {"ok": False, "error": e.reason.name}
        return {"ok": False, "error": f"bad request: unknown op {op!r} (status, incr)"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="run one replica of the Raft counter (pysyncobj, TCP) as this process")
    ap.add_argument("--self", dest="self_id", required=True, help="this replica's id, one of the --peers ids")
    ap.add_argument("--peers", required=True, help="id-host:port;id-host:port;... (controllerDLegerPeers syntax)")
    ap.add_argument("--control-port", type=int, required=True, help="port of the JSON-lines control channel "
                                                                     f"on {CONTROL_HOST}")
    ap.add_argument("--store-dir", required=True, help="where the journal and dump live")
    ap.add_argument("--logs-dir", help="where <self>.log goes (default: <store-dir>/logs)")
    ap.add_argument("--bind", help="host:port pysyncobj listens on, if not its peer address (a relay in front)")
    ap.add_argument("--journal", action="store_true", help="keep the Raft log, term and vote in a file journal")
    ap.add_argument("--full-dump", action="store_true", help="write the state to a dump file at log compaction")
    ap.add_argument("--trace", help="write the event trace to this JSONL file (must not exist)")
    args = ap.parse_args(argv)
    try:
        peers = parse_dleger_peers(args.peers)
    except ValueError as e:
        ap.error(f"--peers: {e}")
    if args.self_id not in peers:
        ap.error(f"--self {args.self_id!r} is not among the --peers ids {sorted(peers)}")
    replica = ControlledCounterReplica(args.self_id, peers, args.control_port, journal=args.journal,
                                       full_dump=args.full_dump, bind_addr=args.bind)
    os.makedirs(args.store_dir, exist_ok=True)

    def boot_line() -> str:
        return (f"The raft counter replica {args.self_id} boot success. peer={peers[args.self_id]} "
                f"control={CONTROL_HOST}:{replica.control_port} pid={os.getpid()}")

    return run_process(replica, args.self_id, store_dir=args.store_dir,
                       logs_dir=args.logs_dir or os.path.join(args.store_dir, "logs"),
                       boot_line=boot_line, trace_path=args.trace)


if __name__ == "__main__":
    raise SystemExit(main())
