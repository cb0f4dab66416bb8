//! `gpuwl lab`: the sandbox-workload lab's eight steps on a real scheduler.

use std::path::PathBuf;

use crate::lab::{self, LabNodes, LabOptions, Target};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::workload::WorkloadConfig;
use gpuwl_core::render::esc;

/// `gpuwl lab --help`: the steps (from [`lab::STEPS`]) and where the lab runs.
pub fn long_about() -> String {
    format!(
        "\
Play the sandbox-workload lab on a real kube-scheduler and write its result files.

Steps (files under ROOT):
{}  Pods are written to k8s/pod-*.yaml first and applied from those files.

Without --kubeconfig/--context the lab runs on the local control plane (gpuwl cluster up;
built from pinned upstream sources on first use), creates lab-node-0..2 as simulated
nodes, and leaves the cluster running. Ends with the GPU inventory by pool and the
explanation of job-cross.",
        lab::steps_help()
    )
}

/// Arguments of `gpuwl lab`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  gpuwl lab                              # local control plane, files under ~/gpuwl\n  \
gpuwl lab --root /tmp/lab --down       # and stop the control plane afterwards\n  \
gpuwl lab --context staging \\\n      --node container=gpu-a --node vm-passthrough=gpu-b --node vm-vgpu=gpu-c"
)]
pub struct Args {
    /// Lab root: result files go to ROOT/out, ROOT/bin, ROOT/k8s [default: $HOME/gpuwl]
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// An existing cluster (and existing nodes) instead of the local control plane:
    /// --kubeconfig and/or --context. The lab waits on watches up to 90 s, so its client
    /// waits at least 95 s for a response whatever --request-timeout says.
    #[command(flatten)]
    pub cluster: crate::input::live::ClusterArgs,
    /// Node for a workload config, as CONFIG=NODE; repeatable [default: container=lab-node-0, vm-passthrough=lab-node-1, vm-vgpu=lab-node-2]
    #[arg(long = "node", value_name = "CONFIG=NODE", value_parser = parse_node)]
    pub nodes: Vec<(WorkloadConfig, String)>,
    /// Name of the local control plane to use (`--name` as in `gpuwl cluster`)
    #[arg(
        long,
        visible_alias = "name",
        value_name = "NAME",
        default_value = "gpuwl"
    )]
    pub cluster_name: String,
    /// Stop the local control plane when the lab is done
    #[arg(long)]
    pub down: bool,
    /// After the eight steps, a ninth on the same cluster: DeviceClasses for gpu and vfio,
    /// a ResourceSlice pair per lab node (a shared counter per GPU, a gpu and a vfio
    /// device consuming it), and the container job, the passthrough VM and the cross
    /// request as claims → out/09-dra.txt (`<pod> <node|none>` lines, then a POOL line).
    #[arg(long)]
    pub dra: bool,
    /// Run the real NVIDIA GPU Operator on the local control plane (`gpuwl cluster up
    /// --gpu-operator`): step 2 waits for the operand pods it deploys per node and also
    /// writes out/operands-observed.txt, step 3 reads back the names the emulated device
    /// plugins advertise. The result files are the same as without it
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub operator: bool,
    /// Run KubeVirt's real virt-api and virt-controller on the local control plane (`gpuwl
    /// cluster up --kubevirt`) and play steps 5-7 with real VMIs too, after each step's
    /// pod: the KubeVirt CR permits what `gpuwl kubevirt generate` prints; VMI
    /// vmi-passthrough and VirtualMachine vmi-vgpu get launcher pods the scheduler places;
    /// VirtualMachine vm-cross asks for nvidia.com/gpu, not permitted: virt-controller's
    /// condition says so. Writes out/kubevirt.txt; the other files are the same as without it
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub kubevirt: bool,
    /// Run Kueue's real manager on the local control plane (`gpuwl cluster up --kueue`)
    /// and, after the eight steps, add the quota layer: one ResourceFlavor per workload
    /// pool, ClusterQueue lab-gpus whose passthrough flavor has its quota on nvidia.com/gpu
    /// (the mis-named quota), LocalQueue lab in namespace gpu-kueue; Job kueue-container
    /// is admitted and placed, Job kueue-passthrough (GA102GL_A10) is held by Kueue.
    /// Writes out/kueue.txt; the other files are the same as without it
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub kueue: bool,
}

fn parse_node(s: &str) -> std::result::Result<(WorkloadConfig, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected CONFIG=NODE, got {s:?}"))?;
    let wc: WorkloadConfig = k.parse().map_err(|_| {
        format!("unknown workload config {k:?} (container, vm-passthrough, vm-vgpu)")
    })?;
    if v.is_empty() {
        return Err(format!("empty node name for {k}"));
    }
    Ok((wc, v.to_string()))
}

