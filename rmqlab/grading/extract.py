"""Extraction of the students' exercise functions from submitted notebooks: papermill
executes each submitted notebook with `grading=True` to extract the student's exercise functions, each
in its own subprocess with a time limit and a memory limit, its kernel jailed by bubblewrap
(rmqlab.lab.exercises.jail): no network, and a world in which the hidden workloads, the other
submissions and the grader's files do not exist.

For each notebook:
1. it is copied alone into a fresh scratch directory (on the grader's side), which also gets a
   kernelspec (JUPYTER_PATH) whose argv is `python -m rmqlab.grading.kernel` — the grading kernel —
   inside bwrap (`kernel_argv`): a fresh interpreter, uid 65534, read-only Python and rmqlab, a
   private size-capped tmpfs as HOME and working directory, and of the scratch directory only
   runtime/ bound read-write: the connection file and the kernel's ZMQ sockets, which use
   `transport: ipc` (Unix sockets in that directory: a kernel in its own network namespace cannot
   be reached over TCP; IpcKernelManager). The kernel's process (bwrap's) pid goes to kernel.pid;
2. a child process (forked by a multiprocessing forkserver that imported papermill once: the
   grader's own process, which may hold Spark's JVM gateway, is never forked; only papermill runs in
   it, never the student's code) runs papermill's
   Python API (not the CLI: measured with papermill 2.7, each CLI run costs 2.5-3 s, most of it
   importing papermill, against 0.8 s in-process) with parameters `grading=True` and nbclient's
   `skip_cells_with_tag="rmqlab-grading-skip"`, plus one appended cell (EXTRACT_CELL)
   that displays the functions as `application/json` with metadata `{'rmqlab': {'name': 'functions'}}`;
3. the parent kills the child's and the kernel's process groups when the time limit passes
   (bwrap's --die-with-parent also ends the kernel with the child).

A refusal by the kernel's audit hook (a courtesy, not the boundary) is reported twice: by the
extraction cell, and at once on the kernel's stderr (papermill.log, `VIOLATION_MARK` lines).

The appended cell turns each exercise function into source that runs alone in a fresh interpreter:
the function's own source (IPython keeps cell sources in linecache, so `inspect.getsource` works)
plus what it needs from the kernel's globals, found from the names its source mentions — other
functions and classes defined in the notebook (recursively), modules (`import x as y`), functions and
classes imported from modules (`from m import f as g`), plain literal constants. A name it cannot
carry over (an open file, an object) is listed in `unresolved`; the function may still work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, field

import nbformat

SKIP_TAG = "rmqlab-grading-skip"
KERNEL_NAME = "rmqlab-sandbox"
OUTPUT_NAME = "functions"
VIOLATION_MARK = "rmqlab-sandbox-violation: "   # kernel.py writes these lines on its stderr
KERNEL_SCRATCH_MB = 256    # the kernel's private tmpfs (HOME, working directory)

EXTRACT_CELL = r'''
def __rmqlab_extract(wanted):
    import ast, inspect, textwrap, types
    from IPython.display import display as _display
    ns = get_ipython().user_ns
    plain = (int, float, str, bytes, bool, type(None), complex)

    def literal(v, depth=0):
        if isinstance(v, plain):
            return True
        if depth > 4:
            return False
        if isinstance(v, (list, tuple, set, frozenset)) and len(v) <= 10000:
            return all(literal(x, depth + 1) for x in v)
        if isinstance(v, dict) and len(v) <= 10000:
            return all(literal(k, depth + 1) and literal(x, depth + 1) for k, x in v.items())
        return False

    import re
    ipython_names = re.compile(r"^(_+|_i+|_i?\d+|_[iod]h|In|Out|exit|quit|get_ipython)$")

    def mentioned(src):
        names = {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
        return sorted((n for n in names if not ipython_names.match(n)), reverse=True)

    def one(name):
        v = ns.get(name)
        if not (inspect.isfunction(v) and v.__module__ == "__main__"):
            return None
        imports, consts, defs, unresolved, seen, todo = [], [], [], [], set(), [name]
        while todo:
            n = todo.pop()
            if n in seen or n not in ns:
                continue
            seen.add(n)
            v = ns[n]
            mod, qual = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
            if isinstance(v, types.ModuleType):
                imports.append(f"import {v.__name__}" if v.__name__ == n else f"import {v.__name__} as {n}")
            elif (inspect.isfunction(v) or inspect.isclass(v)) and mod == "__main__":
                try:
                    src = textwrap.dedent(inspect.getsource(v))
                except (OSError, TypeError) as e:
                    unresolved.append(f"{n}: its source was not found ({e})")
                    continue
                defs.insert(0, src if v.__name__ == n else src + f"\n{n} = {v.__name__}\n")
                todo.extend(mentioned(src))
            elif (isinstance(mod, str) and isinstance(qual, str) and qual.isidentifier()
                  and (inspect.isroutine(v) or inspect.isclass(v))):
                imports.append(f"from {mod} import {qual}" + ("" if qual == n else f" as {n}"))
            elif literal(v):
                consts.append(f"{n} = {v!r}")
            else:
                unresolved.append(f"{n}: a {type(v).__name__} value cannot be carried over")
        source = "\n".join(sorted(set(imports)) + sorted(consts)) + "\n\n\n" + "\n\n".join(defs)
        compile(source, name, "exec")
        return {"source": source.strip() + "\n", "unresolved": unresolved}

    try:
        from rmqlab.lab.exercises.policy import installed_policy
        violations = list(installed_policy().violations) if installed_policy() is not None else []
    except ImportError:
        violations = []
    _display({"application/json": {"functions": {n: one(n) for n in wanted}, "violations": violations[:20]}},
             raw=True, metadata={"rmqlab": {"name": "%(output)s"}})


__rmqlab_extract(%(wanted)s)
del __rmqlab_extract
'''


@dataclass
class Submission:
    student: str
    notebook: str          # path of the submitted .ipynb
    name: str              # notebook's file name (a student may submit several)
    exercises: list[str]   # the exercises the notebook is graded for


@dataclass
class Extraction:
    """What extraction got from one notebook: the functions' sources by exercise, or a finding."""
    student: str
    notebook: str
    functions: dict[str, dict] = field(default_factory=dict)   # exercise -> {"source", "unresolved", "function"}
    findings: list[dict] = field(default_factory=list)           # {"kind", "detail"}
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def notebook_exercises(nb, known: set[str] | None = None) -> list[str]:
    """The exercises a notebook is graded for: its metadata `rmqlab.exercises`, else the cells whose
    metadata has `rmqlab.exercise` (the layout of the notebooks under labs/)."""
    names = list((nb.metadata.get("rmqlab") or {}).get("exercises") or [])
    if not names:
        for cell in nb.cells:
            ex = (cell.metadata.get("rmqlab") or {}).get("exercise")
            if ex and ex not in names:
                names.append(ex)
    if known is not None:
        names = [n for n in names if n in known]
    return names


