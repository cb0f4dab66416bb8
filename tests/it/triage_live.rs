//! `gpuwl triage` on bundles written by the GPU Operator's REAL must-gather script
//! (NVIDIA/gpu-operator `hack/must-gather.sh`, from the pinned Go module) against the local
//! control plane: simulated GPU nodes (kwok), the real ClusterPolicy CRD of the same
//! module, operand DaemonSets, and a Pod labelled `app=gpu-operator` standing for the
//! operator (the script exits early without one; the operator itself is not run). First a
//! healthy lab, then one with a broken workload label, a crash-looping operand and a GPU
//! pod that cannot fit. Also `gpuwl snapshot` of the same cluster read back by check,
//! inventory and explain.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gpuwl::cluster::{self, UpOptions};
use serde_json::Value;

use crate::kit::{ClusterDown, gpuwl, kubectl_ok, one_cluster_at_a_time};

const NAME: &str = "gpuwl-it-triage";

/// The GPU Operator module whose `hack/must-gather.sh` and ClusterPolicy CRD are used.
const GPU_OPERATOR: &str = "github.com/NVIDIA/gpu-operator";
const GPU_OPERATOR_VERSION: &str = "v0.0.0-20250917190837-d73a0086a6ba";

const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/triage");

/// The module's folder in the Go module cache, downloaded when absent.
fn module_dir() -> PathBuf {
    let out = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .expect("go on PATH");
    let cache = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    // The module cache escapes upper-case letters as !lower.
    let dir = Path::new(&cache)
        .join("github.com/!n!v!i!d!i!a")
        .join(format!("gpu-operator@{GPU_OPERATOR_VERSION}"));
    if !dir.join("hack/must-gather.sh").is_file() {
        let st = Command::new("go")
            .args([
                "mod",
                "download",
                &format!("{GPU_OPERATOR}@{GPU_OPERATOR_VERSION}"),
            ])
            .env("GOFLAGS", "-mod=mod")
            .status()
            .expect("go mod download");
        assert!(st.success(), "go mod download {GPU_OPERATOR} failed");
    }
    dir
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn json(kc: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&kubectl_ok(kc, args)).unwrap()
}

/// Runs the real must-gather.sh with `ARTIFACT_DIR=dir`.
fn must_gather(kc: &Path, script: &Path, dir: &Path) {
    let out = Command::new("bash")
        .arg(script)
        .env("KUBECONFIG", kc)
        .env("ARTIFACT_DIR", dir)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "must-gather.sh: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        dir.join("gpu_nodes.descr").is_file(),
        "must-gather.sh stopped early: {}",
        std::fs::read_to_string(dir.join("must-gather.log")).unwrap_or_default()
    );
}

fn triage_json(bundle: &Path) -> (i32, Value) {
    let (rc, out, err) = gpuwl(&["triage", bundle.to_str().unwrap(), "-o", "json"]);
    assert!(rc == 0 || rc == 1, "triage: {rc} {err}");
    (rc, serde_json::from_str(&out).unwrap())
}

