//! What `gpuwl cluster status` reports of a cluster's components: each one's pid, ports and
//! health, every endpoint asked once ([`probe`]), and the scheduler's pending work
//! ([`scheduler_busy`]).

use std::path::Path;

use super::index::info;
use super::kubeconfig::client;
use super::leases::kwok_leases;
use super::runtime::block_on_own_thread;
use super::state::{ClusterInfo, kubeconfig_path, state_dir, validate_name};
use super::{gpu_operator, health, kubevirt, kueue, process};
use gpuwl_core::error::Result;
use gpuwl_core::text;

/// Health of one component as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Its health endpoint answered `ok` (etcd: `"health":"true"`).
    Healthy,
    /// Alive, but the endpoint answered something else or nothing within 2 s (the text).
    Unhealthy(String),
    /// The process is not running.
    NotRunning,
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Health::Healthy => f.write_str("healthy"),
            Health::Unhealthy(why) => write!(f, "unhealthy ({why})"),
            Health::NotRunning => f.write_str("not running"),
        }
    }
}

/// One component of a cluster as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentReport {
    /// Component name ([`process::COMPONENTS`]).
    pub component: &'static str,
    /// Its pid while it runs.
    pub pid: Option<u32>,
    /// The ports it listens on (127.0.0.1).
    pub ports: Vec<u16>,
    /// What its health endpoint says: etcd `/health`, kube-apiserver `/readyz`, the others
    /// `/healthz`.
    pub health: Health,
    /// Last line of its log when it is not running (escaped for a terminal).
    pub last_log_line: String,
}

/// Every component of cluster `name`, in start order, with its pid, ports and health
/// (each endpoint asked once, 2 s at most). Never starts anything.
///
/// Errors: [`Error::Input`] for an invalid name; [`Error::Runtime`] when the cluster was
/// never started ([`info`]).
pub fn probe(name: &str) -> Result<Vec<ComponentReport>> {
    validate_name(name)?;
    let info = info(name)?;
    let state = state_dir(name);
    let kubeconfig = kubeconfig_path(name);
    block_on_own_thread(async move {
        let mut out = Vec::new();
        let all: Vec<&'static str> = process::COMPONENTS
            .into_iter()
            .chain(process::started_optional(&state))
            .collect();
        for c in all {
            let pid = process::alive(&state, c);
            let ports = ports_of(&info, c);
            let health = if pid.is_none() {
                Health::NotRunning
            } else {
                let answer = match c {
                    "etcd" => etcd_health(info.etcd_port, &state).await,
                    gpu_operator::OPERATOR_COMPONENT => {
                        health::http(info.gpu_operator_port, "/healthz").and_then(|a| a.ok_body())
                    }
                    // No port: alive is healthy.
                    gpu_operator::EMULATION_COMPONENT => Some("ok".into()),
                    kubevirt::NODES_COMPONENT => Some("ok".into()),
                    kueue::COMPONENT => {
                        health::http(info.kueue_health_port, "/readyz").and_then(|a| a.ok_body())
                    }
                    // virt-api and virt-controller answer /healthz with JSON: any
                    // answer is healthy.
                    kubevirt::API_COMPONENT | kubevirt::CONTROLLER_COMPONENT => {
                        match ports.first() {
                            Some(&p) => health::https(p, "/healthz").await.map(|_| "ok".into()),
                            None => None,
                        }
                    }
                    "kube-apiserver" => match client(&kubeconfig, None).await {
                        Ok(api) => health::api(&api, "/readyz").await,
                        Err(e) => Some(e.to_string()),
                    },
                    _ => match ports.first() {
                        Some(&p) => health::https(p, "/healthz").await,
                        None => None,
                    },
                };
                // kwok can answer /healthz while it no longer heartbeats its nodes
                // (seen with v0.8.0 after nodes were deleted and re-created under the
                // same names): then the node leases say so.
                let answer = match (c, answer.as_deref()) {
                    ("kwok-controller", Some("ok")) => Some(
                        kwok_leases(&kubeconfig)
                            .await
                            .unwrap_or_else(|| "ok".into()),
                    ),
                    _ => answer,
                };
                match answer.as_deref() {
                    Some("ok") => Health::Healthy,
                    Some(other) => {
                        Health::Unhealthy(text::esc(&other.chars().take(120).collect::<String>()))
                    }
                    None => Health::Unhealthy("no answer".into()),
                }
            };
            let last_log_line = if pid.is_none() {
                text::esc(&process::last_log_line(&state, c))
            } else {
                String::new()
            };
            out.push(ComponentReport {
                component: c,
                pid,
                ports,
                health,
                last_log_line,
            });
        }
        Ok(out)
    })?
}

