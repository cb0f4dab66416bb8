//! Per node × extended resource: capacity, allocatable, allocated and free units, and the
//! pods that hold them. This is the one source of these numbers: `inventory` sums it per
//! pool, `explain` reads it per node and per pool, so both print the same figures for the
//! same input.
//!
//! Rules:
//! - capacity / allocatable as [`node_units`] reads them (allocatable falls back to
//!   capacity when a node has no allocatable map); allocatable is the number of healthy
//!   devices, not of free ones (NVIDIA/k8s-device-plugin#452; docs/domain-facts.md §4);
//! - allocated: the effective requests ([`PodInfo::requests`]) of pods bound to the node and
//!   not `Succeeded`/`Failed` — the pod being explained included once it is bound;
//! - free = allocatable − allocated (negative when over-committed);
//! - every sum saturates at `i64::MAX` instead of wrapping (quantities in a dump can be as
//!   large as 2^63−1), and [`Usage::saturated`] says when that happened.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::advertise::node_units;
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::pod::{PodInfo, is_extended_resource};
use crate::model::pool::Pool;

/// A pod holding units of a resource on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// Units it requests (effective request).
    pub units: i64,
}

/// One node × resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// `status.capacity` units (0 when the node does not list the resource).
    pub capacity: i64,
    /// `status.allocatable` units (0 when absent or stale).
    pub allocatable: i64,
    /// Units requested by bound, non-terminal pods.
    pub allocated: i64,
    /// Whether the node lists the resource at all (in capacity or allocatable).
    pub listed: bool,
    /// The pods holding the units, by pod key.
    pub holders: Vec<Holder>,
}

impl Cell {
    /// allocatable − allocated, saturating; negative when over-committed.
    pub fn free(&self) -> i64 {
        self.allocatable.saturating_sub(self.allocated)
    }

    /// Whether the node advertises the resource (allocatable > 0).
    pub fn advertised(&self) -> bool {
        self.allocatable > 0
    }

    /// Whether the node lists the resource with allocatable 0 and nothing holds it: a stale
    /// key left by a device plugin that went away.
    pub fn stale(&self) -> bool {
        self.listed && self.allocatable == 0 && self.allocated == 0
    }
}

/// Sums of [`Cell`]s over the nodes of one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Totals {
    /// Nodes of the pool advertising the resource (allocatable > 0).
    pub nodes: usize,
    /// Σ capacity.
    pub capacity: i64,
    /// Σ allocatable.
    pub allocatable: i64,
    /// Σ allocated.
    pub allocated: i64,
}

impl Totals {
    /// Σ allocatable − Σ allocated, saturating (what inventory prints as FREE).
    pub fn free(&self) -> i64 {
        self.allocatable.saturating_sub(self.allocated)
    }
}

/// The usage table of a set of nodes and pods.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pools: BTreeMap<String, Pool>,
    cells: BTreeMap<(String, String), Cell>,
    /// Whether pods were given (allocations known).
    pub pods_known: bool,
    /// Pods holding extended resources on nodes that are not in the node list
    /// (`ns/name on node`); not counted anywhere.
    pub unknown_nodes: BTreeSet<String>,
    /// Whether any sum saturated at `i64::MAX`.
    pub saturated: bool,
    /// Node quantities that are not whole numbers, one line each (`node gpu-1:
    /// status.allocatable["nvidia.com/gpu"]: "four" is not a quantity`): those node ×
    /// resource cells are left out, the rest is counted.
    pub skipped: Vec<String>,
}

