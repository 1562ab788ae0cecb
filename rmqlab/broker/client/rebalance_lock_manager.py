"""RebalanceLockManager: which client holds which queue of a consumer group (orderly consumption).

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/client/rebalance/RebalanceLockManager.java``.
An orderly consumer locks its queues on the broker (LOCK_BATCH_MQ, served by AdminBrokerProcessor)
before it consumes them, and renews the lock every 20 s; a lock not renewed for
``REBALANCE_LOCK_MAX_LIVE_TIME`` (60 s) is expired, and another client may take the queue. Per group,
per queue: the holder's clientId and the time of its last lock. Memory only: a restarted broker
holds no locks.

* ``try_lock_batch``: a queue the client holds (not expired) is renewed and granted; a queue nobody
  holds, or whose lock expired, is given to the client; a queue another client holds alive is left
  out of the answer.
* ``unlock_batch``: removes the lock of each queue the client holds, expired or not; the locks of
  other clients stay.
* ``is_lock_all_expired``: no live lock in the group. SendMessageProcessor sends a retry message of
  such a group (an orderly one) straight to its DLQ.

Times come from the node's clock. Deviation: RocketMQ reads the live time from the system property
``rocketmq.broker.rebalance.lockMaxLiveTime`` once per JVM; rmqlab has no system properties, so it is
a constructor argument (default 60000 ms).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

log = logging.getLogger("rmqlab.broker")

REBALANCE_LOCK_MAX_LIVE_TIME = 60_000  # ms, rocketmq.broker.rebalance.lockMaxLiveTime


class LockEntry:
    """``RebalanceLockManager.LockEntry``: the holder and the time of its last lock."""

    __slots__ = ("client_id", "last_update_timestamp")

    def __init__(self, client_id: str, now_ms: int):
        self.client_id = client_id
        self.last_update_timestamp = now_ms

    def is_locked(self, client_id: str, now_ms: int, max_live_time_ms: int) -> bool:
        return self.client_id == client_id and not self.is_expired(now_ms, max_live_time_ms)

    def is_expired(self, now_ms: int, max_live_time_ms: int) -> bool:
        return now_ms - self.last_update_timestamp > max_live_time_ms


class RebalanceLockManager:
    def __init__(self, clock: Callable[[], int], max_live_time_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME):
        self.clock = clock
        self.max_live_time_ms = max_live_time_ms
        self.mq_lock_table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def is_lock_all_expired(self, group: str) -> bool:
        """``isLockAllExpired``: True when no queue of ``group`` has a live lock."""
        entries = self.mq_lock_table.get(group)
        if entries is None:
            return True
        now = self.clock()
        return all(entry.is_expired(now, self.max_live_time_ms) for entry in entries.values())

    def try_lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """``tryLock``: one queue; True when ``client_id`` holds it now."""
        return mq in self.try_lock_batch(group, [mq], client_id)

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """``tryLockBatch``: the queues of ``mqs`` that ``client_id`` holds now (renewed or taken),
        those it held already first, as RocketMQ adds them to its answer."""
        now, live = self.clock(), self.max_live_time_ms
        group_value = self.mq_lock_table.get(group)
        mqs = list(dict.fromkeys(mqs))
        locked: list[MessageQueue] = []
        not_locked: list[MessageQueue] = []
        for mq in mqs:
            entry = group_value.get(mq) if group_value is not None else None
            if entry is not None and entry.is_locked(client_id, now, live):
                entry.last_update_timestamp = now  # isLocked renews a held lock
                locked.append(mq)
            else:
                not_locked.append(mq)
        if not not_locked:
            return locked
        group_value = self.mq_lock_table.setdefault(group, {})
        for mq in not_locked:
            entry = group_value.get(mq)
            if entry is None:
                entry = group_value[mq] = LockEntry(client_id, now)
                log.info("RebalanceLockManager#tryLockBatch: lock a message which has not been locked yet, "
                         "group=%s, clientId=%s, mq=%s", group, client_id, mq)
            if entry.is_locked(client_id, now, live):
                entry.last_update_timestamp = now
                locked.append(mq)
                continue
            old_client_id = entry.client_id
            if entry.is_expired(now, live):
                entry.client_id = client_id
                entry.last_update_timestamp = now
                log.warning("RebalanceLockManager#tryLockBatch: try to lock a expired message queue, group=%s, "
                            "mq=%s, old client id=%s, new client id=%s", group, mq, old_client_id, client_id)
                locked.append(mq)
                continue
            log.warning("RebalanceLockManager#tryLockBatch: message queue has been locked by other client, "
                        "group=%s, mq=%s, locked client id=%s, current client id=%s", group, mq, old_client_id,
                        client_id)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """``unlockBatch``: drop the locks ``client_id`` holds among ``mqs`` (expired ones too)."""
        group_value = self.mq_lock_table.get(group)
        if group_value is None:
            log.warning("RebalanceLockManager#unlockBatch: group not exist, group=%s, clientId=%s", group, client_id)
            return
        for mq in mqs:
            entry = group_value.get(mq)
            if entry is None:
                log.warning("RebalanceLockManager#unlockBatch: mq not locked, group=%s, clientId=%s, mq=%s", group,
                            client_id, mq)
            elif entry.client_id == client_id:
                del group_value[mq]
                log.info("RebalanceLockManager#unlockBatch: unlock mq, group=%s, clientId=%s, mqs=%s", group,
                         client_id, mq)
            else:
                log.warning("RebalanceLockManager#unlockBatch: mq locked by other client, group=%s, locked "
                            "clientId=%s, current clientId=%s, mqs=%s", group, entry.client_id, client_id, mq)

    def lock_holder(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding ``mq`` now (a live lock), or None; for labs and tests."""
        entry = self.mq_lock_table.get(group, {}).get(mq)
        if entry is None or entry.is_expired(self.clock(), self.max_live_time_ms):
            return None
        return entry.client_id
