"""Configuration files for real processes (conf/ templates written as key=value files), the C++
oracle scripts run in the background and their JSON lines, and messages read back from a broker's
commitlog files.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess

from rmqlab.common.message import message_decoder
from rmqlab.common.message.message import MessageExt, MessageFormatError
from tests.oracles import SCRIPTS, cpp_client_python, oracle_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_conf(path, lines: dict) -> str:
    with open(path, "w") as f:
        for k, v in lines.items():
            f.write(f"{k}={v}\n")
    return str(path)


def template(name: str) -> dict:
    """A conf/ template as key=value pairs (comments dropped)."""
    out = {}
    with open(os.path.join(ROOT, "conf", name)) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


def lines(result) -> list[dict]:
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def stored_copies(store_dir: str, topic: str) -> dict[str, list[MessageExt]]:
    """`topic`'s messages in a broker's commitlog files, every copy of each key in log order (a
    client that resends after an unanswered attempt stores one key twice), read from disk. A killed
    broker's files keep what it wrote (rmqlab writes through mmap, like RocketMQ); a running broker's
    last message may still be in writing, so reading stops at the first record that does not decode."""
    out: dict[str, list[MessageExt]] = {}
    directory = os.path.join(store_dir, "commitlog")
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        with open(os.path.join(directory, name), "rb") as f:
            buf = f.read()
        pos = 0
        while pos + 8 <= len(buf) and struct.unpack_from(">i", buf, pos)[0] > 0:
            try:
                msg = message_decoder.decode(buf, pos)
            except MessageFormatError:
                break  # a BLANK filler (the file's end) or a record in writing
            if msg.topic == topic:
                out.setdefault(msg.keys, []).append(msg)
            pos += msg.store_size
    return out


class CppClient:
    """An oracle script (tests/oracles/) running in the C++ client's venv in the background, its
    JSON lines collected in a file; HOME is the test's temp dir."""

    def __init__(self, tmp_path, name: str, script: str, *args: str):
        self.path = tmp_path / f"{name}.jsonl"
        env = oracle_env(str(tmp_path / "home"))
        with open(self.path, "w") as out:
            self.proc = subprocess.Popen([cpp_client_python(), os.path.join(SCRIPTS, script), *args], stdout=out,
                                         stderr=subprocess.PIPE, text=True, env=env)

    def lines(self) -> list[dict]:
        with open(self.path) as f:  # a line still in writing has no newline yet
            return [json.loads(x) for x in f.read().split("\n")[:-1] if x.startswith("{")]

    def finish(self, timeout_s: float) -> list[dict]:
        self.proc.wait(timeout_s)
        assert self.proc.returncode == 0, self.proc.stderr.read()[-2000:]
        return self.lines()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def write_keys(path, keys) -> None:
    """The keys a consumer script (cpp_push_keys.py) waits for, written atomically (it polls for the file)."""
    path.with_suffix(".tmp").write_text("".join(k + "\n" for k in sorted(keys)))
    os.replace(path.with_suffix(".tmp"), path)
