//! The sandbox-workload lab (docs/lab.md): eight steps
//! played on a cluster with a real kube-scheduler, leaving result files under a root `R`.
//!
//! 1. create `R/out`, `R/bin`, `R/k8s`, namespace `gpu-vm`; label the three nodes → `01-nodes.txt`
//! 2. the operands per workload config, the default and the enable flag → `operands.txt`
//! 3. advertise one GPU resource per node (status capacity + allocatable) → `03-resources.txt`
//! 4. `job-container` asks for `nvidia.com/gpu` → `04-container.txt`
//! 5. `vmi-passthrough` asks for the device-model name → `05-passthrough.txt`
//! 6. `vmi-vgpu` asks for the vGPU type → `06-placement.txt`
//! 7. `job-cross` asks a passthrough node for `nvidia.com/gpu` and stays Pending → `07-cross.txt`
//! 8. dump the nodes → `nodes.json`; write `bin/check-config.sh`; run it → `consistency.txt`
//!
//! Every value comes from [`gpuwl_core::model`] (label key, operands, default, enable flag,
//! resource names) or from the API (placements, phases, the scheduler's message).

pub mod dra;
pub mod files;
pub mod kubeops;
pub mod kubevirt;
pub mod kueue;
pub mod manifests;
pub mod operator;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use gpuwl_core::analysis::explain::Explanation;
use gpuwl_core::analysis::inventory::Inventory;

use crate::input::gather::{Kind, Named};
use files::LabDirs;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::pod::ObjectKind;
use gpuwl_core::model::resource::NVIDIA_PREFIX;
use gpuwl_core::model::workload::{DEFAULT_WORKLOAD, ENABLE_FLAG, LABEL_KEY, WorkloadConfig};
use gpuwl_core::text::esc;
use manifests::{LabPod, NAMESPACE};

/// The node names the lab labels, one per workload config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabNodes {
    /// Node labelled `container` (default `lab-node-0`).
    pub container: String,
    /// Node labelled `vm-passthrough` (default `lab-node-1`).
    pub passthrough: String,
    /// Node labelled `vm-vgpu` (default `lab-node-2`).
    pub vgpu: String,
}

impl Default for LabNodes {
    fn default() -> Self {
        LabNodes {
            container: "lab-node-0".into(),
            passthrough: "lab-node-1".into(),
            vgpu: "lab-node-2".into(),
        }
    }
}

impl LabNodes {
    /// The nodes of `--node CONFIG=NODE` flags over the defaults: each workload config at
    /// most once, and three different nodes in the end (a node with two roles would be
    /// labelled twice, listed twice in the result files, and the check would pass on
    /// two nodes).
    ///
    /// Errors: [`Error::Input`] naming the flag and what it clashes with.
    pub fn from_flags(flags: &[(WorkloadConfig, String)]) -> Result<LabNodes> {
        let mut nodes = LabNodes::default();
        let mut given: Vec<(WorkloadConfig, &str)> = Vec::new();
        for (wc, n) in flags {
            if let Some((_, first)) = given.iter().find(|(w, _)| w == wc) {
                return Err(Error::Input(format!(
                    "--node {wc}={}: {wc} is given twice (also --node {wc}={}); give each workload config once",
                    esc(n),
                    esc(first)
                )));
            }
            given.push((*wc, n));
            *nodes.node_mut(*wc) = n.clone();
        }
        for (i, a) in WorkloadConfig::ALL.iter().enumerate() {
            for b in &WorkloadConfig::ALL[i + 1..] {
                if nodes.node(*a) != nodes.node(*b) {
                    continue;
                }
                let how = |wc: &WorkloadConfig| match given.iter().any(|(w, _)| w == wc) {
                    true => format!("--node {wc}={}", esc(nodes.node(*wc))),
                    false => format!("{wc} (the default)"),
                };
                return Err(Error::Input(format!(
                    "--node: {} is both the {a} and the {b} node ({}, {}); each workload config needs a node of its own",
                    esc(nodes.node(*a)),
                    how(a),
                    how(b)
                )));
            }
        }
        Ok(nodes)
    }

    fn node_mut(&mut self, wc: WorkloadConfig) -> &mut String {
        match wc {
            WorkloadConfig::Container => &mut self.container,
            WorkloadConfig::VmPassthrough => &mut self.passthrough,
            WorkloadConfig::VmVgpu => &mut self.vgpu,
        }
    }

    /// The node assigned to `wc`.
    pub fn node(&self, wc: WorkloadConfig) -> &str {
        match wc {
            WorkloadConfig::Container => &self.container,
            WorkloadConfig::VmPassthrough => &self.passthrough,
            WorkloadConfig::VmVgpu => &self.vgpu,
        }
    }
}

/// One node of the lab plan: its workload config and the GPU resource it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Node name.
    pub node: String,
    /// The workload-config label value put on it.
    pub config: WorkloadConfig,
    /// Extended resource advertised, e.g. `nvidia.com/GA102GL_A10`.
    pub resource: String,
    /// Units advertised in both capacity and allocatable.
    pub amount: u32,
}

/// The lab's full plan: the three nodes (sorted by name) and the four pods (in step order).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Nodes, sorted by name.
    pub nodes: Vec<NodePlan>,
    /// Pods in the order steps 4-7 create them.
    pub pods: [LabPod; 4],
}

/// PCI device id of the NVIDIA A10 (vendor 10de), the GPU the lab's nodes pretend to have
/// (KubeVirt's `pciVendorSelector: "10DE:2236"` in NVIDIA's docs).
pub(crate) const A10_DEVICE_ID: u16 = 0x2236;

/// The vGPU type the lab's vGPU node advertises: half of the A10's 24 GB, two per GPU, as
/// in the default vGPU config (NVIDIA/vgpu-device-manager; facts sheet §3).
pub(crate) const A10_VGPU_TYPE: &str = "NVIDIA A10-12Q";

