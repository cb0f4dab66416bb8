//! `gpuwl relabel`: a node's workload label changed on a real cluster, step by step, the way
//! the whatif report's "To apply for real" says ([`crate::twin::apply_steps`]):
//!
//! 1. `preview`: the twin's verdict (`gpuwl whatif relabel`), unless `--no-preview`;
//! 2. `cordon`: nothing new lands on the node;
//! 3. `holders`: the pods holding a GPU name there (a KubeVirt VM by its virt-launcher pod)
//!    are evicted or their VMs stopped, as the user said, and waited out;
//! 4. `relabel`: `nvidia.com/gpu.workload.config` (and `nvidia.com/vgpu.config`);
//! 5. `operands`: the GPU Operator's operands of the new config run Ready on the node, and
//!    no device plugin of another config is left there;
//! 6. `advertised`: the node advertises the new name with the expected units, and the old
//!    names are gone or `0`;
//! 7. `uncordon`, only when gpuwl cordoned the node.
//!
//! This module is the pure part: what a run does with each step given what it observes on
//! the node ([`decide`]), the record a run keeps on the node ([`Record`], annotation
//! [`STATE_ANNOTATION`]) so that a second run resumes, and the conditions the waits test
//! ([`operands_state`], [`advertised_state`]). [`live`] carries the steps out.

pub mod live;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::node::NodeInfo;
use crate::model::operand::{OperandHealth, OperandPod, needed, plugin_of};
use crate::model::operator::ClusterPolicy;
use crate::model::pod;
use crate::model::workload::WorkloadConfig;
use crate::render::esc;
use crate::text;
use crate::twin::{Relabel, predict};

/// The node annotation that holds a relabel under way: a JSON [`Record`]. Set at the
/// cordon, updated after each step that changes the node, removed at the uncordon.
pub const STATE_ANNOTATION: &str = "gpuwl.io/relabel";

/// The steps of a relabel, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// The twin's verdict.
    Preview,
    /// Cordon the node.
    Cordon,
    /// Evict or stop the GPU holders and wait until they are gone.
    Holders,
    /// Set the workload label.
    Relabel,
    /// Wait for the new config's operands.
    Operands,
    /// Wait for the new name to be advertised.
    Advertised,
    /// Uncordon the node.
    Uncordon,
}

impl StepKind {
    /// The step's name as printed (`cordon`, `holders`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Preview => "preview",
            StepKind::Cordon => "cordon",
            StepKind::Holders => "holders",
            StepKind::Relabel => "relabel",
            StepKind::Operands => "operands",
            StepKind::Advertised => "advertised",
            StepKind::Uncordon => "uncordon",
        }
    }
}

/// How a step came out (or, in a plan, what a run would do with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A run would carry it out (`--dry-run`).
    Planned,
    /// Carried out now.
    Done,
    /// Found done already (a resumed run, a node already cordoned).
    AlreadyDone,
    /// Not needed or not wanted (`--no-preview`, a node cordoned by someone else).
    Skipped,
    /// A wait ran past `--timeout`: the run stopped here.
    TimedOut,
    /// The run refused to go on (GPU holders and no flag that says what to do).
    Refused,
}

impl Status {
    /// The status as printed (`done`, `already-done`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Planned => "planned",
            Status::Done => "done",
            Status::AlreadyDone => "already-done",
            Status::Skipped => "skipped",
            Status::TimedOut => "timed-out",
            Status::Refused => "refused",
        }
    }
}

/// What gpuwl keeps on the node while a relabel is under way ([`STATE_ANNOTATION`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The workload label before (`None`: absent).
    pub from: Option<String>,
    /// The workload label asked for.
    pub to: String,
    /// The `nvidia.com/vgpu.config` asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpu_type: Option<String>,
    /// The last step that changed the node.
    pub step: StepKind,
    /// Whether gpuwl cordoned the node (then it may uncordon it).
    pub cordoned: bool,
    /// The names and units the node should advertise afterwards (empty: not known).
    #[serde(default)]
    pub expect: BTreeMap<String, u64>,
    /// The names it advertised before that should be gone or `0` afterwards.
    #[serde(default)]
    pub old: Vec<String>,
    /// When the relabel started (RFC 3339, UTC).
    #[serde(default)]
    pub started: String,
}

impl Record {
    /// Parses the annotation's value.
    ///
    /// Errors: one line saying why it is not a record.
    pub fn parse(value: &str) -> std::result::Result<Record, String> {
        serde_json::from_str(value).map_err(|e| {
            format!(
                "annotation {STATE_ANNOTATION} is not gpuwl's record ({})",
                text::one_line(&e.to_string())
            )
        })
    }

