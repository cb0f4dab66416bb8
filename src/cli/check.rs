//! `gpuwl check`: arguments and entry point.

use std::path::{Path, PathBuf};

use kube::Client;

use crate::analysis::check::{Checker, Code, DraNodes, Gate, Options, Report};
use crate::error::{Error, ExitStatus, Result};
use crate::input;
use crate::model::dra::DraSource;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;
use crate::render::{self, Format};

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
else `OK=<number of labelled nodes>` (exit 0). Bad input: one line on stderr, exit 2.
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
node fails (a context mix-up) unless --allow-empty. Output: `ERROR <code> <node>:
<message>`, `WARNING <code> <node>: <message>`, then `FAIL: ...` or `OK: ...`.
  gpuwl check --effective --expect-gpu-nodes 12    # a CronJob gate on the live cluster
  gpuwl check --effective nodes.json --cluster-policy cp.yaml
  gpuwl check --effective --fail-on config-pending --ignore stale-zero
Severities per code: docs/guide/check.md, \"Finding codes and severities\".")]
pub struct Args {
    /// Node dump: `kubectl get nodes -o json|yaml` (List/NodeList) or one Node, JSON or
    /// YAML (detected by content); `-` reads stdin. Omitted: the live cluster.
    #[arg(conflicts_with_all = ["kubeconfig", "context"])]
    pub file: Option<PathBuf>,
    /// Output format: text is the `MISMATCH=<node> <reason>` / `OK=<n>` lines; json and
    /// yaml add per-node findings with stable codes and severities.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Where the live cluster is (used when no file is given).
    #[command(flatten)]
    pub live: crate::input::live::ClusterArgs,
    /// Treat matching `nvidia.com/` resources as non-GPU and ignore them (repeatable).
    /// `*` and `?` wildcards; a glob with `/` matches the full name, else the part after
    /// `nvidia.com/`. Network Operator names (rdma_shared_device*, hostdev*, sriov*) are
    /// always ignored.
    #[arg(long = "ignore-resource", value_name = "GLOB")]
    pub ignore_resource: Vec<String>,
    /// The GPU Operator's ClusterPolicy (`kubectl get clusterpolicies -o yaml`): effective
    /// workload configs, and `label-ignored` when sandbox workloads are disabled. Live
    /// without it: read from the cluster (absent: inferred from the nodes' deploy labels).
    #[arg(long, value_name = "FILE")]
    pub cluster_policy: Option<PathBuf>,
    /// DRA objects (`kubectl get deviceclasses,resourceslices,resourceclaims -A -o
    /// json|yaml`): nodes whose GPUs NVIDIA's DRA driver publishes while a device plugin
    /// advertises them too get `dra-and-device-plugin`. Live without it: listed from the
    /// cluster when it serves resource.k8s.io/v1.
    #[arg(long, value_name = "FILE")]
    pub dra: Option<PathBuf>,
    /// Pod dump (`kubectl get pods -A -o json|yaml`): running pods that hold a GPU name
    /// their node no longer advertises are `orphaned-holder` findings (a warning); the GPU
    /// Operator's operand pods in it (driver, vfio-manager, vgpu-manager, device plugins,
    /// vgpu-device-manager, validators, ...) go into -o json|yaml per GPU node with ready /
    /// not-ready / crash-looping, and `operand-not-ready` when the device plugin of the
    /// node's workload is not ready. Live without it: pods are listed with -o json|yaml
    /// (and --effective, for orphaned-holder).
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
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
    /// (plain check still prints its OK=<n> line; the reason goes to stderr).
    #[arg(long, value_name = "N")]
    pub expect_gpu_nodes: Option<usize>,
    /// A `gpuwl snapshot` file: its nodes, ClusterPolicy and DRA objects in place of the
    /// node dump, --cluster-policy and --dra (no cluster is contacted).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["file", "cluster_policy", "dra", "kubeconfig", "context"])]
    pub snapshot: Option<PathBuf>,
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
fn denied_warning(
    report: &mut crate::analysis::check::Report,
    denied: Option<String>,
    args: &Args,
) {
    if let Some(why) = &denied
        && args.output != render::Format::Text
    {
        report.notes.push(format!(
            "DRA objects not read: {}; dra-and-device-plugin is not judged",
            render::esc(why)
        ));
    }
    if let Some(why) = denied
        && report.warning_lines.len() < crate::analysis::check::WARNING_LINES
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

/// Pods by the node they are bound to, as [`Options::pods`] holds them.
type PodsByNode = std::sync::Arc<std::collections::HashMap<String, Vec<PodInfo>>>;

/// Runs `gpuwl check`: reads the nodes (streaming), judges them, prints the report.
///
/// Errors: [`Error::Input`] for bad input (nothing is printed on stdout);
/// [`Error::Runtime`] when the cluster cannot be reached or stdout fails (a closed pipe
/// is not a failure).
pub fn run(args: &Args) -> Result<ExitStatus> {
    let gate = gate(args)?;
    crate::input::gather::one_stdin(&[
        args.file.as_ref(),
        args.cluster_policy.as_ref(),
        args.dra.as_ref(),
        args.pods.as_ref(),
    ])?;
    let file_pods = args
        .pods
        .as_deref()
        .map(crate::input::pods::read_pods_path)
        .transpose()?
        .map(|p| std::sync::Arc::new(crate::analysis::orphans::pods_by_node(p)));
    let file_dra = args
        .dra
        .as_deref()
        .map(crate::input::dra::read_path)
        .transpose()?
        .map(|d| DraNodes::from_objects(&d));
    let judge = Judge {
        args,
        want_pods: args.output != render::Format::Text || gate.is_some(),
        gate,
        file_pods,
        file_dra,
    };
    let (report, policy) = match (&args.file, &args.snapshot) {
        (_, Some(snap)) => judge.snapshot(snap)?,
        (Some(path), None) => judge.files(path)?,
        (None, None) => args
            .live
            .block_on(|client| async move { judge.cluster(&client).await })?,
    };
    print(&report, &policy, args)
}

/// What judging from any source shares: the arguments, the gate (`--effective`), the pods
/// and DRA objects read from `--pods` and `--dra`, and whether pods are wanted at all
/// (`-o json|yaml` or the gate: they feed orphaned-holder).
struct Judge<'a> {
    args: &'a Args,
    gate: Option<Gate>,
    want_pods: bool,
    file_pods: Option<PodsByNode>,
    file_dra: Option<DraNodes>,
}

impl Judge<'_> {
    /// The checker's options under `policy`, with `dra` and `pods` as read.
    fn options(
        &self,
        policy: &PolicyStatus,
        dra: Option<DraNodes>,
        pods: Option<PodsByNode>,
    ) -> Options {
        let args = self.args;
        Options {
            dra,
            pods,
            ignore_resources: args.ignore_resource.clone(),
            // The text contract prints only MISMATCH lines or OK=<n>: keep nothing else, so a
            // 65,000-node dump needs no memory per agreeing node.
            mismatches_only: args.output == render::Format::Text && self.gate.is_none(),
            cluster_policy: policy.policy().cloned(),
            warning_lines: args.output == render::Format::Text
                && !args.quiet
                && self.gate.is_none(),
            gate: self.gate.clone(),
            expect_gpu_nodes: args.expect_gpu_nodes,
        }
    }

