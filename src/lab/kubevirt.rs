//! `gpuwl lab --kubevirt`: steps 5, 6 and 7 played a second time with real KubeVirt objects
//! on the local control plane's virt-api and virt-controller
//! ([`crate::cluster::kubevirt`]), after each step's stand-in pod, whose result files stay
//! as a plain lab writes them.
//!
//! - Before step 5: the KubeVirt CR's `permittedHostDevices` is what `gpuwl kubevirt
//!   generate` prints for the lab's nodes (the running gpuwl binary, `-o json`), applied as
//!   the merge patch it is.
//! - Step 5: VirtualMachineInstance `vmi-passthrough` with `gpus[].deviceName:
//!   nvidia.com/GA102GL_A10`; step 6: VirtualMachine `vmi-vgpu` (runStrategy Always) whose
//!   VMI asks `nvidia.com/NVIDIA_A10-12Q`. virt-controller renders each one's virt-launcher
//!   pod, the real scheduler binds it.
//! - Step 7's cross case: VirtualMachine `vm-cross` asks for `nvidia.com/gpu`, the container
//!   resource, which the generated list does not permit: virt-controller renders no pod and
//!   says why on the VMI (`Synchronized=False FailedCreate`, "… is not permitted in
//!   permittedHostDevices configuration", `pkg/virt-controller/services/renderresources.go`
//!   `validatePermittedHostDevices`).
//! - [`KUBEVIRT_FILE`] (`out/kubevirt.txt`, written atomically) names each VMI, its
//!   launcher pod and node, or virt-controller's condition.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::manifests::NAMESPACE;
use crate::cluster::kubevirt::{self, CR_NAME};
use crate::input::live::api_error;
use crate::lab::kubeops;
use gpuwl_core::error::{Error, Result};

/// The result file of `--kubevirt`, under `out/`.
pub const KUBEVIRT_FILE: &str = "kubevirt.txt";

/// How long one VMI is awaited (its launcher pod bound, or virt-controller's condition).
pub const WAIT: Duration = Duration::from_secs(90);

/// One KubeVirt object the lab creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabVm {
    /// Name of the VMI (and of its VirtualMachine when `vm`).
    pub name: String,
    /// Created as a VirtualMachine (runStrategy Always) rather than a bare VMI.
    pub vm: bool,
    /// The `gpus[].deviceName` it asks for.
    pub device: String,
    /// Whether the lab expects it to be placed (false: the cross case).
    pub placed: bool,
}

/// The three objects, in step order (5, 6, 7), for the lab's resources `passthrough`,
/// `vgpu` and `container`.
pub fn lab_vms(passthrough: &str, vgpu: &str, container: &str) -> [LabVm; 3] {
    [
        LabVm {
            name: "vmi-passthrough".into(),
            vm: false,
            device: passthrough.into(),
            placed: true,
        },
        LabVm {
            name: "vmi-vgpu".into(),
            vm: true,
            device: vgpu.into(),
            placed: true,
        },
        LabVm {
            name: "vm-cross".into(),
            vm: true,
            device: container.into(),
            placed: false,
        },
    ]
}

/// What one VMI came to, read back from the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmOutcome {
    /// The object created.
    pub vm: LabVm,
    /// The VMI's `status.phase`.
    pub phase: String,
    /// Its virt-launcher pod, if virt-controller rendered one.
    pub launcher: Option<String>,
    /// The node the scheduler bound that pod to.
    pub node: Option<String>,
    /// virt-controller's `Synchronized=False` condition, `REASON: message`, or the launcher
    /// pod's `PodScheduled=False` message; empty when placed.
    pub condition: String,
}

