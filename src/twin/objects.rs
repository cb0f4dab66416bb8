//! The twin's objects: a Node and a Pod built from gpuwl's model of the source cluster
//! ([`NodeInfo`], [`PodInfo`]), carrying exactly what the scheduler's filters that gpuwl
//! models read, and nothing that would need the source's other objects (service accounts,
//! config maps, priority classes, runtime classes, volumes).
//!
//! Kept: node labels, taints, `spec.unschedulable`, `status.capacity` and
//! `status.allocatable`; pod namespace and name, `spec.nodeName` (bound pods), the
//! nodeSelector, required node affinity, tolerations, and the effective requests (extended
//! resources, cpu, memory, ephemeral storage, hugepages) as one container's requests (and
//! limits for the extended ones, which must equal the requests, kubernetes/kubernetes
//! `pkg/apis/core/validation/validation.go`). Left out, and said so in every report
//! ([`LEFT_OUT`]): inter-pod (anti-)affinity, topology spread, preferred affinity,
//! priority and preemption, DRA claims.

use serde_json::{Value, json};

use gpuwl_core::analysis::fit::UNCHECKED_WHEN_ABSENT;
use gpuwl_core::analysis::twin::pod_name;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::pod::PodInfo;

/// Annotation kwok reads to play a node's kubelet (the twin's kwok manages every node
/// anyway; the annotation says so to a reader of the object).
pub(crate) const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Label on every pod the twin creates, naming the source object's kind (`Pod`,
/// `VirtualMachineInstance`, `VirtualMachine`).
pub const SOURCE_KIND_LABEL: &str = "gpuwl.local/twin-source-kind";

/// The image of every twin container (never pulled: kwok runs no containers).
pub const TWIN_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// What the twin does not copy of a pod, for the report.
pub const LEFT_OUT: &str = "pod (anti-)affinity, topology spread constraints, preferred node \
affinity, priority/preemption and DRA claims are not copied to the twin";

/// What the twin gives a node for each resource of [`UNCHECKED_WHEN_ABSENT`] its source
/// node does not list (the same order): more than any pod asks.
pub(crate) const ABSENT_FILL: [&str; 3] = ["1k", "1k", "64Ti"];

/// Adds `pod`'s nodeSelector, required node affinity and tolerations to `spec` (a Pod's or
/// a VMI's spec: both spell them the same way), each only when set.
pub fn add_placement(spec: &mut Value, pod: &PodInfo) {
    if !pod.node_selector.is_empty() {
        spec["nodeSelector"] = json!(pod.node_selector);
    }
    if let Some(terms) = &pod.required_affinity {
        spec["affinity"] = json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }});
    }
    if !pod.tolerations.is_empty() {
        spec["tolerations"] = json!(pod.tolerations.as_ref());
    }
}

/// The Node object for `node`: its labels, taints, cordon and both resource maps (the
/// status goes in with the create, as a kubelet registers its node; see
/// [`crate::cluster::nodes::ensure_sim_node`]). Allocatable defaults to capacity when the
/// source node has none. A resource every real node lists ([`UNCHECKED_WHEN_ABSENT`]:
/// pods, cpu, memory) that a hand-trimmed dump leaves out gets [`ABSENT_FILL`] in both
/// maps: explain does not check a node for it
/// ([`gpuwl_core::analysis::fit::UNCHECKED_WHEN_ABSENT`]), and the twin's scheduler, counting it
/// 0, would refuse every pod that asks for it where the real node has plenty. A node
/// without `ephemeral-storage` keeps none, as the source's scheduler counts it (0: a
/// virt-launcher pod, which asks for some, does not fit there).
pub fn node_object(node: &NodeInfo) -> Value {
    let taints: Vec<Value> = node
        .taints
        .iter()
        .map(|t| {
            let mut o = json!({"key": t.key, "effect": t.effect});
            if let Some(v) = &t.value {
                o["value"] = json!(v);
            }
            o
        })
        .collect();
    let mut capacity = node.capacity.clone();
    let mut allocatable = node.allocatable.as_ref().unwrap_or(&node.capacity).clone();
    for (r, fill) in UNCHECKED_WHEN_ABSENT.iter().zip(ABSENT_FILL) {
        for map in [&mut capacity, &mut allocatable] {
            map.entry((*r).to_owned())
                .or_insert_with(|| fill.to_owned());
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": node.labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
        "spec": {"taints": taints, "unschedulable": node.unschedulable},
        "status": {"capacity": capacity, "allocatable": allocatable},
    })
}

