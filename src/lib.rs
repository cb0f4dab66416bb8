//! gpuwl — checks that NVIDIA GPU Operator workload labels agree with the extended
//! resources nodes advertise, shows the split GPU inventory, explains why GPU pods and
//! KubeVirt VMs wait, generates and checks KubeVirt's `permittedHostDevices`, serves the
//! findings as Prometheus metrics, and plays the sandbox-workload lab on a real local
//! control plane.
//!
//! Two crates (docs/architecture.md, "Crates"): `gpuwl-core` ([`gpuwl_core`]) holds what
//! needs no cluster — [`text`](gpuwl_core::text), [`error`](gpuwl_core::error), [`model`](gpuwl_core::model), the document readers, [`analysis`](gpuwl_core::analysis)
//! and the core of [`render`] — with no kube, tokio or HTTP dependency; this crate adds
//! the live cluster, the local control plane, the engines and the command line; code
//! names the core's modules as `gpuwl_core::model::…` (no re-export).
//!
//! Layout (a picture of the design), in data-flow order:
//! - [`input`]: where the data comes from — kubectl dumps of nodes, pods, DRA objects and
//!   CRs (streamed; the core's readers), and the live cluster through one access module
//!   ([`input::live`]: `--kubeconfig`/`--context`/`--request-timeout`, one client builder,
//!   one paging loop, one API-error mapping);
//! - [`model`](gpuwl_core::model): workload configs, resource names, quantities, nodes, pods, pools, the GPU
//!   Operator's ClusterPolicy and node state, DRA and KubeVirt objects (core);
//! - [`analysis`](gpuwl_core::analysis): `check`, `inventory`, `explain`, the KubeVirt check, DRA and the label
//!   policy (`gpuwl policy`), the twin's decisions (what a relabel advertises, plan's search,
//!   the whatif report), each over the model only (they take data, never a client; core);
//! - [`render`]: text, JSON, YAML and CSV output (the core's, whatif's among them, and the
//!   reports of the cluster, lab and relabel);
//! - [`cluster`]: the local control plane (etcd, kube-apiserver, kube-controller-manager,
//!   kube-scheduler, kwok), its recipe one value per component ([`cluster::recipe`]);
//! - [`lab`]: the eight-step scenario (and the DRA ninth) played on a cluster;
//! - [`twin`]: a copy of a cluster's GPU side on a local control plane, where `whatif`
//!   tries a relabel and `plan` verifies its proposal;
//! - [`relabel`]: a relabel carried out on a live cluster step by step (`gpuwl relabel`);
//! - [`serve`]: the Prometheus exporter (watch → evaluate → metrics);
//! - [`cli`]: the command line;
//! - [`error`](gpuwl_core::error): the errors and exit codes; [`text`](gpuwl_core::text): message helpers both use;
//!   [`files`]: atomic file writing; [`pki`]: the one certificate generator (the local
//!   cluster's PKI and the admission guard's serving certificate).

#![deny(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod files;
pub mod input;
pub mod lab;
pub mod pki;
pub mod relabel;
pub mod render;
pub mod serve;
pub mod signals;
pub mod twin;

#[cfg(test)]
mod testing;
