//! `gpuwl inventory` on realistic dumps (tests/data/inventory): the lab's state after
//! `gpuwl lab` (job-cross pending), and a mixed cluster with the facts sheet's shapes (MIG
//! mixed, time-slicing, a stale zero after a relabel, `TU104GL_Tesla_T4`, `GRID_T4_2Q`,
//! an invalid label value, a vGPU taint, a sidecar).

use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use serde_json::{Value, json};

use crate::kit::{gpuwl, gpuwl_ok};

const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory");

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let (rc, out, err) = gpuwl(&a);
    assert_eq!(rc, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn row<'a>(doc: &'a Value, pool: &str, resource: &str) -> &'a Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pool"] == pool && r["resource"] == resource)
        .unwrap_or_else(|| panic!("no row {pool} × {resource}"))
}

fn nums(r: &Value) -> [i64; 6] {
    [
        "nodes",
        "capacity",
        "allocatable",
        "allocated",
        "free",
        "pending",
    ]
    .map(|k| r[k].as_i64().unwrap())
}

#[test]
fn lab_state_three_pools_and_job_cross() {
    let nodes = format!("{D}/lab/nodes.json");
    let pods = format!("{D}/lab/pods.json");
    let doc = json(&["inventory", "--nodes", &nodes, "--pods", &pods]);
    assert_eq!(doc["rows"].as_array().unwrap().len(), 3);
    assert_eq!(
        nums(row(&doc, "container", "nvidia.com/gpu")),
        [1, 4, 4, 1, 3, 0]
    );
    assert_eq!(
        nums(row(&doc, "vm-passthrough", "nvidia.com/GA102GL_A10")),
        [1, 2, 2, 1, 1, 0]
    );
    assert_eq!(
        nums(row(&doc, "vm-vgpu", "nvidia.com/NVIDIA_A10-12Q")),
        [1, 4, 4, 1, 3, 0]
    );
    // physical GPUs: 4 containers GPUs, 2 passthrough, 4 × A10-12Q = 2 A10s (12 of 24 GB)
    assert_eq!(
        row(&doc, "container", "nvidia.com/gpu")["capacityGpus"],
        4.0
    );
    assert_eq!(
        row(&doc, "vm-passthrough", "nvidia.com/GA102GL_A10")["capacityGpus"],
        2.0
    );
    assert_eq!(
        row(&doc, "vm-vgpu", "nvidia.com/NVIDIA_A10-12Q")["capacityGpus"],
        2.0
    );
    // 4 slots of A10-12Q = 2 A10s × 2 slots; 1 slot in use: 3 slots free but only 1 whole
    // A10 certainly free (a GPU hosts one vGPU type at a time, so half an A10 is no GPU).
    assert_eq!(
        row(&doc, "vm-vgpu", "nvidia.com/NVIDIA_A10-12Q")["freeGpus"],
        1.0
    );
    assert_eq!(
        row(&doc, "vm-vgpu", "nvidia.com/NVIDIA_A10-12Q")["slotsPerGpu"],
        2
    );
    assert_eq!(
        row(&doc, "container", "nvidia.com/gpu")["slotsPerGpu"],
        serde_json::Value::Null
    );
    assert_eq!(doc["pendingPods"], 1);
    let u = &doc["unservable"].as_array().unwrap()[..];
    assert_eq!(u.len(), 1);
    assert_eq!(u[0]["pod"], "gpu-vm/job-cross");
    assert_eq!(u[0]["resource"], "nvidia.com/gpu");
    assert_eq!(u[0]["units"], 1);
    assert_eq!(u[0]["cause"], "excluded");
    assert_eq!(u[0]["allowedPools"], serde_json::json!(["vm-passthrough"]));
    assert_eq!(
        u[0]["freeSameName"],
        serde_json::json!([{"pool": "container", "resource": "nvidia.com/gpu", "free": 3}])
    );
    assert_eq!(
        u[0]["freeOtherNames"],
        serde_json::json!([{"pool": "vm-passthrough", "resource": "nvidia.com/GA102GL_A10", "free": 1}])
    );
    assert!(
        u[0]["schedulerMessage"]
            .as_str()
            .unwrap()
            .starts_with("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.")
    );

    // The text table says the same, with the split spelled out.
    let (rc, out, _) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &pods, "--bars"]);
    assert_eq!(rc, 0);
    let line = |pool: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(pool))
            .unwrap_or_else(|| panic!("{pool} missing in\n{out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        // The USE bar: 10 characters for the row's own allocatable (1 of 4 → 3 █).
        line("container").contains("container nvidia.com/gpu 1 4 4 1 3 0 4 ███░░░░░░░"),
        "{out}"
    );
    assert!(
        line("vm-passthrough").contains("nvidia.com/GA102GL_A10 1 2 2 1 1 0 2 █████░░░░░"),
        "{out}"
    );
    assert!(
        line("vm-vgpu").contains("nvidia.com/NVIDIA_A10-12Q 1 4 4 1 3 0 2 ███░░░░░░░"),
        "{out}"
    );
    assert!(out.contains("gpu-vm/job-cross wants 1 × nvidia.com/gpu: nvidia.com/gpu is advertised only in pool container and nodeSelector nvidia.com/gpu.workload.config=vm-passthrough excludes those nodes"), "{out}");
    assert!(out.contains("beside: 3 free nvidia.com/gpu in pool container (out of the pod's reach); 1 free nvidia.com/GA102GL_A10 in pool vm-passthrough"), "{out}");
    assert!(out.contains("USE: each row's own allocatable, █ allocated, ░ free."));
}