/// The Pod object for `pod`, bound to its node when `bound` (and it has one), else left
/// to the scheduler. Requests: see the module docs; cpu is written in millicores, the
/// other non-extended resources in bytes.
pub fn pod_object(pod: &PodInfo, bound: bool) -> Value {
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    for (r, n) in pod.requests.iter() {
        requests.insert(r.clone(), json!(n.to_string()));
        limits.insert(r.clone(), json!(n.to_string()));
    }
    for (r, n) in pod.other_requests.iter() {
        let q = if r == "cpu" {
            format!("{n}m")
        } else {
            n.to_string()
        };
        requests.insert(r.clone(), json!(q));
        if r.starts_with("hugepages-") {
            // hugepages need limits equal to requests (validation.go).
            limits.insert(r.clone(), json!(n.to_string()));
        }
    }
    let mut spec = json!({
        "containers": [{
            "name": "c",
            "image": TWIN_IMAGE,
            "resources": {"requests": requests, "limits": limits},
        }],
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 0,
        "enableServiceLinks": false,
    });
    add_placement(&mut spec, pod);
    if bound && let Some(n) = &pod.node_name {
        spec["nodeName"] = json!(n);
    }
    // A gated pod stays gated in the twin: the scheduler skips it there too. (A bound
    // pod cannot carry gates: the API server refuses nodeName with schedulingGates.)
    if !pod.scheduling_gates.is_empty() && spec.get("nodeName").is_none() {
        spec["schedulingGates"] = json!(
            pod.scheduling_gates
                .iter()
                .map(|g| json!({"name": g}))
                .collect::<Vec<_>>()
        );
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(pod),
            "namespace": pod.namespace,
            "labels": {SOURCE_KIND_LABEL: pod.kind.as_str()},
        },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuwl_core::model::node::Taint;
    use gpuwl_core::model::pod::{ObjectKind, SelectorRequirement, SelectorTerm, Toleration};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    #[test]
    fn a_node_keeps_labels_taints_and_both_maps() {
        let mut n = NodeInfo::named("gpu-1");
        n.labels
            .insert("nvidia.com/gpu.workload.config".into(), "container".into());
        n.taints.push(Taint {
            key: "nvidia.com/gpu".into(),
            value: None,
            effect: "NoSchedule".into(),
        });
        n.capacity.insert("nvidia.com/gpu".into(), "4".into());
        n.capacity.insert("cpu".into(), "32".into());
        let v = node_object(&n);
        assert_eq!(
            v["metadata"]["labels"]["nvidia.com/gpu.workload.config"],
            "container"
        );
        assert_eq!(v["spec"]["taints"][0]["key"], "nvidia.com/gpu");
        assert!(v["spec"]["taints"][0].get("value").is_none());
        // No allocatable map: capacity stands in.
        assert_eq!(v["status"]["allocatable"]["nvidia.com/gpu"], "4");
        n.allocatable = Some(BTreeMap::from([("nvidia.com/gpu".into(), "3".into())]));
        assert_eq!(
            node_object(&n)["status"]["allocatable"]["nvidia.com/gpu"],
            "3"
        );
        // The object is a valid Node.
        // A trimmed dump's node lists no pods or memory: the twin's node has room for
        // them, as explain assumes; what the dump lists is kept. No ephemeral-storage
        // stays none, as the scheduler counts it (issue 47).
        assert_eq!(v["status"]["capacity"]["cpu"], "32");
        assert_eq!(v["status"]["capacity"]["pods"], "1k");
        assert!(
            v["status"]["allocatable"]
                .get("ephemeral-storage")
                .is_none()
        );
        assert_eq!(v["status"]["allocatable"]["memory"], "64Ti");
        let _: k8s_openapi::api::core::v1::Node = serde_json::from_value(v).unwrap();
    }

    fn pod() -> PodInfo {
        PodInfo {
            kind: ObjectKind::Pod,
            namespace: "ml".into(),
            name: "train".into(),
            node_name: Some("gpu-1".into()),
            phase: Some("Running".into()),
            node_selector: BTreeMap::from([("pool".into(), "a".into())]),
            required_affinity: Some(vec![SelectorTerm {
                match_expressions: vec![SelectorRequirement {
                    key: "zone".into(),
                    operator: "In".into(),
                    values: vec!["z1".into()],
                }],
                match_fields: vec![],
            }]),
            scheduling_gates: Vec::new(),
            tolerations: Arc::from(vec![Toleration {
                key: Some("nvidia.com/gpu".into()),
                operator: Some("Exists".into()),
                value: None,
                effect: Some("NoSchedule".into()),
            }]),
            conditions: vec![],
            requests: Arc::new(BTreeMap::from([("nvidia.com/gpu".into(), 2)])),
            other_requests: Arc::new(BTreeMap::from([
                ("cpu".into(), 1500),
                ("memory".into(), 4_294_967_296),
                ("hugepages-2Mi".into(), 2_097_152),
            ])),
            status_reason: None,
            status_message: None,
            sources: vec![],
            spec_problems: Vec::new(),
            resource_claims: vec![],
            vmi_owned_by_vm: None,
            vm_memory: None,
            vmi_shape: None,
        }
    }

    #[test]
    fn a_pod_keeps_its_requests_and_constraints() {
        let v = pod_object(&pod(), true);
        let c = &v["spec"]["containers"][0]["resources"];
        assert_eq!(c["requests"]["nvidia.com/gpu"], "2");
        assert_eq!(c["limits"]["nvidia.com/gpu"], "2");
        assert_eq!(c["requests"]["cpu"], "1500m");
        assert_eq!(c["requests"]["memory"], "4294967296");
        assert_eq!(c["limits"]["hugepages-2Mi"], "2097152");
        assert!(c["limits"].get("cpu").is_none());
        assert_eq!(v["spec"]["nodeName"], "gpu-1");
        assert_eq!(v["spec"]["nodeSelector"]["pool"], "a");
        let term = &v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0];
        assert_eq!(term["matchExpressions"][0]["values"][0], "z1");
        assert_eq!(v["spec"]["tolerations"][0]["operator"], "Exists");
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(v).unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("train"));
        // Unbound: no nodeName.
        assert!(pod_object(&pod(), false)["spec"].get("nodeName").is_none());
        // Gates travel with an unbound pod (the twin's scheduler skips it too), never
        // with a bound one (the API server refuses nodeName with gates).
        let mut gated = pod();
        gated.scheduling_gates = vec!["example.com/quota".into()];
        assert_eq!(
            pod_object(&gated, false)["spec"]["schedulingGates"][0]["name"],
            "example.com/quota"
        );
        assert!(
            pod_object(&gated, true)["spec"]
                .get("schedulingGates")
                .is_none()
        );
    }

    #[test]
    fn a_vmi_becomes_its_launcher_pod() {
        let mut p = pod();
        p.kind = ObjectKind::VirtualMachineInstance;
        p.name = "win10".into();
        let v = pod_object(&p, false);
        assert_eq!(v["metadata"]["name"], "virt-launcher-win10-gpuwl");
        assert_eq!(
            v["metadata"]["labels"][SOURCE_KIND_LABEL],
            "VirtualMachineInstance"
        );
        let back = PodInfo {
            kind: ObjectKind::Pod,
            name: v["metadata"]["name"].as_str().unwrap().into(),
            ..p
        };
        assert_eq!(back.launcher_vmi(), Some("win10"));
    }
}
