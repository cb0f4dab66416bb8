//! Why a GPU pod (or KubeVirt VMI/VM) waits. [`explain`] gathers the facts — for every
//! extended resource the pod requests: which nodes advertise it and what is allocated and
//! free there ([`crate::analysis::usage`], the same numbers `inventory` prints), related
//! names when none does ([`crate::analysis::names`]), stale zeros, whether KubeVirt
//! permits it; how nodeSelector, required node affinity and taints narrow the nodes
//! ([`crate::analysis::placement`]); the scheduler's own PodScheduled message — and then
//! asks the named rules of [`rules`] for one [`Diagnosis`].
//!
//! Facts used (docs/domain-facts.md):
//! - a resource listed with `0` is not advertised (§4; kubernetes/kubernetes
//!   `pkg/kubelet/nodestatus/setters.go`);
//! - different resource names are different resources to the scheduler; the workload label
//!   [`crate::model::workload::LABEL_KEY`] decides which names a node advertises (§1, §3);
//! - a VMI's `spec.domain.devices.gpus[].deviceName` becomes one unit requested by its
//!   virt-launcher pod, and must be listed in the KubeVirt CR's `permittedHostDevices` (§5);
//! - the scheduler's message is quoted from the pod, never composed (§6).

pub mod dra_rules;
pub mod facts;
pub mod object;
pub mod quota;
pub mod remedy;
pub mod rules;
pub mod unused;
pub mod vm;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::admission;
use crate::analysis::diagnosis::{CauseCode, Diagnosis};
use crate::analysis::dra::{self, ClaimView, DraPlacement};
use crate::analysis::explain::remedy::Remedy;
use crate::analysis::fit::{self, Failure, NodeFit};
use crate::analysis::names::{self, Suggestion};
use crate::analysis::placement::{self, Exclusion};
use crate::analysis::usage::Usage;
use crate::analysis::verdict::{self, Verdict};
use crate::error::Result;
use crate::model::dra::DraObjects;
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::launcher;
use crate::model::node::NodeInfo;
use crate::model::operand::OperandsByNode;
use crate::model::operator::ClusterPolicy;
use crate::model::pod::{Condition, ObjectKind, PodInfo};
use crate::model::resource::{self, NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::snapshot::{From, Snapshot};

/// What an explanation is computed from, besides the pod itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Inputs<'a> {
    /// All nodes; `None` when unknown.
    pub nodes: Option<&'a [NodeInfo]>,
    /// All pods (for allocations); `None` when unknown.
    pub pods: Option<&'a [PodInfo]>,
    /// KubeVirt's `permittedHostDevices`; `None` when unknown.
    pub kubevirt: Option<&'a PermittedHostDevices>,
    /// The GPU Operator's ClusterPolicy (effective workload configs); `None` when unknown.
    pub cluster_policy: Option<&'a ClusterPolicy>,
    /// DRA objects (DeviceClasses, ResourceSlices, ResourceClaims); `None` when unknown.
    pub dra: Option<&'a DraObjects>,
    /// The GPU Operator's operand pods per node with their health; `None` when unknown.
    pub operand_pods: Option<&'a OperandsByNode>,
}

impl<'a> Inputs<'a> {
    /// What an explanation reads of a [`Snapshot`] (the one place its parts become
    /// inputs): the nodes unless there is no node data ([`From::WithoutNodes`]), the pods
    /// when read, KubeVirt's list, the ClusterPolicy, the DRA objects when they were read
    /// ([`Snapshot::usable_dra`]), and `operand_pods` (taken out of the snapshot by the
    /// caller, per node).
    pub fn of(snap: &'a Snapshot, operand_pods: Option<&'a OperandsByNode>) -> Inputs<'a> {
        Inputs {
            nodes: (snap.from != From::WithoutNodes).then_some(snap.nodes.as_slice()),
            pods: snap.pods.as_deref(),
            kubevirt: snap.kubevirt.as_ref(),
            cluster_policy: snap.policy.policy(),
            dra: snap.usable_dra(),
            operand_pods,
        }
    }

    /// The device-plugin state of a cluster alone: `nodes`, `pods`, the ClusterPolicy and
    /// KubeVirt's list, no DRA objects and no operand pods — what the inventory's pending
    /// demand, the relabel plan and a twin read back are judged on (the twin loads no DRA
    /// objects, so judging its pods with the source's would not compare like with like).
    pub fn of_state(
        nodes: &'a [NodeInfo],
        pods: &'a [PodInfo],
        cluster_policy: Option<&'a ClusterPolicy>,
        kubevirt: Option<&'a PermittedHostDevices>,
    ) -> Inputs<'a> {
        Inputs {
            nodes: Some(nodes),
            pods: Some(pods),
            kubevirt,
            cluster_policy,
            dra: None,
            operand_pods: None,
        }
    }
}

/// One node that advertises a requested resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFree {
    /// Node name.
    pub node: String,
    /// Its pool ([`crate::model::pool::Pool::name`]).
    pub pool: String,
    /// Allocatable units (> 0).
    pub allocatable: i64,
    /// Units requested by bound, non-terminal pods; `None` when pods are unknown.
    pub allocated: Option<i64>,
    /// allocatable − allocated; `None` when pods are unknown.
    pub free: Option<i64>,
    /// The pods holding units here (`namespace/name`).
    pub held_by: Vec<String>,
    /// Whether the pod's constraints allow the node.
    pub allowed: bool,
    /// The constraints that exclude it (empty when allowed).
    pub excluded_by: Vec<String>,
}

