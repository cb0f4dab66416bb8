//! The node dump reader's fast path: one element of a node list's `items`, reduced to the
//! few fields the node reader keeps, by a hand-written JSON scanner that validates what it
//! drops instead of handing it to serde.
//!
//! A node of `kubectl get nodes -o json` is ~20 KB, of which the reader keeps under 2 KB
//! (`metadata.name`, `metadata.labels`, `spec.taints`, `spec.unschedulable`,
//! `status.capacity`, `status.allocatable`): images, `nodeInfo`, conditions, annotations and
//! managed fields are skipped. serde_json skips them at ~0.75 GB/s (its `IgnoredAny`,
//! token by token through the visitor machinery); [`reduce_node`] skips them in one loop
//! (8 bytes at a time through indentation and strings), copies the kept values verbatim
//! into a small JSON object, and the reader's own serde visitor parses that. The kept
//! values are the same bytes, so the node read is the same.
//!
//! Same acceptance as serde_json: every dropped value is checked against JSON's grammar
//! as strictly as serde_json's skip checks it (strings without control characters and
//! with valid escapes, numbers, `true`/`false`/`null`, commas, colons, nesting). Anything
//! the scanner is not sure of — a key with an escape or a non-ASCII byte at the levels the
//! reader matches keys, a non-object item, nesting over 127, a grammar error — answers
//! [`Skim::Fallback`], and the caller parses the item with serde_json as before, which
//! gives its exact error message. Dropped strings are not checked for UTF-8, as serde_json
//! does not check them when it skips.

/// What [`reduce_node`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skim {
    /// The item ends `n` bytes into the input; the reduced object is in the output buffer.
    Done(usize),
    /// The input ends inside the item: read more and try again.
    More,
    /// Not for the fast path: parse the item the slow way (it may be invalid).
    Fallback,
}

/// Why a scan stopped early (internal).
enum Stop {
    More,
    Fallback,
}

type Scan<T> = Result<T, Stop>;

const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Which kept keys a level has, and how each kept value is copied.
#[derive(Clone, Copy)]
enum Level {
    /// The node object: `kind` (copied), `metadata`, `spec`, `status` (walked).
    Node,
    /// `metadata`: `name`, `labels`, `continue`.
    Metadata,
    /// `spec`: `taints`, `unschedulable`.
    Spec,
    /// `status`: `capacity`, `allocatable`.
    Status,
}

impl Level {
    /// What to do with the value of `key`: `None` drop it, `Some(None)` copy it verbatim,
    /// `Some(Some(level))` walk it as an object of that level (copied verbatim when it is
    /// not an object).
    fn keeps(self, key: &[u8]) -> Option<Option<Level>> {
        match (self, key) {
            (Level::Node, b"kind") => Some(None),
            (Level::Node, b"metadata") => Some(Some(Level::Metadata)),
            (Level::Node, b"spec") => Some(Some(Level::Spec)),
            (Level::Node, b"status") => Some(Some(Level::Status)),
            (Level::Metadata, b"name" | b"labels" | b"continue")
            | (Level::Spec, b"taints" | b"unschedulable")
            | (Level::Status, b"capacity" | b"allocatable") => Some(None),
            _ => None,
        }
    }
}

/// Reduces the list item at the start of `s` (leading whitespace allowed) to a JSON object
/// of the fields the node reader keeps, written to `out` (cleared first): `kind` and
/// `metadata.{name,labels,continue}`, `spec.{taints,unschedulable}`,
/// `status.{capacity,allocatable}`, each value byte for byte, in document order (a key
/// given twice is kept twice, so the reader's duplicate check still sees it).
pub(crate) fn reduce_node(s: &[u8], out: &mut Vec<u8>) -> Skim {
    out.clear();
    let mut i = ws(s, 0);
    match s.get(i) {
        Some(b'{') => {}
        Some(_) => return Skim::Fallback,
        None => return Skim::More,
    }
    i += 1;
    match walk(s, i, Level::Node, out) {
        Ok(end) => Skim::Done(end),
        Err(Stop::More) => Skim::More,
        Err(Stop::Fallback) => Skim::Fallback,
    }
}

