"""The CPUs this process may use: its affinity mask, capped by its cgroup's CPU quota; and the
physical cores among them.

A container limited by a CPU quota (Docker's --cpus, Kubernetes' CPU limits) still sees every
CPU of the host in its affinity mask: on a 64-core host with a 2-CPU quota, threads for 64 CPUs
would take turns on 2 CPUs' worth of time. The quota is read from the cgroup file system of
Linux, version 2 (`cpu.max`: "QUOTA PERIOD" or "max PERIOD") or version 1 (`cpu.cfs_quota_us`,
-1 for none, and `cpu.cfs_period_us`), for the process's cgroup and each of its ancestors (a
limit set above the process's own cgroup applies to it too): the smallest QUOTA / PERIOD.
Where a cgroup directory is mounted from inside the hierarchy (a container's view),
/proc/self/mountinfo gives the part of the path the mount hides.

A thread count is asked for at every call with n_threads=None, so the quota and the cores'
topology, which take file reads, are read once per process (a quota changed later is not seen);
the affinity mask, one system call, at every call (taskset may change it at any time).
"""
import functools
import os
from pathlib import Path

TOPOLOGY = Path("/sys/devices/system/cpu")


def cpu_count():
    """The CPUs this process may use.

    The CPUs of the process's affinity mask (``os.sched_getaffinity``; every CPU where the
    platform has no affinity mask), at most the CPU quota of its Linux cgroup (version 1 or
    2, its own or an ancestor's, read once per process), rounded down, and at least 1.
    ``n_threads=None`` starts from this count (unless ``OMP_NUM_THREADS`` is set).

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> import cells
    >>> cells.cpu_count() >= 1
    True
    """
    return _within_quota(len(affinity()))


def thread_cores():
    """What n_threads=None starts from: cpu_count(), with the SMT siblings of a core counted
    once (physical_cores), the affinity mask read once."""
    cpus = affinity()
    return min(_within_quota(len(cpus)), physical_cores(cpus))


def _within_quota(cpus):
    """`cpus` CPUs, at most the process's cgroup quota rounded down, and at least 1."""
    quota = process_cpu_quota()
    if quota is not None:
        cpus = min(cpus, int(quota))
    return max(1, cpus)


def affinity():
    """The CPUs of the process's affinity mask, a frozenset (every CPU where the platform has
    none)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))


def physical_cores(cpus=None, topology=TOPOLOGY):
    """The physical cores among `cpus` (default: the affinity mask's): CPUs that share a core
    (SMT siblings, hyperthreads), as Linux's cpuN/topology/thread_siblings_list lists them,
    count once; a CPU whose topology is not listed counts as a core of its own. Read once for
    each set of CPUs."""
    return _physical_cores(affinity() if cpus is None else frozenset(cpus), topology)


@functools.lru_cache(maxsize=64)
def _physical_cores(cpus, topology):
    """physical_cores of the frozenset `cpus`, read from the files."""
    cores = set()
    for cpu in cpus:
        try:
            cores.add((topology / f"cpu{cpu}" / "topology" / "thread_siblings_list")
                      .read_text().strip())
        except OSError:
            cores.add(f"cpu{cpu}")
    return len(cores)


@functools.cache
def process_cpu_quota():
    """cgroup_cpu_quota() of this process, read once."""
    return cgroup_cpu_quota()


def cgroup_cpu_quota(proc=Path("/proc/self")):
    """The CPU quota of the process whose /proc directory is `proc`, in CPUs (a float: QUOTA /
    PERIOD), the smallest over its cgroups (version 2, and version 1's cpu controller) and their
    ancestors; None where none is set or the files cannot be read."""
    try:
        memberships = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in memberships:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            quotas += _quotas(_directories(mounts, "cgroup2", None, path), _quota_v2)
        elif "cpu" in controllers.split(","):
            quotas += _quotas(_directories(mounts, "cgroup", "cpu", path), _quota_v1)
    return min(quotas, default=None)


def _directories(mounts, fstype, controller, path):
    """The directories of cgroup `path` (as /proc/self/cgroup gives it) and of its ancestors up
    to its mount's root, under the mount of `fstype` (with `controller` among its options, for
    version 1) that /proc/self/mountinfo lists."""
    for line in mounts:
        fields = line.split()
        separator = fields.index("-")
        root, point = fields[3], fields[4]
        kind, options = fields[separator + 1], fields[separator + 3].split(",")
        if kind != fstype or (controller is not None and controller not in options):
            continue
        if not Path(path).is_relative_to(root):   # the mount shows another part of the tree
            continue
        relative = Path(path).relative_to(root)     # the mount shows the tree from `root` down
        return [Path(point) / relative, *(Path(point) / up for up in relative.parents)]
    return []


def _quotas(directories, read):
    """The quotas `read` finds in `directories` (those that set one)."""
    quotas = (read(d) for d in directories)
    return [q for q in quotas if q is not None]


def _quota_v2(directory):
    """cpu.max of a version-2 cgroup, "QUOTA PERIOD" or "max PERIOD": QUOTA / PERIOD or None."""
    try:
        quota, period = (directory / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _quota_v1(directory):
    """cpu.cfs_quota_us / cpu.cfs_period_us of a version-1 cgroup, or None (a quota of -1, or no
    files)."""
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
