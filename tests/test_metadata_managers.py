"""Broker metadata files under <storePathRootDir>/config (RocketMQ's ConfigManager files).

Covers DataVersion, the ConfigManager persist/load scheme (.bak fallback, crash points), the
fastjson dialect the files are written in, and the four managers: TopicConfigManager
(topics.json), ConsumerOffsetManager (consumerOffset.json), ScheduleMessageService
(delayOffset.json) and SubscriptionGroupManager (subscriptionGroup.json).
"""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rmqlab.common.config_manager as cm
from rmqlab.broker.offset import ConsumerOffsetManager
from rmqlab.broker.schedule import ScheduleMessageService, parse_delay_level
from rmqlab.broker.subscription import SubscriptionGroupManager
from rmqlab.broker.topic import TopicConfigManager
from rmqlab.common.config_manager import ConfigFileError, parse_fastjson, to_fastjson
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.data_version import DataVersion
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.topic_config import TopicConfig, TopicFilterType
from rmqlab.remoting.protocol.subscription.subscription_group_config import (GroupRetryPolicy, SimpleSubscriptionData,
                                                                             SubscriptionGroupConfig)
from rmqlab.remoting.protocol.subscription.subscription_group_config import ExponentialRetryPolicy, GroupRetryPolicyType

T0 = 1_700_000_000_000


class FakeClock:
    """Virtual epoch-millisecond clock: each call advances 1 ms so timestamps are distinguishable."""

    def __init__(self, start: int = T0):
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now


# ---------------------------------------------------------------------------------------------
# DataVersion
# ---------------------------------------------------------------------------------------------

longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
versions = st.builds(DataVersion, state_version=longs, timestamp=longs, counter=longs)


def key(v: DataVersion) -> tuple[int, int, int]:
    return (v.state_version, v.counter, v.timestamp)


@given(versions, versions)
def test_compare_is_the_tuple_order_state_counter_timestamp(a: DataVersion, b: DataVersion) -> None:
    expected = (key(a) > key(b)) - (key(a) < key(b))
    assert a.compare(b) == expected
    assert b.compare(a) == -expected  # antisymmetric
    assert (a.compare(b) == 0) == (a == b)  # consistent with equality


@given(versions, versions, versions)
def test_compare_is_transitive(a: DataVersion, b: DataVersion, c: DataVersion) -> None:
    if a.compare(b) <= 0 and b.compare(c) <= 0:
        assert a.compare(c) <= 0


def test_state_version_outranks_counter_and_counter_outranks_timestamp() -> None:
    # A new master epoch wins over any number of bumps in the old epoch (RIP-44 stateVersion).
    assert DataVersion(state_version=2, counter=1, timestamp=1).compare(DataVersion(1, 10**9, 10**9)) == 1
    assert DataVersion(state_version=0, counter=5, timestamp=1).compare(DataVersion(0, 10**9, 4)) == 1
    assert DataVersion(0, 100, 5).compare(DataVersion(0, 101, 5)) == -1


def test_next_version_bumps_counter_stamps_time_and_sets_state_version() -> None:
    v = DataVersion(state_version=3, timestamp=10, counter=7)
    v.next_version(99, 4)
    assert (v.state_version, v.timestamp, v.counter) == (4, 99, 8)
    # nextVersion() without a state version passes 0, resetting it (Java behaviour).
    v.next_version(100)
    assert (v.state_version, v.timestamp, v.counter) == (0, 100, 9)


def test_assign_new_one_copies_all_fields_and_json_keys_are_rocketmqs() -> None:
    src = DataVersion(state_version=2, timestamp=T0, counter=41)
    dst = DataVersion()
    dst.assign_new_one(src)
    assert dst == src and dst is not src
    assert src.to_json_dict() == {"counter": 41, "stateVersion": 2, "timestamp": T0}
    assert src.to_json() == '{"counter":41,"stateVersion":2,"timestamp":1700000000000}'
    assert DataVersion.from_json(src.to_json()) == src


def test_data_version_json_from_before_rocketmq_5_has_no_state_version() -> None:
    assert DataVersion.from_json_dict({"counter": 3, "timestamp": 5}) == DataVersion(0, 5, 3)


@pytest.mark.parametrize("bad", [{"counter": "3"}, {"counter": True}, {"timestamp": 1.5}, {"stateVersion": 2**63}])
def test_data_version_rejects_wrong_types_naming_the_field(bad: dict) -> None:
    with pytest.raises(ValueError, match=r"dataVersion\.(counter|timestamp|stateVersion)"):
        DataVersion.from_json_dict(bad)


