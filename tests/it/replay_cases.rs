//! The explain cases of tests/data/explain replayed on the real kube-scheduler (issue 35:
//! facts explain used to leave unused, and the kinds of fixes it gets wrong, each tried
//! where the scheduler decides). Each case's nodes (labels, taints, cordon, allocatable),
//! its bound pods and its target pod are made on the local control plane by the
//! differential harness ([`harness::run_round`]): gpuwl explains the target from the
//! cluster as it then is, the scheduler decides, and they must agree as in the random
//! differential (outcome, the scheduler's reasons and their counts, one verdict everywhere),
//! the cause code must be the one the case's expect.json names, and a fix explain calls
//! sufficient must get the pod bound when applied for real.
//!
//! A case is replayed when its target is a pod that has not run yet and its situation can
//! be made here: no DRA objects or KubeVirt CR (the harness makes nodes and pods only) and
//! every node Ready without a `not-ready`/`unreachable` taint (kwok makes every node Ready).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::differential::harness;
use crate::kit::{ClusterDown, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-it-replay";
const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/explain");

/// Fields the API server sets or that would tie a pod to objects the replay lacks
/// (an owner the garbage collector would find missing).
const POD_DROP: [&str; 6] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "ownerReferences",
    "managedFields",
    "generateName",
];

fn items(path: &Path) -> Vec<Value> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Why a case cannot be replayed here (`None`: it can).
fn not_replayable(dir: &Path, nodes: &[Value]) -> Option<&'static str> {
    if !dir.join("pod.yaml").exists() {
        return Some("the target is a VM or VMI");
    }
    if dir.join("dra.yaml").exists() || dir.join("kubevirt.yaml").exists() {
        return Some("DRA objects or a KubeVirt CR");
    }
    let unhealthy = nodes.iter().any(|n| {
        let tainted = n["spec"]["taints"].as_array().is_some_and(|ts| {
            ts.iter().any(|t| {
                matches!(
                    t["key"].as_str(),
                    Some("node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable")
                )
            })
        });
        let not_ready = n["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] != "True")
        });
        tainted || not_ready
    });
    unhealthy.then_some("a node that is not Ready")
}

/// The case in `dir` as one harness round (`id` makes names unique: node names get the
/// prefix `r<id>-` wherever they appear, the pods the namespace `replay-<id>`).
fn round(dir: &Path, id: usize) -> Result<harness::Round, &'static str> {
    let nodes = items(&dir.join("nodes.json"));
    if let Some(why) = not_replayable(dir, &nodes) {
        return Err(why);
    }
    let pods = if dir.join("pods.json").exists() {
        items(&dir.join("pods.json"))
    } else {
        Vec::new()
    };
    let target: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("pod.yaml")).unwrap()).unwrap();
    if matches!(
        target["status"]["phase"].as_str(),
        Some("Running" | "Failed" | "Succeeded")
    ) {
        // What happened to it after the scheduler (kubelet admission) is the case.
        return Err("the target already ran: a replay makes a new pod");
    }
    let names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    // Node names as JSON strings, longest first (no name is a prefix of a replaced one).
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let rename = |v: &Value| -> Value {
        let mut text = v.to_string();
        for n in &sorted {
            text = text.replace(&format!("\"{n}\""), &format!("\"r{id}-{n}\""));
        }
        serde_json::from_str(&text).unwrap()
    };
    let namespace = format!("replay-{id}");
    let clean_pod = |p: &Value| -> Value {
        let mut p = rename(p);
        if let Some(m) = p["metadata"].as_object_mut() {
            for f in POD_DROP {
                m.remove(f);
            }
        }
        p["metadata"]["namespace"] = json!(namespace);
        p.as_object_mut().unwrap().remove("status");
        p
    };
    let nodes = nodes
        .iter()
        .map(|n| {
            let n = rename(n);
            let res: BTreeMap<String, String> = n["status"]["allocatable"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            let manifest = json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": n["metadata"]["name"],
                    "labels": n["metadata"]["labels"],
                    "annotations": n["metadata"]["annotations"],
                },
                "spec": n["spec"],
            });
            (manifest, res)
        })
        .collect();
    let bound = pods
        .iter()
        .filter(|p| {
            p["spec"]["nodeName"].is_string()
                && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        })
        .map(clean_pod)
        .collect();
    let mut target = clean_pod(&target);
    target["spec"].as_object_mut().unwrap().remove("nodeName");
    Ok(harness::Round {
        id,
        namespace,
        nodes,
        bound,
        targets: vec![target],
    })
}

#[test]
#[ignore = "needs local control plane"]
fn the_explain_cases_agree_with_the_scheduler_when_replayed() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let kubeconfig = crate::kit::own_cluster(CLUSTER, &["--nodes", "0"]);
    let mut dirs: Vec<_> = std::fs::read_dir(CASES)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expect.json").exists())
        .collect();
    dirs.sort();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt
        .block_on(gpuwl::cluster::client(Path::new(&kubeconfig), None))
        .unwrap();
    let (mut replayed, mut skipped, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for (id, dir) in dirs.iter().enumerate() {
        let case = dir.file_name().unwrap().to_string_lossy().into_owned();
        let r = match round(dir, id) {
            Ok(r) => r,
            Err(why) => {
                skipped.push(format!("{case} ({why})"));
                continue;
            }
        };
        let expect: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expect.json")).unwrap())
                .unwrap();
        let o = rt
            .block_on(harness::run_round(&client, &r))
            .unwrap_or_else(|e| panic!("{case}: {e}"))
            .remove(0);
        let fix_ok = o
            .fix
            .as_ref()
            .is_none_or(|x| (!x.sufficient || x.bound) && x.harm.is_empty());
        let code_ok = o.code.to_string() == expect["code"].as_str().unwrap_or_default();
        replayed.push(format!(
            "{case}: {} {}",
            if o.placed { "placed" } else { "pending" },
            o.code
        ));
        if !(o.outcome_ok && o.reasons_ok && o.causes_ok && o.consistent && fix_ok && code_ok) {
            bad.push(format!(
                "{case}: placed={} code={} (expect {}) codes={:?} {}\n  scheduler: {}\n  predicted {:?}\n  actual    {:?}\n  fix {:?}",
                o.placed,
                o.code,
                expect["code"],
                o.codes,
                o.inconsistency,
                o.message,
                o.predicted,
                o.actual,
                o.fix.as_ref().map(|x| (x.sufficient, x.bound, &x.harm, &x.message, &x.actions))
            ));
        }
    }
    eprintln!(
        "replayed {} case(s):\n  {}\nskipped {}:\n  {}",
        replayed.len(),
        replayed.join("\n  "),
        skipped.len(),
        skipped.join("\n  ")
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The kind-5 cases (issue 35) are among those replayed.
    for case in [
        "own-vgpu-config-failed-beside-full-node",
        "own-mig-config-failed-beside-full-node",
        "own-device-plugin-untolerated-taint",
        "own-no-operator-no-label-hint",
    ] {
        assert!(
            replayed.iter().any(|r| r.starts_with(&format!("{case}:"))),
            "{case} not replayed: {skipped:?}"
        );
    }
    assert!(replayed.len() >= 15, "{replayed:?}");
}
