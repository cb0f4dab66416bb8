//! The exporter's inputs: kube-runtime watchers on nodes and pods, and on the GPU
//! Operator's ClusterPolicy and KubeVirt's KubeVirt / HyperConverged CRs while their CRDs
//! exist. Each watcher feeds a [`Mirror`] in the shared [`Store`] and wakes the evaluator.
//!
//! - Nodes are kept as [`NodeInfo`]; pods as [`PodInfo`], only those that are not
//!   terminal (field selector `status.phase!=Succeeded,status.phase!=Failed`: the API
//!   sends a deletion when a pod finishes) and request an extended resource — the only
//!   pods the inventory counts — so memory follows the GPU pods, not all pods.
//! - A CR type is probed with one `list?limit=1`: 404 means its CRD is not installed; the
//!   probe is repeated every [`CRD_PROBE_INTERVAL`] (one request), and a watch that meets
//!   404 (the CRD was deleted) goes back to probing.
//! - A watch error is counted in `gpuwl_watch_errors_total`; the watch is then started
//!   afresh (a re-list) after a [`backoff`] (0.5 s doubling to 15 s, plus up to 100 %
//!   jitter: at most 30 s), cut short when the watchdog sees the API server come back.
//!   (kube-runtime's own `default_backoff` is not used: its watcher yields `Event::Init`
//!   before each re-list, which resets that backoff, so a refused watch retried about every
//!   second.) Only state changes are logged — a watch failing, a watch current again — one
//!   line each, never one per retry.
//! - Whether the API server is reachable is decided by one watchdog ([`watchdog`]): a
//!   `GET /version` every [`WATCHDOG_INTERVAL`] with a [`PROBE_TIMEOUT`] (every
//!   [`PROBE_INTERVAL`] while it does not answer, and at once when a watch meets no
//!   answer). A hung API server — one that accepts connections and never answers, whose
//!   open watches just go quiet — is so seen within 20 s.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};
use tokio::sync::Mutex as AsyncMutex;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::Notify;

use crate::input::{clusterpolicy, kubevirt as kv_input, live, pods};
use crate::serve::metrics::Metrics;
use crate::serve::state::Mirror;
use gpuwl_core::analysis::admission::Index;
use gpuwl_core::decode::document::one_line;
use gpuwl_core::decode::kubevirt::{CrType, HYPERCONVERGED, KUBEVIRT};
use gpuwl_core::model::kubevirt::PermittedHostDevices;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::operator::PolicyStatus;
use gpuwl_core::model::pod::PodInfo;

/// Objects per page of the initial (and any re-) list of nodes and pods from an API server
/// that does not stream watch lists ([`initial_list`]): a page is decoded into typed
/// objects before they are reduced, so its size bounds the transient memory on top of what
/// the mirrors hold.
pub(crate) const LIST_PAGE_SIZE: u32 = 100;

/// How the watch of nodes or pods (`config`) gets what is there first: from an API server
/// that serves streaming lists by default ([`streams_watch_lists`]), as the watch's own
/// first events (`sendInitialEvents`, from the API server's watch cache, one object at a
/// time: no page requests and no page held in memory); from another, in pages of
/// [`LIST_PAGE_SIZE`] before the watch.
async fn initial_list(shared: &Shared, config: watcher::Config) -> watcher::Config {
    let version = tokio::time::timeout(PROBE_TIMEOUT, shared.client().apiserver_version()).await;
    match version {
        Ok(Ok(v)) if streams_watch_lists(&v.major, &v.minor) => config.streaming_lists(),
        _ => config.page_size(LIST_PAGE_SIZE),
    }
}

/// Whether an API server of version `major`.`minor` (as `/version` gives them; a provider
/// may suffix the minor: `34+`) serves streaming lists unless told otherwise: its
/// `WatchList` feature is on by default in 1.32 and from 1.34 on (off again in 1.33):
/// kubernetes/apiserver `pkg/features/kube_features.go`; KEP-3157.
fn streams_watch_lists(major: &str, minor: &str) -> bool {
    live::version_numbers(major, minor).is_some_and(|(x, y)| (x, y) == (1, 32) || (x, y) >= (1, 34))
}

/// How often an absent CRD is looked for again.
pub(crate) const CRD_PROBE_INTERVAL: Duration = Duration::from_secs(300);

/// How soon a CR type whose probe got no answer is probed again.
pub(crate) const UNREACHABLE_RETRY: Duration = Duration::from_secs(30);

/// The first retry delay of a failed watch (before jitter).
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(500);

/// Where the retry delay stops doubling (before jitter): with jitter, up to 30 s.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// A failed watch's retry delays: [`BACKOFF_MIN`] doubling to [`BACKOFF_MAX`], each plus a
/// random jitter of up to 100 % (backon's `ExponentialBuilder::with_jitter`): 0.5-1 s,
/// 1-2 s, … 15-30 s. Retries of several watches so spread out instead of arriving at once.
pub fn backoff() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(BACKOFF_MIN)
        .with_max_delay(BACKOFF_MAX)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

/// How often the watchdog asks `GET /version` while the API server answers.
pub(crate) const WATCHDOG_INTERVAL: Duration = Duration::from_secs(10);

/// How often the watchdog asks while the API server does not answer.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(2);

/// How long one probe (`list?limit=1`, `GET /version`) may take.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the watchdog may go without finishing a round before `/healthz` fails (the
/// task died or hangs: nothing inside the process would notice the API server again).
pub(crate) const HEARTBEAT_LIMIT: Duration = Duration::from_secs(60);

