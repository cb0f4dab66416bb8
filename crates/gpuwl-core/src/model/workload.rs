//! The GPU Operator's sandbox-workload label and its three values.
//!
//! Sources: NVIDIA/gpu-operator `controllers/state_manager.go` (`gpuWorkloadConfig*`
//! constants, `isValidWorkloadConfig`, `gpuStateLabels`) and
//! `api/nvidia/v1/clusterpolicy_types.go` (`SandboxWorkloadsSpec`); operand summary from
//! NVIDIA/cloud-native-docs `gpu-operator/gpu-operator-kubevirt.rst`.

use crate::text;
use std::fmt;
use std::str::FromStr;

/// The node label that selects a node's workload type: `nvidia.com/gpu.workload.config`.
///
/// Source: NVIDIA/gpu-operator `controllers/state_manager.go` (`gpuWorkloadConfigLabelKey`).
pub const LABEL_KEY: &str = "nvidia.com/gpu.workload.config";

/// The value the operator assumes for a node WITHOUT the label: ClusterPolicy
/// `spec.sandboxWorkloads.defaultWorkload`, whose CRD default is `container`.
///
/// Source: NVIDIA/gpu-operator `api/nvidia/v1/clusterpolicy_types.go`
/// (`SandboxWorkloadsSpec.DefaultWorkload`, kubebuilder default `container`). A node with
/// an INVALID label value also falls back to this default, silently (only a log line,
/// `controllers/state_manager.go`).
pub const DEFAULT_WORKLOAD: WorkloadConfig = WorkloadConfig::Container;

/// The ClusterPolicy field that holds [`DEFAULT_WORKLOAD`]: `sandboxWorkloads.defaultWorkload`.
///
/// Source: NVIDIA/gpu-operator `api/nvidia/v1/clusterpolicy_types.go`.
pub(crate) const DEFAULT_WORKLOAD_FIELD: &str = "sandboxWorkloads.defaultWorkload";

/// The ClusterPolicy flag (also the Helm value) that makes the operator honour
/// [`LABEL_KEY`] at all: `sandboxWorkloads.enabled` (default `false`; when false every node
/// is treated as `container` and the label is ignored).
///
/// Source: NVIDIA/gpu-operator `api/nvidia/v1/clusterpolicy_types.go`
/// (`SandboxWorkloadsSpec.IsEnabled`).
pub const ENABLE_FLAG: &str = "sandboxWorkloads.enabled";

/// One of the three values of [`LABEL_KEY`]. A node runs exactly one of them.
///
/// Parsing ([`FromStr`]) is case-sensitive and exact, as the operator's
/// `isValidWorkloadConfig` is (NVIDIA/gpu-operator `controllers/state_manager.go`):
/// `vm_passthrough` or `Container` are errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadConfig {
    /// `container`: GPUs for containers (datacenter driver, device plugin, ...).
    Container,
    /// `vm-passthrough`: whole GPUs bound to `vfio-pci` for KubeVirt VMs.
    VmPassthrough,
    /// `vm-vgpu`: vGPU (mediated) devices for KubeVirt VMs.
    VmVgpu,
}

/// The error of parsing a label value that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not one of container, vm-passthrough, vm-vgpu",
    text::cut(value)
)]
pub struct InvalidWorkloadConfig {
    /// The rejected value, verbatim.
    pub value: String,
}

