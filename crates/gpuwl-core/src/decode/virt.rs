//! A KubeVirt `VirtualMachine` or `VirtualMachineInstance` with its virt-launcher pod as
//! read for `gpuwl explain vm|vmi NS/NAME` ([`VmObjects`]; the live read is gpuwl's
//! `input::virt`), the labels that tie them together and the choice of the launcher.
//!
//! Facts (kubevirt/kubevirt):
//! - both kinds are `kubevirt.io/v1` (`virtualmachines`, `virtualmachineinstances`), a VM's
//!   VMI has the VM's name (`staging/src/kubevirt.io/api/core/v1/types.go`);
//! - virt-controller labels the launcher pod it makes for a VMI `kubevirt.io=virt-launcher`,
//!   `kubevirt.io/created-by=<VMI uid>` and (newer releases) `vm.kubevirt.io/name=<VMI
//!   name>` (`pkg/virt-controller/services/template.go`, the label names in
//!   `staging/src/kubevirt.io/api/core/v1/types.go`: `AppLabel`, `CreatedByLabel`,
//!   `VirtualMachineNameLabel`).

use serde_json::Value;

use crate::model::pod::{ObjectKind, PodInfo};

/// The label virt-controller puts on a launcher pod: the VMI's uid.
pub const CREATED_BY_LABEL: &str = "kubevirt.io/created-by";
/// The label virt-controller puts on a launcher pod: the VMI's name.
pub const VM_NAME_LABEL: &str = "vm.kubevirt.io/name";
/// The label (`kubevirt.io`) naming a KubeVirt component: `virt-launcher` on launcher pods.
pub const APP_LABEL: &str = "kubevirt.io";

/// A VM or VMI as read, with what belongs to it.
#[derive(Debug, Clone, PartialEq)]
pub struct VmObjects {
    /// What was asked for.
    pub kind: ObjectKind,
    /// The VirtualMachine (JSON, `kind` set); `None` when a VMI was asked for.
    pub vm: Option<Value>,
    /// The VirtualMachineInstance (JSON, `kind` set); `None` when the VM has none (stopped).
    pub vmi: Option<Value>,
    /// The launcher pod chosen ([`choose_launcher`]), if any.
    pub launcher: Option<PodInfo>,
    /// How the launcher was found (`kubevirt.io/created-by=<uid>`), for the notes.
    pub launcher_selector: Option<String>,
    /// How many launcher pods the selector found (several during a migration).
    pub launchers_found: usize,
}

/// Marks each virt-launcher pod among `pods` with whether a VirtualMachine owns its VMI
/// ([`PodInfo::vmi_owned_by_vm`]), from the list of VMIs (gpuwl's `input::virt::vmi_owners`); a launcher whose VMI is not
/// listed stays unknown.
pub fn mark_launchers(pods: &mut [PodInfo], owners: &std::collections::BTreeMap<String, bool>) {
    for p in pods {
        if let Some(vmi) = p.launcher_vmi() {
            let key = format!("{}/{vmi}", p.namespace);
            p.vmi_owned_by_vm = owners.get(&key).copied();
        }
    }
}

/// The launcher pod to explain among `found`: a waiting one (not bound, not terminal:
/// a new launcher, or a migration's target) first, else a running one, else the first.
pub fn choose_launcher(found: Vec<PodInfo>) -> Option<PodInfo> {
    let waiting = found.iter().position(PodInfo::is_unbound);
    let live = found.iter().position(|p| !p.is_terminal());
    let i = waiting.or(live).or((!found.is_empty()).then_some(0))?;
    found.into_iter().nth(i)
}
