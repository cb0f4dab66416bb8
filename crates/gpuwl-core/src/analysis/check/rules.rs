//! The check's findings as named rules.
//!
//! [`NodeFacts::gather`] reads one node once (its label, the field that decides
//! "advertised", and each `nvidia.com/` resource with its quantities parsed); each rule below
//! is a small function from those facts to at most one [`Finding`]. [`RESOURCE_RULES`] run
//! per resource, then [`NODE_RULES`] per node, in the order the lists give (the order
//! findings of one severity are reported in). The GPU Operator's own state is a separate
//! rule set ([`crate::model::operator::state_findings`]) that `judge` appends.
//!
//! Sources of the facts the rules use are given on each rule.

use crate::model::node::{NodeInfo, ResourceField};
use crate::model::operator::{
    self, ClusterPolicy, EffectiveWorkload, GpuEvidence, LabelState, OperatorScope, WorkloadSource,
};
use crate::model::pciids;
use crate::model::quantity::Quantity;
use crate::model::resource::{self, Classifier, NVIDIA_PREFIX, ResourceClass};
use crate::model::workload::{
    DEFAULT_WORKLOAD, DEFAULT_WORKLOAD_FIELD, ENABLE_FLAG, LABEL_KEY, WorkloadConfig,
};

use super::{Code, Finding, ResourceEntry};
use crate::text;

/// One quantity of one resource as read from the node.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Not listed in that field.
    Absent,
    /// A whole, non-negative device count.
    Count(Quantity),
    /// Listed, but not a device count: the raw text and why.
    Invalid {
        /// The text as listed.
        raw: String,
        /// Why it is not a count, e.g. `not a valid device count (negative)`.
        why: String,
    },
}

impl Parsed {
    /// Parses a listed quantity as a device count. The API server accepts only whole,
    /// non-negative counts of an extended resource (kubernetes/kubernetes
    /// `pkg/apis/core/validation/validation.go`, `ValidateResourceQuantityValue`), and device
    /// plugins advertise device counts; anything else is hand-made or corrupt.
    pub fn count(raw: Option<&str>) -> Parsed {
        let Some(raw) = raw else {
            return Parsed::Absent;
        };
        // The one count rule inventory and explain apply too (`Quantity::to_count`).
        let why = match Quantity::parse(raw) {
            Err(e) => format!("not a valid quantity ({e})"),
            Ok(q) => match q.to_count() {
                Ok(_) => return Parsed::Count(q),
                Err(_) if q.is_negative() => "not a valid device count (negative)".to_string(),
                Err(_) if !q.is_integer() => {
                    "not a valid device count (extended resources are whole numbers)".to_string()
                }
                Err(_) => "not a valid device count (too large: over 2^63-1 units)".to_string(),
            },
        };
        Parsed::Invalid {
            raw: raw.to_owned(),
            why,
        }
    }

    fn quantity(&self) -> Option<&Quantity> {
        match self {
            Parsed::Count(q) => Some(q),
            _ => None,
        }
    }
}

/// One `nvidia.com/` resource of a node: what the report shows ([`ResourceEntry`]) and the
/// parsed quantities the rules judge by.
#[derive(Debug, Clone)]
pub struct ResourceFacts {
    /// The report entry (raw texts, class, advertised).
    pub entry: ResourceEntry,
    /// `status.capacity` (only parsed for GPU classes).
    pub capacity: Parsed,
    /// `status.allocatable` (only parsed for GPU classes).
    pub allocatable: Parsed,
    /// The quantity in the field that decides "advertised" ([`NodeInfo::advertising_field`]).
    pub advertising: Parsed,
}

/// What the rules see of one node.
#[derive(Debug, Clone)]
pub struct NodeFacts<'a> {
    /// The node.
    pub node: &'a NodeInfo,
    /// The raw [`LABEL_KEY`] value, when labelled.
    pub label: Option<&'a str>,
    /// `status.allocatable`, or `status.capacity` when the node has no allocatable map.
    pub field: ResourceField,
    /// Every `nvidia.com/` resource the node lists, in name order.
    pub resources: Vec<ResourceFacts>,
    /// What shows the node has a GPU ([`crate::model::operator::gpu_evidence`], or what
    /// the caller knows more, [`NodeFacts::with_gpu`]).
    pub gpu: GpuEvidence,
    /// The ClusterPolicy, when read ([`NodeFacts::with_policy`]): the label rules name
    /// its `defaultWorkload` and follow its `sandboxWorkloads.enabled`.
    pub policy: Option<&'a ClusterPolicy>,
}

