"""Controller-mode HA (RocketMQ's ``store/.../ha/autoswitch/``): AutoSwitchHAService, its protocol core, and the
replication of two brokers' stores on the simulator, with a divergent tail cut in the handshake.

The frame fixtures are hand-computed from the packet layouts of AutoSwitchHAClient and
AutoSwitchHAConnection (big-endian, as Java's ByteBuffer).
"""

from __future__ import annotations

import os
import struct

import pytest

from rmqlab.common.manual_clock import ManualClock
from rmqlab.config.broker import BrokerRole
from rmqlab.ha.autoswitch import AutoSwitchHAService
from rmqlab.ha.autoswitch import auto_switch_ha_protocol as p
from rmqlab.ha.autoswitch.auto_switch_ha_protocol import (CLIENT_TRANSITIONS, CONNECTION_TRANSITIONS, HANDSHAKE,
                                                          READY, SHUTDOWN, SUSPEND, TRANSFER, ClientProtocol,
                                                          ConnectionProtocol, HAProtocolError, MasterFrameDecoder,
                                                          MasterHandshake, MasterTransfer, SlaveAck,
                                                          SlaveFrameDecoder, SlaveHandshake, SyncStateSetState,
                                                          all_ack_transfer_ok, caught_up_time_on_ack,
                                                          compute_confirm_offset, decide_write_ack, do_truncate,
                                                          next_state, plan_batch, reported_confirm_offset,
                                                          transfer_start_offset)
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.runtime.component import Component
from rmqlab.store import store_truncation
from rmqlab.store.put_message_result import PutMessageStatus
from tests.store_helpers import make_message, open_store, read_queue
from tests.autoswitch_helpers import COMMITLOG, HA_PORT, TOPIC, ControllerModeBroker, b, put, world

OK = PutMessageStatus.PUT_OK
E = EpochEntry


# --- frames: byte-exact fixtures --------------------------------------------------------------
def test_slave_handshake_is_16_bytes():
    frame = p.encode_slave_handshake(True, False, 2)
    assert frame == bytes.fromhex("00000001" "0001" "0000" "0000000000000002")
    assert p.encode_slave_handshake(False, True, 0x0102030405060708) == bytes.fromhex(
        "00000001" "0000" "0001" "0102030405060708")
    d = SlaveFrameDecoder()
    d.feed(frame)
    assert d.next_frame(0) == SlaveHandshake(True, False, 2) and d.buffered() == 0


def test_slave_ack_is_12_bytes():
    frame = p.encode_slave_ack(0x1234)
    assert frame == bytes.fromhex("00000002" "0000000000001234")
    d = SlaveFrameDecoder()
    d.feed(frame)
    assert d.next_frame(0x1234) == SlaveAck(0x1234)


def test_master_handshake_header_and_entry_list():
    frame = p.encode_master_handshake(1000, 2, [E(1, 0), E(2, 500)])
    assert frame == bytes.fromhex("00000001" "00000018" "00000000000003e8" "00000002"
                                  "00000001" "0000000000000000" "00000002" "00000000000001f4")
    assert len(frame) == 20 + 2 * 12
    d = MasterFrameDecoder()
    d.feed(frame)
    got = d.next_frame(HANDSHAKE)
    assert got == MasterHandshake(1000, 2, (E(1, 0), E(2, 500))) and got.wire_size == 44  # ends are not sent
    # An empty master: no entries, last epoch -1.
    assert p.encode_master_handshake(0, -1, []) == bytes.fromhex("00000001" "00000000" "0000000000000000" "ffffffff")


def test_master_transfer_header_is_36_bytes_before_the_batch():
    frame = p.encode_master_transfer(500, 2, 500, 400, b"abc")
    assert frame == bytes.fromhex("00000002" "00000003" "00000000000001f4" "00000002" "00000000000001f4"
                                  "0000000000000190" "616263")
    d = MasterFrameDecoder()
    d.feed(frame[:35])
    assert d.next_frame(TRANSFER) is None  # the header is not complete
    d.feed(frame[35:38])
    assert d.next_frame(TRANSFER) is None  # nor the body
    d.feed(frame[38:])
    assert d.next_frame(TRANSFER) == MasterTransfer(500, 2, 500, 400, b"abc")
    heartbeat = p.encode_master_transfer(700, 3, 650, 690)
    assert heartbeat == bytes.fromhex("00000002" "00000000" "00000000000002bc" "00000003" "000000000000028a"
                                      "00000000000002b2")
    d.feed(heartbeat)
    assert d.next_frame(TRANSFER).is_heartbeat


def test_legacy_5_0_handshake_is_history_only():
    frame = p.encode_legacy_slave_handshake(False, True, "10.0.0.2:10912")
    assert frame == bytes.fromhex("00000001" "0000" "0001" "0000000e") + b"10.0.0.2:10912"
    assert p.decode_legacy_slave_handshake(frame) == p.LegacySlaveHandshake(False, True, "10.0.0.2:10912")
    with pytest.raises(HAProtocolError, match="short 5.0 handshake: 8 bytes"):
        p.decode_legacy_slave_handshake(frame[:8])
    with pytest.raises(HAProtocolError, match="header and address make 26"):
        p.decode_legacy_slave_handshake(frame[:-1])
    with pytest.raises(ValueError, match="longer than the 50 bytes"):
        p.encode_legacy_slave_handshake(False, False, "x" * 51)
    # The current master does not speak it: the address bytes are read as a broker id.
    d = SlaveFrameDecoder()
    d.feed(frame[:16])
    assert d.next_frame(0).slave_broker_id == int.from_bytes(b"\x00\x00\x00\x0e10.0", "big")


