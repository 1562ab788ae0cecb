"""The controller core (RocketMQ's ``controller`` module): ReplicasInfoManager, events, DefaultElectPolicy,
DefaultBrokerHeartbeatManager, and the controller headers and bodies.

Everything runs in memory: requests compute a ControllerResult, events are applied explicitly,
liveness is a set the test controls, time is a ManualClock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.common.manual_clock import ManualClock
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, BrokerLiveInfo, CleanBrokerDataEvent,
                               ControllerResult, DefaultBrokerHeartbeatManager, DefaultElectPolicy, ElectMasterEvent,
                               EventSerializer, EventType, ListEventSerializer, ReplicasInfoManager,
                               UpdateBrokerAddressEvent)
from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.broker_replicas_info import BrokerReplicasInfo
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet, java_long_set_order
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader,
                                                        AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
                                                        CleanControllerBrokerDataRequestHeader,
                                                        ElectMasterRequestHeader, ElectMasterResponseHeader,
                                                        GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
                                                        GetReplicaInfoRequestHeader,
                                                        NotifyBrokerRoleChangedRequestHeader,
                                                        RegisterBrokerToControllerRequestHeader,
                                                        RegisterBrokerToControllerResponseHeader)
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode as RC

CLUSTER = "DefaultCluster"
A = "broker-a"


def addr(broker_id: int) -> str:
    return f"127.0.0.1:{30901 + 10 * broker_id}"


@dataclass
class Liveness:
    """The test's view of which replicas heartbeat, and what they last reported."""

    alive: set[tuple[str, int]] = field(default_factory=set)
    info: dict[tuple[str, int], BrokerLiveInfo] = field(default_factory=dict)

    def __call__(self, cluster, broker_name, broker_id) -> bool:  # a BrokerValidPredicate
        return (broker_name, broker_id) in self.alive

    def get(self, cluster, broker_name, broker_id):  # a BrokerLiveInfoGetter
        return self.info.get((broker_name, broker_id))

    def set_alive(self, broker_name: str, *ids: int) -> None:
        self.alive = {(n, i) for n, i in self.alive if n != broker_name} | {(broker_name, i) for i in ids}

    def report(self, broker_name: str, broker_id: int, epoch: int, max_offset: int, priority: int = 2**31 - 1):
        self.info[(broker_name, broker_id)] = BrokerLiveInfo(broker_name, addr(broker_id), broker_id, 0, 10_000,
                                                             None, epoch, max_offset, priority)

    def policy(self) -> DefaultElectPolicy:
        return DefaultElectPolicy(self, self.get)


def manager(unclean: bool = False) -> ReplicasInfoManager:
    return ReplicasInfoManager(ControllerConfig(enableElectUncleanMaster=unclean))


def commit(m: ReplicasInfoManager, result: ControllerResult) -> ControllerResult:
    """What the Raft layer does with a result: its events go through the log (serialised) and are applied."""
    m.apply_events(ListEventSerializer.deserialize(ListEventSerializer.serialize(result.events)))
    return result


def apply_id(m, broker_id, name=A, code=None) -> ControllerResult:
    return m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, name, broker_id, code or f"{addr(broker_id)};1000"))


def set_up(m: ReplicasInfoManager, live: Liveness, ids=(1, 2, 3), master=1, in_sync=(1, 2), name=A) -> None:
    """Register ``ids``, elect ``master`` (first election), then have it report ``in_sync``."""
    for i in ids:
        assert commit(m, apply_id(m, i, name)).response_code == RC.SUCCESS
    assert commit(m, m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, name, master),
                                    live.policy())).response_code == RC.SUCCESS
    live.set_alive(name, *ids)
    if set(in_sync) != {master}:
        info = m.sync_state_set_info_table[name]
        result = m.alter_sync_state_set(AlterSyncStateSetRequestHeader(name, master, info.master_epoch),
                                        SyncStateSet(frozenset(in_sync), info.sync_state_set_epoch), live)
        assert commit(m, result).response_code == RC.SUCCESS


def state(m: ReplicasInfoManager, name=A):
    info = m.sync_state_set_info_table[name]
    return info.master_broker_id, info.master_epoch, set(info.sync_state_set), info.sync_state_set_epoch


# =================================================================================================
# getNextBrokerId / applyBrokerId
# =================================================================================================


def test_get_next_broker_id_counts_additions_not_the_largest_id():
    m = manager()
    r = m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, A))
    assert (r.response_code, r.response.next_broker_id, r.events) == (RC.SUCCESS, 1, [])
    commit(m, apply_id(m, 1))
    commit(m, apply_id(m, 5))  # an id the broker chose itself is accepted when unused
    # BrokerReplicaInfo.addBroker counts additions: two additions -> 3, although id 5 exists.
    assert m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, A)).response.next_broker_id == 3
    assert m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, "other")).response.next_broker_id == 1


@pytest.mark.parametrize("existing, applied, code, expected", [
    ([], 1, "a;1", RC.SUCCESS),                                   # unknown set: only id 1
    ([], 2, "a;1", RC.CONTROLLER_BROKER_ID_INVALID),
    ([(1, "a;1")], 2, "b;2", RC.SUCCESS),                         # known set: an unused id
    ([(1, "a;1")], 1, "a;1", RC.SUCCESS),                         # the same broker retrying
    ([(1, "a;1")], 1, "b;2", RC.CONTROLLER_BROKER_ID_INVALID),    # someone else's id
])
def test_apply_broker_id_validation(existing, applied, code, expected):
    m = manager()
    for broker_id, c in existing:
        commit(m, apply_id(m, broker_id, code=c))
    before = m.serialize()
    r = apply_id(m, applied, code=code)
    assert m.serialize() == before  # computing never changes the state
    assert r.response_code == expected
    assert (r.response.cluster_name, r.response.broker_name) == (CLUSTER, A)
    if expected == RC.SUCCESS:
        assert r.events == [ApplyBrokerIdEvent(CLUSTER, A, code.split(";")[0], applied, code)]
        assert r.remark is None
    else:
        assert r.events == [] and str(applied) in r.remark


def test_apply_broker_id_event_creates_the_set_and_is_idempotent_per_id():
    m = manager()
    commit(m, apply_id(m, 1, code="10.0.0.1:10911;77"))
    replicas = m.replica_info_table[A]
    assert replicas.get_broker_id_table() == {1: "10.0.0.1:10911"}
    assert replicas.get_broker_register_check_code(1) == "10.0.0.1:10911;77"
    assert state(m) == (None, 0, set(), 0) and m.sync_state_set_info_table[A].is_first_time_for_elect()
    commit(m, apply_id(m, 1, code="10.0.0.1:10911;77"))  # accepted again, applying changes nothing
    assert replicas.next_assign_broker_id == 2


# =================================================================================================
# registerBroker
# =================================================================================================


