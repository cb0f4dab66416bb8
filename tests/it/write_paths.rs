//! The fast tier of gpuwl's write paths: the device-plugin emulation, the lab's API
//! operations and the twin's loader run against the in-memory API server of
//! [`crate::fake_api`] — no cluster, no process — and the tests assert what they wrote, in
//! what order, and what they do when the API refuses. The same paths run against the real
//! control plane in the live tests (lab.rs, gpu_operator.rs, whatif.rs); these catch a
//! changed request in seconds.

use std::time::Duration;

use gpuwl::cluster::gpusim::{self, GpuHardware, HARDWARE_ANNOTATION};
use gpuwl::lab::kubeops;
use http::Method;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::fake_api::FakeApi;

const OPERATOR_NS: &str = "gpu-operator";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A node carrying the emulation's hardware annotation and `labels`.
fn gpu_node(name: &str, hw: &GpuHardware, labels: Value) -> Value {
    json!({
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {HARDWARE_ANNOTATION: serde_json::to_string(hw).unwrap()},
        },
        "status": {"capacity": {"cpu": "16", "pods": "110"},
                   "allocatable": {"cpu": "16", "pods": "110"}},
    })
}

/// A pod of DaemonSet `ds` on `node` in the operator's namespace, in `phase`.
fn operand_pod(ds: &str, node: &str, phase: &str) -> Value {
    json!({
        "metadata": {
            "name": format!("{ds}-{node}"),
            "namespace": OPERATOR_NS,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds,
                                 "uid": "u-1", "controller": true}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase},
    })
}

fn capacity(api: &FakeApi, node: &str) -> Value {
    api.get(&format!("/api/v1/nodes/{node}")).unwrap()["status"]["capacity"].clone()
}

#[test]
fn the_emulation_advertises_what_the_running_device_plugins_register() {
    let api = FakeApi::new();
    let hw = GpuHardware::a10(2);
    api.insert(
        "/api/v1",
        "nodes",
        gpu_node(
            "n-vm",
            &hw,
            json!({"nvidia.com/gpu.workload.config": "vm-passthrough"}),
        ),
    );
    api.insert(
        "/api/v1",
        "nodes",
        gpu_node(
            "n-ctr",
            &hw,
            json!({"nvidia.com/gpu.workload.config": "container"}),
        ),
    );
    api.insert(
        "/api/v1",
        "nodes",
        json!({"metadata": {"name": "cpu-only"}}),
    );
    for (ds, node, phase) in [
        (gpusim::SANDBOX_DEVICE_PLUGIN_APP, "n-vm", "Running"),
        (gpusim::VFIO_MANAGER_APP, "n-vm", "Running"),
        (gpusim::DEVICE_PLUGIN_APP, "n-ctr", "Pending"),
    ] {
        api.insert("/api/v1", "pods", operand_pod(ds, node, phase));
    }
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();

    // Pass 1: the sandbox plugin (with the VFIO manager) registers the device-model name on
    // n-vm through the status subresource; the container plugin's pod is not running yet,
    // so n-ctr advertises nothing and is not written; the CPU node is never touched.
    assert_eq!(
        rt.block_on(gpusim::emulate_once(&client, OPERATOR_NS))
            .unwrap(),
        1
    );
    assert_eq!(api.writes(), ["PATCH /api/v1/nodes/n-vm/status"]);
    let patch = api.requests().last().unwrap().clone();
    assert_eq!(patch.content_type, "application/merge-patch+json");
    assert_eq!(
        patch.body,
        json!({"status": {"capacity": {"nvidia.com/GA102GL_A10": "2"},
                          "allocatable": {"nvidia.com/GA102GL_A10": "2"}}})
    );
    assert_eq!(
        capacity(&api, "n-vm"),
        json!({"cpu": "16", "pods": "110", "nvidia.com/GA102GL_A10": "2"})
    );

    // Pass 2: nothing changed, nothing written.
    let before = api.requests().len();
    assert_eq!(
        rt.block_on(gpusim::emulate_once(&client, OPERATOR_NS))
            .unwrap(),
        0
    );
    assert!(api.requests()[before..].iter().all(|r| r.method == "GET"));

    // The container plugin starts on n-ctr; the node is relabelled to container and its
    // sandbox plugin goes: n-vm keeps its name at "0" (as the kubelet keeps a resource whose
    // plugin left), n-ctr advertises nvidia.com/gpu.
    api.modify(
        &format!(
            "/api/v1/namespaces/{OPERATOR_NS}/pods/{}-n-ctr",
            gpusim::DEVICE_PLUGIN_APP
        ),
        |p| p["status"]["phase"] = json!("Running"),
    );
    api.remove(&format!(
        "/api/v1/namespaces/{OPERATOR_NS}/pods/{}-n-vm",
        gpusim::SANDBOX_DEVICE_PLUGIN_APP
    ));
    assert_eq!(
        rt.block_on(gpusim::emulate_once(&client, OPERATOR_NS))
            .unwrap(),
        2
    );
    assert_eq!(capacity(&api, "n-vm")["nvidia.com/GA102GL_A10"], "0");
    assert_eq!(capacity(&api, "n-ctr")["nvidia.com/gpu"], "2");
    assert_eq!(
        api.get("/api/v1/nodes/n-ctr").unwrap()["status"]["allocatable"]["nvidia.com/gpu"],
        "2"
    );
}

