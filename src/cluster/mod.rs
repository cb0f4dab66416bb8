//! The local control plane: upstream etcd, kube-apiserver and kube-scheduler with kwok
//! simulating every node, all on 127.0.0.1, started as detached processes.
//!
//! Design decisions:
//! - The binaries come from the pinned Go module `controlplane/` ([`build`]), embedded
//!   into gpuwl and built into a cache keyed by the pins. Nothing is downloaded at run time.
//! - gpuwl starts the processes itself with the flags kwokctl's binary runtime uses
//!   (kwok's `test/e2e/kwokctl/dryrun/testdata/binary/create_cluster.txt`), but binds
//!   everything to 127.0.0.1 on free ports. This is simpler and more robust than driving
//!   kwokctl (which wants to download artifacts and edits `~/.kube/config`); kwokctl is
//!   still built and can be pointed at the same binaries.
//! - No kube-controller-manager runs, so nothing would create the `default`
//!   ServiceAccount of a new namespace and the `ServiceAccount` admission plugin would
//!   reject every Pod there. The API server therefore runs with
//!   `--disable-admission-plugins=ServiceAccount`: Pods in any namespace, created at any
//!   time, are accepted with no per-namespace step (kwok never runs containers, so no
//!   token is needed). Side effect: namespaces are never finalized on delete.
//! - For the same reason (no node-lifecycle controller to lift it) the
//!   `TaintNodesByCondition` admission plugin is disabled too: otherwise every new Node
//!   keeps the `node.kubernetes.io/not-ready:NoSchedule` taint it is created with, and
//!   the scheduler rejects it ("had untolerated taint(s)") although kwok marks it Ready.
//! - kwok runs with `--manage-all-nodes=true`: every Node becomes Ready and every Pod
//!   bound to a Node becomes Running, without annotations.
//! - Certificates come from `rcgen` ([`pki`]); the kubeconfig authenticates with a client
//!   certificate in `system:masters`.
//!
//! State of cluster `NAME` lives in [`state_dir`]`(NAME)`: `kubeconfig`, `pki/`,
//! `etcd/`, `pids/<component>.pid`, `logs/<component>.log`, `cluster.json`.

/// Progress line on stderr; a closed stderr (e.g. `| head`) must not abort the command.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod build;
pub mod pki;
pub mod process;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Options of [`up`].
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Cluster name: 1-40 characters of `a-z`, `0-9`, `-`, starting with a letter or digit.
    pub name: String,
    /// Show build progress and start-up steps on stderr.
    pub progress: bool,
}

impl Default for UpOptions {
    fn default() -> Self {
        UpOptions {
            name: DEFAULT_NAME.to_string(),
            progress: false,
        }
    }
}

/// The default cluster name of `gpuwl cluster` and `gpuwl lab`.
pub const DEFAULT_NAME: &str = "gpuwl";

/// A running cluster, as returned by [`up`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterHandle {
    /// The cluster name.
    pub name: String,
    /// Kubeconfig file (context named after the cluster, client-certificate auth).
    pub kubeconfig: PathBuf,
    /// Directory holding all the cluster's state (certs, etcd data, pids, logs).
    pub state_dir: PathBuf,
}

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Every process (etcd, kube-apiserver, kube-scheduler, kwok-controller) is alive.
    Running,
    /// No process is alive (no state at all, or state left from a stopped cluster/reboot).
    Stopped,
    /// Some processes are alive and others died; `detail` names the dead ones and the
    /// last line of their logs.
    Broken {
        /// One line: which component died and why, as far as its log tells.
        detail: String,
    },
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Running => f.write_str("running"),
            Status::Stopped => f.write_str("stopped"),
            Status::Broken { detail } => write!(f, "broken: {detail}"),
        }
    }
}

