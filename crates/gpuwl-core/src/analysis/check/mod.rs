//! The label ↔ advertised-resource check (the lab's step 8, hardened).
//!
//! Verdict rules (the line contract of the lab's checker, docs/lab.md step 8): only nodes carrying
//! [`LABEL_KEY`](crate::model::workload::LABEL_KEY) are judged. A resource is advertised
//! when its allocatable quantity is > 0 (capacity when the node has no allocatable map);
//! `"0"` is not advertised (the kubelet keeps stale zeros, kubernetes/kubernetes
//! `pkg/kubelet/nodestatus/setters.go`). `container` ↔ container-GPU names, `vm-vgpu` ↔
//! vGPU type names, `vm-passthrough` ↔ device-model names
//! ([`crate::model::resource::classify`]). A labelled node mismatches when its label
//! value is not one of the three (case-sensitive; the operator silently falls back to the
//! default, NVIDIA/gpu-operator `controllers/state_manager.go`), when it advertises a GPU
//! resource of another class, when it advertises no GPU resource at all, or when one of
//! its `nvidia.com/` quantities is not a valid quantity.
//!
//! Beyond the verdict, findings with stable [`Code`]s and [`Severity`]s; only
//! [`Severity::Error`] findings make a node mismatch.

use std::borrow::Borrow;

use serde::Serialize;

use crate::error::ExitStatus;
use crate::model::node::NodeInfo;
use crate::model::operator::{
    ClusterPolicy, GpuEvidence, LabelState, OperatorScope, WorkloadSource,
    effective_workload_given, gpu_evidence, operands, state_findings,
};
use crate::model::resource::{Classifier, ResourceClass};
use crate::model::workload::WorkloadConfig;

pub mod dra_nodes;
pub mod finding;
mod quota;
pub mod rules;

use crate::analysis::kueue::{FlavorOffer, QuotaLayer, QuotaReport};
use crate::analysis::orphans::{self, Orphan};
pub use crate::model::finding::{Code, Severity};
use crate::model::kueue::KueueObjects;
use crate::model::operand::{self, OperandPod, OperandSource, OperandsByNode};
use crate::model::pod::PodInfo;
use crate::text;

pub use dra_nodes::DraNodes;
pub(crate) use dra_nodes::NVIDIA_GPU_DRIVER;
pub use finding::Finding;

/// One `nvidia.com/` resource of a node as the check saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceEntry {
    /// Full resource name.
    pub name: String,
    /// Its classification.
    pub class: ResourceClass,
    /// Raw `status.capacity` text, if listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
    /// Raw `status.allocatable` text, if listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<String>,
    /// Whether it counts as advertised (> 0 in allocatable, or capacity without an
    /// allocatable map).
    pub advertised: bool,
}

/// The outcome for one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Labelled, and the label agrees with the advertised resources.
    Ok,
    /// Labelled, and something disagrees (see the reason).
    Mismatch,
    /// Not labelled, or labelled on a node without a GPU: not judged (may still carry
    /// warnings).
    NotJudged,
}

/// Everything the check says about one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    /// Node name.
    pub name: String,
    /// The raw label value, when labelled.
    pub label: Option<String>,
    /// The workload whose operands the operator deploys
    /// ([`crate::model::operator::effective_workload`]); `null`
    /// when it deploys none ([`NodeReport::operator_scope`]).
    pub effective_workload: Option<WorkloadConfig>,
    /// Which source decided it: `label`, `cluster-policy`, `deploy-labels`, `default`.
    pub workload_source: WorkloadSource,
    /// `operands`, `operands-disabled` (`nvidia.com/gpu.deploy.operands=false`) or
    /// `no-gpu` (NFD shows no NVIDIA GPU): whether the operator deploys anything here.
    pub operator_scope: OperatorScope,
    /// What says the node has a GPU: `nfd`, `advertised`, `no-gpu`, `unknown`, `none`
    /// ([`GpuEvidence`]).
    pub gpu: GpuEvidence,
    /// The operands whose `nvidia.com/gpu.deploy.<operand>` label the operator keeps at
    /// `true` here, sorted ([`operands`]); their DaemonSets run where the ClusterPolicy
    /// enables the component.
    pub operands: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// For a mismatch: the reason printed after `MISMATCH=<node> `.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The node's `nvidia.com/` resources.
    pub resources: Vec<ResourceEntry>,
    /// Findings, errors first.
    pub findings: Vec<Finding>,
    /// Whether the node is a GPU node, and by which evidence: the workload label, a GPU
    /// resource it lists, or an NFD / GPU Feature Discovery / GPU Operator label
    /// ([`rules::gpu_node_evidence`]). `check --effective` judges every GPU node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_node: Option<&'static str>,
    /// A planned transition in progress (`mig.config.state=rebooting`, operands
    /// `paused-for-mig-change`, ...): it explains a node that advertises nothing, so
    /// `no-gpu-resource` is not reported as a finding (plain check's MISMATCH line stays,
    /// the line contract), and `check --effective` passes with the transition's warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_transition: Option<String>,
    /// The GPU Operator's operand pods on the node with their health, when operand pods
    /// were read ([`attach_operands`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operand_pods: Option<Vec<OperandPod>>,
    /// Devices NVIDIA's DRA driver (`gpu.nvidia.com`) publishes on the node, when DRA
    /// objects were read (`None`: not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra_devices: Option<usize>,
}

/// The result of checking a set of nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Labelled nodes, GPU nodes (NFD) and other nodes with findings, sorted by name.
    pub nodes: Vec<NodeReport>,
    /// How many nodes were read.
    pub nodes_seen: usize,
    /// How many carried the label and were judged (the `OK=<n>` number): a label on a node
    /// NFD shows without a GPU is not judged.
    pub labelled: usize,
    /// With [`Options::warning_lines`]: the first [`WARNING_LINES`] warnings as
    /// `<node>: <message>` (control characters escaped), in input order.
    pub warning_lines: Vec<String>,
    /// With [`Options::warning_lines`]: how many warnings there were in all.
    pub warnings_total: usize,
    /// How many GPU nodes were read ([`NodeReport::gpu_node`]).
    pub gpu_nodes: usize,
    /// The gate (`check --effective`), when the report is judged as one.
    pub gate: Option<Gate>,
    /// `--expect-gpu-nodes N`: fewer GPU nodes judged fails, gate or not.
    pub expect_gpu_nodes: Option<usize>,
    /// Where the operand pods of [`attach_operands`] came from, when that ran.
    pub operand_source: Option<OperandSource>,
    /// With a gate: how many findings `--ignore` dropped, per code.
    pub ignored: std::collections::BTreeMap<Code, usize>,
    /// What the check could not judge and why (`pods not read (...)`): on stderr in
    /// text mode, in the document (`notes`) with `-o json|yaml`.
    pub notes: Vec<String>,
    /// The quota layer's findings (Kueue's flavors and ClusterQueues,
    /// [`crate::analysis::kueue`]), when Kueue objects were read: per object, by kind and
    /// name.
    pub quota: Vec<QuotaReport>,
    /// What each Kueue flavor's nodes offer, when Kueue objects were read.
    pub flavors: Vec<FlavorOffer>,
}

