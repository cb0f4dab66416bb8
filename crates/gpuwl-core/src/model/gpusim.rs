//! The model of simulated GPU hardware and of the GPU Operator's device plugins: what a node
//! advertises from its GPUs, the operands running on it and their config files (the pure
//! rules; the root crate's `cluster::gpusim` reads and writes the API objects).
//!
//!
//! **Hardware.** A simulated GPU node carries what a real one would after Node Feature
//! Discovery and GPU Feature Discovery ran ([`GpuHardware::labels`]): NFD's
//! `feature.node.kubernetes.io/pci-10de.present=true` (the GPU Operator finds GPU nodes by
//! it, NVIDIA/gpu-operator `controllers/state_manager.go` `gpuNodeLabels`, `hasGPULabels`),
//! NFD's OS and kernel labels the driver state needs (`system-os_release.ID`,
//! `.VERSION_ID`, `kernel-version.full`, `controllers/object_controls.go`), GFD's
//! `nvidia.com/gpu.product`, `gpu.count`, `gpu.memory` (MiB) (NVIDIA/k8s-device-plugin
//! `internal/lm/resource.go`), GFD's `nvidia.com/mig.capable=true` on MIG-capable boards
//! (`internal/lm/nvml.go`; the operator deploys the MIG manager by it,
//! `hasMIGCapableGPU`), and optionally `nvidia.com/vgpu.config`, `nvidia.com/mig.config`,
//! `nvidia.com/device-plugin.config`. What no label carries, the PCI device id a real
//! plugin reads from sysfs, is in the annotation [`HARDWARE_ANNOTATION`] (the whole spec as
//! JSON).
//!
//! **MIG manager.** Where `nvidia-mig-manager` runs and the node asks for a config by
//! `nvidia.com/mig.config`, the emulation applies it from the MIG manager's ConfigMap as
//! deployed (`default-mig-parted-config` or ClusterPolicy `spec.migManager.config.name`;
//! [`MigConfigFile::layout`]), keeps the resulting per-GPU layout in
//! [`MIG_APPLIED_ANNOTATION`] (GPUs stay partitioned when the manager leaves) and writes
//! `nvidia.com/mig.config.state=success` (or `failed`), as the real one does.
//!
//! **Device plugins.** [`advertised_with`] says, from the operand pods running on a node,
//! what the real plugin there would register with the kubelet (docs/domain-facts.md §3,
//! §4, §9):
//! - `nvidia-device-plugin-daemonset` → [`device_plugin_resources`]: `nvidia.com/gpu` ×
//!   GPU count, or MIG devices by ClusterPolicy `spec.mig.strategy` (`single` →
//!   `nvidia.com/gpu` per MIG device, `mixed` → `nvidia.com/mig-<profile>`), then
//!   time-slicing replicas (`nvidia.com/gpu` × replicas, or `nvidia.com/gpu.shared` with
//!   `renameByDefault`) from the config file the plugin's config manager selects
//!   ([`select_plugin_config`]: ClusterPolicy `spec.devicePlugin.config`, node label
//!   `nvidia.com/device-plugin.config`) (NVIDIA/k8s-device-plugin `internal/rm/rm.go`,
//!   `internal/rm/device_map.go`, `api/config/v1/replicas.go`); where GFD runs, its
//!   `nvidia.com/mig.strategy` label is written too;
//! - `nvidia-sandbox-device-plugin-daemonset` next to `nvidia-vfio-manager` (GPUs bound to
//!   `vfio-pci`) → the sanitized `pci.ids` name of the device × GPU count
//!   (NVIDIA/kubevirt-gpu-device-plugin `pkg/device_plugin/device_plugin.go`
//!   `getDeviceName`; [`crate::model::pciids`]);
//! - `nvidia-sandbox-device-plugin-daemonset` next to `nvidia-vgpu-device-manager` (mediated
//!   devices created) → the vGPU type, whitespace → `_` (`readVgpuIDFromFile`), × instances
//!   per GPU × GPU count; the type and instances come from the vGPU device manager's config
//!   map as the operator deployed it (`default-vgpu-devices-config`, NVIDIA/gpu-operator
//!   `assets/state-vgpu-device-manager/0500_configmap.yaml`), entry `nvidia.com/vgpu.config`
//!   of the node or the ClusterPolicy's `vgpuDeviceManager.config.default`.
//!
//! A name no plugin registers any more stays in `status.capacity` and
//! `status.allocatable` as `"0"`, as the kubelet leaves it (domain-facts §4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::pciids;
use crate::model::resource::NVIDIA_PREFIX;

/// Annotation holding a node's simulated hardware ([`GpuHardware`] as JSON).
pub const HARDWARE_ANNOTATION: &str = "gpuwl.local/simulated-gpus";

/// DaemonSet names of the operands that matter to the emulation (NVIDIA/gpu-operator
/// `assets/state-*/0500_daemonset.yaml`, `0600_daemonset.yaml`).
pub const DEVICE_PLUGIN_APP: &str = "nvidia-device-plugin-daemonset";
/// `app` of the sandbox (KubeVirt GPU) device plugin.
pub const SANDBOX_DEVICE_PLUGIN_APP: &str = "nvidia-sandbox-device-plugin-daemonset";
/// `app` of the VFIO manager (binds the GPUs to `vfio-pci`).
pub const VFIO_MANAGER_APP: &str = "nvidia-vfio-manager";
/// `app` of the vGPU device manager (creates the mediated devices).
pub const VGPU_DEVICE_MANAGER_APP: &str = "nvidia-vgpu-device-manager";
/// DaemonSet of the MIG manager (partitions the GPUs;
/// NVIDIA/gpu-operator `assets/state-mig-manager/0600_daemonset.yaml`).
pub const MIG_MANAGER_APP: &str = "nvidia-mig-manager";
/// DaemonSet of GPU feature discovery (writes the `nvidia.com/` GPU labels;
/// NVIDIA/gpu-operator `assets/gpu-feature-discovery/0500_daemonset.yaml`).
pub const FEATURE_DISCOVERY_APP: &str = "gpu-feature-discovery";

/// The GPUs of one simulated node, all of one model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuHardware {
    /// Product name as GFD labels it (spaces → `-`), e.g. `NVIDIA-A10`.
    pub product: String,
    /// PCI device id (vendor 10de), e.g. `0x2236`.
    pub pci_device_id: u16,
    /// Number of GPUs.
    pub count: u32,
    /// Frame buffer of one GPU in MiB (the board's nominal memory, e.g. 24576 for an A10).
    pub memory_mib: u64,
    /// `nvidia.com/vgpu.config`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpu_config: Option<String>,
    /// `nvidia.com/mig.config`, when set: the MIG manager's config to apply
    /// ([`MigConfigFile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_config: Option<String>,
    /// Whether the GPUs can be MIG-partitioned (A100, A30, H100 class). `true` puts GFD's
    /// `nvidia.com/mig.capable=true` on the node; `false` leaves the label out (GFD would
    /// write `false`), so the operator's product-name fallback stays observable
    /// (NVIDIA/gpu-operator `controllers/state_manager.go` `hasMIGCapableGPU`). Absent in
    /// older annotations: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mig_capable: bool,
    /// `nvidia.com/device-plugin.config`, when set: the entry of the device plugin's
    /// ConfigMap this node uses ([`DevicePluginConfig`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_plugin_config: Option<String>,
}

impl GpuHardware {
    /// `count` NVIDIA A10s (device 2236, 24 GiB), the lab's GPU.
    pub fn a10(count: u32) -> GpuHardware {
        GpuHardware {
            product: "NVIDIA-A10".into(),
            pci_device_id: 0x2236,
            count,
            memory_mib: 24576,
            vgpu_config: None,
            mig_config: None,
            mig_capable: false,
            device_plugin_config: None,
        }
    }

    /// `count` NVIDIA A100 80GB SXM4 (device 20b2, 80 GiB, MIG-capable): the board the
    /// operator's default MIG configs name first (`all-1g.10gb` → seven `1g.10gb` per GPU,
    /// NVIDIA/gpu-operator `assets/state-mig-manager/0400_configmap.yaml`).
    pub fn a100_80gb(count: u32) -> GpuHardware {
        GpuHardware {
            product: "NVIDIA-A100-SXM4-80GB".into(),
            pci_device_id: 0x20b2,
            count,
            memory_mib: 81920,
            vgpu_config: None,
            mig_config: None,
            mig_capable: true,
            device_plugin_config: None,
        }
    }

