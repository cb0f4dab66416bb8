//! KubeVirt's `permittedHostDevices`: the list of resource names a VMI may ask for as a GPU
//! or host device, and the entry that permits a given name.
//!
//! Facts (kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`,
//! `PermittedHostDevices`; HyperConverged: kubevirt/hyperconverged-cluster-operator
//! `api/v1beta1/hyperconverged_types.go`; docs/domain-facts.md §5):
//! - KubeVirt CR: `spec.configuration.permittedHostDevices` with `pciHostDevices[]`
//!   {`pciVendorSelector` `"10DE:2236"`, `resourceName`, `externalResourceProvider`} and
//!   `mediatedDevices[]` {`mdevNameSelector` `"NVIDIA A10-12Q"`, `resourceName`,
//!   `externalResourceProvider`};
//! - HyperConverged CR: `spec.permittedHostDevices`, the PCI selector spelled
//!   `pciDeviceSelector`;
//! - a VMI whose `gpus[]`/`hostDevices[]` `deviceName` is not listed is refused:
//!   `Synchronized=False`, `failed to render launch manifest: GPU <name> is not permitted in
//!   permittedHostDevices configuration`, and no virt-launcher pod is created;
//! - `externalResourceProvider: true` tells KubeVirt that another device plugin (the GPU
//!   Operator's sandbox device plugin) advertises the name; without it KubeVirt starts its
//!   own device plugin for the same devices.

use serde::Serialize;

use crate::model::pciids;
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};

/// Which custom resource the list was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HostDevicesSource {
    /// `kubevirt.io/v1` `KubeVirt`: `spec.configuration.permittedHostDevices`.
    KubeVirt,
    /// `hco.kubevirt.io/v1beta1` `HyperConverged`: `spec.permittedHostDevices`.
    HyperConverged,
}

impl HostDevicesSource {
    /// The path of the list in the CR.
    pub fn path(self) -> &'static str {
        match self {
            HostDevicesSource::KubeVirt => "spec.configuration.permittedHostDevices",
            HostDevicesSource::HyperConverged => "spec.permittedHostDevices",
        }
    }
}

/// One permitted PCI device (`pciHostDevices[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PciHostDevice {
    /// `pciVendorSelector` (KubeVirt) or `pciDeviceSelector` (HyperConverged), e.g.
    /// `10DE:2236`.
    pub selector: String,
    /// `resourceName`.
    pub resource_name: String,
    /// `externalResourceProvider`.
    pub external_resource_provider: bool,
}

/// One permitted mediated device type (`mediatedDevices[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MediatedDevice {
    /// `mdevNameSelector`, e.g. `NVIDIA A10-12Q`.
    pub selector: String,
    /// `resourceName`.
    pub resource_name: String,
    /// `externalResourceProvider`.
    pub external_resource_provider: bool,
}

/// One permitted USB device group (`usb[]` in the KubeVirt CR, `usbHostDevices[]` in the
/// HyperConverged CR): kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`
/// (`PermittedHostDevices.USB`, `USBHostDevice`), kubevirt/hyperconverged-cluster-operator
/// `api/v1beta1/hyperconverged_types.go` (`USBHostDevices`). virt-controller permits its
/// `resourceName` like a PCI or mediated entry's (`pkg/virt-controller/services/
/// renderresources.go`, `validatePermittedHostDevices`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsbHostDevice {
    /// `resourceName`.
    pub resource_name: String,
    /// `externalResourceProvider`.
    pub external_resource_provider: bool,
}

