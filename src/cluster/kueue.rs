//! The real Kueue — its manager (`sigs.k8s.io/kueue` `cmd/kueue`) — as an optional
//! component of the local control plane (`gpuwl cluster up --kueue`).
//!
//! - Built from the pinned module `sigs.k8s.io/kueue` [`KUEUE_VERSION`] through the one
//!   build pipeline ([`super::build::GoModuleBuild`]), cached under its own key
//!   ([`cache_key`]), with `kueue-certs` (`controlplane/kueue/cmd/kueue-certs/main.go`, the
//!   webhook certificates, see below). The build copies Kueue's CRDs
//!   (`config/components/crd/bases`) and webhook configurations
//!   (`config/components/webhook/manifests.yaml`) out of the same module into
//!   `bin/manifests/`.
//! - What Kueue's kustomize install would do is done here ([`install`]): namespace
//!   `kueue-system`; the CRDs with the conversion webhook the install patches onto
//!   localqueues, clusterqueues, cohorts, workloads and multikueueclusters
//!   (`config/components/crd/kustomization.yaml`); the webhook configurations named
//!   `kueue-mutating-webhook-configuration` / `kueue-validating-webhook-configuration`,
//!   with the install's namespace selector on the pod, deployment and statefulset webhooks
//!   (`config/components/webhook/kustomization.yaml`). The cluster has no kube-proxy, so
//!   every webhook is URL-based: `https://127.0.0.1:<port><path>`.
//! - Certificates: Kueue's internal certificate management stays on (with it off, the
//!   manager insists on a metrics certificate at the fixed path `/etc/kueue/metrics/certs`,
//!   `cmd/kueue/main.go`). Its rotator (`pkg/util/cert/cert.go`, open-policy-agent
//!   cert-controller `pkg/rotator`) keeps a Secret whose certificates verify and otherwise
//!   makes new ones for `kueue-webhook-service.kueue-system.svc` only, which the API server
//!   dialling 127.0.0.1 would refuse. So gpuwl creates the Secret `kueue-webhook-server-cert`
//!   beforehand with `kueue-certs`' pair (that DNS name and 127.0.0.1) and writes the same
//!   files into the manager's `certDir`, as the kubelet's Secret volume would.
//! - The manager runs with the admin kubeconfig (no RBAC of its own on a local cluster),
//!   leader election off (one replica), Kueue's metrics server and the visibility API server
//!   off (neither is reachable through an aggregator here), integrations `batch/job` and
//!   `pod`, `manageJobsWithoutQueueName: false` ([`config_yaml`]). Ready once its
//!   `/readyz` answers `ok` (the webhook server is listening with its certificates,
//!   `cmd/kueue/main.go` `setupProbeEndpoints`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::install::{apply, free_port, wait_established};
use super::recipe::{Component, Layout, Readiness, StartWhen};
use crate::input::live::api_error;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

/// The pinned `sigs.k8s.io/kueue` module version.
pub(crate) const KUEUE_VERSION: &str = "v0.17.0";
/// Kueue's namespace (its default, `apis/config/v1beta2/defaults.go` `DefaultNamespace`).
pub const NAMESPACE: &str = "kueue-system";
/// Component name of Kueue's manager (pid and log file names).
pub const COMPONENT: &str = "kueue-manager";
/// The components of `--kueue`.
pub const COMPONENTS: [&str; 1] = [COMPONENT];
/// The webhook Service name Kueue's certificate rotator derives its DNS name and the
/// webhook configuration names from (`DefaultWebhookServiceName`).
pub(crate) const WEBHOOK_SERVICE: &str = "kueue-webhook-service";
/// The Secret the rotator keeps the certificates in (`DefaultWebhookSecretName`).
pub(crate) const WEBHOOK_SECRET: &str = "kueue-webhook-server-cert";

/// Binaries the build puts into [`bin_dir`].
pub const BINARIES: [&str; 2] = ["kueue", "kueue-certs"];

/// Packages built, in the wrapper module's namespace.
const PACKAGES: [&str; 2] = ["sigs.k8s.io/kueue/cmd/kueue", "./cmd/kueue-certs"];

/// The embedded wrapper module.
const SOURCES: [(&str, &str); 3] = [
    ("go.mod", include_str!("../../controlplane/kueue/go.mod")),
    ("go.sum", include_str!("../../controlplane/kueue/go.sum")),
    (
        "cmd/kueue-certs/main.go",
        include_str!("../../controlplane/kueue/cmd/kueue-certs/main.go"),
    ),
];

