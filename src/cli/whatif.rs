//! `gpuwl whatif relabel` and `gpuwl plan`: arguments and entry points.

use std::io::Write;
use std::time::Duration;

use crate::cluster;
use crate::input::gather::args::TwinSource;
use crate::input::gather::{SourceArgs, Wanted, gather};
use crate::input::live;
use crate::twin::{self, DEFAULT_TWIN_NAME};
use gpuwl_core::analysis::twin::report::{Relabel, Report, Verdict};
use gpuwl_core::analysis::twin::{plan, quota};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::snapshot::Snapshot;
use gpuwl_core::render::whatif::{PlanReport, plan_text, report_text, serialized};
use gpuwl_core::render::{self, Format};

/// Where the cluster to copy comes from, and how the twin runs (shared by whatif and plan).
#[derive(Debug, clap::Args)]
pub(crate) struct TwinArgs {
    /// The cluster to copy: a node dump and the files beside it, a snapshot file, or the
    /// live cluster.
    #[command(flatten)]
    pub source: SourceArgs<TwinSource>,
    /// Run KubeVirt's virt-api and virt-controller (v1.7.0, built from its pinned Go module
    /// on first use: minutes, cached after) in the twin, and create the pending VMs there as
    /// real VMIs under the cluster's permittedHostDevices (the live cluster's or the
    /// snapshot's CR; with --nodes, --kubevirt-cr FILE's, else no list: every name passes,
    /// as KubeVirt does without one): virt-controller renders or refuses each, and the
    /// twin's scheduler places its launcher pod. Without it a pending VM is tried as the pod
    /// it would be.
    #[arg(long)]
    pub kubevirt: bool,
    /// Name of the twin's local cluster (its state under gpuwl's state directory). With
    /// the default, a run that finds the twin in use by another run takes the next free
    /// name (gpuwl-twin-2, …); a name given here waits for the run that uses it.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_TWIN_NAME)]
    pub twin_name: String,
    /// Leave the twin running afterwards (`gpuwl cluster down --name <twin-name>` removes it).
    #[arg(long)]
    pub keep: bool,
    /// Seconds to wait, each time, for the twin's scheduler to settle.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub settle_timeout: u64,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Output format: text for people; json and yaml carry the whole report.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// `gpuwl whatif`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to try.
    #[command(subcommand)]
    pub(crate) what: What,
}

/// The whatif experiments.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum What {
    /// Relabel nodes on a twin of the cluster and report what the real scheduler does
    #[command(after_help = RELABEL_HELP)]
    Relabel(RelabelArgs),
}

const RELABEL_HELP: &str = "\
Examples:
  gpuwl whatif relabel lab-node-1=container                 # the live cluster (current context)
  gpuwl whatif relabel gpu-7=vm-passthrough gpu-8=vm-passthrough -o json
  gpuwl whatif relabel gpu-9=vm-vgpu:A10-12Q --nodes nodes.json --pods pods.json
  gpuwl whatif relabel gpu-7=container --snapshot prod.tar --keep
  gpuwl whatif relabel gpu-7=vm-passthrough --kubevirt     # pending VMs decided by KubeVirt itself

