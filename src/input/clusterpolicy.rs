//! The GPU Operator's ClusterPolicy from the live cluster (listed or watched); the reader
//! of files and objects is [`gpuwl_core::decode::clusterpolicy`]; call sites name it there.

use gpuwl_core::decode::clusterpolicy::*;

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::input::live;
use gpuwl_core::decode::document;
use gpuwl_core::model::operator::PolicyStatus;

/// How long the live read may take before gpuwl goes on without it.
pub const LIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the cluster's ClusterPolicy. Never fails: an absent CRD, no object, a denied or
/// timed-out list ([`LIVE_TIMEOUT`], or the client's request timeout when shorter) give a [`PolicyStatus`] without a policy that says
/// so; several objects → the first by name, with a note.
pub async fn from_cluster(client: &Client) -> PolicyStatus {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource());
    let list = match tokio::time::timeout(LIVE_TIMEOUT, api.list(&ListParams::default())).await {
        Err(_) => {
            return none(
                "unreadable",
                Some(format!(
                    "listing clusterpolicies.nvidia.com timed out after {}s",
                    LIVE_TIMEOUT.as_secs()
                )),
            );
        }
        Ok(Err(kube::Error::Api(e))) if e.code == 404 => return absent_crd(),
        // The client's own request timeout (shorter than LIVE_TIMEOUT) ran out.
        Ok(Err(e)) if live::is_timeout(&e) => {
            return none(
                "unreadable",
                Some(
                    "listing clusterpolicies.nvidia.com timed out (no answer within the request timeout)"
                        .to_owned(),
                ),
            );
        }
        Ok(Err(e)) => {
            return none(
                "unreadable",
                Some(document::one_line(&format!(
                    "listing clusterpolicies.nvidia.com: {e}"
                ))),
            );
        }
        Ok(Ok(l)) => l,
    };
    from_objects(list.items)
}

/// The `nvidia.com/v1` `clusterpolicies` resource (cluster-scoped).
pub fn api_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy");
    ApiResource::from_gvk_with_plural(&gvk, "clusterpolicies")
}

/// The [`PolicyStatus`] of the ClusterPolicy objects the API returned (listed or
/// watched): none → `no-object`; several → the first by name, with a note; one that
/// cannot be read → `unreadable`, naming the object and field.
pub fn from_objects(mut items: Vec<DynamicObject>) -> PolicyStatus {
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let n = items.len();
    let Some(first) = items.into_iter().next() else {
        return none("no-object", Some("no ClusterPolicy object".into()));
    };
    let mut value = match serde_json::to_value(&first) {
        Ok(v) => v,
        Err(e) => return none("unreadable", Some(format!("ClusterPolicy: {e}"))),
    };
    if let Value::Object(m) = &mut value {
        m.insert("kind".into(), Value::String("ClusterPolicy".into()));
    }
    match from_object(&value) {
        Ok(p) => PolicyStatus {
            status: "cluster",
            note: (n > 1).then(|| format!("{n} ClusterPolicies; using {}", p.name)),
            policy: Some(p),
        },
        Err(e) => none(
            "unreadable",
            Some(format!(
                "ClusterPolicy {}: {e}",
                first.metadata.name.unwrap_or_default()
            )),
        ),
    }
}
