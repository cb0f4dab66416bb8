//! Hostile and careless input held to the same promises in every command: one quantity
//! rule for check, inventory and explain; objects of the wrong shape rejected on the JSON
//! fast path as on the YAML one; text that is not UTF-8 named with its byte offset; pod
//! lists streamed with a bound per object; sums that saturate; extended resources whose
//! requests differ from their limits called out.

use crate::kit::gpuwl;

/// A GPU node (labelled, deployed) whose allocatable `nvidia.com/gpu` is `q` (verbatim JSON).
fn node(name: &str, q: &str) -> String {
    format!(
        r#"{{"kind":"Node","metadata":{{"name":"{name}","labels":{{"nvidia.com/gpu.present":"true","nvidia.com/gpu.workload.config":"container","nvidia.com/gpu.deploy.device-plugin":"true"}}}},"status":{{"allocatable":{{"nvidia.com/gpu":{q}}}}}}}"#
    )
}

fn list(items: &[String]) -> String {
    format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(","))
}

const POD: &str = r#"{"kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#;

fn write(dir: &tempfile::TempDir, name: &str, body: impl AsRef<[u8]>) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn a_too_large_node_quantity_is_judged_alike_by_check_inventory_and_explain() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write(&dir, "pod.json", POD);
    for q in [r#""9223372036854775808""#, r#""1e400""#] {
        let f = write(
            &dir,
            "n.json",
            list(&[node("big", q), node("ok", r#""4""#)]),
        );
        let (rc, out, err) = gpuwl(&["check", &f]);
        assert_eq!(rc, 1, "{q}: {out}{err}");
        assert_eq!(
            out.lines().next().unwrap(),
            format!(
                "MISMATCH=big status.allocatable[\"nvidia.com/gpu\"] is {q}, not a valid device count (too large: over 2^63-1 units)"
            ),
            "{q}"
        );
        assert!(!out.contains("MISMATCH=ok"), "{out}");
        // inventory and explain skip the same cell, naming the node and field; the other
        // node is counted.
        let (rc, out, err) = gpuwl(&["inventory", "--nodes", &f]);
        assert_eq!(rc, 0, "{err}");
        let note = format!(
            "skipped (not a valid device count): node big: status.allocatable[\"nvidia.com/gpu\"]: {q} is too large (over 2^63-1 units)"
        );
        assert!(out.contains(&note), "{q}: {out}");
        assert!(out.contains("│ container   nvidia.com/gpu"), "{out}");
        let (rc, out, err) = gpuwl(&["explain", "--nodes", &f, "--pod", &pod]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains(&note), "{q}: {out}");
        assert!(out.contains("advertised by 1 node(s)"), "{out}");
    }
}

#[test]
fn a_quantity_written_as_a_huge_number_or_a_yaml_infinity_affects_only_its_node() {
    let dir = tempfile::tempdir().unwrap();
    // JSON number out of f64 range, in a list and as a single node.
    let f = write(
        &dir,
        "n.json",
        list(&[node("big", "1e400"), node("ok", "4")]),
    );
    let (rc, out, err) = gpuwl(&["check", &f]);
    assert_eq!(rc, 1, "{out}{err}");
    assert!(out.starts_with("MISMATCH=big status.allocatable[\"nvidia.com/gpu\"] is \"1e400\", not a valid device count (too large"), "{out}");
    assert!(!out.contains("MISMATCH=ok"), "{out}");
    let single = write(&dir, "one.json", node("big", "-1e999"));
    let (rc, out, _) = gpuwl(&["check", &single]);
    assert_eq!(rc, 1);
    assert!(
        out.contains("is \"-1e999\", not a valid device count (negative)"),
        "{out}"
    );
    // A huge number where a string belongs (the name) is still a type error of the file.
    let bad = write(
        &dir,
        "bad.json",
        r#"{"kind":"Node","metadata":{"name":1e400}}"#,
    );
    let (rc, _, err) = gpuwl(&["check", &bad]);
    assert_eq!(rc, 2, "{err}");
    // YAML .inf / .nan / 1e400 (a float to YAML) reach the node as text.
    let y = write(
        &dir,
        "n.yaml",
        "kind: List\nitems:\n- kind: Node\n  metadata: {name: inf, labels: {nvidia.com/gpu.present: \"true\", nvidia.com/gpu.workload.config: container, nvidia.com/gpu.deploy.device-plugin: \"true\"}}\n  status: {allocatable: {nvidia.com/gpu: .inf}}\n- kind: Node\n  metadata: {name: nan, labels: {nvidia.com/gpu.present: \"true\", nvidia.com/gpu.workload.config: container, nvidia.com/gpu.deploy.device-plugin: \"true\"}}\n  status: {allocatable: {nvidia.com/gpu: .nan}}\n- kind: Node\n  metadata: {name: ok, labels: {nvidia.com/gpu.present: \"true\", nvidia.com/gpu.workload.config: container, nvidia.com/gpu.deploy.device-plugin: \"true\"}}\n  status: {allocatable: {nvidia.com/gpu: 2}}\n",
    );
    let (rc, out, err) = gpuwl(&["check", &y]);
    assert_eq!(rc, 1, "{out}{err}");
    assert!(
        out.contains(
            "MISMATCH=inf status.allocatable[\"nvidia.com/gpu\"] is \".inf\", not a valid quantity"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "MISMATCH=nan status.allocatable[\"nvidia.com/gpu\"] is \".nan\", not a valid quantity"
        ),
        "{out}"
    );
    assert!(!out.contains("MISMATCH=ok"), "{out}");
    let (rc, out, err) = gpuwl(&["inventory", "--nodes", &y]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains(
            "node inf: status.allocatable[\"nvidia.com/gpu\"]: \".inf\" is not a quantity"
        ),
        "{out}"
    );
}

#[test]
fn metadata_or_status_of_the_wrong_type_is_rejected_in_json_as_in_yaml() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body, field) in [
        (
            "meta.json",
            r#"{"kind":"List","items":[{"kind":"Node","metadata":["evil",{"nvidia.com/gpu.present":"true"}],"status":{"capacity":{"nvidia.com/gpu":"1"}}}]}"#,
            "items[0]: metadata: invalid type: sequence, expected a metadata object",
        ),
        (
            "status.json",
            r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"a"},"status":[{"nvidia.com/gpu":"1"}]}]}"#,
            "items[0]: status: invalid type: sequence, expected a status object",
        ),
        (
            "spec.json",
            r#"{"kind":"Node","metadata":{"name":"a"},"spec":"x"}"#,
            "spec: invalid type: string \"x\", expected a spec object",
        ),
        (
            "taint.json",
            r#"{"kind":"Node","metadata":{"name":"a"},"spec":{"taints":[["k","v","NoSchedule"]]}}"#,
            "spec: invalid type: sequence, expected a taint object",
        ),
        (
            "meta.yaml",
            "kind: List\nitems:\n- kind: Node\n  metadata: [evil, {a: b}]\n",
            "items[0]: metadata:",
        ),
    ] {
        let f = write(&dir, name, body);
        let (rc, out, err) = gpuwl(&["check", &f]);
        assert_eq!(rc, 2, "{name}: {out}{err}");
        assert!(out.is_empty(), "{name}: {out}");
        assert!(!out.contains("evil") && !err.contains("MISMATCH"));
        assert!(err.starts_with(&format!("gpuwl: {f}: ")), "{name}: {err}");
        assert!(err.contains(field), "{name}: {err}");
        let (rc, _, err2) = gpuwl(&["inventory", "--nodes", &f]);
        assert_eq!((rc, &err2), (2, &err), "{name}");
    }
    // Pod files: the same rule for every object and list the reader keeps.
    let nodes = write(&dir, "n.json", list(&[node("n1", "\"1\"")]));
    for (body, field) in [
        (
            r#"{"kind":"Pod","metadata":["evil",{"name":"x"}]}"#,
            "metadata: invalid type: sequence, expected an object",
        ),
        (
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":[{"nodeName":"n1"}]}"#,
            "spec: invalid type: sequence, expected an object",
        ),
        (
            r#"{"kind":"Pod","metadata":{"name":"p"},"status":["Running"]}"#,
            "status: invalid type: sequence, expected an object",
        ),
        (
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"containers":{"c":{}}}}"#,
            "spec: containers: invalid type: map, expected a list",
        ),
        (
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - resources: [1]\n",
            "spec: containers: resources: invalid type: sequence, expected an object",
        ),
    ] {
        let f = write(&dir, "pod.txt", body);
        let (rc, out, err) = gpuwl(&["explain", "--nodes", &nodes, "--pod", &f]);
        assert_eq!((rc, out.as_str()), (2, ""), "{body}: {err}");
        assert!(
            err.starts_with(&format!("gpuwl: {f}: {field}")),
            "{body}: {err}"
        );
        let (rc, _, _) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &f]);
        assert_eq!(rc, 2, "{body}");
    }
}

