//! `gpuwl relabel` on a live cluster: reads the node and its GPU holders ([`observe`]),
//! decides ([`gpuwl_core::analysis::relabel::decide`]), tries the relabel on a twin first (the `whatif` verdict),
//! then carries each node's steps out ([`run_node`]), one node after another, every step
//! reported as it ends. Every API call runs under the client's request timeout; every wait
//! under `--timeout`. A wait that runs out stops the run with the node cordoned and the
//! record left on it, so that the same command resumes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DynamicObject, EvictParams, ListParams, Patch, PatchParams};
use kube::core::Status as ApiStatus;
use serde_json::{Value, json};

use crate::input::live::{self, api_error, list_all, node_info};
use crate::input::pods::{self};
use crate::input::virt::{self};
use crate::input::{clusterpolicy, snapshot};
use crate::twin;
use gpuwl_core::analysis::kueue::RelabelQuota;
use gpuwl_core::analysis::relabel::{
    self as rules, Decision, Disruption, Holder, HolderAction, NodePlan, Observed, Outcome, Record,
    Report, STATE_ANNOTATION, Status, StepKind, StepReport, done_message, seconds,
};
use gpuwl_core::analysis::twin::quota;
use gpuwl_core::analysis::twin::report::{Recommendation, Relabel, Verdict};
use gpuwl_core::decode::pods::LIVE_FIELD_SELECTOR;
use gpuwl_core::decode::virt::VM_NAME_LABEL;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::operator::VGPU_CONFIG_LABEL;
use gpuwl_core::model::resource::NVIDIA_PREFIX;
use gpuwl_core::model::workload::LABEL_KEY;
use gpuwl_core::model::{operand, pod};
use gpuwl_core::render::esc;
use gpuwl_core::text;
use gpuwl_core::text::one_line;

/// The default of `--timeout`: how long each wait step may take. The operator swaps a
/// node's operands in a minute or two; a driver build or a reboot for vfio-pci takes
/// longer, and then the run stops cordoned and a second run goes on waiting.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(500);

/// What the run is asked to do.
pub struct Request {
    /// The relabels, one node each.
    pub relabels: Vec<Relabel>,
    /// What may happen to GPU holders.
    pub how: Disruption,
    /// How long each wait may take.
    pub timeout: Duration,
    /// Print the plan, change nothing.
    pub dry_run: bool,
    /// The twin to preview on; `None`: `--no-preview`.
    pub preview: Option<twin::Options>,
    /// `--force`: go on although the preview's verdict is `not recommended`.
    pub force: bool,
    /// `--abort`: the nodes whose relabel under way is ended (then `relabels` is empty).
    pub aborts: Vec<String>,
}

/// The clients a run uses: one for every call, one without the client's retries for the
/// evictions (a 429 from a PodDisruptionBudget is answered by trying again while waiting,
/// not by the client's back-off of up to 1,000 s).
pub struct Clients {
    /// Every call but the evictions.
    pub api: Client,
    /// The evictions ([`crate::input::live::Flavour::NoRetry`]).
    pub evict: Client,
}

/// The run's clock and where its steps go as they end.
pub struct Sink<'a> {
    started: Instant,
    steps: Vec<StepReport>,
    on_step: &'a mut (dyn FnMut(&StepReport) + Send),
    progress: &'a mut (dyn FnMut(&str) + Send),
    confirm: &'a mut (dyn FnMut(&str) -> Option<bool> + Send),
    quota: Option<RelabelQuota>,
}

