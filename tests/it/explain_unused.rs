//! Facts explain used to leave unused (issue 35, kind 5), on the cases of
//! tests/data/explain (README.md in each): GPUs published twice by the DRA driver and a
//! re-enabled device plugin, a failed vGPU config hidden behind a full node, and operator
//! hints only where the facts show the GPU Operator (or the device plugin's missing
//! toleration is the block). explain_cases.rs judges the same cases by their expect.json.

use serde_json::Value;

use crate::kit::gpuwl;

const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/explain");

/// `explain -o json` of case `name` (`--pods` unless `pods` is false); the exit code and
/// the document.
fn explain(name: &str, pods: bool) -> (i32, Value) {
    let d = format!("{CASES}/{name}");
    let mut a = vec![
        "explain".to_string(),
        "--pod".into(),
        format!("{d}/pod.yaml"),
        "--nodes".into(),
        format!("{d}/nodes.json"),
    ];
    if pods {
        a.extend(["--pods".into(), format!("{d}/pods.json")]);
    }
    if std::path::Path::new(&format!("{d}/dra.yaml")).exists() {
        a.extend(["--dra".into(), format!("{d}/dra.yaml")]);
    }
    a.extend(["-o".into(), "json".into()]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (rc, out, err) = gpuwl(&a);
    let doc = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{a:?}: {e}: {err}"));
    (rc, doc)
}

fn notes(doc: &Value) -> Vec<String> {
    doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn i_double_publication_by_the_dra_driver_and_a_device_plugin_is_noted() {
    let (rc, doc) = explain("own-dra-and-device-plugin-reenabled", true);
    assert_eq!(rc, 0, "{doc}");
    assert_eq!(doc["causeCode"], "fits-now");
    let n = notes(&doc);
    assert!(
        n.iter().any(|n| n.starts_with("g-1: GPUs published twice — a device plugin advertises nvidia.com/gpu=2 and NVIDIA's DRA driver (gpu.nvidia.com) publishes 4 device(s) there")
            && n.contains("run one of them per node")),
        "{n:#?}"
    );
    // Without the DRA objects nothing says so.
    let d = format!("{CASES}/own-dra-and-device-plugin-reenabled");
    let (_, out, _) = gpuwl(&[
        "explain",
        "--pod",
        &format!("{d}/pod.yaml"),
        "--nodes",
        &format!("{d}/nodes.json"),
        "-o",
        "json",
    ]);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert!(
        !notes(&doc).iter().any(|n| n.contains("published twice")),
        "{doc}"
    );
}

#[test]
fn ii_a_failed_vgpu_config_behind_a_full_node_is_named() {
    let (rc, doc) = explain("own-vgpu-config-failed-beside-full-node", true);
    assert_eq!(rc, 1);
    assert_eq!(doc["causeCode"], "in-use");
    let cause = doc["cause"].as_str().unwrap();
    assert!(
        cause.ends_with("; vg-1 offers no nvidia.com/NVIDIA_A10-12Q because its config \"A10-12Q\" failed (nvidia.com/vgpu.config.state=failed)"),
        "{cause}"
    );
    // Restoring the failed host disrupts no one: it is the fix's first step, before
    // stopping any running VM (issue 49, item 6).
    let fix = doc["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(
            "first restore what vg-1 failed to provide, which disrupts no one: vg-1: \
             nvidia.com/vgpu.config.state=failed"
        ) && fix.contains("nvidia-vgpu-device-manager pod's log on vg-1")
            && fix.contains(". Only while that cannot be done: "),
        "{doc}"
    );
}

#[test]
fn ii_a_failed_mig_config_behind_a_full_node_is_named() {
    let (rc, doc) = explain("own-mig-config-failed-beside-full-node", true);
    assert_eq!(rc, 1);
    assert_eq!(doc["causeCode"], "in-use");
    let cause = doc["cause"].as_str().unwrap();
    assert!(
        cause.ends_with("; hgx-1 offers no nvidia.com/mig-1g.10gb because its config \"all-1g.10gb\" failed (nvidia.com/mig.config.state=failed)"),
        "{cause}"
    );
    let fix = doc["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(
            "first restore what hgx-1 failed to provide, which disrupts no one: hgx-1: \
             nvidia.com/mig.config.state=failed"
        ) && fix.contains(
            "nvidia-mig-manager pod's log on hgx-1 (a MIG mode change usually needs a GPU reset"
        ),
        "{doc}"
    );
}

#[test]
fn iii_the_device_plugins_missing_toleration_is_the_block_not_a_label() {
    let (rc, doc) = explain("own-device-plugin-untolerated-taint", true);
    assert_eq!(rc, 1);
    assert_eq!(doc["causeCode"], "unadvertised-name");
    let (cause, fix) = (doc["cause"].as_str().unwrap(), doc["fix"].as_str().unwrap());
    assert!(
        cause.contains("g-1 is a GPU node that advertises no GPU and runs no device-plugin pod: it is tainted dedicated=ml:NoSchedule"),
        "{cause}"
    );
    assert!(
        fix.starts_with(
            "let the device-plugin run on g-1: add a toleration for dedicated=ml:NoSchedule to its DaemonSet"
        ),
        "{fix}"
    );
    assert!(!fix.contains("gpu.workload.config"), "{fix}");
}

#[test]
fn iii_no_operator_hint_without_the_operator() {
    let (_, doc) = explain("own-no-operator-no-label-hint", true);
    let fix = doc["fix"].as_str().unwrap();
    assert!(
        fix.contains("the cluster shows no GPU Operator") && !fix.contains("gpu.workload.config"),
        "{fix}"
    );
    // Nothing read that could show an operator: both, each under its condition.
    let (_, doc) = explain("own-no-operator-no-label-hint", false);
    let fix = doc["fix"].as_str().unwrap();
    assert!(
        fix.contains(
            "with the GPU Operator, label a GPU node nvidia.com/gpu.workload.config=container"
        ) && fix.contains("without it, deploy NVIDIA's k8s-device-plugin"),
        "{fix}"
    );
}
