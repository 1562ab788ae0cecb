"""Runs inside the C++ client's venv: pull every queue of TOPIC until empty; one JSON line per message."""
import json
import sys

from rocketmq.client import PullConsumer

namesrv, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
consumer = PullConsumer(group)
consumer.set_namesrv_addr(namesrv)
consumer.start()
try:
    for msg in consumer.pull(topic):
        print(json.dumps({"id": msg.id, "tags": msg.tags.decode(), "keys": msg.keys.decode(),
                          "body": msg.body.decode(), "seq": msg.get_property("seq").decode(),
                          "queue_id": msg.queue_id, "queue_offset": msg.queue_offset}), flush=True)
finally:
    consumer.shutdown()
