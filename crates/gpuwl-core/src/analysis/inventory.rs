//! The split GPU inventory: per pool (workload config) × GPU resource name, the nodes,
//! capacity, allocatable, allocated, free and pending units, the pending demand no node can
//! serve, and physical-GPU equivalents where they can be derived.
//!
//! Rules and their sources:
//! - pools: each node's effective workload config ([`Pool::of`]: the [`LABEL_KEY`] value
//!   when the operator honours it, else the ClusterPolicy's default, else the node's deploy
//!   labels; a guessed default is marked; docs/domain-facts.md §1, §7). Nodes that neither
//!   carry the label nor list any GPU resource (control planes, CPU nodes) are left out.
//! - GPU resources: `nvidia.com/` names that [`classify`] puts in a GPU class.
//! - capacity, allocatable, allocated and free per node: [`Usage`], the table explain reads
//!   too (a resource listed with 0 is not advertised, docs/domain-facts.md §4; such nodes
//!   are counted as `staleNodes`, never in `nodes`). Row sums saturate, never wrap.
//! - pending: the requests of unbound pods, in every pool that has a node the pod's
//!   constraints allow ([`placement`]) and that advertises every GPU resource the pod
//!   asks for (capacity ignored). A pod that fits several pools counts in each.
//!   Demand that fits no pool is [`Unservable`], with the free units beside it.
//! - physical-GPU equivalents: [`unit_fraction`] (`None`, shown `?`, when not derivable).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::analysis::check::DraNodes;
use crate::analysis::diagnosis::CauseCode;
use crate::analysis::dra::{self, DraInventory};
use crate::analysis::explain::{Explanation, Inputs, Shared};
use crate::analysis::kueue_usage::{self, QuotaInventory};
use crate::analysis::orphans::{self, Orphan};
use crate::analysis::usage::Usage;
use crate::analysis::verdict::{self, PodClass};
use crate::analysis::{names, placement};
use crate::error::Result;
use crate::model::advertise::{self, gpu_resources};
use crate::model::dra::{DraObjects, DraSource};
use crate::model::equivalents::unit_fraction;
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::kueue::KueueObjects;
use crate::model::node::NodeInfo;
use crate::model::operand::{self, OperandPod, OperandSource};
use crate::model::operator::{self, ClusterPolicy, GpuEvidence, PolicyStatus};
use crate::model::pod::{ObjectKind, PodInfo};
use crate::model::pool::{Pool, PoolOrigin};
use crate::model::resource::{self, Classifier, ResourceClass, classify};
use crate::model::snapshot::Snapshot;
use crate::model::workload::{LABEL_KEY, WorkloadConfig};
use crate::text;

/// One node's share of a [`Row`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeUse {
    /// Node name.
    pub name: String,
    /// `status.capacity` units.
    pub capacity: i64,
    /// `status.allocatable` units.
    pub allocatable: i64,
    /// Units requested by bound, non-terminal pods.
    pub allocated: i64,
    /// Physical GPUs per unit on this node (`None`: not derivable).
    pub gpus_per_unit: Option<f64>,
    /// Whether the node is cordoned (`spec.unschedulable`): its free units are counted in
    /// [`Row::cordoned_free`], not in [`Row::free`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cordoned: bool,
}

/// One pool × GPU resource name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Pool display name ([`Pool::name`]).
    pub pool: String,
    /// Effective workload config.
    pub workload: WorkloadConfig,
    /// How the pool's nodes got it.
    pub origin: PoolOrigin,
    /// Full resource name; `None` for a labelled pool whose nodes advertise no GPU
    /// resource at all.
    pub resource: Option<String>,
    /// The resource's class ([`classify`]).
    pub class: Option<ResourceClass>,
    /// Nodes of the pool advertising the resource (allocatable > 0).
    pub nodes: usize,
    /// Nodes of the pool that list the resource with allocatable 0 (stale keys).
    pub stale_nodes: Vec<String>,
    /// Sum of capacity, units.
    pub capacity: i64,
    /// Sum of allocatable, units.
    pub allocatable: i64,
    /// Sum of the effective requests of bound, non-terminal pods, units.
    pub allocated: i64,
    /// allocatable − allocated of the nodes that are not cordoned, never below 0: an
    /// over-committed row has free 0 and its excess in [`Row::overcommitted`].
    pub free: i64,
    /// allocatable − allocated of the cordoned nodes (`spec.unschedulable`, a drain),
    /// never below 0: units no new pod can take until the nodes are uncordoned.
    pub cordoned_free: i64,
    /// allocated − allocatable when more is allocated than allocatable (requests that
    /// outgrew the node after a relabel or a device that went unhealthy; or hostile
    /// requests), else 0. Saturating.
    pub overcommitted: i64,
    /// Requests of unbound pods that this pool could serve, units.
    pub pending: i64,
    /// The pending pods (`namespace/name`).
    pub pending_pods: Vec<String>,
    /// Physical-GPU equivalents of `capacity` (`None`: not derivable, shown `?`).
    pub capacity_gpus: Option<f64>,
    /// Whole physical GPUs certainly free (`None`: not derivable). For a resource of one
    /// unit per GPU (passthrough, plain `nvidia.com/gpu`) it is `free`; for one whose units
    /// are slots of a GPU (a vGPU type, time-sliced replicas) a GPU counts only when none
    /// of its slots can be in use: per node, its GPUs minus its allocated units (each
    /// allocated slot may sit on a different GPU), never below 0. A GPU hosts one vGPU type
    /// at a time (NVIDIA/vgpu-device-manager configures every GPU of a node with one
    /// type), so a half-used GPU is not half a GPU free for another type.
    pub free_gpus: Option<f64>,
    /// Slots per physical GPU when a unit is a slot of a GPU (a vGPU type: the card's
    /// memory over the type's framebuffer; time-slicing: the replicas), the same on every
    /// node of the row; `None` for one unit per GPU or when not derivable or mixed.
    pub slots_per_gpu: Option<i64>,
    /// Per-node detail, by node name.
    pub node_detail: Vec<NodeUse>,
}

/// Free units of one pool × resource, as shown beside unservable demand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Free {
    /// Pool display name.
    pub pool: String,
    /// Resource name.
    pub resource: String,
    /// Free units.
    pub free: i64,
}

/// Why pending demand fits no pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnservableCause {
    /// No node advertises the name (> 0).
    NotAdvertised,
    /// Nodes advertise it, but the pod's nodeSelector / affinity / taints exclude them all.
    Excluded,
    /// Allowed nodes advertise it, but none advertises every GPU resource the pod asks for.
    NotTogether,
    /// Allowed nodes advertise it, but none has as many allocatable units as asked.
    TooLarge,
    /// A VMI's or VM's device name KubeVirt's `permittedHostDevices` does not permit:
    /// virt-controller renders no virt-launcher pod, whatever the nodes offer
    /// (kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`,
    /// `validatePermittedHostDevices`).
    NotPermitted,
}

/// Pending demand for one resource that no node can serve, whatever is freed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unservable {
    /// The pod (`namespace/name`).
    pub pod: String,
    /// What `pod` names: a Pod, or a VMI or VM that waits with no virt-launcher pod
    /// ([`crate::decode::virt::waiting_without_launcher`]); left out of JSON for a Pod.
    #[serde(skip_serializing_if = "ObjectKind::is_pod")]
    pub kind: ObjectKind,
    /// The resource it asks for.
    pub resource: String,
    /// Units asked.
    pub units: i64,
    /// The cause.
    pub cause: UnservableCause,
    /// explain's cause code for the pod ([`crate::analysis::verdict`]).
    pub code: CauseCode,
    /// Whether the wait can pass on its own (`stale-only` while a device plugin restarts,
    /// `operator-state` while operands roll).
    pub transient: bool,
    /// One-line reason, e.g. `nodes advertising it are excluded by nodeSelector ...`.
    pub reason: String,
    /// Close names that are advertised ("did you mean"), for [`UnservableCause::NotAdvertised`].
    pub did_you_mean: Vec<String>,
    /// Pools the pod's constraints allow (any resource).
    pub allowed_pools: Vec<String>,
    /// Free units of the SAME name in pools the pod cannot reach.
    pub free_same_name: Vec<Free>,
    /// Free units of OTHER GPU names on the nodes the pod can reach: all names when a
    /// nodeSelector or required affinity confines the pod, else names of the same class.
    pub free_other_names: Vec<Free>,
    /// The pod's PodScheduled message, verbatim, when present.
    pub scheduler_message: Option<String>,
}

