"""Lab 03's pieces: the frame stepper (determinism, its widget), the frame inspector against the HA
protocols' byte layouts, the sequence diagram's matching, and the SyncStateSet figure on a seeded
shrink and expand. Also the reference solution of the lab's exercise 1 (labs/ ships the stub)."""

from __future__ import annotations

import struct

import pytest

from rmqlab.cluster import Cluster
from rmqlab.ha import default_ha_protocol as classic
from rmqlab.ha.autoswitch import auto_switch_ha_protocol as autoswitch
from rmqlab.ha.ha_protocol import HEX_BODY_PREVIEW
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.trace import trace_hash
from rmqlab.viz.frames import (AUTOSWITCH, CLASSIC, annotate, check_transfer_decoder, format_frame, frame_figure,
                               frame_html, protocol_table, transfer_samples)
from rmqlab.viz.lamport import lamport_figure, match_frames
from rmqlab.viz.stepper import FrameStepper
from rmqlab.viz.sync_state_set import (broker_nodes, describe_history, proposals, sync_state_set_figure,
                                       sync_state_set_history)

HA_FRAMES = ("frame.send", "frame.recv")


def decode_transfer_header(data: bytes) -> dict:
    """Exercise 1's reference solution: AutoSwitchHAConnection's 36-byte TRANSFER header."""
    state, body_size, offset, epoch, epoch_start_offset, confirm_offset = struct.unpack_from(">iiqiqq", data)
    return {"state": state, "body_size": body_size, "offset": offset, "epoch": epoch,
            "epoch_start_offset": epoch_start_offset, "confirm_offset": confirm_offset}


def _returning_slave(seed: int, kill: str, restart_slave_of: str, mode: str, **cluster_options) -> Cluster:
    """Section 2 of the lab: write, kill a slave's process, write more (the stepper starts next)."""
    c = Cluster(mode, seed=seed, **cluster_options)
    c.start()
    c.create_topic("TopicTest", queues=2)
    c.add_producer("p1", topic="TopicTest", count=20, interval_ms=50, body_size=64)
    c.run_for(8_000)
    c.nemesis.kill(kill)
    c.add_producer("p2", topic="TopicTest", count=20, interval_ms=50, body_size=64)
    c.run_for(2_000)
    return c


def _step(seed: int, steps: int = 8):
    """The lab's handshake walk: returns the cluster, the stepper and what each step showed."""
    c = _returning_slave(seed, "broker-n2", "broker-n0", "controller-embedded", controllers=1)
    stepper = FrameStepper(c, ["broker-n2", "broker-n0"])
    c.nemesis.restart("broker-n2")
    shown = []
    for _ in range(steps):
        hop = stepper.deliver_next()
        assert hop is not None and hop.delivered
        shown.append((hop.src, hop.dst, hop.name, hop.recv.time_ms, hop.recv.fields["hex"], stepper.describe()))
    return c, stepper, shown


@pytest.fixture(scope="module")
def stepped():
    c, stepper, shown = _step(7)
    yield c, stepper, shown
    c.close()


@pytest.fixture(scope="module")
def classic_run():
    c = _returning_slave(7, "broker-a-s", "broker-a", "2m-2s-async")
    stepper = FrameStepper(c, ["broker-a-s", "broker-a"])
    c.nemesis.restart("broker-a-s")
    hops = stepper.deliver(4)
    yield c, hops
    c.close()


# -- the stepper --------------------------------------------------------------------------------
def test_the_stepper_walks_the_handshake_then_the_transfer(stepped):
    _, stepper, shown = stepped
    names = [(src, dst, name) for src, dst, name, *_ in shown]
    assert names[:6] == [("broker-n2", "broker-n0", "handshake"), ("broker-n0", "broker-n2", "handshake"),
                         ("broker-n2", "broker-n0", "ack"), ("broker-n0", "broker-n2", "heartbeat"),
                         ("broker-n0", "broker-n2", "transfer"), ("broker-n2", "broker-n0", "ack")]
    times = [t for *_, t, _hex, _text in shown]
    assert times == sorted(times)
    # The first ack waits for the periodic report: haSendHeartbeatInterval after the handshake.
    assert 4_900 <= times[2] - times[1] <= 5_100
    # Each step shows the receiver's reaction: after the master's handshake the slave is in
    # TRANSFER and has decided where to truncate.
    after_handshake = shown[1][-1]
    assert "AutoSwitchHAClient TRANSFER" in after_handshake
    assert "doTruncate       consistent epoch 1: truncate to" in after_handshake
    assert stepper.delivered == len(shown)


