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

use std::collections::{BTreeMap, BTreeSet};

use kube::Client;
use serde::Serialize;

use crate::analysis::usage::Usage;
use crate::analysis::{names, placement};
use crate::error::Result;
use crate::model::advertise::gpu_resources;
use crate::model::equivalents::unit_fraction;
use crate::model::node::NodeInfo;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;
use crate::model::pool::{Pool, PoolOrigin};
use crate::model::resource::{Classifier, ResourceClass, classify};
use crate::model::workload::{LABEL_KEY, WorkloadConfig};

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
    /// allocatable − allocated (negative when over-committed).
    pub free: i64,
    /// Requests of unbound pods that this pool could serve, units.
    pub pending: i64,
    /// The pending pods (`namespace/name`).
    pub pending_pods: Vec<String>,
    /// Physical-GPU equivalents of `capacity` (`None`: not derivable, shown `?`).
    pub capacity_gpus: Option<f64>,
    /// Physical-GPU equivalents of `free` (`None`: not derivable).
    pub free_gpus: Option<f64>,
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
}

/// Pending demand for one resource that no node can serve, whatever is freed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unservable {
    /// The pod (`namespace/name`).
    pub pod: String,
    /// The resource it asks for.
    pub resource: String,
    /// Units asked.
    pub units: i64,
    /// The cause.
    pub cause: UnservableCause,
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
    /// Remarks (pods bound to unknown nodes, invalid label values, ...).
    pub notes: Vec<String>,
    /// The GPU Operator ClusterPolicy the pools were computed under, or why there is none.
    pub cluster_policy: PolicyStatus,
}

