//! The real NVIDIA GPU Operator as a component of the local control plane
//! (`gpuwl cluster up --gpu-operator`).
//!
//! - Built from the pinned Go module in `controlplane/gpu-operator/` (module
//!   `github.com/NVIDIA/gpu-operator`, [`OPERATOR_VERSION`]); its `go.mod` / `go.sum` are
//!   embedded like the control plane's and built by the same pipeline
//!   ([`super::build::GoModuleBuild`]). The build also copies, from the
//!   same module version, what the operator reads at run time: its state manifests
//!   (`assets/*` and `manifests/`), its CRDs (`deployments/gpu-operator/crds/`) and the
//!   sample ClusterPolicy (`config/samples/v1_clusterpolicy.yaml`). Result:
//!   `<cache>/<key>/dist/` with `gpu-operator`, `opt/gpu-operator/…`, `crds/`,
//!   `clusterpolicy.yaml`.
//! - The operator reads its manifests from the hard-coded paths `/opt/gpu-operator/<state>`
//!   and `/opt/gpu-operator/manifests/` (NVIDIA/gpu-operator `controllers/state_manager.go`
//!   `addState`, `internal/state/manager.go`) and the host's OS from `/host-etc/os-release`
//!   (`controllers/object_controls.go` `parseOSRelease`). It runs in a private mount
//!   namespace (`unshare --mount`, plus `--user --map-root-user` when gpuwl is not root)
//!   whose root is a tmpfs inside the cluster's state directory: every top-level directory
//!   of the host is bind-mounted into it except `/opt`, which is replaced by the copied
//!   manifests, and the host's `/etc` appears as `/host-etc`, as the operator's own
//!   DaemonSet mounts it. Nothing is created outside the state directory, and the mounts
//!   vanish with the process.
//! - Operand images are never pulled (kwok runs no containers); every one is named by an
//!   environment variable the operator reads when the ClusterPolicy names none
//!   (`api/nvidia/v1/clusterpolicy_types.go` `ImagePath`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use super::build::{GoModuleBuild, copy_tree, module_dir};
use super::install::wait_established;
use crate::input::live::api_error;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

/// The operator's Go module.
pub(crate) const OPERATOR_MODULE: &str = "github.com/NVIDIA/gpu-operator";
/// The pinned pseudo-version: the operator's main branch of 2025-09-17 (commit d73a0086a6ba).
pub(crate) const OPERATOR_VERSION: &str = "v0.0.0-20250917190837-d73a0086a6ba";
/// The package built.
const PACKAGE: &str = "github.com/NVIDIA/gpu-operator/cmd/gpu-operator";

/// Namespace the operator and its operands live in (the Helm chart's usual one).
pub const NAMESPACE: &str = "gpu-operator";
/// Name of the ClusterPolicy gpuwl creates (the Helm chart's name).
pub const POLICY_NAME: &str = "cluster-policy";
/// Name of the operator binary inside [`dist_dir`].
pub(crate) const BINARY: &str = "gpu-operator";

/// The embedded module: (path relative to the module root, contents).
const SOURCES: [(&str, &str); 2] = [
    (
        "go.mod",
        include_str!("../../controlplane/gpu-operator/go.mod"),
    ),
    (
        "go.sum",
        include_str!("../../controlplane/gpu-operator/go.sum"),
    ),
];

/// Measured cold build of the operator alone on a 2-core machine with a warm module
/// download (see BENCHMARKS.md; 100 s on 2026-12-02 right after the control plane's
/// build, whose modules it shares), for the estimate.
const COLD_BUILD_ESTIMATE_2_CORES: Duration = Duration::from_secs(3 * 60);

/// `-ldflags`: strip symbols and stamp the version the operator logs at start.
fn ldflags() -> String {
    format!("-s -w -X github.com/NVIDIA/gpu-operator/internal/info.version={OPERATOR_VERSION}")
}

/// Cache key: the pinned version plus 12 hex digits of SHA-256 over the embedded module
/// files and link flags.
pub fn cache_key() -> String {
    let hex = super::build::sources_digest(&SOURCES, &ldflags());
    format!("gpu-operator-{OPERATOR_VERSION}_{hex}")
}

