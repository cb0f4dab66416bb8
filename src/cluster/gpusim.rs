//! Simulated GPU hardware on the local control plane, and the device-plugin emulation that
//! stands in for the one part of the GPU Operator's work that needs real hardware.
//!
//! **Hardware.** A simulated GPU node carries what a real one would after Node Feature
//! Discovery and GPU Feature Discovery ran ([`GpuHardware::labels`]): NFD's
//! `feature.node.kubernetes.io/pci-10de.present=true` (the GPU Operator finds GPU nodes by
//! it, NVIDIA/gpu-operator `controllers/state_manager.go` `gpuNodeLabels`, `hasGPULabels`),
//! NFD's OS and kernel labels the driver state needs (`system-os_release.ID`,
//! `.VERSION_ID`, `kernel-version.full`, `controllers/object_controls.go`), GFD's
//! `nvidia.com/gpu.product`, `gpu.count`, `gpu.memory` (MiB) (NVIDIA/k8s-device-plugin
//! `internal/lm/resource.go`), and optionally `nvidia.com/vgpu.config` /
//! `nvidia.com/mig.config`. What no label carries, the PCI device id a real plugin reads
//! from sysfs, is in the annotation [`HARDWARE_ANNOTATION`] (the whole spec as JSON).
//!
//! **Device plugins.** [`advertised`] says, from the operand pods running on a node, what
//! the real plugin there would register with the kubelet (docs/domain-facts.md §3, §4):
//! - `nvidia-device-plugin-daemonset` → `nvidia.com/gpu` × GPU count
//!   (NVIDIA/k8s-device-plugin `internal/rm/rm.go`);
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

use crate::error::Result;
use crate::input::live::api_error;
use crate::model::pciids;
use crate::model::resource::NVIDIA_PREFIX;

/// Annotation holding a node's simulated hardware ([`GpuHardware`] as JSON).
pub const HARDWARE_ANNOTATION: &str = "gpuwl.local/simulated-gpus";

/// The DaemonSet that owns an operand pod (its `ownerReferences` entry of kind
/// `DaemonSet`), else its `app` or `name` label: the operator's DaemonSet names are stable
/// while their pod labels are not (the VFIO manager's pods carry `name=`, not `app=`,
/// NVIDIA/gpu-operator `assets/state-vfio-manager/0600_daemonset.yaml`).
pub fn daemonset_of(pod: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
    let m = &pod.metadata;
    m.owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "DaemonSet")
        .map(|o| o.name.clone())
        .or_else(|| {
            let l = m.labels.as_ref()?;
            l.get("app").or_else(|| l.get("name")).cloned()
        })
}

/// DaemonSet names of the operands that matter to the emulation (NVIDIA/gpu-operator
/// `assets/state-*/0500_daemonset.yaml`, `0600_daemonset.yaml`).
pub const DEVICE_PLUGIN_APP: &str = "nvidia-device-plugin-daemonset";
/// `app` of the sandbox (KubeVirt GPU) device plugin.
pub const SANDBOX_DEVICE_PLUGIN_APP: &str = "nvidia-sandbox-device-plugin-daemonset";
/// `app` of the VFIO manager (binds the GPUs to `vfio-pci`).
pub const VFIO_MANAGER_APP: &str = "nvidia-vfio-manager";
/// `app` of the vGPU device manager (creates the mediated devices).
pub const VGPU_DEVICE_MANAGER_APP: &str = "nvidia-vgpu-device-manager";

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
    /// `nvidia.com/mig.config`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_config: Option<String>,
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
            put("nvidia.com/mig.config", m.clone());
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
        let want = format!("0x{device:04X}10DE");
        let matches = |f: &Option<serde_json::Value>| match f {
            None => true,
            Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case(&want),
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .any(|v| v.as_str().is_some_and(|s| s.eq_ignore_ascii_case(&want))),
            Some(_) => false,
        };
        self.vgpu_configs
            .get(name)
            .into_iter()
            .flatten()
            .filter(|e| matches(&e.device_filter))
            .flat_map(|e| e.vgpu_devices.iter().map(|(t, n)| (t.clone(), *n)))
            .collect()
    }
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
}

impl NodeOperands {
    /// Records a running pod of DaemonSet `app`.
    pub fn add(&mut self, app: &str) {
        match app {
            DEVICE_PLUGIN_APP => self.device_plugin = true,
            SANDBOX_DEVICE_PLUGIN_APP => self.sandbox_device_plugin = true,
            VFIO_MANAGER_APP => self.vfio_manager = true,
            VGPU_DEVICE_MANAGER_APP => self.vgpu_device_manager = true,
            _ => {}
        }
    }
}

