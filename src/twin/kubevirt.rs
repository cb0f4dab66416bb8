//! The twin with KubeVirt (`gpuwl whatif relabel --kubevirt`, `gpuwl plan --kubevirt`):
//! pending VMs are not modelled as pods but created as real VirtualMachineInstances in a
//! twin that runs KubeVirt's virt-api and virt-controller ([`crate::cluster::kubevirt`]),
//! with the source's `permittedHostDevices` in the twin's KubeVirt CR. virt-controller
//! then decides what it decides in the cluster: it renders a virt-launcher pod that the
//! twin's kube-scheduler places or leaves Pending, or it refuses the VMI
//! (`Synchronized=False`, `FailedCreate`, "… is not permitted in permittedHostDevices
//! configuration": kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`
//! `validatePermittedHostDevices`, v1.7.0). A relabel's effect on VMs is then KubeVirt's
//! and the scheduler's, not gpuwl's model of them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::input::live::api_error;
use gpuwl_core::analysis::explain;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::kubevirt::PermittedHostDevices;
use gpuwl_core::model::pod::{ObjectKind, PodInfo};
use gpuwl_core::model::resource::NVIDIA_PREFIX;

use super::objects::SOURCE_KIND_LABEL;
use crate::cluster::kubevirt;
use crate::input::{pods, virt};
use gpuwl_core::analysis::twin::report::{PendingByTwin, StillPending, pod_ref};

/// The VMI a pending source entry stands for: a VMI (or VM) by its own name, a pending
/// virt-launcher pod by the VMI it runs ([`PodInfo::launcher_vmi`]); `None` for other pods.
pub fn vmi_name(p: &PodInfo) -> Option<&str> {
    if p.is_vm() {
        Some(p.name.as_str())
    } else if p.node_name.is_none() {
        p.launcher_vmi()
    } else {
        None
    }
}

/// The VirtualMachineInstance the twin creates for a pending source entry named `name`:
/// one `gpus[]` entry per unit of each `nvidia.com/` name it asks (virt-controller vets
/// `gpus[]` and `hostDevices[]` against one permitted list and renders both as
/// `<deviceName>: 1` per entry, `renderresources.go`; `gpus[]` needs no feature gate), the
/// memory it asks (a VMI's or VM's own `domain.memory.guest` / `domain.resources.requests.memory`
/// as written, [`PodInfo::vm_memory`]; else a launcher pod's memory request; else 128 MiB),
/// and its nodeSelector, required node affinity
/// and tolerations, which virt-controller copies to the launcher pod.
pub fn vmi_object(p: &PodInfo, name: &str) -> Value {
    let mut gpus = Vec::new();
    for (r, n) in p.requests.iter() {
        if !r.starts_with(NVIDIA_PREFIX) {
            continue;
        }
        for _ in 0..(*n).max(0) {
            gpus.push(json!({"name": format!("gpu{}", gpus.len()), "deviceName": r}));
        }
    }
    let mut domain = json!({"devices": {"gpus": gpus}});
    match p.vm_memory.as_deref() {
        // A VMI or VM: its own memory fields, from which virt-controller computes the
        // launcher pod's request as it would in the cluster.
        Some(m) => {
            if let Some(g) = &m.guest {
                domain["memory"] = json!({"guest": g});
            }
            if let Some(r) = &m.request {
                domain["resources"] = json!({"requests": {"memory": r}});
            }
        }
        // A launcher pod (its request, overhead included) or nothing known.
        None => {
            let memory = p
                .other_requests
                .get("memory")
                .filter(|m| **m > 0)
                .map(|m| m.to_string())
                .unwrap_or_else(|| "128Mi".into());
            domain["resources"] = json!({"requests": {"memory": memory}});
        }
    }
    let mut spec = json!({
        "domain": domain,
        "terminationGracePeriodSeconds": 0,
    });
    super::objects::add_placement(&mut spec, p);
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": name,
            "namespace": p.namespace,
            "labels": {SOURCE_KIND_LABEL: p.kind.as_str()},
        },
        "spec": spec,
    })
}

/// `spec.configuration.permittedHostDevices` of the twin's KubeVirt CR for the source's
/// list: `null` (no list: virt-controller vets no name) when the source has none or does
/// not say; else its PCI and mediated entries as KubeVirt spells them
/// (`pciVendorSelector`, `mdevNameSelector`, `resourceName`, `externalResourceProvider`).
pub(crate) fn permitted_json(p: Option<&PermittedHostDevices>) -> Value {
    match p {
        Some(p) if p.present => json!({
            "pciHostDevices": p.pci_host_devices.iter().map(|d| json!({
                "pciVendorSelector": d.selector,
                "resourceName": d.resource_name,
                "externalResourceProvider": d.external_resource_provider,
            })).collect::<Vec<_>>(),
            "mediatedDevices": p.mediated_devices.iter().map(|d| json!({
                "mdevNameSelector": d.selector,
                "resourceName": d.resource_name,
                "externalResourceProvider": d.external_resource_provider,
            })).collect::<Vec<_>>(),
        }),
        _ => Value::Null,
    }
}

