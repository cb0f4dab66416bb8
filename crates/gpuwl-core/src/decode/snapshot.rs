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

/// One object `explain` names on a live cluster, as read beside the [`Snapshot`] it is
/// explained against (gpuwl's `input::gather`, with the object named).
#[derive(Debug)]
pub enum Object {
    /// A pod.
    Pod(crate::model::pod::PodInfo),
    /// A VirtualMachine or VirtualMachineInstance, its VMI and launcher pod.
    Virt(crate::decode::virt::VmObjects),
    /// A Job, as Kueue manages it.
    Job(JobRead),
}

/// A Job read for `explain job`: the object itself and its first pod's name.
#[derive(Debug)]
pub struct JobRead {
    /// The Job's namespace.
    pub namespace: String,
    /// The Job's name.
    pub name: String,
    /// The Job (JSON, as the API serves it).
    pub job: serde_json::Value,
    /// The smallest name among the Job's pods (label `batch.kubernetes.io/job-name`), `None`
    /// when it has none; `Err` when they could not be listed (said only after the Kueue
    /// checks, which do not need them).
    pub first_pod: crate::error::Result<Option<String>>,
}

impl std::convert::From<crate::decode::virt::VmObjects> for Object {
    fn from(o: crate::decode::virt::VmObjects) -> Object {
        Object::Virt(o)
    }
}

impl std::convert::From<JobRead> for Object {
    fn from(j: JobRead) -> Object {
        Object::Job(j)
    }
}