impl<'a> NodeFacts<'a> {
    /// Reads `node` under `classifier`: non-NVIDIA names are left out; quantities are parsed
    /// for GPU classes only; a resource is advertised when its advertising quantity is > 0
    /// (a listed `"0"` is not: the kubelet keeps stale zeros, kubernetes/kubernetes
    /// `pkg/kubelet/nodestatus/setters.go`).
    pub fn gather(node: &'a NodeInfo, classifier: &Classifier) -> NodeFacts<'a> {
        let field = node.advertising_field();
        let resources = node
            .resource_names()
            .into_iter()
            .filter_map(|name| {
                let class = classifier.classify(name);
                if class == ResourceClass::NotNvidia {
                    return None;
                }
                let cap_raw = node.raw(ResourceField::Capacity, name);
                let alloc_raw = node.raw(ResourceField::Allocatable, name);
                let (capacity, allocatable) = if class.is_gpu() {
                    (Parsed::count(cap_raw), Parsed::count(alloc_raw))
                } else {
                    (Parsed::Absent, Parsed::Absent)
                };
                let advertising = match field {
                    ResourceField::Allocatable => allocatable.clone(),
                    ResourceField::Capacity => capacity.clone(),
                };
                let advertised = advertising.quantity().is_some_and(Quantity::is_positive);
                Some(ResourceFacts {
                    entry: ResourceEntry {
                        name: name.to_owned(),
                        class,
                        capacity: cap_raw.map(str::to_owned),
                        allocatable: alloc_raw.map(str::to_owned),
                        advertised,
                    },
                    capacity,
                    allocatable,
                    advertising,
                })
            })
            .collect();
        NodeFacts {
            node,
            label: node.label(LABEL_KEY),
            field,
            resources,
            gpu: operator::gpu_evidence(node),
            policy: None,
        }
    }

    /// The facts with the GPU evidence given: devices NVIDIA's DRA driver publishes on a
    /// node without any other GPU evidence make it [`GpuEvidence::Unknown`]
    /// (`crate::analysis::check::judge_node`).
    ///
    /// [`GpuEvidence::Unknown`]: crate::model::operator::GpuEvidence::Unknown
    pub(crate) fn with_gpu(mut self, gpu: GpuEvidence) -> NodeFacts<'a> {
        self.gpu = gpu;
        self
    }

