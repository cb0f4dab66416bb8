//! `gpuwl serve`: arguments and entry point.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::input::live::ClusterArgs;
use crate::serve::{self, DEFAULT_LISTEN};
use gpuwl_core::error::{ExitStatus, Result};
use gpuwl_core::text;

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
and the Helm chart are described in docs/guide/serve.md.

Admission guard (--admission-listen): the API server sends it each Pod, VirtualMachineInstance and
VirtualMachine created or updated; it answers from the same watch state, without API calls, with
one warning per finding (kubectl prints `Warning: gpuwl CODE: FIELD: ...`): a GPU name no node
advertises (with explain's did-you-mean), a name only advertised in pools the nodeSelector or
required node affinity excludes, an extended resource in requests without limits or different from
them, a VMI/VM deviceName not in KubeVirt's permittedHostDevices, more units than any node has.
  gpuwl serve --kubeconfig kc --listen 127.0.0.1:9850 \\
      --admission-listen 127.0.0.1:9443 --admission-register
deploy/admission/ holds the in-cluster Service and ValidatingWebhookConfiguration (failurePolicy
Ignore: when the guard is down, objects are admitted, and gpuwl_admission_flagged_pods counts them).
Details: docs/admission.md.")]
pub struct Args {
    /// Address and port to serve on (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Where the cluster is (default: $KUBECONFIG, ~/.kube/config, in-cluster service
    /// account); --request-timeout bounds connecting and sending, not the watches' reads.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Milliseconds of quiet after a change before re-evaluating.
    #[arg(long, value_name = "MS", default_value_t = serve::DEBOUNCE.as_millis() as u64)]
    pub debounce_ms: u64,
    /// Seconds the API server may not answer before /healthz fails, so that a liveness
    /// probe restarts the exporter (0: never; the metrics then stay the last good state).
    #[arg(long, value_name = "SECONDS", default_value_t = serve::UNHEALTHY_AFTER.as_secs())]
    pub unhealthy_after: u64,
    /// Connections open at once on each listener (metrics, admission), TLS handshakes
    /// included; lowered to stay below the open-file limit. Every connection also gets 10 s
    /// for a request's headers (so an idle one is closed after 10 s), 10 s for its body
    /// and 10 s for a stalled write
    #[arg(long, value_name = "N", default_value_t = serve::conn::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Also serve the admission guard (HTTPS, POST /validate) on this address: a validating
    /// webhook for Pods, VirtualMachineInstances and VirtualMachines that warns (or denies,
    /// --admission-mode enforce) when a GPU request can never be served.
    #[arg(long, value_name = "ADDR:PORT", help_heading = "Admission guard")]
    pub admission_listen: Option<SocketAddr>,
    /// warn: admit with one kubectl `Warning:` per finding; enforce: deny when there is one.
    #[arg(
        long,
        value_enum,
        default_value = "warn",
        requires = "admission_listen",
        help_heading = "Admission guard"
    )]
    pub admission_mode: serve::admission::Mode,
    /// A GPU resource a node added by autoscaling (cluster-autoscaler, Karpenter) can
    /// advertise, with the most units one such node has: NAME[=UNITS], repeatable. In
    /// enforce mode an object asking only such resources, within the units, is admitted with
    /// its warning instead of denied when no current node advertises the name or enough
    /// units (scale-from-zero: that pod is what makes the autoscaler add the node)
    #[arg(
        long,
        value_name = "NAME[=UNITS]",
        requires = "admission_listen",
        help_heading = "Admission guard"
    )]
    pub admission_autoscaled: Vec<serve::admission::Autoscaled>,
    /// Serving certificate (PEM chain) for the guard, e.g. a mounted kubernetes.io/tls
    /// Secret's tls.crt (default: a CA and certificate generated at start).
    #[arg(
        long,
        value_name = "FILE",
        requires_all = ["admission_listen", "admission_key"],
        help_heading = "Admission guard"
    )]
    pub admission_cert: Option<PathBuf>,
    /// The serving certificate's private key (PEM), with --admission-cert.
    #[arg(
        long,
        value_name = "FILE",
        requires = "admission_cert",
        help_heading = "Admission guard"
    )]
    pub admission_key: Option<PathBuf>,
    /// Apply a ValidatingWebhookConfiguration for the guard (caBundle filled) on the watched
    /// cluster at start, and delete it on SIGTERM/SIGINT. Needs create/patch/delete on
    /// validatingwebhookconfigurations.
    #[arg(long, requires = "admission_listen", help_heading = "Admission guard")]
    pub admission_register: bool,
    /// The registered configuration's name.
    #[arg(
        long,
        value_name = "NAME",
        default_value = serve::admission::CONFIGURATION_NAME,
        requires = "admission_register",
        help_heading = "Admission guard"
    )]
    pub admission_configuration: String,
    /// How the API server reaches the guard: a Service NAMESPACE/NAME (port 443, path
    /// /validate; its namespace is skipped too), else https://<--admission-listen>/validate
    /// (0.0.0.0 as 127.0.0.1), or --admission-url.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        value_parser = parse_service,
        requires = "admission_listen",
        conflicts_with = "admission_url",
        help_heading = "Admission guard"
    )]
    pub admission_service: Option<(String, String)>,
    /// The URL the API server calls (https://HOST:PORT/validate); its host goes into the
    /// generated certificate.
    #[arg(
        long,
        value_name = "URL",
        requires = "admission_listen",
        help_heading = "Admission guard"
    )]
    pub admission_url: Option<String>,
}

/// `NAMESPACE/NAME` of a Service.
fn parse_service(s: &str) -> std::result::Result<(String, String), String> {
    let dns = |p: &str| {
        !p.is_empty()
            && p.len() <= 63
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    match s.split_once('/') {
        Some((ns, name)) if dns(ns) && dns(name) => Ok((ns.to_owned(), name.to_owned())),
        _ => Err(format!(
            "expected NAMESPACE/NAME of a Service (lower-case DNS labels), got {}",
            text::cut(s)
        )),
    }
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
        max_connections: args.max_connections,
        admission: args.admission_listen.map(|listen| serve::AdmissionOptions {
            listen,
            mode: args.admission_mode,
            autoscaled: args.admission_autoscaled.clone(),
            cert: args.admission_cert.clone().zip(args.admission_key.clone()),
            endpoint: match (&args.admission_service, &args.admission_url) {
                (Some((namespace, name)), _) => Some(serve::Endpoint::Service {
                    namespace: namespace.clone(),
                    name: name.clone(),
                }),
                (None, Some(url)) => Some(serve::Endpoint::Url(url.clone())),
                (None, None) => None,
            },
            register: args
                .admission_register
                .then(|| args.admission_configuration.clone()),
        }),
    };
    let rt = serve::runtime(&opts)?;
    let result = rt.block_on(serve::serve(&opts));
    // A probe or list still in flight does not hold the exit up.
    rt.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| ExitStatus::Ok)
}
