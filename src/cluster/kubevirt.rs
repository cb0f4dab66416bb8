//! The real KubeVirt control plane — virt-api and virt-controller — as an optional
//! component of the local control plane (`gpuwl cluster up --kubevirt`).
//!
//! - Built from the pinned module `kubevirt.io/kubevirt` [`KUBEVIRT_VERSION`] through the
//!   one build pipeline ([`super::build::GoModuleBuild`]), cached under its own key
//!   ([`cache_key`]). The wrapper module `controlplane/kubevirt/` repeats KubeVirt's own
//!   `replace` block (a dependency's replaces are ignored) and adds `kv-gen`
//!   (`controlplane/kubevirt/cmd/kv-gen/main.go`), which prints the CRDs, RBAC and webhook
//!   configurations through virt-operator's own generator packages
//!   (`pkg/virt-operator/resource/generate/{components,rbac}`).
//! - Why v1.7.0 and not v1.6.0: v1.6.0 is built on k8s.io v0.32, whose `PodCondition` has
//!   no `observedGeneration`; kube-scheduler 1.36 writes one, so virt-controller's JSON-patch
//!   `test` on the launcher pod's conditions (`pkg/virt-controller/watch/vmi/lifecycle.go`
//!   `syncPausedConditionToPod`) failed with 422 and an unschedulable VMI could stay Pending
//!   with no condition. v1.7.0 uses k8s.io v0.33.5, whose `PodCondition` carries the field
//!   (`k8s.io/api/core/v1/types.go`). docs/control-plane.md has the measurement.
//! - virt-operator is not run: what it would do is done here (CRDs, RBAC, the KubeVirt CR
//!   and its status `phase: Deployed`, `defaultArchitecture: amd64` — without the latter
//!   virt-api denies every VMI; both read the CR only once `status.phase` is set,
//!   `pkg/virt-config/configuration.go` — the webhooks pointed at
//!   `https://127.0.0.1:<port>` since the cluster has no kube-proxy, and the
//!   `requestheader-client-ca-file` virt-api insists on, `pkg/virt-api/api.go`).
//! - virt-handler is not run (it needs a real host): [`emulate_virt_handler`] does for kwok
//!   nodes what it would publish — labels `kubevirt.io/schedulable=true`,
//!   `machine-type.node.kubevirt.io/q35=true` (the launcher pod's nodeSelector,
//!   `pkg/virt-controller/services/nodeselectorrenderer.go`) and its device plugins'
//!   `devices.kubevirt.io/{kvm,tun,vhost-net}` in capacity and allocatable, 1000 each
//!   (`pkg/virt-handler/device-manager/device_controller.go`, `cmd/virt-handler/virt-handler.go`
//!   `maxDevices = 1000`).
//!
//! A VMI therefore goes as far as `Scheduled`: virt-controller renders its virt-launcher
//! pod, the real scheduler binds it; no guest runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, ServiceAccount};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::install::{apply, free_port, wait_established};
use super::recipe::{Component, Condition, Layout, Readiness, StartWhen};
use crate::input::live::api_error;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

/// The pinned `kubevirt.io/kubevirt` module version (and of `kubevirt.io/api`,
/// `kubevirt.io/client-go`).
pub const KUBEVIRT_VERSION: &str = "v1.7.0";
/// KubeVirt's install namespace (virt-operator's default).
pub const NAMESPACE: &str = "kubevirt";
/// Name of the KubeVirt CR gpuwl creates (the upstream install's name).
pub const CR_NAME: &str = "kubevirt";
/// Component name of virt-api (pid and log file names).
pub const API_COMPONENT: &str = "virt-api";
/// Component name of virt-controller.
pub const CONTROLLER_COMPONENT: &str = "virt-controller";
/// Component name of gpuwl's stand-in for virt-handler's node publishing
/// ([`emulate_virt_handler`]).
pub const NODES_COMPONENT: &str = "kubevirt-nodes";
/// The components of `--kubevirt`, in start order.
pub const COMPONENTS: [&str; 3] = [API_COMPONENT, CONTROLLER_COMPONENT, NODES_COMPONENT];

