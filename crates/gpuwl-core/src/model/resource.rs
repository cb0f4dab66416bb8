//! Classification of extended-resource names under `nvidia.com/`.
//!
//! Sources (summarised in docs/domain-facts.md §3):
//! - container GPUs: NVIDIA/k8s-device-plugin `internal/rm/rm.go` (`nvidia.com/gpu`, MIG
//!   `mixed` strategy `nvidia.com/mig-<g>g.<mem>gb` with media-extension forms such as
//!   `mig-1g.10gb.me`; time-slicing/MPS `renameByDefault` appends `.shared`);
//! - passthrough device models: NVIDIA/kubevirt-gpu-device-plugin
//!   `pkg/device_plugin/device_plugin.go` (`getDeviceName`: sanitized `pci.ids` name, or the
//!   lower-case hex device id when the plugin's `pci.ids` lacks the device);
//! - vGPU types: the same repository (`readVgpuIDFromFile`: the mdev type name with
//!   whitespace → `_`) and NVIDIA/vgpu-device-manager `pkg/types/vgpu_type.go` (grammar
//!   `<GPU>-<GB><S>` and MIG-backed `<GPU>-<G>-<GB><S>[ME|NOME|MEALL|GFX]`);
//! - non-GPU NVIDIA resources: NVIDIA Network Operator (RDMA shared devices
//!   `rdma_shared_device_*`, SR-IOV `sriov*`, host devices `hostdev*`).

use crate::model::pciids;
use crate::model::workload::WorkloadConfig;

/// The prefix of every NVIDIA extended resource: `nvidia.com/`.
pub const NVIDIA_PREFIX: &str = "nvidia.com/";

/// Name prefixes (after `nvidia.com/`) of NVIDIA resources that are not GPUs and are
/// ignored by the check: NVIDIA Network Operator devices (`rdma_shared_device_*`,
/// `hostdev*`, `sriov*`) and NVSwitch devices passed to Kata / confidential-computing VMs
/// (`nvswitch`, NVIDIA/kubevirt-gpu-device-plugin and the GPU Operator's kata sandbox
/// device plugin advertise them beside the GPUs).
pub(crate) const NON_GPU_PREFIXES: [&str; 4] =
    ["rdma_shared_device", "hostdev", "sriov", "nvswitch"];

/// What an extended resource name denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceClass {
    /// A GPU for containers: `nvidia.com/gpu`, `nvidia.com/gpu.shared`, MIG
    /// `nvidia.com/mig-1g.10gb` (and `.me` / `.shared` forms).
    ContainerGpu,
    /// A vGPU (mediated device) type: `nvidia.com/NVIDIA_A10-12Q`, `nvidia.com/GRID_T4-2Q`,
    /// MIG-backed `nvidia.com/NVIDIA_A100-1-5CME`.
    VgpuType,
    /// A whole-GPU device model for PCI passthrough: `nvidia.com/GA102GL_A10`,
    /// `nvidia.com/AD102GL_L40S`, hex fallback `nvidia.com/26b5`.
    PassthroughModel,
    /// An NVIDIA resource that is not a GPU (Network Operator), or one matched by an
    /// `--ignore-resource` glob. Ignored by the check.
    NonGpu,
    /// Not under `nvidia.com/` (cpu, memory, other vendors). Ignored.
    NotNvidia,
}

