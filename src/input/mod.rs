//! Where the data comes from: `kubectl get … -o json|yaml` dumps (a file or stdin), or the
//! live cluster. Readers yield the model's types ([`crate::model::node::NodeInfo`],
//! [`crate::model::pod::PodInfo`], DRA objects, the ClusterPolicy, KubeVirt's
//! `permittedHostDevices`).
//!
//! - [`document`]: what every reader shares — format sniffing (JSON or YAML by the first
//!   byte, BOM, size guard), the streamed list entry point, the YAML options and messages;
//! - [`dump`]: the node dump (streaming JSON visitor over `items`, YAML through
//!   serde-saphyr's streaming deserializer);
//! - [`pods`], [`dra`], [`clusterpolicy`], [`kubevirt`]: pods, DRA objects, the GPU
//!   Operator's ClusterPolicy and the KubeVirt/HyperConverged CRs, from files or the cluster;
//! - [`live`]: cluster access — the cluster flags, the one client builder (one-shot or
//!   watch), the one paging loop, the API-error mapping — and the node list;
//! - [`mustgather`]: the GPU Operator's must-gather bundle (`gpuwl triage`);
//! - [`snapshot`]: one read of everything the analyses need from a live cluster;
//! - [`snapshot_file`]: the same, written to and read from one file (`gpuwl snapshot`).

pub mod clusterpolicy;
pub mod document;
pub mod dra;
pub mod dump;
pub mod kubevirt;
pub mod live;
pub mod mustgather;
pub mod operands;
pub mod pods;
pub mod snapshot;
pub mod snapshot_file;
pub mod virt;

pub use dump::{Source, for_each_node, read_nodes};
