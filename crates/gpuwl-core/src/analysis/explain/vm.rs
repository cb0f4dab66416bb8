//! Explaining a KubeVirt VM or VMI (`gpuwl explain vm|vmi NS/NAME`): the objects' own
//! conditions (`Synchronized=False` with KubeVirt's message, `Ready`, …), then the pod
//! that decides where the VM runs — its virt-launcher pod when one exists, named with the
//! VMI's device fields — or, without a launcher, the VMI (or the VM's template) itself.
//!
//! Facts (kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`):
//! `status.conditions[]` {type, status, reason, message} on both kinds;
//! `spec.runStrategy` (`Always`, `RerunOnFailure`, `Manual`, `Halted`, `Once`) or the older
//! `spec.running` on a VM; `status.printableStatus` on a VM; `status.phase` on a VMI; a VM
//! whose run strategy is `Always` recreates its VMI, and so its launcher pod, when either
//! is deleted.

use serde::Serialize;
use serde_json::Value;

use crate::analysis::explain::{Explanation, Inputs, explain};
use crate::decode::pods;
use crate::decode::virt::VmObjects;
use crate::error::{Error, Result};
use crate::model::pod::PodInfo;
use crate::text;

/// Longest condition message kept (characters); longer ones are cut with `…`.
pub(crate) const MAX_MESSAGE: usize = 300;

/// One condition of the VM or VMI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmCondition {
    /// `VM` or `VMI`.
    pub object: &'static str,
    /// `type`, e.g. `Synchronized`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `message` on one line, cut to [`MAX_MESSAGE`] characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One GPU or host device of the VMI spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmDevice {
    /// The device's `name` in the VMI (e.g. `gpu1`).
    pub name: String,
    /// Its `deviceName`: the resource its launcher pod requests.
    pub device_name: String,
    /// The field, e.g. `spec.domain.devices.gpus[0]` (of the VMI; of the VM:
    /// `spec.template.spec.domain.devices.gpus[0]`).
    pub field: String,
}

/// The KubeVirt side of an explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmView {
    /// `VirtualMachine` or `VirtualMachineInstance`: what was asked for.
    pub kind: &'static str,
    /// `namespace/name` of the object asked for.
    pub name: String,
    /// The VM's `spec.runStrategy` (or `Always`/`Halted` from the older `spec.running`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<String>,
    /// The VM's `status.printableStatus`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printable_status: Option<String>,
    /// `namespace/name` of the VMI, when one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmi: Option<String>,
    /// The VMI's `status.phase`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmi_phase: Option<String>,
    /// The VM's conditions, then the VMI's.
    pub conditions: Vec<VmCondition>,
    /// The virt-launcher pod explained (`namespace/name`), when one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
    /// The VMI's (or the VM template's) GPUs and host devices.
    pub devices: Vec<VmDevice>,
}

