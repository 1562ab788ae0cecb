"""Runs inside the C++ client's venv: send COUNT messages with send_orderly, message i with the
sharding key i mod ORDERS (the wrapper's hashing_queue_selector: queue = key mod queue count);
one JSON line each."""
import json
import sys

from rocketmq.client import Message, Producer

namesrv, topic, count, orders, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
producer = Producer(f"PID-{prefix}")
producer.set_namesrv_addr(namesrv)
producer.start()
try:
    for i in range(count):
        msg = Message(topic)
        msg.set_keys(f"{prefix}-key-{i}")
        msg.set_body(f"{prefix} body {i}")
        msg.set_property("seq", str(i))
        try:
            r = producer.send_orderly(msg, i % orders)
            line = {"i": i, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset}
        except Exception as e:
            line = {"i": i, "error": str(e)}
        print(json.dumps(line), flush=True)
finally:
    producer.shutdown()