/// Binaries the build puts into [`bin_dir`].
pub const BINARIES: [&str; 3] = ["virt-api", "virt-controller", "kv-gen"];

/// Packages built, in the wrapper module's namespace.
const PACKAGES: [&str; 3] = [
    "kubevirt.io/kubevirt/cmd/virt-controller",
    "kubevirt.io/kubevirt/cmd/virt-api",
    "./cmd/kv-gen",
];

/// The embedded wrapper module.
const SOURCES: [(&str, &str); 3] = [
    ("go.mod", include_str!("../../controlplane/kubevirt/go.mod")),
    ("go.sum", include_str!("../../controlplane/kubevirt/go.sum")),
    (
        "cmd/kv-gen/main.go",
        include_str!("../../controlplane/kubevirt/cmd/kv-gen/main.go"),
    ),
];

/// Cold build of virt-controller, virt-api and kv-gen on 2 shared cores (BENCHMARKS.md,
/// "KubeVirt"), for the estimate.
const COLD_BUILD_ESTIMATE_2_CORES: Duration = Duration::from_secs(6 * 60);

/// `-ldflags`: strip symbols, stamp the version virt-api and virt-controller report
/// (`kubevirt.io/client-go/version/base.go`).
fn ldflags() -> String {
    format!(
        "-s -w -X kubevirt.io/client-go/version.gitVersion={KUBEVIRT_VERSION} -X kubevirt.io/client-go/version.gitTreeState=clean"
    )
}

/// Cache key: the version plus 12 hex digits over the wrapper module and link flags.
pub fn cache_key() -> String {
    let hex = super::build::sources_digest(&SOURCES, &ldflags());
    format!("kubevirt-{KUBEVIRT_VERSION}_{hex}")
}

/// KubeVirt as a [`super::build::GoModuleBuild`]: virt-api, virt-controller and kv-gen
/// into `<cache>/<key>/bin`, nothing besides.
fn module() -> super::build::GoModuleBuild<'static> {
    super::build::GoModuleBuild {
        what: "KubeVirt",
        versions: format!(
            "kubevirt.io/kubevirt {KUBEVIRT_VERSION}: virt-controller, virt-api, kv-gen"
        ),
        key: cache_key(),
        sources: &SOURCES,
        packages: &PACKAGES,
        ldflags: ldflags(),
        estimate_2_cores: COLD_BUILD_ESTIMATE_2_CORES,
        out: "bin",
        complete,
        finish: |_, _| Ok(()),
    }
}

/// `<cache>/<key>/bin`: virt-api, virt-controller, kv-gen. May not exist yet.
pub fn bin_dir() -> PathBuf {
    module().out_dir()
}

fn complete(dir: &Path) -> bool {
    BINARIES.iter().all(|b| dir.join(b).is_file())
}

/// True when KubeVirt is built.
pub fn is_built() -> bool {
    module().is_built()
}

/// Returns [`bin_dir`], building virt-api, virt-controller and kv-gen first when missing
/// (the one build pipeline, [`super::build::GoModuleBuild::ensure_built`]; progress on
/// stderr when `progress`; a cold build takes minutes, BENCHMARKS.md).
///
/// Errors ([`Error::Runtime`], one line): Go missing or too old, a module cannot be
/// fetched, the compile failed (the message names the build log).
pub fn ensure_built(progress: bool) -> Result<PathBuf> {
    module().ensure_built(progress)
}

