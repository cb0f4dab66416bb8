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

use std::collections::BTreeSet;

use serde_json::Value;

use crate::decode::pods::{from_object, run_strategy};
use crate::model::pod::{ObjectKind, PodInfo, wants_running};

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

fn meta_key(v: &Value) -> Option<(String, String)> {
    let md = v.get("metadata")?;
    let name = md.get("name")?.as_str()?;
    let ns = md
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    Some((ns.to_owned(), name.to_owned()))
}

/// Whether a VMI is placed (`status.nodeName`), settled (phase `Running`, `Succeeded`,
/// `Failed`) or being deleted: it never waits for a launcher
/// ([`waiting_without_launcher`]).
fn settled_vmi(v: &Value) -> bool {
    let placed = v
        .pointer("/status/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let settled = matches!(
        v.pointer("/status/phase").and_then(Value::as_str),
        Some("Running" | "Succeeded" | "Failed")
    );
    placed || settled || v.pointer("/metadata/deletionTimestamp").is_some()
}

/// `v` as [`waiting_without_launcher`] needs it: a VMI that is placed, settled or being
/// deleted (never waiting) reduced to its kind, name, namespace and status phase and node
/// (what says its VM has a VMI); anything else as it is. What `gpuwl serve` keeps of each
/// VMI it watches.
pub fn slim_settled_vmi(v: Value) -> Value {
    if v.get("kind").and_then(Value::as_str) != Some("VirtualMachineInstance") || !settled_vmi(&v) {
        return v;
    }
    let md = &v["metadata"];
    let mut meta = serde_json::Map::new();
    for k in ["name", "namespace", "deletionTimestamp", "ownerReferences"] {
        if let Some(x) = md.get(k) {
            meta.insert(k.into(), x.clone());
        }
    }
    let mut status = serde_json::Map::new();
    for k in ["phase", "nodeName"] {
        if let Some(x) = v.pointer(&format!("/status/{k}")) {
            status.insert(k.into(), x.clone());
        }
    }
    serde_json::json!({"kind": "VirtualMachineInstance", "metadata": meta, "status": status})
}

/// The KubeVirt objects that wait for GPUs with no virt-launcher pod among `pods`, read
/// as the pods they stand for ([`crate::decode::pods::from_object`]), so that every
/// command judges them beside the pods (one verdict per VM):
///
/// - each VMI (`vmis`, JSON with `kind` set or not) that is not placed (no
///   `status.nodeName`, phase neither `Running`, `Succeeded` nor `Failed`), is not being
///   deleted, asks for a device, and has no non-terminal launcher pod in its namespace
///   ([`PodInfo::launcher_vmi`]): virt-controller refused to render one
///   (`Synchronized=False`, e.g. a name `permittedHostDevices` does not list,
///   kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`) or has not yet;
/// - each VM (`vms`) whose run strategy wants it running ([`wants_running`]), that asks
///   for a device and has no VMI among `vmis`: virt-api refused the VMI
///   (`pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go`), or
///   virt-controller has not created it yet. Read through its `spec.template`.
///
/// An object that does not read as a pod is left out (a live list is not the user's file).
pub fn waiting_without_launcher(vmis: &[Value], vms: &[Value], pods: &[PodInfo]) -> Vec<PodInfo> {
    let launchers: BTreeSet<(&str, &str)> = pods
        .iter()
        .filter(|p| !p.is_terminal())
        .filter_map(|p| Some((p.namespace.as_str(), p.launcher_vmi()?)))
        .collect();
    let with_kind = |v: &Value, kind: &str| {
        let mut v = v.clone();
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), Value::String(kind.into()));
        }
        v
    };
    let mut out = Vec::new();
    let mut vmi_keys = BTreeSet::new();
    for v in vmis {
        let Some(key) = meta_key(v) else { continue };
        vmi_keys.insert(key.clone());
        if settled_vmi(v) || launchers.contains(&(key.0.as_str(), key.1.as_str())) {
            continue;
        }
        if let Ok(p) = from_object(&with_kind(v, "VirtualMachineInstance"))
            && !p.requests.is_empty()
        {
            out.push(p);
        }
    }
    for v in vms {
        let Some(key) = meta_key(v) else { continue };
        if vmi_keys.contains(&key)
            || !wants_running(run_strategy(v))
            || v.pointer("/metadata/deletionTimestamp").is_some()
        {
            continue;
        }
        if let Ok(p) = from_object(&with_kind(v, "VirtualMachine"))
            && !p.requests.is_empty()
        {
            out.push(p);
        }
    }
    out
}

