//! Fixes that are tested changes: for a pending pod, the smallest set of changes after which
//! gpuwl's own model of the scheduler places it, found by applying candidate changes to the
//! model and re-running the explanation — never a sentence nobody checked.
//!
//! How: node by node, the scheduler's filters as [`crate::analysis::fit`] models them say
//! what rejects the pod there (cordon, an untolerated taint, nodeSelector or required
//! affinity, too few units of a resource). Each failure maps to the change that lifts it —
//! on the pod (a toleration, a selector aimed at the node, the request renamed to the name
//! the node advertises or lowered to what is free) or on the node (uncordon, pods stopped to
//! free units) — and the filters run again on the changed pod and node until the node passes
//! (a second taint shows up once the first is tolerated) or a failure has no change within
//! reach (a node condition, no pod slot, a name the node does not advertise). The cheapest
//! plans are then verified by the whole explanation on the changed inputs
//! ([`crate::analysis::explain::Shared`]): a plan is kept only when the pod is `fits-now`
//! there and the node is among those it can be scheduled on.
//!
//! Harm rules, enforced here and nowhere else:
//! - only the pod, one node's cordon, or named pods on that node are changed — never a
//!   cluster-wide object (DeviceClass, ClusterPolicy, KubeVirt CR) and never a node label;
//! - the cordon's own taint (`node.kubernetes.io/unschedulable`) is never tolerated: the
//!   change is to uncordon, said as such (it undoes a drain);
//! - node-condition taints (`node.kubernetes.io/*`: not-ready, unreachable, pressure) are
//!   never tolerated: they are the node's health, not a placement choice;
//! - a request is never lowered below 1, and never to more than the node has free;
//! - a change that stops other pods names each pod it stops, and costs more than any change
//!   to the pod itself.
//!
//! Facts: pods' `nodeSelector`, `affinity` and container resource requests are immutable
//! once created (kubernetes/kubernetes `pkg/apis/core/validation/validation.go`,
//! `ValidatePodUpdate`: only image, activeDeadlineSeconds, added tolerations and, for gated
//! pods, narrowed scheduling directives may change), so those changes say "recreate";
//! `spec.tolerations` may gain entries on a live pod, so that change is a patch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

mod dra;

use crate::analysis::check;
use crate::analysis::diagnosis::CauseCode;
use crate::analysis::explain::{Explanation, Inputs, Shared};
use crate::analysis::fit::{self, Failure, NodeFit, Requested, UNSCHEDULABLE_TAINT};
use crate::analysis::placement;
use crate::model::kubevirt::node_owned_label;
use crate::model::node::{NodeInfo, Taint};
use crate::model::pod::{self, ObjectKind, PodInfo, Toleration, launcher_vmi_name};
use crate::model::resource::Classifier;
use crate::model::workload::{LABEL_KEY, WorkloadConfig};

/// One change to the pod or to one node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Action {
    /// Clear the node's `spec.unschedulable` (undoes a cordon or drain).
    Uncordon {
        /// Node name.
        node: String,
    },
    /// Add a toleration of the taint to the pod (`spec.tolerations`, a live patch).
    Tolerate {
        /// The taint's key.
        key: String,
        /// The taint's value (`None`: tolerate with `Exists`).
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The taint's effect.
        effect: String,
    },
    /// Set (or, with `value: None`, remove) one `spec.nodeSelector` entry; recreate.
    NodeSelector {
        /// Label key.
        key: String,
        /// The pod's value now.
        was: String,
        /// The node's value for it; `None` removes the entry.
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
    },
    /// Remove the pod's required node affinity; recreate.
    DropRequiredAffinity,
    /// Ask for the name the node advertises instead; recreate.
    Rename {
        /// The name asked for now.
        from: String,
        /// The node's name for it (the did-you-mean match).
        to: String,
    },
    /// Ask for fewer units (cpu in millicores, memory and the rest in bytes or units);
    /// recreate.
    Lower {
        /// Resource name.
        resource: String,
        /// The new request (≥ 1, ≤ what the node has free).
        to: i64,
    },
    /// Correct the node's workload label where its value is not a valid workload config
    /// (the GPU Operator applies its default to such a node) and the pod's nodeSelector asks
    /// for a valid one: the typo is the node's, not the pod's.
    FixWorkloadLabel {
        /// Node name.
        node: String,
        /// The valid value the pod's nodeSelector asks for.
        value: String,
    },
    /// Name another DeviceClass in one request of the pod's resource claim (DRA): a
    /// DeviceClass's own selectors are cluster-wide and never changed; the claim is
    /// re-created with the new `deviceClassName` (and the pod with it, for a claim made
    /// from a template: the template changes).
    DeviceClass {
        /// `namespace/name` of the ResourceClaim, or `template NAME` when the claim is
        /// not made yet.
        claim: String,
        /// The request's name in the claim.
        request: String,
        /// The class it names now.
        from: String,
        /// The class whose selectors, with the request's own, match devices the pod can
        /// be given.
        to: String,
    },
    /// Replace one CEL selector of one request of the pod's resource claim (DRA): the
    /// claim's own selectors only, never a DeviceClass's (cluster-wide). The claim is
    /// re-created (a template's: the template changes and the pod is re-created).
    Selector {
        /// `namespace/name` of the ResourceClaim, or `template NAME`.
        claim: String,
        /// The request's name in the claim.
        request: String,
        /// The expression now.
        from: String,
        /// The expression instead.
        to: String,
    },
    /// Ask for fewer devices in one request of the pod's resource claim (DRA,
    /// `allocationMode: ExactCount`); the claim (or template) and pod are re-created.
    Count {
        /// `namespace/name` of the ResourceClaim, or `template NAME`.
        claim: String,
        /// The request's name in the claim.
        request: String,
        /// The count now.
        from: i64,
        /// The count instead (≥ 1).
        to: i64,
    },
    /// End the pods that hold DRA devices on a node (their claims are released: the
    /// resource claim controller deallocates a claim no pod reserves any longer), so that
    /// the pod's claim can be allocated there.
    FreeDevices {
        /// Node name.
        node: String,
        /// `namespace/name` of each claim released.
        claims: Vec<String>,
        /// `namespace/name` of each pod ended (the claims' reservedFor pods).
        pods: Vec<String>,
    },
    /// Stop pods bound to the node so that enough units of the resource are free.
    Free {
        /// Node name.
        node: String,
        /// Resource name.
        resource: String,
        /// Units the pod still lacks there.
        units: i64,
        /// `namespace/name` of each pod stopped, largest holder first.
        pods: Vec<String>,
    },
}