    /// The annotation's value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether it records a relabel to what `r` asks for.
    pub fn is_for(&self, r: &Relabel) -> bool {
        self.to == r.config.as_str() && self.vgpu_type == r.vgpu_type
    }
}

/// What the node should advertise once the relabel is done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Expect {
    /// The new names and their units (empty: the model could not tell).
    pub names: BTreeMap<String, u64>,
    /// The names advertised before that should be gone or `0`.
    pub old: Vec<String>,
}

/// What the node should advertise after `r`, by gpuwl's model of the operator and its
/// device plugins ([`predict::advertised`], the twin's model), and the names it advertises
/// now that should go: the node's GPUs worked out from its labels and names
/// ([`predict::infer_hardware`]); nothing expected by name when they cannot be.
pub fn expectation(node: &NodeInfo, r: &Relabel, policy: Option<&ClusterPolicy>) -> Expect {
    let listed = predict::listed(node);
    let names: BTreeMap<String, u64> = predict::infer_hardware(node)
        .map(|i| {
            let after = predict::relabelled(node, r.config, r.vgpu_type.as_deref());
            predict::advertised(&after, &i.hw, policy).0
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, u)| *u > 0)
        .collect();
    let old = listed
        .into_iter()
        .filter(|(n, u)| *u > 0 && !names.contains_key(n))
        .map(|(n, _)| n)
        .collect();
    Expect { names, old }
}

/// A pod on the node that holds a GPU name (`nvidia.com/` requests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// `namespace/name`.
    pub pod: String,
    /// The VMI a virt-launcher pod runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmi: Option<String>,
    /// Whether a VirtualMachine owns that VMI (absent: not known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owned_by_vm: Option<bool>,
    /// Its `nvidia.com/` requests.
    pub resources: BTreeMap<String, i64>,
    /// Being deleted already.
    pub leaving: bool,
}

impl Holder {
    /// The pod's namespace.
    pub fn namespace(&self) -> &str {
        self.pod.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// `ns/vmi` of the VM it runs, when a virt-launcher pod.
    pub fn vm(&self) -> Option<String> {
        self.vmi
            .as_ref()
            .map(|v| format!("{}/{v}", self.namespace()))
    }

    /// `gpu-vm/vmi-passthrough (nvidia.com/GA102GL_A10 1)`, escaped.
    pub fn describe(&self) -> String {
        let res: Vec<String> = self
            .resources
            .iter()
            .map(|(k, v)| format!("{} {v}", esc(k)))
            .collect();
        let what = match self.vm() {
            // A VMI no VirtualMachine owns is called what it is.
            Some(vm) if self.owned_by_vm == Some(false) => {
                format!("{} (VMI {}", esc(&self.pod), esc(&vm))
            }
            Some(vm) => format!("{} (VM {}", esc(&self.pod), esc(&vm)),
            None => format!("{} (", esc(&self.pod)),
        };
        let sep = if self.vmi.is_some() { "; " } else { "" };
        format!("{what}{sep}{})", res.join(", "))
    }
}

/// What the user allows to happen to the GPU holders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disruption {
    /// `--evict`: evict the pods (Eviction API; KubeVirt answers a virt-launcher's
    /// eviction by its VMI's eviction strategy).
    pub evict: bool,
    /// `--stop-vm NS/NAME`: VMs to stop through their VirtualMachine.
    pub stop_vms: Vec<String>,
    /// `--allow-disruption`: leave them running without their GPU.
    pub allow: bool,
}

/// What a run does with one holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "action", content = "vm")]
pub enum HolderAction {
    /// Evict the pod.
    Evict,
    /// Stop the VM `ns/name` (its VirtualMachine's runStrategy `Halted`).
    StopVm(String),
    /// Leave it running (`--allow-disruption`).
    LeaveRunning,
    /// Being deleted already: only wait.
    Wait,
}

/// What the user's flags do with `h`; `None` when they say nothing for it. A VM named by
/// `--stop-vm` is stopped; else `--evict` evicts; else `--allow-disruption` leaves it.
pub fn holder_action(h: &Holder, how: &Disruption) -> Option<HolderAction> {
    if h.leaving {
        return Some(HolderAction::Wait);
    }
    if let Some(vm) = h.vm()
        && how.stop_vms.contains(&vm)
    {
        return Some(HolderAction::StopVm(vm));
    }
    if how.evict {
        Some(HolderAction::Evict)
    } else if how.allow {
        Some(HolderAction::LeaveRunning)
    } else {
        None
    }
}

