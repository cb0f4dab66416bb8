//! What `gpuwl serve` computes from one snapshot of the cluster, the numbers its metrics
//! show: [`evaluate`] runs the existing analyses — [`check::judge_node`] per node (the
//! seed's verdict and the GPU Operator state findings), [`inventory::build_with`] (pools,
//! units, unservable demand, pending pods by explain's verdict, orphaned holders) and, when
//! the KubeVirt CR is known, [`kubevirt::check`]; [`quota`] the quota layer (Kueue);
//! [`admission`] the admission guard's index and what it flags now; [`relabels`] the
//! workload-label changes between two snapshots. No domain rule lives here: each number is
//! one an analysis already gives. The root crate's `serve` keeps the watched copy of the
//! cluster and writes these into metric families.

use std::collections::{BTreeMap, BTreeSet};

use crate::analysis::kueue::QuotaLayer;
use crate::analysis::kueue_usage::{self, QuotaInventory};
use crate::analysis::{admission, check, inventory, kubevirt};
use crate::model::dra::{DraObjects, DraSource};
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::kueue::KueueObjects;
use crate::model::node::NodeInfo;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;
use crate::model::pool::PoolOrigin;
use crate::model::resource::Classifier;
use crate::model::workload::{LABEL_KEY, WorkloadConfig};

/// One labelled or GPU node, as the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEval {
    /// Node name.
    pub name: String,
    /// The workload-config label's state: `valid` (one of the three values), `invalid`
    /// or `absent`. The value itself is free text and never exported.
    pub label_state: &'static str,
    /// The workload config the GPU Operator applies (`container`, …; `none` where it
    /// deploys no operands).
    pub effective: &'static str,
    /// Which source decided it (`label`, `cluster-policy`, `deploy-labels`, `default`).
    pub source: &'static str,
    /// The seed's verdict for a labelled node: `Some(true)` for a MISMATCH; `None` when not
    /// labelled (not judged).
    pub mismatch: Option<bool>,
    /// Whether the node is in a pool (labelled, or lists a GPU resource).
    pub in_pool: bool,
    /// Findings as (code, severity), e.g. (`vgpu-config-failed`, `warning`), deduplicated.
    pub findings: Vec<(&'static str, &'static str)>,
}

