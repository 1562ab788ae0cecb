"""Runs inside the C++ client's venv: push-consume TOPIC; the listener raises on the first delivery
of each message (the wrapper answers the C++ core RECONSUME_LATER for an exception, and the core
sends the message back with CONSUMER_SEND_MSG_BACK) and returns normally afterwards. Stops once
EXPECTED distinct keys were consumed successfully, or after SECONDS; one JSON line per delivery."""
import json
import sys
import threading

from rocketmq.client import PushConsumer

namesrv, topic, group, expected, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
attempts = {}
succeeded = set()
lock = threading.Lock()
done = threading.Event()


class FirstDeliveryFails(Exception):
    pass


def on_message(msg):
    with lock:
        key = msg.keys.decode()
        attempts[key] = attempts.get(key, 0) + 1
        attempt = attempts[key]
        print(json.dumps({"keys": key, "attempt": attempt, "topic": msg.topic, "body": msg.body.decode(),
                          "reconsume_times": msg.reconsume_times, "queue_id": msg.queue_id,
                          "retry_topic": (msg.get_property("RETRY_TOPIC") or b"").decode(),
                          "origin_msg_id": (msg.get_property("ORIGIN_MESSAGE_ID") or b"").decode()}), flush=True)
        if attempt > 1:
            succeeded.add(key)
            if len(succeeded) >= expected:
                done.set()
    if attempt == 1:
        raise FirstDeliveryFails(key)


consumer = PushConsumer(group)
consumer.set_namesrv_addr(namesrv)
consumer.subscribe(topic, on_message)
consumer.start()
try:
    done.wait(seconds)
finally:
    consumer.shutdown()
