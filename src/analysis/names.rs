//! "Did you mean": advertised resource names close to a requested one that no node
//! advertises. The seed's lesson is that one wrong character silently removes every node
//! from the candidates (`../shared/spec/lab.md`, "Pitfalls"); the usual slips are case
//! (`TU104GL_Tesla_T4` from examples written before the sandbox plugin upper-cased names,
//! NVIDIA/kubevirt-gpu-device-plugin v1.1.1) and `-`/`_` (`GRID_T4_2Q` for the vGPU type
//! `GRID_T4-2Q`; `../shared/facts/gpu-operator.md` §3).

use serde::Serialize;

/// The largest edit distance (Levenshtein, via the `strsim` crate) still suggested.
pub const MAX_DISTANCE: usize = 2;

/// How a suggestion relates to the requested name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Closeness {
    /// Equal when case is folded.
    Case,
    /// Equal when `-` and `_` are treated alike (and case folded).
    DashUnderscore,
    /// Within [`MAX_DISTANCE`] edits.
    EditDistance,
}

/// One suggested name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// The advertised name.
    pub name: String,
    /// Why it is close.
    pub closeness: Closeness,
    /// Levenshtein distance to the requested name.
    pub distance: usize,
}

impl Suggestion {
    /// Human wording: `differs only in case`, `differs in - vs _`, `2 edits away`.
    pub fn why(&self) -> String {
        match self.closeness {
            Closeness::Case => "differs only in case".into(),
            Closeness::DashUnderscore => "differs in - vs _".into(),
            Closeness::EditDistance if self.distance == 1 => "1 edit away".into(),
            Closeness::EditDistance => format!("{} edits away", self.distance),
        }
    }
}

/// Advertised names close to `wanted`, best first (case, then `-`/`_`, then distance,
/// then name). `wanted` itself is never suggested.
pub fn did_you_mean<'a>(
    wanted: &str,
    advertised: impl IntoIterator<Item = &'a str>,
) -> Vec<Suggestion> {
    let fold = |s: &str| s.to_lowercase();
    let swap = |s: &str| s.to_lowercase().replace('-', "_");
    let mut out: Vec<Suggestion> = advertised
        .into_iter()
        .filter(|a| *a != wanted)
        .filter_map(|a| {
            let distance = strsim::levenshtein(wanted, a);
            let closeness = if fold(a) == fold(wanted) {
                Closeness::Case
            } else if swap(a) == swap(wanted) {
                Closeness::DashUnderscore
            } else if distance <= MAX_DISTANCE {
                Closeness::EditDistance
            } else {
                return None;
            };
            Some(Suggestion {
                name: a.to_owned(),
                closeness,
                distance,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.closeness, a.distance, &a.name).cmp(&(b.closeness, b.distance, &b.name)));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_sheet_slips() {
        let adv = [
            "nvidia.com/TU104GL_TESLA_T4",
            "nvidia.com/GRID_T4-2Q",
            "nvidia.com/gpu",
            "nvidia.com/mig-1g.10gb",
        ];
        let s = did_you_mean("nvidia.com/TU104GL_Tesla_T4", adv);
        assert_eq!(s[0].name, "nvidia.com/TU104GL_TESLA_T4");
        assert_eq!(s[0].closeness, Closeness::Case);
        assert_eq!(s[0].why(), "differs only in case");
        let s = did_you_mean("nvidia.com/GRID_T4_2Q", adv);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "nvidia.com/GRID_T4-2Q");
        assert_eq!(s[0].closeness, Closeness::DashUnderscore);
        let s = did_you_mean("nvidia.com/gpus", adv);
        assert_eq!((s[0].name.as_str(), s[0].distance), ("nvidia.com/gpu", 1));
        assert_eq!(s[0].why(), "1 edit away");
        let s = did_you_mean("nvidia.com/mig-1g.5gb", adv);
        assert_eq!(
            (s[0].name.as_str(), s[0].distance),
            ("nvidia.com/mig-1g.10gb", 2)
        );
        assert!(did_you_mean("nvidia.com/GA102GL_A10", adv).is_empty());
        assert!(did_you_mean("nvidia.com/gpu", adv).is_empty());
    }
}
