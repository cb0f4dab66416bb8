//! What a twin's outcome means, without the twin: the relabels asked for, the report
//! ([`Report`]) and its verdict, the steps that apply a relabel for real
//! ([`apply_steps`]), and the judgements made on the pods read back (which pending pods
//! the relabel placed, which still wait and why, which running pods lose the name they
//! hold, how the inventory rows moved). Pure: no API call.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{pod_name, predict};
use crate::analysis::kueue::RelabelQuota;
use crate::analysis::{explain, inventory};
use crate::error::Result;
use crate::model::operator::VGPU_CONFIG_LABEL;
use crate::model::pod::{self, PodInfo};
use crate::model::resource::NVIDIA_PREFIX;
use crate::model::workload::{InvalidWorkloadConfig, LABEL_KEY, WorkloadConfig};
use crate::text;

/// One relabel: `NODE=CONFIG`, or `NODE=vm-vgpu:TYPE` to also set `nvidia.com/vgpu.config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Relabel {
    /// Node name.
    pub node: String,
    /// The new `nvidia.com/gpu.workload.config`.
    pub config: WorkloadConfig,
    /// The new `nvidia.com/vgpu.config` (vm-vgpu only), e.g. `A10-12Q`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_type: Option<String>,
}

impl std::str::FromStr for Relabel {
    type Err = String;

    /// Parses `NODE=CONFIG[:VGPU_TYPE]`. Errors: one line naming what is wrong.
    fn from_str(s: &str) -> std::result::Result<Relabel, String> {
        let (node, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("{}: expected NODE=CONFIG", text::cut(s)))?;
        let (config, vgpu) = match rest.split_once(':') {
            Some((c, t)) => (c, Some(t)),
            None => (rest, None),
        };
        if node.is_empty() {
            return Err(format!("{}: the node name is empty", text::cut(s)));
        }
        // Checked before any API call: a name with `/` would address a subresource
        // (`NODE/status`), and the messages below name the node as given.
        if !text::is_dns_subdomain(node) {
            return Err(format!(
                "{}: not a node name (lower-case letters, digits, '-' and '.', starting and \
                 ending with a letter or digit, at most 253; no '/')",
                text::cut(node)
            ));
        }
        let config: WorkloadConfig = config
            .parse()
            .map_err(|e: InvalidWorkloadConfig| format!("{node}: {e}{}", e.did_you_mean()))?;
        if let Some(t) = vgpu {
            if config != WorkloadConfig::VmVgpu {
                return Err(format!(
                    "{node}: a vGPU type (:{}) goes with vm-vgpu only",
                    text::cut(t)
                ));
            }
            if predict::vgpu_type_parts(t).is_none() {
                // The same did-you-mean as `gpuwl policy`'s for nvidia.com/vgpu.config: the
                // value in capitals with `_` as `-`, when that is a vGPU type.
                let near = t.to_uppercase().replace('_', "-");
                return Err(format!(
                    "{node}: {} is not a vGPU type such as A10-12Q{}",
                    text::cut(t),
                    if near != t && predict::vgpu_type_parts(&near).is_some() {
                        format!("; did you mean {}?", text::esc(&near))
                    } else {
                        String::new()
                    }
                ));
            }
        }
        Ok(Relabel {
            node: node.to_string(),
            config,
            vgpu_type: vgpu.map(str::to_string),
        })
    }
}

impl Relabel {
    /// `NODE=CONFIG` or `NODE=vm-vgpu:TYPE`, as `whatif relabel` and `gpuwl relabel` take it.
    pub fn arg(&self) -> String {
        match &self.vgpu_type {
            Some(t) => format!("{}={}:{t}", self.node, self.config),
            None => format!("{}={}", self.node, self.config),
        }
    }

