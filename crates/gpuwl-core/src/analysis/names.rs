//! "Did you mean": advertised resource names related to a requested one that no node
//! advertises. One wrong character silently removes every node from the candidates
//! (docs/lab.md, pitfalls), but the commoner miss is the right hardware under ANOTHER
//! NAMING RULE, whatever the edit distance (docs/domain-facts.md §3, §9):
//!
//! - the same PCI device: a hand-written slug or an old mixed-case name against the name the
//!   sandbox device plugin derives from `pci.ids` (`TU104GL_T4`, `Tesla_T4`,
//!   `TU104GL_Tesla_T4` → `TU104GL_TESLA_T4`; hex `1eb8` ↔ its model name), compared by PCI
//!   device id ([`pciids::resolve_loose`]), not by spelling
//!   (NVIDIA/kubevirt-gpu-device-plugin `pkg/device_plugin/device_plugin.go`);
//! - time-slicing / MPS with `renameByDefault`: `nvidia.com/gpu` ↔ `nvidia.com/gpu.shared`,
//!   `mig-1g.10gb` ↔ `mig-1g.10gb.shared` (NVIDIA/k8s-device-plugin `api/config/v1`);
//! - MIG `mixed` strategy: the same GPUs as `nvidia.com/mig-<profile>` instead of
//!   `nvidia.com/gpu` (NVIDIA/k8s-device-plugin `internal/rm/rm.go`);
//! - vGPU types of the same board and size under the `GRID_` / `NVIDIA_` prefixes (or
//!   none), as mdev type names differ by driver release (NVIDIA/go-nvlib `pkg/nvmdev`);
//!
//! and only then plain slips: case, `-` vs `_`, up to [`MAX_DISTANCE`] edits.

use serde::Serialize;

use crate::model::pciids;
use crate::model::resource::{NVIDIA_PREFIX, is_container_gpu_name};

/// The largest edit distance (Levenshtein, via the `strsim` crate) still suggested.
pub(crate) const MAX_DISTANCE: usize = 2;

/// The longest name compared at all: a resource name is at most a 253-character prefix, a
/// `/` and a 63-character name (Kubernetes qualified names); longer input is invalid and
/// would make the quadratic edit distance slow.
pub(crate) const MAX_NAME: usize = 253 + 1 + 63;

/// How a suggested name relates to the requested one, best first (the order ranks
/// suggestions: every naming rule before a mere typo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Relation {
    /// Equal when case is folded (the sandbox plugin upper-cases names since v1.1.1).
    Case,
    /// Equal when `-` and `_` are treated alike (and case folded).
    DashUnderscore,
    /// The same PCI device id under the sandbox plugin's `pci.ids` naming rule.
    SamePciDevice,
    /// The same GPUs renamed by time-slicing / MPS `renameByDefault` (`.shared`).
    SharingRename,
    /// The same vGPU type (board and framebuffer) under another prefix.
    VgpuPrefix,
    /// MIG partitions of the same GPUs (`mixed` strategy), or MIG devices advertised as
    /// `nvidia.com/gpu` (`single` strategy).
    MigPartition,
    /// Within [`MAX_DISTANCE`] edits: a typo.
    EditDistance,
}

impl Relation {
    /// Whether the relation is a naming rule for the same hardware (not a typo).
    pub(crate) fn same_hardware(self) -> bool {
        self != Relation::EditDistance
    }
}

/// One suggested name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// The advertised name.
    pub name: String,
    /// Which rule relates it.
    pub relation: Relation,
    /// Levenshtein distance to the requested name.
    pub distance: usize,
    /// The PCI device both names stand for (`10de:1eb8`), for [`Relation::SamePciDevice`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_device: Option<String>,
}

impl Suggestion {
    /// Human wording of the relation, e.g. `the same PCI device (10de:1eb8) under the
    /// sandbox device plugin's pci.ids name`, `1 edit away`.
    pub fn why(&self) -> String {
        match self.relation {
            Relation::Case => "differs only in case".into(),
            Relation::DashUnderscore => "differs in - vs _".into(),
            Relation::SamePciDevice => format!(
                "the same PCI device ({}) under the sandbox device plugin's pci.ids name",
                self.pci_device.as_deref().unwrap_or("?")
            ),
            Relation::SharingRename => {
                "the same GPUs, renamed by time-slicing/MPS renameByDefault".into()
            }
            Relation::VgpuPrefix => {
                "the same vGPU type (board and size) under another prefix".into()
            }
            Relation::MigPartition => "MIG devices of the same GPUs (MIG strategy)".into(),
            Relation::EditDistance if self.distance == 1 => "1 edit away".into(),
            Relation::EditDistance => format!("{} edits away", self.distance),
        }
    }
}

