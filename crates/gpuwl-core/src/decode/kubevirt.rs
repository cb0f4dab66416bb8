//! Reading KubeVirt's `permittedHostDevices` from a KubeVirt or HyperConverged CR
//! (`kubectl get kubevirt -A -o yaml`, `kubectl get hyperconverged -A -o yaml`: one object,
//! or a List holding one) into [`PermittedHostDevices`], or from the CRs the API returned
//! ([`choose`]; gpuwl's `input::kubevirt` lists them: the HyperConverged CR when one
//! exists, else the KubeVirt CR).
//!
//! Field names: kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`
//! (`PermittedHostDevices`, `PciHostDevice`, `MediatedHostDevice`) and
//! kubevirt/hyperconverged-cluster-operator `api/v1beta1/hyperconverged_types.go`
//! (`pciDeviceSelector`).

use std::path::Path;

use serde_json::Value;

use crate::decode::document::{self, array, get, opt_scalar, opt_str};
use crate::error::{Error, FieldError, Result};
use crate::model::kubevirt::{
    HostDevicesSource, MediatedDevice, PciHostDevice, PermittedHostDevices, UsbHostDevice,
};
use crate::model::launcher::Cluster;
use crate::model::quantity::Quantity;

const EXPECTING: &str = "a KubeVirt or HyperConverged CR";

/// Reads the CR in `path` (`-` for stdin).
///
/// Errors: [`Error::Input`] naming the file and field: unreadable, empty, invalid
/// JSON/YAML, another kind, a List with no or several such CRs, a field of the wrong type.
pub fn read_path(path: &Path) -> Result<PermittedHostDevices> {
    let name = path.display().to_string();
    let text = document::read_text(path)?;
    read_str(&text, &name)
}

/// Parses the CR from text; `name` starts every error message. See [`read_path`].
pub(crate) fn read_str(text: &str, name: &str) -> Result<PermittedHostDevices> {
    read_cr_str(text, name).map(|c| c.devices)
}

/// A KubeVirt or HyperConverged CR as read: its `permittedHostDevices`, and the object
/// itself (JSON), for output that must keep what the CR holds (`kubevirt generate`).
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentCr {
    /// The list, read as [`from_object`] reads it.
    pub devices: PermittedHostDevices,
    /// The whole object, `kind` set.
    pub object: Value,
}

/// Reads the CR in `path` (`-` for stdin) with the object itself. Errors as [`read_path`].
pub fn read_cr_path(path: &Path) -> Result<CurrentCr> {
    let name = path.display().to_string();
    let text = document::read_text(path)?;
    read_cr_str(&text, &name)
}

/// Parses the CR from text with the object itself. Errors as [`read_path`].
pub(crate) fn read_cr_str(text: &str, name: &str) -> Result<CurrentCr> {
    let doc = document::parse(text, name, EXPECTING)?;
    let err = |e: FieldError| Error::field(name, e);
    let kind = opt_str(&doc, "kind").map_err(err)?;
    let obj = match kind {
        Some("List" | "KubeVirtList" | "HyperConvergedList") => {
            let items = array(doc.get("items"), "items").map_err(err)?;
            match items {
                [one] => one,
                [] => {
                    return Err(err(FieldError::new(
                        "items",
                        format!("empty, expected {EXPECTING}"),
                    )));
                }
                _ => {
                    return Err(err(FieldError::new(
                        "items",
                        format!("{} objects, expected one {EXPECTING}", items.len()),
                    )));
                }
            }
        }
        _ => &doc,
    };
    Ok(CurrentCr {
        devices: from_object(obj).map_err(err)?,
        object: obj.clone(),
    })
}

