//! Text helpers for messages: one line, values cut. Used by [`crate::error`] and every
//! reader; depends on nothing else in the crate.

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

/// `s` with control characters escaped (`\n` → `\\n`), so that a resource name or label
/// taken from a dump cannot split or forge a `MISMATCH=` line.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
