#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fleet-load: the load client of tests/bench/fleet-bench (README "Fleet benchmark").

N closed-loop clients (asyncio, one process) against slotd-allocator replicas, each on its own
keep-alive HTTP/1.1 connection: POST a new allocationId, wait until its record reads
"fulfilled" (a watch on <prefix>/allocations/<fleet>/ through etcd's JSON gateway, so that no
polling loads the allocator), then DELETE it, and again: churn, so that the fleet's capacity
lasts. After --warmup seconds, for --seconds seconds, it records:

  post_ms      POST sent -> its 200 read (the allocator's claim transaction)
  fulfil_ms    POST sent -> the watch event of the record's "fulfilled" put
  confirm_ms   the record's "claimed" -> "fulfilled" times (allocator and registry clocks,
               ms resolution): the host's watch, slotd's Allocate and the confirm transaction
  delete_ms    DELETE sent -> its 204
  etcd         revision, and etcd_mvcc_{put,delete,txn}_total, WAL fsyncs, backend commits,
               read from etcd before and after the window
  cpu          CPU seconds over the window of the PIDs named by --pid NAME=PID (repeatable)
               and of this client

Prints one JSON object (and writes it to --out).

usage: fleet-load.py --url URL[,URL] --token-file F --path PATH --etcd URL --prefix P
                     --fleet NAME --clients N --seconds S [--warmup S] [--pid NAME=PID]...
