"""The test markers (tests/process_guard.py): registered, strict, and required of a test that
starts an OS process."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tests.process_guard import PROCESS_EVENTS, UnmarkedProcessError, describe, needs_marker

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
MARKERS = {"real", "browser", "spark", "slow"}


def ini_options() -> dict:
    with open(PYPROJECT, "rb") as f:
        return tomllib.load(f)["tool"]["pytest"]["ini_options"]


def test_the_four_markers_are_registered_and_strict():
    options = ini_options()
    assert {line.split(":", 1)[0] for line in options["markers"]} == MARKERS
    assert "--strict-markers" in options["addopts"].split()


def test_an_unregistered_marker_fails_collection_under_the_projects_configuration(pytester):
    pytester.makepyfile(test_inner="""
        import pytest

        @pytest.mark.real
        def test_registered():
            pass

        @pytest.mark.reall
        def test_misspelt():
            pass
    """)
    result = pytester.runpytest_inprocess("-c", str(PYPROJECT), "--rootdir", str(pytester.path), "-p", "no:nbval",
                                          "-o", "addopts=" + ini_options()["addopts"].replace("--nbval-lax", ""),
                                          "test_inner.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*'reall' not found in `markers` configuration option*"])


def test_the_guard_fails_an_unmarked_test_that_starts_a_process():
    # The audit event subprocess.Popen raises before a process is made; sys.audit raises the same
    # event without making one, so the hook this test run installed is exercised for real.
    with pytest.raises(UnmarkedProcessError, match=r"test_markers\.py::test_the_guard.* starts an OS process \(true -x\)"):
        sys.audit("subprocess.Popen", "/bin/true", ["true", "-x"], None, None)
    with pytest.raises(UnmarkedProcessError):
        sys.audit("os.system", b"true")
    sys.audit("open", "/dev/null", "r", 0)  # not a process: passes


def test_which_markers_allow_a_process():
    for event in PROCESS_EVENTS:
        assert needs_marker(event, set()) and needs_marker(event, {"slow", "parametrize"})
        assert not any(needs_marker(event, {m}) for m in ("real", "browser", "spark"))
    assert not needs_marker("os.fork", set())  # a forked worker runs the test's own code
    assert not needs_marker("open", set())
    assert describe("subprocess.Popen", ("/usr/bin/git", ["git", "ls-files", "-z"], None, None)) == "git ls-files -z"
    assert describe("subprocess.Popen", ("/bin/sh", "echo hi", None, None)) == "echo hi"


def test_notebooks_are_real_and_the_spark_one_is_spark(pytester):
    """Every lab notebook's cells (nbval) carry `real` (labs/conftest.py): a quick run collects none."""
    quick = pytester.runpytest_inprocess("-c", str(PYPROJECT), "--rootdir", str(ROOT), "--collect-only", "-q",
                                         "-m", "not real and not browser and not spark", str(ROOT / "labs"))
    assert "no tests collected" in quick.stdout.str() or "deselected" in quick.stdout.str(), quick.stdout.str()
    assert "::Cell" not in quick.stdout.str()
    spark = pytester.runpytest_inprocess("-c", str(PYPROJECT), "--rootdir", str(ROOT), "--collect-only", "-q",
                                         "-m", "spark", str(ROOT / "labs"))
    cells = [line for line in spark.stdout.lines if "::" in line]
    assert cells and all(line.startswith("labs/instructor/class-dashboard.ipynb::") for line in cells), cells