# ---------------------------------------------------------------------------------------------
# fastjson dialect
# ---------------------------------------------------------------------------------------------


def test_fastjson_pretty_format_matches_rocketmq_files() -> None:
    doc = {"dataVersion": {"counter": 1}, "offsetTable": {"T@g": {0: 250, 1: 248}}, "empty": {}, "gone": None}
    assert to_fastjson(doc, pretty=True) == (
        '{\n\t"dataVersion":{\n\t\t"counter":1\n\t},\n'
        '\t"offsetTable":{\n\t\t"T@g":{0:250,1:248\n\t\t}\n\t},\n'
        '\t"empty":{}\n}'
    )
    assert to_fastjson(doc) == '{"dataVersion":{"counter":1},"offsetTable":{"T@g":{0:250,1:248}},"empty":{}}'


def test_fastjson_string_escapes() -> None:
    assert to_fastjson('a"b\\c\n\t\x01\x7f/é') == '"a\\"b\\\\c\\n\\t\\u0001\\u007F/é"'


def test_parse_fastjson_reads_bare_integer_keys_only_where_keys_are() -> None:
    text = '{"a":{0:1, -2 :3},"s":"{4:5}","l":[6,7],"n":{8:[9]}}'
    assert parse_fastjson(text) == {"a": {"0": 1, "-2": 3}, "s": "{4:5}", "l": [6, 7], "n": {"8": [9]}}
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_fastjson('{"a":1')
    with pytest.raises(ValueError):
        parse_fastjson('{"a":NaN}')


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text())
json_tree = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children.filter(lambda x: x is not None), max_size=4),
        st.dictionaries(st.one_of(st.text(), st.integers(-(2**31), 2**31 - 1)), children, max_size=4),
    ),
    max_leaves=20,
)


