//! Ports of one local cluster: picked free, with no window for another `gpuwl cluster up`
//! to pick the same ones, and a bind conflict recognised in a component's log.
//!
//! None of the upstream components can be handed an open socket, and kube-apiserver,
//! etcd and kube-controller-manager cannot bind port 0 and report the port back (port 0
//! switches their secure serving off or is taken literally). So a port is found free by
//! binding it and released before the component binds it again. Two guards close the
//! window in between:
//! - [`PortLock`], an exclusive `flock` on one machine-wide file, is held from picking
//!   the ports until every component listens on its own; a second `gpuwl cluster up`
//!   (any cluster name, any state directory) waits for it and then finds those ports
//!   taken.
//! - A process that is not gpuwl may still take a port in the window: the component then
//!   logs `address already in use` and exits; [`conflict_in_log`] recognises that, and
//!   [`crate::cluster::up`] starts again on fresh ports.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use gpuwl_core::error::{Error, Result};

/// The TCP ports of one cluster, all on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// kube-apiserver `--secure-port` (HTTPS).
    pub apiserver: u16,
    /// etcd client URL port (HTTPS, client certificates only).
    pub etcd: u16,
    /// etcd peer URL port.
    pub etcd_peer: u16,
    /// kube-controller-manager `--secure-port` (HTTPS, `/healthz` open).
    pub controller_manager: u16,
    /// kube-scheduler `--secure-port` (HTTPS, `/healthz` open).
    pub scheduler: u16,
    /// kwok-controller `--server-address` / `--node-port` (HTTPS, `/healthz`).
    pub kwok: u16,
}

impl Ports {
    /// Every port with the component that binds it, in start order.
    pub fn by_component(&self) -> [(&'static str, u16); 6] {
        [
            ("etcd", self.etcd),
            ("etcd", self.etcd_peer),
            ("kube-apiserver", self.apiserver),
            ("kube-controller-manager", self.controller_manager),
            ("kube-scheduler", self.scheduler),
            ("kwok-controller", self.kwok),
        ]
    }

    /// Six distinct ports that are free on 127.0.0.1 at the time of the call (the kernel
    /// picks them from its ephemeral range). Hold a [`PortLock`] from before this call until
    /// the components listen.
    ///
    /// Errors: [`Error::Runtime`] when 127.0.0.1 cannot be bound at all.
    pub fn pick() -> Result<Ports> {
        let listeners = (0..6)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Error::failed("cannot find a free port on 127.0.0.1", e))?;
        let p = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Error::failed("cannot find a free port on 127.0.0.1", e))?;
        Ok(Ports {
            apiserver: p[0],
            etcd: p[1],
            etcd_peer: p[2],
            controller_manager: p[3],
            scheduler: p[4],
            kwok: p[5],
        })
    }

    /// The first port that something already listens on, if any (a quick check before
    /// starting on ports the caller chose).
    pub fn first_taken(&self) -> Option<u16> {
        self.by_component()
            .into_iter()
            .map(|(_, p)| p)
            .find(|&p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_err())
    }
}