@pytest.mark.parametrize("data, error", [
    (struct.pack(">iq", 7, 0), "state field is 7 (unknown state 7), expected HANDSHAKE (1) or TRANSFER (2)"),
    (struct.pack(">iq", 0, 0), "state field is 0 (READY)"),
    (struct.pack(">ihhq", 1, 2, 0, 1), "flag isSyncFromLastFile is 2, expected 0 or 1"),
    (struct.pack(">ihhq", 1, 0, -1, 1), "flag isAsyncLearner is -1"),
    (struct.pack(">ihhq", 1, 0, 0, -5), "slaveBrokerId -5 is negative"),
    (b"GET / HTTP/1.1\r\n", "state field is 1195725856"),
])
def test_malformed_slave_frames_are_rejected(data, error):
    d = SlaveFrameDecoder()
    d.feed(data)
    with pytest.raises(HAProtocolError, match=error.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        d.next_frame(1000)


@pytest.mark.parametrize("offset", [1001, -1, 2**62])
def test_an_ack_the_masters_log_cannot_explain_is_taken_as_rocketmq_does_unless_the_rmqlab_guard_is_on(offset):
    """AutoSwitchHAConnection's reader takes any 8 bytes as the slave's offset; refusing an ack
    beyond the master's log is rmqlab's option rmqlabRejectImpossibleHaReport."""
    d = SlaveFrameDecoder()
    d.feed(struct.pack(">iq", 2, offset))
    assert d.next_frame(1000) == SlaveAck(offset)
    d.feed(struct.pack(">iq", 2, offset))
    with pytest.raises(HAProtocolError, match=rf"offset {offset} is outside \[0, 1000\].*rmqlabRejectImpossibleHaReport"):
        d.next_frame(1000, reject_impossible=True)


def test_short_slave_frames_wait_for_the_rest():
    d = SlaveFrameDecoder()
    frame = p.encode_slave_handshake(False, False, 3)
    # Java would already decode here (AutoSwitchHAConnection checks 12 bytes); rmqlab waits for 16.
    d.feed(frame[:12])
    assert d.next_frame(0) is None
    d.feed(frame[12:] + p.encode_slave_ack(5)[:11])
    assert d.next_frame(10) == SlaveHandshake(False, False, 3)
    assert d.next_frame(10) is None and d.buffered() == 11


@pytest.mark.parametrize("frame, state, error", [
    (p.encode_master_transfer(0, 1, 0, 0), HANDSHAKE, "master sent a TRANSFER frame while the slave is in HANDSHAKE"),
    (p.encode_master_handshake(0, -1, []), TRANSFER, "master sent a HANDSHAKE frame while the slave is in TRANSFER"),
    (struct.pack(">iiqi", 1, 13, 0, 1), HANDSHAKE, "body size 13 is not a whole number"),
    (struct.pack(">iiqi", 1, 12 * 1001, 0, 1), HANDSHAKE, "body size 12012"),
    (struct.pack(">iiqi", 1, 0, -3, -1), HANDSHAKE, "max offset -3 is negative"),
    (struct.pack(">iiqi", 1, 24, 9, 1) + struct.pack(">iqiq", 2, 0, 1, 5), HANDSHAKE,
     "bad epoch entry list: .*entry #2 .epoch 1, start 5. does not follow"),
    (struct.pack(">iiqi", 1, 12, 9, 3) + struct.pack(">iq", 2, 0), HANDSHAKE, "header says last epoch 3"),
    (struct.pack(">iiqi", 1, 12, 9, -1) + struct.pack(">iq", -1, 0), HANDSHAKE, "bad epoch entry list"),
    (struct.pack(">iiqiqq", 2, -1, 0, 1, 0, 0), TRANSFER, "body size -1 outside"),
    (struct.pack(">iiqiqq", 2, 4 * 1024 * 1024, 0, 1, 0, 0), TRANSFER, "body size 4194304 outside"),
    (struct.pack(">iiqiqq", 2, 0, -2, 1, 0, 0), TRANSFER, "offset -2 is negative"),
    (struct.pack(">iiqiqq", 2, 0, 0, -1, 0, 0), TRANSFER, "epoch -1"),
    (struct.pack(">iiqiqq", 4, 0, 0, 1, 0, 0), TRANSFER, "state field is 4 .SHUTDOWN."),
])
def test_malformed_master_frames_are_rejected(frame, state, error):
    d = MasterFrameDecoder()
    d.feed(frame)
    with pytest.raises(HAProtocolError, match=error):
        d.next_frame(state)


# --- state tables -----------------------------------------------------------------------------
def test_client_state_table():
    s = READY
    for event, expected in [("connected", HANDSHAKE), ("truncated", TRANSFER), ("closed", READY),
                            ("suspend", SUSPEND), ("resume", READY), ("connected", HANDSHAKE), ("closed", READY),
                            ("shutdown", SHUTDOWN)]:
        s = next_state(CLIENT_TRANSITIONS, s, event)
        assert s is expected
    with pytest.raises(ValueError, match="no transition from READY on 'truncated'"):
        next_state(CLIENT_TRANSITIONS, READY, "truncated")
    with pytest.raises(ValueError, match="no transition from SHUTDOWN on 'connected'"):
        next_state(CLIENT_TRANSITIONS, SHUTDOWN, "connected")
    assert {k[0] for k in CLIENT_TRANSITIONS} == {READY, HANDSHAKE, TRANSFER, SUSPEND}


def test_connection_adopts_the_slaves_state():
    c = ConnectionProtocol()
    assert c.state is HANDSHAKE
    c.feed(p.encode_slave_handshake(True, True, 7) + p.encode_slave_ack(0))
    frame, moved = c.next_frame(100)
    assert frame == SlaveHandshake(True, True, 7) and moved is None and c.is_slave_send_handshake
    assert (c.slave_id, c.is_sync_from_last_file, c.is_async_learner) == (7, True, True)
    assert c.master_handshake(100, [E(1, 0)]) == p.encode_master_handshake(100, 1, [E(1, 0)])
    assert not c.is_slave_send_handshake
    frame, moved = c.next_frame(100)
    assert frame == SlaveAck(0) and moved == (HANDSHAKE, TRANSFER)
    assert (c.slave_request_offset, c.slave_ack_offset) == (0, 0)
    with pytest.raises(ValueError, match="no transition from SHUTDOWN"):
        c.closed()
        c.closed()
    assert set(CONNECTION_TRANSITIONS.values()) == {HANDSHAKE, TRANSFER, SHUTDOWN}


def test_client_protocol_transfer_checks_and_epoch_changes():
    c = ClientProtocol(now_ms=0)
    c.connected(10, slave_max_offset=300)
    assert c.state is HANDSHAKE and c.current_reported_offset == 300
    with pytest.raises(ValueError, match="refused"):
        c.truncated(p.TruncateDecision(False, None, None, "no"))
    c.truncated(p.TruncateDecision(True, 200, 200, "cut"))
    assert c.state is TRANSFER and c.current_reported_offset == 200
    assert c.check_transfer(MasterTransfer(200, 2, 150, 0), 200) == E(2, 150)
    assert c.check_transfer(MasterTransfer(200, 2, 150, 0), 200) is None  # same epoch: nothing new
    with pytest.raises(HAProtocolError, match="offset gap: master pushed offset 999, the slave's log ends at 200"):
        c.check_transfer(MasterTransfer(999, 2, 150, 0, b"x"), 200)
    assert c.report_plus(200, 20) is None and c.report_plus(250, 21) == p.encode_slave_ack(250)
    assert ClientProtocol.slave_confirm_offset(900, 250) == 250
    c.closed()
    c.connected(30, 250)  # Deviation: the received epoch is forgotten on reconnect
    c.truncated(p.TruncateDecision(True, None, 0, "empty"))
    assert c.check_transfer(MasterTransfer(250, 2, 150, 0), 250) == E(2, 150)


# --- doTruncate (AutoSwitchHAClient; the RIP-44 design doc's cases) ---------------------------
# The six cases of the RIP-44 design doc survive only as one line of prose each (their figures are
# not in RocketMQ's docs/*/controller/design.md nor under docs/*/image/controller/); these are
# scenarios that produce exactly the stated outcomes. A, B, C are brokers; (epoch, start) lists are
# their epoch files.
RIP44_CASES = {
    # (1) A (master, epoch 0) wrote to 1000, B had 900 when A failed; B leads epoch 1 from 900.
    "1": ([E(0, 0)], 1000, [E(0, 0), E(1, 900)], 1300, 900),
    # (2) A lost 900-1000 to an asynchronous flush; B, which had it, leads epoch 1 from 1000.
    "2": ([E(0, 0)], 900, [E(0, 0), E(1, 1000)], 1200, 900),
    # (3) Both hold epoch 1 from 1000; the slave is behind (1200 < 1500): nothing to cut.
    "3": ([E(0, 0), E(1, 1000)], 1200, [E(0, 0), E(1, 1000)], 1500, 1200),
    # (4) A wrote under an epoch (2) the master B never knew; B led epoch 1 from 900 and epoch 3
    #     from 950. A's epoch 2 is skipped and epoch 0 decides: min(1000, 900).
    "4": ([E(0, 0), E(2, 1000)], 1100, [E(0, 0), E(1, 900), E(3, 950)], 1200, 900),
    # (5) Three replicas: A led epoch 1 from 500 to 1000, B had 800, C 900; B leads epoch 2 from
    #     800, and C (like A later) cuts to 800.
    "5": ([E(0, 0), E(1, 500)], 900, [E(0, 0), E(1, 500), E(2, 800)], 1000, 800),
    # (6) The slave holds all of epoch 0 (to 1000) and nothing after: the point is its own end.
    "6": ([E(0, 0)], 1000, [E(0, 0), E(1, 1000)], 1300, 1000),
}


@pytest.mark.parametrize("case", sorted(RIP44_CASES))
def test_do_truncate_rip44_cases(case):
    local, local_max, master, master_max, expected = RIP44_CASES[case]
    d = do_truncate(local, local_max, master, master_max)
    assert d.ok and d.truncate_offset == expected and d.reported_offset == expected
    assert f"truncate to {expected}" in d.reason


@pytest.mark.parametrize("local, master, expected", [
    # Cases from RocketMQ's EpochFileCacheTest (last ends given by each side's max offset).
    ([E(1, 100), E(2, 300), E(3, 500)], [E(1, 100), E(2, 300), E(3, 450)], 450),
    ([E(1, 100), E(2, 300), E(3, 500), E(4, 800)], [E(1, 100), E(2, 300), E(3, 500)], 700),
])
def test_do_truncate_reference_examples(local, master, expected):
    assert do_truncate(local, 900, master, 700).truncate_offset == expected


def test_do_truncate_refuses_without_a_consistent_point():
    d = do_truncate([E(1, 100), E(2, 300)], 600, [E(1, 200), E(2, 500)], 800)
    assert not d.ok and d.truncate_offset is None
    assert d.reason.startswith("no consistent point: no local (epoch, startOffset) [(1, 100), (2, 300)] matches "
                               "one of the master's [(1, 200), (2, 500)]")
    assert "refuses" in d.reason
    # An empty master cache (e.g. its epoch file was lost) gives no consistent point either.
    assert not do_truncate([E(1, 0)], 10, [], 0).ok


def test_do_truncate_new_replica_reports_zero():
    d = do_truncate([], 0, [E(1, 0)], 500)
    assert d.ok and d.truncate_offset is None and d.reported_offset == 0


# --- transfer planning (AutoSwitchHAConnection) -------------------------------------------------
def test_transfer_start_offset():
    assert transfer_start_offset(4096, False, 200_000, 0, 65536) == 4096
    assert transfer_start_offset(0, False, 200_000, 65536, 65536) == 65536    # the master's min offset
    assert transfer_start_offset(0, True, 200_000, 0, 65536) == 196_608       # syncFromLastFile: last file
    assert transfer_start_offset(0, False, 0, -1, 65536) == -1                # no file yet


def test_batches_never_span_epochs():
    entries = [E(1, 0, 1000), E(2, 1000, 1500), E(3, 1500)]
    plan = plan_batch(900, readable=5000, batch_size=32768, allowance=2**31 - 1, entries=entries)
    assert (plan.offset, plan.size, plan.epoch, plan.epoch_start_offset) == (900, 100, 1, 0) and plan.cut_at_epoch_end
    plan = plan_batch(1000, 5000, 32768, 2**31 - 1, entries)
    assert (plan.size, plan.epoch, plan.epoch_start_offset) == (500, 2, 1000)
    plan = plan_batch(1500, 5000, 32768, 2**31 - 1, entries)
    assert (plan.size, plan.epoch, plan.cut_at_epoch_end) == (5000, 3, False)   # the last epoch is open
    assert plan_batch(1500, 50_000, 32768, 100, entries).size == 100            # flow control
    assert plan_batch(1500, 50_000, 32768, 0, entries) is None
    with pytest.raises(LookupError, match="no epoch entry covers offset 5"):
        plan_batch(5, 10, 32768, 100, [E(1, 100)])
    # Walk a whole log: every batch stays inside one epoch and carries it.
    ends = {1: 1000, 2: 1500, 3: 9000}
    offset, batches = 0, []
    while offset < 9000:
        plan = plan_batch(offset, 9000 - offset, 700, 2**31 - 1, entries)
        assert entries[plan.epoch - 1].start_offset <= plan.offset and plan.offset + plan.size <= ends[plan.epoch]
        batches.append((plan.offset, plan.size, plan.epoch))
        offset += plan.size
    assert batches[:4] == [(0, 700, 1), (700, 300, 1), (1000, 500, 2), (1500, 700, 3)]


def test_master_connection_plans_and_heartbeats():
    c = ConnectionProtocol()
    c.feed(p.encode_slave_handshake(False, False, 2) + p.encode_slave_ack(900))
    c.next_frame(2000), c.next_frame(2000)
    assert c.transfer_start(2000, 0, 65536) == 900
    entries = [E(1, 0, 1000), E(2, 1000)]
    plan = plan_batch(900, 1100, 32768, 2**31 - 1, entries)
    header = c.batch(plan, master_max_offset=2000, now_ms=77, confirm_offset=850)
    assert header == p.encode_master_transfer(900, 1, 0, 850, b"\0" * 100)[:36]
    assert (c.next_transfer_from_where, c.last_master_max_offset, c.last_transfer_time_ms) == (1000, 2000, 77)
    assert c.heartbeat(entries, 850) == p.encode_master_transfer(1000, 2, 1000, 850)


# --- SyncStateSet (AutoSwitchHAService) ---------------------------------------------------------
def test_last_caught_up_time():
    assert caught_up_time_on_ack(False, 500, 500, 500, 10, 99) == 99   # caught up with the master's end
    assert caught_up_time_on_ack(False, 500, 500, 600, 10, 99) == 10   # with what the last batch carried
    assert caught_up_time_on_ack(False, 400, 500, 600, 10, 99) is None
    assert caught_up_time_on_ack(True, 600, 500, 600, 10, 99) is None  # an async learner: never


def test_sync_state_set_expand_shrink_and_union():
    s = SyncStateSetState(local_broker_id=1, local={1})
    assert s.maybe_expand(2, ack_offset=400, confirm_offset=500, leader_epoch_start_offset=0) is None
    assert s.maybe_expand(2, 500, 500, leader_epoch_start_offset=600) is None   # not into the leader epoch
    assert s.maybe_expand(2, 600, 500, 600) == {1, 2}
    assert s.is_synchronizing and s.get_sync_state_set() == {1, 2} and s.get_local_sync_state_set() == {1}
    assert s.in_sync_replicas_nums() == 2
    s.set_sync_state_set({1, 2})
    assert not s.is_synchronizing and s.maybe_expand(2, 999, 0, 0) is None
    s.update_connection_last_caught_up_time(2, 10_000)
    s.update_connection_last_caught_up_time(2, 5_000)   # never goes back
    assert s.maybe_shrink(25_000, 15_000) == {1, 2} and not s.is_synchronizing
    assert s.maybe_shrink(25_001, 15_000) == {1}
    assert s.is_synchronizing and s.get_sync_state_set() == {1, 2}  # writes still wait for 2
    s.set_sync_state_set({1, 2, 3})  # 3 never connected: shrunk at once
    s.caught_up[2] = 25_000
    assert s.maybe_shrink(25_001, 15_000) == {1, 2}
    # Only proposed: AutoSwitchHAService.removeConnection does not shrink the local set.
    assert s.on_connection_removed(2) == {1, 3} and s.local == {1, 2, 3}
    assert s.on_connection_removed(9) is None


def test_confirm_offset_and_what_is_reported():
    assert compute_confirm_offset(1000, {1, 2, 3}, 1, [(2, 700), (3, 800)], 500) == 700
    assert compute_confirm_offset(1000, {1, 2, 3}, 1, [(2, 700)], 500) == 500    # 3 disconnected: frozen
    assert compute_confirm_offset(1000, {1, 2}, 1, [(2, 0), (4, 10)], 500) == 1000  # no ack yet / not a member
    assert reported_confirm_offset(False, 1, True, 1000, 500) == 1000   # alone in the set
    assert reported_confirm_offset(False, 2, False, 1000, 500) == 1000  # not waiting for the set
    assert reported_confirm_offset(False, 2, True, 1000, 500) == 500
    assert reported_confirm_offset(True, 1, False, 1000, 500) == 500    # a slave: what it was told


def test_write_ack_rule():
    d = decide_write_ack(in_sync_replicas_nums=1, min_in_sync_replicas=2, in_sync_replicas=2,
                         all_ack_in_sync_state_set=False)
    assert d.refuse is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH and not d.waits
    d = decide_write_ack(2, 2, 2, False)
    assert d.refuse is None and d.need_ack_nums == 2 and d.waits
    d = decide_write_ack(3, 1, 2, True)
    assert d.need_ack_nums == -1 and d.waits  # allAckInSyncStateSet overrides inSyncReplicas
    assert not decide_write_ack(1, 1, 1, False).waits
    assert all_ack_transfer_ok({1}, [], 100)
    assert not all_ack_transfer_ok({1, 2, 3}, [(2, 100), (4, 500)], 100)  # 3 has no connection
    assert all_ack_transfer_ok({1, 2, 3}, [(2, 100), (3, 120)], 100)
    assert not all_ack_transfer_ok({1, 2}, [(2, 99)], 100)


# --- the store's side: truncation and the controller-mode put ----------------------------------
def test_truncate_files_cuts_commitlog_and_consume_queue_consistently(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    ends = [store.put_message(make_message(clock, i)).append_message_result.next_offset for i in range(40)]
    store.reput_message_service.do_reput()
    assert store_truncation.truncate_files(store, ends[19] + 1) is False  # not a message boundary
    assert store.get_max_phy_offset() == ends[-1]
    assert store_truncation.truncate_files(store, ends[19])
    assert store.get_max_phy_offset() == ends[19]
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == [f"key-{i}" for i in range(20)]
    assert store.reput_message_service.reput_from_offset == ends[19]
    r = store.put_message(make_message(clock, 100))  # the queue offset continues from the cut
    assert r.is_ok() and r.append_message_result.logics_offset == 20
    store.reput_message_service.do_reput()
    assert [m.keys for m in read_queue(store, "TopicTest", 0)][-1] == "key-100"
    store.shutdown()


def test_truncate_invalid_msg_cuts_only_a_torn_tail(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    ends = [store.put_message(make_message(clock, i)).append_message_result.next_offset for i in range(5)]
    store.reput_message_service.do_reput()
    assert store_truncation.truncate_invalid_msg(store) == -1  # dispatched: nothing to examine
    store.put_message(make_message(clock, 5))
    store.commit_log.append_data(store.get_max_phy_offset(), b"\x00\x00\x01\x00torn")
    assert store_truncation.truncate_invalid_msg(store) == ends[-1] + (ends[1] - ends[0])
    store.shutdown()


class _FakeHA:
    """An HA service whose in-sync count the test sets; the write-ack rule is the real one."""

    decide_write_ack = AutoSwitchHAService.decide_write_ack

    def __init__(self, n):
        self.n = n

    def in_sync_replicas_nums(self, _offset):
        return self.n


def test_controller_mode_put_refuses_when_in_sync_replicas_are_not_enough(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock, brokerRole=BrokerRole.SYNC_MASTER, minInSyncReplicas=2)
    store.set_ha_service(_FakeHA(1))
    r = store.async_put_message(make_message(clock, 0)).result()
    assert r.put_message_status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH and not r.is_ok()
    assert store.get_max_phy_offset() == 0  # refused before anything was written
    store.set_ha_service(_FakeHA(2))
    store.config.inSyncReplicas = 1
    assert store.async_put_message(make_message(clock, 0)).result().put_message_status is OK
    store.shutdown()


# --- two brokers on the simulator ----------------------------------------------------------------
def commitlog_files(sim, name) -> dict[str, bytes]:
    d = os.path.join(sim.store_dir(name), "commitlog")
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def keys(sim, name) -> list[str]:
    store = b(sim, name).store
    sim.run_until(lambda: store.dispatch_behind_bytes() <= 0, 1_000)
    return [m.keys for m in read_queue(store, TOPIC, 0)]


def events(sim, kind, node=None, **match):
    return [e for e in sim.tracer.events if e.kind == kind and (node is None or e.node == node)
            and all(e.fields.get(k) == v for k, v in match.items())]


def same_max(sim) -> bool:
    return b(sim, "A").store.get_max_phy_offset() == b(sim, "B").store.get_max_phy_offset()


def test_two_brokers_handshake_replicate_expand_then_truncate_a_divergent_tail():
    sim = world(31)
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_slave("A", 1))
    # Epoch 1 data, written while A is alone in its SyncStateSet: no waiting.
    first = [put(sim, "A", i) for i in range(30)]
    assert all(f.done() and f.result().put_message_status is OK for f in first)
    sim.run_until(lambda: same_max(sim), 30_000)
    # The handshake: B's epoch file was empty (a new replica), nothing cut; then B recorded epoch 1.
    assert [e.fields["message"] for e in events(sim, "log", "B") if "doTruncate" in e.fields["message"]] == [
        "doTruncate: the local epoch cache is empty (a new replica): nothing to truncate"]
    states = [(e.fields["from"], e.fields["to"]) for e in events(sim, "state", "B", machine="AutoSwitchHAClient")]
    assert states == [(None, "READY"), ("READY", "HANDSHAKE"), ("HANDSHAKE", "TRANSFER")]
    assert B.ha.get_epoch_entries() == [E(1, 0)]
    sizes = {(e.node, e.fields["name"]): e.fields["size"] - e.fields.get("body_size", 0)
             for e in events(sim, "frame.send", proto="ha")}
    assert sizes == {("B", "handshake"): 16, ("B", "ack"): 12, ("A", "handshake"): 20, ("A", "transfer"): 36,
                     ("A", "heartbeat"): 36}
    # B's ack reached the confirm offset: A asks the controller to expand; the test answers for it.
    sim.run_until(lambda: A.alter_requests, 1_000)
    assert A.alter_requests[0] == {1, 2}
    A.ha.set_sync_state_set({1, 2})
    # allAckInSyncStateSet: a put now completes only once B holds it.
    f = put(sim, "A", 30)
    assert not f.done()
    sim.run_until(f.done, 1_000)
    assert f.result().put_message_status is OK
    assert B.store.get_max_phy_offset() >= f.result().append_message_result.next_offset
    committed = A.store.get_max_phy_offset()
    sim.run_for(6_000)  # a heartbeat carries the confirm offset; B builds its queue up to it
    assert keys(sim, "B") == [f"key-{i}" for i in range(31)]

    # B is cut off; A keeps writing: each put times out waiting for B, but stays in A's log.
    sim.nemesis.partition(["A"], ["B"])
    tail = [put(sim, "A", i) for i in range(100, 105)]
    sim.run_for(3_100)
    assert [t.result().put_message_status for t in tail] == [PutMessageStatus.FLUSH_SLAVE_TIMEOUT] * 5
    assert A.store.get_max_phy_offset() > committed
    assert A.ha.get_confirm_offset() == committed  # the divergent tail is not confirmed ...
    assert keys(sim, "A") == [f"key-{i}" for i in range(31)]  # ... so nobody can read it
    # The controller elects B (epoch 2); A, isolated, is told to follow it.
    assert sim.run(B.become_master(2, {2}))
    assert B.ha.get_epoch_entries() == [E(1, 0, committed), E(2, committed)]
    epoch2 = [put(sim, "B", i) for i in range(200, 240)]
    assert all(f.result().put_message_status is OK for f in epoch2)
    assert sim.run(A.become_slave("B", 2))
    assert A.ha.change_to_slave("B", 0, 1) is False  # an epoch older than its epoch file is refused
    sim.nemesis.heal()
    sim.run_until(lambda: same_max(sim), 40_000)
    decision = A.ha.get_ha_client().last_truncate_decision
    assert decision.ok and decision.truncate_offset == committed
    assert decision.reason.startswith(f"consistent epoch 1: truncate to {committed}")
    # Byte-identical logs and epoch files; the divergent messages are gone from the queue too.
    assert commitlog_files(sim, "A") == commitlog_files(sim, "B")
    assert A.ha.get_epoch_entries() == B.ha.get_epoch_entries() == [E(1, 0, committed), E(2, committed)]
    sim.run_for(6_000)
    expected = [f"key-{i}" for i in range(31)] + [f"key-{i}" for i in range(200, 240)]
    assert keys(sim, "B") == expected
    assert keys(sim, "A") == expected
    # Every batch B sent stayed inside one epoch and was labelled with it.
    for e in events(sim, "frame.send", "B", proto="ha", name="transfer"):
        entry = B.ha.epoch_cache.get_entry(e.fields["epoch"])
        assert entry.start_offset <= e.fields["offset"]
        assert e.fields["offset"] + e.fields["body_size"] <= entry.end_offset


def test_slave_without_a_consistent_point_refuses_and_keeps_its_log():
    sim = world(32)
    A, B = b(sim, "A"), b(sim, "B")
    # Two brokers that each led on their own, with unrelated epoch files and data.
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_master(3, {2}))
    for i in range(5):
        put(sim, "A", i)
        put(sim, "B", 100 + i)
    sim.run_for(100)
    A.ha.epoch_cache.init_cache_from_entries([E(1, 0), E(4, 10)])  # no (epoch, start) in common with B
    b_before = commitlog_files(sim, "B")
    assert sim.run(B.become_slave("A", 4))
    sim.run_for(12_000)
    refusals = [e for e in events(sim, "net.close", "B") if e.fields["reason"].startswith("no consistent point")]
    assert len(refusals) >= 2  # refused, waited 2 s + 5 s, retried, refused again
    assert "[(3, 0)] matches one of the master's [(1, 0), (4, 10)]" in refusals[0].fields["reason"]
    assert commitlog_files(sim, "B") == b_before  # nothing cut, nothing appended
    assert B.ha.get_epoch_entries() == [E(3, 0)]
    assert B.ha.get_ha_client().current_state in (READY, HANDSHAKE)


def test_async_learner_never_joins_the_sync_state_set():
    sim = world(33, B={"asyncLearner": True})
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_slave("A", 1))
    for i in range(10):
        put(sim, "A", i)
    sim.run_until(lambda: same_max(sim), 30_000)
    sim.run_for(1_000)
    conn = A.ha.connection_list[0]
    assert conn.is_async_learner() and conn.slave_id == 2 and conn.slave_ack_offset == A.store.get_max_phy_offset()
    assert A.alter_requests == [] and A.ha.get_sync_state_set() == {1}
    assert events(sim, "frame.recv", "A", name="handshake")[0].fields["is_async_learner"] is True


