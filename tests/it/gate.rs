//! `gpuwl check --effective`, the gate: the dumps of tests/data/gate (README.md there). Each
//! situation fails or passes the gate while plain `check` keeps the seed's lines.

use serde_json::Value;

use crate::common::gpuwl;

const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gate");

fn data(f: &str) -> String {
    format!("{D}/{f}")
}

/// (exit code, stdout lines) of `gpuwl check <args>`.
fn check(args: &[&str]) -> (i32, Vec<String>, String) {
    let mut a = vec!["check"];
    a.extend_from_slice(args);
    let (rc, out, err) = gpuwl(&a);
    (rc, out.lines().map(str::to_owned).collect(), err)
}

const DISABLED: &str = "clusterpolicy-sandbox-disabled.yaml";
const ENABLED: &str = "clusterpolicy-sandbox-enabled.yaml";

#[test]
fn plain_check_keeps_the_seed_lines_for_every_gate_situation() {
    for (args, rc, lines) in [
        (vec![data("lab.json")], 0, vec!["OK=3"]),
        (vec![data("unlabelled.json")], 0, vec!["OK=2"]),
        (
            vec![data("lab.json"), "--cluster-policy".into(), data(DISABLED)],
            0,
            vec!["OK=3"],
        ),
        (
            vec![data("mig-rebooting.json")],
            1,
            vec![
                "MISMATCH=gpu-mig-3 label container expects a container-GPU resource, but the node advertises no GPU resource (operator state: mig.config.state=rebooting, operands paused-for-mig-change)",
            ],
        ),
        (vec![data("mig-failed.json")], 0, vec!["OK=2"]),
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got_rc, got, err) = check(&a);
        assert_eq!(
            (got_rc, got),
            (rc, lines.iter().map(|l| l.to_string()).collect()),
            "{a:?}: {err}"
        );
    }
    // The unlabelled node is said on stderr, the line contract untouched.
    let (_, _, err) = check(&[&data("unlabelled.json")]);
    assert!(
        err.lines().any(|l| l.starts_with("error: gpu-pt-1: no nvidia.com/gpu.workload.config label: the GPU Operator applies container")),
        "{err}"
    );
}

#[test]
fn an_unlabelled_node_advertising_a_vm_name_fails_the_gate_with_its_reason() {
    for policy in [None, Some(ENABLED)] {
        let mut a = vec!["--effective".to_owned(), data("unlabelled.json")];
        if let Some(p) = policy {
            a.extend(["--cluster-policy".to_owned(), data(p)]);
        }
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (rc, lines, err) = check(&a);
        assert_eq!(rc, 1, "{a:?}: {lines:?} {err}");
        let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("ERROR ")).collect();
        assert_eq!(errors.len(), 1, "{lines:?}");
        let by = match policy {
            None => {
                "the CRD's sandboxWorkloads.defaultWorkload default; no ClusterPolicy read, no gpu.deploy.* labels"
            }
            Some(_) => "ClusterPolicy cluster-policy sandboxWorkloads.defaultWorkload",
        };
        assert_eq!(
            errors[0],
            &format!(
                "ERROR effective-workload-differs gpu-pt-1: no nvidia.com/gpu.workload.config label: the GPU Operator applies container ({by}), but the node advertises nvidia.com/GA102GL_A10=2 (device model): the operator will replace the operands that serve them with container ones under the VMs that use them; to keep them: kubectl label node gpu-pt-1 nvidia.com/gpu.workload.config=vm-passthrough --overwrite"
            )
        );
        assert!(lines.contains(&"WARNING unlabelled-gpu-node gpu-pt-1: no nvidia.com/gpu.workload.config label: the operator applies sandboxWorkloads.defaultWorkload (default container); the node advertises nvidia.com/GA102GL_A10=2 (device model)".to_owned()), "{lines:?}");
        assert_eq!(
            lines.last().unwrap(),
            "FAIL: 1 error on 1 of 3 GPU nodes, 2 warnings",
            "{lines:?}"
        );
    }
    // The same dump labelled as the lab has it passes; the control plane is no GPU node.
    let (rc, lines, _) = check(&["--effective", &data("lab.json")]);
    assert_eq!(rc, 0);
    assert_eq!(
        lines,
        ["OK: 3 GPU nodes judged by the workload the GPU Operator applies, no error, 0 warnings"]
    );
}