/// Unservable demand summed per resource name, in first-seen order: `(resource, units,
/// pods)`. The table and the CSV show one `(no pool can serve)` row per name, so two
/// pending pods asking 1 each read as one row of 2, not two identical rows. Units add
/// with saturation (never wrap).
pub(crate) fn unservable_by_resource(unservable: &[Unservable]) -> Vec<(String, i64, usize)> {
    let mut out: Vec<(String, i64, usize)> = Vec::new();
    for u in unservable {
        match out.iter_mut().find(|(r, _, _)| *r == u.resource) {
            Some(entry) => {
                entry.1 = entry.1.saturating_add(u.units);
                entry.2 += 1;
            }
            None => out.push((u.resource.clone(), u.units, 1)),
        }
    }
    out
}

/// The whole inventory.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Nodes read.
    pub nodes_read: usize,
    /// Nodes in a pool (labelled, or listing a GPU resource).
    pub gpu_nodes: usize,
    /// Pods read.
    pub pods_read: usize,
    /// Pods not bound and not terminal.
    pub pending_pods: usize,
    /// Rows, by pool (container, vm-passthrough, vm-vgpu, then the defaulted pools) and
    /// resource name.
    pub rows: Vec<Row>,
    /// Pending demand no pool can serve.
    pub unservable: Vec<Unservable>,
    /// Pending GPU pods that are neither demand nor unservable (blocked by a cordon or
    /// taint, gated, short of a non-GPU resource, invalid): shown apart, never counted as
    /// pending units of a pool.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_back: Vec<PendingPod>,
    /// The pending GPU pods counted as demand (the rows' `pendingPods`), each once with its
    /// cause code (`in-use`, `insufficient`, `fits-now`, ...) and the nodes it fits now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub demand_pods: Vec<PendingPod>,
    /// Remarks (pods bound to unknown nodes, invalid label values, ...).
    pub notes: Vec<String>,
    /// The GPU Operator ClusterPolicy the pools were computed under, or why there is none.
    pub cluster_policy: PolicyStatus,
    /// The DRA devices (`resource.k8s.io/v1`), when read or tried: rows per driver ×
    /// device type × node pool, or why they were not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra: Option<DraInventory>,
    /// Nodes counted in both tables: a device plugin advertises an NVIDIA GPU name there
    /// (allocatable > 0, not a DRA extended-resource name) AND NVIDIA's DRA driver
    /// (`gpu.nvidia.com`) publishes devices there — the same physical GPUs, twice, and two
    /// allocators that can hand one GPU out twice (`check`'s `dra-and-device-plugin`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub published_twice: Vec<String>,
    /// Bound pods holding a GPU name their node no longer advertises (not listed or `"0"`),
    /// per node × resource ([`crate::analysis::orphans`]): their units count as allocated
    /// in the row, never as negative free.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<Orphan>,
    /// The GPU Operator's operand pods per GPU node with their health, when read
    /// ([`attach_operands`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operands: Option<OperandReport>,
    /// The quota layer (Kueue's ClusterQueues × flavors × GPU names), when Kueue's objects
    /// were read ([`attach_quota`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaInventory>,
}

/// The operand pods of the GPU nodes (`operands` in JSON/YAML).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperandReport {
    /// Where the pods came from (`cluster`, `file`, `unreadable` with a note).
    pub source: OperandSource,
    /// The ClusterPolicy's `status.state` (`ready`, `notReady`, ...), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_policy_state: Option<String>,
    /// Operand pods counted, and those not ready (crash-looping included).
    pub pods: usize,
    /// Operand pods that are not ready.
    pub not_ready: usize,
    /// Per GPU node (those in a pool), by name.
    pub nodes: Vec<NodeOperands>,
}

/// One GPU node's operands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOperands {
    /// Node name.
    pub node: String,
    /// The workload whose operands the operator deploys there (`null`: none).
    pub workload: Option<WorkloadConfig>,
    /// Its operand pods.
    pub pods: Vec<OperandPod>,
    /// When the device plugin of the workload is not ready there: what is wrong
    /// ([`crate::model::operand::plugin_problem`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_problem: Option<String>,
}

/// Adds the operand pods read (`pods`, from `source`) for the nodes of the inventory's
/// pools (GPU nodes) to `inv`.
pub fn attach_operands(
    inv: &mut Inventory,
    nodes: &[NodeInfo],
    policy: Option<&ClusterPolicy>,
    pods: Vec<OperandPod>,
    source: OperandSource,
) {
    use crate::model::operand::OperandHealth;
    let by = operand::by_node(pods);
    let pools = assign_pools(nodes, policy);
    let mut out = Vec::new();
    for n in nodes
        .iter()
        .filter(|n| pools.pool_of.contains_key(n.name.as_str()))
    {
        let w = operator::effective_workload(n, policy).applied();
        let here = by.get(&n.name).cloned().unwrap_or_default();
        let plugin_problem = w.and_then(|w| operand::plugin_problem(&here, w));
        out.push(NodeOperands {
            node: n.name.clone(),
            workload: w,
            pods: here,
            plugin_problem,
        });
    }
    out.sort_by(|a, b| a.node.cmp(&b.node));
    let all = out.iter().flat_map(|n| &n.pods);
    inv.operands = Some(OperandReport {
        source,
        cluster_policy_state: policy.and_then(|p| p.state.clone()),
        pods: all.clone().count(),
        not_ready: all.filter(|p| p.health != OperandHealth::Ready).count(),
        nodes: out,
    });
}

/// Sets [`Inventory::dra`] from DRA objects read from `source`, and
/// [`Inventory::published_twice`]: the nodes whose GPUs both a device plugin and NVIDIA's
/// DRA driver offer.
pub fn attach_dra(
    inv: &mut Inventory,
    dra: &DraObjects,
    source: DraSource,
    nodes: &[NodeInfo],
    policy: Option<&ClusterPolicy>,
) {
    let published = DraNodes::from_objects(dra);
    inv.published_twice = nodes
        .iter()
        .filter(|n| published.devices.get(&n.name).is_some_and(|d| *d > 0))
        .filter(|n| {
            advertise::advertised_gpus(n)
                .iter()
                .any(|(r, _)| !published.extended_names.contains_key(*r))
        })
        .map(|n| n.name.clone())
        .collect();
    inv.dra = Some(dra::inventory(dra, source, nodes, policy));
}

/// Sets [`Inventory::quota`] from Kueue's objects against `nodes` under `policy`
/// ([`kueue_usage::of_nodes`]: the same verdicts as `gpuwl explain job`).
pub fn attach_quota(
    inv: &mut Inventory,
    kueue: &KueueObjects,
    nodes: &[NodeInfo],
    policy: Option<&ClusterPolicy>,
) {
    inv.quota = Some(kueue_usage::of_nodes(kueue, nodes, policy));
}

/// Builds the inventory from nodes and pods, in four named phases: [`assign_pools`] (which
/// nodes are in which pool), [`supply`] (per pool × resource, each node's units),
/// [`demand`] (unbound pods: which pools could serve them, and the demand none can), and
/// [`sum_rows`] (the rows and their saturating sums).
///
/// Errors: none today (bad quantities are skipped and noted); the `Result` is kept for
/// callers that read from a cluster.
pub fn build(nodes: &[NodeInfo], pods: &[PodInfo], policy: &PolicyStatus) -> Result<Inventory> {
    build_with(nodes, pods, policy, None)
}

