//! Rendering a [`Triage`] report of `gpuwl triage`: text for people, or the whole report as
//! JSON/YAML. Every string from the bundle is escaped ([`crate::render::esc`]); log lines
//! were escaped and cut when read.

use std::fmt::Write;

use crate::analysis::triage::{DaemonSetReport, QuotaPart, Triage};
use crate::decode::mustgather::LogTail;
use crate::render::{Format, esc, esc_lines};

/// Renders `t` in `format`.
pub fn render(t: &Triage, format: Format) -> String {
    match format {
        Format::Text => text(t),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(t)
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            s
        }
        Format::Yaml => serde_saphyr::to_string(t).unwrap_or_else(|e| format!("error: {e:?}\n")),
    }
}

fn log_lines(out: &mut String, label: &str, l: &LogTail) {
    if l.binary {
        let _ = writeln!(
            out,
            "      {label}: binary data ({} bytes), not shown",
            l.bytes
        );
        return;
    }
    if l.lines.is_empty() {
        return;
    }
    let what = if l.errors {
        "error lines"
    } else {
        "last lines"
    };
    let _ = writeln!(out, "      {label} ({what}, of {} bytes):", l.bytes);
    for line in &l.lines {
        let _ = writeln!(out, "        {line}");
    }
}

fn daemonset(out: &mut String, d: &DaemonSetReport) {
    let _ = writeln!(
        out,
        "  {}: {} desired, {} ready, {} available{}",
        esc(&d.name),
        d.desired,
        d.ready,
        d.available,
        if d.misscheduled > 0 {
            format!(", {} misscheduled", d.misscheduled)
        } else {
            String::new()
        }
    );
    for w in &d.why {
        let _ = writeln!(out, "    why: {}", esc(w));
    }
    for p in &d.pods {
        let _ = writeln!(
            out,
            "    pod {} on {}: {}, {}, {} restarts",
            esc(&p.name),
            esc(p.node.as_deref().unwrap_or("no node")),
            esc(p.phase.as_deref().unwrap_or("no phase")),
            if p.ready { "ready" } else { "not ready" },
            p.restarts
        );
        for c in &p.containers {
            if c.reason.is_some() || c.last_termination.is_some() {
                let _ = writeln!(
                    out,
                    "      {}: {}{}",
                    esc(&c.name),
                    c.reason.as_deref().unwrap_or("running"),
                    c.last_termination
                        .as_deref()
                        .map(|t| format!(", last ended {t}"))
                        .unwrap_or_default()
                );
            }
        }
        if let Some(l) = &p.log {
            log_lines(out, "log", l);
        }
        if let Some(l) = &p.previous_log {
            log_lines(out, "previous log", l);
        }
    }
}

/// The text report: one section per part, each saying "none" when empty.
pub fn text(t: &Triage) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Triage of {} (operator namespace {}; {} GPU nodes described; ClusterPolicy: {})",
        esc(&t.bundle),
        esc(t.operator_namespace.as_deref().unwrap_or("unknown")),
        t.nodes_described,
        t.cluster_policy
            .policy()
            .map(|p| esc(&p.name))
            .unwrap_or_else(|| t.cluster_policy.status.to_owned()),
    );
    let _ = writeln!(out, "\nCheck ({} labelled):", t.check.labelled);
    for l in &t.check.lines {
        let _ = writeln!(out, "  {l}");
    }
    for f in &t.check.findings {
        let _ = writeln!(out, "  warning: {}", esc(f));
    }
    let _ = writeln!(out, "\nOperator state per node:");
    let mut by_workload = std::collections::BTreeMap::<&str, usize>::new();
    for n in &t.operator_state {
        *by_workload.entry(&n.workload).or_default() += 1;
    }
    let _ = writeln!(
        out,
        "  workloads: {}",
        if by_workload.is_empty() {
            "none".into()
        } else {
            by_workload
                .iter()
                .map(|(w, n)| format!("{w} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let with = t.operator_state.iter().filter(|n| !n.findings.is_empty());
    let mut any = false;
    for n in with {
        any = true;
        for f in &n.findings {
            let _ = writeln!(
                out,
                "  {}: {}: {}",
                esc(&n.node),
                f.code.as_str(),
                esc(&f.message)
            );
        }
    }
    if !any {
        let _ = writeln!(out, "  no operator-state findings");
    }
    let _ = writeln!(
        out,
        "\nOperand DaemonSets: {} of {} fully ready",
        t.daemonsets_total - t.daemonsets_not_ready.len(),
        t.daemonsets_total
    );
    for d in &t.daemonsets_not_ready {
        daemonset(&mut out, d);
    }
    let _ = writeln!(out, "\nPending GPU pods: {}", t.pending_gpu_pods.len());
    for p in &t.pending_gpu_pods {
        let kind = if p.kind.is_pod() {
            String::new()
        } else {
            format!(" ({})", p.kind)
        };
        let _ = writeln!(
            out,
            "  {}{kind}: {} [{}]: {}",
            esc(&p.pod),
            p.cause_code,
            p.class,
            esc(&p.cause)
        );
        if !p.fix.is_empty() {
            let _ = writeln!(out, "    fix: {}", esc_lines(&p.fix, "      "));
        }
    }
    if let Some(l) = &t.operator_log {
        let _ = writeln!(out, "\nOperator log:");
        log_lines(&mut out, "gpu_operator_pod.log", l);
    }
    if let Some(q) = &t.quota {
        quota_text(&mut out, q);
    }
    let _ = writeln!(out, "\nNot in the bundle:");
    if t.lacking.is_empty() {
        let _ = writeln!(out, "  nothing");
    }
    for l in &t.lacking {
        let _ = writeln!(out, "  - {}", esc(l));
    }
    if !t.problems.is_empty() {
        let _ = writeln!(out, "\nFiles that did not read:");
        for p in &t.problems {
            let _ = writeln!(out, "  - {}", esc(p));
        }
    }
    out
}

/// The quota layer's section: `check`'s finding lines (`ERROR <code> <object>: <message>`),
/// then each workload Kueue holds (or admitted where it cannot run) with its quota cause.
fn quota_text(out: &mut String, q: &QuotaPart) {
    let [f, c, l, w] = q.objects;
    let _ = writeln!(
        out,
        "\nKueue quota layer (--kueue: {f} flavor(s), {c} ClusterQueue(s), {l} LocalQueue(s), {w} Workload(s)):"
    );
    let mut any = false;
    for r in &q.findings {
        for x in &r.findings {
            any = true;
            let _ = writeln!(
                out,
                "  {} {} {}: {}",
                x.severity.as_str().to_uppercase(),
                x.code.as_str(),
                esc(&r.object),
                esc(&x.message)
            );
        }
    }
    for v in &q.workloads {
        any = true;
        let _ = writeln!(
            out,
            "  {} {}: {}",
            esc(&v.workload),
            v.cause.as_str(),
            esc(&v.message)
        );
    }
    if !any {
        let _ = writeln!(out, "  no quota findings, no GPU workload held");
    }
}
