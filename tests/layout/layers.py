#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of the source tree (docs/architecture.md), checked from the #include lines.

Every folder named in LAYERS may include headers only from its own folder and from folders
listed below it in its group. A header is found by its file name in the tree (the include
paths are flat), so `#include "manager.h"` from supervisor/bus counts as an edge bus -> core.
Prints every edge that breaks the order, with file and line, and exits 1 if there is one;
with --graph, prints the folder graph.

Inside the folders of MODULES, the same at the level of files: a module is x.c with its x.h
(or a header alone), and no modules may include each other's headers in a circle, unless
SPLIT declares them one module split for size; and the files of a layer named in UNREACHABLE
may not reach, through the headers they include, the headers named there.
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
# Folders side by side, though LAYERS lists one above the other: neither may include the other
# (supervisor/meson.build compiles each without the other's include directory).
APART = [
    ("supervisor/bus", "supervisor/proxy"),
    ("supervisor/process", "supervisor/state"),
]
LEAVES = ["common", "config", "cgroups", "probes", "localproxy"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
INCLUDE_ANY = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]')

# Folders checked file by file (fleet/allocator.h lists the allocator's modules, top first).
MODULES = ["fleet/allocator"]
# Modules of one folder that are one module split for size (one internal header shared, say):
# they may include each other. Each entry is a set of module names (file names without .c/.h).
SPLIT = {
    "fleet/allocator": [],
}
# A layer inside a folder, and the headers its files may not reach (directly or through the
# headers they include): the allocator's operations know nothing of HTTP (allocator-ops.h).
UNREACHABLE = {
    "fleet/allocator": {
        "layer": ["allocator-ops", "allocator-claim", "allocator-record", "allocator-capacity",
                  "allocator-replace", "allocator-scan", "allocator-cache", "allocator-view",
                  "allocator"],
        "headers": ["microhttpd.h", "mhd-event.h", "allocator-http.h", "allocator-api.h",
                    "allocator-answer.h", "allocator-request.h"],
    },
}


def sources(root):
    for top in list(LAYERS) + LEAVES:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def module(f):
    return os.path.splitext(os.path.basename(f))[0]


def read_includes(root, f, pattern):
    with open(os.path.join(root, f), encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            m = pattern.match(line)
            if m:
                yield n, m.group(1)


def resolve(root, src, name, where):
    """The file an #include "name" in folder src finds, relative to root, or None."""
    if os.path.exists(os.path.join(root, src, name)):
        return os.path.normpath(os.path.join(src, name))
    d = where.get(os.path.basename(name))
    return os.path.join(d, os.path.basename(name)) if d is not None else None


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan's)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_modules(root, files, where):
    """The file-level checks of MODULES: circles of modules, and UNREACHABLE headers."""
    bad = []
    for folder in MODULES:
        mine = [f for f in files if os.path.dirname(f) == folder]
        graph, lines = {}, {}
        for f in mine:
            graph.setdefault(module(f), set())
            for n, name in read_includes(root, f, INCLUDE):
                dst = resolve(root, folder, name, where)
                if dst is None or os.path.dirname(dst) != folder or module(dst) == module(f):
                    continue
                graph[module(f)].add(module(dst))
                lines.setdefault((module(f), module(dst)), f"{f}:{n}")
        for comp in cycles(graph):
            if any(comp <= set(s) for s in SPLIT.get(folder, [])):
                continue
            edges = [f"{lines[(a, b)]} ({a} -> {b})" for (a, b) in sorted(lines)
                     if a in comp and b in comp]
            bad.append(f"{folder}: modules include each other in a circle: "
                       f"{', '.join(sorted(comp))}: " + "; ".join(edges))
        rule = UNREACHABLE.get(folder)
        if not rule:
            continue
        for f in mine:
            if module(f) not in rule["layer"]:
                continue
            # Through the tree's headers, as the compiler would; system headers end a path.
            seen, todo = {f: None}, [f]
            while todo:
                cur = todo.pop()
                for n, name in read_includes(root, cur, INCLUDE_ANY):
                    if os.path.basename(name) in rule["headers"]:
                        path, at = [f"{cur}:{n}"], cur
                        while seen[at] is not None:
                            at = seen[at]
                            path.append(at)
                        bad.append(f"{f}: reaches {name}, which its layer may not "
                                   f"(through {' <- '.join(path)})")
                        continue
                    dst = resolve(root, os.path.dirname(cur), name, where)
                    if dst is not None and dst not in seen and \
                            os.path.exists(os.path.join(root, dst)):
                        seen[dst] = cur
                        todo.append(dst)
    return bad


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
                if (src, dst) in APART or (dst, src) in APART:
                    bad.append(f"{f}:{n}: {src} includes {m.group(1)} of {dst}, "
                               f"which stands beside it")
                    continue
                (g1, r1), (g2, r2) = rank[src], rank[dst]
                if g1 == g2 and r2 <= r1 and dst not in PEERS.get(src, ()):
                    bad.append(f"{f}:{n}: {src} includes {m.group(1)} of {dst}, "
                               f"which is not below it")
    bad += check_modules(root, files, where)
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