#[test]
fn at_100_columns_no_line_is_wider_and_no_name_is_split() {
    let d = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory/lab");
    for cols in ["100", "80"] {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
            .args(["inventory", "--bars", "--nodes"])
            .arg(format!("{d}/nodes.json"))
            .arg("--pods")
            .arg(format!("{d}/pods.json"))
            .env("COLUMNS", cols)
            .output()
            .unwrap();
        let out = String::from_utf8(out.stdout).unwrap();
        let width: usize = cols.parse().unwrap();
        assert!(out.lines().all(|l| l.chars().count() <= width), "{out}");
        // Columns left out for the width are named, never dropped silently.
        let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains(&format!("Not shown at {cols} columns: ")),
            "{out}"
        );
        // One header per column at every width (issue 42): a narrow terminal drops
        // columns, it never renames them.
        let header = out.lines().nth(1).unwrap();
        let heads: Vec<&str> = header.split_whitespace().filter(|w| *w != "│").collect();
        if cols == "100" {
            assert_eq!(
                heads,
                [
                    "POOL",
                    "RESOURCE",
                    "NODES",
                    "CAP",
                    "ALLOCATABLE",
                    "USED",
                    "FREE",
                    "PEND"
                ],
                "{out}"
            );
        } else {
            assert_eq!(
                heads,
                ["POOL", "RESOURCE", "ALLOCATABLE", "FREE", "PEND"],
                "{out}"
            );
            assert!(
                words.contains("Not shown at 80 columns: NODES, CAP, USED, GPUS, USE"),
                "{out}"
            );
        }
        for name in [
            "nvidia.com/NVIDIA_A10-12Q",
            "nvidia.com/GA102GL_A10",
            "ALLOCATABLE",
            "vm-passthrough",
        ] {
            assert!(
                out.contains(name),
                "{name} split or missing at {cols}:\n{out}"
            );
        }
    }
}

#[test]
fn lab_state_csv_and_yaml_carry_the_same_numbers() {
    let nodes = format!("{D}/lab/nodes.json");
    let pods = format!("{D}/lab/pods.json");
    let (rc, out, _) = gpuwl(&["inventory", "--nodes", &nodes, "--pods", &pods, "-o", "csv"]);
    assert_eq!(rc, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "pool,origin,resource,class,nodes,stale_nodes,capacity,allocatable,allocated,free,pending,capacity_gpus,free_gpus,cordoned_free",
            "container,known,nvidia.com/gpu,container-gpu,1,0,4,4,1,3,0,4,3,0",
            "vm-passthrough,known,nvidia.com/GA102GL_A10,passthrough-model,1,0,2,2,1,1,0,2,1,0",
            "vm-vgpu,known,nvidia.com/NVIDIA_A10-12Q,vgpu-type,1,0,4,4,1,3,0,2,1,0",
            "(no pool can serve),,nvidia.com/gpu,container-gpu,0,0,,,,,1,,,",
        ]
    );
    let (rc, y, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
        "-o",
        "yaml",
    ]);
    assert_eq!(rc, 0);
    let doc: Value = serde_saphyr::from_str(&y).unwrap();
    assert_eq!(
        nums(row(&doc, "container", "nvidia.com/gpu")),
        [1, 4, 4, 1, 3, 0]
    );
}