impl InvalidWorkloadConfig {
    /// The valid value the rejected one was most likely meant to be: equal but for case,
    /// surrounding spaces or `_` for `-`, else at most 2 edits away (Levenshtein, lower
    /// case), else the one value that holds it (`passthrough` → `vm-passthrough`, `vgpu`
    /// → `vm-vgpu`; see [`crate::text::close_names`]). The operator compares
    /// case-sensitively, so `Vm-Passthrough` is invalid there (NVIDIA/gpu-operator
    /// `controllers/state_manager.go`, `isValidWorkloadConfig`).
    pub fn nearest(&self) -> Option<WorkloadConfig> {
        let v = self.value.trim().to_ascii_lowercase().replace('_', "-");
        if v.is_empty() || v.len() > 40 {
            return None;
        }
        let by_edits = WorkloadConfig::ALL
            .into_iter()
            .map(|w| (strsim::levenshtein(&v, w.as_str()), w))
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, w)| w);
        by_edits.or_else(|| {
            let close = text::close_names(&v, WorkloadConfig::ALL.iter().map(|w| w.as_str()));
            match close.as_slice() {
                [one] => one.parse().ok(),
                _ => None,
            }
        })
    }

    /// `; did you mean vm-passthrough?` when [`Self::nearest`] has one, else empty: the
    /// tail a message about the value ends with.
    pub fn did_you_mean(&self) -> String {
        self.nearest()
            .map(|w| format!("; did you mean {w}?"))
            .unwrap_or_default()
    }
}

impl WorkloadConfig {
    /// All three values, in the operator's order.
    pub const ALL: [WorkloadConfig; 3] = [
        WorkloadConfig::Container,
        WorkloadConfig::VmPassthrough,
        WorkloadConfig::VmVgpu,
    ];

    /// The label value: `container`, `vm-passthrough` or `vm-vgpu`
    /// (NVIDIA/gpu-operator `controllers/state_manager.go`, `gpuWorkloadConfig*`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadConfig::Container => "container",
            WorkloadConfig::VmPassthrough => "vm-passthrough",
            WorkloadConfig::VmVgpu => "vm-vgpu",
        }
    }

    /// The operands as the docs summarize them (the list the lab prints in
    /// `operands.txt`): container → datacenter-driver, container-toolkit, device-plugin,
    /// dcgm-exporter; vm-passthrough → vfio-manager, sandbox-device-plugin; vm-vgpu →
    /// vgpu-manager, vgpu-device-manager, sandbox-device-plugin.
    ///
    /// Source: NVIDIA/cloud-native-docs `gpu-operator/gpu-operator-kubevirt.rst`.
    pub fn operands_docs(self) -> &'static [&'static str] {
        match self {
            WorkloadConfig::Container => &[
                "datacenter-driver",
                "container-toolkit",
                "device-plugin",
                "dcgm-exporter",
            ],
            WorkloadConfig::VmPassthrough => &["vfio-manager", "sandbox-device-plugin"],
            WorkloadConfig::VmVgpu => &[
                "vgpu-manager",
                "vgpu-device-manager",
                "sandbox-device-plugin",
            ],
        }
    }

    /// The full set of `<x>` in the `nvidia.com/gpu.deploy.<x>: "true"` labels the operator
    /// puts on a node of this type (identical v23.9 → v26.3). Not included: `mig-manager`
    /// (container, only on MIG-capable GPUs) and `client` (added to all three in v26.7).
    /// A deploy label alone deploys nothing: each component also needs its own `enabled`
    /// flag in the ClusterPolicy.
    ///
    /// Source: NVIDIA/gpu-operator `controllers/state_manager.go` (`gpuStateLabels`).
    pub fn deploy_labels(self) -> &'static [&'static str] {
        match self {
            WorkloadConfig::Container => &[
                "driver",
                "gpu-feature-discovery",
                "container-toolkit",
                "device-plugin",
                "dcgm",
                "dcgm-exporter",
                "node-status-exporter",
                "operator-validator",
            ],
            WorkloadConfig::VmPassthrough => &[
                "sandbox-device-plugin",
                "sandbox-validator",
                "vfio-manager",
                "kata-manager",
                "cc-manager",
            ],
            WorkloadConfig::VmVgpu => &[
                "sandbox-device-plugin",
                "vgpu-manager",
                "vgpu-device-manager",
                "sandbox-validator",
                "cc-manager",
            ],
        }
    }
}

