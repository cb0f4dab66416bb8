//! `gpuwl triage`: arguments and entry point.

use std::path::PathBuf;

use crate::input::gather::LimitArgs;
use gpuwl_core::analysis::triage;
use gpuwl_core::decode::mustgather;
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::render::{self, Format};

/// Arguments of `gpuwl triage`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl triage /tmp/nvidia-gpu-operator_20250101_1200      # the folder must-gather.sh wrote
  gpuwl triage bundle.tar.gz -o json                       # a tarball of it (tar or tar.gz)
  gpuwl triage bundle/ --pods pods.json                    # plus the workload pods
  gpuwl triage bundle/ --pods all.json --kubevirt kv.yaml  # and the waiting VMs (pods,vmis,vms)
  gpuwl triage bundle/ --kueue kueue.yaml                  # and the quota layer (Kueue's objects)

Reads the GPU Operator's must-gather bundle (its hack/must-gather.sh): gpu_nodes.descr (the GPU
nodes as `kubectl describe` text: labels, taints, capacity, allocatable, allocated requests),
cluster_policy.yaml, gpu_operand_pods.yaml, gpu_operand_ds.yaml, the operand and operator pod
logs, gpu_nodes.labels, must-gather.log. Prints: check's verdict on the described nodes
(MISMATCH=/OK= lines and warnings), the operator's state per node, operand DaemonSets that are
not fully ready and why (pod phase, restarts, waiting reason, last exit, the last error lines
of their logs, escaped and cut to 200 characters), pending GPU pods (and VMIs or VMs waiting with
no virt-launcher pod) with explain's cause and verdict class, with --kueue the quota layer (check's
kueue-* findings, the GPU workloads Kueue holds with explain's quota cause; must-gather.sh gathers
no Kueue objects), and what the bundle lacks. Logs are read from their end only (64 KiB each), so a huge log costs
no memory; files that do not read are listed, never fatal.
Exit 0 no problem found · 1 a MISMATCH, an operand DaemonSet not fully ready, a pending GPU
pod, a quota error or a GPU workload Kueue holds · 2 not a bundle (neither a folder nor a tar archive, or none of the script's files), or past
a reader limit (--max-input-bytes, --max-member-bytes, --max-items). Symbolic and hard links in
the bundle are never followed: they are listed and skipped.")]
pub struct Args {
    /// The bundle: the folder must-gather.sh wrote ($ARTIFACT_DIR), or a tar/tar.gz of it.
    #[arg(value_name = "DIR|TARBALL")]
    pub bundle: PathBuf,
    /// Workload pods (`kubectl get pods -A -o json|yaml`): the bundle holds only the
    /// operator namespace's pods; pending GPU pods among these are explained too. With
    /// KubeVirt, `kubectl get pods,vmis,vms -A -o json`: a VMI or VM that waits with no
    /// virt-launcher pod is judged as the launcher virt-controller would render.
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
    /// The KubeVirt (or HyperConverged) CR (`kubectl get kubevirt -A -o yaml`): the
    /// `permittedHostDevices` and launcher settings the VMIs and VMs of --pods are judged
    /// under (without it: KubeVirt's defaults, no name refused).
    #[arg(long, value_name = "FILE")]
    pub kubevirt: Option<PathBuf>,
    /// Kueue's objects (`kubectl get resourceflavors,clusterqueues,localqueues,workloads
    /// -A -o yaml`; the GPU Operator's must-gather gathers none): the quota layer judged
    /// over the described nodes, as `gpuwl check --kueue` does, and the GPU workloads
    /// Kueue holds with explain's quota cause.
    #[arg(long, value_name = "FILE")]
    pub kueue: Option<PathBuf>,
    /// Output format: text for people; json and yaml carry the whole report.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// The reader limits (set for the process before the bundle is read).
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs `gpuwl triage`.
///
/// Errors: [`Error::File`] when the path is not a bundle; [`Error::Input`] for a bad
/// `--pods` or `--kubevirt` file; [`Error::Write`] when stdout fails.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let extra = args
        .pods
        .as_deref()
        .map(gpuwl_core::decode::pods::read_pods_path)
        .transpose()?;
    let kubevirt = args
        .kubevirt
        .as_deref()
        .map(gpuwl_core::decode::kubevirt::read_path)
        .transpose()?;
    let kueue = args
        .kueue
        .as_deref()
        .map(gpuwl_core::decode::kueue::read_path)
        .transpose()?;
    let bundle = mustgather::read(&args.bundle)?;
    let mut t = triage::build(&bundle, extra.as_deref(), kubevirt.as_ref());
    if let Some(k) = &kueue {
        let nodes: Vec<_> = bundle.nodes.iter().map(|d| d.node.clone()).collect();
        t.quota = Some(triage::quota_part(k, &nodes, &t.cluster_policy));
    }
    let text = render::triage::render(&t, args.output);
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the report", e))?;
    Ok(if t.found_problems() {
        ExitStatus::Mismatch
    } else {
        ExitStatus::Ok
    })
}
