# SPDX-License-Identifier: MIT
"""Faults of the host injected into the soak (issue 14): soak.py calls tick() in its loop.

Every 4-8 s (8-16 s in the VM; between SIGKILLs of slotd, never across one: the soak
clears the fault in force before it kills slotd) one fault of the matrix,
chosen by the soak's RNG, is injected for a while and then cleared:

  flood      bursts of garbage datagrams into the notify sockets of random slots;
  state-full the state directory (a small tmpfs of its own, see test-soak.sh) filled to the
             last byte, then emptied again: changes are refused with StateUnwritable
             meanwhile, and slotd accepts them again by itself;
  bus        the dbus-daemon killed and started again at the same address: calls in flight
             are cut (uncertain, like calls cut by a SIGKILL of slotd) and slotd comes back
             on the new bus by itself.

SOAK_FAULT_KINDS (space-separated, default all) narrows the choice. The soak's invariants (nothing acknowledged lost, nothing refused in effect, processes match
state, no orphans, no growth) are then checked as usual, under faults too. Each fault is
counted in COUNTS and in the soak's log.
"""

import os
import random
import signal
import subprocess
import time

ENV = os.environ
T = ENV["T"]
STATE_DIR = os.path.join(T, "state")
FILLER = os.path.join(STATE_DIR, "soak-filler")
KINDS = ["flood", "state-full", "bus"]


class Faults:
    def __init__(self, rng, scale, hooks):
        """hooks: log(msg), count(key), bus_ok() -> bool, new_epoch(), poll_until(s, what,
        fn)."""
        self.rng = rng
        self.scale = scale
        self.h = hooks
        self.enabled = ENV.get("SOAK_FAULTS", "1") != "0"
        kinds = ENV.get("SOAK_FAULT_KINDS", " ".join(KINDS)).split()
        self.kinds = [k for k in kinds if k != "state-full" or ENV.get("SOAK_STATE_TMPFS")]
        self.enabled = self.enabled and bool(self.kinds)
        self.active = None          # (kind, clear at)
        self.next_at = None

    def schedule(self, t):
        # Not the full scale of the VM: there the SIGKILLs come every 10-20 s all the same.
        gap = self.rng.uniform(4.0, 8.0) * min(self.scale, 2)
        self.next_at = t + gap if self.enabled else None

    def bus_down(self):
        return self.active is not None and self.active[0] == "bus"

    def settle(self):
        """Clears the fault in force, if any, and injects none before the next schedule()."""
        if self.active:
            self.clear()

    def tick(self, t, kill_soon):
        """Injects or clears; kill_soon: a SIGKILL of slotd is due, so inject nothing new."""
        if self.active and t >= self.active[1]:
            self.clear()
        if self.active or self.next_at is None or t < self.next_at or kill_soon:
            return
        kind = self.rng.choice(self.kinds)
        self.h.count(f"fault injected: {kind}")
        self.h.log(f"FAULT {kind}: inject")
        getattr(self, "inject_" + kind.replace("-", "_"))()
        self.active = (kind, t + self.rng.uniform(0.5, 2.0) * min(self.scale, 2))

    def clear(self):
        kind = self.active[0]
        self.active = None
        self.h.log(f"FAULT {kind}: clear")
        getattr(self, "clear_" + kind.replace("-", "_"))()
        self.schedule(time.monotonic() - self.h.t0)

    # ---- flood ----
    def inject_flood(self):
        import socket
        d = os.path.join(STATE_DIR, "notify.d")
        names = [n for n in os.listdir(d) if n.isdigit()]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.setblocking(False)
        sent = 0
        for n in self.rng.sample(names, min(8, len(names))):
            for i in range(500):
                junk = random.randbytes(self.rng.randrange(1, 300))
                if i % 3 == 0:
                    junk = b"READY=1\nSTATUS=" + junk  # well-formed lines, from a stranger
                try:
                    s.sendto(junk, os.path.join(d, n))
                    sent += 1
                except (BlockingIOError, ConnectionRefusedError, FileNotFoundError):
                    break  # a full queue, or a slot whose server is not running
        s.close()
        self.h.log(f"FAULT flood: {sent} datagrams")

    def clear_flood(self):
        pass

    # ---- state-full ----
    def inject_state_full(self):
        try:
            with open(FILLER, "wb") as f:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
        except OSError:
            pass  # ENOSPC: full

    def clear_state_full(self):
        try:
            os.unlink(FILLER)
        except FileNotFoundError:
            pass

    # ---- bus ----
    def inject_bus(self):
        pid = int(open(os.path.join(T, "dbus.pid")).read())
        os.kill(pid, signal.SIGKILL)
        self.h.new_epoch()  # calls in flight are cut: uncertain, resolved by ListSlots

    def clear_bus(self):
        logf = open(os.path.join(T, "dbus.log"), "ab")
        p = subprocess.Popen(["dbus-daemon", f"--config-file={T}/bus.conf", "--nofork",
                              "--nosyslog"], stdin=subprocess.DEVNULL, stdout=logf,
                             stderr=subprocess.STDOUT, start_new_session=True)
        logf.close()
        with open(os.path.join(T, "dbus.pid"), "w") as f:
            f.write(f"{p.pid}\n")
        self.h.poll_until(30, "slotd back on the restarted bus", self.h.bus_ok)