/// As [`build`], with KubeVirt's `permittedHostDevices` when known: a waiting VMI or VM
/// (read with the pods, [`crate::decode::virt::waiting_without_launcher`]) is then judged
/// as explain judges it, a name the list does not permit `not-permitted` (unservable).
///
/// Errors: as [`build`].
pub fn build_with(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    policy: &PolicyStatus,
    kubevirt: Option<&PermittedHostDevices>,
) -> Result<Inventory> {
    let cluster_policy = policy.clone();
    let policy = policy.policy();
    let mut notes = Vec::new();
    // The per node × resource numbers, shared with explain.
    let usage = Usage::build(nodes, Some(pods), policy);
    let pools = assign_pools(nodes, policy);
    notes.extend(pools.note.clone());
    let supply = supply(nodes, &usage, &pools.pool_of);
    for bad in &usage.skipped {
        notes.push(format!("skipped (not a valid device count): {bad}"));
    }
    let demand = demand(nodes, pods, &pools.pool_of, &supply, policy, kubevirt);
    if !usage.unknown_nodes.is_empty() {
        notes.push(format!(
            "pods bound to nodes not in the node list (not counted): {}",
            usage
                .unknown_nodes
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let rows = sum_rows(supply.cells, &demand.pending);
    let orphans = orphans::find(&usage);
    Ok(Inventory {
        orphans,
        nodes_read: nodes.len(),
        gpu_nodes: pools.pool_of.len(),
        pods_read: pods.len(),
        pending_pods: demand.pending_pods,
        rows,
        unservable: demand.unservable,
        held_back: demand.held_back,
        demand_pods: demand.demand_pods,
        notes,
        cluster_policy,
        dra: None,
        published_twice: Vec::new(),
        operands: None,
        quota: None,
    })
}

/// Phase 1: the nodes in a pool and their pools.
#[derive(Debug, Clone, PartialEq)]
pub struct Pools<'a> {
    /// Node name → pool, for nodes that carry the label or list a GPU resource.
    pub pool_of: BTreeMap<&'a str, Pool>,
    /// A note naming the nodes whose label value is not a workload config, when any.
    pub note: Option<String>,
}

/// Phase 1: puts each node that carries the workload label, lists a GPU resource or has an
/// NVIDIA GPU by NFD's labels in its pool ([`Pool::of`]: the effective workload config);
/// control-plane and CPU nodes stay out, and so does a labelled node that NFD shows
/// without a GPU (the operator never reads its label,
/// [`crate::model::operator::OperatorScope::NoGpu`]). Invalid label values are noted with
/// the workload the operator applies instead.
pub fn assign_pools<'a>(nodes: &'a [NodeInfo], policy: Option<&ClusterPolicy>) -> Pools<'a> {
    let mut pool_of = BTreeMap::new();
    let mut invalid_labels = BTreeSet::new();
    for n in nodes {
        let gpu = operator::gpu_evidence(n);
        if gpu == GpuEvidence::NoGpu
            || (n.label(LABEL_KEY).is_none()
                && gpu_resources(n).is_empty()
                && gpu != GpuEvidence::Nfd)
        {
            continue;
        }
        let pool = Pool::of(n, policy);
        if let Some(v) = n.label(LABEL_KEY)
            && v.parse::<WorkloadConfig>().is_err()
        {
            invalid_labels.insert(format!("{}={v:?} (applies {})", n.name, pool.workload));
        }
        pool_of.insert(n.name.as_str(), pool);
    }
    let note = (!invalid_labels.is_empty()).then(|| {
        format!(
            "label values that are not container/vm-passthrough/vm-vgpu (the operator silently applies its default workload): {}",
            invalid_labels.into_iter().collect::<Vec<_>>().join(", ")
        )
    });
    Pools { pool_of, note }
}

/// Per (pool, resource) the nodes' use; `None` resource: a pool whose nodes list no GPU
/// resource.
pub(crate) type Cells = BTreeMap<(Pool, Option<String>), BTreeMap<String, NodeUse>>;

/// Phase 2: what the pools offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Supply<'a> {
    /// Per (pool, resource), each node's [`NodeUse`].
    pub cells: Cells,
    /// Node → GPU resource → allocatable units, for the advertised (> 0) names only.
    pub advertised: BTreeMap<&'a str, BTreeMap<String, i64>>,
    /// (node, resource) → free units (allocatable − allocated, may be negative).
    pub free_by_node: BTreeMap<(String, String), i64>,
}

/// Phase 2: every GPU resource a pooled node lists, and every GPU resource a bound pod holds
/// on a known node (counted in that node's pool even when the node lists no GPU), with
/// physical-GPU fractions ([`unit_fraction`]). Labelled pools without any GPU resource get
/// a `None`-resource cell so they still show.
pub(crate) fn supply<'a>(
    nodes: &'a [NodeInfo],
    usage: &Usage,
    pool_of: &BTreeMap<&'a str, Pool>,
) -> Supply<'a> {
    let node_by_name: BTreeMap<&str, &'a NodeInfo> =
        nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut cells: Cells = BTreeMap::new();
    let mut advertised: BTreeMap<&'a str, BTreeMap<String, i64>> = BTreeMap::new();
    let mut free_by_node = BTreeMap::new();
    for (node, r, c) in usage.cells() {
        if !classify(r).is_gpu() {
            continue;
        }
        let Some(pool) = pool_of
            .get(node)
            .copied()
            .or_else(|| (c.allocated > 0).then(|| usage.pool_of(node)).flatten())
        else {
            continue;
        };
        let Some(n) = node_by_name.get(node).copied() else {
            continue;
        };
        cells.entry((pool, Some(r.to_owned()))).or_default().insert(
            node.to_owned(),
            NodeUse {
                name: node.to_owned(),
                capacity: c.capacity,
                allocatable: c.allocatable,
                allocated: c.allocated,
                gpus_per_unit: unit_fraction(n, r),
                cordoned: n.unschedulable,
            },
        );
        if c.advertised() {
            advertised
                .entry(n.name.as_str())
                .or_default()
                .insert(r.to_owned(), c.allocatable);
        }
        free_by_node.insert((node.to_owned(), r.to_owned()), c.free());
    }
    for (name, pool) in pool_of {
        if !cells.keys().any(|(p, r)| p == pool && r.is_some()) {
            cells.entry((*pool, None)).or_default().insert(
                (*name).to_owned(),
                NodeUse {
                    name: (*name).to_owned(),
                    capacity: 0,
                    allocatable: 0,
                    allocated: 0,
                    gpus_per_unit: None,
                    cordoned: false,
                },
            );
        }
    }
    Supply {
        cells,
        advertised,
        free_by_node,
    }
}

/// Phase 3: what unbound pods ask for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Demand {
    /// (pool, resource) → (units, pods `namespace/name`) of pending pods that pool could
    /// serve; a pod that fits several pools counts in each.
    pub pending: BTreeMap<(Pool, String), (i64, Vec<String>)>,
    /// Pending demand no pool can serve.
    pub unservable: Vec<Unservable>,
    /// Pending GPU pods that are neither demand nor unservable: blocked by a cordon or
    /// taint, gated, short of a non-GPU resource, or invalid.
    pub held_back: Vec<PendingPod>,
    /// Pending GPU pods of class `demand`, with their cause code.
    pub demand_pods: Vec<PendingPod>,
    /// Unbound, non-terminal pods (with or without GPU requests).
    pub pending_pods: usize,
}

/// A pending GPU pod with explain's verdict ([`crate::analysis::verdict`]): in
/// [`Inventory::demand_pods`] the pods of class `demand`, in [`Inventory::held_back`]
/// those of class `blocked`, `gated`, `other-resource` or `invalid-spec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    /// The pod (`namespace/name`).
    pub pod: String,
    /// What `pod` names (as [`Unservable::kind`]); left out of JSON for a Pod.
    #[serde(skip_serializing_if = "ObjectKind::is_pod")]
    pub kind: ObjectKind,
    /// Its class.
    pub class: PodClass,
    /// explain's primary cause code.
    pub code: CauseCode,
    /// Whether the wait can pass on its own.
    pub transient: bool,
    /// The GPU names it asks for, with units.
    pub resources: BTreeMap<String, i64>,
    /// What holds it: the nodes it is kept from by a cordon or taints (`blocked`), its
    /// scheduling gates (`gated`), the nodes whose GPU units are free but another
    /// resource short (`other-resource`).
    pub by: Vec<String>,
}