/// The CRDs the install gives a conversion webhook (`config/components/crd/kustomization.yaml`,
/// the same list the rotator injects its CA into, `pkg/util/cert/cert.go`).
pub(crate) const CONVERSION_CRDS: [&str; 5] = [
    "localqueues.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
];

/// The webhooks the install limits to namespaces other than `kube-system` and
/// `kueue-system` (`config/components/webhook/kustomization.yaml`).
const SYSTEM_EXCLUDED_WEBHOOKS: [&str; 6] = [
    "mpod.kb.io",
    "mdeployment.kb.io",
    "mstatefulset.kb.io",
    "vpod.kb.io",
    "vdeployment.kb.io",
    "vstatefulset.kb.io",
];

/// Cold build of Kueue's manager and kueue-certs on 2 shared cores, for the estimate
/// (docs/control-plane.md, "Kueue").
const COLD_BUILD_ESTIMATE_2_CORES: Duration = Duration::from_secs(6 * 60);

/// `-ldflags`: strip symbols, stamp the version the manager logs (`pkg/version/version.go`).
fn ldflags() -> String {
    format!("-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}")
}

/// Cache key: the version plus 12 hex digits over the wrapper module and link flags.
pub fn cache_key() -> String {
    let hex = super::build::sources_digest(&SOURCES, &ldflags());
    format!("kueue-{KUEUE_VERSION}_{hex}")
}

/// The module path whose files the build copies out.
const KUEUE_MODULE: &str = "sigs.k8s.io/kueue";

/// Copies the CRDs and webhook configurations out of Kueue's module into `out/manifests`.
fn copy_manifests(src: &Path, out: &Path) -> Result<()> {
    let module = super::build::module_dir(src, KUEUE_MODULE)?;
    let m = out.join("manifests");
    super::build::copy_tree(&module.join("config/components/crd/bases"), &m.join("crds"))?;
    super::build::copy_tree(
        &module.join("config/components/webhook/manifests.yaml"),
        &m.join("webhooks.yaml"),
    )
}

/// Kueue as a [`super::build::GoModuleBuild`]: `kueue` and `kueue-certs` into
/// `<cache>/<key>/bin`, the manifests beside them.
fn module() -> super::build::GoModuleBuild<'static> {
    super::build::GoModuleBuild {
        what: "Kueue",
        versions: format!("sigs.k8s.io/kueue {KUEUE_VERSION}: kueue (manager), kueue-certs"),
        key: cache_key(),
        sources: &SOURCES,
        packages: &PACKAGES,
        ldflags: ldflags(),
        estimate_2_cores: COLD_BUILD_ESTIMATE_2_CORES,
        out: "bin",
        complete,
        finish: copy_manifests,
    }
}

/// `<cache>/<key>/bin`: kueue, kueue-certs, manifests/. May not exist yet.
pub fn bin_dir() -> PathBuf {
    module().out_dir()
}

fn complete(dir: &Path) -> bool {
    BINARIES.iter().all(|b| dir.join(b).is_file())
        && dir.join("manifests/webhooks.yaml").is_file()
        && dir
            .join("manifests/crds/kueue.x-k8s.io_clusterqueues.yaml")
            .is_file()
}

/// True when Kueue is built.
pub fn is_built() -> bool {
    module().is_built()
}

/// Returns [`bin_dir`], building Kueue's manager and kueue-certs first when missing (the
/// one build pipeline; progress on stderr when `progress`; a cold build takes minutes).
///
/// Errors ([`Error::Runtime`], one line): Go missing or too old, a module cannot be
/// fetched, the compile failed (the message names the build log).
pub fn ensure_built(progress: bool) -> Result<PathBuf> {
    module().ensure_built(progress)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Kueue's manager configuration (`config.kueue.x-k8s.io/v1beta2` Configuration,
/// `apis/config/v1beta2/configuration_types.go`) for the local control plane: webhook
/// server on 127.0.0.1:`webhook_port` with its certificates in `cert_dir`, health probes on
/// 127.0.0.1:`health_port`, metrics off (`"0"`), leader election off, internal certificate
/// management on (see the module docs), integrations `batch/job` and `pod`, the visibility
/// server off (feature gate `VisibilityOnDemand`, `pkg/features/kube_features.go`).
pub(crate) fn config_yaml(webhook_port: u16, health_port: u16, cert_dir: &Path) -> String {
    format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: {NAMESPACE}
manageJobsWithoutQueueName: false
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: 127.0.0.1:{health_port}
metrics:
  bindAddress: \"0\"
webhook:
  host: 127.0.0.1
  port: {webhook_port}
  certDir: {}
internalCertManagement:
  enable: true
  webhookServiceName: {WEBHOOK_SERVICE}
  webhookSecretName: {WEBHOOK_SECRET}
integrations:
  frameworks:
  - batch/job
  - pod
featureGates:
  VisibilityOnDemand: false
",
        serde_json::to_string(&s(cert_dir)).unwrap_or_default()
    )
}