/// The part after `nvidia.com/`, or the whole name.
fn short(name: &str) -> &str {
    name.strip_prefix(NVIDIA_PREFIX).unwrap_or(name)
}

/// A vGPU type name without its `GRID_` / `NVIDIA_` prefix, when it looks like one
/// (`<board>-<size>` with a `-`).
fn vgpu_core(s: &str) -> Option<String> {
    if !s.contains('-') || s.starts_with("mig-") {
        return None;
    }
    let up = s.to_uppercase();
    let core = up
        .strip_prefix("GRID_")
        .or_else(|| up.strip_prefix("NVIDIA_"))
        .unwrap_or(&up);
    Some(core.to_owned())
}

/// The naming-rule relation between a wanted and an advertised name, if any;
/// `wanted_ids` are the PCI ids the wanted name may mean ([`pciids::resolve_loose`]).
fn rule(wanted: &str, advertised: &str, wanted_ids: &[u16]) -> Option<(Relation, Option<String>)> {
    let (w, a) = (short(wanted), short(advertised));
    let same_domain = wanted.len() - w.len() == advertised.len() - a.len();
    if !same_domain {
        return None;
    }
    if w.eq_ignore_ascii_case(a) {
        return Some((Relation::Case, None));
    }
    if w.to_lowercase().replace('-', "_") == a.to_lowercase().replace('-', "_") {
        return Some((Relation::DashUnderscore, None));
    }
    if is_container_gpu_name(a) || is_container_gpu_name(w) {
        let base = |s: &str| s.strip_suffix(".shared").unwrap_or(s).to_owned();
        if is_container_gpu_name(a) && is_container_gpu_name(w) {
            if base(w) == base(a) {
                return Some((Relation::SharingRename, None));
            }
            let gpu_like = |s: &str| base(s) == "gpu";
            let mig = |s: &str| base(s).starts_with("mig-");
            if (gpu_like(w) && mig(a)) || (mig(w) && gpu_like(a)) {
                return Some((Relation::MigPartition, None));
            }
        }
        return None;
    }
    if let Some(id) = pciids::advertised_ids(a)
        .into_iter()
        .find(|id| wanted_ids.contains(id))
    {
        return Some((Relation::SamePciDevice, Some(format!("10de:{id:04x}"))));
    }
    if let (Some(cw), Some(ca)) = (vgpu_core(w), vgpu_core(a))
        && cw == ca
    {
        return Some((Relation::VgpuPrefix, None));
    }
    None
}