    /// The facts with the ClusterPolicy read (`None`: none read).
    pub(crate) fn with_policy(mut self, policy: Option<&'a ClusterPolicy>) -> NodeFacts<'a> {
        self.policy = policy;
        self
    }

    /// What the operator applies to a node without a valid label, in words, from the
    /// ClusterPolicy when read: `ClusterPolicy cluster-policy sandboxWorkloads.defaultWorkload
    /// (vm-passthrough)`, or `container` when its sandbox workloads are disabled (the
    /// operator reads no label then); else the CRD default (NVIDIA/gpu-operator
    /// `controllers/state_manager.go` `getWorkloadConfig`, `init`;
    /// `api/nvidia/v1/clusterpolicy_types.go` `SandboxWorkloadsSpec`).
    pub fn fallback(&self) -> String {
        match self.policy {
            Some(p) if !p.sandbox_enabled => format!(
                "container (ClusterPolicy {} has {ENABLE_FLAG}=false)",
                p.name
            ),
            Some(p) => format!(
                "ClusterPolicy {}'s {DEFAULT_WORKLOAD_FIELD} ({})",
                p.name, p.default_workload
            ),
            None => format!("{DEFAULT_WORKLOAD_FIELD} (default {DEFAULT_WORKLOAD})"),
        }
    }

    /// The advertised GPU resources (quantity > 0 in the advertising field).
    pub fn advertised(&self) -> impl Iterator<Item = &ResourceFacts> {
        self.resources
            .iter()
            .filter(|r| r.entry.advertised && r.entry.class.is_gpu())
    }

    /// Whether any GPU quantity on the node is not a device count.
    pub(crate) fn has_invalid_quantity(&self) -> bool {
        self.resources.iter().any(|r| {
            matches!(r.capacity, Parsed::Invalid { .. })
                || matches!(r.allocatable, Parsed::Invalid { .. })
        })
    }

    /// `name=amount (class), ...` for `v`, amounts from the advertising field.
    fn list<'r>(&self, v: impl IntoIterator<Item = &'r ResourceFacts>) -> String {
        v.into_iter()
            .map(|r| {
                let amount = match self.field {
                    ResourceField::Allocatable => r.entry.allocatable.as_deref(),
                    ResourceField::Capacity => r.entry.capacity.as_deref(),
                };
                format!(
                    "{}={} ({})",
                    r.entry.name,
                    amount.unwrap_or(""),
                    r.entry.class.describe()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A finding; its severity is the code's ([`Code::severity`]).
fn finding(code: Code, resource: Option<&str>, message: String) -> Finding {
    Finding {
        code,
        severity: code.severity(),
        resource: resource.map(str::to_owned),
        message,
    }
}

/// A rule about one resource of a node.
pub type ResourceRule = fn(&NodeFacts<'_>, &ResourceFacts) -> Option<Finding>;

/// A rule about a whole node.
pub(crate) type NodeRule = fn(&NodeFacts<'_>) -> Option<Finding>;

/// The per-resource rules, in report order.
pub(crate) const RESOURCE_RULES: [(Code, ResourceRule); 7] = [
    (Code::IgnoredResource, ignored_resource),
    (Code::InvalidQuantity, invalid_capacity),
    (Code::InvalidQuantity, invalid_allocatable),
    (Code::StaleZero, stale_zero),
    (
        Code::CapacityExceedsAllocatable,
        capacity_exceeds_allocatable,
    ),
    (Code::HexIdFallback, hex_id_fallback),
    (Code::MixedCaseModel, mixed_case_model),
];

/// The per-node rules about the label, in report order (at most one of them fires).
pub(crate) const NODE_RULES: [(Code, NodeRule); 4] = [
    (Code::UnlabelledGpuNode, unlabelled_gpu_node),
    (Code::InvalidLabelValue, invalid_label_value),
    (Code::WrongClassResource, wrong_class_resource),
    (Code::NoGpuResource, no_gpu_resource),
];

/// `ignored-resource` (info): an `nvidia.com/` name that is not a GPU resource (NVIDIA
/// Network Operator's RDMA resources, NVSwitch, or a `--ignore-resource` glob).
pub(crate) fn ignored_resource(_: &NodeFacts<'_>, r: &ResourceFacts) -> Option<Finding> {
    let name = &r.entry.name;
    (!r.entry.class.is_gpu()).then(|| {
        finding(
            Code::IgnoredResource,
            Some(name),
            format!(
                "{name} is not a GPU resource (NVIDIA Network Operator or --ignore-resource); ignored"
            ),
        )
    })
}

fn invalid(r: &ResourceFacts, f: ResourceField) -> Option<Finding> {
    let parsed = match f {
        ResourceField::Capacity => &r.capacity,
        ResourceField::Allocatable => &r.allocatable,
    };
    let Parsed::Invalid { raw, why } = parsed else {
        return None;
    };
    let name = &r.entry.name;
    Some(finding(
        Code::InvalidQuantity,
        Some(name),
        format!(
            "{}[{}] is {}, {why}",
            f.path(),
            text::cut(name),
            text::cut(raw)
        ),
    ))
}

/// `invalid-quantity` on `status.capacity` (error): the
/// listed text is not a whole, non-negative count ([`Parsed::count`]).
pub(crate) fn invalid_capacity(_: &NodeFacts<'_>, r: &ResourceFacts) -> Option<Finding> {
    invalid(r, ResourceField::Capacity)
}

/// `invalid-quantity` on `status.allocatable`; as [`invalid_capacity`].
pub(crate) fn invalid_allocatable(_: &NodeFacts<'_>, r: &ResourceFacts) -> Option<Finding> {
    invalid(r, ResourceField::Allocatable)
}

/// `stale-zero` (warning): a GPU resource listed with 0 in the advertising field. The
/// kubelet keeps an extended resource it once saw at 0 after its device plugin is gone
/// (kubernetes/kubernetes `pkg/kubelet/nodestatus/setters.go`), so a relabelled node keeps
/// its old name.
pub fn stale_zero(n: &NodeFacts<'_>, r: &ResourceFacts) -> Option<Finding> {
    let q = r.advertising.quantity()?;
    let name = &r.entry.name;
    (!q.is_positive()).then(|| {
        finding(
            Code::StaleZero,
            Some(name),
            format!(
                "{name} is listed in {} with {q} and is not counted as advertised (the kubelet keeps a stale 0 after a device plugin goes away)",
                n.field.path()
            ),
        )
    })
}

/// `capacity-exceeds-allocatable` (warning): capacity > allocatable, i.e. devices the
/// plugin reports unhealthy, or the kubelet's grace period after a plugin went away
/// (kubernetes/kubernetes `pkg/kubelet/cm/devicemanager/manager.go`).
pub(crate) fn capacity_exceeds_allocatable(
    _: &NodeFacts<'_>,
    r: &ResourceFacts,
) -> Option<Finding> {
    let (c, a) = (r.capacity.quantity()?, r.allocatable.quantity()?);
    let name = &r.entry.name;
    (c > a).then(|| {
        finding(
            Code::CapacityExceedsAllocatable,
            Some(name),
            format!(
                "{name} capacity {c} > allocatable {a}: unhealthy devices, or the kubelet's 5-minute grace period after a device plugin went away"
            ),
        )
    })
}

/// The part after `nvidia.com/` of an advertised device-model resource.
fn advertised_model(r: &ResourceFacts) -> Option<&str> {
    (r.entry.class == ResourceClass::PassthroughModel && r.entry.advertised)
        .then(|| r.entry.name.get(NVIDIA_PREFIX.len()..))
        .flatten()
}

/// `hex-id-fallback` (warning): an advertised device-model name that is four lower-case
/// hex digits, the sandbox device plugin's name for a device its `pci.ids` lacks
/// ([`resource::is_hex_fallback`]); a plugin update renames the resource.
pub(crate) fn hex_id_fallback(_: &NodeFacts<'_>, r: &ResourceFacts) -> Option<Finding> {
    let short = advertised_model(r)?;
    if !resource::is_hex_fallback(short) {
        return None;
    }
    let known = u16::from_str_radix(short, 16)
        .ok()
        .and_then(pciids::by_id)
        .map(|d| format!(" (gpuwl's pci.ids knows it as {:?})", d.pci_name))
        .unwrap_or_default();
    let name = &r.entry.name;
    Some(finding(
        Code::HexIdFallback,
        Some(name),
        format!(
            "{name} is the sandbox device plugin's hex-id fallback: its pci.ids lacks device 0x{short}{known}; a plugin update will rename the resource"
        ),
    ))
}

/// `mixed-case-model` (warning): an advertised device-model name with lower-case letters;
/// the sandbox device plugin upper-cases names since v1.1.1
/// ([`resource::is_mixed_case_model`]).
pub(crate) fn mixed_case_model(_: &NodeFacts<'_>, r: &ResourceFacts) -> Option<Finding> {
    let short = advertised_model(r)?;
    let name = &r.entry.name;
    resource::is_mixed_case_model(short).then(|| {
        finding(
            Code::MixedCaseModel,
            Some(name),
            format!(
                "{name} has lower-case letters: the sandbox device plugin upper-cases device names since v1.1.1, so no current plugin advertises it"
            ),
        )
    })
}

/// `unlabelled-gpu-node` (warning): no workload label, yet GPUs advertised; the operator
/// applies the ClusterPolicy's `defaultWorkload` — the one read ([`NodeFacts::fallback`]),
/// or `container` where its sandbox workloads are disabled (docs/domain-facts.md §1;
/// NVIDIA/gpu-operator `controllers/state_manager.go`, `getWorkloadConfig`).
pub(crate) fn unlabelled_gpu_node(n: &NodeFacts<'_>) -> Option<Finding> {
    if n.label.is_some() || n.advertised().next().is_none() {
        return None;
    }
    Some(finding(
        Code::UnlabelledGpuNode,
        None,
        format!(
            "no {LABEL_KEY} label: the operator applies {}; the node advertises {}",
            n.fallback(),
            n.list(n.advertised())
        ),
    ))
}

/// `invalid-label-value` (error): the label is not `container`, `vm-passthrough` or
/// `vm-vgpu` (case-sensitive); the operator silently falls back to the ClusterPolicy's
/// `defaultWorkload` ([`NodeFacts::fallback`]; NVIDIA/gpu-operator
/// `controllers/state_manager.go`, `getWorkloadConfig`). Not where the ClusterPolicy read
/// has sandbox workloads disabled: the operator then applies `container` without reading
/// the label at all, and `label-ignored` says so
/// ([`crate::model::operator::label_ignored`]).
pub(crate) fn invalid_label_value(n: &NodeFacts<'_>) -> Option<Finding> {
    let e = n.label?.parse::<WorkloadConfig>().err()?;
    if n.policy.is_some_and(|p| !p.sandbox_enabled) {
        return None;
    }
    Some(finding(
        Code::InvalidLabelValue,
        None,
        format!(
            "label value {e}: the operator silently falls back to {}{}",
            n.fallback(),
            e.did_you_mean()
        ),
    ))
}

fn valid_label(n: &NodeFacts<'_>) -> Option<WorkloadConfig> {
    n.label?.parse().ok()
}

/// What a workload config's node should advertise, in words.
pub(crate) fn expected_wording(w: WorkloadConfig) -> &'static str {
    match w {
        WorkloadConfig::Container => "a container-GPU resource",
        WorkloadConfig::VmPassthrough => "a device-model resource",
        WorkloadConfig::VmVgpu => "a vGPU type resource",
    }
}

/// `wrong-class-resource` (error): a valid label, and an advertised GPU resource of another
/// class than the label's ([`ResourceClass::for_workload`]).
pub(crate) fn wrong_class_resource(n: &NodeFacts<'_>) -> Option<Finding> {
    let w = valid_label(n)?;
    let want = ResourceClass::for_workload(w);
    let wrong: Vec<&ResourceFacts> = n.advertised().filter(|r| r.entry.class != want).collect();
    let first = wrong.first()?;
    // Every advertised GPU name is said: the right-class ones too, after the wrong ones.
    let right: Vec<&ResourceFacts> = n.advertised().filter(|r| r.entry.class == want).collect();
    let beside = if right.is_empty() {
        String::new()
    } else {
        format!(" as well as {}", n.list(right.iter().copied()))
    };
    Some(finding(
        Code::WrongClassResource,
        Some(&first.entry.name),
        format!(
            "label {w} expects {}, but the node advertises {}{beside}",
            expected_wording(w),
            n.list(wrong.iter().copied())
        ),
    ))
}

/// `no-gpu-resource` (error): a valid label and no advertised GPU resource at all (unless a
/// quantity is invalid, which `invalid-quantity` reports instead). The message says why
/// each listed GPU name does not count: a 0 in the advertising field, or listed only in
/// `status.capacity`.
pub(crate) fn no_gpu_resource(n: &NodeFacts<'_>) -> Option<Finding> {
    let w = valid_label(n)?;
    if n.advertised().next().is_some() || n.has_invalid_quantity() {
        return None;
    }
    let gpu = || n.resources.iter().filter(|r| r.entry.class.is_gpu());
    let in_field = |r: &ResourceFacts| !matches!(r.advertising, Parsed::Absent);
    let zeros: Vec<&str> = gpu()
        .filter(|r| in_field(r))
        .map(|r| r.entry.name.as_str())
        .collect();
    let absent: Vec<String> = gpu()
        .filter(|r| !in_field(r))
        .map(|r| {
            format!(
                "{} only in status.capacity (={})",
                r.entry.name,
                r.entry.capacity.as_deref().unwrap_or_default()
            )
        })
        .collect();
    // GPU names by the default rules that `--ignore-resource` set aside: said, never
    // silently "no GPU resource".
    let set_aside: Vec<String> = n
        .resources
        .iter()
        .filter(|r| !r.entry.class.is_gpu() && resource::classify(&r.entry.name).is_gpu())
        .map(|r| {
            let field = match n.field {
                ResourceField::Allocatable => r.entry.allocatable.as_deref(),
                ResourceField::Capacity => r.entry.capacity.as_deref(),
            };
            match field {
                Some(q) => format!("{}={q}", r.entry.name),
                None => r.entry.name.clone(),
            }
        })
        .collect();
    let mut why = Vec::new();
    if !zeros.is_empty() {
        why.push(format!("{} listed with 0", zeros.join(", ")));
    }
    if !absent.is_empty() {
        why.push(format!("{}, not in {}", absent.join(", "), n.field.path()));
    }
    if !set_aside.is_empty() {
        why.push(format!(
            "{} set aside by --ignore-resource",
            set_aside.join(", ")
        ));
    }
    let tail = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join("; "))
    };
    Some(finding(
        Code::NoGpuResource,
        None,
        format!(
            "label {w} expects {}, but the node advertises no GPU resource{tail}",
            expected_wording(w)
        ),
    ))
}

/// GPU Feature Discovery's product label (NVIDIA/k8s-device-plugin
/// `internal/lm/resource.go`: `nvidia.com/gpu.product`); also `nvidia.com/gpu.count`.
pub(crate) const GFD_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// GPU Feature Discovery's GPU count label.
pub(crate) const GFD_COUNT_LABEL: &str = "nvidia.com/gpu.count";

/// Why the node counts as a GPU node, or `None`: the workload label
/// ([`LABEL_KEY`]), a GPU resource it lists (any quantity), the GPU Operator's
/// `nvidia.com/gpu.present=true`, NFD's `feature.node.kubernetes.io/pci-10de.present=true`
/// or GPU Feature Discovery's `nvidia.com/gpu.product` / `nvidia.com/gpu.count` — except
/// a node NFD saw without an NVIDIA GPU and advertising none
/// ([`crate::model::operator::GpuEvidence::NoGpu`]) and one where nothing shows a GPU
/// ([`crate::model::operator::GpuEvidence::None`]: a workload label alone), which the
/// operator never manages.
pub(crate) fn gpu_node_evidence(n: &NodeFacts<'_>) -> Option<&'static str> {
    use crate::model::operator::{GPU_PRESENT_LABEL, NFD_GPU_LABELS};
    // NFD saw the node and found no NVIDIA GPU, or nothing shows one (and nothing is
    // advertised): the operator leaves it alone, whatever its labels say.
    if n.gpu.not_gpu() {
        return None;
    }
    if n.label.is_some() {
        Some("workload-label")
    } else if n.resources.iter().any(|r| r.entry.class.is_gpu()) {
        Some("gpu-resource")
    } else if n.node.label(GPU_PRESENT_LABEL) == Some("true") {
        Some("gpu-present-label")
    } else if NFD_GPU_LABELS
        .iter()
        .any(|k| n.node.label(k) == Some("true"))
    {
        Some("nfd-pci-10de")
    } else if n.node.label(GFD_PRODUCT_LABEL).is_some() || n.node.label(GFD_COUNT_LABEL).is_some() {
        Some("gfd-labels")
    } else {
        None
    }
}

/// `effective-workload-differs` (error): the node advertises GPU names of another class
/// than the workload the GPU Operator applies to it ([`EffectiveWorkload`], the model's
/// [`crate::model::operator::effective_workload`]), where that workload does not come
/// from a label the operator follows — no label, or one it ignores (sandbox workloads
/// disabled in the ClusterPolicy, deploy labels of another workload); an invalid label is
/// [`invalid_label_value`]'s.
/// The operator reconciles the node to its workload's operands and removes the ones that
/// serve the advertised names (NVIDIA/gpu-operator `controllers/state_manager.go`,
/// `getWorkloadConfig`; docs/domain-facts.md §1, §7). A followed label is judged by
/// [`wrong_class_resource`] instead.
pub(crate) fn effective_workload_differs(
    n: &NodeFacts<'_>,
    eff: &EffectiveWorkload,
    policy: Option<&ClusterPolicy>,
) -> Option<Finding> {
    // Where the operator deploys nothing (operands disabled, no GPU), it replaces nothing.
    if eff.scope != OperatorScope::Operands {
        return None;
    }
    // A followed label is judged by the label rules; an invalid one is already an error
    // whose message names the fallback (invalid_label_value).
    if eff.label != LabelState::Absent && !eff.label_ignored {
        return None;
    }
    let w = eff.workload;
    let want = ResourceClass::for_workload(w);
    let wrong: Vec<&ResourceFacts> = n.advertised().filter(|r| r.entry.class != want).collect();
    let first = wrong.first()?;
    let label = n.label.unwrap_or("");
    let why = match eff.label {
        LabelState::Absent => format!("no {LABEL_KEY} label"),
        _ => format!("label {label} is ignored"),
    };
    let by = match (eff.source, policy) {
        (WorkloadSource::ClusterPolicy, Some(p)) if !p.sandbox_enabled => format!(
            "ClusterPolicy {} has {ENABLE_FLAG}=false: every GPU node is container",
            p.name
        ),
        (WorkloadSource::ClusterPolicy, Some(p)) => {
            format!("ClusterPolicy {} {DEFAULT_WORKLOAD_FIELD}", p.name)
        }
        (WorkloadSource::DeployLabels, _) => {
            "its gpu.deploy.* labels; no ClusterPolicy read".to_string()
        }
        _ => format!(
            "the CRD's {DEFAULT_WORKLOAD_FIELD} default; no ClusterPolicy read, no gpu.deploy.* labels"
        ),
    };
    let serves_vms = wrong
        .iter()
        .any(|r| r.entry.class != ResourceClass::ContainerGpu);
    let under = if serves_vms {
        " under the VMs that use them"
    } else {
        " under the pods that use them"
    };
    // The workload the advertised names belong to: the label that would keep them.
    let keep = first
        .entry
        .class
        .workload()
        .map_or(String::new(), |k| keep_names(n, k, eff, policy));
    Some(finding(
        Code::EffectiveWorkloadDiffers,
        Some(&first.entry.name),
        format!(
            "{why}: the GPU Operator applies {w} ({by}), but the node advertises {}: the operator will replace the operands that serve them with {w} ones{under}{keep}",
            n.list(wrong.iter().copied())
        ),
    ))
}

/// The fix that keeps the names of workload `k` a node advertises where the operator
/// applies another ([`effective_workload_differs`]). With sandbox workloads disabled in
/// the ClusterPolicy, enabling them keeps the names only when the node's workload then is
/// `k`: its valid label, else the ClusterPolicy's `defaultWorkload`
/// (NVIDIA/gpu-operator `controllers/state_manager.go`, `getWorkloadConfig`); otherwise
/// the fix says what enabling would apply instead, and that the label must say `k` too.
/// Enabling is cluster-wide: every labelled GPU node then follows its own label.
pub(crate) fn keep_names(
    n: &NodeFacts<'_>,
    k: WorkloadConfig,
    eff: &EffectiveWorkload,
    policy: Option<&ClusterPolicy>,
) -> String {
    let relabel = format!(
        "kubectl label node {} {LABEL_KEY}={k} --overwrite",
        n.node.name
    );
    match (eff.source, policy) {
        (WorkloadSource::ClusterPolicy, Some(p)) if !p.sandbox_enabled => {
            let (then, by) = match valid_label(n) {
                Some(w) => (w, format!("its label {w}")),
                None => (
                    p.default_workload,
                    format!("{DEFAULT_WORKLOAD_FIELD} {}", p.default_workload),
                ),
            };
            if then == k {
                format!(
                    "; to keep them set {ENABLE_FLAG}=true in ClusterPolicy {} (cluster-wide: every labelled GPU node then follows its label)",
                    p.name
                )
            } else {
                format!(
                    "; setting {ENABLE_FLAG}=true alone would not keep them: the operator would then apply {then} here ({by}); to keep them: {relabel} and set {ENABLE_FLAG}=true in ClusterPolicy {} (cluster-wide)",
                    p.name
                )
            }
        }
        _ => format!("; to keep them: {relabel}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::finding::Severity;

    /// A node with `res` in both capacity and allocatable.
    fn node(label: Option<&str>, res: &[(&str, &str)]) -> NodeInfo {
        crate::testkit::gpu_node("n", label, res)
    }

    fn node_rule(rule: NodeRule, n: &NodeInfo) -> Option<Finding> {
        rule(&NodeFacts::gather(n, &Classifier::default()))
    }

    /// The findings of `rule` over every resource of `n`.
    fn resource_rule(rule: ResourceRule, n: &NodeInfo) -> Vec<Finding> {
        let facts = NodeFacts::gather(n, &Classifier::default());
        facts
            .resources
            .iter()
            .filter_map(|r| rule(&facts, r))
            .collect()
    }

    #[test]
    fn gather_leaves_out_non_nvidia_names_and_parses_gpu_quantities() {
        let n = node(
            Some("container"),
            &[
                ("cpu", "8"),
                ("nvidia.com/gpu", "4"),
                ("nvidia.com/hostdev", "2"),
            ],
        );
        let f = NodeFacts::gather(&n, &Classifier::default());
        let names: Vec<&str> = f.resources.iter().map(|r| r.entry.name.as_str()).collect();
        assert_eq!(names, ["nvidia.com/gpu", "nvidia.com/hostdev"]);
        assert_eq!(
            f.resources[0].allocatable,
            Parsed::Count(Quantity::parse("4").unwrap())
        );
        // Non-GPU names are listed, not parsed or advertised.
        assert_eq!(f.resources[1].allocatable, Parsed::Absent);
        assert!(!f.resources[1].entry.advertised);
        assert_eq!(f.advertised().count(), 1);
    }

    #[test]
    fn parsed_count_rejects_fractions_negatives_and_garbage_with_the_reason() {
        let why = |s| match Parsed::count(Some(s)) {
            Parsed::Invalid { why, .. } => why,
            other => panic!("{s}: {other:?}"),
        };
        assert!(why("1.5").contains("whole numbers"), "{}", why("1.5"));
        assert!(why("-1").contains("negative"));
        assert!(why("four").starts_with("not a valid quantity"));
        assert_eq!(Parsed::count(None), Parsed::Absent);
        assert_eq!(
            Parsed::count(Some("2k")),
            Parsed::Count(Quantity::parse("2000").unwrap())
        );
    }

    #[test]
    fn network_operator_resource_is_ignored_as_info() {
        let n = node(Some("container"), &[("nvidia.com/hostdev", "2")]);
        let f = resource_rule(ignored_resource, &n);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].code, f[0].severity),
            (Code::IgnoredResource, Severity::Info)
        );
        assert_eq!(f[0].resource.as_deref(), Some("nvidia.com/hostdev"));
        let gpu = node(Some("container"), &[("nvidia.com/gpu", "2")]);
        assert!(resource_rule(ignored_resource, &gpu).is_empty());
    }

    #[test]
    fn invalid_quantity_is_an_error_labelled_or_not() {
        let labelled = node(Some("container"), &[("nvidia.com/gpu", "1.5")]);
        let f = resource_rule(invalid_allocatable, &labelled);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(
            f[0].message,
            "status.allocatable[\"nvidia.com/gpu\"] is \"1.5\", not a valid device count (extended resources are whole numbers)"
        );
        assert_eq!(resource_rule(invalid_capacity, &labelled).len(), 1);
        let unlabelled = node(None, &[("nvidia.com/gpu", "x")]);
        assert_eq!(
            resource_rule(invalid_capacity, &unlabelled)[0].severity,
            Severity::Error
        );
    }

    #[test]
    fn relabelled_node_keeps_a_stale_zero() {
        let n = node(
            Some("vm-passthrough"),
            &[("nvidia.com/gpu", "0"), ("nvidia.com/GA102GL_A10", "2")],
        );
        let f = resource_rule(stale_zero, &n);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].resource.as_deref(), Some("nvidia.com/gpu"));
        assert!(f[0].message.contains("status.allocatable with 0"), "{f:?}");
    }

    #[test]
    fn unhealthy_devices_show_as_capacity_above_allocatable() {
        let mut n = node(Some("container"), &[("nvidia.com/gpu", "4")]);
        n.allocatable
            .as_mut()
            .unwrap()
            .insert("nvidia.com/gpu".into(), "3".into());
        let f = resource_rule(capacity_exceeds_allocatable, &n);
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("capacity 4 > allocatable 3"), "{f:?}");
        let healthy = node(Some("container"), &[("nvidia.com/gpu", "4")]);
        assert!(resource_rule(capacity_exceeds_allocatable, &healthy).is_empty());
    }

    #[test]
    fn old_plugin_advertises_a_hex_id_and_it_is_not_also_mixed_case() {
        let n = node(Some("vm-passthrough"), &[("nvidia.com/26b5", "1")]);
        let f = resource_rule(hex_id_fallback, &n);
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("0x26b5"), "{f:?}");
        assert!(resource_rule(mixed_case_model, &n).is_empty());
    }

