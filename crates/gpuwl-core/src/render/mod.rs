//! Output of the analyses: the check's line contract (`MISMATCH=` / `OK=` lines), tables,
//! JSON, YAML and CSV, and the helpers every report uses (width, wrapping, table fitting,
//! escaping, writing to stdout). The reports of the engines above the core (the local
//! cluster, the lab, relabel, whatif) are rendered in gpuwl's own `render` module, which
//! re-exports this one.

use std::borrow::Cow;
use std::io::{self, Write};

pub mod check;
pub mod explain;
pub mod inventory;
pub mod inventory_svg;
pub mod kubevirt;
pub mod policy;
pub mod quota;
pub mod relabel;
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
/// the line's own indentation plus two spaces (a `# ` comment line's continuations start
/// with `#` too, so that copying a block of commands never runs a piece of a comment as
/// a command). A command in a line that must wrap
/// (`kubectl …`, `virtctl …`, `gpuwl …`: see [`command_spans`]) is never split: it gets a
/// line of its own, whole however wide, so that copying that line runs it as printed.
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
        // A shell comment (`# 2. stop what …`, among commands to copy) stays a comment on
        // every line it wraps to: a continuation without `#` would run as a command.
        let rest = if body[indent.len()..].starts_with("# ") {
            format!("{indent}#   ")
        } else {
            format!("{indent}  ")
        };
        let mut tokens = tokens(body.trim_start_matches(' '));
        let spans = command_spans(&mut tokens);
        unbracket(&mut tokens, &spans);
        let mut lines: Vec<String> = Vec::new();
        let lead = |lines: &Vec<String>| if lines.is_empty() { &indent } else { &rest };
        let prose = |toks: &[Token], lines: &mut Vec<String>| {
            let text = join(toks);
            // The punctuation that closed a command on the line above is not carried to
            // the start of the next line (`; or end it …`): the line break separates them.
            let text = text.trim_start_matches([',', ';', '.', ':']).trim_start();
            if text.is_empty() {
                return;
            }
            let opts = textwrap::Options::new(width)
                .initial_indent(lead(lines))
                .subsequent_indent(&rest)
                .break_words(false)
                .word_separator(textwrap::WordSeparator::AsciiSpace)
                .word_splitter(textwrap::WordSplitter::NoHyphenation);
            lines.push(textwrap::fill(text, opts));
        };
        let mut i = 0;
        for (start, end) in spans {
            prose(&tokens[i..start], &mut lines);
            let command = format!("{}{}", lead(&lines), join(&tokens[start..end]));
            lines.push(command);
            i = end;
        }
        prose(&tokens[i..], &mut lines);
        out.push_str(&lines.join("\n"));
        out.push_str(nl);
    }
    out
}

/// Drops the brackets around each command of `spans` that gets a line of its own: a
/// `` ` `` or `(` right before it and its closer right after (`remove it (kubectl label …)
/// or check` → `remove it:` / the command / `or check`), and a `)` that closes a
/// parenthesis the prose opened before the command (`(a VMI no VirtualMachine owns:
/// kubectl delete vmi …)`): printed on lines of their own they would be a lone `(`, `)` or
/// backtick, and copied with the command they would break it.
fn unbracket(tokens: &mut [Token], spans: &[(usize, usize)]) {
    for &(start, end) in spans {
        let closer = |tokens: &[Token], c: char| {
            tokens
                .get(end)
                .is_some_and(|(t, space)| !space && t.starts_with(c))
        };
        let drop_first = |tokens: &mut [Token], c: char| {
            if let Some((t, _)) = tokens.get_mut(end)
                && t.starts_with(c)
            {
                t.remove(0);
            }
        };
        // Openers right before the command (`(`, a backtick, or both) with their closers
        // right after it, innermost first.
        let mut k = start;
        let mut paren = false;
        while k > 0 {
            let c = match tokens[k - 1].0.as_str() {
                "(" => ')',
                "`" => '`',
                _ => break,
            };
            if !closer(tokens, c) {
                break;
            }
            drop_first(tokens, c);
            paren |= c == ')';
            tokens[k - 1] = (String::new(), false);
            k -= 1;
        }
        if k < start {
            // `remove it (kubectl …)` reads `remove it:` before the command's line.
            if paren && k >= 1 && !tokens[k - 1].0.ends_with([':', ';', ',', '.']) {
                tokens[k] = (":".to_owned(), false);
            }
        }
        if closer(tokens, ')') {
            // The `(` the prose opened before the command (and its openers), on the same
            // input line.
            let mut depth = 0i32;
            let found = (0..k).rev().find(|&k| {
                let t = &tokens[k].0;
                depth += t.matches(')').count() as i32 - t.matches('(').count() as i32;
                depth < 0
            });
            if let Some(k) = found
                && let Some(at) = tokens[k].0.rfind('(')
            {
                tokens[k].0.remove(at);
                drop_first(tokens, ')');
            }
        }
    }
}

