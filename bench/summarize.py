#!/usr/bin/env python3
"""Prints the markdown tables of BENCHMARKS.md from bench/run.sh's TSVs (medians of runs)."""
import csv, statistics, sys
from collections import OrderedDict

res = sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpuwl-bench/results"

def rows(name):
    try:
        with open(f"{res}/{name}") as f:
            return list(csv.DictReader(f, delimiter="\t"))
    except FileNotFoundError:
        return []

def groups(rs, key):
    g = OrderedDict()
    for r in rs:
        g.setdefault((r["tool"], r[key]), []).append(r)
    return g

def med(rs, f):
    return statistics.median(float(r[f]) for r in rs)

d = rows("dumps.tsv")
if d:
    print("| nodes | dump MB | tool | runs | wall s (median) | CPU s (user+sys) | MB/s wall | MB/s per CPU-s | peak RSS MB | vs gpuwl (wall) |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    g = groups(d, "nodes")
    for (tool, n), rs in g.items():
        mb = int(rs[0]["bytes"]) / 1e6
        wall = med(rs, "wall_s")
        cpu = statistics.median(float(r["user_s"]) + float(r["sys_s"]) for r in rs)
        rss = max(int(r["maxrss_kb"]) for r in rs) / 1024
        base = med(g[("gpuwl check", n)], "wall_s") if ("gpuwl check", n) in g else None
        ratio = f"{wall / base:.1f}×" if base and tool != "gpuwl check" else "1×"
        bad = "" if all(r["exit"] in ("0", "1") for r in rs) else " (exit " + ",".join(r["exit"] for r in rs) + ")"
        print(f"| {int(n):,} | {mb:,.0f} | {tool}{bad} | {len(rs)} | {wall:.2f} | {cpu:.2f} | {mb / wall:,.0f} | {mb / max(cpu, 1e-9):,.0f} | {rss:,.1f} | {ratio} |")
l = rows("live.tsv")
if l:
    print()
    print("| nodes | pods | tool | runs | wall s (median) | CPU s (user+sys) | peak RSS MB | vs gpuwl check (wall) |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    g = groups(l, "nodes")
    for (tool, n), rs in g.items():
        wall = med(rs, "wall_s")
        cpu = statistics.median(float(r["user_s"]) + float(r["sys_s"]) for r in rs)
        rss = max(int(r["maxrss_kb"]) for r in rs) / 1024
        base = med(g[("gpuwl check (live)", n)], "wall_s")
        bad = "" if all(r["exit"] in ("0", "1") for r in rs) else " (exit " + ",".join(r["exit"] for r in rs) + ")"
        print(f"| {int(n):,} | {int(rs[0]['pods']):,} | {tool}{bad} | {len(rs)} | {wall:.2f} | {cpu:.2f} | {rss:,.1f} | {wall / base:.1f}× |")
