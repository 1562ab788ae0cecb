"""One DLedger member as a component (either runtime), and as its own OS process.

    python -m rmqlab.dledger.dledger_member --group g0 --self n0 \\
        --peers "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913" \\
        --control-port 7900 --store-dir /tmp/dledger/n0 [--preferred-leader-ids n1] [--trace n0.jsonl]

DLedgerMember wraps a DLedgerServer (its log: the in-memory store unless a store factory is given)
with DLedger's own defaults. The process prints a boot line once it serves; SIGTERM stops it
cleanly. Its control channel (127.0.0.1:<control-port>, JSON objects one per line, each answered
by one line echoing "id") is how tests and operators drive it:

  {"id": 1, "op": "status"}                 -> {"id": 1, "ok": true, "status": {"self_id": "n0",
                                                "role": "LEADER", "term": 2, "leader": "n0",
                                                "ledger_end_index": 3, "committed_index": 3, ...}}
  {"id": 2, "op": "append", "body": "text"} -> {"id": 2, "ok": true, "code": 200, "code_name": "SUCCESS",
                                                "index": 4, "term": 2}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from rmqlab.config.addresses import parse_dleger_peers
from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.dledger_server import DLedgerServer, StoreFactory
from rmqlab.dledger.protocol.dledger_protocol_bodies import AppendEntryRequest, AppendEntryResponse
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node
from rmqlab.runtime.real import run_process

CONTROL_HOST = "127.0.0.1"


class DLedgerMember(Component):
    component_type = "dledger"

    def __init__(self, config: DLedgerConfig, store_factory: StoreFactory | None = None,
                 control_port: int | None = None):
        self.config = config
        self.store_factory = store_factory
        self.control_port = control_port
        self.server: DLedgerServer | None = None

    async def start(self, node: Node) -> None:
        self.node = node
        self.config.store_base_dir = node.store_dir
        self.server = DLedgerServer(self.config, node, self.store_factory)
        await self.server.startup()
        if self.control_port is not None:
            listener = await node.listen(CONTROL_HOST, self.control_port, self._serve_control)
            self.control_port = listener.port

    async def shutdown(self) -> None:
        if self.server is not None:
            await self.server.shutdown()

    def on_crash(self) -> None:
        if self.server is not None:
            self.server.on_crash()

    # -- what tests and the control channel use -------------------------------------------------------
    def append_future(self, body: bytes) -> asyncio.Future:
        """Append on this member (it must lead): the AppendFuture of DLedgerServer.handleAppend."""
        ms = self.server.member_state
        return self.server.append_future(AppendEntryRequest(group=ms.group, remote_id=ms.self_id, body=body))

    async def append(self, body: bytes) -> AppendEntryResponse:
        return await self.append_future(body)

    def status(self) -> dict[str, Any]:
        ms, store = self.server.member_state, self.server.dledger_store
        return {"self_id": ms.self_id, "group": ms.group, "role": ms.role.name, "term": ms.curr_term,
                "leader": ms.leader_id, "ledger_begin_index": store.get_ledger_begin_index(),
                "ledger_end_index": store.get_ledger_end_index(), "ledger_end_term": store.get_ledger_end_term(),
                "committed_index": store.get_committed_index()}

    # -- the control channel -------------------------------------------------------------------------
    async def _serve_control(self, reader: asyncio.StreamReader, writer: Any) -> None:
        requests: set[asyncio.Task] = set()
        try:
            while line := await reader.readline():
                task = self.node.spawn(self._answer(line, writer), name="dledger-control")
                requests.add(task)
                task.add_done_callback(requests.discard)
        except ConnectionError:
            pass
        finally:
            if requests:
                await asyncio.gather(*requests, return_exceptions=True)
            writer.close()

    async def _answer(self, line: bytes, writer: Any) -> None:
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as e:
            reply: dict[str, Any] = {"ok": False, "error": f"bad request: {e}"}
        else:
            reply = {"id": request.get("id"), **await self.handle(request)}
        if not writer.is_closing():
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "status":
            return {"ok": True, "status": self.status()}
        if op == "append":
            body = request.get("body", "")
            if not isinstance(body, str):
                return {"ok": False, "error": "bad request: body must be a string"}
            response = await self.append(body.encode("utf-8"))
            code = DLedgerResponseCode.value_of(response.code)
            return {"ok": True, "code": int(response.code), "code_name": code.name, "index": response.index,
                    "term": response.term, "leader": response.leader_id}
        return {"ok": False, "error": f"bad request: unknown op {op!r} (status, append)"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="run one DLedger member (in-memory log, TCP) as this process")
    ap.add_argument("--group", default=DLedgerConfig.group, help="the DLedger group (dLegerGroup)")
    ap.add_argument("--self", dest="self_id", required=True, help="this member's id, one of the --peers ids")
    ap.add_argument("--peers", required=True, help="id-host:port;id-host:port;... (dLegerPeers)")
    ap.add_argument("--control-port", type=int, required=True, help=f"port of the JSON-lines control channel on "
                                                                     f"{CONTROL_HOST}")
    ap.add_argument("--store-dir", required=True, help="the member's root (currterm lives there)")
    ap.add_argument("--logs-dir", help="where <self>.log goes (default: <store-dir>/logs)")
    ap.add_argument("--preferred-leader-ids", help="';'-separated ids (preferredLeaderIds)")
    ap.add_argument("--trace", help="write the event trace to this JSONL file (must not exist)")
    args = ap.parse_args(argv)
    try:
        peers = parse_dleger_peers(args.peers)
    except ValueError as e:
        ap.error(f"--peers: {e}")
    if args.self_id not in peers:
        ap.error(f"--self {args.self_id!r} is not among the --peers ids {sorted(peers)}")
    config = DLedgerConfig(group=args.group, self_id=args.self_id, peers=args.peers,
                           preferred_leader_ids=args.preferred_leader_ids)
    member = DLedgerMember(config, control_port=args.control_port)
    os.makedirs(args.store_dir, exist_ok=True)

    def boot_line() -> str:
        return (f"The dledger member {args.group}/{args.self_id} boot success. peer={peers[args.self_id]} "
                f"control={CONTROL_HOST}:{member.control_port} pid={os.getpid()}")

    return run_process(member, args.self_id, store_dir=args.store_dir,
                       logs_dir=args.logs_dir or os.path.join(args.store_dir, "logs"),
                       boot_line=boot_line, trace_path=args.trace, role="dledger")


if __name__ == "__main__":
    raise SystemExit(main())
