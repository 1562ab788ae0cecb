"""A store that ages: commitlog and consume-queue expiry (RocketMQ's CleanCommitLogService and
ConsumeQueueStore.CleanConsumeQueueService, store/src/main/java/org/apache/rocketmq/store/
DefaultMessageStore.java), the disk-full flag, reads over deleted ranges, and what expiry does
to controller mode (the epoch file's prefix, a slave left with no consistent point).

Store-level tests run the services' passes by hand on a ManualClock; the simulator tests let a
broker's scheduler run them (60 s, then every cleanResourceInterval) on virtual time.
"""

from __future__ import annotations

import argparse
import os
import time

import pytest

from rmqlab import admin_cli
from rmqlab.common.manual_clock import ManualClock
from rmqlab.runtime.component import Component
from rmqlab.store.disk_space import VirtualDisk, get_disk_partition_space_used_percent
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.put_message_result import PutMessageStatus
from tests.store_helpers import SMALL_COMMITLOG, drive, make_message, open_store, read_queue

TOPIC = "TopicTest"
HOUR = 60 * 60 * 1000
BIG_DISK = 1 << 40  # a virtual disk on which the usage rounds up to 0.01: no threshold is near


def clean_pass(store) -> None:
    """One scheduled run of both services, in RocketMQ's order of schedule."""
    drive(store.clean_commit_log_service.run())
    drive(store.clean_consume_queue_service.run())


def hour_of(clock) -> str:
    """deleteWhen matching the store's clock now (a store without a node reads local hours, as Java)."""
    return f"{time.localtime(clock() / 1000).tm_hour:02d}"


def other_hour(clock) -> str:
    return f"{(time.localtime(clock() / 1000).tm_hour + 12) % 24:02d}"


def put(store, clock, n: int, start: int = 0, queue_id: int = 0) -> list:
    return [store.put_message(make_message(clock, start + i, queue_id=queue_id)) for i in range(n)]


def file_starts(store) -> list[int]:
    return [mf.file_from_offset for mf in store.commit_log.mapped_file_queue.mapped_files]


def commitlog_dir_names(store) -> list[str]:
    return sorted(os.listdir(store.config.get_store_path_commit_log()))


def aged_store(tmp_path, **overrides):
    """Four commitlog files written two hours ago, then one more file's worth now (the last one is
    young); 1 KiB messages, about 15 a file."""
    clock = ManualClock()
    cfg = dict(rmqlabDiskCapacityBytes=BIG_DISK, fileReservedTime=1, deleteWhen=other_hour(clock))
    cfg.update(overrides)
    store, _ = open_store(tmp_path, clock, **cfg)
    put(store, clock, 60)
    old = file_starts(store)
    clock.advance(2 * HOUR)
    put(store, clock, 20, start=60)
    store.reput_message_service.do_reput()
    return store, clock, old


# -- 1. time-based expiry at deleteWhen ---------------------------------------------------------------
def test_a_pass_deletes_files_older_than_file_reserved_time_only_at_delete_when(tmp_path):
    store, clock, old = aged_store(tmp_path)
    before = file_starts(store)
    assert len(old) == 5 and len(before) == 6
    clean_pass(store)  # not the hour: nothing goes
    assert file_starts(store) == before and store.get_min_phy_offset() == 0
    store.config.deleteWhen = hour_of(clock)
    clean_pass(store)
    # The four files last written two hours ago go; the fifth was written into again now (it
    # rolled over during the second batch), so it and everything after it stay.
    assert file_starts(store) == before[4:]
    assert store.get_min_phy_offset() == before[4]
    assert commitlog_dir_names(store) == [f"{s:020d}" for s in before[4:]]


def test_never_the_last_file_and_at_most_delete_file_batch_max_per_pass(tmp_path):
    store, clock, _ = aged_store(tmp_path, fileReservedTime=0, deleteFileBatchMax=2)
    store.config.deleteWhen = hour_of(clock)
    before = file_starts(store)
    drive(store.clean_commit_log_service.run())
    assert file_starts(store) == before[2:]
    for _ in range(5):
        drive(store.clean_commit_log_service.run())
    assert file_starts(store) == before[-1:]  # fileReservedTime 0: all old, yet the last one stays


# -- 2. the disk's thresholds -----------------------------------------------------------------------
def fill_ratio(store, ratio: float) -> None:
    """Size the virtual disk so that the store's files fill `ratio` of it."""
    store.disk.capacity_bytes = int(store.disk.used_bytes() / ratio)