def test_register_broker_validation_and_answers():
    m, live = manager(), Liveness()
    req = RegisterBrokerToControllerRequestHeader(CLUSTER, A, 1, addr(1))
    r = m.register_broker(req, live)
    assert r.response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED and "Broker-set" in r.remark
    set_up(m, live, ids=(1, 2), master=1, in_sync=(1, 2))
    r = m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 7, addr(7)), live)
    assert r.response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED and "BrokerId: 7" in r.remark

    r = m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 2, addr(2)), live)
    assert r.response_code == RC.SUCCESS and r.events == []
    assert r.response == RegisterBrokerToControllerResponseHeader(CLUSTER, A, 1, addr(1), 1, 2)
    assert SyncStateSet.decode(r.body) == SyncStateSet(frozenset({1, 2}), 2)

    live.set_alive(A, 2)  # the master's heartbeat lapsed: the answer names no master
    r = m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 2, addr(2)), live)
    assert r.response == RegisterBrokerToControllerResponseHeader(CLUSTER, A)
    assert r.body == b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}'


def test_register_broker_with_a_new_address_replicates_the_change():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2), master=1, in_sync=(1,))
    r = commit(m, m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 2, "10.9.9.9:1"), live))
    assert r.events == [UpdateBrokerAddressEvent(CLUSTER, A, "10.9.9.9:1", 2)]
    assert m.replica_info_table[A].get_broker_address(2) == "10.9.9.9:1"
    assert m.replica_info_table[A].get_broker_register_check_code(2) == f"{addr(2)};1000"  # kept


def test_the_master_registering_again_is_taken_as_gone_and_a_new_epoch_is_elected():
    """Deviation (chaos seed 173): a running master never registers again, so a register from the
    recorded master is a new incarnation that may have lost its unflushed tail. It is not confirmed
    in its old epoch: the master is recorded as gone (a new masterEpoch, SyncStateSet kept), the
    answer names none, and the election it then asks for ranks it like any other member."""
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2, 3))
    assert state(m) == (1, 1, {1, 2, 3}, 2)
    r = commit(m, m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 1, addr(1)), live))
    assert r.response_code == RC.SUCCESS and r.events == [ElectMasterEvent.not_elected(A)]
    assert r.response == RegisterBrokerToControllerResponseHeader(CLUSTER, A)  # no master named
    assert SyncStateSet.decode(r.body) == SyncStateSet(frozenset({1, 2, 3}), 2)
    assert state(m) == (None, 2, {1, 2, 3}, 2)
    # Every member alive; the restarted broker reports the shorter log: a replica with the data wins.
    live.report(A, 1, 1, 0)
    live.report(A, 2, 1, 5466)
    live.report(A, 3, 1, 5466)
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1), live.policy()))
    assert r.response_code == RC.SUCCESS and r.response.master_broker_id == 2 and r.response.master_epoch == 3
    assert state(m) == (2, 3, {2}, 3)
    # Elected anyway (it holds as much as the others), it leads a new epoch, not the old one.
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2, 3))
    commit(m, m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 1, addr(1)), live))
    for i in (1, 2, 3):
        live.report(A, i, 1, 5466)
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1), live.policy()))
    assert r.response_code == RC.SUCCESS and (r.response.master_broker_id, r.response.master_epoch) == (1, 3)
    # A slave registering again changes nothing; nor does the former master once replaced.
    r = m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 2, addr(2)), live)
    assert r.events == [] and r.response.master_broker_id == 1 and r.response.master_epoch == 3


def test_a_registering_broker_s_reported_log_position_is_forgotten_until_its_next_heartbeat():
    clock = ManualClock(0)
    hb = DefaultBrokerHeartbeatManager(ControllerConfig(), clock)
    heartbeat(hb, 1, epoch=1, max_offset=5466, confirm=5466, priority=3)
    heartbeat(hb, 1, epoch=1, max_offset=0, confirm=0, priority=3)  # the restarted broker's shorter log: ignored
    info = hb.get_broker_live_info(CLUSTER, A, 1)
    assert (info.epoch, info.max_offset) == (1, 5466)
    hb.forget_broker_log_position(CLUSTER, A, 1)
    assert (info.epoch, info.max_offset, info.confirm_offset) == (-1, -1, -1)
    assert hb.is_broker_active(CLUSTER, A, 1) and info.election_priority == 3  # liveness kept
    heartbeat(hb, 1, epoch=1, max_offset=0, confirm=0)
    assert (info.epoch, info.max_offset) == (1, 0)
    hb.forget_broker_log_position(CLUSTER, A, 9)  # unknown: nothing to do


# =================================================================================================
# electMaster
# =================================================================================================


def test_elect_master_unknown_set():
    r = manager().elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1), Liveness().policy())
    assert (r.response_code, r.events) == (RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, [])


def test_first_election_takes_the_requester_without_a_liveness_check():
    m, live = manager(), Liveness()  # nobody is alive
    commit(m, apply_id(m, 1))
    commit(m, apply_id(m, 2))
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 2), live.policy()))
    assert r.response_code == RC.SUCCESS
    assert r.response == ElectMasterResponseHeader(2, addr(2), 1, 1)
    assert r.events == [ElectMasterEvent(A, 2)]
    assert ElectMasterResponseBody.decode(r.body) == ElectMasterResponseBody(
        BrokerMemberGroup(CLUSTER, A, {1: addr(1), 2: addr(2)}), frozenset({2}))
    assert state(m) == (2, 1, {2}, 1)


def test_master_still_exist_when_the_alive_master_is_kept():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    r = m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 2), live.policy())
    assert r.response_code == RC.CONTROLLER_MASTER_STILL_EXIST and r.events == []
    assert r.response == ElectMasterResponseHeader(1, addr(1), 1, 2)
    assert r.body == b'{"syncStateSet":[1,2]}'  # no member group on this path


def test_reelection_picks_an_alive_sync_state_set_member_and_resets_the_set():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, 2, 3)  # the master died
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(A), live.policy()))
    assert (r.response_code, r.events) == (RC.SUCCESS, [ElectMasterEvent(A, 2)])  # 3 is alive but not in sync
    assert r.response == ElectMasterResponseHeader(2, addr(2), 2, 3)
    assert state(m) == (2, 2, {2}, 3)


def test_no_candidate_controller_trigger_records_no_master_and_bumps_the_epoch():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, 3)  # only the out-of-sync replica lives; unclean election is off
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(A), live.policy()))
    assert r.response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert r.events == [ElectMasterEvent(A, None, False)]
    assert state(m) == (None, 2, {1, 2}, 2)  # master gone, epoch bumped, set kept


def test_no_candidate_broker_or_admin_trigger_fails_without_event():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, 3)
    for request in (ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 3),
                    ElectMasterRequestHeader.of_admin_trigger(CLUSTER, A, 3)):
        r = m.elect_master(request, live.policy())
        assert (r.response_code, r.events) == (RC.CONTROLLER_ELECT_MASTER_FAILED, [])


def test_unclean_election_falls_back_to_every_alive_replica():
    m, live = manager(unclean=True), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, 3)
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(A), live.policy()))
    assert (r.response_code, r.events) == (RC.SUCCESS, [ElectMasterEvent(A, 3)])
    assert state(m) == (3, 2, {3}, 3)


