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
use std::fmt;

use serde::Serialize;

use crate::error::ExitStatus;
use crate::model::node::{NodeInfo, ResourceField};
use crate::model::operator::{
    ClusterPolicy, LabelState, StateCode, StateSeverity, WorkloadSource, effective_workload,
    state_findings,
};
use crate::model::pciids;
use crate::model::quantity::Quantity;
use crate::model::resource::{self, Classifier, NVIDIA_PREFIX, ResourceClass};
use crate::model::workload::{DEFAULT_WORKLOAD, DEFAULT_WORKLOAD_FIELD, LABEL_KEY, WorkloadConfig};

/// The check's code for an operator-state finding.
fn state_code(c: StateCode) -> Code {
    match c {
        StateCode::VgpuConfigFailed => Code::VgpuConfigFailed,
        StateCode::MigConfigFailed => Code::MigConfigFailed,
        StateCode::ConfigPending => Code::ConfigPending,
        StateCode::OperandPaused => Code::OperandPaused,
        StateCode::OperandsDisabled => Code::OperandsDisabled,
        StateCode::LabelIgnored => Code::LabelIgnored,
        StateCode::VgpuConfigTypeDiffers => Code::VgpuConfigTypeDiffers,
        StateCode::GpuPresentWithoutOperands => Code::GpuPresentWithoutOperands,
    }
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Makes a labelled node a MISMATCH (exit 1).
    Error,
    /// Worth a look; does not change the exit code.
    Warning,
    /// For the record (ignored non-GPU resources).
    Info,
}

/// Stable finding codes (serialized in kebab-case, e.g. `wrong-class-resource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// error: the label value is not `container`, `vm-passthrough` or `vm-vgpu`.
    InvalidLabelValue,
    /// error: a labelled node advertises no GPU resource with a quantity > 0.
    NoGpuResource,
    /// error: a labelled node advertises a GPU resource of another class.
    WrongClassResource,
    /// error on labelled nodes, warning otherwise: an `nvidia.com/` quantity does not
    /// parse.
    InvalidQuantity,
    /// warning: a GPU resource is listed with 0 (stale entry after a device plugin left).
    StaleZero,
    /// warning: capacity > allocatable (unhealthy devices, or the kubelet's 5-minute
    /// grace period after a relabel).
    CapacityExceedsAllocatable,
    /// warning: a passthrough name that is a lower-case hex device id (the plugin's
    /// pci.ids lacks the device).
    HexIdFallback,
    /// warning: a passthrough name with lower-case letters (no current plugin advertises
    /// such names).
    MixedCaseModel,
    /// info: a non-GPU NVIDIA resource (Network Operator, `--ignore-resource`), ignored.
    IgnoredResource,
    /// warning: a node without the label advertises GPUs; the operator gives it the
    /// default workload.
    UnlabelledGpuNode,
    /// warning: `nvidia.com/vgpu.config.state=failed` (the GPU Operator's own state; see
    /// [`crate::model::operator`] for these eight).
    VgpuConfigFailed,
    /// warning: `nvidia.com/mig.config.state=failed`.
    MigConfigFailed,
    /// info: a vGPU or MIG config state `pending` / `rebooting`.
    ConfigPending,
    /// info: an operand deploy label `paused-for-*`.
    OperandPaused,
    /// warning: `nvidia.com/gpu.deploy.operands=false`.
    OperandsDisabled,
    /// warning: a workload label the operator does not follow (sandbox workloads disabled,
    /// or deploy labels of another workload).
    LabelIgnored,
    /// warning: `nvidia.com/vgpu.config` names another vGPU type than the advertised one.
    VgpuConfigTypeDiffers,
    /// warning: an NVIDIA GPU (`nvidia.com/gpu.present`, NFD `pci-10de`) without any
    /// operand deploy label.
    GpuPresentWithoutOperands,
}

