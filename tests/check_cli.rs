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
            "MISMATCH=lab-node-1 label value \"vm_passthrough\" is not one of container, vm-passthrough, vm-vgpu: the operator silently falls back to sandboxWorkloads.defaultWorkload (default container)\n",
        ),
    ] {
        let o = run(&[&case(name)], None);
        assert_eq!(o.code, code, "{name}: {}", o.stderr);
        assert_eq!(o.stdout, out, "{name}");
        assert_eq!(o.stderr, "", "{name}");
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
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (0, "OK=4\n", "")
    );
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
