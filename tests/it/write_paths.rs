//! The fast tier of gpuwl's write paths: the device-plugin emulation and the lab's API
//! operations (its namespace, pods, labels, the DRA step, the KubeVirt objects) run against
//! the in-memory API server of [`crate::kit::fake_api`] — no cluster, no process — and the tests
//! assert what they wrote, in what order, and what they do when the API refuses. The same
//! paths run against the real control plane in the live tests (lab.rs, gpu_operator.rs,
//! kubevirt_live.rs); these catch a changed request in seconds. The twin's loader and the
//! local control plane's waits, reached through private functions, have theirs beside the
//! code (`twin::loader_tests`, `cluster::api_tests`; docs/testing.md lists all).

use std::time::Duration;

use gpuwl::cluster::gpusim::emulate_once;
use gpuwl::lab::kubeops;
use gpuwl_core::model::gpusim::{
    DEVICE_PLUGIN_APP, GpuHardware, HARDWARE_ANNOTATION, SANDBOX_DEVICE_PLUGIN_APP,
    VFIO_MANAGER_APP,
};
use http::Method;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::kit::fake_api::FakeApi;
use crate::kit::gpu_pod;

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
        (SANDBOX_DEVICE_PLUGIN_APP, "n-vm", "Running"),
        (VFIO_MANAGER_APP, "n-vm", "Running"),
        (DEVICE_PLUGIN_APP, "n-ctr", "Pending"),
    ] {
        api.insert("/api/v1", "pods", operand_pod(ds, node, phase));
    }
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();

    // Pass 1: the sandbox plugin (with the VFIO manager) registers the device-model name on
    // n-vm through the status subresource; the container plugin's pod is not running yet,
    // so n-ctr advertises nothing and is not written; the CPU node is never touched.
    assert_eq!(rt.block_on(emulate_once(&client, OPERATOR_NS)).unwrap(), 1);
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
    assert_eq!(rt.block_on(emulate_once(&client, OPERATOR_NS)).unwrap(), 0);
    assert!(api.requests()[before..].iter().all(|r| r.method == "GET"));

    // The container plugin starts on n-ctr; the node is relabelled to container and its
    // sandbox plugin goes: n-vm keeps its name at "0" (as the kubelet keeps a resource whose
    // plugin left), n-ctr advertises nvidia.com/gpu.
    api.modify(
        &format!(
            "/api/v1/namespaces/{OPERATOR_NS}/pods/{}-n-ctr",
            DEVICE_PLUGIN_APP
        ),
        |p| p["status"]["phase"] = json!("Running"),
    );
    api.remove(&format!(
        "/api/v1/namespaces/{OPERATOR_NS}/pods/{}-n-vm",
        SANDBOX_DEVICE_PLUGIN_APP
    ));
    assert_eq!(rt.block_on(emulate_once(&client, OPERATOR_NS)).unwrap(), 2);
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
        operand_pod(DEVICE_PLUGIN_APP, "n-1", "Running"),
    );
    api.fail(Method::PATCH, "/nodes/n-1/status", 500, 1);
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    let err = rt
        .block_on(emulate_once(&client, OPERATOR_NS))
        .unwrap_err()
        .to_string();
    assert!(err.contains("update the status of node n-1"), "{err}");
    assert!(err.contains("scripted failure"), "{err}");
    assert_eq!(capacity(&api, "n-1").get("nvidia.com/gpu"), None);
    assert_eq!(rt.block_on(emulate_once(&client, OPERATOR_NS)).unwrap(), 1);
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
    serde_json::from_value(gpu_pod("gpu-lab", name, "nvidia.com/gpu")).unwrap()
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

