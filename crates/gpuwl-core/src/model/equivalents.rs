//! Physical-GPU equivalents of one unit of a GPU resource: passthrough 1 per unit;
//! `nvidia.com/gpu` 1 per unit divided by the `nvidia.com/gpu.replicas` label of
//! time-slicing (gpu-feature-discovery); a vGPU type its framebuffer over the GPU's memory
//! (the `nvidia.com/gpu.memory` label in MiB when present, else [`board_memory_gb`]); MIG
//! and unknown types: not derivable.

use crate::model::node::NodeInfo;
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};

/// Per-vGPU-board memory in GB of ONE physical GPU, by the board name used in vGPU type
/// names (`NVIDIA_A10-12Q` → `A10`). `A100` is the 40 GB board and `A100D` the 80 GB one
/// (the `D` suffix of the 80 GB vGPU types).
///
/// Source: NVIDIA Virtual GPU Software User Guide, "Virtual GPU Types for Supported GPUs"
/// (docs.nvidia.com/vgpu), where each board's largest time-sliced type is its whole
/// framebuffer (e.g. `A10-24Q`, `T4-16Q`, `L40S-48Q`).
pub(crate) fn board_memory_gb(board: &str) -> Option<f64> {
    Some(match board {
        "T4" | "A2" | "A16" | "V100" => 16.0,
        "M10" | "M60" | "P4" => 8.0,
        "A10" | "A30" | "L4" | "P40" | "RTX6000" => 24.0,
        "A40" | "L40" | "L40S" | "L20" | "RTX8000" => 48.0,
        "A100" => 40.0,
        "A100D" | "H100" => 80.0,
        _ => return None,
    })
}

/// Parses a vGPU type suffix (`NVIDIA_A10-12Q`, `GRID_T4-2Q`, `NVIDIA_A100-1-5CME`) into
/// (board, framebuffer GB); 0 GB means 512 MB. Grammar: NVIDIA/vgpu-device-manager
/// `pkg/types/vgpu_type.go`.
pub(crate) fn vgpu_framebuffer(short: &str) -> Option<(&str, f64)> {
    let (head, rest) = short.split_once('-')?;
    let board = head.rsplit('_').next()?;
    let last = rest.rsplit('-').next()?;
    let digits: String = last.chars().take_while(char::is_ascii_digit).collect();
    let series = last[digits.len()..].chars().next()?;
    if digits.is_empty() || !matches!(series, 'A' | 'B' | 'C' | 'Q') {
        return None;
    }
    let gb: f64 = digits.parse().ok()?;
    Some((board, if gb == 0.0 { 0.5 } else { gb }))
}

/// Physical GPUs per unit of `resource` on `node` (see module docs); `None` when it
/// cannot be derived.
pub(crate) fn unit_fraction(node: &NodeInfo, resource: &str) -> Option<f64> {
    let short = resource.strip_prefix(NVIDIA_PREFIX)?;
    match classify(resource) {
        ResourceClass::PassthroughModel => Some(1.0),
        ResourceClass::ContainerGpu => {
            let replicas = node
                .label("nvidia.com/gpu.replicas")
                .and_then(|r| r.parse::<f64>().ok())
                .filter(|r| *r >= 1.0);
            match short {
                "gpu" => Some(1.0 / replicas.unwrap_or(1.0)),
                "gpu.shared" => replicas.map(|r| 1.0 / r),
                _ => None,
            }
        }
        ResourceClass::VgpuType => {
            let (board, fb) = vgpu_framebuffer(short)?;
            match node
                .label("nvidia.com/gpu.memory")
                .and_then(|m| m.parse::<f64>().ok())
                .filter(|m| *m > 0.0)
            {
                Some(mib) => Some(fb * 1024.0 / mib),
                None => Some(fb / board_memory_gb(board)?),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::labelled as node;

    #[test]
    fn vgpu_types_parse() {
        assert_eq!(vgpu_framebuffer("NVIDIA_A10-12Q"), Some(("A10", 12.0)));
        assert_eq!(vgpu_framebuffer("GRID_T4-2Q"), Some(("T4", 2.0)));
        assert_eq!(vgpu_framebuffer("NVIDIA_A100-1-5CME"), Some(("A100", 5.0)));
        assert_eq!(vgpu_framebuffer("NVIDIA_A10-0B"), Some(("A10", 0.5)));
        assert_eq!(vgpu_framebuffer("GRID_T4_2Q"), None);
        assert_eq!(vgpu_framebuffer("GA102GL_A10"), None);
    }

    #[test]
    fn physical_equivalents() {
        let plain = node(&[]);
        assert_eq!(unit_fraction(&plain, "nvidia.com/GA102GL_A10"), Some(1.0));
        assert_eq!(unit_fraction(&plain, "nvidia.com/26b5"), Some(1.0));
        assert_eq!(unit_fraction(&plain, "nvidia.com/gpu"), Some(1.0));
        assert_eq!(unit_fraction(&plain, "nvidia.com/gpu.shared"), None);
        assert_eq!(unit_fraction(&plain, "nvidia.com/mig-1g.10gb"), None);
        assert_eq!(
            unit_fraction(&plain, "nvidia.com/NVIDIA_A10-12Q"),
            Some(0.5)
        );
        assert_eq!(unit_fraction(&plain, "nvidia.com/NVIDIA_XYZ-4Q"), None);
        let ts = node(&[("nvidia.com/gpu.replicas", "4")]);
        assert_eq!(unit_fraction(&ts, "nvidia.com/gpu"), Some(0.25));
        assert_eq!(unit_fraction(&ts, "nvidia.com/gpu.shared"), Some(0.25));
        // GFD's memory label wins over the board table: 4 GB of a 16384 MiB GPU.
        let mem = node(&[("nvidia.com/gpu.memory", "16384")]);
        assert_eq!(unit_fraction(&mem, "nvidia.com/GRID_T4-4Q"), Some(0.25));
        assert_eq!(unit_fraction(&mem, "cpu"), None);
    }
}
