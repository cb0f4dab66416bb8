//! End-to-end against the real local control plane: `gpuwl lab` on its own cluster
//! (`gpuwl-test-inventory`), then `gpuwl inventory` and `gpuwl explain pod
//! gpu-vm/job-cross` with that cluster's kubeconfig. Asserts issue 5's "done when":
//! three pools with capacity 4 / 2 / 4, allocated 1 / 1 / 1, job-cross unservable on
//! nvidia.com/gpu beside 3 free in pool container, and the selector named as the cause.

use std::path::Path;

use serde_json::Value;

use crate::common::{ClusterDown, gpuwl_explained, gpuwl_ok, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-test-inventory";

#[test]
#[ignore = "needs local control plane"]
fn after_the_lab() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let (root, kubeconfig) = crate::common::lab_cluster(CLUSTER);
    let kubeconfig = kubeconfig.as_str();
    assert!(Path::new(kubeconfig).exists(), "{kubeconfig}");

    let doc: Value = serde_json::from_str(&gpuwl_ok(&[
        "inventory",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]))
    .unwrap();
    let row = |pool: &str, res: &str| -> [i64; 3] {
        let r = doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["pool"] == pool && r["resource"] == res)
            .unwrap_or_else(|| panic!("no row {pool} × {res}: {doc}"));
        ["capacity", "allocated", "free"].map(|k| r[k].as_i64().unwrap())
    };
    assert_eq!(row("container", "nvidia.com/gpu"), [4, 1, 3]);
    assert_eq!(row("vm-passthrough", "nvidia.com/GA102GL_A10"), [2, 1, 1]);
    assert_eq!(row("vm-vgpu", "nvidia.com/NVIDIA_A10-12Q"), [4, 1, 3]);
    let u = doc["unservable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["pod"] == "gpu-vm/job-cross")
        .expect("job-cross unservable");
    assert_eq!(u["resource"], "nvidia.com/gpu");
    assert_eq!(
        u["freeSameName"],
        serde_json::json!([{"pool": "container", "resource": "nvidia.com/gpu", "free": 3}])
    );
    // The scheduler's own text, read from the pod.
    let msg = u["schedulerMessage"].as_str().unwrap();
    assert!(msg.starts_with("0/3 nodes are available: "), "{msg}");
    let cross = std::fs::read_to_string(root.path().join("out/07-cross.txt")).unwrap();
    assert!(cross.contains(&format!("MESSAGE={msg}")), "{cross}");

    let text = gpuwl_explained(&["pod", "gpu-vm/job-cross", "--kubeconfig", kubeconfig]);
    assert!(
        text.contains("Cause (excluded): the nodeSelector nvidia.com/gpu.workload.config=vm-passthrough confines the pod to pool vm-passthrough"),
        "{text}"
    );
    assert!(
        text.contains("nvidia.com/gpu exists only in pool container (3 free) on lab-node-0"),
        "{text}"
    );
    // A manifest alone is explained against the configured cluster's nodes and pods.
    let manifest = root.path().join("k8s/pod-cross.yaml");
    let doc = gpuwl_explained(&[
        "--pod",
        manifest.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["causeCode"], "excluded");
    assert_eq!(doc["nodesTotal"], 3);
    assert_eq!(doc["allocationsKnown"], true);
}