    /// Judges a `gpuwl snapshot` file: its nodes, ClusterPolicy and DRA objects, and its
    /// pods when wanted (`--pods` wins).
    fn snapshot(&self, snap: &Path) -> Result<(Report, PolicyStatus)> {
        let loaded = crate::input::snapshot_file::load(snap)?.snapshot;
        let (dra, denied) = match &loaded.dra_source {
            DraSource::Cluster => (Some(DraNodes::from_objects(&loaded.dra)), None),
            DraSource::Denied(why) => (None, Some(why.clone())),
            _ => (None, None),
        };
        let pods = self.file_pods.clone().or_else(|| {
            self.want_pods.then(|| {
                std::sync::Arc::new(crate::analysis::orphans::pods_by_node(loaded.pods.clone()))
            })
        });
        let mut checker = Checker::new(&self.options(&loaded.policy, dra, pods));
        for n in &loaded.nodes {
            checker.add(n);
        }
        let mut report = checker.finish();
        denied_warning(&mut report, denied, self.args);
        Ok((report, loaded.policy))
    }

    /// Judges a node dump (streamed), with `--cluster-policy`, `--dra` and `--pods` (whose
    /// operand pods are attached to their nodes).
    fn files(&self, path: &PathBuf) -> Result<(Report, PolicyStatus)> {
        let args = self.args;
        crate::input::gather::one_stdin(&[
            Some(path),
            args.cluster_policy.as_ref(),
            args.dra.as_ref(),
            args.pods.as_ref(),
        ])?;
        let policy = match &args.cluster_policy {
            Some(p) => crate::input::clusterpolicy::read_path(p)?,
            None => PolicyStatus::not_read(),
        };
        let mut checker =
            Checker::new(&self.options(&policy, self.file_dra.clone(), self.file_pods.clone()));
        input::for_each_node(&input::Source::from_arg(path), |n| checker.add(&n))?;
        let mut report = checker.finish();
        if let Some(p) = &args.pods {
            let pods = crate::input::operands::read_path(p)?;
            crate::analysis::check::attach_operands(
                &mut report,
                &crate::model::operand::by_node(pods),
            );
            report.operand_source = Some(crate::model::operand::OperandSource {
                status: "file",
                note: None,
            });
        }
        Ok((report, policy))
    }

