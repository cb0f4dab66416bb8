#!/usr/bin/env bash
# The differential test of `explain` against the real kube-scheduler, at scale: starts a
# local control plane, runs ROUNDS rounds of TARGETS random target pods each (seed SEED;
# see tests/it/differential_harness.rs), prints every disagreement and the agreement
# figures (outcome, reasons, causes), and stops the cluster.
#
#   bench/differential.sh                       # 200 rounds x 10 = 2000 scenarios, seed 1
#   SEED=7 ROUNDS=50 bench/differential.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-200}
TARGETS=${TARGETS:-10}
CLUSTER=${CLUSTER:-gpuwl-differential}
cargo build --release --quiet --example differential
target/release/gpuwl cluster up --name "$CLUSTER" -q --nodes 0 >/dev/null
trap 'target/release/gpuwl cluster down --name "$CLUSTER" >/dev/null 2>&1 || true' EXIT
KC=$(target/release/gpuwl cluster kubeconfig --name "$CLUSTER")
echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, seed $SEED, $ROUNDS rounds x $TARGETS targets"
target/release/examples/differential --kubeconfig "$KC" --seed "$SEED" --rounds "$ROUNDS" --targets "$TARGETS"
