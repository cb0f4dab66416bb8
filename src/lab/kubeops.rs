//! The API operations the lab performs: namespaces, label and status patches, pod
//! re-creation and waiting by watch (simulated nodes: [`crate::cluster::nodes`]). All
//! idempotent, so the lab can re-run. Failures are one line each.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, PodCondition};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

use crate::input::live::{self, already_exists, api_err};
use gpuwl_core::error::{Error, Result};

/// How long the lab waits for one pod to be scheduled (or found unschedulable), or deleted.
pub const WAIT: Duration = Duration::from_secs(90);

/// How long [`ensure_namespace`] waits for a namespace that is being deleted to be gone
/// (kube-controller-manager's namespace controller empties and finalizes it; on the local
/// control plane that takes seconds), unless `GPUWL_NAMESPACE_WAIT_SECONDS` says otherwise.
pub(crate) const NAMESPACE_GONE_WAIT: Duration = Duration::from_secs(60);

/// [`NAMESPACE_GONE_WAIT`], or `GPUWL_NAMESPACE_WAIT_SECONDS` (whole seconds ≥ 1) when set
/// (docs/lab.md; the live test of a namespace held by a finalizer uses 10).
pub(crate) fn namespace_gone_wait() -> Duration {
    std::env::var("GPUWL_NAMESPACE_WAIT_SECONDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|s| *s >= 1)
        .map_or(NAMESPACE_GONE_WAIT, Duration::from_secs)
}

/// Creates namespace `ns` if it does not exist. When it exists but is being deleted
/// (Terminating, e.g. after `kubectl delete namespace`), waits by watch up to
/// [`NAMESPACE_GONE_WAIT`] for it to be gone and creates it afresh.
///
/// Errors: [`Error::Runtime`] (one line) when the API refuses for another reason than
/// "already exists", or the namespace is still Terminating after the wait (the message
/// says what to check and run).
pub async fn ensure_namespace(client: &Client, ns: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let existing = api
        .get_opt(ns)
        .await
        .map_err(api_err(&format!("get namespace {ns}")))?;
    if let Some(old) = existing {
        if old.metadata.deletion_timestamp.is_none() {
            return Ok(());
        }
        let uid = old.metadata.uid.clone().unwrap_or_default();
        let wait = namespace_gone_wait();
        match tokio::time::timeout(
            wait,
            await_condition(api.clone(), ns, conditions::is_deleted(&uid)),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::failed(format!("watch namespace {ns}"), e));
            }
            Err(_) => {
                return Err(Error::Runtime(format!(
                    "namespace {ns} is still being deleted (Terminating) after {}s; see why with `kubectl get namespace {ns} -o yaml` (status.conditions), then run gpuwl lab again — on the local control plane, `gpuwl cluster down` starts it afresh",
                    wait.as_secs()
                )));
            }
        }
    }
    let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))
        .map_err(|e| Error::failed(format!("namespace {ns}: cannot build the object"), e))?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(e) if already_exists(&e) => Ok(()),
        Err(e) => Err(api_err(&format!("create namespace {ns}"))(e)),
    }
}

/// Merge-patches `status.capacity` and `status.allocatable` of node `name` through the
/// `status` subresource (what a device plugin's kubelet does), setting each `resources`
/// entry (name → quantity string) in both maps; an entry whose value is `None` is removed
/// from both. Other entries are left alone.
///
/// Errors: [`Error::Runtime`] when the node does not exist or the API refuses.
pub async fn patch_status_resources(
    client: &Client,
    name: &str,
    resources: &BTreeMap<String, Option<String>>,
) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": {"capacity": resources, "allocatable": resources}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_err(&format!("patch status of node {name}")))?;
    Ok(())
}

