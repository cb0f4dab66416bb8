//! The slim pod record every reader produces (a Pod, or a KubeVirt VMI/VM read as the
//! virt-launcher pod it would become): identity, binding, placement constraints, the
//! PodScheduled condition, and the effective extended-resource requests.
//!
//! Effective requests follow kubernetes/kubernetes
//! `staging/src/k8s.io/component-helpers/resource/helpers.go` (`PodRequests`); the readers
//! in [`crate::decode::pods`] compute them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::dra::PodClaim;
use serde::Serialize;

/// Serializes shared requests as a map.
fn map<S: serde::Serializer>(v: &Arc<BTreeMap<String, i64>>, s: S) -> Result<S::Ok, S::Error> {
    v.as_ref().serialize(s)
}

fn is_empty(v: &Arc<BTreeMap<String, i64>>) -> bool {
    v.is_empty()
}

/// Serializes shared tolerations as a list.
fn slice<S: serde::Serializer>(v: &Arc<[Toleration]>, s: S) -> Result<S::Ok, S::Error> {
    v.as_ref().serialize(s)
}

/// What kind of object a [`PodInfo`] was read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum ObjectKind {
    /// A core `Pod`.
    #[default]
    Pod,
    /// A KubeVirt `VirtualMachineInstance`: its requests are those its virt-launcher pod
    /// would make.
    VirtualMachineInstance,
    /// A KubeVirt `VirtualMachine` (its `spec.template` is read as a VMI).
    VirtualMachine,
}

impl ObjectKind {
    /// The Kubernetes kind, e.g. `Pod`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Pod => "Pod",
            ObjectKind::VirtualMachineInstance => "VirtualMachineInstance",
            ObjectKind::VirtualMachine => "VirtualMachine",
        }
    }

    /// Whether it is a plain `Pod` (for `skip_serializing_if`).
    pub fn is_pod(&self) -> bool {
        *self == ObjectKind::Pod
    }

    /// `key` (`namespace/name`) as shown: a pod's as it is, a VMI's or VM's after `VMI ` /
    /// `VM ` (kubectl's short names), so a line never mistakes one for a pod.
    pub fn show(self, key: &str) -> String {
        match self {
            ObjectKind::Pod => key.to_owned(),
            ObjectKind::VirtualMachineInstance => format!("VMI {key}"),
            ObjectKind::VirtualMachine => format!("VM {key}"),
        }
    }
}

/// One requirement of a node selector term (`matchExpressions[]` or `matchFields[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectorRequirement {
    /// Label key (or field name, `metadata.name`, for `matchFields`).
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt` (verbatim).
    pub operator: String,
    /// Values (empty for `Exists` / `DoesNotExist`).
    pub values: Vec<String>,
}

/// One term of `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]`:
/// requirements are ANDed; terms are ORed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorTerm {
    /// `matchExpressions` over node labels.
    pub match_expressions: Vec<SelectorRequirement>,
    /// `matchFields` over node fields (only `metadata.name` exists).
    pub match_fields: Vec<SelectorRequirement>,
}

/// A pod toleration (`spec.tolerations[]`); absent fields are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Toleration {
    /// Taint key; `None` (with operator `Exists`) tolerates every key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (default) or `Exists`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// Value compared with `Equal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Effect; `None` tolerates every effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

/// A status condition (`status.conditions[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// `type`, e.g. `PodScheduled`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine reason, e.g. `Unschedulable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human message, verbatim (the scheduler's own text for PodScheduled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where a requested extended resource comes from in the object, for explanations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestSource {
    /// The full resource name, e.g. `nvidia.com/gpu`.
    pub resource: String,
    /// The field that asks for it, e.g. `spec.containers[0].resources.limits` or
    /// `spec.domain.devices.gpus[0].deviceName`: the container whose number decides the
    /// effective request (an init container when the init phase needs more than the
    /// regular containers together).
    pub field: String,
    /// That container's `name`, with `init container ` before it for an init container
    /// (e.g. `init container fetch-weights`); `None` for VMI devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// What gpuwl keeps of a Pod (or VMI): identity, binding, placement constraints, the
