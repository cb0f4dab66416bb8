//! Differential test of `explain`'s DRA verdicts against the REAL kube-scheduler (and
//! kube-controller-manager's resource claim controller) of the local control plane.
//!
//! A seeded generator builds random DRA situations: 4 simulated nodes (2 in zone `a`, 2 in
//! zone `b`), ResourceSlices of driver `gpu.nvidia.com` on a random subset (0-3 GPUs each,
//! each a `gpu` device and often a `vfio` device consuming one shared counter; attributes
//! `type`, `productName`, `driverVersion` (a version), `index` (dropped on some nodes, as
//! newer drivers do), capacity `memory`), held claims (allocated through the status
//! subresource and reserved for a bound holder pod), and a target pod with a claim or a
//! ResourceClaimTemplate (count 1-4, CEL selectors from a list that includes misspelled
//! values, missing attributes, a version compared with a string, `semver()`/`quantity()`),
//! sometimes sharing a held claim, sometimes confined to one zone.
//!
//! For each, gpuwl's file-mode verdict is taken first (`explain --pod pod.json --nodes
//! --pods --dra -o json`, from dumps of the cluster before the pod exists), then the pod is
//! created and the scheduler's decision read. Compared: placed or not (gpuwl: `fits-now`),
//! and on the ones not placed the cause family (the scheduler's reasons: `cannot allocate
//! all claims`, `resourceclaim not available on the node`, node affinity; a
//! `SchedulerError` for a CEL runtime error).
//!
//! `GPUWL_DIFF_DRA_SCENARIOS` (default 9: the suite's CI size, cut from 30, then 14, to pay for the live tests of issues 47-52 and keep the test command near 12 min; bench/differential-dra.sh runs hundreds) and `GPUWL_DIFF_DRA_SEED` (default 1) size
//! and seed a run; bench/differential-dra.sh runs many and prints the figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::kit::{ClusterDown, gpuwl, one_cluster_at_a_time, own_cluster};

/// The local control plane's name (`GPUWL_DIFF_DRA_CLUSTER` overrides it: a bench run
/// beside the suite's).
const CLUSTER: &str = "gpuwl-test-diff-dra";
const DRIVER: &str = "gpu.nvidia.com";
const NODES: [(&str, &str); 4] = [
    ("diff-a-0", "a"),
    ("diff-a-1", "a"),
    ("diff-b-0", "b"),
    ("diff-b-1", "b"),
];

/// splitmix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// A DeviceClass narrower than the driver's: A10s only (a site's own class).
const NARROW_CLASS: &str = "a10.gpu.nvidia.com";

const PRODUCTS: [&str; 3] = [
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A10",
    "NVIDIA H100 80GB HBM3",
];

/// Selectors the target's request may carry (API-valid; some fail at run time).
const SELECTORS: [&str; 9] = [
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-A100-SXM4-80GB'",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A10'",
    "device.attributes['gpu.nvidia.com'].index >= 1",
    "device.attributes['gpu.nvidia.com'].driverVersion == '580.95.5'",
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('575.0.0')) >= 0",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h100')",
    "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-')",
];

struct Scenario {
    slices: Vec<Value>,
    /// Held claims: (claim name, node, pool, device).
    held: Vec<(String, String, String, String)>,
    template: Option<Value>,
    claim: Option<Value>,
    pod: Value,
    describe: String,
}

