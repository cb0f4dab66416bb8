//! One verdict per pod (issue 34): explain's class of a pending GPU pod is what inventory
//! (JSON, text, CSV), serve's evaluation and the admission guard use. Each situation is the
//! lab's dump (tests/data/inventory/lab) with one change: a scheduling gate, a cordoned
//! node, a pod short of cpu, a plugin restarting.

use serde_json::{Value, json};

use crate::kit::gpuwl;

const LAB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory/lab");

fn read(f: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{LAB}/{f}")).unwrap()).unwrap()
}

/// An unbound 1-container pod in gpu-vm asking for `limits`, with extra `spec` fields.
fn pending_pod(name: &str, limits: Value, requests: Value, spec: Value) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu-vm"},
        "spec": {"containers": [{"name": "c", "image": "x",
                 "resources": {"limits": limits, "requests": requests}}]},
        "status": {"phase": "Pending"}
    });
    if let Value::Object(m) = spec {
        for (k, v) in m {
            p["spec"][k] = v;
        }
    }
    p
}

/// The lab's nodes and pods with `edit_nodes` applied and `extra` pods added, written to a
/// temporary directory: (dir, nodes path, pods path).
fn situation(
    edit_nodes: impl FnOnce(&mut Value),
    extra: Vec<Value>,
) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = read("nodes.json");
    edit_nodes(&mut nodes);
    let mut pods = read("pods.json");
    pods["items"].as_array_mut().unwrap().extend(extra);
    let n = dir.path().join("nodes.json");
    let p = dir.path().join("pods.json");
    std::fs::write(&n, nodes.to_string()).unwrap();
    std::fs::write(&p, pods.to_string()).unwrap();
    let (n, p) = (n.display().to_string(), p.display().to_string());
    (dir, n, p)
}

/// explain -o json of `pod`; every pod here is blocked, so the exit status is 1.
fn explain(pod: &str, nodes: &str, pods: &str) -> Value {
    let (rc, out, err) = gpuwl(&[
        "explain", "pod", pod, "--nodes", nodes, "--pods", pods, "-o", "json",
    ]);
    assert_eq!(rc, 1, "a blocking cause: {err}");
    serde_json::from_str(&out).unwrap()
}