#[test]
fn a_refused_status_write_is_an_error_naming_the_node_and_the_next_pass_retries() {
    let api = FakeApi::new();
    api.insert(
        "/api/v1",
        "nodes",
        gpu_node("n-1", &GpuHardware::a10(1), json!({})),
    );
    api.insert(
        "/api/v1",
        "pods",
        operand_pod(gpusim::DEVICE_PLUGIN_APP, "n-1", "Running"),
    );
    api.fail(Method::PATCH, "/nodes/n-1/status", 500, 1);
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    let err = rt
        .block_on(gpusim::emulate_once(&client, OPERATOR_NS))
        .unwrap_err()
        .to_string();
    assert!(err.contains("update the status of node n-1"), "{err}");
    assert!(err.contains("scripted failure"), "{err}");
    assert_eq!(capacity(&api, "n-1").get("nvidia.com/gpu"), None);
    assert_eq!(
        rt.block_on(gpusim::emulate_once(&client, OPERATOR_NS))
            .unwrap(),
        1
    );
    assert_eq!(capacity(&api, "n-1")["nvidia.com/gpu"], "1");
}

#[test]
fn the_labs_namespace_is_created_once_and_a_terminating_one_is_waited_out() {
    let api = FakeApi::new();
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    rt.block_on(kubeops::ensure_namespace(&client, "gpu-lab"))
        .unwrap();
    rt.block_on(kubeops::ensure_namespace(&client, "gpu-lab"))
        .unwrap();
    assert_eq!(api.writes(), ["POST /api/v1/namespaces"]);

    // Terminating: the lab waits for it to go (a watch), then creates it anew.
    api.modify("/api/v1/namespaces/gpu-lab", |ns| {
        ns["metadata"]["deletionTimestamp"] = json!("2026-12-02T00:00:00Z");
    });
    let gc = api.clone();
    let remover = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        gc.remove("/api/v1/namespaces/gpu-lab");
    });
    rt.block_on(kubeops::ensure_namespace(&client, "gpu-lab"))
        .unwrap();
    remover.join().unwrap();
    assert_eq!(
        api.writes(),
        ["POST /api/v1/namespaces", "POST /api/v1/namespaces"]
    );
    let ns = api.get("/api/v1/namespaces/gpu-lab").unwrap();
    assert!(ns["metadata"]["deletionTimestamp"].is_null(), "{ns}");

    // A refused create is an error naming the namespace.
    api.remove("/api/v1/namespaces/gpu-lab");
    api.fail(Method::POST, "/namespaces", 403, 1);
    let err = rt
        .block_on(kubeops::ensure_namespace(&client, "gpu-lab"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("create namespace gpu-lab"), "{err}");
}

fn lab_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "gpu-lab"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }))
    .unwrap()
}

/// Plays kube-scheduler for pod `name`: after `after`, sets `PodScheduled` to `status`
/// (and `spec.nodeName` when it is "True").
fn schedule_later(api: &FakeApi, name: &str, after: Duration, status: &str, node: &str) {
    let api = api.clone();
    let path = format!("/api/v1/namespaces/gpu-lab/pods/{name}");
    let (status, node) = (status.to_string(), node.to_string());
    std::thread::spawn(move || {
        std::thread::sleep(after);
        api.modify(&path, |p| {
            if status == "True" {
                p["spec"]["nodeName"] = json!(node);
            }
            let reason = if status == "True" {
                ""
            } else {
                "Unschedulable"
            };
            p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": status,
                "reason": reason,
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]);
        });
    });
}

