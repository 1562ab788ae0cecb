"""The event trace is the readers' only contract: no module of rmqlab/ and no code cell of a lab
notebook recovers a fact by comparing or matching the text of a `log` event's "message" field.
A fact a reader needs has a kind of its own with structured fields (rmqlab.trace.kinds,
datasets/README.md); the log line stays for people, and may be displayed (in a table, a print, a
hover text), never tested.

The check parses the code (ast) and follows the message value through the usual disguises: the
fields dict under another name (``f = e.fields``, ``dict(e.fields)``, ``getattr(e, "fields")``, a
record's ``["fields"]``, a Parquet row's ``json.loads(row["fields"])``),
``.get("message")`` / ``["message"]``, a name holding the message (or a string made from it, an
f-string, ``.lower()``), a loop or comprehension variable over such values. It flags a comparison
(==, !=, in, not in, <, ...), a text test or parse (startswith, endswith, find, split, removeprefix,
a slice), a regular expression applied to it (re.match / search / fullmatch / findall / sub, a
compiled pattern's methods, fnmatch), a ``match`` statement on it, pandas' ``["message"].str``
and Spark's ``get_json_object(..., "$.message")``.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MESSAGE = "message"
# str methods that test or take apart the text: using one of them on a log line reads a fact from it.
TEXT_TESTS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "removeprefix", "removesuffix",
              "split", "rsplit", "partition", "rpartition", "splitlines", "__contains__", "__eq__", "__ne__",
              "isdigit", "isnumeric", "isdecimal"}
# Functions and pattern methods that match text (re, fnmatch): any of them given the message.
MATCHERS = {"match", "search", "fullmatch", "findall", "finditer", "sub", "subn", "fnmatch", "fnmatchcase"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@dataclass
class _Env:
    fields: set[str] = field(default_factory=set)     # names bound to an event's fields dict
    messages: set[str] = field(default_factory=set)   # names bound to (text made from) a message


def _const(node: ast.AST, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def _is_fields(node: ast.AST, env: _Env) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "fields":
        return True
    if isinstance(node, ast.Subscript) and _const(node.slice, "fields"):
        return True
    if isinstance(node, ast.Name) and node.id in env.fields:
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name in ("dict", "loads", "parse_json") and len(node.args) == 1:  # a copy, or a Parquet row's JSON
            return _is_fields(node.args[0], env)
        if name == "getattr" and len(node.args) >= 2 and _const(node.args[1], "fields"):
            return True
        if isinstance(f, ast.Attribute) and f.attr == "copy" and not node.args:
            return _is_fields(f.value, env)
    return False


def _is_message(node: ast.AST, env: _Env) -> bool:
    """`node` evaluates to a log message, or to text or a value derived from one by a method."""
    if isinstance(node, ast.Subscript):
        if _const(node.slice, MESSAGE) and _is_fields(node.value, env):
            return True
        return _is_message(node.value, env)  # message[3:], message[0]
    if isinstance(node, ast.Name):
        return node.id in env.messages
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        f = node.func
        if f.attr in ("get", "pop", "setdefault") and node.args and _const(node.args[0], MESSAGE) \
                and _is_fields(f.value, env):
            return True
        return _is_message(f.value, env)  # message.lower(), message.strip()
    if isinstance(node, ast.BoolOp):  # message or ""
        return any(_is_message(v, env) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _is_message(node.body, env) or _is_message(node.orelse, env)
    if isinstance(node, ast.NamedExpr):
        return _is_message(node.value, env)
    return False


def _derives(node: ast.AST, env: _Env) -> bool:
    """Some part of `node` is a message: a name bound to it carries the text on (f-strings, + ...)."""
    return any(_is_message(n, env) for n in ast.walk(node))


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _bindings(body: list[ast.AST]):
    """(target, value, is_iteration) of every binding in `body`, not descending into nested scopes."""
    stack = [n for n in body if not isinstance(n, _SCOPES)]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                yield t, node.value, False
        elif isinstance(node, ast.NamedExpr):
            yield node.target, node.value, False
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            yield node.target, node.iter, True
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    yield item.optional_vars, item.context_expr, False
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _SCOPES):
                stack.append(child)


def _scope_env(body: list[ast.AST], outer: _Env) -> _Env:
    env = _Env(set(outer.fields), set(outer.messages))
    bindings = list(_bindings(body))
    while True:  # to a fixed point: a binding may come textually after its use (loops, later cells)
        before = (len(env.fields), len(env.messages))
        for target, value, iterating in bindings:
            if iterating:
                # for m in (e.fields["message"] for e in events) / for m in messages_list
                if _derives(value, env):
                    env.messages.update(_names(target))
            elif isinstance(target, ast.Name):
                if _is_fields(value, env):
                    env.fields.add(target.id)
                elif _derives(value, env):
                    env.messages.add(target.id)
        if (len(env.fields), len(env.messages)) == before:
            return env


def _problem(node: ast.AST, env: _Env) -> str | None:
    if isinstance(node, ast.Compare):
        if any(_is_message(x, env) for x in [node.left, *node.comparators]):
            return "compares a log message"
    elif isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if isinstance(f, ast.Attribute) and f.attr in TEXT_TESTS and _is_message(f.value, env):
            return f"tests a log message with .{f.attr}()"
        if name in MATCHERS and any(_is_message(a, env) for a in [*node.args, *(k.value for k in node.keywords)]):
            return f"matches a log message with {name}()"
        if name == "get_json_object" and any(_const(a, "$." + MESSAGE) for a in node.args):
            return "reads the message out of the fields JSON (Spark)"
    elif isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice) and _is_message(node.value, env):
            return "slices a log message"
    elif isinstance(node, ast.Attribute):
        # pandas: df["message"].str.startswith(...), events.fields.str.contains(...)
        if node.attr == "str" and isinstance(node.value, ast.Subscript) and _const(node.value.slice, MESSAGE):
            return "tests a message column with pandas .str"
    elif isinstance(node, ast.Match):
        if _is_message(node.subject, env):
            return "match statement on a log message"
    return None


def find_message_matching(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every place `tree` compares or matches a trace event's log message."""
    out: list[tuple[int, str]] = []

    def visit(scope: ast.AST, outer: _Env) -> None:
        body = scope.body if isinstance(scope.body, list) else [scope.body]
        if isinstance(scope, _SCOPES):
            args = scope.args
            body = [*body, *args.defaults, *(d for d in args.kw_defaults if d is not None)]
        env = _scope_env(body, outer)
        stack = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, _SCOPES):
                visit(node, env)
                continue
            what = _problem(node, env)
            if what:
                out.append((getattr(node, "lineno", 0), what))
            stack.extend(ast.iter_child_nodes(node))

    visit(tree, _Env())
    return sorted(out)


