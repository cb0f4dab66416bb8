//! Issue 50: every reader bounded, and a bundle never leads outside itself. A gzip bomb, a
//! list of more items than `--max-items`, a member larger than `--max-member-bytes` each
//! stop with one line naming the limit and its flag (exit 2, no partial report); symbolic
//! and hard links in a bundle's folder or tarball are listed and skipped, never read.
//! (The time and memory of a million-pod bundle are measured by `bench/bomb.py`, not here.)

use std::io::Write;
use std::path::Path;

use crate::kit::gpuwl;

/// `n` operand pods as `kubectl get pods -oyaml` prints them (short).
fn operand_pods(n: usize) -> String {
    let mut s = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..n {
        s.push_str(&format!(
            "- kind: Pod\n  metadata: {{name: nvidia-device-plugin-{i}, namespace: gpu-operator}}\n  spec: {{nodeName: gpu-a, containers: [{{name: c, image: x}}]}}\n  status: {{phase: Running}}\n"
        ));
    }
    s
}

const DESCR: &str = "Name: gpu-a\nLabels: nvidia.com/gpu.present=true\nCapacity:\n  nvidia.com/gpu: 2\nAllocatable:\n  nvidia.com/gpu: 2\nEvents: <none>\n";

/// A gzip-compressed tarball of `members` (name, bytes) at `path`.
fn tgz(path: &Path, members: &[(&str, &[u8])]) {
    let f = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, *data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

/// Runs gpuwl, asserting one line on stderr, exit 2, nothing on stdout, no panic; gives
/// the line.
fn refused(args: &[&str]) -> String {
    let (rc, out, err) = gpuwl(args);
    assert_eq!(rc, 2, "{args:?}: {out} {err}");
    assert!(out.is_empty(), "partial output: {out}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err.trim_end().to_owned()
}

#[test]
fn a_bundle_of_more_operand_pods_than_max_items_stops_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bomb.tgz");
    let pods = operand_pods(2_000);
    tgz(
        &bundle,
        &[
            ("mg/gpu_nodes.descr", DESCR.as_bytes()),
            ("mg/gpu_operand_pods.yaml", pods.as_bytes()),
        ],
    );
    let b = bundle.to_str().unwrap();
    let err = refused(&["triage", b, "--max-items", "1000"]);
    assert_eq!(
        err,
        format!(
            "gpuwl: {b}: gpu_operand_pods.yaml: more than 1000 items in one list (the \
             --max-items limit; raise it to read more)"
        )
    );
    // Raised, the same bundle reads, every file of it.
    let (rc, out, err) = gpuwl(&["triage", b, "--max-items", "2000", "-o", "json"]);
    assert!(rc == 0 || rc == 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["problems"], serde_json::json!([]), "{out}");
}

#[test]
fn a_gzip_bomb_stops_at_max_input_bytes_and_a_large_member_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("zeros.tgz");
    // 8 MiB of a log that compresses to a few KiB.
    let zeros = vec![b'a'; 8 << 20];
    tgz(
        &bundle,
        &[
            ("gpu_nodes.descr", DESCR.as_bytes()),
            ("gpu_operator_pod.log", &zeros),
        ],
    );
    assert!(std::fs::metadata(&bundle).unwrap().len() < 64 << 10);
    let b = bundle.to_str().unwrap();
    assert_eq!(
        refused(&["triage", b, "--max-input-bytes", "1M"]),
        format!(
            "gpuwl: {b}: gpu_operator_pod.log: more than 1 MiB read in all (the \
             --max-input-bytes limit, 1048576; raise it to read more)"
        )
    );
    // The member's header says 8 MiB: refused before a byte of it is read.
    assert_eq!(
        refused(&["triage", b, "--max-member-bytes", "4M"]),
        format!(
            "gpuwl: {b}: gpu_operator_pod.log: larger than 4 MiB (the --max-member-bytes \
             limit, 4194304; raise it to read more)"
        )
    );
    // Within the defaults it reads.
    let (rc, _, err) = gpuwl(&["triage", b]);
    assert!(rc == 0 || rc == 1, "{err}");
}

