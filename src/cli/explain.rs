//! `gpuwl explain`: arguments and entry point.

use std::path::PathBuf;

use crate::input::gather::args::ExplainSource;
use crate::input::gather::{Kind, Named, Operands, Request, SourceArgs, Wanted, gather, one_stdin};
use gpuwl_core::analysis::explain;
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::pod::{ObjectKind, PodInfo};
use gpuwl_core::render::{self, Format};
use gpuwl_core::text;

/// Arguments of `gpuwl explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl explain pod gpu-vm/job-cross                       # live cluster
  gpuwl explain vmi gpu-vm/vm-a                            # live: the VMI, its conditions and
                                                           # its virt-launcher pod
  gpuwl explain vm gpu-vm/vm-a                             # live: the VM, its VMI (if running)
  gpuwl explain --pod pod.yaml --nodes nodes.json          # a manifest against a node dump
  gpuwl explain --pod vmi.yaml --nodes nodes.json          # a KubeVirt VMI (devices.gpus)
  gpuwl explain pod gpu-vm/job-cross --pods pods.json --nodes nodes.json
  gpuwl explain --pod vm.yaml --nodes nodes.json --pods pods.json \\
      --kubevirt kubevirt.yaml
  gpuwl explain pod gpu-vm/job-cross --snapshot prod.tar   # a `gpuwl snapshot` file
  gpuwl explain job gpu-kueue/kueue-passthrough            # live: a Job Kueue holds