def test_same_seed_same_steps_same_frames_and_trace(stepped):
    c1, _, shown1 = stepped
    c2, _, shown2 = _step(7)
    try:
        assert shown2 == shown1
        assert trace_hash(c2.events()) == trace_hash(c1.events()[:len(c2.events())])
        assert len(c2.events()) == len(c1.events())
    finally:
        c2.close()


def test_deliver_next_stops_exactly_at_the_frame(stepped):
    """The cursor ends right after the delivered receive and its receiver's reaction at that
    instant: nothing later is shown."""
    c, stepper, _ = stepped
    events = c.events()[:stepper.cursor]
    last_recv = max(i for i, e in enumerate(events) if e.kind == "frame.recv" and e.fields.get("proto") == "ha"
                    and e.node in stepper.nodes)
    assert events[last_recv] is stepper.current.recv
    assert all(e.node == stepper.current.dst and e.time_ms == stepper.current.recv.time_ms
               and e.kind != "frame.recv" for e in events[last_recv + 1:])


def test_the_widget_buttons_step_and_redraw():
    c = _returning_slave(3, "broker-n2", "broker-n0", "controller-embedded", controllers=1)
    try:
        stepper = FrameStepper(c, ["broker-n2", "broker-n0"])
        c.nemesis.restart("broker-n2")
        buttons = {b.description: b for b in stepper.widget.children[0].children}
        assert list(buttons) == ["deliver next", "deliver 10", "run 1 s"]
        assert "rmqlab-roles" in stepper.roles._dom_classes
        before_roles, before_traces = stepper.roles.value, len(stepper.figure.data)
        buttons["deliver next"].click()
        assert stepper.delivered == 1 and stepper.roles.value != before_roles
        assert "handshake" in stepper.roles.value and "slaveBrokerId" in stepper.frame_view.value
        assert len(stepper.figure.data) > before_traces
        buttons["deliver 10"].click()
        assert stepper.delivered == 11
        now = c.sim.now_ms()
        buttons["run 1 s"].click()
        assert c.sim.now_ms() == pytest.approx(now + 1_000)
        assert stepper.cursor == len(c.events())
    finally:
        c.close()


def test_the_stepper_refuses_a_real_cluster_and_one_node():
    class Real:
        runtime = "real"

    with pytest.raises(ValueError, match="simulator"):
        FrameStepper(Real(), ["a", "b"])


# -- the frame inspector against the byte layouts -----------------------------------------------
def _ha_frames(c: Cluster):
    return [e for e in c.events() if e.kind in HA_FRAMES and e.fields.get("proto") == "ha"]


def test_every_ha_frame_carries_its_bytes_and_both_ends_agree(stepped, classic_run):
    for c in (stepped[0], classic_run[0]):
        frames = _ha_frames(c)
        assert frames and all("hex" in e.fields for e in frames)
        hops = match_frames(c.events(), "ha")
        # Every frame received was matched to its send by its bytes.
        assert all(h.send is not None for h in hops if h.recv is not None)
        assert all(h.send.fields["hex"] == h.recv.fields["hex"] for h in hops if h.delivered)


def test_controller_mode_frames_decode_as_the_protocol_encodes_them(stepped):
    kinds = set()
    for e in _ha_frames(stepped[0]):
        ann = annotate(e)
        assert ann.protocol == AUTOSWITCH
        raw = bytes.fromhex(e.fields["hex"])
        got = ann.decoded()
        f = e.fields
        kinds.add((ann.kind, ann.direction))
        if ann.kind == "handshake" and ann.direction == "slave->master":
            assert raw == autoswitch.encode_slave_handshake(f["is_sync_from_last_file"], f["is_async_learner"],
                                                            f["slave_broker_id"])
            assert got == {"state": 1, "is_sync_from_last_file": int(f["is_sync_from_last_file"]),
                           "is_async_learner": int(f["is_async_learner"]), "slave_broker_id": f["slave_broker_id"]}
        elif ann.kind == "handshake":
            entries = [EpochEntry(ep, start) for ep, start in f["epoch_entries"]]
            assert raw == autoswitch.encode_master_handshake(f["offset"], f["epoch"], entries)
            assert got == {"state": 1, "body_size": 12 * len(entries), "max_phy_offset": f["offset"],
                           "last_epoch": f["epoch"], "entries": f["epoch_entries"]}
            assert f["size"] == autoswitch.MASTER_HANDSHAKE_HEADER_SIZE + 12 * len(entries)
        elif ann.kind == "ack":
            assert raw == autoswitch.encode_slave_ack(f["offset"])
            assert got == {"state": 2, "slave_max_offset": f["offset"]}
        else:
            header = raw[:autoswitch.MASTER_TRANSFER_HEADER_SIZE]
            assert header == autoswitch.MASTER_TRANSFER_HEADER.codec.pack(
                2, f["size"] - autoswitch.MASTER_TRANSFER_HEADER_SIZE, f["offset"], f["epoch"],
                f["epoch_start_offset"], f["confirm_offset"])
            assert got == decode_transfer_header(header)
            body = f["size"] - autoswitch.MASTER_TRANSFER_HEADER_SIZE
            assert len(raw) == autoswitch.MASTER_TRANSFER_HEADER_SIZE + min(body, HEX_BODY_PREVIEW)
            assert ann.size == f["size"] and ann.shown_size == len(raw)
    assert kinds == {("handshake", "slave->master"), ("handshake", "master->slave"), ("ack", "slave->master"),
                     ("heartbeat", "master->slave"), ("transfer", "master->slave")}


