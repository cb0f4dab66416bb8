//! `gpuwl triage`: one report from a GPU Operator must-gather bundle
//! ([`crate::input::mustgather`]): the checker's findings on the described nodes, the
//! operator's state per node, operand DaemonSets not fully ready and why, pending GPU pods
//! with explain's cause, and what the bundle lacks.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::check::{Checker, Options, Severity, Verdict};
use crate::input::mustgather::{Bundle, ContainerState, LogTail};
use crate::model::finding::Code;
use crate::model::node::NodeInfo;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;

/// The operator-state finding codes (the GPU Operator's own state on a node; see
/// [`crate::model::operator::STATE_RULES`]).
pub const OPERATOR_STATE_CODES: [Code; 8] = [
    Code::VgpuConfigFailed,
    Code::MigConfigFailed,
    Code::ConfigPending,
    Code::OperandPaused,
    Code::OperandsDisabled,
    Code::LabelIgnored,
    Code::VgpuConfigTypeDiffers,
    Code::GpuPresentWithoutOperands,
];

/// One finding on a node.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFinding {
    /// Stable code, as `check -o json`.
    pub code: Code,
    /// Severity.
    pub severity: Severity,
    /// One line.
    pub message: String,
}

/// The operator's state on one described node.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    /// Node name.
    pub node: String,
    /// The workload the operator applies (`container`, `vm-passthrough`, `vm-vgpu`).
    pub workload: String,
    /// Where it comes from (`label`, `cluster-policy`, `deploy-labels`, `default`).
    pub workload_source: String,
    /// The `nvidia.com/` resources it advertises (allocatable, else capacity).
    pub gpu_resources: BTreeMap<String, String>,
    /// The `nvidia.com/` requests of its `Allocated resources` table.
    pub allocated: BTreeMap<String, String>,
    /// Operator-state findings ([`OPERATOR_STATE_CODES`]).
    pub findings: Vec<NodeFinding>,
}

/// The checker's verdict on the described nodes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckPart {
    /// The `check` text contract: `MISMATCH=<node> <reason>` lines, or `OK=<n>`.
    pub lines: Vec<String>,
    /// Nodes carrying the workload-config label.
    pub labelled: usize,
    /// Mismatching nodes.
    pub mismatched: usize,
    /// Other findings (not operator state), `node: code: message`, errors first.
    pub findings: Vec<String>,
}

/// One operand pod of a DaemonSet that is not fully ready.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReport {
    /// Pod name.
    pub name: String,
    /// Node, when bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `status.phase`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Whether it is Ready.
    pub ready: bool,
    /// Restarts over all containers.
    pub restarts: u64,
    /// Containers (init first).
    pub containers: Vec<ContainerState>,
    /// The end of its log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogTail>,
    /// The end of its previous container's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_log: Option<LogTail>,
}

/// An operand DaemonSet that is not fully ready.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetReport {
    /// Name.
    pub name: String,
    /// `desiredNumberScheduled`.
    pub desired: u64,
    /// `numberReady`.
    pub ready: u64,
    /// `numberAvailable`.
    pub available: u64,
    /// `numberMisscheduled`.
    pub misscheduled: u64,
    /// Why, one line each.
    pub why: Vec<String>,
    /// Its pods that are not ready.
    pub pods: Vec<PodReport>,
}

/// A pending pod that requests GPUs, with explain's diagnosis.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// Explain's stable cause code.
    pub cause_code: String,
    /// Explain's cause.
    pub cause: String,
    /// Explain's fix.
    pub fix: String,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Triage {
    /// The bundle as named.
    pub bundle: String,
    /// The operator's namespace (of the operand pods or DaemonSets), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_namespace: Option<String>,
    /// Nodes described in `gpu_nodes.descr`.
    pub nodes_described: usize,
    /// The ClusterPolicy the nodes were judged under, or why there is none.
    pub cluster_policy: PolicyStatus,
    /// The checker's verdict.
    pub check: CheckPart,
    /// Per described node, by name.
    pub operator_state: Vec<NodeState>,
    /// Operand DaemonSets in the bundle.
    pub daemonsets_total: usize,
    /// Those not fully ready.
    pub daemonsets_not_ready: Vec<DaemonSetReport>,
    /// Pending pods requesting GPUs (operand pods, and `--pods` when given).
    pub pending_gpu_pods: Vec<PendingPod>,
    /// The end of the operator's own log, when it has error lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_log: Option<LogTail>,
    /// What the bundle lacks, one line each.
    pub lacking: Vec<String>,
    /// Files that are there but did not read, one line each.
    pub problems: Vec<String>,
}

