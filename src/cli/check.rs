//! `gpuwl check`: arguments and entry point.

use crate::input::gather::args::CheckSource;
use crate::input::gather::{self, Gathered, Operands, SourceArgs, Wanted};
use gpuwl_core::analysis::check::{
    self, Checker, Code, DraNodes, Gate, Options, Report, WARNING_LINES,
};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::dra::DraSource;
use gpuwl_core::model::operand::{self, OperandPod, OperandSource};
use gpuwl_core::model::operator::PolicyStatus;
use gpuwl_core::render::{self, Format};
use gpuwl_core::text;

/// Arguments of `gpuwl check`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl check nodes.json                 # a `kubectl get nodes -o json` dump
  kubectl get nodes -o yaml | gpuwl check -
  gpuwl check                            # the live cluster (current kubeconfig context)
  gpuwl check --context prod -o json     # findings with codes and severities
  gpuwl check nodes.json --ignore-resource 'mellanox_*'
  gpuwl check --snapshot prod.tar         # a `gpuwl snapshot` file, no cluster contacted

Output: `MISMATCH=<node> <reason>` per disagreeing labelled node (sorted, exit 1),
else `OK=<number of labelled nodes>` (exit 0); with --expect-gpu-nodes N and fewer GPU
nodes, a last line `FAIL=<why>` instead of OK= (exit 1). Bad input: one line on stderr, exit 2.
Findings the MISMATCH lines do not carry go to stderr as `warning: <node>: ...` lines, or
`note: <node>: ...` for an error the gate (--effective) fails on (--quiet drops them); they
never change plain check's exit code. With -o json|yaml they are in the document only
(stderr stays quiet; `notes` says what could not be read). Plain check is the seed's label
contract; for a CI gate use --effective (below).
-o json also reports the GPU Operator's own state per node (vgpu-config-failed,
mig-config-failed, config-pending, operand-paused, operands-disabled, label-ignored,
vgpu-config-type-differs, gpu-present-without-operands, label-without-gpu), per node the
effective workload and the operands the operator deploys, effective-workload-differs,
orphaned-holder and the operator's operand pods with operand-not-ready (both with --pods,
or live), and dra-and-device-plugin (with --dra, or live), each with its severity.