/// Reads one KubeVirt or HyperConverged object (as JSON).
///
/// Errors: the wrong field, without the source name (the caller adds it).
pub fn from_object(v: &Value) -> std::result::Result<PermittedHostDevices, FieldError> {
    let source = match opt_str(v, "kind")? {
        Some("KubeVirt") => HostDevicesSource::KubeVirt,
        Some("HyperConverged") => HostDevicesSource::HyperConverged,
        Some(k) => {
            return Err(FieldError::object(format!(
                "kind {} is not KubeVirt or HyperConverged",
                document::cut(k)
            )));
        }
        None => {
            return Err(FieldError::object(format!(
                "no kind field: expected {EXPECTING}"
            )));
        }
    };
    let object = format!(
        "{}/{}",
        opt_str(v, "metadata.namespace")?.unwrap_or(""),
        opt_str(v, "metadata.name")?.unwrap_or("")
    );
    // The HostDevices gate (KubeVirt only: HyperConverged sets KubeVirt's gates itself).
    let host_devices_gate = match source {
        HostDevicesSource::KubeVirt => Some(
            get(v, "spec.configuration.developerConfiguration.featureGates")
                .and_then(Value::as_array)
                .is_some_and(|gates| gates.iter().any(|g| g == "HostDevices")),
        ),
        HostDevicesSource::HyperConverged => None,
    };
    let launcher = match source {
        HostDevicesSource::KubeVirt => launcher_settings(v)?,
        HostDevicesSource::HyperConverged => Cluster::default(),
    };
    let path = source.path();
    let list = match get(v, path) {
        None | Some(Value::Null) => {
            return Ok(PermittedHostDevices {
                source,
                object,
                present: false,
                host_devices_gate,
                pci_host_devices: Vec::new(),
                mediated_devices: Vec::new(),
                usb_host_devices: Vec::new(),
                launcher,
            });
        }
        Some(l @ Value::Object(_)) => l,
        Some(_) => return Err(FieldError::new(path, "expected a map")),
    };
    let pci_field = match source {
        HostDevicesSource::KubeVirt => "pciVendorSelector",
        HostDevicesSource::HyperConverged => "pciDeviceSelector",
    };
    let entry = |e: &Value, p: &str, sel: &str| -> std::result::Result<_, FieldError> {
        let s = |k: &str| opt_scalar(e.get(k), &format!("{p}.{k}")).map(Option::unwrap_or_default);
        let external = match e.get("externalResourceProvider") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(FieldError::new(
                    format!("{p}.externalResourceProvider"),
                    "expected true or false",
                ));
            }
        };
        Ok((s(sel)?, s("resourceName")?, external))
    };
    let mut pci_host_devices = Vec::new();
    let pp = format!("{path}.pciHostDevices");
    for (i, e) in array(list.get("pciHostDevices"), &pp)?.iter().enumerate() {
        let (selector, resource_name, external_resource_provider) =
            entry(e, &format!("{pp}[{i}]"), pci_field)?;
        pci_host_devices.push(PciHostDevice {
            selector,
            resource_name,
            external_resource_provider,
        });
    }
    let mut mediated_devices = Vec::new();
    let mp = format!("{path}.mediatedDevices");
    for (i, e) in array(list.get("mediatedDevices"), &mp)?.iter().enumerate() {
        let (selector, resource_name, external_resource_provider) =
            entry(e, &format!("{mp}[{i}]"), "mdevNameSelector")?;
        mediated_devices.push(MediatedDevice {
            selector,
            resource_name,
            external_resource_provider,
        });
    }
    // USB groups: `usb[]` {resourceName, selectors, externalResourceProvider} in the
    // KubeVirt CR, `usbHostDevices[]` in the HyperConverged CR.
    let usb_field = match source {
        HostDevicesSource::KubeVirt => "usb",
        HostDevicesSource::HyperConverged => "usbHostDevices",
    };
    let mut usb_host_devices = Vec::new();
    let up = format!("{path}.{usb_field}");
    for (i, e) in array(list.get(usb_field), &up)?.iter().enumerate() {
        let ep = format!("{up}[{i}]");
        let resource_name =
            opt_scalar(e.get("resourceName"), &format!("{ep}.resourceName"))?.unwrap_or_default();
        let external_resource_provider = match e.get("externalResourceProvider") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(FieldError::new(
                    format!("{ep}.externalResourceProvider"),
                    "expected true or false",
                ));
            }
        };
        usb_host_devices.push(UsbHostDevice {
            resource_name,
            external_resource_provider,
        });
    }
    Ok(PermittedHostDevices {
        source,
        object,
        present: true,
        host_devices_gate,
        pci_host_devices,
        mediated_devices,
        usb_host_devices,
        launcher,
    })
}

