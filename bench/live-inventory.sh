#!/usr/bin/env bash
# Live `gpuwl inventory` against kubectl-view-allocations on the local control plane, in one
# run, alternating, optionally with an older gpuwl binary beside (BENCHMARKS.md, "Live pod
# decoding").
#
#   GPUWL_STATE_DIR=/tmp/gpuwl-state bench/live-inventory.sh
#   NODES=2000 PODS=8000 REPS=3 OLD=/path/to/old/gpuwl bench/live-inventory.sh
#
# Needs: the control-plane binaries built (`gpuwl cluster build`), kubectl-view-allocations
# on PATH (`cargo install --locked kubectl-view-allocations`), /usr/bin/time. Builds gpuwl,
# gendump and loadcluster in release. Work files go to $WORK (default /tmp/gpuwl-bench-live).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench-live}
NODES=${NODES:-2000}
PODS=${PODS:-8000}
REPS=${REPS:-3}
CLUSTER=${CLUSTER:-gpuwl-bench-live}
OLD=${OLD:-}
mkdir -p "$WORK"
cd "$ROOT"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --bin gpuwl --example gendump --example loadcluster
B=$ROOT/target/release/gpuwl
EX=$ROOT/target/release/examples
KVA=$(command -v kubectl-view-allocations || echo "$HOME/.cargo/bin/kubectl-view-allocations")

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')  nproc: $(nproc)"
echo "kubectl-view-allocations: $("$KVA" --version 2>&1 | head -n 1)"

nf=$WORK/nodes-$NODES.json pf=$WORK/pods-$PODS.json
[ -s "$pf" ] || "$EX/gendump" --nodes "$NODES" --pods "$PODS" --seed 7 --compact --out "$nf" --pods-out "$pf"
trap '"$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true' EXIT
"$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true
"$B" cluster up --name "$CLUSTER" -q >/dev/null
kc=$("$B" cluster kubeconfig --name "$CLUSTER")
"$EX/loadcluster" --kubeconfig "$kc" --parallel 16 "$nf" "$pf"
running=0
for _ in $(seq 60); do
    running=$(kubectl --kubeconfig "$kc" get pods -A --field-selector=status.phase=Running --chunk-size=500 -o name 2>/dev/null | wc -l)
    [ "$running" -ge "$PODS" ] && break
    sleep 5
done
echo "$running of $PODS pods Running when measured"

# Same answer from old and new (the table), before timing.
if [ -n "$OLD" ]; then
    if diff <("$OLD" inventory --kubeconfig "$kc") <("$B" inventory --kubeconfig "$kc") >/dev/null; then
        echo "old and new gpuwl print the same inventory"
    else
        echo "old and new gpuwl print DIFFERENT inventories"
    fi
fi

run() { # run LABEL CMD...: one timed run, one line: label wall user sys maxrss_kb
    local label=$1
    shift
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/stderr.txt" || echo "($label exited non-zero: $(head -c 300 "$WORK/stderr.txt"))"
    printf '%s\t%s\n' "$label" "$(tail -n 1 "$WORK/time.txt")"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'tool\twall_s user_s sys_s maxrss_kb\n'
for _ in $(seq "$REPS"); do
    [ -z "$OLD" ] || run "gpuwl inventory (old)" "$OLD" inventory --kubeconfig "$kc"
    run "gpuwl inventory" "$B" inventory --kubeconfig "$kc"
    run "kubectl-view-allocations" env KUBECONFIG="$kc" "$KVA"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
