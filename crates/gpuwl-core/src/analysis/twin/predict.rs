//! What a relabelled node advertises, by gpuwl's model of the GPU Operator and the device
//! plugins (when the twin does not run the real operator): the effective workload config
//! and its operands ([`crate::model::operator`]), then the device-plugin rules the twin's
//! emulation also uses ([`gpusim::advertised`]) on the node's GPUs as its
//! labels and advertised names show them ([`infer_hardware`]).

use std::collections::BTreeMap;

use crate::model::gpusim::{self, GpuHardware, NodeOperands};
use crate::model::node::NodeInfo;
use crate::model::operator::{self, ClusterPolicy, VGPU_CONFIG_LABEL};
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::workload::{DEPLOY_LABEL_PREFIX, LABEL_KEY, WorkloadConfig};
use crate::model::{advertise, pciids};

/// GFD's GPU count label (NVIDIA/k8s-device-plugin `internal/lm/resource.go`).
pub(crate) const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// GFD's product label, spaces as `-` (`NVIDIA-A10`).
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// GFD's per-GPU memory label, MiB.
pub(crate) const GPU_MEMORY_LABEL: &str = "nvidia.com/gpu.memory";

/// A node's GPUs as far as its labels and advertised names show them, and how each part
/// was found (one phrase each, for the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inferred {
    /// The GPUs (memory 0 when unknown).
    pub hw: GpuHardware,
    /// How count, model and memory were found, e.g. `count 2 from nvidia.com/GA102GL_A10`.
    pub how: Vec<String>,
}

/// The GPU names a node lists (zeros included) with their allocatable units (capacity when
/// it has no allocatable map; a malformed quantity counts 0), by
/// [`advertise::gpu_resources`] and [`advertise::node_units`].
pub fn listed(node: &NodeInfo) -> BTreeMap<String, u64> {
    advertise::gpu_resources(node)
        .into_iter()
        .map(|r| {
            let units = advertise::node_units(node, r).map_or(0, |(_, a)| a.max(0));
            (r.to_string(), u64::try_from(units).unwrap_or(0))
        })
        .collect()
}

/// The board of a vGPU type name (`NVIDIA_A10-12Q` → `A10`, `GRID_T4-2Q` → `T4`) and its
/// frame buffer in GB (`12`); `None` for a MIG-backed type (`A100-1-5C`) or another shape.
pub fn vgpu_type_parts(short: &str) -> Option<(String, u64)> {
    let t = short
        .strip_prefix("NVIDIA_")
        .or_else(|| short.strip_prefix("GRID_"))
        .unwrap_or(short);
    let (board, profile) = t.rsplit_once('-')?;
    if board.contains('-') {
        return None;
    }
    let digits: String = profile.chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = &profile[digits.len()..];
    if digits.is_empty() || rest.is_empty() || !rest.chars().all(|c| c.is_ascii_uppercase()) {
        return None;
    }
    Some((board.to_string(), digits.parse().ok()?))
}

/// The PCI device of a GFD product's board (`A10`, `A100-PCIE-40GB`): the device whose
/// `pci.ids` name's bracketed model (`GA102GL [A10]`, `GA100 [A100 PCIe 40GB]`) equals the
/// board, letters and digits compared case-insensitively; the lowest id when several do.
fn device_for_board(board: &str) -> Option<pciids::NvidiaDevice> {
    let key = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_uppercase())
            .collect()
    };
    let want = key(board);
    if want.is_empty() {
        return None;
    }
    pciids::nvidia_devices()
        .filter(|d| {
            d.pci_name
                .split_once('[')
                .and_then(|(_, m)| m.split_once(']'))
                .is_some_and(|(m, _)| key(m) == want)
        })
        .min_by_key(|d| d.id)
}

