//! Reading pods (and KubeVirt VMIs) from a dump or an API response (the live list and get
//! are gpuwl's `input::pods`).
//!
//! Dumps: `kubectl get pods -A -o json|yaml` (kind `List`), a raw API `PodList`, a single
//! `Pod`, or a KubeVirt `VirtualMachineInstance` / `VirtualMachine`, JSON or YAML (detected
//! by content: first non-blank byte `{` means JSON). Every item is reduced to a
//! [`PodInfo`]: name, namespace, node, phase, placement constraints (nodeSelector,
//! required node affinity, tolerations), the PodScheduled condition, and the effective
//! extended-resource requests.
//!
//! Errors are [`Error::Input`], one line: `<file>: [items[<i>] (<ns>/<name>): ]<field>: <what>`.
//!
//! Sources of the rules encoded here:
//! - effective requests: kubernetes/kubernetes
//!   `staging/src/k8s.io/component-helpers/resource/helpers.go` (`PodRequests`: the max of
//!   the regular containers plus restartable-init "sidecar" containers, and each init
//!   container plus the sidecars started before it; plus `spec.overhead`);
//! - requests default to limits when absent: `pkg/apis/core/v1/defaults.go`
//!   (`SetDefaults_Pod`), and for extended resources limits must equal requests
//!   (`pkg/apis/core/validation/validation.go`, `validateResourceRequirements`);
//! - extended resource names: `pkg/apis/core/v1/helper/helpers.go`
//!   (`IsExtendedResourceName`: a qualified name with a domain other than `kubernetes.io`,
//!   not prefixed `requests.`);
//! - VMIs: a virt-launcher pod requests one unit of each `spec.domain.devices.gpus[]` /
//!   `hostDevices[]` `deviceName` (kubevirt/kubevirt `pkg/virt-controller/services/
//!   rendercontainer.go`; docs/domain-facts.md §5).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::decode::document::{self, Keep, Prune, array, get, one_line, opt_scalar, opt_str};
use crate::decode::dump::Source;
use crate::error::{Error, FieldError, Result};
use crate::model::dra::PodClaim;
use crate::model::operand::OperandPod;
use crate::model::pod::{
    Condition, ObjectKind, PodInfo, RequestSource, SelectorRequirement, SelectorTerm, SpecProblem,
    Toleration, VmMemory, VmiShape, is_extended_resource,
};
use crate::model::quantity::Quantity;
use crate::text::cut;

/// Reads all pods of `source` (a List/PodList, or one Pod/VMI/VM).
///
/// The input is streamed: each list item is reduced to the fields a [`PodInfo`] needs
/// ([`ITEM`]; everything else is skipped unread) and converted before the next one is
/// read, so memory grows with the pods kept, not with the file. Bytes that cannot be JSON or
/// YAML text fail at once ([`document::Guard`]), and one object may span at most
/// [`document::MAX_OBJECT`] bytes.
///
/// Errors: [`Error::Input`] naming the source, the item and the field: unreadable file,
/// empty input, invalid JSON/YAML, text that is not UTF-8 (with the byte offset), an
/// unexpected kind, an item without `metadata.name`, a field of the wrong type, an
/// extended-resource quantity that is not a whole non-negative number.
pub(crate) fn read_pods(source: &Source) -> Result<Vec<PodInfo>> {
    let path = match source {
        Source::Stdin => std::path::PathBuf::from("-"),
        Source::Path(p) => p.clone(),
    };
    read_pods_from(document::open(&path)?, &source.to_string())
}

/// Reads pods from a file path (see [`read_pods`]).
pub fn read_pods_path(path: &Path) -> Result<Vec<PodInfo>> {
    read_pods(&Source::from_arg(path))
}

/// Parses pods from text; `name` is used in error messages. See [`read_pods`].
pub fn read_pods_str(text: &str, name: &str) -> Result<Vec<PodInfo>> {
    read_pods_from(text.as_bytes(), name)
}

/// What every document should be (for messages).
const EXPECTING: &str = "one Pod, PodList, List or VirtualMachineInstance";

/// Over [`document::MAX_OBJECT`] in one object.
const TOO_BIG: &str =
    "an object larger than 64 MiB (the API server stores at most ~1.5 MiB per object): not a pod";

/// Streams pods from any reader (see [`read_pods`]); `name` starts every error.
///
/// Errors: as [`read_pods`].
pub fn read_pods_from(reader: impl Read, name: &str) -> Result<Vec<PodInfo>> {
    document::read_list(reader, EXPECTING, TOO_BIG, PodSink::default())
        .map_err(|e| Error::Input(format!("{name}: {}", one_line(&e.to_string()))))
}

/// The fields of a pod spec (and of a VMI spec) that [`PodInfo`] is built from.
const SPEC_FIELDS: &[(&str, Keep)] = &[
    ("nodeName", Keep::All),
    ("nodeSelector", Keep::All),
    (
        "affinity",
        Keep::Fields(&[(
            "nodeAffinity",
            Keep::Fields(&[("requiredDuringSchedulingIgnoredDuringExecution", Keep::All)]),
        )]),
    ),
    ("tolerations", Keep::All),
    ("containers", Keep::Each(&CONTAINER)),
    ("initContainers", Keep::Each(&CONTAINER)),
    ("overhead", Keep::All),
    (
        "domain",
        Keep::Fields(&[
            (
                "devices",
                Keep::Fields(&[
                    (
                        "gpus",
                        Keep::Each(&Keep::Fields(&[("deviceName", Keep::All)])),
                    ),
                    (
                        "hostDevices",
                        Keep::Each(&Keep::Fields(&[("deviceName", Keep::All)])),
                    ),
                    // What decides the launcher's devices and overhead (VmiShape).
                    (
                        "interfaces",
                        Keep::Each(&Keep::Fields(&[("model", Keep::All)])),
                    ),
                    ("autoattachGraphicsDevice", Keep::All),
                    ("autoattachPodInterface", Keep::All),
                    ("autoattachSerialConsole", Keep::All),
                    ("logSerialConsole", Keep::All),
                ]),
            ),
            (
                "resources",
                Keep::Fields(&[
                    ("limits", Keep::All),
                    ("requests", Keep::All),
                    ("overcommitGuestOverhead", Keep::All),
                ]),
            ),
            // the guest's memory (VmMemory), which the twin gives to its VMIs
            ("memory", Keep::Fields(&[("guest", Keep::All)])),
            (
                "cpu",
                Keep::Fields(&[
                    ("sockets", Keep::All),
                    ("cores", Keep::All),
                    ("threads", Keep::All),
                    ("dedicatedCpuPlacement", Keep::All),
                ]),
            ),
            ("machine", Keep::Fields(&[("type", Keep::All)])),
        ]),
    ),
    // pod-level resources (cpu, memory, hugepages)
    ("resources", RESOURCES),
    // gates that hold the pod back from scheduling (Kueue, ...), names only
    (
        "schedulingGates",
        Keep::Each(&Keep::Fields(&[("name", Keep::All)])),
    ),
    // A VMI's architecture and exec probes (VmiShape; a pod has neither at this level).
    ("architecture", Keep::All),
    ("livenessProbe", Keep::Fields(&[("exec", Keep::All)])),
    ("readinessProbe", Keep::Fields(&[("exec", Keep::All)])),
];

