//! Reading documents into model records: `kubectl get … -o json|yaml` dumps (a file or
//! stdin), API objects and responses, and the GPU Operator's must-gather bundle. Pure
//! functions of bytes and JSON values (and of files read with `std`): the live cluster is
//! read by gpuwl's `input` module, which re-exports these readers beside its API calls.
//!
//! - [`document`]: what every reader shares — format sniffing (JSON or YAML by the first
//!   byte, BOM, size guard), the streamed list entry point, the YAML options and messages;
//! - [`limits`]: the process's bounds on bytes read, bytes per file or archive member
//!   and items per list (`--max-input-bytes`, `--max-member-bytes`, `--max-items`);
//! - [`dump`]: the node dump (streaming JSON visitor over `items`, YAML through
//!   serde-saphyr's streaming deserializer);
//! - [`pods`], [`dra`], [`clusterpolicy`], [`kubevirt`], [`operands`]: pods, DRA objects,
//!   the GPU Operator's ClusterPolicy, the KubeVirt/HyperConverged CRs and the operand
//!   pods, from files or API objects;
//! - [`virt`]: a VM or VMI with its launcher pod ([`virt::VmObjects`]);
//! - [`mustgather`]: the GPU Operator's must-gather bundle (`gpuwl triage`);
//! - [`object`]: the object `explain` names on a live cluster ([`object::Object`]), read
//!   beside the [`crate::model::snapshot::Snapshot`] it is explained against.

pub mod clusterpolicy;
pub mod document;
pub mod dra;
pub mod dump;
pub mod kubevirt;
pub mod kueue;
pub mod limits;
pub mod mustgather;
pub mod object;
pub mod operands;
pub mod pods;
mod skim;
pub mod virt;

pub use dump::{Source, for_each_node, read_nodes};
