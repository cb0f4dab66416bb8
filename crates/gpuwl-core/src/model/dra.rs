//! Dynamic Resource Allocation (`resource.k8s.io/v1`): the slim records of DeviceClasses,
//! ResourceSlices (devices with attributes, capacity, shared counters and the counters each
//! device consumes) and ResourceClaims (requests and allocation results) that `inventory`
//! and `explain` read, and the pod's `spec.resourceClaims`.
//!
//! Shapes follow kubernetes/kubernetes `staging/src/k8s.io/api/resource/v1/types.go`
//! (GA since v1.34):
//! - `DeviceClass.spec.selectors[].cel.expression`, `spec.extendedResourceName`;
//! - `ResourceSlice.spec`: `driver`, `pool.name`, `nodeName` | `nodeSelector` | `allNodes`,
//!   `sharedCounters[]` (`name`, `counters: {name: {value}}`), `devices[]` (`name`,
//!   `attributes: {QualifiedName: {int|bool|string|version}}`, `capacity: {QualifiedName:
//!   {value}}`, `consumesCounters[]` (`counterSet`, `counters: {name: {value}}`));
//! - `ResourceClaim.spec.devices.requests[]`: `name`, `exactly` (`deviceClassName`,
//!   `selectors[].cel.expression`, `allocationMode` `ExactCount`|`All`, `count`) or
//!   `firstAvailable[]` (the same fields per subrequest);
//!   `status.allocation.devices.results[]` (`request`, `driver`, `pool`, `device`),
//!   `status.reservedFor[]` (the consumers: pods).
//!
//! A slice carries either `sharedCounters` or `devices`, not both (the v1.36 API server
//! refuses both in one slice: "only one of `sharedCounters` or `devices` is allowed"), so
//! counters and the devices consuming them are joined across the slices of one pool.
//!
//! An attribute or capacity name without a domain belongs to the driver's domain
//! (`QualifiedName` in `types.go`: "If the domain is not specified, it defaults to the
//! driver name"); the records store every name qualified, `gpu.nvidia.com/type`.
//!
//! NVIDIA's DRA driver for GPUs (NVIDIA/k8s-dra-driver-gpu
//! `cmd/gpu-kubelet-plugin/deviceinfo.go`) publishes, under driver `gpu.nvidia.com`, the
//! string attributes `type` (`gpu`, `mig` or `vfio`), `uuid`, `productName` and
//! `pcieBusID` (among others); a GPU offered for passthrough appears as a `vfio` device
//! beside its `gpu` device, the two consuming one shared counter.

use std::collections::BTreeMap;

use serde::Serialize;

/// The API group and version read.
pub const API_VERSION: &str = "resource.k8s.io/v1";

/// The attribute NVIDIA's driver (and gpuwl's lab) names the kind of device with
/// (`gpu`, `mig`, `vfio`); unqualified, so in the driver's domain.
pub(crate) const TYPE_ATTRIBUTE: &str = "type";

/// Attributes that name one physical GPU, tried in order when a device consumes no shared
/// counter (NVIDIA/k8s-dra-driver-gpu `cmd/gpu-kubelet-plugin/deviceinfo.go`).
pub(crate) const IDENTITY_ATTRIBUTES: [&str; 2] = ["uuid", "pcieBusID"];

/// A device attribute value (`DeviceAttribute`: exactly one of `int`, `bool`, `string`,
/// `version`; a version is a semantic version string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AttrValue {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(String),
    /// `version` (semver text, e.g. `570.124.6`).
    Version(String),
}

impl AttrValue {
    /// The value as text (`gpu`, `7`, `true`, `1.2.3`).
    pub fn text(&self) -> String {
        match self {
            AttrValue::Int(i) => i.to_string(),
            AttrValue::Bool(b) => b.to_string(),
            AttrValue::String(s) | AttrValue::Version(s) => s.clone(),
        }
    }
}

