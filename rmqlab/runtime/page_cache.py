"""The crash model: what survives a process crash and what survives a machine crash.

Theory of operation
-------------------
RocketMQ appends to memory-mapped files (MappedByteBuffer). A write lands in the OS page cache;
`flush` (msync/force) makes it durable. So:

* a **process crash** (kill -9) loses nothing that was written: the page cache belongs to the
  kernel, which writes it back later;
* a **machine crash** (power loss) loses every byte after the last flush.

rmqlab writes through real `mmap` mappings too, so a process crash behaves exactly like RocketMQ's
on both runtimes. A machine crash cannot be produced for real without crashing the machine, so the
store keeps a small *durability ledger*: for each file it is still writing, how far that file is
durable. `crash_machine(root)` — run after the process is gone — cuts every tracked file back to its
durable length (re-extended with zeros, as an unwritten region of a pre-allocated mapped file reads)
and restores in-place files (the checkpoint) to their last flushed content. Optionally a random
prefix of the unflushed bytes survives ("torn" write-back), which is how torn messages arise.

Deviations from a real kernel, on purpose:
* Write-back is modelled as in-order (a durable prefix plus at most a torn prefix of the rest),
  not arbitrary dirty pages. RocketMQ's recovery only ever has to handle a bad *tail* then.
* Files present when a store opens are taken as durable: between a crash and the restart the
  kernel would have written the page cache back (dirty pages expire within ~30 s).

The ledger is `<storePathRootDir>/.rmqlab-durability.json`, an rmqlab file RocketMQ does not have.

The page cache is the machine's (the kernel's), not the store's, so this model is part of the
runtime: the store (rmqlab.store) writes through it, and both runtimes' nemeses apply a machine
crash with `crash_machine_disk`. It is not a hook the store registers: on the real runtime the crash
is applied by the managing process after the node's process is gone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

LEDGER_NAME = ".rmqlab-durability.json"


class PageCache:
    """Durability ledger of one store directory (see module docstring)."""

    def __init__(self, root_dir: str):
        self.root_dir = root_dir
        self.ledger_path = os.path.join(root_dir, LEDGER_NAME)
        # relative path -> {"append": durable_len} or {"snapshot": hex of the durable content}
        self._entries: dict[str, dict] = {}
        os.makedirs(root_dir, exist_ok=True)
        # Opening a store means the previous state is durable (see module docstring).
        self._save()

    def _rel(self, path: str) -> str:
        return os.path.relpath(path, self.root_dir)

    def track_append(self, path: str, durable_len: int) -> None:
        """An append-only file: bytes at or beyond `durable_len` are lost by a machine crash."""
        key = self._rel(path)
        entry = {"append": durable_len}
        if self._entries.get(key) != entry:
            self._entries[key] = entry
            self._save()

    def track_snapshot(self, path: str, durable_content: bytes) -> None:
        """An in-place file: a machine crash restores exactly `durable_content`."""
        self._entries[self._rel(path)] = {"snapshot": durable_content.hex()}
        self._save()

    def untrack(self, path: str) -> None:
        if self._entries.pop(self._rel(path), None) is not None:
            self._save()

    def _save(self) -> None:
        # Not fsync'd: the ledger only has to outlive the *process*; the machine crash it describes
        # is emulated, so the real page cache keeps it.
        tmp = self.ledger_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._entries, f, sort_keys=True)
        os.replace(tmp, self.ledger_path)


def crash_machine(root_dir: str, torn_bytes: Callable[[str, int], int] | None = None) -> dict[str, int]:
    """Emulate a power loss of the machine holding `root_dir` (its store process must be gone).

    `torn_bytes(relpath, unflushed_len)` may return how many of a file's unflushed bytes happened to
    reach the disk anyway (0 ≤ n ≤ unflushed_len); by default none do. Returns, per file, how many
    bytes were lost. Call it only after the store was killed (`DefaultMessageStore.kill()`).
    """
    ledger_path = os.path.join(root_dir, LEDGER_NAME)
    if not os.path.exists(ledger_path):
        return {}
    with open(ledger_path) as f:
        entries = json.load(f)
    lost: dict[str, int] = {}
    for rel, entry in sorted(entries.items()):
        path = os.path.join(root_dir, rel)
        if not os.path.exists(path):
            continue
        if "snapshot" in entry:
            with open(path, "r+b") as f:
                f.write(bytes.fromhex(entry["snapshot"]))
                f.flush()
            continue
        durable = entry["append"]
        size = os.path.getsize(path)
        written = _written_length(path, durable)
        unflushed = max(0, written - durable)
        keep = durable
        if torn_bytes is not None and unflushed:
            keep += max(0, min(unflushed, int(torn_bytes(rel, unflushed))))
        lost[rel] = written - keep if written > keep else 0
        # Truncate then re-extend: the lost region reads back as zeros, like an unwritten page of a
        # pre-allocated mapped file, and no data beyond `keep` can leak through.
        os.truncate(path, keep)
        os.truncate(path, size)
    os.remove(ledger_path)
    return lost


def crash_machine_disk(disk_dir: str, torn_bytes: Callable[[str, int], int] | None = None) -> int:
    """A machine crash of the node whose disk is `disk_dir` (its process gone): `crash_machine` on
    every store root under it (a directory holding a ledger), in path order. The bytes lost."""
    lost = 0
    for root, _dirs, files in sorted(os.walk(disk_dir)):
        if LEDGER_NAME in files:
            lost += sum(crash_machine(root, torn_bytes).values())
    return lost


def _written_length(path: str, start: int) -> int:
    """End of the non-zero data in `path` at or after `start` (files are zero-filled beyond it).

    Mapped files are sparse, so only the allocated extents (SEEK_DATA/SEEK_HOLE) are read.
    """
    end = start
    chunk = 1 << 20
    with open(path, "rb") as f:
        fd = f.fileno()
        pos = start
        while True:
            try:
                data_start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after pos
                break
            hole = os.lseek(fd, data_start, os.SEEK_HOLE)
            while data_start < hole:
                f.seek(data_start)
                data = f.read(min(chunk, hole - data_start))
                stripped = data.rstrip(b"\0")
                if stripped:
                    end = data_start + len(stripped)
                data_start += len(data)
            pos = hole
    return end
