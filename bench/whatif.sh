#!/usr/bin/env bash
# `gpuwl whatif relabel` on a generated cluster (BENCHMARKS.md, "whatif"): wall time from
# the command's start to its report (reading the dumps, starting the twin's control plane,
# creating its nodes and pods, two scheduler settles, read-back, tear-down), gpuwl's max
# RSS, and the twin's processes' summed RSS (sampled every 0.5 s) at their peak.
#
#   bench/whatif.sh                      # ~500 GPU nodes (667 in all), 5,000 pods, 2 runs
#   NODES=1334 PODS=10000 REPS=1 bench/whatif.sh
#   SKIP_BUILD=1 bench/whatif.sh         # the binaries already in target/release
#   SKIP_BUILD=1 G=/tmp/old/gpuwl GENDUMP=target/debug/examples/gendump bench/whatif.sh
#
# gendump spreads nodes 75 % GPU / 25 % CPU-only and binds every pod to a GPU node; the
# script adds a queue of 40 pending pods (tolerating every taint: gendump taints its GPU
# nodes) asking for the first passthrough node's device
# name, and relabels two container nodes with the same GPU product to vm-passthrough.
# The peer in the same run: `gpuwl inventory` on the same dumps (what reading and judging
# them costs without a twin).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench-whatif}
NODES=${NODES:-667}
PODS=${PODS:-5000}
REPS=${REPS:-2}
TWIN=${TWIN:-gpuwl-bench-twin}
mkdir -p "$WORK"
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }
cd "$ROOT"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --bin gpuwl --example gendump
G=${G:-$ROOT/target/release/gpuwl}
GENDUMP=${GENDUMP:-$ROOT/target/release/examples/gendump}
nf=$WORK/nodes-$NODES.json pf=$WORK/pods-$PODS.json
if [ ! -s "$pf" ]; then
    "$GENDUMP" --nodes "$NODES" --pods "$PODS" --seed 11 --compact --out "$nf" --pods-out "$WORK/bound.json"
    python3 - "$nf" "$WORK/bound.json" "$pf" <<'EOF'
import json, sys
nodes = json.load(open(sys.argv[1]))["items"]
pods = json.load(open(sys.argv[2]))
wc = lambda n: n["metadata"].get("labels", {}).get("nvidia.com/gpu.workload.config")
pt = next(n for n in nodes if wc(n) == "vm-passthrough")
name = next(k for k in pt["status"]["allocatable"] if k.startswith("nvidia.com/") and k != "nvidia.com/gpu")
for i in range(40):
    pods["items"].append({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"virt-launcher-queue-{i}-bench", "namespace": "vms"},
        "spec": {"tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "compute", "image": "x", "resources": {"limits": {name: "1"}}}]},
        "status": {"phase": "Pending"}})
json.dump(pods, open(sys.argv[3], "w"))
EOF
fi
read -r r1 r2 < <(python3 -c '
import json, sys
nodes = json.load(open(sys.argv[1]))["items"]
lab = lambda n, k: n["metadata"].get("labels", {}).get(k)
pt = next(n for n in nodes if lab(n, "nvidia.com/gpu.workload.config") == "vm-passthrough")
c = [n["metadata"]["name"] for n in nodes if lab(n, "nvidia.com/gpu.workload.config") == "container"
     and lab(n, "nvidia.com/gpu.product") == lab(pt, "nvidia.com/gpu.product")]
print(c[0], c[1])' "$nf")
gpu_nodes=$("$G" inventory --nodes "$nf" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["gpuNodes"])')
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')"
    echo "nproc: $(nproc)  $(lscpu | grep 'Model name' | sed 's/  */ /g')"
    echo "dumps: $NODES nodes ($gpu_nodes GPU), $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$pf") pods; relabel $r1 $r2 to vm-passthrough"
}
for _ in $(seq "$REPS"); do
    "$G" cluster down --name "$TWIN" >/dev/null 2>&1 || true
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    rc=0
    start=$(date +%s.%N)
    "$G" whatif relabel "$r1=vm-passthrough" "$r2=vm-passthrough" \
        --nodes "$nf" --pods "$pf" --twin-name "$TWIN" -o json > "$WORK/out.json" 2> "$WORK/err.log" &
    pid=$!
    # Every 0.5 s: the twin's processes' summed RSS (KiB), gpuwl's own RSS (KiB) and its own
    # CPU (utime+stime ticks; the twin's processes are its children, so /usr/bin/time's
    # figures would include them).
    : > "$WORK/samples"
    while kill -0 "$pid" 2>/dev/null; do
        twin=$(ps -o rss= -p "$(pgrep -d, -f "/$TWIN/" || echo 1)" 2>/dev/null | awk '{s+=$1} END {print s+0}')
        own=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        echo "${twin:-0} ${own:-0} ${cpu:-0}" >> "$WORK/samples"
        sleep 0.5
    done
    wait "$pid" || rc=$?
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    twin_peak=$(awk '$1 > m {m = $1} END {print int(m / 1024)}' "$WORK/samples")
    own_peak=$(awk '$2 > m {m = $2} END {print int(m / 1024)}' "$WORK/samples")
    both_peak=$(awk '$1 + $2 > m {m = $1 + $2} END {print int(m / 1024)}' "$WORK/samples")
    own_cpu=$(awk -v hz="$(getconf CLK_TCK)" '$3 > m {m = $3} END {printf "%.1f", m / hz}' "$WORK/samples")
    summary=$(python3 - "$WORK/out.json" <<'EOF2' 2>/dev/null || echo "no report (exit $rc): $(tail -n 1 "$WORK/err.log")"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["twin"]
print(f"twin {t['nodes']} nodes, {t['boundPods']} bound + {t['pendingPods']} pending pods; "
      f"now scheduled {len(r['nowScheduled'])}, still pending {len(r['stillPending'])}, "
      f"disrupted {len(r['disrupted'])}; gpuwl says {t['seconds']:.1f} s")
EOF2
)
    printf 'whatif: %.1f s wall, exit %s; gpuwl own CPU %s s, own peak RSS %s MiB; twin peak RSS %s MiB; gpuwl + twin peak %s MiB\n' \
        "$secs" "$rc" "$own_cpu" "$own_peak" "$twin_peak" "$both_peak"
    echo "  $summary"
    sed 's/^/  /' "$WORK/err.log"
done
/usr/bin/time -f "%e %U %M" -o "$WORK/time" "$G" inventory --nodes "$nf" --pods "$pf" -o json > /dev/null || true
read -r secs user kb < <(tail -n 1 "$WORK/time")
echo "peer: gpuwl inventory on the same dumps: ${secs}s wall, ${user}s user, max RSS $((kb / 1024)) MiB"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
