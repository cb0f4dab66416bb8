//! The lab's ninth step (`gpuwl lab --dra`): the same GPUs as DRA devices on the same
//! cluster. Two DeviceClasses (`gpu.nvidia.com` selecting devices of `type` `gpu`,
//! `vfio.gpu.nvidia.com` those of `type` `vfio`), and per lab node a ResourceSlice pair of
//! pool `<node>` under driver `gpu.nvidia.com` (the name and attributes of
//! NVIDIA/k8s-dra-driver-gpu `cmd/gpu-kubelet-plugin/deviceinfo.go`): one slice with a
//! shared counter set per physical GPU, one with two devices per GPU (`gpu-<i>` and
//! `gpu-vfio-<i>`) consuming it. Then, in namespace [`NAMESPACE`], the seed's three
//! requests as claims: the container job (a `gpu` claim, on the container node), the
//! passthrough VM (a `vfio` claim) and the cross request (a `gpu` claim, still confined to
//! the passthrough node by its nodeSelector) — served now, since the passthrough node's GPUs are one pool for both
//! device types. Writes `out/09-dra.txt`: `<pod> <node|none>` per pod, then one `POOL` line.
//!
//! Claims are created directly (no templates: the lab's control plane runs no
//! kube-controller-manager). A re-run keeps what exists (an allocated claim cannot be
//! deleted without the resource claim controller) and reads the pods back.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::input::live::api_err;
use crate::lab::files::{self, LabDirs};
use crate::lab::{LabNodes, kubeops};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::workload::{LABEL_KEY, WorkloadConfig};

/// The namespace of the DRA step's claims and pods.
pub const NAMESPACE: &str = "gpu-dra";

/// The driver name the step publishes devices under (NVIDIA's DRA driver).
pub const DRIVER: &str = "gpu.nvidia.com";

/// Physical GPUs per lab node.
pub(crate) const GPUS_PER_NODE: usize = 2;

/// The step's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraStep {
    /// `(pod, node)` in the order created; `None` when not bound.
    pub pods: Vec<(String, Option<String>)>,
    /// The `POOL ...` line of `09-dra.txt`.
    pub pool_line: String,
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value, what: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(obj)
        .map_err(|e| Error::failed(format!("{what}: cannot build the object"), e))?;
    match api.create(&PostParams::default(), &o).await {
        Ok(_) => Ok(()),
        Err(e) if crate::input::live::already_exists(&e) => Ok(()),
        Err(e) => Err(api_err(&format!("create {what}"))(e)),
    }
}

/// The DeviceClass selecting devices of `type` `t` of [`DRIVER`].
fn class(name: &str, t: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": format!(
            "device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{t}'"
        )}}]}
    })
}

