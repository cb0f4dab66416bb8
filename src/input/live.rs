//! Cluster access, one way: the flags that say where a cluster is ([`ClusterArgs`]:
//! `--kubeconfig`, `--context`, `--request-timeout`, flattened into every command that
//! talks to a cluster), the one client builder ([`connect`], one-shot or watch flavour,
//! [`client_from_config`]), the one paging loop ([`pages`], [`list_all`]) and the one
//! mapping of a failed API call to an [`Error`] ([`api_error`]). The node list reads
//! through them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError};
use kube::{Client, Config};

use gpuwl_core::decode::document::one_line;
use gpuwl_core::decode::limits;
use gpuwl_core::error::{CONNECT_TIMEOUT, DEFAULT_CLUSTER_NAME, Error, Result};
use gpuwl_core::model::node::{NodeInfo, Taint};

use crate::files;
use gpuwl_core::render;
use gpuwl_core::text;

/// The default of `--request-timeout`: how long gpuwl waits for one API response. One list
/// page of a healthy API server answers in well under a second; 30 s leaves room for a
/// large page on a loaded server and still ends a command aimed at a silent one soon.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Page size of the paginated lists (`limit`; `continue` tokens follow).
pub const PAGE_SIZE: u32 = 500;

/// Where a cluster is and how long to wait for it: the flags every command that talks to a
/// cluster flattens. The file arguments of each command declare the conflicts with these.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig for the live cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for the live cluster (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Seconds to wait for one API response before giving up with exit 3 (connecting
    /// waits at most 10 s).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_REQUEST_TIMEOUT.as_secs())]
    pub request_timeout: u64,
}

impl Default for ClusterArgs {
    fn default() -> Self {
        ClusterArgs {
            kubeconfig: None,
            context: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT.as_secs(),
        }
    }
}

impl ClusterArgs {
    /// A kubeconfig file with its current context (or `context`) and the default timeout.
    pub fn file(kubeconfig: &Path, context: Option<&str>) -> ClusterArgs {
        ClusterArgs {
            kubeconfig: Some(kubeconfig.to_owned()),
            context: context.map(str::to_owned),
            ..ClusterArgs::default()
        }
    }

    /// Whether a live cluster is configured: `--kubeconfig` / `--context`, `$KUBECONFIG`,
    /// `~/.kube/config`, or in-cluster credentials (nothing is read or contacted).
    pub fn configured(&self) -> bool {
        self.kubeconfig.is_some()
            || self.context.is_some()
            || std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty())
            || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
            || std::env::var_os("HOME")
                .is_some_and(|h| Path::new(&h).join(".kube/config").is_file())
    }

    /// `--request-timeout` as a duration (at least 1 s).
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout.max(1))
    }

    /// Builds a runtime and a one-shot client from these flags, then runs `work` with the
    /// client; its cluster errors get the server's address and the timeouts
    /// ([`Error::at_server`]).
    ///
    /// Errors: as [`connect`]; [`Error::Runtime`] when the runtime cannot be built; and
    /// `work`'s.
    pub fn block_on<T, F, Fut>(&self, work: F) -> Result<T>
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        runtime()?.block_on(async {
            let conn = connect(self, Flavour::OneShot).await?;
            let (client, server) = (conn.client, conn.server);
            work(client)
                .await
                .map_err(|e| e.at_server(&server, self.request_timeout()))
        })
    }
}

/// The tokio runtime of a command that talks to the API server and ends: one worker
/// thread (I/O and timers) and the blocking pool. Such a command's async side is I/O; what
/// costs CPU runs on a blocking thread (the pod list is decoded there as it arrives). A
/// second worker only made the two threads wake each other for every part of a response:
/// at 150,000 pods, 2-6 s of system CPU and 14-16 s instead of 7.5-10 s for `inventory`
/// (BENCHMARKS.md, "2026-12-07 (evening)").
///
/// Errors: [`Error::Failed`] when the runtime cannot be built.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(1).enable_all();
    b.build()
        .map_err(|e| Error::failed("cannot start the async runtime", e))
}

/// The builder of a long-running command's runtime (two worker threads, I/O and timers),
/// for a caller that adds to it (`gpuwl serve` lowers its threads' priority).
pub fn runtime_builder() -> tokio::runtime::Builder {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2).enable_all();
    b
}

