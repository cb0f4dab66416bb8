//! Restarting the components of a broken cluster that died, with the flags, ports and data
//! it was started with ([`restart_dead`]): what `gpuwl cluster up` and the supervisor do
//! instead of starting afresh.

use std::path::Path;
use std::time::Duration;

use super::index::info;
use super::leases::delete_node_leases;
use super::readiness::{StartError, Watch, wait_ready};
use super::runtime::{block_on_own_thread, on_own_thread};
use super::{lock, pki, ports, process, recipe};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

/// How long a restart waits for a dead component's ports to be released by its exiting
/// process ([`ports::wait_free`]) before starting on them anyway.
const PORT_FREE_WAIT: Duration = Duration::from_secs(10);

/// Starts again, with the flags and ports in the cluster's `cluster.json`, every component
/// of a broken cluster that is not running, and waits until the cluster is ready. Each dead
/// component's log is kept aside (`logs/<component>.<unix time>.log`) and the restart is
/// recorded in `restarts.log` (time, component, why: `detail`'s words), which `gpuwl
/// cluster status` shows.
///
/// Errors: [`Error::Runtime`] when `cluster.json` is unreadable, a component cannot be
/// started (its port taken by another process since), or the cluster is not ready in 120 s.
pub(super) fn restart_dead(name: &str, state: &Path, progress: bool, detail: &str) -> Result<()> {
    // The supervisor and `cluster up` never restart one component twice.
    let _restarting = lock::lock_waiting(
        &state.join("restart.lock"),
        Duration::from_secs(180),
        |_| {},
    )?;
    let info = info(name)?;
    // A cluster made before etcd had client-certificate TLS gets its files now.
    pki::ensure_etcd(&state.join("pki"), name)?;
    let mut components = recipe::components(&recipe::Layout { info: &info, state });
    for c in &mut components {
        c.env.extend(info.env.iter().cloned());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut watch = Watch::new(state);
    let mut record = String::new();
    if process::alive(state, "kwok-controller").is_none() {
        // kwok v0.8.0, restarted, tries to create each node's lease, fails with "already
        // exists" (the old process held it) and never renews it (its
        // pkg/kwok/controllers/node_lease_controller.go): the leases go first, the new
        // kwok creates them afresh. Best effort: a dead API server has none to give.
        let kubeconfig = state.join("kubeconfig");
        let _ = block_on_own_thread(async move { delete_node_leases(&kubeconfig).await });
    }
    // A component killed a moment ago may still hold its ports while it exits: wait for
    // them (bounded) before starting its successor on them.
    let dead_ports: Vec<u16> = info
        .ports()
        .by_component()
        .into_iter()
        .filter(|&(c, _)| process::alive(state, c).is_none())
        .map(|(_, p)| p)
        .collect();
    let _ = ports::wait_free(&dead_ports, PORT_FREE_WAIT);
    for c in &components {
        if process::alive(state, c.name).is_some() {
            watch.started.push((c.name, false));
            continue;
        }
        let log = process::log_file(state, c.name);
        if log.exists() {
            let kept = log.with_file_name(format!("{}.{now}.log", c.name));
            let _ = std::fs::rename(&log, &kept);
        }
        if progress {
            note!("restarting {} on {}", c.name, c.endpoint);
        }
        watch
            .spawn(c)
            .map_err(|e| Error::runtime(format!("cannot restart {}: {e}", c.name)))?;
        let why = detail
            .split("; ")
            .find(|d| d.starts_with(c.name))
            .unwrap_or("not running");
        record.push_str(&format!("{now} {} {}\n", c.name, one_line(why)));
    }
    if !record.is_empty() {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(state.join("restarts.log"))
        {
            let _ = f.write_all(record.as_bytes());
        }
    }
    let kubeconfig = state.join("kubeconfig");
    on_own_thread(move || {
        wait_ready(
            &mut watch,
            &kubeconfig,
            &components,
            0,
            None,
            Duration::from_secs(120),
        )
        .map_err(StartError::into_error)
    })
}

/// `s` on one line, control characters escaped.
fn one_line(s: &str) -> String {
    text::esc(&s.replace('\n', " "))
}
