//! What a node advertises: a resource counts when its allocatable quantity (capacity when
//! the node has no allocatable map) is a whole number > 0. A resource listed with `0` is a
//! stale key the kubelet keeps after its device plugin left, not an offer
//! (kubernetes/kubernetes `pkg/kubelet/nodestatus/setters.go`; docs/domain-facts.md §4).

use crate::error::{Error, Result};
use crate::model::node::{NodeInfo, ResourceField};
use crate::model::resource::classify;
use crate::text::cut;

/// A node's GPU quantity in whole units.
fn units(node: &NodeInfo, field: ResourceField, resource: &str) -> Result<Option<i64>> {
    match node.quantity(field, resource) {
        None => Ok(None),
        Some(Ok(q)) => match q.to_count() {
            Ok(n) => Ok(Some(n)),
            Err(why) => Err(Error::Input(format!(
                "node {}: {}[{}]: {} {why}",
                node.name,
                field.path(),
                cut(resource),
                cut(node.raw(field, resource).unwrap_or(""))
            ))),
        },
        Some(Err(e)) => Err(Error::Input(format!(
            "node {}: {}[{}]: {} is not a quantity ({e})",
            node.name,
            field.path(),
            cut(resource),
            cut(node.raw(field, resource).unwrap_or(""))
        ))),
    }
}

/// (capacity, allocatable) of `resource` on `node`, in units; allocatable falls back to
/// capacity when the node has no allocatable map.
///
/// Errors: [`Error::Input`] naming the node and field when a value is not a whole number.
pub fn node_units(node: &NodeInfo, resource: &str) -> Result<(i64, i64)> {
    let cap = units(node, ResourceField::Capacity, resource)?.unwrap_or(0);
    let alloc = match node.allocatable {
        Some(_) => units(node, ResourceField::Allocatable, resource)?.unwrap_or(0),
        None => cap,
    };
    Ok((cap, alloc))
}

/// The GPU resource names `node` lists (any quantity, zeros included).
pub fn gpu_resources(node: &NodeInfo) -> Vec<&str> {
    node.resource_names()
        .into_iter()
        .filter(|r| classify(r).is_gpu())
        .collect()
}

/// The GPU resources `node` advertises, with their allocatable units, sorted by name.
/// Stale zeros and malformed quantities are left out.
pub(crate) fn advertised_gpus(node: &NodeInfo) -> Vec<(&str, i64)> {
    gpu_resources(node)
        .into_iter()
        .filter_map(|r| match node_units(node, r) {
            Ok((_, a)) if a > 0 => Some((r, a)),
            _ => None,
        })
        .collect()
}
