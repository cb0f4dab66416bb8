//! What installing an optional component (KubeVirt, Kueue) on the local control plane does
//! the same way each time: server-side apply of a manifest object, waiting for CRDs to be
//! `Established`, and a free port on 127.0.0.1.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::Value;

use crate::input::live::api_error;
use gpuwl_core::error::{Error, Result};

/// Server-side applies one manifest object (field manager `gpuwl`, forced), without its
/// `metadata.creationTimestamp` and `status` (a generated manifest may carry them).
///
/// Errors: [`Error::Runtime`] naming the kind and name the API server refused.
pub async fn apply(client: &Client, obj: &Value) -> Result<()> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let mut obj = obj.clone();
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("creationTimestamp");
    }
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
    api.patch(
        name,
        &PatchParams::apply("gpuwl").force(),
        &Patch::Apply(&obj),
    )
    .await
    .map_err(|e| api_error(&format!("apply {kind} {name}"), &e))?;
    Ok(())
}

/// Waits until every CRD in `names` has condition `Established=True`, polling every 200 ms.
///
/// Errors: [`Error::Runtime`] naming the first CRD not Established within `timeout`.
pub async fn wait_established(client: &Client, names: &[&str], timeout: Duration) -> Result<()> {
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    for name in names {
        loop {
            let established = crd_api.get_opt(name).await.ok().flatten().is_some_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Runtime(format!(
                    "CRD {name} is not Established after {} s",
                    timeout.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// A port free on 127.0.0.1 now (the kernel's pick for port 0).
///
/// Errors: [`Error::Runtime`] when no socket can be bound.
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::Runtime(format!("cannot find a free port on 127.0.0.1: {e}")))?;
    Ok(l.local_addr()
        .map_err(|e| Error::Runtime(format!("cannot find a free port on 127.0.0.1: {e}")))?
        .port())
}
