#!/usr/bin/env bash
# A cold Go build of the control plane (etcd, the kube multi-call program, kwok) the ways
# gpuwl has built it, each from an empty Go build cache (the module cache is kept: its
# download is timed apart), to measure what a first run's Go build costs (issue 51;
# BENCHMARKS.md "The first run's two builds, cut").
#
#   bench/go_build.sh per-binary   # go list -deps, then one go build per binary (before)
#   bench/go_build.sh one          # one go build of the three binaries
#   GCFLAGS=all=-dwarf=false bench/go_build.sh one   # what gpuwl runs now
#
# Needs the control plane's module written out once (`gpuwl cluster build` does it):
# SRC defaults to the first ~/.cache/gpuwl/controlplane/k8s-*/src. Prints each step's wall,
# user and system seconds.
set -euo pipefail
mode=${1:?usage: bench/go_build.sh per-binary|one}
SRC=${SRC:-$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/gpuwl/controlplane/k8s-*/src | head -n 1)}
GOCACHE=$(mktemp -d)
out=$(mktemp -d)
trap 'rm -rf "$GOCACHE" "$out"' EXIT
export GOCACHE GOWORK=off CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly"
packages=(./cmd/etcd ./cmd/kube sigs.k8s.io/kwok/cmd/kwok)
flags=(-p "$(nproc)" -trimpath ${GCFLAGS:+-gcflags "$GCFLAGS"} -ldflags "-s -w")
cd "$SRC"
echo "go: $(go version); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg); GCFLAGS=${GCFLAGS:-}"
case $mode in
per-binary)
    /usr/bin/time -f "go list -deps: %e s wall, %U s user, %S s sys" go list -deps "${packages[@]}" >/dev/null
    for p in "${packages[@]}"; do
        /usr/bin/time -f "go build $p: %e s wall, %U s user, %S s sys" go build "${flags[@]}" -o "$out/" "$p"
    done
    ;;
one)
    /usr/bin/time -f "go build (three binaries): %e s wall, %U s user, %S s sys" go build "${flags[@]}" -o "$out/" "${packages[@]}"
    ;;
*) echo "usage: bench/go_build.sh per-binary|one" >&2; exit 2 ;;
esac
ls -l "$out"