@pytest.mark.parametrize("unclean, alive, designated, expected_code, expected_master", [
    (False, (1, 2, 3), 2, RC.SUCCESS, 2),                           # alive SyncStateSet member
    (False, (1, 2, 3), 1, RC.CONTROLLER_MASTER_STILL_EXIST, 1),     # the current live master
    (False, (1, 3), 2, RC.CONTROLLER_ELECT_MASTER_FAILED, None),    # designated but dead
    (False, (1, 2, 3), 3, RC.CONTROLLER_ELECT_MASTER_FAILED, None),  # not in sync, unclean off
    (True, (1, 2, 3), 3, RC.SUCCESS, 3),                            # not in sync, unclean on
    (True, (1, 2), 3, RC.CONTROLLER_ELECT_MASTER_FAILED, None),     # dead in every pool
])
def test_admin_designated_election(unclean, alive, designated, expected_code, expected_master):
    m, live = manager(unclean), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, *alive)
    r = m.elect_master(ElectMasterRequestHeader.of_admin_trigger(CLUSTER, A, designated), live.policy())
    assert r.response_code == expected_code
    assert r.response.master_broker_id == expected_master
    assert r.events == ([ElectMasterEvent(A, expected_master)] if expected_code == RC.SUCCESS else [])


def test_controller_trigger_on_a_never_elected_set_disables_the_first_election_shortcut():
    # RocketMQ's electMaster: brokerId -1 on masterEpoch 0 goes to the policy; with nobody alive it records
    # "no master" and bumps masterEpoch, so the next broker trigger is no longer a first election.
    m, live = manager(), Liveness()
    commit(m, apply_id(m, 1))
    r = commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(A), live.policy()))
    assert r.response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE and state(m) == (None, 1, set(), 0)
    r = m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1), live.policy())
    assert r.response_code == RC.CONTROLLER_ELECT_MASTER_FAILED  # empty SyncStateSet, nobody alive


# =================================================================================================
# alterSyncStateSet: every check, in RocketMQ's order
# =================================================================================================


def _alter_case(m, live, *, name=A, master=1, master_epoch=None, ss_epoch=None, members=(1, 2, 3), dead=()):
    info = m.sync_state_set_info_table.get(A)
    live.set_alive(A, *[i for i in (1, 2, 3) if i not in dead])
    request = AlterSyncStateSetRequestHeader(name, master, info.master_epoch if master_epoch is None else master_epoch)
    body = SyncStateSet(frozenset(members), info.sync_state_set_epoch if ss_epoch is None else ss_epoch)
    return m.alter_sync_state_set(request, body, live)


# Each case also violates every later check it can, so the first failing check must win.
ALTER_CASES = [
    ("unknown set", dict(name="nope", master=9, master_epoch=9, ss_epoch=9, members=(9,)),
     RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed"),
    ("set unchanged", dict(master=2, master_epoch=9, ss_epoch=9, members=(1, 2)),
     RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "equal with oldSyncStateSet"),
    ("not the master", dict(master=2, master_epoch=9, ss_epoch=9, members=(2, 9)),
     RC.CONTROLLER_INVALID_MASTER, "current leader is:{1}, not {2}"),
    ("no master given", dict(master=None, members=(1, 2, 3)),
     RC.CONTROLLER_INVALID_MASTER, "not {null}"),
    ("stale master epoch", dict(master_epoch=0, ss_epoch=9, members=(2, 9)),
     RC.CONTROLLER_FENCED_MASTER_EPOCH, "master epoch is:{1}, not {0}"),
    ("stale set epoch", dict(ss_epoch=1, members=(2, 9)),
     RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, "syncStateSet epoch is:{2}, not {1}"),
    # 9 is neither registered nor alive: per member, registration is checked first.
    ("unregistered member", dict(members=(2, 9)),
     RC.CONTROLLER_INVALID_REPLICAS, "replicas {9} don't exist"),
    ("dead member", dict(members=(2, 3), dead=(3,)),
     RC.CONTROLLER_BROKER_NOT_ALIVE, "replicas {3} don't alive"),
    ("master left out", dict(members=(2, 3)),
     RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "don't contains origin leader {1}"),
]


@pytest.mark.parametrize("what, kwargs, code, remark", ALTER_CASES, ids=[c[0] for c in ALTER_CASES])
def test_alter_sync_state_set_rejections(what, kwargs, code, remark):
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    before = m.serialize()
    r = _alter_case(m, live, **kwargs)
    assert (r.response_code, r.events, r.body) == (code, [], None)
    assert remark in r.remark
    assert m.serialize() == before


def test_alter_sync_state_set_success_expand_and_shrink():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    r = commit(m, _alter_case(m, live, members=(1, 2, 3)))
    assert r.response_code == RC.SUCCESS and r.response == AlterSyncStateSetResponseHeader(3)
    assert r.body == b'{"syncStateSet":[1,2,3],"syncStateSetEpoch":3}'
    assert r.events == [AlterSyncStateSetEvent(A, frozenset({1, 2, 3}))]
    assert state(m) == (1, 1, {1, 2, 3}, 3)
    commit(m, _alter_case(m, live, members=(1,)))  # shrink: dead members need not be alive to leave
    assert state(m) == (1, 1, {1}, 4)


# =================================================================================================
# getReplicaInfo / getSyncStateData
# =================================================================================================


def test_get_replica_info():
    m, live = manager(), Liveness()
    r = m.get_replica_info(GetReplicaInfoRequestHeader(A))
    assert (r.response_code, r.remark) == (RC.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    set_up(m, live, ids=(1, 2), master=2, in_sync=(1, 2))
    r = m.get_replica_info(GetReplicaInfoRequestHeader(A))
    assert (r.response_code, r.events) == (RC.SUCCESS, [])
    assert (r.response.master_broker_id, r.response.master_address, r.response.master_epoch) == (2, addr(2), 1)
    assert SyncStateSet.decode(r.body) == SyncStateSet(frozenset({1, 2}), 2)


def test_get_sync_state_data_body():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, 1, 3)
    r = m.get_sync_state_data([A, "unknown"], live)
    assert (r.response_code, r.events, r.response) == (RC.SUCCESS, [], None)
    rep = lambda i, alive: {"alive": alive, "brokerAddress": addr(i), "brokerId": i, "brokerName": A}  # noqa: E731
    assert json.loads(r.body) == {"replicasInfoTable": {A: {
        "inSyncReplicas": [rep(1, True), rep(2, False)], "masterAddress": addr(1), "masterBrokerId": 1,
        "masterEpoch": 1, "notInSyncReplicas": [rep(3, True)], "syncStateSetEpoch": 2}}}
    info = BrokerReplicasInfo.decode(r.body).replicas_info_table[A]
    assert info.is_exist_in_sync(A, 2, addr(2)) and info.is_exist_in_not_sync(A, 3, addr(3))
    assert not info.is_exist_in_sync(A, 3, addr(3)) and info.is_exist_in_all_replicas(A, 3, addr(3))
    assert BrokerReplicasInfo.decode(r.body).encode() == r.body


# =================================================================================================
# cleanBrokerData
# =================================================================================================


def _clean(m, live, ids, living=False, name=A):
    return m.clean_broker_data(CleanControllerBrokerDataRequestHeader(CLUSTER, name, ids, living), live)


@pytest.mark.parametrize("ids, living, alive, code, remark", [
    (None, False, (), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Broker broker-a is still alive, clean up failure"),
    ("  ", False, (), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "is still alive"),
    ("1;x", False, (), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "<brokerControllerIdsToClean>"),
    ("1;;2", False, (), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "<brokerControllerIdsToClean>"),
    ("2;3", False, (3,), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Broker [broker-a,  3] is still alive"),
    (None, True, (1, 2, 3), RC.SUCCESS, None),       # isCleanLivingBroker skips the checks
    ("2;3;", False, (1,), RC.SUCCESS, None),         # a trailing ";" is fine (String.split)
])
def test_clean_broker_data_validation(ids, living, alive, code, remark):
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, *alive)
    r = _clean(m, live, ids, living)
    assert r.response_code == code
    if remark is None:
        assert r.remark is None and len(r.events) == 1
    else:
        assert remark in r.remark and r.events == []


def test_clean_unknown_set():
    r = _clean(manager(), Liveness(), None, True)
    assert r.response_code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert r.remark == "Broker broker-a is not existed,clean broker data failure."


def test_clean_some_ids_and_a_set_vanishing_with_replicas_left():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    live.set_alive(A, 1)
    r = commit(m, _clean(m, live, "2;3"))
    assert r.events == [CleanBrokerDataEvent(A, frozenset({2, 3}))]
    assert m.replica_info_table[A].get_broker_id_table() == {1: addr(1)}
    assert state(m) == (1, 1, {1}, 2)  # removal from the set does not bump its epoch
    # Cleaning the (dead) master empties the SyncStateSet: the set disappears although the replica
    # table keeps id 4, as in RocketMQ; applying an id then starts the set afresh.
    commit(m, apply_id(m, 4))
    live.set_alive(A, 4)
    commit(m, _clean(m, live, "1"))
    assert A in m.replica_info_table and A not in m.sync_state_set_info_table
    assert not m.is_contains_broker(A)
    assert m.get_replica_info(GetReplicaInfoRequestHeader(A)).response_code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_clean_whole_set_after_its_master_is_gone():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2), master=1, in_sync=(1, 2))
    live.set_alive(A)
    commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(A), live.policy()))
    r = commit(m, _clean(m, live, None))
    assert r.events == [CleanBrokerDataEvent(A, None)]
    assert m.replica_info_table == {} and m.sync_state_set_info_table == {}


