"""A student's function served from a sandboxed child process (the notebooks' public checks, and grading).

    with SandboxedFunction(truncation_point, "truncation_point") as fn:      # a callable (notebook)
        fn([[1, 0]], 1000, [[1, 0], [2, 900]], 1200)                      # -> 900
    with SandboxedFunction(source_text, "truncation_point", jail=True) as fn:   # grading
        fn(...)                                                            # StudentFunctionError on trouble

One long-lived child per SandboxedFunction serves every call. Two ways to start it:

* jail=True (grading; a source text only): a FRESH interpreter started by exec
  (`python -m rmqlab.lab.exercises.runner`) inside bubblewrap (rmqlab.lab.exercises.jail: new user, mount,
  pid, ipc and net namespaces, uid 65534, a read-only view of the Python installation and rmqlab, a
  size-capped private tmpfs as its only writable directory, rlimits set before exec). It never sees
  the memory of the process that started it: the grader's reference answers and hidden workloads
  are not in its world; it gets each call's arguments over the pipe and nothing else. This is the
  boundary. If bwrap cannot be used, start() raises rmqlab.lab.exercises.jail.JailUnavailable.
* jail=False (the default; the notebook's own public checks): a fork of the calling process (the
  student's own kernel, which holds nothing secret), with the audit-hook policy only. This is a
  courtesy against accidents, not a boundary.

The protocol on the pipes is length-prefixed JSON frames (4-byte big-endian length), both ways: the
parent never unpickles (or otherwise executes) anything the child sends, and a frame longer than
MAX_ANSWER_BYTES (plus the output cap) stops the child. In the child, before any student code runs
(a source text is exec'd only after): inherited file descriptors are closed, stdout/stderr go to a
capped buffer (the descriptors 1 and 2 to /dev/null), memory is capped (RLIMIT_AS), and
`install_sandbox_policy` (policy.py) installs the audit hook, which reports each refused action
through the pipe AT ONCE (a "violation" frame, before the PermissionError reaches the student's
code): clearing the policy's list afterwards cannot take a report back. Code that switches the
hook off is no longer reported, and in a jailed child it meets the kernel's refusals instead. The
parent caps what it keeps of the printed output (`output_limit`) and of each violation text
whatever the child claims.

Per call: a time limit (the child is killed when it passes; every later call then raises at once
with status "timeout"); NotImplementedError -> status "todo"; any other exception (SystemExit and
KeyboardInterrupt too) -> "error"; an answer that is not JSON data (sets become sorted lists,
tuples lists, numbers.Integral ints) -> "wrong-type"; a refused operation -> "sandbox-violation",
even when the code caught the PermissionError; the child dying -> "crashed" (later calls too).
Linux and macOS only (os.fork); jail=True needs Linux and bubblewrap.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.lab.exercises.policy import install_sandbox_policy

TIME_LIMIT_S = 1.0
START_TIME_LIMIT_S = 10.0        # exec'ing a submitted source (its imports) before the first call
MEMORY_LIMIT_MB = 512            # beyond what the child was forked with
OUTPUT_LIMIT = 2_000             # characters of printed output kept per call
MAX_ANSWER_BYTES = 1 << 20       # a child's answer frame; longer: the child is killed ("crashed")
MAX_REQUEST_BYTES = 16 << 20     # a frame the child accepts (the arguments of one call, the source)
MAX_VIOLATIONS = 50              # violation reports kept per SandboxedFunction (the rest are counted)
VIOLATION_TEXT = 300             # characters kept of one violation report
JAIL_CPU_S = 120                 # a jailed child's CPU seconds for its whole life (RLIMIT_CPU)
JAIL_BASE_MB = 384               # a jailed child's address space beyond memory_limit_mb: the interpreter
_HEADER = struct.Struct(">I")
_HERE = {os.path.abspath(__file__), os.path.abspath(os.path.join(os.path.dirname(__file__), "policy.py"))}

STATUSES = ("error", "todo", "timeout", "crashed", "wrong-type", "sandbox-violation")


class StudentFunctionError(Exception):
    """A student's function did not give an answer. status: error (it raised), todo
    (NotImplementedError), timeout, crashed (its process died), wrong-type (not the kind of answer
    expected), sandbox-violation (it tried something the sandbox refuses). `message` says what in
    words; `output` is what it printed; `details` the specifics (error, traceback, type, repr,
    violations)."""

    def __init__(self, status: str, message: str, output: str = "", **details: Any):
        super().__init__(message)
        if status not in STATUSES:
            raise ValueError(f"StudentFunctionError: unknown status {status!r}")
        self.status = status
        self.message = message
        self.output = output
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "output": self.output, **self.details}


class SandboxedFunction:
    """`fn_or_source`: a callable (inherited by the forked child: the notebook case) or Python
    source text defining `name` (exec'd in the child after the policy is installed: the grading
    case). `scratch_dir`: the child's working and only writable directory (default: a fresh temp
    dir, removed by close()). `deny_paths`: directories the child may not touch at all.
    `arg_adapter`: run in the child on the decoded JSON arguments before the call (e.g. lists to
    named tuples, as a lab's notebook shows them). `allow_read`: more readable directories.
    `isolation`: the policy layers that took effect in the child (after the first call or start()).
    `jail`: run the source in a fresh interpreter under bubblewrap (module docstring); then
    scratch_dir, deny_paths and allow_read are moot (the child's world has a private tmpfs only)."""

    def __init__(self, fn_or_source: Callable[..., Any] | str, name: str, *, time_limit_s: float = TIME_LIMIT_S,
                 memory_limit_mb: int = MEMORY_LIMIT_MB, scratch_dir: str | None = None,
                 deny_paths: Iterable[str] = (), output_limit: int = OUTPUT_LIMIT, allow_read: Iterable[str] = (),
                 arg_adapter: Callable[[list], list] | None = None,
                 start_time_limit_s: float = START_TIME_LIMIT_S, network: bool = False, jail: bool = False):
        if jail and not isinstance(fn_or_source, str):
            raise ValueError("SandboxedFunction: jail=True runs a source text in a fresh interpreter; "
                             "a callable cannot be sent there")
        if not hasattr(os, "fork"):
            raise RuntimeError("SandboxedFunction runs code in a forked child process: it needs Linux or macOS")
        if not (callable(fn_or_source) or isinstance(fn_or_source, str)):
            raise ValueError(f"SandboxedFunction: fn_or_source must be a callable or source text, "
                             f"not {type(fn_or_source).__name__}")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"SandboxedFunction: name must be a Python identifier, not {name!r}")
        if time_limit_s <= 0 or memory_limit_mb <= 0:
            raise ValueError("SandboxedFunction: time_limit_s and memory_limit_mb must be positive")
        self.name = self.__name__ = name
        self.time_limit_s = time_limit_s
        self.memory_limit_mb = memory_limit_mb
        self.output_limit = output_limit
        self.start_time_limit_s = start_time_limit_s
        # A jailed child writes only to the jail's own tmpfs: no directory of the grader's is made for it.
        self._own_scratch = scratch_dir is None and not jail
        self.scratch_dir = tempfile.mkdtemp(prefix="rmqlab-sandbox-") if self._own_scratch else scratch_dir
        self.deny_paths = tuple(deny_paths)
        self.allow_read = tuple(allow_read)
        self.network = network
        self._target = fn_or_source
        self._adapter = arg_adapter
        self.violations: list[str] = []
        self.output = ""
        self.last_type: str | None = None  # the Python type name of the last answer (before JSON)
        self.isolation: tuple[str, ...] = ()
        self.calls = 0
        self._pid: int | None = None
        self._to_child = self._from_child = -1
        self._dead: StudentFunctionError | None = None
        self._started = False
        self.jail = jail
        self._proc: subprocess.Popen | None = None
        self.load_violations: list[str] = []   # refused while the source was loaded (start())

    # -- life cycle ------------------------------------------------------------------------------
    def __enter__(self) -> SandboxedFunction:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "dead" if self._dead else ("running" if self._pid else "not started")
        return f"SandboxedFunction({self.name!r}, {state}, {self.calls} calls)"

    def start(self) -> None:
        """Fork the child and wait for it to be ready (done by the first call otherwise). Raises
        StudentFunctionError when a source cannot be exec'd or does not define the function."""
        if self._started:
            if self._dead is not None:
                raise self._dead
            return
        self._started = True
        for stream in (sys.stdout, sys.stderr):  # what the parent printed must not be written twice
            try:
                stream.flush()
            except Exception:
                pass
        if self.jail:
            self._start_jailed()
            return
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                os.close(req_w)
                os.close(resp_r)
                _child_main(self, req_r, resp_w)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(resp_w)
        self._pid, self._to_child, self._from_child = pid, req_w, resp_r
        self._await_ready(())

    def _start_jailed(self) -> None:
        """exec a fresh runner under bwrap, send it the source, wait until it is ready."""
        from rmqlab.lab.exercises import jail
        bwrap = jail.require()
        limits = jail.Limits(cpu_s=JAIL_CPU_S, address_space_mb=self.memory_limit_mb + JAIL_BASE_MB)
        fd = jail.seccomp_fd()
        try:
            argv = jail.command([sys.executable, "-s", "-B", "-m", "rmqlab.lab.exercises.runner"], bwrap=bwrap,
                                seccomp=fd)
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, close_fds=True, preexec_fn=limits.apply,
                                          pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        self._pid = self._proc.pid
        self._to_child = os.dup(self._proc.stdin.fileno())
        self._from_child = os.dup(self._proc.stdout.fileno())
        self._proc.stdin.close()
        self._proc.stdout.close()
        adapter = None
        if self._adapter is not None:
            adapter = f"{self._adapter.__module__}:{self._adapter.__qualname__}"
        config = {"source": self._target, "name": self.name, "output_limit": self.output_limit,
                  "adapter": adapter, "scratch": jail.SCRATCH, "network": self.network}
        if not self._send(_frame(config), time.monotonic() + self.start_time_limit_s):
            raise self._died_or_timed_out(time.monotonic() + self.start_time_limit_s, starting=True)
        self._await_ready(("bwrap",))

    def _await_ready(self, layers: tuple[str, ...]) -> None:
        ready, new = self._receive(self.start_time_limit_s, starting=True)
        self.isolation = layers + tuple(ready.get("isolation", ()))
        if new:
            # refused while loading: the load fails ("error", the PermissionError named), caught or not;
            # `violations` keeps the calls' refusals, `load_violations` these
            self.load_violations = new
            if ready["status"] == "ready":
                ready = {**ready, "status": "error", "error": "PermissionError: " + "; ".join(new)}
        if ready["status"] != "ready":
            self._dead = self._error(ready, "while its code was loaded")
            self._kill()
            raise self._dead

    def close(self) -> None:
        """Stop the child (if running) and remove the scratch dir this object created."""
        self._kill()
        if self._dead is None and self._started:
            self._dead = StudentFunctionError("crashed", f"{self.name}: the sandbox was closed")
        if self._own_scratch and self.scratch_dir:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
            self._own_scratch = False

    def _kill(self) -> None:
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                status = os.waitpid(self._pid, 0)[1]
                if self._proc is not None:
                    self._proc.returncode = status   # reaped here: Popen must not wait for it again
            except ChildProcessError:
                pass
            self._pid = None
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = -1

    # -- calls -----------------------------------------------------------------------------------
    def __call__(self, *json_args: Any) -> Any:
        """The function's answer on these JSON arguments (a JSON value), or StudentFunctionError."""
        try:
            line = _frame({"args": list(json_args)})
        except (TypeError, ValueError) as e:
            raise ValueError(f"SandboxedFunction({self.name}): the arguments must be JSON data: {e}") from None
        if self._dead is not None:
            raise self._dead
        self.start()
        self.calls += 1
        deadline = time.monotonic() + self.time_limit_s
        if not self._send(line, deadline):
            raise self._died_or_timed_out(deadline)
        answer, new = self._receive(max(0.0, deadline - time.monotonic()))
        self.output = _cap(answer.get("output", ""), self.output_limit)
        self.violations.extend(new[:max(0, MAX_VIOLATIONS - len(self.violations))])
        if new:
            raise StudentFunctionError(
                "sandbox-violation", f"{self.name} tried {'; '.join(new)}: not allowed during grading "
                "(no files outside its scratch dir, no network, no processes)", self.output, violations=new)
        if answer["status"] == "ok":
            self.last_type = answer.get("type")
            return answer["value"]
        raise self._error(answer, "")

    def _send(self, line: bytes, deadline: float) -> bool:
        while line:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _, ready, _ = select.select([], [self._to_child], [], left)
            if ready:
                try:
                    line = line[os.write(self._to_child, line):]
                except (BrokenPipeError, OSError):
                    return False
        return True

    def _receive(self, limit_s: float, starting: bool = False) -> tuple[dict[str, Any], list[str]]:
        """The child's next answer frame, and the "violation" frames that came before it (sent by the
        audit hook at the moment of each refusal; at most MAX_VIOLATIONS kept, each capped)."""
        deadline = time.monotonic() + limit_s
        new: list[str] = []
        while True:
            answer = self._receive_frame(deadline, starting)
            if answer.get("status") != "violation":
                return answer, new
            what = answer.get("what")
            if len(new) < MAX_VIOLATIONS:
                new.append(_cap(what if isinstance(what, str) else repr(what), VIOLATION_TEXT))

    def _read_exactly(self, n: int, deadline: float, starting: bool) -> bytes:
        data = b""
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._died_or_timed_out(deadline, starting)
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, min(n - len(data), 1 << 20))
            if not chunk:
                raise self._died_or_timed_out(deadline, starting)
            data += chunk
        return data

    def _receive_frame(self, deadline: float, starting: bool) -> dict[str, Any]:
        (size,) = _HEADER.unpack(self._read_exactly(_HEADER.size, deadline, starting))
        if size > MAX_ANSWER_BYTES + 8 * self.output_limit:
            self._dead = StudentFunctionError("crashed", f"{self.name}: its answer exceeded "
                                              f"{MAX_ANSWER_BYTES} bytes; the process was stopped")
            self._kill()
            raise self._dead
        data = self._read_exactly(size, deadline, starting)
        try:
            answer = json.loads(data)
            if not isinstance(answer, dict) or not isinstance(answer.get("status"), str):
                raise ValueError("not an answer")
            return answer
        except ValueError:
            self._dead = StudentFunctionError("crashed", f"{self.name}: its process sent an unreadable answer")
            self._kill()
            raise self._dead from None

    def _died_or_timed_out(self, deadline: float, starting: bool = False) -> StudentFunctionError:
        """The child did not answer in time, or its pipe closed: stop it for good, remember why."""
        pid, self._pid = self._pid, None
        status = None
        timed_out = time.monotonic() >= deadline
        if pid is not None:
            if timed_out:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            status = _reap(pid, 0.0 if timed_out else 0.5)
            if self._proc is not None and status is not None:
                self._proc.returncode = status
        if timed_out:
            limit = self.start_time_limit_s if starting else self.time_limit_s
            what = "its code did not load" if starting else "no answer"
            self._dead = StudentFunctionError("timeout", f"{self.name}: {what} within {limit:g} s "
                                              f"(an endless loop?)", self.output)
        else:
            if status is None:
                why = "it died"
            elif os.WIFSIGNALED(status):
                why = f"killed by signal {os.WTERMSIG(status)}"
            else:
                why = f"exit status {os.WEXITSTATUS(status)}"
            self._dead = StudentFunctionError("crashed", f"{self.name}: the process running it died without "
                                              f"answering ({why})", self.output, why=why)
        self._kill()
        return self._dead

    def _error(self, answer: dict[str, Any], when: str) -> StudentFunctionError:
        status, output = answer.get("status"), _cap(answer.get("output", ""), self.output_limit)
        when = f" {when}" if when else ""
        answer = {k: (_cap(v, 2000) if isinstance(v, str) else v) for k, v in answer.items()}
        if status == "todo":
            return StudentFunctionError("todo", f"{self.name} raised NotImplementedError{when} (still the TODO stub)",
                                        output)
        if status == "wrong-type":
            return StudentFunctionError("wrong-type", f"{self.name} returned {answer.get('repr')} (a "
                                        f"{answer.get('type')}){when}, which is not JSON data", output,
                                        type=answer.get("type"), repr=answer.get("repr"))
        if status == "error" and self.load_violations:
            error = _cap(answer.get("error", "?"), 2000)
            return StudentFunctionError("error", f"{self.name} raised {error}{when}", output, error=error,
                                        traceback=answer.get("traceback", ""), violations=list(self.load_violations))
        if status == "missing-function":
            return StudentFunctionError("error", f"the code does not define a function {self.name}", output,
                                        error=answer.get("error", ""))
        error, tb = answer.get("error", "?"), answer.get("traceback", "")
        return StudentFunctionError("error", f"{self.name} raised {error}{when}", output, error=error, traceback=tb)


