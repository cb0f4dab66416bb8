//! Facts `explain` used to leave unused (issue 35, kind 5): GPUs published twice by the
//! DRA driver and a device plugin, a failed vGPU / MIG config on a node hidden behind
//! another node that advertises the name, and whether the cluster runs the GPU Operator
//! at all (or the device plugin's missing toleration is the block) before an operator
//! hint is given.

use crate::analysis::check::dra_nodes::{DraNodes, NVIDIA_GPU_DRIVER};
use crate::analysis::diagnosis::CauseCode;
use crate::analysis::explain::{Explanation, Inputs};
use crate::analysis::placement::tolerates;
use crate::model::advertise::advertised_gpus;
use crate::model::node::{NodeInfo, Taint};
use crate::model::operand::{self, OperandsByNode};
use crate::model::operator::{
    ClusterPolicy, GpuEvidence, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, VGPU_CONFIG_LABEL,
    VGPU_CONFIG_STATE_LABEL, gpu_evidence, has_deploy_labels, vgpu_type_core,
};
use crate::model::pod::{PodInfo, Toleration};
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::workload::WorkloadConfig;

/// Whether the facts show a GPU Operator in the cluster: `Some(true)` with a ClusterPolicy
/// read, one of its operand pods, or a node carrying its `nvidia.com/gpu.deploy.*` labels
/// (NVIDIA/gpu-operator `controllers/state_manager.go`, `gpuStateLabels`: the operator
/// labels every GPU node it manages); `Some(false)` when pods were read and none of that
/// is there; `None` when nothing read could show it (no pods, no ClusterPolicy).
pub(crate) fn operator_seen(
    nodes: &[NodeInfo],
    policy: Option<&ClusterPolicy>,
    operand_pods: Option<&OperandsByNode>,
) -> Option<bool> {
    if policy.is_some()
        || nodes.iter().any(has_deploy_labels)
        || operand_pods.is_some_and(|o| o.values().any(|v| !v.is_empty()))
    {
        return Some(true);
    }
    operand_pods.map(|_| false)
}

/// The tolerations the GPU Operator gives its operand DaemonSets by default
/// (NVIDIA/gpu-operator `deployments/gpu-operator/values.yaml`, `daemonsets.tolerations`:
/// `nvidia.com/gpu` Exists NoSchedule); NVIDIA/k8s-device-plugin's chart has it too
/// (`deployments/helm/nvidia-device-plugin/values.yaml`, `tolerations`, beside the
/// deprecated `CriticalAddonsOnly`, which no GPU node pool uses as its taint).
pub(crate) fn default_plugin_tolerations() -> Vec<Toleration> {
    vec![Toleration {
        key: Some("nvidia.com/gpu".into()),
        operator: Some("Exists".into()),
        value: None,
        effect: Some("NoSchedule".into()),
    }]
}

/// A GPU node where the device plugin does not run because of a taint its pods do not
/// tolerate ([`plugin_toleration_block`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TolerationBlock {
    /// The node.
    pub node: String,
    /// `device-plugin` or `sandbox-device-plugin`.
    pub plugin: &'static str,
    /// The taints the plugin's pods do not tolerate, as `key=value:Effect`.
    pub taints: Vec<String>,
    /// The nodes where the plugin's pods run (whose tolerations were read); empty when
    /// none was seen and the default tolerations were assumed.
    pub runs_on: Vec<String>,
    /// The node shows its GPU only by the taint: no NFD or GPU-stack label, so the
    /// labeller (NFD's worker, GPU Feature Discovery) is kept away by it too.
    pub no_labeller: bool,
}

/// The taint key NVIDIA's stacks use to keep other pods off GPU nodes, and which the GPU
/// Operator's operands and NVIDIA's device plugin tolerate by default
/// (NVIDIA/gpu-operator `deployments/gpu-operator/values.yaml`, `daemonsets.tolerations`).
const GPU_TAINT_KEY: &str = "nvidia.com/gpu";

impl TolerationBlock {
    /// The cause, one clause.
    pub fn cause(&self) -> String {
        let seen = if self.runs_on.is_empty() {
            "no plugin pod runs anywhere, and the default tolerations of the GPU Operator's operands and of NVIDIA's device plugin chart (nvidia.com/gpu) do not cover it".to_owned()
        } else {
            format!(
                "its pods (on {}) do not tolerate it",
                self.runs_on.join(", ")
            )
        };
        let labeller = if self.no_labeller {
            "; it carries no NFD label either: NFD's worker is kept away by the same taint \
             unless it tolerates it"
        } else {
            ""
        };
        format!(
            "{} is a GPU node that advertises no GPU and runs no {} pod: it is tainted {}, and {seen}{labeller}",
            self.node,
            self.plugin,
            self.taints.join(", ")
        )
    }

