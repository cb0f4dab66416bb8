//! The local control plane: upstream etcd, kube-apiserver, kube-controller-manager and
//! kube-scheduler with kwok simulating every node, all on 127.0.0.1, started as detached
//! processes.
//!
//! Design decisions:
//! - The binaries come from the pinned Go module `controlplane/` ([`build`]), embedded
//!   into gpuwl and built into a cache keyed by the pins. Nothing is downloaded at run time.
//! - gpuwl starts the processes itself with the flags kwokctl's binary runtime uses
//!   (kwok's `test/e2e/kwokctl/dryrun/testdata/binary/create_cluster.txt` and
//!   `pkg/kwokctl/components/*.go`), but binds everything to 127.0.0.1 on free ports
//!   ([`ports`]). Each component's command line, ports and readiness are one value built
//!   by [`recipe`]; [`up`] starts them in order and waits for each. This is simpler and more robust than driving kwokctl (which wants to
//!   download artifacts and edits `~/.kube/config`); kwokctl is still built and can be
//!   pointed at the same binaries.
//! - kube-controller-manager runs with every default controller, as in a kubeadm
//!   cluster: a new namespace gets its `default` ServiceAccount, a Deployment gets its
//!   ReplicaSet and Pods, a deleted namespace is emptied and finalized. It authenticates
//!   with its own client certificate as `system:kube-controller-manager` and gives each
//!   controller its own ServiceAccount token (`--use-service-account-credentials`), signed
//!   with the key the API server verifies (`sa.key` / `sa.pub`, [`pki`]). Leader election
//!   is off (one instance).
//! - The node-lifecycle controller watches the node leases kwok renews every 50 s
//!   (`--node-lease-duration-seconds=200`, renewed at a quarter of it, kwok
//!   `pkg/kwok/controllers/controller.go`); it runs with kwokctl's periods for that lease
//!   (`--node-monitor-period=25s`, `--node-monitor-grace-period=200s`: kwokctl's defaults
//!   5 s / 40 s times its default heartbeat factor 5, kwok
//!   `pkg/apis/config/v1alpha1/zz_generated.defaults.go`, `pkg/kwokctl/cmd/create/cluster/cluster.go`),
//!   so a simulated node is never marked unreachable and its pods are never evicted.
//! - All default admission plugins are on, `ServiceAccount` and `TaintNodesByCondition`
//!   included: a new Node starts tainted `node.kubernetes.io/not-ready:NoSchedule` and the
//!   node-lifecycle controller lifts the taint once kwok reports it Ready
//!   ([`nodes::wait_schedulable`]).
//! - kwok runs with `--manage-all-nodes=true`: every Node becomes Ready and every Pod
//!   bound to a Node becomes Running, without annotations.
//! - Certificates come from the one generator ([`crate::pki`], rcgen), written into
//!   `pki/` by [`pki`]; the kubeconfig authenticates with a client certificate in
//!   `system:masters`.
//!
//! State of cluster `NAME` lives in [`state_dir`]`(NAME)`: `kubeconfig`,
//! `controller-manager.kubeconfig`, `pki/`, `etcd/`, `pids/<component>.pid`,
//! `logs/<component>.log`, `cluster.json`, and `user-context.json` after `--set-context`
//! ([`userconfig`]).

/// Progress line on stderr; a closed stderr (e.g. `| head`) must not abort the command.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod accounts;
pub mod build;
pub mod gpu_operator;
pub mod gpusim;
pub mod health;
pub mod install;
pub mod kubeconfig;
pub mod kubevirt;
pub mod kueue;
pub mod lock;
pub mod nodes;
pub mod pki;
pub mod ports;
pub mod process;
pub mod recipe;
pub mod supervisor;
pub mod userconfig;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{DEFAULT_CLUSTER_NAME, Error, Result};
use crate::input::live::{self, ClusterArgs, Flavour, LOCAL_HINT};
use ports::{PortLock, Ports};
use recipe::{Component, Condition, Readiness, StartWhen};

/// Options of [`up`].
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Cluster name: 1-40 characters of `a-z`, `0-9`, `-`, starting with a letter or digit.
    pub name: String,
    /// Show build progress and start-up steps on stderr.
    pub progress: bool,
    /// Plain simulated nodes to create when the cluster is started (not when it is
    /// already running): `kwok-node-0` … ([`nodes::plain_node_name`]), each with
    /// [`nodes::SIM_NODE_CAPACITY`] and no GPU. [`up`] returns once they are schedulable.
    pub nodes: u32,
    /// Fixed ports instead of free ones picked at start (tests, debugging). A port that
    /// is taken is an error at once; picked ports that another process takes while the
    /// cluster starts are replaced by fresh ones (up to three starts).
    pub ports: Option<Ports>,
    /// Also run the real GPU Operator and the device-plugin emulation
    /// ([`gpu_operator::start`]); on a running cluster they are added.
    pub gpu_operator: bool,
    /// Also run KubeVirt's virt-api and virt-controller ([`kubevirt::start`]); on a
    /// running cluster they are added.
    pub kubevirt: bool,
    /// Also run Kueue's manager ([`kueue::start`]); on a running cluster it is added.
    pub kueue: bool,
    /// Environment variables added to every component's when the cluster is started (not
    /// when it is already running), e.g. `GOGC` for a twin that must stay small.
    pub env: Vec<(String, String)>,
    /// A file written into the new cluster's state directory (with the bytes given) once the
    /// old state is removed and before the first process starts, so that whoever finds the
    /// state later — after a `kill -9` half-way through the start — can tell whose it is
    /// (the twin's `gpuwl-twin` marker). Not written when the cluster is already running.
    pub marker: Option<(String, Vec<u8>)>,
}

impl Default for UpOptions {
    fn default() -> Self {
        UpOptions {
            name: DEFAULT_NAME.to_string(),
            progress: false,
            nodes: 0,
            ports: None,
            gpu_operator: false,
            kubevirt: false,
            kueue: false,
            env: Vec::new(),
            marker: None,
        }
    }
}

/// The default cluster name of `gpuwl cluster` and `gpuwl lab` (the core's
/// [`crate::error::DEFAULT_CLUSTER_NAME`], which the error messages use too).
pub const DEFAULT_NAME: &str = DEFAULT_CLUSTER_NAME;

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
    /// Every process ([`process::COMPONENTS`]) is alive.
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
    /// etcd client port (HTTPS on 127.0.0.1, client certificates of etcd's own CA only).
    pub etcd_port: u16,
    /// etcd peer port.
    pub etcd_peer_port: u16,
    /// kube-controller-manager secure port (HTTPS on 127.0.0.1, `/healthz` open); 0 in
    /// the `cluster.json` of a cluster started before it ran one.
    #[serde(default)]
    pub controller_manager_port: u16,
    /// kube-scheduler secure port (HTTPS on 127.0.0.1, `/healthz` open).
    pub scheduler_port: u16,
    /// kwok-controller server port (HTTPS on 127.0.0.1, `/healthz`).
    pub kwok_port: u16,
    /// Directory of the binaries that were started.
    pub bin_dir: PathBuf,
    /// Kubernetes version of the binaries.
    pub kubernetes_version: String,
    /// The GPU Operator's health-probe port (plain HTTP on 127.0.0.1, `/healthz`); 0 when
    /// it was not started ([`gpu_operator::start`]).
    #[serde(default)]
    pub gpu_operator_port: u16,
    /// virt-api's HTTPS port (127.0.0.1, `/healthz`); 0 when KubeVirt was not started
    /// ([`kubevirt::start`]).
    #[serde(default)]
    pub kubevirt_api_port: u16,
    /// virt-controller's HTTPS port (127.0.0.1, `/healthz`, `/metrics`); 0 when KubeVirt
    /// was not started.
    #[serde(default)]
    pub kubevirt_controller_port: u16,
    /// Kueue's webhook HTTPS port (127.0.0.1); 0 when Kueue was not started
    /// ([`kueue::start`]).
    #[serde(default)]
    pub kueue_webhook_port: u16,
    /// Kueue's health-probe port (plain HTTP on 127.0.0.1, `/healthz`, `/readyz`); 0 when
    /// Kueue was not started.
    #[serde(default)]
    pub kueue_health_port: u16,
    /// Environment variables added to every component's when the cluster was started
    /// ([`UpOptions::env`]); a restart ([`supervisor`], `cluster up` on a broken cluster)
    /// starts a component with the same.
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

impl ClusterInfo {
    /// `https://127.0.0.1:<apiserver_port>`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// The ports, as one value.
    pub fn ports(&self) -> Ports {
        Ports {
            apiserver: self.apiserver_port,
            etcd: self.etcd_port,
            etcd_peer: self.etcd_peer_port,
            controller_manager: self.controller_manager_port,
            scheduler: self.scheduler_port,
            kwok: self.kwok_port,
        }
    }

