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

use crate::cluster::recipe::KWOK_LEAVE_PENDING_LABEL;
use gpuwl_core::analysis::fit::UNCHECKED_WHEN_ABSENT;
use gpuwl_core::analysis::twin::pod_name;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::pod::PodInfo;

/// Annotation kwok reads to play a node's kubelet (the twin's kwok manages every node
/// anyway; the annotation says so to a reader of the object).
pub(crate) const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// The node address kwok gives every node it initializes (its `--node-ip`,
/// [`crate::cluster::recipe::kwok_controller`]).
const KWOK_NODE_IP: &str = "127.0.0.1";

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

/// The node condition taints kube-controller-manager's node lifecycle controller keeps in
/// step with a node's conditions (kubernetes/kubernetes
/// `pkg/controller/nodelifecycle/node_lifecycle_controller.go`,
/// `taintKeyToNodeConditionMap`), and the cordon's taint it keeps in step with
/// `spec.unschedulable` (the same file, `doNoScheduleTaintingPass`).
const CONTROLLER_TAINTS: [&str; 7] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    UNSCHEDULABLE_TAINT,
];

/// The taint a cordoned node carries (`NoSchedule`), `v1.TaintNodeUnschedulable`.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A twin node's conditions: kwok's for a node it initializes (kwok
/// `pkg/utils/gotpl/funcs.go`, `nodeConditions`, rendered by the `node-initialize` stage,
/// `kustomize/stage/node/fast/node-initialize.yaml`), Ready and no pressure.
const KWOK_NODE_CONDITIONS: [(&str, &str, &str, &str); 5] = [
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "NetworkUnavailable",
        "False",
        "RouteCreated",
        "RouteController created a route",
    ),
];

/// The node's taints as they are in the twin once its node is Ready: the source's, less
/// those kube-controller-manager takes off a Ready node (every `NoSchedule` taint of
/// [`CONTROLLER_TAINTS`]; `not-ready` and `unreachable` with any effect, the `NoExecute`
/// ones by `markNodeAsReachable`, same file), plus `node.kubernetes.io/unschedulable`
/// when the node is cordoned, which that controller adds. Before the twin created its nodes
/// Ready, the controller made these changes itself and the twin waited for them.
fn ready_taints(node: &NodeInfo) -> Vec<Value> {
    let mut taints: Vec<Value> = node
        .taints
        .iter()
        .filter(|t| {
            let controllers = CONTROLLER_TAINTS.contains(&t.key.as_str());
            let unreachable = matches!(
                t.key.as_str(),
                "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
            );
            !(unreachable || controllers && t.effect == "NoSchedule")
        })
        .map(|t| {
            let mut o = json!({"key": t.key, "effect": t.effect});
            if let Some(v) = &t.value {
                o["value"] = json!(v);
            }
            o
        })
        .collect();
    if node.unschedulable {
        taints.push(json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}));
    }
    taints
}

/// The Node object for `node`: its labels, taints ([`ready_taints`]), cordon and both
/// resource maps, and kwok's Ready status ([`KWOK_NODE_CONDITIONS`], phase `Running`, the
/// addresses kwok gives: `127.0.0.1` and the node's name), all in the create: a Node's
/// status is kept on create (kubernetes/kubernetes `pkg/registry/core/node/strategy.go`,
/// `dropDisabledFields`), so kwok's `node-initialize` stage, which selects nodes not Ready,
/// has nothing to write, and with the twin's API server leaving out the not-ready taint
/// ([`crate::cluster::recipe::TWIN_APISERVER_ARGS`]) neither has kube-controller-manager:
/// the node is schedulable at once. kwok still keeps its lease. Allocatable defaults to capacity when the
/// source node has none. A resource every real node lists ([`UNCHECKED_WHEN_ABSENT`]:
/// pods, cpu, memory) that a hand-trimmed dump leaves out gets [`ABSENT_FILL`] in both
/// maps: explain does not check a node for it
/// ([`gpuwl_core::analysis::fit::UNCHECKED_WHEN_ABSENT`]), and the twin's scheduler, counting it
/// 0, would refuse every pod that asks for it where the real node has plenty. A node
/// without `ephemeral-storage` keeps none, as the source's scheduler counts it (0: a
/// virt-launcher pod, which asks for some, does not fit there).
pub fn node_object(node: &NodeInfo) -> Value {
    let taints = ready_taints(node);
    let conditions: Vec<Value> = KWOK_NODE_CONDITIONS
        .iter()
        .map(|(t, s, reason, message)| {
            json!({"type": t, "status": s, "reason": reason, "message": message})
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
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "phase": "Running",
            "addresses": [
                {"type": "InternalIP", "address": KWOK_NODE_IP},
                {"type": "Hostname", "address": node.name},
            ],
        },
    })
}