/// One requested extended resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestView {
    /// Full resource name.
    pub resource: String,
    /// Effective units requested.
    pub units: i64,
    /// Class: [`classify`] of the name, or — for a name no node advertises — the class of
    /// the closest related advertised name (`GA102GL_A1O` is a mistyped device model, not
    /// a vGPU type).
    pub class: ResourceClass,
    /// The field that names it (e.g. `spec.containers[0].resources.limits`; for units
    /// an init container decides, that init container's field).
    pub field: String,
    /// The container that field belongs to (`init container NAME` for an init
    /// container); absent for VMI devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Nodes advertising it (allocatable > 0), by name.
    pub advertisers: Vec<NodeFree>,
    /// Nodes listing it with 0 (stale keys; they do not count).
    pub stale_nodes: Vec<String>,
    /// Related advertised names, when no node advertises this one.
    pub did_you_mean: Vec<Suggestion>,
    /// Whether KubeVirt's `permittedHostDevices` lists it: `None` when the CR is unknown
    /// or the request does not come from a VMI's `gpus[]` / `hostDevices[]`.
    pub permitted: Option<bool>,
    /// Remarks on the name itself.
    pub notes: Vec<String>,
}

/// How one kind of constraint narrows the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstraintView {
    /// `nodeSelector`, `requiredNodeAffinity` or `taints`.
    pub kind: String,
    /// The constraint as written, e.g. `nvidia.com/gpu.workload.config=vm-passthrough`.
    pub description: String,
    /// Nodes it allows, by name.
    pub allows: Vec<String>,
}

/// The explanation of one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// Kind read.
    pub kind: ObjectKind,
    /// `status.phase`.
    pub phase: Option<String>,
    /// Bound node, if any.
    pub node: Option<String>,
    /// The PodScheduled condition, verbatim.
    pub scheduler: Option<Condition>,
    /// Whether node data was given.
    pub nodes_known: bool,
    /// Whether pod data (for allocations) was given.
    pub allocations_known: bool,
    /// Nodes read.
    pub nodes_total: usize,
    /// Requested extended resources.
    pub requests: Vec<RequestView>,
    /// Constraints, in order nodeSelector, required affinity, taints.
    pub constraints: Vec<ConstraintView>,
    /// Nodes all constraints allow.
    pub allowed_nodes: Vec<String>,
    /// Allowed nodes that advertise every requested extended resource.
    pub candidates: Vec<String>,
    /// Candidates with enough units of everything: allocatable >= asked, and free >=
    /// asked when allocations are known.
    pub fitting: Vec<String>,
    /// The KubeVirt CR the permissions were read from (`namespace/name`), when given.
    pub kubevirt: Option<String>,
    /// Allowed nodes that pass every modelled scheduler filter: besides the above, cpu,
    /// memory, ephemeral-storage, hugepages and pod slots ([`crate::analysis::fit`]).
    pub schedulable: Vec<String>,
    /// Per node, the scheduler's filters as gpuwl models them: the reasons the scheduler
    /// reports for it (its first failing filter) and every failing filter.
    pub filters: Vec<NodeFit>,
    /// The `0/N nodes are available: …` part of the message the scheduler would write,
    /// from [`Explanation::filters`]; absent when a node passes, or nodes are unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_message: Option<String>,
    /// The stable diagnosis code ([`CauseCode`]): the primary cause.
    pub cause_code: CauseCode,
    /// The verdict every command uses for this pod ([`crate::analysis::verdict`]): the
    /// class of its wait (demand, blocked, gated, other-resource, unservable, ...) and
    /// whether it can pass on its own.
    pub verdict: Verdict,
    /// Nodes that offer every requested name with enough allocatable units and are kept
    /// from the pod only by a cordon or taints (a drain, a dedicated taint): when the
    /// cause is `excluded`, the pod is blocked there, not unservable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_off: Vec<String>,
    /// `spec.schedulingGates[].name`: while any is present the scheduler skips the pod.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
    /// Every blocking cause found, the primary first, then the others in the scheduler's
    /// filter order (cordon/taints/selector → `excluded`; GPU units short on a node that
    /// advertises them → `too-large`/`in-use`/`insufficient`; cpu, memory, pods and the
    /// rest → `other-resource`), each once.
    pub cause_codes: Vec<CauseCode>,
    /// One-paragraph cause.
    pub cause: String,
    /// One concrete fix.
    pub fix: String,
    /// Facts from the input behind the cause.
    pub evidence: Vec<String>,
    /// Other remarks.
    pub notes: Vec<String>,
    /// The pod's DRA resource claims (`spec.resourceClaims`): per claim and request, the
    /// DeviceClass, the devices its selectors match, on which nodes, which are free.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimView>,
    /// The DRA filter per allowed node: where the pod's claims can be allocated now
    /// (`None` without claims or DRA objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra: Option<DraPlacement>,
    /// Whether DRA objects were given (or listed).
    pub dra_known: bool,
    /// For `explain vm|vmi`: the VM or VMI, its conditions and devices, and the launcher
    /// pod explained ([`vm::explain_vm`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm: Option<vm::VmView>,
    /// The tested fix ([`remedy`]): the changes after which gpuwl's model
    /// places the pod, verified by re-running this explanation on the changed inputs; or,
    /// with `sufficient: false`, why no change within reach serves. Present only for the
    /// causes the modelled filters decide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<Remedy>,
    /// The quota layer, for a pod or Job Kueue manages ([`quota::with_quota`]):
    /// its Workload's LocalQueue, ClusterQueue, Kueue's message, the flavors tried and the
    /// quota cause (`kueue-*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<crate::analysis::kueue::QuotaVerdict>,
}

/// Explains `pod` against `inputs`: [`gather`], then the first rule of
/// [`rules::RULES`] that applies, and [`Explanation::cause_codes`].
///
/// Errors: [`crate::error::Error::Input`] when a node's quantity of an extended resource is
/// not a whole number.
///
/// The fix is tested ([`remedy`]): for the causes the modelled filters
/// decide, `fix` says the changes after which the pod fits on gpuwl's model (the rule's own
/// advice stays in `notes`), or that no change within reach serves and why.
pub fn explain(pod: &PodInfo, inputs: Inputs<'_>) -> Result<Explanation> {
    let shared = Shared::new(inputs);
    let mut e = shared.explain(pod)?;
    let pod = as_launcher(pod, inputs);
    if let Some(r) = remedy::remedy(&pod, inputs, &e, shared.requested.as_ref()) {
        remedy::rewrite_fix(&mut e, r);
    }
    Ok(e)
}

