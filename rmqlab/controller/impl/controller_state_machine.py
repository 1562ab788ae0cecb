"""ControllerStateMachine: the ReplicasInfoManager as a pysyncobj state machine
(``impl/DLedgerControllerStateMachine.java``).

Every controller holds one. The Raft log carries two kinds of entries, both ``@replicated``
calls of this consumer:

* ``apply_event_batch(writer, term, data)`` — the events of one request, ``data`` encoded with
  :class:`ListEventSerializer` (RocketMQ's event encoding: per event a short type id, an int length
  and the event's JSON). Every replica decodes it and applies the events in order with
  ``ReplicasInfoManager.apply_events``: the leader computed them, nobody recomputes.
* ``open_term(writer, term)`` — the entry a new leader commits before it serves (DLedger's
  "empty entry" on becoming leader): once applied on the leader, every entry of earlier terms is
  applied too, so the leader computes on the current state.

Fencing. pysyncobj, unlike DLedger, forwards a write submitted on a follower to the leader. A
controller that lost leadership between computing a result and submitting its events would so get
stale events appended by the new leader. Each batch therefore names the (writer, term) that
computed it, and a batch is applied only if that is the writer of the last ``open_term``: a batch
committed after a newer leader opened its term is ignored on every replica alike, which keeps them
identical. (DLedger rejects an append on a non-leader, so RocketMQ needs no such token.)

Snapshots (pysyncobj log compaction, ``fullDumpFile``): ``_serialize`` gives the manager's
``serialize()`` bytes plus the writer; ``_deserialize`` restores both. A restarted controller
rebuilds its state from the dump and the journal's later entries before it hears from anyone.

Thread safety: on the real runtime pysyncobj applies entries on its own thread while the
controller computes on the asyncio loop, so both hold :attr:`lock`.

Trace: with :attr:`trace` set (the controller's ``node.trace``), every applied entry emits a
``controller.event`` per event (or one OpenTerm) with its Raft index, the writer and its term,
and whether it was fenced: the replicated log as the labs read it (``rmqlab.viz.controller``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from pysyncobj import SyncObjConsumer, replicated

from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.list_event_serializer import ListEventSerializer
from rmqlab.controller.impl.heartbeat.default_broker_heartbeat_manager import CONTROLLER_LOGGER_NAME
from rmqlab.controller.impl.manager.replicas_info_manager import ReplicasInfoManager


class ControllerStateMachine(SyncObjConsumer):
    """The replicated part of a controller: the broker-set metadata and the current writer."""

    def __init__(self, manager: ReplicasInfoManager, *, logger: logging.Logger | None = None):
        super().__init__()
        # Everything below is named in _serialize/_deserialize explicitly (SyncObjConsumer's
        # default would pickle every attribute set after its __init__, the lock included).
        self.replicas_info_manager = manager
        self.writer: tuple[str, int] | None = None
        self.applied_batches = 0
        self.lock = threading.RLock()
        self.log = logger or logging.getLogger(CONTROLLER_LOGGER_NAME)
        # node.trace of the controller, set once it runs (None: no trace, e.g. in unit tests).
        self.trace: Callable[..., None] | None = None

    @replicated
    def open_term(self, writer: str, term: int) -> bool:
        """A new leader's first entry: from here on only its batches are applied."""
        with self.lock:
            self.writer = (writer, term)
        self._trace_entry(writer, term, True, None)
        return True

    @replicated
    def apply_event_batch(self, writer: str, term: int, data: bytes) -> bool:
        """Apply one request's events; False (nothing applied) for a fenced writer."""
        with self.lock:
            if self.writer != (writer, term):
                self.log.warning("Ignore the events of %s (term %s): the current writer is %s", writer, term,
                                 self.writer)
                if self.trace is not None:
                    self._trace_entry(writer, term, False, ListEventSerializer.deserialize(data))
                return False
            events = ListEventSerializer.deserialize(data)
            self.replicas_info_manager.apply_events(events)
            self.applied_batches += 1
        self._trace_entry(writer, term, True, events)
        return True

    def _trace_entry(self, writer: str, term: int, applied: bool, events: list[EventMessage] | None) -> None:
        """One ``controller.event`` per event of the entry being applied (OpenTerm for none)."""
        if self.trace is None:
            return
        # pysyncobj counts an entry as applied only after its command returns: this one is next.
        index = self._syncObj.raftLastApplied + 1
        if events is None:
            self.trace("controller.event", event="OpenTerm", index=index, term=term, writer=writer, applied=applied)
            return
        for position, event in enumerate(events):
            self.trace("controller.event", event=event.event_type.event_name, index=index, term=term, writer=writer,
                       applied=applied, broker_set=event.broker_name, body=event.to_json_dict(), position=position)

    # -- pysyncobj snapshots ------------------------------------------------------------------
    def _serialize(self) -> dict[str, Any]:
        with self.lock:
            return {"replicasInfoManager": self.replicas_info_manager.serialize(),
                    "writer": None if self.writer is None else list(self.writer),
                    "appliedBatches": self.applied_batches}

    def _deserialize(self, data: dict[str, Any]) -> None:
        with self.lock:
            self.replicas_info_manager.deserialize_from(data["replicasInfoManager"])
            writer = data.get("writer")
            self.writer = None if writer is None else (str(writer[0]), int(writer[1]))
            self.applied_batches = int(data.get("appliedBatches", 0))
