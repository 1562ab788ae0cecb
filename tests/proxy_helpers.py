"""The official Python 5.x client as an oracle (tests/oracles/py5_client.py) and the controller's view
of a SyncStateSet, for the Proxy tests and bench/.
"""

from __future__ import annotations

import json
import os
import subprocess

from rmqlab.cluster import Cluster
from tests.deployment_helpers import admin_call
from tests.oracles import SCRIPTS, oracle_env, python5_client_python


def py5(home: str, *args: str, timeout: float = 120) -> list[dict]:
    """Run the oracle; its JSON lines (stderr shown when it fails)."""
    proc = subprocess.run([python5_client_python(), os.path.join(SCRIPTS, "py5_client.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=oracle_env(home))
    assert proc.returncode == 0, f"oracle {args[0]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def start_py5(home: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([python5_client_python(), os.path.join(SCRIPTS, "py5_client.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=oracle_env(home))


def in_sync_replicas(c: Cluster) -> int:
    """How many live replicas broker-a's SyncStateSet holds, by the controller leader."""
    async def fn(admin):
        meta = await admin.get_controller_meta_data(c.controller_addr)
        info = await admin.get_in_sync_state_data(meta.controller_leader_address, ["broker-a"])
        replicas = info.replicas_info_table["broker-a"]
        return sum(1 for r in replicas.in_sync_replicas if r.alive) if replicas.master_address else 0
    return admin_call(c.namesrv_addr, fn)
