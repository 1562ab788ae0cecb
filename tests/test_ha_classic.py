"""Classic master–slave HA: DefaultHAService on the simulator.

Two (or three) simulated machines, each with its own DefaultMessageStore under node.store_dir and
small commitlog files. Facts of RocketMQ these tests lean on:

* a slave's first report waits haSendHeartbeatInterval (5 s) after its HA client was created, and
  the master sends nothing before it: replication starts about 5 s after the slave starts;
* with nothing to send, the master's write side re-polls every 100 ms, and only a SYNC_MASTER put
  wakes it early: an ASYNC_MASTER's slave trails by up to ~100 ms;
* SYNC_MASTER waits for inSyncReplicas replicas (master included) since RIP-34; the default 1
  means no waiting at all.
"""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from rmqlab.common.manual_clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.config.broker import BrokerRole, FlushDiskType
from rmqlab.ha import DefaultHAService, HAConnectionState, HAProtocolError
from rmqlab.ha.default_ha_protocol import (CLIENT_TRANSITIONS, ClientProtocol, ConnectionProtocol, encode_report,
                                           encode_transfer_header, next_state, transfer_start_offset)
from rmqlab.ha.group_transfer_service import GroupTransferService
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from rmqlab.store import DefaultMessageStore
from rmqlab.store.commit_log import GroupCommitRequest
from rmqlab.store.put_message_result import PutMessageStatus
from rmqlab.trace import trace_hash
from tests.sim_helpers import track
from tests.store_helpers import make_message, read_queue

COMMITLOG = 64 * 1024  # two 32 KiB transfer batches per file; ~58 one-KiB messages per file
CQ = 20 * 100
MASTER_HA_PORT = 30912
SLAVE_HA_PORT = 30922
MASTER_HA = f"127.0.0.1:{MASTER_HA_PORT}"
TOPIC = "TopicTest"
OK = PutMessageStatus.PUT_OK


class HABroker(Component):
    """Just enough broker for HA: a store on the node's disk, its services on Node timers, HA."""

    component_type = "broker"

    def __init__(self, role: BrokerRole, ha_port: int, master_ha: str | None = None, **overrides):
        self.role, self.ha_port, self.master_ha, self.overrides = role, ha_port, master_ha, overrides

    async def start(self, node) -> None:
        self.node = node
        cfg = MessageStoreConfig(storePathRootDir=node.store_dir, mappedFileSizeCommitLog=COMMITLOG,
                                 mappedFileSizeConsumeQueue=CQ, brokerRole=self.role, haListenPort=self.ha_port,
                                 haMasterAddress=self.master_ha)
        for key, value in self.overrides.items():
            setattr(cfg, key, value)
        self.config = cfg
        self.store = DefaultMessageStore(cfg, clock=node.now_ms)
        self.store.load()
        self.ha = DefaultHAService(node, self.store, cfg, host="127.0.0.1")
        await self.ha.start()
        for name, interval, step in self.store.periodic_services():
            node.spawn(self._every(interval, step), name=name)
        self.store.reput_message_service.start(node.call_later)

    async def _every(self, interval_ms: int, step) -> None:
        while True:
            step()
            await self.node.sleep(interval_ms)

    async def shutdown(self) -> None:
        self.ha.shutdown()
        self.store.shutdown()

    def on_crash(self) -> None:
        self.ha.on_crash()
        self.store.kill()


class Idle(Component):
    component_type = "client"

    async def start(self, node) -> None:
        self.node = node


def world(seed: int, master_role: BrokerRole = BrokerRole.ASYNC_MASTER, *, start_slave: bool = True,
          junk: bool = False, **master_overrides) -> Simulation:
    sim = Simulation(seed=seed)
    track(sim)
    sim.add_node("master", lambda: HABroker(master_role, MASTER_HA_PORT, **master_overrides))
    sim.add_node("slave", lambda: HABroker(BrokerRole.SLAVE, SLAVE_HA_PORT, MASTER_HA))
    if junk:
        sim.add_node("junk", Idle)
        sim.start("junk")
    sim.start("master")
    if start_slave:
        sim.start("slave")
    return sim


def broker(sim: Simulation, name: str) -> HABroker:
    return sim.components[name]


def put(sim: Simulation, i: int, body_size: int = 1000):
    """Send message i to the master's store; returns the CompletableFuture of its result."""
    m = broker(sim, "master")
    return m.store.async_put_message(make_message(m.node.now_ms, i, body_size=body_size))


def put_and_wait(sim: Simulation, i: int, timeout_ms: float = 10_000):
    future = put(sim, i)
    sim.run_until(future.done, timeout_ms)
    return future.result()


def put_many(sim: Simulation, start: int, n: int) -> list:
    return [put(sim, i) for i in range(start, start + n)]


def caught_up(sim: Simulation) -> bool:
    return broker(sim, "slave").store.get_max_phy_offset() == broker(sim, "master").store.get_max_phy_offset()


def wait_caught_up(sim: Simulation, timeout_ms: float = 30_000) -> float:
    return sim.run_until(lambda: caught_up(sim), timeout_ms)


def keys(store) -> list[str]:
    return [m.keys for m in read_queue(store, TOPIC, 0)]


