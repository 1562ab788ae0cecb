"""Runs inside the venv of Apache's 5.x gRPC client (rocketmq-python-client 5.1.2), against a Proxy.
One JSON line per event on stdout; the caller checks them. Subcommands:

  produce ENDPOINT TOPIC COUNT PREFIX [normal|fifo|delay] [DELAY_S] [INTERVAL_S]
      send COUNT messages (tag TagA/TagB, two keys, property seq); fifo: message_group g<i%3>;
      delay: delivery_timestamp now + DELAY_S. Line: {"i", "message_id"} or {"i", "error"}.
  simple ENDPOINT TOPIC GROUP EXPECT INVISIBLE_S MODE SECONDS
      SimpleConsumer (await 5 s) receiving until EXPECT acks or SECONDS. MODE: "ack" acks at once;
      "change" first changes each message's invisible duration to INVISIBLE_S+1 and acks with the new
      handle; "skip1" leaves the first message it ever receives un-acked (it must come back after
      its invisible time). Line per received message: {"received", "message_id", "body", "tag",
      "keys", "properties", "attempt", "group", "acked"}.
  hold ENDPOINT TOPIC GROUP COUNT FLAG_FILE
      receive COUNT messages (invisible 30 s) without acking, print them, wait until FLAG_FILE exists
      (meanwhile the caller restarts the Proxy), then ack each with the handle it got before, and
      receive for 8 s more: nothing may come back. Lines: {"received", ...}, {"ack", "message_id",
      "ok"/"error"}, {"again", ...}.
  bench_produce ENDPOINT TOPIC COUNT SIZE / bench_consume ENDPOINT TOPIC GROUP COUNT
      bench/bench_proxy.py: COUNT sync sends of SIZE-byte bodies / receive (batches of 32) and ack
      COUNT messages; one line {"count", "elapsed", "errors"} timed from the first call on.
  push ENDPOINT TOPIC GROUP EXPECT SECONDS [FAIL_FIRST] [EXPECT_FILE]
      PushConsumer; FAIL_FIRST=1 returns FAILURE for each message's first attempt. Runs until EXPECT
      messages succeeded (or the number written into EXPECT_FILE, once it exists) or SECONDS. Line
      per consume call, as for simple.
"""
import json
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message, MessageListener,
                      Producer, PushConsumer, SimpleConsumer)


def out(**kv):
    print(json.dumps(kv, sort_keys=True), flush=True)


def describe(msg, **extra):
    return dict(message_id=msg.message_id, body=msg.body.decode(), tag=msg.tag, keys=sorted(msg.keys),
                properties=dict(msg.properties), attempt=msg.delivery_attempt, group=msg.message_group,
                corrupted=msg.corrupted, **extra)


def config(endpoint):
    return ClientConfiguration(endpoint, Credentials(), request_timeout=3)


def produce(endpoint, topic, count, prefix, kind="normal", delay_s="0", interval_s="0"):
    producer = Producer(config(endpoint), (topic,))
    producer.startup()
    try:
        for i in range(int(count)):
            msg = Message()
            msg.topic = topic
            msg.body = f"{prefix} body {i}".encode()
            msg.tag = "TagA" if i % 2 == 0 else "TagB"
            msg.keys = f"{prefix}-key-{i}"
            msg.add_property("seq", str(i))
            if kind == "fifo":
                msg.message_group = f"g{i % 3}"
            elif kind == "delay":
                msg.delivery_timestamp = int(time.time()) + int(delay_s)
            try:
                receipt = producer.send(msg)
                out(i=i, message_id=receipt.message_id, sent_at=time.time())
            except Exception as e:
                out(i=i, error=f"{type(e).__name__}: {e}", sent_at=time.time())
            if float(interval_s):
                time.sleep(float(interval_s))
    finally:
        producer.shutdown()


