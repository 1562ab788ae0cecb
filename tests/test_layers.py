"""The layers of rmqlab, lowest first; an import may only point down (or within its own package).

    layer       packages               what it is
    root        rmqlab                 the package itself: its version and docstring.
    trace       trace                  the event trace every component writes and every reader reads.
    common      common                 RocketMQ's common module: messages, TopicConfig, PermName,
                                       TopicValidator, Java-compatible encodings, config files.
    config      config                 configuration classes and their loaders (BrokerConfig,
                                       NamesrvConfig, ...), keeping RocketMQ's key names.
    runtime     runtime                where nodes run: the simulator and real OS processes, their
                                       clocks, network and disk (the page cache: the crash model), and
                                       the fault injection (nemeses).
    remoting    remoting               RocketMQ's 4.x remoting protocol: commands, codes, headers and
                                       bodies (EpochEntry, SubscriptionGroupConfig), client, server.
    proto       proto                  the 5.x protocol (apache.rocketmq.v2, RocketMQ's rocketmq-proto
                                       artifact) and the framed transport that carries it in the simulator.
    client      client                 the 4.x remoting clients and the 5.x gRPC client.
    dledger     dledger                DLedger, the Raft log under DLedger CommitLog mode (the store uses it).
    storage     store | raft           the broker's storage engine; the Raft library of the controller.
    ha          ha                     master-slave replication of the commit log.
    controller  controller             broker liveness, master elections, sync state sets.
    servers     broker | namesrv       the broker; the name server, which may embed a controller (as
                                       RocketMQ's NamesrvStartup does with enableControllerInNamesrv).
    proxy       proxy                  the 5.x Proxy. Local mode embeds a broker, Cluster mode uses the
                                       remoting client (MQClientAPIExt in RocketMQ): the proxy -> broker
                                       and proxy -> client edges are RocketMQ's own.
    example     example                the benchmark producer and consumer (RocketMQ's example module).
    cluster     cluster                a whole deployment built on a runtime.
    spark       spark                  the Spark session of a process, jobs of independent tasks, a
                                       standalone cluster on loopback (grading and campaigns use it).
    checker     checker                Maelstrom's checkers and chaos runs: they read the trace.
    viz         viz                    the labs' figures and widgets, drawn from the trace.
    demo        demo                   the headless walkthroughs (`rmqlab demo`).
    workload    workload               recorded workloads: spec, runner, outcome, catalog.
    chaos       chaos                  chaos campaigns (OpenChaos's cases and fault loop) run on the
                                       simulator or on Spark; their Parquet rows and report.
    lab         lab                    the labs: launcher, notebooks, exercises and the sandbox
                                       (jail) student code runs in.
    grading     grading                `rmqlab grade`: extraction, Spark stages, gradebook.
    cli         cli | admin_cli |      what a person or a test starts: the command line, the servers'
                bootstrap |            start script (`config.cli`, RocketMQ's BrokerStartup /
                config.cli |           NamesrvStartup), the workload and chaos commands and the
                workload.cli |         real-process client entry point.
                workload.real_client |
                chaos.cli

Packages of one layer ("|") are independent: none imports another, except in cli, where the
entry points call each other. The entry points sit on top
although some of their files live in lower packages' folders (next to what they start).

Every module of rmqlab/ is parsed with ast: module-level and function-level imports both count
(a deferred import is still a dependency), `from . import x` is resolved, and `TYPE_CHECKING`
imports count too (an annotation that names a higher layer's class is the same back-edge). A new
package must be given a layer here.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rmqlab"

# (layer, packages). Lowest first; a package is a module path under rmqlab ("" is rmqlab itself).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("root", ("",)),
    ("trace", ("trace",)),
    ("common", ("common",)),
    ("config", ("config",)),
    ("runtime", ("runtime",)),
    ("remoting", ("remoting",)),
    ("proto", ("proto",)),
    ("client", ("client",)),
    ("dledger", ("dledger",)),
    ("storage", ("store", "raft")),
    ("ha", ("ha",)),
    ("controller", ("controller",)),
    ("servers", ("broker", "namesrv")),
    ("proxy", ("proxy",)),
    ("example", ("example",)),
    ("cluster", ("cluster",)),
    ("spark", ("spark",)),
    ("checker", ("checker",)),
    ("viz", ("viz",)),
    ("demo", ("demo",)),
    ("workload", ("workload",)),
    ("chaos", ("chaos",)),
    ("lab", ("lab",)),
    ("grading", ("grading",)),
    ("cli", ("cli", "admin_cli", "bootstrap", "config.cli", "workload.cli", "workload.real_client",
             "chaos.cli")),
]
# Layers whose packages may import each other: the entry points (`rmqlab <command>` dispatches to
# the servers' and workloads' commands, the real-process client reuses its parser).
PEER_LAYERS = {"cli"}

# Imports that go against the order but that RocketMQ itself has, each with its reason. Keep it short.
ALLOWED: dict[tuple[str, str], str] = {}


def _package_of(module: str) -> tuple[int, str] | None:
    """(layer index, package) of a dotted module name, by its longest matching package."""
    rel = module[len("rmqlab"):].lstrip(".")
    best: tuple[int, str] | None = None
    for index, (_, packages) in enumerate(LAYERS):
        for package in packages:
            if package == "" or rel == package or rel.startswith(package + "."):
                if best is None or len(package) > len(best[1]):
                    best = (index, package)
    return best


@functools.cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.cache
def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def _imports(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported rmqlab module, line) for every import statement anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                # `from pkg import sub` imports the submodule pkg.sub when there is one.
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in modules else target, node.lineno))
    found = list(dict.fromkeys(found))  # `from m import a, b` is one import of m
    return [(name, line) for name, line in found if name == "rmqlab" or name.startswith("rmqlab.")]


def _violations() -> list[str]:
    modules = _modules()
    out = []
    for module, path in modules.items():
        importer = _package_of(module)
        for imported, line in _imports(module, path, modules):
            target = _package_of(imported)
            if importer is None or target is None or importer[1] == target[1]:
                continue
            if target[0] < importer[0] or (target[0] == importer[0] and LAYERS[importer[0]][0] in PEER_LAYERS):
                continue
            if (module, imported) in ALLOWED:
                continue
            rel = path.relative_to(ROOT)
            out.append(f"{rel}:{line}: {module} ({LAYERS[importer[0]][0]}) imports {imported} "
                       f"({LAYERS[target[0]][0]})")
    return out


def test_every_module_has_a_layer():
    missing = [m for m in _modules() if _package_of(m) is None]
    assert not missing, f"modules in no layer (add their package to LAYERS): {missing}"


def test_imports_point_down_the_layers():
    violations = _violations()
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


def test_allowed_edges_are_still_used():
    # An allow-list entry that no import needs any more is dead weight: remove it.
    modules = _modules()
    used = {(m, i) for m, p in modules.items() for i, _ in _imports(m, p, modules)}
    assert not set(ALLOWED) - used


@pytest.mark.parametrize("source, expected", [
    ("from rmqlab.broker.topic import TopicConfig\n", "rmqlab.broker.topic"),
    ("def f():\n    from rmqlab.broker import broker_util\n", "rmqlab.broker.broker_util"),
    ("from . import crash_points\n", "rmqlab.store.crash_points"),
    ("from ..broker import broker_util\n", "rmqlab.broker.broker_util"),
    ("import rmqlab.proxy.grpc\n", "rmqlab.proxy.grpc"),
])
def test_the_parser_sees_every_kind_of_import(tmp_path, source, expected):
    # A module of the store (rmqlab.store.x) with one import; the checker must resolve it.
    path = tmp_path / "x.py"
    path.write_text(source)
    modules = _modules()
    assert _imports("rmqlab.store.x", path, modules) == [(expected, source.count("\n"))]


# -- private members ---------------------------------------------------------------------------
# In every package, no module reads or writes another module's private members (`obj._name` where
# `_name` is defined only in other modules of rmqlab) nor imports another module's private names.
# A class that another module needs to drive gives it a public method. Reads of CPython's or a
# library's internals are not covered (their names are not defined in rmqlab): keep each in one
# small commented function.
PRIVATE_CHECKED = tuple(p for _, packages in LAYERS for p in packages if p)


def _private_definitions(trees: dict[str, ast.AST]) -> dict[str, set[str]]:
    """private name -> the modules that define it (a def or class, a class attribute, `self._x =`)."""
    defs: dict[str, set[str]] = {}

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for module, tree in trees.items():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.append(node.attr)
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    targets = (stmt.targets if isinstance(stmt, ast.Assign)
                               else [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
                    names += [t.id for t in targets if isinstance(t, ast.Name)]
            for name in names:
                if private(name):
                    defs.setdefault(name, set()).add(module)
    return defs


def _private_access(trees: dict[str, ast.AST], checked: tuple[str, ...]) -> list[str]:
    defs = _private_definitions(trees)
    out = []
    for module, tree in trees.items():
        rel = module[len("rmqlab."):]
        if not any(rel == p or rel.startswith(p + ".") for p in checked):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in defs and module not in defs[node.attr]:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    out.append(f"{module}:{node.lineno}: .{node.attr} of {', '.join(sorted(defs[node.attr]))}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rmqlab"):
                out += [f"{module}:{node.lineno}: imports {a.name} from {node.module}"
                        for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def _trees() -> dict[str, ast.AST]:
    return {m: _parse(p) for m, p in _modules().items() if not m.endswith("_pb2")}


def test_no_private_access_across_modules():
    found = _private_access(_trees(), PRIVATE_CHECKED)
    assert not found, "private members used from another module:\n" + "\n".join(found)


def test_the_private_access_check_sees_an_access():
    trees = {"rmqlab.runtime.a": ast.parse("class A:\n    def _die(self):\n        pass\n"),
             "rmqlab.runtime.b": ast.parse("def f(a):\n    a._die()\n    a.die()\n"),
             "rmqlab.runtime.c": ast.parse("from rmqlab.runtime.a import _helper\n")}
    assert _private_access(trees, ("runtime",)) == [
        "rmqlab.runtime.b:2: ._die of rmqlab.runtime.a",
        "rmqlab.runtime.c:1: imports _helper from rmqlab.runtime.a"]


def test_architecture_doc_names_only_paths_that_exist():
    """docs/ARCHITECTURE.md, the map this table guards, stays true."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:rmqlab|tests|datasets|conf|labs|bench|docs)/[\w./-]*)`", doc))
    assert paths, "the page names no paths?"
    missing = sorted(p for p in paths if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_architecture_doc_layer_table_is_this_one():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\w+) \| ([^|]+) \|", doc, flags=re.M)
    documented = [(layer, re.findall(r"`([\w.]+)`", packages)) for layer, packages in rows
                  if layer not in ("layer",)]
    expected = [(layer, list(packages)) for layer, packages in LAYERS if layer != "root"]
    assert [layer for layer, _ in documented] == [layer for layer, _ in expected]
    for (layer, got), (_, want) in zip(documented, expected, strict=True):
        assert got == want, f"layer {layer}: the page lists {got}, the test {want}"