#[test]
fn mixed_cluster_shapes() {
    let doc = json(&[
        "inventory",
        "--nodes",
        &format!("{D}/mixed/nodes.json"),
        "--pods",
        &format!("{D}/mixed/pods.json"),
    ]);
    assert_eq!(doc["nodesRead"], 7);
    assert_eq!(doc["gpuNodes"], 5, "cp-1 and net-1 are in no pool");
    // MIG mixed on the A100: 1 whole GPU + 7 × 1g.10gb; the Succeeded pod holds nothing;
    // queue-2gpu (selector on the A100 product) asks for 2 where dgx-a has 1 allocatable:
    // not pending there (it was counted as PENDING 2), but unservable, see below.
    assert_eq!(
        nums(row(&doc, "container", "nvidia.com/gpu")),
        [1, 1, 1, 0, 1, 0]
    );
    assert_eq!(
        nums(row(&doc, "container", "nvidia.com/mig-1g.10gb")),
        [1, 7, 7, 2, 5, 0]
    );
    assert_eq!(
        row(&doc, "container", "nvidia.com/mig-1g.10gb")["capacityGpus"],
        Value::Null
    );
    // Unlabelled time-sliced T4 node: default pool, marked; 16 units / 4 replicas = 4 GPUs;
    // the sidecar pod takes max(1 + 1 sidecar, 2 init + 1 sidecar) = 3.
    let ts = row(&doc, "container (default: no label)", "nvidia.com/gpu");
    assert_eq!(ts["origin"], "default-no-label");
    assert_eq!(nums(ts), [1, 16, 16, 3, 13, 0]);
    assert_eq!(ts["capacityGpus"], 4.0);
    // Invalid label value: the operator uses container, silently.
    let typo = row(&doc, "container (default: invalid label)", "nvidia.com/gpu");
    assert_eq!(nums(typo), [1, 2, 2, 0, 2, 0]);
    assert!(
        doc["notes"][0]
            .as_str()
            .unwrap()
            .contains("typo-node=\"vm_passthrough\"")
    );
    // Relabelled node: stale nvidia.com/gpu 0 is not advertised.
    let stale = row(&doc, "vm-passthrough", "nvidia.com/gpu");
    assert_eq!(nums(stale), [0, 0, 0, 0, 0, 0]);
    assert_eq!(stale["staleNodes"], serde_json::json!(["pt-t4"]));
    assert_eq!(
        nums(row(&doc, "vm-passthrough", "nvidia.com/TU104GL_TESLA_T4")),
        [1, 4, 4, 1, 3, 0]
    );
    // vGPU: 16 × GRID T4-2Q = 2 T4s (2 GB of 16 GB each).
    let v = row(&doc, "vm-vgpu", "nvidia.com/GRID_T4-2Q");
    assert_eq!(nums(v), [1, 16, 16, 1, 15, 0]);
    assert_eq!(v["capacityGpus"], 2.0);

    let u = doc["unservable"].as_array().unwrap();
    let by_pod = |p: &str| u.iter().find(|x| x["pod"] == p).unwrap();
    let old = by_pod("vms/virt-launcher-old-example");
    assert_eq!(old["cause"], "not-advertised");
    assert_eq!(
        old["didYouMean"],
        serde_json::json!(["nvidia.com/TU104GL_TESLA_T4"])
    );
    let grid = by_pod("vms/virt-launcher-vdi-typo");
    assert_eq!(
        grid["didYouMean"],
        serde_json::json!(["nvidia.com/GRID_T4-2Q"])
    );
    assert_eq!(
        grid["freeOtherNames"],
        serde_json::json!([{"pool": "vm-vgpu", "resource": "nvidia.com/GRID_T4-2Q", "free": 15}])
    );
    // The pod without the vGPU node's toleration is blocked by that taint, not unservable
    // (explain's verdict, issue 34): shown apart, naming the node it is kept from.
    assert!(u.iter().all(|x| x["pod"] != "vms/virt-launcher-vdi-notol"));
    let held = doc["heldBack"].as_array().unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["pod"], "vms/virt-launcher-vdi-notol");
    assert_eq!(held[0]["class"], "blocked");
    assert_eq!(held[0]["code"], "excluded");
    assert_eq!(held[0]["by"], serde_json::json!(["vgpu-t4"]));
    let big = by_pod("ml/queue-2gpu");
    assert_eq!(big["cause"], "too-large");
    assert_eq!(big["units"], 2);
    assert_eq!(
        big["reason"],
        "the allowed nodes have at most 1 allocatable each (a pod's units come from one node)"
    );
    assert_eq!(big["allowedPools"], serde_json::json!(["container"]));
    assert_eq!(big["code"], "too-large");
    assert_eq!(u.len(), 3);
}

