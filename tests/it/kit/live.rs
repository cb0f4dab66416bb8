//! The local control plane in a live test: a test's own cluster (started fresh, stopped
//! however the test ends), a lab played on it, a kube client for its kubeconfig, and the
//! gate that lets a few live tests run at once, longest first.

use std::sync::{Condvar, Mutex};

use super::run::{gpuwl, gpuwl_ok};

/// Plays `gpuwl lab` on the local control plane `cluster`, results in a fresh temporary
/// root; returns that root (kept alive by the caller) and the cluster's kubeconfig path.
pub fn lab_cluster(cluster: &str) -> (tempfile::TempDir, String) {
    let root = tempfile::tempdir().unwrap();
    gpuwl_ok(&[
        "lab",
        "--cluster-name",
        cluster,
        "--root",
        root.path().to_str().unwrap(),
    ]);
    let kubeconfig = gpuwl_ok(&["cluster", "kubeconfig", "--name", cluster]);
    (root, kubeconfig.trim().to_owned())
}

/// Starts the test's own local control plane `name` from nothing (`cluster up --fresh -q`
/// plus `extra`, e.g. `["--nodes", "0"]`) and returns its kubeconfig path. Fresh on
/// purpose: `cluster up` keeps the data of a cluster a killed run left behind (issue 36),
/// and a test that creates objects under fixed names must not meet last run's copies
/// ("nodes \"d9-n0\" already exists").
pub fn own_cluster(name: &str, extra: &[&str]) -> String {
    let mut args = vec!["cluster", "up", "--name", name, "--fresh", "-q"];
    args.extend(extra);
    gpuwl_ok(&args);
    gpuwl_ok(&["cluster", "kubeconfig", "--name", name])
        .trim()
        .to_owned()
}

/// A kube client for the cluster of `kubeconfig` (its current context).
pub async fn client_for(kubeconfig: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Stops the named local control plane when dropped (`gpuwl cluster down --name NAME`).
pub struct ClusterDown(pub &'static str);

impl Drop for ClusterDown {
    fn drop(&mut self) {
        let _ = gpuwl(&["cluster", "down", "--name", self.0]);
    }
}

/// Held by every test that starts a local control plane, for its whole run. Clusters are
/// safe side by side (each test has its own cluster name; ports are picked under a
/// machine-wide lock, builds are locked per cache key: src/cluster/ports.rs, lock.rs), so
/// up to `GPUWL_LIVE_JOBS` (default 3) run at once: on two cores a live test
/// waits on its cluster most of its time, and three at a time took the live phase from
/// 818 s to 653 s on this machine with every test green (BENCHMARKS.md "Test suite"); a test whose timing
/// must not be shared takes [`the_machine_alone`]. When several wait, the one that took
/// longest in a recent run goes first ([`expected_seconds`]; scripts/test.sh starts every
/// live test at once with `--test-threads 64` so that they all wait). A test that panicked
/// still lets the next one run.
///
/// The guard also times the test: when dropped it appends `NAME<TAB>SECONDS<TAB>ok|failed` to
/// `target/tmp/live-timings.tsv` (NAME is the libtest thread's name, the test's path), which
/// `scripts/test.sh` prints sorted after the live phase (BENCHMARKS.md "Test suite").
pub fn one_cluster_at_a_time() -> LiveSlot {
    LiveSlot::take(1)
}

/// Like [`one_cluster_at_a_time`], with no other live test running: for tests that stall
/// a component for a measured time (SIGSTOP) or start several clusters themselves.
pub fn the_machine_alone() -> LiveSlot {
    LiveSlot::take(live_jobs())
}

/// How many live tests may run at once: `GPUWL_LIVE_JOBS`, default 3.
fn live_jobs() -> usize {
    std::env::var("GPUWL_LIVE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(3)
}

/// Slots in use, whether a test waits for all of them (new single takers then wait, so it
/// is not starved), and the single takers waiting, each with its expected seconds.
struct Slots {
    used: usize,
    alone_waiting: usize,
    /// (expected seconds, ticket) of each single taker waiting.
    waiting: Vec<(f64, u64)>,
    next_ticket: u64,
    /// When the first test asked for a slot: the gate admits nobody in the first
    /// [`GATHER`], so that the tests the harness starts together are all waiting and the
    /// longest goes first.
    first_ask: Option<std::time::Instant>,
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots {
    used: 0,
    alone_waiting: 0,
    waiting: Vec::new(),
    next_ticket: 0,
    first_ask: None,
});
static FREED: Condvar = Condvar::new();

/// How long the gate waits for the harness to start its test threads before admitting.
const GATHER: std::time::Duration = std::time::Duration::from_millis(500);

/// The seconds a live test took in a recent run of the suite (tests/it/live-seconds.tsv,
/// `NAME<TAB>SECONDS`, from `target/tmp/live-timings.tsv`); 20 for a test not listed.
/// Only the order of admission depends on it: when several wait, the longest goes first
/// (longest-processing-time-first, so no long test starts last and runs alone at the end).
fn expected_seconds(name: &str) -> f64 {
    include_str!("../live-seconds.tsv")
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(n, _)| *n == name)
        .and_then(|(_, s)| s.trim().parse().ok())
        .unwrap_or(20.0)
}

/// One live test's turn on the local control plane (see [`one_cluster_at_a_time`]).
pub struct LiveSlot {
    slots: usize,
    started: std::time::Instant,
}

impl LiveSlot {
    fn take(n: usize) -> LiveSlot {
        let all = live_jobs();
        let n = n.min(all);
        let alone = n == all;
        let expected = expected_seconds(std::thread::current().name().unwrap_or(""));
        let mut s = SLOTS.lock().unwrap_or_else(|p| p.into_inner());
        let first_ask = *s.first_ask.get_or_insert_with(std::time::Instant::now);
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        if alone {
            s.alone_waiting += 1;
        } else {
            s.waiting.push((expected, ticket));
        }
        loop {
            let gathered = first_ask.elapsed() >= GATHER;
            // Among single takers the longest expected goes first (ties: who asked first);
            // a test that takes the machine alone goes as soon as it is free.
            let my_turn = alone
                || !s.waiting.iter().any(|(e, t)| {
                    *t != ticket && (*e > expected || (*e == expected && *t < ticket))
                });
            if gathered && my_turn && s.used + n <= all && (alone || s.alone_waiting == 0) {
                break;
            }
            let wait = if gathered {
                std::time::Duration::from_secs(1)
            } else {
                GATHER.saturating_sub(first_ask.elapsed())
            };
            s = FREED
                .wait_timeout(s, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if alone {
            s.alone_waiting -= 1;
        } else {
            s.waiting.retain(|(_, t)| *t != ticket);
        }
        s.used += n;
        FREED.notify_all();
        LiveSlot {
            slots: n,
            started: std::time::Instant::now(),
        }
    }
}

impl Drop for LiveSlot {
    fn drop(&mut self) {
        {
            let mut s = SLOTS.lock().unwrap_or_else(|p| p.into_inner());
            s.used -= self.slots;
            FREED.notify_all();
        }
        use std::io::Write;
        let name = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_owned();
        let outcome = if std::thread::panicking() {
            "failed"
        } else {
            "ok"
        };
        let line = format!(
            "{name}\t{:.1}\t{outcome}\n",
            self.started.elapsed().as_secs_f64()
        );
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-timings.tsv");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
