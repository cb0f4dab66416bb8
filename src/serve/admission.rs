//! The admission guard of `gpuwl serve --admission-listen`: a validating webhook the API
//! server calls (HTTPS, [`super::tls`]) with an `AdmissionReview` for each Pod,
//! VirtualMachineInstance and VirtualMachine created or updated; it answers from the
//! exporter's watch state ([`gpuwl_core::analysis::admission`]), without an API call.
//!
//! Answers (AdmissionReview `admission.k8s.io/v1`, kubernetes/api `admission/v1/types.go`):
//! - `warn` mode (default): `allowed: true` with one warning per finding; kubectl prints
//!   each as `Warning: …`;
//! - `enforce` mode: a finding whose cause can never pass on its own denies (`allowed:
//!   false`, status 403 with the findings; [`gpuwl_core::analysis::verdict::Verdict::permanent`]);
//!   a transient one (`stale-only`: a device plugin restarting) is admitted with its warning,
//!   and so is an `unadvertised-name` or `too-large` one when every GPU resource the object
//!   asks is one autoscaling can bring ([`Autoscaled`], `--admission-autoscaled`: a pod
//!   that makes cluster-autoscaler or Karpenter add a GPU node must not be denied);
//! - another kind, an operation other than CREATE/UPDATE, an UPDATE that leaves the spec
//!   as it was, an object the reader cannot read, or any review before the initial lists
//!   are in: `allowed: true`, no warning;
//! - a body that is not an AdmissionReview with a `request.uid`: HTTP 400 (the API server
//!   counts that as a failed call and, with `failurePolicy: Ignore`, admits the object);
//!   a body over [`MAX_REVIEW`] bytes: HTTP 413.
//!
//! `--admission-register` applies a ValidatingWebhookConfiguration ([`configuration`]) with
//! the CA of the generated certificate as `caBundle`, and deletes it when serve stops.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, Status};
use serde_json::{Value, json};

use crate::serve::watch::{Shared, lock};
use gpuwl_core::analysis::admission::{self, Warning};

/// The largest AdmissionReview accepted, in bytes: an object may be up to 1.5 MiB in etcd
/// (`--max-request-bytes` of etcd, kubernetes `staging/src/k8s.io/apiserver/pkg/storage/etcd3`)
/// and an UPDATE carries it twice, with the JSON envelope around.
pub(crate) const MAX_REVIEW: usize = 4 * 1024 * 1024;

/// The longest denial message, in characters.
pub(crate) const MAX_DENIAL: usize = 1024;

/// The webhook's name in the configuration (a qualified name, as the API requires).
pub(crate) const WEBHOOK_NAME: &str = "gpu-requests.gpuwl.io";

/// The default name of the ValidatingWebhookConfiguration `--admission-register` applies.
pub const CONFIGURATION_NAME: &str = "gpuwl-admission";

/// What the guard does with a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Admit the object; each finding is a warning kubectl prints.
    Warn,
    /// Deny the object when there is a finding.
    Enforce,
}

pub use crate::serve::metrics::Verdict;
use gpuwl_core::analysis::diagnosis::CauseCode;
use gpuwl_core::analysis::verdict;
use gpuwl_core::text;

impl Verdict {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Warned => "warned",
            Verdict::Denied => "denied",
            Verdict::Skipped => "skipped",
            Verdict::Invalid => "invalid",
        }
    }
}

/// The answer to one HTTP request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON body (an AdmissionReview), or a plain-text reason for 400/413.
    pub body: String,
    /// How it ended.
    pub verdict: Verdict,
    /// The object's kind (`Pod`, …, or `other`), for the metrics.
    pub kind: &'static str,
    /// The findings' codes.
    pub codes: Vec<&'static str>,
}

fn bad(why: &str) -> Answer {
    Answer {
        status: StatusCode::BAD_REQUEST,
        body: format!("not an AdmissionReview: {}\n", text::one_line(why)),
        verdict: Verdict::Invalid,
        kind: "other",
        codes: Vec::new(),
    }
}

/// The AdmissionReview's request, decoded with [`kube::core::admission`]: the body must
/// be JSON, `apiVersion` `admission.k8s.io/v1` (or `v1beta1`), `kind` `AdmissionReview`,
/// with a `request` whose `uid` is 1-128 characters, `kind` and `operation` (one of the
/// four the API defines). `resource` and `userInfo`, which the API server always sends and
/// the guard does not read, may be absent; an `object` or `oldObject` that is not a JSON
/// object is read as absent (not judged).
///
/// Errors: one line saying what is wrong, for the HTTP 400 answer, that quotes nothing of
/// the input ([`no_echo`]).
fn decode(body: &[u8]) -> std::result::Result<AdmissionRequest<DynamicObject>, String> {
    let cut = no_echo;
    let mut review: Value = serde_json::from_slice(body).map_err(cut)?;
    let api_version = review.get("apiVersion").and_then(Value::as_str);
    if !matches!(
        api_version,
        Some("admission.k8s.io/v1" | "admission.k8s.io/v1beta1")
    ) || review.get("kind").and_then(Value::as_str) != Some("AdmissionReview")
    {
        return Err("expected apiVersion admission.k8s.io/v1, kind AdmissionReview".into());
    }
    let Some(request) = review.get_mut("request").filter(|r| !r.is_null()) else {
        return Err("no request".into());
    };
    let uid: String =
        serde_json::from_value(request.get("uid").cloned().unwrap_or(Value::Null)).map_err(cut)?;
    if uid.is_empty() || uid.len() > 128 {
        return Err("request.uid: expected 1-128 characters".into());
    }
    if let Value::Object(r) = request {
        for field in ["object", "oldObject"] {
            if r.get(field).is_some_and(|o| !o.is_object()) {
                r.remove(field);
            }
        }
        // The guard reads neither; a review without them (written by hand, not by the API
        // server) is judged as before.
        r.entry("resource")
            .or_insert_with(|| json!({"group": "", "version": "", "resource": ""}));
        r.entry("userInfo").or_insert_with(|| json!({}));
    }
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).map_err(cut)?;
    review.try_into().map_err(|_| "no request".to_string())
}

