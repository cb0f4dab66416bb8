//! Pods from the live cluster: the paged list of every namespace and one pod by name,
//! each API response decoded by the dump reader ([`gpuwl_core::decode::pods`], with the
//! file readers).

use gpuwl_core::decode::pods::*;

use kube::Client;
use kube::api::ListParams;

use crate::input::live;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::operand::{OperandPod, may_name_operand};
use gpuwl_core::model::pod::PodInfo;
use gpuwl_core::text;

/// Lists the pods of all namespaces that have not finished ([`LIVE_FIELD_SELECTOR`]), page
/// by page ([`POD_PAGE_SIZE`] per request, following `continue`), decoding only the fields a
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

/// How many of [`list_on_nodes`]' per-node lists run at once.
const NODE_LISTS_AT_ONCE: usize = 16;

/// The pods bound to `nodes` and the pods bound to none, as [`list_pods`] would list them
/// (not finished, in the API's order: by namespace, then name), with the GPU Operator's
/// operand pods among them ([`gpuwl_core::decode::operands::from_value`], finished ones
/// included, as [`crate::input::operands::list`] keeps them). One list per node with the
/// field selector `spec.nodeName=NODE` (which the API server answers from its watch cache
/// by its node-name index), and one with `spec.nodeName=`, [`NODE_LISTS_AT_ONCE`] at a
/// time: what `explain pod` reads when the pod's scheduler message vouches for the other
/// nodes ([`gpuwl_core::analysis::explain_scope`]).
///
/// Errors: [`Error::Runtime`] when a list fails.
pub async fn list_on_nodes(
    client: &Client,
    nodes: &std::collections::BTreeSet<String>,
) -> Result<(Vec<PodInfo>, Vec<OperandPod>)> {
    use futures::{StreamExt, TryStreamExt};
    let names = std::iter::once("").chain(nodes.iter().map(String::as_str));
    let lists: Vec<(Vec<PodInfo>, Vec<OperandPod>)> = futures::stream::iter(names)
        .map(|n| list_on_node(client, n))
        .buffer_unordered(NODE_LISTS_AT_ONCE)
        .try_collect()
        .await?;
    let (mut pods, mut operands) = (Vec::new(), Vec::new());
    for (p, o) in lists {
        pods.extend(p.into_iter().filter(|p| !p.is_terminal()));
        operands.extend(o);
    }
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok((pods, operands))
}

/// The pods bound to `node` (`""`: to none), every phase, and the operand pods among them:
/// one unpaged list at any resource version (`resourceVersion=0`), which the API server
/// answers from its watch cache without asking etcd for the newest revision first (the
/// cache may be behind by the last few writes, as for any reader of it).
///
/// Errors: [`Error::Runtime`] when the list fails.
async fn list_on_node(client: &Client, node: &str) -> Result<(Vec<PodInfo>, Vec<OperandPod>)> {
    let doing = format!("list the pods on node {}", text::esc(node));
    let lp = node_params(node);
    let body = client
        .request_text(list_request(&lp)?)
        .await
        .map_err(|e| live::api_error(&doing, &e))?;
    let (pods, _) = read_response(body.as_bytes(), &doing)?;
    Ok((pods, operands_in(&body, &doing)?))
}

/// The parameters of [`list_on_node`]: `spec.nodeName=NODE`, any resource version, no page
/// limit.
fn node_params(node: &str) -> ListParams {
    ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .match_any()
}

/// [`list_pods`], and the GPU Operator's operand pods among the pods listed
/// ([`gpuwl_core::decode::operands::from_value`] on each page that names one), so the operand
/// lookup does not list the cluster's pods again: [`crate::input::operands::list_finished`]
/// adds the finished ones the list leaves out.
///
/// Errors: as [`list_pods`].
pub async fn list_pods_with_operands(client: &Client) -> Result<(Vec<PodInfo>, Vec<OperandPod>)> {
    let (mut out, mut ops) = (Vec::new(), Vec::new());
    live::pages(list_params(), async |lp: &ListParams| {
        let body = client
            .request_text(list_request(lp)?)
            .await
            .map_err(|e| live::api_error("list pods", &e))?;
        let (pods, next) = read_response(body.as_bytes(), "list pods")?;
        out.extend(pods);
        ops.extend(operands_in(&body, "list pods")?);
        Ok::<_, Error>(next)
    })
    .await?;
    Ok((out, ops))
}

/// The operand pods in one page of a pod list (`body`, the API's JSON); the page is parsed
/// only when it may name one ([`gpuwl_core::model::operand::may_name_operand`]).
///
/// Errors: [`Error::Runtime`] when a page that names one is not JSON.
fn operands_in(body: &str, doing: &str) -> Result<Vec<OperandPod>> {
    if !may_name_operand(body) {
        return Ok(Vec::new());
    }
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| Error::failed(format!("cannot {doing}"), e))?;
    let items = v.get("items").and_then(serde_json::Value::as_array);
    Ok(items
        .into_iter()
        .flatten()
        .filter_map(gpuwl_core::decode::operands::from_value)
        .collect())
}

/// Pods per page of the live pod list: ten times the node lists' [`live::PAGE_SIZE`]. Each
/// page is one request the API server answers on its own, so the pages of a large cluster
/// cost server time each: listing 150,000 pods took 58.9 s in 300 pages of 500, 16.7 s in
/// 30 pages of 5,000 and 8.6 s unpaged on the local control plane (BENCHMARKS.md, "the pod
/// list in pages of 5,000"). A page of 5,000 pods is ~14 MB of JSON, read and decoded into
/// slim records before the next; a page of the larger node objects stays 500.
const POD_PAGE_SIZE: u32 = 5_000;

/// The parameters of the live pod list: [`POD_PAGE_SIZE`] pods a page, [`LIVE_FIELD_SELECTOR`].
fn list_params() -> ListParams {
    ListParams::default()
        .limit(POD_PAGE_SIZE)
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
        assert!(
            q.contains("limit=5000") && q.contains("continue=tok"),
            "{q}"
        );
    }

    #[test]
    fn a_nodes_pods_are_one_list_from_the_watch_cache() {
        let q = list_request(&node_params("gpu-7"))
            .unwrap()
            .uri()
            .to_string();
        assert!(q.starts_with("/api/v1/pods?"), "{q}");
        for part in [
            "fieldSelector=spec.nodeName%3Dgpu-7",
            "resourceVersion=0",
            "resourceVersionMatch=NotOlderThan",
        ] {
            assert!(q.contains(part), "{part} in {q}");
        }
        assert!(!q.contains("limit="), "{q}");
        let unbound = list_request(&node_params("")).unwrap().uri().to_string();
        assert!(
            unbound.contains("fieldSelector=spec.nodeName%3D&"),
            "{unbound}"
        );
    }
}
