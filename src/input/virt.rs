//! Reading a KubeVirt `VirtualMachine` or `VirtualMachineInstance` and its virt-launcher pod
//! from the live cluster, for `gpuwl explain vm|vmi NS/NAME`; the record
//! ([`gpuwl_core::decode::virt::VmObjects`]), the labels and the launcher choice are
//! [`gpuwl_core::decode::virt`]; call sites name it there.

use gpuwl_core::decode::virt::*;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::input::{live, pods};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::pod::{ObjectKind, PodInfo};
use gpuwl_core::text;

/// How long one live call may take before gpuwl gives up (exit 3).
pub const LIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The `kubevirt.io/v1` resource of `kind` (`VirtualMachine`, `virtualmachines`).
pub fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kubevirt.io", "v1", kind), plural)
}

/// GETs `kind` `namespace/name`: `None` on 404 of the object.
///
/// Errors: [`Error::Input`] when the cluster does not serve the type (KubeVirt is not
/// installed); [`Error::Runtime`] when the call fails or takes longer than [`LIVE_TIMEOUT`].
/// Whether a VirtualMachine owns each VMI of the cluster (`namespace/name` → owned), from
/// one metadata list of all VMIs (their `ownerReferences`); `None` when they cannot be
/// listed (KubeVirt not installed, forbidden, no answer within [`LIVE_TIMEOUT`]).
pub async fn vmi_owners(client: &kube::Client) -> Option<std::collections::BTreeMap<String, bool>> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("VirtualMachineInstance", "virtualmachineinstances"),
    );
    let list = tokio::time::timeout(LIVE_TIMEOUT, api.list_metadata(&Default::default()))
        .await
        .ok()?
        .ok()?;
    Some(
        list.items
            .into_iter()
            .map(|o| {
                let owned = o
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.kind == "VirtualMachine");
                (
                    format!(
                        "{}/{}",
                        o.metadata.namespace.unwrap_or_default(),
                        o.metadata.name.unwrap_or_default()
                    ),
                    owned,
                )
            })
            .collect(),
    )
}

/// Every `kind` object of the cluster as JSON (one list within [`LIVE_TIMEOUT`]); `None`
/// when the type cannot be listed (KubeVirt not installed, forbidden, no answer).
async fn list_all(client: &kube::Client, kind: &str, plural: &str) -> Option<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, plural));
    let list = tokio::time::timeout(LIVE_TIMEOUT, api.list(&ListParams::default()))
        .await
        .ok()?
        .ok()?;
    Some(
        list.items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect(),
    )
}

/// Every VirtualMachineInstance and VirtualMachine of the cluster, listed at once (each
/// `None` when it cannot be listed), for [`waiting_without_launcher`] and
/// [`vmi_owners_from`].
pub async fn list_vms(client: &kube::Client) -> (Option<Vec<Value>>, Option<Vec<Value>>) {
    futures::join!(
        list_all(client, "VirtualMachineInstance", "virtualmachineinstances"),
        list_all(client, "VirtualMachine", "virtualmachines")
    )
}

/// Whether a VirtualMachine owns each VMI of `vmis` (`namespace/name` → owned), as
/// [`vmi_owners`] reads it from a metadata list.
pub fn vmi_owners_from(vmis: &[Value]) -> std::collections::BTreeMap<String, bool> {
    vmis.iter()
        .filter_map(|v| {
            let md = v.get("metadata")?;
            let name = md.get("name")?.as_str()?;
            let ns = md.get("namespace").and_then(Value::as_str).unwrap_or("");
            let owned = md
                .get("ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r.get("kind").and_then(Value::as_str) == Some("VirtualMachine"))
                });
            Some((format!("{ns}/{name}"), owned))
        })
        .collect()
}

/// The names of the `kind` objects in `namespace` (one list of at most 1,000, within
/// [`LIVE_TIMEOUT`]), for a did-you-mean; `[]` when the list fails.
async fn names(client: &kube::Client, kind: &str, plural: &str, namespace: &str) -> Vec<String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource(kind, plural));
    let lp = kube::api::ListParams::default().limit(1000);
    match tokio::time::timeout(LIVE_TIMEOUT, api.list_metadata(&lp)).await {
        Ok(Ok(list)) => list
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect(),
        _ => Vec::new(),
    }
}