def dispatched(sim: Simulation, name: str) -> list[str]:
    store = broker(sim, name).store
    sim.run_until(lambda: store.dispatch_behind_bytes() == 0, 1_000)
    return keys(store)


def commitlog_files(sim: Simulation, name: str) -> dict[str, bytes]:
    d = os.path.join(sim.store_dir(name), "commitlog")
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def assert_slave_files_identical(sim: Simulation) -> None:
    master, slave = commitlog_files(sim, "master"), commitlog_files(sim, "slave")
    assert slave and set(slave) <= set(master)
    for name, data in slave.items():
        assert data == master[name], f"commitlog file {name} differs"


def events(sim: Simulation, kind: str, node: str | None = None, **match) -> list:
    return [e for e in sim.tracer.events if e.kind == kind and (node is None or e.node == node)
            and all(e.fields.get(k) == v for k, v in match.items())]


def ha_closes(sim: Simulation, node: str) -> list:
    """net.close events of HA connections seen by `node` (the remoting layer is not in these tests)."""
    return events(sim, "net.close", node)


# --- the socket-free core ---------------------------------------------------------------------
def test_wire_format_is_rocketmqs():
    assert encode_transfer_header(0x0102030405060708, 0x0A0B0C0D) == bytes.fromhex("0102030405060708" "0a0b0c0d")
    assert encode_report(16) == struct.pack(">q", 16) and len(encode_report(0)) == 8


def test_client_protocol_decodes_frames_and_rejects_an_offset_gap():
    c = ClientProtocol(now_ms=0)
    c.connected(now_ms=1, slave_max_offset=100)
    frame = encode_transfer_header(100, 5) + b"hello"
    c.feed(frame[:7], now_ms=2)                    # a partial header: nothing yet
    assert c.next_frame(100) is None and c.buffered() == 7
    c.feed(frame[7:] + encode_transfer_header(105, 0), now_ms=3)
    f = c.next_frame(100)
    assert (f.offset, f.body, f.wire_size) == (100, b"hello", 17)
    heartbeat = c.next_frame(105)
    assert heartbeat.is_heartbeat and heartbeat.offset == 105 and c.next_frame(105) is None
    assert c.report_plus(105, now_ms=4) == encode_report(105) and c.report_plus(105, now_ms=5) is None
    c.feed(encode_transfer_header(200, 3) + b"abc", now_ms=6)
    with pytest.raises(HAProtocolError, match="offset gap: master pushed offset 200, the slave's log ends at 105"):
        c.next_frame(105)
    # An empty slave (max offset 0) takes whatever offset the master starts at.
    empty = ClientProtocol(now_ms=0)
    empty.connected(0, 0)
    empty.feed(encode_transfer_header(65536, 1) + b"x", 0)
    assert empty.next_frame(0).offset == 65536
    empty.feed(encode_transfer_header(7, -1), 0)
    with pytest.raises(HAProtocolError, match="body size -1"):
        empty.next_frame(0)


def test_client_reports_on_the_heartbeat_interval_from_construction():
    c = ClientProtocol(now_ms=1_000)
    c.connected(now_ms=1_010, slave_max_offset=42)
    assert not c.is_time_to_report(6_000, 5_000)   # 5 s after construction, not after the connect
    assert c.is_time_to_report(6_001, 5_000)
    assert c.report(6_001) == encode_report(42) and c.last_write_timestamp == 6_001
    assert c.housekeeping_expired(21_011, 20_000) and not c.housekeeping_expired(21_010, 20_000)


def test_master_protocol_keeps_the_last_complete_report():
    p = ConnectionProtocol()
    assert p.state is HAConnectionState.TRANSFER  # no handshake in classic HA
    assert p.feed_reports(encode_report(64)[:5], master_max_offset=1000) == []
    assert p.slave_request_offset == -1
    assert p.feed_reports(encode_report(64)[5:] + encode_report(128) + encode_report(192)[:2], 1000) == [64, 128]
    # Only the last complete report of one read counts, the request offset included (as in Java).
    assert (p.slave_request_offset, p.slave_ack_offset) == (128, 128)
    assert p.feed_reports(encode_report(192)[2:], 1000) == [192]
    assert (p.slave_request_offset, p.slave_ack_offset) == (128, 192)


def test_master_protocol_takes_any_report_as_rocketmq_does():
    """DefaultHAConnection.ReadSocketService.processReadEvent checks nothing: a report beyond the
    master's log (a slave ahead of a master that lost its tail) or garbage is the ack offset."""
    ahead = ConnectionProtocol()
    assert ahead.feed_reports(encode_report(5_000), master_max_offset=1000) == [5_000]
    assert (ahead.slave_request_offset, ahead.slave_ack_offset) == (5_000, 5_000)
    http = ConnectionProtocol()
    assert http.feed_reports(b"GET / HTTP/1.1\r\n", 1000) == [int.from_bytes(b"GET / HT", "big"),
                                                               int.from_bytes(b"TP/1.1\r\n", "big")]
    assert http.slave_request_offset == http.slave_ack_offset == int.from_bytes(b"TP/1.1\r\n", "big")  # ~6e18
    minus_one = ConnectionProtocol()
    assert minus_one.feed_reports(b"\xff" * 8, 1000) == [-1] and minus_one.slave_request_offset == -1


