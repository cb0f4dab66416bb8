//! The supervisor of one local cluster: a `gpuwl cluster supervise` process that
//! [`super::up`] starts beside the components and that restarts, with the flags, ports and
//! data in `cluster.json`, any component that exits — etcd's objects, the user's CRDs and
//! the logs that say why it died are kept (the dead component's log is set aside, the
//! restart recorded in `restarts.log`, which `gpuwl cluster status` shows).
//!
//! - Polled every [`POLL`]: each component's process ([`super::process::alive`]); every
//!   [`KWOK_CHECK_EVERY`] also kwok's node leases — kwok v0.8.0 can stay alive and answer
//!   `/healthz` while it renews no lease (see `cluster::kwok_wedged`); two findings in a row
//!   restart it (one could be a stalled API server it has not caught up with yet).
//! - A restart loop — [`LOOP_LIMIT`] restarts of one component within [`LOOP_WINDOW`] —
//!   stops the supervisor: it writes why to `<state>/supervisor.broken`, which makes the
//!   cluster `broken` with that reason in [`super::status`], every log kept; the next
//!   `gpuwl cluster up` tries again and starts a new supervisor.
//! - Restarts by the supervisor and by `cluster up` take `<state>/restart.lock`, so the two
//!   never start one component twice.
//! - It runs as the gpuwl binary that started the cluster ([`binary`]); a cluster started
//!   from another program (a test binary calling [`super::up`]) runs unsupervised, as
//!   before, and is recovered by the next `cluster up`.
//!
//! `gpuwl cluster down` stops the supervisor first ([`super::process::stop_all`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::process;
use super::recipe::{Component, Layout, Readiness, StartWhen};
use gpuwl_core::error::{Error, Result};

/// The supervisor's name among a cluster's processes ([`process::SUPERVISOR`]).
pub const COMPONENT: &str = process::SUPERVISOR;

/// How often the supervisor looks at the processes.
pub const POLL: Duration = Duration::from_secs(2);

/// How often it reads kwok's node leases (a list call against the API server): 15 s, so
/// that two findings in a row come well inside the node grace period
/// (`cluster::lease_stale_after`).
pub const KWOK_CHECK_EVERY: Duration = Duration::from_secs(15);

/// How often the supervisor reads kwok's node leases: [`KWOK_CHECK_EVERY`] for the
/// 200 s leases, in proportion to a shorter lease set for a test
/// ([`super::recipe::NODE_LEASE_ENV`]), never under [`POLL`].
pub fn kwok_check_every() -> Duration {
    let lease = super::recipe::node_lease_seconds();
    (KWOK_CHECK_EVERY * lease as u32 / 200).max(POLL)
}

/// The longest a wedged kwok goes unrenewed before the supervisor has restarted it, for
/// leases of `lease`: the lease found stale ([`super::lease_stale_after`]: half of it), a
/// check interval to see it, another for the second finding, one [`POLL`], and
/// [`KWOK_RESTART_BUDGET`] to stop, start and have the new kwok renew.
pub fn worst_kwok_restart(lease: Duration, check_every: Duration) -> Duration {
    super::leases::lease_stale_after(i32::try_from(lease.as_secs()).ok())
        + 2 * check_every
        + POLL
        + KWOK_RESTART_BUDGET
}

/// What a kwok restart may take, from the stop (2 s for SIGTERM, then SIGKILL) to its
/// first lease renewal.
pub(crate) const KWOK_RESTART_BUDGET: Duration = Duration::from_secs(10);

/// Restarts of one component within [`LOOP_WINDOW`] that count as a restart loop.
pub(crate) const LOOP_LIMIT: usize = 5;

/// The window of [`LOOP_LIMIT`].
pub(crate) const LOOP_WINDOW: Duration = Duration::from_secs(60);

/// The gpuwl binary to run the supervisor with: this process's executable when it is
/// gpuwl itself (`gpuwl`, or `kubectl-gpuwl` as krew installs it); `None` otherwise (a
/// test binary linking the library), and then the cluster is not supervised.
pub fn binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let name = me.file_name()?.to_str()?;
    matches!(name, "gpuwl" | "kubectl-gpuwl").then_some(me)
}

