#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Concurrent clients of slotd-allocator for test-fleet-faults.sh (SPEC §13).

Each of --workers threads loops until --count allocations were made fleet-wide: POST a new
allocationId (to its replica; on no answer, a reset or a 5xx other than "no capacity", the same
allocationId to the next replica: that is what a matchmaker does when a replica dies under it),
wait until a GET says "fulfilled", check the allocation on its host's slotd (busctl, the truth:
the slot the answer names holds that UUID), POST the same allocationId again to the other
replica and check that a GET there names the same machine and server, then DELETE it (again
retried on the other replica). With --dup-share, that share of the allocations is POSTed to
both replicas at once from two threads. With --keep N, the last allocation of each of the
first N workers is kept (listed in the summary).

Checked while it runs and at the end (each violation is printed with its evidence; exit 1):
- no two allocations held the same slot at once: the interval from "fulfilled seen" to "DELETE
  sent" (which lies inside the time the slot really held the UUID) of two allocations on one
  slot never overlap;
- a sampler reads every host's ListSlots over and over: no UUID is ever on two slots;
- every fulfilled allocation was on its host's slot with its UUID when checked;
- the same allocationId POSTed twice (one after the other, or at once) names one server;
- no request fails for good (every retry exhausted).
Writes a JSON summary (--out): counts, latencies, the kept allocations.