    /// The labels NFD and GFD would put on the node, and [`HARDWARE_ANNOTATION`].
    pub fn labels(&self) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let mut l = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            l.insert(k.to_string(), v);
        };
        put("feature.node.kubernetes.io/pci-10de.present", "true".into());
        put(
            "feature.node.kubernetes.io/system-os_release.ID",
            "ubuntu".into(),
        );
        put(
            "feature.node.kubernetes.io/system-os_release.VERSION_ID",
            "22.04".into(),
        );
        put(
            "feature.node.kubernetes.io/kernel-version.full",
            "5.15.0-125-generic".into(),
        );
        put("nvidia.com/gpu.product", self.product.clone());
        put("nvidia.com/gpu.count", self.count.to_string());
        put("nvidia.com/gpu.memory", self.memory_mib.to_string());
        if let Some(v) = &self.vgpu_config {
            put("nvidia.com/vgpu.config", v.clone());
        }
        if let Some(m) = &self.mig_config {
            put(MIG_CONFIG_LABEL, m.clone());
        }
        if self.mig_capable {
            put("nvidia.com/mig.capable", "true".into());
        }
        if let Some(c) = &self.device_plugin_config {
            put(DEVICE_PLUGIN_CONFIG_LABEL, c.clone());
        }
        let ann = BTreeMap::from([(
            HARDWARE_ANNOTATION.to_string(),
            serde_json::to_string(self).unwrap_or_default(),
        )]);
        (l, ann)
    }

    /// The resource-name suffix the sandbox plugin gives a passthrough GPU of this model:
    /// the sanitized `pci.ids` name, or the bare device id (4 hex digits) when the table
    /// lacks it.
    pub fn passthrough_name(&self) -> String {
        pciids::by_id(self.pci_device_id)
            .map(|d| pciids::sanitize(d.pci_name))
            .unwrap_or_else(|| format!("{:04x}", self.pci_device_id))
    }

    /// The board name in vGPU types: the product without the `NVIDIA-` / `Tesla-` prefix
    /// (`NVIDIA-A10` → `A10`).
    pub fn board(&self) -> String {
        let p = self.product.as_str();
        let p = p.strip_prefix("NVIDIA-").unwrap_or(p);
        let p = p.strip_prefix("Tesla-").unwrap_or(p);
        p.to_string()
    }
}

/// One `vgpu-configs` entry of the vGPU device manager's config file
/// (NVIDIA/vgpu-device-manager `api/spec/v1`).
#[derive(Debug, Clone, Deserialize)]
pub struct VgpuConfigEntry {
    /// `device-filter`: `0x<device><vendor>` ids (upper-case hex), one or a list; absent =
    /// every GPU.
    #[serde(rename = "device-filter", default)]
    pub device_filter: Option<serde_json::Value>,
    /// `vgpu-devices`: vGPU type (without the `NVIDIA `/`GRID ` prefix) → instances per GPU.
    #[serde(rename = "vgpu-devices", default)]
    pub vgpu_devices: BTreeMap<String, u32>,
}

/// The vGPU device manager's config file (`config.yaml` of its ConfigMap).
#[derive(Debug, Clone, Deserialize)]
pub struct VgpuConfigFile {
    /// Named configs.
    #[serde(rename = "vgpu-configs", default)]
    pub vgpu_configs: BTreeMap<String, Vec<VgpuConfigEntry>>,
}

impl VgpuConfigFile {
    /// Parses the YAML text. Errors: the parser's message.
    pub fn parse(text: &str) -> std::result::Result<VgpuConfigFile, String> {
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }

    /// The vGPU types and instances per GPU that config `name` creates on a GPU with PCI
    /// device id `device`: every entry whose filter is absent or names
    /// `0x<device>10DE`.
    pub fn types_for(&self, name: &str, device: u16) -> Vec<(String, u32)> {
        self.vgpu_configs
            .get(name)
            .into_iter()
            .flatten()
            .filter(|e| device_filter_matches(e.device_filter.as_ref(), device))
            .flat_map(|e| e.vgpu_devices.iter().map(|(t, n)| (t.clone(), *n)))
            .collect()
    }
}

/// Whether a `device-filter` of the vGPU device manager or the MIG manager names an NVIDIA
/// GPU with PCI device id `device`: absent, an empty string or an empty list matches every
/// GPU; else one of the ids `0x<device><vendor>` (hex with `0x`, decimal without, as Go's
/// `strconv.ParseUint(s, 0, 32)` reads it; an optional `:<subsystem>` part is ignored) must
/// equal `device` with vendor `10de` (NVIDIA/mig-parted `api/spec/v1/helpers.go`
/// `MatchesDeviceFilter`, `pkg/types/device.go` `NewDeviceIDFromString`).
pub fn device_filter_matches(filter: Option<&serde_json::Value>, device: u16) -> bool {
    let want = (u64::from(device) << 16) | 0x10de;
    let one = |s: &str| {
        let s = s.split(':').next().unwrap_or("").trim();
        let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => s.parse::<u64>().ok(),
        };
        v == Some(want)
    };
    match filter {
        None | Some(serde_json::Value::Null) => true,
        Some(serde_json::Value::String(s)) => s.is_empty() || one(s),
        Some(serde_json::Value::Array(a)) => {
            a.is_empty() || a.iter().any(|v| v.as_str().is_some_and(one))
        }
        Some(_) => false,
    }
}

/// `nvidia.com/mig.config`: the MIG manager's config a node asks for.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// `nvidia.com/mig.config.state`: what the MIG manager reports (`pending`, `success`,
/// `failed`, …; NVIDIA/mig-parted `deployments/container/reconfigure-mig.sh`).
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// `nvidia.com/mig.strategy`: GFD's label for the MIG strategy, absent under `none`
/// (NVIDIA/k8s-device-plugin `internal/lm/strategy.go`).
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";
/// `nvidia.com/device-plugin.config`: the node label the device plugin's config manager
/// reads to pick an entry of its ConfigMap (NVIDIA/k8s-device-plugin
/// `cmd/config-manager/main.go`, `DefaultConfigLabel`).
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// Annotation in which the emulation keeps the MIG config last applied to a node's GPUs
/// (a real GPU keeps its partitions after the MIG manager leaves).
pub const MIG_APPLIED_ANNOTATION: &str = "gpuwl.local/mig-applied-config";
/// Name of the MIG manager's ConfigMap the operator deploys when the ClusterPolicy names
/// none (`spec.migManager.config.name`; NVIDIA/gpu-operator
/// `controllers/object_controls.go` `MigPartedDefaultConfigMapName`,
/// `assets/state-mig-manager/0400_configmap.yaml`).
pub const DEFAULT_MIG_CONFIGMAP: &str = "default-mig-parted-config";

/// One entry of a named MIG config (NVIDIA/mig-parted `api/spec/v1/spec.go`
/// `MigConfigSpec`).
#[derive(Debug, Clone, Deserialize)]
pub struct MigConfigEntry {
    /// `device-filter`: see [`device_filter_matches`].
    #[serde(rename = "device-filter", default)]
    pub device_filter: Option<serde_json::Value>,
    /// `devices`: `all` or a list of GPU indices (required).
    pub devices: serde_json::Value,
    /// `mig-enabled` (required).
    #[serde(rename = "mig-enabled")]
    pub mig_enabled: bool,
    /// `mig-devices`: MIG profile (`1g.10gb`, `1g.10gb+me`, `1c.3g.20gb`) → devices per
    /// GPU; required when `mig-enabled`.
    #[serde(rename = "mig-devices", default)]
    pub mig_devices: Option<BTreeMap<String, u32>>,
}

impl MigConfigEntry {
    /// Whether the entry's `devices` selects GPU `index` (`all`, or the index listed).
    fn selects(&self, index: usize) -> bool {
        match &self.devices {
            serde_json::Value::String(s) => s == "all",
            serde_json::Value::Array(a) => a.iter().any(|v| v.as_u64() == Some(index as u64)),
            _ => false,
        }
    }
}

/// The MIG manager's config file (`config.yaml` of its ConfigMap): named configs, each a
/// list of [`MigConfigEntry`].
#[derive(Debug, Clone, Deserialize)]
pub struct MigConfigFile {
    /// `version` (`v1`).
    #[serde(default)]
    pub version: Option<String>,
    /// `mig-configs`.
    #[serde(rename = "mig-configs", default)]
    pub mig_configs: BTreeMap<String, Vec<MigConfigEntry>>,
}

/// The MIG state of each GPU of a node, by index: `None` = MIG mode off (a whole GPU);
/// `Some(profile → count)` = MIG mode on with those MIG devices (possibly none).
pub type MigLayout = Vec<Option<BTreeMap<String, u32>>>;

impl MigConfigFile {
    /// Parses the YAML text. Errors: the parser's message, or a version other than `v1`.
    pub fn parse(text: &str) -> std::result::Result<MigConfigFile, String> {
        let f: MigConfigFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        match f.version.as_deref() {
            Some("v1") => Ok(f),
            v => Err(format!("unknown version: {}", v.unwrap_or(""))),
        }
    }