For each extended resource the pod requests: the nodes that advertise it (non-zero) and what is
free there, or the closest advertised names; how cordons, nodeSelector, required node affinity
and taints narrow the nodes; stale zeros; the scheduler's PodScheduled message; then one cause
with a stable code and one fix (`-o json` key causeCode: invalid-spec, admission-rejected,
scheduled, no-gpu-request, not-permitted, claim-not-found, no-matching-device,
counter-exhausted, devices-in-use, no-node-data, node-conditions, virt-handler, operator-state,
unadvertised-name, stale-only, excluded, not-co-located, too-large, in-use, insufficient,
other-resource, fits-now); causeCodes lists every blocking cause, the first one first.
The scheduler's filters are modelled node by node: cordon, taints, nodeSelector and affinity,
and the fit of every resource: cpu, memory, ephemeral-storage, hugepages, pod slots, extended
resources, with init and sidecar containers, overhead and requests defaulted from limits.
Not modelled: host ports, volumes, inter-pod affinity, topology spread, scheduling gates.
`explain vm|vmi NS/NAME` (live) reads the VirtualMachine / VirtualMachineInstance, prints their
conditions (Synchronized=False and KubeVirt's message, Ready, ...), finds the VMI's virt-launcher
pod (label kubevirt.io/created-by=<VMI uid>) and explains it with the VMI's device fields; without
a launcher, the VMI (or the VM's template) itself. virt-handler must be Ready on a node for a VM
to run there (the node's kubevirt.io/schedulable=true label and devices.kubevirt.io/kvm come from
it). Fixes never delete a virt-launcher pod (virtctl stop a VM that can wait instead).
For a Job or pod Kueue manages (`explain job NS/NAME`, live; a pod with Kueue's admission gate):
its Workload first — LocalQueue, ClusterQueue, Kueue's QuotaReserved message, the flavors tried —
with a quota cause (kueue-no-queue, kueue-name-not-covered, kueue-quota-too-small,
kueue-quota-exhausted with the workloads holding it), then what would hold its pods once
admitted, judged on the admitted (or fitting) flavor's nodes; a flavor whose nodes advertise none
of the requested name is said first (kueue-flavor-cannot-serve).
For a pod with resourceClaims (DRA; --dra FILE or the live cluster): per claim and request,
the DeviceClass, the devices its CEL selectors match, their nodes and which are free.
\"Did you mean\" offers the same hardware under another naming rule (time-slicing .shared,
MIG, the sandbox plugin's pci.ids name, GRID_/NVIDIA_ vGPU prefixes) before plain typos.

Exit status: 0 when nothing blocks the pod (scheduled, fits-now), 1 when a blocking cause was
found, 2 on bad input, 3 when the cluster cannot be read.")]
pub struct Args {
    /// The pod, VMI or VM (one per call), as kubectl takes it: `pod NAME`, `pod/NAME`,
    /// `vmi NAME`, `vm NS/NAME`, `NAMESPACE/NAME` (with
    /// -n, or the kubeconfig context's namespace, else `default`); with --pod FILE it may be
    /// omitted.
    #[arg(value_name = "[pod] NAME")]
    pub target: Option<String>,
    /// The name, when the first word is the kind (`pod NAME`); one pod per call.
    #[arg(hide = true)]
    pub target_name: Option<String>,
    /// Namespace of the pod (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// A Pod, VirtualMachineInstance or VirtualMachine manifest (JSON or YAML), or a list
    /// holding the target; `-` reads stdin. Without it, the target is looked up in --pods
    /// or the snapshot, or, with neither, read from the live cluster. With it and without
    /// --nodes/--pods, the nodes and pods come from the live cluster when a kubeconfig is
    /// there.
    #[arg(long, value_name = "FILE")]
    pub pod: Option<PathBuf>,
    /// What the pod is explained against: files, a snapshot file, or the live cluster.
    #[command(flatten)]
    pub source: SourceArgs<ExplainSource>,
    /// Output format: text is one screen (requests, the nodes advertising them,
    /// constraints, cause, fix); json and yaml carry the whole explanation.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// The kind words a target may start with, as kubectl users type them.
const KINDS: [&str; 14] = [
    "job",
    "jobs",
    "job.batch",
    "pod",
    "pods",
    "po",
    "vmi",
    "vmis",
    "virtualmachineinstance",
    "virtualmachineinstances",
    "vm",
    "vms",
    "virtualmachine",
    "virtualmachines",
];

/// The kinds a one-word target may name as `KIND/NAME`: a namespace called `vms` stays a
/// namespace (`vms/virt-launcher-x` is a pod there), as it was before VMs could be named.
const SLASH_KINDS: [&str; 9] = [
    "job",
    "pod",
    "pods",
    "po",
    "vmi",
    "vmis",
    "virtualmachineinstance",
    "vm",
    "virtualmachine",
];

/// The kind a target names (`vm NAME`, `vmi/NAME`, ...): a VM, a VMI, else a pod.
pub(crate) fn target_kind(target: &[String]) -> ObjectKind {
    let word = match target {
        [one] => one
            .split_once('/')
            .map(|(k, _)| k)
            .filter(|k| SLASH_KINDS.contains(k))
            .unwrap_or(""),
        [first, ..] => first.as_str(),
        [] => "",
    };
    match word {
        "vm" | "vms" | "virtualmachine" | "virtualmachines" => ObjectKind::VirtualMachine,
        "vmi" | "vmis" | "virtualmachineinstance" | "virtualmachineinstances" => {
            ObjectKind::VirtualMachineInstance
        }
        _ => ObjectKind::Pod,
    }
}

/// Parses the positional target as kubectl users type it — `pod NAME`, `pod/NAME`,
/// `NAMESPACE/NAME`, `pod NAMESPACE/NAME`, `NAME` — with `-n/--namespace` (`namespace`).
/// Returns `(namespace, name)`; the namespace is `None` when neither `-n` nor the target
/// names one (the caller then uses the kubeconfig context's namespace, else `default`).
///
/// Errors: [`Error::Input`] on an unknown kind, more than one name, or a namespace in the
/// target that contradicts `-n`.
pub(crate) fn parse_target(
    target: &[String],
    namespace: Option<&str>,
) -> Result<Option<(Option<String>, String)>> {
    let bad = |what: &str| {
        Err(Error::Input(format!(
            "explain: {what} (expected `pod NAME`, `pod/NAME` or `NAMESPACE/NAME`, with -n NAMESPACE)"
        )))
    };
    let kind_first = target.first().is_some_and(|k| KINDS.contains(&k.as_str()));
    let rest: Vec<&str> = if kind_first {
        target[1..].iter().map(String::as_str).collect()
    } else {
        target.iter().map(String::as_str).collect()
    };
    let one = match rest.as_slice() {
        [] => return Ok(None),
        [one] if !one.is_empty() => *one,
        _ => return bad(&format!("one pod at a time, got {:?}", target.join(" "))),
    };
    let (ns, name) = match one.split_once('/') {
        Some((kind, n)) if !kind_first && SLASH_KINDS.contains(&kind) => (None, n),
        Some((ns, n)) => (Some(ns), n),
        None => (None, one),
    };
    if name.is_empty() || name.contains('/') || ns.is_some_and(str::is_empty) {
        return bad(&format!("{one:?} is not a pod name"));
    }
    let ns = match (ns, namespace) {
        (Some(a), Some(b)) if a != b => {
            return bad(&format!("{one:?} is in namespace {a}, but -n says {b}"));
        }
        (Some(a), _) => Some(a.to_owned()),
        (None, b) => b.map(str::to_owned),
    };
    Ok(Some((ns, name.to_owned())))
}

/// The pod `target` names in `list` (read from `file`), or its only pod when none is named.
///
/// Errors: [`Error::Input`] when the pod is not there (with the closest names), the list
/// is empty, or it holds several and none is named.
fn pick(
    list: &[PodInfo],
    target: Option<&(Option<String>, String)>,
    file: &std::path::Path,
) -> Result<PodInfo> {
    match target {
        Some((given, name)) => {
            let ns = given.as_deref().unwrap_or("default");
            list.iter()
                .find(|p| p.namespace == ns && &p.name == name)
                .cloned()
                .ok_or_else(|| {
                    let keys: Vec<String> = list.iter().map(PodInfo::key).collect();
                    // A pod of that name in another namespace: said as on the live
                    // cluster (`add -n gpu-vm`).
                    let mut elsewhere: Vec<String> = list
                        .iter()
                        .filter(|p| &p.name == name && p.namespace != ns)
                        .map(|p| p.namespace.clone())
                        .collect();
                    elsewhere.sort();
                    elsewhere.dedup();
                    let hint =
                        crate::input::pods::in_namespaces(name, &elsewhere).unwrap_or_else(|| {
                            text::did_you_mean(
                                &format!("{ns}/{name}"),
                                keys.iter().map(String::as_str),
                            )
                        });
                    Error::Input(format!(
                        "{}: no pod {}{hint}",
                        file.display(),
                        render::esc(&format!("{ns}/{name}")),
                    ))
                })
        }
        None => match list {
            [p] => Ok(p.clone()),
            [] => Err(Error::Input(format!(
                "{}: no pod in the file",
                file.display()
            ))),
            _ => Err(Error::Input(format!(
                "{}: {} objects: name one as `pod NAMESPACE/NAME`",
                file.display(),
                list.len()
            ))),
        },
    }
}

/// A pod named on the command line: `(namespace if given, name)` ([`parse_target`]).
type Target = (Option<String>, String);

/// Runs `gpuwl explain`: the pod (a manifest, or looked up by name) and what it is
/// explained against gathered, then explained, then rendered.
///
/// Errors: [`Error::Input`] for bad files, a missing target or an unknown pod;
/// [`Error::Runtime`] when the cluster cannot be reached or stdout fails.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let words: Vec<String> = args
        .target
        .iter()
        .chain(&args.target_name)
        .cloned()
        .collect();
    let target = parse_target(&words, args.namespace.as_deref())?;
    let job = is_job(&words);
    if job && (args.pod.is_some() || args.source.any_file()) {
        return Err(Error::Input(
            "explain job: only on the live cluster (no --pod, --nodes, --pods or --snapshot)"
                .into(),
        ));
    }
    let e = if job {
        explain_live(args, target, Kind::Job)?
    } else if args.pod.is_none() && !args.source.any_file() {
        explain_live(args, target, Kind::Object(target_kind(&words)))?
    } else {
        explain_given(args, target.as_ref())?
    };
    let text = render::explain::render(&e, args.output);
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the explanation", e))?;
    Ok(exit_status(&e))
}

/// Whether the target names a Job (`job NAME`, `job/NAME`).
fn is_job(words: &[String]) -> bool {
    match words {
        [one] => one.split_once('/').is_some_and(|(k, _)| k == "job"),
        [first, ..] => matches!(first.as_str(), "job" | "jobs" | "job.batch"),
        [] => false,
    }
}

/// Explains the Job, pod, VMI or VM named (`kind`), read from the live cluster with
/// everything it is explained against ([`gather`] with the object named,
/// [`explain::object::explain_object`]).
///
/// Errors: no target named; the cluster's; the analysis'.
fn explain_live(args: &Args, target: Option<Target>, kind: Kind) -> Result<explain::Explanation> {
    let Some((ns, name)) = target else {
        return Err(Error::Input(match kind {
            Kind::Job => "explain: name the Job (`gpuwl explain job NAME -n NAMESPACE`)".into(),
            Kind::Object(_) => {
                "explain: name the pod (`gpuwl explain pod NAME -n NAMESPACE`) or give --pod FILE"
                    .into()
            }
        }));
    };
    let req = Request {
        object: Some(Named {
            kind,
            namespace: ns.as_deref(),
            name: &name,
        }),
        ..args.source.request()
    };
    let mut g = gather(&req, Wanted::default())?;
    let Some(object) = g.object.take() else {
        return Err(Error::Runtime(format!("explain: {name} was not read")));
    };
    let operands = g.operands_by_node();
    explain::object::explain_object(
        object,
        explain::Inputs::of(&g.snapshot, operands.as_ref()),
        g.snapshot.kueue.as_ref(),
    )
}

/// Explains a pod given as a file (`--pod`), or picked from `--pods` / the snapshot,
/// against what [`gather`] reads: the files given, a `--snapshot`, or (a manifest alone,
/// with a cluster configured) the live cluster.
///
/// Errors: as [`gather`]; no pod to explain, or the target not found.
fn explain_given(args: &Args, target: Option<&Target>) -> Result<explain::Explanation> {
    let source = &args.source;
    one_stdin(&[
        args.pod.as_ref(),
        source.nodes.as_ref(),
        source.pods.as_ref(),
        source.kubevirt.as_ref(),
        source.cluster_policy.as_ref(),
        source.dra.as_ref(),
    ])?;
    // Which pod, before anything is read: a manifest, or the target in a dump.
    let manifest = match (&args.pod, target, &source.pods, &source.snapshot) {
        (Some(f), _, _, _) => Some((gpuwl_core::decode::pods::read_pods_path(f)?, f)),
        (None, Some(_), Some(_), _) | (None, Some(_), None, Some(_)) => None,
        _ => return Err(Error::Input(
            "explain: give --pod FILE, or `pod NAMESPACE/NAME` with --pods FILE or --snapshot FILE, or neither for the live cluster".into(),
        )),
    };
    let wanted = Wanted {
        pods: true,
        kubevirt: true,
        operands: Operands::Yes,
        ..Wanted::default()
    };
    let mut g = gather(&source.request(), wanted)?;
    let pod = match manifest {
        Some((list, f)) => pick(&list, target, f)?,
        None => pick(
            g.snapshot.pods(),
            target,
            source
                .pods
                .as_deref()
                .or(source.snapshot.as_deref())
                .unwrap_or(std::path::Path::new("snapshot")),
        )?,
    };
    let operands = g.operands_by_node();
    explain::explain(&pod, explain::Inputs::of(&g.snapshot, operands.as_ref())).map_err(|e| {
        match source.nodes.as_ref().or(source.snapshot.as_ref()) {
            Some(f) => e.in_file(f),
            None => e,
        }
    })
}

/// The exit status of an explanation: 0 when nothing blocks the pod (`scheduled`,
/// `fits-now`), 1 when a blocking cause was found (any other code). Bad input (2) and
/// cluster errors (3) come from the error path.
pub fn exit_status(e: &explain::Explanation) -> ExitStatus {
    // Kueue holding the workload, or admitting it where no node serves it, blocks it too.
    let quota_blocks = e
        .quota
        .as_ref()
        .is_some_and(|q| q.cause.holds() || q.unservable.is_some());
    if e.cause_code.blocks() || quota_blocks {
        ExitStatus::Mismatch
    } else {
        ExitStatus::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_kubectl_users_type_them() {
        let t = |v: &[&str], n: Option<&str>| {
            parse_target(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>(), n)
        };
        let some = |ns: Option<&str>, n: &str| Some((ns.map(str::to_owned), n.to_owned()));
        assert_eq!(
            t(&["pod", "gpu-vm/job-cross"], None).unwrap(),
            some(Some("gpu-vm"), "job-cross")
        );
        assert_eq!(t(&["p1"], None).unwrap(), some(None, "p1"));
        assert_eq!(
            t(&["job-cross"], Some("gpu-vm")).unwrap(),
            some(Some("gpu-vm"), "job-cross")
        );
        assert_eq!(
            t(&["pod/job-cross"], Some("gpu-vm")).unwrap(),
            some(Some("gpu-vm"), "job-cross")
        );
        assert_eq!(t(&["vmi", "win-1"], None).unwrap(), some(None, "win-1"));
        assert_eq!(t(&["pod"], None).unwrap(), None);
        assert!(t(&["pod", "a/b/c"], None).is_err());
        assert!(t(&["a", "b"], None).is_err(), "one pod at a time");
        assert!(t(&["ns1/p"], Some("ns2")).is_err());
        assert!(t(&["pod/"], None).is_err());
        // vm/vmi targets; a namespace named like a plural kind stays a namespace.
        assert_eq!(
            t(&["vm", "gpu-vm/a"], None).unwrap(),
            some(Some("gpu-vm"), "a")
        );
        assert_eq!(t(&["vm/a"], Some("x")).unwrap(), some(Some("x"), "a"));
        assert_eq!(t(&["pod", "vms/l"], None).unwrap(), some(Some("vms"), "l"));
        assert_eq!(t(&["vms/l"], None).unwrap(), some(Some("vms"), "l"));
        let k = |v: &[&str]| target_kind(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(k(&["vm", "a"]), ObjectKind::VirtualMachine);
        assert_eq!(k(&["vmi/a"]), ObjectKind::VirtualMachineInstance);
        assert_eq!(k(&["vms/a"]), ObjectKind::Pod);
        assert_eq!(k(&["pod", "vm/a"]), ObjectKind::Pod);
    }
}