impl<'a> Sink<'a> {
    /// A sink calling `on_step` with each step as it ends, `progress` with the twin's
    /// progress lines, and `confirm` with a question when the preview's verdict is `not
    /// recommended` (`Some(answer)`; `None` where no one can be asked: no terminal).
    pub fn new(
        on_step: &'a mut (dyn FnMut(&StepReport) + Send),
        progress: &'a mut (dyn FnMut(&str) + Send),
        confirm: &'a mut (dyn FnMut(&str) -> Option<bool> + Send),
    ) -> Sink<'a> {
        Sink {
            started: Instant::now(),
            steps: Vec::new(),
            on_step,
            progress,
            confirm,
            quota: None,
        }
    }

    fn emit(
        &mut self,
        node: Option<&str>,
        step: StepKind,
        status: Status,
        from: Instant,
        msg: String,
    ) {
        self.emit_notes(node, step, status, from, msg, Vec::new());
    }

    fn emit_notes(
        &mut self,
        node: Option<&str>,
        step: StepKind,
        status: Status,
        from: Instant,
        msg: String,
        notes: Vec<String>,
    ) {
        let r = StepReport {
            node: node.map(str::to_string),
            step,
            status,
            at: from.duration_since(self.started).as_secs_f64(),
            seconds: from.elapsed().as_secs_f64(),
            message: msg,
            notes,
        };
        (self.on_step)(&r);
        self.steps.push(r);
    }

    fn report(
        self,
        result: Outcome,
        relabels: &[Relabel],
        verdict: Option<Verdict>,
        message: Option<String>,
    ) -> Report {
        Report {
            result,
            relabels: relabels.to_vec(),
            verdict,
            seconds: self.started.elapsed().as_secs_f64(),
            steps: self.steps,
            quota: self.quota,
            message,
        }
    }
}

/// The pods on `node` that have not finished.
async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>> {
    let api: Api<Pod> = Api::all(client.clone());
    let fields = format!("spec.nodeName={node},{}", LIVE_FIELD_SELECTOR);
    let mut out = Vec::new();
    list_all(
        &api,
        ListParams::default().fields(&fields),
        &format!("list pods on node {node}"),
        |p| out.push(p),
    )
    .await?;
    Ok(out)
}

/// The pods among `pods` that hold a GPU name (`nvidia.com/` requests), a virt-launcher
/// pod with its VMI.
///
/// Errors: a pod the API returned that cannot be read.
fn holders_of(pods: &[Pod]) -> Result<Vec<Holder>> {
    let mut out = Vec::new();
    for p in pods {
        let info = pods::pod_info(p)?;
        let resources: std::collections::BTreeMap<String, i64> = info
            .requests
            .iter()
            .filter(|(k, v)| k.starts_with(NVIDIA_PREFIX) && **v > 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if resources.is_empty() {
            continue;
        }
        let vmi = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(VM_NAME_LABEL).cloned())
            .or_else(|| info.launcher_vmi().map(str::to_string));
        out.push(Holder {
            pod: info.key(),
            vmi,
            owned_by_vm: None,
            resources,
            leaving: p.metadata.deletion_timestamp.is_some(),
        });
    }
    Ok(out)
}

/// Reads node `name` and its GPU holders: the node as gpuwl models it, and what
/// [`rules::decide`] needs.
///
/// Errors: [`Error::Input`] when there is no such node (with a did-you-mean);
/// [`Error::Cluster`] when a call fails.
pub async fn observe(client: &Client, name: &str) -> Result<(NodeInfo, Observed)> {
    let nodes: Api<Node> = Api::all(client.clone());
    let doing = format!("get node {name}");
    let Some(node) = nodes
        .get_opt(name)
        .await
        .map_err(|e| api_error(&doing, &e))?
    else {
        let all = live::list_nodes(client).await?;
        return Err(Error::Input(format!(
            "relabel: no node {} in the cluster{}",
            text::cut(name),
            text::did_you_mean(name, all.iter().map(|n| n.name.as_str()))
        )));
    };
    let info = node_info(&node);
    let record = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STATE_ANNOTATION))
        .map(|v| Record::parse(v));
    let mut holders = holders_of(&pods_on(client, name).await?)?;
    if holders.iter().any(|h| h.vmi.is_some())
        && let Some(owners) = virt::vmi_owners(client).await
    {
        for h in &mut holders {
            if let Some(vm) = h.vm() {
                h.owned_by_vm = owners.get(&vm).copied();
            }
        }
    }
    let obs = Observed {
        label: info.label(LABEL_KEY).map(str::to_string),
        vgpu_type: info.label(VGPU_CONFIG_LABEL).map(str::to_string),
        unschedulable: info.unschedulable,
        record,
        holders,
    };
    Ok((info, obs))
}

