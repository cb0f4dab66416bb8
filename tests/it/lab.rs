//! End-to-end: `gpuwl lab` on the real local control plane (etcd, kube-apiserver,
//! kube-scheduler, kwok), into a temporary root, twice. Asserts every result file.
//!
//! Uses its own cluster name and stops it at the end, so it never touches a user's cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use k8s_openapi::api::core::v1::Pod;

use crate::kit::{
    ClusterDown, Seed, client_for, one_cluster_at_a_time, seed_files, set_node_resources,
};

const CLUSTER: &str = "gpuwl-test-lab";

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn run_lab(root: &Path) -> String {
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["lab", "--cluster-name", CLUSTER, "--root"])
        .arg(root)
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // Laid out for 100 columns: tables fitted, prose wrapped, no name split.
    for line in stdout.lines() {
        assert!(line.chars().count() <= 100, "over 100 columns: {line}");
    }
    assert!(
        out.status.success(),
        "gpuwl lab failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The lab's seed files under `root`, each with its text.
fn snapshot(root: &Path) -> Vec<(String, String)> {
    seed_files(Seed::All)
        .iter()
        .map(|rel| (rel.to_string(), read(root, rel)))
        .collect()
}

fn manifest(name: &str, resource: &str, selector: Option<&str>) -> String {
    let sel = selector
        .map(|v| format!("  nodeSelector:\n    nvidia.com/gpu.workload.config: {v}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: gpu-vm\nspec:\n{sel}  containers:\n  - name: cuda\n    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n    resources:\n      limits:\n        {resource}: 1\n"
    )
}

async fn pod_scheduled_message(kubeconfig: &Path) -> (String, Option<String>, String) {
    let client = client_for(kubeconfig).await;
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "gpu-vm");
    let p = pods.get("job-cross").await.unwrap();
    let status = p.status.unwrap();
    let cond = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    (
        status.phase.unwrap(),
        p.spec.unwrap().node_name,
        cond.message.unwrap(),
    )
}

/// What a user might do between two runs: relabel with a typo and add a second GPU name.
async fn tamper(kubeconfig: &Path) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let client = client_for(kubeconfig).await;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let label = serde_json::json!({"metadata": {"labels": {"nvidia.com/gpu.workload.config": "vm_passthrough"}}});
    nodes
        .patch("lab-node-1", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    set_node_resources(
        &client,
        "lab-node-2",
        serde_json::json!({"nvidia.com/gpu": "2"}),
    )
    .await;
}

#[test]
#[ignore = "needs local control plane"]
fn lab_on_the_local_control_plane_writes_every_file() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().join("gpuwl");
    let stdout = run_lab(&root);

    assert_eq!(
        read(&root, "out/01-nodes.txt"),
        "lab-node-0 container\nlab-node-1 vm-passthrough\nlab-node-2 vm-vgpu\n"
    );
    assert_eq!(
        read(&root, "out/operands.txt"),
        "container=datacenter-driver,container-toolkit,device-plugin,dcgm-exporter\n\
         vm-passthrough=vfio-manager,sandbox-device-plugin\n\
         vm-vgpu=vgpu-manager,vgpu-device-manager,sandbox-device-plugin\n\
         NO_LABEL=container\n\
         ENABLE_FLAG=sandboxWorkloads.enabled\n"
    );
    assert_eq!(
        read(&root, "out/03-resources.txt"),
        "lab-node-0 nvidia.com/gpu 4\nlab-node-1 nvidia.com/GA102GL_A10 2\nlab-node-2 nvidia.com/NVIDIA_A10-12Q 4\n"
    );
    assert_eq!(read(&root, "out/04-container.txt"), "NODE=lab-node-0\n");
    assert_eq!(
        read(&root, "out/05-passthrough.txt"),
        "NODE=lab-node-1\nRESOURCE=nvidia.com/GA102GL_A10\n"
    );
    assert_eq!(
        read(&root, "out/06-placement.txt"),
        "job-container lab-node-0\nvmi-passthrough lab-node-1\nvmi-vgpu lab-node-2\n"
    );
    assert_eq!(
        read(&root, "k8s/pod-container.yaml"),
        manifest("job-container", "nvidia.com/gpu", None)
    );
    assert_eq!(
        read(&root, "k8s/pod-passthrough.yaml"),
        manifest("vmi-passthrough", "nvidia.com/GA102GL_A10", None)
    );
    assert_eq!(
        read(&root, "k8s/pod-vgpu.yaml"),
        manifest("vmi-vgpu", "nvidia.com/NVIDIA_A10-12Q", None)
    );
    assert_eq!(
        read(&root, "k8s/pod-cross.yaml"),
        manifest("job-cross", "nvidia.com/gpu", Some("vm-passthrough"))
    );
    assert_eq!(read(&root, "out/consistency.txt"), "OK=3\n");

    // 07: the scheduler's own message, read back independently through the API.
    let kubeconfig = {
        let out = Command::new(cargo_bin("gpuwl"))
            .args(["cluster", "kubeconfig", "--name", CLUSTER])
            .output()
            .unwrap();
        assert!(out.status.success());
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (phase, node, message) = rt.block_on(pod_scheduled_message(&kubeconfig));
    assert_eq!(phase, "Pending");
    assert_eq!(node, None);
    assert!(message.starts_with("0/3 nodes are available:"), "{message}");
    assert!(message.contains("Insufficient nvidia.com/gpu"), "{message}");
    assert!(
        message.contains("didn't match Pod's node affinity/selector"),
        "{message}"
    );
    assert_eq!(
        read(&root, "out/07-cross.txt"),
        format!("PHASE=Pending\nNODE=none\nMESSAGE={message}\n")
    );

    // No GPU Operator on the plain lab: a relabel could never complete (nothing swaps the
    // operands), so it is refused before anything is cordoned or evicted (issue 48).
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["relabel", "lab-node-1=container", "--evict", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("relabel lab-node-1: refused, nothing was changed: the relabel could never complete: no GPU Operator in the cluster (no ClusterPolicy: absent-crd)"),
        "{err}"
    );
    let still = rt.block_on(async {
        let c = gpuwl::cluster::client(&kubeconfig, None).await.unwrap();
        let n = kube::Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
            .get("lab-node-1")
            .await
            .unwrap();
        let pod = kube::Api::<Pod>::namespaced(c, "gpu-vm")
            .get_opt("vmi-passthrough")
            .await
            .unwrap();
        (
            n.spec.and_then(|s| s.unschedulable).unwrap_or(false),
            pod.is_some(),
        )
    });
    assert_eq!(
        still,
        (false, true),
        "cordoned or evicted by a refused relabel"
    );

    // nodes.json: kubectl's List shape with the three lab nodes and their resources.
    let dump: serde_json::Value = serde_json::from_str(&read(&root, "out/nodes.json")).unwrap();
    assert_eq!(dump["kind"], "List");
    assert_eq!(dump["apiVersion"], "v1");
    assert_eq!(dump["metadata"]["resourceVersion"], "");
    let items = dump["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lab-node-0", "lab-node-1", "lab-node-2"]);
    assert_eq!(
        items[1]["status"]["allocatable"]["nvidia.com/GA102GL_A10"],
        "2"
    );
    assert_eq!(
        items[1]["status"]["capacity"]["nvidia.com/GA102GL_A10"],
        "2"
    );

    // The summary names the split.
    assert!(
        stdout.contains(
            "job-cross waits on the vm-passthrough pool while 3 nvidia.com/gpu are free on container nodes"
        ),
        "{stdout}"
    );

    // check-config.sh: usage without argument; a MISMATCH when lab-node-1 also advertises
    // nvidia.com/gpu; runs from any working directory.
    let script = root.join("bin/check-config.sh");
    let usage = Command::new(&script).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert!(usage.stdout.is_empty());
    let mut bad = dump.clone();
    bad["items"][1]["status"]["allocatable"]["nvidia.com/gpu"] = "2".into();
    bad["items"][1]["status"]["capacity"]["nvidia.com/gpu"] = "2".into();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("bad.json"), bad.to_string()).unwrap();
    let out = Command::new(&script)
        .arg("bad.json")
        .current_dir(other.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("MISMATCH=lab-node-1 "), "{lines:?}");

    // Twice, after tampering with the cluster: the same files.
    let first = snapshot(&root);
    rt.block_on(tamper(&kubeconfig));
    run_lab(&root);
    assert_eq!(first, snapshot(&root));

    // A node the cluster lacks is bad input found before step 1 (exit 2, with the nearest
    // node names), and no file is written.
    let broken = tmp.path().join("broken");
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["lab", "--node", "container=no-such-node", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--root")
        .arg(&broken)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "gpuwl: --node container=no-such-node: no node no-such-node in the cluster"
        ),
        "{err}"
    );
    assert!(!broken.join("out/01-nodes.txt").exists());
    assert_eq!(std::fs::read_dir(broken.join("out")).unwrap().count(), 0);
}

