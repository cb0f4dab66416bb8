//! The differential test of `explain` against the real kube-scheduler: a seeded generator
//! of random situations (2-6 kwok nodes with random workload labels, GPU names and counts,
//! stale zeros, cpu/memory/pod limits, taints and cordons; pods bound to them; target pods
//! with random GPU requests, cpu/memory, init and sidecar containers, nodeSelector,
//! required affinity, tolerations), run on a local control plane.
//!
//! For each target, explain's file-mode verdict is taken first — from the nodes and pods
//! listed just before, serialized as `kubectl get -o json` would write them and read back
//! by gpuwl's dump readers — then the pod is created and the scheduler's decision read
//! (PodScheduled True, or False with its message). Compared:
//! - outcome: the scheduler binds the pod ⇔ explain's causeCode is `fits-now`; a manifest
//!   the API server refuses ⇔ `invalid-spec`;
//! - reasons: the scheduler's histogram (`N <reason>` per node) against the one gpuwl
//!   predicts from its filters (`Explanation::filters`);
//! - causes: every reason family the scheduler names has a code in `causeCodes`
//!   (placement → `excluded`/`node-conditions`; cpu/memory/pods/… → `other-resource`;
//!   `Insufficient <extended>` → a GPU code, or the code that explains the nodes which do
//!   advertise the name — `excluded`, `other-resource` — since that reason also comes
//!   from every node without the name, which is no cause of its own).
//!
//! Rounds: one namespace and one set of nodes per round, `targets` target pods created one
//! after another (earlier placed ones stay and hold their units, as in a real cluster),
//! then the namespace and nodes are deleted. Shared by `tests/it/differential.rs` (the
//! `--ignored` test) and `bench/differential.rs` (thousands of scenarios).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use gpuwl_core::analysis::diagnosis::CauseCode;
use gpuwl_core::analysis::explain::{self, Explanation};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// splitmix64: a small seeded generator (no dependency; the same seed gives the same
/// scenarios on every machine).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() % 10_000) as f64 / 10_000.0 < p
    }
    /// One element.
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

const WORKLOAD: &str = "nvidia.com/gpu.workload.config";
/// GPU names per workload config, and a MIG name.
const CONTAINER_GPU: &str = "nvidia.com/gpu";
const PASSTHROUGH: &str = "nvidia.com/GA102GL_A10";
const VGPU: &str = "nvidia.com/NVIDIA_A10-12Q";
const MIG: &str = "nvidia.com/mig-1g.10gb";
const NAMES: [&str; 4] = [CONTAINER_GPU, PASSTHROUGH, VGPU, MIG];

/// One round: nodes, pods bound to them, and the targets to schedule one by one.
#[derive(Debug, Clone)]
pub struct Round {
    /// Round number (names are unique per round).
    pub id: usize,
    /// Namespace of the round's pods.
    pub namespace: String,
    /// Node manifests (metadata + spec) and their status resources.
    pub nodes: Vec<(Value, BTreeMap<String, String>)>,
    /// Pods with `spec.nodeName` set (bypass the scheduler).
    pub bound: Vec<Value>,
    /// Target pods, created in order.
    pub targets: Vec<Value>,
}

fn quantity_pick(rng: &mut Rng, v: &[&str]) -> String {
    rng.pick(v).to_string()
}

/// Generates round `id` from `rng`.
pub fn generate(rng: &mut Rng, id: usize, targets: usize) -> Round {
    let namespace = format!("diff-{id}");
    let n_nodes = 2 + rng.below(5);
    let mut nodes = Vec::new();
    let taints_menu = [
        json!({"key": "nvidia.com/gpu", "effect": "NoSchedule"}),
        json!({"key": "dedicated", "value": "ml", "effect": "NoExecute"}),
        json!({"key": "sku", "value": "gpu", "effect": "NoSchedule"}),
        json!({"key": "soft", "value": "x", "effect": "PreferNoSchedule"}),
    ];
    let mut names: Vec<String> = Vec::new();
    for i in 0..n_nodes {
        let name = format!("d{id}-n{i}");
        names.push(name.clone());
        let mut labels = json!({
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "type": "kwok",
            "zone": rng.pick(&["a", "b"]).to_string(),
        });
        let workload = *rng.pick(&[
            "container",
            "vm-passthrough",
            "vm-vgpu",
            "none",
            "Container",
        ]);
        if workload != "none" {
            labels[WORKLOAD] = json!(workload);
        }
        let mut res: BTreeMap<String, String> = BTreeMap::new();
        res.insert("cpu".into(), quantity_pick(rng, &["2", "4", "8", "16"]));
        res.insert(
            "memory".into(),
            quantity_pick(rng, &["4Gi", "8Gi", "16Gi", "32Gi", "64Gi"]),
        );
        res.insert(
            "pods".into(),
            quantity_pick(rng, &["1", "2", "3", "5", "110"]),
        );
        res.insert("ephemeral-storage".into(), "100Gi".into());
        let gpu_name = match workload {
            "container" | "Container" => {
                if rng.chance(0.2) {
                    MIG
                } else {
                    CONTAINER_GPU
                }
            }
            "vm-passthrough" => PASSTHROUGH,
            "vm-vgpu" => VGPU,
            _ => "",
        };
        if !gpu_name.is_empty() && !rng.chance(0.1) {
            res.insert(gpu_name.into(), (1 + rng.below(8)).to_string());
        }
        if rng.chance(0.3) {
            // A stale zero of another name (a relabelled node).
            let stale = *rng.pick(&NAMES);
            res.entry(stale.into()).or_insert_with(|| "0".into());
        }
        let mut spec = json!({});
        if rng.chance(0.25) {
            let t = rng.pick(&taints_menu).clone();
            spec["taints"] = json!([t]);
        }
        if rng.chance(0.1) {
            spec["unschedulable"] = json!(true);
        }
        nodes.push((
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "spec": spec
            }),
            res,
        ));
    }
    let mut bound = Vec::new();
    for j in 0..rng.below(7) {
        let (n, res) = &nodes[rng.below(nodes.len())];
        let node = n["metadata"]["name"].as_str().unwrap().to_owned();
        let mut limits = json!({});
        let mut requests = json!({});
        if let Some((g, q)) = res
            .iter()
            .find(|(k, v)| k.starts_with("nvidia.com/") && v.as_str() != "0")
            && rng.chance(0.7)
        {
            let have: i64 = q.parse().unwrap_or(1);
            limits[g] = json!((1 + rng.below(have as usize)).to_string());
        } else if let Some((g, _)) = res
            .iter()
            .find(|(k, v)| k.starts_with("nvidia.com/") && v.as_str() == "0")
            && rng.chance(0.5)
        {
            // A relabel under a bound pod: it still holds the name its node now lists
            // with "0" (an orphaned holder; the scheduler counts its units as requested).
            limits[g] = json!("1");
        }
        if rng.chance(0.7) {
            requests["cpu"] = json!(rng.pick(&["500m", "1", "2", "3"]).to_string());
            requests["memory"] = json!(rng.pick(&["1Gi", "2Gi", "4Gi", "8Gi"]).to_string());
        }
        bound.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("bound-{j}"), "namespace": namespace},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x",
                     "resources": {"limits": limits, "requests": requests}}]}
        }));
    }
    let mut out = Vec::new();
    for t in 0..targets {
        out.push(target(rng, &namespace, t, &names));
    }
    Round {
        id,
        namespace,
        nodes,
        bound,
        targets: out,
    }
}

