//! `gpuwl serve`: continuous drift detection as a Prometheus exporter.
//!
//! Design, in the crate's input → model → analysis → render order:
//! - [`watch`]: kube-runtime watchers on nodes, pods and (while their CRDs exist) the
//!   ClusterPolicy and KubeVirt / HyperConverged CRs keep a reduced copy of the cluster;
//!   ([`state::Mirror`]);
//! - on a change, after [`DEBOUNCE`] of quiet, one evaluation runs the existing analyses
//!   over that copy ([`gpuwl_core::analysis::exporter`]: `check::judge_node`,
//!   `inventory::build_with`, `kubevirt::check`, the quota layer, the admission index);
//! - [`metrics`]: the result replaces the metric families (prometheus-client);
//! - [`http`]: axum serves `/metrics`, `/healthz`, `/readyz`;
//! - [`conn`]: both listeners' connections bounded — at most `--max-connections` at once
//!   (below the open-file limit, whose soft value is raised to the hard one), 10 s for a
//!   request's headers (and so for an idle connection), 10 s for its body and answer, 10 s
//!   for a stalled write — so idle or slow clients cannot starve `/healthz` or `/validate`.
//!
//! Besides the watches, three timers run: a watchdog (`GET /version` every 10 s with a
//! 10 s timeout; every 2 s while the API server does not answer), the credential check
//! (every [`RELOAD_INTERVAL`], the kubeconfig files — or the in-cluster CA — are read and
//! compared with what the client was built from) and the CRD probe of an absent CRD every
//! 5 minutes. While the API server is away the metrics keep the last good state,
//! `gpuwl_api_reachable` and `gpuwl_ready` say 0, `gpuwl_stale` 1, and `/readyz` answers
//! 503; when it answers again every watch re-lists. `/healthz` fails only when serve
//! cannot recover by itself ([`watch::Shared::healthy`]). SIGTERM or SIGINT stops the
//! server (requests in flight get up to 1 s to finish).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::input::live::{Connection, Flavour, connect};
use crate::serve::watch::{Cr, Shared, lock, log, unix_now};
use gpuwl_core::analysis::exporter;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

pub mod admission;
pub mod conn;
pub mod http;
pub mod metrics;
pub mod state;
pub mod tls;
pub mod watch;

/// The default listen address. Port 9850: not dcgm-exporter's 9400, node-exporter's 9100
/// nor kube-state-metrics' 8080/8081, so the exporter can run beside them on a host
/// network.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9850";

/// How long the evaluator waits after a change for more changes before it evaluates (a
/// burst of events — a node pool relabelled at once — costs one evaluation).
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// What `gpuwl serve` is told.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the HTTP server listens (port 0: any free port; the log line names it).
    pub listen: SocketAddr,
    /// The cluster: kubeconfig (else `$KUBECONFIG`, `~/.kube/config`, in-cluster), context
    /// (else the current one), and the request timeout (connecting and writing; watches
    /// have no read timeout).
    pub cluster: crate::input::live::ClusterArgs,
    /// See [`DEBOUNCE`].
    pub debounce: Duration,
    /// `/healthz` fails once the API server has not answered for this long (`None`:
    /// never). See [`UNHEALTHY_AFTER`].
    pub unhealthy_after: Option<Duration>,
    /// The admission guard, when `--admission-listen` is given.
    pub admission: Option<AdmissionOptions>,
    /// Connections open at once per listener (`--max-connections`), lowered below the
    /// open-file limit ([`conn::cap`]).
    pub max_connections: usize,
}

/// Where the API server reaches the admission guard, for the registered configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A URL (`https://HOST:PORT/validate`): the local control plane, or a host network.
    Url(String),
    /// A Service `namespace/name` on port 443, path `/validate` (in the cluster).
    Service {
        /// The Service's namespace (also left out of the namespaceSelector).
        namespace: String,
        /// The Service's name.
        name: String,
    },
}

/// What `--admission-*` asks for.
#[derive(Debug, Clone)]
pub struct AdmissionOptions {
    /// Where the HTTPS server listens.
    pub listen: SocketAddr,
    /// Warn or enforce.
    pub mode: admission::Mode,
    /// The GPU resources autoscaling can bring (`--admission-autoscaled`): enforce mode
    /// admits, with the warning, an object that asks only those ([`admission::Autoscaled`]).
    pub autoscaled: Vec<admission::Autoscaled>,
    /// Serving certificate and key files (PEM); `None`: generated at start.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// How the API server reaches the guard: the configuration's clientConfig, and the
    /// names the generated certificate is made for. `None`: `https://<listen>/validate`
    /// (an unspecified listen address as 127.0.0.1).
    pub endpoint: Option<Endpoint>,
    /// Apply a ValidatingWebhookConfiguration of this name at start and delete it at exit.
    pub register: Option<String>,
}