fn inventory(nodes: &str, pods: &str) -> Value {
    let (rc, out, err) = gpuwl(&["inventory", "--nodes", nodes, "--pods", pods, "-o", "json"]);
    assert_eq!(rc, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn row<'a>(inv: &'a Value, resource: &str) -> &'a Value {
    inv["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == resource)
        .unwrap()
}

/// serve's evaluation of the same files.
fn evaluate(nodes: &str, pods: &str) -> gpuwl_core::analysis::exporter::Evaluation {
    let mut n = Vec::new();
    gpuwl_core::decode::dump::read_from(std::fs::File::open(nodes).unwrap(), nodes, |x| n.push(x))
        .unwrap();
    let p = gpuwl_core::decode::pods::read_pods_path(std::path::Path::new(pods)).unwrap();
    gpuwl_core::analysis::exporter::evaluate(
        &n,
        &p,
        &gpuwl_core::model::operator::PolicyStatus::not_read(),
        None,
    )
}

fn pending(e: &gpuwl_core::analysis::exporter::Evaluation, class: &str, cause: &str) -> i64 {
    e.pending
        .as_ref()
        .unwrap()
        .get(&(class, cause))
        .copied()
        .unwrap_or(0)
}

/// Item 2: a pod held by `spec.schedulingGates` (how Kueue holds GPU pods) is `gated`,
/// never `fits-now`, and never PEND of a pool.
#[test]
fn a_gated_pod_is_gated_everywhere() {
    let mut gated = pending_pod(
        "gated-job",
        json!({"nvidia.com/gpu": "1"}),
        json!({}),
        json!({"schedulingGates": [{"name": "example.com/quota"}, {"name": "kueue.x-k8s.io/admission"}]}),
    );
    gated["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
        "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]);
    let (_d, nodes, pods) = situation(|_| {}, vec![gated]);
    let e = explain("gpu-vm/gated-job", &nodes, &pods);
    assert_eq!(e["causeCode"], "gated");
    // Issue 54, item 6: fits-now blocks nothing, so it is not among the blocking causes.
    assert_eq!(e["causeCodes"], json!(["gated"]));
    assert_eq!(e["verdict"]["class"], "gated");
    assert_eq!(e["verdict"]["transient"], true);
    assert_eq!(
        e["schedulingGates"],
        json!(["example.com/quota", "kueue.x-k8s.io/admission"])
    );
    let cause = e["cause"].as_str().unwrap();
    assert!(
        cause.starts_with("the pod is held by scheduling gates (example.com/quota, kueue.x-k8s.io/admission): the scheduler does not consider it until every gate is removed; once they are removed, it fits now"),
        "{cause}"
    );
    assert!(
        e["fix"].as_str().unwrap().contains("kubectl patch pod gated-job -n gpu-vm --type=json -p '[{\"op\":\"remove\",\"path\":\"/spec/schedulingGates\"}]'"),
        "{}",
        e["fix"]
    );
    // Text: the cause code the user sees.
    let (_, text, _) = gpuwl(&[
        "explain",
        "pod",
        "gpu-vm/gated-job",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert!(text.contains("Cause (gated):"), "{text}");
    // inventory: apart, not PEND.
    let inv = inventory(&nodes, &pods);
    assert_eq!(row(&inv, "nvidia.com/gpu")["pending"], 0);
    assert_eq!(inv["heldBack"][0]["pod"], "gpu-vm/gated-job");
    assert_eq!(inv["heldBack"][0]["class"], "gated");
    assert_eq!(
        inv["heldBack"][0]["by"],
        json!(["example.com/quota", "kueue.x-k8s.io/admission"])
    );
    let ev = evaluate(&nodes, &pods);
    assert_eq!(pending(&ev, "gated", "gated"), 1);
    assert_eq!(pending(&ev, "demand", "fits-now"), 0);
}

/// Items 4 and 8: `kubectl cordon lab-node-0` and a 1-GPU pod. explain says uncordon;
/// inventory does not call it unservable and does not count the cordoned node's units as
/// FREE; serve's unservable count is the pod that really is unservable (job-cross), and the
/// taints constraint does not allow the cordoned node.
#[test]
fn a_drain_blocks_and_is_not_the_split() {
    let (_d, nodes, pods) = situation(
        |n| {
            let node0 = &mut n["items"][0];
            assert_eq!(node0["metadata"]["name"], "lab-node-0");
            node0["spec"]["unschedulable"] = json!(true);
            node0["spec"]["taints"] = json!([{"key": "node.kubernetes.io/unschedulable",
                "effect": "NoSchedule", "timeAdded": "2026-12-02T10:00:00Z"}]);
        },
        vec![pending_pod(
            "after-drain",
            json!({"nvidia.com/gpu": "1"}),
            json!({}),
            json!({}),
        )],
    );
    let e = explain("gpu-vm/after-drain", &nodes, &pods);
    assert_eq!(e["causeCode"], "excluded");
    assert_eq!(e["verdict"]["class"], "blocked");
    assert_eq!(e["heldOff"], json!(["lab-node-0"]));
    assert!(
        e["fix"]
            .as_str()
            .unwrap()
            .contains("kubectl uncordon lab-node-0"),
        "{}",
        e["fix"]
    );
    // The real TaintToleration filter rejects the cordoned node (its taint is untolerated).
    let taints = e["constraints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "taints")
        .unwrap();
    assert_eq!(taints["allows"], json!(["lab-node-1", "lab-node-2"]));

    let inv = inventory(&nodes, &pods);
    let gpu = row(&inv, "nvidia.com/gpu");
    assert_eq!(
        (gpu["free"].as_i64(), gpu["cordonedFree"].as_i64()),
        (Some(0), Some(3))
    );
    assert_eq!(gpu["pending"], 0);
    let unservable: Vec<&str> = inv["unservable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["pod"].as_str().unwrap())
        .collect();
    assert_eq!(unservable, ["gpu-vm/job-cross"]);
    assert_eq!(inv["heldBack"][0]["pod"], "gpu-vm/after-drain");
    assert_eq!(inv["heldBack"][0]["class"], "blocked");
    let (_, text, _) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &pods]);
    assert!(
        text.contains("Cordoned: 3 nvidia.com/gpu in pool container on lab-node-0 free but on cordoned nodes, not counted as FREE"),
        "{text}"
    );
    let (_, csv, _) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &pods, "-o", "csv"]);
    assert!(
        csv.lines()
            .any(|l| l == "container,known,nvidia.com/gpu,container-gpu,1,0,4,4,1,0,0,4,0,3"),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l == "(held back: blocked),,nvidia.com/gpu,container-gpu,0,0,,,,,1,,,"),
        "{csv}"
    );
    // serve: the drained pod is blocked, not unservable (GpuPodsUnservable stays quiet).
    let ev = evaluate(&nodes, &pods);
    assert_eq!(ev.unservable.as_ref().unwrap()["nvidia.com/gpu"], 1);
    assert_eq!(pending(&ev, "blocked", "excluded"), 1);
    assert_eq!(pending(&ev, "unservable", "excluded"), 1);
}

/// Item 5: a pod asking 2 GPUs and `cpu: 200` (nodes have 32) is `other-resource`, not GPU
/// demand of the container pool.
#[test]
fn a_pod_short_of_cpu_is_not_gpu_demand() {
    let (_d, nodes, pods) = situation(
        |_| {},
        vec![pending_pod(
            "big-cpu",
            json!({"nvidia.com/gpu": "2"}),
            json!({"cpu": "200"}),
            json!({}),
        )],
    );
    let e = explain("gpu-vm/big-cpu", &nodes, &pods);
    assert_eq!(e["causeCode"], "other-resource");
    assert_eq!(e["verdict"]["class"], "other-resource");
    let inv = inventory(&nodes, &pods);
    assert_eq!(row(&inv, "nvidia.com/gpu")["pending"], 0);
    assert_eq!(inv["heldBack"][0]["pod"], "gpu-vm/big-cpu");
    assert_eq!(inv["heldBack"][0]["class"], "other-resource");
    assert_eq!(inv["heldBack"][0]["by"], json!(["lab-node-0"]));
    let ev = evaluate(&nodes, &pods);
    assert_eq!(pending(&ev, "other-resource", "other-resource"), 1);
    // A pod that fits is demand (fits-now), once, in the pool that serves it.
    let (_d2, nodes, pods) = situation(
        |_| {},
        vec![pending_pod(
            "small",
            json!({"nvidia.com/gpu": "2"}),
            json!({"cpu": "2"}),
            json!({}),
        )],
    );
    let inv = inventory(&nodes, &pods);
    assert_eq!(row(&inv, "nvidia.com/gpu")["pending"], 2);
    assert_eq!(inv["demandPods"][0]["code"], "fits-now");
    let ev = evaluate(&nodes, &pods);
    assert_eq!(pending(&ev, "demand", "fits-now"), 1);
}

/// Item 6: while a device plugin restarts its name is listed with "0": inventory says the
/// launcher pod's wait is transient (`stale-only`), and explain's verdict is not permanent
/// (what the admission guard in enforce mode may deny).
#[test]
fn a_plugin_restart_is_transient() {
    let (_d, nodes, pods) = situation(
        |n| {
            n["items"][1]["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = json!("0");
            n["items"][1]["status"]["capacity"]["nvidia.com/GA102GL_A10"] = json!("0");
        },
        vec![pending_pod(
            "virt-launcher-vm-b-abcde",
            json!({"nvidia.com/GA102GL_A10": "1"}),
            json!({}),
            json!({}),
        )],
    );
    let e = explain("gpu-vm/virt-launcher-vm-b-abcde", &nodes, &pods);
    assert_eq!(e["causeCode"], "stale-only");
    assert_eq!(e["verdict"]["class"], "unservable");
    assert_eq!(e["verdict"]["transient"], true);
    let inv = inventory(&nodes, &pods);
    let u = inv["unservable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["pod"] == "gpu-vm/virt-launcher-vm-b-abcde")
        .unwrap();
    assert_eq!(
        (u["code"].as_str(), u["transient"].as_bool()),
        (Some("stale-only"), Some(true))
    );
}

/// Item 7: a pod dump without the operator's namespace does not read as healthy operands.
#[test]
fn no_operand_pods_is_said_as_such() {
    let (rc, text, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &format!("{LAB}/nodes.json"),
        "--pods",
        &format!("{LAB}/pods.json"),
    ]);
    assert_eq!(rc, 0);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("GPU Operator operands: no operand pods found on 3 GPU node(s) (GPU Operator not installed, or its namespace not in the pod dump)."),
        "{text}"
    );
    assert!(
        !flat.contains("0 pod(s) on 3 GPU node(s), 0 not ready"),
        "{text}"
    );
}
