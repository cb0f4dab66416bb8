//! `gpuwl relabel`'s text: one line per step as it ends, and the closing line.

use crate::analysis::relabel::{Outcome, Report, Status, StepReport, seconds};
use crate::render;

/// One step: the time since the run started, the step, how it ended, the node and what it
/// did, with the time it took (messages are escaped where they are made).
///
/// `  12.3 s  holders     done          lab-node-1: evict gpu-vm/vmi-passthrough: gone (1.2 s)`
pub fn step_line(s: &StepReport) -> String {
    let who = s
        .node
        .as_deref()
        .map(|n| format!("{}: ", render::esc(n)))
        .unwrap_or_default();
    // The time a step took, where it did something or waited.
    let took = match s.status {
        Status::Done | Status::TimedOut => format!(" ({:.1} s)", s.seconds),
        _ => String::new(),
    };
    let mut line = format!(
        "{:>6.1} s  {:<10}  {:<12}  {who}{}{took}\n",
        s.at,
        s.step.as_str(),
        s.status.as_str(),
        s.message,
    );
    // The preview's notes (the quota layer's side), under its line.
    for n in &s.notes {
        line.push_str(&format!("{:34}note: {}\n", "", render::esc(n)));
    }
    line
}

/// The closing line on stdout: what was done, or that a dry run changed nothing; `None`
/// when the run stopped (the reason goes to stderr as the error line).
pub fn closing(r: &Report) -> Option<String> {
    match r.result {
        Outcome::Done => Some(format!(
            "Done: {}.\n",
            r.message.as_deref().unwrap_or("relabelled")
        )),
        Outcome::NothingToDo => Some("Nothing to do.\n".into()),
        Outcome::Planned => Some(
            "Dry run: nothing was changed; without --dry-run these steps are carried out.\n".into(),
        ),
        Outcome::Refused | Outcome::TimedOut | Outcome::Interrupted => None,
    }
}

/// The header line: the relabels and the wait limit.
pub fn header(relabels: &[String], timeout: std::time::Duration) -> String {
    format!(
        "Relabel {} (each wait at most {})\n",
        relabels
            .iter()
            .map(|r| render::esc(r))
            .collect::<Vec<_>>()
            .join(" "),
        seconds(timeout)
    )
}