/// Kueue's manager out of cluster: `--config <state>/kueue/config.yaml`
/// ([`config_yaml`]), the admin kubeconfig through `KUBECONFIG`. Ready once
/// `http://127.0.0.1:<health_port>/readyz` answers `ok`.
pub fn manager(l: &Layout<'_>, bin: &Path, webhook_port: u16, health_port: u16) -> Component {
    Component {
        name: COMPONENT,
        binary: bin.join("kueue"),
        args: vec![
            "--config".into(),
            l.state_file("kueue/config.yaml"),
            "--zap-log-level".into(),
            "2".into(),
        ],
        env: vec![("KUBECONFIG".into(), l.state_file("kubeconfig"))],
        ports: vec![webhook_port, health_port],
        endpoint: format!("https://127.0.0.1:{webhook_port} (webhooks)"),
        start: StartWhen::AfterApiServer,
        readiness: Readiness::HttpReadyz { port: health_port },
    }
}

/// The components of `--kueue` ([`COMPONENTS`]).
pub(crate) fn kueue_components(
    l: &Layout<'_>,
    bin: &Path,
    webhook_port: u16,
    health_port: u16,
) -> Vec<Component> {
    vec![manager(l, bin, webhook_port, health_port)]
}

/// The CRD `crd` (a parsed `config/components/crd/bases` file) as installed: with the
/// conversion webhook at `https://127.0.0.1:<port>/convert` when it is one of
/// [`CONVERSION_CRDS`], `ca_b64` its `caBundle`.
pub(crate) fn crd_installed(mut crd: Value, port: u16, ca_b64: &str) -> Value {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if CONVERSION_CRDS.contains(&name) {
        crd["spec"]["conversion"] = json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": ca_b64},
                "conversionReviewVersions": ["v1"]
            }
        });
    }
    crd
}

