//! The GPU Operator's own state: its ClusterPolicy's sandbox-workload settings, the
//! effective workload config of a node (and which source decided it), and the state labels
//! the operator and its managers write onto nodes.
//!
//! Facts (docs/domain-facts.md §1, §7):
//! - NVIDIA/gpu-operator `controllers/state_manager.go` (`getWorkloadConfig`,
//!   `gpuStateLabels`): the workload label is honoured only when ClusterPolicy
//!   `spec.sandboxWorkloads.enabled` is true; an absent or invalid label falls back to
//!   `spec.sandboxWorkloads.defaultWorkload` (CRD default `container`,
//!   `api/nvidia/v1/clusterpolicy_types.go`); with sandbox workloads disabled every GPU
//!   node is `container`. The operator then labels the node
//!   `nvidia.com/gpu.deploy.<operand>` for the operands of that workload
//!   ([`WorkloadConfig::deploy_labels`]); `nvidia.com/gpu.deploy.operands=false` turns
//!   them all off.
//! - NVIDIA/mig-parted (`deployments/gpu-operator/`) and NVIDIA/vgpu-device-manager: while
//!   they reconfigure a GPU they set the operand deploy labels to `paused-for-mig-change` /
//!   `paused-for-vgpu-change`, and report the requested config (`nvidia.com/mig.config`,
//!   `nvidia.com/vgpu.config`) and its state (`….config.state`: `pending`, `rebooting`
//!   (MIG), `success`, `failed`).
//! - `nvidia.com/gpu.present=true` (gpu-operator) and NFD's
//!   `feature.node.kubernetes.io/pci-10de.present=true` mark nodes that have an NVIDIA GPU.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::advertise;
use crate::model::finding::{Code, Severity};
use crate::model::node::NodeInfo;
use crate::model::workload::{
    DEFAULT_WORKLOAD, DEFAULT_WORKLOAD_FIELD, DEPLOY_LABEL_PREFIX, ENABLE_FLAG, LABEL_KEY,
    WorkloadConfig,
};

/// `nvidia.com/gpu.deploy.operands`: `false` disables every operand on the node.
pub(crate) const DEPLOY_OPERANDS_LABEL: &str = "nvidia.com/gpu.deploy.operands";
/// The vGPU config the vGPU device manager applies (a name from its config map).
pub const VGPU_CONFIG_LABEL: &str = "nvidia.com/vgpu.config";
/// The state of [`VGPU_CONFIG_LABEL`]: `pending`, `success`, `failed`.
pub(crate) const VGPU_CONFIG_STATE_LABEL: &str = "nvidia.com/vgpu.config.state";
/// The MIG config the MIG manager applies (a name from its config map).
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The state of [`MIG_CONFIG_LABEL`]: `pending`, `rebooting`, `success`, `failed`.
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// Set by the GPU Operator on nodes with an NVIDIA GPU.
pub(crate) const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// Set by Node Feature Discovery on nodes with a PCI device of vendor 10de.
pub(crate) const NFD_NVIDIA_PCI_LABEL: &str = "feature.node.kubernetes.io/pci-10de.present";
/// The NFD labels by which the operator finds GPU nodes (any of them `true`):
/// NVIDIA/gpu-operator `controllers/state_manager.go` `gpuNodeLabels`, `hasGPULabels`.
pub(crate) const NFD_GPU_LABELS: [&str; 3] = [
    NFD_NVIDIA_PCI_LABEL,
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
];
/// The prefix of every NFD label (`nfdLabelPrefix`, same file): a node carrying one was
/// seen by NFD, so the absence of [`NFD_GPU_LABELS`] there means no NVIDIA GPU.
pub(crate) const NFD_LABEL_PREFIX: &str = "feature.node.kubernetes.io/";
/// `nvidia.com/gpu.deploy.mig-manager`: added on container nodes with a MIG-capable GPU
/// (`migManagerLabelKey`, `addGPUStateLabels`, same file).
pub(crate) const MIG_MANAGER_DEPLOY_LABEL: &str = "nvidia.com/gpu.deploy.mig-manager";
/// `nvidia.com/mig.capable` (GFD): `true` on MIG-capable GPUs.
pub(crate) const MIG_CAPABLE_LABEL: &str = "nvidia.com/mig.capable";
/// `nvidia.com/vgpu.host-driver-version`: set on vGPU nodes, which never get a MIG manager.
pub const VGPU_HOST_DRIVER_LABEL: &str = "nvidia.com/vgpu.host-driver-version";
/// `nvidia.com/gpu.product` (GFD).
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// What gpuwl reads of a `nvidia.com/v1` ClusterPolicy (cluster-scoped, usually one,
/// named `cluster-policy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPolicy {
    /// `metadata.name`.
    pub name: String,
    /// `spec.sandboxWorkloads.enabled` (absent: `false`).
    pub sandbox_enabled: bool,
    /// `spec.sandboxWorkloads.defaultWorkload` when valid, else `container`.
    pub default_workload: WorkloadConfig,
    /// `spec.sandboxWorkloads.defaultWorkload` verbatim, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_workload_raw: Option<String>,
    /// `spec.sandboxWorkloads.mode` (`kubevirt` or `kata`), when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `spec.vgpuManager.enabled`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_manager_enabled: Option<bool>,
    /// `spec.vgpuDeviceManager.config.default` (the vGPU config of nodes without
    /// [`VGPU_CONFIG_LABEL`]), when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_default_config: Option<String>,
    /// `spec.migManager.config.default`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_default_config: Option<String>,
    /// `status.state` (`ready`, `notReady`, `ignored`), when set: the operator's own
    /// verdict on its operands (NVIDIA/gpu-operator `api/nvidia/v1/clusterpolicy_types.go`,
    /// `State`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// `spec.<component>.enabled` where the policy sets it, by operand name
    /// (`device-plugin` for `spec.devicePlugin`, `sandbox-device-plugin`, `vfio-manager`,
    /// `vgpu-manager`, `vgpu-device-manager`, `driver`); [`ClusterPolicy::operand_enabled`]
    /// applies the CRD's defaults to the others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub components: BTreeMap<String, bool>,
}

/// The ClusterPolicy components whose `enabled` gpuwl reads: operand name (as in
/// `nvidia.com/gpu.deploy.<operand>`), `spec` key, and the default when `enabled` is not
/// set — each component's `IsEnabled` in NVIDIA/gpu-operator
/// `api/nvidia/v1/clusterpolicy_types.go`: the driver and the device plugin are on unless
/// disabled; the sandbox device plugin, the VFIO manager, the vGPU manager and the vGPU
/// device manager are off unless enabled (the Helm chart's values enable all but the vGPU
/// manager).
pub const POLICY_COMPONENTS: [(&str, &str, bool); 6] = [
    ("driver", "driver", true),
    ("device-plugin", "devicePlugin", true),
    ("sandbox-device-plugin", "sandboxDevicePlugin", false),
    ("vfio-manager", "vfioManager", false),
    ("vgpu-manager", "vgpuManager", false),
    ("vgpu-device-manager", "vgpuDeviceManager", false),
];

