"""Runs inside the C++ client's venv: an orderly push consumer (PushConsumer(group, orderly=True):
MessageListenerOrderly, queue locks at the broker) on TOPIC until EXPECTED distinct keys arrived
or SECONDS passed; one JSON line per delivery, with the time it was handed over. A first line
{"started": true} once start() returned."""
import json
import sys
import threading
import time

from rocketmq.client import PushConsumer

namesrv, topic, group, expected, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
seen = set()
lock = threading.Lock()
done = threading.Event()


def on_message(msg):
    with lock:
        print(json.dumps({"keys": msg.keys.decode(), "seq": int(msg.get_property("seq").decode()),
                          "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
                          "reconsume_times": msg.reconsume_times, "time": time.time(),
                          "thread": threading.get_ident()}), flush=True)
        seen.add(msg.keys)
        if len(seen) >= expected:
            done.set()


consumer = PushConsumer(group, orderly=True)
consumer.set_namesrv_addr(namesrv)
consumer.subscribe(topic, on_message)
consumer.start()
print(json.dumps({"started": True, "time": time.time()}), flush=True)
try:
    done.wait(seconds)
finally:
    consumer.shutdown()