/// What a client is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Requests that each get an answer: every read waits at most the request timeout.
    OneShot,
    /// Watches that stay open for minutes without a byte when nothing changes: no read
    /// timeout (kube-runtime restarts a watch that is silent past its own timeout + 5 s);
    /// connecting and writing still time out.
    Watch,
    /// As [`Flavour::OneShot`], without the client's own retries of 429, 503 and 504
    /// (kube-rs retries them up to 15 times, backing off up to 1,000 s): for a call whose
    /// 429 is an answer the caller handles — an eviction a PodDisruptionBudget refuses.
    NoRetry,
}

/// A client and the API server it talks to.
#[derive(Clone)]
pub struct Connection {
    /// The client.
    pub client: Client,
    /// The API server's URL, without a trailing `/` (for messages).
    pub server: String,
}

/// Connects to the cluster `args` names: the kubeconfig (else `$KUBECONFIG` /
/// `~/.kube/config`, else the in-cluster service account, as kube-rs infers), with its
/// context (else the kubeconfig's current context), gpuwl's timeouts for `flavour`. Makes
/// no request.
///
/// Errors: [`Error::Input`] when the given kubeconfig file cannot be read or parsed, or
/// the context does not exist; [`Error::NoKubeconfig`] when no configuration can be
/// inferred (the message says how to give one); [`Error::Runtime`] when the client cannot
/// be built.
pub async fn connect(args: &ClusterArgs, flavour: Flavour) -> Result<Connection> {
    let config = config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let server = server_for_messages(&config.cluster_url);
    let client = client_from_config(config, flavour, args.request_timeout())?;
    Ok(Connection { client, server })
}

/// The one place a client is built: `config` with gpuwl's timeouts for `flavour`
/// ([`CONNECT_TIMEOUT`] capped by `request_timeout`; `request_timeout` for reads, none for
/// a [`Flavour::Watch`], and writes; no client retries for a [`Flavour::NoRetry`]).
///
/// Errors: [`Error::Runtime`] when the client cannot be built (a TLS setting it cannot
/// load).
pub fn client_from_config(
    mut config: Config,
    flavour: Flavour,
    request_timeout: Duration,
) -> Result<Client> {
    config.connect_timeout = Some(CONNECT_TIMEOUT.min(request_timeout));
    config.read_timeout = match flavour {
        Flavour::OneShot | Flavour::NoRetry => Some(request_timeout),
        Flavour::Watch => None,
    };
    if flavour == Flavour::NoRetry {
        config.default_retry = false;
    }
    config.write_timeout = Some(request_timeout);
    config.reset_reader_on_write = true;
    Client::try_from(config).map_err(|e| match auth_failure(&e) {
        Some(why) => Error::Runtime(format!("cannot build a client: {why}")),
        None => Error::failed("cannot build a client", e),
    })
}

/// The API server's URL as messages show it: scheme, host, port and path, without a
/// `user:password@` part or a query (a kubeconfig may carry credentials there), and
/// without a trailing `/`.
pub(crate) fn server_for_messages(url: &http::Uri) -> String {
    let scheme = url.scheme_str().unwrap_or("https");
    let host = url.host().unwrap_or("");
    let port = url.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    let path = url.path().trim_end_matches('/');
    format!("{scheme}://{host}{port}{path}")
}

/// Why the credentials could not be obtained, when `e` is kube's authentication error
/// (an exec plugin that failed or printed something else than an ExecCredential, a token
/// file that cannot be read): said without kube's text, which quotes the plugin's command,
/// its environment and its output — a token among them.
fn auth_failure(e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Auth(_) => Some(
            "the kubeconfig's credentials could not be obtained (its exec plugin or token file failed; values are not shown: run the plugin by hand, or kubectl get nodes, to see why)".into(),
        ),
        _ => None,
    }
}