/// How long one evaluation may run before `/healthz` fails.
pub(crate) const EVALUATION_LIMIT: Duration = Duration::from_secs(300);

/// What is known of one custom resource type.
#[derive(Debug, Default)]
pub(crate) struct CrMirror {
    /// `None` until the first probe answers; `Some(false)` when the CRD is absent.
    pub installed: Option<bool>,
    /// Why the type cannot be read (forbidden, unreachable at the probe), when it cannot.
    pub unreadable: Option<String>,
    /// The objects (as JSON with `kind` set), while the CRD is installed.
    pub objects: Mirror<Value>,
}

impl CrMirror {
    /// Whether the first answer about this type is in: absent, unreadable, or listed.
    pub fn settled(&self) -> bool {
        match self.installed {
            None => self.unreadable.is_some(),
            Some(false) => true,
            Some(true) => self.objects.synced() || self.unreadable.is_some(),
        }
    }
}

/// The exporter's copy of the cluster.
#[derive(Debug, Default)]
pub(crate) struct Store {
    /// Nodes by name.
    pub nodes: Mirror<NodeInfo>,
    /// Non-terminal pods with extended-resource requests or resource claims (DRA), by
    /// `namespace/name`.
    pub pods: Mirror<PodInfo>,
    /// ClusterPolicies.
    pub policy: CrMirror,
    /// HyperConverged CRs.
    pub hyperconverged: CrMirror,
    /// KubeVirt CRs.
    pub kubevirt: CrMirror,
    /// VirtualMachineInstances (for the ones that wait with no virt-launcher pod).
    pub vmis: CrMirror,
    /// VirtualMachines (for the ones that want to run and have no VMI).
    pub vms: CrMirror,
}

impl Store {
    /// Whether the initial lists are in: nodes, pods, and an answer about each CR type.
    pub fn synced(&self) -> bool {
        self.nodes.synced()
            && self.pods.synced()
            && self.policy.settled()
            && self.hyperconverged.settled()
            && self.kubevirt.settled()
            && self.vmis.settled()
            && self.vms.settled()
    }

    /// The pods the analyses judge: the watched pods, then each VMI or VM that waits for
    /// a GPU with no virt-launcher pod ([`gpuwl_core::decode::virt::waiting_without_launcher`]: refused by
    /// virt-controller or virt-api, or not rendered yet), as the VMI or VM it is, so that
    /// the pending series, `gpuwl_unservable_pods` and the admission counts see it as
    /// `inventory` and `explain` do. Borrowed when no VM waits.
    pub fn judged_pods(&self) -> std::borrow::Cow<'_, [PodInfo]> {
        let waiting = gpuwl_core::decode::virt::waiting_without_launcher(
            self.vmis.objects.as_slice(),
            self.vms.objects.as_slice(),
            self.pods.as_slice(),
        );
        if waiting.is_empty() {
            std::borrow::Cow::Borrowed(self.pods.as_slice())
        } else {
            let mut all = self.pods.as_slice().to_vec();
            all.extend(waiting);
            std::borrow::Cow::Owned(all)
        }
    }

    /// The ClusterPolicy status the analyses use (see [`clusterpolicy::from_objects`]).
    pub fn policy_status(&self) -> PolicyStatus {
        match (&self.policy.installed, &self.policy.unreadable) {
            (_, Some(why)) => {
                gpuwl_core::decode::clusterpolicy::none("unreadable", Some(why.clone()))
            }
            (Some(false), None) => gpuwl_core::decode::clusterpolicy::absent_crd(),
            (None, None) => PolicyStatus::not_read(),
            (Some(true), None) => {
                let objects: Vec<DynamicObject> = self
                    .policy
                    .objects
                    .as_slice()
                    .iter()
                    .filter_map(|v| serde_json::from_value(v.clone()).ok())
                    .collect();
                clusterpolicy::from_objects(objects)
            }
        }
    }

    /// KubeVirt's `permittedHostDevices`: the HyperConverged CR's when there is one, else
    /// the KubeVirt CR's ([`kv_input::choose`]); `None` when neither is known, `Err` with
    /// the one-line reason when the CR cannot be read.
    pub fn kubevirt_cr(&self) -> Option<std::result::Result<PermittedHostDevices, String>> {
        for (ty, m) in [
            (HYPERCONVERGED, &self.hyperconverged),
            (KUBEVIRT, &self.kubevirt),
        ] {
            if let Some(why) = &m.unreadable {
                return Some(Err(format!("{}: {why}", ty.plural)));
            }
            match gpuwl_core::decode::kubevirt::choose(ty, m.objects.as_slice()) {
                Ok(None) => continue,
                Ok(Some(found)) => return Some(Ok(found)),
                Err(e) => return Some(Err(e.to_string())),
            }
        }
        None
    }
}

/// Where one watch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchState {
    /// Started (or restarted with a new client, or after an outage); its list is not in.
    Syncing,
    /// Its list is in and the watch runs: the mirror is the cluster now.
    Current,
    /// Its last attempt failed; it retries after a backoff. The mirror keeps the last
    /// good state.
    Failing,
}