/// A DeviceClass: the CEL selectors every device allocated through it must satisfy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    /// `metadata.name`.
    pub name: String,
    /// `spec.selectors[].cel.expression`, in order (all must be true).
    pub selectors: Vec<String>,
    /// `spec.extendedResourceName`: the extended resource a pod may request instead of a
    /// claim (the scheduler then allocates through this class).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended_resource_name: Option<String>,
}

/// One counter amount (`Counter.value`, a quantity) read as a whole number; `None` when
/// the quantity is not whole (kept verbatim in `raw`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Amount {
    /// The quantity as written (`1`, `80Gi`).
    pub raw: String,
    /// Its value in whole units (bytes for `80Gi`); `None` when fractional.
    pub value: Option<i64>,
}

/// A shared counter set of a ResourceSlice (`sharedCounters[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterSet {
    /// `name`, unique in the pool.
    pub name: String,
    /// Counter name → amount available.
    pub counters: BTreeMap<String, Amount>,
}

/// What a device takes from one counter set when allocated (`consumesCounters[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterUse {
    /// `counterSet`: a [`CounterSet::name`] of the same pool.
    pub counter_set: String,
    /// Counter name → amount consumed.
    pub counters: BTreeMap<String, Amount>,
}

/// One device of a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// `name`, unique in the pool.
    pub name: String,
    /// Attributes by qualified name (`gpu.nvidia.com/type`).
    pub attributes: BTreeMap<String, AttrValue>,
    /// Capacity by qualified name (`gpu.nvidia.com/memory`).
    pub capacity: BTreeMap<String, Amount>,
    /// `consumesCounters[]`.
    pub consumes_counters: Vec<CounterUse>,
    /// The device's own `nodeName` (with `perDeviceNodeSelection`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

/// A ResourceSlice: part of one driver's pool of devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    /// `metadata.name`.
    pub name: String,
    /// `spec.driver`, e.g. `gpu.nvidia.com`.
    pub driver: String,
    /// `spec.pool.name`.
    pub pool: String,
    /// `spec.nodeName`: the node the devices are local to; `None` for network-attached
    /// devices (`nodeSelector`, `allNodes`) or per-device node selection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// `spec.allNodes`.
    pub all_nodes: bool,
    /// `spec.sharedCounters[]`.
    pub shared_counters: Vec<CounterSet>,
    /// `spec.devices[]`.
    pub devices: Vec<Device>,
}

/// A request's CEL selectors and count, from `exactly` or one `firstAvailable[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestSpec {
    /// The subrequest's name (`None` for `exactly`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subrequest: Option<String>,
    /// `deviceClassName`.
    pub device_class: String,
    /// `selectors[].cel.expression`.
    pub selectors: Vec<String>,
    /// `allocationMode`: `All` when every matching device is asked for.
    pub all: bool,
    /// `count` (default 1) for `ExactCount`.
    pub count: i64,
}

/// One request of a claim (`spec.devices.requests[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRequest {
    /// `name`.
    pub name: String,
    /// `exactly` as one entry, or the `firstAvailable` alternatives in order.
    pub alternatives: Vec<RequestSpec>,
}

/// One allocated device (`status.allocation.devices.results[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDevice {
    /// `request` (`<request>/<subrequest>` for `firstAvailable`).
    pub request: String,
    /// `driver`.
    pub driver: String,
    /// `pool`.
    pub pool: String,
    /// `device`.
    pub device: String,
}

/// A ResourceClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.devices.requests[]`.
    pub requests: Vec<ClaimRequest>,
    /// Whether `status.allocation` is set.
    pub allocated: bool,
    /// `status.allocation.devices.results[]`.
    pub results: Vec<AllocatedDevice>,
    /// `status.reservedFor[]` as `resource/name` (e.g. `pods/job-a`).
    pub reserved_for: Vec<String>,
    /// The nodes `status.allocation.nodeSelector` names (`matchFields` `metadata.name In
    /// [...]`, as the allocator writes it for node-local devices); empty when it names
    /// none (not allocated, or devices reachable from every node).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocated_nodes: Vec<String>,
}