fn generate(rng: &mut Rng, ns: &str, tag: &str) -> Scenario {
    let mut slices = Vec::new();
    let mut held = Vec::new();
    let mut describe = Vec::new();
    for (node, _) in NODES {
        if !rng.chance(75) {
            continue;
        }
        let gpus = rng.below(4);
        if gpus == 0 {
            continue;
        }
        let pool = format!("{tag}-{node}");
        let with_index = rng.chance(70);
        let version = *rng.pick(&["580.95.5", "570.124.6"]);
        let product = *rng.pick(&PRODUCTS);
        let mut counters = Vec::new();
        let mut devices = Vec::new();
        let mut layout = Vec::new();
        for g in 0..gpus {
            counters.push(json!({"name": format!("gpu-{g}"), "counters": {"gpu": {"value": "1"}}}));
            let uses =
                json!([{"counterSet": format!("gpu-{g}"), "counters": {"gpu": {"value": "1"}}}]);
            let mut attrs = json!({
                "type": {"string": "gpu"},
                "productName": {"string": product},
                "driverVersion": {"version": version},
                "uuid": {"string": format!("GPU-{tag}-{node}-{g}")}
            });
            if with_index {
                attrs["index"] = json!({"int": g});
            }
            let memory = if product == "NVIDIA A10" {
                "24Gi"
            } else {
                "80Gi"
            };
            devices.push(
                json!({"name": format!("gpu-{g}"), "attributes": attrs.clone(),
                "capacity": {"memory": {"value": memory}}, "consumesCounters": uses.clone()}),
            );
            let vfio = rng.chance(60);
            if vfio {
                let mut a = attrs.clone();
                a["type"] = json!({"string": "vfio"});
                devices.push(json!({"name": format!("gpu-vfio-{g}"), "attributes": a,
                    "consumesCounters": uses}));
            }
            // Hold this GPU (as gpu or vfio) sometimes.
            if rng.chance(30) {
                let dev = if vfio && rng.chance(40) {
                    format!("gpu-vfio-{g}")
                } else {
                    format!("gpu-{g}")
                };
                held.push((
                    format!("held-{node}-{g}"),
                    node.to_string(),
                    pool.clone(),
                    dev,
                ));
            }
            layout.push(if vfio { "gv" } else { "g" });
        }
        describe.push(format!(
            "{node}: {} [{}]{}",
            product,
            layout.join(","),
            if with_index { "" } else { " no-index" }
        ));
        let pool_spec = json!({"name": pool, "generation": 1, "resourceSliceCount": 2});
        slices.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{pool}-counters")},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool_spec.clone(), "sharedCounters": counters}
        }));
        slices.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{pool}-devices")},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool_spec, "devices": devices}
        }));
    }
    // The two real NVIDIA classes mostly; a narrower class (A10 only) and mistyped names
    // sometimes, where the fix is the claim's deviceClassName (issue 35, kind 4).
    let class = match rng.below(100) {
        0..=59 => "gpu.nvidia.com",
        60..=79 => "vfio.gpu.nvidia.com",
        80..=89 => NARROW_CLASS,
        _ => *rng.pick(&["gpu.nvidia.con", "vfio.gpu-nvidia.com", "gpu.nvdia.com"]),
    };
    let most = if rng.chance(70) { 2 } else { 4 };
    let count = 1 + rng.below(most);
    let mut selectors = Vec::new();
    if rng.chance(60) {
        selectors.push(json!({"cel": {"expression": *rng.pick(&SELECTORS)}}));
    }
    let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": class, "allocationMode": "ExactCount", "count": count,
        "selectors": selectors.clone()}}]}});
    let mut pod_spec = json!({
        "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
        "tolerations": [{"operator": "Exists"}]
    });
    let zone = rng.chance(30).then(|| *rng.pick(&["a", "b"]));
    if let Some(z) = zone {
        pod_spec["nodeSelector"] = json!({"gpuwl.test/zone": z});
    }
    let mut template = None;
    let mut claim = None;
    let share = !held.is_empty() && rng.chance(15);
    let how;
    if share {
        let h = rng.pick(&held).0.clone();
        pod_spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": h}]);
        how = format!("shares {h}");
    } else if rng.chance(50) {
        template = Some(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "target", "namespace": ns},
            "spec": {"spec": spec}
        }));
        pod_spec["resourceClaims"] =
            json!([{"name": "gpu", "resourceClaimTemplateName": "target"}]);
        how = "template".into();
    } else {
        claim = Some(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "target", "namespace": ns},
            "spec": spec
        }));
        pod_spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "target"}]);
        how = "claim".into();
    }
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "target", "namespace": ns},
        "spec": pod_spec
    });
    Scenario {
        slices,
        held: held.clone(),
        template,
        claim,
        pod,
        describe: format!(
            "{} | held {} | {how} {class} x{count} {} {}",
            describe.join("; "),
            held.iter()
                .map(|h| format!("{}/{}", h.1, h.3))
                .collect::<Vec<_>>()
                .join(","),
            selectors
                .first()
                .and_then(|s| s["cel"]["expression"].as_str())
                .unwrap_or("(no selector)"),
            zone.map(|z| format!("zone={z}")).unwrap_or_default()
        ),
    }
}

/// The pod holding claim `claim` on `node`: pinned there, it gets the claim allocated by
/// the scheduler itself.
fn holder_pod(ns: &str, claim: &str, node: &str) -> Value {
    json!({
        "metadata": {"name": format!("holder-{claim}"), "namespace": ns},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
    })
}

fn from<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).unwrap()
}

