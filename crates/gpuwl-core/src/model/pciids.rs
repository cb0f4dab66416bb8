//! NVIDIA PCI device names as the sandbox (KubeVirt GPU) device plugin turns them into
//! resource names.
//!
//! The table is the NVIDIA vendor section (`10de`) of the PCI ID Repository's `pci.ids`,
//! embedded by the `pci-ids` crate (lienching/pci-ids.rs, its `pciids/pci.ids`), not a
//! hand-typed list.

use std::collections::HashMap;
use std::sync::OnceLock;

/// PCI vendor id of NVIDIA Corporation.
pub(crate) const NVIDIA_VENDOR_ID: u16 = 0x10de;

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

/// Every device of the embedded NVIDIA section, in `pci.ids` order.
pub fn nvidia_devices() -> impl Iterator<Item = NvidiaDevice> {
    pci_ids::Vendors::iter()
        .filter(|v| v.id() == NVIDIA_VENDOR_ID)
        .flat_map(|v| v.devices())
        .map(|d| NvidiaDevice {
            id: d.id(),
            pci_name: d.name(),
        })
}

/// Sanitized name → the devices carrying it, in `pci.ids` order (several when distinct
/// `pci.ids` names sanitize alike, see [`collisions`]).
fn table() -> &'static HashMap<String, Vec<NvidiaDevice>> {
    static TABLE: OnceLock<HashMap<String, Vec<NvidiaDevice>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m: HashMap<String, Vec<NvidiaDevice>> = HashMap::new();
        for d in nvidia_devices() {
            let same = m.entry(sanitize(d.pci_name)).or_default();
            if !same.iter().any(|s| s.id == d.id) {
                same.push(d);
            }
        }
        m
    })
}

/// Every NVIDIA device whose sanitized name ([`sanitize`]) is exactly `resource_suffix`,
/// sorted by id: the sandbox device plugin advertises all of them under that one name, so
/// KubeVirt needs one `pciHostDevices` entry per id. Usually one; empty for names that are
/// not a known device name.
pub(crate) fn lookup_all(resource_suffix: &str) -> Vec<NvidiaDevice> {
    let mut v = table().get(resource_suffix).cloned().unwrap_or_default();
    v.sort_by_key(|d| d.id);
    v
}