/// The operator as a [`GoModuleBuild`]: its binary into `<cache>/<key>/dist`, then the
/// files it reads at run time copied out of the same module ([`copy_module_files`]).
fn module() -> GoModuleBuild<'static> {
    GoModuleBuild {
        what: "the GPU Operator",
        versions: format!("{OPERATOR_MODULE} {OPERATOR_VERSION}"),
        key: cache_key(),
        sources: &SOURCES,
        packages: &[PACKAGE],
        ldflags: ldflags(),
        estimate_2_cores: COLD_BUILD_ESTIMATE_2_CORES,
        out: "dist",
        complete,
        finish: |src, out| copy_module_files(&module_dir(src, OPERATOR_MODULE)?, out),
    }
}

/// `<cache>/<key>/dist`: the binary and the files copied from the module. It may not
/// exist yet; see [`ensure_built`].
pub fn dist_dir() -> PathBuf {
    module().out_dir()
}

/// Files a complete [`dist_dir`] holds.
fn complete(dir: &Path) -> bool {
    dir.join(BINARY).is_file()
        && dir
            .join("opt/gpu-operator/state-sandbox-device-plugin")
            .is_dir()
        && dir.join("opt/gpu-operator/manifests/state-driver").is_dir()
        && dir.join("crds/nvidia.com_clusterpolicies.yaml").is_file()
        && dir.join("clusterpolicy.yaml").is_file()
}

/// True when the operator is built and its files copied.
pub fn is_built() -> bool {
    module().is_built()
}

/// Returns [`dist_dir`], building the operator and copying its files first when missing
/// (the one build pipeline, [`GoModuleBuild::ensure_built`]). `progress` shows a bar with
/// the package count on stderr (a line per 100 packages without a terminal).
///
/// Errors ([`Error::Runtime`], one line): `go` missing, the module cannot be fetched, the
/// compile failed (the message names the build log), the cache is not writable.
pub fn ensure_built(progress: bool) -> Result<PathBuf> {
    module().ensure_built(progress)
}

/// Copies from the module directory into `out`: `assets/*` and `manifests/` under
/// `opt/gpu-operator/` (the layout of the operator's image), the CRDs under `crds/`, and
/// the sample ClusterPolicy as `clusterpolicy.yaml` (writable copies, [`copy_tree`]).
fn copy_module_files(module: &Path, out: &Path) -> Result<()> {
    let opt = out.join("opt").join("gpu-operator");
    let assets = module.join("assets");
    let entries = std::fs::read_dir(&assets)
        .map_err(|e| Error::runtime(format!("cannot read {}: {e}", assets.display())))?;
    for e in entries.flatten() {
        copy_tree(&e.path(), &opt.join(e.file_name()))?;
    }
    copy_tree(&module.join("manifests"), &opt.join("manifests"))?;
    copy_tree(
        &module.join("deployments").join("gpu-operator").join("crds"),
        &out.join("crds"),
    )?;
    copy_tree(
        &module
            .join("config")
            .join("samples")
            .join("v1_clusterpolicy.yaml"),
        &out.join("clusterpolicy.yaml"),
    )
}

/// The operand images, one environment variable each, as the operator reads them when the
/// ClusterPolicy names none (NVIDIA/gpu-operator `api/nvidia/v1/clusterpolicy_types.go`
/// `ImagePath`; `VALIDATOR_IMAGE` also serves the sandbox validator). Names only: kwok runs
/// no container, so nothing is pulled; the registry `gpuwl.invalid` makes that plain.
pub(crate) const IMAGE_ENV: [&str; 18] = [
    "DRIVER_IMAGE",
    "DRIVER_MANAGER_IMAGE",
    "VGPU_MANAGER_IMAGE",
    "CONTAINER_TOOLKIT_IMAGE",
    "DEVICE_PLUGIN_IMAGE",
    "SANDBOX_DEVICE_PLUGIN_IMAGE",
    "DCGM_EXPORTER_IMAGE",
    "DCGM_IMAGE",
    "VALIDATOR_IMAGE",
    "GFD_IMAGE",
    "CUDA_BASE_IMAGE",
    "MIG_MANAGER_IMAGE",
    "GDS_IMAGE",
    "GDRCOPY_IMAGE",
    "VFIO_MANAGER_IMAGE",
    "VGPU_DEVICE_MANAGER_IMAGE",
    "KATA_MANAGER_IMAGE",
    "CC_MANAGER_IMAGE",
];

