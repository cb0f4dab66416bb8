#!/usr/bin/env bash
# `gpuwl serve` at scale on the local control plane: time to ready, resident memory after
# sync, time from a relabel (the API server has it: `kubectl label` returned) to the metric
# changing, CPU while idle. Peer in the same run: one-shot `gpuwl inventory` and
# `gpuwl check` against the same cluster; with KSM=<kube-state-metrics binary> also
# kube-state-metrics (v2.20.0, `GOBIN=DIR go install k8s.io/kube-state-metrics/v2@v2.20.0`)
# exporting the same nodes and pods (`--resources=nodes,pods`, the workload-config label
# allowed on kube_node_labels): time to a complete exposition, memory, idle CPU, and
# relabel → metric, measured the same way.
#
#   bench/serve.sh                       # SIZES="500 5000": N nodes, 4N pods each
#   SIZES=5000 IDLE=120 bench/serve.sh
#   SKIP_BUILD=1 bench/serve.sh          # measure the binaries already in target/release
#   KSM=/tmp/ksm/kube-state-metrics SIZES=1000 bench/serve.sh
#   REUSE=gpuwl-scale KSM=... bench/serve.sh  # measure on a local cluster already up and
#                                        # loaded (bench/scale.sh's, KEEP=1), left up
#
# Work files go to $WORK (default /tmp/gpuwl-bench, shared with bench/run.sh: the same
# generated dumps, --seed 7 --compact). Results: $WORK/results/serve.tsv and serve-*.log.
# Needs kubectl (for the relabels and the pod count) and the local control plane binaries.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench}
SIZES=${SIZES-500 5000}
IDLE=${IDLE:-60}
RELABELS=${RELABELS:-5}
CLUSTER=${CLUSTER:-gpuwl-bench-serve}
RES=$WORK/results
mkdir -p "$WORK" "$RES"
cd "$ROOT"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --bin gpuwl --example gendump --example loadcluster
B=$ROOT/target/release/gpuwl
EX=$ROOT/target/release/examples
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null

out=$RES/serve.tsv
printf 'nodes\tpods\tmetric\tvalue\n' >"$out"
row() { printf '%s\t%s\t%s\t%s\n' "$n" "$p" "$1" "$2" | tee -a "$out"; }
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l | sed 's/^\./0./'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The exposition goes to a file first: a reader that stops early (grep -q) would make curl
# fail on a broken pipe under pipefail.
scrape() { curl -s "http://$addr/metrics" -o "$WORK/metrics.txt"; }
metric() { scrape && awk -v m="$1" '$1 == m {print $2}' "$WORK/metrics.txt"; }

serve_pid= ksm_pid=
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    [ -n "$ksm_pid" ] && kill "$ksm_pid" 2>/dev/null || true
    [ -n "${REUSE:-}" ] || "$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [ -n "${REUSE:-}" ]; then CLUSTER=$REUSE SIZES=reuse; fi

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')"
    echo "nproc: $(nproc)  $(lscpu | grep 'Model name')"
    free -g | head -n 2
} | tee "$RES/serve-env.txt"

# kube-state-metrics on the same cluster, measured as serve is above: start → every node's
# kube_node_info and every pod's kube_pod_info in one scrape, RSS 5 s later and its peak,
# CPU over $IDLE s with nothing changed, then $RELABELS relabels to a typo and back, each
# until kube_node_labels shows the new value.
ksm_peer() {
    local port=${KSM_PORT:-18080} t0 c0 c1 hz
    t0=$(now)
    "$KSM" --kubeconfig "$kc" --host 127.0.0.1 --port "$port" --telemetry-host 127.0.0.1 \
        --telemetry-port "$((port + 1))" --resources=nodes,pods \
        --metric-labels-allowlist='nodes=[nvidia.com/gpu.workload.config]' 2>"$RES/ksm-$n.log" &
    ksm_pid=$!
    until curl -s "http://127.0.0.1:$port/metrics" -o "$WORK/ksm.txt" \
        && [ "$(grep -c '^kube_node_info{' "$WORK/ksm.txt")" -ge "$n" ] \
        && [ "$(grep -c '^kube_pod_info{' "$WORK/ksm.txt")" -ge "$p" ]; do sleep 0.1; done
    row "peer kube-state-metrics time to complete exposition s" "$(secs "$t0" "$(now)")"
    row "peer kube-state-metrics series" "$(grep -vc '^#' "$WORK/ksm.txt")"
    row "peer kube-state-metrics exposition bytes" "$(stat -c %s "$WORK/ksm.txt")"
    sleep 5
    row "peer kube-state-metrics RSS after sync MB" "$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$ksm_pid/status")"
    row "peer kube-state-metrics peak RSS MB" "$(awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$ksm_pid/status")"
    c0=$(cpu_ticks "$ksm_pid")
    sleep "$IDLE"
    c1=$(cpu_ticks "$ksm_pid")
    hz=$(getconf CLK_TCK)
    row "peer kube-state-metrics idle CPU % over ${IDLE}s" "$(echo "($c1 - $c0) * 100 / $hz / $IDLE" | bc -l | xargs printf '%.2f')"
    for i in $(seq "$RELABELS"); do
        for v in containr container; do
            kubectl --kubeconfig "$kc" label node "$node" "nvidia.com/gpu.workload.config=$v" --overwrite >/dev/null
            t1=$(now)
            until curl -s "http://127.0.0.1:$port/metrics" -o "$WORK/ksm.txt" \
                && grep "^kube_node_labels{" "$WORK/ksm.txt" | grep "node=\"$node\"" \
                | grep -q "label_nvidia_com_gpu_workload_config=\"$v\""; do sleep 0.02; done
            row "peer kube-state-metrics relabel to metric s ($v)" "$(secs "$t1" "$(now)")"
        done
    done
    kill "$ksm_pid"
    wait "$ksm_pid" || true
    ksm_pid=
}