/// `check --effective`: which findings fail. A finding fails when its code is not in
/// `ignore` and its severity is [`Severity::Error`] or its code is in `fail_on`. Findings
/// of ignored codes are dropped from the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gate {
    /// `--fail-on`: codes that fail whatever their severity.
    pub fail_on: std::collections::BTreeSet<Code>,
    /// `--ignore`: codes dropped (never fail, not reported).
    pub ignore: std::collections::BTreeSet<Code>,
    /// `--allow-empty`: judging no GPU node at all passes. Without it an empty judgment
    /// fails: a gate pointed at the wrong cluster (a context mix-up in CI) must not pass.
    pub allow_empty: bool,
}

impl Gate {
    /// Whether `f` fails the gate.
    pub fn fails(&self, f: &Finding) -> bool {
        !self.ignore.contains(&f.code)
            && (f.severity == Severity::Error || self.fail_on.contains(&f.code))
    }
}

/// How many warning lines a text-mode report keeps (the rest are counted).
pub const WARNING_LINES: usize = 50;

impl Report {
    /// The seed contract's stdout lines: `MISMATCH=<node> <reason>` per mismatching node
    /// sorted by name (control characters escaped, so a crafted name cannot forge a line),
    /// or the single line `OK=<labelled nodes>`. When the GPU-node count fails
    /// (`--expect-gpu-nodes`, [`Report::too_few_gpu_nodes`]) the last line is
    /// `FAIL=<why>` and there is no `OK=` line: stdout never says OK when the exit code
    /// says otherwise.
    pub(crate) fn seed_lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .mismatches()
            .map(|n| {
                text::esc(&format!(
                    "MISMATCH={} {}",
                    n.name,
                    n.reason.as_deref().unwrap_or("")
                ))
            })
            .collect();
        match self.too_few_gpu_nodes() {
            Some(why) => v.push(format!("FAIL={why}")),
            None if v.is_empty() => v.push(format!("OK={}", self.labelled)),
            None => {}
        }
        v
    }

    /// The mismatching nodes, sorted by name.
    pub fn mismatches(&self) -> impl Iterator<Item = &NodeReport> {
        self.nodes.iter().filter(|n| n.verdict == Verdict::Mismatch)
    }

    /// The findings that fail the gate, as (node or Kueue object, finding): nodes by
    /// name, then the quota layer's objects ([`Report::quota`]); empty without a gate.
    pub fn failing(&self) -> impl Iterator<Item = (&str, &Finding)> {
        self.findings()
            .filter(move |(_, f)| self.gate.as_ref().is_some_and(|g| g.fails(f)))
    }

    /// Every finding as (node or Kueue object, finding): nodes by name, then the quota
    /// layer's objects.
    pub fn findings(&self) -> impl Iterator<Item = (&str, &Finding)> {
        self.nodes
            .iter()
            .flat_map(|n| n.findings.iter().map(move |f| (n.name.as_str(), f)))
            .chain(
                self.quota
                    .iter()
                    .flat_map(|q| q.findings.iter().map(move |f| (q.object.as_str(), f))),
            )
    }

    /// Why the number of GPU nodes judged fails, if it does: fewer than
    /// `--expect-gpu-nodes`, or (with a gate, without `--allow-empty`) none at all. Plain
    /// check keeps the seed's contract (`OK=0`, exit 0) on an empty judgment.
    pub fn too_few_gpu_nodes(&self) -> Option<String> {
        if let Some(want) = self.expect_gpu_nodes
            && self.gpu_nodes < want
        {
            return Some(format!(
                "{} GPU node(s) judged, fewer than --expect-gpu-nodes {want}",
                self.gpu_nodes
            ));
        }
        match &self.gate {
            Some(g) if !g.allow_empty && self.gpu_nodes == 0 => Some(format!(
                "0 GPU nodes judged among {} node(s): no node carries the workload label, lists a GPU resource or has NFD's NVIDIA labels — the wrong cluster or context? (--allow-empty passes this)",
                self.nodes_seen
            )),
            _ => None,
        }
    }

    /// Plain check: [`ExitStatus::Mismatch`] (1) when any node mismatches, else
    /// [`ExitStatus::Ok`] (0). With a gate: 1 when any finding fails it
    /// ([`Report::failing`]), else 0. Either way 1 when [`Report::too_few_gpu_nodes`].
    pub fn exit_status(&self) -> ExitStatus {
        let fails = match &self.gate {
            Some(_) => self.failing().next().is_some(),
            None => self.mismatches().next().is_some(),
        } || self.too_few_gpu_nodes().is_some();
        if fails {
            ExitStatus::Mismatch
        } else {
            ExitStatus::Ok
        }
    }

    /// Number of findings of `severity` over all nodes and the quota layer.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings()
            .filter(|(_, f)| f.severity == severity)
            .count()
    }
}

/// Check options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Extra globs of resource names to ignore as non-GPU (`--ignore-resource`); see
    /// [`Classifier::with_ignore_globs`].
    pub ignore_resources: Vec<String>,
    /// Keep only the reports of mismatching nodes (all the text output needs), so memory
    /// grows with the number of mismatches, not of labelled nodes. The counts
    /// ([`Report::labelled`], [`Report::nodes_seen`]) are kept either way; severity counts
    /// and per-node findings of agreeing nodes are then not available.
    pub mismatches_only: bool,
    /// The GPU Operator's ClusterPolicy, when known: effective workload configs and the
    /// `label-ignored` finding follow it.
    pub cluster_policy: Option<ClusterPolicy>,
    /// Keep up to [`WARNING_LINES`] warning lines (and count all) even when
    /// `mismatches_only` drops the reports they belong to: the text mode prints them on
    /// stderr.
    pub warning_lines: bool,
    /// What NVIDIA's DRA driver publishes per node, when DRA objects were read: the nodes
    /// with such devices get the `dra-and-device-plugin` finding if a device plugin also
    /// advertises GPUs there.
    pub dra: Option<DraNodes>,
    /// Judge as a gate (`check --effective`): [`Report::exit_status`] follows the
    /// findings' severities instead of the labelled nodes' verdicts. Needs
    /// `mismatches_only` off.
    pub gate: Option<Gate>,
    /// Pods by the node they are bound to ([`crate::model::pod::by_node`]),
    /// when read: pods holding a GPU name their node no longer advertises are
    /// `orphaned-holder` findings.
    pub pods: Option<std::sync::Arc<std::collections::HashMap<String, Vec<PodInfo>>>>,
    /// `--expect-gpu-nodes N` ([`Report::too_few_gpu_nodes`]).
    pub expect_gpu_nodes: Option<usize>,
    /// Kueue's objects, when read: the quota layer is checked against the nodes
    /// ([`crate::analysis::kueue::QuotaLayer`], [`Report::quota`]).
    pub kueue: Option<KueueObjects>,
}