def test_clean_living_broker_with_ids_cleans_only_those_ids():
    # Deviation (see ReplicasInfoManager): Java ignores the ids here and drops the whole set.
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2))
    r = commit(m, _clean(m, live, "3", living=True))
    assert r.events == [CleanBrokerDataEvent(A, frozenset({3}))]
    assert sorted(m.replica_info_table[A].broker_id_info) == [1, 2]


def test_scan_need_reelect_broker_sets():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2), master=1, in_sync=(1, 2), name=A)
    set_up(m, live, ids=(1, 2), master=1, in_sync=(1,), name="broker-b")
    assert m.scan_need_reelect_broker_sets(live) == []
    live.set_alive(A, 2)
    live.set_alive("broker-b")  # master dead, but nobody alive to take over: not listed
    assert m.scan_need_reelect_broker_sets(live) == [A]


# =================================================================================================
# DefaultElectPolicy
# =================================================================================================


def test_policy_prefers_epoch_then_offset_then_lower_priority_then_lowest_id():
    live = Liveness()
    live.set_alive(A, 1, 2, 3, 4)
    policy = live.policy()
    elect = lambda: policy.elect(CLUSTER, A, {1, 2, 3, 4}, None, None, None)  # noqa: E731
    for i in (1, 2, 3, 4):
        live.report(A, i, epoch=3, max_offset=100)
    assert elect() == 1  # a four-way tie: the lowest id
    live.report(A, 3, epoch=3, max_offset=100, priority=5)
    assert elect() == 3  # smaller electionPriority wins a tie on (epoch, offset)
    live.report(A, 2, epoch=3, max_offset=101)
    assert elect() == 2  # more data beats priority
    live.report(A, 4, epoch=4, max_offset=0)
    assert elect() == 4  # a newer epoch beats more data


def test_policy_offsets_far_apart_compare_as_numbers():
    # Deviation: Java casts the long difference to int; 2^32 apart would compare "equal" there.
    live = Liveness()
    live.set_alive(A, 1, 2)
    live.report(A, 1, epoch=1, max_offset=0)
    live.report(A, 2, epoch=1, max_offset=1 << 32)
    assert live.policy().elect(CLUSTER, A, {1, 2}, None, None, None) == 2


def test_policy_pools_old_master_and_preference():
    live = Liveness()
    live.set_alive(A, 1, 2, 3)
    policy = DefaultElectPolicy(live)  # no live-info getter: any member, the lowest id
    assert policy.elect(CLUSTER, A, {2, 3}, None, None, None) == 2
    assert policy.elect(CLUSTER, A, {1, 2}, None, 2, None) == 2  # the old master stays
    assert policy.elect(CLUSTER, A, {1, 2}, None, 2, 1) == 1  # unless another is preferred
    assert policy.elect(CLUSTER, A, {1, 2}, None, 2, 3) is None  # a preference outside the pool: nobody
    assert policy.elect(CLUSTER, A, {1, 2}, {1, 2, 3}, 2, 3) == 3  # ... unless the all-replicas pool has it
    live.set_alive(A, 3)
    assert policy.elect(CLUSTER, A, {1, 2}, None, 1, None) is None  # the in-sync pool is dead
    assert policy.elect(CLUSTER, A, {1, 2}, {1, 2, 3}, 1, None) == 3
    assert DefaultElectPolicy().elect(CLUSTER, A, {5, 4}, None, None, None) == 4  # no predicate: all valid


def test_policy_ranks_candidates_without_live_info_last():
    live = Liveness()
    live.set_alive(A, 1, 2)
    live.report(A, 2, epoch=0, max_offset=0)
    assert live.policy().elect(CLUSTER, A, {1, 2}, None, None, None) == 2


# =================================================================================================
# DefaultBrokerHeartbeatManager
# =================================================================================================


class Timers:
    """A minimal Node.call_later on a ManualClock."""

    def __init__(self, clock: ManualClock):
        self.clock, self.pending = clock, []

    def call_later(self, delay_ms, callback):
        entry = [self.clock() + delay_ms, callback, False]
        self.pending.append(entry)

        class Handle:
            def cancel(self_inner):
                entry[2] = True
        return Handle()

    def advance_to(self, t):
        while True:
            due = sorted((e for e in self.pending if not e[2] and e[0] <= t), key=lambda e: e[0])
            if not due:
                break
            entry = due[0]
            self.pending.remove(entry)
            self.clock.now_ms = max(self.clock.now_ms, entry[0])
            entry[1]()
        self.clock.now_ms = max(self.clock.now_ms, t)


