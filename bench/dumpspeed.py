#!/usr/bin/env python3
"""`gpuwl check FILE` against `cat FILE > /dev/null` and the jq checker, alternating.

    python3 bench/dumpspeed.py FILE [--reps 7] [--gpuwl target/release/gpuwl]
        [--old OLD_GPUWL] [--no-jq] [--fg /sys/fs/cgroup/cpu/fg] [--tsv OUT.tsv]

Each round runs every tool once, in the same order (cat, gpuwl, [old], jq), stdout to
/dev/null; wall time by `time.perf_counter` around the child (fork and exec included, the
same for every tool: finer than /usr/bin/time's 10 ms), CPU and peak RSS from the child's
rusage. With --fg, each child moves itself into that cgroup (v1 `cgroup.procs`) before
exec: on a shared machine the measured commands then do not queue behind builds. Prints
one row per run and, per tool, the median / min / max wall, the median CPU and peak RSS,
and the ratios of the medians. The page cache is warmed first (one `cat`). Needs jq for
the jq column (`bench/check-config.jq`, the lab checker's rules).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, fg):
    """Runs cmd, stdout and stderr to /dev/null; returns (wall_s, cpu_s, maxrss_kb, rc)."""
    if fg:
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', fg] + cmd
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--gpuwl", default=os.path.join(ROOT, "target/release/gpuwl"))
    ap.add_argument("--old")
    ap.add_argument("--no-jq", action="store_true")
    ap.add_argument("--fg")
    ap.add_argument("--tsv")
    a = ap.parse_args()
    tools = [("cat", ["cat", a.file]), ("gpuwl check", [a.gpuwl, "check", a.file])]
    if a.old:
        tools.append(("gpuwl check (old)", [a.old, "check", a.file]))
    if not a.no_jq:
        tools.append(("jq check-config.jq",
                      ["jq", "-r", "-f", os.path.join(ROOT, "bench/check-config.jq"), a.file]))
    run(["cat", a.file], None)
    size = os.path.getsize(a.file)
    rows = {name: [] for name, _ in tools}
    out = open(a.tsv, "a") if a.tsv else None
    print(f"file {a.file}: {size} bytes; load {os.getloadavg()[0]:.1f}")
    for rep in range(a.reps):
        for name, cmd in tools:
            wall, cpu, rss, rc = run(cmd, a.fg)
            rows[name].append((wall, cpu, rss))
            line = f"{name}\t{rep + 1}\t{wall:.4f}\t{cpu:.4f}\t{rss}\t{rc}\t{os.getloadavg()[0]:.1f}"
            print(line)
            if out:
                out.write(line + "\n")
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    med = {n: statistics.median(w for w, _, _ in r) for n, r in rows.items()}
    print("| tool | runs | wall ms median (min-max) | CPU ms median | peak RSS MB | MB/s (wall) | vs cat | vs gpuwl |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, r in rows.items():
        ws = [w for w, _, _ in r]
        print(f"| {n} | {len(r)} | {med[n] * 1e3:.1f} ({min(ws) * 1e3:.1f}-{max(ws) * 1e3:.1f}) | "
              f"{statistics.median(c for _, c, _ in r) * 1e3:.1f} | {max(m for _, _, m in r) / 1e3:.1f} | "
              f"{size / 1e6 / med[n]:.0f} | {med[n] / med['cat']:.2f}× | {med[n] / med['gpuwl check']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
