//! The exporter's metrics, kept in a `prometheus-client` registry and encoded by it as
//! OpenMetrics text, or rewritten as the classic text format ([`classic`]) for clients that
//! do not ask for OpenMetrics ([`Format::negotiate`]).
//!
//! Names follow kube-state-metrics (`<prefix>_<object>_<what>`, `_info` gauges of 1,
//! `_total` counters), one metric per quantity (the five pool quantities are five metrics).
//! Label values are identifiers the API server validated (node and resource names) or come
//! from closed sets (codes, severities, workload configs, pool origins, label states) —
//! never free text such as a node's label values. The table of metrics is in docs/guide/serve.md
//! ("gpuwl serve").

use std::sync::RwLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use gpuwl_core::analysis::exporter::Evaluation;
use gpuwl_core::analysis::kueue::QuotaCause;

/// `{node}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NodeLabels {
    /// Node name.
    pub node: String,
}

/// `{node, code, severity}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FindingLabels {
    /// Node name.
    pub node: String,
    /// Finding code, e.g. `invalid-label-value`.
    pub code: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
}

/// `{node, label_state, effective, source}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WorkloadLabels {
    /// Node name.
    pub node: String,
    /// `valid`, `invalid` or `absent`: the workload-config label's state (its value is
    /// free text and not exported; `gpuwl check` shows it).
    pub label_state: &'static str,
    /// The workload config the operator applies.
    pub effective: &'static str,
    /// Which source decided it.
    pub source: &'static str,
}

/// `{pool, origin, resource}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PoolLabels {
    /// The pool's workload config: `container`, `vm-passthrough`, `vm-vgpu`.
    pub pool: &'static str,
    /// `known`, `default-no-label` or `default-invalid-label`.
    pub origin: &'static str,
    /// Resource name.
    pub resource: String,
}

/// `{node, resource}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NodeResourceLabels {
    /// Node name.
    pub node: String,
    /// Resource name.
    pub resource: String,
}

/// `{node, from, to}` of a workload-label change.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RelabelLabels {
    /// Node name.
    pub node: String,
    /// The label's value before (`absent` when there was none).
    pub from: String,
    /// After (`absent` when removed).
    pub to: String,
}

/// `{resource}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResourceLabels {
    /// Resource name (or, for watch errors, the watched resource: `nodes`, `pods`, …).
    pub resource: String,
}

/// `{class, cause}` of a pending GPU pod's verdict.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PendingLabels {
    /// The class ([`gpuwl_core::analysis::verdict::PodClass`]): `demand`, `blocked`, `gated`,
    /// `other-resource`, `unservable`, `invalid-spec`.
    pub class: &'static str,
    /// explain's cause code (`none` on the 0 series of a class without pods).
    pub cause: &'static str,
}

/// `{resource, code}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KubevirtLabels {
    /// Resource name.
    pub resource: String,
    /// KubeVirt finding code, e.g. `advertised-not-permitted`.
    pub code: String,
}

/// `{object, code, severity}` of a quota-layer finding.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QuotaLabels {
    /// The Kueue object, `ClusterQueue/<name>` or `ResourceFlavor/<name>`.
    pub object: String,
    /// Finding code, e.g. `kueue-quota-not-advertised`.
    pub code: String,
    /// Its severity.
    pub severity: String,
}

/// `{cluster_queue, flavor, resource}`: one row of the quota layer.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QueueFlavorLabels {
    /// The Kueue ClusterQueue.
    pub cluster_queue: String,
    /// The ResourceFlavor.
    pub flavor: String,
    /// The GPU resource name.
    pub resource: String,
}

/// `{cluster_queue, cause}`: waiting Kueue workloads by explain's quota cause.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QueueCauseLabels {
    /// The Kueue ClusterQueue (`none` when the workload's LocalQueue or its ClusterQueue
    /// does not exist).
    pub cluster_queue: String,
    /// The quota cause, e.g. `kueue-quota-exhausted`.
    pub cause: &'static str,
}

/// The quota series per ClusterQueue × flavor × GPU name, in exposition order: nominal
/// quota, borrowing limit (rows that set one), reserved by admitted workloads, units of
/// the name the flavor's nodes advertise.
const QUOTA_SERIES: [(&str, &str); 4] = [
    (
        "gpuwl_kueue_quota_nominal_units",
        "A Kueue ClusterQueue's nominalQuota on the GPU name in the flavor (gpuwl inventory's Kueue table, NOMINAL)",
    ),
    (
        "gpuwl_kueue_quota_borrowing_limit_units",
        "Its borrowingLimit there, for the rows that set one",
    ),
    (
        "gpuwl_kueue_quota_reserved_units",
        "What admitted workloads reserve of it (the ClusterQueue's status.flavorsReservation)",
    ),
    (
        "gpuwl_kueue_quota_advertised_units",
        "Units of the GPU name the flavor's nodes advertise in all: 0 beside a nominal quota above 0 is quota no pod can use (kueue-quota-not-advertised)",
    ),
];

/// `{kind, verdict}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReviewLabels {
    /// `Pod`, `VirtualMachineInstance`, `VirtualMachine` or `other`.
    pub kind: &'static str,
    /// `allowed`, `warned`, `denied`, `skipped` or `invalid`
    /// ([`Verdict`]).
    pub verdict: &'static str,
}