impl Code {
    /// The kebab-case code string, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidLabelValue => "invalid-label-value",
            Code::NoGpuResource => "no-gpu-resource",
            Code::WrongClassResource => "wrong-class-resource",
            Code::InvalidQuantity => "invalid-quantity",
            Code::StaleZero => "stale-zero",
            Code::CapacityExceedsAllocatable => "capacity-exceeds-allocatable",
            Code::HexIdFallback => "hex-id-fallback",
            Code::MixedCaseModel => "mixed-case-model",
            Code::IgnoredResource => "ignored-resource",
            Code::UnlabelledGpuNode => "unlabelled-gpu-node",
            Code::VgpuConfigFailed => "vgpu-config-failed",
            Code::MigConfigFailed => "mig-config-failed",
            Code::ConfigPending => "config-pending",
            Code::OperandPaused => "operand-paused",
            Code::OperandsDisabled => "operands-disabled",
            Code::LabelIgnored => "label-ignored",
            Code::VgpuConfigTypeDiffers => "vgpu-config-type-differs",
            Code::GpuPresentWithoutOperands => "gpu-present-without-operands",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One observation about one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable code.
    pub code: Code,
    /// Severity (only `error` makes a mismatch).
    pub severity: Severity,
    /// The resource concerned, when there is one (full name, `nvidia.com/...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// One-line human explanation.
    pub message: String,
}

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
    /// Not labelled: not judged (may still carry warnings).
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
    /// The workload the operator applies ([`effective_workload`]).
    pub effective_workload: WorkloadConfig,
    /// Which source decided it: `label`, `cluster-policy`, `deploy-labels`, `default`.
    pub workload_source: WorkloadSource,
    /// The verdict.
    pub verdict: Verdict,
    /// For a mismatch: the reason printed after `MISMATCH=<node> `.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The node's `nvidia.com/` resources.
    pub resources: Vec<ResourceEntry>,
    /// Findings, errors first.
    pub findings: Vec<Finding>,
}

/// The result of checking a set of nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Labelled nodes and unlabelled nodes with findings, sorted by name.
    pub nodes: Vec<NodeReport>,
    /// How many nodes were read.
    pub nodes_seen: usize,
    /// How many carried the label (the `OK=<n>` number).
    pub labelled: usize,
    /// With [`Options::warning_lines`]: the first [`WARNING_LINES`] warnings as
    /// `<node>: <message>` (control characters escaped), in input order.
    pub warning_lines: Vec<String>,
    /// With [`Options::warning_lines`]: how many warnings there were in all.
    pub warnings_total: usize,
}

/// How many warning lines a text-mode report keeps (the rest are counted).
pub const WARNING_LINES: usize = 50;

impl Report {
    /// The mismatching nodes, sorted by name.
    pub fn mismatches(&self) -> impl Iterator<Item = &NodeReport> {
        self.nodes.iter().filter(|n| n.verdict == Verdict::Mismatch)
    }

    /// [`ExitStatus::Mismatch`] (1) when any node mismatches, else [`ExitStatus::Ok`] (0).
    pub fn exit_status(&self) -> ExitStatus {
        if self.mismatches().next().is_some() {
            ExitStatus::Mismatch
        } else {
            ExitStatus::Ok
        }
    }

    /// The seed contract's stdout lines: `MISMATCH=<node> <reason>` per mismatching node
    /// sorted by name, or the single line `OK=<labelled nodes>`.
    pub fn text_lines(&self) -> Vec<String> {
        let v: Vec<String> = self
            .mismatches()
            .map(|n| {
                one_line(&format!(
                    "MISMATCH={} {}",
                    n.name,
                    n.reason.as_deref().unwrap_or("")
                ))
            })
            .collect();
        if v.is_empty() {
            vec![format!("OK={}", self.labelled)]
        } else {
            v
        }
    }

    /// Number of findings of `severity` over all nodes.
    pub fn count(&self, severity: Severity) -> usize {
        self.nodes
            .iter()
            .flat_map(|n| &n.findings)
            .filter(|f| f.severity == severity)
            .count()
    }
}

/// `s` with control characters escaped (`\n` → `\\n`), so that a resource name or label
/// taken from a dump cannot split or forge a `MISMATCH=` line.
fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
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
}

impl Checker {
    /// A checker with `options`.
    pub fn new(options: &Options) -> Checker {
        Checker {
            classifier: Classifier::with_ignore_globs(options.ignore_resources.iter().cloned()),
            policy: options.cluster_policy.clone(),
            warning_lines: options.warning_lines,
            report: Report::default(),
            mismatches_only: options.mismatches_only,
        }
    }

