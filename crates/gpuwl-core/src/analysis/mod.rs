//! Analyses over the model:
//! - [`check`]: does each node's workload label agree with the GPU resources it advertises?
//! - [`inventory`]: the GPU inventory split per pool × resource name, pending demand, and
//!   the demand no pool can serve;
//! - [`explain`]: why one pod or VM waits, as a [`diagnosis::Diagnosis`] from named rules;
//! - [`kubevirt`]: KubeVirt's `permittedHostDevices` generated from and checked against
//!   what the nodes advertise;
//! - [`kueue`], [`kueue_usage`]: the quota layer (Kueue's flavors against the nodes, a
//!   workload's quota cause, the per-ClusterQueue × flavor inventory);
//! - [`triage`]: one report from a GPU Operator must-gather bundle (check, operator state,
//!   operand DaemonSets not ready, pending GPU pods, what the bundle lacks);
//! - [`policy`]: the ValidatingAdmissionPolicy (and its binding) that refuses a mistyped
//!   workload or vGPU label at the API server (`gpuwl policy`);
//! - [`twin`]: what `gpuwl whatif` and `gpuwl plan` decide (a relabelled node's names, the
//!   fewest relabels for the pending demand, the twin's report and verdict).
//!
//! Shared parts: [`fit`] (the scheduler's filters node by node: cordon, taints,
//! selector/affinity, every resource), [`placement`] (which nodes a pod's constraints allow), [`names`] (names
//! close to a requested one: the same hardware under another naming rule, or a typo),
//! [`usage`] (per node × resource: allocatable, allocated, free — the one source of the
//! numbers both inventory and explain print).

pub mod admission;
pub mod check;
pub mod diagnosis;
pub mod dra;
pub mod dra_cel;
pub mod dra_hints;
pub mod dra_match;
pub mod explain;
pub mod explain_scope;
pub mod exporter;
pub mod fit;
pub mod inventory;
pub mod kubevirt;
pub mod kueue;
pub mod kueue_usage;
pub mod names;
pub mod orphans;
pub mod placement;
pub mod policy;
pub mod relabel;
pub mod triage;
pub mod twin;
pub mod usage;
pub mod verdict;