/// Works out a node's GPUs: the count from GFD's `nvidia.com/gpu.count`, else from the
/// units of the GPU name it lists (a vGPU type's units divided by the instances one GPU
/// holds); the PCI device from the passthrough name it lists, else from the product
/// (`nvidia.com/gpu.product`) or a listed vGPU type's board; the memory from
/// `nvidia.com/gpu.memory`. `None` when the count or the device cannot be found
/// ([`why_unknown`] says which).
pub fn infer_hardware(node: &NodeInfo) -> Option<Inferred> {
    infer(node).ok()
}

/// Why [`infer_hardware`] cannot work out `node`'s GPUs, as a phrase naming the part that
/// is missing (the GPU count, the GPU model, or both) and what was found: `the GPU model
/// is not known: 4 GPUs from nvidia.com/gpu (a name that carries no model), …`. `None`
/// when it can.
pub fn why_unknown(node: &NodeInfo) -> Option<String> {
    infer(node).err()
}

/// [`infer_hardware`], with what is missing as its error.
fn infer(node: &NodeInfo) -> Result<Inferred, String> {
    let names = listed(node);
    let mut how = Vec::new();
    let memory_mib = node
        .label(GPU_MEMORY_LABEL)
        .and_then(|m| m.trim().parse::<u64>().ok());
    let product = node.label(GPU_PRODUCT_LABEL).map(str::to_string);
    // The device.
    let passthrough = names
        .keys()
        .filter(|k| classify(k) == ResourceClass::PassthroughModel)
        .find_map(|k| {
            let s = &k[NVIDIA_PREFIX.len()..];
            pciids::advertised_id(s).map(|id| (k.clone(), id))
        });
    let vgpu = names
        .iter()
        .filter(|(k, _)| classify(k) == ResourceClass::VgpuType)
        .find_map(|(k, n)| vgpu_type_parts(&k[NVIDIA_PREFIX.len()..]).map(|p| (k.clone(), *n, p)));
    let board_of_product = product.as_deref().map(|p| {
        let p = p.strip_prefix("NVIDIA-").unwrap_or(p);
        p.strip_prefix("Tesla-").unwrap_or(p).to_string()
    });
    let device = if let Some((k, id)) = &passthrough {
        how.push(format!("device {id:04x} from {k}"));
        Some(*id)
    } else if let Some(d) = board_of_product.as_deref().and_then(device_for_board) {
        how.push(format!(
            "device {:04x} ({}) from {GPU_PRODUCT_LABEL}",
            d.id, d.pci_name
        ));
        Some(d.id)
    } else if let Some(d) = vgpu.as_ref().and_then(|(_, _, (b, _))| device_for_board(b)) {
        how.push(format!(
            "device {:04x} ({}) from its vGPU type",
            d.id, d.pci_name
        ));
        Some(d.id)
    } else {
        None
    };
    let memory = memory_mib.unwrap_or(0);
    if memory_mib.is_some() {
        how.push(format!("{memory} MiB per GPU from {GPU_MEMORY_LABEL}"));
    }
    // The count.
    let count = if let Some(c) = node
        .label(GPU_COUNT_LABEL)
        .and_then(|c| c.trim().parse::<u32>().ok())
    {
        how.push(format!("{c} GPUs from {GPU_COUNT_LABEL}"));
        Some(c)
    } else if let Some(n) = names
        .get(&format!("{NVIDIA_PREFIX}gpu"))
        .filter(|n| **n > 0)
    {
        how.push(format!("{n} GPUs from {NVIDIA_PREFIX}gpu"));
        u32::try_from(*n).ok()
    } else if let Some((k, _)) = passthrough.as_ref().filter(|(k, _)| names[k] > 0) {
        let n = names[k];
        how.push(format!("{n} GPUs from {k}"));
        u32::try_from(n).ok()
    } else if let Some((k, n, (_, gb))) = vgpu.as_ref().filter(|v| v.1 > 0) {
        let per_gpu = (memory / 1024).checked_div(*gb).unwrap_or(0);
        if per_gpu == 0 {
            None
        } else {
            let c = n.div_ceil(per_gpu);
            how.push(format!("{c} GPUs from {n} × {k} at {per_gpu} per GPU"));
            u32::try_from(c).ok()
        }
    } else {
        None
    };
    let no_model = format!(
        "no {GPU_PRODUCT_LABEL} label (GPU Feature Discovery sets it) and no device-model or \
         vGPU-type name advertised"
    );
    let no_count = format!(
        "no {GPU_COUNT_LABEL} label and no GPU name advertised with units it can be counted from"
    );
    let (count, device) = match (count, device) {
        (Some(c), Some(d)) => (c, d),
        (Some(_), None) => {
            let plain = names.contains_key(&format!("{NVIDIA_PREFIX}gpu"));
            return Err(format!(
                "the GPU model is not known: {}{}, but {no_model}; the model decides the names \
                 a relabelled node advertises",
                how.join(", "),
                if plain {
                    format!(" ({NVIDIA_PREFIX}gpu carries no model)")
                } else {
                    String::new()
                }
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "the GPU count is not known: {}, but {no_count}",
                how.join(", ")
            ));
        }
        (None, None) => {
            return Err(format!(
                "neither the GPU count nor the model is known: {no_count}; {no_model}"
            ));
        }
    };
    let board = board_of_product.or_else(|| {
        pciids::by_id(device).and_then(|d| {
            let s = pciids::sanitize(d.pci_name);
            s.rsplit_once('_').map(|(_, b)| b.to_string())
        })
    });
    Ok(Inferred {
        hw: GpuHardware {
            product: format!(
                "NVIDIA-{}",
                board.unwrap_or_else(|| format!("{device:04x}"))
            ),
            pci_device_id: device,
            count,
            memory_mib: memory,
            vgpu_config: node.label(VGPU_CONFIG_LABEL).map(str::to_string),
            mig_config: None,
            mig_capable: false,
            device_plugin_config: None,
        },
        how,
    })
}