/// PodScheduled condition and the effective extended-resource requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodInfo {
    /// The kind read.
    pub kind: ObjectKind,
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeName`; `None` when unbound (for VMIs: `status.nodeName`).
    pub node_name: Option<String>,
    /// `status.phase` verbatim (`Pending`, `Running`, `Succeeded`, `Failed`, ...).
    pub phase: Option<String>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    /// .nodeSelectorTerms`; `None` when the pod has no required node affinity.
    pub required_affinity: Option<Vec<SelectorTerm>>,
    /// `spec.tolerations`. Shared: most pods carry the same few (the API server adds
    /// the same `not-ready`/`unreachable` pair to every pod), so a reader hands one copy
    /// to all pods with equal tolerations instead of ~700 bytes each.
    #[serde(serialize_with = "slice")]
    pub tolerations: Arc<[Toleration]>,
    /// `spec.schedulingGates[].name`, in order. While any is present the scheduler does
    /// not consider the pod (the API server sets `PodScheduled=False, SchedulingGated`);
    /// the controller that added a gate (Kueue, a quota manager) removes it
    /// (kubernetes/kubernetes `pkg/scheduler/framework/plugins/schedulinggates`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
    /// `status.conditions` of type `PodScheduled` (the only one gpuwl reads; readers
    /// leave the others out).
    pub conditions: Vec<Condition>,
    /// Effective requests of extended resources, in whole units (see module docs).
    /// Shared like [`PodInfo::tolerations`]: most pods of a list ask for the same few
    /// (`nvidia.com/gpu: 1`); `Arc::make_mut` gives a pod its own copy to change.
    #[serde(serialize_with = "map")]
    pub requests: Arc<BTreeMap<String, i64>>,
    /// Effective requests of the other resources the scheduler's NodeResourcesFit filter
    /// compares — `cpu` in millicores, `memory`, `ephemeral-storage` and `hugepages-*` in
    /// whole units (bytes), rounded up as the scheduler rounds (`MilliValue()`/`Value()`),
    /// computed like [`PodInfo::requests`] (and pod-level `spec.resources.requests` for
    /// cpu, memory and hugepages when set). Zero entries are left out. Shared like
    /// [`PodInfo::requests`].
    #[serde(serialize_with = "map", skip_serializing_if = "is_empty")]
    pub other_requests: Arc<BTreeMap<String, i64>>,
    /// `status.reason` (e.g. `UnexpectedAdmissionError` when the kubelet refused the pod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// `status.message`, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Where each requested extended resource's number comes from (the `requests` field
    /// when given, else `limits`), in document order.
    pub sources: Vec<RequestSource>,
    /// What the API server would reject in this object ([`SpecProblem`]), in document
    /// order. Matched by explain (the `invalid-spec` rule, the notes of a request) and the
    /// admission guard; each one's sentence is its [`std::fmt::Display`]. Not serialized.
    #[serde(skip)]
    pub spec_problems: Vec<SpecProblem>,
    /// `spec.resourceClaims[]` (DRA), each with the claim it resolves to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<PodClaim>,
    /// For a virt-launcher pod: whether a VirtualMachine owns the VMI it runs (the VMI's
    /// `ownerReferences`), which decides how to stop it (`virtctl stop` needs a VM; a bare
    /// VMI is deleted); `None` when not known (the VMIs were not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmi_owned_by_vm: Option<bool>,
    /// A VMI's (or a VM template's) memory as written ([`VmMemory`]), from which
    /// virt-controller computes its launcher pod's memory request (adding its overhead).
    /// The fit analyses leave it out (the overhead is KubeVirt's to compute); the twin
    /// gives it to the VMI it creates, so that virt-controller computes the request for
    /// real. `None` for a pod, or a VMI that states neither field. Boxed: one pointer per
    /// pod of a large list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_memory: Option<Box<VmMemory>>,
    /// For a VMI or VM: what of its spec decides the virt-launcher pod virt-controller
    /// renders ([`VmiShape`]); explain judges that pod
    /// ([`crate::model::launcher::render`]) while no launcher exists. `None` for a pod.
    /// Not serialized.
    #[serde(skip)]
    pub vmi_shape: Option<Box<VmiShape>>,
}

/// The memory fields of a VMI's `spec.domain` (a VM's `spec.template.spec.domain`), as
/// written (each a valid quantity): kubevirt/api `core/v1/schema.go` (`Memory.Guest`,
/// `ResourceRequirements.Requests`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmMemory {
    /// `domain.memory.guest`: the memory the guest sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest: Option<String>,
    /// `domain.resources.requests.memory`: the request virt-controller starts from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// What the API server would reject in a pod's resources, as the pod reader
