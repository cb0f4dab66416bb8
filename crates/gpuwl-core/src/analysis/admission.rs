//! The admission guard's checks: what `gpuwl serve --admission-listen` tells the API
//! server about a Pod, VirtualMachineInstance or VirtualMachine before it is stored.
//!
//! [`Index`] is built from the exporter's watch state once per evaluation (nodes, the
//! ClusterPolicy, KubeVirt's `permittedHostDevices`); [`review`] then judges one object
//! (read into a [`PodInfo`] by the same reader `explain` uses) against it without any API
//! call. A review costs a few map lookups per requested name; only a name that is
//! advertised but whose advertisers are all excluded walks those advertisers (stopping at
//! the first allowed one), and only a name nobody advertises asks [`names::did_you_mean`].
//!
//! Each finding is one [`Warning`]: the field it comes from, the `explain` cause code
//! ([`CauseCode`]), and one sentence. The checks, in the order they are reported:
//! - `invalid-spec`: an extended resource in requests without limits, or with requests ≠
//!   limits. Kubernetes requires an extended resource in limits, and requests equal to
//!   them when both are set (kubernetes/kubernetes `pkg/apis/core/validation/validation.go`,
//!   `validateResourceRequirements`). For a Pod the API server's own validation runs before
//!   validating webhooks, so the guard only sees this in a VMI's `spec.domain.resources`,
//!   which KubeVirt copies into the virt-launcher pod (kubevirt/kubevirt
//!   `pkg/virt-controller/services/rendercontainer.go`): refused there, after the VMI was
//!   accepted;
//! - `not-permitted`: a VMI/VM `gpus[]` / `hostDevices[]` `deviceName` that the KubeVirt CR's
//!   `permittedHostDevices` does not list: KubeVirt then renders no launcher pod
//!   (`GPU <name> is not permitted in permittedHostDevices configuration`;
//!   docs/domain-facts.md §5, kubevirt/kubevirt `pkg/virt-controller/services/rendercontainer.go`);
//! - `operator-state`, `unadvertised-name` or `stale-only`: no node advertises the name.
//!   Unless it is a near miss of an advertised name, the GPU Operator's state on a node is
//!   asked first, as explain asks it (a MIG or vGPU config failed or pending, the workload
//!   label ignored with sandbox workloads off, operands disabled): `operator-state`, which
//!   enforce mode admits (transient). Else `stale-only` when nodes list the name only with
//!   `0`, or `unadvertised-name` with the best suggestion of `explain`'s did-you-mean, the
//!   same hardware under another naming rule before any typo ([`names`]);
//! - `excluded`: nodes advertise the name, but the object's nodeSelector / required node
//!   affinity allows none of them (taints and cordons change often and are not judged at
//!   admission);
//! - `too-large`: more units than any single node advertises.

use std::collections::{BTreeSet, HashMap};

use crate::analysis::diagnosis::CauseCode;
use crate::analysis::explain::rules::{operator_blocker, virt_handler_ready};
use crate::analysis::names::{self, Relation};
use crate::analysis::placement;
use crate::analysis::usage::Usage;
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::launcher;
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::pod::{self, PodInfo, SpecProblem};
use crate::model::resource::classify;
use crate::text::{self, esc};

/// The longest warning line, in characters. The API server may cut warnings longer than
/// 256 characters and drops warnings past 4 KiB in all (Kubernetes documentation,
/// "Dynamic Admission Control", response warnings).
pub const MAX_WARNING: usize = 256;

/// The most warnings one review returns (the last one then says how many were left out),
/// so that all of them stay under the API server's 4 KiB.
pub(crate) const MAX_WARNINGS: usize = 8;

/// The longest value taken from the reviewed object into a warning, in characters.
pub(crate) const MAX_VALUE: usize = 80;

/// Nodes advertising one resource name (allocatable > 0).
#[derive(Debug, Clone, Default)]
struct Advertisers {
    /// Indexes into [`Index::nodes`].
    nodes: Vec<usize>,
    /// The largest allocatable of one node.
    max: i64,
}

