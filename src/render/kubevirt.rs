//! Rendering `gpuwl kubevirt`: the merge patch of `generate` (YAML or JSON) and the
//! findings of `check` (text, JSON, YAML).
//!
//! Field names of the patch: kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`
//! (`spec.configuration.permittedHostDevices`, `pciVendorSelector`) and
//! kubevirt/hyperconverged-cluster-operator `api/v1beta1/hyperconverged_types.go`
//! (`spec.permittedHostDevices`, `pciDeviceSelector`).

use serde::Serialize;

use crate::analysis::kubevirt::{Finding, Plan, Report, Summary, kind_name};
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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PciOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pci_vendor_selector: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pci_device_selector: Option<&'a str>,
    resource_name: &'a str,
    external_resource_provider: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MdevOut<'a> {
    mdev_name_selector: &'a str,
    resource_name: &'a str,
    external_resource_provider: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Permitted<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pci_host_devices: Vec<PciOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mediated_devices: Vec<MdevOut<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Configuration<'a> {
    permitted_host_devices: Permitted<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Spec<'a> {
    /// KubeVirt: `spec.configuration.permittedHostDevices`.
    KubeVirt { configuration: Configuration<'a> },
    /// HyperConverged: `spec.permittedHostDevices`.
    #[serde(rename_all = "camelCase")]
    HyperConverged {
        permitted_host_devices: Permitted<'a>,
    },
}

#[derive(Serialize)]
struct Patch<'a> {
    spec: Spec<'a>,
}

fn patch(plan: &Plan, target: HostDevicesSource) -> Patch<'_> {
    let permitted = Permitted {
        pci_host_devices: plan
            .pci_host_devices
            .iter()
            .map(|d| PciOut {
                pci_vendor_selector: (target == HostDevicesSource::KubeVirt)
                    .then_some(d.selector.as_str()),
                pci_device_selector: (target == HostDevicesSource::HyperConverged)
                    .then_some(d.selector.as_str()),
                resource_name: &d.resource_name,
                external_resource_provider: d.external_resource_provider,
            })
            .collect(),
        mediated_devices: plan
            .mediated_devices
            .iter()
            .map(|d| MdevOut {
                mdev_name_selector: &d.selector,
                resource_name: &d.resource_name,
                external_resource_provider: d.external_resource_provider,
            })
            .collect(),
    };
    Patch {
        spec: match target {
            HostDevicesSource::KubeVirt => Spec::KubeVirt {
                configuration: Configuration {
                    permitted_host_devices: permitted,
                },
            },
            HostDevicesSource::HyperConverged => Spec::HyperConverged {
                permitted_host_devices: permitted,
            },
        },
    }
}

/// The command that applies a patch saved as `FILE` to the usual CR of `target`:
/// `kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file FILE`, or for
/// HyperConverged `kubectl patch hyperconverged kubevirt-hyperconverged -n openshift-cnv …`
/// (the HCO's default name; upstream installs use the namespace `kubevirt-hyperconverged`).
pub fn apply_command(target: HostDevicesSource) -> &'static str {
    match target {
        HostDevicesSource::KubeVirt => {
            "kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file FILE"
        }
        HostDevicesSource::HyperConverged => {
            "kubectl patch hyperconverged kubevirt-hyperconverged -n openshift-cnv --type merge \
             --patch-file FILE"
        }
    }
}

/// The lines telling how to apply the patch (YAML comments without the `# `; for JSON
/// the `Apply:` line goes to stderr).
pub fn apply_hint(target: HostDevicesSource) -> Vec<String> {
    vec![
        format!(
            "Merge patch for the {} CR ({}): every",
            kind_name(target),
            target.path()
        ),
        "passthrough model and vGPU type the nodes advertise, externalResourceProvider: true."
            .to_owned(),
        format!("Apply: {}", apply_command(target)),
        "A merge patch replaces each list whole: add the entries of other devices to it first."
            .to_owned(),
    ]
}

/// The merge patch of `plan` for `target`: YAML (comment lines from [`apply_hint`] first)
/// or pretty JSON; newline-terminated. Shape: KubeVirt
/// `{"spec":{"configuration":{"permittedHostDevices":{"pciHostDevices":[{"pciVendorSelector",
/// "resourceName","externalResourceProvider"}],"mediatedDevices":[{"mdevNameSelector",
/// "resourceName","externalResourceProvider"}]}}}}`; HyperConverged
/// `{"spec":{"permittedHostDevices":…}}` with `pciDeviceSelector`. An empty list is left
/// out (the merge patch keeps what the CR has).
pub fn render_patch(plan: &Plan, target: HostDevicesSource, format: PatchFormat) -> String {
    let p = patch(plan, target);
    let text = match format {
        PatchFormat::Json => {
            let mut s = serde_json::to_string_pretty(&p)
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            s
        }
        PatchFormat::Yaml => {
            let mut s: String = apply_hint(target)
                .iter()
                .map(|l| format!("# {l}\n"))
                .collect();
            s.push_str(&serde_saphyr::to_string(&p).unwrap_or_else(|e| format!("error: {e:?}\n")));
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
        let l = if s.advertised == 0 {
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
    use crate::analysis::kubevirt::{Advertised, check, generate};
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

    #[test]
    fn patch_shapes() {
        let j: serde_json::Value = serde_json::from_str(&render_patch(
            &plan(),
            HostDevicesSource::KubeVirt,
            PatchFormat::Json,
        ))
        .unwrap();
        assert_eq!(
            j,
            serde_json::json!({"spec":{"configuration":{"permittedHostDevices":{
                "pciHostDevices":[{"pciVendorSelector":"10DE:2236","resourceName":"nvidia.com/GA102GL_A10","externalResourceProvider":true}],
                "mediatedDevices":[{"mdevNameSelector":"NVIDIA A10-12Q","resourceName":"nvidia.com/NVIDIA_A10-12Q","externalResourceProvider":true}]}}}})
        );
        let y = render_patch(
            &plan(),
            HostDevicesSource::HyperConverged,
            PatchFormat::Yaml,
        );
        assert!(
            y.starts_with("# Merge patch for the HyperConverged CR (spec.permittedHostDevices)"),
            "{y}"
        );
        let back = crate::input::kubevirt::read_str(
            &format!("kind: HyperConverged\n{}", y.replace("# ", "#")),
            "patch",
        )
        .unwrap();
        assert_eq!(back.pci_host_devices, plan().pci_host_devices);
        assert_eq!(back.mediated_devices, plan().mediated_devices);
        // Nothing advertised: an empty list, no lists.
        let e = generate(&Advertised::default());
        let j = render_patch(&e, HostDevicesSource::KubeVirt, PatchFormat::Json);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&j).unwrap(),
            serde_json::json!({"spec":{"configuration":{"permittedHostDevices":{}}}})
        );
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
            pci_host_devices: vec![],
            mediated_devices: vec![MediatedDevice {
                selector: "NVIDIA A10-12Q".into(),
                resource_name: "nvidia.com/NVIDIA_A10-12Q".into(),
                external_resource_provider: true,
            }],
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