/// Connection state shared by the watchers, the watchdog, the evaluator and the HTTP
/// handlers.
#[derive(Debug)]
pub struct Health {
    /// Whether the API server answered the watchdog's last probe.
    pub reachable: bool,
    /// Since when it has not (`None` while it answers): when the first request that got
    /// no answer was sent (the probe, or a watch that met no answer), not when the
    /// watchdog concluded, so an outage is measured from its start.
    pub down_since: Option<Instant>,
    /// When the API server last answered the watchdog.
    pub last_answer: Option<Instant>,
    /// When a watch first met no answer since the API server last answered the
    /// watchdog (it may be down before a probe says so).
    pub first_unanswered: Option<Instant>,
    /// Whether an evaluation has completed since the initial lists came in.
    pub evaluated: bool,
    /// Each running watch's state, by watched resource (`nodes`, `pods`, a CR plural).
    pub watches: BTreeMap<&'static str, WatchState>,
    /// When each failing watch first failed (kept across its retries), so that its
    /// recovery is measured from the first failure, not from the last retry.
    pub failing_since: BTreeMap<&'static str, Instant>,
    /// When the watchdog last finished a round.
    pub heartbeat: Instant,
    /// When the running evaluation started, while one runs.
    pub evaluating_since: Option<Instant>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            reachable: true,
            down_since: None,
            last_answer: None,
            first_unanswered: None,
            evaluated: false,
            watches: BTreeMap::new(),
            failing_since: BTreeMap::new(),
            heartbeat: Instant::now(),
            evaluating_since: None,
        }
    }
}

impl Health {
    /// Whether the metrics show the last good state rather than the cluster now: the API
    /// server does not answer, or a watch is failing or re-listing.
    pub fn stale(&self) -> bool {
        !self.reachable || self.watches.values().any(|w| *w != WatchState::Current)
    }

    /// Whether `/readyz` answers 200: evaluated and not stale.
    pub fn ready(&self) -> bool {
        self.evaluated && !self.stale()
    }
}

/// Everything the tasks share.
pub struct Shared {
    /// The client (read timeout off: watches stay open; the watchdog finds a hung API
    /// server). Replaced when the credentials change on disk.
    pub client: Mutex<Client>,
    /// The cluster copy. An async mutex: the evaluator holds it while it reads the copy
    /// in place (no snapshot copy), and the watchers wait for it without blocking a thread.
    pub(crate) store: AsyncMutex<Store>,
    /// Woken on every change; the evaluator debounces.
    pub changed: Notify,
    /// Connection state.
    pub health: Mutex<Health>,
    /// The metrics.
    pub metrics: Metrics,
    /// Woken when a watch met no answer: the watchdog probes at once.
    pub probe_now: Notify,
    /// Woken to restart every watch (a new client; the API server back after an outage).
    pub restart: Notify,
    /// Bumped when the API server answers again: watches waiting out a backoff retry now.
    pub retry_now: tokio::sync::watch::Sender<u64>,
    /// `/healthz` fails once the API server has not answered for this long (`None`: never).
    pub unhealthy_after: Option<Duration>,
    /// What the admission guard judges against, replaced after each evaluation (the
    /// default, not synced, admits everything without a word).
    pub admission: Mutex<Arc<Index>>,
    /// Whether the admission guard runs (`--admission-listen`): the evaluator then builds
    /// [`Shared::admission`] and `gpuwl_admission_flagged_pods`.
    pub admission_enabled: bool,
    /// The API server's address (replaced with the client): a watch that cannot reach it
    /// says which local cluster it is, or where the address came from
    /// ([`crate::cluster::server_hint`]).
    pub server: Mutex<String>,
}

impl Shared {
    /// A new state around `client`.
    pub fn new(client: Client, unhealthy_after: Option<Duration>) -> Shared {
        Shared::build(client, unhealthy_after, false)
    }

    /// As [`Shared::new`], with the admission guard's state and metrics.
    pub fn with_admission(client: Client, unhealthy_after: Option<Duration>) -> Shared {
        Shared::build(client, unhealthy_after, true)
    }

    fn build(client: Client, unhealthy_after: Option<Duration>, admission: bool) -> Shared {
        Shared {
            server: Mutex::new(String::new()),
            client: Mutex::new(client),
            store: AsyncMutex::new(Store::default()),
            changed: Notify::new(),
            health: Mutex::new(Health::default()),
            metrics: if admission {
                Metrics::with_admission()
            } else {
                Metrics::new()
            },
            probe_now: Notify::new(),
            restart: Notify::new(),
            retry_now: tokio::sync::watch::Sender::new(0),
            unhealthy_after,
            admission: Mutex::new(Arc::default()),
            admission_enabled: admission,
        }
    }

    /// The current client.
    pub fn client(&self) -> Client {
        lock(&self.client).clone()
    }

    /// Whether `/readyz` answers 200 ([`Health::ready`]).
    pub fn ready(&self) -> bool {
        lock(&self.health).ready()
    }

    /// `Err(why)` when the process cannot recover by itself and should be restarted (what
    /// `/healthz` answers): the watchdog stopped finishing rounds, an evaluation hangs, or
    /// the API server has not answered for longer than [`Shared::unhealthy_after`].
    pub fn healthy(&self) -> std::result::Result<(), String> {
        let h = lock(&self.health);
        let beat = h.heartbeat.elapsed();
        if beat > HEARTBEAT_LIMIT {
            return Err(format!(
                "the API watchdog has not finished a round for {} s",
                beat.as_secs()
            ));
        }
        if let Some(since) = h.evaluating_since
            && since.elapsed() > EVALUATION_LIMIT
        {
            return Err(format!(
                "an evaluation has run for {} s",
                since.elapsed().as_secs()
            ));
        }
        if let (Some(limit), Some(since)) = (self.unhealthy_after, h.down_since)
            && since.elapsed() > limit
        {
            return Err(format!(
                "the API server has not answered for {} s (--unhealthy-after {} s)",
                since.elapsed().as_secs(),
                limit.as_secs()
            ));
        }
        Ok(())
    }