/// The KubeVirt CR's settings that change the launcher pod ([`Cluster`], its docs name
/// the fields; kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`
/// `KubeVirtConfiguration`, `DeveloperConfiguration`, `SupportContainerResources`).
/// Absent fields keep KubeVirt's defaults; an integer ≤ 0 too (KubeVirt refuses such a
/// configuration and keeps its last good one).
///
/// Errors: a field of the wrong type (its path).
fn launcher_settings(v: &Value) -> std::result::Result<Cluster, FieldError> {
    const DEV: &str = "spec.configuration.developerConfiguration";
    let mut c = Cluster::default();
    let int = |path: &str| -> std::result::Result<Option<i64>, FieldError> {
        match get(v, path) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| FieldError::new(path, "expected a whole number")),
            Some(_) => Err(FieldError::new(path, "expected a whole number")),
        }
    };
    let flag = |path: &str| -> std::result::Result<bool, FieldError> {
        match get(v, path) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(FieldError::new(path, "expected true or false")),
        }
    };
    c.use_emulation = flag(&format!("{DEV}.useEmulation"))?;
    // `DisableSerialConsoleLog` is an empty struct: present, it disables the sidecar
    // (`IsSerialConsoleLogDisabled`).
    let dscl = "spec.configuration.virtualMachineOptions.disableSerialConsoleLog";
    c.serial_console_log_disabled = match get(v, dscl) {
        None | Some(Value::Null) => false,
        Some(Value::Object(_)) => true,
        Some(_) => return Err(FieldError::new(dscl, "expected an object ({})")),
    };
    if let Some(n) = int(&format!("{DEV}.memoryOvercommit"))?.filter(|n| *n > 0) {
        c.memory_overcommit = n;
    }
    if let Some(n) = int(&format!("{DEV}.cpuAllocationRatio"))?.filter(|n| *n > 0) {
        c.cpu_allocation_ratio = n;
    }
    let sel = format!("{DEV}.nodeSelectors");
    match get(v, &sel) {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, x) in m {
                let val = opt_scalar(Some(x), &format!("{sel}.{k}"))?.unwrap_or_default();
                c.node_selectors.insert(k.clone(), val);
            }
        }
        Some(_) => return Err(FieldError::new(sel, "expected a map")),
    }
    let qty = |path: &str, scale: i64| -> std::result::Result<Option<i64>, FieldError> {
        match opt_scalar(get(v, path), path)? {
            None => Ok(None),
            Some(q) => Quantity::parse(&q)
                .map(|q| Some(q.scaled_ceil(scale)))
                .map_err(|_| FieldError::new(path, "not a quantity")),
        }
    };
    // virt-api sets it on a VMI only when it is not the default 100m.
    c.cpu_request = qty("spec.configuration.cpuRequest", 3)?.filter(|m| *m != 100);
    c.overhead_ratio = opt_scalar(
        get(v, "spec.configuration.additionalGuestMemoryOverheadRatio"),
        "spec.configuration.additionalGuestMemoryOverheadRatio",
    )?
    .filter(|r| !r.is_empty());
    c.default_architecture = opt_str(v, "status.defaultArchitecture")?
        .filter(|a| !a.is_empty())
        .map(str::to_owned);
    let sp = "spec.configuration.supportContainerResources";
    for (i, e) in array(get(v, sp), sp)?.iter().enumerate() {
        if e.get("type").and_then(Value::as_str) != Some("guest-console-log") {
            continue;
        }
        let ep = format!("{sp}[{i}].resources");
        // `GetSupportContainerRequest`: a zero quantity counts as unset.
        let pair = |kind: &str| -> std::result::Result<(Option<i64>, Option<i64>), FieldError> {
            let at = |r: &str, scale: i64| {
                let path = format!("{ep}.{kind}.{r}");
                match opt_scalar(e.pointer(&format!("/resources/{kind}/{r}")), &path)? {
                    None => Ok(None),
                    Some(q) => Quantity::parse(&q)
                        .map(|q| Some(q.scaled_ceil(scale)).filter(|n| *n != 0))
                        .map_err(|_| FieldError::new(path, "not a quantity")),
                }
            };
            Ok((at("memory", 0)?, at("cpu", 3)?))
        };
        // The first entry of the type with a non-zero value wins, per resource.
        let (rq, lm) = (pair("requests")?, pair("limits")?);
        let r = &mut c.console_log_requests;
        *r = (r.0.or(rq.0), r.1.or(rq.1));
        let l = &mut c.console_log_limits;
        *l = (l.0.or(lm.0), l.1.or(lm.1));
    }
    Ok(c)
}

/// A custom resource type gpuwl reads live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrType {
    /// API group, e.g. `kubevirt.io`.
    pub group: &'static str,
    /// Version, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `KubeVirt`.
    pub kind: &'static str,
    /// Plural resource, e.g. `kubevirts`.
    pub plural: &'static str,
}

