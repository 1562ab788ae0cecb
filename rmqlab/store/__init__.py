"""The storage engine, byte-compatible with RocketMQ's store.

Layout mirrors org.apache.rocketmq.store: MappedFile / MappedFileQueue, CommitLog, ConsumeQueue,
ReputMessageService (dispatcher), flush services, StoreCheckpoint, DefaultMessageStore (the
façade with recovery), and the controller-mode EpochFileCache. `page_cache` is rmqlab's crash
model (process crash vs machine crash) and `crash_points` stops the store after its n-th file
operation, for crash tests.
"""

from rmqlab.store.default_message_store import DefaultMessageStore, StoreLoadReport
from rmqlab.store.epoch_file_cache import EpochEntry, EpochFileCache
from rmqlab.store.get_message_result import GetMessageResult, GetMessageStatus
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

__all__ = ["DefaultMessageStore", "StoreLoadReport", "EpochEntry", "EpochFileCache",
           "GetMessageResult", "GetMessageStatus", "PutMessageResult", "PutMessageStatus"]