def find_submissions(directory: str, known: set[str] | None = None) -> list[Submission]:
    """`DIR/<student>.ipynb` or `DIR/<student>/*.ipynb`, sorted. A notebook nbformat cannot read is
    still listed (its extraction becomes a `notebook-failed` finding)."""
    if not os.path.isdir(directory):
        raise ValueError(f"--submissions {directory!r} is not a directory")
    found: list[Submission] = []
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if entry.endswith(".ipynb") and os.path.isfile(path):
            found.append(_submission(entry[:-len(".ipynb")], path, known))
        elif os.path.isdir(path) and not entry.startswith("."):
            for nb in sorted(os.listdir(path)):
                if nb.endswith(".ipynb") and not nb.startswith("."):
                    found.append(_submission(entry, os.path.join(path, nb), known))
    return found


def _submission(student: str, path: str, known) -> Submission:
    try:
        exercises = notebook_exercises(nbformat.read(path, as_version=4), known)
    except Exception:  # unreadable: reported when extracted
        exercises = []
    return Submission(student, path, os.path.basename(path), exercises)


def kernel_argv(scratch: str, memory_mb: int, output_limit: int) -> list[str]:
    """The grading kernel's command: `rmqlab.grading.kernel` in bwrap, behind jail.launcher (limits,
    pid file). Only scratch/runtime is shared with the grader's side."""
    from rmqlab.lab.exercises import jail
    runtime = _runtime_dir(scratch)
    inner = jail.SCRATCH
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": os.path.dirname(jail._RMQLAB_DIR),
           "IPYTHONDIR": f"{inner}/.ipython", "MPLCONFIGDIR": f"{inner}/mpl", "JUPYTER_RUNTIME_DIR": runtime,
           "JUPYTER_DATA_DIR": f"{inner}/data", "MALLOC_ARENA_MAX": "2", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    argv = jail.command([sys.executable, "-s", "-B", "-m", "rmqlab.grading.kernel", "-f", "{connection_file}",
                         "--scratch", inner, "--memory-mb", str(memory_mb), "--output-limit", str(output_limit)],
                        scratch_mb=KERNEL_SCRATCH_MB, writable=(runtime,), env=env)
    # threads: ipykernel starts about ten; address space: the interpreter, ZMQ and ipykernel's
    # threads' stacks before the kernel's own RLIMIT_AS (its size then + memory_mb) goes in.
    limits = jail.Limits(cpu_s=3600, address_space_mb=memory_mb + 4096, nproc=64, nofile=256, file_size_mb=64)
    return jail.launcher(limits, os.path.join(scratch, "kernel.pid"), argv)