/// The pod spec fields [`PodInfo`] is built from, as one rule (for readers that keep more
/// of a pod than [`ITEM`] and convert it with [`from_object`]).
pub(crate) const SPEC: Keep = Keep::Fields(SPEC_FIELDS);

/// What the readers keep of an object's `status.conditions`: each condition's type, status,
/// reason and message (pods here, nodes in the must-gather reader).
pub(crate) const CONDITIONS: Keep = Keep::Each(&Keep::Fields(&[
    ("type", Keep::All),
    ("status", Keep::All),
    ("reason", Keep::All),
    ("message", Keep::All),
]));

const RESOURCES: Keep = Keep::Fields(&[("limits", Keep::All), ("requests", Keep::All)]);

const CONTAINER: Keep = Keep::Fields(&[
    ("name", Keep::All),
    ("resources", RESOURCES),
    ("restartPolicy", Keep::All),
]);

/// What is kept of one Pod, VirtualMachineInstance or VirtualMachine (a VM's
/// `spec.template.spec` is a VMI spec).
pub const ITEM: Keep = Keep::Fields(&[
    ("kind", Keep::All),
    (
        "metadata",
        Keep::Fields(&[
            ("name", Keep::All),
            ("namespace", Keep::All),
            // a list's page token (live lists)
            ("continue", Keep::All),
        ]),
    ),
    (
        "spec",
        Keep::Fields(&[
            ("nodeName", SPEC_FIELDS[0].1),
            ("nodeSelector", SPEC_FIELDS[1].1),
            ("affinity", SPEC_FIELDS[2].1),
            ("tolerations", SPEC_FIELDS[3].1),
            ("containers", SPEC_FIELDS[4].1),
            ("initContainers", SPEC_FIELDS[5].1),
            ("overhead", SPEC_FIELDS[6].1),
            ("domain", SPEC_FIELDS[7].1),
            ("resources", SPEC_FIELDS[8].1),
            ("schedulingGates", SPEC_FIELDS[9].1),
            ("architecture", SPEC_FIELDS[10].1),
            ("livenessProbe", SPEC_FIELDS[11].1),
            ("readinessProbe", SPEC_FIELDS[12].1),
            // DRA: the pod's claims (names only).
            ("resourceClaims", Keep::All),
            (
                "template",
                Keep::Fields(&[("spec", Keep::Fields(SPEC_FIELDS))]),
            ),
            // A VirtualMachine's run strategy (whether it waits without a VMI).
            ("runStrategy", Keep::All),
            ("running", Keep::All),
        ]),
    ),
    (
        "status",
        Keep::Fields(&[
            ("phase", Keep::All),
            ("reason", Keep::All),
            ("message", Keep::All),
            ("nodeName", Keep::All),
            // A VMI's machine type (VmiShape).
            ("machine", Keep::Fields(&[("type", Keep::All)])),
            // DRA: the claims generated from templates.
            ("resourceClaimStatuses", Keep::All),
            ("conditions", CONDITIONS),
        ]),
    ),
]);

/// What is kept of one item of an API response ([`read_response`]): [`ITEM`], and what
/// [`crate::decode::operands::from_value`] reads to know a GPU Operator operand pod
/// ([`crate::decode::operands::READS`]), so that the live list finds the operand pods in
/// the same read.
const LIVE_ITEM: Keep = Keep::Both(&ITEM, &crate::decode::operands::READS);

/// The pod reader's part of [`document::read_list`]: elements pruned to `keep` ([`ITEM`]
/// or [`LIVE_ITEM`]), converted as they arrive, tolerations shared.
struct PodSink {
    out: Vec<PodInfo>,
    interner: Interner,
    keep: Keep,
}

impl Default for PodSink {
    fn default() -> Self {
        PodSink::keeping(ITEM)
    }
}

impl PodSink {
    /// A sink that prunes each item to `keep` (an object's fields).
    fn keeping(keep: Keep) -> PodSink {
        PodSink {
            out: Vec::new(),
            interner: Interner::default(),
            keep,
        }
    }
}

impl document::ListSink for PodSink {
    type Item = Value;
    type Seed = Prune;
    type Out = Vec<PodInfo>;

    fn seed(&self) -> Prune {
        Prune(self.keep)
    }

    fn top_field(&self, key: &str) -> Option<Keep> {
        self.keep.field(key)
    }

    fn names_kind(item: &Value) -> bool {
        item.get("kind").is_some_and(|k| !k.is_null())
    }

    fn item(
        &mut self,
        index: usize,
        item: Value,
        list_kind: Option<&str>,
    ) -> std::result::Result<(), document::ReadError> {
        let p = convert(index, &item, list_item_kind(list_kind))?;
        self.out.push(self.interner.share(p));
        Ok(())
    }

    fn finish(
        self,
        top: document::TopObject,
    ) -> std::result::Result<Vec<PodInfo>, document::ReadError> {
        match (top.kind.as_deref(), top.saw_items) {
            (Some("List" | "PodList" | "VirtualMachineInstanceList"), _) => Ok(self.out),
            (Some(_), _) => Ok(vec![object(&Value::Object(top.object), None)?]),
            (None, true) => Err(FieldError::object(
                "list without kind: expected kind PodList or List",
            ))?,
            (None, false) => Err(FieldError::object(
                "no kind field: expected a Pod, PodList, List or VirtualMachineInstance",
            ))?,
        }
    }
}

/// The kind of a list's items that do not say theirs.
fn list_item_kind(list: Option<&str>) -> Option<&'static str> {
    match list {
        Some("PodList") => Some("Pod"),
        Some("VirtualMachineInstanceList") => Some("VirtualMachineInstance"),
        _ => None,
    }
}

/// One list item (pruned to [`ITEM`]) as a [`PodInfo`]; the error names the item.
fn convert(
    index: usize,
    item: &Value,
    default_kind: Option<&str>,
) -> std::result::Result<PodInfo, document::ReadError> {
    object(item, default_kind).map_err(|error| document::ReadError::Item {
        index,
        who: item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(|n| {
                let ns = item
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default");
                format!("{ns}/{n}")
            }),
        error,
    })
}

/// Converts one API object (as JSON) into a [`PodInfo`] (what the live readers use).
///
/// Errors: the field-naming message, without the source name.
pub fn from_object(v: &Value) -> std::result::Result<PodInfo, FieldError> {
    object(v, Some("Pod"))
}

