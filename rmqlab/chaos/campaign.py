"""Campaigns: a named set of cases, written as plain TOML under conf/chaos/ (copy one to make your
own) and expanded here into Cases.

    campaign = load_campaign("smoke")      # conf/chaos/smoke.toml, or a path to a .toml file
    for case in campaign.cases: ...

A campaign file has defaults for every case (`[case]`: duration_ms, interval_ms, run_ms, quiet_ms,
loss_rate, workload), named configurations (`[configs.NAME]` with `broker` and `controller`
settings) and one or more `[[matrix]]` tables, each the product modes x configs x faults
("kind:target", rmqlab.checker.schedule.interval_targets) with optional overrides of the defaults
(e.g. `durations_ms = [10000, 60000]`); `base = "NAME"` starts from another campaign's file
(conf/chaos/seed003-fast.toml: seed003's matrix, shorter faults). A fault a mode cannot have (a ring of three brokers, a
controller fault where there are none) is left out of the product, not an error; `skipped` lists
them.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from rmqlab.chaos.case import Case
from rmqlab.checker.schedule import interval_fault
from rmqlab.cluster.modes import CONF_DIR, MODES

CAMPAIGN_DIR = os.path.join(CONF_DIR, "chaos")
CASE_DEFAULTS = ("duration_ms", "interval_ms", "run_ms", "quiet_ms", "loss_rate", "controllers", "workload")


@dataclass(frozen=True)
class Campaign:
    name: str
    description: str
    seeds: tuple[int, ...]
    cases: tuple[Case, ...]
    skipped: tuple[str, ...] = ()

    def case(self, name: str) -> Case:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"campaign {self.name!r} has no case {name!r}")

    def select(self, pattern: str | None) -> list[Case]:
        """The cases whose name is `pattern` or contains it (all for None)."""
        if pattern is None:
            return list(self.cases)
        exact = [c for c in self.cases if c.name == pattern]
        chosen = exact or [c for c in self.cases if pattern in c.name]
        if not chosen:
            raise KeyError(f"campaign {self.name!r} has no case matching {pattern!r}")
        return chosen

    def injections(self, seeds: int | None = None) -> int:
        return sum(c.injections() for c in self.cases) * (len(self.seeds) if seeds is None else seeds)


def builtin_campaigns() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(CAMPAIGN_DIR) if f.endswith(".toml"))


def campaign_path(name_or_path: str) -> str:
    if os.path.exists(name_or_path):
        return name_or_path
    path = os.path.join(CAMPAIGN_DIR, f"{name_or_path}.toml")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no campaign {name_or_path!r} (built in: {', '.join(builtin_campaigns())}; "
                                "or give a .toml file)")
    return path


def load_campaign(name_or_path: str) -> Campaign:
    path = campaign_path(name_or_path)
    return expand(_read(path), default_name=os.path.basename(path)[:-5])


def _read(path: str, seen: tuple[str, ...] = ()) -> dict:
    """A campaign file's data; `base = "NAME"` takes that campaign's data first: its configs and
    matrix, with this file's keys on top ([case] and [configs] merged key by key)."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    base = data.pop("base", None)
    if base is None:
        return data
    base_path = campaign_path(base)
    if base_path in seen:
        raise ValueError(f"campaign {path}: its bases loop ({' -> '.join(seen)})")
    merged = _read(base_path, (*seen, path))
    for key, value in data.items():
        merged[key] = {**merged.get(key, {}), **value} if key in ("case", "configs") else value
    if "name" not in data:
        merged["name"] = os.path.basename(path)[:-5]
    return merged


def _node_names(mode: str, controllers: int) -> tuple[list[str], list[str]]:
    m = MODES[mode]
    return list(m.brokers), m.controller_nodes(controllers)


def applicable(case: Case) -> str | None:
    """Why the case's fault cannot happen in its mode (None: it can)."""
    import random

    brokers, controllers = _node_names(case.mode, case.controllers)
    try:
        interval_fault(random.Random(0), case.kind, case.target, brokers, controllers, 0.0, 0)
    except ValueError as e:
        return str(e)
    return None


def expand(data: dict, default_name: str = "campaign") -> Campaign:
    """A campaign from its TOML data (module docstring)."""
    name = data.get("name", default_name)
    seeds = data.get("seeds", 1)
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(int(s) for s in seeds)
    defaults = dict(data.get("case", {}))
    unknown = set(defaults) - set(CASE_DEFAULTS)
    if unknown:
        raise ValueError(f"campaign {name!r}: unknown [case] keys {', '.join(sorted(unknown))}")
    configs = data.get("configs", {"template": {}})
    cases: list[Case] = []
    skipped: list[str] = []
    for i, m in enumerate(data.get("matrix", [])):
        over = {k: m[k] for k in CASE_DEFAULTS if k in m}
        durations = m.get("durations_ms", [over.pop("duration_ms", defaults.get("duration_ms", 60_000))])
        for mode in m["modes"]:
            for config in m.get("configs", ["template"]):
                if config not in configs:
                    raise ValueError(f"campaign {name!r}, matrix {i}: unknown config {config!r} "
                                     f"(defined: {', '.join(configs)})")
                preset = configs[config]
                for fault in m["faults"]:
                    kind, _, target = fault.partition(":")
                    for duration in durations:
                        case_name = f"{mode}/{config}/{fault}" + (f"/{duration / 1000:g}s" if len(durations) > 1 else "")
                        fields = {**defaults, **over, "duration_ms": duration}
                        case = Case(case_name, mode, kind, target, config, dict(preset.get("broker", {})),
                                    dict(preset.get("controller", {})) if MODES[mode].controllers else {},
                                    campaign=name, **fields)
                        why = applicable(case)
                        if why:
                            skipped.append(f"{case_name}: {why}")
                            continue
                        if any(c.name == case_name for c in cases):
                            raise ValueError(f"campaign {name!r}: case {case_name!r} twice")
                        cases.append(case)
    return Campaign(name, data.get("description", ""), seeds, tuple(cases), tuple(skipped))