"""
import argparse
import asyncio
import base64
import json
import os
import re
import resource
import time
import urllib.parse
import urllib.request
import uuid


def b64(s):
    return base64.b64encode(s.encode()).decode()


def prefix_end(p):
    return p[:-1] + chr(ord(p[-1]) + 1)


def pct(v, p):
    if not v:
        return None
    v = sorted(v)
    k = max(1, int(p / 100.0 * len(v) + 0.999999))
    return round(v[k - 1], 3)


def rfc3339_ms(s):
    # "2026-11-24T10:00:00.000Z" -> ms since the epoch
    if not s:
        return None
    t = time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")
    ms = int(s[20:23]) if len(s) >= 23 and s[19] == "." else 0
    return (int(time.mktime(t)) - time.timezone) * 1000 + ms


def etcd_counters(endpoint):
    out = {}
    text = urllib.request.urlopen(endpoint + "/metrics", timeout=10).read().decode()
    want = {"etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_txn_total",
            "etcd_mvcc_range_total", "etcd_disk_wal_fsync_duration_seconds_count",
            "etcd_disk_wal_fsync_duration_seconds_sum",
            "etcd_disk_backend_commit_duration_seconds_count",
            "etcd_server_proposals_committed_total"}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m and m.group(1) in want:
            out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
        # the requests etcd served (each gateway request is one unary gRPC call)
        m = re.match(r'^grpc_server_handled_total\{.*grpc_method="([A-Za-z]+)".*'
                     r'grpc_type="unary"\} ([0-9.e+-]+)$', line)
        if m:
            out["requests"] = out.get("requests", 0) + float(m.group(2))
            out["requests_" + m.group(1)] = out.get("requests_" + m.group(1), 0) + float(m.group(2))
    st = urllib.request.urlopen(endpoint + "/v3/maintenance/status", b"{}", timeout=10).read()
    out["revision"] = int(json.loads(st)["header"]["revision"])
    return out


def cpu_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read().rsplit(")", 1)[1].split()
        return (int(s[11]) + int(s[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


class Conn:
    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.token = u.hostname, u.port, token
        self.r = self.w = None

    async def request(self, method, path, body=None):
        if self.w is None:
            self.r, self.w = await asyncio.open_connection(self.host, self.port)
        data = body.encode() if body is not None else b""
        head = ("%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
                "Content-Length: %d\r\n" % (method, path, self.host, self.port, self.token,
                                            len(data)))
        if body is not None:
            head += "Content-Type: application/json\r\n"
        self.w.write(head.encode() + b"\r\n" + data)
        try:
            status_line = await self.r.readline()
            if not status_line:
                raise ConnectionError("connection closed")
            status = int(status_line.split()[1])
            length, chunked, close = 0, False, False
            while True:
                line = await self.r.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                k, _, v = line.decode().partition(":")
                k, v = k.strip().lower(), v.strip().lower()
                if k == "content-length":
                    length = int(v)
                elif k == "transfer-encoding" and "chunked" in v:
                    chunked = True
                elif k == "connection" and v == "close":
                    close = True
            if chunked:
                out = b""
                while True:
                    n = int((await self.r.readline()).split(b";")[0], 16)
                    if n == 0:
                        await self.r.readline()
                        break
                    out += await self.r.readexactly(n)
                    await self.r.readline()
            else:
                out = await self.r.readexactly(length) if length else b""
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
            self.close()
            raise
        if close:
            self.close()
        return status, out

    def close(self):
        if self.w is not None:
            self.w.close()
        self.r = self.w = None


class Bench:
    def __init__(self, a):
        self.a = a
        self.token = open(a.token_file).readline().strip()
        self.urls = a.url.split(",")
        self.fulfilled = {}     # allocationId -> (monotonic time seen, record)
        self.waiters = {}       # allocationId -> future
        self.measuring = False
        self.stop = False
        self.post_ms, self.fulfil_ms, self.confirm_ms, self.delete_ms = [], [], [], []
        self.done = 0
        self.errors = {}

    def error(self, what):
        self.errors[what] = self.errors.get(what, 0) + 1

    async def watch(self, ready):
        p = self.a.prefix + "/allocations/" + self.a.fleet + "/"
        body = json.dumps({"create_request": {"key": b64(p), "range_end": b64(prefix_end(p))}})
        proc = await asyncio.create_subprocess_exec(
            "curl", "-sN", "-X", "POST", self.a.etcd + "/v3/watch", "-d", body,
            stdout=asyncio.subprocess.PIPE)
        self.watch_proc = proc
        while True:
            line = await proc.stdout.readline()
            if not line:
                return
            t = time.monotonic()
            try:
                res = json.loads(line).get("result", {})
            except ValueError:
                continue
            if res.get("created") and not ready.done():
                ready.set_result(True)
            for e in res.get("events", []):
                if e.get("type", "PUT") != "PUT":
                    continue
                doc = json.loads(base64.b64decode(e["kv"]["value"]))
                if doc.get("status") != "fulfilled":
                    continue
                u = doc["allocationId"]
                if u in self.fulfilled:
                    continue
                self.fulfilled[u] = (t, doc)
                f = self.waiters.pop(u, None)
                if f is not None and not f.done():
                    f.set_result(True)

    async def one(self, conn, path):
        u = str(uuid.uuid4())
        body = json.dumps({"allocationId": u, "buildConfigurationId": self.a.build_configuration})
        t0 = time.monotonic()
        fut = asyncio.get_running_loop().create_future()
        self.waiters[u] = fut
        status, out = await conn.request("POST", path, body)
        t1 = time.monotonic()
        if status != 200:
            self.waiters.pop(u, None)
            self.error("POST %d %s" % (status, out[:80].decode(errors="replace")))
            await asyncio.sleep(0.01)
            return
        if u not in self.fulfilled:
            try:
                await asyncio.wait_for(fut, self.a.fulfil_timeout)
            except asyncio.TimeoutError:
                self.waiters.pop(u, None)
                self.error("not fulfilled within %gs" % self.a.fulfil_timeout)
        seen = self.fulfilled.pop(u, None)
        t3 = time.monotonic()
        status, _ = await conn.request("DELETE", path + "/" + u)
        t4 = time.monotonic()
        if status != 204:
            self.error("DELETE %d" % status)
        if not self.measuring or seen is None:
            return
        self.done += 1
        self.post_ms.append((t1 - t0) * 1000)
        self.fulfil_ms.append((seen[0] - t0) * 1000)
        self.delete_ms.append((t4 - t3) * 1000)
        c, f = rfc3339_ms(seen[1].get("claimed")), rfc3339_ms(seen[1].get("fulfilled"))
        if c is not None and f is not None:
            self.confirm_ms.append(f - c)

    async def worker(self, w):
        conn = Conn(self.urls[w % len(self.urls)], self.token)
        path = self.a.path
        while not self.stop:
            try:
                await self.one(conn, path)
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as e:
                self.error("%s" % type(e).__name__)
                conn.close()
                await asyncio.sleep(0.01)
        conn.close()

    def pids(self):
        out = {}
        for spec in self.a.pid:
            name, _, pid = spec.partition("=")
            out.setdefault(name, []).append(int(pid))
        return out

    def cpu(self):
        out = {name: sum(c for c in (cpu_of(p) for p in ps) if c is not None)
               for name, ps in self.pids().items()}
        out["client"] = self_cpu()
        return out

    async def run(self):
        ready = asyncio.get_running_loop().create_future()
        wt = asyncio.create_task(self.watch(ready))
        await asyncio.wait_for(ready, 30)
        workers = [asyncio.create_task(self.worker(w)) for w in range(self.a.clients)]
        await asyncio.sleep(self.a.warmup)
        e0, c0, t0 = etcd_counters(self.a.etcd), self.cpu(), time.monotonic()
        self.measuring = True
        await asyncio.sleep(self.a.seconds)
        self.measuring = False
        e1, c1, t1 = etcd_counters(self.a.etcd), self.cpu(), time.monotonic()
        self.stop = True
        await asyncio.wait(workers, timeout=self.a.fulfil_timeout + 10)
        self.watch_proc.kill()
        await self.watch_proc.wait()
        wt.cancel()
        secs = t1 - t0
        n = max(self.done, 1)
        delta = {k: e1[k] - e0.get(k, 0) for k in e1}
        res = {
            "clients": self.a.clients, "replicas": len(self.urls), "seconds": round(secs, 3),
            "allocations": self.done, "per_sec": round(self.done / secs, 1),
            "post_p50": pct(self.post_ms, 50), "post_p99": pct(self.post_ms, 99),
            "fulfil_p50": pct(self.fulfil_ms, 50), "fulfil_p99": pct(self.fulfil_ms, 99),
            "confirm_p50": pct(self.confirm_ms, 50), "confirm_p99": pct(self.confirm_ms, 99),
            "delete_p50": pct(self.delete_ms, 50), "delete_p99": pct(self.delete_ms, 99),
            "etcd_revisions_per_alloc": round(delta["revision"] / n, 2),
            "etcd_puts_per_alloc": round(delta.get("etcd_mvcc_put_total", 0) / n, 2),
            "etcd_deletes_per_alloc": round(delta.get("etcd_mvcc_delete_total", 0) / n, 2),
            "etcd_txns_per_alloc": round(delta.get("etcd_mvcc_txn_total", 0) / n, 2),
            "etcd_ranges_per_alloc": round(delta.get("etcd_mvcc_range_total", 0) / n, 2),
            "etcd_requests_per_alloc": round(delta.get("requests", 0) / n, 2),
            "etcd_requests_by_method_per_alloc": {
                k[len("requests_"):]: round(v / n, 2) for k, v in sorted(delta.items())
                if k.startswith("requests_") and v > 0},
            "etcd_fsyncs_per_sec": round(
                delta.get("etcd_disk_wal_fsync_duration_seconds_count", 0) / secs, 1),
            "etcd_fsync_ms_mean": round(
                1000 * delta.get("etcd_disk_wal_fsync_duration_seconds_sum", 0) /
                max(delta.get("etcd_disk_wal_fsync_duration_seconds_count", 0), 1), 3),
            "cpu_pct": {k: round(100 * (c1[k] - c0[k]) / secs, 1) for k in c1},
            "errors": self.errors,
        }
        return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--etcd", required=True)
    ap.add_argument("--prefix", default="/slotd/v1")
    ap.add_argument("--fleet", default="game")
    ap.add_argument("--build-configuration", default="1001")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--fulfil-timeout", type=float, default=10)
    ap.add_argument("--pid", action="append", default=[])
    ap.add_argument("--out")
    a = ap.parse_args()
    res = asyncio.run(Bench(a).run())
    text = json.dumps(res)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