def test_shrink_after_ha_max_time_slave_not_catchup():
    """A slave that cannot keep up (here: HA flow control throttles its link below the write rate)
    stops getting lastCaughtUpTimeMs updates and is dropped after haMaxTimeSlaveNotCatchup.

    Kept from RocketMQ: the write side also stamps a slave caught up whenever it has sent
    everything, acked or not, so a silent partition is noticed by housekeeping (the disconnect
    proposes the shrink, see the next test) rather than by this timer."""
    sim = world(37)
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_slave("A", 1))
    put(sim, "A", 0)
    sim.run_until(lambda: A.alter_requests, 30_000)
    A.ha.set_sync_state_set({1, 2})
    A.config.allAckInSyncStateSet = False  # the writes below must not wait for the slow slave
    A.config.haFlowControlEnable, A.config.maxHaTransferByteInSecond = True, 2_000
    results, kept = [], []
    for i in range(1, 150):  # ~5 KiB/s of writes for 30 s
        results.append(put(sim, "A", i))
        sim.run_for(200)
        if i % 5 == 0:
            caught_up = A.ha.sync_state.caught_up[2]
            shrunk = A.ha.maybe_shrink_sync_state_set()
            if shrunk == {1}:
                break
            kept.append(sim.nodes["A"].now_ms() - caught_up)
    assert shrunk == {1} and sim.nodes["A"].now_ms() - caught_up > A.config.haMaxTimeSlaveNotCatchup
    assert kept and max(kept) <= A.config.haMaxTimeSlaveNotCatchup
    assert all(r.result().put_message_status is OK for r in results)
    assert B.store.get_max_phy_offset() < A.store.get_max_phy_offset()
    assert A.ha.get_sync_state_set() == {1, 2} and A.ha.in_sync_replicas_nums(0) == 2  # until confirmed
    A.ha.set_sync_state_set({1})
    assert A.ha.in_sync_replicas_nums(0) == 1 and A.ha.get_sync_state_set() == {1}