/// A cluster's `permittedHostDevices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermittedHostDevices {
    /// Where it was read from.
    pub source: HostDevicesSource,
    /// `metadata.namespace/metadata.name` of the CR.
    pub object: String,
    /// Whether the CR has the list at all. Absent, virt-controller renders a launcher pod
    /// for any name: it checks names only against a non-nil list
    /// (kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`
    /// `validatePermittedHostDevices`, v1.7.0; observed on the local control plane).
    pub present: bool,
    /// Whether the KubeVirt CR enables the `HostDevices` feature gate
    /// (`spec.configuration.developerConfiguration.featureGates`): without it virt-api
    /// denies every VMI with `hostDevices[]` ("Host Devices feature gate is not enabled in
    /// kubevirt-config", `pkg/virt-api/webhooks/validating-webhook/admitters/
    /// vmi-create-admitter.go`); `gpus[]` needs no gate. `None`: not known (a HyperConverged
    /// CR, which sets KubeVirt's gates itself).
    #[serde(skip)]
    pub host_devices_gate: Option<bool>,
    /// `pciHostDevices[]`.
    pub pci_host_devices: Vec<PciHostDevice>,
    /// `mediatedDevices[]`.
    pub mediated_devices: Vec<MediatedDevice>,
    /// `usb[]` (KubeVirt) or `usbHostDevices[]` (HyperConverged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub usb_host_devices: Vec<UsbHostDevice>,
    /// The CR's settings that change the virt-launcher pod virt-controller renders
    /// ([`crate::model::launcher::Cluster`]; KubeVirt's defaults for a HyperConverged CR).
    #[serde(skip)]
    pub launcher: crate::model::launcher::Cluster,
}

impl PermittedHostDevices {
    /// Whether `resource` is listed (exact, case-sensitive, as KubeVirt compares): as a
    /// `pciHostDevices`, `mediatedDevices` or `usb` entry's `resourceName`
    /// (kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`,
    /// `validatePermittedHostDevices`, v1.7.0, builds one map of the three).
    pub fn permits(&self, resource: &str) -> bool {
        self.resource_names().any(|r| r == resource)
    }

    /// Whether virt-controller refuses a VMI device asking `resource`: the CR has the list
    /// ([`PermittedHostDevices::present`]) and it does not permit the name. Without the
    /// list at all it refuses nothing (`validatePermittedHostDevices` checks only a
    /// non-nil list). The one rule explain, inventory, admission and `kubevirt check` use.
    pub fn refuses(&self, resource: &str) -> bool {
        self.present && !self.permits(resource)
    }

    /// Every permitted `resourceName`: the PCI entries', then the mediated ones', then the
    /// USB ones', in the CR's order.
    pub fn resource_names(&self) -> impl Iterator<Item = &str> {
        self.pci_host_devices
            .iter()
            .map(|d| d.resource_name.as_str())
            .chain(
                self.mediated_devices
                    .iter()
                    .map(|d| d.resource_name.as_str()),
            )
            .chain(
                self.usb_host_devices
                    .iter()
                    .map(|d| d.resource_name.as_str()),
            )
    }
}

/// The entry that would permit a resource name, in KubeVirt's field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) enum PermitEntry {
    /// A `pciHostDevices[]` entry, one per PCI device id.
    Pci(PciHostDevice),
    /// A `mediatedDevices[]` entry.
    Mdev(MediatedDevice),
}

impl PermitEntry {
    /// One line as it would appear in the CR (flow YAML), with `source`'s spelling of the
    /// PCI selector field, e.g. `mediatedDevices: {mdevNameSelector: "NVIDIA A10-12Q",
    /// resourceName: nvidia.com/NVIDIA_A10-12Q, externalResourceProvider: true}`.
    pub(crate) fn yaml_line(&self, source: HostDevicesSource) -> String {
        match self {
            PermitEntry::Pci(d) => format!(
                "pciHostDevices: {{{}: \"{}\", resourceName: {}, externalResourceProvider: true}}",
                match source {
                    HostDevicesSource::KubeVirt => "pciVendorSelector",
                    HostDevicesSource::HyperConverged => "pciDeviceSelector",
                },
                d.selector,
                d.resource_name
            ),
            PermitEntry::Mdev(d) => format!(
                "mediatedDevices: {{mdevNameSelector: \"{}\", resourceName: {}, externalResourceProvider: true}}",
                d.selector, d.resource_name
            ),
        }
    }
}

/// The mdev type name a vGPU resource stands for: the sandbox plugin replaced each
/// whitespace run of the mdev type name with `_` (NVIDIA/kubevirt-gpu-device-plugin
/// `pkg/device_plugin/device_plugin.go`, `readVgpuIDFromFile`), so `NVIDIA_A10-12Q` →
/// `NVIDIA A10-12Q`. `None` for names outside `nvidia.com/`.
pub(crate) fn mdev_name(resource: &str) -> Option<String> {
    Some(resource.strip_prefix(NVIDIA_PREFIX)?.replace('_', " "))
}

