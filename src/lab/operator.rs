//! `gpuwl lab --operator`: steps 2 and 3 observed on the real GPU Operator
//! ([`crate::cluster::gpu_operator`]) instead of written from gpuwl's table.
//!
//! Step 1 also gives each lab node simulated hardware ([`lab_hardware`]); step 2 waits
//! until the operator has deployed its operands on every lab node and writes them to
//! `out/operands-observed.txt` ([`observed_lines`]) next to the usual `operands.txt`;
//! step 3 waits until the device-plugin emulation ([`crate::cluster::gpusim`]) advertises
//! each node's name and reads `03-resources.txt` back from node status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::cluster::gpu_operator::{self, NAMESPACE as OPERATOR_NAMESPACE};
use crate::cluster::gpusim;
use crate::input::live::api_error;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::gpusim::GpuHardware;
use gpuwl_core::model::resource::NVIDIA_PREFIX;
use gpuwl_core::model::workload::WorkloadConfig;

/// How long steps 2 and 3 wait for the operator and the emulation.
pub(crate) const OPERATOR_WAIT: Duration = Duration::from_secs(120);

/// The simulated hardware of the lab node for `wc`, chosen so that the real plugins
/// advertise the lab's amounts ([`super::lab_resource`]): four A10s on the container node,
/// two on the passthrough node, two on the vGPU node with `nvidia.com/vgpu.config=A10-12Q`
/// (two `A10-12Q` per A10, NVIDIA/gpu-operator
/// `assets/state-vgpu-device-manager/0500_configmap.yaml`).
pub fn lab_hardware(wc: WorkloadConfig) -> GpuHardware {
    match wc {
        WorkloadConfig::Container => GpuHardware::a10(4),
        WorkloadConfig::VmPassthrough => GpuHardware::a10(2),
        WorkloadConfig::VmVgpu => GpuHardware {
            vgpu_config: Some("A10-12Q".into()),
            ..GpuHardware::a10(2)
        },
    }
}

/// Puts `hw`'s labels and annotation ([`GpuHardware::labels`]) on node `name`.
///
/// Errors: [`Error::Runtime`] on API failure.
pub async fn apply_hardware(client: &Client, name: &str, hw: &GpuHardware) -> Result<()> {
    let (labels, annotations) = hw.labels();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels, "annotations": annotations}})),
        )
        .await
        .map_err(|e| api_error(&format!("label node {name}"), &e))?;
    Ok(())
}

/// The operator's name for the operand of a pod of DaemonSet `app`: `nvidia-` and
/// `-daemonset` taken off (`nvidia-driver-daemonset` → `driver`, `nvidia-vfio-manager` →
/// `vfio-manager`, `gpu-feature-discovery` unchanged): the names of its
/// `nvidia.com/gpu.deploy.<operand>` labels.
pub(crate) fn operand_name(app: &str) -> String {
    let a = app.strip_prefix("nvidia-").unwrap_or(app);
    a.strip_suffix("-daemonset").unwrap_or(a).to_string()
}

/// Running operand pods per node in the operator's namespace, as operand names.
///
/// Errors: [`Error::Runtime`] on API failure.
pub async fn running_operands(client: &Client) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NAMESPACE);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pods
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error(&format!("list pods in {OPERATOR_NAMESPACE}"), &e))?
        .items
    {
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if !running || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (Some(node), Some(app)) = (
            p.spec.as_ref().and_then(|s| s.node_name.clone()),
            gpusim::daemonset_of(&p),
        ) else {
            continue;
        };
        out.entry(node).or_default().insert(operand_name(&app));
    }
    Ok(out)
}

/// The operand that decides what a node of `wc` advertises: `device-plugin` for
/// container, `sandbox-device-plugin` otherwise.
fn plugin_of(wc: WorkloadConfig) -> &'static str {
    match wc {
        WorkloadConfig::Container => "device-plugin",
        _ => "sandbox-device-plugin",
    }
}

/// The operands a node of `wc` needs before its plugin can advertise anything: its plugin,
/// and for the sandbox configs the manager that prepares the GPUs (`vfio-manager`,
/// `vgpu-device-manager`).
fn needed(wc: WorkloadConfig) -> &'static [&'static str] {
    match wc {
        WorkloadConfig::Container => &["device-plugin"],
        WorkloadConfig::VmPassthrough => &["sandbox-device-plugin", "vfio-manager"],
        WorkloadConfig::VmVgpu => &["sandbox-device-plugin", "vgpu-device-manager"],
    }
}

