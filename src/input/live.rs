//! Reading nodes from the live cluster with kube-rs.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{Error, Result};
use crate::input::document::one_line;
use crate::model::node::{NodeInfo, Taint};

/// How long gpuwl waits at most for a TCP/TLS connection to the API server (never longer
/// than the request timeout).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default of `--request-timeout`: how long gpuwl waits for one API response.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

static REQUEST_TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// Sets the per-request timeout of every client made afterwards (`--request-timeout`); the
/// first call wins.
pub fn set_request_timeout(t: Duration) {
    let _ = REQUEST_TIMEOUT.set(t);
}

/// The per-request timeout ([`DEFAULT_REQUEST_TIMEOUT`] unless set).
pub fn request_timeout() -> Duration {
    *REQUEST_TIMEOUT.get().unwrap_or(&DEFAULT_REQUEST_TIMEOUT)
}

/// Page size of the paginated node list (`limit`; `continue` tokens follow).
pub const PAGE_SIZE: u32 = 500;

/// A client from a kubeconfig: `kubeconfig` (else `$KUBECONFIG` / `~/.kube/config`, else
/// the in-cluster service account, as kube-rs infers), with `context` (else the
/// kubeconfig's current context).
///
/// Errors: [`Error::Input`] when the given kubeconfig file cannot be read or parsed, or
/// the context does not exist; [`Error::Runtime`] when no configuration can be inferred or
/// the client cannot be built.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Client> {
    connect(kubeconfig, context).await.map(|(c, _)| c)
}

/// [`client`], and the API server's URL (for messages).
///
/// Errors: as [`client`].
pub async fn connect(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<(Client, String)> {
    let config = config(kubeconfig, context).await?;
    let server = config.cluster_url.to_string();
    Client::try_from(config).map(|c| (c, server)).map_err(|e| {
        Error::Runtime(format!(
            "cannot build a client: {}",
            one_line(&e.to_string())
        ))
    })
}

/// The client configuration [`connect`] uses: the kubeconfig (or in-cluster) settings with
/// gpuwl's timeouts ([`CONNECT_TIMEOUT`], [`request_timeout`] for reads and writes).
///
/// Errors: as [`client`], less the client build.
pub async fn config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Config> {
    let opts = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    // $KUBECONFIG naming one file is read like --kubeconfig: a bad file is bad input (2)
    // however it is named.
    let env_file = std::env::var_os("KUBECONFIG")
        .filter(|v| !v.is_empty() && !v.to_string_lossy().contains(':'))
        .map(std::path::PathBuf::from);
    let kubeconfig = kubeconfig.or(env_file.as_deref());
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| kubeconfig_error(path, &e))?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| kubeconfig_error(path, &e))?
        }
        (None, Some(_)) => Config::from_kubeconfig(&opts)
            .await
            .map_err(|e| Error::Input(format!("kubeconfig: {}", one_line(&e.to_string()))))?,
        (None, None) => Config::infer().await.map_err(|e| {
            Error::Runtime(format!(
                "no cluster configuration: {}",
                one_line(&e.to_string())
            ))
        })?,
    };
    let mut config = config;
    config.connect_timeout = Some(CONNECT_TIMEOUT.min(request_timeout()));
    config.read_timeout = Some(request_timeout());
    config.write_timeout = Some(request_timeout());
    config.reset_reader_on_write = true;
    Ok(config)
}

/// Reduces an API Node to a [`NodeInfo`] (quantities keep their API text).
pub fn node_info(node: &Node) -> NodeInfo {
    let quantities = |m: &std::collections::BTreeMap<
        String,
        k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    >| { m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect() };
    let status = node.status.as_ref();
    NodeInfo {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        taints: node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        capacity: status
            .and_then(|s| s.capacity.as_ref())
            .map(quantities)
            .unwrap_or_default(),
        allocatable: status.and_then(|s| s.allocatable.as_ref()).map(quantities),
    }
}

/// Lists all nodes page by page ([`PAGE_SIZE`] per request, following `continue`) and hands
/// each to `on_node`; returns how many there were.
///
/// Errors: [`Error::Runtime`] when the API server cannot be reached or refuses the list.
pub async fn for_each_node(client: &Client, on_node: impl FnMut(NodeInfo)) -> Result<usize> {
    for_each_node_paged(client, PAGE_SIZE, on_node).await
}

/// [`for_each_node`] with an explicit page size (`limit`, at least 1).
///
/// Errors: as [`for_each_node`].
pub async fn for_each_node_paged(
    client: &Client,
    page_size: u32,
    mut on_node: impl FnMut(NodeInfo),
) -> Result<usize> {
    let api: Api<Node> = Api::all(client.clone());
    let mut token: Option<String> = None;
    let mut count = 0;
    loop {
        let mut lp = ListParams::default().limit(page_size.max(1));
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api
            .list(&lp)
            .await
            .map_err(|e| api_error("list nodes", &e))?;
        for n in &page.items {
            on_node(node_info(n));
            count += 1;
        }
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(count),
        }
    }
}