impl ResourceClass {
    /// Stable machine-readable code: `container-gpu`, `vgpu-type`, `passthrough-model`,
    /// `non-gpu`, `not-nvidia`.
    pub fn code(self) -> &'static str {
        match self {
            ResourceClass::ContainerGpu => "container-gpu",
            ResourceClass::VgpuType => "vgpu-type",
            ResourceClass::PassthroughModel => "passthrough-model",
            ResourceClass::NonGpu => "non-gpu",
            ResourceClass::NotNvidia => "not-nvidia",
        }
    }

    /// Human wording used in reasons: `container GPU`, `vGPU type`, `device model`, ...
    pub fn describe(self) -> &'static str {
        match self {
            ResourceClass::ContainerGpu => "container GPU",
            ResourceClass::VgpuType => "vGPU type",
            ResourceClass::PassthroughModel => "device model",
            ResourceClass::NonGpu => "non-GPU NVIDIA resource",
            ResourceClass::NotNvidia => "not an NVIDIA resource",
        }
    }

    /// Whether the class is one of the three GPU classes.
    pub fn is_gpu(self) -> bool {
        matches!(
            self,
            ResourceClass::ContainerGpu | ResourceClass::VgpuType | ResourceClass::PassthroughModel
        )
    }

    /// The GPU class a node labelled `w` must advertise.
    pub(crate) fn for_workload(w: WorkloadConfig) -> ResourceClass {
        match w {
            WorkloadConfig::Container => ResourceClass::ContainerGpu,
            WorkloadConfig::VmPassthrough => ResourceClass::PassthroughModel,
            WorkloadConfig::VmVgpu => ResourceClass::VgpuType,
        }
    }

    /// The workload value whose nodes advertise this class (`None` for non-GPU classes).
    pub fn workload(self) -> Option<WorkloadConfig> {
        match self {
            ResourceClass::ContainerGpu => Some(WorkloadConfig::Container),
            ResourceClass::PassthroughModel => Some(WorkloadConfig::VmPassthrough),
            ResourceClass::VgpuType => Some(WorkloadConfig::VmVgpu),
            _ => None,
        }
    }
}

impl serde::Serialize for ResourceClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// Classifies a full resource name (`nvidia.com/<name>`) with the built-in rules only.
/// See [`Classifier::classify`].
pub fn classify(name: &str) -> ResourceClass {
    Classifier::default().classify(name)
}

/// A classifier with extra ignore globs (the CLI's `--ignore-resource GLOB`).
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    ignore: Vec<String>,
}

impl Classifier {
    /// A classifier that also treats names matching any of `globs` as
    /// [`ResourceClass::NonGpu`]. A glob containing `/` is matched against the full name
    /// (`nvidia.com/foo*`), otherwise against the part after `nvidia.com/` (`foo*`).
    /// `*` matches any run of characters, `?` one character; everything else is literal.
    pub(crate) fn with_ignore_globs<I, S>(globs: I) -> Classifier
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Classifier {
            ignore: globs.into_iter().map(Into::into).collect(),
        }
    }

    /// Classifies a full resource name. Rules, in order:
    /// 1. not starting with `nvidia.com/` → [`ResourceClass::NotNvidia`];
    /// 2. Network Operator prefixes ([`NON_GPU_PREFIXES`]) or an ignore glob →
    ///    [`ResourceClass::NonGpu`];
    /// 3. `gpu`, `gpu.shared`, MIG names ([`is_container_gpu_name`]) →
    ///    [`ResourceClass::ContainerGpu`];
    /// 4. a known NVIDIA `pci.ids` device name, sanitized as the sandbox plugin does
    ///    ([`pciids::is_device_name`]) → [`ResourceClass::PassthroughModel`], even when it
    ///    ends in digit + capital (`AD102GL_L40S`, `GA100_A100X`);
    /// 5. the vGPU rule ([`is_vgpu_type_name`]) → [`ResourceClass::VgpuType`];
    /// 6. everything else (including hex ids such as `26b5`) →
    ///    [`ResourceClass::PassthroughModel`].
    pub fn classify(&self, name: &str) -> ResourceClass {
        let Some(short) = name.strip_prefix(NVIDIA_PREFIX) else {
            return ResourceClass::NotNvidia;
        };
        if NON_GPU_PREFIXES.iter().any(|p| short.starts_with(p)) || self.ignored(name, short) {
            return ResourceClass::NonGpu;
        }
        if is_container_gpu_name(short) {
            return ResourceClass::ContainerGpu;
        }
        if pciids::is_device_name(short) {
            return ResourceClass::PassthroughModel;
        }
        if is_vgpu_type_name(short) {
            return ResourceClass::VgpuType;
        }
        ResourceClass::PassthroughModel
    }

    fn ignored(&self, full: &str, short: &str) -> bool {
        self.ignore.iter().any(|g| {
            if g.contains('/') {
                glob_match(g.as_bytes(), full.as_bytes())
            } else {
                glob_match(g.as_bytes(), short.as_bytes())
            }
        })
    }
}

