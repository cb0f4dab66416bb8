//! The twin: a copy of a cluster's GPU side on a local control plane ([`crate::cluster`]),
//! where a relabel is tried before anyone applies it (`gpuwl whatif`, `gpuwl plan`).
//!
//! The twin holds the source's GPU nodes (labels, taints, cordon, capacity and allocatable:
//! [`objects::node_object`]), the non-terminal pods bound to them (by `spec.nodeName`, no
//! scheduler involved), and the pending pods that ask for an `nvidia.com/` GPU name, left to
//! the twin's real kube-scheduler. CPU-only nodes are left out: no GPU pod can run there.
//! [`run`] then
//! 1. lets the scheduler try the pending pods as the cluster is (the baseline: a pod the
//!    twin places here would not have waited in the cluster, and is reported apart);
//! 2. applies the relabels: the workload label (and `nvidia.com/vgpu.config`), and what the
//!    node then advertises, by gpuwl's model of the GPU Operator and device plugins
//!    ([`gpuwl_core::analysis::twin::predict`]) written to the node status as a kubelet
//!    would, a name that leaves kept at `"0"`;
//! 3. waits until the scheduler has settled (nothing left in its active and backoff queues,
//!    [`crate::cluster::scheduler_busy`]) and reads the twin back: which pods it bound and
//!    where, which still wait (explained by [`gpuwl_core::analysis::explain`] on the twin's
//!    state), which running pods now hold a name their node no longer offers, and the
//!    inventory before and after.

pub mod kubevirt;
pub mod load;
pub mod objects;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use crate::cluster::kubevirt::KUBEVIRT_VERSION;
use crate::cluster::lock::{self, Lock};
use crate::cluster::{self, UpOptions};
use crate::input::live::{self};
use crate::input::pods;
use crate::twin::load::{Trial, Twin, copy_source, relabel_node, settle_or_note};
use gpuwl_core::analysis::twin::predict;
use gpuwl_core::analysis::twin::report::{
    Relabel, Report, TwinFacts, Verdict, apply_steps, disrupted_pods, pending_outcome,
    placed_as_is, pool_deltas,
};
use gpuwl_core::analysis::{explain, inventory};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::pod::PodInfo;
use gpuwl_core::model::resource::classify;
use gpuwl_core::model::snapshot::Snapshot;
use gpuwl_core::text;

/// How the twin runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The twin's local cluster name.
    pub name: String,
    /// Leave the twin running afterwards.
    pub keep: bool,
    /// How long to wait for the scheduler to settle, each time.
    pub settle_timeout: Duration,
    /// Run KubeVirt's virt-api and virt-controller in the twin and create the pending VMs
    /// as real VMIs there ([`kubevirt`]), instead of modelling them as pods.
    pub kubevirt: bool,
}

/// Environment of the twin's components: the Go garbage collector runs at a quarter of the
/// default heap growth (`GOGC=25`, the Go runtime's `runtime/debug.SetGCPercent` setting),
/// trading some CPU for a smaller peak: the twin is short-lived and shares the machine with
/// whatever the user runs.
pub(crate) const TWIN_ENV: [(&str, &str); 1] = [("GOGC", "25")];

/// File in a twin's state directory that marks it as one (a later run may replace it; a
/// cluster without it is never touched).
pub const TWIN_MARKER: &str = "gpuwl-twin";

/// The source's pods the twin copies: bound ones on a copied node, and pending ones asking
/// for an `nvidia.com/` GPU name. Returns (bound, pending, left out with why).
fn select_pods<'a>(
    source: &'a Snapshot,
    nodes: &BTreeSet<&str>,
) -> (Vec<&'a PodInfo>, Vec<&'a PodInfo>, Vec<String>) {
    let launchers: BTreeSet<(String, String)> = source
        .pods()
        .iter()
        .filter_map(|p| {
            p.launcher_vmi()
                .map(|v| (p.namespace.clone(), v.to_string()))
        })
        .collect();
    let (mut bound, mut pending, mut left) = (Vec::new(), Vec::new(), Vec::new());
    for p in source.pods() {
        if p.is_terminal() {
            continue;
        }
        let wants_gpu = p.requests.keys().any(|r| classify(r).is_gpu());
        if p.is_vm() && launchers.contains(&(p.namespace.clone(), p.name.clone())) {
            continue;
        }
        if !p.resource_claims.is_empty() && (wants_gpu || p.node_name.is_none()) {
            left.push(format!("{}: DRA claims", p.key()));
            continue;
        }
        if !p.spec_problems.is_empty() {
            let problems: Vec<String> = p.spec_problems.iter().map(ToString::to_string).collect();
            left.push(format!("{}: {}", p.key(), problems.join("; ")));
            continue;
        }
        match &p.node_name {
            Some(n) if nodes.contains(n.as_str()) => bound.push(p),
            Some(_) => {}
            None if wants_gpu => pending.push(p),
            None => {}
        }
    }
    (bound, pending, left)
}