    /// The layout config `name` leaves on `hw`'s GPUs, all MIG mode off before: the
    /// entries in file order, each applied to every GPU its `device-filter` and `devices`
    /// select (a later entry overrides an earlier one for the same GPU; a GPU no entry
    /// selects keeps MIG off), as `nvidia-mig-parted apply` walks them
    /// (NVIDIA/mig-parted `cmd/nvidia-mig-parted/assert/assert.go`
    /// `WalkSelectedMigConfigForEachGPU`). Whether the profiles fit on the GPU is not
    /// checked.
    ///
    /// Errors: `name` is not in the file, or an entry enables MIG without `mig-devices`
    /// (the MIG manager then reports `failed`).
    pub fn layout(&self, name: &str, hw: &GpuHardware) -> std::result::Result<MigLayout, String> {
        let entries = self
            .mig_configs
            .get(name)
            .ok_or_else(|| format!("selected mig-config not present: {name}"))?;
        let mut out: MigLayout = vec![None; hw.count as usize];
        for e in entries {
            if e.mig_enabled && e.mig_devices.is_none() {
                return Err(format!(
                    "mig-config {name}: missing required field 'mig-devices' when 'mig-enabled' is true"
                ));
            }
            if !device_filter_matches(e.device_filter.as_ref(), hw.pci_device_id) {
                continue;
            }
            for (i, slot) in out.iter_mut().enumerate() {
                if e.selects(i) {
                    *slot = e
                        .mig_enabled
                        .then(|| e.mig_devices.clone().unwrap_or_default());
                }
            }
        }
        Ok(out)
    }
}

/// The device plugin's MIG strategy (ClusterPolicy `spec.mig.strategy`, passed as
/// `MIG_STRATEGY`, NVIDIA/gpu-operator `controllers/object_controls.go`
/// `applyMIGConfiguration`; else the config file's `flags.migStrategy`; else `none`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MigStrategy {
    /// Whole GPUs only, MIG mode ignored.
    #[default]
    None,
    /// Every MIG device as `nvidia.com/gpu`; all must be of one profile.
    Single,
    /// Each MIG profile under its own name `nvidia.com/mig-<profile>`.
    Mixed,
}

impl MigStrategy {
    /// `none`, `single`, `mixed`; anything else `None` (the plugin would refuse to start).
    pub fn parse(s: &str) -> Option<MigStrategy> {
        match s {
            "none" => Some(MigStrategy::None),
            "single" => Some(MigStrategy::Single),
            "mixed" => Some(MigStrategy::Mixed),
            _ => None,
        }
    }

    /// The spelling of the ClusterPolicy and GFD's label.
    pub fn as_str(self) -> &'static str {
        match self {
            MigStrategy::None => "none",
            MigStrategy::Single => "single",
            MigStrategy::Mixed => "mixed",
        }
    }
}

/// One `sharing.timeSlicing.resources` (or `sharing.mps.resources`) entry of the device
/// plugin's config (NVIDIA/k8s-device-plugin `api/config/v1/replicas.go`
/// `ReplicatedResource`).
#[derive(Debug, Clone, Deserialize)]
pub struct ReplicatedResource {
    /// Resource to share: `gpu`, `nvidia.com/gpu`, `mig-1g.10gb`, … (`nvidia.com/` is
    /// added when missing, `NewResourceName`).
    pub name: String,
    /// `rename`: read but ignored by the plugin ([`DevicePluginConfig`]).
    #[serde(default)]
    pub rename: Option<String>,
    /// `devices`: read but ignored by the plugin (every device of the name is shared).
    #[serde(default)]
    pub devices: Option<serde_json::Value>,
    /// Units advertised per device; at least 2.
    pub replicas: i64,
}

/// `sharing.timeSlicing` / `sharing.mps` (NVIDIA/k8s-device-plugin
/// `api/config/v1/replicas.go` `ReplicatedResources`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedResources {
    /// Advertise every shared resource as `<name>.shared`.
    #[serde(default)]
    pub rename_by_default: bool,
    /// Reject a request for more than one shared unit (at allocation; it does not change
    /// what is advertised, and kwok nodes run no plugin to reject anything).
    #[serde(default)]
    pub fail_requests_greater_than_one: Option<bool>,
    /// The shared resources; at least one.
    #[serde(default)]
    pub resources: Vec<ReplicatedResource>,
}

/// `sharing` of the device plugin's config (`api/config/v1/sharing.go`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sharing {
    /// `timeSlicing`.
    #[serde(default)]
    pub time_slicing: Option<ReplicatedResources>,
    /// `mps`: when present it is the one the plugin replicates by (`ReplicatedResources()`).
    #[serde(default)]
    pub mps: Option<ReplicatedResources>,
}

/// `flags` of the device plugin's config, the part the emulation reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginFlags {
    /// `migStrategy`, used when the ClusterPolicy sets none.
    #[serde(default)]
    pub mig_strategy: Option<String>,
}

/// One config file of the device plugin's ConfigMap (each key of the ConfigMap named by
/// ClusterPolicy `spec.devicePlugin.config.name` is one; NVIDIA/k8s-device-plugin
/// `api/config/v1/config.go`). The plugin disables renaming before it uses the file
/// (`DisableResourceNamingInConfig`, `replicas.go` `disableResoureRenaming`): a `rename`
/// is ignored, `renameByDefault: true` gives `<name>.shared`, and `devices` is treated as
/// `all`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DevicePluginConfig {
    /// `version` (`v1` when set).
    #[serde(default)]
    pub version: Option<String>,
    /// `flags`.
    #[serde(default)]
    pub flags: PluginFlags,
    /// `sharing`.
    #[serde(default)]
    pub sharing: Sharing,
}

impl DevicePluginConfig {
    /// Parses and checks a config file as the plugin does: version `v1`; a `timeSlicing`
    /// or `mps` section lists at least one resource, each with `replicas` ≥ 2 and
    /// `devices` `all`, a positive count or a list.
    ///
    /// Errors: the first violation, in the plugin's words where it has them.
    pub fn parse(text: &str) -> std::result::Result<DevicePluginConfig, String> {
        let c: DevicePluginConfig = if text.trim().is_empty() {
            DevicePluginConfig::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| e.to_string())?
        };
        if let Some(v) = c.version.as_deref().filter(|v| *v != "v1") {
            return Err(format!("unknown version: {v}"));
        }
        for rr in [&c.sharing.time_slicing, &c.sharing.mps]
            .into_iter()
            .flatten()
        {
            if rr.resources.is_empty() {
                return Err("no resources specified".into());
            }
            for r in &rr.resources {
                if r.replicas < 2 {
                    return Err("number of replicas must be >= 2".into());
                }
                match &r.devices {
                    None => {}
                    Some(serde_json::Value::String(s)) if s == "all" => {}
                    Some(serde_json::Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => {}
                    Some(serde_json::Value::Array(_)) => {}
                    Some(d) => return Err(format!("unrecognized type for devices spec: {d}")),
                }
            }
        }
        Ok(c)
    }

    /// The resources the plugin replicates by: `mps` when present, else `timeSlicing`
    /// (`sharing.go` `ReplicatedResources`).
    pub fn replicated(&self) -> Option<&ReplicatedResources> {
        self.sharing
            .mps
            .as_ref()
            .or(self.sharing.time_slicing.as_ref())
    }
}

/// The full resource name for a name of the plugin's config (`NewResourceName`:
/// `nvidia.com/` added when missing).
fn full_resource_name(n: &str) -> String {
    if n.starts_with(NVIDIA_PREFIX) {
        n.to_string()
    } else {
        format!("{NVIDIA_PREFIX}{n}")
    }
}

/// The name the device plugin gives MIG profile `profile` under the `mixed` strategy:
/// `mig-` + the profile with `+` → `.` (`1g.10gb+me` → `mig-1g.10gb.me`), or `None` for a
/// profile whose compute-instance count differs from its GPU-instance count
/// (`1c.3g.20gb`), which gets no name (NVIDIA/k8s-device-plugin `internal/rm/rm.go`
/// `AddDefaultResourcesToConfig`).
pub fn mixed_mig_name(profile: &str) -> Option<String> {
    let mut parts = profile.split('.');
    let first = parts.next()?;
    if let Some(c) = first.strip_suffix('c') {
        let g = parts.next()?.strip_suffix('g')?;
        if c != g {
            return None;
        }
        let rest: Vec<&str> = parts.collect();
        return Some(format!(
            "{NVIDIA_PREFIX}mig-{g}g.{}",
            rest.join(".").replace('+', ".")
        ));
    }
    Some(format!("{NVIDIA_PREFIX}mig-{}", profile.replace('+', ".")))
}