/// What reviews are judged against: built from the watch state after each evaluation.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// Whether the initial lists were in when this was built; before, every review is
    /// allowed without warnings (nothing is known yet).
    pub synced: bool,
    /// Node name and labels only (what nodeSelector and node affinity read).
    nodes: Vec<NodeInfo>,
    /// The pool name of each node ([`crate::model::pool::Pool::name`]).
    pools: Vec<String>,
    /// Advertised names (allocatable > 0) with their nodes.
    advertised: HashMap<String, Advertisers>,
    /// Names some node lists, but only with `0` (and no node advertises).
    stale: BTreeSet<String>,
    /// Every advertised name, sorted (the did-you-mean candidates).
    names: Vec<String>,
    /// KubeVirt's `permittedHostDevices`, when a KubeVirt or HyperConverged CR is known.
    kubevirt: Option<PermittedHostDevices>,
    /// The GPU Operator's ClusterPolicy, when read: what `operator-state` is judged under.
    policy: Option<ClusterPolicy>,
    /// Whether some node is ready for virt-handler (KubeVirt runs): a VMI or VM is then
    /// judged with the `kubernetes.io/arch` selector its launcher gets
    /// ([`crate::model::launcher`]).
    kubevirt_runs: bool,
}

impl Index {
    /// Indexes `nodes` (pools under `policy`) and KubeVirt's permissions (`None`: no CR
    /// known, VMI device names are then not judged).
    pub fn build(
        nodes: &[NodeInfo],
        policy: Option<&ClusterPolicy>,
        kubevirt: Option<PermittedHostDevices>,
    ) -> Index {
        let usage = Usage::build(nodes, None, policy);
        let mut ix = Index {
            synced: true,
            kubevirt,
            policy: policy.cloned(),
            kubevirt_runs: nodes.iter().any(virt_handler_ready),
            ..Index::default()
        };
        let mut position = HashMap::new();
        for n in nodes {
            position.insert(n.name.as_str(), ix.nodes.len());
            ix.nodes.push(NodeInfo {
                name: n.name.clone(),
                labels: n.labels.clone(),
                ..NodeInfo::default()
            });
            ix.pools
                .push(usage.pool_of(&n.name).map(|p| p.name()).unwrap_or_default());
        }
        let mut listed = BTreeSet::new();
        for (node, resource, cell) in usage.cells() {
            if !cell.advertised() {
                if cell.listed {
                    listed.insert(resource.to_owned());
                }
                continue;
            }
            let Some(&i) = position.get(node) else {
                continue;
            };
            let a = ix.advertised.entry(resource.to_owned()).or_default();
            a.nodes.push(i);
            a.max = a.max.max(cell.allocatable);
        }
        ix.stale = listed
            .into_iter()
            .filter(|r| !ix.advertised.contains_key(r))
            .collect();
        ix.names = ix.advertised.keys().cloned().collect();
        ix.names.sort();
        ix
    }

    /// How many nodes were indexed.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }
}

/// One finding of a review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The field the finding is about, e.g. `spec.containers[0].resources.limits`.
    pub field: String,
    /// The cause code `gpuwl explain` would give.
    pub code: CauseCode,
    /// One sentence, without the field and code.
    pub text: String,
}

impl Warning {
    /// The warning as the API server passes it to the client: `gpuwl CODE: FIELD: TEXT`,
    /// one line, control characters escaped, at most [`MAX_WARNING`] characters.
    pub fn line(&self) -> String {
        let line = esc(&format!(
            "gpuwl {}: {}: {}",
            self.code.as_str(),
            self.field,
            self.text
        ));
        bounded(&line, MAX_WARNING)
    }
}

