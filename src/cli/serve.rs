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
serves the results on /metrics (OpenMetrics text). /healthz: 200 while running. /readyz: 200 once
the initial lists are in and the API server is reachable; while it is away /metrics keeps the last
good state and gpuwl_api_reachable is 0. Logs one line per API error on stderr. SIGTERM stops it.
The metrics and the deploy/ manifests are described in README.md.")]
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
}

/// Runs `gpuwl serve` until SIGTERM/SIGINT.
///
/// Errors: as [`serve::serve`].
pub fn run(args: &Args) -> Result<ExitStatus> {
    let opts = serve::Options {
        listen: args.listen,
        cluster: args.cluster.clone(),
        debounce: Duration::from_millis(args.debounce_ms),
    };
    let rt = crate::cli::runtime()?;
    let result = rt.block_on(serve::serve(&opts));
    // A probe or list still in flight does not hold the exit up.
    rt.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| ExitStatus::Ok)
}
