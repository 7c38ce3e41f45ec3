#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The driver of test-soak.sh (which sets up the bus, the config and the cleanup with lib.sh).

Starts slotd, drives a random mix of operations at it with a fixed-seed RNG, SIGKILLs and
restarts it every 10-20 s, and then checks the invariants listed in main(). Calls go through
dbus-send (it prints D-Bus error names) and busctl, as subprocesses: Python's standard
library has no D-Bus. Every wait polls with a deadline.

The model: every Allocate whose reply came back is an acknowledged allocation on the slot
the reply named; every Deallocate whose reply came back ends one. A call cut by the SIGKILL
is uncertain until the next ListSlots. An allocation may also end by design when its server
exits 0: that is accepted only when the soak told that slot's server to exit 0 (after, or
GRACE s before, the Allocate) and slotd's log says "Server exited 0: allocation UUID is over"
for that very slot and UUID. Checked on the way: after every restart, the acknowledged
allocations (as at the end); a UUID allocated again gets the same slot; a UUID allocated
while it holds a live reservation gets the reserved slot; replies name the asked fleet; no
call fails but those cut by a SIGKILL or refused by the rules (NoCapacity, InvalidState).

The op mix follows the seed, but the run as a whole is not replayable: which op comes next
also depends on which replies came back first.

