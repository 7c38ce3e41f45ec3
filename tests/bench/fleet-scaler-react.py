#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/bench/fleet-scaler-react's driver (tests/bench/README.md, "The scaler's reaction
time"): one round drains the scaler's buffer with a burst of allocations, times how long the
fleet view takes to show the buffer refilled, then deletes them and times how long the surplus
takes to be stopped. The fleet view is read through the allocator's capacity answer (SPEC §13):
the region's "scaler" object, {"buffer","busy","free","wanted",...}, polled every --poll s
(50 ms; the answer is made from counts the view keeps, capacity-index.h, not a tally of the
fleet's slots since 475fab3).

  fleet-scaler-react.py --url URL --token-file F --path COLLECTION --fleet NAME --region ID
                        --build-configuration ID --drain D [--threads T] [--timeout S] [--poll S]

Prints one JSON object: drain (D), post_s (first POST sent -> last 200), refill_s (last 200 ->
free back to the buffer with D busy), delete_s (first DELETE sent -> last 204), stop_s (last
204 -> free back to the buffer with none busy), buffer, the errors (a non-200/204), and
capacity_ms_median and capacity_ms_p90 (the capacity answer's time as the client sees it, the
poll's cost) of capacity_answers polls, and capacity_idle_ms_median and _p90 of
--idle-samples (20) answers asked one after the other before the drain (the answer's own
cost, the fleet at rest)."""
import argparse
import concurrent.futures
import http.client
import json
import sys
import threading
import time
import urllib.parse
import uuid

local = threading.local()


def conn(url):
    c = getattr(local, "conn", None)
    if c is None:
        u = urllib.parse.urlsplit(url)
        c = local.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    return c


def request(a, method, path, body=None):
    headers = {"Authorization": "Bearer " + a.token}
    if body is not None:
        headers["Content-Type"] = "application/json"
    for attempt in range(2):
        c = conn(a.url)
        try:
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            return r.status, r.read()
        except (http.client.HTTPException, OSError):
            c.close()
            local.conn = None
            if attempt:
                raise
    return None, b""


VIEW_MS = []


def scaler_view(a):
    t0 = time.monotonic()
    status, body = request(a, "GET", "/v1/fleets/%s/capacity" % a.fleet)
    VIEW_MS.append((time.monotonic() - t0) * 1000)
    if status != 200:
        return None
    return json.loads(body)["regions"].get(a.region, {}).get("scaler")


def wait_for(a, what, cond):
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline:
        v = scaler_view(a)
        if v is not None and cond(v):
            return time.monotonic(), v
        time.sleep(a.poll)
    sys.exit("fleet-scaler-react: timed out after %d s waiting for %s (last view %s)"
             % (a.timeout, what, scaler_view(a)))


def burst(a, pool, method, ids):
    def one(i):
        if method == "POST":
            body = json.dumps({"allocationId": i, "buildConfigurationId": a.build})
            return request(a, "POST", a.path, body)[0]
        return request(a, "DELETE", "%s/%s" % (a.path, i))[0]

    t0 = time.monotonic()
    codes = list(pool.map(one, ids))
    return t0, time.monotonic(), codes


def main():
    ap = argparse.ArgumentParser()
    for o in ("url", "token-file", "path", "fleet", "region", "build-configuration"):
        ap.add_argument("--" + o, required=True)
    ap.add_argument("--drain", type=int, required=True)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--poll", type=float, default=0.05)
    ap.add_argument("--idle-samples", type=int, default=20)
    a = ap.parse_args()
    a.token = open(a.token_file).read().strip()
    a.build = a.build_configuration
    _, v0 = wait_for(a, "the scaler's buffer full", lambda v: v["free"] >= v["buffer"] and v["busy"] == 0)
    buffer = v0["buffer"]
    idle = []
    for _ in range(a.idle_samples):
        t0 = time.monotonic()
        request(a, "GET", "/v1/fleets/%s/capacity" % a.fleet)
        idle.append((time.monotonic() - t0) * 1000)
    idle.sort()
    ids = [str(uuid.uuid4()) for _ in range(a.drain)]
    with concurrent.futures.ThreadPoolExecutor(a.threads) as pool:
        p0, p1, posts = burst(a, pool, "POST", ids)
        t_refill, _ = wait_for(a, "the buffer refilled",
                               lambda v: v["busy"] >= a.drain and v["free"] >= buffer)
        d0, d1, deletes = burst(a, pool, "DELETE", ids)
        t_stop, _ = wait_for(a, "the surplus stopped",
                             lambda v: v["busy"] == 0 and v["free"] == buffer)
    errors = sum(c != 200 for c in posts) + sum(c != 204 for c in deletes)
    print(json.dumps({"drain": a.drain, "buffer": buffer, "post_s": round(p1 - p0, 3),
                      "refill_s": round(t_refill - p1, 3), "delete_s": round(d1 - d0, 3),
                      "stop_s": round(t_stop - d1, 3), "errors": errors,
                      "capacity_ms_median": round(sorted(VIEW_MS)[len(VIEW_MS) // 2], 1),
                      "capacity_ms_p90": round(sorted(VIEW_MS)[len(VIEW_MS) * 9 // 10], 1),
                      "capacity_answers": len(VIEW_MS),
                      "capacity_idle_ms_median": round(idle[len(idle) // 2], 1) if idle else None,
                      "capacity_idle_ms_p90": round(idle[len(idle) * 9 // 10], 1) if idle else None}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