/// One pool × GPU resource name: units in each kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolEval {
    /// The pool's effective workload config: `container`, `vm-passthrough`, `vm-vgpu`.
    pub pool: &'static str,
    /// How sure the pool is: `known`, `default-no-label`, `default-invalid-label`
    /// ([`crate::model::pool::PoolOrigin`]). With [`PoolEval::pool`] it tells apart the
    /// rows `gpuwl inventory` names `container` and `container (default: no label)`.
    pub origin: &'static str,
    /// Full resource name.
    pub resource: String,
    /// (kind, units) for capacity, allocatable, allocated, free, pending.
    pub units: [(&'static str, i64); 5],
}

/// What one evaluation computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// Labelled nodes and nodes with findings or GPU resources, by name.
    pub nodes: Vec<NodeEval>,
    /// Pool × resource rows; `None` when the inventory could not be built (the previous
    /// rows stay shown, the reason is in [`Evaluation::problems`]).
    pub pools: Option<Vec<PoolEval>>,
    /// Pending pods no pool can serve, per resource; every GPU resource name that is
    /// advertised or asked for appears (0 when none waits), so the series drop to 0
    /// instead of vanishing. `None` with [`Evaluation::pools`].
    pub unservable: Option<BTreeMap<String, i64>>,
    /// Pending GPU pods by explain's verdict ([`crate::analysis::verdict`]): (class, cause
    /// code) → pods, every class present (0 when none), so the series drop to 0; `None`
    /// with [`Evaluation::pools`].
    pub pending: Option<BTreeMap<(&'static str, &'static str), i64>>,
    /// Orphaned holders ([`crate::analysis::orphans`]) as (node, resource, pods), from the
    /// inventory; `None` with [`Evaluation::pools`].
    pub orphans: Option<Vec<(String, String, i64)>>,
    /// KubeVirt findings as (resource, code) when the KubeVirt/HyperConverged CR is known.
    pub kubevirt: Option<Vec<(String, &'static str)>>,
    /// The quota layer when Kueue's objects were listed ([`quota`]); set by the caller
    /// after [`evaluate_with_dra`].
    pub quota: Option<QuotaEval>,
    /// One-line problems met (an unreadable CR, an inventory error), for the log.
    pub problems: Vec<String>,
}

/// Runs the analyses over one snapshot. `kubevirt_cr`: `None` when no KubeVirt or
/// HyperConverged CR is known, `Some(Err(reason))` when one is there but cannot be read.
pub fn evaluate(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    policy: &PolicyStatus,
    kubevirt_cr: Option<std::result::Result<&PermittedHostDevices, String>>,
) -> Evaluation {
    evaluate_with_dra(nodes, pods, policy, kubevirt_cr, None)
}

/// [`evaluate`] with the DRA objects listed from the cluster (`None`: the API does not
/// serve `resource.k8s.io`, or they could not be read): nodes are judged with them as
/// `check` judges them ([`check::judge_node`]: `dra-and-device-plugin`, `gpus-via-dra`),
/// and the inventory's DRA rows become pool series with origin `dra`.
pub fn evaluate_with_dra(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    policy: &PolicyStatus,
    kubevirt_cr: Option<std::result::Result<&PermittedHostDevices, String>>,
    dra: Option<&DraObjects>,
) -> Evaluation {
    let mut problems = Vec::new();
    let mut node_evals = node_evals(nodes, policy, dra);
    let mut orphans = None;
    let mut pending = None;
    let known_kv = kubevirt_cr.as_ref().and_then(|r| r.as_ref().ok().copied());
    let (pools, unservable) = match inventory::build_with(nodes, pods, policy, known_kv) {
        Ok(mut inv) => {
            if let Some(d) = dra {
                inventory::attach_dra(&mut inv, d, DraSource::Cluster, nodes, policy.policy());
            }
            add_orphan_findings(&mut node_evals, &inv);
            orphans = Some(
                inv.orphans
                    .iter()
                    .map(|o| {
                        (
                            o.node.clone(),
                            o.resource.clone(),
                            i64::try_from(o.holders.len()).unwrap_or(i64::MAX),
                        )
                    })
                    .collect(),
            );
            pending = Some(pending_by_class(&inv));
            let (pools, counts) = pool_evals(&inv);
            (Some(pools), Some(counts))
        }
        Err(e) => {
            problems.push(format!("inventory: {e}"));
            (None, None)
        }
    };
    let kubevirt = match kubevirt_cr {
        None => None,
        Some(Err(reason)) => {
            problems.push(reason);
            None
        }
        Some(Ok(kv)) => match kubevirt::Advertised::of(nodes) {
            Ok(adv) => {
                let report = kubevirt::check(&adv, kv);
                let found: BTreeSet<(String, &'static str)> = report
                    .findings
                    .iter()
                    .map(|f| (f.resource.clone(), f.code.as_str()))
                    .collect();
                Some(found.into_iter().collect())
            }
            Err(e) => {
                problems.push(format!("kubevirt: {e}"));
                None
            }
        },
    };
    Evaluation {
        nodes: node_evals,
        pools,
        unservable,
        pending,
        orphans,
        kubevirt,
        quota: None,
        problems,
    }
}

/// The quota layer of one evaluation ([`quota`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaEval {
    /// `check`'s `kueue-*` findings as (object, code, severity), e.g.
    /// `("ClusterQueue/lab-gpus", "kueue-quota-not-advertised", "error")`.
    pub findings: Vec<(String, &'static str, &'static str)>,
    /// The quota inventory (`gpuwl inventory`'s Kueue table): per ClusterQueue × flavor ×
    /// GPU name the nominal, reserved and advertised units; the waiting workloads with
    /// explain's quota cause.
    pub usage: QuotaInventory,
}

/// The quota layer (`check`'s `kueue-*` findings and `inventory`'s quota table,
/// [`crate::analysis::kueue`]) of `kueue` against `nodes`: one
/// [`QuotaLayer::of_nodes`], the same assembly explain and inventory use.
pub fn quota(nodes: &[NodeInfo], policy: &PolicyStatus, kueue: &KueueObjects) -> QuotaEval {
    let layer = QuotaLayer::of_nodes(kueue, nodes, policy.policy());
    let findings = layer
        .findings()
        .iter()
        .flat_map(|q| {
            q.findings
                .iter()
                .map(|f| (q.object.clone(), f.code.as_str(), f.severity.as_str()))
        })
        .collect();
    QuotaEval {
        findings,
        usage: kueue_usage::build(kueue, Some(layer.offers())),
    }
}

/// Each node judged as `check` judges it ([`check::judge_node`], with the DRA objects
/// when listed), kept when it is in a pool (labelled, or lists a GPU resource) or has
/// findings.
fn node_evals(
    nodes: &[NodeInfo],
    policy: &PolicyStatus,
    dra: Option<&DraObjects>,
) -> Vec<NodeEval> {
    let classifier = Classifier::default();
    let dra_nodes = dra.map(check::DraNodes::from_objects);
    nodes
        .iter()
        .filter_map(|n| {
            let r = check::judge_node(n, &classifier, policy.policy(), dra_nodes.as_ref());
            let in_pool = r.label.is_some() || r.resources.iter().any(|e| e.class.is_gpu());
            if !in_pool && r.findings.is_empty() {
                return None;
            }
            let findings: BTreeSet<(&'static str, &'static str)> = r
                .findings
                .iter()
                .map(|f| (f.code.as_str(), f.severity.as_str()))
                .collect();
            Some(NodeEval {
                mismatch: r
                    .label
                    .is_some()
                    .then_some(r.verdict == check::Verdict::Mismatch),
                label_state: match r.label.as_deref() {
                    None => "absent",
                    Some(v) if v.parse::<WorkloadConfig>().is_ok() => "valid",
                    Some(_) => "invalid",
                },
                name: r.name,
                effective: r.effective_workload.map_or("none", |w| w.as_str()),
                source: r.workload_source.as_str(),
                in_pool,
                findings: findings.into_iter().collect(),
            })
        })
        .collect()
}

/// Orphaned holders are check findings too (a warning), beside their count: adds the
/// finding to each node of `inv.orphans` (once, findings kept sorted).
fn add_orphan_findings(node_evals: &mut [NodeEval], inv: &inventory::Inventory) {
    for o in &inv.orphans {
        if let Some(n) = node_evals.iter_mut().find(|n| n.name == o.node) {
            let code = check::orphan_finding(o).code;
            let f = (code.as_str(), code.severity().as_str());
            if !n.findings.contains(&f) {
                n.findings.push(f);
                n.findings.sort_unstable();
            }
        }
    }
}

/// The inventory's pool × resource rows and DRA rows (pool × driver/device type, as
/// inventory's CSV names them, origin `dra`) as series, and per GPU resource name the
/// pending pods no pool can serve (every row's name present, 0 when none waits).
fn pool_evals(inv: &inventory::Inventory) -> (Vec<PoolEval>, BTreeMap<String, i64>) {
    let mut unservable: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut pools = Vec::new();
    for row in &inv.rows {
        let Some(resource) = &row.resource else {
            continue;
        };
        unservable.entry(resource.clone()).or_default();
        pools.push(PoolEval {
            pool: row.workload.as_str(),
            origin: match row.origin {
                PoolOrigin::Known => "known",
                PoolOrigin::DefaultNoLabel => "default-no-label",
                PoolOrigin::DefaultInvalidLabel => "default-invalid-label",
            },
            resource: resource.clone(),
            units: [
                ("capacity", row.capacity),
                ("allocatable", row.allocatable),
                ("allocated", row.allocated),
                ("free", row.free),
                ("pending", row.pending),
            ],
        });
    }
    for row in inv.dra.iter().flat_map(|d| &d.rows) {
        let devices = i64::try_from(row.devices).unwrap_or(i64::MAX);
        pools.push(PoolEval {
            pool: dra_pool(&row.pool),
            origin: "dra",
            resource: format!("{}/{}", row.driver, row.device_type),
            units: [
                ("capacity", devices),
                ("allocatable", devices),
                ("allocated", to_i64(row.allocated)),
                ("free", to_i64(row.free)),
                ("pending", to_i64(row.pending)),
            ],
        });
    }
    for u in &inv.unservable {
        unservable
            .entry(u.resource.clone())
            .or_default()
            .insert(u.pod.as_str());
    }
    let counts = unservable
        .into_iter()
        .map(|(r, pods)| (r, i64::try_from(pods.len()).unwrap_or(i64::MAX)))
        .collect();
    (pools, counts)
}

/// One change of a node's workload label between two evaluations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relabel {
    /// Node name.
    pub node: String,
    /// The value before (`None`: absent).
    pub from: Option<String>,
    /// After (`None`: removed).
    pub to: Option<String>,
}

