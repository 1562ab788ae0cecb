"""Transactional messages through the Proxy with Apache's own 5.x client: PyPI
`rocketmq-python-client` 5.1.2's Producer with a TransactionChecker (tests/oracles/
py5_transaction.py, in its own venv, bounded in time), against real processes on 127.0.0.1 in both
Proxy modes, stopped by PID (Cluster.close). Commit delivered, rollback never delivered, the
transaction left open resolved by the broker's check, relayed by the Proxy as
RecoverOrphanedTransactionCommand and answered by the checker (EndTransaction, SOURCE_SERVER_CHECK).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from rmqlab.cluster import Cluster
from tests.oracles import SCRIPTS, oracle_env, python5_client_python
from tests.proxy_helpers import py5

pytestmark = pytest.mark.real

TOPIC = "ProxyTxRealTopic"
# RocketMQ's broker keys, shortened: a half message is checked 1 s after it was stored, at the
# next 2 s round (defaults 6 s and 30 s).
FAST = {"transactionCheckInterval": 2000, "transactionTimeOut": 1000, "transactionOpBatchInterval": 200}


def transact(home: str, endpoint: str, prefix: str) -> list[dict]:
    proc = subprocess.run([python5_client_python(), os.path.join(SCRIPTS, "py5_transaction.py"), "transact",
                           endpoint, TOPIC, prefix, "40"], capture_output=True, text=True, timeout=90,
                          env=oracle_env(home))
    assert proc.returncode == 0, f"oracle failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_official_client_commit_rollback_and_check(mode, tmp_path):
    python5_client_python()  # create the venv before the clock of any server starts
    c = Cluster("single-master", runtime="real", root_dir=str(tmp_path / "c"), proxy=mode,
                relay=(mode == "cluster"), overrides={"*": FAST})
    try:
        c.start()
        c.create_topic(TOPIC, message_type="TRANSACTION")
        home = str(tmp_path / "home")
        os.makedirs(home)
        endpoint = c.proxy_endpoints[0]
        lines = transact(home, endpoint, mode)
        sent = {line["sent"]: line for line in lines if "sent" in line}
        assert all("error" not in s for s in sent.values()), sent
        assert all(s["transaction_id"] for s in sent.values())
        ended = [line for line in lines if "ended" in line]
        assert ended == [{"ended": "commit", "resolution": "commit"}, {"ended": "rollback", "resolution": "rollback"}]
        checked = [line for line in lines if "checked" in line]
        assert checked and {ch["checked"] for ch in checked} == {sent["unknown"]["message_id"]}, checked
        # Consume: the committed and the checked one, once each; the rolled-back one never (the
        # consumer waits its whole window for a third message).
        received = py5(home, "simple", endpoint, TOPIC, "GID_tx_real", "3", "15", "ack", "25", timeout=60)
        bodies = sorted(r["body"] for r in received if r.get("acked"))
        assert bodies == [f"{mode}-commit", f"{mode}-unknown"], received
        # The broker ended the open one from the check (fromTransactionCheck), the others from the client.
        ends = {e.fields["uniq_key"]: e.fields.get("from_transaction_check") for e in c.events()
                if e.kind == "state" and e.fields.get("machine") == "TransactionalMessage.half"
                and e.fields.get("to") in ("COMMITTED", "ROLLED_BACK")}
        assert ends == {sent["commit"]["message_id"]: False, sent["rollback"]["message_id"]: False,
                        sent["unknown"]["message_id"]: True}, ends
    finally:
        c.close()