/// A serde_json error as a 400 answer says it, without any of the input: a syntax or EOF
/// message as serde_json writes it (those name what was expected and where, never the
/// bytes found); a type or value error (`invalid type: string "…"`, `unknown variant
/// `…``, which quote the value) as a fixed sentence with the line and column when known.
fn no_echo(e: serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Data => {
            let at = if e.line() > 0 {
                format!(" at line {} column {}", e.line(), e.column())
            } else {
                String::new()
            };
            format!(
                "a field has the wrong type or value{at} (request.uid, kind, operation, object)"
            )
        }
        _ => e.to_string(),
    }
}

/// The AdmissionReview answering with `response`, as JSON: kube writes `status` always
/// (empty when allowed); it is left out then, as the API server reads it only on a denial.
fn review_body(response: AdmissionResponse) -> String {
    let mut review = serde_json::to_value(response.into_review()).unwrap_or(Value::Null);
    if let Some(r) = review.get_mut("response").and_then(Value::as_object_mut)
        && r.get("status")
            .is_some_and(|s| s.as_object().is_some_and(|m| m.is_empty()))
    {
        r.remove("status");
    }
    review.to_string()
}

/// A GPU resource a node that autoscaling adds can advertise (`--admission-autoscaled
/// NAME[=UNITS]`): its name, and the most units one such node has (`None`: any number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autoscaled {
    /// The resource name, e.g. `nvidia.com/gpu`.
    pub name: String,
    /// The most units one new node advertises.
    pub units: Option<i64>,
}

impl std::str::FromStr for Autoscaled {
    type Err = String;

    /// `NAME` or `NAME=UNITS` (UNITS a positive integer).
    ///
    /// Errors: an empty name, or units that are not a positive integer.
    fn from_str(s: &str) -> std::result::Result<Autoscaled, String> {
        let (name, units) = match s.split_once('=') {
            Some((n, u)) => (n, Some(u)),
            None => (s, None),
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("expected NAME[=UNITS], e.g. nvidia.com/gpu=8".into());
        }
        let units = units
            .map(|u| u.parse::<i64>().ok().filter(|n| *n > 0))
            .map(|u| u.ok_or("UNITS: expected a positive integer"))
            .transpose()?;
        Ok(Autoscaled {
            name: name.to_owned(),
            units,
        })
    }
}

/// The GPU resources Karpenter's NodePools (`nodepools.karpenter.sh/v1`) can bring: every
/// extended resource (a name with a `/`) a NodePool caps in `spec.limits`, e.g.
/// `nvidia.com/gpu: 64` (a pool's total, so no units per node: any). Empty when the API
/// serves no NodePools, the list is refused or takes over 10 s. Read once, when the guard
/// starts: a NodePool added later counts after a restart.
pub async fn karpenter_autoscaled(client: &kube::Client) -> Vec<Autoscaled> {
    use kube::api::{Api, ApiResource, ListParams};
    use kube::core::GroupVersionKind;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let listed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        api.list(&ListParams::default()),
    )
    .await;
    let Ok(Ok(list)) = listed else {
        return Vec::new();
    };
    autoscaled_of_nodepools(list.items.iter().map(|o| &o.data))
}

/// [`karpenter_autoscaled`] of NodePool objects: the extended resources of their
/// `spec.limits`, once each, sorted.
fn autoscaled_of_nodepools<'a>(pools: impl Iterator<Item = &'a Value>) -> Vec<Autoscaled> {
    let names: std::collections::BTreeSet<String> = pools
        .filter_map(|p| p.pointer("/spec/limits").and_then(Value::as_object))
        .flat_map(|limits| limits.keys())
        .filter(|k| k.contains('/') && !k.chars().any(char::is_control))
        .cloned()
        .collect();
    names
        .into_iter()
        .map(|name| Autoscaled { name, units: None })
        .collect()
}

/// What the guard found of cluster-autoscaler (kubernetes/autoscaler `cluster-autoscaler/`)
/// when it started ([`cluster_autoscaler`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ClusterAutoscaler {
    /// How it was found: `Deployment NS/NAME`, `ConfigMap kube-system/cluster-autoscaler-status`.
    pub found_by: Vec<String>,
    /// The node groups its status ConfigMap names (`nodeGroups[].name`), in its order.
    pub node_groups: Vec<String>,
    /// The GPU resources its Cluster API node groups' templates bring, each with the
    /// units one new node has.
    pub autoscaled: Vec<Autoscaled>,
}

/// The name of cluster-autoscaler's status ConfigMap, in the namespace it runs in
/// (kube-system by default; kubernetes/autoscaler
/// `cluster-autoscaler/clusterstate/utils/status.go`, `StatusConfigMapName`, data key
/// `status`).
pub(crate) const CA_STATUS_CONFIGMAP: &str = "cluster-autoscaler-status";

