//! The quota layer: Kueue's objects as gpuwl reads them (kubernetes-sigs/kueue
//! `apis/kueue/v1beta2`: `resourceflavor_types.go`, `clusterqueue_types.go`,
//! `localqueue_types.go`, `workload_types.go`; v1beta1 has the same fields here).
//!
//! A ResourceFlavor is a node pool chosen by node labels: Kueue adds its `nodeLabels` to the
//! admitted pods' node selector and its `tolerations` to their tolerations
//! (`pkg/podset/podset.go` `FromAssignment`), and admits a workload in a flavor only when
//! the workload tolerates the flavor's `nodeTaints` (`pkg/scheduler/flavorassigner/
//! flavorassigner.go`). A ClusterQueue gives each flavor a `nominalQuota` per resource
//! name it covers; Kueue counts requests against it and never looks at nodes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::node::Taint;
use crate::model::pod::Toleration;

/// A `kueue.x-k8s.io` ResourceFlavor (cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceFlavor {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeLabels`: every one must be on a node of the flavor.
    pub node_labels: BTreeMap<String, String>,
    /// `spec.nodeTaints`: taints the flavor's nodes carry; a workload must tolerate them.
    pub node_taints: Vec<Taint>,
    /// `spec.tolerations`: added to the pods admitted in this flavor.
    pub tolerations: Vec<Toleration>,
}

/// One `resources[]` entry of a flavor in a ClusterQueue's resource group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceQuota {
    /// `name`: the resource name (`nvidia.com/gpu`, `cpu`, …).
    pub name: String,
    /// `nominalQuota` in thousandths (`4` → 4000, `500m` → 500), rounded up.
    pub nominal_milli: i64,
    /// `nominalQuota` as written.
    pub nominal_raw: String,
    /// `borrowingLimit` in thousandths, when set: how much this ClusterQueue may borrow
    /// of the name in the flavor from its cohort beyond `nominalQuota` (`None`: no limit,
    /// kubernetes-sigs/kueue `apis/kueue/v1beta2/clusterqueue_types.go` `ResourceQuota`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit_milli: Option<i64>,
    /// `lendingLimit` in thousandths, when set: how much of `nominalQuota` its cohort may
    /// borrow (`None`: all of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lending_limit_milli: Option<i64>,
}

/// One `flavors[]` entry of a ClusterQueue's resource group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlavorQuotas {
    /// `name`: the ResourceFlavor.
    pub flavor: String,
    /// `resources[]`.
    pub resources: Vec<ResourceQuota>,
}

/// One `spec.resourceGroups[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceGroup {
    /// `coveredResources`.
    pub covered: Vec<String>,
    /// `flavors[]`, in Kueue's order of trial.
    pub flavors: Vec<FlavorQuotas>,
}

/// A `kueue.x-k8s.io` ClusterQueue (cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClusterQueue {
    /// `metadata.name`.
    pub name: String,
    /// `spec.cohortName` (v1beta2) or `spec.cohort` (v1beta1), when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// `spec.resourceGroups[]`.
    pub groups: Vec<ResourceGroup>,
    /// `spec.flavorFungibility.whenCanBorrow: TryNextFlavor`: a flavor that fits only by
    /// borrowing from the cohort does not stop the search (Kueue's default, `MayStopSearch`,
    /// takes it; kubernetes-sigs/kueue `apis/kueue/v1beta2/clusterqueue_types.go`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub try_next_flavor_when_borrowing: bool,
    /// `status.flavorsReservation[]`: per flavor, per resource, the quota reserved now, in
    /// thousandths.
    pub reserved: BTreeMap<String, BTreeMap<String, i64>>,
}

impl ClusterQueue {
    /// The group covering `resource`, if any (a resource is in at most one group).
    pub fn group_of(&self, resource: &str) -> Option<&ResourceGroup> {
        self.groups
            .iter()
            .find(|g| g.covered.iter().any(|c| c == resource))
    }
}

/// A `kueue.x-k8s.io` LocalQueue (namespaced): where a workload's `queue-name` points.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LocalQueue {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.clusterQueue`.
    pub cluster_queue: String,
}