    /// The fix, one clause.
    pub fn fix(&self) -> String {
        let (who, whose) = if self.no_labeller {
            (
                format!("the {} and NFD's worker", self.plugin),
                "both DaemonSets (GPU Operator: ClusterPolicy spec.daemonsets.tolerations and \
                 node-feature-discovery.worker.tolerations; NVIDIA's device plugin chart and \
                 the node-feature-discovery chart: tolerations and worker.tolerations)",
            )
        } else {
            (
                format!("the {}", self.plugin),
                "its DaemonSet (GPU Operator: ClusterPolicy spec.daemonsets.tolerations; \
                 NVIDIA's device plugin chart: tolerations)",
            )
        };
        format!(
            "let {who} run on {}: add a toleration for {} to {whose}, or remove the taint if \
             the node is meant for GPU pods",
            self.node,
            self.taints.join(", ")
        )
    }
}

fn show_taint(t: &Taint) -> String {
    match &t.value {
        Some(v) => format!("{}={v}:{}", t.key, t.effect),
        None => format!("{}:{}", t.key, t.effect),
    }
}

/// The GPU node where the device plugin of workload `w` is kept away by a taint: a node
/// with an NVIDIA GPU by NFD or a GPU stack's labels ([`gpu_evidence`]) that advertises
/// no GPU name, has `NoSchedule`/`NoExecute` taints, runs no pod of the plugin
/// ([`crate::model::operand::plugin_of`]), and whose taints the plugin's pods elsewhere
/// (their `spec.tolerations`, from `pods`) or, where none runs, the operator's default
/// tolerations ([`default_plugin_tolerations`]) do not tolerate. A DaemonSet's pods
/// tolerate only what the DaemonSet lists (kubernetes/kubernetes
/// `pkg/controller/daemon/daemon_controller.go`, `NodeShouldRunDaemonPod`), so no plugin
/// pod is created there and nothing advertises the node's GPUs. Needs the operand pods
/// (a pods file or the live cluster); `None` without them.
pub(crate) fn plugin_toleration_block(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    operand_pods: Option<&OperandsByNode>,
    w: WorkloadConfig,
) -> Option<TolerationBlock> {
    let operand_pods = operand_pods?;
    let plugin = operand::plugin_of(w);
    let running: Vec<(&str, &str)> = operand_pods
        .iter()
        .flat_map(|(n, v)| {
            v.iter()
                .filter(|p| p.operand == plugin)
                .map(move |p| (n.as_str(), p.pod.as_str()))
        })
        .collect();
    let mut tolerations: Vec<Toleration> = running
        .iter()
        .filter_map(|(_, key)| {
            pods.iter()
                .find(|p| format!("{}/{}", p.namespace, p.name) == *key)
        })
        .flat_map(|p| p.tolerations.iter().cloned())
        .collect();
    if running.is_empty() {
        tolerations = default_plugin_tolerations();
    } else if tolerations.is_empty()
        && !running.iter().any(|(_, key)| {
            pods.iter()
                .any(|p| format!("{}/{}", p.namespace, p.name) == *key)
        })
    {
        // The plugin's pods were seen but not their specs: nothing to compare.
        return None;
    }
    let mut runs_on: Vec<String> = running.iter().map(|(n, _)| (*n).to_owned()).collect();
    runs_on.sort();
    runs_on.dedup();
    nodes.iter().find_map(|n| {
        let evidence = gpu_evidence(n);
        // A taint of NVIDIA's GPU key marks a GPU node too: the labeller (NFD) may be kept
        // away by the same taint, so the node has no NFD label to show it.
        let gpu_taint = n.taints.iter().any(|t| t.key == GPU_TAINT_KEY);
        let gpu = matches!(evidence, GpuEvidence::Nfd | GpuEvidence::Unknown) || gpu_taint;
        if !gpu || !advertised_gpus(n).is_empty() || runs_on.contains(&n.name) {
            return None;
        }
        let no_labeller = !matches!(evidence, GpuEvidence::Nfd | GpuEvidence::Unknown);
        let taints: Vec<String> = n
            .taints
            .iter()
            .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
            .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
            .map(show_taint)
            .collect();
        (!taints.is_empty()).then(|| TolerationBlock {
            node: n.name.clone(),
            plugin,
            taints,
            runs_on: runs_on.clone(),
            no_labeller,
        })
    })
}

