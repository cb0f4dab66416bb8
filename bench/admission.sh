#!/usr/bin/env bash
# p50/p99 latency of `gpuwl serve`'s admission guard at a fixed rate of AdmissionReviews
# (default 200/s for 30 s) over HTTPS on 127.0.0.1, on the lab cluster and on the lab
# cluster grown by N generated nodes and 4N pods (the watch state the guard judges from):
#
#   bench/admission.sh                      # SIZES="0 5000"
#   SIZES=0 RATE=400 DURATION=60 bench/admission.sh
#   SKIP_BUILD=1 bench/admission.sh         # the binaries already in target/release
#   OWN_CORE=1 bench/admission.sh           # the guard on a core of its own (see below)
#   REUSE=gpuwl-scale SKIP_BUILD=1 bench/admission.sh  # on a local cluster already up and
#                                           # loaded (bench/scale.sh's, KEEP=1): the lab is
#                                           # run on it, nothing is loaded, it is left up
#   POD=~/gpuwl/k8s/pod-passthrough.yaml REUSE=gpuwl-scale SKIP_BUILD=1 bench/admission.sh
#                                           # (the manifest any `gpuwl lab` run writes)
#                                           # no lab: the reviewed object is POD as the API
#                                           # server returns it from a server-side dry run
#                                           # (right after a bulk load kwok can take longer
#                                           # than the lab's 60 s to mark new nodes Ready)
#
# The reviewed object is the lab's vmi-passthrough pod as the API server returns it, in turn
# as it is (allowed) and with nvidia.com/GA102GL_A10 mistyped as nvidia.com/GA102GL_A1 (a
# warning with the did-you-mean); the peer in the same run is GET /healthz on the same
# connections (bench/admission_load.rs). The guard's certificate is the one serve generates;
# its CA is read back from the ValidatingWebhookConfiguration --admission-register applied.
# Results: $WORK/results/admission-*.txt.
#
# OWN_CORE=1 gives the guard a core of its own, as a webhook pod with a whole-CPU request
# gets under the kubelet's static CPU manager policy: once the cluster is loaded, every
# thread of the local control plane (etcd, kube-apiserver, controller-manager, scheduler,
# kwok) is pinned to the first core (taskset), serve and the load generator to the last.
# Without it all of them share both cores; PRIO="nice -n -15" then only orders them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuwl-bench}
SIZES=${SIZES-0 5000}
RATE=${RATE:-200}
DURATION=${DURATION:-30}
CONNECTIONS=${CONNECTIONS:-4}
CLUSTER=${CLUSTER:-gpuwl-bench-admission}
PRIO=${PRIO:-}
OWN_CORE=${OWN_CORE:-}
RES=$WORK/results
mkdir -p "$WORK" "$RES"
cd "$ROOT"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --bin gpuwl --example admission_load --example gendump --example loadcluster
B=$ROOT/target/release/gpuwl
EX=$ROOT/target/release/examples

serve_pid=
# CPU seconds and nice of serve's threads by name (the guard's, the main runtime's).
threads() {
    for t in /proc/"$serve_pid"/task/*; do
        echo "$(cat "$t/comm") $(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz, $19}' "$t/stat")"
    done | awk '{c[$1] += $2; n[$1] = $3} END {for (k in c) printf "%s: %.1f s, nice %s; ", k, c[k], n[k]}'
}
REUSE=${REUSE:-}
if [ -n "$REUSE" ]; then CLUSTER=$REUSE SIZES=reuse; fi
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    [ -n "$REUSE" ] || "$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true
}
trap cleanup EXIT

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo ' (+ uncommitted changes)')"
    echo "nproc: $(nproc)  $(lscpu | grep 'Model name')"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "reviewed object: ${POD:-the lab pod gpu-vm/vmi-passthrough}"
} | tee "$RES/admission-env.txt"

for n in $SIZES; do
    [ -n "$REUSE" ] || "$B" cluster down --name "$CLUSTER" >/dev/null 2>&1 || true
    [ -n "${POD:-}" ] || "$B" lab --cluster-name "$CLUSTER" --root "$WORK/admission-lab" >/dev/null
    kc=$("$B" cluster kubeconfig --name "$CLUSTER")
    if [ "$n" != reuse ] && [ "$n" -gt 0 ]; then
        p=$((n * 4))
        nf=$WORK/live-nodes-$n.json pf=$WORK/live-pods-$n.json
        [ -s "$pf" ] || "$EX/gendump" --nodes "$n" --pods "$p" --seed 7 --compact --out "$nf" --pods-out "$pf"
        "$EX/loadcluster" --kubeconfig "$kc" --parallel 16 "$nf" "$pf" 2>&1 | tail -n 1
    fi
    if [ -n "${POD:-}" ]; then
        kubectl --kubeconfig "$kc" get namespace gpu-vm >/dev/null 2>&1 ||
            kubectl --kubeconfig "$kc" create namespace gpu-vm >/dev/null
        kubectl --kubeconfig "$kc" create --dry-run=server -f "$POD" -o json >"$WORK/admission-pod.json"
    else
        kubectl --kubeconfig "$kc" get pod -n gpu-vm vmi-passthrough -o json >"$WORK/admission-pod.json"
    fi
    pin=
    if [ -n "$OWN_CORE" ]; then
        last=$(($(nproc) - 1))
        # This cluster's own components: the pid files `gpuwl cluster` keeps in its state.
        state=$(dirname "$kc")
        for f in "$state"/pids/*.pid; do
            taskset -a -p -c 0 "$(cat "$f")" >/dev/null
        done
        pin="taskset -c $last"
    fi
    log=$RES/admission-serve-$n.log
    $pin $PRIO "$B" serve --kubeconfig "$kc" --listen 127.0.0.1:0 --admission-listen 127.0.0.1:0 --admission-register 2>"$log" &
    serve_pid=$!
    until grep -q '^gpuwl serve: registered' "$log"; do sleep 0.1; done
    metrics=$(sed -n 's|^gpuwl serve: listening on http://\([^ ]*\).*|\1|p' "$log")
    guard=$(sed -n 's|^gpuwl serve: admission guard listening on https://\([^/]*\)/.*|\1|p' "$log")
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$metrics/readyz")" = 200 ]; do sleep 0.2; done
    kubectl --kubeconfig "$kc" get validatingwebhookconfiguration gpuwl-admission \
        -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d >"$WORK/admission-ca.crt"
    nodes=$(kubectl --kubeconfig "$kc" get nodes -o name | wc -l)
    out=$RES/admission-$n.txt
    {
        echo "== $nodes nodes; $RATE reviews/s for $DURATION s, $CONNECTIONS connections${OWN_CORE:+; control plane on core 0, guard and load on core $last}; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "serve threads before (name: CPU s since start, nice): $(threads)"
        $pin $PRIO "$EX/admission_load" --addr "$guard" --ca "$WORK/admission-ca.crt" --object "$WORK/admission-pod.json" \
            --typo nvidia.com/GA102GL_A10=nvidia.com/GA102GL_A1 --rate "$RATE" --seconds "$DURATION" \
            --connections "$CONNECTIONS"
        echo "server-side histogram (gpuwl_admission_review_duration_seconds):"
        curl -s "http://$metrics/metrics" | grep '^gpuwl_admission_review_duration_seconds'
        echo "serve threads after (name: CPU s since start, nice): $(threads)"
        echo "serve CPU s (utime+stime): $(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$serve_pid/stat")"
        echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    } | tee "$out"
    kill "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=
done
