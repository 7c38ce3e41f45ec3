#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/bench/fleet-scale's report (tests/bench/README.md "Fleet at scale"): reads the run's
files (fleet-load's JSON of the 8 x 100 and N x M simulated fleets, the allocator's cold starts
and memory, host-sim's counters), prints a Markdown table and writes
results/fleet-scale-latest.{md,json} and a line of results/fleet-scale-runs.tsv."""
import argparse
import json
import os
import statistics


def num(path):
    return [int(x) for x in open(path).read().split()]


def f(x, fmt="%.2f"):
    return "n/a" if x is None else fmt % x


def main():
    ap = argparse.ArgumentParser()
    for o in ("dir", "results", "started", "minutes", "load", "command", "rev", "hosts",
              "slots", "clients", "lease-ttl"):
        ap.add_argument("--" + o, required=True)
    ap.add_argument("--etcd-batch-limit", default="500")
    ap.add_argument("--real")
    a = ap.parse_args()
    d = a.dir
    n = int(a.hosts) * int(a.slots)
    small = json.load(open(d + "/small-load.json"))
    big = json.load(open(d + "/big-load.json"))
    sims = {k: json.load(open("%s/%s-sim.json" % (d, k))) for k in ("small", "big")}
    starts = [num("%s/big-start-%d" % (d, i))[0] for i in range(1, 100)
              if os.path.exists("%s/big-start-%d" % (d, i))]
    sim_ready = open(d + "/big-sim-ready").read().strip()
    pss0, rss0 = num(d + "/empty-mem")
    pss1, rss1 = num(d + "/big-mem")
    pss2, rss2 = num(d + "/big-mem-after")
    per_slot_pss = (pss1 - pss0) * 1024 / n
    per_slot_rss = (rss1 - rss0) * 1024 / n
    per_slot_pss_after = (pss2 - pss0) * 1024 / n
    real = None
    if a.real:
        rj = json.load(open(a.real))
        real = rj["fleet"]["32"] if "32" in rj["fleet"] else rj["fleet"][32]
    ratio = big["per_sec"] / small["per_sec"] if small["per_sec"] else None
    start_med = statistics.median(starts)
    goals = {
        "rate_at_least_90pct_of_8x100": ratio is not None and ratio >= 0.9,
        "cold_start_at_most_2s": start_med <= 2000,
        "memory_at_most_1KiB_per_slot": per_slot_pss <= 1024,
        "scaler_reaction": None,
    }
    out = {"started": a.started, "command": a.command, "rev": a.rev, "load": a.load,
           "hosts": int(a.hosts), "slots_per_host": int(a.slots), "slots": n,
           "clients": int(a.clients), "lease_ttl_s": int(a.lease_ttl),
           "etcd_backend_batch_limit": a.etcd_batch_limit,
           "small_8x100": small, "big": big, "host_sim": sims, "host_sim_ready": sim_ready,
           "rate_ratio_big_to_small": ratio, "cold_start_ms": starts,
           "cold_start_ms_median": start_med,
           "allocator_kB": {"empty": {"pss": pss0, "rss": rss0},
                            "big_idle": {"pss": pss1, "rss": rss1},
                            "big_after_load": {"pss": pss2, "rss": rss2}},
           "bytes_per_slot": {"pss": per_slot_pss, "rss": per_slot_rss,
                              "pss_after_load": per_slot_pss_after},
           "real_8x100_32_clients": real, "goals": goals,
           "scaler": "measured by tests/bench/fleet-scaler-react"}
    c = int(a.clients)
    big_name = "%s x %s (simulated)" % (a.hosts, a.slots)
    L = []
    L.append("%s UTC, `%s`, %s min; one etcd member (fsync on, --backend-batch-limit %s), "
             "one allocator, packed placement, lease TTL %s s, %d clients; load average %s at "
             "the start and the end; slotd %s" % (a.started, a.command, a.minutes,
                                                 a.etcd_batch_limit, a.lease_ttl, c,
                                                 " / ".join(a.load.split()), a.rev))
    L.append("")
    head = "| | 8 x 100 (simulated) | %s | ratio |" % big_name
    if real:
        head = "| | 8 x 100 (real hosts, fleet-bench) " + head[1:]
    L.append(head)
    L.append("|---|" + "---|" * (4 if real else 3))

    def row(name, key, fmt="%.2f", ratio_of=True):
        cells = [f(small.get(key), fmt), f(big.get(key), fmt)]
        rt = (big[key] / small[key]) if ratio_of and small.get(key) and big.get(key) else None
        pre = [f(real.get(key), fmt)] if real else []
        L.append("| %s | %s | %s |" % (name, " | ".join(pre + cells), f(rt, "%.2f")))
    row("allocations/s (allocate + deallocate churn)", "per_sec", "%.0f")
    row("POST → fulfilled (watch event), p50 ms", "fulfil_p50")
    row("POST → fulfilled, p99 ms", "fulfil_p99")
    row("POST → 200 (claim in etcd), p99 ms", "post_p99")
    row("DELETE → 204, p99 ms", "delete_p99")
    row("etcd revisions per allocation", "etcd_revisions_per_alloc")
    for who in ("etcd", "allocator", "host-sim", "client"):
        cells = [f(x["cpu_pct"].get(who), "%.1f") for x in ([real] if real else []) + [small, big]]
        L.append("| CPU %% of one core: %s | %s | |" % (who, " | ".join(cells)))
    errs = [str(sum((x.get("errors") or {}).values())) for x in ([real] if real else []) + [small, big]]
    L.append("| errors (non-2xx, unfulfilled, resets) | %s | |" % " | ".join(errs))
    L.append("")
    L.append("| %s, the allocator | | goal | |" % big_name)
    L.append("|---|---|---|---|")
    L.append("| allocations/s, %s beside 8 x 100 simulated | **%.0f %%** | ≥ 90 %% | %s |"
             % (big_name, 100 * ratio, "**met**" if goals["rate_at_least_90pct_of_8x100"]
                else "**missed**"))
    L.append("| cold start: exec → /metrics shows the view ready with all %d slots (ms, %d "
             "starts; median) | %s; **%d** | ≤ 2,000 ms | %s |"
             % (n, len(starts), ", ".join(map(str, starts)), start_med,
                "**met**" if goals["cold_start_at_most_2s"] else "**missed**"))
    L.append("| memory per slot: PSS (RSS) less an empty fleet's allocator, idle | **%.0f B** "
             "(%.0f B) | ≤ 1,024 B | %s |"
             % (per_slot_pss, per_slot_rss,
                "**met**" if goals["memory_at_most_1KiB_per_slot"] else "**missed**"))
    L.append("| memory per slot: PSS after the load | %.0f B | | |" % per_slot_pss_after)
    L.append("| allocator PSS / RSS: empty fleet; %d slots idle; after the load (kB) | "
             "%d / %d; %d / %d; %d / %d | | |" % (n, pss0, rss0, pss1, rss1, pss2, rss2))
    L.append("| scaler's reaction to a drained buffer | measured apart: tests/bench/fleet-scaler-react | | |")
    L.append("| host-sim start-up (leases, documents of every host in etcd) | %s | | |"
             % sim_ready)
    L.append("| host-sim counters, %s | %s | | |" % (big_name, json.dumps(sims["big"])))
    md = "\n".join(L) + "\n"
    print(md)
    os.makedirs(a.results, exist_ok=True)
    with open(a.results + "/fleet-scale-latest.md", "w") as fp:
        fp.write(md)
    with open(a.results + "/fleet-scale-latest.json", "w") as fp:
        json.dump(out, fp, indent=1)
        fp.write("\n")
    tsv = a.results + "/fleet-scale-runs.tsv"
    new = not os.path.exists(tsv)
    with open(tsv, "a") as fp:
        if new:
            fp.write("started\trev\thosts\tslots\tclients\tsmall_per_sec\tbig_per_sec\tratio\t"
                     "small_fulfil_p99\tbig_fulfil_p99\tcold_start_ms\tbytes_per_slot_pss\t"
                     "load\n")
        fp.write("\t".join(str(x) for x in (
            a.started, a.rev, a.hosts, a.slots, c, small["per_sec"], big["per_sec"],
            "%.3f" % ratio, small["fulfil_p99"], big["fulfil_p99"], start_med,
            "%.0f" % per_slot_pss, a.load)) + "\n")


if __name__ == "__main__":
    main()
