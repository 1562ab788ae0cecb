"""A student's function served from a sandboxed child process (the notebooks' public checks, and grading).

    with SandboxedFunction(truncation_point, "truncation_point") as fn:      # a callable (notebook)
        fn([[1, 0]], 1000, [[1, 0], [2, 900]], 1200)                      # -> 900
    with SandboxedFunction(source_text, "truncation_point", deny_paths=[hidden]) as fn:   # grading
        fn(...)                                                            # StudentFunctionError on trouble

One long-lived forked child per SandboxedFunction serves every call: the parent writes the
arguments as one JSON line on a pipe, the child answers with one JSON line — the parent never
unpickles (or otherwise executes) anything the child sends. In the child, before any student code
runs (a source text is exec'd only after): inherited file descriptors are closed, stdout/stderr
go to a capped buffer (the descriptors 1 and 2 to /dev/null), RLIMIT_AS caps memory at what the
child was forked with plus `memory_limit_mb`, and `install_sandbox_policy` (policy.py) installs
the audit-hook policy and the OS isolation available.

Per call: a time limit (the child is killed when it passes; every later call then raises at once
with status "timeout"); NotImplementedError -> status "todo"; any other exception (SystemExit and
KeyboardInterrupt too) -> "error"; an answer that is not JSON data (sets become sorted lists,
tuples lists, numbers.Integral ints) -> "wrong-type"; a refused operation -> "sandbox-violation",
even when the code caught the PermissionError; the child dying -> "crashed" (later calls too).
Linux and macOS only (os.fork).
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
MAX_ANSWER_BYTES = 1 << 20       # a child's answer line; longer: the child is killed ("crashed")
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
    `isolation`: the policy layers that took effect in the child (after the first call or start())."""

    def __init__(self, fn_or_source: Callable[..., Any] | str, name: str, *, time_limit_s: float = TIME_LIMIT_S,
                 memory_limit_mb: int = MEMORY_LIMIT_MB, scratch_dir: str | None = None,
                 deny_paths: Iterable[str] = (), output_limit: int = OUTPUT_LIMIT, allow_read: Iterable[str] = (),
                 arg_adapter: Callable[[list], list] | None = None,
                 start_time_limit_s: float = START_TIME_LIMIT_S, network: bool = False):
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
        self._own_scratch = scratch_dir is None
        self.scratch_dir = tempfile.mkdtemp(prefix="rmqlab-sandbox-") if scratch_dir is None else scratch_dir
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
        ready = self._receive(self.start_time_limit_s, starting=True)
        self.isolation = tuple(ready.get("isolation", ()))
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
                os.waitpid(self._pid, 0)
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
            line = json.dumps({"args": list(json_args)}, allow_nan=False).encode() + b"\n"
        except (TypeError, ValueError) as e:
            raise ValueError(f"SandboxedFunction({self.name}): the arguments must be JSON data: {e}") from None
        if self._dead is not None:
            raise self._dead
        self.start()
        self.calls += 1
        deadline = time.monotonic() + self.time_limit_s
        if not self._send(line, deadline):
            raise self._died_or_timed_out(deadline)
        answer = self._receive(max(0.0, deadline - time.monotonic()))
        self.output = answer.get("output", "")
        new = answer.get("violations", [])
        self.violations.extend(new)
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

    def _receive(self, limit_s: float, starting: bool = False) -> dict[str, Any]:
        data = b""
        deadline = time.monotonic() + limit_s
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._died_or_timed_out(deadline, starting)
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 65536)
            if not chunk:
                raise self._died_or_timed_out(deadline, starting)
            data += chunk
            if len(data) > MAX_ANSWER_BYTES + 8 * self.output_limit:
                self._dead = StudentFunctionError("crashed", f"{self.name}: its answer exceeded "
                                                  f"{MAX_ANSWER_BYTES} bytes; the process was stopped")
                self._kill()
                raise self._dead
        try:
            answer = json.loads(data)
            if not isinstance(answer, dict) or "status" not in answer:
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
        status, output = answer.get("status"), answer.get("output", "")
        when = f" {when}" if when else ""
        if status == "todo":
            return StudentFunctionError("todo", f"{self.name} raised NotImplementedError{when} (still the TODO stub)",
                                        output)
        if status == "wrong-type":
            return StudentFunctionError("wrong-type", f"{self.name} returned {answer.get('repr')} (a "
                                        f"{answer.get('type')}){when}, which is not JSON data", output,
                                        type=answer.get("type"), repr=answer.get("repr"))
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


def _child_main(sf: SandboxedFunction, req_fd: int, resp_fd: int) -> None:
    capture = _CappedWriter(sf.output_limit)
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _close_inherited_fds(keep={0, 1, 2, req_fd, resp_fd})
        sys.stdout = sys.stderr = capture
        sys.stdin = io.StringIO("")
        _limit_memory(sf.memory_limit_mb)
        if not isinstance(sf._target, str):
            _preload_source(sf._target)
        os.environ["TMPDIR"] = sf.scratch_dir  # tempfile's default dir: the scratch dir, not /tmp
        tempfile.tempdir = sf.scratch_dir
        policy = install_sandbox_policy(allow_read=sf.allow_read, allow_write=(sf.scratch_dir,),
                                        deny=sf.deny_paths, network=sf.network, scratch_dir=sf.scratch_dir,
                                        rlimit_nproc=0)
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
    if policy.violations:
        ready["violations"] = list(policy.violations)
        if ready["status"] == "ready":
            ready = {**ready, "status": "error", "error": "PermissionError: " + "; ".join(policy.violations)}
    _write(resp_fd, ready)
    if ready["status"] != "ready":
        return
    seen = len(policy.violations)
    with os.fdopen(req_fd, "rb") as requests:
        for line in requests:
            try:
                args = json.loads(line)["args"]
                if sf._adapter is not None:
                    args = sf._adapter(args)
                value = fn(*args)
                try:
                    answer = {"status": "ok", "value": _to_json(value), "type": type(value).__name__}
                    json.dumps(answer["value"], allow_nan=False)
                except (TypeError, ValueError, RecursionError):
                    answer = {"status": "wrong-type", "type": type(value).__name__, "repr": _safe_repr(value)}
            except NotImplementedError:
                answer = {"status": "todo"}
            except BaseException as e:  # SystemExit and KeyboardInterrupt too: they are the student's
                answer = {"status": "error", "error": _describe(e), "traceback": _student_traceback(e)}
            answer["output"] = capture.take()
            answer["violations"] = list(policy.violations[seen:])
            seen = len(policy.violations)
            _write(resp_fd, answer)


def _write(fd: int, answer: dict[str, Any]) -> None:
    try:
        line = json.dumps(answer, allow_nan=False).encode() + b"\n"
    except BaseException:
        line = json.dumps({"status": "error", "error": "its answer could not be encoded"}).encode() + b"\n"
    while line:
        line = line[os.write(fd, line):]


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


def _safe_repr(value: Any) -> str:
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