    /// Refreshes `gpuwl_api_reachable` / `gpuwl_ready` / `gpuwl_stale` from [`Health`].
    pub fn publish_health(&self) {
        self.change_health(|_| ());
    }

    /// Runs `change` on the locked [`Health`] and sets `gpuwl_api_reachable` /
    /// `gpuwl_ready` / `gpuwl_stale` before the lock is released, so the gauges never lag
    /// what `/readyz` answers, and two tasks publishing at once cannot leave the older
    /// state in the gauges (a read-then-publish outside the lock could: seen under load).
    pub fn change_health<R>(&self, change: impl FnOnce(&mut Health) -> R) -> R {
        let mut h = lock(&self.health);
        let out = change(&mut h);
        self.metrics.set_status(h.reachable, h.ready(), h.stale());
        out
    }

    /// Marks the node and pod watches as re-listing after a restart; a CR's watch is
    /// tracked again once its new probe finds the CRD.
    pub fn watches_restarted(&self) {
        self.change_health(|h| {
            h.watches.clear();
            h.watches.insert("nodes", WatchState::Syncing);
            h.watches.insert("pods", WatchState::Syncing);
        });
    }

    /// Records `resource`'s watch state; `None` when it no longer runs (its CRD went away).
    fn set_watch(&self, resource: &'static str, state: Option<WatchState>) {
        let (before, failing_for) = self.change_health(|h| {
            let before = match state {
                Some(s) => h.watches.insert(resource, s),
                None => h.watches.remove(resource),
            };
            let failing_for = match state {
                Some(WatchState::Failing) => None,
                _ => h.failing_since.remove(resource).map(|t| t.elapsed()),
            };
            (before, failing_for)
        });
        if before == Some(WatchState::Failing) && state == Some(WatchState::Current) {
            log(&current_again_line(resource, failing_for));
        }
    }

    /// Records a failed watch: one count and, when it was not failing already, one log
    /// line. A failure where the API server did not answer at all (`unreachable`; an API
    /// error such as 403 is an answer) wakes the watchdog.
    fn watch_failed(&self, resource: &'static str, message: &str, unreachable: bool) {
        self.metrics.watch_error(resource);
        let before = self.change_health(|h| {
            h.failing_since.entry(resource).or_insert_with(Instant::now);
            h.watches.insert(resource, WatchState::Failing)
        });
        if before != Some(WatchState::Failing) {
            log(&format!(
                "watch {resource}: {message} (retrying with a backoff up to 30 s; logged again when it recovers)"
            ));
        }
        if unreachable {
            let mut h = lock(&self.health);
            h.first_unanswered = h.first_unanswered.or(Some(Instant::now()));
            drop(h);
            self.probe_now.notify_one();
        }
    }

    /// The watchdog's verdict: one log line and a metrics update when it changes. Coming
    /// back after an outage restarts the watches (a re-list: what changed meanwhile, and
    /// a watch that hung with the server, are then caught up) and wakes those in backoff.
    #[cfg(test)]
    fn set_reachable(&self, reachable: bool, why: &str) {
        self.set_reachable_at(reachable, why, Instant::now());
    }

    /// [`Shared::set_reachable`] for a probe sent at `asked`: an outage starts when the
    /// first request that got no answer was sent, and its length is logged with the
    /// bounds the probes give (from that request, and from the last answer).
    fn set_reachable_at(&self, reachable: bool, why: &str, asked: Instant) {
        let (changed, down_for, since_answer) = self.change_health(|h| {
            let changed = h.reachable != reachable;
            h.reachable = reachable;
            let down_for = h.down_since.map(|t| t.elapsed());
            let since_answer = h.last_answer.map(|t| t.elapsed());
            if reachable {
                h.down_since = None;
                h.first_unanswered = None;
                h.last_answer = Some(Instant::now());
            } else {
                let start = h.first_unanswered.map_or(asked, |w| w.min(asked));
                h.down_since = Some(h.down_since.map_or(start, |d| d.min(start)));
            }
            (changed, down_for, since_answer)
        });
        if reachable {
            self.metrics.contact(unix_now());
        }
        if !changed {
            return;
        }
        if reachable {
            log(&back_line(down_for.unwrap_or_default(), since_answer));
            self.restart.notify_one();
            self.retry_now.send_modify(|n| *n += 1);
        } else {
            log(&format!(
                "the API server does not answer ({why}); serving the last good state"
            ));
        }
    }
}

/// The log line when `resource`'s watch is current again, `failing_for` after its first
/// failure (not its last retry).
fn current_again_line(resource: &str, failing_for: Option<Duration>) -> String {
    match failing_for {
        Some(d) => format!(
            "watch {resource}: current again, {} s after it first failed",
            d.as_secs()
        ),
        None => format!("watch {resource}: current again"),
    }
}

