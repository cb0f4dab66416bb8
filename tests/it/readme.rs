//! The README's examples, re-run: every `$ gpuwl ...` line of a `text` block is either run
//! here (from the data directory it names, at 100 columns) and its output compared with the
//! lines that follow it in the README, or listed with the test that covers it. A block
//! whose output starts with `...` is compared on the lines after the `...`; one that ends
//! with `...` on the lines before it.

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

use crate::kit::{ClusterDown, gpuwl_ok, one_cluster_at_a_time};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Examples run on files: (the command as the README prints it, the directory it runs in).
const FILE_EXAMPLES: &[(&str, &str)] = &[
    (
        "gpuwl explain --pod pod.yaml --nodes nodes.json --pods pods.json",
        "tests/data/fixes",
    ),
    (
        "gpuwl explain --pod vmi.yaml --nodes nodes.json --pods pods.json",
        "tests/data/explain/passthrough-slug-shortened",
    ),
    (
        "gpuwl explain --pod vm.yaml --nodes nodes.json --pods pods.json --kubevirt kubevirt.yaml",
        "tests/data/explain/vgpu-type-not-permitted",
    ),
    (
        "gpuwl kubevirt generate --nodes nodes.json --kubevirt kubevirt.yaml",
        "tests/data/explain/vgpu-type-not-permitted",
    ),
    (
        "gpuwl kubevirt generate --nodes nodes.json --kubevirt kubevirt.yaml --patch json-add",
        "tests/data/explain/vgpu-type-not-permitted",
    ),
    (
        "gpuwl kubevirt check --nodes nodes.json --kubevirt kubevirt.yaml; echo \"exit $?\"",
        "tests/data/explain/vgpu-type-not-permitted",
    ),
    (
        "gpuwl kubevirt check --nodes nodes.json --kubevirt ../../kubevirt/hyperconverged.yaml; echo \"exit $?\"",
        "tests/data/explain/vgpu-type-not-permitted",
    ),
    ("gpuwl check nodes.json", "tests/data/operator"),
    // docs/guide/kueue.md: the lab's Kueue objects against the lab's nodes.
    (
        "gpuwl check --effective ../inventory/lab/nodes.json --kueue kueue.yaml; echo \"exit $?\"",
        "tests/data/kueue",
    ),
    (
        "gpuwl inventory --nodes ../inventory/lab/nodes.json --pods ../inventory/lab/pods.json --kueue lab-workloads.yaml",
        "tests/data/kueue",
    ),
    // The committed must-gather bundle (tests/data/triage/README.md says how it was made).
    (
        "gpuwl triage tests/data/triage/broken; echo \"exit $?\"",
        ".",
    ),
    (
        "gpuwl check -q unlabelled.json; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check --effective unlabelled.json; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check -q lab.json --cluster-policy clusterpolicy-sandbox-disabled.yaml; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check --effective -q lab.json --cluster-policy clusterpolicy-sandbox-disabled.yaml; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check -q mig-rebooting.json; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check --effective mig-rebooting.json; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check --effective --fail-on config-pending -q mig-rebooting.json; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check --effective mig-failed.json; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl check --effective orphaned.json --pods orphaned-pods.json --ignore stale-zero; echo \"exit $?\"",
        "tests/data/gate",
    ),
    (
        "gpuwl inventory --nodes nodes.json --dra two-gpus.json",
        "tests/data/dra",
    ),
    (
        "gpuwl explain pod gpu-vm/vm-vfio-2 --pods pods.json --nodes nodes.json --dra two-gpus.json",
        "tests/data/dra",
    ),
];

/// Examples run on the lab's cluster by [`lab_examples_match_the_readme`].
const LAB_EXAMPLES: &[&str] = &[
    "gpuwl check",
    "gpuwl check ~/gpuwl/out/nodes.json",
    "gpuwl check -o json",
];