/// Waits up to `limit` for each of `ports` to be free on 127.0.0.1 (polled every 50 ms);
/// returns the first one still taken then, if any.
///
/// Why: a component killed a moment ago still holds its listening socket while the kernel
/// tears down its memory (in `do_exit`, `exit_mm` runs before `exit_files`; its
/// `/proc/PID/cmdline` is already empty, so [`crate::cluster::process::alive`] no longer
/// counts it), which takes a while for a large Go heap on a busy machine. A restart on its
/// port in that window failed with "address already in use".
pub fn wait_free(ports: &[u16], limit: Duration) -> Option<u16> {
    let deadline = Instant::now() + limit;
    loop {
        let taken = ports
            .iter()
            .copied()
            .find(|&p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_err());
        if taken.is_none() || Instant::now() >= deadline {
            return taken;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The machine-wide lock file: `gpuwl-ports.lock` in the system temporary directory
/// (`$TMPDIR`, else `/tmp`). Ports are machine-wide, so this is not per state directory.
pub fn lock_path() -> PathBuf {
    std::env::temp_dir().join("gpuwl-ports.lock")
}

/// An exclusive `flock(2)` on [`lock_path`], released when dropped (or when the process
/// dies, so a crashed `gpuwl` never leaves it held).
#[derive(Debug)]
pub struct PortLock {
    _file: std::fs::File,
}

impl PortLock {
    /// Takes the lock, waiting up to `timeout` for another `gpuwl cluster up` to release it.
    ///
    /// Errors: [`Error::Runtime`] when the file cannot be opened or the lock is still held
    /// after `timeout` (the message names the file).
    pub fn acquire(timeout: Duration) -> Result<PortLock> {
        let path = lock_path();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| {
                Error::failed(format!("cannot open the port lock {}", path.display()), e)
            })?;
        let deadline = Instant::now() + timeout;
        loop {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a descriptor this function owns; no memory is shared.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r == 0 {
                return Ok(PortLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(Error::failed(
                    format!("cannot lock the port lock {}", path.display()),
                    e,
                ));
            }
            if Instant::now() >= deadline {
                return Err(Error::runtime(format!(
                    "another `gpuwl cluster up` has held the port lock {} for over {}s; try again when it is done",
                    path.display(),
                    timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The port a component's log says it could not bind, if any. Recognises the Go runtime's
/// `listen tcp 127.0.0.1:PORT: bind: address already in use`, which etcd, kube-apiserver,
/// kube-controller-manager, kube-scheduler and kwok all log (inside JSON for etcd and
/// kwok), and every one of them then exits 1 (checked with the pinned binaries).
pub fn conflict_in_log(log: &str) -> Option<u16> {
    const MARK: &str = "address already in use";
    for line in log.lines().filter(|l| l.contains(MARK)) {
        // The port is the last `:DIGITS` before the marker.
        let head = &line[..line.find(MARK).unwrap_or(line.len())];
        let port = head.rsplit(':').find_map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            (!digits.is_empty())
                .then(|| digits.parse::<u16>().ok())
                .flatten()
        });
        if let Some(p) = port {
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_each_components_bind_error() {
        // Lines as the pinned binaries print them when the port is held by another process
        // (etcd: zap JSON, stack trace cut; kwok: slog JSON, cut; the others: klog).
        let etcd = r#"{"level":"fatal","ts":"2026-11-30T04:15:08.135312Z","caller":"etcdmain/etcd.go:183","msg":"discovery failed","error":"listen tcp 127.0.0.1:34347: bind: address already in use","stacktrace":"go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2"}"#;
        assert_eq!(conflict_in_log(etcd), Some(34347));
        let klog = r#"E1130 04:15:10.286497   23829 run.go:72] "command failed" err="failed to create listener: failed to listen on 127.0.0.1:36917: listen tcp 127.0.0.1:36917: bind: address already in use""#;
        assert_eq!(conflict_in_log(klog), Some(36917));
        let kwok = r#"{"time":"2026-11-30T04:15:09.717761742Z","level":"ERROR","msg":"Failed to run server","err":"listen tcp 127.0.0.1:41001: bind: address already in use"}"#;
        assert_eq!(conflict_in_log(&format!("starting\n{kwok}\n")), Some(41001));
        assert_eq!(
            conflict_in_log("I1130 started\nlistening on 127.0.0.1:6443\n"),
            None
        );
    }

    #[test]
    fn picked_ports_are_distinct_and_free_until_taken() {
        let p = Ports::pick().unwrap();
        let mut all: Vec<u16> = p.by_component().iter().map(|(_, p)| *p).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6);
        assert!(all.iter().all(|&x| x > 0));
        // etcd's client port is checked first, so a held one is the one reported.
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, p.etcd)).unwrap();
        assert_eq!(p.first_taken(), Some(p.etcd));
        drop(held);
    }

    #[test]
    fn second_lock_waits_for_the_first() {
        let first = PortLock::acquire(Duration::from_secs(5)).unwrap();
        let err = PortLock::acquire(Duration::from_millis(200)).unwrap_err();
        assert!(err.to_string().contains("gpuwl-ports.lock"), "{err}");
        drop(first);
        PortLock::acquire(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn a_port_freed_while_waiting_is_free_and_one_held_is_named() {
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        let started = Instant::now();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        });
        assert_eq!(wait_free(&[port], Duration::from_secs(10)), None);
        assert!(started.elapsed() >= Duration::from_millis(250));
        releaser.join().unwrap();

        let kept = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let kept_port = kept.local_addr().unwrap().port();
        assert_eq!(
            wait_free(&[port, kept_port], Duration::from_millis(200)),
            Some(kept_port)
        );
    }
}
