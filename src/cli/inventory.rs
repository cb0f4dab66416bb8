//! `gpuwl inventory`: arguments and entry point.

use std::io::IsTerminal;
use std::path::Path;

use crate::input::gather::args::InventorySource;
use crate::input::gather::{From, Gathered, Operands, SourceArgs, Wanted, gather};
use gpuwl_core::analysis::inventory::{self, Inventory};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::operand::OperandSource;
use gpuwl_core::render::inventory::{Output, TextOptions};
use gpuwl_core::render::{self};

/// Arguments of `gpuwl inventory`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl inventory                                  # the live cluster (current context)
  gpuwl inventory --nodes nodes.json --pods pods.json
  gpuwl inventory --nodes nodes.yaml --pods pods.yaml -o csv
  gpuwl inventory --snapshot prod.tar              # a `gpuwl snapshot` file
  gpuwl inventory --nodes nodes.json --pods pods.json --kueue kueue.yaml   # with Kueue's quota

Rows: pool × GPU resource name. A node's pool is the workload config the GPU Operator applies:
its nvidia.com/gpu.workload.config label when honoured, else the ClusterPolicy's
sandboxWorkloads.defaultWorkload, else what its nvidia.com/gpu.deploy.* labels show; a guessed
default is marked. ALLOCATED sums the effective requests of bound pods that have not finished;
FREE = ALLOCATABLE - ALLOCATED; PENDING = units requested by unbound pods the pool could serve. Demand no pool can serve is listed after the table, beside the free units elsewhere.
DRA rows (with --dra, or live when resource.k8s.io/v1 is served): per driver × device type × node
pool, devices, the physical GPUs behind them (a GPU offered as gpu and vfio counts once),
allocated, blocked (a sibling device consumed the shared counter), free, and the devices
unallocated claims ask for; in -o csv they are rows with origin `dra`, resource
`<driver>/<device type>`, capacity = devices, capacity_gpus = the physical GPUs.
Kueue quota (with --kueue FILE, a snapshot's kueue.json, or live when kueue.x-k8s.io is served):
per ClusterQueue × flavor × GPU name, the nominal quota, borrowing limit, reserved by admitted
workloads, the workloads waiting on it with explain's quota cause, and what the flavor's nodes
advertise (a name they do not advertise is quota no pod can use).
Bad input: one line on stderr, exit 2.")]
pub struct Args {
    /// The data source: a node dump and the files beside it, a snapshot file, or the live
    /// cluster.
    #[command(flatten)]
    pub source: SourceArgs<InventorySource>,
    /// Leave matching `nvidia.com/` resources out (repeatable), as `check --ignore-resource`:
    /// `*` and `?` wildcards; a glob with `/` matches the full name, else the part after
    /// `nvidia.com/`.
    #[arg(long = "ignore-resource", value_name = "GLOB")]
    pub ignore_resource: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Draw the USE bars even when stdout is not a terminal.
    #[arg(long)]
    pub bars: bool,
}

/// Runs `gpuwl inventory`: gathers a snapshot file, the dumps, or the live cluster (with
/// its operand pods); builds the inventory; renders it.
///
/// Errors: [`Error::Input`] for bad dumps (naming the file and field); [`Error::Runtime`]
/// when the cluster cannot be reached or stdout fails.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let wanted = Wanted {
        pods: true,
        operands: Operands::Yes,
        // The quota layer when Kueue is installed (a cluster without it answers 404).
        kueue: true,
        ..Wanted::default()
    };
    let gathered = gather(&args.source.request(), wanted)?;
    let inv = build(gathered, args)?;
    let terminal = std::io::stdout().is_terminal();
    let text = render::inventory::render(
        &inv,
        args.output,
        TextOptions {
            bars: args.bars || terminal,
            width: render::width(),
        },
    );
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the inventory", e))?;
    Ok(ExitStatus::Ok)
}

/// The inventory of what was gathered: a snapshot file's as it is; a node dump's with
/// `--pods` (allocations, pending demand and the GPU Operator's operand pods) and `--dra`
/// when given; the live cluster's with its operand pods.
///
/// Errors: a snapshot's malformed GPU quantity, naming the file.
fn build(g: Gathered, args: &Args) -> Result<Inventory> {
    let ignore = &args.ignore_resource;
    match g.from.clone() {
        From::Snapshot(snap) => {
            inventory::from_snapshot(g.into_snapshot(), ignore).map_err(|e| e.in_file(&snap))
        }
        From::Files(nodes_path) => from_files(g, &nodes_path, ignore),
        // (No node dump means the live cluster here: `WithoutNodes` is explain's.)
        From::Cluster | From::WithoutNodes => from_cluster(g, ignore),
    }
}

/// The inventory of a node dump and the files beside it.
///
/// Errors: none today (as [`inventory::build`], naming the node dump).
fn from_files(g: Gathered, nodes_path: &Path, ignore: &[String]) -> Result<Inventory> {
    let Gathered {
        mut nodes,
        pods,
        policy,
        dra,
        operands,
        kubevirt,
        kueue,
        ..
    } = g;
    let note = pods
        .is_none()
        .then(|| "no --pods: allocated and pending are not known (shown as 0)".to_string());
    let mut pods = pods.unwrap_or_default();
    let ignored = inventory::ignore_resources(&mut nodes, &mut pods, ignore);
    let mut inv = inventory::build_with(&nodes, &pods, &policy, kubevirt.as_ref())
        .map_err(|e| e.in_file(nodes_path))?;
    inv.notes.extend(note);
    inv.notes.extend(ignored);
    if let Some(operands) = operands {
        inventory::attach_operands(
            &mut inv,
            &nodes,
            policy.policy(),
            operands?,
            OperandSource {
                status: "file",
                note: None,
            },
        );
    }
    if let Some((objects, source)) = dra {
        inventory::attach_dra(&mut inv, &objects, source, &nodes, policy.policy());
    }
    if let Some(k) = &kueue {
        inventory::attach_quota(&mut inv, k, &nodes, policy.policy());
    }
    Ok(inv)
}

/// The inventory of the live cluster (one snapshot read, beside its operand pods), with
/// `--cluster-policy` and `--dra` replacing the part they hold.
///
/// Errors: as [`inventory::from_snapshot`].
fn from_cluster(mut g: Gathered, ignore: &[String]) -> Result<Inventory> {
    let operands = g.operands.take();
    let nodes = g.nodes.clone();
    let policy = g.policy.policy().cloned();
    let mut inv = inventory::from_snapshot(g.into_snapshot(), ignore)?;
    let (pods, source) = match operands.unwrap_or_else(|| Ok(Vec::new())) {
        Ok(p) => (
            p,
            OperandSource {
                status: "cluster",
                note: None,
            },
        ),
        Err(e) => (
            Vec::new(),
            OperandSource {
                status: "unreadable",
                note: Some(render::esc(&e.to_string())),
            },
        ),
    };
    inventory::attach_operands(&mut inv, &nodes, policy.as_ref(), pods, source);
    Ok(inv)
}
