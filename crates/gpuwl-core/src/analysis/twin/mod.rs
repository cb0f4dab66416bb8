//! The twin's decisions, without the twin (`gpuwl whatif`, `gpuwl plan`, `gpuwl relabel`'s
//! preview): what a relabelled node advertises by gpuwl's model ([`predict`]), the fewest
//! relabels that serve the pending demand ([`plan`]), what a twin's outcome means and the
//! steps that apply it ([`report`]), and the quota layer's side of the relabels
//! ([`quota`]). Pure: gpuwl's `twin` module builds the twin on a local control plane, writes
//! to it and reads it back, and hands the pods and nodes it read to these.

pub mod plan;
pub mod predict;
pub mod quota;
pub mod report;

use crate::model::pod::{ObjectKind, PodInfo};

/// Suffix of the virt-launcher pod the twin creates for a VMI or VM: five characters, as
/// KubeVirt's generated suffix (kubevirt/kubevirt `pkg/virt-controller/services/template.go`),
/// so that [`PodInfo::launcher_vmi`] finds the VMI again.
pub(crate) const LAUNCHER_SUFFIX: &str = "gpuwl";

/// The name of the twin pod for `pod`: its own name, or `virt-launcher-<vmi>-gpuwl` for a
/// VMI or VM (the pod KubeVirt would create for it).
pub fn pod_name(pod: &PodInfo) -> String {
    match pod.kind {
        ObjectKind::Pod => pod.name.clone(),
        _ => format!("virt-launcher-{}-{LAUNCHER_SUFFIX}", pod.name),
    }
}