fn resources(rng: &mut Rng, gpu: Option<(&str, usize)>, invalid: bool) -> Value {
    let mut limits = json!({});
    let mut requests = json!({});
    if let Some((g, n)) = gpu {
        if invalid {
            requests[g] = json!(n.to_string());
        } else if rng.chance(0.2) {
            requests[g] = json!(n.to_string());
            limits[g] = json!(n.to_string());
        } else {
            limits[g] = json!(n.to_string());
        }
    }
    if rng.chance(0.8) {
        let cpu = rng
            .pick(&["100m", "500m", "2", "3500m", "6", "12"])
            .to_string();
        let mem = rng
            .pick(&["256Mi", "1Gi", "6Gi", "20Gi", "40Gi"])
            .to_string();
        if rng.chance(0.2) {
            // Limits only: requests default to them.
            limits["cpu"] = json!(cpu);
            limits["memory"] = json!(mem);
        } else {
            requests["cpu"] = json!(cpu);
            requests["memory"] = json!(mem);
        }
    }
    json!({"limits": limits, "requests": requests})
}

fn target(rng: &mut Rng, ns: &str, t: usize, nodes: &[String]) -> Value {
    let gpu = *rng.pick(&[
        CONTAINER_GPU,
        CONTAINER_GPU,
        CONTAINER_GPU,
        PASSTHROUGH,
        VGPU,
        MIG,
    ]);
    let units = 1 + rng.below(3);
    let invalid = rng.chance(0.03);
    let mut containers = vec![json!({"name": "main", "image": "x",
        "resources": resources(rng, Some((gpu, units)), invalid)})];
    if rng.chance(0.15) {
        containers
            .push(json!({"name": "side", "image": "x", "resources": resources(rng, None, false)}));
    }
    let mut spec = json!({"containers": containers, "terminationGracePeriodSeconds": 0});
    if rng.chance(0.3) {
        let init_gpu = rng.chance(0.5).then(|| (gpu, 1 + rng.below(4)));
        let mut init = vec![json!({"name": "init", "image": "x",
            "resources": resources(rng, init_gpu, false)})];
        if rng.chance(0.3) {
            init.push(
                json!({"name": "sidecar", "image": "x", "restartPolicy": "Always",
                "resources": resources(rng, None, false)}),
            );
        }
        spec["initContainers"] = json!(init);
    }
    if rng.chance(0.25) {
        let mut sel = json!({});
        if rng.chance(0.6) {
            sel[WORKLOAD] = json!(
                rng.pick(&["container", "vm-passthrough", "vm-vgpu", "Container"])
                    .to_string()
            );
        } else {
            sel["zone"] = json!(rng.pick(&["a", "b"]).to_string());
        }
        spec["nodeSelector"] = sel;
    }
    if rng.chance(0.15) {
        let term = match rng.below(4) {
            0 => json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}),
            1 => {
                json!({"matchExpressions": [{"key": WORKLOAD, "operator": "NotIn", "values": ["vm-vgpu"]}]})
            }
            2 => json!({"matchExpressions": [{"key": WORKLOAD, "operator": "Exists"}]}),
            _ => json!({"matchFields": [{"key": "metadata.name", "operator": "In",
                    "values": [rng.pick(nodes).clone()]}]}),
        };
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [term]}}});
    }
    if rng.chance(0.4) {
        let tol = match rng.below(5) {
            0 => json!({"operator": "Exists"}),
            1 => json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
            2 => json!({"key": "dedicated", "operator": "Equal", "value": "ml"}),
            3 => json!({"key": "sku", "value": "gpu", "effect": "NoSchedule"}),
            _ => {
                json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"})
            }
        };
        spec["tolerations"] = json!([tol]);
    }
    if rng.chance(0.06) {
        // How Kueue holds a pod: the scheduler skips it until the gate is removed.
        spec["schedulingGates"] = json!([{"name": "example.com/quota"}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("t{t}"), "namespace": ns}, "spec": spec})
}

/// What happened to one target.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// `round/target`.
    pub name: String,
    /// The scheduler bound it.
    pub placed: bool,
    /// The API server refused the manifest.
    pub refused: bool,
    /// The pod is held by its scheduling gates (`PodScheduled=False, SchedulingGated`).
    pub gated: bool,
    /// The scheduler's message (Unschedulable) or the API error.
    pub message: String,
    /// explain's primary code.
    pub code: CauseCode,
    /// explain's causeCodes.
    pub codes: Vec<CauseCode>,
    /// The histogram gpuwl predicts.
    pub predicted: BTreeMap<String, usize>,
    /// The scheduler's histogram (empty when placed/refused).
    pub actual: BTreeMap<String, usize>,
    /// Outcome agrees.
    pub outcome_ok: bool,
    /// Histograms agree (vacuous when placed or refused).
    pub reasons_ok: bool,
    /// Every scheduler reason has a matching code in causeCodes.
    pub causes_ok: bool,
    /// For a pod left pending: inventory's class, serve's series, the admission verdict
    /// and plan agree with explain's verdict ([`consistency`]); vacuous otherwise.
    pub consistent: bool,
    /// explain's class of the pod (`placed` when it was bound).
    pub class: String,
    /// What disagreed, when something did.
    pub inconsistency: String,
    /// The target manifest, for reproducing a disagreement.
    pub manifest: Value,
    /// For a pod left pending with a remedy: what applying it did.
    pub fix: Option<FixOutcome>,
    /// The remedy's `reasonCode` (empty when it had none).
    pub reason_code: String,
    /// With the disprover on ([`disprove_on`]), for a remedy that says no change serves:
    /// the single changes that got the pod bound on the real scheduler (each a gpuwl bug),
    /// or why the disprover could not finish. `None`: not run.
    pub disproved: Option<Result<Vec<String>, String>>,
}

