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
