//! Reading pods (and KubeVirt VMIs) from a dump or the live cluster.
//!
//! Dumps: `kubectl get pods -A -o json|yaml` (kind `List`), a raw API `PodList`, a single
//! `Pod`, or a KubeVirt `VirtualMachineInstance` / `VirtualMachine`, JSON or YAML (detected
//! by content: first non-blank byte `{` means JSON). Every item is reduced to a
//! [`PodInfo`]: name, namespace, node, phase, placement constraints (nodeSelector,
//! required node affinity, tolerations), the PodScheduled condition, and the effective
//! extended-resource requests.
//!
//! Errors are [`Error::Input`], one line: `<file>: [items[<i>] (<ns>/<name>): ]<field>: <what>`.
//!
//! Sources of the rules encoded here:
//! - effective requests: kubernetes/kubernetes
//!   `staging/src/k8s.io/component-helpers/resource/helpers.go` (`PodRequests`: the max of
//!   the regular containers plus restartable-init "sidecar" containers, and each init
//!   container plus the sidecars started before it; plus `spec.overhead`);
//! - requests default to limits when absent: `pkg/apis/core/v1/defaults.go`
//!   (`SetDefaults_Pod`), and for extended resources limits must equal requests
//!   (`pkg/apis/core/validation/validation.go`, `validateResourceRequirements`);
//! - extended resource names: `pkg/apis/core/v1/helper/helpers.go`
//!   (`IsExtendedResourceName`: a qualified name with a domain other than `kubernetes.io`,
//!   not prefixed `requests.`);
//! - VMIs: a virt-launcher pod requests one unit of each `spec.domain.devices.gpus[]` /
//!   `hostDevices[]` `deviceName` (kubevirt/kubevirt `pkg/virt-controller/services/
//!   rendercontainer.go`; docs/domain-facts.md §5).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::input::document::{array, get, one_line, opt_scalar, opt_str};
use crate::input::dump::Source;
use crate::model::pod::{
    Condition, ObjectKind, PodInfo, RequestSource, SelectorRequirement, SelectorTerm, Toleration,
    is_extended_resource,
};
use crate::model::quantity::Quantity;

/// Page size of the paginated live pod list (`limit`, then `continue` tokens).
pub const PAGE_SIZE: u32 = 500;

/// Reads all pods of `source` (a List/PodList, or one Pod/VMI/VM).
///
/// Errors: [`Error::Input`] naming the source, the item and the field: unreadable file,
/// empty input, invalid JSON/YAML, an unexpected kind, an item without `metadata.name`,
/// a field of the wrong type, an extended-resource quantity that is not a whole
/// non-negative number.
pub fn read_pods(source: &Source) -> Result<Vec<PodInfo>> {
    let name = source.to_string();
    let path = match source {
        Source::Stdin => std::path::PathBuf::from("-"),
        Source::Path(p) => p.clone(),
    };
    let text = crate::input::document::read_text(&path)?;
    read_pods_str(&text, &name)
}

/// Reads pods from a file path (see [`read_pods`]).
pub fn read_pods_path(path: &Path) -> Result<Vec<PodInfo>> {
    read_pods(&Source::from_arg(path))
}

/// Parses pods from text; `name` is used in error messages. See [`read_pods`].
pub fn read_pods_str(text: &str, name: &str) -> Result<Vec<PodInfo>> {
    let err = |m: String| Error::Input(format!("{name}: {}", one_line(&m)));
    let doc = crate::input::document::parse(
        text,
        name,
        "one Pod, PodList, List or VirtualMachineInstance",
    )?;
    from_document(&doc).map_err(err)
}

