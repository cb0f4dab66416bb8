//! A Kubernetes API server in memory, for the fast tier: tests of gpuwl's write paths (the
//! lab's steps, the device-plugin emulation, the twin's loader) that need no cluster.
//!
//! A [`FakeApi`] is a `tower::Service` handed to `kube::Client::new`, so the code under test
//! runs unchanged down to its HTTP requests. What it serves, enough for those paths and no
//! more (anything else answers 400 or 405, so a test notices a path it does not cover):
//!
//! - `GET /version`;
//! - get, list (label selectors `k=v`, `k!=v`, `k`; field selectors `a.b=v`, `a.b!=v` on any
//!   JSON field, as `metadata.name` and `spec.nodeName`), watch (`watch=true` from a
//!   `resourceVersion`: `ADDED`/`MODIFIED`/`DELETED` events as they happen; with
//!   `sendInitialEvents=true`, a streaming list: the objects there as `ADDED` events and the
//!   bookmark that ends them first);
//! - create (`409 AlreadyExists` when the name is taken; `metadata.uid`,
//!   `resourceVersion`, `creationTimestamp` set), replace, delete;
//! - patch: JSON merge patch, strategic merge patch and server-side apply are applied as a
//!   JSON merge patch (RFC 7386; the paths under test write maps, not lists), JSON patch as
//!   RFC 6902. As the real API server does for nodes and pods: a write to the `status`
//!   subresource changes only `status`, a write to the object keeps its `status`.
//!
//! - delete of a collection (`DELETE` on a list path, with its selectors), as
//!   `Api::delete_collection` sends it;
//! - plain-text endpoints a test sets ([`FakeApi::text`]): `/readyz`, `/healthz`, a
//!   component's `/metrics`.
//!
//! Every request is recorded ([`FakeApi::requests`]); a test scripts failures
//! ([`FakeApi::fail`]) and plays the controllers itself ([`FakeApi::modify`],
//! [`FakeApi::remove`]), e.g. the scheduler binding a pod.
//!
//! [`FakeApi::client`] answers in process; [`FakeApi::serve`] answers one request of any
//! body type, so the crate's own unit tests also put it behind HTTPS (`src/testing.rs`)
//! for code that builds its client from a kubeconfig or a port.
//!
//! The request and response shapes follow the Kubernetes API conventions
//! (kubernetes/community `contributors/devel/sig-architecture/api-conventions.md`) and the
//! watch event shape of kubernetes/apimachinery `pkg/apis/meta/v1/watch.go`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Where an object lives: the API prefix (`/api/v1`, `/apis/GROUP/VERSION`), the resource
/// (plural), the namespace (`None`: cluster-scoped) and the name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub prefix: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string (`""` when none).
    pub query: String,
    /// `Content-Type`, when sent.
    pub content_type: String,
    /// The body as JSON (`Null` when empty).
    pub body: Value,
}

/// A scripted failure: the next `times` requests with `method` whose path ends with
/// `path_suffix` answer `code`.
#[derive(Debug, Clone)]
struct Fault {
    method: Method,
    path_suffix: String,
    code: u16,
    times: usize,
}

#[derive(Default)]
struct State {
    /// Play kwok: a node created gets `Ready=True` in its status (as kwok's node stage
    /// writes it), so code that waits for Ready nodes goes on.
    ready_nodes: bool,
    objects: BTreeMap<Key, Value>,
    /// Every change, in order: (resourceVersion, event type, key, object).
    events: Vec<(u64, &'static str, Key, Value)>,
    rv: u64,
    requests: Vec<Recorded>,
    faults: Vec<Fault>,
    /// Plain-text answers by path ([`FakeApi::text`]).
    texts: BTreeMap<String, (u16, String)>,
}

/// The fake API server (cheap to clone: one shared state).
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

fn full(v: &Value) -> Body {
    Full::new(Bytes::from(v.to_string()))
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn full_text(text: String) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn respond(code: StatusCode, v: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(full(v))
        .unwrap()
}

/// A `metav1.Status` failure, as the API server sends it.
fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    respond(
        StatusCode::from_u16(code).unwrap(),
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code}),
    )
}

