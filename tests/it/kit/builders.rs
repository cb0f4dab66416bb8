//! The Kubernetes objects the tests build: a node, a pod asking for one device, a VMI, and
//! the two writes that put a node on a cluster (the local control plane or the in-memory
//! API server) with the resources a test wants it to advertise.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A Node `name` with `labels` (a JSON object) and nothing else: no status (kwok gives a
/// node its own; [`set_node_resources`] writes the resources a test wants).
pub fn node(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
    })
}

/// A Pod `ns/name` of one container (the pause image) whose limits ask for one `resource`.
pub fn gpu_pod(ns: &str, name: &str, resource: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"limits": {resource: "1"}}}]},
    })
}

/// A VirtualMachineInstance `ns/name` asking, under `spec.domain.devices.LIST` (`gpus`,
/// `hostDevices`), for each of `devices` (the entry's name, its `deviceName`); no
/// resources, no status (a test adds what it needs).
pub fn vmi(ns: &str, name: &str, list: &str, devices: &[(&str, &str)]) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|(n, d)| json!({"name": n, "deviceName": d}))
        .collect();
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"domain": {"devices": {list: devices}}},
    })
}

/// Creates `node` (a Node object, e.g. from [`node`]) through `client`.
pub async fn create_node(client: &kube::Client, node: Value) {
    let nodes: Api<Node> = Api::all(client.clone());
    let n: Node = serde_json::from_value(node).unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
}

/// Sets node `name`'s capacity and allocatable both to `resources` (a JSON object of
/// quantities) with a merge patch of its `status` subresource.
pub async fn set_node_resources(client: &kube::Client, name: &str, resources: Value) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": resources, "allocatable": resources}})),
        )
        .await
        .unwrap();
}