def test_classic_frames_decode_as_the_protocol_encodes_them(classic_run):
    c, hops = classic_run
    assert [h.name for h in hops[:3]] == ["report", "transfer", "report"]
    for e in _ha_frames(c):
        ann = annotate(e)
        assert ann.protocol == CLASSIC
        raw = bytes.fromhex(e.fields["hex"])
        if ann.kind == "report":
            assert raw == classic.encode_report(e.fields["offset"])
            assert ann.decoded() == {"slave_max_offset": e.fields["offset"]}
        else:
            assert raw[:classic.TRANSFER_HEADER_SIZE] == classic.encode_transfer_header(e.fields["offset"],
                                                                                        e.fields["body_size"])
            assert ann.decoded() == {"physic_offset": e.fields["offset"], "body_size": e.fields["body_size"]}
    # A returning slave asks for what follows its own log: its first report is its max offset.
    assert hops[1].fields["offset"] == hops[0].fields["offset"] > 0


def test_the_inspector_views(stepped):
    _, _, shown = stepped
    c = stepped[0]
    transfer = next(h for h in match_frames(c.events(), "ha", ["broker-n0", "broker-n2"]) if h.name == "transfer")
    text = format_frame(transfer)
    assert text.splitlines()[0].startswith("broker-n0 → broker-n2: transfer (AutoSwitch (controller mode), "
                                           "master->slave)")
    assert " confirmOffset " in text and "36-51  body" in text
    assert "<table" in frame_html(transfer) and "epochStartOffset" in frame_html(transfer)
    fig = frame_figure(transfer)
    cells = [t for row in fig.data[0].text for t in row if t]
    assert "".join(cells) == transfer.recv.fields["hex"]
    table = protocol_table()
    assert "AutoSwitch (controller mode) transfer, master->slave: 36-byte header" in table
    assert "classic (DefaultHAService) report, slave->master: 8-byte header" in table


def test_annotate_refuses_what_is_not_an_ha_frame(stepped):
    remoting = next(e for e in stepped[0].events() if e.kind == "frame.send" and e.fields.get("proto") == "remoting")
    with pytest.raises(ValueError, match="not an HA frame"):
        annotate(remoting)


# -- exercise 1: the reference solution passes, a wrong one is told what is wrong ---------------
def test_exercise_reference_solution_passes_and_a_wrong_one_fails(stepped):
    samples = transfer_samples(stepped[0].events(), n=3)
    assert samples
    assert check_transfer_decoder(decode_transfer_header, samples) == len(samples)

    def little_endian(data: bytes) -> dict:
        names = ("state", "body_size", "offset", "epoch", "epoch_start_offset", "confirm_offset")
        return dict(zip(names, struct.unpack_from("<iiqiqq", data)))

    with pytest.raises(AssertionError, match="state decoded as 33554432, the slave read 2"):
        check_transfer_decoder(little_endian, samples)


# -- the sequence diagram -----------------------------------------------------------------------
def test_lamport_figure_draws_each_delivered_frame_as_an_arrow(stepped):
    c, stepper, shown = stepped
    events = c.events()[:stepper.cursor]
    nodes = ["broker-n2", "broker-n0"]
    fig = lamport_figure(events, "ha", nodes, machines=("AutoSwitchHAClient",), since_seq=stepper.start)
    arrows = {t.name: t for t in fig.data if t.mode == "lines+markers"}
    assert set(arrows) == {"handshake", "ack", "heartbeat", "transfer"}
    heads = sum(s == "arrow" for t in arrows.values() for s in t.marker.symbol)
    assert heads == len(shown)
    states = next(t for t in fig.data if t.name == "state")
    assert list(states.text) == ["READY", "HANDSHAKE", "TRANSFER"]  # the restarted client's
    assert list(fig.layout.xaxis.ticktext) == nodes
    last_two = [h.name for h in match_frames(events, "ha", nodes)[-2:]]
    fig = lamport_figure(events, "ha", nodes, last=2)
    assert sorted(t.name for t in fig.data if t.mode == "lines+markers") == sorted(set(last_two))


