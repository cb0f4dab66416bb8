//! The exporter's metrics, kept in a `prometheus-client` registry and encoded by it (the
//! OpenMetrics text format, which Prometheus scrapes as it does its own text format).
//!
//! Names follow kube-state-metrics (`<prefix>_<object>_<what>`, `_info` gauges of 1,
//! `_total` counters); labels are low-cardinality: node names, codes, pool and resource
//! names — never a node's free-form labels. The table of metrics is in README.md
//! ("gpuwl serve").

use std::sync::RwLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::serve::state::Evaluation;

/// `{node}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// Node name.
    pub node: String,
}

/// `{node, code, severity}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FindingLabels {
    /// Node name.
    pub node: String,
    /// Finding code, e.g. `invalid-label-value`.
    pub code: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
}

/// `{node, label, effective, source}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkloadLabels {
    /// Node name.
    pub node: String,
    /// The workload-config label's value verbatim (empty when absent).
    pub label: String,
    /// The workload config the operator applies.
    pub effective: String,
    /// Which source decided it.
    pub source: String,
}

/// `{pool, resource, kind}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// Pool name.
    pub pool: String,
    /// Resource name.
    pub resource: String,
    /// `capacity`, `allocatable`, `allocated`, `free` or `pending`.
    pub kind: String,
}

/// `{resource}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// Resource name (or, for watch errors, the watched resource: `nodes`, `pods`, …).
    pub resource: String,
}

/// `{resource, code}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubevirtLabels {
    /// Resource name.
    pub resource: String,
    /// KubeVirt finding code, e.g. `advertised-not-permitted`.
    pub code: String,
}

/// `{version}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabels {
    /// gpuwl's version.
    pub version: String,
}