impl ClusterPolicy {
    /// Whether the policy deploys `operand` (a `nvidia.com/gpu.deploy.<operand>` name) at
    /// all: its `spec.<component>.enabled`, else the CRD's default ([`POLICY_COMPONENTS`]);
    /// `true` for an operand gpuwl does not read.
    pub fn operand_enabled(&self, operand: &str) -> bool {
        if let Some(on) = self.components.get(operand) {
            return *on;
        }
        if operand == "vgpu-manager"
            && let Some(on) = self.vgpu_manager_enabled
        {
            return on;
        }
        POLICY_COMPONENTS
            .iter()
            .find(|(op, _, _)| *op == operand)
            .is_none_or(|(_, _, default)| *default)
    }
}

/// Where the ClusterPolicy came from, or why there is none (`clusterPolicy` in JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// `file`, `cluster`, `absent-crd` (the API has no `clusterpolicies.nvidia.com`),
    /// `no-object`, `unreadable` (listing failed: forbidden, timed out; the message says
    /// which) or `not-read` (offline, no `--cluster-policy`).
    pub status: &'static str,
    /// The policy read, when one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ClusterPolicy>,
    /// A one-line remark (several objects, a listing error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PolicyStatus {
    /// No ClusterPolicy given (offline without `--cluster-policy`).
    pub fn not_read() -> PolicyStatus {
        PolicyStatus {
            status: "not-read",
            policy: None,
            note: None,
        }
    }

    /// The policy, if any.
    pub fn policy(&self) -> Option<&ClusterPolicy> {
        self.policy.as_ref()
    }
}

/// Which source decided a node's effective workload config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadSource {
    /// The node's valid [`LABEL_KEY`] value (sandbox workloads enabled, or no ClusterPolicy
    /// known and nothing contradicts it).
    Label,
    /// The ClusterPolicy: sandbox workloads disabled (every node `container`), or its
    /// `defaultWorkload` for a node without a valid label.
    ClusterPolicy,
    /// No ClusterPolicy known: inferred from the operator's `gpu.deploy.*` labels.
    DeployLabels,
    /// Nothing known: the CRD default, `container`.
    Default,
}

impl WorkloadSource {
    /// The stable code: `label`, `cluster-policy`, `deploy-labels`, `default`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadSource::Label => "label",
            WorkloadSource::ClusterPolicy => "cluster-policy",
            WorkloadSource::DeployLabels => "deploy-labels",
            WorkloadSource::Default => "default",
        }
    }
}

/// The state of a node's workload label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelState {
    /// One of the three values.
    Valid,
    /// No label.
    Absent,
    /// A value that is not one of the three.
    Invalid,
}

/// What tells whether a node has an NVIDIA GPU ([`gpu_evidence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuEvidence {
    /// One of NFD's [`NFD_GPU_LABELS`] is `true`: the operator manages the node.
    Nfd,
    /// No NFD GPU label, but the node lists an NVIDIA GPU resource (a device plugin ran
    /// there): a GPU is assumed.
    Advertised,
    /// The node carries NFD labels ([`NFD_LABEL_PREFIX`]) but none of
    /// [`NFD_GPU_LABELS`]: no NVIDIA GPU; the operator leaves it alone (and resets a
    /// `nvidia.com/gpu.present=true` it finds there to `false`, with every deploy label
    /// removed).
    NoGpu,
    /// No NFD label at all, but labels a GPU stack writes ([`GPU_STACK_LABELS`], a
    /// `nvidia.com/gpu.deploy.*` label): a GPU is assumed (a dump that lost NFD's labels,
    /// or NFD not deployed under a running stack).
    Unknown,
    /// No NFD label at all and nothing else of a GPU: no GPU resource listed, none of
    /// [`GPU_STACK_LABELS`], no deploy label. The operator finds GPU nodes by NFD's labels
    /// only (`hasGPULabels`; `reconcileCommonGPULabel` in
    /// NVIDIA/gpu-operator `controllers/nodelabeling_controller.go` sets
    /// `nvidia.com/gpu.present` from them and `updateGPUStateLabels` there removes every
    /// deploy label from a node without it), so it never reads this node's workload label
    /// and deploys nothing; `check --effective` does not count it as a GPU node. Plain
    /// `check` still judges its label (the lab's line contract).
    None,
}

/// Labels only a GPU stack writes on a node with an NVIDIA GPU: the operator's
/// [`GPU_PRESENT_LABEL`] (`true`), GPU Feature Discovery's product and count
/// (NVIDIA/k8s-device-plugin `internal/lm/resource.go`), the MIG and vGPU managers'
/// config labels.
pub(crate) const GPU_STACK_LABELS: [&str; 5] = [
    GPU_PRESENT_LABEL,
    GPU_PRODUCT_LABEL,
    "nvidia.com/gpu.count",
    MIG_CONFIG_LABEL,
    VGPU_CONFIG_LABEL,
];

/// The GPU evidence of `node` (see [`GpuEvidence`]).
pub(crate) fn gpu_evidence(node: &NodeInfo) -> GpuEvidence {
    if NFD_GPU_LABELS.iter().any(|k| node.label(k) == Some("true")) {
        GpuEvidence::Nfd
    } else if !advertise::gpu_resources(node).is_empty() {
        GpuEvidence::Advertised
    } else if node.labels.keys().any(|k| k.starts_with(NFD_LABEL_PREFIX)) {
        GpuEvidence::NoGpu
    } else if has_deploy_labels(node)
        || GPU_STACK_LABELS.iter().any(|k| match node.label(k) {
            Some(v) => *k != GPU_PRESENT_LABEL || v == "true",
            None => false,
        })
    {
        GpuEvidence::Unknown
    } else {
        GpuEvidence::None
    }
}

impl GpuEvidence {
    /// Whether the operator never manages the node: [`GpuEvidence::NoGpu`] or
    /// [`GpuEvidence::None`].
    pub(crate) fn not_gpu(self) -> bool {
        matches!(self, GpuEvidence::NoGpu | GpuEvidence::None)
    }
}

/// Whether the operator deploys the operands of a workload on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OperatorScope {
    /// It applies the effective workload's operands ([`operands`]).
    Operands,
    /// `nvidia.com/gpu.deploy.operands=false`: it removes every deploy label and deploys
    /// nothing (`hasOperandsDisabled`, `removeAllGPUStateLabels`).
    OperandsDisabled,
    /// NFD shows no NVIDIA GPU ([`GpuEvidence::NoGpu`]), or nothing shows one
    /// ([`GpuEvidence::None`]): the node is not a GPU node to the operator, its workload
    /// label is never read.
    NoGpu,
}

/// A node's effective workload config: what the GPU Operator applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EffectiveWorkload {
    /// The workload config applied.
    pub workload: WorkloadConfig,
    /// Which source decided it.
    pub source: WorkloadSource,
    /// The label's state.
    pub label: LabelState,
    /// Whether the operator does not follow the node's label: a valid label that says
    /// something else than what applies (sandbox workloads disabled, or deploy labels of
    /// another workload), or any label, invalid ones included, where the ClusterPolicy's
    /// sandbox workloads are disabled (NVIDIA/gpu-operator `controllers/state_manager.go`
    /// `getWorkloadConfig` returns `container` before reading it). Also under
    /// `nvidia.com/gpu.deploy.operands=false`, where `workload` is what removing that
    /// label would deploy; never on a node without a GPU.
    pub label_ignored: bool,
    /// Whether the operator applies `workload` at all: on a node without a GPU, or with
    /// its operands disabled, `workload` is what it would apply, and nothing is deployed.
    pub scope: OperatorScope,
}