/// The hint for a name of workload `w` that no node advertises, following the facts: the
/// device plugin's missing toleration when that is the block
/// ([`plugin_toleration_block`]); the GPU Operator's workload label only where the facts
/// show the operator ([`operator_seen`]), conditionally where nothing read can tell, and
/// a device plugin to deploy where pods were read and no operator is there.
pub(crate) fn advertise_hint(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    policy: Option<&ClusterPolicy>,
    operand_pods: Option<&OperandsByNode>,
    resource: &str,
    w: WorkloadConfig,
    class: ResourceClass,
) -> Hint {
    use crate::model::workload::{ENABLE_FLAG, LABEL_KEY};
    if let Some(b) = plugin_toleration_block(nodes, pods, operand_pods, w) {
        return Hint {
            cause: Some(b.cause()),
            fix: b.fix(),
        };
    }
    let operator = format!(
        "label a GPU node {LABEL_KEY}={w} (with ClusterPolicy {ENABLE_FLAG}=true{}) so the GPU Operator deploys the device plugin for this {}",
        if w == WorkloadConfig::Container {
            ", or without sandbox workloads at all"
        } else {
            ""
        },
        class.describe()
    );
    let plugin = match w {
        WorkloadConfig::Container => "NVIDIA's k8s-device-plugin",
        _ => {
            "a device plugin for VM devices (the GPU Operator's sandbox device plugin with sandbox workloads, or KubeVirt's own through permittedHostDevices)"
        }
    };
    let fix = match operator_seen(nodes, policy, operand_pods) {
        Some(true) => format!(
            "no node advertises {resource} or any other name of that hardware: make one advertise it — {operator} — or request a name that is advertised"
        ),
        Some(false) => format!(
            "no node advertises {resource} or any other name of that hardware, and the cluster shows no GPU Operator (no ClusterPolicy read, none of its operand pods, no gpu.deploy.* node labels): deploy {plugin} on the GPU nodes, or request a name that is advertised"
        ),
        None => format!(
            "no node advertises {resource} or any other name of that hardware: make one advertise it — with the GPU Operator, {operator}; without it, deploy {plugin} (pass --pods or --cluster-policy to tell) — or request a name that is advertised"
        ),
    };
    Hint { cause: None, fix }
}

/// A hint: a clause to add to the cause (when the facts show the block), and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// What blocks, when the facts show it.
    pub cause: Option<String>,
    /// The fix.
    pub fix: String,
}

/// Nodes where NVIDIA's DRA driver (`gpu.nvidia.com`) publishes devices and a device
/// plugin advertises GPU names too, among the nodes that matter to the pod (those that
/// advertise a name it requests, or any when it has resource claims): the two allocate
/// independently and can hand the same GPU to two pods (check's `dra-and-device-plugin`,
/// [`crate::analysis::check::DraNodes::finding`]; NVIDIA/k8s-dra-driver-gpu README: the
/// driver and the device plugin must not serve the same GPUs). One note per node.
pub(crate) fn double_publication(
    pod: &PodInfo,
    inputs: Inputs<'_>,
    e: &Explanation,
) -> Vec<String> {
    let (Some(dra), Some(nodes)) = (inputs.dra, inputs.nodes) else {
        return Vec::new();
    };
    let claims = !pod.resource_claims.is_empty();
    if !claims && e.requests.iter().all(|rv| rv.advertisers.is_empty()) {
        return Vec::new();
    }
    let counts = DraNodes::device_counts(dra);
    nodes
        .iter()
        .filter_map(|n| {
            let devices = *counts.get(&n.name)?;
            let names = advertised_gpus(n);
            if devices == 0 || names.is_empty() {
                return None;
            }
            let asked = e
                .requests
                .iter()
                .any(|rv| rv.advertisers.iter().any(|a| a.node == n.name));
            if !asked && !claims {
                return None;
            }
            let list = names
                .iter()
                .map(|(r, a)| format!("{r}={a}"))
                .collect::<Vec<_>>()
                .join(", ");
            Some(format!(
                "{}: GPUs published twice — a device plugin advertises {list} and NVIDIA's DRA driver ({}) publishes {devices} device(s) there; the two allocate independently, so this pod may get a GPU that another pod already holds through the other one (check's dra-and-device-plugin); run one of them per node (a device plugin re-enabled beside the DRA driver: set its gpu.deploy label or the ClusterPolicy devicePlugin.enabled back to false)",
                n.name,
                NVIDIA_GPU_DRIVER
            ))
        })
        .collect()
}