/// Makes the lab's result folders under `root` (or finds them) and checks that a file can
/// be written in each.
///
/// Errors: [`Error::Input`] naming `--root` and the folder that cannot be made or written.
fn root_writable(root: &std::path::Path) -> Result<()> {
    let bad = |why: String| {
        Error::Input(format!(
            "--root {}: {why}",
            esc(&root.display().to_string())
        ))
    };
    let dirs = crate::lab::files::LabDirs::new(root);
    dirs.create().map_err(|e| bad(e.to_string()))?;
    for d in [&dirs.out, &dirs.bin, &dirs.k8s] {
        tempfile::Builder::new()
            .prefix(".gpuwl-")
            .tempfile_in(d)
            .map(drop)
            .map_err(|e| {
                bad(format!(
                    "cannot write in {} ({})",
                    esc(&d.display().to_string()),
                    std::io::Error::from(e.kind())
                ))
            })?;
    }
    Ok(())
}

/// Runs `gpuwl lab`: progress lines and the summary on stdout.
///
/// Errors: [`Error::Input`] (exit 2) for a bad `--root`; [`Error::Runtime`] (exit 3) when a
/// step fails, naming the step.
pub fn run(args: &Args) -> Result<ExitStatus> {
    // Bad flags before anything is made: --root's folders, a cluster.
    let nodes = LabNodes::from_flags(&args.nodes)?;
    let root = match &args.root {
        Some(r) => r.clone(),
        None => std::env::home_dir()
            .ok_or_else(|| Error::Input("--root: $HOME is not set; pass --root DIR".into()))?
            .join("gpuwl"),
    };
    let root = std::path::absolute(&root)
        .map_err(|e| Error::Input(format!("--root {}: {e}", root.display())))?;
    // The result folders before any cluster is built or started: a --root that cannot hold
    // them fails now (exit 2, naming it), not after minutes at step 1.
    root_writable(&root)?;
    let target = if args.cluster.kubeconfig.is_some() || args.cluster.context.is_some() {
        Target::Kubeconfig(args.cluster.clone())
    } else {
        Target::Local {
            cluster: args.cluster_name.clone(),
            request_timeout: args.cluster.request_timeout(),
        }
    };
    let gpuwl_bin = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("gpuwl"));
    let opts = LabOptions {
        root: root.clone(),
        target,
        nodes,
        down: args.down,
        gpuwl_bin,
        dra: args.dra,
        operator: args.operator,
        kubevirt: args.kubevirt,
        kueue: args.kueue,
    };
    // One lab per local cluster name at a time: a second waits for the first (both
    // would label the same nodes and replace each other's pods).
    let _lab_lock = match &opts.target {
        Target::Local { cluster, .. } => {
            let path =
                crate::cluster::state_dir(cluster).with_file_name(format!("{cluster}.lab.lock"));
            Some(crate::cluster::lock::lock_waiting(
                &path,
                std::time::Duration::from_secs(60 * 60),
                |waited| {
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!(
                            "waiting for another gpuwl lab on the cluster {cluster:?} to finish ({} s so far)\n",
                            waited.as_secs()
                        )
                        .as_bytes(),
                    );
                },
            )?)
        }
        Target::Kubeconfig(_) => None,
    };
    let rt = crate::cli::runtime()?;
    let width = gpuwl_core::render::width();
    let mut progress = |line: &str| {
        crate::out!(
            "{}",
            gpuwl_core::render::wrap_lines(&format!("{line}\n"), width)
        )
    };
    let report = match rt.block_on(lab::run(&opts, &mut progress)) {
        Ok(r) => r,
        Err(e) => {
            // --down means "leave nothing running", also when a step failed.
            if let (true, Target::Local { cluster, .. }) = (args.down, &opts.target) {
                let _ = crate::cluster::down(cluster);
            }
            return Err(e);
        }
    };

    crate::out!("{}", crate::render::lab::summary(&report, &root, width));
    if let Target::Local { cluster, .. } = &opts.target {
        if args.down {
            crate::cluster::down(cluster)?;
            crate::outln!("Local control plane {cluster:?} stopped (--down).");
        } else if let Some(kc) = &report.local_kubeconfig {
            crate::outln!(
                "The local control plane {cluster:?} is still running:\n  export KUBECONFIG={}\n  kubectl get pods -n gpu-vm -o wide\n  gpuwl cluster down{}",
                kc.display(),
                if cluster == "gpuwl" {
                    String::new()
                } else {
                    format!(" --name {cluster}")
                }
            );
        }
    }
    Ok(ExitStatus::Ok)
}
