//! `gpuwl kubevirt generate|check`: KubeVirt's `permittedHostDevices` generated from, and
//! checked against, what the nodes advertise. Analysis in [`gpuwl_core::analysis::kubevirt`],
//! output in [`gpuwl_core::render::kubevirt`].

use std::path::Path;

use clap::Subcommand;

use crate::input::gather::args::{KubevirtCheckSource, KubevirtGenerateSource};
use crate::input::gather::{SourceArgs, Wanted, gather};
use gpuwl_core::analysis::kubevirt::{self, Advertised, PatchKind};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::kubevirt::HostDevicesSource;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::snapshot::From;
use gpuwl_core::render::kubevirt::PatchFormat;
use gpuwl_core::render::{self, Format, escape_controls};

/// The long help of `gpuwl kubevirt`.
pub const LONG_ABOUT: &str = "\
KubeVirt's permittedHostDevices, generated from and checked against what the nodes advertise.

A VM's GPU goes through one more list than a pod's: the KubeVirt CR (or OpenShift's
HyperConverged CR) must permit the exact resource name the GPU Operator's sandbox device
plugin advertises, or KubeVirt refuses the VMI: no virt-launcher pod, no scheduler message.
  passthrough  nvidia.com/GA102GL_A10     pciHostDevices  pciVendorSelector: \"10DE:2236\"
  vGPU         nvidia.com/NVIDIA_A10-12Q  mediatedDevices mdevNameSelector: \"NVIDIA A10-12Q\"
both with externalResourceProvider: true (the sandbox plugin, not KubeVirt, serves them).
HyperConverged spells the PCI selector pciDeviceSelector.";

/// Arguments of `gpuwl kubevirt`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl kubevirt generate > permit.yaml            # live: the nodes and the current CR
  kubectl patch kubevirt kubevirt -n kubevirt --type merge \\
      --patch-file permit.yaml
  gpuwl kubevirt generate --nodes nodes.json --kubevirt hco.yaml -o json
  gpuwl kubevirt check                             # live: nodes and the KubeVirt/HCO CR
  gpuwl kubevirt check --nodes nodes.json --kubevirt kubevirt.yaml -o json")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Sub,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Sub {
    /// Print a patch permitting every passthrough model and vGPU type nodes advertise, keeping every entry the CR has
    Generate(GenerateArgs),
    /// Check the CR's permittedHostDevices against the nodes (one line per finding)
    Check(CheckArgs),
}

/// Which CR the patch is for (`--for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Target {
    /// `kubevirt.io/v1` KubeVirt: spec.configuration.permittedHostDevices, pciVendorSelector.
    #[default]
    Kubevirt,
    /// `hco.kubevirt.io/v1beta1` HyperConverged: spec.permittedHostDevices, pciDeviceSelector.
    Hyperconverged,
}

impl Target {
    fn source(self) -> HostDevicesSource {
        match self {
            Target::Kubevirt => HostDevicesSource::KubeVirt,
            Target::Hyperconverged => HostDevicesSource::HyperConverged,
        }
    }
}

/// Arguments of `gpuwl kubevirt generate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl kubevirt generate > permit.yaml            # live: the nodes and the current CR
  kubectl patch kubevirt kubevirt -n kubevirt --type merge \\
      --patch-file permit.yaml
  gpuwl kubevirt generate --nodes nodes.json --kubevirt kubevirt.yaml
  gpuwl kubevirt generate --nodes nodes.json --patch json-add -o json > add.json
  kubectl patch kubevirt kubevirt -n kubevirt --type json --patch-file add.json

Names: every nvidia.com/ passthrough model and vGPU type some node advertises (allocatable > 0),
whatever its label. A passthrough name gets one pciHostDevices entry per PCI id its pci.ids name
stands for (GA102GL_A10 -> 10DE:2236; hex 26b5 -> 10DE:26B5; several ids: a note on stderr);
a vGPU type gets mdevNameSelector = the type with _ -> space (NVIDIA_A10-12Q -> NVIDIA A10-12Q).
A name the CR already lists (either list, any selector) gets no entry: `kubevirt check` judges it.