/// Prefix of the operator's deploy labels: `nvidia.com/gpu.deploy.` + a name from
/// [`WorkloadConfig::deploy_labels`] (NVIDIA/gpu-operator `controllers/state_manager.go`).
pub const DEPLOY_LABEL_PREFIX: &str = "nvidia.com/gpu.deploy.";

impl fmt::Display for WorkloadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WorkloadConfig {
    type Err = InvalidWorkloadConfig;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WorkloadConfig::ALL
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| InvalidWorkloadConfig {
                value: s.to_owned(),
            })
    }
}

impl serde::Serialize for WorkloadConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_value_names_the_one_it_was_meant_to_be() {
        let err = |v: &str| v.parse::<WorkloadConfig>().unwrap_err();
        assert_eq!(
            err("Vm-Passthrough").did_you_mean(),
            "; did you mean vm-passthrough?"
        );
        // A fragment of exactly one value (issue 42: `passthrough`, `vgpu`).
        let nearest = |v: &str| {
            InvalidWorkloadConfig {
                value: v.to_owned(),
            }
            .nearest()
        };
        assert_eq!(nearest("passthrough"), Some(WorkloadConfig::VmPassthrough));
        assert_eq!(nearest("vgpu"), Some(WorkloadConfig::VmVgpu));
        assert_eq!(nearest("vm"), None);
        assert_eq!(nearest("vm-passthru"), Some(WorkloadConfig::VmPassthrough));
        assert_eq!(err("vm_vgpu").nearest(), Some(WorkloadConfig::VmVgpu));
        assert_eq!(
            err(" container ").nearest(),
            Some(WorkloadConfig::Container)
        );
        assert_eq!(
            err("vm-pasthrough").nearest(),
            Some(WorkloadConfig::VmPassthrough)
        );
        assert_eq!(err("gpu").did_you_mean(), "");
    }

    #[test]
    fn label_and_flags() {
        assert_eq!(LABEL_KEY, "nvidia.com/gpu.workload.config");
        assert_eq!(DEFAULT_WORKLOAD.as_str(), "container");
        assert_eq!(ENABLE_FLAG, "sandboxWorkloads.enabled");
        assert_eq!(DEFAULT_WORKLOAD_FIELD, "sandboxWorkloads.defaultWorkload");
    }

    #[test]
    fn parse_is_exact_and_case_sensitive() {
        for w in WorkloadConfig::ALL {
            assert_eq!(w.as_str().parse::<WorkloadConfig>(), Ok(w));
            assert_eq!(w.to_string(), w.as_str());
        }
        for bad in [
            "vm_passthrough",
            "Container",
            "VM-VGPU",
            "",
            " container",
            "vm-gpu",
        ] {
            let e = bad.parse::<WorkloadConfig>().unwrap_err();
            assert_eq!(e.value, bad);
        }
    }

    #[test]
    fn operands() {
        assert_eq!(
            WorkloadConfig::Container.operands_docs(),
            [
                "datacenter-driver",
                "container-toolkit",
                "device-plugin",
                "dcgm-exporter"
            ]
        );
        assert_eq!(
            WorkloadConfig::VmPassthrough.operands_docs(),
            ["vfio-manager", "sandbox-device-plugin"]
        );
        assert_eq!(
            WorkloadConfig::VmVgpu.operands_docs(),
            [
                "vgpu-manager",
                "vgpu-device-manager",
                "sandbox-device-plugin"
            ]
        );
        assert_eq!(WorkloadConfig::Container.deploy_labels().len(), 8);
        assert!(
            WorkloadConfig::VmPassthrough
                .deploy_labels()
                .contains(&"kata-manager")
        );
        assert!(
            WorkloadConfig::VmVgpu
                .deploy_labels()
                .contains(&"vgpu-device-manager")
        );
        assert!(
            !WorkloadConfig::VmVgpu
                .deploy_labels()
                .contains(&"vfio-manager")
        );
    }
}
