#!/usr/bin/env bash
# Installs the monitoring tools the tests use into a cache folder keyed by the pinned version
# (a second run is instant):
#   promtool  github.com/prometheus/prometheus/cmd/promtool  (`promtool test rules`, `check metrics`)
#   helm      helm.sh/helm/v3/cmd/helm                        (renders deploy/helm/gpuwl)
#   krew      sigs.k8s.io/krew/cmd/krew                       (scripts/release.sh installs the plugin)
#   crane     github.com/google/go-containerregistry/cmd/crane (validates release.sh's OCI image)
#   rsvg-convert  Debian's librsvg2-bin (renders `inventory -o svg` to PNG in a test, the way a
#             browser or an image viewer would); needs the system's librsvg2-2 (installed here)
#   cyclonedx-validate  PyPI's cyclonedx-python-lib (pinned) in a virtual environment, with a
#             script that validates an SBOM against the CycloneDX 1.5 JSON schema
# Where each comes from, first found wins:
#   1. the cache;
#   2. the same tool on PATH when it reports the pinned version;
#   3. promtool only: Debian's `prometheus` package at a pinned version and sha256, fetched with
#      `apt-get download` (no root, nothing installed system-wide) and unpacked with dpkg-deb —
#      seconds instead of ~24 min of Go build on 2 cores (BENCHMARKS.md "Test suite");
#   4. a build from the Go module with the local Go toolchain.
#
# Usage: scripts/tools.sh promtool|helm|krew|crane|rsvg-convert|cyclonedx-validate    # prints the binary's path on the last line
# Cache: ${GPUWL_CACHE:-~/.cache/gpuwl}/tools/<name>-<version>/<name>
set -euo pipefail

# Prometheus tags its Go module v0.<major><minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMTOOL_MODULE=github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_VERSION=v0.316.0
HELM_MODULE=helm.sh/helm/v3/cmd/helm
HELM_VERSION=v3.22.0
KREW_MODULE=sigs.k8s.io/krew/cmd/krew
KREW_VERSION=v0.4.4
CYCLONEDX_LIB_VERSION=8.9.0
CRANE_MODULE=github.com/google/go-containerregistry/cmd/crane
CRANE_VERSION=v0.22.1
# Debian 12's promtool (Prometheus 2.42.0); its rule unit tests and `check metrics` read the
# same files as 3.x's. GPUWL_PROMTOOL_FROM=go skips it.
PROMTOOL_DEB_VERSION=2.42.0+ds-5+deb12u1
PROMTOOL_DEB_SHA256=81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55

# Debian 12's rsvg-convert; the library it links (librsvg2-2 2.54.7) is part of the machine.
RSVG_DEB_VERSION=2.54.7+dfsg-1~deb12u2
RSVG_DEB_SHA256=dd013df551bb2926e320dfbab1f64c99dffccf26ad7af31760344e61ab91a26a

cache="${GPUWL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuwl}/tools"

# On PATH at the pinned version? $2 is the version as the tool prints it.
on_path() { # name printed-version
  local found
  found="$(command -v "$1" 2>/dev/null)" || return 1
  { "$found" --version 2>/dev/null; "$found" version 2>/dev/null; } | grep -qF -- "$2" || return 1
  echo "$found"
}

# promtool from Debian's package, checked against the pinned sha256; prints its path.
promtool_deb() {
  local dir="$cache/promtool-deb-$PROMTOOL_DEB_VERSION"
  if [[ ! -x "$dir/promtool" ]]; then
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || return 1
    local work
    work="$(mktemp -d)"
    echo "fetching promtool from Debian's prometheus $PROMTOOL_DEB_VERSION (first run only; cached in $dir)" >&2
    if ! (cd "$work" && apt-get download -q "prometheus=$PROMTOOL_DEB_VERSION" >/dev/null 2>&1); then
      echo "apt-get download prometheus=$PROMTOOL_DEB_VERSION failed; building from the Go module instead" >&2
      rm -rf "$work"; return 1
    fi
    local deb
    deb="$(ls "$work"/prometheus_*.deb)"
    if [[ "$(sha256sum "$deb" | cut -d' ' -f1)" != "$PROMTOOL_DEB_SHA256" ]]; then
      echo "error: $deb: sha256 differs from the pinned $PROMTOOL_DEB_SHA256" >&2
      rm -rf "$work"; exit 2
    fi
    dpkg-deb -x "$deb" "$work/x"
    mkdir -p "$dir.tmp" && cp "$work/x/usr/bin/promtool" "$dir.tmp/promtool"
    rm -rf "$dir" "$work" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/promtool"
}