impl VmOutcome {
    /// The line in [`KUBEVIRT_FILE`]: `<vmi> <VirtualMachine|VirtualMachineInstance>
    /// <device> <launcher pod|none> <node|none> <phase>[ <condition>]`.
    pub fn line(&self) -> String {
        let mut l = format!(
            "{} {} {} {} {} {}",
            self.vm.name,
            if self.vm.vm {
                "VirtualMachine"
            } else {
                "VirtualMachineInstance"
            },
            self.vm.device,
            self.launcher.as_deref().unwrap_or("none"),
            self.node.as_deref().unwrap_or("none"),
            self.phase
        );
        if !self.condition.is_empty() {
            l.push(' ');
            l.push_str(&self.condition);
        }
        l
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kubevirt.io", "v1", kind), plural)
}

/// The VMI resource (`kubevirt.io/v1`, `virtualmachineinstances`).
pub(crate) fn vmi_resource() -> ApiResource {
    resource("VirtualMachineInstance", "virtualmachineinstances")
}

/// The VM resource (`kubevirt.io/v1`, `virtualmachines`).
pub(crate) fn vm_resource() -> ApiResource {
    resource("VirtualMachine", "virtualmachines")
}

/// The VMI spec: no disks, 128Mi, one GPU `gpus[0].deviceName = device`.
fn vmi_spec(device: &str) -> Value {
    json!({
        "domain": {
            "devices": {"gpus": [{"name": "gpu1", "deviceName": device}]},
            "resources": {"requests": {"memory": "128Mi"}}
        }
    })
}

/// The manifest of `v`: a VMI, or a VirtualMachine with runStrategy Always around it.
pub fn manifest(v: &LabVm) -> Value {
    if v.vm {
        json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": v.name, "namespace": NAMESPACE},
            "spec": {
                "runStrategy": "Always",
                "template": {"metadata": {"labels": {"app": v.name}}, "spec": vmi_spec(&v.device)}
            }
        })
    } else {
        json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": v.name, "namespace": NAMESPACE},
            "spec": vmi_spec(&v.device)
        })
    }
}

