//! KubeVirt's `permittedHostDevices` against what the nodes advertise: the patch that
//! permits every advertised VM GPU name (`gpuwl kubevirt generate`), and the findings
//! where the CR and the nodes disagree (`gpuwl kubevirt check`). Pure functions over the
//! model; reading is in [`crate::decode::kubevirt`], printing in
//! [`crate::render::kubevirt`].
//!
//! The chain for a VM is longer than for a pod: workload label → operands → the name the
//! sandbox device plugin advertises → the same name in the KubeVirt (or HyperConverged)
//! CR's `permittedHostDevices` → the VMI's `gpus[]/hostDevices[].deviceName`. KubeVirt
//! refuses a VMI whose deviceName is not permitted (no virt-launcher pod, no scheduler
//! message), and never checks that a node advertises a permitted name
//! (docs/domain-facts.md §5).
//!
//! Sources:
//! - the names: NVIDIA/kubevirt-gpu-device-plugin `pkg/device_plugin/device_plugin.go`
//!   (`getDeviceName`: a passthrough GPU is advertised under its sanitized `pci.ids` name,
//!   or its lower-case hex device id; `readVgpuIDFromFile`: a vGPU under its mdev type name
//!   with whitespace → `_`); see [`crate::model::pciids`] and
//!   [`crate::model::kubevirt::permit_entries`] for the reverse rules;
//! - the CR fields: kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`
//!   (`PermittedHostDevices`: `pciHostDevices[]` {`pciVendorSelector`, `resourceName`,
//!   `externalResourceProvider`}, `mediatedDevices[]` {`mdevNameSelector`, ...}) and
//!   kubevirt/hyperconverged-cluster-operator `api/v1beta1/hyperconverged_types.go`
//!   (`spec.permittedHostDevices`, the PCI selector named `pciDeviceSelector`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::names;
use crate::decode::kubevirt::CurrentCr;
use crate::error::Result;
use crate::model::advertise::{gpu_resources, node_units};
use crate::model::kubevirt::{
    HostDevicesSource, MediatedDevice, PciHostDevice, PermitEntry, PermittedHostDevices, mdev_name,
    permit_entries,
};
use crate::model::node::NodeInfo;
use crate::model::pciids;
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::workload::LABEL_KEY;

/// One node advertising a name, with its allocatable units (> 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeUnits {
    /// `metadata.name`.
    pub node: String,
    /// Allocatable units of the name on that node.
    pub allocatable: i64,
}

/// The GPU names the nodes advertise (allocatable > 0; stale zeros are not offers), by
/// name, each with the nodes that advertise it (sorted by node name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advertised {
    /// Every advertised GPU name (container GPUs, passthrough models, vGPU types).
    pub names: BTreeMap<String, Vec<NodeUnits>>,
}

impl Advertised {
    /// Collects what `nodes` advertise.
    ///
    /// Errors: [`crate::error::Error::Input`] naming the node and field when a GPU
    /// quantity is not a whole number.
    pub fn of(nodes: &[NodeInfo]) -> Result<Advertised> {
        let mut names: BTreeMap<String, Vec<NodeUnits>> = BTreeMap::new();
        for n in nodes {
            for r in gpu_resources(n) {
                let (_, alloc) = node_units(n, r)?;
                if alloc > 0 {
                    names.entry(r.to_owned()).or_default().push(NodeUnits {
                        node: n.name.clone(),
                        allocatable: alloc,
                    });
                }
            }
        }
        for v in names.values_mut() {
            v.sort_by(|a, b| a.node.cmp(&b.node));
        }
        Ok(Advertised { names })
    }

    /// The names a VM asks KubeVirt for: passthrough models and vGPU types
    /// ([`is_vm_gpu`]), sorted.
    pub fn vm_names(&self) -> impl Iterator<Item = &str> {
        self.names
            .keys()
            .map(String::as_str)
            .filter(|n| is_vm_gpu(n))
    }

    /// Whether any node advertises `resource`.
    pub fn contains(&self, resource: &str) -> bool {
        self.names.contains_key(resource)
    }