# rsvg-convert from Debian's librsvg2-bin, checked against the pinned sha256 (apt-get
# download and dpkg-deb: no root, nothing installed system-wide); prints its path.
rsvg_convert() {
  local dir="$cache/rsvg-convert-deb-$RSVG_DEB_VERSION"
  if [[ ! -x "$dir/rsvg-convert" ]]; then
    on_path rsvg-convert "version 2." && return 0
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || {
      echo "error: rsvg-convert not found, and no apt-get/dpkg-deb to fetch Debian's librsvg2-bin" >&2; exit 2; }
    local work deb
    work="$(mktemp -d)"
    echo "fetching rsvg-convert from Debian's librsvg2-bin $RSVG_DEB_VERSION (first run only; cached in $dir)" >&2
    if ! (cd "$work" && apt-get download -q "librsvg2-bin=$RSVG_DEB_VERSION" >/dev/null 2>&1); then
      echo "error: apt-get download librsvg2-bin=$RSVG_DEB_VERSION failed" >&2
      rm -rf "$work"; exit 2
    fi
    deb="$(ls "$work"/librsvg2-bin_*.deb)"
    if [[ "$(sha256sum "$deb" | cut -d' ' -f1)" != "$RSVG_DEB_SHA256" ]]; then
      echo "error: $deb: sha256 differs from the pinned $RSVG_DEB_SHA256" >&2
      rm -rf "$work"; exit 2
    fi
    dpkg-deb -x "$deb" "$work/x"
    mkdir -p "$dir.tmp" && cp "$work/x/usr/bin/rsvg-convert" "$dir.tmp/rsvg-convert"
    rm -rf "$dir" "$work" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/rsvg-convert"
}

install() { # name module version printed-version
  local name=$1 module=$2 version=$3 printed=$4
  local dir="$cache/$name-$version"
  if [[ ! -x "$dir/$name" ]]; then
    on_path "$name" "$printed" && return 0
    if [[ "$name" == promtool && "${GPUWL_PROMTOOL_FROM:-}" != go ]]; then
      promtool_deb && return 0
    fi
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

# A virtual environment with cyclonedx-python-lib; prints the path of a validator that takes
# FILE (CycloneDX 1.5 JSON) and exits 1 naming the first schema error.
cyclonedx_validate() {
  local dir="$cache/cyclonedx-python-lib-$CYCLONEDX_LIB_VERSION"
  if [[ ! -x "$dir/validate" ]]; then
    echo "installing cyclonedx-python-lib $CYCLONEDX_LIB_VERSION from PyPI (first run only; cached in $dir)" >&2
    # A venv's paths are absolute: it is made where it stays; validate, written last, marks
    # it complete.
    rm -rf "$dir"
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q "cyclonedx-python-lib[json-validation]==$CYCLONEDX_LIB_VERSION" >&2
    cat >"$dir/validate.tmp" <<EOF
#!$dir/venv/bin/python
import sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(sys.argv[1]).read())
if error:
    sys.exit(f"{sys.argv[1]}: not valid CycloneDX 1.5 JSON: {error}")
print(f"valid CycloneDX 1.5 JSON (cyclonedx-python-lib $CYCLONEDX_LIB_VERSION, strict schema)")
EOF
    chmod +x "$dir/validate.tmp" && mv "$dir/validate.tmp" "$dir/validate"
  fi
  echo "$dir/validate"
}

case "${1:-}" in
  promtool) install promtool "$PROMTOOL_MODULE" "$PROMTOOL_VERSION" "version 3.16.0 " ;;
  helm) install helm "$HELM_MODULE" "$HELM_VERSION" "Version:\"$HELM_VERSION\"" ;;
  krew) install krew "$KREW_MODULE" "$KREW_VERSION" "$KREW_VERSION" ;;
  crane) install crane "$CRANE_MODULE" "$CRANE_VERSION" "$CRANE_VERSION" ;;
  rsvg-convert) rsvg_convert ;;
  cyclonedx-validate) cyclonedx_validate ;;
  *) echo "usage: $0 promtool|helm|krew|crane|rsvg-convert|cyclonedx-validate" >&2; exit 2 ;;
esac
