"""Runs inside the C++ client's venv: push-consume TOPIC as GROUP until every key listed in KEYS_FILE
(one a line) has arrived, or SECONDS passed; one JSON line per delivery (any key). The consumer
starts at once; KEYS_FILE may appear later (written by a caller that learns the keys meanwhile)."""
import json
import os
import sys
import threading
import time

from rocketmq.client import PushConsumer

namesrv, topic, group, keys_file, seconds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
deadline = time.monotonic() + seconds
seen = set()
lock = threading.Lock()


def on_message(msg):
    keys = msg.keys.decode()
    with lock:
        print(json.dumps({"t": time.time(), "id": msg.id, "keys": keys, "tags": msg.tags.decode(),
                          "body": msg.body.decode(), "seq": msg.get_property("seq").decode(),
                          "queue_id": msg.queue_id, "queue_offset": msg.queue_offset}), flush=True)
        seen.add(keys)
    # A normal return is CONSUME_SUCCESS for the wrapper.


consumer = PushConsumer(group)
consumer.set_namesrv_addr(namesrv)
consumer.subscribe(topic, on_message)
consumer.start()
try:
    expected = None
    while time.monotonic() < deadline:
        if expected is None and os.path.exists(keys_file):
            with open(keys_file) as f:
                expected = {line.strip() for line in f if line.strip()}
        if expected is not None:
            with lock:
                if expected <= seen:
                    break
        time.sleep(0.05)
finally:
    consumer.shutdown()
