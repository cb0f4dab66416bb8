//! `gpuwl relabel`: arguments and entry point.

use std::io::Write;
use std::time::Duration;

use crate::input::live::Flavour;
use crate::relabel::{self as live, Clients, Request, Sink};
use gpuwl_core::analysis::relabel::{Disruption, Outcome, StepReport};
use gpuwl_core::analysis::twin::report::Relabel;
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::render::relabel as render_relabel;
use gpuwl_core::render::{self, Format};

const HELP: &str = "\
Examples:
  gpuwl relabel lab-node-1=container --dry-run        # the steps, nothing changed
  gpuwl relabel lab-node-1=container --evict          # evict the pods holding its GPUs
  gpuwl relabel gpu-7=vm-passthrough --stop-vm vms/db-1 --timeout 30m
  gpuwl relabel gpu-9=vm-vgpu:A10-12Q --no-preview -o json
  gpuwl relabel lab-node-1=container                  # again after a stop: it resumes
  gpuwl relabel lab-node-1 --abort                    # end it instead: the labels put back
  gpuwl relabel gpu-1=container gpu-2=container --evict   # one node after the other

Changes a node's nvidia.com/gpu.workload.config on the live cluster the way a careful operator
would, each step printed as it ends with its time:
  preview     the relabel tried on a twin first (as `gpuwl whatif relabel`), its verdict printed
  cordon      nothing new lands on the node
  holders     the pods holding a GPU name there are evicted (--evict, the Eviction API: a
              PodDisruptionBudget is respected, a refused eviction tried again), VMs stopped
              (--stop-vm NS/NAME: the VirtualMachine's runStrategy Halted, as virtctl stop), or
              left running without their GPU (--allow-disruption); then waited out
  relabel     the workload label (and nvidia.com/vgpu.config for NODE=vm-vgpu:TYPE)
  operands    waits until the GPU Operator's operands of the new config run Ready on the node
              (device-plugin and the driver for container; sandbox-device-plugin and vfio-manager
              or the vGPU managers for the VM configs) and no other config's plugin is left
  advertised  waits until the node advertises the new name with the units gpuwl's model expects,
              and the old name is gone or 0
  uncordon    only when this relabel cordoned the node
Before any change it refuses (exit 1) what could never complete, by the model of `check
--effective`: no GPU Operator, sandbox workloads disabled (the label is ignored), the target's
device plugin or vGPU manager not deployed, a node the operator does not see as a GPU node, a
target the operator applies already; --dry-run prints the same refusal. Holders are judged by the
target config: one holding a name the node advertises afterwards keeps its GPU (relabelling back
needs no flag); others need --evict, --stop-vm or --allow-disruption. A preview verdict of `not
recommended` stops the run unless --force or a yes at the terminal. A wait that runs
past --timeout stops the run with the node cordoned: gpuwl never uncordons a node whose operands
are not ready (a driver <-> vfio-pci change may need a reboot of the node). The record of the run
is kept on the node (annotation gpuwl.io/relabel), so the same command run again resumes where it
stopped; --abort ends it instead: the labels from the record put back, the old operands waited
for, the node uncordoned if gpuwl cordoned it, the record removed (resumable itself). Several
nodes are done one at a time, stopping at the first that does not complete (the rest untouched).
Ctrl-C or SIGTERM stops between API calls (exit 130) and says what state the node is in; during
the preview the twin is deleted. A node labelled already, with no run under way, is nothing to do.
Needs: get/patch nodes, list pods and DaemonSets, create pods/eviction, patch virtualmachines.
Exit 0 done, nothing to do, or the dry run's plan · 1 refused (GPU holders, a relabel that cannot
complete, another one under way, a preview not recommended) or a wait timed out (the node stays
cordoned) · 2 bad input (a relabel, a node name, an unknown node, a --stop-vm no VM on the node
matches) · 3 the cluster or the twin failed · 130 interrupted (SIGINT/SIGTERM).";