async fn get(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource(kind, plural));
    let doing = format!("get {plural}.kubevirt.io {namespace}/{name}");
    let got = match tokio::time::timeout(LIVE_TIMEOUT, api.get_opt(name)).await {
        Err(_) => {
            return Err(Error::Runtime(format!(
                "{doing}: no answer within {}s",
                LIVE_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            return Err(Error::Input(format!(
                "the cluster does not serve {plural}.kubevirt.io/v1: KubeVirt is not installed"
            )));
        }
        Ok(Err(e)) => return Err(live::api_error(&doing, &e)),
        Ok(Ok(o)) => o,
    };
    match got {
        None => Ok(None),
        Some(o) => {
            let mut v = serde_json::to_value(&o)
                .map_err(|e| Error::failed(format!("cannot {doing}"), e))?;
            if let Value::Object(m) = &mut v {
                m.insert("kind".into(), Value::String(kind.into()));
                m.insert("apiVersion".into(), Value::String("kubevirt.io/v1".into()));
            }
            Ok(Some(v))
        }
    }
}

/// The launcher pods in `namespace` matching `selector`.
async fn launchers(client: &kube::Client, namespace: &str, selector: &str) -> Result<Vec<PodInfo>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let doing = format!("list pods -n {namespace} -l {selector}");
    let list = match tokio::time::timeout(
        LIVE_TIMEOUT,
        api.list(&ListParams::default().labels(selector)),
    )
    .await
    {
        Err(_) => {
            return Err(Error::Runtime(format!(
                "{doing}: no answer within {}s",
                LIVE_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(e)) => return Err(live::api_error(&doing, &e)),
        Ok(Ok(l)) => l,
    };
    list.items.iter().map(pods::pod_info).collect()
}

/// Reads VM or VMI (`kind`) `namespace/name`, its VMI (for a VM: the VMI of the same name,
/// if running) and the VMI's launcher pod (label `kubevirt.io/created-by=<VMI uid>`, else
/// `kubevirt.io=virt-launcher,vm.kubevirt.io/name=<VMI name>`).
///
/// Errors: [`Error::Input`] when the object does not exist or KubeVirt is not installed;
/// [`Error::Runtime`] when the API cannot be reached.
pub async fn read(
    client: &kube::Client,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Result<VmObjects> {
    let vm = match kind {
        ObjectKind::VirtualMachine => {
            match get(client, "VirtualMachine", "virtualmachines", namespace, name).await? {
                Some(v) => Some(v),
                None => {
                    // The other kind under that name first (a VMI no VM owns), else the
                    // nearest VM names.
                    let other = get(
                        client,
                        "VirtualMachineInstance",
                        "virtualmachineinstances",
                        namespace,
                        name,
                    )
                    .await
                    .ok()
                    .flatten()
                    .map(|_| {
                        format!(
                            "; a VirtualMachineInstance of that name runs (no VM owns it): gpuwl explain vmi {namespace}/{name}"
                        )
                    });
                    let hint = match other {
                        Some(h) => h,
                        None => {
                            let near =
                                names(client, "VirtualMachine", "virtualmachines", namespace).await;
                            text::did_you_mean(name, near.iter().map(String::as_str))
                        }
                    };
                    return Err(Error::Input(format!(
                        "VirtualMachine {namespace}/{name} not found{hint}"
                    )));
                }
            }
        }
        _ => None,
    };
    let vmi = get(
        client,
        "VirtualMachineInstance",
        "virtualmachineinstances",
        namespace,
        name,
    )
    .await?;
    if kind == ObjectKind::VirtualMachineInstance && vmi.is_none() {
        // A VM of that name that runs no VMI (stopped, or not started yet) is explained as
        // a VM; else the nearest VMI names.
        let vm_there = get(client, "VirtualMachine", "virtualmachines", namespace, name)
            .await
            .ok()
            .flatten()
            .is_some();
        let hint = if vm_there {
            format!(
                "; VirtualMachine {namespace}/{name} exists and runs no VMI now: gpuwl explain vm {namespace}/{name}"
            )
        } else {
            let near = names(
                client,
                "VirtualMachineInstance",
                "virtualmachineinstances",
                namespace,
            )
            .await;
            text::did_you_mean(name, near.iter().map(String::as_str))
        };
        return Err(Error::Input(format!(
            "VirtualMachineInstance {namespace}/{name} not found{hint}"
        )));
    }
    let mut out = VmObjects {
        kind,
        vm,
        vmi,
        launcher: None,
        launcher_selector: None,
        launchers_found: 0,
    };
    let Some(vmi) = &out.vmi else {
        return Ok(out);
    };
    let uid = vmi
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty());
    let mut selectors = Vec::new();
    if let Some(uid) = uid {
        selectors.push(format!("{CREATED_BY_LABEL}={uid}"));
    }
    selectors.push(format!("{APP_LABEL}=virt-launcher,{VM_NAME_LABEL}={name}"));
    for sel in selectors {
        let found = launchers(client, namespace, &sel).await?;
        if !found.is_empty() {
            out.launchers_found = found.len();
            out.launcher = choose_launcher(found);
            out.launcher_selector = Some(sel);
            break;
        }
    }
    Ok(out)
}
