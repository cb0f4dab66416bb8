//! `gpuwl cluster up|down|status|kubeconfig|build [--name NAME]`: the local control plane
//! (see [`crate::cluster`]).

use std::path::Path;

use crate::cluster::{self, Status, UpOptions};
use crate::error::{Error, ExitStatus, Result};

/// Arguments of `gpuwl cluster`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
    /// Cluster name (state in ~/.local/state/gpuwl/clusters/NAME)
    #[arg(long, global = true, default_value = cluster::DEFAULT_NAME)]
    pub name: String,
}

/// What to do with the cluster.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Start the cluster (building the binaries first if needed); idempotent. Prints
    /// the kubeconfig path and an `export KUBECONFIG=...` line (eval-safe)
    Up {
        /// Also add the cluster's context to ~/.kube/config and make it current
        #[arg(long)]
        set_context: bool,
        /// No progress on stderr
        #[arg(long, short)]
        quiet: bool,
    },
    /// Stop every process of the cluster and remove its state
    Down,
    /// Say running / stopped / broken and how to recover (exit 0 only when running)
    Status,
    /// Print the kubeconfig path (exit 3 when the cluster was never started)
    Kubeconfig,
    /// Build (or find cached) etcd, kube-apiserver, kube-scheduler, kwok and kwokctl;
    /// prints the bin directory
    Build {
        /// No progress on stderr
        #[arg(long, short)]
        quiet: bool,
    },
}

/// Runs `gpuwl cluster`.
pub fn run(args: &Args) -> Result<ExitStatus> {
    let name = args.name.as_str();
    cluster::validate_name(name)?;
    match &args.action {
        Action::Up { set_context, quiet } => {
            let was_running = cluster::status(name)? == Status::Running;
            let h = cluster::up(&UpOptions {
                name: name.to_string(),
                progress: !quiet,
            })?;
            if *set_context {
                set_context_in_user_kubeconfig(&h.kubeconfig, name)?;
            }
            let info = cluster::info(name)?;
            let q = shell_quote(&h.kubeconfig.display().to_string());
            crate::outln!(
                "# cluster {name} {} at {} (Kubernetes {})",
                if was_running {
                    "was already running"
                } else {
                    "is running"
                },
                info.server_url(),
                info.kubernetes_version
            );
            crate::outln!("# kubeconfig: {}", h.kubeconfig.display());
            crate::outln!("export KUBECONFIG={q}");
            Ok(ExitStatus::Ok)
        }
        Action::Down => {
            let existed = cluster::state_dir(name).exists();
            cluster::down(name)?;
            if existed {
                crate::outln!("cluster {name} stopped and its state removed");
            } else {
                crate::outln!("cluster {name} does not exist; nothing to do");
            }
            Ok(ExitStatus::Ok)
        }
        Action::Status => match cluster::status(name)? {
            Status::Running => {
                let info = cluster::info(name)?;
                crate::outln!("{name}: running at {}", info.server_url());
                crate::outln!("kubeconfig: {}", cluster::kubeconfig_path(name).display());
                Ok(ExitStatus::Ok)
            }
            Status::Stopped => {
                crate::outln!("{name}: stopped");
                if cluster::state_dir(name).exists() {
                    crate::outln!(
                        "state left in {} (logs in logs/); start afresh with: gpuwl cluster up --name {name}",
                        cluster::state_dir(name).display()
                    );
                } else {
                    crate::outln!("start it with: gpuwl cluster up --name {name}");
                }
                Ok(ExitStatus::Runtime)
            }
            Status::Broken { detail } => {
                crate::outln!("{name}: broken: {detail}");
                crate::outln!(
                    "logs: {}/logs; recover with: gpuwl cluster up --name {name} (restarts it afresh) or gpuwl cluster down --name {name}",
                    cluster::state_dir(name).display()
                );
                Ok(ExitStatus::Runtime)
            }
        },
        Action::Kubeconfig => {
            let p = cluster::kubeconfig_path(name);
            if !p.is_file() {
                return Err(Error::Runtime(format!(
                    "cluster {name} has no kubeconfig ({} missing); run `gpuwl cluster up --name {name}`",
                    p.display()
                )));
            }
            crate::outln!("{}", p.display());
            Ok(ExitStatus::Ok)
        }
        Action::Build { quiet } => {
            let dir = cluster::build::ensure_built(!quiet)?;
            crate::outln!("{}", dir.display());
            Ok(ExitStatus::Ok)
        }
    }
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Merges the cluster's cluster/context/user into `$KUBECONFIG`'s first file or
/// `~/.kube/config` and makes its context current. Only on `--set-context`.
fn set_context_in_user_kubeconfig(ours: &Path, name: &str) -> Result<()> {
    use kube::config::Kubeconfig;
    let target = std::env::var_os("KUBECONFIG")
        .and_then(|v| std::env::split_paths(&v).next())
        .filter(|p| !p.as_os_str().is_empty() && p != ours)
        .unwrap_or_else(|| cluster::build::home().join(".kube").join("config"));
    let err = |e: &dyn std::fmt::Display| {
        Error::Runtime(format!("cannot update {}: {e}", target.display()))
    };
    let mine = Kubeconfig::read_from(ours).map_err(|e| err(&e))?;
    let mut theirs = if target.is_file() {
        Kubeconfig::read_from(&target).map_err(|e| err(&e))?
    } else {
        Kubeconfig::default()
    };
    theirs.clusters.retain(|c| c.name != name);
    theirs.contexts.retain(|c| c.name != name);
    theirs
        .auth_infos
        .retain(|a| a.name != format!("{name}-admin"));
    theirs.clusters.extend(mine.clusters);
    theirs.contexts.extend(mine.contexts);
    theirs.auth_infos.extend(mine.auth_infos);
    theirs.current_context = Some(name.to_string());
    if theirs.api_version.is_none() {
        theirs.api_version = Some("v1".into());
        theirs.kind = Some("Config".into());
    }
    let text = serde_saphyr::to_string(&theirs).map_err(|e| err(&e))?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| err(&e))?;
    }
    std::fs::write(&target, text).map_err(|e| err(&e))?;
    eprintln!(
        "context {name} added to {} and made current",
        target.display()
    );
    Ok(())
}