/// Whether `p`, read from a file among `all` (a `kubectl get pods,vmis,vms -A` list), waits
/// for GPUs with no virt-launcher pod, as [`waiting_without_launcher`] decides for live
/// objects: a Pod always counts as itself; a VMI when it is not placed (no node, phase
/// neither `Running`, `Succeeded` nor `Failed`) and no non-terminal launcher pod of it is
/// in `all` (that pod is judged instead); a VM when its run strategy wants it running
/// ([`crate::model::pod::VmiShape::wants_running`]) and no VMI of it is in `all`.
pub fn waits_without_launcher(p: &PodInfo, all: &[PodInfo]) -> bool {
    let same = |q: &PodInfo| q.namespace == p.namespace;
    match p.kind {
        ObjectKind::Pod => true,
        ObjectKind::VirtualMachineInstance => {
            p.node_name.is_none()
                && !matches!(p.phase.as_deref(), Some("Running" | "Succeeded" | "Failed"))
                && !all.iter().any(|q| {
                    same(q) && !q.is_terminal() && q.launcher_vmi() == Some(p.name.as_str())
                })
        }
        ObjectKind::VirtualMachine => {
            p.vmi_shape.as_ref().and_then(|s| s.wants_running) == Some(true)
                && !all.iter().any(|q| {
                    same(q) && q.kind == ObjectKind::VirtualMachineInstance && q.name == p.name
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vmi(name: &str, device: &str, status: Value) -> Value {
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
               "metadata": {"name": name, "namespace": "gpu-vm"},
               "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": device}]}}},
               "status": status})
    }

    fn vm(name: &str, device: &str, run: &str) -> Value {
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
               "metadata": {"name": name, "namespace": "gpu-vm"},
               "spec": {"runStrategy": run, "template": {"spec": {"domain": {"devices": {
                   "gpus": [{"name": "g", "deviceName": device}]}}}}}})
    }

    fn launcher(vmi: &str, phase: &str) -> PodInfo {
        PodInfo {
            namespace: "gpu-vm".into(),
            name: format!("virt-launcher-{vmi}-abcde"),
            phase: Some(phase.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_refused_or_unrendered_vm_stands_for_its_launcher() {
        let vmis = [
            // Refused by virt-controller: Pending, no launcher (the lab's vm-cross).
            vmi(
                "vm-cross",
                "nvidia.com/gpu",
                json!({"phase": "Pending", "conditions": [{"type": "Synchronized", "status": "False",
                       "reason": "FailedCreate", "message": "GPU nvidia.com/gpu is not permitted"}]}),
            ),
            // A typo, no status yet.
            vmi("typo", "nvidia.com/GA102GL_A1O", json!({})),
            // Its launcher waits: the launcher is the pod judged, not the VMI.
            vmi(
                "waits",
                "nvidia.com/GA102GL_A10",
                json!({"phase": "Scheduling"}),
            ),
            // Placed or running: not waiting.
            vmi(
                "runs",
                "nvidia.com/GA102GL_A10",
                json!({"phase": "Running", "nodeName": "n1"}),
            ),
        ];
        let vms = [
            // Its VMI exists (vm-cross): judged through the VMI only.
            vm("vm-cross", "nvidia.com/gpu", "Always"),
            // Wants to run, no VMI: virt-api refused it.
            vm("refused", "nvidia.com/GA102GL_A10", "Always"),
            // Stopped: nothing waits.
            vm("stopped", "nvidia.com/GA102GL_A10", "Halted"),
        ];
        let pods = [launcher("waits", "Pending"), launcher("typo", "Failed")];
        let got = waiting_without_launcher(&vmis, &vms, &pods);
        let keys: Vec<(ObjectKind, String)> = got.iter().map(|p| (p.kind, p.key())).collect();
        assert_eq!(
            keys,
            [
                (
                    ObjectKind::VirtualMachineInstance,
                    "gpu-vm/vm-cross".to_owned()
                ),
                (ObjectKind::VirtualMachineInstance, "gpu-vm/typo".to_owned()),
                (ObjectKind::VirtualMachine, "gpu-vm/refused".to_owned()),
            ]
        );
        assert_eq!(got[0].requests.get("nvidia.com/gpu"), Some(&1));
        assert!(got.iter().all(PodInfo::is_unbound));
        assert!(!wants_running(Some("Manual")) && wants_running(Some("RerunOnFailure")));
        // serve keeps a running VMI's name only, and judges the same.
        let slim: Vec<Value> = vmis.iter().cloned().map(slim_settled_vmi).collect();
        assert_eq!(
            slim[3],
            json!({"kind": "VirtualMachineInstance",
                   "metadata": {"name": "runs", "namespace": "gpu-vm"},
                   "status": {"phase": "Running", "nodeName": "n1"}})
        );
        assert_eq!(slim[0], vmis[0]);
        assert_eq!(waiting_without_launcher(&slim, &vms, &pods), got);
    }
}
