#!/usr/bin/env bash
# Reproduces every figure of the "Dump speed" and "Live scale" sections of BENCHMARKS.md.
#
#   bench/run.sh                     # dumps 500 / 5000 / 65000 nodes, live 500 / 5000 nodes
#   SIZES="500 5000" LIVE="500" bench/run.sh
#   LIVE= bench/run.sh               # dumps only;  SIZES= bench/run.sh  # live only
#   SKIP_BUILD=1 bench/run.sh        # measure the binaries already in target/release
#
# Work files (the 65,000-node dump is ~1.5 GB) go to $WORK (default /tmp/gpuwl-bench), never the
# repo. Results: $WORK/results/{env.txt,dumps.tsv,live.tsv,checks.txt}. Rerunnable: dumps
# are regenerated only when missing; the bench cluster is recreated for each live size.
# Installs what it needs when missing: jq and time (apt-get), kubectl-view-allocations
# (cargo install --locked, once). The local control plane binaries must be built already
# (`gpuwl cluster build`, see README).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench}
SIZES=${SIZES-500 5000 65000}
LIVE=${LIVE-500 5000}
REPS=${REPS:-3}
CLUSTER=${CLUSTER:-gpuwl-bench}
RES=$WORK/results
mkdir -p "$WORK" "$RES"

need_apt() { # need_apt CMD PACKAGE
    command -v "$1" >/dev/null 2>&1 && return
    if [ "$(id -u)" = 0 ]; then apt-get install -y "$2" >/dev/null; else sudo apt-get install -y "$2" >/dev/null; fi
}
need_apt jq jq
[ -x /usr/bin/time ] || need_apt /usr/bin/time time

cd "$ROOT"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --bin gpuwl --example gendump --example openapi_decode --example loadcluster
B=$ROOT/target/release/gpuwl
EX=$ROOT/target/release/examples

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')"
    echo "nproc: $(nproc)"
    lscpu | head -n 15
    free -g | head -n 2
    echo "uptime: $(uptime)"
    echo "jq: $(jq --version)  kubectl: $(kubectl version --client 2>/dev/null | head -n 1)"
    echo "rustc: $(rustc --version)"
} >"$RES/env.txt"
cat "$RES/env.txt"

# measure OUT LABEL SIZE BYTES REPS -- CMD...: runs CMD REPS times (stdout discarded), one TSV
# row per run: label size bytes wall_s user_s sys_s maxrss_kb exit
measure() {
    local out=$1 label=$2 size=$3 bytes=$4 reps=$5
    shift 6
    for _ in $(seq "$reps"); do
        local rc=0
        /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/stderr.txt" || rc=$?
        # /usr/bin/time puts "Command exited with non-zero status N" first on failure
        read -r wall user sys rss < <(tail -n 1 "$WORK/time.txt")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$size" "$bytes" "$wall" "$user" "$sys" "$rss" "$rc" | tee -a "$out"
    done
}

