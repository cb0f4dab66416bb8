//! analysis (see crate docs).
pub mod explain;
pub mod inventory;