def _reap(pid: int, grace_s: float) -> int | None:
    """The child's wait status: it closed its pipe, so it is exiting; if it has not within
    `grace_s` (it closed the pipe itself and carries on), it is killed."""
    end = time.monotonic() + grace_s
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            if time.monotonic() >= end:
                break
            time.sleep(0.002)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


# -- the child ------------------------------------------------------------------------------------
class _CappedWriter(io.TextIOBase):
    """stdout/stderr in the child: keeps the first `limit` characters, counts the rest."""

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        if not isinstance(s, str):
            s = str(s)
        room = self.limit - self.size
        if room > 0:
            self.parts.append(s[:room])
            self.size += min(len(s), room)
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def take(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n... ({self.dropped} more characters not kept)"
        self.parts, self.size, self.dropped = [], 0, 0
        return text


def _child_main(sf: Any, req_fd: int, resp_fd: int) -> None:
    """The child's life: set up, load the function, answer frames until the pipe closes. `sf` holds
    the settings (a SandboxedFunction in a fork, a namespace built from the config frame in the
    jailed runner: then memory_limit_mb is None, RLIMIT_AS having been set before exec)."""
    capture = _CappedWriter(sf.output_limit)

    def report(what: str) -> None:   # the audit hook's refusals go out at once (module docstring)
        _write(resp_fd, {"status": "violation", "what": str(what)[:VIOLATION_TEXT]})

    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _close_inherited_fds(keep={0, 1, 2, req_fd, resp_fd})
        sys.stdout = sys.stderr = capture
        sys.stdin = io.StringIO("")
        if sf.memory_limit_mb is not None:
            _limit_memory(sf.memory_limit_mb)
        if not isinstance(sf._target, str):
            _preload_source(sf._target)
        os.environ["TMPDIR"] = sf.scratch_dir  # tempfile's default dir: the scratch dir, not /tmp
        tempfile.tempdir = sf.scratch_dir
        policy = install_sandbox_policy(allow_read=sf.allow_read, allow_write=(sf.scratch_dir,),
                                        deny=sf.deny_paths, network=sf.network, scratch_dir=sf.scratch_dir,
                                        rlimit_nproc=0, on_violation=report)
    except BaseException as e:  # the sandbox could not be set up: say so, run nothing
        _write(resp_fd, {"status": "error", "error": f"the sandbox could not start: {_describe(e)}"})
        return
    fn = sf._target
    ready: dict[str, Any] = {"status": "ready", "isolation": list(policy.isolation)}
    if isinstance(fn, str):
        namespace: dict[str, Any] = {"__name__": "__student__", "__builtins__": __builtins__}
        try:
            import linecache

            linecache.cache["<submission>"] = (len(fn), None, fn.splitlines(True), "<submission>")
            exec(compile(fn, "<submission>", "exec"), namespace)
            fn = namespace.get(sf.name)
            if not callable(fn):
                ready = {"status": "missing-function", "error": f"no function named {sf.name}"}
        except NotImplementedError:
            ready = {"status": "todo"}
        except BaseException as e:
            ready = {"status": "error", "error": _describe(e), "traceback": _student_traceback(e)}
    ready["output"] = capture.take()
    _write(resp_fd, ready)
    if ready["status"] != "ready":
        return
    while True:
        request = _read_frame(req_fd, MAX_REQUEST_BYTES)
        if request is None:
            return
        try:
            args = request["args"]
            if sf._adapter is not None:
                args = sf._adapter(args)
            value = fn(*args)
            try:
                answer = {"status": "ok", "value": _to_json(value), "type": type(value).__name__}
                json.dumps(answer["value"], allow_nan=False)
            except (TypeError, ValueError, RecursionError):
                answer = {"status": "wrong-type", "type": type(value).__name__, "repr": safe_repr(value)}
        except NotImplementedError:
            answer = {"status": "todo"}
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: they are the student's
            answer = {"status": "error", "error": _describe(e), "traceback": _student_traceback(e)}
        answer["output"] = capture.take()
        _write(resp_fd, answer)


def runner_main() -> None:
    """The jailed child (`python -m rmqlab.lab.exercises.runner` under bwrap): the first frame on
    stdin is the configuration (source, function name, output cap, the arguments adapter by
    module:qualname), then one frame per call; answers go out as frames on stdout."""
    import importlib
    import types

    req_fd, resp_fd = os.dup(0), os.dup(1)
    config = _read_frame(req_fd, MAX_REQUEST_BYTES)
    if config is None:
        return
    adapter = None
    if config.get("adapter"):
        module, _, qual = config["adapter"].partition(":")
        adapter = importlib.import_module(module)
        for part in qual.split("."):
            adapter = getattr(adapter, part)
    scratch = config.get("scratch") or os.getcwd()
    settings = types.SimpleNamespace(output_limit=int(config.get("output_limit") or OUTPUT_LIMIT),
                                     memory_limit_mb=None, _target=str(config["source"]), name=str(config["name"]),
                                     scratch_dir=scratch, allow_read=(), deny_paths=(),
                                     network=bool(config.get("network")), _adapter=adapter)
    _child_main(settings, req_fd, resp_fd)


def _frame(obj: Any) -> bytes:
    data = json.dumps(obj, allow_nan=False).encode()
    return _HEADER.pack(len(data)) + data


def _read_frame(fd: int, limit: int) -> Any:
    """The next frame on a blocking fd (None at its end, or for a frame longer than `limit`)."""
    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = os.read(fd, min(n - len(data), 1 << 20))
            if not chunk:
                return None
            data += chunk
        return data

    header = exactly(_HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > limit:
        return None
    data = exactly(size)
    return None if data is None else json.loads(data)


def _write(fd: int, answer: dict[str, Any]) -> None:
    try:
        frame = _frame(answer)
    except BaseException:
        frame = _frame({"status": "error", "error": "its answer could not be encoded"})
    while frame:
        frame = frame[os.write(fd, frame):]


def _cap(text: Any, limit: int) -> str:
    """At most `limit` characters of what a child sent (the parent's own cap: the child is not trusted)."""
    if not isinstance(text, str):
        text = ""
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters not kept)"


def _close_inherited_fds(keep: set[int]) -> None:
    """A Jupyter kernel's or a grader's open files and sockets are not the student's business."""
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        try:
            import resource

            top = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 4096)
        except (ImportError, OSError, ValueError):
            top = 1024
        fds = list(range(top))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _limit_memory(limit_mb: int) -> None:
    """RLIMIT_AS = the address space the child was forked with + limit_mb (an absolute cap would
    fail at once in a kernel that has mapped gigabytes of libraries and arenas)."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = size + limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, OSError, ValueError):
        pass  # no /proc (macOS): no memory limit, the time limit still holds


def _to_json(value: Any, depth: int = 0) -> Any:
    """A student's answer as JSON data; TypeError for anything else."""
    if depth > 50:
        raise TypeError("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        if math.isnan(f) or math.isinf(f):
            raise TypeError("not a finite number")
        return f
    if isinstance(value, (list, tuple)):
        return [_to_json(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_to_json(v, depth + 1) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _to_json(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"a {type(value).__name__} is not JSON data")


def safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except BaseException:
        text = f"<a {type(value).__name__} that cannot be shown>"
    return text if len(text) <= 200 else text[:197] + "..."


def _describe(e: BaseException) -> str:
    try:
        text = f"{type(e).__name__}: {e}"
    except BaseException:
        text = f"<a {type(e).__name__} that cannot be shown>"
    return text if len(text) <= 300 else text[:297] + "..."


def _student_traceback(e: BaseException) -> str:
    """The last frames of the traceback (the student's code), without the sandbox's. Source lines
    come from linecache's memory only: reading a file now would be a sandbox violation (the
    function's own file is cached before the policy is installed, see _preload_source)."""
    try:
        import linecache

        frames = [f for f in traceback.StackSummary.extract(traceback.walk_tb(e.__traceback__), lookup_lines=False)
                  if os.path.abspath(f.filename) not in _HERE]
        out = []
        for f in frames[-3:]:
            out.append(f'  File "{f.filename}", line {f.lineno}, in {f.name}\n')
            entry = linecache.cache.get(f.filename)
            if entry is not None and len(entry) >= 3 and f.lineno and 0 < f.lineno <= len(entry[2]):
                out.append(f"    {entry[2][f.lineno - 1].strip()}\n")
        return "".join(out)
    except BaseException:
        return ""


def _preload_source(fn: Any) -> None:
    """Put the files of the function (and what it wraps) into linecache while files may still be read."""
    try:
        import linecache

        seen = 0
        while fn is not None and seen < 5:
            code = getattr(fn, "__code__", None)
            if code is not None:
                linecache.getlines(code.co_filename)
            fn = getattr(fn, "__wrapped__", None) or getattr(fn, "__func__", None)
            seen += 1
    except BaseException:
        pass


__all__ = ["SandboxedFunction", "StudentFunctionError", "TIME_LIMIT_S", "MEMORY_LIMIT_MB", "OUTPUT_LIMIT"]