Never wipes: a merge patch replaces a list whole, so --patch merged (the default) carries each
list it changes whole — the CR's current entries as read (other vendors' devices included), then
the new ones — with the CR's resourceVersion: if the CR changed since it was read, the API server
refuses the patch (409 Conflict) instead of dropping what was added meanwhile. It needs the current
CR: live, or --kubevirt FILE with --nodes. --patch json-add prints JSON-patch add operations that
append; with the CR known, a test of its resourceVersion first and missing lists created; without
it, appends only (they fail, changing nothing, where a list does not exist yet).
Bad input, or no CR for --patch merged: one line on stderr, exit 2. Cluster unreachable: exit 3.")]
pub(crate) struct GenerateArgs {
    /// The nodes and the current CR: a node dump, a snapshot file or the live cluster, and
    /// the CR from a file or the live cluster.
    #[command(flatten)]
    pub source: SourceArgs<KubevirtGenerateSource>,
    /// The kind of patch: `merged` (a merge patch carrying each changed list whole, current
    /// entries kept; needs the CR) or `json-add` (JSON-patch add operations).
    #[arg(long, value_enum, default_value_t = PatchKind::Merged)]
    pub patch: PatchKind,
    /// The CR the patch is for (default: the kind of the CR read, else kubevirt).
    #[arg(long = "for", value_enum)]
    pub target: Option<Target>,
    /// Output format (the JSON patch's apply hint goes to stderr).
    #[arg(short = 'o', long, value_enum, default_value_t = PatchFormat::Yaml)]
    pub output: PatchFormat,
}

/// Arguments of `gpuwl kubevirt check`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl kubevirt check                             # live: nodes, and the HyperConverged CR if
                                                   # there is one, else the KubeVirt CR
  gpuwl kubevirt check --kubevirt kubevirt.yaml    # live nodes, the CR from a file
  gpuwl kubevirt check --nodes nodes.json --kubevirt kubevirt.yaml -o json

Findings (code, severity), one line each: `ERROR <code> <resource>: <what>; <fix>`:
  advertised-not-permitted (error)       a node advertises it, the CR does not permit it
  permitted-not-advertised (warning)     permitted, no node advertises it (did you mean ...?)
  internal-provider-for-operator-resource (error)
                                         externalResourceProvider false/absent for an
                                         advertised name: KubeVirt runs a second device plugin
  selector-mismatch (error)              the PCI selector is not the name's PCI id (case is
                                         ignored), mdevNameSelector not its type, wrong list
  duplicate-resource-name (error)        listed twice (one pciHostDevices entry per PCI id is
                                         fine)
