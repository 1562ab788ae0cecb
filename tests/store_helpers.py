"""Helpers shared by the store tests: a small-file store on a manual clock, and message factories."""

from __future__ import annotations

from rmqlab.common.manual_clock import ManualClock
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.config import MessageStoreConfig
from rmqlab.store import DefaultMessageStore

SMALL_COMMITLOG = 16 * 1024  # 4 OS pages: rolling happens every dozen or so 1 KiB messages
SMALL_CQ = 20 * 50


def store_config(root, **overrides) -> MessageStoreConfig:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=SMALL_COMMITLOG,
                             mappedFileSizeConsumeQueue=SMALL_CQ)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def open_store(root, clock: ManualClock, **overrides) -> tuple[DefaultMessageStore, object]:
    store = DefaultMessageStore(store_config(root, **overrides), clock=clock)
    report = store.load()
    return store, report


def make_message(clock, i: int, *, topic: str = "TopicTest", queue_id: int = 0, body_size: int = 1000,
                 tags: str = "TagA") -> MessageExtBrokerInner:
    body = (f"message-{i:06d}-".encode() * (body_size // 15 + 1))[:body_size]
    m = MessageExtBrokerInner(topic=topic, body=body)
    m.tags = tags
    m.keys = f"key-{i}"
    m.put_property("UNIQ_KEY", f"UNIQ{i:08d}")
    m.queue_id = queue_id
    m.born_timestamp = clock()
    m.born_host = ("127.0.0.1", 50000)
    return m


def read_queue(store, topic: str, queue_id: int) -> list:
    """Every message readable from a queue, decoded (CRC-checked), in queue order."""
    out, offset = [], store.get_min_offset_in_queue(topic, queue_id)
    while True:
        r = store.get_message("g", topic, queue_id, offset, 32)
        if not r.message_buffers:
            return out
        out.extend(r.messages())
        offset = r.next_begin_offset
