#!/usr/bin/env bash
# The whole test suite, as CI runs it (README: "Run the tests").
#   formatting, lints, release build, the local control plane (built from pinned upstream
#   Go modules on first run, cached after), unit + CLI + integration tests against that
#   real control plane, and the shared checker cases.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

step "cargo build --release"
cargo build --release --quiet

step "local control plane binaries (kube-apiserver, kube-scheduler, etcd, kwok)"
target/release/gpuwl cluster build

step "cargo test"
cargo test --quiet

step "shared checker cases"
# The project's shared cases live beside the repository (../shared/cases); a copy is kept in
# tests/shared-cases so a clone elsewhere still runs them. Both run when both exist.
tests/shared-cases/run-check-cases -- target/release/gpuwl check
if [ -x ../shared/cases/run-check-cases ]; then
    ../shared/cases/run-check-cases -- target/release/gpuwl check
fi

step "all tests passed"