#[test]
fn node_and_pod_dumps_and_snapshots_stop_at_max_items() {
    let dir = tempfile::tempdir().unwrap();
    let node = |i: usize| format!(r#"{{"kind":"Node","metadata":{{"name":"n{i}"}}}}"#);
    let nodes: Vec<String> = (0..5).map(node).collect();
    let json = dir.path().join("nodes.json");
    std::fs::write(
        &json,
        format!(r#"{{"kind":"List","items":[{}]}}"#, nodes.join(",")),
    )
    .unwrap();
    let j = json.to_str().unwrap();
    assert_eq!(
        refused(&["check", j, "--max-items", "3"]),
        format!(
            "gpuwl: {j}: items[3]: more than 3 items in one list (the --max-items limit; \
             raise it to read more)"
        )
    );
    let (rc, out, _) = gpuwl(&["check", j, "--max-items", "5"]);
    assert_eq!((rc, out.trim()), (0, "OK=0"));
    // YAML goes through the shared list reader.
    let yaml = dir.path().join("nodes.yaml");
    let mut y = String::from("kind: List\nitems:\n");
    for i in 0..5 {
        y.push_str(&format!("- kind: Node\n  metadata: {{name: n{i}}}\n"));
    }
    std::fs::write(&yaml, y).unwrap();
    let err = refused(&[
        "inventory",
        "--nodes",
        yaml.to_str().unwrap(),
        "--max-items",
        "2",
    ]);
    assert!(
        err.ends_with(
            "items[2]: more than 2 items in one list (the --max-items limit; raise it to read more)"
        ),
        "{err}"
    );
    // A pod dump, and a file larger than --max-member-bytes.
    let pods = dir.path().join("pods.yaml");
    std::fs::write(&pods, operand_pods(50)).unwrap();
    let p = pods.to_str().unwrap();
    let err = refused(&["check", j, "--pods", p, "--max-items", "10"]);
    assert!(err.contains("more than 10 items in one list"), "{err}");
    let err = refused(&["check", j, "--pods", p, "--max-member-bytes", "1K"]);
    assert!(
        err.ends_with(
            "larger than 1 KiB (the --max-member-bytes limit, 1024; raise it to read more)"
        ),
        "{err}"
    );
    // A snapshot: its nodes.json member streams through the same reader.
    let snap = dir.path().join("s.tgz");
    let meta = r#"{"format":"gpuwl.snapshot/v1","gpuwlVersion":"0","takenAt":"2026-01-01T00:00:00Z","fullPods":false,"collected":{}}"#;
    let list = std::fs::read(&json).unwrap();
    tgz(
        &snap,
        &[("snapshot.json", meta.as_bytes()), ("nodes.json", &list)],
    );
    let s = snap.to_str().unwrap();
    let err = refused(&["check", "--snapshot", s, "--max-items", "4"]);
    assert_eq!(
        err,
        format!(
            "gpuwl: {s}:\"nodes.json\": items[4]: more than 4 items in one list (the --max-items \
             limit; raise it to read more)"
        )
    );
    let err = refused(&["check", "--snapshot", s, "--max-input-bytes", "1K"]);
    assert!(err.contains("the --max-input-bytes limit, 1024"), "{err}");
}

/// A fake kubeconfig whose secrets must never reach a report.
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tU0VDUkVU\n    token: sk-live-secret-token-0123456789\n";

fn assert_no_secret(s: &str) {
    for secret in [
        "LS0tLS1CRUdJTiBQUklWQVRF",
        "sk-live-secret-token",
        "client-key-data",
    ] {
        assert!(!s.contains(secret), "{secret} leaked: {s}");
    }
}

#[test]
fn links_out_of_a_bundle_folder_are_listed_and_never_read() {
    let outside = tempfile::tempdir().unwrap();
    let kubeconfig = outside.path().join("config");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gpu_nodes.descr"), DESCR).unwrap();
    // Named as the files the report reads the ends of.
    std::os::unix::fs::symlink(&kubeconfig, dir.path().join("gpu_operator_pod.log")).unwrap();
    std::os::unix::fs::symlink(&kubeconfig, dir.path().join("must-gather.log")).unwrap();
    std::fs::hard_link(&kubeconfig, dir.path().join("gpu_operand_pod_x.log")).unwrap();
    let d = dir.path().to_str().unwrap();
    for format in ["text", "json"] {
        let (rc, out, err) = gpuwl(&["triage", d, "-o", format]);
        assert!(rc == 0 || rc == 1, "{err}");
        assert_no_secret(&out);
        assert_no_secret(&err);
        if format == "json" {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let problems: Vec<&str> = v["problems"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            assert_eq!(
                problems,
                [
                    "gpu_operand_pod_x.log: a hard link (the file has other names): skipped \
                     (only the bundle's own regular files are read)",
                    "gpu_operator_pod.log: a symbolic link: skipped (only the bundle's own \
                     regular files are read)",
                    "must-gather.log: a symbolic link: skipped (only the bundle's own regular \
                     files are read)",
                ]
            );
            assert_eq!(v["operatorLog"], serde_json::Value::Null, "{out}");
        }
    }
}

#[test]
fn links_in_a_bundle_tarball_are_listed_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("links.tar.gz");
    let f = std::fs::File::create(&bundle).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_size(DESCR.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, "mg/gpu_nodes.descr", DESCR.as_bytes())
        .unwrap();
    for (kind, name) in [
        (tar::EntryType::Symlink, "mg/gpu_operator_pod.log"),
        (tar::EntryType::Link, "mg/must-gather.log"),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(0);
        h.set_mode(0o644);
        tar.append_link(&mut h, name, "/root/.kube/config").unwrap();
    }
    let mut gz = tar.into_inner().unwrap();
    gz.flush().unwrap();
    gz.finish().unwrap();
    let (rc, out, err) = gpuwl(&["triage", bundle.to_str().unwrap(), "-o", "json"]);
    assert!(rc == 0 || rc == 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["problems"],
        serde_json::json!([
            "gpu_operator_pod.log: a symbolic link: skipped (only the bundle's own regular files are read)",
            "must-gather.log: a hard link to another member: skipped (only the bundle's own regular files are read)"
        ])
    );
}

#[test]
fn usage_errors_escape_control_characters_of_the_arguments() {
    // clap drops an ANSI sequence itself; a bell, a carriage return or a lone ESC it quoted
    // raw.
    let (rc, _, err) = gpuwl(&["check", "--max-items", "\x07bell\rforged\x1b"]);
    assert_eq!(rc, 2);
    assert!(!err.contains(['\x1b', '\x07', '\r']), "{err:?}");
    assert!(err.contains("bell\\rforged"), "{err}");
    let (rc, _, err) = gpuwl(&["check", "/nonexistent/\x1b]0;owned\x07"]);
    assert_eq!(rc, 2);
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
}

/// A node named with U+FFFE and U+FFFF (from a file: the API server refuses them) and a
/// DRA driver named as a spreadsheet formula.
fn hostile_inventory(dir: &Path) -> (String, String) {
    let nodes = dir.join("n.json");
    std::fs::write(
        &nodes,
        r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"gpu\ufffe\uffff-a","labels":{"nvidia.com/gpu.workload.config":"container"}},"status":{"capacity":{"nvidia.com/gpu":"2"},"allocatable":{"nvidia.com/gpu":"2"}}}]}"#,
    )
    .unwrap();
    let dra = dir.join("d.json");
    std::fs::write(
        &dra,
        r#"{"kind":"List","items":[{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"=cmd|' /C calc'!A0","nodeName":"gpu\ufffe\uffff-a","pool":{"name":"p","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0"}]}}]}"#,
    )
    .unwrap();
    (
        nodes.to_str().unwrap().to_owned(),
        dra.to_str().unwrap().to_owned(),
    )
}