impl Action {
    /// The price of a change, smallest first: a toleration or a rename (the pod's own
    /// manifest, meaning kept), asking for less, aiming the selector elsewhere (other
    /// hardware, another pool: a deliberate choice undone), dropping required affinity or
    /// uncordoning (undoes someone's drain), correcting a node's label, stopping pods
    /// (disrupts others, 1 more per pod).
    pub(crate) fn cost(&self) -> u32 {
        match self {
            Action::Tolerate { .. } | Action::Rename { .. } | Action::DeviceClass { .. } => 1,
            Action::Selector { .. } => 2,
            Action::Lower { .. } | Action::Count { .. } => 3,
            Action::NodeSelector { .. } => 4,
            Action::DropRequiredAffinity | Action::Uncordon { .. } => 5,
            Action::FixWorkloadLabel { .. } => 6,
            Action::Free { pods, .. } => 8 + pods.len() as u32,
            Action::FreeDevices { pods, claims, .. } => 8 + pods.len().max(claims.len()) as u32,
        }
    }

    /// Whether the change is made on the pod's manifest (else on the cluster).
    pub(crate) fn on_pod(&self) -> bool {
        !matches!(
            self,
            Action::Uncordon { .. }
                | Action::Free { .. }
                | Action::FreeDevices { .. }
                | Action::FixWorkloadLabel { .. }
        )
    }