/// Waits until the ClusterPolicy says `ready` and every `(node, config)` runs the device
/// plugin of its config and the manager that prepares its GPUs, and no plugin of another
/// config, then returns the running operands per
/// node (lab nodes only).
///
/// Errors: [`Error::Runtime`] after [`OPERATOR_WAIT`], saying what was seen.
pub async fn wait_operands(
    client: &Client,
    nodes: &[(String, WorkloadConfig)],
) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let deadline = Instant::now() + OPERATOR_WAIT;
    loop {
        let state = gpu_operator::policy_state(client).await;
        let running = running_operands(client).await?;
        let settled = nodes.iter().all(|(n, wc)| {
            let ops = running.get(n);
            let has = |o: &str| ops.is_some_and(|s| s.contains(o));
            let wrong = WorkloadConfig::ALL
                .iter()
                .filter(|other| plugin_of(**other) != plugin_of(*wc))
                .any(|other| has(plugin_of(*other)));
            needed(*wc).iter().all(|o| has(o)) && !wrong
        });
        if settled && state.as_deref() == Some("ready") {
            return Ok(nodes
                .iter()
                .map(|(n, _)| (n.clone(), running.get(n).cloned().unwrap_or_default()))
                .collect());
        }
        if Instant::now() > deadline {
            let seen: Vec<String> = nodes
                .iter()
                .map(|(n, _)| {
                    let ops: Vec<String> = running
                        .get(n)
                        .map(|s| s.iter().cloned().collect())
                        .unwrap_or_default();
                    format!(
                        "{n}: {}",
                        if ops.is_empty() {
                            "none".into()
                        } else {
                            ops.join(",")
                        }
                    )
                })
                .collect();
            return Err(Error::Runtime(format!(
                "the GPU Operator did not settle in {} s (ClusterPolicy state {}; operands {})",
                OPERATOR_WAIT.as_secs(),
                state.as_deref().unwrap_or("unset"),
                seen.join("; ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The `nvidia.com/` resources of a node with a non-zero amount in both capacity and
/// allocatable (name → amount as written).
pub fn advertised_now(node: &Node) -> BTreeMap<String, String> {
    let st = node.status.as_ref();
    let cap = st.and_then(|s| s.capacity.as_ref());
    let alloc = st.and_then(|s| s.allocatable.as_ref());
    cap.map(|c| {
        c.iter()
            .filter(|(k, v)| {
                k.starts_with(NVIDIA_PREFIX)
                    && v.0 != "0"
                    && alloc.and_then(|a| a.get(*k)).is_some_and(|a| a.0 == v.0)
            })
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect()
    })
    .unwrap_or_default()
}

/// Waits until each node advertises exactly `(resource, amount)` among its non-zero
/// `nvidia.com/` resources, and returns what each node advertises then.
///
/// Errors: [`Error::Runtime`] after [`OPERATOR_WAIT`], saying what each node advertised.
pub async fn wait_advertised(
    client: &Client,
    want: &[(String, String, u32)],
) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + OPERATOR_WAIT;
    loop {
        let mut seen = BTreeMap::new();
        for (node, _, _) in want {
            let n = api
                .get(node)
                .await
                .map_err(|e| api_error(&format!("get node {node}"), &e))?;
            seen.insert(node.clone(), advertised_now(&n));
        }
        let ok = want.iter().all(|(node, res, amount)| {
            seen[node] == BTreeMap::from([(res.clone(), amount.to_string())])
        });
        if ok {
            return Ok(seen);
        }
        if Instant::now() > deadline {
            let text: Vec<String> = seen
                .iter()
                .map(|(n, m)| {
                    let r: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!(
                        "{n}: {}",
                        if r.is_empty() {
                            "nothing".into()
                        } else {
                            r.join(",")
                        }
                    )
                })
                .collect();
            return Err(Error::Runtime(format!(
                "the device plugins did not advertise the lab's resources in {} s ({})",
                OPERATOR_WAIT.as_secs(),
                text.join("; ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The table's operand names in the operator's vocabulary (`datacenter-driver` →
/// `driver`).
fn table_operands(wc: WorkloadConfig) -> BTreeSet<String> {
    wc.operands_docs()
        .iter()
        .map(|o| match *o {
            "datacenter-driver" => "driver".to_string(),
            other => other.to_string(),
        })
        .collect()
}

/// `out/operands-observed.txt`: one line `<node> <config>=<operand>,…` per lab node (by
/// node name, operands sorted), then `DIFFERENCE=<sentence>` comparing them with the lab's
/// table ([`difference_sentence`]).
pub fn observed_lines(
    nodes: &[(String, WorkloadConfig)],
    observed: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut sorted: Vec<&(String, WorkloadConfig)> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut lines: Vec<String> = sorted
        .iter()
        .map(|(n, wc)| {
            let ops: Vec<&str> = observed
                .get(n)
                .map(|s| s.iter().map(String::as_str).collect())
                .unwrap_or_default();
            format!("{n} {}={}", wc.as_str(), ops.join(","))
        })
        .collect();
    lines.push(format!(
        "DIFFERENCE={}",
        difference_sentence(nodes, observed)
    ));
    lines
}

/// One sentence: per workload config, what the operator deployed beyond the lab's table
/// (which lists only the operands that set up the GPU and advertise its name) and what of
/// the table it did not deploy; the table's `datacenter-driver` is the operator's `driver`.
pub(crate) fn difference_sentence(
    nodes: &[(String, WorkloadConfig)],
    observed: &BTreeMap<String, BTreeSet<String>>,
) -> String {
    let mut parts = Vec::new();
    for (n, wc) in nodes {
        let seen = observed.get(n).cloned().unwrap_or_default();
        let table = table_operands(*wc);
        let extra: Vec<&str> = seen.difference(&table).map(String::as_str).collect();
        let missing: Vec<&str> = table.difference(&seen).map(String::as_str).collect();
        let mut p = format!("on {} ({n})", wc.as_str());
        if extra.is_empty() {
            p.push_str(" nothing beyond the table");
        } else {
            p.push_str(&format!(" also {}", extra.join(", ")));
        }
        if !missing.is_empty() {
            p.push_str(&format!(", but not {}", missing.join(", ")));
        }
        parts.push(p);
    }
    format!(
        "the operator deployed the table's operands (its driver is the table's datacenter-driver) and more: {}; the table lists only what sets up the GPU and names the resource",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operand_names_are_the_deploy_label_names() {
        assert_eq!(operand_name("nvidia-driver-daemonset"), "driver");
        assert_eq!(operand_name("nvidia-vfio-manager"), "vfio-manager");
        assert_eq!(
            operand_name("gpu-feature-discovery"),
            "gpu-feature-discovery"
        );
        assert_eq!(
            operand_name("nvidia-sandbox-device-plugin-daemonset"),
            "sandbox-device-plugin"
        );
        for wc in WorkloadConfig::ALL {
            for t in table_operands(wc) {
                assert!(wc.deploy_labels().contains(&t.as_str()), "{t}");
            }
        }
    }

    #[test]
    fn observed_file_lists_nodes_and_the_difference() {
        let nodes = vec![
            ("lab-node-1".to_string(), WorkloadConfig::VmPassthrough),
            ("lab-node-0".to_string(), WorkloadConfig::Container),
        ];
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let observed = BTreeMap::from([
            (
                "lab-node-0".to_string(),
                set(&[
                    "driver",
                    "container-toolkit",
                    "device-plugin",
                    "dcgm-exporter",
                    "dcgm",
                ]),
            ),
            (
                "lab-node-1".to_string(),
                set(&["sandbox-device-plugin", "sandbox-validator"]),
            ),
        ]);
        let lines = observed_lines(&nodes, &observed);
        assert_eq!(
            lines[0],
            "lab-node-0 container=container-toolkit,dcgm,dcgm-exporter,device-plugin,driver"
        );
        assert_eq!(
            lines[1],
            "lab-node-1 vm-passthrough=sandbox-device-plugin,sandbox-validator"
        );
        assert!(
            lines[2].contains(
                "on vm-passthrough (lab-node-1) also sandbox-validator, but not vfio-manager"
            ),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].contains("on container (lab-node-0) also dcgm;"),
            "{}",
            lines[2]
        );
    }
}