/// `{code}`: an `explain` cause code.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CodeLabels {
    /// The cause code, e.g. `unadvertised-name`.
    pub code: &'static str,
}

/// The cause codes the admission guard reports, so that their series exist at 0.
pub(crate) const ADMISSION_CODES: [&str; 6] = [
    "invalid-spec",
    "not-permitted",
    "unadvertised-name",
    "stale-only",
    "excluded",
    "too-large",
];

/// The admission guard's metrics (registered only with `--admission-listen`).
struct AdmissionMetrics {
    reviews: Family<ReviewLabels, Counter>,
    findings: Family<CodeLabels, Counter>,
    duration: Histogram,
    flagged: Family<CodeLabels, Gauge>,
}

/// `{version}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VersionLabels {
    /// gpuwl's version.
    pub version: String,
}

/// The longest label value exported (characters): a DNS subdomain name's limit, the
/// longest a node or resource name the API server accepts can be.
pub(crate) const MAX_LABEL_VALUE: usize = 253;

/// A name as a label value, bounded: control characters become U+FFFD and the value is
/// cut to [`MAX_LABEL_VALUE`] characters. Names the API server validated pass unchanged;
/// this bounds what it does not validate (a KubeVirt CR's `resourceName`).
/// `prometheus-client` escapes `\`, `"` and newlines in the exposition.
pub fn label_value(name: &str) -> String {
    name.chars()
        .take(MAX_LABEL_VALUE)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// The watched resources, as `gpuwl_watch_errors_total` names them.
pub(crate) const WATCHED: [&str; 5] = [
    "nodes",
    "pods",
    "clusterpolicies",
    "hyperconvergeds",
    "kubevirts",
];

/// The five pool quantities, each its own metric (a sum over one of them is meaningful;
/// over a `kind` label it was not): (metric name, help, index in [`PoolEval::units`]).
///
/// [`PoolEval::units`]: gpuwl_core::analysis::exporter::PoolEval::units
pub(crate) const POOL_METRICS: [(&str, &str); 5] = [
    (
        "gpuwl_pool_capacity_units",
        "GPU units the pool's nodes list in status.capacity, per pool (workload config), origin and resource name",
    ),
    (
        "gpuwl_pool_allocatable_units",
        "GPU units the pool's nodes list in status.allocatable, per pool, origin and resource name",
    ),
    (
        "gpuwl_pool_allocated_units",
        "GPU units requested by pods bound to the pool's nodes, per pool, origin and resource name",
    ),
    (
        "gpuwl_pool_free_units",
        "Allocatable minus allocated GPU units, per pool, origin and resource name",
    ),
    (
        "gpuwl_pool_pending_units",
        "GPU units requested by pending pods this pool could serve (a pod that fits several pools counts in each), per pool, origin and resource name",
    ),
];

/// All metrics of the exporter.
pub struct Metrics {
    registry: Registry,
    /// Held for writing while an evaluation replaces the families, for reading while a
    /// scrape encodes them: a scrape never sees half an evaluation.
    gate: RwLock<()>,
    node_mismatch: Family<NodeLabels, Gauge>,
    node_finding: Family<FindingLabels, Gauge>,
    workload_info: Family<WorkloadLabels, Gauge>,
    pool_units: [Family<PoolLabels, Gauge>; 5],
    unservable: Family<ResourceLabels, Gauge>,
    pending: Family<PendingLabels, Gauge>,
    orphaned: Family<NodeResourceLabels, Gauge>,
    kubevirt_finding: Family<KubevirtLabels, Gauge>,
    kueue_finding: Family<QuotaLabels, Gauge>,
    kueue_quota: [Family<QueueFlavorLabels, Gauge<f64, AtomicU64>>; 4],
    kueue_pending: Family<QueueCauseLabels, Gauge>,
    last_evaluation: Gauge<f64, AtomicU64>,
    evaluation_seconds: Gauge<f64, AtomicU64>,
    evaluations: Counter,
    watch_errors: Family<ResourceLabels, Counter>,
    api_reachable: Gauge,
    ready: Gauge,
    stale: Gauge,
    last_contact: Gauge<f64, AtomicU64>,
    reloads: Counter,
    relabels: Family<RelabelLabels, Counter>,
    admission: Option<AdmissionMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The two exposition formats `/metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (`application/openmetrics-text; version=1.0.0`), ends `# EOF`.
    OpenMetrics,
    /// Prometheus' classic text format (`text/plain; version=0.0.4`), what `curl` and
    /// `promtool check metrics` get.
    Classic,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` with a higher q-value than every classic alternative
    /// (`text/plain`, `*/*`), else classic (also without an `Accept` header, as the
    /// Prometheus exposition format says for clients that do not negotiate).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let mut best: Option<(f32, Format)> = None;
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let format = match media.as_str() {
                "application/openmetrics-text" => Format::OpenMetrics,
                "text/plain" | "text/*" | "*/*" => Format::Classic,
                _ => continue,
            };
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .and_then(|(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
                best = Some((q, format));
            }
        }
        best.map_or(Format::Classic, |(_, f)| f)
    }

    /// The `Content-Type` of the exposition in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

