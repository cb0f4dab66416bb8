//! The operator model on files (issue 35, kind 6): tests/data/operator-model (README.md
//! there). The same situations run against the real GPU Operator in operator_model.rs.

use serde_json::Value;

use crate::kit::gpuwl;

const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/operator-model");

fn data(f: &str) -> String {
    format!("{D}/{f}")
}

/// (exit code, stdout lines) of `gpuwl check --effective nodes.json [--cluster-policy P]`.
fn gate(policy: Option<&str>) -> (i32, Vec<String>) {
    let nodes = data("nodes.json");
    let mut a = vec!["check", "--effective", nodes.as_str()];
    let p;
    if let Some(f) = policy {
        p = data(f);
        a.extend(["--cluster-policy", p.as_str()]);
    }
    let (rc, out, err) = gpuwl(&a);
    assert!(rc == 0 || rc == 1, "{a:?}: {rc} {err}");
    (rc, out.lines().map(str::to_owned).collect())
}

fn line<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in {lines:#?}"))
}

fn none_starts(lines: &[String], prefix: &str) {
    assert!(
        !lines.iter().any(|l| l.starts_with(prefix)),
        "{prefix:?} in {lines:#?}"
    );
}

/// a. A workload label on a node where nothing shows a GPU.
#[test]
fn a_label_without_any_gpu_evidence_is_no_gpu_node_for_the_gate() {
    for policy in [
        None,
        Some("sandbox-off-container.yaml"),
        Some("sandbox-on-vgpu.yaml"),
    ] {
        let (rc, lines) = gate(policy);
        assert_eq!(rc, 1, "{lines:?}");
        none_starts(&lines, "ERROR no-gpu-resource label-only");
        none_starts(&lines, "ERROR invalid-label-value label-only");
        let w = line(&lines, "WARNING label-without-gpu label-only: ");
        assert!(
            w.contains("the GPU Operator finds GPU nodes by NFD's PCI labels only")
                && w.contains("check --effective does not count it as a GPU node"),
            "{w}"
        );
        assert!(
            lines.last().unwrap().contains("of 5 GPU nodes"),
            "{lines:?}"
        );
    }
    let (_, out, _) = gpuwl(&["check", &data("nodes.json"), "-o", "json"]);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let n = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "label-only")
        .unwrap();
    assert_eq!(n["gpu"], "none", "{n}");
    assert_eq!(n["operatorScope"], "no-gpu", "{n}");
    assert!(n["effectiveWorkload"].is_null(), "{n}");
    assert_eq!(n["operands"], Value::Array(vec![]), "{n}");
    assert!(n.get("gpuNode").is_none(), "{n}");
    // Plain check keeps the lab's line contract: the label is judged.
    assert_eq!(n["verdict"], "mismatch", "{n}");
    let (rc, out, _) = gpuwl(&["check", &data("nodes.json")]);
    assert_eq!(rc, 1);
    assert!(
        out.lines()
            .any(|l| l.starts_with("MISMATCH=label-only label vm-passthrough expects")),
        "{out}"
    );
}

