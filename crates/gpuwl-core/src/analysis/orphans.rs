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
use crate::model::operator::ClusterPolicy;
use crate::model::pod::{self, PodInfo};
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
    /// The node's effective workload (its pool, [`crate::model::pool::Pool::of`]) no
    /// longer serves the held name's class (a relabel, or a ClusterPolicy change, swapped
    /// the operands under the holders): `vm-passthrough`'s vfio-manager replaced by the
    /// container driver, say.
    pub class_changed: bool,
}

impl Orphan {
    /// The VMIs among the holders (virt-launcher pods), as `namespace/vmi`.
    pub fn vms(&self) -> Vec<String> {
        self.holders
            .iter()
            .filter_map(|h| {
                let (ns, name) = h.pod.split_once('/')?;
                pod::launcher_vmi_name(name).map(|v| format!("{ns}/{v}"))
            })
            .collect()
    }

    /// Whether a holder may lose its GPU: a VM holds the name (its vfio / vGPU device sits
    /// under operands that are going away or restarting), or the class changed under any
    /// holder. Such an orphan is `holder-at-risk` (an error), the others `orphaned-holder`
    /// (a warning: a plain pod keeps its device until it ends).
    pub fn at_risk(&self) -> bool {
        self.class_changed || !self.vms().is_empty()
    }

    /// What this orphan means for its holders, the one text `check`'s finding and
    /// `inventory`'s note both say (`place`: how the node is named, `here` or `there`):
    /// for a holder at risk ([`Orphan::at_risk`]) that it may lose the GPU and the way
    /// back; else that the holders keep running but cannot come back.
    pub fn consequence(&self, place: &str) -> String {
        if !self.at_risk() {
            return format!(
                "they keep running, but one that restarts or is recreated cannot come back {place}"
            );
        }
        let vms = self.vms();
        let who = if vms.is_empty() {
            "these pods".to_owned()
        } else {
            format!("VM {}", vms.join(", VM "))
        };
        if self.class_changed {
            // The way back is the workload that serves the held name's class, as one
            // command `gpuwl relabel` takes as printed (it keeps holders of that name).
            let back = match classify(&self.resource).workload() {
                Some(w) => format!(": gpuwl relabel {}={w}", self.node),
                None => String::new(),
            };
            format!(
                "the node's workload no longer serves this class of name, so the GPU Operator replaces the operands behind it (driver, vfio-manager or vGPU manager, device plugin): {who} may lose the GPU; stop or migrate before the swap, or relabel the node back{back}"
            )
        } else {
            format!(
                "the device plugin no longer offers it (restarting, or gone): {who} may lose the GPU if the plugin does not come back; a VM that restarts or migrates cannot come back {place}"
            )
        }
    }

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
    pub(crate) fn holder_list(&self) -> String {
        self.holders
            .iter()
            .map(|h| {
                let vmi = h
                    .pod
                    .split_once('/')
                    .and_then(|(ns, name)| {
                        pod::launcher_vmi_name(name).map(|v| format!("VMI {ns}/{v}, "))
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
            class_changed: match (classify(r).workload(), usage.pool_of(n)) {
                (Some(held), Some(pool)) => held != pool.workload,
                _ => false,
            },
        })
        .collect()
}

/// The orphaned holdings of one node, given the pods bound to it (others are ignored).
pub(crate) fn of_node(
    node: &NodeInfo,
    pods: &[PodInfo],
    policy: Option<&ClusterPolicy>,
) -> Vec<Orphan> {
    let mine: Vec<PodInfo> = pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
        .cloned()
        .collect();
    if mine.is_empty() {
        return Vec::new();
    }
    find(&Usage::build(
        std::slice::from_ref(node),
        Some(&mine),
        policy,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pod::ObjectKind;
    use std::collections::BTreeMap;

    fn node(res: &[(&str, &str)]) -> NodeInfo {
        crate::testkit::gpu_node("gpu-pt-1", None, res)
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
            None,
        );
        assert_eq!(zero.len(), 1);
        assert_eq!((zero[0].listed, zero[0].units), (true, 1));
        // A VM holds it, and the node (no label: container by default) no longer serves
        // passthrough names: at risk, an error.
        assert!(zero[0].class_changed && zero[0].at_risk());
        assert_eq!(zero[0].vms(), ["gpu-vm/vm1"]);
        let f = crate::analysis::check::orphan_finding(&zero[0]);
        assert_eq!(f.code, crate::model::finding::Code::HolderAtRisk);
        assert_eq!(f.severity, crate::model::finding::Severity::Error);
        assert_eq!(
            f.message,
            "1 bound pod(s) hold 1 nvidia.com/GA102GL_A10 that the node no longer advertises (listed with 0): gpu-vm/virt-launcher-vm1-abcde (VMI gpu-vm/vm1, 1); the node's workload no longer serves this class of name, so the GPU Operator replaces the operands behind it (driver, vfio-manager or vGPU manager, device plugin): VM gpu-vm/vm1 may lose the GPU; stop or migrate before the swap, or relabel the node back: gpuwl relabel gpu-pt-1=vm-passthrough"
        );
        // A plain pod on a container name listed with "0" on a container node (a plugin
        // restarting): a warning, it keeps its device.
        let mut labelled = node(&[("nvidia.com/gpu", "0")]);
        labelled
            .labels
            .insert(crate::model::workload::LABEL_KEY.into(), "container".into());
        let plain = of_node(
            &labelled,
            &[pod("train", "gpu-pt-1", "Running", "nvidia.com/gpu")],
            None,
        );
        assert!(!plain[0].class_changed && !plain[0].at_risk());
        assert_eq!(
            crate::analysis::check::orphan_finding(&plain[0]).code,
            crate::model::finding::Code::OrphanedHolder
        );
        // The same plain pod after a class change (relabelled vm-passthrough): at risk.
        labelled.labels.insert(
            crate::model::workload::LABEL_KEY.into(),
            "vm-passthrough".into(),
        );
        let moved = of_node(
            &labelled,
            &[pod("train", "gpu-pt-1", "Running", "nvidia.com/gpu")],
            None,
        );
        assert!(moved[0].class_changed && moved[0].at_risk());
        let gone = of_node(&node(&[("nvidia.com/gpu", "2")]), &pods, None);
        assert_eq!((gone.len(), gone[0].listed), (1, false));
        // Advertised: no orphan; a non-GPU extended resource is not judged.
        assert!(of_node(&node(&[("nvidia.com/GA102GL_A10", "2")]), &pods, None).is_empty());
        assert!(of_node(&node(&[]), &pods[3..], None).is_empty());
    }
}
