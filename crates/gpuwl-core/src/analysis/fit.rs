//! The kube-scheduler's filters, node by node, for one pending pod: which filter rejects
//! each node and with which of the scheduler's own reasons — what its `0/N nodes are
//! available: …` message counts.
//!
//! Modelled, in the order of the default profile's filter plugins (kubernetes/kubernetes
//! `pkg/scheduler/apis/config/v1/default_plugins.go`); a node's reasons are those of the
//! first plugin that rejects it (`pkg/scheduler/framework/runtime/framework.go`,
//! `RunFilterPlugins` stops there):
//! 1. NodeUnschedulable (`pkg/scheduler/framework/plugins/nodeunschedulable`):
//!    `spec.unschedulable` unless the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`
//!    — "node(s) were unschedulable";
//! 2. TaintToleration (`plugins/tainttoleration`): a `NoSchedule`/`NoExecute` taint no
//!    toleration tolerates — "node(s) had untolerated taint(s)" (before 1.35 the taint was
//!    named: "node(s) had untolerated taint {key: value}");
//! 3. NodeAffinity (`plugins/nodeaffinity`): `nodeSelector` and required node affinity —
//!    "node(s) didn't match Pod's node affinity/selector"; when every term of the affinity
//!    names nodes with `matchFields metadata.name In`, PreFilter keeps only those and the
//!    others are not filtered at all: they count as "node(s) didn't satisfy plugin(s)
//!    \[NodeAffinity\]" whatever their cordon or taints (`pkg/scheduler/schedule_one.go`,
//!    `findNodesThatFitPod`);
//! 4. NodeResourcesFit (`plugins/noderesources/fit.go`, `fitsRequest`): "Too many pods"
//!    when the node's pods + 1 exceed allocatable `pods`; then, for every resource the pod
//!    requests (> 0) — cpu (millicores), memory, ephemeral-storage, hugepages-*, extended
//!    resources — "Insufficient NAME" when the request exceeds allocatable − requested by
//!    the node's pods. Every short resource is reported.
//!
//! A node that does not list `pods`, `cpu` or `memory` at all (a dump trimmed by hand; the
//! kubelet always reports them) is not checked for that resource. A node without
//! `ephemeral-storage` has none, as for the scheduler (`fitsRequest` compares with the
//! node's allocatable, 0 when absent): a kubelet without local storage capacity isolation,
//! or a simulated node, does not list it, and a pod asking for it (every virt-launcher pod
//! asks KubeVirt's 50M, kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`
//! `WithEphemeralStorageRequest`) stays Pending there.
//!
//! Requests are the pod's effective requests ([`PodInfo::requests`],
//! [`PodInfo::other_requests`]); a node's requested sums those of the pods bound to it
//! that are not `Succeeded`/`Failed` (the scheduler's pod informer leaves those out).
//!
//! Not modelled (they can keep a pod Pending too, and explain says so when no modelled
//! filter does): NodePorts (host ports), volumes (VolumeRestrictions, NodeVolumeLimits,
//! VolumeBinding, VolumeZone), PodTopologySpread, InterPodAffinity, scheduling gates,
//! DynamicResources (DRA, explained by [`crate::analysis::dra`]), a scheduler's
//! ignoredResources or added node affinity, in-place resized pods' allocated resources.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::placement::{self, tolerates};
use crate::model::node::{NodeInfo, Taint};
use crate::model::pod::PodInfo;

/// Resources every real node lists: a node (of a hand-trimmed dump) without one of them is
/// not checked for it, where the scheduler would count 0. Extended resources, hugepages
/// and `ephemeral-storage` absent from a node are 0, as for the scheduler (a node may
/// really lack `ephemeral-storage`; see the module docs).
pub const UNCHECKED_WHEN_ABSENT: [&str; 3] = ["pods", "cpu", "memory"];

pub(crate) use crate::analysis::placement::UNSCHEDULABLE_TAINT;

/// Why the scheduler rejects a node, one of its reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "filter", rename_all = "kebab-case")]
pub enum Failure {
    /// NodeUnschedulable: the node is cordoned.
    Unschedulable,
    /// TaintToleration: the first untolerated `NoSchedule`/`NoExecute` taint.
    Taint {
        /// The taint.
        taint: Taint,
    },
    /// NodeAffinity: nodeSelector or required node affinity does not match.
    NodeAffinity,
    /// NodeAffinity's PreFilter: the affinity names other nodes (`matchFields`).
    NotNamed,
    /// NodeResourcesFit: no pod slot left.
    TooManyPods {
        /// Allocatable `pods`.
        allowed: i64,
        /// Pods on the node.
        used: i64,
    },
    /// NodeResourcesFit: a resource short.
    Insufficient {
        /// Resource name (`cpu`, `memory`, `nvidia.com/gpu`, ...).
        resource: String,
        /// The pod's request (cpu in millicores, else whole units).
        requested: i64,
        /// The node's allocatable, same units.
        allocatable: i64,
        /// Requested by the node's pods, same units.
        used: i64,
    },
}