fn object(v: &Value, default_kind: Option<&str>) -> std::result::Result<PodInfo, FieldError> {
    if !v.is_object() {
        return Err(FieldError::object("expected an object"));
    }
    let kind = opt_str(v, "kind")?.or(default_kind);
    let kind = match kind {
        Some("Pod") => ObjectKind::Pod,
        Some("VirtualMachineInstance") => ObjectKind::VirtualMachineInstance,
        Some("VirtualMachine") => ObjectKind::VirtualMachine,
        Some(k) => {
            return Err(FieldError::object(format!(
                "kind {} is not a Pod, VirtualMachineInstance or VirtualMachine",
                document::cut(k)
            )));
        }
        None => return Err(FieldError::object("no kind field: expected a Pod")),
    };
    let name = match opt_str(v, "metadata.name")? {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => return Err(FieldError::new("metadata.name", "missing")),
    };
    let namespace = opt_str(v, "metadata.namespace")?
        .unwrap_or("default")
        .to_owned();
    // A VM is read through its template, which is a VMI spec.
    let (spec_path, spec) = match kind {
        ObjectKind::VirtualMachine => ("spec.template.spec", get(v, "spec.template.spec")),
        _ => ("spec", get(v, "spec")),
    };
    let null = Value::Null;
    let spec = spec.unwrap_or(&null);
    let sp = |f: &str| format!("{spec_path}.{f}");
    let node_name = match kind {
        ObjectKind::Pod => opt_str(spec, "nodeName")
            .map_err(|e| FieldError::new(format!("{spec_path}.{}", e.field), e.problem))?,
        _ => opt_str(v, "status.nodeName")?,
    }
    .filter(|s| !s.is_empty())
    .map(str::to_owned);
    let phase = opt_str(v, "status.phase")?.map(str::to_owned);
    let node_selector = string_map(spec.get("nodeSelector"), &sp("nodeSelector"))?;
    let required_affinity = match get(
        spec,
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    ) {
        None | Some(Value::Null) => None,
        Some(req) => {
            let p = sp("affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
            let terms = array(
                req.get("nodeSelectorTerms"),
                &format!("{p}.nodeSelectorTerms"),
            )?;
            let mut out = Vec::new();
            for (i, t) in terms.iter().enumerate() {
                let tp = format!("{p}.nodeSelectorTerms[{i}]");
                out.push(SelectorTerm {
                    match_expressions: requirements(
                        t.get("matchExpressions"),
                        &format!("{tp}.matchExpressions"),
                    )?,
                    match_fields: requirements(t.get("matchFields"), &format!("{tp}.matchFields"))?,
                });
            }
            Some(out)
        }
    };
    let list = array(spec.get("tolerations"), &sp("tolerations"))?;
    let mut tolerations = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let tp = format!("{}[{i}]", sp("tolerations"));
        let f = |k: &str| {
            opt_scalar(t.get(k), &format!("{tp}.{k}")).map(|o| o.filter(|s| !s.is_empty()))
        };
        tolerations.push(Toleration {
            key: f("key")?,
            operator: f("operator")?,
            value: f("value")?,
            effect: f("effect")?,
        });
    }
    let mut scheduling_gates = Vec::new();
    for (i, g) in array(spec.get("schedulingGates"), &sp("schedulingGates"))?
        .iter()
        .enumerate()
    {
        let field = format!("{}[{i}].name", sp("schedulingGates"));
        if let Some(name) = opt_scalar(g.get("name"), &field)? {
            scheduling_gates.push(name);
        }
    }
    let mut conditions = Vec::new();
    for (i, c) in array(get(v, "status.conditions"), "status.conditions")?
        .iter()
        .enumerate()
    {
        let cp = format!("status.conditions[{i}]");
        let f = |k: &str| opt_scalar(c.get(k), &format!("{cp}.{k}"));
        let condition = Condition {
            type_: f("type")?.unwrap_or_default(),
            status: f("status")?.unwrap_or_default(),
            reason: f("reason")?,
            message: f("message")?,
        };
        // Only the scheduler's condition is used; the others (Ready, Initialized, ...)
        // would cost memory for every pod of a large list.
        if condition.type_ == "PodScheduled" {
            conditions.push(condition);
        }
    }
    conditions.shrink_to_fit();
    let (requests, other_requests, mut found) = match kind {
        ObjectKind::Pod => pod_requests(spec, spec_path)?,
        _ => vmi_requests(spec, spec_path)?,
    };
    let status_reason = opt_str(v, "status.reason")?.map(str::to_owned);
    let status_message = opt_str(v, "status.message")?.map(str::to_owned);
    let resource_claims = match kind {
        ObjectKind::Pod => pod_resource_claims(v, spec, spec_path)?,
        _ => Vec::new(),
    };
    Ok(PodInfo {
        kind,
        namespace,
        name,
        node_name,
        phase,
        node_selector,
        required_affinity,
        tolerations: tolerations.into(),
        scheduling_gates,
        conditions,
        requests: Arc::new(requests),
        other_requests: Arc::new(other_requests),
        status_reason,
        status_message,
        sources: {
            found.sources.shrink_to_fit();
            found.sources
        },
        spec_problems: found.problems,
        resource_claims,
        vmi_owned_by_vm: None,
        vm_memory: (kind != ObjectKind::Pod).then(|| vm_memory(spec)).flatten(),
        vmi_shape: (kind != ObjectKind::Pod).then(|| Box::new(vmi_shape(v, spec))),
    })
}

/// What of a VMI spec (`spec`, a VMI's `spec` or a VM's `spec.template.spec`) decides its
/// virt-launcher pod ([`VmiShape`], kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/
/// schema.go`: `DomainSpec`, `CPU`, `Machine`, `Devices`, `Interface`). A field that is not
/// what it should be counts as unset (the pod reader reports the fields it judges).
fn vmi_shape(v: &Value, spec: &Value) -> VmiShape {
    let s = |p: &str| get(spec, p).and_then(Value::as_str);
    let qty = |p: &str, scale: i64| {
        get(spec, p)
            .and_then(|q| match q {
                Value::String(s) => Quantity::parse(s).ok(),
                Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
                _ => None,
            })
            .map(|q| q.scaled_ceil(scale))
    };
    let int = |p: &str| get(spec, p).and_then(Value::as_i64);
    let flag = |p: &str| get(spec, p).and_then(Value::as_bool);
    // `GetNumberOfVCPUs`: the product of the factors that are set (pkg/util/hardware).
    let factors: Vec<i64> = ["sockets", "cores", "threads"]
        .iter()
        .filter_map(|f| int(&format!("domain.cpu.{f}")).filter(|n| *n > 0))
        .collect();
    let vcpus =
        (!factors.is_empty()).then(|| factors.iter().fold(1i64, |a, b| a.saturating_mul(*b)));
    let interfaces = get(spec, "domain.devices.interfaces")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let device_lists = ["domain.devices.gpus", "domain.devices.hostDevices"];
    VmiShape {
        architecture: s("architecture").map(str::to_owned),
        machine_type: get(v, "status.machine.type")
            .and_then(Value::as_str)
            .or_else(|| s("domain.machine.type"))
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
        vcpus,
        dedicated_cpu: flag("domain.cpu.dedicatedCpuPlacement").unwrap_or(false),
        memory_request: qty("domain.resources.requests.memory", 0),
        memory_guest: qty("domain.memory.guest", 0),
        overcommit_guest_overhead: flag("domain.resources.overcommitGuestOverhead")
            .unwrap_or(false),
        cpu_request: qty("domain.resources.requests.cpu", 3),
        cpu_limit: qty("domain.resources.limits.cpu", 3),
        memory_limit: qty("domain.resources.limits.memory", 0),
        ephemeral_request: qty("domain.resources.requests.ephemeral-storage", 0),
        graphics: flag("domain.devices.autoattachGraphicsDevice") != Some(false),
        pod_interface: flag("domain.devices.autoattachPodInterface") != Some(false),
        interfaces: interfaces.len(),
        virtio_interface: interfaces.iter().any(|i| {
            matches!(
                i.get("model").and_then(Value::as_str),
                None | Some("" | "virtio")
            )
        }),
        vfio: device_lists.iter().any(|l| {
            get(spec, l)
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        }),
        exec_probes: ["livenessProbe", "readinessProbe"]
            .iter()
            .filter(|p| get(spec, &format!("{p}.exec")).is_some())
            .count() as i64,
        no_serial_console: flag("domain.devices.autoattachSerialConsole") == Some(false),
        log_serial_console: flag("domain.devices.logSerialConsole"),
        wants_running: (v.get("kind").and_then(Value::as_str) == Some("VirtualMachine"))
            .then(|| crate::model::pod::wants_running(run_strategy(v))),
    }
}