#[test]
fn disabled_sandbox_workloads_fail_the_gate_on_every_vm_node() {
    let (rc, lines, _) = check(&[
        "--effective",
        &data("lab.json"),
        "--cluster-policy",
        &data(DISABLED),
    ]);
    assert_eq!(rc, 1, "{lines:?}");
    let errors: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("ERROR effective-workload-differs "))
        .collect();
    assert_eq!(errors.len(), 2, "{lines:?}");
    assert!(errors[0].starts_with("gpu-pt-1: label vm-passthrough is ignored: the GPU Operator applies container (ClusterPolicy cluster-policy has sandboxWorkloads.enabled=false: every GPU node is container), but the node advertises nvidia.com/GA102GL_A10=2 (device model)"), "{}", errors[0]);
    assert!(
        errors[1].starts_with("gpu-vg-2: label vm-vgpu is ignored:"),
        "{}",
        errors[1]
    );
    assert!(
        errors[1].ends_with(
            "to keep them set sandboxWorkloads.enabled=true in ClusterPolicy cluster-policy"
        ),
        "{}",
        errors[1]
    );
    assert_eq!(
        lines.last().unwrap(),
        "FAIL: 2 errors on 2 of 3 GPU nodes, 2 warnings"
    );
}

#[test]
fn a_mig_reboot_passes_with_a_warning_and_a_failed_config_fails() {
    let (rc, lines, _) = check(&["--effective", &data("mig-rebooting.json")]);
    assert_eq!(rc, 0, "{lines:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("WARNING config-pending gpu-mig-3: nvidia.com/mig.config.state=rebooting: the MIG manager is applying config \"all-1g.10gb\""), "{lines:?}");
    assert!(
        lines[1].starts_with("WARNING operand-paused gpu-mig-3: "),
        "{lines:?}"
    );
    assert_eq!(
        lines[2],
        "OK: 2 GPU nodes judged by the workload the GPU Operator applies, no error, 2 warnings"
    );
    // --quiet keeps the summary only; --fail-on makes the change fail.
    let (rc, lines, _) = check(&["--effective", "-q", &data("mig-rebooting.json")]);
    assert_eq!((rc, lines.len()), (0, 1), "{lines:?}");
    let (rc, lines, _) = check(&[
        "--effective",
        "--fail-on",
        "config-pending,operand-paused",
        &data("mig-rebooting.json"),
    ]);
    assert_eq!(rc, 1, "{lines:?}");
    assert_eq!(
        lines.last().unwrap(),
        "FAIL: 2 errors on 1 of 2 GPU nodes, 0 warnings"
    );

    let (rc, lines, _) = check(&["--effective", &data("mig-failed.json")]);
    assert_eq!(rc, 1, "{lines:?}");
    assert!(lines[0].starts_with("ERROR mig-config-failed gpu-mig-3: nvidia.com/mig.config.state=failed: the MIG manager could not apply config \"all-1g.10gb\""), "{lines:?}");
    let (rc, _, _) = check(&[
        "--effective",
        "--ignore",
        "mig-config-failed",
        &data("mig-failed.json"),
    ]);
    assert_eq!(rc, 0);
}