/// What the device plugins running on a node register: full resource name → units. See
/// the module docs for the rules. `vgpu` is the node's vGPU config, already resolved to
/// (type, instances per GPU) by [`VgpuConfigFile::types_for`].
pub fn advertised(
    hw: &GpuHardware,
    ops: NodeOperands,
    vgpu: &[(String, u32)],
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let count = u64::from(hw.count);
    if ops.device_plugin {
        out.insert(format!("{NVIDIA_PREFIX}gpu"), count);
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

/// Name of the vGPU device manager's ConfigMap the operator deploys when the ClusterPolicy
/// names none (`spec.vgpuDeviceManager.config.name`).
pub const DEFAULT_VGPU_CONFIGMAP: &str = "default-vgpu-devices-config";

/// How often [`emulate`] looks at pods and nodes.
pub const EMULATION_PERIOD: std::time::Duration = std::time::Duration::from_millis(500);

/// One pass of the emulation: for every node with [`HARDWARE_ANNOTATION`], works out from
/// the operand pods running on it in `namespace` what its device plugins advertise and
/// writes that into its status ([`status_update`]) through the `status` subresource, as a
/// kubelet would. Returns the number of nodes updated.
///
/// Errors: [`Error::Runtime`] on an API failure (the caller retries on the next pass).
pub async fn emulate_once(client: &kube::Client, namespace: &str) -> Result<usize> {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let node_list = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error("list nodes", &e))?;
    let gpu_nodes: Vec<(Node, GpuHardware)> = node_list
        .items
        .into_iter()
        .filter_map(|n| {
            let hw = n
                .metadata
                .annotations
                .as_ref()?
                .get(HARDWARE_ANNOTATION)
                .and_then(|a| serde_json::from_str::<GpuHardware>(a).ok())?;
            Some((n, hw))
        })
        .collect();
    if gpu_nodes.is_empty() {
        return Ok(0);
    }
    let mut running: BTreeMap<String, NodeOperands> = BTreeMap::new();
    for p in pods
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error(&format!("list pods in {namespace}"), &e))?
        .items
    {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if p.metadata.deletion_timestamp.is_some() || phase != Some("Running") {
            continue;
        }
        let (Some(node), Some(ds)) = (
            p.spec.as_ref().and_then(|s| s.node_name.clone()),
            daemonset_of(&p),
        ) else {
            continue;
        };
        running.entry(node).or_default().add(&ds);
    }
    // The vGPU device manager's config as the operator deployed it, and the policy's
    // default config name.
    let policy: Api<DynamicObject> =
        Api::all_with(client.clone(), &super::gpu_operator::policy_resource());
    let spec = policy
        .get_opt(super::gpu_operator::POLICY_NAME)
        .await
        .ok()
        .flatten()
        .map(|o| o.data["spec"]["vgpuDeviceManager"]["config"].clone())
        .unwrap_or_default();
    let cm_name = spec["name"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_VGPU_CONFIGMAP)
        .to_string();
    let default_config = spec["default"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let vgpu_file = cms
        .get_opt(&cm_name)
        .await
        .ok()
        .flatten()
        .and_then(|cm| cm.data)
        .and_then(|d| d.get("config.yaml").cloned())
        .and_then(|t| VgpuConfigFile::parse(&t).ok());
    let mut updated = 0;
    for (node, hw) in gpu_nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let ops = running.get(&name).copied().unwrap_or_default();
        let config = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("nvidia.com/vgpu.config").cloned())
            .unwrap_or_else(|| default_config.clone());
        let types = vgpu_file
            .as_ref()
            .map(|f| f.types_for(&config, hw.pci_device_id))
            .unwrap_or_default();
        let now = advertised(&hw, ops, &types);
        let quantities = |m: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >|
         -> BTreeMap<String, String> {
            m.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                .unwrap_or_default()
        };
        let status = node.status.as_ref();
        let cap = quantities(status.and_then(|s| s.capacity.as_ref()));
        let alloc = quantities(status.and_then(|s| s.allocatable.as_ref()));
        if let Some(want) = status_update(&cap, &alloc, &now) {
            let patch = serde_json::json!({
                "status": { "capacity": &want, "allocatable": &want }
            });
            nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| api_error(&format!("update the status of node {name}"), &e))?;
            updated += 1;
        }
    }
    Ok(updated)
}

/// Runs [`emulate_once`] every [`EMULATION_PERIOD`] until the process is stopped; an API
/// failure is logged to stderr and retried on the next pass.
pub async fn emulate(client: kube::Client, namespace: &str) -> Result<()> {
    loop {
        match emulate_once(&client, namespace).await {
            Ok(n) if n > 0 => eprintln!("updated the advertised GPU resources of {n} node(s)"),
            Ok(_) => {}
            Err(e) => eprintln!("{e}"),
        }
        tokio::time::sleep(EMULATION_PERIOD).await;
    }
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
}