/// The kubeconfig (or in-cluster) settings [`connect`] starts from, before timeouts. The
/// kubeconfig is taken as kubectl takes it: `--kubeconfig`, else the files `$KUBECONFIG`
/// lists (merged; a missing one skipped when others exist), else `~/.kube/config`, else the
/// pod's service account. Every message names the file and where its path came from
/// (`$KUBECONFIG=…`), and a context that is not there is named with those that are.
///
/// Errors: [`Error::Input`] when the kubeconfig cannot be read or parsed, or the context
/// (given, or current) is not in it; [`Error::NoKubeconfig`] when none can be found.
async fn config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Config> {
    let opts = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let read = |path: &Path, name: &str| -> Result<Kubeconfig> {
        readable(path, name).map_err(|e| match gone_local_cluster(path) {
            Some(hint) => Error::Input(format!("{e}{hint}")),
            None => e,
        })?;
        Kubeconfig::read_from(path).map_err(|e| kubeconfig_error(name, &e))
    };
    let env = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty());
    let (kc, name) = match (kubeconfig, env) {
        (Some(path), _) => {
            let name = kubeconfig_name(path, false);
            (read(path, &name)?, name)
        }
        (None, Some(value)) => {
            let paths: Vec<PathBuf> = std::env::split_paths(&value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            let name = format!("$KUBECONFIG={}", value.to_string_lossy());
            match paths.as_slice() {
                [] => return Err(Error::Input(format!("{name}: names no file"))),
                [one] => (read(one, &kubeconfig_name(one, true))?, name),
                many => {
                    let present: Vec<&PathBuf> = many.iter().filter(|p| p.exists()).collect();
                    if present.is_empty() {
                        return Err(Error::Input(format!(
                            "{name}: none of its {} files exists",
                            many.len()
                        )));
                    }
                    let mut merged = Kubeconfig::default();
                    for p in present {
                        let one = format!("{} (in $KUBECONFIG)", p.display());
                        merged = merged
                            .merge(read(p, &one)?)
                            .map_err(|e| kubeconfig_error(&one, &e))?;
                    }
                    (merged, name)
                }
            }
        }
        (None, None) => {
            let home = std::env::var_os("HOME")
                .map(|h| Path::new(&h).join(".kube/config"))
                .filter(|p| p.exists());
            match home {
                Some(p) => {
                    let name = p.display().to_string();
                    (read(&p, &name)?, name)
                }
                // No kubeconfig: the pod's service account, unless a context was asked for
                // (in-cluster credentials have none).
                None => {
                    let no_kubeconfig = |detail: String| Error::NoKubeconfig {
                        detail,
                        // Filled in by the command line, which knows about the local clusters.
                        running: Vec::new(),
                    };
                    if let Some(c) = context {
                        return Err(no_kubeconfig(format!(
                            "--context {} needs one",
                            render::esc(c)
                        )));
                    }
                    return Config::incluster().map_err(|_| no_kubeconfig(String::new()));
                }
            }
        }
    };
    check_context(&kc, context, &name)?;
    credential_files(&kc, context, &name)?;
    if let Some(c) = context.or(kc.current_context.as_deref()) {
        let _ = SERVER_FROM.set(format!(
            "context {} of {}",
            render::esc(c),
            render::esc(&name)
        ));
    }
    Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| kubeconfig_error(&name, &e))
}

/// Where this run's API server address came from (`context prod of $KUBECONFIG=…`), set
/// by the first [`connect`]: an unreachable server that is not a local cluster is named
/// with it.
static SERVER_FROM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `context C of FILE`: where the API server address of this run came from, once a
/// kubeconfig was read.
pub fn server_from() -> Option<&'static str> {
    SERVER_FROM.get().map(String::as_str)
}

/// That the context gpuwl will use — `context`, else the kubeconfig's `current-context` — is
/// one of the kubeconfig's, else a one-line error naming the kubeconfig (`name`), the
/// context, those there are and the nearest ([`gpuwl_core::text::did_you_mean`]). Context names
/// are not credentials: they may be shown.
///
/// Errors: [`Error::Input`] as above.
/// Checks that the certificate and key files the context in use names (its cluster's
/// `certificate-authority`, its user's `client-certificate` and `client-key`, each where
/// no `-data` field replaces it) can be read, so a file that is gone is named as kubectl
/// names it (`unable to read client-cert …`), before kube-rs reports it as an unusable
/// configuration.
///
/// Errors: [`Error::Input`] naming the kubeconfig, the field and the file.
fn credential_files(kc: &Kubeconfig, context: Option<&str>, name: &str) -> Result<()> {
    let Some(ctx) = context
        .or(kc.current_context.as_deref())
        .and_then(|c| kc.contexts.iter().find(|n| n.name == c))
        .and_then(|n| n.context.as_ref())
    else {
        return Ok(());
    };
    let mut files: Vec<(&str, &str)> = Vec::new();
    if let Some(c) = kc
        .clusters
        .iter()
        .find(|n| n.name == ctx.cluster)
        .and_then(|n| n.cluster.as_ref())
        && c.certificate_authority_data.is_none()
        && let Some(f) = &c.certificate_authority
    {
        files.push(("certificate-authority", f));
    }
    if let Some(u) = ctx
        .user
        .as_deref()
        .and_then(|u| kc.auth_infos.iter().find(|n| n.name == u))
        .and_then(|n| n.auth_info.as_ref())
    {
        if u.client_certificate_data.is_none()
            && let Some(f) = &u.client_certificate
        {
            files.push(("client-certificate", f));
        }
        if u.client_key_data.is_none()
            && let Some(f) = &u.client_key
        {
            files.push(("client-key", f));
        }
    }
    for (field, file) in files {
        if let Err(io) = std::fs::File::open(file) {
            return Err(unreadable_file_error(name, field, Path::new(file), &io));
        }
    }
    Ok(())
}