/// Phase 3: each unbound pod asking for GPU resources gets explain's verdict
/// ([`crate::analysis::explain::Shared`], one shared table for all pods). Demand
/// ([`PodClass::Demand`]) counts in the pools with a node its constraints allow
/// ([`placement::allows`]) that advertises every GPU name asked with at least the units
/// asked (a pod's units come from one node); unservable demand is [`Unservable`]
/// ([`unservable_cause`], [`free_beside`]); the rest is [`PendingPod`] and never counts as
/// GPU demand. `kubevirt`: KubeVirt's `permittedHostDevices`, which judges VMIs and VMs.
pub fn demand(
    nodes: &[NodeInfo],
    pods: &[PodInfo],
    pool_of: &BTreeMap<&str, Pool>,
    supply: &Supply<'_>,
    policy: Option<&ClusterPolicy>,
    kubevirt: Option<&PermittedHostDevices>,
) -> Demand {
    let mut d = Demand::default();
    let shared = Shared::new(Inputs::of_state(nodes, pods, policy, kubevirt));
    // A VMI whose launcher pod is in the list waits through that pod, and a VM through its
    // VMI ([`crate::decode::virt::waits_without_launcher`], as triage judges them): each
    // VM is counted once, by what stands for it.
    let launchers: BTreeSet<(&str, &str)> = pods
        .iter()
        .filter(|q| !q.is_terminal())
        .filter_map(|q| Some((q.namespace.as_str(), q.launcher_vmi()?)))
        .collect();
    let vmis: BTreeSet<(&str, &str)> = pods
        .iter()
        .filter(|q| q.kind == ObjectKind::VirtualMachineInstance)
        .map(|q| (q.namespace.as_str(), q.name.as_str()))
        .collect();
    let stands_for_itself = |p: &PodInfo| {
        let key = (p.namespace.as_str(), p.name.as_str());
        match p.kind {
            ObjectKind::Pod => true,
            ObjectKind::VirtualMachineInstance => !launchers.contains(&key),
            ObjectKind::VirtualMachine => !vmis.contains(&key),
        }
    };
    // Pending pods that differ only in their names (the replicas of a Job or Deployment)
    // are judged once: nothing below reads a plain pod's own name but its key.
    let mut judged: Vec<(&PodInfo, Judged<'_>)> = Vec::new();
    let mut by_shape: HashMap<Shape<'_>, Vec<usize>> = HashMap::new();
    for p in pods
        .iter()
        .filter(|p| p.is_unbound() && stands_for_itself(p))
    {
        d.pending_pods += 1;
        let gpu_reqs: Vec<(&str, i64)> = gpu_requests(p).collect();
        if gpu_reqs.is_empty() {
            continue;
        }
        let bucket = by_shape
            .entry((p.namespace.as_str(), &*p.requests, &p.node_selector))
            .or_default();
        let at = match bucket.iter().find(|&&i| same_but_name(judged[i].0, p)) {
            Some(&i) => i,
            None => {
                let j = judge(p, &gpu_reqs, nodes, pool_of, supply, &shared);
                judged.push((p, j));
                bucket.push(judged.len() - 1);
                judged.len() - 1
            }
        };
        let Judged {
            allowed,
            fitting_pools,
            explained: e,
        } = &judged[at].1;
        let e = e.as_ref();
        let cx = Ctx {
            nodes,
            allowed,
            pool_of,
            advertised: &supply.advertised,
            free_by_node: &supply.free_by_node,
        };
        let v = e.map_or_else(
            || {
                verdict::verdict(
                    if fitting_pools.is_empty() {
                        CauseCode::UnadvertisedName
                    } else {
                        CauseCode::FitsNow
                    },
                    false,
                )
            },
            |e| e.verdict,
        );
        let pending_pod = |class: PodClass| PendingPod {
            pod: p.key(),
            kind: p.kind,
            class,
            code: v.code,
            transient: v.transient,
            resources: gpu_reqs
                .iter()
                .map(|(r, u)| ((*r).to_owned(), *u))
                .collect(),
            by: e.map(|e| held_by(class, p, e)).unwrap_or_else(|| {
                if class == PodClass::Gated {
                    p.scheduling_gates.clone()
                } else {
                    Vec::new()
                }
            }),
        };
        match v.class {
            PodClass::Demand if !fitting_pools.is_empty() => {
                d.demand_pods.push(pending_pod(PodClass::Demand));
                for (r, units) in &gpu_reqs {
                    for pool in fitting_pools {
                        let e = d.pending.entry((*pool, (*r).to_owned())).or_default();
                        e.0 = e.0.saturating_add(*units);
                        e.1.push(p.key());
                    }
                }
            }
            PodClass::Demand | PodClass::Unservable | PodClass::NotJudged => {
                for (r, units) in &gpu_reqs {
                    let mut u = unservable_entry(p, r, *units, &cx);
                    u.code = v.code;
                    u.transient = v.transient;
                    if v.code == CauseCode::NotPermitted
                        && let Some(kv) = kubevirt.filter(|kv| !kv.permits(r))
                    {
                        u.cause = UnservableCause::NotPermitted;
                        u.reason = format!(
                            "KubeVirt refuses it: {r} is not in {} of {}, so no virt-launcher pod is rendered",
                            kv.source.path(),
                            kv.object
                        );
                    }
                    d.unservable.push(u);
                }
            }
            class => d.held_back.push(pending_pod(class)),
        }
    }
    d
}

/// What [`demand`] keeps of a pending pod's spec to find its look-alikes quickly
/// (namespace, GPU requests, nodeSelector); [`same_but_name`] decides.
type Shape<'a> = (
    &'a str,
    &'a BTreeMap<String, i64>,
    &'a BTreeMap<String, String>,
);

/// What [`demand`] works out for a pending pod from everything but its name: the nodes
/// its constraints allow (in pools), the pools with such a node advertising every GPU
/// name asked with enough units, and explain's explanation (`None` when it failed).
struct Judged<'a> {
    allowed: Vec<&'a NodeInfo>,
    fitting_pools: BTreeSet<Pool>,
    explained: Option<Explanation>,
}

/// [`Judged`] for `p`, asking `gpu_reqs` (its GPU requests).
fn judge<'a>(
    p: &PodInfo,
    gpu_reqs: &[(&str, i64)],
    nodes: &'a [NodeInfo],
    pool_of: &BTreeMap<&str, Pool>,
    supply: &Supply<'_>,
    shared: &Shared<'_>,
) -> Judged<'a> {
    let allowed: Vec<&NodeInfo> = nodes
        .iter()
        .filter(|n| pool_of.contains_key(n.name.as_str()) && placement::allows(p, n))
        .collect();
    let fits = |n: &NodeInfo| {
        gpu_reqs.iter().all(|(r, units)| {
            supply
                .advertised
                .get(n.name.as_str())
                .and_then(|m| m.get(*r))
                .is_some_and(|alloc| alloc >= units)
        })
    };
    let fitting_pools: BTreeSet<Pool> = allowed
        .iter()
        .filter(|n| fits(n))
        .map(|n| pool_of[n.name.as_str()])
        .collect();
    Judged {
        allowed,
        fitting_pools,
        explained: shared.explain(p).ok(),
    }
}

/// Whether two pending pods differ at most in their names and their `status.conditions`,
/// so that explain gives them the same verdict, fitting nodes, held-off nodes and filters
/// (all [`demand`] reads of an explanation): only plain pods that are not virt-launcher
/// pods (a launcher's name names its VMI, which explain looks up). The conditions are left
/// out because no explain rule reads a pod's conditions — the scheduler's `PodScheduled`
/// message only becomes the explanation's `scheduler` field and notes — while on a live
/// cluster each replica carries the scheduler's message of its own last attempt, whose
/// node counts differ attempt by attempt (issue 51: at 5,000 nodes no two of 500 pending
/// look-alikes compared equal, and each was explained against every node). Every field
/// is named, so a field added to [`PodInfo`] has to be placed here.
fn same_but_name(a: &PodInfo, b: &PodInfo) -> bool {
    let PodInfo {
        kind,
        namespace,
        name: _,
        node_name,
        phase,
        node_selector,
        required_affinity,
        tolerations,
        scheduling_gates,
        conditions: _,
        requests,
        other_requests,
        status_reason,
        status_message,
        sources,
        spec_problems,
        resource_claims,
        vmi_owned_by_vm,
        vm_memory,
        vmi_shape,
    } = a;
    *kind == ObjectKind::Pod
        && b.kind == ObjectKind::Pod
        && a.launcher_vmi().is_none()
        && b.launcher_vmi().is_none()
        && *namespace == b.namespace
        && *node_name == b.node_name
        && *phase == b.phase
        && *node_selector == b.node_selector
        && *required_affinity == b.required_affinity
        && *tolerations == b.tolerations
        && *scheduling_gates == b.scheduling_gates
        && *requests == b.requests
        && *other_requests == b.other_requests
        && *status_reason == b.status_reason
        && *status_message == b.status_message
        && *sources == b.sources
        && *spec_problems == b.spec_problems
        && *resource_claims == b.resource_claims
        && *vmi_owned_by_vm == b.vmi_owned_by_vm
        && *vm_memory == b.vm_memory
        && *vmi_shape == b.vmi_shape
}

