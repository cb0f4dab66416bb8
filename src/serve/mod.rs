//! `gpuwl serve`: continuous drift detection as a Prometheus exporter.
//!
//! Design, in the crate's input → model → analysis → render order:
//! - [`watch`]: kube-runtime watchers on nodes, pods and (while their CRDs exist) the
//!   ClusterPolicy and KubeVirt / HyperConverged CRs keep a reduced copy of the cluster;
//! - [`state`]: on a change, after [`DEBOUNCE`] of quiet, one evaluation runs the existing
//!   analyses (`check::judge`, `inventory::build`, `kubevirt::check`) over that copy;
//! - [`metrics`]: the result replaces the metric families (prometheus-client);
//! - [`http`]: axum serves `/metrics`, `/healthz`, `/readyz`.
//!
//! Besides the watches, three timers run: a watchdog (`GET /version` every 10 s with a
//! 10 s timeout; every 2 s while the API server does not answer), the credential check
//! (every [`RELOAD_INTERVAL`], the kubeconfig files — or the in-cluster CA — are read and
//! compared with what the client was built from) and the CRD probe of an absent CRD every
//! 5 minutes. While the API server is away the metrics keep the last good state,
//! `gpuwl_api_reachable` and `gpuwl_ready` say 0, `gpuwl_stale` 1, and `/readyz` answers
//! 503; when it answers again every watch re-lists. `/healthz` fails only when serve
//! cannot recover by itself ([`watch::Shared::healthy`]). SIGTERM or SIGINT stops the
//! server gracefully (in-flight scrapes finish).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::input::live::{Connection, Flavour, connect};
use crate::serve::watch::{Cr, Shared, lock, log, unix_now};

pub mod http;
pub mod metrics;
pub mod state;
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
}

/// The default of `--unhealthy-after`: 15 minutes without an answer from the API server.
/// A restart then starts afresh (new connections, DNS, credentials); shorter would have a
/// liveness probe restart the exporter through an ordinary control-plane upgrade, and a
/// restart loses the last good state the metrics keep.
pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(900);

/// How often the credential files are compared with what the client was built from.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// The in-cluster service account's CA bundle (the token beside it is re-read by kube-rs
/// itself at least once a minute: kube-rs `kube-client/src/client/auth/mod.rs`,
/// `TokenFile`).
pub const IN_CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

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
pub fn fingerprint(files: &[PathBuf]) -> [u8; 32] {
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
    let shared = Arc::new(Shared::new(client, opts.unhealthy_after));
    shared.publish_health();
    let tasks = vec![
        tokio::spawn(supervisor(shared.clone())),
        tokio::spawn(watch::watchdog(shared.clone())),
        tokio::spawn(reloader(shared.clone(), opts.clone(), loaded)),
        tokio::spawn(evaluator(shared.clone(), opts.debounce)),
    ];
    let served = axum::serve(listener, http::router(shared.clone()))
        .with_graceful_shutdown(shutdown_signal())
        .await;
    for t in &tasks {
        t.abort();
    }
    served.map_err(|e| Error::failed(format!("serving on {local}"), e))?;
    log("stopped");
    Ok(())
}

/// Runs the watches with the current client; restarts them all (each re-lists, the mirrors
/// keep the last good state meanwhile) when [`Shared::restart`] is woken.
async fn supervisor(shared: Arc<Shared>) {
    loop {
        let mut set = JoinSet::new();
        set.spawn(watch::nodes(shared.clone()));
        set.spawn(watch::pods(shared.clone()));
        for cr in [Cr::ClusterPolicy, Cr::HyperConverged, Cr::KubeVirt] {
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

/// Waits for changes, debounces, evaluates, publishes. The first evaluation waits for the
/// initial lists.
async fn evaluator(shared: Arc<Shared>, debounce: Duration) {
    let mut last_problems: Vec<String> = Vec::new();
    loop {
        shared.changed.notified().await;
        tokio::time::sleep(debounce).await;
        // Nothing new can be known while the API server does not answer: the metrics keep
        // the last good state and its time (the watches re-list when it is back, which
        // wakes this loop again).
        if !lock(&shared.health).reachable {
            continue;
        }
        lock(&shared.health).evaluating_since = Some(Instant::now());
        // The analyses read the copy in place, holding the store (watchers wait meanwhile).
        let reader = shared.clone();
        let evaluated = tokio::task::spawn_blocking(move || {
            let s = reader.store.blocking_lock();
            if !s.synced() {
                return None;
            }
            let started = Instant::now();
            let policy = s.policy_status();
            let kv = s.kubevirt_cr();
            let e = state::evaluate(
                s.nodes.as_slice(),
                s.pods.as_slice(),
                &policy,
                kv.as_ref().map(|r| r.as_ref().map_err(Clone::clone)),
            );
            Some((e, s.nodes.len(), s.pods.len(), started.elapsed()))
        })
        .await;
        lock(&shared.health).evaluating_since = None;
        let (evaluation, nodes, pods, took) = match evaluated {
            Ok(Some(done)) => done,
            Ok(None) => continue,
            Err(e) => {
                log(&format!("evaluation failed: {e}"));
                continue;
            }
        };
        if evaluation.problems != last_problems {
            for p in &evaluation.problems {
                log(p);
            }
            last_problems = evaluation.problems.clone();
        }
        shared
            .metrics
            .update(&evaluation, unix_now(), took.as_secs_f64());
        drop(evaluation);
        release_freed_memory();
        let first = !std::mem::replace(&mut lock(&shared.health).evaluated, true);
        if first {
            log(&format!(
                "ready: {nodes} nodes, {pods} pods with extended-resource requests, evaluated in {} ms",
                took.as_millis()
            ));
        }
        shared.publish_health();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