def test_master_protocol_rejects_impossible_reports_with_the_rmqlab_option():
    """rmqlabRejectImpossibleHaReport=true: a report outside [0, the master's max offset] closes the
    connection before it counts as an ack."""
    p = ConnectionProtocol()
    assert p.feed_reports(encode_report(1000), 1000, reject_impossible=True) == [1000]  # at the end: fine
    with pytest.raises(HAProtocolError, match="outside"):
        p.feed_reports(encode_report(1001), 1000, reject_impossible=True)
    assert p.slave_ack_offset == 1000  # the refused report did not count
    with pytest.raises(HAProtocolError, match="outside"):
        ConnectionProtocol().feed_reports(b"GET / HTTP/1.1\r\n", 1000, reject_impossible=True)
    with pytest.raises(HAProtocolError, match="offset -1"):
        ConnectionProtocol().feed_reports(b"\xff" * 8, 1000, reject_impossible=True)


def test_master_start_offset_rule():
    assert transfer_start_offset(0, 200_000, COMMITLOG) == 196_608  # the master's last file
    assert transfer_start_offset(0, 0, COMMITLOG) == 0
    assert transfer_start_offset(5_000, 200_000, COMMITLOG) == 5_000
    p = ConnectionProtocol()
    with pytest.raises(ValueError):
        p.transfer_start(1000, COMMITLOG)
    p.feed_reports(encode_report(0), 200_000)
    assert p.transfer_start(200_000, COMMITLOG) == 196_608
    assert p.batch(100) == (196_608, encode_transfer_header(196_608, 100))
    assert p.heartbeat() == encode_transfer_header(196_708, 0)


def test_state_tables_refuse_undefined_transitions():
    assert next_state(CLIENT_TRANSITIONS, HAConnectionState.READY, "connected") is HAConnectionState.TRANSFER
    with pytest.raises(ValueError, match="no transition from READY on 'closed'"):
        next_state(CLIENT_TRANSITIONS, HAConnectionState.READY, "closed")


# --- GroupTransferService ---------------------------------------------------------------------
class _Conn:
    def __init__(self, ack: int):
        self.slave_ack_offset = ack


class _FakeHA:
    def __init__(self, node, acks):
        self.node = node
        self.connection_list = [_Conn(a) for a in acks]
        self.push2_slave_max_offset = max(acks, default=0)


def test_group_transfer_counts_connections_and_times_out_in_order():
    sim = Simulation(seed=1)
    track(sim)
    sim.add_node("m", Idle)
    sim.start("m")
    node = sim.nodes["m"]
    ha = _FakeHA(node, [0, 0])
    gts = GroupTransferService(ha)
    now = node.now_ms()
    two = GroupCommitRequest(100, now + 3000, ack_nums=2)
    three = GroupCommitRequest(100, now + 3000, ack_nums=3)
    later = GroupCommitRequest(200, now + 3500, ack_nums=2)
    for r in (two, three, later):
        gts.put_request(r)
    ha.connection_list[0].slave_ack_offset = 150
    gts.notify_transfer_some()
    assert two.future.result() is OK and not three.future.done()  # master + one slave = 2 of 3
    ha.connection_list[1].slave_ack_offset = 250
    ha.connection_list[0].slave_ack_offset = 250
    sim.run_for(1000)
    gts.notify_transfer_some()
    assert three.future.result() is OK and later.future.result() is OK
    # Nobody acks: FLUSH_SLAVE_TIMEOUT exactly at the deadline, head of the line first.
    slow = GroupCommitRequest(10_000, node.now_ms() + 3000, ack_nums=2)
    slower = GroupCommitRequest(20_000, node.now_ms() + 3100, ack_nums=2)
    gts.put_request(slow)
    gts.put_request(slower)
    start = sim.now_ms()
    sim.run_until(slow.future.done, 5000)
    assert slow.future.result() is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and 2999 <= sim.now_ms() - start <= 3001
    assert not slower.future.done()
    sim.run_until(slower.future.done, 5000)
    assert slower.future.result() is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    # ackNums <= 1 (not -1) compares push2SlaveMaxOffset.
    one = GroupCommitRequest(250, node.now_ms() + 3000, ack_nums=1)
    gts.put_request(one)
    assert not one.future.done()
    ha.push2_slave_max_offset = 250
    gts.notify_transfer_some()
    assert one.future.result() is OK


# --- the store's side -------------------------------------------------------------------------
def _bare_store(tmp_path, clock, **overrides) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=COMMITLOG,
                             mappedFileSizeConsumeQueue=CQ)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    store = DefaultMessageStore(cfg, clock=clock)
    store.load()
    return store


def test_slave_store_refuses_puts(tmp_path):
    clock = ManualClock()
    store = _bare_store(tmp_path, clock, brokerRole=BrokerRole.SLAVE)
    r = store.put_message(make_message(clock, 0))
    assert r.put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE and not r.is_ok()
    assert store.get_max_phy_offset() == 0
    store.shutdown()