impl Triage {
    /// Whether the report found a problem: a mismatch, a DaemonSet not fully ready, or a
    /// pending GPU pod (exit 1).
    pub fn found_problems(&self) -> bool {
        self.check.mismatched > 0
            || !self.daemonsets_not_ready.is_empty()
            || !self.pending_gpu_pods.is_empty()
    }
}

/// A bound placeholder pod holding a node's `Allocated resources` requests, so explain
/// sees the units in use on it (the bundle lacks the workload pods).
fn allocated_pod(node: &str, allocated: &BTreeMap<String, String>) -> Option<PodInfo> {
    if allocated.is_empty() {
        return None;
    }
    let v = serde_json::json!({
        "kind": "Pod",
        "metadata": {"name": format!("allocated-on-{node}"), "namespace": "(describe)"},
        "spec": {"nodeName": node, "containers": [{"name": "allocated", "resources": {"requests": allocated}}]},
        "status": {"phase": "Running"}
    });
    crate::input::pods::from_object(&v).ok()
}

/// Whether `pod` waits for a node and asks for GPUs (an `nvidia.com/` request or DRA claims).
fn pending_gpu(pod: &PodInfo) -> bool {
    pod.is_unbound()
        && !pod.is_terminal()
        && (pod.requests.keys().any(|k| k.starts_with("nvidia.com/"))
            || !pod.resource_claims.is_empty())
}