/// ([`crate::decode::pods`]) finds it (kubernetes/kubernetes
/// `pkg/apis/core/validation/validation.go`, `ValidateResourceRequirements`). `path` is the
/// container's field path (e.g. `spec.containers[0]`, `spec.initContainers[1]`, or a
/// VMI's `spec.domain`); `requested` and `limit` are the quantities as written.
///
/// Explain (`invalid-spec`) and the admission guard match on it; the one sentence for
/// each is its [`std::fmt::Display`] (quantities cut with [`crate::text::cut`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecProblem {
    /// An extended resource in `requests` without a limit: the API server refuses the pod
    /// (`Limit must be set for non overcommitable resources`).
    RequestWithoutLimit {
        /// The container's field path.
        path: String,
        /// The extended resource.
        resource: String,
        /// The requests quantity as written.
        requested: String,
    },
    /// An extended resource in both `requests` and `limits` with different numbers: the
    /// API server requires them equal. `counted` is the requests number (whole units),
    /// the one gpuwl counts.
    RequestDiffersFromLimit {
        /// The container's field path.
        path: String,
        /// The extended resource.
        resource: String,
        /// The requests quantity as written.
        requested: String,
        /// The limits quantity as written.
        limit: String,
        /// The requests number counted, in whole units.
        counted: i64,
    },
    /// A resource that is not extended (cpu, memory, …) requested above its limit: the API
    /// server refuses the pod (`must be less than or equal to … limit`).
    RequestAboveLimit {
        /// The container's field path.
        path: String,
        /// The resource.
        resource: String,
        /// The requests quantity as written.
        requested: String,
        /// The limits quantity as written.
        limit: String,
    },
}

impl SpecProblem {
    /// The container's field path.
    pub fn path(&self) -> &str {
        match self {
            SpecProblem::RequestWithoutLimit { path, .. }
            | SpecProblem::RequestDiffersFromLimit { path, .. }
            | SpecProblem::RequestAboveLimit { path, .. } => path,
        }
    }

    /// The resource it is about.
    pub fn resource(&self) -> &str {
        match self {
            SpecProblem::RequestWithoutLimit { resource, .. }
            | SpecProblem::RequestDiffersFromLimit { resource, .. }
            | SpecProblem::RequestAboveLimit { resource, .. } => resource,
        }
    }
}

impl std::fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::text::cut;
        match self {
            SpecProblem::RequestWithoutLimit {
                path,
                resource: k,
                requested,
            } => write!(
                f,
                "{path}: {k} requests {} without a limit: the API server refuses the pod ({path}.resources.limits: Required value: Limit must be set for non overcommitable resources); an extended resource is set in limits, requests left out or equal",
                cut(requested),
            ),
            SpecProblem::RequestDiffersFromLimit {
                path,
                resource: k,
                requested,
                limit,
                counted,
            } => write!(
                f,
                "{path}: {k} requests {} ≠ limits {}: the API server would reject this pod (Kubernetes requires requests = limits for an extended resource when both are set); the {counted} counted here is from {path}.resources.requests",
                cut(requested),
                cut(limit),
            ),
            SpecProblem::RequestAboveLimit {
                path,
                resource: k,
                requested,
                limit,
            } => write!(
                f,
                "{path}: {k} requests {} > limits {}: the API server refuses the pod ({path}.resources.requests[{k}]: must be less than or equal to {k} limit)",
                cut(requested),
                cut(limit),
            ),
        }
    }
}

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod no longer holds resources: phase `Succeeded` or `Failed`.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Whether the pod is waiting to be scheduled: not bound and not terminal.
    pub fn is_unbound(&self) -> bool {
        self.node_name.is_none() && !self.is_terminal()
    }

    /// Whether the object is a KubeVirt VMI or VM (not a pod).
    pub fn is_vm(&self) -> bool {
        matches!(
            self.kind,
            ObjectKind::VirtualMachineInstance | ObjectKind::VirtualMachine
        )
    }

    /// The VMI a virt-launcher pod runs, from the name KubeVirt gives it:
    /// `virt-launcher-<vmi>-<5 random characters>` (kubevirt/kubevirt
    /// `pkg/virt-controller/services/template.go`). `None` for other pods.
    pub fn launcher_vmi(&self) -> Option<&str> {
        (self.kind == ObjectKind::Pod)
            .then(|| launcher_vmi_name(&self.name))
            .flatten()
    }

    /// The `PodScheduled` condition, if present.
    pub fn pod_scheduled(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == "PodScheduled")
    }
}

/// The pods that have not finished, grouped by the node they are bound to (unbound pods
/// left out), each node's in the order of `pods`: owned records (`check`'s orphaned-holder
/// rule, while nodes stream) or references (explain's tested fix, per node).
pub fn by_node<P: std::borrow::Borrow<PodInfo>>(
    pods: impl IntoIterator<Item = P>,
) -> std::collections::HashMap<String, Vec<P>> {
    let mut m: std::collections::HashMap<String, Vec<P>> = Default::default();
    for p in pods {
        let node = {
            let info = p.borrow();
            (!info.is_terminal())
                .then(|| info.node_name.clone())
                .flatten()
        };
        if let Some(n) = node {
            m.entry(n).or_default().push(p);
        }
    }
    m
}

/// Whether `name` is an extended resource: it has a `/`, its domain is not
/// `kubernetes.io` (nor a subdomain of it), and it does not start with `requests.`.
///
/// Source: kubernetes/kubernetes `pkg/apis/core/v1/helper/helpers.go`
/// (`IsExtendedResourceName`, `IsNativeResource`).
pub(crate) fn is_extended_resource(name: &str) -> bool {
    let Some((domain, _)) = name.split_once('/') else {
        return false;
    };
    !(domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || name.starts_with("requests."))
}