/// What a run observes on the node before it acts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The workload label now.
    pub label: Option<String>,
    /// `nvidia.com/vgpu.config` now.
    pub vgpu_type: Option<String>,
    /// Cordoned.
    pub unschedulable: bool,
    /// gpuwl's record, or why the annotation is not one.
    pub record: Option<std::result::Result<Record, String>>,
    /// The pods holding GPU names there.
    pub holders: Vec<Holder>,
}

impl Observed {
    /// Whether the node's labels are what `r` asks for.
    pub fn labelled_as(&self, r: &Relabel) -> bool {
        self.label.as_deref() == Some(r.config.as_str())
            && (r.vgpu_type.is_none() || self.vgpu_type == r.vgpu_type)
    }
}

/// One step of a node's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The step.
    pub step: StepKind,
    /// `Planned`, `AlreadyDone` or `Skipped`.
    pub status: Status,
    /// What it does (or why not), one line, escaped.
    pub detail: String,
}

/// A node's plan: everything a run needs to carry the relabel out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// The relabel.
    pub relabel: Relabel,
    /// The record to keep on the node (the one found when resuming).
    pub record: Record,
    /// Whether a record was found: the run resumes.
    pub resuming: bool,
    /// What happens to each holder.
    pub actions: Vec<(Holder, HolderAction)>,
    /// The steps after the preview.
    pub steps: Vec<Planned>,
}

/// What a run does with a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The node already carries the label and no relabel is under way.
    NothingToDo(String),
    /// Refused before any change, at the step named (holders without a flag; another
    /// relabel under way): the message says why and the way on.
    Stop(StepKind, String),
    /// The steps to take.
    Go(Box<NodePlan>),
}

/// Decides what a run does with the node `r` relabels, from what it observed there, the
/// expectation worked out now (used unless a record carries its own) and the user's
/// flags; `now` stamps a new record.
pub fn decide(
    r: &Relabel,
    obs: &Observed,
    fresh: &Expect,
    how: &Disruption,
    now: &str,
) -> Decision {
    let node = esc(&r.node);
    let found = match &obs.record {
        Some(Err(why)) => {
            return Decision::Stop(
                StepKind::Relabel,
                format!(
                    "{}; remove it (kubectl annotate node {node} {STATE_ANNOTATION}-) and check \
                 the node's cordon yourself",
                    esc(why)
                ),
            );
        }
        Some(Ok(rec)) if !rec.is_for(r) => {
            return Decision::Stop(StepKind::Relabel, under_way(&node, rec));
        }
        Some(Ok(rec)) => Some(rec.clone()),
        None if obs.labelled_as(r) => {
            return Decision::NothingToDo(format!(
                "labelled {} already and no relabel of gpuwl is under way: nothing to do",
                r.config
            ));
        }
        None => None,
    };
    let mut actions = Vec::new();
    let mut uncovered = Vec::new();
    for h in &obs.holders {
        match holder_action(h, how) {
            Some(a) => actions.push((h.clone(), a)),
            None => uncovered.push(h.describe()),
        }
    }
    if !uncovered.is_empty() {
        return Decision::Stop(StepKind::Holders, refusal(r, &uncovered));
    }
    let resuming = found.is_some();
    let record = found.unwrap_or_else(|| Record {
        from: obs.label.clone(),
        to: r.config.as_str().to_string(),
        vgpu_type: r.vgpu_type.clone(),
        step: StepKind::Preview,
        cordoned: !obs.unschedulable,
        expect: fresh.names.clone(),
        old: fresh.old.clone(),
        started: now.to_string(),
    });
    let steps = plan_steps(r, obs, &record, resuming, &actions);
    Decision::Go(Box::new(NodePlan {
        relabel: r.clone(),
        record,
        resuming,
        actions,
        steps,
    }))
}

/// The message of a node with another relabel under way.
fn under_way(node: &str, rec: &Record) -> String {
    let to = match &rec.vgpu_type {
        Some(t) => format!("{}:{}", esc(&rec.to), esc(t)),
        None => esc(&rec.to),
    };
    format!(
        "a relabel to {to} is under way (started {}, last step {}): finish it with \
         `gpuwl relabel {node}={to}`, or end it by hand (kubectl annotate node {node} \
         {STATE_ANNOTATION}-; uncordon it once its operands run)",
        esc(&rec.started),
        rec.step.as_str()
    )
}