def test_disconnect_proposes_a_shrink_and_min_in_sync_replicas_refuses_writes():
    sim = world(34, A={"minInSyncReplicas": 2, "allAckInSyncStateSet": False, "inSyncReplicas": 2})
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    f = put(sim, "A", 0)
    assert f.result().put_message_status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
    assert sim.run(B.become_slave("A", 1))
    sim.run_until(lambda: A.alter_requests, 30_000)
    A.ha.set_sync_state_set(A.alter_requests[-1])
    assert A.ha.get_sync_state_set() == {1, 2}
    f = put(sim, "A", 1)
    sim.run_until(f.done, 1_000)
    assert f.result().put_message_status is OK  # inSyncReplicas=2: B's ack
    sim.nemesis.crash("B")
    sim.run_for(25_000)  # housekeeping closes A's end of the connection
    assert A.alter_requests[-1] == {1}
    assert A.ha.get_local_sync_state_set() == {1, 2}  # unchanged until the controller confirms
    A.ha.set_sync_state_set({1})
    assert put(sim, "A", 2).result().put_message_status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH


def test_sync_from_last_file_starts_a_new_replica_at_the_masters_last_file():
    sim = world(35, B={"syncFromLastFile": True})
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    for i in range(150):
        put(sim, "A", i)
    assert sim.run(B.become_slave("A", 1))
    sim.run_until(lambda: same_max(sim), 30_000)
    last_file = A.store.get_max_phy_offset() - A.store.get_max_phy_offset() % COMMITLOG
    assert last_file > 0 and B.store.get_min_phy_offset() == last_file
    assert list(commitlog_files(sim, "B")) == [f"{last_file:020d}"]
    assert commitlog_files(sim, "B")[f"{last_file:020d}"] == commitlog_files(sim, "A")[f"{last_file:020d}"]
    first_send = events(sim, "frame.send", "A", proto="ha", name="transfer")[0]
    assert first_send.fields["offset"] == last_file and first_send.fields["epoch"] == 1


