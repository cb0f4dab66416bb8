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
}
