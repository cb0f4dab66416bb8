//! The KubeVirt and HyperConverged CRs from the live cluster; the readers of files and
//! objects are [`gpuwl_core::decode::kubevirt`]; call sites name it there.

use gpuwl_core::decode::kubevirt::*;

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::kubevirt::PermittedHostDevices;

/// How long one live list may take before gpuwl gives up (exit 3).
pub const LIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The objects of `ty` in all namespaces, as JSON values with `kind` set; `None` when the
/// API server does not serve the type (404: the CRD is not installed).
///
/// Errors: [`Error::Runtime`] when the list fails otherwise (forbidden, unreachable) or
/// takes longer than [`LIVE_TIMEOUT`].
pub async fn list_live(client: &kube::Client, ty: CrType) -> Result<Option<Vec<Value>>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(ty));
    let what = format!("{}.{}", ty.plural, ty.group);
    let list = match tokio::time::timeout(LIVE_TIMEOUT, api.list(&ListParams::default())).await {
        Err(_) => {
            return Err(Error::Runtime(format!(
                "listing {what}: no answer within {}s",
                LIVE_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => return Ok(None),
        Ok(Err(e)) => {
            return Err(Error::failed(format!("listing {what}"), e));
        }
        Ok(Ok(list)) => list,
    };
    let mut out = Vec::with_capacity(list.items.len());
    for o in &list.items {
        out.push(object_value(ty, o).map_err(|e| Error::failed(format!("listing {what}"), e))?);
    }
    Ok(Some(out))
}

/// A listed or watched `ty` object as the JSON value [`from_object`] reads (`kind` and
/// `apiVersion` set: the API leaves them out of list items).
///
/// Errors: the object does not serialize (not expected of a decoded object).
pub fn object_value(ty: CrType, o: &DynamicObject) -> serde_json::Result<Value> {
    let mut v = serde_json::to_value(o)?;
    if let Value::Object(m) = &mut v {
        m.insert("kind".into(), Value::String(ty.kind.into()));
        m.insert(
            "apiVersion".into(),
            Value::String(format!("{}/{}", ty.group, ty.version)),
        );
    }
    Ok(v)
}

/// The cluster's `permittedHostDevices`: from the HyperConverged CR when one exists (the
/// HCO owns the KubeVirt CR and overwrites its list), else from the KubeVirt CR, in any
/// namespace. `None` when neither exists (no CRD, or no object).
///
/// Errors: [`Error::Input`] when several CRs of the kind exist (pass the file instead) or
/// one has a malformed list (the message names the object and field); [`Error::Runtime`]
/// as [`list_live`].
pub async fn read_live(client: &kube::Client) -> Result<Option<PermittedHostDevices>> {
    Ok(read_live_cr(client, None).await?.map(|c| c.devices))
}

/// As [`read_live`], with the object itself; `only` limits the search to one CR type
/// (`None`: the HyperConverged CR when one exists, else the KubeVirt CR).
///
/// Errors: as [`read_live`].
pub async fn read_live_cr(
    client: &kube::Client,
    only: Option<CrType>,
) -> Result<Option<CurrentCr>> {
    let order: &[CrType] = match only {
        Some(HYPERCONVERGED) => &[HYPERCONVERGED],
        Some(_) => &[KUBEVIRT],
        None => &[HYPERCONVERGED, KUBEVIRT],
    };
    for ty in order {
        let items = list_live(client, *ty).await?;
        if let Some(found) = choose_cr(*ty, items.as_deref().unwrap_or(&[]))? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The [`ApiResource`] of `ty`, for listing or watching it.
pub fn api_resource(ty: CrType) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(ty.group, ty.version, ty.kind),
        ty.plural,
    )
}
