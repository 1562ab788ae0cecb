"""DefaultBrokerHeartbeatManager: replica liveness from heartbeats
(``impl/heartbeat/DefaultBrokerHeartbeatManager.java``).

RIP-44: "the controller regularly scans timed-out brokers, scanNotActiveBroker; a timed-out master
triggers ElectMaster"; election trigger a.i of "一文详解 RocketMQ 如何利用 Raft 进行高可用保障".

* ``on_broker_heartbeat`` (BROKER_HEARTBEAT, 904) records the heartbeat under
  (cluster, brokerName, brokerId); missing fields default to epoch -1, brokerId -1, maxOffset -1,
  confirmOffset -1, timeout 10 000 ms and electionPriority Integer.MAX_VALUE. An existing entry
  always refreshes its timestamp, timeout and priority; its (epoch, maxOffset, confirmOffset) only
  move forward: a higher epoch, or the same epoch with a higher maxOffset.
* ``is_broker_active``: the entry exists and ``lastUpdate + timeout >= now``.
* ``scan_not_active_broker`` (first 2000 ms after ``start``, then every
  ``scanNotActiveBrokerInterval``): entries with ``now - lastUpdate > timeout`` are removed, their
  channel closed, and every lifecycle listener hears ``(cluster, brokerName, brokerId)``.
* ``on_broker_channel_close`` (the connection closed, failed or went idle): the entry owning the
  channel is removed and the listeners hear of it.

No I/O and no wall clock: ``clock()`` gives the node's epoch milliseconds (the simulator's virtual
clock or wall time), ``start(call_later)`` schedules the scan with the node's timer
(``Node.call_later(delay_ms, fn)``), and closing a channel is the caller's ``channel_closer``.

Deviations (Java runs the listeners on a two-thread executor, so they run later, concurrently and
in no fixed order): here they run synchronously, after the table change, in scan order, which keeps
the simulator deterministic. A listener that raises is logged and does not stop the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmqlab.common.java_compat import INT32_MAX
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.broker_heartbeat_manager import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, BrokerHeartbeatManager
from rmqlab.controller.helper.broker_lifecycle_listener import BrokerLifecycleListener
from rmqlab.controller.impl.heartbeat.broker_identity_info import BrokerIdentityInfo
from rmqlab.controller.impl.heartbeat.broker_live_info import BrokerLiveInfo

CONTROLLER_LOGGER_NAME = "RocketmqController"  # LoggerName.CONTROLLER_LOGGER_NAME

# The first scan runs this long after start (Java's scheduleAtFixedRate initial delay).
FIRST_SCAN_DELAY_MS = 2000


class DefaultBrokerHeartbeatManager(BrokerHeartbeatManager):
    def __init__(self, controller_config: ControllerConfig, clock: Callable[[], int], *,
                 channel_closer: Callable[[Any], None] | None = None, logger: logging.Logger | None = None):
        self.controller_config = controller_config
        self.clock = clock
        self.channel_closer = channel_closer
        self.log = logger or logging.getLogger(CONTROLLER_LOGGER_NAME)
        self.broker_live_table: dict[BrokerIdentityInfo, BrokerLiveInfo] = {}
        self.broker_lifecycle_listeners: list[BrokerLifecycleListener] = []
        self._timer: Any = None
        self._call_later: Callable[..., Any] | None = None
        self._next_scan_ms = 0

    # -- scheduling ------------------------------------------------------------------------------
    def start(self, call_later: Callable[..., Any]) -> None:
        """Scan after 2000 ms, then every ``scanNotActiveBrokerInterval`` ms at a fixed rate.

        ``call_later(delay_ms, callback)`` must return an object with ``cancel()`` (``Node.call_later``)."""
        if self._call_later is not None:
            raise RuntimeError("DefaultBrokerHeartbeatManager is already started")
        self._call_later = call_later
        self._next_scan_ms = self.clock() + FIRST_SCAN_DELAY_MS
        self._timer = call_later(FIRST_SCAN_DELAY_MS, self._scheduled_scan)

    def shutdown(self) -> None:
        """Stop the periodic scan (the table is kept)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._call_later = None

    def _scheduled_scan(self) -> None:
        if self._call_later is None:
            return
        try:
            self.scan_not_active_broker()
        except Exception:  # Java catches and logs everything in the scan, and keeps scanning
            self.log.exception("scanNotActiveBroker exception")
        if self._call_later is None:  # a listener shut us down
            return
        # Fixed rate: the next run is due one interval after this one was due, not after it ran.
        self._next_scan_ms += self.controller_config.scanNotActiveBrokerInterval
        self._timer = self._call_later(max(0, self._next_scan_ms - self.clock()), self._scheduled_scan)

    # -- listeners -------------------------------------------------------------------------------
    def register_broker_lifecycle_listener(self, listener: BrokerLifecycleListener) -> None:
        if not callable(listener):
            raise TypeError(f"a broker lifecycle listener must be callable (cluster, brokerName, brokerId), "
                            f"got {type(listener).__name__}")
        self.broker_lifecycle_listeners.append(listener)

    def _notify_broker_inactive(self, cluster_name: str | None, broker_name: str | None,
                                broker_id: int | None) -> None:
        for listener in list(self.broker_lifecycle_listeners):
            try:
                listener(cluster_name, broker_name, broker_id)
            except Exception:
                self.log.exception("broker lifecycle listener failed for %s/%s/%s", cluster_name, broker_name,
                                   broker_id)

    # -- heartbeats ------------------------------------------------------------------------------
    def on_broker_heartbeat(self, cluster_name: str | None, broker_name: str | None, broker_addr: str | None,
                            broker_id: int | None, timeout_millis: int | None, channel: Any, epoch: int | None,
                            max_offset: int | None, confirm_offset: int | None,
                            election_priority: int | None) -> None:
        identity = BrokerIdentityInfo(cluster_name, broker_name, broker_id)
        prev = self.broker_live_table.get(identity)
        real_epoch = -1 if epoch is None else epoch
        real_broker_id = -1 if broker_id is None else broker_id
        real_max_offset = -1 if max_offset is None else max_offset
        real_confirm_offset = -1 if confirm_offset is None else confirm_offset
        real_timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout_millis is None else timeout_millis
        real_priority = INT32_MAX if election_priority is None else election_priority
        now = self.clock()
        if prev is None:
            # Quirk kept: Java's constructor used here leaves confirmOffset 0 on the first
            # heartbeat (the controller never reads it; the next heartbeat with progress sets it).
            self.broker_live_table[identity] = BrokerLiveInfo(broker_name, broker_addr, real_broker_id, now,
                                                              real_timeout, channel, real_epoch, real_max_offset,
                                                              real_priority)
            self.log.info("new broker registered, %s, brokerId:%s", identity, real_broker_id)
        else:
            prev.last_update_timestamp = now
            prev.heartbeat_timeout_millis = real_timeout
            prev.election_priority = real_priority
            if real_epoch > prev.epoch or (real_epoch == prev.epoch and real_max_offset > prev.max_offset):
                prev.epoch = real_epoch
                prev.max_offset = real_max_offset
                prev.confirm_offset = real_confirm_offset

    def forget_broker_log_position(self, cluster_name: str | None, broker_name: str | None,
                                   broker_id: int | None) -> None:
        """Deviation (no Java counterpart): a broker that registers to the controller is a new
        incarnation, whose log may be shorter than the last one reported (a machine crash loses the
        unflushed tail). Heartbeats only ever raise epoch and maxOffset, so the old incarnation's
        would stay and rank it in elections by data it no longer holds (chaos seed 173). Its epoch,
        maxOffset and confirmOffset become unknown (-1) until its next heartbeat; liveness is kept."""
        live = self.broker_live_table.get(BrokerIdentityInfo(cluster_name, broker_name, broker_id))
        if live is not None:
            live.epoch = -1
            live.max_offset = -1
            live.confirm_offset = -1

    def scan_not_active_broker(self) -> list[BrokerLiveInfo]:
        """``scanNotActiveBroker``: drop expired entries, close their channels, tell the listeners.
        Returns the expired entries."""
        self.log.debug("start scanNotActiveBroker")
        now = self.clock()
        expired: list[tuple[BrokerIdentityInfo, BrokerLiveInfo]] = []
        for identity, live in list(self.broker_live_table.items()):
            if now - live.last_update_timestamp > live.heartbeat_timeout_millis:
                del self.broker_live_table[identity]
                expired.append((identity, live))
                if live.channel is not None and self.channel_closer is not None:
                    self.channel_closer(live.channel)
                self.log.warning("The broker channel %s expired, brokerInfo %s, expired %sms", live.channel,
                                 identity, live.heartbeat_timeout_millis)
        for identity, live in expired:
            self._notify_broker_inactive(identity.cluster_name, live.broker_name, live.broker_id)
        return [live for _, live in expired]

    def on_broker_channel_close(self, channel: Any) -> None:
        """``onBrokerChannelClose``: the replica behind a closed (or failed, or idle) channel is gone."""
        for identity, live in self.broker_live_table.items():
            if live.channel is channel:
                self.log.info("Channel %s inactive, broker %s, addr:%s, id:%s", channel, live.broker_name,
                              live.broker_addr, live.broker_id)
                del self.broker_live_table[identity]
                self._notify_broker_inactive(identity.cluster_name, live.broker_name, live.broker_id)
                return

    # -- queries ---------------------------------------------------------------------------------
    def get_broker_live_info(self, cluster_name: str | None, broker_name: str | None,
                             broker_id: int | None) -> BrokerLiveInfo | None:
        return self.broker_live_table.get(BrokerIdentityInfo(cluster_name, broker_name, broker_id))

    def is_broker_active(self, cluster_name: str | None, broker_name: str | None, broker_id: int | None) -> bool:
        info = self.broker_live_table.get(BrokerIdentityInfo(cluster_name, broker_name, broker_id))
        return info is not None and info.last_update_timestamp + info.heartbeat_timeout_millis >= self.clock()

    def get_active_brokers_num(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for identity in self.broker_live_table:
            if self.is_broker_active(identity.cluster_name, identity.broker_name, identity.broker_id):
                per_cluster = counts.setdefault(identity.cluster_name, {})
                per_cluster[identity.broker_name] = per_cluster.get(identity.broker_name, 0) + 1
        return counts