impl Failure {
    /// The scheduler's reason string for this failure (as of v1.35/v1.36).
    pub fn reason(&self) -> String {
        match self {
            Failure::Unschedulable => "node(s) were unschedulable".into(),
            Failure::Taint { .. } => "node(s) had untolerated taint(s)".into(),
            Failure::NodeAffinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Failure::NotNamed => "node(s) didn't satisfy plugin(s) [NodeAffinity]".into(),
            Failure::TooManyPods { .. } => "Too many pods".into(),
            Failure::Insufficient { resource, .. } => format!("Insufficient {resource}"),
        }
    }

    /// Whether this is a placement rule (cordon, taint, selector/affinity), not capacity.
    pub(crate) fn is_placement(&self) -> bool {
        matches!(
            self,
            Failure::Unschedulable
                | Failure::Taint { .. }
                | Failure::NodeAffinity
                | Failure::NotNamed
        )
    }
}

/// One node as the scheduler's filters see the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFit {
    /// Node name.
    pub node: String,
    /// The reasons the scheduler reports for the node: those of the first filter that
    /// rejects it (empty: the node passes every modelled filter).
    pub reasons: Vec<Failure>,
    /// Every modelled filter's failures, in filter order (the scheduler stops at the
    /// first; these say what would still block once that is fixed).
    pub all: Vec<Failure>,
}

impl NodeFit {
    /// Whether every modelled filter passes.
    pub fn passes(&self) -> bool {
        self.all.is_empty()
    }

    /// The capacity failures (NodeResourcesFit) among [`NodeFit::all`].
    pub fn capacity(&self) -> impl Iterator<Item = &Failure> {
        self.all.iter().filter(|f| !f.is_placement())
    }
}

/// A node's allocatable in the scheduler's units: cpu in millicores, the rest in whole
/// units, rounded up; an unreadable quantity counts 0.
pub fn allocatable(node: &NodeInfo) -> BTreeMap<String, i64> {
    let field = node.advertising_field();
    node.resource_names()
        .into_iter()
        .filter_map(|r| {
            let q = node.quantity(field, r)?.ok()?;
            let scale = if r == "cpu" { 3 } else { 0 };
            Some((r.to_owned(), q.scaled_ceil(scale)))
        })
        .collect()
}

/// What the pods bound to one node request, in the scheduler's units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// Per resource.
    pub resources: BTreeMap<String, i64>,
    /// Number of pods.
    pub pods: i64,
}

