"""The members of a RocketMQ-on-DLedger group must describe the same group.

Each broker reads only its own file, so a member whose dLegerPeers differ from the others' (a
typo in a port, a member missing) starts and then fails at run time: its votes and heartbeats go
to addresses nobody serves, or it answers UNKNOWN_MEMBER to a leader it does not know. The deploy
guide ("Dledger集群搭建", apache/rocketmq docs/cn/dledger/deploy_guide.md) asks for one brokerName,
one dLegerGroup, the same dLegerPeers in every file and a unique dLegerSelfId per member; a
deployment that holds every member's configuration (rmqlab.cluster) checks that before starting
anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmqlab.config.addresses import parse_dleger_peers
from rmqlab.config.errors import ConfigError


def check_dledger_groups(configs: Mapping[str, Any]) -> None:
    """`configs`: member name -> BrokerStartupConfig (DLedger CommitLog brokers only). Raises
    ConfigError naming the members that disagree."""
    groups: dict[str, dict[str, Any]] = {}
    for name, b in configs.items():
        groups.setdefault(b.messageStoreConfig.dLegerGroup, {})[name] = b
    for group, members in groups.items():
        names = sorted(members)
        first = names[0]
        peers = parse_dleger_peers(members[first].messageStoreConfig.dLegerPeers)
        for name in names[1:]:
            other = parse_dleger_peers(members[name].messageStoreConfig.dLegerPeers)
            if other != peers:
                raise ConfigError(f"dLegerGroup {group}: {name}'s dLegerPeers ({_text(other)}) differ from "
                                  f"{first}'s ({_text(peers)}); every member lists the same peers")
        broker_names = {members[n].brokerConfig.brokerName for n in names}
        if len(broker_names) > 1:
            raise ConfigError(f"dLegerGroup {group}: its members have different brokerNames {sorted(broker_names)}; "
                              f"a RocketMQ-on-DLedger group is brokers of one name")
        self_ids: dict[str, str] = {}
        for name in names:
            self_id = members[name].messageStoreConfig.dLegerSelfId
            if self_id in self_ids:
                raise ConfigError(f"dLegerGroup {group}: {self_ids[self_id]} and {name} both have dLegerSelfId "
                                  f"{self_id}")
            self_ids[self_id] = name
        missing = sorted(set(peers) - set(self_ids))
        if missing:
            raise ConfigError(f"dLegerGroup {group}: no member is {', '.join(missing)} of dLegerPeers "
                              f"({_text(peers)})")


def _text(peers: Mapping[str, str]) -> str:
    return ";".join(f"{k}-{v}" for k, v in peers.items())