impl DraNodes {
    /// The `dra-and-device-plugin` finding for a node whose report lists advertised GPU
    /// resources, when NVIDIA's DRA driver also publishes devices there; `via_dra`: the
    /// names the node was judged to advertise only through a DeviceClass (not a device
    /// plugin).
    pub fn finding(
        &self,
        r: &NodeReport,
        via_dra: &std::collections::BTreeSet<String>,
    ) -> Option<Finding> {
        let n = *self.devices.get(&r.name)?;
        let plugin: Vec<&ResourceEntry> = r
            .resources
            .iter()
            .filter(|e| e.advertised && e.class.is_gpu() && !via_dra.contains(&e.name))
            .collect();
        let first = plugin.first()?;
        let names = plugin
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e.name,
                    e.allocatable
                        .as_deref()
                        .or(e.capacity.as_deref())
                        .unwrap_or("?")
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let via_class = plugin
            .iter()
            .filter_map(|e| self.extended_names.get(&e.name).map(|c| (e, c)))
            .map(|(e, c)| {
                format!(
                    "; DeviceClass {c} also offers {} through DRA, so a pod asking for it may get either",
                    e.name
                )
            })
            .collect::<String>();
        Some(Finding {
            code: Code::DraAndDevicePlugin,
            severity: Code::DraAndDevicePlugin.severity(),
            resource: Some(first.name.clone()),
            message: format!(
                "GPUs published twice: a device plugin advertises {names} and the DRA driver {NVIDIA_GPU_DRIVER} publishes {n} device(s) on this node; the two allocate independently and can hand out the same GPU twice — run one of them per node{via_class}"
            ),
        })
    }
}

/// An incremental checker: feed nodes one by one (from a streaming reader), keep only
/// their small reports, then [`Checker::finish`].
#[derive(Debug, Clone, Default)]
pub struct Checker {
    classifier: Classifier,
    policy: Option<ClusterPolicy>,
    warning_lines: bool,
    report: Report,
    mismatches_only: bool,
    dra: Option<DraNodes>,
    pods: Option<std::sync::Arc<std::collections::HashMap<String, Vec<PodInfo>>>>,
    quota: Option<QuotaLayer>,
}

impl Checker {
    /// A checker with `options`.
    pub fn new(options: &Options) -> Checker {
        Checker {
            classifier: Classifier::with_ignore_globs(options.ignore_resources.iter().cloned()),
            policy: options.cluster_policy.clone(),
            warning_lines: options.warning_lines,
            report: Report {
                expect_gpu_nodes: options.expect_gpu_nodes,
                ..Report::default()
            },
            mismatches_only: options.mismatches_only && options.gate.is_none(),
            dra: options.dra.clone(),
            pods: options.pods.clone(),
            quota: options.kueue.clone().map(QuotaLayer::new),
        }
        .with_gate(options.gate.clone())
    }

    fn with_gate(mut self, gate: Option<Gate>) -> Checker {
        self.report.gate = gate;
        self
    }

    /// Judges one node and records its report when it is labelled or has findings.
    pub fn add(&mut self, node: &NodeInfo) {
        self.report.nodes_seen += 1;
        let mut r = judge_node(
            node,
            &self.classifier,
            self.policy.as_ref(),
            self.dra.as_ref(),
        );
        if let Some(pods) = self.pods.as_ref().and_then(|p| p.get(&node.name)) {
            r.findings.extend(
                orphans::of_node(node, pods, self.policy.as_ref())
                    .iter()
                    .map(orphan_finding),
            );
            r.findings.sort_by_key(|f| f.severity);
        }
        if r.verdict != Verdict::NotJudged {
            self.report.labelled += 1;
        }
        if r.gpu_node.is_some() {
            self.report.gpu_nodes += 1;
        }
        if let Some(q) = &mut self.quota {
            q.add_judged(node, &r);
        }
        if let Some(g) = &self.report.gate {
            let ignored = &mut self.report.ignored;
            r.findings.retain(|f| {
                let drop = g.ignore.contains(&f.code);
                if drop {
                    *ignored.entry(f.code).or_default() += 1;
                }
                !drop
            });
        }
        if self.warning_lines {
            // Every warning or error that the MISMATCH line does not carry (errors of the
            // line contract on a labelled node are its reason).
            let judged = r.label.is_some();
            for f in r.findings.iter().filter(|f| match f.severity {
                Severity::Warning => true,
                Severity::Error => !(judged && f.code.in_line_contract()),
                Severity::Info => false,
            }) {
                self.report.warnings_total += 1;
                if self.report.warning_lines.len() < WARNING_LINES {
                    // Plain check never fails on these: an error here is a note of what
                    // the gate (`--effective`) fails on, not an error of this run.
                    let line = match f.severity {
                        Severity::Error => format!(
                            "note: {}: {} (an error of {}: gpuwl check --effective fails on it)",
                            r.name, f.message, f.code
                        ),
                        _ => format!("{}: {}: {}", f.severity.as_str(), r.name, f.message),
                    };
                    self.report.warning_lines.push(text::esc(&line));
                }
            }
        }
        let keep = if self.mismatches_only {
            r.verdict == Verdict::Mismatch
        } else {
            r.label.is_some() || r.gpu == GpuEvidence::Nfd || !r.findings.is_empty()
        };
        if keep {
            self.report.nodes.push(r);
        }
    }

    /// The report, nodes sorted by name, the quota layer judged.
    pub fn finish(mut self) -> Report {
        self.report.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(q) = self.quota.take() {
            let mut quota = q.findings();
            if let Some(g) = &self.report.gate {
                let ignored = &mut self.report.ignored;
                for r in &mut quota {
                    r.findings.retain(|f| {
                        let drop = g.ignore.contains(&f.code);
                        if drop {
                            *ignored.entry(f.code).or_default() += 1;
                        }
                        !drop
                    });
                }
                quota.retain(|r| !r.findings.is_empty());
            }
            if self.warning_lines {
                for (object, f) in quota
                    .iter()
                    .flat_map(|r| r.findings.iter().map(move |f| (&r.object, f)))
                {
                    self.report.warnings_total += 1;
                    if self.report.warning_lines.len() < WARNING_LINES {
                        let line = match f.severity {
                            Severity::Error => format!(
                                "note: {object}: {} (an error of {}: gpuwl check --effective fails on it)",
                                f.message, f.code
                            ),
                            _ => format!("{}: {object}: {}", f.severity.as_str(), f.message),
                        };
                        self.report.warning_lines.push(text::esc(&line));
                    }
                }
            }
            self.report.flavors = q.offers().to_vec();
            self.report.quota = quota;
        }
        self.report
    }
}

/// Checks `nodes` with default options.
pub fn check<I>(nodes: I) -> Report
where
    I: IntoIterator,
    I::Item: Borrow<NodeInfo>,
{
    check_with(nodes, &Options::default())
}