def test_over_disk_max_used_space_ratio_old_files_go_whatever_the_hour(tmp_path):
    store, clock, _ = aged_store(tmp_path)
    before = file_starts(store)
    fill_ratio(store, 0.80)  # over 75 %, under the 85 % of forced cleaning
    clean_pass(store)
    assert file_starts(store) == before[4:]  # the young ones stay: not forced
    assert store.running_flags.is_writeable()


def test_over_clean_forcibly_ratio_young_files_go_too(tmp_path):
    store, clock, _ = aged_store(tmp_path, fileReservedTime=72)
    before = file_starts(store)
    fill_ratio(store, 0.87)
    clean_pass(store)
    assert file_starts(store) == before[-1:]
    assert store.running_flags.is_writeable()


def test_clean_file_forcibly_disabled_keeps_young_files_on_a_full_disk(tmp_path):
    store, clock, _ = aged_store(tmp_path, fileReservedTime=72, cleanFileForciblyEnable=False)
    before = file_starts(store)
    fill_ratio(store, 0.95)
    clean_pass(store)
    assert file_starts(store) == before
    assert not store.running_flags.is_writeable()  # and the disk stays full: puts refused


def test_a_full_disk_refuses_puts_until_a_pass_finds_space_again(tmp_path):
    """Over diskSpaceWarningLevelRatio (90 %) the pass marks DISK_FULL: a put gets
    SERVICE_NOT_AVAILABLE (the broker answers 14, which the producer retries elsewhere), while
    the forced cleaning frees the disk; the next pass finds it below the thresholds and clears the
    flag (isSpaceToDelete)."""
    store, clock, _ = aged_store(tmp_path, fileReservedTime=72)
    fill_ratio(store, 0.95)
    clean_pass(store)
    assert store.running_flags.is_disk_full()
    assert store.put_message(make_message(clock, 999)).put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    max_before = store.get_max_phy_offset()
    assert store.put_message(make_message(clock, 999)).put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.get_max_phy_offset() == max_before
    clean_pass(store)
    assert not store.running_flags.is_disk_full()
    assert store.put_message(make_message(clock, 999)).put_message_status is PutMessageStatus.PUT_OK


def test_the_disk_ratios_are_clamped_as_rocketmq_reads_them(tmp_path):
    store, clock, _ = aged_store(tmp_path, diskSpaceWarningLevelRatio=99, diskSpaceCleanForciblyRatio=10)
    service = store.clean_commit_log_service
    assert service.get_disk_space_warning_level_ratio() == 0.90
    assert service.get_disk_space_clean_forcibly_ratio() == 0.30


# -- 3. the manual trigger (mqadmin deleteExpiredCommitLog) -----------------------------------------
def test_a_manual_delete_runs_20_passes_whatever_the_hour_but_keeps_young_files(tmp_path):
    store, clock, _ = aged_store(tmp_path)
    before = file_starts(store)
    store.execute_delete_files_manually()
    clean_pass(store)
    assert file_starts(store) == before[4:]  # young files stay: fileReservedTime still holds
    assert store.clean_commit_log_service.manual_delete_file_several_times == 19
    for _ in range(19):
        clean_pass(store)
    assert store.clean_commit_log_service.manual_delete_file_several_times == 0


# -- 4. reading over a deleted range ----------------------------------------------------------------
def test_get_message_skips_a_deleted_commitlog_range_and_returns_the_later_messages(tmp_path):
    """The consume queue still points into deleted commitlog files (CleanConsumeQueueService has
    not run): RocketMQ's getMessage skips each unit below the next commitlog file and returns the
    first messages that still exist, with nextBeginOffset after them."""
    store, clock, _ = aged_store(tmp_path, mappedFileSizeConsumeQueue=20 * 300)
    store.config.deleteWhen = hour_of(clock)
    drive(store.clean_commit_log_service.run())  # the commitlog only
    min_phy = store.get_min_phy_offset()
    assert min_phy > 0 and store.get_min_offset_in_queue(TOPIC, 0) == 0
    cq = store.find_consume_queue(TOPIC, 0)
    first_alive = next(i for i in range(80) if cq._unit_at(i)[0] >= min_phy)
    r = store.get_message("g", TOPIC, 0, 0, 32)
    assert r.status is GetMessageStatus.FOUND
    assert r.queue_offsets[0] == first_alive
    assert [m.keys for m in r.messages()][0] == f"key-{first_alive}"
    assert r.next_begin_offset == r.queue_offsets[-1] + 1