for n in $SIZES; do
    if [ -n "${REUSE:-}" ]; then
        kc=$("$B" cluster kubeconfig --name "$CLUSTER")
        n=$(kubectl --kubeconfig "$kc" get nodes -o name | wc -l)
        p=$(kubectl --kubeconfig "$kc" get pods -A --chunk-size=500 -o name | wc -l)
        echo "== cluster $CLUSTER as it is: $n nodes / $p pods; load $(cut -d' ' -f1-3 /proc/loadavg)"
    else
        p=$((n * 4))
        nf=$WORK/live-nodes-$n.json pf=$WORK/live-pods-$n.json
        [ -s "$pf" ] || "$EX/gendump" --nodes "$n" --pods "$p" --seed 7 --compact --out "$nf" --pods-out "$pf"
        "$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true
        "$B" cluster up --name "$CLUSTER" -q
        kc=$("$B" cluster kubeconfig --name "$CLUSTER")
        echo "== $n nodes / $p pods"
        "$EX/loadcluster" --kubeconfig "$kc" --parallel 16 "$nf" "$pf" 2>&1 | tail -n 2
        for _ in $(seq 36); do
            running=$(kubectl --kubeconfig "$kc" get pods -A --field-selector=status.phase=Running --chunk-size=500 -o name 2>/dev/null | wc -l)
            [ "$running" -ge "$p" ] && break
            sleep 5
        done
        echo "$running of $p pods Running; load $(cut -d' ' -f1-3 /proc/loadavg)"
    fi

    # Peers: one-shot reads of the same cluster.
    /usr/bin/time -f '%e %M' -o "$WORK/t.txt" "$B" inventory --kubeconfig "$kc" >/dev/null
    read -r wall rss < <(tail -n 1 "$WORK/t.txt")
    row "peer gpuwl inventory wall s" "$wall"
    row "peer gpuwl inventory max RSS MB" "$(echo "$rss / 1024" | bc -l | xargs printf '%.1f')"
    /usr/bin/time -f '%e %M' -o "$WORK/t.txt" "$B" check --kubeconfig "$kc" >/dev/null 2>&1 || true
    # (exit 1: the generated cluster has planted mismatches; time then prints a first line)
    read -r wall rss < <(tail -n 1 "$WORK/t.txt")
    row "peer gpuwl check wall s" "$wall"
    row "peer gpuwl check max RSS MB" "$(echo "$rss / 1024" | bc -l | xargs printf '%.1f')"

    # Time to ready.
    log=$RES/serve-$n.log
    t0=$(now)
    "$B" serve --kubeconfig "$kc" --listen 127.0.0.1:0 2>"$log" &
    serve_pid=$!
    addr=
    for _ in $(seq 100); do
        addr=$(sed -n 's|^gpuwl serve: listening on http://\([^ ]*\).*|\1|p' "$log")
        [ -n "$addr" ] && break
        sleep 0.1
    done
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/readyz")" = 200 ]; do sleep 0.1; done
    row "time to ready s" "$(secs "$t0" "$(now)")"
    row "evaluation s" "$(metric gpuwl_last_evaluation_duration_seconds)"
    sleep 5
    row "RSS after sync MB" "$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$serve_pid/status")"
    row "peak RSS MB" "$(awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$serve_pid/status")"
    scrape
    row "series" "$(grep -vc '^#' "$WORK/metrics.txt")"
    row "exposition bytes" "$(stat -c %s "$WORK/metrics.txt")"

    # Idle: no change made by us for $IDLE s (kwok may still update objects).
    e0=$(metric gpuwl_evaluations_total) c0=$(cpu_ticks "$serve_pid")
    sleep "$IDLE"
    e1=$(metric gpuwl_evaluations_total) c1=$(cpu_ticks "$serve_pid")
    hz=$(getconf CLK_TCK)
    row "idle CPU % over ${IDLE}s" "$(echo "($c1 - $c0) * 100 / $hz / $IDLE" | bc -l | xargs printf '%.2f')"
    row "evaluations while idle" "$(echo "$e1 - $e0" | bc)"

    # Relabel → metric: a container node gets a typo, then its label back.
    scrape
    node=$(sed -n 's/^gpuwl_node_workload_config_info{node="\([^"]*\)",label_state="valid",effective="container".*/\1/p' "$WORK/metrics.txt" | sort | awk 'NR == 1')
    for i in $(seq "$RELABELS"); do
        for pair in "containr 1" "container 0"; do
            set -- $pair
            kubectl --kubeconfig "$kc" label node "$node" "nvidia.com/gpu.workload.config=$1" --overwrite >/dev/null
            t1=$(now)
            until scrape && grep -q "^gpuwl_node_mismatch{node=\"$node\"} $2\$" "$WORK/metrics.txt"; do sleep 0.02; done
            row "relabel to metric s ($1)" "$(secs "$t1" "$(now)")"
        done
    done
    row "RSS at end MB" "$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$serve_pid/status")"
    kill "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=

    if [ -n "${KSM:-}" ]; then
        ksm_peer
    fi
    [ -n "${REUSE:-}" ] || "$B" cluster down --name "$CLUSTER" >/dev/null
done
