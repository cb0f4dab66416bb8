//! `gpuwl snapshot`'s file: everything gpuwl reads from a live cluster, in one tar archive
//! (gzip-compressed when the name ends in `.gz` or `.tgz`; the reader sniffs the gzip
//! magic, not the name).
//!
//! Why a tar of kubectl-shaped lists rather than one multi-document YAML: each member is
//! exactly what `kubectl get … -o json` prints (a `List` whose items carry `kind`), so
//! `tar -xf snapshot.tar` gives files the per-kind flags (`--nodes`, `--pods`, `--dra`, …)
//! and any other tool read as they are; the reader streams member by member through the
//! same readers as those flags (a 65,000-node member never sits whole in memory); and
//! tarballs are what bug reports already carry (the GPU Operator's must-gather bundle is a
//! folder that is usually sent as one).
//!
//! Members, in this order:
//!
//! | member | holds |
//! |---|---|
//! | `snapshot.json` | [`Meta`]: format, gpuwl version, cluster version, time, per list how it went |
//! | `nodes.json` | all Nodes |
//! | `pods.json` | the Pods that have not finished; only the fields gpuwl reads unless `--full` |
//! | `clusterpolicies.json` | `clusterpolicies.nvidia.com` |
//! | `kubevirt.json` | `kubevirts.kubevirt.io` and `hyperconvergeds.hco.kubevirt.io` |
//! | `vmis.json` | `virtualmachineinstances.kubevirt.io`: a VMI placed or finished by metadata only (name, namespace, owners: whether a VirtualMachine owns it, how a VM holding a GPU is stopped); one that may wait for a virt-launcher pod whole |
//! | `vms.json` | `virtualmachines.kubevirt.io`: one whose run strategy wants it running whole (with no VMI it waits: refused by virt-api), any other by name |
//! | `dra.json` | DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates |
//! | `daemonsets.json` | the GPU Operator's operand DaemonSets (owned by a ClusterPolicy, or labelled `nvidia…`) |
//! | `kueue.json` | Kueue's ResourceFlavors, ClusterQueues, LocalQueues and Workloads (`kueue.x-k8s.io/v1beta2`) |
//!
//! Never included: Secrets (no list of them is made), the values of environment variables
//! (`env[].value` and `env[].valueFrom` are removed wherever they occur, the names stay),
//! `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation (a copy of an applied manifest, env values included).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::ListParams;
use serde_json::Value;

use crate::files;
use crate::input::live;
use gpuwl_core::decode::document::{self, Keep, Prune};
use gpuwl_core::decode::kubevirt::{HYPERCONVERGED, KUBEVIRT};
use gpuwl_core::decode::pods::{ITEM, LIVE_FIELD_SELECTOR};
use gpuwl_core::decode::{dump, limits};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::dra::{DraObjects, DraSource};
use gpuwl_core::model::kubevirt::PermittedHostDevices;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::operator::PolicyStatus;
use gpuwl_core::model::pod::{PodInfo, wants_running};
use gpuwl_core::model::snapshot::{From, Snapshot};
use gpuwl_core::text;

/// The `format` of [`Meta`] this version writes and reads.
pub(crate) const FORMAT: &str = "gpuwl.snapshot/v1";

/// The largest member read whole into memory (the ClusterPolicy, KubeVirt, DaemonSet and
/// meta members; nodes, pods and DRA objects are streamed).
pub(crate) const MAX_SMALL_MEMBER: u64 = 64 * 1024 * 1024;

/// How one list went when the snapshot was taken.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Collected {
    /// `listed`, `not-served` (the API has no such resource: CRD or API group absent) or
    /// `denied` (HTTP 403).
    pub status: String,
    /// How many objects the member holds.
    pub objects: usize,
    /// Why not listed, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The `snapshot.json` member.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// [`FORMAT`].
    pub format: String,
    /// The gpuwl version that wrote it.
    pub gpuwl_version: String,
    /// The API server's `gitVersion` (`/version`), when it answered.
    #[serde(default)]
    pub cluster_version: Option<String>,
    /// When it was taken, RFC 3339 UTC.
    pub taken_at: String,
    /// The API server's address.
    #[serde(default)]
    pub server: Option<String>,
    /// Whether pods are whole (`--full`, env values still removed) or only the fields gpuwl reads.
    pub full_pods: bool,
    /// Per member (`nodes`, `pods`, …): how its list went.
    pub(crate) collected: BTreeMap<String, Collected>,
}