    /// The `kubectl label` command that applies it for real.
    pub fn command(&self) -> String {
        let mut c = format!(
            "kubectl label node {} {LABEL_KEY}={} --overwrite",
            self.node, self.config
        );
        if let Some(t) = &self.vgpu_type {
            c.push_str(&format!(" {VGPU_CONFIG_LABEL}={t}"));
        }
        c
    }
}

/// A pod (or VMI) of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRef {
    /// `namespace/name` in the source (a VMI by its own name).
    pub pod: String,
    /// `Pod`, `VirtualMachineInstance` or `VirtualMachine`.
    pub kind: String,
    /// The VMI a virt-launcher pod runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmi: Option<String>,
    /// Its `nvidia.com/` requests.
    pub requests: BTreeMap<String, i64>,
    /// For a virt-launcher pod: whether a VirtualMachine owns its VMI (`virtctl stop`
    /// needs one); absent when not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmi_owned_by_vm: Option<bool>,
}

/// A pending pod the twin's scheduler placed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Placed {
    /// The pod.
    #[serde(flatten)]
    pub pod: PodRef,
    /// The node the twin's scheduler bound it to.
    pub node: String,
}

/// A pending pod that still waits in the twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StillPending {
    /// The pod.
    #[serde(flatten)]
    pub pod: PodRef,
    /// The twin scheduler's PodScheduled message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_message: Option<String>,
    /// explain's cause code on the twin's state.
    pub cause_code: String,
    /// explain's cause.
    pub cause: String,
    /// explain's fix.
    pub fix: String,
}

/// A running pod that holds a name its node no longer offers after the relabel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disrupted {
    /// The pod.
    #[serde(flatten)]
    pub pod: PodRef,
    /// The node.
    pub node: String,
    /// The name it holds.
    pub resource: String,
    /// Units of it the node advertised before → after.
    pub before: u64,
    /// After.
    pub after: u64,
}

/// One relabelled node: labels and advertised names before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeChange {
    /// The relabel.
    #[serde(flatten)]
    pub relabel: Relabel,
    /// The label before (`None`: absent).
    pub from: Option<String>,
    /// `nvidia.com/` GPU names and allocatable units before.
    pub advertised_before: BTreeMap<String, u64>,
    /// After, as the twin's node status shows them (a name that left is `0`).
    pub advertised_after: BTreeMap<String, u64>,
    /// How the node's GPUs were worked out ([`predict::infer_hardware`]).
    pub hardware: Vec<String>,
    /// What the model could not know or decide.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One inventory row before and after: pool × resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolDelta {
    /// Pool name.
    pub pool: String,
    /// Resource name.
    pub resource: String,
    /// Allocatable units before → after.
    pub allocatable: (i64, i64),
    /// Free units before → after.
    pub free: (i64, i64),
    /// Pending units before → after.
    pub pending: (i64, i64),
}

/// What the twin was built of, and how faithfully.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TwinFacts {
    /// The twin's local cluster name.
    pub cluster: String,
    /// Whether it was left running (`--keep`).
    pub kept: bool,
    /// GPU nodes copied.
    pub nodes: usize,
    /// CPU-only nodes left out.
    pub cpu_nodes_left_out: usize,
    /// Bound pods copied.
    pub bound_pods: usize,
    /// Pending GPU pods handed to the twin's scheduler.
    pub pending_pods: usize,
    /// Pods left out, with why (DRA claims, a spec the API server would refuse, a VMI whose
    /// launcher pod is listed too).
    pub left_out: Vec<String>,
    /// What no twin pod carries.
    pub not_copied: String,
    /// Who moved the names after the relabel.
    pub names_by: String,
    /// Seconds the whole run took (twin start to read-back).
    pub seconds: f64,
}

/// How a relabel comes out, in one word: [`Verdict::recommendation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recommendation {
    /// Nothing running loses its GPU, and some pending pod is served.
    Safe,
    /// Nothing running loses its GPU, but no pending pod is served either.
    NoGain,
    /// Some running pod or VM loses the name it holds.
    NotRecommended,
}