    /// Judges one node and records its report when it is labelled or has findings.
    pub fn add(&mut self, node: &NodeInfo) {
        self.report.nodes_seen += 1;
        let r = judge(node, &self.classifier, self.policy.as_ref());
        if r.label.is_some() {
            self.report.labelled += 1;
        }
        if self.warning_lines {
            for f in r
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Warning)
            {
                self.report.warnings_total += 1;
                if self.report.warning_lines.len() < WARNING_LINES {
                    self.report
                        .warning_lines
                        .push(one_line(&format!("{}: {}", r.name, f.message)));
                }
            }
        }
        let keep = if self.mismatches_only {
            r.verdict == Verdict::Mismatch
        } else {
            r.label.is_some() || !r.findings.is_empty()
        };
        if keep {
            self.report.nodes.push(r);
        }
    }

    /// The report, nodes sorted by name.
    pub fn finish(mut self) -> Report {
        self.report.nodes.sort_by(|a, b| a.name.cmp(&b.name));
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
pub fn check_with<I>(nodes: I, options: &Options) -> Report
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

fn expected_wording(w: WorkloadConfig) -> &'static str {
    match w {
        WorkloadConfig::Container => "a container-GPU resource",
        WorkloadConfig::VmPassthrough => "a device-model resource",
        WorkloadConfig::VmVgpu => "a vGPU type resource",
    }
}