/// One list of the snapshot: its member name, the API path(s), what it holds.
struct ListSpec {
    member: &'static str,
    paths: &'static [(&'static str, &'static str, &'static str)],
}

/// (member, [(API path, kind, apiVersion)]) of every list, in member order.
const LISTS: &[ListSpec] = &[
    ListSpec {
        member: "nodes",
        paths: &[("/api/v1/nodes", "Node", "v1")],
    },
    ListSpec {
        member: "pods",
        paths: &[("/api/v1/pods", "Pod", "v1")],
    },
    ListSpec {
        member: "clusterpolicies",
        paths: &[(
            "/apis/nvidia.com/v1/clusterpolicies",
            "ClusterPolicy",
            "nvidia.com/v1",
        )],
    },
    ListSpec {
        member: "kubevirt",
        paths: &[
            (
                "/apis/hco.kubevirt.io/v1beta1/hyperconvergeds",
                "HyperConverged",
                "hco.kubevirt.io/v1beta1",
            ),
            (
                "/apis/kubevirt.io/v1/kubevirts",
                "KubeVirt",
                "kubevirt.io/v1",
            ),
        ],
    },
    ListSpec {
        member: "vmis",
        paths: &[(
            "/apis/kubevirt.io/v1/virtualmachineinstances",
            "VirtualMachineInstance",
            "kubevirt.io/v1",
        )],
    },
    ListSpec {
        member: "vms",
        paths: &[(
            "/apis/kubevirt.io/v1/virtualmachines",
            "VirtualMachine",
            "kubevirt.io/v1",
        )],
    },
    ListSpec {
        member: "dra",
        paths: &[
            (
                "/apis/resource.k8s.io/v1/deviceclasses",
                "DeviceClass",
                "resource.k8s.io/v1",
            ),
            (
                "/apis/resource.k8s.io/v1/resourceslices",
                "ResourceSlice",
                "resource.k8s.io/v1",
            ),
            (
                "/apis/resource.k8s.io/v1/resourceclaims",
                "ResourceClaim",
                "resource.k8s.io/v1",
            ),
            (
                "/apis/resource.k8s.io/v1/resourceclaimtemplates",
                "ResourceClaimTemplate",
                "resource.k8s.io/v1",
            ),
        ],
    },
    ListSpec {
        member: "daemonsets",
        paths: &[("/apis/apps/v1/daemonsets", "DaemonSet", "apps/v1")],
    },
    ListSpec {
        member: "kueue",
        paths: &[
            (
                "/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
                "ResourceFlavor",
                "kueue.x-k8s.io/v1beta2",
            ),
            (
                "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
                "ClusterQueue",
                "kueue.x-k8s.io/v1beta2",
            ),
            (
                "/apis/kueue.x-k8s.io/v1beta2/localqueues",
                "LocalQueue",
                "kueue.x-k8s.io/v1beta2",
            ),
            (
                "/apis/kueue.x-k8s.io/v1beta2/workloads",
                "Workload",
                "kueue.x-k8s.io/v1beta2",
            ),
        ],
    },
];

/// A page of a list as the API returns it, pods kept slim ([`gpuwl_core::decode::pods::ITEM`]).
const SLIM_POD_PAGE: Keep = Keep::Fields(&[("metadata", Keep::All), ("items", Keep::Each(&ITEM))]);