#[test]
fn text_that_is_not_utf8_is_named_with_its_offset_in_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = write(&dir, "n.json", list(&[node("ok", "4")]));
    // Latin-1 'é' (0xe9) at byte 32 of a node dump, of a pod file, of the CRs.
    let mut latin1 = br#"{"kind":"Node","metadata":{"name":"caf"#.to_vec();
    let at = latin1.len();
    latin1.extend_from_slice(b"\xe9\"}}");
    let bad_nodes = write(&dir, "bad-n.json", &latin1);
    let (rc, out, err) = gpuwl(&["check", &bad_nodes]);
    assert_eq!((rc, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        format!("gpuwl: {bad_nodes}: not UTF-8 at byte offset {at}\n")
    );
    let (rc, _, err) = gpuwl(&["inventory", "--nodes", &bad_nodes]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with(&format!(": not UTF-8 at byte offset {at}\n")),
        "{err}"
    );
    // Far into a big list (past the first read), in YAML, and a file cut inside a character.
    let mut big = list(
        &(0..2000)
            .map(|i| node(&format!("n{i}"), "\"1\""))
            .collect::<Vec<_>>(),
    )
    .into_bytes();
    let at = big.len() - 10;
    big[at] = 0xff;
    let big = write(&dir, "big.json", &big);
    let (rc, _, err) = gpuwl(&["check", &big]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with(&format!(": not UTF-8 at byte offset {at}\n")),
        "{err}"
    );
    let head = b"kind: Node\nmetadata:\n  name: ";
    let y = write(&dir, "n.yaml", [&head[..], b"\xc3\x28\n"].concat());
    let (rc, _, err) = gpuwl(&["check", &y]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with(&format!(": not UTF-8 at byte offset {}\n", head.len())),
        "{err}"
    );
    let cut = write(&dir, "cut.yaml", [&head[..], b"\xe2\x82"].concat());
    let (rc, _, err) = gpuwl(&["check", &cut]);
    assert_eq!(rc, 2);
    assert!(
        err.contains(&format!("not UTF-8 at byte offset {}", head.len())),
        "{err}"
    );
    let mut pod = br#"{"kind":"Pod","metadata":{"name":"p"#.to_vec();
    let at = pod.len();
    pod.extend_from_slice(b"\xe9\"}}");
    let pod = write(&dir, "pod.json", &pod);
    for args in [
        vec!["inventory", "--nodes", &nodes, "--pods", &pod],
        vec!["explain", "--nodes", &nodes, "--pod", &pod],
    ] {
        let (rc, _, err) = gpuwl(&args);
        assert_eq!(rc, 2, "{args:?}");
        assert!(
            err.ends_with(&format!(": not UTF-8 at byte offset {at}\n")),
            "{args:?}: {err}"
        );
    }
    let cr_text = b"kind: KubeVirt\nmetadata: {name: k\xe9}\n";
    let cr = write(&dir, "cr.yaml", cr_text);
    let at = cr_text.iter().position(|&b| b == 0xe9).unwrap();
    let (rc, _, err) = gpuwl(&["kubevirt", "check", "--nodes", &nodes, "--kubevirt", &cr]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with(&format!(": not UTF-8 at byte offset {at}\n")),
        "{err}"
    );
    let (rc, _, err) = gpuwl(&["check", &nodes, "--cluster-policy", &cr]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with(&format!(": not UTF-8 at byte offset {at}\n")),
        "{err}"
    );
    // A UTF-16 file (as Windows PowerShell writes) is not refused for its encoding.
    let mut utf16 = vec![0xff, 0xfe];
    for u in "kind: Node\nmetadata:\n  name: w\n".encode_utf16() {
        utf16.extend_from_slice(&u.to_le_bytes());
    }
    let w = write(&dir, "w.yaml", &utf16);
    let (_, _, err) = gpuwl(&["check", &w]);
    assert!(!err.contains("UTF-8"), "{err}");
}

