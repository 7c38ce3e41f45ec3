#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slotd's benchmark against s6, runit and supervisord (tests/bench/README.md).

Run through tests/bench/run, which installs the peers, builds slotd and the helpers, and
passes the private directories below. Every process this script starts is recorded (PID and
start time) in RUN_DIR/pids and killed by PID; every service lives in a cgroup below
CGROUP, which is killed and removed at the end, on an error and on Ctrl-C.
"""
import argparse
import collections
import datetime
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time

PEERS = ("slotd", "s6", "runit", "supervisord")
OTHERS = ("s6", "runit", "supervisord")


def now_us():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Skip(Exception):
    pass


# ---- processes and cgroups ----


class Ctx:
    def __init__(self, args):
        self.args = args
        self.run_dir = args.run_dir
        self.cg_root = args.cgroup
        self.bin = args.bin
        self.tiny = os.path.join(args.bin, "tiny")
        self.client = os.path.join(args.bin, "alloc-client")
        self.floor = os.path.join(args.bin, "floor")
        self.slotd = args.slotd
        self.test_server = args.test_server
        self.procs = {}  # pid -> Popen
        self.bus_addr = None
        self.bus_proc = None
        os.makedirs(self.cg_root, exist_ok=True)

    def spawn(self, argv, cgroup, logfile, env=None):
        os.makedirs(cgroup, exist_ok=True)
        procs_file = os.path.join(cgroup, "cgroup.procs")

        def into_cgroup():
            with open(procs_file, "w") as f:
                f.write("0")

        out = open(logfile, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                             preexec_fn=into_cgroup, start_new_session=True, close_fds=True)
        out.close()
        self.procs[p.pid] = p
        with open(os.path.join(self.run_dir, "pids"), "a") as f:
            f.write(f"{p.pid} {starttime(p.pid)}\n")
        return p

    def kill(self, p, sig=signal.SIGKILL, timeout=10):
        if p.poll() is None:
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.pop(p.pid, None)

    def cleanup(self):
        for p in list(self.procs.values()):
            self.kill(p)
        kill_cgroup_tree(self.cg_root, remove_top=True)


def starttime(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return "0"


def cgroup_dirs(top):
    dirs = []
    for d, subdirs, _ in os.walk(top):
        dirs.append(d)
    return sorted(dirs, key=lambda d: d.count("/"), reverse=True)


def cgroup_pids(cg):
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def kill_cgroup_tree(top, remove_top=True):
    """Kills every process below TOP (cgroup.kill, else SIGKILL to each PID) and removes the
    groups bottom-up."""
    if not os.path.isdir(top):
        return
    dirs = cgroup_dirs(top)
    for d in dirs:
        try:
            with open(os.path.join(d, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            for pid in cgroup_pids(d):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    deadline = time.monotonic() + 15
    for d in dirs:
        if d == top and not remove_top:
            continue
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    print(f"warning: could not remove {d}", file=sys.stderr)
                    break
                time.sleep(0.02)


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def free_port():
    """A loopback TCP port free now: the local proxy's, rather than the default 8086, which
    another slotd on a shared machine may hold."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resident_pfns(pid):
    """The page frame of every resident page of a process (root reads them from pagemap)."""
    out = []
    with open(f"/proc/{pid}/maps") as m, open(f"/proc/{pid}/pagemap", "rb") as f:
        for line in m:
            a, b = (int(x, 16) for x in line.split()[0].split("-"))
            if a >= 1 << 47:  # [vsyscall]
                continue
            f.seek(a // 4096 * 8)
            data = f.read((b - a) // 4096 * 8)
            for i in range(0, len(data), 8):
                e = int.from_bytes(data[i:i + 8], "little")
                if e >> 63:
                    out.append(e & ((1 << 55) - 1))
    return out


def pss_own_kib(pids, top):
    """PSS as if the run's own processes were alone on the machine (tests/bench/pss-profile.py's
    Pss_alone): each resident page of pids is divided among its mappings by the processes of
    the bench's cgroup subtree (top: the supervisor, its services, the dbus-daemon) and this
    driver, and by nothing else that runs. On a shared machine, other slotds' proxies map the
    same libraries and lower the plain PSS by half; this figure does not move with them."""
    count = {}
    mine = set()
    for pid in pids:
        try: lst = resident_pfns(pid)
        except OSError: continue
        mine.update(lst)
        for p in lst:
            count[p] = count.get(p, 0) + 1
    others = {os.getpid()}
    for d, _, _ in os.walk(top):
        others.update(cgroup_pids(d))
    for pid in others - set(pids):
        try:
            for p in resident_pfns(pid):
                if p in mine:
                    count[p] += 1
        except OSError:
            pass
    total = 0.0
    for pid in pids:
        try: total += sum(1.0 / count[p] for p in resident_pfns(pid))
        except OSError: pass
    return total * os.sysconf("SC_PAGE_SIZE") / 1024


def pss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def cpu_ticks(pids):
    """utime + stime of PIDS, in clock ticks (whole processes: all threads)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def sched_ns(pid):
    """Time on the CPU of PID's main thread, in ns (/proc/PID/schedstat)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


# ---- stamps: lines "ID exec USEC" and "ID exit USEC" appended by tiny ----


class Stamps:
    def __init__(self, path):
        self.path = path
        with open(path, "w"):
            pass
        os.chmod(path, 0o666)
        self.f = open(path, "rb")
        self.rest = b""
        self.events = collections.defaultdict(list)
        self.first_exec = {}

    def poll(self):
        data = self.f.read()
        if not data:
            return
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            sid, kind, usec = line.decode().split()
            usec = int(usec)
            self.events[sid].append((kind, usec))
            if kind == "exec" and sid not in self.first_exec:
                self.first_exec[sid] = usec

    def restarts(self, ids):
        """exec(k+1) - exit(k) in ms for the services IDS."""
        out = []
        for sid in ids:
            ev = self.events.get(sid, [])
            for (k1, t1), (k2, t2) in zip(ev, ev[1:]):
                if k1 == "exit" and k2 == "exec":
                    out.append((t2 - t1) / 1000.0)
        return out

    def close(self):
        self.f.close()


# ---- the supervisors ----
#
# A workload is a list of groups (count, words): words are tiny's mode, "sleep" or
# "crash MS" (MS may be a function of the service's index in its group). Services are
# numbered 0..N-1 across the groups in order; slotd numbers its slots the same way.


def expand(groups):
    out, sid = [], 0
    for count, words in groups:
        for i in range(count):
            w = words(i) if callable(words) else words
            out.append((str(sid), w))
            sid += 1
    return out


class Peer:
    name = None

    def __init__(self, ctx, tag):
        self.ctx = ctx
        self.tag = tag
        self.dir = os.path.join(ctx.run_dir, f"{self.name}-{tag}")
        self.cg = os.path.join(ctx.cg_root, f"{self.name}-{tag}")
        os.makedirs(self.dir)
        self.stamps = Stamps(os.path.join(self.dir, "stamps"))
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            self.ctx.kill(self.proc)
        kill_cgroup_tree(self.cg)
        self.stamps.close()

    def sup_pids(self):
        return [self.proc.pid]

    def log_tail(self, n=15):
        try:
            with open(os.path.join(self.dir, "log"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class S6(Peer):
    name = "s6"

    def prepare(self, groups):
        scan = os.path.join(self.dir, "scan")
        os.makedirs(scan)
        for sid, words in expand(groups):
            d = os.path.join(scan, f"svc-{sid}")
            os.makedirs(d)
            os.symlink(self.ctx.tiny, os.path.join(d, "run"))
            with open(os.path.join(d, "tiny.args"), "w") as f:
                f.write(f"{self.stamps.path} {sid} {words}\n")
            if self.name == "s6":
                # Readiness: s6-supervise restarts a service that was ready for more than
                # 1 s at once; one never ready always waits 1 s.
                with open(os.path.join(d, "notification-fd"), "w") as f:
                    f.write("3\n")
        self.argv = ["s6-svscan", "-c", "2000", scan]  # the default caps the services at 500

    def start(self):
        self.proc = self.ctx.spawn(self.argv, self.cg, os.path.join(self.dir, "log"))

    def sup_pids(self):
        return [p for p in cgroup_pids(self.cg) if comm(p) in ("s6-svscan", "s6-supervise")]


class Runit(S6):
    name = "runit"

    def prepare(self, groups):
        super().prepare(groups)
        self.argv = ["runsvdir", os.path.join(self.dir, "scan")]

    def sup_pids(self):
        return [p for p in cgroup_pids(self.cg) if comm(p) in ("runsvdir", "runsv")]


class Supervisord(Peer):
    name = "supervisord"

    def prepare(self, groups):
        conf = os.path.join(self.dir, "supervisord.conf")
        with open(conf, "w") as f:
            f.write(f"""[supervisord]
nodaemon = true
logfile = {self.dir}/supervisord.log
pidfile = {self.dir}/supervisord.pid
childlogdir = {self.dir}
minfds = 8192
minprocs = 4096
""")
            for sid, words in expand(groups):
                f.write(f"""
[program:svc-{sid}]
command = {self.ctx.tiny} {self.stamps.path} {sid} {words}
autorestart = true
startsecs = 0
stdout_logfile = NONE
stderr_logfile = NONE
""")
        self.argv = ["supervisord", "--nodaemon", "--configuration", conf]

    def start(self):
        self.proc = self.ctx.spawn(self.argv, self.cg, os.path.join(self.dir, "log"))


class Slotd(Peer):
    name = "slotd"

    def prepare(self, groups, build=None, checks=None, usage_cpu="0.001"):
        etc = os.path.join(self.dir, "etc")
        os.makedirs(os.path.join(etc, "fleets.d"))
        self.slots_dir = os.path.join(self.dir, "slots")
        self.slot_cg = os.path.join(self.cg, "slots")
        self.ini = os.path.join(etc, "slotd.ini")
        with open(self.ini, "w") as f:
            f.write(f"""[machine]
id = 0123456789abcdef0123456789abcdef
ip = 127.0.0.1
cpus = 256
memory = 1T

[supervisor]
cgroup = {self.slot_cg}
state_dir = {self.dir}/state
slots_dir = {self.slots_dir}
bus = {self.ctx.bus_addr}

[localproxy]
listen = 127.0.0.1:{free_port()}

[metrics]
; off, as when the recorded figures were measured (its default, 8087, adds a listener)
listen = off
""")
        self.fleets = []
        self.sleepers = set()  # fleets of services that never exit
        base = 0
        for g, (count, words) in enumerate(groups):
            fleet = f"g{g:03d}"  # file-name order is the order of the groups
            self.fleets.append((fleet, base, count))
            if words == "sleep":
                self.sleepers.add(fleet)
            if build is None:
                exe, args = self.ctx.tiny, f"{self.stamps.path} ${{SERVER_ID}} {words}"
                if callable(words):
                    raise ValueError("slotd: per-service arguments need one group each")
            else:
                exe, args = build, ("--server-id ${SERVER_ID} --port ${PORT} --query-port ${QUERY_PORT} "
                             "--file-check 1000")
            with open(os.path.join(etc, "fleets.d", f"{fleet}.ini"), "w") as f:
                f.write(f"""[fleet]
build = {exe}
args = {args}
stop_timeout = 2s

[usage]
cpu = {usage_cpu}
memory = 1M
servers = {count}

[ports]
game_base = {20000 + base}
query_base = {40000 + base}

[checks]
{checks or "interval = 0"}

[crash]
restarts = 63
window = 1h
""")
            base += count
        self.n = base

    def start(self):
        env = {k: v for k, v in os.environ.items() if k != "SLOTD_LOG_LEVEL"}
        self.proc = self.ctx.spawn([self.ctx.slotd, "--config", self.ini],
                                   os.path.join(self.cg, "daemon"), os.path.join(self.dir, "log"),
                                   env=env)

    def stop(self):
        if self.proc is not None:
            self.ctx.kill(self.proc, signal.SIGTERM)
        kill_cgroup_tree(self.cg)
        self.stamps.close()

    def keepers(self):
        out = []
        for fleet, base, count in self.fleets:
            for sid in range(base, base + count):
                for pid in cgroup_pids(os.path.join(self.slot_cg, fleet, f"slot-{sid}")):
                    if comm(pid) == "slotd-keeper":
                        out.append(pid)
        return out

    def proxies(self):
        """slotd-proxy, the local proxy slotd starts (in slotd's own group)."""
        return [pid for pid in cgroup_pids(os.path.join(self.cg, "daemon"))
                if comm(pid) == "slotd-proxy"]

    def sup_pids(self):
        """slotd, its local proxy and its keepers: the per-slot process it forks to hold each
        server (the counterpart of an s6-supervise or a runsv)."""
        return [self.proc.pid] + self.proxies() + self.keepers()

    def validate(self):
        """Every slot has its server.json and (unless it is a crasher, which may be between
        two runs) its process in its cgroup."""
        for fleet, base, count in self.fleets:
            for sid in range(base, base + count):
                home = os.path.join(self.slots_dir, fleet, f"slot-{sid}")
                if not os.path.isfile(os.path.join(home, "server.json")):
                    raise RuntimeError(f"slotd: no server.json in {home}")
                cg = os.path.join(self.slot_cg, fleet, f"slot-{sid}")
                if fleet in self.sleepers and not cgroup_pids(cg):
                    raise RuntimeError(f"slotd: slot {sid}'s cgroup is empty")


# Checks of scenarios 4 and 6. A probe that fails is a strike; 63 strikes (the most) in 30 min
# keep every server alive through the measurement, so that a slow answer on a busy machine
# is counted (probe_fail_*) instead of restarting servers in the middle of it.
CHECKS_1S = "interval = 1s\nquery = sqp\nquery_timeout = 500ms\nstrikes = 63\nwindow = 30m"
CHECKS_5S = "interval = 5s\nquery = sqp\nquery_timeout = 2s\nstrikes = 63\nwindow = 30m"

PEER_CLASSES = {"slotd": Slotd, "s6": S6, "runit": Runit, "supervisord": Supervisord}

# ---- measurements ----


class Bench:
    def __init__(self, ctx, quick):
        self.ctx = ctx
        self.quick = quick
        self.runs = 3 if quick else 5
        self.idle_s = 10 if quick else 30
        self.rtt_k = 300 if quick else 1000
        self.load_s = 2 if quick else 5
        self.list_k = 20
        self.sweeps = 2 if quick else 3
        self.samples = 50
        self.records = []  # (run, metric, peer, value)
        self.notes = []
        self.skip_big = set()  # peers whose N=1000 start took too long
        self.only = {"200", "sizes", "restart", "checks"}  # phases to run (--only)
        self.peers = set(PEERS)  # peers to run (--peers; slotd always)

    def rec(self, run, metric, peer, value):
        self.records.append((run, metric, peer, value))

    def note(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)
        log("note: " + msg)

    def new(self, peer, tag, groups, **kw):
        p = PEER_CLASSES[peer](self.ctx, tag)
        p.prepare(groups, **kw) if kw else p.prepare(groups)
        return p

    def cold_start(self, p, n, timeout):
        """Starts P and returns ms from the start to the exec of its Nth service."""
        t0 = now_us()
        p.start()
        deadline = t0 + timeout * 1_000_000
        while True:
            p.stamps.poll()
            if len(p.stamps.first_exec) >= n:
                break
            if not p.alive():
                raise RuntimeError(f"{p.name} exited during start-up; its log ends:\n{p.log_tail()}")
            if now_us() > deadline:
                raise Skip(f"{p.name}: fewer than {n} services up after {timeout} s")
            time.sleep(0.001)
        if isinstance(p, Slotd):
            p.validate()
        p.first_ms = (min(p.stamps.first_exec.values()) - t0) / 1000.0
        return (max(p.stamps.first_exec.values()) - t0) / 1000.0

    # Scenarios 1, 2, 4 and 5 at N = 200: every peer up together, then the idle window.
    def phase_200(self, r, order):
        n = 200
        up = {}
        try:
            for peer in order:
                p = self.new(peer, f"r{r}-200", [(n, "sleep")])
                up[peer] = p
                ms = self.cold_start(p, n, 120)
                self.rec(r, "cold_200", peer, ms)
                self.rec(r, "first_200", peer, p.first_ms)
                log(f"run {r} {peer}: cold start of {n}: {ms:.1f} ms")
            time.sleep(1)
            for peer, p in up.items():
                self.rec(r, "pss_200", peer, pss_kib(p.sup_pids()))
            self.rec(r, "pss_200_alone", "slotd", pss_kib([up["slotd"].proc.pid]))
            if self.ctx.bus_proc:
                self.rec(r, "pss_bus", "slotd", pss_kib([self.ctx.bus_proc.pid]))
            pids = {peer: p.sup_pids() for peer, p in up.items()}
            t0 = {peer: cpu_ticks(ps) for peer, ps in pids.items()}
            w0 = time.monotonic()
            time.sleep(self.idle_s)
            w = time.monotonic() - w0
            for peer, ps in pids.items():
                ms = (cpu_ticks(ps) - t0[peer]) * TICK_MS * 30.0 / w
                self.rec(r, "idle_200", peer, ms)
            log("run {} idle CPU ms/30 s: {}".format(
                r, ", ".join(f"{k} {v:.0f}" for (rr, m, k, v) in self.records if rr == r and m == "idle_200")))
            for peer in OTHERS:
                up.pop(peer).stop()
            self.alloc_bench(r, up["slotd"])
        finally:
            for p in up.values():
                p.stop()

    def client(self, *args):
        out = subprocess.run([self.ctx.client, self.ctx.bus_addr, *map(str, args)],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"alloc-client {' '.join(map(str, args))}: {out.stderr.strip()}")
        return dict(kv.split("=") for kv in out.stdout.split())

    def alloc_bench(self, r, p):
        res = self.client("rtt", "g000", self.rtt_k)
        self.rec(r, "alloc_p50", "slotd", int(res["pair_p50"]) / 1000.0)
        self.rec(r, "alloc_p99", "slotd", int(res["pair_p99"]) / 1000.0)
        res = self.client("load", "g000", self.load_s, 8)
        self.rec(r, "alloc_rate", "slotd", float(res["per_sec"]))
        log(f"run {r} slotd: Allocate+Deallocate p50 {self.records[-3][3]:.3f} ms, "
            f"8 clients {float(res['per_sec']):.0f}/s")

    # Scenario 2 at N = 1 and 1000 (and the cold start at both).
    def big(self, r):
        """--quick takes the N = 1000 measurements in its first run only."""
        return not self.quick or r == 1

    def phase_sizes(self, r, order):
        for n in (1, 1000) if self.big(r) else (1,):
            for peer in order:
                if n == 1000 and peer in self.skip_big:
                    continue
                p = self.new(peer, f"r{r}-{n}", [(n, "sleep")])
                try:
                    ms = self.cold_start(p, n, 60)
                    self.rec(r, f"cold_{n}", peer, ms)
                    self.rec(r, f"first_{n}", peer, p.first_ms)
                    time.sleep(1)
                    self.rec(r, f"pss_{n}", peer, pss_kib(p.sup_pids()))
                    log(f"run {r} {peer}: cold start of {n}: {ms:.1f} ms")
                    if peer == "slotd" and n == 1000:
                        res = self.client("list", self.list_k)
                        if int(res["slots"]) != n:
                            raise RuntimeError(f"ListSlots returned {res['slots']} slots")
                        self.rec(r, "list_1000", "slotd", int(res["p50"]) / 1000.0)
                except Skip as e:
                    self.skip_big.add(peer)
                    self.note(f"{e}: N = 1000 skipped for {peer}")
                finally:
                    p.stop()

    # Scenario 1b (issue 24): start-up alone, N = 1 then N = 200 for each peer: the first and
    # the last service's exec, and the memory 1 s later (base, and per service by derive()).
    def phase_start(self, r, order):
        for n in (1, 200):
            for peer in order:
                p = self.new(peer, f"r{r}-start{n}", [(n, "sleep")])
                try:
                    ms = self.cold_start(p, n, 120)
                    self.rec(r, f"cold_{n}", peer, ms)
                    self.rec(r, f"first_{n}", peer, p.first_ms)
                    time.sleep(1)
                    self.rec(r, f"pss_{n}", peer, pss_kib(p.sup_pids()))
                    if n == 1:
                        self.rec(r, "pss_own_1", peer, pss_own_kib(p.sup_pids(), self.ctx.cg_root))
                    if peer == "slotd":
                        self.rec(r, f"pss_{n}_alone", peer, pss_kib([p.proc.pid]))
                        self.rec(r, f"pss_{n}_proxy", peer, pss_kib(p.proxies()))
                    log(f"run {r} {peer}: N = {n}: first {p.first_ms:.1f} ms, all {ms:.1f} ms")
                finally:
                    p.stop()

    # Scenario 3: 20 services crashing after > 1 s, 20 after 0.2 s, 160 sleeping.
    def phase_restart(self, r, order):
        nl, ny, ns = 20, 20, 160
        for peer in order:
            if peer == "slotd":
                # slotd's args are per fleet: one fleet per delay, in the same order.
                groups = ([(1, f"crash {1200 + 37 * i}") for i in range(nl)] +
                          [(1, f"crash {200 + 7 * i}") for i in range(ny)] + [(ns, "sleep")])
                p = self.new(peer, f"r{r}-restart", groups)
            else:
                groups = [(nl, lambda i: f"crash {1200 + 37 * i}"),
                          (ny, lambda i: f"crash {200 + 7 * i}"), (ns, "sleep")]
                p = self.new(peer, f"r{r}-restart", groups)
            long_ids = [str(i) for i in range(nl)]
            young_ids = [str(i) for i in range(nl, nl + ny)]
            try:
                self.cold_start(p, nl + ny + ns, 120)
                deadline = time.monotonic() + 60
                while True:
                    p.stamps.poll()
                    a, b = p.stamps.restarts(long_ids), p.stamps.restarts(young_ids)
                    if len(a) >= self.samples and len(b) >= self.samples:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{peer}: only {len(a)}/{len(b)} restarts in 60 s")
                    if not p.alive():
                        raise RuntimeError(f"{peer} exited; its log ends:\n{p.log_tail()}")
                    time.sleep(0.05)
                for metric, v in (("long", a), ("young", b)):
                    self.rec(r, f"rs_{metric}_p50", peer, pct(v, 50))
                    self.rec(r, f"rs_{metric}_p99", peer, pct(v, 99))
                log(f"run {r} {peer}: restart p50 {pct(a, 50):.2f} ms (ran > 1 s), "
                    f"{pct(b, 50):.2f} ms (died at 0.2 s); {len(a)}+{len(b)} restarts")
            finally:
                p.stop()

    # Scenarios 4 (slotd with checks) and 6: slotd-test-server answering SQP.
    def phase_checks(self, r, order):
        if not self.big(r):
            return
        n = 1000
        # 1 s checks with SQP probes: idle CPU over the window.
        p = self.new("slotd", f"r{r}-chk1", [(n, None)], build=self.ctx.test_server,
                     checks=CHECKS_1S, usage_cpu="0.05")
        try:
            self.wait_up(p, n)
            time.sleep(2)  # the first round: one interval + up to a tenth of it
            pids = p.sup_pids()
            c0, w0 = cpu_ticks(pids), time.monotonic()
            time.sleep(self.idle_s)
            w = time.monotonic() - w0
            ms = (cpu_ticks(pids) - c0) * TICK_MS * 30.0 / w
            self.rec(r, "idle_chk_1000", "slotd", ms)
            fails = count_in(os.path.join(p.dir, "log"), "Check query failed")
            self.rec(r, "probe_fail_1s", "slotd", fails)
            ping = self.bus_ping(r, "ping_chk1")
            log(f"run {r} slotd: idle CPU with 1 s SQP checks at N = {n}: {ms:.0f} ms/30 s, "
                f"{fails} failed probes, a property read answered in {ping:.1f} ms")
        finally:
            p.stop()
        self.rec(r, "chk_per_check", "slotd", ms * 1000.0 / 30 / n)
        self.phase_floor(r, n)
        # 5 s checks: CPU and wall time of each sweep, sampling schedstat every ms.
        iv = 5.0
        p = self.new("slotd", f"r{r}-chk5", [(n, None)], build=self.ctx.test_server,
                     checks=CHECKS_5S, usage_cpu="0.05")
        try:
            self.wait_up(p, n)
            pid = p.proc.pid
            # Every slot has had its first check (one interval + a tenth after its start).
            time.sleep(iv * 1.1)
            samples = []  # (t, ns)
            t_end = time.monotonic() + iv * self.sweeps + 0.05
            while time.monotonic() < t_end:
                samples.append((time.monotonic(), sched_ns(pid)))
                time.sleep(0.001)
            res = sweeps(samples, iv)
            self.rec(r, "probe_fail_5s", "slotd", count_in(os.path.join(p.dir, "log"), "Check query failed"))
            self.bus_ping(r, "ping_chk5")
            for cpu, busy, longest in res:
                self.rec(r, "sweep_cpu", "slotd", cpu)
                self.rec(r, "sweep_per_check", "slotd", cpu * 1000.0 / n)
                self.rec(r, "sweep_busy", "slotd", busy)
                self.rec(r, "sweep_burst", "slotd", longest)
            log(f"run {r} slotd: check sweeps over {n} slots: CPU ms, busy ms, longest busy ms: "
                + "; ".join(f"{c:.1f} {b} {lg}" for c, b, lg in res))
        finally:
            p.stop()

    def phase_floor(self, r, n):
        """The kernel's price of one check without slotd (floor.c): what bounds scenario 4."""
        rounds = 3 if self.quick else 5
        out = subprocess.run([self.ctx.floor, os.path.join(self.ctx.cg_root, f"floor-r{r}"),
                              str(n), str(rounds)], capture_output=True, text=True,
                             timeout=120 + 6 * rounds)
        if out.returncode != 0:
            raise RuntimeError(f"floor: {out.stderr.strip()}")
        kv = dict(line.split(None, 1) for line in out.stdout.splitlines() if " " in line)
        for key in ("cpu_stat", "memory", "probe", "check", "check_warm"):
            self.rec(r, f"floor_{key}", "slotd", float(kv[f"floor_{key}_us"]))
        self.rec(r, "floor_syscall", "slotd", float(kv["syscall_us"]))
        src = f"floor: the memory read is {kv['memory_source']} (as slotd's on this host)"
        if src not in self.notes:
            self.note(src)
        if int(kv["lost_answers"]):
            self.note(f"run {r}: floor: {kv['lost_answers']} probes had no answer")
        log(f"run {r} floor (no slotd, N = {n}, memory from {kv['memory_source']}): per check "
            f"{kv['floor_check_us']} µs (warm {kv['floor_check_warm_us']}): cpu.stat "
            f"{kv['floor_cpu_stat_us']}, memory {kv['floor_memory_us']}, probe {kv['floor_probe_us']}")

    def wait_up(self, p, n):
        """Starts P and waits until each of its N slots holds a keeper and a server (no D-Bus:
        with checks on, slotd may be too busy to answer)."""
        p.start()
        deadline = time.monotonic() + 120
        while True:
            time.sleep(0.2)
            if not p.alive():
                raise RuntimeError(f"slotd exited; its log ends:\n{p.log_tail()}")
            up = sum(1 for fleet, base, count in p.fleets for sid in range(base, base + count)
                     if len(cgroup_pids(os.path.join(p.slot_cg, fleet, f"slot-{sid}"))) >= 2)
            if up >= n:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"slotd: {up} of {n} servers up after 120 s")

    def bus_ping(self, r, metric, timeout=10):
        """How long slotd takes to answer one property read: is it still responsive?"""
        res = self.client("ping", timeout)
        ms = int(res["usec"]) / 1000.0
        self.rec(r, metric, "slotd", ms)
        if "timeout" in res:
            self.note(f"run {r}: slotd did not answer a D-Bus property read within {timeout} s "
                      f"during {metric} (recorded as {timeout * 1000} ms)")
        return ms

    # ---- report ----

    def run_all(self):
        started = time.monotonic()
        for r in range(1, self.runs + 1):
            order = list(PEERS[(r - 1) % 4:] + PEERS[: (r - 1) % 4])
            log(f"==== run {r} of {self.runs} (order {' '.join(p for p in order if p in self.peers)})")
            order = [p for p in order if p in self.peers]
            for name, phase in (("start", self.phase_start), ("200", self.phase_200),
                                ("sizes", self.phase_sizes),
                                ("restart", self.phase_restart), ("checks", self.phase_checks)):
                if name not in self.only:
                    continue
                phase(r, order)
            log(f"run {r} done, {time.monotonic() - started:.0f} s so far")
        self.derive()
        return time.monotonic() - started

    def derive(self):
        by = collections.defaultdict(dict)
        for r, m, peer, v in self.records:
            if m in ("pss_1", "pss_200", "pss_1000"):
                by[(r, peer)][m] = v
        for (r, peer), d in sorted(by.items()):
            if "pss_1" in d:
                self.rec(r, "pss_base", peer, d["pss_1"])
                for n in (200, 1000):
                    if f"pss_{n}" in d:
                        self.rec(r, f"pss_per_{n}", peer, (d[f"pss_{n}"] - d["pss_1"]) / (n - 1))


def count_in(path, word):
    try:
        with open(path, errors="replace") as f:
            return sum(1 for line in f if word in line)
    except OSError:
        return 0


def sweeps(samples, iv):
    """Splits 1 ms samples (t, CPU ns of slotd) into windows of IV seconds (one check of every
    slot each). Per window: CPU ms, the number of samples in which slotd ran, and the longest
    stretch of consecutive such samples (ms)."""
    out = []
    if not samples:
        return out
    t_first, k = samples[0][0], 0
    while True:
        lo, hi = t_first + k * iv, t_first + (k + 1) * iv
        win = [s for s in samples if lo <= s[0] < hi]
        if not win or win[-1][0] < hi - 0.1:
            break
        busy, longest, run = 0, 0, 0
        for a, b in zip(win, win[1:]):
            if b[1] > a[1]:
                busy += 1
                run += 1
                longest = max(longest, run)
            else:
                run = 0
        out.append(((win[-1][1] - win[0][1]) / 1e6, busy, longest))
        k += 1
    return out


def pct(values, p):
    v = sorted(values)
    k = max(1, min(len(v), int(p / 100.0 * len(v) + 0.999999)))
    return v[k - 1]


# Rows of the table: metric, label, unit, format.
ROWS = [
    ("cold_1", "cold start, N=1", "ms", "{:.1f}"),
    ("cold_200", "cold start, N=200", "ms", "{:.1f}"),
    ("cold_1000", "cold start, N=1000", "ms", "{:.1f}"),
    ("first_1", "first service's exec, N=1", "ms", "{:.1f}"),
    ("first_200", "first service's exec, N=200", "ms", "{:.1f}"),
    ("first_1000", "first service's exec, N=1000", "ms", "{:.1f}"),
    ("pss_base", "memory (PSS) base, N=1", "KiB", "{:.0f}"),
    ("pss_own_1", "memory base, N=1, PSS among the run's processes only", "KiB", "{:.0f}"),
    ("pss_200", "memory (PSS) at N=200", "KiB", "{:.0f}"),
    ("pss_1000", "memory (PSS) at N=1000", "KiB", "{:.0f}"),
    ("pss_per_200", "memory per service, N=200", "KiB", "{:.1f}"),
    ("pss_per_1000", "memory per service, N=1000", "KiB", "{:.1f}"),
    ("rs_long_p50", "restart latency p50, ran >1 s", "ms", "{:.2f}"),
    ("rs_long_p99", "restart latency p99, ran >1 s", "ms", "{:.2f}"),
    ("rs_young_p50", "restart latency p50, died at 0.2 s", "ms", "{:.2f}"),
    ("rs_young_p99", "restart latency p99, died at 0.2 s", "ms", "{:.2f}"),
    ("idle_200", "idle CPU, N=200 (checks off)", "ms/30s", "{:.0f}"),
    ("idle_chk_1000", "idle CPU, N=1000, 1 s SQP checks", "ms/30s", "{:.0f}"),
    ("chk_per_check", "  the same, per slot check", "µs", "{:.1f}"),
    ("floor_check", "  floor: one check's kernel work alone (floor.c)", "µs", "{:.1f}"),
    ("floor_check_warm", "  floor, repeated at once (warm)", "µs", "{:.1f}"),
    ("floor_cpu_stat", "  floor: cpu.stat read", "µs", "{:.1f}"),
    ("floor_memory", "  floor: memory read", "µs", "{:.1f}"),
    ("floor_probe", "  floor: probe out, answer in", "µs", "{:.1f}"),
    ("floor_syscall", "  a bare system call (getppid) here", "µs", "{:.2f}"),
    ("alloc_p50", "Allocate+Deallocate p50", "ms", "{:.3f}"),
    ("alloc_p99", "Allocate+Deallocate p99", "ms", "{:.3f}"),
    ("alloc_rate", "Allocate+Deallocate, 8 clients", "pairs/s", "{:.0f}"),
    ("list_1000", "ListSlots p50, 1000 slots", "ms", "{:.2f}"),
    ("sweep_cpu", "check sweep, 1000 slots: CPU", "ms", "{:.1f}"),
    ("sweep_per_check", "check sweep: CPU per slot check", "µs", "{:.1f}"),
    ("sweep_busy", "check sweep: wall ms with slotd running", "ms", "{:.0f}"),
    ("sweep_burst", "check sweep: longest busy stretch", "ms", "{:.0f}"),
    ("ping_chk1", "D-Bus property read, N=1000, 1 s checks", "ms", "{:.1f}"),
    ("ping_chk5", "D-Bus property read, N=1000, 5 s checks", "ms", "{:.1f}"),
    ("probe_fail_1s", "failed SQP probes, N=1000, 1 s checks (whole run)", "count", "{:.0f}"),
    ("probe_fail_5s", "failed SQP probes, N=1000, 5 s checks (whole run)", "count", "{:.0f}"),
    ("pss_1_alone", "slotd process alone (no keepers, no proxy), N=1", "KiB", "{:.0f}"),
    ("pss_1_proxy", "slotd-proxy alone, N=1", "KiB", "{:.0f}"),
    ("pss_200_alone", "slotd process alone (no keepers, no proxy), N=200", "KiB", "{:.0f}"),
    ("pss_200_proxy", "slotd-proxy alone, N=200", "KiB", "{:.0f}"),
    ("pss_bus", "slotd's dbus-daemon, N=200 (not counted)", "KiB", "{:.0f}"),
]


def summarise(records):
    """metric -> peer -> (median, [values]); metric -> other -> median of per-run ratios."""
    vals = collections.defaultdict(lambda: collections.defaultdict(list))
    per_run = collections.defaultdict(dict)
    for r, m, peer, v in records:
        vals[m][peer].append(v)
        per_run[(m, r)].setdefault(peer, []).append(v)
    med = {m: {peer: statistics.median(v) for peer, v in d.items()} for m, d in vals.items()}
    ratios = collections.defaultdict(dict)
    for m in vals:
        for other in OTHERS:
            rs = []
            for (mm, r), d in per_run.items():
                if mm == m and "slotd" in d and other in d:
                    a, b = statistics.median(d["slotd"]), statistics.median(d[other])
                    if b > 0:
                        rs.append(a / b)
            if rs:
                ratios[m][other] = statistics.median(rs)
    return med, ratios, vals


def fmt_ratio(x):
    if x is None:
        return "–"
    if x >= 100 or x == 0:
        return f"{x:.0f}×" if x else "0"
    if x >= 0.1:
        return f"{x:.2f}×"
    return f"{x:.3f}×"


def table(med, ratios, md=False):
    head = ["metric", "unit", *PEERS, *(f"slotd/{o}" for o in OTHERS)]
    rows = []
    for m, label, unit, f in ROWS:
        if m not in med:
            continue
        cells = [label, unit]
        for peer in PEERS:
            v = med[m].get(peer)
            cells.append(f.format(v) if v is not None else "–")
        for o in OTHERS:
            cells.append(fmt_ratio(ratios[m].get(o)) if o in ratios.get(m, {}) else "–")
        rows.append(cells)
    if md:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c) + " |" for c in rows]
        return "\n".join(out)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(c) for c in rows])


