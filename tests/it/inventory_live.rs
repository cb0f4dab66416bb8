//! End-to-end against the real local control plane: `gpuwl lab` on its own cluster
//! (`gpuwl-test-inventory`), then `gpuwl inventory` and `gpuwl explain pod
//! gpu-vm/job-cross` with that cluster's kubeconfig. Asserts issue 5's "done when":
//! three pools with capacity 4 / 2 / 4, allocated 1 / 1 / 1, job-cross unservable on
//! nvidia.com/gpu beside 3 free in pool container, and the selector named as the cause.

use std::path::Path;

use serde_json::Value;

use crate::kit::{ClusterDown, gpuwl_explained, gpuwl_ok, kubectl_ok, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-test-inventory";

#[test]
#[ignore = "needs local control plane"]
fn after_the_lab() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let (root, kubeconfig) = crate::kit::lab_cluster(CLUSTER);
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
    // A ClusterPolicy file replaces the cluster's on the live cluster too, as in check:
    // sandbox workloads off puts every GPU node in pool container.
    let policy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/operator/clusterpolicy-disabled.yaml"
    );
    let off: Value = serde_json::from_str(&gpuwl_ok(&[
        "inventory",
        "--kubeconfig",
        kubeconfig,
        "--cluster-policy",
        policy,
        "-o",
        "json",
    ]))
    .unwrap();
    let pools: std::collections::BTreeSet<&str> = off["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["workload"].as_str())
        .collect();
    assert_eq!(pools, ["container"].into(), "{off}");
    // Under the shipped ServiceAccount (deploy/01-rbac.yaml).
    kubectl_ok(
        kubeconfig,
        &[
            "apply",
            "-f",
            concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/00-namespace.yaml"),
            "-f",
            concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/01-rbac.yaml"),
        ],
    );
    // The admin kubeconfig, impersonating the ServiceAccount (`as:` in the user entry).
    let admin = std::fs::read_to_string(kubeconfig).unwrap();
    let at = admin.find("    client-key: ").expect("client-key line");
    let end = at + admin[at..].find('\n').unwrap() + 1;
    let as_sa = format!(
        "{}    as: system:serviceaccount:gpuwl:gpuwl\n{}",
        &admin[..end],
        &admin[end..]
    );
    let sa = root.path().join("sa-kubeconfig");
    std::fs::write(&sa, as_sa).unwrap();
    let sa = sa.to_str().unwrap();
    // The shipped role reads DRA (issue 34): no "not read" line.
    let text = gpuwl_ok(&["inventory", "--kubeconfig", sa]);
    assert!(
        !text.contains("not read: the credentials may not list"),
        "{text}"
    );
    // Without its resource.k8s.io rule (an older role), the text says so instead of
    // leaving DRA out silently.
    let rules = kubectl_ok(
        kubeconfig,
        &["get", "clusterrole", "gpuwl-reader", "-o", "json"],
    );
    let role: Value = serde_json::from_str(&rules).unwrap();
    let at = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .position(|r| r["apiGroups"][0] == "resource.k8s.io")
        .expect("the shipped role grants resource.k8s.io");
    kubectl_ok(
        kubeconfig,
        &[
            "patch",
            "clusterrole",
            "gpuwl-reader",
            "--type=json",
            "-p",
            &format!("[{{\"op\":\"remove\",\"path\":\"/rules/{at}\"}}]"),
        ],
    );

    // RBAC changes reach the authorizer within a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let t = gpuwl_ok(&["inventory", "--kubeconfig", sa]);
        if t.contains("not read: the credentials may not list")
            || std::time::Instant::now() > deadline
        {
            break t;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert!(
        text.contains("DRA devices (resource.k8s.io/v1): not read: the credentials may not list"),
        "{text}"
    );
    let (rc, _, err) = crate::kit::gpuwl(&["check", "--kubeconfig", sa]);
    assert!(rc == 0 || rc == 1, "{err}");
    assert!(
        err.contains("warning: DRA objects not read: the credentials may not list"),
        "{err}"
    );
    // A cluster name that does not run: the error names the ones that do, and their --name.
    let (rc, _, err) = crate::kit::gpuwl(&["cluster", "kubeconfig", "--name", "not-started-x"]);
    assert_eq!(rc, 3, "{err}");
    assert!(err.contains("has no kubeconfig"), "{err}");
    assert!(
        err.contains("running now: ") && err.contains(CLUSTER),
        "{err}"
    );
    // explain without -n looks in the context's namespace (default); the error names the
    // namespace where a pod of that name is.
    let (rc, _, err) = crate::kit::gpuwl(&["explain", "job-cross", "--kubeconfig", kubeconfig]);
    assert_eq!(rc, 2, "{err}");
    assert_eq!(
        err,
        "gpuwl: pod default/job-cross not found; a pod job-cross is in namespace gpu-vm (add -n gpu-vm)\n"
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
