# SPDX-License-Identifier: MIT
"""What the soak (soak.py) reads of /proc and the cgroup tree: processes, slotd's fds."""

import collections
import os
import re

ENV = os.environ
T = ENV["T"]
CG = ENV["CG"]


def read(path):
    with open(path) as f:
        return f.read()


def ppid_of(pid):
    return int(read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[1])


def proc_state(pid):
    return read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0]


def our_processes():
    """Every live test server and keeper of this test, wherever it is: servers by their HOME
    (under $T), keepers (a binary of their own, with no trace of $T) by being in this test's
    cgroup tree or the parent of one of its servers."""
    servers, keepers, candidates = {}, {}, {}
    rel = cg_relative()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        try:
            comm = read(f"/proc/{pid}/comm").strip()
            if comm not in ("slotd-test-serv", "slotd-keeper"):
                continue
            if proc_state(pid) == "Z":
                continue
            cg = read(f"/proc/{pid}/cgroup")
            cg = next((l[3:] for l in cg.splitlines() if l.startswith("0::")), "?")
            if comm == "slotd-keeper":
                candidates[pid] = cg
            else:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                if any(e.startswith(f"HOME={T}/".encode()) for e in env):
                    servers[pid] = cg
        except (OSError, IndexError):
            continue
    parents = set()
    for pid in servers:
        try:
            parents.add(ppid_of(pid))
        except (OSError, IndexError, ValueError):
            pass
    for pid, cg in candidates.items():
        if cg == rel or cg.startswith(rel + "/") or pid in parents:
            keepers[pid] = cg
    return servers, keepers


def cg_relative():
    mount = read("/proc/self/mountinfo")
    mnt = next(l.split()[4] for l in mount.splitlines() if l.split(" - ")[1].startswith("cgroup2 "))
    return CG[len(mnt):] or "/"


def slot_log_pipes():
    """The pipes the servers of the slots' cgroups write their output into (their stdout and
    stderr): slotd holds each one's read end beside its keeper (slot-output.c)."""
    pipes = set()
    slot_dir = re.compile(r"/slot-\d+(/|$)")
    for root, _, files in os.walk(CG):
        if "cgroup.procs" not in files or not slot_dir.search(root):
            continue
        for p in read(os.path.join(root, "cgroup.procs")).split():
            for fd in ("1", "2"):
                try:
                    target = os.readlink(f"/proc/{p}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("pipe:["):
                    pipes.add(target)
    return pipes


def fd_sample(pid):
    """slotd's fds by kind: per slot (cgroup dir, home dir, exit status file, pidfd of a
    keeper, the keeper's restart eventfd, the read end of its server's output pipe) and the rest, with numbers blanked so that the rest compares as a multiset."""
    kinds, other = collections.Counter(), collections.Counter()
    slot_cg = re.compile(re.escape(CG) + r"/[^/]+/slot-\d+$")
    slot_home = re.compile(re.escape(T) + r"/slots/[^/]+/slot-\d+$")
    status = re.compile(re.escape(T) + r"/state/exit/\d+$")
    # Each running slot's notify socket (bound under state/notify.d) is a per-slot fd too.
    notify_inodes = set()
    for line in read("/proc/net/unix").splitlines()[1:]:
        f = line.split()
        if len(f) >= 8 and f[7].startswith(T + "/state/notify.d/"):
            notify_inodes.add(f[6])
    log_pipes = slot_log_pipes()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target in log_pipes:
            kinds["slot log pipe"] += 1
        elif target == "anon_inode:[timerfd]":
            # sd-event's: one per clock, made the first time a timer of that clock is armed
            # (a hold's wall-clock deadline makes CLOCK_REALTIME's), so at most one a clock.
            kinds["event loop clock"] += 1
        elif target == "anon_inode:[pidfd]":
            kinds["keeper pidfd"] += 1
        elif target == "anon_inode:[eventfd]":
            kinds["keeper restart eventfd"] += 1
        elif target.startswith("socket:[") and target[8:-1] in notify_inodes:
            kinds["slot notify socket"] += 1
        elif slot_cg.match(target):
            kinds["slot cgroup"] += 1
        elif slot_home.match(target):
            kinds["slot home"] += 1
        elif status.match(target):
            kinds["exit status"] += 1
        else:
            kinds["other"] += 1
            other[re.sub(r"\d+", "N", target)] += 1
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", read(f"/proc/{pid}/status"), re.M).group(1))
    return kinds, other, rss
