//! Rendering `gpuwl kubevirt`: the merge patch of `generate` (YAML or JSON) and the
//! findings of `check` (text, JSON, YAML).
//!
//! Field names of the patch: kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`
//! (`spec.configuration.permittedHostDevices`, `pciVendorSelector`) and
//! kubevirt/hyperconverged-cluster-operator `api/v1beta1/hyperconverged_types.go`
//! (`spec.permittedHostDevices`, `pciDeviceSelector`).

use serde::Serialize;

use crate::analysis::kubevirt::{Finding, PatchKind, Report, SafePatch, Summary, kind_name};
use crate::model::kubevirt::HostDevicesSource;
use crate::render::{Format, escape_controls, escape_serialized};

// ---------------------------------------------------------------------------------------
// generate

/// Output format of `gpuwl kubevirt generate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PatchFormat {
    /// YAML, with comments saying how to apply it.
    #[default]
    Yaml,
    /// JSON (the apply hint goes to stderr).
    Json,
}

/// The command that applies a [`SafePatch`] saved as `FILE` to the CR `object`
/// (`namespace/name`; `None`: the usual name of `target`'s CR).
pub fn safe_apply_command(
    kind: PatchKind,
    target: HostDevicesSource,
    object: Option<&str>,
) -> String {
    let (ns, name) = match object.and_then(|o| o.split_once('/')) {
        Some((ns, name)) if !name.is_empty() => (ns, name),
        _ => match target {
            HostDevicesSource::KubeVirt => ("kubevirt", "kubevirt"),
            HostDevicesSource::HyperConverged => ("openshift-cnv", "kubevirt-hyperconverged"),
        },
    };
    let resource = match target {
        HostDevicesSource::KubeVirt => "kubevirt",
        HostDevicesSource::HyperConverged => "hyperconverged",
    };
    let ty = match kind {
        PatchKind::Merged => "merge",
        PatchKind::JsonAdd => "json",
    };
    let ns = if ns.is_empty() {
        String::new()
    } else {
        format!(" -n {ns}")
    };
    format!("kubectl patch {resource} {name}{ns} --type {ty} --patch-file FILE")
}

/// The comment lines of a [`SafePatch`] (YAML comments without the `# `): what it holds,
/// what it keeps, how to apply it.
pub(crate) fn safe_patch_hint(
    p: &SafePatch,
    target: HostDevicesSource,
    object: Option<&str>,
) -> Vec<String> {
    let cr = match object {
        Some(o) => format!("{} CR {o}", kind_name(target)),
        None => format!("{} CR", kind_name(target)),
    };
    let mut v = vec![format!(
        "{} for the {cr} ({}):",
        match p.kind {
            PatchKind::Merged => "Merge patch",
            PatchKind::JsonAdd => "JSON patch",
        },
        target.path()
    )];
    if p.added == 0 {
        // Nothing to add: no word on resourceVersions or how to apply an empty patch.
        v[0] = format!("Nothing to add for the {cr} ({}):", target.path());
        v.push(format!(
            "it lists every passthrough model and vGPU type the nodes advertise ({} entr{} kept); the patch is empty.",
            p.kept,
            if p.kept == 1 { "y" } else { "ies" }
        ));
        return v;
    }
    let guarded = match &p.value {
        serde_json::Value::Object(m) => m.contains_key("metadata"),
        serde_json::Value::Array(a) => a.first().is_some_and(|o| o["op"] == "test"),
        _ => false,
    };
    match p.kind {
        PatchKind::Merged => {
            v.push(format!(
                "{} new entr{} for the passthrough models and vGPU types the nodes advertise; a list",
                p.added,
                if p.added == 1 { "y" } else { "ies" }
            ));
            v.push(format!(
                "it changes is carried whole, the CR's current entries ({}) first, as read.",
                p.kept
            ));
            v.push(if guarded {
                "It carries the CR's resourceVersion: if the CR changed since, the API server refuses it."
                    .to_owned()
            } else {
                "The CR read has no resourceVersion: generate again if the CR changed since.".to_owned()
            });
        }
        PatchKind::JsonAdd => {
            v.push(format!(
                "{} add operation{} for the passthrough models and vGPU types the nodes advertise;",
                p.added,
                if p.added == 1 { "" } else { "s" }
            ));
            v.push("they append and never replace an entry the CR holds.".to_owned());
            if guarded {
                v.push(
                    "A test of the CR's resourceVersion comes first: the patch fails if the CR changed since."
                        .to_owned(),
                );
            }
        }
    }
    v.push(format!(
        "Apply: {}",
        safe_apply_command(p.kind, target, object)
    ));
    v
}

