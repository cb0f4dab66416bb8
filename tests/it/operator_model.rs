//! gpuwl's model of the GPU Operator (effective workload, operands per node,
//! `crates/gpuwl-core/src/model/operator.rs`) against the real operator on the local control plane
//! (`gpuwl cluster up --gpu-operator`).
//!
//! One cluster, four ClusterPolicy rounds (sandbox workloads on with each
//! `defaultWorkload`, then off), each with a batch of seeded node combinations: workload
//! label valid / invalid / absent, `nvidia.com/gpu.deploy.<operand>=false` overrides
//! (`operands` included), nodes with and without an NVIDIA GPU (NFD's
//! `feature.node.kubernetes.io/pci-10de.present`), a MIG-capable GPU. Per node, three
//! views must agree:
//! - gpuwl's prediction: `check -o json` on the nodes as created (before the operator ran)
//!   with `--cluster-policy`;
//! - gpuwl live: `check -o json` on the cluster after the operator reconciled;
//! - the operator: the `nvidia.com/gpu.deploy.*` labels it left on the node (the workload
//!   whose set they are, and those at `true`: NVIDIA/gpu-operator
//!   `controllers/state_manager.go` `gpuStateLabels`, `updateGPUStateLabels`), and the
//!   operand pods its DaemonSets run there (each DaemonSet selects nodes by
//!   `nodeSelector: nvidia.com/gpu.deploy.<operand>: "true"`, `assets/state-*/*daemonset.yaml`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use gpuwl::cluster::gpu_operator::{self, PolicySettings};
use gpuwl_core::model::gpusim::GpuHardware;

use crate::kit::{ClusterDown, gpuwl, gpuwl_ok, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-it-opmodel";
const LABEL: &str = "nvidia.com/gpu.workload.config";
const DEPLOY: &str = "nvidia.com/gpu.deploy.";
const SEED: u64 = 23;

/// The workloads' deploy-label sets as the operator writes them (`gpuStateLabels`).
fn state_set(w: &str) -> &'static [&'static str] {
    match w {
        "container" => &[
            "driver",
            "gpu-feature-discovery",
            "container-toolkit",
            "device-plugin",
            "dcgm",
            "dcgm-exporter",
            "node-status-exporter",
            "operator-validator",
        ],
        "vm-passthrough" => &[
            "sandbox-device-plugin",
            "sandbox-validator",
            "vfio-manager",
            "kata-manager",
            "cc-manager",
        ],
        _ => &[
            "sandbox-device-plugin",
            "vgpu-manager",
            "vgpu-device-manager",
            "sandbox-validator",
            "cc-manager",
        ],
    }
}

