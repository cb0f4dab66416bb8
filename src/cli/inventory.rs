//! `gpuwl inventory`: arguments and entry point.

use std::io::IsTerminal;
use std::path::PathBuf;

use crate::analysis::inventory::{self, Inventory};
use crate::error::{Error, ExitStatus, Result};
use crate::input::{self, pods};
use crate::model::operator::PolicyStatus;
use crate::render::inventory::{Output, TextOptions};
use crate::render::{self};

/// Arguments of `gpuwl inventory`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl inventory                                  # the live cluster (current context)
  gpuwl inventory --nodes nodes.json --pods pods.json
  gpuwl inventory --nodes nodes.yaml --pods pods.yaml -o csv
  gpuwl inventory --snapshot prod.tar              # a `gpuwl snapshot` file

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
Bad input: one line on stderr, exit 2.")]
pub struct Args {
    /// Node dump: `kubectl get nodes -o json|yaml`; `-` reads stdin. Omitted: the live cluster.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub nodes: Option<PathBuf>,
    /// Pod dump: `kubectl get pods -A -o json|yaml` (needs --nodes). Without it, nothing is
    /// allocated or pending.
    #[arg(long, value_name = "FILE", requires = "nodes")]
    pub pods: Option<PathBuf>,
    /// The GPU Operator's ClusterPolicy (`kubectl get clusterpolicies -o yaml`), for the
    /// effective workload configs; with --nodes or on the live cluster (there it replaces
    /// the cluster's own, as in `check`; without it the cluster's is read).
    #[arg(long, value_name = "FILE")]
    pub cluster_policy: Option<PathBuf>,
    /// DRA objects: `kubectl get deviceclasses,resourceslices,resourceclaims -A -o
    /// json|yaml`; with --nodes or on the live cluster (there it replaces what the cluster
    /// lists; without it they are listed when it serves resource.k8s.io/v1). Adds the DRA
    /// rows: driver × device type × node pool.
    #[arg(long, value_name = "FILE")]
    pub dra: Option<PathBuf>,
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
    /// A `gpuwl snapshot` file in place of --nodes, --pods, --cluster-policy and --dra (no
    /// cluster is contacted).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["nodes", "pods", "cluster_policy", "dra", "kubeconfig", "context"])]
    pub snapshot: Option<PathBuf>,
    /// Where the live cluster is (used when no file is given).
    #[command(flatten)]
    pub live: crate::input::live::ClusterArgs,
}

/// Runs `gpuwl inventory`: the inventory from a snapshot file, the dumps, or the live
/// cluster, then rendered.
///
/// Errors: [`Error::Input`] for bad dumps (naming the file and field); [`Error::Runtime`]
/// when the cluster cannot be reached or stdout fails.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let inv = match (&args.nodes, &args.snapshot) {
        (_, Some(snap)) => inventory::from_snapshot(
            crate::input::snapshot_file::load(snap)?.snapshot,
            &args.ignore_resource,
        )
        .map_err(|e| e.in_file(snap))?,
        (Some(nodes_path), None) => from_files(args, nodes_path)?,
        (None, None) => from_cluster(args)?,
    };
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

/// The inventory of a node dump, with `--pods` (allocations, pending demand and the
/// GPU Operator's operand pods), `--cluster-policy` and `--dra` when given.
///
/// Errors: as [`run`].
fn from_files(args: &Args, nodes_path: &PathBuf) -> Result<Inventory> {
    crate::cli::explain::one_stdin(&[
        Some(nodes_path),
        args.pods.as_ref(),
        args.cluster_policy.as_ref(),
        args.dra.as_ref(),
    ])?;
    let policy = match &args.cluster_policy {
        Some(p) => crate::input::clusterpolicy::read_path(p)?,
        None => PolicyStatus::not_read(),
    };
    let mut nodes = input::read_nodes(&input::Source::from_arg(nodes_path))?;
    let (mut pods, note) = match &args.pods {
        Some(p) => (pods::read_pods_path(p)?, None),
        None => (
            Vec::new(),
            Some("no --pods: allocated and pending are not known (shown as 0)".to_string()),
        ),
    };
    let ignored = inventory::ignore_resources(&mut nodes, &mut pods, &args.ignore_resource);
    let mut inv = inventory::build(&nodes, &pods, &policy).map_err(|e| e.in_file(nodes_path))?;
    inv.notes.extend(note);
    inv.notes.extend(ignored);
    // The GPU Operator's operand pods come from the same pods dump (not from stdin,
    // which the pod reader has consumed).
    if let Some(p) = args.pods.as_ref().filter(|p| p.as_os_str() != "-") {
        inventory::attach_operands(
            &mut inv,
            &nodes,
            policy.policy(),
            crate::input::operands::read_path(p)?,
            crate::model::operand::OperandSource {
                status: "file",
                note: None,
            },
        );
    }
    if let Some(f) = &args.dra {
        let dra = crate::input::dra::read_path(f)?;
        inventory::attach_dra(
            &mut inv,
            &dra,
            crate::model::dra::DraSource::File(f.display().to_string()),
            &nodes,
            policy.policy(),
        );
    }
    Ok(inv)
}

/// The inventory of the live cluster (one snapshot read, beside its operand pods), with
/// `--cluster-policy` and `--dra` replacing the part they hold.
///
/// Errors: as [`run`].
fn from_cluster(args: &Args) -> Result<Inventory> {
    // Files given beside the live cluster replace the part they hold.
    crate::cli::explain::one_stdin(&[args.cluster_policy.as_ref(), args.dra.as_ref()])?;
    let policy = match &args.cluster_policy {
        Some(p) => Some(crate::input::clusterpolicy::read_path(p)?),
        None => None,
    };
    let dra = match &args.dra {
        Some(f) => Some((
            crate::input::dra::read_path(f)?,
            crate::model::dra::DraSource::File(f.display().to_string()),
        )),
        None => None,
    };
    args.live.block_on(|client| async move {
        let (mut snap, operands) =
            futures::try_join!(crate::input::snapshot::read(&client, false), async {
                Ok(crate::input::operands::list(&client).await)
            })?;
        if let Some(p) = policy {
            snap.policy = p;
        }
        if let Some((objects, source)) = dra {
            snap.dra = objects;
            snap.dra_source = source;
        }
        let nodes = snap.nodes.clone();
        let policy = snap.policy.policy().cloned();
        let mut inv = inventory::from_snapshot(snap, &args.ignore_resource)?;
        let (pods, source) = match operands {
            Ok(p) => (
                p,
                crate::model::operand::OperandSource {
                    status: "cluster",
                    note: None,
                },
            ),
            Err(e) => (
                Vec::new(),
                crate::model::operand::OperandSource {
                    status: "unreadable",
                    note: Some(crate::render::esc(&e.to_string())),
                },
            ),
        };
        inventory::attach_operands(&mut inv, &nodes, policy.as_ref(), pods, source);
        Ok(inv)
    })
}
