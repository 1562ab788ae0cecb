"""JupyterLab as `rmqlab lab` and Binder start it does not ask "get notified about official Jupyter
news?" (a toast over the labs' figures): the setting @jupyterlab/apputils-extension:notification
fetchNews is "false" through an overrides.json of the app settings.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.process_helpers import stop

pytestmark = pytest.mark.real

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN = "@jupyterlab/apputils-extension:notification"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rmqlab_lab_serves_fetch_news_false(tmp_path):
    port, token = _free_port(), "rmqlab-test-token"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "RMQLAB_"))}
    env.update(HOME=str(tmp_path / "home"), JUPYTER_TOKEN=token, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", "lab", "--no-browser", "--port", str(port)],
                            env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
            time.sleep(0.5)
        with urllib.request.urlopen(f"{base}/lab/api/settings/{PLUGIN}?token={token}", timeout=10) as r:
            answer = json.load(r)
    finally:
        stop(proc)
        log.close()
    # The overrides become the schema's defaults; the user has set nothing.
    assert answer["schema"]["properties"]["fetchNews"]["default"] == "false"
    assert "fetchNews" not in answer["settings"]


def test_binder_post_build_installs_the_same_overrides(tmp_path):
    repo, prefix, bin_dir = tmp_path / "repo", tmp_path / "prefix", tmp_path / "bin"
    shutil.copytree(os.path.join(ROOT, "binder"), repo / "binder")
    bin_dir.mkdir()
    # postBuild's `pip install -e .` is repo2docker's business; here pip only records its arguments.
    (bin_dir / "pip").write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'pip-args'}\n")
    (bin_dir / "pip").chmod(0o755)
    env = {**os.environ, "NB_PYTHON_PREFIX": str(prefix), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "binder/postBuild"], cwd=str(repo), env=env, check=True, timeout=60)
    assert (tmp_path / "pip-args").read_text().split() == ["install", "--no-deps", "-e", "."]
    installed = json.loads((prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json").read_text())
    assert installed[PLUGIN]["fetchNews"] == "false"
    from rmqlab.lab.launcher import SETTINGS_DIR

    with open(os.path.join(SETTINGS_DIR, "overrides.json")) as f:
        assert installed == json.load(f)  # Binder and `rmqlab lab` run with the same settings
