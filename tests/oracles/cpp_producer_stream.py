"""Runs inside the C++ client's venv: send_sync one message after another, INTERVAL_MS apart, until
the file STOP_FILE exists or MAX_SECONDS passed; one JSON line per send, with its wall-clock start
and end (seconds), so a caller can place each result against a fault it injected meanwhile.

A send that fails with "No route info of this topic" is tried again (at most twice, 0.2 s apart;
its line lists the earlier errors under "client_retries"): rocketmq-client-cpp also reports that
for a race of its own with its heartbeat thread, without a byte reaching any broker
(tests/oracles/cpp_producer.py says more)."""
import json
import os
import sys
import time

from rocketmq.client import Message, Producer

namesrv, topic, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
interval_s, stop_file, max_seconds = float(sys.argv[4]) / 1000, sys.argv[5], float(sys.argv[6])
producer = Producer(f"PID-{prefix}")
producer.set_namesrv_addr(namesrv)
producer.start()
deadline = time.monotonic() + max_seconds
i = 0
try:
    while not os.path.exists(stop_file) and time.monotonic() < deadline:
        msg = Message(topic)
        msg.set_keys(f"{prefix}-key-{i}")
        msg.set_tags("TagA" if i % 2 == 0 else "TagB")
        msg.set_body(f"{prefix} body {i}")
        msg.set_property("seq", str(i))
        start = time.time()
        retries = []
        while True:
            try:
                r = producer.send_sync(msg)
                line = {"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset}
            except Exception as e:  # the C++ client raises once its retries are spent
                if "No route info of this topic" in str(e) and len(retries) < 2:
                    retries.append(str(e)[:300])
                    time.sleep(0.2)
                    continue
                line = {"error": str(e)[:300]}
            break
        if retries:
            line["client_retries"] = retries
        print(json.dumps({"i": i, "start": start, "end": time.time(), **line}), flush=True)
        i += 1
        time.sleep(interval_s)
finally:
    producer.shutdown()
