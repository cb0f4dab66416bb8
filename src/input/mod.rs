//! Where nodes come from: a `kubectl get nodes -o json|yaml` dump (file or stdin), or the
//! live cluster. Every reader yields [`crate::model::node::NodeInfo`].
//!
//! - [`dump`]: streaming JSON (a serde visitor over `items`) and YAML (serde-saphyr's
//!   streaming deserializer), detected by content;
//! - [`live`]: a kube-rs client from a kubeconfig and a paginated node list.

pub mod clusterpolicy;
pub mod document;
pub mod dra;
pub mod dump;
pub mod kubevirt;
pub mod live;
pub mod pods;
pub mod snapshot;

pub use dump::{Source, for_each_node, read_nodes};
