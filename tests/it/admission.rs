//! The admission guard end to end on the real local control plane (`gpuwl-it-admission`):
//! `gpuwl lab`, then `gpuwl serve --admission-listen 127.0.0.1:0 --admission-register`, and
//! the cluster's own kube-apiserver calling the webhook over HTTPS while `kubectl` creates
//! pods. Warn mode prints the warning with the did-you-mean; enforce mode denies; with the
//! guard killed (its configuration left behind) the API server fails open and admits the
//! pod, and the next exporter counts it in `gpuwl_admission_flagged_pods`; the lab's correct
//! pods get no warning; SIGTERM removes the configuration.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

use crate::kit::{ClusterDown, kubectl, lab_cluster, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-it-admission";

/// The lab's passthrough pod with a one-letter typo in its resource name.
fn typo_pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: gpu-vm\nspec:\n  containers:\n  - name: cuda\n    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n    resources:\n      limits:\n        nvidia.com/GA102GL_A1: 1\n"
    )
}

/// A CRD standing in for Karpenter's NodePool (any spec kept).
const NODEPOOL_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: nodepools.karpenter.sh}\nspec:\n  group: karpenter.sh\n  names: {kind: NodePool, plural: nodepools, singular: nodepool, listKind: NodePoolList}\n  scope: Cluster\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";

/// A NodePool whose nodes bring H200s (its `spec.limits` caps them).
const NODEPOOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: h200}\nspec:\n  limits: {cpu: '1000', nvidia.com/NVIDIA_H200_141GB: '16'}\n";

const WARNING: &str = "Warning: gpuwl unadvertised-name: spec.containers[0].resources.limits: no node advertises nvidia.com/GA102GL_A1; did you mean nvidia.com/GA102GL_A10 (1 edit away)?";

/// A running `gpuwl serve` with the guard; killed when dropped.
struct Guard {
    child: Child,
    metrics: String,
    admission: String,
    log: Receiver<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Guard {
    /// Starts serve with the guard and `extra` arguments; returns once the configuration is
    /// registered and /readyz answers 200.
    fn start(kubeconfig: &str, extra: &[&str]) -> Guard {
        let mut args = vec!["--admission-register"];
        args.extend(extra);
        let g = Guard::spawn(kubeconfig, &args);
        let start = Instant::now();
        while g.get("/readyz").0 != 200 {
            assert!(start.elapsed() < Duration::from_secs(60), "/readyz not 200");
            std::thread::sleep(Duration::from_millis(100));
        }
        g
    }

    /// Starts serve with the guard and `args`; returns once it listens (and, with
    /// `--admission-register`, once the configuration is registered).
    fn spawn(kubeconfig: &str, args: &[&str]) -> Guard {
        let register = args.contains(&"--admission-register");
        let mut child = Command::new(cargo_bin("gpuwl"))
            .args([
                "serve",
                "--kubeconfig",
                kubeconfig,
                "--listen",
                "127.0.0.1:0",
                "--admission-listen",
                "127.0.0.1:0",
            ])
            .args(args)
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
        let (mut metrics, mut admission) = (None, None);
        let start = Instant::now();
        loop {
            let line = log
                .recv_timeout(Duration::from_secs(30))
                .expect("serve's start-up lines");
            if let Some(rest) = line.strip_prefix("gpuwl serve: listening on http://") {
                metrics = rest.split_whitespace().next().map(str::to_owned);
            }
            if let Some(rest) =
                line.strip_prefix("gpuwl serve: admission guard listening on https://")
            {
                admission = rest.split('/').next().map(str::to_owned);
                if !register {
                    break;
                }
            }
            if line.starts_with("gpuwl serve: registered ValidatingWebhookConfiguration gpuwl-admission (https://127.0.0.1:") {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "{line}");
        }
        Guard {
            child,
            metrics: metrics.expect("the metrics address"),
            admission: admission.expect("the admission address"),
            log,
        }
    }

    /// POSTs `body` to `https://ADMISSION/validate` with curl, trusting `ca`: (HTTP status,
    /// response body).
    fn post(&self, ca: &Path, body: &[u8]) -> (u16, String) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("review.json");
        std::fs::write(&file, body).unwrap();
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "20",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
                "--cacert",
            ])
            .arg(ca)
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(format!("@{}", file.display()))
            .arg(format!("https://{}/validate", self.admission))
            .output()
            .expect("curl on PATH");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }

    /// GET `path` on the metrics port: (status, body).
    fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.metrics).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_owned())
    }

    /// The value of the sample line `series` (`name{labels}`) in the classic exposition.
    fn sample(&self, series: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics");
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Sends `signal` and waits for the exit; returns the exit code and the log after it.
    fn stop(mut self, signal: i32) -> (Option<i32>, Vec<String>) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: signalling our own child process.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "still running");
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(200));
        (status.code(), self.log.try_iter().collect())
    }
}

