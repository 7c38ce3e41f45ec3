#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""first-exec.py RUNS N LABEL=BUILD_DIR [LABEL=BUILD_DIR ...]

The time from slotd's own execve to its first server's (issue 24): for each run and each
build (in an order alternating from run to run), a fresh slotd with one fleet of N slots
(the settings of tests/bench/bench.py's slotd: tiny as the build, state and slots on tmpfs,
a private dbus-daemon, a private cgroup subtree); stampexec writes CLOCK_MONOTONIC just
before it execs slotd, tiny its own first exec; the driver's fork, exec and cgroup move are
not counted. Prints each run, then the minimum, median and maximum per build: on a shared,
loaded machine the minimum is the robust figure. As root; everything it starts is killed and
removed. PREFIX="strace -f -ttt -o FILE" runs slotd under a tool; KEEP=PATH keeps each log.
"""
import os, sys, time, signal, socket, subprocess, statistics, shutil, tempfile

SRC = os.path.dirname(os.path.abspath(__file__))
if len(sys.argv) < 4:
    sys.exit(__doc__)
runs, n = int(sys.argv[1]), int(sys.argv[2])
bins = [a.split("=", 1) for a in sys.argv[3:]]
PREFIX = os.environ.get("PREFIX", "").split()
KEEP = os.environ.get("KEEP")
CGM = next(l.split()[4] for l in open("/proc/self/mountinfo") if l.split(" - ")[1].startswith("cgroup2 "))
root = tempfile.mkdtemp(prefix="slotd-first-exec.", dir="/dev/shm")
os.chmod(root, 0o755)
HERE = f"{root}/bin"
cg = f"{CGM}/slotd-first-exec-{os.getpid()}"
procs = []

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

def free_port():
    """A loopback port free now for the local proxy: another slotd may hold the default 8086."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def spawn(argv, group, log, env=None):
    os.makedirs(group, exist_ok=True)
    def pre():
        with open(f"{group}/cgroup.procs", "w") as f: f.write("0")
    out = open(log, "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                         preexec_fn=pre, start_new_session=True, close_fds=True)
    out.close(); procs.append(p); return p

try:
    os.makedirs(HERE)
    for prog in ("stampexec", "tiny"):
        subprocess.run(["cc", "-std=gnu11", "-O2", "-o", f"{HERE}/{prog}", f"{SRC}/{prog}.c"], check=True)
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
    for r in range(runs):
        order = bins if r % 2 == 0 else bins[::-1]
        for lab, bdir in order:
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

[metrics]
; off, as when the recorded figures were measured (its default, 8087, adds a listener)
listen = off
""")
            with open(f"{d}/etc/fleets.d/g000.ini", "w") as f:
                f.write(f"""[fleet]
build = {HERE}/tiny
args = {d}/stamps ${{SERVER_ID}} sleep
stop_timeout = 2s

[usage]
cpu = 0.001
memory = 1M
servers = {n}

[ports]
game_base = 20000
query_base = 40000

[checks]
interval = 0

[crash]
restarts = 63
window = 1h
""")
            stamps = f"{d}/stamps"
            open(stamps, "w").close(); os.chmod(stamps, 0o666); os.chmod(d, 0o755)
            env = {k: v for k, v in os.environ.items() if k != "SLOTD_LOG_LEVEL"}
            p = spawn(PREFIX + [f"{HERE}/stampexec", stamps, f"{bdir}/slotd", "--config", f"{d}/etc/slotd.ini"],
                      f"{scg}/daemon", f"{d}/log", env)
            t0 = None; first = None; deadline = time.monotonic() + 30
            while first is None:
                try:
                    with open(stamps) as f:
                        for line in f:
                            w = line.split()
                            if len(w) == 3 and w[1] == "exec":
                                if w[0] == "slotd": t0 = int(w[2])
                                elif first is None: first = int(w[2])
                except FileNotFoundError: pass
                if p.poll() is not None: raise RuntimeError(f"{lab} exited: " + open(f"{d}/log").read()[-2000:])
                if time.monotonic() > deadline: raise RuntimeError(f"{lab}: timeout")
                time.sleep(0.001)
            res[lab].append((first - t0) / 1000.0)
            if KEEP:
                shutil.copy(f"{d}/log", f"{KEEP}.{lab}.{r}.log")
                with open(f"{KEEP}.{lab}.{r}.log", "a") as f:
                    f.write(f"T slotd-exec {t0}\nT first-exec {first}\n")
            p.send_signal(signal.SIGTERM)
            try: p.wait(10)
            except subprocess.TimeoutExpired: p.kill(); p.wait()
            kill_tree(scg)
            shutil.rmtree(d, ignore_errors=True)
        print(f"run {r}: " + ", ".join(f"{lab} {res[lab][-1]:.2f}" for lab, _ in bins), flush=True)
    print(f"N = {n}, {runs} runs each, load {os.getloadavg()[0]:.1f}")
    print("| binary | min ms | median ms | max ms |")
    print("|---|---|---|---|")
    for lab, _ in bins:
        v = res[lab]
        print(f"| {lab} | {min(v):.2f} | {statistics.median(v):.2f} | {max(v):.2f} |")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill(); p.wait()
    kill_tree(cg)
    shutil.rmtree(root, ignore_errors=True)
