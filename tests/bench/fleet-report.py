#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fleet-report: the table of tests/bench/fleet-bench, from the files of its run directory
(dbus-rtt, dbus-load1, dbus-load32: alloc-client's lines; fleet-1.json, fleet-32.json:
fleet-load's; propagation: registry-latency.py's line; death.json). Prints the Markdown
table and writes results/fleet-latest.json, results/fleet-latest.md and a line of
results/fleet-runs.tsv."""
import argparse
import json
import os
import re


def kv(path):
    with open(path) as f:
        return {k: v for k, v in (w.split("=", 1) for w in f.read().split() if "=" in w)}


def ms(usec):
    return float(usec) / 1000.0


def f(v, d=2):
    return "–" if v is None else ("%.*f" % (d, v))


def main():
    ap = argparse.ArgumentParser()
    for o in ("dir", "results", "started", "minutes", "load", "command", "rev", "hosts",
              "slots", "members", "replicas", "fsync", "lease-ttl", "strategy"):
        ap.add_argument("--" + o, required=True)
    a = ap.parse_args()
    d = a.dir
    rtt, l1, l32 = kv(d + "/dbus-rtt"), kv(d + "/dbus-load1"), kv(d + "/dbus-load32")
    fl = {c: json.load(open("%s/fleet-%d.json" % (d, c))) for c in (1, 32)}
    death = json.load(open(d + "/death.json"))
    prop_line = open(d + "/propagation").read().strip()
    nums = [float(x) for x in re.findall(r"(?:p50|p99|max) ([0-9.]+) ms", prop_line)]
    prop = dict(zip(("p50", "p99", "max", "etcd_p50", "etcd_p99", "etcd_max"), nums))
    dbus_rate = {1: float(l1["per_sec"]), 32: float(l32["per_sec"])}
    goal_rate = fl[32]["per_sec"] >= 1000
    goal_p99 = fl[32]["fulfil_p99"] is not None and fl[32]["fulfil_p99"] < 50
    out = {"started": a.started, "command": a.command, "rev": a.rev, "hosts": int(a.hosts),
           "slots": int(a.slots), "etcd_members": int(a.members),
           "replicas": int(a.replicas), "fsync": a.fsync, "strategy": a.strategy, "load": a.load,
           "dbus": {"rtt": rtt, "load1": l1, "load32": l32}, "fleet": fl,
           "propagation": prop, "propagation_line": prop_line, "death": death,
           "goal_1000_per_sec": goal_rate, "goal_p99_under_50ms": goal_p99}
    L = []
    L.append("%s UTC, `%s`, %s min; %d hosts x %d slots (tiny), etcd %s member(s) (fsync %s, "
             "data on %s), %s allocator replica(s), %s placement; load average %s at the start and the end; "
             "slotd %s" % (a.started, a.command, a.minutes, int(a.hosts), int(a.slots),
                           a.members, a.fsync, "the root file system", a.replicas, a.strategy,
                           " / ".join(a.load.split()), a.rev))
    L.append("")
    L.append("| | 1 client | 32 clients | slotd alone (D-Bus, host 1), 1 / 32 clients |")
    L.append("|---|---|---|---|")
    L.append("| allocations/s (allocate + deallocate churn) | %.0f | **%.0f** | %.0f / %.0f "
             "(Allocate + Deallocate pairs/s) |" % (fl[1]["per_sec"], fl[32]["per_sec"],
                                                   dbus_rate[1], dbus_rate[32]))
    L.append("| POST → 200 (claim in etcd), p50 / p99 ms | %s / %s | %s / %s | Allocate → "
             "reply %s / %s |" % (f(fl[1]["post_p50"]), f(fl[1]["post_p99"]),
                                  f(fl[32]["post_p50"]), f(fl[32]["post_p99"]),
                                  f(ms(rtt["alloc_p50"])), f(ms(rtt["alloc_p99"]))))
    L.append("| POST → fulfilled (watch event), p50 / p99 ms | %s / %s | **%s / %s** | |"
             % (f(fl[1]["fulfil_p50"]), f(fl[1]["fulfil_p99"]), f(fl[32]["fulfil_p50"]),
                f(fl[32]["fulfil_p99"])))
    L.append("| of which claimed → fulfilled (record times, ms), p50 / p99 | %s / %s | %s / %s |"
             " |" % (f(fl[1]["confirm_p50"], 0), f(fl[1]["confirm_p99"], 0),
                     f(fl[32]["confirm_p50"], 0), f(fl[32]["confirm_p99"], 0)))
    L.append("| DELETE → 204, p50 / p99 ms | %s / %s | %s / %s | Deallocate → reply %s / %s |"
             % (f(fl[1]["delete_p50"]), f(fl[1]["delete_p99"]), f(fl[32]["delete_p50"]),
                f(fl[32]["delete_p99"]), f(ms(rtt["dealloc_p50"])), f(ms(rtt["dealloc_p99"]))))
    for key, name in (("etcd_revisions_per_alloc", "etcd revisions (write transactions) per allocation"),
                      ("etcd_puts_per_alloc", "etcd puts per allocation"),
                      ("etcd_deletes_per_alloc", "etcd deletes per allocation"),
                      ("etcd_ranges_per_alloc", "etcd ranges (reads) per allocation"),
                      ("etcd_fsyncs_per_sec", "etcd WAL fsyncs/s"),
                      ("etcd_fsync_ms_mean", "etcd WAL fsync, mean ms")):
        L.append("| %s | %s | %s | |" % (name, fl[1][key], fl[32][key]))
    L.append("| etcd requests (gRPC calls, the gateway's included) per allocation | %s | %s | |"
             % tuple("%s (%s)" % (fl[c].get("etcd_requests_per_alloc", "–"), ", ".join(
                 "%s %s" % kv for kv in fl[c].get("etcd_requests_by_method_per_alloc", {}).items()))
                     for c in (1, 32)))
    for k in ("etcd", "allocator", "registry", "slotd", "dbus", "client"):
        L.append("| CPU %% of one core: %s | %s | %s | |" % (
            k + ("s" if k in ("registry", "slotd") else "") + (" (all hosts)" if k in (
                "registry", "slotd", "dbus") else ""),
            fl[1]["cpu_pct"].get(k, "–"), fl[32]["cpu_pct"].get(k, "–")))
    errs = {c: sum(fl[c]["errors"].values()) for c in (1, 32)}
    L.append("| errors (non-2xx, unfulfilled, resets) | %d | %d | D-Bus 32: %s |" % (
        errs[1], errs[32], l32.get("errors", "?")))
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    L.append("| slotd change → etcd watch event, p50 / p99 / max ms (issue: within 50 ms) | "
             "%s / %s / %s (%s) |" % (f(prop.get("p50"), 1), f(prop.get("p99"), 1),
                                      f(prop.get("max"), 1),
                                      "met" if prop.get("p99", 1e9) <= 50 else "**not met**"))
    L.append("| etcd alone (put → watch event), p50 / p99 ms | %s / %s |" % (
        f(prop.get("etcd_p50"), 1), f(prop.get("etcd_p99"), 1)))
    L.append("| host SIGKILLed → first / last of its %d slot keys deleted (lease TTL %s s) | "
             "%d / %d ms |" % (death["deleted"], death["lease_ttl_s"],
                               death["killed_to_first_ms"], death["killed_to_last_ms"]))
    L.append("| goal: ≥ 1,000 fleet allocations/s with p99 < 50 ms (32 clients) | %s |" % (
        "**met**" if goal_rate and goal_p99 else "**not met** (%.0f/s, p99 %s ms to fulfilled)"
        % (fl[32]["per_sec"], f(fl[32]["fulfil_p99"]))))
    md = "\n".join(L) + "\n"
    print(md)
    os.makedirs(a.results, exist_ok=True)
    with open(a.results + "/fleet-latest.md", "w") as fp:
        fp.write(md)
    with open(a.results + "/fleet-latest.json", "w") as fp:
        json.dump(out, fp, indent=1)
        fp.write("\n")
    row = [a.started, a.rev, a.hosts, a.slots, a.members, a.replicas, a.fsync, a.strategy,
           fl[1]["per_sec"], fl[32]["per_sec"], fl[32]["post_p50"], fl[32]["post_p99"],
           fl[32]["fulfil_p50"], fl[32]["fulfil_p99"], fl[32]["etcd_revisions_per_alloc"],
           prop.get("p50"), prop.get("p99"), death["killed_to_last_ms"], dbus_rate[1],
           dbus_rate[32], ms(rtt["alloc_p50"]), ms(rtt["alloc_p99"])]
    tsv = a.results + "/fleet-runs.tsv"
    new = not os.path.exists(tsv)
    with open(tsv, "a") as fp:
        if new:
            fp.write("\t".join(["started", "rev", "hosts", "slots", "etcd_members", "replicas",
                                "fsync", "strategy", "per_sec_1", "per_sec_32", "post_p50_32", "post_p99_32",
                                "fulfil_p50_32", "fulfil_p99_32", "etcd_revs_per_alloc",
                                "prop_p50", "prop_p99", "death_last_ms", "dbus_pairs_1",
                                "dbus_pairs_32", "dbus_alloc_p50", "dbus_alloc_p99"]) + "\n")
        fp.write("\t".join(str(x) for x in row) + "\n")


if __name__ == "__main__":
    main()
