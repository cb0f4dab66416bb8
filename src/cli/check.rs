//! `gpuwl check`: arguments and entry point (placeholder until its issue lands).

use crate::error::{Error, ExitStatus, Result};

/// Arguments of `gpuwl check`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `gpuwl check`.
pub fn run(_args: &Args) -> Result<ExitStatus> {
    Err(Error::Runtime("check: not implemented yet".into()))
}
