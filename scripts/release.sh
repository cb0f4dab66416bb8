#!/usr/bin/env bash
# Builds gpuwl's release artifacts into dist/ and checks each one with the tool that will
# consume it (docs/release.md). Nothing is pushed or published: that is the maintainer's step.
#
# Usage: scripts/release.sh VERSION        # VERSION: 0.1.0 or v0.1.0, equal to Cargo.toml's
#
# Writes (names for VERSION 0.1.0):
#   dist/gpuwl-v0.1.0-x86_64-unknown-linux-gnu.tar.gz         gpuwl, LICENSE, README.md
#   dist/gpuwl-v0.1.0-x86_64-unknown-linux-gnu.tar.gz.sha256  `sha256sum -c` format
#   dist/gpuwl-v0.1.0-x86_64-unknown-linux-musl.tar.gz(.sha256) the same, statically linked
#                                       (musl): any x86_64 Linux, whatever its glibc
#   dist/gpuwl-v0.1.0-aarch64-unknown-linux-musl.tar.gz(.sha256) the static build for arm64
#                                       (run under qemu-aarch64-static as its check)
#   dist/gpuwl-v0.1.0-image.tar(.sha256)   container image (docker save format) of gpuwl
#   dist/gpuwl-v0.1.0.cdx.json          CycloneDX 1.5 SBOM of the binary's crates (Cargo.lock)
#   dist/gpuwl-v0.1.0.glibc.txt         ldd output and the highest GLIBC_ symbol version needed
#   dist/krew/gpuwl.yaml                the krew manifest with the archive's sha256
#   dist/charts/gpuwl-0.1.0.tgz, dist/charts/index.yaml   a Helm chart repository folder
#   dist/gpuwl-v0.1.0.checks.txt        what each consumer printed
# Everything is built in dist/.stage-VERSION and moved into dist/ (one rename per file) only
# after every check passed: dist/ never holds an unchecked artifact (a failed run leaves the
# stage folder for inspection; the next run starts it afresh). The local cluster it starts is
# named rel-check and is stopped and deleted at the end.
#
# Checks, each by the real consumer:
#   archive  unpacked by tar, `gpuwl --version` run from it, `ldd` and `objdump -T` read;
#   sha256   `sha256sum -c`;
#   image    `crane validate --tarball` (go-containerregistry, built from its Go module), and
#            gpuwl --version run from its rootfs in a chroot as user 65532 (no runc here);
#   SBOM     CycloneDX's Python library (cyclonedx-python-lib) validates it against the 1.5
#            JSON schema, strict;
#   krew     krew v0.4.4 (built from its Go module, scripts/tools.sh krew) installs the plugin
#            from the manifest and the local archive into a temporary KREW_ROOT, then
#            `kubectl gpuwl --version` and `kubectl gpuwl check` on the local control plane;
#   chart    `helm lint`, `helm template`, `helm package`, `helm repo index`, then `helm install
#            --wait` of the packaged .tgz, every option on, onto the local control plane
#            (`gpuwl cluster up --name rel-check`, taken down afterwards).
#
# Settings (environment):
#   GPUWL_REPO_URL    https://github.com/gpuwl/gpuwl   release download and runbook base
#   GPUWL_IMAGE_REPO  ghcr.io/gpuwl/gpuwl              the chart's image.repository
#   GPUWL_CHART_URL   $GPUWL_REPO_URL/releases/download/vVERSION   index.yaml's --url
#   GPUWL_RELEASE_NO_CLUSTER=1   skip krew's `check` and the helm install (no control plane)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

