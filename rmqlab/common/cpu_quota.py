"""How many CPUs this process may really use, for choosing worker counts.

`os.cpu_count()` counts the machine's cores, not what a container is allowed: Binder gives a
notebook 1 CPU as a CFS quota on a machine with many cores, so `os.cpu_count()` says 8 or 64 and
a pool sized by it only adds processes that share the one CPU (and the 2 GB of memory).

`available_processors()` mirrors Java's `Runtime.availableProcessors()`, which RocketMQ sizes its
thread pools with (`BrokerConfig.PROCESSOR_NUMBER` in common/src/main/java/org/apache/rocketmq/
common/BrokerConfig.java) and which, since JDK 10, honours the container's quota the same way: the
CPUs in the affinity mask, capped by the cgroup's CPU quota rounded up (OpenJDK's
`CgroupSubsystem::active_processor_count`). The quota is looked up in cgroup v2 (`cpu.max`) and
cgroup v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`) from this process's own cgroup up to the
root of the mounted hierarchy; the tightest one counts.
"""

from __future__ import annotations

import math
import os


def _mounts(root: str) -> list[tuple[str, str, str, set[str]]]:
    """(mount root, mount point, fstype, super options) of each cgroup mount, from mountinfo."""
    out = []
    try:
        with open(os.path.join(root, "proc/self/mountinfo")) as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        # "36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:13 - cgroup cgroup rw,cpu,cpuacct"
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return out


def _cgroup_dirs(root: str) -> list[tuple[str, str, str]]:
    """(kind, directory of this process's cgroup, mount point) for each mounted hierarchy that
    has the CPU controller: kind "v2" or "v1". A path outside the mount's root (a container that
    sees its host's paths, without a cgroup namespace) maps to the mount point itself."""
    try:
        with open(os.path.join(root, "proc/self/cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    v1 = v2 = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        elif "cpu" in parts[1].split(","):
            v1 = parts[2]
    dirs = []
    for mount_root, point, fstype, options in _mounts(root):
        if fstype == "cgroup2" and v2 is not None:
            path, kind = v2, "v2"
        elif fstype == "cgroup" and "cpu" in options and v1 is not None:
            path, kind = v1, "v1"
        else:
            continue
        rel = os.path.relpath(path, mount_root) if (path + "/").startswith(mount_root.rstrip("/") + "/") else "."
        top = os.path.normpath(os.path.join(root, point.lstrip("/")))
        dirs.append((kind, os.path.normpath(os.path.join(top, rel)), top))
    return dirs


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _quota_here(kind: str, directory: str) -> float | None:
    """The CPU quota set on this one cgroup, in CPUs, or None (no limit, no such file, or a
    content we do not understand: a worker count is no reason to fail)."""
    if kind == "v2":
        text = _read(os.path.join(directory, "cpu.max")) or ""  # "max 100000" or "150000 100000"
        quota, _, period = text.partition(" ")
    else:
        quota = _read(os.path.join(directory, "cpu.cfs_quota_us")) or ""  # -1: no limit
        period = _read(os.path.join(directory, "cpu.cfs_period_us")) or ""
    try:
        q, p = int(quota), int(period.split()[0])
    except (ValueError, IndexError):  # "max", missing, garbled
        return None
    return q / p if q > 0 and p > 0 else None


def cpu_quota(root: str = "/") -> float | None:
    """The tightest CFS quota (in CPUs, e.g. 1.0 or 1.5) on this process's cgroup or any of its
    ancestors, in cgroup v2 or v1; None when there is none or no cgroup is mounted. `root` lets a
    test point at a made-up /proc and /sys."""
    best = None
    for kind, directory, top in _cgroup_dirs(root):
        while True:
            q = _quota_here(kind, directory)
            if q is not None and (best is None or q < best):
                best = q
            if directory == top or len(directory) <= len(top):
                break
            directory = os.path.dirname(directory)
    return best


def available_processors(root: str = "/") -> int:
    """CPUs this process may use: the affinity mask (else os.cpu_count()), capped by the cgroup
    quota rounded up, at least 1 (as Java's Runtime.availableProcessors())."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cpu_quota(root)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)