def normalise(value):
    if isinstance(value, dict):
        return {str(k): normalise(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


@settings(max_examples=200)
@given(json_tree, st.booleans())
def test_fastjson_round_trip(value, pretty: bool) -> None:
    # Distinct keys after str(): {1: .., "1": ..} would collide in any JSON reader.
    def distinct(v) -> bool:
        if isinstance(v, dict):
            return len({str(k) for k in v}) == len(v) and all(distinct(x) for x in v.values())
        if isinstance(v, list):
            return all(distinct(x) for x in v)
        return True

    if value is None or not distinct(value):
        return
    assert parse_fastjson(to_fastjson(value, pretty)) == normalise(value)


# ---------------------------------------------------------------------------------------------
# ConfigManager: persist / load / .bak / crashes (on ConsumerOffsetManager, the busiest file)
# ---------------------------------------------------------------------------------------------


def offsets_manager(root: Path, clock: FakeClock | None = None) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(str(root), clock or FakeClock())


def test_persist_writes_config_dir_and_load_round_trips(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("10.0.0.1:5000", "g", "T", 0, 42)
    m.persist()
    path = tmp_path / "config" / "consumerOffset.json"
    assert m.config_file_path() == str(path)
    assert path.read_text() == m.encode(pretty=True)
    assert not (tmp_path / "config" / "consumerOffset.json.bak").exists()  # nothing to back up yet

    again = offsets_manager(tmp_path)
    assert again.load() == str(path)
    assert again.offset_table == {"T@g": {0: 42}}
    assert again.data_version == m.data_version


def test_second_persist_moves_previous_file_to_bak(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g", "T", 0, 1)
    m.persist()
    first = (tmp_path / "config" / "consumerOffset.json").read_text()
    m.commit_offset("h", "g", "T", 0, 2)
    m.persist()
    assert (tmp_path / "config" / "consumerOffset.json.bak").read_text() == first


def test_load_with_no_files_keeps_defaults(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    assert m.load() is None
    assert m.offset_table == {}


def two_versions(tmp_path: Path) -> tuple[Path, Path]:
    """Persist offset 1 then offset 2: main = offset 2, .bak = offset 1."""
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g", "T", 0, 1)
    m.persist()
    m.commit_offset("h", "g", "T", 0, 2)
    m.persist()
    return tmp_path / "config" / "consumerOffset.json", tmp_path / "config" / "consumerOffset.json.bak"


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "wrong_type", "delete"])
def test_load_falls_back_to_bak(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    main, bak = two_versions(tmp_path)
    text = main.read_text()
    if damage == "truncate":
        main.write_text(text[: len(text) // 2])
    elif damage == "empty":
        main.write_text("")
    elif damage == "garbage":
        main.write_bytes(b"\x00\xff" * 10)
    elif damage == "wrong_type":
        main.write_text(text.replace("0:2", '0:"two"'))
    else:
        main.unlink()

    m = offsets_manager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="rmqlab.common.config_manager"):
        assert m.load() == str(bak)
    assert m.query_offset("g", "T", 0) == 1
    if damage != "delete":
        assert str(main) in caplog.text and "corrupt" in caplog.text
        # The invalid file is gone, so the next persist cannot rotate it over the good backup.
        assert not main.exists()
    if damage == "wrong_type":
        assert "offsetTable.T@g[0]" in caplog.text


def test_both_files_corrupt_raises_naming_both(tmp_path: Path) -> None:
    main, bak = two_versions(tmp_path)
    main.write_text('{"offsetTable":{"T@g":{0:')
    bak.write_text('{"offsetTable":{"T@g":{0:"x"}}}')
    m = offsets_manager(tmp_path)
    with pytest.raises(ConfigFileError) as info:
        m.load()
    message = str(info.value)
    assert str(main) in message and str(bak) in message
    assert "offsetTable.T@g[0]" in message  # what was wrong in the backup
    assert info.value.paths == (str(main), str(bak))
    assert main.exists() and bak.exists()  # both left for inspection
    assert m.offset_table == {}  # nothing half-adopted


def test_missing_main_and_corrupt_bak_raises(tmp_path: Path) -> None:
    main, bak = two_versions(tmp_path)
    main.unlink()
    bak.write_text("[]")
    with pytest.raises(ConfigFileError, match="is missing.*expected a JSON object"):
        offsets_manager(tmp_path).load()


def test_corrupt_main_without_bak_starts_from_defaults(tmp_path: Path, caplog) -> None:
    # RocketMQ's loadBak treats a missing backup as "nothing stored": the state after the first
    # persist ever crashed mid-write.
    main = tmp_path / "config" / "consumerOffset.json"
    main.parent.mkdir()
    main.write_text('{"offsetTable":{"T@g":{0:1')
    m = offsets_manager(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert m.load() is None
    assert m.offset_table == {} and "no usable backup" in caplog.text


class Crash(Exception):
    pass


@pytest.mark.parametrize("cut", [0, 1, 37, 100, -2, -1, None])
def test_crash_while_writing_leaves_old_or_new_version(tmp_path: Path, monkeypatch, cut) -> None:
    """A crash during step 3 (partial write of `cut` bytes; None = all written, crash before the
    directory fsync) must leave a loadable old or new version."""
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g", "T", 0, 1)
    m.persist()
    m.commit_offset("h", "g", "T", 0, 2)
    real_write = cm._write_and_fsync

    def crashing_write(path: str, data: bytes) -> None:
        if cut is None:
            real_write(path, data)
        else:
            with open(path, "wb") as f:
                f.write(data[:cut])
        raise Crash

    monkeypatch.setattr(cm, "_write_and_fsync", crashing_write)
    with pytest.raises(Crash):
        m.persist()
    monkeypatch.undo()

    after = offsets_manager(tmp_path)
    after.load()
    assert after.query_offset("g", "T", 0) == (2 if cut is None else 1)


def test_crash_before_backup_rename_leaves_old_version(tmp_path: Path, monkeypatch) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g", "T", 0, 1)
    m.persist()
    m.commit_offset("h", "g", "T", 0, 2)

    def crash(*_args) -> None:
        raise Crash

    monkeypatch.setattr(cm, "_move_to_backup", crash)
    with pytest.raises(Crash):
        m.persist()
    monkeypatch.undo()
    after = offsets_manager(tmp_path)
    assert after.load() == after.config_file_path()
    assert after.query_offset("g", "T", 0) == 1


def test_crash_after_new_file_is_written_keeps_new_version(tmp_path: Path, monkeypatch) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g", "T", 0, 1)
    m.persist()
    m.commit_offset("h", "g", "T", 0, 2)
    calls = []

    def fsync_dir(directory: str) -> None:
        calls.append(directory)
        if len(calls) == 2:  # the fsync after the new file was written
            raise Crash

    monkeypatch.setattr(cm, "_fsync_directory", fsync_dir)
    with pytest.raises(Crash):
        m.persist()
    monkeypatch.undo()
    after = offsets_manager(tmp_path)
    after.load()
    assert after.query_offset("g", "T", 0) == 2


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_any_crash_cut_then_restart_and_persist_again_never_loses_everything(tmp_path_factory, data) -> None:
    root = tmp_path_factory.mktemp("crash")
    m = offsets_manager(root)
    m.commit_offset("h", "g", "T", 0, 1)
    m.persist()
    m.commit_offset("h", "g", "T", 0, 2)
    new_bytes = m.encode(pretty=True).encode()
    cut = data.draw(st.integers(0, len(new_bytes) - 1))

    def crashing_write(path: str, payload: bytes) -> None:
        with open(path, "wb") as f:
            f.write(payload[:cut])
        raise Crash

    original = cm._write_and_fsync
    cm._write_and_fsync = crashing_write
    try:
        with pytest.raises(Crash):
            m.persist()
    finally:
        cm._write_and_fsync = original
    # Restart, recover from .bak, then persist a third version and crash nowhere.
    restarted = offsets_manager(root)
    restarted.load()
    assert restarted.query_offset("g", "T", 0) == 1
    restarted.commit_offset("h", "g", "T", 0, 3)
    restarted.persist()
    final = offsets_manager(root)
    final.load()
    assert final.query_offset("g", "T", 0) == 3
    # The backup is the recovered version, never the torn file.
    backup = offsets_manager(root)
    backup.decode((root / "config" / "consumerOffset.json.bak").read_text())
    assert backup.query_offset("g", "T", 0) == 1


# ---------------------------------------------------------------------------------------------
# TopicConfigManager / topics.json
# ---------------------------------------------------------------------------------------------


def topics(root: Path, **kw) -> TopicConfigManager:
    return TopicConfigManager(str(root), kw.pop("clock", FakeClock()), broker_name="broker-a", **kw)


def test_topic_config_defaults_and_json_match_rocketmq() -> None:
    tc = TopicConfig("attr-topic")
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (16, 16, 6)
    assert to_fastjson(tc.to_json_dict()) == (
        '{"attributes":{},"order":false,"perm":6,"readQueueNums":16,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"attr-topic","topicSysFlag":0,"writeQueueNums":16}'
    )


def test_system_topics_created_at_start(tmp_path: Path) -> None:
    m = topics(tmp_path)
    t = m.topic_config_table
    expected = {
        "SELF_TEST_TOPIC": (1, 6),
        "TBW102": (8, 7),
        "BenchmarkTest": (1024, 6),
        "DefaultCluster": (16, 7),
        "broker-a": (1, 7),
        "OFFSET_MOVED_EVENT": (1, 6),
        "SCHEDULE_TOPIC_XXXX": (18, 6),
        "DefaultCluster_REPLY_TOPIC": (1, 6),
        "rmq_sys_REVIVE_LOG_DefaultCluster": (8, 6),
        "rmq_sys_SYNC_BROKER_MEMBER_broker-a": (1, 1),
        "RMQ_SYS_TRANS_HALF_TOPIC": (1, 6),
        "RMQ_SYS_TRANS_OP_HALF_TOPIC": (1, 6),
        "rmq_sys_wheel_timer": (1, 6),
    }
    assert {name: (tc.write_queue_nums, tc.perm) for name, tc in t.items()} == expected
    assert all(tc.read_queue_nums == tc.write_queue_nums for tc in t.values())
    assert m.data_version.counter == 0  # init() does not version


def test_system_topics_follow_broker_config(tmp_path: Path) -> None:
    m = topics(
        tmp_path,
        auto_create_topic_enable=False,
        trace_topic_enable=True,
        timer_wheel_enable=False,
        cluster_topic_enable=False,
        broker_topic_enable=False,
    )
    t = m.topic_config_table
    assert "TBW102" not in t and "rmq_sys_wheel_timer" not in t
    assert t["RMQ_SYS_TRACE_TOPIC"].write_queue_nums == 1
    assert t["DefaultCluster"].perm == PermName.PERM_INHERIT
    assert t["broker-a"].perm == PermName.PERM_INHERIT


def test_topics_json_shape(tmp_path: Path) -> None:
    m = topics(tmp_path)
    m.persist()
    doc = parse_fastjson((tmp_path / "config" / "topics.json").read_text())
    assert list(doc) == ["dataVersion", "topicConfigTable"]
    assert list(doc["dataVersion"]) == ["counter", "stateVersion", "timestamp"]
    entry = doc["topicConfigTable"]["TBW102"]
    assert list(entry) == [
        "attributes",
        "order",
        "perm",
        "readQueueNums",
        "topicFilterType",
        "topicName",
        "topicSysFlag",
        "writeQueueNums",
    ]
    assert (tmp_path / "config" / "topics.json").read_text().startswith('{\n\t"dataVersion":{\n\t\t"counter":0,')


def test_topic_changes_bump_version_and_persist(tmp_path: Path) -> None:
    clock = FakeClock()
    m = topics(tmp_path, clock=clock, state_machine_version=lambda: 3)
    m.update_topic_config(TopicConfig("TopicTest", 4, 4, order=True, attributes={"+message.type": "NORMAL"}))
    assert (m.data_version.counter, m.data_version.state_version, m.data_version.timestamp) == (1, 3, clock.now)
    assert m.select_topic_config("TopicTest").order and m.is_order_topic("TopicTest")
    m.update_topic_config_list([TopicConfig("A"), TopicConfig("B", topic_filter_type=TopicFilterType.MULTI_TAG)])
    assert m.data_version.counter == 3
    assert m.delete_topic_config("A") is True
    assert m.delete_topic_config("A") is False
    assert m.data_version.counter == 4
    assert m.create_topic_if_absent(TopicConfig("B", 1, 1)).write_queue_nums == 16  # existing wins
    assert m.data_version.counter == 4

    loaded = topics(tmp_path)
    loaded.load()
    assert loaded.data_version == m.data_version
    assert loaded.topic_config_table == m.topic_config_table
    assert loaded.select_topic_config("B").topic_filter_type is TopicFilterType.MULTI_TAG
    assert loaded.select_topic_config("TopicTest").attributes == {"+message.type": "NORMAL"}


def test_stored_topic_definition_wins_over_init(tmp_path: Path) -> None:
    m = topics(tmp_path)
    m.update_topic_config(TopicConfig("SCHEDULE_TOPIC_XXXX", 2, 2))
    loaded = topics(tmp_path)
    loaded.load()
    assert loaded.select_topic_config("SCHEDULE_TOPIC_XXXX").write_queue_nums == 2
    assert loaded.select_topic_config("TBW102") is not None  # init's topics stay


def test_topic_decode_errors_name_the_value(tmp_path: Path) -> None:
    m = topics(tmp_path)
    with pytest.raises(ValueError, match=r"topicConfigTable\.T\.readQueueNums: expected an integer"):
        m.decode('{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":"8"}}}')
    with pytest.raises(ValueError, match=r"topicFilterType: 'ONE_TAG' is not one of"):
        m.decode('{"topicConfigTable":{"T":{"topicName":"T","topicFilterType":"ONE_TAG"}}}')
    with pytest.raises(ValueError, match="differs from its key"):
        m.decode('{"topicConfigTable":{"T":{"topicName":"U"}}}')
    with pytest.raises(ValueError, match=r"readQueueNums: 2147483648 does not fit a Java int"):
        m.decode('{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":2147483648}}}')
    assert "T" not in m.topic_config_table


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("", "The specified topic is blank."),
        ("   ", "The specified topic is blank."),
        ("a b", "The specified topic: a b, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("tópico", "contains illegal characters"),
        ("t" * 128, "is longer than topic max length: 127"),
        ("%RETRY%" + "g" * 249, "is DLQ or Retry topic"),
    ],
)
def test_topic_validation_messages(topic: str, remark: str) -> None:
    result = TopicValidator.validate_topic(topic)
    assert not result.valid and remark in result.remark


@pytest.mark.parametrize("topic", ["t" * 127, "%RETRY%" + "g" * 248, "%DLQ%g", "a|b%c-d_e", "TopicTest"])
def test_valid_topics(topic: str) -> None:
    assert TopicValidator.validate_topic(topic) == (True, "")


def test_group_validation() -> None:
    assert TopicValidator.validate_group("g" * 120).valid
    assert "is longer than group max length: 120" in TopicValidator.validate_group("g" * 121).remark
    assert TopicValidator.validate_group("").remark == "The specified group is blank."


def test_admin_update_rejects_system_topics_and_manager_rejects_bad_names(tmp_path: Path) -> None:
    m = topics(tmp_path)
    assert m.validate_topic_for_update("broker-a").remark == "The topic[broker-a] is conflict with system topic."
    assert not m.validate_topic_for_update("rmq_sys_anything").valid
    assert not m.validate_topic_for_update("TRANS_CHECK_MAX_TIME_TOPIC").valid
    assert m.validate_topic_for_update("TopicTest").valid
    # Another broker's names are not this broker's system topics.
    assert topics(tmp_path / "b").validate_topic_for_update("broker-b").valid is True
    with pytest.raises(ValueError, match="contains illegal characters"):
        m.update_topic_config(TopicConfig("bad topic"))
    assert m.data_version.counter == 0


# ---------------------------------------------------------------------------------------------
# ConsumerOffsetManager / consumerOffset.json
# ---------------------------------------------------------------------------------------------


def test_consumer_offset_json_shape(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g1", "T", 1, 248)
    m.commit_offset("h", "g1", "T", 0, 250)
    m.commit_offset("h", "g1", "%RETRY%g1", 0, 0)
    m.commit_offset("h", "g2", "T", 0, 7)
    m.persist()
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert text.endswith('\t"offsetTable":{\n\t\t"%RETRY%g1@g1":{0:0\n\t\t},\n\t\t"T@g1":{0:250,1:248\n\t\t},'
                         '\n\t\t"T@g2":{0:7\n\t\t}\n\t}\n}')
    doc = parse_fastjson(text)
    assert list(doc) == ["dataVersion", "groupTopicMap", "offsetTable"]
    assert doc["groupTopicMap"] == {"g1": ["%RETRY%g1", "T"], "g2": ["T"]}
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # RocketMQ's bare integer keys are not standard JSON


def test_query_offset_unknown_is_minus_one_and_reset_offset_takes_precedence(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    assert m.query_offset("g", "T", 0) == -1
    m.commit_offset("h", "g", "T", 0, 10)
    assert m.query_offset("g", "T", 0) == 10
    assert m.assign_reset_offset("T", "g", 0, 3)
    m.commit_offset("h", "g", "T", 0, 11)
    assert m.query_offset("g", "T", 0) == 3  # reset still pending
    assert m.query_then_erase_reset_offset("T", "g", 0) == 3
    assert m.query_offset("g", "T", 0) == 11
    assert not m.assign_reset_offset("T", "g", -1, 3)


def test_consumer_offset_version_steps_every_500_commits(tmp_path: Path) -> None:
    clock = FakeClock()
    m = ConsumerOffsetManager(str(tmp_path), clock, state_machine_version=lambda: 7)
    start = m.data_version.copy()
    for i in range(499):
        m.commit_offset("h", "g", "T", i % 4, i)
    assert m.data_version == start
    m.commit_offset("h", "g", "T", 0, 500)
    assert (m.data_version.counter, m.data_version.state_version, m.data_version.timestamp) == (1, 7, clock.now)
    for i in range(500):
        m.commit_offset("h", "g", "T", 0, i)
    assert m.data_version.counter == 2


def test_version_step_counter_restarts_with_the_process(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(str(tmp_path), FakeClock(), consumer_offset_update_version_step=3)
    for i in range(2):
        m.commit_offset("h", "g", "T", 0, i)
    m.persist()
    again = ConsumerOffsetManager(str(tmp_path), FakeClock(), consumer_offset_update_version_step=3)
    again.load()
    again.commit_offset("h", "g", "T", 0, 9)
    assert again.data_version.counter == 0  # 1 commit in this process, not 3 overall
    with pytest.raises(ValueError, match="consumerOffsetUpdateVersionStep must be positive"):
        ConsumerOffsetManager(str(tmp_path), FakeClock(), consumer_offset_update_version_step=0)


def test_consumer_offset_decode_replaces_table_and_ignores_group_topic_map(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "old", "T", 0, 1)
    m.decode(
        '{"dataVersion":{"counter":4,"stateVersion":1,"timestamp":9},"groupTopicMap":{"x":["y"]},'
        '"offsetTable":{"T@g":{0:5,"1":6}}}'
    )
    assert m.offset_table == {"T@g": {0: 5, 1: 6}}
    assert m.data_version == DataVersion(1, 9, 4)
    with pytest.raises(ValueError, match=r"offsetTable\.T@g: key 'x' is not an integer"):
        m.decode('{"offsetTable":{"T@g":{"x":5}}}')
    assert m.offset_table == {"T@g": {0: 5, 1: 6}}


def test_offset_table_views(tmp_path: Path) -> None:
    m = offsets_manager(tmp_path)
    m.commit_offset("h", "g1", "T", 0, 5)
    m.commit_offset("h", "g2", "T", 0, 9)
    m.commit_offset("h", "g2", "U", 1, 1)
    assert m.which_topic_by_consumer("g2") == {"T", "U"}
    assert m.which_group_by_topic("T") == {"g1", "g2"}
    assert m.query_offset_table("g2", "U") == {1: 1}
    mins = m.query_min_offset_in_all_group("T", "g1", lambda topic, q: 0)
    assert mins == {0: 9}
    assert m.query_offset("g1", "T", 0) == 5  # filtering did not delete g1 (RocketMQ's would)
    assert m.query_min_offset_in_all_group("T", "", lambda topic, q: 6) == {0: 9}
    m.clone_offset("g1", "g3", "T")
    assert m.query_offset("g3", "T", 0) == 5
    m.clean_offset("g2")
    assert m.which_group_by_topic("T") == {"g1", "g3"}


# ---------------------------------------------------------------------------------------------
# ScheduleMessageService / delayOffset.json
# ---------------------------------------------------------------------------------------------


def test_default_delay_levels(tmp_path: Path) -> None:
    s = ScheduleMessageService(str(tmp_path), FakeClock())
    assert s.max_delay_level == 18
    assert s.delay_level_table[1] == 1000
    assert s.delay_level_table[5] == 60_000
    assert s.delay_level_table[18] == 2 * 3600 * 1000
    assert s.compute_deliver_timestamp(3, T0) == T0 + 10_000
    assert s.compute_deliver_timestamp(99, T0) == T0 + 1000
    assert s.delay_level2_queue_id(1) == 0 and s.queue_id2_delay_level(17) == 18
    assert parse_delay_level("2d") == {1: 2 * 86_400_000}


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ("1s 5x", r"level 2 \('5x'\) has unit 'x'; the units are s, m, h, d"),
        ("1s  5s", r"level 2 \(''\) is empty"),
        ("1s 10ms", r"level 2 \('10ms'\) is not <number><unit>"),
        ("s", r"level 1 \('s'\) is not <number><unit>"),
        ("", r"level 1 \(''\) is empty"),
        ("-5s", "is negative"),
    ],
)
def test_bad_delay_levels_are_named(tmp_path: Path, levels: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScheduleMessageService(str(tmp_path), FakeClock(), message_delay_level=levels)


def test_delay_offset_version_steps_every_200_updates_and_json_shape(tmp_path: Path) -> None:
    s = ScheduleMessageService(str(tmp_path), FakeClock())
    for i in range(199):
        s.update_offset(1 + i % 18, i)
    assert s.data_version.counter == 0
    s.update_offset(3, 1000)
    assert s.data_version.counter == 1
    s.persist()
    text = (tmp_path / "config" / "delayOffset.json").read_text()
    doc = parse_fastjson(text)
    assert list(doc) == ["dataVersion", "offsetTable"]
    assert '"offsetTable":{1:' in text
    loaded = ScheduleMessageService(str(tmp_path), FakeClock())
    loaded.load()
    assert loaded.offset_table == s.offset_table and loaded.data_version == s.data_version
    assert loaded.query_offset(3) == 1000 and loaded.query_offset(99) == 0


def test_delay_offset_file_without_data_version_keeps_current(tmp_path: Path) -> None:
    s = ScheduleMessageService(str(tmp_path), FakeClock())
    before = s.data_version.copy()
    s.decode('{"offsetTable":{2:40}}')
    assert s.offset_table == {2: 40} and s.data_version == before
    with pytest.raises(ValueError, match=r"offsetTable\[2\]: expected an integer"):
        s.decode('{"offsetTable":{2:"40"}}')


# ---------------------------------------------------------------------------------------------
# SubscriptionGroupManager / subscriptionGroup.json
# ---------------------------------------------------------------------------------------------


def groups(root: Path, **kw) -> SubscriptionGroupManager:
    return SubscriptionGroupManager(str(root), kw.pop("clock", FakeClock()), **kw)


def test_subscription_group_config_json_matches_rocketmq() -> None:
    # JSON.toJSONString(new SubscriptionGroupConfig()) with groupName MyGroup, RocketMQ 5.
    assert to_fastjson(SubscriptionGroupConfig("MyGroup").to_json_dict()) == (
        '{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
        '"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,'
        '"groupName":"MyGroup","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
        '"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
        '"whichBrokerWhenConsumeSlowly":1}'
    )


def test_system_groups_and_file_shape(tmp_path: Path) -> None:
    m = groups(tmp_path)
    assert set(m.subscription_group_table) == {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_RMQ_SYS_TRANS",
    }
    assert m.data_version.counter == 0
    m.persist()
    doc = parse_fastjson((tmp_path / "config" / "subscriptionGroup.json").read_text())
    assert list(doc) == ["dataVersion", "forbiddenTable", "subscriptionGroupTable"]
    assert "subscriptionDataSet" not in doc["subscriptionGroupTable"]["TOOLS_CONSUMER"]


def test_find_subscription_group_auto_creates(tmp_path: Path) -> None:
    m = groups(tmp_path)
    assert m.find_subscription_group_config("GID_orders").group_name == "GID_orders"
    assert m.data_version.counter == 1
    assert m.find_subscription_group_config("bad group") is None
    off = groups(tmp_path / "off", auto_create_subscription_group=False)
    assert off.find_subscription_group_config("GID_orders") is None
    assert off.find_subscription_group_config("CID_RMQ_SYS_X") is not None  # sys groups still created
    loaded = groups(tmp_path)
    loaded.load()
    assert loaded.contains_subscription_group("GID_orders")


def test_subscription_group_round_trip_with_nested_values(tmp_path: Path) -> None:
    m = groups(tmp_path, state_machine_version=lambda: 2)
    cfg = SubscriptionGroupConfig(
        "GID_x",
        consume_message_orderly=True,
        retry_max_times=3,
        broker_id=1,
        group_retry_policy=GroupRetryPolicy(GroupRetryPolicyType.EXPONENTIAL, ExponentialRetryPolicy(1000, 60000, 3)),
        subscription_data_set=[SimpleSubscriptionData("T", "TAG", "a || b", 5)],
        attributes={"k": "v"},
    )
    m.update_subscription_group_config(cfg)
    m.set_forbidden("GID_x", "T", 1)
    assert m.is_forbidden("GID_x", "T", 1) and m.get_forbidden("GID_x", "T") == 2
    assert m.data_version.counter == 2 and m.data_version.state_version == 2
    loaded = groups(tmp_path)
    loaded.load()
    assert loaded.subscription_group_table["GID_x"] == cfg
    assert loaded.subscription_group_table["GID_x"].subscription_data_set[0].version == 5
    assert loaded.forbidden_table == {"GID_x": {"T": 2}}
    assert loaded.data_version == m.data_version
    assert cfg.group_retry_policy.retry_policy().next_delay_duration(2) == 9000


def test_subscription_group_delete_and_forbidden_quirk(tmp_path: Path) -> None:
    m = groups(tmp_path)
    m.update_subscription_group_config(SubscriptionGroupConfig("G"))
    m.set_forbidden("G", "T1", 0)
    m.set_forbidden("G", "T2", 0)
    counter = m.data_version.counter
    m.clear_forbidden("G", "T1", 0)
    # RocketMQ quirk: clearing one topic to 0 drops the whole group's bits, unversioned.
    assert m.forbidden_table == {} and m.data_version.counter == counter
    assert m.delete_subscription_group_config("G") is True
    assert m.delete_subscription_group_config("G") is False
    assert m.data_version.counter == counter + 1
    with pytest.raises(ValueError, match="is longer than group max length"):
        m.update_subscription_group_config(SubscriptionGroupConfig("g" * 121))


def test_subscription_group_decode_errors(tmp_path: Path) -> None:
    m = groups(tmp_path)
    with pytest.raises(ValueError, match=r"subscriptionGroupTable\.G\.consumeEnable: expected true or false"):
        m.decode('{"subscriptionGroupTable":{"G":{"groupName":"G","consumeEnable":"yes"}}}')
    with pytest.raises(ValueError, match=r"forbiddenTable\.G\.T: expected an integer"):
        m.decode('{"forbiddenTable":{"G":{"T":"1"}}}')
    assert "G" not in m.subscription_group_table


# ---------------------------------------------------------------------------------------------
# House rule: no wall clock, randomness or sockets in these modules
# ---------------------------------------------------------------------------------------------

MODULES = [
    "rmqlab/common/data_version.py",
    "rmqlab/common/config_manager.py",
    "rmqlab/common/topic_config.py",
    "rmqlab/common/constant/perm_name.py",
    "rmqlab/common/topic/topic_validator.py",
    "rmqlab/broker/topic/topic_config_manager.py",
    "rmqlab/broker/offset/consumer_offset_manager.py",
    "rmqlab/broker/schedule/schedule_message_service.py",
    "rmqlab/remoting/protocol/subscription/subscription_group_config.py",
    "rmqlab/broker/subscription/subscription_group_manager.py",
]


@pytest.mark.parametrize("module", MODULES)
def test_no_time_random_or_socket_imports(module: str) -> None:
    source = (Path(__file__).resolve().parent.parent / module).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"time", "random", "socket"}