def _runtime_dir(scratch: str) -> str:
    """scratch/runtime: a link to a short directory under /tmp, because a Unix socket's path is
    limited to 107 bytes and the kernel's sockets are named after the connection file."""
    link = os.path.join(scratch, "runtime")
    if not os.path.islink(link):
        import tempfile
        os.symlink(tempfile.mkdtemp(prefix="rmqlab-k-", dir="/tmp"), link)
    return os.path.realpath(link)


def write_kernelspec(scratch: str, memory_mb: int, output_limit: int) -> str:
    """The grading kernel's kernelspec in `scratch/jupyter/kernels/`; returns the JUPYTER_PATH entry.
    No deny list: the hidden workloads, submissions and output directory are not in the jail at all."""
    jp = os.path.join(scratch, "jupyter")
    kdir = os.path.join(jp, "kernels", KERNEL_NAME)
    os.makedirs(kdir, exist_ok=True)
    with open(os.path.join(kdir, "kernel.json"), "w") as f:
        json.dump({"argv": kernel_argv(scratch, memory_mb, output_limit), "display_name": "rmqlab grading sandbox",
                   "language": "python"}, f)
    return jp


def _ipc_kernel_manager():
    """jupyter_client's AsyncKernelManager with `transport: ipc`: the jailed kernel has no network
    (its own net namespace), so its channels are Unix sockets next to the connection file."""
    from jupyter_client import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            kwargs.setdefault("transport", "ipc")
            # in the runtime directory bound into the jail (the sockets are named after this file)
            kwargs.setdefault("connection_file", os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "k.json"))
            super().__init__(**kwargs)

    return IpcKernelManager


def prepare_notebook(src_path: str, dest_path: str, wanted: dict[str, str]) -> None:
    """The submitted notebook plus the extraction cell for `wanted` ({exercise: function name})."""
    nb = nbformat.read(src_path, as_version=4)
    cell = nbformat.v4.new_code_cell(EXTRACT_CELL % {"output": OUTPUT_NAME,
                                                     "wanted": repr(sorted(set(wanted.values())))})
    cell.metadata["tags"] = ["rmqlab-extract"]
    nb.cells.append(cell)
    nbformat.write(nb, dest_path)


