//! input (see crate docs).
pub mod pods;
