//! `gpuwl plan`: the fewest relabels that serve the pending GPU demand, found on gpuwl's
//! model, then verified on the twin (gpuwl's `twin::run`) before they are printed.
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
use super::report::Relabel;
use crate::analysis::diagnosis::CauseCode;
use crate::analysis::explain::{Inputs, Shared};
use crate::analysis::placement;
use crate::analysis::verdict::PodClass;
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::pod::PodInfo;
use crate::model::resource::{NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::snapshot::Snapshot;
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
    pub class: PodClass,
    /// explain's cause code.
    pub code: CauseCode,
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

/// Finds the proposal (see the module docs): the free units now, the pending pods a relabel
/// can serve, the demand the free units cannot take, then per GPU name the relabels that
/// serve it (or why none does).
pub fn propose(source: &Snapshot, allow_disruption: bool) -> Proposal {
    let search = Search {
        source,
        policy: source.policy.policy(),
        held: holders(source.pods()),
        allow_disruption,
    };
    let mut free = free_units(&source.nodes, &search.held);
    let (pending, held_back) = relabel_servable(source);
    let asked = unmet_demand(&source.nodes, &pending, &mut free);
    let mut short = BTreeMap::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut unservable = Vec::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    for (resource, pods) in &asked {
        short.insert(resource.clone(), pods.iter().map(|(_, n)| *n).sum::<u64>());
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
        let want = Want {
            resource,
            config,
            vgpu,
            pods,
        };
        search.serve(&want, &mut used, &mut steps, &mut unservable);
    }
    Proposal {
        steps,
        unservable,
        pending_pods: pending.len(),
        short,
        held_back,
    }
}

/// Free units per node × listed GPU name now: allocatable minus what bound pods hold.
fn free_units<'a>(
    nodes: &'a [NodeInfo],
    held: &BTreeMap<&str, Vec<&PodInfo>>,
) -> BTreeMap<&'a str, BTreeMap<String, u64>> {
    let mut free = BTreeMap::new();
    for n in nodes {
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
    free
}