    /// How it is applied: `patch` (a live pod or node accepts it), `recreate` (the pod's
    /// field is immutable: change its manifest or its owner's template, delete, create) or
    /// `delete` (the pods named).
    pub fn apply(&self) -> &'static str {
        match self {
            Action::Uncordon { .. } | Action::Tolerate { .. } => "patch",
            Action::FixWorkloadLabel { .. } => "label",
            Action::Free { .. } | Action::FreeDevices { .. } => "delete",
            _ => "recreate",
        }
    }

    /// The change in words, for the text output (untrusted names escaped by the renderer):
    /// said of the pod, or of the VM / VMI when `pod` is one or is a virt-launcher pod
    /// (KubeVirt renders the launcher from the VMI: the change goes there).
    pub fn describe(&self, pod: &PodInfo) -> String {
        let (who, redo) = subject(pod);
        match self {
            Action::Uncordon { node } => format!("uncordon {node} (it undoes a cordon or drain)"),
            Action::Tolerate { key, value, effect } => format!(
                "add a toleration of the taint {key}{}:{effect} to the {who}",
                value.as_ref().map(|v| format!("={v}")).unwrap_or_default()
            ),
            Action::NodeSelector {
                key,
                was,
                value: Some(v),
            } => format!("change the {who}'s nodeSelector {key}={was} to {key}={v} ({redo})"),
            Action::NodeSelector {
                key,
                was,
                value: None,
            } => format!("remove {key}={was} from the {who}'s nodeSelector ({redo})"),
            Action::DropRequiredAffinity => {
                format!("remove the {who}'s required node affinity ({redo})")
            }
            Action::Rename { from, to } => {
                let field = pod
                    .sources
                    .iter()
                    .find(|s| &s.resource == from)
                    .map(|s| format!(" in {}", s.field))
                    .unwrap_or_default();
                format!("ask for {to} instead of {from}{field} ({redo})")
            }
            Action::FixWorkloadLabel { node, value } => format!(
                "correct {node}'s invalid {LABEL_KEY} to {value} (the GPU Operator then keeps the {value} stack there; check `gpuwl whatif relabel {node}={value}` first when GPU pods run on it)"
            ),
            Action::DeviceClass {
                claim,
                request,
                from,
                to,
            } => format!(
                "set deviceClassName of request {request} in claim {claim} to {to} instead of {from} (re-create the claim and the {who}; DeviceClass {from} itself is left as it is)"
            ),
            Action::Selector {
                claim,
                request,
                from,
                to,
            } => format!(
                "change the selector {from} of request {request} in claim {claim} to: {to} (re-create the claim and the {who})"
            ),
            Action::Count {
                claim,
                request,
                from,
                to,
            } => format!(
                "ask for {to} device(s) instead of {from} in request {request} of claim {claim} (re-create the claim and the {who})"
            ),
            Action::FreeDevices { node, claims, pods } if pods.is_empty() => format!(
                "free the devices of claim(s) {} on {node} by deleting them (no pod uses them)",
                claims.join(", ")
            ),
            Action::FreeDevices { node, claims, pods } => format!(
                "free a device on {node} by ending {} (holding claim(s) {}, whose devices then return to the pool; it disrupts {})",
                pods.join(", "),
                claims.join(", "),
                if pods.len() == 1 { "it" } else { "them" }
            ),
            // A launcher pod's cpu and memory are virt-controller's: the VMI's own plus
            // KubeVirt's overhead (kubevirt/kubevirt `pkg/virt-controller/services/
            // renderresources.go`), so the bound is on what the launcher asks.
            Action::Lower { resource, to } if pod.launcher_vmi().is_some() => format!(
                "lower the {who}'s {resource} so that its virt-launcher pod asks at most {} (KubeVirt adds its overhead to the {who}'s own {resource}; {redo})",
                fit::amount(resource, *to)
            ),
            Action::Lower { resource, to } => format!(
                "lower the {who}'s {resource} request to at most {} ({redo})",
                fit::amount(resource, *to)
            ),
            Action::Free {
                node,
                resource,
                pods,
                ..
            } if resource == "pods" => format!(
                "free a pod slot on {node} (its allocatable pods are all taken) by stopping {} \
                 (it disrupts it)",
                pods.join(", ")
            ),
            Action::Free {
                node,
                resource,
                units,
                pods,
            } => format!(
                "free {} of {resource} on {node} by stopping {} (it disrupts them)",
                fit::amount(resource, *units),
                pods.join(", ")
            ),
        }
    }

    /// The commands that make the change, one per line (`uncordon`, a toleration patch,
    /// the label, stopping the freed pods: a virt-launcher pod's VM is stopped with
    /// `virtctl stop`, or its VMI deleted when no VM owns it — never the launcher pod, which
    /// a VM with `runStrategy: Always` recreates); empty for manifest changes. `pods` tells
    /// which VMIs a VirtualMachine owns.
    pub fn commands(&self, pod: &PodInfo, pods: &[PodInfo]) -> Vec<String> {
        match self {
            Action::Uncordon { node } => vec![format!("kubectl uncordon {node}")],
            Action::Tolerate { .. } if subject(pod).0 == "pod" => self
                .toleration()
                .and_then(|t| serde_json::to_string(&t).ok())
                .map(|value| {
                    format!(
                        "kubectl patch pod {} -n {} --type=json -p '[{{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{value}}}]'",
                        pod.name, pod.namespace
                    )
                })
                .into_iter()
                .collect(),
            Action::FixWorkloadLabel { node, value } => {
                vec![format!("kubectl label node {node} {LABEL_KEY}={value} --overwrite")]
            }
            Action::Free { pods: stopped, .. } => {
                stopped.iter().map(|k| stop_command(k, pods)).collect()
            }
            Action::FreeDevices {
                pods: stopped,
                claims,
                ..
            } if stopped.is_empty() => claims
                .iter()
                .map(|k| {
                    let (ns, name) = k.split_once('/').unwrap_or(("default", k.as_str()));
                    format!("kubectl delete resourceclaim {name} -n {ns}")
                })
                .collect(),
            Action::FreeDevices { pods: stopped, .. } => {
                stopped.iter().map(|k| stop_command(k, pods)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The toleration a [`Action::Tolerate`] adds.
    pub fn toleration(&self) -> Option<Toleration> {
        let Action::Tolerate { key, value, effect } = self else {
            return None;
        };
        Some(Toleration {
            key: Some(key.clone()),
            operator: Some(if value.is_some() { "Equal" } else { "Exists" }.into()),
            value: value.clone(),
            effect: Some(effect.clone()),
        })
    }
}

/// One action as `-o json|yaml` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionView {
    /// The change.
    #[serde(flatten)]
    pub action: Action,
    /// `pod NAMESPACE/NAME` or `node NAME`.
    pub target: String,
    /// `patch`, `recreate` or `delete` ([`Action::apply`]).
    pub apply: String,
    /// The change in words.
    pub description: String,
    /// The commands that make the change, in order; empty for a manifest change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
}

/// The tested fix of one pending pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remedy {
    /// Whether gpuwl's model places the pod after the actions (verified by re-running the
    /// explanation on the changed inputs). `false`: no change within reach serves, see
    /// `reason`.
    pub sufficient: bool,
    /// The node the pod fits on after the actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The changes, in the order to make them (node first, then the pod).
    pub actions: Vec<ActionView>,
    /// The pods the actions stop (`namespace/name`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disrupts: Vec<String>,
    /// Why no change serves (when not sufficient).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The class of [`Remedy::reason`], a stable code (when not sufficient; scripts and the
    /// differential bench count these, not the wording). Device-plugin pods, per node the
    /// failure no change lifts, the pod's code the first of this order found on some node:
    /// `model-rejects-plan` (each node's filters were lifted, the whole re-run still did
    /// not place the pod), `node-condition` (a `node.kubernetes.io/*` taint),
    /// `other-workload-config` (the pod's workload-config selector names another pool),
    /// `too-little-to-free` (the units in use there, all freed, are still too few),
    /// `no-pod-slot` (no running pod to stop for a slot), `node-affinity`, `node-excluded`,
    /// `too-many-changes`, `not-advertised` (no node advertises the name, nor a near miss
    /// of it: only asking for other hardware serves). DRA pods: [`dra`]'s codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<String>,
}

/// The causes a tested fix is searched for: those the modelled filters decide, and
/// `not-permitted` where the name is a near miss of another (a typo KubeVirt refuses: the
/// rename is then tested like any other, [`remedy`]).
pub fn applies(code: CauseCode) -> bool {
    matches!(
        code,
        CauseCode::NotPermitted
            | CauseCode::Excluded
            | CauseCode::NotCoLocated
            | CauseCode::TooLarge
            | CauseCode::InUse
            | CauseCode::Insufficient
            | CauseCode::OtherResource
            | CauseCode::UnadvertisedName
            | CauseCode::StaleOnly
    )
}

/// At most this many plans, cheapest first, are verified by a whole explanation.
const VERIFIED_AT_MOST: usize = 4;
/// At most this many rounds of "change, filter again" per node.
const ROUNDS: usize = 6;

/// The tested fix for `pod` (explained as `e`) against `inputs`, with what each node's pods
/// request ([`fit::requested`] of `inputs.pods`, computed once by the caller's
/// [`Shared`]); `None` when the cause is not one the model's filters decide ([`applies`]),
/// the pod is bound, uses DRA claims, or nodes are unknown.
pub fn remedy(
    pod: &PodInfo,
    inputs: Inputs<'_>,
    e: &Explanation,
    requested: Option<&BTreeMap<String, Requested>>,
) -> Option<Remedy> {
    let nodes = inputs.nodes?;
    if pod.node_name.is_none() && !pod.resource_claims.is_empty() {
        return dra::remedy(pod, inputs, e, requested);
    }
    if pod.node_name.is_some() || !pod.resource_claims.is_empty() || !applies(e.cause_code) {
        return None;
    }
    // A name KubeVirt does not permit is searched only as a rename to a near miss (which
    // must be permitted for the re-run to place the pod); permitting a name is a change to
    // the KubeVirt CR, a cluster-wide object no remedy makes (the rule's fix says it).
    if e.cause_code == CauseCode::NotPermitted
        && !e
            .requests
            .iter()
            .any(|r| r.permitted == Some(false) && !r.did_you_mean.is_empty())
    {
        return None;
    }
    let renames: BTreeMap<&str, Vec<&str>> = e
        .requests
        .iter()
        .map(|r| {
            let names = r.did_you_mean.iter().map(|d| d.name.as_str()).collect();
            (r.resource.as_str(), names)
        })
        .collect();
    let mut plans: Vec<Plan> = Vec::new();
    let mut blocked: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut codes: BTreeSet<&'static str> = BTreeSet::new();
    let by_node = pod::by_node(inputs.pods.unwrap_or(&[]));
    for n in nodes {
        let ctx = NodeCtx {
            on_node: by_node.get(n.name.as_str()).map_or(&[], Vec::as_slice),
            renames: &renames,
            requested: requested
                .and_then(|m| m.get(&n.name))
                .cloned()
                .unwrap_or_default(),
        };
        match plan_for_node(pod, n, &ctx) {
            Ok(p) => plans.push(p),
            Err((why, code)) => {
                codes.insert(code);
                blocked.entry(why).or_default().push(&n.name)
            }
        }
    }
    plans.sort_by(|a, b| (a.cost(), &a.node).cmp(&(b.cost(), &b.node)));
    for plan in plans.iter().take(VERIFIED_AT_MOST) {
        if verify(pod, inputs, plan) {
            return Some(plan.view(pod, inputs.pods.unwrap_or(&[])));
        }
    }
    Some(Remedy {
        sufficient: false,
        node: None,
        actions: Vec::new(),
        disrupts: Vec::new(),
        reason: Some(no_plan_reason(&plans, &blocked)),
        reason_code: Some(no_plan_code(&plans, &codes).to_owned()),
    })
}

/// The order in which a node's out-of-reach code stands for the pod ([`Remedy::reason_code`]):
/// the nodes that advertise what the pod asks tell more than those that do not.
const REASON_ORDER: [&str; 8] = [
    "node-condition",
    "other-workload-config",
    "too-little-to-free",
    "no-pod-slot",
    "node-affinity",
    "node-excluded",
    "too-many-changes",
    "not-advertised",
];

fn no_plan_code(plans: &[Plan], codes: &BTreeSet<&'static str>) -> &'static str {
    if !plans.is_empty() {
        return "model-rejects-plan";
    }
    REASON_ORDER
        .iter()
        .find(|c| codes.contains(**c))
        .copied()
        .unwrap_or("no-node")
}

fn no_plan_reason(plans: &[Plan], blocked: &BTreeMap<String, Vec<&str>>) -> String {
    if !plans.is_empty() {
        return "the changes that lift each node's filters did not make the pod fit when the whole model was re-run".into();
    }
    let per: Vec<String> = blocked
        .iter()
        .map(|(why, nodes)| {
            let shown: Vec<&str> = nodes.iter().take(3).copied().collect();
            let more = if nodes.len() > 3 {
                format!(" and {} more", nodes.len() - 3)
            } else {
                String::new()
            };
            format!("{}{more}: {why}", shown.join(", "))
        })
        .collect();
    format!(
        "no change to the pod, a node's cordon or the pods on a node lifts every filter on any node ({})",
        per.join("; ")
    )
}

/// A candidate: the node and the actions that make the pod pass its filters there.
#[derive(Debug, Clone)]
struct Plan {
    node: String,
    actions: Vec<Action>,
}

impl Plan {
    fn cost(&self) -> u32 {
        self.actions.iter().map(Action::cost).sum()
    }

    fn view(&self, pod: &PodInfo, pods: &[PodInfo]) -> Remedy {
        let mut actions = self.actions.clone();
        // Node changes first (uncordon, free), then the pod's.
        actions.sort_by_key(|a| a.on_pod());
        let disrupts = actions
            .iter()
            .flat_map(|a| match a {
                Action::Free { pods, .. } | Action::FreeDevices { pods, .. } => pods.clone(),
                _ => Vec::new(),
            })
            .collect();
        // When the pod is recreated anyway, its tolerations go into the new manifest too.
        let recreate = actions.iter().any(|a| a.apply() == "recreate");
        Remedy {
            sufficient: true,
            node: Some(self.node.clone()),
            actions: actions
                .into_iter()
                .map(|a| ActionView {
                    target: match &a {
                        Action::Uncordon { node }
                        | Action::Free { node, .. }
                        | Action::FreeDevices { node, .. }
                        | Action::FixWorkloadLabel { node, .. } => format!("node {node}"),
                        _ => format!("pod {}/{}", pod.namespace, pod.name),
                    },
                    apply: if recreate && a.on_pod() {
                        "recreate".into()
                    } else {
                        a.apply().into()
                    },
                    description: a.describe(pod),
                    commands: if recreate && a.on_pod() {
                        Vec::new()
                    } else {
                        a.commands(pod, pods)
                    },
                    action: a,
                })
                .collect(),
            disrupts,
            reason: None,
            reason_code: None,
        }
    }
}

/// Who a pod-side change is made on, and how it takes effect: the pod itself (recreated:
/// the fields are immutable), or the VM / VMI (restarted) for KubeVirt objects and for a
/// virt-launcher pod, which KubeVirt renders from the VMI.
fn subject(pod: &PodInfo) -> (&'static str, &'static str) {
    match pod.kind {
        ObjectKind::VirtualMachine => ("VM", "spec.template; restart the VM"),
        ObjectKind::VirtualMachineInstance => ("VMI", "recreate the VMI"),
        // A launcher of a VMI no VirtualMachine owns: the VMI itself is recreated.
        ObjectKind::Pod if pod.launcher_vmi().is_some() && pod.vmi_owned_by_vm == Some(false) => {
            ("VMI", "its VMI's spec; recreate the VMI")
        }
        ObjectKind::Pod if pod.launcher_vmi().is_some() => {
            ("VM", "its VM's spec.template; restart the VM")
        }
        ObjectKind::Pod => ("pod", "recreate the pod"),
    }
}

/// The command that stops the pod `key` (`namespace/name`) and so frees its units.
fn stop_command(key: &str, pods: &[PodInfo]) -> String {
    let Some((ns, name)) = key.split_once('/') else {
        return format!("kubectl delete pod {key}");
    };
    let owned = pods
        .iter()
        .find(|p| p.key() == key)
        .and_then(|p| p.vmi_owned_by_vm);
    pod::stop_command(ns, name, launcher_vmi_name(name), owned)
}

/// What a node's plan is computed from besides the pod and the node.
struct NodeCtx<'a> {
    /// The pods bound to the node that have not finished, in the order of the pod list.
    on_node: &'a [&'a PodInfo],
    renames: &'a BTreeMap<&'a str, Vec<&'a str>>,
    requested: Requested,
}

