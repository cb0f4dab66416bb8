//! `gpuwl triage`: one report from a GPU Operator must-gather bundle
//! ([`crate::decode::mustgather`]): the checker's findings on the described nodes, the
//! operator's state per node, operand DaemonSets not fully ready and why, pending GPU pods
//! with explain's cause, and what the bundle lacks.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::check::{Checker, Options, Severity, Verdict};
use crate::analysis::explain::{self, Inputs};
use crate::analysis::kueue::{QuotaLayer, QuotaReport, QuotaVerdict, judge_workload};
use crate::analysis::verdict::PodClass;
use crate::decode::mustgather::{Bundle, ContainerState, LogTail, OperandDaemonSet, OperandPod};
use crate::decode::virt;
use crate::decode::{clusterpolicy, pods};
use crate::model::finding::Code;
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::kueue::KueueObjects;
use crate::model::node::NodeInfo;
use crate::model::operator::{self, PolicyStatus};
use crate::model::pod::{ObjectKind, PodInfo};

/// The operator-state finding codes (the GPU Operator's own state on a node; see
/// [`crate::model::operator::STATE_RULES`]).
pub(crate) const OPERATOR_STATE_CODES: [Code; 8] = [
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

/// A pending pod that requests GPUs (or a VMI or VM waiting with no virt-launcher pod),
/// with explain's diagnosis and the verdict every command gives it
/// ([`crate::analysis::verdict`]).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// What `pod` names; left out of JSON for a Pod.
    #[serde(skip_serializing_if = "ObjectKind::is_pod")]
    pub kind: ObjectKind,
    /// The verdict's class (`demand`, `unservable`, …), as inventory and serve count it;
    /// `not-judged` when it could not be explained.
    pub class: PodClass,
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
    /// The quota layer, when Kueue's objects were given beside the bundle (`--kueue`: the
    /// GPU Operator's must-gather gathers none) ([`quota_part`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaPart>,
}

/// The quota layer of the bundle's cluster: Kueue's objects judged over the described
/// nodes, as `gpuwl check` and `gpuwl explain job` judge them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaPart {
    /// ResourceFlavors, ClusterQueues, LocalQueues and Workloads read.
    pub objects: [usize; 4],
    /// `check`'s quota findings per Kueue object ([`QuotaLayer::findings`]).
    pub findings: Vec<QuotaReport>,
    /// Every GPU workload Kueue has not admitted (and not finished), with explain's quota
    /// cause ([`judge_workload`] on the flavors' offers over the described nodes), and
    /// every admitted one whose flavor's nodes advertise none of its name.
    pub workloads: Vec<QuotaVerdict>,
}

impl QuotaPart {
    /// Whether it holds an error finding or a workload held for a cause waiting does not
    /// clear, or admitted where its pods cannot run.
    pub fn found_problems(&self) -> bool {
        self.findings
            .iter()
            .flat_map(|r| &r.findings)
            .any(|f| f.severity == Severity::Error)
            || !self.workloads.is_empty()
    }
}

/// The quota layer of `objects` over the bundle's described `nodes` under `policy`
/// ([`QuotaLayer::of_nodes`]): its findings, and the GPU workloads Kueue holds or admitted
/// where they cannot run.
pub fn quota_part(objects: &KueueObjects, nodes: &[NodeInfo], policy: &PolicyStatus) -> QuotaPart {
    use crate::analysis::kueue::QuotaCause;
    let layer = QuotaLayer::of_nodes(objects, nodes, policy.policy());
    let workloads = objects
        .workloads
        .iter()
        .filter(|w| !w.is("Finished"))
        .filter(|w| {
            w.resources()
                .iter()
                .any(|r| crate::model::resource::classify(r).is_gpu())
        })
        .map(|w| judge_workload(w, objects, Some(layer.offers())))
        .filter(|v| v.cause.holds() || v.cause == QuotaCause::FlavorCannotServe)
        .collect();
    QuotaPart {
        objects: [
            objects.flavors.len(),
            objects.cluster_queues.len(),
            objects.local_queues.len(),
            objects.workloads.len(),
        ],
        findings: layer.findings(),
        workloads,
    }
}