/// `s` on one line, cut to `max` characters with `…`.
pub fn short(s: &str, max: usize) -> String {
    let one = text::one_line(s);
    if one.chars().count() <= max {
        one
    } else {
        let mut t: String = one.chars().take(max).collect();
        t.push('…');
        t
    }
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// The conditions of `v` (`status.conditions[]`), entries without a type skipped.
pub fn conditions(object: &'static str, v: &Value) -> Vec<VmCondition> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    Some(VmCondition {
                        object,
                        type_: short(c.get("type")?.as_str()?, 80),
                        status: short(c.get("status").and_then(Value::as_str).unwrap_or(""), 20),
                        reason: c
                            .get("reason")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(|s| short(s, 120)),
                        message: c
                            .get("message")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(|s| short(s, MAX_MESSAGE)),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The GPUs and host devices of the VMI spec at `spec` (`/spec` of a VMI,
/// `/spec/template/spec` of a VM), fields named from `prefix`.
pub fn devices(v: &Value, spec: &str, prefix: &str) -> Vec<VmDevice> {
    let mut out = Vec::new();
    for list in ["gpus", "hostDevices"] {
        let Some(a) = v
            .pointer(&format!("{spec}/domain/devices/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for (i, d) in a.iter().enumerate() {
            out.push(VmDevice {
                name: short(d.get("name").and_then(Value::as_str).unwrap_or(""), 80),
                device_name: short(
                    d.get("deviceName").and_then(Value::as_str).unwrap_or(""),
                    120,
                ),
                field: format!("{prefix}domain.devices.{list}[{i}]"),
            });
        }
    }
    out
}

/// The VM's run strategy: `spec.runStrategy`, else `Always`/`Halted` from `spec.running`.
pub(crate) fn run_strategy(vm: &Value) -> Option<String> {
    str_at(vm, "/spec/runStrategy")
        .map(|s| short(s, 40))
        .or_else(|| match vm.pointer("/spec/running") {
            Some(Value::Bool(true)) => Some("Always".into()),
            Some(Value::Bool(false)) => Some("Halted".into()),
            _ => None,
        })
}

fn key(v: &Value) -> String {
    format!(
        "{}/{}",
        str_at(v, "/metadata/namespace").unwrap_or("default"),
        str_at(v, "/metadata/name").unwrap_or("")
    )
}

/// The view of the objects read ([`crate::decode::virt::VmObjects`]).
pub fn view(o: &VmObjects) -> VmView {
    let asked = o.vm.as_ref().or(o.vmi.as_ref());
    let mut conditions = Vec::new();
    if let Some(vm) = &o.vm {
        conditions.extend(self::conditions("VM", vm));
    }
    if let Some(vmi) = &o.vmi {
        conditions.extend(self::conditions("VMI", vmi));
    }
    let devices = match (&o.vmi, &o.vm) {
        (Some(vmi), _) => devices(vmi, "/spec", "spec."),
        (None, Some(vm)) => devices(vm, "/spec/template/spec", "spec.template.spec."),
        _ => Vec::new(),
    };
    VmView {
        kind: o.kind.as_str(),
        name: asked.map(key).unwrap_or_default(),
        run_strategy: o.vm.as_ref().and_then(run_strategy),
        printable_status: o
            .vm
            .as_ref()
            .and_then(|v| str_at(v, "/status/printableStatus"))
            .map(|s| short(s, 60)),
        vmi: o.vmi.as_ref().map(key),
        vmi_phase: o
            .vmi
            .as_ref()
            .and_then(|v| str_at(v, "/status/phase"))
            .map(|s| short(s, 40)),
        conditions,
        launcher: o.launcher.as_ref().map(PodInfo::key),
        devices,
    }
}

/// The launcher pod with its requests named by the VMI's fields: a request whose resource
/// is a VMI device's `deviceName` points at that device's field
/// (`spec.domain.devices.gpus[0].deviceName` of `VMI ns/name`), so causes and fixes name
/// what the user writes, not what virt-controller rendered.
fn named_launcher(launcher: &PodInfo, vmi: &PodInfo, vmi_key: &str) -> PodInfo {
    let mut p = launcher.clone();
    for s in &mut p.sources {
        if let Some(v) = vmi.sources.iter().find(|v| v.resource == s.resource) {
            s.field = format!("{} of VMI {vmi_key}", v.field);
            s.container = None;
        }
    }
    p
}

/// Explains the objects read: the launcher pod when one exists (named with the VMI's
/// fields), else the VMI, else the VM's template; with [`view`] attached
/// ([`Explanation::vm`]) and KubeVirt's own refusal (`Synchronized=False`) as evidence.
///
/// Errors: [`Error::Input`] when the VM or VMI cannot be read as one (a malformed device
/// list), naming the object and field; as [`explain`] otherwise.
pub fn explain_vm(o: &VmObjects, inputs: Inputs<'_>) -> Result<Explanation> {
    let read = |v: &Value| -> Result<PodInfo> {
        pods::from_object(v).map_err(|e| {
            Error::field(
                format!("{} {}", str_at(v, "/kind").unwrap_or("object"), key(v)),
                e,
            )
        })
    };
    let vmi = o.vmi.as_ref().map(read).transpose()?;
    let target = match (&o.launcher, &vmi, &o.vm) {
        (Some(l), Some(vmi), _) => named_launcher(l, vmi, &vmi.key()),
        (None, Some(vmi), _) => vmi.clone(),
        (_, None, Some(vm)) => read(vm)?,
        _ => {
            return Err(Error::Input(format!(
                "{}: nothing to explain",
                o.kind.as_str()
            )));
        }
    };
    let mut e = explain(&target, inputs)?;
    let v = view(o);
    if let (Some(l), Some(sel)) = (&v.launcher, &o.launcher_selector) {
        e.notes.insert(
            0,
            format!(
                "explained through the virt-launcher pod {l} (label {sel}){}",
                if o.launchers_found > 1 {
                    format!(
                        "; {} launcher pods found (a migration): the waiting one, else the running one",
                        o.launchers_found
                    )
                } else {
                    String::new()
                }
            ),
        );
    } else if vmi.is_some() {
        e.notes.insert(
            0,
            "no virt-launcher pod exists for the VMI: explained from the VMI's own spec".into(),
        );
    }
    if o.vmi.is_none() {
        let stopped = matches!(v.run_strategy.as_deref(), Some("Halted" | "Manual"));
        e.notes.insert(
            0,
            format!(
                "the VM has no VMI{}: explained from spec.template, as its VMI would be",
                if stopped {
                    format!(
                        " (runStrategy {}: it is stopped; virtctl start {} starts it)",
                        v.run_strategy.as_deref().unwrap_or(""),
                        v.name
                    )
                } else {
                    String::new()
                }
            ),
        );
    }
    // KubeVirt's refusal is the first fact when no launcher pod exists.
    if v.launcher.is_none() {
        for c in v
            .conditions
            .iter()
            .filter(|c| c.type_ == "Synchronized" && c.status == "False")
        {
            e.evidence.insert(
                0,
                format!(
                    "{} condition Synchronized=False{}: {}",
                    c.object,
                    c.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default(),
                    c.message.as_deref().unwrap_or("no message")
                ),
            );
        }
    }
    e.vm = Some(v);
    Ok(e)
}
