//! The object `explain` names on a live cluster ([`Object`]), read beside the
//! [`crate::model::snapshot::Snapshot`] it is explained against.

/// One object `explain` names on a live cluster, as read beside the [`crate::model::snapshot::Snapshot`] it is
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
