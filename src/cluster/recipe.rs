//! The control-plane recipe as data: one builder per component returning a [`Component`]
//! (binary, arguments, environment, ports, when to start it and how to tell it is ready).
//! [`super::up`] starts the list [`components`] returns in order and waits for each
//! component's [`Readiness`]; nothing here starts a process, so the generated command
//! lines are tested against golden files (`src/cluster/testdata/recipe.golden`; the
//! optional components' `gpu-operator.golden`, `kubevirt.golden` and `kueue.golden`).
//!
//! The flags follow kwokctl's binary runtime (kwok `pkg/kwokctl/components/*.go` and
//! `test/e2e/kwokctl/dryrun/testdata/binary/create_cluster.txt`), bound to 127.0.0.1 on
//! the cluster's own ports. Adding a component (the GPU Operator, a device-plugin
//! emulation) is one more builder and one more entry in [`components`] and
//! [`super::process::COMPONENTS`].

use std::path::{Path, PathBuf};

use super::state::ClusterInfo;

/// When [`super::up`] starts a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartWhen {
    /// At once, in list order.
    Now,
    /// Once the API server's `/readyz` says `ok`: it then passes its own API-server check at
    /// once instead of polling, and does not slow the API server's start on a small machine.
    AfterApiServer,
}

/// What must hold, besides its health endpoint, before a component counts as ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The ServiceAccount `namespace/name` exists (kube-controller-manager's ServiceAccount
    /// controller has run).
    ServiceAccount {
        /// Namespace of the ServiceAccount.
        namespace: &'static str,
        /// Its name.
        name: &'static str,
    },
    /// The coordination Lease `namespace/name` has a non-empty holder (a leader elected).
    LeaseHeld {
        /// Namespace of the Lease.
        namespace: &'static str,
        /// Its name.
        name: &'static str,
    },
}

/// How [`super::up`] knows a component is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Ready once it accepts TCP connections on each of its [`Component::ports`].
    Listening,
    /// `GET /readyz` through the cluster's admin kubeconfig answers `ok` (the API server).
    ApiServerReadyz,
    /// `GET /healthz` on plain `http://127.0.0.1:<port>` answers `ok` (a controller-runtime
    /// health probe, such as the GPU Operator's).
    HttpHealthz {
        /// The HTTP port to ask.
        port: u16,
    },
    /// `GET /readyz` on plain `http://127.0.0.1:<port>` answers `ok` (a controller-runtime
    /// readiness probe that also waits for the webhook server, such as Kueue's).
    HttpReadyz {
        /// The HTTP port to ask.
        port: u16,
    },
    /// `GET /healthz` on `https://127.0.0.1:<port>` (self-signed certificate, anonymous)
    /// answers at all, whatever the body (virt-api and virt-controller answer JSON), and
    /// `also` holds.
    HttpsAnswers {
        /// The HTTPS port to ask.
        port: u16,
        /// A further condition read from the API server.
        also: Option<Condition>,
    },
    /// `GET /healthz` on `https://127.0.0.1:<port>` (self-signed certificate, anonymous)
    /// answers `ok`, and `also` holds. Checked only once the API server is ready.
    Healthz {
        /// The HTTPS port to ask.
        port: u16,
        /// A further condition read from the API server.
        also: Option<Condition>,
    },
}

/// One process of the local control plane, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Component name: pid file, log file and progress lines use it
    /// ([`super::process::COMPONENTS`]).
    pub name: &'static str,
    /// The program (in the cluster's binary directory).
    pub binary: PathBuf,
    /// Its command-line arguments.
    pub args: Vec<String>,
    /// Environment variables set on top of gpuwl's own environment.
    pub env: Vec<(String, String)>,
    /// The TCP ports it listens on, all on 127.0.0.1 (two for etcd).
    pub ports: Vec<u16>,
    /// Where it serves, for the progress line (`127.0.0.1:<port>` or a URL).
    pub endpoint: String,
    /// When to start it.
    pub start: StartWhen,
    /// How to tell it is ready.
    pub readiness: Readiness,
}