    #[test]
    fn a_lower_case_model_name_is_flagged_only_when_advertised() {
        let n = node(
            Some("vm-passthrough"),
            &[("nvidia.com/TU104GL_Tesla_T4", "1")],
        );
        assert_eq!(resource_rule(mixed_case_model, &n).len(), 1);
        let zero = node(
            Some("vm-passthrough"),
            &[("nvidia.com/TU104GL_Tesla_T4", "0")],
        );
        assert!(resource_rule(mixed_case_model, &zero).is_empty());
    }

    #[test]
    fn an_unlabelled_node_advertising_gpus_is_warned_and_one_without_is_not() {
        let n = node(None, &[("nvidia.com/gpu", "8")]);
        let f = node_rule(unlabelled_gpu_node, &n).unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(
            f.message
                .ends_with("the node advertises nvidia.com/gpu=8 (container GPU)"),
            "{}",
            f.message
        );
        assert!(node_rule(unlabelled_gpu_node, &node(None, &[("nvidia.com/gpu", "0")])).is_none());
        assert!(
            node_rule(
                unlabelled_gpu_node,
                &node(Some("container"), &[("nvidia.com/gpu", "8")])
            )
            .is_none()
        );
    }

    #[test]
    fn a_misspelt_label_value_is_an_error() {
        let n = node(Some("vm_passthrough"), &[("nvidia.com/gpu", "1")]);
        let f = node_rule(invalid_label_value, &n).unwrap();
        assert_eq!(f.severity, Severity::Error);
        assert!(f.message.contains("vm_passthrough"), "{}", f.message);
        // A misspelt label is not also judged against the advertised class.
        assert!(node_rule(wrong_class_resource, &n).is_none());
        assert!(node_rule(no_gpu_resource, &n).is_none());
    }