/// Builds the inventory from nodes and pods.
///
/// Errors: [`crate::error::Error::Input`] (`node <name>: <field>: ...`) when a GPU quantity on a node
/// is not a whole non-negative number.
pub fn build(nodes: &[NodeInfo], pods: &[PodInfo], policy: &PolicyStatus) -> Result<Inventory> {
    let cluster_policy = policy.clone();
    let policy = policy.policy();
    let mut notes = Vec::new();
    // The per node × resource numbers, shared with explain.
    let usage = Usage::build(nodes, Some(pods), policy);
    // node name → pool, for nodes in a pool (labelled, or listing a GPU resource)
    let mut pool_of: BTreeMap<&str, Pool> = BTreeMap::new();
    let mut invalid_labels = BTreeSet::new();
    for n in nodes {
        if n.label(LABEL_KEY).is_none() && gpu_resources(n).is_empty() {
            continue;
        }
        let pool = Pool::of(n, policy);
        if let Some(v) = n.label(LABEL_KEY)
            && v.parse::<WorkloadConfig>().is_err()
        {
            invalid_labels.insert(format!("{}={v:?} (applies {})", n.name, pool.workload));
        }
        pool_of.insert(&n.name, pool);
    }
    if !invalid_labels.is_empty() {
        notes.push(format!(
            "label values that are not container/vm-passthrough/vm-vgpu (the operator silently applies its default workload): {}",
            invalid_labels.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let node_by_name: BTreeMap<&str, &NodeInfo> =
        nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    // (pool, resource) → per-node use: every GPU resource a pooled node lists, and every
    // GPU resource a bound pod holds on any known node.
    let mut cells: BTreeMap<(Pool, Option<String>), BTreeMap<String, NodeUse>> = BTreeMap::new();
    // node → resource → allocatable (> 0), for fitting
    let mut advertised: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
    // Free units per node and resource, for the "beside" lists.
    let mut free_by_node: BTreeMap<(String, String), i64> = BTreeMap::new();
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
        let n = node_by_name[node];
        cells.entry((pool, Some(r.to_owned()))).or_default().insert(
            node.to_owned(),
            NodeUse {
                name: node.to_owned(),
                capacity: c.capacity,
                allocatable: c.allocatable,
                allocated: c.allocated,
                gpus_per_unit: unit_fraction(n, r),
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
    let unknown_nodes = usage.unknown_nodes.clone();
    for bad in &usage.skipped {
        notes.push(format!("skipped (not a valid device count): {bad}"));
    }

    // Pending: unbound pods.
    let mut pending_rows: BTreeMap<(Pool, String), (i64, Vec<String>)> = BTreeMap::new();
    let mut unservable = Vec::new();
    let mut pending_pods = 0;
    for p in pods.iter().filter(|p| p.is_unbound()) {
        pending_pods += 1;
        let gpu_reqs: Vec<(&str, i64)> = gpu_requests(p).collect();
        if gpu_reqs.is_empty() {
            continue;
        }
        // Nodes the pod's constraints allow, and which of them advertise everything asked.
        let allowed: Vec<&NodeInfo> = nodes
            .iter()
            .filter(|n| pool_of.contains_key(n.name.as_str()) && placement::allows(p, n))
            .collect();
        // A node serves the pod when it advertises every name asked, each with at least
        // the units asked (a pod's units come from one node; more cannot be freed).
        let fits = |n: &NodeInfo| {
            gpu_reqs.iter().all(|(r, units)| {
                advertised
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
        for (r, units) in &gpu_reqs {
            if fitting_pools.is_empty() {
                unservable.push(unservable_entry(
                    p,
                    r,
                    *units,
                    &Ctx {
                        nodes,
                        allowed: &allowed,
                        pool_of: &pool_of,
                        advertised: &advertised,
                        free_by_node: &free_by_node,
                    },
                ));
                continue;
            }
            for pool in &fitting_pools {
                let e = pending_rows.entry((*pool, (*r).to_owned())).or_default();
                e.0 = e.0.saturating_add(*units);
                e.1.push(p.key());
            }
        }
    }
    if !unknown_nodes.is_empty() {
        notes.push(format!(
            "pods bound to nodes not in the node list (not counted): {}",
            unknown_nodes.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }

    // Labelled pools without any GPU resource still get a row.
    for (name, pool) in &pool_of {
        if !cells.keys().any(|(p, r)| p == pool && r.is_some()) {
            cells.entry((*pool, None)).or_default().insert(
                (*name).to_owned(),
                NodeUse {
                    name: (*name).to_owned(),
                    capacity: 0,
                    allocatable: 0,
                    allocated: 0,
                    gpus_per_unit: None,
                },
            );
        }
    }
    for (pool, r) in pending_rows.keys() {
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
            let eq = |f: fn(&NodeUse) -> i64| -> Option<f64> {
                resource.as_ref()?;
                detail
                    .iter()
                    .map(|u| u.gpus_per_unit.map(|g| g * f(u) as f64))
                    .sum::<Option<f64>>()
            };
            let (pending, pending_pods) = resource
                .as_ref()
                .and_then(|r| pending_rows.get(&(pool, r.clone())).cloned())
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
                free: allocatable.saturating_sub(allocated),
                pending,
                pending_pods,
                capacity_gpus: eq(|u| u.capacity),
                free_gpus: eq(|u| u.allocatable.saturating_sub(u.allocated)),
                node_detail: detail,
                resource,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.origin, a.workload, &a.resource).cmp(&(b.origin, b.workload, &b.resource))
    });
    Ok(Inventory {
        nodes_read: nodes.len(),
        gpu_nodes: pool_of.len(),
        pods_read: pods.len(),
        pending_pods,
        rows,
        unservable,
        notes,
        cluster_policy,
    })
}

/// The GPU-class entries of a pod's effective requests.
fn gpu_requests(p: &PodInfo) -> impl Iterator<Item = (&str, i64)> {
    p.requests
        .iter()
        .filter(|(r, _)| classify(r).is_gpu())
        .map(|(r, n)| (r.as_str(), *n))
}

/// What [`unservable_entry`] looks at.
struct Ctx<'a> {
    nodes: &'a [NodeInfo],
    allowed: &'a [&'a NodeInfo],
    pool_of: &'a BTreeMap<&'a str, Pool>,
    advertised: &'a BTreeMap<&'a str, BTreeMap<String, i64>>,
    free_by_node: &'a BTreeMap<(String, String), i64>,
}

fn unservable_entry(p: &PodInfo, r: &str, units: i64, cx: &Ctx<'_>) -> Unservable {
    let Ctx {
        nodes,
        allowed,
        pool_of,
        advertised,
        free_by_node,
    } = *cx;
    let advertisers: Vec<&NodeInfo> = nodes
        .iter()
        .filter(|n| {
            advertised
                .get(n.name.as_str())
                .is_some_and(|m| m.contains_key(r))
        })
        .collect();
    let allowed_names: BTreeSet<&str> = allowed.iter().map(|n| n.name.as_str()).collect();
    let allowed_pools: BTreeSet<Pool> = allowed.iter().map(|n| pool_of[n.name.as_str()]).collect();
    let (cause, reason, did_you_mean) = if advertisers.is_empty() {
        let names: BTreeSet<&str> = advertised
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
        (UnservableCause::NotAdvertised, reason, dym)
    } else if advertisers
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
            .map(|n| pool_of[n.name.as_str()].name())
            .collect();
        (
            UnservableCause::Excluded,
            format!(
                "{r} is advertised only in pool {} and {} excludes those nodes",
                pools.into_iter().collect::<Vec<_>>().join(", "),
                why.into_iter().collect::<Vec<_>>().join(" and ")
            ),
            Vec::new(),
        )
    } else if let Some(most) = advertisers
        .iter()
        .filter(|n| allowed_names.contains(n.name.as_str()))
        .filter_map(|n| advertised.get(n.name.as_str())?.get(r).copied())
        .max()
        .filter(|most| *most < units)
    {
        (
            UnservableCause::TooLarge,
            format!(
                "the allowed nodes have at most {most} allocatable each (a pod's units come from one node)"
            ),
            Vec::new(),
        )
    } else {
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
    };
    // Free units: same name where the pod cannot go; other names where it can (all of
    // them when a selector or affinity confines the pod, else those of the same class).
    let confined = !p.node_selector.is_empty() || p.required_affinity.is_some();
    // A name no node advertises is classed by the advertised name it was meant to be
    // (`GA102GL_A1O` is a mistyped device model, not a vGPU type).
    let class = did_you_mean
        .first()
        .map_or_else(|| classify(r), |s| classify(s));
    let mut same: BTreeMap<Pool, i64> = BTreeMap::new();
    let mut other: BTreeMap<(Pool, String), i64> = BTreeMap::new();
    for n in nodes {
        let Some(pool) = pool_of.get(n.name.as_str()) else {
            continue;
        };
        let Some(m) = advertised.get(n.name.as_str()) else {
            continue;
        };
        for res in m.keys() {
            let free = free_by_node
                .get(&(n.name.clone(), res.clone()))
                .copied()
                .unwrap_or(0)
                .max(0);
            if res == r && !allowed_names.contains(n.name.as_str()) {
                let s = same.entry(*pool).or_default();
                *s = s.saturating_add(free);
            } else if res != r
                && allowed_names.contains(n.name.as_str())
                && (confined || classify(res) == class)
            {
                let o = other.entry((*pool, res.clone())).or_default();
                *o = o.saturating_add(free);
            }
        }
    }
    Unservable {
        pod: p.key(),
        resource: r.to_owned(),
        units,
        cause,
        reason,
        did_you_mean,
        allowed_pools: allowed_pools.iter().map(Pool::name).collect(),
        free_same_name: same
            .into_iter()
            .map(|(pool, free)| Free {
                pool: pool.name(),
                resource: r.to_owned(),
                free,
            })
            .collect(),
        free_other_names: other
            .into_iter()
            .map(|((pool, resource), free)| Free {
                pool: pool.name(),
                resource,
                free,
            })
            .collect(),
        scheduler_message: p.pod_scheduled().and_then(|c| c.message.clone()),
    }
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
/// pods' requests, so that they count nowhere.
pub fn ignore_resources(nodes: &mut [NodeInfo], pods: &mut [PodInfo], globs: &[String]) {
    if globs.is_empty() {
        return;
    }
    let c = Classifier::with_ignore_globs(globs.iter().cloned());
    let keep = |r: &String| c.classify(r) != ResourceClass::NonGpu;
    for n in nodes {
        n.capacity.retain(|r, _| keep(r));
        if let Some(a) = &mut n.allocatable {
            a.retain(|r, _| keep(r));
        }
    }
    for p in pods {
        if p.requests.keys().any(|r| !keep(r)) {
            std::sync::Arc::make_mut(&mut p.requests).retain(|r, _| keep(r));
        }
        p.sources.retain(|s| keep(&s.resource));
    }
}

/// Builds the inventory of a live cluster: all nodes, all pods (paginated lists).
///
/// Errors: [`crate::error::Error::Runtime`] when the API cannot be reached; [`crate::error::Error::Input`] when a
/// node's GPU quantity is not a whole number.
pub async fn from_cluster(client: &Client, ignore: &[String]) -> Result<Inventory> {
    let mut snap = crate::input::snapshot::read(client, false).await?;
    ignore_resources(&mut snap.nodes, &mut snap.pods, ignore);
    build(&snap.nodes, &snap.pods, &snap.policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named("n");
        for (k, v) in labels {
            n.labels.insert((*k).into(), (*v).into());
        }
        n
    }

    #[test]
    fn empty_labelled_pool_gets_a_row() {
        let n = node(&[(LABEL_KEY, "vm-passthrough")]);
        let inv = build(&[n], &[], &PolicyStatus::not_read()).unwrap();
        assert_eq!(inv.rows.len(), 1);
        assert_eq!(inv.rows[0].resource, None);
        assert_eq!(inv.rows[0].pool, "vm-passthrough");
    }
}
