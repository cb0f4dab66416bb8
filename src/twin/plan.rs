//! `gpuwl plan`: the fewest relabels that serve the pending GPU demand, found on gpuwl's
//! model, then verified on the twin ([`super::run`]) before they are printed.
//!
//! Demand: the pending pods, in queue order, that no node their constraints allow has the
//! free units for now (each pod that fits takes its units from the first such node), summed
//! per GPU name. A candidate is a GPU node and a workload config
//! (with a vGPU type for a vGPU name) under which the model says it would advertise the
//! name ([`super::predict`]), whose labels after the relabel the pods' nodeSelector,
//! required affinity, taints and cordon still allow ([`placement::allows`]), and that runs
//! no pod holding a GPU name it would lose (unless disruption is allowed). The search is
//! greedy: the candidate serving the most pending units first, ties to the one that
//! disturbs least, then by name; a pod no candidate can serve is said plainly, with why.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::predict;
use super::{Relabel, Source};
use crate::analysis::placement;
use crate::model::node::NodeInfo;
use crate::model::pod::PodInfo;
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::workload::{LABEL_KEY, WorkloadConfig};

/// One proposed relabel and what the model expects of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The relabel.
    #[serde(flatten)]
    pub relabel: Relabel,
    /// The label now.
    pub from: Option<String>,
    /// The name it would advertise and how many units (the model's prediction).
    pub resource: String,
    /// Units.
    pub units: u64,
    /// Pending pods it is meant for (`namespace/name`).
    pub for_pods: Vec<String>,
    /// Running pods that would lose their GPU (only with disruption allowed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disrupts: Vec<String>,
}

/// A pending pod no relabel can serve, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unservable {
    /// `namespace/name`.
    pub pod: String,
    /// The GPU name it asks for.
    pub resource: String,
    /// Why no relabel serves it.
    pub why: String,
}

/// The model's proposal (before the twin verifies it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proposal {
    /// The relabels, in the order found.
    pub steps: Vec<Step>,
    /// Pending pods no relabel serves.
    pub unservable: Vec<Unservable>,
    /// Pending GPU pods considered.
    pub pending_pods: usize,
    /// Units per name that the pending pods the free units cannot take ask for.
    pub short: BTreeMap<String, u64>,
    /// Pending GPU pods left out because explain's verdict says no relabel is what holds
    /// them ([`crate::analysis::verdict`]: blocked by a cordon or taint, gated, short of
    /// another resource, invalid), with their class and cause code.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_back: Vec<PlanHeld>,
}

/// A pending GPU pod plan leaves out, and why (explain's verdict).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanHeld {
    /// `namespace/name`.
    pub pod: String,
    /// Its class.
    pub class: crate::analysis::verdict::PodClass,
    /// explain's cause code.
    pub code: crate::analysis::diagnosis::CauseCode,
}

/// Which pods hold which GPU names on each node (bound, not terminal).
fn holders(pods: &[PodInfo]) -> BTreeMap<&str, Vec<&PodInfo>> {
    let mut m: BTreeMap<&str, Vec<&PodInfo>> = BTreeMap::new();
    for p in pods.iter().filter(|p| !p.is_terminal()) {
        if let Some(n) = &p.node_name
            && p.requests.keys().any(|r| classify(r).is_gpu())
        {
            m.entry(n.as_str()).or_default().push(p);
        }
    }
    m
}

/// The config (and vGPU type) under which a node would advertise `resource`.
fn config_for(resource: &str) -> Option<(WorkloadConfig, Option<String>)> {
    let short = resource.strip_prefix(NVIDIA_PREFIX)?;
    match classify(resource) {
        ResourceClass::ContainerGpu => Some((WorkloadConfig::Container, None)),
        ResourceClass::PassthroughModel => Some((WorkloadConfig::VmPassthrough, None)),
        ResourceClass::VgpuType => {
            let t = short
                .strip_prefix("NVIDIA_")
                .or_else(|| short.strip_prefix("GRID_"))
                .unwrap_or(short);
            Some((WorkloadConfig::VmVgpu, Some(t.to_string())))
        }
        _ => None,
    }
}