def test_get_message_whose_window_is_all_deleted_moves_past_it(tmp_path):
    """Every unit read points into deleted files: MESSAGE_WAS_REMOVING (pull code 20, the client
    pulls again at once) and nextBeginOffset past the skipped units, so the next pull goes on."""
    store, clock, _ = aged_store(tmp_path)
    store.config.deleteWhen = hour_of(clock)
    drive(store.clean_commit_log_service.run())
    r = store.get_message("g", TOPIC, 0, 0, 4)  # a window of 8 units, all in deleted files
    assert r.status is GetMessageStatus.MESSAGE_WAS_REMOVING and not r.message_buffers
    assert r.next_begin_offset == 8


# -- 5. consume-queue expiry and its min offset ------------------------------------------------------
def test_consume_queue_files_below_the_commitlog_min_go_and_the_min_offset_moves(tmp_path):
    store, clock, _ = aged_store(tmp_path, mappedFileSizeConsumeQueue=20 * 10)
    store.config.deleteWhen = hour_of(clock)
    cq = store.find_consume_queue(TOPIC, 0)
    cq_files = len(cq.mapped_file_queue.mapped_files)
    clean_pass(store)
    min_phy = store.get_min_phy_offset()
    units = [(i, unit[0]) for i in range(cq.get_max_offset_in_queue()) if (unit := cq._unit_at(i)) is not None]
    first_alive = next(i for i, phy in units if phy >= min_phy)
    assert store.get_min_offset_in_queue(TOPIC, 0) == first_alive
    # Files whose last unit points below the commitlog's min are gone (10 units a file).
    assert cq.mapped_file_queue.get_min_offset() == first_alive // 10 * 200
    assert len(cq.mapped_file_queue.mapped_files) < cq_files
    r = store.get_message("g", TOPIC, 0, 0, 32)
    assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == first_alive
    assert [m.keys for m in read_queue(store, TOPIC, 0)] == [f"key-{i}" for i in range(first_alive, 80)]


def test_a_queue_with_no_message_left_gets_min_equal_to_max(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock, rmqlabDiskCapacityBytes=BIG_DISK, fileReservedTime=1)
    put(store, clock, 3, start=500, queue_id=1)  # queue 1: three messages, in the first file
    put(store, clock, 20)
    clock.advance(2 * HOUR)
    put(store, clock, 20, start=20)
    store.reput_message_service.do_reput()
    store.config.deleteWhen = hour_of(clock)
    clean_pass(store)
    assert store.get_min_phy_offset() > store.find_consume_queue(TOPIC, 1).max_physic_offset
    assert store.get_min_offset_in_queue(TOPIC, 1) == store.get_max_offset_in_queue(TOPIC, 1) == 3


def test_the_min_offset_is_corrected_on_restart(tmp_path):
    """ConsumeQueueStore.recoverOffsetTable corrects every queue's min offset against the
    commitlog's: a broker stopped after its commitlog expired but before the consume-queue pass
    must not start serving units whose messages are gone. (correctMinOffset searches the queue's
    first file only: a first file wholly below waits for CleanConsumeQueueService, as in RocketMQ.)"""
    store, clock, _ = aged_store(tmp_path, mappedFileSizeConsumeQueue=20 * 300)
    store.config.deleteWhen = hour_of(clock)
    drive(store.clean_commit_log_service.run())  # the commitlog pass only, then a clean stop
    min_phy = store.get_min_phy_offset()
    store.shutdown()
    store, _ = open_store(tmp_path, clock, rmqlabDiskCapacityBytes=BIG_DISK, mappedFileSizeConsumeQueue=20 * 300)
    assert store.get_min_phy_offset() == min_phy
    cq = store.find_consume_queue(TOPIC, 0)
    first_alive = next(i for i in range(80) if cq._unit_at(i)[0] >= min_phy)
    assert store.get_min_offset_in_queue(TOPIC, 0) == first_alive > 0
    store.shutdown()


