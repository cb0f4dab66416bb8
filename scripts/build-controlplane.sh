#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
# from the pinned Go module in controlplane/ into a cache folder keyed by the pinned
# versions. A second run with the same pins is instant.
#
# Usage: scripts/build-controlplane.sh            # prints the bin dir on the last line
#
# This is the same build `gpuwl cluster build` / `gpuwl cluster up` run (the Rust binary
# embeds controlplane/ and performs the same steps); when a gpuwl binary is available
# this script delegates to it so there is one build path.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ -n "${GPUWL_BIN:-}" && -x "${GPUWL_BIN}" ]]; then
  exec "${GPUWL_BIN}" cluster build
fi
if command -v cargo >/dev/null 2>&1 && [[ -f "${here}/Cargo.toml" ]]; then
  exec cargo run --quiet --manifest-path "${here}/Cargo.toml" -- cluster build
fi
echo "error: cargo not found; build gpuwl first (cargo build) or set GPUWL_BIN" >&2
exit 2