def heartbeat(hb, broker_id, channel=None, epoch=None, max_offset=None, confirm=None, timeout=None, priority=None,
              name=A):
    hb.on_broker_heartbeat(CLUSTER, name, addr(broker_id), broker_id, timeout, channel, epoch, max_offset, confirm,
                           priority)


def test_heartbeat_defaults_and_progress_rules():
    clock = ManualClock(1_000_000)
    hb = DefaultBrokerHeartbeatManager(ControllerConfig(), clock)
    hb.on_broker_heartbeat(CLUSTER, A, addr(1), None, None, None, None, None, None, None)
    info = hb.get_broker_live_info(CLUSTER, A, None)
    assert (info.broker_id, info.epoch, info.max_offset, info.heartbeat_timeout_millis,
            info.election_priority) == (-1, -1, -1, 10_000, 2**31 - 1)
    heartbeat(hb, 1, epoch=2, max_offset=500, confirm=400, timeout=3000, priority=7)
    info = hb.get_broker_live_info(CLUSTER, A, 1)
    assert (info.epoch, info.max_offset, info.confirm_offset, info.election_priority) == (2, 500, 0, 7)
    clock.advance(100)
    heartbeat(hb, 1, epoch=2, max_offset=400, confirm=300, timeout=4000, priority=9)  # going back: ignored
    assert (info.epoch, info.max_offset, info.last_update_timestamp, info.heartbeat_timeout_millis,
            info.election_priority) == (2, 500, 1_000_100, 4000, 9)
    heartbeat(hb, 1, epoch=2, max_offset=600, confirm=550)
    assert (info.max_offset, info.confirm_offset) == (600, 550)
    heartbeat(hb, 1, epoch=3, max_offset=10, confirm=5)  # a newer epoch always wins
    assert (info.epoch, info.max_offset, info.confirm_offset) == (3, 10, 5)


def test_liveness_boundary_scan_listeners_and_channel_close():
    clock, closed, inactive = ManualClock(0), [], []
    hb = DefaultBrokerHeartbeatManager(ControllerConfig(), clock, channel_closer=closed.append)
    hb.register_broker_lifecycle_listener(lambda c, n, i: inactive.append((c, n, i)))
    heartbeat(hb, 1, channel="ch1", timeout=1000)
    heartbeat(hb, 2, channel="ch2", timeout=5000)
    heartbeat(hb, 1, channel="chb", timeout=1000, name="broker-b")
    assert hb.get_active_brokers_num() == {CLUSTER: {A: 2, "broker-b": 1}}
    clock.advance(1000)
    assert hb.is_broker_active(CLUSTER, A, 1)  # lastUpdate + timeout >= now
    assert hb.scan_not_active_broker() == [] and inactive == []
    clock.advance(1)
    assert not hb.is_broker_active(CLUSTER, A, 1)
    expired = hb.scan_not_active_broker()
    assert [(e.broker_name, e.broker_id) for e in expired] == [(A, 1), ("broker-b", 1)]
    assert closed == ["ch1", "chb"] and inactive == [(CLUSTER, A, 1), (CLUSTER, "broker-b", 1)]
    assert hb.get_broker_live_info(CLUSTER, A, 1) is None
    hb.on_broker_channel_close("ch2")
    assert inactive[-1] == (CLUSTER, A, 2) and hb.broker_live_table == {}
    hb.on_broker_channel_close("unknown")  # nothing to do
    assert len(inactive) == 3
    with pytest.raises(TypeError, match="callable"):
        hb.register_broker_lifecycle_listener("not a listener")


def test_scan_schedule_runs_at_a_fixed_rate_on_the_given_clock():
    clock = ManualClock(0)
    timers = Timers(clock)
    hb = DefaultBrokerHeartbeatManager(ControllerConfig(scanNotActiveBrokerInterval=5000), clock)
    scans = []
    hb.scan_not_active_broker = lambda: scans.append(clock()) or []
    hb.start(timers.call_later)
    with pytest.raises(RuntimeError):
        hb.start(timers.call_later)
    timers.advance_to(17_000)
    assert scans == [2000, 7000, 12000, 17000]
    hb.shutdown()
    timers.advance_to(40_000)
    assert scans == [2000, 7000, 12000, 17000]


def test_a_dead_master_triggers_an_election_through_the_listener():
    """ControllerManager's onBrokerInactive, on the core alone: heartbeats lapse, the scan tells the
    listener, the listener elects (controller trigger) and the events are applied."""
    clock = ManualClock(0)
    hb = DefaultBrokerHeartbeatManager(ControllerConfig(), clock)
    m = manager()
    policy = DefaultElectPolicy(hb.is_broker_active, hb.get_broker_live_info)
    results = []

    def on_broker_inactive(cluster, broker_name, broker_id):
        replica = m.get_replica_info(GetReplicaInfoRequestHeader(broker_name))
        if broker_id is None or broker_id == replica.response.master_broker_id:
            results.append(commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(broker_name),
                                                    policy)))
    hb.register_broker_lifecycle_listener(on_broker_inactive)

    set_up(m, Liveness(), ids=(1, 2, 3), master=1, in_sync=(1,))
    for i in (1, 2, 3):
        heartbeat(hb, i, epoch=1, max_offset=100 * i)
    r = commit(m, m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet({1, 2, 3}, 1),
                                         hb.is_broker_active))
    assert r.response_code == RC.SUCCESS
    clock.advance(5000)
    for i in (2, 3):
        heartbeat(hb, i, epoch=1, max_offset=100 * i)
    clock.advance(6000)
    hb.scan_not_active_broker()
    assert [(r.response_code, r.response.master_broker_id) for r in results] == [(RC.SUCCESS, 3)]  # most data
    assert state(m) == (3, 2, {3}, 3)


# =================================================================================================
# Events: wire form and round trips
# =================================================================================================

GOLDEN_EVENTS = [
    (AlterSyncStateSetEvent(A, frozenset({3, 1, 2})),
     b'\x00\x01{"brokerName":"broker-a","eventType":"ALTER_SYNC_STATE_SET_EVENT","newSyncStateSet":[1,2,3]}'),
    (ApplyBrokerIdEvent(CLUSTER, A, "127.0.0.1:30911", 1, "127.0.0.1:30911;1700000000000"),
     b'\x00\x02{"brokerAddress":"127.0.0.1:30911","brokerName":"broker-a","clusterName":"DefaultCluster",'
     b'"eventType":"APPLY_BROKER_ID_EVENT","newBrokerId":1,"registerCheckCode":"127.0.0.1:30911;1700000000000"}'),
    (ElectMasterEvent(A, 2),
     b'\x00\x03{"brokerName":"broker-a","eventType":"ELECT_MASTER_EVENT","newMasterBrokerId":2,'
     b'"newMasterElected":true}'),
    (ElectMasterEvent.not_elected(A),
     b'\x00\x03{"brokerName":"broker-a","eventType":"ELECT_MASTER_EVENT","newMasterElected":false}'),
    (CleanBrokerDataEvent(A, None), b'\x00\x05{"brokerName":"broker-a","eventType":"CLEAN_BROKER_DATA_EVENT"}'),
    (CleanBrokerDataEvent(A, frozenset({17, 2})),
     # HashSet<Long> order: 17 hashes to bucket 1 of 16, before 2.
     b'\x00\x05{"brokerIdSetToClean":[17,2],"brokerName":"broker-a","eventType":"CLEAN_BROKER_DATA_EVENT"}'),
    (UpdateBrokerAddressEvent(CLUSTER, A, "10.0.0.2:30911", 2),
     b'\x00\x06{"brokerAddress":"10.0.0.2:30911","brokerId":2,"brokerName":"broker-a","clusterName":"DefaultCluster",'
     b'"eventType":"UPDATE_BROKER_ADDRESS"}'),
]