/// Ports and binaries of a started cluster, saved as `<state>/cluster.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// Cluster name.
    pub name: String,
    /// Port of the API server (HTTPS on 127.0.0.1).
    pub apiserver_port: u16,
    /// etcd client port (plain HTTP on 127.0.0.1).
    pub etcd_port: u16,
    /// etcd peer port.
    pub etcd_peer_port: u16,
    /// kube-scheduler secure port (HTTPS on 127.0.0.1, `/healthz` open).
    pub scheduler_port: u16,
    /// kwok-controller server port (HTTPS on 127.0.0.1, `/healthz`).
    pub kwok_port: u16,
    /// Directory of the binaries that were started.
    pub bin_dir: PathBuf,
    /// Kubernetes version of the binaries.
    pub kubernetes_version: String,
}

impl ClusterInfo {
    /// `https://127.0.0.1:<apiserver_port>`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }
}

fn rt(msg: impl Into<String>) -> Error {
    Error::Runtime(msg.into())
}

/// Checks a cluster name (see [`UpOptions::name`]); [`Error::Input`] otherwise.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "invalid cluster name {name:?}: use 1-40 characters of a-z, 0-9 and '-', not starting with '-'"
        )))
    }
}

/// Directory under which every cluster's state lives: `$GPUWL_STATE_DIR`, else
/// `$XDG_STATE_HOME/gpuwl/clusters`, else `$HOME/.local/state/gpuwl/clusters`.
pub fn state_root() -> PathBuf {
    if let Some(d) = std::env::var_os("GPUWL_STATE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| build::home().join(".local").join("state"))
        .join("gpuwl")
        .join("clusters")
}

/// State directory of cluster `name` (may not exist).
pub fn state_dir(name: &str) -> PathBuf {
    state_root().join(name)
}

/// Kubeconfig path of cluster `name`: `<state_dir>/kubeconfig`. The file exists only
/// while the cluster has been started.
pub fn kubeconfig_path(name: &str) -> PathBuf {
    state_dir(name).join("kubeconfig")
}

/// Reads `<state>/cluster.json` of cluster `name`.
///
/// Errors: [`Error::Runtime`] when the cluster was never started or the file is corrupt.
pub fn info(name: &str) -> Result<ClusterInfo> {
    let p = state_dir(name).join("cluster.json");
    let text = std::fs::read_to_string(&p).map_err(|_| {
        rt(format!(
            "cluster {name:?} has not been started (no {}); run `gpuwl cluster up --name {name}`",
            p.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| rt(format!("corrupt {}: {e}", p.display())))
}

/// Process-level status of cluster `name` (see [`Status`]). Never starts anything.
///
/// Errors: [`Error::Input`] for an invalid name.
pub fn status(name: &str) -> Result<Status> {
    validate_name(name)?;
    let state = state_dir(name);
    if !state.join("pids").is_dir() {
        return Ok(Status::Stopped);
    }
    let mut dead = Vec::new();
    for c in process::COMPONENTS {
        if process::alive(&state, c).is_none() {
            dead.push(c);
        }
    }
    if dead.is_empty() {
        Ok(Status::Running)
    } else if dead.len() == process::COMPONENTS.len() {
        Ok(Status::Stopped)
    } else {
        let detail = dead
            .iter()
            .map(|c| {
                let last = process::last_log_line(&state, c);
                if last.is_empty() {
                    format!("{c} is not running")
                } else {
                    format!("{c} is not running (last log line: {last})")
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Status::Broken { detail })
    }
}

/// Stops every process of cluster `name` and removes its state directory. Succeeds when
/// the cluster does not exist.
///
/// Errors: [`Error::Input`] for an invalid name; [`Error::Runtime`] when a process
/// cannot be stopped or the state cannot be removed.
pub fn down(name: &str) -> Result<()> {
    validate_name(name)?;
    let state = state_dir(name);
    if !state.exists() {
        return Ok(());
    }
    process::stop_all(&state, Duration::from_secs(10))?;
    std::fs::remove_dir_all(&state)
        .map_err(|e| rt(format!("cannot remove {}: {e}", state.display())))
}

/// Starts cluster `opts.name`, or returns it when it is already running (idempotent).
///
/// Builds the binaries when missing ([`build::ensure_built`]); a stopped or broken
/// cluster's leftover state is stopped and replaced by a fresh cluster. Returns once
/// `/readyz` of the API server says `ok`, the scheduler serves `/healthz` and holds its
/// leader lease, and kwok serves `/healthz`. Processes outlive the calling process.
/// Safe to call from inside a tokio runtime (the waits run on their own thread).
///
/// Errors: [`Error::Input`] for an invalid name; [`Error::Runtime`] (one line, naming the
/// component's log) when building fails or a component does not come up in time.
pub fn up(opts: &UpOptions) -> Result<ClusterHandle> {
    validate_name(&opts.name)?;
    let name = opts.name.as_str();
    let state = state_dir(name);
    let handle = ClusterHandle {
        name: name.to_string(),
        kubeconfig: kubeconfig_path(name),
        state_dir: state.clone(),
    };
    match status(name)? {
        Status::Running => {
            let info = info(name)?;
            on_own_thread({
                let kubeconfig = handle.kubeconfig.clone();
                move || wait_ready(&kubeconfig, &info, Duration::from_secs(60))
            })?;
            return Ok(handle);
        }
        Status::Broken { detail } => {
            if opts.progress {
                note!("cluster {name:?} was broken ({detail}); starting it afresh");
            }
            process::stop_all(&state, Duration::from_secs(10))?;
        }
        Status::Stopped => {}
    }
    if state.exists() {
        std::fs::remove_dir_all(&state)
            .map_err(|e| rt(format!("cannot remove stale {}: {e}", state.display())))?;
    }
    let bin = build::ensure_built(opts.progress)?;
    let started = Instant::now();
    let result = start(name, &state, &bin, opts.progress);
    if let Err(e) = result {
        let _ = process::stop_all(&state, Duration::from_secs(5));
        return Err(e);
    }
    if opts.progress {
        note!(
            "cluster {name:?} is up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(handle)
}

fn on_own_thread<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    std::thread::spawn(f)
        .join()
        .map_err(|_| rt("internal error: the readiness check panicked"))?
}

/// Picks `n` distinct free TCP ports on 127.0.0.1.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| rt(format!("cannot find a free port on 127.0.0.1: {e}")))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| rt(format!("cannot find a free port on 127.0.0.1: {e}")))
}

fn kubeconfig_text(name: &str, server: &str, pki: &Path) -> String {
    let p = |f: &str| pki.join(f).display().to_string();
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {server}
    certificate-authority: {ca}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}-admin
current-context: {name}
users:
- name: {name}-admin
  user:
    client-certificate: {crt}
    client-key: {key}
",
        ca = p("ca.crt"),
        crt = p("admin.crt"),
        key = p("admin.key"),
    )
}

const KWOK_CONFIG: &str = "apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: true
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
";

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn start(name: &str, state: &Path, bin: &Path, progress: bool) -> Result<()> {
    let step = |msg: &str| {
        if progress {
            note!("{msg}");
        }
    };
    std::fs::create_dir_all(state)
        .map_err(|e| rt(format!("cannot create {}: {e}", state.display())))?;
    let pki_dir = state.join("pki");
    pki::generate(&pki_dir, name)?;
    let ports = free_ports(5)?;
    let info = ClusterInfo {
        name: name.to_string(),
        apiserver_port: ports[0],
        etcd_port: ports[1],
        etcd_peer_port: ports[2],
        scheduler_port: ports[3],
        kwok_port: ports[4],
        bin_dir: bin.to_path_buf(),
        kubernetes_version: build::KUBERNETES_VERSION.to_string(),
    };
    let write = |file: &str, text: &str| {
        let p = state.join(file);
        std::fs::write(&p, text).map_err(|e| rt(format!("cannot write {}: {e}", p.display())))
    };
    write(
        "cluster.json",
        &serde_json::to_string_pretty(&info).map_err(|e| rt(e.to_string()))?,
    )?;
    let kubeconfig = state.join("kubeconfig");
    write(
        "kubeconfig",
        &kubeconfig_text(name, &info.server_url(), &pki_dir),
    )?;
    let stages_path = bin.join(build::KWOK_STAGES_FILE);
    let stages = std::fs::read_to_string(&stages_path).map_err(|e| {
        rt(format!(
            "cannot read {} ({e}); rebuild with `gpuwl cluster build`",
            stages_path.display()
        ))
    })?;
    write("kwok.yaml", &format!("{KWOK_CONFIG}---\n{stages}"))?;
    let pk = |f: &str| s(&pki_dir.join(f));

    step(&format!("starting etcd on 127.0.0.1:{}", info.etcd_port));
    let etcd_url = format!("http://127.0.0.1:{}", info.etcd_port);
    let peer_url = format!("http://127.0.0.1:{}", info.etcd_peer_port);
    process::spawn(
        state,
        "etcd",
        &build::binary(bin, "etcd"),
        &[
            "--name=node0".into(),
            format!("--data-dir={}", s(&state.join("etcd"))),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=node0={peer_url}"),
            "--auto-compaction-retention=1".into(),
            "--quota-backend-bytes=8589934592".into(),
            "--unsafe-no-fsync=true".into(),
        ],
    )?;
    wait_tcp(state, "etcd", info.etcd_port, Duration::from_secs(30))?;

    step(&format!(
        "starting kube-apiserver on https://127.0.0.1:{}",
        info.apiserver_port
    ));
    process::spawn(
        state,
        "kube-apiserver",
        &build::binary(bin, "kube-apiserver"),
        &[
            format!("--etcd-servers={etcd_url}"),
            "--etcd-prefix=/registry".into(),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={}", info.apiserver_port),
            format!("--tls-cert-file={}", pk("apiserver.crt")),
            format!("--tls-private-key-file={}", pk("apiserver.key")),
            format!("--client-ca-file={}", pk("ca.crt")),
            format!("--service-account-key-file={}", pk("sa.pub")),
            format!("--service-account-signing-key-file={}", pk("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--endpoint-reconciler-type=none".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
            "--allow-privileged=true".into(),
            "--enable-priority-and-fairness=false".into(),
            "--max-requests-inflight=0".into(),
            "--max-mutating-requests-inflight=0".into(),
        ],
    )?;

    step(&format!(
        "starting kube-scheduler (127.0.0.1:{}) and kwok-controller (127.0.0.1:{})",
        info.scheduler_port, info.kwok_port
    ));
    process::spawn(
        state,
        "kube-scheduler",
        &build::binary(bin, "kube-scheduler"),
        &[
            format!("--kubeconfig={}", s(&kubeconfig)),
            format!("--authentication-kubeconfig={}", s(&kubeconfig)),
            format!("--authorization-kubeconfig={}", s(&kubeconfig)),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", info.scheduler_port),
            "--kube-api-qps=5000".into(),
            "--kube-api-burst=10000".into(),
        ],
    )?;
    process::spawn(
        state,
        "kwok-controller",
        &build::binary(bin, "kwok"),
        &[
            "--manage-all-nodes=true".into(),
            format!("--kubeconfig={}", s(&kubeconfig)),
            format!("--config={}", s(&state.join("kwok.yaml"))),
            format!("--tls-cert-file={}", pk("apiserver.crt")),
            format!("--tls-private-key-file={}", pk("apiserver.key")),
            "--node-ip=127.0.0.1".into(),
            "--node-name=localhost".into(),
            format!("--node-port={}", info.kwok_port),
            format!("--server-address=127.0.0.1:{}", info.kwok_port),
            "--node-lease-duration-seconds=200".into(),
        ],
    )?;

    step("waiting for /readyz, the scheduler and kwok");
    on_own_thread({
        let info = info.clone();
        move || wait_ready(&kubeconfig, &info, Duration::from_secs(120))
    })
}

fn wait_tcp(state: &Path, component: &str, port: u16, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        check_alive(state, component)?;
        if Instant::now() > deadline {
            return Err(not_ready(state, component, "does not listen"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn check_alive(state: &Path, component: &str) -> Result<()> {
    if process::alive(state, component).is_none() {
        return Err(not_ready(state, component, "exited"));
    }
    Ok(())
}

fn not_ready(state: &Path, component: &str, what: &str) -> Error {
    let last = process::last_log_line(state, component);
    rt(format!(
        "{component} {what} (log {}){}",
        process::log_file(state, component).display(),
        if last.is_empty() {
            String::new()
        } else {
            format!(": {last}")
        }
    ))
}

/// Waits until the API server's `/readyz` says ok, the scheduler serves `/healthz` and
/// holds its lease, and kwok serves `/healthz`. Runs its own single-threaded runtime.
fn wait_ready(kubeconfig: &Path, info: &ClusterInfo, timeout: Duration) -> Result<()> {
    let state = state_dir(&info.name);
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| rt(format!("cannot start the async runtime: {e}")))?;
    tokio_rt.block_on(async {
        let deadline = Instant::now() + timeout;
        let api = client(kubeconfig, None).await?;
        let tick = || tokio::time::sleep(Duration::from_millis(250));
        // 1. API server ready.
        loop {
            if get_text(&api, "/readyz").await.as_deref() == Some("ok") {
                break;
            }
            check_alive(&state, "etcd")?;
            check_alive(&state, "kube-apiserver")?;
            if Instant::now() > deadline {
                return Err(not_ready(&state, "kube-apiserver", "is not ready in time"));
            }
            tick().await;
        }
        // 2. Scheduler serving and leading; 3. kwok serving.
        let sched = insecure_client(info.scheduler_port)?;
        let kwok = insecure_client(info.kwok_port)?;
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(api.clone(), "kube-system");
        loop {
            let sched_ok = get_text(&sched, "/healthz").await.as_deref() == Some("ok");
            let leading = sched_ok
                && leases
                    .get_opt("kube-scheduler")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|l| l.spec)
                    .and_then(|s| s.holder_identity)
                    .is_some_and(|h| !h.is_empty());
            let kwok_ok = get_text(&kwok, "/healthz").await.as_deref() == Some("ok");
            if leading && kwok_ok {
                return Ok(());
            }
            check_alive(&state, "kube-scheduler")?;
            check_alive(&state, "kwok-controller")?;
            if Instant::now() > deadline {
                let who = if leading {
                    "kwok-controller"
                } else {
                    "kube-scheduler"
                };
                return Err(not_ready(&state, who, "is not serving in time"));
            }
            tick().await;
        }
    })
}

async fn get_text(c: &kube::Client, path: &str) -> Option<String> {
    let req = http::Request::get(path).body(Vec::new()).ok()?;
    tokio::time::timeout(Duration::from_secs(5), c.request_text(req))
        .await
        .ok()?
        .ok()
        .map(|t| t.trim().to_string())
}

/// A client for a component's own HTTPS port (self-signed serving cert, anonymous).
fn insecure_client(port: u16) -> Result<kube::Client> {
    let url = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| rt(format!("bad url: {e}")))?;
    let mut cfg = kube::Config::new(url);
    cfg.accept_invalid_certs = true;
    kube::Client::try_from(cfg)
        .map_err(|e| rt(format!("cannot build a client for port {port}: {e}")))
}

/// A kube client from a kubeconfig file, using `context` or the file's current context.
///
/// Errors: [`Error::Runtime`] when the file cannot be read or parsed, the context does not
/// exist, or its certificates cannot be loaded.
pub async fn client(kubeconfig: &Path, context: Option<&str>) -> Result<kube::Client> {
    // The same loader as every other command; a broken kubeconfig of our own cluster is a
    // runtime failure (exit 3), not the user's bad input.
    crate::input::live::client(Some(kubeconfig), context)
        .await
        .map_err(|e| match e {
            e if e.is_input() => Error::Runtime(e.to_string()),
            other => other,
        })
}