/// The workload label of every node, by name ([`crate::model::workload::LABEL_KEY`]).
pub fn workload_labels(nodes: &[NodeInfo]) -> BTreeMap<String, Option<String>> {
    nodes
        .iter()
        .map(|n| (n.name.clone(), n.label(LABEL_KEY).map(str::to_owned)))
        .collect()
}

/// The label changes from `before` to `after`, by node: only nodes in both (a node that
/// appears or leaves is not a relabel).
pub fn relabels(
    before: &BTreeMap<String, Option<String>>,
    after: &BTreeMap<String, Option<String>>,
) -> Vec<Relabel> {
    after
        .iter()
        .filter_map(|(node, to)| {
            let from = before.get(node)?;
            (from != to).then(|| Relabel {
                node: node.clone(),
                from: from.clone(),
                to: to.clone(),
            })
        })
        .collect()
}

/// A count as a metric value (saturating).
fn to_i64<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// The pool label of a DRA row: its workload config's name when it is one, else `dra`.
fn dra_pool(pool: &str) -> &'static str {
    pool.split_whitespace()
        .next()
        .and_then(|w| w.parse::<WorkloadConfig>().ok())
        .map_or("dra", |w| w.as_str())
}

/// Pending GPU pods per (class, cause code) of explain's verdict, as inventory sorted
/// them: demand (per pod once, whatever pools it fits), unservable, held back. Every
/// class has at least one entry (`(class, "none")` = 0 when no pod has it).
pub fn pending_by_class(inv: &inventory::Inventory) -> BTreeMap<(&'static str, &'static str), i64> {
    use crate::analysis::verdict::PodClass;
    let mut pods: BTreeMap<(&'static str, &'static str), BTreeSet<&str>> = BTreeMap::new();
    for h in &inv.demand_pods {
        pods.entry((h.class.as_str(), h.code.as_str()))
            .or_default()
            .insert(h.pod.as_str());
    }
    for u in &inv.unservable {
        pods.entry((PodClass::Unservable.as_str(), u.code.as_str()))
            .or_default()
            .insert(u.pod.as_str());
    }
    for h in &inv.held_back {
        pods.entry((h.class.as_str(), h.code.as_str()))
            .or_default()
            .insert(h.pod.as_str());
    }
    let mut out: BTreeMap<(&'static str, &'static str), i64> = pods
        .into_iter()
        .map(|(k, v)| (k, i64::try_from(v.len()).unwrap_or(i64::MAX)))
        .collect();
    for c in PodClass::ALL {
        if c != PodClass::NotJudged && !out.keys().any(|(class, _)| *class == c.as_str()) {
            out.insert((c.as_str(), "none"), 0);
        }
    }
    out
}