/// The files a recipe refers to, all inside the cluster's state directory.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    /// The cluster's ports and binary directory.
    pub info: &'a ClusterInfo,
    /// The cluster's state directory (`pki/`, `etcd/`, kubeconfigs, `kwok.yaml`).
    pub state: &'a Path,
}

impl Layout<'_> {
    /// The path of file `f` in the cluster's state directory, as an argument.
    pub fn state_file(&self, f: &str) -> String {
        s(&self.state.join(f))
    }

    fn pki(&self, f: &str) -> String {
        s(&self.state.join("pki").join(f))
    }

    fn bin(&self, name: &str) -> PathBuf {
        super::build::binary(&self.info.bin_dir, name)
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Every component of the cluster, in start order.
pub fn components(l: &Layout<'_>) -> Vec<Component> {
    let mut apiserver = kube_apiserver(l);
    let mut controller_manager = kube_controller_manager(l);
    if l.info.twin {
        apiserver
            .args
            .extend(TWIN_APISERVER_ARGS.iter().map(|a| a.to_string()));
        controller_manager
            .args
            .extend(TWIN_CONTROLLER_MANAGER_ARGS.iter().map(|a| a.to_string()));
    }
    vec![
        etcd(l),
        apiserver,
        controller_manager,
        kube_scheduler(l),
        kwok_controller(l),
    ]
}

/// The twin's API server flags on top of [`kube_apiserver`]'s ([`ClusterInfo::twin`]):
/// without the TaintNodesByCondition admission plugin, which puts
/// `node.kubernetes.io/not-ready:NoSchedule` on every Node at its create whatever its
/// status (kubernetes/kubernetes `plugin/pkg/admission/nodetaint/admission.go`), for
/// kube-controller-manager to take off once the node is Ready: one more write and a wait
/// per node. The twin creates its nodes Ready, with the condition taints already as that
/// controller would leave them (`twin::objects::node_object`); a Node's status is kept on
/// create (`pkg/registry/core/node/strategy.go`, `dropDisabledFields`).
pub const TWIN_APISERVER_ARGS: [&str; 1] = ["--disable-admission-plugins=TaintNodesByCondition"];

/// The twin's kube-controller-manager flags on top of [`kube_controller_manager`]'s
/// ([`ClusterInfo::twin`]): every default controller but the TTL controller, which
/// patches the `node.alpha.kubernetes.io/ttl` annotation (a hint for kubelets' secret
/// caches; the twin has no kubelet) onto every node, and again onto each node that changes
/// after the node count crosses 100 and 500 (kubernetes/kubernetes
/// `pkg/controller/ttl/ttl_controller.go`; its name `ttl-controller`,
/// `cmd/kube-controller-manager/names/controller_names.go`).
pub const TWIN_CONTROLLER_MANAGER_ARGS: [&str; 1] = ["--controllers=*,-ttl-controller"];

/// The label a twin puts on the pods it copies bound to their node: kwok's `pod-ready`
/// stage skips them in a twin ([`twin_kwok_stages`]), so they stay `Pending` with their
/// node set, one status write fewer each. The scheduler counts a pod by its node whatever
/// its phase (kubernetes/kubernetes `pkg/scheduler/eventhandlers.go`, `assignedPod`; its
/// pod informer drops only `Succeeded` and `Failed`, `pkg/scheduler/scheduler.go`), as do
/// gpuwl's readers ([`gpuwl_core::model::pod::PodInfo::is_terminal`]).
pub const KWOK_LEAVE_PENDING_LABEL: &str = "gpuwl.local/kwok-leave-pending";

/// The line in kwok's `pod-ready` stage (kwok `kustomize/stage/pod/fast/pod-ready.yaml`)
/// after which [`twin_kwok_stages`] adds its requirement.
const POD_READY_NAME: &str = "  name: pod-ready\n";

/// The twin's kwok stages: `stages` (the pinned kwok module's, [`super::build`]) with one
/// more requirement in the `pod-ready` stage's selector, that the pod does not carry
/// [`KWOK_LEAVE_PENDING_LABEL`] (kwok's `DoesNotExist` on a jq key, as its own chaos stages
/// select by label: kwok `kustomize/stage/pod/chaos/*.yaml`,
/// `pkg/utils/expression/selector.go`). Every other stage is unchanged.
///
/// Errors: [`Error::Runtime`] when `stages` has no `pod-ready` stage with a
/// `matchExpressions` list (another kwok version's layout).
pub fn twin_kwok_stages(stages: &str) -> gpuwl_core::error::Result<String> {
    let unknown = || {
        gpuwl_core::error::Error::Runtime(
            "kwok's stages have no pod-ready stage with matchExpressions; the twin cannot \
             leave its bound pods to it"
                .into(),
        )
    };
    let stage = stages.find(POD_READY_NAME).ok_or_else(unknown)?;
    let list = "    matchExpressions:\n";
    let end = stages[stage..]
        .find("\n---")
        .map_or(stages.len(), |e| stage + e);
    let at = stages[stage..end].find(list).ok_or_else(unknown)? + stage + list.len();
    Ok(format!(
        "{}    - key: '.metadata.labels[\"{KWOK_LEAVE_PENDING_LABEL}\"]'\n      operator: 'DoesNotExist'\n{}",
        &stages[..at],
        &stages[at..]
    ))
}

/// etcd, one member on 127.0.0.1, no fsync (the data is thrown away with the cluster);
/// kwokctl's flags (kwok `pkg/kwokctl/components/etcd.go`) plus client-certificate TLS on
/// both listeners: `--client-cert-auth` / `--peer-client-cert-auth` with etcd's own CA
/// ([`super::pki::generate_etcd`]; etcd's flags: etcd-io/etcd
/// `server/etcdmain/help.go`), so a client without a certificate of that CA — any other
/// local user — is refused at the TLS handshake.
pub fn etcd(l: &Layout<'_>) -> Component {
    let info = l.info;
    let etcd_url = format!("https://127.0.0.1:{}", info.etcd_port);
    let peer_url = format!("https://127.0.0.1:{}", info.etcd_peer_port);
    Component {
        name: "etcd",
        binary: l.bin("etcd"),
        args: vec![
            "--name=node0".into(),
            format!("--data-dir={}", l.state_file("etcd")),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=node0={peer_url}"),
            format!("--cert-file={}", l.pki("etcd-server.crt")),
            format!("--key-file={}", l.pki("etcd-server.key")),
            format!("--trusted-ca-file={}", l.pki("etcd-ca.crt")),
            "--client-cert-auth=true".into(),
            format!("--peer-cert-file={}", l.pki("etcd-server.crt")),
            format!("--peer-key-file={}", l.pki("etcd-server.key")),
            format!("--peer-trusted-ca-file={}", l.pki("etcd-ca.crt")),
            "--peer-client-cert-auth=true".into(),
            "--auto-compaction-retention=1".into(),
            "--quota-backend-bytes=8589934592".into(),
            "--unsafe-no-fsync=true".into(),
        ],
        env: Vec::new(),
        ports: vec![info.etcd_port, info.etcd_peer_port],
        endpoint: format!("127.0.0.1:{}", info.etcd_port),
        // Not waiting for etcd before the next component: kube-apiserver retries until it
        // listens (as kwokctl starts them), and every component's start overlaps.
        start: StartWhen::Now,
        readiness: Readiness::Listening,
    }
}

/// kube-apiserver with every default admission plugin, Node and RBAC authorization, and
/// kwokctl's flags (kwok `pkg/kwokctl/components/kube_apiserver.go`).
pub(crate) fn kube_apiserver(l: &Layout<'_>) -> Component {
    let info = l.info;
    Component {
        name: "kube-apiserver",
        binary: l.bin("kube-apiserver"),
        args: vec![
            format!("--etcd-servers=https://127.0.0.1:{}", info.etcd_port),
            format!("--etcd-cafile={}", l.pki("etcd-ca.crt")),
            format!("--etcd-certfile={}", l.pki("etcd-client.crt")),
            format!("--etcd-keyfile={}", l.pki("etcd-client.key")),
            "--etcd-prefix=/registry".into(),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={}", info.apiserver_port),
            format!("--tls-cert-file={}", l.pki("apiserver.crt")),
            format!("--tls-private-key-file={}", l.pki("apiserver.key")),
            format!("--client-ca-file={}", l.pki("ca.crt")),
            format!("--service-account-key-file={}", l.pki("sa.pub")),
            format!("--service-account-signing-key-file={}", l.pki("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--endpoint-reconciler-type=none".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--allow-privileged=true".into(),
            "--enable-priority-and-fairness=false".into(),
            "--max-requests-inflight=0".into(),
            "--max-mutating-requests-inflight=0".into(),
        ],
        env: Vec::new(),
        ports: vec![info.apiserver_port],
        endpoint: info.server_url(),
        start: StartWhen::Now,
        readiness: Readiness::ApiServerReadyz,
    }
}

/// kube-controller-manager's flags. kwokctl's (kwok `pkg/kwokctl/components/kube_controller_manager.go`):
/// node-monitor periods, `--root-ca-file` and `--service-account-private-key-file`; plus
/// its own identity and ServiceAccount credentials per controller, leader election off,
/// and the cluster CA as signer of CertificateSigningRequests. Started once the API
/// server is ready; ready once its ServiceAccount controller made `default/default`.
pub fn kube_controller_manager(l: &Layout<'_>) -> Component {
    let info = l.info;
    Component {
        name: "kube-controller-manager",
        binary: l.bin("kube-controller-manager"),
        args: vec![
            // No --authentication/--authorization-kubeconfig, as in kwokctl: with them it
            // reads kube-system/extension-apiserver-authentication at start and exits when
            // the API server's RBAC bootstrap has not yet granted that. Its health paths are
            // open without them; nothing else needs to be.
            format!(
                "--kubeconfig={}",
                l.state_file("controller-manager.kubeconfig")
            ),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", info.controller_manager_port),
            "--leader-elect=false".into(),
            "--use-service-account-credentials=true".into(),
            format!("--service-account-private-key-file={}", l.pki("sa.key")),
            format!("--root-ca-file={}", l.pki("ca.crt")),
            format!("--cluster-signing-cert-file={}", l.pki("ca.crt")),
            format!("--cluster-signing-key-file={}", l.pki("ca.key")),
            // Its default, /usr/libexec/kubernetes/kubelet-plugins/volume/exec/, would be
            // created on the host at start.
            format!("--flex-volume-plugin-dir={}", l.state_file("flexvolume")),
            // As long as kwok's node leases: a node goes NotReady only after a whole lease
            // without renewal (kubernetes/kubernetes
            // `pkg/controller/nodelifecycle/node_lifecycle_controller.go`).
            format!("--node-monitor-period={}s", node_lease_seconds() / 8),
            format!("--node-monitor-grace-period={}s", node_lease_seconds()),
            "--kube-api-qps=5000".into(),
            "--kube-api-burst=10000".into(),
        ],
        env: Vec::new(),
        ports: vec![info.controller_manager_port],
        endpoint: format!("127.0.0.1:{}", info.controller_manager_port),
        start: StartWhen::AfterApiServer,
        readiness: Readiness::Healthz {
            port: info.controller_manager_port,
            also: Some(Condition::ServiceAccount {
                namespace: "default",
                name: "default",
            }),
        },
    }
}

/// kube-scheduler with the admin kubeconfig, its health paths open, and kwokctl's client
/// rate limits (kwok `pkg/kwokctl/components/kube_scheduler.go`), leader election off:
/// there is one instance, and a leader that cannot renew its lease in time (an API server
/// stalled for 20 s: a laptop suspend, a loaded machine) exits ("leaderelection lost",
/// k8s.io/client-go `tools/leaderelection`), which stopped scheduling for good. Ready once
/// it serves `/healthz`.
pub fn kube_scheduler(l: &Layout<'_>) -> Component {
    let info = l.info;
    let kubeconfig = l.state_file("kubeconfig");
    Component {
        name: "kube-scheduler",
        binary: l.bin("kube-scheduler"),
        args: vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", info.scheduler_port),
            "--kube-api-qps=5000".into(),
            "--kube-api-burst=10000".into(),
            "--leader-elect=false".into(),
        ],
        env: Vec::new(),
        ports: vec![info.scheduler_port],
        endpoint: format!("127.0.0.1:{}", info.scheduler_port),
        start: StartWhen::Now,
        readiness: Readiness::Healthz {
            port: info.scheduler_port,
            also: None,
        },
    }
}

/// The test-only environment variable that shortens kwok's node leases, and with them
/// kube-controller-manager's node grace and monitor periods and the supervisor's lease
/// checks ([`super::supervisor::kwok_check_every`]), all in proportion, so that a live
/// test can wedge kwok and watch the supervisor restart it before any node goes NotReady
/// in a minute rather than four (`tests/it/cluster.rs`). Whole seconds, 20 to 200; unset
/// or anything else: 200.
pub const NODE_LEASE_ENV: &str = "GPUWL_TEST_NODE_LEASE_SECONDS";

/// kwok's node lease duration, seconds, which is also kube-controller-manager's
/// `--node-monitor-grace-period`: 200 (kwokctl's, kwok
/// `pkg/kwokctl/components/kwok_controller.go`), or [`NODE_LEASE_ENV`]'s value in tests.
pub fn node_lease_seconds() -> u64 {
    std::env::var(NODE_LEASE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|v| (20..=200).contains(v))
        .unwrap_or(200)
}

/// kwok-controller managing every node (`--manage-all-nodes=true`: every Node becomes
/// Ready, every bound Pod Running), its configuration and stages in `kwok.yaml`, its node
/// leases of 200 s (kwok `pkg/kwokctl/components/kwok_controller.go`).
pub fn kwok_controller(l: &Layout<'_>) -> Component {
    let info = l.info;
    Component {
        name: "kwok-controller",
        binary: l.bin("kwok"),
        args: vec![
            "--manage-all-nodes=true".into(),
            format!("--kubeconfig={}", l.state_file("kubeconfig")),
            format!("--config={}", l.state_file("kwok.yaml")),
            format!("--tls-cert-file={}", l.pki("apiserver.crt")),
            format!("--tls-private-key-file={}", l.pki("apiserver.key")),
            "--node-ip=127.0.0.1".into(),
            "--node-name=localhost".into(),
            format!("--node-port={}", info.kwok_port),
            format!("--server-address=127.0.0.1:{}", info.kwok_port),
            format!("--node-lease-duration-seconds={}", node_lease_seconds()),
        ],
        env: Vec::new(),
        ports: vec![info.kwok_port],
        endpoint: format!("127.0.0.1:{}", info.kwok_port),
        start: StartWhen::Now,
        readiness: Readiness::Healthz {
            port: info.kwok_port,
            also: None,
        },
    }
}

/// The recipe, one block per component: name, start, binary, ports, readiness, its
/// environment, then one argument per line (each line of a multi-line argument after a
/// `|`).
pub fn render(components: &[Component]) -> String {
    let mut out = String::new();
    for c in components {
        out.push_str(&format!(
            "{} start={:?} binary={} ports={:?} endpoint={}\n  readiness={:?}\n",
            c.name,
            c.start,
            c.binary.display(),
            c.ports,
            c.endpoint,
            c.readiness
        ));
        for (k, v) in &c.env {
            out.push_str(&format!("  env {k}={v}\n"));
        }
        for a in &c.args {
            if a.contains('\n') {
                // A multi-line argument (the GPU Operator's namespace script): a `|` per line.
                for line in a.lines() {
                    out.push_str(&format!("  |{line}\n"));
                }
            } else {
                out.push_str(&format!("  {a}\n"));
            }
        }
    }
    out
}

/// The cluster facts every golden recipe file is rendered from (fixed ports and paths):
/// recipe.rs', gpu_operator.rs' and kubevirt.rs' tests share it.
#[cfg(test)]
pub(crate) fn golden_info() -> ClusterInfo {
    ClusterInfo {
        name: "golden".into(),
        apiserver_port: 6443,
        etcd_port: 2379,
        etcd_peer_port: 2380,
        controller_manager_port: 10257,
        scheduler_port: 10259,
        kwok_port: 10247,
        bin_dir: PathBuf::from("/bin-dir"),
        kubernetes_version: "v0.0.0".into(),
        gpu_operator_port: 0,
        kubevirt_api_port: 0,
        kubevirt_controller_port: 0,
        kueue_webhook_port: 0,
        kueue_health_port: 0,
        env: Vec::new(),
        twin: false,
    }
}

/// Compares `got` with the golden file `testdata/<file>` (rewritten first when
/// `GPUWL_UPDATE_GOLDEN` is set); `what` names the recipe in the failure.
#[cfg(test)]
pub(crate) fn assert_golden(file: &str, got: &str, what: &str) {
    let path = format!("{}/src/cluster/testdata/{file}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("GPUWL_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        got, want,
        "{what} changed; rerun with GPUWL_UPDATE_GOLDEN=1 and review the diff"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ClusterInfo {
        golden_info()
    }

    #[test]
    fn recipe_matches_golden_file() {
        let info = info();
        let state = PathBuf::from("/state");
        let got = render(&components(&Layout {
            info: &info,
            state: &state,
        }));
        assert_golden("recipe.golden", &got, "recipe");
    }

    #[test]
    fn recipe_names_and_ports_match_the_process_list_and_ports() {
        let info = info();
        let state = PathBuf::from("/state");
        let comps = components(&Layout {
            info: &info,
            state: &state,
        });
        let names: Vec<_> = comps.iter().map(|c| c.name).collect();
        assert_eq!(names, super::super::process::COMPONENTS);
        let mut by_recipe: Vec<(&str, u16)> = comps
            .iter()
            .flat_map(|c| c.ports.iter().map(move |&p| (c.name, p)))
            .collect();
        let mut by_ports = info.ports().by_component().to_vec();
        by_recipe.sort();
        by_ports.sort();
        assert_eq!(by_recipe, by_ports);
    }

    #[test]
    fn a_twin_runs_without_the_not_ready_taint_and_the_ttl_controller() {
        let state = PathBuf::from("/state");
        let plain = info();
        let twin = ClusterInfo {
            twin: true,
            ..info()
        };
        let args = |info: &ClusterInfo, name: &str| {
            components(&Layout {
                info,
                state: &state,
            })
            .into_iter()
            .find(|c| c.name == name)
            .unwrap()
            .args
        };
        for (name, extra) in [
            (
                "kube-apiserver",
                "--disable-admission-plugins=TaintNodesByCondition",
            ),
            ("kube-controller-manager", "--controllers=*,-ttl-controller"),
        ] {
            let (p, t) = (args(&plain, name), args(&twin, name));
            assert!(!p.iter().any(|a| a == extra), "{name}: {p:?}");
            assert_eq!(t.last().map(String::as_str), Some(extra), "{name}: {t:?}");
            assert_eq!(t[..t.len() - 1], p[..], "{name}: only the one flag differs");
        }
        for name in ["etcd", "kube-scheduler", "kwok-controller"] {
            assert_eq!(args(&plain, name), args(&twin, name), "{name}");
        }
    }

    /// kwok v0.8.0's `pod-ready` stage's head and the `pod-delete` stage after it, as the
    /// stages file joins them (`kustomize/stage/pod/fast/`).
    const STAGES: &str = "apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
  next:
    statusTemplate: |
      phase: Running

---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
";

    #[test]
    fn the_twins_pod_ready_stage_skips_the_labelled_pods_only() {
        let got = twin_kwok_stages(STAGES).unwrap();
        let (ready, delete) = got.split_once("\n---\n").unwrap();
        assert!(
            ready.contains(
                "    matchExpressions:
    - key: '.metadata.labels[\"gpuwl.local/kwok-leave-pending\"]'
      operator: 'DoesNotExist'
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
"
            ),
            "{ready}"
        );
        assert_eq!(delete, STAGES.split_once("\n---\n").unwrap().1);
        // Nothing else changes.
        let added = "    - key: '.metadata.labels[\"gpuwl.local/kwok-leave-pending\"]'\n      operator: 'DoesNotExist'\n";
        assert_eq!(got.replacen(added, "", 1), STAGES);
        // Another layout is an error, not a stage set that would make the copies Running.
        let err = twin_kwok_stages("kind: Stage\nmetadata:\n  name: pod-delete\n").unwrap_err();
        assert!(err.to_string().contains("no pod-ready stage"), "{err}");
    }
}