/// A VMI or VM that waits with no virt-launcher pod, as the launcher pod virt-controller
/// would render for it under the KubeVirt CR's settings (`inputs.kubevirt`, KubeVirt's
/// defaults when no CR is known; [`launcher::render`]: kvm, tun, vhost-net, 50M of
/// ephemeral-storage, memory with KubeVirt's overhead, cpu, the `kubernetes.io/arch` and
/// `kubevirt.io/schedulable` selectors), when the nodes show KubeVirt runs (some node is
/// ready for virt-handler: [`rules::virt_handler_ready`]); else, and for anything else,
/// `pod` as it is. A dump with no KubeVirt node (a bug report's trimmed nodes) is judged
/// on the VMI's own requests, as before.
pub fn as_launcher<'p>(pod: &'p PodInfo, inputs: Inputs<'_>) -> Cow<'p, PodInfo> {
    let kubevirt_runs = || {
        inputs
            .nodes
            .is_some_and(|n| n.iter().any(rules::virt_handler_ready))
    };
    match &pod.vmi_shape {
        Some(shape) if pod.is_vm() && pod.node_name.is_none() && kubevirt_runs() => {
            let defaults = launcher::Cluster::default();
            let cluster = inputs.kubevirt.map_or(&defaults, |kv| &kv.launcher);
            Cow::Owned(launcher::render(pod, shape, cluster))
        }
        _ => Cow::Borrowed(pod),
    }
}

/// The note saying a VMI or VM was judged as its rendered launcher ([`as_launcher`]).
fn launcher_note(rendered: &PodInfo) -> String {
    let mem = rendered
        .other_requests
        .get("memory")
        .map(|m| format!(", memory {}", fit::amount("memory", *m)))
        .unwrap_or_default();
    format!(
        "no virt-launcher pod exists: judged as the one virt-controller renders (KubeVirt v1.7.0): nodeSelector {}; requests {}, ephemeral-storage 50M{mem} (with KubeVirt's overhead), cpu {}",
        rendered
            .node_selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        rendered
            .requests
            .keys()
            .filter(|r| r.starts_with("devices.kubevirt.io/"))
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        fit::amount(
            "cpu",
            rendered.other_requests.get("cpu").copied().unwrap_or(0)
        )
    )
}

/// What every explanation against the same inputs shares: the per node × resource table
/// ([`Usage`]) and the resources each node's bound pods request ([`fit::requested`]).
/// Built once, it makes explaining every pending pod of a cluster (inventory, serve,
/// triage) cost per pod only the per-node filters, not a pass over all pods.
pub struct Shared<'a> {
    inputs: Inputs<'a>,
    usage: Usage,
    requested: Option<BTreeMap<String, fit::Requested>>,
}

