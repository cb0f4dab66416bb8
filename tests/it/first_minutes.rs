//! Issue 42, "the first ten minutes, round 3": the stumbles one step past the README, each
//! with the command that showed it. Live ones are `#[ignore = "needs local control plane"]`.

use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

use crate::kit::gpuwl;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn data(f: &str) -> String {
    format!("{ROOT}/tests/data/{f}")
}

/// Runs gpuwl at `columns` columns in `dir`, without a kubeconfig: (exit, stdout, stderr).
fn at_width(columns: usize, dir: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cargo_bin("gpuwl"))
        .args(args)
        .current_dir(dir)
        .env("COLUMNS", columns.to_string())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Item 1: A fix's command is printed whole on a line of its own when the line must wrap.
#[test]
fn fix_commands_are_never_wrapped() {
    let dir = data("explain/own-label-typo-excludes");
    let args = [
        "explain",
        "--pod",
        "pod.yaml",
        "--nodes",
        "nodes.json",
        "--pods",
        "pods.json",
    ];
    let (rc, out, err) = at_width(80, &dir, &args);
    assert_eq!(rc, 1, "{err}");
    let fix: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("Fix:")).collect();
    assert_eq!(
        fix[..2],
        [
            "Fix: relabel the node:",
            "  kubectl label node n-1 nvidia.com/gpu.workload.config=vm-passthrough --overwrite",
        ],
        "{out}"
    );
    // Wide enough, the line stays as it was.
    let (_, out, _) = at_width(200, &dir, &args);
    assert!(
        out.contains("Fix: relabel the node: kubectl label node n-1 nvidia.com/gpu.workload.config=vm-passthrough --overwrite\n"),
        "{out}"
    );
    // Every kubectl in any wrapped line starts its own line, whatever the width.
    for width in [60, 80, 100] {
        let (_, out, _) = at_width(width, &dir, &args);
        for l in out.lines().filter(|l| l.contains("kubectl ")) {
            assert!(
                l.trim_start().starts_with("kubectl "),
                "{width}: {l}\n{out}"
            );
        }
    }
}

/// Item 2: With a machine format the findings are in the document; stderr stays quiet.
#[test]
fn machine_formats_keep_stderr_quiet() {
    let nodes = data("operator/nodes.json");
    let (_, _, err) = gpuwl(&["check", &nodes]);
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("note:") || l.starts_with("warning:"))
            .count(),
        9,
        "{err}"
    );
    for format in ["json", "yaml"] {
        for extra in [&[][..], &["--effective"][..]] {
            let mut args = vec!["check", nodes.as_str(), "-o", format];
            args.extend(extra);
            let (rc, out, err) = gpuwl(&args);
            assert_eq!(rc, 1, "{args:?}");
            assert_eq!(err, "", "{args:?}");
            assert!(out.contains("mig-config-failed"), "{args:?}");
        }
    }
}