/// The webhook configurations of `manifests` (Kueue's `config/components/webhook/manifests.yaml`,
/// parsed) as installed: names prefixed `kueue-`, every service reference replaced by
/// `https://127.0.0.1:<port><path>` with `ca_b64` as `caBundle`, and the install's
/// namespace selector (not `kube-system`, not `kueue-system`) on the pod, deployment and
/// statefulset webhooks.
pub(crate) fn webhooks_installed(manifests: &[Value], port: u16, ca_b64: &str) -> Vec<Value> {
    manifests
        .iter()
        .filter(|m| m.is_object())
        .map(|m| {
            let mut m = m.clone();
            let name = m["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            m["metadata"] = json!({"name": format!("kueue-{name}")});
            if let Some(hooks) = m["webhooks"].as_array_mut() {
                for h in hooks {
                    let path = h["clientConfig"]["service"]["path"]
                        .as_str()
                        .unwrap_or("/")
                        .to_owned();
                    h["clientConfig"] = json!({
                        "url": format!("https://127.0.0.1:{port}{path}"),
                        "caBundle": ca_b64
                    });
                    let hook = h["name"].as_str().unwrap_or_default();
                    if SYSTEM_EXCLUDED_WEBHOOKS.contains(&hook) {
                        h["namespaceSelector"] = json!({"matchExpressions": [{
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", NAMESPACE]
                        }]});
                    }
                }
            }
            m
        })
        .collect()
}

/// `bytes` in standard base64, as the API's `[]byte` fields carry them (k8s-openapi's
/// `ByteString` serialisation).
fn base64(bytes: &[u8]) -> String {
    serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn read(p: &Path) -> Result<String> {
    std::fs::read_to_string(p).map_err(|e| Error::failed(format!("cannot read {}", p.display()), e))
}

/// The parsed CRD files of `bin/manifests/crds`, sorted by file name.
fn crds(bin: &Path) -> Result<Vec<Value>> {
    let dir = bin.join("manifests/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::failed(format!("cannot read {}", dir.display()), e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            serde_saphyr::from_str::<Value>(&read(p)?)
                .map_err(|e| Error::runtime(format!("{}: not a CRD: {e}", p.display())))
        })
        .collect()
}

/// Everything Kueue's install provides before the manager starts: namespace
/// `kueue-system`, the CRDs ([`crd_installed`], waited for `Established`), the Secret
/// [`WEBHOOK_SECRET`] with the certificates in `<state>/kueue/certs` (`ca.crt`, `ca.key`,
/// `tls.crt`, `tls.key`), and the webhook configurations ([`webhooks_installed`]).
///
/// Errors: [`Error::Runtime`] naming the refused call or the unreadable file.
pub async fn install(client: &Client, bin: &Path, state: &Path, port: u16) -> Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.patch(
        NAMESPACE,
        &PatchParams::apply("gpuwl").force(),
        &Patch::Apply(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
    )
    .await
    .map_err(|e| api_error("apply namespace kueue-system", &e))?;
    let certs = state.join("kueue/certs");
    let ca = read(&certs.join("ca.crt"))?;
    let ca_b64 = base64(ca.as_bytes());
    let mut names = Vec::new();
    for crd in crds(bin)? {
        let crd = crd_installed(crd, port, &ca_b64);
        names.push(
            crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        apply(client, &crd).await?;
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_established(client, &names, Duration::from_secs(60)).await?;
    let mut data = serde_json::Map::new();
    for f in ["ca.crt", "ca.key", "tls.crt", "tls.key"] {
        data.insert(f.into(), json!(base64(read(&certs.join(f))?.as_bytes())));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    secrets
        .patch(
            WEBHOOK_SECRET,
            &PatchParams::apply("gpuwl").force(),
            &Patch::Apply(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
                "type": "Opaque", "data": data})),
        )
        .await
        .map_err(|e| api_error("apply the Secret kueue-webhook-server-cert", &e))?;
    let manifests: Vec<Value> =
        serde_saphyr::from_multiple(&read(&bin.join("manifests/webhooks.yaml"))?)
            .map_err(|e| Error::runtime(format!("Kueue's webhooks.yaml: {e}")))?;
    for w in webhooks_installed(&manifests, port, &ca_b64) {
        apply(client, &w).await?;
    }
    Ok(())
}

/// A free TCP port on 127.0.0.1.
/// How long [`start`] waits for the manager to be ready.
pub const READY_WAIT: Duration = Duration::from_secs(120);

/// Writes `<state>/kueue/certs` with `kueue-certs` (once) and `<state>/kueue/config.yaml`.
fn prepare(state: &Path, bin: &Path, webhook_port: u16, health_port: u16) -> Result<()> {
    let dir = state.join("kueue");
    let certs = dir.join("certs");
    if !certs.join("tls.crt").is_file() {
        let out = std::process::Command::new(bin.join("kueue-certs"))
            .args(["-dir", &s(&certs)])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::failed("cannot run kueue-certs", e))?;
        if !out.status.success() {
            return Err(Error::runtime(format!(
                "kueue-certs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    let p = dir.join("config.yaml");
    std::fs::write(&p, config_yaml(webhook_port, health_port, &certs))
        .map_err(|e| Error::failed(format!("cannot write {}", p.display()), e))
}

/// Starts Kueue on the running cluster `name` (state in `state`): builds it when missing
/// ([`ensure_built`]), its certificates and configuration (once), [`install`], the manager
/// when it is not running ([`kueue_components`], on the ports in `cluster.json`, picked the
/// first time); returns once its `/readyz` answers `ok`. A running manager is left alone,
/// so the supervisor restarts it by calling this again.
///
/// Errors: [`Error::Runtime`] (one line, naming the log) when building, installing or
/// starting fails, or the manager is not ready within [`READY_WAIT`].
pub fn start(name: &str, state: &Path, progress: bool) -> Result<()> {
    use super::process;
    if process::alive(state, COMPONENT).is_some() {
        return Ok(());
    }
    let bin = ensure_built(progress)?;
    let mut info = super::index::info(name)?;
    if info.kueue_webhook_port == 0 {
        info.kueue_webhook_port = free_port()?;
    }
    if info.kueue_health_port == 0 {
        info.kueue_health_port = free_port()?;
    }
    let p = state.join("cluster.json");
    std::fs::write(
        &p,
        serde_json::to_string_pretty(&info).map_err(|e| Error::runtime(e.to_string()))?,
    )
    .map_err(|e| Error::runtime(format!("cannot write {}: {e}", p.display())))?;
    let (webhook_port, health_port) = (info.kueue_webhook_port, info.kueue_health_port);
    prepare(state, &bin, webhook_port, health_port)?;
    if progress {
        note!("installing Kueue {KUEUE_VERSION}'s CRDs and webhooks (namespace {NAMESPACE})");
    }
    let kubeconfig = super::state::kubeconfig_path(name);
    let comps = kueue_components(
        &Layout { info: &info, state },
        &bin,
        webhook_port,
        health_port,
    );
    let (state_c, bin_c) = (state.to_path_buf(), bin.clone());
    let started = Instant::now();
    super::runtime::block_on_own_thread(async move {
        let client = super::kubeconfig::client(&kubeconfig, None).await?;
        tokio::time::timeout(
            Duration::from_secs(180),
            install(&client, &bin_c, &state_c, webhook_port),
        )
        .await
        .map_err(|_| Error::runtime("installing Kueue took over 180 s"))??;
        let c = &comps[0];
        if progress {
            note!("starting {} ({})", c.name, c.endpoint);
        }
        process::spawn(&state_c, c)?;
        let deadline = Instant::now() + READY_WAIT;
        loop {
            if process::alive(&state_c, c.name).is_none() {
                return Err(Error::runtime(format!(
                    "{} exited (log {}): {}",
                    c.name,
                    process::log_file(&state_c, c.name).display(),
                    text::esc(&process::last_log_line(&state_c, c.name))
                )));
            }
            if super::readiness::is_ready(c, &client, None, true).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::runtime(format!(
                    "{} is not ready after {} s (log {})",
                    c.name,
                    READY_WAIT.as_secs(),
                    process::log_file(&state_c, c.name).display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })??;
    if progress {
        note!(
            "Kueue {KUEUE_VERSION} (manager) ready in {:.1}s",
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
            kueue_webhook_port: 10360,
            kueue_health_port: 10361,
            ..super::super::recipe::golden_info()
        }
    }

    /// The `--kueue` recipe and configuration, as the golden file renders them.
    #[test]
    fn kueue_recipe_matches_golden_file() {
        let info = info();
        let state = PathBuf::from("/state");
        let comps = kueue_components(
            &Layout {
                info: &info,
                state: &state,
            },
            Path::new("/cache/kueue/bin"),
            10360,
            10361,
        );
        let names: Vec<_> = comps.iter().map(|c| c.name).collect();
        assert_eq!(names, COMPONENTS);
        let mut got = super::super::recipe::render(&comps);
        got.push_str("\n# <state>/kueue/config.yaml\n");
        got.push_str(&config_yaml(10360, 10361, &state.join("kueue/certs")));
        super::super::recipe::assert_golden("kueue.golden", &got, "Kueue recipe");
    }

    #[test]
    fn the_conversion_crds_get_a_url_webhook_and_the_rest_none() {
        let crd = |n: &str| json!({"metadata": {"name": n}, "spec": {"group": "kueue.x-k8s.io"}});
        let cq = crd_installed(crd("clusterqueues.kueue.x-k8s.io"), 10360, "Q0E=");
        assert_eq!(cq["spec"]["conversion"]["strategy"], "Webhook");
        assert_eq!(
            cq["spec"]["conversion"]["webhook"]["clientConfig"],
            json!({"url": "https://127.0.0.1:10360/convert", "caBundle": "Q0E="})
        );
        let rf = crd_installed(crd("resourceflavors.kueue.x-k8s.io"), 10360, "Q0E=");
        assert!(rf["spec"].get("conversion").is_none());
    }

    #[test]
    fn webhooks_point_at_loopback_and_skip_the_system_namespaces() {
        let m = vec![json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                {"name": "mpod.kb.io", "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/mutate--v1-pod"}}},
                {"name": "mjob.kb.io", "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/mutate-batch-v1-job"}}}
            ]
        })];
        let got = webhooks_installed(&m, 10360, "Q0E=");
        assert_eq!(
            got[0]["metadata"]["name"],
            "kueue-mutating-webhook-configuration"
        );
        let pod = &got[0]["webhooks"][0];
        assert_eq!(
            pod["clientConfig"],
            json!({"url": "https://127.0.0.1:10360/mutate--v1-pod", "caBundle": "Q0E="})
        );
        assert_eq!(
            pod["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["kube-system", "kueue-system"])
        );
        let job = &got[0]["webhooks"][1];
        assert_eq!(
            job["clientConfig"]["url"],
            "https://127.0.0.1:10360/mutate-batch-v1-job"
        );
        assert!(job.get("namespaceSelector").is_none());
    }

    #[test]
    fn base64_pads_like_the_standard_alphabet() {
        assert_eq!(base64(b"CA"), "Q0E=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn the_cache_key_names_the_version() {
        assert!(cache_key().starts_with("kueue-v0.17.0_"));
        assert!(ldflags().contains("version.GitVersion=v0.17.0"));
    }
}