/// `s` cut to `max` characters, ending `…` when cut.
fn bounded(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// A value from the reviewed object as shown in a warning: as it is when it is a plain
/// name (letters, digits, `.`, `_`, `-`, `/`) of at most [`MAX_VALUE`] characters, else
/// quoted with escapes and cut ([`crate::text::cut`]).
pub fn show(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().count() <= MAX_VALUE
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    if plain { s.to_owned() } else { text::cut(s) }
}

/// The findings for `pod` (a Pod, or a VMI/VM read as its virt-launcher pod), at most
/// [`MAX_WARNINGS`] (the last then counts the rest). Empty when the index is not synced.
pub fn review(pod: &PodInfo, ix: &Index) -> Vec<Warning> {
    if !ix.synced {
        return Vec::new();
    }
    // A VMI or VM, where KubeVirt runs: its launcher selects the architecture
    // virt-controller renders (issue 47). Only that stable label: virt-handler's
    // `kubevirt.io/schedulable` comes and goes with its heartbeat, not a reason to refuse.
    let with_arch;
    let pod = match &pod.vmi_shape {
        Some(shape) if pod.is_vm() && ix.kubevirt_runs => {
            let defaults = launcher::Cluster::default();
            let cluster = ix.kubevirt.as_ref().map_or(&defaults, |kv| &kv.launcher);
            // The architecture and the CR's cluster-wide nodeSelectors (its
            // `developerConfiguration.nodeSelectors`), as the launcher gets them.
            let mut p = pod.clone();
            p.node_selector = launcher::node_selector(pod, shape, cluster)
                .into_iter()
                .filter(|(k, _)| {
                    k != launcher::SCHEDULABLE_LABEL
                        && !k.starts_with(launcher::MACHINE_TYPE_PREFIX)
                })
                .collect();
            // The VMI's own keys stay, a machine-type one included.
            p.node_selector.extend(pod.node_selector.clone());
            with_arch = p;
            &with_arch
        }
        _ => pod,
    };
    let mut out = Vec::new();
    for p in &pod.spec_problems {
        if let Some(w) = invalid_spec(p) {
            out.push(w);
        }
    }
    // A launcher pod the API server will refuse (the CR's console-log sidecar asks above
    // its limit, [`launcher::render_problems`]): virt-controller records FailedCreate.
    if let (Some(shape), Some(kv)) = (&pod.vmi_shape, &ix.kubevirt)
        && pod.is_vm()
        && ix.kubevirt_runs
    {
        for p in launcher::render_problems(shape, &kv.launcher) {
            out.push(Warning {
                field: format!("{}.resources.requests", p.path()),
                code: CauseCode::InvalidSpec,
                text: format!("{p}: virt-controller cannot create the virt-launcher pod"),
            });
        }
    }
    for (resource, &units) in pod.requests.iter() {
        let source = pod.sources.iter().find(|s| &s.resource == resource);
        let field = source
            .map(|s| limits_field(pod, &s.field, resource))
            .unwrap_or_default();
        let name = show(resource);
        if pod.is_vm()
            && (field.contains(".gpus[") || field.contains(".hostDevices["))
            && let Some(kv) = &ix.kubevirt
            && kv.refuses(resource)
        {
            out.push(Warning {
                field: field.clone(),
                code: CauseCode::NotPermitted,
                text: format!(
                    "{name} is not in KubeVirt's permittedHostDevices ({}): KubeVirt refuses the VMI",
                    show(&kv.object)
                ),
            });
        }
        let Some(adv) = ix.advertised.get(resource.as_str()) else {
            out.push(unadvertised(resource, &name, field, ix));
            continue;
        };
        if pod.node_name.is_none() && !adv.nodes.iter().any(|&i| selected(pod, &ix.nodes[i])) {
            out.push(Warning {
                field: field.clone(),
                code: CauseCode::Excluded,
                text: format!(
                    "{name} is advertised only in pool {} ({} node{}), which the {} excludes",
                    pools(adv, ix),
                    adv.nodes.len(),
                    if adv.nodes.len() == 1 { "" } else { "s" },
                    constraint(pod)
                ),
            });
        }
        if units > adv.max {
            out.push(Warning {
                field,
                code: CauseCode::TooLarge,
                text: format!(
                    "{units} units of {name} asked, but no node has more than {}",
                    adv.max
                ),
            });
        }
    }
    if out.len() > MAX_WARNINGS {
        let more = out.len() - (MAX_WARNINGS - 1);
        out.truncate(MAX_WARNINGS - 1);
        let last = out.last().cloned();
        out.push(Warning {
            field: "(more)".into(),
            code: last.map_or(CauseCode::UnadvertisedName, |w| w.code),
            text: format!("{more} more findings left out; run gpuwl explain on the object"),
        });
    }
    out
}

/// The field to name for `resource` read from `field`: the API server copies an extended
/// resource's limits into absent requests before webhooks see the object
/// (kubernetes/kubernetes `pkg/apis/core/v1/defaults.go`, `SetDefaults_Pod`), so a
/// container's `resources.requests` is named as `resources.limits` (where the user wrote
/// it) unless the reader found it in requests without a limit.
fn limits_field(pod: &PodInfo, field: &str, resource: &str) -> String {
    let Some(path) = field.strip_suffix(".resources.requests") else {
        return field.to_owned();
    };
    let unlimited = pod.spec_problems.iter().any(|p| {
        matches!(p, SpecProblem::RequestWithoutLimit { .. })
            && p.path() == path
            && p.resource() == resource
    });
    if unlimited {
        field.to_owned()
    } else {
        format!("{path}.resources.limits")
    }
}

/// Whether `node` passes the object's nodeSelector and required node affinity.
fn selected(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| node.label(k) == Some(v.as_str()))
        && pod
            .required_affinity
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| placement::term_matches(t, node)))
}