impl EffectiveWorkload {
    /// The workload whose operands the operator deploys on the node: `None` when
    /// [`EffectiveWorkload::scope`] is not [`OperatorScope::Operands`].
    pub fn applied(&self) -> Option<WorkloadConfig> {
        (self.scope == OperatorScope::Operands).then_some(self.workload)
    }
}

/// Whether the node's GPU is MIG-capable as the operator decides it (`hasMIGCapableGPU`,
/// NVIDIA/gpu-operator `controllers/state_manager.go`): never on a vGPU host
/// ([`VGPU_HOST_DRIVER_LABEL`] set); else [`MIG_CAPABLE_LABEL`] when present; else a
/// product name containing H100, A100 or A30.
pub fn mig_capable(node: &NodeInfo) -> bool {
    if node
        .label(VGPU_HOST_DRIVER_LABEL)
        .is_some_and(|v| !v.is_empty())
    {
        return false;
    }
    if let Some(v) = node.label(MIG_CAPABLE_LABEL) {
        return v == "true";
    }
    node.label(GPU_PRODUCT_LABEL).is_some_and(|p| {
        let p = p.to_lowercase();
        ["h100", "a100", "a30"].iter().any(|m| p.contains(m))
    })
}

/// The operands (the `<x>` of `nvidia.com/gpu.deploy.<x>`) whose deploy label the
/// operator leaves at `true` on `node` once it has reconciled, sorted: none unless
/// `eff.scope` is [`OperatorScope::Operands`]; else each deploy label of the workload
/// ([`WorkloadConfig::deploy_labels`]) that the node does not already carry with another
/// value (the operator adds a missing one as `true` and keeps a value it finds, so a
/// user's `false` or a manager's `paused-for-*` stays, and the operand's DaemonSet, whose
/// nodeSelector asks for `true`, skips the node), plus `mig-manager` on a container node
/// with a MIG-capable GPU ([`mig_capable`]) under the same rule
/// (`addGPUStateLabels`, NVIDIA/gpu-operator `controllers/state_manager.go`). Labels of
/// other workloads are removed by the operator and never count. Whether an operand's
/// DaemonSet exists at all is the ClusterPolicy's `<component>.enabled`, not decided
/// here.
pub fn operands(node: &NodeInfo, eff: &EffectiveWorkload) -> Vec<&'static str> {
    let Some(w) = eff.applied() else {
        return Vec::new();
    };
    let keeps_true = |key: &str| node.label(key).is_none_or(|v| v == "true");
    let mut out: Vec<&'static str> = w
        .deploy_labels()
        .iter()
        .copied()
        .filter(|op| keeps_true(&format!("{DEPLOY_LABEL_PREFIX}{op}")))
        .collect();
    if w == WorkloadConfig::Container && mig_capable(node) && keeps_true(MIG_MANAGER_DEPLOY_LABEL) {
        out.push("mig-manager");
    }
    out.sort_unstable();
    out
}

/// Whether a deploy-label value means the operand is deployed (or paused, i.e. deployed
/// and reconfiguring): anything but `false`.
fn deployed(value: &str) -> bool {
    value != "false"
}

/// The workload whose operands the node's `nvidia.com/gpu.deploy.*` labels show:
/// `vfio-manager` → vm-passthrough; `vgpu-manager` / `vgpu-device-manager` → vm-vgpu;
/// `driver` / `device-plugin` → container. The operator keeps only the set of the node's
/// workload (it removes the others when the workload changes), so labels of two sets at
/// once are not evidence of either: `None` then, and when the node has none of them.
pub(crate) fn workload_from_deploy_labels(node: &NodeInfo) -> Option<WorkloadConfig> {
    let has = |op: &str| {
        node.label(&format!("{DEPLOY_LABEL_PREFIX}{op}"))
            .is_some_and(deployed)
    };
    let found: Vec<WorkloadConfig> = [
        (WorkloadConfig::VmPassthrough, has("vfio-manager")),
        (
            WorkloadConfig::VmVgpu,
            has("vgpu-manager") || has("vgpu-device-manager"),
        ),
        (
            WorkloadConfig::Container,
            has("driver") || has("device-plugin"),
        ),
    ]
    .into_iter()
    .filter_map(|(w, present)| present.then_some(w))
    .collect();
    match found.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// Whether the node carries any `nvidia.com/gpu.deploy.*` label.
pub(crate) fn has_deploy_labels(node: &NodeInfo) -> bool {
    node.labels
        .keys()
        .any(|k| k.starts_with(DEPLOY_LABEL_PREFIX))
}

/// The effective workload config of `node` under `policy` (see the module docs):
/// - ClusterPolicy known: sandbox workloads disabled → `container` (cluster-policy; a valid
///   label is ignored); enabled → a valid label (label), else `defaultWorkload`
///   (cluster-policy);
/// - no ClusterPolicy: a valid label (label) unless the deploy labels show another
///   workload (deploy-labels; the label is ignored); no valid label → the deploy labels
///   (deploy-labels), else `container` (default);
/// - and whether it is applied at all ([`OperatorScope`]): not on a node NFD shows without
///   a GPU ([`gpu_evidence`]), nor under `nvidia.com/gpu.deploy.operands=false`
///   (`labelGPUNodes`, `updateGPUStateLabels`). The operator's reading was compared with
///   the real operator on the local control plane (tests/it/operator_model.rs).
pub fn effective_workload(node: &NodeInfo, policy: Option<&ClusterPolicy>) -> EffectiveWorkload {
    effective_workload_given(node, policy, gpu_evidence(node))
}

/// [`effective_workload`] with the node's GPU evidence given: a caller that knows more
/// than the node's labels and resources (devices NVIDIA's DRA driver publishes there)
/// passes [`GpuEvidence::Unknown`] for a node [`gpu_evidence`] calls
/// [`GpuEvidence::None`].
pub(crate) fn effective_workload_given(
    node: &NodeInfo,
    policy: Option<&ClusterPolicy>,
    gpu: GpuEvidence,
) -> EffectiveWorkload {
    let parsed = node.label(LABEL_KEY).map(str::parse::<WorkloadConfig>);
    let label = match &parsed {
        None => LabelState::Absent,
        Some(Ok(_)) => LabelState::Valid,
        Some(Err(_)) => LabelState::Invalid,
    };
    let valid = parsed.and_then(Result::ok);
    let (workload, source) = match policy {
        Some(p) if !p.sandbox_enabled => (WorkloadConfig::Container, WorkloadSource::ClusterPolicy),
        Some(p) => match valid {
            Some(w) => (w, WorkloadSource::Label),
            None => (p.default_workload, WorkloadSource::ClusterPolicy),
        },
        None => match (valid, workload_from_deploy_labels(node)) {
            (Some(w), Some(d)) if d != w => (d, WorkloadSource::DeployLabels),
            (Some(w), _) => (w, WorkloadSource::Label),
            (None, Some(d)) => (d, WorkloadSource::DeployLabels),
            (None, None) => (DEFAULT_WORKLOAD, WorkloadSource::Default),
        },
    };
    let scope = if gpu.not_gpu() {
        OperatorScope::NoGpu
    } else if node.label(DEPLOY_OPERANDS_LABEL) == Some("false") {
        OperatorScope::OperandsDisabled
    } else {
        OperatorScope::Operands
    };
    EffectiveWorkload {
        workload,
        source,
        label,
        // A valid label that says something else than what applies, or any label where
        // the ClusterPolicy's sandbox workloads are off (`getWorkloadConfig` returns
        // `container` before it reads the label). Under operands=false too: removing
        // that label deploys `workload`, not the label's stack.
        label_ignored: scope != OperatorScope::NoGpu
            && (valid.is_some_and(|w| w != workload)
                || (label == LabelState::Invalid && policy.is_some_and(|p| !p.sandbox_enabled))),
        scope,
    }
}

/// One observation about the operator's state on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateFinding {
    /// Stable code (one of check's [`Code`]s).
    pub code: Code,
    /// Severity: the code's ([`Code::severity`]); none makes a plain-check MISMATCH by
    /// itself ([`Code::in_line_contract`]).
    pub severity: Severity,
    /// What the operator does in this state and what to look at next, one line.
    pub message: String,
    /// A short cause for a MISMATCH reason, e.g. `vgpu.config.state=failed`, when this
    /// state explains why a node advertises nothing.
    pub cause: Option<String>,
}

