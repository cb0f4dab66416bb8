//! The quota layer as an inventory: per ClusterQueue × ResourceFlavor × GPU resource name,
//! the nominal quota, the borrowing limit, what admitted workloads reserve, the workloads
//! waiting for it (each with explain's quota cause, [`judge_workload`]), and what the
//! flavor's nodes advertise ([`FlavorOffer`]). `inventory`, `triage` and `serve` show it;
//! every verdict here is the one `gpuwl explain job` gives.
//!
//! Field meanings follow kubernetes-sigs/kueue `apis/kueue/v1beta2/clusterqueue_types.go`
//! (`nominalQuota`, `borrowingLimit`, `status.flavorsReservation`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::kueue::{
    FlavorOffer, QuotaCause, QuotaLayer, QuotaVerdict, holders, judge_workload, reserved,
};
use crate::model::kueue::{KueueObjects, Workload};
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::resource::classify;

/// A workload Kueue has not admitted, with explain's verdict on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkload {
    /// `namespace/name` of the Workload.
    pub workload: String,
    /// Its owner, `Job/<name>` or `Pod/<name>`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Explain's quota cause (`kueue-quota-exhausted`, …).
    pub cause: QuotaCause,
    /// The ClusterQueue its LocalQueue points at, when both exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    /// What it asks, per GPU resource name, in thousandths (over all pod sets).
    pub requests_milli: BTreeMap<String, i64>,
    /// Explain's one sentence ([`QuotaVerdict::message`]).
    pub message: String,
}

/// One ClusterQueue × flavor × GPU resource name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaRow {
    /// The ClusterQueue.
    pub cluster_queue: String,
    /// Its cohort, when it is in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// The ResourceFlavor.
    pub flavor: String,
    /// The GPU resource name.
    pub resource: String,
    /// `nominalQuota`, in thousandths.
    pub nominal_milli: i64,
    /// `borrowingLimit`, in thousandths (`None`: not set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit_milli: Option<i64>,
    /// Reserved by admitted workloads (`status.flavorsReservation`, else the admitted
    /// workloads' requests), in thousandths.
    pub reserved_milli: i64,
    /// The admitted workloads holding it, `namespace/name`.
    pub admitted: Vec<String>,
    /// The workloads waiting on this row (see [`build`] for which row a workload waits
    /// on), with their cause.
    pub pending: Vec<PendingWorkload>,
    /// Nodes the flavor selects (`None`: no node was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// Units of `resource` those nodes advertise in all (`None`: no node was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertised: Option<i64>,
    /// Every GPU name those nodes advertise, with the sum over them.
    pub offered: BTreeMap<String, i64>,
}

impl QuotaRow {
    /// Whether the flavor's nodes advertise the row's name (`None`: no node was read).
    pub fn served(&self) -> Option<bool> {
        self.advertised.map(|a| a > 0)
    }
}

/// The quota layer's inventory (`quota` in inventory's and triage's JSON/YAML).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaInventory {
    /// ResourceFlavors read.
    pub flavors: usize,
    /// ClusterQueues read.
    pub cluster_queues: usize,
    /// Workloads asking a GPU name that Kueue has admitted (quota reserved, not finished).
    pub admitted_workloads: usize,
    /// Rows by ClusterQueue, then in the ClusterQueue's order of resource groups,
    /// flavors and resources.
    pub rows: Vec<QuotaRow>,
    /// Waiting workloads no row holds: no queue, a name no resource group covers, or a
    /// flavor the ClusterQueue does not give that name.
    pub unplaced: Vec<PendingWorkload>,
}

impl QuotaInventory {
    /// Every waiting workload (on a row or not), by cause code: (code, workloads). A
    /// workload waiting on two rows counts once.
    pub fn pending_by_cause(&self) -> BTreeMap<(String, &'static str), i64> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out: BTreeMap<(String, &'static str), i64> = BTreeMap::new();
        let all = self
            .rows
            .iter()
            .flat_map(|r| &r.pending)
            .chain(&self.unplaced);
        for p in all {
            if seen.insert(&p.workload) {
                let cq = p.cluster_queue.clone().unwrap_or_default();
                *out.entry((cq, p.cause.as_str())).or_default() += 1;
            }
        }
        out
    }
}

