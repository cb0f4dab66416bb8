//! A fuzzing harness over the readers (issue 50), run in the bench, not in CI (`#[ignore]`):
//! node dumps, pod dumps, DRA objects, single documents, must-gather bundles (folder
//! files and tarballs) get random bytes and mutated valid documents (bytes replaced,
//! inserted, deleted, cut short; YAML anchors and aliases, BOMs, deep nesting, `---`
//! spliced in). Every reader must return, never panic, and an error must be one line.
//!
//!   PROPTEST_CASES=20000 cargo test --release -p gpuwl-core --test fuzz_readers -- --ignored
//!
//! How long it ran and what it found: BENCHMARKS.md, "Reader limits".

use std::io::Write;

use gpuwl_core::decode::{document, dra, dump, mustgather, pods};
use proptest::prelude::*;

const NODES: &str = r#"{"kind":"List","apiVersion":"v1","items":[{"kind":"Node","metadata":{"name":"gpu-a","labels":{"nvidia.com/gpu.workload.config":"container","n":"1"}},"spec":{"taints":[{"key":"nvidia.com/gpu","effect":"NoSchedule"}]},"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4","cpu":"31"}}},{"kind":"Node","metadata":{"name":"gpu-b"},"status":{"allocatable":{"nvidia.com/GA102GL_A10":"2"}}}]}"#;

const PODS: &str = "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: p, namespace: ns, labels: {a: b}}\n  spec:\n    nodeSelector: {nvidia.com/gpu.workload.config: vm-passthrough}\n    containers:\n    - name: c\n      resources:\n        requests: {nvidia.com/gpu: 1}\n        limits: {nvidia.com/gpu: 1}\n  status: {phase: Pending, conditions: [{type: PodScheduled, status: 'False', reason: Unschedulable, message: '0/3 nodes'}]}\n- kind: Pod\n  metadata: {name: q, namespace: ns}\n  spec: {nodeName: gpu-a, containers: [{name: c}]}\n";

const DRA: &str = r#"{"kind":"List","items":[{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu.example.com"},"spec":{"selectors":[{"cel":{"expression":"device.driver == 'gpu.example.com'"}}]}},{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"n1-gpus"},"spec":{"driver":"gpu.example.com","nodeName":"n1","pool":{"name":"n1","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0","attributes":{"model":{"string":"A10"}},"capacity":{"memory":{"value":"24Gi"}}}]}},{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu.example.com","count":1}}]}}}]}"#;

const DESCR: &str = "Name:               gpu-a\nLabels:             nvidia.com/gpu.present=true\n                    nvidia.com/gpu.workload.config=container\nTaints:             nvidia.com/gpu=present:NoSchedule\nUnschedulable:      false\nCapacity:\n  nvidia.com/gpu:  2\nAllocatable:\n  nvidia.com/gpu:  2\nAllocated resources:\n  Resource  Requests  Limits\n  --------  --------  ------\n  nvidia.com/gpu  1  1\nEvents:              <none>\n";

/// Pieces spliced into documents: structure, YAML features, encodings.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "\n",
    "\n- ",
    "---\n",
    "&a ",
    "*a",
    "!!binary ",
    "<<: *a\n",
    "\u{feff}",
    "\u{0}",
    "\\u0000",
    "\u{202e}",
    "\u{fffe}",
    "9999999999999999999999",
    "1e999",
    "-",
    "null",
    "true",
    "\"items\":",
    "items:\n",
    "\"kind\":\"Node\"",
    "kind: Pod\n",
    "\t",
    "\r",
    "'",
    "#",
    "%YAML 1.1\n",
    "? ",
    "|\n  ",
    ">-\n  ",
];

/// One edit of a document.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, usize),
    Delete(usize, usize),
    Cut(usize),
    Nest(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Replace(i, b)),
        (any::<usize>(), 0..PIECES.len()).prop_map(|(i, p)| Edit::Insert(i, p)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Delete(i, n)),
        any::<usize>().prop_map(Edit::Cut),
        (any::<usize>(), 1usize..400).prop_map(|(i, d)| Edit::Nest(i, d)),
    ]
}