    #[test]
    fn a_passthrough_label_on_a_container_gpu_node_is_the_wrong_class() {
        let n = node(Some("vm-passthrough"), &[("nvidia.com/gpu", "4")]);
        let f = node_rule(wrong_class_resource, &n).unwrap();
        assert_eq!(f.resource.as_deref(), Some("nvidia.com/gpu"));
        assert_eq!(
            f.message,
            "label vm-passthrough expects a device-model resource, but the node advertises nvidia.com/gpu=4 (container GPU)"
        );
        let right = node(Some("vm-passthrough"), &[("nvidia.com/GA102GL_A10", "4")]);
        assert!(node_rule(wrong_class_resource, &right).is_none());
    }

    #[test]
    fn the_wrong_class_reason_lists_every_advertised_gpu_name() {
        let n = node(
            Some("vm-vgpu"),
            &[("nvidia.com/gpu", "2"), ("nvidia.com/NVIDIA_A10-12Q", "4")],
        );
        let f = node_rule(wrong_class_resource, &n).unwrap();
        assert_eq!(
            f.message,
            "label vm-vgpu expects a vGPU type resource, but the node advertises nvidia.com/gpu=2 (container GPU) as well as nvidia.com/NVIDIA_A10-12Q=4 (vGPU type)"
        );
    }

