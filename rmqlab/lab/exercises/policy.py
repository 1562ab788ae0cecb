"""The sandbox policy a child process running a student's function installs on itself (grading's rule:
"each in its own subprocess with a time limit and a memory limit, no network, in a scratch
directory from which the hidden workloads and other submissions cannot be read").

    policy = install_sandbox_policy(allow_write=[scratch], deny=[workloads_dir, submissions_dir])
    policy.isolation     # which layers are active, e.g. ("audit-hook", "rlimits", "netns", "chdir")
    policy.violations    # what the code attempted and was refused (kept even if it caught the error)

Two layers:

* OS isolation where the kernel lets us (Linux): a network namespace of its own
  (``unshare(CLONE_NEWNET)``, or ``CLONE_NEWUSER | CLONE_NEWNET`` for an unprivileged user where user
  namespaces are enabled) so the process has no network at all, not even loopback; RLIMIT_NPROC
  (SandboxedFunction's child: 0, no new process or thread; not enforced for root), RLIMIT_FSIZE,
  RLIMIT_CORE = 0; cwd = the scratch dir. Each is tried and silently skipped when refused; `isolation` says which took effect.
* A ``sys.addaudithook`` policy (PEP 578), always: opening, listing or changing files outside the
  allowed directories, any file under ``deny``, non-AF_UNIX sockets, starting processes, signalling
  other processes, raising rlimits and ctypes are refused with
  ``PermissionError("rmqlab sandbox: <what> is not allowed during grading")`` and recorded.

An audit hook is not a security boundary: hostile code can rewrite the hook's closure cells (found
with gc), call C directly (_posixsubprocess.fork_exec, os.pidfd_open raise no audit event), or slip
past a path check (os.open with dir_fd after a chdir). It is a courtesy: a clear, early
PermissionError for what a student's code does by mistake, and a `sandbox-violation` finding, each
refusal being handed to `on_violation` at once (so clearing `violations` afterwards hides nothing).
The boundary for grading is the OS sandbox the code runs in (rmqlab.lab.exercises.jail: bubblewrap
namespaces, read-only binds, rlimits), where what the hook misses fails in the kernel.
Once installed the policy cannot be removed (audit hooks cannot), so it is for a child process only.
"""

from __future__ import annotations

import os
import site
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

PREFIX = "rmqlab sandbox: "
FILE_SIZE_LIMIT = 64 * 1024 * 1024  # RLIMIT_FSIZE: a file the code writes in its scratch dir
_RMQLAB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../rmqlab

# What the ctypes ban covers: importing it, and every audit event the module raises when used
# (dlopen, dlsym, foreign calls, reading raw memory) by code that got hold of an imported copy.
_CTYPES_MODULES = ("ctypes", "_ctypes")
_PROCESS_EVENTS = {"subprocess.Popen": "starting a process (subprocess)", "os.system": "os.system",
                   "os.exec": "os.exec*", "os.posix_spawn": "os.posix_spawn", "os.spawn": "os.spawn*",
                   "os.fork": "os.fork", "os.forkpty": "os.forkpty", "pty.spawn": "pty.spawn",
                   "os.startfile": "os.startfile"}
_SIGNAL_EVENTS = {"os.kill": "os.kill", "os.killpg": "os.killpg", "signal.pthread_kill": "signal.pthread_kill"}
# Events whose first argument(s) are paths the code changes: each must be writable.
_WRITE_PATH_EVENTS = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2, "os.link": 2,
                      "os.symlink": 2, "os.truncate": 1, "os.chmod": 1, "os.chown": 1, "os.utime": 1,
                      "os.chflags": 1, "os.lchflags": 1, "os.lchmod": 1, "os.setxattr": 1, "os.removexattr": 1,
                      "shutil.rmtree": 1, "shutil.copyfile": 2, "shutil.move": 2, "shutil.copytree": 2}
