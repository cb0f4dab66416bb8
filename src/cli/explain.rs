//! `gpuwl explain`: arguments and entry point.

use std::path::PathBuf;

use crate::analysis::explain;
use crate::error::{Error, ExitStatus, Result};
use crate::input::{self, pods};
use crate::model::pod::PodInfo;
use crate::render::{self, Format};

/// Arguments of `gpuwl explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl explain pod gpu-vm/job-cross                       # live cluster
  gpuwl explain --pod pod.yaml --nodes nodes.json          # a manifest against a node dump
  gpuwl explain --pod vmi.yaml --nodes nodes.json          # a KubeVirt VMI (devices.gpus)
  gpuwl explain pod gpu-vm/job-cross --pods pods.json --nodes nodes.json
  gpuwl explain --pod vm.yaml --nodes nodes.json --pods pods.json --kubevirt kubevirt.yaml

For each extended resource the pod requests: the nodes that advertise it (non-zero) and what is
free there, or the closest advertised names; how nodeSelector, required node affinity and
taints narrow the nodes; stale zeros; the scheduler's PodScheduled message; then one cause with
a stable code (`-o json` key causeCode: scheduled, no-gpu-request, not-permitted, no-node-data,
node-conditions, unadvertised-name, stale-only, excluded, not-co-located, too-large, in-use,
insufficient, fits-now) and one fix. \"Did you mean\" offers the same hardware under another
naming rule (time-slicing .shared, MIG, the sandbox plugin's pci.ids name, GRID_/NVIDIA_ vGPU
prefixes) before plain typos.")]
pub struct Args {
    /// `pod NAMESPACE/NAME` (or just `NAMESPACE/NAME`); with --pod FILE it may be omitted.
    #[arg(value_name = "pod NAMESPACE/NAME", num_args = 0..=2)]
    pub target: Vec<String>,
    /// A Pod, VirtualMachineInstance or VirtualMachine manifest (JSON or YAML), or a list
    /// holding the target; `-` reads stdin.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub pod: Option<PathBuf>,
    /// Node dump (`kubectl get nodes -o json|yaml`) to explain against.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub nodes: Option<PathBuf>,
    /// Pod dump (`kubectl get pods -A -o json|yaml`) for allocations; also where the
    /// target is looked up when --pod is absent.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub pods: Option<PathBuf>,
    /// KubeVirt or HyperConverged CR (`kubectl get kubevirt -A -o yaml`): whether a VMI's
    /// GPU and host-device names are in its permittedHostDevices.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub kubevirt: Option<PathBuf>,
    /// The GPU Operator's ClusterPolicy (`kubectl get clusterpolicies -o yaml`), for the
    /// effective workload configs of the nodes.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub cluster_policy: Option<PathBuf>,
    /// Output format: text is one screen (requests, the nodes advertising them,
    /// constraints, cause, fix); json and yaml carry the whole explanation.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Where the live cluster is (used when no file is given).
    #[command(flatten)]
    pub live: crate::cli::LiveArgs,
}

/// Parses the positional target: `[pod|pods|po|vmi] [NAMESPACE/]NAME`.
///
/// Errors: [`Error::Input`] on an unknown kind or more than one name.
pub fn parse_target(target: &[String]) -> Result<Option<(String, String)>> {
    let rest: &[String] = match target.first().map(String::as_str) {
        Some("pod" | "pods" | "po" | "vmi" | "virtualmachineinstance") => &target[1..],
        _ => target,
    };
    match rest {
        [] => Ok(None),
        [one] if !one.is_empty() => Ok(Some(match one.split_once('/') {
            Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => {
                (ns.to_owned(), n.to_owned())
            }
            Some(_) => {
                return Err(Error::Input(format!(
                    "explain: {one:?} is not NAMESPACE/NAME"
                )));
            }
            None => ("default".to_owned(), one.clone()),
        })),
        _ => Err(Error::Input(format!(
            "explain: expected `pod NAMESPACE/NAME`, got {:?}",
            target.join(" ")
        ))),
    }
}

