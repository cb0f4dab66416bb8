//! The fast tier of the local control plane's state (src/cluster/mod.rs: `status`,
//! `restarts`, `down`, `list`, `at_server`, `server_hint`): `gpuwl cluster …` and a
//! command on a local cluster's kubeconfig run on a state directory a test writes
//! (`$GPUWL_STATE_DIR`), as a cluster that was started and stopped leaves it. No process
//! is started; the live tests in cluster.rs run the same commands on running clusters.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

/// Runs `gpuwl ARGS…` with its state in `state` and `HOME` in `home` (so no user file is
/// touched); returns (exit code, stdout, stderr).
fn run(state: &Path, home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cargo_bin("gpuwl"))
        .args(args)
        .env("GPUWL_STATE_DIR", state)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env("COLUMNS", "1000")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes what `cluster up` leaves of cluster `name` once its processes are gone: its
/// `cluster.json` (the API server on `port`), a kubeconfig reaching it, pid files of
/// processes that no longer run, logs. Returns the state directory.
fn stopped_cluster(state: &Path, name: &str, port: u16) -> PathBuf {
    let dir = state.join(name);
    std::fs::create_dir_all(dir.join("pids")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::create_dir_all(dir.join("pki")).unwrap();
    let info = serde_json::json!({
        "name": name, "apiserver_port": port, "etcd_port": 1, "etcd_peer_port": 2,
        "controller_manager_port": 3, "scheduler_port": 4, "kwok_port": 5,
        "bin_dir": "/nonexistent", "kubernetes_version": "v1.36.3"
    });
    std::fs::write(dir.join("cluster.json"), info.to_string()).unwrap();
    std::fs::write(
        dir.join("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\nusers:\n- name: {name}-admin\n  user: {{token: t}}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}-admin}}\ncurrent-context: {name}\n"
        ),
    )
    .unwrap();
    // Pids of processes that are gone (pid_max is below 2^22 on Linux).
    for c in ["etcd", "kube-apiserver", "kube-scheduler"] {
        std::fs::write(dir.join("pids").join(format!("{c}.pid")), "4194999\n").unwrap();
    }
    dir
}

#[test]
fn a_stopped_clusters_state_is_shown_with_its_restarts_and_down_removes_it_all() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = stopped_cluster(state.path(), "eval", closed_port());
    std::fs::write(
        dir.join("restarts.log"),
        "1700000000 kube-scheduler exited (last log line: bind: address already in use)\n\
         not a record\n\
         1700000100 kwok-controller kwok-controller wedged: 3 of 3 node leases not renewed\n",
    )
    .unwrap();

    let (rc, out, err) = run(
        state.path(),
        home.path(),
        &["cluster", "status", "--name", "eval"],
    );
    assert_eq!(rc, 3, "{out}{err}");
    // The restart's time as a person reads it (issue 54, item 11), how long ago first.
    let (head, restarts) = out.rsplit_once("restarts: ").unwrap();
    assert_eq!(
        head,
        format!(
            "eval: stopped\n\
             state left in {} (logs in logs/); start afresh with: gpuwl cluster up --name eval\n",
            dir.display()
        )
    );
    assert!(
        restarts.starts_with("2 (last: kwok-controller ")
            && restarts.ends_with(
                " d ago, at 2023-11-14 22:15:00 UTC: kwok-controller wedged: 3 of 3 node leases not renewed)\n"
            ),
        "{restarts}"
    );
    let (rc, out, _) = run(
        state.path(),
        home.path(),
        &["cluster", "kubeconfig", "--name", "eval"],
    );
    assert_eq!(rc, 0);
    assert_eq!(out.trim(), dir.join("kubeconfig").display().to_string());

    // `--set-context` had merged the cluster into the user's kubeconfig beside a context of
    // theirs; down takes out what points into the state, and only that.
    let users = home.path().join("users.yaml");
    let pki = dir.join("pki");
    std::fs::write(
        &users,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {{server: \"https://prod.example:6443\"}}\n- name: eval\n  cluster: {{server: \"https://127.0.0.1:1\", certificate-authority: {ca}}}\nusers:\n- name: me\n  user: {{token: mine}}\n- name: eval-admin\n  user: {{client-certificate: {crt}, client-key: {key}}}\ncontexts:\n- name: prod\n  context: {{cluster: prod, user: me}}\n- name: eval\n  context: {{cluster: eval, user: eval-admin}}\ncurrent-context: eval\n",
            ca = pki.join("ca.crt").display(),
            crt = pki.join("admin.crt").display(),
            key = pki.join("admin.key").display(),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("user-context.json"),
        serde_json::json!({"file": users, "previous_context": "prod"}).to_string(),
    )
    .unwrap();
    let (rc, out, err) = run(
        state.path(),
        home.path(),
        &["cluster", "down", "--name", "eval"],
    );
    assert_eq!(
        (rc, out.as_str()),
        (0, "cluster eval stopped and its state removed\n"),
        "{err}"
    );
    assert!(!dir.exists());
    let left: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&users).unwrap()).unwrap();
    let names = |list: &str| -> Vec<String> {
        left[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("clusters"), ["prod"]);
    assert_eq!(names("users"), ["me"]);
    assert_eq!(names("contexts"), ["prod"]);
    assert_eq!(left["current-context"], "prod");

    let (rc, out, _) = run(
        state.path(),
        home.path(),
        &["cluster", "down", "--name", "eval"],
    );
    assert_eq!(
        (rc, out.as_str()),
        (0, "cluster eval does not exist; nothing to do\n")
    );
    let (rc, out, _) = run(
        state.path(),
        home.path(),
        &["cluster", "status", "--name", "eval"],
    );
    assert_eq!(
        (rc, out.as_str()),
        (
            3,
            "eval: stopped\nstart it with: gpuwl cluster up --name eval\n"
        )
    );
}

#[test]
fn a_refused_local_cluster_is_named_with_its_own_commands() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let port = closed_port();
    let dir = stopped_cluster(state.path(), "eval", port);
    // Another local cluster on another port is not taken for it.
    stopped_cluster(state.path(), "other", closed_port());
    let kubeconfig = dir.join("kubeconfig");
    let kc = kubeconfig.to_str().unwrap();
    let (rc, _, err) = run(
        state.path(),
        home.path(),
        &["check", "--kubeconfig", kc, "--request-timeout", "5"],
    );
    assert_eq!(rc, 3, "{err}");
    assert!(
        err.ends_with(
            "connection refused; is the cluster up? (the local cluster eval: gpuwl cluster status --name eval; gpuwl cluster up --name eval starts it again)\n"
        ),
        "{err}"
    );
    // The same server, no longer a local cluster's (its state gone): the address is said to
    // come from the kubeconfig's context.
    let elsewhere = home.path().join("kc.yaml");
    std::fs::copy(&kubeconfig, &elsewhere).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (rc, _, err) = run(
        state.path(),
        home.path(),
        &[
            "check",
            "--kubeconfig",
            elsewhere.to_str().unwrap(),
            "--request-timeout",
            "5",
        ],
    );
    assert_eq!(rc, 3, "{err}");
    assert!(
        err.ends_with(&format!(
            "connection refused; is the cluster up? (the address is that of context eval of {})\n",
            elsewhere.display()
        )),
        "{err}"
    );
}