    /// `gpu-vg-1 (4), gpu-vg-2 (2)`: the nodes that advertise `resource` and how many each.
    pub(crate) fn nodes_text(&self, resource: &str) -> String {
        self.names
            .get(resource)
            .map(|v| {
                v.iter()
                    .map(|n| format!("{} ({})", n.node, n.allocatable))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }
}

/// Whether `resource` is a name a KubeVirt VM asks for as a GPU: a passthrough device model
/// ([`ResourceClass::PassthroughModel`]) or a vGPU type ([`ResourceClass::VgpuType`]).
pub(crate) fn is_vm_gpu(resource: &str) -> bool {
    matches!(
        classify(resource),
        ResourceClass::PassthroughModel | ResourceClass::VgpuType
    )
}

// ---------------------------------------------------------------------------------------
// generate

/// The `permittedHostDevices` that permit every advertised VM GPU name with
/// `externalResourceProvider: true` (the GPU Operator's sandbox device plugin serves them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `pciHostDevices[]`, sorted by resource name then selector; one entry per PCI id.
    pub pci_host_devices: Vec<PciHostDevice>,
    /// `mediatedDevices[]`, sorted by resource name.
    pub mediated_devices: Vec<MediatedDevice>,
    /// One line each for what the patch could not express plainly: a name that stands for
    /// several PCI ids, a passthrough name with no known PCI id. Sorted.
    pub notes: Vec<String>,
}

/// The entries permitting every name in `adv.vm_names()` (see
/// [`permit_entries`]: passthrough model → one `pciHostDevices` entry per PCI id of its
/// sanitized `pci.ids` name or hex fallback; vGPU type → one `mediatedDevices` entry whose
/// `mdevNameSelector` is the type name with `_` → space).
pub fn generate(adv: &Advertised) -> Plan {
    let mut plan = Plan {
        pci_host_devices: Vec::new(),
        mediated_devices: Vec::new(),
        notes: Vec::new(),
    };
    for name in adv.vm_names() {
        let entries = permit_entries(name);
        let pci: Vec<&PciHostDevice> = entries
            .iter()
            .filter_map(|e| match e {
                PermitEntry::Pci(d) => Some(d),
                PermitEntry::Mdev(_) => None,
            })
            .collect();
        if pci.len() > 1 {
            plan.notes.push(format!(
                "{name}: the name stands for {} PCI devices ({}); one pciHostDevices entry each",
                pci.len(),
                pci.iter()
                    .map(|d| describe_selector(&d.selector))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if entries.is_empty() {
            plan.notes.push(format!(
                "{name}: no PCI device id is known for this name (not in gpuwl's pci.ids, not a \
                 hex id); add its pciHostDevices entry by hand (lspci -nn on {} shows the id)",
                adv.nodes_text(name)
            ));
        }
        for e in entries {
            match e {
                PermitEntry::Pci(d) => plan.pci_host_devices.push(d),
                PermitEntry::Mdev(d) => plan.mediated_devices.push(d),
            }
        }
    }
    plan.pci_host_devices
        .sort_by(|a, b| (&a.resource_name, &a.selector).cmp(&(&b.resource_name, &b.selector)));
    plan.mediated_devices
        .sort_by(|a, b| (&a.resource_name, &a.selector).cmp(&(&b.resource_name, &b.selector)));
    plan.notes.sort();
    plan
}

/// How `kubevirt generate` writes its output so that applying it never drops an entry
/// the CR already has (a JSON merge patch, RFC 7386, replaces a list whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PatchKind {
    /// A merge patch (`kubectl patch --type merge`) carrying each changed list whole: the
    /// CR's current entries as read, unchanged and first, then the new ones; with the CR's
    /// `metadata.resourceVersion`, so the API server refuses it (409 Conflict) if the CR
    /// changed since it was read. Needs the current CR.
    #[default]
    Merged,
    /// JSON-patch `add` operations (`kubectl patch --type json`, RFC 6902) that append the
    /// new entries (`…/pciHostDevices/-`); with the current CR, a `test` of its
    /// `resourceVersion` first and the missing lists created; without it, appends only
    /// (the patch fails, changing nothing, where a list does not exist yet).
    JsonAdd,
}

/// The output of `kubevirt generate` for one CR: a patch that only adds.
#[derive(Debug, Clone, PartialEq)]
pub struct SafePatch {
    /// The kind of patch.
    pub kind: PatchKind,
    /// The merge patch (an object) or the JSON-patch operations (an array).
    pub value: serde_json::Value,
    /// Entries the CR already holds, kept (0 when the CR is unknown).
    pub kept: usize,
    /// Entries the patch adds.
    pub added: usize,
    /// Advertised names the CR already lists (any entry, either list): left as they are
    /// (`kubevirt check` judges their selectors).
    pub already: Vec<String>,
}

/// `["spec","configuration","permittedHostDevices"]` or `["spec","permittedHostDevices"]`.
fn list_path(target: HostDevicesSource) -> &'static [&'static str] {
    match target {
        HostDevicesSource::KubeVirt => &["spec", "configuration", "permittedHostDevices"],
        HostDevicesSource::HyperConverged => &["spec", "permittedHostDevices"],
    }
}

/// The new entries of `plan` as JSON, per list (`pciHostDevices`, `mediatedDevices`),
/// leaving out names `current` lists already.
fn new_entries(
    plan: &Plan,
    target: HostDevicesSource,
    current: Option<&PermittedHostDevices>,
) -> ([(&'static str, Vec<serde_json::Value>); 2], Vec<String>) {
    let listed = |r: &str| current.is_some_and(|c| c.permits(r));
    let mut already: Vec<String> = Vec::new();
    let mut note = |r: &str| {
        if !already.iter().any(|a| a == r) {
            already.push(r.to_owned());
        }
    };
    let mut pci = Vec::new();
    for d in &plan.pci_host_devices {
        if listed(&d.resource_name) {
            note(&d.resource_name);
            continue;
        }
        let mut m = serde_json::Map::new();
        m.insert(pci_field(target).into(), d.selector.clone().into());
        m.insert("resourceName".into(), d.resource_name.clone().into());
        m.insert(
            "externalResourceProvider".into(),
            d.external_resource_provider.into(),
        );
        pci.push(serde_json::Value::Object(m));
    }
    let mut mdev = Vec::new();
    for d in &plan.mediated_devices {
        if listed(&d.resource_name) {
            note(&d.resource_name);
            continue;
        }
        mdev.push(serde_json::json!({
            "mdevNameSelector": d.selector,
            "resourceName": d.resource_name,
            "externalResourceProvider": d.external_resource_provider,
        }));
    }
    (
        [("pciHostDevices", pci), ("mediatedDevices", mdev)],
        already,
    )
}

/// The JSON pointer of `segments` (RFC 6901 escaping).
fn pointer(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The patch that adds `plan`'s entries to the CR without dropping any it has
/// ([`PatchKind`]). `current` is the CR as read (`None`: unknown, only
/// [`PatchKind::JsonAdd`] can do without it: appends only).
///
/// - merged ([`PatchKind::Merged`]): `{"metadata":{"resourceVersion"}, "spec":{…:{"pciHostDevices":
///   [current…, new…]}}}`, a list only when it gets new entries; `{}` when nothing is new.
/// - JSON-patch ([`PatchKind::JsonAdd`]): `[{"op":"test","path":"/metadata/resourceVersion",…},
///   {"op":"add","path":"…/pciHostDevices/-","value":{…}}, …]`; a missing list (or parent)
///   is created by one `add` of the missing subtree; `[]` when nothing is new.
///
/// Names the CR lists already (either list, any selector) get no entry: `kubevirt check`
/// judges existing entries, this only adds.
pub fn safe_patch(
    plan: &Plan,
    target: HostDevicesSource,
    kind: PatchKind,
    current: Option<&CurrentCr>,
) -> SafePatch {
    use serde_json::{Map, Value, json};
    let (lists, already) = new_entries(plan, target, current.map(|c| &c.devices));
    let kept = current.map_or(0, |c| {
        c.devices.pci_host_devices.len() + c.devices.mediated_devices.len()
    });
    let added = lists.iter().map(|(_, v)| v.len()).sum();
    let base = list_path(target);
    let resource_version = current
        .and_then(|c| c.object.pointer("/metadata/resourceVersion"))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty());
    let value = match kind {
        PatchKind::Merged => {
            let mut patch = Value::Object(Map::new());
            for (list, new) in &lists {
                if new.is_empty() {
                    continue;
                }
                let mut path = base.to_vec();
                path.push(list);
                let mut whole: Vec<Value> = current
                    .and_then(|c| c.object.pointer(&pointer(&path)))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                whole.extend(new.iter().cloned());
                let mut at = &mut patch;
                for seg in base {
                    at = at
                        .as_object_mut()
                        .expect("built as objects")
                        .entry(*seg)
                        .or_insert_with(|| Value::Object(Map::new()));
                }
                at.as_object_mut()
                    .expect("built as objects")
                    .insert((*list).into(), Value::Array(whole));
            }
            if let (Some(rv), Some(m)) = (resource_version, patch.as_object_mut())
                && !m.is_empty()
            {
                m.insert("metadata".into(), json!({"resourceVersion": rv}));
            }
            patch
        }
        PatchKind::JsonAdd => {
            let mut ops: Vec<Value> = Vec::new();
            // What the CR holds as the operations go (a list created by one op is
            // appended to by the next).
            let mut state = current.map(|c| c.object.clone());
            for (list, new) in &lists {
                if new.is_empty() {
                    continue;
                }
                let mut path = base.to_vec();
                path.push(list);
                let Some(st) = state.as_mut() else {
                    for e in new {
                        ops.push(json!({"op": "add", "path": format!("{}/-", pointer(&path)), "value": e}));
                    }
                    continue;
                };
                // The first missing segment, if any.
                let missing =
                    (1..=path.len()).find(|n| st.pointer(&pointer(&path[..*n])).is_none());
                match missing {
                    None => {
                        for e in new {
                            ops.push(json!({"op": "add", "path": format!("{}/-", pointer(&path)), "value": e}));
                        }
                        if let Some(Value::Array(a)) = st.pointer_mut(&pointer(&path)) {
                            a.extend(new.iter().cloned());
                        }
                    }
                    Some(n) => {
                        let mut subtree = Value::Array(new.clone());
                        for seg in path[n..].iter().rev() {
                            let mut m = Map::new();
                            m.insert((*seg).to_owned(), subtree);
                            subtree = Value::Object(m);
                        }
                        ops.push(
                            json!({"op": "add", "path": pointer(&path[..n]), "value": subtree}),
                        );
                        if let Some(Value::Object(m)) = st.pointer_mut(&pointer(&path[..n - 1])) {
                            m.insert(path[n - 1].into(), subtree);
                        }
                    }
                }
            }
            if let Some(rv) = resource_version
                && !ops.is_empty()
            {
                ops.insert(
                    0,
                    json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
                );
            }
            Value::Array(ops)
        }
    };
    SafePatch {
        kind,
        value,
        kept,
        added,
        already,
    }
}

/// `10DE:2236 (GA102GL [A10])`, or the selector alone when `pci.ids` does not know it.
fn describe_selector(selector: &str) -> String {
    match parse_selector(selector).and_then(|(v, d)| {
        (v == pciids::NVIDIA_VENDOR_ID)
            .then(|| pciids::by_id(d))
            .flatten()
    }) {
        Some(dev) => format!("{selector} ({})", dev.pci_name),
        None => selector.to_owned(),
    }
}

/// `10DE:2236` (any case, surrounding blanks ignored) → (0x10de, 0x2236).
pub(crate) fn parse_selector(selector: &str) -> Option<(u16, u16)> {
    let (v, d) = selector.trim().split_once(':')?;
    let hex = |s: &str| {
        (s.len() == 4)
            .then(|| u16::from_str_radix(s, 16).ok())
            .flatten()
    };
    Some((hex(v)?, hex(d)?))
}

// ---------------------------------------------------------------------------------------
// check

/// Stable codes of `gpuwl kubevirt check` findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// Error: a node advertises the passthrough model or vGPU type, but the CR does not
    /// permit it, so KubeVirt refuses every VMI that asks for it.
    AdvertisedNotPermitted,
    /// Error: the CR lists the name more than once (other than one `pciHostDevices` entry
    /// per PCI id of a passthrough name).
    DuplicateResourceName,
    /// Error: `externalResourceProvider` is false or absent for a name a GPU node
    /// advertises: KubeVirt starts its own device plugin for the devices the GPU
    /// Operator's sandbox device plugin already serves.
    InternalProviderForOperatorResource,
    /// Error: the selector does not select the devices the name stands for: the
    /// `pciVendorSelector` (`pciDeviceSelector`) is not the name's PCI id, the
    /// `mdevNameSelector` is not its mdev type, or the entry is in the wrong list.
    SelectorMismatch,
    /// Warning: the CR permits a GPU name no node advertises: a VMI asking for it passes
    /// KubeVirt and its launcher pod then waits `Insufficient <name>`.
    PermittedNotAdvertised,
    /// Warning: the CR has no `permittedHostDevices` at all, so KubeVirt vets no name:
    /// virt-controller renders a launcher pod for every `deviceName`, a typo's too, and
    /// refuses none (kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`,
    /// `validatePermittedHostDevices`, v1.7.0, checks only a non-nil list). Nothing the
    /// nodes advertise is refused, so it is not an error; the suggestion is `gpuwl
    /// kubevirt generate`.
    NothingVetted,
    /// Error: the CR permits a container GPU name (`nvidia.com/gpu`, a MIG or shared name):
    /// the GPU Operator's container device plugin serves it on nodes whose GPUs are bound
    /// to the NVIDIA driver and hands KubeVirt no `PCI_RESOURCE_<NAME>` /
    /// `MDEV_PCI_RESOURCE_<NAME>` device (kubevirt/kubevirt v1.7.0
    /// `docs/devel/host-devices-and-device-plugins.md`), so a VM asking for it gets a
    /// launcher pod that is scheduled and cannot start.
    ContainerNamePermitted,
}

impl Code {
    /// The stable text code, e.g. `advertised-not-permitted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::AdvertisedNotPermitted => "advertised-not-permitted",
            Code::DuplicateResourceName => "duplicate-resource-name",
            Code::InternalProviderForOperatorResource => "internal-provider-for-operator-resource",
            Code::SelectorMismatch => "selector-mismatch",
            Code::PermittedNotAdvertised => "permitted-not-advertised",
            Code::NothingVetted => "nothing-vetted",
            Code::ContainerNamePermitted => "container-name-permitted",
        }
    }

    /// The severity every finding with this code has.
    pub fn severity(self) -> Severity {
        match self {
            Code::PermittedNotAdvertised | Code::NothingVetted => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// How bad a finding is: only errors make `gpuwl kubevirt check` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The VM path is broken for this name.
    Error,
    /// Suspicious, but nothing that is advertised is refused.
    Warning,
}

impl Severity {
    /// `ERROR` / `WARNING`, the first word of a text line.
    pub fn upper(self) -> &'static str {
        match self {
            Severity::Error => "ERROR",
            Severity::Warning => "WARNING",
        }
    }
}

/// One finding about one resource name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable code.
    pub code: Code,
    /// [`Code::severity`].
    pub severity: Severity,
    /// The resource name, e.g. `nvidia.com/NVIDIA_A10-12Q`.
    pub resource: String,
    /// What is wrong, naming the CR entry or the nodes.
    pub message: String,
    /// What to do, or the advertised name probably meant; `null` when there is nothing
    /// to suggest.
    pub suggestion: Option<String>,
}

/// Counts of a [`Report`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Passthrough models and vGPU types the nodes advertise.
    pub advertised: usize,
    /// Of those, how many the CR permits.
    pub permitted_advertised: usize,
    /// Entries in the CR (`pciHostDevices` + `mediatedDevices`).
    pub entries: usize,
    /// Error findings.
    pub errors: usize,
    /// Warning findings.
    pub warnings: usize,
}