/// The log line when the API server answers again after `down_for` without an answer
/// (from the first unanswered request), its last answer `since_answer` ago: the outage
/// lies between the two (`after 15-25 s without an answer`), or is `down_for` when they
/// agree or no answer came before.
fn back_line(down_for: Duration, since_answer: Option<Duration>) -> String {
    let lo = down_for.as_secs();
    match since_answer.map(|d| d.as_secs()) {
        Some(hi) if hi > lo + 1 => {
            format!("the API server answers again after {lo}-{hi} s without an answer; re-listing")
        }
        _ => format!("the API server answers again after {lo} s without an answer; re-listing"),
    }
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A std mutex lock that survives a panicked holder (the data are plain maps).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One line on stderr, prefixed `gpuwl serve: `, control characters escaped.
pub fn log(message: &str) {
    eprintln!("gpuwl serve: {}", one_line(message));
}

/// The watchdog: `GET /version` with a [`PROBE_TIMEOUT`], every [`WATCHDOG_INTERVAL`]
/// while the API server answers and every [`PROBE_INTERVAL`] while it does not (or at
/// once when a watch met no answer). Any HTTP answer counts as reachable (a 401 or 403
/// is the API server answering); a connection error, a TLS error or no answer in time
/// counts as unreachable. Runs forever.
pub async fn watchdog(shared: Arc<Shared>) {
    loop {
        let client = shared.client();
        let asked = Instant::now();
        let verdict = match tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(_)) | Ok(Err(kube::Error::Api(_))) => Ok(()),
            Ok(Err(e)) => Err(live::api_error("GET /version", &e).to_string()),
            Err(_) => Err(format!(
                "GET /version: no answer within {} s",
                PROBE_TIMEOUT.as_secs()
            )),
        };
        let reachable = verdict.is_ok();
        shared.set_reachable_at(
            reachable,
            verdict.as_ref().err().map_or("", String::as_str),
            asked,
        );
        lock(&shared.health).heartbeat = Instant::now();
        let wait = if reachable {
            WATCHDOG_INTERVAL
        } else {
            PROBE_INTERVAL
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shared.probe_now.notified() => {}
        }
    }
}

/// A watcher event with the object reduced by `reduce` (`None`: not kept).
fn keyed<K, T>(
    e: Event<K>,
    reduce: &impl Fn(&K) -> (String, Option<T>),
) -> Event<(String, Option<T>)> {
    match e {
        Event::Apply(o) => Event::Apply(reduce(&o)),
        Event::Delete(o) => Event::Delete(reduce(&o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(reduce(&o)),
        Event::InitDone => Event::InitDone,
    }
}

/// Whether a watcher error is the API's 404 (the resource type is not served).
fn not_found(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s))
            if s.code == 404
    )
}

/// Whether a watcher error means the API server did not answer (connection refused, reset,
/// timed out), rather than answering with an error status.
fn no_answer(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => !matches!(k, kube::Error::Api(_)),
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => false,
    }
}

/// The one-line text of a watcher error, with gpuwl's hint for API errors.
fn error_text(doing: &str, e: &watcher::Error, server: &str) -> String {
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => {
            crate::cluster::server_hint(&live::api_error(doing, k).to_string(), server)
        }
        other => format!("cannot {doing}: {other}"),
    }
}

/// Runs one watch until it meets 404 (`stop_on_404`) or forever, applying its events to
/// the mirror `pick` selects. After an error the watch is started afresh (a re-list) once
/// the backoff has passed, or as soon as the watchdog sees the API server come back.
async fn run_watcher<K, T>(
    shared: &Arc<Shared>,
    api: Api<K>,
    config: watcher::Config,
    resource: &'static str,
    reduce: impl Fn(&K) -> (String, Option<T>),
    pick: impl Fn(&mut Store) -> &mut Mirror<T>,
    stop_on_404: bool,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let doing = format!("watch {resource}");
    let mut backoff = backoff();
    let mut started = Instant::now();
    let mut retry_now = shared.retry_now.subscribe();
    shared.change_health(|h| {
        h.watches.entry(resource).or_insert(WatchState::Syncing);
    });
    loop {
        let mut stream = std::pin::pin!(watcher::watcher(api.clone(), config.clone()));
        let error = loop {
            match stream.next().await {
                Some(Ok(event)) => {
                    let current =
                        matches!(event, Event::InitDone | Event::Apply(_) | Event::Delete(_));
                    let changed =
                        pick(&mut *shared.store.lock().await).apply(keyed(event, &reduce));
                    if current {
                        shared.set_watch(resource, Some(WatchState::Current));
                    }
                    if changed {
                        shared.changed.notify_one();
                    }
                }
                Some(Err(e)) => break Some(e),
                None => break None,
            }
        };
        match error {
            Some(e) if stop_on_404 && not_found(&e) => {
                shared.set_watch(resource, None);
                return;
            }
            Some(e) => {
                let server = lock(&shared.server).clone();
                shared.watch_failed(resource, &error_text(&doing, &e, &server), no_answer(&e))
            }
            None => {}
        }
        // A watch that ran for a while before it failed starts the backoff over.
        if started.elapsed() > 2 * BACKOFF_MAX {
            backoff = self::backoff();
        }
        let delay = backoff.next().unwrap_or(2 * BACKOFF_MAX);
        retry_now.borrow_and_update();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = retry_now.changed() => {}
        }
        started = Instant::now();
    }
}

/// Watches nodes forever.
pub async fn nodes(shared: Arc<Shared>) {
    let api: Api<Node> = Api::all(shared.client());
    run_watcher(
        &shared,
        api,
        initial_list(&shared, watcher::Config::default()).await,
        "nodes",
        |n: &Node| {
            let info = live::node_info(n);
            (info.name.clone(), Some(info))
        },
        |s| &mut s.nodes,
        false,
    )
    .await;
}

