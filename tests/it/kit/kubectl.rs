//! The one way the tests run kubectl (on PATH) against a cluster.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `kubectl --kubeconfig KUBECONFIG --request-timeout=30s ARGS…` with `stdin` on its
/// standard input; returns (exit code, stdout, stderr), the code -1 when kubectl was killed
/// by a signal. The request timeout bounds each API request, so that a wedged API server
/// fails the test instead of hanging it.
pub fn kubectl(kubeconfig: impl AsRef<Path>, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig.as_ref())
        .arg("--request-timeout=30s")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl on PATH");
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

/// [`kubectl`] with nothing on its standard input, which must succeed (else it panics with
/// the arguments and kubectl's stderr); returns stdout.
pub fn kubectl_ok(kubeconfig: impl AsRef<Path>, args: &[&str]) -> String {
    let (code, stdout, stderr) = kubectl(kubeconfig, args, "");
    assert_eq!(code, 0, "kubectl {args:?}: {stderr}");
    stdout
}
