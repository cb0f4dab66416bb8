//! Pools: the workload config the GPU Operator applies to a node, and how the node got it.
//!
//! A node's pool is the value of [`LABEL_KEY`]; a node without it, or with a value that is
//! not one of the three, gets the operator's default [`DEFAULT_WORKLOAD`] (`container`),
//! silently (NVIDIA/gpu-operator `controllers/state_manager.go`,
//! `api/nvidia/v1/clusterpolicy_types.go`; docs/domain-facts.md §1). Nodes of different
//! pools advertise different resource names and cannot lend to each other.

use serde::Serialize;

use crate::model::node::NodeInfo;
use crate::model::workload::{DEFAULT_WORKLOAD, LABEL_KEY, WorkloadConfig};

/// How a node got its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolOrigin {
    /// The node carries a valid [`LABEL_KEY`] value.
    Label,
    /// No label: the operator's default workload applies.
    DefaultNoLabel,
    /// A label value that is not one of the three: the operator silently uses the default.
    DefaultInvalidLabel,
}

/// A pool: the effective workload config and how nodes got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pool {
    /// The workload the operator applies.
    pub workload: WorkloadConfig,
    /// Label, or the default (and why).
    pub origin: PoolOrigin,
}

impl Pool {
    /// The pool of `node`: its label value, else [`DEFAULT_WORKLOAD`] marked by origin.
    pub fn of(node: &NodeInfo) -> Pool {
        match node.label(LABEL_KEY) {
            None => Pool {
                workload: DEFAULT_WORKLOAD,
                origin: PoolOrigin::DefaultNoLabel,
            },
            Some(v) => match v.parse::<WorkloadConfig>() {
                Ok(w) => Pool {
                    workload: w,
                    origin: PoolOrigin::Label,
                },
                Err(_) => Pool {
                    workload: DEFAULT_WORKLOAD,
                    origin: PoolOrigin::DefaultInvalidLabel,
                },
            },
        }
    }

    /// Display name: `container`, `container (default: no label)`,
    /// `container (default: invalid label)`.
    pub fn name(&self) -> String {
        match self.origin {
            PoolOrigin::Label => self.workload.as_str().to_owned(),
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

    fn node(labels: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named("n");
        for (k, v) in labels {
            n.labels.insert((*k).into(), (*v).into());
        }
        n
    }

    #[test]
    fn pools() {
        assert_eq!(Pool::of(&node(&[])).name(), "container (default: no label)");
        assert_eq!(
            Pool::of(&node(&[(LABEL_KEY, "vm_passthrough")])).name(),
            "container (default: invalid label)"
        );
        assert_eq!(Pool::of(&node(&[(LABEL_KEY, "vm-vgpu")])).name(), "vm-vgpu");
    }
}