/// The codes that explain a scheduler reason.
pub fn acceptable(reason: &str) -> &'static [CauseCode] {
    use CauseCode::*;
    if gpuwl_core::analysis::fit::is_placement_reason(reason) {
        &[Excluded, NodeConditions]
    } else if let Some(r) = reason.strip_prefix("Insufficient ")
        && r.contains('/')
    {
        &[
            UnadvertisedName,
            StaleOnly,
            OperatorState,
            NotCoLocated,
            TooLarge,
            InUse,
            Insufficient,
            Excluded,
            NodeConditions,
            OtherResource,
        ]
    } else {
        &[OtherResource]
    }
}

/// Applies a round's nodes and bound pods, waits until the nodes are schedulable.
pub async fn setup(client: &Client, r: &Round) -> Result<(), String> {
    let e = |m: String| m;
    gpuwl::lab::kubeops::ensure_namespace(client, &r.namespace)
        .await
        .map_err(|x| e(x.to_string()))?;
    gpuwl::cluster::accounts::ensure_default_service_account(client, &r.namespace)
        .await
        .map_err(|x| e(x.to_string()))?;
    let api: Api<Node> = Api::all(client.clone());
    for (n, res) in &r.nodes {
        // The status goes in with the create, as a kubelet registers its node: kwok's
        // node-initialize stage then finds capacity and allocatable set and keeps them.
        let mut n = n.clone();
        n["status"] = json!({"capacity": res, "allocatable": res});
        let node: Node = serde_json::from_value(n).map_err(|x| x.to_string())?;
        api.create(&PostParams::default(), &node)
            .await
            .map_err(|x| format!("create node: {x}"))?;
    }
    let waits = r.nodes.iter().map(|(n, _)| {
        let name = n["metadata"]["name"].as_str().unwrap().to_owned();
        async move {
            gpuwl::cluster::nodes::wait_schedulable(client, &name, Duration::from_secs(60)).await
        }
    });
    for w in futures::future::join_all(waits).await {
        w.map_err(|x| x.to_string())?;
    }
    // On a loaded machine kwok can write its defaults (1Ti memory, …) from a stale copy of
    // a node over what the round set: check every value, set it again where it was lost.
    for _ in 0..5 {
        let mut lost = 0;
        for (n, res) in &r.nodes {
            let name = n["metadata"]["name"].as_str().unwrap();
            let now = api.get(name).await.map_err(|x| format!("get node: {x}"))?;
            let alloc = now.status.and_then(|s| s.allocatable).unwrap_or_default();
            let q = |s: &str| gpuwl_core::model::quantity::Quantity::parse(s).ok();
            let kept = res
                .iter()
                .all(|(k, v)| alloc.get(k).and_then(|a| q(&a.0)) == q(v));
            if !kept {
                lost += 1;
                let patch = json!({"status": {"capacity": res, "allocatable": res}});
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|x| format!("patch node status: {x}"))?;
            }
        }
        if lost == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &r.namespace);
    for p in &r.bound {
        let pod: Pod = serde_json::from_value(p.clone()).map_err(|x| x.to_string())?;
        pods.create(&PostParams::default(), &pod)
            .await
            .map_err(|x| format!("create bound pod: {x}"))?;
    }
    // Let the scheduler's informers catch up with the nodes' and pods' last updates.
    tokio::time::sleep(Duration::from_millis(700)).await;
    Ok(())
}

/// Deletes the round's namespace (its pods) and nodes.
pub async fn teardown(client: &Client, r: &Round) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &r.namespace);
    let _ = pods
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default(),
        )
        .await;
    let ns: Api<Namespace> = Api::all(client.clone());
    let _ = ns.delete(&r.namespace, &DeleteParams::default()).await;
    let api: Api<Node> = Api::all(client.clone());
    for (n, _) in &r.nodes {
        let _ = api
            .delete(
                n["metadata"]["name"].as_str().unwrap(),
                &DeleteParams::default(),
            )
            .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// The cluster's nodes and pods as `kubectl get -o json` lists (text).
async fn snapshot(client: &Client) -> Result<(String, String), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let lp = ListParams::default();
    let (n, p) =
        futures::try_join!(nodes.list(&lp), pods.list(&lp)).map_err(|e| format!("list: {e}"))?;
    let list =
        |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let nodes: Vec<Value> = n
        .items
        .iter()
        .map(|x| {
            let mut v = serde_json::to_value(x).unwrap();
            v["kind"] = json!("Node");
            v
        })
        .collect();
    let pods: Vec<Value> = p
        .items
        .iter()
        .map(|x| {
            let mut v = serde_json::to_value(x).unwrap();
            v["kind"] = json!("Pod");
            v
        })
        .collect();
    Ok((list(nodes), list(pods)))
}

