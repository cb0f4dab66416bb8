//! Rendering a [`Report`] of `gpuwl check`.

use serde::Serialize;

use crate::analysis::check::{Code, Finding, NodeReport, Report, Severity};
use crate::analysis::kueue::{FlavorOffer, QuotaReport};
use crate::error::ExitStatus;
use crate::model::operand::OperandSource;
use crate::model::operator::PolicyStatus;
use crate::render::{Format, escape_serialized};
use crate::text;

/// The structured document of `-o json|yaml`.
///
/// Shape: `{ ok, exitCode, lines: [text lines], summary: { nodes, labelled, mismatched,
/// errors, warnings, infos }, clusterPolicy: { status, policy?, note? }, nodes: [NodeReport] }`
/// with `NodeReport` = `{ name, label, effectiveWorkload, workloadSource, verdict: ok|mismatch|not-judged, reason?, resources: [{ name, class,
/// capacity?, allocatable?, advertised }], findings: [{ code, severity, resource?,
/// message }], gpuNode?, plannedTransition? }`, and with `--effective` `gate: { failOn,
/// ignore, ignored: { code: count }, gpuNodes, failingNodes, failing: [{ node, code, severity, message }] }` (then
/// `ok`, `exitCode` and `lines` are the gate's). Codes are stable (see
/// [`crate::analysis::check::Code`]); severities are the table's
/// ([`crate::model::finding::SEVERITIES`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document<'a> {
    /// True when no node mismatches.
    pub ok: bool,
    /// The exit code gpuwl returns (0 or 1).
    pub exit_code: u8,
    /// The text output's lines.
    pub lines: Vec<String>,
    /// Counts.
    pub summary: Summary,
    /// The ClusterPolicy the check ran under, or why there is none.
    pub cluster_policy: &'a PolicyStatus,
    /// Where the GPU Operator's operand pods (`nodes[].operandPods`) came from: `{ status:
    /// cluster|file|unreadable|not-read, note? }`; absent in text mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operand_pods: Option<&'a OperandSource>,
    /// Per-node reports (labelled nodes, NFD GPU nodes and other nodes with findings), by
    /// name.
    pub nodes: &'a [NodeReport],
    /// The quota layer's findings (Kueue flavors and ClusterQueues), when Kueue objects
    /// were read: `[{ object: "ClusterQueue/<name>", findings: [...] }]`.
    #[serde(skip_serializing_if = "<[QuotaReport]>::is_empty")]
    pub quota: &'a [QuotaReport],
    /// What each Kueue flavor's nodes offer: `[{ flavor, nodes, nodeNames, gpuNodes,
    /// pools, advertised: { name: count }, tainted }]`.
    #[serde(skip_serializing_if = "<[FlavorOffer]>::is_empty")]
    pub flavors: &'a [FlavorOffer],
    /// `check --effective`: what the gate judged and what fails it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateDoc<'a>>,
    /// What could not be judged and why (text mode says it on stderr).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub notes: &'a [String],
}

/// The gate part of a [`Document`] (`check --effective`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateDoc<'a> {
    /// `--fail-on` codes.
    pub fail_on: Vec<Code>,
    /// `--ignore` codes (their findings are left out of `nodes`).
    pub ignore: Vec<Code>,
    /// How many findings `--ignore` left out, per code (codes with none are absent).
    pub ignored: &'a std::collections::BTreeMap<Code, usize>,
    /// GPU nodes judged.
    pub gpu_nodes: usize,
    /// Nodes with a failing finding, by name.
    pub failing_nodes: Vec<&'a str>,
    /// The failing findings, nodes by name.
    pub failing: Vec<Failing<'a>>,
}

/// One finding that fails the gate.
#[derive(Debug, Serialize)]
pub struct Failing<'a> {
    /// Node name, or the Kueue object (`ClusterQueue/<name>`, `ResourceFlavor/<name>`).
    pub node: &'a str,
    /// Finding code.
    pub code: Code,
    /// Its severity (a warning fails when `--fail-on` names its code).
    pub severity: Severity,
    /// The finding's message.
    pub message: &'a str,
}

/// Counts of a [`Document`].
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Nodes read.
    pub nodes: usize,
    /// Nodes carrying the label.
    pub labelled: usize,
    /// Mismatching nodes.
    pub mismatched: usize,
    /// Error findings.
    pub errors: usize,
    /// Warning findings.
    pub warnings: usize,
    /// Info findings.
    pub infos: usize,
}

/// The structured view of `report`.
pub fn document<'a>(report: &'a Report, policy: &'a PolicyStatus) -> Document<'a> {
    let gate = report.gate.as_ref().map(|g| {
        let failing: Vec<Failing<'a>> = report
            .failing()
            .map(|(n, f)| Failing {
                node: n,
                code: f.code,
                severity: f.severity,
                message: &f.message,
            })
            .collect();
        let mut failing_nodes: Vec<&str> = failing.iter().map(|f| f.node).collect();
        failing_nodes.dedup();
        GateDoc {
            fail_on: g.fail_on.iter().copied().collect(),
            ignore: g.ignore.iter().copied().collect(),
            ignored: &report.ignored,
            gpu_nodes: report.gpu_nodes,
            failing_nodes,
            failing,
        }
    });
    Document {
        ok: report.exit_status() == ExitStatus::Ok,
        exit_code: report.exit_status() as u8,
        lines: match report.gate {
            Some(_) => gate_lines(report, false),
            None => text_lines(report),
        },
        gate,
        summary: Summary {
            nodes: report.nodes_seen,
            labelled: report.labelled,
            mismatched: report.mismatches().count(),
            errors: report.count(Severity::Error),
            warnings: report.count(Severity::Warning),
            infos: report.count(Severity::Info),
        },
        cluster_policy: policy,
        operand_pods: report.operand_source.as_ref(),
        nodes: &report.nodes,
        quota: &report.quota,
        flavors: &report.flavors,
        notes: &report.notes,
    }
}

