//! `gpuwl serve`: arguments and entry point.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{ExitStatus, Result};
use crate::serve::{self, DEFAULT_LISTEN};

/// Arguments of `gpuwl serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl serve                                        # in a pod: the in-cluster service account
  gpuwl serve --kubeconfig ~/.kube/config --listen 127.0.0.1:9850
  curl -s localhost:9850/metrics | grep gpuwl_node_mismatch

Watches nodes and pods (and the ClusterPolicy, KubeVirt and HyperConverged CRs when their CRDs
exist), re-evaluates check, inventory and the KubeVirt check on every change (debounced), and
serves the results on /metrics (classic Prometheus text, or OpenMetrics when the Accept header asks;
gzip when accepted). A watchdog asks the API server GET /version every 10 s (10 s timeout): a hung
API server is seen within 20 s. /readyz: 200 once the initial lists are in, the API server answers
and every watch is current; otherwise 503, while /metrics keeps the last good state with
gpuwl_stale 1. Failed watches retry with a backoff growing to 30 s (with jitter). A kubeconfig (or
in-cluster CA) that changes on disk is reloaded within 5 s. /healthz: 503 when serve cannot recover
by itself (its watchdog stalled, an evaluation hangs, or the API server has not answered for
--unhealthy-after). Logs one line per state change on stderr. SIGTERM stops it. The metrics, alerts
and the Helm chart are described in README.md.")]
pub struct Args {
    /// Address and port to serve on (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Where the cluster is (default: $KUBECONFIG, ~/.kube/config, in-cluster service
    /// account); --request-timeout bounds connecting and sending, not the watches' reads.
    #[command(flatten)]
    pub cluster: crate::input::live::ClusterArgs,
    /// Milliseconds of quiet after a change before re-evaluating.
    #[arg(long, value_name = "MS", default_value_t = serve::DEBOUNCE.as_millis() as u64)]
    pub debounce_ms: u64,
    /// Seconds the API server may not answer before /healthz fails, so that a liveness
    /// probe restarts the exporter (0: never; the metrics then stay the last good state).
    #[arg(long, value_name = "SECONDS", default_value_t = serve::UNHEALTHY_AFTER.as_secs())]
    pub unhealthy_after: u64,
}

/// Runs `gpuwl serve` until SIGTERM/SIGINT.
///
/// Errors: as [`serve::serve`].
pub fn run(args: &Args) -> Result<ExitStatus> {
    let opts = serve::Options {
        listen: args.listen,
        cluster: args.cluster.clone(),
        debounce: Duration::from_millis(args.debounce_ms),
        unhealthy_after: (args.unhealthy_after > 0)
            .then(|| Duration::from_secs(args.unhealthy_after)),
    };
    let rt = crate::cli::runtime()?;
    let result = rt.block_on(serve::serve(&opts));
    // A probe or list still in flight does not hold the exit up.
    rt.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| ExitStatus::Ok)
}
