//! Analyses over the model. [`check`]: does each node's workload label agree with the GPU
//! resources it advertises?

pub mod check;
pub mod explain;
pub mod inventory;
