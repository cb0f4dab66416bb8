//! `gpuwl cluster up|down|status|kubeconfig|build [--name NAME]`: the local control plane
//! (see [`crate::cluster`]).

use crate::cluster::{self, Status, UpOptions};
use gpuwl_core::error::{Error, ExitStatus, Result};

/// Arguments of `gpuwl cluster`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do with the cluster.
    #[command(subcommand)]
    pub action: Action,
    /// Cluster name (state in $GPUWL_STATE_DIR/NAME, default ~/.local/state/gpuwl/clusters/NAME)
    #[arg(long, global = true, default_value = cluster::DEFAULT_NAME)]
    pub name: String,
}

/// What to do with the cluster.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Start the cluster (building the binaries first if needed); idempotent. Prints
    /// the kubeconfig path and an `export KUBECONFIG=...` line (eval-safe)
    Up {
        /// Also add the cluster's context to ~/.kube/config (or $KUBECONFIG's first file)
        /// and make it current; `cluster down` takes it out again
        #[arg(long)]
        set_context: bool,
        /// Plain simulated nodes (kwok-node-0…, 32 CPU, 256 GiB, no GPU) to create when the
        /// cluster starts, so a Deployment has somewhere to run; not when it already runs
        #[arg(long, value_name = "N", default_value_t = 1)]
        nodes: u32,
        /// Also run the real NVIDIA GPU Operator (built from its pinned Go module) with its
        /// CRDs, namespace gpu-operator and a ClusterPolicy with sandbox workloads enabled,
        /// plus gpuwl's device-plugin emulation (the advertised GPU names follow the
        /// operand pods). Operand images are never pulled: kwok runs no containers
        #[arg(long)]
        gpu_operator: bool,
        /// Also run KubeVirt's real virt-api and virt-controller (v1.7.0, built from its
        /// pinned Go module; a cold build takes minutes) with their CRDs, RBAC, webhooks
        /// and a KubeVirt CR; every node gets the labels and devices.kubevirt.io/*
        /// resources virt-handler would publish. VMIs reach Scheduled: no guest runs
        #[arg(long)]
        kubevirt: bool,
        /// Also run Kueue's real manager (v0.17.0, built from its pinned Go module; a cold
        /// build takes minutes) with its CRDs and webhooks (namespace kueue-system,
        /// integrations batch/job and pod): Jobs and pods labelled
        /// kueue.x-k8s.io/queue-name wait for a ClusterQueue's quota
        #[arg(long)]
        kueue: bool,
        /// No progress on stderr
        #[arg(long, short)]
        quiet: bool,
        /// Start afresh: stop the cluster and delete its state first (etcd's objects, its
        /// logs). Without it, `up` never deletes anything: it restarts what died, on the
        /// same data
        #[arg(long)]
        fresh: bool,
    },
    /// Stop every process of the cluster, remove its state and the context
    /// `up --set-context` added
    Down,
    /// Say running / stopped / broken, each component's pid, ports and health, and how to
    /// recover (a health gate: exit 0 only when running with every component healthy, else 3)
    Status,
    /// Print the kubeconfig path (exit 3 when the cluster was never started)
    Kubeconfig,
    /// Build (or find cached) etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler (one program) and kwok, then the NVIDIA GPU Operator; prints the
    /// operator's directory, then the control plane's bin directory (last line)
    Build {
        /// No progress on stderr
        #[arg(long, short)]
        quiet: bool,
        /// Build the control plane only, not the GPU Operator
        #[arg(long)]
        no_gpu_operator: bool,
        /// Also build KubeVirt's virt-api and virt-controller (printed before the control
        /// plane's line)
        #[arg(long)]
        kubevirt: bool,
        /// Also build Kueue's manager (printed before the control plane's line)
        #[arg(long)]
        kueue: bool,
    },
    /// Run the device-plugin emulation against a cluster until stopped (started by
    /// `up --gpu-operator` as a supervised process)
    #[command(hide = true)]
    EmulateDevicePlugins {
        /// Kubeconfig of the cluster
        #[arg(long)]
        kubeconfig: std::path::PathBuf,
    },
    /// Publish on every node what KubeVirt's virt-handler would (labels,
    /// devices.kubevirt.io/*) until stopped (started by `up --kubevirt` as a supervised
    /// process)
    #[command(hide = true)]
    EmulateVirtHandler {
        /// Kubeconfig of the cluster
        #[arg(long)]
        kubeconfig: std::path::PathBuf,
    },
    /// Watch the cluster and restart what exits (started by `up` beside the components)
    #[command(hide = true)]
    Supervise {
        /// The cluster's state directory (on the command line so the process is known as
        /// the cluster's own)
        #[arg(long)]
        state_dir: std::path::PathBuf,
    },
}