/// b. Sandbox workloads off: no label is read, operands=false included, and the fix that
/// lifts operands=false says which stack it brings.
#[test]
fn b_sandbox_off_ignores_every_label_and_the_fix_names_the_stack() {
    for policy in ["sandbox-off-container.yaml", "sandbox-off-passthrough.yaml"] {
        let (_, lines) = gate(Some(policy));
        none_starts(&lines, "ERROR invalid-label-value typo");
        let w = line(&lines, "WARNING label-ignored typo: ");
        assert!(
            w.contains("sandboxWorkloads.enabled=false, so the operator does not read the label and applies container")
                && w.contains("did you mean vm-passthrough?"),
            "{w}"
        );
        let ignored = line(&lines, "WARNING label-ignored vgpu-off: ");
        assert!(
            ignored.ends_with("nvidia.com/gpu.deploy.operands=false keeps every operand off for now, and removing it deploys the container operands"),
            "{ignored}"
        );
        let fix = line(&lines, "WARNING operands-disabled vgpu-off: ");
        assert!(
            fix.contains("(kubectl label node vgpu-off nvidia.com/gpu.deploy.operands-) to deploy them — but that deploys the container operands (ClusterPolicy cluster-policy has sandboxWorkloads.enabled=false, so the operator reads no workload label), not the vm-vgpu ones its nvidia.com/gpu.workload.config label asks for"),
            "{fix}"
        );
    }
    // Sandbox workloads on: the label is followed, the fix needs no warning, and an
    // invalid label is the error it was.
    let (_, lines) = gate(Some("sandbox-on-vgpu.yaml"));
    none_starts(&lines, "WARNING label-ignored");
    assert!(!line(&lines, "WARNING operands-disabled vgpu-off: ").contains(" — but "));
    line(&lines, "ERROR invalid-label-value typo: ");
}

/// c. The fallback named is the ClusterPolicy's defaultWorkload.
#[test]
fn c_the_fallback_is_the_cluster_policys_default_workload() {
    let (_, lines) = gate(Some("sandbox-on-vgpu.yaml"));
    assert!(
        line(&lines, "ERROR invalid-label-value typo: ").contains(
            "the operator silently falls back to ClusterPolicy cluster-policy's sandboxWorkloads.defaultWorkload (vm-vgpu); did you mean vm-passthrough?"
        )
    );
    assert!(
        line(&lines, "WARNING unlabelled-gpu-node unlabelled-pt: ").contains(
            "the operator applies ClusterPolicy cluster-policy's sandboxWorkloads.defaultWorkload (vm-vgpu);"
        )
    );
    let (_, lines) = gate(Some("sandbox-off-passthrough.yaml"));
    assert!(
        line(&lines, "WARNING unlabelled-gpu-node unlabelled-pt: ").contains(
            "the operator applies container (ClusterPolicy cluster-policy has sandboxWorkloads.enabled=false);"
        )
    );
    // No ClusterPolicy read: the CRD default, as before.
    let (_, lines) = gate(None);
    assert!(
        line(&lines, "ERROR invalid-label-value typo: ")
            .contains("falls back to sandboxWorkloads.defaultWorkload (default container)")
    );
}

/// d. Enabling sandbox workloads is offered only where it keeps the node's names.
#[test]
fn d_enabling_sandbox_workloads_only_where_it_keeps_the_names() {
    let (_, lines) = gate(Some("sandbox-off-passthrough.yaml"));
    assert!(
        line(&lines, "ERROR effective-workload-differs unlabelled-pt: ").ends_with(
            "; to keep them set sandboxWorkloads.enabled=true in ClusterPolicy cluster-policy (cluster-wide: every labelled GPU node then follows its label)"
        )
    );
    for policy in ["sandbox-off-container.yaml", "sandbox-off-passthrough.yaml"] {
        let (_, lines) = gate(Some(policy));
        let e = line(&lines, "ERROR effective-workload-differs vgpu-label-pt: ");
        assert!(
            e.ends_with("; setting sandboxWorkloads.enabled=true alone would not keep them: the operator would then apply vm-vgpu here (its label vm-vgpu); to keep them: kubectl label node vgpu-label-pt nvidia.com/gpu.workload.config=vm-passthrough --overwrite and set sandboxWorkloads.enabled=true in ClusterPolicy cluster-policy (cluster-wide)"),
            "{e}"
        );
    }
    let (_, lines) = gate(Some("sandbox-off-container.yaml"));
    let e = line(&lines, "ERROR effective-workload-differs unlabelled-pt: ");
    assert!(
        e.contains("setting sandboxWorkloads.enabled=true alone would not keep them: the operator would then apply container here (sandboxWorkloads.defaultWorkload container)"),
        "{e}"
    );
}
