//! The domain model: workload configurations, `nvidia.com/*` resource names, exact
//! Kubernetes quantities, the NVIDIA PCI device-name table, and the slim node record.
//!
//! Every domain fact is encoded once, here, with its public source named in the item's
//! docstring (see `../shared/facts/gpu-operator.md` in the project workspace).

pub mod node;
pub mod pciids;
pub mod quantity;
pub mod resource;
pub mod workload;
