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

use crate::kit::{ClusterDown, gpuwl_ok, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-test-serve";

/// A running `gpuwl serve`, killed when dropped.
pub(crate) struct Serve {
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
    pub(crate) fn start(kubeconfig: &str) -> Serve {
        Serve::start_with(kubeconfig, &[])
    }

    /// As [`Serve::start`], with `extra` arguments.
    fn start_with(kubeconfig: &str, extra: &[&str]) -> Serve {
        let mut child = Command::new(cargo_bin("gpuwl"))
            .args([
                "serve",
                "--kubeconfig",
                kubeconfig,
                "--listen",
                "127.0.0.1:0",
            ])
            .args(extra)
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
    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        let (code, _, body) = self.get_with(path, "");
        (code, body)
    }

    /// GET `path` with extra request header lines (each ending `\r\n`): (status code,
    /// response head, body).
    fn get_with(&self, path: &str, headers: &str) -> (u16, String, String) {
        let (code, head, body) = self.get_bytes(path, headers);
        (code, head, String::from_utf8_lossy(&body).into_owned())
    }

    /// As [`Serve::get_with`], the body as bytes.
    fn get_bytes(&self, path: &str, headers: &str) -> (u16, String, Vec<u8>) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\n{headers}Connection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut bytes = Vec::new();
        s.read_to_end(&mut bytes).unwrap();
        let split = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP response");
        let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
        let mut body = bytes[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, head, body)
    }

    /// A scrape as Prometheus asks (OpenMetrics preferred), parsed.
    pub(crate) fn scrape(&self) -> Scrape {
        let (code, head, body) = self.get_with(
            "/metrics",
            "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2\r\n",
        );
        assert_eq!(code, 200, "{body}");
        assert!(
            head.contains("application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap()
    }

    /// Lines logged so far.
    fn logged(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }
}

/// What `promtool check metrics` prints (stdout and stderr) for `exposition`, with the
/// promtool scripts/tools.sh builds (cached after the first build).
fn promtool_check_metrics(exposition: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = Command::new(root.join("scripts/tools.sh"))
        .arg("promtool")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/tools.sh promtool: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let path = String::from_utf8(built.stdout).unwrap();
    let mut child = Command::new(path.trim())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}{}",
        if out.status.success() {
            ""
        } else {
            "(failed) "
        },
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The body of a `Transfer-Encoding: chunked` response.
fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// The value of the one sample of `metric` whose labels include `labels`.
pub(crate) fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
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
pub(crate) fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
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
        applied.extend(apply_text(client, &f.display().to_string(), &text).await);
    }
    applied
}

/// Server-side applies every object of the YAML stream `text` (from `source`) and reads
/// each back; returns `Kind/name` of each. A kind whose CRD was just created is retried
/// until it is served (10 s).
async fn apply_text(client: &kube::Client, source: &str, text: &str) -> Vec<String> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).unwrap();
    let mut applied = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
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
        let mut attempt = 0;
        let (ar, caps) = loop {
            match kube::discovery::pinned_kind(client, &gvk).await {
                Ok(found) => break found,
                Err(e) if attempt < 100 => {
                    let _ = e;
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{source}: {kind}: {e}"),
            }
        };
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
        .unwrap_or_else(|e| panic!("{source}: {kind}/{name}: {e}"));
        let back = api.get(name).await.unwrap();
        assert_eq!(back.metadata.name.as_deref(), Some(name));
        applied.push(format!("{kind}/{name}"));
    }
    applied
}