#[test]
fn nodes_without_pods_note_it() {
    let doc = json(&["inventory", "--nodes", &format!("{D}/lab/nodes.json")]);
    assert_eq!(
        nums(row(&doc, "container", "nvidia.com/gpu")),
        [1, 4, 4, 0, 4, 0]
    );
    assert!(doc["notes"][0].as_str().unwrap().starts_with("no --pods"));
}

#[test]
fn bad_input_is_one_line_exit_2() {
    for (args, want) in [
        (
            vec![
                "--nodes",
                "lab/nodes.json",
                "--pods",
                "bad/pods-bad-quantity.yaml",
            ],
            "bad/pods-bad-quantity.yaml: items[0] (ml/half): spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: \"500m\" is not a whole number of units",
        ),
        (
            vec![
                "--nodes",
                "lab/nodes.json",
                "--pods",
                "bad/pods-truncated.json",
            ],
            "bad/pods-truncated.json: ",
        ),
        (
            vec![
                "--nodes",
                "lab/nodes.json",
                "--pods",
                "bad/pod-wrong-kind.yaml",
            ],
            "bad/pod-wrong-kind.yaml: kind \"Service\" is not a Pod",
        ),
        (
            vec!["--nodes", "lab/pods.json"],
            "lab/pods.json: items[0]: kind \"Pod\" is not a Node",
        ),
        (vec!["--nodes", "nope.json"], "nope.json: cannot read"),
    ] {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if a.starts_with("--") {
                    a.to_string()
                } else {
                    format!("{D}/{a}")
                }
            })
            .collect();
        let mut full = vec!["inventory".to_string()];
        full.extend(args);
        let out = Command::new(cargo_bin("gpuwl"))
            .args(&full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{full:?}: {err}");
        assert!(out.stdout.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("gpuwl: "), "{err}");
        assert!(err.contains(want), "{full:?}: {err}");
    }
    // --pods needs --nodes: a usage error, also exit 2.
    let (rc, _, _) = gpuwl(&["inventory", "--pods", "x.json"]);
    assert_eq!(rc, 2);
}

#[test]
fn help_has_no_rustdoc_links_or_wrapped_examples() {
    let (rc, help, _) = gpuwl(&["inventory", "--help"]);
    assert_eq!(rc, 0);
    // Was "Pretty JSON of the whole [`Inventory`] (camelCase keys)".
    assert!(
        help.contains("- json: Pretty JSON of the whole inventory (camelCase keys)"),
        "{help}"
    );
    assert!(!help.contains("[`"), "{help}");
    assert!(
        !help.lines().any(|l| l.trim() == "csv"),
        "an example wrapped: {help}"
    );
}

#[test]
fn stdin_twice_is_refused() {
    let (rc, out, err) = gpuwl(&["inventory", "--nodes", "-", "--pods", "-"]);
    assert_eq!(rc, 2, "{err}");
    assert!(out.is_empty());
    assert_eq!(
        err,
        "gpuwl: only one of the dump files can be `-` (stdin is read once)\n"
    );
}