/// Changes the pod and `node` until the modelled filters pass there; `None` when a
/// failure has no change within reach.
fn plan_for_node(
    pod: &PodInfo,
    node: &NodeInfo,
    ctx: &NodeCtx<'_>,
) -> Result<Plan, (String, &'static str)> {
    let mut pod = pod.clone();
    let mut node = node.clone();
    let mut requested = ctx.requested.clone();
    let mut actions: Vec<Action> = Vec::new();
    for _ in 0..ROUNDS {
        let fit = filter_one(&pod, &node, &requested);
        if fit.passes() {
            return Ok(Plan {
                node: node.name.clone(),
                actions,
            });
        }
        for failure in &fit.all {
            let action =
                lift(failure, &pod, &node, ctx).ok_or_else(|| out_of_reach(failure, &pod))?;
            apply(&action, &mut pod, &mut node, &mut requested, ctx.on_node);
            if let Action::Lower { resource, .. } = &action {
                // A second lowering of the same request replaces the first.
                actions
                    .retain(|a| !matches!(a, Action::Lower { resource: r, .. } if r == resource));
            }
            if !actions.contains(&action) {
                actions.push(action);
            }
        }
    }
    Err((
        "more changes than a fix should make".into(),
        "too-many-changes",
    ))
}

/// Why a failure has no change within reach, in a few words, and its code
/// ([`Remedy::reason_code`]).
fn out_of_reach(failure: &Failure, pod: &PodInfo) -> (String, &'static str) {
    match failure {
        Failure::Taint { taint } => (
            format!("the node-condition taint {}", placement::taint_str(taint)),
            "node-condition",
        ),
        Failure::TooManyPods { .. } => ("no pod slot left".into(), "no-pod-slot"),
        Failure::NodeAffinity => match pod.node_selector.get(LABEL_KEY) {
            Some(v) => (
                format!("another workload config than the pod's {LABEL_KEY}={v}"),
                "other-workload-config",
            ),
            None => ("the pod's node affinity".into(), "node-affinity"),
        },
        Failure::Insufficient {
            resource,
            allocatable,
            ..
        } if *allocatable <= 0 => (format!("{resource} not advertised"), "not-advertised"),
        Failure::Insufficient { resource, .. } => (
            format!("{resource} held by too little to free"),
            "too-little-to-free",
        ),
        Failure::Unschedulable | Failure::NotNamed => (failure.reason(), "node-excluded"),
    }
}