/// Arguments of `gpuwl relabel`.
#[derive(Debug, clap::Args)]
#[command(after_help = HELP)]
pub struct Args {
    /// NODE=CONFIG (container, vm-passthrough, vm-vgpu), or NODE=vm-vgpu:TYPE; nodes are
    /// relabelled one after another. With --abort: NODE (or NODE=CONFIG, the config not
    /// read).
    #[arg(value_name = "NODE=CONFIG", required = true)]
    pub relabels: Vec<String>,
    /// End the relabel under way on each NODE: the labels it had put back (from the record
    /// in annotation gpuwl.io/relabel), its operands waited for, uncordoned if gpuwl
    /// cordoned it, the record removed.
    #[arg(long, conflicts_with_all = ["evict", "stop_vm", "allow_disruption", "force"])]
    pub abort: bool,
    /// Go on although the preview's verdict is `not recommended` (without it, a terminal
    /// is asked; with no terminal the run stops there).
    #[arg(long)]
    pub force: bool,
    /// Evict the pods that hold a GPU on the node (Eviction API; a VM's virt-launcher pod
    /// as KubeVirt's eviction strategy says).
    #[arg(long)]
    pub evict: bool,
    /// Stop this KubeVirt VM (NS/NAME) through its VirtualMachine; repeatable.
    #[arg(long, value_name = "NS/NAME")]
    pub stop_vm: Vec<String>,
    /// Go on with GPU holders running: they lose their GPU.
    #[arg(long)]
    pub allow_disruption: bool,
    /// Skip the twin's preview.
    #[arg(long)]
    pub no_preview: bool,
    /// Print the steps a run would take; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long each wait may take (holders gone, operands Ready, name advertised): 90s,
    /// 10m, 1h, 500ms; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Name of the preview's twin (a local cluster under gpuwl's state directory).
    #[arg(long, value_name = "NAME", default_value = crate::twin::DEFAULT_TWIN_NAME)]
    pub twin_name: String,
    /// No progress lines of the twin on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Output format: text, a line per step as it ends; json and yaml, the whole report
    /// (every step an object) at the end.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Where the cluster is.
    #[command(flatten)]
    pub live: crate::input::live::ClusterArgs,
}

/// Parses `90s`, `10m`, `1h`, `500ms`, or a bare number of seconds (at least 1 ms).
///
/// Errors: one line naming the accepted forms.
pub(crate) fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!(
            "{}: expected a duration such as 90s, 10m, 1h or 500ms",
            gpuwl_core::text::cut(s)
        )
    })?;
    let d = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => {
            return Err(format!(
                "{}: unknown unit (s, m, h, ms)",
                gpuwl_core::text::cut(s)
            ));
        }
    };
    if d.is_zero() {
        return Err("the timeout must be more than 0".into());
    }
    Ok(d)
}

/// The nodes of `--abort`: NODE or NODE=CONFIG, each a valid node name, each once.
fn aborts(args: &Args) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for a in &args.relabels {
        let node = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        if !gpuwl_core::text::is_dns_subdomain(node) {
            return Err(Error::Input(format!(
                "relabel --abort {}: not a node name (lower-case letters, digits, '-' and '.', \
                 starting and ending with a letter or digit; no '/')",
                gpuwl_core::text::cut(node)
            )));
        }
        if out.iter().any(|o| o == node) {
            return Err(Error::Input(format!(
                "relabel --abort {}: the node is given twice",
                render::esc(node)
            )));
        }
        out.push(node.to_string());
    }
    Ok(out)
}

/// The relabels, parsed; each node once.
fn relabels(args: &Args) -> Result<Vec<Relabel>> {
    let mut out: Vec<Relabel> = Vec::new();
    for r in &args.relabels {
        let r: Relabel = r
            .parse()
            .map_err(|e| Error::Input(format!("relabel {e}")))?;
        if out.iter().any(|o| o.node == r.node) {
            return Err(Error::Input(format!(
                "relabel {}: the node is given twice",
                render::esc(&r.node)
            )));
        }
        out.push(r);
    }
    for vm in &args.stop_vm {
        if vm
            .split_once('/')
            .is_none_or(|(ns, n)| ns.is_empty() || n.is_empty())
        {
            return Err(Error::Input(format!(
                "--stop-vm {}: expected NS/NAME",
                gpuwl_core::text::cut(vm)
            )));
        }
    }
    Ok(out)
}