/// Whether `w` asks a GPU name.
fn asks_gpu(w: &Workload) -> bool {
    w.resources().iter().any(|r| classify(r).is_gpu()) && !w.is("Finished")
}

/// The flavor a waiting workload waits on for `resource`: the flavor it fits (or is
/// assigned) in; else the first flavor tried whose unused quota is short of the name
/// (quota held by others); else the first tried whose quota is too small for it.
fn waits_in(v: &QuotaVerdict, resource: &str) -> Option<String> {
    if let Some(f) = v.flavor.get(resource) {
        return Some(f.clone());
    }
    let short = format!("insufficient unused quota for {resource} in flavor ");
    let small = format!("insufficient quota for {resource} in flavor ");
    v.flavors
        .iter()
        .find(|f| f.reason.contains(&short))
        .or_else(|| v.flavors.iter().find(|f| f.reason.contains(&small)))
        .map(|f| f.flavor.clone())
}

/// The quota rows of every ClusterQueue (each GPU name of each flavor of each resource
/// group), with the flavors' `offers` when nodes were read.
fn rows(objects: &KueueObjects, offers: Option<&[FlavorOffer]>) -> Vec<QuotaRow> {
    let mut out = Vec::new();
    for cq in &objects.cluster_queues {
        for fq in cq.groups.iter().flat_map(|g| &g.flavors) {
            let offer = offers.map(|o| o.iter().find(|x| x.flavor == fq.flavor));
            for q in fq.resources.iter().filter(|q| classify(&q.name).is_gpu()) {
                let (nodes, advertised, offered) = match offer {
                    None => (None, None, BTreeMap::new()),
                    Some(None) => (Some(0), Some(0), BTreeMap::new()),
                    Some(Some(o)) => (
                        Some(o.nodes),
                        Some(o.advertised.get(&q.name).copied().unwrap_or(0)),
                        o.advertised.clone(),
                    ),
                };
                out.push(QuotaRow {
                    cluster_queue: cq.name.clone(),
                    cohort: cq.cohort.clone(),
                    flavor: fq.flavor.clone(),
                    resource: q.name.clone(),
                    nominal_milli: q.nominal_milli,
                    borrowing_limit_milli: q.borrowing_limit_milli,
                    reserved_milli: reserved(objects, cq, &fq.flavor, &q.name),
                    admitted: holders(objects, &cq.name, &fq.flavor, &q.name)
                        .into_iter()
                        .map(|(k, _)| k)
                        .collect(),
                    pending: Vec::new(),
                    nodes,
                    advertised,
                    offered,
                });
            }
        }
    }
    out
}

/// Builds the quota inventory of `objects`: the rows ([`QuotaRow`]) and every workload
/// asking a GPU name that Kueue has not admitted, judged by [`judge_workload`] with
/// `offers` (explain's verdict). A waiting workload is put on the row of each GPU name it
/// asks, in the flavor it waits in: the one it fits in, else the first whose quota others
/// hold, else the first too small for it; with no such row (no queue, a name no group
/// covers) it is [`QuotaInventory::unplaced`].
pub fn build(objects: &KueueObjects, offers: Option<&[FlavorOffer]>) -> QuotaInventory {
    let mut inv = QuotaInventory {
        flavors: objects.flavors.len(),
        cluster_queues: objects.cluster_queues.len(),
        rows: rows(objects, offers),
        ..QuotaInventory::default()
    };
    for w in objects.workloads.iter().filter(|w| asks_gpu(w)) {
        if w.is("QuotaReserved") || w.is("Admitted") {
            inv.admitted_workloads += 1;
            continue;
        }
        let v = judge_workload(w, objects, offers);
        let requests: BTreeMap<String, i64> = w
            .resources()
            .into_iter()
            .filter(|r| classify(r).is_gpu())
            .map(|r| (r.to_owned(), w.total_milli(r)))
            .filter(|(_, m)| *m > 0)
            .collect();
        let pending = PendingWorkload {
            workload: v.workload.clone(),
            owner: w.owner.clone(),
            cause: v.cause,
            cluster_queue: v.cluster_queue.clone(),
            requests_milli: requests.clone(),
            message: v.message.clone(),
        };
        let mut placed = false;
        for r in requests.keys() {
            let Some(flavor) = waits_in(&v, r) else {
                continue;
            };
            if let Some(row) = inv.rows.iter_mut().find(|row| {
                Some(&row.cluster_queue) == v.cluster_queue.as_ref()
                    && row.flavor == flavor
                    && &row.resource == r
            }) {
                row.pending.push(pending.clone());
                placed = true;
            }
        }
        if !placed {
            inv.unplaced.push(pending);
        }
    }
    inv
}

