//! `gpuwl policy`: the shipped manifests equal its output, and (live) the real
//! kube-apiserver of the local control plane enforces it: a mistyped workload label or
//! vGPU config is refused with the did-you-mean, a good one accepted, an update that leaves
//! the labels alone accepted even when the old value is invalid.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::kit::{ClusterDown, gpuwl, gpuwl_ok, kubectl, node, one_cluster_at_a_time};

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn shipped_manifests_equal_the_output() {
    let out = gpuwl_ok(&["policy"]);
    assert_eq!(read("deploy/policy/gpuwl-workload-label.yaml"), out);
    assert_eq!(read("deploy/helm/gpuwl/files/label-policy.yaml"), out);
    assert!(out.contains("name: gpuwl-workload-label\n"));
    assert!(out.contains("- Deny\n"));
}

#[test]
fn flags_and_bad_input() {
    let out = gpuwl_ok(&[
        "policy", "--name", "labels", "--action", "Warn", "-o", "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "List");
    assert_eq!(v["items"][0]["metadata"]["name"], "labels");
    assert_eq!(v["items"][1]["spec"]["policyName"], "labels");
    assert_eq!(v["items"][1]["spec"]["validationActions"][0], "Warn");
    let (code, stdout, stderr) = gpuwl(&["policy", "--name", "Bad_Name\x1b[31m"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("gpuwl: --name \"Bad_Name\\u{1b}[31m\": not a valid object name"),
        "{stderr}"
    );
    let (code, _, stderr) = gpuwl(&["policy", "--action", "deny"]);
    assert_eq!(code, 2, "{stderr}");
}

const CLUSTER: &str = "h40";

/// [`kubectl`] as this test reads it: (whether it succeeded, stdout followed by stderr).
fn kubectl_said(kubeconfig: &str, args: &[&str], stdin: &str) -> (bool, String) {
    let (code, stdout, stderr) = kubectl(kubeconfig, args, stdin);
    (code == 0, format!("{stdout}{stderr}"))
}

const WL: &str = "nvidia.com/gpu.workload.config";
const VG: &str = "nvidia.com/vgpu.config";

#[test]
#[ignore = "needs local control plane"]
fn the_api_server_enforces_the_policy() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let kc = crate::kit::own_cluster(CLUSTER, &["--nodes", "0"]);
    let kc = kc.as_str();
    // A node labelled wrongly before the policy exists: later updates that leave the label
    // alone must still pass.
    let (ok, out) = kubectl_said(
        kc,
        &["create", "-f", "-"],
        &node("h40-old", json!({WL: "vm_passthrough"})).to_string(),
    );
    assert!(ok, "{out}");

    let (ok, out) = kubectl_said(kc, &["apply", "-f", "-"], &gpuwl_ok(&["policy"]));
    assert!(ok, "{out}");
    assert!(
        out.contains(
            "validatingadmissionpolicy.admissionregistration.k8s.io/gpuwl-workload-label created"
        ),
        "{out}"
    );
    assert!(out.contains("validatingadmissionpolicybinding.admissionregistration.k8s.io/gpuwl-workload-label created"), "{out}");

    // The policy takes effect after a short delay: retry a bad create until it is refused.
    let bad = node("h40-bad", json!({WL: "vm_passthrough"})).to_string();
    let started = Instant::now();
    let refusal = loop {
        let (ok, out) = kubectl_said(kc, &["create", "-f", "-"], &bad);
        if !ok {
            break out;
        }
        kubectl_said(kc, &["delete", "node", "h40-bad", "--wait=false"], "");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never refused: {out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "policy in effect after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(refusal.contains("ValidatingAdmissionPolicy 'gpuwl-workload-label' with binding 'gpuwl-workload-label' denied request"), "{refusal}");
    assert!(
        refusal.contains("nvidia.com/gpu.workload.config=vm_passthrough is not one of container, vm-passthrough, vm-vgpu (the GPU Operator would treat the node as unlabelled); did you mean vm-passthrough?"),
        "{refusal}"
    );

    // A good value is accepted.
    let (ok, out) = kubectl_said(
        kc,
        &["create", "-f", "-"],
        &node("h40-good", json!({WL: "vm-passthrough"})).to_string(),
    );
    assert!(ok, "{out}");
    // Relabelling to a typo is refused, with the value meant.
    for (typo, meant) in [
        ("Container", "container"),
        ("vm-passthru", "vm-passthrough"),
        ("pass-through", "vm-passthrough"),
    ] {
        let (ok, out) = kubectl_said(
            kc,
            &[
                "label",
                "node",
                "h40-good",
                &format!("{WL}={typo}"),
                "--overwrite",
            ],
            "",
        );
        assert!(!ok, "{out}");
        assert!(out.contains(&format!("{WL}={typo} is not one of")), "{out}");
        assert!(out.contains(&format!("did you mean {meant}?")), "{out}");
    }
    // No did-you-mean where none is close.
    let (ok, out) = kubectl_said(
        kc,
        &[
            "label",
            "node",
            "h40-good",
            &format!("{WL}=kata"),
            "--overwrite",
        ],
        "",
    );
    assert!(
        !ok && out.contains(&format!("{WL}=kata is not one of")) && !out.contains("did you mean"),
        "{out}"
    );
    // vGPU config: a bad one refused (with the upper-cased type meant), a good one accepted.
    let (ok, out) = kubectl_said(
        kc,
        &[
            "label",
            "node",
            "h40-good",
            &format!("{WL}=vm-vgpu"),
            &format!("{VG}=a10-12q"),
            "--overwrite",
        ],
        "",
    );
    assert!(!ok, "{out}");
    assert!(out.contains("nvidia.com/vgpu.config=a10-12q is not a vGPU type such as A10-12Q or A100-4C, nor default; did you mean A10-12Q?"), "{out}");
    let (ok, out) = kubectl_said(
        kc,
        &[
            "label",
            "node",
            "h40-good",
            &format!("{VG}=12Q"),
            "--overwrite",
        ],
        "",
    );
    assert!(
        !ok && out.contains("nvidia.com/vgpu.config=12Q is not a vGPU type")
            && !out.contains("did you mean"),
        "{out}"
    );
    for good in ["A10-12Q", "A100-1-5C", "default"] {
        let (ok, out) = kubectl_said(
            kc,
            &[
                "label",
                "node",
                "h40-good",
                &format!("{WL}=vm-vgpu"),
                &format!("{VG}={good}"),
                "--overwrite",
            ],
            "",
        );
        assert!(ok, "{good}: {out}");
    }
    let (ok, out) = kubectl_said(
        kc,
        &[
            "get",
            "node",
            "h40-good",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
        "",
    );
    assert!(
        ok && out.contains("\"nvidia.com/gpu.workload.config\":\"vm-vgpu\"")
            && out.contains("\"nvidia.com/vgpu.config\":\"default\""),
        "{out}"
    );
    // Unrelated updates pass: on the good node, and on the node whose old value is invalid.
    for n in ["h40-good", "h40-old"] {
        let (ok, out) = kubectl_said(kc, &["label", "node", n, "team=a", "--overwrite"], "");
        assert!(ok, "{n}: {out}");
        let (ok, out) = kubectl_said(kc, &["annotate", "node", n, "note=x", "--overwrite"], "");
        assert!(ok, "{n}: {out}");
    }
    // Changing the invalid old value to another invalid one is refused; removing it passes.
    let (ok, out) = kubectl_said(
        kc,
        &[
            "label",
            "node",
            "h40-old",
            &format!("{WL}=vm_vgpu"),
            "--overwrite",
        ],
        "",
    );
    assert!(!ok && out.contains("did you mean vm-vgpu?"), "{out}");
    let (ok, out) = kubectl_said(kc, &["label", "node", "h40-old", &format!("{WL}-")], "");
    assert!(ok, "{out}");
}

/// The Helm chart renders nothing of the policy by default, and with
/// `labelPolicy.enabled=true` exactly `gpuwl policy`'s two objects.
#[test]
#[ignore = "needs helm (scripts/tools.sh helm builds it once with go)"]
fn helm_renders_the_policy_when_enabled() {
    let off = crate::serve::helm_template(&[]);
    assert!(!off.contains("ValidatingAdmissionPolicy"), "{off}");
    let on = crate::serve::helm_template(&["--set", "labelPolicy.enabled=true"]);
    let docs: Vec<&str> = on
        .split("\n---\n")
        .filter(|d| d.contains("# Source: gpuwl/templates/label-policy.yaml"))
        .collect();
    assert_eq!(docs.len(), 2, "{on}");
    let strip = |d: &str| -> String {
        d.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let want: Vec<String> = gpuwl_ok(&["policy"]).split("\n---\n").map(strip).collect();
    let got: Vec<String> = docs.iter().map(|d| strip(d)).collect();
    assert_eq!(got, want);
}

/// Issue 54, item 12: the chart's label policy takes the actions `gpuwl policy --action`
/// does (Warn and Audit render exactly its output; another value fails the render), and
/// with more than one replica the chart adds a PodDisruptionBudget for the webhook.
#[test]
#[ignore = "needs helm (scripts/tools.sh helm builds it once with go)"]
fn helm_label_policy_action_and_replicas_with_a_pdb() {
    let strip = |d: &str| -> String {
        d.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    for action in ["Warn", "Audit", "Deny"] {
        let on = crate::serve::helm_template(&[
            "--set",
            "labelPolicy.enabled=true",
            "--set",
            &format!("labelPolicy.action={action}"),
        ]);
        let got: Vec<String> = on
            .split("\n---\n")
            .filter(|d| d.contains("# Source: gpuwl/templates/label-policy.yaml"))
            .map(strip)
            .collect();
        let want: Vec<String> = gpuwl_ok(&["policy", "--action", action])
            .split("\n---\n")
            .map(strip)
            .collect();
        assert_eq!(got, want, "{action}");
    }
    let one = crate::serve::helm_template(&[]);
    assert!(one.contains("\n  replicas: 1\n"), "{one}");
    assert!(!one.contains("kind: PodDisruptionBudget"), "{one}");
    let two =
        crate::serve::helm_template(&["--set", "replicas=2", "--set", "admission.enabled=true"]);
    assert!(two.contains("\n  replicas: 2\n"), "{two}");
    let pdb = two
        .split("\n---\n")
        .find(|d| d.contains("kind: PodDisruptionBudget"))
        .unwrap_or_else(|| panic!("{two}"));
    assert!(pdb.contains("maxUnavailable: 1"), "{pdb}");
}
