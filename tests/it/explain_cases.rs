//! The explain cases of tests/data/explain: situations from public bug reports (copied
//! with their README.md, which says what a right explanation must say) and the project's
//! own second input per kind (`own-*`). Each folder holds nodes.json, pods.json, one
//! target (pod.yaml, vmi.yaml or vm.yaml), optionally kubevirt.yaml, clusterpolicy.yaml
//! and dra.yaml, and expect.json:
//! `code` (the causeCode), `suggest` / `forbid_suggest` (names that must / must not be
//! offered), `no_suggest` (nothing may be offered), `fix_mentions` (substrings of the fix),
//! `forbid_text` (substrings in neither cause nor fix), `remedy_kinds` (the kinds of the
//! tested fix's `remedy.actions`, in order, the remedy sufficient).

use std::path::Path;

use serde_json::Value;

use crate::kit::gpuwl;

const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/explain");

/// What is wrong with the explanation of one case (empty: right).
fn judge(dir: &Path) -> Vec<String> {
    let exp: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expect.json")).unwrap()).unwrap();
    let target = ["pod.yaml", "vmi.yaml", "vm.yaml"]
        .into_iter()
        .find(|f| dir.join(f).exists())
        .expect("a target manifest");
    let p = |f: &str| dir.join(f).to_str().unwrap().to_owned();
    let mut args = vec![
        "explain".to_string(),
        "--pod".into(),
        p(target),
        "--nodes".into(),
        p("nodes.json"),
        "--pods".into(),
        p("pods.json"),
    ];
    for (file, flag) in [
        ("kubevirt.yaml", "--kubevirt"),
        ("clusterpolicy.yaml", "--cluster-policy"),
        ("dra.yaml", "--dra"),
    ] {
        if dir.join(file).exists() {
            args.extend([flag.into(), p(file)]);
        }
    }
    args.extend(["-o".into(), "json".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (rc, out, err) = gpuwl(&args);
    let doc: Value = match serde_json::from_str(&out) {
        Ok(d) => d,
        Err(_) => return vec![format!("exit {rc}: {err}")],
    };
    // 0 when nothing blocks the pod, 1 when a cause was found (README: exit codes).
    let want_rc = if ["fits-now", "scheduled"].contains(&doc["causeCode"].as_str().unwrap_or("")) {
        0
    } else {
        1
    };
    if rc != want_rc {
        return vec![format!(
            "exit {rc} for {}, want {want_rc}: {err}",
            doc["causeCode"]
        )];
    }
    let mut why = Vec::new();
    if doc["causeCode"] != exp["code"] {
        why.push(format!(
            "causeCode {}, want {}",
            doc["causeCode"], exp["code"]
        ));
    }
    let offered: Vec<&str> = doc["requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["didYouMean"].as_array().unwrap())
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let strs = |k: &str| -> Vec<String> {
        exp[k]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    for s in strs("suggest") {
        if !offered.contains(&s.as_str()) {
            why.push(format!("{s} not offered (offered {offered:?})"));
        }
    }
    for s in strs("forbid_suggest") {
        if offered.contains(&s.as_str()) {
            why.push(format!("{s} offered, must not be"));
        }
    }
    if exp["no_suggest"] == true && !offered.is_empty() {
        why.push(format!(
            "offered {offered:?}, but the requested name is right"
        ));
    }
    let (cause, fix) = (doc["cause"].as_str().unwrap(), doc["fix"].as_str().unwrap());
    for s in strs("fix_mentions") {
        if !fix.contains(&s) {
            why.push(format!("fix lacks {s:?}: {fix}"));
        }
    }
    let kinds = strs("remedy_kinds");
    if !kinds.is_empty() {
        let got: Vec<&str> = doc["remedy"]["actions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["kind"].as_str())
            .collect();
        if doc["remedy"]["sufficient"] != true || got != kinds {
            why.push(format!("remedy {}, want actions {kinds:?}", doc["remedy"]));
        }
    }
    for s in strs("forbid_text") {
        if cause.contains(&s) || fix.contains(&s) {
            why.push(format!("cause/fix says {s:?}"));
        }
    }
    why
}

#[test]
fn every_case_gets_the_right_diagnosis() {
    let mut dirs: Vec<_> = std::fs::read_dir(CASES)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| d.join("expect.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 20, "{} cases", dirs.len());
    let failures: Vec<String> = dirs
        .iter()
        .filter_map(|d| {
            let why = judge(d);
            (!why.is_empty()).then(|| {
                format!(
                    "{}: {}",
                    d.file_name().unwrap().to_string_lossy(),
                    why.join("; ")
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn inventory_and_explain_print_the_same_numbers() {
    // The in-use case's README: inventory shows for nvidia.com/TU104GL_TESLA_T4 in pool
    // vm-passthrough ALLOCATABLE 1, ALLOCATED 1, FREE 0, PENDING 1 — and explain the same
    // allocated and free on gpu-t4-7.
    let d = Path::new(CASES).join("passthrough-in-use-allocatable-static");
    let p = |f: &str| d.join(f).to_str().unwrap().to_owned();
    let (rc, out, err) = gpuwl(&[
        "inventory",
        "--nodes",
        &p("nodes.json"),
        "--pods",
        &p("pods.json"),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0, "{err}");
    let inv: Value = serde_json::from_str(&out).unwrap();
    let row = inv["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "nvidia.com/TU104GL_TESLA_T4")
        .unwrap();
    assert_eq!(row["pool"], "vm-passthrough");
    assert_eq!(
        [
            &row["allocatable"],
            &row["allocated"],
            &row["free"],
            &row["pending"]
        ],
        [1, 1, 0, 1].map(Value::from).each_ref()
    );
    let (rc, out, _) = gpuwl(&[
        "explain",
        "--pod",
        &p("vmi.yaml"),
        "--nodes",
        &p("nodes.json"),
        "--pods",
        &p("pods.json"),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1, "in-use is a blocking cause");
    let e: Value = serde_json::from_str(&out).unwrap();
    let a = &e["requests"][0]["advertisers"][0];
    assert_eq!(a["node"], "gpu-t4-7");
    assert_eq!(
        (&a["allocated"], &a["free"]),
        (&Value::from(1), &Value::from(0))
    );
    assert_eq!(
        a["heldBy"],
        serde_json::json!(["desk/virt-launcher-win-desk-1-5jq9w"])
    );
}