/// A VMI spec's memory fields ([`VmMemory`]); a field that is not a valid quantity is left
/// out (the API server refuses such a VMI; the twin then falls back as for an absent one).
fn vm_memory(spec: &Value) -> Option<Box<VmMemory>> {
    let field = |path: &str| {
        opt_scalar(Some(get(spec, path)?), path)
            .ok()
            .flatten()
            .filter(|q| Quantity::parse(q).is_ok())
    };
    let m = VmMemory {
        guest: field("domain.memory.guest"),
        request: field("domain.resources.requests.memory"),
    };
    (m.guest.is_some() || m.request.is_some()).then(|| Box::new(m))
}

/// A pod's `spec.resourceClaims[]` (DRA), each resolved to its ResourceClaim: the
/// `resourceClaimName`, or for a `resourceClaimTemplateName` the claim named in
/// `status.resourceClaimStatuses[]` (kubernetes/kubernetes
/// `staging/src/k8s.io/api/core/v1/types.go`, `PodResourceClaim`, `PodResourceClaimStatus`).
fn pod_resource_claims(
    v: &Value,
    spec: &Value,
    spec_path: &str,
) -> std::result::Result<Vec<PodClaim>, FieldError> {
    let mut generated = BTreeMap::new();
    let sp = "status.resourceClaimStatuses";
    for (i, s) in array(get(v, sp), sp)?.iter().enumerate() {
        let p = format!("{sp}[{i}]");
        if let (Some(n), Some(c)) = (
            opt_scalar(s.get("name"), &format!("{p}.name"))?,
            opt_scalar(
                s.get("resourceClaimName"),
                &format!("{p}.resourceClaimName"),
            )?,
        ) {
            generated.insert(n, c);
        }
    }
    let mut out = Vec::new();
    let rp = format!("{spec_path}.resourceClaims");
    for (i, c) in array(spec.get("resourceClaims"), &rp)?.iter().enumerate() {
        let p = format!("{rp}[{i}]");
        let f = |k: &str| {
            opt_scalar(c.get(k), &format!("{p}.{k}")).map(|o| o.filter(|s| !s.is_empty()))
        };
        let Some(name) = f("name")? else {
            return Err(FieldError::new(format!("{p}.name"), "missing"));
        };
        out.push(PodClaim {
            generated_claim_name: generated.get(&name).cloned(),
            resource_claim_name: f("resourceClaimName")?,
            resource_claim_template_name: f("resourceClaimTemplateName")?,
            name,
        });
    }
    Ok(out)
}

/// Hands pods with equal tolerations (and equal requests) one shared copy (see
/// [`PodInfo::tolerations`], [`PodInfo::requests`]).
#[derive(Default)]
struct Interner {
    tolerations: std::collections::HashSet<Arc<[Toleration]>>,
    requests: std::collections::HashSet<Arc<Requests>>,
}

impl Interner {
    fn share(&mut self, mut p: PodInfo) -> PodInfo {
        match self.tolerations.get(&p.tolerations) {
            Some(t) => p.tolerations = t.clone(),
            None => {
                self.tolerations.insert(p.tolerations.clone());
            }
        }
        match self.requests.get(&p.requests) {
            Some(r) => p.requests = r.clone(),
            None => {
                self.requests.insert(p.requests.clone());
            }
        }
        match self.requests.get(&p.other_requests) {
            Some(r) => p.other_requests = r.clone(),
            None => {
                self.requests.insert(p.other_requests.clone());
            }
        }
        p
    }
}

type Requests = BTreeMap<String, i64>;

/// Where the requests were found, and what the API server would reject.
#[derive(Default)]
struct Found {
    sources: Vec<RequestSource>,
    problems: Vec<SpecProblem>,
}

/// One container's requests: the extended resources in whole units, and the other
/// resources in scheduler units ([`native_units`]).
struct ContainerRequests {
    extended: Requests,
    native: Requests,
}

/// The units the scheduler compares a non-extended resource in: cpu in millicores
/// (`MilliValue()`), the rest in whole units (`Value()`), both rounded up
/// (kubernetes/kubernetes `pkg/scheduler/framework/types.go`, `Resource.Add`).
fn native_units(resource: &str, q: &Quantity) -> i64 {
    if resource == "cpu" {
        q.scaled_ceil(3)
    } else {
        q.scaled_ceil(0)
    }
}

/// The requests of one container: `requests`, each absent one defaulted from `limits`
/// (`SetDefaults_Pod`). What the API server refuses (`validateResourceRequirements`) is
/// noted in `found.problems`, naming the field: an extended resource in requests but not
/// in limits, or in both with different numbers (the requests value is counted); a
/// request larger than its limit.
fn container_requests(
    c: &Value,
    path: &str,
    container: Option<String>,
    found: &mut Found,
) -> std::result::Result<ContainerRequests, FieldError> {
    type Read = BTreeMap<String, (i64, String)>;
    let read = |field: &str| -> std::result::Result<(Read, Read), FieldError> {
        let fp = format!("{path}.resources.{field}");
        let mut ext = BTreeMap::new();
        let mut native = BTreeMap::new();
        for (k, raw) in string_map(get(c, &format!("resources.{field}")), &fp)? {
            if is_extended_resource(&k) {
                let n = whole(&raw, || format!("{fp}[{}]", cut(&k)))?;
                ext.insert(k, (n, raw));
            } else if let Ok(q) = Quantity::parse(&raw) {
                // The API server refuses a malformed quantity; a dump never has one, and a
                // manifest's is not this reader's to judge: it is left out.
                native.insert(k.clone(), (native_units(&k, &q), raw));
            }
        }
        Ok((ext, native))
    };
    let (limits, native_limits) = read("limits")?;
    let (requests, native_requests) = read("requests")?;
    let mut out = Requests::new();
    for (k, &(n, _)) in limits.iter().chain(requests.iter()) {
        // requests win over limits; limits only fill absent requests
        let from = if requests.contains_key(k) {
            "requests"
        } else {
            "limits"
        };
        if from == "requests" || !out.contains_key(k) {
            out.insert(k.clone(), n);
        }
        let noted = |found: &Found| {
            found
                .problems
                .iter()
                .any(|p| p.path() == path && p.resource() == k)
        };
        if let (Some((l, lraw)), Some((r, rraw))) = (limits.get(k), requests.get(k))
            && l != r
            && !noted(found)
        {
            found.problems.push(SpecProblem::RequestDiffersFromLimit {
                path: path.to_owned(),
                resource: k.clone(),
                requested: rraw.clone(),
                limit: lraw.clone(),
                counted: *r,
            });
        }
        if let (None, Some((_, rraw))) = (limits.get(k), requests.get(k))
            && !noted(found)
        {
            found.problems.push(SpecProblem::RequestWithoutLimit {
                path: path.to_owned(),
                resource: k.clone(),
                requested: rraw.clone(),
            });
        }
        if !found.sources.iter().any(|s| &s.resource == k) {
            found.sources.push(RequestSource {
                resource: k.clone(),
                field: format!("{path}.resources.{from}"),
                container: container.clone(),
            });
        }
    }
    let mut native = Requests::new();
    for (k, &(n, _)) in native_limits.iter().chain(native_requests.iter()) {
        if native_requests.contains_key(k) || !native.contains_key(k) {
            native.insert(k.clone(), n);
        }
    }
    // Once per resource (the loop above meets a resource in both maps twice).
    for (k, (r, rraw)) in &native_requests {
        if let Some((l, lraw)) = native_limits.get(k)
            && r > l
        {
            found.problems.push(SpecProblem::RequestAboveLimit {
                path: path.to_owned(),
                resource: k.clone(),
                requested: rraw.clone(),
                limit: lraw.clone(),
            });
        }
    }
    Ok(ContainerRequests {
        extended: out,
        native,
    })
}

