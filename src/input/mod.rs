//! Where the data comes from: `kubectl get … -o json|yaml` dumps (a file or stdin), or the
//! live cluster. The readers of documents are the core's ([`gpuwl_core::decode`]: pure
//! functions of bytes and JSON values, named `gpuwl_core::decode::…` at each call site,
//! not re-exported here); this module adds the live cluster. Readers yield the model's types
//! ([`gpuwl_core::model::node::NodeInfo`], [`gpuwl_core::model::pod::PodInfo`], DRA objects, the
//! ClusterPolicy, KubeVirt's `permittedHostDevices`).
//!
//! - [`document`], [`dump`], [`mustgather`], [`limits`]: the core's readers as they are
//!   (format sniffing and the streamed list entry point; the node dump; the GPU Operator's
//!   must-gather bundle for `gpuwl triage`; the process's reader limits);
//! - [`pods`], [`dra`], [`clusterpolicy`], [`kubevirt`], [`operands`], [`virt`]: the core's
//!   readers of pods, DRA objects, the ClusterPolicy, the KubeVirt/HyperConverged CRs,
//!   operand pods and VMs, plus their live reads;
//! - [`live`]: cluster access — the cluster flags, the one client builder (one-shot or
//!   watch), the one paging loop, the API-error mapping — and the node list;
//! - [`snapshot`]: one read of everything the analyses need from a live cluster;
//! - [`gather`]: a command's data source (files, a snapshot file or the live cluster)
//!   into one set of records, the first step of its pipeline (with the object `explain`
//!   names on the live cluster: [`gather::object`]);
//! - [`snapshot_file`]: the same, written to and read from one file (`gpuwl snapshot`).

pub mod clusterpolicy;
pub mod dra;
pub mod gather;
pub mod kubevirt;
pub mod kueue;
pub mod live;
pub mod operands;
pub mod pods;
pub mod snapshot;
pub mod snapshot_file;
pub mod virt;