impl AdmissionOptions {
    /// The endpoint, with the default URL for the bound address `local`.
    fn endpoint(&self, local: SocketAddr) -> Endpoint {
        self.endpoint.clone().unwrap_or_else(|| {
            let ip = match local.ip() {
                std::net::IpAddr::V4(v4) if v4.is_unspecified() => {
                    std::net::IpAddr::from([127, 0, 0, 1])
                }
                std::net::IpAddr::V6(v6) if v6.is_unspecified() => {
                    std::net::Ipv6Addr::LOCALHOST.into()
                }
                ip => ip,
            };
            Endpoint::Url(format!(
                "https://{}/validate",
                SocketAddr::new(ip, local.port())
            ))
        })
    }
}

/// The DNS names and IP addresses a generated serving certificate is made for: localhost,
/// 127.0.0.1 and ::1, the listen address when it is specific, the endpoint's host, and a
/// Service's cluster names.
fn certificate_names(
    listen: SocketAddr,
    endpoint: &Endpoint,
) -> (Vec<String>, Vec<std::net::IpAddr>) {
    let mut dns = vec!["localhost".to_owned()];
    let mut ips: Vec<std::net::IpAddr> = vec![
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::Ipv6Addr::LOCALHOST.into(),
    ];
    if !listen.ip().is_unspecified() {
        ips.push(listen.ip());
    }
    match endpoint {
        Endpoint::Url(url) => {
            if let Ok(u) = url.parse::<::http::Uri>()
                && let Some(host) = u.host()
            {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                match host.parse::<std::net::IpAddr>() {
                    Ok(ip) => ips.push(ip),
                    Err(_) => dns.push(host.to_owned()),
                }
            }
        }
        Endpoint::Service { namespace, name } => {
            dns.push(format!("{name}.{namespace}.svc"));
            dns.push(format!("{name}.{namespace}.svc.cluster.local"));
        }
    }
    dns.sort();
    dns.dedup();
    ips.sort();
    ips.dedup();
    (dns, ips)
}

/// The default of `--unhealthy-after`: 15 minutes without an answer from the API server.
/// A restart then starts afresh (new connections, DNS, credentials); shorter would have a
/// liveness probe restart the exporter through an ordinary control-plane upgrade, and a
/// restart loses the last good state the metrics keep.
pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(900);

/// How often the credential files are compared with what the client was built from.
pub(crate) const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// The in-cluster service account's CA bundle (the token beside it is re-read by kube-rs
/// itself at least once a minute: kube-rs `kube-client/src/client/auth/mod.rs`,
/// `TokenFile`).
pub(crate) const IN_CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// The files the client is built from: the kubeconfig files (`--kubeconfig`, else each of
/// `$KUBECONFIG`, else `~/.kube/config`) with the certificate and key files they name;
/// with none of them present, the in-cluster CA bundle.
pub fn credential_files(kubeconfig: Option<&Path>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match kubeconfig {
        Some(p) => vec![p.to_owned()],
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(v) => std::env::split_paths(&v).collect(),
            None => std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".kube").join("config"))
                .into_iter()
                .collect(),
        },
    };
    files.retain(|f| f.exists());
    if files.is_empty() {
        return vec![PathBuf::from(IN_CLUSTER_CA)];
    }
    let mut named = Vec::new();
    for f in &files {
        let Ok(kc) = kube::config::Kubeconfig::read_from(f) else {
            continue;
        };
        let dir = f.parent().unwrap_or(Path::new("."));
        let clusters = kc
            .clusters
            .iter()
            .filter_map(|c| c.cluster.as_ref()?.certificate_authority.clone());
        let users = kc.auth_infos.iter().flat_map(|a| {
            a.auth_info
                .as_ref()
                .map(|u| [u.client_certificate.clone(), u.client_key.clone()])
                .into_iter()
                .flatten()
                .flatten()
        });
        named.extend(clusters.chain(users).map(|p| dir.join(p)));
    }
    files.extend(named);
    files
}

/// A digest of `files`' contents (a missing or unreadable file counts as such).
pub(crate) fn fingerprint(files: &[PathBuf]) -> [u8; 32] {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.as_os_str().as_encoded_bytes());
        h.update([0]);
        match std::fs::read(f) {
            Ok(bytes) => {
                h.update(b"ok");
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(&bytes);
            }
            Err(_) => h.update(b"unreadable"),
        }
    }
    h.finalize().into()
}