[[ $# -eq 1 ]] || { echo "usage: $0 VERSION" >&2; exit 2; }
version="${1#v}"
tag="v$version"
crate_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
if [[ "$version" != "$crate_version" ]]; then
  echo "error: VERSION $version differs from Cargo.toml's $crate_version" >&2
  exit 2
fi
repo_url="${GPUWL_REPO_URL:-https://github.com/gpuwl/gpuwl}"
image_repo="${GPUWL_IMAGE_REPO:-ghcr.io/gpuwl/gpuwl}"
chart_url="${GPUWL_CHART_URL:-$repo_url/releases/download/$tag}"
# --- what the machine needs, before anything is built ---------------------------------------
# Each system tool and the Debian package that has it. Missing ones are installed with apt-get
# when run as root on Debian/Ubuntu (a fresh machine's first release runs through), unless
# GPUWL_RELEASE_NO_INSTALL=1; otherwise one line names them all and the command, exit 2,
# before minutes of building. cargo, go and kubectl are the README's prerequisites; krew, helm
# and crane come from scripts/tools.sh.
need=(
  "objdump binutils" "file file" "gcc gcc" "sha256sum coreutils" "python3 python3"
)
if [[ "${GPUWL_RELEASE_NO_ARM64:-}" != 1 ]]; then
  need+=("aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu" "qemu-aarch64-static qemu-user-static")
fi
missing_pkgs=()
missing_tools=()
for pair in "${need[@]}"; do
  tool="${pair%% *}"
  command -v "$tool" >/dev/null 2>&1 || { missing_tools+=("$tool"); missing_pkgs+=("${pair#* }"); }
done
python3 -c 'import venv, ensurepip' 2>/dev/null || { missing_tools+=("python3 venv"); missing_pkgs+=("python3-venv"); }
if [[ ${#missing_pkgs[@]} -gt 0 ]]; then
  if [[ $EUID -eq 0 && "${GPUWL_RELEASE_NO_INSTALL:-}" != 1 ]] && command -v apt-get >/dev/null; then
    echo "release: installing ${missing_pkgs[*]} (apt-get; GPUWL_RELEASE_NO_INSTALL=1 stops this)" >&2
    apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing_pkgs[@]}" >&2
  else
    echo "error: ${missing_tools[*]} not found: apt-get install ${missing_pkgs[*]} (as root: this script installs them itself; GPUWL_RELEASE_NO_ARM64=1 skips the arm64 archive)" >&2
    exit 2
  fi
fi

target=x86_64-unknown-linux-gnu
name="gpuwl-$tag-$target"
archive="$name.tar.gz"
target_dir="${CARGO_TARGET_DIR:-$here/target}"
# Reproducible archives: the commit's time, not the clock's.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

stage="$here/dist/.stage-$tag"
rm -rf "$stage"
mkdir -p "$stage/krew" "$stage/charts"
work="$(mktemp -d)"
cluster_up=""
cleanup() {
  if [[ -n "$cluster_up" ]]; then
    "$gpuwl" cluster down --name rel-check >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
checks="$stage/gpuwl-$tag.checks.txt"
log() { echo "release: $*" >&2; }
record() { printf '%s\n' "$@" >>"$checks"; }
step_start=$SECONDS
timed() { log "$1 ($((SECONDS - step_start)) s)"; record "## $1 ($((SECONDS - step_start)) s)"; step_start=$SECONDS; }

commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  log "warning: the work tree has uncommitted changes; the artifacts are not $commit's"
  commit="$commit + uncommitted changes"
fi
record "gpuwl $tag from commit $commit (SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH), $(date -u +%FT%TZ)"

# --- binary ---------------------------------------------------------------------------------
log "cargo build --release --locked (target dir $target_dir)"
# Without SOURCE_DATE_EPOCH: build scripts that watch it would rebuild at every commit.
env -u SOURCE_DATE_EPOCH cargo build --release --locked --quiet
gpuwl="$target_dir/release/gpuwl"
timed "cargo build --release"

# --- archive, sha256 ------------------------------------------------------------------------
mkdir -p "$work/$name"
cp "$gpuwl" "$work/$name/gpuwl"
strip "$work/$name/gpuwl" 2>/dev/null || true
cp LICENSE README.md "$work/$name/"
# Files at the archive's root (the krew manifest's `from:` paths), owner and time fixed.
tar -C "$work/$name" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$SOURCE_DATE_EPOCH" -cf - gpuwl LICENSE README.md | gzip -n -9 >"$stage/$archive"
(cd "$stage" && sha256sum "$archive" >"$archive.sha256")
sha="$(cut -d' ' -f1 "$stage/$archive.sha256")"

# Consumer: tar and the binary itself, from a fresh folder.
mkdir -p "$work/unpacked"
(cd "$stage" && sha256sum -c "$archive.sha256" >/dev/null)
tar -C "$work/unpacked" -xzf "$stage/$archive"
got="$("$work/unpacked/gpuwl" --version)"
[[ "$got" == "gpuwl $version" ]] || { echo "error: the unpacked binary says '$got'" >&2; exit 1; }
glibc_max="$(objdump -T "$work/unpacked/gpuwl" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
{
  echo "# ldd $archive:gpuwl (built on $(ldd --version | head -1))"
  ldd "$work/unpacked/gpuwl" | sed 's/ (0x[0-9a-f]*)//'
  echo "# highest GLIBC_ symbol version (objdump -T): $glibc_max"
} >"$stage/gpuwl-$tag.glibc.txt"
record "archive: $archive" "sha256: $sha" "unpacked: $got" "needs glibc >= ${glibc_max#GLIBC_}" \
  "$(ldd "$work/unpacked/gpuwl" | sed 's/ (0x[0-9a-f]*)//')"
timed "archive, sha256, ldd"

# --- static archive (musl) ------------------------------------------------------------------
# For distributions whose glibc is older than the gnu build needs (Debian 11, Ubuntu 20.04,
# RHEL 8: glibc 2.28-2.31): the same gpuwl linked statically against musl (rustup's
# x86_64-unknown-linux-musl standard library; ring's C and assembly parts compiled by the
# system gcc, which is all they need). Consumer: `ldd` says it is not dynamic, and it runs.
static_target=x86_64-unknown-linux-musl
static_name="gpuwl-$tag-$static_target"
static_archive="$static_name.tar.gz"
if ! rustup target list --installed 2>/dev/null | grep -qx "$static_target"; then
  log "rustup target add $static_target"
  rustup target add "$static_target" >&2
fi
log "cargo build --release --locked --target $static_target"
env -u SOURCE_DATE_EPOCH CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-gcc}" \
  cargo build --release --locked --quiet --target "$static_target"
mkdir -p "$work/$static_name" "$work/unpacked-static"
cp "$target_dir/$static_target/release/gpuwl" "$work/$static_name/gpuwl"
strip "$work/$static_name/gpuwl" 2>/dev/null || true
cp LICENSE README.md "$work/$static_name/"
tar -C "$work/$static_name" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$SOURCE_DATE_EPOCH" -cf - gpuwl LICENSE README.md | gzip -n -9 >"$stage/$static_archive"
(cd "$stage" && sha256sum "$static_archive" >"$static_archive.sha256" && sha256sum -c "$static_archive.sha256" >/dev/null)
tar -C "$work/unpacked-static" -xzf "$stage/$static_archive"
got="$("$work/unpacked-static/gpuwl" --version)"
[[ "$got" == "gpuwl $version" ]] || { echo "error: the static binary says '$got'" >&2; exit 1; }
static_ldd="$(ldd "$work/unpacked-static/gpuwl" 2>&1 || true)"
case "$static_ldd" in
  *"not a dynamic executable"* | *"statically linked"*) ;;
  *) echo "error: the musl binary is not static: $static_ldd" >&2; exit 1 ;;
esac
record "static archive: $static_archive" "sha256: $(cut -d' ' -f1 "$stage/$static_archive.sha256")" \
  "unpacked: $got" "ldd: $(echo "$static_ldd" | tr -s ' \t' ' ')"
timed "static (musl) archive, sha256, ldd"

# --- arm64 static archive (musl) ------------------------------------------------------------
# The same static build for 64-bit ARM (Graviton, Ampere, Grace nodes and bastions): rustup's
# aarch64-unknown-linux-musl standard library, ring's C and assembly parts compiled and the
# binary linked by Debian's cross gcc (package gcc-aarch64-linux-gnu). Consumer: the binary
# run under qemu's user-mode emulator (package qemu-user-static): `--version`, and a real
# `check` of a node dump, whose output must equal the x86_64 binary's byte for byte.
# GPUWL_RELEASE_NO_ARM64=1 skips it (no cross gcc or qemu on the machine).
arm_target=aarch64-unknown-linux-musl
arm_name="gpuwl-$tag-$arm_target"
arm_archive="$arm_name.tar.gz"
arm_files=()
if [[ "${GPUWL_RELEASE_NO_ARM64:-}" != 1 ]]; then
  for tool in aarch64-linux-gnu-gcc qemu-aarch64-static; do
    command -v "$tool" >/dev/null || {
      echo "error: $tool not found: apt-get install gcc-aarch64-linux-gnu qemu-user-static (or GPUWL_RELEASE_NO_ARM64=1)" >&2
      exit 2
    }
  done
  if ! rustup target list --installed 2>/dev/null | grep -qx "$arm_target"; then
    log "rustup target add $arm_target"
    rustup target add "$arm_target" >&2
  fi
  log "cargo build --release --locked --target $arm_target"
  env -u SOURCE_DATE_EPOCH CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
    cargo build --release --locked --quiet --target "$arm_target"
  mkdir -p "$work/$arm_name" "$work/unpacked-arm64"
  cp "$target_dir/$arm_target/release/gpuwl" "$work/$arm_name/gpuwl"
  aarch64-linux-gnu-strip "$work/$arm_name/gpuwl" 2>/dev/null || true
  cp LICENSE README.md "$work/$arm_name/"
  tar -C "$work/$arm_name" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$SOURCE_DATE_EPOCH" -cf - gpuwl LICENSE README.md | gzip -n -9 >"$stage/$arm_archive"
  (cd "$stage" && sha256sum "$arm_archive" >"$arm_archive.sha256" && sha256sum -c "$arm_archive.sha256" >/dev/null)
  tar -C "$work/unpacked-arm64" -xzf "$stage/$arm_archive"
  arm_file="$(file -b "$work/unpacked-arm64/gpuwl" | cut -d, -f1-2)"
  case "$(file -b "$work/unpacked-arm64/gpuwl")" in
    *"ARM aarch64"*static*) ;;
    *) echo "error: the arm64 binary is not a static aarch64 executable: $arm_file" >&2; exit 1 ;;
  esac
  got="$(qemu-aarch64-static "$work/unpacked-arm64/gpuwl" --version)"
  [[ "$got" == "gpuwl $version" ]] || { echo "error: the arm64 binary says '$got'" >&2; exit 1; }
  dump=tests/data/gate/mig-failed.json
  arm_check="$(qemu-aarch64-static "$work/unpacked-arm64/gpuwl" check --effective "$dump" 2>&1 || true)"
  x86_check="$("$work/unpacked/gpuwl" check --effective "$dump" 2>&1 || true)"
  [[ "$arm_check" == "$x86_check" ]] || { echo "error: arm64 and x86_64 disagree on check $dump" >&2; exit 1; }
  record "arm64 archive: $arm_archive" "sha256: $(cut -d' ' -f1 "$stage/$arm_archive.sha256")" \
    "file: $arm_file" "qemu-aarch64-static gpuwl --version: $got" \
    "qemu-aarch64-static gpuwl check --effective $dump: $(echo "$arm_check" | wc -l) lines, equal to x86_64's"
  arm_files=("$arm_archive" "$arm_archive.sha256")
  timed "arm64 static archive, qemu run"