/// One `status.conditions[]` entry of a Workload (`metav1.Condition`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WlCondition {
    /// `type`: `QuotaReserved`, `Admitted`, `Finished`, `Evicted`, …
    #[serde(rename = "type")]
    pub type_: String,
    /// `status`: `True`, `False`, `Unknown`.
    pub status: String,
    /// `reason`, e.g. `Pending`, `QuotaReserved`.
    pub reason: String,
    /// `message`: Kueue's words.
    pub message: String,
}

/// One `spec.podSets[]` entry: `count` pods of one template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PodSet {
    /// `name`.
    pub name: String,
    /// `count`.
    pub count: i64,
    /// Per pod: the sum of the template's container requests (limits where no request),
    /// per resource name, as Kueue counts them for the simple case (no init containers
    /// larger than the rest, no overhead), in thousandths.
    pub requests: BTreeMap<String, i64>,
}

/// One `status.admission.podSetAssignments[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PodSetAssignment {
    /// `name`: the pod set.
    pub name: String,
    /// `flavors`: the flavor chosen per resource name.
    pub flavors: BTreeMap<String, String>,
}

/// A `kueue.x-k8s.io` Workload (namespaced): what Kueue admits or holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The owner (`metadata.ownerReferences[]` with `controller: true`) as `Kind/name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `spec.queueName`: the LocalQueue in the workload's namespace.
    pub queue_name: String,
    /// `spec.podSets[]`.
    pub pod_sets: Vec<PodSet>,
    /// `status.conditions[]`.
    pub conditions: Vec<WlCondition>,
    /// `status.admission.clusterQueue`, when quota is reserved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted_to: Option<String>,
    /// `status.admission.podSetAssignments[]`.
    pub assignments: Vec<PodSetAssignment>,
}

impl Workload {
    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&WlCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether condition `type_` is `True`.
    pub fn is(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The total request of `resource` over every pod set (count × per pod), in
    /// thousandths (saturating).
    pub fn total_milli(&self, resource: &str) -> i64 {
        self.pod_sets
            .iter()
            .filter_map(|ps| {
                ps.requests
                    .get(resource)
                    .map(|q| q.saturating_mul(ps.count))
            })
            .fold(0i64, i64::saturating_add)
    }

    /// The resource names any pod set requests (sorted, once each).
    pub fn resources(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .pod_sets
            .iter()
            .flat_map(|ps| ps.requests.keys().map(String::as_str))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Every Kueue object read from one source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KueueObjects {
    /// ResourceFlavors, sorted by name.
    pub flavors: Vec<ResourceFlavor>,
    /// ClusterQueues, sorted by name.
    pub cluster_queues: Vec<ClusterQueue>,
    /// LocalQueues, sorted by namespace and name.
    pub local_queues: Vec<LocalQueue>,
    /// Workloads, sorted by namespace and name.
    pub workloads: Vec<Workload>,
}

impl KueueObjects {
    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.flavors.is_empty()
            && self.cluster_queues.is_empty()
            && self.local_queues.is_empty()
            && self.workloads.is_empty()
    }

    /// The flavor named `name`.
    pub fn flavor(&self, name: &str) -> Option<&ResourceFlavor> {
        self.flavors.iter().find(|f| f.name == name)
    }

    /// The ClusterQueue named `name`.
    pub fn cluster_queue(&self, name: &str) -> Option<&ClusterQueue> {
        self.cluster_queues.iter().find(|c| c.name == name)
    }

    /// The LocalQueue `namespace/name`.
    pub fn local_queue(&self, namespace: &str, name: &str) -> Option<&LocalQueue> {
        self.local_queues
            .iter()
            .find(|q| q.namespace == namespace && q.name == name)
    }
}

/// The label a Job or pod names its LocalQueue with (`kueue.x-k8s.io/queue-name`,
/// `pkg/controller/constants/constants.go` `QueueLabel`).
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// The scheduling gate Kueue's pod integration puts on the pods it manages until admission
/// (`pkg/controller/jobs/pod/constants` `SchedulingGateName`).
pub const ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

/// A quantity in thousandths, as the quota figures are shown: `4` for 4000, `1.5` for 1500.
pub fn milli_str(m: i64) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{}m", m)
    }
}
