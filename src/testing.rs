//! Support for the crate's own unit tests (compiled only under `cfg(test)`): the fast
//! tier's in-memory API server (`tests/it/kit/fake_api.rs`, docs/testing.md), shared with the
//! integration tests by path so both run the one fake, and an HTTPS front for it, for
//! code that builds its own client from a kubeconfig file or a component's port (the
//! local control plane's readiness and health checks, the scheduler's metrics).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

#[allow(dead_code, clippy::all)]
#[path = "../tests/it/kit/fake_api.rs"]
pub mod fake_api;

use crate::serve::tls::{self, Listener};
pub use fake_api::FakeApi;

/// A current-thread runtime with I/O and timers, as the tests' `block_on` needs.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `api` served over HTTPS on `127.0.0.1:port` (a throw-away certificate from
/// [`crate::serve::tls::generate`], served by its [`crate::serve::tls::Listener`]) by a
/// runtime of its own, until this is dropped.
pub struct Https {
    /// The port it listens on.
    pub port: u16,
    _runtime: tokio::runtime::Runtime,
}

/// Serves `api` over HTTPS ([`Https`]).
pub fn https(api: &FakeApi) -> Https {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let api = api.clone();
    let port = runtime.block_on(async move {
        let cert = tls::generate(&[], &[IpAddr::V4(Ipv4Addr::LOCALHOST)]).unwrap();
        let config = tls::config(&cert).unwrap();
        let tcp = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let port = tcp.local_addr().unwrap().port();
        let listener = Listener::new(tcp, config, &crate::serve::conn::Bounds::default()).unwrap();
        let svc = tower::service_fn(move |req: axum::extract::Request| {
            let api = api.clone();
            async move { Ok::<_, std::convert::Infallible>(api.serve(req).await) }
        });
        let app = axum::Router::new().fallback_service(svc);
        tokio::spawn(async move { axum::serve(listener, app).await });
        port
    });
    Https {
        port,
        _runtime: runtime,
    }
}

/// Writes a kubeconfig to `dir/kubeconfig` whose one context (`fake`, current) reaches
/// `https://127.0.0.1:port` without verifying the certificate and with no credentials.
pub fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:{port}
    insecure-skip-tls-verify: true
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
current-context: fake
users:
- name: fake
  user: {{}}
"
        ),
    )
    .unwrap();
    path
}

/// A port nothing listens on (bound on 127.0.0.1, then released).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A local cluster's facts with every port at `port` (the fake API server's HTTPS front).
pub fn cluster_info_at(port: u16) -> crate::cluster::ClusterInfo {
    crate::cluster::ClusterInfo {
        name: "fake".into(),
        apiserver_port: port,
        etcd_port: port,
        etcd_peer_port: port,
        controller_manager_port: port,
        scheduler_port: port,
        kwok_port: port,
        bin_dir: "/nonexistent".into(),
        kubernetes_version: crate::cluster::build::KUBERNETES_VERSION.into(),
        gpu_operator_port: 0,
        kubevirt_api_port: 0,
        kubevirt_controller_port: 0,
        kueue_webhook_port: 0,
        kueue_health_port: 0,
        env: Vec::new(),
        twin: false,
    }
}
