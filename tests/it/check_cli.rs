//! `gpuwl check` end to end: exit codes, exact stdout, one-line stderr, on the shared
//! cases (vendored in tests/shared-cases) and on hostile inputs.

use std::io::Write;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/shared-cases/check");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/check");

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut child = Command::new(cargo_bin("gpuwl"))
        .arg("check")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("KUBECONFIG")
        .spawn()
        .unwrap();
    if let Some(b) = stdin {
        // The child may stop reading early on bad input; a broken pipe here is fine.
        let _ = child.stdin.take().unwrap().write_all(b);
    }
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn case(name: &str) -> String {
    format!("{CASES}/{name}/nodes.json")
}

fn bad_input(o: &Out, needle: &str) {
    assert_eq!(o.code, 2, "stdout {:?} stderr {:?}", o.stdout, o.stderr);
    assert_eq!(o.stdout, "", "nothing on stdout for bad input");
    assert!(o.stderr.starts_with("gpuwl: "), "{:?}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "one line: {:?}", o.stderr);
    assert!(
        o.stderr.contains(needle),
        "{needle:?} not in {:?}",
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
}

#[test]
fn seed_ok_prints_ok_3() {
    let o = run(&[&case("seed-ok")], None);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (0, "OK=3\n", "")
    );
}

#[test]
fn shared_case_outputs_exactly() {
    for (name, code, out) in [
        ("no-labeled-nodes", 0, "OK=0\n"),
        ("stale-zero-ignored", 0, "OK=3\n"),
        (
            "passthrough-advertises-gpu",
            1,
            "MISMATCH=lab-node-1 label vm-passthrough expects a device-model resource, but the node advertises nvidia.com/gpu=2 (container GPU)\n",
        ),
        (
            "all-zero-is-nothing",
            1,
            "MISMATCH=lab-node-2 label vm-vgpu expects a vGPU type resource, but the node advertises no GPU resource (nvidia.com/NVIDIA_A10-12Q listed with 0)\n",
        ),
        (
            "two-mismatches-sorted",
            1,
            "MISMATCH=lab-node-0 label container expects a container-GPU resource, but the node advertises nvidia.com/NVIDIA_A10-12Q=4 (vGPU type)\n\
             MISMATCH=lab-node-2 label vm-vgpu expects a vGPU type resource, but the node advertises nvidia.com/gpu=4 (container GPU)\n",
        ),
        (
            "unknown-label-value",
            1,
            "MISMATCH=lab-node-1 label value \"vm_passthrough\" is not one of container, vm-passthrough, vm-vgpu: the operator silently falls back to sandboxWorkloads.defaultWorkload (default container); did you mean vm-passthrough?\n",
        ),
    ] {
        let o = run(&[&case(name)], None);
        assert_eq!(o.code, code, "{name}: {}", o.stderr);
        assert_eq!(o.stdout, out, "{name}");
        // Only warnings (stale zeros, unlabelled GPU nodes, ...) reach stderr.
        assert!(
            o.stderr.lines().all(|l| l.starts_with("warning: ")),
            "{name}: {}",
            o.stderr
        );
    }
}

#[test]
fn invalid_json_is_exit_2_naming_the_file() {
    let p = case("invalid-json");
    let o = run(&[&p], None);
    bad_input(&o, &p);
    assert!(o.stderr.contains("invalid JSON"), "{}", o.stderr);
}

#[test]
fn stdin_and_yaml_detection() {
    let json = std::fs::read(case("seed-ok")).unwrap();
    let o = run(&["-"], Some(&json));
    assert_eq!((o.code, o.stdout.as_str()), (0, "OK=3\n"));
    let yaml = b"kind: Node\nmetadata:\n  name: solo\n  labels:\n    nvidia.com/gpu.workload.config: vm-vgpu\nstatus:\n  allocatable:\n    nvidia.com/GRID_T4-2Q: \"8\"\n";
    let o = run(&["-"], Some(yaml));
    assert_eq!((o.code, o.stdout.as_str()), (0, "OK=1\n"), "{}", o.stderr);
}

#[test]
fn yaml_list_with_hard_names() {
    let p = format!("{DATA}/mixed.yaml");
    let o = run(&[&p], None);
    assert_eq!((o.code, o.stdout.as_str()), (0, "OK=4\n"));
    let warnings: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(warnings.len(), 5, "{}", o.stderr);
    assert!(warnings.contains(&"warning: d-unlabelled: no nvidia.com/gpu.workload.config label: the operator applies sandboxWorkloads.defaultWorkload (default container); the node advertises nvidia.com/gpu=8 (container GPU)"));
    let o = run(&[&p, "-o", "json"], None);
    assert_eq!(o.code, 0);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["summary"]["labelled"], 4);
    assert_eq!(v["summary"]["nodes"], 5);
    let names: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["a-mig-vgpu", "b-l40s", "c-relabel", "d-unlabelled", "z-mig"]
    );
    let codes = |node: &str| -> Vec<String> {
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == node)
            .unwrap()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(codes("a-mig-vgpu"), ["capacity-exceeds-allocatable"]);
    assert_eq!(codes("b-l40s"), ["ignored-resource"]);
    assert_eq!(codes("c-relabel"), ["stale-zero", "stale-zero"]);
    assert_eq!(codes("d-unlabelled"), ["unlabelled-gpu-node"]);
    assert_eq!(codes("z-mig"), ["stale-zero"]);
    let b = &v["nodes"][1]["resources"];
    assert_eq!(b[0]["name"], "nvidia.com/AD102GL_L40S");
    assert_eq!(b[0]["class"], "passthrough-model");
    assert_eq!(b[0]["allocatable"], "2");
    assert_eq!(v["nodes"][3]["verdict"], "not-judged");
}