As a gate (--effective, THE gate to automate): every GPU node (workload label, a GPU resource listed, NFD / GPU
Feature Discovery / GPU Operator GPU labels; not a node NFD shows without an NVIDIA GPU,
nor one where only the workload label is there: the operator never reads it, a
label-without-gpu warning) is judged by the workload the GPU Operator applies to it (label, ClusterPolicy defaultWorkload and sandboxWorkloads.enabled,
gpu.deploy.* labels). Every error fails (exit 1): a label typo, a node advertising names
its workload does not serve, an unlabelled or ignored-label node advertising names the
operator is about to replace (effective-workload-differs), a failed vGPU/MIG config. A
planned transition (mig.config.state / vgpu.config.state pending or rebooting, operands
paused for it) is a warning and passes. A VM (or, after a class change, any pod) holding
a GPU name its node no longer advertises is an error (holder-at-risk). Judging no GPU
node fails (a context mix-up) unless --allow-empty. The quota layer, when Kueue's objects
are there (live, --kueue FILE, or a snapshot's): a ClusterQueue's GPU quota in a flavor whose
nodes do not advertise that name is an error (kueue-quota-not-advertised); a flavor with GPU
quota selecting no GPU node (kueue-flavor-no-gpu-node) or GPU nodes of several pools
(kueue-flavor-spans-pools), and quota above what the flavor's nodes advertise
(kueue-quota-above-capacity), are warnings. Output: `ERROR <code> <node>:
<message>`, `WARNING <code> <node>: <message>`, then `FAIL: ...` or `OK: ...`.
  gpuwl check --effective --expect-gpu-nodes 12    # a CronJob gate on the live cluster
  gpuwl check --effective nodes.json --cluster-policy cp.yaml
  gpuwl check --effective --fail-on config-pending --ignore stale-zero
  gpuwl check --effective nodes.json --kueue kueue.yaml   # Kueue's flavors against the nodes
Severities per code: docs/guide/check.md, \"Finding codes and severities\".")]
pub struct Args {
    /// The data source: a node dump (FILE) and the files beside it, a snapshot file, or
    /// the live cluster.
    #[command(flatten)]
    pub source: SourceArgs<CheckSource>,
    /// Output format: text is the `MISMATCH=<node> <reason>` / `OK=<n>` lines; json and
    /// yaml add per-node findings with stable codes and severities.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Treat matching `nvidia.com/` resources as non-GPU and ignore them (repeatable).
    /// `*` and `?` wildcards; a glob with `/` matches the full name, else the part after
    /// `nvidia.com/`. Network Operator names (rdma_shared_device*, hostdev*, sriov*) are
    /// always ignored.
    #[arg(long = "ignore-resource", value_name = "GLOB")]
    pub ignore_resource: Vec<String>,
    /// Text mode: do not print the findings that leave the verdict alone (stale "0",
    /// capacity above allocatable, unlabelled GPU node, operator state, ...) as `warning:` /
    /// `error:` lines on stderr; with --effective, leave out the WARNING lines.
    #[arg(short, long)]
    pub quiet: bool,
    /// Gate mode: judge every GPU node by the workload the GPU Operator applies to it (not
    /// only labelled ones) and exit 1 on any error finding (warnings pass). Replaces the
    /// MISMATCH=/OK= lines with ERROR/WARNING lines and a FAIL:/OK: summary.
    #[arg(long)]
    pub effective: bool,
    /// With --effective: these codes fail too, whatever their severity (comma-separated or
    /// repeated), e.g. `config-pending` to fail during a MIG change.
    #[arg(long, value_name = "CODE", value_delimiter = ',', requires = "effective",
          value_parser = code_parser())]
    pub fail_on: Vec<String>,
    /// With --effective: drop these codes' findings (never fail, not reported).
    #[arg(long, value_name = "CODE", value_delimiter = ',', requires = "effective",
          value_parser = code_parser())]
    pub ignore: Vec<String>,
    /// With --effective: judging no GPU node at all passes (without it, it fails: a gate
    /// pointed at the wrong cluster must not be green).
    #[arg(long, requires = "effective")]
    pub allow_empty: bool,
    /// Fail (exit 1) when fewer GPU nodes than N are judged, with or without --effective
    /// (plain check then prints `FAIL=<why>` on stdout instead of its OK=N line).
    #[arg(long, value_name = "N")]
    pub expect_gpu_nodes: Option<usize>,
}

/// The finding codes, as `--fail-on` / `--ignore` accept them (listed in `--help` and
/// completed by the shell completions).
fn code_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Code::ALL.map(Code::as_str))
}

/// The gate of `args`, when `--effective` is given. Errors: a code both failed on and
/// ignored (exit 2).
fn gate(args: &Args) -> Result<Option<Gate>> {
    if !args.effective {
        return Ok(None);
    }
    let codes = |v: &[String]| -> std::collections::BTreeSet<Code> {
        v.iter().filter_map(|c| Code::parse(c)).collect()
    };
    let g = Gate {
        fail_on: codes(&args.fail_on),
        ignore: codes(&args.ignore),
        allow_empty: args.allow_empty,
    };
    if let Some(c) = g.fail_on.intersection(&g.ignore).next() {
        return Err(Error::Input(format!(
            "--fail-on and --ignore both name {c}; give it to one of them"
        )));
    }
    Ok(Some(g))
}

/// Adds the warning that DRA objects could not be listed (`denied`: why), in text mode
/// without --quiet (with `-o json|yaml`: a note in the document). Not a finding (the exit code stays), but never silent: a
/// DRA-and-plugin double count cannot be seen without these objects.
fn denied_warning(report: &mut Report, denied: Option<String>, args: &Args) {
    if let Some(why) = &denied
        && args.output != render::Format::Text
    {
        report.notes.push(format!(
            "DRA objects not read: {}; dra-and-device-plugin is not judged",
            render::esc(why)
        ));
    }
    if let Some(why) = denied
        && report.warning_lines.len() < WARNING_LINES
        && args.output == render::Format::Text
        && !args.quiet
    {
        report.warnings_total += 1;
        report.warning_lines.push(format!(
            "warning: DRA objects not read: {}; dra-and-device-plugin is not judged",
            render::esc(&why)
        ));
    }
}