# -- 6. files age on the store's clock ----------------------------------------------------------------
def test_a_file_ages_on_the_store_clock_across_a_restart(tmp_path):
    """The clock is not the wall clock (the simulator's is virtual, in 2023): a file's age is the
    store's clock at its last write, kept in the file's mtime over a restart."""
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock, rmqlabDiskCapacityBytes=BIG_DISK, fileReservedTime=1)
    written_at = clock()
    put(store, clock, 20)
    store.shutdown()
    store, _ = open_store(tmp_path, clock, rmqlabDiskCapacityBytes=BIG_DISK, fileReservedTime=1,
                          deleteWhen=hour_of(clock))
    first = store.commit_log.mapped_file_queue.mapped_files[0]
    assert first.get_last_modified_timestamp() == written_at
    clean_pass(store)
    assert store.get_min_phy_offset() == 0  # an hour has not passed on the store's clock
    clock.advance(HOUR)
    store.config.deleteWhen = hour_of(clock)
    clean_pass(store)
    assert store.get_min_phy_offset() == SMALL_COMMITLOG
    store.shutdown()


# -- 7. measuring the disk ----------------------------------------------------------------------------
def test_disk_usage_as_util_all_measures_it(tmp_path):
    ratio = get_disk_partition_space_used_percent(str(tmp_path))
    assert 0 < ratio <= 1
    assert get_disk_partition_space_used_percent(str(tmp_path / "missing")) == -1
    disk = VirtualDisk(1000, [str(tmp_path), str(tmp_path / "sub")])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_bytes(b"x" * 101)
    assert disk.used_bytes() == 101
    assert disk.get_disk_partition_space_used_percent(str(tmp_path)) == 0.11  # rounded up
    assert VirtualDisk(0, [str(tmp_path)]).get_disk_partition_space_used_percent(str(tmp_path)) == 0.0


def test_admin_cli_parses_delete_expired_commit_log_as_mqadmin():
    parser = argparse.ArgumentParser()
    admin_cli.add_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["admin", "deleteExpiredCommitLog", "-n", "127.0.0.1:9876", "-c", "DefaultCluster"])
    assert args.subcommand == "deleteExpiredCommitLog" and args.cluster_name == "DefaultCluster"
    args = parser.parse_args(["admin", "deleteExpiredCommitLog", "-b", "127.0.0.1:10911"])
    assert args.broker_addr == "127.0.0.1:10911"
    assert admin_cli.COMMANDS["deleteExpiredCommitLog"] is admin_cli._delete_expired_commit_log


class EpochTrimmingHA:
    """Just the AutoSwitchHAService method the commitlog pass calls (truncateEpochFilePrefix)."""

    def __init__(self, cache):
        self.epoch_cache = cache

    def truncate_epoch_file_prefix(self, offset: int) -> None:
        self.epoch_cache.truncate_prefix_by_offset(offset)


def test_an_epoch_ending_at_the_new_min_offset_is_kept_though_its_data_is_gone(tmp_path):
    """A RocketMQ quirk, reproduced: the pass trims with minPhyOffset - 1, so an epoch that ends
    exactly where the first remaining file starts (epochs change at file boundaries often enough:
    an election after a roll) keeps its entry though none of its bytes is left."""
    from rmqlab.remoting.protocol.epoch_entry import EpochEntry as E
    from rmqlab.store.epoch_file_cache import EpochFileCache

    store, clock, _ = aged_store(tmp_path, fileReservedTime=0, deleteFileBatchMax=2)
    boundary = file_starts(store)[2]
    cache = EpochFileCache(str(tmp_path / "epochFileCheckpoint"))
    cache.init_cache_from_entries([E(1, 0), E(2, boundary)])
    store.ha_service = EpochTrimmingHA(cache)
    store.execute_delete_files_manually()
    drive(store.clean_commit_log_service.run())
    assert store.get_min_phy_offset() == boundary
    assert cache.get_all_entries() == [E(1, 0, boundary), E(2, boundary)]  # epoch 1 holds nothing now
    drive(store.clean_commit_log_service.run())
    assert cache.get_all_entries() == [E(2, boundary)]  # gone once the min moves past its end


