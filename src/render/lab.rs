//! The text `gpuwl lab` prints after its steps: the summary table, notes, the inventory
//! and the explanation of job-cross, the DRA paragraph and where the result files are.

use std::fmt::Write as _;
use std::path::Path;

use crate::lab::LabReport;

/// The lab's summary for a terminal `width` columns wide, files under `root`.
pub fn summary(report: &LabReport, root: &Path, width: usize) -> String {
    let mut out = String::new();
    out.push('\n');
    let _ = writeln!(out, "{}", crate::lab::summary_table(report));
    let extra = report
        .inventory
        .nodes_read
        .saturating_sub(report.plan.nodes.len());
    if extra > 0 {
        // A reused cluster may hold nodes of earlier experiments: say so, since they
        // change the scheduler's counts, the inventory and the checker's OK=<n>.
        let _ = write!(
            out,
            "{}",
            crate::render::wrap_lines(
                &format!(
                    "note: the cluster has {extra} node(s) besides the lab's {}; they take part in scheduling, the inventory and the checker's count (a fresh cluster: gpuwl cluster down, then gpuwl lab).\n",
                    report.plan.nodes.len()
                ),
                width
            )
        );
    }
    for s in crate::lab::split_sentences(&report.inventory) {
        let _ = write!(
            out,
            "{}",
            crate::render::wrap_lines(&format!("{s}.\n"), width)
        );
    }
    let _ = writeln!(out, "\nGPU inventory by pool (gpuwl inventory):");
    let _ = write!(
        out,
        "{}",
        crate::render::inventory::render(
            &report.inventory,
            crate::render::inventory::Output::Text,
            crate::render::inventory::TextOptions {
                bars: true,
                width: crate::render::width(),
            },
        )
    );
    let _ = writeln!(
        out,
        "\nWhy job-cross is Pending (gpuwl explain pod gpu-vm/job-cross):"
    );
    let _ = write!(
        out,
        "{}",
        crate::render::explain::render(&report.cross_explanation, crate::render::Format::Text)
    );
    if let Some(d) = &report.dra {
        let cross = d
            .pods
            .iter()
            .find(|(p, _)| p == "job-cross")
            .and_then(|(_, n)| n.as_deref());
        let _ = write!(
            out,
            "{}",
            crate::render::wrap_lines(
                &format!(
                    "\nWith DRA (step 9, out/09-dra.txt): {}; {}.\n",
                    match cross {
                        Some(n) => format!(
                            "the cross request is served on {n}, because gpu and vfio devices are offered from one pool of physical GPUs (one shared counter each) instead of by a workload label"
                        ),
                        None => "the cross request is still not served".to_string(),
                    },
                    d.pool_line
                ),
                width
            )
        );
    }
    let _ = writeln!(out, "\nResult files: {}/{{out,bin,k8s}}", root.display());
    out
}
