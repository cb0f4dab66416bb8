//! The quota layer's inventory as text ([`crate::analysis::kueue_usage::QuotaInventory`]):
//! the table per ClusterQueue × flavor × GPU name, the quota its flavor's nodes cannot
//! serve, and the waiting workloads with explain's quota cause. `inventory` and `triage`
//! print it.

use std::fmt::Write as _;

use crate::analysis::kueue_usage::{PendingWorkload, QuotaInventory};
use crate::model::kueue::milli_str;
use crate::render::{Column, esc, fit_table};

/// The cells of one row, in [`columns`] order.
fn cells(q: &QuotaInventory) -> Vec<Vec<String>> {
    q.rows
        .iter()
        .map(|r| {
            vec![
                esc(&r.cluster_queue),
                esc(&r.flavor),
                esc(&r.resource),
                milli_str(r.nominal_milli),
                r.borrowing_limit_milli
                    .map_or_else(|| "-".to_owned(), milli_str),
                milli_str(r.reserved_milli),
                r.admitted.len().to_string(),
                r.pending.len().to_string(),
                r.nodes.map_or_else(|| "?".to_owned(), |n| n.to_string()),
                r.advertised
                    .map_or_else(|| "?".to_owned(), |n| n.to_string()),
            ]
        })
        .collect()
}

/// The table's columns: drop ranks BORROW first, then NODES, ADMITTED.
fn columns() -> [Column; 10] {
    let c = |header, right, drop_rank| Column {
        header,
        right,
        drop_rank,
    };
    [
        c("CLUSTERQUEUE", false, 0),
        c("FLAVOR", false, 0),
        c("RESOURCE", false, 0),
        c("NOMINAL", true, 0),
        c("BORROW", true, 3),
        c("RESERVED", true, 0),
        c("ADMITTED", true, 1),
        c("WAITING", true, 0),
        c("NODES", true, 2),
        c("ADVERTISED", true, 0),
    ]
}

/// What each column shown says, and the columns `width` left out.
fn legend(table: &str, cols: &[Column], width: usize) -> String {
    const SAYS: [(&str, &str); 7] = [
        ("NOMINAL", "nominalQuota"),
        ("BORROW", "borrowingLimit (- none)"),
        ("RESERVED", "reserved by admitted workloads"),
        ("ADMITTED", "admitted workloads holding it"),
        (
            "WAITING",
            "workloads Kueue holds for this flavor (or would admit there)",
        ),
        ("NODES", "nodes the flavor selects"),
        (
            "ADVERTISED",
            "units of the name those nodes advertise (? no nodes read)",
        ),
    ];
    let header = table.lines().nth(1).unwrap_or_default();
    let shown = |h: &str| header.split_whitespace().any(|w| w == h);
    let said: Vec<String> = SAYS
        .iter()
        .filter(|(h, _)| shown(h))
        .map(|(h, t)| format!("{h} {t}"))
        .collect();
    let dropped: Vec<&str> = cols
        .iter()
        .map(|c| c.header)
        .filter(|h| !shown(h))
        .collect();
    let mut s = format!("{}.", said.join("; "));
    if !dropped.is_empty() {
        s.push_str(&format!(
            " Not shown at {width} columns: {} (widen the terminal, or -o json).",
            dropped.join(", ")
        ));
    }
    s
}

/// `gpu-kueue/job-a (Job/job-a) kueue-quota-exhausted: <message>`.
fn waiting_line(p: &PendingWorkload) -> String {
    format!(
        "  {}{} {}: {}",
        esc(&p.workload),
        p.owner
            .as_deref()
            .map(|o| format!(" ({})", esc(o)))
            .unwrap_or_default(),
        p.cause.as_str(),
        esc(&p.message)
    )
}