/// The report's one-line judgement, computed from the twin's outcome: how many pending
/// pods the relabel gets placed (by the twin's scheduler, not counting those it placed
/// without the relabel), and how many running pods or VMs lose the GPU name they hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Pending pods the relabel gets placed ([`Report::now_scheduled`]).
    pub serves: usize,
    /// Running pods (a VM by its launcher pod) that lose the name they hold, each once
    /// ([`Report::disrupted`]).
    pub disrupts: usize,
    /// Pending pods still pending afterwards.
    pub still_pending: usize,
    /// The word.
    pub recommendation: Recommendation,
    /// The line the text report leads with (after `Verdict: `).
    pub summary: String,
}

impl Verdict {
    /// The verdict of a twin's outcome.
    pub fn of(now_scheduled: &[Placed], still_pending: usize, disrupted: &[Disrupted]) -> Verdict {
        let disrupts = disrupted
            .iter()
            .map(|d| d.pod.pod.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        Verdict::counts(now_scheduled.len(), disrupts, still_pending)
    }

    /// The verdict of `serves` pending pods served and `disrupts` running ones disrupted.
    pub fn counts(serves: usize, disrupts: usize, still_pending: usize) -> Verdict {
        let recommendation = if disrupts > 0 {
            Recommendation::NotRecommended
        } else if serves > 0 {
            Recommendation::Safe
        } else {
            Recommendation::NoGain
        };
        let summary = format!(
            "serves {}, disrupts {}: {}",
            if serves == 0 {
                "no pending pod".to_string()
            } else {
                format!("{serves} pending pod(s)")
            },
            if disrupts == 0 {
                "none".to_string()
            } else {
                format!("{disrupts} running VM/pod(s)")
            },
            match recommendation {
                Recommendation::Safe => "safe",
                Recommendation::NoGain => "safe, but it gains nothing",
                Recommendation::NotRecommended => "not recommended",
            }
        );
        Verdict {
            serves,
            disrupts,
            still_pending,
            recommendation,
            summary,
        }
    }
}

/// The steps a real relabel takes, one command a line, each group after a `# ` comment:
/// cordon the nodes; stop or move what would lose its GPU (a VM by `virtctl stop` or
/// `virtctl migrate`, never by deleting its virt-launcher pod: kubevirt/kubevirt
/// `pkg/virtctl/vm/`); relabel; wait until the GPU Operator's operands for the new workload
/// run there and the node advertises the new name (a driver ↔ vfio-pci change may need a
/// reboot: docs/domain-facts.md §2, NVIDIA/cloud-native-docs
/// `gpu-operator/gpu-operator-kubevirt.rst`); uncordon.
pub fn apply_steps(changes: &[NodeChange], disrupted: &[Disrupted]) -> Vec<String> {
    let mut out = Vec::new();
    let nodes: Vec<&str> = changes.iter().map(|c| c.relabel.node.as_str()).collect();
    out.push("# 1. cordon: nothing new lands on the node while it changes".to_string());
    for n in &nodes {
        out.push(format!("kubectl cordon {n}"));
    }
    let mut seen = std::collections::BTreeSet::new();
    let holders: Vec<&Disrupted> = disrupted
        .iter()
        .filter(|d| seen.insert(d.pod.pod.as_str()))
        .collect();
    let holders_any = !holders.is_empty();
    if holders.is_empty() {
        out.push("# 2. nothing running there holds a GPU name the relabel takes away".to_string());
    } else {
        out.push(
            "# 2. stop what would lose its GPU (or live-migrate a VM to a node that offers the \
             name); never delete a virt-launcher pod"
                .to_string(),
        );
        for d in holders {
            let (ns, name) = d.pod.pod.split_once('/').unwrap_or(("default", &d.pod.pod));
            let vmi = d.pod.vmi.as_deref();
            if let (Some(vmi), None) = (vmi, d.pod.vmi_owned_by_vm) {
                out.push(format!(
                    "# (a VMI no VirtualMachine owns: {})",
                    pod::stop_command(ns, name, Some(vmi), Some(false))
                ));
            }
            out.push(pod::stop_command(ns, name, vmi, d.pod.vmi_owned_by_vm));
        }
    }
    out.push("# 3. relabel".to_string());
    for c in changes {
        out.push(c.relabel.command());
    }
    out.push(
        "# 4. wait until the operator's operands run and the new name is advertised (a driver \
         or vfio-pci change may need a reboot of the node)"
            .to_string(),
    );
    for c in changes {
        let n = &c.relabel.node;
        out.push(format!(
            "kubectl get pods -A -o wide --field-selector spec.nodeName={n}"
        ));
        let gained = c.advertised_after.iter().find(|(k, after)| {
            **after > 0 && c.advertised_before.get(*k).copied().unwrap_or(0) < **after
        });
        match gained {
            Some((name, units)) => out.push(format!(
                "kubectl wait node/{n} --for=jsonpath='{{.status.allocatable.{}}}'={units} \
                 --timeout=30m",
                name.replace('.', "\\.")
            )),
            None => out.push(format!(
                "kubectl get node {n} -o jsonpath='{{.status.allocatable}}'"
            )),
        }
    }
    out.push("# 5. uncordon".to_string());
    for n in &nodes {
        out.push(format!("kubectl uncordon {n}"));
    }
    // The same steps carried out, timed and resumable (src/relabel/).
    out.push(
        "# or steps 1-5 in one resumable command (stops cordoned if a wait times out):".into(),
    );
    let targets: Vec<String> = changes.iter().map(|c| c.relabel.arg()).collect();
    out.push(format!(
        "gpuwl relabel {}{}",
        targets.join(" "),
        if holders_any { " --evict" } else { "" }
    ));
    out
}

/// The whatif report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The one-line judgement the report leads with.
    pub verdict: Verdict,
    /// Where the cluster was read from.
    pub source: String,
    /// The relabelled nodes.
    pub changes: Vec<NodeChange>,
    /// Pending pods the twin placed before any relabel (the twin differs from the cluster
    /// here: the cluster's scheduler may not have retried them yet, or something the twin
    /// does not copy kept them).
    pub placed_without_relabel: Vec<Placed>,
    /// Pending pods that schedule once the relabels are applied.
    pub now_scheduled: Vec<Placed>,
    /// Pending pods still pending, with explain's cause on the twin.
    pub still_pending: Vec<StillPending>,
    /// Running pods whose node loses the name they hold.
    pub disrupted: Vec<Disrupted>,
    /// The inventory rows that changed (or hold demand), before → after.
    pub inventory: Vec<PoolDelta>,
    /// The steps that apply the relabels for real ([`apply_steps`]): `# ` comments and one
    /// command each.
    pub commands: Vec<String>,
    /// The twin.
    pub twin: TwinFacts,
    /// Other remarks.
    pub notes: Vec<String>,
    /// The quota layer, when Kueue's objects were read: the flavors each relabelled node
    /// leaves and joins, and the admitted workloads that lose their pool
    /// ([`crate::analysis::kueue::relabel_quota`]; its sentences are notes too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<RelabelQuota>,
}