/// Fails when more than one of `files` is `-`: stdin can be read only once (the second
/// reader would see it empty and report a confusing "empty input").
///
/// Errors: [`Error::Input`] naming the problem.
pub fn one_stdin(files: &[Option<&PathBuf>]) -> Result<()> {
    if files
        .iter()
        .flatten()
        .filter(|p| p.as_os_str() == "-")
        .count()
        > 1
    {
        return Err(Error::Input(
            "only one of the dump files can be `-` (stdin is read once)".into(),
        ));
    }
    Ok(())
}

fn pick(
    list: Vec<PodInfo>,
    target: Option<&(String, String)>,
    file: &std::path::Path,
) -> Result<PodInfo> {
    match target {
        Some((ns, name)) => list
            .into_iter()
            .find(|p| &p.namespace == ns && &p.name == name)
            .ok_or_else(|| Error::Input(format!("{}: no pod {ns}/{name}", file.display()))),
        None => {
            let n = list.len();
            let mut it = list.into_iter();
            match (it.next(), n) {
                (Some(p), 1) => Ok(p),
                (None, _) => Err(Error::Input(format!(
                    "{}: no pod in the file",
                    file.display()
                ))),
                _ => Err(Error::Input(format!(
                    "{}: {n} objects: name one as `pod NAMESPACE/NAME`",
                    file.display()
                ))),
            }
        }
    }
}

/// Runs `gpuwl explain`.
///
/// Errors: [`Error::Input`] for bad files, a missing target or an unknown pod;
/// [`Error::Runtime`] when the cluster cannot be reached or stdout fails.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let target = parse_target(&args.target)?;
    one_stdin(&[
        args.pod.as_ref(),
        args.nodes.as_ref(),
        args.pods.as_ref(),
        args.kubevirt.as_ref(),
        args.cluster_policy.as_ref(),
    ])?;
    let offline = args.pod.is_some()
        || args.nodes.is_some()
        || args.pods.is_some()
        || args.kubevirt.is_some()
        || args.cluster_policy.is_some();
    let e = if offline {
        let all_pods = args.pods.as_deref().map(pods::read_pods_path).transpose()?;
        let pod = match (&args.pod, &all_pods, &args.pods) {
            (Some(f), _, _) => pick(pods::read_pods_path(f)?, target.as_ref(), f)?,
            (None, Some(list), Some(f)) if target.is_some() => {
                pick(list.clone(), target.as_ref(), f)?
            }
            _ => {
                return Err(Error::Input(
                    "explain: give --pod FILE, or `pod NAMESPACE/NAME` with --pods FILE, or neither for the live cluster".into(),
                ));
            }
        };
        let nodes = args
            .nodes
            .as_deref()
            .map(|p| input::read_nodes(&input::Source::from_arg(p)))
            .transpose()?;
        let kubevirt = args
            .kubevirt
            .as_deref()
            .map(input::kubevirt::read_path)
            .transpose()?;
        let policy = args
            .cluster_policy
            .as_deref()
            .map(crate::input::clusterpolicy::read_path)
            .transpose()?;
        let inputs = explain::Inputs {
            cluster_policy: policy.as_ref().and_then(|p| p.policy()),
            nodes: nodes.as_deref(),
            pods: all_pods.as_deref(),
            kubevirt: kubevirt.as_ref(),
        };
        explain::explain(&pod, inputs).map_err(|e| match (e, &args.nodes) {
            (Error::Input(m), Some(f)) => Error::Input(format!("{}: {m}", f.display())),
            (e, _) => e,
        })?
    } else {
        let Some((ns, name)) = target else {
            return Err(Error::Input(
                "explain: name the pod (`gpuwl explain pod NAMESPACE/NAME`) or give --pod FILE"
                    .into(),
            ));
        };
        args.live
            .block_on(|client| async move { explain::from_cluster(&client, &ns, &name).await })?
    };
    let text = render::explain::render(&e, args.output);
    render::write_stdout(text.as_bytes())
        .map_err(|e| Error::Runtime(format!("writing the explanation: {e}")))?;
    Ok(ExitStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = |v: &[&str]| parse_target(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            t(&["pod", "gpu-vm/job-cross"]).unwrap(),
            Some(("gpu-vm".into(), "job-cross".into()))
        );
        assert_eq!(t(&["p1"]).unwrap(), Some(("default".into(), "p1".into())));
        assert_eq!(t(&["pod"]).unwrap(), None);
        assert!(t(&["pod", "a/b/c"]).is_err());
        assert!(t(&["node", "x"]).is_err());
    }
}
