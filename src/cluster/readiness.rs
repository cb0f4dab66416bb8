//! Waiting for a cluster's components to be ready: each component's [`Readiness`] asked
//! through [`super::health`] ([`is_ready`]), the processes watched while waiting (one that
//! exits or finds its port taken ends the wait at once, [`StartError`]), the components
//! started once the API server answers and the plain simulated nodes made then
//! ([`wait_ready`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::kubeconfig::client;
use super::ports::{self, PortLock};
use super::recipe::{Component, Condition, Readiness};
use super::runtime::current_thread;
use super::{health, nodes, process};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::text;

/// Why a start failed: a picked port was taken by another process (start again on other
/// ports), or anything else.
#[derive(Debug)]
pub(super) enum StartError {
    PortTaken { component: String, port: u16 },
    Other(Error),
}

impl StartError {
    pub(super) fn into_error(self) -> Error {
        match self {
            StartError::PortTaken { component, port } => Error::runtime(format!(
                "cannot start {component}: port {port} on 127.0.0.1 is already in use by another process"
            )),
            StartError::Other(e) => e,
        }
    }
}

impl From<Error> for StartError {
    fn from(e: Error) -> Self {
        StartError::Other(e)
    }
}

pub(super) type StartResult<T> = std::result::Result<T, StartError>;

/// The components [`wait_ready`] starts once the API server is ready, in order, and the
/// port lock, held until they all listen.
pub(super) struct Deferred {
    pub(super) components: Vec<Component>,
    /// How many of `components` were started.
    pub(super) started: usize,
    pub(super) _lock: PortLock,
    pub(super) progress: bool,
}

/// The components whose processes a wait checks on every tick: one that exited, or logged
/// that its port is taken, ends the wait at once with its log's last line.
pub(super) struct Watch {
    state: PathBuf,
    /// Component, and whether this call started it (then its log is read for a bind
    /// conflict; a cluster found running has none of those).
    pub(super) started: Vec<(&'static str, bool)>,
}

impl Watch {
    pub(super) fn new(state: &Path) -> Watch {
        Watch {
            state: state.to_path_buf(),
            started: Vec::new(),
        }
    }

    /// A cluster that is already running: every component, none started by this call.
    pub(super) fn running(state: &Path) -> Watch {
        Watch {
            state: state.to_path_buf(),
            started: process::COMPONENTS.iter().map(|c| (*c, false)).collect(),
        }
    }

    pub(super) fn spawn(&mut self, c: &Component) -> Result<()> {
        process::spawn(&self.state, c)?;
        self.started.push((c.name, true));
        Ok(())
    }

    /// Ok while every watched component lives and none started by this call logged a
    /// bind conflict.
    fn check(&self) -> StartResult<()> {
        for &(c, ours) in &self.started {
            if ours {
                // Short logs, and a bind conflict there is this start's.
                let log =
                    std::fs::read_to_string(process::log_file(&self.state, c)).unwrap_or_default();
                if let Some(port) = ports::conflict_in_log(&log) {
                    return Err(StartError::PortTaken {
                        component: c.to_string(),
                        port,
                    });
                }
            }
            if process::alive(&self.state, c).is_none() && !alive_after_all(&self.state, c) {
                return Err(not_ready(&self.state, c, "exited").into());
            }
        }
        Ok(())
    }