    /// The ports component `c` listens on (two for etcd; none for an unknown name).
    pub fn ports_of(&self, c: &str) -> Vec<u16> {
        self.ports()
            .by_component()
            .into_iter()
            .chain([
                (gpu_operator::OPERATOR_COMPONENT, self.gpu_operator_port),
                (kubevirt::API_COMPONENT, self.kubevirt_api_port),
                (
                    kubevirt::CONTROLLER_COMPONENT,
                    self.kubevirt_controller_port,
                ),
                (kueue::COMPONENT, self.kueue_webhook_port),
                (kueue::COMPONENT, self.kueue_health_port),
            ])
            .filter(|&(name, p)| name == c && p != 0)
            .map(|(_, p)| p)
            .collect()
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

pub use crate::files::state_root;
use crate::text;

/// State directory of cluster `name` (may not exist).
pub fn state_dir(name: &str) -> PathBuf {
    state_root().join(name)
}

/// Kubeconfig path of cluster `name`: `<state_dir>/kubeconfig`. The file exists only
/// while the cluster has been started.
pub fn kubeconfig_path(name: &str) -> PathBuf {
    state_dir(name).join("kubeconfig")
}

/// Names of the clusters that have a state directory under [`state_root`] (valid names
/// only), sorted, each with its [`Status`]. Never starts anything; unreadable entries are
/// skipped.
pub fn list() -> Vec<(String, Status)> {
    let Ok(rd) = std::fs::read_dir(state_root()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| validate_name(n).is_ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|n| status(&n).ok().map(|s| (n, s)))
        .collect()
}

/// A hint for a command aimed at cluster `name` that does not run: when no cluster of that
/// name was ever started, the local clusters it was most likely meant to be
/// (`; did you mean eval?`, [`crate::text::did_you_mean`]); else the OTHER clusters that
/// run, and the `--name` that reaches them, e.g. `; running now: eval (add --name eval)`.
/// Empty when there is neither.
pub fn running_elsewhere_hint(name: &str) -> String {
    let all = list();
    if !state_dir(name).exists() {
        let mean = text::did_you_mean(
            name,
            all.iter().map(|(n, _)| n.as_str()).filter(|n| *n != name),
        );
        if !mean.is_empty() {
            return mean;
        }
    }
    let running: Vec<String> = all
        .into_iter()
        .filter(|(n, s)| n != name && *s == Status::Running)
        .map(|(n, _)| n)
        .collect();
    match running.as_slice() {
        [] => String::new(),
        [one] => format!("; running now: {one} (add --name {one})"),
        many => format!("; running now: {} (add --name NAME)", many.join(", ")),
    }
}

/// The local cluster whose API server is `server` (`https://127.0.0.1:<port>`), if any
/// has been started (running or stopped).
pub fn at_server(server: &str) -> Option<String> {
    list()
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| info(n).is_ok_and(|i| i.server_url() == server.trim_end_matches('/')))
}

/// `message` (an API error's, ending in [`crate::input::live::LOCAL_HINT`]) with that hint
/// made to fit `server`: a local cluster's own commands ([`local_hint`]: `--name` unless it
/// is the default one), else where the address came from
/// ([`crate::input::live::server_from`]); as it is when neither is known. One place for
/// every command's error line and serve's log.
pub fn server_hint(message: &str, server: &str) -> String {
    let Some(head) = message.strip_suffix(LOCAL_HINT) else {
        return message.to_owned();
    };
    let hint = match at_server(server) {
        Some(name) => Some(local_hint(&name)),
        None => live::server_from().map(|from| format!(" (the address is that of {from})")),
    };
    match hint {
        Some(h) => format!("{head}{h}"),
        None => message.to_owned(),
    }
}

/// What to run about local cluster `name` when its API server does not answer:
/// ` (the local cluster eval: gpuwl cluster status --name eval; gpuwl cluster up --name
/// eval starts it again)`; without `--name` for the default cluster.
pub fn local_hint(name: &str) -> String {
    let flag = if name == DEFAULT_NAME {
        String::new()
    } else {
        format!(" --name {name}")
    };
    let which = if name == DEFAULT_NAME {
        "the local control plane".to_owned()
    } else {
        format!("the local cluster {name}")
    };
    format!(" ({which}: gpuwl cluster status{flag}; gpuwl cluster up{flag} starts it again)")
}

/// Reads `<state>/cluster.json` of cluster `name`.
///
/// Errors: [`Error::Runtime`] when the cluster was never started or the file is corrupt.
pub fn info(name: &str) -> Result<ClusterInfo> {
    let p = state_dir(name).join("cluster.json");
    let text = std::fs::read_to_string(&p).map_err(|_| {
        rt(format!(
            "cluster {name:?} has not been started (no {}); run `gpuwl cluster up --name {name}`{}",
            p.display(),
            running_elsewhere_hint(name)
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::failed(format!("corrupt {}", p.display()), e))
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
    let all: Vec<&str> = process::COMPONENTS
        .into_iter()
        .chain(process::started_optional(&state))
        .collect();
    for &c in &all {
        if process::alive(&state, c).is_none() {
            dead.push(c);
        }
    }
    if dead.is_empty() {
        Ok(Status::Running)
    } else if dead.len() == all.len() {
        Ok(Status::Stopped)
    } else {
        let gave_up = supervisor::gave_up(&state);
        let detail = gave_up
            .into_iter()
            .chain(dead.iter().map(|c| {
                let last = process::last_log_line(&state, c);
                if last.is_empty() {
                    format!("{c} is not running")
                } else {
                    format!("{c} is not running (last log line: {last})")
                }
            }))
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Status::Broken { detail })
    }
}

/// Stops every process of cluster `name`, takes the entries `--set-context` added out of
/// the user's kubeconfig ([`userconfig::remove`]) and removes its state directory.
/// Succeeds when the cluster does not exist.
///
/// Errors: [`Error::Input`] for an invalid name; [`Error::Runtime`] when a process
/// cannot be stopped, the user's kubeconfig cannot be updated or the state cannot be
/// removed.
pub fn down(name: &str) -> Result<()> {
    validate_name(name)?;
    let state = state_dir(name);
    if !state.exists() {
        remove_lock_files(&state);
        return Ok(());
    }
    process::stop_all(&state, Duration::from_secs(10))?;
    userconfig::remove(name, &state)?;
    std::fs::remove_dir_all(&state)
        .map_err(|e| Error::failed(format!("cannot remove {}", state.display()), e))?;
    remove_lock_files(&state);
    Ok(())
}

/// Removes the lock files other commands leave beside cluster state `state`
/// (`<name>.lab.lock` of `gpuwl lab`, `<name>.lock`), each only when no process holds it:
/// taken first, then unlinked while held, so a holder is never robbed of it.
fn remove_lock_files(state: &Path) {
    let Some(name) = state.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    for file in [format!("{name}.lab.lock"), format!("{name}.lock")] {
        let path = state.with_file_name(file);
        if !path.exists() {
            continue;
        }
        if let Ok(Some(_held)) = lock::try_lock(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// How many times [`up`] starts the cluster when another process takes one of the
/// picked ports while it starts.
const START_ATTEMPTS: u32 = 3;

/// Starts cluster `opts.name`, or returns it when it is already running (idempotent).
///
/// Builds the binaries when missing ([`build::ensure_built`]); a stopped or broken
/// cluster's leftover state is stopped and replaced by a fresh cluster. Returns once
/// `/readyz` of the API server says `ok`, kube-controller-manager serves `/healthz` and
/// its ServiceAccount controller has created `default/default`, the scheduler serves
/// `/healthz` (leader election off), kwok serves `/healthz`, and the
/// [`UpOptions::nodes`] simulated nodes are schedulable. Processes outlive the calling
/// process. Safe to call from inside a tokio runtime (the waits run on their own thread).
///
/// Errors: [`Error::Input`] for an invalid name; [`Error::Runtime`] (one line, naming the
/// component's log) when building fails, a port is taken (a fixed one, or picked ones
/// three times), or a component exits or does not come up in time.
pub fn up(opts: &UpOptions) -> Result<ClusterHandle> {
    validate_name(&opts.name)?;
    let name = opts.name.as_str();
    let state = state_dir(name);
    let handle = ClusterHandle {
        name: name.to_string(),
        kubeconfig: kubeconfig_path(name),
        state_dir: state.clone(),
    };
    let mut current = status(name)?;
    if current == Status::Running
        && let Some(wedged) = kwok_wedged(name)
    {
        // A kwok that answers /healthz but no longer renews its nodes' leases: stopped
        // here and restarted below with the rest of what is not running.
        if opts.progress {
            note!(
                "cluster {name:?}: {}; restarting kwok-controller",
                text::esc(&wedged)
            );
        }
        process::stop_one(&state, "kwok-controller", Duration::from_secs(5))?;
        current = Status::Broken {
            detail: format!("kwok-controller wedged: {wedged}"),
        };
    }
    match current {
        Status::Running => {
            let info = info(name)?;
            on_own_thread({
                let kubeconfig = handle.kubeconfig.clone();
                let mut watch = Watch::running(&state);
                let components = recipe::components(&recipe::Layout {
                    info: &info,
                    state: &state,
                });
                move || {
                    wait_ready(
                        &mut watch,
                        &kubeconfig,
                        &components,
                        0,
                        None,
                        Duration::from_secs(60),
                    )
                    .map_err(StartError::into_error)
                }
            })?;
            if opts.gpu_operator {
                gpu_operator::start(name, &state, opts.progress)?;
            }
            if opts.kubevirt {
                kubevirt::start(name, &state, opts.progress)?;
            }
            if opts.kueue {
                kueue::start(name, &state, opts.progress)?;
            }
            supervise(name, &state, opts.progress);
            return Ok(handle);
        }
        Status::Stopped if has_data(&state) => {
            // Every process gone (a reboot, an OOM kill of the lot): restarted on the same
            // data like a broken cluster, never started afresh over it.
            return recover(
                &handle,
                opts,
                "every component had stopped (a reboot?)".to_owned(),
            );
        }
        Status::Broken { detail } => return recover(&handle, opts, detail),
        Status::Stopped => {}
    }
    // Entries a --set-context of the old cluster left in the user's kubeconfig point at its
    // certificates, which are about to be replaced.
    let _ = userconfig::remove(name, &state);
    remove_state(&state)?;
    write_marker(&state, opts)?;
    let bin = build::ensure_built(opts.progress)?;
    if opts.gpu_operator {
        // Built before anything starts: a failed build leaves no half-started cluster.
        gpu_operator::ensure_built(opts.progress)?;
    }
    if opts.kubevirt {
        kubevirt::ensure_built(opts.progress)?;
    }
    if opts.kueue {
        kueue::ensure_built(opts.progress)?;
    }
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        match start(name, &state, &bin, opts) {
            Ok(()) => break,
            Err(StartError::PortTaken { component, port })
                if opts.ports.is_none() && attempt < START_ATTEMPTS =>
            {
                if opts.progress {
                    note!(
                        "port {port} of {component} was taken by another process while starting; starting again on other ports"
                    );
                }
                let _ = process::stop_all(&state, Duration::from_secs(5));
                remove_state(&state)?;
                write_marker(&state, opts)?;
                attempt += 1;
            }
            Err(e) => {
                let _ = process::stop_all(&state, Duration::from_secs(5));
                return Err(e.into_error());
            }
        }
    }
    if opts.gpu_operator
        && let Err(e) = gpu_operator::start(name, &state, opts.progress)
    {
        let _ = process::stop_all(&state, Duration::from_secs(5));
        return Err(e);
    }
    if opts.kubevirt
        && let Err(e) = kubevirt::start(name, &state, opts.progress)
    {
        let _ = process::stop_all(&state, Duration::from_secs(5));
        return Err(e);
    }
    if opts.kueue
        && let Err(e) = kueue::start(name, &state, opts.progress)
    {
        let _ = process::stop_all(&state, Duration::from_secs(5));
        return Err(e);
    }
    supervise(name, &state, opts.progress);
    if opts.progress {
        note!(
            "cluster {name:?} is up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(handle)
}

/// Whether a cluster's state holds data worth keeping: its `cluster.json` and etcd's data
/// directory.
fn has_data(state: &Path) -> bool {
    state.join("cluster.json").is_file() && state.join("etcd").is_dir()
}

/// Recovers a broken (or wholly stopped) cluster, never wiping it: restarts what died with
/// its flags, ports and data (etcd's objects, the user's CRDs and VMIs, the logs that say
/// why it died), adds the GPU Operator when asked, and starts the supervisor. `detail`
/// says what was wrong.
///
/// Errors: [`Error::Runtime`] naming the state kept and `gpuwl cluster down --name NAME`
/// as the way to start afresh, when the restart fails.
fn recover(handle: &ClusterHandle, opts: &UpOptions, detail: String) -> Result<ClusterHandle> {
    let (name, state) = (handle.name.as_str(), handle.state_dir.as_path());
    if opts.progress {
        note!(
            "cluster {name:?} was broken ({}); restarting what died, its data kept",
            text::esc(&detail)
        );
    }
    if let Err(e) = restart_dead(name, state, opts.progress, &detail) {
        return Err(rt(format!(
            "cluster {name:?} could not be recovered ({}); its data and logs are kept in {} — `gpuwl cluster up --name {name} --fresh` deletes them and starts it afresh",
            text::cut(&e.to_string()),
            state.display()
        )));
    }
    if opts.gpu_operator {
        gpu_operator::start(name, state, opts.progress)?;
    }
    // KubeVirt started on this cluster before (its pid files are there) is restarted too,
    // with or without --kubevirt: its VMIs and webhooks stay in etcd, and a webhook whose
    // virt-api is gone refuses every VMI.
    let had_kubevirt = process::started_optional(state)
        .iter()
        .any(|c| kubevirt::COMPONENTS.contains(c));
    if opts.kubevirt || had_kubevirt {
        kubevirt::start(name, state, opts.progress)?;
    }
    // Kueue likewise: its webhooks (failurePolicy Fail) refuse every Job while it is gone.
    let had_kueue = process::started_optional(state).contains(&kueue::COMPONENT);
    if opts.kueue || had_kueue {
        kueue::start(name, state, opts.progress)?;
    }
    supervise(name, state, opts.progress);
    Ok(handle.clone())
}

/// Starts the cluster's [`supervisor`] unless it runs; a failure to start it is said on
/// stderr (with progress) and leaves the cluster running unsupervised.
fn supervise(name: &str, state: &Path, progress: bool) {
    match supervisor::ensure(name, state) {
        Ok(_) => {}
        Err(e) if progress => note!(
            "cluster {name:?} runs unsupervised: {}",
            text::cut(&e.to_string())
        ),
        Err(_) => {}
    }
}

/// Starts again, with the flags and ports in the cluster's `cluster.json`, every component
/// of a broken cluster that is not running, and waits until the cluster is ready. Each dead
/// component's log is kept aside (`logs/<component>.<unix time>.log`) and the restart is
/// recorded in `restarts.log` (time, component, why: `detail`'s words), which `gpuwl
/// cluster status` shows.
///
/// Errors: [`Error::Runtime`] when `cluster.json` is unreadable, a component cannot be
/// started (its port taken by another process since), or the cluster is not ready in 120 s.
fn restart_dead(name: &str, state: &Path, progress: bool, detail: &str) -> Result<()> {
    // The supervisor and `cluster up` never restart one component twice.
    let _restarting = lock::lock_waiting(
        &state.join("restart.lock"),
        Duration::from_secs(180),
        |_| {},
    )?;
    let info = info(name)?;
    // A cluster made before etcd had client-certificate TLS gets its files now.
    pki::ensure_etcd(&state.join("pki"), name)?;
    let mut components = recipe::components(&recipe::Layout { info: &info, state });
    for c in &mut components {
        c.env.extend(info.env.iter().cloned());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut watch = Watch::new(state);
    let mut record = String::new();
    if process::alive(state, "kwok-controller").is_none() {
        // kwok v0.8.0, restarted, tries to create each node's lease, fails with "already
        // exists" (the old process held it) and never renews it (its
        // pkg/kwok/controllers/node_lease_controller.go): the leases go first, the new
        // kwok creates them afresh. Best effort: a dead API server has none to give.
        let kubeconfig = state.join("kubeconfig");
        let _ = block_on_own_thread(async move { delete_node_leases(&kubeconfig).await });
    }
    for c in &components {
        if process::alive(state, c.name).is_some() {
            watch.started.push((c.name, false));
            continue;
        }
        let log = process::log_file(state, c.name);
        if log.exists() {
            let kept = log.with_file_name(format!("{}.{now}.log", c.name));
            let _ = std::fs::rename(&log, &kept);
        }
        if progress {
            note!("restarting {} on {}", c.name, c.endpoint);
        }
        watch
            .spawn(c)
            .map_err(|e| rt(format!("cannot restart {}: {e}", c.name)))?;
        let why = detail
            .split("; ")
            .find(|d| d.starts_with(c.name))
            .unwrap_or("not running");
        record.push_str(&format!("{now} {} {}\n", c.name, one_line(why)));
    }
    if !record.is_empty() {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(state.join("restarts.log"))
        {
            let _ = f.write_all(record.as_bytes());
        }
    }
    let kubeconfig = state.join("kubeconfig");
    on_own_thread(move || {
        wait_ready(
            &mut watch,
            &kubeconfig,
            &components,
            0,
            None,
            Duration::from_secs(120),
        )
        .map_err(StartError::into_error)
    })
}

/// `s` on one line, control characters escaped.
fn one_line(s: &str) -> String {
    text::esc(&s.replace('\n', " "))
}

/// The restarts recorded for a cluster (`restarts.log`, oldest first): (unix time,
/// component, why).
pub fn restarts(name: &str) -> Vec<(u64, String, String)> {
    let Ok(text) = std::fs::read_to_string(state_dir(name).join("restarts.log")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let t = parts.next()?.parse().ok()?;
            let c = parts.next()?.to_owned();
            Some((t, c, parts.next().unwrap_or("").to_owned()))
        })
        .collect()
}

/// Writes [`UpOptions::marker`] into `state` (created), if any.
///
/// Errors: [`Error::Runtime`] naming the file when it cannot be written.
fn write_marker(state: &Path, opts: &UpOptions) -> Result<()> {
    let Some((file, bytes)) = &opts.marker else {
        return Ok(());
    };
    let path = state.join(file);
    std::fs::create_dir_all(state)
        .and_then(|()| std::fs::write(&path, bytes))
        .map_err(|e| Error::failed(format!("cannot write {}", path.display()), e))
}

fn remove_state(state: &Path) -> Result<()> {
    if state.exists() {
        std::fs::remove_dir_all(state)
            .map_err(|e| Error::failed(format!("cannot remove stale {}", state.display()), e))?;
    }
    Ok(())
}

fn on_own_thread<T, E>(
    f: impl FnOnce() -> std::result::Result<T, E> + Send + 'static,
) -> std::result::Result<T, E>
where
    T: Send + 'static,
    E: From<Error> + Send + 'static,
{
    std::thread::spawn(f)
        .join()
        .map_err(|_| E::from(rt("internal error: the readiness check panicked")))?
}

/// Runs `fut` to completion on a current-thread runtime of its own thread ([`on_own_thread`]):
/// safe to call from inside a tokio runtime.
///
/// Errors: [`Error::Runtime`] when the runtime cannot start or the thread panics.
pub(crate) fn block_on_own_thread<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    on_own_thread(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::failed("cannot start the async runtime", e))?;
        Ok(rt.block_on(fut))
    })
}

/// Why a start failed: a picked port was taken by another process (start again on other
/// ports), or anything else.
#[derive(Debug)]
enum StartError {
    PortTaken { component: String, port: u16 },
    Other(Error),
}

impl StartError {
    fn into_error(self) -> Error {
        match self {
            StartError::PortTaken { component, port } => rt(format!(
                "cannot start {component}: port {port} on 127.0.0.1 is already in use by another process"
            )),
            StartError::Other(e) => e,
        }
    }
}

impl From<Error> for StartError {
    fn from(e: Error) -> Self {
        StartError::Other(e)
    }
}

type StartResult<T> = std::result::Result<T, StartError>;

/// A kubeconfig of cluster `name` (cluster and context named `name`) for `user`
/// authenticating with the client certificate `pki/<cert>.crt` ([`kubeconfig::single`]).
fn cluster_kubeconfig(
    name: &str,
    server: &str,
    pki: &Path,
    user: &str,
    cert: &str,
) -> kube::config::Kubeconfig {
    kubeconfig::single(&kubeconfig::Entry {
        cluster: name,
        server,
        ca: &pki.join("ca.crt"),
        context: name,
        user,
        credentials: kubeconfig::Credentials::ClientCert {
            cert: &pki.join(format!("{cert}.crt")),
            key: &pki.join(format!("{cert}.key")),
        },
    })
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

/// How long a start may wait for the port lock held by another `gpuwl cluster up`.
const PORT_LOCK_WAIT: Duration = Duration::from_secs(120);

fn start(name: &str, state: &Path, bin: &Path, opts: &UpOptions) -> StartResult<()> {
    let step = |msg: &str| {
        if opts.progress {
            note!("{msg}");
        }
    };
    std::fs::create_dir_all(state)
        .map_err(|e| Error::failed(format!("cannot create {}", state.display()), e))?;
    let pki_dir = state.join("pki");
    pki::generate(&pki_dir, name)?;
    let write = |file: &str, text: &str| {
        let p = state.join(file);
        std::fs::write(&p, text)
            .map_err(|e| Error::failed(format!("cannot write {}", p.display()), e))
    };
    let stages_path = bin.join(build::KWOK_STAGES_FILE);
    let stages = std::fs::read_to_string(&stages_path).map_err(|e| {
        rt(format!(
            "cannot read {} ({e}); rebuild with `gpuwl cluster build`",
            stages_path.display()
        ))
    })?;
    write("kwok.yaml", &format!("{KWOK_CONFIG}---\n{stages}"))?;

    // From picking the ports until every component listens on its own, no other
    // `gpuwl cluster up` on this machine picks any (see `ports`).
    let lock = PortLock::acquire(PORT_LOCK_WAIT)?;
    let ports = match opts.ports {
        Some(p) => {
            if let Some(taken) = p.first_taken() {
                let component = p
                    .by_component()
                    .into_iter()
                    .find(|&(_, q)| q == taken)
                    .map(|(c, _)| c)
                    .unwrap_or("the cluster");
                return Err(rt(format!(
                    "cannot start {component}: port {taken} on 127.0.0.1 is already in use by another process"
                ))
                .into());
            }
            p
        }
        None => Ports::pick()?,
    };
    let info = ClusterInfo {
        name: name.to_string(),
        apiserver_port: ports.apiserver,
        etcd_port: ports.etcd,
        etcd_peer_port: ports.etcd_peer,
        controller_manager_port: ports.controller_manager,
        scheduler_port: ports.scheduler,
        kwok_port: ports.kwok,
        bin_dir: bin.to_path_buf(),
        kubernetes_version: build::KUBERNETES_VERSION.to_string(),
        gpu_operator_port: 0,
        kubevirt_api_port: 0,
        kubevirt_controller_port: 0,
        kueue_webhook_port: 0,
        kueue_health_port: 0,
        env: opts.env.clone(),
    };
    write(
        "cluster.json",
        &serde_json::to_string_pretty(&info)
            .map_err(|e| Error::failed("cannot write cluster.json", e))?,
    )?;
    let kubeconfig = state.join("kubeconfig");
    kubeconfig::write(
        &kubeconfig,
        &cluster_kubeconfig(
            name,
            &info.server_url(),
            &pki_dir,
            &format!("{name}-admin"),
            "admin",
        ),
        0o644,
    )?;
    kubeconfig::write(
        &state.join("controller-manager.kubeconfig"),
        &cluster_kubeconfig(
            name,
            &info.server_url(),
            &pki_dir,
            "system:kube-controller-manager",
            "controller-manager",
        ),
        0o644,
    )?;
    let mut components = recipe::components(&recipe::Layout { info: &info, state });
    for c in &mut components {
        c.env.extend(opts.env.iter().cloned());
    }
    let mut watch = Watch::new(state);
    let mut deferred = Vec::new();
    for c in components.iter() {
        match c.start {
            StartWhen::Now => {
                step(&format!("starting {} on {}", c.name, c.endpoint));
                watch.spawn(c)?;
            }
            StartWhen::AfterApiServer => deferred.push(c.clone()),
        }
    }
    for c in components.iter().filter(|c| c.start == StartWhen::Now) {
        for &port in &c.ports {
            watch.listening(c.name, port, Duration::from_secs(60))?;
        }
    }

    step(&format!(
        "waiting for {}",
        components
            .iter()
            .map(|c| c.name)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let nodes = opts.nodes;
    let deferred = Deferred {
        components: deferred,
        started: 0,
        _lock: lock,
        progress: opts.progress,
    };
    on_own_thread(move || {
        wait_ready(
            &mut watch,
            &kubeconfig,
            &components,
            nodes,
            Some(deferred),
            Duration::from_secs(120),
        )
    })
}

/// The components [`wait_ready`] starts once the API server is ready, in order, and the
/// port lock, held until they all listen.
struct Deferred {
    components: Vec<Component>,
    /// How many of `components` were started.
    started: usize,
    _lock: PortLock,
    progress: bool,
}

/// The components whose processes a wait checks on every tick: one that exited, or logged
/// that its port is taken, ends the wait at once with its log's last line.
struct Watch {
    state: PathBuf,
    /// Component, and whether this call started it (then its log is read for a bind
    /// conflict; a cluster found running has none of those).
    started: Vec<(&'static str, bool)>,
}

impl Watch {
    fn new(state: &Path) -> Watch {
        Watch {
            state: state.to_path_buf(),
            started: Vec::new(),
        }
    }

    /// A cluster that is already running: every component, none started by this call.
    fn running(state: &Path) -> Watch {
        Watch {
            state: state.to_path_buf(),
            started: process::COMPONENTS.iter().map(|c| (*c, false)).collect(),
        }
    }

    fn spawn(&mut self, c: &Component) -> Result<()> {
        process::spawn(&self.state, c)?;
        self.started.push((c.name, true));
        Ok(())
    }

    /// Ok while every watched component lives and none started by this call logged a
    /// bind conflict.
    fn check(&self) -> StartResult<()> {
        for &(c, ours) in &self.started {
            if ours {
                // Short logs, and a bind conflict there is this start's.
                let log =
                    std::fs::read_to_string(process::log_file(&self.state, c)).unwrap_or_default();
                if let Some(port) = ports::conflict_in_log(&log) {
                    return Err(StartError::PortTaken {
                        component: c.to_string(),
                        port,
                    });
                }
            }
            if process::alive(&self.state, c).is_none() {
                return Err(not_ready(&self.state, c, "exited").into());
            }
        }
        Ok(())
    }

    /// Waits until `component` accepts connections on `port` (and is still alive: the
    /// listener might be another process's).
    fn listening(&self, component: &str, port: u16, timeout: Duration) -> StartResult<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let up = health::accepts(port);
            self.check()?;
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(not_ready(&self.state, component, "does not listen").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn not_ready(state: &Path, component: &str, what: &str) -> Error {
    let last = process::last_log_line(state, component);
    rt(format!(
        "{component} {what} (log {}){}",
        process::log_file(state, component).display(),
        if last.is_empty() {
            String::new()
        } else {
            format!(": {}", text::esc(&last))
        }
    ))
}

/// Whether `c` is ready by its [`Readiness`], asked through [`health`]. `api` is the admin
/// client; `own` the client for its own HTTPS port (a [`Readiness::Healthz`] component,
/// [`health::insecure_client`], made once per wait); `api_ready` whether the API server
/// said `/readyz` ok: a condition read from the API server is asked only then.
pub(crate) async fn is_ready(
    c: &Component,
    api: &kube::Client,
    own: Option<&kube::Client>,
    api_ready: bool,
) -> bool {
    match &c.readiness {
        Readiness::Listening => c.ports.iter().all(|&p| health::accepts(p)),
        Readiness::ApiServerReadyz => health::api(api, "/readyz").await.as_deref() == Some("ok"),
        Readiness::HttpHealthz { port } => {
            let port = *port;
            tokio::task::spawn_blocking(move || health::http(port, "/healthz"))
                .await
                .ok()
                .flatten()
                .is_some_and(|a| a.is_ok())
        }
        Readiness::HttpReadyz { port } => {
            let port = *port;
            tokio::task::spawn_blocking(move || health::http(port, "/readyz"))
                .await
                .ok()
                .flatten()
                .is_some_and(|a| a.is_ok())
        }
        Readiness::HttpsAnswers { port, also } => {
            health::https(*port, "/healthz").await.is_some() && holds(api, also).await
        }
        Readiness::Healthz { also, .. } => {
            if also.is_some() && !api_ready {
                return false;
            }
            let Some(own) = own else {
                return false;
            };
            health::api(own, "/healthz").await.as_deref() == Some("ok") && holds(api, also).await
        }
    }
}

/// Whether `also` holds on the API server (`None` always does).
async fn holds(api: &kube::Client, also: &Option<Condition>) -> bool {
    match also {
        None => true,
        Some(Condition::ServiceAccount { namespace, name }) => {
            let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
                kube::Api::namespaced(api.clone(), namespace);
            accounts.get_opt(name).await.ok().flatten().is_some()
        }
        Some(Condition::LeaseHeld { namespace, name }) => {
            let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
                kube::Api::namespaced(api.clone(), namespace);
            leases
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .is_some_and(|h| !h.is_empty())
        }
    }
}

/// Waits until every component of `components` is ready by its [`Readiness`], starting the
/// `deferred` ones once the API server's `/readyz` says ok; creates the `nodes` plain
/// simulated nodes as soon as the API server is ready and waits until they are
/// schedulable. Every tick checks that each component lives. Runs its own single-threaded
/// runtime.
fn wait_ready(
    watch: &mut Watch,
    kubeconfig: &Path,
    components: &[Component],
    nodes: u32,
    mut deferred: Option<Deferred>,
    timeout: Duration,
) -> StartResult<()> {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::failed("cannot start the async runtime", e))?;
    tokio_rt.block_on(async {
        let deadline = Instant::now() + timeout;
        let api = client(kubeconfig, None).await?;
        // A component ready once it listens (etcd) was waited for before this wait.
        let waited: Vec<&Component> = components
            .iter()
            .filter(|c| c.readiness != Readiness::Listening)
            .collect();
        let health = waited
            .iter()
            .map(|c| match c.readiness {
                Readiness::Healthz { port, .. } => health::insecure_client(port).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let api_server = waited
            .iter()
            .position(|c| c.readiness == Readiness::ApiServerReadyz);
        let mut done = vec![false; waited.len()];
        let mut nodes_created = nodes == 0;
        loop {
            if let Some(i) = api_server
                && !done[i]
            {
                done[i] = is_ready(waited[i], &api, None, false).await;
            }
            let api_ready = api_server.is_none_or(|i| done[i]);
            if api_ready && let Some(d) = &mut deferred {
                while d.started < d.components.len() {
                    let c = &d.components[d.started];
                    if d.progress {
                        note!("starting {} on {}", c.name, c.endpoint);
                    }
                    watch.spawn(c)?;
                    d.started += 1;
                }
                if d.components
                    .iter()
                    .all(|c| c.ports.iter().all(|&p| health::accepts(p)))
                {
                    // Listening: no other start can pick their ports now.
                    deferred = None;
                }
            }
            if api_ready && !nodes_created {
                for i in 0..nodes {
                    nodes::ensure_sim_node(&api, &nodes::plain_node_name(i)).await?;
                }
                nodes_created = true;
            }
            for (i, c) in waited.iter().enumerate() {
                if !done[i] && Some(i) != api_server {
                    done[i] = is_ready(c, &api, health[i].as_ref(), api_ready).await;
                }
            }
            watch.check()?;
            if done.iter().all(|d| *d) {
                for i in 0..nodes {
                    let left = deadline.saturating_duration_since(Instant::now());
                    nodes::wait_schedulable(&api, &nodes::plain_node_name(i), left).await?;
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let who = done
                    .iter()
                    .position(|d| !d)
                    .map(|i| waited[i].name)
                    .unwrap_or("kube-apiserver");
                return Err(not_ready(&watch.state, who, "is not ready in time").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// Health of one component as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Its health endpoint answered `ok` (etcd: `"health":"true"`).
    Healthy,
    /// Alive, but the endpoint answered something else or nothing within 2 s (the text).
    Unhealthy(String),
    /// The process is not running.
    NotRunning,
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Health::Healthy => f.write_str("healthy"),
            Health::Unhealthy(why) => write!(f, "unhealthy ({why})"),
            Health::NotRunning => f.write_str("not running"),
        }
    }
}

/// One component of a cluster as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentReport {
    /// Component name ([`process::COMPONENTS`]).
    pub component: &'static str,
    /// Its pid while it runs.
    pub pid: Option<u32>,
    /// The ports it listens on (127.0.0.1).
    pub ports: Vec<u16>,
    /// What its health endpoint says: etcd `/health`, kube-apiserver `/readyz`, the others
    /// `/healthz`.
    pub health: Health,
    /// Last line of its log when it is not running (escaped for a terminal).
    pub last_log_line: String,
}

/// Every component of cluster `name`, in start order, with its pid, ports and health
/// (each endpoint asked once, 2 s at most). Never starts anything.
///
/// Errors: [`Error::Input`] for an invalid name; [`Error::Runtime`] when the cluster was
/// never started ([`info`]).
pub fn probe(name: &str) -> Result<Vec<ComponentReport>> {
    validate_name(name)?;
    let info = info(name)?;
    let state = state_dir(name);
    let kubeconfig = kubeconfig_path(name);
    block_on_own_thread(async move {
        let mut out = Vec::new();
        let all: Vec<&'static str> = process::COMPONENTS
            .into_iter()
            .chain(process::started_optional(&state))
            .collect();
        for c in all {
            let pid = process::alive(&state, c);
            let ports = info.ports_of(c);
            let health = if pid.is_none() {
                Health::NotRunning
            } else {
                let answer = match c {
                    "etcd" => etcd_health(info.etcd_port, &state).await,
                    gpu_operator::OPERATOR_COMPONENT => {
                        health::http(info.gpu_operator_port, "/healthz").and_then(|a| a.ok_body())
                    }
                    // No port: alive is healthy.
                    gpu_operator::EMULATION_COMPONENT => Some("ok".into()),
                    kubevirt::NODES_COMPONENT => Some("ok".into()),
                    kueue::COMPONENT => {
                        health::http(info.kueue_health_port, "/readyz").and_then(|a| a.ok_body())
                    }
                    // virt-api and virt-controller answer /healthz with JSON: any
                    // answer is healthy.
                    kubevirt::API_COMPONENT | kubevirt::CONTROLLER_COMPONENT => {
                        match ports.first() {
                            Some(&p) => health::https(p, "/healthz").await.map(|_| "ok".into()),
                            None => None,
                        }
                    }
                    "kube-apiserver" => match client(&kubeconfig, None).await {
                        Ok(api) => health::api(&api, "/readyz").await,
                        Err(e) => Some(e.to_string()),
                    },
                    _ => match ports.first() {
                        Some(&p) => health::https(p, "/healthz").await,
                        None => None,
                    },
                };
                // kwok can answer /healthz while it no longer heartbeats its nodes
                // (seen with v0.8.0 after nodes were deleted and re-created under the
                // same names): then the node leases say so.
                let answer = match (c, answer.as_deref()) {
                    ("kwok-controller", Some("ok")) => Some(
                        kwok_leases(&kubeconfig)
                            .await
                            .unwrap_or_else(|| "ok".into()),
                    ),
                    _ => answer,
                };
                match answer.as_deref() {
                    Some("ok") => Health::Healthy,
                    Some(other) => {
                        Health::Unhealthy(text::esc(&other.chars().take(120).collect::<String>()))
                    }
                    None => Health::Unhealthy("no answer".into()),
                }
            };
            let last_log_line = if pid.is_none() {
                text::esc(&process::last_log_line(&state, c))
            } else {
                String::new()
            };
            out.push(ComponentReport {
                component: c,
                pid,
                ports,
                health,
                last_log_line,
            });
        }
        Ok(out)
    })?
}

/// etcd's `/health` over HTTPS with its client certificate ([`health::https_with_cert`],
/// `pki/etcd-client.*` of the cluster's state `state`): `Some("ok")` when it says
/// `"health":"true"`, the body otherwise, `None` without a 2xx answer within 5 s.
async fn etcd_health(port: u16, state: &Path) -> Option<String> {
    let pki = state.join("pki");
    let body = health::https_with_cert(
        port,
        "/health",
        &pki.join("etcd-client.crt"),
        &pki.join("etcd-client.key"),
    )
    .await?;
    if body.replace(' ', "").contains(r#""health":"true""#) {
        Some("ok".into())
    } else {
        Some(body)
    }
}

/// What [`kwok_leases`] finds on running cluster `name`, `None` when kwok renews every
/// node lease (or nothing can be asked).
fn kwok_wedged(name: &str) -> Option<String> {
    let kubeconfig = kubeconfig_path(name);
    block_on_own_thread(async move { kwok_leases(&kubeconfig).await })
        .ok()
        .flatten()
}

/// The age at which a node lease of unknown duration counts as one kwok has stopped
/// renewing (a lease of the kubelet's default 40 s); [`lease_stale_after`].
pub const LEASE_STALE_AFTER: Duration = Duration::from_secs(40);

/// When a node lease of `duration_seconds` (`spec.leaseDurationSeconds`; `None`: unknown)
/// counts as not renewed: after half of it, never before [`LEASE_STALE_MIN`]; an unknown
/// duration, after [`LEASE_STALE_AFTER`]. kwok
/// renews a lease every quarter of its duration, ±4 % (kwok v0.8.0
/// `pkg/kwok/controllers/controller.go`, as the kubelet does): half is two renewals
/// missed. The local control plane's kwok runs 200 s leases ([`recipe::kwok_controller`]),
/// so 100 s (at least [`LEASE_STALE_MIN`] for a short lease, e.g. a test's); with the
/// supervisor's two findings [`supervisor::KWOK_CHECK_EVERY`] (15 s)
/// apart, a wedged kwok is restarted at most ~142 s after its last renewal
/// ([`supervisor::worst_kwok_restart`]), well inside
/// kube-controller-manager's `--node-monitor-grace-period` (as long as the lease here,
/// 200 s), so no node goes NotReady (three quarters, 150 s, with checks 30 s apart restarted
/// it 180-210 s after: at the edge of the grace period). With 40 s for every lease, a
/// healthy kwok renewing every 50 s was called wedged.
pub fn lease_stale_after(duration_seconds: Option<i32>) -> Duration {
    match duration_seconds.and_then(|d| u64::try_from(d).ok()) {
        Some(d) if d > 0 => Duration::from_secs(d / 2).max(LEASE_STALE_MIN),
        _ => LEASE_STALE_AFTER,
    }
}

/// The least age at which a lease of known duration counts as not renewed (a 20 s lease
/// is renewed every 5 s: 10 s is two renewals missed).
pub const LEASE_STALE_MIN: Duration = Duration::from_secs(10);

/// `None` when every lease in `kube-node-lease` of a node that exists was renewed within
/// [`LEASE_STALE_AFTER`] (or the API server cannot say); otherwise the finding, e.g.
/// `3 of 4 node leases not renewed for 52 s or more (lab-node-0, …): kwok stopped
/// heartbeating; gpuwl cluster up restarts it`.
async fn kwok_leases(kubeconfig: &Path) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let api = client(kubeconfig, None).await.ok()?;
    let lp = kube::api::ListParams::default();
    let nodes: kube::Api<Node> = kube::Api::all(api.clone());
    let leases: kube::Api<Lease> = kube::Api::namespaced(api, "kube-node-lease");
    let (nodes, leases) = tokio::time::timeout(health::TIMEOUT, async {
        (nodes.list_metadata(&lp).await, leases.list(&lp).await)
    })
    .await
    .ok()?;
    let names: std::collections::BTreeSet<String> = nodes
        .ok()?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut stale: Vec<(String, i64)> = Vec::new();
    let mut total = 0;
    for l in leases.ok()?.items {
        let Some(name) = l.metadata.name.filter(|n| names.contains(n)) else {
            continue;
        };
        total += 1;
        let duration = l.spec.as_ref().and_then(|s| s.lease_duration_seconds);
        let renewed = l.spec.and_then(|s| s.renew_time).map(|t| t.0);
        let age = renewed.map_or(i64::MAX, |t| now.duration_since(t).as_secs());
        if age >= lease_stale_after(duration).as_secs() as i64 {
            stale.push((name, age));
        }
    }
    kwok_lease_finding(&stale, total)
}

/// Deletes every lease in `kube-node-lease` (each is a kwok node's: these clusters have
/// no kubelet), within [`health::TIMEOUT`]; errors are ignored (best effort).
async fn delete_node_leases(kubeconfig: &Path) {
    use k8s_openapi::api::coordination::v1::Lease;
    let Ok(api) = client(kubeconfig, None).await else {
        return;
    };
    let leases: kube::Api<Lease> = kube::Api::namespaced(api, "kube-node-lease");
    let _ = tokio::time::timeout(
        health::TIMEOUT,
        leases.delete_collection(
            &kube::api::DeleteParams::default(),
            &kube::api::ListParams::default(),
        ),
    )
    .await;
}

/// The finding [`kwok_leases`] words from the stale leases (name, age in s) among `total`.
fn kwok_lease_finding(stale: &[(String, i64)], total: usize) -> Option<String> {
    if stale.is_empty() {
        return None;
    }
    let youngest = stale.iter().map(|(_, a)| *a).min().unwrap_or(0);
    let mut names: Vec<&str> = stale.iter().take(3).map(|(n, _)| n.as_str()).collect();
    if stale.len() > 3 {
        names.push("…");
    }
    Some(format!(
        "{} of {total} node leases not renewed for {youngest} s or more ({}): kwok stopped heartbeating its nodes; `gpuwl cluster up` restarts it",
        stale.len(),
        names.join(", ")
    ))
}

/// The pods kube-scheduler of cluster `name` still has work for: the sum of its
/// `scheduler_pending_pods` gauge over the `active` and `backoff` queues, read from its
/// own `/metrics` (open on its secure port, [`recipe::kube_scheduler`]). Pods in the
/// `unschedulable` queue wait for a cluster event and `gated` ones for their gates: neither
/// counts. `None` when the metrics cannot be read or the gauge is missing.
pub async fn scheduler_busy(info: &ClusterInfo) -> Option<u64> {
    let text = health::https(info.scheduler_port, "/metrics").await?;
    let mut seen = false;
    let mut sum = 0u64;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("scheduler_pending_pods{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        seen = true;
        if labels.contains("queue=\"active\"") || labels.contains("queue=\"backoff\"") {
            sum = sum.saturating_add(value.trim().parse::<f64>().ok()? as u64);
        }
    }
    seen.then_some(sum)
}

/// A one-shot client from a kubeconfig file, using `context` or the file's current
/// context, each response awaited [`crate::input::live::DEFAULT_REQUEST_TIMEOUT`] at most
/// ([`crate::input::live::connect`]).
///
/// Errors: [`Error::Runtime`] when the file cannot be read or parsed or its certificates
/// cannot be loaded: a broken kubeconfig of gpuwl's own cluster is a runtime failure
/// (exit 3), not the user's bad input.
pub async fn client(kubeconfig: &Path, context: Option<&str>) -> Result<kube::Client> {
    let args = ClusterArgs::file(kubeconfig, context);
    match live::connect(&args, Flavour::OneShot).await {
        Ok(c) => Ok(c.client),
        Err(e) if e.is_input() => Err(Error::OwnInput(Box::new(e))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_removes_the_lock_files_left_beside_the_state_unless_held() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("c1");
        let lab = root.path().join("c1.lab.lock");
        let twin = root.path().join("c1.lock");
        let other = root.path().join("c2.lab.lock");
        for f in [&lab, &twin, &other] {
            std::fs::write(f, "").unwrap();
        }
        let held = lock::try_lock(&twin).unwrap().unwrap();
        remove_lock_files(&state);
        assert!(!lab.exists());
        assert!(twin.exists(), "held by a running command");
        assert!(other.exists(), "another cluster's");
        drop(held);
        remove_lock_files(&state);
        assert!(!twin.exists());
    }

    #[test]
    fn a_lease_is_stale_after_half_its_duration() {
        // kwok's 200 s leases here: renewed every 50 s, so 100 s is two renewals missed;
        // with two findings 15 s apart, restarted by ~130 s, inside the 200 s grace period.
        assert_eq!(lease_stale_after(Some(200)), Duration::from_secs(100));
        assert!(
            lease_stale_after(Some(200)) + 2 * crate::cluster::supervisor::KWOK_CHECK_EVERY
                < Duration::from_secs(200) * 3 / 4
        );
        // A kubelet's 40 s lease, renewed every 10 s: two renewals missed at 20 s.
        assert_eq!(lease_stale_after(Some(40)), Duration::from_secs(20));
        assert_eq!(lease_stale_after(Some(4)), LEASE_STALE_MIN);
        assert_eq!(lease_stale_after(None), LEASE_STALE_AFTER);
        assert_eq!(lease_stale_after(Some(-5)), LEASE_STALE_AFTER);
        assert_eq!(lease_stale_after(Some(0)), LEASE_STALE_AFTER);
    }

    #[test]
    fn a_wedged_kwok_is_restarted_well_inside_the_node_grace_period() {
        use crate::cluster::supervisor::{KWOK_CHECK_EVERY, POLL, worst_kwok_restart};
        // The defaults (no test knob in this process): 200 s leases and grace period, the
        // leases read every 15 s.
        assert_eq!(recipe::node_lease_seconds(), 200);
        assert_eq!(supervisor::kwok_check_every(), KWOK_CHECK_EVERY);
        let grace = Duration::from_secs(200);
        let worst = worst_kwok_restart(grace, KWOK_CHECK_EVERY);
        assert_eq!(worst, Duration::from_secs(100 + 30 + 2 + 10));
        // Well inside: under three quarters of the grace period (142 s of 200 s).
        assert!(worst < grace * 3 / 4, "{worst:?}");
        // kube-controller-manager's flags say the same grace period as kwok's leases.
        let info = recipe::golden_info();
        let l = recipe::Layout {
            info: &info,
            state: Path::new("/s"),
        };
        let kcm = recipe::kube_controller_manager(&l);
        assert!(
            kcm.args
                .contains(&"--node-monitor-grace-period=200s".to_string())
        );
        assert!(kcm.args.contains(&"--node-monitor-period=25s".to_string()));
        let kwok = recipe::kwok_controller(&l);
        assert!(
            kwok.args
                .contains(&"--node-lease-duration-seconds=200".to_string())
        );
        // The live test's 40 s leases (checks every 3 s): still inside its 40 s grace.
        let check = KWOK_CHECK_EVERY * 40 / 200;
        assert_eq!(check, Duration::from_secs(3));
        assert!(check >= POLL);
        assert!(worst_kwok_restart(Duration::from_secs(40), check) < Duration::from_secs(40));
    }

    #[test]
    fn stale_leases_are_a_finding_fresh_ones_none() {
        assert_eq!(kwok_lease_finding(&[], 4), None);
        let stale: Vec<(String, i64)> = (0..4).map(|i| (format!("n-{i}"), 50 + i)).collect();
        assert_eq!(
            kwok_lease_finding(&stale, 5).unwrap(),
            "4 of 5 node leases not renewed for 50 s or more (n-0, n-1, n-2, …): kwok stopped heartbeating its nodes; `gpuwl cluster up` restarts it"
        );
    }

    #[test]
    fn the_local_hint_names_the_cluster_unless_it_is_the_default_one() {
        assert_eq!(
            local_hint("eval"),
            " (the local cluster eval: gpuwl cluster status --name eval; gpuwl cluster up --name eval starts it again)"
        );
        assert_eq!(
            local_hint(DEFAULT_NAME),
            " (the local control plane: gpuwl cluster status; gpuwl cluster up starts it again)"
        );
    }
}

/// What talks to the API server and the components' own ports, against the fast tier's
/// in-memory API server (tests/it/fake_api.rs, docs/testing.md) behind HTTPS: a kubeconfig
/// and ports that reach it stand for a running cluster, no process is started.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::testing::{self, FakeApi};
    use serde_json::json;

    /// A cluster's facts with every port at `port` (the fake's), under `state`.
    fn info_at(port: u16) -> ClusterInfo {
        ClusterInfo {
            name: "fake".into(),
            apiserver_port: port,
            etcd_port: port,
            etcd_peer_port: port,
            controller_manager_port: port,
            scheduler_port: port,
            kwok_port: port,
            bin_dir: "/nonexistent".into(),
            kubernetes_version: build::KUBERNETES_VERSION.into(),
            gpu_operator_port: 0,
            kubevirt_api_port: 0,
            kubevirt_controller_port: 0,
            kueue_webhook_port: 0,
            kueue_health_port: 0,
            env: Vec::new(),
        }
    }

    /// A port nothing listens on (bound, then let go).
    fn closed_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn component(name: &'static str, readiness: Readiness) -> Component {
        Component {
            name,
            binary: "/nonexistent".into(),
            args: Vec::new(),
            env: Vec::new(),
            ports: Vec::new(),
            endpoint: String::new(),
            start: StartWhen::Now,
            readiness,
        }
    }

    #[test]
    fn conditions_hold_once_the_controllers_object_is_there() {
        let api = FakeApi::new();
        let rt = testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let holds = |also: &Option<Condition>| rt.block_on(holds(&client, also));
        assert!(holds(&None));
        let account = Some(Condition::ServiceAccount {
            namespace: "default",
            name: "default",
        });
        assert!(!holds(&account));
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "default"}}),
        );
        assert!(holds(&account));
        let lease = Some(Condition::LeaseHeld {
            namespace: "kube-system",
            name: "kube-scheduler",
        });
        assert!(!holds(&lease));
        let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler";
        api.insert(
            "/apis/coordination.k8s.io/v1",
            "leases",
            json!({"metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
                   "spec": {"holderIdentity": ""}}),
        );
        assert!(!holds(&lease), "an empty holder is no leader");
        api.modify(path, |l| l["spec"]["holderIdentity"] = json!("sched_1"));
        assert!(holds(&lease));
        // An API error is "not yet", never ready.
        api.fail(http::Method::GET, "/leases/kube-scheduler", 500, 1);
        assert!(!holds(&lease));
        let asked: Vec<String> = api.requests().iter().map(|r| r.path.clone()).collect();
        assert!(
            asked.contains(&"/api/v1/namespaces/default/serviceaccounts/default".to_string()),
            "{asked:?}"
        );
    }

    #[test]
    fn readiness_is_asked_where_each_component_answers() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let rt = testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let health = health::insecure_client(https.port).unwrap();
        let ready = |c: &Component, api_ready: bool| {
            rt.block_on(is_ready(c, &client, Some(&health), api_ready))
        };
        let apiserver = component("kube-apiserver", Readiness::ApiServerReadyz);
        api.text("/readyz", 500, "[-]etcd failed: reason withheld");
        assert!(!ready(&apiserver, false));
        api.text("/readyz", 200, "ok\n");
        assert!(ready(&apiserver, false));

        // A controller's /healthz, and its condition asked only once the API server is.
        let cm = component(
            "kube-controller-manager",
            Readiness::Healthz {
                port: https.port,
                also: Some(Condition::ServiceAccount {
                    namespace: "default",
                    name: "default",
                }),
            },
        );
        api.text("/healthz", 200, "ok");
        let before = api.requests().len();
        assert!(!ready(&cm, false));
        assert_eq!(
            api.requests().len(),
            before,
            "nothing asked before the API server"
        );
        assert!(!ready(&cm, true), "no ServiceAccount yet");
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "default"}}),
        );
        assert!(ready(&cm, true));
        api.text("/healthz", 200, "[-]poststarthook failed");
        assert!(!ready(&cm, true), "only `ok` is healthy");

        // virt-api's JSON answer counts as an answer; an error status does not.
        let virt = component(
            "virt-api",
            Readiness::HttpsAnswers {
                port: https.port,
                also: None,
            },
        );
        api.text("/healthz", 200, r#"{"apiserver":"ok","restful":"ok"}"#);
        assert!(ready(&virt, false));
        api.text("/healthz", 500, "internal error");
        assert!(!ready(&virt, false));
        let gone = component(
            "virt-api",
            Readiness::HttpsAnswers {
                port: closed_port(),
                also: None,
            },
        );
        assert!(!ready(&gone, false));

        // etcd: listening is ready.
        let mut etcd = component("etcd", Readiness::Listening);
        etcd.ports = vec![https.port];
        assert!(ready(&etcd, false));
        etcd.ports.push(closed_port());
        assert!(!ready(&etcd, false));
    }

    #[test]
    fn the_schedulers_work_is_its_active_and_backoff_queues() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let rt = testing::rt();
        let busy = |port: u16| rt.block_on(scheduler_busy(&info_at(port)));
        let metrics = "# TYPE scheduler_pending_pods gauge\n\
            scheduler_pending_pods{queue=\"active\"} 2\n\
            scheduler_pending_pods{queue=\"backoff\"} 3\n\
            scheduler_pending_pods{queue=\"gated\"} 7\n\
            scheduler_pending_pods{queue=\"unschedulable\"} 11\n\
            scheduler_queue_incoming_pods_total{event=\"PodAdd\",queue=\"active\"} 40\n";
        api.text("/metrics", 200, metrics);
        assert_eq!(busy(https.port), Some(5));
        api.text(
            "/metrics",
            200,
            "scheduler_pending_pods{queue=\"unschedulable\"} 4\n",
        );
        assert_eq!(
            busy(https.port),
            Some(0),
            "waiting for an event is not work"
        );
        api.text("/metrics", 200, "scheduler_schedule_attempts_total 3\n");
        assert_eq!(busy(https.port), None, "no gauge: unknown, not idle");
        api.text(
            "/metrics",
            200,
            "scheduler_pending_pods{queue=\"active\"} many\n",
        );
        assert_eq!(busy(https.port), None);
        api.text("/metrics", 403, "forbidden");
        assert_eq!(busy(https.port), None);
        assert_eq!(busy(closed_port()), None);
    }

    #[test]
    fn a_start_waits_for_the_api_server_then_the_controllers_then_makes_its_nodes() {
        let api = FakeApi::new();
        api.ready_nodes();
        let https = testing::https(&api);
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = testing::kubeconfig(dir.path(), https.port);
        let info = info_at(https.port);
        // The real recipe's readiness, every port at the fake.
        let components = recipe::components(&recipe::Layout {
            info: &info,
            state: dir.path(),
        });
        let wait = |nodes: u32, timeout: Duration| {
            let mut watch = Watch::new(dir.path());
            wait_ready(&mut watch, &kubeconfig, &components, nodes, None, timeout)
                .map_err(StartError::into_error)
                .map_err(|e| e.to_string())
        };
        // The API server not ready: it is the one named, and no node is made.
        api.text("/readyz", 500, "[-]etcd failed");
        api.text("/healthz", 200, "ok");
        let err = wait(2, Duration::from_millis(300)).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "kube-apiserver is not ready in time (log {})",
                dir.path().join("logs/kube-apiserver.log").display()
            )),
            "{err}"
        );
        assert!(api.writes().is_empty(), "{:?}", api.writes());
        // Ready, but the ServiceAccount controller has not run: kube-controller-manager
        // is named. The nodes are made as soon as the API server is ready.
        api.text("/readyz", 200, "ok");
        let err = wait(2, Duration::from_millis(300)).unwrap_err();
        assert!(
            err.starts_with("kube-controller-manager is not ready in time"),
            "{err}"
        );
        // The controller creates default/default: ready, the nodes schedulable.
        let controller = api.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            controller.insert(
                "/api/v1",
                "serviceaccounts",
                json!({"metadata": {"name": "default", "namespace": "default"}}),
            );
        });
        wait(2, Duration::from_secs(20)).unwrap();
        t.join().unwrap();
        for i in 0..2 {
            let name = nodes::plain_node_name(i);
            let node = api.get(&format!("/api/v1/nodes/{name}")).unwrap();
            assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], name);
            assert_eq!(node["metadata"]["labels"]["type"], "kwok");
            assert_eq!(
                node["metadata"]["annotations"]["kwok.x-k8s.io/node"],
                "fake"
            );
            let want: serde_json::Map<String, serde_json::Value> = nodes::SIM_NODE_CAPACITY
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            assert_eq!(node["status"]["capacity"], json!(want));
            assert_eq!(node["status"]["allocatable"], json!(want));
        }
        // Each node created once (the second wait found them) and its status set each time.
        let writes = api.writes();
        assert_eq!(
            writes.iter().filter(|w| *w == "POST /api/v1/nodes").count(),
            2,
            "{writes:?}"
        );
        assert_eq!(
            writes
                .iter()
                .filter(|w| *w == "PATCH /api/v1/nodes/kwok-node-0/status")
                .count(),
            2,
            "{writes:?}"
        );
    }

    #[test]
    fn kwok_is_wedged_when_the_leases_of_existing_nodes_go_stale() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = testing::kubeconfig(dir.path(), https.port);
        let rt = testing::rt();
        let now = k8s_openapi::jiff::Timestamp::now();
        let ago = |s: i64| (now - k8s_openapi::jiff::SignedDuration::from_secs(s)).to_string();
        for n in ["n-a", "n-b", "n-c"] {
            api.insert("/api/v1", "nodes", json!({"metadata": {"name": n}}));
        }
        let lease = |name: &str, ns: &str, renewed: i64, duration: i32| {
            api.insert(
                "/apis/coordination.k8s.io/v1",
                "leases",
                json!({"metadata": {"name": name, "namespace": ns},
                       "spec": {"holderIdentity": name, "leaseDurationSeconds": duration,
                                "renewTime": ago(renewed)}}),
            );
        };
        lease("n-a", "kube-node-lease", 10, 200);
        lease("n-b", "kube-node-lease", 90, 200); // under 100 s: renewed in time
        assert_eq!(rt.block_on(kwok_leases(&kubeconfig)), None);
        lease("n-c", "kube-node-lease", 100, 40); // a 40 s lease: stale after 40 s
        lease("gone", "kube-node-lease", 9000, 40); // no such node: not kwok's to renew
        lease("kube-scheduler", "kube-system", 9000, 15); // not a node lease
        let finding = rt.block_on(kwok_leases(&kubeconfig)).unwrap();
        assert!(
            finding.starts_with("1 of 3 node leases not renewed for 10"),
            "{finding}"
        );
        assert!(
            finding.ends_with(
                "s or more (n-c): kwok stopped heartbeating its nodes; `gpuwl cluster up` restarts it"
            ),
            "{finding}"
        );
        // A restart deletes the node leases, and only those.
        rt.block_on(delete_node_leases(&kubeconfig));
        assert_eq!(
            api.writes(),
            ["DELETE /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"]
        );
        for (ns, name, left) in [
            ("kube-node-lease", "n-a", false),
            ("kube-node-lease", "gone", false),
            ("kube-system", "kube-scheduler", true),
        ] {
            let path = format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}");
            assert_eq!(api.get(&path).is_some(), left, "{path}");
        }
        assert_eq!(rt.block_on(kwok_leases(&kubeconfig)), None);
        // An API server that does not answer cannot say.
        let unreachable = testing::kubeconfig(tempfile::tempdir().unwrap().path(), closed_port());
        assert_eq!(rt.block_on(kwok_leases(&unreachable)), None);
    }

    #[test]
    fn the_clusters_own_kubeconfig_broken_is_a_runtime_failure() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let dir = tempfile::tempdir().unwrap();
        let rt = testing::rt();
        let good = testing::kubeconfig(dir.path(), https.port);
        let c = rt.block_on(client(&good, None)).unwrap();
        let v = rt.block_on(c.apiserver_version()).unwrap();
        assert_eq!(v.git_version, "v1.36.3-fake");
        let bad = dir.path().join("broken");
        std::fs::write(&bad, "apiVersion: v1\nkind: Config\nclusters: {").unwrap();
        let err = rt.block_on(client(&bad, None)).err().unwrap();
        assert!(matches!(err, Error::OwnInput(_)), "{err:?}");
        assert_eq!(err.exit_status(), crate::error::ExitStatus::Runtime);
        assert!(err.to_string().contains("broken"), "{err}");
        let err = rt.block_on(client(&good, Some("nope"))).err().unwrap();
        assert!(matches!(err, Error::OwnInput(_)), "{err:?}");
        assert!(err.to_string().contains("nope"), "{err}");
    }
}