/// Merge-patches node `name` with `patch`.
async fn patch_node(client: &Client, name: &str, doing: &str, patch: Value) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| api_error(&format!("{doing} node {name}"), &e))?;
    Ok(())
}

fn record_patch(rec: &Record) -> Value {
    json!({"metadata": {"annotations": {STATE_ANNOTATION: rec.to_json()}}})
}

/// Evicts `pod` (`ns/name`): `None` once the API server took the eviction (or the pod is
/// gone), `Some(why)` when it refused it for now (429, tried again): the API's own causes,
/// which name the PodDisruptionBudget (`The disruption budget gpu-pdb needs 1 healthy
/// pods and has 1 currently`), else its message.
///
/// Errors: [`Error::Cluster`] for any other refusal.
async fn evict(client: &Client, pod: &str) -> Result<Option<String>> {
    let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    match api.evict(name, &EvictParams::default()).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 429 => Ok(Some(eviction_refused(&s))),
        Err(e) => Err(api_error(&format!("evict pod {pod}"), &e)),
    }
}

/// Why the API server refused an eviction for now: its causes (the PodDisruptionBudget
/// they name), else its message, escaped, on one line.
fn eviction_refused(s: &ApiStatus) -> String {
    let causes: Vec<&str> = s
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.message.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    let why = if causes.is_empty() {
        s.message.clone()
    } else {
        causes.join("; ")
    };
    esc(&one_line(why.trim_end_matches('.')))
}

/// Stops the VirtualMachine `vm` (`ns/name`): `spec.running: false` where the VM uses
/// `running`, else `spec.runStrategy: Halted` (kubevirt/kubevirt
/// `staging/src/kubevirt.io/api/core/v1/types.go`, `RunStrategyHalted`; what `virtctl
/// stop` sets).
///
/// Errors: [`Error::Cluster`] when the VM cannot be read or patched (a VMI no VM owns:
/// the message says to delete the VMI).
async fn stop_vm(client: &Client, vm: &str) -> Result<()> {
    let (ns, name) = vm.split_once('/').unwrap_or(("default", vm));
    let ar = virt::resource("VirtualMachine", "virtualmachines");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let doing = format!("stop VM {vm}");
    let obj = api.get_opt(name).await.map_err(|e| api_error(&doing, &e))?;
    let Some(obj) = obj else {
        return Err(Error::Runtime(format!(
            "cannot {doing}: no VirtualMachine of that name (a VMI no VM owns: {}, or use \
             --evict)",
            pod::stop_command(ns, "", Some(name), Some(false))
        )));
    };
    let spec = if obj.data["spec"].get("running").is_some() {
        json!({"spec": {"running": false}})
    } else {
        json!({"spec": {"runStrategy": "Halted"}})
    };
    api.patch(name, &PatchParams::default(), &Patch::Merge(spec))
        .await
        .map_err(|e| api_error(&doing, &e))?;
    Ok(())
}

/// Waits until `check` says done (`Ok(None)` from it) or `timeout` runs out; returns
/// `None` when done, else the last reason `check` gave.
async fn wait_for<F>(timeout: Duration, mut check: F) -> Result<Option<String>>
where
    F: AsyncFnMut() -> Result<Option<String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let why = check().await?;
        if why.is_none() || Instant::now() >= deadline {
            return Ok(why);
        }
        tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// The GPU Operator operands that have a DaemonSet in the cluster (those the ClusterPolicy
/// enables), by [`gpuwl_core::model::operand::operand_of`] on the DaemonSets' names.
async fn deployed_operands(client: &Client) -> Result<BTreeSet<String>> {
    let api: Api<DaemonSet> = Api::all(client.clone());
    let mut out = BTreeSet::new();
    list_all(&api, ListParams::default(), "list DaemonSets", |ds| {
        let name = ds.metadata.name.unwrap_or_default();
        if let Some(op) = operand::operand_of(Some(&name), None) {
            out.insert(op.to_string());
        }
    })
    .await?;
    Ok(out)
}

