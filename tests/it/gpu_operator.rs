//! The real GPU Operator on the local control plane (`gpuwl cluster up --gpu-operator`,
//! `gpuwl lab --operator`): the lab's files equal a plain run's, the observed operands, a
//! relabel followed by the operator and the device-plugin emulation, and `down` leaving
//! nothing behind.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::kit::{ClusterDown, Seed, assert_same_seed, gpuwl, gpuwl_ok, the_machine_alone};
use serde_json::Value;

const CLUSTER: &str = "it-gpu-operator";

/// Per node of a node dump: name, workload label, the non-zero `nvidia.com/` resources.
fn dump_summary(path: &std::path::Path) -> Vec<(String, String, BTreeMap<String, String>)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out: Vec<_> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let label = n["metadata"]["labels"]["nvidia.com/gpu.workload.config"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let res = n["status"]["capacity"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, v)| k.starts_with("nvidia.com/") && v.as_str() != Some("0"))
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                label,
                res,
            )
        })
        .collect();
    out.sort();
    out
}

fn node_resources(kubeconfig: &str, node: &str) -> BTreeMap<String, String> {
    let (code, out, err) = gpuwl(&["check", "--kubeconfig", kubeconfig, "-o", "json"]);
    assert!(code == 0 || code == 1, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == node)
        .map(|n| {
            n["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["name"].as_str().unwrap().to_string(),
                        r["capacity"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn operands_on(kubeconfig: &str, node: &str) -> Vec<String> {
    // The operand pods on a node, read as a user would (kubectl-like JSON from the API via
    // gpuwl's own client is not exposed; the dump of `lab --operator` is per run), so the
    // test asks the API server directly.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = gpuwl::cluster::client(std::path::Path::new(kubeconfig), None)
            .await
            .unwrap();
        let ops = gpuwl::lab::operator::running_operands(&client)
            .await
            .unwrap();
        ops.get(node)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    })
}

#[test]
#[ignore = "needs local control plane"]
fn lab_on_the_real_operator_writes_the_seed_files_and_follows_a_relabel() {
    let _one = the_machine_alone();
    let _down = ClusterDown(CLUSTER);
    let plain_cluster = "it-gpu-operator-plain";
    let _down_plain = ClusterDown(plain_cluster);
    let plain = tempfile::tempdir().unwrap();
    gpuwl_ok(&[
        "lab",
        "--cluster-name",
        plain_cluster,
        "--root",
        plain.path().to_str().unwrap(),
        "--down",
    ]);
    let with_op = tempfile::tempdir().unwrap();
    let out = gpuwl_ok(&[
        "lab",
        "--operator",
        "--cluster-name",
        CLUSTER,
        "--root",
        with_op.path().to_str().unwrap(),
    ]);
    assert!(
        out.contains("[2/8] list operands per workload config — observed lab-node-0 container="),
        "{out}"
    );
    assert_same_seed(plain.path(), with_op.path(), Seed::All);
    assert_eq!(
        dump_summary(&plain.path().join("out/nodes.json")),
        dump_summary(&with_op.path().join("out/nodes.json"))
    );
    // What the operator deployed, per node.
    let observed =
        std::fs::read_to_string(with_op.path().join("out/operands-observed.txt")).unwrap();
    let lines: Vec<&str> = observed.lines().collect();
    assert_eq!(lines.len(), 4, "{observed}");
    let ops = |i: usize| -> Vec<&str> { lines[i].split_once('=').unwrap().1.split(',').collect() };
    assert!(lines[0].starts_with("lab-node-0 container="), "{observed}");
    for o in [
        "driver",
        "container-toolkit",
        "device-plugin",
        "dcgm-exporter",
        "gpu-feature-discovery",
        "operator-validator",
    ] {
        assert!(ops(0).contains(&o), "{o}: {observed}");
    }
    assert!(!ops(0).contains(&"sandbox-device-plugin"), "{observed}");
    assert!(
        lines[1].starts_with("lab-node-1 vm-passthrough="),
        "{observed}"
    );
    for o in ["vfio-manager", "sandbox-device-plugin", "sandbox-validator"] {
        assert!(ops(1).contains(&o), "{o}: {observed}");
    }
    assert!(
        !ops(1).contains(&"device-plugin") && !ops(1).contains(&"driver"),
        "{observed}"
    );
    assert!(lines[2].starts_with("lab-node-2 vm-vgpu="), "{observed}");
    for o in [
        "vgpu-manager",
        "vgpu-device-manager",
        "sandbox-device-plugin",
    ] {
        assert!(ops(2).contains(&o), "{o}: {observed}");
    }
    assert!(lines[3].starts_with("DIFFERENCE="), "{observed}");

    // cluster status lists the operator and the emulation as healthy.
    let status = gpuwl_ok(&["cluster", "status", "--name", CLUSTER]);
    for c in ["gpu-operator", "gpu-device-plugins"] {
        let line = status
            .lines()
            .find(|l| l.trim_start().starts_with(c))
            .unwrap_or_else(|| panic!("{status}"));
        assert!(line.ends_with("healthy"), "{status}");
    }

    // Relabel lab-node-1 to container: the operator swaps its operands, the emulated
    // plugins follow; the passthrough name stays at "0" as a kubelet leaves it.
    let kubeconfig = gpuwl_ok(&["cluster", "kubeconfig", "--name", CLUSTER]);
    let kubeconfig = kubeconfig.trim();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = gpuwl::cluster::client(std::path::Path::new(kubeconfig), None)
            .await
            .unwrap();
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        nodes
            .patch(
                "lab-node-1",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {
                    "nvidia.com/gpu.workload.config": "container"}}})),
            )
            .await
            .unwrap();
    });
    // Right after the relabel: the label says container but the node still advertises the
    // passthrough name; check flags it.
    let (code, out, _) = gpuwl(&["check", "--kubeconfig", kubeconfig]);
    let swapped_at_once = code == 0;
    if !swapped_at_once {
        assert!(out.contains("MISMATCH=lab-node-1"), "{out}");
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let res = node_resources(kubeconfig, "lab-node-1");
        let ops = operands_on(kubeconfig, "lab-node-1");
        if res.get("nvidia.com/gpu").map(String::as_str) == Some("2")
            && res.get("nvidia.com/GA102GL_A10").map(String::as_str) == Some("0")
            && ops.contains(&"device-plugin".to_string())
            && !ops.contains(&"sandbox-device-plugin".to_string())
            && !ops.contains(&"vfio-manager".to_string())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no swap after 90 s: {res:?} {ops:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // After the swap: check is content (both container nodes advertise nvidia.com/gpu), and
    // the inventory's container pool holds both nodes' GPUs.
    let (code, out, err) = gpuwl(&["check", "--kubeconfig", kubeconfig]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "OK=3");
    let inv = gpuwl_ok(&["inventory", "--kubeconfig", kubeconfig, "-o", "json"]);
    let v: Value = serde_json::from_str(&inv).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let container = rows
        .iter()
        .find(|r| r["pool"] == "container" && r["resource"] == "nvidia.com/gpu")
        .unwrap_or_else(|| panic!("{inv}"));
    assert_eq!(container["nodes"], 2, "{inv}");
    assert_eq!(container["capacity"], 6, "{inv}");
    // The passthrough name left behind at "0" is a stale key of the container pool.
    let stale = rows
        .iter()
        .find(|r| r["resource"] == "nvidia.com/GA102GL_A10")
        .unwrap_or_else(|| panic!("{inv}"));
    assert_eq!(stale["capacity"], 0, "{inv}");

    // down stops everything and leaves no mount behind.
    let state = gpuwl::cluster::state_dir(CLUSTER);
    gpuwl_ok(&["cluster", "down", "--name", CLUSTER]);
    assert!(!state.exists());
    assert!(!std::path::Path::new("/host-etc").exists());
    assert!(!std::path::Path::new("/opt/gpu-operator").exists());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains("gpu-operator"), "{mounts}");
}