Writes the assertion count to $T/soak.passed; exits 1 if any invariant was violated, after
printing every violation with its evidence (slotd's log lines for the slot, the soak's own
log of what it did).
"""

import collections
import concurrent.futures
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid

from soak_faults import Faults
from soak_proc import cg_relative, fd_sample, our_processes, ppid_of, proc_state, read

ENV = os.environ
BUS = ENV["BUS"]
T = ENV["T"]
CG = ENV["CG"]
SLOTD = ENV["SLOTD"]
SECONDS = float(ENV.get("SOAK_SECONDS", "90"))
SEED = int(ENV.get("SOAK_SEED", "20250505"))
N_SLOTS = int(ENV.get("SOAK_SLOTS", "128"))
VM = bool(ENV.get("SLOTD_VM"))
ASAN = ENV.get("SOAK_ASAN") == "1"
FLEETS = ["soak-a", "soak-b"]

DEST = "org.slotd.Supervisor1"
MPATH = "/org/slotd/Supervisor1"
MIF = "org.slotd.Supervisor1.Manager"
SIF = "org.slotd.Supervisor1.Slot"
ERR = "org.slotd.Supervisor1.Error."

# The TCG VM is 5-10x slower than a host: longer deadlines, fewer calls in flight, a slower
# pace, longer hold and reservation timeouts.
SCALE = 6 if VM else 1
MAX_IN_FLIGHT = 2 if VM else 4
PACE = 0.12 if VM else 0.03  # upper bound of the random gap between two launches, s
KILL_EVERY = (10.0, 20.0)  # s between two SIGKILLs of slotd
TIMEOUTS = (1.0, 6.0) if VM else (0.3, 3.0)  # Hold and Reserve timeouts, s
# An allocation is excused (its session may have ended by exit 0) if an `exit 0` went to its
# slot after, or at most GRACE s before, the Allocate call was made: the server reads its
# control file within 50 ms (on an idle host), but slotd acts on the exit only once it runs
# again.
GRACE = 15.0 if VM else 5.0
RSS_SLACK = 0.10

T0 = time.monotonic()
PASSED = 0
VIOLATIONS = []
SOAK_LOG = open(os.path.join(T, "soak.log"), "a", buffering=1)


def now():
    return time.monotonic() - T0


def log(msg):
    SOAK_LOG.write(f"t={now():8.3f} {msg}\n")


def note(msg):
    print(f"# {msg}", flush=True)
    log(msg)


def mark(msg):
    """A line in slotd's own log, so that its lines can be placed in the soak's time."""
    with open(os.path.join(T, "slotd.log"), "a") as f:
        f.write(f"==== soak t={now():.3f}: {msg}\n")
    log(msg)


def passed(n=1):
    global PASSED
    PASSED += n


VIOLATION_KINDS = collections.Counter()


def violation(what, slots=(), uuids=(), kind=None):
    """Records a violation with its evidence (for the first 3 of each kind); the soak goes
    on, and fails at the end."""
    kind = kind or re.sub(r"[0-9a-f-]{36}|\d+", "N", what)[:60]
    VIOLATION_KINDS[kind] += 1
    ev = [f"VIOLATION at t={now():.3f}: {what}"]
    if VIOLATION_KINDS[kind] > 3:
        slots = uuids = ()
    for s in slots:
        ev.append(f"  -- slotd's log for slot {s} (with the soak's markers), last lines:")
        ev += ["    " + l for l in slot_log_lines(s)[-25:]]
    for u in uuids:
        ev.append(f"  -- the soak's log for {u}:")
        ev += ["    " + l for l in soak_log_lines(u)[-15:]]
    for s in slots:
        ev.append(f"  -- what the soak told slot {s}'s servers (control), last lines:")
        ev += ["    " + l for l in soak_log_lines(f"control slot {s}:", False)[-10:]]
    VIOLATIONS.append("\n".join(ev))
    log(f"VIOLATION: {what}")
    print(ev[0], flush=True)


def slot_log_lines(slot):
    pat = re.compile(rf"^\S+Z slotd\[\w+\]: slot {slot} \(|^==== soak ")
    try:
        with open(os.path.join(T, "slotd.log"), errors="replace") as f:
            return [l.rstrip("\n") for l in f if pat.search(l)]
    except OSError:
        return []


def soak_log_lines(word, restarts=True):
    SOAK_LOG.flush()
    with open(os.path.join(T, "soak.log")) as f:
        return [l.rstrip("\n") for l in f
                if word in l or restarts and ("SIGKILL" in l or "started slotd" in l)]


def die(msg):
    """An error of the soak itself (a deadline passed): no point going on."""
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    for v in VIOLATIONS:
        print(v, file=sys.stderr)
    sys.exit(1)


def poll_until(timeout, what, fn):
    deadline = time.monotonic() + timeout
    while True:
        r = fn()
        if r:
            return r
        if time.monotonic() > deadline:
            die(f"timed out after {timeout:.0f}s waiting for: {what}")
        time.sleep(0.02)


# ---- D-Bus ----

def busctl(*args, check=True):
    p = subprocess.run(["busctl", f"--address={BUS}", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        die(f"busctl {' '.join(args)}: {p.stderr.strip()}")
    return p


def dsend_argv(path, method, *args):
    return ["dbus-send", f"--bus={BUS}", "--print-reply", "--reply-timeout=25000",
            f"--dest={DEST}", path, method, *args]


def list_slots():
    """ListSlots: {id: (fleet, State, ProcessState, uuid)}."""
    p = busctl("--json=short", "call", DEST, MPATH, MIF, "ListSlots")
    return {e[0]: (e[1], e[2], e[3], e[4]) for e in json.loads(p.stdout)["data"][0]}


def slot_props(slot, *names):
    p = busctl("--json=short", "get-property", DEST, f"{MPATH}/slot/{slot}", SIF, *names)
    return [json.loads(l)["data"] for l in p.stdout.splitlines() if l.strip()]


# ---- slotd ----

class Slotd:
    def __init__(self):
        self.proc = None
        self.starts = 0

    def start(self):
        logf = open(os.path.join(T, "slotd.log"), "ab")
        self.proc = subprocess.Popen(
            [SLOTD, "--config", os.path.join(T, "etc", "slotd.ini")],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=dict(ENV, SLOTD_LOG_LEVEL="debug"))
        logf.close()
        with open(os.path.join(T, "soak.slotd.pid"), "w") as f:
            f.write(f"{self.proc.pid}\n")
        self.starts += 1

        def on_bus():
            if self.proc.poll() is not None:
                die(f"slotd exited with {self.proc.returncode} during start-up")
            return busctl("status", DEST, check=False).returncode == 0
        poll_until(20 * SCALE, "slotd on the bus", on_bus)
        mark(f"started slotd {self.proc.pid}")

    def kill(self):
        mark(f"SIGKILL slotd {self.proc.pid}")
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    @property
    def pid(self):
        return self.proc.pid


# ---- the model ----

def fleet_of(slot):
    return FLEETS[0] if slot < N_SLOTS // 2 else FLEETS[1]


def home_of(slot):
    return os.path.join(T, "slots", fleet_of(slot), f"slot-{slot}")


def cgroup_of(slot):
    return os.path.join(CG, fleet_of(slot), f"slot-{slot}")


class Alloc:
    """What the soak knows of one UUID it asked to allocate."""

    def __init__(self, u, fleet, req):
        self.uuid = u
        self.fleet = fleet
        self.req = req        # when the (latest) Allocate was made
        self.slot = None
        self.status = "uncertain"  # live, uncertain, gone, lost
        self.why = ""


ALLOCS = {}                              # uuid -> Alloc
EXIT0 = collections.defaultdict(list)    # slot -> times an `exit 0` was written
CONTROLLED = collections.defaultdict(list)  # slot -> times any control command was written
RESERVATIONS = {}                        # uuid -> dict(slot, fleet, until, t)
BUSY = set()                             # UUIDs with a call in flight
# Refusals for a fault of the host (SPEC §12), not for the rules: the change was not made.
REFUSED_BY_FAULT = {"StateUnwritable"}
COUNTS = collections.Counter()           # "op outcome" -> n
EPOCH = 0                                # bumped by every SIGKILL of slotd


ENDED_BY_EXIT0 = set()  # (slot, uuid) of "Server exited 0: allocation UUID is over" lines
_LOG_SCAN = {"offset": 0, "rest": b""}
ENDED_RE = re.compile(rb"^\S+Z slotd\[\w+\]: slot (\d+) \([^)]*\): Server exited 0: "
                      rb"allocation (\S+) is over$")


def scan_slotd_log():
    with open(os.path.join(T, "slotd.log"), "rb") as f:
        f.seek(_LOG_SCAN["offset"])
        data = _LOG_SCAN["rest"] + f.read()
        _LOG_SCAN["offset"] = f.tell()
    *lines, _LOG_SCAN["rest"] = data.split(b"\n")
    for l in lines:
        m = ENDED_RE.match(l)
        if m:
            ENDED_BY_EXIT0.add((int(m.group(1)), m.group(2).decode()))


def excused(a):
    """The session ended by exit 0, by design: the soak told its server to exit 0 (since, or
    just before, the Allocate) and slotd's log says so for this very allocation."""
    if a.slot is None or not any(t >= a.req - GRACE for t in EXIT0[a.slot]):
        return False
    scan_slotd_log()
    return (a.slot, a.uuid) in ENDED_BY_EXIT0