/// What holds a pending pod of `class`, for [`PendingPod::by`]: the nodes it fits now
/// (demand), the nodes only cordons or taints keep it from (blocked), its scheduling gates
/// (gated), the nodes with its GPU units free but another resource short (other-resource).
fn held_by(class: PodClass, p: &PodInfo, e: &Explanation) -> Vec<String> {
    match class {
        PodClass::Demand => e.fitting.clone(),
        PodClass::Blocked => e.held_off.clone(),
        PodClass::Gated => p.scheduling_gates.clone(),
        PodClass::OtherResource => e
            .filters
            .iter()
            .filter(|f| e.fitting.contains(&f.node) && !f.reasons.is_empty())
            .map(|f| f.node.clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// Phase 4: one [`Row`] per (pool, resource), with pending demand, sums that saturate
/// rather than wrap, and physical-GPU equivalents when every node's fraction is known;
/// sorted by pool origin, workload, resource.
pub(crate) fn sum_rows(
    mut cells: Cells,
    pending: &BTreeMap<(Pool, String), (i64, Vec<String>)>,
) -> Vec<Row> {
    for (pool, r) in pending.keys() {
        cells.entry((*pool, Some(r.clone()))).or_default();
    }
    let mut rows: Vec<Row> = cells
        .into_iter()
        .map(|((pool, resource), per_node)| {
            let detail: Vec<NodeUse> = per_node.into_values().collect();
            let sum =
                |f: fn(&NodeUse) -> i64| detail.iter().fold(0i64, |s, u| s.saturating_add(f(u)));
            let (capacity, allocatable, allocated) = (
                sum(|u| u.capacity),
                sum(|u| u.allocatable),
                sum(|u| u.allocated),
            );
            let part = |cordoned: bool| {
                let (a, b) = detail.iter().filter(|u| u.cordoned == cordoned).fold(
                    (0i64, 0i64),
                    |(a, b), u| {
                        (
                            a.saturating_add(u.allocatable),
                            b.saturating_add(u.allocated),
                        )
                    },
                );
                a.saturating_sub(b).max(0)
            };
            let (free, cordoned_free) = (part(false), part(true));
            let eq = |f: fn(&NodeUse) -> i64| -> Option<f64> {
                resource.as_ref()?;
                detail
                    .iter()
                    .map(|u| u.gpus_per_unit.map(|g| g * f(u) as f64))
                    .sum::<Option<f64>>()
            };
            let (pending, pending_pods) = resource
                .as_ref()
                .and_then(|r| pending.get(&(pool, r.clone())).cloned())
                .unwrap_or_default();
            Row {
                pool: pool.name(),
                workload: pool.workload,
                origin: pool.origin,
                class: resource.as_deref().map(classify),
                nodes: detail.iter().filter(|u| u.allocatable > 0).count(),
                stale_nodes: if resource.is_some() {
                    detail
                        .iter()
                        .filter(|u| u.allocatable == 0 && u.allocated == 0)
                        .map(|u| u.name.clone())
                        .collect()
                } else {
                    Vec::new()
                },
                capacity,
                allocatable,
                allocated,
                free,
                cordoned_free,
                overcommitted: allocated.saturating_sub(allocatable).max(0),
                pending,
                pending_pods,
                capacity_gpus: eq(|u| u.capacity),
                free_gpus: resource.as_ref().and_then(|_| {
                    detail
                        .iter()
                        .filter(|u| !u.cordoned)
                        .map(whole_free_gpus)
                        .sum::<Option<f64>>()
                }),
                slots_per_gpu: {
                    let mut slots = detail.iter().map(|u| slots_per_gpu(u.gpus_per_unit));
                    match slots.next() {
                        Some(Some(first)) if slots.all(|s| s == Some(first)) && first > 1 => {
                            Some(first)
                        }
                        _ => None,
                    }
                },
                node_detail: detail,
                resource,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.origin, a.workload, &a.resource).cmp(&(b.origin, b.workload, &b.resource))
    });
    rows
}

/// Units per physical GPU when a unit is a fraction of one (`1 / gpus_per_unit`, rounded:
/// 2 for `NVIDIA_A10-12Q` on a 24 GB A10, 4 for four time-slicing replicas); `Some(1)` for
/// one unit per GPU; `None` when not derivable.
fn slots_per_gpu(gpus_per_unit: Option<f64>) -> Option<i64> {
    let g = gpus_per_unit.filter(|g| *g > 0.0)?;
    if g >= 1.0 {
        return Some(1);
    }
    Some((1.0 / g).round().max(1.0) as i64)
}

/// Whole GPUs of one node certainly free for `u`'s resource (see [`Row::free_gpus`]).
fn whole_free_gpus(u: &NodeUse) -> Option<f64> {
    let g = u.gpus_per_unit?;
    let free = u.allocatable.saturating_sub(u.allocated).max(0);
    let slots = slots_per_gpu(Some(g))?;
    if slots <= 1 {
        return Some(g * free as f64);
    }
    let gpus = u.allocatable.max(0) / slots;
    Some(gpus.saturating_sub(u.allocated.clamp(0, gpus)) as f64)
}

/// The GPU-class entries of a pod's effective requests.
fn gpu_requests(p: &PodInfo) -> impl Iterator<Item = (&str, i64)> {
    p.requests
        .iter()
        .filter(|(r, _)| classify(r).is_gpu())
        .map(|(r, n)| (r.as_str(), *n))
}

/// What [`unservable_cause`] and [`free_beside`] look at.
pub(crate) struct Ctx<'a> {
    /// All nodes.
    pub nodes: &'a [NodeInfo],
    /// The pooled nodes the pod's constraints allow.
    pub allowed: &'a [&'a NodeInfo],
    /// Node → pool ([`assign_pools`]).
    pub pool_of: &'a BTreeMap<&'a str, Pool>,
    /// Node → advertised GPU name → allocatable ([`Supply::advertised`]).
    pub advertised: &'a BTreeMap<&'a str, BTreeMap<String, i64>>,
    /// (node, resource) → free units ([`Supply::free_by_node`]).
    pub free_by_node: &'a BTreeMap<(String, String), i64>,
}

fn unservable_entry(p: &PodInfo, r: &str, units: i64, cx: &Ctx<'_>) -> Unservable {
    let (cause, reason, did_you_mean) = unservable_cause(p, r, units, cx);
    // A name no node advertises is classed by the advertised name it was meant to be
    // (`GA102GL_A1O` is a mistyped device model, not a vGPU type).
    let class = did_you_mean
        .first()
        .map_or_else(|| classify(r), |s| classify(s));
    let (free_same_name, free_other_names) = free_beside(p, r, class, cx);
    Unservable {
        pod: p.key(),
        kind: p.kind,
        resource: r.to_owned(),
        units,
        cause,
        code: CauseCode::UnadvertisedName,
        transient: false,
        reason,
        did_you_mean,
        allowed_pools: cx
            .allowed
            .iter()
            .map(|n| cx.pool_of[n.name.as_str()])
            .collect::<BTreeSet<Pool>>()
            .iter()
            .map(Pool::name)
            .collect(),
        free_same_name,
        free_other_names,
        scheduler_message: p.pod_scheduled().and_then(|c| c.message.clone()),
    }
}

/// Why `units` of `r` asked by `p` fit no pool, tried in this order: no node advertises
/// `r` ([`UnservableCause::NotAdvertised`], with close advertised names), every advertiser
/// is excluded by the pod's constraints ([`UnservableCause::Excluded`], naming them), no
/// allowed node has that many units ([`UnservableCause::TooLarge`]), else no allowed node
/// advertises all the pod's GPU names ([`UnservableCause::NotTogether`]). Returns (cause,
/// one-line reason, did-you-mean names).
pub(crate) fn unservable_cause(
    p: &PodInfo,
    r: &str,
    units: i64,
    cx: &Ctx<'_>,
) -> (UnservableCause, String, Vec<String>) {
    let advertisers: Vec<&NodeInfo> = cx
        .nodes
        .iter()
        .filter(|n| {
            cx.advertised
                .get(n.name.as_str())
                .is_some_and(|m| m.contains_key(r))
        })
        .collect();
    let allowed_names: BTreeSet<&str> = cx.allowed.iter().map(|n| n.name.as_str()).collect();
    if advertisers.is_empty() {
        let names: BTreeSet<&str> = cx
            .advertised
            .values()
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        let dym: Vec<String> = names::did_you_mean(r, names)
            .into_iter()
            .map(|s| s.name)
            .collect();
        let mut reason = format!("no node advertises {r}");
        if let Some(first) = dym.first() {
            reason.push_str(&format!(" (did you mean {first}?)"));
        }
        return (UnservableCause::NotAdvertised, reason, dym);
    }
    if advertisers
        .iter()
        .all(|n| !allowed_names.contains(n.name.as_str()))
    {
        let mut why = BTreeSet::new();
        for n in &advertisers {
            for ex in placement::exclusions(p, n) {
                why.insert(ex.constraint());
            }
        }
        let pools: BTreeSet<String> = advertisers
            .iter()
            .map(|n| cx.pool_of[n.name.as_str()].name())
            .collect();
        return (
            UnservableCause::Excluded,
            format!(
                "{r} is advertised only in pool {} and {} excludes those nodes",
                pools.into_iter().collect::<Vec<_>>().join(", "),
                why.into_iter().collect::<Vec<_>>().join(" and ")
            ),
            Vec::new(),
        );
    }
    if let Some(most) = advertisers
        .iter()
        .filter(|n| allowed_names.contains(n.name.as_str()))
        .filter_map(|n| cx.advertised.get(n.name.as_str())?.get(r).copied())
        .max()
        .filter(|most| *most < units)
    {
        return (
            UnservableCause::TooLarge,
            format!(
                "the allowed nodes have at most {most} allocatable each (a pod's units come from one node)"
            ),
            Vec::new(),
        );
    }
    (
        UnservableCause::NotTogether,
        format!(
            "no allowed node advertises {} together",
            p.requests
                .keys()
                .filter(|k| classify(k).is_gpu())
                .cloned()
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        Vec::new(),
    )
}

/// The free units shown beside unservable demand for `r`: (the same name in pools the pod
/// cannot reach, other GPU names on nodes it can reach). Other names are all names when a
/// nodeSelector or required affinity confines the pod, else names of `class`. Negative free
/// (over-committed) counts as 0; sums saturate.
pub(crate) fn free_beside(
    p: &PodInfo,
    r: &str,
    class: ResourceClass,
    cx: &Ctx<'_>,
) -> (Vec<Free>, Vec<Free>) {
    let allowed_names: BTreeSet<&str> = cx.allowed.iter().map(|n| n.name.as_str()).collect();
    let confined = !p.node_selector.is_empty() || p.required_affinity.is_some();
    let mut same: BTreeMap<Pool, i64> = BTreeMap::new();
    let mut other: BTreeMap<(Pool, String), i64> = BTreeMap::new();
    for n in cx.nodes {
        let Some(pool) = cx.pool_of.get(n.name.as_str()) else {
            continue;
        };
        let Some(m) = cx.advertised.get(n.name.as_str()) else {
            continue;
        };
        let allowed = allowed_names.contains(n.name.as_str());
        for res in m.keys() {
            let free = cx
                .free_by_node
                .get(&(n.name.clone(), res.clone()))
                .copied()
                .unwrap_or(0)
                .max(0);
            if res == r && !allowed {
                let s = same.entry(*pool).or_default();
                *s = s.saturating_add(free);
            } else if res != r && allowed && (confined || classify(res) == class) {
                let o = other.entry((*pool, res.clone())).or_default();
                *o = o.saturating_add(free);
            }
        }
    }
    (
        same.into_iter()
            .map(|(pool, free)| Free {
                pool: pool.name(),
                resource: r.to_owned(),
                free,
            })
            .collect(),
        other
            .into_iter()
            .map(|((pool, resource), free)| Free {
                pool: pool.name(),
                resource,
                free,
            })
            .collect(),
    )
}

impl Inventory {
    /// The row of `pool` (display name) × `resource`.
    pub fn row(&self, pool: &str, resource: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.pool == pool && r.resource.as_deref() == Some(resource))
    }
}

/// Removes the `nvidia.com/` resources matching `globs` (the `--ignore-resource` rule of
/// [`Classifier::with_ignore_globs`]) from the nodes' capacity and allocatable and from the
/// pods' requests, so that they count nowhere. Returns the note that says so (never
/// silently): the GPU names only the globs set aside, with the nodes listing them and the
/// pods requesting them; `None` when the globs matched none.
pub fn ignore_resources(
    nodes: &mut [NodeInfo],
    pods: &mut [PodInfo],
    globs: &[String],
) -> Option<String> {
    if globs.is_empty() {
        return None;
    }
    let c = Classifier::with_ignore_globs(globs.iter().cloned());
    let keep = |r: &String| c.classify(r) != ResourceClass::NonGpu;
    // A GPU name by the default rules that a glob set aside: (nodes, pods) naming it.
    let mut set_aside: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut aside = |r: &String, node: bool| {
        if !keep(r) && resource::classify(r).is_gpu() {
            let e = set_aside.entry(r.clone()).or_default();
            if node {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    };
    for n in nodes {
        for r in n.capacity.keys() {
            aside(r, true);
        }
        n.capacity.retain(|r, _| keep(r));
        if let Some(a) = &mut n.allocatable {
            a.retain(|r, _| keep(r));
        }
    }
    for p in pods {
        if p.requests.keys().any(|r| !keep(r)) {
            for r in p.requests.keys() {
                aside(r, false);
            }
            std::sync::Arc::make_mut(&mut p.requests).retain(|r, _| keep(r));
        }
        p.sources.retain(|s| keep(&s.resource));
    }
    (!set_aside.is_empty()).then(|| {
        let names: Vec<String> = set_aside
            .iter()
            .map(|(r, (n, p))| {
                format!(
                    "{} (listed by {n} node(s), requested by {p} pod(s))",
                    text::esc(r)
                )
            })
            .collect();
        format!(
            "--ignore-resource set aside {}: counted nowhere above",
            names.join(", ")
        )
    })
}

/// The inventory of a [`Snapshot`] (the one assembly, whatever the source): the pools,
/// allocations and pending demand of its nodes and pods less the `ignore`d resources
/// ([`ignore_resources`]; without pods, a note that allocated and pending are not known),
/// and beside them what was read of the rest: the operand pods (status `file` from a
/// pods dump, `cluster` from the live cluster, `unreadable` with the reason when their
/// list failed; not read, not reported), the DRA objects, Kueue's quota.
///
/// Errors: [`crate::error::Error::Input`] when a node's GPU quantity is not a whole
/// number, naming the node dump or snapshot file it came from.
pub fn assemble(snap: Snapshot, ignore: &[String]) -> Result<Inventory> {
    let Snapshot {
        mut nodes,
        pods,
        policy,
        kubevirt,
        dra,
        kueue,
        operands,
        from,
        ..
    } = snap;
    let note = pods
        .is_none()
        .then(|| "no --pods: allocated and pending are not known (shown as 0)".to_string());
    let mut pods = pods.unwrap_or_default();
    let ignored = ignore_resources(&mut nodes, &mut pods, ignore);
    let mut inv =
        build_with(&nodes, &pods, &policy, kubevirt.as_ref()).map_err(|e| match from.file() {
            Some(f) => e.in_file(f),
            None => e,
        })?;
    inv.notes.extend(note);
    inv.notes.extend(ignored);
    if let Some(read) = operands {
        let status = match from {
            crate::model::snapshot::From::Cluster => "cluster",
            _ => "file",
        };
        let (pods, source) = match read {
            Ok(p) => (p, OperandSource { status, note: None }),
            Err(e) => (
                Vec::new(),
                OperandSource {
                    status: "unreadable",
                    note: Some(text::esc(&e.to_string())),
                },
            ),
        };
        attach_operands(&mut inv, &nodes, policy.policy(), pods, source);
    }
    if let Some((objects, source)) = dra {
        attach_dra(&mut inv, &objects, source, &nodes, policy.policy());
    }
    if let Some(k) = &kueue {
        attach_quota(&mut inv, k, &nodes, policy.policy());
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_use(alloc: i64, used: i64, g: Option<f64>) -> NodeUse {
        NodeUse {
            name: "n".into(),
            capacity: alloc,
            allocatable: alloc,
            allocated: used,
            gpus_per_unit: g,
            cordoned: false,
        }
    }

    #[test]
    fn whole_free_gpus_counts_a_gpu_only_when_no_slot_of_it_can_be_used() {
        // 2 A10s × 2 slots of A10-12Q.
        assert_eq!(whole_free_gpus(&node_use(4, 0, Some(0.5))), Some(2.0));
        assert_eq!(whole_free_gpus(&node_use(4, 1, Some(0.5))), Some(1.0));
        assert_eq!(whole_free_gpus(&node_use(4, 2, Some(0.5))), Some(0.0));
        assert_eq!(whole_free_gpus(&node_use(4, 4, Some(0.5))), Some(0.0));
        // over-committed never goes below 0
        assert_eq!(whole_free_gpus(&node_use(4, 9, Some(0.5))), Some(0.0));
        // one unit per GPU: the free units
        assert_eq!(whole_free_gpus(&node_use(8, 3, Some(1.0))), Some(5.0));
        assert_eq!(whole_free_gpus(&node_use(8, 3, None)), None);
        // time-slicing, 4 replicas of 1 GPU
        assert_eq!(whole_free_gpus(&node_use(4, 1, Some(0.25))), Some(0.0));
        assert_eq!(slots_per_gpu(Some(1.0 / 3.0)), Some(3));
        assert_eq!(slots_per_gpu(Some(1.0)), Some(1));
    }
    use crate::model::pod::ObjectKind;

    use crate::testkit::labelled as node;

    use crate::testkit::gpu_node;

    /// A pod `name` asking for `req`, bound to `node` (running) or pending.
    fn pod(name: &str, node: Option<&str>, req: &[(&str, i64)]) -> PodInfo {
        PodInfo {
            kind: ObjectKind::Pod,
            namespace: "ns".into(),
            name: name.into(),
            node_name: node.map(Into::into),
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            node_selector: BTreeMap::new(),
            required_affinity: None,
            tolerations: Vec::new().into(),
            conditions: Vec::new(),
            requests: std::sync::Arc::new(req.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
            sources: Vec::new(),
            spec_problems: Vec::new(),
            resource_claims: Vec::new(),
            ..Default::default()
        }
    }

    fn wl(s: &str) -> WorkloadConfig {
        s.parse().unwrap()
    }

    #[test]
    fn empty_labelled_pool_gets_a_row() {
        let n = node(&[(LABEL_KEY, "vm-passthrough")]);
        let inv = build(&[n], &[], &PolicyStatus::not_read()).unwrap();
        assert_eq!(inv.rows.len(), 1);
        assert_eq!(inv.rows[0].resource, None);
        assert_eq!(inv.rows[0].pool, "vm-passthrough");
    }

    #[test]
    fn pools_leave_out_cpu_nodes_and_note_invalid_labels() {
        let nodes = [
            gpu_node("cpu", None, &[]),
            gpu_node("plain", None, &[("nvidia.com/gpu", "1")]),
            gpu_node("typo", Some("vm_vgpu"), &[]),
            gpu_node("vm", Some("vm-passthrough"), &[]),
        ];
        let p = assign_pools(&nodes, None);
        let got: Vec<(&str, WorkloadConfig, PoolOrigin)> = p
            .pool_of
            .iter()
            .map(|(n, pool)| (*n, pool.workload, pool.origin))
            .collect();
        assert_eq!(
            got,
            [
                ("plain", wl("container"), PoolOrigin::DefaultNoLabel),
                ("typo", wl("container"), PoolOrigin::DefaultInvalidLabel),
                ("vm", wl("vm-passthrough"), PoolOrigin::Known),
            ]
        );
        assert!(
            p.note
                .as_deref()
                .unwrap()
                .ends_with("typo=\"vm_vgpu\" (applies container)"),
            "{:?}",
            p.note
        );
    }

    #[test]
    fn supply_counts_a_stale_zero_as_listed_but_not_advertised() {
        let nodes = [gpu_node(
            "a",
            Some("vm-passthrough"),
            &[("nvidia.com/gpu", "0"), ("nvidia.com/GA102GL_A10", "2")],
        )];
        let pods = [pod("vm", Some("a"), &[("nvidia.com/GA102GL_A10", 1)])];
        let usage = Usage::build(&nodes, Some(&pods), None);
        let pools = assign_pools(&nodes, None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        assert_eq!(s.cells.len(), 2, "{:?}", s.cells.keys());
        assert_eq!(
            s.advertised["a"],
            BTreeMap::from([("nvidia.com/GA102GL_A10".to_string(), 2)])
        );
        assert_eq!(
            s.free_by_node[&("a".into(), "nvidia.com/GA102GL_A10".into())],
            1
        );
        assert_eq!(s.free_by_node[&("a".into(), "nvidia.com/gpu".into())], 0);
    }

    #[test]
    fn demand_counts_a_pod_in_every_pool_that_fits_and_keeps_the_rest_unservable() {
        let nodes = [
            gpu_node("c", Some("container"), &[("nvidia.com/gpu", "2")]),
            gpu_node("u", None, &[("nvidia.com/gpu", "4")]),
            gpu_node("v", Some("vm-vgpu"), &[("nvidia.com/NVIDIA_A10-12Q", "2")]),
        ];
        let pods = [
            pod("job", None, &[("nvidia.com/gpu", 2)]),
            pod("big", None, &[("nvidia.com/gpu", 3)]),
            pod("typo", None, &[("nvidia.com/NVIDIA_A10-12O", 1)]),
            pod("cpu", None, &[]),
            pod("running", Some("c"), &[("nvidia.com/gpu", 1)]),
        ];
        let usage = Usage::build(&nodes, Some(&pods), None);
        let pools = assign_pools(&nodes, None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        let d = demand(&nodes, &pods, &pools.pool_of, &s, None, None);
        assert_eq!(d.pending_pods, 4);
        let pending: Vec<(String, i64, Vec<String>)> = d
            .pending
            .iter()
            .map(|((pool, r), (units, pods))| {
                (format!("{} {r}", pool.name()), *units, pods.clone())
            })
            .collect();
        // job fits both container pools; big (3) fits only the unlabelled node with 4.
        assert_eq!(pending.len(), 2, "{pending:?}");
        assert_eq!(pending[0].1, 2);
        assert_eq!(pending[0].2, ["ns/job"]);
        assert_eq!(pending[1].1, 5);
        assert_eq!(pending[1].2, ["ns/job", "ns/big"]);
        let un: Vec<(&str, UnservableCause)> = d
            .unservable
            .iter()
            .map(|u| (u.pod.as_str(), u.cause))
            .collect();
        assert_eq!(un, [("ns/typo", UnservableCause::NotAdvertised)]);
        assert_eq!(d.unservable[0].did_you_mean, ["nvidia.com/NVIDIA_A10-12Q"]);
    }

    #[test]
    fn look_alike_pending_pods_are_judged_once_but_each_one_counts() {
        let nodes = [gpu_node("c", Some("container"), &[("nvidia.com/gpu", "2")])];
        let mut picky = pod("picky", None, &[("nvidia.com/gpu", 2)]);
        picky.node_selector.insert("zone".into(), "b".into());
        let pods = [
            pod("job-1", None, &[("nvidia.com/gpu", 2)]),
            picky.clone(),
            pod("job-2", None, &[("nvidia.com/gpu", 2)]),
            pod("virt-launcher-vm-abcde", None, &[("nvidia.com/gpu", 2)]),
        ];
        assert!(same_but_name(&pods[0], &pods[2]));
        assert!(!same_but_name(&pods[0], &picky));
        assert!(!same_but_name(&pods[0], &pods[3]));
        let usage = Usage::build(&nodes, Some(&pods), None);
        let pools = assign_pools(&nodes, None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        let d = demand(&nodes, &pods, &pools.pool_of, &s, None, None);
        assert_eq!(d.pending_pods, 4);
        let (units, keys) = &d.pending[&(pools.pool_of["c"], "nvidia.com/gpu".to_owned())];
        assert_eq!(*units, 6);
        assert_eq!(keys, &["ns/job-1", "ns/job-2", "ns/virt-launcher-vm-abcde"]);
        let un: Vec<&str> = d.unservable.iter().map(|u| u.pod.as_str()).collect();
        assert_eq!(un, ["ns/picky"]);
        // Each pod is judged as on its own.
        for p in &pods {
            let alone = demand(
                &nodes,
                std::slice::from_ref(p),
                &pools.pool_of,
                &s,
                None,
                None,
            );
            assert_eq!(alone.pending.is_empty(), p.name == "picky", "{}", p.name);
        }
    }

    #[test]
    fn replicas_with_different_scheduler_messages_are_still_look_alikes() {
        use crate::analysis::explain;
        use crate::model::pod::Condition;
        let nodes = [
            gpu_node("c-0", Some("container"), &[("nvidia.com/gpu", "2")]),
            gpu_node("c-1", Some("container"), &[("nvidia.com/gpu", "1")]),
        ];
        let said = |name: &str, message: &str| {
            let mut p = pod(name, None, &[("nvidia.com/gpu", 2)]);
            p.conditions = vec![Condition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some(message.into()),
            }];
            p
        };
        // The scheduler's message of each replica's own last attempt, counted differently.
        let pods = [
            said(
                "job-1",
                "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
            ),
            said(
                "job-2",
                "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            ),
            pod("holder", Some("c-0"), &[("nvidia.com/gpu", 1)]),
        ];
        assert!(same_but_name(&pods[0], &pods[1]));
        // What demand reads of an explanation is the same for both, explained apart.
        let inputs = Inputs::of_state(&nodes, &pods, None, None);
        let (a, b) = (
            explain::explain(&pods[0], inputs).unwrap(),
            explain::explain(&pods[1], inputs).unwrap(),
        );
        assert_eq!(a.verdict, b.verdict);
        assert_eq!((&a.fitting, &a.held_off), (&b.fitting, &b.held_off));
        assert_eq!(a.filters, b.filters);
        assert_ne!(a.scheduler, b.scheduler);
        let usage = Usage::build(&nodes, Some(&pods), None);
        let pools = assign_pools(&nodes, None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        let d = demand(&nodes, &pods, &pools.pool_of, &s, None, None);
        let un: Vec<(&str, UnservableCause)> = d
            .unservable
            .iter()
            .map(|u| (u.pod.as_str(), u.cause))
            .collect();
        let held: Vec<&str> = d.held_back.iter().map(|h| h.pod.as_str()).collect();
        let demand_pods: Vec<&str> = d.demand_pods.iter().map(|h| h.pod.as_str()).collect();
        // c-0 advertises 2 but holds 1: both wait for units the pool has (demand).
        assert_eq!(demand_pods, ["ns/job-1", "ns/job-2"], "{un:?} {held:?}");
        assert_eq!(
            d.pending[&(pools.pool_of["c-0"], "nvidia.com/gpu".to_owned())].0,
            4
        );
    }

    #[test]
    fn unservable_cause_says_too_large_when_no_allowed_node_has_enough_units() {
        let nodes = [gpu_node("c", Some("container"), &[("nvidia.com/gpu", "2")])];
        let p = pod("big", None, &[("nvidia.com/gpu", 3)]);
        let pools = assign_pools(&nodes, None);
        let usage = Usage::build(&nodes, Some(std::slice::from_ref(&p)), None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        let allowed: Vec<&NodeInfo> = nodes.iter().collect();
        let cx = Ctx {
            nodes: &nodes,
            allowed: &allowed,
            pool_of: &pools.pool_of,
            advertised: &s.advertised,
            free_by_node: &s.free_by_node,
        };
        let (cause, reason, dym) = unservable_cause(&p, "nvidia.com/gpu", 3, &cx);
        assert_eq!(cause, UnservableCause::TooLarge);
        assert!(reason.contains("at most 2 allocatable"), "{reason}");
        assert!(dym.is_empty());
    }

    #[test]
    fn unservable_cause_names_the_constraint_that_excludes_every_advertiser() {
        let nodes = [gpu_node("c", Some("container"), &[("nvidia.com/gpu", "2")])];
        let mut p = pod("pinned", None, &[("nvidia.com/gpu", 1)]);
        p.node_selector.insert("zone".into(), "b".into());
        let pools = assign_pools(&nodes, None);
        let usage = Usage::build(&nodes, Some(std::slice::from_ref(&p)), None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        let cx = Ctx {
            nodes: &nodes,
            allowed: &[],
            pool_of: &pools.pool_of,
            advertised: &s.advertised,
            free_by_node: &s.free_by_node,
        };
        let (cause, reason, _) = unservable_cause(&p, "nvidia.com/gpu", 1, &cx);
        assert_eq!(cause, UnservableCause::Excluded);
        assert!(
            reason.starts_with(
                "nvidia.com/gpu is advertised only in pool container and nodeSelector"
            ),
            "{reason}"
        );
        // The same name's free units show beside it, in the pool the pod cannot reach.
        let (same, other) = free_beside(&p, "nvidia.com/gpu", ResourceClass::ContainerGpu, &cx);
        assert_eq!(
            same,
            [Free {
                pool: "container".into(),
                resource: "nvidia.com/gpu".into(),
                free: 2
            }]
        );
        assert!(other.is_empty());
    }

    #[test]
    fn a_vmi_kubevirt_refuses_is_unservable_not_permitted() {
        use crate::model::kubevirt::{HostDevicesSource, PciHostDevice};
        // Issue 47: the lab's vm-cross (a VMI with no launcher pod asking the container
        // name) is counted, and as KubeVirt judges it, not as demand of the container pool.
        let nodes = [
            gpu_node("lab-node-0", Some("container"), &[("nvidia.com/gpu", "4")]),
            gpu_node(
                "lab-node-1",
                Some("vm-passthrough"),
                &[("nvidia.com/GA102GL_A10", "2")],
            ),
        ];
        let vmi = crate::decode::pods::from_object(&serde_json::json!({
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm-cross", "namespace": "gpu-vm"},
            "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/gpu"}]}}},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let kv = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: Some(true),
            pci_host_devices: vec![PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        let pods = [vmi];
        let inv = build_with(&nodes, &pods, &PolicyStatus::not_read(), Some(&kv)).unwrap();
        assert_eq!(inv.pending_pods, 1);
        assert!(inv.demand_pods.is_empty());
        let u = &inv.unservable[0];
        assert_eq!(
            (u.pod.as_str(), u.kind, u.code, u.cause, u.units),
            (
                "gpu-vm/vm-cross",
                ObjectKind::VirtualMachineInstance,
                CauseCode::NotPermitted,
                UnservableCause::NotPermitted,
                1
            )
        );
        assert_eq!(
            u.reason,
            "KubeVirt refuses it: nvidia.com/gpu is not in spec.configuration.permittedHostDevices of kubevirt/kubevirt, so no virt-launcher pod is rendered"
        );
        let json = serde_json::to_value(u).unwrap();
        assert_eq!(json["kind"], "VirtualMachineInstance");
        // Without the list (KubeVirt vets nothing) the VMI is a pod like any other.
        let kv_absent = PermittedHostDevices {
            present: false,
            pci_host_devices: Vec::new(),
            ..kv
        };
        let inv = build_with(&nodes, &pods, &PolicyStatus::not_read(), Some(&kv_absent)).unwrap();
        assert!(inv.unservable.is_empty(), "{:?}", inv.unservable);
        assert_eq!(inv.demand_pods[0].kind, ObjectKind::VirtualMachineInstance);
    }

    #[test]
    fn sum_rows_saturates_instead_of_wrapping() {
        let max = i64::MAX.to_string();
        let nodes = [
            gpu_node("a", Some("container"), &[("nvidia.com/gpu", &max)]),
            gpu_node("b", Some("container"), &[("nvidia.com/gpu", &max)]),
        ];
        let usage = Usage::build(&nodes, Some(&[]), None);
        let pools = assign_pools(&nodes, None);
        let s = supply(&nodes, &usage, &pools.pool_of);
        let rows = sum_rows(s.cells, &BTreeMap::new());
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].allocatable, i64::MAX);
        assert_eq!(rows[0].free, i64::MAX);
        assert_eq!(rows[0].nodes, 2);
    }

    #[test]
    fn assemble_reads_what_each_source_gave_and_says_what_it_lacks() {
        use crate::model::snapshot::{From, Snapshot};
        let nodes = vec![gpu_node(
            "c-0",
            Some("container"),
            &[("nvidia.com/gpu", "4")],
        )];
        let running = pod("p", Some("c-0"), &[("nvidia.com/gpu", 1)]);
        // A node dump alone: no pods, so allocated is unknown and said; no operand pods,
        // no DRA and no quota sections.
        let files = Snapshot {
            pods: None,
            from: From::Files("nodes.json".into()),
            ..Snapshot::of_cluster(nodes.clone(), Vec::new(), PolicyStatus::not_read())
        };
        let inv = assemble(files, &[]).unwrap();
        assert_eq!(inv.rows[0].allocated, 0);
        assert!(
            inv.notes
                .iter()
                .any(|n| n.starts_with("no --pods: allocated and pending")),
            "{:?}",
            inv.notes
        );
        assert!(inv.operands.is_none() && inv.dra.is_none() && inv.quota.is_none());
        // The live cluster: the pods count, the operand pods are the cluster's, a failed
        // operand list is `unreadable` with its reason, the DRA read is attached.
        let live = |operands| Snapshot {
            operands: Some(operands),
            dra: Some((DraObjects::default(), DraSource::Cluster)),
            ..Snapshot::of_cluster(
                nodes.clone(),
                vec![running.clone()],
                PolicyStatus::not_read(),
            )
        };
        let inv = assemble(live(Ok(Vec::new())), &[]).unwrap();
        assert_eq!(inv.rows[0].allocated, 1);
        assert!(inv.notes.iter().all(|n| !n.starts_with("no --pods")));
        assert_eq!(inv.operands.as_ref().unwrap().source.status, "cluster");
        assert!(inv.dra.is_some());
        let failed = Err(crate::error::Error::Runtime("pods is forbidden".into()));
        let inv = assemble(live(failed), &[]).unwrap();
        let source = &inv.operands.as_ref().unwrap().source;
        assert_eq!(source.status, "unreadable");
        assert_eq!(source.note.as_deref(), Some("pods is forbidden"));
        // Operand pods from a pods dump beside a node dump are the file's.
        let dumped = Snapshot {
            operands: Some(Ok(Vec::new())),
            from: From::Files("nodes.json".into()),
            ..Snapshot::of_cluster(
                nodes.clone(),
                vec![running.clone()],
                PolicyStatus::not_read(),
            )
        };
        let inv = assemble(dumped, &["gpu".into()]).unwrap();
        assert_eq!(inv.operands.as_ref().unwrap().source.status, "file");
        // `--ignore-resource` sets the resource aside and says so.
        assert!(
            inv.rows.iter().all(|r| r.resource.is_none()),
            "{:?}",
            inv.rows
        );
        assert!(
            inv.notes
                .iter()
                .any(|n| n.starts_with("--ignore-resource set aside nvidia.com/gpu")),
            "{:?}",
            inv.notes
        );
    }
}