/// The resource a node of each workload config advertises in the lab (lab step 3), and
/// how many units, derived from the model: `nvidia.com/gpu` × 4 for container; the sandbox
/// device plugin's name for the A10 (its pci.ids name `GA102GL [A10]`, sanitized →
/// `nvidia.com/GA102GL_A10`) × 2 for passthrough; the vGPU type `NVIDIA A10-12Q` with
/// whitespace → `_` (`nvidia.com/NVIDIA_A10-12Q`, NVIDIA/kubevirt-gpu-device-plugin
/// `readVgpuIDFromFile`) × 4 for vGPU.
pub fn lab_resource(wc: WorkloadConfig) -> (String, u32) {
    use gpuwl_core::model::pciids;
    match wc {
        WorkloadConfig::Container => (format!("{NVIDIA_PREFIX}gpu"), 4),
        WorkloadConfig::VmPassthrough => {
            // As the plugin does: the sanitized pci.ids name, or the hex id when absent.
            let short = pciids::by_id(A10_DEVICE_ID)
                .map(|d| pciids::sanitize(d.pci_name))
                .unwrap_or_else(|| format!("{A10_DEVICE_ID:04x}"));
            (format!("{NVIDIA_PREFIX}{short}"), 2)
        }
        WorkloadConfig::VmVgpu => {
            let name: Vec<&str> = A10_VGPU_TYPE.split_whitespace().collect();
            (format!("{NVIDIA_PREFIX}{}", name.join("_")), 4)
        }
    }
}

impl Plan {
    /// The lab's plan (docs/lab.md) on `nodes`.
    pub fn new(nodes: &LabNodes) -> Plan {
        let mut ns: Vec<NodePlan> = WorkloadConfig::ALL
            .iter()
            .map(|&wc| {
                let (resource, amount) = lab_resource(wc);
                NodePlan {
                    node: nodes.node(wc).to_string(),
                    config: wc,
                    resource,
                    amount,
                }
            })
            .collect();
        ns.sort_by(|a, b| a.node.cmp(&b.node));
        let res = |wc| lab_resource(wc).0;
        let pod = |name: &str, file: &str, resource: String, sel: Option<WorkloadConfig>| LabPod {
            name: name.into(),
            file: file.into(),
            resource,
            count: 1,
            node_selector: sel
                .map(|wc| BTreeMap::from([(LABEL_KEY.to_string(), wc.as_str().to_string())]))
                .unwrap_or_default(),
        };
        Plan {
            nodes: ns,
            pods: [
                pod(
                    "job-container",
                    "pod-container.yaml",
                    res(WorkloadConfig::Container),
                    None,
                ),
                pod(
                    "vmi-passthrough",
                    "pod-passthrough.yaml",
                    res(WorkloadConfig::VmPassthrough),
                    None,
                ),
                pod(
                    "vmi-vgpu",
                    "pod-vgpu.yaml",
                    res(WorkloadConfig::VmVgpu),
                    None,
                ),
                pod(
                    "job-cross",
                    "pod-cross.yaml",
                    res(WorkloadConfig::Container),
                    Some(WorkloadConfig::VmPassthrough),
                ),
            ],
        }
    }
}

/// Where the lab runs.
#[derive(Debug, Clone)]
pub enum Target {
    /// The local control plane of this name (brought up when not running); lab nodes are
    /// created as simulated nodes.
    Local {
        /// Cluster name, `gpuwl` by default.
        cluster: String,
        /// How long to wait for one API response.
        request_timeout: std::time::Duration,
    },
    /// An existing cluster reached through a kubeconfig; the named nodes must exist.
    Kubeconfig(crate::input::live::ClusterArgs),
}

/// Everything `gpuwl lab` needs.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Lab root `R`.
    pub root: PathBuf,
    /// Where to run.
    pub target: Target,
    /// Which nodes get which label.
    pub nodes: LabNodes,
    /// Stop the local control plane at the end (local target only).
    pub down: bool,
    /// Absolute path of the gpuwl binary `bin/check-config.sh` calls.
    pub gpuwl_bin: PathBuf,
    /// After the eight steps, the ninth: the same GPUs as DRA devices ([`dra`]).
    pub dra: bool,
    /// Run the real GPU Operator on the local control plane and observe steps 2 and 3
    /// ([`operator`]) instead of writing them from the model (local target only).
    pub operator: bool,
    /// Run KubeVirt's virt-api and virt-controller on the local control plane and play
    /// steps 5-7 with real VMIs too ([`kubevirt`]), after each step's stand-in pod (local
    /// target only).
    pub kubevirt: bool,
    /// Run Kueue's manager on the local control plane and, after the eight steps (and the
    /// ninth with `dra`), add the quota layer ([`kueue`]; local target only).
    pub kueue: bool,
}

/// What one pod did, read back from the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodOutcome {
    /// Pod name.
    pub name: String,
    /// Resource requested.
    pub resource: String,
    /// `spec.nodeName`, `None` when unbound.
    pub node: Option<String>,
    /// `status.phase` (e.g. `Pending`, `Running`).
    pub phase: String,
    /// Message of the PodScheduled condition, verbatim (empty when the pod was bound).
    pub message: String,
}

/// The lab's result: the plan as applied, the four pods' outcomes, the checker's output,
/// the split inventory and the explanation of the pending pod, and the kubeconfig used
/// (for the local control plane).
#[derive(Debug, Clone)]
pub struct LabReport {
    /// The plan.
    pub plan: Plan,
    /// Outcomes in step order.
    pub(crate) pods: Vec<PodOutcome>,
    /// `consistency.txt` content.
    pub consistency: String,
    /// The cluster's GPU inventory after step 8 (pools, allocated, pending, the split).
    pub inventory: Inventory,
    /// Why `job-cross` is Pending, read from the cluster after step 8.
    pub cross_explanation: Explanation,
    /// Kubeconfig of the local control plane, when it was used.
    pub local_kubeconfig: Option<PathBuf>,
    /// The DRA step's result (`--dra`).
    pub dra: Option<dra::DraStep>,
    /// `--kubevirt`: the names the KubeVirt CR permits (from `gpuwl kubevirt generate`) and
    /// what each VMI came to.
    pub kubevirt: Option<(Vec<String>, Vec<kubevirt::VmOutcome>)>,
    /// `--kueue`: what each Job came to.
    pub kueue: Option<Vec<kueue::JobOutcome>>,
}

/// One step of the lab (docs/lab.md): its number is its index in [`STEPS`] + 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The title, as printed in progress lines and failures.
    pub title: &'static str,
    /// What it does, one line for `gpuwl lab --help`.
    pub does: &'static str,
    /// The result files it writes, relative to the lab root.
    pub files: &'static [&'static str],
}