#[test]
fn a_lab_pod_is_created_and_awaited_until_the_scheduler_decides() {
    let api = FakeApi::new();
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    schedule_later(
        &api,
        "job-a",
        Duration::from_millis(300),
        "True",
        "lab-node-0",
    );
    let pod = rt
        .block_on(kubeops::create_and_await_scheduling(
            &client,
            &lab_pod("job-a"),
        ))
        .unwrap();
    assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("lab-node-0"));
    schedule_later(&api, "job-b", Duration::from_millis(300), "False", "");
    let pod = rt
        .block_on(kubeops::create_and_await_scheduling(
            &client,
            &lab_pod("job-b"),
        ))
        .unwrap();
    let cond = kubeops::pod_scheduled(&pod).unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    assert_eq!(
        api.writes(),
        [
            "POST /api/v1/namespaces/gpu-lab/pods",
            "POST /api/v1/namespaces/gpu-lab/pods"
        ]
    );
    // The request body is the pod asked for, resource limits included.
    let requests = api.requests();
    let sent = &requests.iter().find(|r| r.method == "POST").unwrap().body;
    assert_eq!(
        sent["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "1"
    );

    // Deleting waits until the pod is gone (a watch); a missing pod is no error.
    rt.block_on(kubeops::delete_pod(&client, "gpu-lab", "job-a"))
        .unwrap();
    assert!(api.get("/api/v1/namespaces/gpu-lab/pods/job-a").is_none());
    rt.block_on(kubeops::delete_pod(&client, "gpu-lab", "job-a"))
        .unwrap();
    let deletes: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert!(deletes[0].query.is_empty() || !deletes[0].query.contains("dryRun"));
    assert_eq!(deletes[0].body["gracePeriodSeconds"], 0);
}

#[test]
fn the_lab_labels_nodes_and_writes_their_gpus_through_merge_patches() {
    let api = FakeApi::new();
    api.insert(
        "/api/v1",
        "nodes",
        json!({"metadata": {"name": "lab-node-1", "labels": {"keep": "me"}},
               "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}),
    );
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    rt.block_on(kubeops::label_node(
        &client,
        "lab-node-1",
        "nvidia.com/gpu.workload.config",
        "vm-passthrough",
    ))
    .unwrap();
    let mut res = std::collections::BTreeMap::new();
    res.insert("nvidia.com/GA102GL_A10".to_string(), Some("1".to_string()));
    res.insert("nvidia.com/gpu".to_string(), None);
    rt.block_on(kubeops::patch_status_resources(&client, "lab-node-1", &res))
        .unwrap();
    rt.block_on(gpuwl::lab::operator::apply_hardware(
        &client,
        "lab-node-1",
        &GpuHardware::a10(1),
    ))
    .unwrap();
    assert_eq!(
        api.writes(),
        [
            "PATCH /api/v1/nodes/lab-node-1",
            "PATCH /api/v1/nodes/lab-node-1/status",
            "PATCH /api/v1/nodes/lab-node-1"
        ]
    );
    let node = api.get("/api/v1/nodes/lab-node-1").unwrap();
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["keep"], "me");
    assert_eq!(labels["nvidia.com/gpu.workload.config"], "vm-passthrough");
    assert_eq!(labels["nvidia.com/gpu.product"], "NVIDIA-A10");
    let hw: GpuHardware = serde_json::from_str(
        node["metadata"]["annotations"][HARDWARE_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(hw, GpuHardware::a10(1));
    // `None` removes a name (merge patch null), the others are set in both maps.
    assert_eq!(
        node["status"]["capacity"],
        json!({"cpu": "8", "nvidia.com/GA102GL_A10": "1"})
    );
    assert_eq!(
        rt.block_on(kubeops::status_resource_names(
            &client,
            "lab-node-1",
            "nvidia.com/"
        ))
        .unwrap(),
        ["nvidia.com/GA102GL_A10"]
    );
    // A node that does not exist: an error naming it.
    let err = rt
        .block_on(kubeops::label_node(&client, "lab-node-9", "k", "v"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("label node lab-node-9"), "{err}");
}
