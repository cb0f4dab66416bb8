//! `gpuwl inventory`: arguments and entry point.

use std::io::IsTerminal;

use crate::input::gather::args::InventorySource;
use crate::input::gather::{Operands, SourceArgs, Wanted, gather};
use gpuwl_core::analysis::inventory;
use gpuwl_core::error::{Error, ExitStatus, Result};
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
/// its operand pods); assembles the inventory ([`inventory::assemble`]); renders it.
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
    let inv = inventory::assemble(gathered.snapshot, &args.ignore_resource)?;
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