/// Runs `gpuwl cluster`.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let name = args.name.as_str();
    cluster::validate_name(name)?;
    match &args.action {
        Action::Up {
            set_context,
            quiet,
            nodes,
            gpu_operator,
            kubevirt,
            kueue,
            fresh,
        } => up(
            name,
            &UpFlags {
                set_context: *set_context,
                quiet: *quiet,
                nodes: *nodes,
                gpu_operator: *gpu_operator,
                kubevirt: *kubevirt,
                kueue: *kueue,
                fresh: *fresh,
            },
        ),
        Action::Down => {
            let existed = cluster::state_dir(name).exists();
            cluster::down(name)?;
            if existed {
                crate::outln!("cluster {name} stopped and its state removed");
            } else {
                crate::outln!(
                    "cluster {name} does not exist; nothing to do{}",
                    cluster::running_elsewhere_hint(name)
                );
            }
            Ok(ExitStatus::Ok)
        }
        Action::Status => status(name),
        Action::Kubeconfig => {
            let p = cluster::kubeconfig_path(name);
            if !p.is_file() {
                return Err(Error::Runtime(format!(
                    "cluster {name} has no kubeconfig ({} missing); run `gpuwl cluster up --name {name}`{}",
                    p.display(),
                    cluster::running_elsewhere_hint(name)
                )));
            }
            crate::outln!("{}", p.display());
            Ok(ExitStatus::Ok)
        }
        Action::Build {
            quiet,
            no_gpu_operator,
            kubevirt,
            kueue,
        } => {
            let dir = cluster::build::ensure_built(!quiet)?;
            if !no_gpu_operator {
                let op = cluster::gpu_operator::ensure_built(!quiet)?;
                crate::outln!("{}", op.display());
            }
            if *kubevirt {
                let kv = cluster::kubevirt::ensure_built(!quiet)?;
                crate::outln!("{}", kv.display());
            }
            if *kueue {
                let k = cluster::kueue::ensure_built(!quiet)?;
                crate::outln!("{}", k.display());
            }
            // The control plane's bin directory stays the last line (scripts take it).
            crate::outln!("{}", dir.display());
            Ok(ExitStatus::Ok)
        }
        Action::Supervise { state_dir } => {
            // Without the trailing slash the command line carries.
            let state: std::path::PathBuf = state_dir.components().collect();
            cluster::supervisor::run(name, &state)?;
            Ok(ExitStatus::Ok)
        }
        Action::EmulateVirtHandler { kubeconfig } => {
            cluster::runtime::current_thread()?.block_on(async {
                let client = cluster::client(kubeconfig, None).await?;
                cluster::kubevirt::emulate_virt_handler(client).await
            })?;
            Ok(ExitStatus::Ok)
        }
        Action::EmulateDevicePlugins { kubeconfig } => {
            cluster::runtime::current_thread()?.block_on(async {
                let client = cluster::client(kubeconfig, None).await?;
                cluster::gpusim::emulate(client, cluster::gpu_operator::NAMESPACE).await
            })?;
            Ok(ExitStatus::Ok)
        }
    }
}

/// The flags of `cluster up`, as [`Action::Up`] holds them.
#[derive(Debug, Clone, Copy)]
struct UpFlags {
    set_context: bool,
    quiet: bool,
    nodes: u32,
    gpu_operator: bool,
    kubevirt: bool,
    kueue: bool,
    fresh: bool,
}