/// A [`SafePatch`] as YAML (comment lines from [`safe_patch_hint`] first) or pretty JSON
/// (the value alone); newline-terminated, control characters escaped (entries kept from
/// the CR are printed as read).
pub fn render_safe_patch(
    p: &SafePatch,
    target: HostDevicesSource,
    object: Option<&str>,
    format: PatchFormat,
) -> String {
    let text = match format {
        PatchFormat::Json => {
            let mut s = serde_json::to_string_pretty(&p.value)
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            s
        }
        PatchFormat::Yaml => {
            let mut s: String = safe_patch_hint(p, target, object)
                .iter()
                // A comment line must stay one line: a CR name or a value carrying a
                // newline would end the comment and put its rest into the patch as YAML.
                .map(|l| format!("# {}\n", crate::text::esc(l)))
                .collect();
            s.push_str(
                &serde_saphyr::to_string(&p.value).unwrap_or_else(|e| format!("error: {e:?}\n")),
            );
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s
        }
    };
    escape_serialized(&text).into_owned()
}

// ---------------------------------------------------------------------------------------
// check

/// The structured document of `gpuwl kubevirt check -o json|yaml`.
///
/// Shape: `{ ok, exitCode, source: KubeVirt|HyperConverged, object: "namespace/name",
/// field: "spec.configuration.permittedHostDevices", present, findings: [{ code,
/// severity: error|warning, resource, message, suggestion }], summary: { advertised,
/// permittedAdvertised, entries, errors, warnings } }`. Codes are stable (see
/// [`crate::analysis::kubevirt::Code`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document<'a> {
    /// True when there is no error finding.
    pub ok: bool,
    /// The exit code gpuwl returns (0 or 1).
    pub exit_code: u8,
    /// The CR kind.
    pub source: &'static str,
    /// `namespace/name` of the CR.
    pub object: &'a str,
    /// Where the list lives in the CR.
    pub field: &'static str,
    /// Whether the CR has the list at all.
    pub present: bool,
    /// Findings, by resource name then code.
    pub findings: &'a [Finding],
    /// Counts.
    pub summary: &'a Summary,
}

/// The structured view of `report`.
pub fn document(report: &Report) -> Document<'_> {
    Document {
        ok: report.ok(),
        exit_code: if report.ok() { 0 } else { 1 },
        source: kind_name(report.source),
        object: &report.object,
        field: report.source.path(),
        present: report.present,
        findings: &report.findings,
        summary: &report.summary,
    }
}

/// The text lines: one per finding, `ERROR advertised-not-permitted <resource>: <message>;
/// <suggestion>`, then, when there is no error, one `OK: …` summary line. Control
/// characters are escaped ([`escape_controls`]).
pub fn text_lines(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            let mut l = format!(
                "{} {} {}: {}",
                f.severity.upper(),
                f.code.as_str(),
                f.resource,
                f.message
            );
            if let Some(s) = &f.suggestion {
                l.push_str("; ");
                l.push_str(s);
            }
            escape_controls(&l).into_owned()
        })
        .collect();
    if report.ok() {
        let s = &report.summary;
        let warnings = match s.warnings {
            0 => String::new(),
            1 => ", 1 warning".to_owned(),
            n => format!(", {n} warnings"),
        };
        let l = if !report.present && s.advertised > 0 {
            format!(
                "OK: {} refuses none of the {} passthrough model and vGPU type names the nodes advertise (it has no {}: nothing is vetted){warnings}",
                report.cr(),
                s.advertised,
                report.source.path()
            )
        } else if s.advertised == 0 {
            format!(
                "OK: no node advertises a passthrough model or vGPU type; {} has {} entr{}{warnings}",
                report.cr(),
                s.entries,
                if s.entries == 1 { "y" } else { "ies" }
            )
        } else {
            format!(
                "OK: all {} passthrough model and vGPU type names the nodes advertise are permitted in {}{warnings}",
                s.advertised,
                report.cr()
            )
        };
        lines.push(escape_controls(&l).into_owned());
    }
    lines
}

