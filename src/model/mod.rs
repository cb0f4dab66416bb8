//! model (see crate docs).