def write_tsv(path, med, ratios, vals):
    with open(path, "w") as f:
        f.write("metric\tunit\tpeer\tmedian\tslotd_ratio\truns\n")
        for m, label, unit, _ in ROWS:
            if m not in med:
                continue
            for peer in PEERS:
                if peer not in med[m]:
                    continue
                ratio = ratios.get(m, {}).get(peer, "")
                ratio = f"{ratio:.4g}" if ratio != "" else ""
                runs = ",".join(f"{v:.6g}" for v in vals[m][peer])
                f.write(f"{m}\t{unit}\t{peer}\t{med[m][peer]:.6g}\t{ratio}\t{runs}\n")


def plot(path, med):
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        f.write("# peer rs_long_p50 rs_young_p50 rs_long_p99 rs_young_p99 pss_per_200 pss_per_1000 "
                "pss_1_MiB pss_200_MiB pss_1000_MiB\n")
        for peer in PEERS:
            row = [med.get(m, {}).get(peer) for m in
                   ("rs_long_p50", "rs_young_p50", "rs_long_p99", "rs_young_p99", "pss_per_200",
                    "pss_per_1000")]
            row += [None if med.get(m, {}).get(peer) is None else med[m][peer] / 1024.0
                    for m in ("pss_1", "pss_200", "pss_1000")]
            f.write(peer + " " + " ".join("NaN" if v is None else f"{max(v, 1e-3):.6g}" for v in row) + "\n")
    if not any(med.get(m) for m in ("rs_long_p50", "pss_per_200")):
        return
    script = f"""
set terminal pngcairo size 1800,560 font ",11" noenhanced
set output '{path}'
set multiplot layout 1,3 title "slotd vs s6, runit, supervisord (median of runs; lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics mytics
set logscale y
set key top left
set title "crash -> restart latency (ms, log scale)"
set ylabel "ms"
plot '{dat}' using 2:xtic(1) title "p50, ran > 1 s", '' using 3 title "p50, died at 0.2 s", \\
     '' using 4 title "p99, ran > 1 s", '' using 5 title "p99, died at 0.2 s"
set title "supervisor memory per service (PSS KiB, log scale)"
set ylabel "KiB"
plot '{dat}' using 6:xtic(1) title "N = 200", '' using 7 title "N = 1000"
set title "supervisor memory in all (PSS MiB, log scale)"
set ylabel "MiB"
plot '{dat}' using 8:xtic(1) title "N = 1", '' using 9 title "N = 200", '' using 10 title "N = 1000"
unset multiplot
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"warning: gnuplot failed: {getattr(e, 'stderr', e)}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--cgroup", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--slotd", required=True)
    ap.add_argument("--test-server", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--command", default="tests/bench/run")
    ap.add_argument("--only", help="comma-separated phases (start,200,sizes,restart,checks; "
                    "default all but start)")
    ap.add_argument("--peers", help="comma-separated peers besides slotd (s6,runit,supervisord)")
    ap.add_argument("--runs", type=int, help="development: number of runs")
    args = ap.parse_args()

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_signal)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    ctx = Ctx(args)
    bench = Bench(ctx, args.quick)
    load0 = os.getloadavg()
    if load0[0] > 1.5:
        print(f"bench: WARNING: the machine is busy (load average {load0[0]:.1f}): the figures "
              "will be noisy; the load is written beside them", file=sys.stderr)
    if args.only:
        bench.only = set(args.only.split(","))
    if args.peers:
        bench.peers = {"slotd"} | set(args.peers.split(","))
    if args.runs:
        bench.runs = args.runs
    try:
        start_bus(ctx)
        elapsed = bench.run_all()
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        ctx.cleanup()
        return 130
    finally:
        ctx.cleanup()

    med, ratios, vals = summarise(bench.records)
    os.makedirs(args.results, exist_ok=True)
    write_tsv(os.path.join(args.results, "latest.tsv"), med, ratios, vals)
    with open(os.path.join(args.results, "runs.tsv"), "w") as f:
        f.write("run\tmetric\tpeer\tvalue\n")
        for r, m, peer, v in bench.records:
            f.write(f"{r}\t{m}\t{peer}\t{v:.6g}\n")
    plot(os.path.join(args.results, "latest.png"), med)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load1 = os.getloadavg()
    header = (f"{stamp}, `{args.command}`, {bench.runs} runs, {elapsed / 60:.1f} min; "
              f"Linux {platform.release()}, {os.cpu_count()} CPUs; load average "
              f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end; slotd {slotd_version(args)}")
    md = table(med, ratios, md=True)
    with open(os.path.join(args.results, "latest.md"), "w") as f:
        f.write(header + "\n\n" + md + "\n")
        for n in bench.notes:
            f.write(f"\n- {n}")
        f.write("\n")
    print()
    print(header)
    print("slotd/peer: the ratio of slotd's figure to the peer's in the same run (median over runs)")
    print()
    print(table(med, ratios))
    for n in bench.notes:
        print("note:", n)
    print(f"\nwritten: {args.results}/latest.tsv, runs.tsv, latest.md, latest.png")
    return 0


def slotd_version(args):
    try:
        top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        rev = subprocess.run(["git", "-C", top, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        return rev or "?"
    except OSError:
        return "?"


def start_bus(ctx):
    sock = os.path.join(ctx.run_dir, "bus")
    ctx.bus_addr = f"unix:path={sock}"
    conf = os.path.join(ctx.run_dir, "bus.conf")
    with open(conf, "w") as f:
        f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>{ctx.bus_addr}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
""")
    ctx.bus_proc = ctx.spawn(["dbus-daemon", f"--config-file={conf}", "--nofork", "--nosyslog"],
                             os.path.join(ctx.cg_root, "dbus"), os.path.join(ctx.run_dir, "dbus.log"))
    for _ in range(200):
        if os.path.exists(sock):
            return
        time.sleep(0.02)
    raise RuntimeError("the private dbus-daemon did not start")


if __name__ == "__main__":
    sys.exit(main())
