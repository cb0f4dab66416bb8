//! Pods from the live cluster: the paged list of every namespace and one pod by name,
//! each API response decoded by the dump reader ([`gpuwl_core::decode::pods`], with the
//! file readers).

use gpuwl_core::decode::pods::*;

use kube::Client;
use kube::api::ListParams;

use crate::input::live;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::operand::OperandPod;
use gpuwl_core::model::pod::PodInfo;
use gpuwl_core::text;

/// Lists the pods of all namespaces that have not finished ([`LIVE_FIELD_SELECTOR`]),
/// decoding only the fields a [`PodInfo`] needs: as [`list_pods_with_operands`], without
/// the operand pods.
///
/// Errors: [`Error::Runtime`] when the API server cannot be reached or refuses the list.
pub async fn list_pods(client: &Client) -> Result<Vec<PodInfo>> {
    Ok(list_pods_with_operands(client).await?.0)
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
    let listed = read_response(body.as_bytes(), &doing)?;
    Ok((listed.pods, listed.operands))
}

/// The parameters of [`list_on_node`]: `spec.nodeName=NODE`, any resource version, no page
/// limit.
fn node_params(node: &str) -> ListParams {
    ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .match_any()
}

/// The pods of all namespaces that have not finished ([`LIVE_FIELD_SELECTOR`]), each
/// decoded to the fields a [`PodInfo`] needs, and the GPU Operator's operand pods among
/// them (so the operand lookup does not list the cluster's pods again:
/// [`crate::input::operands::list_finished`] adds the finished ones the list leaves out).
///
/// An API server that encodes a list item by item as it sends it
/// ([`streams_lists`]: Kubernetes 1.33 and later) is asked once, unpaged, and the
/// response is decoded while it arrives ([`list_streamed`]); an older one, which would
/// build a whole unpaged list in its memory first, page by page ([`list_paged`]).
///
/// Errors: [`Error::Runtime`] when the API server cannot be reached or refuses the list.
pub async fn list_pods_with_operands(client: &Client) -> Result<(Vec<PodInfo>, Vec<OperandPod>)> {
    let listed = if streams_lists(client).await {
        list_streamed(client).await?
    } else {
        list_paged(client).await?
    };
    Ok((listed.pods, listed.operands))
}

/// Whether the API server writes a list response item by item as it encodes it, so that
/// an unpaged list of every pod costs it no more memory than a page: its version is 1.33
/// or later, where the `StreamingCollectionEncodingToJSON` feature is on by default (beta
/// in 1.33, GA in 1.34: kubernetes/apiserver `pkg/features/kube_features.go`; KEP-5116).
/// `false` when the version cannot be read.
pub(crate) async fn streams_lists(client: &Client) -> bool {
    client
        .apiserver_version()
        .await
        .is_ok_and(|v| streams_lists_at(&v.major, &v.minor))
}

/// [`streams_lists`] for a version's `major` and `minor` as `/version` gives them.
fn streams_lists_at(major: &str, minor: &str) -> bool {
    live::version_numbers(major, minor).is_some_and(|v| v >= (1, 33))
}

/// The size a part of a streamed list grows to before it is handed to the decoder
/// (bytes): what the connection gives at once (a TLS record or a few, tens of KB) is
/// gathered first, so the two threads wake each other once per 256 KiB, not once per
/// record (at 150,000 pods, waking per record cost more CPU than the decoding).
const PART_BYTES: usize = 256 << 10;

/// How many parts of a streamed list wait for the decoder at most (4 MiB of
/// [`PART_BYTES`]).
const PARTS_IN_FLIGHT: usize = 16;

