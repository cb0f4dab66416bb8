//! The GPU Operator's operand pods and their health, per node.
//!
//! An operand pod is recognised by the label its DaemonSet's pod template carries
//! (NVIDIA/gpu-operator `assets/state-*/0500_daemonset.yaml` / `0600_daemonset.yaml`,
//! `assets/gpu-feature-discovery/0500_daemonset.yaml`): `app: <daemonset name>` for most,
//! `name: <daemonset name>` for the VFIO, Kata and CC managers. The driver and vGPU
//! manager DaemonSets get a suffix per kernel / OS image on precompiled drivers and
//! OpenShift (`controllers/object_controls.go` sets `app` to the suffixed DaemonSet
//! name), so those two are matched by prefix. [`OPERAND_APPS`] lists them with the
//! operand names of the `nvidia.com/gpu.deploy.<operand>` labels.
//!
//! Health ([`OperandHealth`]): `crash-looping` when a container (init containers
//! included) waits with reason `CrashLoopBackOff` (the kubelet's back-off after repeated
//! exits, kubernetes/kubernetes `pkg/kubelet/kuberuntime`), else `ready` when the pod's
//! `Ready` condition is `True`, else `not-ready`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::workload::WorkloadConfig;

/// Pod label value (`app`, or `name` where noted) → operand name, and whether the value
/// is a prefix (suffixed DaemonSet names).
pub(crate) const OPERAND_APPS: [(&str, &str, bool); 17] = [
    ("nvidia-driver-daemonset", "driver", true),
    ("nvidia-vgpu-manager-daemonset", "vgpu-manager", true),
    ("nvidia-vfio-manager", "vfio-manager", false),
    ("nvidia-device-plugin-daemonset", "device-plugin", false),
    (
        "nvidia-sandbox-device-plugin-daemonset",
        "sandbox-device-plugin",
        false,
    ),
    ("nvidia-vgpu-device-manager", "vgpu-device-manager", false),
    ("nvidia-operator-validator", "operator-validator", false),
    ("nvidia-sandbox-validator", "sandbox-validator", false),
    (
        "nvidia-container-toolkit-daemonset",
        "container-toolkit",
        false,
    ),
    ("nvidia-dcgm-exporter", "dcgm-exporter", false),
    ("nvidia-dcgm", "dcgm", false),
    ("gpu-feature-discovery", "gpu-feature-discovery", false),
    ("nvidia-mig-manager", "mig-manager", false),
    ("nvidia-node-status-exporter", "node-status-exporter", false),
    ("nvidia-kata-manager", "kata-manager", false),
    ("nvidia-cc-manager", "cc-manager", false),
    (
        "nvidia-device-plugin-mps-control-daemon",
        "mps-control-daemon",
        false,
    ),
];

/// The operand of a pod from its `app` and `name` labels ([`OPERAND_APPS`]); `None` for
/// any other pod (the operator's own pod, `app: gpu-operator`, included).
pub fn operand_of(app: Option<&str>, name_label: Option<&str>) -> Option<&'static str> {
    let hit = |v: &str| {
        OPERAND_APPS
            .iter()
            .find(|(a, _, prefix)| {
                if *prefix {
                    v == *a || v.strip_prefix(a).is_some_and(|r| r.starts_with('-'))
                } else {
                    v == *a
                }
            })
            .map(|(_, op, _)| *op)
    };
    app.and_then(hit).or_else(|| name_label.and_then(hit))
}

/// How an operand pod is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OperandHealth {
    /// The pod's `Ready` condition is `True`.
    Ready,
    /// Scheduled or running, but not ready (starting, a probe failing, image pull...).
    NotReady,
    /// A container waits in `CrashLoopBackOff`.
    CrashLooping,
}

impl OperandHealth {
    /// `ready`, `not-ready`, `crash-looping`.
    pub fn as_str(self) -> &'static str {
        match self {
            OperandHealth::Ready => "ready",
            OperandHealth::NotReady => "not-ready",
            OperandHealth::CrashLooping => "crash-looping",
        }
    }
}

/// One operand pod as read from the cluster or a pods dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperandPod {
    /// The operand (`device-plugin`, `sandbox-device-plugin`, `vfio-manager`, ...).
    pub operand: String,
    /// `namespace/name` of the pod.
    pub pod: String,
    /// `spec.nodeName`.
    #[serde(skip)]
    pub node: String,
    /// Its health.
    pub health: OperandHealth,
    /// `status.phase`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Container restarts, summed.
    pub restarts: u64,
    /// The first waiting reason of a container (`CrashLoopBackOff`,
    /// `ImagePullBackOff`, ...) or the pod's `status.reason`, when any (cut to 100
    /// characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where operand pods came from (`operandPods` in check's and inventory's JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperandSource {
    /// `cluster`, `file`, `unreadable` (the list failed; see the note) or `not-read`
    /// (offline without a pods file, or text output that does not need them).
    pub status: &'static str,
    /// Why they could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl OperandSource {
    /// Not read.
    pub fn not_read() -> OperandSource {
        OperandSource {
            status: "not-read",
            note: None,
        }
    }
}

/// Operand pods per node name (each node's pods sorted by operand, then pod).
pub type OperandsByNode = BTreeMap<String, Vec<OperandPod>>;

