//! The command line: `gpuwl <command>`; also runs as `kubectl gpuwl` when installed as
//! `kubectl-gpuwl` on PATH.
//!
//! Each command's arguments and entry point live in their own file here; this module
//! only lists them and maps results to exit codes (see [`gpuwl_core::error`]).

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::input::gather::LimitArgs;
use gpuwl_core::error::{Error, ExitStatus};
use gpuwl_core::render::write_stdout;

pub use crate::input::live::runtime;

pub mod check;
pub mod cluster;
pub mod completions;
pub mod explain;
pub mod inventory;
pub mod kubevirt;
pub mod lab;
pub mod policy;
pub mod relabel;
pub mod serve;
pub mod snapshot;
pub mod triage;
pub mod whatif;

/// Top-level parser.
#[derive(Debug, Parser)]
#[command(
    name = "gpuwl",
    version,
    about = "Check GPU Operator workload labels against advertised GPU resources, and play the sandbox-workload lab on a real scheduler",
    long_about = None,
    after_help = "Exit codes: 0 ok · 1 check found mismatches · 2 bad input or usage · 3 cluster/runtime failure\n\
Run as a kubectl plugin (kubectl gpuwl then runs gpuwl):\n  \
ln -s \"$(command -v gpuwl)\" ~/.cargo/bin/kubectl-gpuwl\n  \
kubectl gpuwl check"
)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Judge, per node, whether the workload-config label agrees with the GPU resources it advertises
    Check(check::Args),
    /// Run a real local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes)
    Cluster(cluster::Args),
    /// Play the sandbox-workload lab's eight steps on a real scheduler and write the result files
    #[command(long_about = lab::long_about())]
    Lab(lab::Args),
    /// Show the split GPU inventory: per pool and GPU resource name, capacity, allocated, free, pending
    Inventory(inventory::Args),
    /// Explain why a GPU pod or KubeVirt VMI waits: advertised names, constraints, one fix
    Explain(explain::Args),
    /// Generate and check KubeVirt's permittedHostDevices from the GPU names nodes advertise
    #[command(long_about = kubevirt::LONG_ABOUT)]
    Kubevirt(kubevirt::Args),
    /// Write everything gpuwl reads from the live cluster into one file, for --snapshot (no Secrets, no env values)
    Snapshot(snapshot::Args),
    /// Triage a GPU Operator must-gather bundle offline: check, operator state, operand DaemonSets not ready, pending GPU pods
    Triage(triage::Args),
    /// Serve drift findings and GPU pools as Prometheus metrics, watching the cluster
    Serve(serve::Args),
    /// Try a relabel on a twin of the cluster (real kube-scheduler) before applying it: what schedules, what is disrupted
    Whatif(whatif::Args),
    /// Propose the fewest relabels that serve the pending GPU pods, verified on a twin of the cluster
    Plan(whatif::PlanArgs),
    /// Relabel nodes on the live cluster step by step: preview, cordon, evict or stop the GPU holders, relabel, wait for the operands and the new name, uncordon
    Relabel(relabel::Args),
    /// Print a ValidatingAdmissionPolicy that makes the API server refuse a mistyped workload or vGPU label
    Policy(policy::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell); bash and zsh also complete pod names after `explain`
    Completions {
        /// Shell to generate for
        shell: clap_complete::Shell,
    },
    /// Pod names for the completion scripts (one per line; nothing on failure)
    #[command(name = "__complete-pods", hide = true)]
    CompletePods(completions::PodsArgs),
    /// Completion candidates in cobra's protocol, for kubectl's `kubectl_complete-gpuwl`
    #[command(name = "__complete", hide = true)]
    Complete {
        /// The words after `gpuwl`; the last is the one being completed
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

/// Parses `std::env::args`, runs the command and returns its exit code. Errors are printed
/// as one line `gpuwl: <message>` on stderr.
pub fn main() -> ExitCode {
    // Run as `kubectl_complete-gpuwl` (a link kubectl ≥ 1.26 calls to complete `kubectl
    // gpuwl …`): every argument is a word to complete, answered in cobra's protocol.
    let argv0_is = |prefix: &str| {
        std::env::args_os()
            .next()
            .and_then(|a| {
                std::path::Path::new(&a)
                    .file_name()
                    .map(|f| f.to_string_lossy().starts_with(prefix))
            })
            .unwrap_or(false)
    };
    if argv0_is(completions::KUBECTL_HELPER) {
        let words: Vec<String> = std::env::args_os()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return match completions::run_complete(&words) {
            Ok(status) => status.into(),
            Err(e) => e.exit_status().into(),
        };
    }
    let mut cmd = Cli::command();
    // Run as `kubectl gpuwl` (the binary installed as kubectl-gpuwl): help and usage say so.
    if argv0_is("kubectl-gpuwl") {
        cmd = cmd.bin_name("kubectl gpuwl").display_name("kubectl gpuwl");
    }
    // Help asked for: its examples fitted to the width clap lays the help out for, so that
    // clap's wrapping never cuts a command (`\` continuations instead).
    if std::env::args_os()
        .skip(1)
        .any(|a| a == "-h" || a == "--help" || a == "help")
    {
        cmd = fit_help_examples(cmd, help_width());
    }
    let matches = match cmd.try_get_matches() {
        Ok(m) => m,
        // --help and --version go to stdout through the same path as any output, so a
        // failed write (`gpuwl check --help > /dev/full`) is reported (exit 3), not lost.
        Err(e) if !e.use_stderr() => {
            let text = e.render().to_string();
            return match write_stdout(text.as_bytes()) {
                Ok(()) => ExitStatus::Ok.into(),
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "gpuwl: writing the help: {err}");
                    ExitStatus::Runtime.into()
                }
            };
        }
        Err(e) => return usage_error(&e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    // The reader limits hold for the whole process, set before anything is read.
    if let Some(l) = LimitArgs::from_leaf(&matches) {
        gpuwl_core::decode::limits::set(l);
    }
    let result = match &cli.command {
        Command::Check(a) => check::run(a),
        Command::Cluster(a) => cluster::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Inventory(a) => inventory::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Kubevirt(a) => kubevirt::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Snapshot(a) => snapshot::run(a),
        Command::Triage(a) => triage::run(a),
        Command::Whatif(a) => whatif::run(a),
        Command::Plan(a) => whatif::run_plan(a),
        Command::Relabel(a) => relabel::run(a),
        Command::Policy(a) => policy::run(a),
        Command::Completions { shell } => completions::run(*shell),
        Command::CompletePods(a) => completions::run_pods(a),
        Command::Complete { words } => completions::run_complete(words),
    };
    match result {
        Ok(status) => status.into(),
        Err(mut e) => {
            // The way out of a missing kubeconfig names the local clusters that run; a
            // refused connection to a local cluster's address names that cluster.
            match &mut e {
                Error::NoKubeconfig { running, .. } => {
                    *running = crate::cluster::list()
                        .into_iter()
                        .filter(|(_, s)| *s == crate::cluster::Status::Running)
                        .map(|(n, _)| n)
                        .collect();
                }
                Error::Cluster {
                    server: Some(server),
                    message,
                    ..
                } => {
                    // A local cluster's own commands; else where the address came from.
                    *message = crate::cluster::server_hint(message, server);
                }
                _ => {}
            }
            let _ = writeln!(std::io::stderr(), "gpuwl: {}", escape_lines(&e.to_string()));
            e.exit_status().into()
        }
    }
}

/// Prints clap's usage error with control characters escaped (an argument may hold an ESC
/// or a newline that would drive the terminal or forge a line; clap quotes it raw) and
/// gives its exit status (2).
fn usage_error(e: &clap::Error) -> ExitCode {
    let _ = std::io::stderr().write_all(escape_lines(&e.render().to_string()).as_bytes());
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// `text` with the control characters of each line escaped ([`gpuwl_core::text::escape_controls`]),
/// its line breaks kept.
fn escape_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match line.strip_suffix('\n') {
            Some(body) => {
                out.push_str(&gpuwl_core::text::escape_controls(body));
                out.push('\n');
            }
            None => out.push_str(&gpuwl_core::text::escape_controls(line)),
        }
    }
    out
}

