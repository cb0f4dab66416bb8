//! Output: the check's line contract (`MISMATCH=` / `OK=` lines), tables, JSON, YAML and CSV.

use std::borrow::Cow;
use std::io::{self, Write};

pub mod check;
pub mod cluster;
pub mod explain;
pub mod inventory;
pub mod kubevirt;
pub mod lab;
pub mod triage;
pub mod whatif;

/// Output format of commands that report (`-o text|json|yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Plain text for people and scripts.
    #[default]
    Text,
    /// Pretty JSON.
    Json,
    /// YAML.
    Yaml,
}

/// The width text output is laid out for, in columns: `$COLUMNS` when set (≥ 20), else the
/// terminal's width when stdout is one, else 80.
pub fn width() -> usize {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c >= 20)
    {
        return c;
    }
    terminal_size::terminal_size_of(io::stdout())
        .map(|(w, _)| usize::from(w.0))
        .filter(|w| *w >= 20)
        .unwrap_or(80)
}

/// Display width of a line (Unicode columns).
pub fn display_width(line: &str) -> usize {
    textwrap::core::display_width(line)
}

/// Wraps every line of `text` wider than `width` at spaces, never inside a word (a
/// resource or node name stays whole even when it alone is wider); continuation lines get
/// the line's own indentation plus two spaces.
pub fn wrap_lines(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if display_width(body) <= width {
            out.push_str(line);
            continue;
        }
        let indent: String = body.chars().take_while(|c| *c == ' ').collect();
        let rest = format!("{indent}  ");
        let opts = textwrap::Options::new(width)
            .initial_indent(&indent)
            .subsequent_indent(&rest)
            .break_words(false)
            .word_separator(textwrap::WordSeparator::AsciiSpace)
            .word_splitter(textwrap::WordSplitter::NoHyphenation);
        out.push_str(&textwrap::fill(body.trim_start_matches(' '), opts));
        out.push_str(nl);
    }
    out
}

/// One column of a [`fit_table`]: a header, a shorter header to use when space is
/// short, whether it is right-aligned, and its drop rank (0: never dropped; higher ranks
/// are dropped first).
#[derive(Debug, Clone)]
pub struct Column {
    /// Full header.
    pub header: &'static str,
    /// Short header (may equal `header`).
    pub short: &'static str,
    /// Right-aligned (numbers).
    pub right: bool,
    /// Drop rank: 0 never; otherwise the highest rank goes first.
    pub drop_rank: u8,
}