/// What the container device plugin (`nvidia-device-plugin`) registers on a node with
/// `hw`, the GPUs' MIG `layout` (empty = MIG off everywhere), `strategy` and the config
/// file it runs with (`None` = no config), as full resource name → units. Rules
/// (NVIDIA/k8s-device-plugin `internal/rm/device_map.go`):
/// - `none`: every GPU is one `nvidia.com/gpu`, MIG mode or not;
/// - `single`: whole GPUs (MIG off) and MIG devices all as `nvidia.com/gpu`; the plugin
///   fails when a MIG-enabled GPU has no MIG device, when MIG devices of two profiles are
///   present, or when MIG-enabled and MIG-disabled GPUs are mixed on the node;
/// - `mixed`: whole GPUs as `nvidia.com/gpu`, MIG devices as [`mixed_mig_name`]; a
///   MIG-enabled GPU without MIG devices offers nothing; a profile without a name fails
///   the plugin;
/// - then sharing ([`DevicePluginConfig::replicated`]): every device of each listed name
///   becomes `replicas` units, under `<name>.shared` with `renameByDefault`, else under the
///   name (`updateDeviceMapWithReplicas`); a name listed twice counts its largest
///   `replicas`; a listed name the node lacks is skipped.
///
/// Errors: a failure of the plugin (it registers nothing), in its words.
pub fn device_plugin_resources(
    hw: &GpuHardware,
    layout: &[Option<BTreeMap<String, u32>>],
    strategy: MigStrategy,
    config: Option<&DevicePluginConfig>,
) -> std::result::Result<BTreeMap<String, u64>, String> {
    let gpu = format!("{NVIDIA_PREFIX}gpu");
    let mut devices: BTreeMap<String, u64> = BTreeMap::new();
    let add = |m: &mut BTreeMap<String, u64>, k: String, n: u64| {
        let e = m.entry(k).or_insert(0);
        *e = e.saturating_add(n);
    };
    let state = |i: usize| layout.get(i).and_then(|s| s.as_ref());
    let gpus = hw.count as usize;
    match strategy {
        MigStrategy::None => add(&mut devices, gpu.clone(), u64::from(hw.count)),
        MigStrategy::Single | MigStrategy::Mixed => {
            let mut whole = 0u64;
            let mut profiles: BTreeMap<String, u64> = BTreeMap::new();
            for i in 0..gpus {
                match state(i) {
                    None => whole += 1,
                    Some(m) => {
                        let n: u64 = m.values().map(|v| u64::from(*v)).sum();
                        if n == 0 && strategy == MigStrategy::Single {
                            return Err(format!("device {i} has no MIG devices configured"));
                        }
                        for (p, c) in m.iter().filter(|(_, c)| **c > 0) {
                            add(&mut profiles, p.clone(), u64::from(*c));
                        }
                    }
                }
            }
            if strategy == MigStrategy::Single {
                if profiles.len() > 1 {
                    return Err("more than one MIG device type present on node".into());
                }
                if whole > 0 && !profiles.is_empty() {
                    return Err(
                        "all devices on the node must be configured with the same migEnabled value"
                            .into(),
                    );
                }
                let migs: u64 = profiles.values().sum();
                if whole + migs > 0 {
                    add(&mut devices, gpu.clone(), whole + migs);
                }
            } else {
                if whole > 0 {
                    add(&mut devices, gpu.clone(), whole);
                }
                for (p, n) in profiles {
                    let name = mixed_mig_name(&p).ok_or_else(|| {
                        format!("MIG profile '{p}' does not match any resource patterns")
                    })?;
                    add(&mut devices, name, n);
                }
            }
        }
    }
    let Some(rr) = config.and_then(DevicePluginConfig::replicated) else {
        return Ok(devices);
    };
    // (target name, source name) → largest replicas.
    let mut shared: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in &rr.resources {
        let src = full_resource_name(&r.name);
        let target = if rr.rename_by_default {
            format!("{src}.shared")
        } else {
            src.clone()
        };
        let reps = u64::try_from(r.replicas).unwrap_or(0);
        let e = shared.entry((target, src)).or_insert(0);
        *e = (*e).max(reps);
    }
    let mut out: BTreeMap<String, u64> = devices
        .iter()
        .filter(|(k, _)| !shared.keys().any(|(_, s)| s == *k))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    for ((target, src), reps) in shared {
        if let Some(n) = devices.get(&src) {
            add(&mut out, target, n.saturating_mul(reps));
        }
    }
    Ok(out)
}

/// The mediated-device type name as sysfs shows it: `GRID <type>` for the boards before
/// Ampere (`T4`, `V100…`, `P…`, `M…`), `NVIDIA <type>` otherwise (`NVIDIA A10-12Q`,
/// `GRID T4-2Q`; domain-facts §3).
pub fn mdev_type_name(vgpu_type: &str) -> String {
    let grid = ["T4", "V100", "P", "M"]
        .iter()
        .any(|p| vgpu_type.starts_with(p) && !vgpu_type.starts_with("PG"));
    format!("{} {vgpu_type}", if grid { "GRID" } else { "NVIDIA" })
}

/// Which operand pods run on a node (phase Running, not being deleted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeOperands {
    /// [`DEVICE_PLUGIN_APP`].
    pub device_plugin: bool,
    /// [`SANDBOX_DEVICE_PLUGIN_APP`].
    pub sandbox_device_plugin: bool,
    /// [`VFIO_MANAGER_APP`].
    pub vfio_manager: bool,
    /// [`VGPU_DEVICE_MANAGER_APP`].
    pub vgpu_device_manager: bool,
    /// [`MIG_MANAGER_APP`].
    pub mig_manager: bool,
    /// [`FEATURE_DISCOVERY_APP`].
    pub feature_discovery: bool,
}

impl NodeOperands {
    /// Records a running pod of DaemonSet `app`.
    pub fn add(&mut self, app: &str) {
        match app {
            DEVICE_PLUGIN_APP => self.device_plugin = true,
            SANDBOX_DEVICE_PLUGIN_APP => self.sandbox_device_plugin = true,
            VFIO_MANAGER_APP => self.vfio_manager = true,
            VGPU_DEVICE_MANAGER_APP => self.vgpu_device_manager = true,
            MIG_MANAGER_APP => self.mig_manager = true,
            FEATURE_DISCOVERY_APP => self.feature_discovery = true,
            _ => {}
        }
    }
}

/// What the device plugins running on a node register: full resource name → units. See
/// the module docs for the rules. `vgpu` is the node's vGPU config, already resolved to
/// (type, instances per GPU) by [`VgpuConfigFile::types_for`]. The container plugin runs
/// without MIG and sharing here: `nvidia.com/gpu` × GPU count ([`advertised_with`] takes
/// its resources from [`device_plugin_resources`]).
pub fn advertised(
    hw: &GpuHardware,
    ops: NodeOperands,
    vgpu: &[(String, u32)],
) -> BTreeMap<String, u64> {
    let plain = device_plugin_resources(hw, &[], MigStrategy::None, None).unwrap_or_default();
    advertised_with(hw, ops, vgpu, &plain)
}

/// [`advertised`] with the container device plugin's resources given
/// (`device_plugin`, from [`device_plugin_resources`]; used only while its pod runs).
pub fn advertised_with(
    hw: &GpuHardware,
    ops: NodeOperands,
    vgpu: &[(String, u32)],
    device_plugin: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let count = u64::from(hw.count);
    if ops.device_plugin {
        out.extend(device_plugin.iter().map(|(k, v)| (k.clone(), *v)));
    }
    if ops.sandbox_device_plugin {
        if ops.vfio_manager {
            let name = format!("{NVIDIA_PREFIX}{}", hw.passthrough_name());
            *out.entry(name).or_insert(0) += count;
        } else if ops.vgpu_device_manager {
            for (t, per_gpu) in vgpu {
                let mdev = mdev_type_name(t);
                let short: Vec<&str> = mdev.split_whitespace().collect();
                let name = format!("{NVIDIA_PREFIX}{}", short.join("_"));
                let e = out.entry(name).or_insert(0);
                *e = e.saturating_add(count.saturating_mul(u64::from(*per_gpu)));
            }
        }
    }
    out
}

/// The node status the emulation writes: every name in `now` with its units, and every
/// other `nvidia.com/` name already in `capacity` as `"0"` (a plugin that left). Returns
/// `None` when `capacity` and `allocatable` already say exactly that.
pub fn status_update(
    capacity: &BTreeMap<String, String>,
    allocatable: &BTreeMap<String, String>,
    now: &BTreeMap<String, u64>,
) -> Option<BTreeMap<String, String>> {
    let mut want: BTreeMap<String, String> = now
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    for k in capacity.keys().chain(allocatable.keys()) {
        if k.starts_with(NVIDIA_PREFIX) && !want.contains_key(k) {
            want.insert(k.clone(), "0".into());
        }
    }
    let same = want
        .iter()
        .all(|(k, v)| capacity.get(k) == Some(v) && allocatable.get(k) == Some(v));
    (!same).then_some(want)
}

/// The MIG state the emulation keeps on a node ([`MIG_APPLIED_ANNOTATION`], JSON): the
/// config last applied and the layout it left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigApplied {
    /// The `nvidia.com/mig.config` value applied.
    pub config: String,
    /// Per GPU: `null` = MIG off, else profile → MIG devices.
    pub gpus: MigLayout,
}

