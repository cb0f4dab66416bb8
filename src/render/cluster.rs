//! The text of `gpuwl cluster up` and `gpuwl cluster status`.

use std::fmt::Write as _;
use std::path::Path;

use crate::cluster::{self, ClusterInfo, ComponentReport, Status, nodes};
use gpuwl_core::render::esc;

/// What `gpuwl cluster up` prints on stdout: `#` comment lines (state, server, the
/// `new_nodes` plain simulated nodes it created, the kubeconfig) and an eval-safe
/// `export KUBECONFIG=…` line.
pub fn up_summary(
    info: &ClusterInfo,
    was_running: bool,
    new_nodes: u32,
    kubeconfig: &Path,
) -> String {
    let name = &info.name;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# cluster {name} {} at {} (Kubernetes {})",
        if was_running {
            "was already running"
        } else {
            "is running"
        },
        info.server_url(),
        info.kubernetes_version
    );
    if new_nodes > 0 {
        let names: Vec<String> = (0..new_nodes).map(nodes::plain_node_name).collect();
        let _ = writeln!(out, "# simulated nodes (no GPU): {}", names.join(" "));
    }
    let _ = writeln!(out, "# kubeconfig: {}", kubeconfig.display());
    let _ = writeln!(
        out,
        "export KUBECONFIG={}",
        shell_quote(&kubeconfig.display().to_string())
    );
    out
}

/// What `gpuwl cluster status` prints: the state line, one line per component (none
/// when stopped), and the way on — the kubeconfig of a running cluster, how to start a
/// stopped one (naming the `state_left` behind, if any), where the logs of a broken one
/// are. `info` is the running cluster's.
pub fn status_text(
    name: &str,
    st: &Status,
    info: Option<&ClusterInfo>,
    components: &[ComponentReport],
    kubeconfig: &Path,
    state_left: Option<&Path>,
) -> String {
    let mut out = String::new();
    match (st, info) {
        (Status::Running, Some(info)) => {
            let _ = writeln!(
                out,
                "{name}: running at {} (Kubernetes {})",
                info.server_url(),
                info.kubernetes_version
            );
        }
        (Status::Running, None) => {
            let _ = writeln!(out, "{name}: running");
        }
        (Status::Stopped, _) => {
            let _ = writeln!(out, "{name}: stopped");
        }
        (Status::Broken { detail }, _) => {
            let _ = writeln!(out, "{name}: broken: {}", esc(detail));
        }
    }
    for c in components {
        let _ = writeln!(out, "{}", component_line(c));
    }
    match st {
        Status::Running => {
            let _ = writeln!(out, "kubeconfig: {}", kubeconfig.display());
        }
        Status::Stopped => match state_left {
            Some(state) => {
                let _ = writeln!(
                    out,
                    "state left in {} (logs in logs/); start afresh with: gpuwl cluster up --name {name}",
                    state.display()
                );
            }
            None => {
                let _ = writeln!(out, "start it with: gpuwl cluster up --name {name}");
            }
        },
        Status::Broken { .. } => {
            let _ = writeln!(
                out,
                "logs: {}/logs; recover with: gpuwl cluster up --name {name} (restarts it afresh) or gpuwl cluster down --name {name}",
                cluster::state_dir(name).display()
            );
        }
    }
    out
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

/// One line of `gpuwl cluster status` per component: name, pid, ports, health, and the
/// last log line of one that is not running.
fn component_line(c: &ComponentReport) -> String {
    let pid = c
        .pid
        .map(|p| format!("pid {p}"))
        .unwrap_or_else(|| "-".into());
    let ports: Vec<String> = c.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut line = format!(
        "  {:<24} {:<10} {:<33} {}",
        c.component,
        pid,
        ports.join(" "),
        c.health
    );
    if !c.last_log_line.is_empty() {
        line.push_str(&format!(" (last log line: {})", c.last_log_line));
    }
    line.trim_end().to_string()
}