/// Removes what a snapshot never holds from `v`, at any depth: `env[].value` and
/// `env[].valueFrom`, `metadata.managedFields` and the last-applied annotation.
pub(crate) fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(md)) = m.get_mut("metadata") {
                md.remove("managedFields");
                if let Some(Value::Object(a)) = md.get_mut("annotations") {
                    a.remove("kubectl.kubernetes.io/last-applied-configuration");
                }
            }
            for (k, x) in m.iter_mut() {
                match (k.as_str(), x) {
                    ("env", Value::Array(items)) => {
                        for it in items {
                            if let Value::Object(e) = it {
                                e.remove("value");
                                e.remove("valueFrom");
                            }
                        }
                    }
                    (_, x) => scrub(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
}

/// Whether a DaemonSet is one of the GPU Operator's operands: owned by a ClusterPolicy, or
/// with a label key or value that names `nvidia` (the must-gather script's own filter is
/// `nvidia|gpu` in the labels; GPU Operator `hack/must-gather.sh`).
pub(crate) fn is_operand_daemonset(ds: &Value) -> bool {
    let owned = ds
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| {
            o.iter()
                .any(|r| r.get("kind").and_then(Value::as_str) == Some("ClusterPolicy"))
        });
    let labelled = ds
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|l| {
            l.iter().any(|(k, v)| {
                k.contains("nvidia") || v.as_str().is_some_and(|v| v.contains("nvidia"))
            })
        });
    owned || labelled
}

/// One list's outcome.
enum Listed {
    Items(Vec<Value>),
    NotServed(String),
    Denied(String),
}

/// Lists every object at `path` (all namespaces), page by page, each item with `kind` and
/// `apiVersion` set and [`scrub`]bed; pods slim unless `full`.
async fn list_raw(
    client: &Client,
    (path, kind, api_version): (&str, &str, &str),
    full: bool,
) -> Result<Listed> {
    let mut out = Vec::new();
    let mut not = None;
    let base = if kind == "Pod" {
        ListParams::default().fields(LIVE_FIELD_SELECTOR)
    } else {
        ListParams::default()
    };
    let doing = format!("list {kind} objects");
    live::pages(base, async |lp: &ListParams| {
        let req = kube::core::Request::new(path)
            .list(lp)
            .map_err(|e| Error::failed(format!("cannot {doing}"), e))?;
        let body = match client.request_text(req).await {
            Ok(b) => b,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                not = Some(Listed::NotServed(format!("{path} is not served")));
                return Ok(None);
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                not = Some(Listed::Denied(format!(
                    "the credentials may not list {path}"
                )));
                return Ok(None);
            }
            Err(e) => return Err(live::api_error(&doing, &e)),
        };
        let page: Value = if kind == "Pod" && !full {
            let mut d = serde_json::Deserializer::from_str(&body);
            serde::de::DeserializeSeed::deserialize(Prune(SLIM_POD_PAGE), &mut d)
                .map_err(|e| Error::failed(format!("cannot {doing}"), e))?
        } else {
            serde_json::from_str(&body).map_err(|e| Error::failed(format!("cannot {doing}"), e))?
        };
        let token = page
            .pointer("/metadata/continue")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(Value::Array(items)) = page.get("items") {
            for item in items {
                let mut item = item.clone();
                scrub(&mut item);
                if let Value::Object(m) = &mut item {
                    m.insert("kind".into(), Value::String(kind.into()));
                    m.insert("apiVersion".into(), Value::String(api_version.into()));
                }
                if kind == "DaemonSet" && !is_operand_daemonset(&item) {
                    continue;
                }
                out.push(item);
            }
        }
        Ok::<_, Error>(token)
    })
    .await?;
    Ok(not.unwrap_or(Listed::Items(out)))
}

/// What a snapshot keeps of a VMI: a VMI that may wait for a launcher pod whole (it is
/// judged as the pod it stands for, [`gpuwl_core::decode::virt::waiting_without_launcher`]), any other its
/// kind, name, namespace, owner references and placement ([`gpuwl_core::decode::virt::slim_settled_vmi`]).
fn vmi_kept(v: &Value) -> Value {
    let mut v = v.clone();
    v["kind"] = Value::String("VirtualMachineInstance".into());
    v["apiVersion"] = Value::String("kubevirt.io/v1".into());
    gpuwl_core::decode::virt::slim_settled_vmi(v)
}

