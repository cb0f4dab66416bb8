//! `gpuwl relabel`: a node's workload label changed on a real cluster, step by step, the way
//! the whatif report's "To apply for real" says ([`crate::analysis::twin::report::apply_steps`]):
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
//! ([`operands_state`], [`advertised_state`]), and the report a run gives ([`Report`]). The
//! root crate's `relabel` module carries the steps out on a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::analysis::kueue::RelabelQuota;
use crate::analysis::twin::predict;
use crate::analysis::twin::report::{Relabel, Verdict};
use crate::model::node::NodeInfo;
use crate::model::operand::{self, OperandHealth, OperandPod, needed, plugin_of};
use crate::model::operator::{
    self, ClusterPolicy, OperatorScope, POLICY_COMPONENTS, PolicyStatus, VGPU_HOST_DRIVER_LABEL,
};
use crate::model::pod;
use crate::model::resource::classify;
use crate::model::workload::{ENABLE_FLAG, LABEL_KEY, WorkloadConfig};
use crate::text;
use crate::text::esc;

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
    /// `nvidia.com/vgpu.config` before (`None`: absent), restored by `--abort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_vgpu: Option<String>,
    /// `--abort` is under way: the labels go back to `from`/`from_vgpu`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
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

    /// Whether it records a relabel to what `r` asks for (not an abort of one).
    pub(crate) fn is_for(&self, r: &Relabel) -> bool {
        !self.abort && self.to == r.config.as_str() && self.vgpu_type == r.vgpu_type
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
pub(crate) fn holder_action(h: &Holder, how: &Disruption) -> Option<HolderAction> {
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
    pub(crate) fn labelled_as(&self, r: &Relabel) -> bool {
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

/// The labels an `--abort` puts back (from the [`Record`]): `None` removes the label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// `nvidia.com/gpu.workload.config` as it was.
    pub label: Option<String>,
    /// `nvidia.com/vgpu.config` as it was.
    pub vgpu: Option<String>,
}

/// A node's plan: everything a run needs to carry the relabel out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// The relabel (for an abort: the workload the restored labels give the node, whose
    /// operands and names are waited for).
    pub relabel: Relabel,
    /// The record to keep on the node (the one found when resuming).
    pub record: Record,
    /// Whether a record was found: the run resumes.
    pub resuming: bool,
    /// What happens to each holder.
    pub actions: Vec<(Holder, HolderAction)>,
    /// The holders that keep their GPU: every name they hold is one the node serves under
    /// the target config ([`keeps`]).
    pub kept: Vec<Holder>,
    /// `--abort`: the labels to put back instead of the relabel's.
    pub restore: Option<Restore>,
    /// Whether the record must be written before the first step (an abort starting: the
    /// record says so, so that an interrupted abort resumes as one).
    pub write_record: bool,
    /// The steps after the preview.
    pub steps: Vec<Planned>,
}

/// Whether holder `h` keeps its GPU when the node becomes `config`: every name it holds is
/// one the node advertises afterwards (`expect`, by gpuwl's model of the operator and its
/// plugins), or, where the model cannot tell (`expect` empty), of the class `config`
/// serves ([`crate::model::resource::ResourceClass::workload`]). Relabelling a node back
/// to the config that serves what its holders hold is the way back, never a disruption.
pub fn keeps(h: &Holder, config: WorkloadConfig, expect: &BTreeMap<String, u64>) -> bool {
    h.resources.keys().all(|name| {
        if expect.is_empty() {
            classify(name).workload() == Some(config)
        } else {
            expect.contains_key(name)
        }
    })
}

/// Why relabelling `node` as `r` could never complete, decided by the same model of the
/// GPU Operator as `check --effective` ([`operator::effective_workload`],
/// [`operator::operands`], [`ClusterPolicy::operand_enabled`]), so that a run refuses
/// before it cordons or evicts anything; `None` when nothing stands in the way.
///
/// In order: no GPU Operator (`policy.status` `absent-crd` or `no-object`: nothing swaps
/// the operands); the node is no GPU node to the operator, or has
/// `nvidia.com/gpu.deploy.operands=false`; the operator would not follow the label
/// (sandbox workloads disabled: NVIDIA/gpu-operator `controllers/state_manager.go`,
/// `getWorkloadConfig`); the target's device plugin not deployed (the ClusterPolicy's
/// `spec.<component>.enabled`, or the node's `nvidia.com/gpu.deploy.<plugin>=false`);
/// `vm-vgpu` with no vGPU manager (disabled in the policy and no host driver label); and,
/// for a fresh relabel (`fresh`), a target the operator applies to the node already (the
/// label changes nothing it deploys). A policy that could not be read decides nothing
/// beyond the node's own labels.
pub fn cannot_finish(
    node: &NodeInfo,
    r: &Relabel,
    policy: &PolicyStatus,
    fresh: bool,
) -> Option<String> {
    let name = esc(&r.node);
    if matches!(policy.status, "absent-crd" | "no-object") {
        return Some(format!(
            "no GPU Operator in the cluster (no ClusterPolicy: {}): nothing deploys the \
             operands of a node's new workload config, so {name} would never advertise a \
             {} name; install the GPU Operator with sandbox workloads enabled first",
            policy.status, r.config
        ));
    }
    let cp = policy.policy();
    let after = predict::relabelled(node, r.config, r.vgpu_type.as_deref());
    let eff = operator::effective_workload(&after, cp);
    match eff.scope {
        OperatorScope::NoGpu => {
            return Some(format!(
                "{name} is not a GPU node to the GPU Operator (no NFD label of an NVIDIA GPU \
                 and no GPU name advertised): it never reads the node's workload label"
            ));
        }
        OperatorScope::OperandsDisabled => {
            return Some(format!(
                "{name} has nvidia.com/gpu.deploy.operands=false: the GPU Operator deploys no \
                 operand there whatever the label says; remove that label first: kubectl \
                 label node {name} nvidia.com/gpu.deploy.operands-"
            ));
        }
        OperatorScope::Operands => {}
    }
    let cp = cp?;
    if eff.workload != r.config {
        let why = if cp.sandbox_enabled {
            format!("it applies {} there", eff.workload)
        } else {
            format!(
                "ClusterPolicy {} has {ENABLE_FLAG}=false, so it does not read the label and \
                 keeps the container operands (check --effective: label-ignored); enable \
                 sandbox workloads first (cluster-wide: every labelled node changes)",
                esc(&cp.name)
            )
        };
        return Some(format!(
            "the GPU Operator would not follow {LABEL_KEY}={} on {name}: {why}",
            r.config
        ));
    }
    let plugin = operand::plugin_of(r.config);
    if !cp.operand_enabled(plugin) {
        let key = POLICY_COMPONENTS
            .iter()
            .find(|(op, _, _)| *op == plugin)
            .map_or(plugin, |(_, k, _)| k);
        return Some(format!(
            "ClusterPolicy {} does not deploy the {plugin} (spec.{key}.enabled is false, or \
             unset where the CRD's default is off), so a {} node never gets one and never \
             advertises its GPUs; enable it first: kubectl patch clusterpolicy {} --type \
             merge -p '{{\"spec\":{{\"{key}\":{{\"enabled\":true}}}}}}'",
            esc(&cp.name),
            r.config,
            esc(&cp.name)
        ));
    }
    if !operator::operands(&after, &eff).contains(&plugin) {
        return Some(format!(
            "{name} has nvidia.com/gpu.deploy.{plugin}=false: the GPU Operator keeps that \
             value, so the {plugin} never runs there; set it to true first: kubectl label \
             node {name} nvidia.com/gpu.deploy.{plugin}=true --overwrite"
        ));
    }
    if r.config == WorkloadConfig::VmVgpu
        && !cp.operand_enabled("vgpu-manager")
        && node.label(VGPU_HOST_DRIVER_LABEL).is_none()
    {
        return Some(format!(
            "ClusterPolicy {} does not deploy the vGPU manager (spec.vgpuManager.enabled is \
             false or unset) and {name} shows no vGPU host driver ({VGPU_HOST_DRIVER_LABEL}): \
             no vGPU type would be created there; enable the vGPU manager first",
            esc(&cp.name)
        ));
    }
    if fresh {
        let now = operator::effective_workload(node, Some(cp));
        if now.applied() == Some(r.config) && node.label(LABEL_KEY) != Some(r.config.as_str()) {
            return Some(format!(
                "the GPU Operator applies {} to {name} already ({}): the label changes \
                 nothing it deploys, so there is nothing to cordon or wait for; make the \
                 label say so alone: {}",
                r.config,
                match node.label(LABEL_KEY) {
                    None => format!("no {LABEL_KEY} label: ClusterPolicy's defaultWorkload"),
                    Some(v) => format!("{LABEL_KEY}={} is not a valid value", esc(v)),
                },
                esc(&r.command())
            ));
        }
    }
    None
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
/// expectation worked out now (used unless a record carries its own), why the relabel
/// could never complete (`cannot`, [`cannot_finish`]; `None` when nothing stands in the
/// way) and the user's flags; `now` stamps a new record.
pub fn decide(
    r: &Relabel,
    obs: &Observed,
    fresh: &Expect,
    cannot: Option<String>,
    how: &Disruption,
    now: &str,
) -> Decision {
    let node = esc(&r.node);
    let found = match &obs.record {
        Some(Err(why)) => return Decision::Stop(StepKind::Relabel, bad_record(&node, why)),
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
    if let Some(why) = cannot {
        // The reason ends with the command that removes the obstacle, if any: nothing is
        // said after it.
        let left = if found.is_some() {
            "the node stays as the earlier run left it (end that relabel with --abort)"
        } else {
            "nothing was changed"
        };
        return Decision::Stop(
            StepKind::Relabel,
            format!("refused, {left}: the relabel could never complete: {why}"),
        );
    }
    let expect = found.as_ref().map_or(&fresh.names, |rec| &rec.expect);
    let (actions, kept) = match holder_plan(r, obs, expect, how) {
        Ok(p) => p,
        Err(why) => return Decision::Stop(StepKind::Holders, why),
    };
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
        from_vgpu: obs.vgpu_type.clone(),
        abort: false,
    });
    let steps = plan_steps(r, obs, &record, resuming, &actions, &kept, None);
    Decision::Go(Box::new(NodePlan {
        relabel: r.clone(),
        record,
        resuming,
        actions,
        kept,
        restore: None,
        write_record: false,
        steps,
    }))
}

/// What [`holder_plan`] decides: the action for each holder that would lose its GPU, and
/// the holders that keep it.
type HolderPlan = (Vec<(Holder, HolderAction)>, Vec<Holder>);

/// The holders of `obs` split into what the user's flags do with those that would lose
/// their GPU and those that keep it ([`keeps`]); `Err` with the refusal when some would
/// lose it and no flag says what to do with them.
fn holder_plan(
    r: &Relabel,
    obs: &Observed,
    expect: &BTreeMap<String, u64>,
    how: &Disruption,
) -> std::result::Result<HolderPlan, String> {
    let mut actions = Vec::new();
    let mut kept = Vec::new();
    let mut uncovered = Vec::new();
    for h in &obs.holders {
        if keeps(h, r.config, expect) {
            kept.push(h.clone());
            continue;
        }
        match holder_action(h, how) {
            Some(a) => actions.push((h.clone(), a)),
            None => uncovered.push(h.describe()),
        }
    }
    if uncovered.is_empty() {
        Ok((actions, kept))
    } else {
        Err(refusal(r, obs, &uncovered))
    }
}

/// The message of an annotation that is not gpuwl's record.
fn bad_record(node: &str, why: &str) -> String {
    format!(
        "{}; remove it (kubectl annotate node {node} {STATE_ANNOTATION}-) and check the \
         node's cordon yourself",
        esc(why)
    )
}

/// Decides what `gpuwl relabel NODE --abort` does: ends the relabel the node's record
/// holds by putting back the labels it had before (`from`, `from_vgpu`), waiting for the
/// operands and names of the workload those give (`back`: the config the restored labels
/// make effective, and `fresh` the names gpuwl's model expects then), and uncordoning only
/// a node the relabel cordoned; then the record goes. The record is first marked as an
/// abort, so an interrupted abort resumes as one (`--abort` again). No record: nothing to
/// do. Holders that would lose their GPU on the way back need a flag, as for a relabel.
pub fn decide_abort(
    node: &str,
    obs: &Observed,
    back: WorkloadConfig,
    fresh: &Expect,
    how: &Disruption,
) -> Decision {
    let name = esc(node);
    let rec = match &obs.record {
        None => {
            return Decision::NothingToDo(
                "no relabel of gpuwl is under way on the node: nothing to abort".into(),
            );
        }
        Some(Err(why)) => return Decision::Stop(StepKind::Relabel, bad_record(&name, why)),
        Some(Ok(rec)) => rec,
    };
    let r = Relabel {
        node: node.to_string(),
        config: back,
        vgpu_type: None,
    };
    let (actions, kept) = match holder_plan(&r, obs, &fresh.names, how) {
        Ok(p) => p,
        Err(why) => return Decision::Stop(StepKind::Holders, why),
    };
    let restore = Restore {
        label: rec.from.clone(),
        vgpu: rec.from_vgpu.clone(),
    };
    let mut record = rec.clone();
    let write_record = !record.abort;
    if !record.abort {
        record.abort = true;
        record.expect = fresh.names.clone();
        record.old = fresh.old.clone();
    }
    let steps = plan_steps(&r, obs, &record, true, &actions, &kept, Some(&restore));
    Decision::Go(Box::new(NodePlan {
        relabel: r,
        record,
        resuming: true,
        actions,
        kept,
        restore: Some(restore),
        write_record,
        steps,
    }))
}

/// The message of a node with another relabel (or an abort) under way.
fn under_way(node: &str, rec: &Record) -> String {
    let to = match &rec.vgpu_type {
        Some(t) => format!("{}:{}", esc(&rec.to), esc(t)),
        None => esc(&rec.to),
    };
    if rec.abort {
        return format!(
            "an abort of the relabel to {to} is under way (started {}); finish it: gpuwl \
             relabel {node} --abort",
            esc(&rec.started)
        );
    }
    format!(
        "a relabel to {to} is under way (started {}, last step {}); finish it first: gpuwl \
         relabel {node}={to}; or end it, its labels put back and the node uncordoned if \
         gpuwl cordoned it: gpuwl relabel {node} --abort",
        esc(&rec.started),
        rec.step.as_str()
    )
}

/// The message of a refused relabel: the holders and the flags that say what to do.
fn refusal(r: &Relabel, obs: &Observed, uncovered: &[String]) -> String {
    // A vGPU type change on a node that is vm-vgpu already says what changes.
    let becomes = match &r.vgpu_type {
        Some(t) if obs.label.as_deref() == Some(r.config.as_str()) => {
            format!("the node's vGPU config becomes {}", esc(t))
        }
        _ => format!("the node becomes {}", r.config),
    };
    format!(
        "refused: {} running pod(s) hold a GPU there and would lose it when {becomes}: {}; \
         say what to do with them: --evict (evict the pods; a VM's virt-launcher pod by \
         KubeVirt's eviction strategy), --stop-vm NS/NAME (stop a KubeVirt VM), or \
         --allow-disruption (leave them running without their GPU)",
        uncovered.len(),
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
    kept: &[Holder],
    restore: Option<&Restore>,
) -> Vec<Planned> {
    let p = |step, status, detail: String| Planned {
        step,
        status,
        detail,
    };
    let cordon = if restore.is_some() && !obs.unschedulable {
        p(
            StepKind::Cordon,
            Status::Skipped,
            "not cordoned: an abort cordons nothing".into(),
        )
    } else if obs.unschedulable {
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
    let keeping = kept_detail(kept, r.config);
    let holders = match (actions.is_empty(), keeping) {
        (true, None) => p(
            StepKind::Holders,
            Status::AlreadyDone,
            "no pod holds a GPU on the node".into(),
        ),
        (true, Some(k)) => p(StepKind::Holders, Status::AlreadyDone, k),
        (false, None) => p(StepKind::Holders, Status::Planned, holders_detail(actions)),
        (false, Some(k)) => p(
            StepKind::Holders,
            Status::Planned,
            format!("{}; {k}", holders_detail(actions)),
        ),
    };
    let relabel = match restore {
        Some(back) if obs.label == back.label && obs.vgpu_type == back.vgpu => p(
            StepKind::Relabel,
            Status::AlreadyDone,
            format!(
                "labels as before the relabel already ({})",
                restore_text(back)
            ),
        ),
        Some(back) => p(
            StepKind::Relabel,
            Status::Planned,
            format!(
                "put the labels back: {} → {}",
                obs.label.as_deref().map_or("(none)".into(), esc),
                restore_text(back)
            ),
        ),
        None if obs.labelled_as(r) => p(
            StepKind::Relabel,
            Status::AlreadyDone,
            format!("labelled {} already", r.config),
        ),
        None => p(StepKind::Relabel, Status::Planned, relabel_detail(r, obs)),
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

/// `gpu-vm/vmi-passthrough keeps nvidia.com/GA102GL_A10 (served as vm-passthrough)`, or
/// `None` when no holder keeps its GPU.
fn kept_detail(kept: &[Holder], config: WorkloadConfig) -> Option<String> {
    (!kept.is_empty()).then(|| {
        let each: Vec<String> = kept
            .iter()
            .map(|h| {
                let names: Vec<String> = h.resources.keys().map(|k| esc(k)).collect();
                format!("{} keeps {}", esc(&h.pod), names.join(", "))
            })
            .collect();
        format!(
            "{} (the node serves it as {config}: left running)",
            each.join("; ")
        )
    })
}

/// The labels an abort puts back, one phrase: `nvidia.com/gpu.workload.config=vm-passthrough`
/// (or `no …`), with the vGPU config; values escaped.
pub fn restore_text(back: &Restore) -> String {
    let mut t = match &back.label {
        Some(l) => format!("{LABEL_KEY}={}", esc(l)),
        None => format!("no {LABEL_KEY} label"),
    };
    if let Some(v) = &back.vgpu {
        t.push_str(&format!(", nvidia.com/vgpu.config={}", esc(v)));
    }
    t
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

/// One step as it ended (or, with `--dry-run`, as planned).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// The node (absent for the preview, which tries every relabel at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The step.
    pub step: StepKind,
    /// How it ended.
    pub status: Status,
    /// Seconds from the start of the run to the start of the step.
    pub at: f64,
    /// Seconds the step took.
    pub seconds: f64,
    /// What it did, or why it stopped; one line, escaped.
    pub message: String,
    /// More to say about it, one sentence each, not escaped (the preview: the quota
    /// layer's side of the relabels, [`crate::analysis::twin::quota::quota_side`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How the whole run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every node relabelled, its operands and names in place.
    Done,
    /// Every node carries the label already.
    NothingToDo,
    /// `--dry-run`: the steps a run would take.
    Planned,
    /// Refused before any change (exit 1).
    Refused,
    /// A wait ran past `--timeout`; the node stays cordoned (exit 1).
    TimedOut,
    /// SIGINT or SIGTERM stopped the run; the message says what state each node is in
    /// (exit 130).
    Interrupted,
}

/// The run's report (`-o json`: every step an object).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// How it ended.
    pub result: Outcome,
    /// The relabels asked for.
    pub relabels: Vec<Relabel>,
    /// The twin's verdict, when the preview ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Every step, in order.
    pub steps: Vec<StepReport>,
    /// The quota layer's side of the relabels, when the preview ran on a cluster with
    /// Kueue's objects: the flavors each node leaves and joins, the admitted workloads
    /// that lose their pool ([`crate::analysis::kueue::relabel_quota`], as `gpuwl whatif
    /// relabel` says it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<RelabelQuota>,
    /// Why it stopped, or what it found, one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Seconds the run took.
    pub seconds: f64,
}

/// The closing message of a relabel: `relabelled … in 17 s`; for a run that resumed a
/// relabel started earlier (`since_first`: when, and how long ago), its length is counted
/// from that first start, this run's own time beside it — never only the last try's.
pub fn done_message(
    done: &[String],
    this_run: Duration,
    since_first: Option<(String, Duration)>,
) -> String {
    let tenth = |d: Duration| Duration::from_secs_f64((d.as_secs_f64() * 10.0).round() / 10.0);
    match since_first {
        Some((when, total)) if total > this_run => format!(
            "relabelled {} in {} since it started ({when}; this run {})",
            done.join(", "),
            seconds(tenth(total)),
            seconds(tenth(this_run))
        ),
        _ => format!(
            "relabelled {} in {}",
            done.join(", "),
            seconds(tenth(this_run))
        ),
    }
}

/// `10 s`, `2 min`, `1.5 s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 && d.as_secs().is_multiple_of(60) {
        format!("{} min", d.as_secs() / 60)
    } else if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests;

/// A stuck relabel that matches a GPU Operator fault reported in the field, named with its
/// way out; `None` when the wait (`why`, from [`operands_state`]) matches none. `rec` is
/// the node's record, `to` the target, `kept` the holders left on the node.
///
/// - vm-passthrough → vm-vgpu with the sandbox device plugin (or validator) never
///   deployed: NVIDIA/gpu-operator#2272 (open; NVIDIA/gpu-operator#2857 describes the vGPU
///   device manager switching the sandbox validator off while it reconfigures, and a
///   restart in between leaving it off). The report's way out sets
///   `nvidia.com/gpu.deploy.sandbox-validator` and `…vgpu-device-manager` to `false`, then
///   back to `true`.
/// - the sandbox device plugin not starting (missing, not ready or crash-looping) while a
///   VM kept on the node holds a GPU: NVIDIA/gpu-operator#1187 reports the sandbox device
///   plugin and validator failing to start again once a VM holds a passed-through GPU;
///   stopping or moving the VM is the way out gpuwl names.
pub fn known_fault(rec: &Record, to: WorkloadConfig, why: &str, kept: &[Holder]) -> Option<String> {
    let plugin = plugin_of(to);
    let plugin_missing = why.contains(&format!("no {plugin} pod on the node"));
    let plugin_failing = why.contains(&format!("{plugin} pod "))
        && (why.contains(OperandHealth::NotReady.as_str())
            || why.contains(OperandHealth::CrashLooping.as_str()));
    if to == WorkloadConfig::VmVgpu
        && rec.from.as_deref() == Some(WorkloadConfig::VmPassthrough.as_str())
        && (plugin_missing || why.contains("no sandbox-validator pod"))
    {
        return Some(
            "this is a known GPU Operator fault after vm-passthrough → vm-vgpu \
             (NVIDIA/gpu-operator#2272: the sandbox device plugin and validator are never \
             deployed); its reported way out turns the validator and the vGPU device manager \
             off and on again: set nvidia.com/gpu.deploy.sandbox-validator and \
             nvidia.com/gpu.deploy.vgpu-device-manager to false on the node, wait until \
             their pods are gone, then set both to true"
                .to_string(),
        );
    }
    let vms: Vec<String> = kept.iter().filter_map(Holder::vm).collect();
    if to != WorkloadConfig::Container && (plugin_missing || plugin_failing) && !vms.is_empty() {
        return Some(format!(
            "this matches a known GPU Operator fault (NVIDIA/gpu-operator#1187: the sandbox \
             device plugin and validator do not start while a VM holds a passed-through GPU \
             on the node): the VM(s) kept on the node, {}, may have to be stopped or moved \
             before the plugin starts",
            vms.join(", ")
        ));
    }
    None
}