/// Renders `report` in `format`, newline-terminated.
pub fn render_report(report: &Report, format: Format) -> String {
    match format {
        Format::Text => {
            let mut s = text_lines(report).join("\n");
            s.push('\n');
            s
        }
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&document(report))
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            escape_serialized(&s).into_owned()
        }
        Format::Yaml => escape_serialized(
            &serde_saphyr::to_string(&document(report))
                .unwrap_or_else(|e| format!("error: {e:?}\n")),
        )
        .into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::kubevirt::{Advertised, Plan, check, generate, safe_patch};
    use crate::model::kubevirt::{MediatedDevice, PciHostDevice, PermittedHostDevices};
    use crate::model::node::NodeInfo;
    use std::borrow::Cow;

    fn plan() -> Plan {
        Plan {
            pci_host_devices: vec![PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: vec![MediatedDevice {
                selector: "NVIDIA A10-12Q".into(),
                resource_name: "nvidia.com/NVIDIA_A10-12Q".into(),
                external_resource_provider: true,
            }],
            notes: vec![],
        }
    }

    #[test]
    fn escapes_controls_only() {
        assert!(matches!(
            escape_controls("nvidia.com/A10 ü"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\nOK\u{1b}[2J\u{202e}"),
            "a\\nOK\\u{1b}[2J\\u{202e}"
        );
        let j = serde_json::to_string(&["a\u{202e}\u{85}\u{7f}\u{1b}"]).unwrap();
        let safe = escape_serialized(&j);
        assert_eq!(safe, "[\"a\\u202e\\u0085\\u007f\\u001b\"]");
        assert_eq!(
            serde_json::from_str::<Vec<String>>(&safe).unwrap(),
            ["a\u{202e}\u{85}\u{7f}\u{1b}"]
        );
    }

    fn cr(text: &str) -> crate::decode::kubevirt::CurrentCr {
        crate::decode::kubevirt::read_cr_str(text, "cr").unwrap()
    }

    #[test]
    fn merged_patch_keeps_current_entries_and_adds() {
        let current = cr(
            r#"{"kind": "KubeVirt", "metadata": {"name": "kubevirt", "namespace": "kubevirt", "resourceVersion": "42"},
            "spec": {"configuration": {"permittedHostDevices": {"pciHostDevices": [
              {"pciVendorSelector": "8086:0D4E", "resourceName": "intel.com/qat", "x-extra": 1}]}}}}"#,
        );
        let p = safe_patch(
            &plan(),
            HostDevicesSource::KubeVirt,
            PatchKind::Merged,
            Some(&current),
        );
        assert_eq!((p.kept, p.added), (1, 2));
        assert_eq!(
            p.value,
            serde_json::json!({"metadata": {"resourceVersion": "42"},
              "spec": {"configuration": {"permittedHostDevices": {
                "pciHostDevices": [
                  {"pciVendorSelector": "8086:0D4E", "resourceName": "intel.com/qat", "x-extra": 1},
                  {"pciVendorSelector": "10DE:2236", "resourceName": "nvidia.com/GA102GL_A10", "externalResourceProvider": true}],
                "mediatedDevices": [
                  {"mdevNameSelector": "NVIDIA A10-12Q", "resourceName": "nvidia.com/NVIDIA_A10-12Q", "externalResourceProvider": true}]}}}})
        );
        let y = render_safe_patch(
            &p,
            HostDevicesSource::KubeVirt,
            Some("kubevirt/kubevirt"),
            PatchFormat::Yaml,
        );
        assert!(
            y.starts_with("# Merge patch for the KubeVirt CR kubevirt/kubevirt (spec.configuration.permittedHostDevices):\n# 2 new entries"),
            "{y}"
        );
        assert!(y.contains("# Apply: kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file FILE\n"), "{y}");
        // The YAML reads back as the same list.
        let back =
            crate::decode::kubevirt::read_str(&format!("kind: KubeVirt\n{y}"), "patch").unwrap();
        assert_eq!(back.pci_host_devices.len(), 2);
        assert_eq!(back.pci_host_devices[0].resource_name, "intel.com/qat");
        // A CR name with a line break stays inside its comment line: the patch's YAML has
        // only what gpuwl put there.
        let y = render_safe_patch(
            &p,
            HostDevicesSource::KubeVirt,
            Some("kubevirt/kv\ninjectedKey: pwned\n#"),
            PatchFormat::Yaml,
        );
        let v: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["metadata", "spec"], "{y}");
        assert!(y.contains("kubevirt/kv\\ninjectedKey"), "{y}");
        // Everything listed already: an empty patch, the names reported.
        let mut full = current.clone();
        full.devices
            .pci_host_devices
            .push(plan().pci_host_devices[0].clone());
        full.devices
            .mediated_devices
            .push(plan().mediated_devices[0].clone());
        let p = safe_patch(
            &plan(),
            HostDevicesSource::KubeVirt,
            PatchKind::Merged,
            Some(&full),
        );
        assert_eq!(p.value, serde_json::json!({}));
        assert_eq!(
            p.already,
            ["nvidia.com/GA102GL_A10", "nvidia.com/NVIDIA_A10-12Q"]
        );
        // Issue 42: the empty patch says so, not that the CR read lacks a resourceVersion
        // (it has one), and gives no apply command.
        let y = render_safe_patch(
            &p,
            HostDevicesSource::KubeVirt,
            Some("kubevirt/kubevirt"),
            PatchFormat::Yaml,
        );
        assert_eq!(
            y,
            "# Nothing to add for the KubeVirt CR kubevirt/kubevirt (spec.configuration.permittedHostDevices):\n# it lists every passthrough model and vGPU type the nodes advertise (3 entries kept); the patch is empty.\n{}\n"
        );
    }

    #[test]
    fn json_add_appends_and_creates_missing_lists() {
        // The list exists with a foreign entry; mediatedDevices does not.
        let current = cr(
            r#"{"kind": "HyperConverged", "metadata": {"name": "h", "namespace": "cnv", "resourceVersion": "7"},
            "spec": {"permittedHostDevices": {"pciHostDevices": [{"pciDeviceSelector": "8086:0D4E", "resourceName": "intel.com/qat"}]}}}"#,
        );
        let p = safe_patch(
            &plan(),
            HostDevicesSource::HyperConverged,
            PatchKind::JsonAdd,
            Some(&current),
        );
        assert_eq!(
            p.value,
            serde_json::json!([
              {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
              {"op": "add", "path": "/spec/permittedHostDevices/pciHostDevices/-",
               "value": {"pciDeviceSelector": "10DE:2236", "resourceName": "nvidia.com/GA102GL_A10", "externalResourceProvider": true}},
              {"op": "add", "path": "/spec/permittedHostDevices/mediatedDevices",
               "value": [{"mdevNameSelector": "NVIDIA A10-12Q", "resourceName": "nvidia.com/NVIDIA_A10-12Q", "externalResourceProvider": true}]}])
        );
        // No permittedHostDevices at all: one add creates it, the next appends to it.
        let bare = cr(r#"{"kind": "KubeVirt", "metadata": {"name": "k"}, "spec": {}}"#);
        let p = safe_patch(
            &plan(),
            HostDevicesSource::KubeVirt,
            PatchKind::JsonAdd,
            Some(&bare),
        );
        let paths: Vec<&str> = p
            .value
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/spec/configuration",
                "/spec/configuration/permittedHostDevices/mediatedDevices"
            ]
        );
        // Without the CR: appends only.
        let p = safe_patch(
            &plan(),
            HostDevicesSource::KubeVirt,
            PatchKind::JsonAdd,
            None,
        );
        let paths: Vec<&str> = p
            .value
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/spec/configuration/permittedHostDevices/pciHostDevices/-",
                "/spec/configuration/permittedHostDevices/mediatedDevices/-"
            ]
        );
        assert_eq!(
            safe_apply_command(
                PatchKind::JsonAdd,
                HostDevicesSource::HyperConverged,
                Some("cnv/h")
            ),
            "kubectl patch hyperconverged h -n cnv --type json --patch-file FILE"
        );
        // Nothing advertised: no operations.
        let e = generate(&Advertised::default());
        let p = safe_patch(&e, HostDevicesSource::KubeVirt, PatchKind::JsonAdd, None);
        assert_eq!(p.value, serde_json::json!([]));
    }

    #[test]
    fn report_text_and_json() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("nvidia.com/NVIDIA_A10-12Q".to_string(), "4".to_string());
        let nodes = [NodeInfo {
            name: "gpu-vg-1".into(),
            capacity: m.clone(),
            allocatable: Some(m),
            ..Default::default()
        }];
        let adv = Advertised::of(&nodes).unwrap();
        let kv = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: None,
            pci_host_devices: vec![],
            mediated_devices: vec![MediatedDevice {
                selector: "NVIDIA A10-12Q".into(),
                resource_name: "nvidia.com/NVIDIA_A10-12Q".into(),
                external_resource_provider: true,
            }],
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        let r = check(&adv, &kv);
        assert_eq!(
            render_report(&r, Format::Text),
            "OK: all 1 passthrough model and vGPU type names the nodes advertise are permitted in KubeVirt kubevirt/kubevirt\n"
        );
        let mut bad = kv.clone();
        bad.mediated_devices[0].resource_name = "nvidia.com/X\nOK: forged".into();
        let r = check(&adv, &bad);
        let t = render_report(&r, Format::Text);
        assert!(
            t.starts_with("ERROR advertised-not-permitted nvidia.com/NVIDIA_A10-12Q: "),
            "{t}"
        );
        assert!(
            t.lines()
                .all(|l| l.starts_with("ERROR ") || l.starts_with("WARNING ")),
            "{t}"
        );
        assert!(t.contains("nvidia.com/X\\nOK: forged"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&render_report(&r, Format::Json)).unwrap();
        assert_eq!(j["ok"], false);
        assert_eq!(j["exitCode"], 1);
        assert_eq!(j["source"], "KubeVirt");
        assert_eq!(j["findings"][0]["code"], "advertised-not-permitted");
        assert_eq!(j["findings"][0]["severity"], "error");
        assert_eq!(j["summary"]["errors"], 1);
    }
}