    /// Judges the live cluster: its nodes (streamed), its ClusterPolicy, DRA objects and
    /// pods unless given as files, and with `-o json|yaml` its operand pods.
    async fn cluster(&self, client: &Client) -> Result<(Report, PolicyStatus)> {
        let args = self.args;
        // The ClusterPolicy read never fails (it waits up to its own timeout), so it
        // runs beside a one-node list that fails fast: a dead server costs one timeout.
        let ((), policy) = futures::try_join!(input::live::probe_nodes(client), async {
            match &args.cluster_policy {
                Some(p) => crate::input::clusterpolicy::read_path(p),
                None => Ok(crate::input::clusterpolicy::from_cluster(client).await),
            }
        })?;
        let mut denied = None;
        let dra = match &self.file_dra {
            Some(d) => Some(d.clone()),
            None => match crate::input::dra::list(client).await? {
                (d, DraSource::Cluster) => Some(DraNodes::from_objects(&d)),
                (_, DraSource::Denied(why)) => {
                    denied = Some(why);
                    None
                }
                _ => None,
            },
        };
        let (pods, pods_note) = self.cluster_pods(client).await;
        let mut checker = Checker::new(&self.options(&policy, dra, pods));
        input::live::for_each_node(client, |n| checker.add(&n)).await?;
        let mut report = checker.finish();
        if let Some(note) = pods_note {
            if args.output == render::Format::Text {
                if !args.quiet {
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!("warning: {note}\n").as_bytes(),
                    );
                }
            } else {
                report.notes.push(note);
            }
        }
        if args.output != render::Format::Text {
            report.operand_source = Some(attach_cluster_operands(&mut report, args, client).await?);
        }
        denied_warning(&mut report, denied, args);
        Ok((report, policy))
    }

    /// The pods for orphaned-holder: `--pods`, else listed when wanted. Pods only feed
    /// orphaned-holder (a warning): credentials that may list nodes but not pods lose that
    /// finding, said in the returned note, not the whole check.
    async fn cluster_pods(&self, client: &Client) -> (Option<PodsByNode>, Option<String>) {
        match &self.file_pods {
            Some(p) => (Some(p.clone()), None),
            None if self.want_pods => match crate::input::pods::list_pods(client).await {
                Ok(p) => (
                    Some(std::sync::Arc::new(crate::analysis::orphans::pods_by_node(
                        p,
                    ))),
                    None,
                ),
                Err(e) => (
                    None,
                    Some(format!(
                        "pods not read ({}); orphaned-holder is not judged",
                        render::esc(&e.to_string())
                    )),
                ),
            },
            None => (None, None),
        }
    }
}

/// Attaches the GPU Operator's operand pods (`--pods`, else listed) to their nodes in
/// `report`; returns where they came from, or why they could not be read (`unreadable`).
///
/// Errors: a `--pods` file that does not read.
async fn attach_cluster_operands(
    report: &mut Report,
    args: &Args,
    client: &Client,
) -> Result<crate::model::operand::OperandSource> {
    let pods = match &args.pods {
        Some(p) => crate::input::operands::read_path(p).map(|o| (o, "file")),
        None => crate::input::operands::list(client)
            .await
            .map(|o| (o, "cluster")),
    };
    Ok(match pods {
        Ok((pods, status)) => {
            crate::analysis::check::attach_operands(report, &crate::model::operand::by_node(pods));
            crate::model::operand::OperandSource { status, note: None }
        }
        Err(e @ Error::Input(_)) | Err(e @ Error::File { .. }) => return Err(e),
        Err(e) => crate::model::operand::OperandSource {
            status: "unreadable",
            note: Some(crate::text::cut(&e.to_string())),
        },
    })
}

/// Prints the report: warnings (and, in plain text mode, why the GPU-node count fails or
/// is zero) on stderr, the report on stdout. Returns its exit status.
fn print(report: &Report, policy: &PolicyStatus, args: &Args) -> Result<ExitStatus> {
    let mut warnings = render::check::warnings(report);
    if report.gate.is_none() && args.output == render::Format::Text {
        // Plain check keeps the seed's stdout; why the count fails (or would fail the
        // gate) goes to stderr, even with --quiet when it changes the exit code.
        match report.too_few_gpu_nodes() {
            Some(why) => warnings.push_str(&format!("error: {why}\n")),
            None if report.gpu_nodes == 0 && !args.quiet => warnings.push_str(
                "note: 0 GPU nodes judged (no workload label, GPU resource or NFD GPU label): gpuwl check --effective fails on this unless --allow-empty — the wrong cluster or context?\n",
            ),
            None => {}
        }
    }
    if !warnings.is_empty() {
        // stderr may be closed; the stdout contract matters, not the warnings.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), warnings.as_bytes());
    }
    let text = render::check::render_with(report, policy, args.output, args.quiet);
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the report", e))?;
    Ok(report.exit_status())
}