/// The annotations of a Cluster API MachineDeployment or MachineSet that say what one node
/// of the node group has, for scale from zero (kubernetes/autoscaler
/// `cluster-autoscaler/cloudprovider/clusterapi/clusterapi_unstructured.go`: `gpuTypeKey`,
/// `gpuCountKey`): the GPU's resource name (e.g. `nvidia.com/gpu`) and its count.
const CA_GPU_TYPE: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-type";
/// See [`CA_GPU_TYPE`].
const CA_GPU_COUNT: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-count";
/// The suffix of the annotation that makes a Cluster API MachineDeployment or MachineSet a
/// node group cluster-autoscaler may grow (`<CAPI group>/cluster-api-autoscaler-node-group-
/// max-size`, the group `cluster.x-k8s.io` unless `CAPI_GROUP` says otherwise;
/// `cluster-autoscaler/cloudprovider/clusterapi/clusterapi_utils.go`).
const CA_MAX_SIZE_SUFFIX: &str = "/cluster-api-autoscaler-node-group-max-size";

/// Finds cluster-autoscaler on the cluster: a Deployment in kube-system that is one (its
/// name or a container image says `cluster-autoscaler`), or its status ConfigMap
/// kube-system/cluster-autoscaler-status; then what its node groups can bring: the Cluster
/// API MachineDeployments and MachineSets it may grow (`cluster.x-k8s.io` v1beta1 and
/// v1beta2) whose scale-from-zero annotations name a GPU resource and count. A node group
/// of a cloud provider (an AWS Auto Scaling group, a GCE instance group) keeps its template
/// in the cloud, which gpuwl cannot read: `autoscaled` is then empty and the caller says
/// to list the names with `--admission-autoscaled`. `None` when neither the Deployment nor
/// the ConfigMap is there (or cannot be read within 10 s). Read once, at start.
pub(crate) async fn cluster_autoscaler(client: &kube::Client) -> Option<ClusterAutoscaler> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams};
    let within = std::time::Duration::from_secs(10);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let (deps, status) = tokio::time::timeout(within, async {
        (
            deployments.list(&ListParams::default()).await,
            maps.get_opt(CA_STATUS_CONFIGMAP).await,
        )
    })
    .await
    .ok()?;
    let mut found = ClusterAutoscaler::default();
    for d in deps.map(|l| l.items).unwrap_or_default() {
        let v = serde_json::to_value(&d).unwrap_or_default();
        if is_cluster_autoscaler(&v) {
            found.found_by.push(format!(
                "Deployment kube-system/{}",
                d.metadata.name.unwrap_or_default()
            ));
        }
    }
    if let Ok(Some(cm)) = status {
        found
            .found_by
            .push(format!("ConfigMap kube-system/{CA_STATUS_CONFIGMAP}"));
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get("status"))
            .cloned()
            .unwrap_or_default();
        found.node_groups = status_node_groups(&text);
    }
    if found.found_by.is_empty() {
        return None;
    }
    let mut templates: Vec<Value> = Vec::new();
    for version in ["v1beta1", "v1beta2"] {
        for (kind, plural) in [
            ("MachineDeployment", "machinedeployments"),
            ("MachineSet", "machinesets"),
        ] {
            templates.extend(capi_list(client, version, kind, plural, within).await);
        }
    }
    found.autoscaled = autoscaled_of_machine_templates(templates.iter());
    Some(found)
}

/// The objects of one Cluster API kind, every namespace; empty when the API does not serve
/// it, refuses, or takes longer than `within`.
async fn capi_list(
    client: &kube::Client,
    version: &str,
    kind: &str,
    plural: &str,
    within: std::time::Duration,
) -> Vec<Value> {
    use kube::api::{Api, ApiResource, ListParams};
    use kube::core::GroupVersionKind;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", version, kind),
        plural,
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    match tokio::time::timeout(within, api.list(&ListParams::default())).await {
        Ok(Ok(list)) => list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether a Deployment (as JSON) is cluster-autoscaler: its name, or the last path part
/// of a container's image, starts with `cluster-autoscaler` (the upstream image is
/// `registry.k8s.io/autoscaling/cluster-autoscaler:vX`; charts name the Deployment
/// `cluster-autoscaler` or `<release>-cluster-autoscaler`, so the name may also end with it).
fn is_cluster_autoscaler(d: &Value) -> bool {
    let name = d
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let by_name = name.starts_with("cluster-autoscaler") || name.ends_with("-cluster-autoscaler");
    let by_image = d
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["image"].as_str())
        .any(|image| {
            image
                .rsplit('/')
                .next()
                .is_some_and(|last| last.starts_with("cluster-autoscaler"))
        });
    by_name || by_image
}

/// The node-group names of cluster-autoscaler's status text: `nodeGroups[].name` of the YAML
/// it writes since v1.30 (`cluster-autoscaler/clusterstate/api/types.go`,
/// `ClusterAutoscalerStatus`), else the `Name:` lines under `NodeGroups:` of the text it
/// wrote before; each once, escaped names never needed (shown through `text::esc`).
fn status_node_groups(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Ok(v) = serde_saphyr::from_str::<Value>(text)
        && let Some(groups) = v.get("nodeGroups").and_then(Value::as_array)
    {
        out.extend(
            groups
                .iter()
                .filter_map(|g| g.get("name").and_then(Value::as_str))
                .map(str::to_owned),
        );
    } else if let Some((_, groups)) = text.split_once("NodeGroups:") {
        out.extend(
            groups
                .lines()
                .filter_map(|l| l.trim().strip_prefix("Name:"))
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty()),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|n| seen.insert(n.clone()));
    out
}

/// The GPU resources Cluster API node groups bring: every MachineDeployment or MachineSet
/// that cluster-autoscaler may grow (a `…/cluster-api-autoscaler-node-group-max-size`
/// annotation above 0) and whose [`CA_GPU_TYPE`] names an extended resource with a
/// positive [`CA_GPU_COUNT`]: that name, with the most units one node of any such group
/// has. Sorted by name.
fn autoscaled_of_machine_templates<'a>(objs: impl Iterator<Item = &'a Value>) -> Vec<Autoscaled> {
    let mut most: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for o in objs {
        let Some(a) = o
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            continue;
        };
        let grows = a.iter().any(|(k, v)| {
            k.ends_with(CA_MAX_SIZE_SUFFIX)
                && v.as_str()
                    .and_then(|s| s.trim().parse::<i64>().ok())
                    .is_some_and(|n| n > 0)
        });
        let name = a.get(CA_GPU_TYPE).and_then(Value::as_str).map(str::trim);
        let count = a
            .get(CA_GPU_COUNT)
            .and_then(Value::as_str)
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|n| *n > 0);
        if let (true, Some(name), Some(count)) = (grows, name, count)
            && name.contains('/')
            && !name.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            let e = most.entry(name.to_owned()).or_default();
            *e = (*e).max(count);
        }
    }
    most.into_iter()
        .map(|(name, units)| Autoscaled {
            name,
            units: Some(units),
        })
        .collect()
}