def test_correct_min_offset_looks_in_the_first_file_only_until_the_consume_queue_pass(tmp_path):
    """A RocketMQ limitation, reproduced: on restart correctMinOffset searches the queue's first
    file only; when every unit there points into deleted commitlog files the min offset stays, and
    reads from it skip what is gone (MESSAGE_WAS_REMOVING) until CleanConsumeQueueService, 60 s
    after the start, deletes that file."""
    store, clock, _ = aged_store(tmp_path)  # 50 units a consume-queue file, ~15 messages a commitlog file
    store.config.deleteWhen = hour_of(clock)
    drive(store.clean_commit_log_service.run())
    store.shutdown()
    store, _ = open_store(tmp_path, clock, rmqlabDiskCapacityBytes=BIG_DISK)
    assert store.get_min_offset_in_queue(TOPIC, 0) == 0
    r = store.get_message("g", TOPIC, 0, 0, 32)
    assert r.status is GetMessageStatus.MESSAGE_WAS_REMOVING and r.next_begin_offset == 50
    clean_pass(store)
    assert store.get_min_offset_in_queue(TOPIC, 0) > 50
    store.shutdown()


# -- 8. controller mode: the epoch file's prefix, and a slave with no consistent point ------------------
def sim_commitlog_files(sim, name) -> dict[str, bytes]:
    d = os.path.join(sim.store_dir(name), "commitlog")
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def sim_events(sim, kind, node=None):
    return [e for e in sim.tracer.events if e.kind == kind and (node is None or e.node == node)]


def test_a_slave_back_after_the_masters_files_expired_finds_no_consistent_point_and_refuses():
    """B replicates epoch 1 from A, then is down while A, re-elected (epoch 2), writes on and its
    commitlog expires: the pass that deletes files trims A's epoch file
    (AutoSwitchHAService.truncateEpochFilePrefix(minPhyOffset - 1)), so epoch 1 is gone from it.
    B comes back holding only epoch 1: no (epoch, startOffset) in common, doTruncate finds no
    consistent point, and B refuses to replicate and keeps its log, retrying, until an operator
    acts (as in tests/test_autoswitch_ha.py's synthetic case, here produced by expiry)."""
    from rmqlab.remoting.protocol.epoch_entry import EpochEntry as E
    from tests.autoswitch_helpers import COMMITLOG, b, put, world

    aging = {"fileReservedTime": 0, "rmqlabDiskCapacityBytes": BIG_DISK}
    sim = world(34, A=aging, B=aging)
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_slave("A", 1))
    for i in range(10):
        put(sim, "A", i)
    sim.run_until(lambda: B.store.get_max_phy_offset() == A.store.get_max_phy_offset(), 30_000)
    epoch1_end = A.store.get_max_phy_offset()
    sim.nemesis.kill("B")
    assert sim.run(A.become_master(2, {1}))
    for i in range(10, 250):  # about four 64 KiB files of 1 KiB messages
        put(sim, "A", i)
    sim.run_for(1_000)
    assert A.ha.get_epoch_entries() == [E(1, 0, epoch1_end), E(2, epoch1_end)]
    A.store.execute_delete_files_manually()
    sim.run(A.store.clean_commit_log_service.run())
    min_phy = A.store.get_min_phy_offset()
    assert min_phy >= 3 * COMMITLOG > epoch1_end
    assert A.ha.get_epoch_entries() == [E(2, epoch1_end)]  # epoch 1 ended below min - 1: trimmed
    assert A.ha.epoch_cache.get_all_entries() == [E(2, epoch1_end)]

    sim.nemesis.restart("B")
    sim.run_for(100)  # its start-up runs as a task
    B = b(sim, "B")
    b_before = sim_commitlog_files(sim, "B")
    assert sim.run(B.become_slave("A", 2))
    sim.run_for(12_000)
    refusals = [e for e in sim_events(sim, "net.close", "B") if e.fields["reason"].startswith("no consistent point")]
    assert len(refusals) >= 2  # refused, waited, retried, refused again
    assert f"[(1, 0)] matches one of the master's [(2, {epoch1_end})]" in refusals[0].fields["reason"]
    assert sim_commitlog_files(sim, "B") == b_before  # nothing cut, nothing appended
    assert B.ha.get_epoch_entries() == [E(1, 0)]