/// A small deterministic generator (64-bit LCG, Knuth's constants).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// The labels of node `i` of a round: the first nine cover every kind once, the rest are
/// drawn from `rng`.
fn node_labels(i: usize, rng: &mut Lcg) -> BTreeMap<String, String> {
    const LABELS: [Option<&str>; 7] = [
        Some("container"),
        Some("vm-passthrough"),
        Some("vm-vgpu"),
        Some("vm_passthrough"),
        Some("Container"),
        None,
        None,
    ];
    const ALL_OPS: [&str; 11] = [
        "driver",
        "device-plugin",
        "dcgm-exporter",
        "operator-validator",
        "vfio-manager",
        "sandbox-device-plugin",
        "sandbox-validator",
        "vgpu-manager",
        "vgpu-device-manager",
        "kata-manager",
        "operands",
    ];
    // (gpu: 0 none (NFD labels without the GPU one), 1 A10, 2 A100, 3 no NFD label at
    // all, 4 only NFD's PCI-class variant `pci-0302_10de.present`; label; override)
    let (gpu, label, over): (usize, Option<&str>, Option<&str>) = match i {
        0 => (1, Some("container"), None),
        1 => (1, Some("vm-passthrough"), None),
        2 => (1, Some("vm-vgpu"), None),
        3 => (1, Some("vm_passthrough"), None),
        4 => (1, None, None),
        5 => (1, Some("vm-passthrough"), Some("operands")),
        6 => (0, Some("vm-passthrough"), None),
        7 => (0, None, None),
        8 => (2, None, Some("driver")),
        // Issue 35 (6a): a workload label and nothing of a GPU; the class variant alone.
        9 => (3, Some("vm-passthrough"), None),
        10 => (3, Some("Container"), None),
        11 => (4, Some("vm-vgpu"), None),
        // Issue 35 (6b): a vm-vgpu label under operands=false (the fix lifts it).
        12 => (1, Some("vm-vgpu"), Some("operands")),
        _ => (
            [0, 1, 1, 1, 2, 3, 4][rng.next(7)],
            LABELS[rng.next(LABELS.len())],
            [None, None, Some(ALL_OPS[rng.next(ALL_OPS.len())])][rng.next(3)],
        ),
    };
    let mut l = BTreeMap::new();
    if gpu == 3 {
        // Never seen by NFD: the workload label (or an override) alone.
        if let Some(v) = label {
            l.insert(LABEL.into(), v.into());
        }
        if let Some(op) = over {
            l.insert(format!("{DEPLOY}{op}"), "false".into());
        }
        return l;
    }
    if gpu == 4 {
        l.insert(
            "feature.node.kubernetes.io/pci-0302_10de.present".into(),
            "true".into(),
        );
    }
    // Every other node was seen by NFD (kernel and OS labels); GPU nodes also carry its
    // PCI label.
    l.insert(
        "feature.node.kubernetes.io/kernel-version.full".into(),
        "5.15.0-125-generic".into(),
    );
    l.insert(
        "feature.node.kubernetes.io/system-os_release.ID".into(),
        "ubuntu".into(),
    );
    l.insert(
        "feature.node.kubernetes.io/system-os_release.VERSION_ID".into(),
        "22.04".into(),
    );
    if gpu == 1 || gpu == 2 {
        let hw = if gpu == 2 {
            GpuHardware {
                product: "NVIDIA-A100-SXM4-40GB".into(),
                pci_device_id: 0x20b0,
                count: 2,
                memory_mib: 40960,
                ..GpuHardware::a10(2)
            }
        } else {
            GpuHardware::a10(2)
        };
        l.extend(hw.labels().0);
    }
    if let Some(v) = label {
        l.insert(LABEL.into(), v.into());
    }
    if let Some(op) = over {
        l.insert(format!("{DEPLOY}{op}"), "false".into());
    }
    l
}

/// What the operator did on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    /// The workload whose deploy-label set the node carries (`None`: no deploy label).
    workload: Option<String>,
    /// Deploy labels at `true`.
    operands: BTreeSet<String>,
}

/// The operator's work on a node from its labels: the workload is the one whose set the
/// deploy labels at `true` belong to (a user's `false` left on a node the operator does not
/// manage says nothing).
fn observe(labels: &BTreeMap<String, String>) -> Observed {
    let keys: BTreeSet<&str> = labels
        .iter()
        .filter(|(_, v)| *v == "true")
        .filter_map(|(k, _)| k.strip_prefix(DEPLOY))
        .filter(|k| *k != "operands" && *k != "mig-manager")
        .collect();
    let workload = (!keys.is_empty())
        .then(|| {
            ["container", "vm-passthrough", "vm-vgpu"]
                .into_iter()
                .filter(|w| keys.iter().all(|k| state_set(w).contains(k)))
                .collect::<Vec<_>>()
        })
        .map(|ws| match ws.as_slice() {
            [one] => one.to_string(),
            // Only the shared ones (sandbox-device-plugin, ...) left: ambiguous.
            _ => format!("ambiguous {keys:?}"),
        });
    let operands = labels
        .iter()
        .filter(|(k, v)| k.starts_with(DEPLOY) && *v == "true")
        .map(|(k, _)| k[DEPLOY.len()..].to_string())
        .filter(|k| k != "operands")
        .collect();
    Observed { workload, operands }
}

/// gpuwl's view per node of a `check -o json` document: effective workload and operands.
fn reported(doc: &Value) -> BTreeMap<String, Observed> {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                Observed {
                    workload: n["effectiveWorkload"].as_str().map(str::to_string),
                    operands: n["operands"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|o| o.as_str().unwrap().to_string())
                        .collect(),
                },
            )
        })
        .collect()
}

