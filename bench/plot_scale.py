#!/usr/bin/env python3
"""bench/scale.sh's results: prints the markdown table (median of runs per tool and size,
the peer side by side) and draws docs/img/scale.svg (wall time and peak memory per command
against cluster size). Standard library only.

    python3 bench/plot_scale.py RESULTS_DIR [SVG_OUT]
"""
import csv
import statistics
import sys
from collections import OrderedDict

res = sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpuwl-bench-scale/results"
svg_out = sys.argv[2] if len(sys.argv) > 2 else None

with open(f"{res}/scale.tsv") as f:
    rows = list(csv.DictReader(f, delimiter="\t"))
g = OrderedDict()
for r in rows:
    g.setdefault((r["tool"], int(r["nodes"])), []).append(r)


def cpu(r):
    return float(r["user_s"]) + float(r["sys_s"])


stats = {}
for (tool, n), rs in g.items():
    stats[(tool, n)] = dict(
        pods=int(rs[0]["pods"]),
        runs=len(rs),
        wall=statistics.median(float(r["wall_s"]) for r in rs),
        wmin=min(float(r["wall_s"]) for r in rs),
        wmax=max(float(r["wall_s"]) for r in rs),
        cpu=statistics.median(cpu(r) for r in rs),
        rss=statistics.median(int(r["maxrss_kb"]) for r in rs) / 1024,
        exits=",".join(sorted({r["exit"] for r in rs})),
        load=statistics.median(float(r["load1"]) for r in rs),
    )

print("| nodes | pods | command | runs | wall s median (min-max) | CPU s | peak RSS MB | exit | load |")
print("|---:|---:|---|---:|---:|---:|---:|---|---:|")
for (tool, n), s in stats.items():
    print(
        f"| {n:,} | {s['pods']:,} | {tool} | {s['runs']} | {s['wall']:.2f} ({s['wmin']:.2f}-{s['wmax']:.2f}) "
        f"| {s['cpu']:.2f} | {s['rss']:,.1f} | {s['exits']} | {s['load']:.1f} |"
    )
sizes = sorted({n for (_, n) in stats})
print()
print("| nodes | gpuwl | wall: kubectl-view-allocations / gpuwl | memory: gpuwl / kubectl-view-allocations |")
print("|---:|---|---:|---:|")
for n in sizes:
    b = stats.get(("kubectl-view-allocations", n))
    for t in ("gpuwl inventory (old)", "gpuwl inventory"):
        a = stats.get((t, n))
        if a and b:
            print(f"| {n:,} | {t} | {b['wall'] / a['wall']:.2f}× | {a['rss'] / b['rss']:.2f} |")

if svg_out:
    tools = list(OrderedDict((t, 1) for (t, _) in stats))
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    W, H, M = 900, 380, dict(l=70, r=20, t=40, b=50)
    pw = (W - M["l"] - M["r"] - 80) / 2
    ph = H - M["t"] - M["b"]
    xmax = max(sizes) * 1.05

    def panel(x0, key, title, unit):
        ymax = max(s[key] for s in stats.values()) * 1.1
        out = [f'<text x="{x0 + pw / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>']
        out.append(f'<rect x="{x0}" y="{M["t"]}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        X = lambda n: x0 + n / xmax * pw
        Y = lambda v: M["t"] + ph - v / ymax * ph
        for i in range(6):
            v = ymax * i / 5
            out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 6}" y="{Y(v) + 4:.1f}" text-anchor="end" font-size="11">{v:.3g}</text>')
        for n in sizes:
            out.append(f'<text x="{X(n):.1f}" y="{M["t"] + ph + 16}" text-anchor="middle" font-size="11">{n:,}</text>')
        out.append(f'<text x="{x0 + pw / 2}" y="{H - 12}" text-anchor="middle" font-size="12">nodes (pods = {stats[next(iter(stats))]["pods"] // sizes[0]} per node)</text>')
        out.append(f'<text x="{x0 - 50}" y="{M["t"] + ph / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 {x0 - 50} {M["t"] + ph / 2})">{unit}</text>')
        for i, t in enumerate(tools):
            pts = [(X(n), Y(stats[(t, n)][key])) for n in sizes if (t, n) in stats]
            c = colors[i % len(colors)]
            dash = ' stroke-dasharray="6 4"' if "kubectl" in t else ""
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>' for x, y in pts]
        return out

    body = panel(M["l"], "wall", "wall time (median of runs)", "seconds")
    body += panel(M["l"] + pw + 60 + 20, "rss", "peak resident memory", "MB")
    for i, t in enumerate(tools):
        y = M["t"] + 14 + 16 * i
        x = M["l"] + 10
        c = colors[i % len(colors)]
        body.append(f'<rect x="{x}" y="{y - 9}" width="12" height="3" fill="{c}"/><text x="{x + 18}" y="{y - 4}" font-size="11">{t}</text>')
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>\n"
    )
    with open(svg_out + ".tmp", "w") as f:
        f.write(svg)
    import os

    os.replace(svg_out + ".tmp", svg_out)
    print(f"\nwrote {svg_out}")
