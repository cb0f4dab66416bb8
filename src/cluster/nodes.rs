//! Simulated nodes on the local control plane: Node objects whose kubelet kwok plays
//! (it runs with `--manage-all-nodes=true`, so every Node is kwok's).
//!
//! A new Node is created with the `node.kubernetes.io/not-ready:NoSchedule` taint (the API
//! server's `TaintNodesByCondition` admission plugin); kwok then reports it Ready and
//! kube-controller-manager's node-lifecycle controller lifts the taint. Until then the
//! scheduler rejects it, so [`wait_schedulable`] waits for both.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

use crate::input::live::{self, api_error};
use gpuwl_core::error::{Error, Result};

/// Realistic non-GPU capacity of a simulated node: a 32-core, 256 GiB, 110-pod server
/// (kwok's own default when none is set would be 1000 cores and 1 TiB, kwok
/// `kustomize/stage/node/fast/node-initialize.yaml`).
pub const SIM_NODE_CAPACITY: [(&str, &str); 4] = [
    ("cpu", "32"),
    ("memory", "263855104Ki"),
    ("pods", "110"),
    ("ephemeral-storage", "487260Mi"),
];

/// [`SIM_NODE_CAPACITY`] as the JSON map a node's `status.capacity`/`allocatable` takes.
fn sim_capacity() -> serde_json::Map<String, serde_json::Value> {
    SIM_NODE_CAPACITY
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// How long [`wait_schedulable`] waits by default for kwok and the node-lifecycle
/// controller (both act within a second on an idle cluster).
pub const SCHEDULABLE_WAIT: Duration = Duration::from_secs(60);

/// Name of the `i`-th plain simulated node `gpuwl cluster up --nodes N` creates
/// (`kwok-node-0`, `kwok-node-1`, …).
pub fn plain_node_name(i: u32) -> String {
    format!("kwok-node-{i}")
}

/// Creates simulated node `name` unless it exists, with kubelet-like labels
/// (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`, `type=kwok`) and
/// [`SIM_NODE_CAPACITY`] in both `status.capacity` and `status.allocatable` (set through
/// the `status` subresource; other entries are left alone).
///
/// Errors: [`Error::Runtime`] (one line) on API failure.
pub async fn ensure_sim_node(client: &Client, name: &str) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let doing = format!("create node {name}");
    let res = sim_capacity();
    if api
        .get_opt(name)
        .await
        .map_err(|e| api_error(&format!("get node {name}"), &e))?
        .is_none()
    {
        // The status goes in with the create, as a kubelet registers its node: kwok's
        // node-initialize stage keeps an allocatable it finds and writes its own defaults
        // only where there is none, so its first status write cannot replace ours
        // (kubernetes-sigs/kwok `kustomize/stage/node/fast/node-initialize.yaml`).
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                    "type": "kwok"
                },
                "annotations": {"kwok.x-k8s.io/node": "fake"}
            },
            "status": {"capacity": res, "allocatable": res}
        }))
        .map_err(|e| Error::failed(format!("node {name}: cannot build the object"), e))?;
        match api.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(e) if live::already_exists(&e) => {}
            Err(e) => return Err(api_error(&doing, &e)),
        }
    }
    let patch = json!({"status": {"capacity": res, "allocatable": res}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error(&format!("patch status of node {name}"), &e))?;
    Ok(())
}

/// kwok's own capacity for a node that has none (cpu `1k`, memory `1Ti`, pods `1M`, kwok
/// `kustomize/stage/node/fast/node-initialize.yaml`).
const KWOK_DEFAULT_CAPACITY: [(&str, &str); 3] = [("cpu", "1k"), ("memory", "1Ti"), ("pods", "1M")];

/// True when `node`'s allocatable holds kwok's defaults (`KWOK_DEFAULT_CAPACITY`: cpu 1k, memory 1Ti, pods 1M) for
/// every one of cpu, memory and pods: kwok initialised it without gpuwl's figures.
pub fn has_kwok_default_capacity(node: &Node) -> bool {
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    alloc.is_some_and(|a| {
        KWOK_DEFAULT_CAPACITY
            .iter()
            .all(|(k, v)| a.get(*k).is_some_and(|q| q.0 == *v))
    })
}