/// The seed contract's stdout lines ([`Report::seed_lines`]).
pub fn text_lines(report: &Report) -> Vec<String> {
    report.seed_lines()
}

/// The lines of `check --effective` in text mode: `ERROR <code> <node>: <message>` for
/// each finding that fails the gate, then `WARNING <code> <node>: <message>` for each other
/// warning (not with `quiet`), nodes by name; last a summary, `FAIL: …` or `OK: …`. Infos
/// are not printed (`-o json` has them). Control characters are escaped.
pub(crate) fn gate_lines(report: &Report, quiet: bool) -> Vec<String> {
    let Some(gate) = &report.gate else {
        return text_lines(report);
    };
    let line = |word: &str, n: &str, f: &Finding| {
        text::esc(&format!("{word} {} {}: {}", f.code, n, f.message))
    };
    let mut out: Vec<String> = report.failing().map(|(n, f)| line("ERROR", n, f)).collect();
    let mut warnings = 0;
    for (n, f) in report
        .findings()
        .filter(|(_, f)| f.severity == Severity::Warning && !gate.fails(f))
    {
        warnings += 1;
        if !quiet {
            out.push(line("WARNING", n, f));
        }
    }
    let errors = report.failing().count();
    // Kueue objects (`ClusterQueue/<name>`) fail beside nodes; a node name has no `/`.
    let mut nodes: Vec<&str> = report
        .failing()
        .map(|(n, _)| n)
        .filter(|n| !n.contains('/'))
        .collect();
    nodes.dedup();
    let mut objects: Vec<&str> = report
        .failing()
        .map(|(n, _)| n)
        .filter(|n| n.contains('/'))
        .collect();
    objects.dedup();
    let on_objects = match objects.len() {
        0 => String::new(),
        n => format!(" and {n} Kueue object(s) ({})", objects.join(", ")),
    };
    // Only Kueue objects fail: say so without "0 of N GPU nodes".
    let only_objects = nodes.is_empty() && !objects.is_empty();
    let plural = |n: usize, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    // What --ignore left out is said, never silent: `, 1 finding ignored (mig-config-failed)`.
    let ignored = if report.ignored.is_empty() {
        String::new()
    } else {
        format!(
            ", {} ignored ({})",
            plural(report.ignored.values().sum(), "finding"),
            report
                .ignored
                .iter()
                .map(|(c, n)| if *n == 1 {
                    c.to_string()
                } else {
                    format!("{c} ×{n}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let too_few = report.too_few_gpu_nodes();
    out.push(if let Some(why) = too_few {
        if errors > 0 {
            format!(
                "FAIL: {}; {} on {} of {} GPU nodes, {}{ignored}",
                why,
                plural(errors, "error"),
                nodes.len(),
                report.gpu_nodes,
                plural(warnings, "warning")
            )
        } else {
            format!("FAIL: {why}{ignored}")
        }
    } else if only_objects {
        format!(
            "FAIL: {} on {} Kueue object(s) ({}), {} GPU nodes judged, {}{ignored}",
            plural(errors, "error"),
            objects.len(),
            objects.join(", "),
            report.gpu_nodes,
            plural(warnings, "warning")
        )
    } else if errors > 0 {
        format!(
            "FAIL: {} on {} of {} GPU nodes{on_objects}, {}{ignored}",
            plural(errors, "error"),
            nodes.len(),
            report.gpu_nodes,
            plural(warnings, "warning")
        )
    } else {
        format!(
            "OK: {} judged by the workload the GPU Operator applies, no error, {}{ignored}",
            plural(report.gpu_nodes, "GPU node"),
            plural(warnings, "warning")
        )
    });
    out
}

/// The lines check prints on stderr in plain text mode (without `--quiet`): each kept
/// finding the MISMATCH lines do not carry ([`Report::warning_lines`], `warning: …` or
/// `error: …`), then `… and N more` when some were not kept; empty when there are none.
pub fn warnings(report: &Report) -> String {
    let mut err = String::new();
    for w in &report.warning_lines {
        err.push_str(&format!("{w}\n"));
    }
    let more = report
        .warnings_total
        .saturating_sub(report.warning_lines.len());
    if more > 0 {
        err.push_str(&format!(
            "warning: … and {more} more (gpuwl check -o json lists them all)\n"
        ));
    }
    err
}

/// Renders `report` in `format`; text is exactly the line contract (`MISMATCH=<node> <reason>` or `OK=<n>`, one line each,
/// newline-terminated), or with a gate its [`gate_lines`].
pub fn render(report: &Report, policy: &PolicyStatus, format: Format) -> String {
    render_with(report, policy, format, false)
}

/// [`render`]; `quiet` leaves the gate's `WARNING` lines out of the text.
pub fn render_with(report: &Report, policy: &PolicyStatus, format: Format, quiet: bool) -> String {
    match format {
        Format::Text => {
            let mut s = gate_lines(report, quiet).join("\n");
            s.push('\n');
            s
        }
        // serde escapes C0 controls only: DEL, C1 and bidi overrides from a node's names
        // and values are escaped too, as every other command's -o json|yaml does.
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&document(report, policy))
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            escape_serialized(&s).into_owned()
        }
        Format::Yaml => escape_serialized(
            &serde_saphyr::to_string(&document(report, policy))
                .unwrap_or_else(|e| format!("error: {e:?}\n")),
        )
        .into_owned(),
    }
}
