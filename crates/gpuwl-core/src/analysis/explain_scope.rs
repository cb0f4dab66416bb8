//! Which pods a live `gpuwl explain pod` must read (issue 51): every pod of the cluster,
//! or only those bound to the nodes where they can change the explanation.
//!
//! An explanation reads pods for three things: the units of each extended resource held
//! on each node ([`crate::analysis::usage::Usage`]: holders, free units), what each node's
//! bound pods request ([`crate::analysis::fit::requested`]: cpu, memory, pod slots for the
//! NodeResourcesFit filter) and the pods the rules and the tested fix name (holders to stop,
//! the device plugin's tolerations, a pod to free a slot). Take a pending pod that asks for
//! an extended resource R, and a node that lists no extended resource and carries no
//! `nvidia.com/` label or taint nor other GPU evidence (the GPU Operator runs its operand
//! pods only on nodes it labels `nvidia.com/gpu.deploy.<operand>`, whose pods are read):
//! - its first failing filter, the reason the scheduler counts, is the same whatever its
//!   pods: a placement filter (cordon, taints, nodeSelector, affinity) does not look at
//!   pods; a node that passes them reaches NodeResourcesFit and fails there on R (it has
//!   none), and its pods can only add cpu, memory or pod-slot shortfalls to that failure.
//!   The scheduler writes every node's shortfalls into its message (`0/N nodes are
//!   available: …`; kubernetes/kubernetes
//!   `pkg/scheduler/framework/plugins/noderesources/fit.go`, `fitsRequest` returns all
//!   insufficient resources of a node, not the first): when that message names no
//!   shortfall but of the pod's extended resources, no such node had one when the
//!   scheduler last tried;
//! - the rules that look past the first failing filter (`cordoned`: a node only the
//!   cordon blocks; `other-resource`: the nodes with free units of R; the tested fix:
//!   lifting each failure of a node in turn) find "Insufficient R" on it either way, which
//!   no change to the node's pods lifts (the fix's cpu, memory and pod-slot changes are
//!   always within reach where pods hold them), so they judge it the same.
//!
//! Its pods are then not read. What differs is only what `-o json` lists in such a node's
//! `filters[].all` behind its first failing filter: the cpu, memory or pod-slot shortfalls
//! its pods would add there.
//!
//! So the pods are scoped only when the pod is pending, a plain pod (no VM, no DRA claim,
//! no scheduling gate), asks for an extended resource, and its `PodScheduled` condition
//! carries a scheduler message over exactly the nodes read whose reasons are placement
//! reasons or `Insufficient <an extended resource the pod asks>`; else every pod is read.
//! The message is the scheduler's last attempt: a node that filled up with cpu since then
//! is judged as the scheduler last saw it.

use std::collections::BTreeSet;

use crate::analysis::fit;
use crate::model::node::NodeInfo;
use crate::model::operator::gpu_evidence;
use crate::model::pod::{ObjectKind, PodInfo, is_extended_resource};

/// The pods a live explanation reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodScope {
    /// Every pod of the cluster; the reason the scope could not be narrowed.
    All(&'static str),
    /// The pods bound to these nodes (by name) and the pods bound to none.
    Nodes(BTreeSet<String>),
}

/// The nodes whose pods can change the explanation of `pod` against `nodes`, or
/// [`PodScope::All`] (see the module documentation for the rule and why it keeps the
/// explanation the same).
pub fn pods_to_read(pod: &PodInfo, nodes: &[NodeInfo]) -> PodScope {
    if let Some(why) = not_scoped(pod, nodes.len()) {
        return PodScope::All(why);
    }
    let set = nodes
        .iter()
        .filter(|n| {
            n.resource_names().into_iter().any(is_extended_resource)
                || n.labels.keys().any(|k| k.starts_with("nvidia.com/"))
                || !gpu_evidence(n).not_gpu()
                || n.taints.iter().any(|t| t.key.starts_with("nvidia.com/"))
        })
        .map(|n| n.name.clone())
        .collect();
    PodScope::Nodes(set)
}

