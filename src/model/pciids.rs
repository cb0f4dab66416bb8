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

/// Brand words the loose resolver ([`resolve_loose`]) ignores: hand-written names drop or
/// add them freely (`Tesla_T4`, `TU104GL_T4`, `NVIDIA_T4` for `TU104GL [Tesla T4]`).
pub const BRAND_WORDS: [&str; 5] = ["NVIDIA", "TESLA", "QUADRO", "GEFORCE", "GRID"];

/// Whether an upper-case token is a GPU chip code as `pci.ids` writes it before the
/// bracket: two letters, three digits, optional letters (`TU104GL`, `GA102`, `AD102GL`).
fn is_chip(token: &str) -> bool {
    let b = token.as_bytes();
    b.len() >= 5
        && b[..2].iter().all(u8::is_ascii_uppercase)
        && b[2..5].iter().all(u8::is_ascii_digit)
        && b[5..].iter().all(u8::is_ascii_uppercase)
}

fn tokens(name: &str) -> Vec<String> {
    name.to_uppercase()
        .split(|c: char| c == '_' || c.is_whitespace())
        .filter(|t| !t.is_empty() && !BRAND_WORDS.contains(t))
        .map(str::to_owned)
        .collect()
}

/// The NVIDIA PCI device ids a resource-name suffix may mean, for names the sandbox plugin
/// did not write: an exact sanitized name ([`lookup`]), the same name in another case
/// (`TU104GL_Tesla_T4`, written before the plugin upper-cased names), a hex device id in
/// any case (`1eb8`, `1EB8`), or a hand-written slug whose words (brand words
/// [`BRAND_WORDS`] and case ignored) all occur in one device's sanitized name and include
/// at least one model word besides the chip code (`TU104GL_T4`, `Tesla_T4` →
/// `TU104GL_TESLA_T4`, 0x1eb8). Sorted, without duplicates; empty when nothing matches.
pub fn resolve_loose(resource_suffix: &str) -> Vec<u16> {
    if let Some(d) = lookup(resource_suffix).or_else(|| lookup(&resource_suffix.to_uppercase())) {
        return vec![d.id];
    }
    if resource_suffix.len() == 4 && resource_suffix.bytes().all(|c| c.is_ascii_hexdigit()) {
        return u16::from_str_radix(resource_suffix, 16)
            .ok()
            .filter(|id| by_id(*id).is_some())
            .into_iter()
            .collect();
    }
    let want = tokens(resource_suffix);
    if !want.iter().any(|t| !is_chip(t)) {
        return Vec::new();
    }
    let mut ids: Vec<u16> = table()
        .iter()
        .filter(|(name, _)| {
            let have = tokens(name);
            want.iter().all(|t| have.contains(t))
        })
        .map(|(_, d)| d.id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The PCI device id a name the sandbox plugin advertises stands for: its sanitized
/// `pci.ids` name ([`lookup`]) or its lower-case hex fallback (`26b5`). `None` otherwise.
pub fn advertised_id(resource_suffix: &str) -> Option<u16> {
    lookup(resource_suffix).map(|d| d.id).or_else(|| {
        (resource_suffix.len() == 4
            && resource_suffix
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)))
        .then(|| u16::from_str_radix(resource_suffix, 16).ok())
        .flatten()
    })
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

    #[test]
    fn loose_resolution_compares_device_ids() {
        for slug in [
            "TU104GL_T4",
            "Tesla_T4",
            "TU104GL_Tesla_T4",
            "tu104gl_tesla_t4",
            "1eb8",
            "1EB8",
        ] {
            assert_eq!(resolve_loose(slug), [0x1eb8], "{slug}");
        }
        assert_eq!(resolve_loose("GA102GL_A10"), [0x2236]);
        assert!(
            resolve_loose("TU104GL_TU104GL").is_empty(),
            "chip codes alone are too vague"
        );
        assert!(resolve_loose("NVIDIA_A10-12Q").is_empty());
        assert!(resolve_loose("zzzz").is_empty());
        assert_eq!(advertised_id("TU104GL_TESLA_T4"), Some(0x1eb8));
        assert_eq!(advertised_id("26b5"), Some(0x26b5));
        assert_eq!(
            advertised_id("26B5"),
            None,
            "the plugin writes hex ids in lower case"
        );
        assert!(!is_chip("T4") && is_chip("TU104GL") && is_chip("GA102"));
    }
}