impl Metrics {
    /// A registry with every metric registered; `gpuwl_build_info` set.
    pub fn new() -> Metrics {
        Metrics::build(false)
    }

    /// As [`Metrics::new`], with the admission guard's metrics.
    pub fn with_admission() -> Metrics {
        Metrics::build(true)
    }

    fn build(admission: bool) -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            gate: RwLock::new(()),
            node_mismatch: Family::default(),
            node_finding: Family::default(),
            workload_info: Family::default(),
            pool_units: Default::default(),
            unservable: Family::default(),
            pending: Family::default(),
            orphaned: Family::default(),
            kubevirt_finding: Family::default(),
            kueue_finding: Family::default(),
            kueue_quota: Default::default(),
            kueue_pending: Family::default(),
            last_evaluation: Gauge::default(),
            evaluation_seconds: Gauge::default(),
            evaluations: Counter::default(),
            watch_errors: Family::default(),
            api_reachable: Gauge::default(),
            ready: Gauge::default(),
            stale: Gauge::default(),
            last_contact: Gauge::default(),
            reloads: Counter::default(),
            relabels: Family::default(),
            admission: None,
        };
        let build_info = Family::<VersionLabels, Gauge>::default();
        build_info
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        register_findings(&mut registry, &m);
        registry.register("gpuwl_build_info", "gpuwl's version", build_info);
        register_health(&mut registry, &m);
        // The counters exist at 0 from the start, so rate() sees the first error.
        for resource in WATCHED {
            let _ = m.watch_errors.get_or_create(&ResourceLabels {
                resource: resource.into(),
            });
        }
        registry.register_collector(Box::new(ProcessCollector));
        m.stale.set(1);
        let admission = admission.then(|| admission_metrics(&mut registry));
        Metrics {
            registry,
            admission,
            ..m
        }
    }
}

/// Registers the families the evaluation fills from the analyses (check, inventory,
/// explain, kubevirt check), in exposition order.
fn register_findings(registry: &mut Registry, m: &Metrics) {
    registry.register(
        "gpuwl_node_mismatch",
        "1 when the node's nvidia.com/gpu.workload.config label disagrees with the GPU resources it advertises (the check's MISMATCH), else 0; labelled nodes only",
        m.node_mismatch.clone(),
    );
    registry.register(
        "gpuwl_node_finding",
        "1 per finding of gpuwl check on a node (code, severity error|warning|info), including the GPU Operator state findings",
        m.node_finding.clone(),
    );
    registry.register(
        "gpuwl_node_workload_config_info",
        "1 per GPU node: its workload-config label's state (valid, invalid, absent), the workload config the GPU Operator applies, and which source decided it (label, cluster-policy, deploy-labels, default)",
        m.workload_info.clone(),
    );
    for ((name, help), family) in POOL_METRICS.iter().zip(&m.pool_units) {
        registry.register(*name, *help, family.clone());
    }
    registry.register(
        "gpuwl_unservable_pods",
        "Pending pods asking for the resource that no pool can serve, whatever is freed (gpuwl inventory's unservable demand)",
        m.unservable.clone(),
    );
    registry.register(
        "gpuwl_pending_gpu_pods",
        "Pending GPU pods by the verdict gpuwl explain gives each (class demand|blocked|gated|other-resource|unservable|invalid-spec, cause = explain's cause code): the same classes inventory shows",
        m.pending.clone(),
    );
    registry.register(
        "gpuwl_orphaned_holder_pods",
        "Bound pods holding the resource on a node that no longer advertises it (not listed, or 0): they keep running but cannot come back there (check's orphaned-holder)",
        m.orphaned.clone(),
    );
    registry.register(
        "gpuwl_kubevirt_finding",
        "1 per finding of gpuwl kubevirt check (permittedHostDevices vs what nodes advertise), when a KubeVirt or HyperConverged CR is known",
        m.kubevirt_finding.clone(),
    );
    registry.register(
        "gpuwl_kueue_finding",
        "1 per finding of the quota layer (gpuwl check's kueue-* codes: a Kueue ClusterQueue's GPU quota against what its flavors' nodes advertise), when Kueue's objects are listed",
        m.kueue_finding.clone(),
    );
    for ((name, help), family) in QUOTA_SERIES.iter().zip(&m.kueue_quota) {
        registry.register(*name, *help, family.clone());
    }
    registry.register(
        "gpuwl_kueue_workloads_pending",
        "Kueue workloads asking a GPU name that are not admitted, per ClusterQueue, by the quota cause gpuwl explain job gives (kueue-quota-exhausted, kueue-name-not-covered, …; every cause present, 0 when none), when Kueue's objects are listed",
        m.kueue_pending.clone(),
    );
}

