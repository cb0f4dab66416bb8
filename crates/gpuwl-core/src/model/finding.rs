//! The vocabulary of findings: one [`Code`] per rule outcome and its [`Severity`], shared by
//! check's resource and node rules ([`crate::analysis::check`]) and the GPU Operator state
//! rules ([`crate::model::operator::STATE_RULES`]). Codes are serialized in kebab-case;
//! [`Code::as_str`] gives the same text (tested).

use std::fmt;

use serde::Serialize;

/// How much a finding matters: each [`Code`] has one ([`Code::severity`], the table
/// [`SEVERITIES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fails `gpuwl check --effective` (exit 1); the shipped alerts page (`critical`).
    /// Of these, only the [`Code::in_line_contract`] codes make a labelled node a plain
    /// `check` MISMATCH.
    Error,
    /// Worth a look (a planned transition, a stale entry, a guessed workload); passes the
    /// gate unless `--fail-on` names the code; alerts of this severity are `warning`.
    Warning,
    /// For the record (ignored non-GPU resources); never alerted on.
    Info,
}

impl Severity {
    /// `error`, `warning`, `info` (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }

    /// The `severity` label of a Prometheus alert on findings of this severity:
    /// `critical` for errors, `warning` for warnings; `None` for infos (not alerted on).
    /// deploy/prometheus/rules.yaml follows it (tested).
    pub fn alert_severity(self) -> Option<&'static str> {
        match self {
            Severity::Error => Some("critical"),
            Severity::Warning => Some("warning"),
            Severity::Info => None,
        }
    }
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
    /// error: an `nvidia.com/` GPU quantity is not a whole, non-negative count.
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
    /// error: `nvidia.com/vgpu.config.state=failed` (the GPU Operator's own state; see
    /// [`crate::model::operator::STATE_RULES`] for these eight).
    VgpuConfigFailed,
    /// error: `nvidia.com/mig.config.state=failed`.
    MigConfigFailed,
    /// warning: a vGPU or MIG config state `pending` / `rebooting` (a planned transition).
    ConfigPending,
    /// warning: an operand deploy label `paused-for-*` (a planned transition).
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
    /// warning: the node's GPUs are published both by a device plugin (an advertised
    /// `nvidia.com/` GPU resource) and by NVIDIA's DRA driver (ResourceSlice devices).
    DraAndDevicePlugin,
    /// warning: a workload label on a node NFD shows without an NVIDIA GPU: the operator
    /// never reads it (the node is not judged).
    LabelWithoutGpu,
    /// error: the node advertises GPU names of another class than the workload the GPU
    /// Operator applies to it, and that workload does not come from a followed label (no
    /// label, an invalid one, or one the operator ignores): the operator will replace the
    /// operands serving those names.
    EffectiveWorkloadDiffers,
    /// warning: bound, running pods hold a GPU name the node no longer advertises (absent
    /// or `"0"`): they keep running, but nothing that restarts comes back there.
    OrphanedHolder,
    /// warning: an operand pod of the GPU Operator on the node is not ready or
    /// crash-looping (or the device plugin of its workload has no pod there).
    OperandNotReady,
    /// error: a bound holder at risk: a VM (virt-launcher pod) holds a GPU name its node
    /// no longer advertises, or any pod holds a name of a class the node's effective
    /// workload no longer serves (a relabel swapped the operands under it): the VM or pod
    /// may lose its GPU.
    HolderAtRisk,
    /// info: the node's GPUs come through NVIDIA's DRA driver (`gpu.nvidia.com`
    /// ResourceSlices) and no device plugin advertises a GPU name: pods get them with
    /// ResourceClaims, so advertising no extended resource is no mismatch.
    GpusViaDra,
    /// error: a Kueue ClusterQueue gives a flavor quota on a GPU name the flavor's nodes do
    /// not advertise: Kueue admits workloads no node can run.
    KueueQuotaNotAdvertised,
    /// warning: a Kueue flavor that carries GPU quota selects no GPU node.
    KueueFlavorNoGpuNode,
    /// warning: a Kueue flavor that carries GPU quota selects GPU nodes of several
    /// workload pools (they advertise different names).
    KueueFlavorSpansPools,
    /// warning: a Kueue flavor's nominal GPU quota exceeds what its nodes advertise.
    KueueQuotaAboveCapacity,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 29] = [
        Code::InvalidLabelValue,
        Code::NoGpuResource,
        Code::WrongClassResource,
        Code::InvalidQuantity,
        Code::StaleZero,
        Code::CapacityExceedsAllocatable,
        Code::HexIdFallback,
        Code::MixedCaseModel,
        Code::IgnoredResource,
        Code::UnlabelledGpuNode,
        Code::VgpuConfigFailed,
        Code::MigConfigFailed,
        Code::ConfigPending,
        Code::OperandPaused,
        Code::OperandsDisabled,
        Code::LabelIgnored,
        Code::VgpuConfigTypeDiffers,
        Code::GpuPresentWithoutOperands,
        Code::DraAndDevicePlugin,
        Code::LabelWithoutGpu,
        Code::EffectiveWorkloadDiffers,
        Code::OrphanedHolder,
        Code::OperandNotReady,
        Code::HolderAtRisk,
        Code::GpusViaDra,
        Code::KueueQuotaNotAdvertised,
        Code::KueueFlavorNoGpuNode,
        Code::KueueFlavorSpansPools,
        Code::KueueQuotaAboveCapacity,
    ];

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
            Code::DraAndDevicePlugin => "dra-and-device-plugin",
            Code::LabelWithoutGpu => "label-without-gpu",
            Code::EffectiveWorkloadDiffers => "effective-workload-differs",
            Code::OrphanedHolder => "orphaned-holder",
            Code::OperandNotReady => "operand-not-ready",
            Code::HolderAtRisk => "holder-at-risk",
            Code::GpusViaDra => "gpus-via-dra",
            Code::KueueQuotaNotAdvertised => "kueue-quota-not-advertised",
            Code::KueueFlavorNoGpuNode => "kueue-flavor-no-gpu-node",
            Code::KueueFlavorSpansPools => "kueue-flavor-spans-pools",
            Code::KueueQuotaAboveCapacity => "kueue-quota-above-capacity",
        }
    }

    /// The code's severity: its row in [`SEVERITIES`].
    pub fn severity(self) -> Severity {
        SEVERITIES
            .iter()
            .find(|(c, _, _)| *c == self)
            .map_or(Severity::Error, |(_, s, _)| *s)
    }

    /// Whether the code belongs to the seed's label contract: an error of one of these on a
    /// labelled node is what makes plain `gpuwl check` print `MISMATCH=<node>` (exit 1).
    /// Every other finding, whatever its severity, leaves the text lines as they were;
    /// `check --effective` fails on every error.
    pub fn in_line_contract(self) -> bool {
        matches!(
            self,
            Code::InvalidLabelValue
                | Code::NoGpuResource
                | Code::WrongClassResource
                | Code::InvalidQuantity
        )
    }

    /// The code with this kebab-case name, if any.
    pub fn parse(name: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// THE severity table: every [`Code`], its [`Severity`], and why, one row each. Findings
/// take their severity from here ([`Code::severity`]); docs/guide/check.md's table of codes and the
/// alert rules under deploy/ follow it (tests: the guide's rows, and
/// `tests/it/monitoring.rs` for the rules' `severity` labels, error → `critical`).
///
/// The gate's rule of thumb: what is broken now or will break without a planned action is
/// an error (a failed vGPU/MIG config, a label the workload cannot follow, a node the
/// operator is about to reconfigure under its running VMs); a planned transition (a
/// config `pending` / `rebooting`, operands paused for it) or a stale leftover is a
/// warning.
pub const SEVERITIES: [(Code, Severity, &str); 29] = [
    (
        Code::InvalidLabelValue,
        Severity::Error,
        "the operator silently applies the default workload",
    ),
    (
        Code::NoGpuResource,
        Severity::Error,
        "a labelled node advertises no GPU (unless a planned transition explains it)",
    ),
    (
        Code::WrongClassResource,
        Severity::Error,
        "the node advertises names its label's workload does not serve",
    ),
    (
        Code::InvalidQuantity,
        Severity::Error,
        "a GPU quantity that is not a device count",
    ),
    (
        Code::StaleZero,
        Severity::Warning,
        "a stale \"0\" the kubelet keeps after a plugin left",
    ),
    (
        Code::CapacityExceedsAllocatable,
        Severity::Warning,
        "unhealthy devices or the kubelet's grace period",
    ),
    (
        Code::HexIdFallback,
        Severity::Warning,
        "a plugin update will rename the resource",
    ),
    (
        Code::MixedCaseModel,
        Severity::Warning,
        "no current plugin advertises such a name",
    ),
    (Code::IgnoredResource, Severity::Info, "not a GPU resource"),
    (
        Code::UnlabelledGpuNode,
        Severity::Warning,
        "the workload is the ClusterPolicy's default, not chosen",
    ),
    (
        Code::VgpuConfigFailed,
        Severity::Error,
        "the vGPU devices of the config were not created",
    ),
    (
        Code::MigConfigFailed,
        Severity::Error,
        "the MIG layout of the config was not applied",
    ),
    (
        Code::ConfigPending,
        Severity::Warning,
        "a planned vGPU/MIG reconfiguration in progress",
    ),
    (
        Code::OperandPaused,
        Severity::Warning,
        "operands paused for a planned reconfiguration",
    ),
    (
        Code::OperandsDisabled,
        Severity::Warning,
        "operands turned off on purpose",
    ),
    (
        Code::LabelIgnored,
        Severity::Warning,
        "the operator does not follow the label",
    ),
    (
        Code::VgpuConfigTypeDiffers,
        Severity::Warning,
        "a vGPU config not applied yet",
    ),
    (
        Code::GpuPresentWithoutOperands,
        Severity::Warning,
        "the operator has not taken the node on",
    ),
    (
        Code::DraAndDevicePlugin,
        Severity::Warning,
        "the same GPUs published twice",
    ),
    (
        Code::LabelWithoutGpu,
        Severity::Warning,
        "the operator never reads a label on a node without a GPU",
    ),
    (
        Code::EffectiveWorkloadDiffers,
        Severity::Error,
        "the operator will replace the operands serving the advertised names",
    ),
    (
        Code::OrphanedHolder,
        Severity::Warning,
        "running pods hold a name the node no longer advertises",
    ),
    (
        Code::OperandNotReady,
        Severity::Warning,
        "an operand pod is not ready; what it serves may be missing",
    ),
    (
        Code::HolderAtRisk,
        Severity::Error,
        "a running VM, or a pod after a class change, may lose its GPU",
    ),
    (
        Code::GpusViaDra,
        Severity::Info,
        "the node's GPUs are claimed through DRA, not an extended resource",
    ),
    (
        Code::KueueQuotaNotAdvertised,
        Severity::Error,
        "Kueue admits workloads on a name no node of the flavor advertises",
    ),
    (
        Code::KueueFlavorNoGpuNode,
        Severity::Warning,
        "GPU quota on a flavor whose nodes have no GPU",
    ),
    (
        Code::KueueFlavorSpansPools,
        Severity::Warning,
        "one flavor over pools that advertise different names",
    ),
    (
        Code::KueueQuotaAboveCapacity,
        Severity::Warning,
        "more quota than the flavor's nodes can place",
    ),
];

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Its position in [`Code::ALL`]; the exhaustive match makes a new variant fail to
    /// compile here until it is listed.
    fn index(c: Code) -> usize {
        match c {
            Code::InvalidLabelValue => 0,
            Code::NoGpuResource => 1,
            Code::WrongClassResource => 2,
            Code::InvalidQuantity => 3,
            Code::StaleZero => 4,
            Code::CapacityExceedsAllocatable => 5,
            Code::HexIdFallback => 6,
            Code::MixedCaseModel => 7,
            Code::IgnoredResource => 8,
            Code::UnlabelledGpuNode => 9,
            Code::VgpuConfigFailed => 10,
            Code::MigConfigFailed => 11,
            Code::ConfigPending => 12,
            Code::OperandPaused => 13,
            Code::OperandsDisabled => 14,
            Code::LabelIgnored => 15,
            Code::VgpuConfigTypeDiffers => 16,
            Code::GpuPresentWithoutOperands => 17,
            Code::DraAndDevicePlugin => 18,
            Code::LabelWithoutGpu => 19,
            Code::EffectiveWorkloadDiffers => 20,
            Code::OrphanedHolder => 21,
            Code::OperandNotReady => 22,
            Code::HolderAtRisk => 23,
            Code::GpusViaDra => 24,
            Code::KueueQuotaNotAdvertised => 25,
            Code::KueueFlavorNoGpuNode => 26,
            Code::KueueFlavorSpansPools => 27,
            Code::KueueQuotaAboveCapacity => 28,
        }
    }

    #[test]
    fn every_code_reads_as_its_serde_name_and_all_lists_each_once() {
        for (i, c) in Code::ALL.into_iter().enumerate() {
            assert_eq!(index(c), i, "{c:?} out of place in Code::ALL");
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::Value::String(c.as_str().to_owned()),
                "{c:?}"
            );
            assert_eq!(c.to_string(), c.as_str());
            assert_eq!(Code::parse(c.as_str()), Some(c));
            assert_eq!(SEVERITIES[i].0, c, "SEVERITIES out of order at {c:?}");
        }
        assert_eq!(Code::parse("no-such-code"), None);
        for s in [Severity::Error, Severity::Warning, Severity::Info] {
            let name = serde_json::to_value(s).unwrap();
            assert_eq!(name, format!("{s:?}").to_lowercase().as_str());
            assert_eq!(name, s.as_str());
        }
    }

    #[test]
    fn the_gate_severities_of_the_issue() {
        // Planned transitions warn; failed configs and a node the operator is about to
        // reconfigure fail the gate; the seed's four codes stay errors.
        assert_eq!(Code::ConfigPending.severity(), Severity::Warning);
        assert_eq!(Code::OperandPaused.severity(), Severity::Warning);
        assert_eq!(Code::MigConfigFailed.severity(), Severity::Error);
        assert_eq!(Code::VgpuConfigFailed.severity(), Severity::Error);
        assert_eq!(Code::EffectiveWorkloadDiffers.severity(), Severity::Error);
        let contract: Vec<Code> = Code::ALL
            .into_iter()
            .filter(|c| c.in_line_contract())
            .collect();
        assert_eq!(contract.len(), 4);
        assert!(contract.iter().all(|c| c.severity() == Severity::Error));
    }
}