#[test]
fn node_dumps_fail_early_on_bytes_that_cannot_be_text() {
    let (rc, out, err) = gpuwl(&["check", "/dev/zero"]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert_eq!(
        err,
        "gpuwl: /dev/zero: not JSON or YAML text (byte 0x00 at offset 0)\n"
    );
    let (rc, _, err) = gpuwl(&["inventory", "--nodes", "/dev/urandom"]);
    assert_eq!(rc, 2);
    assert!(err.starts_with("gpuwl: /dev/urandom: not "), "{err}");
}

#[test]
fn pod_lists_stream_kubectl_order_and_bound_each_object() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = write(&dir, "n.json", list(&[node("n1", "\"8\"")]));
    // kubectl's key order (items before kind), a 3 MB annotation that is skipped unread, a
    // raw PodList whose items carry no kind, and a VirtualMachine template.
    let big = "x".repeat(3 << 20);
    let pods = format!(
        r#"{{"apiVersion":"v1","items":[
        {{"kind":"Pod","metadata":{{"name":"a","namespace":"d","annotations":{{"big":"{big}"}}}},"spec":{{"nodeName":"n1","containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"2"}}}}}}]}},"status":{{"phase":"Running"}}}},
        {{"kind":"VirtualMachine","metadata":{{"name":"vm","namespace":"d"}},"spec":{{"template":{{"spec":{{"domain":{{"devices":{{"gpus":[{{"name":"g","deviceName":"nvidia.com/gpu"}}]}}}}}}}}}}}}
        ],"kind":"List","metadata":{{"resourceVersion":""}}}}"#
    );
    let f = write(&dir, "pods.json", &pods);
    let (rc, out, err) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &f, "-o", "json"]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["podsRead"], 2);
    assert_eq!(v["pendingPods"], 1);
    let row = &v["rows"][0];
    assert_eq!(
        (row["allocatable"].as_i64(), row["allocated"].as_i64()),
        (Some(8), Some(2))
    );
    let raw = write(
        &dir,
        "podlist.json",
        r#"{"kind":"PodList","items":[{"metadata":{"name":"r"},"spec":{"nodeName":"n1","containers":[{"resources":{"requests":{"nvidia.com/gpu":"3"},"limits":{"nvidia.com/gpu":"3"}}}]},"status":{"phase":"Running"}}]}"#,
    );
    let (rc, out, err) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &raw, "-o", "json"]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"][0]["allocated"], 3);
    // One item over 64 MiB is not an API object: refused, naming the item.
    let huge = format!(
        r#"{{"kind":"List","items":[{},{{"kind":"Pod","metadata":{{"name":"h","annotations":{{"a":"{}"}}}}}}]}}"#,
        POD,
        "y".repeat(65 << 20)
    );
    let f = write(&dir, "huge.json", &huge);
    let (rc, out, err) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &f]);
    assert_eq!((rc, out.as_str()), (2, ""), "{err}");
    assert!(
        err.contains(": items[1]: an object larger than 64 MiB"),
        "{err}"
    );
}