/// The eight steps: the one table the lab's progress lines, its `--help` and the README's
/// step table come from.
pub const STEPS: [Step; 8] = [
    Step {
        title: "label the three nodes",
        does: "create out/ bin/ k8s/, namespace gpu-vm; label container, vm-passthrough, vm-vgpu",
        files: &["out/01-nodes.txt"],
    },
    Step {
        title: "list operands per workload config",
        does: "operands per workload config, the no-label default, the flag that enables the label",
        files: &["out/operands.txt"],
    },
    Step {
        title: "advertise one GPU resource per node",
        does: "nvidia.com/gpu=4, GA102GL_A10=2, NVIDIA_A10-12Q=4 (status capacity + allocatable)",
        files: &["out/03-resources.txt"],
    },
    Step {
        title: "container job asks for nvidia.com/gpu",
        does: "pod job-container, no nodeSelector",
        files: &["k8s/pod-container.yaml", "out/04-container.txt"],
    },
    Step {
        title: "passthrough VM asks for the device-model name",
        does: "pod vmi-passthrough asks for nvidia.com/GA102GL_A10",
        files: &["k8s/pod-passthrough.yaml", "out/05-passthrough.txt"],
    },
    Step {
        title: "vGPU VM asks for the vGPU type",
        does: "pod vmi-vgpu asks for nvidia.com/NVIDIA_A10-12Q",
        files: &["k8s/pod-vgpu.yaml", "out/06-placement.txt"],
    },
    Step {
        title: "cross request: passthrough node, container resource",
        does: "job-cross asks a passthrough node for nvidia.com/gpu: Pending, the scheduler's words",
        files: &["k8s/pod-cross.yaml", "out/07-cross.txt"],
    },
    Step {
        title: "save the node dump and run the checker",
        does: "save the node dump, write the checker, run it on the dump",
        files: &[
            "out/nodes.json",
            "bin/check-config.sh",
            "out/consistency.txt",
        ],
    },
];

/// The step list of `gpuwl lab --help`: per step its number, title, what it does and its
/// result files, wrapped to fit 100 columns.
pub fn steps_help() -> String {
    let mut out = String::new();
    for (i, s) in STEPS.iter().enumerate() {
        let head = format!("  {}. {} -> {}", i + 1, s.title, s.files.join(", "));
        if head.chars().count() <= 90 {
            out.push_str(&format!("{head}\n     {}\n", s.does));
        } else {
            out.push_str(&format!(
                "  {}. {}\n     {}\n     -> {}\n",
                i + 1,
                s.title,
                s.does,
                s.files.join(", ")
            ));
        }
    }
    out
}

/// The README's step table (markdown rows `| n | title | files |`), kept equal to
/// [`STEPS`] by a test.
#[cfg(test)]
fn steps_markdown() -> String {
    let mut out = String::from("| step | title | result files |\n|---|---|---|\n");
    for (i, s) in STEPS.iter().enumerate() {
        let files: Vec<String> = s.files.iter().map(|f| format!("`{f}`")).collect();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            i + 1,
            s.title,
            files.join(", ")
        ));
    }
    out
}

/// Numbers the steps, times them, and turns a failure into `step <k> (<title>) failed`.
struct Steps<'a> {
    done: usize,
    started: Instant,
    progress: &'a mut dyn FnMut(&str),
}

impl Steps<'_> {
    fn begin(&mut self) {
        self.started = Instant::now();
    }
    fn finish(&mut self, detail: &str) {
        self.done += 1;
        let line = format!(
            "[{}/8] {} — {} ({:.1}s)",
            self.done,
            STEPS[self.done - 1].title,
            detail,
            self.started.elapsed().as_secs_f64()
        );
        (self.progress)(&line);
    }
    fn fail(&self, e: Error) -> Error {
        let k = self.done;
        Error::failed(format!("step {} ({}) failed", k + 1, STEPS[k].title), e)
    }
}

/// Runs the eight steps, then reads the inventory and the explanation of the pending pod.
/// `progress` receives one line per step as it finishes.
///
/// Errors: [`Error::Runtime`] `step <k> (<title>) failed: <why>` — files of earlier steps
/// stay as written; no half-written file is left. A pod of steps 4-6 that is not bound, or
/// a `job-cross` that is bound, fails its step: the lab's point would not be shown.
pub async fn run(opts: &LabOptions, progress: &mut dyn FnMut(&str)) -> Result<LabReport> {
    let plan = Plan::new(&opts.nodes);
    let dirs = LabDirs::new(&opts.root);
    let (client, local_kubeconfig) = connect(opts, progress).await?;
    let local = matches!(opts.target, Target::Local { .. });
    if !local {
        nodes_exist(&client, &plan).await?;
    }
    let lab = Lab {
        client: &client,
        plan: &plan,
        dirs: &dirs,
        opts,
        local,
    };
    let mut st = Steps {
        done: 0,
        started: Instant::now(),
        progress,
    };
    label_step(&mut st, &lab).await?;
    operands_step(&mut st, &lab).await?;
    resources_step(&mut st, &lab).await?;
    let lab_vms = kubevirt::lab_vms(
        &plan.pods[1].resource,
        &plan.pods[2].resource,
        &plan.pods[3].resource,
    );
    let permitted = if opts.kubevirt {
        Some(kubevirt_step(&mut st, &lab, &lab_vms, local_kubeconfig.as_deref()).await?)
    } else {
        None
    };
    let vms = opts.kubevirt.then_some(lab_vms.as_slice());
    let (outcomes, vm_outcomes) = pod_steps(&mut st, &lab, vms).await?;
    st.begin();
    let consistency = step8(&client, &dirs, &opts.gpuwl_bin)
        .await
        .map_err(|e| st.fail(e))?;
    st.finish(&consistency.trim_end().replace('\n', "; "));
    let dra_step = if opts.dra {
        Some(dra_step(&mut st, &lab).await?)
    } else {
        None
    };
    let kueue_step = if opts.kueue {
        Some(kueue_step(&mut st, &lab).await?)
    } else {
        None
    };
    let inventory = gpuwl_core::analysis::inventory::assemble(
        crate::input::snapshot::read(&client, false).await?,
        &[],
    )?;
    let cross = &plan.pods[3].name;
    let cross_explanation = {
        let named = Named {
            kind: Kind::Object(ObjectKind::Pod),
            namespace: Some(NAMESPACE),
            name: cross,
        };
        let mut g = crate::input::gather::object::read(&client, named).await?;
        let Some(object) = g.object.take() else {
            return Err(Error::Runtime(format!("explain: {cross} was not read")));
        };
        let operands = g.operands_by_node();
        gpuwl_core::analysis::explain::object::explain_object(
            object,
            gpuwl_core::analysis::explain::Inputs::of(&g.snapshot, operands.as_ref()),
            g.snapshot.kueue.as_ref(),
        )?
    };
    Ok(LabReport {
        plan,
        pods: outcomes,
        consistency,
        inventory,
        cross_explanation,
        local_kubeconfig,
        dra: dra_step,
        kubevirt: permitted.map(|p| (p, vm_outcomes)),
        kueue: kueue_step,
    })
}

