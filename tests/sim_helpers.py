"""The simulations and clusters a test builds, closed after it by tests/conftest.py.

A builder (a helper module's ``world()`` or ``start()``, or a test itself) passes what it made to
``track``; the autouse fixture in tests/conftest.py calls ``close_tracked`` after every test, so a
failing test leaves no event loop, node task or temporary store directory behind.
"""

from __future__ import annotations

_OPEN: list = []


def track(world):
    """Close ``world`` (a Simulation or a Cluster) after the running test; returns it."""
    _OPEN.append(world)
    return world


def close_tracked() -> None:
    while _OPEN:
        world = _OPEN.pop()
        loop = getattr(world, "loop", None)  # a Simulation a test closed itself
        if loop is not None and loop.is_closed():
            continue
        world.close()
