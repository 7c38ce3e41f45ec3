#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of the source tree (docs/architecture.md), checked from the #include lines.

Every folder named in LAYERS may include headers only from its own folder and from folders
listed below it in its group. A header is found by its file name in the tree (the include
paths are flat), so `#include "manager.h"` from supervisor/bus counts as an edge bus -> core.
Prints every edge that breaks the order, with file and line, and exits 1 if there is one;
with --graph, prints the folder graph.
"""
import os
import re
import sys

# Top to bottom. A folder may include its own headers and those of any folder after it in the
# same list; a folder listed in none of them is a leaf anyone may use (common/, config/, ...).
LAYERS = {
    "supervisor": [
        "supervisor",  # main.c: wires the doors to the core
        "supervisor/bus",
        "supervisor/proxy",
        "supervisor/core",
        "supervisor/slot",
        "supervisor/process",
        "supervisor/state",
    ],
    "fleet": [
        "fleet/allocator",
        "fleet/registry",
        "fleet/docs",
        "fleet/etcd",
    ],
}
# Folders of one layer that may include each other (two doors side by side do not).
PEERS = {}
LEAVES = ["common", "config", "cgroups", "probes", "localproxy"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(root):
    for top in list(LAYERS) + LEAVES:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    files = list(sources(root))
    where = {}
    for f in files:
        where.setdefault(os.path.basename(f), os.path.dirname(f))
    rank = {}
    for group, order in LAYERS.items():
        for i, d in enumerate(order):
            rank[d] = (group, i)
    bad = []
    edges = {}
    for f in files:
        src = os.path.dirname(f)
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                name = m.group(1)
                # As the compiler does: the including file's folder first, then the flat paths.
                if os.path.exists(os.path.join(root, src, name)):
                    continue
                dst = where.get(os.path.basename(name))
                if dst is None or dst == src:
                    continue
                edges.setdefault((src, dst), []).append(f"{f}:{n}")
                if src in LEAVES and dst in rank:
                    bad.append(f"{f}:{n}: {src} (a leaf) includes {m.group(1)} of {dst}")
                    continue
                if src not in rank or dst not in rank:
                    continue
                (g1, r1), (g2, r2) = rank[src], rank[dst]
                if g1 == g2 and r2 <= r1 and dst not in PEERS.get(src, ()):
                    bad.append(f"{f}:{n}: {src} includes {m.group(1)} of {dst}, "
                               f"which is not below it")
    if "--graph" in sys.argv:
        for (s, d), where_ in sorted(edges.items()):
            print(f"{s} -> {d} ({len(where_)}: {where_[0]})")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} includes break the layers (tests/layout/layers.py)")
        return 1
    print(f"layers ok: {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
