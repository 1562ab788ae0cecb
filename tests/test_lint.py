"""Lint: ruff with the configuration in pyproject.toml ([tool.ruff]) finds nothing, and no test
module imports another (shared builders live in tests/conftest.py and tests/*_helpers.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.real
def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "rmqlab", "tests", "bench"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff check rmqlab tests bench:\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}"


def test_modules_import_no_test_module():
    """A test module is collected and run by pytest; importing one from another (or from bench/)
    runs its module code twice and ties the two together. Helpers go in tests/*_helpers.py."""
    offenders = []
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if len(parts) >= 2 and parts[0] == "tests" and parts[1].startswith("test_"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
                    break
    assert not offenders, "\n".join(offenders)
