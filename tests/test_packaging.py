"""Packaging checks: Binder's environment does not drift from the root one or from pyproject."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_binder_environment_is_identical_to_the_root_one():
    assert _read("binder", "environment.yml") == _read("environment.yml"), \
        "binder/environment.yml drifted from environment.yml (repo2docker only reads binder/)"


def test_environment_pins_python_and_java():
    env = _read("environment.yml")
    assert re.search(r"^\s*- python=3\.11\s*$", env, re.M)
    assert re.search(r"^\s*- openjdk=17\s*$", env, re.M)


def test_environment_pip_list_matches_pyproject_dependencies():
    env = _read("environment.yml")
    pip_section = env.split("- pip:", 1)[1]
    env_deps = sorted(line.strip()[2:].strip() for line in pip_section.splitlines() if line.strip().startswith("- "))
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert env_deps == sorted(project["dependencies"])
    assert "rocketmq" not in {re.split(r"[~<>=]", d)[0] for d in env_deps}  # never shadow the real client


def test_postbuild_installs_rmqlab_and_stops_on_errors():
    post = _read("binder", "postBuild")
    assert post.startswith("#!/bin/bash") and "set -e" in post and "pip install --no-deps -e ." in post
    assert os.access(os.path.join(ROOT, "binder", "postBuild"), os.X_OK)


def test_ci_runs_the_readme_test_command_verbatim():
    readme = _read("README.md")
    commands = re.findall(r"```bash\n(.+?)\n```", readme)
    assert len(commands) == 2 and commands[0].endswith(" demo") and commands[1].endswith(" test")
    assert commands[1] in _read(".ci", "run").splitlines()


def _bootstrap(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "rmqlab", "bootstrap.py"), *args],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


@pytest.mark.real
def test_bootstrap_says_how_to_get_java_when_it_is_missing(tmp_path):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no java anywhere
    r = _bootstrap(env, "test")
    assert r.returncode == 3
    assert "Java 17 or newer is required" in r.stderr and "openjdk-17" in r.stderr and "openjdk=17" in r.stderr


@pytest.mark.real
def test_bootstrap_rejects_an_old_java(tmp_path):
    fake = tmp_path / "java"
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake.chmod(0o755)
    r = _bootstrap({"PATH": str(tmp_path), "HOME": str(tmp_path)}, "demo")
    assert r.returncode == 3 and "Java 11 found" in r.stderr


@pytest.mark.real
def test_bootstrap_usage_without_a_command():
    r = _bootstrap(dict(os.environ))
    assert r.returncode == 2 and "bootstrap.py demo" in r.stderr