fn check_json(args: &[&str]) -> Value {
    let (rc, out, err) = gpuwl(args);
    assert!(rc == 0 || rc == 1, "{args:?}: rc {rc}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// Per node: the operands whose pods run there (the operand is the `gpu.deploy.<x>` key
/// of the owning DaemonSet's nodeSelector), and the set of operands that have a
/// DaemonSet at all.
async fn operand_pods(
    client: &kube::Client,
) -> (BTreeMap<String, BTreeSet<String>>, BTreeSet<String>) {
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), gpu_operator::NAMESPACE);
    let mut operand_of = BTreeMap::new();
    for d in ds.list(&ListParams::default()).await.unwrap().items {
        let sel = d
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default();
        if let Some(op) = sel
            .iter()
            .find_map(|(k, v)| (v == "true").then(|| k.strip_prefix(DEPLOY)).flatten())
        {
            operand_of.insert(d.metadata.name.clone().unwrap(), op.to_string());
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), gpu_operator::NAMESPACE);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let owner = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "DaemonSet")
            .map(|o| o.name.clone());
        if let (Some(node), Some(op)) = (node, owner.and_then(|o| operand_of.get(&o))) {
            out.entry(node).or_default().insert(op.clone());
        }
    }
    (out, operand_of.into_values().collect())
}

/// The findings of node `name` in a `check -o json` document.
fn findings_of(doc: &Value, name: &str) -> Vec<Value> {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {doc}"))["findings"]
        .as_array()
        .unwrap()
        .clone()
}

