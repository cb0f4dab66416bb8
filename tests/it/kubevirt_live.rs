//! The real KubeVirt (virt-api, virt-controller v1.7.0) on the local control plane:
//! `gpuwl cluster up --kubevirt` supervised and stopped, and `gpuwl lab --kubevirt`, where
//! gpuwl's `explain vmi` causes are checked against what virt-controller and the scheduler
//! did. Each test has its own cluster; KubeVirt is built once per cache key
//! (`scripts/test.sh` builds it ahead).

use std::time::{Duration, Instant};

use crate::common::{ClusterDown, gpuwl, gpuwl_ok, one_cluster_at_a_time};

const UP_CLUSTER: &str = "kv37-it-up";

/// The pid recorded for `component` of cluster `name`, if any.
fn pid_of(name: &str, component: &str) -> Option<u32> {
    let status = gpuwl(&["cluster", "status", "--name", name]).1;
    status
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{component} ")))
        .and_then(|l| {
            let mut w = l.split_whitespace();
            w.find(|x| *x == "pid")?;
            w.next()?.parse().ok()
        })
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|st| st != "Z" && st != "X")
}

#[test]
#[ignore = "needs local control plane"]
fn cluster_up_kubevirt_is_supervised_and_down_leaves_no_process() {
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(UP_CLUSTER);
    let (code, _, err) = gpuwl(&[
        "cluster",
        "up",
        "--name",
        UP_CLUSTER,
        "--nodes",
        "1",
        "--kubevirt",
        "--fresh",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("KubeVirt v1.7.0 (virt-api, virt-controller) ready in"),
        "{err}"
    );
    let status = gpuwl_ok(&["cluster", "status", "--name", UP_CLUSTER]);
    for c in ["virt-api", "virt-controller", "kubevirt-nodes"] {
        let line = status
            .lines()
            .find(|l| l.trim_start().starts_with(c))
            .unwrap_or_else(|| panic!("{c} missing:\n{status}"));
        assert!(line.ends_with("healthy"), "{line}");
    }
    // What virt-handler would publish is on the node.
    let kubeconfig = gpuwl_ok(&["cluster", "kubeconfig", "--name", UP_CLUSTER]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = std::process::Command::new("kubectl")
            .args([
                "--kubeconfig",
                kubeconfig.trim(),
                "get",
                "node",
                "kwok-node-0",
                "-o",
                "json",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if v["metadata"]["labels"]["kubevirt.io/schedulable"] == "true"
            && v["status"]["allocatable"]["devices.kubevirt.io/kvm"] == "1k"
        {
            break;
        }
        assert!(Instant::now() < deadline, "node not published: {v}");
        std::thread::sleep(Duration::from_secs(1));
    }

    // The supervisor restarts virt-controller when it exits.
    let old = pid_of(UP_CLUSTER, "virt-controller").expect("virt-controller pid");
    unsafe {
        libc::kill(old as i32, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now = pid_of(UP_CLUSTER, "virt-controller");
        if now.is_some_and(|p| p != old) {
            let status = gpuwl(&["cluster", "status", "--name", UP_CLUSTER]).1;
            if status
                .lines()
                .any(|l| l.trim_start().starts_with("virt-controller") && l.ends_with("healthy"))
            {
                break;
            }
        }
        assert!(Instant::now() < deadline, "virt-controller not restarted");
        std::thread::sleep(Duration::from_secs(1));
    }

    // down stops every process, KubeVirt's included.
    let status = gpuwl_ok(&["cluster", "status", "--name", UP_CLUSTER]);
    let pids: Vec<u32> = status
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.find(|x| *x == "pid" || *x == "(pid")?;
            w.next()?.trim_end_matches(';').parse().ok()
        })
        .collect();
    assert!(pids.len() >= 9, "{status}");
    gpuwl_ok(&["cluster", "down", "--name", UP_CLUSTER]);
    let left: Vec<u32> = pids.into_iter().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running after down: {left:?}");
}