impl Usage {
    /// Builds the table (pools under `policy`, `None` when no ClusterPolicy is known):
    /// every extended resource each node lists, plus every extended
    /// resource a bound, non-terminal pod holds on a known node. `pods` is `None` when
    /// allocations are unknown (then every `allocated` is 0 and [`Usage::pods_known`] is
    /// false).
    ///
    /// A listed extended resource whose quantity is not a whole non-negative number is
    /// left out of the table and named in [`Usage::skipped`]; the rest is counted.
    pub fn build(
        nodes: &[NodeInfo],
        pods: Option<&[PodInfo]>,
        policy: Option<&ClusterPolicy>,
    ) -> Usage {
        let mut u = Usage {
            pods_known: pods.is_some(),
            ..Usage::default()
        };
        for n in nodes {
            u.pools.insert(n.name.clone(), Pool::of(n, policy));
            for r in n.resource_names() {
                if !is_extended_resource(r) {
                    continue;
                }
                let (capacity, allocatable) = match node_units(n, r) {
                    Ok(u) => u,
                    Err(e) => {
                        u.skipped.push(e.to_string());
                        continue;
                    }
                };
                u.cells.insert(
                    (n.name.clone(), r.to_owned()),
                    Cell {
                        capacity,
                        allocatable,
                        listed: true,
                        ..Cell::default()
                    },
                );
            }
        }
        for p in pods.unwrap_or(&[]).iter().filter(|p| !p.is_terminal()) {
            let Some(node) = &p.node_name else { continue };
            if p.requests.is_empty() {
                continue;
            }
            if !u.pools.contains_key(node) {
                u.unknown_nodes.insert(format!("{} on {node}", p.key()));
                continue;
            }
            for (r, units) in p.requests.iter() {
                let c = u.cells.entry((node.clone(), r.clone())).or_default();
                let (sum, over) = c.allocated.overflowing_add(*units);
                c.allocated = if over { i64::MAX } else { sum };
                u.saturated |= over;
                c.holders.push(Holder {
                    pod: p.key(),
                    units: *units,
                });
            }
        }
        u
    }

    /// The cell of `node` × `resource`, if the node lists it or a pod holds it there.
    pub fn cell(&self, node: &str, resource: &str) -> Option<&Cell> {
        self.cells.get(&(node.to_owned(), resource.to_owned()))
    }

    /// The pool of a known node.
    pub fn pool_of(&self, node: &str) -> Option<Pool> {
        self.pools.get(node).copied()
    }

    /// Every cell, by node name then resource name.
    pub(crate) fn cells(&self) -> impl Iterator<Item = (&str, &str, &Cell)> {
        self.cells
            .iter()
            .map(|((n, r), c)| (n.as_str(), r.as_str(), c))
    }