/// The outcome of [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Which CR kind the list came from.
    pub source: HostDevicesSource,
    /// `namespace/name` of the CR.
    pub object: String,
    /// Whether the CR has `permittedHostDevices` at all.
    pub present: bool,
    /// Findings, sorted by resource name, then code.
    pub findings: Vec<Finding>,
    /// Counts.
    pub summary: Summary,
}

impl Report {
    /// Whether there is no error finding.
    pub fn ok(&self) -> bool {
        self.summary.errors == 0
    }

    /// `KubeVirt kubevirt/kubevirt` or `HyperConverged openshift-cnv/kubevirt-hyperconverged`.
    pub fn cr(&self) -> String {
        format!("{} {}", kind_name(self.source), self.object)
    }
}

/// `KubeVirt` or `HyperConverged`.
pub fn kind_name(source: HostDevicesSource) -> &'static str {
    match source {
        HostDevicesSource::KubeVirt => "KubeVirt",
        HostDevicesSource::HyperConverged => "HyperConverged",
    }
}

/// One entry of either list, for the checks that treat both alike.
struct Entry<'a> {
    /// `pciHostDevices[0]` or `mediatedDevices[1]`.
    at: String,
    pci: bool,
    selector: &'a str,
    resource: &'a str,
    external: bool,
}

