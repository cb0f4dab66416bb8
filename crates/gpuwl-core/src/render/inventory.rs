//! Rendering an [`Inventory`]: a table (with proportional bars on a terminal), JSON, YAML,
//! CSV or a picture (SVG, [`crate::render::inventory_svg`]).

use std::fmt::Write as _;

use crate::render::{Column, esc, escape_serialized, fit_table, inventory_svg, quota, wrap_lines};

use crate::analysis::dra::DraInventory;
use crate::analysis::inventory::{self, Inventory, OperandReport, Row, UnservableCause};
use crate::analysis::verdict::PodClass;
use crate::model::dra::{API_VERSION, DraSource};
use crate::model::resource;

/// Output format of `gpuwl inventory` (`-o text|json|yaml|csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// A table, the unservable demand, and notes.
    #[default]
    Text,
    /// Pretty JSON of the whole inventory (camelCase keys).
    Json,
    /// YAML of the same document.
    Yaml,
    /// One CSV line per row, then one per unservable demand (pool `(no pool can serve)`, as in the table).
    Csv,
    /// A picture (SVG): a box per pool, a bar and per-node unit squares per GPU name, the
    /// demand no pool can serve below.
    Svg,
}

/// Text options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextOptions {
    /// Add the USE column: a bar per row of [`BAR_WIDTH`] characters for the row's own
    /// allocatable, `█` allocated, `░` free.
    pub bars: bool,
    /// The width to fit, in columns ([`crate::render::width`]): the USE bar goes first,
    /// then secondary columns go (a header is the same at every width); names are never split.
    pub width: usize,
}

/// Width, in characters, of a USE bar.
pub(crate) const BAR_WIDTH: usize = 10;

/// Renders `inv` in `format` (`opts` applies to text).
pub fn render(inv: &Inventory, format: Output, opts: TextOptions) -> String {
    match format {
        Output::Text => text(inv, opts),
        Output::Json => {
            let mut s = serde_json::to_string_pretty(inv)
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            escape_serialized(&s).into_owned()
        }
        Output::Yaml => escape_serialized(
            &serde_saphyr::to_string(inv).unwrap_or_else(|e| format!("error: {e:?}\n")),
        )
        .into_owned(),
        Output::Csv => csv(inv),
        Output::Svg => inventory_svg::svg(inv),
    }
}

/// A number of physical GPUs: `2`, `0.5`, `1.33`, or `?` when not derivable.
pub fn gpus(v: Option<f64>) -> String {
    match v {
        None => "?".into(),
        Some(g) if (g - g.round()).abs() < 1e-9 => format!("{}", g.round() as i64),
        Some(g) => {
            let s = format!("{g:.2}");
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        }
    }
}

/// The USE bar of `row`: [`BAR_WIDTH`] characters for the row's own allocatable, `█` the
/// allocated share, `░` the free share; empty when nothing is allocatable.
pub fn bar(row: &Row) -> String {
    if row.allocatable <= 0 {
        return String::new();
    }
    let used = ((row.allocated.clamp(0, row.allocatable) as f64 / row.allocatable as f64)
        * BAR_WIDTH as f64)
        .round() as usize;
    format!("{}{}", "█".repeat(used), "░".repeat(BAR_WIDTH - used))
}

/// The inventory table's columns, in order, each with ONE header at every width (a
/// narrow terminal drops columns, it never renames them); drop ranks: USE first, then
/// GPUS, CAP, NODES, USED (ALLOCATABLE − FREE).
fn columns() -> [Column; 10] {
    let c = |header, right, drop_rank| Column {
        header,
        right,
        drop_rank,
    };
    [
        c("POOL", false, 0),
        c("RESOURCE", false, 0),
        c("NODES", true, 2),
        c("CAP", true, 3),
        c("ALLOCATABLE", true, 0),
        c("USED", true, 1),
        c("FREE", true, 0),
        c("PEND", true, 0),
        c("GPUS", true, 4),
        c("USE", false, 5),
    ]
}