#[test]
fn count_errors_say_what_is_wrong() {
    // A huge whole number used to be reported as "not a whole number of units".
    let dir = tempfile::tempdir().unwrap();
    let n = dir.path().join("n.json");
    std::fs::write(&n, r#"{"kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"4"}}}"#).unwrap();
    for (q, why) in [
        (
            "99999999999999999999999",
            "is too large (over 2^63-1 units)",
        ),
        ("-3", "is negative"),
        ("500m", "is not a whole number of units"),
    ] {
        let p = dir.path().join("p.json");
        std::fs::write(
            &p,
            format!(r#"{{"kind":"Pod","metadata":{{"name":"p","namespace":"d"}},"spec":{{"containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"{q}"}}}}}}]}}}}"#),
        )
        .unwrap();
        let (rc, out, err) = gpuwl(&[
            "inventory",
            "--nodes",
            n.to_str().unwrap(),
            "--pods",
            p.to_str().unwrap(),
        ]);
        assert_eq!(rc, 2, "{err}");
        assert!(out.is_empty());
        assert!(
            err.ends_with(&format!(
                "spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: \"{q}\" {why}\n"
            )),
            "{q}: {err}"
        );
        std::fs::write(&n, format!(r#"{{"kind":"Node","metadata":{{"name":"n1"}},"status":{{"allocatable":{{"nvidia.com/gpu":"{q}"}}}}}}"#)).unwrap();
        // On a node the cell is skipped with that reason; the inventory goes on.
        let (rc, out, err) = gpuwl(&["inventory", "--nodes", n.to_str().unwrap()]);
        assert_eq!(rc, 0, "{err}");
        assert!(
            out.contains(&format!(
                "node n1: status.allocatable[\"nvidia.com/gpu\"]: \"{q}\" {why}"
            )),
            "{q}: {out}"
        );
        std::fs::write(&n, r#"{"kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"4"}}}"#).unwrap();
    }
}

#[test]
fn a_bad_quantity_skips_that_cell_and_the_rest_is_counted() {
    let d = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory");
    let (rc, out, err) = gpuwl(&[
        "inventory",
        "--nodes",
        &format!("{d}/bad/nodes-bad-quantity.json"),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains(
            "skipped (not a valid device count): node gpu-1: status.allocatable[\"nvidia.com/gpu\"]: \"four\" is not a quantity"
        )),
        "{notes:?}"
    );
}

#[test]
fn ignore_resource_leaves_names_out_as_in_check() {
    let d = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory/lab");
    let (rc, out, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &format!("{d}/nodes.json"),
        "--pods",
        &format!("{d}/pods.json"),
        "--ignore-resource",
        "GA102GL_*",
        "-o",
        "csv",
    ]);
    assert_eq!(rc, 0);
    assert!(!out.contains("GA102GL_A10"), "{out}");
    assert!(
        out.contains("vm-passthrough,known,,"),
        "an empty labelled pool keeps its row: {out}"
    );
}

/// Two pending pods that no pool can serve, asking the same name, make one
/// `(no pool can serve)` row with their sum, in the table and in CSV.
#[test]
fn unservable_demand_is_one_row_per_name() {
    let d = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory/lab");
    let mut pods: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{d}/pods.json")).unwrap()).unwrap();
    let items = pods["items"].as_array_mut().unwrap();
    let mut second = items
        .iter()
        .find(|p| p["metadata"]["name"] == "job-cross")
        .expect("job-cross in the lab dump")
        .clone();
    second["metadata"]["name"] = "job-cross-2".into();
    items.push(second);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pods.json");
    std::fs::write(&f, serde_json::to_string(&pods).unwrap()).unwrap();
    let nodes = format!("{d}/nodes.json");
    let out = gpuwl_ok(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        f.to_str().unwrap(),
    ]);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("(no pool can serve)"))
        .collect();
    assert_eq!(rows.len(), 1, "{out}");
    // NODES 0, PENDING 2; no other figure is known for such demand.
    let figures: Vec<&str> = rows[0]
        .split_whitespace()
        .filter(|t| t.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert_eq!(figures, ["0", "2"], "{}", rows[0]);
    // Both pods are still named below the table.
    assert!(out.contains("gpu-vm/job-cross wants") && out.contains("gpu-vm/job-cross-2 wants"));
    let csv = gpuwl_ok(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        f.to_str().unwrap(),
        "-o",
        "csv",
    ]);
    let unserv: Vec<&str> = csv
        .lines()
        .filter(|l| l.starts_with("(no pool can serve)"))
        .collect();
    assert_eq!(
        unserv,
        ["(no pool can serve),,nvidia.com/gpu,container-gpu,0,0,,,,,2,,,"]
    );
}

/// A name removed from a node's status while two bound pods hold it: FREE is 0 (never
/// negative), and the note says which node stopped advertising it and why that matters.
#[test]
fn a_name_removed_under_its_holders_is_explained_not_negative() {
    let d = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory/lab");
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{d}/{f}")).unwrap()).unwrap()
    };
    let mut nodes = read("nodes.json");
    for n in nodes["items"].as_array_mut().unwrap() {
        if n["metadata"]["name"] == "lab-node-1" {
            for field in ["capacity", "allocatable"] {
                n["status"][field]
                    .as_object_mut()
                    .unwrap()
                    .remove("nvidia.com/GA102GL_A10");
            }
        }
    }
    let mut pods = read("pods.json");
    let items = pods["items"].as_array_mut().unwrap();
    let mut second = items
        .iter()
        .find(|p| p["metadata"]["name"] == "vmi-passthrough")
        .expect("vmi-passthrough in the lab dump")
        .clone();
    second["metadata"]["name"] = "vmi-passthrough-2".into();
    items.push(second);
    let dir = tempfile::tempdir().unwrap();
    let (nf, pf) = (dir.path().join("nodes.json"), dir.path().join("pods.json"));
    std::fs::write(&nf, nodes.to_string()).unwrap();
    std::fs::write(&pf, pods.to_string()).unwrap();
    let args = [
        "inventory",
        "--nodes",
        nf.to_str().unwrap(),
        "--pods",
        pf.to_str().unwrap(),
    ];
    let text = gpuwl_ok(&args);
    assert!(
        text.contains(
            "node lab-node-1 no longer advertises nvidia.com/GA102GL_A10 (allocatable 0) while bound pods hold 2"
        ),
        "{text}"
    );
    let json: Value =
        serde_json::from_str(&gpuwl_ok(&[&args[..], &["-o", "json"]].concat())).unwrap();
    let row = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "nvidia.com/GA102GL_A10")
        .expect("a row for the held name");
    assert_eq!(
        (row["free"].as_i64(), row["allocated"].as_i64()),
        (Some(0), Some(2))
    );
    assert_eq!(row["overcommitted"].as_i64(), Some(2));
    // The holders are named (orphaned holders), in the text and in JSON.
    assert!(
        text.contains("note: orphaned holders (orphaned-holder): node lab-node-1 no longer advertises nvidia.com/GA102GL_A10 (not listed) while bound pods hold 2 (its row counts them as allocated, FREE never below 0):"),
        "{text}"
    );
    let o = &json["orphans"][0];
    assert_eq!(
        (&o["node"], &o["resource"], &o["listed"], &o["units"]),
        (
            &json!("lab-node-1"),
            &json!("nvidia.com/GA102GL_A10"),
            &json!(false),
            &json!(2)
        ),
        "{o}"
    );
    assert_eq!(o["holders"][0]["pod"], "gpu-vm/vmi-passthrough");
    assert_eq!(o["holders"].as_array().unwrap().len(), 2, "{o}");
}