fn apply(doc: &str, edits: &[Edit]) -> Vec<u8> {
    let mut b = doc.as_bytes().to_vec();
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *e {
            Edit::Replace(i, x) if !b.is_empty() => {
                let i = i % b.len();
                b[i] = x;
            }
            Edit::Replace(..) => {}
            Edit::Insert(i, p) => {
                let i = at(i, b.len());
                b.splice(i..i, PIECES[p].bytes());
            }
            Edit::Delete(i, n) => {
                let i = at(i, b.len());
                let end = (i + n).min(b.len());
                b.drain(i..end);
            }
            Edit::Cut(i) => {
                let i = at(i, b.len());
                b.truncate(i);
            }
            Edit::Nest(i, d) => {
                let i = at(i, b.len());
                let open = if i % 2 == 0 { "[" } else { "{\"a\":" };
                b.splice(i..i, open.repeat(d).into_bytes());
            }
        }
    }
    b
}

/// An input: random bytes, or one of the documents with edits.
fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..2048),
        3 => (0..4usize, prop::collection::vec(edit(), 0..8)).prop_map(|(d, edits)| {
            apply([NODES, PODS, DRA, DESCR][d], &edits)
        }),
    ]
}

/// An error must be one line.
fn one_line<T>(r: gpuwl_core::error::Result<T>) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        let m = e.to_string();
        prop_assert!(!m.contains('\n'), "a multi-line error: {m:?}");
        prop_assert!(m.chars().count() < 4096, "a long error: {} chars", m.len());
    }
    Ok(())
}

/// A must-gather tarball of `members`, gzip-compressed when `gz`.
fn tarball(members: &[(&str, &[u8])], gz: bool) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, *data).unwrap();
    }
    let raw = tar.into_inner().unwrap();
    if !gz {
        return raw;
    }
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&raw).unwrap();
    e.finish().unwrap()
}

fn scratch(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "gpuwl-fuzz-{}-{tag}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ))
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    #[ignore = "fuzzing harness: run in the bench (BENCHMARKS.md)"]
    fn the_streaming_readers_never_panic(data in input()) {
        one_line(dump::read_from(data.as_slice(), "nodes.json", |_| {}))?;
        one_line(pods::read_pods_from(data.as_slice(), "pods.yaml"))?;
        one_line(dra::read_from(data.as_slice(), "dra.json"))?;
        if let Ok(text) = std::str::from_utf8(&data) {
            one_line(document::parse(text, "cr.yaml", "a KubeVirt CR"))?;
        }
    }

    #[test]
    #[ignore = "fuzzing harness: run in the bench (BENCHMARKS.md)"]
    fn bundles_never_panic(
        pods in input(),
        descr in input(),
        log in prop::collection::vec(any::<u8>(), 0..4096),
        gz in any::<bool>(),
        cut in any::<usize>(),
    ) {
        let mut bytes = tarball(
            &[
                ("mg/gpu_nodes.descr", &descr),
                ("mg/gpu_operand_pods.yaml", &pods),
                ("mg/gpu_operand_ds.yaml", &pods),
                ("mg/cluster_policy.yaml", &pods),
                ("mg/gpu_operator_pod.log", &log),
            ],
            gz,
        );
        // Sometimes cut short.
        if cut % 3 == 0 {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        let path = scratch("bundle.tgz");
        std::fs::write(&path, &bytes).unwrap();
        let r = mustgather::read(&path);
        let _ = std::fs::remove_file(&path);
        one_line(r)?;
        // The same files in a folder.
        let dir = scratch("dir");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, data) in [
            ("gpu_nodes.descr", &descr),
            ("gpu_operand_pods.yaml", &pods),
            ("cluster_policy.yaml", &pods),
        ] {
            std::fs::write(dir.join(name), data).unwrap();
        }
        let r = mustgather::read(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        one_line(r)?;
    }
}

/// A YAML alias bomb ("billion laughs": 10^10 items behind 91 aliases) is not expanded
/// without bound: the streaming pod reader stops at the anchor budget (100,000 recorded
/// events, `decode::document::yaml_options`) with an error naming it, and the
/// whole-document reader refuses or reads it without blowing up.
#[test]
fn a_yaml_alias_bomb_does_not_expand_without_bound() {
    let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let prev = i - 1;
        y.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    y.push_str("kind: List\nitems: *a9\n");
    let err = pods::read_pods_from(y.as_bytes(), "bomb.yaml")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("budget breached: RecordedAnchorEvents"),
        "{err}"
    );
    let _ = document::parse(&y, "bomb.yaml", "x");
}