/// The environment of the operator process: its namespace and every image
/// ([`IMAGE_ENV`] → `gpuwl.invalid/<name>:<version>`).
pub(crate) fn operator_env() -> Vec<(String, String)> {
    let mut env = vec![("OPERATOR_NAMESPACE".to_string(), NAMESPACE.to_string())];
    for var in IMAGE_ENV {
        let name = var
            .trim_end_matches("_IMAGE")
            .to_ascii_lowercase()
            .replace('_', "-");
        env.push((
            var.to_string(),
            format!("gpuwl.invalid/not-pulled/{name}:{OPERATOR_VERSION}"),
        ));
    }
    env
}

/// Shell script run by `unshare` (as `sh -c SCRIPT sh ROOT OPT -- PROGRAM ARGS…`): mounts a
/// tmpfs on ROOT, bind-mounts each top-level directory of `/` into it (symlinks recreated,
/// `/opt` left out), then OPT on `ROOT/opt/gpu-operator` and `/etc` on `ROOT/host-etc`, and
/// execs PROGRAM chrooted into ROOT (the process keeps its pid).
const NAMESPACE_SCRIPT: &str = r#"set -eu
root="$1"; opt="$2"; shift 3
mount -t tmpfs -o mode=0755 gpuwl-gpu-operator "$root"
for e in /*; do
  n="${e#/}"
  [ "$n" = opt ] && continue
  if [ -L "$e" ]; then
    ln -s "$(readlink "$e")" "$root/$n"
  elif [ -d "$e" ]; then
    mkdir "$root/$n"
    mount --rbind "$e" "$root/$n"
  fi
done
mkdir -p "$root/opt/gpu-operator" "$root/host-etc"
mount --bind "$opt" "$root/opt/gpu-operator"
mount --rbind /etc "$root/host-etc"
exec chroot "$root" "$@"
"#;

/// Who starts the operator's mount namespace: root may mount in a new mount namespace of
/// its own; anyone else needs a user namespace too (`unshare --user --map-root-user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Privilege {
    /// gpuwl runs as root (effective uid 0).
    Root,
    /// gpuwl runs as another user.
    User,
}

impl Privilege {
    /// This process's: [`Privilege::Root`] when its effective uid is 0.
    pub(crate) fn of_this_process() -> Privilege {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            Privilege::Root
        } else {
            Privilege::User
        }
    }
}

/// Program and arguments that run the operator in its private mount namespace (see the
/// module docs): `unshare --mount --propagation private [--user --map-root-user] -- sh -c
/// SCRIPT …` (the user namespace for [`Privilege::User`]). `root` is an empty directory
/// inside the state directory (the tmpfs mount point); `dist` is [`dist_dir`]; the
/// operator talks to the API server through `kubeconfig`, serves `/healthz` on
/// `127.0.0.1:<health_port>` and no metrics.
pub(crate) fn operator_command(
    root: &Path,
    dist: &Path,
    kubeconfig: &Path,
    health_port: u16,
    privilege: Privilege,
) -> (PathBuf, Vec<String>) {
    let mut args: Vec<String> = vec!["--mount".into(), "--propagation".into(), "private".into()];
    if privilege == Privilege::User {
        args.push("--user".into());
        args.push("--map-root-user".into());
    }
    args.extend([
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        NAMESPACE_SCRIPT.into(),
        "sh".into(),
        root.display().to_string(),
        dist.join("opt").join("gpu-operator").display().to_string(),
        "--".into(),
        dist.join(BINARY).display().to_string(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--health-probe-bind-address=127.0.0.1:{health_port}"),
        "--metrics-bind-address=0".into(),
        "--leader-elect=false".into(),
        "--zap-log-level=info".into(),
    ]);
    (PathBuf::from("unshare"), args)
}

/// Settings of the ClusterPolicy gpuwl creates from the module's sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySettings {
    /// `spec.sandboxWorkloads.enabled`.
    pub sandbox_enabled: bool,
    /// `spec.sandboxWorkloads.defaultWorkload` (`container` when `None`; any string is
    /// passed on, so the operator's handling of a bad value can be observed).
    pub default_workload: Option<String>,
}

impl Default for PolicySettings {
    fn default() -> Self {
        PolicySettings {
            sandbox_enabled: true,
            default_workload: None,
        }
    }
}

/// The ClusterPolicy object: the module's sample (`config/samples/v1_clusterpolicy.yaml`)
/// renamed [`POLICY_NAME`], with `sandboxWorkloads` from `settings`.
///
/// Errors: [`Error::Runtime`] when the sample cannot be read or parsed.
pub fn policy_object(dist: &Path, settings: &PolicySettings) -> Result<serde_json::Value> {
    let p = dist.join("clusterpolicy.yaml");
    let text = std::fs::read_to_string(&p)
        .map_err(|e| Error::runtime(format!("cannot read {}: {e}", p.display())))?;
    let mut v: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| Error::runtime(format!("cannot parse {}: {e}", p.display())))?;
    // `plugin:` with nothing after it is YAML null; kubectl drops such fields, the API
    // server's apply rejects them for an object-typed field.
    drop_nulls(&mut v);
    v["metadata"] = json!({ "name": POLICY_NAME });
    v["spec"]["sandboxWorkloads"] = json!({
        "enabled": settings.sandbox_enabled,
        "defaultWorkload": settings.default_workload.as_deref().unwrap_or("container"),
    });
    Ok(v)
}

/// Removes every `null` member of every object inside `v`.
fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// The ClusterPolicy resource (`nvidia.com/v1`, cluster-scoped).
pub fn policy_resource() -> ApiResource {
    ApiResource {
        group: "nvidia.com".into(),
        version: "v1".into(),
        api_version: "nvidia.com/v1".into(),
        kind: "ClusterPolicy".into(),
        plural: "clusterpolicies".into(),
    }
}

/// Installs what the operator needs before it starts: namespace [`NAMESPACE`], the CRDs
/// from `dist/crds/` (waiting until each is Established) and the ClusterPolicy
/// ([`policy_object`]). Server-side apply, so a second call changes nothing.
///
/// Errors: [`Error::Runtime`] on a file or API failure, or a CRD not Established in 30 s.
pub async fn install(client: &Client, dist: &Path, settings: &PolicySettings) -> Result<()> {
    let pp = PatchParams::apply("gpuwl").force();
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.patch(
        NAMESPACE,
        &pp,
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
    )
    .await
    .map_err(|e| api_error(&format!("create namespace {NAMESPACE}"), &e))?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = dist.join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::runtime(format!("cannot read {}: {e}", dir.display())))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut names = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| Error::runtime(format!("cannot read {}: {e}", f.display())))?;
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)
            .map_err(|e| Error::runtime(format!("cannot parse {}: {e}", f.display())))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &pp, &Patch::Apply(&crd))
            .await
            .map_err(|e| api_error(&format!("apply CRD {name}"), &e))?;
        names.push(name);
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_established(client, &names, Duration::from_secs(30)).await?;
    apply_policy(client, dist, settings).await
}

/// Creates or updates the ClusterPolicy [`POLICY_NAME`] ([`policy_object`]).
///
/// Errors: [`Error::Runtime`] on a file or API failure.
pub async fn apply_policy(client: &Client, dist: &Path, settings: &PolicySettings) -> Result<()> {
    let obj = policy_object(dist, settings)?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &policy_resource());
    api.patch(
        POLICY_NAME,
        &PatchParams::apply("gpuwl").force(),
        &Patch::Apply(&obj),
    )
    .await
    .map_err(|e| api_error(&format!("apply ClusterPolicy {POLICY_NAME}"), &e))?;
    Ok(())
}

/// `status.state` of the ClusterPolicy (`ready`, `notReady`, …), `None` while it has none.
pub async fn policy_state(client: &Client) -> Option<String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &policy_resource());
    let obj = api.get_opt(POLICY_NAME).await.ok().flatten()?;
    obj.data["status"]["state"].as_str().map(str::to_string)
}

/// Component name of the operator process (pid and log file names).
pub const OPERATOR_COMPONENT: &str = "gpu-operator";
/// Component name of the device-plugin emulation process ([`super::gpusim::emulate`]).
pub const EMULATION_COMPONENT: &str = "gpu-device-plugins";

/// Starts the GPU Operator on the running cluster whose state is `state`: builds it when
/// missing ([`ensure_built`]), installs namespace, CRDs and ClusterPolicy ([`install`]),
/// starts the operator ([`operator_command`]) and the device-plugin emulation (`gpuwl
/// cluster emulate-device-plugins`, the running gpuwl binary) as supervised processes, and
/// waits until the operator's `/healthz` says ok. Records the health port in
/// `cluster.json`. Does nothing when both already run.
///
/// Errors: [`Error::Runtime`] (one line, naming the log) when building, installing or
/// starting fails, or the operator is not healthy within 60 s.
pub fn start(name: &str, state: &Path, progress: bool) -> Result<()> {
    use super::process;
    let running = |c: &str| process::alive(state, c).is_some();
    if running(OPERATOR_COMPONENT) && running(EMULATION_COMPONENT) {
        return Ok(());
    }
    let dist = ensure_built(progress)?;
    let kubeconfig = super::state::kubeconfig_path(name);
    if progress {
        note!(
            "installing the GPU Operator's CRDs, namespace {NAMESPACE} and ClusterPolicy {POLICY_NAME}"
        );
    }
    {
        let kubeconfig = kubeconfig.clone();
        let dist = dist.clone();
        super::runtime::block_on_own_thread(async move {
            let client = super::kubeconfig::client(&kubeconfig, None).await?;
            install(&client, &dist, &PolicySettings::default()).await
        })??;
    }
    // A half-started pair (one died): stop the survivor before starting both afresh.
    for c in [OPERATOR_COMPONENT, EMULATION_COMPONENT] {
        if let Some(pid) = process::alive(state, c) {
            // SAFETY: plain syscall on a pid verified to belong to this cluster.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
            let until = Instant::now() + Duration::from_secs(10);
            while process::alive(state, c).is_some() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let port = {
        let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| Error::runtime(format!("cannot find a free port on 127.0.0.1: {e}")))?;
        l.local_addr()
            .map_err(|e| Error::runtime(format!("cannot find a free port on 127.0.0.1: {e}")))?
            .port()
    };
    let root = state.join("gpu-operator-root");
    std::fs::create_dir_all(&root)
        .map_err(|e| Error::runtime(format!("cannot create {}: {e}", root.display())))?;
    let mut info = super::index::info(name)?;
    info.gpu_operator_port = port;
    let me = std::env::current_exe()
        .map_err(|e| Error::runtime(format!("cannot find the gpuwl binary: {e}")))?;
    let components = gpu_operator_components(
        &super::recipe::Layout { info: &info, state },
        &dist,
        port,
        &me,
        Privilege::of_this_process(),
    );
    for c in &components {
        if progress {
            note!("starting {} ({})", c.name, c.endpoint);
        }
        process::spawn(state, c)?;
    }
    let p = state.join("cluster.json");
    std::fs::write(
        &p,
        serde_json::to_string_pretty(&info).map_err(|e| Error::runtime(e.to_string()))?,
    )
    .map_err(|e| Error::runtime(format!("cannot write {}: {e}", p.display())))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for c in [OPERATOR_COMPONENT, EMULATION_COMPONENT] {
            if process::alive(state, c).is_none() {
                let last = process::last_log_line(state, c);
                return Err(Error::runtime(format!(
                    "{c} exited (log {}): {}",
                    process::log_file(state, c).display(),
                    text::esc(&last)
                )));
            }
        }
        let ready = components.iter().all(|c| match c.readiness {
            super::recipe::Readiness::HttpHealthz { port } => {
                super::health::http(port, "/healthz").is_some_and(|a| a.is_ok())
            }
            _ => true,
        });
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::runtime(format!(
                "{OPERATOR_COMPONENT} is not healthy after 60 s (log {})",
                process::log_file(state, OPERATOR_COMPONENT).display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The GPU Operator ([`self`], `gpuwl cluster up --gpu-operator`): started
/// after the cluster is ready and its CRDs, namespace and ClusterPolicy are applied, in a
/// private mount namespace ([`operator_command`]; the mount point
/// `gpu-operator-root` is in the state directory), with every operand image named by
/// environment ([`operator_env`]). `dist` is the operator's build
/// ([`dist_dir`]); `health_port` its `/healthz` (plain HTTP); `privilege` gpuwl's.
pub(crate) fn gpu_operator(
    l: &super::recipe::Layout<'_>,
    dist: &Path,
    health_port: u16,
    privilege: Privilege,
) -> super::recipe::Component {
    let (binary, args) = operator_command(
        &l.state.join("gpu-operator-root"),
        dist,
        &l.state.join("kubeconfig"),
        health_port,
        privilege,
    );
    super::recipe::Component {
        name: OPERATOR_COMPONENT,
        binary,
        args,
        env: operator_env(),
        ports: vec![health_port],
        endpoint: format!("http://127.0.0.1:{health_port}/healthz"),
        start: super::recipe::StartWhen::AfterApiServer,
        readiness: super::recipe::Readiness::HttpHealthz { port: health_port },
    }
}

/// gpuwl's device-plugin emulation ([`super::gpusim::emulate`]): `gpuwl` (the running
/// binary, `gpuwl_bin`) `cluster emulate-device-plugins` with the admin kubeconfig. No
/// port; ready once it runs.
pub(crate) fn gpu_device_plugins(
    l: &super::recipe::Layout<'_>,
    gpuwl_bin: &Path,
) -> super::recipe::Component {
    super::recipe::Component {
        name: EMULATION_COMPONENT,
        binary: gpuwl_bin.to_path_buf(),
        args: vec![
            "cluster".into(),
            "emulate-device-plugins".into(),
            "--kubeconfig".into(),
            l.state_file("kubeconfig"),
        ],
        env: Vec::new(),
        ports: Vec::new(),
        endpoint: "node status of the simulated GPU nodes".into(),
        start: super::recipe::StartWhen::AfterApiServer,
        readiness: super::recipe::Readiness::Listening,
    }
}

/// The optional components of `--gpu-operator`, in start order (their names are
/// [`super::process::OPTIONAL_COMPONENTS`]); their command lines are in
/// `src/cluster/testdata/gpu-operator.golden`.
pub(crate) fn gpu_operator_components(
    l: &super::recipe::Layout<'_>,
    dist: &Path,
    health_port: u16,
    gpuwl_bin: &Path,
    privilege: Privilege,
) -> Vec<super::recipe::Component> {
    vec![
        gpu_operator(l, dist, health_port, privilege),
        gpu_device_plugins(l, gpuwl_bin),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe_info() -> crate::cluster::ClusterInfo {
        crate::cluster::recipe::golden_info()
    }

    #[test]
    fn gpu_operator_components_match_the_optional_process_list() {
        let info = recipe_info();
        let state = PathBuf::from("/state");
        let l = super::super::recipe::Layout {
            info: &info,
            state: &state,
        };
        let comps = gpu_operator_components(
            &l,
            Path::new("/cache/dist"),
            10300,
            Path::new("/usr/bin/gpuwl"),
            Privilege::of_this_process(),
        );
        let names: Vec<_> = comps.iter().map(|c| c.name).collect();
        assert_eq!(names, super::super::process::OPTIONAL_COMPONENTS[..2]);
        let op = &comps[0];
        assert_eq!(op.binary, PathBuf::from("unshare"));
        assert_eq!(op.ports, vec![10300]);
        assert_eq!(
            op.readiness,
            super::super::recipe::Readiness::HttpHealthz { port: 10300 }
        );
        assert!(op.args.contains(&"/state/gpu-operator-root".to_string()));
        assert!(
            op.args
                .contains(&"--kubeconfig=/state/kubeconfig".to_string())
        );
        assert!(
            op.env
                .iter()
                .any(|(k, v)| k == "OPERATOR_NAMESPACE" && v == "gpu-operator")
        );
        let dp = &comps[1];
        assert_eq!(
            dp.args,
            [
                "cluster",
                "emulate-device-plugins",
                "--kubeconfig",
                "/state/kubeconfig"
            ]
        );
        assert!(dp.ports.is_empty());
    }

    /// The `--gpu-operator` recipe, as the control plane's golden file renders it (gpuwl
    /// not root: the user namespace's flags show; as root only they go).
    #[test]
    fn gpu_operator_recipe_matches_golden_file() {
        let info = crate::cluster::ClusterInfo {
            gpu_operator_port: 10300,
            ..recipe_info()
        };
        let state = PathBuf::from("/state");
        let l = super::super::recipe::Layout {
            info: &info,
            state: &state,
        };
        let dist = Path::new("/cache/gpu-operator/dist");
        let gpuwl = Path::new("/usr/bin/gpuwl");
        let comps = gpu_operator_components(&l, dist, 10300, gpuwl, Privilege::User);
        let got = super::super::recipe::render(&comps);
        super::super::recipe::assert_golden("gpu-operator.golden", &got, "GPU Operator recipe");
        let as_root = gpu_operator_components(&l, dist, 10300, gpuwl, Privilege::Root);
        let mut user_args = comps[0].args.clone();
        user_args.retain(|a| a != "--user" && a != "--map-root-user");
        assert_eq!(as_root[0].args, user_args);
        assert_eq!(as_root[1], comps[1]);
    }

    #[test]
    fn every_image_variable_gets_a_name_that_is_never_pulled() {
        let env = operator_env();
        assert_eq!(env.len(), 19);
        assert_eq!(env[0], ("OPERATOR_NAMESPACE".into(), "gpu-operator".into()));
        let driver = env.iter().find(|(k, _)| k == "DRIVER_IMAGE").unwrap();
        assert_eq!(
            driver.1,
            format!("gpuwl.invalid/not-pulled/driver:{OPERATOR_VERSION}")
        );
        let sdp = env
            .iter()
            .find(|(k, _)| k == "SANDBOX_DEVICE_PLUGIN_IMAGE")
            .unwrap();
        assert!(sdp.1.contains("/sandbox-device-plugin:"));
    }

    #[test]
    fn nulls_are_dropped_from_the_policy() {
        let mut v = json!({"spec": {"validator": {"plugin": null, "env": [{"a": null, "b": 1}]}}});
        drop_nulls(&mut v);
        assert_eq!(v, json!({"spec": {"validator": {"env": [{"b": 1}]}}}));
    }

    #[test]
    fn the_namespace_script_leaves_opt_out_and_execs_chrooted() {
        let (prog, args) = operator_command(
            Path::new("/s/gpu-operator-root"),
            Path::new("/c/dist"),
            Path::new("/s/kubeconfig"),
            4242,
            Privilege::Root,
        );
        assert_eq!(prog, PathBuf::from("unshare"));
        assert_eq!(&args[..3], ["--mount", "--propagation", "private"]);
        let script = args.iter().position(|a| a == "-c").unwrap() + 1;
        assert!(args[script].contains(r#"[ "$n" = opt ] && continue"#));
        assert!(args[script].ends_with("exec chroot \"$root\" \"$@\"\n"));
        let tail = &args[script + 1..];
        assert_eq!(tail[0], "sh");
        assert_eq!(tail[1], "/s/gpu-operator-root");
        assert_eq!(tail[2], "/c/dist/opt/gpu-operator");
        assert_eq!(tail[3], "--");
        assert_eq!(tail[4], "/c/dist/gpu-operator");
        assert!(tail.contains(&"--kubeconfig=/s/kubeconfig".to_string()));
        assert!(tail.contains(&"--health-probe-bind-address=127.0.0.1:4242".to_string()));
    }
}
