"""rmqlabRejectImpossibleHaReport: rmqlab's own MessageStoreConfig key (not RocketMQ's), off by
default so classic HA takes any slave report as RocketMQ does; the loader and `-p` know it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rmqlab.cli import main
from rmqlab.config import MessageStoreConfig
from rmqlab.config.loader import load_broker_config
from rmqlab.config.rocketmq_keys import RMQLAB_KEYS, ROCKETMQ_KEYS

REPO = Path(__file__).resolve().parents[1]
KEY = "rmqlabRejectImpossibleHaReport"


def test_the_guard_is_off_by_default_and_labelled_as_rmqlabs_own():
    assert MessageStoreConfig().rmqlabRejectImpossibleHaReport is False
    assert KEY in RMQLAB_KEYS["MessageStoreConfig"] and KEY not in ROCKETMQ_KEYS["MessageStoreConfig"]
    fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
    for cls, keys in RMQLAB_KEYS.items():
        assert not keys & ROCKETMQ_KEYS[cls]  # never a RocketMQ key
    assert RMQLAB_KEYS["MessageStoreConfig"] <= fields


def test_the_loader_and_print_config_know_the_guard(tmp_path, capsys, monkeypatch):
    conf = tmp_path / "broker-a.properties"
    conf.write_text((REPO / "conf/2m-2s-sync/broker-a.properties").read_text() + f"{KEY}=true\n")
    loaded = load_broker_config(conf)
    assert loaded.messageStoreConfig.rmqlabRejectImpossibleHaReport is True and loaded.warnings == []
    monkeypatch.chdir(REPO)
    assert main(["broker", "-c", "conf/2m-2s-sync/broker-a.properties", "-p"]) == 0
    assert f"{KEY}=false\n" in capsys.readouterr().out
    assert main(["broker", "-c", str(conf), "-p"]) == 0
    assert f"{KEY}=true\n" in capsys.readouterr().out