#[test]
fn json_names_the_gate_and_its_failing_findings() {
    let (rc, out, _) = gpuwl(&[
        "check",
        "--effective",
        &data("unlabelled.json"),
        "--ignore",
        "gpu-present-without-operands",
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["exitCode"], 1);
    assert_eq!(v["gate"]["gpuNodes"], 3);
    assert_eq!(v["gate"]["failingNodes"], serde_json::json!(["gpu-pt-1"]));
    assert_eq!(
        v["gate"]["ignore"],
        serde_json::json!(["gpu-present-without-operands"])
    );
    assert_eq!(
        v["gate"]["failing"][0]["code"],
        "effective-workload-differs"
    );
    assert_eq!(v["gate"]["failing"][0]["severity"], "error");
    let pt = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "gpu-pt-1")
        .unwrap();
    assert_eq!(pt["verdict"], "not-judged");
    assert_eq!(pt["gpuNode"], "gpu-resource");
    let codes: Vec<&str> = pt["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["effective-workload-differs", "unlabelled-gpu-node"]);
    assert_eq!(
        v["lines"].as_array().unwrap().last().unwrap(),
        "FAIL: 1 error on 1 of 3 GPU nodes, 1 warning"
    );
    // Plain -o json has the same findings, the seed's exit code, and no gate.
    let (rc, out, _) = gpuwl(&["check", &data("unlabelled.json"), "-o", "json"]);
    assert_eq!(rc, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("gate").is_none());
    assert_eq!(v["summary"]["errors"], 1);
    assert_eq!(v["lines"], serde_json::json!(["OK=2"]));
}

#[test]
fn gate_flags_are_checked() {
    for (args, needle) in [
        (vec!["--fail-on", "config-pending"], "--effective"),
        (
            vec!["--effective", "--fail-on", "no-such-code"],
            "possible values",
        ),
        (
            vec![
                "--effective",
                "--fail-on",
                "stale-zero",
                "--ignore",
                "stale-zero",
            ],
            "--fail-on and --ignore both name stale-zero",
        ),
    ] {
        let mut a = args.clone();
        let f = data("lab.json");
        a.push(&f);
        let (rc, lines, err) = check(&a);
        assert_eq!(rc, 2, "{a:?}");
        assert!(lines.is_empty(), "{lines:?}");
        assert!(err.contains(needle), "{a:?}: {err}");
    }
}

/// gpu-pt-1 relabelled to container while its passthrough VM runs (orphaned.json,
/// orphaned-pods.json): the VM's launcher pod holds a name the node lists with 0.
#[test]
fn an_orphaned_holder_is_a_finding_a_note_and_the_cause_explain_gives() {
    let (nodes, pods) = (data("orphaned.json"), data("orphaned-pods.json"));
    let launcher = "gpu-vm/virt-launcher-vm-pt-x7k2q";
    // check -o json with the pods: a warning on gpu-pt-1 naming the pod and its VMI.
    let (rc, out, _) = gpuwl(&["check", &nodes, "--pods", &pods, "-o", "json"]);
    assert_eq!(rc, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let pt = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "gpu-pt-1")
        .unwrap();
    let f = pt["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "orphaned-holder")
        .unwrap_or_else(|| panic!("{pt}"));
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["resource"], "nvidia.com/GA102GL_A10");
    assert_eq!(
        f["message"],
        format!(
            "1 bound pod(s) hold 1 nvidia.com/GA102GL_A10 that the node no longer advertises (listed with 0): {launcher} (VMI gpu-vm/vm-pt, 1); they keep running, but one that restarts or is recreated cannot come back here"
        )
    );
    // No other node has one; plain text keeps its line.
    assert_eq!(out.matches("orphaned-holder").count(), 1);
    let (rc, lines, _) = check(&[&nodes, "--pods", &pods]);
    assert_eq!((rc, lines), (0, vec!["OK=3".to_owned()]));

    // inventory: FREE never negative, the holders named.
    let (rc, out, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0);
    let inv: Value = serde_json::from_str(&out).unwrap();
    assert!(
        inv["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["free"].as_i64().unwrap() >= 0)
    );
    assert_eq!(inv["orphans"].as_array().unwrap().len(), 1);
    assert_eq!(inv["orphans"][0]["holders"][0]["pod"], launcher);
    let (_, text, _) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &pods]);
    assert!(
        text.contains(&format!("note: orphaned holders: node gpu-pt-1 no longer advertises nvidia.com/GA102GL_A10 (listed with 0) while bound pods hold 1: {launcher} (VMI gpu-vm/vm-pt, 1);")),
        "{text}"
    );

    // explain: the cause is the orphaned holding, not "nothing to fix".
    let (rc, out, _) = gpuwl(&[
        "explain", "pod", launcher, "--nodes", &nodes, "--pods", &pods, "-o", "json",
    ]);
    assert_eq!(rc, 0, "{out}");
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["causeCode"], "scheduled");
    let cause = e["cause"].as_str().unwrap_or_else(|| panic!("{e}"));
    assert!(cause.contains("gpu-pt-1 no longer advertises what it holds: nvidia.com/GA102GL_A10 (listed with 0) — an orphaned holder"), "{cause}");
    let fix = e["fix"].as_str().unwrap();
    assert!(fix.starts_with("nothing breaks while the VM runs; before it restarts, make gpu-pt-1 advertise the name again"), "{fix}");
    assert!(!fix.contains("delete"), "{fix}");
    // A pod on a node that still advertises its name: scheduled, nothing to fix.
    let (_, out, _) = gpuwl(&[
        "explain",
        "pod",
        "gpu-jobs/train-0",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
        "-o",
        "json",
    ]);
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["fix"], "nothing to fix: it was scheduled");
}
