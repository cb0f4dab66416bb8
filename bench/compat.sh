#!/usr/bin/env bash
# The compatibility matrix (issue 41, docs/compatibility.md): gpuwl against older Kubernetes
# minors. For each version V (default: v1.35.4 v1.34.4, the two minors before the pinned
# v1.36.3 that are still supported upstream and served by the Go module proxy):
#   1. builds kube-apiserver, kube-controller-manager and kube-scheduler V from the
#      k8s.io/kubernetes V module (controlplane/'s thin wrappers, its go.mod with every pin
#      and every k8s.io staging replace moved to V / v0.<minor>.<patch>, then `go mod tidy`),
#      into ~/.cache/gpuwl/compat/V/bin, next to the pinned etcd and kwok;
#   2. runs, with GPUWL_CONTROLPLANE_BIN pointing there: `gpuwl lab` (its result files
#      compared with those of the pinned version), and the CI-sized explain differential
#      (`differential::explain_agrees_with_the_real_scheduler`: 200 random situations
#      against that kube-scheduler);
#   3. prints one TSV line per version: version, build seconds, lab, lab files equal to the
#      pinned version's (every file but out/nodes.json, the API server's own dump with its
#      timestamps and ports), differential result, its seconds.
# Usage: bench/compat.sh [V...]     (builds the live tests first: cargo test --no-run)
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(v1.35.4 v1.34.4)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpuwl/compat"
out="$PWD/target/tmp/compat"
mkdir -p "$cache" "$out"
# A copy of gpuwl and of the live-test binary (cargo_bin finds gpuwl next to deps/), so a
# rebuild of target/debug during the hours this may take changes nothing here.
itbin=$(cargo test -p gpuwl --no-run --test it 2>&1 | grep -o 'target/debug/deps/it-[0-9a-f]*' | head -1)
snap="$out/snap"
rm -rf "$snap"; mkdir -p "$snap/deps"
cp target/debug/gpuwl "$snap/gpuwl"
cp "$itbin" "$snap/deps/it"
gpuwl="$snap/gpuwl"
pinned_bin="$("$gpuwl" cluster build 2>/dev/null | tail -n 1)"

# The pinned version's lab files, the reference.
ref="$out/lab-pinned"
if [[ ! -d $ref/out ]]; then
  rm -rf "$ref"
  "$gpuwl" lab --cluster-name compat-pinned --root "$ref" >"$out/lab-pinned.log" 2>&1
  "$gpuwl" cluster down --name compat-pinned >/dev/null 2>&1 || true
fi

build() { # V -> $cache/V/bin
  local v=$1 minor patch src bin
  minor=$(echo "$v" | cut -d. -f2); patch=$(echo "$v" | cut -d. -f3)
  src="$cache/$v/src"; bin="$cache/$v/bin"
  if [[ -x $bin/kube-scheduler && -x $bin/kube-apiserver && -x $bin/kube-controller-manager ]]; then
    return 0
  fi
  rm -rf "$src"; mkdir -p "$src/cmd" "$bin"
  cp -r controlplane/cmd/kube "$src/cmd/"
  # The pinned go.mod's direct pins and staging replaces, moved to V; go mod tidy finds
  # the indirect ones again.
  {
    echo "module gpuwl/compat"
    echo
    echo "go 1.26.0"
    echo
    echo "require ("
    echo "	k8s.io/component-base v0.$minor.$patch"
    echo "	k8s.io/kubernetes $v"
    echo ")"
    echo
    echo "replace ("
    sed -n '/^replace (/,/^)/p' controlplane/go.mod | grep '=>' |
      sed -E "s/v0\.36\.3/v0.$minor.$patch/"
    echo ")"
  } >"$src/go.mod"
  (cd "$src" && go mod tidy >"$cache/$v/tidy.log" 2>&1)
  local k="$v" f=()
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=("-X $pkg.gitVersion=$k" "-X $pkg.gitMajor=1" "-X $pkg.gitMinor=$minor" "-X $pkg.gitTreeState=clean")
  done
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${f[*]}" -o "$bin/kube" ./cmd/kube) \
    >"$cache/$v/build.log" 2>&1
  # One program under three names (controlplane/cmd/kube picks the command by its name).
  for b in kube-apiserver kube-controller-manager kube-scheduler; do ln -f "$bin/kube" "$bin/$b"; done
  rm -f "$bin/kube"
  for b in etcd kwok kwok-stages.yaml; do cp -f "$pinned_bin/$b" "$bin/$b"; done
}

printf 'version\tbuild_s\tlab\tlab_files_equal\tdifferential\tdifferential_s\n'
for v in "${versions[@]}"; do
  t=$SECONDS
  if ! build "$v"; then
    printf '%s\t%d\tbuild failed (%s)\t-\t-\t-\n' "$v" $((SECONDS - t)) "$cache/$v/build.log"
    continue
  fi
  build_s=$((SECONDS - t))
  export GPUWL_CONTROLPLANE_BIN="$cache/$v/bin"
  name="compat-${v//./-}"
  root="$out/lab-$v"; rm -rf "$root"
  lab=ok
  "$gpuwl" lab --cluster-name "$name" --root "$root" >"$out/lab-$v.log" 2>&1 || lab="failed ($?)"
  "$gpuwl" cluster down --name "$name" >/dev/null 2>&1 || true
  same=no
  # nodes.json is the API server's own dump (timestamps, ports): every other file compared.
  if diff -r -x nodes.json "$ref/out" "$root/out" >"$out/lab-$v.diff" 2>&1 && diff -r "$ref/k8s" "$root/k8s" >>"$out/lab-$v.diff" 2>&1; then
    same=yes
  fi
  t=$SECONDS
  diffres=ok
  "$snap/deps/it" --ignored --exact differential::explain_agrees_with_the_real_scheduler --nocapture \
    >"$out/differential-$v.log" 2>&1 || diffres="failed"
  summary=$(grep -o 'differential: .*' "$out/differential-$v.log" | head -1 || true)
  printf '%s\t%d\t%s\t%s\t%s %s\t%d\n' "$v" "$build_s" "$lab" "$same" "$diffres" "$summary" $((SECONDS - t))
  unset GPUWL_CONTROLPLANE_BIN
done
