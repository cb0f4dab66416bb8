//! Output: the core's reports and helpers ([`gpuwl_core::render`], re-exported here: the
//! check's line contract, tables, JSON, YAML and CSV, escaping, stdout) and the reports of
//! the engines above the core, each beside the core's: the local cluster ([`cluster`]),
//! the lab ([`lab`]), relabel ([`relabel`]) and whatif / plan ([`whatif`]).

pub use gpuwl_core::render::*;

pub mod cluster;
pub mod lab;
pub mod relabel;
pub mod whatif;

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