/// The one line for a certificate or key file a kubeconfig names that cannot be read.
fn unreadable_file_error(name: &str, field: &str, path: &Path, io: &std::io::Error) -> Error {
    Error::Input(format!(
        "{name}: cannot read its {field} file {}: {io} (restore the file, or put its contents in {field}-data)",
        render::esc(&path.display().to_string())
    ))
}

fn check_context(kc: &Kubeconfig, context: Option<&str>, name: &str) -> Result<()> {
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    let list = || {
        if names.is_empty() {
            "it has none".to_string()
        } else {
            let shown: Vec<String> = names.iter().take(10).map(|n| render::esc(n)).collect();
            let more = names.len().saturating_sub(10);
            format!(
                "its contexts: {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        }
    };
    match (context, kc.current_context.as_deref()) {
        (Some(c), _) if !names.contains(&c) => Err(Error::Input(format!(
            "{name}: no context {} ({}){}",
            render::esc(c),
            list(),
            text::did_you_mean(c, names.iter().copied())
        ))),
        (None, Some(c)) if !names.contains(&c) => Err(Error::Input(format!(
            "{name}: its current-context {} is not one of its contexts ({}); pass --context NAME{}",
            render::esc(c),
            list(),
            text::did_you_mean(c, names.iter().copied())
        ))),
        (None, None) if !names.is_empty() => Err(Error::Input(format!(
            "{name}: no current-context set; pass --context NAME ({})",
            list()
        ))),
        _ => Ok(()),
    }
}

/// When `path` is the kubeconfig of a local cluster (`gpuwl cluster`) that no longer has
/// one — stopped with `cluster down`, which removes its state — how to get it back:
/// `; the local cluster eval is gone (gpuwl cluster down removed its state): gpuwl cluster
/// up --name eval`; `None` for any other path.
fn gone_local_cluster(path: &Path) -> Option<String> {
    let root = files::state_root();
    let rel = std::path::absolute(path).ok()?;
    let rel = rel.strip_prefix(std::path::absolute(&root).ok()?).ok()?;
    let mut parts = rel.components();
    let name = parts.next()?.as_os_str().to_str()?.to_owned();
    if parts.as_path() != Path::new("kubeconfig") || path.exists() {
        return None;
    }
    let flag = if name == DEFAULT_CLUSTER_NAME {
        String::new()
    } else {
        format!(" --name {}", render::esc(&name))
    };
    Some(format!(
        "; the local cluster {} is gone (gpuwl cluster down removed its state): gpuwl cluster up{flag}",
        render::esc(&name)
    ))
}

/// How a kubeconfig path is named in messages: `$KUBECONFIG=<path>` when it came from
/// the environment (a path the user did not type is recognised by its source), else the
/// path as given.
fn kubeconfig_name(path: &Path, via_env: bool) -> String {
    if via_env {
        format!("$KUBECONFIG={}", path.display())
    } else {
        path.display().to_string()
    }
}

/// Listed objects as JSON values with their `kind` set (a list's items carry none), for
/// the readers that take JSON; `what` names them in the error.
///
/// Errors: [`Error::Failed`] when an object cannot be turned into JSON.
pub(crate) fn values_with_kind<K: serde::Serialize>(
    items: &[K],
    kind: &str,
    what: &str,
) -> Result<Vec<serde_json::Value>> {
    items
        .iter()
        .map(|item| {
            let mut v = serde_json::to_value(item)
                .map_err(|e| Error::failed(format!("reading {what} from the API"), e))?;
            if let serde_json::Value::Object(m) = &mut v {
                m.insert("kind".into(), serde_json::Value::String(kind.to_owned()));
            }
            Ok(v)
        })
        .collect()
}

/// The API server's version as numbers, from `/version`'s `major` and `minor` (a provider
/// may suffix the minor: `33+`); `None` when either is not a number.
pub(crate) fn version_numbers(major: &str, minor: &str) -> Option<(u32, u32)> {
    let number = |s: &str| {
        s.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse::<u32>()
            .ok()
    };
    Some((number(major)?, number(minor)?))
}

/// The one paging loop: calls `page` with `base` (its `limit` set to [`PAGE_SIZE`] unless
/// given) and then with each `continue` token `page` returns, until it returns none (or an
/// empty one). `page` handles the items of its page itself.
///
/// Errors: the first of `page`'s.
pub async fn pages<E>(
    base: ListParams,
    mut page: impl AsyncFnMut(&ListParams) -> std::result::Result<Option<String>, E>,
) -> std::result::Result<(), E> {
    let mut lp = if base.limit.is_none() {
        base.limit(PAGE_SIZE)
    } else {
        base
    };
    loop {
        match page(&lp).await? {
            Some(t) if !t.is_empty() => lp = lp.continue_token(&t),
            _ => return Ok(()),
        }
    }
}

/// Lists every object of `api` matching `base`, page by page ([`pages`]), handing each to
/// `on_item`; returns how many there were. At most `--max-items` objects
/// ([`gpuwl_core::decode::limits`]): a list past it stops there.
///
/// Errors: [`api_error`] (`cannot <doing>: ...`) when a page cannot be listed;
/// [`Error::Input`] (exit 2) past `--max-items`.
pub async fn list_all<K>(
    api: &Api<K>,
    base: ListParams,
    doing: &str,
    mut on_item: impl FnMut(K),
) -> Result<usize>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut count = 0;
    pages(base, async |lp: &ListParams| {
        let page = api.list(lp).await.map_err(|e| api_error(doing, &e))?;
        count += page.items.len();
        if let Some(last) = count.checked_sub(1) {
            limits::check_item(last).map_err(|m| Error::Input(format!("{doing}: {m}")))?;
        }
        page.items.into_iter().for_each(&mut on_item);
        Ok::<_, Error>(page.metadata.continue_)
    })
    .await?;
    Ok(count)
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
/// Errors: [`Error::Cluster`] when the API server cannot be reached or refuses the list.
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
    let base = ListParams::default().limit(page_size.max(1));
    let mut count = 0usize;
    pages(base, async |lp: &ListParams| {
        let req = kube::core::Request::new("/api/v1/nodes")
            .list(lp)
            .map_err(|e| Error::failed("cannot list nodes", e))?;
        let body = client
            .request_text(req)
            .await
            .map_err(|e| api_error("list nodes", &e))?;
        // The page is read as a node dump is: only NodeInfo's fields are decoded.
        let mut over = None;
        let (_, next) = gpuwl_core::decode::dump::read_page(
            body.as_bytes(),
            "the API server's response",
            |n| {
                if over.is_none() {
                    match limits::check_item(count) {
                        Ok(()) => on_node(n),
                        Err(m) => over = Some(m),
                    }
                    count += 1;
                }
            },
        )
        .map_err(|e| match e {
            Error::Input(m) => Error::failed("list nodes", m),
            other => other,
        })?;
        if let Some(m) = over {
            return Err(Error::Input(format!("list nodes: {m}")));
        }
        Ok::<_, Error>(next)
    })
    .await?;
    Ok(count)
}

/// The end of an unreachable-server message; the command line replaces it with the
/// local cluster's own commands when the address is one of them
/// ([`crate::cluster::at_server`]).
pub const LOCAL_HINT: &str = " (the local one: gpuwl cluster status)";

/// The one-line error for a failed API call: `doing` says what gpuwl was doing
/// (`list nodes`), and the message ends with a way out — forbidden: the verb and resource
/// the credentials lack; unauthorized: the credentials; unreachable: whether the cluster
/// is up. The caller ([`ClusterArgs::block_on`]) adds the server's address and the
/// timeouts ([`Error::at_server`]).
/// Secrets never appear: kube's errors carry no tokens.
pub fn api_error(doing: &str, e: &kube::Error) -> Error {
    let message = match e {
        // The NamespaceLifecycle admission plugin refuses new objects in a namespace that
        // is being deleted (kubernetes/kubernetes
        // `plugin/pkg/admission/namespace/lifecycle/admission.go`).
        kube::Error::Api(ae) if ae.code == 403 && ae.message.contains("being terminated") => {
            format!(
                "{}; try again once the namespace is gone (`kubectl get namespace` says NotFound)",
                one_line(&ae.message)
            )
        }
        kube::Error::Api(ae) if ae.code == 403 => format!(
            "forbidden ({}); the credentials need RBAC permission to {doing} (kubectl auth can-i {doing})",
            one_line(&ae.message)
        ),
        kube::Error::Api(ae) if ae.code == 401 => "unauthorized: the kubeconfig's credentials were refused (expired token or certificate?)".to_string(),
        kube::Error::Api(ae) => format!("{} ({})", one_line(&ae.message), ae.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            if is_timeout(e) {
                return Error::cluster_timeout(doing, clone_kube_error(e));
            }
            let text = format!("{e:?} {e}").to_lowercase();
            if text.contains("refused") {
                format!("connection refused; is the cluster up?{LOCAL_HINT}")
            } else {
                format!(
                    "the API server cannot be reached ({}); is the cluster up?{LOCAL_HINT}",
                    one_line(&e.to_string())
                )
            }
        }
        _ => match auth_failure(e) {
            Some(why) => why,
            None => one_line(&e.to_string()),
        },
    };
    Error::cluster(doing, message, clone_kube_error(e))
}

/// True when the API server refused a create because the object exists already (409
/// AlreadyExists; the only 409 a create can get): the idempotent creates of the lab, the
/// twin and the simulated nodes take it as done.
pub fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// [`api_error`] as a closure for `map_err`: `.map_err(api_err("list nodes"))`.
pub fn api_err(doing: &str) -> impl Fn(kube::Error) -> Error + '_ {
    move |e| api_error(doing, &e)
}