/// Advertised names related to `wanted`, best first ([`Relation`] order, then distance,
/// then name). `wanted` itself is never suggested. See the module docs for the rules.
pub fn did_you_mean<'a>(
    wanted: &str,
    advertised: impl IntoIterator<Item = &'a str>,
) -> Vec<Suggestion> {
    if wanted.len() > MAX_NAME {
        return Vec::new();
    }
    // Resolved once: the loose match reads the whole pci.ids table.
    let wanted_ids = pciids::resolve_loose(short(wanted));
    let mut out: Vec<Suggestion> = advertised
        .into_iter()
        .filter(|a| *a != wanted && a.len() <= MAX_NAME)
        .filter_map(|a| {
            let distance = strsim::levenshtein(wanted, a);
            let (relation, pci_device) = match rule(wanted, a, &wanted_ids) {
                Some(r) => r,
                None if distance <= MAX_DISTANCE => (Relation::EditDistance, None),
                None => return None,
            };
            Some(Suggestion {
                name: a.to_owned(),
                relation,
                distance,
                pci_device,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.relation, a.distance, &a.name).cmp(&(b.relation, b.distance, &b.name)));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// `a` sorted by closeness to `to` (case-folded edit distance, then the text).
pub(crate) fn nearest_first(a: impl IntoIterator<Item = String>, to: &str) -> Vec<String> {
    let norm = |s: &str| s.to_lowercase().replace(['-', '_', ' '], "");
    let mut v: Vec<(usize, usize, String)> = a
        .into_iter()
        .map(|s| {
            (
                strsim::levenshtein(&norm(&s), &norm(to)),
                strsim::levenshtein(&s, to),
                s,
            )
        })
        .collect();
    v.sort();
    v.dedup_by(|x, y| x.2 == y.2);
    v.into_iter().map(|(_, _, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADV: [&str; 6] = [
        "nvidia.com/TU104GL_TESLA_T4",
        "nvidia.com/GRID_T4-2Q",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/GH100_H100_PCIE",
        "nvidia.com/GA102GL_A10",
    ];

    fn first(wanted: &str, adv: &[&str]) -> Option<(String, Relation)> {
        did_you_mean(wanted, adv.iter().copied())
            .into_iter()
            .next()
            .map(|s| (s.name, s.relation))
    }

    #[test]
    fn plain_slips() {
        assert_eq!(
            first("nvidia.com/GRID_T4_2Q", &ADV),
            Some(("nvidia.com/GRID_T4-2Q".into(), Relation::DashUnderscore))
        );
        let s = did_you_mean("nvidia.com/gpus", ADV);
        assert_eq!((s[0].name.as_str(), s[0].distance), ("nvidia.com/gpu", 1));
        assert_eq!(s[0].why(), "1 edit away");
        assert_eq!(
            first("nvidia.com/GA102GL_A1O", &ADV),
            Some(("nvidia.com/GA102GL_A10".into(), Relation::EditDistance))
        );
        assert!(did_you_mean("nvidia.com/GA102GL_A10", ADV).is_empty());
    }

    #[test]
    fn old_mixed_case_passthrough_name() {
        let s = did_you_mean("nvidia.com/TU104GL_Tesla_T4", ADV);
        assert_eq!(s[0].name, "nvidia.com/TU104GL_TESLA_T4");
        assert_eq!(s[0].relation, Relation::Case);
        assert_eq!(s[0].why(), "differs only in case");
    }

    #[test]
    fn shortened_slugs_are_the_same_pci_device_however_far_apart() {
        for slug in [
            "nvidia.com/TU104GL_T4",
            "nvidia.com/Tesla_T4",
            "nvidia.com/1eb8",
        ] {
            let s = did_you_mean(slug, ADV);
            assert_eq!(s.len(), 1, "{slug}: {s:?}");
            assert_eq!(s[0].name, "nvidia.com/TU104GL_TESLA_T4");
            assert_eq!(s[0].relation, Relation::SamePciDevice);
            assert_eq!(s[0].pci_device.as_deref(), Some("10de:1eb8"));
            assert!(s[0].distance > MAX_DISTANCE || slug.ends_with("1eb8"));
        }
        // An L40 on an old plugin (hex fallback) asked for by its model name.
        assert_eq!(
            first("nvidia.com/AD102GL_L40", &["nvidia.com/26b5"]),
            Some(("nvidia.com/26b5".into(), Relation::SamePciDevice))
        );
    }

    #[test]
    fn time_slicing_and_mig_renames() {
        assert_eq!(
            first(
                "nvidia.com/gpu",
                &["nvidia.com/gpu.shared", "nvidia.com/gpus"]
            ),
            Some(("nvidia.com/gpu.shared".into(), Relation::SharingRename))
        );
        assert_eq!(
            first("nvidia.com/mig-1g.10gb.shared", &ADV),
            Some(("nvidia.com/mig-1g.10gb".into(), Relation::SharingRename))
        );
        let s = did_you_mean("nvidia.com/gpu.shared", ["nvidia.com/mig-3g.40gb"]);
        assert_eq!(s[0].relation, Relation::MigPartition);
        assert!(
            did_you_mean("nvidia.com/gpu", ["nvidia.com/GRID_T4-2Q"]).is_empty(),
            "a vGPU type is not a renamed container GPU"
        );
    }

    #[test]
    fn vgpu_prefixes() {
        assert_eq!(
            first("nvidia.com/NVIDIA_T4-2Q", &ADV),
            Some(("nvidia.com/GRID_T4-2Q".into(), Relation::VgpuPrefix))
        );
        assert_eq!(
            first("nvidia.com/T4-2Q", &ADV),
            Some(("nvidia.com/GRID_T4-2Q".into(), Relation::VgpuPrefix))
        );
        // Another size of the same board is another type, not a spelling.
        let s = did_you_mean("nvidia.com/NVIDIA_A2-4Q", ["nvidia.com/NVIDIA_A2-8Q"]);
        assert!(s.iter().all(|s| s.relation == Relation::EditDistance));
    }

    #[test]
    fn naming_rules_rank_before_typos() {
        let s = did_you_mean(
            "nvidia.com/gpu",
            ["nvidia.com/gpu.shared", "nvidia.com/gp", "nvidia.com/gpuu"],
        );
        assert_eq!(s[0].name, "nvidia.com/gpu.shared");
        assert!(s[1..].iter().all(|s| s.relation == Relation::EditDistance));
    }
}