/// Why every pod must be read for `pod` (`None` when the scope can be narrowed).
fn not_scoped(pod: &PodInfo, node_count: usize) -> Option<&'static str> {
    if pod.node_name.is_some() || pod.is_terminal() {
        return Some("the pod is bound or finished");
    }
    if pod.kind != ObjectKind::Pod || pod.is_vm() || pod.launcher_vmi().is_some() {
        return Some("a VM's pod");
    }
    if !pod.resource_claims.is_empty() || !pod.scheduling_gates.is_empty() {
        return Some("the pod has DRA claims or scheduling gates");
    }
    if pod.requests.is_empty() {
        return Some("the pod asks for no extended resource");
    }
    let Some(message) = pod
        .pod_scheduled()
        .filter(|c| c.status == "False")
        .and_then(|c| c.message.as_deref())
    else {
        return Some("no scheduler message");
    };
    let Some((total, reasons)) = fit::parse_message(message) else {
        return Some("the scheduler message is not of the `0/N nodes are available` form");
    };
    if total != node_count {
        return Some("the scheduler message counts other nodes than those read");
    }
    let covered = |r: &str| {
        fit::is_placement_reason(r)
            || r.strip_prefix("Insufficient ")
                .is_some_and(|x| pod.requests.contains_key(x))
    };
    if !reasons.keys().all(|r| covered(r)) {
        return Some("the scheduler message names another shortfall");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::dump::read_from;
    use crate::decode::pods::read_pods_str;

    fn nodes() -> Vec<NodeInfo> {
        let dump = r#"{"kind":"List","items":[
          {"metadata":{"name":"cpu-a","labels":{}},"status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"},"capacity":{"cpu":"8","memory":"32Gi","pods":"110"}}},
          {"metadata":{"name":"cpu-cordoned","labels":{}},"spec":{"unschedulable":true},"status":{"allocatable":{"cpu":"8","pods":"110"},"capacity":{"cpu":"8","pods":"110"}}},
          {"metadata":{"name":"cpu-tainted","labels":{}},"spec":{"taints":[{"key":"team","value":"a","effect":"NoSchedule"}]},"status":{"allocatable":{"cpu":"8","pods":"110"},"capacity":{"cpu":"8","pods":"110"}}},
          {"metadata":{"name":"gpu-a","labels":{}},"status":{"allocatable":{"cpu":"8","pods":"110","nvidia.com/gpu":"8"},"capacity":{"cpu":"8","pods":"110","nvidia.com/gpu":"8"}}},
          {"metadata":{"name":"gpu-labelled","labels":{"nvidia.com/gpu.present":"true"}},"status":{"allocatable":{"cpu":"8","pods":"110"},"capacity":{"cpu":"8","pods":"110"}}}
        ]}"#;
        let mut v = Vec::new();
        read_from(dump.as_bytes(), "nodes.json", |n| v.push(n)).unwrap();
        v
    }

    fn pod(message: &str, extra_spec: &str) -> PodInfo {
        let json = format!(
            r#"{{"kind":"Pod","metadata":{{"name":"p","namespace":"ns"}},
              "spec":{{{extra_spec}"containers":[{{"name":"c","resources":{{"requests":{{"cpu":"1","nvidia.com/gpu":"64"}},"limits":{{"nvidia.com/gpu":"64"}}}}}}]}},
              "status":{{"phase":"Pending","conditions":[{{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":{message:?}}}]}}}}"#
        );
        read_pods_str(&json, "pod.json").unwrap().remove(0)
    }

    #[test]
    fn a_pending_gpu_pod_reads_the_gpu_nodes_only() {
        let p = pod(
            "0/5 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.",
            "",
        );
        let want: BTreeSet<String> = ["gpu-a", "gpu-labelled"].map(String::from).into();
        assert_eq!(pods_to_read(&p, &nodes()), PodScope::Nodes(want));
    }

    #[test]
    fn any_other_shortfall_or_another_node_count_reads_every_pod() {
        let nodes = nodes();
        for (message, why) in [
            (
                "0/5 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu.",
                "the scheduler message names another shortfall",
            ),
            (
                "0/5 nodes are available: 1 Too many pods, 4 Insufficient nvidia.com/gpu.",
                "the scheduler message names another shortfall",
            ),
            (
                "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                "the scheduler message counts other nodes than those read",
            ),
            (
                "pod has unbound immediate PersistentVolumeClaims",
                "the scheduler message is not of the `0/N nodes are available` form",
            ),
        ] {
            assert_eq!(
                pods_to_read(&pod(message, ""), &nodes),
                PodScope::All(why),
                "{message}"
            );
        }
        let gated = pod(
            "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
            r#""schedulingGates":[{"name":"x"}],"#,
        );
        assert_eq!(
            pods_to_read(&gated, &nodes),
            PodScope::All("the pod has DRA claims or scheduling gates")
        );
        let bound = pod(
            "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
            r#""nodeName":"gpu-a","#,
        );
        assert_eq!(
            pods_to_read(&bound, &nodes),
            PodScope::All("the pod is bound or finished")
        );
    }
}
