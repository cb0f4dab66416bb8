//! Output: the check's line contract (`MISMATCH=` / `OK=` lines), tables, JSON, YAML and CSV.

use std::io::{self, Write};

pub mod check;
pub mod explain;
pub mod inventory;
pub mod kubevirt;

/// Output format of commands that report (`-o text|json|yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Plain text for people and scripts.
    #[default]
    Text,
    /// Pretty JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Writes `bytes` to stdout; a closed pipe (`gpuwl check | head -0`) is not an error.
///
/// Errors: other I/O errors.
pub fn write_stdout(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// `print!` for command output: writes through [`write_stdout`], so a closed pipe
/// (`gpuwl lab | head`) ends the output quietly instead of panicking. Other write errors
/// are ignored too: the command's exit code still reports what it did.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = $crate::render::write_stdout(format!($($t)*).as_bytes());
    }};
}

/// `println!` counterpart of [`out!`](crate::out).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out!("\n")
    };
    ($($t:tt)*) => {{
        let mut s = format!($($t)*);
        s.push('\n');
        let _ = $crate::render::write_stdout(s.as_bytes());
    }};
}
