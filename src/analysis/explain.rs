//! Why a GPU pod (or KubeVirt VMI) waits: for every extended resource it requests, which
//! nodes advertise it and what is free there; "did you mean" when none does; how
//! nodeSelector, required node affinity and taints narrow the candidates; stale zeros;
//! the scheduler's own PodScheduled message; one concrete fix.
//!
//! Facts used (`../shared/facts/gpu-operator.md`, `../shared/spec/lab.md`):
//! - a resource listed with `0` is not advertised (stale kubelet keys,
//!   kubernetes/kubernetes `pkg/kubelet/nodestatus/setters.go`);
//! - different resource names are different resources to the scheduler; the workload
//!   label [`LABEL_KEY`] decides which names a node advertises (NVIDIA/gpu-operator
//!   `controllers/state_manager.go`; names: NVIDIA/k8s-device-plugin `internal/rm/rm.go`,
//!   NVIDIA/kubevirt-gpu-device-plugin `pkg/device_plugin/device_plugin.go`);
//! - a VMI's `spec.domain.devices.gpus[].deviceName` becomes one unit requested by its
//!   virt-launcher pod, and must also be listed in the KubeVirt CR's
//!   `permittedHostDevices` (kubevirt/kubevirt; facts §5);
//! - the scheduler's message is quoted from the pod, never composed (facts §6).

use crate::analysis::{names as suggest, placement};

use std::collections::{BTreeMap, BTreeSet};

use kube::Client;
use serde::Serialize;

use crate::error::Result;
use crate::model::advertise::node_units;
use crate::model::node::NodeInfo;
use crate::model::pod::{Condition, ObjectKind, PodInfo};
use crate::model::pool::Pool;
use crate::model::resource::{self, NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::workload::{ENABLE_FLAG, LABEL_KEY};
use placement::Exclusion;
use suggest::Suggestion;

/// One node that advertises a requested resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFree {
    /// Node name.
    pub node: String,
    /// Its pool ([`Pool::name`]).
    pub pool: String,
    /// Allocatable units (> 0).
    pub allocatable: i64,
    /// Units requested by bound, non-terminal pods; `None` when pods are unknown.
    pub allocated: Option<i64>,
    /// allocatable − allocated; `None` when pods are unknown.
    pub free: Option<i64>,
    /// Whether the pod's constraints allow the node.
    pub allowed: bool,
    /// The constraints that exclude it (empty when allowed).
    pub excluded_by: Vec<String>,
}

/// One requested extended resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestView {
    /// Full resource name.
    pub resource: String,
    /// Effective units requested.
    pub units: i64,
    /// Class ([`classify`]).
    pub class: ResourceClass,
    /// The field that names it (e.g. `spec.containers[0].resources.limits`).
    pub field: String,
    /// Nodes advertising it (allocatable > 0), by name.
    pub advertisers: Vec<NodeFree>,
    /// Nodes listing it with 0 (stale keys; they do not count).
    pub stale_nodes: Vec<String>,
    /// Close advertised names, when no node advertises this one.
    pub did_you_mean: Vec<Suggestion>,
    /// Remarks on the name itself.
    pub notes: Vec<String>,
}

/// How one kind of constraint narrows the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstraintView {
    /// `nodeSelector`, `requiredNodeAffinity` or `taints`.
    pub kind: String,
    /// The constraint as written, e.g. `nvidia.com/gpu.workload.config=vm-passthrough`.
    pub description: String,
    /// Nodes it allows, by name.
    pub allows: Vec<String>,
}

/// The explanation of one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// Kind read.
    pub kind: ObjectKind,
    /// `status.phase`.
    pub phase: Option<String>,
    /// Bound node, if any.
    pub node: Option<String>,
    /// The PodScheduled condition, verbatim.
    pub scheduler: Option<Condition>,
    /// Whether node data was given.
    pub nodes_known: bool,
    /// Whether pod data (for allocations) was given.
    pub allocations_known: bool,
    /// Nodes read.
    pub nodes_total: usize,
    /// Requested extended resources.
    pub requests: Vec<RequestView>,
    /// Constraints, in order nodeSelector, required affinity, taints.
    pub constraints: Vec<ConstraintView>,
    /// Nodes all constraints allow.
    pub allowed_nodes: Vec<String>,
    /// Allowed nodes that advertise every requested extended resource.
    pub candidates: Vec<String>,
    /// Candidates with enough units of everything: allocatable >= asked, and free >=
    /// asked when allocations are known.
    pub fitting: Vec<String>,
    /// One-paragraph cause.
    pub cause: String,
    /// One concrete fix.
    pub fix: String,
    /// Other remarks.
    pub notes: Vec<String>,
}