/// The watched resources, as `gpuwl_watch_errors_total` names them.
pub const WATCHED: [&str; 5] = [
    "nodes",
    "pods",
    "clusterpolicies",
    "hyperconvergeds",
    "kubevirts",
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
    pool_units: Family<PoolLabels, Gauge>,
    unservable: Family<ResourceLabels, Gauge>,
    kubevirt_finding: Family<KubevirtLabels, Gauge>,
    last_evaluation: Gauge<f64, AtomicU64>,
    evaluation_seconds: Gauge<f64, AtomicU64>,
    evaluations: Counter,
    watch_errors: Family<ResourceLabels, Counter>,
    api_reachable: Gauge,
    ready: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric registered; `gpuwl_build_info` set.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            gate: RwLock::new(()),
            node_mismatch: Family::default(),
            node_finding: Family::default(),
            workload_info: Family::default(),
            pool_units: Family::default(),
            unservable: Family::default(),
            kubevirt_finding: Family::default(),
            last_evaluation: Gauge::default(),
            evaluation_seconds: Gauge::default(),
            evaluations: Counter::default(),
            watch_errors: Family::default(),
            api_reachable: Gauge::default(),
            ready: Gauge::default(),
        };
        let build_info = Family::<VersionLabels, Gauge>::default();
        build_info
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
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
            "1 per GPU node: its workload-config label (empty when absent), the workload config the GPU Operator applies, and which source decided it (label, cluster-policy, deploy-labels, default)",
            m.workload_info.clone(),
        );
        registry.register(
            "gpuwl_pool_units",
            "GPU units per pool (effective workload config) and resource name; kind capacity|allocatable|allocated|free|pending, as gpuwl inventory",
            m.pool_units.clone(),
        );
        registry.register(
            "gpuwl_unservable_pods",
            "Pending pods asking for the resource that no pool can serve, whatever is freed (gpuwl inventory's unservable demand)",
            m.unservable.clone(),
        );
        registry.register(
            "gpuwl_kubevirt_finding",
            "1 per finding of gpuwl kubevirt check (permittedHostDevices vs what nodes advertise), when a KubeVirt or HyperConverged CR is known",
            m.kubevirt_finding.clone(),
        );
        registry.register("gpuwl_build_info", "gpuwl's version", build_info);
        registry.register(
            "gpuwl_last_evaluation_timestamp_seconds",
            "Unix time of the last evaluation (it stays old while the API server is away)",
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
            "1 while the watches reach the API server, 0 while it is away (the other metrics then show the last good state)",
            m.api_reachable.clone(),
        );
        registry.register(
            "gpuwl_ready",
            "1 once the initial node and pod lists are in and evaluated and the API server is reachable (what /readyz answers)",
            m.ready.clone(),
        );
        // The counters exist at 0 from the start, so rate() sees the first error.
        for resource in WATCHED {
            let _ = m.watch_errors.get_or_create(&ResourceLabels {
                resource: resource.into(),
            });
        }
        Metrics { registry, ..m }
    }

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
                        node: n.name.clone(),
                    })
                    .set(i64::from(m));
            }
            for (code, severity) in &n.findings {
                self.node_finding
                    .get_or_create(&FindingLabels {
                        node: n.name.clone(),
                        code: (*code).into(),
                        severity: (*severity).into(),
                    })
                    .set(1);
            }
            if n.in_pool {
                self.workload_info
                    .get_or_create(&WorkloadLabels {
                        node: n.name.clone(),
                        label: n.label.clone().unwrap_or_default(),
                        effective: n.effective.into(),
                        source: n.source.into(),
                    })
                    .set(1);
            }
        }
        if let Some(pools) = &e.pools {
            self.pool_units.clear();
            for p in pools {
                for (kind, units) in p.units {
                    self.pool_units
                        .get_or_create(&PoolLabels {
                            pool: p.pool.clone(),
                            resource: p.resource.clone(),
                            kind: kind.into(),
                        })
                        .set(units);
                }
            }
        }
        if let Some(unservable) = &e.unservable {
            self.unservable.clear();
            for (resource, pods) in unservable {
                self.unservable
                    .get_or_create(&ResourceLabels {
                        resource: resource.clone(),
                    })
                    .set(*pods);
            }
        }
        self.kubevirt_finding.clear();
        for (resource, code) in e.kubevirt.iter().flatten() {
            self.kubevirt_finding
                .get_or_create(&KubevirtLabels {
                    resource: resource.clone(),
                    code: (*code).into(),
                })
                .set(1);
        }
        self.last_evaluation.set(now);
        self.evaluation_seconds.set(took);
        self.evaluations.inc();
    }

    /// Counts one error of the watch on `resource` (`nodes`, `pods`, `clusterpolicies`, …).
    pub fn watch_error(&self, resource: &str) {
        self.watch_errors
            .get_or_create(&ResourceLabels {
                resource: resource.into(),
            })
            .inc();
    }

    /// Sets `gpuwl_api_reachable` and `gpuwl_ready`.
    pub fn set_status(&self, reachable: bool, ready: bool) {
        self.api_reachable.set(i64::from(reachable));
        self.ready.set(i64::from(ready));
    }

    /// The exposition, OpenMetrics text (ends with `# EOF`).
    pub fn encode(&self) -> String {
        let _r = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::state::{NodeEval, PoolEval};

    fn eval(mismatch: bool, unservable: i64) -> Evaluation {
        Evaluation {
            nodes: vec![NodeEval {
                name: "lab-node-1".into(),
                label: Some("vm_passthrough".into()),
                effective: "container",
                source: "default",
                mismatch: Some(mismatch),
                in_pool: true,
                findings: vec![("invalid-label-value", "error")],
            }],
            pools: Some(vec![PoolEval {
                pool: "container".into(),
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
            kubevirt: None,
            problems: Vec::new(),
        }
    }

    #[test]
    fn the_exposition_has_the_documented_names() {
        let m = Metrics::new();
        m.update(&eval(true, 1), 1_700_000_000.0, 0.25);
        m.watch_error("nodes");
        m.set_status(false, false);
        let text = m.encode();
        for line in [
            "gpuwl_node_mismatch{node=\"lab-node-1\"} 1",
            "gpuwl_node_finding{node=\"lab-node-1\",code=\"invalid-label-value\",severity=\"error\"} 1",
            "gpuwl_node_workload_config_info{node=\"lab-node-1\",label=\"vm_passthrough\",effective=\"container\",source=\"default\"} 1",
            "gpuwl_pool_units{pool=\"container\",resource=\"nvidia.com/gpu\",kind=\"free\"} 3",
            "gpuwl_unservable_pods{resource=\"nvidia.com/gpu\"} 1",
            "gpuwl_build_info{version=\"0.1.0\"} 1",
            "gpuwl_watch_errors_total{resource=\"nodes\"} 1",
            "gpuwl_watch_errors_total{resource=\"pods\"} 0",
            "gpuwl_api_reachable 0",
            "gpuwl_ready 0",
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
        let text = m.encode();
        assert!(text.contains("gpuwl_node_mismatch{node=\"lab-node-1\"} 0\n"));
        assert!(!text.contains("gpuwl_node_finding{"), "{text}");
        assert!(text.contains("gpuwl_unservable_pods{resource=\"nvidia.com/gpu\"} 0\n"));
        let mut failed = eval(false, 0);
        failed.pools = None;
        failed.unservable = None;
        m.update(&failed, 3.0, 0.0);
        let text = m.encode();
        assert!(
            text.contains(
                "gpuwl_pool_units{pool=\"container\",resource=\"nvidia.com/gpu\",kind=\"capacity\"} 4\n"
            ),
            "{text}"
        );
    }
}
