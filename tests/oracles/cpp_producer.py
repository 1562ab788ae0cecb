"""Runs inside the C++ client's venv: send COUNT messages with send_sync; one JSON line each."""
import json
import sys

from rocketmq.client import Message, Producer

namesrv, topic, count, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
producer = Producer(f"PID-{prefix}")
producer.set_namesrv_addr(namesrv)
producer.start()
try:
    for i in range(count):
        msg = Message(topic)
        msg.set_keys(f"{prefix}-key-{i}")
        msg.set_tags("TagA" if i % 2 == 0 else "TagB")
        msg.set_body(f"{prefix} body {i}")
        msg.set_property("seq", str(i))
        try:
            r = producer.send_sync(msg)
            print(json.dumps({"i": i, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset}), flush=True)
        except Exception as e:  # the C++ client raises on a failed send after its retries
            print(json.dumps({"i": i, "error": str(e)}), flush=True)
finally:
    producer.shutdown()