/// The virt-launcher image virt-controller names in the pods it renders (never pulled:
/// kwok runs no containers).
pub(crate) fn launcher_image() -> String {
    format!("quay.io/kubevirt/virt-launcher:{KUBEVIRT_VERSION}")
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// virt-api (`kubevirt.io/kubevirt/cmd/virt-api`) out of cluster: its ServiceAccount's
/// kubeconfig, HTTPS on 127.0.0.1:`port` with the serving certificate of
/// [`super::pki::generate_kubevirt`] (also as its client certificate towards virt-handler,
/// unused here). Ready once `/healthz` answers.
pub(crate) fn virt_api(l: &Layout<'_>, bin: &Path, port: u16) -> Component {
    let pki = |f: &str| s(&l.state.join("pki").join(f));
    Component {
        name: API_COMPONENT,
        binary: bin.join("virt-api"),
        args: vec![
            "--kubeconfig".into(),
            l.state_file("kubevirt/kubevirt-apiserver.kubeconfig"),
            "--listen".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            pki("kubevirt.crt"),
            "--tls-key-file".into(),
            pki("kubevirt.key"),
            "--handler-cert-file".into(),
            pki("kubevirt.crt"),
            "--handler-key-file".into(),
            pki("kubevirt.key"),
        ],
        env: Vec::new(),
        ports: vec![port],
        endpoint: format!("https://127.0.0.1:{port}/healthz"),
        start: StartWhen::AfterApiServer,
        readiness: Readiness::HttpsAnswers { port, also: None },
    }
}

/// virt-controller out of cluster: its ServiceAccount's kubeconfig, metrics and health on
/// HTTPS 127.0.0.1:`port`, the launcher image it names ([`launcher_image`]), leader
/// election (it cannot be switched off) with a 60 s lease as a margin on a loaded machine.
/// Ready once `/healthz` answers and it holds the Lease `kubevirt/virt-controller`.
pub(crate) fn virt_controller(l: &Layout<'_>, bin: &Path, port: u16) -> Component {
    let pki = |f: &str| s(&l.state.join("pki").join(f));
    Component {
        name: CONTROLLER_COMPONENT,
        binary: bin.join("virt-controller"),
        args: vec![
            "--kubeconfig".into(),
            l.state_file("kubevirt/kubevirt-controller.kubeconfig"),
            "--listen".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--launcher-image".into(),
            launcher_image(),
            "--exporter-image".into(),
            format!("quay.io/kubevirt/virt-exportserver:{KUBEVIRT_VERSION}"),
            "--prom-cert-file".into(),
            pki("kubevirt.crt"),
            "--prom-key-file".into(),
            pki("kubevirt.key"),
            "--leader-elect-lease-duration".into(),
            "60s".into(),
            "--leader-elect-renew-deadline".into(),
            "45s".into(),
        ],
        env: Vec::new(),
        ports: vec![port],
        endpoint: format!("https://127.0.0.1:{port}/healthz"),
        start: StartWhen::AfterApiServer,
        readiness: Readiness::HttpsAnswers {
            port,
            also: Some(Condition::LeaseHeld {
                namespace: NAMESPACE,
                name: "virt-controller",
            }),
        },
    }
}

/// gpuwl's stand-in for virt-handler's node publishing: `gpuwl cluster
/// emulate-virt-handler --kubeconfig <admin kubeconfig>` ([`emulate_virt_handler`]).
pub(crate) fn kubevirt_nodes(l: &Layout<'_>, gpuwl_bin: &Path) -> Component {
    Component {
        name: NODES_COMPONENT,
        binary: gpuwl_bin.to_path_buf(),
        args: vec![
            "cluster".into(),
            "emulate-virt-handler".into(),
            "--kubeconfig".into(),
            l.state_file("kubeconfig"),
        ],
        env: Vec::new(),
        ports: Vec::new(),
        endpoint: "KubeVirt labels and devices.kubevirt.io/* on every node".into(),
        start: StartWhen::AfterApiServer,
        readiness: Readiness::Listening,
    }
}

/// The components of `--kubevirt`, in start order ([`COMPONENTS`]).
pub(crate) fn kubevirt_components(
    l: &Layout<'_>,
    bin: &Path,
    api_port: u16,
    controller_port: u16,
    gpuwl_bin: &Path,
) -> Vec<Component> {
    vec![
        virt_api(l, bin, api_port),
        virt_controller(l, bin, controller_port),
        kubevirt_nodes(l, gpuwl_bin),
    ]
}

/// The labels virt-handler puts on a node it runs on that the launcher pod's nodeSelector
/// asks for (`pkg/virt-controller/services/nodeselectorrenderer.go`: `kubevirt.io/schedulable`,
/// and `machine-type.node.kubevirt.io/` + the default machine type `q35`; observed: without
/// the q35 label the pod stays Pending, "didn't match Pod's node affinity/selector").
pub(crate) const NODE_LABELS: [(&str, &str); 2] = [
    ("kubevirt.io/schedulable", "true"),
    ("machine-type.node.kubevirt.io/q35", "true"),
];

/// The device-plugin resources virt-handler advertises on every node, 1000 each (its
/// permanent plugins, `pkg/virt-handler/device-manager/device_controller.go`
/// `NewGenericDevicePlugin(name, path, maxDevices, …)` with `cmd/virt-handler/virt-handler.go`
/// `maxDevices = 1000`), and every launcher pod requests one of
/// (`pkg/virt-controller/services/renderresources.go`).
pub(crate) const NODE_DEVICES: [&str; 3] = [
    "devices.kubevirt.io/kvm",
    "devices.kubevirt.io/tun",
    "devices.kubevirt.io/vhost-net",
];

/// Whether `node` lacks a label of [`NODE_LABELS`] or a resource of [`NODE_DEVICES`].
pub fn node_needs_kubevirt(node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let lacks_label = NODE_LABELS
        .iter()
        .any(|(k, v)| labels.and_then(|l| l.get(*k)).map(String::as_str) != Some(*v));
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let cap = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let lacks_device = NODE_DEVICES.iter().any(|d| {
        !alloc.is_some_and(|a| a.contains_key(*d)) || !cap.is_some_and(|c| c.contains_key(*d))
    });
    lacks_label || lacks_device
}

/// Gives `node` the labels and device resources virt-handler would: a merge patch of its
/// labels, then of its status' capacity and allocatable.
///
/// Errors: [`Error::Runtime`] when a patch is refused.
pub async fn publish_node(client: &Client, node: &str) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let labels: serde_json::Map<String, Value> = NODE_LABELS
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    api.patch(
        node,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": labels}})),
    )
    .await
    .map_err(|e| api_error(&format!("label node {node}"), &e))?;
    let res: serde_json::Map<String, Value> = NODE_DEVICES
        .iter()
        .map(|d| ((*d).to_string(), json!("1k")))
        .collect();
    api.patch_status(
        node,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"capacity": res, "allocatable": res}})),
    )
    .await
    .map_err(|e| api_error(&format!("patch status of node {node}"), &e))?;
    Ok(())
}

