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
//! Nothing polls: between changes the process sleeps (the only timers are the CRD probe of
//! an absent CRD every 5 minutes and, while the API server is away, a `GET /version` every
//! 2 s). While the API server is away the metrics keep the last good state and
//! `gpuwl_api_reachable` says 0; `/readyz` answers 503. SIGTERM or SIGINT stops the server
//! gracefully (in-flight scrapes finish).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex as AsyncMutex;

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::serve::metrics::Metrics;
use crate::serve::watch::{Cr, Health, Shared, Store, lock, log};

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
}

/// Runs the exporter until SIGTERM or SIGINT.
///
/// Errors: [`Error::Input`] for an unusable kubeconfig or context (exit 2);
/// [`Error::Runtime`] when no configuration is found, the client cannot be built or the
/// address cannot be bound (exit 3). Once serving, API failures never end it.
pub async fn serve(opts: &Options) -> Result<()> {
    let crate::input::live::Connection { client, server } =
        crate::input::live::connect(&opts.cluster, crate::input::live::Flavour::Watch).await?;
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| Error::Runtime(format!("cannot listen on {}: {e}", opts.listen)))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::Runtime(format!("cannot listen on {}: {e}", opts.listen)))?;
    log(&format!(
        "listening on http://{local} (/metrics, /healthz, /readyz); API server {}",
        server
    ));
    let shared = Arc::new(Shared {
        client,
        store: AsyncMutex::new(Store::default()),
        changed: Notify::new(),
        health: Mutex::new(Health {
            reachable: true,
            ..Health::default()
        }),
        metrics: Metrics::new(),
    });
    shared.publish_health();
    let tasks = vec![
        tokio::spawn(watch::nodes(shared.clone())),
        tokio::spawn(watch::pods(shared.clone())),
        tokio::spawn(watch::custom_resource(shared.clone(), Cr::ClusterPolicy)),
        tokio::spawn(watch::custom_resource(shared.clone(), Cr::HyperConverged)),
        tokio::spawn(watch::custom_resource(shared.clone(), Cr::KubeVirt)),
        tokio::spawn(evaluator(shared.clone(), opts.debounce)),
    ];
    let served = axum::serve(listener, http::router(shared.clone()))
        .with_graceful_shutdown(shutdown_signal())
        .await;
    for t in &tasks {
        t.abort();
    }
    served.map_err(|e| Error::Runtime(format!("serving on {local}: {e}")))?;
    log("stopped");
    Ok(())
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
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        shared.metrics.update(&evaluation, now, took.as_secs_f64());
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
