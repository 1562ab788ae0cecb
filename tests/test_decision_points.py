"""The simulator's decision points (rmqlab.common.decision_points) and the exercises that name them.

Each graded exercise is a set of named decision points the components call with a strategy
(RocketMQ's rule by default), never a patch of a private method: a renamed method would make a
patch silently miss, while a point the components stop calling fails here."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import rmqlab
from rmqlab.lab.exercises import EXERCISES

WORKLOADS = Path(__file__).resolve().parent.parent / "datasets" / "workloads"


def test_the_exercises_name_every_decision_point_once():
    from rmqlab.common.decision_points import POINTS

    named = [p for ex in EXERCISES.values() for p in ex.points]
    assert sorted(named) == sorted(POINTS)
    for ex in EXERCISES.values():
        assert ex.decision_points(ex.reference).replaced() == tuple(p for p in POINTS if p in ex.points)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_reference_run_calls_every_point_of_the_exercise(name):
    """The exercise's reference workload, run with its reference function at its points: each
    point is called (counted at the point itself), and the run is the recorded one, byte for byte
    (RocketMQ's rule through the point decides as the component's own default does)."""
    from rmqlab.workload import load_workload, outcome_json, run_workload

    ex = EXERCISES[name]
    recorded = load_workload(WORKLOADS / f"{ex.reference_workload}.parquet")
    assert recorded.workload.mode in ex.modes
    counts = dict.fromkeys(ex.points, 0)

    def counted(point, strategy):
        def call(*args):
            counts[point] += 1
            return strategy(*args)
        return call

    calls: list = []
    points = ex.decision_points(ex.reference, calls)
    points = dataclasses.replace(points, **{p: counted(p, getattr(points, p)) for p in ex.points})
    run = run_workload(recorded.workload, decision_points=points)
    assert all(counts.values()), f"{name}: a point its reference workload never called: {counts}"
    assert len(calls) == sum(counts.values())
    assert not any("error" in c for c in calls)
    assert outcome_json(run.outcome) == outcome_json(recorded.outcome)


# --- no mock in rmqlab/ -----------------------------------------------------------------------------------
MOCK_MODULES = ("mock", "unittest.mock")
PATCH_ATTRIBUTES = {"object", "dict", "multiple", "stopall"}


def mock_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each import or use of unittest.mock (or the mock package) in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name in MOCK_MODULES or a.name.startswith("unittest.mock.")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module in MOCK_MODULES or module.startswith("unittest.mock."):
                found.append((node.lineno, f"from {module} import ..."))
            elif module == "unittest" and any(a.name == "mock" for a in node.names):
                found.append((node.lineno, "from unittest import mock"))
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "mock":
                found.append((node.lineno, f"mock.{node.attr}"))
            elif isinstance(node.value, ast.Name) and node.value.id == "patch" and node.attr in PATCH_ATTRIBUTES:
                found.append((node.lineno, f"patch.{node.attr}"))
            elif node.attr == "mock" and isinstance(node.value, ast.Name) and node.value.id == "unittest":
                found.append((node.lineno, "unittest.mock"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ("unittest.mock",):
            found.append((node.lineno, f"{node.value!r} (an import by name)"))
    return found


def test_the_mock_finder_finds_what_it_should():
    assert [w for _, w in mock_uses("from unittest import mock\nmock.patch.object(A, 'b', c)\n")] == \
        ["from unittest import mock", "mock.patch"]
    assert mock_uses("import unittest.mock\n") and mock_uses("from unittest.mock import patch\npatch.object(A, 'b')\n")
    assert mock_uses("importlib.import_module('unittest.mock')\n")
    assert mock_uses("import unittest\nunittest.mock.patch('x')\n")
    # RocketMQ's own names (PopBufferMergeService.addCkMock) and the word in a comment are not uses.
    assert mock_uses("# the mocked checkpoint\nself.add_ck_mock(x)\nmocked = 1\n") == []


def test_no_mock_in_rmqlab():
    """rmqlab/ wires nothing by patching: components take their decision points explicitly."""
    root = Path(rmqlab.__file__).resolve().parent
    offenders = {str(path.relative_to(root.parent)): uses for path in sorted(root.rglob("*.py"))
                 if (uses := mock_uses(path.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_a_decision_points_value_is_checked():
    from rmqlab.common.decision_points import DecisionPoints, of

    with pytest.raises(TypeError):
        DecisionPoints(elect_master="DefaultElectPolicy")

    with pytest.raises(TypeError):
        of({"elect_master": None})
    assert of(None) == DecisionPoints()