/// The pending GPU items split for the twin: `(vmis, pods, left_out)`. With KubeVirt in
/// the twin (`kubevirt`), a pending VM (its VMI, its launcher pod) becomes a real VMI
/// there, decided by virt-api and virt-controller. Without it, a VMI or VM that has no
/// launcher pod cannot be tried: whether KubeVirt renders one at all is its own decision
/// (permittedHostDevices, its webhooks; kubevirt/kubevirt
/// `pkg/virt-controller/watch/vmi.go`), so it is left out with that reason instead of
/// being placed as a plain pod; a pending launcher pod is a pod like any other.
fn split_vmis(
    pending: Vec<&PodInfo>,
    kubevirt: bool,
) -> (Vec<&PodInfo>, Vec<&PodInfo>, Vec<String>) {
    let (vmis, pending): (Vec<&PodInfo>, Vec<&PodInfo>) = pending
        .into_iter()
        .partition(|p| kubevirt && kubevirt::vmi_name(p).is_some());
    let (waiting, pending): (Vec<&PodInfo>, Vec<&PodInfo>) =
        pending.into_iter().partition(|p| p.is_vm());
    let left = waiting
        .iter()
        .map(|p| {
            format!(
                "{}: a {} with no launcher pod; KubeVirt decides whether it gets one (--kubevirt \
                 tries it on the twin)",
                p.key(),
                p.kind.as_str()
            )
        })
        .collect();
    (vmis, pending, left)
}

/// The default twin name ([`Options::name`] when not given).
pub const DEFAULT_TWIN_NAME: &str = "gpuwl-twin";

