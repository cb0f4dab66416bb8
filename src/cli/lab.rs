//! `gpuwl lab`: arguments and entry point (placeholder until its issue lands).

use crate::error::{Error, ExitStatus, Result};

/// Arguments of `gpuwl lab`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `gpuwl lab`.
pub fn run(_args: &Args) -> Result<ExitStatus> {
    Err(Error::Runtime("lab: not implemented yet".into()))
}
