//! `gpuwl inventory -o svg`: the split inventory as a picture. First the pools at a glance
//! (one line per pool and resource name: nodes, a bar of its units, the figures), then one
//! box per node pool, side by side with a gap between them (no unit crosses it: different resource names are
//! different resources to the scheduler), a row per GPU resource name with a bar of its
//! allocatable units (allocated dark, free green, cordoned grey), its figures (pending
//! units as text) and per node one square per unit; the pending demand no pool can serve
//! in a red box below. Deterministic: the
//! same inventory gives the same bytes, so a picture in the docs can be compared with a
//! fresh run.

use std::fmt::Write as _;

use crate::analysis::inventory::{Inventory, NodeUse, Row};
use crate::analysis::verdict::PodClass;

/// Width of one pool's box, in SVG user units (pixels).
const BOX_W: i64 = 330;
/// Space around and between boxes.
const GAP: i64 = 24;
/// Height of a box's header (the pool's name and workload config).
const HEAD_H: i64 = 44;
/// Height of a resource row's name and bar, before its nodes.
const ROW_H: i64 = 58;
/// Height of one node line under a resource row.
const NODE_H: i64 = 18;
/// Side of one unit's square.
const UNIT: i64 = 10;
/// Squares drawn per node before the rest is written as `+N`.
const MAX_UNITS: i64 = 12;
/// Height of one line of the unservable box.
const LINE_H: i64 = 18;

const ALLOCATED: &str = "#37474f";
const FREE: &str = "#43a047";
const CORDONED: &str = "#b0bec5";
const PENDING: &str = "#e53935";
/// Pending pods held back by something else than the split (a cordon, gates, …).
const HELD: &str = "#ef6c00";

/// XML text: `&`, `<`, `>`, `"` and `'` as entities; control characters and the code
/// points XML 1.0 does not allow at all (U+FFFE, U+FFFF: its `Char` production) dropped,
/// so the document parses whatever a name holds.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() || matches!(c, '\u{fffe}' | '\u{ffff}') => {}
            c => out.push(c),
        }
    }
    out
}

/// `s` cut to `max` characters with `…` when longer.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The pools in the inventory's order, each with its rows.
fn pools(inv: &Inventory) -> Vec<(&str, Vec<&Row>)> {
    let mut out: Vec<(&str, Vec<&Row>)> = Vec::new();
    for r in &inv.rows {
        match out.iter_mut().find(|(p, _)| *p == r.pool) {
            Some((_, rows)) => rows.push(r),
            None => out.push((&r.pool, vec![r])),
        }
    }
    out
}

/// Node lines drawn per resource row; the rest are counted on one more line (`and 1,988
/// more nodes`), so 2,000 nodes give a picture, not a 21,000-pixel scroll.
const MAX_NODE_LINES: usize = 12;

/// The node lines of a resource row: at most [`MAX_NODE_LINES`], plus one when some are
/// left out.
fn node_lines(r: &Row) -> i64 {
    let n = r.node_detail.len();
    (n.min(MAX_NODE_LINES) + usize::from(n > MAX_NODE_LINES)) as i64
}

/// Height of a pool's box.
fn box_height(rows: &[&Row]) -> i64 {
    HEAD_H
        + rows
            .iter()
            .map(|r| ROW_H + NODE_H * node_lines(r))
            .sum::<i64>()
        + 8
}

/// About how wide `text` is drawn at `size` px (DejaVu Sans averages 0.6 em per character;
/// bold a little more): the canvas is made at least this wide, so no title is clipped.
fn text_width(text: &str, size: i64, bold: bool) -> i64 {
    let per = if bold { size * 65 / 100 } else { size * 6 / 10 };
    text.chars().count() as i64 * per.max(1)
}

