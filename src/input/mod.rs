//! input (see crate docs).
