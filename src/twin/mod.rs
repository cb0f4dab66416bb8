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
//!    ([`predict`]) written to the node status as a kubelet would, a name that leaves kept
//!    at `"0"`;
//! 3. waits until the scheduler has settled (nothing left in its active and backoff queues,
//!    [`crate::cluster::scheduler_busy`]) and reads the twin back: which pods it bound and
//!    where, which still wait (explained by [`crate::analysis::explain`] on the twin's
//!    state), which running pods now hold a name their node no longer offers, and the
//!    inventory before and after.

pub mod kubevirt;
pub mod objects;
pub mod plan;
pub mod predict;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;

use crate::analysis::{explain, inventory};
use crate::cluster::kubevirt::KUBEVIRT_VERSION;
use crate::cluster::lock::{self, Lock};
use crate::cluster::{self, ClusterInfo, UpOptions, accounts, gpusim, nodes};
use crate::error::{Error, Result};
use crate::input::live::{self, api_error};
use crate::input::{pods, virt};
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::node::NodeInfo;
use crate::model::operator::{ClusterPolicy, PolicyStatus, VGPU_CONFIG_LABEL};
use crate::model::pod::{self, PodInfo};
use crate::model::resource::{NVIDIA_PREFIX, classify};
use crate::model::workload::{InvalidWorkloadConfig, LABEL_KEY, WorkloadConfig};
use crate::{render, text};

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
                        format!("; did you mean {}?", render::esc(&near))
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

/// What the twin is built from.
pub struct Source {
    /// All nodes of the cluster.
    pub nodes: Vec<NodeInfo>,
    /// All pods (and VMIs) of the cluster.
    pub pods: Vec<PodInfo>,
    /// The ClusterPolicy, or why there is none.
    pub policy: PolicyStatus,
    /// KubeVirt's `permittedHostDevices` (from the KubeVirt or HyperConverged CR); `None`
    /// when not read. Used by a twin with KubeVirt ([`Options::kubevirt`]) and by explain
    /// on the twin's state.
    pub kubevirt: Option<PermittedHostDevices>,
    /// Where it was read: `cluster`, or the files.
    pub origin: String,
}

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
}

/// Environment of the twin's components: the Go garbage collector runs at a quarter of the
/// default heap growth (`GOGC=25`, the Go runtime's `runtime/debug.SetGCPercent` setting),
/// trading some CPU for a smaller peak: the twin is short-lived and shares the machine with
/// whatever the user runs.
pub const TWIN_ENV: [(&str, &str); 1] = [("GOGC", "25")];

/// File in a twin's state directory that marks it as one (a later run may replace it; a
/// cluster without it is never touched).
pub const TWIN_MARKER: &str = "gpuwl-twin";

/// How many API calls the twin makes at once while loading.
const PARALLEL: usize = 16;

fn rt(msg: String) -> Error {
    Error::Runtime(msg)
}