def server_up(slot):
    """The slot's test server runs (its state file names a live process in the slot's cgroup)."""
    try:
        with open(os.path.join(home_of(slot), "test-server.state")) as f:
            pid = next((l[4:].strip() for l in f if l.startswith("pid=")), None)
        with open(f"/proc/{pid}/cgroup") as f:
            cg = f.read()
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, TypeError, IndexError):
        return False
    return state != "Z" and cg.strip().endswith(f"/{fleet_of(slot)}/slot-{slot}")


def control(slot, cmd):
    """Writes a command to the slot's test server (only when it runs: a server that starts
    takes what its control file holds as already done)."""
    if not server_up(slot):
        COUNTS[f"{cmd} skipped (no server)"] += 1
        return False
    with open(os.path.join(home_of(slot), "test-server.control"), "a") as f:
        f.write(cmd + "\n")
    t = now()
    CONTROLLED[slot].append(t)
    if cmd == "exit 0":
        EXIT0[slot].append(t)
    COUNTS[f"{cmd}"] += 1
    log(f"control slot {slot}: {cmd}")
    return True


# ---- operations ----

class Op:
    def __init__(self, kind, argv, **kw):
        self.kind = kind
        self.epoch = EPOCH
        self.t = now()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.__dict__.update(kw)

    def result(self):
        """(ok, error name, output)."""
        out = self.proc.communicate()[0]
        if self.proc.returncode == 0:
            return True, None, out
        m = re.search(r"^Error ([\w.]+):", out, re.M)
        return False, (m.group(1) if m else "?"), out


IN_FLIGHT = []


def launch(rng):
    live = [a for a in ALLOCS.values() if a.status == "live" and a.uuid not in BUSY]
    held = len([a for a in ALLOCS.values() if a.status in ("live", "uncertain")])
    fill = held / N_SLOTS
    t = now()
    for u in [u for u, r in RESERVATIONS.items() if r["until"] < t - 10]:
        del RESERVATIONS[u]
    res = [u for u, r in RESERVATIONS.items() if u not in BUSY and u not in ALLOCS]
    weights = {
        "alloc": 24 if fill < 0.6 else 3,
        "dealloc": (20 if fill > 0.25 else 4) if live else 0,
        "realloc": 4 if live else 0,
        "alloc-reserved": 5 if res else 0,
        "reserve": 8,
        "hold": 10,
        "release": 6,
        "exit 0": 5,
        "crash": 5,
    }
    kinds = list(weights)
    kind = rng.choices(kinds, [weights[k] for k in kinds])[0]
    if kind in ("exit 0", "crash"):
        control(rng.randrange(N_SLOTS), kind)
        return
    if kind == "alloc":
        u = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        fleet = rng.choice(FLEETS)
        a = ALLOCS[u] = Alloc(u, fleet, t)
        BUSY.add(u)
        log(f"Allocate {fleet} {u}")
        IN_FLIGHT.append(Op(kind, dsend_argv(MPATH, f"{MIF}.Allocate", f"string:{fleet}",
                                             f"string:{u}", "string:"), alloc=a))
    elif kind == "realloc":
        a = rng.choice(live)
        BUSY.add(a.uuid)
        log(f"Allocate again {a.fleet} {a.uuid} (on slot {a.slot})")
        IN_FLIGHT.append(Op(kind, dsend_argv(MPATH, f"{MIF}.Allocate", f"string:{a.fleet}",
                                             f"string:{a.uuid}", "string:"),
                            alloc=a, prev_slot=a.slot, prev_req=a.req, t_req=t))
    elif kind == "alloc-reserved":
        u = rng.choice(sorted(res))
        r = RESERVATIONS.pop(u)
        a = ALLOCS[u] = Alloc(u, r["fleet"], t)
        BUSY.add(u)
        # Expect the reserved slot only when the reservation clearly still holds and nothing
        # happened to that slot's server since it was made.
        expect = r["slot"] if (r["until"] - t > 1.0 * SCALE and
                               not any(c >= r["t"] for c in CONTROLLED[r["slot"]])) else None
        log(f"Allocate reserved {r['fleet']} {u} (reserved slot {r['slot']}, "
            f"{r['until'] - t:.2f}s left)")
        IN_FLIGHT.append(Op(kind, dsend_argv(MPATH, f"{MIF}.Allocate", f"string:{r['fleet']}",
                                             f"string:{u}", "string:"), alloc=a, expect=expect))
    elif kind == "dealloc":
        a = rng.choice(live)
        BUSY.add(a.uuid)
        log(f"Deallocate {a.uuid} (slot {a.slot})")
        IN_FLIGHT.append(Op(kind, dsend_argv(MPATH, f"{MIF}.Deallocate", f"string:{a.uuid}"),
                            alloc=a))
    elif kind == "reserve":
        u = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        fleet = rng.choice(FLEETS)
        timeout = rng.uniform(*TIMEOUTS)
        log(f"Reserve {fleet} {u} {timeout:.2f}s")
        IN_FLIGHT.append(Op(kind, dsend_argv(MPATH, f"{MIF}.Reserve", f"string:{fleet}",
                                             f"string:{u}", f"uint64:{int(timeout * 1e6)}"),
                            uuid=u, fleet=fleet, timeout=timeout))
    elif kind == "hold":
        slot = rng.randrange(N_SLOTS)
        timeout = rng.uniform(*TIMEOUTS)
        log(f"Hold slot {slot} {timeout:.2f}s")
        IN_FLIGHT.append(Op(kind, dsend_argv(f"{MPATH}/slot/{slot}", f"{SIF}.Hold",
                                             f"uint64:{int(timeout * 1e6)}"), slot=slot))
    elif kind == "release":
        slot = rng.randrange(N_SLOTS)
        log(f"ReleaseHold slot {slot}")
        IN_FLIGHT.append(Op(kind, dsend_argv(f"{MPATH}/slot/{slot}", f"{SIF}.ReleaseHold"),
                            slot=slot))