    /// Waits until `component` accepts connections on `port` (and is still alive: the
    /// listener might be another process's).
    pub(super) fn listening(
        &self,
        component: &str,
        port: u16,
        timeout: Duration,
    ) -> StartResult<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let up = health::accepts(port);
            self.check()?;
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(not_ready(&self.state, component, "does not listen").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A component just found not alive whose log is still empty may be a process the kernel
/// has not finished exec'ing under load (its command line empty for longer than
/// [`process::is_ours_and_alive`]'s 1 s: "kube-scheduler exited" with an empty log was seen
/// once in the test command at load, the component fine when started again). Asks again
/// for up to 3 s; a component that wrote anything, or is gone for good, is decided at once.
fn alive_after_all(state: &Path, component: &str) -> bool {
    for _ in 0..15 {
        if !process::last_log_line(state, component).is_empty()
            || process::recorded_pid(state, component).is_none()
        {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
        if process::alive(state, component).is_some() {
            return true;
        }
    }
    false
}

pub(super) fn not_ready(state: &Path, component: &str, what: &str) -> Error {
    let last = process::last_log_line(state, component);
    Error::runtime(format!(
        "{component} {what} (log {}){}",
        process::log_file(state, component).display(),
        if last.is_empty() {
            String::new()
        } else {
            format!(": {}", text::esc(&last))
        }
    ))
}

/// Whether `c` is ready by its [`Readiness`], asked through [`health`]. `api` is the admin
/// client; `own` the client for its own HTTPS port (a [`Readiness::Healthz`] component,
/// [`health::insecure_client`], made once per wait); `api_ready` whether the API server
/// said `/readyz` ok: a condition read from the API server is asked only then.
pub(crate) async fn is_ready(
    c: &Component,
    api: &kube::Client,
    own: Option<&kube::Client>,
    api_ready: bool,
) -> bool {
    match &c.readiness {
        Readiness::Listening => c.ports.iter().all(|&p| health::accepts(p)),
        Readiness::ApiServerReadyz => health::api(api, "/readyz").await.as_deref() == Some("ok"),
        Readiness::HttpHealthz { port } => {
            let port = *port;
            tokio::task::spawn_blocking(move || health::http(port, "/healthz"))
                .await
                .ok()
                .flatten()
                .is_some_and(|a| a.is_ok())
        }
        Readiness::HttpReadyz { port } => {
            let port = *port;
            tokio::task::spawn_blocking(move || health::http(port, "/readyz"))
                .await
                .ok()
                .flatten()
                .is_some_and(|a| a.is_ok())
        }
        Readiness::HttpsAnswers { port, also } => {
            health::https(*port, "/healthz").await.is_some() && holds(api, also).await
        }
        Readiness::Healthz { also, .. } => {
            if also.is_some() && !api_ready {
                return false;
            }
            let Some(own) = own else {
                return false;
            };
            health::api(own, "/healthz").await.as_deref() == Some("ok") && holds(api, also).await
        }
    }
}

/// Whether `also` holds on the API server (`None` always does).
async fn holds(api: &kube::Client, also: &Option<Condition>) -> bool {
    match also {
        None => true,
        Some(Condition::ServiceAccount { namespace, name }) => {
            let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
                kube::Api::namespaced(api.clone(), namespace);
            accounts.get_opt(name).await.ok().flatten().is_some()
        }
        Some(Condition::LeaseHeld { namespace, name }) => {
            let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
                kube::Api::namespaced(api.clone(), namespace);
            leases
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .is_some_and(|h| !h.is_empty())
        }
    }
}

/// Waits until every component of `components` is ready by its [`Readiness`], starting the
/// `deferred` ones once the API server's `/readyz` says ok; creates the `nodes` plain
/// simulated nodes as soon as the API server is ready and waits until they are
/// schedulable. Every tick checks that each component lives. Runs its own single-threaded
/// runtime.
pub(super) fn wait_ready(
    watch: &mut Watch,
    kubeconfig: &Path,
    components: &[Component],
    nodes: u32,
    mut deferred: Option<Deferred>,
    timeout: Duration,
) -> StartResult<()> {
    let tokio_rt = current_thread()?;
    tokio_rt.block_on(async {
        let deadline = Instant::now() + timeout;
        let api = client(kubeconfig, None).await?;
        // A component ready once it listens (etcd) was waited for before this wait.
        let waited: Vec<&Component> = components
            .iter()
            .filter(|c| c.readiness != Readiness::Listening)
            .collect();
        let health = waited
            .iter()
            .map(|c| match c.readiness {
                Readiness::Healthz { port, .. } => health::insecure_client(port).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let api_server = waited
            .iter()
            .position(|c| c.readiness == Readiness::ApiServerReadyz);
        let mut done = vec![false; waited.len()];
        let mut nodes_created = nodes == 0;
        loop {
            if let Some(i) = api_server
                && !done[i]
            {
                done[i] = is_ready(waited[i], &api, None, false).await;
            }
            let api_ready = api_server.is_none_or(|i| done[i]);
            if api_ready && let Some(d) = &mut deferred {
                while d.started < d.components.len() {
                    let c = &d.components[d.started];
                    if d.progress {
                        note!("starting {} on {}", c.name, c.endpoint);
                    }
                    watch.spawn(c)?;
                    d.started += 1;
                }
                if d.components
                    .iter()
                    .all(|c| c.ports.iter().all(|&p| health::accepts(p)))
                {
                    // Listening: no other start can pick their ports now.
                    deferred = None;
                }
            }
            if api_ready && !nodes_created {
                for i in 0..nodes {
                    nodes::ensure_sim_node(&api, &nodes::plain_node_name(i)).await?;
                }
                nodes_created = true;
            }
            for (i, c) in waited.iter().enumerate() {
                if !done[i] && Some(i) != api_server {
                    done[i] = is_ready(c, &api, health[i].as_ref(), api_ready).await;
                }
            }
            watch.check()?;
            if done.iter().all(|d| *d) {
                for i in 0..nodes {
                    let left = deadline.saturating_duration_since(Instant::now());
                    nodes::wait_schedulable(&api, &nodes::plain_node_name(i), left).await?;
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let who = done
                    .iter()
                    .position(|d| !d)
                    .map(|i| waited[i].name)
                    .unwrap_or("kube-apiserver");
                return Err(not_ready(&watch.state, who, "is not ready in time").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::cluster::recipe::{self, StartWhen};
    use crate::testing::{self, FakeApi};
    use serde_json::json;

    fn component(name: &'static str, readiness: Readiness) -> Component {
        Component {
            name,
            binary: "/nonexistent".into(),
            args: Vec::new(),
            env: Vec::new(),
            ports: Vec::new(),
            endpoint: String::new(),
            start: StartWhen::Now,
            readiness,
        }
    }

    #[test]
    fn conditions_hold_once_the_controllers_object_is_there() {
        let api = FakeApi::new();
        let rt = testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let holds = |also: &Option<Condition>| rt.block_on(holds(&client, also));
        assert!(holds(&None));
        let account = Some(Condition::ServiceAccount {
            namespace: "default",
            name: "default",
        });
        assert!(!holds(&account));
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "default"}}),
        );
        assert!(holds(&account));
        let lease = Some(Condition::LeaseHeld {
            namespace: "kube-system",
            name: "kube-scheduler",
        });
        assert!(!holds(&lease));
        let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler";
        api.insert(
            "/apis/coordination.k8s.io/v1",
            "leases",
            json!({"metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
                   "spec": {"holderIdentity": ""}}),
        );
        assert!(!holds(&lease), "an empty holder is no leader");
        api.modify(path, |l| l["spec"]["holderIdentity"] = json!("sched_1"));
        assert!(holds(&lease));
        // An API error is "not yet", never ready.
        api.fail(http::Method::GET, "/leases/kube-scheduler", 500, 1);
        assert!(!holds(&lease));
        let asked: Vec<String> = api.requests().iter().map(|r| r.path.clone()).collect();
        assert!(
            asked.contains(&"/api/v1/namespaces/default/serviceaccounts/default".to_string()),
            "{asked:?}"
        );
    }

    #[test]
    fn readiness_is_asked_where_each_component_answers() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let rt = testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let health = health::insecure_client(https.port).unwrap();
        let ready = |c: &Component, api_ready: bool| {
            rt.block_on(is_ready(c, &client, Some(&health), api_ready))
        };
        let apiserver = component("kube-apiserver", Readiness::ApiServerReadyz);
        api.text("/readyz", 500, "[-]etcd failed: reason withheld");
        assert!(!ready(&apiserver, false));
        api.text("/readyz", 200, "ok\n");
        assert!(ready(&apiserver, false));

        // A controller's /healthz, and its condition asked only once the API server is.
        let cm = component(
            "kube-controller-manager",
            Readiness::Healthz {
                port: https.port,
                also: Some(Condition::ServiceAccount {
                    namespace: "default",
                    name: "default",
                }),
            },
        );
        api.text("/healthz", 200, "ok");
        let before = api.requests().len();
        assert!(!ready(&cm, false));
        assert_eq!(
            api.requests().len(),
            before,
            "nothing asked before the API server"
        );
        assert!(!ready(&cm, true), "no ServiceAccount yet");
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "default"}}),
        );
        assert!(ready(&cm, true));
        api.text("/healthz", 200, "[-]poststarthook failed");
        assert!(!ready(&cm, true), "only `ok` is healthy");

        // virt-api's JSON answer counts as an answer; an error status does not.
        let virt = component(
            "virt-api",
            Readiness::HttpsAnswers {
                port: https.port,
                also: None,
            },
        );
        api.text("/healthz", 200, r#"{"apiserver":"ok","restful":"ok"}"#);
        assert!(ready(&virt, false));
        api.text("/healthz", 500, "internal error");
        assert!(!ready(&virt, false));
        let gone = component(
            "virt-api",
            Readiness::HttpsAnswers {
                port: testing::closed_port(),
                also: None,
            },
        );
        assert!(!ready(&gone, false));

        // etcd: listening is ready.
        let mut etcd = component("etcd", Readiness::Listening);
        etcd.ports = vec![https.port];
        assert!(ready(&etcd, false));
        etcd.ports.push(testing::closed_port());
        assert!(!ready(&etcd, false));
    }

    #[test]
    fn a_start_waits_for_the_api_server_then_the_controllers_then_makes_its_nodes() {
        let api = FakeApi::new();
        api.ready_nodes();
        let https = testing::https(&api);
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = testing::kubeconfig(dir.path(), https.port);
        let info = testing::cluster_info_at(https.port);
        // The real recipe's readiness, every port at the fake.
        let components = recipe::components(&recipe::Layout {
            info: &info,
            state: dir.path(),
        });
        let wait = |nodes: u32, timeout: Duration| {
            let mut watch = Watch::new(dir.path());
            wait_ready(&mut watch, &kubeconfig, &components, nodes, None, timeout)
                .map_err(StartError::into_error)
                .map_err(|e| e.to_string())
        };
        // The API server not ready: it is the one named, and no node is made.
        api.text("/readyz", 500, "[-]etcd failed");
        api.text("/healthz", 200, "ok");
        let err = wait(2, Duration::from_millis(300)).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "kube-apiserver is not ready in time (log {})",
                dir.path().join("logs/kube-apiserver.log").display()
            )),
            "{err}"
        );
        assert!(api.writes().is_empty(), "{:?}", api.writes());
        // Ready, but the ServiceAccount controller has not run: kube-controller-manager
        // is named. The nodes are made as soon as the API server is ready.
        api.text("/readyz", 200, "ok");
        let err = wait(2, Duration::from_millis(300)).unwrap_err();
        assert!(
            err.starts_with("kube-controller-manager is not ready in time"),
            "{err}"
        );
        // The controller creates default/default: ready, the nodes schedulable.
        let controller = api.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            controller.insert(
                "/api/v1",
                "serviceaccounts",
                json!({"metadata": {"name": "default", "namespace": "default"}}),
            );
        });
        wait(2, Duration::from_secs(20)).unwrap();
        t.join().unwrap();
        for i in 0..2 {
            let name = nodes::plain_node_name(i);
            let node = api.get(&format!("/api/v1/nodes/{name}")).unwrap();
            assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], name);
            assert_eq!(node["metadata"]["labels"]["type"], "kwok");
            assert_eq!(
                node["metadata"]["annotations"]["kwok.x-k8s.io/node"],
                "fake"
            );
            let want: serde_json::Map<String, serde_json::Value> = nodes::SIM_NODE_CAPACITY
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            assert_eq!(node["status"]["capacity"], json!(want));
            assert_eq!(node["status"]["allocatable"], json!(want));
        }
        // Each node created once (the second wait found them) and its status set each time.
        let writes = api.writes();
        assert_eq!(
            writes.iter().filter(|w| *w == "POST /api/v1/nodes").count(),
            2,
            "{writes:?}"
        );
        assert_eq!(
            writes
                .iter()
                .filter(|w| *w == "PATCH /api/v1/nodes/kwok-node-0/status")
                .count(),
            2,
            "{writes:?}"
        );
    }
}
