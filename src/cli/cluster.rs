//! `gpuwl cluster`: arguments and entry point (placeholder until its issue lands).

use crate::error::{Error, ExitStatus, Result};

/// Arguments of `gpuwl cluster`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `gpuwl cluster`.
pub fn run(_args: &Args) -> Result<ExitStatus> {
    Err(Error::Runtime("cluster: not implemented yet".into()))
}