/// The live pod list in one unpaged request, decoded while it arrives: the response body
/// is handed in parts of [`PART_BYTES`] to [`read_response`] on a blocking thread (at
/// most [`PARTS_IN_FLIGHT`] parts waiting), so the API server encodes the next pods while
/// these are decoded, and memory holds the pods kept, not the response.
///
/// Errors: [`Error::Runtime`] when the list is refused or the connection fails part way.
async fn list_streamed(client: &Client) -> Result<Listed> {
    use futures::{AsyncBufRead, AsyncBufReadExt};
    let lp = ListParams::default().fields(LIVE_FIELD_SELECTOR);
    let body = client
        .request_stream(list_request(&lp)?)
        .await
        .map_err(|e| live::api_error("list pods", &e))?;
    let (tx, rx) = tokio::sync::mpsc::channel(PARTS_IN_FLIGHT);
    let decode =
        tokio::task::spawn_blocking(move || read_response(Received::from(rx), "list pods"));
    let pump = async move {
        futures::pin_mut!(body);
        let mut part = Vec::with_capacity(PART_BYTES);
        loop {
            let (read, end) = match body.as_mut().fill_buf().await {
                Ok([]) => (0, true),
                Ok(b) => {
                    part.extend_from_slice(b);
                    (b.len(), false)
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            body.as_mut().consume(read);
            if part.len() >= PART_BYTES || (end && !part.is_empty()) {
                let full = std::mem::replace(&mut part, Vec::with_capacity(PART_BYTES));
                // The decoder stopped (an error of its own): nothing more to hand it.
                if tx.send(Ok(full)).await.is_err() {
                    return;
                }
            }
            if end {
                return;
            }
        }
    };
    let ((), decoded) = futures::join!(pump, decode);
    decoded.map_err(|e| Error::failed("list pods: the decoder stopped", e))?
}

/// The parts of a streamed response as one [`std::io::Read`], for a blocking thread:
/// each read waits for the next part; the end of the parts is the end of the input, and
/// a failed part is the read's error.
struct Received {
    parts: tokio::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    part: Vec<u8>,
    at: usize,
}

impl From<tokio::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>> for Received {
    fn from(parts: tokio::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>) -> Self {
        Received {
            parts,
            part: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for Received {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.part.len() {
            match self.parts.blocking_recv() {
                None => return Ok(0),
                Some(part) => {
                    self.part = part?;
                    self.at = 0;
                }
            }
        }
        let n = buf.len().min(self.part.len() - self.at);
        buf[..n].copy_from_slice(&self.part[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The live pod list page by page ([`POD_PAGE_SIZE`] per request, following `continue`),
/// each page read whole, then decoded.
///
/// Errors: [`Error::Runtime`] when a page is refused.
async fn list_paged(client: &Client) -> Result<Listed> {
    let mut out = Listed::default();
    live::pages(list_params(), async |lp: &ListParams| {
        let body = client
            .request_text(list_request(lp)?)
            .await
            .map_err(|e| live::api_error("list pods", &e))?;
        let page = read_response(body.as_bytes(), "list pods")?;
        out.pods.extend(page.pods);
        out.operands.extend(page.operands);
        Ok::<_, Error>(page.next)
    })
    .await?;
    Ok(out)
}

/// Pods per page of the live pod list from an API server that does not stream lists
/// ([`streams_lists`]): ten times the node lists' [`live::PAGE_SIZE`]. Each page is one
/// request the API server answers on its own, so the pages of a large cluster cost server
/// time each. A page of 5,000 pods is ~14-20 MB of JSON, read and decoded into slim
/// records before the next; a page of the larger node objects stays 500.
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
        Ok(body) => read_response(body.as_bytes(), &doing)?
            .pods
            .pop()
            .ok_or_else(|| Error::Runtime(format!("{doing}: the API server returned no pod"))),
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

    #[test]
    fn lists_stream_from_kubernetes_1_33_on() {
        for (major, minor, streams) in [
            ("1", "36", true),
            ("1", "33", true),
            ("1", "33+", true),
            ("1", "32", false),
            ("1", "28+", false),
            ("2", "0", true),
            ("1", "", false),
            ("", "", false),
            ("1", "x", false),
        ] {
            assert_eq!(streams_lists_at(major, minor), streams, "{major}.{minor}");
        }
    }

    #[test]
    fn streamed_and_paged_lists_read_the_same_pods_and_operand_pods() {
        use serde_json::json;
        let api = crate::testing::FakeApi::new();
        let pod = |ns: &str,
                   name: &str,
                   labels: serde_json::Value,
                   phase: &str,
                   extra: serde_json::Value| {
            let mut p = json!({"metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "image": "i",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}});
            json_patch::merge(&mut p, &extra);
            p
        };
        api.insert(
            "/api/v1",
            "pods",
            pod(
                "ml",
                "train-0",
                json!({"app": "train"}),
                "Running",
                json!({}),
            ),
        );
        api.insert(
            "/api/v1",
            "pods",
            pod("ml", "done", json!({}), "Succeeded", json!({})),
        );
        api.insert(
            "/api/v1",
            "pods",
            pod(
                "gpu-operator",
                "nvidia-device-plugin-daemonset-x",
                json!({"app": "nvidia-device-plugin-daemonset"}),
                "Running",
                json!({"status": {"containerStatuses": [{"restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
            ),
        );
        let rt = crate::testing::rt();
        let _in_runtime = rt.enter();
        let client = api.client();
        assert!(rt.block_on(streams_lists(&client)));
        let (streamed, streamed_ops) = rt.block_on(list_pods_with_operands(&client)).unwrap();
        api.text(
            "/version",
            200,
            r#"{"major": "1", "minor": "32", "gitVersion": "v1.32.0"}"#,
        );
        assert!(!rt.block_on(streams_lists(&client)));
        let (paged, paged_ops) = rt.block_on(list_pods_with_operands(&client)).unwrap();
        let keys = |p: &[PodInfo]| p.iter().map(PodInfo::key).collect::<Vec<_>>();
        assert_eq!(
            keys(&streamed),
            [
                "gpu-operator/nvidia-device-plugin-daemonset-x",
                "ml/train-0"
            ]
        );
        assert_eq!(keys(&streamed), keys(&paged));
        assert_eq!(streamed[1].requests["nvidia.com/gpu"], 1);
        assert_eq!(streamed_ops, paged_ops);
        assert_eq!(streamed_ops.len(), 1);
        assert_eq!(streamed_ops[0].restarts, 4);
        assert_eq!(streamed_ops[0].reason.as_deref(), Some("CrashLoopBackOff"));
    }

    #[test]
    fn a_refused_streamed_list_is_the_api_servers_error() {
        let api = crate::testing::FakeApi::new();
        api.text("/api/v1/pods", 403, r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden: User \"x\" cannot list resource \"pods\"","reason":"Forbidden","code":403}"#);
        let rt = crate::testing::rt();
        let _in_runtime = rt.enter();
        let e = rt
            .block_on(list_pods(&api.client()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("list pods") && e.contains("forbidden"), "{e}");
    }

    /// The error of a streamed list read from the parts `rx` delivers, on a thread as the
    /// live list reads it.
    fn list_error(rx: tokio::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>) -> String {
        std::thread::spawn(move || read_response(Received::from(rx), "list pods"))
            .join()
            .unwrap()
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_stream_cut_part_way_is_the_connections_error_and_no_pods() {
        // The connection fails after the first pods have arrived: the decoder's read gets
        // the error, and the list fails with it rather than returning the pods so far.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let first = br#"{"kind":"PodList","metadata":{},"items":[{"metadata":{"name":"a","namespace":"n"},"spec":{}},"#;
        tx.try_send(Ok(first.to_vec())).unwrap();
        tx.try_send(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )))
        .unwrap();
        drop(tx);
        let e = list_error(rx);
        assert!(e.starts_with("list pods: the API server's response"), "{e}");
        assert!(e.contains("connection reset by peer"), "{e}");
        // Parts that end inside the list (the sender gone without an error) are cut JSON.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.try_send(Ok(first.to_vec())).unwrap();
        drop(tx);
        let e = list_error(rx);
        assert!(e.starts_with("list pods: the API server's response"), "{e}");
    }
}