/// virt-handler's node publishing for kwok nodes, until stopped: every 2 s, every node
/// lacking KubeVirt's labels or device resources gets them ([`publish_node`]). Each call
/// is bounded by the client's timeouts; a failed round is retried on the next.
///
/// Errors: none in practice (it loops); the signature matches the other emulations.
pub async fn emulate_virt_handler(client: Client) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    loop {
        if let Ok(Ok(nodes)) =
            tokio::time::timeout(Duration::from_secs(20), api.list(&Default::default())).await
        {
            for n in nodes.items.iter().filter(|n| node_needs_kubevirt(n)) {
                let name = n.metadata.name.clone().unwrap_or_default();
                if let Err(e) =
                    tokio::time::timeout(Duration::from_secs(20), publish_node(&client, &name))
                        .await
                        .unwrap_or_else(|_| {
                            Err(Error::runtime(format!("node {name}: no answer in 20 s")))
                        })
                {
                    eprintln!("kubevirt-nodes: {e}");
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The KubeVirt CR gpuwl creates: feature gate `HostDevices` on (GPUs need no gate since
/// v1.6; `hostDevices[]` does, `pkg/virt-api/webhooks/validating-webhook/admitters/
/// vmi-create-admitter.go`), no `permittedHostDevices` (every name allowed, as upstream
/// without the list). `gpuwl kubevirt generate`'s patch or [`set_configuration`] change it.
pub(crate) fn cr_object() -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": CR_NAME, "namespace": NAMESPACE},
        "spec": {
            "configuration": {"developerConfiguration": {"featureGates": ["HostDevices"]}}
        }
    })
}

/// The KubeVirt CR's API resource (`kubevirt.io/v1`, `kubevirts`).
pub fn cr_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "KubeVirt"),
        "kubevirts",
    )
}