@pytest.mark.parametrize("event, wire", GOLDEN_EVENTS, ids=[e.event_type.event_name for e, _ in GOLDEN_EVENTS])
def test_event_serializer_golden_bytes(event, wire):
    assert EventSerializer.serialize(event) == wire
    assert EventSerializer.deserialize(wire) == event
    assert EventSerializer.serialize(EventSerializer.deserialize(wire)) == wire


def test_list_event_serializer_round_trip_and_layout():
    events = [e for e, _ in GOLDEN_EVENTS]
    data = ListEventSerializer.serialize(events)
    first = GOLDEN_EVENTS[0][1][2:]
    assert data[:6] == b"\x00\x01" + len(first).to_bytes(4, "big") and data[6:6 + len(first)] == first
    assert ListEventSerializer.deserialize(data) == events
    assert ListEventSerializer.deserialize(b"") == []


@pytest.mark.parametrize("data, message", [
    (b"\x00", "too short"),
    (b"\x00\x09{}", "unknown event type id 9"),
    (b"\x00\x04{}", "ReadEvent carries no data"),
    (b"\x00\x03[1]", "expected a JSON object"),
    (b"\x00\x03not json", "ElectMasterEvent"),
    (b'\x00\x03{"brokerName":"a","eventType":"APPLY_BROKER_ID_EVENT","newMasterElected":true,"newMasterBrokerId":1}',
     "eventType"),
    (b'\x00\x03{"brokerName":"a","newMasterElected":true}', "an elected master needs a broker id"),
    (b'\x00\x01{"brokerName":"a","newSyncStateSet":["x"]}', "AlterSyncStateSetEvent.newSyncStateSet[0]"),
    (b'\x00\x02{"brokerName":"a","brokerAddress":"x","newBrokerId":1}', "ApplyBrokerIdEvent.registerCheckCode"),
])
def test_event_serializer_rejects_bad_bytes(data, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EventSerializer.deserialize(data)


def test_list_event_serializer_rejects_bad_bytes():
    good = ListEventSerializer.serialize([ElectMasterEvent(A, 1)])
    with pytest.raises(ValueError, match="declares"):
        ListEventSerializer.deserialize(good[:-1])
    with pytest.raises(ValueError, match="stray bytes"):
        ListEventSerializer.deserialize(good + b"\x00\x03")
    with pytest.raises(TypeError):
        ListEventSerializer.serialize(["not an event"])
    with pytest.raises(TypeError):
        EventSerializer.serialize("not an event")
    with pytest.raises(TypeError):
        manager().apply_event("not an event")


def test_event_type_ids():
    assert [(t.event_name, t.id) for t in EventType] == [
        ("AlterSyncStateSetEvent", 1), ("ApplyBrokerIdEvent", 2), ("ElectMasterEvent", 3), ("ReadEvent", 4),
        ("CleanBrokerDataEvent", 5), ("UpdateBrokerAddressEvent", 6)]
    assert EventType.from_id(3) is EventType.ELECT_MASTER_EVENT and EventType.from_id(7) is None


# =================================================================================================
# Snapshots and determinism
# =================================================================================================


def _busy_manager() -> tuple[ReplicasInfoManager, list]:
    m, live = manager(), Liveness()
    log: list = []
    original = m.apply_events

    def recording(events):
        events = list(events)
        log.extend(events)
        original(events)
    m.apply_events = recording
    set_up(m, live, ids=(1, 2, 3), master=1, in_sync=(1, 2, 3))
    set_up(m, live, ids=(1, 2), master=2, in_sync=(1, 2), name="broker-b")
    commit(m, m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 3, "10.1.1.1:1"), live))
    live.set_alive(A, 2, 3)
    commit(m, m.elect_master(ElectMasterRequestHeader.of_controller_trigger(A), live.policy()))
    return m, log


def test_snapshot_round_trip_is_byte_identical():
    m, _ = _busy_manager()
    snapshot = m.serialize()
    restored = manager()
    restored.deserialize_from(snapshot)
    assert restored.serialize() == snapshot
    assert state(restored) == state(m) and state(restored, "broker-b") == state(m, "broker-b")
    assert restored.replica_info_table[A].get_broker_address(3) == "10.1.1.1:1"
    assert restored.replica_info_table[A].next_assign_broker_id == 4
    # The restored state answers requests like the original.
    req = GetReplicaInfoRequestHeader(A)
    assert restored.get_replica_info(req) == m.get_replica_info(req)


def test_replaying_the_log_or_a_snapshot_plus_the_rest_gives_the_same_state():
    leader, log = _busy_manager()
    follower = manager()
    for event in log:  # through the log's byte form, one entry per event
        follower.apply_event(EventSerializer.deserialize(EventSerializer.serialize(event)))
    assert follower.serialize() == leader.serialize()
    half = manager()
    half.apply_events(log[:5])
    late = manager()
    late.deserialize_from(half.serialize())
    late.apply_events(log[5:])
    assert late.serialize() == leader.serialize()


@pytest.mark.parametrize("snapshot, message", [
    (b"\xff", "not the JSON"),
    (b"[]", "expected a JSON object"),
    (b'{"version":2}', "version 2"),
    (b'{"version":1,"replicaInfoTable":{},"syncStateSetInfoTable":{"a":{"brokerName":"b","masterEpoch":0,'
     b'"syncStateSetEpoch":0,"syncStateSet":[]}}}', "holds broker set 'b'"),
    (b'{"version":1,"replicaInfoTable":{"a":{"brokerName":"a","nextAssignBrokerId":2,'
     b'"brokerIdInfo":{"x":["h","c"]}}},"syncStateSetInfoTable":{}}', "key 'x' is not a broker id"),
    (b'{"version":1,"replicaInfoTable":{},"syncStateSetInfoTable":{"a":{"brokerName":"a","masterEpoch":"1",'
     b'"syncStateSetEpoch":0,"syncStateSet":[]}}}', "masterEpoch"),
])
def test_bad_snapshot_is_rejected_and_the_state_kept(snapshot, message):
    m, _ = _busy_manager()
    before = m.serialize()
    with pytest.raises(ValueError, match=re.escape(message)):
        m.deserialize_from(snapshot)
    assert m.serialize() == before