/// Registers the families of the evaluation loop and the API server's health, in
/// exposition order.
fn register_health(registry: &mut Registry, m: &Metrics) {
    registry.register(
        "gpuwl_last_evaluation_timestamp_seconds",
        "Unix time of the last evaluation (it stays old while the API server is away: nothing is evaluated then)",
        m.last_evaluation.clone(),
    );
    registry.register(
        "gpuwl_last_evaluation_duration_seconds",
        "How long the last evaluation took (the analyses over the whole cluster copy)",
        m.evaluation_seconds.clone(),
    );
    registry.register(
        "gpuwl_evaluations",
        "Evaluations run (one per debounced burst of changes)",
        m.evaluations.clone(),
    );
    registry.register(
        "gpuwl_watch_errors",
        "Errors of the watches (API errors, failed list or watch restarts), per watched resource",
        m.watch_errors.clone(),
    );
    registry.register(
        "gpuwl_api_reachable",
        "1 while the API server answers the watchdog's GET /version (every 10 s, 10 s timeout), 0 while it does not",
        m.api_reachable.clone(),
    );
    registry.register(
        "gpuwl_ready",
        "1 once the initial node and pod lists are in and evaluated, the API server is reachable and every watch is current (what /readyz answers)",
        m.ready.clone(),
    );
    registry.register(
        "gpuwl_stale",
        "1 while the other gpuwl metrics show the last good state rather than the cluster now (API server unreachable, a watch failing or re-listing), else 0",
        m.stale.clone(),
    );
    registry.register(
        "gpuwl_api_last_contact_timestamp_seconds",
        "Unix time the API server last answered the watchdog (0 before the first answer)",
        m.last_contact.clone(),
    );
    registry.register(
        "gpuwl_workload_label_changes",
        "Changes of a node's nvidia.com/gpu.workload.config label seen by this exporter (from, to: the values, `absent` for none); each is also a Kubernetes Event on the node (reason WorkloadLabelChanged)",
        m.relabels.clone(),
    );
    registry.register(
        "gpuwl_client_reloads",
        "Times the API client was rebuilt because the kubeconfig or the in-cluster credentials changed on disk",
        m.reloads.clone(),
    );
}

/// The admission guard's metrics, registered; the per-code series exist at 0 from the start.
fn admission_metrics(registry: &mut Registry) -> AdmissionMetrics {
    let a = AdmissionMetrics {
        reviews: Family::default(),
        findings: Family::default(),
        // 0.25 ms to 5 s: the API server's webhook timeout is at most 5 s here.
        duration: Histogram::new([
            0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0, 5.0,
        ]),
        flagged: Family::default(),
    };
    registry.register(
        "gpuwl_admission_reviews",
        "AdmissionReviews answered, per object kind and verdict (allowed, warned, denied, skipped: not judged, invalid: HTTP 400/413)",
        a.reviews.clone(),
    );
    registry.register(
        "gpuwl_admission_findings",
        "Findings of the admission guard (each a warning, or part of a denial), per explain cause code",
        a.findings.clone(),
    );
    registry.register(
        "gpuwl_admission_review_duration_seconds",
        "Time to answer one AdmissionReview (reading, judging, writing the answer; not the network)",
        a.duration.clone(),
    );
    registry.register(
        "gpuwl_admission_flagged_pods",
        "Non-terminal pods with extended-resource requests that the admission guard would flag now, per cause code: pods admitted while the webhook was down or unreachable (it fails open), in warn mode, or before the cluster changed",
        a.flagged.clone(),
    );
    for code in ADMISSION_CODES {
        let _ = a.findings.get_or_create(&CodeLabels { code });
        let _ = a.flagged.get_or_create(&CodeLabels { code });
    }
    a
}

impl Metrics {
    /// Replaces the evaluated families with `e`, stamped `now` (Unix seconds) and `took`
    /// (seconds the evaluation ran). Families that `e` leaves as `None` (an evaluation that
    /// failed) keep their previous series.
    pub fn update(&self, e: &Evaluation, now: f64, took: f64) {
        let _w = self.gate.write().unwrap_or_else(|p| p.into_inner());
        self.node_mismatch.clear();
        self.node_finding.clear();
        self.workload_info.clear();
        for n in &e.nodes {
            if let Some(m) = n.mismatch {
                self.node_mismatch
                    .get_or_create(&NodeLabels {
                        node: label_value(&n.name),
                    })
                    .set(i64::from(m));
            }
            for (code, severity) in &n.findings {
                self.node_finding
                    .get_or_create(&FindingLabels {
                        node: label_value(&n.name),
                        code: (*code).into(),
                        severity: (*severity).into(),
                    })
                    .set(1);
            }
            if n.in_pool {
                self.workload_info
                    .get_or_create(&WorkloadLabels {
                        node: label_value(&n.name),
                        label_state: n.label_state,
                        effective: n.effective,
                        source: n.source,
                    })
                    .set(1);
            }
        }
        if let Some(pools) = &e.pools {
            for family in &self.pool_units {
                family.clear();
            }
            for p in pools {
                let labels = PoolLabels {
                    pool: p.pool,
                    origin: p.origin,
                    resource: label_value(&p.resource),
                };
                for (family, (_, units)) in self.pool_units.iter().zip(p.units) {
                    family.get_or_create(&labels).set(units);
                }
            }
        }
        if let Some(unservable) = &e.unservable {
            self.unservable.clear();
            for (resource, pods) in unservable {
                self.unservable
                    .get_or_create(&ResourceLabels {
                        resource: label_value(resource),
                    })
                    .set(*pods);
            }
        }
        if let Some(pending) = &e.pending {
            self.pending.clear();
            for ((class, cause), pods) in pending {
                self.pending
                    .get_or_create(&PendingLabels { class, cause })
                    .set(*pods);
            }
        }
        if let Some(orphans) = &e.orphans {
            self.orphaned.clear();
            for (node, resource, pods) in orphans {
                self.orphaned
                    .get_or_create(&NodeResourceLabels {
                        node: label_value(node),
                        resource: label_value(resource),
                    })
                    .set(*pods);
            }
        }
        self.kubevirt_finding.clear();
        for (resource, code) in e.kubevirt.iter().flatten() {
            self.kubevirt_finding
                .get_or_create(&KubevirtLabels {
                    resource: label_value(resource),
                    code: (*code).into(),
                })
                .set(1);
        }
        self.quota_update(e);
        self.kueue_finding.clear();
        for (object, code, severity) in e.quota.iter().flat_map(|q| &q.findings) {
            self.kueue_finding
                .get_or_create(&QuotaLabels {
                    object: label_value(object),
                    code: (*code).into(),
                    severity: (*severity).into(),
                })
                .set(1);
        }
        self.last_evaluation.set(now);
        self.evaluation_seconds.set(took);
        self.evaluations.inc();
    }