fn filter_one(pod: &PodInfo, node: &NodeInfo, requested: &Requested) -> NodeFit {
    let map = BTreeMap::from([(node.name.clone(), requested.clone())]);
    fit::filter(pod, std::slice::from_ref(node), Some(&map))
        .pop()
        .unwrap_or(NodeFit {
            node: node.name.clone(),
            reasons: Vec::new(),
            all: Vec::new(),
        })
}

/// The change that lifts one failure on one node, within the harm rules; `None` when none.
fn lift(failure: &Failure, pod: &PodInfo, node: &NodeInfo, ctx: &NodeCtx<'_>) -> Option<Action> {
    match failure {
        Failure::Unschedulable => Some(Action::Uncordon {
            node: node.name.clone(),
        }),
        Failure::Taint { taint } => tolerate(taint, node),
        Failure::NotNamed => Some(Action::DropRequiredAffinity),
        Failure::NodeAffinity => aim_selector(pod, node),
        Failure::TooManyPods { .. } => free_slot(node, ctx),
        Failure::Insufficient {
            resource,
            requested: asked,
            allocatable,
            used,
        } => short(resource, *asked, *allocatable, *used, node, ctx),
    }
}

fn tolerate(taint: &Taint, node: &NodeInfo) -> Option<Action> {
    if taint.key == UNSCHEDULABLE_TAINT {
        return Some(Action::Uncordon {
            node: node.name.clone(),
        });
    }
    if taint.key.starts_with("node.kubernetes.io/")
        || taint.key.starts_with("node.cloudprovider.kubernetes.io/")
    {
        return None;
    }
    Some(Action::Tolerate {
        key: taint.key.clone(),
        value: taint.value.clone(),
        effect: taint.effect.clone(),
    })
}

/// nodeSelector entries the node does not match are aimed at it (or removed where the node
/// lacks the label); otherwise the required affinity is what rejects it. No action when the
/// entry is one virt-controller adds to a virt-launcher pod on its own
/// ([`node_owned_label`]): neither the pod nor its VM can drop it.
fn aim_selector(pod: &PodInfo, node: &NodeInfo) -> Option<Action> {
    if let Some((k, v)) = pod
        .node_selector
        .iter()
        .find(|(k, v)| node.labels.get(*k) != Some(*v))
    {
        if pod.launcher_vmi().is_some() && node_owned_label(k).is_some() {
            return None;
        }
        if k == LABEL_KEY {
            // Never aim a pod at an invalid workload config. A node with an invalid value
            // where the pod asks a valid one has the typo: correct the node. Otherwise the
            // pod is aimed at the node's pool (its name must be advertised there, which the
            // next round's filters check) or, for an unlabelled node, the entry dropped.
            let valid = |s: &str| s.parse::<WorkloadConfig>().is_ok();
            let node_value = node.labels.get(k).map(String::as_str).unwrap_or("");
            if !node_value.is_empty() && !valid(node_value) {
                return corrected_label(node, v).map(|value| Action::FixWorkloadLabel {
                    node: node.name.clone(),
                    value,
                });
            }
        }
        return Some(Action::NodeSelector {
            key: k.clone(),
            was: v.clone(),
            value: node.labels.get(k).cloned(),
        });
    }
    pod.required_affinity
        .is_some()
        .then_some(Action::DropRequiredAffinity)
}

/// The value that corrects a node's invalid workload label, held to gpuwl's own checker
/// ([`check::judge`]): the pod's `asked` value when the node, so labelled, is judged `OK`
/// (what it advertises is of that config's class), else the one valid config it is judged
/// `OK` with (a node advertising a vGPU type is corrected to `vm-vgpu` whatever the pod's
/// selector asks; the selector is aimed at it in the next round); `None` when no value
/// makes the node consistent (nothing advertised): a relabel gpuwl cannot vouch for is not
/// proposed.
fn corrected_label(node: &NodeInfo, asked: &str) -> Option<String> {
    let consistent = |value: &str| {
        let mut n = node.clone();
        n.labels.insert(LABEL_KEY.to_owned(), value.to_owned());
        check::judge(&n, &Classifier::default(), None).verdict == check::Verdict::Ok
    };
    if asked.parse::<WorkloadConfig>().is_ok() && consistent(asked) {
        return Some(asked.to_owned());
    }
    WorkloadConfig::ALL
        .iter()
        .map(|w| w.as_str())
        .find(|v| consistent(v))
        .map(str::to_owned)
}

/// Too few units of `resource`: a name the node does not advertise is renamed to its
/// did-you-mean match there; otherwise ask for what is free (≥ 1), or stop pods on the
/// node when nothing is.
fn short(
    resource: &str,
    asked: i64,
    allocatable: i64,
    used: i64,
    node: &NodeInfo,
    ctx: &NodeCtx<'_>,
) -> Option<Action> {
    if allocatable <= 0 {
        let here = fit::allocatable(node);
        let to = ctx
            .renames
            .get(resource)?
            .iter()
            .find(|n| here.get(**n).is_some_and(|a| *a > 0))?;
        return Some(Action::Rename {
            from: resource.to_owned(),
            to: (*to).to_owned(),
        });
    }
    let free = allocatable.saturating_sub(used);
    if asked > allocatable && free < 1 {
        // More than the node has at all and nothing free: ask for all of it (the next
        // round frees what is in use).
        return Some(Action::Lower {
            resource: resource.to_owned(),
            to: allocatable,
        });
    }
    if free >= 1 {
        return Some(Action::Lower {
            resource: resource.to_owned(),
            to: free,
        });
    }
    free_units(resource, asked.saturating_sub(free), node, ctx)
}

/// The pods on `node` to stop so that `units` more of `resource` are free, largest holder
/// first; `None` when they cannot free that many.
/// A node whose `pods` allocatable is used up: one pod slot freed by stopping one pod
/// there — a slot is within reach like a unit of a resource. The pod that disrupts least
/// is named: one holding no extended resource first (its GPU stays with it), then by
/// name; terminal pods hold no slot. `None` when no pod runs there (the node's `pods` is 0).
fn free_slot(node: &NodeInfo, ctx: &NodeCtx<'_>) -> Option<Action> {
    let held = |p: &PodInfo| {
        p.requests
            .iter()
            .chain(p.other_requests.iter())
            .filter(|(k, v)| k.contains('/') && **v > 0)
            .count()
    };
    let victim = ctx.on_node.iter().copied().min_by(|a, b| {
        held(a)
            .cmp(&held(b))
            .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    })?;
    Some(Action::Free {
        node: node.name.clone(),
        resource: "pods".to_owned(),
        units: 1,
        pods: vec![format!("{}/{}", victim.namespace, victim.name)],
    })
}