else
  record "arm64 archive skipped (GPUWL_RELEASE_NO_ARM64=1)"
fi

# --- container image ------------------------------------------------------------------------
# Built without a container daemon (scripts/oci_image.py): one layer with the archive's gpuwl
# and the libraries ldd names, as a `docker save` tarball for crane push / docker load.
image="gpuwl-$tag-image.tar"
python3 scripts/oci_image.py "$work/unpacked/gpuwl" "$image_repo:$version" "$stage/$image" \
  "$work/rootfs" >"$work/image.txt"
(cd "$stage" && sha256sum "$image" >"$image.sha256")
# Consumer: crane (go-containerregistry, scripts/tools.sh crane) reads and validates it —
# every blob's digest and size, the config, the layer's contents.
crane="$(scripts/tools.sh crane | tail -1)"
"$crane" validate --tarball "$stage/$image" >"$work/crane.txt" 2>&1 || { cat "$work/crane.txt" >&2; exit 1; }
record "image $image_repo:$version: $(cat "$work/image.txt")" \
  "crane validate --tarball: $(tr '\n' ' ' <"$work/crane.txt")"
# No runc here: the layer's files are run in a chroot as the image's user, which is what a
# runtime does with this rootfs minus the namespaces (skipped when not root).
if [[ $EUID -eq 0 ]] && command -v chroot >/dev/null; then
  got="$(chroot --userspec=65532:65532 "$work/rootfs" /usr/local/bin/gpuwl --version)"
  [[ "$got" == "gpuwl $version" ]] || { echo "error: the image's gpuwl says '$got'" >&2; exit 1; }
  record "chroot into the image's rootfs as 65532: /usr/local/bin/gpuwl --version: $got"