/// Appends the quota layer to `out` (a blank line first), the table fitted to `width`.
pub fn text(out: &mut String, q: &QuotaInventory, width: usize) {
    let waiting = q.rows.iter().map(|r| r.pending.len()).sum::<usize>() + q.unplaced.len();
    let _ = writeln!(
        out,
        "\nKueue quota (kueue.x-k8s.io): {} ClusterQueue(s), {} flavor(s), {} admitted and {} waiting GPU workload(s)",
        q.cluster_queues, q.flavors, q.admitted_workloads, waiting
    );
    if q.rows.is_empty() {
        let _ = writeln!(out, "No ClusterQueue gives quota on a GPU name.");
    } else {
        let cols = columns();
        let table = fit_table(&cols, &cells(q), width);
        let _ = writeln!(out, "{table}");
        let _ = writeln!(out, "{}", legend(&table, &cols, width));
    }
    for r in q
        .rows
        .iter()
        .filter(|r| r.nominal_milli > 0 && r.served() == Some(false))
    {
        let offered = if r.offered.is_empty() {
            "no GPU name".to_owned()
        } else {
            r.offered
                .iter()
                .map(|(n, c)| format!("{n} ×{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "note: ClusterQueue {} has quota {} {} in flavor {}, but its {} node(s) advertise none of it (they offer {}): a workload admitted there waits at the scheduler (kueue-quota-not-advertised).",
            esc(&r.cluster_queue),
            milli_str(r.nominal_milli),
            esc(&r.resource),
            esc(&r.flavor),
            r.nodes.unwrap_or(0),
            esc(&offered)
        );
    }
    if waiting > 0 {
        let _ = writeln!(
            out,
            "Waiting GPU workloads (gpuwl explain job's quota cause):"
        );
        let mut seen = std::collections::BTreeSet::new();
        for p in q.rows.iter().flat_map(|r| &r.pending).chain(&q.unplaced) {
            if seen.insert(&p.workload) {
                let _ = writeln!(out, "{}", waiting_line(p));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::kueue::QuotaCause;
    use crate::analysis::kueue_usage::QuotaRow;
    use std::collections::BTreeMap;

    #[test]
    fn the_misnamed_row_is_a_note_and_cluster_text_is_escaped() {
        let q = QuotaInventory {
            flavors: 1,
            cluster_queues: 1,
            admitted_workloads: 0,
            rows: vec![QuotaRow {
                cluster_queue: "q\u{1b}[31m".into(),
                cohort: None,
                flavor: "vm-passthrough".into(),
                resource: "nvidia.com/gpu".into(),
                nominal_milli: 2000,
                borrowing_limit_milli: None,
                reserved_milli: 0,
                admitted: vec![],
                pending: vec![PendingWorkload {
                    workload: "ns/w".into(),
                    owner: Some("Job/w".into()),
                    cause: QuotaCause::FlavorCannotServe,
                    cluster_queue: Some("q".into()),
                    requests_milli: BTreeMap::new(),
                    message: "why".into(),
                }],
                nodes: Some(1),
                advertised: Some(0),
                offered: [("nvidia.com/GA102GL_A10".to_owned(), 2)]
                    .into_iter()
                    .collect(),
            }],
            unplaced: vec![],
        };
        let mut out = String::new();
        text(&mut out, &q, 200);
        assert!(!out.contains('\u{1b}'), "{out}");
        assert!(
            out.contains("note: ClusterQueue q\\u{1b}[31m has quota 2 nvidia.com/gpu in flavor vm-passthrough, but its 1 node(s) advertise none of it (they offer nvidia.com/GA102GL_A10 ×2)"),
            "{out}"
        );
        assert!(
            out.contains("  ns/w (Job/w) kueue-flavor-cannot-serve: why\n"),
            "{out}"
        );
        assert!(out.contains("1 ClusterQueue(s), 1 flavor(s), 0 admitted and 1 waiting"));
        assert!(
            out.contains("NOMINAL nominalQuota; BORROW borrowingLimit (- none);"),
            "{out}"
        );
        let mut narrow = String::new();
        text(&mut narrow, &q, 100);
        assert!(
            narrow.contains("Not shown at 100 columns: BORROW, ADMITTED, NODES"),
            "{narrow}"
        );
    }
}