# -- the SyncStateSet: shrink as a slave is suspended, expand once it caught up -----------------
@pytest.fixture(scope="module")
def suspended():
    c = Cluster("controller-embedded", seed=11, controllers=1)
    c.start()
    c.create_topic("TopicTest", queues=2)
    c.add_producer("p1", topic="TopicTest", duration_ms=45_000, interval_ms=100, body_size=64)
    c.run_for(9_000)
    t_suspend = c.sim.now_ms()
    c.nemesis.suspend("broker-n2")
    c.run_for(24_000)
    t_resume = c.sim.now_ms()
    c.nemesis.resume("broker-n2")
    c.run_for(14_000)
    yield c, t_suspend, t_resume
    c.close()


def test_history_and_proposals_show_the_shrink_and_the_expand(suspended):
    c, t_suspend, t_resume = suspended
    events = c.events()
    assert broker_nodes(events, "broker-a") == {1: "broker-n0", 2: "broker-n1", 3: "broker-n2"}
    history = sync_state_set_history(events, "broker-a")
    assert [(h.event, h.master, h.sync_state_set) for h in history] == [
        ("ElectMasterEvent", 1, (1,)), ("AlterSyncStateSetEvent", 1, (1, 2)),
        ("AlterSyncStateSetEvent", 1, (1, 2, 3)), ("AlterSyncStateSetEvent", 1, (1, 2)),
        ("AlterSyncStateSetEvent", 1, (1, 2, 3))]
    assert [h.sync_state_set_epoch for h in history] == [1, 2, 3, 4, 5]
    shrink, expand = history[3], history[4]
    assert t_suspend < shrink.time_ms < t_resume < expand.time_ms
    made = [(p.change, p.sync_state_set) for p in proposals(events) if p.time_ms > t_suspend]
    assert made == [("shrink", (1, 2)), ("expand", (1, 2, 3))]
    text = describe_history(events, "broker-a", since_ms=t_suspend)
    assert "proposed   shrink" in text and "SyncStateSet {1 broker-n0, 2 broker-n1}, syncStateSetEpoch 4" in text
    # While broker-n2 was frozen, frames to it stayed in flight.
    frozen = [h for h in match_frames(events, "ha", ["broker-n0", "broker-n2"])
              if h.send is not None and t_suspend < h.send.time_ms < t_resume]
    assert frozen and not any(h.recv is not None and h.recv.time_ms < t_resume for h in frozen)


def _segments(trace, y: int) -> list[tuple[float, float]]:
    out, xs, ys = [], list(trace.x), list(trace.y)
    for i in range(0, len(xs), 3):
        if ys[i] == y:
            out.append((xs[i], xs[i + 1]))
    return out


def test_the_figure_shows_the_member_leave_and_come_back(suspended):
    c, t_suspend, t_resume = suspended
    events = c.events()
    fig = sync_state_set_figure(events, "broker-a")
    by_name = {t.name: t for t in fig.data if t.name}
    row_n2 = list(fig.layout.yaxis.ticktext).index("broker-n2 (id 3)")
    history = sync_state_set_history(events, "broker-a")
    shrink_s, expand_s = history[3].time_ms / 1000, history[4].time_ms / 1000
    n2 = _segments(by_name["in the SyncStateSet"], row_n2)
    assert len(n2) == 2
    assert n2[0][1] == pytest.approx(shrink_s, abs=1e-3) and n2[1][0] == pytest.approx(expand_s, abs=1e-3)
    # The master's bar runs from the election to the end.
    assert _segments(by_name["master"], list(fig.layout.yaxis.ticktext).index("broker-n0 (id 1)"))[0][0] == \
        pytest.approx(history[0].time_ms / 1000, abs=1e-3)
    # The proposals sit on broker-n2's row, the suspension beside it.
    shrink_marks = list(zip(by_name["shrink proposed"].x, by_name["shrink proposed"].y))
    expand_marks = list(zip(by_name["expand proposed"].x, by_name["expand proposed"].y))
    assert any(y == pytest.approx(row_n2 - 0.3) and x < shrink_s for x, y in shrink_marks)
    assert any(y == pytest.approx(row_n2 - 0.3) and x < expand_s for x, y in expand_marks)
    down = _segments(by_name["down / suspended"], row_n2 + 0.3)
    assert down == [(pytest.approx(t_suspend / 1000, abs=1e-3), pytest.approx(t_resume / 1000, abs=1e-3))]
    # The offsets panel: broker-n2's written offset stands still while it is frozen, then catches up.
    n2_written = by_name["broker-n2 written"]
    frozen = [y for x, y in zip(n2_written.x, n2_written.y) if t_suspend / 1000 < x < t_resume / 1000]
    assert len(set(frozen)) <= 1
    assert n2_written.y[-1] > max(frozen or [0])