#[test]
fn pod_request_sums_saturate_instead_of_wrapping() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = write(&dir, "n.json", list(&[node("n1", "\"10\"")]));
    let max = "9223372036854775807";
    for (pod, what) in [
        (
            format!(
                r#"{{"kind":"Pod","metadata":{{"name":"p"}},"spec":{{"containers":[{{"name":"a","resources":{{"limits":{{"nvidia.com/gpu":"{max}"}}}}}},{{"name":"b","resources":{{"limits":{{"nvidia.com/gpu":"{max}"}}}}}},{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"3"}}}}}}]}}}}"#
            ),
            "containers",
        ),
        (
            format!(
                r#"{{"kind":"Pod","metadata":{{"name":"p"}},"spec":{{"overhead":{{"nvidia.com/gpu":"{max}"}},"initContainers":[{{"name":"s","restartPolicy":"Always","resources":{{"limits":{{"nvidia.com/gpu":"{max}"}}}}}}],"containers":[{{"name":"a","resources":{{"limits":{{"nvidia.com/gpu":"1"}}}}}}]}}}}"#
            ),
            "sidecar and overhead",
        ),
    ] {
        let f = write(&dir, "p.json", &pod);
        let (rc, out, err) = gpuwl(&["explain", "--nodes", &nodes, "--pod", &f]);
        assert_eq!(rc, 1, "{what}: too-large: {err}");
        assert!(
            out.contains(&format!("nvidia.com/gpu × {max} ")),
            "{what}: {out}"
        );
        assert!(!out.contains("can take the pod now"), "{what}: {out}");
    }
}

