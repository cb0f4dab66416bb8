//! The vocabulary of findings: one [`Code`] per rule outcome and its [`Severity`], shared by
//! check's resource and node rules ([`crate::analysis::check`]) and the GPU Operator state
//! rules ([`crate::model::operator::STATE_RULES`]). Codes are serialized in kebab-case;
//! [`Code::as_str`] gives the same text (tested).

use std::fmt;

use serde::Serialize;

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
    /// [`crate::model::operator::STATE_RULES`] for these eight).
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
    /// warning: the node's GPUs are published both by a device plugin (an advertised
    /// `nvidia.com/` GPU resource) and by NVIDIA's DRA driver (ResourceSlice devices).
    DraAndDevicePlugin,
    /// warning: a workload label on a node NFD shows without an NVIDIA GPU: the operator
    /// never reads it (the node is not judged).
    LabelWithoutGpu,
    /// warning: an operand pod of the GPU Operator on the node is not ready or
    /// crash-looping (or the device plugin of its workload has no pod there).
    OperandNotReady,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 21] = [
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
        Code::OperandNotReady,
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
            Code::OperandNotReady => "operand-not-ready",
        }
    }
}

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
            Code::OperandNotReady => 20,
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
        }
        for s in [Severity::Error, Severity::Warning, Severity::Info] {
            let name = serde_json::to_value(s).unwrap();
            assert_eq!(name, format!("{s:?}").to_lowercase().as_str());
        }
    }
}