fn set_status(kc: &Path, node: &str, gpu: &str, n: u32) {
    let res =
        serde_json::json!({"cpu": "32", "memory": "256Gi", "pods": "110", gpu: n.to_string()});
    let patch = serde_json::json!({"status": {"capacity": res, "allocatable": res}});
    kubectl_ok(
        kc,
        &[
            "patch",
            "node",
            node,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
    );
}

fn daemonsets_ready(kc: &Path) -> bool {
    let ds = json(kc, &["get", "ds", "-n", "gpu-operator", "-o", "json"]);
    let items = ds["items"].as_array().unwrap();
    items.len() == 3
        && items.iter().all(|d| {
            let s = &d["status"];
            s["desiredNumberScheduled"].as_u64().unwrap_or(0) > 0
                && s["numberReady"] == s["desiredNumberScheduled"]
        })
}

#[test]
#[ignore = "needs local control plane"]
fn real_must_gather_bundles_of_a_healthy_and_a_broken_lab() {
    let _serial = one_cluster_at_a_time();
    let module = module_dir();
    let script = module.join("hack/must-gather.sh");
    let _ = cluster::down(NAME);
    let _down = ClusterDown(NAME);
    let handle = cluster::up(&UpOptions {
        name: NAME.into(),
        ..Default::default()
    })
    .expect("cluster up");
    let kc = handle.kubeconfig.clone();
    let tmp = tempfile::tempdir().unwrap();

    kubectl_ok(&kc, &["apply", "-f", &format!("{D}/nodes.yaml")]);
    set_status(&kc, "gpu-c", "nvidia.com/gpu", 2);
    set_status(&kc, "gpu-p", "nvidia.com/GA102GL_A10", 2);
    set_status(&kc, "cpu-0", "example.com/none", 0);
    let crd = module.join("config/crd/bases/nvidia.com_clusterpolicies.yaml");
    kubectl_ok(&kc, &["create", "-f", crd.to_str().unwrap()]);
    wait_for("the ClusterPolicy CRD to be established", || {
        let crd = json(
            &kc,
            &["get", "crd", "clusterpolicies.nvidia.com", "-o", "json"],
        );
        crd["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
    });
    kubectl_ok(&kc, &["apply", "-f", &format!("{D}/clusterpolicy.yaml")]);
    kubectl_ok(&kc, &["apply", "-f", &format!("{D}/operator.yaml")]);
    wait_for("operand DaemonSets ready", || daemonsets_ready(&kc));

    // Healthy: the script's bundle gives a clean report.
    let healthy = tmp.path().join("healthy");
    must_gather(&kc, &script, &healthy);
    let (rc, t) = triage_json(&healthy);
    assert_eq!(rc, 0, "{t:#}");
    assert_eq!(t["operatorNamespace"], "gpu-operator");
    assert_eq!(
        t["nodesDescribed"], 2,
        "only nvidia.com/gpu.present=true nodes"
    );
    assert_eq!(t["clusterPolicy"]["policy"]["name"], "cluster-policy");
    assert_eq!(t["check"]["lines"], serde_json::json!(["OK=2"]));
    assert_eq!(t["daemonsetsTotal"], 3);
    assert_eq!(t["daemonsetsNotReady"], serde_json::json!([]));
    assert_eq!(t["pendingGpuPods"], serde_json::json!([]));
    let states = t["operatorState"].as_array().unwrap();
    assert_eq!(states.len(), 2);
    assert_eq!(states[0]["node"], "gpu-c");
    assert_eq!(states[0]["workload"], "container");
    assert_eq!(states[0]["gpuResources"]["nvidia.com/gpu"], "2");
    assert_eq!(states[1]["workload"], "vm-passthrough");
    let lacking: Vec<&str> = t["lacking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        lacking
            .iter()
            .any(|l| l.starts_with("workload pods outside gpu-operator")),
        "{lacking:?}"
    );
    assert!(
        !lacking.iter().any(|l| l.starts_with("gpu_nodes.descr")),
        "{lacking:?}"
    );

    // A snapshot of the same cluster, read back by check, inventory and explain.
    let snap = tmp.path().join("lab.tar.gz");
    let (rc, _, err) = gpuwl(&[
        "snapshot",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "-o",
        snap.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("gpuwl snapshot: nodes: 3 objects"), "{err}");
    assert!(
        err.contains("gpuwl snapshot: daemonsets: 3 objects"),
        "{err}"
    );
    for args in [
        vec!["check", "-o", "json"],
        vec!["inventory", "-o", "json"],
        vec![
            "explain",
            "pod",
            "gpu-operator/gpu-operator-7d9f",
            "-o",
            "json",
        ],
    ] {
        let (a, live, _) =
            gpuwl(&[args.as_slice(), &["--kubeconfig", kc.to_str().unwrap()]].concat());
        let (b, offline, e) =
            gpuwl(&[args.as_slice(), &["--snapshot", snap.to_str().unwrap()]].concat());
        // Live, check and inventory also list the operator's operand pods with their
        // health; a snapshot keeps the operand DaemonSets, not those pods, so the offline
        // report has no operand-pod section. Everything else must be the same.
        let (live, offline) = if args[0] == "explain" {
            (live, offline)
        } else {
            (without_operand_pods(&live), without_operand_pods(&offline))
        };
        assert_eq!((a, &live), (b, &offline), "{args:?}: {e}");
    }
    // The operator pod's env value is not in the snapshot.
    let raw = std::fs::read(&snap).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(raw.as_slice()), &mut text)
        .unwrap();
    assert!(
        !text.contains("\"value\":\"gpu-operator\""),
        "an env value leaked"
    );

    // Broken: an invalid workload label, a crash-looping device plugin, a GPU pod too large.
    kubectl_ok(
        &kc,
        &[
            "label",
            "node",
            "gpu-p",
            "--overwrite",
            "nvidia.com/gpu.workload.config=vm-passthru",
        ],
    );
    let pods = json(
        &kc,
        &[
            "get",
            "pods",
            "-n",
            "gpu-operator",
            "-l",
            "app=nvidia-device-plugin-daemonset",
            "-o",
            "json",
        ],
    );
    let dp = pods["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let pod_ip = pods["items"][0]["status"]["podIP"].clone();
    let crash = serde_json::json!({"status": {
        "phase": "Running",
        "podIP": pod_ip,
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
        "containerStatuses": [{
            "name": "nvidia-device-plugin", "ready": false, "restartCount": 7,
            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.4", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}},
            "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}
        }]
    }});
    kubectl_ok(
        &kc,
        &[
            "patch",
            "pod",
            &dp,
            "-n",
            "gpu-operator",
            "--subresource=status",
            "--type=merge",
            "-p",
            &crash.to_string(),
        ],
    );
    kubectl_ok(
        &kc,
        &[
            "run",
            "gpu-burn",
            "-n",
            "gpu-operator",
            "--image=nvcr.io/nvidia/cuda:12.9.1-base-ubi9",
            "--labels=app=gpu-burn",
            "--overrides",
            r#"{"spec":{"containers":[{"name":"burn","image":"nvcr.io/nvidia/cuda:12.9.1-base-ubi9","resources":{"limits":{"nvidia.com/gpu":"8"}}}]}}"#,
        ],
    );
    wait_for("the device plugin DaemonSet to count the crash", || {
        let d = json(
            &kc,
            &[
                "get",
                "ds",
                "nvidia-device-plugin-daemonset",
                "-n",
                "gpu-operator",
                "-o",
                "json",
            ],
        );
        d["status"]["numberReady"].as_u64() == Some(0)
    });
    wait_for("gpu-burn to be found unschedulable", || {
        let p = json(
            &kc,
            &["get", "pod", "gpu-burn", "-n", "gpu-operator", "-o", "json"],
        );
        p["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
        })
    });
    let broken = tmp.path().join("broken");
    must_gather(&kc, &script, &broken);
    let (rc, t) = triage_json(&broken);
    assert_eq!(rc, 1, "{t:#}");
    let lines = t["check"]["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].as_str().unwrap().starts_with("MISMATCH=gpu-p "),
        "{lines:?}"
    );
    let nr = t["daemonsetsNotReady"].as_array().unwrap();
    assert_eq!(nr.len(), 1, "{nr:#?}");
    assert_eq!(nr[0]["name"], "nvidia-device-plugin-daemonset");
    assert_eq!(nr[0]["desired"], 1);
    assert_eq!(nr[0]["ready"], 0);
    let pod = &nr[0]["pods"][0];
    assert_eq!(pod["name"], dp.as_str());
    assert_eq!(pod["node"], "gpu-c");
    assert_eq!(pod["restarts"], 7);
    assert_eq!(pod["containers"][0]["reason"], "CrashLoopBackOff");
    assert_eq!(pod["containers"][0]["lastTermination"], "Error (exit 1)");
    assert!(
        nr[0]["why"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w == &format!("pod {dp}: nvidia-device-plugin: CrashLoopBackOff")),
        "{:?}",
        nr[0]["why"]
    );
    let pending = t["pendingGpuPods"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["pod"], "gpu-operator/gpu-burn");
    assert_eq!(pending[0]["causeCode"], "too-large");
    // kwok pods have no logs: the script wrote empty files, and the report says so.
    let lacking = t["lacking"].as_array().unwrap();
    assert!(
        lacking.iter().any(|l| l
            .as_str()
            .unwrap()
            .starts_with(&format!("the log of pod {dp}: empty"))),
        "{lacking:?}"
    );

    // GPUWL_TRIAGE_KEEP=DIR keeps the bundles and the snapshot (for the README's examples).
    if let Some(keep) = std::env::var_os("GPUWL_TRIAGE_KEEP") {
        let st = Command::new("cp")
            .args(["-r"])
            .arg(&healthy)
            .arg(&broken)
            .arg(&snap)
            .arg(&keep)
            .status()
            .unwrap();
        assert!(st.success());
    }
    // The same bundle as a tarball (folder inside, gzip) reads the same.
    let tarball = tmp.path().join("broken.tar.gz");
    let st = Command::new("tar")
        .args([
            "-czf",
            tarball.to_str().unwrap(),
            "-C",
            tmp.path().to_str().unwrap(),
            "broken",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let (rc2, mut t2) = triage_json(&tarball);
    assert_eq!(rc2, 1);
    t2["bundle"] = t["bundle"].clone();
    assert_eq!(t2, t);
    // The text report names each part.
    let (_, text, _) = gpuwl(&["triage", broken.to_str().unwrap()]);
    assert!(
        text.contains("\nCheck (2 labelled):\n  MISMATCH=gpu-p "),
        "{text}"
    );
    assert!(
        text.contains("Operand DaemonSets: 2 of 3 fully ready"),
        "{text}"
    );
    assert!(
        text.contains("gpu-operator/gpu-burn: too-large [unservable]: "),
        "{text}"
    );
}

/// `json` without the operand-pod health that only a live read has: `operandPods` (check,
/// top level and per node) and inventory's top-level `operands` report.
fn without_operand_pods(json: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    if let Some(o) = v.as_object_mut() {
        o.remove("operandPods");
        if o.get("operands").is_some_and(|x| x.is_object()) {
            o.remove("operands");
        }
        if let Some(nodes) = o.get_mut("nodes").and_then(|n| n.as_array_mut()) {
            for n in nodes {
                if let Some(n) = n.as_object_mut() {
                    n.remove("operandPods");
                }
            }
        }
    }
    serde_json::to_string_pretty(&v).unwrap()
}
