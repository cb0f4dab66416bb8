//! Reading Kueue's objects (ResourceFlavor, ClusterQueue, LocalQueue, Workload) into
//! [`KueueObjects`]: from the API's JSON ([`from_values`], gpuwl's live reads and
//! snapshots) or from a file (`--kueue FILE`, [`read_path`]: one object, a List such as
//! `kubectl get resourceflavors,clusterqueues,localqueues,workloads -A -o yaml` prints, or
//! several YAML documents).
//!
//! Field names: kubernetes-sigs/kueue `apis/kueue/v1beta2/{resourceflavor,clusterqueue,
//! localqueue,workload}_types.go` (v1beta1's `spec.cohort` is read as the cohort too).
//! Objects of other kinds in a List are skipped.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::decode::document::{self, array, opt_scalar};
use crate::error::{Error, FieldError, Result};
use crate::model::kueue::{
    ClusterQueue, FlavorQuotas, KueueObjects, LocalQueue, PodSet, PodSetAssignment, ResourceFlavor,
    ResourceGroup, ResourceQuota, WlCondition, Workload,
};
use crate::model::node::Taint;
use crate::model::pod::Toleration;
use crate::model::quantity::Quantity;

const EXPECTING: &str = "Kueue objects (ResourceFlavor, ClusterQueue, LocalQueue, Workload)";

type F<T> = std::result::Result<T, FieldError>;

fn s(v: &Value, key: &str, path: &str) -> F<String> {
    Ok(opt_scalar(v.get(key), &format!("{path}.{key}"))?.unwrap_or_default())
}

/// `text` as a quantity in thousandths (rounded up); `path` names the field in the error.
fn milli(v: &Value, path: &str) -> F<(i64, String)> {
    let raw = match v {
        Value::String(t) => t.clone(),
        Value::Number(n) => n.to_string(),
        Value::Null => return Ok((0, String::new())),
        _ => return Err(FieldError::new(path, "not a quantity")),
    };
    let q = Quantity::parse(&raw).map_err(|e| FieldError::new(path, format!("{raw:?}: {e}")))?;
    Ok((q.scaled_ceil(3), raw))
}

fn string_map(v: Option<&Value>, path: &str) -> F<BTreeMap<String, String>> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                let val = opt_scalar(Some(v), &format!("{path}.{k}"))?.unwrap_or_default();
                Ok((k.clone(), val))
            })
            .collect(),
        Some(_) => Err(FieldError::new(path, "not a map")),
    }
}

fn taints(v: Option<&Value>, path: &str) -> F<Vec<Taint>> {
    array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = format!("{path}[{i}]");
            Ok(Taint {
                key: s(t, "key", &p)?,
                value: opt_scalar(t.get("value"), &format!("{p}.value"))?,
                effect: s(t, "effect", &p)?,
            })
        })
        .collect()
}

fn tolerations(v: Option<&Value>, path: &str) -> F<Vec<Toleration>> {
    array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = format!("{path}[{i}]");
            let f = |k: &str| {
                opt_scalar(t.get(k), &format!("{p}.{k}")).map(|o| o.filter(|s| !s.is_empty()))
            };
            Ok(Toleration {
                key: f("key")?,
                operator: f("operator")?,
                value: f("value")?,
                effect: f("effect")?,
            })
        })
        .collect()
}

fn meta(o: &Value, key: &str) -> F<String> {
    s(o.get("metadata").unwrap_or(&Value::Null), key, "metadata")
}

/// A ResourceFlavor object.
pub fn flavor(o: &Value) -> F<ResourceFlavor> {
    let spec = o.get("spec").unwrap_or(&Value::Null);
    Ok(ResourceFlavor {
        name: meta(o, "name")?,
        node_labels: string_map(spec.get("nodeLabels"), "spec.nodeLabels")?,
        node_taints: taints(spec.get("nodeTaints"), "spec.nodeTaints")?,
        tolerations: tolerations(spec.get("tolerations"), "spec.tolerations")?,
    })
}