/// The width clap lays `--help` out for: the terminal's, else `$COLUMNS`, else 100 (clap
/// `output/help_template.rs`, `term_w` and `dimensions`).
fn help_width() -> usize {
    terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .unwrap_or(100)
}

/// `cmd` and every subcommand with the examples of its after-help and long about fitted to
/// `width` ([`gpuwl_core::render::fit_examples`]).
fn fit_help_examples(mut cmd: clap::Command, width: usize) -> clap::Command {
    if let Some(h) = cmd.get_after_help().map(|h| h.to_string()) {
        cmd = cmd.after_help(gpuwl_core::render::fit_examples(&h, width));
    }
    if let Some(h) = cmd.get_long_about().map(|h| h.to_string()) {
        cmd = cmd.long_about(gpuwl_core::render::fit_examples(&h, width));
    }
    // A flag's help is laid out by clap in a column (10 columns in, below the flag, when
    // the help is long): wrapped here to that column's width with a command it names kept
    // whole (`` `kubectl get clusterpolicies -o yaml` ``), clap leaves its lines alone.
    let column = width.saturating_sub(ARG_HELP_INDENT).max(20);
    let ids: Vec<clap::Id> = cmd.get_arguments().map(|a| a.get_id().clone()).collect();
    for id in ids {
        cmd = cmd.mut_arg(id, |a| {
            let fit = |h: &clap::builder::StyledStr| {
                let t = h.to_string();
                if t.lines()
                    .any(|l| gpuwl_core::render::display_width(l) > column)
                {
                    // clap indents every line of the column alike: no hanging indent.
                    let w = gpuwl_core::render::wrap_lines(&t, column);
                    Some(
                        w.lines()
                            .map(|l| l.strip_prefix("  ").unwrap_or(l))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    )
                } else {
                    None
                }
            };
            let long = a.get_long_help().and_then(fit);
            let short = a.get_help().and_then(fit);
            let a = match long {
                Some(l) => a.long_help(l),
                None => a,
            };
            match short {
                Some(h) => a.help(h),
                None => a,
            }
        });
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for n in names {
        cmd = cmd.mut_subcommand(n, |s| fit_help_examples(s, width));
    }
    cmd
}

/// How far in clap starts a flag's help when it puts it below the flag (clap
/// `output/help_template.rs`, `NEXT_LINE_INDENT`).
const ARG_HELP_INDENT: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example command in every `--help` fits 80 columns, or is split with ` \`
    /// into lines that do (issue 42: clap wraps a longer one mid-command, without a `\`,
    /// and the copied line runs a broken command). A `# comment` after it may wrap.
    #[test]
    fn help_examples_fit_80_columns_or_continue_with_a_backslash() {
        fn walk(c: &clap::Command, path: &str, bad: &mut Vec<String>) {
            if let Some(help) = c.get_after_help() {
                let mut continued = false;
                for line in help.to_string().lines() {
                    let t = line.trim_start();
                    let example = ["gpuwl ", "kubectl ", "curl ", "export "]
                        .iter()
                        .any(|p| t.starts_with(p))
                        && line.starts_with("  ");
                    if example || continued {
                        let command = line.split("  #").next().unwrap_or(line).trim_end();
                        if gpuwl_core::render::display_width(command) > 80 {
                            bad.push(format!("{path}: {command}"));
                        }
                        continued = command.ends_with('\\');
                    }
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), bad);
            }
        }
        let mut bad = Vec::new();
        walk(&Cli::command(), "gpuwl", &mut bad);
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}
