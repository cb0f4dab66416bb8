//! Command-line behaviour outside `check`: completions, help, closed pipes.

use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;

#[test]
fn completions_into_a_closed_pipe_do_not_panic() {
    for shell in ["bash", "zsh", "fish"] {
        let mut child = Command::new(cargo_bin("gpuwl"))
            .args(["completions", shell])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away at once, like `| head -c 0`
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}");
        assert!(
            out.stderr.is_empty(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn completions_name_every_command() {
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for cmd in ["check", "cluster", "lab", "inventory", "explain"] {
        assert!(text.contains(cmd), "{cmd}");
    }
}

/// `kubectl gpuwl <TAB>` through the real kubectl: its hidden `__complete` command finds the
/// plugin `kubectl-gpuwl` and its helper `kubectl_complete-gpuwl` on PATH (both links to
/// gpuwl) and prints what the helper answered.
#[test]
fn kubectl_completes_the_plugin_through_the_helper_link() {
    let dir = tempfile::tempdir().unwrap();
    for link in ["kubectl-gpuwl", "kubectl_complete-gpuwl", "gpuwl"] {
        std::os::unix::fs::symlink(cargo_bin("gpuwl"), dir.path().join(link)).unwrap();
    }
    // The helper alone speaks cobra's protocol: candidates, then `:<directive>`.
    let out = Command::new(dir.path().join("kubectl_complete-gpuwl"))
        .args(["cluster", "st"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "status\n:4\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let Ok(kubectl) = which_kubectl() else {
        eprintln!("kubectl not on PATH: only the helper itself was checked");
        return;
    };
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(kubectl)
        .args(["__complete", "gpuwl", "inventory", "-o", ""])
        .env("PATH", &path)
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let offered: Vec<&str> = text.lines().filter(|l| !l.starts_with(':')).collect();
    assert!(
        offered.contains(&"json") && offered.contains(&"csv"),
        "kubectl offered {offered:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The hidden commands are never offered.
    let out = Command::new(dir.path().join("kubectl_complete-gpuwl"))
        .arg("")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("explain\n") && !text.contains("__"), "{text}");
}

fn which_kubectl() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("kubectl"))
                .find(|f| f.is_file())
        })
        .ok_or(())
}

