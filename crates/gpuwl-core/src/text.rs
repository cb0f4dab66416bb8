//! Text helpers for messages: one line, values cut, names close to a wanted one, and the
//! escaping of text from files or the cluster ([`esc`]). Used by [`crate::error`] and every
//! other module; depends on nothing else in the crate.

/// Whether `name` is a valid Kubernetes object name of the DNS-subdomain kind (RFC 1123:
/// at most 253 characters, lower-case alphanumerics, `-` and `.`, an alphanumeric at both
/// ends) — what the API server asks of node names and most other objects
/// (kubernetes/kubernetes `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`,
/// `IsDNS1123Subdomain`).
pub fn is_dns_subdomain(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 253
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// A value echoed in a message, cut to 80 characters (`"abc…" (52428800 bytes)`), quoted
/// with Rust escapes so that it is one line: messages name values, they never dump them.
/// Values of 80 characters or fewer read exactly as `{:?}` prints them.
pub fn cut(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(MAX).collect();
    format!("{:?}… ({} bytes)", head, s.len())
}

/// Collapses whitespace runs (newlines included) to one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The bidirectional formatting characters (LRM, RLM, embeddings and overrides, isolates)
/// that can make a terminal show text in another order than it is.
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Makes text from a file or the cluster safe to print on a terminal: control characters
/// (C0, DEL, C1: newlines, escapes) and the bidirectional-override characters are written
/// as Rust escapes (`\n`, `\u{1b}`, `\u{202e}`), so a crafted name can neither split or
/// forge an output line (a `MISMATCH=` line) nor drive the terminal. Other text is returned
/// unchanged, borrowed. The one escaping function of the crate (`render` re-exports it).
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let bad = |c: char| c.is_control() || is_bidi_control(c);
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`] as an owned string, for `format!` arguments and fields: every string
/// that came from a file or the cluster goes through it before it reaches a terminal.
pub fn esc(s: &str) -> String {
    escape_controls(s).into_owned()
}

/// The names among `candidates` that `wanted` was most likely meant to be, nearest first,
/// at most three: equal but for case and `-`/`_`, within two edits (or a fifth of the
/// name for long ones), holding it or held by it, with or without the separators
/// (`passthrough` or `pass-through` in `vm-passthrough`, at least four characters), or cut
/// short from it (`vm-passthru`: all but its last character
/// start the name). `wanted`
/// itself is never offered.
pub(crate) fn close_names<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let norm = |s: &str| s.to_lowercase().replace('_', "-");
    let w = norm(wanted);
    if w.is_empty() || w.len() > 320 {
        return Vec::new();
    }
    let limit = (w.chars().count() / 5).max(2);
    let mut found: Vec<(usize, String)> = candidates
        .into_iter()
        .filter(|c| *c != wanted && c.len() <= 320)
        .filter_map(|c| {
            let n = norm(c);
            let d = strsim::levenshtein(&w, &n);
            // Holding it, also with the separators left out (`pass-through` in
            // `vm-passthrough`).
            let compact = |s: &str| s.replace('-', "");
            let (cw, cn) = (compact(&w), compact(&n));
            let holds = (w.len() >= 4 && n.len() >= 4 && (n.contains(&w) || w.contains(&n)))
                || (cw.len() >= 4 && cn.len() >= 4 && (cn.contains(&cw) || cw.contains(&cn)));
            // Cut short: all of `wanted` but its last character starts the longer name
            // (`vm-passthru`).
            let prefix = w.chars().zip(n.chars()).take_while(|(a, b)| a == b).count();
            let (wl, nl) = (w.chars().count(), n.chars().count());
            let abbreviates = prefix >= 4 && prefix + 1 >= wl && nl > wl;
            (d <= limit || holds || abbreviates).then(|| (d, c.to_owned()))
        })
        .collect();
    found.sort();
    found.dedup_by(|a, b| a.1 == b.1);
    // Equal but for case and `-`/`_`: that one, not its neighbours.
    if found.first().is_some_and(|f| f.0 == 0) {
        found.retain(|f| f.0 == 0);
    }
    found.into_iter().take(3).map(|(_, c)| c).collect()
}

/// `; did you mean lab-node-0?` / `; did you mean one of a, b, c?` for [`close_names`],
/// each name escaped ([`esc`]: controls and bidi overrides); empty when
/// none is close.
pub fn did_you_mean<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = close_names(wanted, candidates)
        .iter()
        .map(|n| esc(n))
        .collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_offer_slips_and_fragments_nearest_first() {
        let nodes = ["lab-node-0", "lab-node-1", "lab-node-2", "cpu-0"];
        assert_eq!(
            did_you_mean("lab-node-9", nodes),
            "; did you mean one of lab-node-0, lab-node-1, lab-node-2?"
        );
        assert_eq!(
            did_you_mean("LAB_NODE-1", nodes),
            "; did you mean lab-node-1?"
        );
        assert_eq!(did_you_mean("gpu-42", nodes), "");
        let pods = ["gpu-vm/job-cross", "gpu-vm/job-container", "default/x"];
        assert_eq!(
            did_you_mean("gpu-vm/job-crosss", pods),
            "; did you mean gpu-vm/job-cross?"
        );
        assert_eq!(
            close_names("passthrough", ["container", "vm-passthrough", "vm-vgpu"]),
            ["vm-passthrough"]
        );
        assert!(close_names("vm", ["container", "vm-passthrough", "vm-vgpu"]).is_empty());
        for (typo, meant) in [
            ("pass-through", "vm-passthrough"),
            ("Pass_Through", "vm-passthrough"),
            ("v-gpu", "vm-vgpu"),
        ] {
            assert_eq!(
                close_names(typo, ["container", "vm-passthrough", "vm-vgpu"]),
                [meant],
                "{typo}"
            );
        }
        assert_eq!(
            close_names("vm-passthru", ["container", "vm-passthrough", "vm-vgpu"]),
            ["vm-passthrough"]
        );
        assert_eq!(
            did_you_mean("a\u{1b}b", ["a\u{1b}c"]),
            "; did you mean a\\u{1b}c?"
        );
    }
}