/// Groups `pods` by node (pods without a node are left out: a DaemonSet pod always has one).
pub fn by_node(pods: Vec<OperandPod>) -> OperandsByNode {
    let mut out: OperandsByNode = BTreeMap::new();
    for p in pods.into_iter().filter(|p| !p.node.is_empty()) {
        out.entry(p.node.clone()).or_default().push(p);
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| (&a.operand, &a.pod).cmp(&(&b.operand, &b.pod)));
    }
    out
}

/// The device plugin that advertises a node's names under `w`: `device-plugin` for
/// container, `sandbox-device-plugin` for the VM workloads (docs/domain-facts.md §3).
pub fn plugin_of(w: WorkloadConfig) -> &'static str {
    match w {
        WorkloadConfig::Container => "device-plugin",
        _ => "sandbox-device-plugin",
    }
}

/// The operands a node of `w` needs before its plugin can advertise: the one preparing
/// the GPUs (`driver`, `vfio-manager`, `vgpu-manager` and `vgpu-device-manager`) and the
/// plugin ([`plugin_of`]).
pub fn needed(w: WorkloadConfig) -> &'static [&'static str] {
    match w {
        WorkloadConfig::Container => &["driver", "device-plugin"],
        WorkloadConfig::VmPassthrough => &["vfio-manager", "sandbox-device-plugin"],
        WorkloadConfig::VmVgpu => &[
            "vgpu-manager",
            "vgpu-device-manager",
            "sandbox-device-plugin",
        ],
    }
}

/// What a node's operand pods say about its plugin under workload `w`: `None` when the
/// plugin pod runs and is ready (or no operand pod was read for the node: nothing
/// known); else one line naming the plugin's state and any unready GPU-preparing operand
/// (`sandbox-device-plugin pod gpu-operator/x crash-looping (CrashLoopBackOff, 12
/// restarts)`, `no device-plugin pod on the node`).
pub(crate) fn plugin_problem(pods: &[OperandPod], w: WorkloadConfig) -> Option<String> {
    if pods.is_empty() {
        return None;
    }
    let plugin = plugin_of(w);
    let describe = |p: &OperandPod| {
        let mut why = Vec::new();
        if let Some(r) = &p.reason {
            why.push(r.clone());
        }
        if p.restarts > 0 {
            why.push(format!("{} restarts", p.restarts));
        }
        format!(
            "{} pod {} {}{}",
            p.operand,
            p.pod,
            p.health.as_str(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            }
        )
    };
    let mut parts = Vec::new();
    match pods.iter().find(|p| p.operand == plugin) {
        None => parts.push(format!("no {plugin} pod on the node")),
        Some(p) if p.health != OperandHealth::Ready => parts.push(describe(p)),
        Some(_) => {}
    }
    if parts.is_empty() {
        return None;
    }
    parts.extend(
        pods.iter()
            .filter(|p| {
                p.operand != plugin
                    && needed(w).contains(&p.operand.as_str())
                    && p.health != OperandHealth::Ready
            })
            .map(describe),
    );
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(op: &str, health: OperandHealth) -> OperandPod {
        OperandPod {
            operand: op.into(),
            pod: format!("gpu-operator/{op}-x"),
            node: "n".into(),
            health,
            phase: Some("Running".into()),
            restarts: if health == OperandHealth::CrashLooping {
                7
            } else {
                0
            },
            reason: (health == OperandHealth::CrashLooping).then(|| "CrashLoopBackOff".into()),
        }
    }

    #[test]
    fn operands_by_their_pod_labels() {
        assert_eq!(
            operand_of(Some("nvidia-device-plugin-daemonset"), None),
            Some("device-plugin")
        );
        assert_eq!(
            operand_of(None, Some("nvidia-vfio-manager")),
            Some("vfio-manager")
        );
        assert_eq!(
            operand_of(
                Some("nvidia-driver-daemonset-5.15.0-125-generic-ubuntu22.04"),
                None
            ),
            Some("driver")
        );
        assert_eq!(operand_of(Some("nvidia-driver-daemonsetx"), None), None);
        assert_eq!(operand_of(Some("nvidia-dcgm"), None), Some("dcgm"));
        assert_eq!(operand_of(Some("gpu-operator"), None), None);
        assert_eq!(operand_of(Some("nginx"), Some("web")), None);
    }

    #[test]
    fn the_plugin_problem_names_the_plugin_first() {
        use OperandHealth::*;
        let w = WorkloadConfig::VmPassthrough;
        assert_eq!(plugin_problem(&[], w), None);
        let ok = [
            pod("vfio-manager", Ready),
            pod("sandbox-device-plugin", Ready),
        ];
        assert_eq!(plugin_problem(&ok, w), None);
        let bad = [
            pod("vfio-manager", NotReady),
            pod("sandbox-device-plugin", CrashLooping),
        ];
        assert_eq!(
            plugin_problem(&bad, w).as_deref(),
            Some(
                "sandbox-device-plugin pod gpu-operator/sandbox-device-plugin-x crash-looping (CrashLoopBackOff, 7 restarts); vfio-manager pod gpu-operator/vfio-manager-x not-ready"
            )
        );
        let none = [pod("driver", Ready)];
        assert_eq!(
            plugin_problem(&none, WorkloadConfig::Container).as_deref(),
            Some("no device-plugin pod on the node")
        );
    }
}
