//! Orphaned holders: bound pods that still hold units of a GPU resource their node no
//! longer advertises (not listed, or listed with `"0"`), the usual aftermath of a relabel,
//! a device plugin that left, or a workload config the operator changed. The kubelet
//! does not evict a running pod when its device plugin goes away (kubernetes/kubernetes
//! `pkg/kubelet/cm/devicemanager/manager.go` keeps the allocation in its checkpoint), so
//! such pods keep running, but one that restarts elsewhere or is recreated cannot come back
//! to this node. The numbers are [`Usage`]'s, the table inventory and explain read, so the
//! three agree; `check` finds them per node with [`of_node`] (the code
//! [`crate::model::finding::Code::OrphanedHolder`], a warning), `inventory` notes them under its table,
//! `explain` says it for such a pod, and `serve` exports `gpuwl_orphaned_holder_pods`.
//!
//! Limit: a name served through DRA (a DeviceClass's `extendedResourceName`) is not in the
//! node's status. `check` judges nodes with those names added ([`crate::analysis::check`]'s
//! DRA augmentation, with `--dra` or live), so it does not call such pods orphans;
//! `inventory`, `explain` and `serve` read the node status as listed and would.

use serde::Serialize;

use crate::analysis::usage::{Holder, Usage};
use crate::model::node::NodeInfo;
use crate::model::pod::PodInfo;
use crate::model::resource::classify;

/// One node × GPU resource held by bound pods but not advertised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    /// Node name.
    pub node: String,
    /// Full resource name.
    pub resource: String,
    /// Whether the node still lists the name (with 0); `false`: not listed at all.
    pub listed: bool,
    /// Units the holders request, summed (saturating).
    pub units: i64,
    /// The pods holding it (`namespace/name`), with their units, by pod key.
    pub holders: Vec<Holder>,
}

impl Orphan {
    /// `listed with 0` / `not listed`.
    pub fn how(&self) -> &'static str {
        if self.listed {
            "listed with 0"
        } else {
            "not listed"
        }
    }

    /// The holders as `ns/name (units)`, a launcher pod with its VMI
    /// (`ns/virt-launcher-vm-abcde (VMI ns/vm, 1)`).
    pub fn holder_list(&self) -> String {
        self.holders
            .iter()
            .map(|h| {
                let vmi = h
                    .pod
                    .split_once('/')
                    .and_then(|(ns, name)| {
                        crate::model::pod::launcher_vmi_name(name)
                            .map(|v| format!("VMI {ns}/{v}, "))
                    })
                    .unwrap_or_default();
                format!("{} ({vmi}{})", h.pod, h.units)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every orphaned holding in `usage`, by node then resource: a GPU-class resource
/// ([`classify`]) whose cell has allocated > 0 and allocatable 0.
pub fn find(usage: &Usage) -> Vec<Orphan> {
    usage
        .cells()
        .filter(|(_, r, c)| c.allocated > 0 && !c.advertised() && classify(r).is_gpu())
        .map(|(n, r, c)| Orphan {
            node: n.to_owned(),
            resource: r.to_owned(),
            listed: c.listed,
            units: c.allocated,
            holders: c.holders.clone(),
        })
        .collect()
}

/// `pods` grouped by the node they are bound to (unbound and finished pods left out), for
/// [`of_node`] while nodes stream.
pub fn pods_by_node(pods: Vec<PodInfo>) -> std::collections::HashMap<String, Vec<PodInfo>> {
    let mut m: std::collections::HashMap<String, Vec<PodInfo>> = Default::default();
    for p in pods.into_iter().filter(|p| !p.is_terminal()) {
        if let Some(n) = p.node_name.clone() {
            m.entry(n).or_default().push(p);
        }
    }
    m
}

/// The orphaned holdings of one node, given the pods bound to it (others are ignored).
pub fn of_node(node: &NodeInfo, pods: &[PodInfo]) -> Vec<Orphan> {
    let mine: Vec<PodInfo> = pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
        .cloned()
        .collect();
    if mine.is_empty() {
        return Vec::new();
    }
    find(&Usage::build(std::slice::from_ref(node), Some(&mine), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pod::ObjectKind;
    use std::collections::BTreeMap;

    fn node(res: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named("gpu-pt-1");
        for (r, q) in res {
            n.capacity.insert((*r).into(), (*q).into());
        }
        n.allocatable = Some(n.capacity.clone());
        n
    }

    fn pod(name: &str, node: &str, phase: &str, res: &str) -> PodInfo {
        PodInfo {
            kind: ObjectKind::Pod,
            namespace: "gpu-vm".into(),
            name: name.into(),
            node_name: Some(node.into()),
            phase: Some(phase.into()),
            requests: std::sync::Arc::new(BTreeMap::from([(res.to_owned(), 1)])),
            ..Default::default()
        }
    }

    #[test]
    fn a_running_pod_on_a_name_listed_with_0_or_gone_is_an_orphan() {
        let pods = [
            pod(
                "virt-launcher-vm1-abcde",
                "gpu-pt-1",
                "Running",
                "nvidia.com/GA102GL_A10",
            ),
            pod("done", "gpu-pt-1", "Succeeded", "nvidia.com/GA102GL_A10"),
            pod("elsewhere", "other", "Running", "nvidia.com/GA102GL_A10"),
            pod("cpu", "gpu-pt-1", "Running", "example.com/foo"),
        ];
        let zero = of_node(
            &node(&[("nvidia.com/GA102GL_A10", "0"), ("nvidia.com/gpu", "2")]),
            &pods,
        );
        assert_eq!(zero.len(), 1);
        assert_eq!((zero[0].listed, zero[0].units), (true, 1));
        assert_eq!(
            crate::analysis::check::orphan_finding(&zero[0]).message,
            "1 bound pod(s) hold 1 nvidia.com/GA102GL_A10 that the node no longer advertises (listed with 0): gpu-vm/virt-launcher-vm1-abcde (VMI gpu-vm/vm1, 1); they keep running, but one that restarts or is recreated cannot come back here"
        );
        let gone = of_node(&node(&[("nvidia.com/gpu", "2")]), &pods);
        assert_eq!((gone.len(), gone[0].listed), (1, false));
        // Advertised: no orphan; a non-GPU extended resource is not judged.
        assert!(of_node(&node(&[("nvidia.com/GA102GL_A10", "2")]), &pods).is_empty());
        assert!(of_node(&node(&[]), &pods[3..]).is_empty());
    }
}