    /// Sets the quota layer's series ([`QUOTA_SERIES`], `gpuwl_kueue_workloads_pending`)
    /// from `e.quota`: cleared when Kueue's objects are not listed.
    fn quota_update(&self, e: &Evaluation) {
        for f in &self.kueue_quota {
            f.clear();
        }
        self.kueue_pending.clear();
        let Some(q) = &e.quota else { return };
        for r in &q.usage.rows {
            let labels = QueueFlavorLabels {
                cluster_queue: label_value(&r.cluster_queue),
                flavor: label_value(&r.flavor),
                resource: label_value(&r.resource),
            };
            let units = |m: i64| m as f64 / 1000.0;
            self.kueue_quota[0]
                .get_or_create(&labels)
                .set(units(r.nominal_milli));
            if let Some(b) = r.borrowing_limit_milli {
                self.kueue_quota[1].get_or_create(&labels).set(units(b));
            }
            self.kueue_quota[2]
                .get_or_create(&labels)
                .set(units(r.reserved_milli));
            if let Some(a) = r.advertised {
                self.kueue_quota[3].get_or_create(&labels).set(a as f64);
            }
        }
        let queues: std::collections::BTreeSet<&str> = q
            .usage
            .rows
            .iter()
            .map(|r| r.cluster_queue.as_str())
            .collect();
        for cq in queues {
            for cause in QuotaCause::WAITING {
                self.kueue_pending
                    .get_or_create(&QueueCauseLabels {
                        cluster_queue: label_value(cq),
                        cause: cause.as_str(),
                    })
                    .set(0);
            }
        }
        for ((cq, cause), n) in q.usage.pending_by_cause() {
            let cq = if cq.is_empty() { "none".to_owned() } else { cq };
            self.kueue_pending
                .get_or_create(&QueueCauseLabels {
                    cluster_queue: label_value(&cq),
                    cause,
                })
                .set(n);
        }
    }

    /// Counts one error of the watch on `resource` (`nodes`, `pods`, `clusterpolicies`, …).
    pub fn watch_error(&self, resource: &str) {
        self.watch_errors
            .get_or_create(&ResourceLabels {
                resource: resource.into(),
            })
            .inc();
    }

    /// Counts one change of `node`'s workload label (`gpuwl_workload_label_changes_total`).
    pub fn relabelled(&self, node: &str, from: &str, to: &str) {
        self.relabels
            .get_or_create(&RelabelLabels {
                node: label_value(node),
                from: label_value(from),
                to: label_value(to),
            })
            .inc();
    }

    /// Sets `gpuwl_api_reachable`, `gpuwl_ready` and `gpuwl_stale`.
    pub fn set_status(&self, reachable: bool, ready: bool, stale: bool) {
        self.api_reachable.set(i64::from(reachable));
        self.ready.set(i64::from(ready));
        self.stale.set(i64::from(stale));
    }

    /// Sets `gpuwl_api_last_contact_timestamp_seconds` (Unix seconds).
    pub fn contact(&self, now: f64) {
        self.last_contact.set(now);
    }