SLOT_REPLY = re.compile(r'uint32 (\d+)\s+object path "/org/slotd/Supervisor1/slot/(\d+)"')


def finish_op(op):
    ok, err, out = op.result()
    name = err.replace(ERR, "") if err else "ok"
    COUNTS[f"{op.kind} {name}"] += 1
    killed = op.epoch != EPOCH
    semantic = err is not None and err.startswith(ERR)
    a = getattr(op, "alloc", None)
    if a is not None:
        BUSY.discard(a.uuid)

    if not ok and not semantic:
        # No reply: slotd was killed while the call was in flight (else it is a violation).
        log(f"{op.kind} (t={op.t:.3f}) -> {err} {'(slotd killed meanwhile)' if killed else ''}")
        if not killed:
            violation(f"{op.kind} failed without a SIGKILL of slotd: {out.strip()}",
                      uuids=[a.uuid] if a else [])
        if a is not None:
            a.status = "uncertain"  # resolved by ListSlots once slotd is back
        return

    slot = None
    if ok and op.kind in ("alloc", "realloc", "alloc-reserved", "reserve"):
        m = SLOT_REPLY.search(out)
        if not m or m.group(1) != m.group(2):
            violation(f"{op.kind}: unexpected reply {out.strip()!r}")
            return
        slot = int(m.group(1))
    log(f"{op.kind} (t={op.t:.3f}) {getattr(a, 'uuid', getattr(op, 'uuid', ''))} -> "
        f"{name}{'' if slot is None else f' slot {slot}'}")

    if not ok and name in REFUSED_BY_FAULT:
        # A fault of the host (soak_faults.py): the change must not be in effect anywhere.
        if op.kind in ("alloc", "alloc-reserved"):
            a.status, a.why = "refused", f"refused with {name} at t={now():.3f}"
        return
    if op.kind == "alloc":
        if ok:
            a.slot, a.status = slot, "live"
            check_fleet(slot, a.fleet, a.uuid)
        elif name == "NoCapacity":
            del ALLOCS[a.uuid]
        else:
            violation(f"Allocate {a.uuid}: {out.strip()}")
            a.status = "uncertain"
    elif op.kind == "alloc-reserved":
        if ok:
            a.slot, a.status = slot, "live"
            check_fleet(slot, a.fleet, a.uuid)
            if op.expect is not None:
                passed()
                if slot != op.expect:
                    violation(f"Allocate of reserved {a.uuid} got slot {slot}, not its reserved "
                              f"slot {op.expect}", slots=[slot, op.expect], uuids=[a.uuid])
        elif name == "NoCapacity":
            del ALLOCS[a.uuid]
        else:
            violation(f"Allocate reserved {a.uuid}: {out.strip()}")
            a.status = "uncertain"
    elif op.kind == "realloc":
        if ok:
            if slot != op.prev_slot:
                if excused(a):
                    COUNTS["allocation ended by exit 0 (seen by Allocate again)"] += 1
                    a.req = op.t_req
                else:
                    violation(f"the same UUID {a.uuid} allocated again got slot {slot}, not "
                              f"{op.prev_slot}", slots=[op.prev_slot, slot], uuids=[a.uuid])
                    a.req = op.t_req
                a.slot = slot
            else:
                passed()
        elif name == "NoCapacity" and excused(a):
            COUNTS["allocation ended by exit 0 (seen by Allocate again)"] += 1
            a.status, a.why = "lost", "its session ended by exit 0"
        else:
            violation(f"Allocate again of {a.uuid} (slot {a.slot}): {out.strip()}",
                      slots=[a.slot], uuids=[a.uuid])
    elif op.kind == "dealloc":
        if ok:
            a.status = "gone"
            a.why = f"deallocated at t={now():.3f}"
        elif name == "NoSuchAllocation":
            if excused(a):
                COUNTS["allocation ended by exit 0 (seen by Deallocate)"] += 1
                a.status, a.why = "lost", "its session ended by exit 0"
            else:
                violation(f"acknowledged allocation {a.uuid} on slot {a.slot} is gone: "
                          f"Deallocate says NoSuchAllocation", slots=[a.slot], uuids=[a.uuid])
                a.status, a.why = "lost", "lost (violation reported)"
        else:
            violation(f"Deallocate {a.uuid}: {out.strip()}", uuids=[a.uuid])
    elif op.kind == "reserve":
        if ok:
            RESERVATIONS[op.uuid] = dict(slot=slot, fleet=op.fleet, t=op.t,
                                         until=op.t + op.timeout)
            check_fleet(slot, op.fleet, op.uuid)
        elif name != "NoCapacity":
            violation(f"Reserve {op.uuid}: {out.strip()}")
    elif op.kind in ("hold", "release"):
        if not ok and name != "InvalidState":
            violation(f"{op.kind} slot {op.slot}: {out.strip()}", slots=[op.slot])


