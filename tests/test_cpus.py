"""cells.cpu_count(): the CPUs of the affinity mask, capped by the cgroup CPU quota (rounded
down, at least 1), which n_threads=None starts from, counting a core's SMT siblings once
(cells/_cpus.py).

The quota reader on file trees built here: version 2 (cpu.max) and version 1 (cpu.cfs_quota_us
and cpu.cfs_period_us), a limit on an ancestor cgroup, a container's mount of a cgroup from
inside the hierarchy, no limit, and both versions at once. Then in a real cgroup: a child
process moved into a new cgroup with a quota of 1.5 CPUs counts 1, with 64 CPUs its affinity's
count; skipped, saying why, where this process may not create a cgroup (not root, no writable
cpu controller)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cells
from cells import _cpus, _threads


def affinity():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def proc_dir(tmp_path, cgroup_lines, mount_lines):
    """A /proc/self with these /proc/self/cgroup and /proc/self/mountinfo lines."""
    proc = tmp_path / "proc"
    write(proc / "cgroup", "".join(line + "\n" for line in cgroup_lines))
    write(proc / "mountinfo", "".join(line + "\n" for line in mount_lines))
    return proc


def v2_mount(point, root="/"):
    return f"30 23 0:26 {root} {point} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"


def v1_mount(point, options="rw,cpu,cpuacct", root="/"):
    return f"32 31 0:29 {root} {point} rw,relatime - cgroup cgroup {options}"


def test_v2_the_smallest_quota_of_the_cgroup_and_its_ancestors(tmp_path):
    fs = tmp_path / "cg2"
    write(fs / "a" / "b" / "cpu.max", "max 100000\n")       # none on the process's own
    write(fs / "a" / "cpu.max", "150000 100000\n")          # 1.5 CPUs on its parent
    write(fs / "cpu.max", "400000 100000\n")                # 4 at the root
    proc = proc_dir(tmp_path, ["0::/a/b"], [v2_mount(fs)])
    assert _cpus.cgroup_cpu_quota(proc) == 1.5


def test_v2_a_containers_view_of_its_own_cgroup(tmp_path):
    """The mount's root is the container's cgroup, which /proc/self/cgroup names in full; a
    mount of another part of the tree, listed first, is passed over."""
    fs, other = tmp_path / "cg2", tmp_path / "other"
    write(fs / "cpu.max", "125000 50000\n")
    write(other / "cpu.max", "10000 100000\n")
    proc = proc_dir(tmp_path, ["0::/docker/abc"], [v2_mount(other, root="/docker/xyz"),
                                                   v2_mount(fs, root="/docker/abc")])
    assert _cpus.cgroup_cpu_quota(proc) == 2.5


def test_v1_the_cpu_controllers_quota(tmp_path):
    fs = tmp_path / "cpu"
    write(fs / "job" / "cpu.cfs_quota_us", "100000\n")
    write(fs / "job" / "cpu.cfs_period_us", "200000\n")
    write(tmp_path / "memory" / "job" / "cpu.cfs_quota_us", "1000\n")   # another controller's
    proc = proc_dir(tmp_path, ["9:name=systemd:/", "4:memory:/job", "3:cpu,cpuacct:/job"],
                    [v1_mount(tmp_path / "memory", "rw,memory"), v1_mount(fs)])
    assert _cpus.cgroup_cpu_quota(proc) == 0.5


def both_versions(tmp_path, cfs_quota_us, cpu_max):
    """A process in the root cgroup of both a version-1 cpu hierarchy and a version-2 one,
    whose files hold these (a period of 100000 µs for version 1)."""
    fs1, fs2 = tmp_path / "cpu", tmp_path / "cg2"
    write(fs1 / "cpu.cfs_quota_us", cfs_quota_us + "\n")
    write(fs1 / "cpu.cfs_period_us", "100000\n")
    write(fs2 / "cpu.max", cpu_max + "\n")
    return proc_dir(tmp_path, ["3:cpu:/", "0::/"], [v1_mount(fs1, "rw,cpu"), v2_mount(fs2)])


def test_no_quota(tmp_path):
    assert _cpus.cgroup_cpu_quota(both_versions(tmp_path, "-1", "max 100000")) is None
    assert _cpus.cgroup_cpu_quota(tmp_path / "nowhere") is None


def test_both_versions_the_smaller(tmp_path):
    assert _cpus.cgroup_cpu_quota(both_versions(tmp_path, "300000", "200000 100000")) == 2.0


@pytest.mark.parametrize("quota, expected", [(None, "all"), (0.5, 1), (1.0, 1), (1.99, 1),
                                             (2.0, 2), (1000.0, "all")])
def test_cpu_count_rounds_the_quota_down_with_a_floor_of_one(monkeypatch, quota, expected):
    monkeypatch.setattr(_cpus, "process_cpu_quota", lambda: quota)
    expected = affinity() if expected == "all" else min(expected, affinity())
    assert cells.cpu_count() == expected


def test_n_threads_none_starts_from_it(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_cpus, "process_cpu_quota", lambda: 1.0)
    assert _threads.max_threads() == 1
    assert _threads.time_loop_threads(64, 256, 4, 512) == 1


def topology(tmp_path, siblings):
    """A sysfs cpu directory whose CPUs have these thread_siblings_list values ({cpu: text})."""
    for cpu, text in siblings.items():
        write(tmp_path / f"cpu{cpu}" / "topology" / "thread_siblings_list", text + "\n")
    return tmp_path


def test_smt_siblings_count_once(tmp_path):
    """4 CPUs on 2 cores (0 and 2 share one, 1 and 3 the other), and a CPU of no listed
    topology."""
    sysfs = topology(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert _cpus.physical_cores([0, 1, 2, 3], sysfs) == 2
    assert _cpus.physical_cores([0, 2], sysfs) == 1
    assert _cpus.physical_cores([0, 1], sysfs) == 2
    assert _cpus.physical_cores([0, 2, 7], sysfs) == 2


def test_n_threads_none_takes_one_thread_a_core(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_cpus, "process_cpu_quota", lambda: None)
    monkeypatch.setattr(_cpus, "physical_cores", lambda cpus: 1)
    assert _threads.max_threads() == 1


def test_this_machines_cores():
    assert 1 <= _cpus.physical_cores() <= len(_cpus.affinity())


# ---------------------------------------------------------------------------------------------
# A real cgroup
# ---------------------------------------------------------------------------------------------

def controllers(point):
    """The controllers a cgroup2 mount at `point` has (none where it cannot be read)."""
    try:
        return (point / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def writable_cpu_cgroup():
    """(the directory of this process's cgroup under a hierarchy with the cpu controller, its
    version), or a reason why a child cgroup with a CPU quota cannot be made here."""
    if os.geteuid() != 0:
        return "creating a cgroup needs root"
    memberships = Path("/proc/self/cgroup").read_text().splitlines()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        kind, options = fields[fields.index("-") + 1], fields[fields.index("-") + 3]
        point = Path(fields[4])
        if kind == "cgroup2" and "cpu" in controllers(point):
            own = next(m.split(":", 2)[2] for m in memberships if m.startswith("0::"))
            return point / own.lstrip("/"), 2
        if kind == "cgroup" and "cpu" in options.split(","):
            own = next(m.split(":", 2)[2] for m in memberships
                       if "cpu" in m.split(":")[1].split(","))
            return point / own.lstrip("/"), 1
    return "no cgroup hierarchy here has the cpu controller"


def count_in_cgroup(directory, version, cpus):
    """cells.cpu_count() and max_threads() in a child process moved into a new cgroup under
    `directory` whose quota is `cpus` CPUs; the cgroup is removed afterwards."""
    child = directory / f"cells-test-{os.getpid()}"
    child.mkdir()
    try:
        period = 100000
        if version == 2:
            (child / "cpu.max").write_text(f"{int(cpus * period)} {period}")
        else:
            (child / "cpu.cfs_period_us").write_text(str(period))
            (child / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
        code = ("import cells, cells._threads as t; "
                "print(cells.cpu_count(), t.max_threads())")
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        run = subprocess.run(["sh", "-c", f'echo $$ > "{child}/cgroup.procs" && exec "$0" -c "$1"',
                              sys.executable, code], capture_output=True, text=True, env=env,
                             timeout=120)
        assert run.returncode == 0, run.stderr
        return tuple(int(v) for v in run.stdout.split())
    finally:
        child.rmdir()


def test_in_a_real_cgroup():
    found = writable_cpu_cgroup()
    if isinstance(found, str):
        pytest.skip(found)
    directory, version = found
    try:
        assert count_in_cgroup(directory, version, 1.5) == (1, 1)
        assert count_in_cgroup(directory, version, 64) == (affinity(), affinity())
    except PermissionError as error:
        pytest.skip(f"this process may not create a cgroup under {directory}: {error}")
