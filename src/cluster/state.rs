//! Where a local cluster's state lives and what it records: the state directory
//! ([`state_dir`], under [`crate::files::state_root`]), its kubeconfig, `cluster.json`
//! ([`ClusterInfo`]), `restarts.log` ([`restarts`]), the supervisor's `broken` file
//! ([`gave_up`]) and the lock files other commands leave beside it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock;
use super::ports::Ports;
use crate::files::state_root;
use gpuwl_core::error::{DEFAULT_CLUSTER_NAME, Error, Result};

/// The default cluster name of `gpuwl cluster` and `gpuwl lab` (the core's
/// [`gpuwl_core::error::DEFAULT_CLUSTER_NAME`], which the error messages use too).
pub const DEFAULT_NAME: &str = DEFAULT_CLUSTER_NAME;

/// A running cluster, as returned by [`up`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterHandle {
    /// The cluster name.
    pub name: String,
    /// Kubeconfig file (context named after the cluster, client-certificate auth).
    pub kubeconfig: PathBuf,
    /// Directory holding all the cluster's state (certs, etcd data, pids, logs).
    pub state_dir: PathBuf,
}

/// Ports and binaries of a started cluster, saved as `<state>/cluster.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// Cluster name.
    pub name: String,
    /// Port of the API server (HTTPS on 127.0.0.1).
    pub apiserver_port: u16,
    /// etcd client port (HTTPS on 127.0.0.1, client certificates of etcd's own CA only).
    pub etcd_port: u16,
    /// etcd peer port.
    pub etcd_peer_port: u16,
    /// kube-controller-manager secure port (HTTPS on 127.0.0.1, `/healthz` open); 0 in
    /// the `cluster.json` of a cluster started before it ran one.
    #[serde(default)]
    pub controller_manager_port: u16,
    /// kube-scheduler secure port (HTTPS on 127.0.0.1, `/healthz` open).
    pub scheduler_port: u16,
    /// kwok-controller server port (HTTPS on 127.0.0.1, `/healthz`).
    pub kwok_port: u16,
    /// Directory of the binaries that were started.
    pub bin_dir: PathBuf,
    /// Kubernetes version of the binaries.
    pub kubernetes_version: String,
    /// The GPU Operator's health-probe port (plain HTTP on 127.0.0.1, `/healthz`); 0 when
    /// it was not started ([`gpu_operator::start`]).
    #[serde(default)]
    pub gpu_operator_port: u16,
    /// virt-api's HTTPS port (127.0.0.1, `/healthz`); 0 when KubeVirt was not started
    /// ([`kubevirt::start`]).
    #[serde(default)]
    pub kubevirt_api_port: u16,
    /// virt-controller's HTTPS port (127.0.0.1, `/healthz`, `/metrics`); 0 when KubeVirt
    /// was not started.
    #[serde(default)]
    pub kubevirt_controller_port: u16,
    /// Kueue's webhook HTTPS port (127.0.0.1); 0 when Kueue was not started
    /// ([`kueue::start`]).
    #[serde(default)]
    pub kueue_webhook_port: u16,
    /// Kueue's health-probe port (plain HTTP on 127.0.0.1, `/healthz`, `/readyz`); 0 when
    /// Kueue was not started.
    #[serde(default)]
    pub kueue_health_port: u16,
    /// Environment variables added to every component's when the cluster was started
    /// ([`UpOptions::env`]); a restart ([`supervisor`], `cluster up` on a broken cluster)
    /// starts a component with the same.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Started as a twin ([`UpOptions::twin`]): the API server without the
    /// TaintNodesByCondition admission plugin, kube-controller-manager without its TTL
    /// controller, kwok leaving pods labelled [`super::recipe::KWOK_LEAVE_PENDING_LABEL`]
    /// alone. A restart starts the components the same way. False in the `cluster.json` of
    /// a cluster started before the field existed.
    #[serde(default)]
    pub twin: bool,
}

impl ClusterInfo {
    /// `https://127.0.0.1:<apiserver_port>`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// The ports, as one value.
    pub fn ports(&self) -> Ports {
        Ports {
            apiserver: self.apiserver_port,
            etcd: self.etcd_port,
            etcd_peer: self.etcd_peer_port,
            controller_manager: self.controller_manager_port,
            scheduler: self.scheduler_port,
            kwok: self.kwok_port,
        }
    }
}

/// Checks a cluster name (see [`UpOptions::name`]); [`Error::Input`] otherwise.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "invalid cluster name {name:?}: use 1-40 characters of a-z, 0-9 and '-', not starting with '-'"
        )))
    }
}

/// State directory of cluster `name` (may not exist).
pub fn state_dir(name: &str) -> PathBuf {
    state_root().join(name)
}

/// Kubeconfig path of cluster `name`: `<state_dir>/kubeconfig`. The file exists only
/// while the cluster has been started.
pub fn kubeconfig_path(name: &str) -> PathBuf {
    state_dir(name).join("kubeconfig")
}

/// Whether a cluster's state holds data worth keeping: its `cluster.json` and etcd's data
/// directory.
pub(super) fn has_data(state: &Path) -> bool {
    state.join("cluster.json").is_file() && state.join("etcd").is_dir()
}

pub(super) fn remove_state(state: &Path) -> Result<()> {
    if state.exists() {
        std::fs::remove_dir_all(state)
            .map_err(|e| Error::failed(format!("cannot remove stale {}", state.display()), e))?;
    }
    Ok(())
}

/// Removes the lock files other commands leave beside cluster state `state`
/// (`<name>.lab.lock` of `gpuwl lab`, `<name>.lock`), each only when no process holds it:
/// taken first, then unlinked while held, so a holder is never robbed of it.
pub(super) fn remove_lock_files(state: &Path) {
    let Some(name) = state.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    for file in [format!("{name}.lab.lock"), format!("{name}.lock")] {
        let path = state.with_file_name(file);
        if !path.exists() {
            continue;
        }
        if let Ok(Some(_held)) = lock::try_lock(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The restarts recorded for a cluster (`restarts.log`, oldest first): (unix time,
/// component, why).
pub fn restarts(name: &str) -> Vec<(u64, String, String)> {
    let Ok(text) = std::fs::read_to_string(state_dir(name).join("restarts.log")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let t = parts.next()?.parse().ok()?;
            let c = parts.next()?.to_owned();
            Some((t, c, parts.next().unwrap_or("").to_owned()))
        })
        .collect()
}

/// The file a supervisor that gave up writes its reason to (one line).
pub fn broken_file(state: &Path) -> PathBuf {
    state.join("supervisor.broken")
}

/// Why the supervisor gave up on this cluster, when it did (`supervisor.broken`).
pub fn gave_up(state: &Path) -> Option<String> {
    std::fs::read_to_string(broken_file(state))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_removes_the_lock_files_left_beside_the_state_unless_held() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("c1");
        let lab = root.path().join("c1.lab.lock");
        let twin = root.path().join("c1.lock");
        let other = root.path().join("c2.lab.lock");
        for f in [&lab, &twin, &other] {
            std::fs::write(f, "").unwrap();
        }
        let held = lock::try_lock(&twin).unwrap().unwrap();
        remove_lock_files(&state);
        assert!(!lab.exists());
        assert!(twin.exists(), "held by a running command");
        assert!(other.exists(), "another cluster's");
        drop(held);
        remove_lock_files(&state);
        assert!(!twin.exists());
    }
}