async fn namespaces(kubeconfig: &Path) -> kube::Api<k8s_openapi::api::core::v1::Namespace> {
    kube::Api::all(client_for(kubeconfig).await)
}

/// What a user does to the lab's namespace: `kubectl delete namespace gpu-vm` and re-run
/// at once (still Terminating), or after it is gone; both runs give the same files. A
/// namespace held Terminating by a finalizer ends the run with one line saying what to do.
#[test]
#[ignore = "needs local control plane"]
fn lab_survives_its_namespace_being_deleted() {
    const NAME: &str = "gpuwl-test-lab-ns";
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(NAME);
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().join("gpuwl");
    // `wait`: how long a run waits for a Terminating namespace (GPUWL_NAMESPACE_WAIT_SECONDS).
    let lab_waiting = |root: &Path, wait: &str| {
        Command::new(cargo_bin("gpuwl"))
            .args(["lab", "--cluster-name", NAME, "--root"])
            .arg(root)
            .env("COLUMNS", "100")
            .env("GPUWL_NAMESPACE_WAIT_SECONDS", wait)
            .output()
            .unwrap()
    };
    let lab = |root: &Path| lab_waiting(root, "60");
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "gpuwl lab failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ok(lab(&root));
    let first = snapshot(&root);
    let kubeconfig = gpuwl::cluster::kubeconfig_path(NAME);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(namespaces(&kubeconfig));

    // 1. Deleted, re-run while it is still Terminating.
    rt.block_on(async {
        api.delete("gpu-vm", &Default::default()).await.unwrap();
        let ns = api.get("gpu-vm").await.unwrap();
        assert!(ns.metadata.deletion_timestamp.is_some(), "not Terminating");
    });
    ok(lab(&root));
    assert_eq!(first, snapshot(&root));

    // 2. Deleted and gone before the re-run.
    rt.block_on(async {
        api.delete("gpu-vm", &Default::default()).await.unwrap();
        let started = std::time::Instant::now();
        while api.get_opt("gpu-vm").await.unwrap().is_some() {
            assert!(
                started.elapsed().as_secs() < 60,
                "gpu-vm not deleted in 60 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    });
    ok(lab(&root));
    assert_eq!(first, snapshot(&root));

    // 3. Held Terminating by a finalizer nobody removes: one line, exit 3, what to run.
    rt.block_on(async {
        use kube::api::{Patch, PatchParams};
        let hold = serde_json::json!({"metadata": {"finalizers": ["example.com/hold"]}});
        api.patch("gpu-vm", &PatchParams::default(), &Patch::Merge(&hold))
            .await
            .unwrap();
        api.delete("gpu-vm", &Default::default()).await.unwrap();
    });
    // Given up on after 10 s, not the default 60: nothing will remove the finalizer (the
    // test command's time, issue 38).
    let out = lab_waiting(&root, "10");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("gpuwl: step 1 (label the three nodes) failed: namespace gpu-vm is still being deleted (Terminating) after 10s")
            && last.contains("kubectl get namespace gpu-vm -o yaml")
            && last.contains("gpuwl cluster down"),
        "{err}"
    );
    assert!(!err.contains("ErrorResponse"), "{err}");
    rt.block_on(async {
        use kube::api::{Patch, PatchParams};
        let release = serde_json::json!({"metadata": {"finalizers": null}});
        api.patch("gpu-vm", &PatchParams::default(), &Patch::Merge(&release))
            .await
            .unwrap();
    });
    ok(lab(&root));
    assert_eq!(first, snapshot(&root));
}