    /// Counts one answered AdmissionReview: its kind, verdict, findings' codes and the time
    /// it took. Nothing without the admission metrics.
    pub fn admission_review(
        &self,
        kind: &'static str,
        verdict: Verdict,
        codes: &[&'static str],
        took: std::time::Duration,
    ) {
        let Some(a) = &self.admission else {
            return;
        };
        a.reviews
            .get_or_create(&ReviewLabels {
                kind,
                verdict: verdict.as_str(),
            })
            .inc();
        for code in codes {
            a.findings.get_or_create(&CodeLabels { code }).inc();
        }
        a.duration.observe(took.as_secs_f64());
    }

    /// Replaces `gpuwl_admission_flagged_pods` with `counts` (code → pods); every code of
    /// [`ADMISSION_CODES`] keeps a series (0 when absent).
    pub fn admission_flagged(&self, counts: &std::collections::BTreeMap<&'static str, i64>) {
        let Some(a) = &self.admission else {
            return;
        };
        let _w = self.gate.write().unwrap_or_else(|p| p.into_inner());
        a.flagged.clear();
        for code in ADMISSION_CODES {
            a.flagged
                .get_or_create(&CodeLabels { code })
                .set(counts.get(code).copied().unwrap_or(0));
        }
        for (code, n) in counts {
            a.flagged.get_or_create(&CodeLabels { code }).set(*n);
        }
    }

    /// Counts one client rebuild (`gpuwl_client_reloads_total`).
    pub fn reloaded(&self) {
        self.reloads.inc();
    }

    /// The exposition in `format`.
    pub fn encode(&self, format: Format) -> String {
        let _r = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        match format {
            Format::OpenMetrics => out,
            Format::Classic => classic(&out),
        }
    }
}

/// Rewrites `prometheus-client`'s OpenMetrics text as the classic text format: a counter
/// family's `# HELP` / `# TYPE` name the sample (`…_total`), `unknown` becomes `untyped`,
/// `# UNIT` and `# EOF` go. Sample lines are the same in both formats for the gauges and
/// counters exported here (no exemplars, no timestamps, no info/stateset types).
pub fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(if prefix == "# TYPE " && tail == "unknown" {
                    "untyped"
                } else {
                    tail
                });
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The standard `process_*` metrics of the Prometheus client libraries (CPU seconds,
/// resident and virtual memory, open and maximum file descriptors, start time), read from
/// `/proc/self` on each scrape (procfs crate; the names and meanings follow
/// prometheus/client_golang `prometheus/process_collector.go`). Elsewhere than on Linux
/// nothing is exported.
#[derive(Debug)]
struct ProcessCollector;

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(
        &self,
        #[allow(unused_mut, unused_variables)]
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        #[cfg(target_os = "linux")]
        {
            use prometheus_client::encoding::EncodeMetric;
            use prometheus_client::metrics::counter::ConstCounter;
            use prometheus_client::metrics::gauge::ConstGauge;
            let Ok(me) = procfs::process::Process::myself() else {
                return Ok(());
            };
            let gauge = |encoder: &mut prometheus_client::encoding::DescriptorEncoder,
                         name: &str,
                         help: &str,
                         v: f64|
             -> Result<(), std::fmt::Error> {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
            };
            if let Ok(stat) = me.stat() {
                let ticks = procfs::ticks_per_second().max(1) as f64;
                let c = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
                c.encode(encoder.encode_descriptor(
                    "process_cpu_seconds",
                    "Total user and system CPU time spent in seconds",
                    None,
                    c.metric_type(),
                )?)?;
                gauge(
                    &mut encoder,
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes",
                    (stat.rss.saturating_mul(procfs::page_size())) as f64,
                )?;
                gauge(
                    &mut encoder,
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes",
                    stat.vsize as f64,
                )?;
                if let Ok(boot) = procfs::boot_time_secs() {
                    gauge(
                        &mut encoder,
                        "process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds",
                        boot as f64 + stat.starttime as f64 / ticks,
                    )?;
                }
            }
            if let Ok(fds) = me.fd_count() {
                gauge(
                    &mut encoder,
                    "process_open_fds",
                    "Number of open file descriptors",
                    fds as f64,
                )?;
            }
            if let Ok(limits) = me.limits()
                && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
            {
                gauge(
                    &mut encoder,
                    "process_max_fds",
                    "Maximum number of open file descriptors",
                    max as f64,
                )?;
            }
        }
        Ok(())
    }
}

/// How one review ended, as `gpuwl_admission_reviews_total{verdict}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Judged, nothing found.
    Allowed,
    /// Judged, admitted with warnings.
    Warned,
    /// Judged, denied (enforce mode).
    Denied,
    /// Not judged: another kind or operation, an unchanged spec, an unreadable object, or
    /// the initial lists not in yet.
    Skipped,
    /// Not an AdmissionReview (HTTP 400 or 413).
    Invalid,
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuwl_core::analysis::exporter::{NodeEval, PoolEval};

    fn eval(mismatch: bool, unservable: i64) -> Evaluation {
        Evaluation {
            nodes: vec![NodeEval {
                name: "lab-node-1".into(),
                label_state: "invalid",
                effective: "container",
                source: "default",
                mismatch: Some(mismatch),
                in_pool: true,
                findings: vec![("invalid-label-value", "error")],
            }],
            pools: Some(vec![PoolEval {
                pool: "container",
                origin: "known",
                resource: "nvidia.com/gpu".into(),
                units: [
                    ("capacity", 4),
                    ("allocatable", 4),
                    ("allocated", 1),
                    ("free", 3),
                    ("pending", 0),
                ],
            }]),
            unservable: Some([("nvidia.com/gpu".to_owned(), unservable)].into()),
            pending: Some([(("unservable", "unadvertised-name"), unservable)].into()),
            orphans: Some(vec![(
                "lab-node-1".into(),
                "nvidia.com/GA102GL_A10".into(),
                2,
            )]),
            kubevirt: None,
            quota: None,
            problems: Vec::new(),
        }
    }

