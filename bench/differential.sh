#!/usr/bin/env bash
# The differential test of `explain` against the real kube-scheduler, at scale: starts a
# local control plane, runs ROUNDS rounds of TARGETS random target pods each (seed SEED;
# see tests/it/differential_harness.rs), prints every disagreement and the agreement
# figures (outcome, reasons, causes), and stops the cluster.
#
#   bench/differential.sh                       # 200 rounds x 10 = 2000 scenarios, seed 1
#   SEED=7 ROUNDS=50 bench/differential.sh
#   DEBUG=1 bench/differential.sh               # debug build
#   DISPROVE=1 bench/differential.sh            # every "none serves" put to the disprover
#                                               # (single changes tried on the scheduler)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-200}
TARGETS=${TARGETS:-10}
CLUSTER=${CLUSTER:-gpuwl-differential}
# DEBUG=1: the debug build (quicker to build when only the debug target is warm; the run
# itself is bound by the control plane, not by gpuwl).
if [ "${DEBUG:-}" = 1 ]; then PROFILE=debug; FLAG=; else PROFILE=release; FLAG=--release; fi
cargo build $FLAG --quiet --bin gpuwl --example differential
GPUWL=target/$PROFILE/gpuwl
$GPUWL cluster up --name "$CLUSTER" -q --nodes 0 >/dev/null
trap '$GPUWL cluster down --name "$CLUSTER" >/dev/null 2>&1 || true' EXIT
KC=$($GPUWL cluster kubeconfig --name "$CLUSTER")
if [ "${DISPROVE:-}" = 1 ]; then export GPUWL_DISPROVE=1; fi
echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $PROFILE build, seed $SEED, $ROUNDS rounds x $TARGETS targets, disprover ${DISPROVE:-0}, commit $(git rev-parse --short HEAD)"
target/$PROFILE/examples/differential --kubeconfig "$KC" --seed "$SEED" --rounds "$ROUNDS" --targets "$TARGETS"