fn free_units(resource: &str, units: i64, node: &NodeInfo, ctx: &NodeCtx<'_>) -> Option<Action> {
    let mut holders: Vec<(&PodInfo, i64)> = ctx
        .on_node
        .iter()
        .copied()
        .filter_map(|p| {
            let n = p
                .requests
                .get(resource)
                .or_else(|| p.other_requests.get(resource))
                .copied()?;
            (n > 0).then_some((p, n))
        })
        .collect();
    holders.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.name.cmp(&b.0.name)));
    let mut freed = 0i64;
    let mut pods = Vec::new();
    for (p, n) in holders {
        if freed >= units {
            break;
        }
        freed = freed.saturating_add(n);
        pods.push(format!("{}/{}", p.namespace, p.name));
    }
    (freed >= units).then(|| Action::Free {
        node: node.name.clone(),
        resource: resource.to_owned(),
        units,
        pods,
    })
}

/// Makes `action` on the model: the pod, the node, and what the node's pods request
/// (`on_node`: the node's pods that have not finished, where an `Action::Free` finds the
/// pods it stops).
fn apply(
    action: &Action,
    pod: &mut PodInfo,
    node: &mut NodeInfo,
    requested: &mut Requested,
    on_node: &[&PodInfo],
) {
    match action {
        Action::Uncordon { .. } => {
            node.unschedulable = false;
            node.taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
        }
        Action::Tolerate { .. } => {
            if let Some(t) = action.toleration() {
                let mut all: Vec<Toleration> = pod.tolerations.to_vec();
                all.push(t);
                pod.tolerations = Arc::from(all);
            }
        }
        Action::FixWorkloadLabel { value, .. } => {
            node.labels.insert(LABEL_KEY.to_owned(), value.clone());
        }
        Action::NodeSelector { key, value, .. } => match value {
            Some(v) => {
                pod.node_selector.insert(key.clone(), v.clone());
            }
            None => {
                pod.node_selector.remove(key);
            }
        },
        Action::DropRequiredAffinity => pod.required_affinity = None,
        // Made on the DRA objects ([`dra`]), not on a node's model.
        Action::DeviceClass { .. }
        | Action::Selector { .. }
        | Action::Count { .. }
        | Action::FreeDevices { .. } => {}
        Action::Rename { from, to } => rename(pod, from, to),
        Action::Lower { resource, to } => {
            for map in [&mut pod.requests, &mut pod.other_requests] {
                if map.contains_key(resource) {
                    Arc::make_mut(map).insert(resource.clone(), *to);
                }
            }
        }
        Action::Free { pods: stopped, .. } => {
            for p in on_node
                .iter()
                .filter(|p| stopped.iter().any(|k| is_key(p, k)))
            {
                requested.pods = requested.pods.saturating_sub(1);
                for (k, v) in p.requests.iter().chain(p.other_requests.iter()) {
                    if let Some(e) = requested.resources.get_mut(k) {
                        *e = e.saturating_sub(*v);
                    }
                }
            }
        }
    }
}

/// Whether `key` (`namespace/name`) names `p`, without building `p`'s key.
fn is_key(p: &PodInfo, key: &str) -> bool {
    key.strip_prefix(p.namespace.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|name| name == p.name)
}

fn rename(pod: &mut PodInfo, from: &str, to: &str) {
    let requests = Arc::make_mut(&mut pod.requests);
    if let Some(n) = requests.remove(from) {
        let e = requests.entry(to.to_owned()).or_default();
        *e = e.saturating_add(n);
    }
    for s in &mut pod.sources {
        if s.resource == from {
            s.resource = to.to_owned();
        }
    }
}

/// Re-runs the whole explanation with the plan made on the pod, the node and the pods it
/// stops: the plan holds when the pod is `fits-now` and the node is one it can go to.
fn verify(pod: &PodInfo, inputs: Inputs<'_>, plan: &Plan) -> bool {
    let Some(nodes) = inputs.nodes else {
        return false;
    };
    let mut pod2 = pod.clone();
    let mut nodes2: Vec<NodeInfo> = nodes.to_vec();
    let Some(node) = nodes2.iter_mut().find(|n| n.name == plan.node) else {
        return false;
    };
    let mut scratch = Requested::default();
    for a in &plan.actions {
        apply(a, &mut pod2, node, &mut scratch, &[]);
    }
    let stopped: Vec<String> = plan
        .actions
        .iter()
        .flat_map(|a| match a {
            Action::Free { pods, .. } => pods.clone(),
            _ => Vec::new(),
        })
        .collect();
    let pods2: Option<Vec<PodInfo>> = inputs.pods.map(|ps| {
        ps.iter()
            .filter(|p| !stopped.iter().any(|k| is_key(p, k)))
            .cloned()
            .collect()
    });
    let changed = Inputs {
        nodes: Some(&nodes2),
        pods: pods2.as_deref(),
        ..inputs
    };
    Shared::new(changed)
        .explain(&pod2)
        .is_ok_and(|e| e.cause_code == CauseCode::FitsNow && e.schedulable.contains(&plan.node))
}