/// The field selector of the pod watch: pods that have not finished.
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Watches pods forever (see the module docs for which are kept).
pub async fn pods(shared: Arc<Shared>) {
    let api: Api<Pod> = Api::all(shared.client());
    run_watcher(
        &shared,
        api,
        initial_list(
            &shared,
            watcher::Config::default().fields(POD_FIELD_SELECTOR),
        )
        .await,
        "pods",
        |p: &Pod| {
            let key = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or("")
            );
            match pods::pod_info(p) {
                // DRA pods ask for GPUs through claims, not extended resources.
                Ok(info) if !info.requests.is_empty() || !info.resource_claims.is_empty() => {
                    (key, Some(info))
                }
                Ok(_) => (key, None),
                Err(e) => {
                    log(&format!("skipping pod {key}: {e}"));
                    (key, None)
                }
            }
        },
        |s| &mut s.pods,
        false,
    )
    .await;
}

/// Which CR a [`custom_resource`] task watches.
#[derive(Debug, Clone, Copy)]
pub enum Cr {
    /// `clusterpolicies.nvidia.com`.
    ClusterPolicy,
    /// `hyperconvergeds.hco.kubevirt.io`.
    HyperConverged,
    /// `kubevirts.kubevirt.io`.
    KubeVirt,
    /// `virtualmachineinstances.kubevirt.io`.
    VirtualMachineInstance,
    /// `virtualmachines.kubevirt.io`.
    VirtualMachine,
}

/// `kubevirt.io/v1` `VirtualMachineInstance` (kubevirt/kubevirt
/// `staging/src/kubevirt.io/api/core/v1/types.go`).
const VMI_TYPE: CrType = CrType {
    group: "kubevirt.io",
    version: "v1",
    kind: "VirtualMachineInstance",
    plural: "virtualmachineinstances",
};

/// `kubevirt.io/v1` `VirtualMachine`.
const VM_TYPE: CrType = CrType {
    group: "kubevirt.io",
    version: "v1",
    kind: "VirtualMachine",
    plural: "virtualmachines",
};

impl Cr {
    fn ty(self) -> CrType {
        match self {
            Cr::ClusterPolicy => CrType {
                group: "nvidia.com",
                version: "v1",
                kind: "ClusterPolicy",
                plural: "clusterpolicies",
            },
            Cr::HyperConverged => HYPERCONVERGED,
            Cr::KubeVirt => KUBEVIRT,
            Cr::VirtualMachineInstance => VMI_TYPE,
            Cr::VirtualMachine => VM_TYPE,
        }
    }

    fn mirror(self, s: &mut Store) -> &mut CrMirror {
        match self {
            Cr::ClusterPolicy => &mut s.policy,
            Cr::HyperConverged => &mut s.hyperconverged,
            Cr::KubeVirt => &mut s.kubevirt,
            Cr::VirtualMachineInstance => &mut s.vmis,
            Cr::VirtualMachine => &mut s.vms,
        }
    }
}