/// `-o svg` on the lab's dumps is the picture the README shows (docs/img/lab-inventory.svg),
/// byte for byte: the picture is real output and stays so.
#[test]
fn the_readme_picture_is_the_labs_svg() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/inventory/lab");
    let out = gpuwl_ok(&[
        "inventory",
        "--nodes",
        &format!("{dir}/nodes.json"),
        "--pods",
        &format!("{dir}/pods.json"),
        "-o",
        "svg",
    ]);
    let picture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/img/lab-inventory.svg"
    ))
    .unwrap();
    assert_eq!(
        out, picture,
        "regenerate: gpuwl inventory --nodes tests/data/inventory/lab/nodes.json --pods tests/data/inventory/lab/pods.json -o svg > docs/img/lab-inventory.svg"
    );
    assert!(picture.contains(">vm-passthrough</text>"));
}

/// Issue 47, item 1, offline: a snapshot keeps the VMIs that wait with no launcher pod and
/// the VMs that want to run with no VMI; `inventory --snapshot` counts them as KubeVirt
/// judges them (the lab's vm-cross: not permitted), as a live read does.
#[test]
fn a_snapshot_keeps_the_vms_kubevirt_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let list = |items: &str| format!(r#"{{"apiVersion":"v1","kind":"List","items":[{items}]}}"#);
    let node = r#"{"kind":"Node","metadata":{"name":"lab-node-0","labels":{"nvidia.com/gpu.workload.config":"container"}},"status":{"capacity":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"4"},"allocatable":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"4"}}}"#;
    let gpus = r#"{"domain":{"devices":{"gpus":[{"name":"g","deviceName":"nvidia.com/gpu"}]}}}"#;
    let vmi = format!(
        r#"{{"kind":"VirtualMachineInstance","metadata":{{"name":"vm-cross","namespace":"gpu-vm"}},"spec":{gpus},"status":{{"phase":"Pending"}}}}"#
    );
    // Refused by virt-api: no VMI. And a stopped one: not waiting.
    let vm = |name: &str, run: &str| {
        format!(
            r#"{{"kind":"VirtualMachine","metadata":{{"name":"{name}","namespace":"gpu-vm"}},"spec":{{"runStrategy":"{run}","template":{{"spec":{gpus}}}}}}}"#
        )
    };
    let cr = r#"{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt","namespace":"kubevirt"},"spec":{"configuration":{"permittedHostDevices":{"pciHostDevices":[{"pciVendorSelector":"10DE:2236","resourceName":"nvidia.com/GA102GL_A10","externalResourceProvider":true}]}}}}"#;
    let meta = r#"{"format":"gpuwl.snapshot/v1","gpuwlVersion":"0.1.0","takenAt":"2026-12-06T00:00:00Z","fullPods":false,"collected":{}}"#;
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in [
        ("snapshot.json", meta.to_owned()),
        ("nodes.json", list(node)),
        ("pods.json", list("")),
        ("kubevirt.json", list(cr)),
        ("vmis.json", list(&vmi)),
        (
            "vms.json",
            list(&[vm("refused", "Always"), vm("stopped", "Halted")].join(",")),
        ),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, data.as_bytes()).unwrap();
    }
    let path = dir.path().join("s.tar");
    std::fs::write(&path, b.into_inner().unwrap()).unwrap();
    let doc = json(&["inventory", "--snapshot", path.to_str().unwrap()]);
    let got: Vec<(&str, &str, &str)> = doc["unservable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["pod"].as_str().unwrap(),
                u["kind"].as_str().unwrap(),
                u["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("gpu-vm/vm-cross", "VirtualMachineInstance", "not-permitted"),
            ("gpu-vm/refused", "VirtualMachine", "not-permitted"),
        ],
        "{doc}"
    );
    assert_eq!(doc["pendingPods"], 2, "{doc}");
}

