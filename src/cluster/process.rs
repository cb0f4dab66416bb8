//! Starting, finding and stopping the control-plane processes of one cluster.
//!
//! Each process runs in its own session (`setsid`), so it outlives `gpuwl cluster up`
//! and ignores the terminal's signals. Its pid is in `<state>/pids/<component>.pid`, its
//! output in `<state>/logs/<component>.log`. A pid counts as ours only while
//! `/proc/<pid>/cmdline` mentions the state directory, so a reused pid is never killed.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::recipe::Component;
use gpuwl_core::error::{Error, Result};

/// The supervisor's name among a cluster's processes (`pids/supervisor.pid`,
/// `logs/supervisor.log`): [`stop_all`] stops it first ([`super::supervisor`] runs as it).
pub const SUPERVISOR: &str = "supervisor";

/// The components, in start order (stopped in reverse).
pub const COMPONENTS: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok-controller",
];

/// Components started only on request (`gpuwl cluster up --gpu-operator`,
/// [`super::gpu_operator`]; `--kubevirt`, [`super::kubevirt::COMPONENTS`]), after the
/// others; stopped first. Each counts for the cluster's status only once its pid file
/// exists.
pub const OPTIONAL_COMPONENTS: [&str; 6] = [
    "gpu-operator",
    "gpu-device-plugins",
    "virt-api",
    "virt-controller",
    "kubevirt-nodes",
    "kueue-manager",
];

/// The optional components this cluster started (those with a pid file).
pub fn started_optional(state: &Path) -> Vec<&'static str> {
    OPTIONAL_COMPONENTS
        .iter()
        .copied()
        .filter(|c| pid_file(state, c).is_file())
        .collect()
}

fn pid_file(state: &Path, component: &str) -> PathBuf {
    state.join("pids").join(format!("{component}.pid"))
}

/// Log file of a component.
pub fn log_file(state: &Path, component: &str) -> PathBuf {
    state.join("logs").join(format!("{component}.log"))
}

/// Starts `c.binary c.args` (with `c.env` added to the environment) detached from this
/// process, recording its pid.
pub fn spawn(state: &Path, c: &Component) -> Result<u32> {
    let (component, program, args) = (c.name, c.binary.as_path(), &c.args);
    let rt = |what: &str, e: std::io::Error| {
        Error::failed(format!("cannot start {component}: {what}"), e)
    };
    std::fs::create_dir_all(state.join("pids")).map_err(|e| rt("pids dir", e))?;
    std::fs::create_dir_all(state.join("logs")).map_err(|e| rt("logs dir", e))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file(state, component))
        .map_err(|e| rt("log file", e))?;
    let log2 = log.try_clone().map_err(|e| rt("log file", e))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(c.env.iter().map(|(k, v)| (k, v)))
        .current_dir(state)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| rt(&program.display().to_string(), e))?;
    let pid = child.id();
    std::fs::write(pid_file(state, component), format!("{pid}\n"))
        .map_err(|e| rt("pid file", e))?;
    // Reap the child if it exits while this process lives (tests), so it never lingers
    // as a zombie; when gpuwl exits first, init adopts and reaps it.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
}

/// The recorded pid of a component, if its pid file exists.
pub fn recorded_pid(state: &Path, component: &str) -> Option<u32> {
    std::fs::read_to_string(pid_file(state, component))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// True when `pid` is a live (not zombie) process whose command line mentions `state`.
pub fn is_ours_and_alive(pid: u32, state: &Path) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // Field 3 (after the parenthesised command name) is the state letter.
    let state_letter = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("");
    if state_letter == "Z" || state_letter == "X" {
        return false;
    }
    // The trailing slash keeps cluster `a` from matching cluster `a-b`.
    let needle = format!("{}/", state.display());
    // A process in the middle of execve(2) (the GPU Operator's wrapper execs `chroot`, which
    // execs the operator) has an empty command line for a moment: the new address space is
    // in place before its arguments are. Empty is asked again for up to 1 s before the
    // process counts as not ours (100 ms was seen too short with two operator clusters
    // starting beside other tests: "gpu-operator exited" with an empty log); a command line
    // naming something else is final.
    for _ in 0..100 {
        let Ok(cmdline) = std::fs::read(proc_dir.join("cmdline")) else {
            return false;
        };
        if !cmdline.is_empty() {
            return String::from_utf8_lossy(&cmdline).contains(&needle);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Liveness of one component: `Some(pid)` when alive.
pub fn alive(state: &Path, component: &str) -> Option<u32> {
    recorded_pid(state, component).filter(|&pid| is_ours_and_alive(pid, state))
}

/// Stops the cluster's supervisor, then every component (SIGTERM, then SIGKILL after
/// `grace`), newest first, and waits until none is alive. Returns the components that had to be killed.
pub fn stop_all(state: &Path, grace: Duration) -> Result<Vec<&'static str>> {
    let mut killed = Vec::new();
    // The supervisor first: it would restart what is stopped after it.
    for component in std::iter::once(&SUPERVISOR)
        .chain(OPTIONAL_COMPONENTS.iter().rev())
        .chain(COMPONENTS.iter().rev())
    {
        if stop_one(state, component, grace)? {
            killed.push(*component);
        }
    }
    Ok(killed)
}

/// Stops one component of the cluster in `state` (SIGTERM, SIGKILL after `grace`) and
/// removes its pid file; returns whether it had to be killed. Nothing to do when it is not
/// running.
///
/// Errors: [`Error::Runtime`] when it survives SIGKILL for 5 s.
pub fn stop_one(state: &Path, component: &str, grace: Duration) -> Result<bool> {
    let Some(pid) = alive(state, component) else {
        return Ok(false);
    };
    // SAFETY: plain syscall on a pid we verified belongs to this cluster.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while is_ours_and_alive(pid, state) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut killed = false;
    if is_ours_and_alive(pid, state) {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
        killed = true;
        let deadline = Instant::now() + Duration::from_secs(5);
        while is_ours_and_alive(pid, state) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if is_ours_and_alive(pid, state) {
            return Err(Error::Runtime(format!(
                "{component} (pid {pid}) does not stop even after SIGKILL"
            )));
        }
    }
    let _ = std::fs::remove_file(pid_file(state, component));
    Ok(killed)
}

/// Last non-empty line of a component's log, for error messages.
pub fn last_log_line(state: &Path, component: &str) -> String {
    std::fs::read_to_string(log_file(state, component))
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().chars().take(300).collect())
        })
        .unwrap_or_default()
}