/// Plays kube-scheduler (with DRA's allocation) for the pods of namespace `ns`: each pod in
/// `plan` (name, node, device) is bound to its node once created, its claim `<pod>-claim`
/// allocated that device of the node's pool. Returns when all are bound.
fn bind_with_claims(
    api: &FakeApi,
    ns: &'static str,
    plan: &'static [(&'static str, &'static str, &'static str)],
) -> std::thread::JoinHandle<()> {
    let api = api.clone();
    std::thread::spawn(move || {
        let mut left: Vec<_> = plan.to_vec();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !left.is_empty() && std::time::Instant::now() < deadline {
            left.retain(|(pod, node, device)| {
                let path = format!("/api/v1/namespaces/{ns}/pods/{pod}");
                if api.get(&path).is_none() {
                    return true;
                }
                api.modify(
                    &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{pod}-claim"),
                    |c| {
                        c["status"]["allocation"] = json!({"devices": {"results": [
                            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node,
                             "device": device}]}});
                    },
                );
                api.modify(&path, |p| {
                    p["spec"]["nodeName"] = json!(node);
                    p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]);
                });
                false
            });
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[test]
fn the_dra_step_publishes_the_gpus_as_devices_and_claims_them() {
    use gpuwl::lab::{LabNodes, dra, files::LabDirs};
    let api = FakeApi::new();
    let root = tempfile::tempdir().unwrap();
    let dirs = LabDirs::new(root.path());
    dirs.create().unwrap();
    let nodes = LabNodes::default();
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    const PLAN: &[(&str, &str, &str)] = &[
        ("job-container", "lab-node-0", "gpu-0"),
        ("vmi-passthrough", "lab-node-1", "gpu-vfio-0"),
        ("job-cross", "lab-node-1", "gpu-1"),
    ];
    let scheduler = bind_with_claims(&api, dra::NAMESPACE, PLAN);
    let step = rt.block_on(dra::run(&client, &nodes, &dirs)).unwrap();
    scheduler.join().unwrap();
    assert_eq!(
        step.pods,
        PLAN.iter()
            .map(|(p, n, _)| (p.to_string(), Some(n.to_string())))
            .collect::<Vec<_>>()
    );
    // Three of the six GPUs in use, each counted once however many devices share it.
    assert_eq!(
        step.pool_line,
        "POOL gpu.nvidia.com GPUS=6 IN_USE=3 FREE=3 TYPES=gpu,vfio"
    );
    assert_eq!(
        std::fs::read_to_string(dirs.out.join("09-dra.txt")).unwrap(),
        "job-container lab-node-0\nvmi-passthrough lab-node-1\njob-cross lab-node-1\n\
         POOL gpu.nvidia.com GPUS=6 IN_USE=3 FREE=3 TYPES=gpu,vfio\n"
    );
    // In order: the namespace and its account, the classes, a counter and a device slice
    // per node, then per pod its claim and the pod.
    let posts: Vec<String> = api
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| {
            format!(
                "{} {}",
                r.path,
                r.body["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let mut want = vec![
        "/api/v1/namespaces gpu-dra".to_string(),
        "/api/v1/namespaces/gpu-dra/serviceaccounts default".into(),
        "/apis/resource.k8s.io/v1/deviceclasses gpu.nvidia.com".into(),
        "/apis/resource.k8s.io/v1/deviceclasses vfio.gpu.nvidia.com".into(),
    ];
    for n in ["lab-node-0", "lab-node-1", "lab-node-2"] {
        for s in ["counters", "devices"] {
            want.push(format!(
                "/apis/resource.k8s.io/v1/resourceslices {n}-gpu.nvidia.com-{s}"
            ));
        }
    }
    for (p, _, _) in PLAN {
        want.push(format!(
            "/apis/resource.k8s.io/v1/namespaces/gpu-dra/resourceclaims {p}-claim"
        ));
        want.push(format!("/api/v1/namespaces/gpu-dra/pods {p}"));
    }
    assert_eq!(posts, want);
    let class = api
        .get("/apis/resource.k8s.io/v1/deviceclasses/vfio.gpu.nvidia.com")
        .unwrap();
    assert_eq!(
        class["spec"]["selectors"][0]["cel"]["expression"],
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
    );
    let slice = api
        .get("/apis/resource.k8s.io/v1/resourceslices/lab-node-2-gpu.nvidia.com-devices")
        .unwrap();
    let devices = slice["spec"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 4);
    assert_eq!(devices[1]["name"], "gpu-vfio-0");
    assert_eq!(devices[1]["attributes"]["type"]["string"], "vfio");
    assert_eq!(
        devices[1]["consumesCounters"],
        json!([{"counterSet": "gpu-0", "counters": {"gpu": {"value": "1"}}}])
    );
    assert_eq!(slice["spec"]["nodeName"], "lab-node-2");
    let pod = api
        .get("/api/v1/namespaces/gpu-dra/pods/job-cross")
        .unwrap();
    assert_eq!(
        pod["spec"]["resourceClaims"],
        json!([{"name": "gpu", "resourceClaimName": "job-cross-claim"}])
    );
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"nvidia.com/gpu.workload.config": "vm-passthrough"})
    );
    let claim = &api
        .requests()
        .into_iter()
        .find(|r| {
            r.path.ends_with("/resourceclaims")
                && r.body["metadata"]["name"] == "vmi-passthrough-claim"
        })
        .unwrap()
        .body;
    assert_eq!(
        claim["spec"]["devices"]["requests"],
        json!([{"name": "gpu", "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}])
    );

    // A re-run keeps what exists (an allocated claim cannot be deleted here): every create
    // answered AlreadyExists, no pod made again, the pods read back.
    let before = api.requests().len();
    let again = rt.block_on(dra::run(&client, &nodes, &dirs)).unwrap();
    assert_eq!(again, step);
    let new_posts: Vec<String> = api.requests()[before..]
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.path.clone())
        .collect();
    // (The namespace is found, not created again.)
    assert_eq!(new_posts.len(), 1 + 2 + 6 + 3, "{new_posts:?}");
    assert!(
        !new_posts.iter().any(|p| p == "/api/v1/namespaces"),
        "{new_posts:?}"
    );
    assert!(
        !new_posts.iter().any(|p| p.ends_with("/pods")),
        "{new_posts:?}"
    );

    // A refused slice stops the step, naming it.
    let api = FakeApi::new();
    api.fail(Method::POST, "/resourceslices", 403, 1);
    let err = rt
        .block_on(dra::run(&api.client(), &nodes, &dirs))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("create ResourceSlice lab-node-0-gpu.nvidia.com-counters"),
        "{err}"
    );
}

/// Plays virt-controller and the scheduler for the lab's VMIs in `ns`: a VirtualMachine
/// gets its VMI; a VMI asking `refused` gets `Synchronized=False`; any other gets its
/// virt-launcher pod (owned by the VMI's uid), bound to `node`, and phase `Scheduled`.
/// Returns once `count` VMIs were decided.
fn play_virt_controller(
    api: &FakeApi,
    ns: &'static str,
    refused: &'static str,
    node: &'static str,
    count: usize,
) -> std::thread::JoinHandle<()> {
    let api = api.clone();
    std::thread::spawn(move || {
        let vmis = format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances");
        let vms = format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachines");
        let mut done = std::collections::BTreeSet::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while done.len() < count && std::time::Instant::now() < deadline {
            for name in ["vmi-passthrough", "vmi-vgpu", "vm-cross"] {
                if done.contains(name) {
                    continue;
                }
                if let Some(vm) = api.get(&format!("{vms}/{name}"))
                    && api.get(&format!("{vmis}/{name}")).is_none()
                {
                    api.insert(
                        "/apis/kubevirt.io/v1",
                        "virtualmachineinstances",
                        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                               "metadata": {"name": name, "namespace": ns},
                               "spec": vm["spec"]["template"]["spec"].clone()}),
                    );
                }
                let Some(vmi) = api.get(&format!("{vmis}/{name}")) else {
                    continue;
                };
                let device = vmi["spec"]["domain"]["devices"]["gpus"][0]["deviceName"].clone();
                if device == refused {
                    api.modify(&format!("{vmis}/{name}"), |v| {
                        v["status"] = json!({"phase": "Pending", "conditions": [
                            {"type": "Synchronized", "status": "False", "reason": "FailedCreate",
                             "message": format!("GPU {refused} is not permitted in permittedHostDevices configuration")}]});
                    });
                } else {
                    api.insert(
                        "/api/v1",
                        "pods",
                        json!({"metadata": {"name": format!("virt-launcher-{name}-abcde"),
                                            "namespace": ns,
                                            "labels": {"kubevirt.io": "virt-launcher"},
                                            "ownerReferences": [{"apiVersion": "kubevirt.io/v1",
                                                "kind": "VirtualMachineInstance", "name": name,
                                                "uid": vmi["metadata"]["uid"].clone(),
                                                "controller": true}]},
                               "spec": {"nodeName": node, "containers": [{"name": "compute", "image": "i"}]},
                               "status": {"phase": "Running"}}),
                    );
                    api.modify(&format!("{vmis}/{name}"), |v| {
                        v["status"] = json!({"phase": "Scheduled"});
                    });
                }
                done.insert(name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[test]
fn the_labs_vms_are_cleaned_then_created_and_read_back() {
    use gpuwl::lab::kubevirt as lab_kv;
    const NS: &str = gpuwl::lab::manifests::NAMESPACE;
    let vms = lab_kv::lab_vms(
        "nvidia.com/GA102GL_A10",
        "nvidia.com/NVIDIA_A10-12Q",
        "nvidia.com/gpu",
    );
    let api = FakeApi::new();
    let rt = rt();
    let _in_rt = rt.enter();
    let client = api.client();
    // An earlier run left vmi-vgpu (its VM, VMI and launcher pod) and vmi-passthrough.
    api.insert(
        "/apis/kubevirt.io/v1",
        "virtualmachines",
        json!({"metadata": {"name": "vmi-vgpu", "namespace": NS}, "spec": {}}),
    );
    for name in ["vmi-vgpu", "vmi-passthrough"] {
        api.insert(
            "/apis/kubevirt.io/v1",
            "virtualmachineinstances",
            json!({"metadata": {"name": name, "namespace": NS}, "spec": {}}),
        );
    }
    let launcher = format!("/api/v1/namespaces/{NS}/pods/virt-launcher-vmi-vgpu-abcde");
    api.insert(
        "/api/v1",
        "pods",
        json!({"metadata": {"name": "virt-launcher-vmi-vgpu-abcde", "namespace": NS,
                            "labels": {"kubevirt.io": "virt-launcher"}}}),
    );
    // virt-controller deletes the launcher pod once its VMI is gone.
    let gc = api.clone();
    let removed = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        gc.remove(&launcher);
    });
    rt.block_on(lab_kv::clean(&client, &vms)).unwrap();
    removed.join().unwrap();
    let vm = |kind: &str, name: &str| {
        format!("DELETE /apis/kubevirt.io/v1/namespaces/{NS}/{kind}/{name}")
    };
    assert_eq!(
        api.writes(),
        [
            vm("virtualmachineinstances", "vmi-passthrough"),
            vm("virtualmachines", "vmi-vgpu"),
            vm("virtualmachineinstances", "vmi-vgpu"),
            // Not there: no error.
            vm("virtualmachines", "vm-cross"),
            vm("virtualmachineinstances", "vm-cross"),
        ]
    );

    // Created: the VMI placed with its launcher pod and node; the VM asking the container
    // name refused by virt-controller, in its words.
    let controller = play_virt_controller(&api, NS, "nvidia.com/gpu", "lab-node-1", 3);
    let placed = rt
        .block_on(lab_kv::create_and_await(&client, &vms[0]))
        .unwrap();
    let vgpu = rt
        .block_on(lab_kv::create_and_await(&client, &vms[1]))
        .unwrap();
    let cross = rt
        .block_on(lab_kv::create_and_await(&client, &vms[2]))
        .unwrap();
    controller.join().unwrap();
    assert_eq!(
        placed.line(),
        "vmi-passthrough VirtualMachineInstance nvidia.com/GA102GL_A10 virt-launcher-vmi-passthrough-abcde lab-node-1 Scheduled"
    );
    assert_eq!(
        vgpu.line(),
        "vmi-vgpu VirtualMachine nvidia.com/NVIDIA_A10-12Q virt-launcher-vmi-vgpu-abcde lab-node-1 Scheduled"
    );
    assert_eq!(
        cross.line(),
        "vm-cross VirtualMachine nvidia.com/gpu none none Pending FailedCreate: GPU nvidia.com/gpu is not permitted in permittedHostDevices configuration"
    );
    let sent: Vec<(String, Value)> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| (r.path, r.body))
        .collect();
    assert_eq!(
        sent.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [
            format!("/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances"),
            format!("/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines"),
            format!("/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines"),
        ]
    );
    assert_eq!(sent[1].1, lab_kv::manifest(&vms[1]));

    // A launcher pod the scheduler could not place: its PodScheduled message is the
    // condition.
    api.modify(
        &format!("/api/v1/namespaces/{NS}/pods/virt-launcher-vmi-passthrough-abcde"),
        |p| {
            p["spec"]["nodeName"] = Value::Null;
            p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/3 nodes are available"}]);
        },
    );
    let o = rt.block_on(lab_kv::observe(&client, &vms[0])).unwrap();
    assert_eq!(
        (o.node, o.condition.as_str()),
        (None, "Unschedulable: 0/3 nodes are available")
    );

    // A refused delete is an error naming the object.
    api.fail(
        Method::DELETE,
        "/virtualmachineinstances/vmi-passthrough",
        403,
        1,
    );
    let err = rt
        .block_on(lab_kv::clean(&client, &vms))
        .unwrap_err()
        .to_string();
    assert!(err.contains("delete VMI vmi-passthrough"), "{err}");
}
