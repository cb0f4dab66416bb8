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
    /// Per-node reports (labelled nodes and unlabelled nodes with findings), by name.
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
        lines: report.text_lines(),
        summary: Summary {
            nodes: report.nodes_seen,
            labelled: report.labelled,
            mismatched: report.mismatches().count(),
            errors: report.count(Severity::Error),
            warnings: report.count(Severity::Warning),
            infos: report.count(Severity::Info),
        },
        cluster_policy: policy,
        nodes: &report.nodes,
    }
}

/// Renders `report` in `format`; text is exactly the line contract (`MISMATCH=<node> <reason>` or `OK=<n>`, one line each,
/// newline-terminated).
pub fn render(report: &Report, policy: &PolicyStatus, format: Format) -> String {
    match format {
        Format::Text => {
            let mut s = report.text_lines().join("\n");
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