/// The supervisor's process: `<gpuwl> cluster supervise --name NAME --state-dir STATE/`
/// (the state directory is on its command line, so [`process::is_ours_and_alive`]
/// recognises it). No port; ready once it runs.
pub fn component(l: &Layout<'_>, gpuwl: &Path) -> Component {
    Component {
        name: COMPONENT,
        binary: gpuwl.to_path_buf(),
        args: vec![
            "cluster".into(),
            "supervise".into(),
            "--name".into(),
            l.info.name.clone(),
            "--state-dir".into(),
            format!("{}/", l.state.display()),
        ],
        env: Vec::new(),
        ports: Vec::new(),
        endpoint: "restarts what exits".into(),
        start: StartWhen::AfterApiServer,
        readiness: Readiness::Listening,
    }
}

/// Starts the supervisor of the running cluster `name` unless one runs or [`binary`] is
/// `None`; clears a `supervisor.broken` left by an earlier one. Returns its pid, if any.
///
/// Errors: [`Error::Runtime`] when `cluster.json` cannot be read or the process cannot be
/// started.
pub fn ensure(name: &str, state: &Path) -> Result<Option<u32>> {
    if let Some(pid) = process::alive(state, COMPONENT) {
        return Ok(Some(pid));
    }
    let Some(gpuwl) = binary() else {
        return Ok(None);
    };
    let _ = std::fs::remove_file(super::state::broken_file(state));
    let info = super::index::info(name)?;
    let c = component(&Layout { info: &info, state }, &gpuwl);
    process::spawn(state, &c).map(Some)
}

/// Restart times of each component, to tell a restart loop from a crash now and then.
#[derive(Debug, Default)]
pub(crate) struct RestartHistory {
    seen: BTreeMap<String, Vec<Instant>>,
}

impl RestartHistory {
    /// Records restarts of `components` at `now`; returns the reason to give up when one
    /// of them reached [`LOOP_LIMIT`] restarts within [`LOOP_WINDOW`] (this one included).
    pub fn record(&mut self, components: &[&str], now: Instant) -> Option<String> {
        let mut looping = None;
        for c in components {
            let times = self.seen.entry((*c).to_owned()).or_default();
            times.retain(|t| now.duration_since(*t) < LOOP_WINDOW);
            times.push(now);
            if times.len() >= LOOP_LIMIT && looping.is_none() {
                looping = Some(format!(
                    "{c} exited {} times within {} s: a restart loop; the supervisor stopped restarting (logs kept in logs/)",
                    times.len(),
                    LOOP_WINDOW.as_secs()
                ));
            }
        }
        looping
    }
}

/// One line on the supervisor's log (stderr, which [`process::spawn`] points at
/// `logs/supervisor.log`), stamped with the unix time.
fn log(msg: &str) {
    use std::io::Write as _;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let _ = writeln!(std::io::stderr(), "{now} supervisor: {msg}");
}

