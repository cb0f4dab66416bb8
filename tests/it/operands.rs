//! Operand health per node (tests/data/operands: three GPU nodes and the GPU Operator's
//! operand pods, README.md there): `check --pods`, `inventory`, `explain`.

use serde_json::Value;

use crate::kit::gpuwl;

const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/operands");

fn data(f: &str) -> String {
    format!("{D}/{f}")
}

#[test]
fn check_json_carries_operand_pods_and_names_the_plugin_first() {
    let (rc, out, err) = gpuwl(&[
        "check",
        &data("nodes.json"),
        "--pods",
        &data("pods.json"),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["operandPods"]["status"], "file");
    let node = |n: &str| {
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .unwrap()
            .clone()
    };
    let pt = node("pt-crash");
    let pods: Vec<(String, String, u64)> = pt["operandPods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["operand"].as_str().unwrap().to_string(),
                p["health"].as_str().unwrap().to_string(),
                p["restarts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pods,
        [
            ("sandbox-device-plugin".into(), "crash-looping".into(), 12),
            ("sandbox-validator".into(), "not-ready".into(), 0),
            ("vfio-manager".into(), "ready".into(), 0),
        ]
    );
    let f = pt["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "operand-not-ready")
        .unwrap();
    assert_eq!(f["severity"], "warning");
    assert!(
        f["message"].as_str().unwrap().starts_with(
            "the sandbox-device-plugin that advertises this node's vm-passthrough names is not ready: sandbox-device-plugin pod gpu-operator/nvidia-sandbox-device-plugin-daemonset-uvwxy crash-looping (CrashLoopBackOff, 12 restarts)"
        ),
        "{f}"
    );
    // A ready plugin with an unready manager: named, not as the plugin.
    let vg = node("vg-pending");
    let msg = vg["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "operand-not-ready")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with("operands not ready: vgpu-device-manager pod gpu-operator/nvidia-vgpu-device-manager-jklmn not-ready"),
        "{msg}"
    );
    // The non-operand pod is not listed; the text lines are the seed's.
    assert!(!out.contains("\"default/web\""));
    let (rc, text, _) = gpuwl(&["check", &data("nodes.json"), "--pods", &data("pods.json")]);
    assert_eq!(rc, 1);
    let (_, plain, _) = gpuwl(&["check", &data("nodes.json")]);
    assert_eq!(text, plain);
    // A bad pods file: one line naming it, exit 2.
    let (rc, out, err) = gpuwl(&["check", &data("nodes.json"), "--pods", &data("README.md")]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert!(err.contains("README.md"), "{err}");
}

#[test]
fn inventory_lists_unready_operands_per_node() {
    let (rc, out, err) = gpuwl(&[
        "inventory",
        "--nodes",
        &data("nodes.json"),
        "--pods",
        &data("pods.json"),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("GPU Operator operands: 9 pod(s) on 3 GPU node(s), 4 not ready."),
        "{out}"
    );
    assert!(
        out.contains("  gpu-ok: dcgm-exporter crash-looping\n"),
        "{out}"
    );
    assert!(
        out.contains("  vg-pending: vgpu-device-manager not-ready\n"),
        "{out}"
    );
    let (_, json, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &data("nodes.json"),
        "--pods",
        &data("pods.json"),
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&json).unwrap();
    let o = &v["operands"];
    assert_eq!(
        (o["pods"].as_u64(), o["notReady"].as_u64()),
        (Some(9), Some(4))
    );
    let pt = o["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "pt-crash")
        .unwrap();
    assert_eq!(pt["workload"], "vm-passthrough");
    assert!(
        pt["pluginProblem"]
            .as_str()
            .unwrap()
            .starts_with("sandbox-device-plugin pod gpu-operator/nvidia-sandbox-device-plugin-daemonset-uvwxy crash-looping"),
        "{pt}"
    );
}

#[test]
fn explain_names_the_unready_plugin_first() {
    let args = [
        "explain",
        "pod",
        "vm-pod",
        "-n",
        "gpu-vm",
        "--pods",
        &data("pods.json"),
        "--nodes",
        &data("nodes.json"),
        "-o",
        "json",
    ];
    let (rc, out, err) = gpuwl(&args);
    assert_eq!(rc, 1, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["causeCode"], "operator-state");
    assert_eq!(
        v["cause"],
        "no node advertises nvidia.com/GA102GL_A10 (pt-crash list it with 0), and the GPU Operator's state says why: the sandbox-device-plugin that should advertise nvidia.com/GA102GL_A10 on pt-crash (vm-passthrough) is not ready: sandbox-device-plugin pod gpu-operator/nvidia-sandbox-device-plugin-daemonset-uvwxy crash-looping (CrashLoopBackOff, 12 restarts)"
    );
    assert!(
        v["fix"]
            .as_str()
            .unwrap()
            .starts_with("read why it fails: kubectl -n gpu-operator describe pod nvidia-sandbox-device-plugin-daemonset-uvwxy"),
        "{v}"
    );
}