_LIST_EVENTS = ("os.listdir", "os.scandir", "glob.glob", "os.listxattr")
_AF_UNIX = getattr(socket, "AF_UNIX", None)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


@dataclass
class SandboxPolicy:
    """What `install_sandbox_policy` installed: the resolved directories, the isolation layers that
    took effect, and the violations recorded so far (strings naming what was attempted)."""

    allow_read: tuple[str, ...]
    allow_write: tuple[str, ...]
    deny: tuple[str, ...]
    network: bool
    processes: bool
    isolation: tuple[str, ...] = ()
    violations: list[str] = field(default_factory=list)


_installed: SandboxPolicy | None = None


def installed_policy() -> SandboxPolicy | None:
    """The policy this process installed, if any."""
    return _installed


def default_read_dirs() -> tuple[str, ...]:
    """The Python installation (prefixes, site-packages) and the rmqlab package: what imports need."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, _RMQLAB_DIR}
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        dirs.add(user_site)
    return tuple(sorted(_real(d) for d in dirs if d))


def _real(path) -> str:
    return os.path.realpath(os.fsdecode(path))


def _under(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def install_sandbox_policy(*, allow_read: Iterable[str] = (), allow_write: Iterable[str] = (),
                           deny: Iterable[str] = (), network: bool = False, processes: bool = False,
                           scratch_dir: str | None = None, file_size_limit: int = FILE_SIZE_LIMIT,
                           rlimit_nproc: int | None = None,
                           on_violation: Callable[[str], None] | None = None) -> SandboxPolicy:
    """Install the policy in this process (for good): see the module docstring.

    allow_read: directories the code may read (besides the Python installation and rmqlab, and
    everything in allow_write); allow_write: directories it may write (and read); deny: directories
    nothing may touch, even if inside an allowed one. network / processes: True leaves that part
    open. scratch_dir: the working directory to switch to (default: the first allow_write entry).
    rlimit_nproc: RLIMIT_NPROC to set (None: left alone). It counts the user's threads too, so 0
    also forbids new threads: right for SandboxedFunction's child, wrong for a process that still
    starts threads after this call (a Jupyter kernel); root is exempt from it anyway.
    on_violation: called with each refusal's text before the PermissionError is raised (a
    SandboxedFunction child sends it to its parent at once, so the student's code cannot take it back).
    Returns the `SandboxPolicy` (its `isolation` and `violations`).
    """
    global _installed
    if _installed is not None:
        raise RuntimeError("install_sandbox_policy: a policy is already installed in this process")
    allow_write = tuple(_real(d) for d in allow_write)
    allow_read = tuple(sorted(set(default_read_dirs()) | {_real(d) for d in allow_read} | set(allow_write)))
    deny = tuple(_real(d) for d in deny)
    policy = SandboxPolicy(allow_read, allow_write, deny, network, processes)
    layers: list[str] = []
    if not network and _new_network_namespace():
        layers.append("netns")
    if _set_rlimits(rlimit_nproc, file_size_limit):
        layers.append("rlimits")
    scratch = scratch_dir or (allow_write[0] if allow_write else None)
    if scratch:
        try:
            os.chdir(scratch)
            layers.append("chdir")
        except OSError:
            pass
    # The ban on ctypes must follow its last use (the unshare above): forget the imported copies
    # so `import ctypes` goes through the import machinery, and its audit event, again.
    for name in [m for m in sys.modules if m.split(".")[0] in _CTYPES_MODULES]:
        del sys.modules[name]
    sys.addaudithook(_make_hook(policy, on_violation))
    layers.insert(0, "audit-hook")
    policy.isolation = tuple(layers)
    _installed = policy
    return policy


def _new_network_namespace() -> bool:
    """unshare(CLONE_NEWNET), or with CLONE_NEWUSER (mapping our own uid/gid) when unprivileged."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        clone_newnet, clone_newuser = 0x40000000, 0x10000000
        if libc.unshare(clone_newnet) == 0:
            return True
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(clone_newuser | clone_newnet) != 0:
            return False
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            try:
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
            except OSError:
                pass
        return True
    except (OSError, AttributeError, ImportError):
        return False