/// The vGPU type a config name stands for, when the name has the shape of one
/// (`A10-12Q`, `NVIDIA A10-12Q`, `L40S-48Q`): upper-cased, without the `NVIDIA`/`GRID`
/// prefix. Named configs such as `default` give `None`.
pub(crate) fn vgpu_type_core(s: &str) -> Option<String> {
    let up = s.to_uppercase().replace([' ', '_'], "-");
    let core = up
        .strip_prefix("NVIDIA-")
        .or_else(|| up.strip_prefix("GRID-"))
        .unwrap_or(&up)
        .to_owned();
    let (board, size) = core.rsplit_once('-')?;
    let digits = size.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    (!board.is_empty()
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && size.len() > digits.len())
    .then_some(core)
}

/// What the operator-state rules read about one node, gathered once
/// ([`state_findings`]).
pub struct StateFacts<'a> {
    /// The node.
    pub node: &'a NodeInfo,
    /// The ClusterPolicy, when known.
    pub policy: Option<&'a ClusterPolicy>,
    /// The workload the operator applies ([`effective_workload`]).
    pub eff: &'a EffectiveWorkload,
    /// The vGPU type resources the node advertises (full names).
    pub vgpu_types: &'a [&'a str],
}

impl StateFacts<'_> {
    fn vgpu_config(&self) -> &str {
        self.node.label(VGPU_CONFIG_LABEL).unwrap_or("")
    }

    fn mig_config(&self) -> &str {
        self.node.label(MIG_CONFIG_LABEL).unwrap_or("")
    }
}