impl ResourceClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A ResourceClaimTemplate: the claim spec the resource claim controller copies into a
/// new ResourceClaim for each pod that names it in `spec.resourceClaims[]
/// .resourceClaimTemplateName` (kubernetes/kubernetes
/// `staging/src/k8s.io/api/resource/v1/types.go`, `ResourceClaimTemplateSpec.spec`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplate {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.spec.devices.requests[]`.
    pub requests: Vec<ClaimRequest>,
}

/// Everything DRA read from a file or a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraObjects {
    /// DeviceClasses.
    pub device_classes: Vec<DeviceClass>,
    /// ResourceSlices.
    pub resource_slices: Vec<ResourceSlice>,
    /// ResourceClaims.
    pub resource_claims: Vec<ResourceClaim>,
    /// ResourceClaimTemplates.
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
}

impl DraObjects {
    /// The DeviceClass named `name`.
    pub fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.device_classes.iter().find(|c| c.name == name)
    }

    /// The template `namespace/name`.
    pub fn template(&self, namespace: &str, name: &str) -> Option<&ResourceClaimTemplate> {
        self.resource_claim_templates
            .iter()
            .find(|c| c.namespace == namespace && c.name == name)
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&ResourceClaim> {
        self.resource_claims
            .iter()
            .find(|c| c.namespace == namespace && c.name == name)
    }
}

/// Whether DRA objects were read, and if not why (`inventory -o json` key `dra.status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state", content = "detail")]
pub enum DraSource {
    /// Read from the file named.
    File(String),
    /// Listed from the live cluster.
    Cluster,
    /// Not read because the cluster has no DRA: the reason (e.g. `resource.k8s.io/v1 is
    /// not served by this cluster`). Text output stays silent: there is nothing to miss.
    Skipped(String),
    /// Not read although the cluster may have DRA objects: the credentials may not list
    /// them (HTTP 403). Text output says so, since the inventory then lacks them.
    Denied(String),
}

impl DraSource {
    /// Whether the DRA objects beside it were read (from a file or the live cluster): the
    /// only ones an analysis takes; a skipped or denied read left them empty, which says
    /// nothing of the devices.
    pub fn was_read(&self) -> bool {
        matches!(self, DraSource::File(_) | DraSource::Cluster)
    }
}

/// One entry of a pod's `spec.resourceClaims[]`, with the claim it resolves to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodClaim {
    /// `name`: what containers refer to in `resources.claims[].name`.
    pub name: String,
    /// `resourceClaimName`: an existing claim in the pod's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
    /// `resourceClaimTemplateName`: a claim is made from this template per pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_claim_template_name: Option<String>,
    /// The claim made from the template, from `status.resourceClaimStatuses[]` (`None`
    /// until the controller made it, or when no claim is needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated_claim_name: Option<String>,
}

impl PodClaim {
    /// The ResourceClaim's name in the pod's namespace: `resourceClaimName`, else the
    /// generated claim of the template; `None` when the template has no claim yet.
    pub(crate) fn claim_name(&self) -> Option<&str> {
        self.resource_claim_name
            .as_deref()
            .or(self.generated_claim_name.as_deref())
    }
}

/// Qualifies an attribute or capacity name: a name without `/` is in the driver's domain.
pub(crate) fn qualify(driver: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("{driver}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_qualified_with_the_driver() {
        assert_eq!(qualify("gpu.nvidia.com", "type"), "gpu.nvidia.com/type");
        assert_eq!(
            qualify("gpu.nvidia.com", "resource.kubernetes.io/pcieRoot"),
            "resource.kubernetes.io/pcieRoot"
        );
    }

    #[test]
    fn pod_claim_resolves_template_through_status() {
        let mut c = PodClaim {
            name: "gpu".into(),
            resource_claim_name: None,
            resource_claim_template_name: Some("t".into()),
            generated_claim_name: None,
        };
        assert_eq!(c.claim_name(), None);
        c.generated_claim_name = Some("p-gpu-x7k2q".into());
        assert_eq!(c.claim_name(), Some("p-gpu-x7k2q"));
    }
}