else
  record "image not started: chroot needs root (no runc here)"
fi
timed "container image"

# --- SBOM -----------------------------------------------------------------------------------
# CycloneDX 1.5 JSON from cargo's resolver (`cargo tree -e normal`: the crates and features the
# release build compiles, no dev- or build-dependencies), `cargo metadata` (licences, links)
# and Cargo.lock (sha256): no cargo plugin needed (scripts/sbom.py).
cargo tree --locked -e normal --target "$target" --prefix depth --format '{p}' >"$work/tree.txt"
cargo metadata --locked --format-version 1 --filter-platform "$target" >"$work/metadata.json"
python3 scripts/sbom.py "$work/tree.txt" "$work/metadata.json" Cargo.lock >"$stage/gpuwl-$tag.cdx.json"
# Consumer: CycloneDX's own library validates it against the 1.5 JSON schema (strict).
validated="$("$(scripts/tools.sh cyclonedx-validate | tail -1)" "$stage/gpuwl-$tag.cdx.json")"
sbom_counts="$(python3 -c '
import json, sys
bom = json.load(open(sys.argv[1]))
c = bom["components"]
hashed = sum(1 for x in c if x.get("hashes"))
print(len(c), "crates,", hashed, "with a Cargo.lock sha256,", len(bom["dependencies"]), "dependency entries")' \
  "$stage/gpuwl-$tag.cdx.json")"