fn configurations(kubeconfig: &str) -> String {
    let (code, out, err) = kubectl(
        kubeconfig,
        &["get", "validatingwebhookconfigurations", "-o", "name"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
#[ignore = "needs local control plane"]
fn the_api_server_warns_denies_and_fails_open_through_the_guard() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let (root, kubeconfig) = lab_cluster(CLUSTER);
    let kc = kubeconfig.as_str();

    // deploy/admission/ is what the API server accepts (server-side dry run).
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");
    let (code, out, err) = kubectl(
        kc,
        &["apply", "-f", &format!("{deploy}/00-namespace.yaml")],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = kubectl(
        kc,
        &[
            "apply",
            "--dry-run=server",
            "-f",
            &format!("{deploy}/admission/"),
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("(server dry run)").count(), 4, "{out}");

    // Warn mode: the pod is created, kubectl prints the warning with the did-you-mean.
    let guard = Guard::start(kc, &[]);
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], &typo_pod("typo-warned"));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "pod/typo-warned created");
    assert_eq!(err.trim(), WARNING, "{err}");

    // The lab's correct pods (as new pods, server-side dry run: the API server calls the
    // webhook, nothing is stored) get no warning; job-cross gets the selector's.
    for f in ["pod-container", "pod-passthrough", "pod-vgpu", "pod-cross"] {
        let text = std::fs::read_to_string(root.path().join(format!("k8s/{f}.yaml"))).unwrap();
        let copy = text.replacen("\n  name: ", "\n  name: copy-", 1);
        let (code, out, err) = kubectl(kc, &["create", "--dry-run=server", "-f", "-"], &copy);
        assert_eq!(code, 0, "{f}: {out}{err}");
        assert!(out.contains("created (server dry run)"), "{f}: {out}");
        if f == "pod-cross" {
            assert_eq!(
                err.trim(),
                "Warning: gpuwl excluded: spec.containers[0].resources.limits: nvidia.com/gpu is advertised only in pool container (1 node), which the nodeSelector nvidia.com/gpu.workload.config=vm-passthrough excludes"
            );
        } else {
            assert_eq!(err, "", "{f}");
        }
    }
    assert_eq!(
        guard.sample("gpuwl_admission_reviews_total{kind=\"Pod\",verdict=\"warned\"}"),
        Some(2.0)
    );
    assert_eq!(
        guard.sample("gpuwl_admission_reviews_total{kind=\"Pod\",verdict=\"allowed\"}"),
        Some(3.0)
    );

    // SIGTERM: exit 0, the configuration is removed.
    let (code, log) = guard.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{log:?}");
    assert!(
        log.contains(
            &"gpuwl serve: removed ValidatingWebhookConfiguration gpuwl-admission".to_owned()
        ),
        "{log:?}"
    );
    assert!(!configurations(kc).contains("gpuwl-admission"));

    // Enforce mode: denied, nothing created — but a pod asking a GPU only autoscaling can
    // bring (scale from zero, issue 50) is admitted with its warning: named by the flag,
    // or capped by a Karpenter NodePool (a NodePool-like object on the local cluster).
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], NODEPOOL_CRD);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = kubectl(
        kc,
        &[
            "wait",
            "--for",
            "condition=established",
            "crd/nodepools.karpenter.sh",
            "--timeout=30s",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], NODEPOOL);
    assert_eq!(code, 0, "{out}{err}");
    let guard = Guard::start(
        kc,
        &[
            "--admission-mode",
            "enforce",
            "--admission-autoscaled",
            "nvidia.com/NVIDIA_H100_80GB=8",
        ],
    );
    let h100 =
        typo_pod("scale-from-zero").replace("nvidia.com/GA102GL_A1", "nvidia.com/NVIDIA_H100_80GB");
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], &h100);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "pod/scale-from-zero created");
    assert!(
        err.contains("Warning: gpuwl unadvertised-name: spec.containers[0].resources.limits: no node advertises nvidia.com/NVIDIA_H100_80GB"),
        "{err}"
    );
    let h200 = typo_pod("karpenter-brings-it")
        .replace("nvidia.com/GA102GL_A1", "nvidia.com/NVIDIA_H200_141GB");
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], &h200);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("Warning: gpuwl unadvertised-name: spec.containers[0].resources.limits: no node advertises nvidia.com/NVIDIA_H200_141GB"),
        "{err}"
    );
    // The NodePool-like CRD is gone again for the tests after this one.
    let (code, out, err) = kubectl(kc, &["delete", "crd", "nodepools.karpenter.sh"], "");
    assert_eq!(code, 0, "{out}{err}");
    for pod in ["scale-from-zero", "karpenter-brings-it"] {
        let (code, out, err) = kubectl(
            kc,
            &[
                "delete",
                "pod",
                "-n",
                "gpu-vm",
                pod,
                "--grace-period=0",
                "--force",
            ],
            "",
        );
        assert_eq!(code, 0, "{out}{err}");
    }
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], &typo_pod("typo-denied"));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("admission webhook \"gpu-requests.gpuwl.io\" denied the request: gpuwl unadvertised-name: spec.containers[0].resources.limits: no node advertises nvidia.com/GA102GL_A1; did you mean nvidia.com/GA102GL_A10 (1 edit away)?"),
        "{err}"
    );
    let (code, _, _) = kubectl(kc, &["get", "pod", "-n", "gpu-vm", "typo-denied"], "");
    assert_eq!(code, 1, "the denied pod exists");

    // The guard killed (no clean-up: the configuration still points at it): the API server
    // fails open and admits the pod without a word.
    let (_, _) = guard.stop(libc::SIGKILL);
    assert!(configurations(kc).contains("gpuwl-admission"));
    let (code, out, err) = kubectl(kc, &["apply", "-f", "-"], &typo_pod("typo-unguarded"));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "pod/typo-unguarded created");
    assert!(!err.contains("Warning"), "{err}");

    // The next exporter reports what got in: the two typo pods and job-cross.
    let guard = Guard::start(kc, &[]);
    let start = Instant::now();
    while guard.sample("gpuwl_admission_flagged_pods{code=\"unadvertised-name\"}") != Some(2.0) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            guard.sample("gpuwl_admission_flagged_pods{code=\"unadvertised-name\"}")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        guard.sample("gpuwl_admission_flagged_pods{code=\"excluded\"}"),
        Some(1.0)
    );
    assert_eq!(
        guard.sample("gpuwl_admission_flagged_pods{code=\"too-large\"}"),
        Some(0.0)
    );
    let (code, log) = guard.stop(libc::SIGINT);
    assert_eq!(code, Some(0), "{log:?}");
    assert!(!configurations(kc).contains("gpuwl-admission"));
}