if [ -n "$SIZES" ]; then
    out=$RES/dumps.tsv
    printf 'tool\tnodes\tbytes\twall_s\tuser_s\tsys_s\tmaxrss_kb\texit\n' >"$out"
    : >"$RES/checks.txt"
    for n in $SIZES; do
        f=$WORK/nodes-$n.json
        if [ ! -s "$f" ] || [ ! -s "$f.stats" ]; then
            "$EX/gendump" --nodes "$n" --seed 1 --mismatch-pct 2 --out "$f" 2>"$f.stats"
        fi
        bytes=$(stat -c %s "$f")
        cat "$f" >/dev/null # warm page cache: all tools read from memory
        echo "== $n nodes, $bytes bytes, $(cat "$f.stats"), load: $(cut -d' ' -f1-3 /proc/loadavg)"
        # correctness: gpuwl and the jq script flag the same nodes, as many as planted
        "$B" check "$f" | cut -d' ' -f1 | sort >"$WORK/gpuwl.out" || true
        jq -r -f bench/check-config.jq "$f" | cut -d' ' -f1 | sort >"$WORK/jq.out"
        planted=$(sed -n 's/.*mismatches=\([0-9]*\).*/\1/p' "$f.stats")
        if diff -q "$WORK/gpuwl.out" "$WORK/jq.out" >/dev/null && [ "$(wc -l <"$WORK/gpuwl.out")" = "$planted" ]; then
            echo "$n: gpuwl and jq agree on $planted planted mismatches" | tee -a "$RES/checks.txt"
        else
            echo "$n: DISAGREE gpuwl=$(wc -l <"$WORK/gpuwl.out") jq=$(wc -l <"$WORK/jq.out") planted=$planted" | tee -a "$RES/checks.txt"
        fi
        peer_reps=$REPS
        [ "$n" -ge 50000 ] && peer_reps=1
        measure "$out" "gpuwl check" "$n" "$bytes" "$REPS" -- "$B" check "$f"
        measure "$out" "jq check-config.jq" "$n" "$bytes" "$peer_reps" -- jq -r -f bench/check-config.jq "$f"
        measure "$out" "k8s-openapi from_reader" "$n" "$bytes" "$peer_reps" -- "$EX/openapi_decode" "$f"
    done
fi

if [ -n "$LIVE" ]; then
    if ! command -v kubectl-view-allocations >/dev/null; then
        cargo install --locked kubectl-view-allocations
    fi
    echo "kubectl-view-allocations: $(kubectl-view-allocations --version 2>&1 | head -n 1)" >>"$RES/env.txt"
    out=$RES/live.tsv
    printf 'tool\tnodes\tpods\twall_s\tuser_s\tsys_s\tmaxrss_kb\texit\n' >"$out"
    trap '"$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true' EXIT
    for n in $LIVE; do
        p=$((n * 4))
        nf=$WORK/live-nodes-$n.json pf=$WORK/live-pods-$n.json
        if [ ! -s "$pf" ]; then
            "$EX/gendump" --nodes "$n" --pods "$p" --seed 7 --compact --out "$nf" --pods-out "$pf"
        fi
        "$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true
        rm -rf "${HOME}/.local/state/gpuwl/clusters/$CLUSTER"
        "$B" cluster up --name "$CLUSTER" -q
        kc=$("$B" cluster kubeconfig --name "$CLUSTER")
        echo "== live $n nodes / $p pods"
        "$EX/loadcluster" --kubeconfig "$kc" --parallel 16 "$nf" "$pf" 2>&1 | tee -a "$RES/checks.txt"
        # let kwok mark the pods Running before measuring (at most 3 min)
        for _ in $(seq 36); do
            running=$(kubectl --kubeconfig "$kc" get pods -A --field-selector=status.phase=Running --chunk-size=500 -o name 2>/dev/null | wc -l)
            [ "$running" -ge "$p" ] && break
            sleep 5
        done
        echo "live $n: $running of $p pods Running when measured, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$RES/checks.txt"
        measure "$out" "gpuwl check (live)" "$n" "$p" "$REPS" -- "$B" check --kubeconfig "$kc"
        measure "$out" "gpuwl inventory (live)" "$n" "$p" "$REPS" -- "$B" inventory --kubeconfig "$kc"
        measure "$out" "kubectl-view-allocations" "$n" "$p" "$REPS" -- env KUBECONFIG="$kc" kubectl-view-allocations
        measure "$out" "kubectl get nodes,pods -A -o json --chunk-size=500" "$n" "$p" "$REPS" -- kubectl --kubeconfig "$kc" get nodes,pods -A -o json --chunk-size=500
        "$B" cluster down --name "$CLUSTER" >/dev/null
    done
fi
python3 "$ROOT/bench/summarize.py" "$RES" | tee "$RES/tables.md"
echo "results in $RES"
