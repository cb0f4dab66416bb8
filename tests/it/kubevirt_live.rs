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
        let (_, out, _) = kubectl(
            kubeconfig.trim(),
            &["get", "node", "kwok-node-0", "-o", "json"],
            "",
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
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

const LAB_CLUSTER: &str = "kv37-it-lab";

/// The lab's result files that hold no timestamps or uids (as in tests/it/gpu_operator.rs).
const SEED_FILES: [&str; 13] = [
    "out/01-nodes.txt",
    "out/operands.txt",
    "out/03-resources.txt",
    "out/04-container.txt",
    "out/05-passthrough.txt",
    "out/06-placement.txt",
    "out/07-cross.txt",
    "out/consistency.txt",
    "bin/check-config.sh",
    "k8s/pod-container.yaml",
    "k8s/pod-passthrough.yaml",
    "k8s/pod-vgpu.yaml",
    "k8s/pod-cross.yaml",
];

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

#[test]
#[ignore = "needs local control plane"]
fn lab_kubevirt_places_real_vmis_and_keeps_the_seed_files() {
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(LAB_CLUSTER);
    let with_kv = tempfile::tempdir().unwrap();
    let out = gpuwl_ok(&[
        "lab",
        "--kubevirt",
        "--cluster-name",
        LAB_CLUSTER,
        "--root",
        with_kv.path().to_str().unwrap(),
    ]);
    assert!(
        out.contains("[kubevirt] permittedHostDevices from gpuwl kubevirt generate, applied: nvidia.com/GA102GL_A10, nvidia.com/NVIDIA_A10-12Q"),
        "{out}"
    );
    let kv = std::fs::read_to_string(with_kv.path().join("out/kubevirt.txt")).unwrap();
    let lines: Vec<&str> = kv.lines().collect();
    assert_eq!(lines.len(), 3, "{kv}");
    assert!(
        lines[0].starts_with("vmi-passthrough VirtualMachineInstance nvidia.com/GA102GL_A10 virt-launcher-vmi-passthrough-")
            && lines[0].ends_with(" lab-node-1 Scheduled"),
        "{kv}"
    );
    assert!(
        lines[1].starts_with(
            "vmi-vgpu VirtualMachine nvidia.com/NVIDIA_A10-12Q virt-launcher-vmi-vgpu-"
        ) && lines[1].ends_with(" lab-node-2 Scheduled"),
        "{kv}"
    );
    assert_eq!(
        lines[2],
        "vm-cross VirtualMachine nvidia.com/gpu none none Pending FailedCreate: failed to render launch manifest: GPU nvidia.com/gpu is not permitted in permittedHostDevices configuration"
    );
    // A plain lab on the same cluster writes the same seed files.
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
        let b = std::fs::read(with_kv.path().join(f)).unwrap();
        assert!(
            a == b,
            "{f} differs:\n{}\nvs\n{}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
    assert!(!plain.path().join("out/kubevirt.txt").exists());
}
