//! `gpuwl` binary entry point: parses the command line and maps the outcome to an exit code.
//! See [`gpuwl::cli`] for the commands and [`gpuwl_core::error::ExitStatus`] for the codes.

fn main() -> std::process::ExitCode {
    gpuwl::cli::main()
}