/// What a snapshot keeps of a VirtualMachine: one whose run strategy wants it running whole
/// (it waits when it has no VMI, [`gpuwl_core::decode::virt::waiting_without_launcher`]), any other its kind,
/// name and namespace.
fn vm_kept(v: &Value) -> Value {
    let mut v = v.clone();
    v["kind"] = Value::String("VirtualMachine".into());
    v["apiVersion"] = Value::String("kubevirt.io/v1".into());
    let strategy = v.pointer("/spec/runStrategy").and_then(Value::as_str).or(
        match v.pointer("/spec/running") {
            Some(Value::Bool(true)) => Some("Always"),
            _ => None,
        },
    );
    if wants_running(strategy) {
        return v;
    }
    let md = &v["metadata"];
    serde_json::json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": md.get("name"), "namespace": md.get("namespace")},
    })
}

/// Whether a VirtualMachine owns each VMI of `items` (`namespace/name` → owned), as
/// [`crate::input::virt::vmi_owners`] reads it live.
fn vmi_owners_of(items: &[Value]) -> BTreeMap<String, bool> {
    items
        .iter()
        .filter_map(|v| {
            let md = v.get("metadata")?;
            let name = md.get("name")?.as_str()?;
            let ns = md.get("namespace").and_then(Value::as_str).unwrap_or("");
            let owned = md
                .get("ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r.get("kind").and_then(Value::as_str) == Some("VirtualMachine"))
                });
            Some((format!("{ns}/{name}"), owned))
        })
        .collect()
}

/// Serializes `items` as a kubectl-style `List`.
fn list_json(items: &[Value]) -> Result<Vec<u8>> {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    serde_json::to_vec(&list).map_err(|e| Error::failed("cannot serialize the snapshot", e))
}

/// Takes a snapshot of the cluster `client` talks to: lists everything in the member table
/// (module docs) one list after another, reporting each on `progress` (one line per list:
/// member, objects, or why not listed), and returns the archive's bytes (a plain tar;
/// [`write`](fn@write) compresses it when asked).
///
/// Errors: [`Error::Cluster`]/[`Error::ClusterTimeout`] when nodes or pods cannot be
/// listed, or another list fails other than by 404/403 (those are recorded in
/// [`Meta::collected`] instead).
pub async fn take(
    client: &Client,
    server: Option<&str>,
    full: bool,
    mut progress: impl FnMut(&str),
) -> Result<Vec<u8>> {
    let cluster_version = client.apiserver_version().await.ok().map(|v| v.git_version);
    let mut meta = Meta {
        format: FORMAT.into(),
        gpuwl_version: env!("CARGO_PKG_VERSION").into(),
        cluster_version,
        taken_at: k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
            .to_string(),
        server: server.map(str::to_owned),
        full_pods: full,
        collected: BTreeMap::new(),
    };
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    for spec in LISTS {
        let mut items = Vec::new();
        let mut collected = Collected {
            status: "listed".into(),
            objects: 0,
            note: None,
        };
        for &p in spec.paths {
            match list_raw(client, p, full).await? {
                Listed::Items(v) => items.extend(v),
                // A second kind of the same member may still be served (KubeVirt without
                // the HCO): note the first refusal, keep going.
                Listed::NotServed(why) | Listed::Denied(why)
                    if spec.member == "kubevirt" && collected.note.is_none() =>
                {
                    collected.note = Some(why);
                }
                Listed::NotServed(why) => {
                    if spec.member == "nodes" || spec.member == "pods" {
                        return Err(Error::Runtime(format!(
                            "cannot list {}: {why}",
                            spec.member
                        )));
                    }
                    collected.status = "not-served".into();
                    collected.note = Some(why);
                }
                Listed::Denied(why) => {
                    if spec.member == "nodes" || spec.member == "pods" {
                        return Err(Error::Runtime(format!(
                            "cannot list {}: {why}",
                            spec.member
                        )));
                    }
                    collected.status = "denied".into();
                    collected.note = Some(why);
                }
            }
            if collected.status != "listed" {
                break;
            }
        }
        if spec.member == "kubevirt" && items.is_empty() && collected.note.is_some() {
            collected.status = "not-served".into();
        }
        if spec.member == "vmis" {
            items = items.iter().map(vmi_kept).collect();
        }
        if spec.member == "vms" {
            items = items.iter().map(vm_kept).collect();
        }
        collected.objects = items.len();
        progress(&match &collected.note {
            Some(n) if collected.status != "listed" => {
                format!("{}: {} ({n})", spec.member, collected.status)
            }
            _ => format!("{}: {} objects", spec.member, items.len()),
        });
        members.push((format!("{}.json", spec.member), list_json(&items)?));
        meta.collected.insert(spec.member.into(), collected);
    }
    let meta_json = serde_json::to_vec_pretty(&meta)
        .map_err(|e| Error::failed("cannot serialize the snapshot", e))?;
    let mut b = tar::Builder::new(Vec::new());
    let mtime = k8s_openapi::jiff::Timestamp::now().as_second().max(0) as u64;
    for (name, data) in std::iter::once(("snapshot.json".to_owned(), meta_json)).chain(members) {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        h.set_mtime(mtime);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, &name, data.as_slice())
            .map_err(|e| Error::failed("cannot build the snapshot archive", e))?;
    }
    b.into_inner()
        .map_err(|e| Error::failed("cannot build the snapshot archive", e))
}