/// The picture of `inv`: an SVG 1.1 document (UTF-8, one trailing newline).
pub fn svg(inv: &Inventory) -> String {
    let pools = pools(inv);
    let cols = pools.len().max(1) as i64;
    let title = format!(
        "GPU inventory: {} GPU node(s) in {} pool(s), {} pending pod(s)",
        inv.gpu_nodes,
        pools.len(),
        inv.pending_pods
    );
    let subtitle = "Each pool advertises its own resource names; a pod asking one name can use no other pool's units.";
    let sections = sections(inv);
    // Wide enough for the title, the subtitle and the sections' lines (those up to 1,600 px;
    // a longer one is cut with `…`).
    let longest = sections
        .iter()
        .flat_map(|sec| {
            sec.lines
                .iter()
                .map(|(_, l)| l.chars().count() as i64 * 7 + 24)
        })
        .max()
        .unwrap_or(0)
        .min(1600);
    let summary_w = pools
        .iter()
        .flat_map(|(_, rows)| rows.iter())
        .map(|r| SUMMARY_TEXT_X + text_width(&summary_line(r), 12, false) + 12)
        .max()
        .unwrap_or(0);
    let width = (GAP + cols * (BOX_W + GAP))
        .max(2 * GAP + summary_w)
        .max(2 * GAP + text_width(&title, 16, true))
        .max(2 * GAP + text_width(subtitle, 12, false))
        .max(2 * GAP + longest + 12);
    let boxes_h = pools
        .iter()
        .map(|(_, rows)| box_height(rows))
        .max()
        .unwrap_or(HEAD_H);
    let summary_top = 64;
    let top = summary_top + summary_height(&pools) + GAP;
    let sections_h: i64 = sections
        .iter()
        .map(|sec| GAP + 30 + LINE_H * sec.lines.len() as i64)
        .sum();
    let height = top + boxes_h + sections_h + 56;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{GAP}" y="28" font-size="16" font-weight="bold">{}</text>"#,
        xml(&title)
    );
    let _ = writeln!(
        s,
        r##"<text x="{GAP}" y="48" fill="#555555">{subtitle}</text>"##
    );
    summary(&mut s, summary_top, width - 2 * GAP, &pools);
    for (i, (pool, rows)) in pools.iter().enumerate() {
        let x = GAP + i as i64 * (BOX_W + GAP);
        pool_box(&mut s, x, top, pool, rows, box_height(rows));
    }
    let mut y = top + boxes_h + GAP;
    let w = width - 2 * GAP;
    let max = ((w - 24) / 7) as usize;
    for sec in &sections {
        let h = 30 + LINE_H * sec.lines.len() as i64;
        let _ = writeln!(
            s,
            r##"<rect x="{GAP}" y="{y}" width="{w}" height="{h}" rx="6" fill="{}" stroke="{}"/>"##,
            sec.fill, sec.stroke
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-weight="bold" fill="{}">{}</text>"#,
            GAP + 12,
            y + 20,
            sec.stroke,
            xml(&sec.heading)
        );
        for (j, (indent, line)) in sec.lines.iter().enumerate() {
            let ly = y + 20 + LINE_H * (j as i64 + 1);
            let grey = if *indent { r##" fill="#555555""## } else { "" };
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{ly}"{grey}>{}</text>"#,
                GAP + if *indent { 24 } else { 12 },
                xml(&cut(line, max - if *indent { 2 } else { 0 }))
            );
        }
        y += h + GAP;
    }
    let ly = height - 22;
    let mut lx = GAP;
    for (color, label) in [
        (ALLOCATED, "allocated"),
        (FREE, "free"),
        (CORDONED, "free on a cordoned node"),
    ] {
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="{UNIT}" height="{UNIT}" fill="{color}"/><text x="{}" y="{ly}">{label}</text>"#,
            ly - UNIT + 1,
            lx + UNIT + 5
        );
        lx += UNIT + 20 + 7 * label.chars().count() as i64;
    }
    s.push_str("</svg>\n");
    s
}

/// Height of one line of the summary band.
const SUMMARY_LINE_H: i64 = 20;
/// Where, inside the summary band, the resource name, the bar and the figures start.
const SUMMARY_NAME_X: i64 = 150;
const SUMMARY_BAR_X: i64 = 400;
const SUMMARY_BAR_W: i64 = 160;
const SUMMARY_TEXT_X: i64 = SUMMARY_BAR_X + SUMMARY_BAR_W + 12;

/// Height of the summary band: a heading and one line per pool × resource name.
fn summary_height(pools: &[(&str, Vec<&Row>)]) -> i64 {
    let lines: usize = pools.iter().map(|(_, rows)| rows.len()).sum();
    30 + SUMMARY_LINE_H * lines as i64
}