/// Adds `b` into `a`, saturating at `i64::MAX` (quantities may be as large as 2^63-1;
/// a sum of two must not wrap into a small count).
fn add_into(a: &mut Requests, b: &Requests) {
    for (k, v) in b {
        let e = a.entry(k.clone()).or_default();
        *e = e.saturating_add(*v);
    }
}

fn max_into(a: &mut Requests, b: &Requests) {
    for (k, v) in b {
        let e = a.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// `PodRequests` (component-helpers `resource/helpers.go`) over extended and other
/// resources alike: the sum of the regular containers and the restartable-init
/// ("sidecar") containers, or the largest init phase (each init container plus the
/// sidecars started before it) when that is larger; pod-level `spec.resources.requests`
/// (defaulted from its limits) replaces the containers' cpu, memory and hugepages; then
/// `spec.overhead` is added. An extended resource whose number comes from the init phase
/// is attributed to that init container ([`RequestSource::field`]).
fn pod_requests(
    spec: &Value,
    spec_path: &str,
) -> std::result::Result<(Requests, Requests, Found), FieldError> {
    let mut found = Found::default();
    let mut reqs = Requests::new();
    let mut native = Requests::new();
    for (i, c) in array(spec.get("containers"), &format!("{spec_path}.containers"))?
        .iter()
        .enumerate()
    {
        let name = opt_scalar(c.get("name"), &format!("{spec_path}.containers[{i}].name"))?;
        let r = container_requests(c, &format!("{spec_path}.containers[{i}]"), name, &mut found)?;
        add_into(&mut reqs, &r.extended);
        add_into(&mut native, &r.native);
    }
    // Sidecars add to the regular sum and to every later init container; the init phase
    // needs the max of each init container + prior sidecars.
    let mut sidecars = Requests::new();
    let mut native_sidecars = Requests::new();
    let mut init_max = Requests::new();
    let mut native_init_max = Requests::new();
    // Which init container sets init_max of an extended resource: (field, container).
    let mut init_src: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    for (i, c) in array(
        spec.get("initContainers"),
        &format!("{spec_path}.initContainers"),
    )?
    .iter()
    .enumerate()
    {
        let p = format!("{spec_path}.initContainers[{i}]");
        let name = opt_scalar(c.get("name"), &format!("{p}.name"))?;
        let r = container_requests(
            c,
            &p,
            name.as_ref().map(|n| format!("init container {n}")),
            &mut found,
        )?;
        // The field of this init container that names resource `k`.
        let field_of = |k: &str| -> (String, Option<String>) {
            let from = if get(c, "resources.requests")
                .and_then(|m| m.get(k))
                .is_some()
            {
                "requests"
            } else {
                "limits"
            };
            (
                format!("{p}.resources.{from}"),
                name.as_ref().map(|n| format!("init container {n}")),
            )
        };
        let restart = opt_scalar(c.get("restartPolicy"), &format!("{p}.restartPolicy"))?;
        let phase = if restart.as_deref() == Some("Always") {
            add_into(&mut reqs, &r.extended);
            add_into(&mut native, &r.native);
            add_into(&mut sidecars, &r.extended);
            add_into(&mut native_sidecars, &r.native);
            max_into(&mut native_init_max, &native_sidecars);
            sidecars.clone()
        } else {
            let mut t = r.extended.clone();
            add_into(&mut t, &sidecars);
            let mut n = r.native;
            add_into(&mut n, &native_sidecars);
            max_into(&mut native_init_max, &n);
            t
        };
        for (k, v) in &phase {
            if *v > init_max.get(k).copied().unwrap_or(0) {
                init_max.insert(k.clone(), *v);
                if r.extended.contains_key(k) {
                    init_src.insert(k.clone(), field_of(k));
                }
            }
        }
    }
    for (k, v) in &init_max {
        if *v > reqs.get(k).copied().unwrap_or(0) {
            reqs.insert(k.clone(), *v);
            if let Some((field, container)) = init_src.remove(k)
                && let Some(s) = found.sources.iter_mut().find(|s| &s.resource == k)
            {
                s.field = field;
                s.container = container;
            }
        }
    }
    max_into(&mut native, &native_init_max);
    // Pod-level requests (PodLevelResources), defaulted from pod-level limits.
    let mut pod_level = Requests::new();
    for field in ["limits", "requests"] {
        let fp = format!("{spec_path}.resources.{field}");
        for (k, raw) in string_map(get(spec, &format!("resources.{field}")), &fp)? {
            if (k == "cpu" || k == "memory" || k.starts_with("hugepages-"))
                && let Ok(q) = Quantity::parse(&raw)
            {
                pod_level.insert(k.clone(), native_units(&k, &q));
            }
        }
    }
    native.extend(pod_level);
    let overhead = string_map(spec.get("overhead"), &format!("{spec_path}.overhead"))?;
    for (k, raw) in overhead {
        if is_extended_resource(&k) {
            let n = whole(&raw, || format!("{spec_path}.overhead[{}]", cut(&k)))?;
            let e = reqs.entry(k).or_default();
            *e = e.saturating_add(n);
        } else if let Ok(q) = Quantity::parse(&raw) {
            let n = native_units(&k, &q);
            let e = native.entry(k).or_default();
            *e = e.saturating_add(n);
        }
    }
    reqs.retain(|_, v| *v > 0);
    native.retain(|_, v| *v != 0);
    Ok((reqs, native, found))
}

fn vmi_requests(
    spec: &Value,
    spec_path: &str,
) -> std::result::Result<(Requests, Requests, Found), FieldError> {
    let mut reqs = Requests::new();
    let mut found = Found::default();
    for list in ["gpus", "hostDevices"] {
        let lp = format!("{spec_path}.domain.devices.{list}");
        for (i, d) in array(get(spec, &format!("domain.devices.{list}")), &lp)?
            .iter()
            .enumerate()
        {
            let fp = format!("{lp}[{i}].deviceName");
            let Some(name) = opt_scalar(d.get("deviceName"), &fp)?.filter(|s| !s.is_empty()) else {
                return Err(FieldError::new(fp, "missing"));
            };
            let e = reqs.entry(name.clone()).or_default();
            *e = e.saturating_add(1);
            found.sources.push(RequestSource {
                resource: name,
                field: fp,
                container: None,
            });
        }
    }
    // Explicit resources on the VMI (spec.domain.resources) are passed to the launcher.
    let r = container_requests(
        spec.get("domain").unwrap_or(&Value::Null),
        &format!("{spec_path}.domain"),
        None,
        &mut found,
    )?;
    add_into(&mut reqs, &r.extended);
    // The launcher pod's cpu and memory are KubeVirt's to compute (overheads, the
    // guest's memory): not modelled, so left out.
    Ok((reqs, Requests::new(), found))
}

/// A whole, non-negative quantity (extended resources must be integers:
/// `pkg/apis/core/validation/validation.go`, `validateResourceRequirements`).
/// `field` names the quantity in the error.
fn whole(raw: &str, field: impl Fn() -> String) -> std::result::Result<i64, FieldError> {
    let q = Quantity::parse(raw)
        .map_err(|e| FieldError::new(field(), format!("{} is not a quantity ({e})", cut(raw))))?;
    q.to_count()
        .map_err(|why| FieldError::new(field(), format!("{} {why}", cut(raw))))
}

fn string_map(
    v: Option<&Value>,
    path: &str,
) -> std::result::Result<BTreeMap<String, String>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                opt_scalar(Some(v), &format!("{path}[{}]", cut(k)))
                    .map(|s| (k.clone(), s.unwrap_or_default()))
            })
            .collect(),
        Some(_) => Err(FieldError::new(path, "expected a map")),
    }
}

