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
//! - A watch error is logged as one line and counted in `gpuwl_watch_errors_total`; one
//!   where the API server did not answer (refused, reset, timed out — not an error status
//!   such as 403) marks it unreachable until a watch event or a `GET /version` (every
//!   [`PROBE_INTERVAL`], only while unreachable) succeeds. kube-runtime restarts the
//!   watch with its default backoff (0.8 s doubling to 30 s).

use std::sync::{Arc, Mutex};

use std::time::Duration;
use tokio::sync::Mutex as AsyncMutex;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::Notify;

use crate::input::document::one_line;
use crate::input::kubevirt::{CrType, HYPERCONVERGED, KUBEVIRT};
use crate::input::{clusterpolicy, kubevirt as kv_input, live, pods};
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::node::NodeInfo;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;
use crate::serve::metrics::Metrics;
use crate::serve::state::Mirror;

/// Objects per page of the initial (and any re-) list of nodes and pods: a page is decoded
/// into typed objects before they are reduced, so its size bounds the transient memory on
/// top of what the mirrors hold.
pub const LIST_PAGE_SIZE: u32 = 100;

/// How often an absent CRD is looked for again.
pub const CRD_PROBE_INTERVAL: Duration = Duration::from_secs(300);

/// How soon a CR type whose probe got no answer is probed again.
pub const UNREACHABLE_RETRY: Duration = Duration::from_secs(30);

/// How often, while the API server is unreachable, `GET /version` asks whether it is back.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);

/// How long one probe (`list?limit=1`, `GET /version`) may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What is known of one custom resource type.
#[derive(Debug, Default)]
pub struct CrMirror {
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
pub struct Store {
    /// Nodes by name.
    pub nodes: Mirror<NodeInfo>,
    /// Non-terminal pods with extended-resource requests, by `namespace/name`.
    pub pods: Mirror<PodInfo>,
    /// ClusterPolicies.
    pub policy: CrMirror,
    /// HyperConverged CRs.
    pub hyperconverged: CrMirror,
    /// KubeVirt CRs.
    pub kubevirt: CrMirror,
}

impl Store {
    /// Whether the initial lists are in: nodes, pods, and an answer about each CR type.
    pub fn synced(&self) -> bool {
        self.nodes.synced()
            && self.pods.synced()
            && self.policy.settled()
            && self.hyperconverged.settled()
            && self.kubevirt.settled()
    }

    /// The ClusterPolicy status the analyses use (see [`clusterpolicy::from_objects`]).
    pub fn policy_status(&self) -> PolicyStatus {
        match (&self.policy.installed, &self.policy.unreadable) {
            (_, Some(why)) => clusterpolicy::none("unreadable", Some(why.clone())),
            (Some(false), None) => clusterpolicy::absent_crd(),
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
            match kv_input::choose(ty, m.objects.as_slice()) {
                Ok(None) => continue,
                Ok(Some(found)) => return Some(Ok(found)),
                Err(e) => return Some(Err(e.to_string())),
            }
        }
        None
    }
}

/// Connection state shared by the watchers, the evaluator and the HTTP handlers.
#[derive(Debug, Default)]
pub struct Health {
    /// Whether the API server answered last time anything asked.
    pub reachable: bool,
    /// Whether a probe task is running (at most one).
    pub probing: bool,
    /// Whether an evaluation has completed since the initial lists came in.
    pub evaluated: bool,
}

/// Everything the tasks share.
pub struct Shared {
    /// The client (read timeout off: watches stay open; kube-runtime detects dead ones).
    pub client: Client,
    /// The cluster copy. An async mutex: the evaluator holds it while it reads the copy
    /// in place (no snapshot copy), and the watchers wait for it without blocking a thread.
    pub store: AsyncMutex<Store>,
    /// Woken on every change; the evaluator debounces.
    pub changed: Notify,
    /// Connection state.
    pub health: Mutex<Health>,
    /// The metrics.
    pub metrics: Metrics,
}

impl Shared {
    /// Whether `/readyz` answers 200: initial lists in and evaluated, API server reachable.
    pub fn ready(&self) -> bool {
        let h = lock(&self.health);
        h.evaluated && h.reachable
    }

