//! The test kit: what the integration tests share, each in one place.
//!
//! - [`run`]: the gpuwl binary as a CLI test runs it (`gpuwl`, `gpuwl_ok`,
//!   `gpuwl_explained`), and an API server that never answers;
//! - [`live`]: the local control plane in a live test: a test's own cluster
//!   (`own_cluster`, `ClusterDown`), a lab on it (`lab_cluster`), a kube client for a
//!   kubeconfig (`client_for`), and the gate that admits a few live tests at once
//!   (`one_cluster_at_a_time`, `the_machine_alone`);
//! - [`kubectl`]: the one `kubectl` (exit code, stdout, stderr) and `kubectl_ok`;
//! - [`builders`]: node, pod and VMI objects, and a node created with the resources it
//!   advertises;
//! - [`seed`]: the lab's seed files and the comparison of two labs' copies;
//! - [`fake_api`]: the Kubernetes API server in memory of the fast tier (the crate's own
//!   unit tests include the same file: `src/testing.rs`).
//!
//! A test file imports what it uses from `crate::kit`; a helper that a second test file
//! needs moves here rather than being copied.

pub mod builders;
pub mod fake_api;
pub mod kubectl;
pub mod live;
pub mod run;
pub mod seed;

pub use builders::*;
pub use kubectl::*;
pub use live::*;
pub use run::*;
pub use seed::*;