/// A row's figures as the summary band writes them: `1 node(s): 4 allocatable, 1
/// allocated, 3 free`, then the cordoned units apart, the pending units, and the physical
/// GPUs behind the units where they are not whole GPUs and the count is derivable.
fn summary_line(r: &Row) -> String {
    let mut t = format!(
        "{} node(s): {} allocatable, {} allocated, {} free",
        r.node_detail.len(),
        r.allocatable,
        r.allocated,
        r.free
    );
    if r.cordoned_free > 0 {
        let _ = write!(t, " (+{} cordoned)", r.cordoned_free);
    }
    if r.pending > 0 {
        let _ = write!(t, ", {} pending", r.pending);
    }
    // Units that are not whole GPUs (vGPU slots, MIG slices, time-sliced replicas): the
    // GPUs behind them, where derivable.
    if let Some(gpus) = r.capacity_gpus.filter(|g| *g != r.capacity as f64) {
        let _ = write!(t, "; on {gpus} GPU(s)");
    }
    t
}

/// The pools at a glance, `w` wide at `y`: per pool and resource name, the pool (its
/// workload config), the node count, a bar of the units (allocated, free, cordoned, as in
/// the boxes) and the figures — what one reads before any node.
fn summary(s: &mut String, y: i64, w: i64, pools: &[(&str, Vec<&Row>)]) {
    let h = summary_height(pools);
    let _ = writeln!(
        s,
        r##"<rect x="{GAP}" y="{y}" width="{w}" height="{h}" rx="6" fill="#fafafa" stroke="#90a4ae"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-weight="bold">Pools at a glance (units of each resource name)</text>"#,
        GAP + 12,
        y + 20
    );
    let mut ly = y + 20 + SUMMARY_LINE_H;
    for (pool, rows) in pools {
        for r in rows {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{ly}" font-weight="bold">{}</text>"#,
                GAP + 12,
                xml(&cut(pool, 20))
            );
            let name = r.resource.as_deref().unwrap_or("(none advertised)");
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{ly}" font-family="DejaVu Sans Mono, monospace">{}</text>"#,
                GAP + SUMMARY_NAME_X,
                xml(&cut(name, 28))
            );
            units_bar(s, GAP + SUMMARY_BAR_X, ly - 10, SUMMARY_BAR_W, r);
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{ly}" fill="#333333">{}</text>"##,
                GAP + SUMMARY_TEXT_X,
                xml(&summary_line(r))
            );
            ly += SUMMARY_LINE_H;
        }
    }
}

/// A bar `bar_w` wide at (`x`, `y`), 12 high: the row's allocatable units as allocated,
/// free and cordoned parts on a light background.
fn units_bar(s: &mut String, x: i64, y: i64, bar_w: i64, r: &Row) {
    let total = r.allocatable.max(r.allocated).max(1);
    let part = |n: i64| n.max(0).saturating_mul(bar_w) / total;
    let _ = writeln!(
        s,
        r##"<rect x="{x}" y="{y}" width="{bar_w}" height="12" fill="#eceff1"/>"##
    );
    let mut bx = x;
    for (w, color) in [
        (part(r.allocated), ALLOCATED),
        (part(r.free), FREE),
        (part(r.cordoned_free), CORDONED),
    ] {
        if w > 0 {
            let _ = writeln!(
                s,
                r#"<rect x="{bx}" y="{y}" width="{w}" height="12" fill="{color}"/>"#
            );
        }
        bx += w;
    }
}

/// A box below the pools: its heading, colours, and lines (`true`: an indented detail).
struct Section {
    heading: String,
    fill: &'static str,
    stroke: &'static str,
    lines: Vec<(bool, String)>,
}

/// Entries drawn per section below the pools; the rest are counted on one more line.
const MAX_ENTRIES: usize = 10;