/// Checks `nodes` with `options`.
pub(crate) fn check_with<I>(nodes: I, options: &Options) -> Report
where
    I: IntoIterator,
    I::Item: Borrow<NodeInfo>,
{
    let mut c = Checker::new(options);
    for n in nodes {
        c.add(n.borrow());
    }
    c.finish()
}

/// Judges one node (whether or not it is labelled) under `policy` (`None`: no
/// ClusterPolicy known): the [`rules::RESOURCE_RULES`] per resource, the
/// [`rules::NODE_RULES`] about the label, the GPU Operator's own state
/// ([`state_findings`]), then the node against the workload the operator applies
/// ([`rules::effective_workload_differs`]). The verdict follows the label and the line
/// contract's codes only ([`Code::in_line_contract`]); an operator state that explains a
/// mismatch adds its cause to the reason. A planned transition
/// ([`NodeReport::planned_transition`]) removes `no-gpu-resource` from the findings.
pub fn judge(
    node: &NodeInfo,
    classifier: &Classifier,
    policy: Option<&ClusterPolicy>,
) -> NodeReport {
    judge_given(node, classifier, policy, gpu_evidence(node))
}

/// [`judge`] with the node's GPU evidence given ([`NodeFacts::with_gpu`](rules::NodeFacts::with_gpu)).
fn judge_given(
    node: &NodeInfo,
    classifier: &Classifier,
    policy: Option<&ClusterPolicy>,
    gpu: GpuEvidence,
) -> NodeReport {
    let facts = rules::NodeFacts::gather(node, classifier)
        .with_policy(policy)
        .with_gpu(gpu);
    let mut findings = Vec::new();
    for r in &facts.resources {
        findings.extend(
            rules::RESOURCE_RULES
                .iter()
                .filter_map(|(_, rule)| rule(&facts, r)),
        );
    }
    // Gathered once: the state rules and the report's effective workload both read it.
    let eff = effective_workload_given(node, policy, gpu);
    let label_findings = || {
        rules::NODE_RULES
            .iter()
            .filter_map(|(_, rule)| rule(&facts))
            .collect::<Vec<_>>()
    };
    // A node without a GPU is not judged by its label (the operator never reads it). On a
    // node where nothing at all shows a GPU (no NFD label, a workload label alone) the
    // lab's line contract still judges the label: its errors make plain check's verdict
    // only, not findings (`label-without-gpu` says what the operator does there).
    let mut contract_only = Vec::new();
    if eff.scope != OperatorScope::NoGpu {
        findings.extend(label_findings());
    } else if gpu == GpuEvidence::None {
        contract_only = label_findings();
    }

    let vgpu_types: Vec<&str> = facts
        .advertised()
        .filter(|r| r.entry.class == ResourceClass::VgpuType)
        .map(|r| r.entry.name.as_str())
        .collect();
    let mut state_causes = Vec::new();
    let mut planned = Vec::new();
    for f in state_findings(node, policy, &eff, &vgpu_types) {
        state_causes.extend(f.cause.clone());
        if matches!(f.code, Code::ConfigPending | Code::OperandPaused) {
            planned.extend(f.cause.clone());
        }
        findings.push(Finding {
            code: f.code,
            severity: f.severity,
            resource: None,
            message: f.message,
        });
    }
    findings.extend(rules::effective_workload_differs(&facts, &eff, policy));
    // The label's value when valid and followed; else what the operator applies; nothing
    // where it deploys nothing.
    let effective = match facts.label.map(str::parse::<WorkloadConfig>) {
        Some(Ok(w)) if eff.label == LabelState::Valid && !eff.label_ignored => w,
        _ => eff.workload,
    };
    let effective = (eff.scope == OperatorScope::Operands).then_some(effective);

    findings.sort_by_key(|f| f.severity);
    // The seed's verdict: only the line contract's errors decide it and make its reason.
    let errors: Vec<&str> = findings
        .iter()
        .chain(&contract_only)
        .filter(|f| f.severity == Severity::Error && f.code.in_line_contract())
        .map(|f| f.message.as_str())
        .collect();
    let label = facts.label.map(str::to_owned);
    let (verdict, reason) = match (&label, errors.is_empty()) {
        (None, _) => (Verdict::NotJudged, None),
        (Some(_), _) if eff.scope == OperatorScope::NoGpu && gpu != GpuEvidence::None => {
            (Verdict::NotJudged, None)
        }
        (Some(_), true) => (Verdict::Ok, None),
        (Some(_), false) if state_causes.is_empty() => (Verdict::Mismatch, Some(errors.join("; "))),
        (Some(_), false) => (
            Verdict::Mismatch,
            Some(format!(
                "{} (operator state: {})",
                errors.join("; "),
                state_causes.join(", ")
            )),
        ),
    };
    // A planned transition explains a node that advertises nothing: the transition's own
    // warning says so, and the gate passes (the MISMATCH line above keeps the contract).
    let planned_transition = (!planned.is_empty()).then(|| planned.join(", "));
    if planned_transition.is_some() {
        findings.retain(|f| f.code != Code::NoGpuResource);
    }
    NodeReport {
        name: node.name.clone(),
        label,
        effective_workload: effective,
        workload_source: eff.source,
        operator_scope: eff.scope,
        gpu,
        operands: operands(node, &eff)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        verdict,
        reason,
        gpu_node: rules::gpu_node_evidence(&facts),
        planned_transition,
        resources: facts.resources.into_iter().map(|r| r.entry).collect(),
        findings,
        operand_pods: None,
        dra_devices: None,
    }
}

/// [`judge`] with the DRA facts when DRA objects were read: a DeviceClass's
/// `extendedResourceName` counts as advertised by the nodes whose devices it selects (the
/// scheduler serves such requests from DRA), `dra-and-device-plugin` when a device plugin
/// advertises GPUs NVIDIA's DRA driver publishes too, and a node whose GPUs only the DRA
/// driver publishes judged as a DRA node ([`judge_dra_only`]). `check`, `triage` and
/// `serve` judge nodes through this one function.
pub fn judge_node(
    node: &NodeInfo,
    classifier: &Classifier,
    policy: Option<&ClusterPolicy>,
    dra: Option<&DraNodes>,
) -> NodeReport {
    let Some(d) = dra else {
        return judge(node, classifier, policy);
    };
    let mut synthesized = std::collections::BTreeSet::new();
    let augmented;
    let node = match d.extended_by_node.get(&node.name) {
        Some(names) => {
            let mut n = node.clone();
            for (name, count) in names {
                if !n.capacity.contains_key(name) {
                    synthesized.insert(name.clone());
                    n.capacity.insert(name.clone(), count.to_string());
                }
                if let Some(a) = &mut n.allocatable
                    && !a.contains_key(name)
                {
                    a.insert(name.clone(), count.to_string());
                }
            }
            augmented = n;
            &augmented
        }
        None => node,
    };
    let devices = d.devices.get(&node.name).copied().unwrap_or(0);
    // Devices the DRA driver publishes show a GPU where nothing else does.
    let gpu = match gpu_evidence(node) {
        GpuEvidence::None if devices > 0 => GpuEvidence::Unknown,
        g => g,
    };
    let mut r = judge_given(node, classifier, policy, gpu);
    r.dra_devices = Some(devices);
    if let Some(f) = d.finding(&r, &synthesized) {
        r.findings.push(f);
    }
    judge_dra_only(&mut r);
    r
}