/// Examples covered elsewhere, with where.
const COVERED_ELSEWHERE: &[(&str, &str)] = &[
    // docs/guide/kueue.md: triage with Kueue's objects beside the bundle; its lines between
    // the two `...` are compared in tests/it/first_minutes.rs.
    (
        "gpuwl triage broken --kueue ../kueue/lab-workloads.yaml",
        "tests/it/first_minutes.rs",
    ),
    // docs/guide/kueue.md: the lab with the real Kueue; its [kueue] line, out/kueue.txt and
    // explain job's quota cause are asserted in tests/it/kueue_live.rs.
    ("gpuwl lab --kueue", "tests/it/kueue_live.rs"),
    (
        "gpuwl explain job gpu-kueue/kueue-passthrough",
        "tests/it/kueue_live.rs",
    ),
    (
        // Through jq: compared whole in tests/it/explain.rs (remedy_json_is_the_readmes).
        "gpuwl explain --pod pod.yaml --nodes nodes.json --pods pods.json -o json | jq .remedy",
        "tests/it/explain.rs",
    ),
    // The twin's runs: the lab's cluster (the plan on it, exit 1 with job-cross unservable)
    // and the 200-node dump (the README's lines before and after its `...` are compared).
    (
        "gpuwl whatif relabel lab-node-1=container",
        "tests/it/whatif.rs",
    ),
    ("gpuwl plan -q; echo \"exit $?\"", "tests/it/whatif.rs"),
    // The twin with KubeVirt (docs/guide/relabel.md): its segments between `...`.
    (
        "gpuwl whatif relabel gpu-0=vm-passthrough --kubevirt --nodes nodes.json --pods vmis.json --kubevirt-cr kubevirt.yaml",
        "tests/it/kubevirt_live.rs",
    ),
    // Live relabels on `gpuwl lab --operator`: timings differ run to run; each line of the
    // refusal, the plan, the run and the stop/resume is asserted in tests/it/relabel.rs.
    (
        "gpuwl relabel lab-node-1=container; echo \"exit $?\"",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=container --evict --dry-run",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=container --evict --twin-name gpuwl-relabel-twin -q",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=container --evict --no-preview --timeout 5s; echo \"exit $?\"",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=container --evict --no-preview",
        "tests/it/relabel.rs",
    ),
    // The edges (issue 48): the way back (check --effective's advice run as printed),
    // --abort, the preview gate, two nodes and the refusals, on the same operator lab.
    ("gpuwl check --effective", "tests/it/relabel.rs"),
    (
        "gpuwl relabel lab-node-1=vm-passthrough --no-preview",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=container --evict --no-preview --timeout 5s",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=vm-vgpu --no-preview; echo \"exit $?\"",
        "tests/it/relabel.rs",
    ),
    ("gpuwl relabel lab-node-1 --abort", "tests/it/relabel.rs"),
    (
        "gpuwl relabel lab-node-1=container lab-node-0=container --evict -q; echo \"exit $?\"",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-1=container lab-node-0=vm-passthrough --evict --force -q",
        "tests/it/relabel.rs",
    ),
    (
        "gpuwl relabel lab-node-2=vm-passthrough --evict --dry-run; echo \"exit $?\"",
        "tests/it/relabel.rs",
    ),
    // Live: applied with kubectl on a local cluster, its refusals asserted.
    ("gpuwl policy | kubectl apply -f -", "tests/it/policy.rs"),
    (
        "gpuwl plan --nodes nodes-200.json --pods pods-200.json -q",
        "tests/it/whatif.rs",
    ),
    (
        // Live, on KubeVirt objects the test creates; its output is printed with --nocapture.
        "gpuwl explain vmi vm-a -n gpu-vm",
        "tests/it/explain_vm.rs",
    ),
    (
        // A pipeline through jq and column: the codes it lists are asserted per node in
        // tests/it/operator.rs (each_state_gets_its_code_and_the_lines_keep_their_contract).
        "gpuwl check nodes.json -o json \\",
        "tests/it/operator.rs",
    ),
    // Offline triage: the snapshot of a live cluster read back by check, inventory and
    // explain is asserted in tests/it/triage_live.rs
    // (real_must_gather_bundles_of_a_healthy_and_a_broken_lab).
    (
        "gpuwl snapshot -o lab-snapshot.tar",
        "tests/it/triage_live.rs",
    ),
    (
        "gpuwl check --snapshot lab-snapshot.tar",
        "tests/it/triage_live.rs",
    ),
    (
        "gpuwl inventory --snapshot lab-snapshot.tar",
        "tests/it/triage_live.rs",
    ),
    (
        "gpuwl explain pod gpu-vm/job-cross --snapshot lab-snapshot.tar",
        "tests/it/triage_live.rs",
    ),
    (
        // Through tail: the summary and per-node lines are asserted in
        // tests/it/operands.rs (inventory_lists_unready_operands_per_node).
        "gpuwl inventory --nodes nodes.json --pods pods.json | tail -6",
        "tests/it/operands.rs",
    ),
    (
        // Through grep: the cause is asserted whole in tests/it/operands.rs
        // (explain_names_the_unready_plugin_first).
        "gpuwl explain pod vm-pod -n gpu-vm --pods pods.json --nodes nodes.json | grep -A3 '^Cause'",
        "tests/it/operands.rs",
    ),
];