fn text(inv: &Inventory, opts: TextOptions) -> String {
    let mut out = String::new();
    let table_end;
    if inv.rows.is_empty() {
        let _ = writeln!(
            out,
            "No GPU nodes: none of the {} nodes carries the workload label or lists a GPU resource.",
            inv.nodes_read
        );
        table_end = 0;
    } else {
        let mut cols = columns().to_vec();
        let mut rows = table_rows(inv, opts.bars);
        if !opts.bars {
            cols.pop();
            for r in &mut rows {
                r.pop();
            }
        }
        let table = fit_table(&cols, &rows, opts.width);
        let _ = writeln!(out, "{table}");
        table_end = out.len();
        out.push_str(&format!("{}\n", legend(&table, &cols, opts)));
    }
    if !inv.unservable.is_empty() {
        unservable_text(&mut out, inv);
    }
    held_back_text(&mut out, inv);
    if let Some(p) = inv.cluster_policy.policy() {
        let _ = writeln!(
            out,
            "Pools follow ClusterPolicy {}: sandbox workloads {}.",
            p.name,
            if p.sandbox_enabled {
                format!("enabled, unlabelled nodes get {}", p.default_workload)
            } else {
                "disabled, every GPU node is container whatever its label".to_string()
            }
        );
    }
    if let Some(o) = &inv.operands {
        operands_text(&mut out, o);
    }
    if let Some(d) = &inv.dra {
        dra_text(&mut out, d, opts.width);
    }
    if let Some(q) = &inv.quota {
        quota::text(&mut out, q, opts.width);
    }
    if !inv.published_twice.is_empty() {
        let _ = writeln!(
            out,
            "\nnote: both tables count the same GPUs on {}: a device plugin advertises them and the DRA driver gpu.nvidia.com publishes them too, so a free unit above may be a device in use below (and the reverse); run one of the two per node (gpuwl check: dra-and-device-plugin).",
            esc(&inv.published_twice.join(", "))
        );
    }
    for r in inv.rows.iter().filter(|r| r.overcommitted > 0) {
        overcommitted_text(&mut out, r);
    }
    for o in &inv.orphans {
        let _ = writeln!(
            out,
            "\nnote: orphaned holders ({}): node {} no longer advertises {} ({}) while bound pods hold {} (its row counts them as allocated, FREE never below 0): {}; {}",
            if o.at_risk() {
                "holder-at-risk, an error of gpuwl check --effective"
            } else {
                "orphaned-holder"
            },
            esc(&o.node),
            esc(&o.resource),
            o.how(),
            o.units,
            esc(&o.holder_list()),
            esc(&o.consequence("there")),
        );
    }
    for n in &inv.notes {
        let _ = writeln!(out, "\nnote: {}", esc(n));
    }
    // Prose after the table wraps at the width; the table itself was fitted.
    let tail = out.split_off(table_end);
    out.push_str(&wrap_lines(&tail, opts.width));
    out
}

/// The pool table's cells, one row per pool × resource and one per GPU name no pool can
/// serve (with its pending units), in [`columns`] order; the `USE` cell is the bar, or
/// empty without `bars`.
fn table_rows(inv: &Inventory, bars: bool) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in &inv.rows {
        let nodes = if r.stale_nodes.is_empty() {
            r.nodes.to_string()
        } else {
            format!("{} (+{} stale 0)", r.nodes, r.stale_nodes.len())
        };
        rows.push(vec![
            esc(&r.pool),
            r.resource
                .as_deref()
                .map_or_else(|| "(no GPU resource)".into(), esc),
            nodes,
            r.capacity.to_string(),
            r.allocatable.to_string(),
            r.allocated.to_string(),
            r.free.to_string(),
            r.pending.to_string(),
            gpus(r.capacity_gpus),
            if bars { bar(r) } else { String::new() },
        ]);
    }
    for (resource, units, _) in inventory::unservable_by_resource(&inv.unservable) {
        rows.push(vec![
            "(no pool can serve)".to_string(),
            esc(&resource),
            "0".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            units.to_string(),
            "-".into(),
            String::new(),
        ]);
    }
    rows
}

/// The legend under the fitted `table`: the columns it shows explained, the bars' key, and
/// the columns of `cols` left out for the width (never dropped silently).
fn legend(table: &str, cols: &[Column], opts: TextOptions) -> String {
    // A header is a word of the table's header line, or of a record's `HEADER value` pairs
    // when the table is laid out as records (a terminal narrower than its columns).
    let shown = |h: &str| {
        table
            .lines()
            .take(2)
            .chain(table.lines().filter(|l| l.starts_with("  ")))
            .any(|l| l.split_whitespace().any(|w| w == h))
    };
    let mut parts = Vec::new();
    if shown("CAP") {
        parts.push("CAP capacity");
    }
    parts.push(if shown("USED") {
        "USED allocated (requests of bound pods), PEND units requested by unbound pods this pool could serve"
    } else {
        "PEND units requested by unbound pods this pool could serve"
    });
    if shown("GPUS") {
        parts.push("GPUS physical-GPU equivalents of capacity (? = not derivable)");
    }
    let mut legend = format!("{}.", parts.join("; "));
    if opts.bars && shown("USE") {
        legend.push_str(" USE: each row's own allocatable, █ allocated, ░ free.");
    }
    let dropped: Vec<&str> = cols
        .iter()
        .filter(|c| c.header != "USE" || opts.bars)
        .filter(|c| !shown(c.header))
        .map(|c| c.header)
        .collect();
    if !dropped.is_empty() {
        legend.push_str(&format!(
            " Not shown at {} columns: {} (widen the terminal, or -o json / -o csv).",
            opts.width,
            dropped.join(", ")
        ));
    }
    legend
}