/// Walks the members of an object whose `{` ends at `i`, copying kept members (as
/// `{…}` in `out`); returns the index after its `}`.
fn walk(s: &[u8], mut i: usize, level: Level, out: &mut Vec<u8>) -> Scan<usize> {
    out.push(b'{');
    let mut first = true;
    i = ws(s, i);
    if byte(s, i)? == b'}' {
        out.push(b'}');
        return Ok(i + 1);
    }
    loop {
        if byte(s, i)? != b'"' {
            return Err(Stop::Fallback);
        }
        let key_start = i;
        let key_end = skip_str(s, i + 1)?;
        let key = &s[i + 1..key_end - 1];
        // Keys at these levels are matched by name: one with an escape or a non-ASCII
        // byte is left to serde_json (which decodes and validates it).
        if key.iter().any(|&c| c == b'\\' || c >= 0x80) {
            return Err(Stop::Fallback);
        }
        i = ws(s, key_end);
        if byte(s, i)? != b':' {
            return Err(Stop::Fallback);
        }
        i = ws(s, i + 1);
        match level.keeps(key) {
            None => i = skip_value(s, i)?,
            Some(how) => {
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(&s[key_start..key_end]);
                out.push(b':');
                match how {
                    Some(sub) if byte(s, i)? == b'{' => i = walk(s, i + 1, sub, out)?,
                    _ => {
                        let end = skip_value(s, i)?;
                        out.extend_from_slice(&s[i..end]);
                        i = end;
                    }
                }
            }
        }
        i = ws(s, i);
        match byte(s, i)? {
            b',' => i = ws(s, i + 1),
            b'}' => {
                out.push(b'}');
                return Ok(i + 1);
            }
            _ => return Err(Stop::Fallback),
        }
    }
}

/// The byte at `i`, or [`Stop::More`] past the end.
#[inline]
fn byte(s: &[u8], i: usize) -> Scan<u8> {
    s.get(i).copied().ok_or(Stop::More)
}

/// The first index at or after `i` that is not JSON whitespace (or `s.len()`); runs of
/// spaces (indentation) go 8 bytes at a time.
#[inline]
fn ws(s: &[u8], mut i: usize) -> usize {
    while let Some(&c) = s.get(i) {
        match c {
            b' ' => {
                i += 1;
                while let Some(w) = s.get(i..i + 8) {
                    if u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])) != SPACES {
                        break;
                    }
                    i += 8;
                }
            }
            b'\n' | b'\t' | b'\r' => i += 1,
            _ => break,
        }
    }
    i
}

/// Whether any byte of `w` is zero (the classic bit trick: exact for the lowest such
/// byte, which is all [`skip_str`] uses).
#[inline]
fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(ONES) & !w & HIGHS
}