/// The message of a refused relabel: the holders and the flags that say what to do.
fn refusal(r: &Relabel, uncovered: &[String]) -> String {
    format!(
        "refused: {} running pod(s) hold a GPU there and would lose it when the node \
         becomes {}: {}; say what to do with them: --evict (evict the pods; a VM's \
         virt-launcher pod by KubeVirt's eviction strategy), --stop-vm NS/NAME (stop a \
         KubeVirt VM), or --allow-disruption (leave them running without their GPU)",
        uncovered.len(),
        r.config,
        uncovered.join(", ")
    )
}

/// The steps after the preview, each planned, found done, or skipped.
fn plan_steps(
    r: &Relabel,
    obs: &Observed,
    rec: &Record,
    resuming: bool,
    actions: &[(Holder, HolderAction)],
) -> Vec<Planned> {
    let p = |step, status, detail: String| Planned {
        step,
        status,
        detail,
    };
    let cordon = if obs.unschedulable {
        let by = match (rec.cordoned, resuming) {
            (true, true) => format!(
                "by this relabel, started {}; resuming after step {}",
                esc(&rec.started),
                rec.step.as_str()
            ),
            (true, false) => "by this relabel".to_string(),
            (false, _) => "before the relabel: it stays cordoned".to_string(),
        };
        p(
            StepKind::Cordon,
            Status::AlreadyDone,
            format!("cordoned already ({by})"),
        )
    } else {
        p(StepKind::Cordon, Status::Planned, "cordon".into())
    };
    let holders = if actions.is_empty() {
        p(
            StepKind::Holders,
            Status::AlreadyDone,
            "no pod holds a GPU on the node".into(),
        )
    } else {
        p(StepKind::Holders, Status::Planned, holders_detail(actions))
    };
    let relabel = if obs.labelled_as(r) {
        p(
            StepKind::Relabel,
            Status::AlreadyDone,
            format!("labelled {} already", r.config),
        )
    } else {
        p(StepKind::Relabel, Status::Planned, relabel_detail(r, obs))
    };
    let operands = p(
        StepKind::Operands,
        Status::Planned,
        format!(
            "wait until {} run Ready there and no {} pod is left",
            needed(r.config).join(", "),
            other_plugins(r.config).join(" or ")
        ),
    );
    let advertised = p(
        StepKind::Advertised,
        Status::Planned,
        format!("wait until it {}", expect_text(&rec.expect, &rec.old)),
    );
    let uncordon = if rec.cordoned {
        p(StepKind::Uncordon, Status::Planned, "uncordon".into())
    } else {
        p(
            StepKind::Uncordon,
            Status::Skipped,
            "cordoned before the relabel: left cordoned".into(),
        )
    };
    vec![cordon, holders, relabel, operands, advertised, uncordon]
}

/// What happens to the holders, one phrase each.
pub fn holders_detail(actions: &[(Holder, HolderAction)]) -> String {
    let parts: Vec<String> = actions
        .iter()
        .map(|(h, a)| match a {
            HolderAction::Evict => format!("evict {}", esc(&h.pod)),
            HolderAction::StopVm(vm) => format!("stop VM {}", esc(vm)),
            HolderAction::LeaveRunning => {
                format!("leave {} running (--allow-disruption)", esc(&h.pod))
            }
            HolderAction::Wait => format!("wait for {} (being deleted)", esc(&h.pod)),
        })
        .collect();
    let waits = actions
        .iter()
        .any(|(_, a)| !matches!(a, HolderAction::LeaveRunning));
    format!(
        "{}{}",
        parts.join("; "),
        if waits { "; wait until gone" } else { "" }
    )
}

fn relabel_detail(r: &Relabel, obs: &Observed) -> String {
    let mut d = format!(
        "label {} → {}",
        obs.label.as_deref().map_or("(none)".into(), esc),
        r.config
    );
    if let Some(t) = &r.vgpu_type {
        d.push_str(&format!(", nvidia.com/vgpu.config={}", esc(t)));
    }
    d
}

/// The device plugins of the other configs (those that must leave the node).
pub fn other_plugins(to: WorkloadConfig) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = WorkloadConfig::ALL
        .iter()
        .map(|w| plugin_of(*w))
        .filter(|p| *p != plugin_of(to))
        .collect();
    v.dedup();
    v
}

