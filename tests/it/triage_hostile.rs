//! `gpuwl triage` and `--snapshot` on hostile input: cut-short describe text, missing
//! files, binary logs, a 1 GiB log, a damaged or foreign archive. Each gives a clear
//! error (exit 2) or a partial report that says what is missing; never a panic.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::kit::gpuwl;

const NODE: &str = "Name:               gpu-a
Roles:              <none>
Labels:             nvidia.com/gpu.present=true
                    nvidia.com/gpu.workload.config=container
Annotations:        node.alpha.kubernetes.io/ttl: 0
Taints:             <none>
Unschedulable:      false
Capacity:
  cpu:             32
  nvidia.com/gpu:  2
Allocatable:
  cpu:             32
  nvidia.com/gpu:  2
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests   Limits
  --------           --------   ------
  nvidia.com/gpu     1          1
Events:              <none>
";

const PODS: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: nvidia-device-plugin-daemonset-x1
    namespace: gpu-operator
    labels: {app: nvidia-device-plugin-daemonset}
    ownerReferences: [{kind: DaemonSet, name: nvidia-device-plugin-daemonset}]
  spec:
    nodeName: gpu-a
    containers: [{name: nvidia-device-plugin, image: x}]
  status:
    phase: Running
    conditions: [{type: Ready, status: 'False'}]
    containerStatuses:
    - name: nvidia-device-plugin
      ready: false
      restartCount: 3
      state: {waiting: {reason: CrashLoopBackOff}}
";

const DS: &str = "apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: nvidia-device-plugin-daemonset, namespace: gpu-operator}
  spec: {template: {spec: {nodeSelector: {nvidia.com/gpu.deploy.device-plugin: 'true'}}}}
  status: {desiredNumberScheduled: 1, numberReady: 0, numberAvailable: 0}
";

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::write(dir.join(name), data).unwrap();
}

fn triage(path: &Path) -> (i32, Value, String) {
    let (rc, out, err) = gpuwl(&["triage", path.to_str().unwrap(), "-o", "json"]);
    assert!(!err.contains("panicked"), "{err}");
    let v = if rc == 2 {
        Value::Null
    } else {
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    (rc, v, err)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn cut_short_describe_text_reads_what_is_there_and_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let two = format!("{NODE}\n\n{}", NODE.replace("gpu-a", "gpu-b"));
    // Cut in the middle of gpu-b's `Allocatable:` line.
    let cut = &two[..two.rfind("Allocatable:").unwrap() + 5];
    write(dir.path(), "gpu_nodes.descr", cut.as_bytes());
    let (rc, t, _) = triage(dir.path());
    assert_eq!(rc, 0);
    assert_eq!(t["nodesDescribed"], 2);
    assert_eq!(t["check"]["lines"], serde_json::json!(["OK=2"]));
    let lacking = strings(&t["lacking"]);
    assert!(
        lacking.contains(
            &"node gpu-b: its description lacks Allocatable, Allocated resources, Events (cut short?)"
                .to_owned()
        ),
        "{lacking:?}"
    );
    for file in [
        "gpu_operand_pods.yaml",
        "gpu_operand_ds.yaml",
        "gpu_operator_pod.log",
        "cluster_policy.yaml",
    ] {
        assert!(
            lacking.iter().any(|l| l.starts_with(&format!("{file}: "))),
            "{file}: {lacking:?}"
        );
    }
    // gpu-a's allocated request is read from its table.
    assert_eq!(t["operatorState"][0]["allocated"]["nvidia.com/gpu"], "1");
}

#[test]
fn binary_and_control_character_logs_are_never_printed_raw() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gpu_nodes.descr", NODE.as_bytes());
    write(dir.path(), "gpu_operand_pods.yaml", PODS.as_bytes());
    write(dir.path(), "gpu_operand_ds.yaml", DS.as_bytes());
    let mut bin = vec![0x7f, b'E', b'L', b'F', 0, 0, 2, 1];
    bin.extend((0..4096u32).map(|i| (i * 7 % 256) as u8));
    write(
        dir.path(),
        "gpu_operand_pod_nvidia-device-plugin-daemonset-x1.log",
        &bin,
    );
    write(
        dir.path(),
        "gpu_operand_pod_nvidia-device-plugin-daemonset-x1.previous.log",
        b"E0101 failed: \x1b[2J\x1b]0;owned\x07 evil\n",
    );
    let (rc, t, _) = triage(dir.path());
    assert_eq!(rc, 1, "a DaemonSet is not ready");
    let pod = &t["daemonsetsNotReady"][0]["pods"][0];
    assert_eq!(pod["log"]["binary"], true);
    assert_eq!(pod["log"]["lines"], serde_json::json!([]));
    assert_eq!(
        pod["previousLog"]["lines"],
        serde_json::json!(["E0101 failed: \\u{1b}[2J\\u{1b}]0;owned\\u{7} evil"])
    );
    let (_, text, _) = gpuwl(&["triage", dir.path().to_str().unwrap()]);
    assert!(!text.contains('\x1b') && !text.contains('\0'), "{text:?}");
    assert!(
        text.contains("log: binary data (4104 bytes), not shown"),
        "{text}"
    );
}