impl<'a> Shared<'a> {
    /// Computes the shared tables of `inputs`.
    pub fn new(inputs: Inputs<'a>) -> Shared<'a> {
        Shared {
            usage: Usage::build(
                inputs.nodes.unwrap_or(&[]),
                inputs.pods,
                inputs.cluster_policy,
            ),
            requested: inputs.pods.map(fit::requested),
            inputs,
        }
    }

    /// Explains `pod` ([`explain`]).
    ///
    /// Errors: as [`explain`].
    pub fn explain(&self, pod: &PodInfo) -> Result<Explanation> {
        let rendered = as_launcher(pod, self.inputs);
        let mut e = gather_with(&rendered, self.inputs, &self.usage, self.requested.as_ref())?;
        if let Cow::Owned(l) = &rendered {
            e.notes.insert(0, launcher_note(l));
        }
        diagnose(&rendered, self.inputs, &self.usage, &mut e);
        Ok(e)
    }
}

/// The facts, gathered before any rule runs (like `check`'s gather step): per requested
/// extended resource its advertisers and their free units ([`Usage`]), stale zeros and
/// related names; how cordon, nodeSelector, affinity and taints narrow the nodes; the
/// scheduler's filters node by node ([`fit`]); the pod's DRA claims; notes. The returned
/// explanation has no diagnosis yet (`causeCode` `fits-now`, empty cause and fix).
///
/// Errors: as [`explain`].
pub fn gather(pod: &PodInfo, inputs: Inputs<'_>) -> Result<(Explanation, Usage)> {
    let usage = Usage::build(
        inputs.nodes.unwrap_or(&[]),
        inputs.pods,
        inputs.cluster_policy,
    );
    let requested = inputs.pods.map(fit::requested);
    let e = gather_with(
        &as_launcher(pod, inputs),
        inputs,
        &usage,
        requested.as_ref(),
    )?;
    Ok((e, usage))
}

/// Each node's exclusions for the pod ([`placement::exclusions`]), by node name.
type Exclusions<'a> = BTreeMap<&'a str, Vec<Exclusion>>;

/// [`gather`] with the shared tables computed by the caller ([`Shared`]): the requests,
/// the constraints, how they narrow the nodes, the scheduler's filters, then the DRA claims
/// and the notes.
fn gather_with(
    pod: &PodInfo,
    inputs: Inputs<'_>,
    usage: &Usage,
    requested: Option<&BTreeMap<String, fit::Requested>>,
) -> Result<Explanation> {
    let nodes_known = inputs.nodes.is_some();
    let nodes = inputs.nodes.unwrap_or(&[]);
    let exclusions: Exclusions<'_> = nodes
        .iter()
        .map(|n| (n.name.as_str(), placement::exclusions(pod, n)))
        .collect();
    let advertised_names = usage.advertised_names();
    // A VMI judged as its rendered launcher ([`as_launcher`]): virt-handler's devices are
    // the scheduler's to check (the filters, the virt-handler rule), not requests the user
    // wrote; the note lists them.
    let requests: Vec<RequestView> = pod
        .requests
        .iter()
        .filter(|(r, _)| !(pod.is_vm() && rules::is_kubevirt_device(r)))
        .map(|(r, units)| {
            request_view(
                pod,
                r,
                *units,
                inputs,
                usage,
                &exclusions,
                &advertised_names,
            )
        })
        .collect();
    let constraints = constraint_views(pod, nodes, &exclusions);
    let (allowed_nodes, candidates, fitting) = narrowed(nodes, &exclusions, &requests);
    let held_off = held_off(nodes, &exclusions, &requests);

    // The scheduler's filters, node by node (every resource, not only extended ones).
    let filters: Vec<NodeFit> = if pod.node_name.is_none() {
        fit::filter(pod, nodes, requested)
    } else {
        Vec::new()
    };
    let schedulable: Vec<String> = filters
        .iter()
        .filter(|f| f.passes())
        .map(|f| f.node.clone())
        .collect();
    let predicted_message = fit::message(&filters);
    let mut e = Explanation {
        pod: pod.key(),
        kind: pod.kind,
        phase: pod.phase.clone(),
        node: pod.node_name.clone(),
        scheduler: pod.pod_scheduled().cloned(),
        nodes_known,
        allocations_known: usage.pods_known,
        nodes_total: nodes.len(),
        requests,
        constraints,
        allowed_nodes,
        candidates,
        fitting,
        schedulable,
        filters,
        predicted_message,
        kubevirt: inputs.kubevirt.map(|k| k.object.clone()),
        cause_code: CauseCode::FitsNow,
        verdict: verdict::verdict(CauseCode::FitsNow, false),
        held_off,
        scheduling_gates: pod.scheduling_gates.clone(),
        cause_codes: Vec::new(),
        cause: String::new(),
        fix: String::new(),
        evidence: Vec::new(),
        notes: Vec::new(),
        claims: Vec::new(),
        dra: None,
        dra_known: inputs.dra.is_some(),
        vm: None,
        remedy: None,
        quota: None,
    };
    if !pod.resource_claims.is_empty() {
        match inputs.dra {
            Some(dra) => add_claims(&mut e, pod, dra, &exclusions),
            None => e.notes.push(
                "the pod asks for devices through resourceClaims (DRA): pass --dra FILE (kubectl get deviceclasses,resourceslices,resourceclaims -A -o json) to see which devices they match".into(),
            ),
        }
    }
    if pod.is_vm()
        && let Some(kv) = inputs.kubevirt
    {
        e.notes.extend(kubevirt_notes(kv, &advertised_names));
    }
    for bad in &usage.skipped {
        e.notes
            .push(format!("skipped (not a valid device count): {bad}"));
    }
    Ok(e)
}

/// The view of one extended resource `r` the pod asks `units` of: where it was read, the
/// nodes advertising it (with their free units and what excludes them), nodes listing it
/// at zero, names it may have meant, whether KubeVirt permits it, and notes on the name.
fn request_view(
    pod: &PodInfo,
    r: &str,
    units: i64,
    inputs: Inputs<'_>,
    usage: &Usage,
    exclusions: &Exclusions<'_>,
    advertised_names: &BTreeSet<&str>,
) -> RequestView {
    let source = pod.sources.iter().find(|s| s.resource == r);
    let field = source.map(|s| s.field.clone()).unwrap_or_default();
    let container = source.and_then(|s| s.container.clone());
    let mut advertisers = Vec::new();
    let mut stale = Vec::new();
    for n in inputs.nodes.unwrap_or(&[]) {
        let Some(cell) = usage.cell(&n.name, r) else {
            continue;
        };
        if !cell.advertised() {
            if cell.listed {
                stale.push(n.name.clone());
            }
            continue;
        }
        let ex = &exclusions[n.name.as_str()];
        advertisers.push(NodeFree {
            node: n.name.clone(),
            pool: usage.pool_of(&n.name).map(|p| p.name()).unwrap_or_default(),
            allocatable: cell.allocatable,
            allocated: usage.pods_known.then_some(cell.allocated),
            free: usage.pods_known.then(|| cell.free()),
            held_by: cell.holders.iter().map(|h| h.pod.clone()).collect(),
            allowed: ex.is_empty(),
            excluded_by: ex.iter().map(ToString::to_string).collect(),
        });
    }
    let did_you_mean = if advertisers.is_empty() {
        names::did_you_mean(r, advertised_names.iter().copied())
    } else {
        Vec::new()
    };
    let class = match did_you_mean.first() {
        Some(s) if classify(r).is_gpu() => classify(&s.name),
        _ => classify(r),
    };
    let mut notes = Vec::new();
    if advertisers.is_empty() && class == ResourceClass::PassthroughModel {
        notes.extend(model_name_note(r));
    }
    notes.extend(
        pod.spec_problems
            .iter()
            .filter(|p| p.resource() == r)
            .map(ToString::to_string),
    );
    let from_vmi_device = field.contains(".gpus[") || field.contains(".hostDevices[");
    // No permittedHostDevices at all: virt-controller renders the launcher pod for any
    // name (kubevirt/kubevirt pkg/virt-controller/services/renderresources.go
    // validatePermittedHostDevices checks only a non-nil list): nothing to say. A launcher
    // pod that exists (named with its VMI's fields) was rendered: KubeVirt's check is
    // behind it, and it waits on what the scheduler says; a list that dropped the name
    // since only refuses its next launcher (a restart, a migration), which a note says.
    let permitted = inputs
        .kubevirt
        .filter(|kv| from_vmi_device && pod.is_vm() && kv.present)
        .map(|kv| !kv.refuses(r));
    if let Some(kv) = inputs.kubevirt
        && from_vmi_device
        && !pod.is_vm()
        && kv.refuses(r)
    {
        notes.push(format!(
            "{r} is no longer in {} of {}: this virt-launcher pod was rendered before; KubeVirt refuses the next one (a restart, a migration) unless the list permits it again",
            kv.source.path(),
            kv.object
        ));
    }
    RequestView {
        resource: r.to_owned(),
        units,
        class,
        field,
        container,
        advertisers,
        stale_nodes: stale,
        did_you_mean,
        permitted,
        notes,
    }
}

/// Why a passthrough model name `r` that no node advertises may be spelled wrong: lower-case
/// letters (the sandbox device plugin upper-cases device names since v1.1.1, 2022), or a hex
/// PCI device id (the plugin's pci.ids lacked the device). `None` for other names.
fn model_name_note(r: &str) -> Option<String> {
    let short = r.strip_prefix(NVIDIA_PREFIX)?;
    if resource::is_mixed_case_model(short) {
        Some(format!(
            "{r} has lower-case letters: the sandbox device plugin upper-cases device names since v1.1.1 (2022)"
        ))
    } else if resource::is_hex_fallback(short) {
        Some(format!(
            "{r} is a hex PCI device id: the plugin's pci.ids lacked the device; a newer plugin advertises the model name instead"
        ))
    } else {
        None
    }
}

/// The constraints that narrow the nodes, each on its own: cordons, the nodeSelector,
/// required node affinity and NoSchedule/NoExecute taints, each with the nodes it allows.
fn constraint_views(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    exclusions: &Exclusions<'_>,
) -> Vec<ConstraintView> {
    let mut constraints = Vec::new();
    let names_where = |f: &dyn Fn(&Exclusion) -> bool| -> Vec<String> {
        nodes
            .iter()
            .filter(|n| !exclusions[n.name.as_str()].iter().any(f))
            .map(|n| n.name.clone())
            .collect()
    };
    let cordoned: Vec<&str> = nodes
        .iter()
        .filter(|n| n.unschedulable)
        .map(|n| n.name.as_str())
        .collect();
    if !cordoned.is_empty() {
        constraints.push(ConstraintView {
            kind: "cordon".into(),
            description: format!("spec.unschedulable on {}", cordoned.join(", ")),
            allows: names_where(&|e| matches!(e, Exclusion::Unschedulable)),
        });
    }
    if !pod.node_selector.is_empty() {
        constraints.push(ConstraintView {
            kind: "nodeSelector".into(),
            description: pod
                .node_selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
            allows: names_where(&|e| matches!(e, Exclusion::NodeSelector { .. })),
        });
    }
    if let Some(terms) = &pod.required_affinity {
        constraints.push(ConstraintView {
            kind: "requiredNodeAffinity".into(),
            description: placement::affinity_str(terms),
            allows: names_where(&|e| matches!(e, Exclusion::Affinity)),
        });
    }
    let tainted: BTreeSet<String> = nodes
        .iter()
        .flat_map(|n| &n.taints)
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .map(placement::taint_str)
        .collect();
    if !tainted.is_empty() {
        constraints.push(ConstraintView {
            kind: "taints".into(),
            description: format!(
                "node taints {} against {} toleration(s)",
                tainted.into_iter().collect::<Vec<_>>().join(", "),
                pod.tolerations.len()
            ),
            // The cordon's own taint is said once, as the cordon; the TaintToleration
            // filter still rejects a node that carries it untolerated.
            allows: nodes
                .iter()
                .filter(|n| {
                    !exclusions[n.name.as_str()].iter().any(|e| {
                        matches!(e, Exclusion::Taint { .. })
                            || (matches!(e, Exclusion::Unschedulable)
                                && n.taints.iter().any(|t| {
                                    t.key == placement::UNSCHEDULABLE_TAINT
                                        && matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                                }))
                    })
                })
                .map(|n| n.name.clone())
                .collect(),
        });
    }
    constraints
}

/// How the constraints and requests narrow the nodes: `(allowed, candidates, fitting)` —
/// the nodes no constraint excludes; of those, the ones advertising every request; of
/// those, the ones with enough allocatable (and, when allocations are known, free) units
/// of each.
fn narrowed(
    nodes: &[NodeInfo],
    exclusions: &Exclusions<'_>,
    requests: &[RequestView],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let allowed_nodes: Vec<String> = nodes
        .iter()
        .filter(|n| exclusions[n.name.as_str()].is_empty())
        .map(|n| n.name.clone())
        .collect();
    let advertises_all = |node: &str| {
        requests
            .iter()
            .all(|rv| rv.advertisers.iter().any(|a| a.node == node))
    };
    let candidates: Vec<String> = allowed_nodes
        .iter()
        .filter(|n| advertises_all(n))
        .cloned()
        .collect();
    let fitting: Vec<String> = candidates
        .iter()
        .filter(|n| {
            requests.iter().all(|rv| {
                rv.advertisers.iter().any(|a| {
                    &a.node == *n
                        && a.allocatable >= rv.units
                        && a.free.is_none_or(|f| f >= rv.units)
                })
            })
        })
        .cloned()
        .collect();
    (allowed_nodes, candidates, fitting)
}

/// Adds the pod's DRA claims to `e` ([`crate::analysis::dra::claim_views`]) and where they
/// can be allocated, keeping in `e.fitting` only those nodes. Without nodes, every node a
/// ResourceSlice names is a candidate.
fn add_claims(e: &mut Explanation, pod: &PodInfo, dra: &DraObjects, exclusions: &Exclusions<'_>) {
    let nodes_known = e.nodes_known;
    let allowed = |node: &str| {
        !nodes_known
            || exclusions
                .get(node)
                .is_some_and(|ex: &Vec<Exclusion>| ex.is_empty())
    };
    e.claims = dra::claim_views(dra, &pod.namespace, &pod.resource_claims, &allowed);
    let dra_nodes: Vec<String> = if nodes_known {
        e.allowed_nodes.clone()
    } else {
        let mut v: Vec<String> = dra
            .resource_slices
            .iter()
            .filter_map(|s| s.node_name.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let p = dra::placement(dra, &pod.namespace, &pod.resource_claims, &dra_nodes);
    // A DRA pod fits, and is schedulable, only where its claims can be allocated (the
    // scheduler's DynamicResources filter runs beside the others: issue 49, item 2).
    e.fitting.retain(|n| p.fits.contains(n));
    if !pod.resource_claims.is_empty() {
        e.schedulable.retain(|n| p.fits.contains(n));
    }
    e.dra = Some(p);
}

/// For a VM: the names KubeVirt's permittedHostDevices lists without
/// `externalResourceProvider: true` that a node already advertises (KubeVirt would start
/// its own device plugin beside the GPU Operator's), one note each.
fn kubevirt_notes(kv: &PermittedHostDevices, advertised_names: &BTreeSet<&str>) -> Vec<String> {
    let internal = kv
        .pci_host_devices
        .iter()
        .filter(|d| !d.external_resource_provider)
        .map(|d| d.resource_name.as_str())
        .chain(
            kv.mediated_devices
                .iter()
                .filter(|d| !d.external_resource_provider)
                .map(|d| d.resource_name.as_str()),
        );
    internal
        .filter(|r| advertised_names.contains(r))
        .map(|r| {
            format!(
                "permittedHostDevices lists {r} without externalResourceProvider: true: KubeVirt starts its own device plugin for devices the GPU Operator's sandbox device plugin already serves"
            )
        })
        .collect()
}

/// [`Explanation::held_off`]: the nodes that offer every request with enough allocatable
/// units and are excluded by cordons or taints only.
fn held_off(
    nodes: &[NodeInfo],
    exclusions: &BTreeMap<&str, Vec<Exclusion>>,
    requests: &[RequestView],
) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            let ex = &exclusions[n.name.as_str()];
            !ex.is_empty()
                && ex
                    .iter()
                    .all(|e| matches!(e, Exclusion::Unschedulable | Exclusion::Taint { .. }))
                && requests.iter().all(|rv| {
                    rv.advertisers
                        .iter()
                        .any(|a| a.node == n.name && a.allocatable >= rv.units)
                })
        })
        .map(|n| n.name.clone())
        .collect()
}