#[cfg(test)]
/// The sanitized names that several NVIDIA device ids share (two `pci.ids` names that
/// differ only in characters the plugin drops or folds, or one name listed under two
/// ids), sorted by name, each with its devices sorted by id.
pub(crate) fn collisions() -> Vec<(String, Vec<NvidiaDevice>)> {
    let mut v: Vec<(String, Vec<NvidiaDevice>)> = table()
        .keys()
        .map(|k| (k.clone(), lookup_all(k)))
        .filter(|(_, ds)| ds.len() > 1)
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The NVIDIA device whose sanitized name ([`sanitize`]) is exactly `resource_suffix`
/// (the part after `nvidia.com/`), e.g. `AD102GL_L40S` → `0x26b9 AD102GL [L40S]`.
/// `None` for names that are not a known NVIDIA device (vGPU types, hex ids, typos,
/// mixed case).
pub fn lookup(resource_suffix: &str) -> Option<NvidiaDevice> {
    lookup_all(resource_suffix).first().copied()
}

/// The NVIDIA device with PCI id `id` (e.g. `0x26b5`), if the embedded `pci.ids` knows it.
pub fn by_id(id: u16) -> Option<NvidiaDevice> {
    pci_ids::Device::from_vid_pid(NVIDIA_VENDOR_ID, id).map(|d| NvidiaDevice {
        id,
        pci_name: d.name(),
    })
}

/// Whether `resource_suffix` is a known sanitized NVIDIA device name (see [`lookup`]).
pub(crate) fn is_device_name(resource_suffix: &str) -> bool {
    lookup(resource_suffix).is_some()
}

/// Brand words the loose resolver ([`resolve_loose`]) ignores: hand-written names drop or
/// add them freely (`Tesla_T4`, `TU104GL_T4`, `NVIDIA_T4` for `TU104GL [Tesla T4]`).
pub(crate) const BRAND_WORDS: [&str; 5] = ["NVIDIA", "TESLA", "QUADRO", "GEFORCE", "GRID"];

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
pub(crate) fn resolve_loose(resource_suffix: &str) -> Vec<u16> {
    let mut exact = lookup_all(resource_suffix);
    if exact.is_empty() {
        exact = lookup_all(&resource_suffix.to_uppercase());
    }
    if !exact.is_empty() {
        return exact.iter().map(|d| d.id).collect();
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
        .flat_map(|(_, ds)| ds.iter().map(|d| d.id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Every PCI device id a name the sandbox plugin advertises stands for, sorted: the ids
/// whose sanitized `pci.ids` name it is ([`lookup_all`]; more than one for the names in
/// [`collisions`]), or its lower-case hex fallback (`26b5` → `[0x26b5]`). Empty otherwise.
pub(crate) fn advertised_ids(resource_suffix: &str) -> Vec<u16> {
    let ids: Vec<u16> = lookup_all(resource_suffix).iter().map(|d| d.id).collect();
    if ids.is_empty() {
        advertised_id(resource_suffix).into_iter().collect()
    } else {
        ids
    }
}

/// The PCI device id a name the sandbox plugin advertises stands for: its sanitized
/// `pci.ids` name ([`lookup`]; the lowest id for a name several ids share) or its
/// lower-case hex fallback (`26b5`). `None` otherwise.
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

#[cfg(test)]
mod round_trip {
    use super::*;

    /// Every NVIDIA device of the embedded `pci.ids` → the plugin's resource name → back to
    /// its id: the reverse rule `gpuwl kubevirt generate` uses for `pciVendorSelector`.
    #[test]
    fn every_nvidia_device_name_comes_back_to_its_id() {
        let all: Vec<NvidiaDevice> = nvidia_devices().collect();
        assert!(all.len() > 1500, "{} devices", all.len());
        for d in &all {
            let name = sanitize(d.pci_name);
            assert!(!name.is_empty(), "{d:?}");
            assert!(
                name.bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_'),
                "{d:?} → {name}"
            );
            let back: Vec<u16> = lookup_all(&name).iter().map(|x| x.id).collect();
            assert!(back.contains(&d.id), "{d:?} → {name} → {back:x?}");
            assert_eq!(advertised_ids(&name), back, "{name}");
            assert_eq!(resolve_loose(&name), back, "{name}");
            assert_eq!(lookup(&name).map(|x| x.id), back.first().copied(), "{name}");
            // The hex fallback the plugin uses when its pci.ids lacks the device.
            assert_eq!(advertised_ids(&format!("{:04x}", d.id)), [d.id]);
        }
    }

    /// Names that stand for several device ids. The sanitizing rule itself merges no two
    /// distinct `pci.ids` names (upper-casing and dropping punctuation happen to keep every
    /// NVIDIA name apart); every shared name is one `pci.ids` name listed under several ids
    /// (board variants: `GA100 [A100 PCIe 40GB]` is 20b1 and 20f1). The counts are those of
    /// the pci.ids embedded by the pinned `pci-ids` crate; a new release may change them.
    #[test]
    fn collisions_are_repeated_pci_ids_names_only() {
        let c = collisions();
        let merged: Vec<&(String, Vec<NvidiaDevice>)> = c
            .iter()
            .filter(|(_, ds)| ds.iter().any(|d| d.pci_name != ds[0].pci_name))
            .collect();
        assert!(
            merged.is_empty(),
            "distinct names sanitized alike: {merged:?}"
        );
        let ids: usize = c.iter().map(|(_, ds)| ds.len()).sum();
        assert_eq!((c.len(), ids), (230, 616), "shared names, their ids");
        // The data-center boards among them, as generate will list them.
        for (name, want) in [
            ("GA100_A100_PCIE_40GB", &[0x20b1, 0x20f1][..]),
            ("AD102GL_L20", &[0x26b7, 0x26ba]),
            ("GV100GL_TESLA_V100_SXM2_16GB", &[0x1db1, 0x1df5]),
            ("TU102GL_QUADRO_RTX_6000_8000", &[0x1e30, 0x1e78]),
            ("TU116GL", &[0x21ae, 0x21bf]),
        ] {
            assert_eq!(advertised_ids(name), want, "{name}");
            assert!(c.iter().any(|(n, _)| n == name), "{name}");
        }
        // The usual passthrough boards stand for one id each.
        for name in [
            "GA102GL_A10",
            "TU104GL_TESLA_T4",
            "AD102GL_L40S",
            "GH100_H100_PCIE",
        ] {
            assert_eq!(lookup_all(name).len(), 1, "{name}");
        }
    }
}