Python's standard library has no D-Bus: slotd is read with busctl, as the other tests do.
"""

import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid


def now():
        return time.monotonic()


class Replicas:
        def __init__(self, urls, token, timeout):
                self.urls = [urllib.parse.urlsplit(u) for u in urls]
                self.token = token
                self.timeout = timeout
                self.local = threading.local()

        def conn(self, i):
                conns = getattr(self.local, "conns", None)
                if conns is None:
                        conns = self.local.conns = {}
                c = conns.get(i)
                if c is None:
                        u = self.urls[i]
                        c = conns[i] = http.client.HTTPConnection(u.hostname, u.port,
                                                                  timeout=self.timeout)
                return c

        def drop(self, i):
                c = self.local.conns.pop(i, None)
                if c:
                        c.close()

        def request(self, i, method, path, body=None):
                """(status, parsed body or text); status 0 when no answer came."""
                headers = {"Authorization": "Bearer " + self.token}
                data = None
                if body is not None:
                        data = json.dumps(body).encode()
                        headers["Content-Type"] = "application/json"
                for attempt in (0, 1):
                        c = self.conn(i)
                        try:
                                c.request(method, path, body=data, headers=headers)
                                r = c.getresponse()
                                raw = r.read()
                        except (OSError, http.client.HTTPException) as e:
                                self.drop(i)
                                # A kept-alive connection the server closed between requests:
                                # once more on a new one.
                                if attempt == 0 and isinstance(e, (http.client.RemoteDisconnected,
                                                                   BrokenPipeError,
                                                                   ConnectionResetError)):
                                        continue
                                return 0, str(e)
                        if r.getheader("Connection", "").lower() == "close":
                                self.drop(i)
                        try:
                                return r.status, json.loads(raw) if raw else None
                        except ValueError:
                                return r.status, raw.decode(errors="replace")
                return 0, "no answer"


class Run:
        def __init__(self, a):
                self.a = a
                self.rep = Replicas(a.replica, open(a.token_file).read().strip(), a.http_timeout)
                self.hosts = json.load(open(a.hosts))  # machine number -> bus address
                self.lock = threading.Lock()
                self.left = a.count
                self.started = 0
                self.violations = []
                self.records = []  # (uuid, machine, server, t_fulfilled, t_delete or None)
                self.post_lat = []
                self.fulfil_lat = []
                self.no_capacity = 0
                self.failovers = 0
                self.failures = []  # the first few answers that made a client fail over
                self.kept = []
                self.done = False
                self.deadline = now() + a.max_seconds

        def violation(self, msg):
                with self.lock:
                        self.violations.append(msg)
                print("VIOLATION: " + msg, file=sys.stderr, flush=True)

        def take(self):
                with self.lock:
                        if self.left <= 0 or now() > self.deadline:
                                return None
                        self.left -= 1
                        self.started += 1
                        n = self.started
                if self.a.progress and n % 10 == 0:
                        with open(self.a.progress, "w") as f:
                                f.write("%d\n" % n)
                return n

        # --- requests with fail-over ---

        def call(self, first, method, path, body, ok, what):
                """Sends to replica first, then the others in turn, until an answer in ok (or
                a 503 "no capacity", returned to the caller). Returns (replica, status, body)."""
                n = len(self.rep.urls)
                i = first
                end = now() + self.a.request_deadline
                while now() < end:
                        st, b = self.rep.request(i, method, path, body)
                        if st in ok:
                                return i, st, b
                        if st == 503 and isinstance(b, dict) and "no capacity" in b.get("error", ""):
                                return i, st, b
                        if st not in (0, 500, 502, 503, 504):
                                return i, st, b
                        with self.lock:
                                self.failovers += 1
                                if len(self.failures) < 10:
                                        self.failures.append("%s %s via replica %d: %s %s" % (
                                                method, path.rsplit("/", 1)[-1], i, st,
                                                str(b)[:200]))
                        i = (i + 1) % n
                        time.sleep(0.02)
                self.violation("%s: no replica answered within %ss" % (what, self.a.request_deadline))
                return None, 0, None

        def post(self, first, u):
                body = {"allocationId": u, "buildConfigurationId": self.a.build_configuration,
                        "regionId": self.a.region, "payload": "p-" + u}
                end = now() + self.a.request_deadline
                while True:
                        t0 = now()
                        i, st, b = self.call(first, "POST", self.a.collection, body, (200,),
                                             "POST " + u)
                        if st == 200:
                                with self.lock:
                                        self.post_lat.append(now() - t0)
                                if not isinstance(b, dict) or b.get("allocationId") != u:
                                        self.violation("POST %s answered %r" % (u, b))
                                return i
                        if st == 503 and now() < end and not self.done:
                                with self.lock:
                                        self.no_capacity += 1
                                # Every slot taken: one comes free when a DELETE is carried
                                # out by its host's registry, tens of ms away.
                                time.sleep(0.03 + random.random() * 0.04)
                                continue
                        if i is not None:
                                self.violation("POST %s: %s %r" % (u, st, b))
                        return None

        def get(self, first, u):
                return self.call(first, "GET", self.a.collection + "/" + u, None, (200, 404),
                                 "GET " + u)

        def wait_fulfilled(self, first, u):
                end = now() + self.a.fulfil_deadline
                last = None
                # A host confirms in tens of ms at best: the first look waits that long (each
                # GET is a linearizable read in etcd, the busiest process here).
                time.sleep(self.a.poll * 2)
                while now() < end:
                        i, st, b = self.get(first, u)
                        if st != 200:
                                self.violation("GET %s after its POST: %s %r" % (u, st, b))
                                return None
                        last = b
                        if b.get("status") == "fulfilled":
                                if not b.get("fulfilled") or type(b.get("machineId")) is not int \
                                   or b["machineId"] < 1:
                                        self.violation("GET %s: fulfilled without its fields: %r"
                                                       % (u, b))
                                return b
                        if b.get("status") not in ("claimed",):
                                self.violation("GET %s: status %r before fulfilled" % (u, b))
                                return None
                        if b.get("fulfilled"):
                                self.violation("GET %s: claimed with fulfilled set: %r" % (u, b))
                        time.sleep(self.a.poll)
                self.violation("allocation %s not fulfilled within %ss: last %r"
                               % (u, self.a.fulfil_deadline, last))
                return None

        # --- the truth ---

        def slot_uuid(self, machine, server):
                bus = self.hosts.get(str(machine))
                if bus is None:
                        return None, "machine %s is not one of the test's hosts" % machine
                r = subprocess.run(["busctl", "--address=" + bus, "get-property",
                                    "org.slotd.Supervisor1",
                                    "/org/slotd/Supervisor1/slot/%d" % int(server),
                                    "org.slotd.Supervisor1.Slot", "AllocationUUID"],
                                   capture_output=True, text=True, timeout=20)
                if r.returncode != 0:
                        return None, r.stderr.strip()
                return r.stdout.strip().removeprefix("s ").strip('"'), None

        def check_on_host(self, u, doc):
                got, err = self.slot_uuid(doc["machineId"], doc["serverId"])
                if got != u:
                        self.violation("allocation %s fulfilled on machine %s server %s, whose slot "
                                       "holds %r (%s)" % (u, doc["machineId"], doc["serverId"],
                                                          got, err or "busctl"))

        def same_server_again(self, i, u, doc):
                other = (i + 1) % len(self.rep.urls)
                j = self.post(other, u)
                if j is None:
                        return
                _, st, b = self.get(j, u)
                if st != 200 or (b.get("machineId"), b.get("serverId")) != (doc["machineId"],
                                                                             doc["serverId"]):
                        self.violation("allocation %s POSTed again names another server: first %s/%s,"
                                       " then %s %r" % (u, doc["machineId"], doc["serverId"], st, b))

        # --- one worker ---

        def dup_post(self, i, u, res):
                res.append(self.post(i, u))

        def one(self, w, n, last):
                u = str(uuid.uuid4())
                first = w % len(self.rep.urls)
                dup = random.random() < self.a.dup_share
                t0 = now()
                if dup:
                        res = []
                        th = threading.Thread(target=self.dup_post, args=((first + 1) %
                                                                          len(self.rep.urls), u, res))
                        th.start()
                i = self.post(first, u)
                if dup:
                        th.join()
                        if res[0] is None and i is not None:
                                self.violation("POST %s at once to both replicas: one failed" % u)
                if i is None:
                        return
                doc = self.wait_fulfilled(i, u)
                if doc is None:
                        return
                tf = now()
                with self.lock:
                        self.fulfil_lat.append(tf - t0)
                self.check_on_host(u, doc)
                self.same_server_again(i, u, doc)
                key = (doc["machineId"], str(doc["serverId"]))
                if last and w < self.a.keep:
                        with self.lock:
                                self.records.append((u, key, tf, None))
                                self.kept.append({"allocationId": u, "machineId": key[0],
                                                  "serverId": key[1]})
                        return
                td = now()
                _, st, b = self.call(i, "DELETE", self.a.collection + "/" + u, None, (204, 404),
                                     "DELETE " + u)
                if st not in (204, 404):
                        self.violation("DELETE %s: %s %r" % (u, st, b))
                with self.lock:
                        self.records.append((u, key, tf, td))

        def worker(self, w):
                n = self.take()
                while n is not None:
                        nxt = self.take()
                        self.one(w, n, nxt is None)
                        n = nxt

        # --- the fleet-wide sampler ---

        def sample(self):
                owners = {}
                for machine, bus in self.hosts.items():
                        r = subprocess.run(["busctl", "--address=" + bus, "--json=short", "call",
                                            "org.slotd.Supervisor1", "/org/slotd/Supervisor1",
                                            "org.slotd.Supervisor1.Manager", "ListSlots"],
                                           capture_output=True, text=True, timeout=20)
                        if r.returncode != 0:
                                continue  # a host the test took down
                        for e in json.loads(r.stdout)["data"][0]:
                                if e[4]:
                                        owners.setdefault(e[4], []).append("%s/%s" % (machine, e[0]))
                for u, where in owners.items():
                        if len(where) > 1:
                                self.violation("UUID %s on %d slots at once: %s" % (u, len(where), where))
                return len(owners)

        def sampler(self):
                self.samples = 0
                while not self.done:
                        self.sample()
                        self.samples += 1
                        time.sleep(self.a.sample_interval)

        def check_intervals(self):
                by_slot = {}
                for u, key, tf, td in self.records:
                        by_slot.setdefault(key, []).append((tf, td if td is not None else float("inf"), u))
                for key, iv in by_slot.items():
                        iv.sort()
                        for (a0, a1, ua), (b0, b1, ub) in zip(iv, iv[1:]):
                                if b0 < a1:
                                        self.violation("slot %s/%s given twice: %s held it from %.3f to "
                                                       "%.3f, %s from %.3f" % (key[0], key[1], ua, a0,
                                                                                a1, ub, b0))

        def main(self):
                s = threading.Thread(target=self.sampler)
                s.start()
                t0 = now()
                ws = [threading.Thread(target=self.worker, args=(w,)) for w in range(self.a.workers)]
                for t in ws:
                        t.start()
                for t in ws:
                        t.join()
                elapsed = now() - t0
                self.done = True
                s.join()
                self.sample()
                self.check_intervals()
                pct = lambda v, p: round(sorted(v)[min(len(v) - 1, int(p * len(v)))] * 1000, 1) if v else 0
                out = {"allocations": len(self.records), "asked": self.started,
                       "seconds": round(elapsed, 2),
                       "per_second": round(len(self.records) / elapsed, 1) if elapsed else 0,
                       "no_capacity_retries": self.no_capacity, "failovers": self.failovers,
                       "failures": self.failures,
                       "post_p50_ms": pct(self.post_lat, 0.5), "post_p99_ms": pct(self.post_lat, 0.99),
                       "fulfil_p50_ms": pct(self.fulfil_lat, 0.5),
                       "fulfil_p99_ms": pct(self.fulfil_lat, 0.99),
                       "samples": self.samples, "kept": self.kept,
                       "violations": len(self.violations)}
                with open(self.a.out, "w") as f:
                        json.dump(out, f)
                return 1 if self.violations else 0


def main():
        p = argparse.ArgumentParser()
        p.add_argument("--replica", action="append", required=True, help="base URL, repeatable")
        p.add_argument("--token-file", required=True)
        p.add_argument("--collection", required=True, help="…/fleets/F/allocations")
        p.add_argument("--hosts", required=True,
                       help="JSON file: machine number (the API's machineId) -> bus address")
        p.add_argument("--workers", type=int, default=32)
        p.add_argument("--count", type=int, default=1000)
        p.add_argument("--max-seconds", type=float, default=120)
        p.add_argument("--keep", type=int, default=0, help="workers that keep their last allocation")
        p.add_argument("--dup-share", type=float, default=0.1)
        p.add_argument("--build-configuration", default="1001")
        p.add_argument("--region", default="")
        p.add_argument("--progress", help="file the count of allocations started is written to")
        p.add_argument("--http-timeout", type=float, default=10)
        p.add_argument("--request-deadline", type=float, default=30)
        p.add_argument("--fulfil-deadline", type=float, default=30)
        p.add_argument("--poll", type=float, default=0.1)
        p.add_argument("--sample-interval", type=float, default=0.5)
        p.add_argument("--out", required=True)
        sys.exit(Run(p.parse_args()).main())


if __name__ == "__main__":
        main()