/// A node whose failed (or pending) vGPU or MIG config explains that it offers none of a
/// requested name while another node advertises it ([`hidden_config_failures`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HiddenFailure {
    /// The node.
    pub node: String,
    /// The requested name.
    pub resource: String,
    /// `nvidia.com/vgpu.config.state=failed` or `nvidia.com/mig.config.state=failed`, ...
    pub state: String,
    /// The config asked for (`nvidia.com/vgpu.config` or `nvidia.com/mig.config`).
    pub config: String,
    /// The manager whose log says why.
    pub manager: &'static str,
}

impl HiddenFailure {
    /// The clause for the cause.
    pub fn cause(&self) -> String {
        let what = if self.state.ends_with("=failed") {
            "failed"
        } else {
            "is not applied yet"
        };
        format!(
            "{} offers no {} because its config {} {what} ({})",
            self.node, self.resource, self.config, self.state
        )
    }

    /// The repair, for the notes.
    pub(crate) fn repair(&self) -> String {
        let then = if self.manager == "nvidia-mig-manager" {
            "a MIG mode change usually needs a GPU reset or a reboot of the node"
        } else {
            "check that the config exists for its GPU"
        };
        format!(
            "{}: {} — config {}; it would add units of {}: read the {} pod's log on {} ({then}) until the state is success",
            self.node, self.state, self.config, self.resource, self.manager, self.node
        )
    }
}

/// Per requested vGPU-type or MIG name that some node advertises: the nodes that do not
/// advertise it and whose vGPU or MIG manager reports the config that would give it as
/// `failed` or `pending` (`rebooting` for MIG) — NVIDIA/vgpu-device-manager and
/// NVIDIA/mig-parted set `nvidia.com/vgpu.config.state` / `nvidia.com/mig.config.state`.
/// A node counts when its config names the type (`A10-12Q` for
/// `nvidia.com/NVIDIA_A10-12Q`), names the MIG profile (`all-1g.10gb` for
/// `nvidia.com/mig-1g.10gb`), or the node lists the name with a stale 0.
pub(crate) fn hidden_config_failures(nodes: &[NodeInfo], e: &Explanation) -> Vec<HiddenFailure> {
    let mut out = Vec::new();
    for rv in e.requests.iter().filter(|rv| !rv.advertisers.is_empty()) {
        let short = rv
            .resource
            .strip_prefix(NVIDIA_PREFIX)
            .unwrap_or(&rv.resource);
        let (state_key, config_key, manager, bad): (_, _, _, &[&str]) = match classify(&rv.resource)
        {
            ResourceClass::VgpuType => (
                VGPU_CONFIG_STATE_LABEL,
                VGPU_CONFIG_LABEL,
                "nvidia-vgpu-device-manager",
                &["failed", "pending"],
            ),
            _ if short.starts_with("mig-") => (
                MIG_CONFIG_STATE_LABEL,
                MIG_CONFIG_LABEL,
                "nvidia-mig-manager",
                &["failed", "pending", "rebooting"],
            ),
            _ => continue,
        };
        for n in nodes {
            if rv.advertisers.iter().any(|a| a.node == n.name) {
                continue;
            }
            let Some(state) = n.label(state_key).filter(|s| bad.contains(s)) else {
                continue;
            };
            let config = n.label(config_key).unwrap_or("");
            let names_it = if state_key == VGPU_CONFIG_STATE_LABEL {
                vgpu_type_core(config).is_some_and(|c| Some(c) == vgpu_type_core(short))
            } else {
                let profile = &short["mig-".len()..];
                !profile.is_empty() && config.contains(profile)
            };
            if names_it || rv.stale_nodes.contains(&n.name) {
                out.push(HiddenFailure {
                    node: n.name.clone(),
                    resource: rv.resource.clone(),
                    state: format!("{state_key}={state}"),
                    config: format!("{config:?}"),
                    manager,
                });
            }
        }
    }
    out
}