record "SBOM gpuwl-$tag.cdx.json: $sbom_counts; $validated"
timed "SBOM"

# --- krew manifest --------------------------------------------------------------------------
# One platform per archive built: linux/amd64 (the glibc archive) and, unless skipped,
# linux/arm64 (the static musl archive); a platform without an archive is left out.
krew_platforms=("amd64=$repo_url/releases/download/$tag/$archive=$sha")
if [[ ${#arm_files[@]} -gt 0 ]]; then
  krew_platforms+=("arm64=$repo_url/releases/download/$tag/$arm_archive=$(cut -d' ' -f1 "$stage/$arm_archive.sha256")")
fi
python3 "$here/scripts/krew_manifest.py" plugins/gpuwl.yaml "$tag" "$repo_url" \
  "${krew_platforms[@]}" >"$stage/krew/gpuwl.yaml.tmp"
mv "$stage/krew/gpuwl.yaml.tmp" "$stage/krew/gpuwl.yaml"
krew="$(scripts/tools.sh krew | tail -1)"
export KREW_ROOT="$work/krew"
kpath="$KREW_ROOT/bin:$PATH"
# Consumer: krew validates the manifest, checks the archive's sha256 against it and installs.
"$krew" install --manifest="$stage/krew/gpuwl.yaml" --archive="$stage/$archive" >"$work/krew.log" 2>&1 \
  || { cat "$work/krew.log" >&2; exit 1; }
got="$(PATH="$kpath" kubectl gpuwl --version)"
# Run as kubectl-gpuwl, gpuwl names itself "kubectl gpuwl".
[[ "$got" == "kubectl gpuwl $version" ]] || { echo "error: kubectl gpuwl --version says '$got'" >&2; exit 1; }
record "krew v0.4.4 (scripts/tools.sh krew): $(grep -i 'installed' "$work/krew.log" | head -1)" \
  "kubectl gpuwl --version: $got"
timed "krew install"

# --- Helm chart -----------------------------------------------------------------------------
helm="$(scripts/tools.sh helm | tail -1)"
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"
cp -r deploy/helm/gpuwl "$work/chart"
# The packaged chart names this release's image and runbooks.
python3 - "$work/chart/values.yaml" "$image_repo" "$repo_url/blob/$tag/docs/runbooks.md" <<'EOF'
import re, sys
path, image, runbooks = sys.argv[1:]
text = open(path).read()
text, n1 = re.subn(r'(?m)^(  repository: ).*$', lambda m: m.group(1) + image, text, count=1)
text, n2 = re.subn(r'(?m)^(  runbookBaseURL: ).*$', lambda m: m.group(1) + runbooks, text, count=1)
assert n1 == 1 and n2 == 1, (n1, n2)
open(path, "w").write(text)
EOF
all_on=(--set serviceMonitor.enabled=true --set prometheusRule.enabled=true
  --set grafanaDashboard.enabled=true --set labelPolicy.enabled=true
  --set serviceMonitor.labels.release=kube-prometheus-stack
  --set prometheusRule.labels.release=kube-prometheus-stack
  --set oncallRole.create=true --set 'oncallRole.groups={gpu-oncall}'
  --set admission.enabled=true)
"$helm" lint --strict "$work/chart" "${all_on[@]}" >"$work/lint.log" || { cat "$work/lint.log" >&2; exit 1; }
"$helm" template rel-check "$work/chart" "${all_on[@]}" >"$work/rendered.yaml"
grep -q "image: \"$image_repo:$version\"" "$work/rendered.yaml" \
  || { echo "error: helm template does not name $image_repo:$version" >&2; exit 1; }
grep -q "runbook_url: $repo_url/blob/$tag/docs/runbooks.md#" "$work/rendered.yaml" \
  || { echo "error: helm template's runbook_url is not $repo_url/blob/$tag/docs/runbooks.md#…" >&2; exit 1; }
"$helm" package "$work/chart" --version "$version" --app-version "$version" -d "$stage/charts" >/dev/null
# Earlier releases' charts in dist/charts stay listed (--merge).
merge=()
[[ -f dist/charts/index.yaml ]] && merge=(--merge dist/charts/index.yaml)
"$helm" repo index "$stage/charts" --url "$chart_url" "${merge[@]}"
record "helm $("$helm" version --short): lint: $(tail -1 "$work/lint.log")" \
  "helm template: $(grep -c '^kind:' "$work/rendered.yaml") objects, image $image_repo:$version" \
  "chart: charts/gpuwl-$version.tgz, index.yaml url $chart_url"
timed "helm lint, template, package, index"

if [[ "${GPUWL_RELEASE_NO_CLUSTER:-}" != 1 ]]; then
  export GPUWL_BIN="$gpuwl"
  "$gpuwl" cluster down --name rel-check >/dev/null 2>&1 || true
  cluster_up=1
  up="$("$gpuwl" cluster up --name rel-check --fresh -q)"
  kubeconfig="$(sed -n 's/^export KUBECONFIG=//p' <<<"$up" | tr -d "'\"" | tail -1)"
  [[ -f "$kubeconfig" ]] || { echo "error: no kubeconfig in: $up" >&2; exit 1; }
  export KUBECONFIG="$kubeconfig"
  timed "gpuwl cluster up --name rel-check"

  # krew's plugin against the cluster: check exits 0 (no drift) or 1 (findings); 2+ is failure.
  set +e
  PATH="$kpath" kubectl gpuwl check --kubeconfig "$kubeconfig" >"$work/check.txt" 2>&1
  rc=$?
  set -e
  (( rc <= 1 )) || { cat "$work/check.txt" >&2; echo "error: kubectl gpuwl check exit $rc" >&2; exit 1; }
  record "kubectl gpuwl check (exit $rc):" "$(head -5 "$work/check.txt")"

  # Stand-ins for the prometheus-operator CRDs (open schema), as tests/it/serve.rs applies.
  for kind in ServiceMonitor PrometheusRule; do
    plural="$(tr 'A-Z' 'a-z' <<<"$kind")s"
    cat <<EOF
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: $plural.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: $kind, plural: $plural, singular: ${plural%s}, listKind: ${kind}List}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
EOF
  done | kubectl apply -f - >/dev/null
  kubectl wait --for=condition=Established crd/servicemonitors.monitoring.coreos.com \
    crd/prometheusrules.monitoring.coreos.com --timeout=60s >/dev/null
  # Consumer: helm install from the packaged chart, waiting for the Deployment (kwok runs
  # the pod; no image is pulled).
  "$helm" install rel-check "$stage/charts/gpuwl-$version.tgz" --namespace gpuwl \
    --create-namespace "${all_on[@]}" --wait --timeout 120s >"$work/install.log" 2>&1 \
    || { cat "$work/install.log" >&2; exit 1; }
  record "helm install rel-check charts/gpuwl-$version.tgz (every option on): $(grep '^STATUS' "$work/install.log")" \
    "$(kubectl get -n gpuwl deploy,svc,servicemonitor,prometheusrule,configmap -o name | tr '\n' ' ')" \
    "$(kubectl get validatingadmissionpolicy -o name | tr '\n' ' ')"
  # The admission guard's certificate, as a TLS client would check it: signed by the CA in
  # the webhook's caBundle, for the Service's DNS name.
  kubectl get -n gpuwl secret rel-check-gpuwl-admission-tls -o jsonpath='{.data.tls\.crt}' \
    | base64 -d >"$work/adm.crt"
  kubectl get validatingwebhookconfiguration rel-check-gpuwl-admission \
    -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d >"$work/adm-ca.crt"
  openssl verify -CAfile "$work/adm-ca.crt" -verify_hostname rel-check-gpuwl-admission.gpuwl.svc \
    "$work/adm.crt" >"$work/verify.txt" 2>&1 || { cat "$work/verify.txt" >&2; exit 1; }
  record "admission guard: openssl verify of the Secret's tls.crt against the webhook's caBundle, host rel-check-gpuwl-admission.gpuwl.svc: $(cat "$work/verify.txt")" \
    "  webhook: $(kubectl get validatingwebhookconfiguration rel-check-gpuwl-admission -o jsonpath='failurePolicy={.webhooks[0].failurePolicy} service={.webhooks[0].clientConfig.service.namespace}/{.webhooks[0].clientConfig.service.name}'); serve args: $(kubectl get -n gpuwl deploy rel-check-gpuwl -o jsonpath='{.spec.template.spec.containers[0].args}')"
  # The on-call role, as the API server's authorizer sees it: reads yes, writes no.
  # (Resources whose CRDs the cluster lacks, KubeVirt's, read "no": not asked.)
  can() { kubectl auth can-i "$@" --as=oncall-check --as-group=gpu-oncall 2>/dev/null; }
  for verb_res in "list nodes" "get pods" "list daemonsets.apps" \
    "list resourceslices.resource.k8s.io"; do
    [[ "$(can $verb_res)" == yes ]] || { echo "error: on-call role cannot $verb_res" >&2; exit 1; }
  done
  for verb_res in "patch nodes" "get secrets" "delete pods"; do
    [[ "$(can $verb_res || true)" == no ]] || { echo "error: on-call role can $verb_res" >&2; exit 1; }
  done
  record "on-call role (group gpu-oncall, kubectl auth can-i): list nodes, get pods, list daemonsets, list resourceslices: yes; patch nodes, get secrets, delete pods: no"
  "$helm" uninstall rel-check --namespace gpuwl >/dev/null
  "$gpuwl" cluster down --name rel-check >/dev/null
  cluster_up=""
  timed "krew check, helm install on the local control plane"
fi

# --- publish into dist/ ---------------------------------------------------------------------
mkdir -p dist/krew dist/charts
for f in "$archive" "$archive.sha256" "$static_archive" "$static_archive.sha256" "${arm_files[@]}" "$image" "$image.sha256" "gpuwl-$tag.cdx.json" "gpuwl-$tag.glibc.txt" \
  krew/gpuwl.yaml "charts/gpuwl-$version.tgz" charts/index.yaml "gpuwl-$tag.checks.txt"; do
  mv -f "$stage/$f" "dist/$f"
done
rm -rf "$stage"
log "done: dist/ (what each consumer printed: dist/gpuwl-$tag.checks.txt)"
cat "dist/gpuwl-$tag.checks.txt"