def simple(endpoint, topic, group, expect, invisible_s, mode, seconds):
    consumer = SimpleConsumer(config(endpoint), group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    acked, skipped = 0, False
    deadline = time.time() + float(seconds)
    try:
        while acked < int(expect) and time.time() < deadline:
            try:
                messages = consumer.receive(16, int(invisible_s))
            except Exception as e:
                out(error=f"receive: {type(e).__name__}: {e}")
                time.sleep(0.5)
                continue
            for msg in messages:
                if mode == "skip1" and not skipped:
                    skipped = True
                    out(received=time.time(), acked=False, **describe(msg))
                    continue
                try:
                    if mode == "change":
                        consumer.change_invisible_duration(msg, int(invisible_s) + 1)
                    consumer.ack(msg)
                    acked += 1
                    out(received=time.time(), acked=True, **describe(msg))
                except Exception as e:
                    out(received=time.time(), acked=False, error=f"{type(e).__name__}: {e}", **describe(msg))
    finally:
        consumer.shutdown()


def hold(endpoint, topic, group, count, flag_file):
    import os

    consumer = SimpleConsumer(config(endpoint), group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    held = []
    try:
        deadline = time.time() + 30
        while len(held) < int(count) and time.time() < deadline:
            for msg in consumer.receive(int(count) - len(held), 30):
                held.append(msg)
                out(received=time.time(), acked=False, **describe(msg))
        while not os.path.exists(flag_file):
            time.sleep(0.1)
        for msg in held:
            for attempt in range(20):  # the restarted Proxy may still be starting
                try:
                    consumer.ack(msg)
                    out(ack=msg.message_id, ok=True)
                    break
                except Exception as e:
                    if attempt == 19:
                        out(ack=msg.message_id, ok=False, error=f"{type(e).__name__}: {e}")
                    time.sleep(0.5)
        deadline = time.time() + 8
        while time.time() < deadline:
            try:
                for msg in consumer.receive(16, 30):
                    out(again=True, **describe(msg))
            except Exception as e:
                out(error=f"receive: {type(e).__name__}: {e}")
                time.sleep(0.5)
    finally:
        consumer.shutdown()


def bench_produce(endpoint, topic, count, size):
    producer = Producer(config(endpoint), (topic,))
    producer.startup()
    errors, first_error = 0, None
    try:
        t0 = time.perf_counter()
        for _i in range(int(count)):
            msg = Message()
            msg.topic = topic
            msg.body = bytes(int(size))
            try:
                producer.send(msg)
            except Exception as e:
                errors += 1
                first_error = first_error or f"{type(e).__name__}: {e}"
        out(count=int(count), elapsed=time.perf_counter() - t0, errors=errors, first_error=first_error)
    finally:
        producer.shutdown()


def bench_consume(endpoint, topic, group, count):
    consumer = SimpleConsumer(config(endpoint), group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got, errors = 0, 0
    try:
        t0 = time.perf_counter()
        deadline = time.time() + 300
        while got < int(count) and time.time() < deadline:
            for msg in consumer.receive(32, 30):
                try:
                    consumer.ack(msg)
                    got += 1
                except Exception:
                    errors += 1
        out(count=got, elapsed=time.perf_counter() - t0, errors=errors)
    finally:
        consumer.shutdown()


class Listener(MessageListener):
    def __init__(self, fail_first):
        self.fail_first = fail_first
        self.lock = threading.Lock()
        self.ok = set()  # message ids consumed successfully
        self.seen = set()

    def consume(self, message):
        with self.lock:
            first = message.message_id not in self.seen
            self.seen.add(message.message_id)
            if self.fail_first and first:
                out(received=time.time(), acked=False, **describe(message))
                return ConsumeResult.FAILURE
            self.ok.add(message.message_id)
            out(received=time.time(), acked=True, **describe(message))
            return ConsumeResult.SUCCESS


def push(endpoint, topic, group, expect, seconds, fail_first="0", expect_file=None):
    import os

    listener = Listener(fail_first == "1")
    consumer = PushConsumer(config(endpoint), group, listener, {topic: FilterExpression("*")})
    consumer.startup()
    deadline = time.time() + float(seconds)
    try:
        while time.time() < deadline:
            if expect_file and os.path.exists(expect_file):
                with open(expect_file) as f:
                    expect = f.read().strip() or expect
            with listener.lock:
                if len(listener.ok) >= int(expect):
                    break
            time.sleep(0.1)
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    {"produce": produce, "simple": simple, "hold": hold, "push": push, "bench_produce": bench_produce,
     "bench_consume": bench_consume}[sys.argv[1]](*sys.argv[2:])