/// An operator-state rule: a finding about the node, or none.
pub(crate) type StateRule = fn(&StateFacts<'_>) -> Option<StateFinding>;

/// The operator-state rules, in the order their findings are listed, with the code each
/// gives.
pub(crate) const STATE_RULES: [(Code, StateRule); 10] = [
    (Code::LabelWithoutGpu, label_without_gpu),
    (Code::VgpuConfigFailed, vgpu_config_failed),
    (Code::ConfigPending, vgpu_config_pending),
    (Code::MigConfigFailed, mig_config_failed),
    (Code::ConfigPending, mig_config_pending),
    (Code::OperandPaused, operand_paused),
    (Code::OperandsDisabled, operands_disabled),
    (Code::LabelIgnored, label_ignored),
    (Code::VgpuConfigTypeDiffers, vgpu_config_type_differs),
    (
        Code::GpuPresentWithoutOperands,
        gpu_present_without_operands,
    ),
];

/// The operator-state findings of `node` ([`STATE_RULES`]): a label on a node without a
/// GPU, failed or pending vGPU/MIG
/// configs, paused or disabled operands, an ignored workload label, a vGPU config that
/// names another type than the advertised `vgpu_types` (full resource names), a GPU node
/// without operands. `eff` is [`effective_workload`]`(node, policy)`, gathered once by
/// the caller.
pub(crate) fn state_findings(
    node: &NodeInfo,
    policy: Option<&ClusterPolicy>,
    eff: &EffectiveWorkload,
    vgpu_types: &[&str],
) -> Vec<StateFinding> {
    let facts = StateFacts {
        node,
        policy,
        eff,
        vgpu_types,
    };
    STATE_RULES
        .iter()
        .filter_map(|(_, rule)| rule(&facts))
        .collect()
}

/// A state finding; its severity is the code's ([`Code::severity`]).
fn finding(code: Code, message: String, cause: Option<String>) -> StateFinding {
    StateFinding {
        code,
        severity: code.severity(),
        message,
        cause,
    }
}

/// `label-without-gpu` (warning): a workload label on a node that NFD shows without an
/// NVIDIA GPU ([`OperatorScope::NoGpu`]); the operator reads labels of GPU nodes only
/// (`labelGPUNodes`, NVIDIA/gpu-operator `controllers/state_manager.go`).
pub(crate) fn label_without_gpu(f: &StateFacts<'_>) -> Option<StateFinding> {
    let v = f.node.label(LABEL_KEY)?;
    if f.eff.scope != OperatorScope::NoGpu {
        return None;
    }
    let (why, next) = if gpu_evidence(f.node) == GpuEvidence::None {
        (
            format!(
                "nothing shows one: no NFD label {NFD_NVIDIA_PCI_LABEL} or its PCI-class variants, no GPU resource, no {GPU_PRESENT_LABEL}=true; the GPU Operator finds GPU nodes by NFD's PCI labels only"
            ),
            "deploy NFD (the operator's nfd.enabled) or check that it sees the GPU",
        )
    } else {
        (
            format!("the node carries NFD labels but no {NFD_NVIDIA_PCI_LABEL}=true"),
            "check that NFD sees the GPU",
        )
    };
    Some(finding(
        Code::LabelWithoutGpu,
        format!(
            "{LABEL_KEY}={v} on a node without an NVIDIA GPU ({why}): the operator never reads the label here and deploys nothing, and check --effective does not count it as a GPU node; remove it (kubectl label node {} {LABEL_KEY}-) or {next}",
            f.node.name
        ),
        None,
    ))
}

/// `vgpu-config-failed` (error): `nvidia.com/vgpu.config.state=failed`.
pub(crate) fn vgpu_config_failed(f: &StateFacts<'_>) -> Option<StateFinding> {
    (f.node.label(VGPU_CONFIG_STATE_LABEL) == Some("failed")).then(|| {
        finding(
            Code::VgpuConfigFailed,
            format!(
                "{VGPU_CONFIG_STATE_LABEL}=failed: the vGPU device manager could not create the vGPU devices of config {:?}, so the sandbox device plugin advertises no vGPU type here; read the nvidia-vgpu-device-manager pod's log on this node and check that the config exists for this GPU",
                f.vgpu_config()
            ),
            Some("vgpu.config.state=failed".into()),
        )
    })
}

/// `config-pending` (warning): `nvidia.com/vgpu.config.state=pending`.
pub(crate) fn vgpu_config_pending(f: &StateFacts<'_>) -> Option<StateFinding> {
    let s = f
        .node
        .label(VGPU_CONFIG_STATE_LABEL)
        .filter(|s| *s == "pending")?;
    Some(finding(
        Code::ConfigPending,
        format!(
            "{VGPU_CONFIG_STATE_LABEL}={s}: the vGPU device manager is applying config {:?}; operands stay paused until it reports success",
            f.vgpu_config()
        ),
        Some(format!("vgpu.config.state={s}")),
    ))
}

/// `mig-config-failed` (error): `nvidia.com/mig.config.state=failed`.
pub(crate) fn mig_config_failed(f: &StateFacts<'_>) -> Option<StateFinding> {
    (f.node.label(MIG_CONFIG_STATE_LABEL) == Some("failed")).then(|| {
        finding(
            Code::MigConfigFailed,
            format!(
                "{MIG_CONFIG_STATE_LABEL}=failed: the MIG manager could not apply config {:?}; the GPUs keep their previous layout and the device plugin may advertise nothing; read the nvidia-mig-manager pod's log on this node",
                f.mig_config()
            ),
            Some("mig.config.state=failed".into()),
        )
    })
}

/// `config-pending` (warning): `nvidia.com/mig.config.state=pending|rebooting`.
pub(crate) fn mig_config_pending(f: &StateFacts<'_>) -> Option<StateFinding> {
    let s = f
        .node
        .label(MIG_CONFIG_STATE_LABEL)
        .filter(|s| matches!(*s, "pending" | "rebooting"))?;
    Some(finding(
        Code::ConfigPending,
        format!(
            "{MIG_CONFIG_STATE_LABEL}={s}: the MIG manager is applying config {:?}; GPU operands are paused until it reports success",
            f.mig_config()
        ),
        Some(format!("mig.config.state={s}")),
    ))
}

/// `operand-paused` (warning): deploy labels `paused-for-*`.
pub(crate) fn operand_paused(f: &StateFacts<'_>) -> Option<StateFinding> {
    let paused_labels = || {
        f.node
            .labels
            .iter()
            .filter(|(k, v)| k.starts_with(DEPLOY_LABEL_PREFIX) && v.starts_with("paused-for-"))
    };
    let paused: Vec<String> = paused_labels()
        .map(|(k, v)| format!("{}={v}", &k[DEPLOY_LABEL_PREFIX.len()..]))
        .collect();
    if paused.is_empty() {
        return None;
    }
    let mut why: Vec<&str> = paused_labels().map(|(_, v)| v.as_str()).collect();
    why.sort_unstable();
    why.dedup();
    Some(finding(
        Code::OperandPaused,
        format!(
            "operands paused for a reconfiguration ({}): the MIG or vGPU device manager stopped them and restarts them when its config state is success",
            paused.join(", ")
        ),
        Some(format!("operands {}", why.join("/"))),
    ))
}

/// `operands-disabled` (warning): `nvidia.com/gpu.deploy.operands=false`. Its fix (remove
/// the label) deploys the workload the operator applies ([`EffectiveWorkload::workload`]),
/// which [`stack_warning`] names when the node's label asks for another.
pub(crate) fn operands_disabled(f: &StateFacts<'_>) -> Option<StateFinding> {
    (f.node.label(DEPLOY_OPERANDS_LABEL) == Some("false")).then(|| {
        finding(
            Code::OperandsDisabled,
            format!(
                "{DEPLOY_OPERANDS_LABEL}=false: the GPU Operator deploys no operand on this node, so no device plugin advertises its GPUs; remove the label (kubectl label node {} {DEPLOY_OPERANDS_LABEL}-) to deploy them{}",
                f.node.name,
                stack_warning(f.node, f.policy, f.eff)
                    .map(|w| format!(" — but {w}"))
                    .unwrap_or_default()
            ),
            Some(format!("{DEPLOY_OPERANDS_LABEL}=false")),
        )
    })
}

/// Why the operator applies `eff.workload` to `node` and not its label's, in words: the
/// ClusterPolicy's sandbox workloads off, its `defaultWorkload`, the node's deploy labels,
/// or the CRD default.
pub(crate) fn workload_reason(eff: &EffectiveWorkload, policy: Option<&ClusterPolicy>) -> String {
    match (eff.source, policy) {
        (WorkloadSource::ClusterPolicy, Some(p)) if !p.sandbox_enabled => format!(
            "ClusterPolicy {} has {}=false, so the operator reads no workload label",
            p.name, ENABLE_FLAG
        ),
        (WorkloadSource::ClusterPolicy, Some(p)) => {
            format!("ClusterPolicy {}'s {}", p.name, DEFAULT_WORKLOAD_FIELD)
        }
        (WorkloadSource::DeployLabels, _) => "the node's gpu.deploy.* labels".to_owned(),
        (WorkloadSource::Label, _) => format!("its {LABEL_KEY} label"),
        _ => format!(
            "the CRD's {} default; no ClusterPolicy read",
            DEFAULT_WORKLOAD_FIELD
        ),
    }
}

/// The warning a fix that lets the operator deploy on `node` (removing
/// `nvidia.com/gpu.deploy.operands=false`, re-enabling an operand) must carry when the
/// stack it brings is not the one the node's workload label asks for: `that deploys the
/// container operands (…), not the vm-vgpu ones its label asks for`. `None` when the
/// label is followed, absent, or the node has no GPU. The operator deploys
/// [`EffectiveWorkload::workload`] (NVIDIA/gpu-operator `controllers/state_manager.go`,
/// `getWorkloadConfig`, `updateGPUStateLabels`).
pub(crate) fn stack_warning(
    node: &NodeInfo,
    policy: Option<&ClusterPolicy>,
    eff: &EffectiveWorkload,
) -> Option<String> {
    if eff.scope == OperatorScope::NoGpu {
        return None;
    }
    let stack = eff.workload;
    let asks = match node.label(LABEL_KEY)?.parse::<WorkloadConfig>() {
        Ok(w) if w == stack => return None,
        Ok(w) => format!("not the {w} ones its {LABEL_KEY} label asks for"),
        Err(e) => format!("its label value {e}{}", e.did_you_mean()),
    };
    let enable = match policy {
        Some(p) if !p.sandbox_enabled => format!(
            "; the label takes effect only with {}=true in ClusterPolicy {} (cluster-wide)",
            ENABLE_FLAG, p.name
        ),
        _ => String::new(),
    };
    Some(format!(
        "that deploys the {stack} operands ({}), {asks}{enable}",
        workload_reason(eff, policy)
    ))
}

/// A GPU node whose applied workload changes when the ClusterPolicy's sandbox workloads
/// are enabled ([`enable_sandbox_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkloadChange {
    /// The node.
    pub node: String,
    /// The workload applied now (`container`).
    pub from: WorkloadConfig,
    /// The workload applied once enabled: its valid label, else `defaultWorkload`.
    pub to: WorkloadConfig,
    /// The GPU names it advertises now, with their allocatable units.
    pub advertised: Vec<(String, i64)>,
}