    #[test]
    fn the_exposition_has_the_documented_names() {
        let m = Metrics::new();
        m.update(&eval(true, 1), 1_700_000_000.0, 0.25);
        m.watch_error("nodes");
        m.set_status(false, false, true);
        let text = m.encode(Format::OpenMetrics);
        for line in [
            "gpuwl_node_mismatch{node=\"lab-node-1\"} 1",
            "gpuwl_node_finding{node=\"lab-node-1\",code=\"invalid-label-value\",severity=\"error\"} 1",
            "gpuwl_node_workload_config_info{node=\"lab-node-1\",label_state=\"invalid\",effective=\"container\",source=\"default\"} 1",
            "gpuwl_pool_capacity_units{pool=\"container\",origin=\"known\",resource=\"nvidia.com/gpu\"} 4",
            "gpuwl_pool_allocatable_units{pool=\"container\",origin=\"known\",resource=\"nvidia.com/gpu\"} 4",
            "gpuwl_pool_allocated_units{pool=\"container\",origin=\"known\",resource=\"nvidia.com/gpu\"} 1",
            "gpuwl_pool_free_units{pool=\"container\",origin=\"known\",resource=\"nvidia.com/gpu\"} 3",
            "gpuwl_pool_pending_units{pool=\"container\",origin=\"known\",resource=\"nvidia.com/gpu\"} 0",
            "gpuwl_unservable_pods{resource=\"nvidia.com/gpu\"} 1",
            "gpuwl_orphaned_holder_pods{node=\"lab-node-1\",resource=\"nvidia.com/GA102GL_A10\"} 2",
            "gpuwl_build_info{version=\"0.1.0\"} 1",
            "gpuwl_watch_errors_total{resource=\"nodes\"} 1",
            "gpuwl_watch_errors_total{resource=\"pods\"} 0",
            "gpuwl_api_reachable 0",
            "gpuwl_ready 0",
            "gpuwl_stale 1",
            "gpuwl_client_reloads_total 0",
            "gpuwl_last_evaluation_timestamp_seconds 1700000000.0",
            "gpuwl_last_evaluation_duration_seconds 0.25",
            "gpuwl_evaluations_total 1",
            "# EOF",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn an_update_replaces_the_series_and_a_failed_inventory_keeps_the_last_rows() {
        let m = Metrics::new();
        m.update(&eval(true, 1), 1.0, 0.0);
        let mut next = eval(false, 0);
        next.nodes[0].findings.clear();
        m.update(&next, 2.0, 0.0);
        let text = m.encode(Format::OpenMetrics);
        assert!(text.contains("gpuwl_node_mismatch{node=\"lab-node-1\"} 0\n"));
        assert!(!text.contains("gpuwl_node_finding{"), "{text}");
        assert!(text.contains("gpuwl_unservable_pods{resource=\"nvidia.com/gpu\"} 0\n"));
        let mut failed = eval(false, 0);
        failed.pools = None;
        failed.unservable = None;
        m.update(&failed, 3.0, 0.0);
        let text = m.encode(Format::OpenMetrics);
        assert!(
            text.contains(
                "gpuwl_pool_capacity_units{pool=\"container\",origin=\"known\",resource=\"nvidia.com/gpu\"} 4\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn accept_picks_the_format() {
        use Format::*;
        // Prometheus 3's default scrape_protocols header.
        let prom = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(prom)), OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4")), Classic);
        assert_eq!(Format::negotiate(Some("*/*")), Classic);
        assert_eq!(Format::negotiate(None), Classic);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text")),
            OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.5")),
            Classic
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0, text/plain")),
            Classic
        );
        assert_eq!(Format::negotiate(Some("application/json")), Classic);
    }

    #[test]
    fn the_classic_format_names_counters_by_their_samples_and_has_no_eof() {
        let m = Metrics::new();
        m.update(&eval(true, 1), 1_700_000_000.0, 0.25);
        let text = m.encode(Format::Classic);
        assert!(!text.contains("# EOF"), "{text}");
        assert!(!text.contains("# UNIT"), "{text}");
        for line in [
            "# HELP gpuwl_evaluations_total Evaluations run (one per debounced burst of changes).",
            "# TYPE gpuwl_evaluations_total counter",
            "gpuwl_evaluations_total 1",
            "# TYPE gpuwl_watch_errors_total counter",
            "# TYPE gpuwl_node_mismatch gauge",
            "gpuwl_node_mismatch{node=\"lab-node-1\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Every sample's family has a HELP and a TYPE under the sample's own name (or its
        // name without a `_total` / `_info` … suffix for the other types): what
        // `promtool check metrics` asks.
        let typed: std::collections::HashSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        for sample in text.lines().filter(|l| !l.starts_with('#')) {
            let name = sample.split(['{', ' ']).next().unwrap();
            assert!(typed.contains(name), "{name} has no TYPE in\n{text}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_exported() {
        let text = Metrics::new().encode(Format::Classic);
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            let v: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
                .parse()
                .unwrap();
            assert!(v >= 0.0, "{name} {v}");
            if name != "process_cpu_seconds_total" {
                assert!(v > 0.0, "{name} {v}");
            }
        }
    }

    /// The lab's quota layer (tests/data/kueue/kueue.yaml on the lab's three nodes) with a
    /// Job asking the passthrough name: the rows' series, and every waiting cause of
    /// lab-gpus with the one Job under kueue-name-not-covered.
    #[test]
    fn the_quota_layer_series_per_queue_flavor_and_cause() {
        use gpuwl_core::analysis::kueue_usage::{PendingWorkload, QuotaInventory, QuotaRow};
        let row = |flavor: &str, nominal: i64, reserved: i64, advertised: i64| QuotaRow {
            cluster_queue: "lab-gpus".into(),
            cohort: None,
            flavor: flavor.into(),
            resource: "nvidia.com/gpu".into(),
            nominal_milli: nominal,
            borrowing_limit_milli: (flavor == "container").then_some(500),
            reserved_milli: reserved,
            admitted: Vec::new(),
            pending: Vec::new(),
            nodes: Some(1),
            advertised: Some(advertised),
            offered: Default::default(),
        };
        let mut e = eval(false, 0);
        e.quota = Some(gpuwl_core::analysis::exporter::QuotaEval {
            findings: vec![(
                "ClusterQueue/lab-gpus".into(),
                "kueue-quota-not-advertised",
                "error",
            )],
            usage: QuotaInventory {
                flavors: 3,
                cluster_queues: 1,
                admitted_workloads: 1,
                rows: vec![
                    row("container", 4000, 1000, 4),
                    row("vm-passthrough", 2000, 0, 0),
                ],
                unplaced: vec![PendingWorkload {
                    workload: "gpu-kueue/job-kueue-passthrough".into(),
                    owner: Some("Job/kueue-passthrough".into()),
                    cause: QuotaCause::NameNotCovered,
                    cluster_queue: Some("lab-gpus".into()),
                    requests_milli: Default::default(),
                    message: String::new(),
                }],
            },
        });
        let m = Metrics::new();
        m.update(&e, 1.0, 0.0);
        let text = m.encode(Format::OpenMetrics);
        let q = "cluster_queue=\"lab-gpus\",flavor=\"container\",resource=\"nvidia.com/gpu\"";
        let p = "cluster_queue=\"lab-gpus\",flavor=\"vm-passthrough\",resource=\"nvidia.com/gpu\"";
        for line in [
            format!("gpuwl_kueue_quota_nominal_units{{{q}}} 4.0"),
            format!("gpuwl_kueue_quota_borrowing_limit_units{{{q}}} 0.5"),
            format!("gpuwl_kueue_quota_reserved_units{{{q}}} 1.0"),
            format!("gpuwl_kueue_quota_advertised_units{{{q}}} 4.0"),
            format!("gpuwl_kueue_quota_nominal_units{{{p}}} 2.0"),
            format!("gpuwl_kueue_quota_advertised_units{{{p}}} 0.0"),
            "gpuwl_kueue_workloads_pending{cluster_queue=\"lab-gpus\",cause=\"kueue-name-not-covered\"} 1".to_owned(),
            "gpuwl_kueue_workloads_pending{cluster_queue=\"lab-gpus\",cause=\"kueue-quota-exhausted\"} 0".to_owned(),
            "gpuwl_kueue_finding{object=\"ClusterQueue/lab-gpus\",code=\"kueue-quota-not-advertised\",severity=\"error\"} 1".to_owned(),
        ] {
            assert!(text.contains(&format!("{line}\n")), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains(&format!("gpuwl_kueue_quota_borrowing_limit_units{{{p}}}")));
        assert_eq!(text.matches("gpuwl_kueue_workloads_pending{").count(), 6);
        // Kueue gone: the series go with it.
        m.update(&eval(false, 0), 2.0, 0.0);
        let text = m.encode(Format::OpenMetrics);
        assert!(!text.contains("gpuwl_kueue_quota_nominal_units{"), "{text}");
        assert!(!text.contains("gpuwl_kueue_workloads_pending{"), "{text}");
    }

    #[test]
    fn label_values_are_bounded_and_escaped() {
        let m = Metrics::new();
        let mut e = eval(false, 0);
        e.kubevirt = Some(vec![(
            format!("nvidia.com/A10\"}} 1\n\u{1b}[31m{}", "x".repeat(400)),
            "permitted-not-advertised",
        )]);
        m.update(&e, 1.0, 0.0);
        let text = m.encode(Format::Classic);
        let line = text
            .lines()
            .find(|l| l.starts_with("gpuwl_kubevirt_finding{"))
            .unwrap();
        assert!(
            line.starts_with(
                "gpuwl_kubevirt_finding{resource=\"nvidia.com/A10\\\"} 1\u{fffd}\u{fffd}[31m"
            ),
            "{line}"
        );
        assert!(
            line.ends_with("\",code=\"permitted-not-advertised\"} 1"),
            "{line}"
        );
        assert!(line.len() < MAX_LABEL_VALUE + 80, "{line}");
        assert!(!text.contains('\u{1b}'));
    }
}