@pytest.mark.parametrize("in_sync, flush, expected", [
    (1, "ASYNC_FLUSH", OK),                                   # RIP-34: one replica (the master) is enough
    (2, "ASYNC_FLUSH", PutMessageStatus.FLUSH_SLAVE_TIMEOUT),  # no HA service: nobody can ack
    (1, "SYNC_FLUSH", PutMessageStatus.FLUSH_DISK_TIMEOUT),    # the flush failed, the replicas did not
    (2, "SYNC_FLUSH", PutMessageStatus.FLUSH_SLAVE_TIMEOUT),   # both failed: the replica status wins
])
def test_sync_master_status_precedence(tmp_path, in_sync, flush, expected):
    clock = ManualClock()
    store = _bare_store(tmp_path, clock, brokerRole=BrokerRole.SYNC_MASTER, inSyncReplicas=in_sync,
                        flushDiskType=FlushDiskType[flush])
    future = store.async_put_message(make_message(clock, 0))
    if flush == "SYNC_FLUSH":
        assert not future.done()
        clock.advance(store.config.syncFlushTimeout + 1)
        store.flush_commit_log_service.expire()  # the flush thread never ran: FLUSH_DISK_TIMEOUT
    assert future.result().put_message_status is expected
    assert future.result().is_ok()  # every one of these is stored
    store.shutdown()


# --- replication on the simulator -------------------------------------------------------------
def test_slave_replicates_byte_identical_files_and_builds_its_consume_queue():
    sim = world(11)
    sim.run_for(5_000)
    # Nothing flows before the slave's first report, haSendHeartbeatInterval after its client started.
    assert events(sim, "frame.recv", "master", proto="ha") == []
    sim.run_for(100)
    first_report = events(sim, "frame.recv", "master", proto="ha", name="report")[0]
    assert first_report.fields["offset"] == 0 and first_report.time_ms > 5_000
    results = put_many(sim, 0, 150)  # ~3 commitlog files
    assert all(f.result().put_message_status is OK for f in results)
    wait_caught_up(sim)
    assert len(commitlog_files(sim, "slave")) == 3
    assert_slave_files_identical(sim)
    assert dispatched(sim, "slave") == [f"key-{i}" for i in range(150)]
    # Batches never exceed haTransferBatchSize and never cross a file.
    for e in events(sim, "frame.send", "master", proto="ha", name="transfer"):
        start, size = e.fields["offset"], e.fields["body_size"]
        assert 0 < size <= 32 * 1024 and start // COMMITLOG == (start + size - 1) // COMMITLOG
    # In sync: within haMaxGapNotInSync of the slave's ack (inSyncReplicasNums counts the master too).
    master = broker(sim, "master").ha
    ack, gap = master.connection_list[0].slave_ack_offset, master.config.haMaxGapNotInSync
    assert ack == master.get_push2_slave_max_offset() == broker(sim, "master").store.get_max_phy_offset()
    assert [master.in_sync_replicas_nums(ack + d) for d in (0, gap - 1, gap)] == [2, 2, 1]
    assert [master.is_slave_ok(ack + d) for d in (0, gap - 1, gap)] == [True, True, False]


def test_brand_new_slave_starts_at_the_masters_last_file():
    sim = world(12, start_slave=False)
    put_many(sim, 0, 150)
    sim.run_for(100)
    master_store = broker(sim, "master").store
    last_file = master_store.get_max_phy_offset() - master_store.get_max_phy_offset() % COMMITLOG
    assert last_file == 2 * COMMITLOG
    sim.start("slave")
    put_many(sim, 150, 10)
    wait_caught_up(sim)
    slave = broker(sim, "slave").store
    assert slave.get_min_phy_offset() == last_file
    assert list(commitlog_files(sim, "slave")) == [f"{last_file:020d}"]
    assert_slave_files_identical(sim)
    got = dispatched(sim, "slave")
    dispatched(sim, "master")
    first = next(m.queue_offset for m in read_queue(master_store, TOPIC, 0) if m.commit_log_offset >= last_file)
    assert got == [f"key-{i}" for i in range(first, 160)]
    assert slave.get_min_offset_in_queue(TOPIC, 0) == first > 0  # the queue starts there too
    assert events(sim, "frame.recv", "master", proto="ha", name="report")[0].fields["offset"] == 0
    assert events(sim, "frame.send", "master", proto="ha", name="transfer")[0].fields["offset"] == last_file


def test_async_master_returns_at_once_and_the_slave_catches_up():
    sim = world(13)
    wait_caught_up(sim)
    sim.run_for(6_000)  # the slave is connected and has reported
    results = put_many(sim, 0, 40)
    assert all(f.done() and f.result().put_message_status is OK for f in results)  # no waiting
    assert not caught_up(sim)
    took = wait_caught_up(sim)
    assert took <= 110  # the idle write side re-polls every 100 ms
    assert dispatched(sim, "slave") == [f"key-{i}" for i in range(40)]