/// The Pod object for `pod`, bound to its node when `bound` (and it has one), else left
/// to the scheduler. A bound pod carries
/// [`crate::cluster::recipe::KWOK_LEAVE_PENDING_LABEL`]: kwok leaves it `Pending` (the
/// scheduler counts it on its node all the same), one status write fewer; a pod the twin's
/// scheduler binds is made `Running` by kwok as in any cluster. Requests: see the module docs; cpu is written in millicores, the
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
    let mut labels = json!({SOURCE_KIND_LABEL: pod.kind.as_str()});
    if spec.get("nodeName").is_some() {
        labels[KWOK_LEAVE_PENDING_LABEL] = json!("true");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(pod),
            "namespace": pod.namespace,
            "labels": labels,
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

    #[test]
    fn a_node_is_created_ready_with_the_taints_a_ready_node_keeps() {
        let taint = |key: &str, effect: &str| Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
        };
        let mut n = NodeInfo::named("gpu-1");
        n.taints = vec![
            taint("node.kubernetes.io/not-ready", "NoSchedule"),
            taint("node.kubernetes.io/not-ready", "NoExecute"),
            taint("node.kubernetes.io/unreachable", "NoExecute"),
            taint("node.kubernetes.io/memory-pressure", "NoSchedule"),
            // NoExecute pressure taints are not the controller's: kept.
            taint("node.kubernetes.io/disk-pressure", "NoExecute"),
            taint("node.kubernetes.io/unschedulable", "NoSchedule"),
            taint("nvidia.com/gpu", "NoSchedule"),
        ];
        let keys = |v: &Value| -> Vec<String> {
            v["spec"]["taints"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap(),
                        t["effect"].as_str().unwrap()
                    )
                })
                .collect()
        };
        // Not cordoned: the cordon's taint goes with the condition taints.
        let v = node_object(&n);
        assert_eq!(
            keys(&v),
            [
                "node.kubernetes.io/disk-pressure:NoExecute",
                "nvidia.com/gpu:NoSchedule"
            ]
        );
        // Cordoned: the controller's cordon taint, once.
        n.unschedulable = true;
        let v = node_object(&n);
        assert_eq!(
            keys(&v),
            [
                "node.kubernetes.io/disk-pressure:NoExecute",
                "nvidia.com/gpu:NoSchedule",
                "node.kubernetes.io/unschedulable:NoSchedule"
            ]
        );
        assert_eq!(v["spec"]["unschedulable"], true);
        // kwok's Ready status, which its node-initialize stage then leaves alone.
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(v).unwrap();
        let status = node.status.unwrap();
        let conditions: Vec<(String, String)> = status
            .conditions
            .unwrap()
            .into_iter()
            .map(|c| (c.type_, c.status))
            .collect();
        assert_eq!(
            conditions,
            [
                ("Ready", "True"),
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("NetworkUnavailable", "False")
            ]
            .map(|(t, s)| (t.to_string(), s.to_string()))
        );
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let addresses: Vec<(String, String)> = status
            .addresses
            .unwrap()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            addresses,
            [("InternalIP", "127.0.0.1"), ("Hostname", "gpu-1")]
                .map(|(t, a)| (t.to_string(), a.to_string()))
        );
        // Schedulable as the twin checks it before the pending pods go in.
        assert!(crate::cluster::nodes::is_schedulable(
            &serde_json::from_value(node_object(&n)).unwrap()
        ));
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
        // Bound: kwok leaves it Pending; unbound: no nodeName, and kwok makes it Running
        // once the twin's scheduler binds it.
        let labels = p.metadata.labels.unwrap();
        assert_eq!(labels[KWOK_LEAVE_PENDING_LABEL], "true");
        assert_eq!(labels[SOURCE_KIND_LABEL], "Pod");
        let unbound = pod_object(&pod(), false);
        assert!(unbound["spec"].get("nodeName").is_none());
        assert!(
            unbound["metadata"]["labels"]
                .get(KWOK_LEAVE_PENDING_LABEL)
                .is_none(),
            "{unbound}"
        );
        let mut pending = pod();
        pending.node_name = None;
        assert!(
            pod_object(&pending, true)["metadata"]["labels"]
                .get(KWOK_LEAVE_PENDING_LABEL)
                .is_none()
        );
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
