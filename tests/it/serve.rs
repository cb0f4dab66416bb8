//! End-to-end against the real local control plane: `gpuwl lab` on its own cluster
//! (`gpuwl-test-serve`), then `gpuwl serve` with that cluster's kubeconfig, scraped over
//! HTTP and parsed with a Prometheus text parser (prometheus-parse). Relabelling a node with
//! a typo turns its mismatch metric to 1; deleting job-cross drops the unservable count;
//! `deploy/` is applied by server-side apply and every object is read back, and a second
//! exporter impersonating its ServiceAccount works with its ClusterRole and follows a
//! ClusterPolicy and a KubeVirt CR; stopping the
//! cluster turns /readyz to 503 and gpuwl_api_reachable to 0 while the last good state is
//! still served; SIGTERM ends the process with exit 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use prometheus_parse::{Scrape, Value};

use crate::common::{ClusterDown, gpuwl_ok, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-test-serve";

/// A running `gpuwl serve`, killed when dropped.
struct Serve {
    child: Child,
    addr: String,
    log: Receiver<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Starts `gpuwl serve --listen 127.0.0.1:0` and reads the port from its first line.
    fn start(kubeconfig: &str) -> Serve {
        let mut child = Command::new(cargo_bin("gpuwl"))
            .args([
                "serve",
                "--kubeconfig",
                kubeconfig,
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, log) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = log.recv_timeout(Duration::from_secs(30)).unwrap();
        let addr = first
            .strip_prefix("gpuwl serve: listening on http://")
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_owned();
        Serve { child, addr, log }
    }

    /// GET `path`: (status code, body).
    fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_owned())
    }

    fn scrape(&self) -> Scrape {
        let (code, body) = self.get("/metrics");
        assert_eq!(code, 200, "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
        Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap()
    }

    /// Lines logged so far.
    fn logged(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }
}

/// The value of the one sample of `metric` whose labels include `labels`.
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match x.value {
            Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => v,
            ref other => panic!("{metric}: unexpected {other:?}"),
        })
        .collect();
    assert!(found.len() <= 1, "{metric} {labels:?}: {found:?}");
    found.first().copied()
}

/// Polls `cond` every 100 ms for up to `limit`; returns how long it took.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// Server-side applies every object of every `*.yaml` file in `dir` (not recursive, as
/// `kubectl apply -f DIR`) and reads each back; returns `Kind/name` of each.
async fn apply_dir(client: &kube::Client, dir: &Path) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut applied = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        for doc in docs {
            let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
                Some((g, v)) => (g.to_owned(), v.to_owned()),
                None => (
                    String::new(),
                    doc["apiVersion"].as_str().unwrap().to_owned(),
                ),
            };
            let kind = doc["kind"].as_str().unwrap();
            let name = doc["metadata"]["name"].as_str().unwrap();
            let gvk = GroupVersionKind::gvk(&group, &version, kind);
            let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
            let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
                Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            api.patch(
                name,
                &PatchParams::apply("gpuwl-test").force(),
                &Patch::Apply(&doc),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {kind}/{name}: {e}", f.display()));
            let back = api.get(name).await.unwrap();
            assert_eq!(back.metadata.name.as_deref(), Some(name));
            applied.push(format!("{kind}/{name}"));
        }
    }
    applied
}