/// The admission guard's index over one snapshot ([`admission::Index::build`]), and how
/// many of `pods` it flags now, per cause code (a pod counts once per code).
pub fn admission(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    policy: &PolicyStatus,
    kubevirt: Option<PermittedHostDevices>,
) -> (admission::Index, BTreeMap<&'static str, i64>) {
    let index = admission::Index::build(nodes, policy.policy(), kubevirt);
    let mut flagged: BTreeMap<&'static str, i64> = BTreeMap::new();
    for p in pods.iter().filter(|p| !p.is_terminal()) {
        let codes: BTreeSet<&'static str> = admission::review(p, &index)
            .iter()
            .map(|w| w.code.as_str())
            .collect();
        for c in codes {
            *flagged.entry(c).or_default() += 1;
        }
    }
    (index, flagged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kubevirt::HostDevicesSource;

    use crate::testkit::gpu_node as node;

    fn pod(name: &str, node: Option<&str>, selector: Option<&str>, res: &str) -> PodInfo {
        let mut node_selector = BTreeMap::new();
        if let Some(s) = selector {
            node_selector.insert(crate::model::workload::LABEL_KEY.to_owned(), s.to_owned());
        }
        PodInfo {
            kind: crate::model::pod::ObjectKind::Pod,
            namespace: "gpu-vm".into(),
            name: name.into(),
            node_name: node.map(str::to_owned),
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            node_selector,
            required_affinity: None,
            tolerations: Vec::new().into(),
            conditions: Vec::new(),
            requests: std::sync::Arc::new([(res.to_owned(), 1)].into_iter().collect()),
            sources: Vec::new(),
            resource_claims: Vec::new(),
            ..Default::default()
        }
    }

    /// The lab's three nodes and four pods.
    fn lab() -> (Vec<NodeInfo>, Vec<PodInfo>) {
        (
            vec![
                node("lab-node-0", Some("container"), &[("nvidia.com/gpu", "4")]),
                node(
                    "lab-node-1",
                    Some("vm-passthrough"),
                    &[("nvidia.com/GA102GL_A10", "2")],
                ),
                node(
                    "lab-node-2",
                    Some("vm-vgpu"),
                    &[("nvidia.com/NVIDIA_A10-12Q", "4")],
                ),
                node("control", None, &[]),
            ],
            vec![
                pod("job-container", Some("lab-node-0"), None, "nvidia.com/gpu"),
                pod(
                    "vmi-passthrough",
                    Some("lab-node-1"),
                    None,
                    "nvidia.com/GA102GL_A10",
                ),
                pod(
                    "vmi-vgpu",
                    Some("lab-node-2"),
                    None,
                    "nvidia.com/NVIDIA_A10-12Q",
                ),
                pod("job-cross", None, Some("vm-passthrough"), "nvidia.com/gpu"),
            ],
        )
    }

    #[test]
    fn the_lab_evaluates_as_inventory_and_check_say() {
        let (nodes, pods) = lab();
        let e = evaluate(&nodes, &pods, &PolicyStatus::not_read(), None);
        let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["lab-node-0", "lab-node-1", "lab-node-2"]);
        assert!(e.nodes.iter().all(|n| n.mismatch == Some(false)));
        assert_eq!(e.nodes[1].effective, "vm-passthrough");
        assert_eq!(e.nodes[1].source, "label");
        let unservable = e.unservable.unwrap();
        assert_eq!(unservable["nvidia.com/gpu"], 1);
        assert_eq!(unservable["nvidia.com/GA102GL_A10"], 0);
        let pools = e.pools.unwrap();
        let c = pools
            .iter()
            .find(|p| p.pool == "container" && p.resource == "nvidia.com/gpu")
            .unwrap();
        assert_eq!(
            c.units,
            [
                ("capacity", 4),
                ("allocatable", 4),
                ("allocated", 1),
                ("free", 3),
                ("pending", 0)
            ]
        );
        assert!(e.kubevirt.is_none());
        assert!(e.problems.is_empty(), "{:?}", e.problems);
    }

    #[test]
    fn a_typo_mismatches_and_deleting_the_pod_clears_the_unservable_count() {
        let (mut nodes, mut pods) = lab();
        nodes[1].labels.insert(
            crate::model::workload::LABEL_KEY.into(),
            "vm_passthrough".into(),
        );
        pods.retain(|p| p.name != "job-cross");
        let e = evaluate(&nodes, &pods, &PolicyStatus::not_read(), None);
        let n1 = &e.nodes[1];
        assert_eq!(n1.mismatch, Some(true));
        assert_eq!(n1.label_state, "invalid");
        assert_eq!(e.nodes[0].label_state, "valid");
        assert!(n1.findings.contains(&("invalid-label-value", "error")));
        assert_eq!(e.unservable.unwrap()["nvidia.com/gpu"], 0);
    }

    #[test]
    fn a_vm_on_a_name_its_node_stopped_advertising_is_a_holder_at_risk() {
        let (mut nodes, pods) = lab();
        // lab-node-1 relabelled to container: it advertises nvidia.com/gpu now, while the
        // passthrough VM keeps running on its GA102GL_A10.
        nodes[1] = node(
            "lab-node-1",
            Some("container"),
            &[("nvidia.com/gpu", "2"), ("nvidia.com/GA102GL_A10", "0")],
        );
        let e = evaluate(&nodes, &pods, &PolicyStatus::not_read(), None);
        assert_eq!(
            e.orphans.unwrap(),
            [(
                "lab-node-1".to_owned(),
                "nvidia.com/GA102GL_A10".to_owned(),
                1
            )]
        );
        // A VM under a relabel is an error (the alert is critical), not a warning.
        assert!(
            e.nodes[1].findings.contains(&("holder-at-risk", "error")),
            "{:?}",
            e.nodes[1].findings
        );
        assert!(
            !e.nodes[0]
                .findings
                .iter()
                .any(|(c, _)| c.contains("holder"))
        );
    }

    #[test]
    fn kubevirt_findings_when_the_cr_is_known() {
        let (nodes, pods) = lab();
        let empty = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: None,
            pci_host_devices: Vec::new(),
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        let e = evaluate(&nodes, &pods, &PolicyStatus::not_read(), Some(Ok(&empty)));
        let kv = e.kubevirt.unwrap();
        assert!(kv.contains(&(
            "nvidia.com/GA102GL_A10".to_owned(),
            "advertised-not-permitted"
        )));
        assert!(kv.contains(&(
            "nvidia.com/NVIDIA_A10-12Q".to_owned(),
            "advertised-not-permitted"
        )));
        let bad = evaluate(
            &nodes,
            &pods,
            &PolicyStatus::not_read(),
            Some(Err("KubeVirt \"kubevirt/kubevirt\": bad".into())),
        );
        assert!(bad.kubevirt.is_none());
        assert_eq!(bad.problems, ["KubeVirt \"kubevirt/kubevirt\": bad"]);
    }

    #[test]
    fn dra_is_judged_and_exported_as_check_and_inventory_do() {
        let d = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/dra");
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            std::fs::File::open(format!("{d}/nodes.json")).unwrap(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let pods =
            crate::decode::pods::read_pods_path(std::path::Path::new(&format!("{d}/pods.json")))
                .unwrap();
        let dra =
            crate::decode::dra::read_path(std::path::Path::new(&format!("{d}/two-gpus.json")))
                .unwrap();
        let e = evaluate_with_dra(&nodes, &pods, &PolicyStatus::not_read(), None, Some(&dra));
        // gpu-node-1's GPUs come only through the DRA driver: judged as DRA (an info, no
        // mismatch), as `check --dra` judges it.
        let n1 = e.nodes.iter().find(|n| n.name == "gpu-node-1").unwrap();
        assert_eq!(n1.mismatch, Some(false));
        assert_eq!(n1.findings, [("gpus-via-dra", "info")]);
        // The DRA rows are pool series with origin dra, as inventory's CSV rows.
        let pools = e.pools.unwrap();
        let gpu = pools
            .iter()
            .find(|p| p.origin == "dra" && p.resource == "gpu.nvidia.com/gpu")
            .unwrap();
        assert_eq!(gpu.pool, "container");
        assert_eq!(
            gpu.units,
            [
                ("capacity", 2),
                ("allocatable", 2),
                ("allocated", 1),
                ("free", 0),
                ("pending", 1)
            ]
        );
        // Without DRA objects: the node is the MISMATCH plain check gives without --dra.
        let plain = evaluate(&nodes, &pods, &PolicyStatus::not_read(), None);
        let n1 = plain.nodes.iter().find(|n| n.name == "gpu-node-1").unwrap();
        assert_eq!(n1.mismatch, Some(true));
    }

    #[test]
    fn a_relabel_is_a_change_of_a_node_in_both_snapshots() {
        let (mut nodes, _) = lab();
        let before = workload_labels(&nodes);
        let key = crate::model::workload::LABEL_KEY;
        nodes[1].labels.insert(key.into(), "container".into());
        nodes[2].labels.remove(key);
        nodes.remove(0);
        let changes = relabels(&before, &workload_labels(&nodes));
        assert_eq!(
            changes,
            [
                Relabel {
                    node: "lab-node-1".into(),
                    from: Some("vm-passthrough".into()),
                    to: Some("container".into())
                },
                Relabel {
                    node: "lab-node-2".into(),
                    from: Some("vm-vgpu".into()),
                    to: None
                }
            ]
        );
        assert!(relabels(&before, &before).is_empty());
    }

    /// The lab's quota layer (tests/data/kueue/kueue.yaml) against the lab's three nodes:
    /// the passthrough flavor's quota on nvidia.com/gpu is the one error.
    #[test]
    fn quota_of_the_labs_kueue_objects() {
        let nodes = [
            node("lab-node-0", Some("container"), &[("nvidia.com/gpu", "4")]),
            node(
                "lab-node-1",
                Some("vm-passthrough"),
                &[("nvidia.com/GA102GL_A10", "2")],
            ),
            node(
                "lab-node-2",
                Some("vm-vgpu"),
                &[("nvidia.com/NVIDIA_A10-12Q", "4")],
            ),
        ];
        let k = crate::decode::kueue::read_path(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/kueue/kueue.yaml"
        )))
        .unwrap();
        let q = quota(&nodes, &PolicyStatus::not_read(), &k);
        assert_eq!(
            q.findings,
            [(
                "ClusterQueue/lab-gpus".to_owned(),
                "kueue-quota-not-advertised",
                "error"
            )]
        );
        // The same layer's table: the passthrough flavor's quota, none of it advertised.
        let rows: Vec<(&str, i64, Option<i64>)> = q
            .usage
            .rows
            .iter()
            .map(|r| (r.flavor.as_str(), r.nominal_milli, r.advertised))
            .collect();
        assert_eq!(
            rows,
            [
                ("container", 4000, Some(4)),
                ("vm-passthrough", 2000, Some(0)),
                ("vm-vgpu", 0, Some(0)),
            ]
        );
    }
}