# =================================================================================================
# Bad input
# =================================================================================================


@pytest.mark.parametrize("call, field_name", [
    (lambda m, live: m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, A, 1, None)), "registerCheckCode"),
    (lambda m, live: m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, A, None, "x;1")), "appliedBrokerId"),
    (lambda m, live: m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, None)), "brokerName"),
    (lambda m, live: m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, A, 1, None), live),
     "brokerAddress"),
    (lambda m, live: m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, None), SyncStateSet({1}, 0), live),
     "masterEpoch"),
    (lambda m, live: m.get_replica_info(GetReplicaInfoRequestHeader(None)), "brokerName"),
    (lambda m, live: m.get_sync_state_data([A, None], live), "brokerNames[1]"),
    (lambda m, live: m.clean_broker_data(CleanControllerBrokerDataRequestHeader(CLUSTER, None), live), "brokerName"),
])
def test_missing_fields_are_named(call, field_name):
    with pytest.raises(RemotingCommandError, match=re.escape(f"<{field_name}> is null")):
        call(manager(), Liveness())


def test_other_bad_input():
    with pytest.raises(RemotingCommandError, match="list of broker names"):
        manager().get_sync_state_data("broker-a", Liveness())
    with pytest.raises(RemotingCommandError, match="SyncStateSet body"):
        manager().alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), None, Liveness())
    with pytest.raises(ValueError, match="does not fit a Java int"):
        SyncStateSet({1}, 2**31)


# =================================================================================================
# Headers and bodies on the wire
# =================================================================================================


def test_headers_round_trip_through_ext_fields():
    headers = [
        AlterSyncStateSetRequestHeader(A, 1, 3, invoke_time=1700000000000), AlterSyncStateSetResponseHeader(4),
        ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 2), ElectMasterResponseHeader(1, addr(1), 2, 3),
        RegisterBrokerToControllerRequestHeader(CLUSTER, A, 1, addr(1)),
        RegisterBrokerToControllerResponseHeader(CLUSTER, A, 1, addr(1), 2, 3),
        GetReplicaInfoRequestHeader(A), GetMetaDataResponseHeader("group1", "n0", "127.0.0.1:9878", True, "a;b"),
        NotifyBrokerRoleChangedRequestHeader(addr(1), 2, 3, 1),
        CleanControllerBrokerDataRequestHeader(CLUSTER, A, "1;2", True),
        GetNextBrokerIdRequestHeader(CLUSTER, A), ApplyBrokerIdRequestHeader(CLUSTER, A, 1, "x;1"),
    ]
    for header in headers:
        command = RemotingCommand.create_request_command(0, header.to_ext_fields())
        assert type(header).decode(RemotingCommand.decode(command.encode()[4:])) == header


def test_header_wire_names():
    assert CleanControllerBrokerDataRequestHeader(CLUSTER, A, "1", True).to_ext_fields() == {
        "clusterName": CLUSTER, "brokerName": A, "brokerControllerIdsToClean": "1", "isCleanLivingBroker": True}
    assert GetMetaDataResponseHeader(is_leader=True).to_ext_fields() == {"isLeader": True}
    assert ElectMasterRequestHeader.of_controller_trigger(A).to_ext_fields() == {
        "clusterName": "", "brokerName": A, "brokerId": -1, "designateElect": False}
    assert ElectMasterRequestHeader.of_admin_trigger(CLUSTER, A, 3).designate_elect is True
    with pytest.raises(RemotingCommandError, match="<designateElect> is null"):
        ElectMasterRequestHeader.decode(RemotingCommand.create_request_command(
            1002, {"clusterName": "", "brokerName": A, "brokerId": "1"}))


def test_response_command_from_a_result():
    m, live = manager(), Liveness()
    set_up(m, live, ids=(1, 2), master=1, in_sync=(1,))
    cmd = m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 2), live.policy()).to_response_command()
    assert cmd.is_response_type() and cmd.code == RC.CONTROLLER_MASTER_STILL_EXIST
    assert ElectMasterResponseHeader.decode(cmd) == ElectMasterResponseHeader(1, addr(1), 1, 1)
    assert cmd.body == b'{"syncStateSet":[1]}' and "still alive" in cmd.remark


def test_bodies_json():
    assert java_long_set_order({20, 1, 3, 16}) == [16, 1, 3, 20]  # buckets 0, 1, 3, 4 of a 16-slot table
    body = ElectMasterResponseBody(BrokerMemberGroup(CLUSTER, A, {2: addr(2), 1: addr(1)}), frozenset({2}))
    assert body.encode() == (b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30921"},'
                             b'"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}')
    assert ElectMasterResponseBody.decode(body.encode()) == body
    assert SyncStateSet.decode(b'{"syncStateSet":[2,1]}') == SyncStateSet(frozenset({1, 2}), 0)
    cache = EpochEntryCache(CLUSTER, A, 1, [EpochEntry(1, 0, 100), EpochEntry(2, 100)], 250)
    assert cache.encode() == (b'{"brokerId":1,"brokerName":"broker-a","clusterName":"DefaultCluster","epochList":'
                              b'[{"endOffset":100,"epoch":1,"startOffset":0},{"endOffset":9223372036854775807,'
                              b'"epoch":2,"startOffset":100}],"maxOffset":250}')
    assert EpochEntryCache.decode(cache.encode()) == cache
    for bad, what in [(b'{"syncStateSet":{}}', "syncStateSet"), (b'{"syncStateSetEpoch":"1"}', "syncStateSetEpoch")]:
        with pytest.raises(ValueError, match=what):
            SyncStateSet.decode(bad)


# =================================================================================================
# Property: random requests through compute-then-apply keep the invariants
# =================================================================================================

NAMES = ["broker-a", "broker-b"]
IDS = st.integers(min_value=1, max_value=4)

EPOCH_DELTA = st.sampled_from([0] * 8 + [-1, 1])  # mostly current epochs, sometimes stale or ahead
MOSTLY = st.sampled_from([True, True, True, False])

ALTER = st.tuples(st.just("alter"), st.sampled_from(NAMES), MOSTLY, EPOCH_DELTA, EPOCH_DELTA,
                  st.frozensets(IDS, max_size=3), MOSTLY)
ELECT = st.tuples(st.just("elect"), st.sampled_from(NAMES), st.sampled_from(["broker", "controller", "admin"]), IDS)

# Alter and elect are listed more than once: one_of picks a branch uniformly, and these are the
# requests whose success paths need a master and current epochs to be reached at all.
operations = st.one_of(
    st.tuples(st.just("apply"), st.sampled_from(NAMES), IDS, st.integers(0, 1)),
    st.tuples(st.just("apply_next"), st.sampled_from(NAMES), st.integers(0, 1)),
    st.tuples(st.just("register"), st.sampled_from(NAMES), IDS, st.integers(0, 1)),
    ELECT, ELECT,
    # (name, propose as the current master?, epoch deltas, other members, include the master?)
    ALTER, ALTER, ALTER,
    # Cleaning a whole set (no ids) is the rarer case, or sets would rarely live long.
    st.tuples(st.just("clean"), st.sampled_from(NAMES), st.one_of(st.none(), *[st.frozensets(IDS, min_size=1,
                                                                                              max_size=2)] * 3),
              st.booleans()),
    st.tuples(st.just("alive"), st.sampled_from(NAMES), st.frozensets(IDS, max_size=4)),
    st.tuples(st.just("report"), st.sampled_from(NAMES), IDS, st.integers(0, 3), st.integers(0, 3)),
)