/// A table that fits `width`: rendered with full headers and every column if it fits,
/// else with short headers, else without the columns of the highest drop ranks, one rank
/// at a time. Cells are never wrapped or split; when even the essential columns are wider
/// than `width`, they are printed whole. Returns the table and whether short headers were
/// used.
pub fn fit_table(columns: &[Column], rows: &[Vec<String>], width: usize) -> (String, bool) {
    let render = |keep: &[usize], short: bool| -> String {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::UTF8_BORDERS_ONLY);
        t.set_content_arrangement(comfy_table::ContentArrangement::Disabled);
        t.set_header(
            keep.iter()
                .map(|&i| {
                    if short {
                        columns[i].short
                    } else {
                        columns[i].header
                    }
                })
                .collect::<Vec<_>>(),
        );
        for r in rows {
            t.add_row(keep.iter().map(|&i| r.get(i).cloned().unwrap_or_default()));
        }
        for (k, &i) in keep.iter().enumerate() {
            if columns[i].right
                && let Some(c) = t.column_mut(k)
            {
                c.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        t.to_string()
    };
    let fits = |s: &str| s.lines().all(|l| display_width(l) <= width);
    let mut keep: Vec<usize> = (0..columns.len()).collect();
    let full = render(&keep, false);
    if fits(&full) {
        return (full, false);
    }
    let mut ranks: Vec<u8> = columns
        .iter()
        .map(|c| c.drop_rank)
        .filter(|r| *r > 0)
        .collect();
    ranks.sort_unstable_by(|a, b| b.cmp(a));
    ranks.dedup();
    // The highest rank (a decoration such as a bar) goes before any header is shortened.
    if let Some(&top) = ranks.first() {
        let without: Vec<usize> = keep
            .iter()
            .copied()
            .filter(|&i| columns[i].drop_rank != top)
            .collect();
        let t = render(&without, false);
        if fits(&t) {
            return (t, false);
        }
        keep = without;
    }
    let mut last = render(&keep, true);
    if fits(&last) {
        return (last, true);
    }
    for rank in ranks {
        keep.retain(|&i| columns[i].drop_rank != rank);
        last = render(&keep, true);
        if fits(&last) {
            break;
        }
    }
    (last, true)
}

/// The bidirectional formatting characters (LRM, RLM, embeddings and overrides, isolates)
/// that can make a terminal show text in another order than it is.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Makes text from a file or the cluster safe to print on a terminal: control characters
/// (C0, DEL, C1: newlines, escapes) and the bidirectional-override characters are written
/// as Rust escapes (`\n`, `\u{1b}`, `\u{202e}`), so a crafted name can neither forge an
/// output line nor drive the terminal. Other text is returned unchanged.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
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

/// Makes serialized JSON or YAML safe to print: serde_json and serde-saphyr already escape
/// C0 controls inside strings, but pass DEL, C1 controls and the bidirectional-override
/// characters through; those become `\uXXXX` (a valid escape in a JSON string and a YAML
/// double-quoted one). Line breaks and tabs, which structure the output, stay.
pub fn escape_serialized(s: &str) -> Cow<'_, str> {
    let bad = |c: char| (c.is_control() && !matches!(c, '\n' | '\t' | '\r')) || is_bidi_control(c);
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`] as an owned string, for `format!` arguments: every string that came
/// from a file or the cluster goes through it before it reaches a terminal.
pub fn esc(s: &str) -> String {
    escape_controls(s).into_owned()
}

/// Writes `bytes` to stdout; a closed pipe (`gpuwl check | head -0`) is not an error.
///
/// Errors: other I/O errors.
pub fn write_stdout(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// `print!` for command output: writes through [`write_stdout`], so a closed pipe
/// (`gpuwl lab | head`) ends the output quietly instead of panicking. Other write errors
/// are ignored too: the command's exit code still reports what it did.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = $crate::render::write_stdout(format!($($t)*).as_bytes());
    }};
}

/// `println!` counterpart of [`out!`](crate::out).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out!("\n")
    };
    ($($t:tt)*) => {{
        let mut s = format!($($t)*);
        s.push('\n');
        let _ = $crate::render::write_stdout(s.as_bytes());
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_names_whole_and_indents_continuations() {
        let text = "  Cause: nvidia.com/GA102GL_A10 is advertised on lab-node-1 only\nshort\n";
        let w = wrap_lines(text, 30);
        assert_eq!(
            w,
            "  Cause:\n    nvidia.com/GA102GL_A10 is\n    advertised on lab-node-1\n    only\nshort\n"
        );
        // A word wider than the width stays whole.
        let w = wrap_lines("x nvidia.com/NVIDIA_A100-1-5CME y", 10);
        assert!(
            w.lines()
                .any(|l| l.trim() == "nvidia.com/NVIDIA_A100-1-5CME"),
            "{w}"
        );
    }

    #[test]
    fn tables_drop_the_bar_then_shorten_headers_then_drop_columns_by_rank() {
        let col = |header, short, right, drop_rank| Column {
            header,
            short,
            right,
            drop_rank,
        };
        let cols = [
            col("NAME", "NAME", false, 0),
            col("ALLOCATABLE", "ALLOC", true, 0),
            col("CAPACITY", "CAP", true, 1),
            col("USE", "USE", false, 2),
        ];
        let rows = vec![vec![
            "nvidia.com/gpu".into(),
            "4".into(),
            "4".into(),
            "██░░".into(),
        ]];
        let widest = |t: &str| t.lines().map(display_width).max().unwrap();
        let (t, short) = fit_table(&cols, &rows, 100);
        assert!(!short && t.contains("USE") && t.contains("CAPACITY"), "{t}");
        let full = widest(&t);
        // One column short: the bar goes, headers stay long.
        let (t, short) = fit_table(&cols, &rows, full - 1);
        assert!(
            !short && !t.contains("USE") && t.contains("CAPACITY"),
            "{t}"
        );
        let no_bar = widest(&t);
        // Then the headers shorten...
        let (t, short) = fit_table(&cols, &rows, no_bar - 1);
        assert!(
            short && t.contains("CAP") && !t.contains("ALLOCATABLE"),
            "{t}"
        );
        let shortened = widest(&t);
        // ...then the lowest-priority column goes; names stay whole even when too wide.
        let (t, _) = fit_table(&cols, &rows, shortened - 1);
        assert!(!t.contains("CAP") && t.contains("nvidia.com/gpu"), "{t}");
        let (t, _) = fit_table(&cols, &rows, 10);
        assert!(t.contains("nvidia.com/gpu"), "{t}");
    }
}
