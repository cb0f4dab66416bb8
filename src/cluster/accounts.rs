//! Service accounts on the local control plane: what a namespace needs before its first
//! Pod, shared by the lab and `whatif`'s twin.

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::input::live::{already_exists, api_err};
use gpuwl_core::error::{Error, Result};

/// Creates ServiceAccount `default` in `ns` if missing. kube-controller-manager's
/// ServiceAccount controller creates it too, moments after the namespace; creating it here
/// lets the first Pod (which the `ServiceAccount` admission plugin rejects while
/// the account is missing) go in at once.
///
/// Errors: [`Error::Runtime`] on any API failure except "already exists".
pub async fn ensure_default_service_account(client: &Client, ns: &str) -> Result<()> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let obj: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))
        .map_err(|e| Error::failed("serviceaccount default: cannot build the object", e))?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(e) if already_exists(&e) => Ok(()),
        Err(e) => Err(api_err(&format!("create serviceaccount {ns}/default"))(e)),
    }
}
