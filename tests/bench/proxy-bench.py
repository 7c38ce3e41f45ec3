#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The local proxy's benchmark (issue 13; tests/bench/README.md, "The local proxy").

Run through tests/bench/run-proxy, which installs wrk and nginx, builds slotd, slotd-proxy and
the helpers (ws-sub.c, proxy-alloc.c, http-load.c, tiny.c) and passes the private directories
below. The conventions are bench.py's (whose helpers this imports): every process started is
recorded (PID and start time) in RUN_DIR/pids and killed by PID; everything runs in cgroups
below CGROUP, killed and removed at the end, on an error and on Ctrl-C.

Per run: slotd with a fleet of 1000 tiny servers and the proxy on a free loopback port:
the proxy's PSS with no connection and with 1000 idle subscribed WebSockets; the event
latency at 1000 subscribed slots; the HTTP rate of the proxy and of nginx, served on CPU 0;
then slotd again with fleets of 100 and of 1 slot for the event latency there.
"""
import argparse
import collections
import datetime
import http.client
import os
import platform
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402

log = B.log
SERVER_CPU = 0   # slotd + slotd-proxy, or nginx, for the HTTP rate
CLIENT_CPU = 1   # wrk / http-load


def free_port():
    """A free TCP port of 127.0.0.1 (the kernel's pick: in the ephemeral range, far from the
    fleet's game and query ports at 20000-21999)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def threads(pid):
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def pin(pids, cpu):
    for pid in pids:
        for tid in threads(pid):
            try:
                os.sched_setaffinity(tid, {cpu})
            except OSError:
                pass


class ProxySlotd(B.Slotd):
    """slotd with one fleet of N tiny servers (always running: readiness = exec) and the
    local proxy on 127.0.0.1:PORT."""

    def prepare(self, n, port):
        etc = os.path.join(self.dir, "etc")
        os.makedirs(os.path.join(etc, "fleets.d"))
        self.slots_dir = os.path.join(self.dir, "slots")
        self.slot_cg = os.path.join(self.cg, "slots")
        self.ini = os.path.join(etc, "slotd.ini")
        self.port = port
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
listen = 127.0.0.1:{port}

[metrics]
; off, as when the recorded figures were measured (its default, 8087, adds a listener)
listen = off
""")
        with open(os.path.join(etc, "fleets.d", "g000.ini"), "w") as f:
            f.write(f"""[fleet]
build = {self.ctx.tiny}
args = {self.stamps.path} ${{SERVER_ID}} sleep
stop_timeout = 2s

[usage]
cpu = 0.001
memory = 1M
servers = {n}

[ports]
game_base = 20000
query_base = 21000

[checks]
interval = 0
readiness = exec

[crash]
restarts = 63
window = 1h
""")
        self.fleets = [("g000", 0, n)]
        self.sleepers = {"g000"}
        self.n = n

    def slot_cg_fmt(self):
        return os.path.join(self.slot_cg, "g000", "slot-%u")

    def proxy_pid(self):
        """The slotd-proxy child of slotd."""
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            comm, rest = st[st.index("(") + 1: st.rindex(")")], st[st.rindex(")") + 2:].split()
            if comm == "slotd-proxy" and int(rest[1]) == self.proc.pid:
                return int(d)
        return None


def private_kib(pid):
    """Private_Clean + Private_Dirty of PID (smaps_rollup): unlike PSS, not moved by other
    processes mapping the same libraries coming and going on a shared machine."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    except OSError:
        pass
    return total


def cpu_busy():
    """Per CPU: (busy, total) jiffies from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + v[4]
                out[int(line[3:line.index(" ")])] = (sum(v[:8]) - idle, sum(v[:8]))
    return out


def http_get(port, path, method="GET", body=None, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Pipe:
    """A helper with commands on stdin and one-line answers on stdout (ws-sub)."""

    def __init__(self, ctx, argv, cgroup, logfile):
        os.makedirs(cgroup, exist_ok=True)
        procs = os.path.join(cgroup, "cgroup.procs")

        def into_cgroup():
            with open(procs, "w") as f:
                f.write("0")
        err = open(logfile, "ab")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                  preexec_fn=into_cgroup, start_new_session=True, close_fds=True,
                                  text=True, bufsize=1)
        err.close()
        self.ctx = ctx
        ctx.procs[self.p.pid] = self.p
        with open(os.path.join(ctx.run_dir, "pids"), "a") as f:
            f.write(f"{self.p.pid} {B.starttime(self.p.pid)}\n")

    def line(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise RuntimeError(f"{self.p.args[0]}: no answer within {timeout} s")
        out = self.p.stdout.readline()
        if not out:
            raise RuntimeError(f"{self.p.args[0]} exited")
        return out.strip()

    def command(self, cmd, timeout=30):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.line(timeout)

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
        self.ctx.kill(self.p)


def kv(line):
    return dict(x.split("=", 1) for x in line.split() if "=" in x)


def pcts(values):
    if not values:
        return None
    return (B.pct(values, 50), B.pct(values, 99), max(values))


def parse_wrk(out):
    """wrk's report: requests, seconds, non-2xx, p50 and p99 (ms)."""
    def dur(s):
        m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
        v = float(m.group(1))
        return v / 1000.0 if m.group(2) == "us" else v * 1000.0 if m.group(2) == "s" else \
            v * 60000.0 if m.group(2) == "m" else v
    res = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", out)
    res["requests"] = int(m.group(1))
    res["seconds"] = float(m.group(2)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(3)]
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    res["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    res["errors"] = sum(int(x) for x in m.groups()) if m else 0
    for p in ("50", "99"):
        m = re.search(rf"^\s+{p}(?:\.000)?%\s+(\S+)", out, re.M)
        res[f"p{p}"] = dur(m.group(1)) if m else float("nan")
    return res


class ProxyBench:
    def __init__(self, ctx, args):
        self.ctx = ctx
        self.args = args
        self.quick = args.quick
        self.runs = args.runs or (1 if self.quick else 3)
        self.sizes = [int(x) for x in args.sizes.split(",")]
        self.k = args.allocations or (100 if self.quick else 300)
        self.gap_us = 5000
        self.http_s = int(args.http_seconds or (2 if self.quick else 5))  # wrk: whole seconds
        self.conns = [int(x) for x in args.conns.split(",")]
        self.rotate = 90
        self.only = set(args.only.split(",")) if args.only else None
        self.records = []  # (run, metric, value)
        self.notes = []
        self.bin = ctx.bin

    def rec(self, r, metric, value):
        if value is not None:
            self.records.append((r, metric, value))

    def note(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)
        log("note: " + msg)

    def foreground(self, argv, timeout):
        """Runs a client to its end in the bench's "clients" cgroup, its PID recorded (the run
        script's net kills it should this driver die); returns (rc, stdout, stderr)."""
        cg = os.path.join(self.ctx.cg_root, "clients")
        os.makedirs(cg, exist_ok=True)
        procs = os.path.join(cg, "cgroup.procs")

        def into_cgroup():
            with open(procs, "w") as f:
                f.write("0")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=into_cgroup,
                             start_new_session=True, close_fds=True)
        self.ctx.procs[p.pid] = p
        with open(os.path.join(self.ctx.run_dir, "pids"), "a") as f:
            f.write(f"{p.pid} {B.starttime(p.pid)}\n")
        try:
            out, err = p.communicate(timeout=timeout)
        finally:
            self.ctx.kill(p)
        return p.returncode, out, err

    def want(self, phase):
        return not self.only or phase in self.only

    # ---- slotd with the proxy ----

    def start_slotd(self, r, n):
        port = free_port()
        p = ProxySlotd(self.ctx, f"r{r}-{n}")
        p.prepare(n, port)
        p.start()
        deadline = time.monotonic() + 120
        while True:
            time.sleep(0.1)
            if not p.alive():
                raise RuntimeError(f"slotd exited; its log ends:\n{p.log_tail()}")
            up = sum(1 for sid in range(n)
                     if len(B.cgroup_pids(os.path.join(p.slot_cg, "g000", f"slot-{sid}"))) >= 2)
            if up >= n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"slotd: {up} of {n} servers up after 120 s")
        while True:
            try:
                st, body = http_get(port, "/v1/servers/0/hold")
                if st == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local proxy does not answer on port {port}")
            time.sleep(0.05)
        p.proxy = p.proxy_pid()
        if not p.proxy:
            raise RuntimeError("no slotd-proxy child of slotd")
        return p

    def subscribe(self, p, n, tag):
        home = os.path.join(self.ctx.cg_root, "clients")
        ws = Pipe(self.ctx, [os.path.join(self.bin, "ws-sub"), str(p.port), "0", str(n),
                             p.slot_cg_fmt(), home], home, os.path.join(p.dir, f"ws-sub-{tag}.log"))
        res = kv(ws.line(150))
        if int(res["subscribed"]) != n:
            ws.close()
            with open(os.path.join(p.dir, f"ws-sub-{tag}.log"), errors="replace") as f:
                tail = "".join(f.readlines()[-5:])
            raise RuntimeError(f"ws-sub: {res['subscribed']} of {n} subscribed:\n{tail}")
        return ws, int(res["usec"]) / 1000.0

    # ---- 1. event latency ----

    def latency(self, r, p, n, ws):
        rc, stdout, stderr = self.foreground(
            [os.path.join(self.bin, "proxy-alloc"), self.ctx.bus_addr, "g000", str(self.k),
             str(min(n, self.k)), str(self.gap_us)], 300)
        if rc != 0:
            raise RuntimeError(f"proxy-alloc: {stderr.strip()}")
        dump = os.path.join(p.dir, f"pubs-{n}")
        ans = ws.command(f"dump {dump}")
        if not ans.startswith("dumped"):
            raise RuntimeError(f"ws-sub: {ans}")
        calls = {"A": {}, "D": {}}
        sigs = collections.defaultdict(list)    # slot -> [(t, state)]
        props = collections.defaultdict(list)   # slot -> [(t, uuid)]
        for line in stdout.splitlines():
            f = line.split()
            if f[0] in "AD":
                calls[f[0]][f[1]] = (int(f[2]), int(f[3]), int(f[4]))
            elif f[0] == "S":
                sigs[int(f[2])].append((int(f[1]), f[3]))
            elif f[0] == "P":
                props[int(f[2])].append((int(f[1]), f[3]))
        pubs = {}
        with open(dump) as f:
            for line in f:
                t, slot, typ, alloc, off = line.split()
                pubs.setdefault((typ, alloc), int(t))
        ev = {"A": ([], [], [], [], []), "D": ([], [], [], [], [])}
        missing = collections.Counter()
        for kind, typ, state in (("A", "AllocateEventType", "allocated"),
                                 ("D", "DeallocateEventType", None)):
            for uuid, (slot, t_call, t_reply) in calls[kind].items():
                ev_reply, ev_call, sig_call, prop_call, rtt = ev[kind]
                rtt.append((t_reply - t_call) / 1000.0)
                t_ws = pubs.get((typ, uuid))
                if t_ws is None:
                    missing["event"] += 1
                else:
                    ev_reply.append((t_ws - t_reply) / 1000.0)
                    ev_call.append((t_ws - t_call) / 1000.0)
                ts = next((t for t, s in sigs[slot] if t >= t_call and
                           (s == state if state else s != "allocated")), None)
                if ts is None:
                    missing["SlotChanged"] += 1
                else:
                    sig_call.append((ts - t_call) / 1000.0)
                want = uuid if kind == "A" else "-"
                tp = next((t for t, u in props[slot] if t >= t_call and u == want), None)
                if tp is None:
                    missing["PropertiesChanged"] += 1
                else:
                    prop_call.append((tp - t_call) / 1000.0)
        for what, k in missing.items():
            self.note(f"run {r}, N = {n}: {k} allocations without a {what} heard")
        for kind, pre in (("A", ""), ("D", "d")):
            ev_reply, ev_call, sig_call, prop_call, rtt = ev[kind]
            for name, vals in (("ev", ev_reply), ("evc", ev_call), ("sig", sig_call),
                               ("prop", prop_call), ("rtt", rtt)):
                st = pcts(vals)
                if st:
                    for q, v in zip(("p50", "p99", "max"), st):
                        self.rec(r, f"{pre}{name}_{q}_{n}", v)
            if ev_call and sig_call:
                self.rec(r, f"{pre}ratio_p50_{n}", B.pct(ev_call, 50) / max(B.pct(sig_call, 50), 1e-3))
                self.rec(r, f"{pre}ratio_p99_{n}", B.pct(ev_call, 99) / max(B.pct(sig_call, 99), 1e-3))
        a = ev["A"]
        if a[0]:
            log(f"run {r} N = {n}: event after the reply p50 {B.pct(a[0], 50):.2f} ms p99 "
                f"{B.pct(a[0], 99):.2f} max {max(a[0]):.2f}; after the call p50 "
                f"{B.pct(a[1], 50):.2f}; SlotChanged after the call p50 "
                f"{B.pct(a[2], 50) if a[2] else float('nan'):.2f} p99 "
                f"{B.pct(a[2], 99) if a[2] else float('nan'):.2f} ({len(a[0])} events)")

    def late(self, r, p, n):
        """A subscriber that comes after the allocation: SPEC §11 has the proxy send it that
        allocation's event at once, right behind the subscribe reply. Time from the subscribe
        reply to that event, at each of N slots allocated beforehand (and left allocated)."""
        rc, _, stderr = self.foreground(
            [os.path.join(self.bin, "proxy-alloc"), self.ctx.bus_addr, "g000", str(n), str(n),
             "0", "keep"], 120)
        if rc != 0:
            raise RuntimeError(f"proxy-alloc keep: {stderr.strip()}")
        ws, _ = self.subscribe(p, n, f"late-{n}")
        try:
            time.sleep(0.5)
            pubs, subs = os.path.join(p.dir, f"late-pubs-{n}"), os.path.join(p.dir, f"late-subs-{n}")
            for cmd in (f"dump {pubs}", f"subs {subs}"):
                if not ws.command(cmd).startswith("dumped"):
                    raise RuntimeError(f"ws-sub: {cmd} failed")
        finally:
            ws.close()
        with open(subs) as f:
            t_sub = {int(line.split()[1]): int(line.split()[0]) for line in f}
        d = {}
        with open(pubs) as f:
            for line in f:
                t, slot, typ, alloc, off = line.split()
                if typ == "AllocateEventType":
                    d.setdefault(int(slot), (int(t) - t_sub[int(slot)]) / 1000.0)
        if len(d) < n:
            self.note(f"run {r}: {n - len(d)} of {n} late subscribers did not hear the allocation")
        st = pcts(list(d.values()))
        if st:
            for q, v in zip(("p50", "p99", "max"), st):
                self.rec(r, f"late_{q}_{n}", v)
            log(f"run {r} late subscribers, N = {n}: the allocation's event after the subscribe "
                f"reply p50 {st[0]:.2f} ms p99 {st[1]:.2f} max {st[2]:.2f}")

    # ---- 3. HTTP ----

    def cpu_of(self, pids):
        """CPU time of every thread of PIDS, in ms (schedstat: ns, not 10 ms ticks)."""
        ns = 0
        for pid in pids:
            for tid in threads(pid):
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        ns += int(f.read().split()[0])
                except OSError:
                    pass
        return ns / 1e6

    def run_client(self, argv, server_pids):
        """Runs a load client on CLIENT_CPU; returns its output and the servers' CPU %."""
        parts0 = [self.cpu_of([pid]) for pid in server_pids]
        c0, w0, b0 = self.cpu_of(server_pids), time.monotonic(), cpu_busy()
        rc, out, err = self.foreground(["taskset", "-c", str(CLIENT_CPU), *argv], self.http_s + 60)
        w = time.monotonic() - w0
        cpu = (self.cpu_of(server_pids) - c0) / (w * 1000.0) * 100.0
        self.parts = [(self.cpu_of([pid]) - a) / (w * 1000.0) * 100.0
                      for pid, a in zip(server_pids, parts0)]
        b1 = cpu_busy()
        self.busy = {c: 100.0 * (b1[c][0] - b0[c][0]) / max(1, b1[c][1] - b0[c][1])
                     for c in (SERVER_CPU, CLIENT_CPU) if c in b0 and c in b1}
        if rc != 0:
            raise RuntimeError(f"{argv[0]}: {err.strip() or out.strip()}")
        return out, cpu

    def rec_busy(self, r, tag, c):
        """How busy each CPU was in all (ours and anything else on the machine); for the proxy,
        its CPU and slotd's apart (server_pids is [slotd, proxy])."""
        if tag.startswith("proxy"):
            self.rec(r, f"http_{tag}_cpuslotd_{c}", self.parts[0])
            self.rec(r, f"http_{tag}_cpuproxy_{c}", self.parts[1])
        self.rec(r, f"http_{tag}_cpu0_{c}", self.busy.get(SERVER_CPU))
        self.rec(r, f"http_{tag}_cpu1_{c}", self.busy.get(CLIENT_CPU))

    def wrk(self, r, tag, port, path, c, server_pids):
        out, cpu = self.run_client(["wrk", "-t1", f"-c{c}", f"-d{self.http_s}s", "--latency",
                                    f"http://127.0.0.1:{port}{path}"], server_pids)
        res = parse_wrk(out)
        rps = res["requests"] / res["seconds"]
        ok = (res["requests"] - res["non2xx"]) / res["seconds"]
        self.rec(r, f"http_{tag}_rps_{c}", rps)
        self.rec(r, f"http_{tag}_ok_{c}", ok)
        self.rec(r, f"http_{tag}_p50_{c}", res["p50"])
        self.rec(r, f"http_{tag}_p99_{c}", res["p99"])
        self.rec(r, f"http_{tag}_cpu_{c}", cpu)
        self.rec(r, f"http_{tag}_eff_{c}", rps / max(cpu / 100.0, 1e-3))
        self.rec_busy(r, tag, c)
        if res["errors"]:
            self.note(f"run {r}: wrk {tag}, {c} connections: {res['errors']} socket errors")
        log(f"run {r} {tag} c={c}: {rps:.0f} answers/s, {ok:.0f} 2xx/s, p50 {res['p50']:.3f} ms, "
            f"p99 {res['p99']:.3f} ms, server CPU {cpu:.0f} %, CPU {SERVER_CPU} busy "
            f"{self.busy.get(SERVER_CPU, 0):.0f} %, CPU {CLIENT_CPU} {self.busy.get(CLIENT_CPU, 0):.0f} %")
        return rps

    def load(self, r, tag, port, path, c, server_pids, slots=None):
        argv = [os.path.join(self.bin, "http-load"), str(port), str(self.http_s), str(c), path]
        if slots:
            fmt, home, n = slots
            argv += [fmt, home, "0", str(n), str(self.rotate)]
        else:
            # The same client settings without slots: a new connection every ROTATE answers.
            argv += ["-", "-", "0", "1", str(self.rotate)]
        out, cpu = self.run_client(argv, server_pids)
        res = kv(out.strip())
        secs = float(res["seconds"])
        rps = float(res["rps"])
        self.rec(r, f"http_{tag}_rps_{c}", rps)
        self.rec(r, f"http_{tag}_ok_{c}", int(res["s2xx"]) / secs)
        self.rec(r, f"http_{tag}_p50_{c}", int(res["p50"]) / 1000.0)
        self.rec(r, f"http_{tag}_p99_{c}", int(res["p99"]) / 1000.0)
        self.rec(r, f"http_{tag}_cpu_{c}", cpu)
        self.rec(r, f"http_{tag}_ccpu_{c}", float(res["client_cpu_pct"]))
        self.rec(r, f"http_{tag}_eff_{c}", rps / max(cpu / 100.0, 1e-3))
        self.rec_busy(r, tag, c)
        if int(res["s429"]):
            self.note(f"run {r}: {tag}, {c} connections: {res['s429']} answers 429 in the window")
        if int(res["errors"]) or int(res["sother"]):
            self.note(f"run {r}: {tag}, {c} connections: {res['errors']} errors, "
                      f"{res['sother']} other statuses")
        log(f"run {r} {tag} c={c}: {rps:.0f} answers/s ({res['s2xx']} 2xx, {res['s429']} 429), "
            f"p50 {int(res['p50']) / 1000:.3f} ms p99 {int(res['p99']) / 1000:.3f} ms, server CPU "
            f"{cpu:.0f} %, client CPU {res['client_cpu_pct']} %, CPU {SERVER_CPU} busy "
            f"{self.busy.get(SERVER_CPU, 0):.0f} %, CPU {CLIENT_CPU} {self.busy.get(CLIENT_CPU, 0):.0f} %")
        return rps

    def start_nginx(self, r):
        d = os.path.join(self.ctx.run_dir, f"nginx-r{r}")
        www = os.path.join(d, "www")
        os.makedirs(www)
        for t in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(d, "tmp", t))
        body = '{"expiresAt":1732400000,"held":true}'
        assert len(body) == 36
        with open(os.path.join(www, "hold.json"), "w") as f:
            f.write(body)
        port = free_port()
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=64 inactive=1h;
    open_file_cache_valid 1h;
    keepalive_requests 100000000;
    keepalive_timeout 65;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            default_type application/json;
            root {www};
            try_files /hold.json =404;
        }}
    }}
}}
""")
        cg = os.path.join(self.ctx.cg_root, f"nginx-r{r}")
        proc = self.ctx.spawn(["taskset", "-c", str(SERVER_CPU), "nginx", "-p", d, "-e",
                               f"{d}/error.log", "-c", conf], cg, os.path.join(d, "log"))
        deadline = time.monotonic() + 10
        while True:
            try:
                st, b = http_get(port, "/v1/servers/0/hold")
                if st == 200 and len(b) == 36:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("nginx did not start: " + open(f"{d}/error.log").read()[-500:])
            time.sleep(0.05)
        return proc, cg, port

    def phase_http(self, r, p):
        # A held slot 0: its GET /hold answers the 36 bytes nginx serves.
        st, b = http_get(p.port, "/v1/servers/0/hold", "POST", b'{"timeout":"1h"}')
        if st != 200:
            raise RuntimeError(f"POST /v1/servers/0/hold: {st} {b!r}")
        time.sleep(2.1)  # the host's token bucket full again (50/s, 100 deep)
        st, b = http_get(p.port, "/v1/servers/0/hold")
        self.rec(r, "http_body_proxy", len(b))
        servers = [p.proc.pid, p.proxy]
        pin(servers, SERVER_CPU)
        nginx, ncg, nport = self.start_nginx(r)
        npids = B.cgroup_pids(ncg)
        home = os.path.join(self.ctx.cg_root, "clients")
        slots = (p.slot_cg_fmt(), home, p.n)
        try:
            order = ["proxy", "nginx"] if r % 2 else ["nginx", "proxy"]
            for c in self.conns:
                for who in order:
                    if who == "proxy":
                        time.sleep(2.1)  # refill the host's bucket between two windows
                        self.wrk(r, "proxy_host", p.port, "/v1/servers/0/hold", c, servers)
                        self.load(r, "proxy_slots", p.port, "/v1/servers/%u/hold", c, servers, slots)
                    else:
                        self.wrk(r, "nginx_wrk", nport, "/v1/servers/0/hold", c, npids)
                        self.load(r, "nginx_load", nport, "/v1/servers/%u/hold", c, npids)
        finally:
            self.ctx.kill(nginx)
            B.kill_cgroup_tree(ncg)
        for c in self.conns:
            d = {m: v for rr, m, v in self.records if rr == r}
            for a, b_ in (("proxy_host", "nginx_wrk"), ("proxy_slots", "nginx_load")):
                if f"http_{a}_rps_{c}" in d and d.get(f"http_{b_}_rps_{c}"):
                    self.rec(r, f"http_ratio_{a}_{c}", d[f"http_{a}_rps_{c}"] / d[f"http_{b_}_rps_{c}"])
                if f"http_{a}_eff_{c}" in d and d.get(f"http_{b_}_eff_{c}"):
                    self.rec(r, f"http_effratio_{a}_{c}", d[f"http_{a}_eff_{c}"] / d[f"http_{b_}_eff_{c}"])

    # ---- a run ----

    def run_one(self, r):
        big = max(self.sizes)
        p = self.start_slotd(r, big)
        try:
            time.sleep(1)
            if self.want("memory") or self.want("latency"):
                pss0 = B.pss_kib([p.proxy])
                priv0 = private_kib(p.proxy)
                spss0 = B.pss_kib([p.proc.pid])
                ws, setup_ms = self.subscribe(p, big, "all")
                try:
                    time.sleep(1)
                    pss1 = B.pss_kib([p.proxy])
                    priv1 = private_kib(p.proxy)
                    spss1 = B.pss_kib([p.proc.pid])
                    self.rec(r, "pss_proxy_0", pss0)
                    self.rec(r, f"pss_proxy_{big}", pss1)
                    self.rec(r, "pss_proxy_per_conn", (pss1 - pss0) / big)
                    self.rec(r, "priv_proxy_per_conn", (priv1 - priv0) / big)
                    self.rec(r, "pss_slotd_per_conn", (spss1 - spss0) / big)
                    self.rec(r, "ws_setup", setup_ms)
                    log(f"run {r}: proxy PSS {pss0} KiB with no connection, {pss1} KiB with {big} "
                        f"subscribed WebSockets ({(pss1 - pss0) / big:.1f} KiB each; slotd "
                        f"{(spss1 - spss0) / big:+.2f} KiB each); {big} subscribed in {setup_ms:.0f} ms")
                    if self.want("latency") and big in self.sizes:
                        self.latency(r, p, big, ws)
                        if self.args.profile:
                            self.profile(r, p, big, ws)
                finally:
                    ws.close()
                time.sleep(1)
                self.rec(r, "pss_proxy_closed", B.pss_kib([p.proxy]))
                self.rec(r, "priv_proxy_closed_per_conn", (private_kib(p.proxy) - priv0) / big)
            if self.want("http"):
                self.phase_http(r, p)
        finally:
            p.stop()
        if self.want("latency"):
            for n in sorted(self.sizes):
                if n == big:
                    continue
                p = self.start_slotd(r, n)
                try:
                    ws, _ = self.subscribe(p, n, str(n))
                    try:
                        self.latency(r, p, n, ws)
                    finally:
                        ws.close()
                    if n > 1 and n == max(x for x in self.sizes if x != big):
                        self.late(r, p, n)
                finally:
                    p.stop()

    def profile(self, r, p, n, ws):
        """perf record of slotd and the proxy during one more round of allocations."""
        data = os.path.join(self.args.results, f"proxy-perf-r{r}.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-g", "-o", data, "-p",
                                 f"{p.proc.pid},{p.proxy}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self.ctx.procs[perf.pid] = perf
        with open(os.path.join(self.ctx.run_dir, "pids"), "a") as f:
            f.write(f"{perf.pid} {B.starttime(perf.pid)}\n")
        try:
            time.sleep(0.5)
            self.latency(r + 1000, p, n, ws)
        finally:
            self.ctx.kill(perf, signal.SIGINT, timeout=30)
        log(f"perf data: {data}")

    def run_all(self):
        started = time.monotonic()
        for r in range(1, self.runs + 1):
            log(f"==== run {r} of {self.runs}")
            self.run_one(r)
            log(f"run {r} done, {time.monotonic() - started:.0f} s so far")
        return time.monotonic() - started


# ---- the report ----

def rows(sizes, conns, big):
    out = []
    for n in sorted(sizes):
        out += [
            (f"ev_p50_{n}", f"event latency p50, {n} subscribed (WebSocket push − Allocate reply)", "ms", "{:.2f}"),
            (f"ev_p99_{n}", f"event latency p99, {n} subscribed", "ms", "{:.2f}"),
            (f"ev_max_{n}", f"event latency max, {n} subscribed", "ms", "{:.2f}"),
            (f"evc_p50_{n}", f"  event after the Allocate call was sent, p50", "ms", "{:.2f}"),
            (f"evc_p99_{n}", f"  event after the Allocate call was sent, p99", "ms", "{:.2f}"),
            (f"sig_p50_{n}", f"  peer: SlotChanged after the Allocate call was sent, p50", "ms", "{:.2f}"),
            (f"sig_p99_{n}", f"  peer: SlotChanged after the Allocate call was sent, p99", "ms", "{:.2f}"),
            (f"prop_p50_{n}", f"  peer: PropertiesChanged(AllocationUUID) after the call, p50", "ms", "{:.2f}"),
            (f"ratio_p50_{n}", f"  event / SlotChanged, both from the call, p50", "×", "{:.2f}"),
            (f"ratio_p99_{n}", f"  event / SlotChanged, both from the call, p99", "×", "{:.2f}"),
            (f"rtt_p50_{n}", f"  Allocate call → reply, p50", "ms", "{:.2f}"),
            (f"dev_p50_{n}", f"  Deallocate event − its reply, p50", "ms", "{:.2f}"),
            (f"dev_p99_{n}", f"  Deallocate event − its reply, p99", "ms", "{:.2f}"),
        ]
    mid = max([x for x in sizes if x != big and x > 1], default=None)
    if mid:
        out += [
            (f"late_p50_{mid}", f"late subscriber ({mid} slots allocated first): its allocation's event after the subscribe reply, p50", "ms", "{:.2f}"),
            (f"late_p99_{mid}", f"  the same, p99", "ms", "{:.2f}"),
            (f"late_max_{mid}", f"  the same, max", "ms", "{:.2f}"),
        ]
    out += [
        ("pss_proxy_0", "proxy PSS, no connection", "KiB", "{:.0f}"),
        (f"pss_proxy_{big}", f"proxy PSS, {big} idle subscribed WebSockets", "KiB", "{:.0f}"),
        ("pss_proxy_per_conn", "proxy memory per subscribed WebSocket", "KiB", "{:.1f}"),
        ("priv_proxy_per_conn", "  the same in private memory (Private_Clean + Private_Dirty)", "KiB", "{:.1f}"),
        ("pss_slotd_per_conn", "  slotd's memory per proxy connection (PSS)", "KiB", "{:.2f}"),
        ("pss_proxy_closed", "  proxy PSS after they closed", "KiB", "{:.0f}"),
        ("priv_proxy_closed_per_conn", "  private memory kept after they closed, per connection", "KiB", "{:.1f}"),
        ("ws_setup", f"  time to open and subscribe {big} WebSockets", "ms", "{:.0f}"),
    ]
    for c in conns:
        out += [
            (f"http_proxy_host_rps_{c}", f"HTTP GET /hold, {c} conn, host root (wrk): all answers", "req/s", "{:.0f}"),
            (f"http_proxy_host_ok_{c}", f"  of which 200 (the host's bucket: 50/s, 100 deep)", "req/s", "{:.0f}"),
            (f"http_proxy_host_p99_{c}", f"  latency p99 (wrk)", "ms", "{:.3f}"),
            (f"http_proxy_host_cpu_{c}", f"  slotd + proxy CPU", "%", "{:.0f}"),
            (f"http_proxy_host_cpuproxy_{c}", f"    of which slotd-proxy", "%", "{:.0f}"),
            (f"http_proxy_host_cpuslotd_{c}", f"    of which slotd", "%", "{:.0f}"),
            (f"http_proxy_host_eff_{c}", f"  answers per CPU-second of slotd + proxy", "req/CPU-s", "{:.0f}"),
            (f"http_proxy_host_cpu0_{c}", f"  CPU {SERVER_CPU} busy in all (the server's, anything else's)", "%", "{:.0f}"),
            (f"http_nginx_wrk_rps_{c}", f"  peer: nginx, static 36 bytes (wrk)", "req/s", "{:.0f}"),
            (f"http_nginx_wrk_cpu_{c}", f"  peer: nginx CPU", "%", "{:.0f}"),
            (f"http_nginx_wrk_eff_{c}", f"  peer: answers per CPU-second of nginx", "req/CPU-s", "{:.0f}"),
            (f"http_nginx_wrk_cpu0_{c}", f"  peer: CPU {SERVER_CPU} busy in all", "%", "{:.0f}"),
            (f"http_ratio_proxy_host_{c}", f"  proxy / nginx (wrk), requests/s", "×", "{:.3f}"),
            (f"http_effratio_proxy_host_{c}", f"  proxy / nginx (wrk), per CPU-second", "×", "{:.3f}"),
            (f"http_proxy_slots_rps_{c}", f"HTTP GET /hold, {c} conn, in slots (http-load): all answers", "req/s", "{:.0f}"),
            (f"http_proxy_slots_ok_{c}", f"  of which 200", "req/s", "{:.0f}"),
            (f"http_proxy_slots_p50_{c}", f"  latency p50", "ms", "{:.3f}"),
            (f"http_proxy_slots_p99_{c}", f"  latency p99", "ms", "{:.3f}"),
            (f"http_proxy_slots_cpu_{c}", f"  slotd + proxy CPU", "%", "{:.0f}"),
            (f"http_proxy_slots_cpuproxy_{c}", f"    of which slotd-proxy", "%", "{:.0f}"),
            (f"http_proxy_slots_cpuslotd_{c}", f"    of which slotd", "%", "{:.0f}"),
            (f"http_proxy_slots_eff_{c}", f"  answers per CPU-second of slotd + proxy", "req/CPU-s", "{:.0f}"),
            (f"http_proxy_slots_ccpu_{c}", f"  client CPU", "%", "{:.0f}"),
            (f"http_proxy_slots_cpu0_{c}", f"  CPU {SERVER_CPU} busy in all", "%", "{:.0f}"),
            (f"http_proxy_slots_cpu1_{c}", f"  CPU {CLIENT_CPU} busy in all", "%", "{:.0f}"),
            (f"http_nginx_load_rps_{c}", f"  peer: nginx, same client and settings", "req/s", "{:.0f}"),
            (f"http_nginx_load_cpu_{c}", f"  peer: nginx CPU", "%", "{:.0f}"),
            (f"http_nginx_load_eff_{c}", f"  peer: answers per CPU-second of nginx", "req/CPU-s", "{:.0f}"),
            (f"http_nginx_load_ccpu_{c}", f"  peer: client CPU", "%", "{:.0f}"),
            (f"http_nginx_load_cpu0_{c}", f"  peer: CPU {SERVER_CPU} busy in all", "%", "{:.0f}"),
            (f"http_ratio_proxy_slots_{c}", f"  proxy / nginx (http-load), requests/s", "×", "{:.3f}"),
            (f"http_effratio_proxy_slots_{c}", f"  proxy / nginx (http-load), per CPU-second", "×", "{:.3f}"),
        ]
    return out


def report(records, sizes, conns, big):
    vals = collections.defaultdict(list)
    for r, m, v in records:
        if r < 1000:  # the profiled round is not a run
            vals[m].append(v)
    lines = ["| metric | unit | median | runs |", "|---|---|---|---|"]
    for m, label, unit, f in rows(sizes, conns, big):
        if m not in vals:
            continue
        med = statistics.median(vals[m])
        lines.append(f"| {label} | {unit} | {f.format(med)} | {', '.join(f.format(v) for v in vals[m])} |")
    return "\n".join(lines), vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--cgroup", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--slotd", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--command", default="tests/bench/run-proxy")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--sizes", default="1,100,1000", help="subscribed slots of the latency runs")
    ap.add_argument("--conns", default="1,16,64", help="HTTP connection counts")
    ap.add_argument("--allocations", type=int, help="allocations per size (300)")
    ap.add_argument("--http-seconds", type=int, help="each HTTP window, whole seconds (5)")
    ap.add_argument("--only", help="development: latency,memory,http")
    ap.add_argument("--profile", action="store_true", help="perf record one more round at the largest size")
    args = ap.parse_args()
    args.test_server = None

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    ctx = B.Ctx(args)
    bench = ProxyBench(ctx, args)
    load0 = os.getloadavg()
    if load0[0] > 1.5:
        print(f"proxy-bench: WARNING: the machine is busy (load average {load0[0]:.1f}): the "
              "figures will be noisy; the load is written beside them", file=sys.stderr)
    try:
        B.start_bus(ctx)
        elapsed = bench.run_all()
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        ctx.cleanup()
        return 130
    finally:
        ctx.cleanup()

    big = max(bench.sizes)
    md, vals = report(bench.records, bench.sizes, bench.conns, big)
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "proxy-runs.tsv"), "w") as f:
        f.write("run\tmetric\tvalue\n")
        for r, m, v in bench.records:
            f.write(f"{r}\t{m}\t{v:.6g}\n")
    with open(os.path.join(args.results, "proxy-latest.tsv"), "w") as f:
        f.write("metric\tunit\tmedian\truns\n")
        for m, label, unit, _ in rows(bench.sizes, bench.conns, big):
            if m in vals:
                f.write(f"{m}\t{unit}\t{statistics.median(vals[m]):.6g}\t"
                        f"{','.join(f'{v:.6g}' for v in vals[m])}\n")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load1 = os.getloadavg()
    header = (f"{stamp}, `{args.command}`, {bench.runs} runs, {elapsed / 60:.1f} min; Linux "
              f"{platform.release()}, {os.cpu_count()} CPUs; load average {load0[0]:.1f} at the "
              f"start, {load1[0]:.1f} at the end; slotd {B.slotd_version(args)}; {bench.k} "
              f"allocations per size, {bench.gap_us / 1000:.0f} ms apart; HTTP windows of "
              f"{bench.http_s:g} s, server on CPU {SERVER_CPU}, client on CPU {CLIENT_CPU}")
    with open(os.path.join(args.results, "proxy-latest.md"), "w") as f:
        f.write("# The local proxy's benchmark: latest figures\n\n" + header + "\n\n" + md + "\n")
        for n in bench.notes:
            f.write(f"\n- {n}")
        f.write("\n")
    print()
    print(header)
    print()
    print(md)
    for n in bench.notes:
        print("note:", n)
    print(f"\nwritten: {args.results}/proxy-latest.md, proxy-latest.tsv, proxy-runs.tsv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