/// Skips the rest of a string whose opening quote is before `i`; returns the index after
/// its closing quote. A control character or an invalid escape falls back (serde_json
/// rejects them).
fn skip_str(s: &[u8], mut i: usize) -> Scan<usize> {
    const QUOTE: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BSLASH: u64 = u64::from_ne_bytes([b'\\'; 8]);
    const CTRL: u64 = u64::from_ne_bytes([0x20; 8]);
    loop {
        // 8 bytes at a time while none is a quote, a backslash or a control character.
        while let Some(w) = s.get(i..i + 8) {
            let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            let hit = zero_bytes(w ^ QUOTE)
                | zero_bytes(w ^ BSLASH)
                | (w.wrapping_sub(CTRL) & !w & HIGHS);
            if hit != 0 {
                // The lowest flagged byte is exact (little-endian order = memory order).
                i += (hit.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match byte(s, i)? {
            b'"' => return Ok(i + 1),
            b'\\' => {
                i += 1;
                match byte(s, i)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 1,
                    b'u' => {
                        for k in 1..=4 {
                            if !byte(s, i + k)?.is_ascii_hexdigit() {
                                return Err(Stop::Fallback);
                            }
                        }
                        i += 5;
                    }
                    _ => return Err(Stop::Fallback),
                }
            }
            c if c < 0x20 => return Err(Stop::Fallback),
            _ => i += 1,
        }
    }
}

/// Skips the digits from `i`; returns the first index after them.
#[inline]
fn digits(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// Skips a number starting at `i` (JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)?
/// ([eE] [+-]? [0-9]+)?`). A number running to the end of the input asks for more (it
/// may go on).
fn skip_num(s: &[u8], mut i: usize) -> Scan<usize> {
    if s[i] == b'-' {
        i += 1;
    }
    match byte(s, i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(s, i + 1),
        _ => return Err(Stop::Fallback),
    }
    if byte(s, i)? == b'.' {
        let j = digits(s, i + 1);
        if j == i + 1 {
            return Err(if j == s.len() {
                Stop::More
            } else {
                Stop::Fallback
            });
        }
        i = j;
    }
    if matches!(byte(s, i)?, b'e' | b'E') {
        i += 1;
        if matches!(byte(s, i)?, b'+' | b'-') {
            i += 1;
        }
        let j = digits(s, i);
        if j == i {
            return Err(if j == s.len() {
                Stop::More
            } else {
                Stop::Fallback
            });
        }
        i = j;
    }
    // A number at the very end may go on in the next read.
    byte(s, i)?;
    Ok(i)
}

/// Skips one JSON value starting at `i` (no leading whitespace); returns the index after
/// it. Containers are walked in one loop with their kinds in a bit stack (nesting over
/// 127 falls back).
fn skip_value(s: &[u8], mut i: usize) -> Scan<usize> {
    // bit d of `objects`: the container at depth d+1 is an object.
    let mut objects: u128 = 0;
    let mut depth = 0u32;
    loop {
        // A value.
        match byte(s, i)? {
            b'"' => i = skip_str(s, i + 1)?,
            c @ (b'{' | b'[') => {
                i = ws(s, i + 1);
                let close = if c == b'{' { b'}' } else { b']' };
                if byte(s, i)? == close {
                    i += 1;
                } else {
                    if depth == 127 {
                        return Err(Stop::Fallback);
                    }
                    if c == b'{' {
                        objects |= 1 << depth;
                        i = key(s, i)?;
                    } else {
                        objects &= !(1 << depth);
                    }
                    depth += 1;
                    continue;
                }
            }
            b't' => i = literal(s, i, b"true")?,
            b'f' => i = literal(s, i, b"false")?,
            b'n' => i = literal(s, i, b"null")?,
            b'-' | b'0'..=b'9' => i = skip_num(s, i)?,
            _ => return Err(Stop::Fallback),
        }
        // After a value: close containers, or a comma and the next value.
        loop {
            if depth == 0 {
                return Ok(i);
            }
            let object = objects & (1 << (depth - 1)) != 0;
            i = ws(s, i);
            match byte(s, i)? {
                b',' => {
                    i = ws(s, i + 1);
                    if object {
                        i = key(s, i)?;
                    }
                    break;
                }
                b'}' if object => {
                    i += 1;
                    depth -= 1;
                }
                b']' if !object => {
                    i += 1;
                    depth -= 1;
                }
                _ => return Err(Stop::Fallback),
            }
        }
    }
}

/// Skips an object key and its colon at `i`; returns the index of the value.
#[inline]
fn key(s: &[u8], i: usize) -> Scan<usize> {
    if byte(s, i)? != b'"' {
        return Err(Stop::Fallback);
    }
    let i = ws(s, skip_str(s, i + 1)?);
    if byte(s, i)? != b':' {
        return Err(Stop::Fallback);
    }
    Ok(ws(s, i + 1))
}

/// Skips the literal `word` at `i`.
#[inline]
fn literal(s: &[u8], i: usize, word: &[u8]) -> Scan<usize> {
    let end = i + word.len();
    match s.get(i..end) {
        Some(w) if w == word => Ok(end),
        Some(_) => Err(Stop::Fallback),
        None if word.starts_with(&s[i..]) => Err(Stop::More),
        None => Err(Stop::Fallback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce(s: &str) -> (Skim, String) {
        let mut out = Vec::new();
        let r = reduce_node(s.as_bytes(), &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn keeps_only_what_the_node_reader_reads_byte_for_byte() {
        let s = r#" {"apiVersion":"v1","kind":"Node","metadata":{"annotations":{"a":"x\"y"},
            "name":"n1","labels":{"k":"v", "n": 1},"uid":"u"},"spec":{"podCIDR":"10.0.0.0/24",
            "taints":[{"key":"t","effect":"NoSchedule"}]},"status":{"images":[{"names":["a","b"],
            "sizeBytes":123e4}],"capacity":{"nvidia.com/gpu":"8"},"nodeInfo":{"x":[true,false,null,-0.5]},
            "allocatable":{"nvidia.com/gpu":"8"}}} ,"#;
        let (r, out) = reduce(s);
        assert_eq!(r, Skim::Done(s.len() - 2));
        assert_eq!(
            out,
            r#"{"kind":"Node","metadata":{"name":"n1","labels":{"k":"v", "n": 1}},"spec":{"taints":[{"key":"t","effect":"NoSchedule"}]},"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}"#
        );
    }

    #[test]
    fn a_cut_item_asks_for_more_and_a_whole_one_is_done() {
        let s = r#"{"metadata":{"name":"n"},"status":{"images":[{"sizeBytes":12345}]}}"#;
        for cut in 0..s.len() {
            assert_eq!(
                reduce(&s[..cut]).0,
                Skim::More,
                "cut at {cut}: {:?}",
                &s[..cut]
            );
        }
        assert_eq!(reduce(s).0, Skim::Done(s.len()));
    }

    #[test]
    fn what_serde_json_would_reject_or_decode_falls_back() {
        for bad in [
            r#"{"status":{"images":[1,]}}"#,
            r#"{"status":{"images":[01]}}"#,
            r#"{"status":{"images":[1.]}}"#,
            r#"{"status":{"images":[1e]}}"#,
            r#"{"status":{"images":[-]}}"#,
            r#"{"status":{"x":"a\qb"}}"#,
            r#"{"status":{"x":"a\u12G4"}}"#,
            "{\"status\":{\"x\":\"a\tb\"}}",
            r#"{"status":{"x":tru}}"#,
            r#"{"status":{"x":{"a" 1}}}"#,
            r#"{"status":{"x":{"a":1]}}"#,
            r#"{"status":{"x":[1}}}"#,
            r#"{"stat\u0075s":{}}"#,
            "{\"m\u{e9}tadata\":{}}",
            r#"{"status":{} "spec":{}}"#,
            r#"["not","an","object"]"#,
        ] {
            assert_eq!(reduce(bad).0, Skim::Fallback, "{bad}");
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(reduce(&deep).0, Skim::Fallback);
        let ok = format!("{{\"x\":{}{}}}", "[".repeat(100), "]".repeat(100));
        assert_eq!(reduce(&ok), (Skim::Done(ok.len()), "{}".into()));
    }

    #[test]
    fn strings_are_skipped_to_their_real_end_whatever_their_length() {
        for n in 0..40 {
            let body = "a\\\"b\\\\".repeat(n) + &"x".repeat(n);
            let s = format!(r#"{{"a":"{body}","kind":"Node"}}"#);
            assert_eq!(
                reduce(&s),
                (Skim::Done(s.len()), r#"{"kind":"Node"}"#.into()),
                "{s}"
            );
        }
    }
}