/// The supervisor's loop (`gpuwl cluster supervise`); returns when the cluster is gone
/// (`cluster.json` removed), when another supervisor replaced this one (the pid file names
/// another process), or after a restart loop (then with an error, having written
/// `supervisor.broken`).
///
/// Errors: [`Error::Runtime`] after a restart loop.
pub fn run(name: &str, state: &Path) -> Result<()> {
    let me = std::process::id();
    let mut history = RestartHistory::default();
    let mut last_kwok_check = Instant::now();
    let mut kwok_findings = 0;
    log(&format!("watching cluster {name:?} (pid {me})"));
    loop {
        std::thread::sleep(POLL);
        if !state.join("cluster.json").is_file()
            || process::recorded_pid(state, COMPONENT) != Some(me)
        {
            log("the cluster is gone or another supervisor took over; exiting");
            return Ok(());
        }
        let mut dead: Vec<&str> = process::COMPONENTS
            .into_iter()
            .filter(|c| process::alive(state, c).is_none())
            .collect();
        let mut detail: Vec<String> = dead.iter().map(|c| exited(state, c)).collect();
        if dead.is_empty() && last_kwok_check.elapsed() >= kwok_check_every() {
            last_kwok_check = Instant::now();
            match super::leases::kwok_wedged(name) {
                Some(w) => {
                    kwok_findings += 1;
                    log(&format!("{w} (finding {kwok_findings} of 2)"));
                    if kwok_findings >= 2 {
                        kwok_findings = 0;
                        // A wedged kwok may not act on SIGTERM (a stopped one cannot):
                        // 2 s, then SIGKILL; it keeps no state worth a longer wait.
                        process::stop_one(state, "kwok-controller", Duration::from_secs(2))?;
                        dead.push("kwok-controller");
                        detail.push(format!("kwok-controller wedged: {w}"));
                    }
                }
                None => kwok_findings = 0,
            }
        }
        let operator_dead: Vec<&str> = process::started_optional(state)
            .into_iter()
            .filter(|c| process::alive(state, c).is_none())
            .collect();
        if dead.is_empty() && operator_dead.is_empty() {
            continue;
        }
        let all: Vec<&str> = dead.iter().chain(&operator_dead).copied().collect();
        if let Some(why) = history.record(&all, Instant::now()) {
            log(&why);
            let _ = std::fs::write(super::state::broken_file(state), format!("{why}\n"));
            return Err(Error::Runtime(why));
        }
        if !dead.is_empty() {
            log(&format!("restarting {}", detail.join("; ")));
            match super::restart::restart_dead(name, state, false, &detail.join("; ")) {
                Ok(()) => log(&format!("{} running again", dead.join(", "))),
                Err(e) => log(&format!("restart failed: {e}")),
            }
        }
        if !operator_dead.is_empty() {
            log(&format!("restarting {}", operator_dead.join(", ")));
            for c in &operator_dead {
                let _ = std::fs::remove_file(state.join("pids").join(format!("{c}.pid")));
            }
            let kubevirt = operator_dead
                .iter()
                .any(|c| super::kubevirt::COMPONENTS.contains(c));
            let kueue = operator_dead
                .iter()
                .any(|c| super::kueue::COMPONENTS.contains(c));
            let operator = operator_dead.iter().any(|c| {
                !super::kubevirt::COMPONENTS.contains(c) && !super::kueue::COMPONENTS.contains(c)
            });
            let mut result = Ok(());
            if operator {
                result = super::gpu_operator::start(name, state, false);
            }
            if kubevirt && result.is_ok() {
                result = super::kubevirt::start(name, state, false);
            }
            if kueue && result.is_ok() {
                result = super::kueue::start(name, state, false);
            }
            match result {
                Ok(()) => log(&format!("{} running again", operator_dead.join(", "))),
                Err(e) => log(&format!("restart failed: {e}")),
            }
        }
    }
}

/// `"<component> exited (last log line: …)"`, the words `restarts.log` keeps.
fn exited(state: &Path, c: &str) -> String {
    let last = process::last_log_line(state, c);
    if last.is_empty() {
        format!("{c} exited")
    } else {
        format!("{c} exited (last log line: {last})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_exits_in_a_minute_are_a_loop_four_are_not() {
        let mut h = RestartHistory::default();
        let t0 = Instant::now();
        for i in 0..4 {
            assert_eq!(
                h.record(&["kube-scheduler"], t0 + Duration::from_secs(i * 10)),
                None
            );
        }
        // Another component's restarts do not count towards the scheduler's.
        assert_eq!(h.record(&["etcd"], t0 + Duration::from_secs(41)), None);
        let why = h
            .record(&["kube-scheduler"], t0 + Duration::from_secs(45))
            .unwrap();
        assert_eq!(
            why,
            "kube-scheduler exited 5 times within 60 s: a restart loop; the supervisor stopped restarting (logs kept in logs/)"
        );
    }

    #[test]
    fn restarts_older_than_the_window_are_forgotten() {
        let mut h = RestartHistory::default();
        let t0 = Instant::now();
        // One every 20 s: never more than 3 in any 60 s.
        for i in 0..10 {
            assert_eq!(
                h.record(&["kwok-controller"], t0 + Duration::from_secs(i * 20)),
                None,
                "restart {i}"
            );
        }
    }

    #[test]
    fn the_supervisor_runs_only_as_gpuwl() {
        // This test binary is not gpuwl: a cluster it starts is not supervised.
        assert_eq!(binary(), None);
    }
}