/// The pending demand no node can serve, one entry per pod and name: why, the free units
/// beside it (out of reach, or of another name), names it may have meant, and the
/// scheduler's message.
fn unservable_text(out: &mut String, inv: &Inventory) {
    let _ = writeln!(
        out,
        "\nPending demand no node can serve, whatever is freed (the split):"
    );
    for u in &inv.unservable {
        let _ = writeln!(
            out,
            "  {} wants {} × {}: {}{}",
            esc(&u.kind.show(&u.pod)),
            u.units,
            esc(&u.resource),
            esc(&u.reason),
            if u.transient {
                format!(
                    " ({}: may pass on its own, e.g. a device plugin restarting or operands rolling)",
                    u.code
                )
            } else {
                String::new()
            }
        );
        let mut beside = Vec::new();
        for f in u.free_same_name.iter().filter(|f| f.free > 0) {
            beside.push(format!(
                "{} free {} in pool {} (out of the pod's reach)",
                f.free,
                esc(&f.resource),
                esc(&f.pool)
            ));
        }
        for f in u.free_other_names.iter().filter(|f| f.free > 0) {
            beside.push(format!(
                "{} free {} in pool {} (reachable, but another name)",
                f.free,
                esc(&f.resource),
                esc(&f.pool)
            ));
        }
        if !beside.is_empty() {
            let _ = writeln!(out, "    beside: {}", beside.join("; "));
        }
        if u.cause == UnservableCause::NotAdvertised && !u.did_you_mean.is_empty() {
            let _ = writeln!(out, "    did you mean: {}", esc(&u.did_you_mean.join(", ")));
        }
        if let Some(m) = &u.scheduler_message {
            let _ = writeln!(out, "    scheduler: {}", esc(m));
        }
    }
}

/// The note on an over-committed row `r` (more allocated than allocatable), and why node by
/// node: a node that stopped advertising the name while bound pods still hold it (its
/// device plugin left, or its workload config changed) is the usual cause; the kubelet does
/// not evict them.
fn overcommitted_text(out: &mut String, r: &Row) {
    let resource = r.resource.as_deref().map_or_else(String::new, esc);
    let _ = writeln!(
        out,
        "\nnote: over-committed: pool {} {resource}: {} allocated of {} allocatable ({} over); FREE shows 0.",
        esc(&r.pool),
        r.allocated,
        r.allocatable,
        r.overcommitted
    );
    for u in r.node_detail.iter().filter(|u| u.allocated > u.allocatable) {
        let why = if u.allocatable <= 0 {
            format!(
                "no longer advertises {resource} (allocatable {}) while bound pods hold {}: its device plugin left or its workload config changed; what that means for them is the orphaned-holders note below",
                u.allocatable.max(0),
                u.allocated
            )
        } else {
            format!(
                "advertises {} {resource} while bound pods hold {}: the plugin now offers fewer units than are in use",
                u.allocatable, u.allocated
            )
        };
        let _ = writeln!(out, "  node {} {why}.", esc(&u.name));
    }
}