impl WorkloadChange {
    /// `gpu-2 container → vm-passthrough (loses nvidia.com/gpu=2)`.
    pub fn describe(&self) -> String {
        let loses = if self.advertised.is_empty() {
            String::new()
        } else {
            format!(
                " (loses {})",
                self.advertised
                    .iter()
                    .map(|(r, a)| format!("{r}={a}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        format!("{} {} → {}{loses}", self.node, self.from, self.to)
    }
}

/// What setting `sandboxWorkloads.enabled=true` in `policy` (sandbox workloads off)
/// changes: each GPU node (not [`OperatorScope::NoGpu`]) whose workload then differs from
/// today's `container` — its valid label, else the policy's `defaultWorkload`
/// (NVIDIA/gpu-operator `controllers/state_manager.go`, `getWorkloadConfig`). Empty when
/// sandbox workloads are already on. The operator then swaps those nodes' operands
/// (`updateGPUStateLabels`), so the names they advertise change.
pub(crate) fn enable_sandbox_changes(
    nodes: &[NodeInfo],
    policy: &ClusterPolicy,
) -> Vec<WorkloadChange> {
    if policy.sandbox_enabled {
        return Vec::new();
    }
    let on = ClusterPolicy {
        sandbox_enabled: true,
        ..policy.clone()
    };
    nodes
        .iter()
        .filter_map(|n| {
            let now = effective_workload(n, Some(policy));
            let then = effective_workload(n, Some(&on));
            (now.scope != OperatorScope::NoGpu && then.workload != now.workload).then(|| {
                WorkloadChange {
                    node: n.name.clone(),
                    from: now.workload,
                    to: then.workload,
                    advertised: advertise::advertised_gpus(n)
                        .into_iter()
                        .map(|(r, a)| (r.to_owned(), a))
                        .collect(),
                }
            })
        })
        .collect()
}

/// `label-ignored` (warning): a workload label the operator does not read or follow
/// ([`EffectiveWorkload::label_ignored`]).
pub fn label_ignored(f: &StateFacts<'_>) -> Option<StateFinding> {
    let eff = f.eff;
    if !eff.label_ignored {
        return None;
    }
    let value = f.node.label(LABEL_KEY).unwrap_or("");
    let invalid = match value.parse::<WorkloadConfig>() {
        Err(e) => format!(
            " (its value {e}: that matters once sandbox workloads are enabled{})",
            e.did_you_mean()
        ),
        Ok(_) => String::new(),
    };
    let why = match (f.policy, eff.source) {
        (Some(p), _) if !p.sandbox_enabled => format!(
            "ClusterPolicy {} has sandboxWorkloads.enabled=false, so the operator does not read the label and applies container{invalid}",
            p.name
        ),
        _ => format!(
            "the node's gpu.deploy.* labels are the {} set: the operator does not follow the label (sandbox workloads disabled in the ClusterPolicy?)",
            eff.workload
        ),
    };
    let (disabled, cause) = if eff.scope == OperatorScope::OperandsDisabled {
        (
            format!(
                "; {DEPLOY_OPERANDS_LABEL}=false keeps every operand off for now, and removing it deploys the {} operands",
                eff.workload
            ),
            "label ignored".to_owned(),
        )
    } else {
        (
            String::new(),
            format!("label ignored, {} operands run", eff.workload),
        )
    };
    Some(finding(
        Code::LabelIgnored,
        format!("{LABEL_KEY}={value} is ignored: {why}{disabled}"),
        Some(cause),
    ))
}

/// `vgpu-config-type-differs` (warning): `nvidia.com/vgpu.config` names a vGPU type other
/// than the advertised one(s).
pub(crate) fn vgpu_config_type_differs(f: &StateFacts<'_>) -> Option<StateFinding> {
    let cfg = f.node.label(VGPU_CONFIG_LABEL)?;
    let want = vgpu_type_core(cfg)?;
    let types = f.vgpu_types;
    if types.is_empty()
        || types.iter().any(|t| {
            vgpu_type_core(t.strip_prefix("nvidia.com/").unwrap_or(t)).as_deref()
                == Some(want.as_str())
        })
    {
        return None;
    }
    let message = match f.node.label(VGPU_CONFIG_STATE_LABEL) {
        // The manager says it applied a config: the label was changed after that.
        Some(state @ "success") => format!(
            "{VGPU_CONFIG_LABEL}={cfg} asks for vGPU type {want}, but the node advertises {}: {VGPU_CONFIG_STATE_LABEL}={state} is from an earlier config; the vGPU device manager has not applied this one yet",
            types.join(", ")
        ),
        state => format!(
            "{VGPU_CONFIG_LABEL}={cfg} asks for vGPU type {want}, but the node advertises {}: the config is not applied yet, or failed (see {VGPU_CONFIG_STATE_LABEL}={})",
            types.join(", "),
            state.unwrap_or("unset")
        ),
    };
    Some(finding(Code::VgpuConfigTypeDiffers, message, None))
}

/// `gpu-present-without-operands` (warning): an NVIDIA GPU (`nvidia.com/gpu.present`, NFD
/// `pci-10de`) and no deploy label at all.
pub(crate) fn gpu_present_without_operands(f: &StateFacts<'_>) -> Option<StateFinding> {
    let node = f.node;
    if f.eff.scope != OperatorScope::Operands {
        return None;
    }
    let present = if node.label(GPU_PRESENT_LABEL) == Some("true") {
        GPU_PRESENT_LABEL
    } else if node.label(NFD_NVIDIA_PCI_LABEL) == Some("true") {
        NFD_NVIDIA_PCI_LABEL
    } else {
        return None;
    };
    (!has_deploy_labels(node)).then(|| {
        finding(
            Code::GpuPresentWithoutOperands,
            format!(
                "the node has an NVIDIA GPU ({present}) but no {DEPLOY_LABEL_PREFIX}* label: the GPU Operator has not taken the node on (its node-labelling controller not running, or the node excluded by the ClusterPolicy's node selectors); check the gpu-operator pod's log"
            ),
            None,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`state_findings`] with the effective workload gathered here.
    fn findings(
        node: &NodeInfo,
        policy: Option<&ClusterPolicy>,
        vgpu_types: &[&str],
    ) -> Vec<StateFinding> {
        state_findings(node, policy, &effective_workload(node, policy), vgpu_types)
    }

    use crate::testkit::labelled as node;

    fn policy(enabled: bool, default: WorkloadConfig) -> ClusterPolicy {
        ClusterPolicy {
            name: "cluster-policy".into(),
            sandbox_enabled: enabled,
            default_workload: default,
            default_workload_raw: Some(default.to_string()),
            mode: None,
            vgpu_manager_enabled: None,
            vgpu_default_config: None,
            mig_default_config: None,
            state: None,
            components: BTreeMap::new(),
        }
    }

    const PT_DEPLOY: [(&str, &str); 2] = [
        ("nvidia.com/gpu.deploy.vfio-manager", "true"),
        ("nvidia.com/gpu.deploy.sandbox-device-plugin", "true"),
    ];

    #[test]
    fn unlabelled_node_follows_the_policy_default() {
        let p = policy(true, WorkloadConfig::VmPassthrough);
        let e = effective_workload(&node(&[]), Some(&p));
        assert_eq!(
            (e.workload, e.source, e.label),
            (
                WorkloadConfig::VmPassthrough,
                WorkloadSource::ClusterPolicy,
                LabelState::Absent
            )
        );
        let e = effective_workload(&node(&[(LABEL_KEY, "vm_passthrough")]), Some(&p));
        assert_eq!(
            (e.workload, e.label),
            (WorkloadConfig::VmPassthrough, LabelState::Invalid)
        );
    }

    #[test]
    fn disabled_sandbox_workloads_ignore_the_label() {
        let p = policy(false, WorkloadConfig::VmPassthrough);
        let n = node(&[(LABEL_KEY, "vm-vgpu"), (NFD_NVIDIA_PCI_LABEL, "true")]);
        let e = effective_workload(&n, Some(&p));
        assert_eq!(
            (e.workload, e.source, e.label_ignored),
            (
                WorkloadConfig::Container,
                WorkloadSource::ClusterPolicy,
                true
            )
        );
        let f = findings(&n, Some(&p), &[]);
        let codes: Vec<Code> = f.iter().map(|f| f.code).collect();
        assert_eq!(codes, [Code::LabelIgnored, Code::GpuPresentWithoutOperands]);
        assert!(
            f[0].message.contains("sandboxWorkloads.enabled=false"),
            "{}",
            f[0].message
        );
    }

    /// Issue 35 (6b): sandbox workloads off — the operator reads no label, valid or not,
    /// and `gpu.deploy.operands=false` does not hide that; removing it deploys container.
    #[test]
    fn sandbox_off_ignores_any_label_even_with_operands_off() {
        let p = policy(false, WorkloadConfig::VmPassthrough);
        let bad = gpu_node(&[(LABEL_KEY, "vm_passthrough")]);
        let e = effective_workload(&bad, Some(&p));
        assert!(e.label_ignored);
        let f = findings(&bad, Some(&p), &[]);
        assert_eq!(f[0].code, Code::LabelIgnored);
        assert!(
            f[0].message.contains("did you mean vm-passthrough?"),
            "{}",
            f[0].message
        );
        // Without a ClusterPolicy nothing says the label is not read.
        assert!(!effective_workload(&bad, None).label_ignored);
        let off = gpu_node(&[(LABEL_KEY, "vm-vgpu"), (DEPLOY_OPERANDS_LABEL, "false")]);
        let e = effective_workload(&off, Some(&p));
        assert_eq!(
            (e.scope, e.workload, e.label_ignored),
            (
                OperatorScope::OperandsDisabled,
                WorkloadConfig::Container,
                true
            )
        );
        let f = findings(&off, Some(&p), &[]);
        let codes: Vec<Code> = f.iter().map(|f| f.code).collect();
        assert_eq!(codes, [Code::OperandsDisabled, Code::LabelIgnored]);
        assert!(
            f[0].message.contains(
                "but that deploys the container operands (ClusterPolicy cluster-policy has sandboxWorkloads.enabled=false, so the operator reads no workload label), not the vm-vgpu ones its nvidia.com/gpu.workload.config label asks for"
            ),
            "{}",
            f[0].message
        );
        assert_eq!(f[1].cause.as_deref(), Some("label ignored"));
        // A followed label: no warning on the fix.
        let on = policy(true, WorkloadConfig::Container);
        assert!(stack_warning(&off, Some(&on), &effective_workload(&off, Some(&on))).is_none());
    }

    /// Issue 35 (6d): what enabling sandbox workloads changes, per GPU node.
    #[test]
    fn enabling_sandbox_workloads_changes_labelled_and_defaulted_nodes() {
        let p = policy(false, WorkloadConfig::VmPassthrough);
        let mut vgpu = gpu_node(&[(LABEL_KEY, "vm-vgpu")]);
        vgpu.name = "a".into();
        vgpu.allocatable = Some([("nvidia.com/gpu".to_string(), "2".to_string())].into());
        let mut plain = gpu_node(&[(LABEL_KEY, "container")]);
        plain.name = "b".into();
        let mut unlabelled = gpu_node(&[]);
        unlabelled.name = "c".into();
        let cpu = node(&[(LABEL_KEY, "vm-vgpu")]);
        let ch = enable_sandbox_changes(&[vgpu, plain, unlabelled, cpu], &p);
        let d: Vec<String> = ch.iter().map(WorkloadChange::describe).collect();
        assert_eq!(
            d,
            [
                "a container → vm-vgpu (loses nvidia.com/gpu=2)",
                "c container → vm-passthrough"
            ]
        );
        assert!(enable_sandbox_changes(&[], &policy(true, WorkloadConfig::Container)).is_empty());
    }

    #[test]
    fn without_a_policy_deploy_labels_decide() {
        let e = effective_workload(&node(&PT_DEPLOY), None);
        assert_eq!(
            (e.workload, e.source),
            (WorkloadConfig::VmPassthrough, WorkloadSource::DeployLabels)
        );
        let e = effective_workload(&node(&[]), None);
        assert_eq!(
            (e.workload, e.source),
            (WorkloadConfig::Container, WorkloadSource::Default)
        );
        let e = effective_workload(&node(&[(LABEL_KEY, "vm-vgpu")]), None);
        assert_eq!(
            (e.workload, e.source),
            (WorkloadConfig::VmVgpu, WorkloadSource::Label)
        );
        // A vm-* label on a node whose operator runs container operands.
        let n = node(&[
            (LABEL_KEY, "vm-passthrough"),
            ("nvidia.com/gpu.deploy.driver", "true"),
            ("nvidia.com/gpu.deploy.device-plugin", "true"),
        ]);
        let e = effective_workload(&n, None);
        assert_eq!(
            (e.workload, e.source, e.label_ignored),
            (
                WorkloadConfig::Container,
                WorkloadSource::DeployLabels,
                true
            )
        );
        assert_eq!(findings(&n, None, &[])[0].code, Code::LabelIgnored);
        // Deploy labels set to false are not deployed operands.
        let off = node(&[("nvidia.com/gpu.deploy.vfio-manager", "false")]);
        assert_eq!(workload_from_deploy_labels(&off), None);
        // Labels of two workloads at once are no evidence: no inference, no label-ignored.
        let mixed = node(&[
            (LABEL_KEY, "vm-vgpu"),
            ("nvidia.com/gpu.deploy.vfio-manager", "true"),
            ("nvidia.com/gpu.deploy.driver", "true"),
        ]);
        assert_eq!(workload_from_deploy_labels(&mixed), None);
        let e = effective_workload(&mixed, None);
        assert_eq!(
            (e.workload, e.source),
            (WorkloadConfig::VmVgpu, WorkloadSource::Label)
        );
        assert!(findings(&mixed, None, &[]).is_empty());
    }

    #[test]
    fn config_states_paused_and_disabled_operands() {
        let n = node(&[
            (VGPU_CONFIG_LABEL, "A10-12Q"),
            (VGPU_CONFIG_STATE_LABEL, "failed"),
            (MIG_CONFIG_LABEL, "all-1g.10gb"),
            (MIG_CONFIG_STATE_LABEL, "rebooting"),
            (
                "nvidia.com/gpu.deploy.device-plugin",
                "paused-for-mig-change",
            ),
            (DEPLOY_OPERANDS_LABEL, "false"),
        ]);
        let codes: Vec<Code> = findings(&n, None, &[]).iter().map(|f| f.code).collect();
        assert_eq!(
            codes,
            [
                Code::VgpuConfigFailed,
                Code::ConfigPending,
                Code::OperandPaused,
                Code::OperandsDisabled
            ]
        );
        let f = findings(&node(&[(MIG_CONFIG_STATE_LABEL, "failed")]), None, &[]);
        assert_eq!(f[0].code, Code::MigConfigFailed);
        assert_eq!(f[0].cause.as_deref(), Some("mig.config.state=failed"));
    }

    #[test]
    fn vgpu_config_type_versus_advertised_type() {
        let n = node(&[
            (VGPU_CONFIG_LABEL, "A10-24Q"),
            ("nvidia.com/gpu.deploy.vgpu-manager", "true"),
        ]);
        let f = findings(&n, None, &["nvidia.com/NVIDIA_A10-12Q"]);
        assert_eq!(f[0].code, Code::VgpuConfigTypeDiffers);
        assert!(findings(&n, None, &["nvidia.com/NVIDIA_A10-24Q"]).is_empty());
        assert!(findings(&n, None, &["nvidia.com/GRID_A10-24Q"]).is_empty());
        let named = node(&[
            (VGPU_CONFIG_LABEL, "default"),
            ("nvidia.com/gpu.deploy.vgpu-manager", "true"),
        ]);
        assert!(findings(&named, None, &["nvidia.com/NVIDIA_A10-12Q"]).is_empty());
        assert_eq!(vgpu_type_core("NVIDIA A10-12Q").as_deref(), Some("A10-12Q"));
        assert_eq!(vgpu_type_core("all-disabled"), None);
    }

    /// A GPU node as NFD and GFD label it.
    fn gpu_node(extra: &[(&str, &str)]) -> NodeInfo {
        let mut n = node(&[
            (NFD_NVIDIA_PCI_LABEL, "true"),
            ("feature.node.kubernetes.io/kernel-version.full", "5.15.0"),
            (GPU_PRODUCT_LABEL, "NVIDIA-A10"),
        ]);
        for (k, v) in extra {
            n.labels.insert((*k).into(), (*v).into());
        }
        n
    }

    #[test]
    fn operands_follow_the_workload_and_keep_a_users_value() {
        let p = policy(true, WorkloadConfig::Container);
        let n = gpu_node(&[(LABEL_KEY, "vm-passthrough")]);
        let e = effective_workload(&n, Some(&p));
        assert_eq!(e.applied(), Some(WorkloadConfig::VmPassthrough));
        assert_eq!(
            operands(&n, &e),
            [
                "cc-manager",
                "kata-manager",
                "sandbox-device-plugin",
                "sandbox-validator",
                "vfio-manager"
            ]
        );
        // A user's false for an operand of the workload stays (the DaemonSet skips the
        // node); one of another workload is removed by the operator and does not count.
        let n = gpu_node(&[
            (LABEL_KEY, "container"),
            ("nvidia.com/gpu.deploy.driver", "false"),
            ("nvidia.com/gpu.deploy.vfio-manager", "false"),
        ]);
        let ops = operands(&n, &effective_workload(&n, Some(&p)));
        assert!(
            !ops.contains(&"driver") && ops.contains(&"device-plugin"),
            "{ops:?}"
        );
        assert_eq!(ops.len(), 7);
        // MIG-capable container nodes get the MIG manager; vGPU hosts never.
        let a100 = gpu_node(&[(GPU_PRODUCT_LABEL, "NVIDIA-A100-SXM4-40GB")]);
        assert!(operands(&a100, &effective_workload(&a100, Some(&p))).contains(&"mig-manager"));
        let host = gpu_node(&[
            (GPU_PRODUCT_LABEL, "NVIDIA-A100-SXM4-40GB"),
            (VGPU_HOST_DRIVER_LABEL, "550.90"),
        ]);
        assert!(!operands(&host, &effective_workload(&host, Some(&p))).contains(&"mig-manager"));
    }

    #[test]
    fn operands_disabled_and_nodes_without_a_gpu_apply_nothing() {
        let p = policy(true, WorkloadConfig::VmVgpu);
        let off = gpu_node(&[(LABEL_KEY, "container"), (DEPLOY_OPERANDS_LABEL, "false")]);
        let e = effective_workload(&off, Some(&p));
        assert_eq!(
            (e.scope, e.applied(), e.label_ignored),
            (OperatorScope::OperandsDisabled, None, false)
        );
        assert!(operands(&off, &e).is_empty());
        let codes: Vec<Code> = findings(&off, Some(&p), &[])
            .iter()
            .map(|f| f.code)
            .collect();
        assert_eq!(codes, [Code::OperandsDisabled]);
        // NFD labels without the GPU one: no GPU, the label is never read.
        let cpu = node(&[
            ("feature.node.kubernetes.io/kernel-version.full", "5.15.0"),
            (LABEL_KEY, "vm-passthrough"),
            (GPU_PRESENT_LABEL, "true"),
        ]);
        assert_eq!(gpu_evidence(&cpu), GpuEvidence::NoGpu);
        let e = effective_workload(&cpu, Some(&p));
        assert_eq!((e.scope, e.applied()), (OperatorScope::NoGpu, None));
        let f = findings(&cpu, Some(&p), &[]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, Code::LabelWithoutGpu);
        // No NFD label at all and nothing else of a GPU (issue 35, 6a): the operator finds
        // no GPU there (hasGPULabels), the label is never read.
        let bare = node(&[(LABEL_KEY, "vm-passthrough")]);
        assert_eq!(gpu_evidence(&bare), GpuEvidence::None);
        let e = effective_workload(&bare, Some(&p));
        assert_eq!((e.scope, e.applied()), (OperatorScope::NoGpu, None));
        let f = findings(&bare, Some(&p), &[]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, Code::LabelWithoutGpu);
        assert!(
            f[0].message.contains("NFD's PCI labels only"),
            "{}",
            f[0].message
        );
        // No NFD label, but a GPU stack's labels: a GPU is assumed (a dump without NFD).
        for (k, v) in [
            (GPU_PRESENT_LABEL, "true"),
            (GPU_PRODUCT_LABEL, "NVIDIA-A10"),
            ("nvidia.com/gpu.deploy.driver", "true"),
        ] {
            let n = node(&[(LABEL_KEY, "vm-passthrough"), (k, v)]);
            assert_eq!(gpu_evidence(&n), GpuEvidence::Unknown, "{k}");
            assert_eq!(
                effective_workload(&n, Some(&p)).applied(),
                Some(WorkloadConfig::VmPassthrough)
            );
        }
        let gone = node(&[(LABEL_KEY, "vm-passthrough"), (GPU_PRESENT_LABEL, "false")]);
        assert_eq!(gpu_evidence(&gone), GpuEvidence::None);
        // The other GPU class labels of NFD count too.
        let g = node(&[("feature.node.kubernetes.io/pci-0302_10de.present", "true")]);
        assert_eq!(gpu_evidence(&g), GpuEvidence::Nfd);
    }

    #[test]
    fn gpu_without_operands() {
        let f = findings(&node(&[(GPU_PRESENT_LABEL, "true")]), None, &[]);
        assert_eq!(f[0].code, Code::GpuPresentWithoutOperands);
        let f = findings(&node(&[(NFD_NVIDIA_PCI_LABEL, "true")]), None, &[]);
        assert_eq!(f[0].code, Code::GpuPresentWithoutOperands);
        let ok = node(&[
            (GPU_PRESENT_LABEL, "true"),
            ("nvidia.com/gpu.deploy.driver", "true"),
        ]);
        assert!(findings(&ok, None, &[]).is_empty());
    }
}
