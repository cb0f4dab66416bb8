//! The GPU Operator's operand pods from the live cluster; the reader of a pods dump is
//! [`gpuwl_core::decode::operands`], re-exported here.

pub use gpuwl_core::decode::operands::*;

use kube::Client;
use kube::api::{Api, ListParams};

use crate::error::Result;
use crate::input::live;
use crate::model::operand::OperandPod;

/// The operand pods of the cluster: pods in every namespace that carry an `app` or a
/// `name` label (two label-selected lists, paged, under the client's timeout), kept when
/// [`from_value`] recognises them.
///
/// Errors: [`crate::error::Error::Runtime`] when a list fails (forbidden, timed out; the message says
/// which).
pub async fn list(client: &Client) -> Result<Vec<OperandPod>> {
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::all(client.clone());
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for sel in ["app", "name"] {
        live::list_all(
            &api,
            ListParams::default().labels(sel),
            "list GPU Operator operand pods",
            |p| {
                if let Ok(v) = serde_json::to_value(&p)
                    && let Some(o) = from_value(&v)
                    && seen.insert(o.pod.clone())
                {
                    out.push(o);
                }
            },
        )
        .await?;
    }
    Ok(out)
}
