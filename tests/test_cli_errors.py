"""The command line says why it failed: a port already taken (which address, which process role,
and nothing written into the running instance's log), a producer whose sends all failed (exit code
and cause), `rmqlab admin` without -n ($NAMESRV_ADDR, one line for one cause), and help texts that
say what the commands do and point at nothing outside the repository.

Every server here is a real `rmqlab` process on 127.0.0.1, stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import socket
import subprocess
import sys

import pytest

from tests.process_helpers import stop

from rmqlab.cli import SERVER_COMMANDS, build_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_port() -> int:
    """A loopback port nothing listens on (connects are refused)."""
    return free_port()


def cli_env(home, **extra: str) -> dict[str, str]:
    """This checkout's rmqlab, a HOME of the test's own (~/logs/rmqlab), no RMQLAB_* / NAMESRV_ADDR."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_") and k != "NAMESRV_ADDR"}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def rmqlab(*argv: str, env, cwd, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqlab.cli", *argv], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    """A running `rmqlab namesrv` on a free port: (port, HOME, logs dir); stopped by PID."""
    tmp = tmp_path_factory.mktemp("namesrv")
    port = free_port()
    conf = write(tmp / "namesrv.properties", f"listenPort={port}\n")
    env = cli_env(tmp / "home")
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], env=env, cwd=str(tmp),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # bounded: a hung start fails the test
        line = proc.stdout.readline() if ready else ""  # the boot line, or "" if it exited
        assert "boot success" in line, f"namesrv did not start: {line!r} {proc.stderr.read() if proc.poll() else ''}"
        yield port, tmp / "home", tmp / "home" / "logs" / "rmqlab"
    finally:
        stop(proc)


def _logs(logs_dir) -> dict[str, str]:
    return {name: (logs_dir / name).read_text() for name in sorted(os.listdir(logs_dir))}


@pytest.mark.real
def test_a_server_log_is_named_after_the_instance(namesrv):
    port, _home, logs_dir = namesrv
    assert f"namesrv-{port}.log" in os.listdir(logs_dir)
    assert "boot success" in (logs_dir / f"namesrv-{port}.log").read_text()


def _boot(argv: list[str], env, cwd) -> subprocess.Popen:
    """A process started and past its boot line (bounded wait)."""
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", *argv], env=env, cwd=str(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    assert "boot success" in line, (line, proc.poll())
    return proc


def _stop(proc: subprocess.Popen) -> None:
    stop(proc, grace_s=30)


@pytest.mark.real
def test_two_live_instances_of_one_name_never_share_a_log_file(tmp_path):
    # Two producers, both named "producer" (clients have no port to tell them apart), both running.
    env, argv = cli_env(tmp_path / "home"), ["producer", "-n", f"127.0.0.1:{dead_port()}", "-q", "0"]
    first = _boot(argv, env, tmp_path)
    try:
        second = _boot(argv, env, tmp_path)
        _stop(second)
    finally:
        _stop(first)
    logs = _logs(tmp_path / "home" / "logs" / "rmqlab")
    assert set(logs) == {"producer.log", f"producer-{second.pid}.log"}
    for text in logs.values():
        assert text.count("boot success") == 1


@pytest.mark.real
@pytest.mark.parametrize("role", ["namesrv", "broker", "controller", "proxy"])
def test_a_port_in_use_is_named_and_the_running_instance_log_is_left_alone(namesrv, role, tmp_path):
    port, home, logs_dir = namesrv
    before = _logs(logs_dir)
    if role == "namesrv":  # the same instance again: same name, same port, same log file name
        argv = ["namesrv", "-c", write(tmp_path / "namesrv.properties", f"listenPort={port}\n")]
        who = "rmqlab namesrv"
    elif role == "broker":
        argv = ["broker", "-c", write(tmp_path / "broker.properties",
                                      f"brokerName=broker-x\nlistenPort={port}\nhaListenPort={free_port()}\n"
                                      f"brokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{port}\n"
                                      f"storePathRootDir={tmp_path / 'store'}\n")]
        who = "rmqlab broker (broker-x)"
    elif role == "controller":
        argv = ["controller", "-c", write(tmp_path / "controller.properties",
                                          f"controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n"
                                          f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp_path / 'ctl'}\n")]
        who = "rmqlab controller (controller-n0)"
    else:
        argv = ["proxy", "-pc", write(tmp_path / "rmq-proxy.json", json.dumps(
            {"rocketMQClusterName": "DefaultCluster", "namesrvAddr": f"127.0.0.1:{port}", "proxyMode": "cluster",
             "grpcServerPort": port}))]
        who = "rmqlab proxy"
    # The same HOME: the failed start would log into ~/logs/rmqlab beside the running name server.
    result = rmqlab(*argv, env=cli_env(home), cwd=str(tmp_path))
    assert result.returncode != 0
    assert "boot success" not in result.stdout
    assert f"{who}: cannot listen on 127.0.0.1:{port}: address already in use" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert _logs(logs_dir) == before  # no line appended, no file added


@pytest.mark.real
def test_a_controller_whose_raft_port_is_taken_fails_instead_of_running_without_raft(tmp_path):
    """pysyncobj retries a failed bind forever by default: the controller printed "boot success"
    and ran with no Raft at all. Its remoting port is free here; only the Raft port is taken."""
    from rmqlab.controller.impl.raft_controller import RAFT_PORT_OFFSET

    while True:
        port = free_port()
        if port + RAFT_PORT_OFFSET <= 65535:
            break
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port + RAFT_PORT_OFFSET))
        holder.listen()
        conf = write(tmp_path / "controller.properties",
                     f"controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n"
                     f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp_path / 'ctl'}\n")
        result = rmqlab("controller", "-c", conf, env=cli_env(tmp_path / "home"), cwd=str(tmp_path))
    assert result.returncode != 0, result.stdout
    assert "boot success" not in result.stdout
    assert (f"rmqlab controller (controller-n0): cannot listen on 127.0.0.1:{port + RAFT_PORT_OFFSET}: "
            "address already in use") in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.real
def test_producer_exits_non_zero_with_the_cause_when_no_send_succeeded(tmp_path):
    port = dead_port()
    result = rmqlab("producer", "-n", f"127.0.0.1:{port}", "-q", "1", env=cli_env(tmp_path / "home"),
                    cwd=str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Send OK: 0 Send Failed: 1" in result.stdout
    assert "rmqlab producer: no send succeeded" in result.stderr
    assert f"cannot reach 127.0.0.1:{port}" in result.stderr, result.stderr  # why there is no route


@pytest.mark.real
def test_pull_consumer_exits_non_zero_with_the_cause_when_nothing_was_consumed_after_failures(tmp_path):
    port = dead_port()
    result = rmqlab("consumer", "-n", f"127.0.0.1:{port}", "--consumerType", "pull", "--duration", "1000",
                    env=cli_env(tmp_path / "home"), cwd=str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Consume Total: 0" in result.stdout
    assert "rmqlab consumer: nothing consumed; the first failure: fetchSubscribeMessageQueues" in result.stderr
    assert f"cannot reach 127.0.0.1:{port}" in result.stderr, result.stderr


@pytest.mark.real
def test_admin_reads_namesrv_addr_from_the_environment(namesrv, tmp_path):
    port, _home, _logs_dir = namesrv
    result = rmqlab("admin", "clusterList", env=cli_env(tmp_path / "home", NAMESRV_ADDR=f"127.0.0.1:{port}"),
                    cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("#Cluster Name")
    missing = rmqlab("admin", "clusterList", env=cli_env(tmp_path / "home"), cwd=str(tmp_path))
    assert missing.returncode == 2
    assert "-n/--namesrvAddr (or set $NAMESRV_ADDR)" in missing.stderr


@pytest.mark.real
def test_admin_against_a_dead_name_server_says_the_cause_once(tmp_path):
    port = dead_port()
    result = rmqlab("admin", "clusterList", env=cli_env(tmp_path / "home", NAMESRV_ADDR=f"127.0.0.1:{port}"),
                    cwd=str(tmp_path))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(f"rmqlab admin clusterList: cannot reach 127.0.0.1:{port}"), \
        result.stderr


def _subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, (*path, name))


def test_server_commands_say_they_start_the_process():
    helps = {a.dest: a.help for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)
             for a in action._choices_actions}
    for name in SERVER_COMMANDS:
        assert helps[name].startswith("start "), helps[name]


def test_no_help_text_points_outside_the_repository():
    outside = re.compile(r"issue \d|§|shared/|seeds?/|seed \d{3}")
    for path, parser in _subparsers(build_parser()):
        text = parser.format_help()
        assert not outside.search(text), f"rmqlab {' '.join(path)} --help: {outside.search(text).group()!r} in\n{text}"
