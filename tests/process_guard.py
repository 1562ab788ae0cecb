"""The test markers, and a guard that fails a test starting an OS process without its marker.

Markers (registered in pyproject.toml's [tool.pytest.ini_options], enforced by --strict-markers):

* ``real``: the test starts OS processes: programs such as rmqlab's servers, clients and CLI, the
  C++ and Java clients, git, bwrap, a Jupyter kernel;
* ``browser``: it drives Chromium through Playwright;
* ``spark``: it starts a Spark session (a JVM) or the grading pipeline;
* ``slow``: it takes more than ~20 s and is none of the above.

The quick subset (README.md) deselects the first three. The guard keeps it honest: a Python audit
hook (PEP 578) sees every program a test starts (``subprocess.Popen``, ``os.posix_spawn``,
``os.system``: asyncio's subprocesses, Playwright's driver and pyspark's launcher go through them)
and raises ``UnmarkedProcessError`` in a test that carries none of ``real``, ``browser``, ``spark``.
A fork that runs no other program (a process pool's simulator workers, the exercises' sandboxed
functions) is not a ``real`` process: it runs the test's own code. In a quick run every Spark
test is deselected, so a test that uses Spark unmarked is the one that launches the JVM, and is
caught as well. A process started outside any test (a session hook) is not checked.
"""

from __future__ import annotations

import os
import sys

import pytest

# Any of these lets a test start processes; the quick subset deselects them all.
PROCESS_MARKERS = frozenset({"real", "browser", "spark"})
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.system"})


class UnmarkedProcessError(RuntimeError):
    """A test without a process marker started an OS process."""


def describe(event: str, args: tuple) -> str:
    """The process an audit event starts, for the error message."""
    if event in ("subprocess.Popen", "os.posix_spawn") and len(args) >= 2:
        argv = args[1]
        argv = [argv] if isinstance(argv, (str, bytes)) else list(argv or [])
        return " ".join(str(a) for a in argv[:4]) or str(args[0])
    if event == "os.system" and args:
        return str(args[0])
    return event


def needs_marker(event: str, markers: set[str]) -> bool:
    """Whether a test carrying `markers` breaks the rule by causing audit `event`."""
    return event in PROCESS_EVENTS and not (markers & PROCESS_MARKERS)


class ProcessGuard:
    """A pytest plugin: tracks the running test and installs the audit hook (once per process:
    audit hooks cannot be removed, so an inactive guard ignores every event)."""

    _hook_installed = False
    _active: ProcessGuard | None = None

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.pid = os.getpid()
        self.previous: ProcessGuard | None = None

    @classmethod
    def _audit(cls, event: str, args: tuple) -> None:
        if event not in PROCESS_EVENTS:  # first: this runs for every audit event of the process
            return
        guard = cls._active
        # A forked child (a sandboxed student function, a pool worker) inherits the hook: what it
        # starts is its own business (the sandbox's policy refuses it), not the test's.
        if guard is None or guard.item is None or os.getpid() != guard.pid:
            return
        markers = {m.name for m in guard.item.iter_markers()}
        if needs_marker(event, markers):
            raise UnmarkedProcessError(
                f"{guard.item.nodeid} starts an OS process ({describe(event, args)}) but is marked none of "
                f"{', '.join(sorted(PROCESS_MARKERS))}: mark it (the markers: tests/process_guard.py)")

    def pytest_configure(self, config) -> None:
        # A pytest run inside a test (pytester) has a guard of its own until it ends.
        self.previous, ProcessGuard._active = ProcessGuard._active, self
        if not ProcessGuard._hook_installed:
            sys.addaudithook(ProcessGuard._audit)
            ProcessGuard._hook_installed = True

    def pytest_unconfigure(self, config) -> None:
        if ProcessGuard._active is self:
            ProcessGuard._active = self.previous

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.item = item
        try:
            return (yield)
        finally:
            self.item = None


def register(config) -> None:
    """Add the guard to a pytest run (tests/conftest.py calls this from pytest_configure)."""
    config.pluginmanager.register(ProcessGuard(), "rmqlab-process-guard")