/// Runs the rules over the gathered facts and fills in the diagnosis.
fn diagnose(pod: &PodInfo, inputs: Inputs<'_>, usage: &Usage, e: &mut Explanation) {
    let nodes = inputs.nodes.unwrap_or(&[]);
    let d: Diagnosis = rules::diagnose(&rules::Facts {
        pod,
        pods: inputs.pods.unwrap_or(&[]),
        e,
        nodes,
        usage,
        kubevirt: inputs.kubevirt,
        cluster_policy: inputs.cluster_policy,
        operand_pods: inputs.operand_pods,
        dra: inputs.dra,
    });
    if pod.is_vm()
        && inputs.kubevirt.is_none()
        && matches!(
            d.code,
            CauseCode::UnadvertisedName | CauseCode::StaleOnly | CauseCode::FitsNow
        )
    {
        e.notes.push(
            "a VMI's deviceName must also be listed in the KubeVirt CR's permittedHostDevices, else KubeVirt refuses the VMI (Synchronized=False, \"GPU <name> is not permitted in permittedHostDevices configuration\") and makes no launcher pod; pass --kubevirt FILE to verify".into(),
        );
    }
    e.cause_codes = cause_codes(d.code, e, usage);
    e.cause_code = d.code;
    e.cause = d.cause;
    e.fix = d.fix;
    e.evidence = d.evidence;
    unused::add(pod, inputs, e);
    e.verdict = verdict::verdict(e.cause_code, !e.held_off.is_empty());
    if pod.node_name.is_none()
        && !pod.scheduling_gates.is_empty()
        && verdict::gates_apply(e.cause_code)
    {
        e.verdict = verdict::gated(e.cause_code, !e.held_off.is_empty());
        gated(pod, e);
    }
    scheduler_notes(e);
}

