"""Lab 04's story helpers: start the controller-mode deployment, send, fail over, and read back what
the replicas hold. They run on rmqlab's simulator (`Cluster(..., runtime="sim")`); every number the
lab prints comes from the trace or from the replicas' store files.

Kept here rather than in the notebook: the lab shows what they do, not how a cluster is driven.
"""

from __future__ import annotations

from collections import Counter

from rmqlab.checker.checkers import broker_id_nodes, sync_state_sets, truncations
from rmqlab.client import ClientProcess, DefaultMQProducer, DefaultMQPullConsumer
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.viz.epochs import epoch_figure, rows_from_stores

TOPIC = "LabTopic"
BROKERS = ("broker-n0", "broker-n1", "broker-n2")


def start(seed, unclean):
    """The deployment running, with every replica in the SyncStateSet, and a producer node."""
    c = Cluster("controller-standalone", seed=seed, controller_overrides={"enableElectUncleanMaster": unclean})
    c.start(60_000)
    c.create_topic(TOPIC)

    def producer():
        p = DefaultMQProducer("LabProducer", c.namesrv_addr)
        # RocketMQ refreshes routes every 30 s; a lab would only wait for it after each failover.
        p.client_config.poll_name_server_interval = 1_000
        return ClientProcess(producer=p)

    c.add_client("sender", producer)
    c.run_until(lambda: len(in_sync(c)) == 3, 60_000, poll_ms=500)
    return c


def in_sync(c):
    """broker-a's SyncStateSet (node names) as the controllers' replicated log has it."""
    events = c.events()
    names = broker_id_nodes(events)
    return [names.get(("broker-a", i), f"id {i}") for i in sync_state_sets(events).get("broker-a", [])]


def send(c, n, tag):
    """n sends, one after the other; what they returned, counted."""
    producer = c.sim.components["sender"]["producer"]

    async def go():
        out = []
        for i in range(n):
            try:
                out.append((await producer.send(Message(TOPIC, f"{tag}-{i}".encode()))).send_status.name)
            except Exception as e:  # no broker took it, after the producer's retries
                out.append(type(e).__name__)
        return out

    return dict(Counter(c.sim.run(go())))


def wait_writable(c, timeout_ms=60_000):
    """Virtual ms until a send is acknowledged again (one try a second)."""
    producer, node, t0 = c.sim.components["sender"]["producer"], c.sim.nodes["sender"], c.sim.now_ms()

    async def go():
        while c.sim.now_ms() - t0 < timeout_ms:
            try:
                await producer.send(Message(TOPIC, b"probe"))
                return c.sim.now_ms() - t0
            except Exception:
                await node.sleep(1_000)
        raise TimeoutError("no send acknowledged")

    return c.sim.run(go())


def fail_over(c, fault):
    """Apply fault (c.nemesis.kill, crash, ...) to the master; (old master, new master)."""
    old = c.master()
    fault(old)
    c.run_until(lambda: c.master() not in (None, old), 60_000)
    return old, c.master()


def stores(c):
    """Each replica's store directory."""
    return {n: c.sim.store_dir(n) for n in BROKERS}


def converge(c, timeout_ms=60_000):
    """Until every replica's log ends where the master's does (read from their files)."""
    def done():
        ends = {r.node: r.end for r in rows_from_stores(stores(c))}
        return c.master() is not None and len(set(ends.values())) == 1
    c.run_until(done, timeout_ms, poll_ms=1_000)
    c.run_for(1_000)  # the last confirm offset travels with the next transfer header


readers = Counter()


def read_everything(c):
    """A fresh pull consumer reads every queue of the topic from offset 0 (its pulls are traced)."""
    readers[c] += 1
    name = f"reader-{readers[c]}"
    c.add_client(name, lambda: ClientProcess(consumer=DefaultMQPullConsumer(name, c.namesrv_addr)))
    consumer = c.sim.components[name]["consumer"]

    async def read():
        n = 0
        for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
            offset = 0
            while (r := await consumer.pull(mq, "*", offset, 32)).msg_found_list:
                n += len(r.msg_found_list)
                offset = r.next_begin_offset
        return n

    return c.sim.run(read())


def show(c, title):
    """Each replica's epoch file and log end, as text and as the diagram (master on top)."""
    rows = rows_from_stores(stores(c))
    for r in rows:
        print(f"  {r.node:<10} epochs {list(r.entries)}  log ends at {r.end}")
    return epoch_figure(rows, master=c.master(), title=title)


def handshakes(c, nodes, since_seq=0):
    """The handshake decisions (doTruncate) of nodes since since_seq, from the trace."""
    found = [t for t in truncations(c.events()) if t.node in nodes and t.seq >= since_seq]
    for t in found:
        print(f"  {t.node} (with {t.master}): {t.reason}")
    return found
