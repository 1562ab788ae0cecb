"""Runs inside the C++ client's venv: pull every queue of TOPIC from offset 0 to its end through the
C++ Pull API; one JSON line per message (with its queue's broker name), then one {"end": ...} line
per queue.

The wrapper's own PullConsumer.pull() is not used: it keys its offsets by topic@queueId, so with
two brokers one broker's queue starts where the other's stopped, and it ends a queue only on
PULL_NOT_FOUND. A slave whose master is away answers the end of a queue with
PULL_RETRY_IMMEDIATELY (NO_MATCHED_MSG here, nextBeginOffset = maxOffset) instead, so that is an end
too. Bounded by SECONDS.
"""
import ctypes
import json
import sys
import time

from rocketmq.client import PullConsumer, RecvMessage
from rocketmq.exceptions import ffi_check
from rocketmq.ffi import _CMessageQueue, _CPullStatus, dll

namesrv, topic, group, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + seconds
consumer = PullConsumer(group)
consumer.set_namesrv_addr(namesrv)
consumer.start()
try:
    queues = ctypes.POINTER(_CMessageQueue)()
    size = ctypes.c_int()
    ffi_check(dll.FetchSubscriptionMessageQueues(consumer._handle, topic.encode(), ctypes.pointer(queues),
                                                 ctypes.pointer(size)))
    for q in range(size.value):
        mq = queues[q]
        broker, offset, end = mq.brokerName.decode(), 0, None
        while end is None and time.monotonic() < deadline:
            result = dll.Pull(consumer._handle, ctypes.pointer(mq), b"*", offset, 32)
            status = result.pullStatus
            if status == _CPullStatus.FOUND:
                for i in range(result.size):
                    msg = RecvMessage(result.msgFoundList[i])
                    print(json.dumps({"broker": broker, "id": msg.id, "keys": msg.keys.decode(),
                                      "tags": msg.tags.decode(), "body": msg.body.decode(),
                                      "seq": msg.get_property("seq").decode(), "queue_id": msg.queue_id,
                                      "queue_offset": msg.queue_offset}), flush=True)
            elif status == _CPullStatus.NO_NEW_MSG or (status == _CPullStatus.NO_MATCHED_MSG
                                                      and result.nextBeginOffset >= result.maxOffset):
                end = status
            if status != _CPullStatus.BROKER_TIMEOUT:
                offset = result.nextBeginOffset
            dll.ReleasePullResult(result)
        print(json.dumps({"end": end, "broker": broker, "queue_id": mq.queueId, "offset": offset}), flush=True)
    ffi_check(dll.ReleaseSubscriptionMessageQueue(queues))
finally:
    consumer.shutdown()