/// Converts a parsed document (List/PodList or one object) into pods; the error is the
/// message without the source name.
pub fn from_document(doc: &Value) -> std::result::Result<Vec<PodInfo>, String> {
    let Value::Object(map) = doc else {
        return Err("expected an object (a Pod, PodList, List or VirtualMachineInstance)".into());
    };
    let kind = map.get("kind").and_then(Value::as_str);
    match (kind, map.get("items")) {
        (Some("List" | "PodList" | "VirtualMachineInstanceList"), items) => {
            let items = match items {
                None | Some(Value::Null) => return Ok(Vec::new()),
                Some(Value::Array(a)) => a,
                Some(_) => return Err("items: expected an array".into()),
            };
            let default_kind = match kind {
                Some("PodList") => Some("Pod"),
                Some("VirtualMachineInstanceList") => Some("VirtualMachineInstance"),
                _ => None,
            };
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    object(item, default_kind).map_err(|m| {
                        let who = item
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .map(|n| {
                                let ns = item
                                    .pointer("/metadata/namespace")
                                    .and_then(Value::as_str)
                                    .unwrap_or("default");
                                format!(" ({ns}/{n})")
                            })
                            .unwrap_or_default();
                        format!("items[{i}]{who}: {m}")
                    })
                })
                .collect()
        }
        (Some(_), _) => object(doc, None).map(|p| vec![p]),
        (None, Some(_)) => Err("list without kind: expected kind PodList or List".into()),
        (None, None) => {
            Err("no kind field: expected a Pod, PodList, List or VirtualMachineInstance".into())
        }
    }
}

/// Converts one API object (as JSON) into a [`PodInfo`] (what the live readers use).
///
/// Errors: the field-naming message, without the source name.
pub fn from_object(v: &Value) -> std::result::Result<PodInfo, String> {
    object(v, Some("Pod"))
}

