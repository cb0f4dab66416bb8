//! The real Kueue (v0.17.0) on the local control plane: `gpuwl lab --kueue` on its own
//! cluster — Kueue's manager started and supervised, one Job admitted and placed, one held
//! by the mis-named quota — then `check --effective` reporting that quota, `explain job`
//! agreeing with Kueue's message, and the seed's files as a plain lab writes them.
//! Kueue is built once per cache key.

use crate::kit::{
    ClusterDown, Seed, assert_same_seed, gpuwl, gpuwl_ok, kubectl, one_cluster_at_a_time,
};

const LAB_CLUSTER: &str = "gpuwl-it-kueue-lab";

#[test]
#[ignore = "needs local control plane"]
fn lab_kueue_admits_one_job_holds_the_misnamed_one_and_check_reports_the_quota() {
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(LAB_CLUSTER);
    let root = tempfile::tempdir().unwrap();
    let out = gpuwl_ok(&[
        "lab",
        "--kueue",
        "--cluster-name",
        LAB_CLUSTER,
        "--root",
        root.path().to_str().unwrap(),
    ]);
    assert!(
        out.contains("kueue-container admitted in flavor container → lab-node-0"),
        "{out}"
    );
    let kq = std::fs::read_to_string(root.path().join("out/kueue.txt")).unwrap();
    let lines: Vec<&str> = kq.lines().collect();
    assert_eq!(lines.len(), 2, "{kq}");
    assert_eq!(
        lines[0],
        "kueue-container nvidia.com/gpu ADMITTED container lab-node-0"
    );
    // Kueue's own words for the passthrough Job: no flavor has quota on its name.
    assert_eq!(
        lines[1],
        "kueue-passthrough nvidia.com/GA102GL_A10 HELD none none couldn't assign flavors to pod set main: resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue"
    );
    let status = gpuwl_ok(&["cluster", "status", "--name", LAB_CLUSTER]);
    assert!(
        status
            .lines()
            .any(|l| l.trim_start().starts_with("kueue-manager") && l.ends_with("healthy")),
        "{status}"
    );

    // check --effective on the lab reports the mis-named flavor quota.
    let kubeconfig = gpuwl_ok(&["cluster", "kubeconfig", "--name", LAB_CLUSTER]);
    let kubeconfig = kubeconfig.trim();
    let (code, text, err) = gpuwl(&["check", "--effective", "--kubeconfig", kubeconfig]);
    assert_eq!(code, 1, "{text}{err}");
    assert!(
        text.lines().any(|l| l.starts_with(
            "ERROR kueue-quota-not-advertised ClusterQueue/lab-gpus: quota 2 nvidia.com/gpu in flavor vm-passthrough, but its 1 node(s) (lab-node-1) in pool vm-passthrough advertise nvidia.com/GA102GL_A10 ×2"
        )),
        "{text}"
    );

    // explain job: the quota cause, Kueue's message, the flavors tried.
    let (code, json, err) = gpuwl(&[
        "explain",
        "job",
        "gpu-kueue/kueue-passthrough",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    assert_eq!(code, 1, "{json}{err}");
    let e: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(e["quota"]["cause"], "kueue-name-not-covered", "{e}");
    assert_eq!(e["quota"]["clusterQueue"], "lab-gpus", "{e}");
    assert_eq!(
        e["quota"]["kueueMessage"],
        "couldn't assign flavors to pod set main: resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue"
    );
    let (code, json, err) = gpuwl(&[
        "explain",
        "job",
        "gpu-kueue/kueue-container",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{json}{err}");
    let e: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(e["quota"]["cause"], "kueue-admitted", "{e}");
    assert_eq!(e["quota"]["flavor"]["nvidia.com/gpu"], "container", "{e}");

    // The same quota cause from inventory, live and from dumps of the same objects.
    let dumps = tempfile::tempdir().unwrap();
    let dump = |file: &str, what: &str| {
        let (code, out, err) = kubectl(kubeconfig, &["get", what, "-A", "-o", "json"], "");
        assert_eq!(code, 0, "{err}");
        let path = dumps.path().join(file);
        std::fs::write(&path, out).unwrap();
        path.display().to_string()
    };
    let (nodes, pods) = (dump("nodes.json", "nodes"), dump("pods.json", "pods"));
    let kueue = dump(
        "kueue.json",
        "resourceflavors.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,localqueues.kueue.x-k8s.io,workloads.kueue.x-k8s.io",
    );
    let live = gpuwl(&["inventory", "--kubeconfig", kubeconfig]).1;
    let files = gpuwl(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
        "--kueue",
        &kueue,
    ])
    .1;
    for (mode, text) in [("live", &live), ("files", &files)] {
        assert!(
            text.lines()
                .any(|l| l.contains("gpu-kueue/job-kueue-passthrough-")
                    && l.contains("kueue-name-not-covered")),
            "inventory ({mode}) does not give the held Job explain's cause:\n{text}"
        );
    }

    // The fix applied on the real Kueue: lab-gpus gets quota on the name the passthrough
    // flavor's node advertises (check's kueue-quota-not-advertised and explain's
    // kueue-name-not-covered both point there); Kueue admits the held Job in that flavor
    // and the real scheduler binds its pod on that node.
    let flavors: Vec<serde_json::Value> = ["container", "vm-passthrough", "vm-vgpu"]
        .iter()
        .map(|f| {
            let gpu = if *f == "container" { 2 } else { 0 };
            let a10 = if *f == "vm-passthrough" { 2 } else { 0 };
            serde_json::json!({"name": f, "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": gpu},
                {"name": "nvidia.com/GA102GL_A10", "nominalQuota": a10}]})
        })
        .collect();
    let covered = serde_json::json!({"spec": {"resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu", "nvidia.com/GA102GL_A10"],
        "flavors": flavors}]}});
    let (code, _, err) = kubectl(
        kubeconfig,
        &[
            "patch",
            "clusterqueues.kueue.x-k8s.io",
            "lab-gpus",
            "--type",
            "merge",
            "-p",
            &covered.to_string(),
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let node = loop {
        let (_, out, _) = kubectl(
            kubeconfig,
            &[
                "get",
                "pods",
                "-n",
                "gpu-kueue",
                "-l",
                "job-name=kueue-passthrough",
                "-o",
                "jsonpath={.items[0].spec.nodeName} {.items[0].spec.nodeSelector.nvidia\\.com/gpu\\.workload\\.config}",
            ],
            "",
        );
        if out.split_whitespace().count() == 2 {
            break out.trim().to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the held Job's pod was not bound after the fix"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    // Bound on the passthrough node, with the flavor's nodeLabels Kueue put on it at
    // admission.
    assert_eq!(node, "lab-node-1 vm-passthrough");

    // The seed's files are a plain lab's.
    let plain = tempfile::tempdir().unwrap();
    gpuwl_ok(&[
        "lab",
        "--cluster-name",
        LAB_CLUSTER,
        "--root",
        plain.path().to_str().unwrap(),
    ]);
    assert_same_seed(plain.path(), root.path(), Seed::WithoutPodManifests);
    assert!(!plain.path().join("out/kueue.txt").exists());

    // A small seed of the differential against the real Kueue (bench: GPUWL_KUEUE_SCENARIOS).
    let n = std::env::var("GPUWL_KUEUE_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let seed = std::env::var("GPUWL_KUEUE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(52);
    let started = std::time::Instant::now();
    differential(kubeconfig, seed, n);
    eprintln!(
        "job differential: {n} scenarios in {:.1?}",
        started.elapsed()
    );
    // Quota held by other workloads, cohorts and borrowing (bench:
    // GPUWL_KUEUE_QUOTA_SCENARIOS, else GPUWL_KUEUE_SCENARIOS).
    let nq = std::env::var("GPUWL_KUEUE_QUOTA_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .or(std::env::var("GPUWL_KUEUE_SCENARIOS")
            .ok()
            .and_then(|v| v.parse().ok()))
        .unwrap_or(3);
    let started = std::time::Instant::now();
    let t = differential_quota(kubeconfig, seed, nq);
    eprintln!(
        "quota differential: {nq} scenarios in {:.1?}",
        started.elapsed()
    );
    assert_eq!(t.agree, t.decisions);
}

/// The Workload of the object named `owner` in `gpu-kueue` once Kueue has decided on it
/// (`QuotaReserved` true, or false with a message); polled every 0.3 s for up to 60 s.
fn decision(kubeconfig: &str, owner: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, out, _) = kubectl(
            kubeconfig,
            &[
                "get",
                "workloads.kueue.x-k8s.io",
                "-n",
                "gpu-kueue",
                "-o",
                "json",
            ],
            "",
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        let found = v["items"].as_array().into_iter().flatten().find(|w| {
            w["metadata"]["ownerReferences"][0]["name"] == owner
                && w["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c["type"] == "QuotaReserved"
                            && (c["status"] == "True"
                                || c["message"].as_str().is_some_and(|m| !m.is_empty()))
                    })
        });
        if let Some(w) = found {
            return w.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no decision for {owner}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// Kueue's decision on the Workload of `owner` ([`decision`]), read as gpuwl reads it.
struct KueueDecision {
    /// `QuotaReserved` is true.
    admitted: bool,
    /// `QuotaReserved`'s message (empty when there is none).
    message: String,
    /// The flavor Kueue assigned to the resource asked for, if any.
    flavor: Option<String>,
    /// The Workload without conditions, admission or assignments: what gpuwl judges.
    bare: gpuwl_core::model::kueue::Workload,
}

/// [`KueueDecision`] of `owner`'s Workload, `resource` being the GPU name it asks for.
fn kueue_decision(kubeconfig: &str, owner: &str, resource: &str) -> KueueDecision {
    let mut w = decision(kubeconfig, owner);
    w["kind"] = serde_json::json!("Workload");
    let wl = gpuwl_core::decode::kueue::workload(&w).unwrap();
    let mut bare = wl.clone();
    bare.conditions.clear();
    bare.admitted_to = None;
    bare.assignments.clear();
    KueueDecision {
        admitted: wl.is("QuotaReserved"),
        message: wl
            .condition("QuotaReserved")
            .map(|c| c.message.clone())
            .unwrap_or_default(),
        flavor: wl
            .assignments
            .iter()
            .find_map(|a| a.flavors.get(resource).cloned()),
        bare,
    }
}

/// The cluster's ResourceFlavors, ClusterQueues and LocalQueues (and its Workloads when
/// `workloads`), read as gpuwl reads them.
fn kueue_objects(kubeconfig: &str, workloads: bool) -> gpuwl_core::model::kueue::KueueObjects {
    let mut kinds = String::from(
        "resourceflavors.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,localqueues.kueue.x-k8s.io",
    );
    if workloads {
        kinds.push_str(",workloads.kueue.x-k8s.io");
    }
    let (_, out, _) = kubectl(kubeconfig, &["get", &kinds, "-A", "-o", "json"], "");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    gpuwl_core::decode::kueue::from_values(&[list]).unwrap()
}

/// A tiny deterministic generator (64-bit LCG, Knuth's constants).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The category of Kueue's `QuotaReserved=False` message, as gpuwl's quota causes name it.
fn kueue_category(msg: &str) -> &'static str {
    if msg.contains("unavailable in ClusterQueue") {
        "kueue-name-not-covered"
    } else if msg.contains("insufficient unused quota") {
        "kueue-quota-exhausted"
    } else if msg.contains("> maximum capacity") {
        "kueue-quota-too-small"
    } else {
        "other"
    }
}

/// `n` random scenarios on the lab's cluster (its three flavors): a ClusterQueue of random
/// covered GPU names, flavors and quotas, its LocalQueue and one Job asking a random name
/// and count; Kueue's decision (QuotaReserved, the flavor, the message) against gpuwl's
/// `judge_workload` on the same objects (the Workload stripped of Kueue's verdict, the
/// queue's reservations cleared: the Job is its only workload).
fn differential(kubeconfig: &str, seed: u64, n: usize) {
    use gpuwl_core::analysis::kueue::{QuotaCause, judge_workload};
    let names = [
        "nvidia.com/gpu",
        "nvidia.com/GA102GL_A10",
        "nvidia.com/NVIDIA_A10-12Q",
    ];
    let flavors = ["container", "vm-passthrough", "vm-vgpu"];
    let mut rng = Lcg(seed);
    let mut rows = Vec::new();
    let mut disagree = Vec::new();
    for i in 0..n {
        let name = format!("d52-{seed}-{i}");
        let covered: Vec<&str> = loop {
            let m = rng.below(8);
            let c: Vec<&str> = (0..3)
                .filter(|b| m & (1 << b) != 0)
                .map(|b| names[b])
                .collect();
            if !c.is_empty() {
                break c;
            }
        };
        let mut fl: Vec<&str> = flavors.to_vec();
        for k in (1..fl.len()).rev() {
            fl.swap(k, rng.below(k as u64 + 1) as usize);
        }
        fl.truncate(1 + rng.below(3) as usize);
        let flavor_yaml: Vec<String> = fl
            .iter()
            .map(|f| {
                let res: Vec<String> = covered
                    .iter()
                    .map(|r| format!("{{name: {r}, nominalQuota: \"{}\"}}", rng.below(5)))
                    .collect();
                format!("      - {{name: {f}, resources: [{}]}}", res.join(", "))
            })
            .collect();
        let want = names[rng.below(3) as usize];
        let count = 1 + rng.below(3);
        let yaml = format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n  namespaceSelector: {{}}\n  resourceGroups:\n  - coveredResources: [{}]\n    flavors:\n{}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: {name}, namespace: gpu-kueue}}\nspec: {{clusterQueue: {name}}}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}, namespace: gpu-kueue, labels: {{kueue.x-k8s.io/queue-name: {name}}}}}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{{name: c, image: x, resources: {{limits: {{{want}: \"{count}\"}}}}}}]\n",
            covered.join(", "),
            flavor_yaml.join("\n")
        );
        // The queues first, the Job once the ClusterQueue is active (else Kueue's first word
        // on it is about the queue, not the quota).
        let (queues, job) = yaml.split_at(yaml.find("---\napiVersion: batch/v1").unwrap());
        let (code, _, err) = kubectl(kubeconfig, &["apply", "-f", "-"], queues);
        assert_eq!(code, 0, "{err}\n{queues}");
        let (code, _, err) = kubectl(
            kubeconfig,
            &[
                "wait",
                "--for=condition=Active",
                &format!("clusterqueues.kueue.x-k8s.io/{name}"),
                "--timeout=30s",
            ],
            "",
        );
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = kubectl(kubeconfig, &["apply", "-f", "-"], job);
        assert_eq!(code, 0, "{err}\n{job}");
        // Kueue's decision on the Job's Workload.
        let KueueDecision {
            admitted,
            message,
            flavor: kueue_flavor,
            bare,
        } = kueue_decision(kubeconfig, &name, want);
        // gpuwl's judgment, before Kueue's verdict.
        let mut objects = kueue_objects(kubeconfig, false);
        for cq in objects.cluster_queues.iter_mut().filter(|c| c.name == name) {
            cq.reserved.clear();
        }
        let v = judge_workload(&bare, &objects, None);
        let ours_admitted = matches!(v.cause, QuotaCause::Fits | QuotaCause::FlavorCannotServe);
        let ours_flavor = v.flavor.get(want).cloned();
        let kueue_cat = if admitted {
            "admitted"
        } else {
            kueue_category(&message)
        };
        let ours_cat = if ours_admitted {
            "admitted"
        } else {
            v.cause.as_str()
        };
        let agree = admitted == ours_admitted
            && (!admitted || kueue_flavor == ours_flavor)
            && kueue_cat == ours_cat;
        let row = format!(
            "{name}: covered {covered:?} flavors {fl:?} asks {count} {want}: Kueue {kueue_cat} {kueue_flavor:?} ({message}) / gpuwl {ours_cat} {ours_flavor:?}"
        );
        if !agree {
            disagree.push(row.clone());
        }
        rows.push(row);
    }
    eprintln!("{}", rows.join("\n"));
    assert!(
        disagree.is_empty(),
        "{} of {n} scenarios disagree (seed {seed}):\n{}",
        disagree.len(),
        disagree.join("\n")
    );
}

/// What `gpuwl check --effective -o json` says each flavor's nodes are and advertise on
/// the live cluster: flavor → (node names, GPU name → units).
type Offers = std::collections::BTreeMap<String, (Vec<String>, serde_json::Value)>;

fn offers(kubeconfig: &str) -> Offers {
    let (_, json, err) = gpuwl(&[
        "check",
        "--effective",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}{err}"));
    v["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let nodes = f["nodeNames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_owned())
                .collect();
            (
                f["flavor"].as_str().unwrap().to_owned(),
                (nodes, f["advertised"].clone()),
            )
        })
        .collect()
}

/// One random ClusterQueue of a quota scenario (its YAML and the names it covers).
fn random_queue(rng: &mut Lcg, name: &str, cohort: Option<&str>) -> (String, Vec<&'static str>) {
    let names = [
        "nvidia.com/gpu",
        "nvidia.com/GA102GL_A10",
        "nvidia.com/NVIDIA_A10-12Q",
    ];
    let covered: Vec<&str> = loop {
        let m = rng.below(8);
        let c: Vec<&str> = (0..3)
            .filter(|b| m & (1 << b) != 0)
            .map(|b| names[b])
            .collect();
        if !c.is_empty() {
            break c;
        }
    };
    let mut fl = vec!["container", "vm-passthrough", "vm-vgpu"];
    for k in (1..fl.len()).rev() {
        fl.swap(k, rng.below(k as u64 + 1) as usize);
    }
    fl.truncate(1 + rng.below(2) as usize);
    let flavors: Vec<String> = fl
        .iter()
        .map(|f| {
            let res: Vec<String> = covered
                .iter()
                .map(|r| {
                    let nominal = rng.below(4);
                    let mut q = format!("name: {r}, nominalQuota: \"{nominal}\"");
                    if cohort.is_some() && rng.below(3) == 0 {
                        q.push_str(&format!(", borrowingLimit: \"{}\"", rng.below(3)));
                    }
                    if cohort.is_some() && rng.below(3) == 0 {
                        q.push_str(&format!(", lendingLimit: \"{}\"", rng.below(nominal + 1)));
                    }
                    format!("{{{q}}}")
                })
                .collect();
            format!("      - {{name: {f}, resources: [{}]}}", res.join(", "))
        })
        .collect();
    let mut spec = String::from("  namespaceSelector: {}\n");
    if let Some(c) = cohort {
        spec.push_str(&format!("  cohortName: {c}\n"));
        if rng.below(4) == 0 {
            spec.push_str("  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n");
        }
    }
    let yaml = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n{spec}  resourceGroups:\n  - coveredResources: [{}]\n    flavors:\n{}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: {name}, namespace: gpu-kueue}}\nspec: {{clusterQueue: {name}}}\n",
        covered.join(", "),
        flavors.join("\n")
    );
    (yaml, covered)
}

