//! Bringing a local cluster up and down: [`up`] (build, ports, PKI, kubeconfigs, the
//! components in order, the optional ones, the supervisor; a broken cluster recovered on
//! its data) and [`down`].

use std::path::Path;
use std::time::{Duration, Instant};

use super::index::{Status, info, status};
use super::leases::kwok_wedged;
use super::ports::{PortLock, Ports};
use super::readiness::{Deferred, StartError, StartResult, Watch, wait_ready};
use super::recipe::{self, StartWhen};
use super::restart::restart_dead;
use super::runtime::on_own_thread;
use super::state::{
    ClusterHandle, ClusterInfo, DEFAULT_NAME, has_data, kubeconfig_path, remove_lock_files,
    remove_state, state_dir, validate_name,
};
use super::{
    build, gpu_operator, kubeconfig, kubevirt, kueue, pki, process, supervisor, userconfig,
};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

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
    /// Start a twin (`gpuwl whatif`, `gpuwl plan`), whose creator writes its nodes already
    /// Ready and untainted and its bound pods as copies that need no kubelet: the API server
    /// runs without the TaintNodesByCondition admission plugin
    /// ([`recipe::TWIN_APISERVER_ARGS`]), kube-controller-manager without its TTL
    /// controller ([`recipe::TWIN_CONTROLLER_MANAGER_ARGS`]), and kwok's `pod-ready` stage
    /// skips pods labelled [`recipe::KWOK_LEAVE_PENDING_LABEL`]
    /// ([`recipe::twin_kwok_stages`]). Every other pod and node is played as in any
    /// cluster. Not changed when the cluster is already running.
    pub twin: bool,
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
            twin: false,
        }
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
        return Err(Error::runtime(format!(
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
        Error::runtime(format!(
            "cannot read {} ({e}); rebuild with `gpuwl cluster build`",
            stages_path.display()
        ))
    })?;
    let stages = if opts.twin {
        recipe::twin_kwok_stages(&stages)?
    } else {
        stages
    };
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
                return Err(Error::runtime(format!(
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
        twin: opts.twin,
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