/// The pending GPU pods a relabel can serve, in queue order: those explain classes as
/// demand, unservable or not judged, except a VMI or VM KubeVirt refuses (`not-permitted`,
/// judged with the source's `permittedHostDevices`). The others wait on something a label
/// does not change and are returned apart, with their class and cause.
fn relabel_servable(source: &Snapshot) -> (Vec<&PodInfo>, Vec<PlanHeld>) {
    use crate::analysis::verdict::PodClass;
    let shared = Shared::new(Inputs::of_state(
        &source.nodes,
        source.pods(),
        source.policy.policy(),
        source.kubevirt.as_ref(),
    ));
    let mut held_back = Vec::new();
    let pending = source
        .pods()
        .iter()
        .filter(|p| p.is_unbound() && p.requests.keys().any(|r| classify(r).is_gpu()))
        .filter(|p| {
            let Ok(e) = shared.explain(p) else {
                return true;
            };
            match e.verdict.class {
                // A VM KubeVirt refuses gets no launcher pod on any node: its list, not a
                // label, holds it.
                PodClass::Unservable if e.verdict.code == CauseCode::NotPermitted => {
                    held_back.push(PlanHeld {
                        pod: p.key(),
                        class: e.verdict.class,
                        code: e.verdict.code,
                    });
                    false
                }
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
    (pending, held_back)
}

/// The pods asking for each GPU name, in queue order with their units, that the free units
/// now cannot take: each pod takes (from `free`) the first node its constraints allow with
/// enough free units.
fn unmet_demand<'p>(
    nodes: &[NodeInfo],
    pending: &[&'p PodInfo],
    free: &mut BTreeMap<&str, BTreeMap<String, u64>>,
) -> BTreeMap<String, Vec<(&'p PodInfo, u64)>> {
    let mut asked: BTreeMap<String, Vec<(&PodInfo, u64)>> = BTreeMap::new();
    for p in pending {
        for (r, n) in p.requests.iter() {
            if !classify(r).is_gpu() {
                continue;
            }
            let want = u64::try_from(*n).unwrap_or(0);
            let fits = nodes.iter().find(|node| {
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
    asked
}

/// What the greedy search reads: the source, its ClusterPolicy, the GPU pods bound to each
/// node ([`holders`]) and whether a relabel may disrupt them.
struct Search<'a> {
    source: &'a Snapshot,
    policy: Option<&'a ClusterPolicy>,
    held: BTreeMap<&'a str, Vec<&'a PodInfo>>,
    allow_disruption: bool,
}

/// One GPU name short of units: the config (and vGPU type) under which a node advertises
/// it, and the pods asking for it (queue order, units each).
struct Want<'w, 'p> {
    resource: &'w str,
    config: WorkloadConfig,
    vgpu: Option<String>,
    pods: &'w [(&'p PodInfo, u64)],
}

/// A node that would advertise a wanted name once relabelled.
struct Candidate<'a> {
    node: &'a NodeInfo,
    /// Units of the name it would advertise.
    units: u64,
    /// The asking pods whose constraints allow it after the relabel.
    hosts: Vec<String>,
    /// The pods it runs that hold a GPU name it would lose (`namespace/name`).
    lost: Vec<String>,
}

impl<'a> Search<'a> {
    /// Serves `want`: relabels candidates (most units first, then least disruption, then
    /// by name; each node once in the plan, recorded in `used`) while units are short,
    /// each taking the asking pods it can host in queue order; the pods left are
    /// unservable, with why.
    fn serve(
        &self,
        want: &Want<'_, '_>,
        used: &mut BTreeSet<String>,
        steps: &mut Vec<Step>,
        unservable: &mut Vec<Unservable>,
    ) {
        let mut need: u64 = want.pods.iter().map(|(_, n)| *n).sum();
        let (candidates, could_advertise) = self.candidates(want, used);
        let mut served: BTreeSet<String> = BTreeSet::new();
        for c in candidates {
            if need == 0 {
                break;
            }
            // The pods it takes, in queue order, while its units last.
            let mut left = c.units;
            let mut new = Vec::new();
            for (p, k) in want.pods {
                let key = p.key();
                if *k <= left && c.hosts.contains(&key) && !served.contains(&key) {
                    left -= k;
                    new.push(key);
                }
            }
            if new.is_empty() {
                continue;
            }
            served.extend(new.iter().cloned());
            need = need.saturating_sub(c.units - left);
            used.insert(c.node.name.clone());
            steps.push(Step {
                relabel: Relabel {
                    node: c.node.name.clone(),
                    config: want.config,
                    vgpu_type: want.vgpu.clone(),
                },
                from: c.node.label(LABEL_KEY).map(str::to_string),
                resource: want.resource.to_owned(),
                units: c.units,
                for_pods: new,
                disrupts: c.lost,
            });
        }
        if need == 0 {
            return;
        }
        for (p, _) in want.pods {
            if served.contains(&p.key()) {
                continue;
            }
            unservable.push(Unservable {
                pod: p.key(),
                resource: want.resource.to_owned(),
                why: self.why_unservable(p, want, &could_advertise),
            });
        }
    }

    /// The nodes not yet `used` that would advertise more of the wanted name once relabelled
    /// and host at least one asking pod (and, unless disruption is allowed, disrupt none),
    /// in the order the search takes them; and apart, every node that would advertise more
    /// of it (hosting or not), by name.
    fn candidates(
        &self,
        want: &Want<'_, '_>,
        used: &BTreeSet<String>,
    ) -> (Vec<Candidate<'a>>, Vec<String>) {
        let mut candidates = Vec::new();
        let mut could_advertise = Vec::new();
        for n in &self.source.nodes {
            if used.contains(&n.name) {
                continue;
            }
            let Some(inf) = predict::infer_hardware(n) else {
                continue;
            };
            let after = predict::relabelled(n, want.config, want.vgpu.as_deref());
            let (adv, _) = predict::advertised(&after, &inf.hw, self.policy);
            let units = adv.get(want.resource).copied().unwrap_or(0);
            let now = predict::advertised(n, &inf.hw, self.policy).0;
            if units == 0 || now.get(want.resource).copied().unwrap_or(0) >= units {
                continue;
            }
            could_advertise.push(n.name.clone());
            let hosts: Vec<String> = want
                .pods
                .iter()
                .filter(|(p, _)| placement::allows(p, &after))
                .map(|(p, _)| p.key())
                .collect();
            if hosts.is_empty() {
                continue;
            }
            let lost: Vec<String> = self
                .held
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
            if !lost.is_empty() && !self.allow_disruption {
                continue;
            }
            candidates.push(Candidate {
                node: n,
                units,
                hosts,
                lost,
            });
        }
        candidates.sort_by(|a, b| {
            b.units
                .cmp(&a.units)
                .then(a.lost.len().cmp(&b.lost.len()))
                .then(a.node.name.cmp(&b.node.name))
        });
        (candidates, could_advertise)
    }

    /// Why no relabel in the plan serves pod `p`: no node's GPUs would advertise the name;
    /// the pod's own constraints exclude every node that would (said of the node after the
    /// relabel); every such node would disrupt pods; or they are used by this plan.
    fn why_unservable(
        &self,
        p: &PodInfo,
        want: &Want<'_, '_>,
        could_advertise: &[String],
    ) -> String {
        let (resource, config) = (want.resource, want.config);
        let relabelled = |n: &NodeInfo| predict::relabelled(n, config, want.vgpu.as_deref());
        let node = |name: &str| {
            self.source
                .nodes
                .iter()
                .find(|n| n.name == name)
                .expect("listed")
        };
        if could_advertise.is_empty() {
            format!(
                "no node's GPUs would advertise {resource} under any workload config \
                 (no node has the GPU model or board it names)"
            )
        } else if !could_advertise
            .iter()
            .any(|c| placement::allows(p, &relabelled(node(c))))
        {
            let n = node(&could_advertise[0]);
            let ex = placement::exclusions(p, &relabelled(n));
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
        } else if !self.allow_disruption {
            "every node that could serve it runs pods holding GPUs it would lose \
             (--allow-disruption to consider them)"
                .to_string()
        } else {
            "the nodes that could serve it are already used by this plan".to_string()
        }
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
            spec_problems: Vec::new(),
            resource_claims: vec![],
            vmi_owned_by_vm: None,
            vm_memory: None,
            vmi_shape: None,
        }
    }

    #[test]
    fn free_units_and_the_demand_they_cannot_take() {
        let nodes = vec![
            node("c-0", "container", "nvidia.com/gpu", 2),
            node("c-1", "container", "nvidia.com/gpu", 1),
        ];
        let pods = vec![
            pod("busy", "nvidia.com/gpu", Some("c-0")),
            pod("p1", "nvidia.com/gpu", None),
            pod("p2", "nvidia.com/gpu", None),
            pod("p3", "nvidia.com/gpu", None),
        ];
        let held = holders(&pods);
        let mut free = free_units(&nodes, &held);
        assert_eq!(free["c-0"]["nvidia.com/gpu"], 1);
        assert_eq!(free["c-1"]["nvidia.com/gpu"], 1);
        let pending: Vec<&PodInfo> = pods[1..].iter().collect();
        let asked = unmet_demand(&nodes, &pending, &mut free);
        // In queue order p1 takes c-0's free unit and p2 c-1's; p3 is short.
        let short: Vec<(&str, u64)> = asked["nvidia.com/gpu"]
            .iter()
            .map(|(p, n)| (p.name.as_str(), *n))
            .collect();
        assert_eq!(short, [("p3", 1)]);
        assert_eq!(free["c-0"]["nvidia.com/gpu"], 0);
        assert_eq!(free["c-1"]["nvidia.com/gpu"], 0);
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
        let src = Snapshot::of_cluster(nodes, pods, PolicyStatus::not_read());
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
        let src = Snapshot::of_cluster(nodes, pods, PolicyStatus::not_read());
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
    fn a_vm_kubevirt_refuses_is_left_out_as_not_permitted() {
        use crate::model::kubevirt::{HostDevicesSource, PciHostDevice, PermittedHostDevices};
        // Issue 47: the lab's vm-cross (a VMI asking the container name, no launcher pod)
        // is considered and left out: no relabel gets KubeVirt to render its launcher.
        let nodes = vec![
            node("c-0", "container", "nvidia.com/gpu", 4),
            node("p-0", "vm-passthrough", "nvidia.com/GA102GL_A10", 2),
        ];
        let vmi = crate::decode::pods::from_object(&serde_json::json!({
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm-cross", "namespace": "vms"},
            "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/gpu"}]}}}
        }))
        .unwrap();
        let kv = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: Some(true),
            pci_host_devices: vec![PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        let src = Snapshot {
            kubevirt: Some(kv),
            ..Snapshot::of_cluster(nodes, vec![vmi], PolicyStatus::not_read())
        };
        let p = propose(&src, false);
        assert!(p.steps.is_empty(), "{:?}", p.steps);
        assert_eq!(p.pending_pods, 0);
        assert_eq!(
            p.held_back,
            [PlanHeld {
                pod: "vms/vm-cross".into(),
                class: PodClass::Unservable,
                code: CauseCode::NotPermitted,
            }]
        );
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
        let src = Snapshot::of_cluster(
            nodes,
            vec![pod("drained", "nvidia.com/gpu", None), gated],
            PolicyStatus::not_read(),
        );
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