/// `kubevirt.io/v1` `KubeVirt` (`kubevirts`), kubevirt/kubevirt
/// `staging/src/kubevirt.io/api/core/v1/types.go`.
pub const KUBEVIRT: CrType = CrType {
    group: "kubevirt.io",
    version: "v1",
    kind: "KubeVirt",
    plural: "kubevirts",
};

/// `hco.kubevirt.io/v1beta1` `HyperConverged` (`hyperconvergeds`),
/// kubevirt/hyperconverged-cluster-operator `api/v1beta1/hyperconverged_types.go`.
pub const HYPERCONVERGED: CrType = CrType {
    group: "hco.kubevirt.io",
    version: "v1beta1",
    kind: "HyperConverged",
    plural: "hyperconvergeds",
};

/// The `permittedHostDevices` of the `ty` CRs the API returned (JSON values with `kind`
/// set, as gpuwl's `input::kubevirt::list_live` gives them): `None` when there are none, the one CR's list when
/// there is one. `read_live` asks the HyperConverged CRs first.
///
/// Errors: [`Error::Input`] when there are several (pass the file instead) or the one has
/// a malformed list (the message names the object and field).
pub fn choose(ty: CrType, items: &[Value]) -> Result<Option<PermittedHostDevices>> {
    Ok(choose_cr(ty, items)?.map(|c| c.devices))
}