/// Runs the exporter until SIGTERM or SIGINT.
///
/// Errors: [`Error::Input`] for an unusable kubeconfig or context (exit 2);
/// [`Error::NoKubeconfig`] or [`Error::Failed`] when no configuration is found, the client
/// cannot be built or the address cannot be bound (exit 3). Once serving, API failures never end it.
pub async fn serve(opts: &Options) -> Result<()> {
    let files = credential_files(opts.cluster.kubeconfig.as_deref());
    let loaded = fingerprint(&files);
    let Connection { client, server } = connect(&opts.cluster, Flavour::Watch).await?;
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| Error::failed(format!("cannot listen on {}", opts.listen), e))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::failed(format!("cannot listen on {}", opts.listen), e))?;
    log(&format!(
        "listening on http://{local} (/metrics, /healthz, /readyz); API server {server}"
    ));
    let shared = Arc::new(match &opts.admission {
        Some(_) => Shared::with_admission(client, opts.unhealthy_after),
        None => Shared::new(client, opts.unhealthy_after),
    });
    *lock(&shared.server) = server.clone();
    shared.publish_health();
    let nofile = conn::raise_nofile();
    let listeners = if opts.admission.is_some() { 2 } else { 1 };
    let bounds = conn::Bounds {
        max_connections: conn::cap(opts.max_connections, nofile, listeners),
        ..conn::Bounds::default()
    };
    if bounds.max_connections < opts.max_connections {
        log(&format!(
            "at most {} connections per listener: the open-file limit is {nofile}",
            bounds.max_connections
        ));
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let mut guard = None;
    if let Some(a) = &opts.admission {
        guard = Some(start_admission(a, shared.clone(), bounds, stopped()).await?);
    }
    let tasks = vec![
        tokio::spawn(supervisor(shared.clone())),
        tokio::spawn(watch::watchdog(shared.clone())),
        tokio::spawn(reloader(shared.clone(), opts.clone(), loaded)),
        tokio::spawn(evaluator(shared.clone(), opts.debounce)),
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        }),
    ];
    conn::serve(
        conn::Plain::new(listener, &bounds),
        http::router(shared.clone()),
        bounds,
        stopped(),
    )
    .await;
    for t in &tasks {
        t.abort();
    }
    if let Some((server, registered)) = guard {
        let _ = tokio::task::spawn_blocking(move || server.join()).await;
        if let Some((name, uid)) = registered {
            unregister(&shared, &name, &uid).await;
        }
    }
    log("stopped");
    Ok(())
}

/// The admission server's thread, and the registered configuration's (name, uid).
type Started = (std::thread::JoinHandle<()>, Option<(String, String)>);

/// Worker threads of the admission guard's own runtime (two: a review waiting behind
/// another's did-you-mean search does not wait for it on a second core).
pub(crate) const ADMISSION_THREADS: usize = 2;

/// How many nice steps below the admission guard serve's other threads run (watch decoding,
/// evaluations, `/metrics`): with `--admission-listen`, the main runtime's threads run this
/// many steps below the thread that started serve, so that a burst of watch events on a large cluster
/// yields the CPU to a review (Linux: `setpriority` on the thread id; lowering needs no
/// privilege). Elsewhere nothing changes. Ten, not five: on one core shared with serve's
/// watch work at 5,000 nodes, five steps left the reviews' p99 at 6.5 ms, ten at 2.6 ms
/// (BENCHMARKS.md, "The admission guard at 200 reviews/s").
pub const BACKGROUND_NICE: i32 = 10;

/// The runtime `gpuwl serve` runs its watches, evaluations and exporter on: two worker
/// threads ([`crate::input::live::runtime_builder`]); with an admission guard, each of its threads
/// (workers and blocking pool) sets its priority [`BACKGROUND_NICE`] steps below the caller's
/// as it starts.
///
/// Errors: [`Error::Failed`] when the runtime cannot be built.
pub fn runtime(opts: &Options) -> Result<tokio::runtime::Runtime> {
    runtime_lowered(opts.admission.is_some().then_some(BACKGROUND_NICE))
}

/// A two-worker runtime whose threads run `steps` nice steps below the thread that builds
/// it (when given). The target is absolute: a thread the blocking pool starts from an already
/// lowered worker does not go lower still.
fn runtime_lowered(steps: Option<i32>) -> Result<tokio::runtime::Runtime> {
    let mut b = crate::input::live::runtime_builder();
    if let (Some(steps), Some(base)) = (steps, this_thread_nice()) {
        let target = (base + steps).min(19);
        b.on_thread_start(move || set_this_thread_nice(target));
    }
    b.build()
        .map_err(|e| Error::failed("cannot start the async runtime", e))
}