/// `advertises nvidia.com/gpu 2 (nvidia.com/GA102GL_A10 gone or 0)`.
pub fn expect_text(expect: &BTreeMap<String, u64>, old: &[String]) -> String {
    let new = if expect.is_empty() {
        "advertises a new GPU name (the model could not tell which)".to_string()
    } else {
        format!(
            "advertises {}",
            expect
                .iter()
                .map(|(k, v)| format!("{} {v}", esc(k)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if old.is_empty() {
        new
    } else {
        let old: Vec<String> = old.iter().map(|o| esc(o)).collect();
        format!("{new} ({} gone or 0)", old.join(", "))
    }
}

/// Whether the operands of `to` are Ready on the node: `Ok` when every operand of `to`
/// ([`needed`]) runs Ready there — a GPU-preparing one only when the cluster has its
/// DaemonSet (`deployed`; drivers may be pre-installed), the device plugin always — and no
/// device plugin of another config is left; else one line saying what is missing.
pub fn operands_state(
    on_node: &[OperandPod],
    to: WorkloadConfig,
    deployed: &BTreeSet<String>,
) -> std::result::Result<(), String> {
    let plugin = plugin_of(to);
    let mut missing = Vec::new();
    for op in needed(to)
        .iter()
        .filter(|o| **o == plugin || deployed.contains(**o))
    {
        match on_node.iter().find(|p| p.operand == *op) {
            None if *op == plugin && !deployed.contains(*op) => missing.push(format!(
                "no {op} pod on the node, and no {op} DaemonSet in the cluster (does the \
                 ClusterPolicy disable it?)"
            )),
            None => missing.push(format!("no {op} pod on the node")),
            Some(p) if p.health != OperandHealth::Ready => {
                missing.push(format!("{op} pod {} {}", esc(&p.pod), p.health.as_str()))
            }
            Some(_) => {}
        }
    }
    for other in other_plugins(to) {
        if let Some(p) = on_node.iter().find(|p| p.operand == other) {
            missing.push(format!("{other} pod {} still there", esc(&p.pod)));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// Whether the node advertises what `expect` says: each expected name with its units (in
/// allocatable), each old name gone or `0`; with no expected name, some GPU name that is
/// not an old one. Else one line with what it advertises now.
pub fn advertised_state(
    node: &NodeInfo,
    expect: &BTreeMap<String, u64>,
    old: &[String],
) -> std::result::Result<(), String> {
    let listed = predict::listed(node);
    let units = |n: &str| listed.get(n).copied().unwrap_or(0);
    let new_ok = if expect.is_empty() {
        listed
            .iter()
            .any(|(n, u)| *u > 0 && !old.iter().any(|o| o == n))
    } else {
        expect.iter().all(|(n, u)| units(n) == *u)
    };
    let old_ok = old.iter().all(|o| expect.contains_key(o) || units(o) == 0);
    if new_ok && old_ok {
        return Ok(());
    }
    let now: Vec<String> = listed
        .iter()
        .map(|(k, v)| format!("{} {v}", esc(k)))
        .collect();
    Err(format!(
        "it advertises {}; waiting until it {}",
        if now.is_empty() {
            "no GPU name".to_string()
        } else {
            now.join(", ")
        },
        expect_text(expect, old)
    ))
}

/// The holders of `before` still on the node (`now`), by pod.
pub fn still_there(before: &[(Holder, HolderAction)], now: &[Holder]) -> Vec<String> {
    let now: BTreeSet<&str> = now.iter().map(|h| h.pod.as_str()).collect();
    before
        .iter()
        .filter(|(h, a)| !matches!(a, HolderAction::LeaveRunning) && now.contains(h.pod.as_str()))
        .map(|(h, _)| h.pod.clone())
        .collect()
}

/// What is wrong with the `--stop-vm` values, one message each: a value that names no VM
/// running on the nodes (a typo would otherwise pass silently; the nearest is offered), or
/// one whose VMI no VirtualMachine owns (stopping works through the VM, as `virtctl stop`
/// does; a bare VMI is deleted, or evicted with `--evict`). Values are escaped.
pub fn stop_vm_problems(how: &Disruption, holders: &[Holder]) -> Vec<String> {
    let vms: BTreeSet<String> = holders.iter().filter_map(Holder::vm).collect();
    how.stop_vms
        .iter()
        .filter_map(|v| {
            if !vms.contains(v) {
                return Some(format!(
                    "--stop-vm {}: no VM of that name runs on the node(s) to relabel{}",
                    esc(v),
                    text::did_you_mean(v, vms.iter().map(String::as_str))
                ));
            }
            let bare = holders
                .iter()
                .any(|h| h.vm().as_ref() == Some(v) && h.owned_by_vm == Some(false));
            bare.then(|| {
                let (ns, name) = v.split_once('/').unwrap_or(("default", v));
                format!(
                    "--stop-vm {}: no VirtualMachine owns VMI {}, and a VM is what is stopped; \
                     use --evict, or delete the VMI: {}",
                    esc(v),
                    esc(v),
                    esc(&pod::stop_command(ns, "", Some(name), Some(false)))
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