/// The source's pods the twin copies: bound ones on a copied node, and pending ones asking
/// for an `nvidia.com/` GPU name. Returns (bound, pending, left out with why).
fn select_pods<'a>(
    source: &'a Source,
    nodes: &BTreeSet<&str>,
) -> (Vec<&'a PodInfo>, Vec<&'a PodInfo>, Vec<String>) {
    let launchers: BTreeSet<(String, String)> = source
        .pods
        .iter()
        .filter_map(|p| {
            p.launcher_vmi()
                .map(|v| (p.namespace.clone(), v.to_string()))
        })
        .collect();
    let (mut bound, mut pending, mut left) = (Vec::new(), Vec::new(), Vec::new());
    for p in &source.pods {
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

fn pod_ref(p: &PodInfo, source_key: Option<&String>) -> PodRef {
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

/// Creates `items` with at most [`PARALLEL`] calls at once.
async fn create_all<K>(api: Api<K>, items: Vec<serde_json::Value>, what: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    stream::iter(items)
        .map(|v| {
            let api = api.clone();
            async move {
                let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
                let obj: K = serde_json::from_value(v)
                    .map_err(|e| Error::failed(format!("{what} {name}: cannot build"), e))?;
                match api.create(&PostParams::default(), &obj).await {
                    Ok(_) => Ok(()),
                    Err(e) if live::already_exists(&e) => Ok(()),
                    Err(e) => Err(api_error(&format!("create {what} {name} in the twin"), &e)),
                }
            }
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates pods (namespaced) with at most [`PARALLEL`] calls at once.
async fn create_pods(client: &Client, items: Vec<serde_json::Value>) -> Result<()> {
    stream::iter(items)
        .map(|v| {
            let ns = v["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            create_all(api, vec![v], "pod")
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Waits until every node in `names` is schedulable ([`crate::cluster::nodes::is_schedulable`]).
async fn wait_nodes(client: &Client, names: &BTreeSet<String>, timeout: Duration) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let mut ready = 0;
        live::list_all(&api, ListParams::default(), "list the twin's nodes", |n| {
            if names.contains(n.metadata.name.as_deref().unwrap_or("")) && nodes::is_schedulable(&n)
            {
                ready += 1;
            }
        })
        .await?;
        if ready == names.len() {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(rt(format!(
                "the twin's nodes are not ready after {} s ({ready} of {}): kwok or \
                 kube-controller-manager did not act",
                timeout.as_secs(),
                names.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Number of pods not bound in the twin (metadata only, selected by the API server: the
/// pending ones are few, the bound ones many).
async fn unbound_count(client: &Client) -> Result<usize> {
    let api: Api<Pod> = Api::all(client.clone());
    let list = api
        .list_metadata(&ListParams::default().fields("spec.nodeName="))
        .await
        .map_err(|e| api_error("list the twin's pending pods", &e))?;
    Ok(list.items.len())
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
pub fn lock_twin(
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

/// Waits until the twin's scheduler has nothing in its active and backoff queues and the
/// number of unbound pods has stopped changing, at least `min` after the last change. Returns
/// whether it settled within `timeout` (else the report says so).
async fn settle(
    client: &Client,
    info: &ClusterInfo,
    min: Duration,
    timeout: Duration,
) -> Result<bool> {
    let start = Instant::now();
    tokio::time::sleep(min).await;
    let mut quiet = 0;
    let mut last = unbound_count(client).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let busy = cluster::scheduler_busy(info).await;
        let now = unbound_count(client).await?;
        if busy == Some(0) && now == last {
            quiet += 1;
            if quiet >= 3 {
                return Ok(true);
            }
        } else {
            quiet = 0;
        }
        last = now;
        if start.elapsed() > timeout {
            return Ok(false);
        }
    }
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
    source: &Source,
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
    source: &Source,
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

/// What [`build_and_try`] copies into the twin and tries there (chosen by [`run`]).
struct Trial<'a> {
    source: &'a Source,
    relabels: &'a [Relabel],
    /// The GPUs of each relabelled node, by node name.
    hardware: &'a BTreeMap<String, predict::Inferred>,
    /// The source's GPU nodes (and relabelled nodes) to copy.
    twin_nodes: &'a [&'a NodeInfo],
    /// Non-terminal pods bound to `twin_nodes`.
    bound: &'a [&'a PodInfo],
    /// Pending pods that ask for an `nvidia.com/` name.
    pending: &'a [&'a PodInfo],
    /// Pending VMs created as VMIs in a twin with KubeVirt (empty without).
    vmis: &'a [&'a PodInfo],
}

/// The running twin: its API client, its cluster facts and the run's options.
struct Twin<'a> {
    client: &'a Client,
    info: &'a ClusterInfo,
    opts: &'a Options,
}

/// Twin pod key (`namespace/twin name`) → the source's pending pod.
type PendingByTwin<'a> = BTreeMap<String, &'a PodInfo>;

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
    let inputs = explain::Inputs {
        nodes: Some(&nodes_after),
        pods: Some(&pods_after),
        kubevirt: kubevirt_cr,
        cluster_policy: policy,
        dra: None,
        operand_pods: None,
    };
    let (now_scheduled, mut still_pending) =
        pending_outcome(&pods_after, &pending_by_twin, &placed_before, inputs)?;
    still_pending.extend(kubevirt::refused(twin.client, &vmis_by_twin, &pods_after, inputs).await?);
    let mut disrupted = disrupted_pods(&changes, &pods_after, &pending_by_twin);
    // Whether a VM owns a disrupted VMI is the source's to say (the twin has no VMs).
    for d in &mut disrupted {
        if d.pod.vmi.is_some() {
            d.pod.vmi_owned_by_vm = trial
                .source
                .pods
                .iter()
                .find(|p| p.key() == d.pod.pod)
                .and_then(|p| p.vmi_owned_by_vm);
        }
    }
    // The inventory before (the source) and after (the twin).
    let source = trial.source;
    let inv_before = inventory::build(&source.nodes, &source.pods, &source.policy)?;
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
    })
}

/// Copies the trial's namespaces (with their default service account: the ServiceAccount
/// admission plugin refuses a pod until it exists), nodes (waiting until kwok reports them
/// Ready), bound pods and pending pods into the twin, in that order; with KubeVirt, then
/// the source's permittedHostDevices and the pending VMs as VMIs
/// ([`kubevirt::vmi_object`]). Returns the pending pods and the VMIs by their twin key.
async fn copy_source<'a>(
    client: &Client,
    trial: &Trial<'a>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(PendingByTwin<'a>, PendingByTwin<'a>)> {
    let namespaces: BTreeSet<&str> = trial
        .bound
        .iter()
        .chain(trial.pending)
        .chain(trial.vmis)
        .map(|p| p.namespace.as_str())
        .collect();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    create_all(
        ns_api,
        namespaces
            .iter()
            .map(|n| serde_json::json!({"metadata": {"name": n}}))
            .collect(),
        "namespace",
    )
    .await?;
    for ns in &namespaces {
        accounts::ensure_default_service_account(client, ns).await?;
    }
    progress(&format!("creating {} nodes", trial.twin_nodes.len()));
    let node_api: Api<Node> = Api::all(client.clone());
    create_all(
        node_api,
        trial
            .twin_nodes
            .iter()
            .map(|n| objects::node_object(n))
            .collect(),
        "node",
    )
    .await?;
    let names: BTreeSet<String> = trial.twin_nodes.iter().map(|n| n.name.clone()).collect();
    progress("waiting for kwok to report the nodes Ready and their not-ready taint to go");
    wait_nodes(client, &names, Duration::from_secs(120)).await?;
    progress(&format!("creating {} bound pods", trial.bound.len()));
    create_pods(
        client,
        trial
            .bound
            .iter()
            .map(|p| objects::pod_object(p, true))
            .collect(),
    )
    .await?;
    let pending_by_twin = pending_by_twin_key(trial.pending);
    progress(&format!(
        "creating {} pending pod(s); the twin's scheduler tries them as the cluster is",
        trial.pending.len()
    ));
    create_pods(
        client,
        trial
            .pending
            .iter()
            .map(|p| objects::pod_object(p, false))
            .collect(),
    )
    .await?;
    let mut vmis = PendingByTwin::new();
    if !trial.vmis.is_empty() {
        progress("writing the source's permittedHostDevices into the twin's KubeVirt CR");
        kubevirt::configure(client, trial.source.kubevirt.as_ref()).await?;
        kubevirt::wait_published(client, Duration::from_secs(60)).await?;
        progress(&format!(
            "creating {} VMI(s); virt-controller renders their launcher pods",
            trial.vmis.len()
        ));
        let resource = virt::resource("VirtualMachineInstance", "virtualmachineinstances");
        for p in trial.vmis {
            let name = kubevirt::vmi_name(p).unwrap_or(p.name.as_str());
            let obj: kube::api::DynamicObject =
                serde_json::from_value(kubevirt::vmi_object(p, name))
                    .map_err(|e| Error::failed("the twin's VMI object", e))?;
            Api::namespaced_with(client.clone(), &p.namespace, &resource)
                .create(&PostParams::default(), &obj)
                .await
                .map_err(|e| api_error(&format!("create VMI {}/{name}", p.namespace), &e))?;
            vmis.insert(format!("{}/{name}", p.namespace), *p);
        }
    }
    Ok((pending_by_twin, vmis))
}

/// The pending pods by the key their copy has in the twin (`namespace/twin name`).
fn pending_by_twin_key<'a>(pending: &[&'a PodInfo]) -> PendingByTwin<'a> {
    pending
        .iter()
        .map(|p| (format!("{}/{}", p.namespace, objects::pod_name(p)), *p))
        .collect()
}

/// Waits for the twin's scheduler to settle ([`settle`]); when it has not within the
/// run's timeout, adds a note saying so, `when` ending the sentence.
async fn settle_or_note(
    twin: &Twin<'_>,
    min: Duration,
    when: &str,
    notes: &mut Vec<String>,
) -> Result<()> {
    if !settle(twin.client, twin.info, min, twin.opts.settle_timeout).await? {
        notes.push(format!(
            "the twin's scheduler had not settled {} s {when}",
            twin.opts.settle_timeout.as_secs()
        ));
    }
    Ok(())
}

/// The copied pending pods the twin's scheduler bound before any relabel (they would not
/// have waited in the cluster), with their node.
fn placed_as_is(pods: &[PodInfo], pending_by_twin: &PendingByTwin<'_>) -> Vec<Placed> {
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

/// The merge patch of `metadata.labels` that turns `before`'s labels into `after`'s:
/// `null` for a label removed, the new value for one added or changed.
fn label_patch(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut patch = serde_json::Map::new();
    for k in before.keys() {
        if !after.contains_key(k) {
            patch.insert(k.clone(), serde_json::Value::Null);
        }
    }
    for (k, v) in after {
        if before.get(k) != Some(v) {
            patch.insert(k.clone(), serde_json::json!(v));
        }
    }
    patch
}

/// Applies one relabel to the twin: the node's labels, and (when they change) the names it
/// advertises by gpuwl's model, written to its status capacity and allocatable. Returns the
/// change with `advertised_after` still empty (read back later).
async fn relabel_node(
    node_api: &Api<Node>,
    trial: &Trial<'_>,
    r: &Relabel,
    policy: Option<&ClusterPolicy>,
) -> Result<NodeChange> {
    let before = trial
        .source
        .nodes
        .iter()
        .find(|n| n.name == r.node)
        .expect("validated above");
    let inferred = &trial.hardware[&r.node];
    let after_labels = predict::relabelled(before, r.config, r.vgpu_type.as_deref());
    let (now, mut node_notes) = predict::advertised(&after_labels, &inferred.hw, policy);
    let patch = label_patch(&before.labels, &after_labels.labels);
    node_api
        .patch(
            &r.node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": patch}})),
        )
        .await
        .map_err(|e| api_error(&format!("relabel node {} in the twin", r.node), &e))?;
    let alloc = before
        .allocatable
        .clone()
        .unwrap_or(before.capacity.clone());
    if let Some(want) = gpusim::status_update(&before.capacity, &alloc, &now) {
        node_api
            .patch_status(
                &r.node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({
                    "status": {"capacity": &want, "allocatable": &want}
                })),
            )
            .await
            .map_err(|e| {
                api_error(
                    &format!("update the status of node {} in the twin", r.node),
                    &e,
                )
            })?;
    }
    if now.is_empty() {
        node_notes.push("advertises no GPU name after the relabel".to_string());
    }
    Ok(NodeChange {
        relabel: r.clone(),
        from: before.label(LABEL_KEY).map(str::to_string),
        advertised_before: predict::listed(before),
        advertised_after: BTreeMap::new(),
        hardware: inferred.how.clone(),
        notes: node_notes,
    })
}

/// What became of the copied pending pods the scheduler had not bound before the relabel:
/// bound now (with their node), or still pending (explained on the twin's state).
fn pending_outcome(
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
fn disrupted_pods(
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
        crate::input::pods::from_object(&serde_json::json!({
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
    fn relabels_are_checked_against_the_source_before_anything_starts() {
        let mut gpu = NodeInfo::named("lab-node-1");
        gpu.capacity
            .insert("nvidia.com/GA102GL_A10".into(), "2".into());
        gpu.allocatable = Some(gpu.capacity.clone());
        let source = Source {
            nodes: vec![gpu, NodeInfo::named("cpu-1")],
            pods: vec![],
            policy: PolicyStatus::not_read(),
            kubevirt: None,
            origin: "files".into(),
        };
        let relabel = |s: &str| -> Relabel { s.parse().unwrap() };
        let hw = relabelled_hardware(&source, &[relabel("lab-node-1=container")]).unwrap();
        assert_eq!(hw.keys().collect::<Vec<_>>(), ["lab-node-1"]);
        assert!(!hw["lab-node-1"].how.is_empty());
        let e = relabelled_hardware(&source, &[relabel("lab-node-2=container")]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("relabel: no node \"lab-node-2\" in the files"),
            "{e}"
        );
        assert!(e.to_string().contains("lab-node-1"), "{e}");
        let e = relabelled_hardware(&source, &[relabel("cpu-1=container")]).unwrap_err();
        assert!(
            e.to_string()
                .contains("relabel cpu-1: the node's GPUs cannot be worked out"),
            "{e}"
        );
    }

    #[test]
    fn label_patch_removes_with_null_and_sets_only_what_changed() {
        let before = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("gone".to_string(), "x".to_string()),
            ("same".to_string(), "s".to_string()),
        ]);
        let after = BTreeMap::from([
            ("a".to_string(), "2".to_string()),
            ("new".to_string(), "n".to_string()),
            ("same".to_string(), "s".to_string()),
        ]);
        assert_eq!(
            serde_json::Value::Object(label_patch(&before, &after)),
            serde_json::json!({"a": "2", "gone": null, "new": "n"})
        );
        assert!(label_patch(&before, &before).is_empty());
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

/// The twin's write path against the in-memory API server of the fast tier
/// (tests/it/fake_api.rs, docs/testing.md): what is created, in what order, with what.
#[cfg(test)]
mod loader_tests {
    use super::*;
    use serde_json::json;

    use crate::testing::fake_api;

    const NODES: &str = r#"{"kind": "List", "apiVersion": "v1", "items": [
      {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.workload.config": "vm-passthrough",
         "nvidia.com/gpu.present": "true"}},
       "spec": {"taints": [{"key": "gpu", "value": "vm", "effect": "NoSchedule"}]},
       "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/GA102GL_A10": "2"},
                  "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/GA102GL_A10": "2"}}},
      {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "cpu-only"},
       "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}]}"#;

    const PODS: &str = r#"{"kind": "List", "apiVersion": "v1", "items": [
      {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "vm-1", "namespace": "vms"},
       "spec": {"nodeName": "gpu-a", "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]},
       "status": {"phase": "Running"}},
      {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "vm-2", "namespace": "vms2"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/GA102GL_A10": "2"}}}]},
       "status": {"phase": "Pending"}},
      {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "web"},
       "spec": {"nodeName": "cpu-only", "containers": [{"name": "c"}]},
       "status": {"phase": "Running"}}]}"#;

    #[test]
    fn the_twin_copies_namespaces_then_ready_nodes_then_bound_then_pending_pods() {
        let mut nodes = Vec::new();
        crate::input::dump::read_from(NODES.as_bytes(), "nodes.json", |n| nodes.push(n)).unwrap();
        let pods =
            crate::input::pods::read_pods_str(PODS, "pods.json").unwrap_or_else(|e| panic!("{e}"));
        let source = Source {
            nodes,
            pods,
            policy: PolicyStatus::not_read(),
            kubevirt: None,
            origin: "test".into(),
        };
        let copied: BTreeSet<&str> = ["gpu-a"].into_iter().collect();
        let (bound, pending, left_out) = select_pods(&source, &copied);
        assert!(left_out.is_empty(), "{left_out:?}");
        let twin_nodes: Vec<&NodeInfo> =
            source.nodes.iter().filter(|n| n.name == "gpu-a").collect();
        let hardware = BTreeMap::new();
        let trial = Trial {
            source: &source,
            relabels: &[],
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &[],
        };
        let api = fake_api::FakeApi::new();
        api.ready_nodes();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_rt = rt.enter();
        let client = api.client();
        let mut lines = Vec::new();
        let (by_key, vmis) = rt
            .block_on(copy_source(&client, &trial, &mut |l: &str| {
                lines.push(l.to_owned())
            }))
            .unwrap();
        assert_eq!(by_key.keys().collect::<Vec<_>>(), ["vms2/vm-2"]);
        assert!(vmis.is_empty(), "no VMI without KubeVirt in the twin");
        let writes = api.writes();
        // Namespaces first (both pods' namespaces, not the CPU pod's), each with its
        // default ServiceAccount, then the GPU node, then the bound pod, then the pending one.
        let pos = |w: &str| {
            writes
                .iter()
                .position(|x| x == w)
                .unwrap_or_else(|| panic!("{w} not in {writes:?}"))
        };
        assert_eq!(
            writes
                .iter()
                .filter(|w| *w == "POST /api/v1/namespaces")
                .count(),
            2,
            "{writes:?}"
        );
        assert!(
            pos("POST /api/v1/namespaces") < pos("POST /api/v1/nodes"),
            "{writes:?}"
        );
        assert!(
            pos("POST /api/v1/nodes") < pos("POST /api/v1/namespaces/vms/pods"),
            "{writes:?}"
        );
        assert!(
            pos("POST /api/v1/namespaces/vms/pods") < pos("POST /api/v1/namespaces/vms2/pods"),
            "{writes:?}"
        );
        assert!(
            !writes
                .iter()
                .any(|w| w.contains("cpu-only") || w.contains("/web/")),
            "{writes:?}"
        );
        // The node keeps its taint and GPU capacity; the bound pod its node; the pending
        // pod has none.
        let node = api.get("/api/v1/nodes/gpu-a").unwrap();
        assert_eq!(node["spec"]["taints"][0]["key"], "gpu");
        assert_eq!(
            node["metadata"]["labels"]["nvidia.com/gpu.workload.config"],
            "vm-passthrough"
        );
        let requests = api.requests();
        let created = |path: &str| {
            requests
                .iter()
                .find(|r| r.method == "POST" && r.path == path)
                .map(|r| r.body.clone())
                .unwrap()
        };
        let node_sent = created("/api/v1/nodes");
        assert_eq!(
            node_sent["status"]["allocatable"]["nvidia.com/GA102GL_A10"], "2",
            "{node_sent}"
        );
        let vm1 = created("/api/v1/namespaces/vms/pods");
        assert_eq!(vm1["spec"]["nodeName"], "gpu-a", "{vm1}");
        assert_eq!(
            vm1["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/GA102GL_A10"],
            "1"
        );
        let vm2 = created("/api/v1/namespaces/vms2/pods");
        assert!(vm2["spec"]["nodeName"].is_null(), "{vm2}");
        assert!(lines.iter().any(|l| l == "creating 1 nodes"), "{lines:?}");
    }

    /// The source of these tests: [`NODES`] and [`PODS`] read as a dump is.
    fn source() -> Source {
        let mut nodes = Vec::new();
        crate::input::dump::read_from(NODES.as_bytes(), "nodes.json", |n| nodes.push(n)).unwrap();
        Source {
            nodes,
            pods: crate::input::pods::read_pods_str(PODS, "pods.json").unwrap(),
            policy: PolicyStatus::not_read(),
            kubevirt: None,
            origin: "test".into(),
        }
    }

    /// Runs `f` with the trial [`run`] would make of `source` for the relabels given (the
    /// GPU node `gpu-a` copied, `vms/vm-1` bound, `vms2/vm-2` pending).
    fn with_trial<T>(source: &Source, relabels: &[Relabel], f: impl FnOnce(&Trial<'_>) -> T) -> T {
        let copied: BTreeSet<&str> = ["gpu-a"].into_iter().collect();
        let (bound, pending, _) = select_pods(source, &copied);
        let twin_nodes: Vec<&NodeInfo> =
            source.nodes.iter().filter(|n| n.name == "gpu-a").collect();
        let hardware = relabelled_hardware(source, relabels).unwrap();
        f(&Trial {
            source,
            relabels,
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &[],
        })
    }

    fn copy(api: &fake_api::FakeApi, trial: &Trial<'_>) -> Result<Vec<String>> {
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let mut lines = Vec::new();
        rt.block_on(copy_source(&client, trial, &mut |l: &str| {
            lines.push(l.to_owned())
        }))
        .map(|(by_key, _)| by_key.keys().cloned().collect())
    }

    #[test]
    fn objects_already_in_the_twin_are_taken_as_created() {
        let source = source();
        let api = fake_api::FakeApi::new();
        // A namespace, its service account and the node exist (a run that stopped half-way
        // through, a controller that was quicker): the creates answer 409 AlreadyExists.
        api.insert(
            "/api/v1",
            "namespaces",
            json!({"metadata": {"name": "vms"}}),
        );
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "vms"}}),
        );
        api.insert(
            "/api/v1",
            "nodes",
            json!({"metadata": {"name": "gpu-a", "labels": {"kept": "yes"}},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let pending = with_trial(&source, &[], |t| copy(&api, t)).unwrap();
        assert_eq!(pending, ["vms2/vm-2"]);
        let refused: Vec<(String, String)> = api
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| {
                (
                    r.path.clone(),
                    r.body["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for want in [
            ("/api/v1/namespaces", "vms"),
            ("/api/v1/namespaces/vms/serviceaccounts", "default"),
            ("/api/v1/nodes", "gpu-a"),
        ] {
            assert!(
                refused
                    .iter()
                    .any(|(p, n)| (p.as_str(), n.as_str()) == want),
                "{want:?} not asked: {refused:?}"
            );
        }
        // A create is never a replace: the node there is kept as it was.
        let node = api.get("/api/v1/nodes/gpu-a").unwrap();
        assert_eq!(node["metadata"]["labels"], json!({"kept": "yes"}));
        // The rest went in.
        assert!(api.get("/api/v1/namespaces/vms2").is_some());
        assert!(api.get("/api/v1/namespaces/vms/pods/vm-1").is_some());
        assert!(api.get("/api/v1/namespaces/vms2/pods/vm-2").is_some());
    }

    #[test]
    fn a_refused_create_stops_the_copy_with_the_object_named() {
        let source = source();
        for (path, code, want, not_after) in [
            (
                "/nodes",
                403,
                "create node gpu-a in the twin: forbidden",
                "/api/v1/namespaces/vms/pods",
            ),
            (
                "/namespaces/vms2/pods",
                422,
                "create pod vm-2 in the twin: scripted failure of /api/v1/namespaces/vms2/pods (422)",
                "",
            ),
            (
                "/namespaces/vms/serviceaccounts",
                403,
                "create serviceaccount vms/default",
                "/api/v1/nodes",
            ),
        ] {
            let api = fake_api::FakeApi::new();
            api.ready_nodes();
            api.fail(http::Method::POST, path, code, 1);
            let err = with_trial(&source, &[], |t| copy(&api, t))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
            if !not_after.is_empty() {
                assert!(
                    !api.writes().iter().any(|w| w.ends_with(not_after)),
                    "{path}: went on to {not_after}: {:?}",
                    api.writes()
                );
            }
        }
    }

    #[test]
    fn the_copy_waits_for_the_nodes_to_be_ready_and_untainted() {
        let api = fake_api::FakeApi::new();
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let names: BTreeSet<String> = ["gpu-a".to_string(), "gpu-b".to_string()].into();
        // Neither node Ready: the wait gives up after its timeout, counting those that are.
        api.insert("/api/v1", "nodes", json!({"metadata": {"name": "gpu-a"}}));
        api.insert(
            "/api/v1",
            "nodes",
            json!({"metadata": {"name": "gpu-b"},
                   "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let started = Instant::now();
        let err = rt
            .block_on(wait_nodes(&client, &names, Duration::from_millis(300)))
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(
            err,
            "the twin's nodes are not ready after 0 s (0 of 2): kwok or kube-controller-manager did not act"
        );
        // kwok reports gpu-a Ready, kube-controller-manager lifts gpu-b's taint: the wait
        // ends.
        let controllers = api.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            controllers.modify("/api/v1/nodes/gpu-a", |n| {
                n["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
            });
            std::thread::sleep(Duration::from_millis(200));
            controllers.modify("/api/v1/nodes/gpu-b", |n| n["spec"]["taints"] = json!([]));
        });
        rt.block_on(wait_nodes(&client, &names, Duration::from_secs(10)))
            .unwrap();
        t.join().unwrap();
        assert!(api.writes().is_empty(), "{:?}", api.writes());
    }

    #[test]
    fn the_pods_keep_their_placement_and_only_pending_ones_lose_their_node() {
        let pods = r#"{"kind": "List", "apiVersion": "v1", "items": [
          {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "train", "namespace": "ml",
             "labels": {"app": "train"}},
           "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A10"},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                      {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["container"]}]}]}}},
                    "tolerations": [{"key": "gpu", "operator": "Equal", "value": "vm", "effect": "NoSchedule"}],
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Pending"}}]}"#;
        let mut source = source();
        source.pods = crate::input::pods::read_pods_str(pods, "pods.json").unwrap();
        let api = fake_api::FakeApi::new();
        api.ready_nodes();
        let pending = with_trial(&source, &[], |t| copy(&api, t)).unwrap();
        assert_eq!(pending, ["ml/train"]);
        let sent = api
            .requests()
            .into_iter()
            .find(|r| r.method == "POST" && r.path == "/api/v1/namespaces/ml/pods")
            .unwrap()
            .body;
        let spec = &sent["spec"];
        assert!(spec["nodeName"].is_null(), "{sent}");
        assert_eq!(
            spec["nodeSelector"],
            json!({"nvidia.com/gpu.product": "NVIDIA-A10"})
        );
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0],
            json!({"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["container"]})
        );
        assert_eq!(
            spec["tolerations"],
            json!([{"key": "gpu", "operator": "Equal", "value": "vm", "effect": "NoSchedule"}])
        );
        assert_eq!(
            spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "1"
        );
        assert_eq!(spec["containers"][0]["image"], objects::TWIN_IMAGE);
        // The twin's copy is what the scheduler sees: stored as sent.
        assert_eq!(
            api.get("/api/v1/namespaces/ml/pods/train").unwrap()["spec"]["tolerations"],
            spec["tolerations"]
        );
    }

    #[test]
    fn unbound_pods_are_counted_by_the_api_servers_field_selector() {
        let api = fake_api::FakeApi::new();
        for (ns, name, node) in [
            ("a", "p-1", None),
            ("a", "p-2", Some("n-1")),
            ("b", "p-3", None),
        ] {
            let mut spec = json!({"containers": [{"name": "c"}]});
            if let Some(n) = node {
                spec["nodeName"] = json!(n);
            }
            api.insert(
                "/api/v1",
                "pods",
                json!({"metadata": {"name": name, "namespace": ns}, "spec": spec}),
            );
        }
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        assert_eq!(rt.block_on(unbound_count(&client)).unwrap(), 2);
        let list = api.requests().pop().unwrap();
        assert_eq!(list.path, "/api/v1/pods");
        assert!(
            list.query.contains("fieldSelector=spec.nodeName%3D"),
            "{}",
            list.query
        );
        api.fail(http::Method::GET, "/api/v1/pods", 403, 1);
        let err = rt.block_on(unbound_count(&client)).unwrap_err().to_string();
        assert!(err.contains("list the twin's pending pods"), "{err}");
    }

    /// A twin's facts whose scheduler serves its metrics on `port`.
    fn info(port: u16) -> crate::cluster::ClusterInfo {
        crate::cluster::ClusterInfo {
            name: "twin-test".into(),
            apiserver_port: 0,
            etcd_port: 0,
            etcd_peer_port: 0,
            controller_manager_port: 0,
            scheduler_port: port,
            kwok_port: 0,
            bin_dir: "/nonexistent".into(),
            kubernetes_version: String::new(),
            gpu_operator_port: 0,
            kubevirt_api_port: 0,
            kubevirt_controller_port: 0,
            kueue_webhook_port: 0,
            kueue_health_port: 0,
            env: Vec::new(),
        }
    }

    const SCHEDULER_METRICS: &str = "# HELP scheduler_pending_pods Number of pending pods, by the queue type.\n\
        # TYPE scheduler_pending_pods gauge\n\
        scheduler_pending_pods{queue=\"active\"} ACTIVE\n\
        scheduler_pending_pods{queue=\"backoff\"} 0\n\
        scheduler_pending_pods{queue=\"gated\"} 4\n\
        scheduler_pending_pods{queue=\"unschedulable\"} 3\n";

    #[test]
    fn the_scheduler_settles_when_its_queues_are_empty_and_the_unbound_count_stays() {
        // Four twins at once (each settle takes at least three looks 400 ms apart): one
        // idle, one with a pod in the active queue, one whose metrics cannot be read, one
        // whose unbound pods keep changing.
        let twins: Vec<(fake_api::FakeApi, crate::testing::Https)> = (0..4)
            .map(|_| {
                let api = fake_api::FakeApi::new();
                api.insert(
                    "/api/v1",
                    "pods",
                    json!({"metadata": {"name": "p", "namespace": "a"},
                           "spec": {"containers": [{"name": "c"}]}}),
                );
                let https = crate::testing::https(&api);
                (api, https)
            })
            .collect();
        // Pods in the unschedulable and gated queues wait for an event: not work.
        twins[0]
            .0
            .text("/metrics", 200, &SCHEDULER_METRICS.replace("ACTIVE", "0"));
        twins[1]
            .0
            .text("/metrics", 200, &SCHEDULER_METRICS.replace("ACTIVE", "1"));
        twins[2].0.text("/metrics", 500, "no");
        twins[3]
            .0
            .text("/metrics", 200, &SCHEDULER_METRICS.replace("ACTIVE", "0"));
        let creating = twins[3].0.clone();
        let creator = std::thread::spawn(move || {
            for i in 0..6 {
                std::thread::sleep(Duration::from_millis(250));
                creating.insert(
                    "/api/v1",
                    "pods",
                    json!({"metadata": {"name": format!("new-{i}"), "namespace": "a"},
                           "spec": {"containers": [{"name": "c"}]}}),
                );
            }
        });
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let clients: Vec<Client> = twins.iter().map(|(api, _)| api.client()).collect();
        let infos: Vec<crate::cluster::ClusterInfo> =
            twins.iter().map(|(_, https)| info(https.port)).collect();
        let started = Instant::now();
        let timeout = [10_000, 1000, 1000, 1000].map(Duration::from_millis);
        let settled: Vec<bool> = rt
            .block_on(futures::future::join_all((0..4).map(|i| {
                settle(&clients[i], &infos[i], Duration::ZERO, timeout[i])
            })))
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        creator.join().unwrap();
        assert_eq!(settled, [true, false, false, false]);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        for (i, (api, _)) in twins.iter().enumerate() {
            let looks = api
                .requests()
                .iter()
                .filter(|r| r.path == "/metrics")
                .count();
            // The idle one: three quiet looks; the others look until the timeout (three
            // looks 400 ms apart pass 1 s).
            if i == 0 {
                assert_eq!(looks, 3, "twin {i}");
            } else {
                assert!((2..=4).contains(&looks), "twin {i}: {looks} looks");
            }
        }
    }

    #[test]
    fn a_relabel_patches_the_labels_then_the_advertised_names() {
        let mut source = source();
        // gpu-a runs the passthrough operands (its deploy label), the product is known.
        let node = &mut source.nodes[0];
        node.labels.insert(
            "nvidia.com/gpu.deploy.sandbox-device-plugin".into(),
            "true".into(),
        );
        node.labels
            .insert("nvidia.com/gpu.product".into(), "NVIDIA-A10".into());
        let relabels = ["gpu-a=container".parse::<Relabel>().unwrap()];
        let api = fake_api::FakeApi::new();
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        api.insert("/api/v1", "nodes", objects::node_object(&source.nodes[0]));
        let node_api: Api<Node> = Api::all(client.clone());
        let change = with_trial(&source, &relabels, |t| {
            rt.block_on(relabel_node(&node_api, t, &relabels[0], None))
        })
        .unwrap();
        assert_eq!(
            api.writes(),
            [
                "PATCH /api/v1/nodes/gpu-a",
                "PATCH /api/v1/nodes/gpu-a/status"
            ]
        );
        let requests = api.requests();
        let writes: Vec<&fake_api::Recorded> =
            requests.iter().filter(|r| r.method == "PATCH").collect();
        assert_eq!(writes[0].content_type, "application/merge-patch+json");
        // Only what changes: the new config, the passthrough operand's deploy label gone.
        assert_eq!(
            writes[0].body,
            json!({"metadata": {"labels": {
                "nvidia.com/gpu.workload.config": "container",
                "nvidia.com/gpu.deploy.sandbox-device-plugin": null
            }}})
        );
        // The container plugin's name for both GPUs; the passthrough name kept at 0, as
        // the kubelet keeps a name whose plugin left.
        let want = json!({"nvidia.com/GA102GL_A10": "0", "nvidia.com/gpu": "2"});
        assert_eq!(
            writes[1].body,
            json!({"status": {"capacity": want, "allocatable": want}})
        );
        let stored = api.get("/api/v1/nodes/gpu-a").unwrap();
        assert_eq!(
            stored["metadata"]["labels"]["nvidia.com/gpu.workload.config"],
            "container"
        );
        assert!(
            stored["metadata"]["labels"]
                .get("nvidia.com/gpu.deploy.sandbox-device-plugin")
                .is_none()
        );
        assert_eq!(stored["status"]["capacity"]["nvidia.com/gpu"], "2");
        assert_eq!(stored["status"]["capacity"]["cpu"], "16");
        assert_eq!(change.from.as_deref(), Some("vm-passthrough"));
        assert_eq!(
            change.advertised_before,
            BTreeMap::from([("nvidia.com/GA102GL_A10".to_string(), 2)])
        );
        assert!(change.advertised_after.is_empty(), "read back later");

        // Relabelled again to what it now is: the labels are patched (nothing changes), the
        // status is not written.
        let before = api.writes().len();
        let again = relabels.clone();
        let mut now = source.nodes[0].clone();
        now.labels = predict::relabelled(&now, WorkloadConfig::Container, None).labels;
        now.capacity.insert("nvidia.com/gpu".into(), "2".into());
        now.capacity
            .insert("nvidia.com/GA102GL_A10".into(), "0".into());
        now.allocatable = Some(now.capacity.clone());
        source.nodes[0] = now;
        with_trial(&source, &again, |t| {
            rt.block_on(relabel_node(&node_api, t, &again[0], None))
        })
        .unwrap();
        assert_eq!(api.writes()[before..], ["PATCH /api/v1/nodes/gpu-a"]);

        // A node the twin lacks: the API's 404, with the node named.
        api.remove("/api/v1/nodes/gpu-a");
        let err = with_trial(&source, &again, |t| {
            rt.block_on(relabel_node(&node_api, t, &again[0], None))
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("relabel node gpu-a in the twin"), "{err}");
        assert!(err.contains("not found"), "{err}");
    }

    #[test]
    fn pending_vms_become_vmis_under_the_sources_permitted_list() {
        let vmis = r#"{"kind": "List", "apiVersion": "v1", "items": [
          {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vm-ok", "namespace": "vms"},
           "spec": {"nodeSelector": {"nvidia.com/gpu.workload.config": "vm-passthrough"},
                    "domain": {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/GA102GL_A10"}]},
                               "resources": {"requests": {"memory": "2Gi"}}}},
           "status": {"phase": "Pending"}},
          {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vm-no", "namespace": "vms"},
           "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/TU104GL_T4"}]}}},
           "status": {"phase": "Pending"}}]}"#;
        let mut source = source();
        source.pods = crate::input::pods::read_pods_str(vmis, "vmis.json").unwrap();
        source.kubevirt = Some(crate::model::kubevirt::PermittedHostDevices {
            source: crate::model::kubevirt::HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: Some(false),
            pci_host_devices: vec![crate::model::kubevirt::PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
        });
        let copied: BTreeSet<&str> = ["gpu-a"].into_iter().collect();
        let (bound, pending, left_out) = select_pods(&source, &copied);
        assert!(bound.is_empty() && left_out.is_empty(), "{left_out:?}");
        // Without KubeVirt in the twin, a VMI with no launcher pod is left out, never
        // placed as a plain pod; a pending launcher pod stays a pod.
        let (none, pods, left) = split_vmis(pending.clone(), false);
        assert!(none.is_empty());
        assert!(pods.iter().all(|p| !p.is_vm()), "{pods:?}");
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(
            left.iter()
                .all(|l| l.contains("with no launcher pod; KubeVirt decides")),
            "{left:?}"
        );
        let (vmis, pending, left) = split_vmis(pending, true);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(vmis.len(), 2);
        let twin_nodes: Vec<&NodeInfo> =
            source.nodes.iter().filter(|n| n.name == "gpu-a").collect();
        let hardware = BTreeMap::new();
        let trial = Trial {
            source: &source,
            relabels: &[],
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &vmis,
        };
        let api = fake_api::FakeApi::new();
        api.ready_nodes();
        api.insert(
            "/apis/kubevirt.io/v1",
            "kubevirts",
            json!({"metadata": {"name": "kubevirt", "namespace": "kubevirt"},
                   "spec": {"configuration": {"developerConfiguration": {"featureGates": []}}}}),
        );
        // Plays virt-handler's node publishing (the twin's emulation) once the node is there.
        let handler = api.clone();
        let published = std::thread::spawn(move || {
            while handler.get("/api/v1/nodes/gpu-a").is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let rt = crate::testing::rt();
            let _in_rt = rt.enter();
            rt.block_on(crate::cluster::kubevirt::publish_node(
                &handler.client(),
                "gpu-a",
            ))
            .unwrap();
        });
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let (by_key, vmis_by_twin) = rt
            .block_on(copy_source(&client, &trial, &mut |_: &str| {}))
            .unwrap();
        published.join().unwrap();
        assert!(by_key.is_empty());
        assert_eq!(
            vmis_by_twin.keys().collect::<Vec<_>>(),
            ["vms/vm-no", "vms/vm-ok"]
        );
        // The source's list in the CR (the rest of its configuration kept), then the VMIs.
        let cr = api
            .get("/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt")
            .unwrap();
        assert_eq!(
            cr["spec"]["configuration"]["permittedHostDevices"],
            json!({"pciHostDevices": [{"pciVendorSelector": "10DE:2236",
                                       "resourceName": "nvidia.com/GA102GL_A10",
                                       "externalResourceProvider": true}],
                   "mediatedDevices": []})
        );
        assert_eq!(
            cr["spec"]["configuration"]["developerConfiguration"],
            json!({"featureGates": []})
        );
        let writes = api.writes();
        let cr_patch = writes
            .iter()
            .position(|w| w == "PATCH /apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt")
            .unwrap();
        let vmi_posts: Vec<usize> = writes
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                *w == "POST /apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances"
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(vmi_posts.len(), 2, "{writes:?}");
        assert!(cr_patch < vmi_posts[0], "{writes:?}");
        let vm_ok = api
            .get("/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-ok")
            .unwrap();
        assert_eq!(
            vm_ok["spec"]["domain"]["devices"]["gpus"],
            json!([{"name": "gpu0", "deviceName": "nvidia.com/GA102GL_A10"}])
        );
        // The VMI's own memory, as written in the source (PodInfo::vm_memory): the twin's
        // virt-controller adds the launcher's overhead to it, as the cluster's would.
        assert_eq!(
            vm_ok["spec"]["domain"]["resources"]["requests"]["memory"],
            "2Gi"
        );
        assert_eq!(
            vm_ok["spec"]["nodeSelector"],
            json!({"nvidia.com/gpu.workload.config": "vm-passthrough"})
        );
        assert_eq!(
            vm_ok["metadata"]["labels"][objects::SOURCE_KIND_LABEL],
            "VirtualMachineInstance"
        );

        // Undecided until virt-controller acts: within the timeout, both keys come back.
        let undecided = rt
            .block_on(kubevirt::wait_rendered(
                &client,
                &vmis_by_twin,
                Duration::ZERO,
            ))
            .unwrap();
        assert_eq!(undecided, ["vms/vm-no", "vms/vm-ok"]);
        // virt-controller renders vm-ok's launcher pod and refuses vm-no.
        api.insert(
            "/api/v1",
            "pods",
            json!({"metadata": {"name": "virt-launcher-vm-ok-x7k2p", "namespace": "vms",
                                "labels": {"kubevirt.io": "virt-launcher"}},
                   "spec": {"containers": [{"name": "compute", "resources":
                       {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]},
                   "status": {"phase": "Pending"}}),
        );
        let message = "failed to render launch manifest: GPU nvidia.com/TU104GL_T4 is not permitted in permittedHostDevices configuration";
        api.modify(
            "/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-no",
            |v| {
                v["status"]["conditions"] = json!([{"type": "Synchronized", "status": "False",
                    "reason": "FailedCreate", "message": message}]);
            },
        );
        let undecided = rt
            .block_on(kubevirt::wait_rendered(
                &client,
                &vmis_by_twin,
                Duration::from_secs(5),
            ))
            .unwrap();
        assert!(undecided.is_empty(), "{undecided:?}");
        // The refused one is still pending with virt-controller's words; the rendered one
        // stands for its VMI through its launcher pod.
        let nodes = rt
            .block_on(crate::input::live::list_nodes(&client))
            .unwrap();
        let pods = rt.block_on(crate::input::pods::list_pods(&client)).unwrap();
        let inputs = explain::Inputs {
            nodes: Some(&nodes),
            pods: Some(&pods),
            kubevirt: source.kubevirt.as_ref(),
            cluster_policy: None,
            dra: None,
            operand_pods: None,
        };
        let refused = rt
            .block_on(kubevirt::refused(&client, &vmis_by_twin, &pods, inputs))
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].pod.pod, "vms/vm-no");
        assert_eq!(refused[0].scheduler_message.as_deref(), Some(message));
        assert_eq!(refused[0].cause_code, "not-permitted");
        let with = kubevirt::with_launchers(&by_key, &vmis_by_twin, &pods);
        assert_eq!(
            with.get("vms/virt-launcher-vm-ok-x7k2p").map(|p| p.key()),
            Some("vms/vm-ok".to_string())
        );
    }
}