Exit 1 when any error, else 0 and one `OK: ...` line. Bad input or no CR found: one line on
stderr, exit 2. Cluster unreachable: exit 3.")]
pub(crate) struct CheckArgs {
    /// The nodes and the CR: a node dump with the CR file, a snapshot file, or the live
    /// cluster (the CR from a file or the cluster).
    #[command(flatten)]
    pub source: SourceArgs<KubevirtCheckSource>,
    /// Output format: text lines, or JSON/YAML with findings[] (code, severity, resource,
    /// message, suggestion).
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Runs `gpuwl kubevirt`.
///
/// Errors: as [`generate`] and [`check`].
pub fn run(args: &Args) -> Result<ExitStatus> {
    match &args.command {
        Sub::Generate(a) => generate(a),
        Sub::Check(a) => check(a),
    }
}

/// What the nodes advertise; a malformed GPU quantity names `from` (the file).
fn advertised(nodes: &[NodeInfo], from: &str) -> Result<Advertised> {
    Advertised::of(nodes).map_err(|e| e.in_file(Path::new(from)))
}

/// How a malformed GPU quantity names where the nodes came from.
fn shown(from: &From) -> String {
    match from {
        From::Files(p) => gpuwl_core::decode::dump::Source::from_arg(p).to_string(),
        From::Snapshot(p) => p.display().to_string(),
        // (No node dump means the live cluster here: `WithoutNodes` is explain's.)
        From::Cluster | From::WithoutNodes => "cluster".into(),
    }
}

fn eprint_line(line: &str) {
    eprintln!("gpuwl: {}", escape_controls(line));
}

/// Runs `gpuwl kubevirt generate`: prints the patch ([`kubevirt::safe_patch`]) on stdout;
/// notes (several PCI ids for one name, no known id, names the CR lists already) and, for
/// JSON, how to apply it on stderr.
///
/// Errors: [`Error::Input`] for a bad node dump or CR (naming the file and field), `--for`
/// contradicting the CR read, or no CR for `--patch merged`; [`Error::Runtime`] when the
/// cluster cannot be reached or stdout fails.
pub(crate) fn generate(args: &GenerateArgs) -> Result<ExitStatus> {
    let wanted = Wanted {
        kubevirt: true,
        kubevirt_kind: args.target.map(|t| match t {
            Target::Kubevirt => gpuwl_core::decode::kubevirt::KUBEVIRT,
            Target::Hyperconverged => gpuwl_core::decode::kubevirt::HYPERCONVERGED,
        }),
        ..Wanted::default()
    };
    let g = gather(&args.source.request(), wanted)?;
    let adv = advertised(&g.snapshot.nodes, &shown(&g.snapshot.from))?;
    let cr = g.kubevirt_cr();
    let live = g.snapshot.from == From::Cluster;
    let target = match (args.target, &cr) {
        (Some(t), Some(c)) if t.source() != c.devices.source => {
            return Err(Error::Input(format!(
                "kubevirt generate: --for {} but the CR read is {} {}",
                match t {
                    Target::Kubevirt => "kubevirt",
                    Target::Hyperconverged => "hyperconverged",
                },
                kubevirt::kind_name(c.devices.source),
                gpuwl_core::decode::document::cut(&c.devices.object)
            )));
        }
        (Some(t), _) => t.source(),
        (None, Some(c)) => c.devices.source,
        (None, None) => HostDevicesSource::KubeVirt,
    };
    if cr.is_none() && args.patch == PatchKind::Merged {
        return Err(Error::Input(format!(
            "kubevirt generate: the merged list needs the CR's current entries, and {}; pass \
             --kubevirt FILE (kubectl get kubevirt -A -o yaml), or --patch json-add to append \
             without it",
            if live {
                "the cluster has no KubeVirt or HyperConverged CR"
            } else {
                "--nodes or --snapshot was given without --kubevirt"
            }
        )));
    }
    let plan = kubevirt::generate(&adv);
    let patch = kubevirt::safe_patch(&plan, target, args.patch, cr.as_ref());
    let object = cr.as_ref().map(|c| c.devices.object.as_str());
    let text = render::kubevirt::render_safe_patch(&patch, target, object, args.output);
    for n in &plan.notes {
        eprint_line(n);
    }
    if adv.vm_names().next().is_none() {
        eprint_line(
            "no node advertises a passthrough model or vGPU type: the patch permits nothing",
        );
    }
    for r in &patch.already {
        eprint_line(&format!(
            "{r}: already listed in {} {}: left as it is (`gpuwl kubevirt check` judges it)",
            kubevirt::kind_name(target),
            object.unwrap_or("")
        ));
    }
    if cr.is_none() && patch.added > 0 {
        eprint_line(
            "no CR read: every entry is appended; a name the CR lists already is listed twice, and \
             the patch fails (changing nothing) where a list does not exist yet",
        );
    }
    if adv.vm_names().next().is_some() && patch.added == 0 {
        eprint_line("nothing to add: the CR lists every advertised name already");
    }
    if args.output == PatchFormat::Json && patch.added > 0 {
        eprint_line(&format!(
            "Apply: {}",
            render::kubevirt::safe_apply_command(args.patch, target, object)
        ));
    }
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the patch", e))?;
    Ok(ExitStatus::Ok)
}

/// Runs `gpuwl kubevirt check`: prints the findings; exit 1 when any is an error.
///
/// Errors: [`Error::Input`] for bad files, several CRs in the cluster, or none at all
/// ("no KubeVirt CR found; pass --kubevirt FILE"); [`Error::Runtime`] when the cluster
/// cannot be reached or stdout fails.
pub(crate) fn check(args: &CheckArgs) -> Result<ExitStatus> {
    let no_cr = || {
        Error::Input(format!(
            "no KubeVirt CR found ({}.{} and {}.{}: none in any namespace); pass \
             --kubevirt FILE",
            gpuwl_core::decode::kubevirt::KUBEVIRT.plural,
            gpuwl_core::decode::kubevirt::KUBEVIRT.group,
            gpuwl_core::decode::kubevirt::HYPERCONVERGED.plural,
            gpuwl_core::decode::kubevirt::HYPERCONVERGED.group,
        ))
    };
    let wanted = Wanted {
        kubevirt: true,
        ..Wanted::default()
    };
    let g = gather(&args.source.request(), wanted)?;
    let kv = g.snapshot.kubevirt.ok_or_else(no_cr)?;
    let adv = advertised(&g.snapshot.nodes, &shown(&g.snapshot.from))?;
    let report = kubevirt::check(&adv, &kv);
    let text = render::kubevirt::render_report(&report, args.output);
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the report", e))?;
    Ok(if report.ok() {
        ExitStatus::Ok
    } else {
        ExitStatus::Mismatch
    })
}