/// As [`choose`], with the object itself.
///
/// Errors: as [`choose`].
pub fn choose_cr(ty: CrType, items: &[Value]) -> Result<Option<CurrentCr>> {
    let name = |v: &Value| {
        format!(
            "{}/{}",
            opt_str(v, "metadata.namespace")
                .ok()
                .flatten()
                .unwrap_or(""),
            opt_str(v, "metadata.name").ok().flatten().unwrap_or("")
        )
    };
    match items {
        [] => Ok(None),
        [one] => from_object(one)
            .map(|devices| {
                Some(CurrentCr {
                    devices,
                    object: one.clone(),
                })
            })
            .map_err(|m| Error::Input(format!("{} {:?} in the cluster: {m}", ty.kind, name(one)))),
        many => Err(Error::Input(format!(
            "{} {} CRs in the cluster ({}); pass the one to check with --kubevirt FILE",
            many.len(),
            ty.kind,
            many.iter()
                .map(|v| format!("{:?}", name(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubevirt_and_hyperconverged() {
        let kv = read_str(
            "kind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt}\nspec:\n  configuration:\n    permittedHostDevices:\n      pciHostDevices:\n      - {pciVendorSelector: \"10DE:2236\", resourceName: nvidia.com/GA102GL_A10, externalResourceProvider: true}\n      mediatedDevices:\n      - {mdevNameSelector: \"NVIDIA A10-24Q\", resourceName: nvidia.com/NVIDIA_A10-24Q}\n",
            "kv.yaml",
        )
        .unwrap();
        assert_eq!(kv.object, "kubevirt/kubevirt");
        assert_eq!(kv.pci_host_devices[0].selector, "10DE:2236");
        assert!(kv.pci_host_devices[0].external_resource_provider);
        assert!(!kv.mediated_devices[0].external_resource_provider);
        assert!(kv.permits("nvidia.com/NVIDIA_A10-24Q"));
        let hco = read_str(
            r#"{"kind":"List","items":[{"kind":"HyperConverged","metadata":{"name":"kubevirt-hyperconverged","namespace":"openshift-cnv"},"spec":{"permittedHostDevices":{"pciHostDevices":[{"pciDeviceSelector":"10DE:1EB8","resourceName":"nvidia.com/TU104GL_TESLA_T4"}]}}}]}"#,
            "hco.json",
        )
        .unwrap();
        assert_eq!(hco.source, HostDevicesSource::HyperConverged);
        assert_eq!(hco.pci_host_devices[0].selector, "10DE:1EB8");
        let none = read_str(
            "kind: KubeVirt\nmetadata: {name: kv}\nspec: {}\n",
            "kv.yaml",
        )
        .unwrap();
        assert!(!none.present && !none.permits("nvidia.com/GA102GL_A10"));
    }

    #[test]
    fn bad_input_names_file_and_field() {
        let e = read_str("kind: Pod\n", "x.yaml").unwrap_err().to_string();
        assert_eq!(e, "x.yaml: kind \"Pod\" is not KubeVirt or HyperConverged");
        let e = read_str(
            "kind: KubeVirt\nspec: {configuration: {permittedHostDevices: {pciHostDevices: {}}}}\n",
            "kv.yaml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "kv.yaml: spec.configuration.permittedHostDevices.pciHostDevices: expected a list"
        );
        assert!(
            read_str("", "e.yaml")
                .unwrap_err()
                .to_string()
                .starts_with("e.yaml: empty input")
        );
    }

    #[test]
    fn usb_entries_are_permitted_names_in_both_crs() {
        // Issue 47: virt-controller permits `usb` resourceNames like PCI and mdev ones.
        let kv = read_str(
            "kind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt}\nspec:\n  configuration:\n    permittedHostDevices:\n      usb:\n      - resourceName: kubevirt.io/storage\n        selectors:\n        - {vendor: \"46f4\", product: \"0001\"}\n",
            "kv.yaml",
        )
        .unwrap();
        assert_eq!(kv.usb_host_devices[0].resource_name, "kubevirt.io/storage");
        assert!(!kv.refuses("kubevirt.io/storage"));
        assert!(kv.refuses("nvidia.com/GA102GL_A10"));
        let hco = read_str(
            r#"{"kind":"HyperConverged","metadata":{"name":"h","namespace":"cnv"},"spec":{"permittedHostDevices":{"usbHostDevices":[{"resourceName":"kubevirt.io/storage","externalResourceProvider":true}]}}}"#,
            "hco.json",
        )
        .unwrap();
        assert!(hco.usb_host_devices[0].external_resource_provider);
        assert!(hco.permits("kubevirt.io/storage"));
        let bad = read_str(
            "kind: KubeVirt\nmetadata: {name: kv}\nspec:\n  configuration:\n    permittedHostDevices:\n      usb:\n      - {resourceName: x, externalResourceProvider: maybe}\n",
            "kv.yaml",
        )
        .unwrap_err();
        assert_eq!(
            bad.to_string(),
            "kv.yaml: spec.configuration.permittedHostDevices.usb[0].externalResourceProvider: expected true or false"
        );
    }

    #[test]
    fn the_crs_launcher_settings_are_read() {
        let kv = read_str(
            "kind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt}\nspec:\n  configuration:\n    cpuRequest: 250m\n    additionalGuestMemoryOverheadRatio: \"1.5\"\n    virtualMachineOptions: {disableSerialConsoleLog: {}}\n    supportContainerResources:\n    - type: hotplug-disk\n      resources: {requests: {memory: 9M}}\n    - type: guest-console-log\n      resources: {requests: {memory: 50M, cpu: \"0\"}, limits: {cpu: 30m}}\n    developerConfiguration:\n      useEmulation: true\n      memoryOvercommit: 150\n      cpuAllocationRatio: 4\n      nodeSelectors: {zone: a}\nstatus: {phase: Deployed, defaultArchitecture: arm64}\n",
            "kv.yaml",
        )
        .unwrap();
        let c = &kv.launcher;
        assert!(c.use_emulation && c.serial_console_log_disabled);
        assert_eq!((c.memory_overcommit, c.cpu_allocation_ratio), (150, 4));
        assert_eq!(c.cpu_request, Some(250));
        assert_eq!(c.overhead_ratio.as_deref(), Some("1.5"));
        assert_eq!(c.node_selectors["zone"], "a");
        assert_eq!(c.default_architecture.as_deref(), Some("arm64"));
        // A zero quantity counts as unset (`GetSupportContainerRequest`).
        assert_eq!(c.console_log_requests, (Some(50_000_000), None));
        assert_eq!(c.console_log_limits, (None, Some(30)));
        // The default cpuRequest (100m) and an invalid overcommit keep KubeVirt's defaults.
        let d = read_str(
            "kind: KubeVirt\nmetadata: {name: kv}\nspec:\n  configuration:\n    cpuRequest: 100m\n    developerConfiguration: {memoryOvercommit: 0}\n",
            "kv.yaml",
        )
        .unwrap();
        assert_eq!(d.launcher, Cluster::default());
        let e = read_str(
            "kind: KubeVirt\nmetadata: {name: kv}\nspec:\n  configuration:\n    developerConfiguration: {memoryOvercommit: lots}\n",
            "kv.yaml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "kv.yaml: spec.configuration.developerConfiguration.memoryOvercommit: expected a whole number"
        );
    }
}