/// Sets the calling thread's nice value to `nice` (Linux: `setpriority` on the thread id;
/// raising it needs no privilege). A failure leaves the priority as it was: it is a
/// preference, not a requirement. Elsewhere a no-op.
pub(crate) fn set_this_thread_nice(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take plain integers and change only the scheduling
    // priority of this thread.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// The calling thread's nice value (Linux; `None` elsewhere or when it cannot be read).
pub(crate) fn this_thread_nice() -> Option<i32> {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and getpriority take plain integers and read only this thread's
    // priority; errno is this thread's own.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if now == -1 && *libc::__errno_location() != 0 {
            return None;
        }
        Some(now)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Binds the admission guard's HTTPS listener, starts its server on its own thread and
/// runtime ([`ADMISSION_THREADS`] workers, threads named `gpuwl-admission`; stopping when
/// `stop` resolves) and, with `--admission-register`, applies its
/// ValidatingWebhookConfiguration. A review reads only the admission index the evaluator
/// publishes (one `Arc` clone under a mutex), so nothing on the main runtime — a re-list of
/// 20,000 pods, an evaluation — sits between a review and its answer.
///
/// Errors: [`Error::Input`] for unusable certificate files (exit 2); [`Error::Runtime`]
/// when the address cannot be bound, the runtime cannot start, or the configuration cannot
/// be applied (exit 3).
async fn start_admission(
    a: &AdmissionOptions,
    shared: Arc<Shared>,
    bounds: conn::Bounds,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Started> {
    let tcp = std::net::TcpListener::bind(a.listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Error::failed(format!("cannot listen on {}", a.listen), e))?;
    let local = tcp
        .local_addr()
        .map_err(|e| Error::failed(format!("cannot listen on {}", a.listen), e))?;
    let endpoint = a.endpoint(local);
    // The operator's certificate and key (`--admission-cert`/`--admission-key`), else one
    // made for the endpoint's names.
    let cert: tls::ServingCert = match &a.cert {
        Some((c, k)) => tls::read(c, k)?,
        None => {
            let (dns, ips) = certificate_names(local, &endpoint);
            tls::generate(&dns, &ips)?
        }
    };
    let config = tls::config(&cert)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(ADMISSION_THREADS)
        .thread_name("gpuwl-admission")
        .enable_all()
        .build()
        .map_err(|e| Error::failed("cannot start the admission guard's runtime", e))?;
    let mut autoscaled = a.autoscaled.clone();
    let karpenter = admission::karpenter_autoscaled(&shared.client()).await;
    if !karpenter.is_empty() {
        let names: Vec<&str> = karpenter.iter().map(|k| k.name.as_str()).collect();
        log(&format!(
            "admission: Karpenter NodePools can bring {}: enforce mode admits them with a warning",
            text::esc(&names.join(", "))
        ));
    }
    autoscaled.extend(karpenter);
    if let Some(ca) = admission::cluster_autoscaler(&shared.client()).await {
        let names: Vec<String> = ca
            .autoscaled
            .iter()
            .map(|a| format!("{}={}", a.name, a.units.unwrap_or(0)))
            .collect();
        let groups = if ca.node_groups.is_empty() {
            String::new()
        } else {
            format!(" ({} node group(s))", ca.node_groups.len())
        };
        log(&text::esc(&if names.is_empty() {
            format!(
                "admission: cluster-autoscaler found ({}){groups}, but no node-group template gpuwl can read names a GPU resource (a cloud provider's groups keep theirs in the cloud): list what they bring with --admission-autoscaled NAME[=UNITS], else enforce mode denies a pod only they could serve",
                ca.found_by.join(", ")
            )
        } else {
            format!(
                "admission: cluster-autoscaler ({}){groups} can bring {}: enforce mode admits them with a warning",
                ca.found_by.join(", "),
                names.join(", ")
            )
        }));
        autoscaled.extend(ca.autoscaled);
    }
    let guard = Arc::new(admission::Guard {
        shared: shared.clone(),
        mode: a.mode,
        autoscaled,
    });
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let server = std::thread::Builder::new()
        .name("gpuwl-admission".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(tcp)
                    .and_then(|tcp| tls::Listener::new(tcp, config, &bounds));
                let listener = match listener {
                    Ok(l) => {
                        let _ = bound_tx.send(Ok(()));
                        l
                    }
                    Err(e) => {
                        let _ = bound_tx.send(Err(e));
                        return;
                    }
                };
                conn::serve(listener, admission::router(guard), bounds, stop).await;
            });
            // Handshakes or reviews still in flight do not hold the exit up.
            rt.shutdown_timeout(Duration::from_secs(1));
        })
        .map_err(|e| Error::failed("cannot start the admission guard's thread", e))?;
    match bound_rx.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::failed(format!("cannot listen on {local}"), e)),
        Err(_) => {
            return Err(Error::Runtime(
                "the admission guard's thread ended before it listened".into(),
            ));
        }
    }
    log(&format!(
        "admission guard listening on https://{local}/validate ({} mode, {} certificate)",
        match a.mode {
            admission::Mode::Warn => "warn",
            admission::Mode::Enforce => "enforce",
        },
        if a.cert.is_some() {
            "file"
        } else {
            "generated"
        }
    ));
    let registered = match &a.register {
        None => None,
        Some(name) => {
            let ca = match &cert.ca_pem {
                Some(ca) => ca.clone(),
                // Files: the chain's last certificate is the closest to a CA we have.
                None => cert.cert_pem.clone(),
            };
            let uid = register(&shared, name, &endpoint, &ca).await?;
            Some((name.clone(), uid))
        }
    };
    Ok((server, registered))
}