/// Replaces `spec.configuration` of the KubeVirt CR with `configuration` (a merge patch:
/// `null` removes a field, e.g. `{"permittedHostDevices": null}`). virt-api and
/// virt-controller pick the change up from their informers within seconds.
///
/// Errors: [`Error::Runtime`] when the patch is refused.
pub async fn set_configuration(client: &Client, configuration: &Value) -> Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &cr_resource());
    api.patch(
        CR_NAME,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"configuration": configuration}})),
    )
    .await
    .map_err(|e| api_error("patch the KubeVirt CR", &e))?;
    Ok(())
}

/// Runs `kv-gen` from `bin` with `args`; one JSON object per output line.
fn kv_gen(bin: &Path, args: &[&str]) -> Result<Vec<Value>> {
    let out = std::process::Command::new(bin.join("kv-gen"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::failed("cannot run kv-gen", e))?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "kv-gen {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| Error::failed("kv-gen printed bad JSON", e)))
        .collect()
}

/// Everything virt-operator would install before virt-api and virt-controller start:
/// namespace `kubevirt`; the CRDs from `kv-gen -what crds`, waited for `Established`;
/// ServiceAccounts and RBAC from `kv-gen -what rbac`; the request-header CA in
/// `kube-system/extension-apiserver-authentication` and `kubevirt/kubevirt-ca`; the KubeVirt
/// CR (created when missing, never overwritten: a restart keeps the user's configuration)
/// and its status `{phase: Deployed, defaultArchitecture: amd64}`
/// (`pkg/virt-config/configuration.go` ignores a CR without a phase); a kubeconfig per ServiceAccount
/// (`<state>/kubevirt/<sa>.kubeconfig`, a one-year token from the TokenRequest API), so
/// each component acts as the user virt-api's webhooks recognise as KubeVirt's own.
///
/// Errors: [`Error::Runtime`] naming the refused call.
pub async fn install(client: &Client, bin: &Path, state: &Path, server: &str) -> Result<()> {
    let pp = PatchParams::apply("gpuwl").force();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.patch(
        NAMESPACE,
        &pp,
        &Patch::Apply(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
    )
    .await
    .map_err(|e| api_error("apply namespace kubevirt", &e))?;

    let crds = kv_gen(bin, &["-what", "crds"])?;
    for crd in &crds {
        apply(client, crd).await?;
    }
    let names: Vec<&str> = crds
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    wait_established(client, &names, Duration::from_secs(60)).await?;
    for o in kv_gen(bin, &["-what", "rbac", "-namespace", NAMESPACE])? {
        apply(client, &o).await?;
    }

    let ca = std::fs::read_to_string(state.join("pki/kubevirt-ca.crt"))
        .map_err(|e| Error::failed("cannot read pki/kubevirt-ca.crt", e))?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    cms.patch(
        "extension-apiserver-authentication",
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {
            "requestheader-client-ca-file": ca,
            "requestheader-username-headers": "[\"X-Remote-User\"]",
            "requestheader-group-headers": "[\"X-Remote-Group\"]",
            "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            "requestheader-allowed-names": "[]"
        }})),
    )
    .await
    .map_err(|e| api_error("patch kube-system/extension-apiserver-authentication", &e))?;
    let kcms: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    kcms.patch(
        "kubevirt-ca",
        &pp,
        &Patch::Apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kubevirt-ca", "namespace": NAMESPACE},
            "data": {"ca-bundle": ca}})),
    )
    .await
    .map_err(|e| api_error("apply kubevirt/kubevirt-ca", &e))?;

    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &cr_resource());
    if crs
        .get_opt(CR_NAME)
        .await
        .map_err(|e| api_error("get the KubeVirt CR", &e))?
        .is_none()
    {
        let cr: DynamicObject = serde_json::from_value(cr_object())
            .map_err(|e| Error::failed("internal: KubeVirt CR", e))?;
        crs.create(&PostParams::default(), &cr)
            .await
            .map_err(|e| api_error("create the KubeVirt CR", &e))?;
    }
    crs.patch_status(
        CR_NAME,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": "Deployed", "defaultArchitecture": "amd64"}})),
    )
    .await
    .map_err(|e| api_error("patch the KubeVirt CR's status", &e))?;

    let dir = state.join("kubevirt");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::failed(format!("cannot create {}", dir.display()), e))?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    for sa in ["kubevirt-apiserver", "kubevirt-controller"] {
        let tr = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: None,
                expiration_seconds: Some(365 * 24 * 3600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let got = sas
            .create_token_request(sa, &PostParams::default(), &tr)
            .await
            .map_err(|e| api_error(&format!("create a token for ServiceAccount {sa}"), &e))?;
        let token = got.status.and_then(|s| s.token).unwrap_or_default();
        let ca = state.join("pki/ca.crt");
        let cfg = super::kubeconfig::single(&super::kubeconfig::Entry {
            cluster: "local",
            server,
            ca: &ca,
            context: "default",
            user: sa,
            credentials: super::kubeconfig::Credentials::Token(&token),
        });
        super::kubeconfig::write(&dir.join(format!("{sa}.kubeconfig")), &cfg, 0o600)?;
    }
    Ok(())
}

