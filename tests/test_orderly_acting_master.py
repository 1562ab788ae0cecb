"""RIP-32's lock quorum with real orderly consumers, on the simulator: the hazard of the "Lock
Quorum" section of RIP-32 (Slave Acting Master Mode, RocketMQ's wiki) and what
``lockInStrictMode`` does about it.

The group broker-a: a master (id 0) and a slave (id 1) with ``enableSlaveActingMaster``,
``totalReplicas=2`` (quorum 2) and ``skipPreOnline`` (the returning master serves at once); the name
server rewrites the route while the master is down (the slave as brokerId 0). Consumer c1 consumes
orderly through it all: its queue locks live on the acting slave, and its route keeps the slave
until its next refresh (pollNameServerInterval, 30 s). The master comes back, with no locks (they
are in memory), and c2 of the same group starts: its route has the master, whose consumer list
has only c2 so far (c1 heartbeats to the brokers its route names), so c2 is allocated every queue
and asks the master for their locks.

* ``lockInStrictMode=false`` (RocketMQ's default): the master grants them, as does the slave to c1.
  Both consumers consume the queue c1 kept -- every message twice, and each order's steps
  interleaved (step 1 after step 2): the disorder and repetition the RIP describes.
* ``lockInStrictMode=true``: a lock needs both replicas; the slave refuses c2 the queue c1 holds
  there, the master refuses c1 its renewal (c2's local lock stays) -- nobody consumes that queue
  until the views converge and those locks expire, but no message is consumed by two consumers and
  every order stays in order.

The broker side (AdminBrokerProcessor.lockBatchMQ's quorum) is tested in tests/test_lock_batch.py.
"""

from __future__ import annotations

from rmqlab.checker import check_order
from rmqlab.client import MessageQueue
from rmqlab.client.producer.selector import java_hash_code
from rmqlab.demo.lock_hazard import GROUP, ORDERS, STEPS, TOPIC, held, scenario
from rmqlab.viz.orderly import ordered_consumes


def consumed(cl) -> list[tuple[str, int, str, int]]:
    """(consumer, queue, order, step) of every orderly consumption (nothing is sent before the
    ordered sends, so these are all of them), from the trace."""
    return [(c.consumer, c.queue_id, c.order, c.step) for c in ordered_consumes(cl.sim.tracer.events, TOPIC)]


def by_order(log) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _c, _q, order, step in log:
        out.setdefault(order, []).append(step)
    return out


ALL = sorted((o, s) for o in ORDERS for s in range(STEPS))


def test_without_strict_mode_the_master_and_the_acting_slave_both_grant_a_queue_and_two_consumers_consume_it():
    cl = scenario(strict=False)
    try:
        both = held(cl.c1) & held(cl.c2)
        assert both  # one queue "locked" by both consumers, at different brokers
        q = min(both)
        c1_id, c2_id = cl.c1.client_factory.client_id, cl.c2.client_factory.client_id
        slave_locks = cl.broker("broker-a-s1").admin_broker_processor.rebalance_lock_manager
        master_locks = cl.broker("broker-a").admin_broker_processor.rebalance_lock_manager
        assert slave_locks.lock_holder(GROUP, MessageQueue(TOPIC, "broker-a", q)) == c1_id
        assert master_locks.lock_holder(GROUP, MessageQueue(TOPIC, "broker-a", q)) == c2_id
        # Both consumed every message of that queue: repeated, and each order's steps out of order.
        log = consumed(cl)
        orders_in_q = [o for o in ORDERS if abs(java_hash_code(o)) % 2 == q]
        for client in ("c1", "c2"):
            assert sorted((o, s) for c, qq, o, s in log if c == client and qq == q) == \
                sorted((o, s) for o in orders_in_q for s in range(STEPS))
        steps = by_order(log)
        assert any(s != sorted(s) for o, s in steps.items() if o in orders_in_q)
        hazard = [c for c in ordered_consumes(cl.sim.tracer.events, TOPIC) if c.behind]
        assert hazard and {c.order for c in hazard} <= set(orders_in_q)
        # check_order, from the trace alone: nothing out of order within a queue, but the queue
        # consumed over again (what the history cannot tell from a redelivery: check_order's docstring).
        r = check_order(cl.sim.tracer.events)
        assert r.valid and r.stats["reconsumed"] > 0 and r.stats["orderly_consumes"] == len(log), r.stats
    finally:
        cl.close()


def test_with_strict_mode_no_queue_is_consumed_by_two_consumers_and_every_order_stays_in_order():
    cl = scenario(strict=True)
    try:
        assert not held(cl.c1) & held(cl.c2)
        log = consumed(cl)
        for q in (0, 1):
            clients = [c for c, qq, _o, _s in log if qq == q]
            assert len(set(clients)) <= 1, (q, clients)
        steps = by_order(log)
        assert all(s == sorted(s) and len(s) == len(set(s)) for s in steps.values()), steps
        # The price: the queue c1 held is consumed by nobody (c1 lost its quorum, c2 never had one) ...
        stuck = {0, 1} - held(cl.c1) - held(cl.c2)
        assert stuck and not [e for e in log if e[1] in stuck]
        # ... until c1's route has the master again (its heartbeat joins the views) and the locks
        # that split the replicas expired; then one consumer consumes it, once and in order.
        cl.wait_until(lambda: len({(o, s) for _c, _q, o, s in consumed(cl)}) == len(ALL), 150_000, "every step consumed",
                      poll_ms=1_000)
        cl.sim.run_for(5_000)
        log = consumed(cl)
        assert sorted((o, s) for _c, _q, o, s in log) == ALL
        assert all(s == list(range(STEPS)) for s in by_order(log).values())
        for q in stuck:
            assert len({c for c, qq, _o, _s in log if qq == q}) == 1
        assert not any(c.behind or c.again for c in ordered_consumes(cl.sim.tracer.events, TOPIC))
        r = check_order(cl.sim.tracer.events)
        assert r.valid and r.stats["reconsumed"] == 0 and r.stats["orderly_consumes"] == len(log), r.stats
    finally:
        cl.close()
