#!/usr/bin/env bash
# Runs the DRA differential test (tests/it/differential_dra.rs) many times: random DRA
# situations on the local control plane's real kube-scheduler, against explain's file-mode
# verdict. Prints one DIFF-DRA line per seed and the totals; the disagreements of each
# seed go to $WORK/seed-N.log.
#
#   bench/differential-dra.sh                    # seeds 1..5, 100 scenarios each
#   SEEDS="7 8" SCENARIOS=200 bench/differential-dra.sh
#   DISPROVE=1 bench/differential-dra.sh         # every "none serves" put to the disprover
#                                                # (single changes tried on the scheduler)
#   CLUSTER=NAME bench/differential-dra.sh       # another cluster name
#
# Needs the local control plane binaries (`gpuwl cluster build`). Each seed starts and
# stops its own cluster (gpuwl-test-diff-dra).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-diff-dra}
SEEDS=${SEEDS:-1 2 3 4 5}
SCENARIOS=${SCENARIOS:-100}
mkdir -p "$WORK"
if [ "${DISPROVE:-}" = 1 ]; then export GPUWL_DISPROVE=1; fi
if [ -n "${CLUSTER:-}" ]; then export GPUWL_DIFF_DRA_CLUSTER=$CLUSTER; fi
cd "$ROOT"
cargo test --test it --no-run >/dev/null 2>&1 || cargo test --test it --no-run
total=0 outcome=0 cause=0 pending=0 retried=0 fixed=0 fixes=0 none=0 harmful=0 disproved=0 tried=0 relaxed=0 unfinished=0
for s in $SEEDS; do
    GPUWL_DIFF_DRA_SEED=$s GPUWL_DIFF_DRA_SCENARIOS=$SCENARIOS \
        cargo test --test it differential_dra -- --ignored --nocapture >"$WORK/seed-$s.log" 2>&1
    line=$(grep '^DIFF-DRA ' "$WORK/seed-$s.log" | tail -1)
    echo "${line:-DIFF-DRA seed=$s: no result (see $WORK/seed-$s.log)}"
    [ -n "$line" ] || continue
    n=$(sed -E 's/.*scenarios=([0-9]+).*/\1/' <<<"$line")
    o=$(sed -E 's/.*outcome=([0-9]+)\/.*/\1/' <<<"$line")
    c=$(sed -E 's/.*cause=([0-9]+)\/.*/\1/' <<<"$line")
    p=$(sed -E 's/.*cause=[0-9]+\/([0-9]+).*/\1/' <<<"$line")
    r=$(sed -E 's/.*retried=([0-9]+).*/\1/' <<<"$line")
    fb=$(sed -E 's/.*fixes=([0-9]+)\/.*/\1/' <<<"$line")
    fc=$(sed -E 's/.*fixes=[0-9]+\/([0-9]+).*/\1/' <<<"$line")
    nn=$(sed -E 's/.*none=([0-9]+).*/\1/' <<<"$line")
    hh=$(sed -E 's/.*harmful=([0-9]+).*/\1/' <<<"$line")
    dd=$(sed -E 's/.*disproved=([0-9]+)\/.*/\1/' <<<"$line")
    dt=$(sed -E 's/.*disproved=[0-9]+\/([0-9]+).*/\1/' <<<"$line")
    rl=$(sed -E 's/.*relaxed-only=([0-9]+).*/\1/' <<<"$line")
    uf=$(sed -E 's/.*unfinished=([0-9]+).*/\1/' <<<"$line")
    disproved=$((disproved + dd)) tried=$((tried + dt)) relaxed=$((relaxed + rl)) unfinished=$((unfinished + uf))
    total=$((total + n)) outcome=$((outcome + o)) cause=$((cause + c)) pending=$((pending + p)) retried=$((retried + r))
    fixed=$((fixed + fb)) fixes=$((fixes + fc)) none=$((none + nn)) harmful=$((harmful + hh))
done
echo "TOTAL scenarios=$total outcome=$outcome/$total cause=$cause/$pending retried=$retried fixes bound=$fixed/$fixes said-none-serves=$none harmful=$harmful disproved=$disproved/$tried relaxed-only=$relaxed unfinished=$unfinished (commit $(git rev-parse --short HEAD))"
echo "said none serves, by reasonCode (all seeds):"
cat "$WORK"/seed-*.log 2>/dev/null | grep '^NONE ' | sed -E 's/^NONE [a-z-]+ \[([a-z-]*)\].*/\1/' | sort | uniq -c