def test_a_slave_below_the_masters_min_offset_in_the_same_epoch_stalls_silently():
    """A RocketMQ hazard, reproduced: B is down while A, still in epoch 1, writes on and its
    commitlog expires. The open epoch is never trimmed, so B's handshake finds epoch 1 in common and
    truncates to its own end; it then asks for data A no longer has. A's WriteSocketService
    (AutoSwitchHAConnection: getCommitLogData returns null, size 0) sends nothing and records the
    slave as caught up; B neither refuses nor advances, and nothing says why."""
    from tests.autoswitch_helpers import b, put, world

    aging = {"fileReservedTime": 0, "rmqlabDiskCapacityBytes": BIG_DISK}
    sim = world(35, A=aging, B=aging)
    A, B = b(sim, "A"), b(sim, "B")
    assert sim.run(A.become_master(1, {1}))
    assert sim.run(B.become_slave("A", 1))
    for i in range(10):
        put(sim, "A", i)
    sim.run_until(lambda: B.store.get_max_phy_offset() == A.store.get_max_phy_offset(), 30_000)
    b_end = B.store.get_max_phy_offset()
    sim.nemesis.kill("B")
    for i in range(10, 250):
        put(sim, "A", i)
    sim.run_for(1_000)
    A.store.execute_delete_files_manually()
    sim.run(A.store.clean_commit_log_service.run())
    assert A.store.get_min_phy_offset() > b_end
    sim.nemesis.restart("B")
    sim.run_for(100)
    B = b(sim, "B")
    assert sim.run(B.become_slave("A", 1))
    sim.run_for(30_000)
    decision = B.ha.get_ha_client().last_truncate_decision
    assert decision.ok and decision.truncate_offset == b_end  # "consistent epoch 1"
    assert B.store.get_max_phy_offset() == b_end  # never advances
    assert not [e for e in sim_events(sim, "net.close", "B") if "consistent point" in e.fields.get("reason", "")]
    assert A.ha.sync_state.caught_up[2] >= B.node.now_ms() - 1_000  # the master counts it caught up
    assert 2 not in A.ha.get_sync_state_set()  # its ack is below the confirm offset: never expanded


# -- 9. a simulated broker: its scheduler runs the passes, mqadmin deleteExpiredCommitLog, a full disk --
def test_a_simulated_broker_expires_on_request_and_refuses_sends_while_its_virtual_disk_is_full(capsys, monkeypatch):
    """One broker on the simulator, RocketMQ's schedule (first pass after 60 s, then every 10 s),
    fileReservedTime 0 and deleteWhen 04 (the simulated clock starts at 22:13 UTC): nothing goes
    until `rmqlab admin deleteExpiredCommitLog -c DefaultCluster` asks, then every file but the
    last. A virtual disk over 90 % makes the broker answer a send 14 (SERVICE_NOT_AVAILABLE, "the
    broker's disk is full ..."), until a pass finds it has room again."""
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.client import ClientProcess, DefaultMQAdminExt, DefaultMQProducer, MessageQueue
    from rmqlab.client.exceptions import MQBrokerException
    from rmqlab.common.message import Message
    from rmqlab.common.topic_config import TopicConfig
    from rmqlab.config.loader import load_broker_config, load_namesrv_config
    from rmqlab.namesrv import NamesrvController
    from rmqlab.remoting import ResponseCode
    from rmqlab.runtime.sim import Simulation
    from tests.sim_helpers import track

    ns = "127.0.0.1:9876"
    sim = track(Simulation(seed=41))
    sim.add_node("namesrv", lambda: NamesrvController.from_startup_config(
        load_namesrv_config(overrides={"listenPort": 9876})))
    sim.add_node("broker-a", lambda: BrokerController(load_broker_config(namesrv_addr=ns, overrides={
        "brokerName": "broker-a", "listenPort": 10911, "haListenPort": 10912, "brokerIP1": "127.0.0.1",
        "storePathRootDir": sim.store_dir("broker-a"), "mappedFileSizeCommitLog": 64 * 1024,
        "mappedFileSizeConsumeQueue": 20 * 100, "fileReservedTime": 0})))
    sim.add_node("client", lambda: ClientProcess(admin=DefaultMQAdminExt(ns), producer=DefaultMQProducer("PG", ns)))
    sim.start_all()
    admin, producer = sim.components["client"]["admin"], sim.components["client"]["producer"]
    broker = sim.components["broker-a"]
    store = broker.message_store
    assert store.simulated and store.disk is not None and store.disk.capacity_bytes == 0  # unlimited
    # The hour of a simulated machine is UTC's whatever the host's time zone (22:13 at the start).
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        assert not store.is_time_to_delete()
        store.config.deleteWhen = "22"
        assert store.is_time_to_delete()
        store.config.deleteWhen = "04"
    finally:
        monkeypatch.undo()
        time.tzset()
    sim.run(admin.create_and_update_topic_config_by_cluster("DefaultCluster", TopicConfig(TOPIC, 1, 1)))
    sim.run_for(1_000)
    mq = MessageQueue(TOPIC, "broker-a", 0)

    async def send(n: int, start: int = 0):
        return [await producer.send(Message(TOPIC, bytes(1000) + str(start + i).encode()), mq) for i in range(n)]

    sim.run(send(200))
    files = file_starts(store)
    assert len(files) == 4
    sim.run_for(70_000)  # two passes at 60 s and 70 s: not the hour, an unlimited disk
    assert file_starts(store) == files
    assert sim.run(admin_cli._delete_expired_commit_log(admin, argparse.Namespace(
        broker_addr=None, cluster_name="DefaultCluster"))) == 0
    assert capsys.readouterr().out == "success"
    sim.run_for(10_000)
    assert file_starts(store) == files[-1:]
    sim.run_for(10_000)  # the consume queue follows
    assert store.get_min_offset_in_queue(TOPIC, 0) > 0

    store.disk.capacity_bytes = int(store.disk.used_bytes() / 0.95)
    sim.run_for(10_000)
    with pytest.raises(MQBrokerException) as refused:
        sim.run(send(1, start=1000))
    assert refused.value.response_code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert "the broker's disk is full" in str(refused.value)
    store.disk.capacity_bytes = 0
    sim.run_for(10_000)
    assert len(sim.run(send(1, start=2000))) == 1