/// The programs whose example lines in `--help` [`fit_examples`] keeps runnable.
const EXAMPLE_PROGRAMS: [&str; 8] = [
    "gpuwl ", "kubectl ", "curl ", "export ", "eval ", "helm ", "docker ", "ln ",
];

/// Help text whose example commands (an indented line starting with one of
/// [`EXAMPLE_PROGRAMS`], and the lines it continues with ` \`) stay runnable when copied at
/// `width` columns: a command wider than that is split between words (never inside quotes)
/// into lines that end with ` \`, a `# comment` after it goes on its own line before it, and
/// a comment line wraps into comment lines; a prose line wider than `width` is wrapped by
/// [`wrap_lines`] (a command it names gets a line of its own). clap's own wrapping would
/// cut a command anywhere, and the copied line would run a broken command.
pub fn fit_examples(text: &str, width: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut continued = false;
    for line in text.split('\n') {
        let t = line.trim_start();
        let indent = &line[..line.len() - t.len()];
        let was_continued = continued;
        let command = continued
            || (line.starts_with("  ") && EXAMPLE_PROGRAMS.iter().any(|p| t.starts_with(p)));
        let comment = line.starts_with("  ") && t.starts_with("# ");
        continued = command && line.trim_end().ends_with('\\');
        if display_width(line) <= width {
            out.push(line.to_owned());
            continue;
        }
        if !(command || comment) {
            // Prose is wrapped here, a command in it kept whole on a line of its own
            // ([`wrap_lines`]); clap then leaves the lines that fit alone, and never cuts
            // a command it names (`` `gpuwl cluster up --kubevirt` ``).
            // Help paragraphs have no hanging indent (clap's own wrapping adds none).
            let hang = if indent.is_empty() { "  " } else { "" };
            let w = wrap_lines(line, width);
            out.extend(
                w.lines()
                    .map(|l| l.strip_prefix(hang).unwrap_or(l).to_owned()),
            );
            continue;
        }
        if comment {
            out.extend(comment_lines(indent, t, width));
            continue;
        }
        let (cmd, note) = match line[indent.len()..].find("  #") {
            Some(i) => (
                line[..indent.len() + i].trim_end(),
                Some(line[indent.len() + i..].trim_start()),
            ),
            None => (line.trim_end(), None),
        };
        // The comment goes before the command, or after it when the command continues a
        // line above (a comment line there would end that command).
        let note = note.map(|n| comment_lines(indent, n, width));
        if let (Some(n), false) = (&note, was_continued) {
            out.extend(n.iter().cloned());
        }
        let after = note.filter(|_| was_continued).unwrap_or_default();
        if display_width(cmd) <= width {
            out.push(cmd.to_owned());
            out.extend(after);
            continue;
        }
        let words = shell_words(cmd.trim_start());
        let next = format!("{indent}    ");
        let mut cur = indent.to_owned();
        for w in words {
            let fresh = cur.trim().is_empty();
            // Room for the word and for the ` \` that ends a line that goes on.
            if !fresh && display_width(&cur) + 1 + display_width(&w) + 2 > width && w != "\\" {
                out.push(format!("{cur} \\"));
                cur = next.clone();
            }
            if !cur.trim().is_empty() {
                cur.push(' ');
            }
            cur.push_str(&w);
        }
        out.push(cur);
        out.extend(after);
    }
    out.join("\n")
}