#[test]
fn requests_that_differ_from_limits_are_called_out_with_the_field_counted() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = write(&dir, "n.json", list(&[node("n1", "\"8\"")]));
    for (req, lim, container) in [("3", "1", "containers[0]"), ("1", "2", "initContainers[0]")] {
        let pod = if container == "containers[0]" {
            format!(
                r#"{{"kind":"Pod","metadata":{{"name":"p"}},"spec":{{"containers":[{{"name":"a","resources":{{"requests":{{"nvidia.com/gpu":"{req}"}},"limits":{{"nvidia.com/gpu":"{lim}"}}}}}}]}}}}"#
            )
        } else {
            format!(
                r#"{{"kind":"Pod","metadata":{{"name":"p"}},"spec":{{"initContainers":[{{"name":"i","resources":{{"limits":{{"nvidia.com/gpu":"{lim}"}},"requests":{{"nvidia.com/gpu":"{req}"}}}}}}],"containers":[{{"name":"a"}}]}}}}"#
            )
        };
        let f = write(&dir, "p.json", &pod);
        let (rc, out, err) = gpuwl(&["explain", "--nodes", &nodes, "--pod", &f]);
        assert_eq!(rc, 1, "invalid-spec: {err}");
        assert!(
            out.contains(&format!(
                "nvidia.com/gpu × {req} (container GPU) from spec.{container}.resources.requests"
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "note: spec.{container}: nvidia.com/gpu requests \"{req}\" ≠ limits \"{lim}\": the API server would reject this pod (Kubernetes requires requests = limits for an extended resource when both are set)"
            )),
            "{out}"
        );
        let (_, json, _) = gpuwl(&["explain", "--nodes", &nodes, "--pod", &f, "-o", "json"]);
        assert!(json.contains("the API server would reject this pod"));
    }
    // Equal requests and limits: no note.
    let f = write(
        &dir,
        "ok.json",
        r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","resources":{"requests":{"nvidia.com/gpu":"2"},"limits":{"nvidia.com/gpu":"2"}}}]}}"#,
    );
    let (_, out, _) = gpuwl(&["explain", "--nodes", &nodes, "--pod", &f]);
    assert!(!out.contains("would reject"), "{out}");
}

