//! `gpuwl check`: arguments and entry point.

use std::path::PathBuf;

use crate::analysis::check::{Checker, Options};
use crate::error::{Error, ExitStatus, Result};
use crate::input;
use crate::model::operator::PolicyStatus;
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

Output: `MISMATCH=<node> <reason>` per disagreeing labelled node (sorted, exit 1),
else `OK=<number of labelled nodes>` (exit 0); warnings go to stderr as `warning:` lines
(--quiet drops them). Bad input: one line on stderr, exit 2.
-o json also reports the GPU Operator's own state per node (vgpu-config-failed,
mig-config-failed, config-pending, operand-paused, operands-disabled, label-ignored,
vgpu-config-type-differs, gpu-present-without-operands, label-without-gpu), per node the
effective workload and the operands the operator deploys, dra-and-device-plugin (with
--dra, or live) and the operator's operand pods with operand-not-ready (with --pods, or
live); they never change the exit code.")]
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
    /// Pods dump (`kubectl get pods -A -o json|yaml`): the GPU Operator's operand pods in it
    /// (driver, vfio-manager, vgpu-manager, device plugins, vgpu-device-manager,
    /// validators, ...) go into -o json|yaml per GPU node with ready / not-ready /
    /// crash-looping, and `operand-not-ready` when the device plugin of the node's
    /// workload is not ready. Live with -o json|yaml: listed from the cluster.
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
    /// Text mode: do not print warnings (stale "0", capacity above allocatable, unlabelled
    /// GPU node, operator state, ...) as `warning:` lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Runs `gpuwl check`: reads the nodes (streaming), judges them, prints the report.
///
/// Errors: [`Error::Input`] for bad input (nothing is printed on stdout);
/// [`Error::Runtime`] when the cluster cannot be reached or stdout fails (a closed pipe
/// is not a failure).
pub fn run(args: &Args) -> Result<ExitStatus> {
    let file_dra = args
        .dra
        .as_deref()
        .map(crate::input::dra::read_path)
        .transpose()?
        .map(|d| crate::analysis::check::DraNodes::from_objects(&d));
    let options = |policy: &PolicyStatus, dra: Option<crate::analysis::check::DraNodes>| Options {
        dra,
        ignore_resources: args.ignore_resource.clone(),
        // The text contract prints only MISMATCH lines or OK=<n>: keep nothing else, so a
        // 65,000-node dump needs no memory per agreeing node.
        mismatches_only: args.output == render::Format::Text,
        cluster_policy: policy.policy().cloned(),
        warning_lines: args.output == render::Format::Text && !args.quiet,
    };
    let (report, policy) = match &args.file {
        Some(path) => {
            crate::cli::explain::one_stdin(&[
                Some(path),
                args.cluster_policy.as_ref(),
                args.dra.as_ref(),
                args.pods.as_ref(),
            ])?;
            let policy = match &args.cluster_policy {
                Some(p) => crate::input::clusterpolicy::read_path(p)?,
                None => PolicyStatus::not_read(),
            };
            let mut checker = Checker::new(&options(&policy, file_dra.clone()));
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
            (report, policy)
        }
        None => args.live.block_on(|client| async move {
            // The ClusterPolicy read never fails (it waits up to its own timeout), so it
            // runs beside a one-node list that fails fast: a dead server costs one timeout.
            let ((), policy) = futures::try_join!(input::live::probe_nodes(&client), async {
                match &args.cluster_policy {
                    Some(p) => crate::input::clusterpolicy::read_path(p),
                    None => Ok(crate::input::clusterpolicy::from_cluster(&client).await),
                }
            })?;
            let mut denied = None;
            let dra = match &file_dra {
                Some(d) => Some(d.clone()),
                None => match crate::input::dra::list(&client).await? {
                    (d, crate::model::dra::DraSource::Cluster) => {
                        Some(crate::analysis::check::DraNodes::from_objects(&d))
                    }
                    (_, crate::model::dra::DraSource::Denied(why)) => {
                        denied = Some(why);
                        None
                    }
                    _ => None,
                },
            };
            let mut checker = Checker::new(&options(&policy, dra));
            input::live::for_each_node(&client, |n| checker.add(&n)).await?;
            let mut report = checker.finish();
            if args.output != render::Format::Text {
                let pods = match &args.pods {
                    Some(p) => crate::input::operands::read_path(p).map(|o| (o, "file")),
                    None => crate::input::operands::list(&client)
                        .await
                        .map(|o| (o, "cluster")),
                };
                report.operand_source = Some(match pods {
                    Ok((pods, status)) => {
                        crate::analysis::check::attach_operands(
                            &mut report,
                            &crate::model::operand::by_node(pods),
                        );
                        crate::model::operand::OperandSource { status, note: None }
                    }
                    Err(e @ Error::Input(_)) | Err(e @ Error::File { .. }) => return Err(e),
                    Err(e) => crate::model::operand::OperandSource {
                        status: "unreadable",
                        note: Some(crate::text::cut(&e.to_string())),
                    },
                });
            }
            if let Some(why) = denied
                && report.warning_lines.len() < crate::analysis::check::WARNING_LINES
                && args.output == render::Format::Text
                && !args.quiet
            {
                // Not a finding (the exit code stays), but never silent: a DRA-and-plugin
                // double count cannot be seen without these objects.
                report.warnings_total += 1;
                report.warning_lines.push(format!(
                    "DRA objects not read: {}; dra-and-device-plugin is not judged",
                    render::esc(&why)
                ));
            }
            Ok((report, policy))
        })?,
    };
    let warnings = render::check::warnings(&report);
    if !warnings.is_empty() {
        // stderr may be closed; the stdout contract matters, not the warnings.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), warnings.as_bytes());
    }
    let text = render::check::render(&report, &policy, args.output);
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the report", e))?;
    Ok(report.exit_status())
}