def check_fleet(slot, fleet, u):
    passed()
    if fleet_of(slot) != fleet:
        violation(f"{u} asked of fleet {fleet} got slot {slot} of {fleet_of(slot)}",
                  slots=[slot], uuids=[u])


def reap(block=False, timeout=30):
    deadline = time.monotonic() + timeout * SCALE
    while IN_FLIGHT:
        for op in [o for o in IN_FLIGHT if o.proc.poll() is not None]:
            IN_FLIGHT.remove(op)
            finish_op(op)
        if not block or not IN_FLIGHT:
            return
        if time.monotonic() > deadline:
            die(f"{len(IN_FLIGHT)} D-Bus calls got no reply within {timeout * SCALE}s")
        time.sleep(0.01)


# ---- checks against ListSlots ----

def check_allocations(slots, final):
    """Invariant 1 (at every restart and at the end): every acknowledged allocation is on its
    slot, unless an exit 0 may have ended it; nothing deallocated came back; no UUID on two
    slots, none the soak never asked for. Resolves what was uncertain (calls cut by a
    SIGKILL)."""
    where = collections.defaultdict(list)
    for sid, (fleet, state, pstate, u) in slots.items():
        if u:
            where[u].append(sid)
            passed()
            if state != "allocated":
                violation(f"slot {sid} has UUID {u} but State {state}", slots=[sid])
    for u, sids in where.items():
        passed()
        if len(sids) > 1:
            violation(f"UUID {u} on {len(sids)} slots: {sids}", slots=sids, uuids=[u])
        if u not in ALLOCS:
            violation(f"UUID {u} on slot {sids} was never allocated by the soak", slots=sids)
    for a in ALLOCS.values():
        if a.uuid in BUSY:
            continue
        on = where.get(a.uuid, [])
        if a.status == "uncertain":
            if on:
                a.status, a.slot = "live", on[0]
                COUNTS["uncertain call resolved: allocated"] += 1
            else:
                a.status, a.why = "gone", "an unacknowledged call, not allocated after restart"
                COUNTS["uncertain call resolved: not allocated"] += 1
            continue
        passed()
        if a.status == "live":
            if on == [a.slot]:
                continue
            if on:
                violation(f"acknowledged allocation {a.uuid} moved from slot {a.slot} to {on}",
                          slots=[a.slot] + on, uuids=[a.uuid])
                a.slot = on[0]
            elif excused(a):
                COUNTS["allocation ended by exit 0 (absent from ListSlots)"] += 1
                a.status, a.why = "lost", "its session ended by exit 0"
            else:
                violation(f"acknowledged allocation {a.uuid} (slot {a.slot}, asked at "
                          f"t={a.req:.3f}) is missing" + (" at the end" if final else
                                                          " after the restart"),
                          slots=[a.slot], uuids=[a.uuid])
                a.status, a.why = "lost", "lost (violation reported)"
        elif on:
            violation(f"{a.uuid} is allocated on {on} but {a.why}", slots=on, uuids=[a.uuid])


# ---- /proc (and soak_proc.py) ----

def cgroup_procs(slot):
    return {int(x) for x in read(os.path.join(cgroup_of(slot), "cgroup.procs")).split()}


def slot_process_problem(slot, pstate, main_pid):
    """Invariant 2 for one slot: None when its processes match its state."""
    try:
        procs = cgroup_procs(slot)
        if pstate in ("stopped", "failed"):
            if procs or main_pid:
                return f"{pstate} with MainPID {main_pid} and cgroup.procs {sorted(procs)}"
            return None
        if pstate not in ("running", "starting"):
            return f"ProcessState {pstate}"
        if main_pid <= 0 or proc_state(main_pid) == "Z":
            return f"{pstate} with MainPID {main_pid} not alive"
        keeper = ppid_of(main_pid)
        comm = read(f"/proc/{keeper}/comm").strip()
        if comm != "slotd-keeper":
            return f"the parent {keeper} of MainPID {main_pid} is {comm!r}, not slotd-keeper"
        if procs != {main_pid, keeper}:
            return (f"cgroup.procs {sorted(procs)}, expected keeper {keeper} and server "
                    f"{main_pid}")
    except (OSError, ValueError, IndexError) as e:
        return f"{pstate}, MainPID {main_pid}: {e}"
    return None