/// Writes the source's list into the twin's KubeVirt CR and gives virt-controller time to
/// read it through its informer (2 s).
///
/// Errors: [`Error::Runtime`] when the CR cannot be patched.
pub async fn configure(client: &Client, permitted: Option<&PermittedHostDevices>) -> Result<()> {
    kubevirt::set_configuration(
        client,
        &json!({"permittedHostDevices": permitted_json(permitted)}),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// Waits until every node has the labels and `devices.kubevirt.io/*` resources
/// virt-handler would publish (the twin's emulation adds them every 2 s): a launcher pod
/// asks for one of each.
///
/// Errors: [`Error::Runtime`] when a node still lacks them after `timeout`, or nodes
/// cannot be listed.
pub async fn wait_published(client: &Client, timeout: Duration) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        let nodes = api
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error("list the twin's nodes", &e))?;
        let lacking: Vec<String> = nodes
            .items
            .iter()
            .filter(|n| kubevirt::node_needs_kubevirt(n))
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        if lacking.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Runtime(format!(
                "the twin's KubeVirt node emulation did not publish {} within {} s",
                lacking.join(", "),
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The twin's VMIs by `namespace/name`.
async fn list_vmis(client: &Client) -> Result<BTreeMap<String, Value>> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &virt::resource("VirtualMachineInstance", "virtualmachineinstances"),
    );
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error("list the twin's VMIs", &e))?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|o| {
            let key = format!(
                "{}/{}",
                o.metadata.namespace.as_deref()?,
                o.metadata.name.as_deref()?
            );
            serde_json::to_value(&o).ok().map(|v| (key, v))
        })
        .collect())
}

/// Whether virt-controller refused `vmi`: its `Synchronized=False` condition with reason
/// `FailedCreate`; the condition's message.
fn refusal(vmi: &Value) -> Option<String> {
    vmi["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Synchronized" && c["status"] == "False")
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
}

/// Waits until virt-controller has decided each of `vmis` (twin key → source): it has a
/// launcher pod, or a refusal. Returns the keys still undecided after `timeout` (the
/// report notes them).
///
/// Errors: [`Error::Runtime`] when the twin cannot be listed.
pub async fn wait_rendered(
    client: &Client,
    vmis: &PendingByTwin<'_>,
    timeout: Duration,
) -> Result<Vec<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        let objects = list_vmis(client).await?;
        let pods = pods::list_pods(client).await?;
        let launchers = launchers_of(&pods, vmis);
        let undecided: Vec<String> = vmis
            .keys()
            .filter(|k| {
                !launchers.values().any(|v| v == *k) && objects.get(*k).and_then(refusal).is_none()
            })
            .cloned()
            .collect();
        if undecided.is_empty() || Instant::now() > deadline {
            return Ok(undecided);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The launcher pods among `pods` of the twin's VMIs: pod key → VMI key.
fn launchers_of(pods: &[PodInfo], vmis: &PendingByTwin<'_>) -> BTreeMap<String, String> {
    pods.iter()
        .filter_map(|p| {
            let key = format!("{}/{}", p.namespace, p.launcher_vmi()?);
            vmis.contains_key(&key).then(|| (p.key(), key))
        })
        .collect()
}

/// `pending` (the twin's copied pending pods by twin key) with the launcher pods of the
/// twin's VMIs added under their own keys, each mapped to its VMI's source entry, so the
/// read-back (placed, still pending, not disrupted) treats a rendered launcher pod as the
/// pending VM it stands for.
pub fn with_launchers<'a>(
    pending: &PendingByTwin<'a>,
    vmis: &PendingByTwin<'a>,
    pods: &[PodInfo],
) -> PendingByTwin<'a> {
    let mut all = pending.clone();
    for (pod, vmi) in launchers_of(pods, vmis) {
        if let Some(src) = vmis.get(&vmi) {
            all.insert(pod, *src);
        }
    }
    all
}