fn object(v: &Value, default_kind: Option<&str>) -> std::result::Result<PodInfo, String> {
    if !v.is_object() {
        return Err("expected an object".into());
    }
    let kind = opt_str(v, "kind")?.or(default_kind);
    let kind = match kind {
        Some("Pod") => ObjectKind::Pod,
        Some("VirtualMachineInstance") => ObjectKind::VirtualMachineInstance,
        Some("VirtualMachine") => ObjectKind::VirtualMachine,
        Some(k) => {
            return Err(format!(
                "kind {} is not a Pod, VirtualMachineInstance or VirtualMachine",
                crate::input::document::cut(k)
            ));
        }
        None => return Err("no kind field: expected a Pod".into()),
    };
    let name = match opt_str(v, "metadata.name")? {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => return Err("metadata.name: missing".into()),
    };
    let namespace = opt_str(v, "metadata.namespace")?
        .unwrap_or("default")
        .to_owned();
    // A VM is read through its template, which is a VMI spec.
    let (spec_path, spec) = match kind {
        ObjectKind::VirtualMachine => ("spec.template.spec", get(v, "spec.template.spec")),
        _ => ("spec", get(v, "spec")),
    };
    let null = Value::Null;
    let spec = spec.unwrap_or(&null);
    let sp = |f: &str| format!("{spec_path}.{f}");
    let node_name = match kind {
        ObjectKind::Pod => opt_str(spec, "nodeName").map_err(|e| format!("{spec_path}.{e}"))?,
        _ => opt_str(v, "status.nodeName")?,
    }
    .filter(|s| !s.is_empty())
    .map(str::to_owned);
    let phase = opt_str(v, "status.phase")?.map(str::to_owned);
    let node_selector = string_map(spec.get("nodeSelector"), &sp("nodeSelector"))?;
    let required_affinity = match get(
        spec,
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    ) {
        None | Some(Value::Null) => None,
        Some(req) => {
            let p = sp("affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
            let terms = array(
                req.get("nodeSelectorTerms"),
                &format!("{p}.nodeSelectorTerms"),
            )?;
            let mut out = Vec::new();
            for (i, t) in terms.iter().enumerate() {
                let tp = format!("{p}.nodeSelectorTerms[{i}]");
                out.push(SelectorTerm {
                    match_expressions: requirements(
                        t.get("matchExpressions"),
                        &format!("{tp}.matchExpressions"),
                    )?,
                    match_fields: requirements(t.get("matchFields"), &format!("{tp}.matchFields"))?,
                });
            }
            Some(out)
        }
    };
    let mut tolerations = Vec::new();
    for (i, t) in array(spec.get("tolerations"), &sp("tolerations"))?
        .iter()
        .enumerate()
    {
        let tp = format!("{}[{i}]", sp("tolerations"));
        let f = |k: &str| {
            opt_scalar(t.get(k), &format!("{tp}.{k}")).map(|o| o.filter(|s| !s.is_empty()))
        };
        tolerations.push(Toleration {
            key: f("key")?,
            operator: f("operator")?,
            value: f("value")?,
            effect: f("effect")?,
        });
    }
    let mut conditions = Vec::new();
    for (i, c) in array(get(v, "status.conditions"), "status.conditions")?
        .iter()
        .enumerate()
    {
        let cp = format!("status.conditions[{i}]");
        let f = |k: &str| opt_scalar(c.get(k), &format!("{cp}.{k}"));
        conditions.push(Condition {
            type_: f("type")?.unwrap_or_default(),
            status: f("status")?.unwrap_or_default(),
            reason: f("reason")?,
            message: f("message")?,
        });
    }
    let (requests, sources) = match kind {
        ObjectKind::Pod => pod_requests(spec, spec_path)?,
        _ => vmi_requests(spec, spec_path)?,
    };
    let resource_claims = match kind {
        ObjectKind::Pod => pod_resource_claims(v, spec, spec_path)?,
        _ => Vec::new(),
    };
    Ok(PodInfo {
        kind,
        namespace,
        name,
        node_name,
        phase,
        node_selector,
        required_affinity,
        tolerations,
        conditions,
        requests,
        sources,
        resource_claims,
    })
}

/// A pod's `spec.resourceClaims[]` (DRA), each resolved to its ResourceClaim: the
/// `resourceClaimName`, or for a `resourceClaimTemplateName` the claim named in
/// `status.resourceClaimStatuses[]` (kubernetes/kubernetes
/// `staging/src/k8s.io/api/core/v1/types.go`, `PodResourceClaim`, `PodResourceClaimStatus`).
fn pod_resource_claims(
    v: &Value,
    spec: &Value,
    spec_path: &str,
) -> std::result::Result<Vec<crate::model::dra::PodClaim>, String> {
    let mut generated = BTreeMap::new();
    let sp = "status.resourceClaimStatuses";
    for (i, s) in array(get(v, sp), sp)?.iter().enumerate() {
        let p = format!("{sp}[{i}]");
        if let (Some(n), Some(c)) = (
            opt_scalar(s.get("name"), &format!("{p}.name"))?,
            opt_scalar(
                s.get("resourceClaimName"),
                &format!("{p}.resourceClaimName"),
            )?,
        ) {
            generated.insert(n, c);
        }
    }
    let mut out = Vec::new();
    let rp = format!("{spec_path}.resourceClaims");
    for (i, c) in array(spec.get("resourceClaims"), &rp)?.iter().enumerate() {
        let p = format!("{rp}[{i}]");
        let f = |k: &str| {
            opt_scalar(c.get(k), &format!("{p}.{k}")).map(|o| o.filter(|s| !s.is_empty()))
        };
        let Some(name) = f("name")? else {
            return Err(format!("{p}.name: missing"));
        };
        out.push(crate::model::dra::PodClaim {
            generated_claim_name: generated.get(&name).cloned(),
            resource_claim_name: f("resourceClaimName")?,
            resource_claim_template_name: f("resourceClaimTemplateName")?,
            name,
        });
    }
    Ok(out)
}

type Requests = BTreeMap<String, i64>;

/// The extended-resource requests of one container: `requests`, each absent one
/// defaulted from `limits` (`SetDefaults_Pod`).
fn container_requests(
    c: &Value,
    path: &str,
    sources: &mut Vec<RequestSource>,
) -> std::result::Result<Requests, String> {
    let mut out = Requests::new();
    for field in ["limits", "requests"] {
        let fp = format!("{path}.resources.{field}");
        let m = string_map(get(c, &format!("resources.{field}")), &fp)?;
        for (k, raw) in m {
            if !is_extended_resource(&k) {
                continue;
            }
            let n = whole(&raw).map_err(|e| format!("{fp}[{k:?}]: {e}"))?;
            // requests win over limits; limits only fill absent requests
            if field == "requests" || !out.contains_key(&k) {
                out.insert(k.clone(), n);
            }
            if !sources.iter().any(|s| s.resource == k) {
                sources.push(RequestSource {
                    resource: k,
                    field: fp.clone(),
                });
            }
        }
    }
    Ok(out)
}

fn add_into(a: &mut Requests, b: &Requests) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

fn max_into(a: &mut Requests, b: &Requests) {
    for (k, v) in b {
        let e = a.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

fn pod_requests(
    spec: &Value,
    spec_path: &str,
) -> std::result::Result<(Requests, Vec<RequestSource>), String> {
    let mut sources = Vec::new();
    let mut reqs = Requests::new();
    for (i, c) in array(spec.get("containers"), &format!("{spec_path}.containers"))?
        .iter()
        .enumerate()
    {
        let r = container_requests(c, &format!("{spec_path}.containers[{i}]"), &mut sources)?;
        add_into(&mut reqs, &r);
    }
    // PodRequests (component-helpers): sidecars add to the regular sum and to every later
    // init container; the init phase needs the max of each init container + prior sidecars.
    let mut sidecars = Requests::new();
    let mut init_max = Requests::new();
    for (i, c) in array(
        spec.get("initContainers"),
        &format!("{spec_path}.initContainers"),
    )?
    .iter()
    .enumerate()
    {
        let p = format!("{spec_path}.initContainers[{i}]");
        let r = container_requests(c, &p, &mut sources)?;
        let restart = opt_scalar(c.get("restartPolicy"), &format!("{p}.restartPolicy"))?;
        if restart.as_deref() == Some("Always") {
            add_into(&mut reqs, &r);
            add_into(&mut sidecars, &r);
            max_into(&mut init_max, &sidecars);
        } else {
            let mut t = r;
            add_into(&mut t, &sidecars);
            max_into(&mut init_max, &t);
        }
    }
    max_into(&mut reqs, &init_max);
    let overhead = string_map(spec.get("overhead"), &format!("{spec_path}.overhead"))?;
    for (k, raw) in overhead {
        if is_extended_resource(&k) {
            let n = whole(&raw).map_err(|e| format!("{spec_path}.overhead[{k:?}]: {e}"))?;
            *reqs.entry(k).or_default() += n;
        }
    }
    reqs.retain(|_, v| *v > 0);
    Ok((reqs, sources))
}

fn vmi_requests(
    spec: &Value,
    spec_path: &str,
) -> std::result::Result<(Requests, Vec<RequestSource>), String> {
    let mut reqs = Requests::new();
    let mut sources = Vec::new();
    for list in ["gpus", "hostDevices"] {
        let lp = format!("{spec_path}.domain.devices.{list}");
        for (i, d) in array(get(spec, &format!("domain.devices.{list}")), &lp)?
            .iter()
            .enumerate()
        {
            let fp = format!("{lp}[{i}].deviceName");
            let Some(name) = opt_scalar(d.get("deviceName"), &fp)?.filter(|s| !s.is_empty()) else {
                return Err(format!("{fp}: missing"));
            };
            *reqs.entry(name.clone()).or_default() += 1;
            sources.push(RequestSource {
                resource: name,
                field: fp,
            });
        }
    }
    // Explicit resources on the VMI (spec.domain.resources) are passed to the launcher.
    let mut extra = Vec::new();
    let r = container_requests(
        spec.get("domain").unwrap_or(&Value::Null),
        &format!("{spec_path}.domain"),
        &mut extra,
    )?;
    add_into(&mut reqs, &r);
    sources.extend(extra);
    Ok((reqs, sources))
}

/// A whole, non-negative quantity (extended resources must be integers:
/// `pkg/apis/core/validation/validation.go`, `validateResourceRequirements`).
fn whole(raw: &str) -> std::result::Result<i64, String> {
    let q = Quantity::parse(raw).map_err(|e| format!("{raw:?} is not a quantity ({e})"))?;
    q.to_count().map_err(|why| format!("{raw:?} {why}"))
}

fn string_map(
    v: Option<&Value>,
    path: &str,
) -> std::result::Result<BTreeMap<String, String>, String> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                opt_scalar(Some(v), &format!("{path}[{k:?}]"))
                    .map(|s| (k.clone(), s.unwrap_or_default()))
                    .map_err(String::from)
            })
            .collect(),
        Some(_) => Err(format!("{path}: expected a map")),
    }
}