/// Runs `gpuwl check`: gathers the source with its nodes streamed through the checker
/// (a node dump or the live cluster is never held whole), completes the report with what
/// was gathered beside the nodes, prints it.
///
/// Errors: [`Error::Input`] for bad input (nothing is printed on stdout);
/// [`Error::Runtime`] when the cluster cannot be reached or stdout fails (a closed pipe
/// is not a failure).
pub fn run(args: &Args) -> Result<ExitStatus> {
    let gate = gate(args)?;
    let text = args.output == render::Format::Text;
    let wanted = Wanted {
        // Pods feed orphaned-holder: in the document (-o json|yaml) and the gate.
        pods: !text || gate.is_some(),
        operands: match text {
            true => Operands::BesideNodeDump,
            false => Operands::Yes,
        },
        // The quota layer (Kueue's flavors and ClusterQueues) is judged whenever it is
        // there: a cluster without Kueue answers 404 at once.
        kueue: true,
        ..Wanted::default()
    };
    let (checker, mut g) = gather::stream(
        &args.source.request(),
        wanted,
        |g| Checker::new(&options(args, gate, g)),
        |c, n| c.add(&n),
    )?;
    let mut report = checker.finish();
    complete(&mut report, &mut g, args);
    print(&report, &g.snapshot.policy, args)
}

/// The checker's options for what was gathered: its ClusterPolicy, DRA objects (read or
/// listed) and pods (taken out of `g`, by node).
fn options(args: &Args, gate: Option<Gate>, g: &mut Gathered) -> Options {
    let dra = g.snapshot.usable_dra().map(DraNodes::from_objects);
    let pods = g
        .snapshot
        .pods
        .take()
        .map(|p| std::sync::Arc::new(gpuwl_core::model::pod::by_node(p)));
    Options {
        dra,
        pods,
        ignore_resources: args.ignore_resource.clone(),
        // The text contract prints only MISMATCH lines or OK=<n>: keep nothing else, so a
        // 65,000-node dump needs no memory per agreeing node.
        mismatches_only: args.output == render::Format::Text && gate.is_none(),
        cluster_policy: g.snapshot.policy.policy().cloned(),
        warning_lines: args.output == render::Format::Text && !args.quiet && gate.is_none(),
        gate,
        expect_gpu_nodes: args.expect_gpu_nodes,
        kueue: g.snapshot.kueue.clone(),
    }
}

/// Completes the report with what was gathered beside the nodes: why the pods could not
/// be listed (a warning line, which render writes on stderr in text mode, else a note),
/// the GPU Operator's operand pods on their nodes, why the DRA objects could not be listed.
fn complete(report: &mut Report, g: &mut Gathered, args: &Args) {
    if let Some(e) = &g.pods_error {
        // Pods only feed orphaned-holder (a warning): credentials that may list nodes but
        // not pods lose that finding, said here, not the whole check.
        let note = format!(
            "pods not read ({}); orphaned-holder is not judged",
            render::esc(&e.to_string())
        );
        if args.output == render::Format::Text {
            // The first warning line (render writes them), whatever the cap on node ones.
            if !args.quiet {
                report.warnings_total += 1;
                report.warning_lines.insert(0, format!("warning: {note}"));
            }
        } else {
            report.notes.push(note);
        }
    }
    if let Some(operands) = g.snapshot.operands.take() {
        report.operand_source = Some(attach_operands(report, operands, args));
    }
    let denied = match &g.snapshot.dra {
        Some((_, DraSource::Denied(why))) => Some(why.clone()),
        _ => None,
    };
    denied_warning(report, denied, args);
}