Copies the cluster's GPU side into a twin on a local control plane (kube-apiserver,
kube-scheduler, kube-controller-manager, kwok nodes): the GPU nodes with their labels, taints,
capacity and allocatable; the pods bound to them; the pending pods that ask for a GPU name. CPU-only
nodes are left out. The twin's real kube-scheduler first tries the pending pods as the cluster is
(any it places are reported apart: the twin differs there), then the relabels are applied: the
workload label, and what the node advertises afterwards by gpuwl's model of the GPU Operator and
its device plugins (the node's GPUs worked out from its GFD labels or the names it advertises;
said in the report), a name that leaves kept at \"0\" as a kubelet keeps it. Once the scheduler has
settled the report says which pending pods now schedule and where, which still wait (explain's
cause on the twin), which running pods lose the name they hold, the inventory before → after, and
the kubectl commands that do it for real. The twin is deleted afterwards unless --keep.
With --kubevirt the twin also runs KubeVirt's virt-api and virt-controller, and each pending VM is
created there as a real VMI under the cluster's permittedHostDevices: virt-controller renders its
launcher pod (which the twin's scheduler places or not) or refuses it, as it would in the cluster.
NODE=vm-vgpu:TYPE also sets nvidia.com/vgpu.config=TYPE (e.g. A10-12Q).
Exit 0 the report was made · 2 bad input (a relabel, a file, an unknown node) · 3 the twin or the
cluster failed · 130 interrupted (Ctrl-C, SIGTERM): the twin is deleted first.";

/// `gpuwl whatif relabel`.
#[derive(Debug, clap::Args)]
pub(crate) struct RelabelArgs {
    /// NODE=CONFIG (container, vm-passthrough, vm-vgpu), or NODE=vm-vgpu:TYPE.
    #[arg(value_name = "NODE=CONFIG", required = true)]
    pub relabels: Vec<String>,
    /// The cluster and the twin.
    #[command(flatten)]
    pub(crate) twin: TwinArgs,
}

/// `gpuwl plan`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl plan                                     # the live cluster
  gpuwl plan --nodes nodes.json --pods pods.json -o json
  gpuwl plan --allow-disruption

Finds the fewest relabels that serve the pending GPU pods and VMIs: those that no node their
constraints allow has the free units for now (each that fits takes its units first), per GPU name;
candidates are GPU nodes that, relabelled (vm-vgpu with the
type asked for), would advertise the name by gpuwl's model and still be allowed by the pods'
nodeSelector, affinity, taints and cordon; nodes running GPU pods are never touched unless
--allow-disruption. The most units first, ties to the least disruption. The plan is then tried on a
twin of the cluster (as `gpuwl whatif relabel`) and printed with the twin's verdict. A pending pod no
relabel can serve is said plainly, with why (its name is no node's GPU, or its own constraints
exclude every node that could advertise it).
Exit 0 every short pod is served by a plan the twin confirmed (or nothing is short; with --no-verify,
by the proposal) · 1 some pending pod is not served, or the twin did not confirm the plan · 2 bad input · 3 the twin or the cluster
failed · 130 interrupted (Ctrl-C, SIGTERM): the twin is deleted first.")]
pub struct PlanArgs {
    /// Consider nodes whose running GPU pods would lose their GPU.
    #[arg(long)]
    pub allow_disruption: bool,
    /// Print the model's proposal without trying it on a twin.
    #[arg(long)]
    pub no_verify: bool,
    /// The cluster and the twin.
    #[command(flatten)]
    pub(crate) twin: TwinArgs,
}

/// Reads the source cluster: a snapshot file, the dumps, or the live cluster (everything
/// at once, its KubeVirt CR with `--kubevirt`).
fn read_source(a: &TwinArgs) -> Result<Snapshot> {
    let wanted = Wanted {
        pods: true,
        kubevirt: a.kubevirt,
        kueue: true,
        ..Wanted::default()
    };
    Ok(gather(&a.source.request(), wanted)?.snapshot)
}

fn options(a: &TwinArgs) -> Result<twin::Options> {
    cluster::validate_name(&a.twin_name)?;
    Ok(twin::Options {
        name: a.twin_name.clone(),
        keep: a.keep,
        settle_timeout: Duration::from_secs(a.settle_timeout.max(1)),
        kubevirt: a.kubevirt,
    })
}

fn run_twin(a: &TwinArgs, source: &Snapshot, relabels: &[Relabel]) -> Result<Report> {
    let opts = options(a)?;
    let quiet = a.quiet;
    let rt = live::runtime()?;
    rt.block_on(async {
        let started = std::time::Instant::now();
        let mut progress = |s: &str| {
            if !quiet {
                // A closed stderr must not stop the run (the twin would be left behind).
                let _ = writeln!(
                    std::io::stderr(),
                    "whatif: {:>5.1} s  {}",
                    started.elapsed().as_secs_f64(),
                    render::esc(s)
                );
            }
        };
        twin::run(source, relabels, &opts, &mut progress).await
    })
}

fn write(text: &str) -> Result<()> {
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the report", e))
}

/// Runs `gpuwl whatif`.
///
/// Errors: [`Error::Input`] for a bad relabel, file or node; [`Error::Runtime`] when the
/// twin or the cluster fails.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let What::Relabel(a) = &args.what;
    let mut relabels = Vec::new();
    for r in &a.relabels {
        relabels.push(
            r.parse::<Relabel>()
                .map_err(|e| Error::Input(format!("relabel {e}")))?,
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in &relabels {
        if !seen.insert(r.node.as_str()) {
            return Err(Error::Input(format!(
                "relabel {}: the node is given twice",
                render::esc(&r.node)
            )));
        }
    }
    options(&a.twin)?;
    let source = read_source(&a.twin)?;
    let mut report = run_twin(&a.twin, &source, &relabels)?;
    // The quota layer: which Kueue flavors each relabelled node leaves and joins, and the
    // admitted workloads that lose their pool.
    if let Some(k) = &source.kueue {
        quota::add_quota(&mut report, k, &source);
    }
    let text = serialized(&report, a.twin.output).unwrap_or_else(|| {
        render::wrap_lines(&report_text(&report, render::width()), render::width())
    });
    write(&text)?;
    Ok(ExitStatus::Ok)
}

/// Runs `gpuwl plan`.
///
/// Errors: as [`run`].
pub fn run_plan(args: &PlanArgs) -> Result<ExitStatus> {
    options(&args.twin)?;
    let source = read_source(&args.twin)?;
    let proposal = plan::propose(&source, args.allow_disruption);
    let relabels: Vec<Relabel> = proposal.steps.iter().map(|s| s.relabel.clone()).collect();
    let whatif = if relabels.is_empty() || args.no_verify {
        None
    } else {
        let mut w = run_twin(&args.twin, &source, &relabels)?;
        if let Some(k) = &source.kueue {
            quota::add_quota(&mut w, k, &source);
        }
        Some(w)
    };
    let not_confirmed: Vec<String> = match &whatif {
        Some(w) => proposal
            .steps
            .iter()
            .flat_map(|s| &s.for_pods)
            .filter(|p| {
                !w.now_scheduled
                    .iter()
                    .chain(&w.placed_without_relabel)
                    .any(|x| &x.pod.pod == *p)
            })
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    let verified = whatif.is_some() && not_confirmed.is_empty();
    let ok = proposal.unservable.is_empty() && (relabels.is_empty() || verified || args.no_verify);
    let verdict = plan_verdict(&proposal, whatif.as_ref(), verified);
    let report = PlanReport {
        verdict,
        proposal,
        verified,
        not_confirmed,
        whatif,
    };
    let text = serialized(&report, args.twin.output).unwrap_or_else(|| {
        render::wrap_lines(&plan_text(&report, render::width()), render::width())
    });
    write(&text)?;
    Ok(if ok {
        ExitStatus::Ok
    } else {
        ExitStatus::Mismatch
    })
}

/// `plan`'s verdict: the twin's when it tried the plan (said when it did not place every pod
/// the plan is for), else the model's counts, said as such.
fn plan_verdict(proposal: &plan::Proposal, whatif: Option<&Report>, verified: bool) -> Verdict {
    if let Some(w) = whatif {
        let mut v = w.verdict.clone();
        if !verified {
            v.summary
                .push_str(" (the twin did not place every pod the plan is for)");
        }
        return v;
    }
    let serves: usize = proposal.steps.iter().map(|s| s.for_pods.len()).sum();
    let disrupts = proposal
        .steps
        .iter()
        .flat_map(|s| &s.disrupts)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut v = Verdict::counts(serves, disrupts, proposal.unservable.len());
    if proposal.steps.is_empty() {
        v.summary = if proposal.unservable.is_empty() {
            "no relabel needed: no pending GPU pod is short".into()
        } else {
            format!(
                "no relabel proposed: none serves the {} pending pod(s) below",
                proposal.unservable.len()
            )
        };
    } else {
        v.summary
            .push_str(" (by the model's proposal, not tried on a twin: --no-verify)");
    }
    v
}