fn requirements(
    v: Option<&Value>,
    path: &str,
) -> std::result::Result<Vec<SelectorRequirement>, String> {
    let mut out = Vec::new();
    for (i, r) in array(v, path)?.iter().enumerate() {
        let rp = format!("{path}[{i}]");
        let values = array(r.get("values"), &format!("{rp}.values"))?
            .iter()
            .enumerate()
            .map(|(j, x)| {
                opt_scalar(Some(x), &format!("{rp}.values[{j}]")).map(Option::unwrap_or_default)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        out.push(SelectorRequirement {
            key: opt_scalar(r.get("key"), &format!("{rp}.key"))?.unwrap_or_default(),
            operator: opt_scalar(r.get("operator"), &format!("{rp}.operator"))?.unwrap_or_default(),
            values,
        });
    }
    Ok(out)
}

/// A pod from the API, reduced to a [`PodInfo`].
///
/// Errors: [`Error::Runtime`] if the object cannot be serialized or read back (an API
/// object that violates its own schema).
pub fn pod_info(pod: &Pod) -> Result<PodInfo> {
    let mut v = serde_json::to_value(pod)
        .map_err(|e| Error::Runtime(format!("reading a pod from the API: {e}")))?;
    if let Value::Object(m) = &mut v {
        m.insert("kind".into(), Value::String("Pod".into()));
    }
    from_object(&v).map_err(|m| {
        Error::Runtime(format!(
            "pod {}/{}: {m}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("")
        ))
    })
}

/// Lists all pods of all namespaces page by page ([`PAGE_SIZE`] per request, following
/// `continue`).
///
/// Errors: [`Error::Runtime`] when the API server cannot be reached or refuses the list.
pub async fn list_pods(client: &Client) -> Result<Vec<PodInfo>> {
    let api: Api<Pod> = Api::all(client.clone());
    let mut token: Option<String> = None;
    let mut out = Vec::new();
    loop {
        let mut lp = ListParams::default().limit(PAGE_SIZE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api
            .list(&lp)
            .await
            .map_err(|e| crate::input::live::api_error("list pods", &e))?;
        for p in &page.items {
            out.push(pod_info(p)?);
        }
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(out),
        }
    }
}

/// One pod by namespace and name.
///
/// Errors: [`Error::Input`] when it does not exist (404); [`Error::Runtime`] for other
/// API failures.
pub async fn get_pod(client: &Client, namespace: &str, name: &str) -> Result<PodInfo> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match api.get(name).await {
        Ok(p) => pod_info(&p),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            Err(Error::Input(format!("pod {namespace}/{name} not found")))
        }
        Err(e) => Err(crate::input::live::api_error(
            &format!("get pod {namespace}/{name}"),
            &e,
        )),
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> PodInfo {
        let mut v = read_pods_str(s, "t").unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0)
    }

    #[test]
    fn limits_default_requests_and_sidecars() {
        let p = one(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{
            "initContainers":[
              {"name":"side","restartPolicy":"Always","resources":{"limits":{"example.com/x":"1"}}},
              {"name":"init","resources":{"requests":{"example.com/x":"3","nvidia.com/gpu":"2"},"limits":{"nvidia.com/gpu":"2"}}}],
            "containers":[{"name":"a","resources":{"limits":{"nvidia.com/gpu":"1","cpu":"500m"}}},
                          {"name":"b","resources":{"requests":{"nvidia.com/gpu":1},"limits":{"nvidia.com/gpu":1}}}],
            "overhead":{"example.com/x":"1","memory":"10Mi"}}}"#,
        );
        // gpu: max(1+1, 2) = 2; x: max(0+1 sidecar, 3+1) = 4, + overhead 1 = 5
        assert_eq!(p.requests["nvidia.com/gpu"], 2);
        assert_eq!(p.requests["example.com/x"], 5);
        assert!(!p.requests.contains_key("cpu"));
        assert_eq!(p.key(), "ns/p");
        assert!(p.is_unbound());
    }

    #[test]
    fn sidecar_started_after_init_does_not_add_to_it() {
        let p = one(r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
            "initContainers":[
              {"name":"init","resources":{"limits":{"nvidia.com/gpu":"2"}}},
              {"name":"side","restartPolicy":"Always","resources":{"limits":{"nvidia.com/gpu":"1"}}}],
            "containers":[{"name":"a","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#);
        // regular 1 + sidecar 1 = 2; init 2 (no sidecar before it) = 2
        assert_eq!(p.requests["nvidia.com/gpu"], 2);
        assert_eq!(p.namespace, "default");
    }

    #[test]
    fn yaml_vmi_devices() {
        let p = one(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm\n  namespace: gpu-vm\nspec:\n  nodeSelector:\n    a: b\n  domain:\n    devices:\n      gpus:\n      - name: g1\n        deviceName: nvidia.com/GRID_T4_2Q\n      - name: g2\n        deviceName: nvidia.com/GRID_T4_2Q\n",
        );
        assert_eq!(p.kind, ObjectKind::VirtualMachineInstance);
        assert_eq!(p.requests["nvidia.com/GRID_T4_2Q"], 2);
        assert_eq!(p.sources[0].field, "spec.domain.devices.gpus[0].deviceName");
        assert_eq!(p.node_selector["a"], "b");
    }

    #[test]
    fn bad_input_names_field() {
        for (s, want) in [
            ("", "t: empty input"),
            (
                r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"1.5"}}}]}}]}"#,
                r#"t: items[0] (n/p): spec.containers[0].resources.limits["nvidia.com/gpu"]: "1.5" is not a whole number"#,
            ),
            (
                r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n"}}]}"#,
                "items[0] (default/n): kind \"Node\" is not a Pod",
            ),
            (
                r#"{"kind":"Pod","metadata":{}}"#,
                "t: metadata.name: missing",
            ),
            (
                r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"tolerations":{}}}"#,
                "spec.tolerations: expected a list",
            ),
            ("{ nope", "t: "),
            ("kind: Pod\nmetadata: [1\n", "t: "),
        ] {
            let e = read_pods_str(s, "t").unwrap_err();
            let m = e.to_string();
            assert!(e.is_input(), "{e}");
            assert!(m.contains(want), "{s:?} → {m}");
            assert!(!m.contains('\n'));
        }
    }

    #[test]
    fn resource_claims_resolve_templates_through_status() {
        let p = one(r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
            "containers":[{"name":"a","resources":{"claims":[{"name":"gpu"}]}}],
            "resourceClaims":[{"name":"gpu","resourceClaimName":"shared-gpu"},
                              {"name":"vfio","resourceClaimTemplateName":"vfio-tmpl"},
                              {"name":"late","resourceClaimTemplateName":"t"}]},
            "status":{"resourceClaimStatuses":[{"name":"vfio","resourceClaimName":"p-vfio-8xk2c"}]}}"#);
        let names: Vec<_> = p.resource_claims.iter().map(|c| c.claim_name()).collect();
        assert_eq!(names, vec![Some("shared-gpu"), Some("p-vfio-8xk2c"), None]);
        assert_eq!(
            p.resource_claims[1].resource_claim_template_name.as_deref(),
            Some("vfio-tmpl")
        );
        let e = read_pods_str(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"resourceClaims":[{"resourceClaimName":"x"}]}}"#,
            "t",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("t: spec.resourceClaims[0].name: missing"),
            "{e}"
        );
    }

    #[test]
    fn extended_names() {
        assert!(is_extended_resource("nvidia.com/gpu"));
        assert!(!is_extended_resource("cpu"));
        assert!(!is_extended_resource("kubernetes.io/x"));
        assert!(!is_extended_resource("hugepages-2Mi"));
        assert!(!is_extended_resource("requests.nvidia.com/gpu"));
    }
}