/// A node whose GPUs NVIDIA's DRA driver publishes ([`NodeReport::dra_devices`] > 0) and
/// where no device plugin advertises a GPU name is judged as a DRA node: its
/// `no-gpu-resource` is dropped (pods claim those GPUs, they ask for no extended resource),
/// a `gpus-via-dra` info says so, and the line-contract verdict is taken again without it.
fn judge_dra_only(r: &mut NodeReport) {
    let devices = r.dra_devices.unwrap_or(0);
    let plugin = r.resources.iter().any(|e| e.advertised && e.class.is_gpu());
    if devices == 0 || plugin {
        return;
    }
    r.findings.retain(|f| f.code != Code::NoGpuResource);
    r.findings.push(Finding {
        code: Code::GpusViaDra,
        severity: Code::GpusViaDra.severity(),
        resource: None,
        message: format!(
            "NVIDIA's DRA driver ({NVIDIA_GPU_DRIVER}) publishes {devices} device(s) here and no device plugin advertises a GPU name: pods get these GPUs with ResourceClaims (gpuwl inventory shows them in its DRA table)"
        ),
    });
    r.findings.sort_by_key(|f| f.severity);
    if r.verdict == Verdict::Mismatch {
        let errors: Vec<&str> = r
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error && f.code.in_line_contract())
            .map(|f| f.message.as_str())
            .collect();
        if errors.is_empty() {
            r.verdict = Verdict::Ok;
            r.reason = None;
        } else {
            r.reason = Some(errors.join("; "));
        }
    }
}

/// The finding of an orphaned holding `o` ([`crate::analysis::orphans`]):
/// `holder-at-risk` (an error) when a VM holds the name or the node's workload class
/// changed under the holders ([`crate::analysis::orphans::Orphan::at_risk`]), else
/// `orphaned-holder` (a warning).
pub fn orphan_finding(o: &Orphan) -> Finding {
    let code = if o.at_risk() {
        Code::HolderAtRisk
    } else {
        Code::OrphanedHolder
    };
    let consequence = o.consequence("here");
    Finding {
        code,
        severity: code.severity(),
        resource: Some(o.resource.clone()),
        message: format!(
            "{} bound pod(s) hold {} {} that the node no longer advertises ({}): {}; {consequence}",
            o.holders.len(),
            o.units,
            o.resource,
            o.how(),
            o.holder_list()
        ),
    }
}