#[test]
#[ignore = "needs local control plane"]
fn serve_follows_the_lab_cluster() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let (root, kubeconfig) = crate::common::lab_cluster(CLUSTER);
    let kubeconfig = kubeconfig.as_str();

    let serve = Serve::start(kubeconfig);
    assert_eq!(serve.get("/healthz").0, 200);
    wait_for(Duration::from_secs(60), "/readyz 200", || {
        serve.get("/readyz").0 == 200
    });

    // The lab's state: every node agrees, job-cross is unservable, three pools.
    let s = serve.scrape();
    for n in ["lab-node-0", "lab-node-1", "lab-node-2"] {
        assert_eq!(
            value(&s, "gpuwl_node_mismatch", &[("node", n)]),
            Some(0.0),
            "{n}"
        );
    }
    assert_eq!(
        value(
            &s,
            "gpuwl_unservable_pods",
            &[("resource", "nvidia.com/gpu")]
        ),
        Some(1.0)
    );
    let units = |s: &Scrape, pool: &str, resource: &str, kind: &str| {
        value(
            s,
            "gpuwl_pool_units",
            &[("pool", pool), ("resource", resource), ("kind", kind)],
        )
    };
    assert_eq!(
        units(&s, "container", "nvidia.com/gpu", "capacity"),
        Some(4.0)
    );
    assert_eq!(
        units(&s, "container", "nvidia.com/gpu", "allocated"),
        Some(1.0)
    );
    assert_eq!(units(&s, "container", "nvidia.com/gpu", "free"), Some(3.0));
    assert_eq!(
        units(&s, "vm-passthrough", "nvidia.com/GA102GL_A10", "free"),
        Some(1.0)
    );
    assert_eq!(
        units(&s, "vm-vgpu", "nvidia.com/NVIDIA_A10-12Q", "allocatable"),
        Some(4.0)
    );
    assert_eq!(
        value(
            &s,
            "gpuwl_node_workload_config_info",
            &[
                ("node", "lab-node-1"),
                ("label", "vm-passthrough"),
                ("effective", "vm-passthrough"),
                ("source", "label")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "gpuwl_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    assert_eq!(value(&s, "gpuwl_api_reachable", &[]), Some(1.0));
    assert!(value(&s, "gpuwl_last_evaluation_timestamp_seconds", &[]).unwrap() > 1.7e9);
    // No KubeVirt CRD in the lab: no KubeVirt finding.
    assert!(
        !s.samples
            .iter()
            .any(|x| x.metric == "gpuwl_kubevirt_finding")
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt
        .block_on(gpuwl::cluster::client(Path::new(kubeconfig), None))
        .unwrap();

    // A typo in the label: the node's mismatch metric turns to 1 within seconds.
    rt.block_on(gpuwl::lab::kubeops::label_node(
        &client,
        "lab-node-1",
        "nvidia.com/gpu.workload.config",
        "vm_passthrough",
    ))
    .unwrap();
    let took = wait_for(Duration::from_secs(10), "mismatch of lab-node-1", || {
        value(
            &serve.scrape(),
            "gpuwl_node_mismatch",
            &[("node", "lab-node-1")],
        ) == Some(1.0)
    });
    assert!(took < Duration::from_secs(5), "{took:?}");
    let s = serve.scrape();
    assert_eq!(
        value(
            &s,
            "gpuwl_node_finding",
            &[
                ("node", "lab-node-1"),
                ("code", "invalid-label-value"),
                ("severity", "error")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "gpuwl_node_mismatch", &[("node", "lab-node-0")]),
        Some(0.0)
    );

    // job-cross goes: nothing waits unservable on nvidia.com/gpu any more.
    rt.block_on(gpuwl::lab::kubeops::delete_pod(
        &client,
        "gpu-vm",
        "job-cross",
    ))
    .unwrap();
    wait_for(Duration::from_secs(10), "unservable drops to 0", || {
        value(
            &serve.scrape(),
            "gpuwl_unservable_pods",
            &[("resource", "nvidia.com/gpu")],
        ) == Some(0.0)
    });

    // deploy/ applies on the local control plane: every object is created.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let applied = rt.block_on(apply_dir(&client, &deploy));
    assert_eq!(
        applied,
        [
            "Namespace/gpuwl",
            "ServiceAccount/gpuwl",
            "ClusterRole/gpuwl-reader",
            "ClusterRoleBinding/gpuwl-reader",
            "Deployment/gpuwl",
            "Service/gpuwl",
        ]
    );
    // With the controller-manager in the local control plane, the Deployment gets its pod
    // and kwok runs it on a simulated node.
    let running = rt.block_on(async {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "gpuwl");
        for _ in 0..60 {
            if let Ok(l) = pods.list(&Default::default()).await
                && l.items
                    .iter()
                    .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        false
    });
    assert!(
        running,
        "deploy/'s Deployment got no Running pod within 30 s"
    );
    drop(client);
    drop(rt);

    // The ClusterRole is enough: a second exporter, as the ServiceAccount (impersonated),
    // gets ready, sees the same drift and meets no watch error (no 403).
    let mut doc: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    for u in doc["users"].as_array_mut().unwrap() {
        u["user"]["as"] = "system:serviceaccount:gpuwl:gpuwl".into();
    }
    let as_sa = root.path().join("kubeconfig-as-sa");
    std::fs::write(&as_sa, serde_json::to_string(&doc).unwrap()).unwrap();
    // With a KubeVirt CR in place it also reports the CR's findings, and follows the CR.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(crate::kubevirt::install_kubevirt(Path::new(kubeconfig)));
    // And a ClusterPolicy (sandbox workloads on, default vm-passthrough) decides effective
    // workload configs.
    let client = rt
        .block_on(gpuwl::cluster::client(Path::new(kubeconfig), None))
        .unwrap();
    let policies: Api<DynamicObject> =
        Api::all_with(client.clone(), &gpuwl::input::clusterpolicy::api_resource());
    rt.block_on(async {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.create(&PostParams::default(), &crate::operator::crd())
            .await
            .unwrap();
        let policy: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"sandboxWorkloads": {"enabled": true, "defaultWorkload": "vm-passthrough"}}
        }))
        .unwrap();
        // The CRD takes a moment to be served.
        for attempt in 0.. {
            match policies.create(&PostParams::default(), &policy).await {
                Ok(_) => break,
                Err(e) if attempt < 100 => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("create ClusterPolicy: {e}"),
            }
        }
    });
    {
        let sa = Serve::start(as_sa.to_str().unwrap());
        wait_for(
            Duration::from_secs(60),
            "/readyz 200 as the ServiceAccount",
            || sa.get("/readyz").0 == 200,
        );
        let s = sa.scrape();
        assert_eq!(
            value(&s, "gpuwl_node_mismatch", &[("node", "lab-node-1")]),
            Some(1.0)
        );
        for r in [
            "nodes",
            "pods",
            "clusterpolicies",
            "hyperconvergeds",
            "kubevirts",
        ] {
            assert_eq!(
                value(&s, "gpuwl_watch_errors_total", &[("resource", r)]),
                Some(0.0),
                "{r}: {:?}",
                sa.logged()
            );
        }
        let kv = |s: &Scrape, resource: &str, code: &str| {
            value(
                s,
                "gpuwl_kubevirt_finding",
                &[("resource", resource), ("code", code)],
            )
        };
        assert_eq!(
            kv(&s, "nvidia.com/NVIDIA_A10-12Q", "advertised-not-permitted"),
            Some(1.0)
        );
        assert_eq!(
            kv(
                &s,
                "nvidia.com/TU104GL_TESLA_T4",
                "permitted-not-advertised"
            ),
            Some(1.0)
        );
        // The typo'd label is invalid: the ClusterPolicy's default applies.
        let info = |s: &Scrape, node: &str, label: &str, effective: &str| {
            value(
                s,
                "gpuwl_node_workload_config_info",
                &[
                    ("node", node),
                    ("label", label),
                    ("effective", effective),
                    ("source", "cluster-policy"),
                ],
            )
        };
        assert_eq!(
            info(&s, "lab-node-1", "vm_passthrough", "vm-passthrough"),
            Some(1.0)
        );
        // Sandbox workloads turned off: every node becomes container, the vm-vgpu label
        // is ignored.
        rt.block_on(policies.patch(
            "cluster-policy",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"sandboxWorkloads": {"enabled": false}}})),
        ))
        .unwrap();
        wait_for(Duration::from_secs(10), "the policy applies", || {
            info(&sa.scrape(), "lab-node-2", "vm-vgpu", "container") == Some(1.0)
        });
        assert_eq!(
            value(
                &sa.scrape(),
                "gpuwl_node_finding",
                &[
                    ("node", "lab-node-2"),
                    ("code", "label-ignored"),
                    ("severity", "warning")
                ]
            ),
            Some(1.0)
        );
        // Permitting the vGPU type in the CR clears its finding.
        let ar = gpuwl::input::kubevirt::api_resource(gpuwl::input::kubevirt::KUBEVIRT);
        let kvs: Api<DynamicObject> = Api::namespaced_with(client, "kubevirt", &ar);
        let patch = serde_json::json!({"spec": {"configuration": {"permittedHostDevices": {
            "mediatedDevices": [{"mdevNameSelector": "NVIDIA A10-12Q",
                                 "resourceName": "nvidia.com/NVIDIA_A10-12Q"}]}}}});
        rt.block_on(kvs.patch("kubevirt", &PatchParams::default(), &Patch::Merge(&patch)))
            .unwrap();
        wait_for(Duration::from_secs(10), "the vGPU finding clears", || {
            kv(
                &sa.scrape(),
                "nvidia.com/NVIDIA_A10-12Q",
                "advertised-not-permitted",
            )
            .is_none()
        });
        assert_eq!(
            kv(
                &sa.scrape(),
                "nvidia.com/TU104GL_TESLA_T4",
                "permitted-not-advertised"
            ),
            Some(1.0)
        );
    }
    drop(rt);

    // The API server goes away: /readyz and gpuwl_api_reachable say so, and the last
    // good state is still served.
    gpuwl_ok(&["cluster", "down", "--name", CLUSTER]);
    wait_for(Duration::from_secs(30), "/readyz 503", || {
        serve.get("/readyz").0 == 503
    });
    let (_, why) = serve.get("/readyz");
    assert!(why.contains("API server is unreachable"), "{why}");
    let s = serve.scrape();
    assert_eq!(value(&s, "gpuwl_api_reachable", &[]), Some(0.0));
    assert_eq!(value(&s, "gpuwl_ready", &[]), Some(0.0));
    assert_eq!(
        value(&s, "gpuwl_node_mismatch", &[("node", "lab-node-1")]),
        Some(1.0)
    );
    assert!(value(&s, "gpuwl_watch_errors_total", &[("resource", "nodes")]).unwrap() >= 1.0);
    assert_eq!(serve.get("/healthz").0, 200);
    let log = serve.logged();
    assert!(
        log.iter()
            .any(|l| l.starts_with("gpuwl serve: watch nodes: cannot watch nodes")),
        "{log:?}"
    );

    // SIGTERM: a clean exit.
    let mut serve = serve;
    let pid = i32::try_from(serve.child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(st) = serve.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

/// Start-up failures: an unreadable kubeconfig is bad input (exit 2), an address in use a
/// runtime failure (exit 3); one line on stderr each, nothing on stdout.
#[test]
fn serve_start_up_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let (code, out, err) = crate::common::gpuwl(&[
        "serve",
        "--kubeconfig",
        missing.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(
        err.starts_with(&format!("gpuwl: {}: cannot read", missing.display())),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // A usable kubeconfig (nothing listens on its server: serve must not need it to start)
    // and a port already taken.
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, out, err) = crate::common::gpuwl(&[
        "serve",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--listen",
        &addr,
    ]);
    assert_eq!((code, out.as_str()), (3, ""), "{err}");
    assert!(
        err.starts_with(&format!("gpuwl: cannot listen on {addr}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
