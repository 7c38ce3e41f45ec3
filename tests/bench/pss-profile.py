#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pss-profile.py [--runs R] [--json FILE] LABEL=BUILD_DIR [LABEL=BUILD_DIR ...]

Where the base memory of slotd and its local proxy goes (issue 24): for each build, R times
(alternating builds), a fresh slotd with one fleet of one slot (tests/bench/bench.py's
settings, as tests/bench/first-exec.py starts it: tiny as the build, state and slots on tmpfs,
a private dbus-daemon and cgroup subtree; the proxy on a free loopback port), and 1 s after
the first server's exec (as the bench's phase `start` measures), /proc/PID/smaps of slotd and
of slotd-proxy, summed per mapping's file (a library, the binary) or kind ([heap], [stack],
anonymous, ...): Pss, Pss_alone (below), Only_here (the pages no other process of the run maps:
what dropping that library from that process alone would save), Private_Dirty, Private_Clean,
Shared (clean and dirty), Rss, in KiB.
Prints, per build, the median of each figure over the runs, then slotd + proxy's totals.

PSS divides a shared page among the processes that map it: libc's pages are shared with the
rest of the machine, and other slotd-proxy processes on the machine (other engineers' tests)
share the proxy's libraries' pages and lower its PSS. Pss_alone is the PSS without them, as if
the run's own processes were alone on the machine: each resident page (its PFN from
/proc/PID/pagemap) counts 1 / (its mappings by this driver and the processes of its cgroup
subtree: the dbus-daemon, slotd, its proxy, the keeper and the server), whatever else maps
it at the time: deterministic, and an upper bound of what a quiet machine shows (there a
few shells and tools share libc's pages). The number of other slotd and slotd-proxy
processes seen is printed.

As root; everything it starts is killed and removed.
"""
import os, sys, time, signal, socket, subprocess, statistics, shutil, tempfile, json, argparse

SRC = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser(usage=__doc__)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--json")
ap.add_argument("builds", nargs="+")
args = ap.parse_args()
bins = [a.split("=", 1) for a in args.builds]
CGM = next(l.split()[4] for l in open("/proc/self/mountinfo") if l.split(" - ")[1].startswith("cgroup2 "))
root = tempfile.mkdtemp(prefix="slotd-pss-profile.", dir="/dev/shm")
os.chmod(root, 0o755)
HERE = f"{root}/bin"
cg = f"{CGM}/slotd-pss-profile-{os.getpid()}"
procs = []
FIELDS = ("Pss", "Pss_alone", "Only_here", "Private_Dirty", "Private_Clean", "Shared", "Rss")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def kill_tree(top):
    if not os.path.isdir(top): return
    dirs = sorted((d for d, _, _ in os.walk(top)), key=len, reverse=True)
    for d in dirs:
        try:
            with open(f"{d}/cgroup.kill", "w") as f: f.write("1")
        except OSError: pass
    for d in dirs:
        for _ in range(500):
            try: os.rmdir(d); break
            except FileNotFoundError: break
            except OSError: time.sleep(0.01)


def spawn(argv, group, log, env=None):
    os.makedirs(group, exist_ok=True)
    def pre():
        with open(f"{group}/cgroup.procs", "w") as f: f.write("0")
    out = open(log, "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                         preexec_fn=pre, start_new_session=True, close_fds=True)
    out.close(); procs.append(p); return p


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f: return f.read().strip()
    except OSError: return None


def mapping_name(w, prev):
    """A mapping's name: the file's base name, or [heap], [stack], ...; an anonymous mapping
    that starts where a file's mapping ends is that file's .bss ("libfoo.so (bss)")."""
    a = int(w[0].split("-")[0], 16)
    if len(w) > 5:
        return os.path.basename(w[5]) if w[5].startswith("/") else w[5]
    if prev and prev[1] == a and prev[2].startswith("/"):
        return os.path.basename(prev[2]) + " (bss)"
    return "[anon]"


def ranges(pid, files=None):
    """[(start, end, name)] of the mappings of a process with resident pages (only of the
    files named in files, if given)."""
    out = []; cur = None; prev = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            w = line.split()
            if "-" in w[0] and not w[0].endswith(":"):
                a, b = (int(x, 16) for x in w[0].split("-"))
                name = mapping_name(w, prev)
                prev = (a, b, w[5] if len(w) > 5 else "")
                cur = [a, b, name, 0]
                out.append(cur)
            elif w[0] == "Rss:":
                cur[3] = int(w[1])
    return [(a, b, n) for a, b, n, rss in out if rss > 0 and (files is None or n in files)]


def pfns(pid, files=None):
    """{mapping name: [PFN of each resident page]} (root reads the PFNs of pagemap)."""
    out = {}
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        for a, b, name in ranges(pid, files):
            f.seek(a // 4096 * 8)
            data = f.read((b - a) // 4096 * 8)
            lst = out.setdefault(name, [])
            for i in range(0, len(data), 8):
                e = int.from_bytes(data[i:i + 8], "little")
                if e >> 63:
                    lst.append(e & ((1 << 55) - 1))
    return out


def smaps(pid):
    """{mapping name: {field: KiB}} for one process, from /proc/PID/smaps (Pss_alone is
    filled by alone())."""
    out = {}; name = None; prev = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            w = line.split()
            if "-" in w[0] and not w[0].endswith(":"):
                name = mapping_name(w, prev)
                a, b = (int(x, 16) for x in w[0].split("-"))
                prev = (a, b, w[5] if len(w) > 5 else "")
                out.setdefault(name, {k: 0 for k in FIELDS})
            elif w[0].rstrip(":") in ("Pss", "Private_Dirty", "Private_Clean", "Rss"):
                out[name][w[0].rstrip(":")] += int(w[1])
            elif w[0] in ("Shared_Clean:", "Shared_Dirty:"):
                out[name]["Shared"] += int(w[1])
    return out


def subtree_pids(top):
    out = []
    for d, _, _ in os.walk(top):
        try: out += open(f"{d}/cgroup.procs").read().split()
        except OSError: pass
    return out


def alone(pids, res):
    """Pss_alone: the PSS our processes would have if the run's own processes were alone on
    the machine. Each resident page (its PFN from /proc/PID/pagemap) counts 1 / (its
    mappings by the processes of our cgroup subtree, the dbus-daemon, slotd, its proxy,
    keeper and server, and by this driver), whatever else (other engineers' builds, tests,
    tools) maps it at the time. Returns how many other slotd and slotd-proxy were running."""
    ours = {pid: pfns(pid) for pid in pids}
    files = {n for pf in ours.values() for n in pf if not n.startswith("[") and "(bss)" not in n}
    count = {}
    for pf in ours.values():
        for lst in pf.values():
            for p in lst:
                count[p] = count.get(p, 0) + 1
    for pid in set(subtree_pids(cg) + [str(os.getpid())]) - set(pids):
        try:
            for lst in pfns(pid, files).values():
                for p in lst:
                    if p in count:
                        count[p] += 1
        except OSError: pass
    for pid, pf in ours.items():
        for name, lst in pf.items():
            row = res[pid].setdefault(name, {k: 0 for k in FIELDS})
            row["Pss_alone"] = sum(1.0 / count[p] for p in lst) * PAGE_KIB
            row["Only_here"] = sum(count[p] == 1 for p in lst) * PAGE_KIB
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid not in pids and comm(pid) in ("slotd", "slotd-proxy"):
            try: n += f"slotd-pss-profile-{os.getpid()}" not in open(f"/proc/{pid}/cgroup").read()
            except OSError: pass
    return n


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def one_run(lab, bdir, r, addr):
    d = f"{root}/{lab}-{r}"; os.makedirs(f"{d}/etc/fleets.d")
    scg = f"{cg}/{lab}-{r}"
    with open(f"{d}/etc/slotd.ini", "w") as f:
        f.write(f"""[machine]
id = 0123456789abcdef0123456789abcdef
ip = 127.0.0.1
cpus = 256
memory = 1T

[supervisor]
cgroup = {scg}/slots
state_dir = {d}/state
slots_dir = {d}/slots
bus = {addr}

[localproxy]
listen = 127.0.0.1:{free_port()}
""")
    with open(f"{d}/etc/fleets.d/g000.ini", "w") as f:
        f.write(f"""[fleet]
build = {HERE}/tiny
args = {d}/stamps ${{SERVER_ID}} sleep
stop_timeout = 2s

[usage]
cpu = 0.001
memory = 1M
servers = 1

[ports]
game_base = {20000 + 10 * r}
query_base = {40000 + 10 * r}

[checks]
interval = 0

[crash]
restarts = 63
window = 1h
""")
    stamps = f"{d}/stamps"
    open(stamps, "w").close(); os.chmod(stamps, 0o666); os.chmod(d, 0o755)
    env = {k: v for k, v in os.environ.items() if k != "SLOTD_LOG_LEVEL"}
    p = spawn([f"{bdir}/slotd", "--config", f"{d}/etc/slotd.ini"], f"{scg}/daemon", f"{d}/log", env)
    deadline = time.monotonic() + 30
    while "exec" not in open(stamps).read():
        if p.poll() is not None: raise RuntimeError(f"{lab} exited: " + open(f"{d}/log").read()[-2000:])
        if time.monotonic() > deadline: raise RuntimeError(f"{lab}: timeout")
        time.sleep(0.001)
    time.sleep(1)  # as the bench: memory 1 s after the start
    pids = {comm(pid): pid for pid in open(f"{scg}/daemon/cgroup.procs").read().split()}
    if not {"slotd", "slotd-proxy"} <= set(pids):
        raise RuntimeError(f"{lab}: found {sorted(pids)} in slotd's group")
    pids = [pids["slotd"], pids["slotd-proxy"]]
    by_pid = {pid: smaps(pid) for pid in pids}
    n_others = alone(pids, by_pid)
    res = {"slotd": by_pid[pids[0]], "slotd-proxy": by_pid[pids[1]]}
    p.send_signal(signal.SIGTERM)
    try: p.wait(10)
    except subprocess.TimeoutExpired: p.kill(); p.wait()
    kill_tree(scg)
    shutil.rmtree(d, ignore_errors=True)
    return res, n_others


def report(lab, runs):
    print(f"\n### {lab} (median of {len(runs)} runs, KiB; other slotd/slotd-proxy on the machine: "
          f"{', '.join(str(o) for _, o in runs)})\n")
    totals = {}
    for proc in ("slotd", "slotd-proxy"):
        names = sorted({n for res, _ in runs for n in res[proc]})
        med = {n: {k: statistics.median(res[proc].get(n, {}).get(k, 0) for res, _ in runs)
                   for k in FIELDS} for n in names}
        tot = {k: statistics.median(sum(v[k] for v in res[proc].values()) for res, _ in runs)
               for k in FIELDS}
        totals[proc] = tot
        print(f"{proc}:\n")
        print("| mapping | " + " | ".join(FIELDS) + " |")
        print("|---|" + "---|" * len(FIELDS))
        for n in sorted(names, key=lambda n: -med[n]["Pss"]):
            if med[n]["Rss"] == 0 and med[n]["Pss"] == 0: continue
            print(f"| {n} | " + " | ".join(f"{med[n][k]:.0f}" for k in FIELDS) + " |")
        print("| **total** | " + " | ".join(f"**{tot[k]:.0f}**" for k in FIELDS) + " |\n")
    for k in ("Pss", "Pss_alone"):
        both = statistics.median(sum(sum(v[k] for v in res[p].values()) for p in res) for res, _ in runs)
        print(f"slotd + slotd-proxy {k}: {both:.0f} KiB = {both / 1024:.2f} MiB "
              f"(slotd {totals['slotd'][k]:.0f}, proxy {totals['slotd-proxy'][k]:.0f})")


try:
    os.makedirs(HERE)
    subprocess.run(["cc", "-std=gnu11", "-O2", "-o", f"{HERE}/tiny", f"{SRC}/tiny.c"], check=True)
    os.chmod(HERE, 0o755)
    os.makedirs(cg)
    sock = f"{root}/bus"; addr = f"unix:path={sock}"
    with open(f"{root}/bus.conf", "w") as f:
        f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>{addr}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/></policy>
</busconfig>""")
    spawn(["dbus-daemon", f"--config-file={root}/bus.conf", "--nofork", "--nosyslog"], f"{cg}/dbus", f"{root}/dbus.log")
    while not os.path.exists(sock): time.sleep(0.01)
    res = {lab: [] for lab, _ in bins}
    for r in range(args.runs):
        for lab, bdir in (bins if r % 2 == 0 else bins[::-1]):
            res[lab].append(one_run(lab, bdir, r, addr))
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    for lab, _ in bins:
        report(lab, res[lab])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({lab: [r for r, _ in v] for lab, v in res.items()}, f)
finally:
    for p in procs:
        if p.poll() is None:
            p.kill(); p.wait()
    kill_tree(cg)
    shutil.rmtree(root, ignore_errors=True)