def quiet_fd_sample(pid):
    """fd_sample outside a state commit (its temporary file is open for a moment)."""
    return poll_until(5 * SCALE, "slotd between two state commits",
                      lambda: next((x for x in [fd_sample(pid)]
                                    if not any(".state.tmp" in k for k in x[1])), None))


# ---- settling ----

STUCK = set()  # slots reported stuck in `starting` (reported once each)
# s a slot may stay starting after its server says it sent READY=1
STUCK_AFTER = 10.0 if VM else 5.0


def server_state(slot):
    try:
        return dict(l.split("=", 1) for l in
                    read(os.path.join(home_of(slot), "test-server.state")).splitlines() if "=" in l)
    except OSError:
        return {}


def server_log_tail(slot):
    """The server.log lines of the slot's current server (from its last start line)."""
    try:
        lines = read(os.path.join(home_of(slot), "logs", "server.log")).splitlines()
    except OSError:
        return []
    last = max((i for i, l in enumerate(lines) if " start pid=" in l), default=0)
    return lines[last:last + 12]


def report_stuck(slot, pstate, how_long):
    st = server_state(slot)
    what = (f"slot {slot} stuck in {pstate} for {how_long:.1f}s although its server "
            f"(pid {st.get('pid')}) sent READY=1 (ready={st.get('ready')} in its state file); "
            f"the server's log: " + " | ".join(server_log_tail(slot)))
    violation(what, slots=[slot], kind="stuck")
    STUCK.add(slot)


def settle(timeout, holds_too=False):
    """Waits, with a deadline, until no slot is starting or stopping (nor, with holds_too,
    held or reserved: those end at deadlines of a few seconds). A slot left starting
    STUCK_AFTER s after its server said it sent READY=1 is reported (once) and not waited
    for. Returns ListSlots and the slots still moving at the deadline."""
    deadline = time.monotonic() + timeout * SCALE
    ready_seen = {}
    while True:
        slots = list_slots()
        moving = {s: v for s, v in slots.items() if
                  (v[2] in ("starting", "stopping") and s not in STUCK) or
                  (holds_too and v[1] in ("held", "reserved"))}
        for s, v in moving.items():
            if v[2] == "starting" and server_up(s) and server_state(s).get("ready") == "1":
                t = ready_seen.setdefault(s, time.monotonic())
                if time.monotonic() - t > STUCK_AFTER:
                    report_stuck(s, v[2], time.monotonic() - t)
        moving = {s: v for s, v in moving.items() if s not in STUCK or v[2] != "starting"}
        if not moving:
            return slots, {}
        if time.monotonic() > deadline:
            return slots, moving
        time.sleep(0.05)


def report_moving(moving, what):
    for s, (fleet, state, pstate, u) in sorted(moving.items()):
        st = server_state(s)
        violation(f"{what}: slot {s} still {pstate} (State {state}); its server's state file: "
                  f"pid={st.get('pid')} ready={st.get('ready')}", slots=[s])


# ---- main ----

class FaultHooks:
    """What soak_faults.Faults needs of the soak."""
    t0 = T0

    def log(self, msg):
        mark(msg)

    def count(self, key):
        COUNTS[key] += 1

    def new_epoch(self):
        global EPOCH
        EPOCH += 1

    def bus_ok(self):
        return busctl("status", DEST, check=False).returncode == 0

    def poll_until(self, timeout, what, fn):
        return poll_until(timeout * SCALE, what, fn)