/// explain's file-mode verdict for `manifest` against the listed nodes and pods.
pub fn verdict(nodes_json: &str, pods_json: &str, manifest: &Value) -> Result<Explanation, String> {
    let mut nodes = Vec::new();
    gpuwl_core::decode::dump::read_from(nodes_json.as_bytes(), "nodes.json", |n| nodes.push(n))
        .map_err(|e| e.to_string())?;
    let pods = gpuwl_core::decode::pods::read_pods_str(pods_json, "pods.json")
        .map_err(|e| e.to_string())?;
    let pod = gpuwl_core::decode::pods::read_pods_str(&manifest.to_string(), "pod.json")
        .map_err(|e| e.to_string())?
        .remove(0);
    explain::explain(
        &pod,
        explain::Inputs {
            nodes: Some(&nodes),
            pods: Some(&pods),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

/// Whether every command's judgment of the pending pod `key` agrees with explain's
/// verdict `e` (one verdict per pod, issue 34), on the cluster as listed after the
/// scheduler decided (`nodes_json`, `pods_json`, the pod among them):
/// - inventory puts it in the list of its class (demand → `demandPods`, unservable →
///   `unservable`, the rest → `heldBack` with the same class and code);
/// - serve's `gpuwl_pending_gpu_pods{class, cause}` counts it (the series is ≥ 1);
/// - the admission guard in enforce mode would deny it only if explain calls it permanent,
///   and every code the guard gives is one of explain's `causeCodes`;
/// - plan leaves it out exactly when its class is not demand or unservable.
pub fn consistency(
    nodes_json: &str,
    pods_json: &str,
    key: &str,
    e: &Explanation,
) -> Result<(), String> {
    use gpuwl_core::analysis::verdict::PodClass;
    let mut nodes = Vec::new();
    gpuwl_core::decode::dump::read_from(nodes_json.as_bytes(), "nodes.json", |n| nodes.push(n))
        .map_err(|e| e.to_string())?;
    let pods = gpuwl_core::decode::pods::read_pods_str(pods_json, "pods.json")
        .map_err(|e| e.to_string())?;
    let pod = pods
        .iter()
        .find(|p| p.key() == key)
        .ok_or_else(|| format!("{key} not listed"))?;
    let v = e.verdict;
    let policy = gpuwl_core::model::operator::PolicyStatus::not_read();
    let inv = gpuwl_core::analysis::inventory::build(&nodes, &pods, &policy)
        .map_err(|e| e.to_string())?;
    let in_inventory = if inv.unservable.iter().any(|u| u.pod == key) {
        Some((
            PodClass::Unservable,
            inv.unservable.iter().find(|u| u.pod == key).unwrap().code,
        ))
    } else {
        inv.demand_pods
            .iter()
            .chain(&inv.held_back)
            .find(|h| h.pod == key)
            .map(|h| (h.class, h.code))
    };
    if in_inventory != Some((v.class, v.code)) {
        return Err(format!(
            "inventory {in_inventory:?} vs explain {:?}/{}",
            v.class, v.code
        ));
    }
    let ev = gpuwl_core::analysis::exporter::evaluate(&nodes, &pods, &policy, None);
    let series = ev
        .pending
        .as_ref()
        .and_then(|m| m.get(&(v.class.as_str(), v.code.as_str())))
        .copied()
        .unwrap_or(0);
    if series < 1 {
        return Err(format!(
            "serve: gpuwl_pending_gpu_pods{{class={},cause={}}} is {series}",
            v.class, v.code
        ));
    }
    let ix = gpuwl_core::analysis::admission::Index::build(&nodes, None, None);
    let warnings = gpuwl_core::analysis::admission::review(pod, &ix);
    let denied = warnings
        .iter()
        .any(|w| gpuwl_core::analysis::verdict::verdict(w.code, false).permanent());
    if denied && !v.permanent() {
        return Err(format!(
            "admission would deny ({:?}) what explain calls {:?}/{} (transient {})",
            warnings.iter().map(|w| w.code).collect::<Vec<_>>(),
            v.class,
            v.code,
            v.transient
        ));
    }
    if let Some(w) = warnings.iter().find(|w| !e.cause_codes.contains(&w.code)) {
        return Err(format!(
            "admission code {} not among explain's {:?}",
            w.code, e.cause_codes
        ));
    }
    let source = gpuwl_core::model::snapshot::Snapshot::of_cluster(nodes, pods.clone(), policy);
    let plan = gpuwl_core::analysis::twin::plan::propose(&source, false);
    let left_out = plan.held_back.iter().any(|h| h.pod == key);
    let should = !matches!(v.class, PodClass::Demand | PodClass::Unservable);
    if left_out != should {
        return Err(format!(
            "plan left it out: {left_out}, explain's class {:?}",
            v.class
        ));
    }
    Ok(())
}

/// Runs one round: setup, each target (verdict, then the scheduler), teardown.
pub async fn run_round(client: &Client, r: &Round) -> Result<Vec<Outcome>, String> {
    setup(client, r).await?;
    let mut out = Vec::new();
    let result = async {
        for m in &r.targets {
            let (nj, pj) = snapshot(client).await?;
            let e = verdict(&nj, &pj, m)?;
            let pod: Pod = serde_json::from_value(m.clone()).map_err(|x| x.to_string())?;
            let name = format!(
                "{}/{}",
                r.namespace,
                m["metadata"]["name"].as_str().unwrap()
            );
            let predicted: BTreeMap<String, usize> =
                gpuwl_core::analysis::fit::histogram(&e.filters);
            let (placed, refused, message, actual) =
                match gpuwl::lab::kubeops::create_and_await_scheduling(client, &pod).await {
                    Ok(p) => {
                        let c = gpuwl::lab::kubeops::pod_scheduled(&p).cloned();
                        let placed = c.as_ref().is_some_and(|c| c.status == "True");
                        let msg = c.and_then(|c| c.message).unwrap_or_default();
                        let actual = if placed {
                            BTreeMap::new()
                        } else {
                            gpuwl_core::analysis::fit::parse_message(&msg)
                                .map(|(_, h)| h)
                                .unwrap_or_default()
                        };
                        (placed, false, msg, actual)
                    }
                    Err(err) => {
                        let s = err.to_string();
                        if s.contains("422") || s.contains("Invalid") || s.contains("invalid") {
                            (false, true, s, BTreeMap::new())
                        } else {
                            return Err(s);
                        }
                    }
                };
            let gated = !placed && !refused && message.contains("scheduling gates");
            let outcome_ok = if refused {
                e.cause_code == CauseCode::InvalidSpec
            } else if gated {
                e.cause_code == CauseCode::Gated
            } else {
                placed == (e.cause_code == CauseCode::FitsNow)
            };
            let reasons_ok = placed || refused || gated || predicted == actual;
            let inconsistency = if placed || refused {
                String::new()
            } else {
                let (nj2, pj2) = snapshot(client).await?;
                consistency(&nj2, &pj2, &name, &e).err().unwrap_or_default()
            };
            // Issue 35: the tested fix, applied on the real cluster, must get the pod bound.
            let fix = if placed || refused || gated {
                None
            } else {
                apply_fix(client, &r.namespace, m, &e).await
            };
            let reason_code = e
                .remedy
                .as_ref()
                .and_then(|x| x.reason_code.clone())
                .unwrap_or_default();
            let disproved = if disprove_on() && fix.as_ref().is_some_and(|x| !x.sufficient) {
                Some(disprove(client, r, m).await)
            } else {
                None
            };
            let causes_ok = placed
                || refused
                || actual
                    .keys()
                    .all(|r| acceptable(r).iter().any(|c| e.cause_codes.contains(c)));
            out.push(Outcome {
                consistent: inconsistency.is_empty(),
                class: if placed {
                    "placed".into()
                } else {
                    e.verdict.class.as_str().into()
                },
                inconsistency,
                gated,
                name,
                placed,
                refused,
                message,
                code: e.cause_code,
                codes: e.cause_codes.clone(),
                predicted,
                actual,
                outcome_ok,
                reasons_ok,
                causes_ok,
                manifest: m.clone(),
                fix,
                reason_code,
                disproved,
            });
        }
        Ok::<(), String>(())
    }
    .await;
    teardown(client, r).await;
    result.map(|_| out)
}

/// Agreement figures over outcomes.
#[derive(Debug, Default, Clone, Copy)]
pub struct Figures {
    /// Scenarios (targets).
    pub total: usize,
    /// Placed by the scheduler.
    pub placed: usize,
    /// Refused by the API server.
    pub refused: usize,
    /// Outcome agreements.
    pub outcome: usize,
    /// Pending ones (scheduler said Unschedulable).
    pub pending: usize,
    /// Pending ones whose histogram agrees exactly.
    pub reasons: usize,
    /// Pending ones whose every reason is covered by causeCodes.
    pub causes: usize,
    /// Held by scheduling gates.
    pub gated: usize,
    /// Pending ones (gated included) where every command agrees with explain's verdict.
    pub consistent: usize,
    /// Pending ones whose remedy claimed to be sufficient.
    pub fixes: usize,
    /// Of those, bound on the real scheduler after the actions.
    pub fixes_bound: usize,
    /// Pending ones whose remedy said no change within reach serves.
    pub fixes_none: usize,
    /// Remedies that break a harm rule.
    pub harmful: usize,
    /// "None serves" verdicts the disprover tried (finished).
    pub disprove_tried: usize,
    /// Of those, the ones a single change within reach disproved (the pod bound).
    pub disproved: usize,
    /// "None serves" verdicts the disprover could not finish (an API error).
    pub disprove_failed: usize,
}

/// Sums outcomes.
pub fn figures(v: &[Outcome]) -> Figures {
    let mut f = Figures::default();
    for o in v {
        f.total += 1;
        f.placed += o.placed as usize;
        f.refused += o.refused as usize;
        f.outcome += o.outcome_ok as usize;
        if !o.placed && !o.refused {
            f.pending += 1;
            f.reasons += o.reasons_ok as usize;
            f.causes += o.causes_ok as usize;
            f.gated += o.gated as usize;
            f.consistent += o.consistent as usize;
        }
        if let Some(x) = &o.fix {
            f.fixes += x.sufficient as usize;
            f.fixes_bound += (x.sufficient && x.bound) as usize;
            f.fixes_none += (!x.sufficient) as usize;
            f.harmful += (!x.harm.is_empty()) as usize;
        }
        match &o.disproved {
            Some(Ok(v)) => {
                f.disprove_tried += 1;
                f.disproved += (!v.is_empty()) as usize;
            }
            Some(Err(_)) => f.disprove_failed += 1,
            None => {}
        }
    }
    f
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scenarios {} (placed {}, pending {} of which gated {}, refused {}): outcome {}/{}, reasons {}/{}, causes {}/{}, one verdict {}/{}; fixes: {} bound of {} claimed sufficient, {} said none serves, {} harmful",
            self.total,
            self.placed,
            self.pending,
            self.gated,
            self.refused,
            self.outcome,
            self.total,
            self.reasons,
            self.pending,
            self.causes,
            self.pending,
            self.consistent,
            self.pending,
            self.fixes_bound,
            self.fixes,
            self.fixes_none,
            self.harmful
        )?;
        if self.disprove_tried + self.disprove_failed > 0 {
            write!(
                f,
                "; disprover: {} of {} said-none-serves bound by a single change ({} not finished)",
                self.disproved, self.disprove_tried, self.disprove_failed
            )?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Fix efficacy (issue 35): explain's tested fix, applied on the real cluster.

/// What applying explain's tested fix did on the real scheduler.
#[derive(Debug, Clone)]
pub struct FixOutcome {
    /// The remedy claimed to be sufficient (else it said why no change serves).
    pub sufficient: bool,
    /// The actions, as `-o json` shows them.
    pub actions: Value,
    /// The pod was bound after the actions (only meaningful when sufficient).
    pub bound: bool,
    /// A harm rule broken by an action (empty: none).
    pub harm: String,
    /// The scheduler's message after the fix, when still pending.
    pub message: String,
}

/// A harm rule an action breaks, if any: never a toleration of the cordon's or a node
/// condition's taint, never a request lowered below 1.
pub fn harm(actions: &Value) -> String {
    for a in actions.as_array().into_iter().flatten() {
        let key = a["key"].as_str().unwrap_or("");
        if a["kind"] == "tolerate" && key.starts_with("node.kubernetes.io/") {
            return format!("tolerates {key}");
        }
        if a["kind"] == "lower" && a["to"].as_i64().unwrap_or(0) < 1 {
            return format!("lowers {} to {}", a["resource"], a["to"]);
        }
    }
    String::new()
}

/// The toleration a `tolerate` action adds, as the pod spec writes it (`Equal` with the
/// taint's value, `Exists` without one).
fn toleration_of(a: &Value) -> Value {
    match a["value"].as_str() {
        Some(v) => json!({"key": a["key"], "operator": "Equal", "value": v, "effect": a["effect"]}),
        None => json!({"key": a["key"], "operator": "Exists", "effect": a["effect"]}),
    }
}

/// Renames, lowers and re-aims the manifest as the pod-side actions say (the fields a
/// recreate changes).
pub fn change_manifest(m: &mut Value, actions: &Value) {
    for a in actions.as_array().into_iter().flatten() {
        match a["kind"].as_str().unwrap_or("") {
            "tolerate" => {
                let t = toleration_of(a);
                let spec = &mut m["spec"];
                if !spec["tolerations"].is_array() {
                    spec["tolerations"] = json!([]);
                }
                spec["tolerations"].as_array_mut().unwrap().push(t);
            }
            "node-selector" => {
                let key = a["key"].as_str().unwrap_or("");
                match a["value"].as_str() {
                    Some(v) => m["spec"]["nodeSelector"][key] = json!(v),
                    None => {
                        if let Some(o) = m["spec"]["nodeSelector"].as_object_mut() {
                            o.remove(key);
                        }
                    }
                }
            }
            "drop-required-affinity" => {
                if let Some(o) = m["spec"]["affinity"]["nodeAffinity"].as_object_mut() {
                    o.remove("requiredDuringSchedulingIgnoredDuringExecution");
                }
            }
            "rename" => {
                let (from, to) = (
                    a["from"].as_str().unwrap_or(""),
                    a["to"].as_str().unwrap_or(""),
                );
                for_each_resources(m, |res| {
                    for field in ["requests", "limits"] {
                        if let Some(o) = res[field].as_object_mut()
                            && let Some(v) = o.remove(from)
                        {
                            o.insert(to.to_owned(), v);
                        }
                    }
                });
            }
            "lower" => lower(
                m,
                a["resource"].as_str().unwrap_or(""),
                a["to"].as_i64().unwrap_or(1),
            ),
            _ => {}
        }
    }
}

/// Calls `f` with every container's (and init container's, and the pod's own)
/// `resources` object.
fn for_each_resources(m: &mut Value, mut f: impl FnMut(&mut Value)) {
    for list in ["initContainers", "containers"] {
        if let Some(cs) = m["spec"][list].as_array_mut() {
            for c in cs {
                f(&mut c["resources"]);
            }
        }
    }
    if m["spec"]["resources"].is_object() {
        f(&mut m["spec"]["resources"]);
    }
}

/// Sets the pod's effective request of `resource` to `to` (scheduler units: cpu in
/// millicores, the rest whole): the first regular container asking for it gets `to`, every
/// other container and init container (sidecars included: they add to the regular ones)
/// asks for none; pod-level resources are set to `to`.
fn lower(m: &mut Value, resource: &str, to: i64) {
    let q = |n: i64| {
        if resource == "cpu" {
            json!(format!("{n}m"))
        } else {
            json!(n.to_string())
        }
    };
    let asks_in = |list: &str| {
        m["spec"][list].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                ["requests", "limits"]
                    .iter()
                    .any(|f| c["resources"][*f].get(resource).is_some())
            })
        })
    };
    // Where the one remaining request goes: a regular container, else an init container.
    let keep_in = if asks_in("containers") {
        "containers"
    } else {
        "initContainers"
    };
    let mut first = true;
    for list in ["containers", "initContainers"] {
        let Some(cs) = m["spec"][list].as_array_mut() else {
            continue;
        };
        for c in cs {
            let res = &mut c["resources"];
            let asks = ["requests", "limits"]
                .iter()
                .any(|f| res[*f].get(resource).is_some());
            if !asks {
                continue;
            }
            let keep = first && list == keep_in;
            first &= !keep;
            for f in ["requests", "limits"] {
                if let Some(o) = res[f].as_object_mut()
                    && o.contains_key(resource)
                {
                    if keep {
                        o.insert(resource.to_owned(), q(to));
                    } else {
                        o.remove(resource);
                    }
                }
            }
        }
    }
    if let Some(o) = m["spec"]["resources"]["requests"].as_object_mut()
        && o.contains_key(resource)
    {
        o.insert(resource.to_owned(), q(to));
    }
    if let Some(o) = m["spec"]["resources"]["limits"].as_object_mut()
        && o.contains_key(resource)
    {
        o.insert(resource.to_owned(), q(to));
    }
}