/// Adds the operand pods read (`pods`, per node) to each GPU node of `report` whose
/// workload the operator applies, with an `operand-not-ready` warning when the device
/// plugin of that workload has no ready pod there (named first, with the operands that
/// prepare its GPUs) or another operand pod is not ready or crash-looping.
pub fn attach_operands(report: &mut Report, pods: &OperandsByNode) {
    use crate::model::operand::{OperandHealth, plugin_problem};
    for r in &mut report.nodes {
        let Some(w) = r.effective_workload else {
            continue;
        };
        let here = pods.get(&r.name).cloned().unwrap_or_default();
        let plugin = plugin_problem(&here, w);
        let others: Vec<String> = here
            .iter()
            .filter(|p| {
                p.health != OperandHealth::Ready
                    && !plugin
                        .as_deref()
                        .is_some_and(|m| m.contains(&format!("{} pod {}", p.operand, p.pod)))
            })
            .map(|p| format!("{} pod {} {}", p.operand, p.pod, p.health.as_str()))
            .collect();
        let mut parts = Vec::new();
        if let Some(m) = &plugin {
            parts.push(format!(
                "the {} that advertises this node's {w} names is not ready: {m}",
                operand::plugin_of(w)
            ));
        }
        if !others.is_empty() {
            parts.push(format!("operands not ready: {}", others.join(", ")));
        }
        if !parts.is_empty() {
            r.findings.push(Finding {
                code: Code::OperandNotReady,
                severity: Code::OperandNotReady.severity(),
                resource: None,
                message: text::esc(&format!(
                    "{}; see kubectl -n <namespace> describe pod / logs of those pods",
                    parts.join("; ")
                )),
            });
            r.findings.sort_by_key(|f| f.severity);
        }
        r.operand_pods = Some(here);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::workload::LABEL_KEY;
    fn text_lines(r: &Report) -> Vec<String> {
        r.seed_lines()
    }
    use std::collections::BTreeMap;

    fn node(name: &str, label: Option<&str>, res: &[(&str, &str)]) -> NodeInfo {
        let m: BTreeMap<String, String> = res
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut n = NodeInfo::named(name);
        if let Some(l) = label {
            n.labels.insert(LABEL_KEY.into(), l.into());
        }
        n.labels.insert("kubernetes.io/os".into(), "linux".into());
        n.capacity = m.clone();
        n.capacity.insert("cpu".into(), "8".into());
        n.allocatable = Some(m);
        n
    }

    fn codes(r: &NodeReport) -> Vec<Code> {
        r.findings.iter().map(|f| f.code).collect()
    }

    #[test]
    fn mismatches_only_keeps_the_text_verdict_and_drops_the_rest() {
        let nodes = [
            node("b", Some("container"), &[("nvidia.com/gpu", "4")]),
            node("a", Some("vm-vgpu"), &[("nvidia.com/gpu", "2")]),
            node("c", None, &[("nvidia.com/gpu", "0")]),
            node(
                "d",
                Some("vm-passthrough"),
                &[("nvidia.com/GA102GL_A10", "2")],
            ),
        ];
        let full = check_with(&nodes, &Options::default());
        let mut lean = Checker::new(&Options {
            mismatches_only: true,
            ..Options::default()
        });
        for n in &nodes {
            lean.add(n);
        }
        let lean = lean.finish();
        assert_eq!(text_lines(&lean), text_lines(&full));
        assert_eq!(lean.exit_status(), ExitStatus::Mismatch);
        assert_eq!((lean.labelled, lean.nodes_seen), (3, 4));
        let kept: Vec<&str> = lean.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(kept, ["a"]);
        assert_eq!(full.nodes.len(), 4);
    }

    #[test]
    fn seed_ok() {
        let r = check([
            node("lab-node-0", Some("container"), &[("nvidia.com/gpu", "4")]),
            node(
                "lab-node-1",
                Some("vm-passthrough"),
                &[("nvidia.com/GA102GL_A10", "2")],
            ),
            node(
                "lab-node-2",
                Some("vm-vgpu"),
                &[("nvidia.com/NVIDIA_A10-12Q", "4")],
            ),
            node("cp", None, &[]),
        ]);
        assert_eq!(text_lines(&r), ["OK=3"]);
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert_eq!(r.nodes_seen, 4);
        assert_eq!(r.nodes.len(), 3);
    }

    #[test]
    fn no_labelled_nodes_is_ok_0() {
        let r = check([node("a", None, &[]), node("b", None, &[])]);
        assert_eq!(text_lines(&r), ["OK=0"]);
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert!(text_lines(&check(Vec::<NodeInfo>::new())) == ["OK=0"]);
    }

    #[test]
    fn issue_example_reason_and_sorting() {
        let r = check([
            node(
                "lab-node-2",
                Some("vm-vgpu"),
                &[("nvidia.com/NVIDIA_A10-12Q", "0")],
            ),
            node(
                "lab-node-1",
                Some("vm-passthrough"),
                &[("nvidia.com/gpu", "2")],
            ),
        ]);
        assert_eq!(
            text_lines(&r),
            [
                "MISMATCH=lab-node-1 label vm-passthrough expects a device-model resource, but the node advertises nvidia.com/gpu=2 (container GPU)",
                "MISMATCH=lab-node-2 label vm-vgpu expects a vGPU type resource, but the node advertises no GPU resource (nvidia.com/NVIDIA_A10-12Q listed with 0)",
            ]
        );
        assert_eq!(r.exit_status(), ExitStatus::Mismatch);
    }

    #[test]
    fn stale_zero_is_not_advertised_but_warned() {
        let r = check([node(
            "n",
            Some("vm-passthrough"),
            &[
                ("nvidia.com/gpu", "0"),
                ("nvidia.com/2571", "0"),
                ("nvidia.com/GA106_RTX_A2000_12GB", "1"),
            ],
        )]);
        assert_eq!(text_lines(&r), ["OK=1"]);
        assert_eq!(codes(&r.nodes[0]), [Code::StaleZero, Code::StaleZero]);
    }

    #[test]
    fn invalid_label_values() {
        for v in ["vm_passthrough", "Container", "", "VM-VGPU"] {
            let r = check([node("n", Some(v), &[("nvidia.com/gpu", "1")])]);
            let lines = text_lines(&r);
            assert_eq!(lines.len(), 1);
            assert!(
                lines[0].starts_with(&format!("MISMATCH=n label value {v:?} is not one of")),
                "{lines:?}"
            );
            assert_eq!(
                r.nodes[0].effective_workload,
                Some(WorkloadConfig::Container)
            );
        }
    }

    #[test]
    fn class_rules() {
        // L40S and A100X are passthrough despite the digit+capital ending.
        for (label, res, ok) in [
            ("vm-passthrough", "nvidia.com/AD102GL_L40S", true),
            ("vm-passthrough", "nvidia.com/GA100_A100X", true),
            ("vm-vgpu", "nvidia.com/AD102GL_L40S", false),
            ("vm-passthrough", "nvidia.com/26b5", true),
            ("vm-vgpu", "nvidia.com/NVIDIA_A100-1-5CME", true),
            ("vm-vgpu", "nvidia.com/GRID_T4-2Q", true),
            ("container", "nvidia.com/mig-1g.10gb", true),
            ("container", "nvidia.com/mig-1g.10gb.me", true),
            ("container", "nvidia.com/gpu.shared", true),
            ("container", "nvidia.com/NVIDIA_A10-12Q", false),
            ("container", "nvidia.com/rdma_shared_device_a", false),
        ] {
            let r = check([node("n", Some(label), &[(res, "1")])]);
            assert_eq!(
                r.exit_status() == ExitStatus::Ok,
                ok,
                "{label} {res}: {:?}",
                text_lines(&r)
            );
        }
    }

    #[test]
    fn mixed_classes_mismatch() {
        let r = check([node(
            "n",
            Some("container"),
            &[("nvidia.com/gpu", "4"), ("nvidia.com/GA102GL_A10", "1")],
        )]);
        assert_eq!(
            text_lines(&r),
            [
                "MISMATCH=n label container expects a container-GPU resource, but the node advertises nvidia.com/GA102GL_A10=1 (device model) as well as nvidia.com/gpu=4 (container GPU)"
            ]
        );
    }

    #[test]
    fn bad_quantity_names_field_and_value_and_others_still_judged() {
        let r = check([
            node("a", Some("container"), &[("nvidia.com/gpu", "4x")]),
            node("b", Some("container"), &[("nvidia.com/gpu", "4")]),
            node("c", Some("container"), &[("nvidia.com/gpu", "Gi")]),
        ]);
        let l = text_lines(&r);
        assert_eq!(l.len(), 2);
        assert!(l[0].starts_with("MISMATCH=a status.capacity[\"nvidia.com/gpu\"] is \"4x\", not a valid quantity (unknown suffix \"x\")"), "{l:?}");
        assert!(l[0].contains("status.allocatable[\"nvidia.com/gpu\"] is \"4x\""));
        assert!(
            l[1].starts_with("MISMATCH=c status.capacity[\"nvidia.com/gpu\"] is \"Gi\""),
            "{l:?}"
        );
        assert!(!l.iter().any(|x| x.starts_with("MISMATCH=b")));
    }

    #[test]
    fn capacity_fallback_and_capacity_gt_allocatable() {
        let mut n = node("n", Some("container"), &[]);
        n.allocatable = None;
        n.capacity.insert("nvidia.com/gpu".into(), "2".into());
        assert_eq!(text_lines(&check([&n])), ["OK=1"]);
        // an allocatable map without the key: not advertised
        n.allocatable = Some(BTreeMap::new());
        assert_eq!(check([&n]).exit_status(), ExitStatus::Mismatch);
        let mut g = node("g", Some("container"), &[("nvidia.com/gpu", "2")]);
        g.capacity.insert("nvidia.com/gpu".into(), "4".into());
        let r = check([g]);
        assert_eq!(text_lines(&r), ["OK=1"]);
        assert_eq!(codes(&r.nodes[0]), [Code::CapacityExceedsAllocatable]);
    }

    #[test]
    fn warnings_do_not_change_exit() {
        let r = check([
            node("hex", Some("vm-passthrough"), &[("nvidia.com/26b5", "1")]),
            node(
                "mixed",
                Some("vm-passthrough"),
                &[("nvidia.com/TU104GL_Tesla_T4", "1")],
            ),
            node(
                "rdma",
                Some("container"),
                &[
                    ("nvidia.com/gpu", "1"),
                    ("nvidia.com/rdma_shared_device_a", "1k"),
                ],
            ),
            node("unl", None, &[("nvidia.com/gpu", "8")]),
        ]);
        assert_eq!(text_lines(&r), ["OK=3"]);
        let by = |n: &str| r.nodes.iter().find(|x| x.name == n).unwrap();
        assert_eq!(codes(by("hex")), [Code::HexIdFallback]);
        assert!(by("hex").findings[0].message.contains("AD102GL [L40]"));
        assert_eq!(codes(by("mixed")), [Code::MixedCaseModel]);
        assert_eq!(codes(by("rdma")), [Code::IgnoredResource]);
        assert_eq!(codes(by("unl")), [Code::UnlabelledGpuNode]);
        assert_eq!(by("unl").verdict, Verdict::NotJudged);
        assert_eq!(r.count(Severity::Warning), 3);
    }

    #[test]
    fn ignore_globs_option() {
        let n = node(
            "n",
            Some("container"),
            &[("nvidia.com/gpu", "1"), ("nvidia.com/custom_nic", "1")],
        );
        assert_eq!(check([&n]).exit_status(), ExitStatus::Mismatch);
        let o = Options {
            ignore_resources: vec!["custom_*".into()],
            ..Options::default()
        };
        assert_eq!(text_lines(&check_with([&n], &o)), ["OK=1"]);
    }

    #[test]
    fn operator_state_adds_findings_and_names_the_cause_of_a_mismatch() {
        let mut n = node("vg", Some("vm-vgpu"), &[]);
        n.labels
            .insert("nvidia.com/vgpu.config".into(), "A10-12Q".into());
        n.labels
            .insert("nvidia.com/vgpu.config.state".into(), "failed".into());
        let r = judge(&n, &Classifier::default(), None);
        assert_eq!(r.verdict, Verdict::Mismatch);
        assert_eq!(codes(&r), [Code::NoGpuResource, Code::VgpuConfigFailed]);
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .ends_with("advertises no GPU resource (operator state: vgpu.config.state=failed)"),
            "{:?}",
            r.reason
        );
        // A state without a cause for the reason (a GPU node without operands) leaves the
        // line as it was.
        let mut m = node("m", Some("container"), &[]);
        m.labels
            .insert("nvidia.com/gpu.present".into(), "true".into());
        let r = judge(&m, &Classifier::default(), None);
        assert_eq!(
            r.reason.as_deref(),
            Some(
                "label container expects a container-GPU resource, but the node advertises no GPU resource"
            )
        );
        assert!(codes(&r).contains(&Code::GpuPresentWithoutOperands));
    }

    #[test]
    fn policy_disabled_makes_vm_labels_ignored_but_keeps_the_verdict() {
        let p = crate::model::operator::ClusterPolicy {
            name: "cp".into(),
            sandbox_enabled: false,
            default_workload: WorkloadConfig::Container,
            default_workload_raw: None,
            mode: None,
            vgpu_manager_enabled: None,
            vgpu_default_config: None,
            mig_default_config: None,
            state: None,
            components: Default::default(),
        };
        let n = node(
            "pt",
            Some("vm-passthrough"),
            &[("nvidia.com/GA102GL_A10", "2")],
        );
        let r = judge(&n, &Classifier::default(), Some(&p));
        // The seed's verdict keeps OK; the node the operator is about to turn into a
        // container node is an error of its own.
        assert_eq!(r.verdict, Verdict::Ok);
        assert_eq!(
            codes(&r),
            [Code::EffectiveWorkloadDiffers, Code::LabelIgnored]
        );
        assert!(
            r.findings[0].message.starts_with("label vm-passthrough is ignored: the GPU Operator applies container (ClusterPolicy cp has sandboxWorkloads.enabled=false"),
            "{}",
            r.findings[0].message
        );
        assert_eq!(r.effective_workload, Some(WorkloadConfig::Container));
        assert_eq!(r.workload_source, WorkloadSource::ClusterPolicy);
    }

    fn gate(fail_on: &[Code], ignore: &[Code]) -> Options {
        Options {
            gate: Some(Gate {
                fail_on: fail_on.iter().copied().collect(),
                ignore: ignore.iter().copied().collect(),
                allow_empty: false,
            }),
            ..Options::default()
        }
    }

    #[test]
    fn the_gate_judges_an_unlabelled_node_by_the_workload_the_operator_applies() {
        let nodes = [
            node("ct", Some("container"), &[("nvidia.com/gpu", "4")]),
            node("pt", None, &[("nvidia.com/GA102GL_A10", "2")]),
            node("cpu", None, &[]),
        ];
        // Plain check: the seed's OK, one warning.
        let plain = check(&nodes);
        assert_eq!(text_lines(&plain), ["OK=1"]);
        assert_eq!(plain.exit_status(), ExitStatus::Ok);
        // The gate: an error naming the reason, exit 1; cpu is no GPU node.
        let r = check_with(&nodes, &gate(&[], &[]));
        assert_eq!(r.exit_status(), ExitStatus::Mismatch);
        assert_eq!(r.gpu_nodes, 2);
        let failing: Vec<(&str, Code)> = r.failing().map(|(n, f)| (n, f.code)).collect();
        assert_eq!(failing, [("pt", Code::EffectiveWorkloadDiffers)]);
        let f = &r.nodes[1].findings[0];
        assert_eq!(f.resource.as_deref(), Some("nvidia.com/GA102GL_A10"));
        assert!(
            f.message.starts_with("no nvidia.com/gpu.workload.config label: the GPU Operator applies container (the CRD's sandboxWorkloads.defaultWorkload default"),
            "{}",
            f.message
        );
        // An unlabelled node advertising what the default serves passes (a warning).
        let fine = [node("gpu", None, &[("nvidia.com/gpu", "8")])];
        let r = check_with(&fine, &gate(&[], &[]));
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert_eq!(codes(&r.nodes[0]), [Code::UnlabelledGpuNode]);
        // --ignore drops the code; --fail-on fails on a warning.
        let r = check_with(&nodes, &gate(&[], &[Code::EffectiveWorkloadDiffers]));
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert_eq!(codes(&r.nodes[1]), [Code::UnlabelledGpuNode]);
        let r = check_with(fine, &gate(&[Code::UnlabelledGpuNode], &[]));
        assert_eq!(r.exit_status(), ExitStatus::Mismatch);
    }

    #[test]
    fn a_planned_transition_warns_and_a_failed_config_fails_the_gate() {
        let mut reboot = node("mig", Some("container"), &[]);
        for (k, v) in [
            ("nvidia.com/mig.config", "all-1g.10gb"),
            ("nvidia.com/mig.config.state", "rebooting"),
            (
                "nvidia.com/gpu.deploy.device-plugin",
                "paused-for-mig-change",
            ),
        ] {
            reboot.labels.insert(k.into(), v.into());
        }
        // The line contract keeps its MISMATCH (and exit 1) ...
        let plain = check([&reboot]);
        assert_eq!(plain.exit_status(), ExitStatus::Mismatch);
        assert!(text_lines(&plain)[0].ends_with(
            "(operator state: mig.config.state=rebooting, operands paused-for-mig-change)"
        ));
        // ... the gate passes with the transition's warnings, no-gpu-resource not reported.
        let r = check_with([&reboot], &gate(&[], &[]));
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert_eq!(
            codes(&r.nodes[0]),
            [Code::ConfigPending, Code::OperandPaused]
        );
        assert!(
            r.nodes[0]
                .findings
                .iter()
                .all(|f| f.severity == Severity::Warning)
        );
        assert_eq!(
            r.nodes[0].planned_transition.as_deref(),
            Some("mig.config.state=rebooting, operands paused-for-mig-change")
        );
        // --fail-on config-pending makes the change fail the gate.
        let r = check_with([&reboot], &gate(&[Code::ConfigPending], &[]));
        assert_eq!(r.exit_status(), ExitStatus::Mismatch);

        let mut failed = node("mig", Some("container"), &[("nvidia.com/gpu", "1")]);
        failed
            .labels
            .insert("nvidia.com/mig.config.state".into(), "failed".into());
        assert_eq!(check([&failed]).exit_status(), ExitStatus::Ok);
        let r = check_with([&failed], &gate(&[], &[]));
        assert_eq!(r.exit_status(), ExitStatus::Mismatch);
        assert_eq!(codes(&r.nodes[0]), [Code::MigConfigFailed]);
        assert_eq!(r.nodes[0].findings[0].severity, Severity::Error);
    }

    #[test]
    fn gpu_nodes_by_nfd_are_reported_and_a_label_without_a_gpu_is_not_judged() {
        let mut cpu = node("cpu", Some("vm-passthrough"), &[]);
        cpu.labels.insert(
            "feature.node.kubernetes.io/kernel-version.full".into(),
            "5.15.0".into(),
        );
        let mut bare_gpu = node("gpu", None, &[]);
        bare_gpu.labels.insert(
            "feature.node.kubernetes.io/pci-10de.present".into(),
            "true".into(),
        );
        let labelled = node(
            "pt",
            Some("vm-passthrough"),
            &[("nvidia.com/GA102GL_A10", "2")],
        );
        let r = check([&cpu, &bare_gpu, &labelled]);
        assert_eq!(text_lines(&r), ["OK=1"]);
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        let by = |n: &str| r.nodes.iter().find(|x| x.name == n).unwrap();
        assert_eq!(by("cpu").verdict, Verdict::NotJudged);
        assert_eq!(codes(by("cpu")), [Code::LabelWithoutGpu]);
        assert_eq!(by("cpu").effective_workload, None);
        assert_eq!(by("cpu").operator_scope, OperatorScope::NoGpu);
        assert!(by("cpu").operands.is_empty());
        // An unlabelled GPU node advertising nothing is in the report, with the default
        // workload and its operands.
        let g = by("gpu");
        assert_eq!(g.effective_workload, Some(WorkloadConfig::Container));
        assert_eq!(g.gpu, GpuEvidence::Nfd);
        assert!(g.operands.contains(&"device-plugin".to_string()), "{g:?}");
        // operands=false: no workload, no operands, the verdict stays the seed's.
        let mut off = labelled.clone();
        off.name = "off".into();
        off.labels
            .insert("nvidia.com/gpu.deploy.operands".into(), "false".into());
        let r = judge(&off, &Classifier::default(), None);
        assert_eq!((r.verdict, r.effective_workload), (Verdict::Ok, None));
        assert_eq!(r.operator_scope, OperatorScope::OperandsDisabled);
        assert!(r.operands.is_empty());
    }

    fn dra(move_devices_to: &str, extended: Option<&str>) -> DraNodes {
        let mut d = crate::decode::dra::read_str(
            include_str!("../../../../../tests/data/dra/two-gpus.json"),
            "two-gpus.json",
        )
        .unwrap();
        for s in &mut d.resource_slices {
            s.node_name = Some(move_devices_to.into());
        }
        if let Some(e) = extended {
            d.device_classes[0].extended_resource_name = Some(e.into());
        }
        DraNodes::from_objects(&d)
    }

    fn check_dra(nodes: &[NodeInfo], dra: DraNodes) -> Report {
        check_with(
            nodes,
            &Options {
                dra: Some(dra),
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_node_published_by_a_device_plugin_and_the_dra_driver_is_flagged() {
        let both = node("both", Some("container"), &[("nvidia.com/gpu", "2")]);
        let plugin_only = node("plugin", Some("container"), &[("nvidia.com/gpu", "2")]);
        let r = check_dra(&[both.clone(), plugin_only], dra("both", None));
        let f = &r.nodes[0].findings;
        assert_eq!(r.nodes[0].name, "both");
        assert_eq!(codes(&r.nodes[0]), [Code::DraAndDevicePlugin]);
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(
            f[0].message,
            "GPUs published twice: a device plugin advertises nvidia.com/gpu 2 and the DRA driver gpu.nvidia.com publishes 4 device(s) on this node; the two allocate independently and can hand out the same GPU twice — run one of them per node"
        );
        assert!(
            codes(&r.nodes[1]).is_empty(),
            "plugin only: {:?}",
            r.nodes[1]
        );
        assert_eq!(r.nodes[0].verdict, Verdict::Ok);
        // A DeviceClass offering the same name through DRA is named.
        let r = check_dra(&[both], dra("both", Some("nvidia.com/gpu")));
        // nvidia.com/gpu is listed by the node itself, so the plugin still advertises it.
        let f = &r.nodes[0].findings;
        assert_eq!(codes(&r.nodes[0]), [Code::DraAndDevicePlugin]);
        assert!(
            f[0].message.ends_with("; DeviceClass gpu.nvidia.com also offers nvidia.com/gpu through DRA, so a pod asking for it may get either"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn an_extended_resource_name_of_a_device_class_counts_as_advertised() {
        let dra_only = node("dra-node", Some("container"), &[]);
        let r = check_dra(std::slice::from_ref(&dra_only), dra("dra-node", None));
        // NVIDIA's classes set no extendedResourceName: the node's GPUs come only through
        // DRA, and it is judged as a DRA node (issue 34), never "advertises no GPU".
        assert_eq!(r.nodes[0].verdict, Verdict::Ok, "{:?}", r.nodes[0]);
        assert_eq!(codes(&r.nodes[0]), [Code::GpusViaDra]);
        assert_eq!(
            r.nodes[0].dra_devices,
            Some(4),
            "two GPUs, each as gpu and vfio"
        );
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        let r = check_dra(&[dra_only], dra("dra-node", Some("nvidia.com/gpu")));
        // The class selects the 2 `gpu` devices: nvidia.com/gpu 2, a container resource.
        assert_eq!(r.nodes[0].verdict, Verdict::Ok, "{:?}", r.nodes[0]);
        assert_eq!(r.nodes[0].resources[0].name, "nvidia.com/gpu");
        assert_eq!(r.nodes[0].resources[0].allocatable.as_deref(), Some("2"));
        assert!(
            !codes(&r.nodes[0]).contains(&Code::DraAndDevicePlugin),
            "a name offered through DRA is not a device plugin"
        );
    }
}