/// Takes the lock of the twin's name (`<state root>/<name>.lock`,
/// [`crate::cluster::lock`]): with the default name, the first of `gpuwl-twin`,
/// `gpuwl-twin-2` … `gpuwl-twin-9` no other run holds; with a name the user gave, waits
/// (up to 30 min, a progress line every 15 s) for the run that holds it. Returns the lock
/// (held until dropped) and the options with the name taken.
///
/// Errors: [`Error::Runtime`] when every default name is in use or the wait times out.
pub(crate) fn lock_twin(
    opts: &Options,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(Lock, Options)> {
    let lock_path = |name: &str| {
        let dir = cluster::state_dir(name);
        dir.with_file_name(format!("{name}.lock"))
    };
    if opts.name == DEFAULT_TWIN_NAME {
        for i in 1..=9 {
            let name = if i == 1 {
                DEFAULT_TWIN_NAME.to_owned()
            } else {
                format!("{DEFAULT_TWIN_NAME}-{i}")
            };
            if let Some(l) = lock::try_lock(&lock_path(&name))? {
                if i > 1 {
                    progress(&format!(
                        "the twin {DEFAULT_TWIN_NAME} is in use by another run; this one uses {name}"
                    ));
                }
                let mut o = opts.clone();
                o.name = name;
                return Ok((l, o));
            }
        }
        return Err(Error::Runtime(format!(
            "nine twins ({DEFAULT_TWIN_NAME} … {DEFAULT_TWIN_NAME}-9) are in use by other runs; wait for one, or give --twin-name"
        )));
    }
    let l = lock::lock_waiting(
        &lock_path(&opts.name),
        std::time::Duration::from_secs(30 * 60),
        |waited| {
            progress(&format!(
                "waiting for another run using the twin {} ({} s so far)",
                opts.name,
                waited.as_secs()
            ))
        },
    )?;
    Ok((l, opts.clone()))
}

/// Runs a whatif: builds the twin of `source`, applies `relabels`, and reports (see the
/// module docs). `progress` gets one line per stage.
///
/// Errors: [`Error::Input`] for a relabel naming a node the source lacks, or a node whose
/// GPUs cannot be worked out; [`Error::Runtime`] when the twin cannot be started or the
/// API refuses a call. The twin is taken down on every path unless `opts.keep`.
///
/// Two runs at once never share a twin: each holds the lock of its twin's name for the
/// whole run ([`lock_twin`]).
pub async fn run(
    source: &Snapshot,
    relabels: &[Relabel],
    opts: &Options,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Report> {
    let started = Instant::now();
    // Validate before starting anything.
    let hardware = relabelled_hardware(source, relabels)?;
    let policy = source.policy.policy();
    let pools = inventory::assign_pools(&source.nodes, policy);
    let mut copied: BTreeSet<&str> = pools.pool_of.keys().copied().collect();
    copied.extend(relabels.iter().map(|r| r.node.as_str()));
    let (bound, pending, mut left_out) = select_pods(source, &copied);
    let (vmis, pending, no_launcher) = split_vmis(pending, opts.kubevirt);
    left_out.extend(no_launcher);
    let twin_nodes: Vec<&NodeInfo> = source
        .nodes
        .iter()
        .filter(|n| copied.contains(n.name.as_str()))
        .collect();

    // A twin in use by another run is never touched: the default name moves on to the
    // next free one (`gpuwl-twin-2`, …); a name the user gave waits for that run.
    let (_twin_lock, opts) = lock_twin(opts, progress)?;
    let opts = &opts;
    // The twin's name must not be a cluster of the user's: `up` would return it running and
    // the tear-down would delete it. A twin left by an interrupted run carries the marker and
    // is replaced.
    remove_old_twin(opts, progress).await?;
    progress(&format!(
        "starting the twin {} ({} GPU node(s), {} bound pod(s), {} pending GPU pod(s){})",
        opts.name,
        twin_nodes.len(),
        bound.len(),
        pending.len(),
        if opts.kubevirt {
            format!(", {} pending VMI(s); with KubeVirt", vmis.len())
        } else {
            String::new()
        }
    ));
    let up = UpOptions {
        name: opts.name.clone(),
        kubevirt: opts.kubevirt,
        env: TWIN_ENV
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        // Before the first process: a run killed half-way through the start leaves a twin
        // the next run recognises as one ([`remove_old_twin`]).
        marker: Some((TWIN_MARKER.to_string(), b"gpuwl whatif\n".to_vec())),
        twin: true,
        ..Default::default()
    };
    let mut start = tokio::task::spawn_blocking(move || cluster::up(&up));
    let started_up = tokio::select! {
        h = &mut start => Ok(h),
        sig = crate::signals::received() => Err(sig),
    };
    let handle = match started_up {
        Ok(h) => h.map_err(|e| Error::failed("the twin's start", e))??,
        Err(sig) => {
            // The start runs on a thread of its own and cannot be cut short: it is waited
            // out (a twin starts in seconds), then the twin is deleted.
            progress(&format!(
                "{sig}: waiting for the twin's start to end, then deleting the twin {}",
                opts.name
            ));
            let _ = start.await;
            return Err(interrupted(sig, opts).await);
        }
    };
    let work = async {
        let client = cluster::client(&handle.kubeconfig, None).await?;
        let info = cluster::info(&opts.name)?;
        let twin = Twin {
            client: &client,
            info: &info,
            opts,
        };
        let trial = Trial {
            source,
            relabels,
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &vmis,
        };
        build_and_try(&twin, &trial, progress).await
    };
    let result = tokio::select! {
        r = work => r,
        sig = crate::signals::received() => {
            return Err(interrupted(sig, opts).await);
        }
    };
    if !opts.keep {
        progress(&format!("deleting the twin {}", opts.name));
        let name = opts.name.clone();
        let _ = tokio::task::spawn_blocking(move || cluster::down(&name)).await;
    }
    let mut report = result?;
    report.twin.left_out = left_out;
    report.twin.cpu_nodes_left_out = source.nodes.len() - twin_nodes.len();
    report.twin.kept = opts.keep;
    report.twin.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Deletes the twin of an interrupted run (also with `--keep-twin`: it is half-built) and
/// returns the [`Error::Interrupted`] that says so.
async fn interrupted(sig: &str, opts: &Options) -> Error {
    let name = opts.name.clone();
    let down = tokio::task::spawn_blocking(move || cluster::down(&name)).await;
    let how = match down {
        Ok(Ok(_)) => format!("the twin {} was deleted", opts.name),
        _ => format!(
            "the twin {} could not be deleted: gpuwl cluster down --name {}",
            opts.name, opts.name
        ),
    };
    Error::Interrupted(format!("{sig}: stopped; {how}"))
}

/// The GPUs of each relabelled node, by node name, worked out before anything starts.
///
/// Errors: [`Error::Input`] for a relabel naming a node the source lacks (with the names
/// it may have meant), or a node whose GPUs cannot be worked out
/// ([`predict::infer_hardware`]).
fn relabelled_hardware(
    source: &Snapshot,
    relabels: &[Relabel],
) -> Result<BTreeMap<String, predict::Inferred>> {
    let by_name: BTreeMap<&str, &NodeInfo> =
        source.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut hardware = BTreeMap::new();
    for r in relabels {
        let Some(n) = by_name.get(r.node.as_str()) else {
            return Err(Error::Input(format!(
                "relabel: no node {} in the {}{}",
                text::cut(&r.node),
                source.origin,
                text::did_you_mean(&r.node, by_name.keys().copied())
            )));
        };
        let Some(hw) = predict::infer_hardware(n) else {
            return Err(Error::Input(format!(
                "relabel {}: the node's GPUs cannot be worked out: {}",
                text::esc(&r.node),
                predict::why_unknown(n).unwrap_or_default()
            )));
        };
        hardware.insert(r.node.clone(), hw);
    }
    Ok(hardware)
}

/// Makes sure the twin's name is free: a twin an interrupted run left (it carries
/// [`TWIN_MARKER`]) is taken down; a local cluster of the user's under that name is never
/// touched (`up` would return it running and the tear-down would delete it).
///
/// Errors: [`Error::Input`] when the name is a cluster of the user's; the old twin's
/// removal's errors.
async fn remove_old_twin(opts: &Options, progress: &mut (dyn FnMut(&str) + Send)) -> Result<()> {
    let state = cluster::state_dir(&opts.name);
    if !state.exists() {
        return Ok(());
    }
    if state.join(TWIN_MARKER).exists() {
        progress(&format!(
            "removing the twin {} left by an earlier run",
            opts.name
        ));
        let name = opts.name.clone();
        tokio::task::spawn_blocking(move || cluster::down(&name))
            .await
            .map_err(|e| Error::failed("the old twin's removal", e))??;
        Ok(())
    } else {
        Err(Error::Input(format!(
            "--twin-name {}: a local cluster of that name exists ({}), and the twin is created and deleted by this command; give another --twin-name",
            opts.name,
            cluster::status(&opts.name)
                .map(|s| s.to_string())
                .unwrap_or_else(|_| "state left".into())
        )))
    }
}

/// The steps of a whatif on a started twin: copy the source in, let the scheduler try the
/// pending pods as they are, relabel, let it try again, read the twin back and compare.
async fn build_and_try(
    twin: &Twin<'_>,
    trial: &Trial<'_>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Report> {
    let policy = trial.source.policy.policy();
    let kubevirt_cr = trial.source.kubevirt.as_ref();
    let (pending_by_twin, vmis_by_twin) = copy_source(twin.client, trial, progress).await?;
    let mut notes = Vec::new();
    if !vmis_by_twin.is_empty() {
        progress("waiting for virt-controller to render or refuse the VMIs");
        let undecided =
            kubevirt::wait_rendered(twin.client, &vmis_by_twin, twin.opts.settle_timeout).await?;
        if !undecided.is_empty() {
            notes.push(format!(
                "virt-controller had neither rendered nor refused {} within {} s",
                undecided.join(", "),
                twin.opts.settle_timeout.as_secs()
            ));
        }
    }
    settle_or_note(
        twin,
        Duration::from_millis(1500),
        "after the pending pods were created",
        &mut notes,
    )
    .await?;
    let base = pods::list_pods(twin.client).await?;
    let placed_without_relabel = placed_as_is(
        &base,
        &kubevirt::with_launchers(&pending_by_twin, &vmis_by_twin, &base),
    );
    let placed_before: BTreeSet<String> = placed_without_relabel
        .iter()
        .map(|p| p.pod.pod.clone())
        .collect();

    progress(&format!(
        "relabelling {}",
        trial
            .relabels
            .iter()
            .map(|r| format!("{}={}", r.node, r.config))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let node_api: Api<Node> = Api::all(twin.client.clone());
    let mut changes = Vec::new();
    for r in trial.relabels {
        changes.push(relabel_node(&node_api, trial, r, policy).await?);
    }
    progress("waiting for the twin's scheduler to settle");
    settle_or_note(
        twin,
        Duration::from_millis(2000),
        "after the relabel",
        &mut notes,
    )
    .await?;

    progress("reading the twin back");
    let nodes_after = live::list_nodes(twin.client).await?;
    let pods_after = pods::list_pods(twin.client).await?;
    // A rendered launcher pod stands for its VMI from here on.
    let pending_by_twin = kubevirt::with_launchers(&pending_by_twin, &vmis_by_twin, &pods_after);
    for c in &mut changes {
        if let Some(n) = nodes_after.iter().find(|n| n.name == c.relabel.node) {
            c.advertised_after = predict::listed(n);
        }
    }
    let inputs = explain::Inputs::of_state(&nodes_after, &pods_after, policy, kubevirt_cr);
    let (now_scheduled, mut still_pending) =
        pending_outcome(&pods_after, &pending_by_twin, &placed_before, inputs)?;
    still_pending.extend(kubevirt::refused(twin.client, &vmis_by_twin, &pods_after, inputs).await?);
    let mut disrupted = disrupted_pods(&changes, &pods_after, &pending_by_twin);
    // Whether a VM owns a disrupted VMI is the source's to say (the twin has no VMs).
    for d in &mut disrupted {
        if d.pod.vmi.is_some() {
            d.pod.vmi_owned_by_vm = trial
                .source
                .pods()
                .iter()
                .find(|p| p.key() == d.pod.pod)
                .and_then(|p| p.vmi_owned_by_vm);
        }
    }
    // The inventory before (the source) and after (the twin).
    let source = trial.source;
    let inv_before = inventory::build(&source.nodes, source.pods(), &source.policy)?;
    let inv_after = inventory::build(&nodes_after, &pods_after, &source.policy)?;
    let inventory = pool_deltas(&inv_before, &inv_after);
    let mut names_by = "gpuwl's model of the GPU Operator and its device plugins (the \
                    effective workload config, its operands, and the names their plugins \
                    register), written to the twin's node status"
        .to_string();
    if twin.opts.kubevirt {
        names_by.push_str(&format!(
            "; the pending VMs were real VMIs, rendered or refused by KubeVirt {}'s \
             virt-controller against the source's permittedHostDevices",
            KUBEVIRT_VERSION
        ));
    }
    Ok(Report {
        verdict: Verdict::of(&now_scheduled, still_pending.len(), &disrupted),
        source: source.origin.clone(),
        commands: apply_steps(&changes, &disrupted),
        changes,
        placed_without_relabel,
        now_scheduled,
        still_pending,
        disrupted,
        inventory,
        twin: TwinFacts {
            cluster: twin.opts.name.clone(),
            kept: twin.opts.keep,
            nodes: trial.twin_nodes.len(),
            cpu_nodes_left_out: 0,
            bound_pods: trial.bound.len(),
            pending_pods: trial.pending.len() + trial.vmis.len(),
            left_out: Vec::new(),
            not_copied: objects::LEFT_OUT.to_string(),
            names_by,
            seconds: 0.0,
        },
        notes,
        quota: None,
    })
}

#[cfg(test)]
mod tests;