/// What every step of a run works with.
struct Lab<'a> {
    client: &'a Client,
    plan: &'a Plan,
    dirs: &'a LabDirs,
    opts: &'a LabOptions,
    /// On the local control plane.
    local: bool,
}

/// Step 1: the nodes labelled ([`step1`]).
async fn label_step(st: &mut Steps<'_>, lab: &Lab<'_>) -> Result<()> {
    st.begin();
    step1(lab.client, lab.plan, lab.dirs, lab.local, lab.opts.operator)
        .await
        .map_err(|e| st.fail(e))?;
    st.finish(&labels_detail(lab.plan));
    Ok(())
}

/// Step 1's line: `<node>=<config>` per node.
fn labels_detail(plan: &Plan) -> String {
    let labels: Vec<String> = plan
        .nodes
        .iter()
        .map(|n| format!("{}={}", n.node, n.config))
        .collect();
    labels.join(" ")
}

/// Step 2: `operands.txt` from the model; with `--operator`, the operands the real GPU
/// Operator runs, awaited and written to [`OPERANDS_OBSERVED`].
async fn operands_step(st: &mut Steps<'_>, lab: &Lab<'_>) -> Result<()> {
    let lab_nodes: Vec<(String, WorkloadConfig)> = lab
        .plan
        .nodes
        .iter()
        .map(|n| (n.node.clone(), n.config))
        .collect();
    st.begin();
    let observed = if lab.opts.operator {
        Some(
            operator::wait_operands(lab.client, &lab_nodes)
                .await
                .map_err(|e| st.fail(e))?,
        )
    } else {
        None
    };
    files::write_lines(&lab.dirs.out.join("operands.txt"), &operands_lines())
        .map_err(|e| st.fail(e))?;
    if let Some(observed) = &observed {
        let lines = operator::observed_lines(&lab_nodes, observed);
        files::write_lines(&lab.dirs.out.join(OPERANDS_OBSERVED), &lines)
            .map_err(|e| st.fail(e))?;
        let per_node: Vec<String> = lines[..lines.len() - 1].to_vec();
        st.finish(&format!("observed {}", per_node.join("; ")));
    } else {
        st.finish(&format!(
            "NO_LABEL={DEFAULT_WORKLOAD}, ENABLE_FLAG={ENABLE_FLAG}"
        ));
    }
    Ok(())
}

/// Step 3: the resources advertised — written into node status ([`step3`]), or with
/// `--operator` awaited from the emulated device plugins and read back.
async fn resources_step(st: &mut Steps<'_>, lab: &Lab<'_>) -> Result<()> {
    let plan = lab.plan;
    st.begin();
    if lab.opts.operator {
        let want: Vec<(String, String, u32)> = plan
            .nodes
            .iter()
            .map(|n| (n.node.clone(), n.resource.clone(), n.amount))
            .collect();
        // The file is read back from node status: what the emulated plugins advertise.
        let seen = operator::wait_advertised(lab.client, &want)
            .await
            .map_err(|e| st.fail(e))?;
        files::write_lines(
            &lab.dirs.out.join("03-resources.txt"),
            &observed_resource_lines(plan, &seen),
        )
        .map_err(|e| st.fail(e))?;
    } else {
        step3(lab.client, plan, lab.dirs, lab.local)
            .await
            .map_err(|e| st.fail(e))?;
    }
    st.finish(&resources_detail(plan, lab.opts.operator));
    Ok(())
}