/// Whether `e` is a client-side timeout (connect, read or write): the server did not answer.
pub fn is_timeout(e: &kube::Error) -> bool {
    match e {
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            let text = format!("{e:?} {e}").to_lowercase();
            text.contains("timed out") || text.contains("timeout") || text.contains("elapsed")
        }
        _ => false,
    }
}

/// A copy of `e` to keep as an error's source: API errors whole, others as their message
/// (kube's other errors are not `Clone`).
fn clone_kube_error(e: &kube::Error) -> kube::Error {
    match e {
        kube::Error::Api(ae) => kube::Error::Api(ae.clone()),
        // kube's text quotes the exec plugin's command, environment and output.
        kube::Error::Auth(_) => {
            kube::Error::Service("authentication failed (values are not shown)".into())
        }
        other => kube::Error::Service(other.to_string().into()),
    }
}

/// Checks that the kubeconfig at `path` can be opened as a file, so a missing, unreadable
/// or directory path is said from the I/O error itself (`/x: cannot read: No such file or
/// directory (os error 2)`), not from a parser message that quotes the path again.
///
/// Errors: [`Error::Input`] naming the path and the I/O reason.
fn readable(path: &Path, name: &str) -> Result<()> {
    let opened = std::fs::File::open(path).and_then(|f| {
        if f.metadata()?.is_dir() {
            Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            ))
        } else {
            Ok(())
        }
    });
    opened.map_err(|e| Error::Input(format!("{name}: cannot read: {e}")))
}