/// The operand step's check: `None` when [`rules::operands_state`] is content.
async fn operands_now(client: &Client, r: &Relabel) -> Result<Option<String>> {
    let pods = pods_on(client, &r.node).await?;
    let on_node: Vec<_> = pods
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .filter_map(|v| gpuwl_core::decode::operands::from_value(&v))
        .collect();
    let deployed = deployed_operands(client).await?;
    Ok(rules::operands_state(&on_node, r.config, &deployed).err())
}

/// The advertised step's check: `None` when [`rules::advertised_state`] is content.
async fn advertised_now(client: &Client, r: &Relabel, rec: &Record) -> Result<Option<String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(&r.node)
        .await
        .map_err(|e| api_error(&format!("get node {}", r.node), &e))?;
    Ok(rules::advertised_state(&node_info(&node), &rec.expect, &rec.old).err())
}

/// The holders step: evicts or stops each holder as planned, then waits until those are
/// gone (evictions the API server refused for now are tried again while waiting).
/// Returns `None` when done, else why not.
async fn clear_holders(
    clients: &Clients,
    plan: &NodePlan,
    timeout: Duration,
) -> Result<Option<String>> {
    let mut pending: Vec<String> = Vec::new();
    for (h, a) in &plan.actions {
        match a {
            HolderAction::Evict if evict(&clients.evict, &h.pod).await?.is_some() => {
                pending.push(h.pod.clone())
            }
            HolderAction::StopVm(vm) => stop_vm(&clients.api, vm).await?,
            _ => {}
        }
    }
    let node = plan.relabel.node.clone();
    wait_for(timeout, async || {
        let mut refused = Vec::new();
        let mut why = Vec::new();
        for p in &pending {
            if let Some(w) = evict(&clients.evict, p).await? {
                refused.push(p.clone());
                if !why.contains(&w) {
                    why.push(w);
                }
            }
        }
        pending = refused;
        let now = holders_of(&pods_on(&clients.api, &node).await?)?;
        let left = rules::still_there(&plan.actions, &now);
        Ok((!left.is_empty()).then(|| {
            let left: Vec<String> = left.iter().map(|p| esc(p)).collect();
            let refused = if pending.is_empty() {
                String::new()
            } else {
                format!(" (the eviction is refused for now: {})", why.join("; "))
            };
            format!("still on the node: {}{refused}", left.join(", "))
        }))
    })
    .await
}