#[test]
fn bad_quantity_is_a_mismatch_and_others_are_judged() {
    let o = run(&[&format!("{DATA}/bad-quantity.json")], None);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "MISMATCH=a-wrong label vm-vgpu expects a vGPU type resource, but the node advertises nvidia.com/GA102GL_A10=2 (device model)\n\
         MISMATCH=n-bad status.allocatable[\"nvidia.com/gpu\"] is \"1 Gi\", not a valid quantity (unknown suffix \" Gi\")\n"
    );
}

#[test]
fn json_and_yaml_output() {
    let o = run(&[&case("two-mismatches-sorted"), "-o", "json"], None);
    assert_eq!(o.code, 1);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["exitCode"], 1);
    assert_eq!(v["summary"]["mismatched"], 2);
    assert_eq!(v["lines"].as_array().unwrap().len(), 2);
    let n0 = &v["nodes"][0];
    assert_eq!(n0["name"], "lab-node-0");
    assert_eq!(n0["verdict"], "mismatch");
    assert_eq!(n0["findings"][0]["code"], "wrong-class-resource");
    assert_eq!(n0["findings"][0]["severity"], "error");
    assert_eq!(n0["findings"][0]["resource"], "nvidia.com/NVIDIA_A10-12Q");
    let o = run(&[&case("seed-ok"), "-o", "yaml"], None);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("ok: true"), "{}", o.stdout);
    assert!(o.stdout.contains("labelled: 3"), "{}", o.stdout);
    assert!(o.stdout.contains("- OK=3"), "{}", o.stdout);
}