class Idle(Component):
    component_type = "client"

    async def start(self, node) -> None:
        self.node = node


def test_a_malformed_frame_closes_only_its_connection():
    sim = world(38)
    A, B = b(sim, "A"), b(sim, "B")
    sim.add_node("junk", Idle)
    sim.start("junk")
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_slave("A", 1))
    put(sim, "A", 0)
    sim.run_until(lambda: same_max(sim), 30_000)
    real = A.ha.connection_list[0]

    async def send(garbage):
        reader, writer = await sim.nodes["junk"].connect("127.0.0.1", HA_PORT["A"])
        writer.write(garbage)
        while await reader.read(65536):
            pass

    sim.run(send(struct.pack(">ihhq", 1, 0, 7, 3)))
    sim.run(send(b"GET / HTTP/1.1\r\n"))
    reasons = [e.fields["reason"] for e in events(sim, "net.close", "A")]
    assert reasons == ["slave handshake: flag isAsyncLearner is 7, expected 0 or 1",
                       "slave frame: state field is 1195725856 (unknown state 1195725856), expected HANDSHAKE (1) "
                       "or TRANSFER (2)"]
    assert A.ha.connection_list == [real] and real.close_reason is None
    put(sim, "A", 1)
    sim.run_until(lambda: same_max(sim), 1_000)