/// An AdmissionReview of `object` as a `kind` in `group`.
fn review(group: &str, kind: &str, object: &str) -> String {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-1","kind":{{"group":"{group}","version":"v1","kind":"{kind}"}},"operation":"CREATE","object":{object}}}}}"#
    )
}

/// Bad input over real HTTPS, without any API server (nothing is synced: every review is
/// admitted without a word): malformed JSON and a review without a request get 400 with a
/// one-line reason that does not echo the input, a body over 4 MiB gets 413, an unknown
/// kind is allowed; the process stays up and counts them. Bad flags exit 2.
#[test]
fn the_guard_answers_bad_input_over_https_and_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let (_port, kc) = crate::kit::silent_api_server(dir.path());
    let cert = gpuwl::serve::tls::generate(&["localhost".into()], &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let (ca, crt, key) = (
        dir.path().join("ca.crt"),
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
    );
    std::fs::write(&ca, cert.ca_pem.as_deref().unwrap()).unwrap();
    std::fs::write(&crt, &cert.cert_pem).unwrap();
    std::fs::write(&key, &cert.key_pem).unwrap();
    let g = Guard::spawn(
        kc.to_str().unwrap(),
        &[
            "--admission-cert",
            crt.to_str().unwrap(),
            "--admission-key",
            key.to_str().unwrap(),
            "--admission-mode",
            "enforce",
        ],
    );
    let secret = "SECRET-VALUE-\u{1b}[31m";
    let (code, body) = g.post(&ca, format!("{{\"apiVersion\": \"{secret}").as_bytes());
    assert_eq!(code, 400, "{body}");
    assert!(body.starts_with("not an AdmissionReview: "), "{body}");
    assert!(!body.contains("SECRET"), "{body}");
    assert_eq!(body.lines().count(), 1, "{body}");
    let (code, body) = g.post(
        &ca,
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    );
    assert_eq!(
        (code, body.as_str()),
        (400, "not an AdmissionReview: no request\n")
    );
    let huge = review("", "Pod", &format!("{{\"x\":\"{}\"}}", "a".repeat(5 << 20)));
    // curl sends a large body after `Expect: 100-continue`; when the guard answers 413 and
    // closes before curl has read it, curl reports the 100 it saw (a race of the client,
    // seen once in CI): the refusal is asserted on the first of three tries that got an
    // answer, and the guard must still answer afterwards (below).
    let codes: Vec<u16> = (0..3).map(|_| g.post(&ca, huge.as_bytes()).0).collect();
    assert!(
        codes.contains(&413) && codes.iter().all(|c| matches!(c, 413 | 100 | 0)),
        "{codes:?}"
    );
    let (code, body) = g.post(&ca, review("", "ConfigMap", r#"{"data":{}}"#).as_bytes());
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": {"uid": "u-1", "allowed": true}})
    );
    // Not synced (no API server): even enforce mode admits, without a word.
    let typo = r#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/GA102GL_A1":"1"}}}]}}"#;
    let (code, body) = g.post(&ca, review("", "Pod", typo).as_bytes());
    assert_eq!(code, 200);
    assert!(
        body.contains(r#""allowed":true"#) && !body.contains("warnings"),
        "{body}"
    );
    // Still up, and counted.
    assert_eq!(g.get("/healthz").0, 200);
    // The guard answers from threads of its own; serve's watch and evaluation threads run
    // ten nice steps below them (Linux: per-thread nice in /proc/<pid>/task/<tid>/stat).
    let threads = threads(g.child.id());
    let nice_of = |name: &str| {
        let mut n: Vec<i64> = threads
            .iter()
            .filter(|(c, _)| c == name)
            .map(|(_, n)| *n)
            .collect();
        n.dedup();
        n
    };
    let guard_nice = nice_of("gpuwl-admission");
    let worker_nice = nice_of("tokio-rt-worker");
    assert_eq!(guard_nice.len(), 1, "{threads:?}");
    assert_eq!(worker_nice.len(), 1, "{threads:?}");
    assert_eq!(
        worker_nice[0],
        (guard_nice[0] + i64::from(gpuwl::serve::BACKGROUND_NICE)).min(19),
        "{threads:?}"
    );
    // Two bad reviews above, and each oversize try (one curl may not have seen its 413).
    let invalid = g
        .sample("gpuwl_admission_reviews_total{kind=\"other\",verdict=\"invalid\"}")
        .unwrap_or(0.0);
    let seen = codes.iter().filter(|c| **c == 413).count() as f64;
    assert!(
        (2.0 + seen..=5.0).contains(&invalid),
        "{invalid} invalid reviews counted, {codes:?}"
    );
    assert_eq!(
        g.sample("gpuwl_admission_reviews_total{kind=\"Pod\",verdict=\"skipped\"}"),
        Some(1.0)
    );
    drop(g);

    // Bad flags and files: exit 2, the file named.
    let kc = kc.to_str().unwrap();
    let (code, _, err) = crate::kit::gpuwl(&[
        "serve",
        "--kubeconfig",
        kc,
        "--admission-listen",
        "127.0.0.1:0",
        "--admission-cert",
        dir.path().join("absent.crt").to_str().unwrap(),
        "--admission-key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("absent.crt: cannot read"), "{err}");
    for args in [
        &["--admission-mode", "enforce"][..],
        &[
            "--admission-listen",
            "127.0.0.1:0",
            "--admission-service",
            "Not/A Service",
        ][..],
        &[
            "--admission-listen",
            "127.0.0.1:0",
            "--admission-cert",
            "x.crt",
        ][..],
    ] {
        let mut a = vec!["serve", "--kubeconfig", kc];
        a.extend(args);
        let (code, _, err) = crate::kit::gpuwl(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}

/// (thread name, nice) of every thread of process `pid`.
fn threads(pid: u32) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let stat = std::fs::read_to_string(t.join("stat")).unwrap();
        // Fields after the parenthesised name: state is field 3, nice field 19.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i64 = after.split(' ').nth(16).unwrap().parse().unwrap();
        let comm = std::fs::read_to_string(t.join("comm")).unwrap();
        out.push((comm.trim().to_owned(), nice));
    }
    out.sort();
    out
}

/// deploy/admission/ ships the configuration `--admission-register` applies (same rules,
/// failure policy, timeout, side effects), pointed at its Service, skipping kube-system and
/// gpuwl; the Service reaches the port the Deployment patch opens.
#[test]
fn the_shipped_webhook_configuration_is_the_registered_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/admission");
    let yaml = |f: &str| -> serde_json::Value {
        serde_saphyr::from_str(&std::fs::read_to_string(root.join(f)).unwrap()).unwrap()
    };
    let shipped = yaml("01-validatingwebhookconfiguration.yaml");
    let service = yaml("00-service.yaml");
    let client_config = serde_json::json!({
        "service": {"namespace": "gpuwl", "name": "gpuwl-admission", "path": "/validate", "port": 443},
        "caBundle": "",
    });
    let mut registered = gpuwl::serve::admission::configuration(
        "gpuwl-admission",
        client_config,
        &["kube-system", "gpuwl"],
    );
    registered["metadata"]["annotations"] =
        serde_json::json!({"cert-manager.io/inject-ca-from": "gpuwl/gpuwl-admission"});
    assert_eq!(shipped, registered);
    let w = &shipped["webhooks"][0];
    assert_eq!(w["failurePolicy"], "Ignore");
    assert!(w["timeoutSeconds"].as_i64().unwrap() <= 5);
    assert_eq!(w["sideEffects"], "None");
    assert_eq!(
        (
            service["metadata"]["namespace"].as_str(),
            service["metadata"]["name"].as_str(),
            service["spec"]["ports"][0]["port"].as_i64(),
            service["spec"]["ports"][0]["targetPort"].as_str(),
        ),
        (
            Some("gpuwl"),
            Some("gpuwl-admission"),
            Some(443),
            Some("admission")
        )
    );
    let patch: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root.join("deployment.patch")).unwrap())
            .unwrap();
    let c = &patch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["ports"][0]["name"], "admission");
    assert_eq!(c["ports"][0]["containerPort"], 9443);
    // Guaranteed QoS with a whole CPU: requests equal to limits.
    assert_eq!(c["resources"]["requests"], c["resources"]["limits"]);
    assert_eq!(c["resources"]["requests"]["cpu"], "1");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w == ["--admission-listen", "0.0.0.0:9443"]),
        "{args:?}"
    );
}