    #[test]
    fn a_label_value_off_by_case_or_a_typo_says_which_it_was_meant_to_be() {
        for (value, meant) in [
            ("Vm-Passthrough", "vm-passthrough"),
            ("vm_vgpu", "vm-vgpu"),
            ("Container", "container"),
        ] {
            let n = node(Some(value), &[("nvidia.com/gpu", "1")]);
            let f = node_rule(invalid_label_value, &n).unwrap();
            assert!(
                f.message.ends_with(&format!("; did you mean {meant}?")),
                "{}",
                f.message
            );
        }
        let far = node(Some("gpu"), &[("nvidia.com/gpu", "1")]);
        assert!(
            !node_rule(invalid_label_value, &far)
                .unwrap()
                .message
                .contains("did you mean")
        );
    }

    #[test]
    fn no_gpu_resource_says_which_names_are_zero_or_capacity_only() {
        let mut n = node(Some("vm-vgpu"), &[("nvidia.com/gpu", "0")]);
        n.capacity
            .insert("nvidia.com/NVIDIA_A10-12Q".into(), "2".into());
        let f = node_rule(no_gpu_resource, &n).unwrap();
        assert_eq!(
            f.message,
            "label vm-vgpu expects a vGPU type resource, but the node advertises no GPU resource (nvidia.com/gpu listed with 0; nvidia.com/NVIDIA_A10-12Q only in status.capacity (=2), not in status.allocatable)"
        );
        // An invalid quantity is reported as such, not as "no GPU resource".
        let bad = node(Some("vm-vgpu"), &[("nvidia.com/NVIDIA_A10-12Q", "x")]);
        assert!(node_rule(no_gpu_resource, &bad).is_none());
        let empty = node(Some("container"), &[]);
        assert!(
            node_rule(no_gpu_resource, &empty)
                .unwrap()
                .message
                .ends_with("advertises no GPU resource")
        );
    }

