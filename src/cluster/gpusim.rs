//! The device-plugin emulation on the local control plane: it stands in for the one part of
//! the GPU Operator's work that needs real hardware. Every [`EMULATION_PERIOD`] it reads the
//! nodes carrying simulated GPUs ([`HARDWARE_ANNOTATION`]), the operand pods running on
//! them, the ClusterPolicy and the operands' ConfigMaps, asks the model
//! (`gpuwl_core::model::gpusim`: hardware labels, the MIG manager, the device plugins'
//! configs, strategies and resources) what each node now carries, and writes that to the
//! node's metadata and `status` as the MIG manager, GFD and the kubelet would.

use std::collections::BTreeMap;

use gpuwl_core::model::gpusim::{
    ConfigFiles, GpuHardware, HARDWARE_ANNOTATION, MigConfigFile, NodeOperands, NodeState,
    NodeStep, PolicySettings, VgpuConfigFile, node_step,
};

use crate::input::live::api_error;
use gpuwl_core::error::Result;
use gpuwl_core::text;

/// The DaemonSet that owns an operand pod (its `ownerReferences` entry of kind
/// `DaemonSet`), else its `app` or `name` label: the operator's DaemonSet names are stable
/// while their pod labels are not (the VFIO manager's pods carry `name=`, not `app=`,
/// NVIDIA/gpu-operator `assets/state-vfio-manager/0600_daemonset.yaml`).
pub fn daemonset_of(pod: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
    let m = &pod.metadata;
    m.owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "DaemonSet")
        .map(|o| o.name.clone())
        .or_else(|| {
            let l = m.labels.as_ref()?;
            l.get("app").or_else(|| l.get("name")).cloned()
        })
}

/// How often [`emulate`] looks at pods and nodes.
pub(crate) const EMULATION_PERIOD: std::time::Duration = std::time::Duration::from_millis(500);

/// One pass of the emulation: for every node with [`HARDWARE_ANNOTATION`], works out from
/// the operand pods running on it in `namespace` what its device plugins advertise and
/// writes that into its status ([`status_update`]) through the `status` subresource, as a
/// kubelet would. Returns the number of nodes updated.
///
/// Errors: [`Error::Runtime`](gpuwl_core::error::Error::Runtime) on an API failure (the caller retries on the next pass).
pub async fn emulate_once(client: &kube::Client, namespace: &str) -> Result<usize> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::Api;
    let nodes: Api<Node> = Api::all(client.clone());
    let gpu_nodes = gpu_nodes(&nodes).await?;
    if gpu_nodes.is_empty() {
        return Ok(0);
    }
    let running = running_operands(client, namespace).await?;
    let settings = PolicySettings::from_spec(&policy_spec(client).await);
    let files = config_files(client, namespace, &settings).await;
    let mut updated = 0;
    for (node, hw) in gpu_nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let ops = running.get(&name).copied().unwrap_or_default();
        let step = node_step(&node_state(&node), &hw, ops, &settings, &files);
        if write_node(&nodes, &name, step).await? {
            updated += 1;
        }
    }
    Ok(updated)
}

/// The nodes with [`HARDWARE_ANNOTATION`], each with the hardware it describes.
async fn gpu_nodes(
    nodes: &kube::api::Api<k8s_openapi::api::core::v1::Node>,
) -> Result<Vec<(k8s_openapi::api::core::v1::Node, GpuHardware)>> {
    let node_list = nodes
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| api_error("list nodes", &e))?;
    Ok(node_list
        .items
        .into_iter()
        .filter_map(|n| {
            let hw = n
                .metadata
                .annotations
                .as_ref()?
                .get(HARDWARE_ANNOTATION)
                .and_then(|a| serde_json::from_str::<GpuHardware>(a).ok())?;
            Some((n, hw))
        })
        .collect())
}

/// Per node, the operand pods running in `namespace` (phase Running, not being deleted).
async fn running_operands(
    client: &kube::Client,
    namespace: &str,
) -> Result<BTreeMap<String, NodeOperands>> {
    use k8s_openapi::api::core::v1::Pod;
    let pods: kube::api::Api<Pod> = kube::api::Api::namespaced(client.clone(), namespace);
    let mut running: BTreeMap<String, NodeOperands> = BTreeMap::new();
    for p in pods
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| api_error(&format!("list pods in {namespace}"), &e))?
        .items
    {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if p.metadata.deletion_timestamp.is_some() || phase != Some("Running") {
            continue;
        }
        let (Some(node), Some(ds)) = (
            p.spec.as_ref().and_then(|s| s.node_name.clone()),
            daemonset_of(&p),
        ) else {
            continue;
        };
        running.entry(node).or_default().add(&ds);
    }
    Ok(running)
}

