//! analysis (see crate docs).