/// `cluster up`: checks where --set-context will write, stops and deletes the cluster
/// first with --fresh, starts it (or finds it running), merges its context, prints the summary.
fn up(name: &str, flags: &UpFlags) -> Result<ExitStatus> {
    let UpFlags {
        set_context,
        quiet,
        nodes,
        gpu_operator,
        kubevirt,
        kueue,
        fresh,
    } = *flags;
    // Where --set-context will write, before anything starts (exit 2, not after
    // the cluster is up).
    if set_context {
        cluster::userconfig::check_target(&cluster::kubeconfig_path(name))?;
    }
    if fresh && cluster::state_dir(name).exists() {
        if !quiet {
            eprintln!(
                "--fresh: stopping cluster {name} and deleting its state ({})",
                cluster::state_dir(name).display()
            );
        }
        cluster::down(name)?;
    }
    let was_running = cluster::status(name)? == Status::Running;
    let h = cluster::up(&UpOptions {
        name: name.to_string(),
        progress: !quiet,
        nodes,
        ports: None,
        gpu_operator,
        kubevirt,
        kueue,
        env: Vec::new(),
        marker: None,
        twin: false,
    })?;
    if set_context {
        let file = cluster::userconfig::merge(&h.kubeconfig, name, &h.state_dir)?;
        if !quiet {
            eprintln!(
                "context {name} added to {} and made current (gpuwl cluster down --name {name} takes it out)",
                file.display()
            );
        }
    }
    let info = cluster::info(name)?;
    let new_nodes = if was_running { 0 } else { nodes };
    crate::out!(
        "{}",
        crate::render::cluster::up_summary(&info, was_running, new_nodes, &h.kubeconfig)
    );
    Ok(ExitStatus::Ok)
}

/// `cluster status`: the state, the components, the supervisor, the restarts; a health
/// gate: exit 0 only when running and every component answers its health endpoint
/// ([`unhealthy`]), else 3.
fn status(name: &str) -> Result<ExitStatus> {
    let st = cluster::status(name)?;
    let info = match st {
        Status::Running => Some(cluster::info(name)?),
        _ => None,
    };
    let components = if st != Status::Stopped {
        cluster::probe(name)?
    } else {
        Vec::new()
    };
    let state = cluster::state_dir(name);
    let state_left = state.exists().then_some(state.as_path());
    if state_left.is_none() && st == Status::Stopped && is_twin_name(name) {
        // A twin whatif or plan deleted: not a cluster to start, nor a slip for another.
        crate::outln!(
            "{}: no such local cluster now: it is the name of the twin gpuwl whatif and gpuwl plan start for a run and delete when it ends (--keep leaves it running)",
            gpuwl_core::render::esc(name)
        );
        return Ok(ExitStatus::Runtime);
    }
    crate::out!(
        "{}",
        crate::render::cluster::status_text(
            name,
            &st,
            info.as_ref(),
            &components,
            &cluster::kubeconfig_path(name),
            state_left,
        )
    );
    if st != Status::Stopped {
        crate::outln!("{}", supervisor_line(&state));
    }
    let restarts = cluster::restarts(name);
    if let Some((when, component, why)) = restarts.last() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        crate::outln!(
            "restarts: {} (last: {} {}: {})",
            restarts.len(),
            gpuwl_core::render::esc(component),
            when_said(*when, now),
            gpuwl_core::render::esc(why)
        );
    }
    if st == Status::Stopped && state_left.is_none() {
        let elsewhere = cluster::running_elsewhere_hint(name);
        if !elsewhere.is_empty() {
            crate::outln!("{}", elsewhere.trim_start_matches("; "));
        }
    }
    let sick = unhealthy(&components);
    if st == Status::Running && !sick.is_empty() {
        crate::outln!(
            "unhealthy: {} (the supervisor restarts a component that exits or wedges; \
             `gpuwl cluster up --name {name}` restarts the cluster)",
            sick.join(", ")
        );
    }
    Ok(match st {
        Status::Running if sick.is_empty() => ExitStatus::Ok,
        Status::Running | Status::Stopped | Status::Broken { .. } => ExitStatus::Runtime,
    })
}