/// Carries out one step of `plan` that is [`Status::Planned`]; returns the message of a
/// step done, or `Err(reason)` inside `Ok` when a wait ran out.
async fn do_step(
    clients: &Clients,
    plan: &mut NodePlan,
    step: StepKind,
    timeout: Duration,
) -> Result<std::result::Result<String, String>> {
    let r = plan.relabel.clone();
    let client = &clients.api;
    let waited = |why: Option<String>, done: String| match why {
        None => Ok(done),
        Some(why) => Err(why),
    };
    match step {
        StepKind::Preview => Ok(Ok(String::new())),
        StepKind::Cordon => {
            plan.record.step = StepKind::Cordon;
            let mut patch = record_patch(&plan.record);
            patch["spec"] = json!({"unschedulable": true});
            patch_node(client, &r.node, "cordon", patch).await?;
            Ok(Ok("cordoned".into()))
        }
        StepKind::Holders => {
            let why = clear_holders(clients, plan, timeout).await?;
            if why.is_none() {
                plan.record.step = StepKind::Holders;
                patch_node(client, &r.node, "annotate", record_patch(&plan.record)).await?;
            }
            Ok(waited(
                why,
                rules::holders_detail(&plan.actions).replace("; wait until gone", ": gone"),
            ))
        }
        StepKind::Relabel => {
            plan.record.step = StepKind::Relabel;
            let (labels, done) = match &plan.restore {
                // An abort: the labels as they were; `null` removes one that was absent.
                Some(back) => (
                    json!({LABEL_KEY: back.label, VGPU_CONFIG_LABEL: back.vgpu}),
                    format!("labels put back: {}", rules::restore_text(back)),
                ),
                None => {
                    let mut labels = json!({LABEL_KEY: r.config.as_str()});
                    if let Some(t) = &r.vgpu_type {
                        labels[VGPU_CONFIG_LABEL] = json!(t);
                    }
                    (labels, format!("labelled {LABEL_KEY}={}", r.config))
                }
            };
            let mut patch = record_patch(&plan.record);
            patch["metadata"]["labels"] = labels;
            patch_node(client, &r.node, "label", patch).await?;
            Ok(Ok(done))
        }
        StepKind::Operands => {
            let why = wait_for(timeout, async || operands_now(client, &r).await).await?;
            let why =
                why.map(
                    |w| match rules::known_fault(&plan.record, r.config, &w, &plan.kept) {
                        Some(fault) => format!("{w}; {fault}"),
                        None => w,
                    },
                );
            let done = format!(
                "{} Ready; no {} pod",
                operand::needed(r.config).join(", "),
                rules::other_plugins(r.config).join(" or ")
            );
            Ok(waited(why, done))
        }
        StepKind::Advertised => {
            let rec = plan.record.clone();
            let why = wait_for(timeout, async || advertised_now(client, &r, &rec).await).await?;
            Ok(waited(why, rules::expect_text(&rec.expect, &rec.old)))
        }
        StepKind::Uncordon => {
            let patch = json!({"spec": {"unschedulable": null},
                "metadata": {"annotations": {STATE_ANNOTATION: null}}});
            patch_node(client, &r.node, "uncordon", patch).await?;
            Ok(Ok("uncordoned".into()))
        }
    }
}

/// Carries out `plan`'s steps in order, each reported to `sink` as it ends; a step found
/// done or skipped is reported as such. Returns `Err(message)` inside `Ok` when a wait ran
/// out: the node stays as it is (cordoned, the record on it).
///
/// Errors: an API call that fails (the node keeps the record of the last step done).
pub(crate) async fn run_node(
    clients: &Clients,
    plan: &mut NodePlan,
    timeout: Duration,
    sink: &mut Sink<'_>,
) -> Result<std::result::Result<(), String>> {
    let node = plan.relabel.node.clone();
    let steps = plan.steps.clone();
    if plan.write_record {
        // An abort starting: the record says so before anything changes, so that an
        // interrupted abort resumes as one.
        patch_node(&clients.api, &node, "annotate", record_patch(&plan.record)).await?;
        plan.write_record = false;
    }
    for s in &steps {
        let from = Instant::now();
        if s.status != Status::Planned {
            sink.emit(Some(&node), s.step, s.status, from, s.detail.clone());
            continue;
        }
        match do_step(clients, plan, s.step, timeout).await? {
            Ok(msg) => sink.emit(Some(&node), s.step, Status::Done, from, msg),
            Err(why) => {
                let msg = format!(
                    "{} did not complete within {}: {why}",
                    s.step.as_str(),
                    seconds(timeout)
                );
                sink.emit(Some(&node), s.step, Status::TimedOut, from, msg.clone());
                return Ok(Err(format!(
                    "relabel {}: step {msg}. The node stays cordoned (gpuwl uncordons only once the new \
                     operands are Ready and the new name advertised); run the same command again to go on \
                     waiting, it resumes from the record in annotation {STATE_ANNOTATION}; or end it, the \
                     labels put back: gpuwl relabel {} --abort",
                    esc(&node),
                    esc(&node)
                )));
            }
        }
    }
    if steps
        .iter()
        .any(|s| s.step == StepKind::Uncordon && s.status != Status::Planned)
    {
        // Left cordoned as found: only the record goes.
        let patch = json!({"metadata": {"annotations": {STATE_ANNOTATION: null}}});
        patch_node(&clients.api, &node, "annotate", patch).await?;
    }
    Ok(Ok(()))
}