/// How long registering or removing the configuration may take.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Applies (server-side apply, field manager `gpuwl-serve`) the ValidatingWebhookConfiguration
/// `name` pointing at `endpoint` with `ca` as its caBundle; returns its uid.
async fn register(shared: &Shared, name: &str, endpoint: &Endpoint, ca: &str) -> Result<String> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, Patch, PatchParams};
    // The API's []byte fields are base64 on the wire; k8s-openapi's ByteString encodes it.
    let b64 = serde_json::to_value(k8s_openapi::ByteString(ca.as_bytes().to_vec()))
        .map_err(|e| Error::failed("encoding the caBundle", e))?;
    let (client_config, skip) = match endpoint {
        Endpoint::Url(url) => (
            serde_json::json!({"url": url, "caBundle": b64}),
            vec!["kube-system"],
        ),
        Endpoint::Service { namespace, name } => (
            serde_json::json!({
                "service": {"namespace": namespace, "name": name, "path": "/validate", "port": 443},
                "caBundle": b64,
            }),
            vec!["kube-system", namespace.as_str()],
        ),
    };
    let body = admission::configuration(name, client_config, &skip);
    let api: Api<ValidatingWebhookConfiguration> = Api::all(shared.client());
    let applied = tokio::time::timeout(
        REGISTER_TIMEOUT,
        api.patch(
            name,
            &PatchParams::apply("gpuwl-serve").force(),
            &Patch::Apply(&body),
        ),
    )
    .await
    .map_err(|_| {
        Error::Runtime(format!(
            "cannot register ValidatingWebhookConfiguration {name}: no answer within {} s",
            REGISTER_TIMEOUT.as_secs()
        ))
    })?
    .map_err(|e| {
        crate::input::live::api_error(
            &format!("register ValidatingWebhookConfiguration {name}"),
            &e,
        )
    })?;
    let uid = applied.metadata.uid.unwrap_or_default();
    log(&format!(
        "registered ValidatingWebhookConfiguration {name} ({}); removed again when serve stops",
        match endpoint {
            Endpoint::Url(u) => u.clone(),
            Endpoint::Service { namespace, name } =>
                format!("service {namespace}/{name}:443/validate"),
        }
    ));
    Ok(uid)
}

/// Deletes the configuration `name` this process registered (only if its uid is still
/// `uid`: one re-applied by someone else meanwhile stays). Failures are logged.
async fn unregister(shared: &Shared, name: &str, uid: &str) {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, DeleteParams, Preconditions};
    let api: Api<ValidatingWebhookConfiguration> = Api::all(shared.client());
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match tokio::time::timeout(REGISTER_TIMEOUT, api.delete(name, &params)).await {
        Ok(Ok(_)) => log(&format!("removed ValidatingWebhookConfiguration {name}")),
        Ok(Err(e)) => log(&format!(
            "could not remove ValidatingWebhookConfiguration {name}: {}",
            crate::input::live::api_error("delete", &e)
        )),
        Err(_) => log(&format!(
            "could not remove ValidatingWebhookConfiguration {name}: no answer within {} s",
            REGISTER_TIMEOUT.as_secs()
        )),
    }
}

