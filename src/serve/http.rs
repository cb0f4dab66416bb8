//! The exporter's HTTP endpoints (axum): `/metrics` (the exposition: classic text, or
//! OpenMetrics when the `Accept` header asks; gzip when `Accept-Encoding` allows, through
//! tower-http's compression layer), `/healthz` (200 unless serve cannot recover by itself,
//! then 503 with the reason: a liveness probe restarts it), `/readyz` (200 once the initial
//! lists are in and evaluated, the API server answers and every watch is current, else 503
//! with the reason), and `/` (a short index).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tower_http::compression::CompressionLayer;

use crate::serve::metrics::Format;
use crate::serve::watch::{Shared, WatchState, lock};

/// The router over `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/", get(index))
        .layer(CompressionLayer::new().gzip(true))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    (
        [(header::CONTENT_TYPE, format.content_type())],
        shared.metrics.encode(format),
    )
}

async fn healthz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    match shared.healthy() {
        Ok(()) => (StatusCode::OK, "ok\n".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    let why = {
        let h = lock(&shared.health);
        if h.ready() {
            return (StatusCode::OK, "ok\n".into());
        }
        let not_current: Vec<&str> = h
            .watches
            .iter()
            .filter(|(_, s)| **s != WatchState::Current)
            .map(|(r, _)| *r)
            .collect();
        if !h.reachable {
            "the API server does not answer; /metrics shows the last good state".to_owned()
        } else if !h.evaluated {
            "the initial lists are not in yet".to_owned()
        } else {
            format!(
                "watches not current ({}); /metrics shows the last good state",
                not_current.join(", ")
            )
        }
    };
    (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"))
}

async fn index() -> &'static str {
    "gpuwl serve: GPU Operator workload-label drift and GPU pools as Prometheus metrics\n/metrics  the metrics\n/healthz  200 unless serve cannot recover by itself\n/readyz   200 once synced, the API server answers and every watch is current\n"
}