    #[test]
    fn at_most_one_label_rule_fires_per_node() {
        let nodes = [
            node(None, &[("nvidia.com/gpu", "1")]),
            node(Some("bogus"), &[]),
            node(Some("container"), &[("nvidia.com/GA102GL_A10", "1")]),
            node(Some("container"), &[]),
            node(Some("container"), &[("nvidia.com/gpu", "1")]),
        ];
        let fired: Vec<usize> = nodes
            .iter()
            .map(|n| {
                NODE_RULES
                    .iter()
                    .filter(|(_, r)| node_rule(*r, n).is_some())
                    .count()
            })
            .collect();
        assert_eq!(fired, [1, 1, 1, 1, 0]);
    }

    #[test]
    fn each_rule_is_listed_under_the_code_it_reports() {
        let nodes = [
            node(Some("container"), &[("nvidia.com/hostdev", "1")]),
            node(Some("vm-passthrough"), &[("nvidia.com/26b5", "1")]),
            node(Some("vm-passthrough"), &[("nvidia.com/Ab_c", "1")]),
            node(Some("container"), &[("nvidia.com/gpu", "0")]),
            node(None, &[("nvidia.com/gpu", "x")]),
        ];
        for n in &nodes {
            let facts = NodeFacts::gather(n, &Classifier::default());
            for (code, rule) in RESOURCE_RULES {
                for r in &facts.resources {
                    if let Some(f) = rule(&facts, r) {
                        assert_eq!(f.code, code);
                    }
                }
            }
            for (code, rule) in NODE_RULES {
                if let Some(f) = rule(&facts) {
                    assert_eq!(f.code, code);
                }
            }
        }
    }
}
