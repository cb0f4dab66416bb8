//! Output of the engines above the core, each beside the core's own reports and helpers
//! ([`gpuwl_core::render`]: the check's line contract, tables, JSON, YAML and CSV,
//! escaping, stdout; call sites name it directly, nothing is re-exported here): the local
//! cluster ([`cluster`]) and the lab ([`lab`]). Whatif / plan's report and relabel's are the
//! core's ([`gpuwl_core::render::whatif`], [`gpuwl_core::render::relabel`]).

pub mod cluster;
pub mod lab;

/// `print!` for command output: writes through [`write_stdout`](gpuwl_core::render::write_stdout), so a closed pipe
/// (`gpuwl lab | head`) ends the output quietly instead of panicking. Other write errors
/// are ignored too: the command's exit code still reports what it did.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = ::gpuwl_core::render::write_stdout(format!($($t)*).as_bytes());
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
        let _ = ::gpuwl_core::render::write_stdout(s.as_bytes());
    }};
}