/// Per node: what its bound, non-terminal pods request (the scheduler's `NodeInfo.Requested`
/// and `len(NodeInfo.Pods)`).
pub fn requested(pods: &[PodInfo]) -> BTreeMap<String, Requested> {
    let mut out: BTreeMap<String, Requested> = BTreeMap::new();
    for p in pods.iter().filter(|p| !p.is_terminal()) {
        let Some(n) = &p.node_name else { continue };
        let r = out.entry(n.clone()).or_default();
        r.pods = r.pods.saturating_add(1);
        for (k, v) in p.requests.iter().chain(p.other_requests.iter()) {
            let e = r.resources.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
    }
    out
}

/// The node names a required node affinity confines the pod to by `matchFields
/// metadata.name In` in every term (NodeAffinity's PreFilter), or `None` when some term
/// does not.
fn named_nodes(pod: &PodInfo) -> Option<BTreeSet<String>> {
    let terms = pod.required_affinity.as_ref()?;
    if terms.is_empty() {
        return None;
    }
    let mut all = BTreeSet::new();
    for t in terms {
        let mut term: Option<BTreeSet<String>> = None;
        for r in &t.match_fields {
            if r.key == "metadata.name" && r.operator == "In" {
                let s: BTreeSet<String> = r.values.iter().cloned().collect();
                term = Some(match term {
                    None => s,
                    Some(t) => t.intersection(&s).cloned().collect(),
                });
            }
        }
        all.extend(term?);
    }
    Some(all)
}

/// Runs the modelled filters for `pod` on every node; `requested` from [`requested`]
/// (`None` when the pods are unknown: capacity is then checked against allocatable alone).
pub fn filter(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    requested: Option<&BTreeMap<String, Requested>>,
) -> Vec<NodeFit> {
    let named = named_nodes(pod);
    let empty = Requested::default();
    nodes
        .iter()
        .map(|n| {
            let mut stages: Vec<Vec<Failure>> = Vec::new();
            // 0. NodeAffinity's PreFilter: a node the affinity does not name is not
            // filtered at all.
            let unnamed = named.as_ref().is_some_and(|s| !s.contains(&n.name));
            if unnamed {
                stages.push(vec![Failure::NotNamed]);
            }
            // 1. NodeUnschedulable
            let cordon = Taint {
                key: UNSCHEDULABLE_TAINT.into(),
                value: None,
                effect: "NoSchedule".into(),
            };
            if n.unschedulable && !pod.tolerations.iter().any(|t| tolerates(t, &cordon)) {
                stages.push(vec![Failure::Unschedulable]);
            }
            // 2. TaintToleration: the first untolerated taint.
            if let Some(t) = n.taints.iter().find(|t| {
                matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                    && !pod.tolerations.iter().any(|tol| tolerates(tol, t))
            }) {
                stages.push(vec![Failure::Taint { taint: t.clone() }]);
            }
            // 3. NodeAffinity
            if !unnamed
                && placement::exclusions(pod, n).iter().any(|x| {
                    matches!(
                        x,
                        placement::Exclusion::NodeSelector { .. } | placement::Exclusion::Affinity
                    )
                })
            {
                stages.push(vec![Failure::NodeAffinity]);
            }
            // 4. NodeResourcesFit
            let alloc = allocatable(n);
            let used = requested.and_then(|r| r.get(&n.name)).unwrap_or(&empty);
            let mut fit = Vec::new();
            if let Some(&allowed) = alloc.get("pods")
                && used.pods.saturating_add(1) > allowed
            {
                fit.push(Failure::TooManyPods {
                    allowed,
                    used: used.pods,
                });
            }
            // cpu, memory, ephemeral-storage first, then the scalar resources by name.
            let order = |k: &str| match k {
                "cpu" => 0,
                "memory" => 1,
                "ephemeral-storage" => 2,
                _ => 3,
            };
            let mut asked: Vec<(&String, &i64)> = pod
                .other_requests
                .iter()
                .chain(pod.requests.iter())
                .filter(|(k, v)| **v > 0 && k.as_str() != "pods")
                .collect();
            asked.sort_by_key(|(k, _)| (order(k), (*k).clone()));
            for (k, v) in asked {
                if UNCHECKED_WHEN_ABSENT.contains(&k.as_str()) && !alloc.contains_key(k) {
                    continue;
                }
                let a = alloc.get(k).copied().unwrap_or(0);
                let u = used.resources.get(k).copied().unwrap_or(0);
                if *v > a.saturating_sub(u) {
                    fit.push(Failure::Insufficient {
                        resource: k.clone(),
                        requested: *v,
                        allocatable: a,
                        used: u,
                    });
                }
            }
            if !fit.is_empty() {
                stages.push(fit);
            }
            NodeFit {
                node: n.name.clone(),
                reasons: stages.first().cloned().unwrap_or_default(),
                all: stages.into_iter().flatten().collect(),
            }
        })
        .collect()
}

/// The scheduler's histogram: reason → number of nodes, as its message counts them.
pub fn histogram(fits: &[NodeFit]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for f in fits {
        for r in &f.reasons {
            *out.entry(r.reason()).or_default() += 1;
        }
    }
    out
}

/// The message the scheduler would write for these nodes (without its `preemption:` tail),
/// e.g. `0/3 nodes are available: 1 Insufficient memory, 2 Insufficient nvidia.com/gpu.`;
/// `None` when some node passes every modelled filter.
pub fn message(fits: &[NodeFit]) -> Option<String> {
    if fits.iter().any(NodeFit::passes) || fits.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = histogram(fits)
        .into_iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    parts.sort();
    Some(format!(
        "0/{} nodes are available: {}.",
        fits.len(),
        parts.join(", ")
    ))
}

/// The reasons of a scheduler message `0/N nodes are available: R1, R2. preemption: …`
/// (1.30-1.36): reason → node count, the taint names of older versions folded into
/// "node(s) had untolerated taint(s)", DRA fragments kept as they are. `None` when the
/// message is not of that form.
pub fn parse_message(msg: &str) -> Option<(usize, BTreeMap<String, usize>)> {
    let rest = msg.strip_prefix("0/")?;
    let (total, rest) = rest.split_once(" nodes are available: ")?;
    let total: usize = total.parse().ok()?;
    // The histogram ends at the first ". " (before `preemption:`) or the final ".".
    let body = match rest.find(". ") {
        Some(i) => &rest[..i],
        None => rest.trim_end().trim_end_matches('.'),
    };
    let mut out = BTreeMap::new();
    for part in split_reasons(body) {
        let part = part.trim().trim_end_matches('.');
        let Some((n, reason)) = part.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else { continue };
        let reason = if reason.starts_with("node(s) had untolerated taint")
            || reason.starts_with("node(s) had taint")
        {
            "node(s) had untolerated taint(s)".to_string()
        } else {
            reason.to_string()
        };
        *out.entry(reason).or_default() += n;
    }
    Some((total, out))
}

/// Splits `1 a, 2 b {k: v, w}, 3 c` at the commas that start a new `<count> ` entry.
fn split_reasons(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = body.as_bytes();
    let mut i = 0;
    while let Some(j) = body[i..].find(", ") {
        let at = i + j;
        let next = &body[at + 2..];
        let digits = next.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && next.as_bytes().get(digits) == Some(&b' ') {
            out.push(&body[start..at]);
            start = at + 2;
        }
        i = at + 2;
        if i >= bytes.len() {
            break;
        }
    }
    out.push(&body[start..]);
    out
}

/// `cpu 3500m` / `memory 24Gi` style text of an amount in the scheduler's units.
pub fn amount(resource: &str, v: i64) -> String {
    if resource == "cpu" {
        if v % 1000 == 0 {
            format!("{}", v / 1000)
        } else {
            format!("{v}m")
        }
    } else if resource == "memory"
        || resource == "ephemeral-storage"
        || resource.starts_with("hugepages-")
    {
        bytes(v)
    } else {
        v.to_string()
    }
}

/// Bytes in the largest binary unit that keeps one decimal (`23.9Gi`), exact when whole.
fn bytes(v: i64) -> String {
    const UNITS: [(&str, i64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (u, n) in UNITS {
        if v.abs() >= n {
            if v % n == 0 {
                return format!("{}{u}", v / n);
            }
            return format!("{:.1}{u}", v as f64 / n as f64);
        }
    }
    v.to_string()
}

/// Whether `reason` (a scheduler reason) is about a placement rule (cordon, taint,
/// selector/affinity).
pub fn is_placement_reason(reason: &str) -> bool {
    reason.starts_with("node(s) were unschedulable")
        || reason.starts_with("node(s) had untolerated taint")
        || reason.starts_with("node(s) had taint")
        || reason.starts_with("node(s) didn't match Pod's node affinity")
        || reason.starts_with("node(s) didn't satisfy plugin(s) [NodeAffinity]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_1_30_to_1_36_are_read() {
        let (n, h) = parse_message("0/5 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {sku: gpu}, 3 Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.").unwrap();
        assert_eq!(n, 5);
        assert_eq!(
            h,
            BTreeMap::from([
                ("Insufficient memory".to_string(), 1),
                ("Insufficient nvidia.com/gpu".to_string(), 3),
                ("node(s) had untolerated taint(s)".to_string(), 1),
            ])
        );
        let (_, h) = parse_message(
            "0/2 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable.",
        )
        .unwrap();
        assert_eq!(h.len(), 2);
        let (_, h) = parse_message("0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't match Pod's node affinity/selector. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.").unwrap();
        assert_eq!(h["cannot allocate all claims"], 1);
        assert!(parse_message("pod has unbound immediate PersistentVolumeClaims").is_none());
    }

    #[test]
    fn a_node_without_ephemeral_storage_has_none() {
        // Issue 47: the scheduler counts an absent ephemeral-storage as 0 (a virt-launcher
        // pod asks 50M); an absent memory is not checked (every kubelet lists it).
        let mut n = NodeInfo::named("n");
        n.capacity.insert("cpu".into(), "4".into());
        let pod = PodInfo {
            name: "p".into(),
            namespace: "ns".into(),
            other_requests: std::sync::Arc::new(BTreeMap::from([
                ("ephemeral-storage".to_string(), 50_000_000),
                ("memory".to_string(), 1 << 30),
            ])),
            ..Default::default()
        };
        let fits = filter(&pod, std::slice::from_ref(&n), None);
        assert_eq!(
            fits[0].reasons,
            [Failure::Insufficient {
                resource: "ephemeral-storage".into(),
                requested: 50_000_000,
                allocatable: 0,
                used: 0,
            }]
        );
        n.capacity
            .insert("ephemeral-storage".into(), "100Gi".into());
        assert!(filter(&pod, &[n], None)[0].passes());
    }

    #[test]
    fn amounts_read_like_kubectl() {
        assert_eq!(amount("cpu", 3500), "3500m");
        assert_eq!(amount("cpu", 4000), "4");
        assert_eq!(amount("memory", 24 << 30), "24Gi");
        assert_eq!(amount("memory", 25611849728), "23.9Gi");
        assert_eq!(amount("nvidia.com/gpu", 2), "2");
    }

    fn pods(json: &str) -> Vec<PodInfo> {
        crate::decode::pods::read_pods_str(json, "t").unwrap()
    }

    fn node(name: &str, res: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named(name);
        n.labels.insert("zone".into(), "a".into());
        n.allocatable = Some(
            res.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        n
    }

    #[test]
    fn requests_as_the_scheduler_computes_them() {
        // Regular 1 + sidecar 0.5 cpu = 1.5; init phase: init 3 + sidecar started before
        // it? No: the sidecar comes after the init container, so the init phase is 3.
        // max(1.5, 3) = 3 cpu, + overhead 100m. Memory: limits only (defaulted).
        let p = &pods(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
            "initContainers":[
              {"name":"fetch","resources":{"requests":{"cpu":"3","nvidia.com/gpu":"2"},"limits":{"nvidia.com/gpu":"2"}}},
              {"name":"proxy","restartPolicy":"Always","resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}],
            "containers":[{"name":"main","resources":{"limits":{"cpu":"1","memory":"2Gi","nvidia.com/gpu":"1"}}}],
            "overhead":{"cpu":"100m"}}}"#,
        )[0];
        assert_eq!(p.other_requests["cpu"], 3100);
        assert_eq!(p.other_requests["memory"], 3 << 30);
        assert_eq!(p.requests["nvidia.com/gpu"], 2);
        let src = p
            .sources
            .iter()
            .find(|s| s.resource == "nvidia.com/gpu")
            .unwrap();
        assert_eq!(src.field, "spec.initContainers[0].resources.requests");
        assert_eq!(src.container.as_deref(), Some("init container fetch"));
    }

    #[test]
    fn each_node_gets_its_first_failing_filter() {
        let p = &pods(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":{"zone":"a"},
            "containers":[{"name":"main","resources":{"requests":{"cpu":"2","memory":"4Gi"},"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        )[0];
        let full = [
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ];
        let mut cordoned = node("cordoned", &full);
        cordoned.unschedulable = true;
        cordoned.taints.push(Taint {
            key: "dedicated".into(),
            value: None,
            effect: "NoSchedule".into(),
        });
        let mut other_zone = node("other-zone", &full);
        other_zone.labels.insert("zone".into(), "b".into());
        let small = node(
            "small",
            &[
                ("cpu", "1"),
                ("memory", "2Gi"),
                ("pods", "1"),
                ("nvidia.com/gpu", "0"),
            ],
        );
        let ok = node("ok", &full);
        let bound = pods(
            r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"b"},"spec":{"nodeName":"small","containers":[{"name":"c"}]}}]}"#,
        );
        let nodes = [cordoned, other_zone, small, ok];
        let fits = filter(p, &nodes, Some(&requested(&bound)));
        let reasons: Vec<Vec<String>> = fits
            .iter()
            .map(|f| f.reasons.iter().map(Failure::reason).collect())
            .collect();
        assert_eq!(
            reasons,
            vec![
                vec!["node(s) were unschedulable".to_string()],
                vec!["node(s) didn't match Pod's node affinity/selector".to_string()],
                vec![
                    "Too many pods".to_string(),
                    "Insufficient cpu".to_string(),
                    "Insufficient memory".to_string(),
                    "Insufficient nvidia.com/gpu".to_string()
                ],
                vec![],
            ]
        );
        assert_eq!(fits[0].all.len(), 2, "the cordon, then the taint");
        assert!(fits[3].passes());
        assert_eq!(message(&fits), None);
        assert_eq!(
            message(&fits[..3]).unwrap(),
            "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient nvidia.com/gpu, 1 Too many pods, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable."
        );
    }
}