/// The pod as the report names it: its source key (`source_key`, else its own key), kind,
/// launcher VMI and `nvidia.com/` requests.
pub fn pod_ref(p: &PodInfo, source_key: Option<&String>) -> PodRef {
    PodRef {
        pod: source_key.cloned().unwrap_or_else(|| p.key()),
        kind: p.kind.as_str().to_string(),
        vmi: p.launcher_vmi().map(str::to_string),
        requests: p
            .requests
            .iter()
            .filter(|(r, _)| r.starts_with(NVIDIA_PREFIX))
            .map(|(r, n)| (r.clone(), *n))
            .collect(),
        vmi_owned_by_vm: p.launcher_vmi().and(p.vmi_owned_by_vm),
    }
}

/// Twin pod key (`namespace/twin name`) → the source's pending pod.
pub type PendingByTwin<'a> = BTreeMap<String, &'a PodInfo>;

/// The pending pods by the key their copy has in the twin (`namespace/twin name`).
pub fn pending_by_twin_key<'a>(pending: &[&'a PodInfo]) -> PendingByTwin<'a> {
    pending
        .iter()
        .map(|p| (format!("{}/{}", p.namespace, pod_name(p)), *p))
        .collect()
}

/// The copied pending pods the twin's scheduler bound before any relabel (they would not
/// have waited in the cluster), with their node.
pub fn placed_as_is(pods: &[PodInfo], pending_by_twin: &PendingByTwin<'_>) -> Vec<Placed> {
    pods.iter()
        .filter_map(|p| {
            let src = pending_by_twin.get(&p.key())?;
            Some(Placed {
                pod: pod_ref(p, Some(&src.key())),
                node: p.node_name.clone()?,
            })
        })
        .collect()
}

