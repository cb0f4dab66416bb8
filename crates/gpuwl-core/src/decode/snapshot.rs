//! What one read of a live cluster gives the analyses (read by gpuwl's `input::snapshot`):
//! all nodes and all pods, the GPU Operator's ClusterPolicy status and, when asked,
//! KubeVirt's `permittedHostDevices`, the DRA objects. `inventory` and `explain` both read
//! through it.

use crate::model::dra::{DraObjects, DraSource};
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::node::NodeInfo;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;

/// What a live cluster offers the analyses.
pub struct Snapshot {
    /// All nodes.
    pub nodes: Vec<NodeInfo>,
    /// All pods.
    pub pods: Vec<PodInfo>,
    /// The ClusterPolicy, or why there is none.
    pub policy: PolicyStatus,
    /// KubeVirt's `permittedHostDevices`, when asked for and readable.
    pub kubevirt: Option<PermittedHostDevices>,
    /// DRA DeviceClasses, ResourceSlices and ResourceClaims (empty when not served).
    pub dra: DraObjects,
    /// Whether DRA objects were listed, or why not.
    pub dra_source: DraSource,
    /// Kueue's objects, when read (the live cluster serves `kueue.x-k8s.io`, or a
    /// snapshot file holds them).
    pub kueue: Option<crate::model::kueue::KueueObjects>,
}
