"""The lab notebooks under nbval (pyproject.toml's addopts): each runs in a Jupyter kernel, an OS
process, so every cell item is marked ``real``; a notebook that starts Spark (the instructor's
class dashboard) is marked ``spark`` as well. The markers: tests/process_guard.py."""

from __future__ import annotations

from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    uses_spark: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if path.suffix != ".ipynb" or LABS not in path.parents:
            continue
        item.add_marker(pytest.mark.real)
        if path not in uses_spark:
            uses_spark[path] = "spark_session(" in path.read_text(encoding="utf-8")
        if uses_spark[path]:
            item.add_marker(pytest.mark.spark)
