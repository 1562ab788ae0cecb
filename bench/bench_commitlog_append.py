"""CommitLog append throughput (ASYNC_FLUSH, 1 KiB bodies) beside a raw sequential write of the same bytes.

    .venv/bin/python bench/bench_commitlog_append.py [--messages 100000] [--rounds 5]

Each round: (1) append N messages through DefaultMessageStore.put_message (encode, CRC, queue
offset, mmap write; the flush service is not run, as between two ASYNC_FLUSH flushes); (2) write
the exact bytes the commitlog holds to a fresh file with one buffered `write` per message, then
fsync neither (the same page-cache-only state). Rounds alternate, and the script prints the median
rate of each and their ratio. The target: the CommitLog reaches >= 20% of the raw rate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from rmqlab.common.manual_clock import ManualClock
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.common.message.message_decoder import message_properties_to_string
from rmqlab.config.broker import MessageStoreConfig
from rmqlab.store import DefaultMessageStore


def make_messages(n: int) -> list[MessageExtBrokerInner]:
    out = []
    for i in range(n):
        m = MessageExtBrokerInner(topic="BenchTopic", body=(b"%08d" % i) * 128)  # 1 KiB
        m.tags = "TagA"
        m.keys = f"k{i}"
        m.queue_id = i % 8
        m.born_timestamp = 1_700_000_000_000 + i
        m.born_host = ("127.0.0.1", 50000)
        # The broker serializes the properties once (SendMessageProcessor); the store writes the
        # string as given, so it is set here as the broker would before calling the store.
        m.properties_string = message_properties_to_string(m.properties)
        out.append(m)
    return out


def run_store(root: str, messages) -> tuple[float, list[bytes]]:
    clock = ManualClock()
    store = DefaultMessageStore(MessageStoreConfig(storePathRootDir=root), clock=clock)
    store.load()
    t0 = time.perf_counter()
    for m in messages:
        store.put_message(m)
    elapsed = time.perf_counter() - t0
    records = []
    mf = store.commit_log.mapped_file_queue.mapped_files[0]
    data = mf.read(0, mf.wrote_position)
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        records.append(data[pos:pos + size])
        pos += size
    store.kill()
    return elapsed, records


def run_raw(path: str, records: list[bytes]) -> float:
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for r in records:
            f.write(r)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    messages = make_messages(args.messages)
    store_times, raw_times = [], []
    total_bytes = 0
    for _ in range(args.rounds):
        tmp = tempfile.mkdtemp(prefix="rmqlab-bench-")
        try:
            t_store, records = run_store(os.path.join(tmp, "store"), messages)
            assert len(records) == args.messages
            total_bytes = sum(len(r) for r in records)
            t_raw = run_raw(os.path.join(tmp, "raw"), records)
        finally:
            shutil.rmtree(tmp)
        store_times.append(t_store)
        raw_times.append(t_raw)
    store_rate = args.messages / statistics.median(store_times)
    raw_rate = args.messages / statistics.median(raw_times)
    print(f"python {sys.version.split()[0]}, {args.messages} messages x {args.rounds} rounds, "
          f"{total_bytes / args.messages:.0f} bytes per record")
    print(f"commitlog append (ASYNC_FLUSH): {store_rate:,.0f} msg/s  ({store_rate * total_bytes / args.messages / 2**20:,.1f} MiB/s)")
    print(f"raw sequential write         : {raw_rate:,.0f} msg/s  ({raw_rate * total_bytes / args.messages / 2**20:,.1f} MiB/s)")
    print(f"ratio commitlog / raw        : {store_rate / raw_rate:.1%}  (target >= 20%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