/// Every class of pending GPU pod the title counts, each in a box of its own: the demand
/// no pool can serve (the split), then those held back by a cordon or taint, by scheduling
/// gates, by another resource, or that the API server would refuse — as the text's
/// sections. The demand a pool could serve is its rows' `pending`.
fn sections(inv: &Inventory) -> Vec<Section> {
    let mut out = Vec::new();
    // The DRA devices first (the same GPUs may be there and not in the pools above).
    if let Some(d) = inv.dra.as_ref().filter(|d| !d.rows.is_empty()) {
        let mut lines: Vec<(bool, String)> = d
            .rows
            .iter()
            .map(|r| {
                let pending = if r.pending > 0 {
                    format!(", {} pending", r.pending)
                } else {
                    String::new()
                };
                let blocked = if r.blocked > 0 {
                    format!(", {} blocked", r.blocked)
                } else {
                    String::new()
                };
                (
                    false,
                    format!(
                        "{} {} [{}] on {} node(s): {} devices ({} GPUs), {} allocated, {} free{blocked}{pending}",
                        r.driver, r.device_type, r.pool, r.nodes, r.devices, r.physical, r.allocated, r.free
                    ),
                )
            })
            .collect();
        lines.push((
            true,
            format!(
                "{} physical GPU(s) behind these devices, {} in use",
                d.physical_gpus, d.physical_in_use
            ),
        ));
        out.push(Section {
            heading: "DRA devices (resource.k8s.io)".into(),
            fill: "#e3f2fd",
            stroke: "#1565c0",
            lines,
        });
    }
    let capped = |mut lines: Vec<(bool, String)>, entries: usize, per: usize| {
        if entries > MAX_ENTRIES {
            lines.truncate(MAX_ENTRIES * per);
            lines.push((
                false,
                format!(
                    "and {} more (gpuwl inventory lists them)",
                    entries - MAX_ENTRIES
                ),
            ));
        }
        lines
    };
    if !inv.unservable.is_empty() {
        let lines = inv
            .unservable
            .iter()
            .flat_map(|u| {
                [
                    (
                        false,
                        format!("{} wants {} × {}", u.kind.show(&u.pod), u.units, u.resource),
                    ),
                    (true, u.reason.clone()),
                ]
            })
            .collect();
        out.push(Section {
            heading: "Pending demand no pool can serve".into(),
            fill: "#ffebee",
            stroke: PENDING,
            lines: capped(lines, inv.unservable.len(), 2),
        });
    }
    for class in PodClass::ALL {
        let pods: Vec<_> = inv.held_back.iter().filter(|h| h.class == class).collect();
        if pods.is_empty() {
            continue;
        }
        let heading = match class {
            PodClass::Blocked => {
                "Pending, kept off by a cordon, a taint or node maintenance (not the split)"
            }
            PodClass::Gated => "Pending, held by scheduling gates",
            PodClass::OtherResource => "Pending, short of another resource (GPU units free)",
            _ => "Pending, the API server would refuse them",
        };
        let lines = pods
            .iter()
            .map(|h| {
                let wants = h
                    .resources
                    .iter()
                    .map(|(r, u)| format!("{u} × {r}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                (
                    false,
                    format!("{} wants {wants} ({})", h.kind.show(&h.pod), h.code),
                )
            })
            .collect();
        out.push(Section {
            heading: heading.into(),
            fill: "#fff8e1",
            stroke: HELD,
            lines: capped(lines, pods.len(), 1),
        });
    }
    out
}

/// One pool's box at (`x`, `y`), `h` high.
fn pool_box(s: &mut String, x: i64, y: i64, pool: &str, rows: &[&Row], h: i64) {
    let _ = writeln!(
        s,
        r##"<rect x="{x}" y="{y}" width="{BOX_W}" height="{h}" rx="6" fill="#f5f7fa" stroke="#90a4ae"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        x + 12,
        y + 22,
        xml(&cut(pool, 40))
    );
    let nodes: usize = rows.iter().map(|r| r.node_detail.len()).max().unwrap_or(0);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" fill="#555555">{} node(s); workload config {}</text>"##,
        x + 12,
        y + 38,
        nodes,
        rows.first().map(|r| r.workload.as_str()).unwrap_or("")
    );
    let mut ry = y + HEAD_H;
    for r in rows {
        resource_row(s, x, ry, r);
        ry += ROW_H + NODE_H * node_lines(r);
    }
}

