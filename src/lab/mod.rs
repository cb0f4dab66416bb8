//! lab (see crate docs).