/// Whether autoscaling can serve all `requests` (resource → units) that have a vendor
/// domain (`nvidia.com/…`): each one listed in `autoscaled`, within its units. `false`
/// without such a request.
fn autoscaling_serves(
    requests: &std::collections::BTreeMap<String, i64>,
    autoscaled: &[Autoscaled],
) -> bool {
    let mut extended = requests.iter().filter(|(k, _)| k.contains('/')).peekable();
    extended.peek().is_some()
        && extended.all(|(name, units)| {
            autoscaled
                .iter()
                .any(|a| a.name == *name && a.units.is_none_or(|max| *units <= max))
        })
}

/// Judges one request body against `index` in `mode`. Never panics on any input; see the
/// module docs for the answers.
pub fn answer(body: &[u8], index: &admission::Index, mode: Mode) -> Answer {
    answer_with(body, index, mode, &[])
}

/// [`answer`], with the GPU resources autoscaling can bring: in enforce mode an
/// `unadvertised-name` or `too-large` finding is transient (admitted with its warning)
/// when [`autoscaling_serves`] the object's requests.
pub(crate) fn answer_with(
    body: &[u8],
    index: &admission::Index,
    mode: Mode,
    autoscaled: &[Autoscaled],
) -> Answer {
    let request = match decode(body) {
        Ok(r) => r,
        Err(why) => return bad(&why),
    };
    let kind = match (request.kind.group.as_str(), request.kind.kind.as_str()) {
        ("", "Pod") => "Pod",
        ("kubevirt.io", "VirtualMachineInstance") => "VirtualMachineInstance",
        ("kubevirt.io", "VirtualMachine") => "VirtualMachine",
        _ => "other",
    };
    let respond = |verdict: Verdict, findings: &[Warning]| {
        let mut response = AdmissionResponse::from(&request);
        let lines: Vec<String> = findings.iter().map(Warning::line).collect();
        match verdict {
            Verdict::Warned => response.warnings = Some(lines),
            Verdict::Denied => {
                let mut message = lines.join("; ");
                if message.chars().count() > MAX_DENIAL {
                    message = message.chars().take(MAX_DENIAL - 1).collect::<String>() + "…";
                }
                response.allowed = false;
                response.result = Status {
                    code: 403,
                    reason: "Forbidden".into(),
                    message,
                    ..Status::default()
                };
            }
            _ => {}
        }
        Answer {
            status: StatusCode::OK,
            body: review_body(response),
            verdict,
            kind,
            codes: findings.iter().map(|w| w.code.as_str()).collect(),
        }
    };
    let judged = kind != "other"
        && matches!(request.operation, Operation::Create | Operation::Update)
        && request.object.is_some()
        && index.synced;
    let Some(object) = request.object.as_ref().filter(|_| judged) else {
        return respond(Verdict::Skipped, &[]);
    };
    // An UPDATE that leaves the spec alone (labels, annotations, finalizers) is not
    // judged again: the object was judged when its spec was written.
    let spec = |o: Option<&DynamicObject>| o.and_then(|o| o.data.get("spec")).cloned();
    if request.operation == Operation::Update
        && spec(Some(object)) == spec(request.old_object.as_ref())
    {
        return respond(Verdict::Skipped, &[]);
    }
    let mut object = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut object {
        m.insert("kind".into(), Value::String(kind.into()));
    }
    let Ok(pod) = gpuwl_core::decode::pods::from_object(&object) else {
        return respond(Verdict::Skipped, &[]);
    };
    let findings = admission::review(&pod, index);
    // Enforce mode denies only what can never run (explain's verdict: a permanent
    // unservable or invalid cause); a transient one (a device plugin restarting lists its
    // name with "0" for a moment, operands rolling) is admitted with its warning.
    let scalable = autoscaling_serves(&pod.requests, autoscaled);
    let permanent = findings.iter().any(|w| {
        verdict::verdict(w.code, false).permanent()
            && !(scalable && matches!(w.code, CauseCode::UnadvertisedName | CauseCode::TooLarge))
    });
    let verdict = match (findings.is_empty(), mode) {
        (true, _) => Verdict::Allowed,
        (false, Mode::Enforce) if permanent => Verdict::Denied,
        (false, _) => Verdict::Warned,
    };
    respond(verdict, &findings)
}

