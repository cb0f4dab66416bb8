#!/usr/bin/env bash
# The whole test suite, as CI runs it (README: "Run the tests").
#   formatting, the layering check (scripts/layers.py, and gpuwl-core's dependencies), one debug build, lints (clippy, beside the later steps) (the tests, the live tests and the shared cases all use
#   target/debug/gpuwl), the local control plane (built from pinned upstream Go modules on
#   first run, cached after), unit + CLI tests, the integration tests against that real
#   control plane, and the shared checker cases. Each step prints its time; the live tests'
#   own times are printed after their phase (target/tmp/live-timings.tsv).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
last=$SECONDS
step() {
  printf '\n==> %s   [%ds, step before: %ds]\n' "$*" "$((SECONDS - started))" "$((SECONDS - last))"
  last=$SECONDS
}
gpuwl=target/debug/gpuwl
# A cold target (a fresh clone, as CI has) gains nothing from incremental compilation and
# pays for writing its data (about 8 s of the 130 s build here); a warm one keeps it.
[[ -d target/debug ]] || export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step "cargo fmt --check"
cargo fmt --all -- --check

step "no call up the layers and no file-level import cycle (scripts/layers.py, docs/architecture.md)"
python3 scripts/layers.py

step "gpuwl-core has no k8s-openapi, kube, tokio or HTTP dependency (cargo tree -p gpuwl-core -e normal)"
if cargo tree -p gpuwl-core -e normal --prefix none | grep -E '^(k8s-openapi|kube|tokio|hyper|tower|axum|http)([-_ ]|$)'; then
  echo "gpuwl-core depends on the crates above (docs/architecture.md, \"Crates\")" >&2
  exit 1
fi

# The targets the suite runs: libraries, binaries and test targets. Not the bench tools
# (Cargo.toml's [[example]]s: seven more links nothing here runs) nor doc tests (there are
# none; rustdoc would still read both crates): clippy --all-targets below checks that those
# still compile.
targets=(--lib --bins --tests)

step "cargo test --workspace ${targets[*]} --no-run (the one build: unit, CLI and live tests of both crates, and $gpuwl)"
cargo test --workspace "${targets[@]}" --quiet --no-run

step "cargo clippy --workspace --all-targets -- -D warnings (in the background; its result is awaited at the end)"
# Clippy runs beside the steps below in a scheduling group of its own at nice 19 (with
# autogroup on, nice only orders threads inside one group: the local control plane's
# components each run in a session of their own), so it takes the CPU the live tests leave
# idle instead of slowing them. Its own target dir: a cargo build holds the target dir's
# lock for its whole run, and `cargo test` below must not wait on it.
mkdir -p target/tmp
clippy_log=target/tmp/clippy.log
setsid -w bash -c 'echo $$ >target/tmp/clippy.pid; echo 19 >/proc/self/autogroup 2>/dev/null
  renice -n 19 $$ >/dev/null 2>&1
  t=$SECONDS
  CARGO_TARGET_DIR=target/clippy cargo clippy --workspace --all-targets --quiet -- -D warnings
  rc=$?; echo "clippy: rc $rc in $((SECONDS - t)) s"; exit $rc' >"$clippy_log" 2>&1 &
clippy_pid=$!
trap 'kill -- -"$(cat target/tmp/clippy.pid 2>/dev/null)" 2>/dev/null || true' EXIT

step "local control plane binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), the GPU Operator, KubeVirt's virt-api and virt-controller, Kueue's manager"
# Each cached by its own key under ~/.cache/gpuwl/controlplane/; a cold KubeVirt build
# adds about 5 min on 2 cores (BENCHMARKS.md "KubeVirt"), a cold Kueue build about 7-14 min
# (docs/control-plane.md "Kueue"), a cached one a second.
"$gpuwl" cluster build --kubevirt --kueue

step "alerting rules: promtool check rules + promtool test rules (deploy/prometheus/)"
# promtool is built from its Go module by scripts/tools.sh on the first run (a few minutes),
# cached under ~/.cache/gpuwl/tools/ after; the live serve test uses it too (check metrics).
promtool="$(scripts/tools.sh promtool | tail -n 1)"
"$promtool" check rules deploy/prometheus/rules.yaml
"$promtool" test rules deploy/prometheus/rules.test.yaml