/// [`build`] over `nodes` under `policy`: the flavors' offers from
/// [`QuotaLayer::of_nodes`].
pub fn of_nodes(
    objects: &KueueObjects,
    nodes: &[NodeInfo],
    policy: Option<&ClusterPolicy>,
) -> QuotaInventory {
    let layer = QuotaLayer::of_nodes(objects, nodes, policy);
    build(objects, Some(layer.offers()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::kueue::read_str;

    /// The lab's objects (tests/data/kueue/kueue.yaml) with three workloads: one admitted
    /// in container holding 3 of its 4, one asking 2 more (exhausted: container's unused
    /// quota is short, and vm-passthrough's 2 would fit but no passthrough node advertises
    /// nvidia.com/gpu: Kueue tries container first and stops at the first that fits —
    /// vm-passthrough), one asking the passthrough name (no group covers it).
    fn objects() -> KueueObjects {
        let wl = |name: &str, res: &str, count: i64, admitted: bool| {
            let status = if admitted {
                "  status:\n    conditions: [{type: QuotaReserved, status: \"True\"}, {type: Admitted, status: \"True\"}]\n    admission: {clusterQueue: lab-gpus, podSetAssignments: [{name: main, flavors: {nvidia.com/gpu: container}}]}\n".to_owned()
            } else {
                "  status:\n    conditions: [{type: QuotaReserved, status: \"False\", reason: Pending, message: m}]\n".to_owned()
            };
            format!(
                "- kind: Workload\n  metadata: {{name: {name}, namespace: gpu-kueue, ownerReferences: [{{kind: Job, name: {name}, controller: true}}]}}\n  spec:\n    queueName: lab\n    podSets: [{{name: main, count: {count}, template: {{spec: {{containers: [{{name: c, resources: {{limits: {{{res}: \"1\"}}}}}}]}}}}}}]\n{status}"
            )
        };
        let text = format!(
            "{}\n{}{}{}",
            include_str!("../../../../tests/data/kueue/kueue.yaml").trim_end(),
            wl("holder", "nvidia.com/gpu", 3, true),
            wl("two-more", "nvidia.com/gpu", 2, false),
            wl("passthrough", "nvidia.com/GA102GL_A10", 1, false),
        );
        read_str(&text, "lab.yaml").unwrap()
    }

    fn lab_node(name: &str, workload: &str, res: &str, n: &str) -> NodeInfo {
        let mut node = NodeInfo::named(name);
        node.labels
            .insert("nvidia.com/gpu.workload.config".into(), workload.into());
        node.allocatable = Some([(res.to_owned(), n.to_owned())].into_iter().collect());
        node.capacity = node.allocatable.clone().unwrap();
        node
    }

    fn lab_nodes() -> Vec<NodeInfo> {
        vec![
            lab_node("lab-node-0", "container", "nvidia.com/gpu", "4"),
            lab_node(
                "lab-node-1",
                "vm-passthrough",
                "nvidia.com/GA102GL_A10",
                "2",
            ),
            lab_node("lab-node-2", "vm-vgpu", "nvidia.com/NVIDIA_A10-12Q", "4"),
        ]
    }

    #[test]
    fn rows_per_queue_flavor_and_name_with_what_the_nodes_offer() {
        let inv = of_nodes(&objects(), &lab_nodes(), None);
        assert_eq!((inv.flavors, inv.cluster_queues), (3, 1));
        assert_eq!(inv.admitted_workloads, 1);
        let keys: Vec<(&str, &str, i64, i64)> = inv
            .rows
            .iter()
            .map(|r| {
                (
                    r.flavor.as_str(),
                    r.resource.as_str(),
                    r.nominal_milli,
                    r.reserved_milli,
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("container", "nvidia.com/gpu", 4000, 3000),
                ("vm-passthrough", "nvidia.com/gpu", 2000, 0),
                ("vm-vgpu", "nvidia.com/gpu", 0, 0),
            ]
        );
        let c = &inv.rows[0];
        assert_eq!(c.admitted, ["gpu-kueue/holder"]);
        assert_eq!(
            (c.nodes, c.advertised, c.served()),
            (Some(1), Some(4), Some(true))
        );
        let pt = &inv.rows[1];
        assert_eq!(
            (pt.nodes, pt.advertised, pt.served()),
            (Some(1), Some(0), Some(false))
        );
        assert_eq!(pt.offered["nvidia.com/GA102GL_A10"], 2);
    }

    #[test]
    fn waiting_workloads_carry_explains_cause_on_the_row_they_wait_on() {
        let o = objects();
        let inv = of_nodes(&o, &lab_nodes(), None);
        // Two more do not fit in container (3 of 4 reserved) and fit in vm-passthrough,
        // whose node advertises no nvidia.com/gpu: explain says flavor-cannot-serve.
        let pt = &inv.rows[1];
        assert_eq!(pt.pending.len(), 1);
        assert_eq!(pt.pending[0].workload, "gpu-kueue/two-more");
        assert_eq!(pt.pending[0].cause, QuotaCause::FlavorCannotServe);
        assert_eq!(pt.pending[0].owner.as_deref(), Some("Job/two-more"));
        let layer = QuotaLayer::of_nodes(&o, &lab_nodes(), None);
        let w = o.workloads.iter().find(|w| w.name == "two-more").unwrap();
        let v = judge_workload(w, &o, Some(layer.offers()));
        assert_eq!(
            (v.cause, &v.message),
            (pt.pending[0].cause, &pt.pending[0].message)
        );
        // The passthrough name: no group covers it, no row holds it.
        assert_eq!(inv.unplaced.len(), 1);
        assert_eq!(inv.unplaced[0].cause, QuotaCause::NameNotCovered);
        assert_eq!(
            inv.unplaced[0].requests_milli["nvidia.com/GA102GL_A10"],
            1000
        );
        let by = inv.pending_by_cause();
        assert_eq!(by[&("lab-gpus".to_owned(), "kueue-flavor-cannot-serve")], 1);
        assert_eq!(by[&("lab-gpus".to_owned(), "kueue-name-not-covered")], 1);
    }

    #[test]
    fn quota_held_by_others_waits_on_the_flavor_whose_unused_quota_is_short() {
        let mut o = objects();
        // vm-passthrough's quota is 2; a workload asking 3 is too small there and short
        // of unused quota in container (3 of 4 held).
        let w = o
            .workloads
            .iter_mut()
            .find(|w| w.name == "two-more")
            .unwrap();
        w.pod_sets[0].count = 3;
        let inv = build(&o, None);
        let c = &inv.rows[0];
        assert_eq!(c.pending.len(), 1);
        assert_eq!(c.pending[0].cause, QuotaCause::QuotaExhausted);
        assert_eq!((c.nodes, c.advertised, c.served()), (None, None, None));
        assert!(inv.rows[1].pending.is_empty());
    }
}