/// The scheduler's decision: (placed, reason, message).
async fn decision(client: &Client, ns: &str) -> (bool, String, String) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let mut last = (false, String::from("none"), String::new());
    // An Unschedulable decision is final once it held for this long (the scheduler retries
    // on slice and claim events, so one taken before its informers caught up turns).
    let settle = Duration::from_millis(2500);
    let mut unschedulable_since: Option<Instant> = None;
    while start.elapsed() < Duration::from_secs(40) {
        if let Ok(p) = api.get("target").await
            && let Some(c) = gpuwl::lab::kubeops::pod_scheduled(&p)
        {
            let reason = c.reason.clone().unwrap_or_default();
            let msg = c.message.clone().unwrap_or_default();
            last = (c.status == "True", reason.clone(), msg.clone());
            if c.status == "True" || reason == "SchedulerError" {
                return last;
            }
            // The claim from the template is made after the pod: wait for it.
            let waiting_for_claim = msg.contains("waiting for resource claim")
                || msg.contains("resourceclaim not found")
                || msg.contains("not found");
            if reason == "Unschedulable"
                && !waiting_for_claim
                && p.status.as_ref().is_some_and(|s| {
                    s.resource_claim_statuses.is_some()
                        || p.spec.as_ref().is_some_and(|sp| {
                            sp.resource_claims.as_ref().is_some_and(|rc| {
                                rc.iter().all(|c| c.resource_claim_name.is_some())
                            })
                        })
                })
            {
                let since = *unschedulable_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= settle {
                    return last;
                }
            } else {
                unschedulable_since = None;
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    last
}

/// The cause families a scheduler decision allows.
fn families(reason: &str, msg: &str) -> Vec<&'static str> {
    let mut f = Vec::new();
    if reason == "SchedulerError" {
        f.push("selector-error");
    }
    if msg.contains("cannot allocate all claims") {
        f.extend([
            "no-matching-device",
            "too-large",
            "counter-exhausted",
            "devices-in-use",
        ]);
    }
    // A request naming a DeviceClass that does not exist: the scheduler's allocator says
    // so in its own words (`request gpu: device class X does not exist`; kubernetes
    // staging/src/k8s.io/dynamic-resource-allocation/structured allocator); gpuwl's code
    // for it is no-matching-device, its cause names the missing class.
    if msg.contains("device class ") && msg.contains(" does not exist") {
        f.push("no-matching-device");
    }
    if msg.contains("not available on the node") || msg.contains("node affinity") {
        f.extend(["excluded", "no-matching-device"]);
    }
    f
}

async fn dump_list<K>(api: Api<K>, kind: &str, api_version: &str) -> Value
where
    K: Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + k8s_openapi::Resource,
{
    let items: Vec<Value> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| {
            let mut v = serde_json::to_value(o).unwrap();
            v["kind"] = json!(kind);
            v["apiVersion"] = json!(api_version);
            v
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

struct Outcome {
    /// For a pod the scheduler left pending: explain's remedy, and when it claimed to be
    /// sufficient, what applying it on the cluster did (issues 35, 49: fixes that work).
    fix: Option<FixResult>,
    /// The remedy's `reasonCode` (empty when none).
    reason_code: String,
    /// With the disprover on, for a "none serves" remedy: the single changes that bound the
    /// pod, or why the disprover could not finish ([`disprove`]).
    disproved: Option<Result<Vec<Single>, String>>,
    retried: bool,
    describe: String,
    gpuwl_code: String,
    gpuwl_fitting: Vec<String>,
    placed: bool,
    reason: String,
    message: String,
}

async fn run_one(client: &Client, rng: &mut Rng, i: usize, seed: u64) -> Outcome {
    let ns = format!("dd-{seed}-{i}");
    let tag = format!("s{seed}x{i}");
    let sc = generate(rng, &ns, &tag);
    gpuwl::lab::kubeops::ensure_namespace(client, &ns)
        .await
        .unwrap();
    gpuwl::cluster::accounts::ensure_default_service_account(client, &ns)
        .await
        .unwrap();
    let pp = PostParams::default();
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    for s in &sc.slices {
        slices.create(&pp, &from(s.clone())).await.unwrap();
    }
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Held claims: allocated by the scheduler itself for a holder pod pinned to the node,
    // the claim selecting the one device by its uuid.
    for (name, node, pool, dev) in &sc.held {
        let g = dev.rsplit('-').next().unwrap();
        let uuid = format!("GPU-{}-{node}-{g}", pool.split('-').next().unwrap());
        let class = if dev.contains("vfio") {
            "vfio.gpu.nvidia.com"
        } else {
            "gpu.nvidia.com"
        };
        let c: ResourceClaim = from(json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class,
                "selectors": [{"cel": {"expression": format!("device.attributes['{DRIVER}'].uuid == '{uuid}'")}}]}}]}}
        }));
        claims.create(&pp, &c).await.unwrap();
        let holder = format!("holder-{name}");
        pods.create(&pp, &from(holder_pod(&ns, name, node)))
            .await
            .unwrap();
        let start = Instant::now();
        loop {
            let seen = pods.get(&holder).await.unwrap();
            if gpuwl::lab::kubeops::pod_scheduled(&seen).is_some_and(|c| c.status == "True") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "holder {holder} not scheduled: {:?}",
                seen.status
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if let Some(t) = &sc.template {
        let api: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
        api.create(&pp, &from(t.clone())).await.unwrap();
    }
    if let Some(c) = &sc.claim {
        claims.create(&pp, &from(c.clone())).await.unwrap();
    }
    // Let the scheduler's informers see the slices and claims (a pool seen with one of
    // its two slices is incomplete: nothing is allocated from it).
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // gpuwl's verdict from dumps, before the pod exists.
    let dir = tempfile::tempdir().unwrap();
    let nodes = dump_list(Api::<Node>::all(client.clone()), "Node", "v1").await;
    let all_pods = dump_list(Api::<Pod>::all(client.clone()), "Pod", "v1").await;
    let mut dra = dump_list(
        Api::<DeviceClass>::all(client.clone()),
        "DeviceClass",
        "resource.k8s.io/v1",
    )
    .await;
    for extra in [
        dump_list(
            Api::<ResourceSlice>::all(client.clone()),
            "ResourceSlice",
            "resource.k8s.io/v1",
        )
        .await,
        dump_list(
            Api::<ResourceClaim>::namespaced(client.clone(), &ns),
            "ResourceClaim",
            "resource.k8s.io/v1",
        )
        .await,
        dump_list(
            Api::<ResourceClaimTemplate>::namespaced(client.clone(), &ns),
            "ResourceClaimTemplate",
            "resource.k8s.io/v1",
        )
        .await,
    ] {
        let more = extra["items"].as_array().unwrap().clone();
        dra["items"].as_array_mut().unwrap().extend(more);
    }
    let w = |n: &str, v: &Value| {
        let p = dir.path().join(n);
        std::fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let (nf, pf, df, podf) = (
        w("nodes.json", &nodes),
        w("pods.json", &all_pods),
        w("dra.json", &dra),
        w("pod.json", &sc.pod),
    );
    let (code, out, err) = gpuwl(&[
        "explain", "--pod", &podf, "--nodes", &nf, "--pods", &pf, "--dra", &df, "-o", "json",
    ]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| {
        panic!(
            "explain failed ({code}): {e}: {err}\n{out}\n{}",
            sc.describe
        )
    });
    let gpuwl_code = doc["causeCode"].as_str().unwrap_or("").to_owned();
    // explain's exit code: 0 when the pod is scheduled or fits now, 1 for a blocking cause.
    let fits = matches!(gpuwl_code.as_str(), "scheduled" | "fits-now");
    assert_eq!(
        code,
        if fits { 0 } else { 1 },
        "explain's exit code for {gpuwl_code}: {err}\n{}",
        sc.describe
    );
    let gpuwl_fitting: Vec<String> = doc["fitting"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    pods.create(&pp, &from(sc.pod.clone())).await.unwrap();
    let (mut placed, mut reason, mut message) = decision(client, &ns).await;
    // A first attempt the scheduler made before its informers saw every slice (a pool seen
    // with one of its two slices is incomplete) disagrees for that reason alone: when the
    // verdicts differ (placed or not, or the cause family), the pod is created once more
    // and the fresh attempt counts.
    let mut retried = false;
    let agrees = (gpuwl_code == "fits-now") == placed
        && (placed || families(&reason, &message).contains(&gpuwl_code.as_str()));
    if !agrees && !placed {
        retried = true;
        gpuwl::lab::kubeops::delete_pod(client, &ns, "target")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        pods.create(&pp, &from(sc.pod.clone())).await.unwrap();
        (placed, reason, message) = decision(client, &ns).await;
    }
    // Issues 35 and 49: every fix explain claims sufficient (`remedy.actions`: the claim's
    // class, selector or count, the pod's node constraints, the pods holding devices
    // ended) applied on the real cluster — the claim (or template) and the pod re-created —
    // must get the pod bound.
    let remedy = &doc["remedy"];
    let fix = if placed || fits {
        None
    } else if remedy["sufficient"] == true {
        let actions = remedy["actions"].as_array().cloned().unwrap_or_default();
        Some(apply_fix(client, &ns, &sc, &actions).await)
    } else {
        Some(FixResult {
            sufficient: false,
            bound: false,
            harm: String::new(),
            what: format!(
                "{gpuwl_code} [{}]: {}",
                remedy["reasonCode"].as_str().unwrap_or(""),
                remedy["reason"].as_str().unwrap_or("(no remedy)")
            ),
        })
    };
    let reason_code = remedy["reasonCode"].as_str().unwrap_or("").to_owned();
    let disproved = if disprove_on() && fix.as_ref().is_some_and(|f| !f.sufficient) {
        Some(disprove(client, &ns, &sc).await)
    } else {
        None
    };
    // Clean up: the slices go (the next scenario publishes its own pools); the namespace
    // goes in the background.
    for s in &sc.slices {
        let _ = slices
            .delete(
                s["metadata"]["name"].as_str().unwrap(),
                &DeleteParams::default(),
            )
            .await;
    }
    let nsapi: Api<Namespace> = Api::all(client.clone());
    let _ = nsapi.delete(&ns, &DeleteParams::default()).await;
    Outcome {
        fix,
        reason_code,
        disproved,
        retried,
        describe: format!("#{i} {}", sc.describe),
        gpuwl_code,
        gpuwl_fitting,
        placed,
        reason,
        message,
    }
}

/// What explain's remedy for a pending target did.
struct FixResult {
    /// The remedy claimed to be sufficient.
    sufficient: bool,
    /// Bound after the actions (when sufficient).
    bound: bool,
    /// A harm rule an action breaks (empty: none): a count below 1, a toleration of a
    /// node condition's taint, a pod ended that holds no device.
    harm: String,
    /// The actions and the scheduler's answer after them (or why none serves).
    what: String,
}

/// The harm rule `a` breaks, if any.
fn dra_harm(a: &Value) -> String {
    match a["kind"].as_str().unwrap_or("") {
        "count" if a["to"].as_i64().unwrap_or(0) < 1 => format!("count {} < 1", a["to"]),
        "tolerate"
            if a["key"]
                .as_str()
                .unwrap_or("")
                .starts_with("node.kubernetes.io/") =>
        {
            format!("tolerates {}", a["key"])
        }
        "free-devices"
            if a["pods"].as_array().into_iter().flatten().any(|p| {
                !p.as_str()
                    .unwrap_or("")
                    .split_once('/')
                    .is_some_and(|(_, n)| n.starts_with("holder-"))
            }) =>
        {
            format!("ends a pod holding no device: {}", a["pods"])
        }
        _ => String::new(),
    }
}

/// Applies `actions` (explain's `remedy.actions`) for scenario `sc` in namespace `ns`:
/// the target pod deleted, the pods named by `free-devices` ended and their claims waited
/// for to be deallocated, the claim or template changed (`device-class`, `selector`,
/// `count`) and re-created, the pod's manifest changed (`node-selector`, `tolerate`,
/// `drop-required-affinity`) and re-created; then the scheduler's decision.
async fn apply_fix(client: &Client, ns: &str, sc: &Scenario, actions: &[Value]) -> FixResult {
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let now = DeleteParams::default().grace_period(0);
    let harm: Vec<String> = actions
        .iter()
        .map(dra_harm)
        .filter(|h| !h.is_empty())
        .collect();
    let _ = pods.delete("target", &now).await;
    let mut pod = sc.pod.clone();
    let (mut claim, mut template) = (sc.claim.clone(), sc.template.clone());
    let mut respec = false;
    for a in actions {
        let edit = |spec: &mut Value| {
            for r in spec["devices"]["requests"].as_array_mut().unwrap() {
                if r["name"] != a["request"] {
                    continue;
                }
                let x = &mut r["exactly"];
                match a["kind"].as_str().unwrap_or("") {
                    "device-class" => x["deviceClassName"] = a["to"].clone(),
                    "count" => x["count"] = a["to"].clone(),
                    "selector" => {
                        for s in x["selectors"].as_array_mut().into_iter().flatten() {
                            if s["cel"]["expression"] == a["from"] {
                                s["cel"]["expression"] = a["to"].clone();
                            }
                        }
                    }
                    _ => {}
                }
            }
        };
        match a["kind"].as_str().unwrap_or("") {
            "device-class" | "count" | "selector" => {
                respec = true;
                if let Some(t) = template.as_mut() {
                    edit(&mut t["spec"]["spec"]);
                } else if let Some(c) = claim.as_mut() {
                    edit(&mut c["spec"]);
                }
            }
            "free-devices" => {
                for k in a["pods"].as_array().into_iter().flatten() {
                    if let Some((pns, pn)) = k.as_str().unwrap_or("").split_once('/') {
                        let api: Api<Pod> = Api::namespaced(client.clone(), pns);
                        let _ = api.delete(pn, &now).await;
                    }
                }
                let names: Vec<String> = a["claims"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|k| k.as_str()?.split_once('/').map(|(_, n)| n.to_owned()))
                    .collect();
                if a["pods"].as_array().is_none_or(|v| v.is_empty()) {
                    for n in &names {
                        let _ = claims.delete(n, &now).await;
                    }
                }
                // The resource claim controller deallocates a claim no pod reserves.
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(20) {
                    let mut busy = false;
                    for n in &names {
                        if let Ok(Some(c)) = claims.get_opt(n).await {
                            busy |= c.status.as_ref().is_some_and(|s| s.allocation.is_some());
                        }
                    }
                    if !busy {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
            }
            "node-selector" => {
                let key = a["key"].as_str().unwrap_or("");
                match a["value"].as_str() {
                    Some(v) => pod["spec"]["nodeSelector"][key] = json!(v),
                    None => {
                        if let Some(m) = pod["spec"]["nodeSelector"].as_object_mut() {
                            m.remove(key);
                        }
                    }
                }
            }
            "tolerate" => {
                let t = json!({"key": a["key"], "operator": if a["value"].is_null() {"Exists"} else {"Equal"},
                    "value": a["value"], "effect": a["effect"]});
                if let Some(v) = pod["spec"]["tolerations"].as_array_mut() {
                    v.push(t);
                }
            }
            "drop-required-affinity" => {
                if let Some(m) = pod["spec"]["affinity"].as_object_mut() {
                    m.remove("nodeAffinity");
                }
            }
            _ => {}
        }
    }
    // Wait for the old pod to be gone (its claim from the template goes with it).
    for _ in 0..100 {
        if pods.get_opt("target").await.ok().flatten().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if respec {
        if let Some(t) = &template {
            let api: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), ns);
            let _ = api.delete("target", &DeleteParams::default()).await;
            api.create(&pp, &from(t.clone())).await.unwrap();
        } else if let Some(c) = &claim {
            let _ = claims.delete("target", &DeleteParams::default()).await;
            let gone = Instant::now();
            while claims.get_opt("target").await.ok().flatten().is_some()
                && gone.elapsed() < Duration::from_secs(20)
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            claims.create(&pp, &from(c.clone())).await.unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    pods.create(&pp, &from(pod)).await.unwrap();
    let (bound, r2, m2) = decision(client, ns).await;
    let kinds: Vec<String> = actions
        .iter()
        .map(|a| a["description"].as_str().unwrap_or("").to_owned())
        .collect();
    FixResult {
        sufficient: true,
        bound,
        harm: harm.join("; "),
        what: format!("{}: {r2} {m2}", kinds.join(" + ")),
    }
}

/// Creates the four nodes (labelled with their zone) and the two DeviceClasses.
async fn setup(client: &Client) {
    for (n, z) in NODES {
        gpuwl::cluster::nodes::ensure_sim_node(client, n)
            .await
            .unwrap();
        gpuwl::lab::kubeops::label_node(client, n, "gpuwl.test/zone", z)
            .await
            .unwrap();
    }
    for (n, _) in NODES {
        gpuwl::cluster::nodes::wait_schedulable(client, n, Duration::from_secs(60))
            .await
            .unwrap();
    }
    let classes: Api<DeviceClass> = Api::all(client.clone());
    for (name, t, extra) in [
        ("gpu.nvidia.com", "gpu", ""),
        ("vfio.gpu.nvidia.com", "vfio", ""),
        (
            NARROW_CLASS,
            "gpu",
            " && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A10'",
        ),
    ] {
        let c: DeviceClass = from(json!({
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!(
                "device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{t}'{extra}")}}]}
        }));
        let _ = classes.create(&PostParams::default(), &c).await;
    }
}

#[test]
#[ignore = "needs local control plane"]
fn explain_agrees_with_the_scheduler_on_random_dra_situations() {
    let n: usize = std::env::var("GPUWL_DIFF_DRA_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(9);
    let seed: u64 = std::env::var("GPUWL_DIFF_DRA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let cluster: &'static str = match std::env::var("GPUWL_DIFF_DRA_CLUSTER") {
        Ok(c) if !c.is_empty() => Box::leak(c.into_boxed_str()),
        _ => CLUSTER,
    };
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(cluster);
    let kubeconfig = own_cluster(cluster, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let outcomes = rt.block_on(async {
        let client = gpuwl::cluster::client(std::path::Path::new(kubeconfig.trim()), None)
            .await
            .unwrap();
        setup(&client).await;
        let mut rng = Rng(seed);
        let mut out = Vec::new();
        for i in 0..n {
            out.push(run_one(&client, &mut rng, i, seed).await);
        }
        out
    });
    let mut outcome_ok = 0;
    let mut pending = 0;
    let mut cause_ok = 0;
    let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
    let mut misses = Vec::new();
    let retried = outcomes.iter().filter(|o| o.retried).count();
    for o in &outcomes {
        *by_code.entry(o.gpuwl_code.clone()).or_default() += 1;
        let gpuwl_places = o.gpuwl_code == "fits-now";
        if gpuwl_places == o.placed {
            outcome_ok += 1;
        } else {
            misses.push(format!(
                "OUTCOME gpuwl {} (fitting {:?}), scheduler {} {}: {}\n    {}",
                o.gpuwl_code, o.gpuwl_fitting, o.reason, o.message, o.describe, ""
            ));
        }
        if !o.placed {
            pending += 1;
            let fam = families(&o.reason, &o.message);
            if fam.contains(&o.gpuwl_code.as_str()) {
                cause_ok += 1;
            } else if gpuwl_places == o.placed {
                misses.push(format!(
                    "CAUSE gpuwl {}, scheduler {} {}: {}",
                    o.gpuwl_code, o.reason, o.message, o.describe
                ));
            }
        }
    }
    let fixes: Vec<&FixResult> = outcomes
        .iter()
        .filter_map(|o| o.fix.as_ref())
        .filter(|f| f.sufficient)
        .collect();
    let fixes_bound = fixes.iter().filter(|f| f.bound).count();
    let none = outcomes
        .iter()
        .filter_map(|o| o.fix.as_ref())
        .filter(|f| !f.sufficient)
        .count();
    let harmful = fixes.iter().filter(|f| !f.harm.is_empty()).count();
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for o in outcomes
        .iter()
        .filter(|o| o.fix.as_ref().is_some_and(|f| !f.sufficient))
    {
        *by_reason.entry(o.reason_code.as_str()).or_default() += 1;
    }
    // The disprover's figures: tried, disproved (a single change within reach bound the
    // pod), bound only by a change that asks for other hardware, not finished.
    let (mut tried, mut disproved, mut relaxed, mut unfinished) = (0, 0, 0, 0);
    for o in &outcomes {
        match &o.disproved {
            Some(Ok(v)) => {
                tried += 1;
                if v.iter().any(|x| !x.relaxes) {
                    disproved += 1;
                } else if !v.is_empty() {
                    relaxed += 1;
                }
            }
            Some(Err(_)) => unfinished += 1,
            None => {}
        }
    }
    println!(
        "DIFF-DRA seed={seed} scenarios={} outcome={outcome_ok}/{} cause={cause_ok}/{pending} retried={retried} fixes={fixes_bound}/{} none={none} harmful={harmful} disproved={disproved}/{tried} relaxed-only={relaxed} unfinished={unfinished} seconds={:.1} codes={by_code:?} none-by-reason={by_reason:?}",
        outcomes.len(),
        outcomes.len(),
        fixes.len(),
        started.elapsed().as_secs_f64()
    );
    for o in &outcomes {
        if let Some(f) = o.fix.as_ref().filter(|f| !f.sufficient) {
            println!("NONE {} | {}", f.what, o.describe);
        }
        match &o.disproved {
            Some(Ok(v)) if !v.is_empty() => {
                let list: Vec<String> = v
                    .iter()
                    .map(|x| {
                        format!(
                            "{}{}",
                            x.what,
                            if x.relaxes { " (other hardware)" } else { "" }
                        )
                    })
                    .collect();
                println!(
                    "{} [{}] bound by {list:?} | {}",
                    if v.iter().any(|x| !x.relaxes) {
                        "DISPROVED"
                    } else {
                        "RELAXED"
                    },
                    o.reason_code,
                    o.describe
                );
            }
            Some(Err(e)) => println!("DISPROVER-FAILED {e} | {}", o.describe),
            _ => {}
        }
    }
    for (o, f) in outcomes
        .iter()
        .filter_map(|o| o.fix.as_ref().map(|f| (o, f)))
        .filter(|(_, f)| f.sufficient && (!f.bound || !f.harm.is_empty()))
    {
        misses.push(format!(
            "FIX {}: {} {}| {}",
            if f.bound { "harmful" } else { "not bound" },
            f.what,
            f.harm,
            o.describe
        ));
    }
    for m in &misses {
        println!("{m}");
    }
    assert!(
        misses.is_empty(),
        "{} disagreement(s):\n{}",
        misses.len(),
        misses.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// The disprover (issue 49): for a target whose remedy says no tested change serves, every
// single change within reach tried on the real scheduler, each undone before the next.
// Bench-only: on when `GPUWL_DISPROVE=1` (bench/differential-dra.sh sets it with
// DISPROVE=1).

/// The driver versions the generator publishes.
const VERSIONS: [&str; 2] = ["580.95.5", "570.124.6"];

/// Whether the disprover runs (`GPUWL_DISPROVE=1`).
fn disprove_on() -> bool {
    std::env::var("GPUWL_DISPROVE").is_ok_and(|v| v == "1")
}

/// A single change that got the pod bound.
struct Single {
    /// The change, in words.
    what: String,
    /// It asks for other hardware than the claim did (its selector dropped, a correctly
    /// named product, a smaller memory or a lower index, a narrow class widened): no
    /// change gpuwl may propose; counted apart from the disproofs.
    relaxes: bool,
}

/// The edits of the generator's selector `sel` to other values the devices publish (or
/// may), each with whether it asks for other hardware ([`Single::relaxes`]).
fn selector_edits(sel: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    if sel.contains("productName ==") {
        let lit = sel.rsplit('\'').nth(1).unwrap_or("");
        let correct = PRODUCTS.contains(&lit);
        for p in PRODUCTS.iter().filter(|p| **p != lit) {
            out.push((sel.replace(&format!("'{lit}'"), &format!("'{p}'")), correct));
        }
    } else if sel.contains("driverVersion ==") {
        for v in VERSIONS {
            out.push((
                format!(
                    "device.attributes['{DRIVER}'].driverVersion.compareTo(semver('{v}')) == 0"
                ),
                !sel.contains(v),
            ));
        }
    } else if sel.contains("semver('575.0.0')") {
        for v in VERSIONS {
            out.push((sel.replace("575.0.0", v), false));
        }
    } else if sel.contains("index >= 1") {
        out.push((sel.replace(">= 1", ">= 0"), true));
        out.push((
            format!("has(device.attributes['{DRIVER}'].index) && ({sel})"),
            false,
        ));
    } else if sel.contains("quantity('40Gi')") {
        out.push((sel.replace("40Gi", "24Gi"), true));
    } else if sel.contains("matches('h100')") {
        for m in ["a100", "a10"] {
            out.push((sel.replace("h100", m), true));
        }
    }
    out
}

/// Puts scenario `sc` back as generated after a try: the target pod deleted, the claim or
/// template created again from the generator's, the holders ended by the try created
/// again and waited for to be scheduled (their claims allocated again).
async fn restore(
    client: &Client,
    ns: &str,
    sc: &Scenario,
    ended: &[(String, String)],
) -> Result<(), String> {
    let pp = PostParams::default();
    gpuwl::lab::kubeops::delete_pod(client, ns, "target")
        .await
        .map_err(|e| e.to_string())?;
    let gone_within = |what: &'static str| format!("{what} not gone within 20 s");
    if let Some(t) = &sc.template {
        let api: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), ns);
        let _ = api.delete("target", &DeleteParams::default()).await;
        let start = Instant::now();
        while api.get_opt("target").await.ok().flatten().is_some() {
            if start.elapsed() > Duration::from_secs(20) {
                return Err(gone_within("template"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        api.create(&pp, &from(t.clone()))
            .await
            .map_err(|e| format!("template: {e}"))?;
    } else if let Some(c) = &sc.claim {
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
        let _ = api.delete("target", &DeleteParams::default()).await;
        let start = Instant::now();
        while api.get_opt("target").await.ok().flatten().is_some() {
            if start.elapsed() > Duration::from_secs(20) {
                return Err(gone_within("claim"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        api.create(&pp, &from(c.clone()))
            .await
            .map_err(|e| format!("claim: {e}"))?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for (claim, node) in ended {
        pods.create(&pp, &from(holder_pod(ns, claim, node)))
            .await
            .map_err(|e| format!("holder: {e}"))?;
    }
    for (claim, _) in ended {
        let holder = format!("holder-{claim}");
        let start = Instant::now();
        loop {
            if let Ok(p) = pods.get(&holder).await
                && gpuwl::lab::kubeops::pod_scheduled(&p).is_some_and(|c| c.status == "True")
            {
                break;
            }
            if start.elapsed() > Duration::from_secs(40) {
                return Err(format!("{holder} not scheduled again within 40 s"));
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
    // Let the scheduler's informers see the claims again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

/// Applies `actions` ([`apply_fix`]), reads whether the pod was bound, and puts the
/// scenario back ([`restore`]; `ended`: the holders the actions end, as (claim, node)).
async fn try_actions(
    client: &Client,
    ns: &str,
    sc: &Scenario,
    actions: &[Value],
    ended: &[(String, String)],
) -> Result<bool, String> {
    let r = apply_fix(client, ns, sc, actions).await;
    restore(client, ns, sc, ended).await?;
    Ok(r.bound)
}

/// The single changes within reach that get the pending target of scenario `sc` bound on
/// the real scheduler: each holder ended (its pod deleted, its claim deallocated), the
/// zone nodeSelector dropped, another DeviceClass, count 1, the selector edited to another
/// value the devices publish or dropped ([`selector_edits`]). Groups whose changes only
/// relax — all holders ended; the claim under class `gpu.nvidia.com` (which every class
/// but `vfio` narrows) or `vfio.gpu.nvidia.com` with no selector and count 1 — are tried
/// whole first, their members one by one only when the whole binds the pod.
async fn disprove(client: &Client, ns: &str, sc: &Scenario) -> Result<Vec<Single>, String> {
    let spec = sc
        .claim
        .as_ref()
        .map(|c| c["spec"].clone())
        .or_else(|| sc.template.as_ref().map(|t| t["spec"]["spec"].clone()));
    let mut edits: Vec<(String, Value, bool)> = Vec::new();
    let mut relax: Vec<Value> = Vec::new();
    if let Some(spec) = &spec {
        let x = &spec["devices"]["requests"][0]["exactly"];
        let class = x["deviceClassName"].as_str().unwrap_or("");
        for c in ["gpu.nvidia.com", "vfio.gpu.nvidia.com", NARROW_CLASS] {
            if c != class {
                edits.push((
                    format!("deviceClassName {class} -> {c}"),
                    json!({"kind": "device-class", "request": "gpu", "to": c}),
                    class == NARROW_CLASS,
                ));
            }
        }
        let count = x["count"].as_i64().unwrap_or(1);
        if count > 1 {
            let a = json!({"kind": "count", "request": "gpu", "to": 1});
            edits.push((format!("count {count} -> 1"), a.clone(), false));
            relax.push(a);
        }
        if let Some(sel) = x["selectors"][0]["cel"]["expression"].as_str() {
            for (to, relaxes) in selector_edits(sel) {
                edits.push((
                    format!("selector -> {to}"),
                    json!({"kind": "selector", "request": "gpu", "from": sel, "to": to}),
                    relaxes,
                ));
            }
            let a = json!({"kind": "selector", "request": "gpu", "from": sel, "to": "true"});
            edits.push(("selector dropped".into(), a.clone(), true));
            relax.push(a);
        }
    }
    let holders: Vec<(String, String)> =
        sc.held.iter().map(|h| (h.0.clone(), h.1.clone())).collect();
    let end = |hs: &[(String, String)]| {
        json!({"kind": "free-devices",
            "pods": hs.iter().map(|h| format!("{ns}/holder-{}", h.0)).collect::<Vec<_>>(),
            "claims": hs.iter().map(|h| format!("{ns}/{}", h.0)).collect::<Vec<_>>()})
    };
    let mut out = Vec::new();
    if !holders.is_empty() && try_actions(client, ns, sc, &[end(&holders)], &holders).await? {
        for h in &holders {
            let one = std::slice::from_ref(h);
            if holders.len() == 1 || try_actions(client, ns, sc, &[end(one)], one).await? {
                out.push(Single {
                    what: format!("end holder-{} on {}", h.0, h.1),
                    relaxes: false,
                });
            }
        }
    }
    if sc.pod["spec"]["nodeSelector"]["gpuwl.test/zone"].is_string() {
        let a = json!({"kind": "node-selector", "key": "gpuwl.test/zone", "value": null});
        if try_actions(client, ns, sc, &[a], &[]).await? {
            out.push(Single {
                what: "drop nodeSelector gpuwl.test/zone".into(),
                relaxes: false,
            });
        }
    }
    if !edits.is_empty() {
        let mut any = false;
        for c in ["gpu.nvidia.com", "vfio.gpu.nvidia.com"] {
            let mut acts = vec![json!({"kind": "device-class", "request": "gpu", "to": c})];
            acts.extend(relax.iter().cloned());
            if try_actions(client, ns, sc, &acts, &[]).await? {
                any = true;
                break;
            }
        }
        for (what, a, relaxes) in edits.iter().filter(|_| any) {
            if try_actions(client, ns, sc, std::slice::from_ref(a), &[]).await? {
                out.push(Single {
                    what: what.clone(),
                    relaxes: *relaxes,
                });
            }
        }
    }
    Ok(out)
}
