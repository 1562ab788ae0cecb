"""Runs inside the C++ client's venv: send COUNT messages with send_sync; one JSON line each (with
the time the send started and ended). An optional DELAY_LEVEL makes them delayed messages.

A send that fails with "No route info of this topic" is tried again (at most twice, 0.2 s apart) and
its line lists the earlier errors under "client_retries". That error is also what rocketmq-client-cpp
2.x reports for a race of its own: while its heartbeat thread connects to a broker it holds the
transport table's timed_mutex, and the send thread's GetTransport gives up at once ("get timed_mutex
timeout" in the client's log, TcpRemotingClient::CreateTransport), so every retry of sendDefaultImpl
fails within a millisecond without a byte reaching any broker.
"""
import json
import sys
import time

from rocketmq.client import Message, Producer

namesrv, topic, count, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
delay_level = int(sys.argv[5]) if len(sys.argv) > 5 else 0
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
        if delay_level:
            msg.set_delay_time_level(delay_level)
        retries = []
        while True:
            start = time.time()
            try:
                r = producer.send_sync(msg)
                line = {"i": i, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset}
            except Exception as e:  # the C++ client raises on a failed send after its retries
                if "No route info of this topic" in str(e) and len(retries) < 2:
                    retries.append(str(e))
                    time.sleep(0.2)
                    continue
                line = {"i": i, "error": str(e)}
            line |= {"start": start, "end": time.time()}
            print(json.dumps(line | ({"client_retries": retries} if retries else {})), flush=True)
            break
finally:
    producer.shutdown()