/// Writes the archive `tar` to `path` atomically (mode 0600: a snapshot describes the
/// cluster), gzip-compressed when the name ends in `.gz` or `.tgz`.
///
/// Errors: [`Error::Failed`] naming the path when it cannot be written.
pub fn write(path: &Path, tar: &[u8]) -> Result<usize> {
    let name = path.to_string_lossy();
    let bytes = if name.ends_with(".gz") || name.ends_with(".tgz") {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut enc, tar)
            .and_then(|()| enc.finish())
            .map_err(|e| Error::failed(format!("cannot write {}", path.display()), e))?
    } else {
        tar.to_vec()
    };
    files::write_atomic(path, &bytes, 0o600)?;
    Ok(bytes.len())
}

/// Reads a small member whole (at most [`MAX_SMALL_MEMBER`] bytes).
fn small(r: impl Read, origin: &str) -> Result<String> {
    let mut s = String::new();
    let n = r
        .take(MAX_SMALL_MEMBER + 1)
        .read_to_string(&mut s)
        .map_err(|e| Error::Input(format!("{origin}: {e}")))?;
    if n as u64 > MAX_SMALL_MEMBER {
        return Err(Error::Input(format!(
            "{origin}: larger than {} MiB",
            MAX_SMALL_MEMBER / 1024 / 1024
        )));
    }
    Ok(s)
}

/// The `items` of a List member.
fn items_of(text: &str, origin: &str) -> Result<Vec<Value>> {
    let doc = document::parse(text, origin, "a List")?;
    match doc.get("items") {
        Some(Value::Array(a)) => {
            if let Some(last) = a.len().checked_sub(1) {
                limits::check_item(last).map_err(|e| Error::Input(format!("{origin}: {e}")))?;
            }
            Ok(a.clone())
        }
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(_) => Err(Error::Input(format!("{origin}: items: expected a list"))),
    }
}