/// The DRA part: a table per driver × device type × node pool, the count of physical GPUs,
/// the blocked devices, and notes. Nothing when DRA was skipped or the cluster has no
/// slices and no claims (the JSON keeps `dra` either way).
fn dra_text(out: &mut String, d: &DraInventory, width: usize) {
    let what = match &d.source {
        // Text stays as it was on clusters without DRA; JSON says why (`dra.source`).
        DraSource::Skipped(_) => return,
        DraSource::Denied(why) => {
            let _ = writeln!(
                out,
                "\nDRA devices ({}): not read: {} — DRA rows are missing from this inventory.",
                API_VERSION,
                esc(why)
            );
            return;
        }
        DraSource::Cluster if d.resource_slices == 0 && d.resource_claims == 0 => return,
        DraSource::File(f) => format!("from {}", esc(f)),
        DraSource::Cluster => "from the cluster".to_string(),
    };
    let _ = writeln!(
        out,
        "\nDRA devices ({}, {what}): {} DeviceClasses, {} ResourceSlices, {} ResourceClaims",
        API_VERSION, d.device_classes, d.resource_slices, d.resource_claims
    );
    if d.rows.is_empty() {
        let _ = writeln!(out, "No DRA devices published.");
    } else {
        let c = |header, right, drop_rank| Column {
            header,
            right,
            drop_rank,
        };
        // One header per column at every width, as in the pool table (USED, PEND).
        let cols = [
            c("DRIVER", false, 0),
            c("TYPE", false, 0),
            c("POOL", false, 0),
            c("NODES", true, 3),
            c("DEVICES", true, 0),
            c("GPUS", true, 2),
            c("USED", true, 1),
            c("BLOCKED", true, 0),
            c("FREE", true, 0),
            c("PEND", true, 0),
        ];
        let rows: Vec<Vec<String>> = d
            .rows
            .iter()
            .map(|r| {
                vec![
                    esc(&r.driver),
                    esc(&r.device_type),
                    esc(&r.pool),
                    r.nodes.to_string(),
                    r.devices.to_string(),
                    r.physical.to_string(),
                    r.allocated.to_string(),
                    r.blocked.to_string(),
                    r.free.to_string(),
                    r.pending.to_string(),
                ]
            })
            .collect();
        let table = fit_table(&cols, &rows, width);
        let _ = writeln!(out, "{table}");
        let header = table.lines().nth(1).unwrap_or_default().to_owned();
        let dropped: Vec<&str> = cols
            .iter()
            .map(|c| c.header)
            .filter(|h| !header.split_whitespace().any(|w| w == *h))
            .collect();
        let _ = writeln!(
            out,
            "{} physical GPUs behind {} devices, each counted once ({} in use); USED: allocated; BLOCKED: not allocated, but a sibling device consumed the shared counter; PEND: devices unallocated claims ask for.{}",
            d.physical_gpus,
            d.rows.iter().map(|r| r.devices).sum::<usize>(),
            d.physical_in_use,
            if dropped.is_empty() {
                String::new()
            } else {
                format!(
                    " Not shown at {width} columns: {} (widen the terminal, or -o json).",
                    dropped.join(", ")
                )
            }
        );
    }
    for b in &d.blocked {
        let _ = writeln!(
            out,
            "  {} ({}{}): {}",
            esc(&b.device),
            esc(&b.device_type),
            b.node
                .as_deref()
                .map(|n| format!(" on {}", esc(n)))
                .unwrap_or_default(),
            esc(&b.reason)
        );
    }
    for n in &d.notes {
        let _ = writeln!(out, "note: {}", esc(n));
    }
}

/// Held-back units summed per class × resource name, in class order then first-seen
/// order: `(class, resource, units)`; saturating.
fn held_back_by_class(inv: &Inventory) -> Vec<(PodClass, String, i64)> {
    let mut out: Vec<(PodClass, String, i64)> = Vec::new();
    for h in &inv.held_back {
        for (r, u) in &h.resources {
            match out.iter_mut().find(|(c, x, _)| *c == h.class && x == r) {
                Some(e) => e.2 = e.2.saturating_add(*u),
                None => out.push((h.class, r.clone(), *u)),
            }
        }
    }
    out.sort_by_key(|(c, _, _)| *c);
    out
}