/// The parts of an API path: (key with an empty name for a collection, subresource).
fn parse_path(path: &str) -> Option<(Key, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (format!("/api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("/apis/{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, r, more @ ..] => (Some(ns.to_string()), {
            let mut v = vec![*r];
            v.extend_from_slice(more);
            v
        }),
        other => (None, other.to_vec()),
    };
    let resource = rest.first()?.to_string();
    let name = rest.get(1).map_or(String::new(), |s| s.to_string());
    let sub = rest.get(2).map(|s| s.to_string());
    if rest.len() > 3 {
        return None;
    }
    Some((
        Key {
            prefix,
            resource,
            namespace,
            name,
        },
        sub,
    ))
}

fn query_params(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Whether `obj` passes one selector term of `sel` (comma-separated, all must hold);
/// `lookup` reads a key's value (`None`: absent). Errors: a term it cannot read.
fn selects(
    sel: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> std::result::Result<bool, String> {
    for term in sel.split(',').filter(|t| !t.is_empty()) {
        let ok = if let Some((k, v)) = term.split_once("!=") {
            lookup(k).as_deref() != Some(v)
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            lookup(k).unwrap_or_default() == v
        } else if term.contains([' ', '(', '!']) {
            return Err(format!("selector term {term:?} is not served by the fake"));
        } else {
            lookup(term).is_some()
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn matches(obj: &Value, params: &BTreeMap<String, String>) -> std::result::Result<bool, String> {
    let labels = |k: &str| obj["metadata"]["labels"][k].as_str().map(str::to_string);
    let fields = |k: &str| {
        let pointer = format!("/{}", k.replace('.', "/"));
        match obj.pointer(&pointer) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        }
    };
    Ok(selects(
        params.get("labelSelector").map_or("", String::as_str),
        labels,
    )? && selects(
        params.get("fieldSelector").map_or("", String::as_str),
        fields,
    )?)
}

/// `Kind` of a list's items for a resource (`pods` → `Pod`); enough for the resources the
/// tests use; others are named from the plural. k8s-openapi's types refuse an object of
/// another kind, so an object a test inserts without one must get the right one.
fn kind_of(resource: &str) -> String {
    match resource {
        "nodes" => "Node".into(),
        "pods" => "Pod".into(),
        "namespaces" => "Namespace".into(),
        "configmaps" => "ConfigMap".into(),
        "clusterpolicies" => "ClusterPolicy".into(),
        "serviceaccounts" => "ServiceAccount".into(),
        "deviceclasses" => "DeviceClass".into(),
        "resourceslices" => "ResourceSlice".into(),
        "resourceclaims" => "ResourceClaim".into(),
        "daemonsets" => "DaemonSet".into(),
        "virtualmachineinstances" => "VirtualMachineInstance".into(),
        "virtualmachines" => "VirtualMachine".into(),
        "kubevirts" => "KubeVirt".into(),
        other => {
            let s = other.trim_end_matches('s');
            let mut c = s.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        }
    }
}

fn api_version(prefix: &str) -> String {
    prefix
        .trim_start_matches("/apis/")
        .trim_start_matches("/api/")
        .to_string()
}

/// RFC 7386 JSON merge patch of `patch` onto `target`.
fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

impl FakeApi {
    /// An empty API server.
    pub fn new() -> FakeApi {
        FakeApi::default()
    }

    /// A kube client whose every request this fake answers (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        let me = self.clone();
        let svc = tower::service_fn(move |req: Request<kube::client::Body>| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.serve(req).await) }
        });
        kube::Client::new(svc, "default")
    }

    /// From now on `GET path` (a path outside the API: `/readyz`, `/metrics`) answers
    /// `code` with `text` as `text/plain`.
    pub fn text(&self, path: &str, code: u16, text: &str) {
        self.state
            .lock()
            .unwrap()
            .texts
            .insert(path.into(), (code, text.into()));
    }

    /// Puts `obj` into the store as if it had been created (an `ADDED` event); `prefix` and
    /// `resource` say where (`/api/v1`, `nodes`). Returns the stored object.
    pub fn insert(&self, prefix: &str, resource: &str, obj: Value) -> Value {
        let key = Key {
            prefix: prefix.into(),
            resource: resource.into(),
            namespace: obj["metadata"]["namespace"].as_str().map(str::to_string),
            name: obj["metadata"]["name"].as_str().unwrap_or_default().into(),
        };
        let mut s = self.state.lock().unwrap();
        let stored = Self::store(&mut s, key, obj, "ADDED");
        drop(s);
        self.changed.notify_waiters();
        stored
    }

    /// The object at `path` (e.g. `/api/v1/nodes/n-1`), if any.
    pub fn get(&self, path: &str) -> Option<Value> {
        let (key, _) = parse_path(path)?;
        self.state.lock().unwrap().objects.get(&key).cloned()
    }

    /// Changes the object at `path` with `change` (a `MODIFIED` event), as a controller
    /// would. Panics when there is none.
    pub fn modify(&self, path: &str, change: impl FnOnce(&mut Value)) {
        let (key, _) = parse_path(path).expect("an object path");
        let mut s = self.state.lock().unwrap();
        let mut obj = s.objects.get(&key).cloned().expect("the object exists");
        change(&mut obj);
        Self::store(&mut s, key, obj, "MODIFIED");
        drop(s);
        self.changed.notify_waiters();
    }

    /// Removes the object at `path` (a `DELETED` event), as the garbage collector would.
    pub fn remove(&self, path: &str) {
        let (key, _) = parse_path(path).expect("an object path");
        self.delete(key);
    }

    /// Removes the object at `key` with a `DELETED` event; returns it (`None`: there was none).
    fn delete(&self, key: Key) -> Option<Value> {
        let mut s = self.state.lock().unwrap();
        let mut obj = s.objects.remove(&key)?;
        s.rv += 1;
        let rv = s.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        s.events.push((rv, "DELETED", key, obj.clone()));
        drop(s);
        self.changed.notify_waiters();
        Some(obj)
    }

    /// From now on a created node is made `Ready=True` at once, as kwok makes it.
    pub fn ready_nodes(&self) {
        self.state.lock().unwrap().ready_nodes = true;
    }

    /// The next `times` requests with `method` whose path ends with `path_suffix` answer
    /// `code` (a `metav1.Status` with reason `InternalError` for 5xx, `Conflict` for 409).
    pub fn fail(&self, method: Method, path_suffix: &str, code: u16, times: usize) {
        self.state.lock().unwrap().faults.push(Fault {
            method,
            path_suffix: path_suffix.into(),
            code,
            times,
        });
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The writes so far (every request but `GET`), as `METHOD path`.
    pub fn writes(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    fn store(s: &mut State, key: Key, mut obj: Value, event: &'static str) -> Value {
        s.rv += 1;
        let rv = s.rv;
        let meta = &mut obj["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        if meta["uid"].is_null() {
            meta["uid"] = json!(format!("00000000-0000-0000-0000-{rv:012}"));
        }
        if meta["creationTimestamp"].is_null() {
            meta["creationTimestamp"] = json!("2026-12-02T00:00:00Z");
        }
        if obj["kind"].is_null() {
            obj["kind"] = json!(kind_of(&key.resource));
        }
        if obj["apiVersion"].is_null() {
            obj["apiVersion"] = json!(api_version(&key.prefix));
        }
        s.objects.insert(key.clone(), obj.clone());
        s.events.push((rv, event, key, obj.clone()));
        obj
    }

    /// Answers one request, as the API server would (see the module docs).
    pub async fn serve<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
    {
        let (parts, body) = req.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                Err(e) => return status(400, "BadRequest", &format!("body: {e}")),
            }
        };
        let path = parts.uri.path().to_string();
        let query = parts.uri.query().unwrap_or("").to_string();
        let content_type = parts
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        {
            let mut s = self.state.lock().unwrap();
            s.requests.push(Recorded {
                method: parts.method.to_string(),
                path: path.clone(),
                query: query.clone(),
                content_type: content_type.clone(),
                body: body.clone(),
            });
            if let Some(f) = s
                .faults
                .iter_mut()
                .find(|f| f.times > 0 && f.method == parts.method && path.ends_with(&f.path_suffix))
            {
                f.times -= 1;
                let code = f.code;
                let reason = match code {
                    409 => "Conflict",
                    404 => "NotFound",
                    403 => "Forbidden",
                    _ => "InternalError",
                };
                return status(code, reason, &format!("scripted failure of {path}"));
            }
        }
        let text = self.state.lock().unwrap().texts.get(&path).cloned();
        if let Some((code, text)) = text {
            return Response::builder()
                .status(StatusCode::from_u16(code).unwrap())
                .header("content-type", "text/plain")
                .body(full_text(text))
                .unwrap();
        }
        if path == "/version" {
            return respond(
                StatusCode::OK,
                &json!({"major": "1", "minor": "36", "gitVersion": "v1.36.3-fake"}),
            );
        }
        let Some((key, sub)) = parse_path(&path) else {
            return status(404, "NotFound", &format!("the fake serves no {path}"));
        };
        let params = query_params(&query);
        match (parts.method.clone(), key.name.is_empty()) {
            (Method::GET, true) if params.get("watch").is_some_and(|w| w == "true" || w == "1") => {
                self.watch(key, params)
            }
            (Method::GET, true) => self.list(&key, &params),
            (Method::GET, false) => match self.state.lock().unwrap().objects.get(&key) {
                Some(o) => respond(StatusCode::OK, o),
                None => not_found(&key),
            },
            (Method::POST, true) => self.create(key, body),
            (Method::PUT, false) => self.replace(key, sub.as_deref(), body),
            (Method::PATCH, false) => self.patch(key, sub.as_deref(), &content_type, &body),
            (Method::DELETE, true) => self.delete_collection(&key, &params),
            (Method::DELETE, false) => match self.delete(key.clone()) {
                Some(obj) => respond(StatusCode::OK, &obj),
                None => not_found(&key),
            },
            (m, _) => status(405, "MethodNotAllowed", &format!("{m} {path}")),
        }
    }

    fn in_scope(key: &Key, k: &Key) -> bool {
        k.prefix == key.prefix
            && k.resource == key.resource
            && (key.namespace.is_none() || k.namespace == key.namespace)
    }

    fn list(&self, key: &Key, params: &BTreeMap<String, String>) -> Response<Body> {
        let s = self.state.lock().unwrap();
        let mut items = Vec::new();
        for (k, o) in &s.objects {
            if Self::in_scope(key, k) {
                match matches(o, params) {
                    Ok(true) => items.push(o.clone()),
                    Ok(false) => {}
                    Err(e) => return status(400, "BadRequest", &e),
                }
            }
        }
        respond(
            StatusCode::OK,
            &json!({"kind": format!("{}List", kind_of(&key.resource)),
                    "apiVersion": api_version(&key.prefix),
                    "metadata": {"resourceVersion": s.rv.to_string()},
                    "items": items}),
        )
    }

    /// Deletes every object of the collection the selectors pick; answers the list of them.
    fn delete_collection(&self, key: &Key, params: &BTreeMap<String, String>) -> Response<Body> {
        let picked: Vec<Key> = {
            let s = self.state.lock().unwrap();
            let mut picked = Vec::new();
            for (k, o) in &s.objects {
                if Self::in_scope(key, k) {
                    match matches(o, params) {
                        Ok(true) => picked.push(k.clone()),
                        Ok(false) => {}
                        Err(e) => return status(400, "BadRequest", &e),
                    }
                }
            }
            picked
        };
        let items: Vec<Value> = picked.into_iter().filter_map(|k| self.delete(k)).collect();
        let rv = self.state.lock().unwrap().rv;
        respond(
            StatusCode::OK,
            &json!({"kind": format!("{}List", kind_of(&key.resource)),
                    "apiVersion": api_version(&key.prefix),
                    "metadata": {"resourceVersion": rv.to_string()},
                    "items": items}),
        )
    }

    fn create(&self, mut key: Key, body: Value) -> Response<Body> {
        let Some(name) = body["metadata"]["name"].as_str() else {
            return status(422, "Invalid", "metadata.name: Required value");
        };
        key.name = name.to_string();
        let mut s = self.state.lock().unwrap();
        if s.objects.contains_key(&key) {
            return status(
                409,
                "AlreadyExists",
                &format!("{} \"{name}\" already exists", key.resource),
            );
        }
        let mut obj = body;
        if let Some(ns) = &key.namespace {
            obj["metadata"]["namespace"] = json!(ns);
        }
        if s.ready_nodes && key.resource == "nodes" {
            obj["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        }
        let stored = Self::store(&mut s, key, obj, "ADDED");
        drop(s);
        self.changed.notify_waiters();
        respond(StatusCode::CREATED, &stored)
    }

    /// Keeps `status` from `old` unless the write is to the status subresource, which
    /// changes nothing but `status`.
    fn scoped(old: &Value, mut new: Value, sub: Option<&str>) -> Value {
        match sub {
            Some("status") => {
                let mut out = old.clone();
                out["status"] = new["status"].take();
                out
            }
            _ => {
                if let Some(obj) = new.as_object_mut() {
                    match old.get("status") {
                        Some(s) => {
                            obj.insert("status".into(), s.clone());
                        }
                        None => {
                            obj.remove("status");
                        }
                    }
                }
                new
            }
        }
    }

    fn replace(&self, key: Key, sub: Option<&str>, body: Value) -> Response<Body> {
        let mut s = self.state.lock().unwrap();
        let Some(old) = s.objects.get(&key).cloned() else {
            return not_found(&key);
        };
        let sent_rv = body["metadata"]["resourceVersion"].as_str().unwrap_or("");
        if !sent_rv.is_empty() && sent_rv != old["metadata"]["resourceVersion"] {
            return status(409, "Conflict", "the object has been modified");
        }
        let new = Self::scoped(&old, body, sub);
        let stored = Self::store(&mut s, key, new, "MODIFIED");
        drop(s);
        self.changed.notify_waiters();
        respond(StatusCode::OK, &stored)
    }

    fn patch(
        &self,
        key: Key,
        sub: Option<&str>,
        content_type: &str,
        body: &Value,
    ) -> Response<Body> {
        let mut s = self.state.lock().unwrap();
        let apply = content_type.starts_with("application/apply-patch");
        let old = match s.objects.get(&key) {
            Some(o) => o.clone(),
            None if apply => json!({"metadata": {"name": key.name}}),
            None => return not_found(&key),
        };
        let mut new = old.clone();
        if content_type.starts_with("application/json-patch+json") {
            let p: json_patch::Patch = match serde_json::from_value(body.clone()) {
                Ok(p) => p,
                Err(e) => return status(400, "BadRequest", &e.to_string()),
            };
            if let Err(e) = json_patch::patch(&mut new, &p) {
                return status(422, "Invalid", &e.to_string());
            }
        } else {
            merge(&mut new, body);
        }
        let new = Self::scoped(&old, new, sub);
        let event = if s.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let stored = Self::store(&mut s, key, new, event);
        drop(s);
        self.changed.notify_waiters();
        respond(StatusCode::OK, &stored)
    }

    /// A watch from `resourceVersion` (or from now): one JSON event per line, as long as
    /// the client keeps the stream.
    fn watch(&self, key: Key, params: BTreeMap<String, String>) -> Response<Body> {
        let mut from: u64 = params
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| self.state.lock().unwrap().rv);
        // A streaming list (`sendInitialEvents=true`): what is there now as ADDED events,
        // then the bookmark that ends them, then the changes from now on.
        let mut initial = String::new();
        if params.get("sendInitialEvents").is_some_and(|v| v == "true") {
            let s = self.state.lock().unwrap();
            for (k, o) in &s.objects {
                if Self::in_scope(&key, k) && matches(o, &params).unwrap_or(false) {
                    initial.push_str(&format!("{}\n", json!({"type": "ADDED", "object": o})));
                }
            }
            from = s.rv;
            let end = json!({"type": "BOOKMARK", "object": {
                "kind": kind_of(&key.resource), "apiVersion": api_version(&key.prefix),
                "metadata": {"resourceVersion": from.to_string(),
                             "annotations": {"k8s.io/initial-events-end": "true"}}}});
            initial.push_str(&format!("{end}\n"));
        }
        let initial = futures::stream::iter(
            (!initial.is_empty()).then(|| Ok::<_, Infallible>(Frame::data(Bytes::from(initial)))),
        );
        let me = self.clone();
        let stream = futures::stream::unfold((me, from), move |(me, mut seen)| {
            let key = key.clone();
            let params = params.clone();
            async move {
                loop {
                    let changed = me.changed.clone();
                    let notified = changed.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    let batch: Vec<Value> = {
                        let s = me.state.lock().unwrap();
                        let out = s
                            .events
                            .iter()
                            .filter(|(rv, _, k, o)| {
                                *rv > seen
                                    && FakeApi::in_scope(&key, k)
                                    && matches(o, &params).unwrap_or(false)
                            })
                            .map(|(_, t, _, o)| json!({"type": t, "object": o}))
                            .collect();
                        seen = s.rv;
                        out
                    };
                    if !batch.is_empty() {
                        let text: String = batch.iter().map(|e| format!("{e}\n")).collect();
                        return Some((
                            Ok::<_, Infallible>(Frame::data(Bytes::from(text))),
                            (me, seen),
                        ));
                    }
                    notified.await;
                }
            }
        });
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(StreamBody::new(initial.chain(stream).boxed()).boxed_unsync())
            .unwrap()
    }
}

fn not_found(key: &Key) -> Response<Body> {
    status(
        404,
        "NotFound",
        &format!("{} \"{}\" not found", key.resource, key.name),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_object_and_subresource() {
        let (k, sub) = parse_path("/api/v1/namespaces/lab/pods/p-1/status").unwrap();
        assert_eq!(
            (
                k.prefix.as_str(),
                k.resource.as_str(),
                k.namespace.as_deref(),
                k.name.as_str()
            ),
            ("/api/v1", "pods", Some("lab"), "p-1")
        );
        assert_eq!(sub.as_deref(), Some("status"));
        let (k, _) = parse_path("/api/v1/namespaces/lab").unwrap();
        assert_eq!(
            (k.resource.as_str(), k.name.as_str(), k.namespace),
            ("namespaces", "lab", None)
        );
        let (k, _) = parse_path("/apis/nvidia.com/v1/clusterpolicies").unwrap();
        assert_eq!(
            (k.prefix.as_str(), k.name.as_str()),
            ("/apis/nvidia.com/v1", "")
        );
        assert_eq!(
            query_params("fieldSelector=metadata.name%3Dp-1&watch=true")["fieldSelector"],
            "metadata.name=p-1"
        );
    }

    #[test]
    fn playing_kwok_makes_a_created_node_ready_and_only_then() {
        let api = FakeApi::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_rt = rt.enter();
        let client = api.client();
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        let node = |name: &str| {
            serde_json::from_value::<k8s_openapi::api::core::v1::Node>(
                json!({"metadata": {"name": name}}),
            )
            .unwrap()
        };
        rt.block_on(nodes.create(&Default::default(), &node("a")))
            .unwrap();
        assert!(api.get("/api/v1/nodes/a").unwrap()["status"]["conditions"].is_null());
        api.ready_nodes();
        rt.block_on(nodes.create(&Default::default(), &node("b")))
            .unwrap();
        assert_eq!(
            api.get("/api/v1/nodes/b").unwrap()["status"]["conditions"][0],
            json!({"type": "Ready", "status": "True"})
        );
        // A second create of the same name is refused as the API server refuses it.
        let err = rt
            .block_on(nodes.create(&Default::default(), &node("b")))
            .unwrap_err();
        assert!(matches!(err, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"));
    }

    #[test]
    fn selectors_read_labels_and_any_field() {
        let o = json!({"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {}});
        let p = |sel: &str, val: &str| {
            let mut m = BTreeMap::new();
            m.insert(sel.to_string(), val.to_string());
            matches(&o, &m).unwrap()
        };
        assert!(p("labelSelector", "app=x"));
        assert!(!p("labelSelector", "app!=x"));
        assert!(p("fieldSelector", "spec.nodeName="));
        assert!(!p("fieldSelector", "metadata.name=q"));
        assert!(p("fieldSelector", "metadata.name=p,spec.nodeName="));
    }

    #[test]
    fn texts_and_collection_deletes_are_served_and_kinds_are_k8s_openapis() {
        let api = FakeApi::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_rt = rt.enter();
        let client = api.client();
        let get = |path: &str| {
            let req = http::Request::get(path).body(Vec::new()).unwrap();
            rt.block_on(client.request_text(req))
        };
        assert!(get("/readyz").is_err(), "nothing set: not served");
        api.text("/readyz", 200, "ok");
        assert_eq!(get("/readyz").unwrap(), "ok");
        api.text("/readyz", 500, "[-]etcd failed");
        assert!(get("/readyz").is_err());

        for (ns, name, app) in [("a", "p-1", "x"), ("a", "p-2", "y"), ("b", "p-3", "x")] {
            api.insert(
                "/api/v1",
                "pods",
                json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}}}),
            );
        }
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client.clone(), "a");
        let lp = kube::api::ListParams::default().labels("app=x");
        let gone = rt
            .block_on(pods.delete_collection(&Default::default(), &lp))
            .unwrap()
            .left()
            .unwrap();
        let names: Vec<_> = gone
            .items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, ["p-1"]);
        assert!(api.get("/api/v1/namespaces/a/pods/p-1").is_none());
        assert!(api.get("/api/v1/namespaces/a/pods/p-2").is_some());
        assert!(api.get("/api/v1/namespaces/b/pods/p-3").is_some());

        // Inserted without a kind, read back as the typed object.
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "a"}}),
        );
        let sa: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
            kube::Api::namespaced(client, "a");
        assert!(rt.block_on(sa.get("default")).is_ok());
        assert_eq!(kind_of("deviceclasses"), "DeviceClass");
        assert_eq!(kind_of("leases"), "Lease");
    }
}
