"""The event loop of real-runtime processes: uvloop's (rmqlab.runtime.real.event_loop_factory),
and node timers on it that neither fire early nor spin the loop while a deadline is under a
millisecond away. In this process: run_process starts no OS process of its own."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
import uvloop

from rmqlab.runtime import real
from rmqlab.runtime.component import Component
from rmqlab.runtime.node_timer import NodeTimer
from rmqlab.runtime.real import RealNode, event_loop_factory, run_loop, run_process


class _LoopRecorder(Component):
    """Records the class of the loop it starts on, then asks its process to stop."""

    loop_type: type | None = None

    async def start(self, node) -> None:
        self.loop_type = type(asyncio.get_running_loop())
        node.exit("recorded")


def test_run_process_runs_the_component_on_uvloop(tmp_path):
    component = _LoopRecorder()
    handlers = list(logging.getLogger("rmqlab").handlers)
    code = run_process(component, "loop-probe", store_dir=str(tmp_path / "store"), logs_dir=str(tmp_path / "logs"),
                       boot_line=lambda: "The loop-probe boot success.")
    assert code == 0
    assert component.loop_type is uvloop.Loop
    assert logging.getLogger("rmqlab").handlers == handlers  # run_process removed what it added


def test_event_loop_can_be_asyncio_s_own_and_refuses_an_unknown_name(monkeypatch):
    monkeypatch.setenv(real.ENV_EVENT_LOOP, "asyncio")
    assert event_loop_factory() is asyncio.new_event_loop
    monkeypatch.setenv(real.ENV_EVENT_LOOP, "tokio")
    with pytest.raises(ValueError, match="RMQLAB_EVENT_LOOP"):
        event_loop_factory()
    monkeypatch.delenv(real.ENV_EVENT_LOOP)
    assert event_loop_factory() is uvloop.new_event_loop


def test_node_timers_on_uvloop_fire_at_or_after_their_deadline_without_spinning(tmp_path, monkeypatch):
    """uvloop rounds a delay to the nearest millisecond and runs one under half a millisecond at
    once: a plain NodeTimer then fires early, re-arms for the rest and fires again at once, over
    and over, until its deadline. On uvloop a node's timer is armed at most a few times."""
    fires: list[float] = []
    original_fire = NodeTimer._fire

    def counting_fire(timer):
        fires.append(timer.deadline_ms)
        return original_fire(timer)

    monkeypatch.setattr(NodeTimer, "_fire", counting_fire)  # what arm() schedules, on every subclass

    async def main() -> list[tuple[float, float]]:
        node = RealNode("t", str(tmp_path))
        fired: list[tuple[float, float]] = []
        for delay_ms in (0.1, 0.3, 0.45, 0.7, 1.2, 2.6):
            done = asyncio.get_running_loop().create_future()
            deadline = node._monotonic_ms() + delay_ms
            node.call_later(delay_ms, lambda d=deadline, f=done: (fired.append((d, node._monotonic_ms())),
                                                                  f.set_result(None)))
            await done
        await node.close()
        return fired

    fired = run_loop(main())
    assert len(fired) == 6
    for deadline, at in fired:
        assert at >= deadline - 1e-3  # NodeTimer's own tolerance for float rounding
    per_timer = Counter(fires)  # the timer's deadline -> how often it fired (was armed)
    assert len(per_timer) == 6 and max(per_timer.values()) <= 3, per_timer