/// Minimal glob: `*` any run, `?` any one byte, everything else literal.
fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

/// Whether `short` (the part after `nvidia.com/`) names a container GPU resource:
/// `gpu`; MIG `mig-[<c>c.]<g>g.<mem>gb` followed by any attribute parts such as `.me`,
/// `.me.all`, `.gfx` (lower-case words joined by `.`, `+` or `-`); each optionally with
/// the `.shared` suffix of time-slicing/MPS `renameByDefault`.
///
/// Source: NVIDIA/k8s-device-plugin `internal/rm/rm.go`; the attribute forms beyond
/// `.me` are derived from the MIG profile grammar, not seen on a node.
pub(crate) fn is_container_gpu_name(short: &str) -> bool {
    let base = short.strip_suffix(".shared").unwrap_or(short);
    if base == "gpu" {
        return true;
    }
    let Some(rest) = base.strip_prefix("mig-") else {
        return false;
    };
    let b = rest.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > s
    };
    // optional compute-instance part `<c>c.`
    let save = i;
    if !(digits(&mut i) && b.get(i) == Some(&b'c') && b.get(i + 1) == Some(&b'.')) {
        i = save;
    } else {
        i += 2;
    }
    if !(digits(&mut i) && b.get(i) == Some(&b'g') && b.get(i + 1) == Some(&b'.')) {
        return false;
    }
    i += 2;
    if !(digits(&mut i) && b.get(i) == Some(&b'g') && b.get(i + 1) == Some(&b'b')) {
        return false;
    }
    i += 2;
    while i < b.len() {
        if !matches!(b[i], b'.' | b'+' | b'-') {
            return false;
        }
        i += 1;
        let s = i;
        while i < b.len() && b[i].is_ascii_lowercase() {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    true
}

/// The MIG-backed vGPU suffixes after the series letter (NVIDIA/vgpu-device-manager
/// `pkg/types/vgpu_type.go`).
pub const VGPU_MIG_SUFFIXES: [&str; 4] = ["MEALL", "NOME", "ME", "GFX"];

/// The lab's vGPU rule (docs/lab.md step 8), extended: `short` ends in an ASCII digit followed by one
/// upper-case letter (`NVIDIA_A10-12Q`, `GRID_T4-2Q`, `NVIDIA_A100-1-5C`), optionally
/// followed by one MIG-backed suffix from [`VGPU_MIG_SUFFIXES`] (`NVIDIA_A100-1-5CME`).
///
/// On its own this also matches passthrough names such as `AD102GL_L40S`;
/// [`Classifier::classify`] consults `pci.ids` first.
pub fn is_vgpu_type_name(short: &str) -> bool {
    let ends_digit_capital = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 2 && b[b.len() - 1].is_ascii_uppercase() && b[b.len() - 2].is_ascii_digit()
    };
    ends_digit_capital(short)
        || VGPU_MIG_SUFFIXES
            .iter()
            .any(|suf| short.strip_suffix(suf).is_some_and(ends_digit_capital))
}