/// Tallies of the quota differential.
#[derive(Default)]
struct QuotaTally {
    decisions: usize,
    agree: usize,
    outcomes: std::collections::BTreeMap<String, usize>,
    borrowed: usize,
    placed: usize,
    waiting_unservable: usize,
    not_yet_placed: usize,
}

/// `n` random quota scenarios on the lab's cluster, each with earlier workloads holding
/// quota: one ClusterQueue, or two in a cohort of their own (random `borrowingLimit`,
/// `lendingLimit`, `whenCanBorrow`), then 3-4 plain Pods (Kueue's `pod` integration: kwok
/// keeps a Pod no Job owns Running, so an admitted one holds its quota for the rest of the
/// scenario) asking 1-2 of a name, one at a time, each decided by Kueue before the next.
/// Per Pod: Kueue's decision (QuotaReserved, the flavor, the message's category) against
/// `judge_workload` on the objects as Kueue left them just before (the Workload stripped
/// of its verdict; usage from the admitted Workloads, not the ClusterQueues' status,
/// which may lag). Then the scheduler's side: an admitted Pod that is bound runs on one of
/// its flavor's nodes, and one whose flavor's nodes advertise none of its name (gpuwl's
/// `kueue-flavor-cannot-serve`) is not bound. The scenario's Pods are deleted at its end.
fn differential_quota(kubeconfig: &str, seed: u64, n: usize) -> QuotaTally {
    use gpuwl_core::analysis::kueue::{QuotaCause, judge_workload};
    let offers = offers(kubeconfig);
    let mut rng = Lcg(seed ^ 0x5157_4f54_4121);
    let mut t = QuotaTally::default();
    let mut rows = Vec::new();
    let mut disagree = Vec::new();
    for i in 0..n {
        let scen = format!("q52-{seed}-{i}");
        let ncq = 1 + rng.below(2) as usize;
        let cohort = (ncq == 2).then(|| format!("{scen}-co"));
        let mut queues = Vec::new();
        let mut yaml = String::new();
        for j in 0..ncq {
            let (y, covered) = random_queue(&mut rng, &format!("{scen}-{j}"), cohort.as_deref());
            yaml.push_str(&y);
            yaml.push_str("---\n");
            queues.push((format!("{scen}-{j}"), covered));
        }
        let (code, _, err) = kubectl(kubeconfig, &["apply", "-f", "-"], &yaml);
        assert_eq!(code, 0, "{err}\n{yaml}");
        for (q, _) in &queues {
            let (code, _, err) = kubectl(
                kubeconfig,
                &[
                    "wait",
                    "--for=condition=Active",
                    &format!("clusterqueues.kueue.x-k8s.io/{q}"),
                    "--timeout=30s",
                ],
                "",
            );
            assert_eq!(code, 0, "{err}");
        }
        let mut admitted_pods = Vec::new();
        for p in 0..3 + rng.below(2) {
            let (q, covered) = &queues[rng.below(ncq as u64) as usize];
            let want = if rng.below(6) == 0 {
                [
                    "nvidia.com/gpu",
                    "nvidia.com/GA102GL_A10",
                    "nvidia.com/NVIDIA_A10-12Q",
                ][rng.below(3) as usize]
            } else {
                covered[rng.below(covered.len() as u64) as usize]
            };
            let count = 1 + rng.below(2);
            let pod = format!("{scen}-p{p}");
            let pod_yaml = format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: gpu-kueue, labels: {{kueue.x-k8s.io/queue-name: {q}, d52q: {scen}}}}}\nspec:\n  restartPolicy: Never\n  containers: [{{name: c, image: x, resources: {{limits: {{{want}: \"{count}\"}}}}}}]\n"
            );
            let (code, _, err) = kubectl(kubeconfig, &["apply", "-f", "-"], &pod_yaml);
            assert_eq!(code, 0, "{err}\n{pod_yaml}");
            let KueueDecision {
                admitted,
                message,
                flavor: kueue_flavor,
                bare,
            } = kueue_decision(kubeconfig, &pod, want);
            // gpuwl's judgment on the objects as Kueue left them, this Workload bare.
            let mut objects = kueue_objects(kubeconfig, true);
            for cq in objects.cluster_queues.iter_mut() {
                cq.reserved.clear();
            }
            objects.workloads.retain(|o| o.key() != bare.key());
            let v = judge_workload(&bare, &objects, None);
            let ours_admitted = matches!(v.cause, QuotaCause::Fits | QuotaCause::FlavorCannotServe);
            let ours_flavor = v.flavor.get(want).cloned();
            let kueue_cat = if admitted {
                "admitted"
            } else {
                kueue_category(&message)
            };
            let ours_cat = if ours_admitted {
                "admitted"
            } else {
                v.cause.as_str()
            };
            let agree = admitted == ours_admitted
                && (!admitted || kueue_flavor == ours_flavor)
                && kueue_cat == ours_cat;
            t.decisions += 1;
            *t.outcomes
                .entry(match &kueue_flavor {
                    Some(f) if admitted => format!("admitted in {f}"),
                    _ => kueue_cat.to_owned(),
                })
                .or_default() += 1;
            if admitted && v.message.contains("borrowing from cohort") {
                t.borrowed += 1;
            }
            let row = format!(
                "{pod} ({q}, cohort {cohort:?}) asks {count} {want}: Kueue {kueue_cat} {kueue_flavor:?} ({message}) / gpuwl {ours_cat} {ours_flavor:?} ({})",
                v.message
            );
            if agree {
                t.agree += 1;
            } else {
                disagree.push(row.clone());
            }
            rows.push(row);
            if let (true, Some(f)) = (admitted, kueue_flavor) {
                admitted_pods.push((pod, f, want));
            }
        }
        // The scheduler's side of the admitted Pods.
        let (_, out, _) = kubectl(
            kubeconfig,
            &[
                "get",
                "pods",
                "-n",
                "gpu-kueue",
                "-l",
                &format!("d52q={scen}"),
                "-o",
                "json",
            ],
            "",
        );
        let pods: serde_json::Value = serde_json::from_str(&out).unwrap();
        for (pod, flavor, want) in admitted_pods {
            let p = pods["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["metadata"]["name"] == pod.as_str())
                .unwrap();
            let node = p["spec"]["nodeName"].as_str().unwrap_or("");
            let (nodes, advertised) = &offers[&flavor];
            let servable = advertised[want].as_i64().unwrap_or(0) > 0;
            if !node.is_empty() {
                t.placed += 1;
                if !nodes.iter().any(|n| n == node) || !servable {
                    disagree.push(format!(
                        "{pod}: admitted in {flavor}, bound to {node} (flavor's nodes {nodes:?}, advertising {advertised})"
                    ));
                }
            } else if !servable {
                t.waiting_unservable += 1;
            } else {
                t.not_yet_placed += 1;
            }
        }
        let (code, _, err) = kubectl(
            kubeconfig,
            &[
                "delete",
                "pods",
                "-n",
                "gpu-kueue",
                "-l",
                &format!("d52q={scen}"),
                "--wait=false",
            ],
            "",
        );
        assert_eq!(code, 0, "{err}");
    }
    eprintln!("{}", rows.join("\n"));
    eprintln!(
        "quota differential (seed {seed}, {n} scenarios): {} of {} decisions agree; Kueue's outcomes {:?}; {} admitted by borrowing; after admission {} placed on their flavor's nodes, {} waiting at the scheduler as gpuwl says (flavor cannot serve), {} not placed yet",
        t.agree,
        t.decisions,
        t.outcomes,
        t.borrowed,
        t.placed,
        t.waiting_unservable,
        t.not_yet_placed
    );
    assert!(
        disagree.is_empty(),
        "{} disagreements (seed {seed}):\n{}",
        disagree.len(),
        disagree.join("\n")
    );
    t
}