def test_sync_master_completes_only_after_the_slaves_ack():
    sim = world(14, BrokerRole.SYNC_MASTER, inSyncReplicas=2)
    sim.run_for(6_000)
    slave_store = broker(sim, "slave").store
    seen_on_slave = []
    future = put(sim, 0)
    assert not future.done()
    future.then_accept(lambda r: seen_on_slave.append(slave_store.get_max_phy_offset()))
    start = sim.now_ms()
    sim.run_until(future.done, 1_000)
    result = future.result()
    assert result.put_message_status is OK
    assert seen_on_slave == [result.append_message_result.next_offset]  # the slave had it first
    assert 0 < sim.now_ms() - start < 5  # one round trip, not a 100 ms poll: the put woke the sender
    ack = events(sim, "frame.recv", "master", proto="ha", name="report")[-1]
    assert ack.fields["offset"] == result.append_message_result.next_offset


@pytest.mark.parametrize("in_sync_replicas", [1, 2])
def test_sync_master_with_a_suspended_slave_rip34(in_sync_replicas):
    """RocketMQ 5 waits for inSyncReplicas replicas (master included): the default 1 waits for
    nobody, so "sync double write" needs inSyncReplicas=2 (and then a frozen slave costs
    slaveTimeout and FLUSH_SLAVE_TIMEOUT)."""
    sim = world(15, BrokerRole.SYNC_MASTER, inSyncReplicas=in_sync_replicas)
    sim.run_for(6_000)
    sim.nemesis.suspend("slave")
    future = put(sim, 0)
    start = sim.now_ms()
    if in_sync_replicas == 1:
        assert future.done() and future.result().put_message_status is OK
    else:
        assert not future.done()
        sim.run_until(future.done, 5_000)
        assert future.result().put_message_status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert 2_999 <= sim.now_ms() - start <= 3_001  # slaveTimeout
        assert future.result().is_ok()  # stored on the master all the same
    sim.run_for(500)
    assert broker(sim, "slave").store.get_max_phy_offset() == 0  # frozen: nothing applied
    sim.nemesis.resume("slave")
    wait_caught_up(sim, 1_000)
    assert put_and_wait(sim, 1).put_message_status is OK
    wait_caught_up(sim, 1_000)
    assert dispatched(sim, "slave") == ["key-0", "key-1"]


def test_offset_gap_makes_the_slave_reconnect_and_resume_without_loss_or_duplicates():
    sim = world(16)
    put_many(sim, 0, 30)
    wait_caught_up(sim)
    conn = broker(sim, "master").ha.connection_list[0]
    slave_max = broker(sim, "slave").store.get_max_phy_offset()
    # A frame that does not continue the slave's log, on the live connection.
    conn.writer.write(encode_transfer_header(slave_max + 4096, 5) + b"bogus")
    put_many(sim, 30, 30)
    sim.run_for(50)
    gap = ha_closes(sim, "slave")
    assert len(gap) == 1 and gap[0].fields["reason"].startswith(f"offset gap: master pushed offset {slave_max + 4096}")
    assert broker(sim, "slave").store.get_max_phy_offset() == slave_max  # nothing of it applied
    assert broker(sim, "master").ha.connection_list == []  # the master saw the close too
    wait_caught_up(sim)
    new_conn = broker(sim, "master").ha.connection_list[0]
    assert new_conn is not conn and new_conn.slave_request_offset == slave_max
    states = [(e.fields["from"], e.fields["to"]) for e in events(sim, "state", "slave", machine="DefaultHAClient")]
    assert states == [(None, "READY"), ("READY", "TRANSFER"), ("TRANSFER", "READY"), ("READY", "TRANSFER")]
    assert_slave_files_identical(sim)
    assert dispatched(sim, "slave") == [f"key-{i}" for i in range(60)]


