//! What virt-controller adds to a VMI's requests and nodeSelector when it renders the
//! virt-launcher pod, so that a VM judged before its launcher exists (a file, a stopped
//! VM, a VMI not rendered yet, the admission guard) is judged as the pod the scheduler
//! will see. KubeVirt v1.7.0, kubevirt/kubevirt:
//!
//! - nodeSelector (`pkg/virt-controller/services/nodeselectorrenderer.go`,
//!   `NewNodeSelectorRenderer`, `Render`; `template.go` `newNodeSelectorRenderer`):
//!   `kubevirt.io/schedulable: "true"` always, `kubernetes.io/arch: <spec.architecture,
//!   lower-cased>` (virt-api defaults `spec.architecture` to the cluster's default
//!   architecture, `amd64` on x86), `machine-type.node.kubevirt.io/<type>: "true"` when the
//!   VMI states `spec.domain.machine.type`; the VMI's own nodeSelector wins on the same key;
//! - extended resources (`renderresources.go` `getRequiredResources`,
//!   `WithVirtualizationResources`): `devices.kubevirt.io/kvm: 1` unless the CR allows
//!   emulation, `devices.kubevirt.io/tun: 1` unless the VMI has no interface and
//!   `autoattachPodInterface: false` (`pkg/network/vmispec/devices.go` `RequiresTunDevice`),
//!   `devices.kubevirt.io/vhost-net: 1` when an interface is virtio (the default model, and
//!   the pod interface virt-api adds) and emulation is not allowed
//!   (`RequiresVirtioNetDevice`);
//! - `ephemeral-storage`: the VMI's request plus 50M (`WithEphemeralStorageRequest`,
//!   `ephemeralStorageOverheadSize` in `template.go`);
//! - memory: the VMI's `resources.requests.memory`, else `memory.guest` (memory overcommit
//!   100 %, `WithMemoryRequests`), plus the overhead of `GetMemoryOverhead`: the page
//!   tables (the request / 512), 220Mi for virt-launcher-monitor, virt-launcher, virtlogd,
//!   virtqemud and qemu (`VirtLauncherMonitorOverhead` … `QemuOverhead` in `template.go`),
//!   8Mi per vCPU, 8Mi for the IO thread, 32Mi of video RAM unless
//!   `autoattachGraphicsDevice: false`, 1Gi for VFIO when the VMI has GPUs or host devices
//!   (`pkg/util/util.go` `IsVFIOVMI`), 100Mi per exec probe binary plus 10Mi per exec probe
//!   (`addProbeOverheads`), 100Mi for dedicated CPUs; `overcommitGuestOverhead` leaves it out
//!   of the request (`WithMemoryOverhead`);
//! - cpu: the vCPUs (`sockets × cores × threads`, 1 when unset) divided by the CPU allocation
//!   ratio 10 (`WithoutDedicatedCPU`; `cpuAllocationRatio` default), unless the VMI states a
//!   cpu request; with dedicated CPUs the vCPUs themselves (`WithCPUPinning`);
//! - the `guest-console-log` sidecar (`serialconsolelog.go`: a restartable init container,
//!   so its requests add to the pod's): 35M of memory and 5m of cpu, unless the VMI sets
//!   `autoattachSerialConsole: false` or `logSerialConsole: false`, or the CR disables it
//!   (`isSerialConsoleLogEnabled`; enabled by default).
//!
//! Not modelled: hugepages, SEV/TDX, hyper-v and CPU model/feature labels, the cluster-wide
//! `nodeSelectors` of the CR, network binding plugins, the CR's memory overcommit and
//! allocation ratio when changed from their defaults.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::pod::{PodInfo, RequestSource, VmiShape};

