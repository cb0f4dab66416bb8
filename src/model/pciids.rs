//! NVIDIA PCI device names as the sandbox (KubeVirt GPU) device plugin turns them into
//! resource names.
//!
//! The table is the NVIDIA vendor section (`10de`) of the PCI ID Repository's `pci.ids`,
//! embedded by the `pci-ids` crate (lienching/pci-ids.rs, its `pciids/pci.ids`), not a
//! hand-typed list.

use std::collections::HashMap;
use std::sync::OnceLock;

/// PCI vendor id of NVIDIA Corporation.
pub const NVIDIA_VENDOR_ID: u16 = 0x10de;

/// Turns a `pci.ids` device name into the resource-name suffix the sandbox device plugin
/// advertises: upper-case, `/` and `.` → `_`, each whitespace run → `_`, then every
/// character not in `[A-Za-z0-9_]` deleted.
///
/// `GA102GL [A10]` → `GA102GL_A10`; `GA107GL [A2 / A16]` → `GA107GL_A2___A16`;
/// `GA100 [A100-SXM-64GB]` → `GA100_A100SXM64GB`.
///
/// Source: NVIDIA/kubevirt-gpu-device-plugin `pkg/device_plugin/device_plugin.go`
/// (`getDeviceName`; upper-casing since plugin v1.1.1).
pub fn sanitize(pci_name: &str) -> String {
    let upper = pci_name.to_uppercase();
    let mut out = String::with_capacity(upper.len());
    let mut in_space = false;
    for c in upper.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push('_');
            }
            in_space = true;
            continue;
        }
        in_space = false;
        match c {
            '/' | '.' => out.push('_'),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => {}
        }
    }
    out
}

/// An NVIDIA device from the embedded `pci.ids`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvidiaDevice {
    /// PCI device id, e.g. `0x2236`.
    pub id: u16,
    /// The `pci.ids` name verbatim, e.g. `GA102GL [A10]`.
    pub pci_name: &'static str,
}

fn table() -> &'static HashMap<String, NvidiaDevice> {
    static TABLE: OnceLock<HashMap<String, NvidiaDevice>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = HashMap::new();
        for v in pci_ids::Vendors::iter().filter(|v| v.id() == NVIDIA_VENDOR_ID) {
            for d in v.devices() {
                m.entry(sanitize(d.name())).or_insert(NvidiaDevice {
                    id: d.id(),
                    pci_name: d.name(),
                });
            }
        }
        m
    })
}

/// The NVIDIA device whose sanitized name ([`sanitize`]) is exactly `resource_suffix`
/// (the part after `nvidia.com/`), e.g. `AD102GL_L40S` → `0x26b9 AD102GL [L40S]`.
/// `None` for names that are not a known NVIDIA device (vGPU types, hex ids, typos,
/// mixed case).
pub fn lookup(resource_suffix: &str) -> Option<NvidiaDevice> {
    table().get(resource_suffix).copied()
}

/// The NVIDIA device with PCI id `id` (e.g. `0x26b5`), if the embedded `pci.ids` knows it.
pub fn by_id(id: u16) -> Option<NvidiaDevice> {
    pci_ids::Device::from_vid_pid(NVIDIA_VENDOR_ID, id).map(|d| NvidiaDevice {
        id,
        pci_name: d.name(),
    })
}

/// Whether `resource_suffix` is a known sanitized NVIDIA device name (see [`lookup`]).
pub fn is_device_name(resource_suffix: &str) -> bool {
    lookup(resource_suffix).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_facts_sheet_examples() {
        for (pci, res) in [
            ("GA102GL [A10]", "GA102GL_A10"),
            ("TU104GL [Tesla T4]", "TU104GL_TESLA_T4"),
            ("AD102GL [L40S]", "AD102GL_L40S"),
            ("GH100 [H100 SXM5 80GB]", "GH100_H100_SXM5_80GB"),
            ("GA100 [A100-SXM-64GB]", "GA100_A100SXM64GB"),
            ("GA107GL [A2 / A16]", "GA107GL_A2___A16"),
            ("GA106 [RTX A2000 12GB]", "GA106_RTX_A2000_12GB"),
            ("a.b\t \tc", "A_B_C"),
        ] {
            assert_eq!(sanitize(pci), res, "{pci}");
        }
    }

    #[test]
    fn embedded_table_has_the_examples() {
        for (res, id) in [
            ("GA102GL_A10", 0x2236),
            ("TU104GL_TESLA_T4", 0x1eb8),
            ("AD102GL_L40S", 0x26b9),
            ("GH100_H100_SXM5_80GB", 0x2330),
            ("GA100_A100SXM64GB", 0x20b3),
            ("GA107GL_A2___A16", 0x25b6),
            ("GA100_A100X", 0x20b8),
            ("GA106_RTX_A2000_12GB", 0x2571),
        ] {
            assert_eq!(lookup(res).map(|d| d.id), Some(id), "{res}");
        }
        for not in ["TU104GL_Tesla_T4", "NVIDIA_A10-12Q", "26b5", "gpu", ""] {
            assert!(!is_device_name(not), "{not}");
        }
        assert_eq!(by_id(0x26b5).map(|d| d.pci_name), Some("AD102GL [L40]"));
        assert_eq!(by_id(0x2236).map(|d| d.pci_name), Some("GA102GL [A10]"));
    }
}