/// Puts `gated` in front of a diagnosis: the scheduler skips the pod while
/// `spec.schedulingGates` has an entry (the API server writes `PodScheduled=False,
/// SchedulingGated`; kubernetes/kubernetes `pkg/scheduler/framework/plugins/schedulinggates`),
/// so the gates hold it now and the rules' cause is what would hold it once they are gone.
fn gated(pod: &PodInfo, e: &mut Explanation) {
    let gates = pod
        .scheduling_gates
        .iter()
        .map(|g| admission::show(g))
        .collect::<Vec<_>>()
        .join(", ");
    let then = if e.cause_code == CauseCode::FitsNow {
        "once they are removed, it fits now".to_owned()
    } else {
        format!(
            "once they are removed, it would wait on `{}`: {}",
            e.cause_code, e.cause
        )
    };
    e.cause = format!(
        "the {} is held by scheduling gates ({gates}): the scheduler does not consider it until every gate is removed; {then}",
        match pod.kind {
            ObjectKind::Pod => "pod",
            _ => "VM",
        }
    );
    let release = format!(
        "kubectl patch pod {} -n {} --type=json -p '[{{\"op\":\"remove\",\"path\":\"/spec/schedulingGates\"}}]'",
        pod.name, pod.namespace
    );
    let after = if e.cause_code == CauseCode::FitsNow || e.fix.is_empty() {
        String::new()
    } else {
        format!("; then: {}", e.fix)
    };
    e.fix = format!(
        "wait for the controller that added the gates (a queue such as Kueue admits the workload and removes its gate); to release it by hand: {release}{after}"
    );
    e.evidence
        .insert(0, format!("spec.schedulingGates: {gates}"));
    // What held it before the gates may be `fits-now`: nothing then, not a second cause.
    e.cause_codes.retain(|c| c.blocks());
    e.cause_codes.insert(0, CauseCode::Gated);
    e.cause_code = CauseCode::Gated;
}

