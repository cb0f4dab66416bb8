//! gpuwl-core — the layers of gpuwl that need no cluster: the domain model, the readers of
//! documents into it, the analyses over it and their output. No kube, tokio or HTTP
//! dependency (docs/architecture.md, "Crates"); the `gpuwl` crate adds the live cluster,
//! the local control plane, the engines that write to a cluster and the command line.
//!
//! Layers, lowest first (each module may use its own layer and the ones below, never one
//! above; `scripts/layers.py` checks it):
//! - [`text`], [`error`]: message helpers and escaping; the error type and exit codes;
//! - [`model`]: workload configs, resource names, quantities, nodes, pods, pools, the GPU
//!   Operator's ClusterPolicy and node state, DRA and KubeVirt objects;
//! - [`decode`]: dumps, API objects and must-gather bundles into model records;
//! - [`analysis`]: `check`, `inventory`, `explain`, `triage`, the KubeVirt check, DRA and
//!   admission, each over the model only (they take data, never a client);
//! - [`render`]: text, JSON, YAML and CSV output of the analyses.

#![deny(missing_docs)]
// The docs of pub items name the core's own pub(crate) helpers where they explain how a
// result is made; `cargo doc --document-private-items` shows those.
#![allow(rustdoc::private_intra_doc_links)]

pub mod analysis;
pub mod decode;
pub mod error;
pub mod model;
pub mod render;
#[cfg(test)]
mod testkit;
pub mod text;