fn requirements(
    v: Option<&Value>,
    path: &str,
) -> std::result::Result<Vec<SelectorRequirement>, FieldError> {
    let mut out = Vec::new();
    for (i, r) in array(v, path)?.iter().enumerate() {
        let rp = format!("{path}[{i}]");
        let values = array(r.get("values"), &format!("{rp}.values"))?
            .iter()
            .enumerate()
            .map(|(j, x)| {
                opt_scalar(Some(x), &format!("{rp}.values[{j}]")).map(Option::unwrap_or_default)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        out.push(SelectorRequirement {
            key: opt_scalar(r.get("key"), &format!("{rp}.key"))?.unwrap_or_default(),
            operator: opt_scalar(r.get("operator"), &format!("{rp}.operator"))?.unwrap_or_default(),
            values,
        });
    }
    Ok(out)
}

/// The field selector of the live pod list: the API server leaves out pods that have
/// finished (phase `Succeeded` or `Failed`), which hold no resources
/// ([`PodInfo::is_terminal`]) and would only be skipped here.
pub const LIVE_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// One API response (a PodList page, a whole unpaged list, or one Pod) read by
/// [`read_response`].
#[derive(Debug, Default)]
pub struct Listed {
    /// The pods: a list's items in the response's order, or the one pod.
    pub pods: Vec<PodInfo>,
    /// The GPU Operator's operand pods among a list's items
    /// ([`crate::decode::operands::from_value`] on each item, pruned to what it reads).
    pub operands: Vec<OperandPod>,
    /// A page's `continue` token; `None` on the last page (and for one pod).
    pub next: Option<String>,
}

/// One API response (a PodList page, a whole list, or one Pod) read with the dump reader
/// as it arrives: `body` is read through (an HTTP body being received, or bytes), each
/// item reduced to the fields a [`PodInfo`] needs and to what marks an operand pod
/// ([`LIVE_ITEM`]; not a whole `k8s_openapi` Pod) and converted before the next is read,
/// so memory grows with the pods kept, not with the response.
///
/// Errors: [`Error::Failed`] (`<doing>: the API server's response: <why>`) when the
/// response is not a readable pod or list, or `body` fails (the connection's error).
pub fn read_response(body: impl Read, doing: &str) -> Result<Listed> {
    let sink = ResponseSink {
        pods: PodSink::keeping(LIVE_ITEM),
        operands: Vec::new(),
    };
    document::read_list(body, EXPECTING, TOO_BIG, sink)
        .map_err(|e| Error::failed(format!("{doing}: the API server's response"), e))
}

/// [`PodSink`] for an API response: a PodList's page token and its operand pods are kept,
/// and a response without `kind` that is not a list is one Pod.
struct ResponseSink {
    pods: PodSink,
    operands: Vec<OperandPod>,
}

impl document::ListSink for ResponseSink {
    type Item = Value;
    type Seed = Prune;
    type Out = Listed;

    fn seed(&self) -> Prune {
        self.pods.seed()
    }

    fn top_field(&self, key: &str) -> Option<Keep> {
        self.pods.top_field(key)
    }

    fn names_kind(item: &Value) -> bool {
        PodSink::names_kind(item)
    }

    fn item(
        &mut self,
        index: usize,
        item: Value,
        list_kind: Option<&str>,
    ) -> std::result::Result<(), document::ReadError> {
        if let Some(operand) = crate::decode::operands::from_value(&item) {
            self.operands.push(operand);
        }
        self.pods.item(index, item, list_kind)
    }

    fn finish(
        self,
        mut top: document::TopObject,
    ) -> std::result::Result<Self::Out, document::ReadError> {
        let next = top
            .object
            .get("metadata")
            .and_then(|m| m.get("continue"))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        // A PodList's items carry no kind; a single Pod does.
        if top.kind.is_none() && !top.saw_items {
            top.kind = Some("Pod".into());
        }
        Ok(Listed {
            pods: self.pods.finish(top)?,
            operands: self.operands,
            next,
        })
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A VirtualMachine's run strategy: `spec.runStrategy`, else `Always`/`Halted` from the
/// older `spec.running`; `None` when neither is set.
pub fn run_strategy(vm: &Value) -> Option<&str> {
    vm.pointer("/spec/runStrategy")
        .and_then(Value::as_str)
        .or_else(|| match vm.pointer("/spec/running") {
            Some(Value::Bool(true)) => Some("Always"),
            Some(Value::Bool(false)) => Some("Halted"),
            _ => None,
        })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_streamed_vmi_keeps_what_its_launcher_depends_on() {
        // Issue 47: a VMI in a pods file (or a snapshot's pods) is judged as the launcher
        // virt-controller renders from it, so the streaming reader keeps every field of
        // VmiShape: the architecture, topology, machine type, devices, probes.
        let vmi = r#"{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
          "metadata": {"name": "vm", "namespace": "ns"},
          "spec": {"architecture": "arm64",
            "domain": {"cpu": {"cores": 4, "threads": 2, "dedicatedCpuPlacement": true},
              "machine": {"type": "virt"},
              "resources": {"requests": {"memory": "1Gi"}, "limits": {"cpu": "3"},
                "overcommitGuestOverhead": true},
              "devices": {"autoattachGraphicsDevice": false, "autoattachPodInterface": false,
                "autoattachSerialConsole": false, "logSerialConsole": true,
                "interfaces": [{"name": "a", "model": "e1000"}],
                "gpus": [{"name": "g", "deviceName": "nvidia.com/GA102GL_A10"}]}},
            "livenessProbe": {"exec": {"command": ["true"]}}},
          "status": {"machine": {"type": "virt-9.0"}}}"#;
        let streamed = read_pods_str(vmi, "vmi.json").unwrap().remove(0);
        let whole = from_object(&serde_json::from_str(vmi).unwrap()).unwrap();
        let shape = streamed.vmi_shape.as_deref().unwrap();
        assert_eq!(Some(shape), whole.vmi_shape.as_deref());
        assert_eq!(shape.architecture.as_deref(), Some("arm64"));
        assert_eq!(shape.machine_type.as_deref(), Some("virt-9.0"));
        assert_eq!(shape.vcpus, Some(8));
        assert!(shape.dedicated_cpu && shape.overcommit_guest_overhead);
        assert_eq!(shape.cpu_limit, Some(3000));
        assert!(!shape.graphics && !shape.pod_interface && !shape.virtio_interface);
        assert_eq!((shape.interfaces, shape.exec_probes), (1, 1));
        assert!(shape.no_serial_console);
        assert_eq!(shape.log_serial_console, Some(true));
    }

    #[test]
    fn a_vmis_memory_is_kept_as_written_for_the_twin() {
        let vmi = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm\nspec:\n  domain:\n    memory:\n      guest: 48Gi\n    resources:\n      requests:\n        memory: 50Gi\n    devices:\n      gpus:\n      - name: g\n        deviceName: nvidia.com/GA102GL_A10\n";
        let p = read_pods_str(vmi, "vmi.yaml").unwrap().remove(0);
        let m = p.vm_memory.expect("memory kept");
        assert_eq!(m.guest.as_deref(), Some("48Gi"));
        assert_eq!(m.request.as_deref(), Some("50Gi"));
        // Not a fit input: the launcher's request is KubeVirt's to compute.
        assert!(p.other_requests.get("memory").is_none());
        let vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm\nspec:\n  template:\n    spec:\n      domain:\n        memory:\n          guest: 2Gi\n        devices: {}\n";
        let p = read_pods_str(vm, "vm.yaml").unwrap().remove(0);
        assert_eq!(p.vm_memory.unwrap().guest.as_deref(), Some("2Gi"));
        let bad = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm\nspec:\n  domain:\n    memory:\n      guest: lots\n    devices: {}\n";
        assert_eq!(
            read_pods_str(bad, "b.yaml").unwrap().remove(0).vm_memory,
            None
        );
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: []\n";
        assert_eq!(
            read_pods_str(pod, "p.yaml").unwrap().remove(0).vm_memory,
            None
        );
    }
    use super::*;

    fn one(s: &str) -> PodInfo {
        let mut v = read_pods_str(s, "t").unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0)
    }

    #[test]
    fn spec_problems_are_typed_once_per_field_and_resource() {
        let p = one(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{
            "containers":[
              {"name":"a","resources":{"requests":{"nvidia.com/gpu":"2"},"limits":{"nvidia.com/gpu":"1"}}},
              {"name":"b","resources":{"requests":{"nvidia.com/GA102GL_A10":"1","cpu":"2"},"limits":{"cpu":"1"}}}]}}"#,
        );
        let path = |i: usize| format!("spec.containers[{i}]");
        assert_eq!(
            p.spec_problems,
            [
                SpecProblem::RequestDiffersFromLimit {
                    path: path(0),
                    resource: "nvidia.com/gpu".into(),
                    requested: "2".into(),
                    limit: "1".into(),
                    counted: 2,
                },
                SpecProblem::RequestWithoutLimit {
                    path: path(1),
                    resource: "nvidia.com/GA102GL_A10".into(),
                    requested: "1".into(),
                },
                SpecProblem::RequestAboveLimit {
                    path: path(1),
                    resource: "cpu".into(),
                    requested: "2".into(),
                    limit: "1".into(),
                },
            ]
        );
        let sentences: Vec<String> = p.spec_problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            sentences,
            [
                "spec.containers[0]: nvidia.com/gpu requests \"2\" ≠ limits \"1\": the API server would reject this pod (Kubernetes requires requests = limits for an extended resource when both are set); the 2 counted here is from spec.containers[0].resources.requests",
                "spec.containers[1]: nvidia.com/GA102GL_A10 requests \"1\" without a limit: the API server refuses the pod (spec.containers[1].resources.limits: Required value: Limit must be set for non overcommitable resources); an extended resource is set in limits, requests left out or equal",
                "spec.containers[1]: cpu requests \"2\" > limits \"1\": the API server refuses the pod (spec.containers[1].resources.requests[cpu]: must be less than or equal to cpu limit)",
            ]
        );
        assert_eq!(p.spec_problems[1].path(), "spec.containers[1]");
        assert_eq!(p.spec_problems[2].resource(), "cpu");
        // The requests number counts; the problem is still noted once per field.
        assert_eq!(p.requests["nvidia.com/gpu"], 2);
    }

    #[test]
    fn limits_default_requests_and_sidecars() {
        let p = one(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{
            "initContainers":[
              {"name":"side","restartPolicy":"Always","resources":{"limits":{"example.com/x":"1"}}},
              {"name":"init","resources":{"requests":{"example.com/x":"3","nvidia.com/gpu":"2"},"limits":{"nvidia.com/gpu":"2"}}}],
            "containers":[{"name":"a","resources":{"limits":{"nvidia.com/gpu":"1","cpu":"500m"}}},
                          {"name":"b","resources":{"requests":{"nvidia.com/gpu":1},"limits":{"nvidia.com/gpu":1}}}],
            "overhead":{"example.com/x":"1","memory":"10Mi"}}}"#,
        );
        // gpu: max(1+1, 2) = 2; x: max(0+1 sidecar, 3+1) = 4, + overhead 1 = 5
        assert_eq!(p.requests["nvidia.com/gpu"], 2);
        assert_eq!(p.requests["example.com/x"], 5);
        assert!(!p.requests.contains_key("cpu"));
        assert_eq!(p.key(), "ns/p");
        assert!(p.is_unbound());
    }

    #[test]
    fn sidecar_started_after_init_does_not_add_to_it() {
        let p = one(r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
            "initContainers":[
              {"name":"init","resources":{"limits":{"nvidia.com/gpu":"2"}}},
              {"name":"side","restartPolicy":"Always","resources":{"limits":{"nvidia.com/gpu":"1"}}}],
            "containers":[{"name":"a","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#);
        // regular 1 + sidecar 1 = 2; init 2 (no sidecar before it) = 2
        assert_eq!(p.requests["nvidia.com/gpu"], 2);
        assert_eq!(p.namespace, "default");
    }

    #[test]
    fn yaml_vmi_devices() {
        let p = one(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm\n  namespace: gpu-vm\nspec:\n  nodeSelector:\n    a: b\n  domain:\n    devices:\n      gpus:\n      - name: g1\n        deviceName: nvidia.com/GRID_T4_2Q\n      - name: g2\n        deviceName: nvidia.com/GRID_T4_2Q\n",
        );
        assert_eq!(p.kind, ObjectKind::VirtualMachineInstance);
        assert_eq!(p.requests["nvidia.com/GRID_T4_2Q"], 2);
        assert_eq!(p.sources[0].field, "spec.domain.devices.gpus[0].deviceName");
        assert_eq!(p.node_selector["a"], "b");
    }

    #[test]
    fn bad_input_names_field() {
        for (s, want) in [
            ("", "t: empty input"),
            (
                r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"1.5"}}}]}}]}"#,
                r#"t: items[0] (n/p): spec.containers[0].resources.limits["nvidia.com/gpu"]: "1.5" is not a whole number"#,
            ),
            (
                r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n"}}]}"#,
                "items[0] (default/n): kind \"Node\" is not a Pod",
            ),
            (
                r#"{"kind":"Pod","metadata":{}}"#,
                "t: metadata.name: missing",
            ),
            (
                r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"tolerations":{}}}"#,
                "spec.tolerations: expected a list",
            ),
            ("{ nope", "t: "),
            ("kind: Pod\nmetadata: [1\n", "t: "),
        ] {
            let e = read_pods_str(s, "t").unwrap_err();
            let m = e.to_string();
            assert!(e.is_input(), "{e}");
            assert!(m.contains(want), "{s:?} → {m}");
            assert!(!m.contains('\n'));
        }
    }

    #[test]
    fn an_api_list_names_its_operand_pods_as_the_whole_items_do() {
        // The live list keeps what `operands::from_value` reads, so the operand pods found
        // in the pruned items are those found in the whole ones: ready, crash-looping (an
        // init container's waiting reason and restarts), not ready with the pod's reason,
        // one being deleted (none), one unbound (none), and plain pods (none).
        let items = [
            r#"{"metadata":{"name":"nvidia-driver-daemonset-a","namespace":"gpu-operator",
                "labels":{"app":"nvidia-driver-daemonset","pod-template-generation":"1"},
                "annotations":{"big":"x"},"managedFields":[{"manager":"m"}]},
              "spec":{"nodeName":"w1","containers":[{"name":"d","image":"i"}]},
              "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
                "containerStatuses":[{"name":"d","restartCount":2,"image":"i",
                  "state":{"running":{"startedAt":"t"}}}]}}"#,
            r#"{"metadata":{"name":"gfd-b","namespace":"gpu-operator",
                "labels":{"app":"gpu-feature-discovery"}},
              "spec":{"nodeName":"w2","containers":[{"name":"g"}]},
              "status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}],
                "initContainerStatuses":[{"restartCount":7,
                  "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off"}}}],
                "containerStatuses":[{"restartCount":1,
                  "state":{"waiting":{"reason":"PodInitializing"}}}]}}"#,
            r#"{"metadata":{"name":"vfio-c","namespace":"gpu-operator",
                "labels":{"name":"nvidia-vfio-manager"}},
              "spec":{"nodeName":"w3","containers":[]},
              "status":{"phase":"Pending","reason":"Evicted"}}"#,
            r#"{"metadata":{"name":"nvidia-device-plugin-d","namespace":"gpu-operator",
                "labels":{"app":"nvidia-device-plugin-daemonset"},"deletionTimestamp":"t"},
              "spec":{"nodeName":"w1","containers":[]},"status":{"phase":"Running"}}"#,
            r#"{"metadata":{"name":"nvidia-dcgm-e","namespace":"gpu-operator",
                "labels":{"app":"nvidia-dcgm"}},"spec":{"containers":[]},
              "status":{"phase":"Pending"}}"#,
            r#"{"metadata":{"name":"web","namespace":"apps","labels":{"app":"web"}},
              "spec":{"nodeName":"w1","containers":[]},"status":{"phase":"Running"}}"#,
        ];
        let page = format!(
            r#"{{"kind":"PodList","metadata":{{}},"items":[{}]}}"#,
            items.join(",")
        );
        let listed = read_response(page.as_bytes(), "list pods").unwrap();
        assert_eq!(listed.pods.len(), 6);
        let whole: Vec<_> = items
            .iter()
            .filter_map(|i| crate::decode::operands::from_value(&serde_json::from_str(i).unwrap()))
            .collect();
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert_eq!(listed.operands, whole);
        assert_eq!(listed.operands[1].restarts, 8);
    }

    #[test]
    fn api_page_is_read_slim_with_its_continue_token() {
        let page = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"tok"},
            "items":[{"metadata":{"name":"a","namespace":"n","managedFields":[{"big":1}]},
                      "spec":{"nodeName":"w1","containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":"2"}}}]},
                      "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]}}]}"#;
        let Listed {
            pods,
            operands,
            next: token,
        } = read_response(&page[..], "list pods").unwrap();
        assert_eq!(token.as_deref(), Some("tok"));
        assert!(operands.is_empty());
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].key(), "n/a");
        assert_eq!(pods[0].node_name.as_deref(), Some("w1"));
        assert_eq!(pods[0].requests["nvidia.com/gpu"], 2);
        // only the scheduler's condition is kept
        assert_eq!(pods[0].conditions.len(), 1);
        assert_eq!(pods[0].conditions[0].type_, "PodScheduled");
        let one = read_response(
            &br#"{"kind":"Pod","metadata":{"name":"b"},"spec":{}}"#[..],
            "get pod",
        )
        .unwrap();
        assert_eq!((one.pods[0].name.as_str(), one.next), ("b", None));
        let e = read_response(
            &b"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{}}]}"[..],
            "list pods",
        )
        .unwrap_err();
        assert!(matches!(e, Error::Failed { .. }));
        assert_eq!(
            e.to_string(),
            "list pods: the API server's response: items[0]: metadata.name: missing"
        );
    }

    #[test]
    fn errors_name_the_field_even_from_the_parser() {
        for (s, want) in [
            (
                r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":1e400}}}]}}"#,
                "t: spec: containers: resources: limits: number out of range",
            ),
            (
                r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"a"}},{"kind":"Pod","metadata":[1]}]}"#,
                "t: items[1]: metadata: invalid type: sequence, expected an object",
            ),
            (
                r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"a","name":"b"}}]}"#,
                "t: items[0]: metadata: duplicate key \"name\"",
            ),
        ] {
            let m = read_pods_str(s, "t").unwrap_err().to_string();
            assert!(m.starts_with(want), "{s} → {m}");
        }
    }

    #[test]
    fn resource_claims_resolve_templates_through_status() {
        let p = one(r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
            "containers":[{"name":"a","resources":{"claims":[{"name":"gpu"}]}}],
            "resourceClaims":[{"name":"gpu","resourceClaimName":"shared-gpu"},
                              {"name":"vfio","resourceClaimTemplateName":"vfio-tmpl"},
                              {"name":"late","resourceClaimTemplateName":"t"}]},
            "status":{"resourceClaimStatuses":[{"name":"vfio","resourceClaimName":"p-vfio-8xk2c"}]}}"#);
        let names: Vec<_> = p.resource_claims.iter().map(|c| c.claim_name()).collect();
        assert_eq!(names, vec![Some("shared-gpu"), Some("p-vfio-8xk2c"), None]);
        assert_eq!(
            p.resource_claims[1].resource_claim_template_name.as_deref(),
            Some("vfio-tmpl")
        );
        let e = read_pods_str(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"resourceClaims":[{"resourceClaimName":"x"}]}}"#,
            "t",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("t: spec.resourceClaims[0].name: missing"),
            "{e}"
        );
    }

    #[test]
    fn extended_names() {
        assert!(is_extended_resource("nvidia.com/gpu"));
        assert!(!is_extended_resource("cpu"));
        assert!(!is_extended_resource("kubernetes.io/x"));
        assert!(!is_extended_resource("hugepages-2Mi"));
        assert!(!is_extended_resource("requests.nvidia.com/gpu"));
    }
}
