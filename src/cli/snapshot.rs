//! `gpuwl snapshot`: arguments and entry point.

use std::path::PathBuf;

use crate::files;
use crate::input::live::{self, ClusterArgs, Flavour};
use crate::input::snapshot_file;
use gpuwl_core::error::{ExitStatus, Result};
use gpuwl_core::text;

/// Arguments of `gpuwl snapshot`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl snapshot                                   # writes gpuwl-snapshot.tar
  gpuwl snapshot -o prod.tar.gz --context prod     # gzip-compressed (by the name)
  gpuwl check --snapshot prod.tar.gz               # then, anywhere, without the cluster:
  gpuwl inventory --snapshot prod.tar.gz
  gpuwl explain pod gpu-vm/job-cross --snapshot prod.tar.gz

One tar archive of kubectl-style JSON lists (`tar -xf` gives files the --nodes, --pods,
--cluster-policy, --kubevirt and --dra flags read as they are): snapshot.json (gpuwl and cluster
version, time, how each list went), nodes.json, pods.json (pods that have not finished; only the
fields gpuwl reads unless --full), clusterpolicies.json, kubevirt.json (KubeVirt and HyperConverged
CRs), vmis.json (which VMIs a VirtualMachine owns; a VMI that waits for a launcher whole), vms.json (the VMs that want to run), dra.json (DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates),
daemonsets.json (the GPU Operator's operand DaemonSets).
Never included: Secrets (none are listed), environment variable values (env[].value and
env[].valueFrom are removed everywhere; names stay), managedFields and the last-applied annotation.
A resource the cluster does not serve, or the credentials may not list, is recorded as such
(nodes and pods must list). Progress goes to stderr; the file is written atomically, mode 0600.
Exit 0 written · 2 bad usage (an -o whose folder is missing or not writable: checked before the
cluster is read) · 3 cluster unreachable or file not writable.")]
pub struct Args {
    /// Where to write the snapshot; a name ending in .gz or .tgz is gzip-compressed.
    #[arg(
        short = 'o',
        long,
        value_name = "FILE",
        default_value = "gpuwl-snapshot.tar"
    )]
    pub output: PathBuf,
    /// Keep whole pods (env values still removed), not only the fields gpuwl reads.
    #[arg(long)]
    pub full: bool,
    /// Do not print progress on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Where the live cluster is.
    #[command(flatten)]
    pub live: ClusterArgs,
}

/// Runs `gpuwl snapshot`: lists the cluster (progress on stderr), writes the file.
///
/// Errors: [`gpuwl_core::error::Error::Cluster`] and kin when nodes or pods cannot be listed;
/// [`gpuwl_core::error::Error::Failed`] when the file cannot be written.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let quiet = args.quiet;
    let progress = move |line: &str| {
        if !quiet {
            eprintln!("gpuwl snapshot: {}", text::esc(line));
        }
    };
    // Before the cluster is listed: a destination that cannot be written fails at once.
    files::check_writable(&args.output, "-o")?;
    let tar = live::runtime()?.block_on(async {
        let conn = live::connect(&args.live, Flavour::OneShot).await?;
        snapshot_file::take(&conn.client, Some(&conn.server), args.full, progress)
            .await
            .map_err(|e| e.at_server(&conn.server, args.live.request_timeout()))
    })?;
    let written = snapshot_file::write(&args.output, &tar)?;
    if !quiet {
        eprintln!(
            "gpuwl snapshot: wrote {} ({})",
            text::esc(&args.output.display().to_string()),
            size_line(written, tar.len())
        );
    }
    Ok(ExitStatus::Ok)
}

/// `17920 bytes`, or for a compressed file `2113 bytes, 17920 before compression`.
fn size_line(written: usize, tar: usize) -> String {
    if written == tar {
        format!("{written} bytes")
    } else {
        format!("{written} bytes, {tar} before compression")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_size_mentions_compression_only_when_there_was_some() {
        assert_eq!(super::size_line(17920, 17920), "17920 bytes");
        assert_eq!(
            super::size_line(2113, 17920),
            "2113 bytes, 17920 before compression"
        );
    }
}