/// Runs the relabels of `req`: reads every node first and decides (a refusal — holders
/// without a flag, a relabel that could never complete, another one under way — stops the
/// run before any change); `--dry-run` reports the plan; else the preview on a twin (fresh
/// relabels only: a resumed one is applied already), whose `not recommended` stops the run
/// unless `--force` or a yes at the terminal; then each node's steps in turn, one node
/// after another, stopping at the first that does not complete (the rest untouched). With
/// `--abort` ([`Request::aborts`]) each node's relabel under way is ended instead. Every
/// step goes to `sink` as it ends. SIGINT or SIGTERM stops the run between calls: the
/// report ([`Outcome::Interrupted`]) says what state the node is in.
///
/// Errors: [`Error::Input`] for an unknown node or a `--stop-vm` that names no VM on the
/// nodes; the twin's and the API's errors.
pub async fn run(clients: &Clients, req: &Request, mut sink: Sink<'_>) -> Result<Report> {
    let client = &clients.api;
    let (plans, stopped) = if req.aborts.is_empty() {
        decide_all(client, req, &mut sink).await?
    } else {
        decide_aborts(client, req, &mut sink).await?
    };
    if let Some(message) = stopped {
        return Ok(sink.report(Outcome::Refused, &req.relabels, None, Some(message)));
    }
    if plans.is_empty() {
        return Ok(sink.report(Outcome::NothingToDo, &req.relabels, None, None));
    }
    let verdict = if req.aborts.is_empty() {
        // The twin handles a signal itself (it is deleted) and answers Interrupted.
        match preview(client, req, &plans, &mut sink).await {
            Err(Error::Interrupted(m)) => {
                return Err(Error::Interrupted(format!(
                    "relabel: {m}; nothing was changed on the cluster"
                )));
            }
            v => v?,
        }
    } else {
        None
    };
    if req.dry_run {
        for p in &plans {
            for s in &p.steps {
                let node = Some(p.relabel.node.as_str());
                sink.emit(node, s.step, s.status, Instant::now(), s.detail.clone());
            }
        }
        return Ok(sink.report(Outcome::Planned, &req.relabels, verdict, None));
    }
    if let Some(v) = &verdict
        && let Some(message) = gate(v, req.force, &mut sink)
    {
        return Ok(sink.report(Outcome::Refused, &req.relabels, verdict, Some(message)));
    }
    let mut done = Vec::new();
    // A resumed relabel started in an earlier run: its length is counted from there too.
    let first_started = plans
        .iter()
        .filter(|p| p.resuming && p.restore.is_none())
        .filter_map(|p| {
            p.record
                .started
                .parse::<k8s_openapi::jiff::Timestamp>()
                .ok()
        })
        .min();
    for mut plan in plans {
        let node = plan.relabel.node.clone();
        let outcome = tokio::select! {
            o = run_node(clients, &mut plan, req.timeout, &mut sink) => o?,
            sig = crate::signals::received() => {
                let message = interrupted_message(&node, sig, &done);
                return Ok(sink.report(Outcome::Interrupted, &req.relabels, verdict, Some(message)));
            }
        };
        if let Err(message) = outcome {
            return Ok(sink.report(Outcome::TimedOut, &req.relabels, verdict, Some(message)));
        }
        done.push(match &plan.restore {
            Some(back) => format!(
                "{} back to {} (the relabel to {} aborted)",
                esc(&node),
                rules::restore_text(back),
                esc(&plan.record.to)
            ),
            None => format!(
                "{} {} → {}",
                esc(&node),
                plan.record.from.as_deref().map_or("(none)".into(), esc),
                plan.relabel.config
            ),
        });
    }
    if !req.aborts.is_empty() {
        let message = format!("aborted: {}", done.join(", "));
        return Ok(sink.report(Outcome::Done, &req.relabels, verdict, Some(message)));
    }
    let since_first = first_started.map(|t| {
        let secs = k8s_openapi::jiff::Timestamp::now()
            .duration_since(t)
            .as_secs()
            .max(0);
        (t.to_string(), Duration::from_secs(secs.unsigned_abs()))
    });
    let message = done_message(&done, sink.started.elapsed(), since_first);
    Ok(sink.report(Outcome::Done, &req.relabels, verdict, Some(message)))
}