impl Triage {
    /// Whether the report found a problem: a mismatch, a DaemonSet not fully ready, or a
    /// pending GPU pod (exit 1).
    pub fn found_problems(&self) -> bool {
        self.check.mismatched > 0
            || !self.daemonsets_not_ready.is_empty()
            || !self.pending_gpu_pods.is_empty()
            || self.quota.as_ref().is_some_and(QuotaPart::found_problems)
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
    pods::from_object(&v).ok()
}

/// Whether `pod` waits for a node and asks for GPUs (an `nvidia.com/` request or DRA claims).
fn pending_gpu(pod: &PodInfo) -> bool {
    pod.is_unbound()
        && !pod.is_terminal()
        && (pod.requests.keys().any(|k| k.starts_with("nvidia.com/"))
            || !pod.resource_claims.is_empty())
}

/// Builds the report from `bundle`; `extra_pods` (from `--pods`) adds workload pods the
/// bundle does not hold, and the VMIs and VMs among them that wait with no virt-launcher
/// pod ([`virt::waits_without_launcher`]); `kubevirt` (from `--kubevirt`) is the KubeVirt
/// CR they are judged under (its `permittedHostDevices` and launcher settings).
pub fn build(
    bundle: &Bundle,
    extra_pods: Option<&[PodInfo]>,
    kubevirt: Option<&PermittedHostDevices>,
) -> Triage {
    let policy = bundle_policy(bundle);
    let nodes: Vec<NodeInfo> = bundle.nodes.iter().map(|d| d.node.clone()).collect();
    let (check, mut state_of) = check_part(&nodes, &policy);
    let operator_state = bundle
        .nodes
        .iter()
        .map(|d| {
            let eff = operator::effective_workload(&d.node, policy.policy());
            NodeState {
                node: d.node.name.clone(),
                workload: eff.workload.to_string(),
                workload_source: eff.source.as_str().to_owned(),
                gpu_resources: gpu_only(d.node.allocatable.as_ref().unwrap_or(&d.node.capacity)),
                allocated: gpu_only(&d.allocated),
                findings: state_of.remove(d.node.name.as_str()).unwrap_or_default(),
            }
        })
        .collect();
    let mut lacking = Vec::new();
    let not_ready = bundle
        .daemonsets
        .iter()
        .filter_map(|ds| daemonset_report(bundle, ds, &mut lacking))
        .collect();
    let pending = pending_pods(bundle, extra_pods, &nodes, &policy, kubevirt);
    let operator_namespace = bundle
        .pods
        .first()
        .map(|p| p.namespace.clone())
        .filter(|n| !n.is_empty());
    let mut lack_first = bundle_lacks(bundle, extra_pods.is_some(), operator_namespace.as_deref());
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
        quota: None,
    }
}

/// The ClusterPolicy of the bundle, else `no-object` when the bundle marks it missing
/// (`cluster_policy.missing`), else `not-read`.
fn bundle_policy(bundle: &Bundle) -> PolicyStatus {
    match &bundle.policy {
        Some(p) => p.clone(),
        None if bundle.files.contains("cluster_policy.missing") => clusterpolicy::none(
            "no-object",
            Some("the bundle marks the ClusterPolicy missing (cluster_policy.missing)".into()),
        ),
        None => PolicyStatus::not_read(),
    }
}