@pytest.mark.parametrize("guard", [False, True])
def test_a_forged_ack_beyond_the_log_expands_the_sync_state_set_unless_the_rmqlab_guard_is_on(guard):
    """Any peer that speaks the handshake and then acks past the master's log counts as a replica
    holding all of it (RocketMQ: AutoSwitchHAConnection takes the ack, maybeExpandInSyncStateSet).
    rmqlabRejectImpossibleHaReport closes such a connection instead."""
    sim = world(39, A={"rmqlabRejectImpossibleHaReport": guard})
    A = b(sim, "A")
    sim.add_node("junk", Idle)
    sim.start("junk")
    assert sim.run(A.become_master(1, {1}))
    put(sim, "A", 0)
    sim.run_for(100)
    forged = p.encode_slave_handshake(False, False, 7) + p.encode_slave_ack(A.store.get_max_phy_offset() + 10**6)

    async def forge():
        reader, writer = await sim.nodes["junk"].connect("127.0.0.1", HA_PORT["A"])
        writer.write(forged)
        while await reader.read(65536):
            pass

    sim.nodes["junk"].spawn(forge(), name="forger")
    sim.run_for(3_000)
    if guard:
        assert A.alter_requests == []
        assert any("rmqlabRejectImpossibleHaReport" in e.fields["reason"] for e in events(sim, "net.close", "A"))
    else:
        assert A.alter_requests and A.alter_requests[0] == {1, 7}