/// Adds the unused facts to a diagnosed explanation: a hidden config failure to the cause
/// (or the notes when the pod fits or is bound) with its repair in the notes, and each
/// double publication in the notes.
pub fn add(pod: &PodInfo, inputs: Inputs<'_>, e: &mut Explanation) {
    let nodes = inputs.nodes.unwrap_or(&[]);
    for h in hidden_config_failures(nodes, e) {
        // A rule that already named the node's state said it all.
        if e.cause.contains(&h.node) && e.cause.contains(&h.state) {
            continue;
        }
        if matches!(e.cause_code, CauseCode::FitsNow | CauseCode::Scheduled) {
            e.notes.push(h.cause());
            e.notes.push(h.repair());
        } else {
            // Restoring capacity the operator failed to provide disrupts no one: it comes
            // before any change to the pod, the nodes or running workloads (issue 49).
            e.cause.push_str(&format!("; {}", h.cause()));
            e.evidence.push(format!("{}: {}", h.node, h.state));
            e.fix = format!(
                "first restore what {} failed to provide, which disrupts no one: {}. Only \
                 while that cannot be done: {}",
                h.node,
                h.repair(),
                e.fix
            );
        }
    }
    e.notes.extend(double_publication(pod, inputs, e));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::operand::{OperandHealth, OperandPod};

    fn gpu_node(name: &str, taint: Option<(&str, &str)>) -> NodeInfo {
        let mut n = NodeInfo::named(name);
        n.labels.insert(
            crate::model::operator::NFD_NVIDIA_PCI_LABEL.into(),
            "true".into(),
        );
        if let Some((k, v)) = taint {
            n.taints.push(Taint {
                key: k.into(),
                value: Some(v.into()),
                effect: "NoSchedule".into(),
            });
        }
        n
    }

    fn plugin_pod(node: &str) -> OperandPod {
        OperandPod {
            operand: "device-plugin".into(),
            pod: format!("gpu-operator/nvidia-device-plugin-{node}"),
            node: node.into(),
            health: OperandHealth::Ready,
            phase: None,
            restarts: 0,
            reason: None,
        }
    }

    fn spec(node: &str, tolerations: Vec<Toleration>) -> PodInfo {
        PodInfo {
            namespace: "gpu-operator".into(),
            name: format!("nvidia-device-plugin-{node}"),
            node_name: Some(node.into()),
            tolerations: tolerations.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_plugins_own_tolerations_decide_the_block() {
        let mut ok = gpu_node("g-0", None);
        ok.allocatable = Some([("nvidia.com/gpu".to_string(), "1".to_string())].into());
        let nodes = [ok, gpu_node("g-1", Some(("dedicated", "ml")))];
        let operands = crate::model::operand::by_node(vec![plugin_pod("g-0")]);
        // The plugin's pod on g-0 tolerates nvidia.com/gpu only: g-1's taint blocks it.
        let pods = [spec("g-0", default_plugin_tolerations())];
        let b = plugin_toleration_block(&nodes, &pods, Some(&operands), WorkloadConfig::Container)
            .unwrap();
        assert_eq!(
            (b.node.as_str(), b.taints.as_slice(), b.runs_on.as_slice()),
            (
                "g-1",
                ["dedicated=ml:NoSchedule".to_string()].as_slice(),
                ["g-0".to_string()].as_slice()
            )
        );
        // A plugin that tolerates the taint: no block.
        let tolerant = [spec(
            "g-0",
            vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }],
        )];
        assert!(
            plugin_toleration_block(
                &nodes,
                &tolerant,
                Some(&operands),
                WorkloadConfig::Container
            )
            .is_none()
        );
        // Operand pods not read: nothing to say.
        assert!(plugin_toleration_block(&nodes, &pods, None, WorkloadConfig::Container).is_none());
    }

    #[test]
    fn the_operator_is_seen_by_its_policy_pods_or_labels() {
        let bare = [gpu_node("g-1", None)];
        assert_eq!(operator_seen(&bare, None, None), None);
        let empty = OperandsByNode::new();
        assert_eq!(operator_seen(&bare, None, Some(&empty)), Some(false));
        let mut labelled = gpu_node("g-1", None);
        labelled
            .labels
            .insert("nvidia.com/gpu.deploy.driver".into(), "true".into());
        assert_eq!(operator_seen(&[labelled], None, Some(&empty)), Some(true));
        let operands = crate::model::operand::by_node(vec![plugin_pod("g-1")]);
        assert_eq!(operator_seen(&bare, None, Some(&operands)), Some(true));
    }
}