def _modules() -> list[Path]:
    return sorted((ROOT / "rmqlab").rglob("*.py"))


def _notebooks() -> list[Path]:
    return sorted((ROOT / "labs").rglob("*.ipynb"))


def notebook_source(path: Path) -> str:
    """The notebook's code cells as one module (names flow from cell to cell); IPython magics and
    shell lines are left out."""
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    lines = []
    for cell in cells:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines += ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()]
    return "\n".join(lines)


# --- the rule holds in the repository --------------------------------------------------------------------------
@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reads_facts_from_log_text(path):
    found = find_message_matching(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    assert not found, (f"{path.relative_to(ROOT)} reads log text: "
                       + "; ".join(f"line {line}: {what}" for line, what in found)
                       + ". Give the fact a trace kind of its own (rmqlab/trace/kinds.py) and read its fields.")


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_lab_reads_facts_from_log_text(path):
    found = find_message_matching(ast.parse(notebook_source(path), str(path)))
    assert not found, f"{path.relative_to(ROOT)} reads log text: {found}"


def test_the_scan_sees_the_code():
    assert len(_modules()) > 100 and len(_notebooks()) >= 4


# --- the check itself: what it catches, and what it leaves alone ---------------------------------------------
CAUGHT = {
    "equality": 'x = [e for e in events if e.fields["message"] == "workload: t=0"]',
    "get": 'ok = e.kind == "log" and e.fields.get("message", "").startswith("new broker registered")',
    "alias of the fields": 'f = e.fields\nif f.get("message", "").startswith("doTruncate: "):\n    pass',
    "copy of the fields": 'f = dict(e.fields)\nok = "inactive" in f["message"]',
    "record": 'r = e.to_record()\nok = r["fields"]["message"] == "x"',
    "message name": 'message = e.fields.get("message", "")\nif message.startswith("The broker channel expired"):\n'
                    '    pass',
    "in, right side": 'message = e.fields["message"]\nok = any(a in message for a in addrs)',
    "derived text": 'm = e.fields["message"].lower()\nok = m == "x"',
    "f-string": 'line = f"{e.node}: {e.fields[\'message\']}"\nok = "inactive" in line',
    "walrus": 'ok = [1 for e in events if (m := e.fields.get("message")) and m.endswith("x")]',
    "loop variable": 'for m in (e.fields["message"] for e in events):\n    ok = m != "x"',
    "comprehension variable": 'ok = [m for m in [e.fields["message"] for e in events] if m.startswith("x")]',
    "slice": 'rest = e.fields["message"][len("doTruncate: "):]',
    "removeprefix": 'rest = f["message"].removeprefix("doTruncate: ")\nf = e.fields',
    "split": 'parts = e.fields["message"].split(", ")',
    "regex": 'import re\nm = re.match(r"The master (\\d+)", e.fields["message"])',
    "compiled regex": 'import re\nP = re.compile("x")\nm = P.search(e.fields["message"])',
    "regex keyword": 'import re\nm = re.search("x", string=e.fields["message"])',
    "match statement": 'match e.fields["message"]:\n    case "x":\n        pass',
    "in a function": 'def t0(events):\n    for e in events:\n        msg = e.fields["message"]\n'
                     '        if msg == "workload: t=0":\n            return e.time_ms',
    "closure": 'f = e.fields\ndef g():\n    return f["message"] == "x"',
    "lambda": 'pick = lambda e: e.fields.get("message") == "x"',
    "getattr": 'ok = getattr(e, "fields").get("message") == "x"',
    "parquet row": 'import json\nrow = table.to_pylist()[0]\nok = json.loads(row["fields"])["message"] == "x"',
    "pandas": 'rows = df[df["message"].str.startswith("doTruncate")]',
    "spark": 'col = get_json_object(df.fields, "$.message")',
}

LEFT_ALONE = {
    "displayed": 'print(f"{e.node} log: {e.fields[\'message\']}")\nrows.append(e.fields.get("message", ""))',
    "escaped for html": 'text = html.escape(e.fields["message"])\ncells.append(text)',
    "a violation's message": 'what = first.get("message") or first.get("what") or ""\nok = what == "lost"',
    "another dict's message": 'ok = result["message"].startswith("error")',
    "an exception's message": 'ok = str(e).startswith("x") and e.message == "y"',
    "typed fields": 'ok = e.kind == "ha.truncate" and e.fields["reason"].startswith("x")',
    "name reused in another function": 'def a(e):\n    message = e.fields["message"]\n    return message\n'
                                       'def b(v):\n    message = v.text\n    return message == "x"',
}


@pytest.mark.parametrize("name", CAUGHT)
def test_the_check_catches(name):
    assert find_message_matching(ast.parse(CAUGHT[name])), CAUGHT[name]


@pytest.mark.parametrize("name", LEFT_ALONE)
def test_the_check_leaves_alone(name):
    assert find_message_matching(ast.parse(LEFT_ALONE[name])) == [], LEFT_ALONE[name]


def test_notebook_cells_are_one_module(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": ["%matplotlib inline\n", "f = events[0].fields\n"]},
                    {"cell_type": "markdown", "source": ["f['message'] == 'x'"]},
                    {"cell_type": "code", "source": "ok = f['message'] == 'x'"}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert [line for line, _ in find_message_matching(ast.parse(notebook_source(path)))] == [3]


# --- the typed events are there, beside the lines people read ----------------------------------------------------
def test_the_name_server_traces_its_view_of_the_brokers():
    """RouteInfoManager: a registration, an expiry and the unregister it causes, as typed events that
    fit the catalog."""
    from rmqlab.common.data_version import DataVersion
    from rmqlab.config.namesrv import NamesrvConfig
    from rmqlab.namesrv import RouteInfoManager
    from rmqlab.remoting.protocol.body import TopicConfigAndMappingSerializeWrapper
    from rmqlab.trace.kinds import validate_fields

    now = [1_000_000]
    traced: list[tuple[str, dict]] = []
    rim = RouteInfoManager(NamesrvConfig(), lambda: now[0], on_trace=lambda kind, **f: traced.append((kind, f)))
    rim.register_broker("C", "h:1", "g", 0, "h:2", None, 5_000, True,
                        TopicConfigAndMappingSerializeWrapper({}, DataVersion(0, 1, 1)), [], object())
    now[0] += 6_000
    rim.scan_not_active_broker()
    for kind, fields in traced:
        validate_fields(kind, fields)
    assert traced == [
        ("namesrv.broker_register", {"cluster": "C", "broker_addr": "h:1", "broker_set": "g", "broker_id": 0,
                                     "ha_server_addr": "h:2"}),
        ("namesrv.channel_expired", {"cluster": "C", "broker_addr": "h:1", "timeout_ms": 5_000}),
        ("namesrv.channel_destroy", {"cluster": "C", "broker_addr": "h:1", "broker_set": "g", "broker_id": 0})]


# Each typed kind, and what the line its emitter logs just before it (on the same node) says.
BESIDE = {"controller.master_inactive": "The master ", "controller.need_reelect": "scanNeedReelectBrokerSets: ",
          "namesrv.broker_register": "new broker registered, ", "namesrv.channel_destroy": "the broker's channel destroyed",
          "ha.truncate": "doTruncate: ", "ha.sync_state_set_change": ": propose SyncStateSet [",
          "workload.start": "workload: t=0"}


def test_recorded_workloads_carry_each_typed_event_beside_its_log_line():
    """In the committed recordings (simulator: one global order), every typed event of `BESIDE` follows
    the log line people read, and each kind occurs somewhere."""
    from rmqlab.workload import load_workload

    seen: set[str] = set()
    for path in sorted((ROOT / "datasets" / "workloads").glob("*.parquet")):
        rec = load_workload(path)
        if rec.meta["runtime"] != "sim":
            continue
        by_seq = {e.seq: e for e in rec.events}
        for e in rec.events:
            if e.kind in BESIDE:
                seen.add(e.kind)
                line = by_seq.get(e.seq - 1)
                assert line is not None and line.kind == "log" and line.node == e.node, (path.name, e)
                assert BESIDE[e.kind] in line.fields["message"], (path.name, e, line)
    assert seen == set(BESIDE)