fn group(g: &Value, p: &str) -> F<ResourceGroup> {
    let covered = array(g.get("coveredResources"), &format!("{p}.coveredResources"))?
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(opt_scalar(Some(c), &format!("{p}.coveredResources[{i}]"))?.unwrap_or_default())
        })
        .collect::<F<Vec<String>>>()?;
    let mut flavors = Vec::new();
    for (i, f) in array(g.get("flavors"), &format!("{p}.flavors"))?
        .iter()
        .enumerate()
    {
        let fp = format!("{p}.flavors[{i}]");
        let mut resources = Vec::new();
        for (j, r) in array(f.get("resources"), &format!("{fp}.resources"))?
            .iter()
            .enumerate()
        {
            let rp = format!("{fp}.resources[{j}]");
            let (nominal_milli, nominal_raw) = milli(
                r.get("nominalQuota").unwrap_or(&Value::Null),
                &format!("{rp}.nominalQuota"),
            )?;
            let limit = |key: &str| -> F<Option<i64>> {
                match r.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => Ok(Some(milli(v, &format!("{rp}.{key}"))?.0)),
                }
            };
            resources.push(ResourceQuota {
                name: s(r, "name", &rp)?,
                nominal_milli,
                nominal_raw,
                borrowing_limit_milli: limit("borrowingLimit")?,
                lending_limit_milli: limit("lendingLimit")?,
            });
        }
        flavors.push(FlavorQuotas {
            flavor: s(f, "name", &fp)?,
            resources,
        });
    }
    Ok(ResourceGroup { covered, flavors })
}

/// A ClusterQueue object.
pub fn cluster_queue(o: &Value) -> F<ClusterQueue> {
    let spec = o.get("spec").unwrap_or(&Value::Null);
    let groups = array(spec.get("resourceGroups"), "spec.resourceGroups")?
        .iter()
        .enumerate()
        .map(|(i, g)| group(g, &format!("spec.resourceGroups[{i}]")))
        .collect::<F<Vec<_>>>()?;
    let cohort = match opt_scalar(spec.get("cohortName"), "spec.cohortName")? {
        Some(c) => Some(c),
        None => opt_scalar(spec.get("cohort"), "spec.cohort")?,
    }
    .filter(|c| !c.is_empty());
    let try_next_flavor_when_borrowing = opt_scalar(
        spec.get("flavorFungibility")
            .and_then(|f| f.get("whenCanBorrow")),
        "spec.flavorFungibility.whenCanBorrow",
    )?
    .is_some_and(|w| w == "TryNextFlavor");
    let mut reserved: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let status = o.get("status").unwrap_or(&Value::Null);
    for (i, f) in array(
        status.get("flavorsReservation"),
        "status.flavorsReservation",
    )?
    .iter()
    .enumerate()
    {
        let p = format!("status.flavorsReservation[{i}]");
        let name = s(f, "name", &p)?;
        for (j, r) in array(f.get("resources"), &format!("{p}.resources"))?
            .iter()
            .enumerate()
        {
            let rp = format!("{p}.resources[{j}]");
            let (total, _) = milli(
                r.get("total").unwrap_or(&Value::Null),
                &format!("{rp}.total"),
            )?;
            reserved
                .entry(name.clone())
                .or_default()
                .insert(s(r, "name", &rp)?, total);
        }
    }
    Ok(ClusterQueue {
        name: meta(o, "name")?,
        cohort,
        groups,
        try_next_flavor_when_borrowing,
        reserved,
    })
}

/// A LocalQueue object.
pub fn local_queue(o: &Value) -> F<LocalQueue> {
    let spec = o.get("spec").unwrap_or(&Value::Null);
    Ok(LocalQueue {
        namespace: meta(o, "namespace")?,
        name: meta(o, "name")?,
        cluster_queue: s(spec, "clusterQueue", "spec")?,
    })
}

/// Per pod: the containers' requests (a limit where no request), in thousandths.
fn template_requests(t: &Value, p: &str) -> F<BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    let spec = t.get("spec").unwrap_or(&Value::Null);
    for (i, c) in array(spec.get("containers"), &format!("{p}.spec.containers"))?
        .iter()
        .enumerate()
    {
        let res = c.get("resources").unwrap_or(&Value::Null);
        let cp = format!("{p}.spec.containers[{i}].resources");
        let req = res.get("requests").and_then(Value::as_object);
        let lim = res.get("limits").and_then(Value::as_object);
        let mut names: Vec<&String> = req.map(|m| m.keys().collect()).unwrap_or_default();
        names.extend(
            lim.map(|m| m.keys().collect::<Vec<_>>())
                .unwrap_or_default(),
        );
        names.sort_unstable();
        names.dedup();
        for n in names {
            let (v, field) = match req.and_then(|m| m.get(n)) {
                Some(v) => (v, "requests"),
                None => (lim.and_then(|m| m.get(n)).unwrap_or(&Value::Null), "limits"),
            };
            let (m, _) = milli(v, &format!("{cp}.{field}.{n}"))?;
            let e = out.entry(n.clone()).or_default();
            *e = e.saturating_add(m);
        }
    }
    Ok(out)
}