class ClassicBroker(Component):
    """Just enough classic-HA broker (a store and its DefaultHAService on the node), as
    tests/test_ha_classic.py builds one."""

    component_type = "broker"

    def __init__(self, role, ha_port: int, master_ha: str | None = None):
        self.role, self.ha_port, self.master_ha = role, ha_port, master_ha

    async def start(self, node) -> None:
        from rmqlab.config import MessageStoreConfig
        from rmqlab.ha import DefaultHAService
        from rmqlab.store import DefaultMessageStore

        self.node = node
        cfg = MessageStoreConfig(storePathRootDir=node.store_dir, mappedFileSizeCommitLog=64 * 1024,
                                 mappedFileSizeConsumeQueue=20 * 100, brokerRole=self.role, haListenPort=self.ha_port,
                                 haMasterAddress=self.master_ha, fileReservedTime=0,
                                 rmqlabDiskCapacityBytes=BIG_DISK)
        self.store = DefaultMessageStore(cfg, clock=node.now_ms, node=node)
        self.store.load()
        self.ha = DefaultHAService(node, self.store, cfg, host="127.0.0.1")
        await self.ha.start()
        self.store.reput_message_service.start(node.call_later)

    async def shutdown(self) -> None:
        self.ha.shutdown()
        self.store.shutdown()

    def on_crash(self) -> None:
        self.ha.on_crash()
        self.store.kill()


def test_a_classic_slave_below_the_masters_min_offset_stalls_silently():
    """The same hazard in classic master-slave replication (DefaultHAConnection.WriteSocketService:
    the slave's requested offset has no data any more, getCommitLogData returns null, only
    heartbeats go out): a slave that was down while the master's commitlog expired never catches
    up, and nothing refuses or says so."""
    from rmqlab.config.broker import BrokerRole
    from rmqlab.runtime.sim import Simulation
    from tests.sim_helpers import track

    sim = track(Simulation(seed=36))
    sim.add_node("master", lambda: ClassicBroker(BrokerRole.ASYNC_MASTER, 30912))
    sim.add_node("slave", lambda: ClassicBroker(BrokerRole.SLAVE, 30922, "127.0.0.1:30912"))
    sim.start_all()
    master, slave = sim.components["master"], sim.components["slave"]
    for i in range(10):
        master.store.put_message(make_message(master.node.now_ms, i))
    sim.run_until(lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset(), 30_000)
    slave_end = slave.store.get_max_phy_offset()
    sim.nemesis.kill("slave")
    for i in range(10, 260):
        master.store.put_message(make_message(master.node.now_ms, i))
    sim.run_for(1_000)
    master.store.execute_delete_files_manually()
    sim.run(master.store.clean_commit_log_service.run())
    assert master.store.get_min_phy_offset() > slave_end
    sim.nemesis.restart("slave")
    sim.run_for(30_000)
    assert sim.components["slave"].store.get_max_phy_offset() == slave_end
    assert master.ha.connection_list  # connected all along: no refusal, no error