/// Issue 35's findings against what the operator did (`settled`: per node, the workload
/// whose deploy labels it left):
/// - 6a: a node NFD never saw and where nothing else shows a GPU is no GPU node
///   (`gpuNode` absent) and has no error, predicted and live; the operator deployed
///   nothing there (compared by the caller);
/// - 6b: with sandbox workloads off no label is read: no `invalid-label-value`, and an
///   invalid label on a GPU node is `label-ignored`;
/// - 6c: where sandbox workloads are on, `invalid-label-value` names the workload the
///   operator actually applied (the ClusterPolicy's `defaultWorkload`).
fn issue_35_findings(
    predicted: &Value,
    live: &Value,
    specs: &[(String, BTreeMap<String, String>)],
    settled: &BTreeMap<String, Observed>,
    enabled: bool,
) {
    for doc in [predicted, live] {
        for n in doc["nodes"].as_array().unwrap() {
            let name = n["name"].as_str().unwrap();
            let Some((_, labels)) = specs.iter().find(|(s, _)| s == name) else {
                continue;
            };
            let findings = n["findings"].as_array().unwrap();
            let code = |c: &str| findings.iter().find(|f| f["code"] == c);
            if !labels
                .keys()
                .any(|k| k.starts_with("feature.node.kubernetes.io/"))
            {
                assert!(n.get("gpuNode").is_none(), "{name}: {n}");
                assert!(
                    findings.iter().all(|f| f["severity"] != "error"),
                    "{name}: {n}"
                );
                assert!(code("label-without-gpu").is_some(), "{name}: {n}");
            }
            let invalid = labels
                .get(LABEL)
                .is_some_and(|v| !["container", "vm-passthrough", "vm-vgpu"].contains(&v.as_str()));
            if !enabled {
                assert!(code("invalid-label-value").is_none(), "{name}: {n}");
                if invalid && n["operatorScope"] != "no-gpu" {
                    assert!(code("label-ignored").is_some(), "{name}: {n}");
                }
            } else if let Some(f) = code("invalid-label-value")
                && n["operatorScope"] == "operands"
            {
                let applied = settled[name].workload.clone().unwrap();
                assert!(
                    f["message"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("sandboxWorkloads.defaultWorkload ({applied})")),
                    "{name}: the operator applied {applied}: {f}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs local control plane"]
fn the_operator_deploys_what_gpuwl_says_for_every_combination() {
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let kubeconfig = crate::kit::own_cluster(CLUSTER, &["--gpu-operator", "--nodes", "0"]);
    let dist = gpu_operator::dist_dir();
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt
        .block_on(gpuwl::cluster::client(
            std::path::Path::new(&kubeconfig),
            None,
        ))
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let mut rng = Lcg(SEED);
    // (sandbox workloads enabled, defaultWorkload, flip): a flip round keeps the previous
    // round's nodes as the operator left them and only changes the ClusterPolicy — what
    // "set sandboxWorkloads.enabled=true" does to a running cluster (issue 35, 6d).
    let rounds = [
        (true, "container", false),
        (true, "vm-passthrough", false),
        (true, "vm-vgpu", false),
        (false, "vm-passthrough", false),
        (true, "vm-passthrough", true),
    ];
    let mut combinations = 0;
    let mut seen_kinds = BTreeSet::new();
    let mut previous: Vec<String> = Vec::new();
    for (round, (enabled, default, flip)) in rounds.into_iter().enumerate() {
        let settings = PolicySettings {
            sandbox_enabled: enabled,
            default_workload: Some(default.into()),
        };
        let policy = gpu_operator::policy_object(&dist, &settings).unwrap();
        let policy_file = tmp.path().join(format!("policy-{round}.json"));
        std::fs::write(&policy_file, policy.to_string()).unwrap();
        let specs: Vec<(String, BTreeMap<String, String>)> = if flip {
            // The previous round's nodes with the labels the operator left on them.
            rt.block_on(async {
                let mut out = Vec::new();
                for n in &previous {
                    let node = nodes.get(n).await.unwrap();
                    out.push((n.clone(), node.metadata.labels.unwrap_or_default()));
                }
                out
            })
        } else {
            (0..15)
                .map(|i| (format!("om{round}-{i:02}"), node_labels(i, &mut rng)))
                .collect()
        };
        combinations += specs.len();
        rt.block_on(async {
            if !flip {
                for n in previous.drain(..) {
                    let _ = nodes.delete(&n, &DeleteParams::default()).await;
                }
            }
            gpu_operator::apply_policy(&client, &dist, &settings)
                .await
                .unwrap();
            for (name, labels) in specs.iter().filter(|_| !flip) {
                gpuwl::cluster::nodes::ensure_sim_node(&client, name)
                    .await
                    .unwrap();
                nodes
                    .patch(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"labels": labels}})),
                    )
                    .await
                    .unwrap();
            }
        });
        previous = specs.iter().map(|(n, _)| n.clone()).collect();

        // gpuwl's prediction from the nodes as created.
        let dump = json!({"apiVersion": "v1", "kind": "List", "items": specs.iter().map(|(name, labels)| json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"capacity": {"cpu": "32"}, "allocatable": {"cpu": "32"}}
        })).collect::<Vec<_>>()});
        let dump_file = tmp.path().join(format!("nodes-{round}.json"));
        std::fs::write(&dump_file, dump.to_string()).unwrap();
        let predicted_doc = check_json(&[
            "check",
            dump_file.to_str().unwrap(),
            "--cluster-policy",
            policy_file.to_str().unwrap(),
            "-o",
            "json",
        ]);
        let predicted = reported(&predicted_doc);

        // Wait until the operator's labels and its pods match the prediction on every
        // node (then twice more, 3 s apart, so a late reconcile is seen), or time out and
        // report every difference.
        let deadline = Instant::now() + Duration::from_secs(150);
        let mut stable = 0;
        let mut settled_pods: BTreeMap<String, BTreeSet<String>>;
        let mut settled_work: BTreeMap<String, Observed> = BTreeMap::new();
        loop {
            let (live_nodes, (pods, with_ds)) = rt.block_on(async {
                (
                    nodes.list(&ListParams::default()).await.unwrap().items,
                    operand_pods(&client).await,
                )
            });
            let mut diffs = Vec::new();
            let mut with_pods = 0;
            for (name, _) in &specs {
                let n = live_nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(name))
                    .unwrap();
                let labels = n.metadata.labels.clone().unwrap_or_default();
                let seen = observe(&labels);
                settled_work.insert(name.clone(), seen.clone());
                let want = predicted.get(name).cloned().unwrap_or(Observed {
                    workload: None,
                    operands: BTreeSet::new(),
                });
                if seen != want {
                    diffs.push(format!(
                        "{name}: gpuwl predicts {want:?}, the operator left {seen:?}"
                    ));
                }
                let running = pods.get(name).cloned().unwrap_or_default();
                with_pods += usize::from(!running.is_empty());
                let expected: BTreeSet<String> =
                    want.operands.intersection(&with_ds).cloned().collect();
                if running != expected {
                    diffs.push(format!(
                        "{name}: operand pods {running:?}, expected {expected:?} (DaemonSets for {with_ds:?})"
                    ));
                }
            }
            // The GPU nodes run operand pods (5 of the 9 fixed kinds at least). Until the
            // operator has created its DaemonSets nothing is expected anywhere, so fewer is
            // a difference to wait out, not a verdict.
            if diffs.is_empty() && with_pods < 5 {
                diffs.push(format!(
                    "operand pods on {with_pods} nodes (DaemonSets for {with_ds:?}), 5 expected at least"
                ));
                diffs.push(String::new());
            }
            if diffs.is_empty() {
                settled_pods = pods;
                stable += 1;
                if stable == 3 {
                    break;
                }
                std::thread::sleep(Duration::from_secs(3));
                continue;
            }
            stable = 0;
            assert!(
                Instant::now() < deadline,
                "round {round} (sandboxWorkloads.enabled={enabled}, defaultWorkload={default}): {} node(s) differ:\n{}",
                diffs.len() / 2,
                diffs.join("\n")
            );
            std::thread::sleep(Duration::from_millis(1000));
        }

        // gpuwl live on the reconciled cluster says the same as its prediction.
        let live_doc = check_json(&["check", "--kubeconfig", &kubeconfig, "-o", "json"]);
        let live = reported(&live_doc);
        // Operand health, live: every GPU node with a workload lists the operand pods its
        // DaemonSets run there (kwok reports them Running and Ready).
        assert_eq!(live_doc["operandPods"]["status"], "cluster", "{live_doc}");
        assert!(
            live_doc["clusterPolicy"]["policy"]["state"].is_string(),
            "{}",
            live_doc["clusterPolicy"]
        );
        for n in live_doc["nodes"].as_array().unwrap() {
            let name = n["name"].as_str().unwrap();
            if !specs.iter().any(|(s, _)| s == name) || n["effectiveWorkload"].is_null() {
                continue;
            }
            let listed: BTreeSet<String> = n["operandPods"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: no operandPods: {n}"))
                .iter()
                .map(|p| {
                    assert_eq!(p["health"], "ready", "{name}: {p}");
                    p["operand"].as_str().unwrap().to_string()
                })
                .collect();
            assert_eq!(
                Some(&listed),
                settled_pods.get(name).or(Some(&BTreeSet::new())),
                "{name}: operandPods vs the DaemonSets' pods"
            );
        }
        let inv: Value = serde_json::from_str(&gpuwl_ok(&[
            "inventory",
            "--kubeconfig",
            &kubeconfig,
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(
            inv["operands"]["source"]["status"], "cluster",
            "{}",
            inv["operands"]
        );
        assert_eq!(inv["operands"]["notReady"], 0, "{}", inv["operands"]);
        for (name, labels) in &specs {
            let want = predicted.get(name);
            let got = live.get(name);
            let gpu = labels.contains_key("feature.node.kubernetes.io/pci-10de.present");
            if gpu {
                assert!(
                    got.is_some(),
                    "{name}: a GPU node missing from check -o json"
                );
            }
            assert_eq!(
                got.map(|o| (&o.workload, &o.operands)),
                want.map(|o| (&o.workload, &o.operands)),
                "{name}: live vs predicted"
            );
            seen_kinds.insert((
                gpu,
                labels.get(LABEL).map(|v| {
                    if ["container", "vm-passthrough", "vm-vgpu"].contains(&v.as_str()) {
                        "valid"
                    } else {
                        "invalid"
                    }
                }),
                labels.keys().any(|k| k.starts_with(DEPLOY)),
                enabled,
            ));
        }
        issue_35_findings(&predicted_doc, &live_doc, &specs, &settled_work, enabled);

        // Issue 35 (6b): sandbox workloads off, a vm-vgpu label under operands=false:
        // gpuwl's fix (remove operands=false) warns that the container stack comes, and
        // the real operator puts exactly that stack there once the fix is applied.
        if !enabled {
            let fixed = format!("om{round}-12");
            let f = findings_of(&predicted_doc, &fixed);
            let disabled = f
                .iter()
                .find(|f| f["code"] == "operands-disabled")
                .unwrap_or_else(|| panic!("{fixed}: {f:?}"));
            assert!(
                disabled["message"].as_str().unwrap().contains(
                    "— but that deploys the container operands (ClusterPolicy cluster-policy has sandboxWorkloads.enabled=false, so the operator reads no workload label), not the vm-vgpu ones"
                ),
                "{disabled}"
            );
            assert!(
                f.iter().any(|f| f["code"] == "label-ignored"),
                "{fixed}: {f:?}"
            );
            rt.block_on(nodes.patch(
                &fixed,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"nvidia.com/gpu.deploy.operands": null}}}),
                ),
            ))
            .unwrap();
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let labels = rt
                    .block_on(nodes.get(&fixed))
                    .unwrap()
                    .metadata
                    .labels
                    .unwrap_or_default();
                let seen = observe(&labels);
                if seen.workload.as_deref() == Some("container") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{fixed}: after the fix the operator left {seen:?}"
                );
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    assert!(combinations >= 20);
    // Every kind was met: with/without GPU, label valid/invalid/absent, overrides, and
    // both sandbox settings.
    assert!(seen_kinds.len() >= 10, "{seen_kinds:?}");
}