/// `text` (a `# …` comment) as comment lines of at most `width` columns, each `indent# …`.
fn comment_lines(indent: &str, text: &str, width: usize) -> Vec<String> {
    let body = text.trim_start_matches('#').trim_start();
    let lead = format!("{indent}# ");
    let opts = textwrap::Options::new(width.max(lead.len() + 1))
        .initial_indent(&lead)
        .subsequent_indent(&lead)
        .break_words(false)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    textwrap::wrap(body, opts)
        .into_iter()
        .map(|l| l.into_owned())
        .collect()
}

/// `cmd` split at spaces outside `'…'` and `"…"` quotes.
fn shell_words(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in cmd.chars() {
        match (c, quote) {
            ('\'' | '"', None) => {
                quote = Some(c);
                cur.push(c);
            }
            (q, Some(open)) if q == open => {
                quote = None;
                cur.push(c);
            }
            (' ', None) => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// A word of a line and whether a space came before it.
type Token = (String, bool);

/// `s` split at spaces into [`Token`]s; an opening `(` or backquote glued to a command
/// name (`(kubectl`, `` `gpuwl ``) is a token of its own.
fn tokens(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    for w in s.split(' ') {
        // `(kubectl`, `` `gpuwl ``, `` (`kubectl ``: the openers, then the name.
        let r = w.trim_start_matches(['(', '`']);
        if r.len() < w.len() && COMMANDS.contains(&r) {
            for (k, open) in w[..w.len() - r.len()].chars().enumerate() {
                out.push((open.to_string(), k == 0));
            }
            out.push((r.to_owned(), false));
        } else {
            out.push((w.to_owned(), true));
        }
    }
    out
}

/// Tokens joined back as they were spaced (no space before the first).
fn join(toks: &[Token]) -> String {
    let mut s = String::new();
    for (k, (t, space)) in toks.iter().enumerate() {
        if *space && k > 0 && !s.is_empty() {
            s.push(' ');
        }
        s.push_str(t);
    }
    s
}

/// The programs whose command lines [`wrap_lines`] keeps whole.
const COMMANDS: [&str; 3] = ["kubectl", "virtctl", "gpuwl"];

/// Whether `word` is a subcommand of `program` (one of [`COMMANDS`]) that gpuwl prints in
/// a command: prose that names a program (`gpuwl does not model …`, `kubectl prints …`) is
/// not a command. gpuwl's own list is its top-level commands (`gpuwl --help`).
fn subcommand(program: &str, word: &str) -> bool {
    const KUBECTL: [&str; 22] = [
        "get", "describe", "delete", "label", "annotate", "patch", "uncordon", "cordon", "drain",
        "apply", "wait", "logs", "auth", "taint", "edit", "create", "scale", "rollout", "exec",
        "debug", "replace", "gpuwl",
    ];
    const VIRTCTL: [&str; 7] = [
        "start", "stop", "restart", "migrate", "pause", "unpause", "console",
    ];
    const GPUWL: [&str; 15] = [
        "check",
        "cluster",
        "lab",
        "inventory",
        "explain",
        "kubevirt",
        "snapshot",
        "triage",
        "serve",
        "whatif",
        "plan",
        "relabel",
        "policy",
        "completions",
        "help",
    ];
    match program {
        "kubectl" => KUBECTL.contains(&word),
        "virtctl" => VIRTCTL.contains(&word),
        "gpuwl" => GPUWL.contains(&word),
        _ => false,
    }
}

/// Words of prose: a span holding one and no flag is a sentence about a command
/// (`virtctl stop a lower-priority VM`), not a command.
const PROSE_WORDS: [&str; 22] = [
    "a", "an", "the", "or", "and", "to", "so", "if", "it", "its", "them", "that", "this", "is",
    "are", "of", "on", "for", "then", "lists", "starts", "says",
];

/// The commands among `tokens`, as `[start, end)` ranges. A command starts at one of
/// [`COMMANDS`] followed by a subcommand or flag; it ends before a token that opens a
/// `(` or is a dash, or with a token ending in `,` `;` `.` `:` `` ` `` or an unmatched `)` — that
/// punctuation is split off into a token of its own, left to the prose after. Quoted
/// arguments (`-p '{"spec": …}'`) are kept whole. A span holding one of [`PROSE_WORDS`]
/// is a sentence about a command and stays prose.
fn command_spans(tokens: &mut Vec<Token>) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let next_ok = tokens.get(i + 1).is_some_and(|(n, _)| {
            n.starts_with('-')
                || subcommand(
                    &tokens[i].0,
                    n.trim_end_matches([',', ';', '.', ':', '`', ')']),
                )
        });
        if !(COMMANDS.contains(&tokens[i].0.as_str()) && next_ok) {
            i += 1;
            continue;
        }
        let (mut quoted, mut depth) = (false, 0i32);
        let mut end = tokens.len();
        let mut cut = false;
        for (j, (w, _)) in tokens.iter().enumerate().skip(i + 1) {
            if !quoted && (w.starts_with('(') || matches!(w.as_str(), "—" | "–" | "-")) {
                end = j;
                break;
            }
            for c in w.chars() {
                match c {
                    '\'' => quoted = !quoted,
                    '(' if !quoted => depth += 1,
                    ')' if !quoted => depth -= 1,
                    _ => {}
                }
            }
            if !quoted && (depth < 0 || w.ends_with([',', ';', '.', ':', '`'])) {
                end = j + 1;
                cut = true;
                break;
            }
        }
        // A flag makes it a command even when an argument is such a word (a pod named
        // `a`: `kubectl delete pod a -n ml`).
        let flagged = tokens[i + 1..end]
            .iter()
            .any(|(w, _)| w.starts_with('-') && w.len() > 1);
        let prose = !flagged
            && tokens[i..end].iter().any(|(w, _)| {
                PROSE_WORDS.contains(&w.trim_end_matches([',', ';', '.', ':', ')', '`']))
            });
        if prose || end <= i + 1 {
            i = end.max(i + 1);
            continue;
        }
        if cut {
            // Split the closing punctuation off the command's last word.
            let last = &mut tokens[end - 1].0;
            let mut keep = last.len();
            let bytes = last.as_bytes();
            while keep > 0 {
                match bytes[keep - 1] {
                    b',' | b';' | b'.' | b':' | b'`' => keep -= 1,
                    b')' if depth < 0 => {
                        depth += 1;
                        keep -= 1;
                    }
                    _ => break,
                }
            }
            let punct = last.split_off(keep);
            if !punct.is_empty() {
                tokens.insert(end, (punct, false));
            }
        }
        spans.push((i, end));
        i = end;
    }
    spans
}

/// One column of a [`fit_table`]: its header (the same at every width: a narrow terminal
/// drops columns, it never renames them), whether it is right-aligned, and its drop rank
/// (0: never dropped; higher ranks are dropped first).
#[derive(Debug, Clone)]
pub struct Column {
    /// The header, at every width.
    pub header: &'static str,
    /// Right-aligned (numbers).
    pub right: bool,
    /// Drop rank: 0 never; otherwise the highest rank goes first.
    pub drop_rank: u8,
}

/// A table that fits `width`: every column if it fits, else without the columns of the
/// highest drop ranks, one rank at a time. Headers never change with the width. Cells are
/// never wrapped or split; when even the essential columns are wider than `width`, they
/// are laid out as records ([`records`]) that fit it.
pub fn fit_table(columns: &[Column], rows: &[Vec<String>], width: usize) -> String {
    let render = |keep: &[usize]| -> String {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::UTF8_BORDERS_ONLY);
        t.set_content_arrangement(comfy_table::ContentArrangement::Disabled);
        t.set_header(keep.iter().map(|&i| columns[i].header).collect::<Vec<_>>());
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
    let mut last = render(&keep);
    if fits(&last) {
        return last;
    }
    let mut ranks: Vec<u8> = columns
        .iter()
        .map(|c| c.drop_rank)
        .filter(|r| *r > 0)
        .collect();
    ranks.sort_unstable_by(|a, b| b.cmp(a));
    ranks.dedup();
    for rank in ranks {
        keep.retain(|&i| columns[i].drop_rank != rank);
        last = render(&keep);
        if fits(&last) {
            return last;
        }
    }
    records(columns, rows, &keep, width)
}

/// The essential columns of a [`fit_table`] whose table is still wider than `width`, as
/// records: a line of the left-aligned columns' headers, then per row those values on a
/// line and the right-aligned (numeric) ones below as `HEADER value` pairs, wrapped at
/// `width`. A name wider than `width` stays whole.
fn records(columns: &[Column], rows: &[Vec<String>], keep: &[usize], width: usize) -> String {
    let (keys, values): (Vec<usize>, Vec<usize>) = keep.iter().partition(|&&i| !columns[i].right);
    let mut out = vec![
        keys.iter()
            .map(|&i| columns[i].header)
            .collect::<Vec<_>>()
            .join("  "),
    ];
    let cell = |r: &Vec<String>, i: usize| r.get(i).cloned().unwrap_or_default();
    for r in rows {
        out.push(
            keys.iter()
                .map(|&i| cell(r, i))
                .collect::<Vec<_>>()
                .join("  "),
        );
        let pairs = values
            .iter()
            .map(|&i| format!("{}\u{a0}{}", columns[i].header, cell(r, i)))
            .collect::<Vec<_>>()
            .join("  ");
        if !pairs.is_empty() {
            let opts = textwrap::Options::new(width)
                .initial_indent("  ")
                .subsequent_indent("  ")
                .break_words(false)
                .word_separator(textwrap::WordSeparator::AsciiSpace)
                .word_splitter(textwrap::WordSplitter::NoHyphenation);
            out.push(textwrap::fill(&pairs, opts).replace('\u{a0}', " "));
        }
    }
    out.join("\n")
}

pub(crate) use crate::text::is_bidi_control;
pub use crate::text::{esc, escape_controls};

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

/// [`esc`] line by line for text gpuwl itself split into lines (a fix's steps, one command
/// per line): each line escaped, the lines after the first indented by `indent`.
pub fn esc_lines(s: &str, indent: &str) -> String {
    s.split('\n')
        .map(esc)
        .collect::<Vec<_>>()
        .join(&format!("\n{indent}"))
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
    fn commands_in_a_wrapped_line_get_lines_of_their_own() {
        let fix = "Fix: relabel the node: kubectl label node n-1 nvidia.com/gpu.workload.config=vm-passthrough --overwrite\n";
        assert_eq!(
            wrap_lines(fix, 80),
            "Fix: relabel the node:\n  kubectl label node n-1 nvidia.com/gpu.workload.config=vm-passthrough --overwrite\n"
        );
        // A line that fits is left alone.
        assert_eq!(wrap_lines(fix, 200), fix);
        // Two commands, each ending before a parenthesis; the prose between wraps.
        let vh = "Fix: get virt-handler running and Ready on kv-gpu-a: kubectl get pods -n kubevirt -l kubevirt.io=virt-handler -o wide --field-selector spec.nodeName=kv-gpu-a (its logs say why it is not Ready), and kubectl get daemonset virt-handler -n kubevirt (its nodeSelector and tolerations must admit the node)";
        let w = wrap_lines(vh, 100);
        let lines: Vec<&str> = w.lines().collect();
        assert_eq!(
            lines[0],
            "Fix: get virt-handler running and Ready on kv-gpu-a:"
        );
        assert_eq!(
            lines[1],
            "  kubectl get pods -n kubevirt -l kubevirt.io=virt-handler -o wide --field-selector spec.nodeName=kv-gpu-a"
        );
        assert_eq!(lines[2], "  (its logs say why it is not Ready), and");
        assert_eq!(lines[3], "  kubectl get daemonset virt-handler -n kubevirt");
        assert_eq!(
            lines[4],
            "  (its nodeSelector and tolerations must admit the node)"
        );
        // Closing punctuation is dropped at the line break; the parentheses around a
        // command on a line of its own go (issue 54, item 7: no lone `(` or `)` line), the
        // prose before it ending with a colon; a quoted argument with spaces stays whole.
        let w = wrap_lines(
            "  remove it (kubectl label node gpu-7 nvidia.com/gpu.deploy.operands-) or check that NFD sees the GPU; then kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge -p '{\"a\": 1}'; done\n",
            40,
        );
        assert_eq!(
            w,
            "  remove it:\n    kubectl label node gpu-7 nvidia.com/gpu.deploy.operands-\n    or check that NFD sees the GPU; then\n    kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge -p '{\"a\": 1}'\n    done\n"
        );
        // A sentence about a command is prose; a line that is a command stays whole.
        let w = wrap_lines(
            "free units (for a VM, virtctl stop a lower-priority VM, never delete a virt-launcher pod)",
            30,
        );
        assert!(w.lines().all(|l| display_width(l) <= 30), "{w}");
        let c = "  kubectl label node lab-node-1 nvidia.com/gpu.workload.config=container --overwrite\n";
        assert_eq!(wrap_lines(c, 60), c);
    }

    #[test]
    fn prose_that_names_a_program_is_not_a_command() {
        // Seen in explain's fits-now fix at 100 columns: "gpuwl does not model" got a line
        // of its own as if it were a command.
        let fix = "Fix: wait for the next scheduling attempt; if it stays Pending, the scheduler message names what gpuwl does not model (host ports, volumes, inter-pod affinity, topology spread, scheduling gates)";
        for width in [60, 80, 100] {
            let w = wrap_lines(fix, width);
            let words: Vec<&str> = w.split_whitespace().collect();
            assert_eq!(words, fix.split_whitespace().collect::<Vec<_>>());
            // Plain wrapping: every line but the last is filled (the next word did not fit).
            let lines: Vec<&str> = w.lines().collect();
            for pair in lines.windows(2) {
                let next = pair[1].split_whitespace().next().unwrap();
                assert!(
                    display_width(pair[0]) + 1 + display_width(next) > width,
                    "{width}: {:?} could take {next:?}\n{w}",
                    pair[0]
                );
            }
        }
        assert_eq!(
            wrap_lines("kubectl prints the node; virtctl is not installed", 20)
                .lines()
                .count(),
            3
        );
        // A real command after prose still gets its own line.
        let w = wrap_lines("then run gpuwl explain gpu-vm/job-cross; it says why", 20);
        assert!(
            w.lines()
                .any(|l| l.trim() == "gpuwl explain gpu-vm/job-cross"),
            "{w}"
        );
    }

    #[test]
    fn a_command_whose_argument_is_a_short_word_is_still_a_command() {
        let line = "free 1 of nvidia.com/gpu on gpu-a by stopping ml/a (it disrupts them): kubectl delete pod a -n ml, then retry";
        for width in [30, 50, 70] {
            let w = wrap_lines(line, width);
            assert!(
                w.lines()
                    .any(|l| l.trim_start() == "kubectl delete pod a -n ml"),
                "{width}\n{w}"
            );
        }
    }

    #[test]
    fn a_command_in_backquotes_is_kept_whole_too() {
        let line = "correct gpu-7's invalid nvidia.com/gpu.workload.config to vm-passthrough (check `gpuwl whatif relabel gpu-7=vm-passthrough` first when GPU pods run on it)";
        for width in [40, 60, 80] {
            let w = wrap_lines(line, width);
            assert!(
                w.lines()
                    .any(|l| l.trim_start() == "gpuwl whatif relabel gpu-7=vm-passthrough"),
                "{width}\n{w}"
            );
        }
        assert_eq!(wrap_lines(line, 400), line);
        // No line is a lone backtick, `(` or `)`, and the backticks go with the line break.
        assert_eq!(
            wrap_lines(line, 60),
            "correct gpu-7's invalid nvidia.com/gpu.workload.config to\n  vm-passthrough (check\n  gpuwl whatif relabel gpu-7=vm-passthrough\n  first when GPU pods run on it)"
        );
    }

    #[test]
    fn a_comment_among_commands_stays_a_comment_on_every_line() {
        let block = "  # 2. stop what would lose its GPU (or live-migrate a VM to a node that offers the name); never delete a virt-launcher pod\n  kubectl delete pod vmi-passthrough -n gpu-vm\n  # (a VMI no VirtualMachine owns: kubectl delete vmi who -n gpu-vm)\n";
        for width in [40, 60, 80, 100] {
            let w = wrap_lines(block, width);
            for l in w.lines() {
                let t = l.trim_start();
                // Every line is a comment or the one command of the block.
                assert!(
                    t.starts_with('#') || t == "kubectl delete pod vmi-passthrough -n gpu-vm",
                    "{width}: {l}\n{w}"
                );
            }
        }
        assert_eq!(
            wrap_lines(block, 60),
            "  # 2. stop what would lose its GPU (or live-migrate a VM to\n  #   a node that offers the name); never delete a\n  #   virt-launcher pod\n  kubectl delete pod vmi-passthrough -n gpu-vm\n  # a VMI no VirtualMachine owns:\n  #   kubectl delete vmi who -n gpu-vm\n"
        );
    }

    #[test]
    fn help_examples_are_split_with_a_backslash_never_cut() {
        let help = "Examples:\n  gpuwl check --effective nodes.json --cluster-policy cp.yaml   # a CronJob gate on the live cluster\n  gpuwl check nodes.json -o json \\\n      | jq -r '.nodes[] | .name as $n | .findings[]'   # per node\nProse stays as it is, however long it is.";
        assert_eq!(fit_examples(help, 200), help);
        assert_eq!(
            fit_examples(help, 40),
            "Examples:\n  # a CronJob gate on the live cluster\n  gpuwl check --effective nodes.json \\\n      --cluster-policy cp.yaml\n  gpuwl check nodes.json -o json \\\n      | jq -r \\\n          '.nodes[] | .name as $n | .findings[]'\n      # per node\nProse stays as it is, however long it\nis."
        );
        // A command in prose is never cut (issue 54, item 8): it gets a line of its own.
        assert_eq!(
            fit_examples(
                "The gate on a real cluster (`kubectl gpuwl check --effective`) after linking it",
                40
            ),
            "The gate on a real cluster:\nkubectl gpuwl check --effective\nafter linking it"
        );
    }

    #[test]
    fn tables_drop_columns_by_rank_and_never_rename_a_header() {
        let col = |header, right, drop_rank| Column {
            header,
            right,
            drop_rank,
        };
        let cols = [
            col("NAME", false, 0),
            col("ALLOCATABLE", true, 0),
            col("CAPACITY", true, 1),
            col("USE", false, 2),
        ];
        let rows = vec![vec![
            "nvidia.com/gpu".into(),
            "4".into(),
            "4".into(),
            "██░░".into(),
        ]];
        let widest = |t: &str| t.lines().map(display_width).max().unwrap();
        let heads = |t: &str| -> Vec<String> {
            t.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .filter(|w| *w != "│")
                .map(str::to_owned)
                .collect()
        };
        let t = fit_table(&cols, &rows, 100);
        assert_eq!(heads(&t), ["NAME", "ALLOCATABLE", "CAPACITY", "USE"], "{t}");
        let full = widest(&t);
        // One column short: the bar goes first.
        let t = fit_table(&cols, &rows, full - 1);
        assert_eq!(heads(&t), ["NAME", "ALLOCATABLE", "CAPACITY"], "{t}");
        let no_bar = widest(&t);
        // Then the next rank; the headers left are the same words at every width.
        let t = fit_table(&cols, &rows, no_bar - 1);
        assert_eq!(heads(&t), ["NAME", "ALLOCATABLE"], "{t}");
        // Narrower than the essential columns (issue 54, item 8): records, names whole.
        let t = fit_table(&cols, &rows, widest(&t) - 1);
        assert_eq!(t, "NAME\nnvidia.com/gpu\n  ALLOCATABLE 4");
        let t = fit_table(&cols, &rows, 10);
        assert_eq!(t, "NAME\nnvidia.com/gpu\n  ALLOCATABLE 4");
    }
}
