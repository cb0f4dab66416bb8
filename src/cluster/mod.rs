//! cluster (see crate docs).
