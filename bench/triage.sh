#!/usr/bin/env bash
# Measures `gpuwl triage` on a generated must-gather bundle (BENCHMARKS.md, "Offline triage").
#
#   bench/triage.sh                  # 1,000 nodes, 3 runs
#   NODES=5000 REPS=5 bench/triage.sh
#   SKIP_BUILD=1 bench/triage.sh     # measure the binaries already in target/release
#
# The bundle (bench/genbundle.rs: gpu_nodes.descr as `kubectl describe` text, four whole
# operand pods per node in gpu_operand_pods.yaml, one log per pod, every 50th device plugin
# crash-looping) goes to $WORK (default /tmp/gpuwl-bench-triage), as a folder and as a
# .tar.gz. Prints one line per run: form, wall and user seconds, max RSS (MiB), exit code.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench-triage}
NODES=${NODES:-1000}
REPS=${REPS:-3}
mkdir -p "$WORK"
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }

if [ -z "${SKIP_BUILD:-}" ]; then
    (cd "$ROOT" && cargo build --release --bin gpuwl --example genbundle)
fi
G=$ROOT/target/release/gpuwl
B=$WORK/bundle-$NODES
if [ ! -d "$B" ]; then
    "$ROOT/target/release/examples/genbundle" "$NODES" "$B"
    tar -czf "$B.tar.gz" -C "$WORK" "bundle-$NODES"
fi
echo "bundle: $(du -sh "$B" | cut -f1) in $(ls "$B" | wc -l) files; tarball $(du -sh "$B.tar.gz" | cut -f1)"
echo "gpu_operand_pods.yaml: $(du -h "$B/gpu_operand_pods.yaml" | cut -f1), gpu_nodes.descr: $(du -h "$B/gpu_nodes.descr" | cut -f1)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for form in dir tar.gz; do
    path=$B; [ "$form" = tar.gz ] && path=$B.tar.gz
    for _ in $(seq "$REPS"); do
        rc=0
        /usr/bin/time -f "%e %U %M" -o "$WORK/time" "$G" triage "$path" -o json > "$WORK/out.json" || rc=$?
        read -r secs user kb < <(tail -n 1 "$WORK/time")
        echo "$form	${secs}s wall	${user}s user	$((kb / 1024)) MiB	exit $rc"
    done
done
