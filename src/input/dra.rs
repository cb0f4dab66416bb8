//! DRA objects from the live cluster (DeviceClasses, ResourceSlices, ResourceClaims,
//! ResourceClaimTemplates); the readers of files and objects are
//! [`gpuwl_core::decode::dra`]; call sites name it there.

use gpuwl_core::decode::dra::*;

use k8s_openapi::api::resource::v1 as api;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::input::live;
use gpuwl_core::error::{Error, FieldError, Result};
use gpuwl_core::model::dra::{API_VERSION, DraObjects, DraSource};

/// Lists all objects of `api`; `Ok(Err(why))` when the list is not served (404) or not
/// allowed (403): DRA is then skipped, not an error.
async fn collect<K>(api: Api<K>, what: &str) -> Result<std::result::Result<Vec<Value>, DraSource>>
where
    K: Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + k8s_openapi::Resource,
{
    let mut out = Vec::new();
    let mut not_listed = None;
    live::pages(ListParams::default(), async |lp: &ListParams| {
        let page = match api.list(lp).await {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                not_listed = Some(DraSource::Skipped(format!(
                    "{} is not served by this cluster (DRA needs Kubernetes 1.34 or later)",
                    API_VERSION
                )));
                return Ok(None);
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                not_listed = Some(DraSource::Denied(format!(
                    "the credentials may not list {what} (kubectl auth can-i list {what})"
                )));
                return Ok(None);
            }
            Err(e) => return Err(live::api_error(&format!("list {what}"), &e)),
        };
        out.extend(live::values_with_kind(&page.items, K::KIND, what)?);
        Ok(page.metadata.continue_)
    })
    .await?;
    Ok(match not_listed {
        Some(why) => Err(why),
        None => Ok(out),
    })
}

/// Lists DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates (all
/// namespaces) of a live cluster. When the server does not serve `resource.k8s.io/v1` the result is empty and
/// the source says why.
///
/// Errors: [`Error::Runtime`] when a list fails for another reason (unreachable, forbidden)
/// or an object does not read (naming it and the field).
pub async fn list(client: &Client) -> Result<(DraObjects, DraSource)> {
    let (classes, slices, claims, templates) = futures::try_join!(
        collect(
            Api::<api::DeviceClass>::all(client.clone()),
            "deviceclasses.resource.k8s.io"
        ),
        collect(
            Api::<api::ResourceSlice>::all(client.clone()),
            "resourceslices.resource.k8s.io"
        ),
        collect(
            Api::<api::ResourceClaim>::all(client.clone()),
            "resourceclaims.resource.k8s.io"
        ),
        collect(
            Api::<api::ResourceClaimTemplate>::all(client.clone()),
            "resourceclaimtemplates.resource.k8s.io"
        ),
    )?;
    // Templates only add to explain; a cluster that refuses them still has the rest.
    let templates = templates.unwrap_or_default();
    let (classes, slices, claims) = match (classes, slices, claims) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => {
            return Ok((DraObjects::default(), why));
        }
    };
    let mut out = DraObjects::default();
    let bad = |kind: &str, v: &Value, e: FieldError| {
        Error::failed(
            format!(
                "{kind} {}",
                v.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            ),
            e,
        )
    };
    for v in &classes {
        out.device_classes
            .push(device_class(v).map_err(|e| bad("DeviceClass", v, e))?);
    }
    for v in &slices {
        out.resource_slices
            .push(resource_slice(v).map_err(|e| bad("ResourceSlice", v, e))?);
    }
    for v in &claims {
        out.resource_claims
            .push(resource_claim(v).map_err(|e| bad("ResourceClaim", v, e))?);
    }
    for v in &templates {
        out.resource_claim_templates
            .push(resource_claim_template(v).map_err(|e| bad("ResourceClaimTemplate", v, e))?);
    }
    Ok((out, DraSource::Cluster))
}