/// Item 3: What --ignore left out is counted in the summary line and in the JSON gate.
#[test]
fn ignored_findings_are_counted() {
    let file = data("gate/mig-failed.json");
    let (rc, out, _) = gpuwl(&[
        "check",
        "--effective",
        "--ignore",
        "mig-config-failed",
        &file,
    ]);
    assert_eq!(rc, 0);
    assert_eq!(
        out,
        "OK: 2 GPU nodes judged by the workload the GPU Operator applies, no error, 0 warnings, 1 finding ignored (mig-config-failed)\n"
    );
    let (_, out, _) = gpuwl(&[
        "check",
        "--effective",
        "--ignore",
        "mig-config-failed",
        &file,
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["gate"]["ignored"],
        serde_json::json!({"mig-config-failed": 1})
    );
    assert_eq!(
        v["lines"].as_array().unwrap().last().unwrap(),
        "OK: 2 GPU nodes judged by the workload the GPU Operator applies, no error, 0 warnings, 1 finding ignored (mig-config-failed)"
    );
    // Nothing ignored: nothing said.
    let (_, out, _) = gpuwl(&["check", "--effective", &file]);
    assert!(!out.contains("ignored"), "{out}");
}

/// Item 4: a kubeconfig path from $KUBECONFIG is named as such; no kubeconfig at all
/// gives the way out.
#[test]
fn kubeconfig_errors_say_where_the_path_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let run = |env: Option<&str>| {
        let mut c = Command::new(cargo_bin("gpuwl"));
        c.arg("check")
            .env("HOME", dir.path())
            .env("GPUWL_STATE_DIR", dir.path().join("state"))
            .env_remove("KUBECONFIG");
        if let Some(v) = env {
            c.env("KUBECONFIG", v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (rc, err) = run(Some("nosuch"));
    assert_eq!(rc, Some(2));
    assert_eq!(
        err,
        "gpuwl: $KUBECONFIG=nosuch: cannot read: No such file or directory (os error 2)\n"
    );
    let (rc, err) = run(None);
    assert_eq!(rc, Some(3));
    assert_eq!(
        err,
        "gpuwl: no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG (none set, no ~/.kube/config, not in a pod); or start a local cluster: gpuwl cluster up\n"
    );
    // A ~/.kube/config that is there but broken is named, not "none found".
    std::fs::create_dir_all(dir.path().join(".kube")).unwrap();
    std::fs::write(dir.path().join(".kube/config"), "garbage: [").unwrap();
    let (rc, err) = run(None);
    assert_eq!(rc, Some(2), "{err}");
    assert!(
        err.contains(".kube/config: not a usable kubeconfig at line 1"),
        "{err}"
    );
}

/// Item 4, live: with no kubeconfig and only a non-default local cluster running, the way out
/// names it; once it is stopped, a refused connection names its --name.
#[test]
#[ignore = "needs local control plane"]
fn no_kubeconfig_names_the_running_local_cluster_and_its_name() {
    let _serial = crate::kit::one_cluster_at_a_time();
    let name = "h42";
    let _down = crate::kit::ClusterDown(name);
    let (rc, _, err) = gpuwl(&["cluster", "up", "--name", name]);
    assert_eq!(rc, 0, "{err}");
    let home = tempfile::tempdir().unwrap();
    // No ~/.kube/config (another HOME), the local clusters where they are.
    let out = Command::new(cargo_bin("gpuwl"))
        .arg("check")
        .env("HOME", home.path())
        .env("GPUWL_STATE_DIR", gpuwl::cluster::state_root())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // Alone, it is named with its export line; beside other local clusters (a developer's
    // machine), it is among those named.
    assert!(
        err.contains(&format!(
            "the local cluster {name} is running: export KUBECONFIG=\"$(gpuwl cluster kubeconfig --name {name})\""
        )) || (err.contains("local clusters running: ") && err.contains(name)),
        "{err}"
    );
    let kc = gpuwl(&["cluster", "kubeconfig", "--name", name]).1;
    // Item 5: the lab on a cluster of the user's, a --node that is not there: exit 2 before
    // anything is written, with the nearest node.
    let root = tempfile::tempdir().unwrap();
    let (rc, _, err) = gpuwl(&[
        "lab",
        "--kubeconfig",
        kc.trim(),
        "--node",
        "container=kwok-node-9",
        "--root",
        root.path().to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert_eq!(
        err,
        "gpuwl: --node container=kwok-node-9: no node kwok-node-9 in the cluster; did you mean kwok-node-0?\n"
    );
    // Stop its API server: the refused connection names the cluster's --name.
    let state = gpuwl::cluster::state_dir(name);
    let pid: i32 = std::fs::read_to_string(state.join("pids/kube-apiserver.pid"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("kube-apiserver pid");
    unsafe_kill(pid);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (rc, _, err) = gpuwl(&["check", "--kubeconfig", kc.trim()]);
    assert_eq!(rc, 3, "{err}");
    let hint = format!(
        "(the local cluster {name}: gpuwl cluster status --name {name}; gpuwl cluster up --name {name} starts it again)"
    );
    assert!(err.contains(&hint), "{err}");
    // serve's log says the same of a watch that cannot reach it.
    let mut serve = Command::new(cargo_bin("gpuwl"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig",
            kc.trim(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    let _ = serve.kill();
    let out = serve.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.lines()
            .any(|l| l.contains("watch nodes: ") && l.contains(&hint)),
        "{log}"
    );
}

fn unsafe_kill(pid: i32) {
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

/// Item 5: Did-you-mean for node and pod names, and for a label value that is a fragment.
#[test]
fn node_pod_and_label_names_get_a_did_you_mean() {
    let nodes = data("inventory/lab/nodes.json");
    let pods = data("inventory/lab/pods.json");
    let (rc, _, err) = gpuwl(&[
        "whatif",
        "relabel",
        "lab-node-9=container",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with("; did you mean one of lab-node-0, lab-node-1, lab-node-2?\n"),
        "{err}"
    );
    let (rc, _, err) = gpuwl(&[
        "explain",
        "gpu-vm/job-crosss",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with("no pod gpu-vm/job-crosss; did you mean gpu-vm/job-cross?\n"),
        "{err}"
    );
    let (rc, _, err) = gpuwl(&[
        "whatif",
        "relabel",
        "lab-node-1=passthrough",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with("\"passthrough\" is not one of container, vm-passthrough, vm-vgpu; did you mean vm-passthrough?\n"),
        "{err}"
    );
}

/// Item 7: plan says what a node would fail after a relabel as a hypothetical, with the
/// label it has now.
#[test]
fn plan_states_the_relabelled_node_as_a_hypothetical() {
    let (rc, out, err) = gpuwl(&[
        "plan",
        "--nodes",
        &data("inventory/lab/nodes.json"),
        "--pods",
        &data("inventory/lab/pods.json"),
        "-q",
        "--no-verify",
    ]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        out.contains("the pod's own constraints exclude every such node (lab-node-1 (labelled vm-passthrough now) would fail nodeSelector nvidia.com/gpu.workload.config=vm-passthrough once relabelled container): change the pod, not a label"),
        "{out}"
    );
    assert!(!out.contains("node has"), "{out}");
}

/// Item 10: snapshot checks its destination before it reads the cluster (here there is
/// none to read: the -o error comes first), names it and never a temporary file.
#[test]
fn snapshot_checks_its_destination_first() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["snapshot", "-o", "/nonexistent/x.tar"])
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "gpuwl: -o /nonexistent/x.tar: the folder /nonexistent does not exist\n"
    );
    assert!(out.stdout.is_empty());
    // A folder given as the file.
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["snapshot", "-o"])
        .arg(home.path())
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.ends_with(": is a folder\n"), "{err}");
    assert!(!err.contains(".gpuwl-"), "{err}");
}

/// Item 11: the inventory table keeps one header per column at every width (columns
/// are dropped, never renamed); the help's examples fit 80 columns or continue with `\`.
#[test]
fn inventory_headers_are_the_same_at_every_width() {
    let nodes = data("inventory/lab/nodes.json");
    let pods = data("inventory/lab/pods.json");
    let all = [
        "POOL",
        "RESOURCE",
        "NODES",
        "CAP",
        "ALLOCATABLE",
        "USED",
        "FREE",
        "PEND",
        "GPUS",
        "USE",
    ];
    let mut seen = Vec::new();
    for width in [80, 100, 120, 200] {
        let (rc, out, _) = at_width(
            width,
            ROOT,
            &["inventory", "--bars", "--nodes", &nodes, "--pods", &pods],
        );
        assert_eq!(rc, 0);
        let heads: Vec<String> = out
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .filter(|w| *w != "│")
            .map(str::to_owned)
            .collect();
        for h in &heads {
            assert!(all.contains(&h.as_str()), "{width}: {h}\n{out}");
        }
        // Wider never shows fewer columns.
        if let Some(prev) = seen.last() {
            assert!(heads.len() >= *prev, "{width}\n{out}");
        }
        seen.push(heads.len());
    }
    assert_eq!(seen[0], 5, "at 80: POOL RESOURCE ALLOCATABLE FREE PEND");
    let (_, help, _) = at_width(80, ROOT, &["serve", "--help"]);
    assert!(
        help.contains(
            "  gpuwl serve --kubeconfig kc --listen 127.0.0.1:9850 \\\n      --admission-listen 127.0.0.1:9443 --admission-register\n"
        ),
        "{help}"
    );
}

/// Item 6: the committed must-gather bundle (the real script against `lab --operator`)
/// reads back as the README shows: the mistyped label, the pod too large for any node,
/// every operand DaemonSet ready.
#[test]
fn the_committed_must_gather_bundle_triages() {
    let dir = data("triage");
    let (rc, out, err) = at_width(100, &dir, &["triage", "broken", "-o", "json"]);
    assert_eq!(rc, 1, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    let text = t.to_string();
    assert!(text.contains("MISMATCH=lab-node-1 label value \\\"vm-passthru\\\" is not one of container, vm-passthrough, vm-vgpu"), "{t:#}");
    assert!(text.contains("did you mean vm-passthrough?"), "{t:#}");
    assert!(text.contains("gpu-operator/gpu-burn"), "{t:#}");
    assert!(text.contains("too-large"), "{t:#}");
    let (rc, out, _) = at_width(100, &dir, &["triage", "broken"]);
    assert_eq!(rc, 1);
    assert!(
        out.starts_with("Triage of broken (operator namespace gpu-operator; 3 GPU nodes described; ClusterPolicy: cluster-policy)\n"),
        "{out}"
    );
    assert!(
        out.contains("Operand DaemonSets: 14 of 14 fully ready\n"),
        "{out}"
    );
    assert!(
        out.contains("  workloads: container 2, vm-vgpu 1\n"),
        "{out}"
    );
    // From anywhere, the path as given.
    let (rc, _, err) = gpuwl(&["triage", &data("triage/broken")]);
    assert_eq!(rc, 1, "{err}");
}

/// A bundle (the committed one, copied) with the lab's Kueue objects beside it (`--kueue`;
/// the script gathers none): the quota layer judged over the described nodes — the
/// passthrough node's label is mistyped, so the passthrough flavor selects no node and its
/// quota is an error — and the Job Kueue holds with explain's quota cause.
#[test]
fn triage_with_kueue_objects_reports_the_quota_layer() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    for e in std::fs::read_dir(data("triage/broken")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), bundle.join(e.file_name())).unwrap();
    }
    let kueue = data("kueue/lab-workloads.yaml");
    let b = bundle.to_str().unwrap();
    let (rc, out, err) = gpuwl(&["triage", b, "--kueue", &kueue, "-o", "json"]);
    assert_eq!(rc, 1, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    let q = &t["quota"];
    assert_eq!(q["objects"], serde_json::json!([3, 1, 1, 2]), "{q:#}");
    let codes: Vec<(&str, &str)> = q["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let o = r["object"].as_str().unwrap();
            r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |f| (o, f["code"].as_str().unwrap()))
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("ResourceFlavor/vm-passthrough", "kueue-flavor-no-gpu-node"),
            ("ClusterQueue/lab-gpus", "kueue-quota-not-advertised")
        ],
        "{q:#}"
    );
    assert_eq!(q["workloads"].as_array().unwrap().len(), 1, "{q:#}");
    assert_eq!(q["workloads"][0]["cause"], "kueue-name-not-covered");
    assert_eq!(
        q["workloads"][0]["workload"],
        "gpu-kueue/job-kueue-passthrough-8b2e4"
    );
    let (rc, out, _) = gpuwl(&["triage", b, "--kueue", &kueue]);
    assert_eq!(rc, 1);
    assert!(
        out.contains("\nKueue quota layer (--kueue: 3 flavor(s), 1 ClusterQueue(s), 1 LocalQueue(s), 2 Workload(s)):\n"),
        "{out}"
    );
    assert!(
        out.contains("  ERROR kueue-quota-not-advertised ClusterQueue/lab-gpus: quota 2 nvidia.com/gpu in flavor vm-passthrough, but the flavor selects no node: Kueue admits workloads for it that no node can run\n"),
        "{out}"
    );
    assert!(
        out.contains("  gpu-kueue/job-kueue-passthrough-8b2e4 kueue-name-not-covered: ClusterQueue lab-gpus has no quota on nvidia.com/GA102GL_A10 in any flavor"),
        "{out}"
    );
    // Without --kueue the section is not there.
    let (_, out, _) = gpuwl(&["triage", b]);
    assert!(!out.contains("Kueue quota layer"), "{out}");
    // docs/guide/kueue.md's example, run as written from tests/data/triage: its lines
    // between the two `...` come out together.
    let cmd = "gpuwl triage broken --kueue ../kueue/lab-workloads.yaml";
    let want = crate::readme::expected(cmd);
    assert_eq!(
        (
            want.first().map(String::as_str),
            want.last().map(String::as_str)
        ),
        (Some("..."), Some("...")),
        "{want:?}"
    );
    let out = Command::new(cargo_bin("gpuwl"))
        .args(cmd.split_whitespace().skip(1))
        .current_dir(data("triage"))
        .env("COLUMNS", "100")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<&str> = text.lines().collect();
    let middle: Vec<&str> = want[1..want.len() - 1].iter().map(String::as_str).collect();
    assert!(
        got.windows(middle.len()).any(|w| w == middle.as_slice()),
        "docs/guide/kueue.md's triage block not in the output:\n{text}"
    );
}

/// The commands of a line of text as a shell would run them: each `kubectl …` up to the
/// punctuation or the parenthesis that ends it (what copying it from the wide output runs).
fn commands_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("kubectl ") {
            let s = &rest[i..];
            let end = [" (", " —", ", ", "; ", ": "]
                .iter()
                .filter_map(|p| s.find(p))
                .min()
                .unwrap_or(s.len());
            out.push(s[..end].trim_end_matches(['.', ',', ';', ':']).to_owned());
            rest = &s[end..];
        }
    }
    out
}

/// Item 1, the virt-handler fix: its two kubectl commands are each printed whole on a line
/// of their own at 80 and 100 columns (at 100 the first one was split after `-l`).
#[test]
fn virt_handler_fix_commands_are_never_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pod.yaml"),
        r#"apiVersion: v1
kind: Pod
metadata:
  name: virt-launcher-vm-a-x7k2p
  namespace: gpu-vm
spec:
  nodeSelector:
    kubevirt.io/schedulable: "true"
  containers:
  - name: compute
    resources:
      limits:
        devices.kubevirt.io/kvm: "1"
        nvidia.com/GA102GL_A10: "1"
"#,
    )
    .unwrap();
    let node = |name: &str, labels: &str, alloc: &str| {
        format!(
            r#"{{"kind":"Node","metadata":{{"name":"{name}","labels":{{{labels}}}}},"status":{{"capacity":{{{alloc}}},"allocatable":{{{alloc}}}}}}}"#
        )
    };
    std::fs::write(
        dir.path().join("nodes.json"),
        format!(
            r#"{{"kind":"List","items":[{},{}]}}"#,
            node(
                "kv-gpu-a",
                r#""nvidia.com/gpu.workload.config":"vm-passthrough""#,
                r#""cpu":"32","memory":"256Gi","pods":"110","nvidia.com/GA102GL_A10":"1""#
            ),
            node(
                "kv-cpu-0",
                r#""kubevirt.io/schedulable":"true""#,
                r#""cpu":"32","memory":"256Gi","pods":"110","devices.kubevirt.io/kvm":"1000""#
            )
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pods.json"),
        r#"{"kind":"List","items":[]}"#,
    )
    .unwrap();
    let dir = dir.path().to_str().unwrap();
    let args = [
        "explain",
        "--pod",
        "pod.yaml",
        "--nodes",
        "nodes.json",
        "--pods",
        "pods.json",
    ];
    let (rc, wide, err) = at_width(1000, dir, &args);
    assert_eq!(rc, 1, "{err}");
    assert!(wide.contains("Cause (virt-handler)"), "{wide}");
    let fix = wide.lines().find(|l| l.starts_with("Fix:")).unwrap();
    let commands = commands_in(fix);
    assert_eq!(
        commands,
        [
            "kubectl get pods -n kubevirt -l kubevirt.io=virt-handler -o wide --field-selector spec.nodeName=kv-gpu-a",
            "kubectl get daemonset virt-handler -n kubevirt",
        ],
        "{fix}"
    );
    for width in [80, 100] {
        let (_, out, _) = at_width(width, dir, &args);
        for c in &commands {
            assert!(
                out.lines().any(|l| l.trim_start() == c),
                "{width}: {c} not on a line of its own\n{out}"
            );
        }
        for l in out.lines().filter(|l| l.contains("kubectl ")) {
            assert!(
                l.trim_start().starts_with("kubectl "),
                "{width}: {l}\n{out}"
            );
        }
    }
}

/// Item 11 / item 1, in `--help`: at any width every example command is still one command
/// when copied (clap wraps help text at spaces; a longer example is split with ` \`
/// instead), and a comment that wraps stays a comment.
#[test]
fn help_examples_stay_whole_at_every_width() {
    /// The example commands of a help text, `\` continuations joined, spaces normalised.
    fn examples(help: &str) -> Vec<String> {
        let programs = ["gpuwl ", "kubectl ", "export ", "curl "];
        let mut out = Vec::new();
        let mut cur: Option<String> = None;
        for l in help.lines() {
            let t = l.trim();
            if let Some(c) = cur.as_mut() {
                c.push(' ');
                c.push_str(t.trim_end_matches('\\'));
                if !t.ends_with('\\') {
                    out.push(c.split_whitespace().collect::<Vec<_>>().join(" "));
                    cur = None;
                }
                continue;
            }
            // An example is indented by two spaces (deeper: an option's text).
            let example = l.starts_with("  ") && !l.starts_with("   ");
            if example && programs.iter().any(|p| t.starts_with(p)) {
                let c = match l[2..].find("  #") {
                    Some(i) => l[..2 + i].trim(),
                    None => t,
                };
                if c.ends_with('\\') {
                    cur = Some(c.trim_end_matches('\\').to_owned());
                } else {
                    out.push(c.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
        }
        out
    }
    let commands: &[&[&str]] = &[
        &["check"],
        &["inventory"],
        &["explain"],
        &["kubevirt", "generate"],
        &["kubevirt", "check"],
        &["serve"],
        &["relabel"],
        &["whatif", "relabel"],
        &["plan"],
        &["snapshot"],
        &["triage"],
        &["lab"],
    ];
    for c in commands {
        let mut args = c.to_vec();
        args.push("--help");
        let (_, wide, _) = at_width(1000, ROOT, &args);
        let want = examples(&wide);
        assert!(!want.is_empty(), "{c:?}: no examples\n{wide}");
        for width in [40, 60, 80] {
            let (_, help, _) = at_width(width, ROOT, &args);
            assert_eq!(examples(&help), want, "{c:?} at {width}\n{help}");
            // A line that follows a wrapped `# comment` line is a comment, a command or prose,
            // never the comment's tail on a line of its own among the examples.
            let lines: Vec<&str> = help.lines().collect();
            for w in lines.windows(2) {
                if w[0].starts_with("  # ") && w[1].starts_with("  ") && !w[1].starts_with("  # ") {
                    let t = w[1].trim_start();
                    assert!(
                        ["gpuwl ", "kubectl ", "export ", "curl ", "-"]
                            .iter()
                            .any(|p| t.starts_with(p)),
                        "{c:?} at {width}: {}\n{help}",
                        w[1]
                    );
                }
            }
        }
    }
}

/// Item 3, --ignore-resource: a GPU name the glob set aside is said where it changes the
/// verdict (check's reason) and under the inventory, never dropped silently.
#[test]
fn ignore_resource_leaves_a_trace() {
    let nodes = data("inventory/lab/nodes.json");
    let pods = data("inventory/lab/pods.json");
    let (rc, out, _) = gpuwl(&["check", &nodes, "--ignore-resource", "GA102GL_*"]);
    assert_eq!(rc, 1);
    assert_eq!(
        out,
        "MISMATCH=lab-node-1 label vm-passthrough expects a device-model resource, but the node advertises no GPU resource (nvidia.com/GA102GL_A10=2 set aside by --ignore-resource)\n"
    );
    let (_, out, _) = gpuwl(&[
        "check",
        "--effective",
        &nodes,
        "--ignore-resource",
        "GA102GL_*",
    ]);
    assert!(
        out.contains("(nvidia.com/GA102GL_A10=2 set aside by --ignore-resource)"),
        "{out}"
    );
    let (rc, out, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
        "--ignore-resource",
        "GA102GL_*",
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["notes"].as_array().unwrap().iter().any(|n| n
            == "--ignore-resource set aside nvidia.com/GA102GL_A10 (listed by 1 node(s), requested by 1 pod(s)): counted nowhere above"),
        "{}",
        v["notes"]
    );
    // A glob that sets aside no GPU name says nothing.
    let (_, out, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &nodes,
        "--ignore-resource",
        "nosuch*",
    ]);
    assert!(!out.contains("set aside"), "{out}");
}

/// Item 4, where the kubeconfig came from: a `$KUBECONFIG` list, a context that is not
/// there (named with those that are, and the nearest), a current-context that is not
/// there, `--context` without any kubeconfig, and a refused API server that is no local
/// cluster (the context and file its address came from).
#[test]
fn kubeconfig_lists_and_contexts_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    let config = |current: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:1\"}}\nusers:\n- name: u\n  user: {{token: abc}}\ncontexts:\n- name: prod-eu\n  context: {{cluster: c, user: u}}\n- name: staging\n  context: {{cluster: c, user: u}}\ncurrent-context: {current}\n"
        )
    };
    std::fs::write(&kc, config("prod-eu")).unwrap();
    let kc2 = dir.path().join("kc2.yaml");
    std::fs::write(&kc2, config("gone")).unwrap();
    let run = |env: Option<&str>, args: &[&str]| {
        let mut c = Command::new(cargo_bin("gpuwl"));
        c.arg("check")
            .args(args)
            .args(["--request-timeout", "2"])
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .env("GPUWL_STATE_DIR", dir.path().join("state"))
            .env_remove("KUBECONFIG");
        if let Some(v) = env {
            c.env("KUBECONFIG", v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(
        run(Some("nosuch:other"), &[]),
        (
            Some(2),
            "gpuwl: $KUBECONFIG=nosuch:other: none of its 2 files exists\n".into()
        )
    );
    assert_eq!(
        run(None, &["--kubeconfig", "kc.yaml", "--context", "prod-ue"]),
        (
            Some(2),
            "gpuwl: kc.yaml: no context prod-ue (its contexts: prod-eu, staging); did you mean prod-eu?\n".into()
        )
    );
    // A list with a missing file reads the others, as kubectl does.
    let list = format!("{}:{}/missing.yaml", kc.display(), dir.path().display());
    let (rc, err) = run(Some(&list), &["--context", "prodeu"]);
    assert_eq!(rc, Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "gpuwl: $KUBECONFIG={list}: no context prodeu (its contexts: prod-eu, staging); did you mean prod-eu?\n"
        )
    );
    assert_eq!(
        run(None, &["--kubeconfig", "kc2.yaml"]),
        (
            Some(2),
            "gpuwl: kc2.yaml: its current-context gone is not one of its contexts (its contexts: prod-eu, staging); pass --context NAME\n".into()
        )
    );
    let (rc, err) = run(None, &["--context", "prod-eu"]);
    assert_eq!(rc, Some(3), "{err}");
    assert!(err.contains("(--context prod-eu needs one)"), "{err}");
    let (rc, err) = run(Some(&list), &[]);
    assert_eq!(rc, Some(3), "{err}");
    assert!(
        err.ends_with(&format!(
            "connection refused; is the cluster up? (the address is that of context prod-eu of $KUBECONFIG={list})\n"
        )),
        "{err}"
    );
}

/// Item 5, local cluster names: a `--name` no cluster was started under gets the nearest
/// local cluster's name.
#[test]
fn local_cluster_names_get_a_did_you_mean() {
    let state = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(state.path().join("h42-eval")).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(cargo_bin("gpuwl"))
            .args(args)
            .env("GPUWL_STATE_DIR", state.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (rc, _, err) = run(&["cluster", "kubeconfig", "--name", "h42-evl"]);
    assert_eq!(rc, Some(3));
    assert!(err.ends_with("; did you mean h42-eval?\n"), "{err}");
    let (rc, out, _) = run(&["cluster", "down", "--name", "h42-evl"]);
    assert_eq!(rc, Some(0));
    assert_eq!(
        out,
        "cluster h42-evl does not exist; nothing to do; did you mean h42-eval?\n"
    );
    let (_, out, _) = run(&["cluster", "status", "--name", "h42-evl"]);
    assert!(out.ends_with("did you mean h42-eval?\n"), "{out}");
}

/// Item 10, the lab's destination: a `--root` that cannot hold the result folders fails
/// before any cluster is built or started (exit 2, one line naming it).
#[test]
fn lab_checks_its_root_first() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("afile"), "").unwrap();
    let root = dir.path().join("afile/x");
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["lab", "--cluster-name", "h42-never", "--root"])
        .arg(&root)
        .env("GPUWL_STATE_DIR", dir.path().join("state"))
        .env("GPUWL_CONTROLPLANE_BIN", dir.path().join("no-binaries"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "gpuwl: --root {}: cannot create {}/out: Not a directory (os error 20)\n",
            root.display(),
            root.display()
        )
    );
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("state/h42-never").exists());
}