/// Stand-ins for the prometheus-operator CRDs (ServiceMonitor, PrometheusRule) with an
/// open schema: enough for the API server to store the chart's objects, not a check of
/// their fields against the operator's schema.
fn monitoring_crds() -> String {
    ["ServiceMonitor", "PrometheusRule"]
        .iter()
        .map(|kind| {
            let plural = format!("{}s", kind.to_ascii_lowercase());
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.monitoring.coreos.com\nspec:\n  group: monitoring.coreos.com\n  scope: Namespaced\n  names: {{kind: {kind}, plural: {plural}, singular: {}, listKind: {kind}List}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
                kind.to_ascii_lowercase()
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// `helm template gpuwl-helm deploy/helm/gpuwl ARGS…` with the helm scripts/tools.sh
/// builds (release name gpuwl-helm: its cluster-wide objects do not collide with deploy/'s).
pub(crate) fn helm_template(args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = Command::new(root.join("scripts/tools.sh"))
        .arg("helm")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/tools.sh helm: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let helm = String::from_utf8(built.stdout).unwrap();
    let out = Command::new(helm.trim())
        .args(["template", "gpuwl-helm"])
        .arg(root.join("deploy/helm/gpuwl"))
        .args(args)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("gpuwl-test-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("gpuwl-test-helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("gpuwl-test-helm-data"),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs local control plane"]
fn serve_follows_the_lab_cluster() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let (root, kubeconfig) = crate::kit::lab_cluster(CLUSTER);
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
    // The same pod by explain's verdict: unservable, excluded by its own nodeSelector;
    // classes without a pod read 0.
    assert_eq!(
        value(
            &s,
            "gpuwl_pending_gpu_pods",
            &[("class", "unservable"), ("cause", "excluded")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "gpuwl_pending_gpu_pods",
            &[("class", "blocked"), ("cause", "none")]
        ),
        Some(0.0)
    );
    let units = |s: &Scrape, pool: &str, resource: &str, kind: &str| {
        value(
            s,
            &format!("gpuwl_pool_{kind}_units"),
            &[("pool", pool), ("origin", "known"), ("resource", resource)],
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
                ("label_state", "valid"),
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
    assert_eq!(value(&s, "gpuwl_stale", &[]), Some(0.0));
    assert!(value(&s, "gpuwl_last_evaluation_timestamp_seconds", &[]).unwrap() > 1.7e9);
    assert!(value(&s, "process_resident_memory_bytes", &[]).unwrap() > 1e6);
    // One metric per quantity: nothing under the old name that mixed them.
    assert!(!s.samples.iter().any(|x| x.metric == "gpuwl_pool_units"));

    // curl's Accept (*/*) gets the classic text format, and promtool finds nothing to say
    // about it.
    let (code, head, classic) = serve.get_with("/metrics", "Accept: */*\r\n");
    assert_eq!(code, 200);
    assert!(
        head.contains("text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(!classic.contains("# EOF"), "{classic}");
    assert!(
        classic.contains("# HELP gpuwl_evaluations_total "),
        "{classic}"
    );
    let checked = promtool_check_metrics(&classic);
    assert_eq!(checked, "", "promtool check metrics:\n{checked}");
    // gzip when accepted.
    let (code, head, gz) = serve.get_bytes("/metrics", "Accept-Encoding: gzip\r\n");
    assert_eq!(code, 200);
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    let mut unzipped = String::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_string(&mut unzipped)
        .unwrap();
    assert!(unzipped.contains("gpuwl_node_mismatch{node=\"lab-node-0\"} 0"));
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
    // The relabel is on record (issue 40): a counter and an Event on the node.
    assert_eq!(
        value(
            &s,
            "gpuwl_workload_label_changes_total",
            &[
                ("node", "lab-node-1"),
                ("from", "vm-passthrough"),
                ("to", "vm_passthrough")
            ]
        ),
        Some(1.0)
    );
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let mut found = None;
    for _ in 0..50 {
        found = rt
            .block_on(events.list(&Default::default()))
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("WorkloadLabelChanged"));
        if found.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ev = found.expect("an Event WorkloadLabelChanged");
    assert_eq!(ev.involved_object.name.as_deref(), Some("lab-node-1"));
    assert_eq!(
        ev.message.as_deref(),
        Some(
            "nvidia.com/gpu.workload.config changed on node lab-node-1: vm-passthrough → vm_passthrough (the GPU Operator swaps the node's operands and the GPU names it advertises)"
        )
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
            "Role/gpuwl-cluster-autoscaler-reader",
            "RoleBinding/gpuwl-cluster-autoscaler-reader",
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

    // The Helm chart, rendered by helm with every optional object on, applies as well (in
    // its own namespace, beside deploy/'s); so do deploy/prometheus-operator/'s objects.
    let crds = rt.block_on(apply_text(&client, "monitoring CRDs", &monitoring_crds()));
    assert_eq!(crds.len(), 2);
    let rendered = helm_template(&[
        "--namespace",
        "gpuwl-helm",
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.labels.release=kube-prometheus-stack",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=kube-prometheus-stack",
        "--set",
        "grafanaDashboard.enabled=true",
        // rules.yaml's repository-relative runbook_url, compared below.
        "--set",
        "prometheusRule.runbookBaseURL=",
    ]);
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: gpuwl-helm}\n";
    rt.block_on(apply_text(&client, "namespace", ns));
    let mut applied = rt.block_on(apply_text(&client, "helm template", &rendered));
    applied.sort();
    assert_eq!(
        applied,
        [
            "ClusterRole/gpuwl-helm-reader",
            "ClusterRoleBinding/gpuwl-helm-reader",
            "ConfigMap/gpuwl-helm-dashboard",
            "Deployment/gpuwl-helm",
            "PrometheusRule/gpuwl-helm",
            "Role/gpuwl-helm-cluster-autoscaler-reader",
            "RoleBinding/gpuwl-helm-cluster-autoscaler-reader",
            "Service/gpuwl-helm",
            "ServiceAccount/gpuwl-helm",
            "ServiceMonitor/gpuwl-helm",
        ]
    );
    let (monitors, rules) = rt.block_on(async {
        let get = |kind: &str, plural: &str| {
            let ar = kube::api::ApiResource {
                group: "monitoring.coreos.com".into(),
                version: "v1".into(),
                api_version: "monitoring.coreos.com/v1".into(),
                kind: kind.into(),
                plural: plural.into(),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "gpuwl-helm", &ar);
            async move { api.get("gpuwl-helm").await.unwrap() }
        };
        (
            get("ServiceMonitor", "servicemonitors").await,
            get("PrometheusRule", "prometheusrules").await,
        )
    });
    for o in [&monitors, &rules] {
        assert_eq!(
            o.metadata.labels.as_ref().unwrap()["release"],
            "kube-prometheus-stack"
        );
    }
    let want: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/rules.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        rules.data["spec"], want,
        "the chart's rules are rules.yaml's"
    );
    assert_eq!(
        monitors.data["spec"]["endpoints"][0]["port"],
        serde_json::json!("metrics")
    );
    let helm_running = rt.block_on(async {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(client.clone(), "gpuwl-helm");
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
        helm_running,
        "the chart's Deployment got no Running pod within 30 s"
    );
    let mut operator_objects = rt.block_on(apply_dir(&client, &deploy.join("prometheus-operator")));
    operator_objects.sort();
    assert_eq!(
        operator_objects,
        ["PrometheusRule/gpuwl", "ServiceMonitor/gpuwl"]
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
        let info = |s: &Scrape, node: &str, label_state: &str, effective: &str| {
            value(
                s,
                "gpuwl_node_workload_config_info",
                &[
                    ("node", node),
                    ("label_state", label_state),
                    ("effective", effective),
                    ("source", "cluster-policy"),
                ],
            )
        };
        assert_eq!(
            info(&s, "lab-node-1", "invalid", "vm-passthrough"),
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
            info(&sa.scrape(), "lab-node-2", "valid", "container") == Some(1.0)
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
        let ar = gpuwl::input::kubevirt::api_resource(gpuwl_core::decode::kubevirt::KUBEVIRT);
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
    assert!(why.contains("the API server does not answer"), "{why}");
    let s = serve.scrape();
    assert_eq!(value(&s, "gpuwl_api_reachable", &[]), Some(0.0));
    assert_eq!(value(&s, "gpuwl_ready", &[]), Some(0.0));
    assert_eq!(value(&s, "gpuwl_stale", &[]), Some(1.0));
    assert_eq!(
        value(&s, "gpuwl_node_mismatch", &[("node", "lab-node-1")]),
        Some(1.0)
    );
    // The node watch fails once the API server's process has gone (the watchdog's probe
    // may see the shutdown first: the open watch ends only when the process exits).
    let mut log = serve.logged();
    wait_for(
        Duration::from_secs(30),
        "a failed node watch, counted and logged",
        || {
            log.extend(serve.logged());
            let counted = value(
                &serve.scrape(),
                "gpuwl_watch_errors_total",
                &[("resource", "nodes")],
            )
            .is_some_and(|n| n >= 1.0);
            counted
                && log
                    .iter()
                    .any(|l| l.starts_with("gpuwl serve: watch nodes: cannot watch nodes"))
        },
    );
    assert_eq!(serve.get("/healthz").0, 200);

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
    let (code, out, err) = crate::kit::gpuwl(&[
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
    let (code, out, err) = crate::kit::gpuwl(&[
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

const FAULTS_A: &str = "gpuwl-test-serve-faults-a";
const FAULTS_B: &str = "gpuwl-test-serve-faults-b";

/// Sends SIGCONT to a paused process when dropped, so a failed assertion never leaves the
/// API server stopped (its `cluster down` would wait for it otherwise).
struct Resume(i32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid of a process this test started (the cluster's).
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// The kube-apiserver pid of local control plane `name`.
fn apiserver_pid(name: &str) -> i32 {
    let state = gpuwl::cluster::state_dir(name);
    let pid = gpuwl::cluster::process::recorded_pid(&state, "kube-apiserver").unwrap();
    assert!(gpuwl::cluster::process::is_ours_and_alive(pid, &state));
    i32::try_from(pid).unwrap()
}

/// Writes `text` to `path` atomically (a rename), as a config-management tool or a
/// kubelet-projected volume replaces a file.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Faults (issue: a hung API server went unseen, retries without backoff, a replaced
/// cluster never picked up): the API server paused with SIGSTOP is seen within 60 s
/// (/readyz 503, gpuwl_api_reachable 0, gpuwl_stale 1, the last good metrics still served
/// and the evaluation time frozen; /healthz 503 after --unhealthy-after 10 s), stays paused
/// 5 s more, and is recovered within 10 s of SIGCONT; then the cluster is stopped
/// (connection refused) for 20 s — at most 10 log lines and a backoff that keeps the watch
/// errors few — and a second cluster (new port, new CA) written over the same kubeconfig
/// file is picked up. (The pause was 90 s, then a fixed 45 s, and the outage 60 s, then
/// 30 s: shortened as the test command's time mattered; the bounds on what is seen are the
/// same, the error count's bound scaled to the outage.)
#[test]
#[ignore = "needs local control plane"]
fn serve_survives_a_hung_and_a_replaced_api_server() {
    // One slot: the pause is of this test's own API server; the bounds it asserts (seen
    // within 60 s, ready within 10 s of SIGCONT) leave room for one other test beside it.
    let _serial = one_cluster_at_a_time();
    let _down_a = ClusterDown(FAULTS_A);
    let _down_b = ClusterDown(FAULTS_B);
    gpuwl_ok(&["cluster", "up", "--name", FAULTS_A, "--fresh"]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let kc_a = gpuwl_ok(&["cluster", "kubeconfig", "--name", FAULTS_A]);
    replace_file(&kubeconfig, &std::fs::read_to_string(kc_a.trim()).unwrap());

    let serve = Serve::start_with(kubeconfig.to_str().unwrap(), &["--unhealthy-after", "10"]);
    wait_for(Duration::from_secs(60), "/readyz 200", || {
        serve.get("/readyz").0 == 200
    });
    let before = serve.scrape();
    assert_eq!(value(&before, "gpuwl_stale", &[]), Some(0.0));
    let errors = |s: &Scrape| value(s, "gpuwl_watch_errors_total", &[("resource", "nodes")]);
    serve.logged();

    // 1. A hung API server: accepts connections, answers nothing.
    let pid = apiserver_pid(FAULTS_A);
    let paused = Instant::now();
    // SAFETY: kill(2) on the cluster's kube-apiserver, which this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let resume = Resume(pid);
    let seen = wait_for(Duration::from_secs(60), "/readyz 503 while paused", || {
        serve.get("/readyz").0 == 503
    });
    let s = serve.scrape();
    let evaluated_at = value(&s, "gpuwl_last_evaluation_timestamp_seconds", &[]).unwrap();
    assert_eq!(value(&s, "gpuwl_api_reachable", &[]), Some(0.0));
    assert_eq!(value(&s, "gpuwl_ready", &[]), Some(0.0));
    assert_eq!(value(&s, "gpuwl_stale", &[]), Some(1.0));
    assert_eq!(
        value(
            &s,
            "gpuwl_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    // /healthz fails once the API server has not answered for --unhealthy-after (10 s).
    wait_for(Duration::from_secs(75), "/healthz 503 while paused", || {
        serve.get("/healthz").0 == 503
    });
    let (_, why) = serve.get("/healthz");
    assert!(why.contains("has not answered"), "{why}");
    // A few more seconds paused: nothing is evaluated, nothing more is logged.
    std::thread::sleep(Duration::from_secs(5));
    let paused_for = paused.elapsed();
    let s = serve.scrape();
    assert_eq!(
        value(&s, "gpuwl_last_evaluation_timestamp_seconds", &[]),
        Some(evaluated_at),
        "nothing is evaluated once the API server is known away"
    );
    let paused_log = serve.logged();
    assert!(
        paused_log.len() <= 10,
        "{} lines in {paused_for:?}: {paused_log:?}",
        paused_log.len()
    );
    assert!(
        paused_log
            .iter()
            .any(|l| l.contains("the API server does not answer")),
        "{paused_log:?}"
    );
    // SIGCONT: ready again within 10 s, /healthz 200, fresh. A watch whose stream was open
    // through the pause may still fail and re-list just after /readyz first says 200 (seen
    // under load), so the fresh state is awaited as a whole: /readyz 200 with the gauges
    // saying reachable and not stale in the same poll.
    drop(resume);
    let back = wait_for(
        Duration::from_secs(10),
        "ready and fresh after SIGCONT",
        || {
            let s = serve.scrape();
            serve.get("/readyz").0 == 200
                && value(&s, "gpuwl_api_reachable", &[]) == Some(1.0)
                && value(&s, "gpuwl_stale", &[]) == Some(0.0)
        },
    );
    assert_eq!(serve.get("/healthz").0, 200);
    eprintln!("hung API server seen after {seen:?}; recovered {back:?} after SIGCONT");

    // 2. The cluster goes (connection refused) for 20 s while a new one starts.
    let errors_before = errors(&serve.scrape()).unwrap();
    serve.logged();
    gpuwl_ok(&["cluster", "down", "--name", FAULTS_A]);
    let down = Instant::now();
    wait_for(
        Duration::from_secs(30),
        "/readyz 503 after cluster down",
        || serve.get("/readyz").0 == 503,
    );
    gpuwl_ok(&["cluster", "up", "--name", FAULTS_B]);
    std::thread::sleep(Duration::from_secs(20).saturating_sub(down.elapsed()));
    let outage_log = serve.logged();
    let s = serve.scrape();
    let errors_during = errors(&s).unwrap() - errors_before;
    assert!(
        outage_log.len() <= 10,
        "{} lines in 20 s: {outage_log:?}",
        outage_log.len()
    );
    // Without a backoff the watch retried every 1.2 s (about 16 errors in 20 s); with one
    // doubling from 0.5-1 s (jitter) it fails 3 to 5 times.
    assert!(
        (1.0..=7.0).contains(&errors_during),
        "{errors_during} node watch errors in 20 s"
    );
    assert_eq!(value(&s, "gpuwl_client_reloads_total", &[]), Some(0.0));

    // 3. The new cluster (another port, another CA) behind the same kubeconfig file.
    let kc_b = gpuwl_ok(&["cluster", "kubeconfig", "--name", FAULTS_B]);
    replace_file(&kubeconfig, &std::fs::read_to_string(kc_b.trim()).unwrap());
    let took = wait_for(
        Duration::from_secs(30),
        "/readyz 200 on the new cluster",
        || serve.get("/readyz").0 == 200,
    );
    let s = serve.scrape();
    assert_eq!(value(&s, "gpuwl_client_reloads_total", &[]), Some(1.0));
    assert_eq!(value(&s, "gpuwl_stale", &[]), Some(0.0));
    let log = serve.logged();
    assert!(
        log.iter()
            .any(|l| l.contains("credentials changed on disk")),
        "{log:?}"
    );
    assert_eq!(serve.get("/healthz").0, 200);
    eprintln!("new cluster picked up after {took:?}");
}

/// Without an API server (nothing listens on the kubeconfig's port) serve still starts and
/// serves: /metrics in both formats by Accept and gzip when accepted, `gpuwl_api_reachable`
/// 0 at once (connection refused), /readyz 503 with the reason, /healthz 200 (it can
/// recover by itself), and a log of state changes, not of retries.
#[test]
fn serve_without_an_api_server() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let serve = Serve::start(kc.to_str().unwrap());
    wait_for(Duration::from_secs(20), "gpuwl_api_reachable 0", || {
        value(&serve.scrape(), "gpuwl_api_reachable", &[]) == Some(0.0)
    });
    let s = serve.scrape();
    assert_eq!(value(&s, "gpuwl_ready", &[]), Some(0.0));
    assert_eq!(value(&s, "gpuwl_stale", &[]), Some(1.0));
    assert_eq!(
        value(&s, "gpuwl_api_last_contact_timestamp_seconds", &[]),
        Some(0.0)
    );
    let (code, why) = serve.get("/readyz");
    assert_eq!(code, 503);
    assert!(why.contains("the API server does not answer"), "{why}");
    assert_eq!(serve.get("/healthz"), (200, "ok\n".to_owned()));

    // No Accept header, or curl's */*: the classic format.
    for accept in [
        "",
        "Accept: */*\r\n",
        "Accept: text/plain;version=0.0.4\r\n",
    ] {
        let (code, head, body) = serve.get_with("/metrics", accept);
        assert_eq!(code, 200);
        assert!(
            head.contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
            "{accept:?}: {head}"
        );
        assert!(!body.contains("# EOF"), "{body}");
        assert!(
            body.contains("# TYPE gpuwl_watch_errors_total counter\n"),
            "{body}"
        );
        assert!(body.contains("\nprocess_open_fds "), "{body}");
    }
    // gzip when accepted, plain otherwise.
    let (_, head, gz) = serve.get_bytes("/metrics", "Accept-Encoding: gzip\r\n");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.contains("gpuwl_api_reachable 0\n"), "{text}");
    let (_, head, _) = serve.get_with("/metrics", "");
    assert!(!head.contains("content-encoding"), "{head}");

    // 5 s of refused connections: the log says so once per state (the watchdog, the node
    // and pod watches, the five CR probes: ClusterPolicy, HyperConverged, KubeVirt, VMIs,
    // VMs), the retries only count.
    std::thread::sleep(Duration::from_secs(5));
    let log = serve.logged();
    assert!(log.len() <= 8, "{log:?}");
    assert!(
        log.iter()
            .any(|l| l.starts_with("gpuwl serve: the API server does not answer")),
        "{log:?}"
    );
    let errors = value(
        &serve.scrape(),
        "gpuwl_watch_errors_total",
        &[("resource", "nodes")],
    )
    .unwrap();
    assert!(
        (1.0..=6.0).contains(&errors),
        "{errors} node watch errors in about 5 s"
    );
}

/// A hung API server — it accepts connections and never answers, as one paused with
/// SIGSTOP does — is seen by the watchdog within 20 s (the issue: 90 s unseen, 296 s in a
/// longer pause), with one log line, and /healthz stays 200 (serve can recover from that).
/// The live SIGSTOP test is `serve_survives_a_hung_and_a_replaced_api_server`.
#[test]
fn serve_sees_a_silent_api_server_within_20_s() {
    let dir = tempfile::tempdir().unwrap();
    let (_, kc) = crate::kit::silent_api_server(dir.path());
    let serve = Serve::start(kc.to_str().unwrap());
    assert_eq!(
        value(&serve.scrape(), "gpuwl_api_reachable", &[]),
        Some(1.0)
    );
    let took = wait_for(Duration::from_secs(25), "gpuwl_api_reachable 0", || {
        value(&serve.scrape(), "gpuwl_api_reachable", &[]) == Some(0.0)
    });
    assert!(took <= Duration::from_secs(21), "{took:?}");
    let s = serve.scrape();
    assert_eq!(value(&s, "gpuwl_stale", &[]), Some(1.0));
    assert_eq!(serve.get("/readyz").0, 503);
    assert_eq!(serve.get("/healthz").0, 200);
    let log = serve.logged();
    let said: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("the API server does not answer"))
        .collect();
    assert_eq!(said.len(), 1, "{log:?}");
    // Whichever gives up first: the probe's 10 s, or the client's connect timeout (10 s;
    // the TLS handshake never completes).
    assert!(said[0].contains("no answer within"), "{log:?}");
}
