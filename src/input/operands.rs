//! The GPU Operator's operand pods from the live cluster; the reader of a pods dump is
//! [`gpuwl_core::decode::operands`]; call sites name it there.

use gpuwl_core::decode::operands::*;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};

use gpuwl_core::model::operand::operand_of;

use crate::input::live;
use gpuwl_core::error::Result;
use gpuwl_core::model::operand::OperandPod;

/// The operand pods of the cluster: pods in every namespace that carry an `app` or a
/// `name` label (two label-selected lists, paged, under the client's timeout), kept when
/// [`from_value`] recognises them.
///
/// Two passes, so a cluster whose pods nearly all carry an `app` label is not read twice
/// in full (issue 51: at 15,000 pods this list cost more than the inventory's own pod
/// list): first each selector's list asks for metadata only (`PartialObjectMetadataList`)
/// and notes the namespaces holding a pod whose labels name an operand
/// ([`gpuwl_core::model::operand::operand_of`]); then only those namespaces are listed in
/// full with the same selector. The same pods are kept as by one full list.
///
/// Errors: [`gpuwl_core::error::Error::Runtime`] when a list fails (forbidden, timed out; the message says
/// which).
pub async fn list(client: &Client) -> Result<Vec<OperandPod>> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for sel in ["app", "name"] {
        let lp = ListParams::default().labels(sel);
        for o in in_operand_namespaces(client, &lp).await? {
            if seen.insert(o.pod.clone()) {
                out.push(o);
            }
        }
    }
    Ok(out)
}

/// The operand pods among the finished pods (phase `Succeeded` or `Failed`), which the
/// live pod list leaves out ([`crate::input::pods::list_pods_with_operands`] finds the
/// others in that list): one metadata list of the pods in no other phase, then a full list
/// of those namespaces where a finished pod's labels name an operand. With
/// [`crate::input::pods::list_pods_with_operands`], the same pods as [`list`].
///
/// Errors: [`gpuwl_core::error::Error::Runtime`] when a list fails.
pub async fn list_finished(client: &Client) -> Result<Vec<OperandPod>> {
    const FINISHED: &str = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown";
    in_operand_namespaces(client, &ListParams::default().fields(FINISHED)).await
}

/// The operand pods among those `lp` selects: one metadata list of them all (paged), then
/// a full list with `lp` of each namespace where one's labels name an operand
/// ([`operand_of`]).
async fn in_operand_namespaces(client: &Client, lp: &ListParams) -> Result<Vec<OperandPod>> {
    let all: Api<Pod> = Api::all(client.clone());
    let mut namespaces = std::collections::BTreeSet::new();
    live::pages(lp.clone(), async |lp: &ListParams| {
        let page = all
            .list_metadata(lp)
            .await
            .map_err(|e| live::api_error(DOING, &e))?;
        for m in &page.items {
            let label = |k: &str| m.metadata.labels.as_ref().and_then(|l| l.get(k));
            if operand_of(
                label("app").map(String::as_str),
                label("name").map(String::as_str),
            )
            .is_some()
            {
                namespaces.insert(m.metadata.namespace.clone().unwrap_or_default());
            }
        }
        Ok::<_, gpuwl_core::error::Error>(page.metadata.continue_)
    })
    .await?;
    let mut out = Vec::new();
    for ns in namespaces {
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        live::list_all(&api, lp.clone(), DOING, |p| {
            if let Ok(v) = serde_json::to_value(&p)
                && let Some(o) = from_value(&v)
            {
                out.push(o);
            }
        })
        .await?;
    }
    Ok(out)
}

/// The operand pods of `listed` (found in the live pod list) and `finished`
/// ([`list_finished`], or its error), each pod once.
pub fn merge(
    mut listed: Vec<OperandPod>,
    finished: Result<Vec<OperandPod>>,
) -> Result<Vec<OperandPod>> {
    let mut seen: std::collections::BTreeSet<String> =
        listed.iter().map(|o| o.pod.clone()).collect();
    for o in finished? {
        if seen.insert(o.pod.clone()) {
            listed.push(o);
        }
    }
    Ok(listed)
}

/// What the operand lists are doing, for their errors.
const DOING: &str = "list GPU Operator operand pods";
