//! The text `gpuwl lab` prints after its steps: the summary table, notes, the inventory
//! and the explanation of job-cross, the DRA paragraph and where the result files are.

use std::fmt::Write as _;
use std::path::Path;

use crate::lab::LabReport;
use gpuwl_core::analysis::inventory::Inventory;
use gpuwl_core::render::inventory::{self, Output, TextOptions};
use gpuwl_core::render::{self, Format, explain};

/// The lab's summary for a terminal `width` columns wide, files under `root`.
pub fn summary(report: &LabReport, root: &Path, width: usize) -> String {
    let mut out = String::new();
    out.push('\n');
    let _ = writeln!(out, "{}", summary_table(report));
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
            render::wrap_lines(
                &format!(
                    "note: the cluster has {extra} node(s) besides the lab's {}; they take part in scheduling, the inventory and the checker's count (a fresh cluster: gpuwl cluster down, then gpuwl lab).\n",
                    report.plan.nodes.len()
                ),
                width
            )
        );
    }
    for s in split_sentences(&report.inventory) {
        let _ = write!(out, "{}", render::wrap_lines(&format!("{s}.\n"), width));
    }
    let _ = writeln!(out, "\nGPU inventory by pool (gpuwl inventory):");
    let _ = write!(
        out,
        "{}",
        inventory::render(
            &report.inventory,
            Output::Text,
            TextOptions {
                bars: true,
                width: render::width(),
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
        explain::render(&report.cross_explanation, Format::Text)
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
            render::wrap_lines(
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
    if let Some(jobs) = &report.kueue {
        let said: Vec<String> = jobs
            .iter()
            .map(|o| match (&o.flavor, &o.node) {
                (Some(f), Some(n)) => format!(
                    "{} ({}) is admitted in flavor {f} and runs on {n}",
                    o.job.name, o.job.resource
                ),
                _ => format!(
                    "{} ({}) is held by Kueue: {}",
                    o.job.name, o.job.resource, o.message
                ),
            })
            .collect();
        let _ = write!(
            out,
            "{}",
            render::wrap_lines(
                &format!(
                    "\nWith Kueue (out/kueue.txt): {}. The passthrough flavor's quota is on nvidia.com/gpu, a name its nodes never advertise: gpuwl check --effective reports it (kueue-quota-not-advertised).\n",
                    render::esc(&said.join("; "))
                ),
                width
            )
        );
    }
    let _ = writeln!(out, "\nResult files: {}/{{out,bin,k8s}}", root.display());
    out
}

/// One sentence per pending pod that no pool can serve, from the inventory, e.g.
/// `job-cross waits on the vm-passthrough pool while 3 nvidia.com/gpu are free on container
/// nodes`: the pools its selector allows, and the free units of the same resource name in
/// pools it cannot reach.
pub fn split_sentences(inv: &Inventory) -> Vec<String> {
    inv.unservable
        .iter()
        .map(|u| {
            let pod = u.pod.rsplit('/').next().unwrap_or(&u.pod);
            let allowed = if u.allowed_pools.is_empty() {
                "no".to_string()
            } else {
                u.allowed_pools.join("/")
            };
            let free: i64 = u.free_same_name.iter().map(|f| f.free).sum();
            let mut pools: Vec<&str> = u.free_same_name.iter().map(|f| f.pool.as_str()).collect();
            pools.dedup();
            if pools.is_empty() {
                format!(
                    "{pod} waits on the {allowed} pool: no node it may use advertises {}",
                    u.resource
                )
            } else {
                format!(
                    "{pod} waits on the {allowed} pool while {free} {} are free on {} nodes",
                    u.resource,
                    pools.join("/")
                )
            }
        })
        .collect()
}

/// The summary table: node, label, advertised resource and amount, pods placed.
pub(crate) fn summary_table(report: &LabReport) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::UTF8_BORDERS_ONLY);
    t.set_header(["NODE", "LABEL", "ADVERTISES", "PODS PLACED"]);
    for n in &report.plan.nodes {
        let placed: Vec<&str> = report
            .pods
            .iter()
            .filter(|o| o.node.as_deref() == Some(n.node.as_str()))
            .map(|o| o.name.as_str())
            .collect();
        t.add_row([
            n.node.clone(),
            n.config.as_str().to_string(),
            format!("{}={}", n.resource, n.amount),
            if placed.is_empty() {
                "-".into()
            } else {
                placed.join(", ")
            },
        ]);
    }
    t
}