/// Issue 47: `inventory --kubevirt-cr` judges the VMIs of a pod dump as KubeVirt does (the
/// lab's vm-cross asks the container name the CR does not permit: not-permitted, never
/// demand of pool container).
#[test]
fn a_pod_dumps_vmi_is_judged_with_the_kubevirt_cr() {
    let case = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/explain/own-vm-asks-container-name"
    );
    let dir = tempfile::tempdir().unwrap();
    let vmi: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(format!("{case}/vmi.yaml")).unwrap())
            .unwrap();
    let pods = dir.path().join("pods.json");
    std::fs::write(
        &pods,
        json!({"apiVersion": "v1", "kind": "List", "items": [vmi]}).to_string(),
    )
    .unwrap();
    let doc = json(&[
        "inventory",
        "--nodes",
        &format!("{case}/nodes.json"),
        "--pods",
        pods.to_str().unwrap(),
        "--kubevirt-cr",
        &format!("{case}/kubevirt.yaml"),
    ]);
    let u = &doc["unservable"][0];
    assert_eq!(
        (&u["pod"], &u["kind"], &u["code"], &u["cause"]),
        (
            &json!("gpu-vm/vm-cross"),
            &json!("VirtualMachineInstance"),
            &json!("not-permitted"),
            &json!("not-permitted")
        ),
        "{doc}"
    );
    assert_eq!(
        row(&doc, "container", "nvidia.com/gpu")["pending"],
        0,
        "{doc}"
    );
}

/// A VMI and its virt-launcher pod in one `--pods` file (`kubectl get pods,vmis -A -o json`)
/// are one VM: it waits through its launcher pod (3 units, unservable on the lab's 2-unit
/// passthrough node), and the VMI is not counted again as 1 pending unit of the pool
/// (issue 47: every command's VM verdict is explain's; triage judged it so already).
#[test]
fn a_vmi_with_its_launcher_in_the_file_is_counted_once() {
    let out = gpuwl_ok(&[
        "inventory",
        "--nodes",
        &format!("{D}/lab/nodes.json"),
        "--pods",
        &format!("{D}/vm-with-launcher/pods.json"),
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["pendingPods"], 1, "{out}");
    let passthrough = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pool"] == "vm-passthrough")
        .unwrap();
    assert_eq!(passthrough["pending"], 0, "{out}");
    let unservable = v["unservable"].as_array().unwrap();
    assert_eq!(unservable.len(), 1, "{out}");
    assert_eq!(unservable[0]["pod"], "vms/virt-launcher-vm-a-abcde");
    assert_eq!(unservable[0]["units"], 3);
}