/// The node's labels after a relabel to `config` as the operator leaves them once it has
/// reconciled: the workload label, `nvidia.com/vgpu.config` when a type is given, and the
/// deploy labels of the other workloads removed (NVIDIA/gpu-operator
/// `controllers/state_manager.go`, `removeAllGPUStateLabels` / `addGPUStateLabels`).
pub fn relabelled(node: &NodeInfo, config: WorkloadConfig, vgpu_type: Option<&str>) -> NodeInfo {
    let mut n = node.clone();
    n.labels
        .insert(LABEL_KEY.to_string(), config.as_str().to_string());
    if let Some(t) = vgpu_type {
        n.labels
            .insert(VGPU_CONFIG_LABEL.to_string(), t.to_string());
    }
    let keep = config.deploy_labels();
    for w in WorkloadConfig::ALL {
        for op in w.deploy_labels() {
            if !keep.contains(op) {
                n.labels.remove(&format!("{DEPLOY_LABEL_PREFIX}{op}"));
            }
        }
    }
    n
}

/// What a node advertises by the model: `nvidia.com/` name → units, with notes (why it
/// advertises nothing, what the model cannot know). `node` carries its labels after the
/// relabel ([`relabelled`]).
pub fn advertised(
    node: &NodeInfo,
    hw: &GpuHardware,
    policy: Option<&ClusterPolicy>,
) -> (BTreeMap<String, u64>, Vec<String>) {
    let mut notes = Vec::new();
    let eff = operator::effective_workload(node, policy);
    if eff.label_ignored {
        notes.push(format!(
            "the GPU Operator ignores its {LABEL_KEY} label ({} applies, from {})",
            eff.workload,
            eff.source.as_str()
        ));
    }
    let mut ops = NodeOperands::default();
    for op in operator::operands(node, &eff) {
        match op {
            "device-plugin" => ops.device_plugin = true,
            "sandbox-device-plugin" => ops.sandbox_device_plugin = true,
            "vfio-manager" => ops.vfio_manager = true,
            "vgpu-device-manager" => ops.vgpu_device_manager = true,
            _ => {}
        }
    }
    let mut types = Vec::new();
    if ops.vgpu_device_manager {
        match node.label(VGPU_CONFIG_LABEL) {
            None => notes.push(format!(
                "no {VGPU_CONFIG_LABEL} label: the vGPU device manager applies its default \
                 config, which the model does not know; give the type as NODE=vm-vgpu:<type>"
            )),
            Some(t) => match vgpu_type_parts(t) {
                Some((board, gb)) if board == hw.board() && hw.memory_mib >= gb * 1024 => {
                    types.push((
                        t.to_string(),
                        u32::try_from(hw.memory_mib / 1024 / gb).unwrap_or(0),
                    ));
                }
                Some((board, _)) if board != hw.board() => notes.push(format!(
                    "vGPU type {t} is for {board} GPUs, the node has {}: no vGPU devices",
                    hw.board()
                )),
                Some(_) if hw.memory_mib == 0 => notes.push(format!(
                    "the GPU memory is unknown (no {GPU_MEMORY_LABEL} label): instances of \
                     {t} per GPU cannot be worked out"
                )),
                _ => notes.push(format!(
                    "{VGPU_CONFIG_LABEL}={t} is not a time-sliced vGPU type the model knows"
                )),
            },
        }
    }
    (gpusim::advertised(hw, ops, &types), notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)], res: &[(&str, &str)]) -> NodeInfo {
        crate::testkit::labelled(labels).advertising(res)
    }

    #[test]
    fn hardware_from_the_lab_nodes_advertised_names() {
        let pt = node(
            &[(LABEL_KEY, "vm-passthrough")],
            &[("nvidia.com/GA102GL_A10", "2")],
        );
        let i = infer_hardware(&pt).unwrap();
        assert_eq!(i.hw.pci_device_id, 0x2236);
        assert_eq!(i.hw.count, 2);
        assert_eq!(i.hw.board(), "A10");
        let c = node(
            &[(LABEL_KEY, "container"), (GPU_PRODUCT_LABEL, "NVIDIA-A10")],
            &[("nvidia.com/gpu", "4")],
        );
        let i = infer_hardware(&c).unwrap();
        assert_eq!((i.hw.pci_device_id, i.hw.count), (0x2236, 4));
        let a100 = node(
            &[
                (GPU_PRODUCT_LABEL, "NVIDIA-A100-PCIE-40GB"),
                (GPU_COUNT_LABEL, "8"),
            ],
            &[("nvidia.com/gpu", "8")],
        );
        let i = infer_hardware(&a100).unwrap();
        assert_eq!((i.hw.pci_device_id, i.hw.count), (0x20b1, 8));
        assert_eq!(i.hw.passthrough_name(), "GA100_A100_PCIE_40GB");
        // A vGPU node: 4 × A10-12Q at 2 per 24 GiB GPU = 2 GPUs.
        let v = node(
            &[(LABEL_KEY, "vm-vgpu"), (GPU_MEMORY_LABEL, "24576")],
            &[("nvidia.com/NVIDIA_A10-12Q", "4")],
        );
        let i = infer_hardware(&v).unwrap();
        assert_eq!((i.hw.pci_device_id, i.hw.count), (0x2236, 2));
        // Nothing to go by.
        assert!(infer_hardware(&node(&[(LABEL_KEY, "container")], &[("cpu", "4")])).is_none());
    }

    /// Issue 54, item 5: what is missing is named — the model of a node that advertises
    /// only nvidia.com/gpu, the count of one with only a product label, or both.
    #[test]
    fn why_unknown_names_the_missing_part() {
        let plain = node(&[(LABEL_KEY, "container")], &[("nvidia.com/gpu", "4")]);
        assert_eq!(
            why_unknown(&plain).unwrap(),
            "the GPU model is not known: 4 GPUs from nvidia.com/gpu (nvidia.com/gpu carries no model), but no nvidia.com/gpu.product label (GPU Feature Discovery sets it) and no device-model or vGPU-type name advertised; the model decides the names a relabelled node advertises"
        );
        let product = node(&[(GPU_PRODUCT_LABEL, "NVIDIA-A10")], &[("cpu", "4")]);
        assert_eq!(
            why_unknown(&product).unwrap(),
            "the GPU count is not known: device 2236 (GA102GL [A10]) from nvidia.com/gpu.product, but no nvidia.com/gpu.count label and no GPU name advertised with units it can be counted from"
        );
        let bare = node(&[(LABEL_KEY, "container")], &[("cpu", "4")]);
        assert!(why_unknown(&bare).unwrap().starts_with(
            "neither the GPU count nor the model is known: no nvidia.com/gpu.count label"
        ),);
        let known = node(
            &[(GPU_PRODUCT_LABEL, "NVIDIA-A10")],
            &[("nvidia.com/gpu", "4")],
        );
        assert_eq!(why_unknown(&known), None);
    }

    #[test]
    fn a_relabel_moves_the_name_by_the_model() {
        let pt = node(
            &[(LABEL_KEY, "vm-passthrough")],
            &[("nvidia.com/GA102GL_A10", "2")],
        );
        let hw = infer_hardware(&pt).unwrap().hw;
        let after = relabelled(&pt, WorkloadConfig::Container, None);
        let (adv, notes) = advertised(&after, &hw, None);
        assert_eq!(adv, BTreeMap::from([("nvidia.com/gpu".to_string(), 2)]));
        assert!(notes.is_empty(), "{notes:?}");
        let mut vg = relabelled(&pt, WorkloadConfig::VmVgpu, Some("A10-12Q"));
        vg.labels.insert(GPU_MEMORY_LABEL.into(), "24576".into());
        let hw = infer_hardware(&vg).unwrap().hw;
        let (adv, _) = advertised(&vg, &hw, None);
        assert_eq!(
            adv,
            BTreeMap::from([("nvidia.com/NVIDIA_A10-12Q".to_string(), 4)])
        );
        // vm-vgpu without a type: nothing, and the note says why.
        let bare = relabelled(&pt, WorkloadConfig::VmVgpu, None);
        let (adv, notes) = advertised(&bare, &infer_hardware(&pt).unwrap().hw, None);
        assert!(adv.is_empty());
        assert!(notes[0].contains("default config"), "{notes:?}");
    }

    #[test]
    fn relabelling_drops_the_other_workloads_deploy_labels() {
        let n = node(
            &[
                (LABEL_KEY, "vm-passthrough"),
                ("nvidia.com/gpu.deploy.vfio-manager", "true"),
                ("nvidia.com/gpu.deploy.sandbox-device-plugin", "true"),
            ],
            &[],
        );
        let a = relabelled(&n, WorkloadConfig::Container, None);
        assert_eq!(a.label(LABEL_KEY), Some("container"));
        assert!(a.label("nvidia.com/gpu.deploy.vfio-manager").is_none());
        let b = relabelled(&n, WorkloadConfig::VmVgpu, None);
        assert_eq!(
            b.label("nvidia.com/gpu.deploy.sandbox-device-plugin"),
            Some("true")
        );
    }

    #[test]
    fn vgpu_type_grammar() {
        assert_eq!(vgpu_type_parts("NVIDIA_A10-12Q"), Some(("A10".into(), 12)));
        assert_eq!(vgpu_type_parts("A10-24Q"), Some(("A10".into(), 24)));
        assert_eq!(vgpu_type_parts("GRID_T4-2Q"), Some(("T4".into(), 2)));
        assert_eq!(vgpu_type_parts("A100-1-5C"), None);
        assert_eq!(vgpu_type_parts("A10"), None);
    }
}
