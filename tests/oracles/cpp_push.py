"""Runs inside the C++ client's venv: push-consume TOPIC until EXPECTED distinct keys arrived or
SECONDS passed; one JSON line per delivery."""
import json
import sys
import threading

from rocketmq.client import PushConsumer

namesrv, topic, group, expected, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
seen = set()
lock = threading.Lock()
done = threading.Event()


def on_message(msg):
    with lock:
        print(json.dumps({"id": msg.id, "keys": msg.keys.decode(), "tags": msg.tags.decode(), "body": msg.body.decode(),
                          "seq": msg.get_property("seq").decode(), "queue_id": msg.queue_id,
                          "queue_offset": msg.queue_offset}), flush=True)
        seen.add(msg.keys)
        if len(seen) >= expected:
            done.set()
    # The wrapper treats a normal return as CONSUME_SUCCESS and an exception as RECONSUME_LATER.


consumer = PushConsumer(group)
consumer.set_namesrv_addr(namesrv)
consumer.subscribe(topic, on_message)
consumer.start()
try:
    done.wait(seconds)
finally:
    consumer.shutdown()
