#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The time from a change in slotd to its etcd watch event, on this machine (SPEC §13: within
50 ms). slotd's change is the PropertiesChanged signal of the slot as `busctl monitor` receives
it (its "timestamp-realtime", the kernel's receive time on the monitor's socket, the same
moment the registry gets it); the etcd event is the moment a watch on the prefix, through
etcd's JSON gateway (curl -N), hands it to this script. Each change is made alone (Hold, then
ReleaseHold, on the slots named in turn: online ones) and waited for, so each sample is one
change.

Between two changes the script also writes a probe key itself (an HTTP put to the gateway,
as the registry does) and times it to its watch event: etcd's own share, at that moment, on
this host.

usage: registry-latency.py BUS ETCD_ENDPOINT PREFIX SLOT[,SLOT...] CHANGES DEADLINE_S [BOUND_MS]
prints p50, p99 and max in ms of both; exits 1 when a change or a probe did not arrive within
DEADLINE_S seconds. Timings are not asserted here (a test asserts that every change arrives):
with BOUND_MS the line also says whether the changes' p99 kept it, for tests/bench/fleet-bench,
which reports the 50 ms bound."""
import base64
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request


def b64(s):
    return base64.b64encode(s.encode()).decode()


def prefix_end(p):
    return p[:-1] + chr(ord(p[-1]) + 1)


def reader(proc, parse, out):
    for line in proc.stdout:
        t = time.time()
        for item in parse(line):
            out.put((t, item))


def parse_signal(line):
    try:
        m = json.loads(line)
    except ValueError:
        return []
    if m.get("member") != "PropertiesChanged" or "/slot/" not in m.get("path", ""):
        return []
    props = m["payload"]["data"][1]
    if "State" not in props:
        return []
    slot = int(m["path"].rsplit("/", 1)[1])
    return [(slot, props["State"]["data"], m["timestamp-realtime"] / 1e6)]


def watch_parser(probe):
    def parse(line):
        try:
            result = json.loads(line).get("result", {})
        except ValueError:
            return []
        if result.get("created"):
            return [("created", "")]
        events, found = result.get("events", []), []
        for e in events:
            if e.get("type", "PUT") != "PUT":
                continue
            key = base64.b64decode(e["kv"]["key"]).decode()
            value = base64.b64decode(e["kv"]["value"])
            if key == probe:
                found.append(("probe", value.decode()))
            elif "/slots/" in key:
                doc = json.loads(value)
                found.append((doc["slotID"], doc["state"]))
        return found
    return parse


def put(endpoint, key, value):
    body = json.dumps({"key": b64(key), "value": b64(value)}).encode()
    urllib.request.urlopen(endpoint + "/v3/kv/put", body, timeout=10).read()


def percentiles(lat):
    lat = sorted(lat)
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1]


def wait_for(q, want, deadline):
    while True:
        left = deadline - time.time()
        if left <= 0:
            return None
        try:
            t, item = q.get(timeout=left)
        except queue.Empty:
            return None
        if item[:2] == want:
            return t, item


def main():
    bus, endpoint, prefix, slots, changes, deadline_s = sys.argv[1:7]
    bound = float(sys.argv[7]) if len(sys.argv) > 7 else None
    slots, changes, deadline_s = [int(x) for x in slots.split(",")], int(changes), float(deadline_s)
    # whole rounds of Hold and ReleaseHold: every slot is online again at the end
    changes = -(-changes // (2 * len(slots))) * 2 * len(slots)
    try:  # the measuring end too (busctl, curl and the reader threads inherit it)
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass
    signals, events = queue.Queue(), queue.Queue()
    mon = subprocess.Popen(
        ["busctl", "--address=" + bus, "--json=short", "monitor", "--match",
         "type='signal',sender='org.slotd.Supervisor1',member='PropertiesChanged'"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    probe = prefix + "/latency-probe"
    body = json.dumps({"create_request": {"key": b64(prefix + "/"),
                                          "range_end": b64(prefix_end(prefix + "/"))}})
    watch = subprocess.Popen(["curl", "-sN", "-X", "POST", endpoint + "/v3/watch", "-d", body],
                             stdout=subprocess.PIPE, text=True)
    threading.Thread(target=reader, args=(mon, parse_signal, signals), daemon=True).start()
    threading.Thread(target=reader, args=(watch, watch_parser(probe), events),
                     daemon=True).start()
    # Both watchers attached: the monitor says so on stderr, etcd answers the watch's
    # creation.
    mon.stderr.readline()
    if not wait_for(events, ("created", ""), time.time() + 30):
        print("the etcd watch was not created")
        return 1
    lat, base = [], []
    try:
        for i in range(changes):
            slot = slots[i % len(slots)]
            held = (i // len(slots)) % 2 == 0
            method, args = ("Hold", ["t", "60000000"]) if held else ("ReleaseHold", [])
            want = (slot, "held" if held else "online")
            subprocess.run(["busctl", "--address=" + bus, "call", "org.slotd.Supervisor1",
                            "/org/slotd/Supervisor1/slot/%d" % slot, "org.slotd.Supervisor1.Slot",
                            method] + args, check=True, stdout=subprocess.DEVNULL)
            deadline = time.time() + deadline_s
            sig = wait_for(signals, want, deadline)
            ev = wait_for(events, want, deadline)
            if not sig or not ev:
                print("change %d (slot %d %s): %s never came" %
                      (i, slot, want[1], "the signal" if not sig else "the etcd event"))
                return 1
            lat.append((ev[0] - sig[1][2]) * 1000)
            t0 = time.time()
            put(endpoint, probe, str(i))
            ev = wait_for(events, ("probe", str(i)), time.time() + deadline_s)
            if not ev:
                print("probe %d: its etcd event never came" % i)
                return 1
            base.append((ev[0] - t0) * 1000)
    finally:
        mon.kill()
        watch.kill()
    p50, p99, worst = percentiles(lat)
    b50, b99, bworst = percentiles(base)
    print("slotd change -> etcd watch event over %d changes: p50 %.1f ms, p99 %.1f ms, "
          "max %.1f ms; etcd alone (put -> watch event): p50 %.1f ms, p99 %.1f ms, "
          "max %.1f ms" % (len(lat), p50, p99, worst, b50, b99, bworst))
    if bound is not None:
        print("bound %.0f ms at p99: %s" % (bound, "kept" if p99 <= bound else "not kept"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