/// Applies virt-api's mutating and validating webhook configurations (`kv-gen -what
/// webhooks`), pointed at `https://127.0.0.1:<api_port>` with the KubeVirt CA.
///
/// Errors: [`Error::Runtime`] naming the refused call.
pub(crate) async fn apply_webhooks(
    client: &Client,
    bin: &Path,
    state: &Path,
    api_port: u16,
) -> Result<()> {
    let addr = format!("127.0.0.1:{api_port}");
    let ca = s(&state.join("pki/kubevirt-ca.crt"));
    for o in kv_gen(
        bin,
        &[
            "-what",
            "webhooks",
            "-namespace",
            NAMESPACE,
            "-webhook-addr",
            &addr,
            "-ca",
            &ca,
        ],
    )? {
        apply(client, &o).await?;
    }
    Ok(())
}

/// A free TCP port on 127.0.0.1.
/// How long [`start`] waits for virt-api and virt-controller to be ready.
pub const READY_WAIT: Duration = Duration::from_secs(120);

/// Starts KubeVirt on the running cluster `name` (state in `state`): builds it when
/// missing ([`ensure_built`]), the serving certificate ([`super::pki::generate_kubevirt`],
/// once), [`install`], the components that are not running ([`kubevirt_components`], on
/// the ports in `cluster.json`, picked the first time), the webhooks once virt-api answers
/// ([`apply_webhooks`]); returns once virt-api answers `/healthz` and virt-controller holds
/// its Lease. Running components are left alone, so the supervisor restarts one by calling
/// this again.
///
/// Errors: [`Error::Runtime`] (one line, naming the log) when building, installing or
/// starting fails, or a component is not ready within [`READY_WAIT`].
pub fn start(name: &str, state: &Path, progress: bool) -> Result<()> {
    use super::process;
    if COMPONENTS
        .iter()
        .all(|c| process::alive(state, c).is_some())
    {
        return Ok(());
    }
    let bin = ensure_built(progress)?;
    if !state.join("pki/kubevirt.crt").is_file() {
        super::pki::generate_kubevirt(&state.join("pki"))?;
    }
    let mut info = super::index::info(name)?;
    if info.kubevirt_api_port == 0 {
        info.kubevirt_api_port = free_port()?;
    }
    if info.kubevirt_controller_port == 0 {
        info.kubevirt_controller_port = free_port()?;
    }
    let p = state.join("cluster.json");
    std::fs::write(
        &p,
        serde_json::to_string_pretty(&info).map_err(|e| Error::runtime(e.to_string()))?,
    )
    .map_err(|e| Error::runtime(format!("cannot write {}: {e}", p.display())))?;
    if progress {
        note!(
            "installing KubeVirt {KUBEVIRT_VERSION}'s CRDs, RBAC and KubeVirt CR (namespace {NAMESPACE})"
        );
    }
    let kubeconfig = super::state::kubeconfig_path(name);
    let me = std::env::current_exe()
        .map_err(|e| Error::runtime(format!("cannot find the gpuwl binary: {e}")))?;
    let components = kubevirt_components(
        &Layout { info: &info, state },
        &bin,
        info.kubevirt_api_port,
        info.kubevirt_controller_port,
        &me,
    );
    let server = info.server_url();
    let (state_c, bin_c) = (state.to_path_buf(), bin.clone());
    let api_port = info.kubevirt_api_port;
    let comps = components.clone();
    let started = Instant::now();
    super::runtime::block_on_own_thread(async move {
        let client = super::kubeconfig::client(&kubeconfig, None).await?;
        tokio::time::timeout(
            Duration::from_secs(180),
            install(&client, &bin_c, &state_c, &server),
        )
        .await
        .map_err(|_| Error::runtime("installing KubeVirt took over 180 s"))??;
        for c in &comps {
            if process::alive(&state_c, c.name).is_some() {
                continue;
            }
            if progress {
                note!("starting {} ({})", c.name, c.endpoint);
            }
            process::spawn(&state_c, c)?;
        }
        let deadline = Instant::now() + READY_WAIT;
        let mut webhooks = false;
        loop {
            for c in &comps {
                if process::alive(&state_c, c.name).is_none() {
                    return Err(Error::runtime(format!(
                        "{} exited (log {}): {}",
                        c.name,
                        process::log_file(&state_c, c.name).display(),
                        text::esc(&process::last_log_line(&state_c, c.name))
                    )));
                }
            }
            if !webhooks && super::readiness::is_ready(&comps[0], &client, None, true).await {
                tokio::time::timeout(
                    Duration::from_secs(60),
                    apply_webhooks(&client, &bin_c, &state_c, api_port),
                )
                .await
                .map_err(|_| Error::runtime("applying virt-api's webhooks took over 60 s"))??;
                webhooks = true;
            }
            let mut waiting = None;
            for c in &comps {
                if !super::readiness::is_ready(c, &client, None, true).await {
                    waiting = Some(c.name);
                    break;
                }
            }
            if webhooks && waiting.is_none() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let c = waiting.unwrap_or(API_COMPONENT);
                return Err(Error::runtime(format!(
                    "{c} is not ready after {} s (log {})",
                    READY_WAIT.as_secs(),
                    process::log_file(&state_c, c).display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })??;
    if progress {
        note!(
            "KubeVirt {KUBEVIRT_VERSION} (virt-api, virt-controller) ready in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> super::super::state::ClusterInfo {
        super::super::state::ClusterInfo {
            kubevirt_api_port: 10350,
            kubevirt_controller_port: 10351,
            ..super::super::recipe::golden_info()
        }
    }

    /// The `--kubevirt` recipe, as the control plane's golden file renders it.
    #[test]
    fn kubevirt_recipe_matches_golden_file() {
        let info = info();
        let state = PathBuf::from("/state");
        let comps = kubevirt_components(
            &Layout {
                info: &info,
                state: &state,
            },
            Path::new("/cache/kubevirt/bin"),
            10350,
            10351,
            Path::new("/usr/bin/gpuwl"),
        );
        let names: Vec<_> = comps.iter().map(|c| c.name).collect();
        assert_eq!(names, COMPONENTS);
        let got = super::super::recipe::render(&comps);
        super::super::recipe::assert_golden("kubevirt.golden", &got, "KubeVirt recipe");
    }

    #[test]
    fn a_node_needs_every_label_and_device() {
        let mut n: Node = serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
        assert!(node_needs_kubevirt(&n));
        n = serde_json::from_value(json!({
            "metadata": {"name": "a", "labels": {
                "kubevirt.io/schedulable": "true", "machine-type.node.kubevirt.io/q35": "true"}},
            "status": {
                "capacity": {"devices.kubevirt.io/kvm": "1k", "devices.kubevirt.io/tun": "1k", "devices.kubevirt.io/vhost-net": "1k"},
                "allocatable": {"devices.kubevirt.io/kvm": "1k", "devices.kubevirt.io/tun": "1k", "devices.kubevirt.io/vhost-net": "1k"}}
        }))
        .unwrap();
        assert!(!node_needs_kubevirt(&n));
        n.status
            .as_mut()
            .unwrap()
            .allocatable
            .as_mut()
            .unwrap()
            .remove("devices.kubevirt.io/tun");
        assert!(node_needs_kubevirt(&n));
    }

    #[test]
    fn the_cache_key_names_the_version() {
        assert!(cache_key().starts_with("kubevirt-v1.7.0_"));
        assert!(ldflags().contains("version.gitVersion=v1.7.0"));
    }
}