/// Runs the watches with the current client; restarts them all (each re-lists, the mirrors
/// keep the last good state meanwhile) when [`Shared::restart`] is woken.
async fn supervisor(shared: Arc<Shared>) {
    loop {
        let mut set = JoinSet::new();
        set.spawn(watch::nodes(shared.clone()));
        set.spawn(watch::pods(shared.clone()));
        for cr in [
            Cr::ClusterPolicy,
            Cr::HyperConverged,
            Cr::KubeVirt,
            Cr::VirtualMachineInstance,
            Cr::VirtualMachine,
        ] {
            set.spawn(watch::custom_resource(shared.clone(), cr));
        }
        shared.restart.notified().await;
        set.abort_all();
        while set.join_next().await.is_some() {}
        shared.watches_restarted();
    }
}

/// Every [`RELOAD_INTERVAL`], compares the credential files with `loaded` (their digest
/// when the client was built); on a change connects anew ([`connect`], as at start) and
/// restarts the watches with the new client. A file that cannot be used is logged once and the previous client kept.
async fn reloader(shared: Arc<Shared>, opts: Options, mut loaded: [u8; 32]) {
    loop {
        tokio::time::sleep(RELOAD_INTERVAL).await;
        let files = credential_files(opts.cluster.kubeconfig.as_deref());
        let now = fingerprint(&files);
        if now == loaded {
            continue;
        }
        loaded = now;
        let names = files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        // The same builder as at start (kube-rs re-reads the kubeconfig or in-cluster files).
        match connect(&opts.cluster, Flavour::Watch).await {
            Ok(Connection { client, server }) => {
                *lock(&shared.client) = client;
                *lock(&shared.server) = server.clone();
                shared.metrics.reloaded();
                log(&format!(
                    "credentials changed on disk ({names}): new client for {server}; re-listing"
                ));
                shared.restart.notify_one();
                shared.probe_now.notify_one();
            }
            Err(e) => log(&format!(
                "credentials changed on disk ({names}) but cannot be used, keeping the previous client: {e}"
            )),
        }
    }
}

/// Hands heap pages freed by an evaluation (and by the list pages decoded before it) back
/// to the OS; glibc's allocator keeps them otherwise, and the resident memory would show
/// the peak of the last burst instead of what the exporter holds.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim(3) only returns free pages at the top of heaps and whole free
    // pages inside them; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resolves on SIGTERM or SIGINT (logged).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => log("SIGTERM: stopping"),
                    _ = tokio::signal::ctrl_c() => log("SIGINT: stopping"),
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                log("SIGINT: stopping");
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        log("interrupted: stopping");
    }
}

/// Records one relabel: the metric, a log line, and an Event on the node (reason
/// `WorkloadLabelChanged`, in namespace `default` where node events live), so an incident
/// can be traced to the relabel that caused it. An Event the credentials may not create is
/// logged, not retried.
async fn record_relabel(shared: &Shared, r: &exporter::Relabel) {
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "absent".into());
    let (from, to) = (show(&r.from), show(&r.to));
    shared.metrics.relabelled(&r.node, &from, &to);
    let text = format!(
        "{} changed on node {}: {} → {} (the GPU Operator swaps the node's operands and the GPU names it advertises)",
        gpuwl_core::model::workload::LABEL_KEY,
        gpuwl_core::analysis::admission::show(&r.node),
        gpuwl_core::analysis::admission::show(&from),
        gpuwl_core::analysis::admission::show(&to)
    );
    log(&format!("relabel: {text}"));
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let event = k8s_openapi::api::core::v1::Event {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{}.gpuwl-", r.node)),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(r.node.clone()),
            ..Default::default()
        },
        reason: Some("WorkloadLabelChanged".into()),
        message: Some(text),
        type_: Some("Warning".into()),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some("gpuwl".into()),
            ..Default::default()
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Default::default()
    };
    let api: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(shared.client(), "default");
    match tokio::time::timeout(
        Duration::from_secs(10),
        api.create(&kube::api::PostParams::default(), &event),
    )
    .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log(&format!(
            "the Event of that relabel was not created: {}",
            gpuwl_core::text::cut(&e.to_string())
        )),
        Err(_) => log("the Event of that relabel was not created: no answer within 10 s"),
    }
}

/// How often the evaluator lists DRA objects again (they are not watched).
const DRA_RELIST: Duration = Duration::from_secs(30);