/// `nodeSelector K=V`, `required node affinity`, or both, as the warning names them.
fn constraint(pod: &PodInfo) -> String {
    let mut parts = Vec::new();
    if !pod.node_selector.is_empty() {
        let sel: Vec<String> = pod
            .node_selector
            .iter()
            .take(2)
            .map(|(k, v)| format!("{}={}", show(k), show(v)))
            .collect();
        let more = if pod.node_selector.len() > 2 {
            ", …"
        } else {
            ""
        };
        parts.push(format!("nodeSelector {}{more}", sel.join(", ")));
    }
    if pod.required_affinity.is_some() {
        parts.push("required node affinity".into());
    }
    parts.join(" with the ")
}

/// The distinct pools of the advertisers, at most three named.
fn pools(adv: &Advertisers, ix: &Index) -> String {
    let set: BTreeSet<&str> = adv.nodes.iter().map(|&i| ix.pools[i].as_str()).collect();
    let mut names: Vec<&str> = set.iter().copied().take(3).collect();
    if set.len() > 3 {
        names.push("…");
    }
    names.join(", ")
}

/// The warning for a name no node advertises.
fn unadvertised(resource: &str, name: &str, field: String, ix: &Index) -> Warning {
    let suggestion = names::did_you_mean(resource, ix.names.iter().map(String::as_str))
        .into_iter()
        .next();
    // As explain's rules run: a misspelt name is the name's problem; otherwise the GPU
    // Operator's state on a node (a MIG or vGPU config failed or pending, the label
    // ignored, operands off) says why the name is missing: `operator-state`, which the
    // operator (or its owner) resolves, not the pod.
    let misspelt = suggestion
        .as_ref()
        .is_some_and(|s| !matches!(s.relation, Relation::MigPartition | Relation::SharingRename));
    if !misspelt {
        let class = classify(resource);
        if let Some((cause, _)) = ix
            .nodes
            .iter()
            .find_map(|n| operator_blocker(ix.policy.as_ref(), &ix.nodes, n, resource, class))
        {
            return Warning {
                field,
                code: CauseCode::OperatorState,
                text: format!(
                    "no node advertises {name}, and the GPU Operator's state says why: {cause}"
                ),
            };
        }
    }
    // As explain judges it: a name only listed with 0 is `stale-only` (its device plugin
    // restarting or gone: it may come back) unless an advertised name is a near miss of
    // it, which makes it a misnamed request (`unadvertised-name`).
    if ix.stale.contains(resource) && suggestion.is_none() {
        return Warning {
            field,
            code: CauseCode::StaleOnly,
            text: format!(
                "{name} is listed only with 0 units (its device plugin is restarting or gone): no node can run this until it advertises the name again"
            ),
        };
    }
    let text = match suggestion {
        Some(s) => format!(
            "no node advertises {name}; did you mean {} ({})?",
            s.name,
            s.why()
        ),
        None => format!("no node advertises {name}: it would stay Pending"),
    };
    Warning {
        field,
        code: CauseCode::UnadvertisedName,
        text,
    }
}

