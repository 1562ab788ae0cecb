"""Three DLedger members as OS processes on 127.0.0.1 (rmqlab.dledger.dledger_member): an election,
an append replicated over TCP, and a new leader with a larger term after kill -9 of the leader."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Members:
    def __init__(self, tmp_path: pathlib.Path):
        self.names = ["n0", "n1", "n2"]
        ports = free_ports(6)
        self.peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in zip(self.names, ports[:3]))
        self.control = dict(zip(self.names, ports[3:]))
        self.tmp = tmp_path
        self.procs: dict[str, subprocess.Popen] = {}

    def spawn(self, name: str) -> None:
        cmd = [sys.executable, "-m", "rmqlab.dledger.dledger_member", "--group", "g0", "--self", name,
               "--peers", self.peers, "--control-port", str(self.control[name]), "--store-dir",
               str(self.tmp / name)]
        with open(self.tmp / f"{name}.out", "a") as log:
            self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                                stdout=log, stderr=subprocess.STDOUT)

    def request(self, name: str, req: dict, timeout: float) -> dict:
        with socket.create_connection(("127.0.0.1", self.control[name]), timeout=timeout) as s:
            s.sendall(json.dumps(req).encode() + b"\n")
            return json.loads(s.makefile("r").readline())

    def status(self, name: str) -> dict | None:
        try:
            return self.request(name, {"op": "status"}, timeout=1.0)["status"]
        except (OSError, ValueError):
            return None

    def agreed(self, names) -> str | None:
        views = [self.status(n) for n in names]
        if any(v is None for v in views) or len({v["leader"] for v in views}) != 1:
            return None
        leader = views[0]["leader"]
        if leader not in names or views[list(names).index(leader)]["role"] != "LEADER":
            return None
        return leader

    @staticmethod
    def wait(predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate()
            if result:
                return result
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(timeout=10)

    def output(self) -> str:
        return "\n".join(f"--- {n}\n" + (self.tmp / f"{n}.out").read_text()[-3000:] for n in self.procs)


@pytest.mark.real
def test_real_three_members_elect_replicate_and_fail_over(tmp_path):
    members = Members(tmp_path)
    try:
        for name in members.names:
            members.spawn(name)
        first = members.wait(lambda: members.agreed(members.names), 30, "a leader")
        first_term = members.status(first)["term"]
        appended = members.request(first, {"op": "append", "body": "hello"}, timeout=10)
        assert appended["ok"] and appended["code_name"] == "SUCCESS" and appended["index"] == 0, appended
        # Acknowledged means a majority has it; soon every member has it.
        members.wait(lambda: all((members.status(n) or {}).get("ledger_end_index") == 0 for n in members.names),
                     10, "the entry on every member")
        followers = [n for n in members.names if n != first]
        refused = members.request(followers[0], {"op": "append", "body": "no"}, timeout=10)
        assert refused["code_name"] == "NOT_LEADER", refused

        os.kill(members.procs[first].pid, signal.SIGKILL)
        killed = time.monotonic()
        second = members.wait(lambda: members.agreed(followers), 40, "a new leader")
        failover = time.monotonic() - killed
        assert members.status(second)["term"] > first_term
        again = members.request(second, {"op": "append", "body": "after"}, timeout=10)
        assert again["ok"] and again["code_name"] == "SUCCESS" and again["index"] == 1, again
        members.wait(lambda: all((members.status(n) or {}).get("ledger_end_index") == 1 for n in followers),
                     10, "the second entry on both survivors")
        print(f"\nreal: leader {first} (term {first_term}); after kill -9 {second} leads "
              f"(term {members.status(second)['term']}) {failover:.2f} s later")
    except AssertionError:
        print(members.output())
        raise
    finally:
        members.close()