/// One pass of the MIG manager on a node whose `nvidia.com/mig.config` is `requested`
/// (NVIDIA/mig-parted `deployments/container/reconfigure-mig.sh`): `None` when it cannot
/// act (no config file, as when its ConfigMap is missing and its pod cannot start);
/// `Some((Some(applied), "success"))` when the config applies; `Some((None, "failed"))`
/// when it does not (unknown name, bad entry), the GPUs keeping their previous layout.
pub fn mig_manager_step(
    requested: &str,
    file: Option<&MigConfigFile>,
    hw: &GpuHardware,
) -> Option<(Option<MigApplied>, &'static str)> {
    let file = file?;
    Some(match file.layout(requested, hw) {
        Ok(gpus) => (
            Some(MigApplied {
                config: requested.to_string(),
                gpus,
            }),
            "success",
        ),
        Err(_) => (None, "failed"),
    })
}

/// The config file the device plugin's config manager selects on a node
/// (NVIDIA/k8s-device-plugin `cmd/config-manager/main.go` `updateConfigName`; the operator
/// passes `DEFAULT_CONFIG` and `FALLBACK_STRATEGIES=empty`, NVIDIA/gpu-operator
/// `controllers/object_controls.go` `handleDevicePluginConfig`): `Ok(None)` when the
/// ClusterPolicy names no ConfigMap (`configured` false: no config manager, plugin
/// defaults) or when neither the node label nor the default names an entry (the empty
/// config); else the entry named by the label `nvidia.com/device-plugin.config`, or by the
/// default when the label is absent or empty.
///
/// Errors (the plugin does not start, so registers nothing): the ConfigMap is missing or
/// empty, the selected entry does not exist, or it fails [`DevicePluginConfig::parse`].
/// That is what a plugin pod started now does (its `config-manager-init` container
/// fails); a pod already running keeps its previous config while its `config-manager`
/// sidecar exits and restarts, which this stateless emulation does not model.
pub fn select_plugin_config(
    configured: bool,
    data: Option<&BTreeMap<String, String>>,
    label: Option<&str>,
    default: Option<&str>,
) -> std::result::Result<Option<DevicePluginConfig>, String> {
    if !configured {
        return Ok(None);
    }
    let data = data.ok_or("the device plugin's ConfigMap does not exist")?;
    if data.is_empty() {
        return Err("no configuration files available".into());
    }
    let Some(name) = label
        .filter(|l| !l.is_empty())
        .or(default.filter(|d| !d.is_empty()))
    else {
        return Ok(None);
    };
    let text = data
        .get(name)
        .ok_or_else(|| format!("specified config {name} does not exist"))?;
    DevicePluginConfig::parse(text)
        .map(Some)
        .map_err(|e| format!("config {name}: {e}"))
}

/// The MIG strategy the device plugin runs with: the ClusterPolicy's `spec.mig.strategy`
/// when set (the `MIG_STRATEGY` env, which outranks the config file), else the config
/// file's `flags.migStrategy`, else `none` (NVIDIA/k8s-device-plugin
/// `api/config/v1/config.go` `NewConfig`: flag, then env, then file).
///
/// Errors: a value other than `none`, `single`, `mixed` (the plugin does not start).
pub fn resolve_strategy(
    policy: Option<&str>,
    config: Option<&DevicePluginConfig>,
) -> std::result::Result<MigStrategy, String> {
    let v = policy
        .filter(|p| !p.is_empty())
        .or_else(|| config.and_then(|c| c.flags.mig_strategy.as_deref()))
        .unwrap_or("none");
    MigStrategy::parse(v).ok_or_else(|| format!("unknown MIG strategy: {v}"))
}

/// Name of the vGPU device manager's ConfigMap the operator deploys when the ClusterPolicy
/// names none (`spec.vgpuDeviceManager.config.name`).
pub const DEFAULT_VGPU_CONFIGMAP: &str = "default-vgpu-devices-config";

/// The ClusterPolicy's settings the emulation needs, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySettings {
    /// The vGPU device manager's ConfigMap (`vgpuDeviceManager.config.name`).
    pub vgpu_configmap: String,
    /// Its config for a node without `nvidia.com/vgpu.config` (`…config.default`).
    pub vgpu_default: String,
    /// The MIG manager's ConfigMap (`migManager.config.name`).
    pub mig_configmap: String,
    /// The device plugin's ConfigMap (`devicePlugin.config.name`); `None`: no config
    /// manager.
    pub plugin_configmap: Option<String>,
    /// Its default entry (`devicePlugin.config.default`).
    pub plugin_default: Option<String>,
    /// `mig.strategy`.
    pub mig_strategy: Option<String>,
}

impl PolicySettings {
    /// Reads them from the ClusterPolicy's `spec` (an empty string counts as unset).
    pub fn from_spec(spec: &serde_json::Value) -> PolicySettings {
        let text = |v: &serde_json::Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        let vgpu_spec = &spec["vgpuDeviceManager"]["config"];
        PolicySettings {
            vgpu_configmap: text(&vgpu_spec["name"])
                .unwrap_or_else(|| DEFAULT_VGPU_CONFIGMAP.into()),
            vgpu_default: text(&vgpu_spec["default"]).unwrap_or_else(|| "default".into()),
            mig_configmap: text(&spec["migManager"]["config"]["name"])
                .unwrap_or_else(|| DEFAULT_MIG_CONFIGMAP.into()),
            plugin_configmap: text(&spec["devicePlugin"]["config"]["name"]),
            plugin_default: text(&spec["devicePlugin"]["config"]["default"]),
            mig_strategy: text(&spec["mig"]["strategy"]),
        }
    }
}

/// The config files the operator deployed (or the user named) for the vGPU device
/// manager, the MIG manager and the device plugin.
#[derive(Debug, Default)]
pub struct ConfigFiles {
    /// The vGPU device manager's `config.yaml`, when its ConfigMap has one that parses.
    pub vgpu: Option<VgpuConfigFile>,
    /// The MIG manager's: `None`: no ConfigMap (its pod cannot start); `Some(Err)`: a
    /// file it cannot read (it reports `failed`).
    pub mig: Option<std::result::Result<MigConfigFile, String>>,
    /// The device plugin's ConfigMap data, when the policy names one and it exists.
    pub plugin: Option<BTreeMap<String, String>>,
}

/// A node's metadata and resources as the emulation reads them (from its `Node` object).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeState {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `status.capacity`, as quantity text.
    pub capacity: BTreeMap<String, String>,
    /// `status.allocatable`, as quantity text.
    pub allocatable: BTreeMap<String, String>,
}

/// What one pass writes to one node.
#[derive(Debug, Default, PartialEq)]
pub struct NodeStep {
    /// The metadata to merge (changed labels, a new [`MIG_APPLIED_ANNOTATION`]); `None`
    /// when nothing changes.
    pub metadata: Option<serde_json::Value>,
    /// The capacity and allocatable to write ([`status_update`]); `None` when they stay.
    pub status: Option<BTreeMap<String, String>>,
    /// Why the running device plugin registers nothing, to report with a status change.
    pub plugin_error: Option<String>,
}

/// One pass over `node` with hardware `hw` and the operands `ops` running on it: the MIG
/// manager applies the requested layout, the device plugin selects its config and
/// strategy, GFD labels the strategy, and the plugins advertise what they find.
pub fn node_step(
    node: &NodeState,
    hw: &GpuHardware,
    ops: NodeOperands,
    settings: &PolicySettings,
    files: &ConfigFiles,
) -> NodeStep {
    let labels = &node.labels;
    let annotations = &node.annotations;
    let config = labels
        .get("nvidia.com/vgpu.config")
        .cloned()
        .unwrap_or_else(|| settings.vgpu_default.clone());
    let types = files
        .vgpu
        .as_ref()
        .map(|f| f.types_for(&config, hw.pci_device_id))
        .unwrap_or_default();
    // The MIG manager: apply the requested config while its pod runs; the GPUs keep the
    // last applied layout when it leaves.
    let mut applied: Option<MigApplied> = annotations
        .get(MIG_APPLIED_ANNOTATION)
        .and_then(|a| serde_json::from_str(a).ok());
    // Label → new value (`None`: remove).
    let mut meta_labels: BTreeMap<String, Option<String>> = BTreeMap::new();
    if let Some((now, state)) = mig_manager_pass(
        labels.get(MIG_CONFIG_LABEL),
        ops,
        applied.as_ref(),
        files.mig.as_ref(),
        hw,
    ) {
        if now.is_some() {
            applied = now;
        }
        meta_labels.insert(MIG_CONFIG_STATE_LABEL.into(), Some(state.into()));
    }
    let layout = applied.as_ref().map(|a| a.gpus.clone()).unwrap_or_default();
    let plugin = select_plugin_config(
        settings.plugin_configmap.is_some(),
        files.plugin.as_ref(),
        labels.get(DEVICE_PLUGIN_CONFIG_LABEL).map(String::as_str),
        settings.plugin_default.as_deref(),
    )
    .and_then(|cfg| {
        let strategy = resolve_strategy(settings.mig_strategy.as_deref(), cfg.as_ref())?;
        Ok((cfg, strategy))
    });
    let device_plugin = plugin
        .as_ref()
        .map_err(String::clone)
        .and_then(|(cfg, strategy)| device_plugin_resources(hw, &layout, *strategy, cfg.as_ref()));
    // GFD's MIG strategy label where it runs (none under `none`: NFD then drops it).
    if ops.feature_discovery
        && let Ok((_, strategy)) = &plugin
    {
        meta_labels.insert(
            MIG_STRATEGY_LABEL.into(),
            (*strategy != MigStrategy::None).then(|| strategy.as_str().to_string()),
        );
    }
    meta_labels.retain(|k, v| labels.get(k) != v.as_ref());
    let metadata = metadata_patch(meta_labels, applied.as_ref(), annotations);
    let now = advertised_with(
        hw,
        ops,
        &types,
        device_plugin.as_ref().unwrap_or(&BTreeMap::new()),
    );
    let status = status_update(&node.capacity, &node.allocatable, &now);
    let plugin_error = match (&status, device_plugin) {
        (Some(_), Err(e)) if ops.device_plugin => Some(e),
        _ => None,
    };
    NodeStep {
        metadata,
        status,
        plugin_error,
    }
}