/// What became of the copied pending pods the scheduler had not bound before the relabel:
/// bound now (with their node), or still pending (explained on the twin's state).
pub fn pending_outcome(
    pods_after: &[PodInfo],
    pending_by_twin: &PendingByTwin<'_>,
    placed_before: &BTreeSet<String>,
    inputs: explain::Inputs<'_>,
) -> Result<(Vec<Placed>, Vec<StillPending>)> {
    let mut now_scheduled = Vec::new();
    let mut still_pending = Vec::new();
    for p in pods_after {
        let Some(src) = pending_by_twin.get(&p.key()) else {
            continue;
        };
        if placed_before.contains(&src.key()) {
            continue;
        }
        match &p.node_name {
            Some(n) => now_scheduled.push(Placed {
                pod: pod_ref(p, Some(&src.key())),
                node: n.clone(),
            }),
            None => {
                let e = explain::explain(p, inputs)?;
                still_pending.push(StillPending {
                    pod: pod_ref(p, Some(&src.key())),
                    scheduler_message: p.pod_scheduled().and_then(|c| c.message.clone()),
                    cause_code: e.cause_code.as_str().to_string(),
                    cause: e.cause,
                    fix: e.fix,
                });
            }
        }
    }
    Ok((now_scheduled, still_pending))
}

/// Disrupted: bound pods (not the copied pending ones, not terminal) on a relabelled node
/// holding an `nvidia.com/` name the node now offers fewer units of than its pods hold
/// together; each such pod once per name.
pub fn disrupted_pods(
    changes: &[NodeChange],
    pods_after: &[PodInfo],
    pending_by_twin: &PendingByTwin<'_>,
) -> Vec<Disrupted> {
    let mut disrupted = Vec::new();
    for c in changes {
        let on_node: Vec<&PodInfo> = pods_after
            .iter()
            .filter(|p| {
                p.node_name.as_deref() == Some(c.relabel.node.as_str())
                    && !pending_by_twin.contains_key(&p.key())
                    && !p.is_terminal()
            })
            .collect();
        let mut held: BTreeMap<&str, i64> = BTreeMap::new();
        for p in &on_node {
            for (r, n) in p.requests.iter() {
                if r.starts_with(NVIDIA_PREFIX) {
                    let e = held.entry(r.as_str()).or_insert(0);
                    *e = e.saturating_add(*n);
                }
            }
        }
        for (r, units) in held {
            let after = c.advertised_after.get(r).copied().unwrap_or(0);
            if u64::try_from(units).unwrap_or(0) <= after {
                continue;
            }
            let before = c.advertised_before.get(r).copied().unwrap_or(0);
            for p in on_node.iter().filter(|p| p.requests.contains_key(r)) {
                disrupted.push(Disrupted {
                    pod: pod_ref(p, None),
                    node: c.relabel.node.clone(),
                    resource: r.to_string(),
                    before,
                    after,
                });
            }
        }
    }
    disrupted
}