/// The preview's verdict as a gate: `None` to go on; the refusal's message when it is `not
/// recommended` and neither `--force` nor a yes at the terminal lets it through.
fn gate(v: &Verdict, force: bool, sink: &mut Sink<'_>) -> Option<String> {
    if force || v.recommendation != Recommendation::NotRecommended {
        return None;
    }
    let question = format!("The preview says: {}. Go on?", v.summary);
    match (sink.confirm)(&question) {
        Some(true) => None,
        answer => {
            let from = Instant::now();
            let why = if answer.is_none() {
                "no terminal to ask"
            } else {
                "not confirmed"
            };
            let message = format!(
                "refused, nothing was changed: the preview's verdict is {} ({why}); go on with \
                 --force",
                v.summary
            );
            sink.emit(
                None,
                StepKind::Preview,
                Status::Refused,
                from,
                message.clone(),
            );
            Some(message)
        }
    }
}

/// What an interrupted run leaves: the node under way (cordoned, the record on it) and
/// how to go on or back; the nodes done before it are done.
fn interrupted_message(node: &str, sig: &str, done: &[String]) -> String {
    let before = if done.is_empty() {
        String::new()
    } else {
        format!(" (done before it: {})", done.join(", "))
    };
    let node = esc(node);
    format!(
        "relabel {node}: {sig} stopped the run{before}; the node is left as the last step \
         completed left it (cordoned if the cordon ran, the record in annotation \
         {STATE_ANNOTATION}): run the same command again to resume, or end it, the labels \
         put back: gpuwl relabel {node} --abort"
    )
}

/// Reads every node named by `--abort` and decides ([`rules::decide_abort`]): the labels
/// to put back come from the node's record, the workload they give from gpuwl's model of
/// the operator, and the names expected then from its model of the device plugins.
async fn decide_aborts(
    client: &Client,
    req: &Request,
    sink: &mut Sink<'_>,
) -> Result<(Vec<NodePlan>, Option<String>)> {
    let policy = clusterpolicy::from_cluster(client).await;
    let mut plans = Vec::new();
    let mut stopped = None;
    for name in &req.aborts {
        let from = Instant::now();
        let (info, obs) = observe(client, name).await?;
        let (back, vgpu) = match &obs.record {
            Some(Ok(rec)) => (rec.from.clone(), rec.from_vgpu.clone()),
            _ => (None, None),
        };
        let mut restored = info.clone();
        match &back {
            Some(v) => restored.labels.insert(LABEL_KEY.to_string(), v.clone()),
            None => restored.labels.remove(LABEL_KEY),
        };
        let config =
            gpuwl_core::model::operator::effective_workload(&restored, policy.policy()).workload;
        let r = Relabel {
            node: name.clone(),
            config,
            vgpu_type: vgpu,
        };
        let fresh = rules::expectation(&info, &r, policy.policy());
        let node = Some(name.as_str());
        match rules::decide_abort(name, &obs, config, &fresh, &req.how) {
            Decision::NothingToDo(m) => {
                sink.emit(node, StepKind::Relabel, Status::AlreadyDone, from, m);
            }
            Decision::Stop(step, m) => {
                stopped.get_or_insert(format!("relabel {} --abort: {m}", esc(name)));
                sink.emit(node, step, Status::Refused, from, m);
            }
            Decision::Go(p) => plans.push(*p),
        }
    }
    Ok((plans, stopped))
}

