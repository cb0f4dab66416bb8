//! Running the gpuwl binary the way every CLI test does (wide, hermetic: no `KUBECONFIG`),
//! and an API server that never answers, for the commands' request timeouts.

use std::process::Command;

use assert_cmd::cargo::cargo_bin;

/// Runs `gpuwl ARGS…` and returns (exit code, stdout, stderr); -1 when killed by a signal.
pub fn gpuwl(args: &[&str]) -> (i32, String, String) {
    // Text output is laid out for $COLUMNS (else 80): wide, so assertions see whole lines.
    let out = Command::new(cargo_bin("gpuwl"))
        .args(args)
        .env("COLUMNS", "1000")
        // Hermetic: a manifest alone would be explained against a configured cluster.
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `gpuwl ARGS…`, asserts it succeeded (showing stdout and stderr if not), returns stdout.
pub fn gpuwl_ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = gpuwl(args);
    assert_eq!(code, 0, "gpuwl {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

/// Runs `gpuwl explain ARGS…` (ARGS without the word `explain`), asserts it explained (exit
/// 0: nothing blocks the pod; 1: a blocking cause), returns stdout.
pub fn gpuwl_explained(args: &[&str]) -> String {
    let mut a = vec!["explain"];
    a.extend(args);
    let (code, stdout, stderr) = gpuwl(&a);
    assert!(
        code == 0 || code == 1,
        "gpuwl {a:?} exit {code}:\n{stdout}\n{stderr}"
    );
    stdout
}

/// A server on 127.0.0.1 that accepts TCP connections and never answers (no TLS, no
/// HTTP), and a kubeconfig in `dir` pointing at it; returns the port and the kubeconfig.
pub fn silent_api_server(dir: &std::path::Path) -> (u16, std::path::PathBuf) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let kc = dir.join("kc.yaml");
    std::fs::write(
        &kc,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"),
    )
    .unwrap();
    (port, kc)
}