/// The ClusterPolicy status of the stored objects, as the live reader judges the listed
/// ones: none → `no-object`, several → the first by name with a note.
fn policy_of(mut items: Vec<Value>, collected: Option<&Collected>, origin: &str) -> PolicyStatus {
    match collected.map(|c| c.status.as_str()) {
        Some("not-served") => return gpuwl_core::decode::clusterpolicy::absent_crd(),
        Some("denied") => {
            return gpuwl_core::decode::clusterpolicy::none(
                "unreadable",
                collected.and_then(|c| c.note.clone()),
            );
        }
        _ => {}
    }
    let name = |v: &Value| {
        v.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    items.sort_by_key(name);
    let n = items.len();
    let Some(first) = items.first() else {
        return gpuwl_core::decode::clusterpolicy::none(
            "no-object",
            Some("no ClusterPolicy object".into()),
        );
    };
    match gpuwl_core::decode::clusterpolicy::from_object(first) {
        Ok(p) => PolicyStatus {
            status: "cluster",
            note: (n > 1).then(|| format!("{n} ClusterPolicies; using {}", p.name)),
            policy: Some(p),
        },
        Err(e) => gpuwl_core::decode::clusterpolicy::none(
            "unreadable",
            Some(format!(
                "{origin}: ClusterPolicy {}: {e}",
                text::cut(&name(first))
            )),
        ),
    }
}

/// Reads a snapshot file (plain or gzip-compressed tar) into what the analyses take,
/// member by member through the same readers as the per-kind flags (the operand
/// DaemonSets member is read, so a malformed one fails, but not kept: no analysis takes it).
///
/// Errors: [`Error::Input`]/[`Error::File`]/[`Error::Field`] naming `FILE:member` when it
/// is not a tar, has no `snapshot.json` of [`FORMAT`] or no `nodes.json`, or a member does
/// not read.
pub(crate) fn load(path: &Path) -> Result<Snapshot> {
    let shown = path.display().to_string();
    let m = read_members(path)?;
    let Some(meta) = m.meta else {
        return Err(Error::file(
            PathBuf::from(path),
            "not a gpuwl snapshot: empty archive",
        ));
    };
    let Some(nodes) = m.nodes else {
        return Err(Error::file(
            PathBuf::from(path),
            "no nodes.json member: the snapshot is cut short",
        ));
    };
    let policy = policy_of(
        m.policy_items.unwrap_or_default(),
        meta.collected.get("clusterpolicies"),
        &format!("{shown}:clusterpolicies.json"),
    );
    let kubevirt = match m.kubevirt_items {
        Some(items) => kubevirt_of(&items, &shown)?,
        None => None,
    };
    let (dra, dra_source) = dra_of(m.dra, meta.collected.get("dra"));
    // As a live read does: each virt-launcher pod knows whether a VM owns its VMI.
    let mut pods = m.pods.unwrap_or_default();
    if let Some(items) = &m.vmis {
        gpuwl_core::decode::virt::mark_launchers(&mut pods, &vmi_owners_of(items));
    }
    // As a live read does: the VMs that wait with no launcher pod are judged with the pods.
    let waiting = gpuwl_core::decode::virt::waiting_without_launcher(
        m.vmis.as_deref().unwrap_or_default(),
        m.vms.as_deref().unwrap_or_default(),
        &pods,
    );
    pods.extend(waiting);
    Ok(Snapshot {
        nodes,
        pods: Some(pods),
        policy,
        kubevirt,
        dra: Some((dra, dra_source)),
        operands: None,
        from: From::Snapshot(path.to_owned()),
        origin: format!("snapshot {}", path.display()),
        kueue: match m.kueue_items {
            Some(items) if !items.is_empty() => Some(
                gpuwl_core::decode::kueue::from_values(&items)
                    .map_err(|e| Error::field(format!("{shown}:kueue.json"), e))?,
            ),
            _ => None,
        },
    })
}

/// The members of a snapshot file, each read as its reader reads it (`None`: absent).
#[derive(Default)]
struct Members {
    meta: Option<Meta>,
    nodes: Option<Vec<NodeInfo>>,
    pods: Option<Vec<PodInfo>>,
    policy_items: Option<Vec<Value>>,
    kubevirt_items: Option<Vec<Value>>,
    dra: Option<DraObjects>,
    vmis: Option<Vec<Value>>,
    vms: Option<Vec<Value>>,
    kueue_items: Option<Vec<Value>>,
}

/// Reads the archive at `path` (gzip or plain tar) member by member; `snapshot.json` must
/// come first and be of [`FORMAT`]; members of a later version are skipped.
///
/// Errors: [`Error::File`] when it is not a tar archive or does not start with
/// `snapshot.json`; [`Error::Input`] for a member that does not read, naming it.
/// `s` cut to `max` characters (an ellipsis added when cut).
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

fn read_members(path: &Path) -> Result<Members> {
    let shown = path.display().to_string();
    let reader = limits::Bounded::archive(document::open_maybe_gzip(path)?);
    let mut archive = tar::Archive::new(reader);
    let not_tar = |e: std::io::Error| {
        if let Some(m) = limits::limit_of(&e) {
            return Error::file(PathBuf::from(path), m.to_owned());
        }
        Error::file(
            PathBuf::from(path),
            // tar's message quotes the bytes it could not read: escaped and cut.
            format!(
                "not a gpuwl snapshot (a tar archive from `gpuwl snapshot`): {}",
                shorten(&gpuwl_core::text::esc(&e.to_string()), 200)
            ),
        )
    };
    let mut m = Members::default();
    for entry in archive.entries().map_err(not_tar)? {
        let entry = entry.map_err(not_tar)?;
        let member = entry
            .path()
            .map_err(not_tar)?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        let origin = format!("{shown}:{}", text::cut(&member));
        limits::check_member(entry.size()).map_err(|e| Error::Input(format!("{origin}: {e}")))?;
        if m.meta.is_none() && member != "snapshot.json" {
            return Err(Error::file(
                PathBuf::from(path),
                "not a gpuwl snapshot: the first member is not snapshot.json",
            ));
        }
        match member.as_str() {
            "snapshot.json" => {
                let meta: Meta = serde_json::from_str(&small(entry, &origin)?).map_err(|e| {
                    Error::Input(format!("{origin}: {}", text::one_line(&e.to_string())))
                })?;
                if meta.format != FORMAT {
                    return Err(Error::Input(format!(
                        "{origin}: format {} is not {FORMAT} (written by gpuwl {})",
                        text::cut(&meta.format),
                        text::cut(&meta.gpuwl_version)
                    )));
                }
                m.meta = Some(meta);
            }
            "nodes.json" => {
                let mut v = Vec::new();
                dump::read_from(entry, &origin, |n| v.push(n))?;
                m.nodes = Some(v);
            }
            "pods.json" => m.pods = Some(gpuwl_core::decode::pods::read_pods_from(entry, &origin)?),
            "clusterpolicies.json" => {
                m.policy_items = Some(items_of(&small(entry, &origin)?, &origin)?)
            }
            "kubevirt.json" => m.kubevirt_items = Some(items_of(&small(entry, &origin)?, &origin)?),
            "dra.json" => m.dra = Some(gpuwl_core::decode::dra::read_from(entry, &origin)?),
            // Read (a malformed member fails) but not kept: no analysis takes it.
            "daemonsets.json" => drop(items_of(&small(entry, &origin)?, &origin)?),
            "vmis.json" => m.vmis = Some(items_of(&small(entry, &origin)?, &origin)?),
            "vms.json" => m.vms = Some(items_of(&small(entry, &origin)?, &origin)?),
            "kueue.json" => m.kueue_items = Some(items_of(&small(entry, &origin)?, &origin)?),
            // Members of a later version are skipped.
            _ => {}
        }
    }
    Ok(m)
}

/// KubeVirt's permitted host devices from the `kubevirt.json` member's objects: the
/// HyperConverged CR when there is one, else the KubeVirt CR
/// ([`gpuwl_core::decode::kubevirt::choose`]); `None` when neither is there.
///
/// Errors: [`Error::Input`] naming the member, as `choose` refuses.
fn kubevirt_of(items: &[Value], shown: &str) -> Result<Option<PermittedHostDevices>> {
    let of = |kind: &str| -> Vec<Value> {
        items
            .iter()
            .filter(|v| v.get("kind").and_then(Value::as_str) == Some(kind))
            .cloned()
            .collect()
    };
    let kv_origin = |e: Error| Error::Input(format!("{shown}:kubevirt.json: {e}"));
    match gpuwl_core::decode::kubevirt::choose(HYPERCONVERGED, &of("HyperConverged"))
        .map_err(kv_origin)?
    {
        Some(found) => Ok(Some(found)),
        None => gpuwl_core::decode::kubevirt::choose(KUBEVIRT, &of("KubeVirt")).map_err(kv_origin),
    }
}

/// The DRA objects of the `dra.json` member and where they came from, by what
/// `snapshot.json` says of their listing: listed (or not said: an older snapshot) counts as
/// a live list ([`DraSource::Cluster`]); `denied` and anything else are empty, with the
/// reason.
fn dra_of(dra: Option<DraObjects>, collected: Option<&Collected>) -> (DraObjects, DraSource) {
    match (dra, collected.map(|c| c.status.as_str())) {
        // Listed from the cluster when the snapshot was taken: the analyses treat it as
        // they treat a live list (an empty list stays silent).
        (Some(d), Some("listed") | None) => (d, DraSource::Cluster),
        (_, Some("denied")) => (
            DraObjects::default(),
            DraSource::Denied(collected.and_then(|c| c.note.clone()).unwrap_or_default()),
        ),
        _ => (
            DraObjects::default(),
            DraSource::Skipped(
                collected
                    .and_then(|c| c.note.clone())
                    .unwrap_or_else(|| "the snapshot holds no DRA objects".into()),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dra_objects_count_as_listed_only_when_the_snapshot_listed_them() {
        let collected = |status: &str, note: Option<&str>| Collected {
            status: status.into(),
            objects: 0,
            note: note.map(str::to_owned),
        };
        let some = || Some(DraObjects::default());
        assert_eq!(
            dra_of(some(), Some(&collected("listed", None))).1,
            DraSource::Cluster
        );
        // An older snapshot says nothing of the listing.
        assert_eq!(dra_of(some(), None).1, DraSource::Cluster);
        assert_eq!(
            dra_of(None, Some(&collected("denied", Some("403 forbidden")))).1,
            DraSource::Denied("403 forbidden".into())
        );
        assert_eq!(
            dra_of(
                None,
                Some(&collected("not-served", Some("no resource.k8s.io/v1")))
            )
            .1,
            DraSource::Skipped("no resource.k8s.io/v1".into())
        );
        assert_eq!(
            dra_of(None, None).1,
            DraSource::Skipped("the snapshot holds no DRA objects".into())
        );
    }

    #[test]
    fn scrub_removes_env_values_managed_fields_and_last_applied() {
        let mut v = serde_json::json!({
            "metadata": {"name": "p", "managedFields": [{"manager": "x"}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"env\":\"s3cret\"}", "keep": "1"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c",
                "env": [{"name": "TOKEN", "value": "s3cret"},
                        {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}}
        });
        scrub(&mut v);
        let text = v.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("secretKeyRef"), "{text}");
        assert!(!text.contains("managedFields"), "{text}");
        assert_eq!(
            v.pointer("/metadata/annotations/keep"),
            Some(&Value::from("1"))
        );
        assert_eq!(
            v.pointer("/spec/template/spec/containers/0/env/0/name"),
            Some(&Value::from("TOKEN"))
        );
    }

    #[test]
    fn operand_daemonsets_by_owner_or_label() {
        let owned = serde_json::json!({"metadata": {"ownerReferences": [{"kind": "ClusterPolicy", "name": "cp"}]}});
        let labelled =
            serde_json::json!({"metadata": {"labels": {"app": "nvidia-device-plugin-daemonset"}}});
        let other = serde_json::json!({"metadata": {"labels": {"app": "kube-proxy"}}});
        assert!(is_operand_daemonset(&owned));
        assert!(is_operand_daemonset(&labelled));
        assert!(!is_operand_daemonset(&other));
    }
}
