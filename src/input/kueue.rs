//! Kueue's objects from the live cluster (ResourceFlavors, ClusterQueues, LocalQueues,
//! Workloads of `kueue.x-k8s.io`, v1beta2 else v1beta1); the readers of files and objects
//! are [`gpuwl_core::decode::kueue`]; call sites name it there.

use gpuwl_core::decode::kueue::*;

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::input::live;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::kueue::KueueObjects;

/// Kueue's API group.
pub const GROUP: &str = "kueue.x-k8s.io";

/// The kinds read, with their plural resource names.
const KINDS: [(&str, &str); 4] = [
    ("ResourceFlavor", "resourceflavors"),
    ("ClusterQueue", "clusterqueues"),
    ("LocalQueue", "localqueues"),
    ("Workload", "workloads"),
];

/// Lists every object of `kind` in `version`; `Ok(None)` when the version is not served
/// (404: Kueue not installed, or an older one).
async fn list_kind(
    client: &Client,
    version: &str,
    kind: &str,
    plural: &str,
) -> Result<Option<Vec<Value>>> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut out = Vec::new();
    let mut missing = false;
    let what = format!("{plural}.{GROUP}");
    live::pages(
        ListParams::default().limit(live::PAGE_SIZE),
        async |lp: &ListParams| {
            let page = match api.list(lp).await {
                Ok(p) => p,
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    missing = true;
                    return Ok(None);
                }
                Err(e) => return Err(live::api_error(&format!("list {what}"), &e)),
            };
            out.extend(live::values_with_kind(&page.items, kind, &what)?);
            Ok(page.metadata.continue_)
        },
    )
    .await?;
    Ok((!missing).then_some(out))
}

/// Lists Kueue's ResourceFlavors, ClusterQueues, LocalQueues and Workloads (all
/// namespaces), through `kueue.x-k8s.io/v1beta2`, else `v1beta1`; `None` when neither is
/// served (Kueue is not installed).
///
/// Errors: [`Error::Runtime`] when a list fails for another reason (unreachable,
/// forbidden), or an object has a field of the wrong type.
pub async fn list(client: &Client) -> Result<Option<KueueObjects>> {
    for version in ["v1beta2", "v1beta1"] {
        let (a, b, c, d) = futures::try_join!(
            list_kind(client, version, KINDS[0].0, KINDS[0].1),
            list_kind(client, version, KINDS[1].0, KINDS[1].1),
            list_kind(client, version, KINDS[2].0, KINDS[2].1),
            list_kind(client, version, KINDS[3].0, KINDS[3].1),
        )?;
        let (Some(a), Some(b), Some(c), Some(d)) = (a, b, c, d) else {
            continue;
        };
        let all: Vec<Value> = a.into_iter().chain(b).chain(c).chain(d).collect();
        return from_values(&all)
            .map(Some)
            .map_err(|e| Error::failed(format!("reading Kueue's objects ({GROUP}/{version})"), e));
    }
    Ok(None)
}
