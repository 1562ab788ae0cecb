"""DefaultElectPolicy: the controller's election rule (``elect/impl/DefaultElectPolicy.java``).

``elect`` tries the SyncStateSet first and, only if that yields nobody and unclean election is on
(``all_replica_brokers`` not None), every registered replica. Within one pool:

1. keep only the replicas the validity predicate accepts (the controller passes the heartbeat
   manager's ``is_broker_active``: alive replicas only);
2. nobody left: no master from this pool;
3. the old master is still in the pool and nobody else is preferred (or it is the preferred one):
   keep it (the caller answers CONTROLLER_MASTER_STILL_EXIST);
4. a preferred (admin-designated) id: that id if it is in the pool, otherwise **nobody** from this
   pool, never a substitute;
5. with a live-info getter: the best replica by epoch (higher first), then maxOffset (higher
   first), then electionPriority (**lower** first);
6. without a getter: any replica.

Tie-breaking (steps 5 and 6). Java puts the candidates in a TreeSet ordered by that comparator, so
candidates that compare equal collapse onto the first one inserted, and inserts them in HashSet
order; step 6 takes the HashSet's first element. For the small ids of a broker set (below the
HashSet's table size, 16) that order is ascending id, so here **ties go to the lowest broker id**,
in both steps, for any ids (RocketMQ's own tests, ReplicasInfoManagerTest and DLedgerControllerTest, only
assert "not the dead master").

Deviations:

* Java compares maxOffsets as ``(int) (o2.maxOffset - o1.maxOffset)`` and priorities by int
  subtraction; a difference beyond 2^31 (2 GiB of commitlog) wraps and can rank the more
  out-of-date replica first, or call two different replicas equal. Here both compare as numbers.
* A candidate the getter knows nothing about (Java: NullPointerException inside the TreeSet) ranks
  after every candidate with live info.

Steps 2-6 are the decision point ``elect_master`` (rmqlab.common.decision_points): a caller may
hand the policy another rule (``DefaultElectPolicy(..., elect_master=rule)``; the labs' exercise
does), which gets the filtered pool as (broker id, live info) pairs. Java's DefaultElectPolicy
has no such seam (a different rule there is a different ElectPolicy); here it keeps the filter
RocketMQ's while the choice changes. The default is ``elect_master`` below: RocketMQ's rule.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Protocol

from rmqlab.controller.elect.elect_policy import ElectPolicy
from rmqlab.controller.helper.broker_live_info_getter import BrokerLiveInfoGetter
from rmqlab.controller.helper.broker_valid_predicate import BrokerValidPredicate

if TYPE_CHECKING:
    from rmqlab.controller.impl.heartbeat.broker_live_info import BrokerLiveInfo


class ElectMaster(Protocol):
    """The decision point ``elect_master``: the new master among `candidates`, the pool's valid
    replicas as (broker id, live info or None) in ascending id order; None: nobody from this pool."""

    def __call__(self, candidates: Sequence[tuple[int, BrokerLiveInfo | None]], old_master: int | None,
                 prefer_broker_id: int | None) -> int | None: ...


def elect_master(candidates: Sequence[tuple[int, BrokerLiveInfo | None]], old_master: int | None,
                 prefer_broker_id: int | None) -> int | None:
    """RocketMQ's rule, steps 2-6 of the module docstring (a candidate without live info ranks
    last, so with no live-info getter at all the lowest id wins: step 6)."""
    if not candidates:
        return None
    pool = {broker_id for broker_id, _ in candidates}
    if old_master in pool and (prefer_broker_id is None or prefer_broker_id == old_master):
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in pool else None
    return min(candidates, key=_rank)[0]


def _rank(candidate: tuple[int, BrokerLiveInfo | None]) -> tuple:
    broker_id, info = candidate
    if info is None:
        return (1, 0, 0, 0, broker_id)
    return (0, -info.epoch, -info.max_offset, info.election_priority, broker_id)


_ROCKETMQ_RULE = elect_master  # the parameter of the same name shadows it in __init__


class DefaultElectPolicy(ElectPolicy):
    def __init__(self, valid_predicate: BrokerValidPredicate | None = None,
                 broker_live_info_getter: BrokerLiveInfoGetter | None = None, *,
                 elect_master: ElectMaster | None = None):
        self.valid_predicate = valid_predicate
        self.broker_live_info_getter = broker_live_info_getter
        self.elect_master: ElectMaster = elect_master or _ROCKETMQ_RULE

    def elect(self, cluster_name: str | None, broker_name: str, sync_state_brokers: Set[int] | None,
              all_replica_brokers: Set[int] | None, old_master: int | None,
              prefer_broker_id: int | None) -> int | None:
        new_master = None
        if sync_state_brokers is not None:
            new_master = self._try_elect(cluster_name, broker_name, sync_state_brokers, old_master, prefer_broker_id)
        if new_master is not None:
            return new_master
        if all_replica_brokers is not None:
            new_master = self._try_elect(cluster_name, broker_name, all_replica_brokers, old_master, prefer_broker_id)
        return new_master

    def _try_elect(self, cluster_name: str | None, broker_name: str, brokers: Set[int], old_master: int | None,
                   prefer_broker_id: int | None) -> int | None:
        pool = set(brokers)
        if self.valid_predicate is not None:
            pool = {b for b in pool if self.valid_predicate(cluster_name, broker_name, b)}
        getter = self.broker_live_info_getter
        candidates = [(b, None if getter is None else getter(cluster_name, broker_name, b)) for b in sorted(pool)]
        return self.elect_master(candidates, old_master, prefer_broker_id)
