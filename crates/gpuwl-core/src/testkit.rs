//! What the core's unit tests share (test builds only): nodes as a test states them, in a
//! few words. A module's own fixture stays beside its tests only when it sets something
//! these do not (taints, allocatable without capacity, a product label).

use crate::model::node::NodeInfo;
use crate::model::workload::LABEL_KEY;

impl NodeInfo {
    /// This node with `labels` added.
    pub(crate) fn with_labels(mut self, labels: &[(&str, &str)]) -> NodeInfo {
        for (k, v) in labels {
            self.labels.insert((*k).to_owned(), (*v).to_owned());
        }
        self
    }

    /// This node advertising `res` (resource, quantity): capacity and allocatable both.
    pub(crate) fn advertising(mut self, res: &[(&str, &str)]) -> NodeInfo {
        for (r, q) in res {
            self.capacity.insert((*r).to_owned(), (*q).to_owned());
        }
        self.allocatable = Some(self.capacity.clone());
        self
    }
}

/// A node named `n` with `labels`.
pub(crate) fn labelled(labels: &[(&str, &str)]) -> NodeInfo {
    NodeInfo::named("n").with_labels(labels)
}

/// A node `name`, labelled `nvidia.com/gpu.workload.config=<label>` when given, advertising
/// `res` (capacity = allocatable).
pub(crate) fn gpu_node(name: &str, label: Option<&str>, res: &[(&str, &str)]) -> NodeInfo {
    let n = NodeInfo::named(name).advertising(res);
    match label {
        Some(l) => n.with_labels(&[(LABEL_KEY, l)]),
        None => n,
    }
}
