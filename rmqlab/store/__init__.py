"""The storage engine, byte-compatible with RocketMQ's store.

Layout mirrors org.apache.rocketmq.store: MappedFile / MappedFileQueue, CommitLog, ConsumeQueue,
ReputMessageService (dispatcher), flush services, StoreCheckpoint, DefaultMessageStore (the
façade with recovery), and the controller-mode EpochFileCache. The files are written through
rmqlab's crash model, the machine's page cache (rmqlab.runtime.page_cache: process crash vs machine
crash), and `crash_points` stops the store after its n-th file operation, for crash tests.
"""

from rmqlab.store.default_message_store import DefaultMessageStore, StoreLoadReport
from rmqlab.store.epoch_file_cache import EpochFileCache
from rmqlab.store.get_message_result import GetMessageResult, GetMessageStatus
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

__all__ = ["DefaultMessageStore", "StoreLoadReport", "EpochFileCache",
           "GetMessageResult", "GetMessageStatus", "PutMessageResult", "PutMessageStatus"]