/// How long one evaluation waits for the DRA lists.
const DRA_LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster's DRA objects for one evaluation, or `None` (not served, refused, or no
/// answer within [`DRA_LIST_TIMEOUT`]; an error is logged). The list runs on a blocking
/// thread of the runtime: its future borrows across awaits in a way the evaluator's spawned
/// task cannot carry.
/// Kueue's objects ([`crate::input::kueue::list`]), with the DRA list's timeout; `None` when
/// Kueue is not installed or they cannot be read (said in the log).
async fn list_kueue(client: kube::Client) -> Option<gpuwl_core::model::kueue::KueueObjects> {
    // On a blocking thread, as list_dra: the paging closure's future is not `Send` for
    // every lifetime the spawned evaluator needs.
    let handle = tokio::runtime::Handle::current();
    let listed = tokio::task::spawn_blocking(move || {
        handle.block_on(async {
            tokio::time::timeout(DRA_LIST_TIMEOUT, crate::input::kueue::list(&client)).await
        })
    })
    .await;
    match listed.unwrap_or(Ok(Ok(None))) {
        Ok(Ok(k)) => k,
        Ok(Err(e)) => {
            log(&format!("Kueue objects not read: {e}"));
            None
        }
        Err(_) => {
            log(&format!(
                "Kueue objects not read: no answer within {DRA_LIST_TIMEOUT:?}"
            ));
            None
        }
    }
}

async fn list_dra(client: kube::Client) -> Option<gpuwl_core::model::dra::DraObjects> {
    let handle = tokio::runtime::Handle::current();
    let listed = tokio::task::spawn_blocking(move || {
        handle.block_on(async {
            tokio::time::timeout(DRA_LIST_TIMEOUT, crate::input::dra::list(&client)).await
        })
    })
    .await;
    match listed {
        Ok(Ok(Ok((objects, gpuwl_core::model::dra::DraSource::Cluster)))) => Some(objects),
        Ok(Ok(Ok(_))) => None,
        Ok(Ok(Err(e))) => {
            log(&format!("DRA objects not read: {e}"));
            None
        }
        Ok(Err(_)) => {
            log(&format!(
                "DRA objects not read: no answer within {DRA_LIST_TIMEOUT:?}"
            ));
            None
        }
        Err(e) => {
            log(&format!("DRA objects not read: {e}"));
            None
        }
    }
}