/// The text sections of the pending GPU pods that are neither demand nor unservable
/// ([`Inventory::held_back`]), and of the free units on cordoned nodes: each apart from
/// the table, so a drain never reads as free capacity or as the split.
fn held_back_text(out: &mut String, inv: &Inventory) {
    use std::fmt::Write as _;
    let heading = |c: PodClass| match c {
        PodClass::Blocked => {
            "Pending GPU pods kept off nodes that offer their names by a cordon, a taint or node maintenance (not the split):"
        }
        PodClass::Gated => {
            "Pending GPU pods held by scheduling gates (not scheduled until the gates are removed):"
        }
        PodClass::OtherResource => {
            "Pending GPU pods short of another resource (GPU units free: not GPU demand):"
        }
        _ => "Pending GPU pods the API server would refuse:",
    };
    for class in PodClass::ALL {
        let pods: Vec<_> = inv.held_back.iter().filter(|h| h.class == class).collect();
        if pods.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}", heading(class));
        for h in pods {
            let wants = h
                .resources
                .iter()
                .map(|(r, u)| format!("{u} × {}", esc(r)))
                .collect::<Vec<_>>()
                .join(", ");
            let by = h.by.iter().map(|b| esc(b)).collect::<Vec<_>>().join(", ");
            let by = match class {
                PodClass::Blocked if !by.is_empty() => format!(": kept off {by}"),
                PodClass::Gated => format!(": gates {by}"),
                PodClass::OtherResource if !by.is_empty() => {
                    format!(": GPU units free on {by}, another resource short")
                }
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "  {} wants {wants} ({}){by}",
                esc(&h.kind.show(&h.pod)),
                h.code
            );
        }
    }
    let cordoned: Vec<String> = inv
        .rows
        .iter()
        .filter(|r| r.cordoned_free > 0)
        .map(|r| {
            let nodes: Vec<&str> = r
                .node_detail
                .iter()
                .filter(|u| u.cordoned && u.allocatable > u.allocated)
                .map(|u| u.name.as_str())
                .collect();
            format!(
                "{} {} in pool {} on {}",
                r.cordoned_free,
                esc(r.resource.as_deref().unwrap_or("")),
                esc(&r.pool),
                esc(&nodes.join(", "))
            )
        })
        .collect();
    if !cordoned.is_empty() {
        let _ = writeln!(
            out,
            "\nCordoned: {} free but on cordoned nodes, not counted as FREE (kubectl uncordon NODE gives them back).",
            cordoned.join("; ")
        );
    }
}