def read_functions(out_path: str) -> dict | None:
    nb = nbformat.read(out_path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if (out.get("metadata") or {}).get("rmqlab", {}).get("name") == OUTPUT_NAME:
                return dict(out["data"]["application/json"])
    return None


def _error_summary(out_path: str) -> str:
    try:
        nb = nbformat.read(out_path, as_version=4)
    except Exception:
        return ""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename')}: {out.get('evalue')}"[:500]
    return ""


KERNEL_START_ATTEMPTS = 3


def _child(scratch: str, time_limit: float) -> None:
    """In the child: run papermill on scratch/submission.ipynb (prepared), write scratch/result.json."""
    result: dict = {}
    try:
        # The kernel gets a minimal environment: nothing of the grader's (paths, tokens) leaks into it.
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "VIRTUAL_ENV", "PYTHONPATH")}
        os.environ.clear()
        os.environ.update(keep)
        os.environ.update({"HOME": scratch, "IPYTHONDIR": os.path.join(scratch, ".ipython"),
                           "TMPDIR": os.path.join(scratch, "tmp"),
                           "JUPYTER_RUNTIME_DIR": os.path.realpath(os.path.join(scratch, "runtime")),
                           "JUPYTER_DATA_DIR": os.path.join(scratch, "data"),
                           "JUPYTER_PATH": os.path.join(scratch, "jupyter"),
                           "MPLCONFIGDIR": os.path.join(scratch, "mpl"), "MALLOC_ARENA_MAX": "2",
                           "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
        for k in ("TMPDIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR"):
            os.makedirs(os.environ[k], exist_ok=True)
        import tempfile
        tempfile.tempdir = None
        import logging
        logging.getLogger("papermill").setLevel(logging.CRITICAL)
        logging.getLogger("traitlets").setLevel(logging.CRITICAL)
        import papermill as pm
        inp = os.path.join(scratch, "submission.ipynb")
        out = os.path.join(scratch, "executed.ipynb")
        try:
            for attempt in range(KERNEL_START_ATTEMPTS):
                try:
                    pm.execute_notebook(inp, out, parameters={"grading": True}, kernel_name=KERNEL_NAME,
                                        language="python", progress_bar=False, log_output=False, cwd=scratch,
                                        execution_timeout=max(1, int(time_limit)), start_timeout=60,
                                        skip_cells_with_tag=SKIP_TAG, shutdown_kernel="immediate",
                                        kernel_manager_class=_ipc_kernel_manager())
                    break
                except RuntimeError as e:
                    # The kernel died while starting, before it ran any of the notebook's code (the
                    # grading benchmark saw this once in 100 notebooks, under load): not the student's
                    # doing, so it is started again rather than reported.
                    if "before replying to kernel_info" not in str(e) or attempt + 1 == KERNEL_START_ATTEMPTS:
                        raise
                    _kill_kernel(scratch)
            got = read_functions(out) or {}
            result = {"functions": got.get("functions") or {}, "violations": got.get("violations") or []}
        except Exception as e:  # noqa: BLE001 — every failure becomes a finding
            detail = (f"{e.ename}: {e.evalue}" if getattr(e, "ename", None) else
                      _error_summary(out) if os.path.exists(out) else "") or str(e)
            result = {"error": f"{type(e).__name__}: {detail[:500]}",
                      "timeout": "CellTimeoutError" in type(e).__name__ or "TimeoutError" in type(e).__name__}
    except BaseException as e:  # noqa: BLE001
        result = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
    finally:
        try:
            with open(os.path.join(scratch, "result.json"), "w") as f:
                json.dump(result, f)
        finally:
            os._exit(0)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_kernel(scratch: str) -> None:
    try:
        with open(os.path.join(scratch, "kernel.pid")) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return
    if pid > 0:
        _kill_group(pid)   # jupyter_client started it as a session leader: pgid == pid
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _process_entry(scratch: str, time_limit: float) -> None:
    """What the forkserver's child runs: a session of its own (so a time-out kills its group), output
    to scratch/papermill.log, then papermill."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        log = os.open(os.path.join(scratch, "papermill.log"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        _child(scratch, time_limit)
    finally:
        os._exit(1)


def _context():
    """A forkserver: a fresh interpreter that imports papermill once and forks one child per
    notebook. The grader's own process may already hold Spark's JVM gateway (threads, sockets), and
    must never be forked itself."""
    import multiprocessing
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rmqlab.grading.extract", "papermill"])
    return ctx


def extract_all(submissions: list[Submission], functions: dict[str, str], *, scratch_root: str,
                time_limit: float = 60.0, memory_mb: int = 1024,
                output_limit: int = 1_000_000, workers: int = 2, progress=None,
                keep_scratch: bool = False) -> list[Extraction]:
    """Extract every submission's functions (`functions`: {exercise: function name}), at most
    `workers` notebooks at a time, each in its own child process (from a forkserver) with a fresh
    scratch dir. `time_limit` is papermill's per-cell limit; a child still running 30 s after it is
    killed with its kernel. Returns one Extraction per submission, in order. Never more at a time
    than the CPUs this process may use: notebooks sharing one CPU each run slower against the
    same time limit."""
    from rmqlab.common.cpu_quota import available_processors
    workers = min(workers, available_processors())
    os.makedirs(scratch_root, exist_ok=True)
    results: list[Extraction | None] = [None] * len(submissions)
    pending = list(range(len(submissions)))
    running: dict = {}   # Process -> (index, scratch, started)
    mp = None
    while pending or running:
        while pending and len(running) < max(1, workers):
            i = pending.pop(0)
            sub = submissions[i]
            wanted = {ex: functions[ex] for ex in sub.exercises if ex in functions}
            scratch = os.path.realpath(os.path.join(scratch_root, f"nb{i:05d}"))
            os.makedirs(scratch, exist_ok=True)
            started = time.monotonic()
            try:
                if not wanted:
                    raise ValueError("the notebook names no known exercise (metadata rmqlab.exercises)")
                prepare_notebook(sub.notebook, os.path.join(scratch, "submission.ipynb"), wanted)
                write_kernelspec(scratch, memory_mb, output_limit)
            except Exception as e:  # noqa: BLE001
                results[i] = Extraction(sub.student, sub.name, findings=[
                    {"kind": "notebook-failed", "detail": f"cannot read the notebook: {type(e).__name__}: {e}"[:500]}])
                if progress is not None:
                    progress.update(1)
                continue
            mp = mp or _context()
            proc = mp.Process(target=_process_entry, args=(scratch, time_limit), daemon=False)
            proc.start()
            running[proc] = (i, scratch, started)
        time.sleep(0.05)
        for proc, (i, scratch, started) in list(running.items()):
            done = proc.exitcode is not None
            overdue = time.monotonic() - started > time_limit + 30   # papermill's own per-cell limit first
            if not done and not overdue:
                continue
            if not done:
                _kill_group(proc.pid)
            proc.join()
            _kill_kernel(scratch)
            del running[proc]
            results[i] = _collect(submissions[i], scratch, functions, time.monotonic() - started, overdue and not done)
            if progress is not None:
                progress.update(1)
            if not keep_scratch:
                shutil.rmtree(os.path.realpath(os.path.join(scratch, "runtime")), ignore_errors=True)
                shutil.rmtree(scratch, ignore_errors=True)
    return [r for r in results if r is not None]


def _logged_violations(scratch: str, limit: int = 20) -> list[str]:
    """The kernel's refusals as it wrote them on its stderr (papermill.log; its first 4 MiB)."""
    out: list[str] = []
    try:
        with open(os.path.join(scratch, "papermill.log"), "rb") as f:
            text = f.read(4 << 20).decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        at = line.find(VIOLATION_MARK)
        if at >= 0 and len(out) < limit:
            out.append(line[at + len(VIOLATION_MARK):][:300])
    return out


def _collect(sub: Submission, scratch: str, functions: dict[str, str], seconds: float, killed: bool) -> Extraction:
    ext = Extraction(sub.student, sub.name, seconds=round(seconds, 3))
    try:
        with open(os.path.join(scratch, "result.json")) as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {"error": "the notebook's process died" + (" (killed at the time limit)" if killed else "")}
        if killed:
            result["timeout"] = True
    if "error" in result:
        ext.findings.append({"kind": "timeout" if result.get("timeout") else "notebook-failed",
                             "detail": result["error"]})
        return ext
    violations = list(result.get("violations") or [])
    for v in _logged_violations(scratch):   # reported by the kernel at once: the notebook cannot take them back
        if v not in violations:
            violations.append(v)
    if violations:
        # the notebook's code tried something the kernel's policy refused — and caught the error
        ext.findings.append({"kind": "sandbox-violation",
                             "detail": "while the notebook ran: " + "; ".join(violations)[:900]})
    got = result.get("functions") or {}
    for ex in sub.exercises:
        fname = functions.get(ex)
        if fname is None:
            continue
        entry = got.get(fname)
        if not entry:
            ext.findings.append({"kind": "missing-function",
                                 "detail": f"{ex}: the notebook does not define a function {fname}()"})
            continue
        ext.functions[ex] = {"function": fname, "source": entry["source"], "unresolved": entry.get("unresolved", [])}
    return ext