/// Explains `pod` against `nodes`; `pods` (all pods, for allocations) may be `None`.
///
/// Errors: [`crate::error::Error::Input`] when a node's quantity of a requested resource
/// is not a whole number.
pub fn explain(
    pod: &PodInfo,
    nodes: Option<&[NodeInfo]>,
    pods: Option<&[PodInfo]>,
) -> Result<Explanation> {
    let nodes_known = nodes.is_some();
    let nodes = nodes.unwrap_or(&[]);
    // allocated[(node, resource)]
    let mut allocated: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for p in pods.unwrap_or(&[]) {
        if p.is_terminal() || (p.namespace == pod.namespace && p.name == pod.name) {
            continue;
        }
        if let Some(n) = &p.node_name {
            for (r, u) in &p.requests {
                *allocated.entry((n.as_str(), r.as_str())).or_default() += u;
            }
        }
    }
    let alloc_known = pods.is_some();
    let exclusions: BTreeMap<&str, Vec<Exclusion>> = nodes
        .iter()
        .map(|n| (n.name.as_str(), placement::exclusions(pod, n)))
        .collect();
    let all_advertised: BTreeSet<String> = nodes
        .iter()
        .flat_map(|n| {
            n.resource_names()
                .into_iter()
                .filter(|r| node_units(n, r).is_ok_and(|(_, a)| a > 0))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|r| crate::model::pod::is_extended_resource(r))
        .collect();

    let mut requests = Vec::new();
    for (r, units) in &pod.requests {
        let field = pod
            .sources
            .iter()
            .find(|s| &s.resource == r)
            .map(|s| s.field.clone())
            .unwrap_or_default();
        let mut advertisers = Vec::new();
        let mut stale = Vec::new();
        for n in nodes {
            if n.raw(n.advertising_field(), r).is_none() && !n.capacity.contains_key(r) {
                continue;
            }
            let (_, alloc) = node_units(n, r)?;
            if alloc == 0 {
                stale.push(n.name.clone());
                continue;
            }
            let a = alloc_known.then(|| {
                allocated
                    .get(&(n.name.as_str(), r.as_str()))
                    .copied()
                    .unwrap_or(0)
            });
            let ex = &exclusions[n.name.as_str()];
            advertisers.push(NodeFree {
                node: n.name.clone(),
                pool: Pool::of(n).name(),
                allocatable: alloc,
                allocated: a,
                free: a.map(|a| alloc - a),
                allowed: ex.is_empty(),
                excluded_by: ex.iter().map(ToString::to_string).collect(),
            });
        }
        let did_you_mean = if advertisers.is_empty() {
            suggest::did_you_mean(r, all_advertised.iter().map(String::as_str))
        } else {
            Vec::new()
        };
        let class = classify(r);
        let mut notes = Vec::new();
        if let Some(short) = r.strip_prefix(NVIDIA_PREFIX)
            && class == ResourceClass::PassthroughModel
        {
            if resource::is_mixed_case_model(short) {
                notes.push(format!(
                    "{r} has lower-case letters: the sandbox device plugin upper-cases device names since v1.1.1 (2022), so no current node advertises it"
                ));
            } else if resource::is_hex_fallback(short) {
                notes.push(format!(
                    "{r} is a hex PCI device id: the plugin's pci.ids lacked the device; a newer plugin advertises the model name instead"
                ));
            }
        }
        requests.push(RequestView {
            resource: r.clone(),
            units: *units,
            class,
            field,
            advertisers,
            stale_nodes: stale,
            did_you_mean,
            notes,
        });
    }

    // Constraints, each on its own, then together.
    let mut constraints = Vec::new();
    let names_where = |f: &dyn Fn(&Exclusion) -> bool| -> Vec<String> {
        nodes
            .iter()
            .filter(|n| !exclusions[n.name.as_str()].iter().any(f))
            .map(|n| n.name.clone())
            .collect()
    };
    if !pod.node_selector.is_empty() {
        constraints.push(ConstraintView {
            kind: "nodeSelector".into(),
            description: pod
                .node_selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
            allows: names_where(&|e| matches!(e, Exclusion::NodeSelector { .. })),
        });
    }
    if let Some(terms) = &pod.required_affinity {
        constraints.push(ConstraintView {
            kind: "requiredNodeAffinity".into(),
            description: placement::affinity_str(terms),
            allows: names_where(&|e| matches!(e, Exclusion::Affinity)),
        });
    }
    let tainted: BTreeSet<String> = nodes
        .iter()
        .flat_map(|n| &n.taints)
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .map(placement::taint_str)
        .collect();
    if !tainted.is_empty() {
        constraints.push(ConstraintView {
            kind: "taints".into(),
            description: format!(
                "node taints {} against {} toleration(s)",
                tainted.into_iter().collect::<Vec<_>>().join(", "),
                pod.tolerations.len()
            ),
            allows: names_where(&|e| matches!(e, Exclusion::Taint { .. })),
        });
    }
    let allowed_nodes: Vec<String> = nodes
        .iter()
        .filter(|n| exclusions[n.name.as_str()].is_empty())
        .map(|n| n.name.clone())
        .collect();
    let advertises_all = |node: &str| {
        requests
            .iter()
            .all(|rv| rv.advertisers.iter().any(|a| a.node == node))
    };
    let candidates: Vec<String> = allowed_nodes
        .iter()
        .filter(|n| advertises_all(n))
        .cloned()
        .collect();
    let fitting: Vec<String> = candidates
        .iter()
        .filter(|n| {
            requests.iter().all(|rv| {
                rv.advertisers.iter().any(|a| {
                    &a.node == *n
                        && a.allocatable >= rv.units
                        && a.free.is_none_or(|f| f >= rv.units)
                })
            })
        })
        .cloned()
        .collect();

    let mut e = Explanation {
        pod: pod.key(),
        kind: pod.kind,
        phase: pod.phase.clone(),
        node: pod.node_name.clone(),
        scheduler: pod.pod_scheduled().cloned(),
        nodes_known,
        allocations_known: alloc_known,
        nodes_total: nodes.len(),
        requests,
        constraints,
        allowed_nodes,
        candidates,
        fitting,
        cause: String::new(),
        fix: String::new(),
        notes: Vec::new(),
    };
    if matches!(
        pod.kind,
        ObjectKind::VirtualMachineInstance | ObjectKind::VirtualMachine
    ) {
        e.notes.push(
            "a VMI's deviceName is requested by its virt-launcher pod (1 unit each); it must also be listed in the KubeVirt CR's permittedHostDevices, else the VMI reports Synchronized=False \"GPU <name> is not permitted in permittedHostDevices configuration\" and no launcher pod is made".into(),
        );
    }
    let (cause, fix) = diagnose(pod, &e, nodes);
    e.cause = cause;
    e.fix = fix;
    Ok(e)
}

/// The cause and the one fix, by priority: bound; no data; a name nobody advertises;
/// constraints that exclude every advertiser; no node with all names; no free units;
/// fits now.
fn diagnose(pod: &PodInfo, e: &Explanation, nodes: &[NodeInfo]) -> (String, String) {
    if let Some(n) = &pod.node_name {
        return (
            format!(
                "the pod is bound to {n} (phase {})",
                pod.phase.as_deref().unwrap_or("unknown")
            ),
            "nothing to fix: it was scheduled".into(),
        );
    }
    if e.requests.is_empty() {
        return (
            "the pod requests no extended resource; its wait is not about GPUs".into(),
            "read the scheduler message above (cpu, memory, volumes, ports)".into(),
        );
    }
    if !e.nodes_known {
        return (
            "no node data: which nodes advertise the requested names is unknown".into(),
            "pass --nodes FILE (kubectl get nodes -o json) or run against the cluster".into(),
        );
    }
    // 0. Node-condition taints (`node.kubernetes.io/...`, added by the API server's
    //    TaintNodesByCondition and removed by the node lifecycle controller) on every node.
    if e.allowed_nodes.is_empty() && !nodes.is_empty() {
        let cond: BTreeSet<String> = nodes
            .iter()
            .flat_map(|n| placement::exclusions(pod, n))
            .filter_map(|x| match x {
                Exclusion::Taint { taint } if taint.key.starts_with("node.kubernetes.io/") => {
                    Some(placement::taint_str(&taint))
                }
                _ => None,
            })
            .collect();
        let all_cond = nodes.iter().all(|n| {
            placement::exclusions(pod, n).iter().any(|x| {
                matches!(x, Exclusion::Taint { taint } if taint.key.starts_with("node.kubernetes.io/"))
            })
        });
        if all_cond {
            return (
                format!(
                    "every node carries a node-condition taint the pod does not tolerate ({}): no node is schedulable, whatever the GPU names",
                    cond.into_iter().collect::<Vec<_>>().join(", ")
                ),
                "make the nodes Ready (the node lifecycle controller removes node.kubernetes.io/* taints once the condition clears); do not tolerate it away".into(),
            );
        }
    }
    // 1. A name that no node advertises.
    for rv in &e.requests {
        if !rv.advertisers.is_empty() {
            continue;
        }
        let where_ = if rv.field.is_empty() {
            String::new()
        } else {
            format!(" in {}", rv.field)
        };
        let mut cause = format!("no node advertises {} (non-zero)", rv.resource);
        if !rv.stale_nodes.is_empty() {
            cause.push_str(&format!(
                "; {} list it with 0, a stale key the kubelet keeps after its device plugin left",
                rv.stale_nodes.join(", ")
            ));
        }
        if let Some(s) = rv.did_you_mean.first() {
            let on: Vec<String> = nodes
                .iter()
                .filter(|n| node_units(n, &s.name).is_ok_and(|(_, a)| a > 0))
                .map(|n| format!("{} ({})", n.name, Pool::of(n).name()))
                .collect();
            cause.push_str(&format!(
                "; {} is advertised on {} and {}: one wrong character removes every node",
                s.name,
                on.join(", "),
                s.why()
            ));
            return (
                cause,
                format!("request {} instead of {}{where_}", s.name, rv.resource),
            );
        }
        let fix = match rv.class.workload() {
            Some(w) => format!(
                "make a node advertise {}: label it {LABEL_KEY}={w} (with ClusterPolicy {ENABLE_FLAG}=true) so the operator deploys the device plugin that advertises this {}, or request a name that is advertised",
                rv.resource,
                rv.class.describe()
            ),
            None => format!(
                "deploy the device plugin that advertises {}, or request a name that is advertised",
                rv.resource
            ),
        };
        return (cause, fix);
    }
    // 2. Advertised, but constraints exclude every advertiser.
    for rv in &e.requests {
        if rv.advertisers.iter().any(|a| a.allowed) {
            continue;
        }
        let pools: BTreeSet<&str> = rv.advertisers.iter().map(|a| a.pool.as_str()).collect();
        let free: i64 = rv.advertisers.iter().filter_map(|a| a.free).sum();
        let free_txt = if e.allocations_known {
            format!("{free} free")
        } else {
            format!(
                "{} allocatable",
                rv.advertisers.iter().map(|a| a.allocatable).sum::<i64>()
            )
        };
        let adv_nodes: Vec<&str> = rv.advertisers.iter().map(|a| a.node.as_str()).collect();
        let mut excl: Vec<Exclusion> = Vec::new();
        for n in nodes
            .iter()
            .filter(|n| adv_nodes.contains(&n.name.as_str()))
        {
            for x in placement::exclusions(pod, n) {
                if !excl.iter().any(|y| y.constraint() == x.constraint()) {
                    excl.push(x);
                }
            }
        }
        let pool_list = pools.iter().copied().collect::<Vec<_>>().join(", ");
        let first = excl.first().cloned();
        let constraint_list = excl
            .iter()
            .map(Exclusion::constraint)
            .collect::<Vec<_>>()
            .join(" and ");
        let mut cause = format!(
            "{} is advertised only in pool {pool_list} ({}; {free_txt}), and the pod's {constraint_list} excludes those nodes",
            rv.resource,
            adv_nodes.join(", "),
        );
        // What the allowed nodes offer instead.
        let other: BTreeSet<String> = nodes
            .iter()
            .filter(|n| e.allowed_nodes.contains(&n.name))
            .flat_map(|n| {
                crate::model::advertise::gpu_resources(n)
                    .into_iter()
                    .filter(|r| node_units(n, r).is_ok_and(|(_, a)| a > 0))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        if let Some(Exclusion::NodeSelector { key, want, .. }) = &first
            && key == LABEL_KEY
        {
            cause = format!(
                "the nodeSelector {key}={want} confines the pod to pool {want}{}, whose nodes advertise {} — not {}; {} exists only in pool {pool_list} ({}; {free_txt}). Different names are different resources: the {pool_list} pool cannot lend to {want}.",
                if !nodes.iter().any(|n| n.label(key) == Some(want.as_str())) {
                    " (no node has it)".to_string()
                } else {
                    String::new()
                },
                if other.is_empty() {
                    "no GPU resource".to_string()
                } else {
                    other.iter().cloned().collect::<Vec<_>>().join(", ")
                },
                rv.resource,
                rv.resource,
                adv_nodes.join(", "),
            );
            let target = pools.iter().next().copied().unwrap_or_default();
            let target = target.split(' ').next().unwrap_or(target);
            let mut fix = format!(
                "change the nodeSelector {key}={want} to {key}={target} (or remove it): pool {target} has {free_txt} {}",
                rv.resource
            );
            if let Some(alt) = other.iter().next() {
                fix.push_str(&format!(
                    "; to stay on {want}, request {alt} instead of {}",
                    rv.resource
                ));
            }
            return (cause, fix);
        }
        let fix = match first {
            Some(Exclusion::NodeSelector { key, want, have }) => match have {
                Some(h) => format!(
                    "change the nodeSelector {key}={want} to {key}={h} (the value on {}) or remove it",
                    adv_nodes.join(", ")
                ),
                None => format!(
                    "remove the nodeSelector {key}={want}: no node advertising {} has that label",
                    rv.resource
                ),
            },
            Some(Exclusion::Affinity) => format!(
                "widen the required node affinity so that it matches {}",
                adv_nodes.join(", ")
            ),
            Some(Exclusion::Taint { taint }) => format!(
                "add the toleration {{key: {}, operator: {}, effect: {}}}",
                taint.key,
                match &taint.value {
                    Some(v) => format!("Equal, value: {v}"),
                    None => "Exists".into(),
                },
                taint.effect
            ),
            None => "check the nodes' labels and taints".into(),
        };
        return (cause, fix);
    }
    // 3. Each name is reachable, but no allowed node has them all.
    if e.candidates.is_empty() {
        let names: Vec<&str> = e.requests.iter().map(|r| r.resource.as_str()).collect();
        return (
            format!(
                "no allowed node advertises all of {} together (a node runs one workload type)",
                names.join(", ")
            ),
            "split the request into pods that each ask for one kind of GPU resource".into(),
        );
    }
    // 4a. A request larger than any candidate's allocatable: no amount of freeing helps
    //     (a pod's units come from one node).
    let too_big: Vec<(&RequestView, i64)> = e
        .requests
        .iter()
        .filter_map(|rv| {
            let most = rv
                .advertisers
                .iter()
                .filter(|a| e.candidates.contains(&a.node))
                .map(|a| a.allocatable)
                .max()?;
            (rv.units > most).then_some((rv, most))
        })
        .collect();
    if e.fitting.is_empty() && !too_big.is_empty() {
        let what: Vec<String> = too_big
            .iter()
            .map(|(rv, most)| {
                format!(
                    "{} × {} asked, at most {most} allocatable on one candidate",
                    rv.units, rv.resource
                )
            })
            .collect();
        let fix: Vec<String> = too_big
            .iter()
            .map(|(rv, most)| format!("at most {most} × {}", rv.resource))
            .collect();
        return (
            format!(
                "Insufficient: the pod asks for more than any candidate ({}) has, even with nothing allocated: {}",
                e.candidates.join(", "),
                what.join("; ")
            ),
            format!(
                "ask for {} per pod (a pod's units come from one node), or add nodes with more GPUs",
                fix.join(" and ")
            ),
        );
    }
    // 4b. Candidates exist but lack free units.
    if e.fitting.is_empty() {
        let short: Vec<String> = e
            .requests
            .iter()
            .map(|rv| {
                let free: i64 = rv
                    .advertisers
                    .iter()
                    .filter(|a| e.candidates.contains(&a.node))
                    .filter_map(|a| a.free)
                    .sum();
                format!(
                    "{} ({} asked, {free} free on the candidates)",
                    rv.resource, rv.units
                )
            })
            .collect();
        return (
            format!(
                "Insufficient: the candidates {} advertise the names but have too few free units: {}",
                e.candidates.join(", "),
                short.join("; ")
            ),
            "free units on the candidates (delete or finish pods using them) or add nodes of the same pool".into(),
        );
    }
    // 5. It fits now.
    (
        format!(
            "{} can take the pod now{}",
            e.fitting.join(", "),
            if e.allocations_known {
                ""
            } else {
                " (allocations unknown: pass --pods FILE)"
            }
        ),
        "wait for the next scheduling attempt, or check non-GPU resources (cpu, memory) in the scheduler message".into(),
    )
}

/// Explains pod `namespace/name` of a live cluster (lists all nodes and pods).
///
/// Errors: [`crate::error::Error::Input`] when the pod does not exist;
/// [`crate::error::Error::Runtime`] when the API cannot be reached.
pub async fn from_cluster(client: &Client, namespace: &str, name: &str) -> Result<Explanation> {
    let (pod, nodes, pods) = futures::try_join!(
        crate::input::pods::get_pod(client, namespace, name),
        crate::input::live::list_nodes(client),
        crate::input::pods::list_pods(client)
    )?;
    explain(&pod, Some(&nodes), Some(&pods))
}