def main():
    """The soak, then, with every slot settled, the invariants:
    1. every acknowledged allocation not deallocated is on its slot (unless it ended by
       exit 0, see above), no deallocated one came back, no UUID is on two slots, none the
       soak never asked for is anywhere;
    2. every slot's processes match its ProcessState: running or starting = its keeper and
       one server in its cgroup, MainPID alive; stopped or failed = an empty cgroup;
    3. every slot's server.json says its AllocationUUID (and its id);
    4. no stray test server or keeper of this test: each in a running slot's cgroup, one of
       each per running slot; nothing in the tree's other groups;
    5. no fd or RSS growth in slotd between two quiet points of one slotd's life: per-slot
       fds as the slots need them, the other fds the same, RSS within RSS_SLACK (not under
       ASan).
    And no slot stays starting once its server has sent READY=1 (checked whenever the soak
    waits for the slots to settle)."""
    global EPOCH
    rng = random.Random(SEED)
    note(f"seed {SEED} (SOAK_SEED), {SECONDS:.0f} s (SOAK_SECONDS), {N_SLOTS} slots "
         f"(SOAK_SLOTS){', in the test VM' if VM else ''}{', ASan build' if ASAN else ''}")
    slotd = Slotd()
    slotd.start()
    slots = list_slots()
    passed()
    if sorted(slots) != list(range(N_SLOTS)):
        die(f"expected slots 0..{N_SLOTS - 1}, got {sorted(slots)}")
    slots, moving = settle(60)
    if moving:
        die(f"slots not running 60s after start: {sorted(moving)}")
    if STUCK:
        note(f"{len(STUCK)} slots stuck in starting after start-up: {sorted(STUCK)}")
    note(f"{N_SLOTS} slots started at t={now():.1f}s")

    # The timeline: SIGKILLs every KILL_EVERY s until the last stretch, which one slotd
    # process lives through: a warm-up, a quiet point (sample A of fds and RSS), more load,
    # the end (sample B).
    start = now()
    end = start + SECONDS
    last = max(min(25.0, 0.6 * SECONDS), 0.35 * SECONDS)
    kills_until = end - last
    sample_at = kills_until + 0.3 * last
    next_kill = start + rng.uniform(*KILL_EVERY)
    if next_kill >= kills_until:
        next_kill = start + (kills_until - start) / 2
    sample_a = None
    kill_at = None
    restarts = 0
    ops_after_a = 0
    faults = Faults(rng, SCALE, FaultHooks())
    faults.schedule(now())
    while True:
        reap()
        t = now()
        if t >= end:
            break
        faults.tick(t, kill_at is not None or (next_kill is not None and next_kill - t < 1.0))
        if next_kill is not None and t >= next_kill and kill_at is None:
            # Some servers end just before the SIGKILL, so that their successors are starting
            # when slotd dies; calls go on meanwhile, so that some are in flight at the kill.
            for _ in range(rng.randint(0, 3)):
                control(rng.randrange(N_SLOTS), rng.choice(["exit 0", "crash"]))
            kill_at = t + rng.uniform(0, 0.2) * SCALE
        if kill_at is not None and t >= kill_at:
            kill_at = None
            faults.settle()  # a fault never spans a SIGKILL: slotd starts on a sound host
            slotd.kill()
            EPOCH += 1
            # While slotd is away some servers end: its successor finds out how.
            for _ in range(rng.randint(0, 3)):
                control(rng.randrange(N_SLOTS), rng.choice(["exit 0", "crash"]))
            # Load shape: how long slotd stays away, not a wait for anything.
            time.sleep(rng.uniform(0, 0.5))
            slotd.start()
            restarts += 1
            reap(block=True)
            check_allocations(list_slots(), final=False)
            nk = now() + rng.uniform(*KILL_EVERY)
            next_kill = nk if nk < kills_until else None
            continue
        if sample_a is None and t >= sample_at:
            faults.settle()
            reap(block=True)
            slots, moving = settle(60, holds_too=True)
            report_moving(moving, "before sample A")
            running = sum(1 for v in slots.values() if v[2] in ("running", "starting"))
            sample_a = (slotd.pid, running, *quiet_fd_sample(slotd.pid))
            note(f"sample A at t={now():.1f}s: slotd {slotd.pid}, {running} slots running, "
                 f"fds {dict(sample_a[2])}, RSS {sample_a[4]} kB")
            # However long the quiet point took, the load goes on as long as planned.
            end = max(end, now() + 0.7 * last)
            continue
        if len(IN_FLIGHT) < MAX_IN_FLIGHT and not faults.bus_down():
            launch(rng)
            if sample_a is not None:
                ops_after_a += 1
        # Load shape: a random gap between two launches (pacing, not a wait for a result).
        time.sleep(rng.uniform(0, PACE))

    # The end: the last fault cleared, every call answered, then a quiet period until every
    # slot has settled.
    faults.settle()
    reap(block=True)
    soak_end = now()
    slots, moving = settle(60, holds_too=True)
    report_moving(moving, "at the end")
    note(f"soak ran {soak_end - start:.1f}s, settled at t={now():.1f}s; slotd restarted "
         f"{restarts} times")

    # 1. Allocations.
    check_allocations(slots, final=True)

    # 2., 3. Every slot: its processes match its state; server.json says its UUID.
    # (Read a few at a time: one busctl each.)
    with concurrent.futures.ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT * 2) as pool:
        props = dict(zip(range(N_SLOTS), pool.map(
            lambda s: tuple(slot_props(s, "ProcessState", "AllocationUUID", "MainPID", "State")),
            range(N_SLOTS))))
    for s in range(N_SLOTS):
        pstate, u, main_pid, state = props[s]
        passed()
        if (state, pstate, u) != slots[s][1:]:
            violation(f"slot {s}: properties say {state}/{pstate}/{u!r}, ListSlots "
                      f"{slots[s][1:]}", slots=[s])
        problem = None
        deadline = time.monotonic() + 5 * SCALE
        while True:
            problem = slot_process_problem(s, pstate, main_pid)
            if problem is None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
            pstate, main_pid = slot_props(s, "ProcessState", "MainPID")
        passed()
        if problem:
            violation(f"slot {s}: {problem}", slots=[s])
        passed()
        try:
            j = json.loads(read(os.path.join(home_of(s), "server.json")))
        except (OSError, ValueError) as e:
            j = {"allocatedUUID": f"<{e}>"}
        if j.get("allocatedUUID") != u or j.get("serverID") != str(s):
            violation(f"slot {s}: server.json has allocatedUUID {j.get('allocatedUUID')!r} "
                      f"serverID {j.get('serverID')!r}, the slot {u!r}", slots=[s])

    # 4. No orphans: every test server and keeper of this test is in a slot cgroup of a
    # running slot, one each; nothing in the non-slot groups of the tree.
    rel = cg_relative()
    running = {s for s, p in props.items() if p[0] in ("running", "starting")}
    servers, keepers = our_processes()
    for kind, procs in (("test server", servers), ("keeper", keepers)):
        by_slot = collections.defaultdict(list)
        for pid, cg in procs.items():
            m = re.fullmatch(re.escape(rel) + r"/(soak-[ab])/slot-(\d+)", cg)
            passed()
            if not m or int(m.group(2)) not in running or fleet_of(int(m.group(2))) != m.group(1):
                violation(f"orphan {kind} {pid} in cgroup {cg} (not a running slot's)",
                          slots=[int(m.group(2))] if m else [])
            else:
                by_slot[int(m.group(2))].append(pid)
        passed()
        if len(procs) != len(running):
            violation(f"{len(procs)} {kind}s for {len(running)} running slots")
        for s, pids in by_slot.items():
            if len(pids) != 1:
                violation(f"slot {s} has {len(pids)} {kind}s: {pids}", slots=[s])
    for d in [CG] + [os.path.join(CG, f) for f in FLEETS]:
        passed()
        procs = read(os.path.join(d, "cgroup.procs")).split()
        if procs:
            violation(f"processes {procs} in {d}, outside every slot")

    # 5. No fd or RSS growth within the last slotd's life (samples at two quiet points).
    b = (slotd.pid, len(running), *quiet_fd_sample(slotd.pid))
    note(f"sample B at t={now():.1f}s: slotd {b[0]}, {b[1]} slots running, "
         f"fds {dict(b[2])}, RSS {b[4]} kB; {ops_after_a} ops since sample A")
    if sample_a is None:
        die("no sample A was taken")
    passed()
    if sample_a[0] != b[0]:
        violation(f"slotd {sample_a[0]} of sample A is not slotd {b[0]}")
    ka, oa, rss_a = sample_a[2:]
    kb, ob, rss_b = b[2:]
    for kind, want in (("slot cgroup", N_SLOTS), ("slot home", N_SLOTS),
                       ("keeper pidfd", len(running)), ("slot notify socket", len(running)),
                       ("keeper restart eventfd", len(running)),
                       ("slot log pipe", len(running))):
        passed()
        if kb[kind] != want:
            violation(f"slotd holds {kb[kind]} fds of kind {kind!r}, expected {want}")
    passed()
    # sd-event's timer fds: one per clock it has armed a timer of (CLOCK_REALTIME, _MONOTONIC,
    # _BOOTTIME and their _ALARM kinds), whenever the first came: bounded, not a leak.
    if kb["event loop clock"] > 5:
        violation(f"slotd holds {kb['event loop clock']} timer fds, more than sd-event's 5 clocks")
    passed()
    if kb["exit status"] > N_SLOTS:
        violation(f"slotd holds {kb['exit status']} exit status fds for {N_SLOTS} slots")
    passed()
    if ob != oa:
        violation(f"slotd's other fds grew: sample A {dict(oa)}, sample B {dict(ob)}")
    growth = (rss_b - rss_a) / rss_a
    note(f"fds: A {sum(ka.values())} ({sample_a[1]} running) -> B {sum(kb.values())} "
         f"({b[1]} running), other fds {sum(oa.values())} -> {sum(ob.values())}; "
         f"RSS {rss_a} -> {rss_b} kB ({growth * 100:+.1f}%)")
    if ASAN:
        note("ASan build: RSS not compared (the quarantine grows it); LeakSanitizer reports "
             "at slotd's exit")
    else:
        passed()
        if growth >= RSS_SLACK:
            violation(f"slotd's RSS grew {growth * 100:.1f}% ({rss_a} -> {rss_b} kB) over "
                      f"{ops_after_a} ops")

    # Summary.
    states = collections.Counter(f"{v[1]}/{v[2]}" for v in slots.values())
    total = sum(v for k, v in COUNTS.items() if "resolved" not in k and "ended by" not in k)
    note(f"ops: {total} in {soak_end - start:.0f}s; slotd SIGKILLed and restarted {restarts} "
         f"times")
    for k in sorted(COUNTS):
        note(f"  {k}: {COUNTS[k]}")
    live = sum(1 for a in ALLOCS.values() if a.status == "live")
    note(f"allocations at the end: {live} live (checked on their slots), "
         f"{sum(1 for a in ALLOCS.values() if a.status == 'gone')} deallocated, "
         f"{sum(1 for a in ALLOCS.values() if a.status == 'lost')} ended by exit 0, "
         f"{sum(1 for a in ALLOCS.values() if a.status == 'refused')} refused for a fault "
         f"(checked absent)")
    note(f"slots at the end: {dict(sorted(states.items()))}")
    if STUCK:
        note(f"slots stuck in starting (READY=1 sent, never seen by slotd): {sorted(STUCK)}")

    with open(os.path.join(T, "soak.passed"), "w") as f:
        f.write(f"{PASSED}\n")
    if VIOLATIONS:
        print(f"FAIL: {len(VIOLATIONS)} violations:", file=sys.stderr)
        for v in VIOLATIONS:
            print(v, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
