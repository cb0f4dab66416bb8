//! gpuwl — checks that NVIDIA GPU Operator workload labels agree with the extended
//! resources nodes advertise, reproduces the sandbox-workload lab on a real local control
//! plane, and explains the split GPU inventory.
//!
//! Layout (a picture of the design):
//! - [`input`]: where nodes and pods come from (kubectl dumps, the live cluster);
//! - [`model`]: workload configs, resource names, quantities, nodes;
//! - [`analysis`]: `check` (and later `inventory`, `explain`) over the model;
//! - [`render`]: text, JSON and YAML output;
//! - [`cluster`]: the local control plane (etcd, kube-apiserver, kube-scheduler, kwok);
//! - [`lab`]: the eight-step scenario played on a cluster;
//! - [`serve`]: the Prometheus exporter (watch → evaluate → metrics);
//! - [`cli`]: the command line.

pub mod analysis;
pub mod cli;
pub mod cluster;
pub mod error;
pub mod input;
pub mod lab;
pub mod model;
pub mod render;
pub mod serve;
pub mod text;