def _set_rlimits(nproc: int | None, file_size_limit: int) -> bool:
    try:
        import resource
        import signal

        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG, not a kill
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        return True
    except (ImportError, OSError, ValueError, AttributeError):
        return False


def _make_hook(policy: SandboxPolicy, on_violation: Callable[[str], None] | None = None):
    allow_read, allow_write, deny = policy.allow_read, policy.allow_write, policy.deny
    network, processes = policy.network, policy.processes
    violations = policy.violations
    busy: set[int] = set()  # threads inside our own path resolution (not re-checked)
    get_ident = threading.get_ident

    def refuse(what: str):
        violations.append(what)
        if on_violation is not None:
            try:
                on_violation(what)
            except Exception:  # noqa: BLE001 — a closed pipe: the refusal still stands
                pass
        raise PermissionError(f"{PREFIX}{what} is not allowed during grading")

    def check_path(path, write: bool, verb: str) -> None:
        if isinstance(path, int) or path is None:
            return  # an open file descriptor: opened under this policy (or inherited and kept on purpose)
        try:
            real = _real(path)
        except (TypeError, ValueError):
            return
        if _under(real, deny):
            refuse(f"{verb} {os.fsdecode(path)!s}")
        if not _under(real, allow_write if write else allow_read):
            refuse(f"{verb} {os.fsdecode(path)!s}")

    def hook(event: str, args: tuple) -> None:
        if busy and get_ident() in busy:
            return  # our own path resolution
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            verb = "writing the file" if write else "reading the file"
            busy.add(get_ident())
            try:
                check_path(path, write, verb)
            finally:
                busy.discard(get_ident())
        elif event in _LIST_EVENTS:
            path = args[0] if args else None
            busy.add(get_ident())
            try:
                check_path("." if path is None else path, False, "listing the directory")
            finally:
                busy.discard(get_ident())
        elif event in _WRITE_PATH_EVENTS:
            busy.add(get_ident())
            try:
                for path in args[:_WRITE_PATH_EVENTS[event]]:
                    check_path(path, True, f"{event} on")
            finally:
                busy.discard(get_ident())
        elif event == "import":
            if args and isinstance(args[0], str) and args[0].split(".")[0] in _CTYPES_MODULES:
                refuse(f"importing {args[0]}")
        elif event.startswith("ctypes."):
            refuse(f"ctypes ({event})")
        elif event.startswith("socket."):
            if network:
                return
            if event == "socket.__new__":
                family = args[1] if len(args) > 1 else None
                if family != _AF_UNIX:
                    refuse(f"opening a network socket (family {family})")
            elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
                sock = args[0] if args else None
                if getattr(sock, "family", None) != _AF_UNIX:
                    refuse(f"network access ({event} {args[1] if len(args) > 1 else ''})")
            elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                           "socket.gethostbyname_ex"):
                refuse(f"network access ({event} {args[0] if args else ''})")
        elif event in _PROCESS_EVENTS:
            if not processes:
                refuse(_PROCESS_EVENTS[event])
        elif event in _SIGNAL_EVENTS:
            pid = args[0] if args else None
            if pid != os.getpid():
                refuse(f"{_SIGNAL_EVENTS[event]} (signalling another process)")
        elif event in ("resource.setrlimit", "resource.prlimit"):
            refuse(f"{event} (changing the sandbox's limits)")
        elif event == "object.__setattr__":
            # Rewriting this hook's code would switch the policy off.
            if len(args) >= 2 and args[0] is hook and args[1] in ("__code__", "__closure__", "__defaults__"):
                refuse("changing the sandbox policy")

    return hook


__all__ = ["SandboxPolicy", "install_sandbox_policy", "installed_policy", "default_read_dirs", "PREFIX"]