/// `kubernetes.io/arch`, the well-known node label of the CPU architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// `kubevirt.io/schedulable`: virt-handler's label, which every launcher pod selects.
pub const SCHEDULABLE_LABEL: &str = "kubevirt.io/schedulable";
/// The prefix of the machine-type node labels (`SupportedMachineTypeLabel`).
pub const MACHINE_TYPE_PREFIX: &str = "machine-type.node.kubevirt.io/";
/// virt-handler's KVM device (`devices.kubevirt.io/kvm`).
pub const KVM: &str = "devices.kubevirt.io/kvm";
/// virt-handler's TUN device.
pub const TUN: &str = "devices.kubevirt.io/tun";
/// virt-handler's vhost-net device.
pub const VHOST_NET: &str = "devices.kubevirt.io/vhost-net";
/// The ephemeral storage virt-controller adds to every launcher (50M).
pub const EPHEMERAL_OVERHEAD: i64 = 50_000_000;
/// The architecture virt-api gives a VMI that states none (the cluster's default on x86).
pub const DEFAULT_ARCH: &str = "amd64";

const MI: i64 = 1 << 20;

/// The cluster's side of the render: whether the KubeVirt CR allows software emulation
/// (`spec.configuration.developerConfiguration.useEmulation`: no `kvm`, no `vhost-net`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cluster {
    /// `useEmulation`.
    pub use_emulation: bool,
    /// `spec.configuration.virtualMachineOptions.disableSerialConsoleLog`.
    pub serial_console_log_disabled: bool,
}

impl VmiShape {
    /// The memory overhead virt-controller adds (see the module docs), in bytes.
    pub fn memory_overhead(&self) -> i64 {
        let request = self.memory_request.unwrap_or(0);
        let vcpus = self.vcpus.unwrap_or(1).max(1);
        // Page tables: the request in kilo units rounded up (`ScaledValue`), / 512.
        let mut o = request.saturating_add(999) / 1000 * 1000 / 512;
        o += 220 * MI; // monitor 25, launcher 100, virtlogd 25, virtqemud 40, qemu 30
        o += 8 * MI * vcpus + 8 * MI;
        if self.graphics {
            o += 32 * MI;
        }
        if self.vfio {
            o += 1024 * MI;
        }
        if self.exec_probes > 0 {
            o += 100 * MI + 10 * MI * self.exec_probes;
        }
        if self.dedicated_cpu {
            o += 100 * MI;
        }
        o
    }

    /// The launcher pod's memory request: the VMI's request, else its guest memory, plus
    /// [`VmiShape::memory_overhead`] unless `overcommitGuestOverhead`; `None` when the VMI
    /// states neither (virt-api refuses such a VMI).
    pub fn memory(&self) -> Option<i64> {
        let base = self.memory_request.or(self.memory_guest)?;
        Some(if self.overcommit_guest_overhead {
            base
        } else {
            base.saturating_add(self.memory_overhead())
        })
    }

    /// The launcher pod's cpu request in millicores.
    pub fn cpu_millis(&self) -> i64 {
        let vcpus = self.vcpus.unwrap_or(1).max(1);
        if self.dedicated_cpu {
            vcpus * 1000
        } else {
            self.cpu_request.unwrap_or(vcpus * 100)
        }
    }
}

/// The `guest-console-log` sidecar's memory (35M) and cpu (5m) requests.
const CONSOLE_LOG: (i64, i64) = (35_000_000, 5);

impl VmiShape {
    /// Whether virt-controller adds the `guest-console-log` sidecar
    /// (`isSerialConsoleLogEnabled`).
    pub fn console_log(&self, cluster: Cluster) -> bool {
        !self.no_serial_console
            && self
                .log_serial_console
                .unwrap_or(!cluster.serial_console_log_disabled)
    }
}