    /// Refreshes `gpuwl_api_reachable` / `gpuwl_ready` from [`Health`].
    pub fn publish_health(&self) {
        let (reachable, evaluated) = {
            let h = lock(&self.health);
            (h.reachable, h.evaluated)
        };
        self.metrics.set_status(reachable, reachable && evaluated);
    }

    fn reached(&self) {
        let was = std::mem::replace(&mut lock(&self.health).reachable, true);
        if !was {
            self.publish_health();
        }
    }

    /// Records a failed watch or probe: one log line, one count and, when the API server
    /// did not answer at all (`unreachable`; an API error such as 403 is an answer), the
    /// API server marked unreachable with a probe started.
    fn failed(self: &Arc<Self>, resource: &str, message: &str, unreachable: bool) {
        log(&format!("watch {resource}: {message}"));
        self.metrics.watch_error(resource);
        if !unreachable {
            return;
        }
        let start_probe = {
            let mut h = lock(&self.health);
            h.reachable = false;
            !std::mem::replace(&mut h.probing, true)
        };
        self.publish_health();
        if start_probe {
            tokio::spawn(probe_until_reachable(self.clone()));
        }
    }
}

/// A std mutex lock that survives a panicked holder (the data are plain maps).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One line on stderr, prefixed `gpuwl serve: `, control characters escaped.
pub fn log(message: &str) {
    eprintln!("gpuwl serve: {}", one_line(message));
}

/// `GET /version` every [`PROBE_INTERVAL`] until it answers; then the API server counts
/// as reachable again.
async fn probe_until_reachable(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(PROBE_INTERVAL).await;
        if lock(&shared.health).reachable {
            break;
        }
        if let Ok(Ok(_)) =
            tokio::time::timeout(PROBE_TIMEOUT, shared.client.apiserver_version()).await
        {
            log("the API server answers again");
            shared.reached();
            break;
        }
    }
    lock(&shared.health).probing = false;
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
fn error_text(doing: &str, e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => live::api_error(doing, k).to_string(),
        other => format!("cannot {doing}: {other}"),
    }
}

/// Runs one watcher until it meets 404 (`stop_on_404`) or forever, applying its events to
/// the mirror `pick` selects.
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
    let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                let real = !matches!(event, Event::Init);
                let changed = pick(&mut *shared.store.lock().await).apply(keyed(event, &reduce));
                if real {
                    shared.reached();
                }
                if changed {
                    shared.changed.notify_one();
                }
            }
            Err(e) if stop_on_404 && not_found(&e) => return,
            Err(e) => shared.failed(resource, &error_text(&doing, &e), no_answer(&e)),
        }
    }
}

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config)
}

/// Watches nodes forever.
pub async fn nodes(shared: Arc<Shared>) {
    let api: Api<Node> = Api::all(shared.client.clone());
    run_watcher(
        &shared,
        api,
        watcher::Config::default().page_size(LIST_PAGE_SIZE),
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
    let api: Api<Pod> = Api::all(shared.client.clone());
    run_watcher(
        &shared,
        api,
        watcher::Config::default()
            .fields(POD_FIELD_SELECTOR)
            .page_size(LIST_PAGE_SIZE),
        "pods",
        |p: &Pod| {
            let key = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or("")
            );
            match pods::pod_info(p) {
                Ok(info) if !info.requests.is_empty() => (key, Some(info)),
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
}

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
        }
    }

    fn mirror(self, s: &mut Store) -> &mut CrMirror {
        match self {
            Cr::ClusterPolicy => &mut s.policy,
            Cr::HyperConverged => &mut s.hyperconverged,
            Cr::KubeVirt => &mut s.kubevirt,
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
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &ar);
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
                        (key, kv_input::object_value(ty, o).ok())
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
                // the CRD probe; no answer at all, sooner.
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
                {
                    let mut st = shared.store.lock().await;
                    cr.mirror(&mut st).unreadable = Some(one_line(&why));
                }
                shared.failed(resource, &why, unreachable);
                shared.changed.notify_one();
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