#[test]
fn long_quantities_and_label_values_are_cut_where_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("1{}", "0".repeat(100_000));
    let f = write(&dir, "n.json", list(&[node("a", &format!("\"{long}\""))]));
    let cut = format!("\"1{}\"… (100001 bytes)", "0".repeat(79));
    let (rc, out, _) = gpuwl(&["check", &f]);
    assert_eq!(rc, 1);
    assert!(out.len() < 400, "{}", out.len());
    assert!(
        out.contains(&format!("is {cut}, not a valid device count (too large")),
        "{out}"
    );
    let (_, out, _) = gpuwl(&["inventory", "--nodes", &f]);
    assert!(out.len() < 2000 && out.contains(&cut), "{out}");
    // The same number written as a JSON number (read as its text).
    let f = write(&dir, "num.json", list(&[node("a", &long)]));
    let (rc, out, _) = gpuwl(&["check", &f]);
    assert_eq!(rc, 1);
    assert!(out.contains(&cut), "{out}");
    // A workload label value of 100,000 characters.
    let v = "v".repeat(100_000);
    let f = write(
        &dir,
        "label.json",
        format!(
            r#"{{"kind":"Node","metadata":{{"name":"a","labels":{{"nvidia.com/gpu.workload.config":"{v}"}}}}}}"#
        ),
    );
    let (rc, out, _) = gpuwl(&["check", &f]);
    assert_eq!(rc, 1);
    assert!(out.len() < 400, "{}", out.len());
    assert!(
        out.contains("… (100000 bytes) is not one of container"),
        "{out}"
    );
    // A pod quantity.
    let nodes = write(&dir, "one.json", list(&[node("n1", "\"1\"")]));
    let p = write(
        &dir,
        "p.json",
        format!(
            r#"{{"kind":"Pod","metadata":{{"name":"p"}},"spec":{{"containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"{long}"}}}}}}]}}}}"#
        ),
    );
    let (rc, _, err) = gpuwl(&["explain", "--nodes", &nodes, "--pod", &p]);
    assert_eq!(rc, 2);
    assert!(err.len() < 400, "{err}");
    assert!(err.contains(&format!("{cut} is too large")), "{err}");
}

#[test]
fn an_over_committed_node_shows_free_0_and_the_excess_never_a_negative_free() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = write(&dir, "n.json", list(&[node("n1", "\"8\"")]));
    let max = "9223372036854775807";
    let pod = |name: &str| {
        format!(
            r#"{{"kind":"Pod","metadata":{{"name":"{name}","namespace":"d"}},"spec":{{"nodeName":"n1","containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"{max}"}}}}}}]}}}}"#
        )
    };
    let pods = write(&dir, "p.json", list(&[pod("a"), pod("b")]));
    let (rc, out, err) = gpuwl(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &doc["rows"][0];
    assert_eq!(row["resource"], "nvidia.com/gpu", "{out}");
    assert_eq!(row["allocatable"], 8);
    assert_eq!(row["allocated"], i64::MAX, "allocated saturates");
    assert_eq!(row["free"], 0, "{out}");
    assert_eq!(row["overcommitted"], i64::MAX - 8, "{out}");
    assert_eq!(row["freeGpus"], 0.0, "{out}");
    assert!(!out.contains("\"free\": -"), "{out}");

    let (rc, text, err) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &pods]);
    assert_eq!(rc, 0, "{err}");
    assert!(!text.contains(" -9"), "{text}");
    assert!(
        text.contains(&format!(
            "note: over-committed: pool container nvidia.com/gpu: {max} allocated of 8 allocatable ({} over); FREE shows 0.",
            i64::MAX - 8
        )),
        "{text}"
    );
}
