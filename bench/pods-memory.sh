#!/usr/bin/env bash
# Peak memory and time of reading a 100,000-pod list (BENCHMARKS.md, "Pod reader"): the
# reader alone (examples/readpods) and `gpuwl inventory --pods`, optionally an older gpuwl
# binary beside in the same run, and `gpuwl check` on a node dump of the same run for the
# node reader's figure.
#
#   bench/pods-memory.sh
#   PODS=100000 REPS=3 OLD=/path/to/old/gpuwl bench/pods-memory.sh
#
# Work files (~640 MB pretty + ~180 MB compact) go to $WORK (default /tmp/gpuwl-bench-pods).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench-pods}
PODS=${PODS:-100000}
NODES=$((PODS / 4))
REPS=${REPS:-3}
OLD=${OLD:-}
mkdir -p "$WORK"
cd "$ROOT"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --bin gpuwl --example gendump --example readpods
B=$ROOT/target/release/gpuwl
EX=$ROOT/target/release/examples

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')  nproc: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
for style in compact pretty; do
    flag=""
    [ "$style" = compact ] && flag=--compact
    [ -s "$WORK/pods-$style.json" ] || "$EX/gendump" --nodes "$NODES" --pods "$PODS" --seed 1 $flag --out "$WORK/nodes-$style.json" --pods-out "$WORK/pods-$style.json" >/dev/null 2>&1
done
# one node, so that the inventory's figure is the pods'
printf '%s\n' '{"kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"8"}}}' >"$WORK/one-node.json"

run() { # run LABEL FILE CMD...
    local label=$1 file=$2
    shift 2
    local rc=0
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/stderr.txt" || rc=$?
    # check exits 1 when it printed MISMATCH lines (the dumps plant some)
    [ "$rc" = 0 ] || [ "$rc" = 1 ] || echo "($label exited $rc: $(head -c 300 "$WORK/stderr.txt"))"
    printf '%s\t%s MB\t%s\n' "$label" "$(($(stat -c %s "$file") / 1000000))" "$(tail -n 1 "$WORK/time.txt")"
}
printf 'what\tfile\twall_s user_s sys_s maxrss_kb\n'
for style in compact pretty; do
    f=$WORK/pods-$style.json
    cat "$f" >/dev/null
    for _ in $(seq "$REPS"); do
        run "pod reader (examples/readpods), $style" "$f" "$EX/readpods" "$f"
        run "gpuwl inventory --pods, $style" "$f" "$B" inventory --nodes "$WORK/one-node.json" --pods "$f"
        [ -z "$OLD" ] || run "old gpuwl inventory --pods, $style" "$f" "$OLD" inventory --nodes "$WORK/one-node.json" --pods "$f"
    done
done
# With the matching node dump (the pods are bound to its nodes), and the nodes alone.
f=$WORK/pods-compact.json n=$WORK/nodes-compact.json
for _ in $(seq "$REPS"); do
    run "gpuwl inventory, $NODES nodes alone, compact" "$n" "$B" inventory --nodes "$n"
    run "gpuwl inventory, $NODES nodes + $PODS pods, compact" "$f" "$B" inventory --nodes "$n" --pods "$f"
    [ -z "$OLD" ] || run "old gpuwl inventory, $NODES nodes + $PODS pods, compact" "$f" "$OLD" inventory --nodes "$n" --pods "$f"
done
f=$WORK/nodes-pretty.json
for _ in $(seq "$REPS"); do
    run "node reader (gpuwl check), pretty, $NODES nodes" "$f" "$B" check "$f"
done
