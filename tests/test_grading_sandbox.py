"""Hostile submissions, graded end to end through `rmqlab grade`'s entry point (rmqlab.grading.cli.run):
each one tries an escape from the grading sandbox (rmqlab.lab.exercises.jail) and, where the escape would
pay, answers with what it stole, else like a constant stub. Asserted: none scores more than the stub;
no file outside the sandbox's scratch changes (a canary tree is hashed); no process survives (an
unrelated process stays alive, no grandchild, no bwrap left); neither the hidden directory's names
nor a secret of the grader's environment appear in any output file; refusals the code caught are
still `sandbox-violation` findings; and without bwrap, grading refuses with the install hint.
One graded class is shared by the assertions.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import secrets
import signal
import subprocess
import sys
import time

import nbformat
import pytest

pytest.importorskip("pyspark")

from rmqlab.lab.exercises import jail  # noqa: E402
from rmqlab.grading.samples import VARIANTS, make_submission  # noqa: E402

pytestmark = pytest.mark.skipif(not jail.available(), reason="bubblewrap cannot start a sandbox here")

WORKLOAD = "ctrl-standalone-crash-master"
EX = "truncation_point"
TOKEN = secrets.token_hex(4)
SECRET = f"grader-secret-{TOKEN}"
MARK = f"4242.{int(TOKEN, 16) % 1000000}"   # a grandchild runs `sleep MARK`: findable in ps
# A secret in the grader's environment (Spark workers and notebook children inherit it): no
# student's code may read it through /proc/<ppid>/environ or otherwise.
os.environ["RMQLAB_TEST_SECRET"] = SECRET

STUB = "def truncation_point(local, local_max, master, master_max):\n    return -7\n"

# What the attacks share: switching the audit hook off by rewriting its closure cells (found with
# gc), and starting a process with _posixsubprocess.fork_exec (no audit event).
PRELUDE = '''
import gc, json, os, types


def _hook_off():
    for o in gc.get_objects():
        if isinstance(o, types.FunctionType) and o.__closure__ and "policy" in (o.__module__ or ""):
            for name, cell in zip(o.__code__.co_freevars, o.__closure__):
                try:
                    if name in ("allow_read", "allow_write"):
                        cell.cell_contents = ("/",)
                    elif name == "deny":
                        cell.cell_contents = ()
                    elif name in ("network", "processes"):
                        cell.cell_contents = True
                except Exception:
                    pass


def _spawn(argv):
    import _posixsubprocess
    errr, errw = os.pipe()
    pid = _posixsubprocess.fork_exec([a.encode() for a in argv], [argv[0].encode()], True, (errw,), None, None,
                                     -1, -1, -1, -1, -1, -1, errr, errw, True, False, -1, None, None, None, -1,
                                     None, False)
    os.close(errw)
    os.close(errr)
    os.waitpid(pid, 0)
'''


def _attacks(hidden: str, canary: str, victim: int) -> dict[str, str]:
    wl_file = os.path.join(hidden, f"{WORKLOAD}.parquet")
    up = "../" * 12
    return {
        # the reference answers of the grader's call logs, looked up in inherited memory
        "gcref": PRELUDE + '''
def truncation_point(local, local_max, master, master_max):
    key = json.dumps([local, local_max, master, master_max])
    for o in gc.get_objects():
        if isinstance(o, dict) and "answer" in o and "args" in o:
            try:
                if json.dumps(o["args"]) == key:
                    return o["answer"]
            except Exception:
                pass
    return -7
''',
        # os.open with dir_fd after a chdir deep into scratch: the hook resolves the path against
        # the cwd (inside scratch), the kernel against dir_fd (outside)
        "dirfd": PRELUDE + f'''
def truncation_point(local, local_max, master, master_max):
    base = os.getcwd()
    got = []
    try:
        os.makedirs("a/b/c/d/e/f/g/h/i/j/k/l", exist_ok=True)
        fd = os.open(base, os.O_RDONLY)
        os.chdir("a/b/c/d/e/f/g/h/i/j/k/l")
        got.append(os.listdir(os.open({up!r} + {hidden.lstrip("/")!r}, os.O_RDONLY, dir_fd=fd)))
        for target in ("etc/passwd", {wl_file.lstrip("/")!r}):
            f = os.open({up!r} + target, os.O_RDONLY, dir_fd=fd)
            got.append(os.read(f, 200))
    except Exception as e:
        got.append(repr(e))
    finally:
        os.chdir(base)
    if len(got) > 1:   # what it read goes out in the error message (to the feedback page)
        raise RuntimeError(str(got))
    return -7
''',
        # the hook switched off, then the hidden workloads read and listed by path, and the
        # grader's environment read through /proc
        "hookoff": PRELUDE + f'''
def truncation_point(local, local_max, master, master_max):
    _hook_off()
    out = []
    for path in ({hidden!r}, {wl_file!r}, "/etc/passwd", f"/proc/{{os.getppid()}}/environ", "/proc/1/environ"):
        try:
            out.append(os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(4096))
        except Exception as e:
            out.append(repr(e))
    print(out)
    return -7
''',
        # a refusal caught, then the policy's list of violations cleared
        "clearlist": '''
def truncation_point(local, local_max, master, master_max):
    try:
        open("/etc/passwd").read()
    except OSError:
        pass
    from rmqlab.lab.exercises.policy import installed_policy
    installed_policy().violations.clear()
    return -7
''',
        # ctypes after the hook is off: libc's open/write on the canary
        "ctypes": PRELUDE + f'''
def truncation_point(local, local_max, master, master_max):
    _hook_off()
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.open({os.path.join(canary, "file0").encode()!r}, os.O_WRONLY | os.O_TRUNC)
        libc.write(fd, b"owned by ctypes", 15)
        fd = libc.open({os.path.join(canary, "ctypes-owned").encode()!r}, os.O_WRONLY | os.O_CREAT, 0o644)
        libc.write(fd, b"owned", 5)
    except Exception as e:
        print(e)
    return -7
''',
        # a process started with _posixsubprocess.fork_exec (no audit event): id, and a write outside
        "forkexec": PRELUDE + f'''
def truncation_point(local, local_max, master, master_max):
    try:
        _spawn(["/bin/sh", "-c", "id > {canary}/forkexec-owned; id; echo owned >> {canary}/file1"])
    except Exception as e:
        print(e)
    return -7
''',
        # an unrelated process of the grader's machine signalled through a pidfd, and a
        # double-forked grandchild meant to outlive the call
        "processes": PRELUDE + f'''
import signal


def truncation_point(local, local_max, master, master_max):
    try:
        signal.pidfd_send_signal(os.pidfd_open({victim}), signal.SIGKILL)
    except Exception as e:
        print(e)
    try:
        _spawn(["/bin/sh", "-c", "(sleep {MARK} > /dev/null 2>&1 &) ; exit 0"])
    except Exception as e:
        print(e)
    return -7
''',
        # the disk: many files, big and empty, until something stops it
        "diskfill": '''
import os


def truncation_point(local, local_max, master, master_max):
    os.makedirs("fill", exist_ok=True)
    written = 0
    try:
        for i in range(100000):
            with open(f"fill/{i}", "wb") as f:
                if i < 200:
                    f.write(b"x" * (1 << 20))
                    written += 1 << 20
    except OSError as e:
        print(e)
    print(written)
    return -7
''',
    }


def _tree_hash(root: str) -> str:
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        h.update(d.encode())
        for f in sorted(files):
            h.update(f.encode())
            with open(os.path.join(d, f), "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, command line) of every process visible here."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry)] = (ppid, cmd)
    return out


def _descendants(root: int, procs: dict[int, tuple[int, str]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _grade(subs, hidden, out) -> int:
    from rmqlab.grading import cli
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    args = p.parse_args(["--submissions", str(subs), "--workloads", str(hidden), "--out", str(out),
                         "--notebook-time-limit", "20", "--no-progress"])
    return cli.run(args)


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    from rmqlab.workload import RecordedWorkload, save_workload
    from rmqlab.workload.catalog import CATALOG
    hidden = tmp_path_factory.mktemp(f"hidden-{TOKEN}")
    save_workload(str(hidden / f"{WORKLOAD}.parquet"), RecordedWorkload(CATALOG[WORKLOAD], [], None, {"test": True}))
    canary = tmp_path_factory.mktemp(f"canary-{TOKEN}")
    for i in range(3):
        (canary / f"file{i}").write_text(f"canary {i}\n")
    victim = subprocess.Popen(["sleep", "300"])
    subs = tmp_path_factory.mktemp("submissions")
    sources = {"honest": VARIANTS[EX]["correct"].source, "stub": STUB,
               **_attacks(str(hidden), str(canary), victim.pid)}
    for student, source in sources.items():
        nbformat.write(make_submission(None, {EX: source}), str(subs / f"{student}.ipynb"))
    # the notebook's own cells, in the kernel: the same escapes before the function is defined
    nb = make_submission(None, {EX: STUB})
    nb.cells.insert(1, nbformat.v4.new_code_cell(PRELUDE + f'''
try:
    open("/etc/passwd")
except OSError:
    pass
from rmqlab.lab.exercises.policy import installed_policy
installed_policy().violations.clear()
_hook_off()
for path in ({str(hidden)!r}, "/etc/passwd", f"/proc/{{os.getppid()}}/environ"):
    try:
        print(os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(2000))
    except Exception as e:
        print(e)
try:
    _spawn(["/bin/sh", "-c", "id > {canary}/kernel-owned; (sleep {MARK} > /dev/null 2>&1 &)"])
except Exception as e:
    print(e)
'''))
    nbformat.write(nb, str(subs / "nbescape.ipynb"))
    before = _tree_hash(str(canary))
    out = tmp_path_factory.mktemp("out")
    status = _grade(subs, hidden, out)
    procs = _processes()
    alive = victim.poll() is None
    victim.kill()
    victim.wait()
    with open(out / "totals.csv") as f:
        totals = {r["student"]: float(r["points"]) for r in csv.DictReader(f)}
    with open(out / "findings.csv") as f:
        findings = list(csv.DictReader(f))
    return {"status": status, "hidden": hidden, "canary": canary, "before": before, "out": out,
            "totals": totals, "findings": findings, "victim_alive": alive, "procs": procs,
            "students": sorted(sources) + ["nbescape"]}


@pytest.mark.real
def test_no_cheat_scores_more_than_a_stub(attack):
    assert attack["status"] == 0
    t = attack["totals"]
    assert set(attack["students"]) <= set(t), t
    assert t["honest"] > t["stub"], t        # the comparison means something
    for student in attack["students"]:
        if student not in ("honest", "stub"):
            assert t[student] <= t["stub"], (student, t)


@pytest.mark.real
def test_no_file_outside_scratch_changes(attack):
    assert _tree_hash(str(attack["canary"])) == attack["before"]
    assert sorted(os.listdir(attack["canary"])) == ["file0", "file1", "file2"]


@pytest.mark.real
def test_no_process_survives(attack):
    assert attack["victim_alive"], "the pidfd attack killed an unrelated process"
    procs = attack["procs"]
    assert not [p for p, (_, cmd) in procs.items() if MARK in cmd], "a grandchild outlived its sandbox"
    left = [procs[p][1] for p in _descendants(os.getpid(), procs) if "bwrap" in procs[p][1]
            or "rmqlab.lab.exercises.runner" in procs[p][1] or "rmqlab.grading.kernel" in procs[p][1]]
    assert not left, left


# The instructor's own files name the workloads by design (results.parquet's workload column, the
# config in run.json); everything else may reach students.
INSTRUCTOR_ONLY = ("run.json", "results.parquet")


@pytest.mark.real
def test_nothing_hidden_or_secret_in_any_output(attack):
    hidden = attack["hidden"]
    names = [os.path.basename(str(hidden)), str(hidden), os.path.realpath(str(hidden)), f"{WORKLOAD}.parquet",
             WORKLOAD]
    stolen = [SECRET, "root:x:0:0", "PAR1"]   # the grader's environment, /etc/passwd, a workload file's bytes
    seen = 0
    for d, _, files in os.walk(attack["out"]):
        for f in files:
            if f.endswith(".js"):
                continue
            with open(os.path.join(d, f), "rb") as fh:
                data = fh.read()
            seen += 1
            for n in stolen + ([] if f in INSTRUCTOR_ONLY else names):
                if n == "PAR1" and f.endswith(".parquet"):
                    continue
                assert n.encode() not in data, (f, n)
    assert seen >= len(attack["students"]) + 4


@pytest.mark.real
def test_caught_refusals_are_still_violations(attack):
    kinds = {}
    for f in attack["findings"]:
        kinds.setdefault(f["student"], set()).add(f["kind"])
    # the refusal was caught and the policy's list cleared afterwards: reported anyway
    assert "sandbox-violation" in kinds.get("clearlist", set()), attack["findings"]
    assert "sandbox-violation" in kinds.get("nbescape", set()), attack["findings"]
    assert not kinds.get("honest") and not kinds.get("stub")


# --- the sandbox itself, without Spark (what the attacks above meet) ----------------------------------

def _jailed(source: str):
    from rmqlab.lab.exercises import SandboxedFunction
    return SandboxedFunction(source, "f", jail=True, time_limit_s=20)


@pytest.mark.real
def test_scratch_is_capped_and_private():
    src = PRELUDE + '''
def f():
    _hook_off()
    written = 0
    try:
        for i in range(10000):
            with open(f"big{i}", "wb") as fh:
                fh.write(b"x" * (1 << 20))
            written += 1 << 20
    except OSError:
        pass
    n = 0
    try:
        for i in range(20000):
            open(f"empty{i}", "w").close()
            n += 1
    except OSError:
        pass
    return [written, n, os.getuid(), sorted(os.listdir("/")), os.path.exists("/etc/passwd")]
'''
    with _jailed(src) as fn:
        written, n, uid, root, passwd = fn()
    assert written <= jail.SCRATCH_MB * 1024 * 1024
    assert n > 0 and uid == jail.NOBODY and not passwd
    assert "home" not in root and "var" not in root and "scratch" in root   # only the binds, /proc, /dev


@pytest.mark.real
def test_closing_kills_every_process_of_the_sandbox():
    """No process can be started (the seccomp layer, on x86_64); where one could, it dies with the
    sandbox (pid namespace, --die-with-parent, the kill in close())."""
    mark = f"{MARK}1"
    src = PRELUDE + f'''
def f():
    _hook_off()
    try:
        _spawn(["/bin/sh", "-c", "(sleep {mark} > /dev/null 2>&1 &) ; exit 0"])
        return "started"
    except OSError as e:
        return e.errno
'''
    fn = _jailed(src)
    started = fn()
    pid = fn._pid
    if jail.no_processes_filter() is not None:
        assert started == 1   # EPERM from the seccomp filter
    else:
        assert started == "started" and any(mark in cmd for _, cmd in _processes().values())
    fn.close()
    deadline = time.monotonic() + 10
    while any(mark in cmd for _, cmd in _processes().values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(mark in cmd for _, cmd in _processes().values())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.real
def test_a_huge_answer_or_output_is_capped():
    from rmqlab.lab.exercises import StudentFunctionError
    with _jailed("def f():\n    print('y' * 10_000_000)\n    return 1\n") as fn:
        assert fn() == 1
        assert len(fn.output) < 3000
    with _jailed("import os\ndef f():\n    os.write(1, b'\\xff' * 100)\n    return 'x' * 50_000_000\n") as fn:
        with pytest.raises(StudentFunctionError) as e:
            fn()
        assert e.value.status == "crashed"


@pytest.mark.real
def test_without_bwrap_grading_refuses_with_the_install_hint(tmp_path):
    (tmp_path / "subs").mkdir()
    (tmp_path / "hidden").mkdir()
    env = {**os.environ, "RMQLAB_BWRAP": ""}
    r = subprocess.run([sys.executable, "-m", "rmqlab.cli", "grade", "--submissions", str(tmp_path / "subs"),
                        "--workloads", str(tmp_path / "hidden"), "--out", str(tmp_path / "out"), "--no-progress"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "apt-get install bubblewrap" in r.stderr and "refusing" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.real
def test_victim_helper_is_signalable():
    # guards test_no_process_survives: a pidfd kill of a process we own does work outside the sandbox
    p = subprocess.Popen(["sleep", "30"])
    fd = os.pidfd_open(p.pid)
    signal.pidfd_send_signal(fd, signal.SIGKILL)
    os.close(fd)
    assert p.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.real
@pytest.mark.spark
def test_secrets_inside_what_the_sandbox_shows_are_refused(tmp_path):
    """The sandbox binds the Python installation and rmqlab read-only: a directory to keep from
    students' code must not be inside one of them."""
    from rmqlab.grading.pipeline import GradeConfig, grade
    from rmqlab.workload import RecordedWorkload, save_workload
    from rmqlab.workload.catalog import CATALOG
    (tmp_path / "subs").mkdir()
    (tmp_path / "hidden").mkdir()
    save_workload(str(tmp_path / "hidden" / f"{WORKLOAD}.parquet"), RecordedWorkload(CATALOG[WORKLOAD], [], None, {}))
    package = os.path.dirname(os.path.abspath(jail.__file__))
    with pytest.raises(ValueError, match="lets students' code read"):
        grade(GradeConfig(submissions=str(tmp_path / "subs"), workloads=str(tmp_path / "hidden"),
                          out=str(tmp_path / "out"), extra_deny=(package,), progress=False))