/// The certificate or key file a kubeconfig names that could not be read, as kubectl says
/// it (`unable to read client-cert …`): the field (`client-certificate`, `client-key`,
/// `certificate-authority`), the path and the I/O error. A file's path is not a credential;
/// its contents are never read into a message.
fn unreadable_file<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<(&'static str, &'a Path, &'a std::io::Error)> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(k) = c.downcast_ref::<KubeconfigError>() {
            let (field, data) = match k {
                KubeconfigError::LoadClientCertificate(d) => ("client-certificate", d),
                KubeconfigError::LoadClientKey(d) => ("client-key", d),
                KubeconfigError::LoadCertificateAuthority(d) => ("certificate-authority", d),
                _ => return None,
            };
            return match data {
                LoadDataError::ReadFile(io, path) => Some((field, path.as_path(), io)),
                _ => None,
            };
        }
        cur = c.source();
    }
    None
}

/// A kubeconfig that cannot be used, as one line that names the file and where the problem
/// is but never echoes a value (a kubeconfig holds tokens and keys): a certificate or key
/// file that cannot be read is named with its field and the I/O reason, a parse problem
/// gives only its line and column.
fn kubeconfig_error(name: &str, e: &(dyn std::error::Error + 'static)) -> Error {
    if let Some((field, path, io)) = unreadable_file(e) {
        return unreadable_file_error(name, field, path, io);
    }
    let mut chain = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        chain.push(s.to_string());
        src = s.source();
    }
    let all = chain.join(": ");
    if all.to_lowercase().contains("context") {
        return Error::Input(format!(
            "{name}: the context is not in this kubeconfig (or names a missing cluster or user)"
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
        "{name}: not a usable kubeconfig{} (values are not shown: a kubeconfig holds credentials)",
        at.map(|l| format!(" at {}", l.trim())).unwrap_or_default()
    ))
}

/// Lists at most one node: the cheapest call that proves the server answers and the
/// credentials may list nodes, before slower reads that do not fail on their own.
///
/// Errors: [`api_error`] (`cannot list nodes: ...`).
pub async fn probe_nodes(client: &Client) -> Result<()> {
    // One request, not a list: no paging.
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

#[cfg(test)]
mod tests {

    #[test]
    fn the_servers_address_in_messages_has_no_credentials() {
        let url: http::Uri = "https://admin:S3CRETPW@10.0.0.1:6443/k8s/?token=QTOKEN"
            .parse()
            .unwrap();
        assert_eq!(server_for_messages(&url), "https://10.0.0.1:6443/k8s");
        let plain: http::Uri = "https://api.example.org/".parse().unwrap();
        assert_eq!(server_for_messages(&plain), "https://api.example.org");
        let e = kube::Error::Auth(kube::client::AuthError::AuthExecStart(
            std::io::Error::other("AWS_SECRET=ENVSECRET"),
        ));
        let shown = api_error("list nodes", &e).to_string();
        assert!(!shown.contains("ENVSECRET"), "{shown}");
        assert!(shown.contains("values are not shown"), "{shown}");
    }
    use super::*;

    #[test]
    fn pages_follows_continue_tokens_until_none_or_empty_and_keeps_the_base() {
        let rt = crate::testing::rt();
        for (last, want_calls) in [(None, 3), (Some(String::new()), 3)] {
            let mut seen = Vec::new();
            let r: std::result::Result<(), ()> = rt.block_on(pages(
                ListParams::default().fields("a=b"),
                async |lp: &ListParams| {
                    seen.push((
                        lp.limit,
                        lp.continue_token.clone(),
                        lp.field_selector.clone(),
                    ));
                    Ok(match seen.len() {
                        1 => Some("t1".to_owned()),
                        2 => Some("t2".to_owned()),
                        _ => last.clone(),
                    })
                },
            ));
            assert_eq!(r, Ok(()));
            assert_eq!(seen.len(), want_calls);
            assert_eq!(seen[0], (Some(PAGE_SIZE), None, Some("a=b".into())));
            assert_eq!(
                seen[2],
                (Some(PAGE_SIZE), Some("t2".into()), Some("a=b".into()))
            );
        }
        // An error ends the loop at once; a given limit stays.
        let mut calls = 0;
        let r: std::result::Result<(), &str> = rt.block_on(pages(
            ListParams::default().limit(7),
            async |lp: &ListParams| {
                calls += 1;
                assert_eq!(lp.limit, Some(7));
                Err("boom")
            },
        ));
        assert_eq!((r, calls), (Err("boom"), 1));
    }

    #[test]
    fn request_timeout_defaults_to_30_s_and_is_at_least_1_s() {
        let args = |s| ClusterArgs {
            request_timeout: s,
            ..ClusterArgs::default()
        };
        assert_eq!(args(4).request_timeout(), Duration::from_secs(4));
        assert_eq!(args(0).request_timeout(), Duration::from_secs(1));
        assert_eq!(
            ClusterArgs::default().request_timeout(),
            DEFAULT_REQUEST_TIMEOUT
        );
        assert_eq!(DEFAULT_REQUEST_TIMEOUT, Duration::from_secs(30));
    }
}