/// Puts the tested fix into `e`. When the rule's own fix says the one change the plan
/// makes, the rule's (richer) text stays; when the plan differs (another change, or several
/// together), `fix` becomes the plan — one command per line where one exists — and the
/// rule's text moves to `notes`. Either way `remedy` says whether and where it was tested;
/// the text output prints that on a line of its own.
pub(crate) fn rewrite_fix(e: &mut Explanation, r: Remedy) {
    if r.sufficient {
        let keep = matches!(r.actions.as_slice(), [one] if rule_says(&one.action, &e.fix));
        if !keep {
            // Commands on lines of their own, under their step when there are several.
            let pad = if r.actions.len() > 1 { "   " } else { "" };
            let steps: Vec<String> = r
                .actions
                .iter()
                .map(|a| match a.commands.as_slice() {
                    [] => a.description.clone(),
                    cmds => format!(
                        "{}:\n{pad}{}",
                        a.description,
                        cmds.join(&format!("\n{pad}"))
                    ),
                })
                .collect();
            let fix = match steps.as_slice() {
                [one] => one.clone(),
                many => format!(
                    "{} changes together, one alone is not enough:\n{}",
                    many.len(),
                    many.iter()
                        .enumerate()
                        .map(|(i, s)| format!("{}. {s}", i + 1))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            };
            // The rule's text stays as a note only when it proposed something else (a part
            // of the plan said alone is superseded by the plan).
            let part = r
                .actions
                .iter()
                .flat_map(|a| &a.commands)
                .any(|c| e.fix.contains(c.as_str()));
            // A DRA pod's rule text beside a tested change is not kept: untested advice
            // ("relax the node constraints") is what the tested change replaces.
            if !e.fix.is_empty() && !part && e.claims.is_empty() {
                e.notes.push(format!(
                    "also possible (not tested on the model): {}",
                    e.fix
                ));
            }
            e.fix = fix;
        }
    } else if !e.claims.is_empty() && !e.fix.is_empty() && !e.fix.starts_with(DRA_HINT) {
        // A DRA pod's rule text that no tested change backs is a hint, not a fix.
        e.fix = format!("{DRA_HINT}{}", e.fix);
    }
    e.remedy = Some(r);
}

/// How a DRA pod's untested advice starts: no change gpuwl could make on its model (a
/// claim's class, selector or count, the pods holding devices, the pod's node
/// constraints) placed the pod, so the rule's text is a hint for a person, not a fix.
pub const DRA_HINT: &str =
    "hint, not a tested fix (no change gpuwl can apply and re-run on its model places the pod): ";

/// Whether the rule's fix text already says the change `a` makes (the names it changes).
fn rule_says(a: &Action, fix: &str) -> bool {
    let has = |s: &str| fix.contains(s);
    match a {
        Action::Uncordon { node } => has("uncordon") && has(node),
        Action::Tolerate { key, .. } => has("tolerat") && has(key),
        Action::NodeSelector { key, value, .. } => has(key) && value.as_deref().is_none_or(has),
        Action::DropRequiredAffinity => has("affinity"),
        Action::Rename { to, .. } => has(to),
        Action::Lower { resource, to } => {
            has(&fit::amount(resource, *to))
                && (has(resource) || has(&format!("{resource} request")))
        }
        Action::FixWorkloadLabel { node, value } => has(node) && has(&format!("={value}")),
        Action::DeviceClass { to, .. } => has("deviceClassName") && has(to),
        Action::Selector { to, .. } => has(to),
        Action::Count { to, .. } => has(&format!("at most {to} device(s)")),
        Action::FreeDevices { node, claims, pods } => {
            has(node) && claims.iter().chain(pods).all(|k| has(k))
        }
        Action::Free { pods, .. } => pods.iter().all(|k| {
            let name = k.split_once('/').map_or(k.as_str(), |(_, n)| n);
            has(k) || launcher_vmi_name(name).is_some_and(has)
        }),
    }
}

/// One line for the text output: where the tested fix puts the pod, or why none serves.
pub(crate) fn tested_line(r: &Remedy) -> String {
    match (&r.node, &r.reason) {
        (Some(node), _) if r.sufficient => format!(
            "gpuwl's model, re-run with {}, places the pod on {node}",
            if r.actions.len() == 1 {
                "this change"
            } else {
                "these changes"
            }
        ),
        (_, Some(reason)) => format!("no change within reach serves now: {reason}"),
        _ => "no change within reach serves now".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::explain::explain;

    #[test]
    fn a_key_names_a_pod_by_namespace_and_name_only() {
        let p = PodInfo {
            namespace: "gpu-vm".into(),
            name: "vm-a".into(),
            ..Default::default()
        };
        assert!(is_key(&p, "gpu-vm/vm-a"));
        for other in [
            "gpu-vm/vm-ab",
            "gpu-vm/vm-",
            "gpu-vmx/vm-a",
            "gpu-vm-vm-a",
            "gpu/vm/vm-a",
            "vm-a",
        ] {
            assert!(!is_key(&p, other), "{other}");
        }
    }

    /// Two GPU nodes: g-0 cordoned with 2 GPUs (1 held by ml/a), g-1 tainted twice
    /// (dedicated=gpu and team=x) with 1 GPU free; pods as given.
    fn situation(pod: &str, extra_pods: &str) -> Explanation {
        situation_with(
            r#"[{"key":"dedicated","value":"gpu","effect":"NoSchedule"},{"key":"team","value":"x","effect":"NoExecute"}]"#,
            pod,
            extra_pods,
        )
    }

    /// [`situation`] with g-1's taints given.
    fn situation_with(g1_taints: &str, pod: &str, extra_pods: &str) -> Explanation {
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            r#"{"kind":"List","items":[
              {"kind":"Node","metadata":{"name":"g-0","labels":{"nvidia.com/gpu.workload.config":"container"}},
               "spec":{"unschedulable":true,"taints":[{"key":"node.kubernetes.io/unschedulable","effect":"NoSchedule"}]},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110","nvidia.com/gpu":"2"}}},
              {"kind":"Node","metadata":{"name":"g-1","labels":{"nvidia.com/gpu.workload.config":"container"}},
               "spec":{"taints":G1_TAINTS},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110","nvidia.com/gpu":"1"}}}]}"#
                .replace("G1_TAINTS", g1_taints)
                .as_bytes(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let pods = crate::decode::pods::read_pods_str(
            &format!(
                r#"{{"kind":"List","items":[{{"kind":"Pod","metadata":{{"name":"a","namespace":"ml"}},
                  "spec":{{"nodeName":"g-0","containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"1"}}}}}}]}},
                  "status":{{"phase":"Running"}}}}{extra_pods}]}}"#
            ),
            "pods.json",
        )
        .unwrap();
        let pod = crate::decode::pods::read_pods_str(pod, "pod.json")
            .unwrap()
            .remove(0);
        explain(
            &pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&pods),
                ..Default::default()
            },
        )
        .unwrap()
    }

    fn kinds(r: &Remedy) -> Vec<String> {
        r.actions
            .iter()
            .map(|a| {
                serde_json::to_value(&a.action).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn a_second_taint_is_tolerated_too_and_the_cordon_never_is() {
        let e = situation(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
            "",
        );
        let r = e.remedy.clone().unwrap();
        assert!(r.sufficient, "{r:?}");
        // g-1: two tolerations (cost 2) beat uncordoning g-0 (cost 5).
        assert_eq!(r.node.as_deref(), Some("g-1"));
        assert_eq!(kinds(&r), ["tolerate", "tolerate"]);
        assert!(e.fix.starts_with("2 changes together"), "{}", e.fix);
        assert!(e.fix.contains("dedicated=gpu:NoSchedule") && e.fix.contains("team=x:NoExecute"));
        assert!(
            !e.fix.contains("node.kubernetes.io/unschedulable"),
            "{}",
            e.fix
        );
    }

    #[test]
    fn a_cordoned_full_node_needs_uncordon_and_units_freed() {
        // 2 GPUs: g-1 has 1 at all (lowering to 1 is a plan there); g-0 has 2 with 1 held.
        let e = situation(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":{"tolerations":[{"key":"dedicated","operator":"Exists"},{"key":"team","operator":"Exists"}],
               "containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}}"#,
            "",
        );
        let r = e.remedy.clone().unwrap();
        assert!(r.sufficient, "{r:?}");
        // Lowering to 1 on g-1 (cost 3) or to 1 on g-0 plus uncordon (8): g-1 wins.
        assert_eq!(r.node.as_deref(), Some("g-1"));
        assert_eq!(kinds(&r), ["lower"]);
        assert_eq!(serde_json::to_value(&r.actions[0].action).unwrap()["to"], 1);
    }

    #[test]
    fn a_full_pod_slot_count_is_within_reach_too() {
        // g-0 has a GPU free but its only pod slot (pods: 1) is taken by ml/a: stopping
        // the one pod there frees the slot.
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            br#"{"kind":"List","items":[
              {"kind":"Node","metadata":{"name":"g-0"},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"1","nvidia.com/gpu":"2"}}}]}"#
                .as_slice(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let pods = crate::decode::pods::read_pods_str(
            r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"a","namespace":"ml"},
                "spec":{"nodeName":"g-0","containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]},
                "status":{"phase":"Running"}}]}"#,
            "pods.json",
        )
        .unwrap();
        let pod = crate::decode::pods::read_pods_str(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
            "pod.json",
        )
        .unwrap()
        .remove(0);
        let e = explain(
            &pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&pods),
                ..Default::default()
            },
        )
        .unwrap();
        let r = e.remedy.clone().unwrap();
        assert!(r.sufficient, "{r:?}");
        assert_eq!(kinds(&r), ["free"]);
        let a = serde_json::to_value(&r.actions[0].action).unwrap();
        assert_eq!(a["resource"], "pods");
        assert_eq!(a["pods"], serde_json::json!(["ml/a"]));
        assert_eq!(r.actions[0].commands, ["kubectl delete pod a -n ml"]);
        assert!(e.fix.contains("free a pod slot on g-0"), "{}", e.fix);
    }

    #[test]
    fn units_in_use_are_freed_by_naming_who_loses_them() {
        // g-1 is not ready (no fix there); g-0 is cordoned and both its GPUs are held
        // (ml/a, ml/b): uncordon it AND stop one holder — one change alone is not enough.
        let e = situation_with(
            r#"[{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"}]"#,
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
            r#",{"kind":"Pod","metadata":{"name":"b","namespace":"ml"},
                  "spec":{"nodeName":"g-0","containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]},
                  "status":{"phase":"Running"}}"#,
        );
        let r = e.remedy.clone().unwrap();
        assert!(r.sufficient, "{r:?}");
        assert_eq!(r.node.as_deref(), Some("g-0"), "{r:?}");
        assert_eq!(kinds(&r), ["uncordon", "free"]);
        assert_eq!(r.disrupts, ["ml/a"]);
        assert_eq!(r.actions[0].commands, ["kubectl uncordon g-0"]);
        assert_eq!(r.actions[1].commands, ["kubectl delete pod a -n ml"]);
        assert!(e.fix.contains("one alone is not enough"), "{}", e.fix);
    }

    #[test]
    fn no_fix_where_every_node_is_out_of_reach() {
        // g-1 not ready, g-0 out of pod slots is not modelled here: ask more than exists.
        let e = situation_with(
            r#"[{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"}]"#,
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"c","resources":{"limits":{"example.com/fpga":"1"}}}]}}"#,
            "",
        );
        let r = e.remedy.clone().unwrap();
        assert!(!r.sufficient, "{r:?}");
        assert!(r.actions.is_empty());
        assert!(r.reason.is_some());
    }

    #[test]
    fn a_launchers_change_is_said_of_its_vm_or_its_bare_vmi_and_its_overhead() {
        let mut pods = crate::decode::pods::read_pods_str(
            r#"{"kind":"Pod","metadata":{"name":"virt-launcher-vm-1-abcde","namespace":"vms"},"spec":{}}"#,
            "pods.json",
        )
        .unwrap();
        let lower = Action::Lower {
            resource: "memory".into(),
            to: 8 * 1024 * 1024 * 1024,
        };
        assert_eq!(
            lower.describe(&pods[0]),
            "lower the VM's memory so that its virt-launcher pod asks at most 8Gi (KubeVirt adds its overhead to the VM's own memory; its VM's spec.template; restart the VM)"
        );
        pods[0].vmi_owned_by_vm = Some(false);
        assert_eq!(
            lower.describe(&pods[0]),
            "lower the VMI's memory so that its virt-launcher pod asks at most 8Gi (KubeVirt adds its overhead to the VMI's own memory; its VMI's spec; recreate the VMI)"
        );
        let plain = crate::decode::pods::read_pods_str(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":{}}"#,
            "pods.json",
        )
        .unwrap();
        assert_eq!(
            lower.describe(&plain[0]),
            "lower the pod's memory request to at most 8Gi (recreate the pod)"
        );
    }

    #[test]
    fn a_launcher_pod_is_stopped_through_its_vm() {
        let pods = crate::decode::pods::read_pods_str(
            r#"{"kind":"Pod","metadata":{"name":"virt-launcher-vm-1-abcde","namespace":"vms"},"spec":{"nodeName":"n"}}"#,
            "pods.json",
        )
        .unwrap();
        assert_eq!(
            stop_command("vms/virt-launcher-vm-1-abcde", &pods),
            "virtctl stop vm-1 -n vms"
        );
        let mut bare = pods.clone();
        bare[0].vmi_owned_by_vm = Some(false);
        assert_eq!(
            stop_command("vms/virt-launcher-vm-1-abcde", &bare),
            "kubectl delete vmi vm-1 -n vms"
        );
        assert_eq!(stop_command("ml/a", &pods), "kubectl delete pod a -n ml");
    }

    #[test]
    fn node_condition_taints_are_no_fix() {
        let node = NodeInfo {
            taints: vec![Taint {
                key: "node.kubernetes.io/not-ready".into(),
                value: None,
                effect: "NoExecute".into(),
            }],
            ..NodeInfo::named("n")
        };
        assert_eq!(tolerate(&node.taints[0], &node), None);
        let cordon = Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            value: None,
            effect: "NoSchedule".into(),
        };
        assert_eq!(
            tolerate(&cordon, &node),
            Some(Action::Uncordon { node: "n".into() })
        );
    }

    #[test]
    fn rule_text_is_kept_only_when_it_says_the_tested_change() {
        let lower = Action::Lower {
            resource: "nvidia.com/gpu".into(),
            to: 3,
        };
        assert!(rule_says(
            &lower,
            "ask for at most 3 × nvidia.com/gpu per pod"
        ));
        assert!(!rule_says(
            &lower,
            "ask for at most 4 × nvidia.com/gpu per pod"
        ));
        let up = Action::Uncordon { node: "g-0".into() };
        assert!(rule_says(
            &up,
            "finish the maintenance and kubectl uncordon g-0"
        ));
        assert!(!rule_says(&up, "kubectl uncordon g-1"));
    }
}
