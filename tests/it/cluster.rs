//! Integration test of the local control plane (`gpuwl cluster`): a real kube-scheduler
//! places Pods on kwok Nodes by extended resource.
//!
//! Builds the control plane first when it is not cached (minutes, cold). Uses its own
//! cluster name, `gpuwl-test-cluster`, and never touches another cluster.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gpuwl::cluster::{self, Status, UpOptions};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::common::one_cluster_at_a_time;

const NAME: &str = "gpuwl-test-cluster";

fn node(name: &str) -> Node {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
    }))
    .unwrap()
}

fn pod(name: &str, resource: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "gpu-vm" },
        "spec": { "containers": [{
            "name": "cuda",
            "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            "resources": { "limits": { resource: "1" } }
        }]}
    }))
    .unwrap()
}

/// Every pid recorded for the cluster, read before `down` removes the files.
fn recorded_pids(state: &std::path::Path) -> Vec<u32> {
    cluster::process::COMPONENTS
        .iter()
        .filter_map(|c| cluster::process::recorded_pid(state, c))
        .collect()
}

#[test]
#[ignore = "needs local control plane"]
fn scheduler_places_pods_by_extended_resource() {
    let _serial = one_cluster_at_a_time();
    let _ = cluster::down(NAME);
    let handle = cluster::up(&UpOptions {
        name: NAME.into(),
        progress: true,
    })
    .expect("cluster up");
    assert_eq!(cluster::status(NAME).unwrap(), Status::Running);
    // Idempotent: a second up returns the same running cluster.
    let again = cluster::up(&UpOptions {
        name: NAME.into(),
        progress: false,
    })
    .expect("second up");
    assert_eq!(again, handle);
    let pids = recorded_pids(&handle.state_dir);
    assert_eq!(pids.len(), 4);

    let result = std::panic::catch_unwind(|| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(scenario(&handle.kubeconfig))
    });

    cluster::down(NAME).expect("cluster down");
    assert_eq!(cluster::status(NAME).unwrap(), Status::Stopped);
    assert!(!handle.state_dir.exists(), "state dir removed");
    for pid in pids {
        assert!(
            !cluster::process::is_ours_and_alive(pid, &handle.state_dir),
            "pid {pid} still alive after down"
        );
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next().map(str::to_string));
        assert!(
            matches!(state.as_deref(), None | Some("Z") | Some("X")),
            "pid {pid} still exists: {stat}"
        );
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

async fn scenario(kubeconfig: &std::path::Path) {
    let client = cluster::client(kubeconfig, None).await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, resource, amount) in [
        ("test-node-a", "nvidia.com/gpu", "4"),
        ("test-node-b", "nvidia.com/GA102GL_A10", "2"),
    ] {
        nodes
            .create(&PostParams::default(), &node(name))
            .await
            .expect("create node");
        let mut res: BTreeMap<String, Quantity> = BTreeMap::new();
        res.insert("cpu".into(), Quantity("32".into()));
        res.insert("memory".into(), Quantity("256Gi".into()));
        res.insert("pods".into(), Quantity("110".into()));
        res.insert(resource.into(), Quantity(amount.into()));
        let patch = serde_json::json!({ "status": { "capacity": res, "allocatable": res } });
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch node status");
    }

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "gpu-vm" } })).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "gpu-vm");
    pods.create(
        &PostParams::default(),
        &pod("fits", "nvidia.com/GA102GL_A10"),
    )
    .await
    .expect("create pod fits");
    pods.create(
        &PostParams::default(),
        &pod("nowhere", "nvidia.com/NVIDIA_A10-12Q"),
    )
    .await
    .expect("create pod nowhere");

    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut fits_ok, mut nowhere_ok) = (false, false);
    let mut last = String::new();
    while Instant::now() < deadline && !(fits_ok && nowhere_ok) {
        let fits = pods.get("fits").await.unwrap();
        let spec_node = fits.spec.as_ref().and_then(|s| s.node_name.clone());
        let phase = fits.status.as_ref().and_then(|s| s.phase.clone());
        fits_ok =
            spec_node.as_deref() == Some("test-node-b") && phase.as_deref() == Some("Running");

        let nowhere = pods.get("nowhere").await.unwrap();
        let cond = nowhere
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled").cloned());
        nowhere_ok = cond.as_ref().is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("0/2 nodes are available:"))
        }) && nowhere
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .is_none();
        last = format!("fits: node={spec_node:?} phase={phase:?}; nowhere: {cond:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        fits_ok && nowhere_ok,
        "scheduling outcome not reached: {last}"
    );
    eprintln!("{last}");
}