def test_trace_is_deterministic():
    def run(seed):
        sim = world(seed)
        A, B = b(sim, "A"), b(sim, "B")
        sim.run(A.become_master(1, {1}))
        sim.run(B.become_slave("A", 1))
        for i in range(20):
            put(sim, "A", i)
        sim.run_for(8_000)
        out = [(e.node, e.kind, e.time_ms, sorted(e.fields.items())) for e in sim.tracer.events
               if e.kind in ("frame.send", "frame.recv", "state", "epoch")]
        sim.close()
        return out

    assert run(36) == run(36)


def test_real_runtime_handshake_and_all_ack_writes(tmp_path):
    """The same services over TCP on the wall clock (short intervals keep it quick)."""
    import asyncio
    import time

    from rmqlab.runtime.real import RealNode
    from rmqlab.trace import Tracer

    async def scenario():
        tracer = Tracer(lambda: time.time() * 1000)
        nodes = {n: RealNode(n, str(tmp_path / n), tracer=tracer) for n in ("A", "B")}
        fast = dict(haSendHeartbeatInterval=200, haHousekeepingInterval=2_000)
        A, B = ControllerModeBroker("A", 0, **fast), ControllerModeBroker("B", 0, **fast)
        await A.start(nodes["A"])
        await B.start(nodes["B"])
        try:
            assert await A.become_master(1, {1})
            assert await B.become_slave("A", 1, f"127.0.0.1:{A.ha.ha_listen_port}")
            for _ in range(250):
                if A.alter_requests:
                    break
                await asyncio.sleep(0.02)
            assert A.alter_requests == [{1, 2}]
            A.ha.set_sync_state_set({1, 2})
            for i in range(20):
                done = asyncio.get_running_loop().create_future()
                A.store.async_put_message(make_message(nodes["A"].now_ms, i)).then_accept(
                    done.set_result)
                result = await asyncio.wait_for(done, 10)
                assert result.put_message_status is OK
                assert B.store.get_max_phy_offset() >= result.append_message_result.next_offset
            assert B.ha.get_epoch_entries() == [E(1, 0)]
            names = {(e.node, e.fields["name"]) for e in tracer.events if e.kind == "frame.send"}
            assert names >= {("B", "handshake"), ("B", "ack"), ("A", "handshake"), ("A", "transfer")}
        finally:
            for broker in (B, A):
                await broker.shutdown()
            for n in nodes.values():
                await n.close()

    os.makedirs(tmp_path / "A")
    os.makedirs(tmp_path / "B")
    asyncio.run(asyncio.wait_for(scenario(), 30))
