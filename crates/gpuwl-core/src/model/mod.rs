//! The domain model: workload configurations and pools, `nvidia.com/*` resource names and
//! their families, exact Kubernetes quantities, what a node advertises, the NVIDIA PCI
//! device-name table, physical-GPU equivalents, and the slim node and pod records.
//!
//! Every domain fact is encoded once, here, with its public source named in the item's
//! docstring (summarised in `docs/domain-facts.md`).

pub mod advertise;
pub mod dra;
pub mod equivalents;
pub mod finding;
pub mod gpusim;
pub mod kubevirt;
pub mod kueue;
pub mod launcher;
pub mod node;
pub mod operand;
pub mod operator;
pub mod pciids;
pub mod pod;
pub mod pool;
pub mod quantity;
pub mod resource;
pub mod snapshot;
pub mod workload;