/// The documents whose examples are re-run: the README and the guide (docs/guide/*.md).
pub(crate) fn documents() -> Vec<std::path::PathBuf> {
    let mut guide: Vec<_> = std::fs::read_dir(Path::new(ROOT).join("docs/guide"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    let mut all = vec![Path::new(ROOT).join("README.md")];
    all.extend(guide);
    all
}

/// The README's and the guide's `$ ...` lines in text blocks, each with the output lines
/// after it.
fn readme_examples() -> Vec<(String, Vec<String>)> {
    let text: String = documents()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap() + "\n")
        .collect();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_text = false;
    // Whether the current block has had a `$` line: a block's output ends with the block.
    let mut has_cmd = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_text = line == "```text";
            has_cmd = false;
            continue;
        }
        if !in_text {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.to_owned(), Vec::new()));
            has_cmd = true;
        } else if has_cmd && let Some((_, lines)) = out.last_mut() {
            lines.push(line.to_owned());
        }
    }
    out
}

/// The README's output for `cmd` (which must appear exactly once).
pub(crate) fn expected(cmd: &str) -> Vec<String> {
    let all = readme_examples();
    let found: Vec<&(String, Vec<String>)> = all.iter().filter(|(c, _)| c == cmd).collect();
    assert_eq!(found.len(), 1, "README has {} `$ {cmd}` lines", found.len());
    found[0].1.clone()
}

/// Compares `got` with the README's lines, honouring a leading or trailing `...`.
fn assert_matches(cmd: &str, want: &[String], got: &str) {
    let got: Vec<&str> = got.lines().collect();
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    let ok = match (want.first(), want.last()) {
        (Some(&"..."), _) => got.ends_with(&want[1..]),
        (_, Some(l)) if l.trim() == "..." => got.starts_with(&want[..want.len() - 1]),
        _ => got == want,
    };
    assert!(
        ok,
        "README example `$ {cmd}` no longer matches.\n--- README ---\n{}\n--- gpuwl ---\n{}",
        want.join("\n"),
        got.join("\n")
    );
}

/// Runs a README command line: `gpuwl ARGS` with an optional `; echo "exit $?"`.
fn run_line(cmd: &str, dir: &Path, kubeconfig: Option<&Path>, home: Option<&Path>) -> String {
    let (gpuwl_part, echo_exit) = match cmd.split_once("; ") {
        Some((a, "echo \"exit $?\"")) => (a, true),
        Some(_) => panic!("unexpected shell in `{cmd}`"),
        None => (cmd, false),
    };
    let mut words = gpuwl_part.split_whitespace();
    assert_eq!(words.next(), Some("gpuwl"));
    let args: Vec<String> = words
        .map(|w| match (w.strip_prefix("~/"), home) {
            (Some(rest), Some(h)) => h.join(rest).display().to_string(),
            _ => w.to_owned(),
        })
        .collect();
    let mut c = Command::new(cargo_bin("gpuwl"));
    c.args(&args).current_dir(dir).env("COLUMNS", "100");
    match kubeconfig {
        Some(k) => c.env("KUBECONFIG", k),
        None => c.env_remove("KUBECONFIG"),
    };
    let out = c.output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    if echo_exit {
        s.push_str(&format!("exit {}\n", out.status.code().unwrap_or(-1)));
    }
    s
}

#[test]
fn every_gpuwl_example_in_the_readme_is_rerun_somewhere() {
    for (cmd, _) in readme_examples() {
        if !cmd.starts_with("gpuwl ") && cmd != "gpuwl" {
            continue;
        }
        let known = FILE_EXAMPLES.iter().any(|(c, _)| *c == cmd)
            || LAB_EXAMPLES.contains(&cmd.as_str())
            || COVERED_ELSEWHERE.iter().any(|(c, _)| *c == cmd);
        assert!(
            known,
            "README example `$ {cmd}` is not re-run: add it to tests/it/readme.rs"
        );
    }
}

#[test]
fn file_examples_match_the_readme() {
    for (cmd, dir) in FILE_EXAMPLES {
        let got = run_line(cmd, &Path::new(ROOT).join(dir), None, None);
        assert_matches(cmd, &expected(cmd), &got);
    }
}

