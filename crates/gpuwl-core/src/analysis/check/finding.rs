//! The record every check finding is: a stable code, its severity, the resource and one
//! line of explanation. Its own file so that the analyses that make findings (the quota
//! layer, [`crate::analysis::kueue`]) need not name the checker.

use serde::Serialize;

use crate::model::finding::{Code, Severity};

/// One observation about one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable code.
    pub code: Code,
    /// Severity (only `error` makes a mismatch).
    pub severity: Severity,
    /// The resource concerned, when there is one (full name, `nvidia.com/...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// One-line human explanation.
    pub message: String,
}
