#!/usr/bin/env bash
# Installs the monitoring tools the tests use, built from their Go modules with the local Go
# toolchain, into a cache folder keyed by the pinned version (a second run is instant):
#   promtool  github.com/prometheus/prometheus/cmd/promtool  (`promtool test rules`, `check metrics`)
#   helm      helm.sh/helm/v3/cmd/helm                        (renders deploy/helm/gpuwl)
#
# Usage: scripts/tools.sh promtool|helm    # prints the binary's path on the last line
# Cache: ${GPUWL_CACHE:-~/.cache/gpuwl}/tools/<name>-<version>/<name>
set -euo pipefail

# Prometheus tags its Go module v0.<major><minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMTOOL_MODULE=github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_VERSION=v0.316.0
HELM_MODULE=helm.sh/helm/v3/cmd/helm
HELM_VERSION=v3.22.0

cache="${GPUWL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuwl}/tools"

install() { # name module version
  local name=$1 module=$2 version=$3
  local dir="$cache/$name-$version"
  if [[ ! -x "$dir/$name" ]]; then
    command -v go >/dev/null 2>&1 || { echo "error: go not found: $name is built from its Go module" >&2; exit 2; }
    echo "building $name $version from $module (first run only; cached in $dir)" >&2
    mkdir -p "$dir.tmp"
    # CGO off: a static binary, no C toolchain needed.
    # go prints nothing while it compiles: a line every 15 s says it is still at work.
    GOBIN="$dir.tmp" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install "$module@$version" &
    local pid=$! start=$SECONDS
    local next=15
    while kill -0 "$pid" 2>/dev/null; do
      sleep 1
      if (( SECONDS - start >= next )) && kill -0 "$pid" 2>/dev/null; then
        echo "building $name $version: $((SECONDS - start)) s elapsed" >&2
        next=$((next + 15))
      fi
    done
    wait "$pid"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/$name"
}

case "${1:-}" in
  promtool) install promtool "$PROMTOOL_MODULE" "$PROMTOOL_VERSION" ;;
  helm) install helm "$HELM_MODULE" "$HELM_VERSION" ;;
  *) echo "usage: $0 promtool|helm" >&2; exit 2 ;;
esac
