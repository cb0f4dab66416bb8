//! Rendering a [`Report`] of `gpuwl check`.

use serde::Serialize;

use crate::analysis::check::{NodeReport, Report, Severity};
use crate::model::operator::PolicyStatus;
use crate::render::Format;

/// The structured document of `-o json|yaml`.
///
/// Shape: `{ ok, exitCode, lines: [text lines], summary: { nodes, labelled, mismatched,
/// errors, warnings, infos }, clusterPolicy: { status, policy?, note? }, nodes: [NodeReport] }`
/// with `NodeReport` = `{ name, label, effectiveWorkload, workloadSource, verdict: ok|mismatch|not-judged, reason?, resources: [{ name, class,
/// capacity?, allocatable?, advertised }], findings: [{ code, severity, resource?,
/// message }] }`. Codes are stable (see [`crate::analysis::check::Code`]).
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
    pub operand_pods: Option<&'a crate::model::operand::OperandSource>,
    /// Per-node reports (labelled nodes, NFD GPU nodes and other nodes with findings), by
    /// name.
    pub nodes: &'a [NodeReport],
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
    Document {
        ok: report.mismatches().next().is_none(),
        exit_code: report.exit_status() as u8,
        lines: text_lines(report),
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
    }
}

/// The seed contract's stdout lines: `MISMATCH=<node> <reason>` per mismatching node
/// sorted by name, or the single line `OK=<labelled nodes>`.
pub fn text_lines(report: &Report) -> Vec<String> {
    let v: Vec<String> = report
        .mismatches()
        .map(|n| {
            crate::text::escape_controls(&format!(
                "MISMATCH={} {}",
                n.name,
                n.reason.as_deref().unwrap_or("")
            ))
        })
        .collect();
    if v.is_empty() {
        vec![format!("OK={}", report.labelled)]
    } else {
        v
    }
}

/// The `warning:` lines check prints on stderr in text mode (without `--quiet`): one per
/// kept warning ([`Report::warning_lines`]), then `… and N more` when some were not kept;
/// empty when there are none.
pub fn warnings(report: &Report) -> String {
    let mut err = String::new();
    for w in &report.warning_lines {
        err.push_str(&format!("warning: {w}\n"));
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
/// newline-terminated).
pub fn render(report: &Report, policy: &PolicyStatus, format: Format) -> String {
    match format {
        Format::Text => {
            let mut s = text_lines(report).join("\n");
            s.push('\n');
            s
        }
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&document(report, policy))
                .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
            s.push('\n');
            s
        }
        Format::Yaml => serde_saphyr::to_string(&document(report, policy))
            .unwrap_or_else(|e| format!("error: {e:?}\n")),
    }
}