class Model:
    """Runs requests as the leader would and checks the invariants after each one."""

    def __init__(self, unclean: bool):
        self.m = manager(unclean)
        self.live = Liveness()
        self.log: list[bytes] = []
        self.incarnation = {name: 0 for name in NAMES}
        self.masters: dict[tuple, int | None] = {}  # (name, incarnation, masterEpoch) -> master
        self.cleaned_masters: set[tuple] = set()  # the same keys, once the master's id was cleaned
        self.last: dict[str, tuple[int, int]] = {}
        self.counts: dict[tuple[str, int], int] = {}
        for name in NAMES:  # start from registered sets (id 1 first, as brokers do), all alive
            for broker_id in (1, 2, 3):
                self._commit(apply_id(self.m, broker_id, name), name, "apply")
            self.live.set_alive(name, 1, 2, 3)
        # broker-a starts with a master; broker-b's first election is left to the operations.
        self.run(("elect", "broker-a", "broker", 1))

    def run(self, op) -> None:
        m, live, kind, name = self.m, self.live, op[0], op[1]
        if kind == "alive":
            live.set_alive(name, *op[2])
            return
        if kind == "report":
            live.report(name, op[2], epoch=op[3], max_offset=op[4] * 100)
            return
        if kind == "apply":
            result = apply_id(m, op[2], name, code=f"{addr(op[2])};{op[3]}")
        elif kind == "apply_next":  # a new broker: ask for the next id, then claim it
            broker_id = m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, name)).response.next_broker_id
            result = apply_id(m, broker_id, name, code=f"{addr(broker_id)};{op[2]}")
        elif kind == "register":
            result = m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, name, op[2],
                                                                               addr(op[2]) + "0" * op[3]), live)
        elif kind == "elect":
            trigger, broker_id = op[2], op[3]
            request = {"broker": ElectMasterRequestHeader.of_broker_trigger(CLUSTER, name, broker_id),
                       "controller": ElectMasterRequestHeader.of_controller_trigger(name),
                       "admin": ElectMasterRequestHeader.of_admin_trigger(CLUSTER, name, broker_id)}[trigger]
            result = m.elect_master(request, live.policy())
        elif kind == "alter":
            info = m.sync_state_set_info_table.get(name)
            master = (info.master_broker_id if info else None) if op[2] else 1
            master_epoch = (info.master_epoch if info else 0) + op[3]
            ss_epoch = (info.sync_state_set_epoch if info else 0) + op[4]
            members = op[5] | {info.master_broker_id} if op[6] and info and info.master_broker_id else op[5]
            result = m.alter_sync_state_set(AlterSyncStateSetRequestHeader(name, master, master_epoch),
                                            SyncStateSet(members, ss_epoch), live)
        else:  # clean
            ids = None if op[2] is None else ";".join(map(str, sorted(op[2])))
            result = _clean(m, live, ids, op[3], name)
        self._commit(result, name, kind)

    def _commit(self, result: ControllerResult, name: str, kind: str) -> None:
        m = self.m
        self.counts[(kind, result.response_code)] = self.counts.get((kind, result.response_code), 0) + 1
        before = m.serialize()
        if result.response_code not in (RC.SUCCESS, RC.CONTROLLER_MASTER_NOT_AVAILABLE):
            assert result.events == [], (kind, result)
        if kind == "alter" and result.response_code == RC.SUCCESS:
            info = m.sync_state_set_info_table[name]
            proposed = AlterSyncStateSetEvent.from_json_dict(json.loads(EventSerializer.serialize(
                result.events[0])[2:])).new_sync_state_set
            # Only the current master, with current epochs, for registered live members including it.
            assert info.master_broker_id in proposed
            assert all(self.live(CLUSTER, name, b) and m.replica_info_table[name].is_broker_exist(b) for b in proposed)
        assert m.serialize() == before  # computing changed nothing
        for event in result.events:
            entry = EventSerializer.serialize(event)
            self.log.append(entry)
            m.apply_event(EventSerializer.deserialize(entry))
        if kind == "elect" and result.response_code == RC.SUCCESS:
            # The answer is the state every replica now holds.
            info = m.sync_state_set_info_table[name]
            assert (result.response.master_broker_id, result.response.master_epoch,
                    result.response.sync_state_set_epoch) == (info.master_broker_id, info.master_epoch,
                                                              info.sync_state_set_epoch)
        self.check_invariants()

    def check_invariants(self) -> None:
        m = self.m
        for name in NAMES:
            if not m.is_contains_broker(name):
                # The set is gone (cleaned): a later one with this name starts again at epoch 0.
                if name in self.last:
                    del self.last[name]
                    self.incarnation[name] += 1
                continue
            info = m.sync_state_set_info_table[name]
            replicas = m.replica_info_table[name]
            key = (name, self.incarnation[name], info.master_epoch)
            # At most one master per broker set and master epoch.
            assert self.masters.setdefault(key, info.master_broker_id) == info.master_broker_id, key
            # The master is in the SyncStateSet, unless CleanBrokerData removed its id since it was
            # elected (RocketMQ keeps such a master on record until the next election, even when an
            # ApplyBrokerId brings the id back as a plain replica).
            if info.master_broker_id is not None and not replicas.is_broker_exist(info.master_broker_id):
                self.cleaned_masters.add(key)
            if info.master_broker_id is not None and key not in self.cleaned_masters:
                assert info.master_broker_id in info.sync_state_set
            # Epochs never go back.
            prev_master_epoch, prev_ss_epoch = self.last.get(name, (0, 0))
            assert info.master_epoch >= prev_master_epoch and info.sync_state_set_epoch >= prev_ss_epoch
            self.last[name] = (info.master_epoch, info.sync_state_set_epoch)
            # nextAssignBrokerId counts additions, and removals only shrink the table.
            assert replicas.next_assign_broker_id >= 1 + len(replicas.broker_id_info)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unclean=st.booleans(), ops=st.lists(operations, min_size=10, max_size=60))
def test_random_request_sequences_keep_the_invariants(unclean, ops):
    model = Model(unclean)
    for op in ops:
        model.run(op)
    # A follower replaying the log, and one restored from a snapshot, hold the same state.
    follower = manager(unclean)
    for entry in model.log:
        follower.apply_event(EventSerializer.deserialize(entry))
    assert follower.serialize() == model.m.serialize()
    restored = manager(unclean)
    restored.deserialize_from(model.m.serialize())
    assert restored.serialize() == model.m.serialize()