/// The ClusterPolicy's `spec` (`null` when there is none or it cannot be read).
async fn policy_spec(client: &kube::Client) -> serde_json::Value {
    let policy: kube::api::Api<kube::api::DynamicObject> =
        kube::api::Api::all_with(client.clone(), &super::gpu_operator::policy_resource());
    policy
        .get_opt(super::gpu_operator::POLICY_NAME)
        .await
        .ok()
        .flatten()
        .map(|o| o.data["spec"].clone())
        .unwrap_or_default()
}

/// Reads the ConfigMaps `settings` names in `namespace`.
async fn config_files(
    client: &kube::Client,
    namespace: &str,
    settings: &PolicySettings,
) -> ConfigFiles {
    use k8s_openapi::api::core::v1::ConfigMap;
    let cms: kube::api::Api<ConfigMap> = kube::api::Api::namespaced(client.clone(), namespace);
    let cm_data = |name: &str| {
        let cms = cms.clone();
        let name = name.to_string();
        async move {
            cms.get_opt(&name)
                .await
                .ok()
                .flatten()
                .map(|cm| cm.data.unwrap_or_default())
        }
    };
    let vgpu = cm_data(&settings.vgpu_configmap)
        .await
        .and_then(|d| d.get("config.yaml").cloned())
        .and_then(|t| VgpuConfigFile::parse(&t).ok());
    let mig = cm_data(&settings.mig_configmap).await.map(|d| {
        d.get("config.yaml")
            .ok_or_else(|| "no config.yaml".to_string())
            .and_then(|t| MigConfigFile::parse(t))
    });
    let plugin = match &settings.plugin_configmap {
        Some(n) => cm_data(n).await,
        None => None,
    };
    ConfigFiles { vgpu, mig, plugin }
}

/// The node's labels, annotations, `status.capacity` and `status.allocatable` (as quantity
/// text), as the model reads them.
fn node_state(node: &k8s_openapi::api::core::v1::Node) -> NodeState {
    let quantities = |m: Option<
        &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >|
     -> BTreeMap<String, String> {
        m.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
            .unwrap_or_default()
    };
    let status = node.status.as_ref();
    NodeState {
        labels: node.metadata.labels.clone().unwrap_or_default(),
        annotations: node.metadata.annotations.clone().unwrap_or_default(),
        capacity: quantities(status.and_then(|s| s.capacity.as_ref())),
        allocatable: quantities(status.and_then(|s| s.allocatable.as_ref())),
    }
}

/// Writes `step` to node `name`: the metadata, then the status (reporting a device plugin
/// that registers nothing first). Returns whether the status changed.
async fn write_node(
    nodes: &kube::api::Api<k8s_openapi::api::core::v1::Node>,
    name: &str,
    step: NodeStep,
) -> Result<bool> {
    use kube::api::{Patch, PatchParams};
    if let Some(meta) = step.metadata {
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "metadata": meta })),
            )
            .await
            .map_err(|e| api_error(&format!("label node {name}"), &e))?;
    }
    let Some(want) = step.status else {
        return Ok(false);
    };
    if let Some(e) = &step.plugin_error {
        eprintln!(
            "node {}: the device plugin registers nothing: {}",
            text::esc(name),
            text::cut(e)
        );
    }
    let patch = serde_json::json!({
        "status": { "capacity": &want, "allocatable": &want }
    });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error(&format!("update the status of node {name}"), &e))?;
    Ok(true)
}

/// Runs [`emulate_once`] every [`EMULATION_PERIOD`] until the process is stopped; an API
/// failure is logged to stderr and retried on the next pass.
pub async fn emulate(client: kube::Client, namespace: &str) -> Result<()> {
    loop {
        match emulate_once(&client, namespace).await {
            Ok(n) if n > 0 => eprintln!("updated the advertised GPU resources of {n} node(s)"),
            Ok(_) => {}
            Err(e) => eprintln!("{e}"),
        }
        tokio::time::sleep(EMULATION_PERIOD).await;
    }
}