/// The checker's verdict on `nodes` as `check -o json` gives it, and apart from it the
/// operator-state findings ([`OPERATOR_STATE_CODES`]) by node name. The other findings of
/// nodes that are not mismatched (info left out) become one line each, most severe first.
fn check_part(
    nodes: &[NodeInfo],
    policy: &PolicyStatus,
) -> (CheckPart, BTreeMap<String, Vec<NodeFinding>>) {
    let mut checker = Checker::new(&Options {
        ignore_resources: Vec::new(),
        mismatches_only: false,
        cluster_policy: policy.policy().cloned(),
        warning_lines: false,
        dra: None,
        gate: None,
        pods: None,
        expect_gpu_nodes: None,
        kueue: None,
    });
    for n in nodes {
        checker.add(n);
    }
    let report = checker.finish();
    let lines = report.seed_lines();
    let mut other = Vec::new();
    let mut state_of: BTreeMap<String, Vec<NodeFinding>> = BTreeMap::new();
    for n in &report.nodes {
        for fd in &n.findings {
            if OPERATOR_STATE_CODES.contains(&fd.code) {
                state_of
                    .entry(n.name.clone())
                    .or_default()
                    .push(NodeFinding {
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
    (check, state_of)
}

/// The `nvidia.com/` entries of a resource map.
fn gpu_only(m: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    m.iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The report on operand DaemonSet `ds` when it is not fully ready, and why (`None` when it
/// is, or when it has nothing scheduled by design: no described node matches its
/// nodeSelector). Missing or empty logs of its pods are added to `lacking`.
fn daemonset_report(
    bundle: &Bundle,
    ds: &OperandDaemonSet,
    lacking: &mut Vec<String>,
) -> Option<DaemonSetReport> {
    let full = ds.ready >= ds.desired && ds.misscheduled == 0 && ds.available >= ds.desired;
    if full && ds.desired > 0 {
        return None;
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
            return None;
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
        pods.push(operand_pod_report(bundle, p, &mut why, lacking));
    }
    if pods.is_empty() && ds.ready < ds.desired {
        why.push("no pod of it is in gpu_operand_pods.yaml".into());
    }
    Some(DaemonSetReport {
        name: ds.name.clone(),
        desired: ds.desired,
        ready: ds.ready,
        available: ds.available,
        misscheduled: ds.misscheduled,
        why,
        pods,
    })
}

/// The report on operand pod `p` that is not ready and running: its containers and logs.
/// Why it is not (its waiting containers' reasons, else its phase) is added to `why`; a
/// missing or empty log to `lacking`.
fn operand_pod_report(
    bundle: &Bundle,
    p: &OperandPod,
    why: &mut Vec<String>,
    lacking: &mut Vec<String>,
) -> PodReport {
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
    PodReport {
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
    }
}

/// Pending GPU pods (the bundle's operand pods and `extra_pods`, with the VMIs and VMs
/// among these that wait with no launcher), with explain's cause and verdict against the
/// described nodes and their allocations (placeholder pods holding each node's `Allocated
/// resources`) and KubeVirt's CR `kubevirt`.
fn pending_pods(
    bundle: &Bundle,
    extra_pods: Option<&[PodInfo]>,
    nodes: &[NodeInfo],
    policy: &PolicyStatus,
    kubevirt: Option<&PermittedHostDevices>,
) -> Vec<PendingPod> {
    let mut pool: Vec<PodInfo> = bundle
        .nodes
        .iter()
        .filter_map(|d| allocated_pod(&d.node.name, &d.allocated))
        .collect();
    let extra = extra_pods.unwrap_or(&[]);
    let candidates: Vec<&PodInfo> = bundle
        .pods
        .iter()
        .filter_map(|p| p.info.as_ref())
        .chain(extra.iter())
        .filter(|p| pending_gpu(p) && virt::waits_without_launcher(p, extra))
        .collect();
    pool.extend(candidates.iter().map(|p| (*p).clone()));
    // The bundle's operand pods are reported in their own section; it has no DRA objects.
    let inputs = Inputs::of_state(nodes, &pool, policy.policy(), kubevirt);
    let mut pending = Vec::new();
    for pod in candidates {
        let (class, code, cause, fix) = match explain::explain(pod, inputs) {
            Ok(e) => (e.verdict.class, e.cause_code.to_string(), e.cause, e.fix),
            Err(e) => (
                PodClass::NotJudged,
                "not-explained".into(),
                e.to_string(),
                String::new(),
            ),
        };
        pending.push(PendingPod {
            pod: pod.key(),
            kind: pod.kind,
            class,
            cause_code: code,
            cause,
            fix,
        });
    }
    pending
}

/// What the bundle lacks, one line each: the files the script writes that are absent, the
/// ClusterPolicy, what came after a fatal stop, labelled nodes not described, descriptions
/// cut short, and (without `--pods`: `has_extra_pods` false) the workload pods outside the
/// operator's namespace `operator_namespace`.
fn bundle_lacks(
    bundle: &Bundle,
    has_extra_pods: bool,
    operator_namespace: Option<&str>,
) -> Vec<String> {
    let f = |name: &str| bundle.files.contains(name);
    let mut lack = Vec::new();
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
            lack.push(format!("{file}: {what}"));
        }
    }
    if !f("cluster_policy.yaml") && !f("cluster_policy.missing") {
        lack.push("cluster_policy.yaml: workload configs judged without the ClusterPolicy".into());
    } else if f("cluster_policy.missing") {
        lack.push("a ClusterPolicy: the cluster had none (cluster_policy.missing)".into());
    }
    for fatal in &bundle.fatal {
        lack.push(format!("everything after the script stopped: {fatal}"));
    }
    let described: BTreeSet<&str> = bundle.nodes.iter().map(|d| d.node.name.as_str()).collect();
    let undescribed: Vec<&str> = bundle
        .labelled_nodes
        .iter()
        .map(String::as_str)
        .filter(|n| !described.contains(n))
        .collect();
    if !undescribed.is_empty() {
        lack.push(format!(
            "{} nodes with an NVIDIA PCI label (gpu_nodes.labels) that are not described (not labelled nvidia.com/gpu.present=true): {}{}",
            undescribed.len(),
            undescribed.iter().take(10).copied().collect::<Vec<_>>().join(", "),
            if undescribed.len() > 10 { ", …" } else { "" }
        ));
    }
    for d in &bundle.nodes {
        if !d.missing.is_empty() {
            lack.push(format!(
                "node {}: its description lacks {} (cut short?)",
                d.node.name,
                d.missing.join(", ")
            ));
        }
    }
    if !has_extra_pods {
        lack.push(format!(
            "workload pods outside {} (the script collects only that namespace): pending GPU workloads there are not seen; add --pods FILE (kubectl get pods -A -o json)",
            operator_namespace.unwrap_or("the operator namespace")
        ));
    }
    lack
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_with(files: &[&str]) -> Bundle {
        Bundle {
            source: "must-gather".into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_bundle_lacks_every_file_and_the_workload_pods() {
        let lacks = bundle_lacks(&bundle_with(&[]), false, None);
        assert_eq!(
            lacks,
            [
                "gpu_nodes.descr: the GPU nodes' descriptions: no node was checked",
                "gpu_operand_pods.yaml: the operand pods: no pod phases, restarts or pending pods",
                "gpu_operand_ds.yaml: the operand DaemonSets: readiness not judged",
                "gpu_operator_pod.log: the operator's log",
                "cluster_policy.yaml: workload configs judged without the ClusterPolicy",
                "workload pods outside the operator namespace (the script collects only that namespace): pending GPU workloads there are not seen; add --pods FILE (kubectl get pods -A -o json)",
            ]
        );
        // With --pods and a ClusterPolicy marked missing.
        let b = bundle_with(&[
            "gpu_nodes.descr",
            "gpu_operand_pods.yaml",
            "gpu_operand_ds.yaml",
            "gpu_operator_pod.log",
            "cluster_policy.missing",
        ]);
        assert_eq!(
            bundle_lacks(&b, true, Some("gpu-operator")),
            ["a ClusterPolicy: the cluster had none (cluster_policy.missing)"]
        );
        assert_eq!(bundle_policy(&b).status, "no-object");
        assert_eq!(bundle_policy(&bundle_with(&[])).status, "not-read");
    }

    #[test]
    fn a_daemonset_short_of_ready_pods_says_why_and_which_logs_are_missing() {
        let mut b = bundle_with(&[]);
        b.pods.push(OperandPod {
            name: "nvidia-vfio-manager-x".into(),
            namespace: "gpu-operator".into(),
            daemonset: Some("nvidia-vfio-manager".into()),
            phase: Some("Pending".into()),
            ..Default::default()
        });
        let ds = OperandDaemonSet {
            name: "nvidia-vfio-manager".into(),
            desired: 2,
            ready: 1,
            available: 1,
            ..Default::default()
        };
        let mut lacking = Vec::new();
        let r = daemonset_report(&b, &ds, &mut lacking).expect("not ready");
        assert_eq!(
            r.why,
            ["1 of 2 pods ready", "pod nvidia-vfio-manager-x: Pending"]
        );
        assert_eq!(r.pods.len(), 1);
        assert_eq!(
            lacking,
            ["the log of pod nvidia-vfio-manager-x (gpu_operand_pod_nvidia-vfio-manager-x.log)"]
        );
        // Fully ready, or nothing scheduled where no described node matches: no report.
        let ready = OperandDaemonSet {
            ready: 2,
            available: 2,
            ..ds.clone()
        };
        assert!(daemonset_report(&b, &ready, &mut lacking).is_none());
        let by_design = OperandDaemonSet {
            desired: 0,
            ready: 0,
            available: 0,
            node_selector: [(
                "nvidia.com/gpu.deploy.vfio-manager".to_string(),
                "true".to_string(),
            )]
            .into_iter()
            .collect(),
            ..ds
        };
        assert!(daemonset_report(&b, &by_design, &mut lacking).is_none());
    }
}