/// Judges one node (whether or not it is labelled) under `policy` (`None`: no
/// ClusterPolicy known). The verdict follows the label (the line contract); the GPU
/// Operator's own state adds findings ([`state_findings`]) and, for a mismatch it explains,
/// its cause to the reason.
pub fn judge(
    node: &NodeInfo,
    classifier: &Classifier,
    policy: Option<&ClusterPolicy>,
) -> NodeReport {
    let label = node.label(LABEL_KEY).map(str::to_owned);
    let labelled = label.is_some();
    let field = node.advertising_field();
    let mut findings = Vec::new();
    let mut resources = Vec::new();
    let mut bad_quantity = false;
    let finding = |code, severity, resource: Option<&str>, message: String| Finding {
        code,
        severity,
        resource: resource.map(str::to_owned),
        message,
    };

    for name in node.resource_names() {
        let class = classifier.classify(name);
        if class == ResourceClass::NotNvidia {
            continue;
        }
        let cap_raw = node.raw(ResourceField::Capacity, name);
        let alloc_raw = node.raw(ResourceField::Allocatable, name);
        let mut entry = ResourceEntry {
            name: name.to_owned(),
            class,
            capacity: cap_raw.map(str::to_owned),
            allocatable: alloc_raw.map(str::to_owned),
            advertised: false,
        };
        if !class.is_gpu() {
            findings.push(finding(
                Code::IgnoredResource,
                Severity::Info,
                Some(name),
                format!("{name} is not a GPU resource (NVIDIA Network Operator or --ignore-resource); ignored"),
            ));
            resources.push(entry);
            continue;
        }
        let mut parsed = |f: ResourceField, raw: Option<&str>| -> Option<Quantity> {
            // The API server accepts only whole, non-negative counts of an extended
            // resource (kubernetes/kubernetes `ValidateResourceQuantityValue`: integer
            // resource, >= 0); device plugins advertise device counts. Anything else is a
            // hand-made or corrupt value, not a count to judge by.
            let q = match Quantity::parse(raw?) {
                Err(e) => Err(format!("not a valid quantity ({e})")),
                // The one count rule inventory and explain apply too (`to_count`).
                Ok(q) => match q.to_count() {
                    Ok(_) => Ok(q),
                    Err(_) if q.is_negative() => {
                        Err("not a valid device count (negative)".to_string())
                    }
                    Err(_) if !q.is_integer() => Err(
                        "not a valid device count (extended resources are whole numbers)"
                            .to_string(),
                    ),
                    Err(_) => {
                        Err("not a valid device count (too large: over 2^63-1 units)".to_string())
                    }
                },
            };
            match q {
                Ok(q) => Some(q),
                Err(e) => {
                    bad_quantity = true;
                    findings.push(finding(
                        Code::InvalidQuantity,
                        if labelled {
                            Severity::Error
                        } else {
                            Severity::Warning
                        },
                        Some(name),
                        format!(
                            "{}[{}] is {}, {e}",
                            f.path(),
                            crate::error::cut(name),
                            crate::error::cut(raw.unwrap_or_default())
                        ),
                    ));
                    None
                }
            }
        };
        let cap = parsed(ResourceField::Capacity, cap_raw);
        let alloc = parsed(ResourceField::Allocatable, alloc_raw);
        let adv = match field {
            ResourceField::Allocatable => alloc.as_ref(),
            ResourceField::Capacity => cap.as_ref(),
        };
        entry.advertised = adv.is_some_and(Quantity::is_positive);
        if adv.is_some_and(|q| !q.is_positive()) {
            findings.push(finding(
                Code::StaleZero,
                Severity::Warning,
                Some(name),
                format!(
                    "{name} is listed in {} with {} and is not counted as advertised (the kubelet keeps a stale 0 after a device plugin goes away)",
                    field.path(),
                    adv.map(ToString::to_string).unwrap_or_default()
                ),
            ));
        }
        if let (Some(c), Some(a)) = (&cap, &alloc)
            && c > a
        {
            findings.push(finding(
                Code::CapacityExceedsAllocatable,
                Severity::Warning,
                Some(name),
                format!(
                    "{name} capacity {c} > allocatable {a}: unhealthy devices, or the kubelet's 5-minute grace period after a device plugin went away"
                ),
            ));
        }
        let short = &name[NVIDIA_PREFIX.len()..];
        if class == ResourceClass::PassthroughModel && entry.advertised {
            if resource::is_hex_fallback(short) {
                let known = u16::from_str_radix(short, 16)
                    .ok()
                    .and_then(pciids::by_id)
                    .map(|d| format!(" (gpuwl's pci.ids knows it as {:?})", d.pci_name))
                    .unwrap_or_default();
                findings.push(finding(
                    Code::HexIdFallback,
                    Severity::Warning,
                    Some(name),
                    format!(
                        "{name} is the sandbox device plugin's hex-id fallback: its pci.ids lacks device 0x{short}{known}; a plugin update will rename the resource"
                    ),
                ));
            } else if resource::is_mixed_case_model(short) {
                findings.push(finding(
                    Code::MixedCaseModel,
                    Severity::Warning,
                    Some(name),
                    format!(
                        "{name} has lower-case letters: the sandbox device plugin upper-cases device names since v1.1.1, so no current plugin advertises it"
                    ),
                ));
            }
        }
        resources.push(entry);
    }

    let advertised: Vec<&ResourceEntry> = resources
        .iter()
        .filter(|r| r.advertised && r.class.is_gpu())
        .collect();
    let list = |v: &[&ResourceEntry]| {
        v.iter()
            .map(|r| {
                let amount = match field {
                    ResourceField::Allocatable => r.allocatable.as_deref(),
                    ResourceField::Capacity => r.capacity.as_deref(),
                };
                format!(
                    "{}={} ({})",
                    r.name,
                    amount.unwrap_or(""),
                    r.class.describe()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };

    let mut effective = DEFAULT_WORKLOAD;
    match &label {
        None => {
            if !advertised.is_empty() {
                findings.push(finding(
                    Code::UnlabelledGpuNode,
                    Severity::Warning,
                    None,
                    format!(
                        "no {LABEL_KEY} label: the operator applies {DEFAULT_WORKLOAD_FIELD} (default {DEFAULT_WORKLOAD}); the node advertises {}",
                        list(&advertised)
                    ),
                ));
            }
        }
        Some(value) => match value.parse::<WorkloadConfig>() {
            Err(e) => findings.push(finding(
                Code::InvalidLabelValue,
                Severity::Error,
                None,
                format!(
                    "label value {e}: the operator silently falls back to {DEFAULT_WORKLOAD_FIELD} (default {DEFAULT_WORKLOAD})"
                ),
            )),
            Ok(w) => {
                effective = w;
                let want = ResourceClass::for_workload(w);
                let wrong: Vec<&ResourceEntry> =
                    advertised.iter().copied().filter(|r| r.class != want).collect();
                if !wrong.is_empty() {
                    findings.push(finding(
                        Code::WrongClassResource,
                        Severity::Error,
                        Some(&wrong[0].name),
                        format!(
                            "label {w} expects {}, but the node advertises {}",
                            expected_wording(w),
                            list(&wrong)
                        ),
                    ));
                } else if advertised.is_empty() && !bad_quantity {
                    // Why each GPU resource the node lists does not count: a 0 in the
                    // advertising map, or no entry there at all (capacity only).
                    let gpu = || resources.iter().filter(|r| r.class.is_gpu());
                    let in_field = |r: &ResourceEntry| match field {
                        ResourceField::Allocatable => r.allocatable.is_some(),
                        ResourceField::Capacity => r.capacity.is_some(),
                    };
                    let zeros: Vec<&str> =
                        gpu().filter(|r| in_field(r)).map(|r| r.name.as_str()).collect();
                    let absent: Vec<String> = gpu()
                        .filter(|r| !in_field(r))
                        .map(|r| {
                            format!(
                                "{} only in status.capacity (={})",
                                r.name,
                                r.capacity.as_deref().unwrap_or_default()
                            )
                        })
                        .collect();
                    let mut why = Vec::new();
                    if !zeros.is_empty() {
                        why.push(format!("{} listed with 0", zeros.join(", ")));
                    }
                    if !absent.is_empty() {
                        why.push(format!(
                            "{}, not in {}",
                            absent.join(", "),
                            field.path()
                        ));
                    }
                    let tail = if why.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", why.join("; "))
                    };
                    findings.push(finding(
                        Code::NoGpuResource,
                        Severity::Error,
                        None,
                        format!(
                            "label {w} expects {}, but the node advertises no GPU resource{tail}",
                            expected_wording(w)
                        ),
                    ));
                }
            }
        },
    }

    let vgpu_types: Vec<&str> = advertised
        .iter()
        .filter(|r| r.class == ResourceClass::VgpuType)
        .map(|r| r.name.as_str())
        .collect();
    let mut state_causes = Vec::new();
    for f in state_findings(node, policy, &vgpu_types) {
        state_causes.extend(f.cause.clone());
        findings.push(finding(
            state_code(f.code),
            match f.severity {
                StateSeverity::Warning => Severity::Warning,
                StateSeverity::Info => Severity::Info,
            },
            None,
            f.message,
        ));
    }
    let eff = effective_workload(node, policy);
    if eff.label != LabelState::Valid {
        effective = eff.workload;
    }

    findings.sort_by_key(|f| f.severity);
    let errors: Vec<&str> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.as_str())
        .collect();
    let (verdict, reason) = match (&label, errors.is_empty()) {
        (None, _) => (Verdict::NotJudged, None),
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
    NodeReport {
        name: node.name.clone(),
        label,
        effective_workload: if eff.label_ignored {
            eff.workload
        } else {
            effective
        },
        workload_source: eff.source,
        verdict,
        reason,
        resources,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(lean.text_lines(), full.text_lines());
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
        assert_eq!(r.text_lines(), ["OK=3"]);
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert_eq!(r.nodes_seen, 4);
        assert_eq!(r.nodes.len(), 3);
    }

    #[test]
    fn no_labelled_nodes_is_ok_0() {
        let r = check([node("a", None, &[]), node("b", None, &[])]);
        assert_eq!(r.text_lines(), ["OK=0"]);
        assert_eq!(r.exit_status(), ExitStatus::Ok);
        assert!(check(Vec::<NodeInfo>::new()).text_lines() == ["OK=0"]);
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
            r.text_lines(),
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
        assert_eq!(r.text_lines(), ["OK=1"]);
        assert_eq!(codes(&r.nodes[0]), [Code::StaleZero, Code::StaleZero]);
    }

    #[test]
    fn invalid_label_values() {
        for v in ["vm_passthrough", "Container", "", "VM-VGPU"] {
            let r = check([node("n", Some(v), &[("nvidia.com/gpu", "1")])]);
            let lines = r.text_lines();
            assert_eq!(lines.len(), 1);
            assert!(
                lines[0].starts_with(&format!("MISMATCH=n label value {v:?} is not one of")),
                "{lines:?}"
            );
            assert_eq!(r.nodes[0].effective_workload, WorkloadConfig::Container);
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
                r.text_lines()
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
            r.text_lines(),
            [
                "MISMATCH=n label container expects a container-GPU resource, but the node advertises nvidia.com/GA102GL_A10=1 (device model)"
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
        let l = r.text_lines();
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
        assert_eq!(check([&n]).text_lines(), ["OK=1"]);
        // an allocatable map without the key: not advertised
        n.allocatable = Some(BTreeMap::new());
        assert_eq!(check([&n]).exit_status(), ExitStatus::Mismatch);
        let mut g = node("g", Some("container"), &[("nvidia.com/gpu", "2")]);
        g.capacity.insert("nvidia.com/gpu".into(), "4".into());
        let r = check([g]);
        assert_eq!(r.text_lines(), ["OK=1"]);
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
        assert_eq!(r.text_lines(), ["OK=3"]);
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
        assert_eq!(check_with([&n], &o).text_lines(), ["OK=1"]);
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
        };
        let n = node(
            "pt",
            Some("vm-passthrough"),
            &[("nvidia.com/GA102GL_A10", "2")],
        );
        let r = judge(&n, &Classifier::default(), Some(&p));
        assert_eq!(r.verdict, Verdict::Ok);
        assert_eq!(codes(&r), [Code::LabelIgnored]);
        assert_eq!(r.effective_workload, WorkloadConfig::Container);
        assert_eq!(r.workload_source, WorkloadSource::ClusterPolicy);
    }
}