/// Deletes the lab's VMs and VMIs left by an earlier run and waits until the VMIs and their
/// launcher pods are gone (virt-controller deletes the pods and drops its finalizer).
///
/// Errors: [`Error::Runtime`] when a delete is refused or they are not gone in 60 s.
pub async fn clean(client: &Client, vms: &[LabVm]) -> Result<()> {
    let vm_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &vm_resource());
    let vmi_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &vmi_resource());
    for v in vms {
        if v.vm {
            match vm_api.delete(&v.name, &DeleteParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Ok(_) => {}
                Err(e) => return Err(api_error(&format!("delete VirtualMachine {}", v.name), &e)),
            }
        }
        match vmi_api.delete(&v.name, &DeleteParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Ok(_) => {}
            Err(e) => return Err(api_error(&format!("delete VMI {}", v.name), &e)),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut left = Vec::new();
        for v in vms {
            if vmi_api.get_opt(&v.name).await.ok().flatten().is_some()
                || (v.vm && vm_api.get_opt(&v.name).await.ok().flatten().is_some())
            {
                left.push(v.name.clone());
            }
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let launchers = pods
            .list(&ListParams::default().labels("kubevirt.io=virt-launcher"))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        if left.is_empty() && launchers == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Runtime(format!(
                "earlier lab VMs not gone after 60 s: {} ({launchers} virt-launcher pods)",
                left.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Runs `gpuwl kubevirt generate -o json` (`gpuwl_bin`, against `kubeconfig`) and applies
/// the merge patch it prints to the KubeVirt CR; returns the names it permits.
///
/// Errors: [`Error::Runtime`] when generate fails or the patch is refused.
pub async fn permit_generated(
    client: &Client,
    gpuwl_bin: &std::path::Path,
    kubeconfig: &std::path::Path,
) -> Result<Vec<String>> {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(gpuwl_bin)
            .args(["kubevirt", "generate", "-o", "json", "--kubeconfig"])
            .arg(kubeconfig)
            .output(),
    )
    .await
    .map_err(|_| Error::Runtime("gpuwl kubevirt generate took over 60 s".into()))?
    .map_err(|e| Error::failed(format!("cannot run {}", gpuwl_bin.display()), e))?;
    if !out.status.success() {
        return Err(Error::Runtime(format!(
            "gpuwl kubevirt generate exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let patch: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::failed("gpuwl kubevirt generate printed bad JSON", e))?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        kubevirt::NAMESPACE,
        &kubevirt::cr_resource(),
    );
    api.patch(CR_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            api_error(
                "apply gpuwl kubevirt generate's patch to the KubeVirt CR",
                &e,
            )
        })?;
    let cr = api
        .get(CR_NAME)
        .await
        .map_err(|e| api_error("get the KubeVirt CR", &e))?;
    let phd = &cr.data["spec"]["configuration"]["permittedHostDevices"];
    let mut names: Vec<String> = ["pciHostDevices", "mediatedDevices"]
        .iter()
        .flat_map(|l| phd[l].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["resourceName"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Creates `v` and waits (up to [`WAIT`]) until its VMI is `Scheduled` on a node with its
/// launcher pod bound, or — for one not expected to be placed — until virt-controller set
/// `Synchronized=False` or the launcher pod is unschedulable; returns what it came to.
///
/// Errors: [`Error::Runtime`] when virt-api refuses it (its words) or nothing is decided
/// within [`WAIT`].
pub async fn create_and_await(client: &Client, v: &LabVm) -> Result<VmOutcome> {
    let m = manifest(v);
    let (ar, kind) = if v.vm {
        (vm_resource(), "VirtualMachine")
    } else {
        (vmi_resource(), "VirtualMachineInstance")
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    let obj: DynamicObject =
        serde_json::from_value(m).map_err(|e| Error::failed("internal: VM manifest", e))?;
    api.create(&PostParams::default(), &obj)
        .await
        .map_err(|e| api_error(&format!("create {kind} {}", v.name), &e))?;
    let deadline = Instant::now() + WAIT;
    loop {
        let o = observe(client, v).await?;
        let decided = if v.placed {
            o.phase == "Scheduled" && o.node.is_some()
        } else {
            !o.condition.is_empty()
        };
        if decided {
            return Ok(o);
        }
        if Instant::now() > deadline {
            return Err(Error::Runtime(format!(
                "VMI {} undecided after {} s: phase {:?}, launcher pod {}, {}",
                v.name,
                WAIT.as_secs(),
                o.phase,
                o.launcher.as_deref().unwrap_or("none"),
                if o.condition.is_empty() {
                    "no condition"
                } else {
                    &o.condition
                }
            )));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Reads `v`'s VMI and launcher pod once.
///
/// Errors: [`Error::Runtime`] when the API refuses the reads.
pub async fn observe(client: &Client, v: &LabVm) -> Result<VmOutcome> {
    let vmis: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &vmi_resource());
    let vmi = vmis
        .get_opt(&v.name)
        .await
        .map_err(|e| api_error(&format!("get VMI {}", v.name), &e))?;
    let Some(vmi) = vmi else {
        return Ok(VmOutcome {
            vm: v.clone(),
            phase: "Absent".into(),
            launcher: None,
            node: None,
            condition: String::new(),
        });
    };
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let status = &vmi.data["status"];
    let phase = status["phase"].as_str().unwrap_or("").to_string();
    let conds = status["conditions"].as_array().cloned().unwrap_or_default();
    let cond = |t: &str| conds.iter().find(|c| c["type"] == t).cloned();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let launcher = pods
        .list(&ListParams::default().labels("kubevirt.io=virt-launcher"))
        .await
        .map_err(|e| api_error("list virt-launcher pods", &e))?
        .items
        .into_iter()
        .find(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid)
        });
    let node = launcher
        .as_ref()
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let mut condition = String::new();
    if let Some(c) = cond("Synchronized").filter(|c| c["status"] == "False") {
        condition = format!(
            "{}: {}",
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        );
    } else if node.is_none()
        && let Some(c) = launcher
            .as_ref()
            .and_then(|p| kubeops::pod_scheduled(p).cloned())
            .filter(|c| c.status == "False")
    {
        condition = format!(
            "{}: {}",
            c.reason.unwrap_or_default(),
            c.message.unwrap_or_default()
        );
    }
    Ok(VmOutcome {
        vm: v.clone(),
        phase,
        launcher: launcher.and_then(|p| p.metadata.name),
        node,
        condition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_vms_and_their_lines() {
        let vms = lab_vms(
            "nvidia.com/GA102GL_A10",
            "nvidia.com/NVIDIA_A10-12Q",
            "nvidia.com/gpu",
        );
        assert_eq!(manifest(&vms[0])["kind"], "VirtualMachineInstance");
        assert_eq!(
            manifest(&vms[1])["spec"]["template"]["spec"]["domain"]["devices"]["gpus"][0]["deviceName"],
            "nvidia.com/NVIDIA_A10-12Q"
        );
        assert_eq!(manifest(&vms[2])["spec"]["runStrategy"], "Always");
        let o = VmOutcome {
            vm: vms[2].clone(),
            phase: "Pending".into(),
            launcher: None,
            node: None,
            condition: "FailedCreate: not permitted".into(),
        };
        assert_eq!(
            o.line(),
            "vm-cross VirtualMachine nvidia.com/gpu none none Pending FailedCreate: not permitted"
        );
    }
}
