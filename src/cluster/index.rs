//! The index of local clusters: which exist under the state root and whether each runs
//! ([`list`], [`status`]), a cluster's recorded facts ([`info`]), and the hints that name
//! the cluster a command was most likely meant for ([`running_elsewhere_hint`],
//! [`server_hint`], [`local_hint`]).

use super::process;
use super::state::{self, ClusterInfo, DEFAULT_NAME, state_dir, validate_name};
use crate::files::state_root;
use crate::input::live::{self, LOCAL_HINT};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Every process ([`process::COMPONENTS`]) is alive.
    Running,
    /// No process is alive (no state at all, or state left from a stopped cluster/reboot).
    Stopped,
    /// Some processes are alive and others died; `detail` names the dead ones and the
    /// last line of their logs.
    Broken {
        /// One line: which component died and why, as far as its log tells.
        detail: String,
    },
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Running => f.write_str("running"),
            Status::Stopped => f.write_str("stopped"),
            Status::Broken { detail } => write!(f, "broken: {detail}"),
        }
    }
}

/// Names of the clusters that have a state directory under [`state_root`] (valid names
/// only), sorted, each with its [`Status`]. Never starts anything; unreadable entries are
/// skipped.
pub fn list() -> Vec<(String, Status)> {
    let Ok(rd) = std::fs::read_dir(state_root()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| validate_name(n).is_ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|n| status(&n).ok().map(|s| (n, s)))
        .collect()
}

/// A hint for a command aimed at cluster `name` that does not run: when no cluster of that
/// name was ever started, the local clusters it was most likely meant to be
/// (`; did you mean eval?`, [`gpuwl_core::text::did_you_mean`]); else the OTHER clusters that
/// run, and the `--name` that reaches them, e.g. `; running now: eval (add --name eval)`.
/// Empty when there is neither.
pub fn running_elsewhere_hint(name: &str) -> String {
    let all = list();
    if !state_dir(name).exists() {
        let mean = text::did_you_mean(
            name,
            all.iter().map(|(n, _)| n.as_str()).filter(|n| *n != name),
        );
        if !mean.is_empty() {
            return mean;
        }
    }
    let running: Vec<String> = all
        .into_iter()
        .filter(|(n, s)| n != name && *s == Status::Running)
        .map(|(n, _)| n)
        .collect();
    match running.as_slice() {
        [] => String::new(),
        [one] => format!("; running now: {one} (add --name {one})"),
        many => format!("; running now: {} (add --name NAME)", many.join(", ")),
    }
}

/// The local cluster whose API server is `server` (`https://127.0.0.1:<port>`), if any
/// has been started (running or stopped).
pub fn at_server(server: &str) -> Option<String> {
    list()
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| info(n).is_ok_and(|i| i.server_url() == server.trim_end_matches('/')))
}

/// `message` (an API error's, ending in [`crate::input::live::LOCAL_HINT`]) with that hint
/// made to fit `server`: a local cluster's own commands ([`local_hint`]: `--name` unless it
/// is the default one), else where the address came from
/// ([`crate::input::live::server_from`]); as it is when neither is known. One place for
/// every command's error line and serve's log.
pub fn server_hint(message: &str, server: &str) -> String {
    let Some(head) = message.strip_suffix(LOCAL_HINT) else {
        return message.to_owned();
    };
    let hint = match at_server(server) {
        Some(name) => Some(local_hint(&name)),
        None => live::server_from().map(|from| format!(" (the address is that of {from})")),
    };
    match hint {
        Some(h) => format!("{head}{h}"),
        None => message.to_owned(),
    }
}

/// What to run about local cluster `name` when its API server does not answer:
/// ` (the local cluster eval: gpuwl cluster status --name eval; gpuwl cluster up --name
/// eval starts it again)`; without `--name` for the default cluster.
pub fn local_hint(name: &str) -> String {
    let flag = if name == DEFAULT_NAME {
        String::new()
    } else {
        format!(" --name {name}")
    };
    let which = if name == DEFAULT_NAME {
        "the local control plane".to_owned()
    } else {
        format!("the local cluster {name}")
    };
    format!(" ({which}: gpuwl cluster status{flag}; gpuwl cluster up{flag} starts it again)")
}

/// Reads `<state>/cluster.json` of cluster `name`.
///
/// Errors: [`Error::Runtime`] when the cluster was never started or the file is corrupt.
pub fn info(name: &str) -> Result<ClusterInfo> {
    let p = state_dir(name).join("cluster.json");
    let text = std::fs::read_to_string(&p).map_err(|_| {
        Error::runtime(format!(
            "cluster {name:?} has not been started (no {}); run `gpuwl cluster up --name {name}`{}",
            p.display(),
            running_elsewhere_hint(name)
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::failed(format!("corrupt {}", p.display()), e))
}

/// Process-level status of cluster `name` (see [`Status`]). Never starts anything.
///
/// Errors: [`Error::Input`] for an invalid name.
pub fn status(name: &str) -> Result<Status> {
    validate_name(name)?;
    let state = state_dir(name);
    if !state.join("pids").is_dir() {
        return Ok(Status::Stopped);
    }
    let mut dead = Vec::new();
    let all: Vec<&str> = process::COMPONENTS
        .into_iter()
        .chain(process::started_optional(&state))
        .collect();
    for &c in &all {
        if process::alive(&state, c).is_none() {
            dead.push(c);
        }
    }
    if dead.is_empty() {
        Ok(Status::Running)
    } else if dead.len() == all.len() {
        Ok(Status::Stopped)
    } else {
        let gave_up = state::gave_up(&state);
        let detail = gave_up
            .into_iter()
            .chain(dead.iter().map(|c| {
                let last = process::last_log_line(&state, c);
                if last.is_empty() {
                    format!("{c} is not running")
                } else {
                    format!("{c} is not running (last log line: {last})")
                }
            }))
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Status::Broken { detail })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_hint_names_the_cluster_unless_it_is_the_default_one() {
        assert_eq!(
            local_hint("eval"),
            " (the local cluster eval: gpuwl cluster status --name eval; gpuwl cluster up --name eval starts it again)"
        );
        assert_eq!(
            local_hint(DEFAULT_NAME),
            " (the local control plane: gpuwl cluster status; gpuwl cluster up starts it again)"
        );
    }
}