/// Probes for `cr`'s CRD and watches its objects while it exists, forever.
pub async fn custom_resource(shared: Arc<Shared>, cr: Cr) {
    let ty = cr.ty();
    let ar = match cr {
        Cr::ClusterPolicy => clusterpolicy::api_resource(),
        _ => kv_input::api_resource(ty),
    };
    let api: Api<DynamicObject> = Api::all_with(shared.client(), &ar);
    let resource = ty.plural;
    loop {
        let probe =
            tokio::time::timeout(PROBE_TIMEOUT, api.list(&ListParams::default().limit(1))).await;
        let wait = match probe {
            Ok(Ok(_)) => {
                {
                    let mut s = shared.store.lock().await;
                    let m = cr.mirror(&mut s);
                    m.installed = Some(true);
                    m.unreadable = None;
                }
                run_watcher(
                    &shared,
                    api.clone(),
                    watcher::Config::default(),
                    resource,
                    |o: &DynamicObject| {
                        let key = format!(
                            "{}/{}",
                            o.metadata.namespace.as_deref().unwrap_or(""),
                            o.metadata.name.as_deref().unwrap_or("")
                        );
                        let v = kv_input::object_value(ty, o).ok();
                        // A placed or finished VMI never waits: its name is all that is
                        // kept (whether its VM has a VMI), not its whole spec.
                        (key, v.map(gpuwl_core::decode::virt::slim_settled_vmi))
                    },
                    |s| &mut cr.mirror(s).objects,
                    true,
                )
                .await;
                log(&format!(
                    "{resource}.{}: the API no longer serves it; watching stopped",
                    ty.group
                ));
                Duration::ZERO
            }
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
                {
                    let mut st = shared.store.lock().await;
                    let m = cr.mirror(&mut st);
                    m.installed = Some(false);
                    m.unreadable = None;
                    m.objects.reset();
                }
                shared.changed.notify_one();
                CRD_PROBE_INTERVAL
            }
            other => {
                // An API error (403: the credentials may not list it) is asked again with
                // the CRD probe; no answer at all, sooner. No answer keeps what an earlier
                // answer said (the last good state); a new reason is logged once.
                let (why, unreachable) = match other {
                    Ok(Err(e)) => (
                        live::api_error(&format!("list {resource}"), &e).to_string(),
                        !matches!(e, kube::Error::Api(_)),
                    ),
                    _ => (
                        format!(
                            "cannot list {resource}: no answer within {}s",
                            PROBE_TIMEOUT.as_secs()
                        ),
                        true,
                    ),
                };
                let why = one_line(&why);
                let new_reason = {
                    let mut st = shared.store.lock().await;
                    let m = cr.mirror(&mut st);
                    if unreachable && m.settled() {
                        false
                    } else {
                        let new = m.unreadable.as_deref() != Some(why.as_str());
                        m.unreadable = Some(why.clone());
                        new
                    }
                };
                shared.metrics.watch_error(resource);
                if new_reason {
                    log(&format!("watch {resource}: {why}"));
                    shared.changed.notify_one();
                }
                if unreachable {
                    shared.probe_now.notify_one();
                }
                if unreachable {
                    UNREACHABLE_RETRY
                } else {
                    CRD_PROBE_INTERVAL
                }
            }
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lists_stream_where_the_api_server_serves_them_by_default() {
        for (major, minor, streams) in [
            ("1", "31", false),
            ("1", "32", true),
            ("1", "33", false),
            ("1", "34", true),
            ("1", "36+", true),
            ("1", "", false),
        ] {
            assert_eq!(
                streams_watch_lists(major, minor),
                streams,
                "{major}.{minor}"
            );
        }
    }

    fn shared(unhealthy_after: Option<Duration>) -> Shared {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        Shared::new(Client::try_from(config).unwrap(), unhealthy_after)
    }

    #[test]
    fn the_node_and_pod_watches_list_by_streaming_and_then_follow_changes() {
        use crate::testing::{FakeApi, rt};
        use serde_json::json;
        let api = FakeApi::new();
        api.insert(
            "/api/v1",
            "nodes",
            json!({"metadata": {"name": "gpu-1"},
                   "status": {"allocatable": {"nvidia.com/gpu": "8"}}}),
        );
        let pod = |name: &str, phase: &str, limits: serde_json::Value| {
            json!({"metadata": {"name": name, "namespace": "ml"},
                   "spec": {"nodeName": "gpu-1", "containers": [{"name": "c",
                       "resources": {"limits": limits}}]},
                   "status": {"phase": phase}})
        };
        api.insert(
            "/api/v1",
            "pods",
            pod("train", "Running", json!({"nvidia.com/gpu": "2"})),
        );
        api.insert(
            "/api/v1",
            "pods",
            pod("done", "Succeeded", json!({"nvidia.com/gpu": "2"})),
        );
        api.insert(
            "/api/v1",
            "pods",
            pod("web", "Running", json!({"cpu": "1"})),
        );
        let rt = rt();
        let _in = rt.enter();
        let shared = Arc::new(Shared::new(api.client(), None));
        let keys = |m: &Mirror<PodInfo>| m.as_slice().iter().map(PodInfo::key).collect::<Vec<_>>();
        rt.block_on(async {
            tokio::spawn(nodes(shared.clone()));
            tokio::spawn(pods(shared.clone()));
            let current = || {
                let h = lock(&shared.health);
                ["nodes", "pods"]
                    .iter()
                    .all(|r| h.watches.get(r) == Some(&WatchState::Current))
            };
            tokio::time::timeout(Duration::from_secs(10), async {
                while !current() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("both watches current after their streaming lists");
            {
                let s = shared.store.lock().await;
                assert_eq!(s.nodes.len(), 1);
                assert_eq!(keys(&s.pods), ["ml/train"]);
            }
            api.insert(
                "/api/v1",
                "pods",
                pod("train-2", "Pending", json!({"nvidia.com/gpu": "1"})),
            );
            tokio::time::timeout(Duration::from_secs(10), async {
                while shared.store.lock().await.pods.len() < 2 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("a pod created after the list arrives by the watch");
        });
    }

    #[test]
    fn ready_needs_an_evaluation_an_answer_and_every_watch_current() {
        let mut h = Health::default();
        assert!(!h.stale() && !h.ready(), "not evaluated yet");
        h.evaluated = true;
        assert!(h.ready());
        h.watches.insert("nodes", WatchState::Current);
        h.watches.insert("pods", WatchState::Syncing);
        assert!(h.stale() && !h.ready());
        h.watches.insert("pods", WatchState::Current);
        assert!(h.ready());
        h.watches.insert("clusterpolicies", WatchState::Failing);
        assert!(h.stale() && !h.ready());
        h.watches.remove("clusterpolicies");
        h.reachable = false;
        assert!(h.stale() && !h.ready());
    }

    #[tokio::test]
    async fn healthz_fails_only_when_serve_cannot_recover_by_itself() {
        let s = shared(Some(Duration::from_secs(60)));
        assert_eq!(s.healthy(), Ok(()));
        // Unreachable for less than --unhealthy-after: still healthy.
        s.set_reachable(false, "refused");
        assert_eq!(s.healthy(), Ok(()));
        if let Some(t) = Instant::now().checked_sub(Duration::from_secs(61)) {
            lock(&s.health).down_since = Some(t);
            let why = s.healthy().unwrap_err();
            assert!(why.contains("has not answered for 61 s"), "{why}");
        }
        // Back: healthy again, the watches restart.
        s.set_reachable(true, "");
        assert_eq!(s.healthy(), Ok(()));
        // A watchdog that stopped finishing rounds (Instant cannot go back further than
        // the machine's boot).
        if let Some(t) = Instant::now().checked_sub(HEARTBEAT_LIMIT + Duration::from_secs(1)) {
            lock(&s.health).heartbeat = t;
            assert!(s.healthy().unwrap_err().contains("watchdog"));
            lock(&s.health).heartbeat = Instant::now();
        }
        // An evaluation that hangs.
        if let Some(t) = Instant::now().checked_sub(EVALUATION_LIMIT + Duration::from_secs(1)) {
            lock(&s.health).evaluating_since = Some(t);
            assert!(s.healthy().unwrap_err().contains("evaluation"));
        }
        // --unhealthy-after 0: never for the API server.
        let never = shared(None);
        never.set_reachable(false, "refused");
        lock(&never.health).down_since = Instant::now().checked_sub(Duration::from_secs(100));
        assert_eq!(never.healthy(), Ok(()));
    }

    #[tokio::test]
    async fn the_metrics_follow_the_state_and_a_failing_watch_counts_every_error() {
        let s = shared(None);
        let text = || s.metrics.encode(crate::serve::metrics::Format::Classic);
        lock(&s.health).evaluated = true;
        s.set_watch("nodes", Some(WatchState::Current));
        assert!(text().contains("gpuwl_ready 1\n"), "{}", text());
        assert!(text().contains("gpuwl_stale 0\n"));
        for _ in 0..3 {
            s.watch_failed("nodes", "cannot watch nodes: refused", true);
        }
        assert!(text().contains("gpuwl_watch_errors_total{resource=\"nodes\"} 3\n"));
        assert!(text().contains("gpuwl_stale 1\n"));
        assert!(text().contains("gpuwl_ready 0\n"));
        assert!(text().contains("gpuwl_api_reachable 1\n"));
        s.set_watch("nodes", Some(WatchState::Current));
        s.set_reachable(false, "refused");
        assert!(text().contains("gpuwl_api_reachable 0\n"));
        assert!(text().contains("gpuwl_stale 1\n"));
        s.set_reachable(true, "");
        assert!(text().contains("gpuwl_api_reachable 1\n"));
        assert!(text().contains("gpuwl_ready 1\n"));
        // Coming back woke the watches waiting out a backoff.
        assert_eq!(*s.retry_now.borrow(), 1);
    }

    #[tokio::test]
    async fn a_failing_watch_is_measured_from_its_first_failure_not_its_last_retry() {
        let s = shared(None);
        s.watch_failed("nodes", "cannot watch nodes: refused", true);
        let first = Instant::now().checked_sub(Duration::from_secs(20));
        if let Some(t) = first {
            lock(&s.health).failing_since.insert("nodes", t);
        }
        // A retry that fails again keeps the first failure.
        s.watch_failed("nodes", "cannot watch nodes: refused", true);
        assert_eq!(lock(&s.health).failing_since.get("nodes").copied(), first);
        s.set_watch("nodes", Some(WatchState::Current));
        assert!(lock(&s.health).failing_since.is_empty());
        assert_eq!(
            current_again_line("nodes", Some(Duration::from_secs(20))),
            "watch nodes: current again, 20 s after it first failed"
        );
    }

    #[tokio::test]
    async fn an_outage_is_measured_from_its_first_unanswered_request() {
        // Issue 42: a hung API server is found by a probe that times out 10 s after it
        // was sent; the outage starts when that probe was sent (or earlier, when a watch
        // met no answer first), not when the watchdog concluded.
        let s = shared(None);
        s.set_reachable(true, "");
        let ago = |secs| Instant::now().checked_sub(Duration::from_secs(secs));
        if let (Some(sent), Some(answered)) = (ago(20), ago(25)) {
            lock(&s.health).last_answer = Some(answered);
            s.set_reachable_at(false, "GET /version: no answer within 10 s", sent);
            let since = lock(&s.health).down_since.unwrap();
            assert!(since.elapsed() >= Duration::from_secs(20), "{since:?}");
        }
        // A watch that met no answer earlier moves the start back.
        let w = shared(None);
        if let Some(t) = ago(30) {
            w.watch_failed("nodes", "cannot watch nodes: refused", true);
            lock(&w.health).first_unanswered = Some(t);
            w.set_reachable(false, "refused");
            assert!(lock(&w.health).down_since.unwrap().elapsed() >= Duration::from_secs(30));
            w.set_reachable(true, "");
            assert_eq!(lock(&w.health).first_unanswered, None);
            assert!(lock(&w.health).last_answer.is_some());
        }
        assert_eq!(
            back_line(Duration::from_secs(20), Some(Duration::from_secs(25))),
            "the API server answers again after 20-25 s without an answer; re-listing"
        );
        assert_eq!(
            back_line(Duration::from_secs(20), Some(Duration::from_secs(21))),
            "the API server answers again after 20 s without an answer; re-listing"
        );
        assert_eq!(
            back_line(Duration::from_secs(3), None),
            "the API server answers again after 3 s without an answer; re-listing"
        );
    }

    #[test]
    fn the_backoff_grows_to_30_s_with_jitter() {
        let delays: Vec<Duration> = backoff().take(12).collect();
        for (i, d) in delays.iter().enumerate() {
            let base = BACKOFF_MIN.saturating_mul(1 << i.min(10)).min(BACKOFF_MAX);
            assert!(
                *d >= base && *d <= 2 * base,
                "retry {i}: {d:?} (base {base:?})"
            );
        }
        assert!(delays[11] >= BACKOFF_MAX && delays[11] <= Duration::from_secs(30));
        // In a 60 s outage: at most about 8 attempts, not 50.
        let mut t = Duration::ZERO;
        let attempts = backoff()
            .take_while(|d| {
                t += *d;
                t < Duration::from_secs(60)
            })
            .count();
        assert!((3..=8).contains(&attempts), "{attempts}");
    }
}