/// Attaches the GPU Operator's operand pods (from `--pods`, else listed) to their nodes in
/// `report`; returns where they came from, or why they could not be listed (`unreadable`).
fn attach_operands(
    report: &mut Report,
    operands: Result<Vec<OperandPod>>,
    args: &Args,
) -> OperandSource {
    match operands {
        Ok(pods) => {
            check::attach_operands(report, &operand::by_node(pods));
            OperandSource {
                status: match args.source.pods {
                    Some(_) => "file",
                    None => "cluster",
                },
                note: None,
            }
        }
        Err(e) => OperandSource {
            status: "unreadable",
            note: Some(text::cut(&e.to_string())),
        },
    }
}

/// Prints the report: warnings (and, in plain text mode, a note when no GPU node was
/// judged) on stderr, the report on stdout. Returns its exit status.
fn print(report: &Report, policy: &PolicyStatus, args: &Args) -> Result<ExitStatus> {
    let mut warnings = render::check::warnings(report);
    if report.gate.is_none()
        && args.output == render::Format::Text
        && report.too_few_gpu_nodes().is_none()
        && report.gpu_nodes == 0
        && !args.quiet
    {
        // Why the count fails is stdout's `FAIL=` line (Report::seed_lines); that the gate
        // would fail on an empty judgment is a note here. It states the criterion, so it
        // holds beside a MISMATCH line of a labelled node that shows no GPU.
        warnings.push_str(&format!(
            "note: none of the {} node(s) read is a GPU node (a GPU resource, NFD's or the GPU Operator's GPU labels; a workload label alone is not one): gpuwl check --effective fails on this unless --allow-empty — the wrong cluster or context?\n",
            report.nodes_seen
        ));
    }
    if !warnings.is_empty() {
        // stderr may be closed; the stdout contract matters, not the warnings.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), warnings.as_bytes());
    }
    let text = render::check::render_with(report, policy, args.output, args.quiet);
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the report", e))?;
    Ok(report.exit_status())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use gpuwl_core::model::snapshot::Snapshot;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(flags: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("check").chain(flags.iter().copied()))
            .unwrap()
            .args
    }

    /// What `stream` gathers from a cluster whose credentials may list nodes but not pods.
    fn without_pods() -> Gathered {
        Gathered {
            snapshot: Snapshot {
                pods: None,
                ..Snapshot::of_cluster(Vec::new(), Vec::new(), PolicyStatus::not_read())
            },
            pods_error: Some(Error::Runtime("list pods: pods is forbidden".into())),
            kubevirt_object: None,
            object: None,
        }
    }

    #[test]
    fn pods_not_listed_is_the_first_warning_line_in_text_and_a_note_in_json() {
        let node_warning = "warning: node gpu-1: stale-zero".to_string();
        let text = args(&[]);
        let mut report = Report {
            warning_lines: vec![node_warning.clone()],
            warnings_total: 3,
            ..Report::default()
        };
        complete(&mut report, &mut without_pods(), &text);
        let said =
            "warning: pods not read (list pods: pods is forbidden); orphaned-holder is not judged";
        assert_eq!(report.warning_lines, [said.to_string(), node_warning]);
        // Render writes it, first, and the "… more" count is unchanged (3 - 1 = 2 more).
        let stderr = render::check::warnings(&report);
        assert!(stderr.starts_with(&format!("{said}\n")), "{stderr}");
        assert!(stderr.ends_with("… and 2 more (gpuwl check -o json lists them all)\n"));
        assert!(report.notes.is_empty());
        // -q: nothing; -o json: a note, no warning line.
        let mut quiet = Report::default();
        complete(&mut quiet, &mut without_pods(), &args(&["-q"]));
        assert!(quiet.warning_lines.is_empty() && quiet.notes.is_empty());
        let mut json = Report::default();
        complete(&mut json, &mut without_pods(), &args(&["-o", "json"]));
        assert!(json.warning_lines.is_empty());
        assert_eq!(
            json.notes,
            ["pods not read (list pods: pods is forbidden); orphaned-holder is not judged"]
        );
    }
}
