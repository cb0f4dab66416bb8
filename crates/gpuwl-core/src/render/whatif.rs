//! Rendering of `gpuwl whatif` and `gpuwl plan`: text, JSON, YAML. Every string that came
//! from the cluster or a file is escaped ([`esc`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::analysis::twin::plan::Proposal;
use crate::analysis::twin::report::{NodeChange, Placed, PodRef, PoolDelta, Report, Verdict};
use crate::render::{Column, Format, esc, esc_lines, escape_serialized, fit_table};

/// `value` as pretty JSON or YAML (escaped); `None` for text.
pub fn serialized<T: Serialize>(value: &T, format: Format) -> Option<String> {
    match format {
        Format::Text => None,
        Format::Json => {
            let mut s = serde_json::to_string_pretty(value)
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            Some(escape_serialized(&s).into_owned())
        }
        Format::Yaml => Some(
            escape_serialized(
                &serde_saphyr::to_string(value).unwrap_or_else(|e| format!("error: {e:?}\n")),
            )
            .into_owned(),
        ),
    }
}

fn requests(r: &BTreeMap<String, i64>) -> String {
    r.iter()
        .map(|(k, v)| format!("{} {v}", esc(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn who(p: &PodRef) -> String {
    match &p.vmi {
        Some(v) => format!("{} (VMI {})", esc(&p.pod), esc(v)),
        None if p.kind != "Pod" => format!("{} ({})", esc(&p.pod), p.kind),
        None => esc(&p.pod),
    }
}

fn placed(out: &mut String, v: &[Placed]) {
    if v.is_empty() {
        out.push_str("  (none)\n");
    }
    for p in v {
        let _ = writeln!(
            out,
            "  {}  {} → {}",
            who(&p.pod),
            requests(&p.pod.requests),
            esc(&p.node)
        );
    }
}

fn units(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{} {v}", esc(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whatif report as text (`width`: the terminal's, for the inventory table): the
/// verdict and the relabels, then per relabelled node, the pods now scheduled, still
/// pending and disrupted, the inventory before and after, the commands, and the twin.
pub fn report_text(r: &Report, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Verdict: {}", r.verdict.summary);
    let _ = writeln!(
        out,
        "What if: {} (source: {}; twin: {} GPU node(s), {} bound pod(s), {} pending GPU pod(s); {:.1} s)",
        r.changes
            .iter()
            .map(|c| format!(
                "{} {} → {}",
                esc(&c.relabel.node),
                c.from
                    .as_deref()
                    .map(esc)
                    .unwrap_or_else(|| "(no label)".into()),
                c.relabel.config
            ))
            .collect::<Vec<_>>()
            .join(", "),
        esc(&r.source),
        r.twin.nodes,
        r.twin.bound_pods,
        r.twin.pending_pods,
        r.twin.seconds
    );
    out.push_str("\nRelabelled nodes\n");
    for c in &r.changes {
        change_text(&mut out, c);
    }
    out.push_str("\nNow scheduled (by the twin's kube-scheduler)\n");
    placed(&mut out, &r.now_scheduled);
    out.push_str("\nStill pending after the relabel (the twin's scheduler; cause and fix by explain on the twin)\n");
    if r.still_pending.is_empty() {
        out.push_str("  (none)\n");
    }
    for p in &r.still_pending {
        let _ = writeln!(out, "  {}  {}", who(&p.pod), requests(&p.pod.requests));
        if let Some(m) = &p.scheduler_message {
            let _ = writeln!(out, "    scheduler: {}", esc(m));
        }
        let _ = writeln!(out, "    cause ({}): {}", p.cause_code, esc(&p.cause));
        let _ = writeln!(out, "    fix: {}", esc_lines(&p.fix, "      "));
    }
    out.push_str("\nDisrupted (running pods whose node no longer offers the name they hold)\n");
    if r.disrupted.is_empty() {
        out.push_str("  (none)\n");
    }
    for d in &r.disrupted {
        let _ = writeln!(
            out,
            "  {}: {} holds {} {} (the node offers {} → {})",
            esc(&d.node),
            who(&d.pod),
            esc(&d.resource),
            d.pod.requests.get(&d.resource).copied().unwrap_or(0),
            d.before,
            d.after
        );
    }
    if !r.placed_without_relabel.is_empty() {
        out.push_str(
            "\nPlaced by the twin even without the relabel (the cluster's scheduler has not \
             placed them: it may not have retried yet, or something the twin does not copy \
             keeps them)\n",
        );
        placed(&mut out, &r.placed_without_relabel);
    }
    out.push_str(
        "\nInventory, before → after (pool × GPU name; rows that change or hold demand)\n",
    );
    if r.inventory.is_empty() {
        out.push_str("  (no change)\n");
    } else {
        for l in inventory_table(&r.inventory, width).lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    out.push_str("\nTo apply for real\n");
    for c in &r.commands {
        let _ = writeln!(out, "  {}", esc(c));
    }
    twin_text(&mut out, r);
    out
}

/// One relabelled node: each GPU name it lists before or after with its units moving, how
/// its GPUs were worked out, and notes.
fn change_text(out: &mut String, c: &NodeChange) {
    let names: std::collections::BTreeSet<&String> = c
        .advertised_before
        .keys()
        .chain(c.advertised_after.keys())
        .collect();
    let moved: Vec<String> = names
        .iter()
        .map(|k| {
            let (a, b) = (
                c.advertised_before.get(*k).copied().unwrap_or(0),
                c.advertised_after.get(*k).copied().unwrap_or(0),
            );
            format!("{} {a} → {b}", esc(k))
        })
        .collect();
    let _ = writeln!(
        out,
        "  {}: {}",
        esc(&c.relabel.node),
        if moved.is_empty() {
            "no GPU name before or after".to_string()
        } else {
            moved.join(", ")
        }
    );
    let _ = writeln!(out, "    GPUs: {}", esc(&c.hardware.join("; ")));
    for n in &c.notes {
        let _ = writeln!(out, "    note: {}", esc(n));
    }
}

/// The inventory rows before → after as a table fitted to `width` (a number that did not
/// change is shown once).
fn inventory_table(inventory: &[PoolDelta], width: usize) -> String {
    let col = |header, right| Column {
        header,
        right,
        drop_rank: 0,
    };
    let cols = [
        col("POOL", false),
        col("RESOURCE", false),
        col("ALLOCATABLE", true),
        col("FREE", true),
        col("PEND", true),
    ];
    let arrow = |(a, b): (i64, i64)| {
        if a == b {
            a.to_string()
        } else {
            format!("{a} → {b}")
        }
    };
    let rows: Vec<Vec<String>> = inventory
        .iter()
        .map(|d| {
            vec![
                esc(&d.pool),
                esc(&d.resource),
                arrow(d.allocatable),
                arrow(d.free),
                arrow(d.pending),
            ]
        })
        .collect();
    fit_table(&cols, &rows, width)
}

/// The twin's own facts: its name and whether it was kept, how names were worked out, what
/// it does not copy, what was left out, and notes.
fn twin_text(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "\nThe twin: local cluster {}{}; names after the relabel by {}; {}.",
        esc(&r.twin.cluster),
        if r.twin.kept {
            " (kept running: --keep)"
        } else {
            " (deleted)"
        },
        r.twin.names_by,
        r.twin.not_copied
    );
    if r.twin.cpu_nodes_left_out > 0 {
        let _ = writeln!(
            out,
            "CPU-only nodes left out: {} (no GPU pod can run there).",
            r.twin.cpu_nodes_left_out
        );
    }
    for l in &r.twin.left_out {
        let _ = writeln!(out, "left out: {}", esc(l));
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {}", esc(n));
    }
}

/// A plan and its verification, as `gpuwl plan` prints and serializes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// The one-line judgement: the twin's ([`Report::verdict`]), else the model's.
    pub verdict: Verdict,
    /// The model's proposal.
    pub proposal: Proposal,
    /// Whether the twin confirmed it: every pod a step is meant for was placed.
    pub verified: bool,
    /// Pods a step was meant for that the twin left pending.
    pub not_confirmed: Vec<String>,
    /// The twin's whatif of the proposal (absent when nothing was proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whatif: Option<Report>,
}

/// The plan as text.
pub fn plan_text(p: &PlanReport, width: usize) -> String {
    let mut out = String::new();
    let pr = &p.proposal;
    let _ = writeln!(out, "Verdict: {}", p.verdict.summary);
    let _ = writeln!(
        out,
        "Plan for {} pending GPU pod(s); short now: {}",
        pr.pending_pods,
        if pr.short.is_empty() {
            "nothing (the free units cover the pending requests)".to_string()
        } else {
            units(&pr.short)
        }
    );
    if !pr.held_back.is_empty() {
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for h in &pr.held_back {
            *by.entry(format!("{} ({})", h.class, h.code)).or_default() += 1;
        }
        let _ = writeln!(
            out,
            "Left out: {} pending GPU pod(s) no relabel would help: {} (gpuwl explain says why for each).",
            pr.held_back.len(),
            by.iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if pr.steps.is_empty() {
        out.push_str("\nNo relabel proposed.\n");
    } else {
        let _ = writeln!(
            out,
            "\n{} relabel(s), {}:",
            pr.steps.len(),
            if p.verified {
                "verified on the twin: every pod they are meant for was placed by its kube-scheduler"
            } else {
                "NOT confirmed by the twin (see below)"
            }
        );
        for s in &pr.steps {
            let _ = writeln!(
                out,
                "  {}: {} → {}  (+{} {}) for {}",
                esc(&s.relabel.node),
                s.from
                    .as_deref()
                    .map(esc)
                    .unwrap_or_else(|| "(no label)".into()),
                match &s.relabel.vgpu_type {
                    Some(t) => format!("{}:{}", s.relabel.config, esc(t)),
                    None => s.relabel.config.to_string(),
                },
                s.units,
                esc(&s.resource),
                s.for_pods
                    .iter()
                    .map(|x| esc(x))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !s.disrupts.is_empty() {
                let _ = writeln!(
                    out,
                    "    disrupts: {}",
                    s.disrupts
                        .iter()
                        .map(|x| esc(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        if !p.not_confirmed.is_empty() {
            let _ = writeln!(
                out,
                "  the twin left pending: {}",
                p.not_confirmed
                    .iter()
                    .map(|x| esc(x))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if !pr.unservable.is_empty() {
        out.push_str("\nNo relabel serves\n");
        for u in &pr.unservable {
            let _ = writeln!(
                out,
                "  {} ({}): {}",
                esc(&u.pod),
                esc(&u.resource),
                esc(&u.why)
            );
        }
    }
    if let Some(w) = &p.whatif {
        out.push_str("\n--- the twin's whatif of this plan ---\n");
        out.push_str(&report_text(w, width));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::twin::report::{Disrupted, NodeChange, TwinFacts, apply_steps};

    /// The lab's relabel of lab-node-1 to container as the twin reports it (README's
    /// example): nothing placed, vmi-passthrough disrupted.
    fn lab_report() -> Report {
        let change = NodeChange {
            relabel: "lab-node-1=container".parse().unwrap(),
            from: Some("vm-passthrough".into()),
            advertised_before: [("nvidia.com/GA102GL_A10".to_string(), 2)]
                .into_iter()
                .collect(),
            advertised_after: [
                ("nvidia.com/GA102GL_A10".to_string(), 0),
                ("nvidia.com/gpu".to_string(), 2),
            ]
            .into_iter()
            .collect(),
            hardware: vec!["device 2236 from nvidia.com/GA102GL_A10".into()],
            notes: Vec::new(),
        };
        let disrupted = vec![Disrupted {
            pod: PodRef {
                pod: "gpu-vm/vmi-passthrough".into(),
                kind: "Pod".into(),
                vmi: None,
                requests: [("nvidia.com/GA102GL_A10".to_string(), 1)]
                    .into_iter()
                    .collect(),
                vmi_owned_by_vm: None,
            },
            node: "lab-node-1".into(),
            resource: "nvidia.com/GA102GL_A10".into(),
            before: 2,
            after: 0,
        }];
        Report {
            verdict: Verdict::of(&[], 1, &disrupted),
            source: "cluster".into(),
            commands: apply_steps(std::slice::from_ref(&change), &disrupted),
            changes: vec![change],
            placed_without_relabel: Vec::new(),
            now_scheduled: Vec::new(),
            still_pending: Vec::new(),
            disrupted,
            inventory: Vec::new(),
            twin: TwinFacts {
                cluster: "gpuwl-twin".into(),
                kept: false,
                nodes: 3,
                cpu_nodes_left_out: 0,
                bound_pods: 3,
                pending_pods: 1,
                left_out: Vec::new(),
                not_copied: "x".into(),
                names_by: "y".into(),
                seconds: 1.0,
            },
            notes: Vec::new(),
            quota: None,
        }
    }

    #[test]
    fn the_report_leads_with_the_verdict_and_ends_with_the_steps() {
        let r = lab_report();
        let text = crate::render::wrap_lines(&report_text(&r, 100), 100);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Verdict: serves no pending pod, disrupts 1 running VM/pod(s): not recommended"
        );
        assert!(lines[1].starts_with("What if: lab-node-1 vm-passthrough → container"));
        let from = lines
            .iter()
            .position(|l| *l == "To apply for real")
            .unwrap();
        let to = lines
            .iter()
            .position(|l| l.starts_with("The twin:"))
            .unwrap();
        assert_eq!(
            lines[from + 1..to - 1],
            [
                "  # 1. cordon: nothing new lands on the node while it changes",
                "  kubectl cordon lab-node-1",
                "  # 2. stop what would lose its GPU (or live-migrate a VM to a node that offers the name); never",
                "  #   delete a virt-launcher pod",
                "  kubectl delete pod vmi-passthrough -n gpu-vm",
                "  # 3. relabel",
                "  kubectl label node lab-node-1 nvidia.com/gpu.workload.config=container --overwrite",
                "  # 4. wait until the operator's operands run and the new name is advertised (a driver or vfio-pci",
                "  #   change may need a reboot of the node)",
                "  kubectl get pods -A -o wide --field-selector spec.nodeName=lab-node-1",
                "  kubectl wait node/lab-node-1 --for=jsonpath='{.status.allocatable.nvidia\\.com/gpu}'=2 --timeout=30m",
                "  # 5. uncordon",
                "  kubectl uncordon lab-node-1",
                "  # or steps 1-5 in one resumable command (stops cordoned if a wait times out):",
                "  gpuwl relabel lab-node-1=container --evict",
            ]
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["verdict"]["recommendation"], "not-recommended");
        assert_eq!(v["verdict"]["disrupts"], 1);
        assert_eq!(v["verdict"]["serves"], 0);
    }
}