/// The command that stops a GPU holder and so frees its units: a plain pod is deleted; a
/// virt-launcher pod never is (that kills the running VM, and `runStrategy: Always` starts it
/// again): its VM is stopped with `virtctl stop` (kubevirt/kubevirt `pkg/virtctl/vm/`), or,
/// when no VirtualMachine owns the VMI (`owned_by_vm == Some(false)`), the VMI is deleted.
/// `vmi` is the launcher's VMI ([`launcher_vmi_name`]), `None` for a plain pod.
pub fn stop_command(ns: &str, pod: &str, vmi: Option<&str>, owned_by_vm: Option<bool>) -> String {
    match (vmi, owned_by_vm) {
        (Some(vmi), Some(false)) => format!("kubectl delete vmi {vmi} -n {ns}"),
        (Some(vmi), _) => format!("virtctl stop {vmi} -n {ns}"),
        (None, _) => format!("kubectl delete pod {pod} -n {ns}"),
    }
}

/// The VMI name in a virt-launcher pod name `virt-launcher-<vmi>-<5 characters>`
/// (kubevirt/kubevirt `pkg/virt-controller/services/template.go`); `None` for other names.
pub(crate) fn launcher_vmi_name(pod_name: &str) -> Option<&str> {
    let rest = pod_name.strip_prefix("virt-launcher-")?;
    let (vmi, suffix) = rest.rsplit_once('-')?;
    (!vmi.is_empty() && suffix.len() == 5).then_some(vmi)
}

/// What of a VMI spec (a VM's `spec.template.spec`) decides its launcher pod beyond what
/// [`PodInfo`] keeps; read by `crate::decode::pods`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmiShape {
    /// `spec.architecture`, when set.
    pub architecture: Option<String>,
    /// `spec.domain.machine.type` (or `status.machine.type`), when set.
    pub machine_type: Option<String>,
    /// vCPUs: the product of `domain.cpu` sockets, cores and threads that are set (not 0);
    /// `None` when none is (virt-api then derives the topology from the cpu limit or
    /// request: [`VmiShape::vcpus`](crate::model::launcher)).
    pub vcpus: Option<i64>,
    /// `domain.cpu.dedicatedCpuPlacement`.
    pub dedicated_cpu: bool,
    /// `domain.resources.requests.memory` in bytes, when set.
    pub memory_request: Option<i64>,
    /// `domain.memory.guest` in bytes, when set.
    pub memory_guest: Option<i64>,
    /// `domain.resources.overcommitGuestOverhead`.
    pub overcommit_guest_overhead: bool,
    /// `domain.resources.requests.cpu` in millicores, when set.
    pub cpu_request: Option<i64>,
    /// `domain.resources.limits.cpu` in millicores, when set.
    pub cpu_limit: Option<i64>,
    /// `domain.resources.limits.memory` in bytes, when set.
    pub memory_limit: Option<i64>,
    /// `domain.resources.requests.ephemeral-storage` in bytes, when set.
    pub ephemeral_request: Option<i64>,
    /// `domain.devices.autoattachGraphicsDevice` is not `false`.
    pub graphics: bool,
    /// `domain.devices.autoattachPodInterface` is not `false`.
    pub pod_interface: bool,
    /// `domain.devices.interfaces[]`: how many, and whether any is virtio (the default
    /// model).
    pub interfaces: usize,
    /// Whether any interface is virtio (an unset model is virtio).
    pub virtio_interface: bool,
    /// Whether the VMI has GPUs or host devices (VFIO).
    pub vfio: bool,
    /// How many of `livenessProbe`, `readinessProbe` run `exec`.
    pub exec_probes: i64,
    /// `domain.devices.autoattachSerialConsole` is `false`.
    pub no_serial_console: bool,
    /// `domain.devices.logSerialConsole`, when set.
    pub log_serial_console: Option<bool>,
    /// For a VirtualMachine: whether its run strategy wants a VMI now
    /// ([`wants_running`]); `None` for a VMI.
    pub wants_running: Option<bool>,
}

/// Whether `run_strategy` (a VM's `spec.runStrategy`, or `Always`/`Halted` from the older
/// `spec.running`) asks virt-controller for a running VMI now: `Always`, `RerunOnFailure`
/// and `Once` create one when none exists; `Halted` and `Manual` wait for a user
/// (kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`, `VirtualMachineRunStrategy`;
/// `pkg/virt-controller/watch/vm/vm.go`, which starts a VMI for those three).
pub fn wants_running(run_strategy: Option<&str>) -> bool {
    matches!(run_strategy, Some("Always" | "RerunOnFailure" | "Once"))
}