#[test]
fn svg_output_parses_as_xml_whatever_the_names_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, dra) = hostile_inventory(dir.path());
    let (rc, svg, err) = gpuwl(&["inventory", "--nodes", &nodes, "--dra", &dra, "-o", "svg"]);
    assert_eq!(rc, 0, "{err}");
    assert!(!svg.contains(['\u{fffe}', '\u{ffff}']));
    assert!(svg.contains(">gpu-a<"), "{svg}");
    let file = dir.path().join("o.svg");
    std::fs::write(&file, &svg).unwrap();
    // A real XML parser (python's expat) must accept it.
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().tag)",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "{http://www.w3.org/2000/svg}svg",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_csv_cell_starting_with_a_formula_character_is_neutralised() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, dra) = hostile_inventory(dir.path());
    let (rc, csv, err) = gpuwl(&["inventory", "--nodes", &nodes, "--dra", &dra, "-o", "csv"]);
    assert_eq!(rc, 0, "{err}");
    let dra_row = csv.lines().find(|l| l.contains(",dra,")).unwrap();
    assert_eq!(
        dra_row,
        "container,dra,\"'=cmd|' /C calc'!A0/-\",dra-device,1,0,1,1,0,1,0,1,,"
    );
    for line in csv.lines() {
        for cell in line.split(',') {
            assert!(!cell.starts_with(['=', '+', '@']), "{line}");
        }
    }
}

#[test]
fn a_bundle_describing_more_nodes_than_max_items_stops_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let descr: String = (0..6)
        .map(|i| DESCR.replace("gpu-a", &format!("gpu-{i}")))
        .collect();
    std::fs::write(dir.path().join("gpu_nodes.descr"), &descr).unwrap();
    let d = dir.path().to_str().unwrap();
    assert_eq!(
        refused(&["triage", d, "--max-items", "5"]),
        format!(
            "gpuwl: {d}: gpu_nodes.descr: more than 5 items in one list (the --max-items \
             limit; raise it to read more)"
        )
    );
    let labels: String = (0..6)
        .map(|i| format!("gpu-{i}\n- nvidia.com/gpu.present=true\n"))
        .collect();
    std::fs::write(dir.path().join("gpu_nodes.descr"), DESCR).unwrap();
    std::fs::write(dir.path().join("gpu_nodes.labels"), labels).unwrap();
    let err = refused(&["triage", d, "--max-items", "5"]);
    assert!(err.contains("gpu_nodes.labels: more than 5 items"), "{err}");
    let (rc, _, err) = gpuwl(&["triage", d, "--max-items", "6"]);
    assert!(rc == 0 || rc == 1, "{err}");
}