/// Compares the scheduler's own message (when it has the `0/N nodes are available` form)
/// with the reasons gpuwl's filters predict, and notes a difference: the input is older
/// than the message, or a filter gpuwl does not model decided.
fn scheduler_notes(e: &mut Explanation) {
    let Some(msg) = e.scheduler.as_ref().and_then(|c| c.message.as_deref()) else {
        return;
    };
    // DRA reasons are the claims section's to explain.
    if e.node.is_some() || e.filters.is_empty() || !e.claims.is_empty() {
        return;
    }
    let Some((_, said)) = fit::parse_message(msg) else {
        return;
    };
    let predicted = fit::histogram(&e.filters);
    let unexplained: Vec<String> = said
        .iter()
        .filter(|(r, _)| !predicted.contains_key(*r))
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    if !unexplained.is_empty() {
        e.notes.push(format!(
            "the scheduler's message names {} that gpuwl's filters do not find in this input (the input may be newer or older than the message, or a filter gpuwl does not model decided: host ports, volumes, inter-pod affinity, topology spread, DRA)",
            unexplained.join(", ")
        ));
    }
}

/// Every blocking cause: `primary`, then what each node's first failing filter says, in
/// filter order — a placement rule (`excluded`, or `node-conditions` for a
/// `node.kubernetes.io/*` condition taint), GPU units short on a node that advertises the
/// name (`too-large` when more than its allocatable, `in-use` when none free, else
/// `insufficient`), any other resource (`other-resource`) — each code once.
fn cause_codes(primary: CauseCode, e: &Explanation, usage: &Usage) -> Vec<CauseCode> {
    let mut out = vec![primary];
    let mut placement = Vec::new();
    let mut gpu = Vec::new();
    let mut other = Vec::new();
    for f in &e.filters {
        for r in &f.reasons {
            match r {
                Failure::Taint { taint }
                    if taint.key.starts_with("node.kubernetes.io/")
                        && taint.key != fit::UNSCHEDULABLE_TAINT =>
                {
                    placement.push(CauseCode::NodeConditions)
                }
                Failure::Unschedulable
                | Failure::Taint { .. }
                | Failure::NodeAffinity
                | Failure::NotNamed => placement.push(CauseCode::Excluded),
                Failure::Insufficient {
                    resource,
                    requested,
                    allocatable,
                    used,
                } if e.requests.iter().any(|rv| &rv.resource == resource) => {
                    if usage
                        .cell(&f.node, resource)
                        .is_some_and(|c| c.advertised())
                    {
                        gpu.push(if requested > allocatable {
                            CauseCode::TooLarge
                        } else if allocatable.saturating_sub(*used) <= 0 {
                            CauseCode::InUse
                        } else {
                            CauseCode::Insufficient
                        });
                    }
                }
                Failure::Insufficient { .. } | Failure::TooManyPods { .. } => {
                    other.push(CauseCode::OtherResource)
                }
            }
        }
    }
    gpu.sort();
    for c in placement.into_iter().chain(gpu).chain(other) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_name_notes_name_lower_case_and_hex_ids() {
        assert_eq!(
            model_name_note("nvidia.com/GA102gl_A10").as_deref(),
            Some(
                "nvidia.com/GA102gl_A10 has lower-case letters: the sandbox device plugin upper-cases device names since v1.1.1 (2022)"
            )
        );
        assert!(
            model_name_note("nvidia.com/2236")
                .is_some_and(|n| n.starts_with("nvidia.com/2236 is a hex PCI device id"))
        );
        assert_eq!(model_name_note("nvidia.com/GA102GL_A10"), None);
        assert_eq!(model_name_note("example.com/gpu"), None);
    }

    #[test]
    fn narrowing_keeps_allowed_nodes_that_advertise_and_have_free_units() {
        let nodes = vec![
            NodeInfo::named("a"),
            NodeInfo::named("b"),
            NodeInfo::named("c"),
        ];
        let exclusions: Exclusions<'_> = BTreeMap::from([
            ("a", vec![]),
            ("b", vec![]),
            ("c", vec![Exclusion::Unschedulable]),
        ]);
        let free = |node: &str, free: i64| NodeFree {
            node: node.into(),
            pool: "vm-passthrough".into(),
            allocatable: 2,
            allocated: Some(2 - free),
            free: Some(free),
            held_by: vec![],
            allowed: true,
            excluded_by: vec![],
        };
        let request = RequestView {
            resource: "nvidia.com/GA102GL_A10".into(),
            units: 1,
            class: ResourceClass::PassthroughModel,
            field: String::new(),
            container: None,
            advertisers: vec![free("a", 0), free("b", 1), free("c", 2)],
            stale_nodes: vec![],
            did_you_mean: vec![],
            permitted: None,
            notes: vec![],
        };
        let (allowed, candidates, fitting) = narrowed(&nodes, &exclusions, &[request]);
        assert_eq!(allowed, ["a", "b"]);
        assert_eq!(candidates, ["a", "b"]);
        assert_eq!(fitting, ["b"]);
    }

    #[test]
    fn a_waiting_launcher_is_judged_by_its_own_wait_not_the_list_that_dropped_its_name() {
        use crate::model::kubevirt::{HostDevicesSource, PermittedHostDevices};
        use crate::model::pod::RequestSource;
        // Issue 47, item 4: the launcher exists and waits on units a holder has; the CR no
        // longer permits its name. The wait is in-use (deleting the holder binds it).
        let mut node = NodeInfo::named("p-1");
        node.capacity
            .insert("nvidia.com/GA102GL_A10".into(), "1".into());
        let launcher = |name: &str, bound: Option<&str>| PodInfo {
            namespace: "vms".into(),
            name: name.into(),
            node_name: bound.map(Into::into),
            phase: Some(
                if bound.is_some() {
                    "Running"
                } else {
                    "Pending"
                }
                .into(),
            ),
            requests: std::sync::Arc::new(BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 1)])),
            sources: vec![RequestSource {
                resource: "nvidia.com/GA102GL_A10".into(),
                field: "spec.domain.devices.gpus[0].deviceName of VMI vms/a".into(),
                container: None,
            }],
            ..Default::default()
        };
        let pods = [
            launcher("virt-launcher-a-abcde", None),
            launcher("virt-launcher-b-fghij", Some("p-1")),
        ];
        let kv = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: None,
            pci_host_devices: Vec::new(),
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        let nodes = [node];
        let e = explain(
            &pods[0],
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&pods),
                kubevirt: Some(&kv),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.cause_code, CauseCode::InUse, "{}", e.cause);
        assert_eq!(e.requests[0].permitted, None);
        assert!(
            e.requests[0].notes.iter().any(|n| n.starts_with(
                "nvidia.com/GA102GL_A10 is no longer in spec.configuration.permittedHostDevices of kubevirt/kubevirt: this virt-launcher pod was rendered before"
            )),
            "{:?}",
            e.requests[0].notes
        );
    }

    #[test]
    fn a_vmi_file_is_judged_under_the_crs_launcher_settings() {
        use crate::decode::kubevirt::from_object as cr;
        use crate::decode::pods::from_object as read;
        // Issue 47: a VMI with only `memory.guest: 2Gi` on a KubeVirt node with 3000Mi:
        // at KubeVirt's defaults its launcher asks 2Gi + 1,292Mi of overhead + the 35M
        // sidecar (about 3,373Mi): memory is short. Under `memoryOvercommit: 200` it asks
        // 1Gi + the same (about 2,349Mi) and fits; under `useEmulation` it asks no kvm.
        let vmi = read(&serde_json::json!({"kind": "VirtualMachineInstance",
            "metadata": {"name": "vm", "namespace": "ns"},
            "spec": {"domain": {"memory": {"guest": "2Gi"},
                "devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/GA102GL_A10"}]}}}}))
        .unwrap();
        let mut node = NodeInfo::named("kv-1");
        node.labels
            .insert("kubevirt.io/schedulable".into(), "true".into());
        node.labels
            .insert("kubernetes.io/arch".into(), "amd64".into());
        node.allocatable = Some(
            [
                ("nvidia.com/GA102GL_A10", "1"),
                ("memory", "3000Mi"),
                ("cpu", "4"),
                ("pods", "110"),
                ("ephemeral-storage", "10Gi"),
                ("devices.kubevirt.io/kvm", "1k"),
                ("devices.kubevirt.io/tun", "1k"),
                ("devices.kubevirt.io/vhost-net", "1k"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        node.capacity = node.allocatable.clone().unwrap();
        let nodes = [node];
        let with = |config: serde_json::Value| {
            let kv = cr(&serde_json::json!({"kind": "KubeVirt",
                "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
                "spec": {"configuration": config}}))
            .unwrap();
            let inputs = Inputs {
                nodes: Some(&nodes),
                pods: Some(&[][..]),
                kubevirt: Some(&kv),
                ..Default::default()
            };
            let e = explain(&vmi, inputs).unwrap();
            (e.cause_code, as_launcher(&vmi, inputs).into_owned())
        };
        let (code, launcher) = with(serde_json::json!({}));
        assert_eq!(code, CauseCode::OtherResource);
        assert_eq!(
            launcher.other_requests["memory"],
            (2048 + 220 + 8 + 8 + 32 + 1024) * (1 << 20) + 35_000_000
        );
        let (code, launcher) =
            with(serde_json::json!({"developerConfiguration": {"memoryOvercommit": 200}}));
        assert_eq!(code, CauseCode::FitsNow);
        assert_eq!(
            launcher.other_requests["memory"],
            (1024 + 220 + 8 + 8 + 32 + 1024) * (1 << 20) + 35_000_000
        );
        let (_, launcher) =
            with(serde_json::json!({"developerConfiguration": {"useEmulation": true}}));
        assert!(!launcher.requests.contains_key(launcher::KVM));
        assert!(!launcher.requests.contains_key(launcher::VHOST_NET));
    }

    #[test]
    fn inputs_of_a_snapshot_take_only_what_was_read() {
        use crate::model::dra::DraSource;
        use crate::model::operator::PolicyStatus;
        use crate::model::snapshot::{From, Snapshot};
        let mut snap = Snapshot::of_cluster(
            vec![NodeInfo::named("n")],
            Vec::new(),
            PolicyStatus::not_read(),
        );
        let i = Inputs::of(&snap, None);
        assert_eq!(i.nodes.map(<[_]>::len), Some(1));
        assert_eq!(i.pods.map(<[_]>::len), Some(0));
        assert!(i.dra.is_none());
        // DRA objects whose list was denied say nothing of the devices: not taken.
        snap.dra = Some((DraObjects::default(), DraSource::Denied("403".into())));
        assert!(Inputs::of(&snap, None).dra.is_none());
        snap.dra = Some((DraObjects::default(), DraSource::File("dra.json".into())));
        assert!(Inputs::of(&snap, None).dra.is_some());
        // No node dump: no node data (not an empty cluster); pods not read: unknown.
        snap.from = From::WithoutNodes;
        snap.pods = None;
        let i = Inputs::of(&snap, None);
        assert!(i.nodes.is_none() && i.pods.is_none());
    }
}