/// An `invalid-spec` warning from one of the reader's spec problems about an extended
/// resource (in requests without a limit, or requests ≠ limits); `None` for the others.
fn invalid_spec(problem: &SpecProblem) -> Option<Warning> {
    let (path, resource) = (problem.path(), problem.resource());
    if !pod::is_extended_resource(resource) {
        return None;
    }
    let name = show(resource);
    let (field, text) = match problem {
        SpecProblem::RequestWithoutLimit { .. } => (
            format!("{path}.resources.requests"),
            format!(
                "{name} is in requests without limits; Kubernetes refuses that pod: set it in limits (requests equal or left out)"
            ),
        ),
        SpecProblem::RequestDiffersFromLimit { .. } => (
            format!("{path}.resources"),
            format!(
                "{name} requests differ from limits; Kubernetes refuses that pod: an extended resource needs requests = limits"
            ),
        ),
        SpecProblem::RequestAboveLimit { .. } => return None,
    };
    Some(Warning {
        field,
        code: CauseCode::InvalidSpec,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kubevirt::{HostDevicesSource, PciHostDevice};
    use crate::model::workload::LABEL_KEY;

    fn node(name: &str, label: &str, res: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named(name);
        n.labels.insert(LABEL_KEY.into(), label.into());
        for (r, q) in res {
            n.capacity.insert((*r).into(), (*q).into());
        }
        n.allocatable = Some(n.capacity.clone());
        n
    }

    /// The lab's three GPU nodes, and a KubeVirt CR permitting the passthrough name.
    fn lab(kubevirt: bool) -> Index {
        let nodes = [
            node("lab-node-0", "container", &[("nvidia.com/gpu", "4")]),
            node(
                "lab-node-1",
                "vm-passthrough",
                &[("nvidia.com/GA102GL_A10", "2")],
            ),
            node(
                "lab-node-2",
                "vm-vgpu",
                &[
                    ("nvidia.com/NVIDIA_A10-12Q", "4"),
                    ("nvidia.com/GRID_A10-4Q", "0"),
                ],
            ),
        ];
        let kv = kubevirt.then(|| PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: None,
            pci_host_devices: vec![PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        });
        Index::build(&nodes, None, kv)
    }

    fn object(yaml: &str) -> PodInfo {
        let v: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        crate::decode::pods::from_object(&v).unwrap()
    }

    fn lines(pod: &PodInfo, ix: &Index) -> Vec<String> {
        review(pod, ix).iter().map(Warning::line).collect()
    }

    const POD: &str = "kind: Pod\nmetadata: {name: p, namespace: gpu-vm}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits: {RES: 1}\n";

    fn pod(resource: &str) -> PodInfo {
        object(&POD.replace("RES", resource))
    }

    #[test]
    fn a_name_the_operators_state_withholds_is_operator_state_as_explain_says() {
        // A MIG config that failed on the only MIG-capable node: no MIG name is advertised,
        // the operator's state says why (explain: operator-state, transient), so enforce
        // mode must not deny it as an unadvertised name.
        let mut mig = node("gpu-mig", "container", &[("nvidia.com/gpu", "0")]);
        mig.labels
            .insert("nvidia.com/mig.config".into(), "all-1g.10gb".into());
        mig.labels
            .insert("nvidia.com/mig.config.state".into(), "failed".into());
        let ix = Index::build(
            &[node("gpu-0", "container", &[("nvidia.com/gpu", "4")]), mig],
            None,
            None,
        );
        let w = review(&pod("nvidia.com/mig-1g.10gb"), &ix);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].code, CauseCode::OperatorState);
        assert!(
            w[0].text.starts_with("no node advertises nvidia.com/mig-1g.10gb, and the GPU Operator's state says why: gpu-mig asks for MIG config all-1g.10gb"),
            "{}",
            w[0].text
        );
        assert!(!crate::analysis::verdict::verdict(w[0].code, false).permanent());
        // A misspelt name stays the name's problem.
        let w = review(&pod("nvidia.com/gpux"), &ix);
        assert_eq!(w[0].code, CauseCode::UnadvertisedName, "{w:?}");
    }

    #[test]
    fn a_one_letter_typo_gets_the_did_you_mean() {
        let ix = lab(false);
        assert_eq!(
            lines(&pod("nvidia.com/GA102GL_A1"), &ix),
            [
                "gpuwl unadvertised-name: spec.containers[0].resources.limits: no node advertises nvidia.com/GA102GL_A1; did you mean nvidia.com/GA102GL_A10 (1 edit away)?"
            ]
        );
        // The same hardware under another naming rule comes first.
        let w = review(&pod("nvidia.com/GA102GL_A10_PCIE"), &ix);
        assert_eq!(w.len(), 1);
        let w = review(&pod("nvidia.com/GRID_A10-12Q"), &ix);
        assert_eq!(
            w[0].text,
            "no node advertises nvidia.com/GRID_A10-12Q; did you mean nvidia.com/NVIDIA_A10-12Q (the same vGPU type (board and size) under another prefix)?"
        );
        // Nothing related: said plainly.
        assert_eq!(
            review(&pod("example.com/fpga"), &ix)[0].text,
            "no node advertises example.com/fpga: it would stay Pending"
        );
        // Listed with 0 only.
        let w = review(&pod("nvidia.com/GRID_A10-4Q"), &ix);
        assert_eq!(w[0].code, CauseCode::StaleOnly);
    }

    #[test]
    fn requests_the_api_server_defaulted_from_limits_are_named_as_limits() {
        let ix = lab(false);
        let defaulted = object(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits: {nvidia.com/GA102GL_A1: 1}\n      requests: {nvidia.com/GA102GL_A1: 1}\n",
        );
        assert_eq!(
            review(&defaulted, &ix)[0].field,
            "spec.containers[0].resources.limits"
        );
    }

    #[test]
    fn the_labs_correct_pods_get_no_warning() {
        let ix = lab(true);
        for r in [
            "nvidia.com/gpu",
            "nvidia.com/GA102GL_A10",
            "nvidia.com/NVIDIA_A10-12Q",
        ] {
            assert_eq!(lines(&pod(r), &ix), Vec::<String>::new(), "{r}");
        }
        let vmi = object(
            "kind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  domain:\n    devices:\n      gpus:\n      - {name: g, deviceName: nvidia.com/GA102GL_A10}\n",
        );
        assert_eq!(lines(&vmi, &ix), Vec::<String>::new());
    }

    #[test]
    fn a_selector_that_excludes_every_advertiser() {
        let ix = lab(false);
        let cross = object(
            "kind: Pod\nmetadata: {name: job-cross, namespace: gpu-vm}\nspec:\n  nodeSelector: {nvidia.com/gpu.workload.config: vm-passthrough}\n  containers:\n  - name: cuda\n    resources:\n      limits: {nvidia.com/gpu: 1}\n",
        );
        assert_eq!(
            lines(&cross, &ix),
            [
                "gpuwl excluded: spec.containers[0].resources.limits: nvidia.com/gpu is advertised only in pool container (1 node), which the nodeSelector nvidia.com/gpu.workload.config=vm-passthrough excludes"
            ]
        );
        let affinity = object(
            "kind: Pod\nmetadata: {name: a}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: nvidia.com/gpu.workload.config, operator: In, values: [vm-vgpu, vm-passthrough]}\n  containers:\n  - name: c\n    resources:\n      limits: {nvidia.com/gpu: 1}\n",
        );
        let w = review(&affinity, &ix);
        assert_eq!(w[0].code, CauseCode::Excluded);
        assert!(
            w[0].text
                .ends_with("which the required node affinity excludes")
        );
        // A selector one advertiser matches: fine.
        let ok = object(
            "kind: Pod\nmetadata: {name: ok}\nspec:\n  nodeSelector: {nvidia.com/gpu.workload.config: container}\n  containers:\n  - name: c\n    resources:\n      limits: {nvidia.com/gpu: 1}\n",
        );
        assert!(review(&ok, &ix).is_empty());
    }

    #[test]
    fn more_units_than_any_node_has() {
        let ix = lab(false);
        let big = object(&POD.replace("RES: 1", "nvidia.com/gpu: 5"));
        assert_eq!(
            lines(&big, &ix),
            [
                "gpuwl too-large: spec.containers[0].resources.limits: 5 units of nvidia.com/gpu asked, but no node has more than 4"
            ]
        );
        let four = object(&POD.replace("RES: 1", "nvidia.com/gpu: 4"));
        assert!(review(&four, &ix).is_empty());
    }

    #[test]
    fn a_vmi_device_kubevirt_does_not_permit() {
        let ix = lab(true);
        let vm = object(
            "kind: VirtualMachine\nmetadata: {name: vm}\nspec:\n  template:\n    spec:\n      domain:\n        devices:\n          gpus:\n          - {name: g, deviceName: nvidia.com/NVIDIA_A10-12Q}\n",
        );
        assert_eq!(
            lines(&vm, &ix),
            [
                "gpuwl not-permitted: spec.template.spec.domain.devices.gpus[0].deviceName: nvidia.com/NVIDIA_A10-12Q is not in KubeVirt's permittedHostDevices (kubevirt/kubevirt): KubeVirt refuses the VMI"
            ]
        );
        // Without a KubeVirt CR nothing is said about permissions.
        assert!(review(&vm, &lab(false)).is_empty());
    }

    #[test]
    fn a_vm_is_judged_with_the_architecture_its_launcher_selects() {
        // Issue 47: where KubeVirt runs, the launcher selects kubernetes.io/arch=amd64
        // (virt-api's default); the only A10 node is arm64.
        let mut n = node(
            "p-1",
            "vm-passthrough",
            &[
                ("nvidia.com/GA102GL_A10", "1"),
                ("devices.kubevirt.io/kvm", "1k"),
            ],
        );
        n.labels.insert("kubernetes.io/arch".into(), "arm64".into());
        n.labels
            .insert("kubevirt.io/schedulable".into(), "true".into());
        let ix = Index::build(std::slice::from_ref(&n), None, None);
        let vmi = object(
            "kind: VirtualMachineInstance\nmetadata: {name: vm}\nspec:\n  domain:\n    devices:\n      gpus:\n      - {name: g, deviceName: nvidia.com/GA102GL_A10}\n",
        );
        let got = lines(&vmi, &ix);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("gpuwl excluded: ") && got[0].contains("kubernetes.io/arch=amd64"),
            "{got:?}"
        );
        // spec.architecture: arm64 fits; a plain pod is never given the selector.
        let arm = object(
            "kind: VirtualMachineInstance\nmetadata: {name: vm}\nspec:\n  architecture: arm64\n  domain:\n    devices:\n      gpus:\n      - {name: g, deviceName: nvidia.com/GA102GL_A10}\n",
        );
        assert!(review(&arm, &ix).is_empty());
        assert!(review(&pod("nvidia.com/GA102GL_A10"), &ix).is_empty());
    }

    #[test]
    fn requests_without_limits_or_different_from_them() {
        let ix = lab(false);
        let vmi = object(
            "kind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  domain:\n    resources:\n      requests: {nvidia.com/gpu: 1}\n",
        );
        assert_eq!(
            lines(&vmi, &ix),
            [
                "gpuwl invalid-spec: spec.domain.resources.requests: nvidia.com/gpu is in requests without limits; Kubernetes refuses that pod: set it in limits (requests equal or left out)"
            ]
        );
        let differ = object(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {nvidia.com/gpu: 1}\n      limits: {nvidia.com/gpu: 2}\n",
        );
        let w = review(&differ, &ix);
        assert_eq!(w[0].code, CauseCode::InvalidSpec);
        assert_eq!(w[0].field, "spec.containers[0].resources");
        assert_eq!(w.len(), 1, "{w:?}");
        // A cpu request above its limit is not the guard's business.
        let cpu = object(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {cpu: 2}\n      limits: {cpu: 1}\n",
        );
        assert!(review(&cpu, &ix).is_empty());
    }

    #[test]
    fn values_from_the_object_are_escaped_cut_and_the_lines_bounded() {
        let ix = lab(false);
        let long = format!("nvidia.com/{}", "A".repeat(300));
        let w = lines(&pod(&long), &ix);
        assert_eq!(w.len(), 1);
        assert!(w[0].chars().count() <= MAX_WARNING, "{}", w[0]);
        assert!(w[0].contains("… (311 bytes)"), "{}", w[0]);
        let evil = object(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector: {\"a\\nb\": \"x\\u001b[31m\"}\n  containers:\n  - name: c\n    resources:\n      limits: {nvidia.com/gpu: 1}\n",
        );
        let w = lines(&evil, &ix);
        assert_eq!(w.len(), 1);
        assert!(!w[0].chars().any(char::is_control), "{:?}", w[0]);
        assert!(w[0].contains(r#""a\nb"="x\u{1b}[31m""#), "{}", w[0]);
        // Many names: at most MAX_WARNINGS lines, the last counts the rest.
        let many: String = (0..20).map(|i| format!("example.com/r{i}: 1, ")).collect();
        let p = object(&POD.replace("RES: 1", many.trim_end_matches(", ")));
        let w = review(&p, &ix);
        assert_eq!(w.len(), MAX_WARNINGS);
        assert_eq!(
            w.last().unwrap().text,
            "13 more findings left out; run gpuwl explain on the object"
        );
    }

    #[test]
    fn nothing_is_said_before_the_lists_are_in() {
        assert!(review(&pod("nvidia.com/GA102GL_A1"), &Index::default()).is_empty());
    }
}