/// Item 5, a vGPU type in `NODE=vm-vgpu:TYPE`: written in lower case it gets the same
/// did-you-mean as `gpuwl policy` gives for nvidia.com/vgpu.config.
#[test]
fn vgpu_type_gets_a_did_you_mean() {
    let nodes = data("inventory/lab/nodes.json");
    let pods = data("inventory/lab/pods.json");
    let (rc, _, err) = gpuwl(&[
        "whatif",
        "relabel",
        "lab-node-1=vm-vgpu:a10-12q",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert_eq!(rc, 2);
    assert_eq!(
        err,
        "gpuwl: relabel lab-node-1: \"a10-12q\" is not a vGPU type such as A10-12Q; did you mean A10-12Q?\n"
    );
    let (rc, _, err) = gpuwl(&[
        "whatif",
        "relabel",
        "lab-node-1=vm-vgpu:A10-12",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert_eq!(rc, 2);
    assert!(!err.contains("did you mean"), "{err}");
}

/// Item 8, offline: a snapshot keeps whether a VirtualMachine owns each VMI, so a unit
/// held by a VMI no VM owns is freed with `kubectl delete vmi`, never `virtctl stop`, from
/// the snapshot as live.
#[test]
fn a_snapshot_knows_a_bare_vmi_from_a_vms() {
    let dir = tempfile::tempdir().unwrap();
    let list = |items: &str| format!(r#"{{"apiVersion":"v1","kind":"List","items":[{items}]}}"#);
    let node = r#"{"kind":"Node","metadata":{"name":"gpu-pt-1","labels":{"nvidia.com/gpu.workload.config":"vm-passthrough"}},"status":{"capacity":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/GA102GL_A10":"1"},"allocatable":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/GA102GL_A10":"1"}}}"#;
    let pod = |ns: &str, name: &str, node: Option<&str>| {
        let bound = node.map_or(String::new(), |n| format!(r#""nodeName":"{n}","#));
        let phase = if node.is_some() { "Running" } else { "Pending" };
        format!(
            r#"{{"kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}"}},"spec":{{{bound}"containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/GA102GL_A10":"1"}}}}}}]}},"status":{{"phase":"{phase}"}}}}"#
        )
    };
    let pods = [
        pod("gpu-vm", "virt-launcher-bare-abcde", Some("gpu-pt-1")),
        pod("gpu-vm", "wants", None),
    ]
    .join(",");
    let vmi = |name: &str, owner: &str| {
        format!(
            r#"{{"kind":"VirtualMachineInstance","metadata":{{"name":"{name}","namespace":"gpu-vm","ownerReferences":[{owner}]}}}}"#
        )
    };
    let meta = r#"{"format":"gpuwl.snapshot/v1","gpuwlVersion":"0.1.0","takenAt":"2026-12-02T00:00:00Z","fullPods":false,"collected":{}}"#;
    let tar_with = |vmis: &str| {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in [
            ("snapshot.json", meta.to_owned()),
            ("nodes.json", list(node)),
            ("pods.json", list(&pods)),
            ("vmis.json", list(vmis)),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, data.as_bytes()).unwrap();
        }
        b.into_inner().unwrap()
    };
    let run = |vmis: &str| {
        let path = dir.path().join("s.tar");
        std::fs::write(&path, tar_with(vmis)).unwrap();
        let (rc, out, err) = gpuwl(&[
            "explain",
            "pod",
            "gpu-vm/wants",
            "--snapshot",
            path.to_str().unwrap(),
            "-o",
            "json",
        ]);
        assert_eq!(rc, 1, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["causeCode"], "in-use", "{v:#}");
        v
    };
    let bare = run(&vmi("bare", ""));
    let fix = bare["fix"].as_str().unwrap();
    assert!(fix.contains("kubectl delete vmi bare -n gpu-vm"), "{fix}");
    assert!(!fix.contains("virtctl stop bare"), "{fix}");
    let commands = bare["remedy"]["actions"].to_string();
    assert!(
        commands.contains("kubectl delete vmi bare -n gpu-vm"),
        "{commands}"
    );
    assert!(!commands.contains("virtctl"), "{commands}");
    // Owned by a VM: virtctl stop, and no VMI deleted.
    let owned = run(&vmi(
        "bare",
        r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"bare","uid":"u"}"#,
    ));
    let fix = owned["fix"].as_str().unwrap();
    assert!(fix.contains("virtctl stop bare -n gpu-vm"), "{fix}");
    assert!(!fix.contains("delete vmi"), "{fix}");
}

/// Item 4, a kubeconfig of a local cluster that `gpuwl cluster down` removed: named as
/// such, with the command that brings it back (`--name` unless it is the default one).
#[test]
fn a_removed_local_clusters_kubeconfig_says_how_to_get_it_back() {
    let state = tempfile::tempdir().unwrap();
    let run = |env: &str| {
        let out = Command::new(cargo_bin("gpuwl"))
            .arg("check")
            .env("GPUWL_STATE_DIR", state.path())
            .env("KUBECONFIG", state.path().join(env))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (rc, err) = run("eval/kubeconfig");
    assert_eq!(rc, Some(2), "{err}");
    assert!(
        err.ends_with(": cannot read: No such file or directory (os error 2); the local cluster eval is gone (gpuwl cluster down removed its state): gpuwl cluster up --name eval\n"),
        "{err}"
    );
    let (_, err) = run("gpuwl/kubeconfig");
    assert!(
        err.ends_with("the local cluster gpuwl is gone (gpuwl cluster down removed its state): gpuwl cluster up\n"),
        "{err}"
    );
    // Any other missing file: no such hint.
    let (_, err) = run("elsewhere.yaml");
    assert!(!err.contains("local cluster"), "{err}");
}

/// Item 10, `cluster up --set-context`: the kubeconfig it will merge into is checked before
/// any cluster starts (exit 2, one line naming it), not after the cluster is up.
#[test]
fn set_context_checks_the_users_kubeconfig_first() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".kube")).unwrap();
    std::fs::write(home.path().join(".kube/config"), "garbage: [").unwrap();
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["cluster", "up", "--name", "h42-never", "--set-context"])
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env("GPUWL_STATE_DIR", home.path().join("state"))
        .env("GPUWL_CONTROLPLANE_BIN", home.path().join("no-binaries"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "gpuwl: --set-context: {}/.kube/config is not a usable kubeconfig (fix it, or point $KUBECONFIG at another file)\n",
            home.path().display()
        )
    );
    assert!(!home.path().join("state/h42-never").exists());
}