/// Applies the remedy of explanation `e` for the pending pod `manifest` on the cluster
/// (node changes, pods stopped, then the pod: a toleration patched in place, any other
/// change by deleting and creating the changed manifest) and waits up to 20 s for the pod
/// to be bound. `None` when explain gave no remedy.
pub async fn apply_fix(
    client: &Client,
    ns: &str,
    manifest: &Value,
    e: &Explanation,
) -> Option<FixOutcome> {
    let r = e.remedy.as_ref()?;
    let actions = serde_json::to_value(&r.actions).unwrap_or_default();
    let mut out = FixOutcome {
        sufficient: r.sufficient,
        harm: harm(&actions),
        actions: actions.clone(),
        bound: false,
        message: String::new(),
    };
    if !r.sufficient {
        return Some(out);
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let name = manifest["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut recreate = false;
    let mut tolerate_only = Vec::new();
    for a in actions.as_array().into_iter().flatten() {
        match a["kind"].as_str().unwrap_or("") {
            kind @ ("uncordon" | "fix-workload-label") => {
                let patch = if kind == "uncordon" {
                    json!({"spec": {"unschedulable": null}})
                } else {
                    json!({"metadata": {"labels": {"nvidia.com/gpu.workload.config": a["value"]}}})
                };
                let node = a["node"].as_str().unwrap_or("");
                let _ = nodes
                    .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
            "free" => {
                for k in a["pods"].as_array().into_iter().flatten() {
                    if let Some((pns, pn)) = k.as_str().unwrap_or("").split_once('/') {
                        let api: Api<Pod> = Api::namespaced(client.clone(), pns);
                        let _ = api
                            .delete(pn, &DeleteParams::default().grace_period(0))
                            .await;
                    }
                }
            }
            "tolerate" => tolerate_only.push(a.clone()),
            _ => recreate = true,
        }
    }
    if recreate {
        let mut m = manifest.clone();
        change_manifest(&mut m, &actions);
        let _ = pods
            .delete(&name, &DeleteParams::default().grace_period(0))
            .await;
        for _ in 0..100 {
            if pods.get_opt(&name).await.ok().flatten().is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let pod: Pod = match serde_json::from_value(m) {
            Ok(p) => p,
            Err(x) => {
                out.message = x.to_string();
                return Some(out);
            }
        };
        if let Err(x) = pods.create(&PostParams::default(), &pod).await {
            out.message = format!("recreate: {x}");
            return Some(out);
        }
    } else if !tolerate_only.is_empty() {
        // A merge patch replaces the list: the existing tolerations, then the new ones
        // (the API server allows adding tolerations to a live pod, not changing them).
        let mut all: Vec<Value> = match pods.get(&name).await {
            Ok(p) => p
                .spec
                .and_then(|s| s.tolerations)
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default(),
            Err(x) => {
                out.message = format!("get pod: {x}");
                return Some(out);
            }
        };
        all.extend(tolerate_only.iter().map(toleration_of));
        let patch = json!({"spec": {"tolerations": all}});
        if let Err(x) = pods
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            out.message = format!("patch tolerations: {x}");
            return Some(out);
        }
    }
    for _ in 0..80 {
        if let Ok(p) = pods.get(&name).await {
            if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
                out.bound = true;
                return Some(out);
            }
            out.message = gpuwl::lab::kubeops::pod_scheduled(&p)
                .and_then(|c| c.message.clone())
                .unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// The disprover (issue 49): for a pending pod whose remedy says no tested change serves,
// every single change within reach tried on the real scheduler. Bench-only: on when
// `GPUWL_DISPROVE=1` (bench/differential.sh sets it with DISPROVE=1).

/// Whether the disprover runs (`GPUWL_DISPROVE=1`).
pub fn disprove_on() -> bool {
    std::env::var("GPUWL_DISPROVE").is_ok_and(|v| v == "1")
}

/// One change within reach of a pending pod, made on the live cluster or on its manifest.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Delete the bound pod (its units and pod slot freed), in the round's namespace.
    Delete(String),
    /// Uncordon the node.
    Uncordon(String),
    /// Set the node's workload label from `.2` to `.1` (an invalid value corrected).
    Relabel(String, String, String),
    /// Add the toleration to the pod.
    Tolerate(Value),
    /// Drop the pod's nodeSelector entry.
    DropSelector(String),
    /// Drop the pod's required node affinity.
    DropAffinity,
    /// Lower the pod's effective request of the resource to 1 (cpu: 1m, memory: 1 byte),
    /// the least a request can be: any lower request that binds, this one binds too.
    Lower(String),
}

impl Change {
    /// In words, for the bench's lines.
    pub fn describe(&self) -> String {
        match self {
            Change::Delete(p) => format!("delete pod {p}"),
            Change::Uncordon(n) => format!("uncordon {n}"),
            Change::Relabel(n, v, was) => format!("relabel {n} {WORKLOAD}={was} -> {v}"),
            Change::Tolerate(t) => format!("tolerate {t}"),
            Change::DropSelector(k) => format!("drop nodeSelector {k}"),
            Change::DropAffinity => "drop required node affinity".into(),
            Change::Lower(r) => format!("lower {r} to 1"),
        }
    }

    /// Changes of one group only relax (each lets the scheduler place the pod on at least
    /// the nodes it could before, there being no inter-pod affinity or spread in the
    /// generator): when a group's changes all together do not bind the pod, none of them
    /// alone does. Relabels are not monotone (a selector may name the old value): each is
    /// its own group.
    fn group(&self) -> usize {
        match self {
            Change::Delete(_) => 0,
            Change::Uncordon(_) => 1,
            Change::Tolerate(_)
            | Change::DropSelector(_)
            | Change::DropAffinity
            | Change::Lower(_) => 2,
            Change::Relabel(..) => 3,
        }
    }

    fn on_manifest(&self, m: &mut Value) {
        match self {
            Change::Tolerate(t) => {
                if !m["spec"]["tolerations"].is_array() {
                    m["spec"]["tolerations"] = json!([]);
                }
                m["spec"]["tolerations"]
                    .as_array_mut()
                    .unwrap()
                    .push(t.clone());
            }
            Change::DropSelector(k) => {
                if let Some(o) = m["spec"]["nodeSelector"].as_object_mut() {
                    o.remove(k);
                }
            }
            Change::DropAffinity => {
                if let Some(o) = m["spec"]["affinity"]["nodeAffinity"].as_object_mut() {
                    o.remove("requiredDuringSchedulingIgnoredDuringExecution");
                }
            }
            Change::Lower(r) => lower(m, r, 1),
            _ => {}
        }
    }
}

/// Every single change within reach of the pending pod `manifest` in round `r`: each bound
/// pod of the round deleted, each cordoned node uncordoned, each invalid workload label
/// set to the valid value the pod's selector or the node's GPU name implies, a toleration
/// of each taint on the round's nodes (not a node condition's), each nodeSelector entry
/// dropped, the required affinity dropped, each request lowered to the least.
pub async fn changes_within_reach(
    client: &Client,
    r: &Round,
    manifest: &Value,
) -> Result<Vec<Change>, String> {
    let target = manifest["metadata"]["name"].as_str().unwrap_or("");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &r.namespace);
    let nodes: Api<Node> = Api::all(client.clone());
    let mut out = Vec::new();
    let live = pods
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list pods: {e}"))?;
    for p in &live.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
        let done = p
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
        if name != target && bound && !done {
            out.push(Change::Delete(name));
        }
    }
    let mut taints: Vec<Value> = Vec::new();
    for (n, _) in &r.nodes {
        let name = n["metadata"]["name"].as_str().unwrap_or("");
        let Ok(node) = nodes.get(name).await else {
            continue;
        };
        let spec = node.spec.clone().unwrap_or_default();
        if spec.unschedulable == Some(true) {
            out.push(Change::Uncordon(name.to_owned()));
        }
        for t in spec.taints.unwrap_or_default() {
            if t.key.starts_with("node.kubernetes.io/") {
                continue;
            }
            let tol = match &t.value {
                Some(v) => {
                    json!({"key": t.key, "operator": "Equal", "value": v, "effect": t.effect})
                }
                None => json!({"key": t.key, "operator": "Exists", "effect": t.effect}),
            };
            if !taints.contains(&tol) {
                taints.push(tol);
            }
        }
        let labels = node.metadata.labels.clone().unwrap_or_default();
        if let Some(was) = labels.get(WORKLOAD)
            && !["container", "vm-passthrough", "vm-vgpu"].contains(&was.as_str())
        {
            out.push(Change::Relabel(
                name.to_owned(),
                was.to_lowercase(),
                was.clone(),
            ));
        }
    }
    out.extend(taints.into_iter().map(Change::Tolerate));
    if let Some(sel) = manifest["spec"]["nodeSelector"].as_object() {
        out.extend(sel.keys().map(|k| Change::DropSelector(k.clone())));
    }
    if !manifest["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .is_null()
    {
        out.push(Change::DropAffinity);
    }
    let mut asked: Vec<String> = Vec::new();
    for list in ["initContainers", "containers"] {
        for c in manifest["spec"][list].as_array().into_iter().flatten() {
            for f in ["requests", "limits"] {
                for (k, v) in c["resources"][f].as_object().into_iter().flatten() {
                    let least = if k == "cpu" { "1m" } else { "1" };
                    if v.as_str() != Some(least) && !asked.contains(k) {
                        asked.push(k.clone());
                    }
                }
            }
        }
    }
    out.extend(asked.into_iter().map(Change::Lower));
    Ok(out)
}

/// A bound pod as it can be created again on its node: the live pod's spec (its node
/// included) without the service-account token volume the API server added, and its
/// name, namespace and labels.
fn recreatable(p: &Pod) -> Option<Pod> {
    let mut v = serde_json::to_value(p).ok()?;
    v["metadata"] = json!({"name": p.metadata.name, "namespace": p.metadata.namespace,
        "labels": p.metadata.labels});
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    let token = |x: &Value| {
        x["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access"))
    };
    if let Some(vols) = v["spec"]["volumes"].as_array_mut() {
        vols.retain(|x| !token(x));
    }
    for list in ["initContainers", "containers"] {
        for c in v["spec"][list].as_array_mut().into_iter().flatten() {
            if let Some(ms) = c["volumeMounts"].as_array_mut() {
                ms.retain(|x| !token(x));
            }
        }
    }
    serde_json::from_value(v).ok()
}

/// Makes `changes` together, creates the pod `manifest` (changed) afresh and reads the
/// scheduler's decision; then undoes every change (deleted pods created again on their
/// nodes, nodes cordoned and labelled back) and deletes the pod. Whether it was bound.
async fn try_changes(
    client: &Client,
    ns: &str,
    manifest: &Value,
    changes: &[&Change],
) -> Result<bool, String> {
    let name = manifest["metadata"]["name"].as_str().unwrap_or("");
    let s = |e: gpuwl_core::error::Error| e.to_string();
    gpuwl::lab::kubeops::delete_pod(client, ns, name)
        .await
        .map_err(s)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let mut deleted: Vec<Pod> = Vec::new();
    let mut undo: Vec<(String, Value)> = Vec::new();
    let mut m = manifest.clone();
    for c in changes {
        match c {
            Change::Delete(p) => {
                if let Ok(Some(live)) = pods.get_opt(p).await {
                    deleted.push(live);
                }
            }
            Change::Uncordon(n) => {
                let patch = json!({"spec": {"unschedulable": null}});
                let _ = nodes
                    .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                undo.push((n.clone(), json!({"spec": {"unschedulable": true}})));
            }
            Change::Relabel(n, v, was) => {
                let patch = json!({"metadata": {"labels": {WORKLOAD: v}}});
                let _ = nodes
                    .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                undo.push((n.clone(), json!({"metadata": {"labels": {WORKLOAD: was}}})));
            }
            other => other.on_manifest(&mut m),
        }
    }
    let gone = deleted.iter().map(|p| {
        let n = p.metadata.name.clone().unwrap_or_default();
        async move { gpuwl::lab::kubeops::delete_pod(client, ns, &n).await }
    });
    for r in futures::future::join_all(gone).await {
        r.map_err(s)?;
    }
    // Let the scheduler's informers see the deletions and node changes.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let placed = match serde_json::from_value::<Pod>(m) {
        Ok(pod) => gpuwl::lab::kubeops::create_and_await_scheduling(client, &pod)
            .await
            .map(|p| gpuwl::lab::kubeops::pod_scheduled(&p).is_some_and(|c| c.status == "True"))
            .map_err(s),
        Err(e) => Err(e.to_string()),
    };
    let _ = gpuwl::lab::kubeops::delete_pod(client, ns, name).await;
    for p in &deleted {
        if let Some(again) = recreatable(p) {
            let _ = pods.create(&PostParams::default(), &again).await;
        }
    }
    for (n, patch) in &undo {
        let _ = nodes
            .patch(n, &PatchParams::default(), &Patch::Merge(patch))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    placed
}

/// The single changes within reach ([`changes_within_reach`]) that get the pending pod
/// `manifest` bound on the real scheduler, each tried alone on the round's cluster and
/// undone. Per group ([`Change::group`]) all of its changes are tried together first and
/// one by one only when that binds the pod. Afterwards the pod is created again as it was
/// (pending, as the round left it).
pub async fn disprove(client: &Client, r: &Round, manifest: &Value) -> Result<Vec<String>, String> {
    let changes = changes_within_reach(client, r, manifest).await?;
    let mut bound = Vec::new();
    for g in 0..4 {
        let members: Vec<&Change> = changes.iter().filter(|c| c.group() == g).collect();
        if g == 3 {
            for c in &members {
                if try_changes(client, &r.namespace, manifest, &[c]).await? {
                    bound.push(c.describe());
                }
            }
            continue;
        }
        if members.is_empty() || !try_changes(client, &r.namespace, manifest, &members).await? {
            continue;
        }
        if let [one] = members.as_slice() {
            bound.push(one.describe());
            continue;
        }
        for c in &members {
            if try_changes(client, &r.namespace, manifest, &[c]).await? {
                bound.push(c.describe());
            }
        }
    }
    if let Ok(pod) = serde_json::from_value::<Pod>(manifest.clone()) {
        let _ = gpuwl::lab::kubeops::create_and_await_scheduling(client, &pod).await;
    }
    Ok(bound)
}

/// The pending pods whose remedy says no change serves, by its `reasonCode`.
pub fn none_by_reason(v: &[Outcome]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for o in v {
        if o.fix.as_ref().is_some_and(|x| !x.sufficient) {
            *out.entry(o.reason_code.clone()).or_default() += 1;
        }
    }
    out
}