#[test]
fn lab_help_lists_the_eight_steps_and_their_files() {
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["lab", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for (i, file) in [
        "out/01-nodes.txt",
        "out/operands.txt",
        "out/03-resources.txt",
        "out/04-container.txt",
        "out/05-passthrough.txt",
        "out/06-placement.txt",
        "out/07-cross.txt",
        "out/consistency.txt",
    ]
    .iter()
    .enumerate()
    {
        assert!(text.contains(&format!("  {}. ", i + 1)), "step {}", i + 1);
        assert!(text.contains(file), "{file}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

#[test]
fn live_errors_say_where_and_what_to_do_without_echoing_secrets() {
    let dir = tempfile::tempdir().unwrap();
    // No kubeconfig anywhere: one line with the way out.
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["check"])
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG"),
        "{err}"
    );
    // A server that does not answer: its address, and how to see whether it is up.
    let kc = dir.path().join("kc.yaml");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: secret-token-do-not-print}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    for cmd in ["check", "inventory"] {
        let out = Command::new(cargo_bin("gpuwl"))
            .args([cmd, "--kubeconfig", kc.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("gpuwl: https://127.0.0.1:1: cannot list "),
            "{err}"
        );
        // Not a local cluster: where its address came from (the context and the file).
        assert!(
            err.contains(&format!(
                "(the address is that of context x of {})",
                kc.display()
            )),
            "{err}"
        );
        assert!(!err.contains("secret-token"), "{err}");
    }
}

#[test]
fn a_silent_api_server_times_out_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (port, kc) = crate::kit::silent_api_server(dir.path());
    let started = std::time::Instant::now();
    let out = Command::new(cargo_bin("gpuwl"))
        .args([
            "check",
            "--request-timeout",
            "4",
            "--kubeconfig",
            kc.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "https://127.0.0.1:{port}: cannot list nodes: no answer within 4s"
        )),
        "{err}"
    );
    // One timeout, not the ClusterPolicy's and then the nodes' one after the other (>= 8 s).
    assert!(
        started.elapsed() < std::time::Duration::from_millis(7500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn every_one_shot_live_command_gives_up_on_a_silent_api_server_within_its_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (port, kc) = crate::kit::silent_api_server(dir.path());
    let kc = kc.to_str().unwrap();
    for cmd in [
        &["inventory"][..],
        &["explain", "pod", "default/p"],
        &["kubevirt", "generate"],
        &["kubevirt", "check"],
    ] {
        let started = std::time::Instant::now();
        let out = Command::new(cargo_bin("gpuwl"))
            .args(cmd)
            .args(["--request-timeout", "2", "--kubeconfig", kc])
            .output()
            .unwrap();
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{cmd:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{cmd:?}: {err}");
        assert!(
            err.contains(&format!("https://127.0.0.1:{port}: cannot "))
                && err.contains("no answer within 2s"),
            "{cmd:?}: {err}"
        );
        // The request timeout once (the reads run at once or stop at the first failure),
        // not the old default of 60 s.
        assert!(
            took < std::time::Duration::from_millis(4500),
            "{cmd:?} took {took:?}"
        );
    }
}

#[test]
fn every_command_that_talks_to_a_cluster_takes_the_same_cluster_flags() {
    for cmd in [
        &["check"][..],
        &["inventory"],
        &["explain"],
        &["kubevirt", "generate"],
        &["kubevirt", "check"],
        &["serve"],
        &["lab"],
        &["snapshot"],
    ] {
        let out = Command::new(cargo_bin("gpuwl"))
            .args(cmd)
            .arg("--help")
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}");
        for flag in ["--kubeconfig <FILE>", "--context <NAME>"] {
            assert!(help.contains(flag), "{cmd:?} lacks {flag}: {help}");
        }
        // The default request timeout is 30 s, the same everywhere.
        let rt = help
            .split("--request-timeout <SECONDS>")
            .nth(1)
            .unwrap_or_else(|| panic!("{cmd:?} lacks --request-timeout: {help}"));
        let rt = rt.split("\n  -").next().unwrap();
        assert!(rt.contains("[default: 30]"), "{cmd:?}: {rt}");
    }
}

#[test]
fn a_bad_kubeconfig_is_bad_input_however_named_and_never_shows_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("garbage.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nusers:\n- name: u\n  user: {token: \"SECRET-abc\", bad: [unclosed}\n",
    )
    .unwrap();
    let dup = dir.path().join("dup.yaml");
    std::fs::write(
        &dup,
        "apiVersion: v1\nusers:\n- name: u\n  user: {client-key-data: SECRET-key, client-key-data: SECRET-2}\n",
    )
    .unwrap();
    for (file, via_env) in [(&bad, true), (&bad, false), (&dup, false), (&dup, true)] {
        let mut cmd = Command::new(cargo_bin("gpuwl"));
        cmd.arg("check");
        if via_env {
            cmd.env("KUBECONFIG", file);
        } else {
            cmd.arg("--kubeconfig").arg(file);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(file.to_str().unwrap()), "{err}");
        assert!(err.contains("at line 4"), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
    }
}

#[test]
fn huge_values_are_cut_in_errors_and_help_write_failures_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.json");
    std::fs::write(
        &p,
        format!("{{\"kind\":\"{}\",\"items\":[]}}", "X".repeat(1_000_000)),
    )
    .unwrap();
    for args in [
        vec!["check".to_string(), p.to_str().unwrap().into()],
        vec!["explain".into(), "--pod".into(), p.to_str().unwrap().into()],
    ] {
        let out = Command::new(cargo_bin("gpuwl"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stderr.len() < 400, "{} bytes", out.stderr.len());
        assert!(String::from_utf8_lossy(&out.stderr).contains("(1000000 bytes)"));
    }
    if std::path::Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = Command::new(cargo_bin("gpuwl"))
            .args(["check", "--help"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert!(String::from_utf8_lossy(&out.stderr).contains("writing the help"));
    }
}

#[test]
fn pod_and_cr_readers_fail_early_on_bytes_that_are_not_text() {
    let d = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/inventory/lab/nodes.json"
    );
    for (args, want) in [
        (
            vec!["inventory", "--nodes", d, "--pods", "/dev/zero"],
            "/dev/zero: not JSON or YAML text (byte 0x00 at offset 0)",
        ),
        (
            vec!["explain", "--pod", "/dev/zero"],
            "/dev/zero: not JSON or YAML text (byte 0x00 at offset 0)",
        ),
        (
            // Random bytes: a control byte first (not text) or, else, invalid UTF-8 soon.
            vec!["inventory", "--nodes", d, "--pods", "/dev/urandom"],
            "/dev/urandom: not ",
        ),
        (
            vec!["kubevirt", "check", "--nodes", d, "--kubevirt", "/dev/zero"],
            "/dev/zero: not JSON or YAML text",
        ),
    ] {
        let out = Command::new(cargo_bin("gpuwl"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn explain_takes_one_pod_and_its_usage_says_so() {
    let (code, _, err) = crate::kit::gpuwl(&["explain", "pod", "a", "b"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unexpected argument 'b'"), "{err}");
    let help = crate::kit::gpuwl_ok(&["explain", "--help"]);
    assert!(
        help.contains("Usage: gpuwl explain [OPTIONS] [[pod] NAME]\n"),
        "{help}"
    );
}

/// A kubeconfig path that is missing or a directory is named once, unquoted, with the I/O
/// reason, whether it comes from $KUBECONFIG or --kubeconfig (exit 2: bad input).
#[test]
fn a_missing_kubeconfig_is_named_once() {
    let out = Command::new(cargo_bin("gpuwl"))
        .arg("check")
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpuwl: $KUBECONFIG=/nonexistent: cannot read: No such file or directory (os error 2)\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cargo_bin("gpuwl"))
        .args(["inventory", "--kubeconfig"])
        .arg(dir.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches(&*dir.path().to_string_lossy()).count(),
        1,
        "{err}"
    );
    assert!(err.ends_with(": cannot read: is a directory\n"), "{err}");
}