/// Finds the proposal (see the module docs).
pub fn propose(source: &Source, allow_disruption: bool) -> Proposal {
    let policy = source.policy.policy();
    let held = holders(&source.pods);
    // Free units per node × name now: allocatable minus what bound pods hold.
    let mut free: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
    for n in &source.nodes {
        let mut units = predict::listed(n);
        for (r, u) in units.iter_mut() {
            let taken: i64 = held
                .get(n.name.as_str())
                .into_iter()
                .flatten()
                .map(|p| p.requests.get(r).copied().unwrap_or(0))
                .fold(0i64, i64::saturating_add);
            *u = u.saturating_sub(u64::try_from(taken.max(0)).unwrap_or(0));
        }
        free.insert(n.name.as_str(), units);
    }
    // The pending GPU pods, each with explain's verdict: only demand and unservable pods
    // are what a relabel can serve; the rest wait on something a label does not change.
    let shared = crate::analysis::explain::Shared::new(crate::analysis::explain::Inputs {
        nodes: Some(&source.nodes),
        pods: Some(&source.pods),
        cluster_policy: policy,
        ..Default::default()
    });
    let mut held_back = Vec::new();
    let pending: Vec<&PodInfo> = source
        .pods
        .iter()
        .filter(|p| p.is_unbound() && p.requests.keys().any(|r| classify(r).is_gpu()))
        .filter(|p| {
            let Ok(e) = shared.explain(p) else {
                return true;
            };
            use crate::analysis::verdict::PodClass;
            match e.verdict.class {
                PodClass::Demand | PodClass::Unservable | PodClass::NotJudged => true,
                class => {
                    held_back.push(PlanHeld {
                        pod: p.key(),
                        class,
                        code: e.verdict.code,
                    });
                    false
                }
            }
        })
        .collect();
    // The pods asking for each name, in queue order, that the free units now cannot take:
    // each pod takes the first node its constraints allow with enough free units.
    let mut asked: BTreeMap<String, Vec<(&PodInfo, u64)>> = BTreeMap::new();
    for p in &pending {
        for (r, n) in p.requests.iter() {
            if !classify(r).is_gpu() {
                continue;
            }
            let want = u64::try_from(*n).unwrap_or(0);
            let fits = source.nodes.iter().find(|node| {
                free.get(node.name.as_str())
                    .and_then(|m| m.get(r))
                    .is_some_and(|f| *f >= want)
                    && placement::allows(p, node)
            });
            match fits {
                Some(node) => {
                    if let Some(f) = free.get_mut(node.name.as_str()).and_then(|m| m.get_mut(r)) {
                        *f -= want;
                    }
                }
                None => asked.entry(r.clone()).or_default().push((p, want)),
            }
        }
    }
    let mut short = BTreeMap::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut unservable = Vec::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    for (resource, pods) in &asked {
        let mut need: u64 = pods.iter().map(|(_, n)| *n).sum();
        short.insert(resource.clone(), need);
        let Some((config, vgpu)) = config_for(resource) else {
            for (p, _) in pods {
                unservable.push(Unservable {
                    pod: p.key(),
                    resource: resource.clone(),
                    why: "not a GPU name any workload config advertises".into(),
                });
            }
            continue;
        };
        // Candidates: (node, units, pods it can host, disrupted pods).
        let mut candidates: Vec<(&NodeInfo, u64, Vec<String>, Vec<String>)> = Vec::new();
        let mut could_advertise = Vec::new();
        for n in &source.nodes {
            if used.contains(&n.name) {
                continue;
            }
            let Some(inf) = predict::infer_hardware(n) else {
                continue;
            };
            let after = predict::relabelled(n, config, vgpu.as_deref());
            let (adv, _) = predict::advertised(&after, &inf.hw, policy);
            let units = adv.get(resource).copied().unwrap_or(0);
            let now = predict::advertised(n, &inf.hw, policy).0;
            if units == 0 || now.get(resource).copied().unwrap_or(0) >= units {
                continue;
            }
            could_advertise.push(n.name.clone());
            let hosts: Vec<String> = pods
                .iter()
                .filter(|(p, _)| placement::allows(p, &after))
                .map(|(p, _)| p.key())
                .collect();
            if hosts.is_empty() {
                continue;
            }
            let lost: Vec<String> = held
                .get(n.name.as_str())
                .into_iter()
                .flatten()
                .filter(|p| {
                    p.requests.iter().any(|(r, k)| {
                        adv.get(r).copied().unwrap_or(0) < u64::try_from(*k).unwrap_or(0)
                    })
                })
                .map(|p| p.key())
                .collect();
            if !lost.is_empty() && !allow_disruption {
                continue;
            }
            candidates.push((n, units, hosts, lost));
        }
        candidates.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then(a.3.len().cmp(&b.3.len()))
                .then(a.0.name.cmp(&b.0.name))
        });
        let mut served: BTreeSet<String> = BTreeSet::new();
        for (n, units, hosts, lost) in candidates {
            if need == 0 {
                break;
            }
            // The pods it takes, in queue order, while its units last.
            let mut left = units;
            let mut new = Vec::new();
            for (p, k) in pods {
                let key = p.key();
                if *k <= left && hosts.contains(&key) && !served.contains(&key) {
                    left -= k;
                    new.push(key);
                }
            }
            if new.is_empty() {
                continue;
            }
            served.extend(new.iter().cloned());
            need = need.saturating_sub(units - left);
            used.insert(n.name.clone());
            steps.push(Step {
                relabel: Relabel {
                    node: n.name.clone(),
                    config,
                    vgpu_type: vgpu.clone(),
                },
                from: n.label(LABEL_KEY).map(str::to_string),
                resource: resource.clone(),
                units,
                for_pods: new,
                disrupts: lost,
            });
        }
        if need == 0 {
            continue;
        }
        for (p, _) in pods {
            if served.contains(&p.key()) {
                continue;
            }
            let why = if could_advertise.is_empty() {
                format!(
                    "no node's GPUs would advertise {resource} under any workload config \
                     (no node has the GPU model or board it names)"
                )
            } else if !could_advertise.iter().any(|c| {
                let n = source.nodes.iter().find(|n| &n.name == c).expect("listed");
                placement::allows(p, &predict::relabelled(n, config, vgpu.as_deref()))
            }) {
                let n = source
                    .nodes
                    .iter()
                    .find(|n| n.name == could_advertise[0])
                    .expect("listed");
                let ex = placement::exclusions(p, &predict::relabelled(n, config, vgpu.as_deref()));
                // The exclusions are those of the node AFTER the relabel: said as such, with
                // the label it has now, never as the node's present state.
                let now = n.label(LABEL_KEY);
                let on = if now == Some(config.as_str()) {
                    format!(
                        "{} on {}",
                        ex.iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; "),
                        n.name
                    )
                } else {
                    format!(
                        "{} (labelled {} now) would fail {} once relabelled {config}",
                        n.name,
                        now.unwrap_or("nothing"),
                        ex.iter()
                            .map(|e| e.constraint())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                };
                format!(
                    "only a node labelled {config} advertises {resource}, and the pod's own \
                     constraints exclude every such node ({on}): change the pod, not a label"
                )
            } else if !allow_disruption {
                "every node that could serve it runs pods holding GPUs it would lose \
                 (--allow-disruption to consider them)"
                    .to_string()
            } else {
                "the nodes that could serve it are already used by this plan".to_string()
            };
            unservable.push(Unservable {
                pod: p.key(),
                resource: resource.clone(),
                why,
            });
        }
    }
    Proposal {
        steps,
        unservable,
        pending_pods: pending.len(),
        short,
        held_back,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::operator::PolicyStatus;
    use std::sync::Arc;

    fn node(name: &str, wc: &str, res: &str, n: u32) -> NodeInfo {
        let mut x = NodeInfo::named(name);
        x.labels.insert(LABEL_KEY.into(), wc.into());
        x.labels
            .insert(predict::GPU_PRODUCT_LABEL.into(), "NVIDIA-A10".into());
        x.capacity.insert(res.into(), n.to_string());
        x.allocatable = Some(x.capacity.clone());
        x
    }

    fn pod(name: &str, res: &str, node: Option<&str>) -> PodInfo {
        PodInfo {
            kind: crate::model::pod::ObjectKind::Pod,
            namespace: "vms".into(),
            name: name.into(),
            node_name: node.map(str::to_string),
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            node_selector: BTreeMap::new(),
            required_affinity: None,
            scheduling_gates: Vec::new(),
            tolerations: Arc::from(Vec::new()),
            conditions: vec![],
            requests: Arc::new(BTreeMap::from([(res.to_string(), 1)])),
            other_requests: Arc::new(BTreeMap::new()),
            status_reason: None,
            status_message: None,
            sources: vec![],
            problems: vec![],
            resource_claims: vec![],
            vmi_owned_by_vm: None,
        }
    }

    #[test]
    fn the_fewest_idle_nodes_serve_the_queue() {
        let nodes = vec![
            node("c-0", "container", "nvidia.com/gpu", 4),
            node("c-1", "container", "nvidia.com/gpu", 4),
            node("c-2", "container", "nvidia.com/gpu", 2),
            node("c-3", "container", "nvidia.com/gpu", 4),
            node("p-0", "vm-passthrough", "nvidia.com/GA102GL_A10", 2),
        ];
        let mut pods = vec![
            pod("busy", "nvidia.com/gpu", Some("c-0")),
            pod("held", "nvidia.com/GA102GL_A10", Some("p-0")),
            pod("held2", "nvidia.com/GA102GL_A10", Some("p-0")),
        ];
        for i in 0..6 {
            pods.push(pod(&format!("vm-{i}"), "nvidia.com/GA102GL_A10", None));
        }
        let src = Source {
            nodes,
            pods,
            policy: PolicyStatus::not_read(),
            origin: "test".into(),
        };
        let p = propose(&src, false);
        // 6 units short: c-1 and c-3 (4 each, idle), not c-0 (busy) nor c-2 (2 units).
        let chosen: Vec<&str> = p.steps.iter().map(|s| s.relabel.node.as_str()).collect();
        assert_eq!(chosen, ["c-1", "c-3"]);
        assert_eq!(p.short["nvidia.com/GA102GL_A10"], 6);
        assert!(
            p.steps
                .iter()
                .all(|s| s.relabel.config == WorkloadConfig::VmPassthrough)
        );
        assert!(p.unservable.is_empty(), "{:?}", p.unservable);
        // With disruption allowed the busy node is a candidate too (same units, ranked
        // after the idle ones).
        let p = propose(&src, true);
        assert_eq!(p.steps.len(), 2);
    }

    #[test]
    fn a_pod_whose_selector_forbids_the_serving_config_is_unservable() {
        let nodes = vec![
            node("c-0", "container", "nvidia.com/gpu", 4),
            node("p-0", "vm-passthrough", "nvidia.com/GA102GL_A10", 2),
        ];
        let mut cross = pod("job-cross", "nvidia.com/gpu", None);
        cross
            .node_selector
            .insert(LABEL_KEY.into(), "vm-passthrough".into());
        let mut pods = vec![cross, pod("typo", "nvidia.com/GA102GL_A1O", None)];
        // c-0 is full, so nvidia.com/gpu is short.
        for i in 0..4 {
            pods.push(pod(&format!("c{i}"), "nvidia.com/gpu", Some("c-0")));
        }
        let src = Source {
            nodes,
            pods,
            policy: PolicyStatus::not_read(),
            origin: "test".into(),
        };
        let p = propose(&src, false);
        assert!(p.steps.is_empty(), "{:?}", p.steps);
        let cross = p
            .unservable
            .iter()
            .find(|u| u.pod == "vms/job-cross")
            .unwrap();
        assert!(cross.why.contains("constraints exclude"), "{}", cross.why);
        let typo = p.unservable.iter().find(|u| u.pod == "vms/typo").unwrap();
        assert!(typo.why.contains("no node's GPUs"), "{}", typo.why);
    }

    #[test]
    fn pods_a_relabel_would_not_help_are_left_out_with_explains_verdict() {
        // The only container node is cordoned: the 1-GPU pod is blocked, not short; a
        // gated pod waits on its gate; neither drives a relabel.
        let mut c0 = node("c-0", "container", "nvidia.com/gpu", 4);
        c0.unschedulable = true;
        let nodes = vec![
            c0,
            node("p-0", "vm-passthrough", "nvidia.com/GA102GL_A10", 2),
        ];
        let mut gated = pod("gated", "nvidia.com/GA102GL_A10", None);
        gated.scheduling_gates = vec!["example.com/quota".into()];
        let src = Source {
            nodes,
            pods: vec![pod("drained", "nvidia.com/gpu", None), gated],
            policy: PolicyStatus::not_read(),
            origin: "test".into(),
        };
        let p = propose(&src, false);
        assert!(p.steps.is_empty(), "{:?}", p.steps);
        assert!(p.short.is_empty(), "{:?}", p.short);
        assert_eq!(p.pending_pods, 0);
        let held: Vec<(&str, &str, &str)> = p
            .held_back
            .iter()
            .map(|h| (h.pod.as_str(), h.class.as_str(), h.code.as_str()))
            .collect();
        assert_eq!(
            held,
            [
                ("vms/drained", "blocked", "excluded"),
                ("vms/gated", "gated", "gated")
            ]
        );
    }
}