/// Waits for changes, debounces, evaluates, publishes. The first evaluation waits for the
/// initial lists.
async fn evaluator(shared: Arc<Shared>, debounce: Duration) {
    let mut last_problems: Vec<String> = Vec::new();
    // The admission index an evaluation replaced, kept until the next one replaces it
    // again: a review that cloned it just before the swap then never holds the last
    // reference, so freeing a 5,000-node index never happens on the admission guard's
    // threads.
    let mut retired: Option<Arc<gpuwl_core::analysis::admission::Index>> = None;
    // The nodes' workload labels at the last evaluation: a change is a relabel, recorded
    // as a metric and an Event on the node (the first evaluation only learns them).
    let mut last_labels: Option<std::collections::BTreeMap<String, Option<String>>> = None;
    let mut dra: Option<Arc<gpuwl_core::model::dra::DraObjects>> = None;
    let mut kueue: Option<Arc<gpuwl_core::model::kueue::KueueObjects>> = None;
    let mut dra_listed: Option<Instant> = None;
    loop {
        shared.changed.notified().await;
        tokio::time::sleep(debounce).await;
        // Nothing new can be known while the API server does not answer: the metrics keep
        // the last good state and its time (the watches re-list when it is back, which
        // wakes this loop again).
        if !lock(&shared.health).reachable {
            continue;
        }
        // DRA objects are listed for each evaluation (the API may not serve
        // resource.k8s.io: then none, said once in the log), with a timeout of their own.
        // Listed at most every DRA_RELIST (an evaluation can follow every pod change: the
        // slices of a large cluster are not listed each time).
        if dra_listed.is_none_or(|t: Instant| t.elapsed() >= DRA_RELIST) {
            dra = list_dra(shared.client()).await.map(Arc::new);
            kueue = list_kueue(shared.client()).await.map(Arc::new);
            dra_listed = Some(Instant::now());
        }
        lock(&shared.health).evaluating_since = Some(Instant::now());
        // The analyses read the copy in place, holding the store (watchers wait meanwhile).
        let reader = shared.clone();
        let dra_now = dra.clone();
        let kueue_now = kueue.clone();
        let evaluated = tokio::task::spawn_blocking(move || {
            let s = reader.store.blocking_lock();
            if !s.synced() {
                return None;
            }
            let started = Instant::now();
            let mut retire = None;
            let policy = s.policy_status();
            let kv = s.kubevirt_cr();
            let pods = s.judged_pods();
            let mut e = exporter::evaluate_with_dra(
                s.nodes.as_slice(),
                &pods,
                &policy,
                kv.as_ref().map(|r| r.as_ref().map_err(Clone::clone)),
                dra_now.as_deref(),
            );
            e.quota = kueue_now
                .as_deref()
                .map(|k| exporter::quota(s.nodes.as_slice(), &policy, k));
            if reader.admission_enabled {
                let (index, flagged) = exporter::admission(
                    s.nodes.as_slice(),
                    &pods,
                    &policy,
                    kv.and_then(|r| r.ok()),
                );
                // Swapped, not assigned: the old index is not freed under the lock a review
                // takes, and not by a review either (see `retired`).
                let old = std::mem::replace(&mut *lock(&reader.admission), Arc::new(index));
                reader.metrics.admission_flagged(&flagged);
                retire = Some(old);
            }
            let labels = exporter::workload_labels(s.nodes.as_slice());
            Some((
                e,
                s.nodes.len(),
                s.pods.len(),
                started.elapsed(),
                retire,
                labels,
            ))
        })
        .await;
        lock(&shared.health).evaluating_since = None;
        let (evaluation, nodes, pods, took, retire, labels) = match evaluated {
            Ok(Some(done)) => done,
            Ok(None) => continue,
            Err(e) => {
                log(&format!("evaluation failed: {e}"));
                continue;
            }
        };
        if retire.is_some() {
            // Frees the index two evaluations old (no review still holds it).
            drop(std::mem::replace(&mut retired, retire));
        }
        if evaluation.problems != last_problems {
            for p in &evaluation.problems {
                log(p);
            }
            last_problems = evaluation.problems.clone();
        }
        if let Some(before) = &last_labels {
            for r in exporter::relabels(before, &labels) {
                record_relabel(&shared, &r).await;
            }
        }
        last_labels = Some(labels);
        shared
            .metrics
            .update(&evaluation, unix_now(), took.as_secs_f64());
        drop(evaluation);
        release_freed_memory();
        let first = !shared.change_health(|h| std::mem::replace(&mut h.evaluated, true));
        if first {
            log(&format!(
                "ready: {nodes} nodes, {pods} pods with extended-resource requests or resource claims, evaluated in {} ms",
                took.as_millis()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn with_an_admission_guard_the_main_runtime_runs_below_it() {
        let here = this_thread_nice().unwrap();
        let lowered = runtime_lowered(Some(BACKGROUND_NICE)).unwrap();
        let worker =
            lowered.block_on(async { tokio::spawn(async { this_thread_nice() }).await.unwrap() });
        // A blocking thread started from a (lowered) worker lands at the same value.
        let blocking = lowered.block_on(async {
            tokio::spawn(async { tokio::task::spawn_blocking(this_thread_nice).await.unwrap() })
                .await
                .unwrap()
        });
        assert_eq!(worker, Some((here + BACKGROUND_NICE).min(19)));
        assert_eq!(blocking, Some((here + BACKGROUND_NICE).min(19)));
        // Without a guard nothing changes; nor does the thread that built the runtimes.
        let plain = runtime_lowered(None).unwrap();
        let worker =
            plain.block_on(async { tokio::spawn(async { this_thread_nice() }).await.unwrap() });
        assert_eq!(worker, Some(here));
        assert_eq!(this_thread_nice(), Some(here));
    }

    #[test]
    fn the_credential_files_are_the_kubeconfig_and_the_files_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("config");
        std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', certificate-authority: pki/ca.crt}\nusers:\n- name: u\n  user: {client-certificate: pki/admin.crt, client-key: /abs/admin.key}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
        )
        .unwrap();
        let files = credential_files(Some(&kc));
        assert_eq!(
            files,
            [
                kc.clone(),
                dir.path().join("pki/ca.crt"),
                dir.path().join("pki/admin.crt"),
                PathBuf::from("/abs/admin.key"),
            ]
        );
        let first = fingerprint(&files);
        assert_eq!(fingerprint(&files), first);
        // A named file appearing, or the kubeconfig changing, changes the fingerprint.
        std::fs::create_dir(dir.path().join("pki")).unwrap();
        std::fs::write(dir.path().join("pki/ca.crt"), "ca").unwrap();
        let second = fingerprint(&files);
        assert_ne!(second, first);
        std::fs::write(&kc, "apiVersion: v1\nkind: Config\n").unwrap();
        assert_ne!(fingerprint(&files), second);
        // No kubeconfig at all: the in-cluster CA.
        assert_eq!(
            credential_files(Some(&dir.path().join("missing"))),
            [PathBuf::from(IN_CLUSTER_CA)]
        );
    }
}