/// Runs the step on `client` for the lab's `nodes`; writes `out/09-dra.txt`.
///
/// Errors: [`Error::Runtime`] when the cluster does not serve `resource.k8s.io/v1`, an
/// object is refused, a pod is not decided in time, or the file cannot be written.
pub async fn run(client: &Client, nodes: &LabNodes, dirs: &LabDirs) -> Result<DraStep> {
    kubeops::ensure_namespace(client, NAMESPACE).await?;
    crate::cluster::accounts::ensure_default_service_account(client, NAMESPACE).await?;
    let classes: Api<DeviceClass> = Api::all(client.clone());
    create(
        &classes,
        class("gpu.nvidia.com", "gpu"),
        "DeviceClass gpu.nvidia.com",
    )
    .await?;
    create(
        &classes,
        class("vfio.gpu.nvidia.com", "vfio"),
        "DeviceClass vfio.gpu.nvidia.com",
    )
    .await?;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let all = [
        nodes.node(WorkloadConfig::Container),
        nodes.node(WorkloadConfig::VmPassthrough),
        nodes.node(WorkloadConfig::VmVgpu),
    ];
    for (k, node) in all.iter().enumerate() {
        let pool = json!({"name": node, "generation": 1, "resourceSliceCount": 2});
        let counters: Vec<_> = (0..GPUS_PER_NODE)
            .map(|i| json!({"name": format!("gpu-{i}"), "counters": {"gpu": {"value": "1"}}}))
            .collect();
        create(
            &slices,
            json!({
                "metadata": {"name": format!("{node}-{DRIVER}-counters")},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "sharedCounters": counters}
            }),
            &format!("ResourceSlice {node}-{DRIVER}-counters"),
        )
        .await?;
        let mut devices = Vec::new();
        for i in 0..GPUS_PER_NODE {
            let uuid = format!("GPU-{k:02}{i:02}0000-0000-0000-0000-000000000000");
            let bus = format!("0000:{:02x}:00.0", 0x3b + i);
            let uses =
                json!([{"counterSet": format!("gpu-{i}"), "counters": {"gpu": {"value": "1"}}}]);
            devices.push(json!({"name": format!("gpu-{i}"),
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid},
                               "productName": {"string": "NVIDIA A10"}, "pcieBusID": {"string": bus}},
                "capacity": {"memory": {"value": "24Gi"}},
                "consumesCounters": uses}));
            devices.push(json!({"name": format!("gpu-vfio-{i}"),
                "attributes": {"type": {"string": "vfio"}, "uuid": {"string": uuid},
                               "productName": {"string": "NVIDIA A10"}, "pcieBusID": {"string": bus}},
                "consumesCounters": uses}));
        }
        create(
            &slices,
            json!({
                "metadata": {"name": format!("{node}-{DRIVER}-devices")},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices}
            }),
            &format!("ResourceSlice {node}-{DRIVER}-devices"),
        )
        .await?;
    }
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NAMESPACE);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let plan: [(&str, &str, Option<&str>); 3] = [
        // The container job keeps to its node, as in the seed (there only that node had
        // nvidia.com/gpu); unconfined, the scheduler may place it on the passthrough node
        // and take one of its two GPUs first.
        ("job-container", "gpu.nvidia.com", Some("container")),
        (
            "vmi-passthrough",
            "vfio.gpu.nvidia.com",
            Some("vm-passthrough"),
        ),
        ("job-cross", "gpu.nvidia.com", Some("vm-passthrough")),
    ];
    let mut out = Vec::new();
    for (pod, class, selector) in plan {
        let claim = format!("{pod}-claim");
        create(
            &claims,
            json!({
                "metadata": {"name": claim, "namespace": NAMESPACE},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}
            }),
            &format!("ResourceClaim {NAMESPACE}/{claim}"),
        )
        .await?;
        let seen = match pods_api
            .get_opt(pod)
            .await
            .map_err(api_err(&format!("get pod {NAMESPACE}/{pod}")))?
        {
            Some(p) => p,
            None => {
                let mut spec = json!({
                    "containers": [{"name": "cuda", "image": crate::lab::manifests::IMAGE,
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]
                });
                if let Some(v) = selector {
                    spec["nodeSelector"] = json!({ LABEL_KEY: v });
                }
                let p: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod, "namespace": NAMESPACE},
                    "spec": spec
                }))
                .map_err(|e| Error::failed(format!("pod {pod}"), e))?;
                kubeops::create_and_await_scheduling(client, &p).await?
            }
        };
        let node = seen
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        out.push((pod.to_owned(), node));
    }
    let (dra, _) = crate::input::dra::list(client).await?;
    let inv = gpuwl_core::analysis::dra::inventory(
        &dra,
        gpuwl_core::model::dra::DraSource::Cluster,
        &[],
        None,
    );
    let types: Vec<&str> = {
        let mut t: Vec<&str> = inv.rows.iter().map(|r| r.device_type.as_str()).collect();
        t.sort();
        t.dedup();
        t
    };
    let pool_line = format!(
        "POOL {DRIVER} GPUS={} IN_USE={} FREE={} TYPES={}",
        inv.physical_gpus,
        inv.physical_in_use,
        inv.physical_gpus.saturating_sub(inv.physical_in_use),
        types.join(",")
    );
    let mut lines: Vec<String> = out
        .iter()
        .map(|(p, n)| format!("{p} {}", n.as_deref().unwrap_or("none")))
        .collect();
    lines.push(pool_line.clone());
    files::write_lines(&dirs.out.join("09-dra.txt"), &lines)?;
    Ok(DraStep {
        pods: out,
        pool_line,
    })
}
