//! render (see crate docs).