fn entries(kv: &PermittedHostDevices) -> Vec<Entry<'_>> {
    let pci = kv.pci_host_devices.iter().enumerate().map(|(i, d)| Entry {
        at: format!("pciHostDevices[{i}]"),
        pci: true,
        selector: &d.selector,
        resource: &d.resource_name,
        external: d.external_resource_provider,
    });
    let mdev = kv.mediated_devices.iter().enumerate().map(|(i, d)| Entry {
        at: format!("mediatedDevices[{i}]"),
        pci: false,
        selector: &d.selector,
        resource: &d.resource_name,
        external: d.external_resource_provider,
    });
    pci.chain(mdev).collect()
}

/// The PCI selector field's name in `source`'s CR.
pub(crate) fn pci_field(source: HostDevicesSource) -> &'static str {
    match source {
        HostDevicesSource::KubeVirt => "pciVendorSelector",
        HostDevicesSource::HyperConverged => "pciDeviceSelector",
    }
}

fn entry_lines(resource: &str, source: HostDevicesSource) -> Option<String> {
    let e = permit_entries(resource);
    (!e.is_empty()).then(|| {
        e.iter()
            .map(|e| e.yaml_line(source))
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// Judges `kv` against `adv`. One finding per problem, per resource name:
///
/// - [`Code::AdvertisedNotPermitted`] for each advertised passthrough model or vGPU type
///   the CR does not list (exact, case-sensitive, as KubeVirt compares); the suggestion is
///   the entry to add ([`permit_entries`]);
/// - [`Code::PermittedNotAdvertised`] for each listed GPU name under `nvidia.com/` that no
///   node advertises, with the advertised names related to it as suggestion
///   ([`names::did_you_mean`]: case, `-`/`_`, same PCI device, vGPU prefix, typos);
/// - [`Code::InternalProviderForOperatorResource`] for each entry without
///   `externalResourceProvider: true` whose name a node advertises;
/// - [`Code::SelectorMismatch`] for each entry whose PCI selector (compared
///   case-insensitively) is not a PCI id of its name ([`pciids::advertised_ids`]), whose
///   `mdevNameSelector` is not its type ([`mdev_name`]), or that sits in the wrong list
///   (a vGPU type under `pciHostDevices`, a known device model under `mediatedDevices`);
///   names with no known PCI id are not judged;
/// - [`Code::DuplicateResourceName`] once per name listed more than once, except one
///   `pciHostDevices` entry per distinct PCI id.
///
/// Names outside `nvidia.com/` and non-GPU NVIDIA names are not judged.
pub fn check(adv: &Advertised, kv: &PermittedHostDevices) -> Report {
    let source = kv.source;
    let all = entries(kv);
    let mut permitted_names: Vec<&str> = all.iter().map(|e| e.resource).collect();
    permitted_names.sort_unstable();
    permitted_names.dedup();
    let judge = Judge {
        adv,
        kv,
        list: format!(
            "{} {} {}",
            kind_name(source),
            kv.object,
            if kv.present {
                source.path().to_owned()
            } else {
                format!("(no {}: no name is vetted)", source.path())
            }
        ),
        all,
        permitted_names,
    };
    let vm_names: Vec<&str> = adv.vm_names().collect();
    let (mut findings, permitted_advertised) = judge.advertised_not_permitted(&vm_names);
    findings.extend(judge.permitted_not_advertised());
    findings.extend(judge.entry_problems());
    findings.extend(judge.duplicates());
    findings
        .sort_by(|a, b| (&a.resource, a.code, &a.message).cmp(&(&b.resource, b.code, &b.message)));
    let summary = Summary {
        advertised: vm_names.len(),
        permitted_advertised,
        entries: judge.all.len(),
        errors: findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count(),
        warnings: findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count(),
    };
    Report {
        source,
        object: kv.object.clone(),
        present: kv.present,
        findings,
        summary,
    }
}

/// A finding of `code` (at the code's severity) on `resource`.
fn finding(code: Code, resource: &str, message: String, suggestion: Option<String>) -> Finding {
    Finding {
        code,
        severity: code.severity(),
        resource: resource.to_owned(),
        message,
        suggestion,
    }
}

/// Whether [`check`] judges a name: a GPU name under `nvidia.com/`.
fn judged(r: &str) -> bool {
    r.starts_with(NVIDIA_PREFIX) && classify(r).is_gpu()
}

/// What [`check`]'s rules read: the advertised names, the CR, the list named in messages
/// (`KubeVirt ns/name spec.configuration.permittedHostDevices`), its entries and the
/// distinct names they permit (sorted).
struct Judge<'a> {
    adv: &'a Advertised,
    kv: &'a PermittedHostDevices,
    list: String,
    all: Vec<Entry<'a>>,
    permitted_names: Vec<&'a str>,
}

impl Judge<'_> {
    /// `KubeVirt ns/name` of the CR judged.
    fn list_cr(&self) -> String {
        format!("{} {}", kind_name(self.kv.source), self.kv.object)
    }

    /// [`Code::AdvertisedNotPermitted`] for each of `vm_names` the CR does not permit, and
    /// how many of them it does permit.
    fn advertised_not_permitted(&self, vm_names: &[&str]) -> (Vec<Finding>, usize) {
        let (adv, source) = (self.adv, self.kv.source);
        let mut findings = Vec::new();
        let mut permitted_advertised = 0;
        if !self.kv.present {
            // Nothing is refused: one warning for the list, none per name.
            if !vm_names.is_empty() {
                findings.push(finding(
                    Code::NothingVetted,
                    source.path(),
                    format!(
                        "{} has no {}: KubeVirt vets no deviceName and refuses none, so the {} name(s) the nodes advertise ({}) pass, and so does a typo of one (its virt-launcher pod is then Pending with no node to take it)",
                        self.list_cr(),
                        source.path(),
                        vm_names.len(),
                        vm_names.join(", ")
                    ),
                    Some(
                        "gpuwl kubevirt generate prints the patch that permits exactly the advertised names"
                            .to_owned(),
                    ),
                ));
            }
            return (findings, 0);
        }
        for &name in vm_names {
            if !self.kv.refuses(name) {
                permitted_advertised += 1;
                continue;
            }
            let near: Vec<String> = names::did_you_mean(
                name,
                self.permitted_names
                    .iter()
                    .copied()
                    .filter(|p| !adv.contains(p)),
            )
            .into_iter()
            .filter(|s| s.relation.same_hardware())
            .map(|s| format!("{} ({})", s.name, s.why()))
            .collect();
            let fix = match entry_lines(name, source) {
                Some(lines) => format!("add to {}: {lines}", source.path()),
                None => format!(
                    "add a pciHostDevices entry with the device's PCI id ({}: \"10DE:XXXX\"), \
                     resourceName {name}, externalResourceProvider: true",
                    pci_field(source)
                ),
            };
            let fix = if near.is_empty() {
                fix
            } else {
                format!(
                    "{fix} (the CR lists {} instead: correct that entry's resourceName)",
                    near.join(", ")
                )
            };
            let what =
                "KubeVirt refuses a VMI that asks for it, and no virt-launcher pod is created";
            findings.push(finding(
                Code::AdvertisedNotPermitted,
                name,
                format!(
                    "advertised by {} but not permitted in {}: {what}",
                    adv.nodes_text(name),
                    self.list
                ),
                Some(fix),
            ));
        }
        (findings, permitted_advertised)
    }

    /// [`Code::PermittedNotAdvertised`] for each judged permitted name no node advertises.
    fn permitted_not_advertised(&self) -> Vec<Finding> {
        let vm_advertised: Vec<&str> = self.adv.names.keys().map(String::as_str).collect();
        let mut findings = Vec::new();
        for &name in &self.permitted_names {
            if !judged(name)
                || self.adv.contains(name)
                || classify(name) == ResourceClass::ContainerGpu
            {
                continue;
            }
            let at: Vec<&str> = self
                .all
                .iter()
                .filter(|e| e.resource == name)
                .map(|e| e.at.as_str())
                .collect();
            let suggestions = names::did_you_mean(name, vm_advertised.iter().copied());
            let suggestion = (!suggestions.is_empty()).then(|| {
                format!(
                    "did you mean {}?",
                    suggestions
                        .iter()
                        .map(|s| format!("{} ({})", s.name, s.why()))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )
            });
            findings.push(finding(
                Code::PermittedNotAdvertised,
                name,
                format!(
                    "permitted ({}) but no node advertises it (allocatable > 0): KubeVirt accepts a \
                     VMI that asks for it, and its virt-launcher pod stays Pending \
                     (Insufficient {name})",
                    at.join(", ")
                ),
                suggestion,
            ));
        }
        findings
    }

    /// Per judged entry: [`Code::InternalProviderForOperatorResource`] when it lacks
    /// `externalResourceProvider: true` for an advertised name, and
    /// [`Code::SelectorMismatch`] ([`selector_problem`]).
    fn entry_problems(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        for e in &self.all {
            if !judged(e.resource) {
                continue;
            }
            if classify(e.resource) == ResourceClass::ContainerGpu {
                findings.push(self.container_name_permitted(e));
                continue;
            }
            if !e.external && self.adv.contains(e.resource) {
                findings.push(finding(
                    Code::InternalProviderForOperatorResource,
                    e.resource,
                    format!(
                        "{} has externalResourceProvider false or absent, yet {} advertise it \
                         through the GPU Operator's sandbox device plugin: KubeVirt starts its own \
                         device plugin for the same devices",
                        e.at,
                        self.adv.nodes_text(e.resource)
                    ),
                    Some(format!("set externalResourceProvider: true in {}", e.at)),
                ));
            }
            if let Some((message, suggestion)) = selector_problem(e, self.kv.source) {
                findings.push(finding(
                    Code::SelectorMismatch,
                    e.resource,
                    message,
                    Some(suggestion),
                ));
            }
        }
        findings
    }

    /// [`Code::ContainerNamePermitted`] for an entry permitting a container GPU name; the
    /// suggestion names the VM names the nodes advertise, else a relabel.
    fn container_name_permitted(&self, e: &Entry<'_>) -> Finding {
        let vm_names: Vec<&str> = self.adv.vm_names().collect();
        let instead = if vm_names.is_empty() {
            format!(
                "relabel a GPU node for VMs ({LABEL_KEY}=vm-passthrough or vm-vgpu) and permit the name it advertises"
            )
        } else {
            format!("VMs request {}", vm_names.join(" or "))
        };
        finding(
            Code::ContainerNamePermitted,
            e.resource,
            format!(
                "{} permits {}, a container GPU name: the container device plugin serves it on nodes whose GPUs are bound to the NVIDIA driver and hands KubeVirt no PCI_RESOURCE_/MDEV_PCI_RESOURCE_ device, so a VM asking for it gets a virt-launcher pod that is scheduled and cannot start",
                e.at, e.resource
            ),
            Some(format!("remove {}; {instead}", e.at)),
        )
    }

    /// [`Code::DuplicateResourceName`] once per name listed more than once, except one
    /// `pciHostDevices` entry per distinct PCI id (compared upper-cased).
    fn duplicates(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        for &name in &self.permitted_names {
            let same: Vec<&Entry> = self.all.iter().filter(|e| e.resource == name).collect();
            if same.len() < 2 {
                continue;
            }
            let mdevs = same.iter().filter(|e| !e.pci).count();
            let mut pci_ids: Vec<String> = same
                .iter()
                .filter(|e| e.pci)
                .map(|e| e.selector.trim().to_uppercase())
                .collect();
            let n_pci = pci_ids.len();
            pci_ids.sort();
            pci_ids.dedup();
            let duplicated = mdevs > 1 || (mdevs > 0 && n_pci > 0) || pci_ids.len() < n_pci;
            if !duplicated {
                continue;
            }
            findings.push(finding(
                Code::DuplicateResourceName,
                name,
                format!(
                    "listed {} times ({}); a name needs one mediatedDevices entry, or one \
                     pciHostDevices entry per PCI device id",
                    same.len(),
                    same.iter()
                        .map(|e| e.at.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some(match entry_lines(name, self.kv.source) {
                    Some(lines) => format!("keep only {lines}"),
                    None => "keep one entry per PCI device id".to_owned(),
                }),
            ));
        }
        findings
    }
}

/// The selector-mismatch of one entry, if any: (message, suggestion).
fn selector_problem(e: &Entry, source: HostDevicesSource) -> Option<(String, String)> {
    let short = e.resource.strip_prefix(NVIDIA_PREFIX)?;
    let class = classify(e.resource);
    let ids = pciids::advertised_ids(short);
    let field = if e.pci {
        pci_field(source)
    } else {
        "mdevNameSelector"
    };
    if e.pci && class == ResourceClass::VgpuType {
        let mdev = mdev_name(e.resource)?;
        return Some((
            format!(
                "{} lists a vGPU type under pciHostDevices ({field} {:?}): a vGPU is a mediated \
                 device, selected by its mdev type name",
                e.at, e.selector
            ),
            format!(
                "move it to mediatedDevices: {{mdevNameSelector: \"{mdev}\", resourceName: {}, \
                 externalResourceProvider: true}}",
                e.resource
            ),
        ));
    }
    if !e.pci && class == ResourceClass::PassthroughModel && !ids.is_empty() {
        return Some((
            format!(
                "{} lists a passthrough device model under mediatedDevices (mdevNameSelector \
                 {:?}): a whole GPU is a PCI device, selected by its PCI id",
                e.at, e.selector
            ),
            format!(
                "move it to pciHostDevices: {}",
                entry_lines(e.resource, source).unwrap_or_default()
            ),
        ));
    }
    if e.pci && class == ResourceClass::PassthroughModel && !ids.is_empty() {
        let matches = parse_selector(e.selector)
            .is_some_and(|(v, d)| v == pciids::NVIDIA_VENDOR_ID && ids.contains(&d));
        if matches {
            return None;
        }
        let want: Vec<String> = ids
            .iter()
            .map(|id| describe_selector(&format!("10DE:{id:04X}")))
            .collect();
        let other = match parse_selector(e.selector) {
            Some((v, d)) if v == pciids::NVIDIA_VENDOR_ID => match pciids::by_id(d) {
                Some(dev) => format!(
                    " ({:?} is {}, advertised as {NVIDIA_PREFIX}{})",
                    e.selector,
                    dev.pci_name,
                    pciids::sanitize(dev.pci_name)
                ),
                None => String::new(),
            },
            Some(_) => String::new(),
            None => " (not a VVVV:DDDD hex PCI id)".to_owned(),
        };
        return Some((
            format!(
                "{} {field} {:?} is not the PCI id of {} ({}){other}",
                e.at,
                e.selector,
                e.resource,
                want.join(", ")
            ),
            match ids.as_slice() {
                [id] => format!("set {field}: \"10DE:{id:04X}\""),
                _ => format!(
                    "use one entry per PCI id, {field}: {}",
                    ids.iter()
                        .map(|id| format!("\"10DE:{id:04X}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        ));
    }
    if !e.pci && class == ResourceClass::VgpuType {
        let want = mdev_name(e.resource)?;
        if e.selector == want {
            return None;
        }
        return Some((
            format!(
                "{} mdevNameSelector {:?} is not the mdev type of {} ({want:?}: the sandbox \
                 device plugin advertises the type name with each space turned into _)",
                e.at, e.selector, e.resource
            ),
            format!("set mdevNameSelector: \"{want}\""),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, res: &[(&str, &str)]) -> NodeInfo {
        crate::testkit::gpu_node(name, None, res)
    }

    fn lab_nodes() -> Vec<NodeInfo> {
        vec![
            node(
                "gpu-vg-1",
                &[("nvidia.com/NVIDIA_A10-12Q", "4"), ("cpu", "64")],
            ),
            node("gpu-pt-1", &[("nvidia.com/GA102GL_A10", "2")]),
            node(
                "gpu-c-1",
                &[("nvidia.com/gpu", "8"), ("nvidia.com/GA102GL_A10", "0")],
            ),
        ]
    }

    fn pci(sel: &str, res: &str, ext: bool) -> PciHostDevice {
        PciHostDevice {
            selector: sel.into(),
            resource_name: res.into(),
            external_resource_provider: ext,
        }
    }

    fn mdev(sel: &str, res: &str, ext: bool) -> MediatedDevice {
        MediatedDevice {
            selector: sel.into(),
            resource_name: res.into(),
            external_resource_provider: ext,
        }
    }

    fn kv(p: Vec<PciHostDevice>, m: Vec<MediatedDevice>) -> PermittedHostDevices {
        PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: None,
            pci_host_devices: p,
            mediated_devices: m,
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        }
    }

    fn good() -> PermittedHostDevices {
        kv(
            vec![pci("10DE:2236", "nvidia.com/GA102GL_A10", true)],
            vec![mdev("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true)],
        )
    }

    fn codes(r: &Report) -> Vec<(Code, &str)> {
        r.findings
            .iter()
            .map(|f| (f.code, f.resource.as_str()))
            .collect()
    }

    #[test]
    fn advertised_skips_zeros_and_keeps_nodes() {
        let a = Advertised::of(&lab_nodes()).unwrap();
        assert_eq!(
            a.names.keys().collect::<Vec<_>>(),
            [
                "nvidia.com/GA102GL_A10",
                "nvidia.com/NVIDIA_A10-12Q",
                "nvidia.com/gpu"
            ]
        );
        assert_eq!(
            a.vm_names().collect::<Vec<_>>(),
            ["nvidia.com/GA102GL_A10", "nvidia.com/NVIDIA_A10-12Q"]
        );
        assert_eq!(a.nodes_text("nvidia.com/GA102GL_A10"), "gpu-pt-1 (2)");
        let bad = Advertised::of(&[node("n", &[("nvidia.com/GA102GL_A10", "2x")])]);
        assert!(bad.unwrap_err().to_string().contains("node n"));
    }

    #[test]
    fn generate_is_sorted_with_one_entry_per_id() {
        let mut nodes = lab_nodes();
        nodes.push(node(
            "old",
            &[
                ("nvidia.com/TU104GL_TESLA_T4", "1"),
                ("nvidia.com/26b5", "1"),
            ],
        ));
        // A name two PCI ids share (see pciids::collisions).
        nodes.push(node("two", &[("nvidia.com/TU116GL", "1")]));
        nodes.push(node("odd", &[("nvidia.com/pgpu", "1")]));
        let p = generate(&Advertised::of(&nodes).unwrap());
        let pci: Vec<(&str, &str)> = p
            .pci_host_devices
            .iter()
            .map(|d| (d.resource_name.as_str(), d.selector.as_str()))
            .collect();
        assert_eq!(
            pci,
            [
                ("nvidia.com/26b5", "10DE:26B5"),
                ("nvidia.com/GA102GL_A10", "10DE:2236"),
                ("nvidia.com/TU104GL_TESLA_T4", "10DE:1EB8"),
                ("nvidia.com/TU116GL", "10DE:21AE"),
                ("nvidia.com/TU116GL", "10DE:21BF"),
            ]
        );
        assert!(
            p.pci_host_devices
                .iter()
                .all(|d| d.external_resource_provider)
        );
        assert_eq!(
            p.mediated_devices,
            [mdev("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true)]
        );
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(p.notes[0].starts_with("nvidia.com/TU116GL: the name stands for 2 PCI devices (10DE:21AE (TU116GL), 10DE:21BF (TU116GL))"), "{:?}", p.notes);
        assert!(p.notes[1].starts_with("nvidia.com/pgpu: no PCI device id is known"));
    }

    #[test]
    fn all_good() {
        let r = check(&Advertised::of(&lab_nodes()).unwrap(), &good());
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert!(r.ok());
        assert_eq!(r.summary.advertised, 2);
        assert_eq!(r.summary.permitted_advertised, 2);
        assert_eq!(r.summary.entries, 2);
    }

    #[test]
    fn advertised_not_permitted() {
        let mut k = good();
        k.mediated_devices.clear();
        let r = check(&Advertised::of(&lab_nodes()).unwrap(), &k);
        assert_eq!(
            codes(&r),
            [(Code::AdvertisedNotPermitted, "nvidia.com/NVIDIA_A10-12Q")]
        );
        let f = &r.findings[0];
        assert_eq!(f.severity, Severity::Error);
        assert!(f.message.starts_with("advertised by gpu-vg-1 (4) but not permitted in KubeVirt kubevirt/kubevirt spec.configuration.permittedHostDevices"), "{}", f.message);
        assert_eq!(
            f.suggestion.as_deref(),
            Some(
                "add to spec.configuration.permittedHostDevices: mediatedDevices: {mdevNameSelector: \"NVIDIA A10-12Q\", resourceName: nvidia.com/NVIDIA_A10-12Q, externalResourceProvider: true}"
            )
        );
        assert!(!r.ok());
        // No list at all (issue 47): KubeVirt refuses nothing, so no name is an error: one
        // nothing-vetted warning naming the advertised names, and the check passes.
        let none = PermittedHostDevices {
            present: false,
            host_devices_gate: None,
            ..kv(vec![], vec![])
        };
        let r = check(&Advertised::of(&lab_nodes()).unwrap(), &none);
        assert_eq!(
            codes(&r),
            [(
                Code::NothingVetted,
                "spec.configuration.permittedHostDevices"
            )]
        );
        assert_eq!(r.findings[0].severity, Severity::Warning);
        assert_eq!(
            r.findings[0].message,
            "KubeVirt kubevirt/kubevirt has no spec.configuration.permittedHostDevices: KubeVirt vets no deviceName and refuses none, so the 2 name(s) the nodes advertise (nvidia.com/GA102GL_A10, nvidia.com/NVIDIA_A10-12Q) pass, and so does a typo of one (its virt-launcher pod is then Pending with no node to take it)"
        );
        assert!(r.ok());
        assert_eq!((r.summary.errors, r.summary.warnings), (0, 1));
        // The one rule: an absent list refuses nothing, a present one what it lacks; a
        // `usb` entry's resourceName is permitted like the others.
        assert!(!none.refuses("nvidia.com/GA102GL_A1O"));
        let mut usb = good();
        usb.usb_host_devices
            .push(crate::model::kubevirt::UsbHostDevice {
                resource_name: "kubevirt.io/storage".into(),
                external_resource_provider: false,
            });
        assert!(!usb.refuses("kubevirt.io/storage"));
        assert!(good().refuses("kubevirt.io/storage"));
    }

    #[test]
    fn a_container_name_permitted_is_an_error_pointing_to_the_vm_names() {
        // Issue 47: permitting nvidia.com/gpu lets a VM's launcher be scheduled on a
        // container node where the VM cannot start.
        let mut k = good();
        k.pci_host_devices.push(PciHostDevice {
            selector: "10DE:2236".into(),
            resource_name: "nvidia.com/gpu".into(),
            external_resource_provider: true,
        });
        let r = check(&Advertised::of(&lab_nodes()).unwrap(), &k);
        assert_eq!(
            codes(&r),
            [(Code::ContainerNamePermitted, "nvidia.com/gpu")]
        );
        let f = &r.findings[0];
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(
            f.suggestion.as_deref(),
            Some(
                "remove pciHostDevices[1]; VMs request nvidia.com/GA102GL_A10 or nvidia.com/NVIDIA_A10-12Q"
            )
        );
        assert!(!r.ok());
    }

    #[test]
    fn permitted_not_advertised_with_did_you_mean() {
        let k = kv(
            vec![
                pci("10DE:2236", "nvidia.com/GA102GL_A10", true),
                pci("10DE:1EB8", "nvidia.com/TU104GL_Tesla_T4", true),
            ],
            vec![
                mdev("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true),
                mdev("NVIDIA A10-24Q", "nvidia.com/NVIDIA_A10-24Q", true),
            ],
        );
        let mut nodes = lab_nodes();
        nodes.push(node("t4", &[("nvidia.com/TU104GL_TESLA_T4", "1")]));
        let r = check(&Advertised::of(&nodes).unwrap(), &k);
        assert_eq!(
            codes(&r),
            [
                (Code::PermittedNotAdvertised, "nvidia.com/NVIDIA_A10-24Q"),
                (Code::AdvertisedNotPermitted, "nvidia.com/TU104GL_TESLA_T4"),
                (Code::PermittedNotAdvertised, "nvidia.com/TU104GL_Tesla_T4"),
            ]
        );
        assert_eq!(r.findings[0].severity, Severity::Warning);
        assert_eq!(
            r.findings[0].suggestion.as_deref(),
            Some("did you mean nvidia.com/NVIDIA_A10-12Q (2 edits away)?")
        );
        assert!(r.findings[1].suggestion.as_deref().unwrap().ends_with("(the CR lists nvidia.com/TU104GL_Tesla_T4 (differs only in case) instead: correct that entry's resourceName)"), "{:?}", r.findings[1]);
        assert_eq!(
            r.findings[2].suggestion.as_deref(),
            Some("did you mean nvidia.com/TU104GL_TESLA_T4 (differs only in case)?")
        );
        // Names outside nvidia.com are not judged.
        let k = kv(vec![pci("8086:0D58", "intel.com/qat", false)], vec![]);
        let r = check(&Advertised::default(), &k);
        assert!(r.findings.is_empty());
    }

    #[test]
    fn internal_provider() {
        let mut k = good();
        k.pci_host_devices[0].external_resource_provider = false;
        let r = check(&Advertised::of(&lab_nodes()).unwrap(), &k);
        assert_eq!(
            codes(&r),
            [(
                Code::InternalProviderForOperatorResource,
                "nvidia.com/GA102GL_A10"
            )]
        );
        assert!(r.findings[0].message.starts_with("pciHostDevices[0] has externalResourceProvider false or absent, yet gpu-pt-1 (2) advertise it"));
        // Not advertised: KubeVirt's own plugin may be intended; only the warning.
        let r = check(&Advertised::default(), &k);
        assert!(
            r.findings
                .iter()
                .all(|f| f.code == Code::PermittedNotAdvertised)
        );
    }

    #[test]
    fn selector_mismatch() {
        let adv = Advertised::of(&lab_nodes()).unwrap();
        // Wrong PCI id (a T4's), compared case-insensitively.
        let k = kv(
            vec![pci("10de:1eb8", "nvidia.com/GA102GL_A10", true)],
            vec![mdev("NVIDIA_A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true)],
        );
        let r = check(&adv, &k);
        assert_eq!(
            codes(&r),
            [
                (Code::SelectorMismatch, "nvidia.com/GA102GL_A10"),
                (Code::SelectorMismatch, "nvidia.com/NVIDIA_A10-12Q"),
            ]
        );
        assert_eq!(
            r.findings[0].message,
            "pciHostDevices[0] pciVendorSelector \"10de:1eb8\" is not the PCI id of nvidia.com/GA102GL_A10 (10DE:2236 (GA102GL [A10])) (\"10de:1eb8\" is TU104GL [Tesla T4], advertised as nvidia.com/TU104GL_TESLA_T4)"
        );
        assert_eq!(
            r.findings[0].suggestion.as_deref(),
            Some("set pciVendorSelector: \"10DE:2236\"")
        );
        assert_eq!(
            r.findings[1].suggestion.as_deref(),
            Some("set mdevNameSelector: \"NVIDIA A10-12Q\"")
        );
        // Lower case of the right id is fine.
        let k = kv(
            vec![pci("10de:2236", "nvidia.com/GA102GL_A10", true)],
            vec![mdev("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true)],
        );
        assert!(check(&adv, &k).findings.is_empty());
        // Wrong lists; HyperConverged spelling of the field.
        let mut k = kv(
            vec![pci("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true)],
            vec![mdev("GA102GL A10", "nvidia.com/GA102GL_A10", true)],
        );
        k.source = HostDevicesSource::HyperConverged;
        let r = check(&adv, &k);
        assert_eq!(
            codes(&r),
            [
                (Code::SelectorMismatch, "nvidia.com/GA102GL_A10"),
                (Code::SelectorMismatch, "nvidia.com/NVIDIA_A10-12Q"),
            ]
        );
        assert!(r.findings[0].suggestion.as_deref().unwrap().starts_with(
            "move it to pciHostDevices: pciHostDevices: {pciDeviceSelector: \"10DE:2236\""
        ));
        assert!(
            r.findings[1]
                .message
                .contains("(pciDeviceSelector \"NVIDIA A10-12Q\")")
        );
        assert!(
            r.findings[1]
                .suggestion
                .as_deref()
                .unwrap()
                .starts_with("move it to mediatedDevices: {mdevNameSelector: \"NVIDIA A10-12Q\"")
        );
        // Garbage selector; an unknown name is not judged.
        let k = kv(
            vec![
                pci("2236", "nvidia.com/GA102GL_A10", true),
                pci("10DE:FFFF", "nvidia.com/MY_GPU", true),
            ],
            vec![mdev("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true)],
        );
        let r = check(&adv, &k);
        assert!(
            r.findings[0]
                .message
                .ends_with("(not a VVVV:DDDD hex PCI id)"),
            "{:?}",
            r.findings
        );
        assert_eq!(
            codes(&r),
            [
                (Code::SelectorMismatch, "nvidia.com/GA102GL_A10"),
                (Code::PermittedNotAdvertised, "nvidia.com/MY_GPU"),
            ]
        );
    }

    #[test]
    fn duplicate_resource_name() {
        let adv = Advertised::of(&lab_nodes()).unwrap();
        let mut k = good();
        k.pci_host_devices
            .push(pci("10de:2236", "nvidia.com/GA102GL_A10", true));
        k.mediated_devices
            .push(mdev("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q", true));
        let r = check(&adv, &k);
        assert_eq!(
            codes(&r),
            [
                (Code::DuplicateResourceName, "nvidia.com/GA102GL_A10"),
                (Code::DuplicateResourceName, "nvidia.com/NVIDIA_A10-12Q"),
            ]
        );
        assert!(
            r.findings[0]
                .message
                .starts_with("listed 2 times (pciHostDevices[0], pciHostDevices[1])")
        );
        // One entry per PCI id of a shared name is not a duplicate.
        let nodes = [node("two", &[("nvidia.com/TU116GL", "1")])];
        let k = kv(
            vec![
                pci("10DE:21AE", "nvidia.com/TU116GL", true),
                pci("10DE:21BF", "nvidia.com/TU116GL", true),
            ],
            vec![],
        );
        let r = check(&Advertised::of(&nodes).unwrap(), &k);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
    }

    #[test]
    fn selectors_parse() {
        assert_eq!(parse_selector("10DE:2236"), Some((0x10de, 0x2236)));
        assert_eq!(parse_selector(" 10de:2236 "), Some((0x10de, 0x2236)));
        assert_eq!(parse_selector("10DE2236"), None);
        assert_eq!(parse_selector("10DE:22366"), None);
    }
}