/// Re-applies [`SIM_NODE_CAPACITY`] to node `name`'s capacity and allocatable (a merge patch
/// of the status: GPU entries are left alone).
async fn restore_capacity(api: &Api<Node>, name: &str) -> Result<()> {
    let res = sim_capacity();
    let patch = json!({"status": {"capacity": res, "allocatable": res}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error(&format!("patch status of node {name}"), &e))?;
    Ok(())
}

/// True when the node is `Ready` and carries none of the `node.kubernetes.io/…` taints the
/// control plane puts on a node that is not (yet) healthy (`not-ready`, `unreachable`,
/// with effect `NoSchedule` or `NoExecute`).
pub fn is_schedulable(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter().any(|t| {
                t.key == "node.kubernetes.io/not-ready" || t.key == "node.kubernetes.io/unreachable"
            })
        });
    ready && !tainted
}

/// Waits, by watch, until node `name` [`is_schedulable`], for at most `timeout`; a node that
/// then shows kwok's default capacity ([`has_kwok_default_capacity`]) gets
/// [`SIM_NODE_CAPACITY`] back before this returns.
///
/// Errors: [`Error::Runtime`] when it is not within `timeout` (the message says which of
/// kwok or kube-controller-manager did not act) or the watch fails.
pub async fn wait_schedulable(client: &Client, name: &str, timeout: Duration) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let cond = |n: Option<&Node>| n.is_some_and(is_schedulable);
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(node)) => {
            if node.as_ref().is_some_and(has_kwok_default_capacity) {
                // kwok's first status write landed after ours (a node that existed before
                // ensure_sim_node's patch): put the simulated server's figures back.
                restore_capacity(&api, name).await?;
            }
            Ok(())
        }
        Ok(Err(e)) => Err(Error::failed(format!("watch node {name}"), e)),
        Err(_) => {
            let node = api.get_opt(name).await.ok().flatten();
            let ready = node.as_ref().is_some_and(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
            let who = if ready {
                "still tainted not-ready although Ready: is kube-controller-manager running? (gpuwl cluster status)"
            } else {
                "not Ready: is kwok-controller running? (gpuwl cluster status)"
            };
            Err(Error::Runtime(format!(
                "node {name} is not schedulable after {}s: {who}",
                timeout.as_secs()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready: &str, taint: Option<&str>) -> Node {
        let taints: Vec<serde_json::Value> = taint
            .map(|k| vec![json!({"key": k, "effect": "NoSchedule"})])
            .unwrap_or_default();
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    #[test]
    fn schedulable_needs_ready_and_no_health_taint() {
        assert!(is_schedulable(&node("True", None)));
        assert!(is_schedulable(&node("True", Some("example.com/other"))));
        assert!(!is_schedulable(&node(
            "True",
            Some("node.kubernetes.io/not-ready")
        )));
        assert!(!is_schedulable(&node(
            "True",
            Some("node.kubernetes.io/unreachable")
        )));
        assert!(!is_schedulable(&node("False", None)));
        assert!(!is_schedulable(&node("Unknown", None)));
    }

    #[test]
    fn kwok_default_capacity_is_recognised_only_when_all_three_are_kwoks() {
        let with = |cpu: &str, mem: &str, pods: &str| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "n"},
                "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": pods, "nvidia.com/gpu": "4"}}
            }))
            .unwrap()
        };
        assert!(has_kwok_default_capacity(&with("1k", "1Ti", "1M")));
        assert!(!has_kwok_default_capacity(&with(
            "32",
            "263855104Ki",
            "110"
        )));
        // A node a test gave its own small cpu is not "kwok's default".
        assert!(!has_kwok_default_capacity(&with("1k", "8Gi", "1M")));
        assert!(!has_kwok_default_capacity(
            &serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap()
        ));
    }
}