fn conditions(v: Option<&Value>, path: &str) -> F<Vec<WlCondition>> {
    array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = format!("{path}[{i}]");
            Ok(WlCondition {
                type_: s(c, "type", &p)?,
                status: s(c, "status", &p)?,
                reason: s(c, "reason", &p)?,
                message: s(c, "message", &p)?,
            })
        })
        .collect()
}

fn owner(o: &Value) -> Option<String> {
    let refs = o.get("metadata")?.get("ownerReferences")?.as_array()?;
    let r = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .or(refs.first())?;
    Some(format!(
        "{}/{}",
        r.get("kind")?.as_str()?,
        r.get("name")?.as_str()?
    ))
}

/// A Workload object.
pub fn workload(o: &Value) -> F<Workload> {
    let spec = o.get("spec").unwrap_or(&Value::Null);
    let mut pod_sets = Vec::new();
    for (i, ps) in array(spec.get("podSets"), "spec.podSets")?
        .iter()
        .enumerate()
    {
        let p = format!("spec.podSets[{i}]");
        let count = ps.get("count").and_then(Value::as_i64).unwrap_or(1);
        pod_sets.push(PodSet {
            name: s(ps, "name", &p)?,
            count,
            requests: template_requests(
                ps.get("template").unwrap_or(&Value::Null),
                &format!("{p}.template"),
            )?,
        });
    }
    let status = o.get("status").unwrap_or(&Value::Null);
    let admission = status.get("admission").filter(|a| !a.is_null());
    let mut assignments = Vec::new();
    if let Some(a) = admission {
        for (i, psa) in array(
            a.get("podSetAssignments"),
            "status.admission.podSetAssignments",
        )?
        .iter()
        .enumerate()
        {
            let p = format!("status.admission.podSetAssignments[{i}]");
            assignments.push(PodSetAssignment {
                name: s(psa, "name", &p)?,
                flavors: string_map(psa.get("flavors"), &format!("{p}.flavors"))?,
            });
        }
    }
    Ok(Workload {
        namespace: meta(o, "namespace")?,
        name: meta(o, "name")?,
        owner: owner(o),
        queue_name: s(spec, "queueName", "spec")?,
        pod_sets,
        conditions: conditions(status.get("conditions"), "status.conditions")?,
        admitted_to: match admission {
            Some(a) => Some(s(a, "clusterQueue", "status.admission")?).filter(|c| !c.is_empty()),
            None => None,
        },
        assignments,
    })
}

/// Adds `o` to `out` by its `kind` (objects of other kinds are skipped). `where_` prefixes
/// the field path in errors (`items[3].`).
fn add(out: &mut KueueObjects, o: &Value, where_: &str) -> F<()> {
    let wrap = |e: FieldError| FieldError::new(format!("{where_}{}", e.field), e.problem);
    match o.get("kind").and_then(Value::as_str) {
        Some("ResourceFlavor") => out.flavors.push(flavor(o).map_err(wrap)?),
        Some("ClusterQueue") => out.cluster_queues.push(cluster_queue(o).map_err(wrap)?),
        Some("LocalQueue") => out.local_queues.push(local_queue(o).map_err(wrap)?),
        Some("Workload") => out.workloads.push(workload(o).map_err(wrap)?),
        _ => {}
    }
    Ok(())
}

/// Sorts every list of `o` (flavors and ClusterQueues by name, the rest by namespace and
/// name).
pub fn sort(o: &mut KueueObjects) {
    o.flavors.sort_by(|a, b| a.name.cmp(&b.name));
    o.cluster_queues.sort_by(|a, b| a.name.cmp(&b.name));
    o.local_queues
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    o.workloads
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
}

/// The Kueue objects among `values` (API objects with `kind` set; Lists are opened).
///
/// Errors: [`FieldError`] naming the item and field of the wrong type.
pub fn from_values(values: &[Value]) -> F<KueueObjects> {
    let mut out = KueueObjects::default();
    for (i, v) in values.iter().enumerate() {
        match v.get("items").and_then(Value::as_array) {
            Some(items) => {
                for (j, o) in items.iter().enumerate() {
                    add(&mut out, o, &format!("[{i}].items[{j}]."))?;
                }
            }
            None => add(&mut out, v, &format!("[{i}]."))?,
        }
    }
    sort(&mut out);
    Ok(out)
}