#[test]
#[ignore = "needs local control plane"]
fn lab_examples_match_the_readme() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};

    const CLUSTER: &str = "readme";
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("gpuwl");
    let lab = Command::new(cargo_bin("gpuwl"))
        .args(["lab", "--cluster-name", CLUSTER, "--root"])
        .arg(&root)
        .env("COLUMNS", "100")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(
        lab.status.success(),
        "{}",
        String::from_utf8_lossy(&lab.stderr)
    );
    let kubeconfig = gpuwl_ok(&["cluster", "kubeconfig", "--name", CLUSTER]);
    let kubeconfig = Path::new(kubeconfig.trim()).to_owned();

    // "What the main job prints": the lab's stdout at 100 columns, equal to the README's
    // block once timings, the cluster's name and the paths are those of the README's run.
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let section = &readme[readme.find("## What the main job prints").unwrap()..];
    let block = &section[section.find("```text\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    let normalise = |t: &str| -> Vec<String> {
        t.replace(&kubeconfig.display().to_string(), "KUBECONFIG")
            .replace(
                "/root/.local/state/gpuwl/clusters/gpuwl/kubeconfig",
                "KUBECONFIG",
            )
            .replace(&root.display().to_string(), "ROOT")
            .replace("/root/gpuwl", "ROOT")
            .replace(&format!("cluster down --name {CLUSTER}"), "cluster down")
            .replace(&format!("\"{CLUSTER}\""), "\"gpuwl\"")
            .lines()
            .map(|l| {
                // Step timings (`(1.2 s)`, `3ms`) differ from run to run.
                let mut out = String::new();
                let mut chars = l.chars().peekable();
                while let Some(c) = chars.next() {
                    if c.is_ascii_digit() {
                        while chars
                            .peek()
                            .is_some_and(|d| d.is_ascii_digit() || *d == '.')
                        {
                            chars.next();
                        }
                        out.push('N');
                    } else {
                        out.push(c);
                    }
                }
                out
            })
            .collect()
    };
    let got = normalise(&String::from_utf8_lossy(&lab.stdout));
    let want = normalise(block);
    let diff: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("README: {w}\nlab:    {g}"))
        .collect();
    assert!(
        diff.is_empty() && want.len() == got.len(),
        "the README's lab output differs ({} vs {} lines):\n{}",
        want.len(),
        got.len(),
        diff.join("\n")
    );

    // What the README's kubectl lines do.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = gpuwl::cluster::client(&kubeconfig, None).await.unwrap();
        let nodes: Api<Node> = Api::all(client);
        let label = serde_json::json!({"metadata": {"labels": {
            "nvidia.com/gpu.workload.config": "vm_passthrough"}}});
        nodes
            .patch("lab-node-1", &PatchParams::default(), &Patch::Merge(&label))
            .await
            .unwrap();
        let status = serde_json::json!({"status": {
            "capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}});
        nodes
            .patch_status(
                "lab-node-2",
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .unwrap();
    });

    let dir = home.path();
    // `$ gpuwl check` is followed in the README by `$ echo $?` and its `1`.
    let check = expected("gpuwl check");
    let got = run_line("gpuwl check", dir, Some(&kubeconfig), Some(dir));
    assert_matches("gpuwl check", &check, &got);
    let exit = expected("echo $?");
    assert_eq!(exit, ["1"]);
    let code = Command::new(cargo_bin("gpuwl"))
        .arg("check")
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap()
        .status
        .code();
    assert_eq!(code, Some(1));
    for cmd in ["gpuwl check ~/gpuwl/out/nodes.json", "gpuwl check -o json"] {
        let got = run_line(cmd, dir, Some(&kubeconfig), Some(dir));
        assert_matches(cmd, &expected(cmd), &got);
    }
    // The same cluster serves the completion check (one lab run, not two).
    bash_completes_pod_names_after_explain(&kubeconfig);
}

/// Pod names complete after `explain` in bash (the README's install line for bash), on the
/// lab's cluster at `kubeconfig`.
fn bash_completes_pod_names_after_explain(kubeconfig: &Path) {
    let bin_dir = cargo_bin("gpuwl").parent().unwrap().to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let complete = |words: &str| {
        let script = format!(
            "source <(gpuwl completions bash)\nCOMP_WORDS=({words})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n_gpuwl_with_pods\nprintf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .env("PATH", &path)
            .env("KUBECONFIG", kubeconfig)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The three lab pods of gpu-vm that start with "job-".
    let got = complete("gpuwl explain -n gpu-vm job-");
    assert!(got.lines().any(|l| l == "job-cross"), "{got}");
    assert!(got.lines().all(|l| l.starts_with("job-")), "{got}");
    // After a flag that takes a value, no pod names.
    let got = complete("gpuwl explain -n gpu-vm --nodes job-");
    assert!(!got.lines().any(|l| l == "job-cross"), "{got}");
}
