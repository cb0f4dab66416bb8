//! The slim node record every reader produces.

use std::collections::BTreeMap;

use crate::model::quantity::{Quantity, QuantityError};

/// A node taint (`spec.taints[]`), kept for later scheduling explanations.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Taint {
    /// Taint key, e.g. `nvidia.com/gpu`.
    pub key: String,
    /// Taint value; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute` (verbatim, not validated).
    pub effect: String,
}

/// Which resource map of `status` a quantity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceField {
    /// `status.capacity`.
    Capacity,
    /// `status.allocatable`.
    Allocatable,
}

impl ResourceField {
    /// The JSON path of the map: `status.capacity` or `status.allocatable`.
    pub fn path(self) -> &'static str {
        match self {
            ResourceField::Capacity => "status.capacity",
            ResourceField::Allocatable => "status.allocatable",
        }
    }
}

/// What gpuwl keeps of a Kubernetes Node: name, labels, taints, and the raw
/// `status.capacity` / `status.allocatable` maps (resource name → quantity text exactly as
/// the API or dump wrote it; numbers in YAML/JSON are kept as their decimal text).
///
/// Quantities are parsed on demand ([`NodeInfo::quantity`]) so that one malformed value
/// does not make the node unreadable. `allocatable` is `None` when the node has no
/// allocatable map at all (as opposed to an empty one). New fields may be added; build
/// values with `..Default::default()`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (`kubectl cordon`): the scheduler's NodeUnschedulable filter
    /// keeps pods off unless they tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
    /// `status.capacity`, raw quantity text per resource name.
    pub capacity: BTreeMap<String, String>,
    /// `status.allocatable`, raw quantity text per resource name; `None` when absent.
    pub allocatable: Option<BTreeMap<String, String>>,
}

impl NodeInfo {
    /// A node with just a name.
    pub fn named(name: impl Into<String>) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            ..Default::default()
        }
    }

    /// The raw text of `resource` in `field`, if present.
    pub fn raw(&self, field: ResourceField, resource: &str) -> Option<&str> {
        match field {
            ResourceField::Capacity => self.capacity.get(resource),
            ResourceField::Allocatable => self.allocatable.as_ref()?.get(resource),
        }
        .map(String::as_str)
    }

    /// The parsed quantity of `resource` in `field`: `None` when absent,
    /// `Some(Err(_))` when the text is not a valid quantity.
    pub fn quantity(
        &self,
        field: ResourceField,
        resource: &str,
    ) -> Option<Result<Quantity, QuantityError>> {
        self.raw(field, resource).map(Quantity::parse)
    }

    /// The field that decides whether a resource is advertised: `allocatable` when the
    /// node has an allocatable map, else `capacity`.
    pub(crate) fn advertising_field(&self) -> ResourceField {
        if self.allocatable.is_some() {
            ResourceField::Allocatable
        } else {
            ResourceField::Capacity
        }
    }

    /// All resource names present in capacity or allocatable, sorted, without duplicates.
    pub(crate) fn resource_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.capacity.keys().map(String::as_str).collect();
        if let Some(a) = &self.allocatable {
            v.extend(a.keys().map(String::as_str));
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertising_field_and_quantities() {
        let mut n = NodeInfo::named("n");
        n.capacity.insert("nvidia.com/gpu".into(), "4".into());
        assert_eq!(n.advertising_field(), ResourceField::Capacity);
        assert_eq!(n.raw(ResourceField::Allocatable, "nvidia.com/gpu"), None);
        n.allocatable = Some(BTreeMap::from([("nvidia.com/gpu".into(), "x".into())]));
        assert_eq!(n.advertising_field(), ResourceField::Allocatable);
        assert!(matches!(
            n.quantity(ResourceField::Allocatable, "nvidia.com/gpu"),
            Some(Err(_))
        ));
        assert_eq!(
            n.quantity(ResourceField::Capacity, "nvidia.com/gpu")
                .unwrap()
                .unwrap()
                .to_i64(),
            Some(4)
        );
        assert_eq!(n.resource_names(), ["nvidia.com/gpu"]);
    }
}