/// `03-resources.txt` as observed: `<node> <resource> <amount>` for every name `seen` on
/// each node, in plan order.
fn observed_resource_lines(
    plan: &Plan,
    seen: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<String> {
    plan.nodes
        .iter()
        .flat_map(|n| {
            seen[&n.node]
                .iter()
                .map(|(r, a)| format!("{} {r} {a}", n.node))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Step 3's line: `<node> <resource>=<amount>` per node (`observed ` first with
/// `--operator`).
fn resources_detail(plan: &Plan, observed: bool) -> String {
    let advertised: Vec<String> = plan
        .nodes
        .iter()
        .map(|n| format!("{} {}={}", n.node, n.resource, n.amount))
        .collect();
    format!(
        "{}{}",
        if observed { "observed " } else { "" },
        advertised.join(", ")
    )
}

/// Before step 5 with `--kubevirt` ([`kubevirt_prepare`]): returns the names the KubeVirt
/// CR permits, reporting them on a `[kubevirt]` line.
async fn kubevirt_step(
    st: &mut Steps<'_>,
    lab: &Lab<'_>,
    vms: &[kubevirt::LabVm],
    kubeconfig: Option<&Path>,
) -> Result<Vec<String>> {
    let started = Instant::now();
    let kubeconfig = kubeconfig
        .ok_or_else(|| Error::Runtime("--kubevirt needs the local control plane".into()))?;
    let permitted = kubevirt_prepare(lab.client, lab.plan, vms, &lab.opts.gpuwl_bin, kubeconfig)
        .await
        .map_err(|e| Error::failed("KubeVirt (before step 5) failed", e))?;
    (st.progress)(&format!(
        "[kubevirt] KubeVirt CR patched as kubevirt generate prints it: permits {} ({:.1}s)",
        permitted.join(", "),
        started.elapsed().as_secs_f64()
    ));
    Ok(permitted)
}

/// Steps 4-7: each pod applied and held to what the lab expects of it, its result file
/// written, and (with `--kubevirt`, `vms`) steps 5-7's VMI after it ([`vm_step`]).
/// Returns the pods' and the VMIs' outcomes.
async fn pod_steps(
    st: &mut Steps<'_>,
    lab: &Lab<'_>,
    vms: Option<&[kubevirt::LabVm]>,
) -> Result<(Vec<PodOutcome>, Vec<kubevirt::VmOutcome>)> {
    let mut vm_outcomes: Vec<kubevirt::VmOutcome> = Vec::new();
    let mut outcomes: Vec<PodOutcome> = Vec::new();
    for (i, pod) in lab.plan.pods.iter().enumerate() {
        st.begin();
        let o = apply_pod(lab.client, pod, lab.dirs)
            .await
            .map_err(|e| st.fail(e))?;
        if let Some(why) = unexpected_placement(pod, &o) {
            return Err(st.fail(Error::Runtime(why)));
        }
        outcomes.push(o.clone());
        let (file, lines) = pod_result_file(i, &outcomes);
        files::write_lines(&lab.dirs.out.join(file), &lines).map_err(|e| st.fail(e))?;
        let mut detail = pod_detail(&o);
        if let Some(vms) = vms
            && i >= 1
        {
            let more = vm_step(lab.client, &vms[i - 1], lab.dirs, &mut vm_outcomes, i == 3)
                .await
                .map_err(|e| st.fail(e))?;
            detail.push_str(&more);
        }
        st.finish(&detail);
    }
    Ok((outcomes, vm_outcomes))
}

/// Why pod outcome `o` defeats the lab: a pod without a nodeSelector must be bound, the
/// one with it must stay Pending. `None` when it does what the lab expects.
fn unexpected_placement(pod: &LabPod, o: &PodOutcome) -> Option<String> {
    let expect_bound = pod.node_selector.is_empty();
    if o.node.is_some() == expect_bound {
        return None;
    }
    Some(match &o.node {
        Some(n) => format!(
            "{} was bound to {n}, but the lab expects it to stay Pending",
            o.name
        ),
        None => format!("{} was not scheduled: {}", o.name, o.message),
    })
}

/// A pod step's line: `<pod> → <node>`, or why it stays unbound.
fn pod_detail(o: &PodOutcome) -> String {
    match &o.node {
        Some(n) => format!("{} → {n}", o.name),
        None => format!("{} stays {} on no node: {}", o.name, o.phase, o.message),
    }
}

/// The quota layer with `--kueue` ([`kueue::run`]), reported on a `[kueue]` line.
async fn kueue_step(st: &mut Steps<'_>, lab: &Lab<'_>) -> Result<Vec<kueue::JobOutcome>> {
    if !lab.local {
        return Err(Error::Runtime(
            "--kueue needs the local control plane".into(),
        ));
    }
    let started = Instant::now();
    let out = kueue::run(
        lab.client,
        lab.dirs,
        &lab.plan.pods[0].resource,
        &lab.plan.pods[1].resource,
    )
    .await
    .map_err(|e| Error::failed("the Kueue step (the quota layer) failed", e))?;
    let said: Vec<String> = out
        .iter()
        .map(|o| match (&o.flavor, &o.node) {
            (Some(f), Some(n)) => format!("{} admitted in flavor {f} → {n}", o.job.name),
            _ => format!("{} held: {}", o.job.name, o.message),
        })
        .collect();
    (st.progress)(&format!(
        "[kueue] the quota layer — {} ({:.1}s)",
        said.join("; "),
        started.elapsed().as_secs_f64()
    ));
    Ok(out)
}

/// Step 9 with `--dra` ([`dra::run`]), reported on a `[9]` line.
async fn dra_step(st: &mut Steps<'_>, lab: &Lab<'_>) -> Result<dra::DraStep> {
    let started = Instant::now();
    let d = dra::run(lab.client, &lab.opts.nodes, lab.dirs)
        .await
        .map_err(|e| Error::failed("step 9 (DRA: the same GPUs as claims) failed", e))?;
    let placed: Vec<String> = d
        .pods
        .iter()
        .map(|(p, n)| format!("{p} → {}", n.as_deref().unwrap_or("none")))
        .collect();
    (st.progress)(&format!(
        "[9] DRA: the same GPUs as claims — {}; {} ({:.1}s)",
        placed.join(", "),
        d.pool_line,
        started.elapsed().as_secs_f64()
    ));
    Ok(d)
}

/// Steps 5-7's real VMI with `--kubevirt`: created and awaited
/// ([`kubevirt::create_and_await`]), held to what the lab expects of it (placed or
/// refused), added to `outcomes`, and after the last one (`last`) the outcomes written to
/// [`kubevirt::KUBEVIRT_FILE`]. Returns the text the step's line gets (`; VMI … → …`).
///
/// Errors: [`Error::Runtime`] when the VMI is placed where the lab expects a refusal or
/// the other way round; API and file errors.
async fn vm_step(
    client: &Client,
    v: &kubevirt::LabVm,
    dirs: &LabDirs,
    outcomes: &mut Vec<kubevirt::VmOutcome>,
    last: bool,
) -> Result<String> {
    let vo = kubevirt::create_and_await(client, v).await?;
    if vo.node.is_some() != v.placed {
        return Err(Error::Runtime(format!(
            "VMI {}: the lab expects it {}, but: {}",
            v.name,
            if v.placed { "placed" } else { "refused" },
            vo.line()
        )));
    }
    let detail = format!(
        "; VMI {} → {}",
        v.name,
        match (&vo.launcher, &vo.node) {
            (Some(p), Some(n)) => format!("{p} on {n}"),
            _ => format!("no node: {}", vo.condition),
        }
    );
    outcomes.push(vo);
    if last {
        let lines: Vec<String> = outcomes.iter().map(|o| o.line()).collect();
        files::write_lines(&dirs.out.join(kubevirt::KUBEVIRT_FILE), &lines)?;
    }
    Ok(detail)
}

/// Before step 5 with `--kubevirt`: the lab's earlier VMs deleted ([`kubevirt::clean`]),
/// the lab's nodes published as virt-handler would (waited for up to 30 s:
/// `kubevirt-nodes` polls every 2 s), and the KubeVirt CR's permittedHostDevices set from
/// `gpuwl kubevirt generate` ([`kubevirt::permit_generated`]); returns the permitted names.
async fn kubevirt_prepare(
    client: &Client,
    plan: &Plan,
    vms: &[kubevirt::LabVm],
    gpuwl_bin: &Path,
    kubeconfig: &Path,
) -> Result<Vec<String>> {
    kubevirt::clean(client, vms).await?;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    for n in &plan.nodes {
        loop {
            let node = nodes
                .get(&n.node)
                .await
                .map_err(|e| crate::input::live::api_error(&format!("get node {}", n.node), &e))?;
            if !crate::cluster::kubevirt::node_needs_kubevirt(&node) {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Runtime(format!(
                    "node {} lacks KubeVirt's labels or devices.kubevirt.io/* after 30 s (is kubevirt-nodes running? gpuwl cluster status)",
                    n.node
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    }
    kubevirt::permit_generated(client, gpuwl_bin, kubeconfig).await
}

/// The result file of pod step `i` (0 = step 4) and its lines, given the outcomes so far:
/// `04-container.txt` `NODE=`; `05-passthrough.txt` `NODE=`, `RESOURCE=`;
/// `06-placement.txt` `<pod> <node>` sorted by pod; `07-cross.txt` `PHASE=`, `NODE=`, `MESSAGE=`.
fn pod_result_file(i: usize, outcomes: &[PodOutcome]) -> (&'static str, Vec<String>) {
    let o = &outcomes[i];
    match i {
        0 => (
            "04-container.txt",
            vec![format!("NODE={}", node_or_none(o))],
        ),
        1 => (
            "05-passthrough.txt",
            vec![
                format!("NODE={}", node_or_none(o)),
                format!("RESOURCE={}", o.resource),
            ],
        ),
        2 => {
            let mut v: Vec<String> = outcomes
                .iter()
                .map(|o| format!("{} {}", o.name, node_or_none(o)))
                .collect();
            v.sort();
            ("06-placement.txt", v)
        }
        _ => (
            "07-cross.txt",
            vec![
                format!("PHASE={}", o.phase),
                format!("NODE={}", node_or_none(o)),
                format!("MESSAGE={}", o.message),
            ],
        ),
    }
}

fn node_or_none(o: &PodOutcome) -> &str {
    o.node.as_deref().unwrap_or("none")
}

/// The five lines of `operands.txt`: `<value>=<operands, comma-joined>` for the three
/// workload configs, `NO_LABEL=<default>`, `ENABLE_FLAG=<ClusterPolicy flag>`.
pub(crate) fn operands_lines() -> Vec<String> {
    let mut v: Vec<String> = WorkloadConfig::ALL
        .iter()
        .map(|wc| format!("{}={}", wc.as_str(), wc.operands_docs().join(",")))
        .collect();
    v.push(format!("NO_LABEL={DEFAULT_WORKLOAD}"));
    v.push(format!("ENABLE_FLAG={ENABLE_FLAG}"));
    v
}

/// The read timeout of the lab's client: `--request-timeout`, but never shorter than the
/// longest wait on a watch ([`kubeops::WAIT`]): a watch on a pod or a namespace stays
/// quiet until the awaited change happens, and each wait has its own limit, which must
/// end it first with its own message.
fn lab_read_timeout(request_timeout: std::time::Duration) -> std::time::Duration {
    request_timeout.max(kubeops::WAIT + std::time::Duration::from_secs(5))
}

async fn connect(
    opts: &LabOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<(Client, Option<PathBuf>)> {
    match &opts.target {
        Target::Local {
            cluster,
            request_timeout,
        } => {
            let name = cluster.clone();
            let gpu_operator = opts.operator;
            let kubevirt = opts.kubevirt;
            let kueue = opts.kueue;
            let handle = tokio::task::spawn_blocking(move || {
                crate::cluster::up(&crate::cluster::UpOptions {
                    name,
                    progress: true,
                    gpu_operator,
                    kubevirt,
                    kueue,
                    ..Default::default()
                })
            })
            .await
            .map_err(|e| Error::failed("cluster up", e))??;
            progress(&format!(
                // The path on a line of its own: never wrapped, whatever its length.
                "local control plane {:?} is up; kubeconfig:\n  {}",
                handle.name,
                handle.kubeconfig.display()
            ));
            let args = crate::input::live::ClusterArgs {
                request_timeout: lab_read_timeout(*request_timeout).as_secs(),
                ..crate::input::live::ClusterArgs::file(&handle.kubeconfig, None)
            };
            let client = crate::input::live::connect(&args, crate::input::live::Flavour::OneShot)
                .await?
                .client;
            Ok((client, Some(handle.kubeconfig)))
        }
        Target::Kubeconfig(args) => {
            let args = crate::input::live::ClusterArgs {
                request_timeout: lab_read_timeout(args.request_timeout()).as_secs(),
                ..args.clone()
            };
            let conn =
                crate::input::live::connect(&args, crate::input::live::Flavour::OneShot).await?;
            Ok((conn.client, None))
        }
    }
}

/// On a cluster of the user's (`--context`/`--kubeconfig`), that every `--node` names a
/// node of it, before anything is written there: a typo is bad input naming the flag, with
/// the nearest node names ([`gpuwl_core::text::did_you_mean`]).
///
/// Errors: [`Error::Input`] for a node the cluster lacks; the list's own errors.
async fn nodes_exist(client: &Client, plan: &Plan) -> Result<()> {
    let all = crate::input::live::list_nodes(client).await?;
    let names: Vec<&str> = all.iter().map(|n| n.name.as_str()).collect();
    for n in &plan.nodes {
        if !names.contains(&n.node.as_str()) {
            return Err(Error::Input(format!(
                "--node {}={}: no node {} in the cluster{}",
                n.config,
                gpuwl_core::render::esc(&n.node),
                gpuwl_core::render::esc(&n.node),
                gpuwl_core::text::did_you_mean(&n.node, names.iter().copied())
            )));
        }
    }
    Ok(())
}

/// The file of `--operator`'s observed operands, under `out/`.
pub(crate) const OPERANDS_OBSERVED: &str = "operands-observed.txt";

async fn step1(
    client: &Client,
    plan: &Plan,
    dirs: &LabDirs,
    local: bool,
    with_operator: bool,
) -> Result<()> {
    dirs.create()?;
    kubeops::ensure_namespace(client, NAMESPACE).await?;
    if local {
        crate::cluster::accounts::ensure_default_service_account(client, NAMESPACE).await?;
    }
    // Start from a clean slate: the lab owns these four pods.
    for p in &plan.pods {
        kubeops::delete_pod(client, NAMESPACE, &p.name).await?;
    }
    for n in &plan.nodes {
        if local {
            crate::cluster::nodes::ensure_sim_node(client, &n.node).await?;
        }
        if with_operator {
            operator::apply_hardware(client, &n.node, &operator::lab_hardware(n.config)).await?;
        }
        kubeops::label_node(client, &n.node, LABEL_KEY, n.config.as_str()).await?;
    }
    if local {
        // A new node is tainted not-ready until kwok and the node-lifecycle controller
        // have acted; the scheduler must see the three nodes as they will stay.
        for n in &plan.nodes {
            crate::cluster::nodes::wait_schedulable(
                client,
                &n.node,
                crate::cluster::nodes::SCHEDULABLE_WAIT,
            )
            .await?;
        }
    }
    let lines: Vec<String> = plan
        .nodes
        .iter()
        .map(|n| format!("{} {}", n.node, n.config.as_str()))
        .collect();
    files::write_lines(&dirs.out.join("01-nodes.txt"), &lines)
}

async fn step3(client: &Client, plan: &Plan, dirs: &LabDirs, local: bool) -> Result<()> {
    for n in &plan.nodes {
        let mut res = BTreeMap::new();
        if local {
            // A simulated node has no device plugin to tidy up after it: drop any other
            // NVIDIA resource a previous run or a user left, so a re-run starts clean.
            for other in kubeops::status_resource_names(client, &n.node, NVIDIA_PREFIX).await? {
                res.insert(other, None);
            }
        }
        res.insert(n.resource.clone(), Some(n.amount.to_string()));
        kubeops::patch_status_resources(client, &n.node, &res).await?;
    }
    write_resources(plan, dirs)
}

/// `03-resources.txt`: `<node> <resource> <amount>` per node, by node name.
fn write_resources(plan: &Plan, dirs: &LabDirs) -> Result<()> {
    let lines: Vec<String> = plan
        .nodes
        .iter()
        .map(|n| format!("{} {} {}", n.node, n.resource, n.amount))
        .collect();
    files::write_lines(&dirs.out.join("03-resources.txt"), &lines)
}

/// Writes the pod's manifest, reads it back, re-creates the pod from it, and reads the
/// scheduler's decision back from the API.
async fn apply_pod(client: &Client, pod: &LabPod, dirs: &LabDirs) -> Result<PodOutcome> {
    let path = dirs.k8s.join(&pod.file);
    files::write_atomic(&path, pod.to_yaml()?.as_bytes(), 0o644)?;
    let manifest: Pod = manifests::read_pod(&path)?;
    kubeops::delete_pod(client, NAMESPACE, &pod.name).await?;
    let seen = kubeops::create_and_await_scheduling(client, &manifest).await?;
    Ok(outcome(pod, &seen))
}

fn outcome(pod: &LabPod, seen: &Pod) -> PodOutcome {
    let cond = kubeops::pod_scheduled(seen);
    let bound = cond.is_some_and(|c| c.status == "True");
    PodOutcome {
        name: pod.name.clone(),
        resource: pod.resource.clone(),
        node: seen
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        phase: seen
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into()),
        message: if bound {
            String::new()
        } else {
            cond.and_then(|c| c.message.clone()).unwrap_or_default()
        },
    }
}

/// The node list in `kubectl get nodes -o json` shape: `{"apiVersion":"v1","items":[…],
/// "kind":"List","metadata":{"resourceVersion":""}}`, indented by four spaces as kubectl
/// prints it, each item with its `apiVersion` and `kind`.
///
/// Errors: [`Error::Runtime`] if serialization fails.
pub fn nodes_json(nodes: &[k8s_openapi::api::core::v1::Node]) -> Result<Vec<u8>> {
    use serde::Serialize;
    let list = serde_json::json!({
        "apiVersion": "v1",
        "items": nodes,
        "kind": "List",
        "metadata": {"resourceVersion": ""}
    });
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut buf,
        serde_json::ser::PrettyFormatter::with_indent(b"    "),
    );
    list.serialize(&mut ser)
        .map_err(|e| Error::failed("cannot serialize nodes", e))?;
    buf.push(b'\n');
    Ok(buf)
}

async fn step8(client: &Client, dirs: &LabDirs, gpuwl_bin: &Path) -> Result<String> {
    let nodes = kubeops::list_nodes(client).await?;
    let dump = dirs.out.join("nodes.json");
    files::write_atomic(&dump, &nodes_json(&nodes)?, 0o644)?;
    let script = dirs.bin.join("check-config.sh");
    files::write_atomic(&script, files::check_script(gpuwl_bin).as_bytes(), 0o755)?;
    let out = tokio::process::Command::new(&script)
        .arg(&dump)
        .output()
        .await
        .map_err(|e| Error::failed(format!("cannot run {}", script.display()), e))?;
    match out.status.code() {
        Some(0) | Some(1) => {}
        other => {
            return Err(Error::Runtime(format!(
                "{} exited {:?}: {}",
                script.display(),
                other,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    files::write_atomic(&dirs.out.join("consistency.txt"), text.as_bytes(), 0o644)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_matches_the_seed() {
        let p = Plan::new(&LabNodes::default());
        let nodes: Vec<(String, &str, String, u32)> = p
            .nodes
            .iter()
            .map(|n| {
                (
                    n.node.clone(),
                    n.config.as_str(),
                    n.resource.clone(),
                    n.amount,
                )
            })
            .collect();
        assert_eq!(
            nodes,
            vec![
                ("lab-node-0".into(), "container", "nvidia.com/gpu".into(), 4),
                (
                    "lab-node-1".into(),
                    "vm-passthrough",
                    "nvidia.com/GA102GL_A10".into(),
                    2
                ),
                (
                    "lab-node-2".into(),
                    "vm-vgpu",
                    "nvidia.com/NVIDIA_A10-12Q".into(),
                    4
                ),
            ]
        );
        let pods: Vec<(&str, &str, &str)> = p
            .pods
            .iter()
            .map(|x| (x.name.as_str(), x.file.as_str(), x.resource.as_str()))
            .collect();
        assert_eq!(
            pods,
            vec![
                ("job-container", "pod-container.yaml", "nvidia.com/gpu"),
                (
                    "vmi-passthrough",
                    "pod-passthrough.yaml",
                    "nvidia.com/GA102GL_A10"
                ),
                ("vmi-vgpu", "pod-vgpu.yaml", "nvidia.com/NVIDIA_A10-12Q"),
                ("job-cross", "pod-cross.yaml", "nvidia.com/gpu"),
            ]
        );
        assert!(p.pods[..3].iter().all(|x| x.node_selector.is_empty()));
        assert_eq!(
            p.pods[3].node_selector,
            BTreeMap::from([(LABEL_KEY.to_string(), "vm-passthrough".to_string())])
        );
    }

    #[test]
    fn operands_file_lines() {
        let l = operands_lines();
        assert_eq!(l.len(), 5);
        assert_eq!(
            l[0],
            "container=datacenter-driver,container-toolkit,device-plugin,dcgm-exporter"
        );
        assert_eq!(l[1], "vm-passthrough=vfio-manager,sandbox-device-plugin");
        assert_eq!(
            l[2],
            "vm-vgpu=vgpu-manager,vgpu-device-manager,sandbox-device-plugin"
        );
        assert_eq!(l[3], "NO_LABEL=container");
        assert_eq!(l[4], "ENABLE_FLAG=sandboxWorkloads.enabled");
    }

    #[test]
    fn split_sentence_from_the_inventory_of_the_lab_state() {
        use gpuwl_core::decode::dump::{Source, read_nodes};
        let data =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/inventory/lab");
        let nodes = read_nodes(&Source::Path(data.join("nodes.json"))).unwrap();
        let pods = gpuwl_core::decode::pods::read_pods_path(&data.join("pods.json")).unwrap();
        let inv = gpuwl_core::analysis::inventory::build(
            &nodes,
            &pods,
            &gpuwl_core::model::operator::PolicyStatus::not_read(),
        )
        .unwrap();
        assert_eq!(
            crate::render::lab::split_sentences(&inv),
            vec![
                "job-cross waits on the vm-passthrough pool while 3 nvidia.com/gpu are free on container nodes"
            ]
        );
    }

    #[test]
    fn nodes_json_has_kubectl_list_shape() {
        let n: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}})).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&nodes_json(&[n]).unwrap()).unwrap();
        assert_eq!(v["kind"], "List");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["metadata"]["resourceVersion"], "");
        assert_eq!(v["items"][0]["kind"], "Node");
        assert_eq!(v["items"][0]["apiVersion"], "v1");
        assert_eq!(v["items"][0]["metadata"]["name"], "a");
    }

    #[test]
    fn readme_and_docs_carry_the_step_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let table = steps_markdown();
        for doc in ["README.md", "docs/lab.md"] {
            let text = std::fs::read_to_string(root.join(doc)).unwrap();
            assert!(
                text.contains(&table),
                "{doc} must contain the step table of src/lab/mod.rs STEPS:\n{table}"
            );
        }
        assert!(steps_help().lines().all(|l| l.chars().count() <= 90));
    }

    #[test]
    fn step_lines_name_the_plan() {
        let p = Plan::new(&LabNodes::default());
        assert_eq!(
            labels_detail(&p),
            "lab-node-0=container lab-node-1=vm-passthrough lab-node-2=vm-vgpu"
        );
        assert_eq!(
            resources_detail(&p, false),
            "lab-node-0 nvidia.com/gpu=4, lab-node-1 nvidia.com/GA102GL_A10=2, lab-node-2 nvidia.com/NVIDIA_A10-12Q=4"
        );
        assert!(resources_detail(&p, true).starts_with("observed lab-node-0 nvidia.com/gpu=4, "));
        let seen: BTreeMap<String, BTreeMap<String, String>> = p
            .nodes
            .iter()
            .map(|n| {
                let mut m = BTreeMap::from([(n.resource.clone(), n.amount.to_string())]);
                if n.node == "lab-node-0" {
                    m.insert("nvidia.com/gpu.shared".into(), "0".into());
                }
                (n.node.clone(), m)
            })
            .collect();
        assert_eq!(
            observed_resource_lines(&p, &seen),
            vec![
                "lab-node-0 nvidia.com/gpu 4",
                "lab-node-0 nvidia.com/gpu.shared 0",
                "lab-node-1 nvidia.com/GA102GL_A10 2",
                "lab-node-2 nvidia.com/NVIDIA_A10-12Q 4",
            ]
        );
    }

    #[test]
    fn a_pod_step_holds_each_pod_to_the_lab() {
        let p = Plan::new(&LabNodes::default());
        let outcome = |name: &str, node: Option<&str>| PodOutcome {
            name: name.into(),
            resource: "nvidia.com/gpu".into(),
            node: node.map(str::to_string),
            phase: if node.is_some() { "Running" } else { "Pending" }.into(),
            message: if node.is_some() {
                String::new()
            } else {
                "0/3 nodes are available".into()
            },
        };
        let bound = outcome("job-container", Some("lab-node-0"));
        assert_eq!(unexpected_placement(&p.pods[0], &bound), None);
        assert_eq!(pod_detail(&bound), "job-container → lab-node-0");
        let unbound = outcome("job-container", None);
        assert_eq!(
            unexpected_placement(&p.pods[0], &unbound).as_deref(),
            Some("job-container was not scheduled: 0/3 nodes are available")
        );
        let cross = outcome("job-cross", None);
        assert_eq!(unexpected_placement(&p.pods[3], &cross), None);
        assert_eq!(
            pod_detail(&cross),
            "job-cross stays Pending on no node: 0/3 nodes are available"
        );
        assert_eq!(
            unexpected_placement(&p.pods[3], &outcome("job-cross", Some("lab-node-1"))).as_deref(),
            Some("job-cross was bound to lab-node-1, but the lab expects it to stay Pending")
        );
    }
}
