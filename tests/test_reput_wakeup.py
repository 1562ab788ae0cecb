"""The dispatcher runs when woken, not every millisecond (rmqlab.store.reput_message_service): no
record may become dispatchable without a wake-up that dispatches it within 1 ms.

The check: during whole catalog workloads (failovers, unclean elections, a suspended slave,
classic replication), every broker's ReputMessageService is also polled every millisecond as
RocketMQ's thread polls it; whenever no wake-up is pending, a pass must find nothing to dispatch.
"""

from __future__ import annotations

import pytest

from rmqlab.store.default_message_store import DefaultMessageStore
from rmqlab.store.reput_message_service import REPUT_INTERVAL_MS, ReputMessageService
from rmqlab.workload.catalog import CATALOG
from rmqlab.workload.runner import run_workload


@pytest.fixture
def missed_wakeups(monkeypatch) -> list[tuple[int, int]]:
    """(reput offset, messages) of every pass that found work no wake-up had asked for."""
    missed: list[tuple[int, int]] = []
    start = ReputMessageService.start

    def start_and_poll(self: ReputMessageService, call_later) -> None:
        start(self, call_later)

        def poll() -> None:
            if not self.running:
                return
            if not self.wake_pending:
                offset = self.reput_from_offset
                n = self.do_reput()
                if n:
                    missed.append((offset, n))
            call_later(REPUT_INTERVAL_MS, poll)

        call_later(REPUT_INTERVAL_MS, poll)

    monkeypatch.setattr(ReputMessageService, "start", start_and_poll)
    return missed


@pytest.mark.parametrize("name", ["ctrl-standalone-kill-master", "ctrl-embedded-unclean",
                                  "ctrl-standalone-suspend-slave", "sync-kill-master"])
def test_nothing_becomes_dispatchable_without_a_wakeup(name, missed_wakeups):
    run = run_workload(CATALOG[name])
    assert run.outcome["acknowledged"] > 0
    assert missed_wakeups == []


def test_the_check_finds_a_missing_wakeup(missed_wakeups, monkeypatch):
    # A slave that appends replicated bytes without waking its dispatcher.
    def append_without_wakeup(self, start_offset, data):
        return self.commit_log.append_data(start_offset, data)

    monkeypatch.setattr(DefaultMessageStore, "append_to_commit_log", append_without_wakeup)
    run_workload(CATALOG["sync-kill-master"])
    assert missed_wakeups