/// What the admission server's handlers share.
pub struct Guard {
    /// The exporter's state (its index and metrics).
    pub shared: Arc<Shared>,
    /// Warn or enforce.
    pub mode: Mode,
    /// The GPU resources autoscaling can bring (`--admission-autoscaled`).
    pub autoscaled: Vec<Autoscaled>,
}

/// The admission server's routes: `POST /validate`, `GET /healthz`.
pub fn router(guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(DefaultBodyLimit::max(MAX_REVIEW))
        .with_state(guard)
}

async fn validate(
    State(guard): State<Arc<Guard>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let started = Instant::now();
    let body = match body {
        Ok(b) => b,
        Err(rejection) => {
            guard.shared.metrics.admission_review(
                "other",
                Verdict::Invalid,
                &[],
                started.elapsed(),
            );
            return rejection.into_response();
        }
    };
    let index = lock(&guard.shared.admission).clone();
    let a = answer_with(&body, &index, guard.mode, &guard.autoscaled);
    guard
        .shared
        .metrics
        .admission_review(a.kind, a.verdict, &a.codes, started.elapsed());
    let content_type = if a.status == StatusCode::OK {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    (a.status, [(header::CONTENT_TYPE, content_type)], a.body).into_response()
}

/// The ValidatingWebhookConfiguration `name` for `client_config` (a `url` or a `service`
/// with `caBundle`), as `--admission-register` applies it and `deploy/admission/` ships
/// it: Pods, VMIs and VMs on CREATE and UPDATE; `failurePolicy: Ignore` (the guard never
/// blocks the cluster when it is down); `timeoutSeconds: 5`; `sideEffects: None` (so
/// `kubectl apply --dry-run=server` asks it too); every namespace but `skip`.
pub fn configuration(name: &str, client_config: Value, skip: &[&str]) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "gpuwl", "app.kubernetes.io/component": "admission"},
        },
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config,
            "rules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["pods"], "scope": "Namespaced"},
                {"apiGroups": ["kubevirt.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["virtualmachineinstances", "virtualmachines"], "scope": "Namespaced"},
            ],
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": skip,
            }]},
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuwl_core::model::node::NodeInfo;

    fn index() -> admission::Index {
        let mut n = NodeInfo::named("lab-node-1");
        n.labels.insert(
            gpuwl_core::model::workload::LABEL_KEY.into(),
            "vm-passthrough".into(),
        );
        n.capacity
            .insert("nvidia.com/GA102GL_A10".into(), "2".into());
        n.allocatable = Some(n.capacity.clone());
        admission::Index::build(&[n], None, None)
    }

    /// An AdmissionReview as the API server sends it (admission/v1 `AdmissionRequest`:
    /// `resource` and `userInfo` are required beside `kind` and `operation`).
    fn review(kind: &str, group: &str, op: &str, object: Value) -> Vec<u8> {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": "pods"},
                "operation": op,
                "userInfo": {"username": "system:serviceaccount:default:ci"},
                "object": object,
            }
        })
        .to_string()
        .into_bytes()
    }

    fn pod(resource: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}]}})
    }

    fn body(a: &Answer) -> Value {
        serde_json::from_str(&a.body).unwrap()
    }

    #[test]
    fn karpenter_nodepools_name_the_gpu_resources_they_cap() {
        let pools = [
            json!({"spec": {"limits": {"cpu": "1000", "nvidia.com/gpu": "64"}}}),
            json!({"spec": {"limits": {"nvidia.com/gpu": "8", "amd.com/gpu": 4}}}),
            json!({"spec": {"template": {}}}),
        ];
        assert_eq!(
            autoscaled_of_nodepools(pools.iter()),
            [
                Autoscaled {
                    name: "amd.com/gpu".into(),
                    units: None
                },
                Autoscaled {
                    name: "nvidia.com/gpu".into(),
                    units: None
                }
            ]
        );
    }

    #[test]
    fn cluster_autoscaler_is_found_by_its_deployment_or_status_and_its_capi_groups_read() {
        use crate::testing::{FakeApi, rt};
        let rt = rt();
        let _in = rt.enter();
        // Nothing of it: None, whatever else runs in kube-system.
        let api = FakeApi::new();
        api.insert(
            "/apis/apps/v1",
            "deployments",
            json!({"metadata": {"name": "coredns", "namespace": "kube-system"},
                   "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/coredns/coredns:v1.12"}]}}}}),
        );
        assert_eq!(rt.block_on(cluster_autoscaler(&api.client())), None);
        // Its Deployment (found by image), its status ConfigMap (YAML, v1.30+), a GPU
        // MachineDeployment it may grow from zero, one it may not (no max size), one
        // without a GPU.
        api.insert(
            "/apis/apps/v1",
            "deployments",
            json!({"metadata": {"name": "ca", "namespace": "kube-system"},
                   "spec": {"template": {"spec": {"containers": [{"name": "c",
                   "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.1"}]}}}}),
        );
        api.insert(
            "/api/v1",
            "configmaps",
            json!({"metadata": {"name": CA_STATUS_CONFIGMAP, "namespace": "kube-system"},
                   "data": {"status": "time: now\nautoscalerStatus: Running\nnodeGroups:\n  - name: \"MachineDeployment/ml/gpu-h100\"\n    health: {status: Healthy, minSize: 0, maxSize: 4}\n  - name: \"MachineDeployment/ml/cpu\"\n"}}),
        );
        let md = |name: &str, annotations: Value| {
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                   "metadata": {"name": name, "namespace": "ml", "annotations": annotations}})
        };
        let capi = "/apis/cluster.x-k8s.io/v1beta1";
        api.insert(
            capi,
            "machinedeployments",
            md(
                "gpu-h100",
                json!({"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
                       "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "4",
                       CA_GPU_TYPE: "nvidia.com/gpu", CA_GPU_COUNT: "8"}),
            ),
        );
        api.insert(
            capi,
            "machinedeployments",
            md(
                "fixed-a10",
                json!({CA_GPU_TYPE: "nvidia.com/NVIDIA_A10", CA_GPU_COUNT: "1"}),
            ),
        );
        api.insert(
            capi,
            "machinedeployments",
            md(
                "cpu",
                json!({"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "10"}),
            ),
        );
        let ca = rt.block_on(cluster_autoscaler(&api.client())).unwrap();
        assert_eq!(
            ca.found_by,
            [
                "Deployment kube-system/ca",
                "ConfigMap kube-system/cluster-autoscaler-status"
            ]
        );
        assert_eq!(
            ca.node_groups,
            ["MachineDeployment/ml/gpu-h100", "MachineDeployment/ml/cpu"]
        );
        assert_eq!(
            ca.autoscaled,
            [Autoscaled {
                name: "nvidia.com/gpu".into(),
                units: Some(8)
            }]
        );
        // Enforce mode: a pod asking 8 of nvidia.com/gpu, which no node advertises, is
        // denied alone and admitted with the groups read (a new node
        // of gpu-h100 has 8), one asking 9 is not.
        let ix = index();
        let asks = |units: &str| {
            let mut p = pod("nvidia.com/gpu");
            p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!(units);
            review("Pod", "", "CREATE", p)
        };
        let eight = answer(&asks("8"), &ix, Mode::Enforce);
        assert_eq!(eight.verdict, Verdict::Denied, "{:?}", eight.codes);
        let eight = answer_with(&asks("8"), &ix, Mode::Enforce, &ca.autoscaled);
        assert_ne!(eight.verdict, Verdict::Denied, "{:?}", eight.codes);
        let nine = answer_with(&asks("9"), &ix, Mode::Enforce, &ca.autoscaled);
        assert_eq!(nine.verdict, Verdict::Denied);
        // Found by its status ConfigMap alone (the Deployment elsewhere), the text format
        // before v1.30.
        let api = FakeApi::new();
        api.insert(
            "/api/v1",
            "configmaps",
            json!({"metadata": {"name": CA_STATUS_CONFIGMAP, "namespace": "kube-system"},
                   "data": {"status": "Cluster-autoscaler status at 2024-01-01 00:00:00:\nCluster-wide:\n  Health: Healthy\nNodeGroups:\n  Name:        eks-gpu-1a2b\n  Health:      Healthy (ready=0)\n"}}),
        );
        let ca = rt.block_on(cluster_autoscaler(&api.client())).unwrap();
        assert_eq!(
            ca.found_by,
            ["ConfigMap kube-system/cluster-autoscaler-status"]
        );
        assert_eq!(ca.node_groups, ["eks-gpu-1a2b"]);
        assert!(ca.autoscaled.is_empty());
    }

    #[test]
    fn a_deployment_is_cluster_autoscaler_by_name_or_image() {
        let d = |name: &str, image: &str| {
            json!({"metadata": {"name": name},
                   "spec": {"template": {"spec": {"containers": [{"image": image}]}}}})
        };
        assert!(is_cluster_autoscaler(&d("cluster-autoscaler", "x")));
        assert!(is_cluster_autoscaler(&d("prod-cluster-autoscaler", "x")));
        assert!(is_cluster_autoscaler(&d(
            "scaler",
            "registry.k8s.io/autoscaling/cluster-autoscaler-amd64:v1.21.0"
        )));
        assert!(!is_cluster_autoscaler(&d(
            "karpenter",
            "public.ecr.aws/karpenter/controller"
        )));
        assert!(!is_cluster_autoscaler(&d(
            "my-autoscaler",
            "example.com/cluster-autoscaler-docs/x"
        )));
    }

    #[test]
    fn enforce_mode_admits_what_autoscaling_can_bring_and_denies_the_rest() {
        let ix = index();
        let asks = |resource: &str, units: &str| {
            let mut p = pod(resource);
            p["spec"]["containers"][0]["resources"]["limits"][resource] = json!(units);
            review("Pod", "", "CREATE", p)
        };
        let scaled: Vec<Autoscaled> = ["nvidia.com/NVIDIA_H100_80GB=8", "nvidia.com/GA102GL_A10"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        // No node advertises the H100 name: denied without autoscaling …
        let h100 = asks("nvidia.com/NVIDIA_H100_80GB", "4");
        let a = answer(&h100, &ix, Mode::Enforce);
        assert_eq!(a.verdict, Verdict::Denied);
        assert_eq!(a.codes, ["unadvertised-name"]);
        // … admitted with the same warning when autoscaling brings such nodes (scale from
        // zero), unless it asks more than one new node has.
        let a = answer_with(&h100, &ix, Mode::Enforce, &scaled);
        assert_eq!(a.verdict, Verdict::Warned);
        assert_eq!(a.codes, ["unadvertised-name"]);
        let big = asks("nvidia.com/NVIDIA_H100_80GB", "9");
        assert_eq!(
            answer_with(&big, &ix, Mode::Enforce, &scaled).verdict,
            Verdict::Denied
        );
        // More A10s than the largest current node (2): too-large, transient when listed.
        let a10 = asks("nvidia.com/GA102GL_A10", "6");
        assert_eq!(answer(&a10, &ix, Mode::Enforce).codes, ["too-large"]);
        assert_eq!(answer(&a10, &ix, Mode::Enforce).verdict, Verdict::Denied);
        assert_eq!(
            answer_with(&a10, &ix, Mode::Enforce, &scaled).verdict,
            Verdict::Warned
        );
        // A typo is no autoscaling's: still denied.
        let typo = asks("nvidia.com/GA102GL_A1", "1");
        assert_eq!(
            answer_with(&typo, &ix, Mode::Enforce, &scaled).verdict,
            Verdict::Denied
        );
        // The flag's syntax.
        assert_eq!(
            "nvidia.com/gpu=8".parse::<Autoscaled>(),
            Ok(Autoscaled {
                name: "nvidia.com/gpu".into(),
                units: Some(8)
            })
        );
        assert!("nvidia.com/gpu=0".parse::<Autoscaled>().is_err());
        assert!("=4".parse::<Autoscaled>().is_err());
    }

    #[test]
    fn warn_mode_admits_with_the_warning_and_enforce_denies() {
        let a = answer(
            &review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A1")),
            &index(),
            Mode::Warn,
        );
        assert_eq!((a.status, a.verdict), (StatusCode::OK, Verdict::Warned));
        let b = body(&a);
        assert_eq!(b["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(b["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(b["response"]["allowed"], true);
        assert_eq!(
            b["response"]["warnings"],
            json!([
                "gpuwl unadvertised-name: spec.containers[0].resources.limits: no node advertises nvidia.com/GA102GL_A1; did you mean nvidia.com/GA102GL_A10 (1 edit away)?"
            ])
        );
        let d = answer(
            &review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A1")),
            &index(),
            Mode::Enforce,
        );
        let b = body(&d);
        assert_eq!(d.verdict, Verdict::Denied);
        assert_eq!(b["response"]["allowed"], false);
        assert_eq!(b["response"]["status"]["code"], 403);
        assert!(
            b["response"]["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("gpuwl unadvertised-name: spec.containers[0]")
        );
        assert_eq!(d.codes, ["unadvertised-name"]);
        // A correct pod: allowed, no warnings field.
        let ok = answer(
            &review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A10")),
            &index(),
            Mode::Enforce,
        );
        assert_eq!(ok.verdict, Verdict::Allowed);
        assert_eq!(
            body(&ok)["response"],
            json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
        );
    }

    #[test]
    fn enforce_mode_admits_a_transient_stale_only_with_its_warning() {
        // A device plugin restarting: the node lists its name with "0" for a moment. The
        // launcher pod is warned, never denied: the wait passes on its own.
        let mut n = NodeInfo::named("lab-node-1");
        n.capacity
            .insert("nvidia.com/GA102GL_A10".into(), "0".into());
        n.allocatable = Some(n.capacity.clone());
        let ix = admission::Index::build(&[n], None, None);
        let mut launcher = pod("nvidia.com/GA102GL_A10");
        launcher["metadata"]["name"] = json!("virt-launcher-vm-a-abcde");
        let a = answer(&review("Pod", "", "CREATE", launcher), &ix, Mode::Enforce);
        assert_eq!((a.status, a.verdict), (StatusCode::OK, Verdict::Warned));
        assert_eq!(a.codes, ["stale-only"]);
        assert_eq!(body(&a)["response"]["allowed"], true);
        // The same index denies a name nobody lists: that can never run.
        let d = answer(
            &review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A1O")),
            &ix,
            Mode::Enforce,
        );
        assert_eq!(d.verdict, Verdict::Denied);
    }

    #[test]
    fn what_is_not_judged_is_allowed_without_warnings() {
        let ix = index();
        for (kind, group, op, object) in [
            ("ConfigMap", "", "CREATE", json!({"data": {}})),
            ("Pod", "example.com", "CREATE", pod("nvidia.com/GA102GL_A1")),
            ("Pod", "", "DELETE", pod("nvidia.com/GA102GL_A1")),
            ("Pod", "", "CONNECT", Value::Null),
            ("Pod", "", "CREATE", json!("a string")),
            // Unreadable: a limit that is not a quantity.
            (
                "Pod",
                "",
                "CREATE",
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "four"}}}]}}),
            ),
        ] {
            let a = answer(&review(kind, group, op, object), &ix, Mode::Enforce);
            assert_eq!(
                (a.status, a.verdict),
                (StatusCode::OK, Verdict::Skipped),
                "{kind} {op}"
            );
            assert_eq!(body(&a)["response"]["allowed"], true);
            assert!(body(&a)["response"].get("warnings").is_none());
        }
        // Before the initial lists are in.
        let a = answer(
            &review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A1")),
            &admission::Index::default(),
            Mode::Enforce,
        );
        assert_eq!(a.verdict, Verdict::Skipped);
        // An UPDATE that keeps the spec.
        let mut r: Value =
            serde_json::from_slice(&review("Pod", "", "UPDATE", pod("nvidia.com/GA102GL_A1")))
                .unwrap();
        r["request"]["oldObject"] = pod("nvidia.com/GA102GL_A1");
        let a = answer(r.to_string().as_bytes(), &ix, Mode::Enforce);
        assert_eq!(a.verdict, Verdict::Skipped);
        r["request"]["oldObject"] = pod("nvidia.com/gpu");
        let a = answer(r.to_string().as_bytes(), &ix, Mode::Enforce);
        assert_eq!(a.verdict, Verdict::Denied);
    }

    #[test]
    fn malformed_reviews_get_400_without_echoing_them() {
        let ix = index();
        let deep = format!(
            r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{"uid": "u", "object": {}"#,
            "[".repeat(100_000)
        );
        for (input, why) in [
            (b"".to_vec(), "EOF"),
            (b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\"".to_vec(), "EOF"),
            (b"\xff\xfe\x00garbage".to_vec(), "expected value"),
            (deep.into_bytes(), "recursion limit"),
            (br#"{"apiVersion": "v1", "kind": "Pod"}"#.to_vec(), "expected apiVersion"),
            (br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#.to_vec(), "no request"),
            (br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}"#.to_vec(), "request.uid"),
            (br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}"#.to_vec(), "wrong type or value"),
            (br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "SECRET_TOKEN_7f3a"}}"#.to_vec(), "wrong type or value"),
            (br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ["SECRET_TOKEN_7f3a"]}}"#.to_vec(), "wrong type or value"),
            (format!(r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{"uid": "{}"}}}}"#, "u".repeat(5000)).into_bytes(), "request.uid"),
        ] {
            let a = answer(&input, &ix, Mode::Warn);
            assert_eq!(a.status, StatusCode::BAD_REQUEST, "{why}");
            assert_eq!(a.verdict, Verdict::Invalid);
            assert!(a.body.contains(why), "{why}: {}", a.body);
            assert!(a.body.len() < 300, "{}", a.body);
            assert_eq!(a.body.lines().count(), 1);
            // Nothing of the input is quoted back.
            assert!(!a.body.contains("SECRET_TOKEN"), "{}", a.body);
            assert!(!a.body.contains('"'), "{}", a.body);
        }
    }

    #[test]
    fn the_envelope_is_kubes_admission_review() {
        let ix = index();
        // Without resource and userInfo (the guard reads neither): judged.
        let mut r: Value =
            serde_json::from_slice(&review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A1")))
                .unwrap();
        let req = r["request"].as_object_mut().unwrap();
        req.remove("resource");
        req.remove("userInfo");
        let a = answer(r.to_string().as_bytes(), &ix, Mode::Enforce);
        assert_eq!(a.verdict, Verdict::Denied);
        // An operation the API does not define, or no kind: not an AdmissionReview.
        for (field, value) in [("operation", json!("PATCH")), ("kind", Value::Null)] {
            let mut r: Value =
                serde_json::from_slice(&review("Pod", "", "CREATE", pod("nvidia.com/gpu")))
                    .unwrap();
            r["request"][field] = value;
            let a = answer(r.to_string().as_bytes(), &ix, Mode::Warn);
            assert_eq!(
                (a.status, a.verdict),
                (StatusCode::BAD_REQUEST, Verdict::Invalid)
            );
            assert!(a.body.starts_with("not an AdmissionReview: "), "{}", a.body);
        }
        // v1beta1 is answered in v1beta1; an allowed answer carries no status.
        let mut r: Value =
            serde_json::from_slice(&review("Pod", "", "CREATE", pod("nvidia.com/GA102GL_A10")))
                .unwrap();
        r["apiVersion"] = json!("admission.k8s.io/v1beta1");
        let a = answer(r.to_string().as_bytes(), &ix, Mode::Enforce);
        assert_eq!(
            a.body,
            r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"allowed":true,"uid":"705ab4f5-6393-11e8-b7cc-42010a800002"}}"#
        );
    }

    #[test]
    fn a_huge_object_is_judged_and_its_values_cut() {
        let long = format!("nvidia.com/{}", "X".repeat(200_000));
        let a = answer(
            &review("Pod", "", "CREATE", pod(&long)),
            &index(),
            Mode::Warn,
        );
        assert_eq!(a.verdict, Verdict::Warned);
        let w = &body(&a)["response"]["warnings"][0];
        assert!(w.as_str().unwrap().chars().count() <= admission::MAX_WARNING);
    }

    #[test]
    fn the_configuration_fails_open_fast_and_skips_system_namespaces() {
        let c = configuration(
            CONFIGURATION_NAME,
            json!({"url": "https://127.0.0.1:9443/validate"}),
            &["kube-system", "gpuwl"],
        );
        let w = &c["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Ignore");
        assert!(w["timeoutSeconds"].as_i64().unwrap() <= 5);
        assert_eq!(w["sideEffects"], "None");
        assert_eq!(
            w["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["kube-system", "gpuwl"])
        );
    }
}