/// The one-line error for a failed API call: `doing` says what gpuwl was doing
/// (`list nodes`), and the message ends with a way out — forbidden: the verb and resource
/// the credentials lack; unauthorized: the credentials; unreachable: whether the cluster
/// is up. The caller ([`crate::cli::LiveArgs::block_on`]) adds the server's address.
/// Secrets never appear: kube's errors carry no tokens.
pub fn api_error(doing: &str, e: &kube::Error) -> Error {
    let message = match e {
        kube::Error::Api(ae) if ae.code == 403 => format!(
            "forbidden ({}); the credentials need RBAC permission to {doing} (kubectl auth can-i {doing})",
            one_line(&ae.message)
        ),
        kube::Error::Api(ae) if ae.code == 401 => "unauthorized: the kubeconfig's credentials were refused (expired token or certificate?)".to_string(),
        kube::Error::Api(ae) => format!("{} ({})", one_line(&ae.message), ae.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            let text = format!("{e:?} {e}").to_lowercase();
            if text.contains("timed out") || text.contains("timeout") || text.contains("elapsed") {
                format!(
                    "no answer within {}s (connect {}s); the server accepts connections but does not respond — a wrong address or port, or an overloaded API server (--request-timeout SECONDS to wait longer)",
                    request_timeout().as_secs(),
                    CONNECT_TIMEOUT.min(request_timeout()).as_secs()
                )
            } else if text.contains("refused") {
                "connection refused; is the cluster up? (the local one: gpuwl cluster status)"
                    .to_string()
            } else {
                format!(
                    "the API server cannot be reached ({}); is the cluster up? (the local one: gpuwl cluster status)",
                    one_line(&e.to_string())
                )
            }
        }
        _ => one_line(&e.to_string()),
    };
    Error::cluster(doing, message, clone_kube_error(e))
}

/// A copy of `e` to keep as an error's source: API errors whole, others as their message
/// (kube's other errors are not `Clone`).
fn clone_kube_error(e: &kube::Error) -> kube::Error {
    match e {
        kube::Error::Api(ae) => kube::Error::Api(ae.clone()),
        other => kube::Error::Service(other.to_string().into()),
    }
}

/// A kubeconfig that cannot be used, as one line that names the file and where the problem
/// is but never echoes a value (a kubeconfig holds tokens and keys): an I/O problem is
/// quoted, a parse problem gives only its line and column.
fn kubeconfig_error(path: &Path, e: &dyn std::error::Error) -> Error {
    let mut chain = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        chain.push(s.to_string());
        src = s.source();
    }
    let all = chain.join(": ");
    if let Some(io) = chain.iter().find(|m| {
        m.contains("No such file")
            || m.contains("Is a directory")
            || m.contains("Permission denied")
    }) {
        return Error::Input(format!("{}: cannot read: {}", path.display(), one_line(io)));
    }
    if all.to_lowercase().contains("context") {
        return Error::Input(format!(
            "{}: the context is not in this kubeconfig (or names a missing cluster or user)",
            path.display()
        ));
    }
    // Only the position `line N column M`: the rest of a parser message may quote a value.
    let at = all.find("line ").and_then(|i| {
        let w: Vec<&str> = all[i..].split_whitespace().take(4).collect();
        let num = |s: &str| {
            let d: String = s.chars().take_while(char::is_ascii_digit).collect();
            (!d.is_empty()).then_some(d)
        };
        match w.as_slice() {
            ["line", l, "column", c, ..] => Some(format!("line {} column {}", num(l)?, num(c)?)),
            ["line", l, ..] => Some(format!("line {}", num(l)?)),
            _ => None,
        }
    });
    Error::Input(format!(
        "{}: not a usable kubeconfig{} (values are not shown: a kubeconfig holds credentials)",
        path.display(),
        at.map(|l| format!(" at {}", l.trim())).unwrap_or_default()
    ))
}

/// Lists at most one node: the cheapest call that proves the server answers and the
/// credentials may list nodes, before slower reads that do not fail on their own.
///
/// Errors: [`api_error`] (`cannot list nodes: ...`).
pub async fn probe_nodes(client: &Client) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    api.list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(|e| api_error("list nodes", &e))?;
    Ok(())
}

/// All nodes of the cluster (see [`for_each_node`]).
pub async fn list_nodes(client: &Client) -> Result<Vec<NodeInfo>> {
    let mut v = Vec::new();
    for_each_node(client, |n| v.push(n)).await?;
    Ok(v)
}