/// Runs `gpuwl relabel`.
///
/// Errors: [`Error::Input`] for a bad relabel, flag or node; [`Error::Runtime`] and the
/// cluster errors when the cluster or the twin fails. A refusal or a wait that times out
/// is no error: it is reported, and the exit status is 1.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let (relabels, aborts) = if args.abort {
        (Vec::new(), aborts(args)?)
    } else {
        (relabels(args)?, Vec::new())
    };
    crate::cluster::validate_name(&args.twin_name)?;
    let req = Request {
        relabels,
        aborts,
        force: args.force,
        how: Disruption {
            evict: args.evict,
            stop_vms: args.stop_vm.clone(),
            allow: args.allow_disruption,
        },
        timeout: args.timeout,
        dry_run: args.dry_run,
        preview: (!args.no_preview).then(|| crate::twin::Options {
            name: args.twin_name.clone(),
            keep: false,
            settle_timeout: Duration::from_secs(60),
            kubevirt: false,
        }),
    };
    let text = args.output == Format::Text;
    // The header goes out with the first step (or the closing line), never before an
    // input error: stdout stays empty when the run exits 2 (a node the cluster lacks).
    let header =
        std::sync::Mutex::new(text.then(|| render_relabel::header(&args.relabels, args.timeout)));
    let header_out = || -> Result<()> {
        let h = header.lock().ok().and_then(|mut h| h.take());
        match h {
            Some(h) => write(&h),
            None => Ok(()),
        }
    };
    let quiet = args.quiet;
    let width = render::width();
    let mut on_step = |s: &StepReport| {
        if text {
            // A closed stdout must not stop a relabel half-way: the steps go on.
            let _ = header_out();
            let _ = write(&render::wrap_lines(&render_relabel::step_line(s), width));
        }
    };
    let started = std::time::Instant::now();
    let mut progress = |s: &str| {
        if !quiet {
            let _ = writeln!(
                std::io::stderr(),
                "relabel: preview {:>5.1} s  {}",
                started.elapsed().as_secs_f64(),
                render::esc(s)
            );
        }
    };
    // The preview's `not recommended` is asked about only where someone can answer.
    let mut ask = |question: &str| -> Option<bool> {
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        let _ = write!(std::io::stderr(), "{} [y/N] ", render::esc(question));
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).ok()?;
        Some(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
    };
    let report = args.live.block_on(|client| async move {
        let evict = crate::input::live::connect(&args.live, Flavour::NoRetry).await?;
        let clients = Clients {
            api: client,
            evict: evict.client,
        };
        live::run(
            &clients,
            &req,
            Sink::new(&mut on_step, &mut progress, &mut ask),
        )
        .await
    })?;
    match gpuwl_core::render::whatif::serialized(&report, args.output) {
        Some(s) => write(&s)?,
        None => {
            header_out()?;
            if let Some(line) = render_relabel::closing(&report) {
                write(&render::wrap_lines(&line, width))?;
            }
        }
    }
    match report.result {
        Outcome::Done | Outcome::NothingToDo | Outcome::Planned => Ok(ExitStatus::Ok),
        Outcome::Refused | Outcome::TimedOut => {
            let _ = writeln!(
                std::io::stderr(),
                "gpuwl: {}",
                report.message.as_deref().unwrap_or("relabel stopped")
            );
            Ok(ExitStatus::Mismatch)
        }
        Outcome::Interrupted => {
            let _ = writeln!(
                std::io::stderr(),
                "gpuwl: {}",
                report.message.as_deref().unwrap_or("relabel interrupted")
            );
            Ok(ExitStatus::Interrupted)
        }
    }
}

fn write(text: &str) -> Result<()> {
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the relabel's steps", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relabel::DEFAULT_TIMEOUT;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("0").is_err());
        assert!(
            parse_duration("10 min")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("m").is_err());
        assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(600));
    }
}