/// The twin's VMIs that virt-controller refused and that have no launcher pod, as still
/// pending, each explained by `gpuwl explain vmi`'s own path ([`explain::vm::explain_vm`])
/// on the twin's state (`inputs`: its nodes and pods, `pods` again for the launchers),
/// with virt-controller's message as the scheduler message.
///
/// Errors: [`Error::Runtime`] when the twin cannot be read; explain's errors.
pub async fn refused(
    client: &Client,
    vmis: &PendingByTwin<'_>,
    pods: &[PodInfo],
    inputs: explain::Inputs<'_>,
) -> Result<Vec<StillPending>> {
    if vmis.is_empty() {
        // No VMI was made (a twin without KubeVirt has no VMI API to ask).
        return Ok(Vec::new());
    }
    let objects = list_vmis(client).await?;
    let launchers = launchers_of(pods, vmis);
    let mut out = Vec::new();
    for (key, src) in vmis {
        if launchers.values().any(|v| v == key) {
            continue;
        }
        let Some(vmi) = objects.get(key) else {
            continue;
        };
        let Some(message) = refusal(vmi) else {
            continue;
        };
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let o = virt::read(client, ObjectKind::VirtualMachineInstance, ns, name).await?;
        let e = explain::vm::explain_vm(&o, inputs)?;
        out.push(StillPending {
            pod: pod_ref(src, Some(&src.key())),
            scheduler_message: Some(message),
            cause_code: e.cause_code.as_str().to_string(),
            cause: e.cause,
            fix: e.fix,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuwl_core::model::kubevirt::{HostDevicesSource, MediatedDevice, PciHostDevice};
    use std::sync::Arc;

    fn vmi(name: &str, requests: &[(&str, i64)]) -> PodInfo {
        PodInfo {
            kind: ObjectKind::VirtualMachineInstance,
            namespace: "gpu-vm".into(),
            name: name.into(),
            requests: Arc::new(requests.iter().map(|(r, n)| (r.to_string(), *n)).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn a_vmi_asks_one_gpu_entry_per_unit_of_each_name() {
        let mut p = vmi(
            "vm-a",
            &[
                ("nvidia.com/GA102GL_A10", 2),
                ("nvidia.com/NVIDIA_A10-12Q", 1),
                ("devices.kubevirt.io/kvm", 1),
            ],
        );
        p.node_selector
            .insert("kubernetes.io/hostname".into(), "gpu-1".into());
        let v = vmi_object(&p, "vm-a");
        let gpus = v["spec"]["domain"]["devices"]["gpus"].as_array().unwrap();
        let names: Vec<&str> = gpus
            .iter()
            .map(|g| g["deviceName"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "nvidia.com/GA102GL_A10",
                "nvidia.com/GA102GL_A10",
                "nvidia.com/NVIDIA_A10-12Q"
            ]
        );
        assert_eq!(gpus[2]["name"], "gpu2");
        assert_eq!(v["spec"]["nodeSelector"]["kubernetes.io/hostname"], "gpu-1");
        assert_eq!(
            v["spec"]["domain"]["resources"]["requests"]["memory"],
            "128Mi"
        );
        assert_eq!(v["metadata"]["namespace"], p.namespace);
        assert!(v["spec"].get("tolerations").is_none());
        // A VMI's own memory goes to the twin's VMI as written (virt-controller adds its
        // overhead to the launcher's request, as in the cluster).
        p.vm_memory = Some(Box::new(gpuwl_core::model::pod::VmMemory {
            guest: Some("48Gi".into()),
            request: None,
        }));
        let v = vmi_object(&p, "vm-a");
        assert_eq!(v["spec"]["domain"]["memory"]["guest"], "48Gi");
        assert!(v["spec"]["domain"].get("resources").is_none(), "{v}");
        p.vm_memory = Some(Box::new(gpuwl_core::model::pod::VmMemory {
            guest: Some("48Gi".into()),
            request: Some("50Gi".into()),
        }));
        let v = vmi_object(&p, "vm-a");
        assert_eq!(
            v["spec"]["domain"]["resources"]["requests"]["memory"],
            "50Gi"
        );
    }

    #[test]
    fn a_pending_launcher_pod_stands_for_its_vmi_a_bound_one_for_nothing() {
        let mut l = vmi("virt-launcher-vm-b-x7k2p", &[]);
        l.kind = ObjectKind::Pod;
        assert_eq!(vmi_name(&l), Some("vm-b"));
        l.node_name = Some("gpu-1".into());
        assert_eq!(vmi_name(&l), None);
        assert_eq!(vmi_name(&vmi("vm-c", &[])), Some("vm-c"));
        let mut plain = vmi("train", &[]);
        plain.kind = ObjectKind::Pod;
        assert_eq!(vmi_name(&plain), None);
    }

    #[test]
    fn the_permitted_list_keeps_both_kinds_and_absent_is_null() {
        let p = PermittedHostDevices {
            source: HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: Some(true),
            pci_host_devices: vec![PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: vec![MediatedDevice {
                selector: "NVIDIA A10-12Q".into(),
                resource_name: "nvidia.com/NVIDIA_A10-12Q".into(),
                external_resource_provider: false,
            }],
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        };
        let v = permitted_json(Some(&p));
        assert_eq!(v["pciHostDevices"][0]["pciVendorSelector"], "10DE:2236");
        assert_eq!(
            v["mediatedDevices"][0]["mdevNameSelector"],
            "NVIDIA A10-12Q"
        );
        assert_eq!(v["mediatedDevices"][0]["externalResourceProvider"], false);
        assert_eq!(permitted_json(None), Value::Null);
        let absent = PermittedHostDevices {
            present: false,
            ..p
        };
        assert_eq!(permitted_json(Some(&absent)), Value::Null);
    }

    #[test]
    fn refusal_reads_virt_controllers_condition() {
        let v = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Synchronized", "status": "False", "reason": "FailedCreate",
             "message": "failed to render launch manifest: GPU nvidia.com/X is not permitted in permittedHostDevices configuration"}
        ]}});
        assert!(refusal(&v).unwrap().contains("is not permitted"));
        assert_eq!(refusal(&json!({"status": {}})), None);
    }
}