/// Builds the report from `bundle`; `extra_pods` (from `--pods`) adds workload pods the
/// bundle does not hold.
pub fn build(bundle: &Bundle, extra_pods: Option<&[PodInfo]>) -> Triage {
    let f = |name: &str| bundle.files.contains(name);
    let policy = match &bundle.policy {
        Some(p) => p.clone(),
        None if f("cluster_policy.missing") => crate::input::clusterpolicy::none(
            "no-object",
            Some("the bundle marks the ClusterPolicy missing (cluster_policy.missing)".into()),
        ),
        None => PolicyStatus::not_read(),
    };
    let nodes: Vec<NodeInfo> = bundle.nodes.iter().map(|d| d.node.clone()).collect();

    // The checker, as `check -o json` runs it.
    let mut checker = Checker::new(&Options {
        ignore_resources: Vec::new(),
        mismatches_only: false,
        cluster_policy: policy.policy().cloned(),
        warning_lines: false,
        dra: None,
        gate: None,
        pods: None,
        expect_gpu_nodes: None,
    });
    for n in &nodes {
        checker.add(n);
    }
    let report = checker.finish();
    let lines = report.seed_lines();
    let mut other = Vec::new();
    let mut state_of: BTreeMap<&str, Vec<NodeFinding>> = BTreeMap::new();
    for n in &report.nodes {
        for fd in &n.findings {
            if OPERATOR_STATE_CODES.contains(&fd.code) {
                state_of.entry(&n.name).or_default().push(NodeFinding {
                    code: fd.code,
                    severity: fd.severity,
                    message: fd.message.clone(),
                });
            } else if fd.severity != Severity::Info && n.verdict != Verdict::Mismatch {
                other.push((
                    fd.severity,
                    format!("{}: {}: {}", n.name, fd.code.as_str(), fd.message),
                ));
            }
        }
    }
    other.sort_by_key(|a| a.0);
    let check = CheckPart {
        lines,
        labelled: report.labelled,
        mismatched: report.mismatches().count(),
        findings: other.into_iter().map(|(_, s)| s).collect(),
    };

    let operator_state = bundle
        .nodes
        .iter()
        .map(|d| {
            let eff = crate::model::operator::effective_workload(&d.node, policy.policy());
            let gpu = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
                m.iter()
                    .filter(|(k, _)| k.starts_with("nvidia.com/"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            NodeState {
                node: d.node.name.clone(),
                workload: eff.workload.to_string(),
                workload_source: eff.source.as_str().to_owned(),
                gpu_resources: gpu(d.node.allocatable.as_ref().unwrap_or(&d.node.capacity)),
                allocated: gpu(&d.allocated),
                findings: state_of.remove(d.node.name.as_str()).unwrap_or_default(),
            }
        })
        .collect();

    // Operand DaemonSets not fully ready, and why.
    let described: BTreeSet<&str> = bundle.nodes.iter().map(|d| d.node.name.as_str()).collect();
    let mut lacking = Vec::new();
    let mut not_ready = Vec::new();
    for ds in &bundle.daemonsets {
        let full = ds.ready >= ds.desired && ds.misscheduled == 0 && ds.available >= ds.desired;
        if full && ds.desired > 0 {
            continue;
        }
        let mut why = Vec::new();
        if ds.desired == 0 {
            let matching = bundle
                .nodes
                .iter()
                .filter(|d| {
                    ds.node_selector
                        .iter()
                        .all(|(k, v)| d.node.label(k) == Some(v.as_str()))
                })
                .count();
            // Nothing scheduled is by design when no described node is meant to run it
            // (its deploy label is off everywhere).
            if ds.node_selector.is_empty() || matching == 0 {
                continue;
            }
            why.push(format!(
                "no pod scheduled although {matching} described nodes match its nodeSelector"
            ));
        }
        if ds.ready < ds.desired {
            why.push(format!("{} of {} pods ready", ds.ready, ds.desired));
        }
        if ds.misscheduled > 0 {
            why.push(format!(
                "{} pods on nodes its nodeSelector no longer matches",
                ds.misscheduled
            ));
        }
        let mut pods = Vec::new();
        for p in bundle.pods.iter().filter(|p| {
            p.daemonset.as_deref() == Some(ds.name.as_str())
                || (p.daemonset.is_none() && p.app.as_deref() == Some(ds.name.as_str()))
        }) {
            if p.ready && p.phase.as_deref() == Some("Running") {
                continue;
            }
            let log = bundle.logs.get(&p.name).cloned();
            if log.is_none() {
                lacking.push(format!(
                    "the log of pod {} (gpu_operand_pod_{}.log)",
                    p.name, p.name
                ));
            } else if log.as_ref().is_some_and(|l| l.bytes == 0) {
                lacking.push(format!(
                    "the log of pod {}: empty (kubectl logs failed when the bundle was made? see must-gather.stderr.log)",
                    p.name
                ));
            }
            let restarts = p.containers.iter().map(|c| c.restarts).sum();
            let waiting: Vec<String> = p
                .containers
                .iter()
                .filter_map(|c| c.reason.as_ref().map(|r| format!("{}: {r}", c.name)))
                .collect();
            if !waiting.is_empty() {
                why.push(format!("pod {}: {}", p.name, waiting.join(", ")));
            } else if p.phase.as_deref() != Some("Running") {
                why.push(format!(
                    "pod {}: {}",
                    p.name,
                    p.phase.as_deref().unwrap_or("no phase")
                ));
            }
            pods.push(PodReport {
                name: p.name.clone(),
                node: p.node.clone(),
                phase: p.phase.clone(),
                ready: p.ready,
                restarts,
                containers: p.containers.clone(),
                log: log.filter(|l| l.bytes > 0),
                previous_log: bundle
                    .previous_logs
                    .get(&p.name)
                    .filter(|l| l.bytes > 0)
                    .cloned(),
            });
        }
        if pods.is_empty() && ds.ready < ds.desired {
            why.push("no pod of it is in gpu_operand_pods.yaml".into());
        }
        not_ready.push(DaemonSetReport {
            name: ds.name.clone(),
            desired: ds.desired,
            ready: ds.ready,
            available: ds.available,
            misscheduled: ds.misscheduled,
            why,
            pods,
        });
    }

    // Pending GPU pods, with explain's cause against the described nodes and their
    // allocations.
    let mut pool: Vec<PodInfo> = bundle
        .nodes
        .iter()
        .filter_map(|d| allocated_pod(&d.node.name, &d.allocated))
        .collect();
    let candidates: Vec<&PodInfo> = bundle
        .pods
        .iter()
        .filter_map(|p| p.info.as_ref())
        .chain(extra_pods.unwrap_or(&[]).iter())
        .filter(|p| pending_gpu(p))
        .collect();
    pool.extend(candidates.iter().map(|p| (*p).clone()));
    let mut pending = Vec::new();
    for pod in candidates {
        let inputs = crate::analysis::explain::Inputs {
            nodes: Some(&nodes),
            pods: Some(&pool),
            kubevirt: None,
            cluster_policy: policy.policy(),
            dra: None,
            // The bundle's operand pods are reported in their own section.
            operand_pods: None,
        };
        let (code, cause, fix) = match crate::analysis::explain::explain(pod, inputs) {
            Ok(e) => (e.cause_code.to_string(), e.cause, e.fix),
            Err(e) => ("not-explained".into(), e.to_string(), String::new()),
        };
        pending.push(PendingPod {
            pod: pod.key(),
            cause_code: code,
            cause,
            fix,
        });
    }

    // What the bundle lacks.
    let mut lack_first = Vec::new();
    for (file, what) in [
        (
            "gpu_nodes.descr",
            "the GPU nodes' descriptions: no node was checked",
        ),
        (
            "gpu_operand_pods.yaml",
            "the operand pods: no pod phases, restarts or pending pods",
        ),
        (
            "gpu_operand_ds.yaml",
            "the operand DaemonSets: readiness not judged",
        ),
        ("gpu_operator_pod.log", "the operator's log"),
    ] {
        if !f(file) {
            lack_first.push(format!("{file}: {what}"));
        }
    }
    if !f("cluster_policy.yaml") && !f("cluster_policy.missing") {
        lack_first
            .push("cluster_policy.yaml: workload configs judged without the ClusterPolicy".into());
    } else if f("cluster_policy.missing") {
        lack_first.push("a ClusterPolicy: the cluster had none (cluster_policy.missing)".into());
    }
    for fatal in &bundle.fatal {
        lack_first.push(format!("everything after the script stopped: {fatal}"));
    }
    let undescribed: Vec<&str> = bundle
        .labelled_nodes
        .iter()
        .map(String::as_str)
        .filter(|n| !described.contains(n))
        .collect();
    if !undescribed.is_empty() {
        lack_first.push(format!(
            "{} nodes with an NVIDIA PCI label (gpu_nodes.labels) that are not described (not labelled nvidia.com/gpu.present=true): {}{}",
            undescribed.len(),
            undescribed.iter().take(10).copied().collect::<Vec<_>>().join(", "),
            if undescribed.len() > 10 { ", …" } else { "" }
        ));
    }
    for d in &bundle.nodes {
        if !d.missing.is_empty() {
            lack_first.push(format!(
                "node {}: its description lacks {} (cut short?)",
                d.node.name,
                d.missing.join(", ")
            ));
        }
    }
    let operator_namespace = bundle
        .pods
        .first()
        .map(|p| p.namespace.clone())
        .filter(|n| !n.is_empty());
    if extra_pods.is_none() {
        lack_first.push(format!(
            "workload pods outside {} (the script collects only that namespace): pending GPU workloads there are not seen; add --pods FILE (kubectl get pods -A -o json)",
            operator_namespace.as_deref().unwrap_or("the operator namespace")
        ));
    }
    lack_first.extend(lacking);
    Triage {
        bundle: bundle.source.clone(),
        operator_namespace,
        nodes_described: bundle.nodes.len(),
        cluster_policy: policy,
        check,
        operator_state,
        daemonsets_total: bundle.daemonsets.len(),
        daemonsets_not_ready: not_ready,
        pending_gpu_pods: pending,
        operator_log: bundle.operator_log.clone().filter(|l| l.errors),
        lacking: lack_first,
        problems: bundle.problems.clone(),
    }
}