#[test]
fn a_one_gib_log_costs_its_last_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gpu_nodes.descr", NODE.as_bytes());
    write(dir.path(), "gpu_operand_pods.yaml", PODS.as_bytes());
    write(dir.path(), "gpu_operand_ds.yaml", DS.as_bytes());
    let log = dir
        .path()
        .join("gpu_operand_pod_nvidia-device-plugin-daemonset-x1.log");
    let mut f = std::fs::File::create(&log).unwrap();
    // Sparse: 1 GiB of zeros, then 100 KiB of text at the end.
    f.set_len(1 << 30).unwrap();
    std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)).unwrap();
    let mut tail = Vec::new();
    for i in 0..100 {
        writeln!(tail, "I0101 retrying {i:04} {}", "x".repeat(1000)).unwrap();
    }
    tail.extend_from_slice(b"E0101 could not load NVML: driver not loaded\nI0101 backing off\n");
    f.write_all(&tail).unwrap();
    drop(f);
    let (rc, t, _) = triage(dir.path());
    assert_eq!(rc, 1);
    let l = &t["daemonsetsNotReady"][0]["pods"][0]["log"];
    assert_eq!(l["bytes"], (1u64 << 30) + tail.len() as u64);
    assert_eq!(l["binary"], false);
    assert_eq!(l["errors"], true);
    assert_eq!(
        l["lines"],
        serde_json::json!(["E0101 could not load NVML: driver not loaded"])
    );
}

#[test]
fn missing_files_and_foreign_paths() {
    let empty = tempfile::tempdir().unwrap();
    let (rc, _, err) = triage(empty.path());
    assert_eq!(rc, 2);
    assert!(
        err.contains("no file of a GPU Operator must-gather bundle"),
        "{err}"
    );
    let (rc, _, err) = triage(&empty.path().join("nope"));
    assert_eq!(rc, 2);
    assert!(err.contains("nope"), "{err}");
    let junk = empty.path().join("junk.tar");
    std::fs::write(&junk, b"this is not a tar archive at all, just text\n").unwrap();
    let (rc, _, err) = triage(&junk);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("junk.tar"), "{err}");

    // Only the marker of a missing ClusterPolicy and the script's log saying it stopped.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "cluster_policy.missing", b"");
    write(
        dir.path(),
        "must-gather.log",
        b"Get the operator namespaces\nFATAL: could not find nodes with NVIDIA PCI labels\n",
    );
    let (rc, t, _) = triage(dir.path());
    assert_eq!(rc, 0);
    assert_eq!(t["nodesDescribed"], 0);
    let lacking = strings(&t["lacking"]);
    assert!(
        lacking.contains(
            &"everything after the script stopped: FATAL: could not find nodes with NVIDIA PCI labels"
                .to_owned()
        ),
        "{lacking:?}"
    );
    assert!(
        lacking
            .contains(&"a ClusterPolicy: the cluster had none (cluster_policy.missing)".to_owned()),
        "{lacking:?}"
    );
}