/// `vmi` (a VMI or a VM's template read as a pod) as virt-controller renders its
/// virt-launcher pod: the nodeSelector, extended resources, memory, cpu and
/// ephemeral-storage of the module docs added; the kind, name and the VMI's own fields
/// (sources named by the VMI's device fields) kept, so causes and fixes still name what
/// the user writes.
pub fn render(vmi: &PodInfo, shape: &VmiShape, cluster: Cluster) -> PodInfo {
    let mut p = vmi.clone();
    let mut selector: BTreeMap<String, String> = BTreeMap::new();
    selector.insert(SCHEDULABLE_LABEL.into(), "true".into());
    selector.insert(
        ARCH_LABEL.into(),
        shape
            .architecture
            .as_deref()
            .unwrap_or(DEFAULT_ARCH)
            .to_lowercase(),
    );
    if let Some(m) = &shape.machine_type {
        selector.insert(format!("{MACHINE_TYPE_PREFIX}{m}"), "true".into());
    }
    selector.extend(vmi.node_selector.clone());
    p.node_selector = selector;
    let requests = Arc::make_mut(&mut p.requests);
    let mut add = |r: &str, why: &str| {
        requests.entry(r.to_owned()).or_insert(1);
        p.sources.push(RequestSource {
            resource: r.to_owned(),
            field: format!("the virt-launcher pod virt-controller renders ({why})"),
            container: None,
        });
    };
    if !cluster.use_emulation {
        add(KVM, "every VMI without software emulation");
    }
    if shape.interfaces > 0 || shape.pod_interface {
        add(TUN, "a network interface");
    }
    if !cluster.use_emulation && (shape.virtio_interface || shape.pod_interface) {
        add(VHOST_NET, "a virtio interface");
    }
    let other = Arc::make_mut(&mut p.other_requests);
    other.insert(
        "ephemeral-storage".into(),
        shape
            .ephemeral_request
            .unwrap_or(0)
            .saturating_add(EPHEMERAL_OVERHEAD),
    );
    let (log_mem, log_cpu) = if shape.console_log(cluster) {
        CONSOLE_LOG
    } else {
        (0, 0)
    };
    if let Some(m) = shape.memory() {
        other.insert("memory".into(), m.saturating_add(log_mem));
    }
    other.insert("cpu".into(), shape.cpu_millis().saturating_add(log_cpu));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_vmi_gets_kvm_arch_overhead_and_50m() {
        let vmi = PodInfo {
            name: "vm".into(),
            namespace: "ns".into(),
            requests: Arc::new(BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 1)])),
            ..Default::default()
        };
        let shape = VmiShape {
            memory_guest: Some(2 * 1024 * MI),
            graphics: true,
            pod_interface: true,
            vfio: true,
            ..Default::default()
        };
        let p = render(&vmi, &shape, Cluster::default());
        assert_eq!(p.node_selector[ARCH_LABEL], "amd64");
        assert_eq!(p.node_selector[SCHEDULABLE_LABEL], "true");
        assert_eq!(
            p.requests.keys().collect::<Vec<_>>(),
            [KVM, TUN, VHOST_NET, "nvidia.com/GA102GL_A10"]
        );
        // 2Gi + 220Mi + 8Mi (1 vCPU) + 8Mi (IO thread) + 32Mi (video) + 1Gi (VFIO); no
        // page tables without a memory request; and the guest-console-log sidecar's 35M, 5m.
        assert_eq!(
            p.other_requests["memory"],
            (2048 + 220 + 8 + 8 + 32 + 1024) * MI + 35_000_000
        );
        assert_eq!(p.other_requests["ephemeral-storage"], 50_000_000);
        assert_eq!(p.other_requests["cpu"], 105);
        // The VMI's own selector wins; emulation drops kvm and vhost-net.
        let mut arm = vmi.clone();
        arm.node_selector.insert(ARCH_LABEL.into(), "arm64".into());
        let p = render(
            &arm,
            &VmiShape {
                pod_interface: false,
                ..shape
            },
            Cluster {
                use_emulation: true,
                ..Cluster::default()
            },
        );
        assert_eq!(p.node_selector[ARCH_LABEL], "arm64");
        assert_eq!(
            p.requests.keys().collect::<Vec<_>>(),
            ["nvidia.com/GA102GL_A10"]
        );
    }
}
