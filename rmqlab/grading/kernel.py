"""The Jupyter kernel the grader runs submitted notebooks in.

    python -m rmqlab.grading.kernel -f CONNECTION_FILE --scratch DIR [--deny PATH ...] [--memory-mb M]
                                    [--output-limit BYTES]

The grader's kernelspec (rmqlab.grading.extract.kernel_argv) starts this command inside bubblewrap
(rmqlab.lab.exercises.jail): a fresh interpreter, uid 65534, its own network namespace (the channels are
ZMQ over Unix sockets, `transport: ipc`), read-only Python and rmqlab, DIR a private tmpfs. That is
the boundary. Before ipykernel runs any cell, the kernel itself adds courtesies:
- caps its address space (RLIMIT_AS: what it uses now plus --memory-mb, within the jail's cap), so a
  memory bomb is a MemoryError in the notebook, not a machine in swap;
- installs rmqlab.lab.exercises' audit-hook policy, for clear early error messages: writes only
  under DIR, nothing read or listed under the --deny paths, no network sockets (ZMQ's sockets are C
  and do not go through Python's audit hooks; asyncio's AF_UNIX socketpair is allowed), no
  subprocesses; each refusal is also written at once on the kernel's stderr as a
  `rmqlab-sandbox-violation: ...` line, which the grader reads (papermill.log);
- caps what cells print (--output-limit bytes on stdout + stderr; later output is dropped with one
  notice), so a notebook that floods output cannot grow the grader's memory.
ipykernel and everything it imports is imported before the policy goes in: that is trusted code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys

TRUNCATED = "\n[rmqlab grading: output truncated]\n"


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Budget:
    def __init__(self, limit: int):
        self.left = limit
        self.noted = False


def _cap_stream(stream, budget: _Budget) -> None:
    write = stream.write

    def capped(s):
        if budget.left <= 0:
            if not budget.noted:
                budget.noted = True
                write(TRUNCATED)
            return len(s)
        budget.left -= len(s)
        return write(s if budget.left >= 0 else s[:len(s) + budget.left])

    stream.write = capped  # print() looks `write` up on the object, so the instance attribute wins


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="rmqlab.grading.kernel")
    p.add_argument("-f", dest="connection_file", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("--deny", action="append", default=[])
    p.add_argument("--memory-mb", type=int, default=1024)
    p.add_argument("--output-limit", type=int, default=1_000_000)
    args = p.parse_args(argv)
    scratch = os.path.realpath(args.scratch)
    report_fd = os.dup(2)   # the kernel's stderr before ipykernel redirects sys.stderr to the notebook

    from ipykernel.kernelapp import IPKernelApp
    from rmqlab.lab.exercises import install_sandbox_policy

    app = IPKernelApp.instance()
    app.initialize(["-f", args.connection_file])
    if hasattr(app.shell, "_tee"):
        # IPython 9 tees every cell's stdout/stderr into its history (an unbounded list), around our
        # cap: a flood would grow the kernel until MemoryError. The grading kernel keeps no history.
        app.shell._tee = lambda channel: contextlib.nullcontext()
    budget = _Budget(args.output_limit)
    _cap_stream(sys.stdout, budget)
    _cap_stream(sys.stderr, budget)
    if args.memory_mb > 0:
        limit = _vm_size() + args.memory_mb * 1024 * 1024
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if app.poller is not None:
        # The parent poller is the one thread IPKernelApp.start() would start; start it now: the
        # policy sets RLIMIT_NPROC to 0, and for a non-root user that also forbids new threads.
        app.poller.start()
        app.poller = None
    def report(what: str) -> None:
        os.write(report_fd, f"\nrmqlab-sandbox-violation: {what[:300]}\n".encode("utf-8", "replace"))

    install_sandbox_policy(allow_read=(scratch,), allow_write=(scratch,),
                           deny=tuple(os.path.realpath(d) for d in args.deny), network=False, processes=False,
                           on_violation=report)
    app.start()


if __name__ == "__main__":
    main()