/// The inventory rows of `before` and `after` side by side (pool × resource), those whose
/// numbers differ or that hold pending demand.
pub fn pool_deltas(before: &inventory::Inventory, after: &inventory::Inventory) -> Vec<PoolDelta> {
    let key = |r: &inventory::Row| (r.pool.clone(), r.resource.clone().unwrap_or_default());
    let mut rows: BTreeMap<(String, String), PoolDelta> = BTreeMap::new();
    for r in &before.rows {
        rows.insert(
            key(r),
            PoolDelta {
                pool: r.pool.clone(),
                resource: r.resource.clone().unwrap_or_default(),
                allocatable: (r.allocatable, 0),
                free: (r.free, 0),
                pending: (r.pending, 0),
            },
        );
    }
    for r in &after.rows {
        let e = rows.entry(key(r)).or_insert_with(|| PoolDelta {
            pool: r.pool.clone(),
            resource: r.resource.clone().unwrap_or_default(),
            allocatable: (0, 0),
            free: (0, 0),
            pending: (0, 0),
        });
        e.allocatable.1 = r.allocatable;
        e.free.1 = r.free;
        e.pending.1 = r.pending;
    }
    rows.into_values()
        .filter(|d| {
            d.allocatable.0 != d.allocatable.1
                || d.free.0 != d.free.1
                || d.pending.0 != d.pending.1
                || d.pending.0 > 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pod: &str, vmi: Option<&str>, owned: Option<bool>) -> PodRef {
        PodRef {
            pod: pod.into(),
            kind: "Pod".into(),
            vmi: vmi.map(str::to_string),
            requests: [("nvidia.com/GA102GL_A10".to_string(), 1)]
                .into_iter()
                .collect(),
            vmi_owned_by_vm: owned,
        }
    }

    fn disrupted(pod: PodRef) -> Disrupted {
        Disrupted {
            pod,
            node: "lab-node-1".into(),
            resource: "nvidia.com/GA102GL_A10".into(),
            before: 2,
            after: 0,
        }
    }

    fn gpu_pod(name: &str, node: Option<&str>, units: i64) -> PodInfo {
        let mut spec = serde_json::json!({"containers": [{"name": "c", "resources": {
            "limits": {"nvidia.com/GA102GL_A10": units.to_string()}}}]});
        if let Some(n) = node {
            spec["nodeName"] = serde_json::json!(n);
        }
        crate::decode::pods::from_object(&serde_json::json!({
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "vms"},
            "spec": spec,
            "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}
        }))
        .unwrap()
    }

    fn change(node: &str, before: u64, after: u64) -> NodeChange {
        let name = "nvidia.com/GA102GL_A10".to_string();
        NodeChange {
            relabel: Relabel {
                node: node.into(),
                config: WorkloadConfig::Container,
                vgpu_type: None,
            },
            from: Some("vm-passthrough".into()),
            advertised_before: BTreeMap::from([(name.clone(), before)]),
            advertised_after: BTreeMap::from([(name, after)]),
            hardware: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn disrupted_are_bound_pods_holding_more_than_the_node_now_offers() {
        let pods = vec![
            gpu_pod("vm-a", Some("lab-node-1"), 1),
            gpu_pod("vm-b", Some("lab-node-1"), 1),
            gpu_pod("elsewhere", Some("lab-node-2"), 1),
            gpu_pod("waiting", None, 1),
        ];
        // The twin's copy of a pending pod bound by the scheduler is not a disruption.
        let placed = gpu_pod("placed", Some("lab-node-1"), 1);
        let mut all = pods.clone();
        all.push(placed.clone());
        let pending = [&placed];
        let by_twin = pending_by_twin_key(&pending);
        assert_eq!(by_twin.keys().collect::<Vec<_>>(), ["vms/placed"]);
        // 2 held on lab-node-1, 1 offered after: both holders are disrupted, once each.
        let d = disrupted_pods(&[change("lab-node-1", 2, 1)], &all, &by_twin);
        let got: Vec<(&str, &str, u64, u64)> = d
            .iter()
            .map(|d| (d.pod.pod.as_str(), d.node.as_str(), d.before, d.after))
            .collect();
        assert_eq!(
            got,
            [
                ("vms/vm-a", "lab-node-1", 2, 1),
                ("vms/vm-b", "lab-node-1", 2, 1)
            ]
        );
        // Enough left: nobody is disrupted.
        assert!(disrupted_pods(&[change("lab-node-1", 2, 2)], &all, &by_twin).is_empty());
    }

    #[test]
    fn placed_as_is_lists_copied_pending_pods_the_scheduler_bound() {
        let waiting = gpu_pod("w", None, 1);
        let bound_copy = gpu_pod("w", Some("lab-node-1"), 1);
        let other = gpu_pod("other", Some("lab-node-1"), 1);
        let pending = [&waiting];
        let by_twin = pending_by_twin_key(&pending);
        let placed = placed_as_is(&[bound_copy, other], &by_twin);
        assert_eq!(placed.len(), 1);
        assert_eq!(placed[0].pod.pod, "vms/w");
        assert_eq!(placed[0].node, "lab-node-1");
    }

    #[test]
    fn verdict_counts_served_and_disrupted() {
        let placed = Placed {
            pod: holder("gpu-vm/wait-gpu", None, None),
            node: "lab-node-1".into(),
        };
        let d = disrupted(holder("gpu-vm/virt-launcher-a-x", Some("a"), Some(true)));
        // The same pod holding two names counts once.
        let mut d2 = d.clone();
        d2.resource = "nvidia.com/gpu".into();
        let v = Verdict::of(std::slice::from_ref(&placed), 1, &[d, d2]);
        assert_eq!((v.serves, v.disrupts, v.still_pending), (1, 1, 1));
        assert_eq!(v.recommendation, Recommendation::NotRecommended);
        assert_eq!(
            v.summary,
            "serves 1 pending pod(s), disrupts 1 running VM/pod(s): not recommended"
        );
        let v = Verdict::of(&[placed], 0, &[]);
        assert_eq!(v.recommendation, Recommendation::Safe);
        assert_eq!(v.summary, "serves 1 pending pod(s), disrupts none: safe");
        let v = Verdict::of(&[], 2, &[]);
        assert_eq!(v.recommendation, Recommendation::NoGain);
        assert_eq!(
            v.summary,
            "serves no pending pod, disrupts none: safe, but it gains nothing"
        );
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            serde_json::json!({"serves": 0, "disrupts": 0, "stillPending": 2,
                "recommendation": "no-gain", "summary": v.summary})
        );
    }

    #[test]
    fn apply_steps_cordon_stop_relabel_wait_uncordon() {
        let change = NodeChange {
            relabel: "lab-node-1=container".parse().unwrap(),
            from: Some("vm-passthrough".into()),
            advertised_before: [("nvidia.com/GA102GL_A10".to_string(), 2)]
                .into_iter()
                .collect(),
            advertised_after: [
                ("nvidia.com/GA102GL_A10".to_string(), 0),
                ("nvidia.com/gpu".to_string(), 2),
            ]
            .into_iter()
            .collect(),
            hardware: Vec::new(),
            notes: Vec::new(),
        };
        let steps = apply_steps(
            std::slice::from_ref(&change),
            &[
                disrupted(holder(
                    "gpu-vm/virt-launcher-vm-a-x",
                    Some("vm-a"),
                    Some(true),
                )),
                disrupted(holder(
                    "gpu-vm/virt-launcher-bare-x",
                    Some("bare"),
                    Some(false),
                )),
                disrupted(holder("gpu-vm/virt-launcher-who-x", Some("who"), None)),
                disrupted(holder("ml/train", None, None)),
            ],
        );
        let commands: Vec<&str> = steps
            .iter()
            .map(String::as_str)
            .filter(|l| !l.starts_with('#'))
            .collect();
        assert_eq!(
            commands,
            [
                "kubectl cordon lab-node-1",
                "virtctl stop vm-a -n gpu-vm",
                "kubectl delete vmi bare -n gpu-vm",
                "virtctl stop who -n gpu-vm",
                "kubectl delete pod train -n ml",
                "kubectl label node lab-node-1 nvidia.com/gpu.workload.config=container --overwrite",
                "kubectl get pods -A -o wide --field-selector spec.nodeName=lab-node-1",
                "kubectl wait node/lab-node-1 --for=jsonpath='{.status.allocatable.nvidia\\.com/gpu}'=2 --timeout=30m",
                "kubectl uncordon lab-node-1",
                "gpuwl relabel lab-node-1=container --evict",
            ]
        );
        assert!(steps[0].starts_with("# 1. cordon"));
        assert!(
            steps
                .iter()
                .any(|l| l == "# (a VMI no VirtualMachine owns: kubectl delete vmi who -n gpu-vm)")
        );
        assert!(
            steps
                .iter()
                .any(|l| l.starts_with("# 4. wait until the operator's operands run"))
        );
        // Nothing disrupted: step 2 says so, no stop command.
        let steps = apply_steps(&[change], &[]);
        assert!(steps.contains(
            &"# 2. nothing running there holds a GPU name the relabel takes away".to_string()
        ));
        assert_eq!(steps.iter().filter(|l| !l.starts_with('#')).count(), 6);
        // Nothing to evict: gpuwl relabel needs no --evict.
        assert_eq!(
            steps.last().map(String::as_str),
            Some("gpuwl relabel lab-node-1=container")
        );
    }

    #[test]
    fn relabels_parse_with_clear_errors() {
        let r: Relabel = "lab-node-1=container".parse().unwrap();
        assert_eq!(r.node, "lab-node-1");
        assert_eq!(r.config, WorkloadConfig::Container);
        assert_eq!(
            r.command(),
            "kubectl label node lab-node-1 nvidia.com/gpu.workload.config=container --overwrite"
        );
        let v: Relabel = "n2=vm-vgpu:A10-12Q".parse().unwrap();
        assert_eq!(v.vgpu_type.as_deref(), Some("A10-12Q"));
        assert!(v.command().ends_with(" nvidia.com/vgpu.config=A10-12Q"));
        let e = "n1=vm-pasthrough".parse::<Relabel>().unwrap_err();
        assert!(e.contains("did you mean vm-passthrough"), "{e}");
        assert!("n1".parse::<Relabel>().unwrap_err().contains("NODE=CONFIG"));
        assert!(
            "n1=container:A10-12Q"
                .parse::<Relabel>()
                .unwrap_err()
                .contains("vm-vgpu only")
        );
        assert!(
            "n1=vm-vgpu:big"
                .parse::<Relabel>()
                .unwrap_err()
                .contains("not a vGPU type")
        );
        assert!(
            "=container"
                .parse::<Relabel>()
                .unwrap_err()
                .contains("empty")
        );
        // Not a node name: a subresource path, upper case, a control character (escaped
        // in the message, never echoed raw).
        for bad in ["kwok-node-0/status", "Node-1", "n\u{1b}[31m", "-n"] {
            let e = format!("{bad}=container").parse::<Relabel>().unwrap_err();
            assert!(e.contains("not a node name"), "{bad}: {e}");
            assert!(!e.contains('\u{1b}'), "{e}");
        }
    }
}