step "Helm chart: helm lint (deploy/helm/gpuwl)"
# helm is built from its Go module the same way; the live serve test renders the chart and
# applies it to the local control plane.
helm="$(scripts/tools.sh helm | tail -n 1)"
"$helm" lint deploy/helm/gpuwl --set serviceMonitor.enabled=true --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true

step "cargo test --workspace ${targets[*]} (unit, property and CLI tests of both crates)"
# Six test threads on two cores: a good part of these tests waits on a silent API server's
# timeout (10-20 s each: serve, the admission guard, the one-shot commands), and with one
# thread per core the CPU sat idle behind them (the CLI test binary: 44 s with 2 threads,
# 28.5 s with 6, measured beside each other on this machine).
cargo test --workspace "${targets[@]}" --quiet -- --test-threads 6

step "cargo test -p gpuwl -- --ignored (integration tests on the local control plane)"
# Marked #[ignore = "needs local control plane"] so a plain `cargo test` stays quick; they
# take one cluster at a time (tests/it/kit/live.rs), each under its own cluster name.
# Every live test's thread is started at once (--test-threads 64) and waits at the gate in
# tests/it/kit/live.rs, which admits GPUWL_LIVE_JOBS (3) at a time, longest first by
# tests/it/live-seconds.tsv (refresh it from target/tmp/live-timings.tsv when the suite
# changes), so no long test starts last. libtest then says "has been running for over 60
# seconds" of tests still waiting at the gate: that is the queue, not a hang.
# The live phase is CPU-bound on 2 cores (three clusters' Go components at once). Their Go
# runtimes collect garbage less often with GOGC=400 (default 100): 9 % less CPU on the
# scheduler differential (41.0 -> 37.1 CPU-s, two runs each), 11 % on the lab test, for
# a few hundred MB more heap per component. The what-if twin keeps its own GOGC=25.
export GOGC=${GOGC:-400}
rm -f target/tmp/live-timings.tsv
cargo test -p gpuwl "${targets[@]}" --quiet -- --ignored --test-threads 64
if [[ -f target/tmp/live-timings.tsv ]]; then
  echo "live tests by wall time (seconds, slowest first):"
  sort -t $'\t' -k2,2 -rn target/tmp/live-timings.tsv | awk -F '\t' '{ printf "  %7.1f  %s\n", $2, $1; t += $2 } END { printf "  %7.1f  total\n", t }'
fi

step "shared checker cases"
# The project's shared cases live beside the repository (../shared/cases); a copy is kept in
# tests/shared-cases so a clone elsewhere still runs them. Both run when both exist.
tests/shared-cases/run-check-cases -- "$gpuwl" check
if [ -x ../shared/cases/run-check-cases ]; then
    ../shared/cases/run-check-cases -- "$gpuwl" check
else
    echo "skipped ../shared/cases/run-check-cases: not beside this clone (the copy above ran)"
fi

step "shared explain cases"
# The repo's copies (plus its own cases) run inside `cargo test` (tests/it/explain_cases.rs);
# the originals beside the repository, when present, run here with their own checker.
if [ -x ../shared/cases/run-explain-cases ]; then
    ../shared/cases/run-explain-cases -- "$gpuwl"
else
    echo "skipped ../shared/cases/run-explain-cases: not beside this clone (tests/data/explain ran in cargo test)"
fi
if [ -x ../shared/cases/run-explain-cases ] && [ -d ../shared/cases/explain-round3 ]; then
    ../shared/cases/run-explain-cases --cases ../shared/cases/explain-round3 -- "$gpuwl"
else
    echo "skipped ../shared/cases/explain-round3: not beside this clone (its copies in tests/data/explain ran in cargo test)"
fi

step "cargo clippy's result (started after the build)"
if ! wait "$clippy_pid"; then
  cat "$clippy_log"
  echo "cargo clippy --workspace --all-targets -- -D warnings failed (above)" >&2
  exit 1
fi
trap - EXIT
tail -n 1 "$clippy_log"

step "all tests passed"
echo "total: $((SECONDS - started)) s"