/// What the MIG manager does in this pass on a node asking for MIG config `requested`:
/// nothing (`None`) unless its pod runs and the config differs from the one `applied`;
/// else [`mig_manager_step`] with its config file (`failed` for a file it cannot read).
fn mig_manager_pass(
    requested: Option<&String>,
    ops: NodeOperands,
    applied: Option<&MigApplied>,
    file: Option<&std::result::Result<MigConfigFile, String>>,
    hw: &GpuHardware,
) -> Option<(Option<MigApplied>, &'static str)> {
    let req = requested.filter(|r| !r.is_empty())?;
    if !ops.mig_manager || applied.map(|a| &a.config) == Some(req) {
        return None;
    }
    match file? {
        Ok(f) => mig_manager_step(req, Some(f), hw),
        Err(_) => Some((None, "failed")),
    }
}

/// The metadata merge patch: `labels` (value `None` removes one) and the applied MIG
/// state when it differs from the node's [`MIG_APPLIED_ANNOTATION`]; `None` when neither
/// changes.
fn metadata_patch(
    labels: BTreeMap<String, Option<String>>,
    applied: Option<&MigApplied>,
    annotations: &BTreeMap<String, String>,
) -> Option<serde_json::Value> {
    let applied_json = applied.and_then(|a| serde_json::to_string(a).ok());
    let new_annotation =
        applied_json.filter(|j| annotations.get(MIG_APPLIED_ANNOTATION) != Some(j));
    if labels.is_empty() && new_annotation.is_none() {
        return None;
    }
    let mut meta = serde_json::json!({ "labels": labels });
    if let Some(j) = new_annotation {
        meta["annotations"] = serde_json::json!({ MIG_APPLIED_ANNOTATION: j });
    }
    Some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
version: v1
vgpu-configs:
    A10-12Q:
        - devices: all
          vgpu-devices:
              A10-12Q: 2
    default:
        - device-filter: "0x223610DE"
          devices: all
          vgpu-devices:
              A10-12Q: 2
        - device-filter: ["0x1EB810DE"]
          devices: all
          vgpu-devices:
              T4-8Q: 2
"#;

    fn ops(dp: bool, sdp: bool, vfio: bool, vgpu: bool) -> NodeOperands {
        NodeOperands {
            device_plugin: dp,
            sandbox_device_plugin: sdp,
            vfio_manager: vfio,
            vgpu_device_manager: vgpu,
            ..NodeOperands::default()
        }
    }

    #[test]
    fn each_plugin_advertises_its_own_name() {
        let hw = GpuHardware::a10(2);
        assert_eq!(
            advertised(&hw, ops(true, false, false, false), &[]),
            BTreeMap::from([("nvidia.com/gpu".to_string(), 2)])
        );
        assert_eq!(
            advertised(&hw, ops(false, true, true, false), &[]),
            BTreeMap::from([("nvidia.com/GA102GL_A10".to_string(), 2)])
        );
        let cfg = VgpuConfigFile::parse(CONFIG).unwrap();
        let types = cfg.types_for("default", 0x2236);
        assert_eq!(types, vec![("A10-12Q".to_string(), 2)]);
        assert_eq!(
            advertised(&hw, ops(false, true, false, true), &types),
            BTreeMap::from([("nvidia.com/NVIDIA_A10-12Q".to_string(), 4)])
        );
        // The sandbox plugin with neither manager has no device to offer.
        assert!(advertised(&hw, ops(false, true, false, false), &types).is_empty());
        assert!(advertised(&hw, NodeOperands::default(), &types).is_empty());
    }

    #[test]
    fn vgpu_configs_filter_by_device() {
        let cfg = VgpuConfigFile::parse(CONFIG).unwrap();
        assert_eq!(
            cfg.types_for("default", 0x1eb8),
            vec![("T4-8Q".to_string(), 2)]
        );
        assert_eq!(
            cfg.types_for("A10-12Q", 0x1eb8),
            vec![("A10-12Q".to_string(), 2)]
        );
        assert!(cfg.types_for("nope", 0x2236).is_empty());
        assert_eq!(mdev_type_name("T4-8Q"), "GRID T4-8Q");
        assert_eq!(mdev_type_name("A10-12Q"), "NVIDIA A10-12Q");
    }

    #[test]
    fn a_name_that_leaves_stays_at_zero() {
        let m = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let cap = m(&[("cpu", "32"), ("nvidia.com/GA102GL_A10", "2")]);
        let now = BTreeMap::from([("nvidia.com/gpu".to_string(), 2u64)]);
        let want = status_update(&cap, &cap, &now).unwrap();
        assert_eq!(
            want,
            m(&[("nvidia.com/GA102GL_A10", "0"), ("nvidia.com/gpu", "2")])
        );
        let done = m(&[
            ("cpu", "32"),
            ("nvidia.com/GA102GL_A10", "0"),
            ("nvidia.com/gpu", "2"),
        ]);
        assert_eq!(status_update(&done, &done, &now), None);
    }

    #[test]
    fn hardware_labels_are_what_nfd_and_gfd_write() {
        let mut hw = GpuHardware::a10(4);
        hw.vgpu_config = Some("A10-12Q".into());
        let (l, a) = hw.labels();
        assert_eq!(l["feature.node.kubernetes.io/pci-10de.present"], "true");
        assert_eq!(l["nvidia.com/gpu.product"], "NVIDIA-A10");
        assert_eq!(l["nvidia.com/gpu.count"], "4");
        assert_eq!(l["nvidia.com/gpu.memory"], "24576");
        assert_eq!(l["nvidia.com/vgpu.config"], "A10-12Q");
        let back: GpuHardware = serde_json::from_str(&a[HARDWARE_ANNOTATION]).unwrap();
        assert_eq!(back, hw);
        assert_eq!(hw.board(), "A10");
        assert_eq!(hw.passthrough_name(), "GA102GL_A10");
    }

    // A MIG manager config in the shape of the operator's `default-mig-parted-config`
    // (entries of `all-1g.10gb` as that ConfigMap has them: seven on 80 GB boards, four on
    // 40 GB ones), plus configs that exercise indices, mixed profiles and failures.
    const MIG: &str = r#"
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  all-1g.10gb:
    - device-filter: ["0x233010DE", "0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
    - device-filter: ["0x20B010DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 4
  all-balanced:
    - device-filter: "0x20b210de"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
  first-split:
    - devices: [0]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  me-and-ci:
    - devices: [0]
      mig-enabled: true
      mig-devices:
        "1g.10gb+me": 1
    - devices: [1]
      mig-enabled: true
      mig-devices:
        "1c.3g.40gb": 2
  other-board:
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
"#;

    fn mig_file() -> MigConfigFile {
        MigConfigFile::parse(MIG).unwrap()
    }

    fn layout(name: &str, hw: &GpuHardware) -> MigLayout {
        mig_file().layout(name, hw).unwrap()
    }

    fn res(v: &[(&str, u64)]) -> BTreeMap<String, u64> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    fn plugin(text: &str) -> DevicePluginConfig {
        DevicePluginConfig::parse(text).unwrap()
    }

    #[test]
    fn time_slicing_multiplies_units_under_the_same_name() {
        let hw = GpuHardware::a10(4);
        let c = plugin(
            "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n",
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&c)).unwrap(),
            res(&[("nvidia.com/gpu", 16)])
        );
        // The short name gets the `nvidia.com/` prefix; failRequestsGreaterThanOne only
        // matters at allocation.
        let c = plugin(
            "sharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n    resources:\n      - name: gpu\n        replicas: 10\n",
        );
        assert_eq!(
            c.replicated().unwrap().fail_requests_greater_than_one,
            Some(true)
        );
        assert_eq!(
            device_plugin_resources(&GpuHardware::a10(8), &[], MigStrategy::None, Some(&c))
                .unwrap(),
            res(&[("nvidia.com/gpu", 80)])
        );
        // No config, or a config without sharing: one unit per GPU.
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, None).unwrap(),
            res(&[("nvidia.com/gpu", 4)])
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&plugin("version: v1\n")))
                .unwrap(),
            res(&[("nvidia.com/gpu", 4)])
        );
    }

    #[test]
    fn rename_by_default_moves_units_to_shared_and_rename_is_ignored() {
        let hw = GpuHardware::a10(2);
        let c = plugin(
            "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 3\n",
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&c)).unwrap(),
            res(&[("nvidia.com/gpu.shared", 6)])
        );
        // A per-resource rename is dropped: the plain name without renameByDefault ...
        let c = plugin(
            "sharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        rename: gpu-ts\n        replicas: 3\n        devices: [0]\n",
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&c)).unwrap(),
            res(&[("nvidia.com/gpu", 6)])
        );
        // ... and `.shared` with it; `devices` is treated as all.
        let c = plugin(
            "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n      - name: gpu\n        rename: gpu-ts\n        replicas: 3\n        devices: 1\n",
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&c)).unwrap(),
            res(&[("nvidia.com/gpu.shared", 6)])
        );
        // A listed name the node lacks is skipped; mps wins over timeSlicing.
        let c = plugin(
            "sharing:\n  timeSlicing:\n    resources:\n      - name: mig-1g.10gb\n        replicas: 2\n",
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&c)).unwrap(),
            res(&[("nvidia.com/gpu", 2)])
        );
        let c = plugin(
            "sharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n        replicas: 2\n  mps:\n    resources:\n      - name: gpu\n        replicas: 5\n",
        );
        assert_eq!(
            device_plugin_resources(&hw, &[], MigStrategy::None, Some(&c)).unwrap(),
            res(&[("nvidia.com/gpu", 10)])
        );
    }

    #[test]
    fn plugin_configs_the_plugin_rejects() {
        let bad = [
            (
                "sharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n        replicas: 1\n",
                "replicas must be >= 2",
            ),
            (
                "sharing:\n  timeSlicing:\n    renameByDefault: true\n",
                "no resources specified",
            ),
            ("version: v2\n", "unknown version: v2"),
            (
                "sharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n        replicas: 2\n        devices: some\n",
                "devices spec",
            ),
        ];
        for (text, want) in bad {
            let e = DevicePluginConfig::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn config_manager_selects_label_then_default_then_empty() {
        let data: BTreeMap<String, String> = [
            ("any", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n        replicas: 4\n"),
            ("a10", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n        replicas: 2\n"),
            ("broken", "version: v1\nsharing:\n  timeSlicing:\n    resources: []\n"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let reps = |r: std::result::Result<Option<DevicePluginConfig>, String>| {
            r.unwrap()
                .map(|c| c.replicated().unwrap().resources[0].replicas)
        };
        assert_eq!(
            reps(select_plugin_config(false, None, Some("a10"), None)),
            None
        );
        assert_eq!(
            reps(select_plugin_config(
                true,
                Some(&data),
                Some("a10"),
                Some("any")
            )),
            Some(2)
        );
        assert_eq!(
            reps(select_plugin_config(true, Some(&data), None, Some("any"))),
            Some(4)
        );
        assert_eq!(
            reps(select_plugin_config(
                true,
                Some(&data),
                Some(""),
                Some("any")
            )),
            Some(4)
        );
        assert_eq!(
            reps(select_plugin_config(true, Some(&data), None, None)),
            None
        );
        let e = select_plugin_config(true, Some(&data), Some("t4"), Some("any")).unwrap_err();
        assert_eq!(e, "specified config t4 does not exist");
        assert!(select_plugin_config(true, None, None, None).is_err());
        assert!(
            select_plugin_config(true, Some(&data), Some("broken"), None)
                .unwrap_err()
                .contains("no resources")
        );
    }

    #[test]
    fn strategy_from_policy_then_config_file_then_none() {
        let c = plugin("version: v1\nflags:\n  migStrategy: mixed\n");
        assert_eq!(
            resolve_strategy(Some("single"), Some(&c)),
            Ok(MigStrategy::Single)
        );
        assert_eq!(resolve_strategy(Some(""), Some(&c)), Ok(MigStrategy::Mixed));
        assert_eq!(resolve_strategy(None, None), Ok(MigStrategy::None));
        assert!(resolve_strategy(Some("Mixed"), None).is_err());
    }

    #[test]
    fn mig_configs_apply_by_device_filter_and_index() {
        let a100 = GpuHardware::a100_80gb(2);
        let seven = BTreeMap::from([("1g.10gb".to_string(), 7)]);
        assert_eq!(
            layout("all-1g.10gb", &a100),
            vec![Some(seven.clone()), Some(seven)]
        );
        // The 40 GB board (20b0) gets the second entry.
        let a100_40 = GpuHardware {
            pci_device_id: 0x20b0,
            ..GpuHardware::a100_80gb(1)
        };
        assert_eq!(
            layout("all-1g.10gb", &a100_40),
            vec![Some(BTreeMap::from([("1g.10gb".to_string(), 4)]))]
        );
        // Indices: GPU 1 keeps MIG off; a filter for another board leaves all GPUs off.
        assert_eq!(
            layout("first-split", &a100),
            vec![Some(BTreeMap::from([("3g.40gb".to_string(), 2)])), None]
        );
        assert_eq!(layout("other-board", &a100), vec![None, None]);
        assert_eq!(layout("all-disabled", &a100), vec![None, None]);
        assert_eq!(layout("all-enabled", &a100), vec![Some(BTreeMap::new()); 2]);
        assert!(mig_file().layout("all-3g.20gb", &a100).is_err());
        assert!(device_filter_matches(
            Some(&serde_json::json!("0x20b210de")),
            0x20b2
        ));
        assert!(device_filter_matches(
            Some(&serde_json::json!("548540638")),
            0x20b2
        ));
        assert!(device_filter_matches(Some(&serde_json::json!([])), 0x20b2));
        assert!(!device_filter_matches(
            Some(&serde_json::json!(["0x20B010DE"])),
            0x20b2
        ));
        assert!(!device_filter_matches(
            Some(&serde_json::json!("20B210DE")),
            0x20b2
        ));
    }

    #[test]
    fn mig_single_counts_every_mig_device_as_gpu() {
        let hw = GpuHardware::a100_80gb(2);
        let single = |name: &str| {
            device_plugin_resources(&hw, &layout(name, &hw), MigStrategy::Single, None)
        };
        assert_eq!(
            single("all-1g.10gb").unwrap(),
            res(&[("nvidia.com/gpu", 14)])
        );
        assert_eq!(
            single("all-disabled").unwrap(),
            res(&[("nvidia.com/gpu", 2)])
        );
        assert!(
            single("all-balanced")
                .unwrap_err()
                .contains("more than one MIG device type")
        );
        assert!(
            single("first-split")
                .unwrap_err()
                .contains("same migEnabled")
        );
        assert!(
            single("all-enabled")
                .unwrap_err()
                .contains("no MIG devices")
        );
    }

    #[test]
    fn mig_mixed_names_each_profile_and_none_ignores_mig() {
        let hw = GpuHardware::a100_80gb(2);
        let run =
            |name: &str, s: MigStrategy| device_plugin_resources(&hw, &layout(name, &hw), s, None);
        assert_eq!(
            run("all-1g.10gb", MigStrategy::Mixed).unwrap(),
            res(&[("nvidia.com/mig-1g.10gb", 14)])
        );
        assert_eq!(
            run("all-balanced", MigStrategy::Mixed).unwrap(),
            res(&[
                ("nvidia.com/mig-1g.10gb", 4),
                ("nvidia.com/mig-2g.20gb", 2),
                ("nvidia.com/mig-3g.40gb", 2),
            ])
        );
        // The GPU left whole stays nvidia.com/gpu; an enabled GPU without devices offers
        // nothing.
        assert_eq!(
            run("first-split", MigStrategy::Mixed).unwrap(),
            res(&[("nvidia.com/gpu", 1), ("nvidia.com/mig-3g.40gb", 2)])
        );
        assert!(run("all-enabled", MigStrategy::Mixed).unwrap().is_empty());
        // `+me` → `.me`; a profile with fewer compute instances than GPU slices has no name.
        assert_eq!(
            mixed_mig_name("1g.10gb+me").unwrap(),
            "nvidia.com/mig-1g.10gb.me"
        );
        assert_eq!(
            mixed_mig_name("3c.3g.40gb").unwrap(),
            "nvidia.com/mig-3g.40gb"
        );
        assert_eq!(mixed_mig_name("1c.3g.40gb"), None);
        assert!(
            run("me-and-ci", MigStrategy::Mixed)
                .unwrap_err()
                .contains("1c.3g.40gb")
        );
        // none: whole GPUs whatever the MIG mode.
        assert_eq!(
            run("all-balanced", MigStrategy::None).unwrap(),
            res(&[("nvidia.com/gpu", 2)])
        );
        // Shared MIG devices take `.shared` under renameByDefault.
        let c = plugin(
            "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n      - name: mig-1g.10gb\n        replicas: 2\n",
        );
        assert_eq!(
            device_plugin_resources(
                &hw,
                &layout("all-balanced", &hw),
                MigStrategy::Mixed,
                Some(&c)
            )
            .unwrap(),
            res(&[
                ("nvidia.com/mig-1g.10gb.shared", 8),
                ("nvidia.com/mig-2g.20gb", 2),
                ("nvidia.com/mig-3g.40gb", 2),
            ])
        );
    }

    #[test]
    fn mig_manager_reports_success_or_failed() {
        let hw = GpuHardware::a100_80gb(1);
        let f = mig_file();
        let (applied, state) = mig_manager_step("all-1g.10gb", Some(&f), &hw).unwrap();
        assert_eq!(state, "success");
        let applied = applied.unwrap();
        assert_eq!(applied.config, "all-1g.10gb");
        assert_eq!(
            applied.gpus,
            vec![Some(BTreeMap::from([("1g.10gb".to_string(), 7)]))]
        );
        assert_eq!(
            mig_manager_step("nope", Some(&f), &hw),
            Some((None, "failed"))
        );
        assert_eq!(mig_manager_step("all-1g.10gb", None, &hw), None);
        assert!(MigConfigFile::parse("version: v2\nmig-configs: {}\n").is_err());
    }

    #[test]
    fn the_device_plugin_part_follows_its_pod() {
        let hw = GpuHardware::a100_80gb(1);
        let dp = res(&[("nvidia.com/mig-1g.10gb", 7)]);
        assert_eq!(
            advertised_with(&hw, ops(true, false, false, false), &[], &dp),
            dp
        );
        assert!(advertised_with(&hw, ops(false, false, false, false), &[], &dp).is_empty());
    }

    #[test]
    fn mig_and_sharing_hardware_labels_and_old_annotations() {
        let mut hw = GpuHardware::a100_80gb(2);
        hw.mig_config = Some("all-1g.10gb".into());
        hw.device_plugin_config = Some("a100".into());
        let (l, a) = hw.labels();
        assert_eq!(l["nvidia.com/mig.capable"], "true");
        assert_eq!(l["nvidia.com/mig.config"], "all-1g.10gb");
        assert_eq!(l["nvidia.com/device-plugin.config"], "a100");
        assert_eq!(l["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
        let back: GpuHardware = serde_json::from_str(&a[HARDWARE_ANNOTATION]).unwrap();
        assert_eq!(back, hw);
        // The A10 has no mig.capable label; an annotation written before these fields
        // parses with them off.
        assert!(
            !GpuHardware::a10(1)
                .labels()
                .0
                .contains_key("nvidia.com/mig.capable")
        );
        let old = r#"{"product":"NVIDIA-A10","pciDeviceId":8758,"count":4,"memoryMib":24576}"#;
        assert_eq!(
            serde_json::from_str::<GpuHardware>(old).unwrap(),
            GpuHardware::a10(4)
        );
    }

    fn node(labels: &[(&str, &str)], capacity: &[(&str, &str)]) -> NodeState {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        NodeState {
            labels: map(labels),
            annotations: BTreeMap::new(),
            capacity: map(capacity),
            allocatable: map(capacity),
        }
    }

    #[test]
    fn policy_settings_default_what_the_policy_leaves_out() {
        let none = PolicySettings::from_spec(&serde_json::Value::Null);
        assert_eq!(
            none,
            PolicySettings {
                vgpu_configmap: DEFAULT_VGPU_CONFIGMAP.into(),
                vgpu_default: "default".into(),
                mig_configmap: DEFAULT_MIG_CONFIGMAP.into(),
                plugin_configmap: None,
                plugin_default: None,
                mig_strategy: None,
            }
        );
        let spec = serde_json::json!({
            "vgpuDeviceManager": {"config": {"name": "vgpu", "default": ""}},
            "migManager": {"config": {"name": "mig"}},
            "devicePlugin": {"config": {"name": "plugin", "default": "a100"}},
            "mig": {"strategy": "mixed"}
        });
        let s = PolicySettings::from_spec(&spec);
        assert_eq!(
            (s.vgpu_configmap.as_str(), s.vgpu_default.as_str()),
            ("vgpu", "default")
        );
        assert_eq!(s.mig_configmap, "mig");
        assert_eq!(s.plugin_configmap.as_deref(), Some("plugin"));
        assert_eq!(s.plugin_default.as_deref(), Some("a100"));
        assert_eq!(s.mig_strategy.as_deref(), Some("mixed"));
    }

    #[test]
    fn the_mig_manager_acts_only_while_running_on_a_new_config() {
        let hw = GpuHardware::a100_80gb(1);
        let running = NodeOperands {
            mig_manager: true,
            ..NodeOperands::default()
        };
        let req = "all-1g.10gb".to_string();
        let file: std::result::Result<MigConfigFile, String> = Ok(mig_file());
        let (applied, state) =
            mig_manager_pass(Some(&req), running, None, Some(&file), &hw).unwrap();
        assert_eq!(state, "success");
        let applied = applied.unwrap();
        assert_eq!(applied.config, "all-1g.10gb");
        // Already applied, not running, nothing asked, no ConfigMap: nothing happens.
        assert_eq!(
            mig_manager_pass(Some(&req), running, Some(&applied), Some(&file), &hw),
            None
        );
        let stopped = NodeOperands::default();
        assert_eq!(
            mig_manager_pass(Some(&req), stopped, None, Some(&file), &hw),
            None
        );
        assert_eq!(
            mig_manager_pass(Some(&String::new()), running, None, Some(&file), &hw),
            None
        );
        assert_eq!(mig_manager_pass(Some(&req), running, None, None, &hw), None);
        let unreadable = Err("bad".to_string());
        assert_eq!(
            mig_manager_pass(Some(&req), running, None, Some(&unreadable), &hw),
            Some((None, "failed"))
        );
    }

    #[test]
    fn a_node_step_applies_mig_then_advertises_what_the_plugin_sees() {
        let hw = GpuHardware::a100_80gb(1);
        let ops = NodeOperands {
            device_plugin: true,
            mig_manager: true,
            feature_discovery: true,
            ..NodeOperands::default()
        };
        let settings =
            PolicySettings::from_spec(&serde_json::json!({"mig": {"strategy": "mixed"}}));
        let files = ConfigFiles {
            mig: Some(Ok(mig_file())),
            ..ConfigFiles::default()
        };
        let n = node(
            &[(MIG_CONFIG_LABEL, "all-1g.10gb")],
            &[("nvidia.com/gpu", "1")],
        );
        let step = node_step(&n, &hw, ops, &settings, &files);
        let meta = step.metadata.unwrap();
        assert_eq!(
            meta["labels"],
            serde_json::json!({
                MIG_CONFIG_STATE_LABEL: "success",
                MIG_STRATEGY_LABEL: "mixed"
            })
        );
        let applied: MigApplied = serde_json::from_str(
            meta["annotations"][MIG_APPLIED_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(applied.config, "all-1g.10gb");
        // The whole GPU leaves (0), the seven MIG devices come.
        let want: BTreeMap<String, String> =
            [("nvidia.com/gpu", "0"), ("nvidia.com/mig-1g.10gb", "7")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(step.status, Some(want));
        assert_eq!(step.plugin_error, None);
    }

    #[test]
    fn a_node_step_reports_a_plugin_without_its_configmap() {
        let hw = GpuHardware::a10(2);
        let ops = NodeOperands {
            device_plugin: true,
            ..NodeOperands::default()
        };
        let settings = PolicySettings::from_spec(
            &serde_json::json!({"devicePlugin": {"config": {"name": "plugin-config"}}}),
        );
        let n = node(&[], &[("nvidia.com/gpu", "2")]);
        let step = node_step(&n, &hw, ops, &settings, &ConfigFiles::default());
        assert_eq!(step.metadata, None);
        assert_eq!(
            step.status,
            Some([("nvidia.com/gpu".to_string(), "0".to_string())].into())
        );
        assert_eq!(
            step.plugin_error.as_deref(),
            Some("the device plugin's ConfigMap does not exist")
        );
        // Nothing to change: nothing to write, nothing to report.
        let n = node(&[], &[]);
        assert_eq!(
            node_step(&n, &hw, ops, &settings, &ConfigFiles::default()),
            NodeStep::default()
        );
    }
}
