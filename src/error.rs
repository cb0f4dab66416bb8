//! Errors and the exit codes scripts can rely on.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success; for `check`: every labelled node agrees (`OK=<n>`) |
//! | 1 | `check` found at least one `MISMATCH=` line |
//! | 2 | bad input or usage: unreadable/invalid file, bad flag (nothing on stdout) |
//! | 3 | environment or cluster failure: API unreachable, control plane won't start, a lab step failed |

use std::process::ExitCode;

/// A value echoed in a message, cut to 80 characters (`"abc…" (52428800 bytes)`), quoted
/// with Rust escapes so that it is one line: messages name values, they never dump them.
/// Values of 80 characters or fewer read exactly as `{:?}` prints them.
pub fn cut(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(MAX).collect();
    format!("{:?}… ({} bytes)", head, s.len())
}

/// Exit statuses of every gpuwl command (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: success.
    Ok = 0,
    /// 1: the check found mismatches.
    Mismatch = 1,
    /// 2: bad input or usage.
    BadInput = 2,
    /// 3: cluster, control-plane or other runtime failure.
    Runtime = 3,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

/// A failure that ends a command. `Display` is the one-line message printed on stderr
/// after `gpuwl: `.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: the message names the file (and node/field when known). Exit 2.
    #[error("{0}")]
    Input(String),
    /// Cluster, process or I/O failure outside the user's input. Exit 3.
    #[error("{0}")]
    Runtime(String),
}

impl Error {
    /// The exit status this error maps to (2 for input, 3 for runtime).
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Error::Input(_) => ExitStatus::BadInput,
            Error::Runtime(_) => ExitStatus::Runtime,
        }
    }
}

/// Convenience result for gpuwl commands.
pub type Result<T, E = Error> = std::result::Result<T, E>;
