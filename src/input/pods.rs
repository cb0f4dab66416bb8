//! Pods from the live cluster: the paged list of every namespace and one pod by name,
//! each API response decoded by the dump reader ([`gpuwl_core::decode::pods`], re-exported
//! here with the file readers).

pub use gpuwl_core::decode::pods::*;

use kube::Client;
use kube::api::ListParams;

use crate::error::{Error, Result};
use crate::input::live;
use crate::model::pod::PodInfo;
use crate::text;

/// Lists the pods of all namespaces that have not finished ([`LIVE_FIELD_SELECTOR`]), page
/// by page ([`PAGE_SIZE`] per request, following `continue`), decoding only the fields a
/// [`PodInfo`] needs.
///
/// Errors: [`Error::Runtime`] when the API server cannot be reached or refuses the list.
pub async fn list_pods(client: &Client) -> Result<Vec<PodInfo>> {
    let mut out = Vec::new();
    live::pages(list_params(), async |lp: &ListParams| {
        let body = client
            .request_text(list_request(lp)?)
            .await
            .map_err(|e| live::api_error("list pods", &e))?;
        let (pods, next) = read_response(body.as_bytes(), "list pods")?;
        out.extend(pods);
        Ok::<_, Error>(next)
    })
    .await?;
    Ok(out)
}

/// The parameters of the live pod list: [`PAGE_SIZE`] pods a page, [`LIVE_FIELD_SELECTOR`].
fn list_params() -> ListParams {
    ListParams::default()
        .limit(PAGE_SIZE)
        .fields(LIVE_FIELD_SELECTOR)
}

/// The request for one page of the live pod list: all namespaces, `lp` (with the previous
/// page's `continue`).
///
/// Errors: [`Error::Runtime`] when the request cannot be built.
fn list_request(lp: &ListParams) -> Result<http::Request<Vec<u8>>> {
    kube::core::Request::new("/api/v1/pods")
        .list(lp)
        .map_err(|e| Error::failed("cannot list pods", e))
}

/// One pod by namespace and name (decoded as [`list_pods`] does).
///
/// Errors: [`Error::Input`] when it does not exist (404); [`Error::Runtime`] for other
/// API failures.
pub async fn get_pod(client: &Client, namespace: &str, name: &str) -> Result<PodInfo> {
    let doing = format!("get pod {namespace}/{name}");
    let req = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
        .get(name, &Default::default())
        .map_err(|e| Error::failed(format!("cannot {doing}"), e))?;
    match client.request_text(req).await {
        Ok(body) => {
            let (mut pods, _) = read_response(body.as_bytes(), &doing)?;
            pods.pop()
                .ok_or_else(|| Error::Runtime(format!("{doing}: the API server returned no pod")))
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let elsewhere = namespaces_holding(client, name).await;
            let hint = match in_namespaces(name, &elsewhere) {
                Some(h) => h,
                None => text::did_you_mean(
                    name,
                    names_in(client, namespace).await.iter().map(String::as_str),
                ),
            };
            Err(Error::Input(format!(
                "pod {namespace}/{name} not found{hint}"
            )))
        }
        Err(e) => Err(live::api_error(&doing, &e)),
    }
}

/// The hint for a pod `name` not found in the namespace asked, given the namespaces that
/// hold a pod of that name: `; a pod job-cross is in namespace gpu-vm (add -n gpu-vm)`,
/// or the namespaces with `add -n NAMESPACE`; `None` when there is none. The one wording
/// of `explain` on the live cluster and on a pod dump.
pub fn in_namespaces(name: &str, namespaces: &[String]) -> Option<String> {
    let name = text::esc(name);
    match namespaces {
        [] => None,
        [one] => {
            let one = text::esc(one);
            Some(format!(
                "; a pod {name} is in namespace {one} (add -n {one})"
            ))
        }
        many => Some(format!(
            "; pods named {name} are in namespaces {} (add -n NAMESPACE)",
            many.iter()
                .map(|n| text::esc(n))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The names of the pods in `namespace` (one metadata list of at most 1,000), for a
/// did-you-mean; `[]` when the list fails.
async fn names_in(client: &Client, namespace: &str) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), namespace);
    let lp = kube::api::ListParams::default().limit(1000);
    match api.list_metadata(&lp).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The namespaces (sorted, at most 10) holding a pod named `name`, from one list of pod
/// metadata across all namespaces with the field selector `metadata.name=NAME`; `[]` when
/// there is none or the list fails (credentials limited to one namespace, say): the hint
/// is a courtesy, never an error of its own.
async fn namespaces_holding(client: &Client, name: &str) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::all(client.clone());
    let lp = kube::api::ListParams::default()
        .fields(&format!("metadata.name={name}"))
        .limit(10);
    let Ok(list) = api.list_metadata(&lp).await else {
        return Vec::new();
    };
    let mut out: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.namespace)
        .map(|ns| text::esc(&ns))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Converts a typed pod from the API (what `serve`'s watch sees) into a [`PodInfo`].
///
/// Errors: [`Error::Runtime`] naming the pod and the field that could not be read.
pub fn pod_info(pod: &k8s_openapi::api::core::v1::Pod) -> Result<PodInfo> {
    let mut v =
        serde_json::to_value(pod).map_err(|e| Error::failed("reading a pod from the API", e))?;
    if let serde_json::Value::Object(m) = &mut v {
        m.insert("kind".into(), serde_json::Value::String("Pod".into()));
    }
    from_object(&v).map_err(|m| {
        Error::failed(
            format!(
                "pod {}/{}",
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or("")
            ),
            m,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_list_asks_the_server_to_leave_finished_pods_out() {
        let q = list_request(&list_params().continue_token("tok"))
            .unwrap()
            .uri()
            .to_string();
        assert!(q.starts_with("/api/v1/pods?"), "{q}");
        assert!(
            q.contains("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"),
            "{q}"
        );
        assert!(q.contains("limit=500") && q.contains("continue=tok"), "{q}");
    }
}
