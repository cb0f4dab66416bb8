//! The exporter's HTTP endpoints (axum): `/metrics` (the exposition), `/healthz` (200 while
//! the process runs), `/readyz` (200 once the initial lists are in and evaluated and the
//! API server is reachable, else 503 with the reason), and `/` (a short index).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::serve::metrics::CONTENT_TYPE;
use crate::serve::watch::{Shared, lock};

/// The router over `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/", get(index))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        shared.metrics.encode(),
    )
}

async fn readyz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    if shared.ready() {
        return (StatusCode::OK, "ok\n".into());
    }
    let (reachable, evaluated) = {
        let h = lock(&shared.health);
        (h.reachable, h.evaluated)
    };
    let why = if !evaluated {
        "the initial node and pod lists are not in yet"
    } else if !reachable {
        "the API server is unreachable; /metrics shows the last good state"
    } else {
        "not ready"
    };
    (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"))
}

async fn index() -> &'static str {
    "gpuwl serve: GPU Operator workload-label drift and GPU pools as Prometheus metrics\n/metrics  the metrics\n/healthz  200 while running\n/readyz   200 once synced and the API server is reachable\n"
}