/// etcd's `/health` over HTTPS with its client certificate ([`health::https_with_cert`],
/// `pki/etcd-client.*` of the cluster's state `state`): `Some("ok")` when it says
/// `"health":"true"`, the body otherwise, `None` without a 2xx answer within 5 s.
async fn etcd_health(port: u16, state: &Path) -> Option<String> {
    let pki = state.join("pki");
    let body = health::https_with_cert(
        port,
        "/health",
        &pki.join("etcd-client.crt"),
        &pki.join("etcd-client.key"),
    )
    .await?;
    if body.replace(' ', "").contains(r#""health":"true""#) {
        Some("ok".into())
    } else {
        Some(body)
    }
}

/// The pods kube-scheduler of cluster `name` still has work for: the sum of its
/// `scheduler_pending_pods` gauge over the `active` and `backoff` queues, read from its
/// own `/metrics` (open on its secure port, [`recipe::kube_scheduler`]). Pods in the
/// `unschedulable` queue wait for a cluster event and `gated` ones for their gates: neither
/// counts. `None` when the metrics cannot be read or the gauge is missing.
pub async fn scheduler_busy(info: &ClusterInfo) -> Option<u64> {
    let text = health::https(info.scheduler_port, "/metrics").await?;
    let mut seen = false;
    let mut sum = 0u64;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("scheduler_pending_pods{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        seen = true;
        if labels.contains("queue=\"active\"") || labels.contains("queue=\"backoff\"") {
            sum = sum.saturating_add(value.trim().parse::<f64>().ok()? as u64);
        }
    }
    seen.then_some(sum)
}

/// The ports component `c` listens on (two for etcd; none for an unknown name).
fn ports_of(info: &ClusterInfo, c: &str) -> Vec<u16> {
    info.ports()
        .by_component()
        .into_iter()
        .chain([
            (gpu_operator::OPERATOR_COMPONENT, info.gpu_operator_port),
            (kubevirt::API_COMPONENT, info.kubevirt_api_port),
            (
                kubevirt::CONTROLLER_COMPONENT,
                info.kubevirt_controller_port,
            ),
            (kueue::COMPONENT, info.kueue_webhook_port),
            (kueue::COMPONENT, info.kueue_health_port),
        ])
        .filter(|&(name, p)| name == c && p != 0)
        .map(|(_, p)| p)
        .collect()
}

#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::testing::{self, FakeApi};

    #[test]
    fn the_schedulers_work_is_its_active_and_backoff_queues() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let rt = testing::rt();
        let busy = |port: u16| rt.block_on(scheduler_busy(&testing::cluster_info_at(port)));
        let metrics = "# TYPE scheduler_pending_pods gauge\n\
            scheduler_pending_pods{queue=\"active\"} 2\n\
            scheduler_pending_pods{queue=\"backoff\"} 3\n\
            scheduler_pending_pods{queue=\"gated\"} 7\n\
            scheduler_pending_pods{queue=\"unschedulable\"} 11\n\
            scheduler_queue_incoming_pods_total{event=\"PodAdd\",queue=\"active\"} 40\n";
        api.text("/metrics", 200, metrics);
        assert_eq!(busy(https.port), Some(5));
        api.text(
            "/metrics",
            200,
            "scheduler_pending_pods{queue=\"unschedulable\"} 4\n",
        );
        assert_eq!(
            busy(https.port),
            Some(0),
            "waiting for an event is not work"
        );
        api.text("/metrics", 200, "scheduler_schedule_attempts_total 3\n");
        assert_eq!(busy(https.port), None, "no gauge: unknown, not idle");
        api.text(
            "/metrics",
            200,
            "scheduler_pending_pods{queue=\"active\"} many\n",
        );
        assert_eq!(busy(https.port), None);
        api.text("/metrics", 403, "forbidden");
        assert_eq!(busy(https.port), None);
        assert_eq!(busy(testing::closed_port()), None);
    }
}