/// Names under `prefix` in node `name`'s `status.capacity` or `status.allocatable`.
///
/// Errors: [`Error::Runtime`] when the node cannot be read.
pub async fn status_resource_names(
    client: &Client,
    name: &str,
    prefix: &str,
) -> Result<Vec<String>> {
    let api: Api<Node> = Api::all(client.clone());
    let node = api
        .get(name)
        .await
        .map_err(api_err(&format!("get node {name}")))?;
    let mut names: Vec<String> = node
        .status
        .iter()
        .flat_map(|s| s.capacity.iter().chain(s.allocatable.iter()))
        .flat_map(|m| m.keys())
        .filter(|k| k.starts_with(prefix))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Sets label `key=value` on node `name` by a merge patch.
///
/// Errors: [`Error::Runtime`] when the node does not exist or the API refuses.
pub async fn label_node(client: &Client, name: &str, key: &str, value: &str) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_err(&format!("label node {name}")))?;
    Ok(())
}

/// Deletes pod `ns/name` at once (grace period 0) if it exists and waits, by watch, until
/// it is gone.
///
/// Errors: [`Error::Runtime`] on API failure or when it is still there after [`WAIT`].
pub async fn delete_pod(client: &Client, ns: &str, name: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Some(old) = api
        .get_opt(name)
        .await
        .map_err(api_err(&format!("get pod {ns}/{name}")))?
    else {
        return Ok(());
    };
    let uid = old.metadata.uid.clone().unwrap_or_default();
    match api
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(api_err(&format!("delete pod {ns}/{name}"))(e)),
    }
    tokio::time::timeout(
        WAIT,
        await_condition(api, name, conditions::is_deleted(&uid)),
    )
    .await
    .map_err(|_| Error::Runtime(format!("pod {ns}/{name} still exists after {WAIT:?}")))?
    .map_err(|e| Error::failed(format!("watch pod {ns}/{name}"), e))?;
    Ok(())
}

/// Creates `pod` (as read from its manifest) and waits, by watch, until the scheduler has
/// decided: the PodScheduled condition is True (bound) or False with reason
/// `Unschedulable`. Returns the pod as last seen.
///
/// Errors: [`Error::Runtime`] on API failure or when no decision comes within [`WAIT`].
pub async fn create_and_await_scheduling(client: &Client, pod: &Pod) -> Result<Pod> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), pod)
        .await
        .map_err(api_err(&format!("create pod {ns}/{name}")))?;
    let decided = |p: Option<&Pod>| {
        p.and_then(pod_scheduled).is_some_and(|c| {
            c.status == "True"
                || matches!(
                    c.reason.as_deref(),
                    Some("Unschedulable" | "SchedulingGated")
                )
        })
    };
    let seen = tokio::time::timeout(WAIT, await_condition(api, &name, decided))
        .await
        .map_err(|_| {
            Error::Runtime(format!(
                "pod {ns}/{name}: the scheduler decided nothing within {WAIT:?} (is kube-scheduler running?)"
            ))
        })?
        .map_err(|e| Error::failed(format!("watch pod {ns}/{name}"), e))?;
    seen.ok_or_else(|| Error::Runtime(format!("pod {ns}/{name} vanished while waiting")))
}

/// The pod's `PodScheduled` condition, if the scheduler has written one.
pub fn pod_scheduled(p: &Pod) -> Option<&PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
}

/// Lists every node (paginated, 500 per page), in API order.
///
/// Errors: [`Error::Runtime`] on API failure.
pub async fn list_nodes(client: &Client) -> Result<Vec<Node>> {
    let api: Api<Node> = Api::all(client.clone());
    let mut out = Vec::new();
    live::list_all(&api, ListParams::default().limit(500), "list nodes", |n| {
        out.push(n)
    })
    .await?;
    Ok(out)
}

/// Gets pod `ns/name`.
///
/// Errors: [`Error::Runtime`] on API failure or when it does not exist.
pub async fn get_pod(client: &Client, ns: &str, name: &str) -> Result<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.get(name)
        .await
        .map_err(api_err(&format!("get pod {ns}/{name}")))
}