    /// The nodes advertising `resource` (allocatable > 0), by name, with their cells.
    pub fn advertisers<'a>(
        &'a self,
        resource: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a Cell)> + 'a {
        self.cells()
            .filter(move |(_, r, c)| *r == resource && c.advertised())
            .map(|(n, _, c)| (n, c))
    }

    /// Every resource some node advertises (allocatable > 0), sorted, once each.
    pub(crate) fn advertised_names(&self) -> BTreeSet<&str> {
        self.cells()
            .filter(|(_, _, c)| c.advertised())
            .map(|(_, r, _)| r)
            .collect()
    }

    /// The sums over the nodes of `pool` for `resource` (inventory's row numbers).
    pub(crate) fn pool_totals(&self, pool: Pool, resource: &str) -> Totals {
        let mut t = Totals::default();
        for (n, r, c) in self.cells() {
            if r != resource || self.pools.get(n) != Some(&pool) {
                continue;
            }
            if c.advertised() {
                t.nodes += 1;
            }
            t.capacity = t.capacity.saturating_add(c.capacity);
            t.allocatable = t.allocatable.saturating_add(c.allocatable);
            t.allocated = t.allocated.saturating_add(c.allocated);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pod::ObjectKind;

    fn node(name: &str, label: &str, res: &[(&str, &str)]) -> NodeInfo {
        crate::testkit::gpu_node(name, Some(label), res)
    }

    fn pod(name: &str, node: Option<&str>, phase: &str, req: &[(&str, i64)]) -> PodInfo {
        PodInfo {
            kind: ObjectKind::Pod,
            namespace: "ns".into(),
            name: name.into(),
            node_name: node.map(Into::into),
            phase: Some(phase.into()),
            node_selector: BTreeMap::new(),
            required_affinity: None,
            tolerations: Default::default(),
            conditions: vec![],
            requests: std::sync::Arc::new(req.iter().map(|(r, u)| ((*r).into(), *u)).collect()),
            sources: vec![],
            spec_problems: Vec::new(),
            resource_claims: vec![],
            ..Default::default()
        }
    }

    #[test]
    fn bound_running_pods_hold_units_per_node_and_pool() {
        let nodes = [
            node("a", "container", &[("nvidia.com/gpu", "4"), ("cpu", "8")]),
            node("b", "container", &[("nvidia.com/gpu", "2")]),
            node("c", "vm-vgpu", &[("nvidia.com/gpu", "1")]),
        ];
        let pods = [
            pod("p1", Some("a"), "Running", &[("nvidia.com/gpu", 1)]),
            pod("p2", Some("a"), "Succeeded", &[("nvidia.com/gpu", 3)]),
            pod("p3", None, "Pending", &[("nvidia.com/gpu", 1)]),
            pod("p4", Some("gone"), "Running", &[("nvidia.com/gpu", 1)]),
            pod("p5", Some("c"), "Running", &[("nvidia.com/gpu", 1)]),
        ];
        let u = Usage::build(&nodes, Some(&pods), None);
        let a = u.cell("a", "nvidia.com/gpu").unwrap();
        assert_eq!((a.allocatable, a.allocated, a.free()), (4, 1, 3));
        assert_eq!(a.holders[0].pod, "ns/p1");
        assert!(u.cell("a", "cpu").is_none(), "not an extended resource");
        let container = u.pool_totals(Pool::of(&nodes[0], None), "nvidia.com/gpu");
        assert_eq!(
            (container.nodes, container.allocatable, container.free()),
            (2, 6, 5)
        );
        let vgpu = u.pool_totals(Pool::of(&nodes[2], None), "nvidia.com/gpu");
        assert_eq!((vgpu.allocatable, vgpu.free()), (1, 0));
        assert_eq!(
            u.unknown_nodes.iter().collect::<Vec<_>>(),
            ["ns/p4 on gone"]
        );
        assert!(!u.saturated);
    }

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let max = i64::MAX.to_string();
        let nodes = [
            node("a", "container", &[("nvidia.com/gpu", &max)]),
            node("b", "container", &[("nvidia.com/gpu", &max)]),
        ];
        let pods = [
            pod("p1", Some("a"), "Running", &[("nvidia.com/gpu", i64::MAX)]),
            pod("p2", Some("a"), "Running", &[("nvidia.com/gpu", i64::MAX)]),
        ];
        let u = Usage::build(&nodes, Some(&pods), None);
        assert_eq!(u.cell("a", "nvidia.com/gpu").unwrap().allocated, i64::MAX);
        assert!(u.saturated);
        let t = u.pool_totals(Pool::of(&nodes[0], None), "nvidia.com/gpu");
        assert_eq!((t.allocatable, t.allocated), (i64::MAX, i64::MAX));
        assert_eq!(t.free(), 0);
    }

    #[test]
    fn stale_zero_is_listed_not_advertised() {
        let nodes = [node(
            "a",
            "vm-passthrough",
            &[("nvidia.com/gpu", "0"), ("nvidia.com/GA102GL_A10", "2")],
        )];
        let u = Usage::build(&nodes, None, None);
        assert!(u.cell("a", "nvidia.com/gpu").unwrap().stale());
        assert_eq!(
            u.advertised_names().into_iter().collect::<Vec<_>>(),
            ["nvidia.com/GA102GL_A10"]
        );
        assert!(!u.pods_known);
    }
}