/// Parses Kueue objects from text (one object, a List, or YAML documents separated by
/// `---` lines); `name` starts every error message.
///
/// Errors: [`Error::Input`] naming the file and field: unreadable, empty, invalid JSON/YAML,
/// no Kueue object at all, a field of the wrong type.
pub fn read_str(text: &str, name: &str) -> Result<KueueObjects> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if line.trim_end() == "---" {
            if !cur.trim().is_empty() {
                docs.push(std::mem::take(&mut cur));
            }
            cur.clear();
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    if !cur.trim().is_empty() || docs.is_empty() {
        docs.push(cur);
    }
    let values = docs
        .iter()
        .map(|d| document::parse(d, name, EXPECTING))
        .collect::<Result<Vec<_>>>()?;
    let objects = from_values(&values).map_err(|e| Error::field(name, e))?;
    if objects.is_empty() {
        return Err(Error::file(
            name,
            format!(
                "no ResourceFlavor, ClusterQueue, LocalQueue or Workload: expected {EXPECTING}"
            ),
        ));
    }
    Ok(objects)
}

/// Reads Kueue objects from `path` (`-` for stdin). Errors as [`read_str`].
pub fn read_path(path: &Path) -> Result<KueueObjects> {
    let name = path.display().to_string();
    let text = document::read_text(path)?;
    read_str(&text, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_of_the_four_kinds_is_read_with_quotas_and_requests() {
        let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: passthrough}
  spec:
    nodeLabels: {nvidia.com/gpu.workload.config: vm-passthrough}
    tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: gpus}
  spec:
    cohortName: lab
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: passthrough
        resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: "2"}]
  status:
    flavorsReservation:
    - name: passthrough
      resources: [{name: nvidia.com/gpu, total: "1"}]
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {name: team, namespace: ml}
  spec: {clusterQueue: gpus}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata:
    name: job-train-1a2b3
    namespace: ml
    ownerReferences: [{kind: Job, name: train, controller: true, apiVersion: batch/v1, uid: u}]
  spec:
    queueName: team
    podSets:
    - name: main
      count: 2
      template:
        spec:
          containers:
          - name: c
            resources:
              requests: {cpu: 500m}
              limits: {nvidia.com/gpu: "1"}
  status:
    conditions:
    - {type: QuotaReserved, status: "False", reason: Pending, message: "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor passthrough, request > maximum capacity (4 > 0)"}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: skipped}}
"#;
        let o = read_str(text, "kueue.yaml").unwrap();
        assert_eq!(o.flavors.len(), 1);
        assert_eq!(
            o.flavors[0].node_labels["nvidia.com/gpu.workload.config"],
            "vm-passthrough"
        );
        assert_eq!(o.flavors[0].tolerations[0].key.as_deref(), Some("gpu"));
        let cq = &o.cluster_queues[0];
        assert_eq!(cq.cohort.as_deref(), Some("lab"));
        assert_eq!(cq.groups[0].covered, ["nvidia.com/gpu"]);
        assert_eq!(cq.groups[0].flavors[0].resources[0].nominal_milli, 4000);
        assert_eq!(
            cq.groups[0].flavors[0].resources[0].borrowing_limit_milli,
            Some(2000)
        );
        assert_eq!(
            cq.groups[0].flavors[0].resources[0].lending_limit_milli,
            None
        );
        assert_eq!(cq.reserved["passthrough"]["nvidia.com/gpu"], 1000);
        assert_eq!(o.local_queues[0].cluster_queue, "gpus");
        let w = &o.workloads[0];
        assert_eq!(w.owner.as_deref(), Some("Job/train"));
        assert_eq!(w.total_milli("nvidia.com/gpu"), 2000);
        assert_eq!(w.total_milli("cpu"), 1000);
        assert!(!w.is("QuotaReserved"));
        assert!(
            w.condition("QuotaReserved")
                .unwrap()
                .message
                .contains("4 > 0")
        );
    }

    #[test]
    fn a_bad_quota_names_the_file_and_field() {
        let v = json!({"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {"resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4x"}]}]}]}});
        let e = read_str(&v.to_string(), "q.json").unwrap_err().to_string();
        assert!(
            e.contains("q.json")
                && e.contains("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
            "{e}"
        );
    }

    #[test]
    fn multiple_documents_and_no_kueue_object() {
        let two = "kind: ResourceFlavor\nmetadata: {name: a}\n---\nkind: ResourceFlavor\nmetadata: {name: b}\n";
        let o = read_str(two, "f.yaml").unwrap();
        assert_eq!(
            o.flavors
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        let e = read_str("kind: ConfigMap\nmetadata: {name: x}\n", "f.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("f.yaml") && e.contains("no ResourceFlavor"),
            "{e}"
        );
    }
}