/// The entries that permit `resource` with `externalResourceProvider: true` (the GPU
/// Operator's sandbox device plugin advertises it): a vGPU type → one `mediatedDevices`
/// entry; a device-model name → one `pciHostDevices` entry per PCI device id its name
/// resolves to (`GA102GL_A10` → `10DE:2236`; hex `26b5` → `10DE:26B5`; a name several
/// ids share, [`pciids::collisions`], → one entry per id, sorted). Empty when the
/// name is not a GPU name or no PCI id is known for it.
pub(crate) fn permit_entries(resource: &str) -> Vec<PermitEntry> {
    let Some(short) = resource.strip_prefix(NVIDIA_PREFIX) else {
        return Vec::new();
    };
    match classify(resource) {
        ResourceClass::VgpuType => mdev_name(resource)
            .map(|m| {
                PermitEntry::Mdev(MediatedDevice {
                    selector: m,
                    resource_name: resource.to_owned(),
                    external_resource_provider: true,
                })
            })
            .into_iter()
            .collect(),
        ResourceClass::PassthroughModel => {
            let mut ids = pciids::advertised_ids(short);
            if ids.is_empty() {
                ids = pciids::resolve_loose(short);
            }
            ids.into_iter()
                .map(|id| {
                    PermitEntry::Pci(PciHostDevice {
                        selector: format!("10DE:{id:04X}"),
                        resource_name: resource.to_owned(),
                        external_resource_provider: true,
                    })
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Who writes a node label that KubeVirt's virt-controller puts into a virt-launcher pod's
/// nodeSelector on its own (not from the VMI): a user cannot change such an entry on the
/// pod or its VMI, only the node's label can meet it.
///
/// - `kubevirt.io/schedulable`: always `"true"` on a launcher pod; virt-handler's heartbeat
///   sets it on its node (`"false"` when virt-handler stops heartbeating);
/// - `kubernetes.io/arch`: the VMI's architecture (lower-cased) whenever one is set, as
///   virt-api's defaults do; the kubelet labels its node with its architecture;
/// - `cpu-model.node.kubevirt.io/…`, `cpu-feature.node.kubevirt.io/…`,
///   `machine-type.node.kubevirt.io/…`, `host-model-cpu.node.kubevirt.io/…`, `cpumanager`,
///   `kubevirt.io/realtime`, `kubevirt.io/sev`, `kubevirt.io/tdx`: virt-handler's node
///   labeller, from what the node's CPU and hypervisor offer.
///
/// `None` for any other key (it comes from the VMI's own nodeSelector or the KubeVirt CR's
/// cluster-wide selectors, which a user can change).
///
/// Sources: kubevirt/kubevirt `pkg/virt-controller/services/nodeselectorrenderer.go`
/// (`NewNodeSelectorRenderer`, `Render`), `pkg/virt-handler/heartbeat/heartbeat.go`;
/// kubevirt/api `core/v1/types.go` (the label names).
pub fn node_owned_label(key: &str) -> Option<&'static str> {
    const LABELLER: &str = "KubeVirt's virt-handler (its node labeller)";
    match key {
        "kubevirt.io/schedulable" => Some("KubeVirt's virt-handler (its heartbeat)"),
        "kubernetes.io/arch" => Some("the node's kubelet"),
        "cpumanager" | "kubevirt.io/realtime" | "kubevirt.io/sev" | "kubevirt.io/tdx" => {
            Some(LABELLER)
        }
        k if [
            "cpu-model.node.kubevirt.io/",
            "cpu-feature.node.kubevirt.io/",
            "machine-type.node.kubevirt.io/",
            "host-model-cpu.node.kubevirt.io/",
        ]
        .iter()
        .any(|p| k.starts_with(p)) =>
        {
            Some(LABELLER)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn labels_virt_controller_adds_are_owned_by_the_node_side() {
        assert_eq!(
            super::node_owned_label("kubevirt.io/schedulable"),
            Some("KubeVirt's virt-handler (its heartbeat)")
        );
        assert_eq!(
            super::node_owned_label("kubernetes.io/arch"),
            Some("the node's kubelet")
        );
        assert!(super::node_owned_label("cpu-model.node.kubevirt.io/Skylake").is_some());
        assert!(super::node_owned_label("cpumanager").is_some());
        assert_eq!(super::node_owned_label("pool"), None);
        assert_eq!(
            super::node_owned_label("nvidia.com/gpu.workload.config"),
            None
        );
        assert_eq!(super::node_owned_label("kubernetes.io/os"), None);
    }
    use super::*;

    #[test]
    fn entries_for_vgpu_and_passthrough_names() {
        let e = permit_entries("nvidia.com/NVIDIA_A10-12Q");
        assert_eq!(
            e[0].yaml_line(HostDevicesSource::KubeVirt),
            "mediatedDevices: {mdevNameSelector: \"NVIDIA A10-12Q\", resourceName: nvidia.com/NVIDIA_A10-12Q, externalResourceProvider: true}"
        );
        let e = permit_entries("nvidia.com/GA102GL_A10");
        assert_eq!(
            e,
            [PermitEntry::Pci(PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true
            })]
        );
        assert!(
            e[0].yaml_line(HostDevicesSource::HyperConverged)
                .starts_with("pciHostDevices: {pciDeviceSelector: \"10DE:2236\"")
        );
        let e = permit_entries("nvidia.com/TU104GL_TESLA_T4");
        assert!(matches!(&e[0], PermitEntry::Pci(d) if d.selector == "10DE:1EB8"));
        let e = permit_entries("nvidia.com/26b5");
        assert!(matches!(&e[0], PermitEntry::Pci(d) if d.selector == "10DE:26B5"));
        assert!(permit_entries("nvidia.com/gpu").is_empty());
        assert!(permit_entries("cpu").is_empty());
    }

    /// Both naming rules both ways: every NVIDIA `pci.ids` device → the sandbox plugin's
    /// resource name → a `pciHostDevices` entry whose selector is that device's id; and
    /// mdev type names → resource names (whitespace → `_`) → `mdevNameSelector` again.
    #[test]
    fn both_naming_rules_round_trip() {
        for d in pciids::nvidia_devices() {
            let resource = format!("{NVIDIA_PREFIX}{}", pciids::sanitize(d.pci_name));
            assert_eq!(
                classify(&resource),
                ResourceClass::PassthroughModel,
                "{d:?}"
            );
            let want = format!("10DE:{:04X}", d.id);
            let entries = permit_entries(&resource);
            assert!(
                entries
                    .iter()
                    .any(|e| matches!(e, PermitEntry::Pci(p) if p.selector == want)),
                "{d:?} → {resource} → {entries:?}"
            );
        }
        for mdev in [
            "NVIDIA A10-12Q",
            "GRID T4-2Q",
            "GRID V100-8Q",
            "NVIDIA A100-4C",
            "NVIDIA A100-1-5CME",
            "NVIDIA L40S-48A",
            "NVIDIA RTX Pro 6000 Blackwell DC-48C",
        ] {
            let resource = format!(
                "{NVIDIA_PREFIX}{}",
                mdev.split_whitespace().collect::<Vec<_>>().join("_")
            );
            assert_eq!(classify(&resource), ResourceClass::VgpuType, "{resource}");
            assert_eq!(mdev_name(&resource).as_deref(), Some(mdev));
            assert!(
                matches!(&permit_entries(&resource)[..], [PermitEntry::Mdev(m)] if m.selector == mdev)
            );
        }
    }

    #[test]
    fn permits_is_exact() {
        let p = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: None,
            pci_host_devices: vec![],
            mediated_devices: vec![MediatedDevice {
                selector: "NVIDIA A10-24Q".into(),
                resource_name: "nvidia.com/NVIDIA_A10-24Q".into(),
                external_resource_provider: true,
            }],
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        assert!(p.permits("nvidia.com/NVIDIA_A10-24Q"));
        assert!(!p.permits("nvidia.com/NVIDIA_A10-12Q"));
        assert!(!p.permits("nvidia.com/nvidia_a10-24q"));
    }
}
