//! Pools: the workload config the GPU Operator applies to a node, and how sure that is.
//!
//! A node's pool is its effective workload config ([`effective_workload`]: the label when
//! the operator honours it, else the ClusterPolicy's default, else what the node's
//! `gpu.deploy.*` labels show; NVIDIA/gpu-operator `controllers/state_manager.go`,
//! `api/nvidia/v1/clusterpolicy_types.go`; docs/domain-facts.md §1, §7). When none of those
//! is known, the CRD default [`crate::model::workload::DEFAULT_WORKLOAD`] (`container`)
//! is a guess, and the pool says so. Nodes of different pools advertise different resource
//! names and cannot lend to each other.

use serde::Serialize;

use crate::model::node::NodeInfo;
use crate::model::operator::{ClusterPolicy, LabelState, WorkloadSource, effective_workload};
use crate::model::workload::WorkloadConfig;

/// How sure a node's pool is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolOrigin {
    /// Decided by what the operator follows: a valid label it honours, the ClusterPolicy,
    /// or the node's deploy labels (see [`WorkloadSource`] per node).
    Known,
    /// No label, and nothing else known: the CRD default is assumed.
    DefaultNoLabel,
    /// A label value that is not one of the three, and nothing else known: the operator
    /// silently uses its default, assumed to be the CRD default.
    DefaultInvalidLabel,
}

/// A pool: the effective workload config and how sure it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pool {
    /// The workload the operator applies.
    pub workload: WorkloadConfig,
    /// Known, or an assumed default (and why).
    pub origin: PoolOrigin,
}

impl Pool {
    /// The pool of `node` under `policy` (`None`: no ClusterPolicy known).
    pub fn of(node: &NodeInfo, policy: Option<&ClusterPolicy>) -> Pool {
        let e = effective_workload(node, policy);
        let origin = match (e.source, e.label) {
            (WorkloadSource::Default, LabelState::Invalid) => PoolOrigin::DefaultInvalidLabel,
            (WorkloadSource::Default, _) => PoolOrigin::DefaultNoLabel,
            _ => PoolOrigin::Known,
        };
        Pool {
            workload: e.workload,
            origin,
        }
    }

    /// Display name: `vm-passthrough`, `container (default: no label)`,
    /// `container (default: invalid label)`.
    pub fn name(&self) -> String {
        match self.origin {
            PoolOrigin::Known => self.workload.as_str().to_owned(),
            PoolOrigin::DefaultNoLabel => format!("{} (default: no label)", self.workload),
            PoolOrigin::DefaultInvalidLabel => {
                format!("{} (default: invalid label)", self.workload)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::workload::LABEL_KEY;

    use crate::testkit::labelled as node;

    #[test]
    fn pools() {
        assert_eq!(
            Pool::of(&node(&[]), None).name(),
            "container (default: no label)"
        );
        assert_eq!(
            Pool::of(&node(&[(LABEL_KEY, "vm_passthrough")]), None).name(),
            "container (default: invalid label)"
        );
        assert_eq!(
            Pool::of(&node(&[(LABEL_KEY, "vm-vgpu")]), None).name(),
            "vm-vgpu"
        );
    }
}
