//! The quota layer's side of a twin's relabels (`gpuwl whatif relabel`, `gpuwl plan` and
//! `gpuwl relabel`'s preview): which Kueue flavors each relabelled node leaves and joins,
//! and the admitted workloads that lose their pool ([`kueue::relabel_quota`]), judged on
//! the nodes as the twin leaves them.

use super::predict;
use super::report::{NodeChange, Report};
use crate::analysis::kueue::{self, RelabelQuota};
use crate::model::kueue::KueueObjects;
use crate::model::node::NodeInfo;
use crate::model::snapshot::Snapshot;

/// The nodes as the twin's relabels leave them: the relabelled ones with the labels the
/// operator leaves ([`predict::relabelled`]) and the GPU names the twin's node status shows
/// after (`advertised_after`, a name that left at 0), the others as read.
pub fn nodes_after(source: &Snapshot, changes: &[NodeChange]) -> Vec<NodeInfo> {
    source
        .nodes
        .iter()
        .map(|n| {
            let Some(c) = changes.iter().find(|c| c.relabel.node == n.name) else {
                return n.clone();
            };
            let mut after =
                predict::relabelled(n, c.relabel.config, c.relabel.vgpu_type.as_deref());
            let names = c.advertised_before.keys().chain(c.advertised_after.keys());
            let mut alloc = after.allocatable.clone().unwrap_or(after.capacity.clone());
            for name in names {
                let units = c
                    .advertised_after
                    .get(name)
                    .copied()
                    .unwrap_or(0)
                    .to_string();
                alloc.insert(name.clone(), units.clone());
                after.capacity.insert(name.clone(), units);
            }
            after.allocatable = Some(alloc);
            after
        })
        .collect()
}

/// The quota layer's side of the relabels the twin made (`changes`, [`Report::changes`]) over the Kueue objects `k` read from the
/// same source ([`kueue::relabel_quota`] on `source`'s nodes before and [`nodes_after`]).
pub fn quota_side(changes: &[NodeChange], k: &KueueObjects, source: &Snapshot) -> RelabelQuota {
    let after = nodes_after(source, changes);
    let relabels: Vec<(String, String)> = changes
        .iter()
        .map(|c| (c.relabel.node.clone(), c.relabel.config.as_str().to_owned()))
        .collect();
    kueue::relabel_quota(k, &source.nodes, &after, &relabels, source.policy.policy())
}

/// Adds [`quota_side`] to `report`: its sentences as notes, the whole as
/// [`Report::quota`] (`quota` in JSON/YAML).
pub fn add_quota(report: &mut Report, k: &KueueObjects, source: &Snapshot) {
    let q = quota_side(&report.changes, k, source);
    report.notes.extend(q.sentences());
    report.quota = Some(q);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::twin::report::Relabel;
    use crate::model::operator::PolicyStatus;
    use crate::model::workload::WorkloadConfig;

    /// The lab's nodes and the objects `gpuwl lab --kueue` leaves (tests/data/kueue), the
    /// container node relabelled to vm-passthrough as the twin would report it: the node
    /// leaves flavor container and joins vm-passthrough, and the Job admitted in container
    /// loses its pool (its flavor's one node advertises the passthrough name after).
    #[test]
    fn the_container_node_to_passthrough_moves_flavors_and_the_admitted_job_loses_its_pool() {
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            include_bytes!("../../../../../tests/data/inventory/lab/nodes.json").as_slice(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let k = crate::decode::kueue::read_str(
            include_str!("../../../../../tests/data/kueue/lab-workloads.yaml"),
            "lab-workloads.yaml",
        )
        .unwrap();
        let source = Snapshot::of_cluster(nodes, Vec::new(), PolicyStatus::not_read());
        let change = NodeChange {
            relabel: Relabel {
                node: "lab-node-0".into(),
                config: WorkloadConfig::VmPassthrough,
                vgpu_type: None,
            },
            from: Some("container".into()),
            advertised_before: [("nvidia.com/gpu".to_owned(), 4)].into(),
            advertised_after: [
                ("nvidia.com/gpu".to_owned(), 0),
                ("nvidia.com/GA102GL_A10".to_owned(), 4),
            ]
            .into(),
            hardware: Vec::new(),
            notes: Vec::new(),
        };
        let q = quota_side(&[change], &k, &source);
        let s = q.sentences();
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(
            s[0].starts_with(
                "Kueue: lab-node-0 leaves flavor container and joins flavor vm-passthrough"
            ),
            "{}",
            s[0]
        );
        assert!(s[1].contains("gpu-kueue/job-kueue-container-"), "{}", s[1]);
        assert_eq!(q.lose_pool.len(), 1);
        assert_eq!(q.lose_pool[0].flavor, "container");
    }
}