@pytest.mark.parametrize("garbage, guard, closes_within_ms", [
    # RocketMQ's behaviour: whatever the bytes, only housekeeping ends the connection (nothing read
    # for haHousekeepingInterval), the HTTP request having been the connection's ack offset meanwhile.
    (b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n", False, 20_100),
    (b"\xff" * 16, False, 20_100),
    # rmqlabRejectImpossibleHaReport=true: a report outside the master's log closes it at once.
    (b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n", True, 10),  # reads as an offset near 5e18
    (b"\xff" * 16, True, 10),                               # reads as offset -1
    (b"hi!", True, 20_100),                                 # never a whole report: housekeeping closes it
])
def test_garbage_on_the_ha_port_closes_only_that_connection(garbage, guard, closes_within_ms):
    sim = world(17, BrokerRole.SYNC_MASTER, junk=True, inSyncReplicas=2, rmqlabRejectImpossibleHaReport=guard)
    sim.run_for(6_000)
    assert [put_and_wait(sim, i).put_message_status for i in range(5)] == [OK] * 5
    master = broker(sim, "master").ha
    real = master.connection_list[0]
    junk_node = sim.nodes["junk"]

    async def send_garbage():
        reader, writer = await junk_node.connect("127.0.0.1", MASTER_HA_PORT)
        writer.write(garbage)
        await writer.drain()
        start = sim.now_ms()
        while await reader.read(65536):  # whatever the master sends, until it closes
            pass
        return sim.now_ms() - start

    task = sim.loop.create_task(send_garbage())
    sim.run_for(5)
    assert len(events(sim, "net.accept", "master")) == 2
    assert put_and_wait(sim, 5).put_message_status is OK  # the real slave still acks
    sim.run_until(task.done, closes_within_ms + 1_000)
    assert task.result() <= closes_within_ms
    assert master.connection_list == [real] and master.connection_count == 1
    assert real.close_reason is None
    closes = ha_closes(sim, "master")
    assert len(closes) == 1 and closes[0].fields["peer"] != real.client_address
    if closes_within_ms > 10:
        assert closes[0].fields["reason"].startswith("housekeeping")
    else:
        assert "outside" in closes[0].fields["reason"]
    assert put_and_wait(sim, 6).put_message_status is OK
    wait_caught_up(sim, 1_000)
    assert dispatched(sim, "slave") == [f"key-{i}" for i in range(7)]


@pytest.mark.parametrize("guard, status", [(False, OK), (True, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)])
def test_a_forged_ack_acknowledges_a_sync_put_unless_the_rmqlab_guard_is_on(guard, status):
    """In RocketMQ any 8 bytes on the HA port count as an ack: a forged report completes a
    SYNC_MASTER put that no slave holds. rmqlabRejectImpossibleHaReport=true closes such a
    connection instead (a report beyond the master's log), and the put times out."""
    sim = world(18, BrokerRole.SYNC_MASTER, junk=True, inSyncReplicas=2, rmqlabRejectImpossibleHaReport=guard)
    sim.run_for(6_000)
    sim.nemesis.suspend("slave")

    async def forge():
        _reader, writer = await sim.nodes["junk"].connect("127.0.0.1", MASTER_HA_PORT)
        writer.write(encode_report(10**12))

    future = put(sim, 0)
    sim.run(forge())
    sim.run_until(future.done, 5_000)
    assert future.result().put_message_status is status
    refused = [e for e in ha_closes(sim, "master") if "outside" in e.fields["reason"]]
    assert len(refused) == (1 if guard else 0)
    assert broker(sim, "slave").store.get_max_phy_offset() == 0  # suspended: it holds nothing
    sim.nemesis.resume("slave")


def _produce(sim: Simulation, n: int, every_ms: float, acked: dict[int, PutMessageStatus], sent: list[int]):
    """A producer on the master, one send every `every_ms`, not waiting; stops with the master's process."""
    first = broker(sim, "master")

    async def run():
        for i in range(n):
            if not sim.nodes["master"].alive or broker(sim, "master") is not first:
                return
            sent.append(i)
            put(sim, i).then_accept(lambda r, i=i: acked.__setitem__(i, r.put_message_status))
            await asyncio.sleep(every_ms / 1000)

    return sim.loop.create_task(run())


def _recovered_master_keys(sim: Simulation) -> set[str]:
    """What the crashed master's own disk still holds, recovered as a restart would."""
    cfg = MessageStoreConfig(storePathRootDir=sim.store_dir("master"), mappedFileSizeCommitLog=COMMITLOG,
                             mappedFileSizeConsumeQueue=CQ)
    store = DefaultMessageStore(cfg, clock=ManualClock())
    store.load()
    got = set(keys(store))
    store.shutdown()
    return got


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_master_machine_crash(mode):
    if mode == "sync":
        sim = world(19, BrokerRole.SYNC_MASTER, inSyncReplicas=2)
    else:
        sim = world(19, BrokerRole.ASYNC_MASTER)
    sim.run_for(6_000)
    acked: dict[int, PutMessageStatus] = {}
    sent: list[int] = []
    _produce(sim, 400, 7, acked, sent)
    sim.run_for(1_001.3)  # just after a send, and ~99 ms after the async master's last transfer
    sim.nemesis.crash("master")
    sim.run_for(1_000)
    on_slave = dispatched(sim, "slave")
    ok = {f"key-{i}" for i, status in acked.items() if status is OK}
    assert len(ok) > 100
    assert on_slave == [f"key-{i}" for i in range(len(on_slave))]  # a prefix, in order, no gap
    acked_not_on_slave = ok - set(on_slave)
    lost_by_master_disk = ok - _recovered_master_keys(sim)
    assert lost_by_master_disk  # ASYNC_FLUSH: the master's own disk lost acknowledged messages
    if mode == "sync":
        assert acked_not_on_slave == set()  # every acknowledged message survives on the slave
        assert len(acked) < len(sent)  # the send in flight at the crash was never acknowledged
    else:
        # Acknowledged at once, replicated within ~100 ms: the unreplicated tail is lost with the master.
        assert 1 <= len(acked_not_on_slave) <= 16
        assert acked_not_on_slave <= lost_by_master_disk  # not on the master's disk either: gone


def test_partition_then_heal_resumes_replication():
    sim = world(20, BrokerRole.SYNC_MASTER, inSyncReplicas=2)
    put_many(sim, 0, 10)
    wait_caught_up(sim)
    sim.nemesis.partition(["master"], ["slave"])
    during = put_many(sim, 10, 5)
    sim.run_for(3_100)
    assert [f.result().put_message_status for f in during] == [PutMessageStatus.FLUSH_SLAVE_TIMEOUT] * 5
    sim.run_for(22_000)  # both ends: nothing read for haHousekeepingInterval
    assert [e.fields["reason"].split(":")[0] for e in ha_closes(sim, "master")] == ["housekeeping"]
    assert [e.fields["reason"].split(":")[0] for e in ha_closes(sim, "slave")] == ["housekeeping"]
    assert broker(sim, "master").ha.connection_list == []
    sim.nemesis.heal()
    took = wait_caught_up(sim)
    assert took <= 10_500  # the next reconnect (a connect timeout plus the 5 s retry wait at most)
    assert put_and_wait(sim, 15).put_message_status is OK
    assert_slave_files_identical(sim)
    assert dispatched(sim, "slave") == [f"key-{i}" for i in range(16)]


def _scenario_trace(seed: int) -> tuple[str, list]:
    sim = world(seed, BrokerRole.SYNC_MASTER, inSyncReplicas=2)
    sim.run_for(6_000)
    put_many(sim, 0, 20)
    sim.run_for(1_000)
    sim.nemesis.suspend("slave")
    put_many(sim, 20, 3)
    sim.run_for(3_500)
    sim.nemesis.resume("slave")
    sim.run_for(12_000)  # idle: heartbeats both ways
    h = trace_hash(sim.tracer.events)
    return h, sim.tracer.events


def test_trace_shows_the_ha_protocol_and_is_deterministic():
    h1, evs = _scenario_trace(21)
    h2, _ = _scenario_trace(21)
    assert h1 == h2
    ha = [e for e in evs if e.kind in ("frame.send", "frame.recv") and e.fields.get("proto") == "ha"]
    names = {(e.node, e.kind, e.fields["name"]) for e in ha}
    assert names == {("master", "frame.send", "transfer"), ("master", "frame.send", "heartbeat"),
                     ("master", "frame.recv", "report"), ("slave", "frame.send", "report"),
                     ("slave", "frame.recv", "transfer"), ("slave", "frame.recv", "heartbeat")}
    sizes = {e.fields["name"]: e.fields["size"] - e.fields.get("body_size", 0) for e in ha}
    assert sizes == {"transfer": 12, "heartbeat": 12, "report": 8}
    # A heartbeat follows the master's previous write after haSendHeartbeatInterval (+ the 100 ms poll).
    master_sends = [e for e in ha if e.node == "master" and e.kind == "frame.send"]
    gaps = [b.time_ms - a.time_ms for a, b in zip(master_sends, master_sends[1:]) if b.fields["name"] == "heartbeat"]
    assert len(gaps) >= 2 and all(5_000 < g <= 5_101 for g in gaps)
    reports = [e.time_ms for e in ha if e.node == "slave" and e.kind == "frame.send"]
    assert max(b - a for a, b in zip(reports, reports[1:])) <= 5_002  # a report at least every 5 s
    states = [(e.fields["from"], e.fields["to"]) for e in evs if e.kind == "state" and e.node == "slave"]
    assert states == [(None, "READY"), ("READY", "TRANSFER")]
    assert any(e.kind == "offset" and e.node == "slave" and e.fields["which"] == "written" for e in evs)


def _master_restarted_behind_its_slave(seed: int, **master_overrides) -> tuple[Simulation, dict, int]:
    """A SYNC_MASTER (inSyncReplicas=2, ASYNC_FLUSH) loses power under load and restarts without
    its unflushed tail, which its slave already holds; 30 s later the slave has reconnected.
    Returns the simulation, the sends acknowledged before the crash and the slave's max offset."""
    sim = world(seed, BrokerRole.SYNC_MASTER, inSyncReplicas=2, **master_overrides)
    sim.run_for(6_000)
    acked: dict[int, PutMessageStatus] = {}
    _produce(sim, 400, 7, acked, [])
    sim.run_for(1_001.3)
    sim.nemesis.crash("master")
    slave_max = broker(sim, "slave").store.get_max_phy_offset()
    sim.nemesis.restart("master")
    sim.run_for(30_000)  # the slave notices (housekeeping) and reconnects
    assert broker(sim, "master").store.get_max_phy_offset() < slave_max  # the master lost its unflushed tail
    return sim, acked, slave_max


def commitlog(sim: Simulation, name: str) -> bytes:
    """A store's commitlog files end to end (every test log starts at offset 0)."""
    files = commitlog_files(sim, name)
    assert [int(f) for f in files] == [i * COMMITLOG for i in range(len(files))]
    return b"".join(files.values())


def test_a_slave_ahead_of_its_restarted_master_acknowledges_what_it_does_not_hold():
    """RocketMQ's classic HA after the master lost its tail (DefaultHAConnection, DefaultHAClient):

    * the slave's first report (its max offset, beyond the master's log) is taken as the request
      and ack offset: every SYNC_MASTER put that ends below it is PUT_OK at once, though the slave
      holds other bytes there (the lost tail);
    * the master's WriteSocketService starts at the request offset and heartbeats there until its
      own log reaches it, then streams from it; the header offset equals the slave's max offset, so
      DefaultHAClient's check ("master pushed offset not equal the max phy offset in slave") passes
      and the slave appends the master's bytes from the middle of a record;
    * the slave's dispatcher (ReputMessageService) meets that invalid record and stops there for
      good: the slave never serves what the master acknowledged after the restart.
    """
    sim, _acked, slave_max = _master_restarted_behind_its_slave(22)
    master, slave = broker(sim, "master"), broker(sim, "slave")
    lost_at = master.store.get_max_phy_offset()
    assert [c.slave_request_offset for c in master.ha.connection_list] == [slave_max]  # accepted
    assert not [e for e in ha_closes(sim, "master") if "outside" in e.fields["reason"]]
    results = [put_and_wait(sim, 1_000 + i) for i in range(60)]
    assert [r.put_message_status for r in results] == [OK] * 60  # all acknowledged as replicated
    sim.run_for(1_000)
    end = master.store.get_max_phy_offset()
    assert end > slave_max and caught_up(sim)  # by the offsets, the slave holds everything
    m, s = commitlog(sim, "master"), commitlog(sim, "slave")
    assert m[:lost_at] == s[:lost_at]                     # the common prefix
    assert m[lost_at:slave_max] != s[lost_at:slave_max]   # the master's new messages vs the lost tail
    assert m[slave_max:end] == s[slave_max:end]           # the stream resumed mid-record
    # The slave's dispatcher stopped at the splice: nothing after it is readable on the slave.
    assert slave.store.dispatch_behind_bytes() == end - slave_max
    on_slave = set(keys(slave.store))
    after_restart = {f"key-{1_000 + i}" for i in range(60)}
    assert after_restart <= set(keys(master.store)) and not after_restart & on_slave


def test_a_slave_ahead_of_its_restarted_master_is_refused_with_the_rmqlab_guard():
    """rmqlabRejectImpossibleHaReport=true (not a RocketMQ key): the slave's report beyond the
    master's log closes the connection, so the slave's log stays intact and a sync put times out
    (as long as the master's log stays shorter than the slave's: tests/test_modes.py shows the
    guard giving way once it is longer)."""
    sim, acked, slave_max = _master_restarted_behind_its_slave(22, rmqlabRejectImpossibleHaReport=True)
    refusals = [e for e in ha_closes(sim, "master") if "outside" in e.fields["reason"]]
    assert len(refusals) >= 2 and f"offset {slave_max} " in refusals[0].fields["reason"]
    assert put_and_wait(sim, 1_000).put_message_status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    assert broker(sim, "slave").store.get_max_phy_offset() == slave_max  # nothing appended mid-message
    on_slave = dispatched(sim, "slave")
    assert on_slave == [f"key-{i}" for i in range(len(on_slave))]
    assert {f"key-{i}" for i in acked} <= set(on_slave)  # still holds every acknowledged message


def test_flow_control_limits_each_second_and_replication_still_completes():
    # Quirk kept from RocketMQ: only the 12-byte headers are counted, so a 120-byte budget allows
    # batches of 120, 108, ... bytes per second rather than 120 bytes.
    sim = world(23, haFlowControlEnable=True, maxHaTransferByteInSecond=120)
    sim.run_for(6_000)
    put_many(sim, 0, 2)
    took = wait_caught_up(sim)
    assert took > 2_000
    transfers = events(sim, "frame.send", "master", proto="ha", name="transfer")
    by_second: dict[int, list[int]] = {}
    for e in transfers:
        by_second.setdefault(int(e.time_ms + sim.epoch_ms) // 1000, []).append(e.fields["body_size"])
    assert all(len(sizes) <= 10 and sum(sizes) <= 660 for sizes in by_second.values())
    assert dispatched(sim, "slave") == ["key-0", "key-1"]


def test_real_runtime_replicates_with_sync_acks(tmp_path):
    """The same services over TCP on the wall clock (short intervals keep it quick)."""
    import time

    from rmqlab.runtime.real import RealNode
    from rmqlab.trace import Tracer

    async def scenario():
        tracer = Tracer(lambda: time.time() * 1000)
        nodes = {n: RealNode(n, str(tmp_path / n), tracer=tracer) for n in ("master", "slave")}
        fast = dict(haSendHeartbeatInterval=200, haHousekeepingInterval=2_000)
        master = HABroker(BrokerRole.SYNC_MASTER, 0, inSyncReplicas=2, **fast)
        await master.start(nodes["master"])
        slave = HABroker(BrokerRole.SLAVE, 0, f"127.0.0.1:{master.ha.ha_listen_port}", **fast)
        await slave.start(nodes["slave"])
        try:
            for i in range(50):
                done = asyncio.get_running_loop().create_future()
                master.store.async_put_message(make_message(nodes["master"].now_ms, i)).then_accept(done.set_result)
                result = await asyncio.wait_for(done, 10)
                assert result.put_message_status is OK
                assert slave.store.get_max_phy_offset() >= result.append_message_result.next_offset
            for _ in range(100):
                if slave.store.dispatch_behind_bytes() == 0:
                    break
                await asyncio.sleep(0.02)
            assert keys(slave.store) == [f"key-{i}" for i in range(50)]
            assert {e.fields["name"] for e in tracer.events if e.kind == "frame.send"} >= {"transfer", "report"}
        finally:
            for b in (slave, master):
                await b.shutdown()
            for n in nodes.values():
                await n.close()

    os.makedirs(tmp_path / "master")
    os.makedirs(tmp_path / "slave")
    asyncio.run(asyncio.wait_for(scenario(), 30))