/// One CSV field: escaped as text is (controls, line breaks and bidi characters from a
/// node's names never reach a terminal or a spreadsheet raw); a cell a spreadsheet would
/// run as a formula (first character `=`, `+`, `-`, `@`, tab or CR, and not a number) gets
/// a leading `'` and is quoted, as OWASP's "CSV Injection" advises; then quoted when
/// needed.
pub(crate) fn csv_field(s: &str) -> String {
    let s = crate::text::esc(s);
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err();
    if formula {
        format!("\"'{}\"", s.replace('"', "\"\""))
    } else if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv(inv: &Inventory) -> String {
    let mut out = String::from(
        "pool,origin,resource,class,nodes,stale_nodes,capacity,allocatable,allocated,free,pending,capacity_gpus,free_gpus,cordoned_free\n",
    );
    let opt = |v: Option<f64>| v.map(|g| gpus(Some(g))).unwrap_or_default();
    for r in &inv.rows {
        let fields = [
            r.pool.clone(),
            serde_json::to_value(r.origin)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            r.resource.clone().unwrap_or_default(),
            r.class.map(|c| c.code().to_owned()).unwrap_or_default(),
            r.nodes.to_string(),
            r.stale_nodes.len().to_string(),
            r.capacity.to_string(),
            r.allocatable.to_string(),
            r.allocated.to_string(),
            r.free.to_string(),
            r.pending.to_string(),
            opt(r.capacity_gpus),
            opt(r.free_gpus),
            r.cordoned_free.to_string(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        let _ = writeln!(out, "{}", line.join(","));
    }
    for (resource, units, _) in inventory::unservable_by_resource(&inv.unservable) {
        let _ = writeln!(
            out,
            "(no pool can serve),,{},{},0,0,,,,,{},,,",
            csv_field(&resource),
            resource::classify(&resource).code(),
            units
        );
    }
    // Pending GPU pods that are not demand of a pool (blocked, gated, short of another
    // resource, invalid): one row per class × name, their units in `pending`.
    for (class, resource, units) in held_back_by_class(inv) {
        let _ = writeln!(
            out,
            "(held back: {class}),,{},{},0,0,,,,,{units},,,",
            csv_field(&resource),
            resource::classify(&resource).code(),
        );
    }
    // DRA rows in the same columns: origin `dra`, resource `<driver>/<device type>`, class
    // `dra-device`; capacity and allocatable are the devices published, free excludes the
    // devices a sibling's shared counter blocks, capacity_gpus the physical GPUs behind them.
    if let Some(d) = &inv.dra {
        for r in &d.rows {
            let fields = [
                r.pool.clone(),
                "dra".to_owned(),
                format!("{}/{}", r.driver, r.device_type),
                "dra-device".to_owned(),
                r.nodes.to_string(),
                "0".to_owned(),
                r.devices.to_string(),
                r.devices.to_string(),
                r.allocated.to_string(),
                r.free.to_string(),
                r.pending.to_string(),
                r.physical.to_string(),
                String::new(),
                String::new(),
            ];
            let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            let _ = writeln!(out, "{}", line.join(","));
        }
    }
    out
}

/// The operand-health lines of the text inventory: one summary line, then one line per
/// GPU node whose device plugin or another operand is not ready.
fn operands_text(out: &mut String, o: &OperandReport) {
    use crate::model::operand::OperandHealth;
    use std::fmt::Write as _;
    let state = o
        .cluster_policy_state
        .as_deref()
        .map(|s| format!("; ClusterPolicy state {}", esc(s)))
        .unwrap_or_default();
    if o.source.status == "unreadable" {
        let _ = writeln!(
            out,
            "GPU Operator operands: not read ({}){state}.",
            o.source.note.as_deref().unwrap_or("")
        );
        return;
    }
    if o.pods == 0 {
        let _ = writeln!(
            out,
            "GPU Operator operands: no operand pods found on {} GPU node(s) (GPU Operator not installed, or its namespace not in the pod dump){state}.",
            o.nodes.len()
        );
        return;
    }
    let _ = writeln!(
        out,
        "GPU Operator operands: {} pod(s) on {} GPU node(s), {} not ready{state}.",
        o.pods,
        o.nodes.len(),
        o.not_ready
    );
    for n in &o.nodes {
        let bad: Vec<String> = n
            .pods
            .iter()
            .filter(|p| {
                p.health != OperandHealth::Ready
                    && n.plugin_problem
                        .as_deref()
                        .is_none_or(|m| !m.contains(&p.pod))
            })
            .map(|p| format!("{} {}", p.operand, p.health.as_str()))
            .collect();
        let mut parts = Vec::new();
        if let Some(m) = &n.plugin_problem {
            parts.push(format!("plugin not ready: {m}"));
        }
        if !bad.is_empty() {
            parts.push(bad.join(", "));
        }
        if !parts.is_empty() {
            let _ = writeln!(out, "  {}: {}", esc(&n.node), esc(&parts.join("; ")));
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_csv_field_never_carries_a_control_or_bidi_character() {
        let f = csv_field("nvidia.com/A10\u{1b}[31m\u{202e}\nMISMATCH=forged\r");
        assert!(
            !f.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{f:?}"
        );
        assert!(f.contains("\\nMISMATCH=forged"), "{f}");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }

    #[test]
    fn a_csv_cell_a_spreadsheet_would_run_is_neutralised() {
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\")"),
            "\"'=HYPERLINK(\"\"http://x\"\")\""
        );
        assert_eq!(csv_field("+1+cmd"), "\"'+1+cmd\"");
        assert_eq!(csv_field("@SUM(A1)"), "\"'@SUM(A1)\"");
        assert_eq!(csv_field("-2+3"), "\"'-2+3\"");
        // A tab or CR is escaped as text first, so it can no longer start a cell raw.
        assert_eq!(csv_field("\t=1"), "\\t=1");
        // Numbers stay numbers; a dash inside a name is harmless.
        assert_eq!(csv_field("-1.5"), "-1.5");
        assert_eq!(csv_field("gpu-a"), "gpu-a");
    }
    use super::*;

    #[test]
    fn the_legend_explains_the_columns_shown_and_names_those_left_out() {
        let cols = columns();
        let table = "\nPOOL  RESOURCE  NODES  ALLOCATABLE  FREE  PEND\n";
        let opts = |bars| TextOptions { bars, width: 60 };
        assert_eq!(
            legend(table, &cols, opts(false)),
            "PEND units requested by unbound pods this pool could serve. Not shown at 60 columns: CAP, USED, GPUS (widen the terminal, or -o json / -o csv)."
        );
        let wide = "\nPOOL  RESOURCE  NODES  CAP  ALLOCATABLE  USED  FREE  PEND  GPUS  USE\n";
        assert_eq!(
            legend(wide, &cols, opts(true)),
            "CAP capacity; USED allocated (requests of bound pods), PEND units requested by unbound pods this pool could serve; GPUS physical-GPU equivalents of capacity (? = not derivable). USE: each row's own allocatable, █ allocated, ░ free."
        );
    }

    #[test]
    fn gpu_numbers() {
        assert_eq!(gpus(None), "?");
        assert_eq!(gpus(Some(2.0)), "2");
        assert_eq!(gpus(Some(1.5)), "1.5");
        assert_eq!(gpus(Some(4.0 / 3.0)), "1.33");
    }
}