/// Reads and decides every node. Returns the plans to carry out, and the message of the
/// first refusal (every refusal reported to `sink`); nodes with nothing to do are
/// reported and left out.
async fn decide_all(
    client: &Client,
    req: &Request,
    sink: &mut Sink<'_>,
) -> Result<(Vec<NodePlan>, Option<String>)> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let policy = clusterpolicy::from_cluster(client).await;
    let mut decisions = Vec::new();
    let mut holders = Vec::new();
    let mut resuming = false;
    for r in &req.relabels {
        let from = Instant::now();
        let (info, obs) = observe(client, &r.node).await?;
        resuming |= obs.record.is_some();
        holders.extend(obs.holders.iter().cloned());
        let fresh = rules::expectation(&info, r, policy.policy());
        let cannot = rules::cannot_finish(&info, r, &policy, obs.record.is_none());
        decisions.push((from, rules::decide(r, &obs, &fresh, cannot, &req.how, &now)));
    }
    // A resumed run may have stopped the VMs it names already: only a fresh one checks.
    let problems = rules::stop_vm_problems(&req.how, &holders);
    if !problems.is_empty() && !resuming {
        return Err(Error::Input(problems.join("; ")));
    }
    let mut plans = Vec::new();
    let mut stopped = None;
    for ((from, d), r) in decisions.into_iter().zip(&req.relabels) {
        let node = Some(r.node.as_str());
        match d {
            Decision::NothingToDo(m) => {
                sink.emit(node, StepKind::Relabel, Status::AlreadyDone, from, m);
            }
            Decision::Stop(step, m) => {
                stopped.get_or_insert(format!("relabel {}: {m}", esc(&r.node)));
                sink.emit(node, step, Status::Refused, from, m);
            }
            Decision::Go(p) => plans.push(*p),
        }
    }
    Ok((plans, stopped))
}

/// The preview step: the fresh relabels of `plans` tried on a twin of the cluster
/// ([`twin::run`], what `gpuwl whatif relabel` does), its verdict reported; skipped with
/// `--no-preview` or when every relabel resumes; only planned with `--dry-run`.
///
/// Errors: the twin's and the cluster read's.
async fn preview(
    client: &Client,
    req: &Request,
    plans: &[NodePlan],
    sink: &mut Sink<'_>,
) -> Result<Option<Verdict>> {
    let from = Instant::now();
    let fresh: Vec<Relabel> = plans
        .iter()
        .filter(|p| !p.resuming)
        .map(|p| p.relabel.clone())
        .collect();
    let skip = |why: &str| (Status::Skipped, why.to_string());
    let (status, message) = match &req.preview {
        None => skip("--no-preview"),
        Some(_) if fresh.is_empty() => skip("every relabel resumes: the preview ran before"),
        Some(opts) if req.dry_run => (
            Status::Planned,
            format!(
                "try {} on a twin ({}) and report its verdict",
                fresh
                    .iter()
                    .map(|r| format!("{}={}", esc(&r.node), r.config))
                    .collect::<Vec<_>>()
                    .join(" "),
                esc(&opts.name)
            ),
        ),
        Some(opts) => {
            let source = snapshot::read(client, false).await?;
            let kueue = source.kueue.as_ref();
            let report = twin::run(&source, &fresh, opts, sink.progress).await?;
            // The quota layer's side, as `whatif relabel` says it.
            let quota = kueue.map(|k| quota::quota_side(&report.changes, k, &source));
            let notes = quota
                .as_ref()
                .map(RelabelQuota::sentences)
                .unwrap_or_default();
            sink.quota = quota;
            let v = report.verdict;
            let message = format!("Verdict: {} (twin {})", v.summary, esc(&opts.name));
            sink.emit_notes(None, StepKind::Preview, Status::Done, from, message, notes);
            return Ok(Some(v));
        }
    };
    sink.emit(None, StepKind::Preview, status, from, message);
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::eviction_refused;

    /// Issue 54, item 14: a refused eviction says what the API server said, which names the
    /// PodDisruptionBudget, instead of guessing "a PodDisruptionBudget?".
    #[test]
    fn a_refused_eviction_names_the_budget_the_api_names() {
        let s: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget gpu-pdb needs 1 healthy pods and has 1 currently"}]}
        }))
        .unwrap();
        assert_eq!(
            eviction_refused(&s),
            "The disruption budget gpu-pdb needs 1 healthy pods and has 1 currently"
        );
        let bare: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 429, "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests"
        }))
        .unwrap();
        assert_eq!(
            eviction_refused(&bare),
            "Cannot evict pod as it would violate the pod's disruption budget"
        );
    }
}
