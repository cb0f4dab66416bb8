//! The integration tests, as one test binary (one link of gpuwl, kube and k8s-openapi
//! instead of one per file). Data lives beside this directory: tests/data and
//! tests/shared-cases.
//!
//! Tests that start the local control plane (`gpuwl cluster`, `gpuwl lab`) are
//! `#[ignore = "needs local control plane"]`, so `cargo test` stays quick;
//! `cargo test -- --ignored` runs them (scripts/test.sh runs both).

mod kit;

mod admission;
mod bounded_readers;
mod check_cli;
mod check_live;
mod check_reader;
mod cli_misc;
mod cluster;
mod cluster_state;
mod differential;
mod differential_dra;
mod dra;
mod explain;
mod explain_cases;
mod explain_dra;
mod explain_unused;
mod explain_vm;
mod first_minutes;
mod first_minutes4;
mod gate;
mod gpu_operator;
mod hostile_input;
mod inventory;
mod inventory_live;
mod kubevirt;
mod kubevirt_differential;
mod kubevirt_live;
mod kueue_live;
mod lab;
mod mig_sharing;
mod monitoring;
mod operands;
mod operator;
mod operator_model;
mod operator_model_cli;
mod policy;
mod readme;
mod relabel;
mod release;
mod replay_cases;
mod serve;
mod triage_hostile;
mod triage_live;
mod verdict;
mod whatif;
mod write_paths;
