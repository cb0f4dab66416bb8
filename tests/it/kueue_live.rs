//! The real Kueue (v0.17.0) on the local control plane: `gpuwl lab --kueue` on its own
//! cluster — Kueue's manager started and supervised, one Job admitted and placed, one held
//! by the mis-named quota — then `check --effective` reporting that quota, `explain job`
//! agreeing with Kueue's message, and the seed's files as a plain lab writes them.
//! Kueue is built once per cache key.

use crate::common::{ClusterDown, gpuwl, gpuwl_ok, one_cluster_at_a_time};

const LAB_CLUSTER: &str = "gpuwl-it-kueue-lab";

/// The lab's result files that hold no timestamps or uids (as in tests/it/kubevirt_live.rs).
const SEED_FILES: [&str; 9] = [
    "out/01-nodes.txt",
    "out/operands.txt",
    "out/03-resources.txt",
    "out/04-container.txt",
    "out/05-passthrough.txt",
    "out/06-placement.txt",
    "out/07-cross.txt",
    "out/consistency.txt",
    "bin/check-config.sh",
];

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

    // The seed's files are a plain lab's.
    let plain = tempfile::tempdir().unwrap();
    gpuwl_ok(&[
        "lab",
        "--cluster-name",
        LAB_CLUSTER,
        "--root",
        plain.path().to_str().unwrap(),
    ]);
    for f in SEED_FILES {
        let a = std::fs::read(plain.path().join(f)).unwrap();
        let b = std::fs::read(root.path().join(f)).unwrap();
        assert!(
            a == b,
            "{f} differs:\n{}\nvs\n{}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
    assert!(!plain.path().join("out/kueue.txt").exists());

    // A small seed of the differential against the real Kueue (bench: GPUWL_KUEUE_SCENARIOS).
    let n = std::env::var("GPUWL_KUEUE_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let seed = std::env::var("GPUWL_KUEUE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(52);
    differential(kubeconfig, seed, n);
}

/// `kubectl --kubeconfig K ARGS…` with `stdin`; (exit code, stdout, stderr).
fn kubectl(kubeconfig: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=30s")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let wl = loop {
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
                w["metadata"]["ownerReferences"][0]["name"] == name.as_str()
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
                break w.clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no decision for {name}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        };
        let mut w = wl.clone();
        w["kind"] = serde_json::json!("Workload");
        let kueue_wl = gpuwl::input::kueue::workload(&w).unwrap();
        let admitted = kueue_wl.is("QuotaReserved");
        let message = kueue_wl
            .condition("QuotaReserved")
            .map(|c| c.message.clone())
            .unwrap_or_default();
        let kueue_flavor = kueue_wl
            .assignments
            .iter()
            .find_map(|a| a.flavors.get(want).cloned());
        // gpuwl's judgment, before Kueue's verdict.
        let (_, out, _) = kubectl(
            kubeconfig,
            &[
                "get",
                "resourceflavors.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,localqueues.kueue.x-k8s.io",
                "-A",
                "-o",
                "json",
            ],
            "",
        );
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        let mut objects = gpuwl::input::kueue::from_values(&[list]).unwrap();
        for cq in objects.cluster_queues.iter_mut().filter(|c| c.name == name) {
            cq.reserved.clear();
        }
        let mut bare = kueue_wl.clone();
        bare.conditions.clear();
        bare.admitted_to = None;
        bare.assignments.clear();
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