/// One resource row of a pool's box, its top at `y`.
fn resource_row(s: &mut String, x: i64, y: i64, r: &Row) {
    let name = r
        .resource
        .as_deref()
        .unwrap_or("(no GPU resource advertised)");
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-family="DejaVu Sans Mono, monospace" font-weight="bold">{}</text>"#,
        x + 12,
        y + 16,
        xml(&cut(name, 40))
    );
    units_bar(s, x + 12, y + 22, BOX_W - 24, r);
    let pending = if r.pending > 0 {
        format!(", {} pending", r.pending)
    } else {
        String::new()
    };
    // FREE as the table counts it: units on cordoned nodes are said apart, never as free.
    let cordoned = if r.cordoned_free > 0 {
        format!(" ({} more on cordoned nodes)", r.cordoned_free)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" fill="#333333">{} allocatable, {} allocated, {} free{cordoned}{pending}</text>"##,
        x + 12,
        y + 50,
        r.allocatable,
        r.allocated,
        r.free
    );
    for (k, n) in r.node_detail.iter().take(MAX_NODE_LINES).enumerate() {
        node_units(s, x + 12, y + ROW_H + NODE_H * k as i64, n);
    }
    if r.node_detail.len() > MAX_NODE_LINES {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" fill="#555555">and {} more nodes (gpuwl inventory -o csv lists them)</text>"##,
            x + 12,
            y + ROW_H + NODE_H * MAX_NODE_LINES as i64 + 9,
            r.node_detail.len() - MAX_NODE_LINES
        );
    }
}

/// One node's line: its name, then a square per allocatable unit (allocated dark, free
/// green, grey when the node is cordoned), at most [`MAX_UNITS`].
fn node_units(s: &mut String, x: i64, y: i64, n: &NodeUse) {
    let _ = writeln!(
        s,
        r##"<text x="{x}" y="{}" fill="#333333">{}</text>"##,
        y + 9,
        xml(&cut(&n.name, 17))
    );
    let units = n.allocatable.max(n.allocated).max(0);
    for u in 0..units.min(MAX_UNITS) {
        let color = if u < n.allocated {
            ALLOCATED
        } else if n.cordoned {
            CORDONED
        } else {
            FREE
        };
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="{UNIT}" height="{UNIT}" fill="{color}"/>"#,
            x + 130 + u * (UNIT + 3),
            y
        );
    }
    if units > MAX_UNITS {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">+{}</text>"#,
            x + 130 + MAX_UNITS * (UNIT + 3),
            y + 9,
            units - MAX_UNITS
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::inventory;
    use crate::decode::pods::read_pods_str;
    use crate::model::operator::PolicyStatus;

    fn lab() -> Inventory {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/inventory/lab"
        );
        let path = std::path::PathBuf::from(format!("{dir}/nodes.json"));
        let nodes =
            crate::decode::dump::read_nodes(&crate::decode::dump::Source::from_arg(&path)).unwrap();
        let pods = read_pods_str(
            &std::fs::read_to_string(format!("{dir}/pods.json")).unwrap(),
            "pods",
        )
        .unwrap();
        inventory::build(&nodes, &pods, &PolicyStatus::not_read()).unwrap()
    }

    #[test]
    fn one_box_per_pool_and_a_square_per_unit() {
        let inv = lab();
        let s = svg(&inv);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.ends_with("</svg>\n"));
        for pool in ["container", "vm-passthrough", "vm-vgpu"] {
            assert!(s.contains(&format!(">{pool}</text>")), "{pool}");
        }
        assert!(s.contains(">nvidia.com/GA102GL_A10</text>"));
        assert!(s.contains(">4 allocatable, 1 allocated, 3 free</text>"));
        // lab-node-0: 4 units of nvidia.com/gpu, 1 allocated, 3 free.
        let node0 = s.find(">lab-node-0</text>").unwrap();
        let line: Vec<&str> = s[node0..].lines().skip(1).take(4).collect();
        assert_eq!(
            line.iter().filter(|l| l.contains(ALLOCATED)).count(),
            1,
            "{line:?}"
        );
        assert_eq!(line.iter().filter(|l| l.contains(FREE)).count(), 3);
        // The unservable demand (job-cross) in its own box.
        assert!(s.contains("Pending demand no pool can serve"));
        assert!(s.contains("gpu-vm/job-cross wants 1 × nvidia.com/gpu"));
        // Same inventory, same bytes.
        assert_eq!(s, svg(&lab()));
        // Every opened element is closed or self-closed.
        assert_eq!(s.matches("<text").count(), s.matches("</text>").count());
    }

    #[test]
    fn names_are_xml_escaped_and_cut() {
        assert_eq!(xml("a<b>&\"c'\u{1b}"), "a&lt;b&gt;&amp;&quot;c&apos;");
        // XML 1.0 forbids U+FFFE and U+FFFF anywhere; U+FFFD and astral characters stay.
        assert_eq!(
            xml("gpu\u{fffe}\u{ffff}\u{fffd}\u{1f600}\u{7f}\u{85}"),
            "gpu\u{fffd}\u{1f600}"
        );
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
    }
}
