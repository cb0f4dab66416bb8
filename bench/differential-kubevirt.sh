#!/usr/bin/env bash
# Runs the KubeVirt differential test (tests/it/kubevirt_differential.rs) at bench size:
# random VMI / VM situations (node advertisements, permittedHostDevices with PCI, mediated
# and usb entries, the KubeVirt CR's launcher settings, nodes near the launcher's needs,
# stopped VMs, CR edits under waiting launchers) decided by the real virt-api,
# virt-controller and kube-scheduler, against gpuwl's verdicts (the manifest before the VMI,
# the stopped VM, live explain vmi/vm, inventory, the admission guard, the model's launcher
# against the real one). Prints one DIFF-KV line per seed and the totals; each seed's log
# (with every disagreement) goes to $WORK/seed-N.log.
#
#   bench/differential-kubevirt.sh                     # seed 37, 300 scenarios
#   SEEDS="37 38" SCENARIOS=100 bench/differential-kubevirt.sh
#
# Needs the local control plane and KubeVirt binaries (`gpuwl cluster build --kubevirt`).
# Each seed starts and stops its own cluster (gpuwl-it-kvdiff); about 4-5 s per scenario on
# 2 cores. Export GPUWL_STATE_DIR to keep its state apart from other clusters.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-diff-kv}
SEEDS=${SEEDS:-37}
SCENARIOS=${SCENARIOS:-300}
mkdir -p "$WORK"
cd "$ROOT"
cargo test --test it --no-run >/dev/null 2>&1 || cargo test --test it --no-run
total=0 disagree=0
for s in $SEEDS; do
    start=$(date +%s)
    GPUWL_KV_DIFF_SEED=$s GPUWL_KV_DIFF_SCENARIOS=$SCENARIOS \
        cargo test --test it kubevirt_differential -- --ignored --nocapture >"$WORK/seed-$s.log" 2>&1
    line=$(grep '^DIFF-KV ' "$WORK/seed-$s.log" | tail -1)
    echo "${line:-DIFF-KV seed=$s: no result (see $WORK/seed-$s.log)} wall=$(($(date +%s) - start))s"
    [ -n "$line" ] || continue
    n=$(sed -E 's/.*scenarios=([0-9]+).*/\1/' <<<"$line")
    d=$(sed -E 's/.*disagreements=([0-9]+).*/\1/' <<<"$line")
    total=$((total + n)) disagree=$((disagree + d))
done
echo "TOTAL scenarios=$total disagreements=$disagree"
