//! The Go toolchain as every build of [`super::build`] runs it: the version check
//! ([`go_version`], at least [`MIN_GO`]), the one way a `go` command is set up
//! ([`go_command`]), the package count of a build's progress bar, the line of a failed
//! build to show, and a heartbeat on stderr while a silent step (a module download, a
//! package listing) runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuwl_core::error::{Error, Result};

/// Runs `f`, printing `{what}: N s elapsed` on stderr every 15 s while it runs (when
/// `progress`): a module download or a package listing says nothing for minutes.
pub(crate) fn heartbeat<T>(progress: bool, what: &str, f: impl FnOnce() -> T) -> T {
    if !progress {
        return f();
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let what = what.to_owned();
    let started = Instant::now();
    let ticker = std::thread::spawn(move || {
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            rx.recv_timeout(Duration::from_secs(15))
        {
            note!("{what}: {} s elapsed", started.elapsed().as_secs());
        }
    });
    let out = f();
    drop(tx);
    let _ = ticker.join();
    out
}

pub(crate) fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The oldest Go release that builds the pinned modules (`go` directive of
/// `controlplane/go.mod`).
pub(crate) const MIN_GO: (u32, u32) = (1, 26);

/// `(major, minor)` of `go version` output such as `go version go1.26.8 linux/amd64`.
pub(crate) fn go_release(output: &str) -> Option<(u32, u32)> {
    let v = output
        .split_whitespace()
        .find_map(|w| w.strip_prefix("go1."))?;
    let minor: String = v.chars().take_while(char::is_ascii_digit).collect();
    Some((1, minor.parse().ok()?))
}

/// Checks that `go` is on PATH and at least [`MIN_GO`]; returns `go version`'s output.
///
/// Errors: [`Error::Runtime`] (one line) naming `what` needs Go.
pub(crate) fn go_version(what: &str) -> Result<String> {
    let go_version = Command::new("go").arg("version").output().map_err(|_| {
        Error::runtime(format!(
            "`go` not found on PATH: install Go 1.26 or newer to build {what}"
        ))
    })?;
    if !go_version.status.success() {
        return Err(Error::runtime(format!(
            "`go version` failed: {}",
            last_line(&String::from_utf8_lossy(&go_version.stderr))
        )));
    }
    let reported = String::from_utf8_lossy(&go_version.stdout).into_owned();
    if let Some((major, minor)) = go_release(&reported)
        && (major, minor) < MIN_GO
    {
        return Err(Error::runtime(format!(
            "{}: {what} needs Go {}.{} or newer (controlplane/go.mod); install a newer Go or put it first on PATH",
            reported.trim(),
            MIN_GO.0,
            MIN_GO.1
        )));
    }
    Ok(reported)
}

/// `go <args>` in the module directory `src`, as every build step runs it: outside any
/// workspace, CGO off, the module graph read-only, no VCS stamp, stdin closed.
pub(crate) fn go_command(src: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("go");
    c.args(args)
        .current_dir(src)
        .env("GOWORK", "off")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-buildvcs=false -mod=readonly")
        .stdin(Stdio::null());
    c
}

/// The packages `go build` compiles for `packages` (the lines of `go list -deps`, run with
/// a [`heartbeat`] saying `what`): the progress bar's length; 0 when go cannot tell.
pub(crate) fn count_packages(src: &Path, plain: bool, what: &str, packages: &[&str]) -> u64 {
    let mut args = vec!["list", "-deps"];
    args.extend(packages);
    heartbeat(plain, what, || go_command(src, &args).output())
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count() as u64)
        .unwrap_or(0)
}

/// The line of a failed `go build`'s last output lines to show: the last naming an error
/// (or `file: message`), else the last one.
pub(crate) fn failure_line(tail: &[String]) -> &str {
    tail.iter()
        .rev()
        .find(|l| l.contains("error") || l.contains(": "))
        .or(tail.last())
        .map(String::as_str)
        .unwrap_or("go build exited with an error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_returns_what_it_ran_and_stops_its_ticker() {
        assert_eq!(heartbeat(false, "x", || 7), 7);
        let t = std::time::Instant::now();
        assert_eq!(heartbeat(true, "x", || "done"), "done");
        // The ticker ends with the work, not 15 s later.
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn go_releases() {
        assert_eq!(go_release("go version go1.26.8 linux/amd64"), Some((1, 26)));
        assert_eq!(go_release("go version go1.9 linux/amd64"), Some((1, 9)));
        assert_eq!(go_release("go version devel"), None);
        assert!((1, 25) < MIN_GO && (1, 26) >= MIN_GO);
    }

    #[test]
    fn a_failed_build_shows_its_error_line() {
        let tail = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            failure_line(&tail(&[
                "k8s.io/api/core/v1",
                "cmd/etcd/main.go:3:2: undefined: x",
                "k8s.io/kubernetes/cmd/kube-apiserver",
            ])),
            "cmd/etcd/main.go:3:2: undefined: x"
        );
        assert_eq!(
            failure_line(&tail(&["k8s.io/api/core/v1", "signal: killed"])),
            "signal: killed"
        );
        assert_eq!(failure_line(&tail(&["a", "b"])), "b");
        assert_eq!(failure_line(&[]), "go build exited with an error");
    }

    #[test]
    fn go_runs_outside_workspaces_without_cgo_in_the_module() {
        let c = go_command(Path::new("/tmp/m"), &["mod", "download"]);
        assert_eq!(c.get_program(), "go");
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["mod", "download"]);
        assert_eq!(c.get_current_dir(), Some(Path::new("/tmp/m")));
        let mut envs: Vec<(String, String)> = c
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        envs.sort();
        assert_eq!(
            envs,
            [
                ("CGO_ENABLED".to_string(), "0".to_string()),
                ("GOFLAGS".into(), "-buildvcs=false -mod=readonly".into()),
                ("GOWORK".into(), "off".into()),
            ]
        );
    }
}