/// The components whose health endpoint did not answer `ok` (or that do not run), each as
/// `name (why)`: what makes `cluster status` fail a running cluster.
fn unhealthy(components: &[cluster::ComponentReport]) -> Vec<String> {
    components
        .iter()
        .filter(|c| c.health != cluster::Health::Healthy)
        .map(|c| format!("{} ({})", c.component, c.health))
        .collect()
}

/// Whether `name` is a twin's name as whatif and plan choose it: the default
/// (`gpuwl-twin`) or the next free one (`gpuwl-twin-2`, …).
fn is_twin_name(name: &str) -> bool {
    name.strip_prefix(crate::twin::DEFAULT_TWIN_NAME)
        .is_some_and(|r| {
            r.is_empty()
                || r.strip_prefix('-')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
        })
}

/// A moment `when` (unix seconds) as `cluster status` says it, seen at `now`: how long ago,
/// and the UTC time of day (`4 min ago, at 17:23:45 UTC`); the date too when it was not
/// within the last day (`3 d ago, at 2026-12-03 17:23:45 UTC`).
fn when_said(when: u64, now: u64) -> String {
    let ago = now.saturating_sub(when);
    let ago = match ago {
        0..60 => format!("{ago} s ago"),
        60..3600 => format!("{} min ago", ago / 60),
        3600..86400 => format!("{} h ago", ago / 3600),
        _ => format!("{} d ago", ago / 86400),
    };
    let secs = when % 86400;
    let clock = format!(
        "{:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if now.saturating_sub(when) < 86400 {
        format!("{ago}, at {clock}")
    } else {
        let (y, m, d) = civil_date(when / 86400);
        format!("{ago}, at {y}-{m:02}-{d:02} {clock}")
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01: years of 365 days, one more
/// every 4th but not every 100th unless every 400th, counted in 400-year eras.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so that the leap day ends a year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// `cluster status`'s line on the supervisor: its pid, or why it is not running.
fn supervisor_line(state: &std::path::Path) -> String {
    use cluster::supervisor;
    match (
        cluster::process::alive(state, supervisor::COMPONENT),
        cluster::state::gave_up(state),
    ) {
        (Some(pid), _) => format!(
            "supervisor: running (pid {pid}; restarts what exits, logs/supervisor.log)"
        ),
        (None, Some(why)) => format!(
            "supervisor: gave up: {} — `gpuwl cluster up` tries again",
            gpuwl_core::render::esc(&why)
        ),
        (None, None) => {
            "supervisor: not running (`gpuwl cluster up` starts it; until then nothing restarts what exits)".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ComponentReport, Health};

    /// Issue 54, item 11: a restart is said as a time a person reads, never unix seconds.
    #[test]
    fn a_restart_is_said_as_how_long_ago_and_when() {
        // 1796531425 = 2026-12-06 04:30:25 UTC.
        assert_eq!(
            when_said(1_796_531_425, 1_796_531_425 + 240),
            "4 min ago, at 04:30:25 UTC"
        );
        assert_eq!(
            when_said(1_796_531_425, 1_796_531_425 + 3 * 86400),
            "3 d ago, at 2026-12-06 04:30:25 UTC"
        );
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(19_783), (2024, 3, 1));
    }

    #[test]
    fn a_running_cluster_whose_api_server_does_not_answer_is_unhealthy() {
        let c = |component, health| ComponentReport {
            component,
            pid: Some(1),
            ports: vec![],
            health,
            last_log_line: String::new(),
        };
        assert!(unhealthy(&[c("etcd", Health::Healthy)]).is_empty());
        assert_eq!(
            unhealthy(&[
                c("etcd", Health::Healthy),
                c("kube-apiserver", Health::Unhealthy("no answer".into())),
                c("kwok", Health::NotRunning),
            ]),
            [
                "kube-apiserver (unhealthy (no answer))",
                "kwok (not running)"
            ]
        );
    }
}