/// Whether `short` is the sandbox plugin's fallback name for a device missing from its
/// `pci.ids`: exactly four lower-case hex digits, e.g. `26b5` (an L40 on an old plugin).
/// Source: NVIDIA/kubevirt-gpu-device-plugin `pkg/device_plugin/device_plugin.go`.
pub(crate) fn is_hex_fallback(short: &str) -> bool {
    short.len() == 4
        && short
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Whether a passthrough name contains lower-case letters (and is not a hex fallback),
/// e.g. `TU104GL_Tesla_T4`: the plugin upper-cases since v1.1.1 (2022), so no current
/// node advertises such a name (NVIDIA/kubevirt-gpu-device-plugin
/// `pkg/device_plugin/device_plugin.go`).
pub(crate) fn is_mixed_case_model(short: &str) -> bool {
    !is_hex_fallback(short) && short.bytes().any(|c| c.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::ResourceClass::*;
    use super::*;

    #[test]
    fn facts_sheet_names() {
        for (name, want) in [
            ("nvidia.com/gpu", ContainerGpu),
            ("nvidia.com/gpu.shared", ContainerGpu),
            ("nvidia.com/mig-1g.10gb", ContainerGpu),
            ("nvidia.com/mig-1g.10gb.me", ContainerGpu),
            ("nvidia.com/mig-3g.20gb", ContainerGpu),
            ("nvidia.com/mig-1g.5gb.shared", ContainerGpu),
            ("nvidia.com/mig-1g.24gb.me.all", ContainerGpu),
            ("nvidia.com/mig-1c.3g.20gb", ContainerGpu),
            ("nvidia.com/GA102GL_A10", PassthroughModel),
            ("nvidia.com/TU104GL_TESLA_T4", PassthroughModel),
            ("nvidia.com/AD102GL_L40S", PassthroughModel),
            ("nvidia.com/GH100_H100_SXM5_80GB", PassthroughModel),
            ("nvidia.com/GA100_A100SXM64GB", PassthroughModel),
            ("nvidia.com/GA107GL_A2___A16", PassthroughModel),
            ("nvidia.com/GA100_A100X", PassthroughModel),
            ("nvidia.com/GA106_RTX_A2000_12GB", PassthroughModel),
            ("nvidia.com/26b5", PassthroughModel),
            ("nvidia.com/2571", PassthroughModel),
            ("nvidia.com/TU104GL_Tesla_T4", PassthroughModel),
            ("nvidia.com/NVIDIA_A10-12Q", VgpuType),
            ("nvidia.com/GRID_T4-2Q", VgpuType),
            ("nvidia.com/NVIDIA_A100-1-5C", VgpuType),
            ("nvidia.com/NVIDIA_A100-1-5CME", VgpuType),
            ("nvidia.com/NVIDIA_A100-1-5CNOME", VgpuType),
            ("nvidia.com/NVIDIA_A100-7-80CMEALL", VgpuType),
            ("nvidia.com/NVIDIA_A100-1-5CGFX", VgpuType),
            ("nvidia.com/NVIDIA_L40S-48A", VgpuType),
            ("nvidia.com/rdma_shared_device_a", NonGpu),
            ("nvidia.com/hostdev", NonGpu),
            ("nvidia.com/sriov_cx6", NonGpu),
            ("nvidia.com/nvswitch", NonGpu),
            ("nvidia.com/pgpu", PassthroughModel),
            ("cpu", NotNvidia),
            ("memory", NotNvidia),
            ("amd.com/gpu", NotNvidia),
            ("nvidia.com", NotNvidia),
        ] {
            assert_eq!(classify(name), want, "{name}");
        }
    }

    #[test]
    fn not_container_lookalikes() {
        for short in [
            "gpus",
            "gpu.shared.shared",
            "mig-1g",
            "mig-g.10gb",
            "mig-1g.10gb.",
            "mig-1g.10gb.ME",
            "GPU",
        ] {
            assert!(!is_container_gpu_name(short), "{short}");
        }
    }

    #[test]
    fn ignore_globs() {
        let c = Classifier::with_ignore_globs(["foo*", "example.com/*", "nvidia.com/bar?"]);
        assert_eq!(c.classify("nvidia.com/foo_dev"), NonGpu);
        assert_eq!(c.classify("nvidia.com/bar1"), NonGpu);
        assert_eq!(c.classify("nvidia.com/bar12"), PassthroughModel);
        assert_eq!(c.classify("nvidia.com/gpu"), ContainerGpu);
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"a*b*c", b"aXXbYc"));
        assert!(!glob_match(b"a*b*c", b"aXXbY"));
    }

    #[test]
    fn hex_and_mixed_case() {
        assert!(is_hex_fallback("26b5"));
        assert!(is_hex_fallback("2236"));
        assert!(!is_hex_fallback("26B5"));
        assert!(!is_hex_fallback("26b"));
        assert!(is_mixed_case_model("TU104GL_Tesla_T4"));
        assert!(!is_mixed_case_model("TU104GL_TESLA_T4"));
        assert!(!is_mixed_case_model("26b5"));
    }

    #[test]
    fn workload_mapping() {
        for w in WorkloadConfig::ALL {
            assert_eq!(ResourceClass::for_workload(w).workload(), Some(w));
        }
        assert!(!NonGpu.is_gpu() && !NotNvidia.is_gpu());
    }
}