#[test]
fn hostile_inputs_exit_2_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        ("empty.json", b"", "empty input"),
        ("blank.json", b"  \n\n\t", "empty input"),
        ("truncated.json", br#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"a"}"#, "invalid JSON"),
        ("pods.json", br#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"p"}}]}"#, "items[0]: kind \"Pod\" is not a Node"),
        ("podlist.json", br#"{"kind":"PodList","items":[]}"#, "kind \"PodList\""),
        ("noname.json", br#"{"kind":"NodeList","items":[{"metadata":{}}]}"#, "metadata.name"),
        ("array.json", b"[]", "bad.json"),
        ("scalar.yaml", b"hello\n", "scalar.yaml"),
        ("bad.yaml", b"kind: List\nitems: [\n", "bad.yaml"),
        ("seq.yaml", b"- 1\n- 2\n", "seq.yaml"),
        ("binary.bin", b"\x00\xff\xfe\x01garbage", "binary.bin"),
        ("deep.json", &[b'['; 100_000], "deep.json"),
        ("deep.yaml", &[b'['; 100_000], "deep.yaml"),
        ("obj-quantity.json", br#"{"kind":"Node","metadata":{"name":"a"},"status":{"capacity":{"nvidia.com/gpu":{"x":1}}}}"#, "obj-quantity.json"),
        ("labels-list.json", br#"{"kind":"Node","metadata":{"name":"a","labels":["x"]}}"#, "labels-list.json"),
    ];
    for (name, bytes, needle) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let o = run(&[p.to_str().unwrap()], None);
        // "array.json": the needle names the file generically; check the path instead.
        let needle = if *needle == "bad.json" { name } else { needle };
        bad_input(&o, needle);
        assert!(o.stderr.contains(name), "{name}: {}", o.stderr);
    }
    let missing = dir.path().join("nope.json");
    bad_input(
        &run(&[missing.to_str().unwrap()], None),
        "nope.json: cannot read",
    );
    bad_input(&run(&[dir.path().to_str().unwrap()], None), "cannot read");
    bad_input(&run(&["-"], Some(b"")), "<stdin>: empty input");
}

#[test]
fn usage_errors_exit_2() {
    let o = run(&["a.json", "--context", "x"], None);
    assert_eq!(o.code, 2);
    assert_eq!(o.stdout, "");
    let o = run(&["-o", "xml", "a.json"], None);
    assert_eq!(o.code, 2);
}

#[test]
fn closed_stdout_pipe_is_not_an_error() {
    // Many nodes so the report is larger than a pipe buffer; the reader closes at once.
    let mut s = String::from(r#"{"kind":"List","items":["#);
    for i in 0..5000 {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"kind":"Node","metadata":{{"name":"node-{i:05}","labels":{{"nvidia.com/gpu.workload.config":"vm-vgpu"}}}},"status":{{"allocatable":{{"nvidia.com/gpu":"1"}}}}}}"#
        ));
    }
    s.push_str("]}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("many.json");
    std::fs::write(&p, s).unwrap();
    let mut child = Command::new(cargo_bin("gpuwl"))
        .args(["check", p.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // close the read end before gpuwl writes
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
}

#[test]
fn ignore_resource_flag() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("n.json");
    std::fs::write(
        &p,
        br#"{"kind":"Node","metadata":{"name":"n","labels":{"nvidia.com/gpu.workload.config":"container"}},"status":{"allocatable":{"nvidia.com/gpu":"1","nvidia.com/custom_nic":"4"}}}"#,
    )
    .unwrap();
    let p = p.to_str().unwrap();
    assert_eq!(run(&[p], None).code, 1);
    let o = run(&[p, "--ignore-resource", "custom_*"], None);
    assert_eq!((o.code, o.stdout.as_str()), (0, "OK=1\n"));
    let o = run(&[p, "--ignore-resource", "nvidia.com/custom_nic"], None);
    assert_eq!((o.code, o.stdout.as_str()), (0, "OK=1\n"));
}

#[test]
fn live_mode_without_cluster_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, "not: [a kubeconfig").unwrap();
    let o = run(&["--kubeconfig", kc.to_str().unwrap()], None);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(o.stdout, "");
    assert!(o.stderr.contains("kubeconfig"), "{}", o.stderr);
    let o = run(
        &["--kubeconfig", dir.path().join("none").to_str().unwrap()],
        None,
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
}

/// Writes `bytes` to a temp file named `name` and runs `gpuwl check` on it.
fn check_bytes(name: &str, bytes: &[u8], extra: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    let mut args = vec![p.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args, None)
}

const LABEL: &str = r#""labels":{"nvidia.com/gpu.workload.config":"container"}"#;

#[test]
fn duplicate_keys_and_node_names_are_bad_input() {
    // Each of these used to pick one of the two values silently: a second `metadata`
    // hid the labelled node (OK=0), a second `items` added nodes, a repeated resource or
    // label key decided the verdict by its last value, and two nodes named alike gave
    // two verdicts for one name.
    for (json, needle) in [
        (
            format!(r#"{{"kind":"Node","metadata":{{"name":"a",{LABEL}}},"metadata":{{"name":"b"}}}}"#),
            "duplicate key \"metadata\"",
        ),
        (
            format!(r#"{{"kind":"List","items":[],"items":[{{"kind":"Node","metadata":{{"name":"a",{LABEL}}}}}]}}"#),
            "duplicate key \"items\"",
        ),
        (
            format!(r#"{{"kind":"List","items":[{{"kind":"Node","metadata":{{"name":"a",{LABEL}}},"status":{{"allocatable":{{"nvidia.com/gpu":"1","nvidia.com/gpu":"0"}}}}}}]}}"#),
            "items[0]: status: allocatable: duplicate key \"nvidia.com/gpu\"",
        ),
        (
            r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"a","labels":{"nvidia.com/gpu.workload.config":"container","nvidia.com/gpu.workload.config":"vm-vgpu"}}}]}"#.to_string(),
            "items[0]: metadata: labels: duplicate key \"nvidia.com/gpu.workload.config\"",
        ),
        (
            r#"{"kind":"List","items":[{"kind":"Node","kind":"Node","metadata":{"name":"a"}}]}"#.to_string(),
            "items[0]: duplicate key \"kind\"",
        ),
        (
            format!(r#"{{"kind":"List","items":[{{"kind":"Node","metadata":{{"name":"a",{LABEL}}}}},{{"kind":"Node","metadata":{{"name":"b"}}}},{{"kind":"Node","metadata":{{"name":"a"}}}}]}}"#),
            "items[2]: duplicate node name \"a\"",
        ),
    ] {
        bad_input(&check_bytes("dup.json", json.as_bytes(), &[]), needle);
    }
    // YAML: serde-saphyr's own duplicate check, without its advice to the programmer.
    let o = check_bytes(
        "dup.yaml",
        b"kind: Node\nmetadata: {name: a}\nmetadata: {name: b}\n",
        &[],
    );
    bad_input(
        &o,
        "dup.yaml: duplicate mapping key: metadata at line 3, column 1",
    );
    assert!(!o.stderr.contains("DuplicateKeyPolicy"), "{}", o.stderr);
}

#[test]
fn several_yaml_documents_say_so_plainly() {
    let o = check_bytes(
        "two.yaml",
        b"kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\n",
        &[],
    );
    bad_input(
        &o,
        "two.yaml: several YAML documents (---): expected one Node, NodeList or List",
    );
    assert!(!o.stderr.contains("read_with_options"), "{}", o.stderr);
}

#[test]
fn nested_yaml_error_has_one_location() {
    let o = check_bytes(
        "null.yaml",
        b"kind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n  status: {allocatable: {nvidia.com/gpu: ~}}\n",
        &[],
    );
    bad_input(
        &o,
        "null.yaml: items[0]: status: allocatable[\"nvidia.com/gpu\"]: invalid type: unit value, expected a string or number at line 5, column 26",
    );
    assert_eq!(o.stderr.matches(" at line ").count(), 1, "{}", o.stderr);
}

#[test]
fn bad_field_errors_name_the_field() {
    let o = check_bytes(
        "null-label.json",
        br#"{"kind":"Node","metadata":{"name":"a","labels":{"nvidia.com/gpu.workload.config":null}}}"#,
        &[],
    );
    bad_input(
        &o,
        "null-label.json: metadata: labels[\"nvidia.com/gpu.workload.config\"]: invalid type: null",
    );
}

#[test]
fn names_cannot_forge_or_split_lines() {
    // A node name with a newline used to print a second, forged MISMATCH line.
    let o = check_bytes(
        "nl.json",
        format!(r#"{{"kind":"List","items":[{{"kind":"Node","metadata":{{"name":"a\nMISMATCH=evil",{LABEL}}}}}]}}"#).as_bytes(),
        &[],
    );
    bad_input(
        &o,
        r#"items[0]: metadata.name "a\nMISMATCH=evil" is not a node name"#,
    );
    let o = check_bytes(
        "sp.json",
        format!(r#"{{"kind":"Node","metadata":{{"name":"a b",{LABEL}}}}}"#).as_bytes(),
        &[],
    );
    bad_input(&o, r#"metadata.name "a b" is not a node name"#);
    // A resource name is quoted into the reason: control characters are escaped.
    let o = check_bytes(
        "res.json",
        br#"{"kind":"Node","metadata":{"name":"a","labels":{"nvidia.com/gpu.workload.config":"vm-vgpu"}},"status":{"allocatable":{"nvidia.com/gpu\nMISMATCH=zz":"1"}}}"#,
        &[],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "MISMATCH=a label vm-vgpu expects a vGPU type resource, but the node advertises nvidia.com/gpu\\nMISMATCH=zz=1 (device model)\n"
    );
}

#[test]
fn negative_and_fractional_gpu_counts_are_invalid_quantities() {
    // "-1" used to read "nvidia.com/gpu listed with 0", and "500m" / "0.5" counted as an
    // advertised GPU (OK=1); the API server accepts neither for an extended resource.
    for (q, why) in [
        ("-1", "not a valid device count (negative)"),
        (
            "500m",
            "not a valid device count (extended resources are whole numbers)",
        ),
        (
            "0.5",
            "not a valid device count (extended resources are whole numbers)",
        ),
    ] {
        let o = check_bytes(
            "q.json",
            format!(r#"{{"kind":"Node","metadata":{{"name":"a",{LABEL}}},"status":{{"allocatable":{{"nvidia.com/gpu":"{q}"}}}}}}"#).as_bytes(),
            &[],
        );
        assert_eq!(o.code, 1, "{q}: {}", o.stderr);
        assert_eq!(
            o.stdout,
            format!("MISMATCH=a status.allocatable[\"nvidia.com/gpu\"] is \"{q}\", {why}\n")
        );
    }
    // Whole numbers, including binary suffixes and "-0", still read as counts.
    let o = check_bytes(
        "q.json",
        format!(r#"{{"kind":"Node","metadata":{{"name":"a",{LABEL}}},"status":{{"allocatable":{{"nvidia.com/gpu":"1Ki"}}}}}}"#).as_bytes(),
        &[],
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "OK=1\n"));
}

#[test]
fn capacity_without_allocatable_entry_is_named_as_such() {
    // The node has an allocatable map without the GPU: not advertised (contract), but the
    // reason used to claim "nvidia.com/gpu listed with 0".
    let o = check_bytes(
        "cap.json",
        format!(r#"{{"kind":"Node","metadata":{{"name":"a",{LABEL}}},"status":{{"capacity":{{"nvidia.com/gpu":"4","nvidia.com/mig-1g.10gb":"0"}},"allocatable":{{"cpu":"8","nvidia.com/mig-1g.10gb":"0"}}}}}}"#).as_bytes(),
        &[],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "MISMATCH=a label container expects a container-GPU resource, but the node advertises no GPU resource (nvidia.com/mig-1g.10gb listed with 0; nvidia.com/gpu only in status.capacity (=4), not in status.allocatable)\n"
    );
}

#[test]
fn output_help_speaks_of_check() {
    let o = Command::new(cargo_bin("gpuwl"))
        .args(["check", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("text is the `MISMATCH=<node> <reason>` / `OK=<n>` lines"),
        "{help}"
    );
    assert!(!help.contains("[`"), "rustdoc link leaked: {help}");
}

#[test]
fn big_dump_reads_every_node_across_read_chunks() {
    // Nodes with labels and quantities spread over several read buffers: a value cut by
    // a buffer's end must be read again, never reported as "EOF while parsing".
    let mut s = String::from(r#"{"kind":"List","items":["#);
    for i in 0..6000 {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"kind":"Node","metadata":{{"name":"node-{i:05}","labels":{{"nvidia.com/gpu.workload.config":"container","pad":"{}"}}}},"status":{{"capacity":{{"nvidia.com/gpu":"8"}},"allocatable":{{"nvidia.com/gpu":"8"}}}}}}"#,
            "x".repeat(i % 97)
        ));
    }
    s.push_str("]}");
    assert!(s.len() > 1_000_000);
    let o = check_bytes("big.json", s.as_bytes(), &[]);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (0, "OK=6000\n", "")
    );
}

#[test]
fn node_with_items_says_what_is_wrong() {
    // Used to say: kind "Node" is not Node, NodeList or List.
    let o = check_bytes(
        "node-items.json",
        br#"{"kind":"Node","metadata":{"name":"a"},"items":[]}"#,
        &[],
    );
    bad_input(
        &o,
        "node-items.json: kind \"Node\" with an items field: expected one Node, or a NodeList or List",
    );
}

#[test]
fn type_errors_do_not_name_rust_structs() {
    // Was: "spec: invalid type: null, expected struct TaintSlim".
    let o = check_bytes(
        "taint.json",
        br#"{"kind":"Node","metadata":{"name":"a"},"spec":{"taints":[null]}}"#,
        &[],
    );
    bad_input(
        &o,
        "taint.json: spec: invalid type: null, expected a taint object",
    );
    assert!(!o.stderr.contains("Slim"), "{}", o.stderr);
}

#[test]
fn warnings_go_to_stderr_and_quiet_drops_them() {
    // lab-node-1 relabelled away from a device plugin: a stale "0" nvidia.com/gpu.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nodes.json");
    let mut d: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/inventory/lab/nodes.json"
        ))
        .unwrap(),
    )
    .unwrap();
    for n in d["items"].as_array_mut().unwrap() {
        if n["metadata"]["name"] == "lab-node-1" {
            n["status"]["allocatable"]["nvidia.com/gpu"] = "0".into();
        }
    }
    std::fs::write(&p, d.to_string()).unwrap();
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["check", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK=3\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(
            "warning: lab-node-1: nvidia.com/gpu is listed in status.allocatable with 0"
        ),
        "{err}"
    );
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["check", "--quiet", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK=3\n");
    assert!(out.stderr.is_empty());
}