#[test]
fn bad_yaml_and_a_damaged_tarball_give_partial_reports() {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("bundle");
    std::fs::create_dir(&b).unwrap();
    write(&b, "gpu_nodes.descr", NODE.as_bytes());
    write(
        &b,
        "gpu_operand_pods.yaml",
        b"apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: [oops\n",
    );
    write(&b, "gpu_operand_ds.yaml", DS.as_bytes());
    let (rc, t, _) = triage(&b);
    assert_eq!(rc, 1);
    let problems = strings(&t["problems"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("gpu_operand_pods.yaml: "),
        "{problems:?}"
    );
    assert_eq!(
        t["daemonsetsNotReady"][0]["why"],
        serde_json::json!([
            "0 of 1 pods ready",
            "no pod of it is in gpu_operand_pods.yaml"
        ])
    );
    // A tarball cut in its second member: the first one is read, the damage is said.
    write(&b, "gpu_operand_pods.yaml", PODS.as_bytes());
    let tar = dir.path().join("b.tar");
    let st = std::process::Command::new("tar")
        .args([
            "-cf",
            tar.to_str().unwrap(),
            "-C",
            b.to_str().unwrap(),
            "gpu_nodes.descr",
            "gpu_operand_pods.yaml",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&tar).unwrap();
    let cut = dir.path().join("cut.tar");
    std::fs::write(&cut, &bytes[..512 * 4 + 100]).unwrap();
    let (rc, t, err) = triage(&cut);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(t["nodesDescribed"], 1);
    let problems = strings(&t["problems"]);
    assert!(
        problems.iter().any(|p| p.starts_with("the archive is cut short or damaged after 2 members (gpu_operand_pods.yaml, the last one, may be incomplete): ")),
        "{problems:?}"
    );
}

#[test]
fn snapshot_files_that_are_not_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("x.tar");
    std::fs::write(&junk, b"not a tar").unwrap();
    for args in [
        vec!["check", "--snapshot"],
        vec!["inventory", "--snapshot"],
        vec!["explain", "pod", "a/b", "--snapshot"],
    ] {
        let (rc, out, err) = gpuwl(&[args.as_slice(), &[junk.to_str().unwrap()]].concat());
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert!(err.contains("x.tar"), "{err}");
    }
    // A tar of other files: not a snapshot.
    let other = dir.path().join("other.tar");
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(3);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "nodes.json", &b"{}\n"[..]).unwrap();
    std::fs::write(&other, b.into_inner().unwrap()).unwrap();
    let (rc, _, err) = gpuwl(&["check", "--snapshot", other.to_str().unwrap()]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("not a gpuwl snapshot: the first member is not snapshot.json"),
        "{err}"
    );
    // The file flags and --snapshot exclude each other.
    let (rc, _, err) = gpuwl(&[
        "inventory",
        "--snapshot",
        other.to_str().unwrap(),
        "--nodes",
        "n.json",
    ]);
    assert_eq!(rc, 2);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn workload_pods_given_with_pods_are_explained_against_the_described_nodes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gpu_nodes.descr", NODE.as_bytes());
    let pods = dir.path().join("pods.yaml");
    std::fs::write(
        &pods,
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: train, namespace: ml}\n  spec:\n    containers: [{name: c, resources: {limits: {nvidia.com/gpu: '2'}}}]\n  status: {phase: Pending}\n",
    )
    .unwrap();
    let (rc, out, err) = gpuwl(&[
        "triage",
        dir.path().to_str().unwrap(),
        "--pods",
        pods.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    let p = &t["pendingGpuPods"];
    assert_eq!(p.as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p[0]["pod"], "ml/train");
    // gpu-a has 2 allocatable and 1 allocated (its `Allocated resources` table).
    assert_eq!(p[0]["causeCode"], "insufficient", "{p}");
    assert!(
        p[0]["cause"].as_str().unwrap().contains("gpu-a has 1 free"),
        "{p}"
    );
    let lacking = strings(&t["lacking"]);
    assert!(
        !lacking
            .iter()
            .any(|l| l.starts_with("workload pods outside")),
        "{lacking:?}"
    );
}

#[test]
fn waiting_vms_given_with_pods_get_the_verdict_every_command_gives() {
    // Issue 47: `--pods` may hold VMIs and VMs (`kubectl get pods,vmis,vms -A`); those that
    // wait with no virt-launcher pod are judged (under `--kubevirt`'s CR) beside the pods;
    // a VMI whose launcher is listed is judged through that pod, a stopped VM not at all.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gpu_nodes.descr", NODE.as_bytes());
    let gpus = |d: &str| {
        serde_json::json!({"domain": {"devices": {"gpus": [{"name": "g", "deviceName": d}]},
        "resources": {"requests": {"memory": "1Gi"}}}})
    };
    let meta = |n: &str| serde_json::json!({"name": n, "namespace": "gpu-vm"});
    let items = serde_json::json!([
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": meta("vm-cross"),
         "spec": gpus("nvidia.com/gpu"), "status": {"phase": "Pending"}},
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta("vm-stopped"),
         "spec": {"runStrategy": "Halted", "template": {"spec": gpus("nvidia.com/GA102GL_A10")}}},
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta("vm-wants"),
         "spec": {"running": true, "template": {"spec": gpus("nvidia.com/NVIDIA_A10-12Q")}}},
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta("vm-run"),
         "spec": {"runStrategy": "Always", "template": {"spec": gpus("nvidia.com/GA102GL_A10")}}},
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": meta("vm-run"),
         "spec": gpus("nvidia.com/GA102GL_A10"), "status": {"phase": "Scheduling"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta("virt-launcher-vm-run-abcde"),
         "spec": {"containers": [{"name": "compute", "resources": {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]},
         "status": {"phase": "Pending"}}
    ]);
    let pods = dir.path().join("all.json");
    std::fs::write(
        &pods,
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    let kv = dir.path().join("kv.yaml");
    std::fs::write(
        &kv,
        "kind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt}\nspec:\n  configuration:\n    permittedHostDevices:\n      pciHostDevices:\n      - {pciVendorSelector: \"10DE:2236\", resourceName: nvidia.com/GA102GL_A10, externalResourceProvider: true}\n      mediatedDevices:\n      - {mdevNameSelector: \"NVIDIA A10-12Q\", resourceName: nvidia.com/NVIDIA_A10-12Q, externalResourceProvider: true}\n",
    )
    .unwrap();
    let args = |o: &str| {
        vec![
            "triage".to_string(),
            dir.path().to_str().unwrap().to_string(),
            "--pods".into(),
            pods.to_str().unwrap().into(),
            "--kubevirt".into(),
            kv.to_str().unwrap().into(),
            "-o".into(),
            o.into(),
        ]
    };
    let json_args = args("json");
    let (rc, out, err) = gpuwl(&json_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(rc, 1, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    let got: Vec<(String, String, String, String)> = t["pendingGpuPods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or("Pod").to_string();
            (s("pod"), s("kind"), s("causeCode"), s("class"))
        })
        .collect();
    let want = |p: &str, k: &str, c: &str| {
        (
            p.to_string(),
            k.to_string(),
            c.to_string(),
            "unservable".to_string(),
        )
    };
    assert_eq!(
        got,
        [
            want("gpu-vm/vm-cross", "VirtualMachineInstance", "not-permitted"),
            want("gpu-vm/vm-wants", "VirtualMachine", "unadvertised-name"),
            want(
                "gpu-vm/virt-launcher-vm-run-abcde",
                "Pod",
                "unadvertised-name"
            ),
        ]
    );
    let text_args = args("text");
    let (_, text, _) = gpuwl(&text_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        text.contains("  gpu-vm/vm-cross (VirtualMachineInstance): not-permitted [unservable]: "),
        "{text}"
    );
    // A bad CR file: a one-line error naming the file and field, exit 2.
    std::fs::write(&kv, "kind: KubeVirt\nspec: {configuration: {developerConfiguration: {memoryOvercommit: lots}}}\n").unwrap();
    let (rc, _, err) = gpuwl(&json_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(rc, 2);
    assert_eq!(
        err.trim(),
        format!(
            "gpuwl: {}: spec.configuration.developerConfiguration.memoryOvercommit: expected a whole number",
            kv.display()
        )
    );
}
