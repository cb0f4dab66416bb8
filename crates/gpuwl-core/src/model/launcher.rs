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
//! - memory: the VMI's `resources.requests.memory`, else its `limits.memory`, else
//!   `memory.guest` × 100 / the CR's `memoryOvercommit` (`WithMemoryRequests`, run only
//!   for a VMI without a memory request), plus the overhead of `GetMemoryOverhead`: the
//!   page tables (the request / 512), 220Mi for virt-launcher-monitor, virt-launcher,
//!   virtlogd, virtqemud and qemu (`VirtLauncherMonitorOverhead` … `QemuOverhead` in
//!   `template.go`), 8Mi per vCPU, 8Mi for the IO thread, 32Mi of video RAM unless
//!   `autoattachGraphicsDevice: false`, 128Mi of UEFI flash on arm64, 1Gi for VFIO when the
//!   VMI has GPUs or host devices (`pkg/util/util.go` `IsVFIOVMI`), 100Mi per exec probe
//!   binary plus 10Mi per exec probe (`addProbeOverheads`), 100Mi for dedicated CPUs; the
//!   whole overhead multiplied by the CR's `additionalGuestMemoryOverheadRatio` (in kilo
//!   units, `multiplyMemory`); `overcommitGuestOverhead` leaves it out of the request
//!   (`WithMemoryOverhead`);
//! - cpu: the VMI's cpu request (virt-api copies `limits.cpu` into it, and puts the CR's
//!   `spec.configuration.cpuRequest` there when that is not the default 100m:
//!   `pkg/defaults/defaults.go` `setDefaultResourceRequests`), else the vCPUs divided by
//!   the CR's `cpuAllocationRatio` (10 by default; `WithoutDedicatedCPU`); with dedicated
//!   CPUs the vCPUs themselves (`WithCPUPinning`). The vCPUs: `sockets × cores × threads`
//!   of the topology (the factors set), else virt-api's default topology of
//!   `SetDefaultGuestCPUTopology`: the cpu limit, else the cpu request, rounded up
//!   (`Quantity.Value()`), else 1;
//! - the `guest-console-log` sidecar (`serialconsolelog.go`: a restartable init container,
//!   so its requests add to the pod's): 35M of memory and 5m of cpu, or the CR's
//!   `supportContainerResources` requests of type `guest-console-log`; with dedicated CPUs
//!   its limits (60M, 15m, or the CR's), unless the VMI sets `autoattachSerialConsole:
//!   false` or `logSerialConsole: false`, or the CR disables it
//!   (`virtualMachineOptions.disableSerialConsoleLog`; `isSerialConsoleLogEnabled`).
//!
//! The CR's settings ([`Cluster`], read from the KubeVirt CR by
//! `crate::decode::kubevirt::from_object`; `pkg/virt-config/virt-config.go`,
//! `configuration.go` for the defaults): `developerConfiguration.useEmulation`,
//! `memoryOvercommit`, `cpuAllocationRatio` and `nodeSelectors`, `cpuRequest`,
//! `additionalGuestMemoryOverheadRatio`, `supportContainerResources`,
//! `virtualMachineOptions.disableSerialConsoleLog` and `status.defaultArchitecture` (what
//! virt-api puts in an unset `spec.architecture`; virt-operator sets it, amd64 on x86).
//!
//! Not modelled: hugepages, SEV/TDX, hyper-v and CPU model/feature labels, IO thread pools
//! and emulator threads, guaranteed QoS (requests equal to limits), network binding
//! plugins, the HyperConverged CR's own spelling of these settings (a HyperConverged CR is
//! judged with KubeVirt's defaults).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::pod::{PodInfo, RequestSource, SpecProblem, VmiShape};

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
/// The architecture virt-api gives a VMI that states none when the CR's status names no
/// default (the cluster's default on x86).
pub const DEFAULT_ARCH: &str = "amd64";
/// KubeVirt's default `memoryOvercommit` (percent, `DefaultMemoryOvercommit`).
pub const DEFAULT_MEMORY_OVERCOMMIT: i64 = 100;
/// KubeVirt's default `cpuAllocationRatio` (`DefaultCPUAllocationRatio`).
pub const DEFAULT_CPU_ALLOCATION_RATIO: i64 = 10;

const MI: i64 = 1 << 20;

/// The cluster's side of the render: the KubeVirt CR's settings that change the launcher
/// pod (see the module docs). [`Cluster::default`] is KubeVirt's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// `developerConfiguration.useEmulation`: no `kvm`, no `vhost-net`.
    pub use_emulation: bool,
    /// `spec.configuration.virtualMachineOptions.disableSerialConsoleLog` is set (an empty
    /// object: its presence disables the console-log sidecar).
    pub serial_console_log_disabled: bool,
    /// `developerConfiguration.memoryOvercommit`, percent (100; a value ≤ 0 is invalid and
    /// KubeVirt keeps the default).
    pub memory_overcommit: i64,
    /// `developerConfiguration.cpuAllocationRatio` (10; ≤ 0 keeps the default).
    pub cpu_allocation_ratio: i64,
    /// `spec.configuration.cpuRequest` in millicores when it is not the default 100m
    /// (virt-api then sets it as the VMI's cpu request).
    pub cpu_request: Option<i64>,
    /// `spec.configuration.additionalGuestMemoryOverheadRatio` as written (e.g. `"1.5"`).
    pub overhead_ratio: Option<String>,
    /// `developerConfiguration.nodeSelectors`: added to every launcher's nodeSelector
    /// (the VMI's own keys win).
    pub node_selectors: BTreeMap<String, String>,
    /// `status.defaultArchitecture` (virt-operator's), when set.
    pub default_architecture: Option<String>,
    /// `supportContainerResources[type=guest-console-log]`: requests (memory bytes, cpu
    /// millicores), each when set and not zero.
    pub console_log_requests: (Option<i64>, Option<i64>),
    /// The same entry's limits (memory bytes, cpu millicores).
    pub console_log_limits: (Option<i64>, Option<i64>),
}

impl Default for Cluster {
    fn default() -> Cluster {
        Cluster {
            use_emulation: false,
            serial_console_log_disabled: false,
            memory_overcommit: DEFAULT_MEMORY_OVERCOMMIT,
            cpu_allocation_ratio: DEFAULT_CPU_ALLOCATION_RATIO,
            cpu_request: None,
            overhead_ratio: None,
            node_selectors: BTreeMap::new(),
            default_architecture: None,
            console_log_requests: (None, None),
            console_log_limits: (None, None),
        }
    }
}

impl Cluster {
    /// The architecture of a VMI that states `own` (`spec.architecture`), lower-cased:
    /// its own, else the CR's default, else [`DEFAULT_ARCH`].
    pub fn architecture(&self, own: Option<&str>) -> String {
        own.filter(|a| !a.is_empty())
            .or(self.default_architecture.as_deref())
            .unwrap_or(DEFAULT_ARCH)
            .to_lowercase()
    }
}

impl VmiShape {
    /// The VMI's cpu request after virt-api's defaults, in millicores: its own, else its
    /// cpu limit, else the CR's `cpuRequest` (not for dedicated CPUs); `None` when none.
    pub fn cpu_request_after_defaults(&self, cluster: &Cluster) -> Option<i64> {
        self.cpu_request.or(self.cpu_limit).or_else(|| {
            (!self.dedicated_cpu)
                .then_some(cluster.cpu_request)
                .flatten()
        })
    }

    /// The vCPUs virt-controller counts: the topology's, else virt-api's default topology
    /// (the cpu limit, else the cpu request, in whole cpus rounded up), at least 1.
    pub fn vcpus(&self, cluster: &Cluster) -> i64 {
        let whole = |m: i64| m.saturating_add(999) / 1000;
        self.vcpus
            .or_else(|| self.cpu_limit.map(whole))
            .or_else(|| self.cpu_request_after_defaults(cluster).map(whole))
            .unwrap_or(1)
            .max(1)
    }

    /// The memory overhead virt-controller adds (see the module docs), in bytes.
    pub fn memory_overhead(&self, cluster: &Cluster) -> i64 {
        let request = self.memory_request.unwrap_or(0);
        // Page tables: the request in kilo units rounded up (`ScaledValue`), / 512.
        let mut o = request.saturating_add(999) / 1000 * 1000 / 512;
        o += 220 * MI; // monitor 25, launcher 100, virtlogd 25, virtqemud 40, qemu 30
        o += 8 * MI * self.vcpus(cluster) + 8 * MI;
        if self.graphics {
            o += 32 * MI;
        }
        if cluster.architecture(self.architecture.as_deref()) == "arm64" {
            o += 128 * MI;
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
        match cluster
            .overhead_ratio
            .as_deref()
            .and_then(|r| r.trim().parse::<f64>().ok())
        {
            // `multiplyMemory`: the overhead in kilo units rounded up, times (ratio - 1),
            // truncated, added in kilo units.
            Some(r) if r.is_finite() => {
                let kilo = o.saturating_add(999) / 1000;
                o.saturating_add(((kilo as f64) * (r - 1.0)) as i64 * 1000)
            }
            _ => o,
        }
    }

    /// The launcher pod's memory request: the VMI's request, else its limit, else its
    /// guest memory × 100 / `memoryOvercommit`, plus [`VmiShape::memory_overhead`] unless
    /// `overcommitGuestOverhead`; `None` when the VMI states none (virt-api refuses such a
    /// VMI).
    pub fn memory(&self, cluster: &Cluster) -> Option<i64> {
        let overcommit = if cluster.memory_overcommit > 0 {
            cluster.memory_overcommit
        } else {
            DEFAULT_MEMORY_OVERCOMMIT
        };
        let base = self
            .memory_request
            .filter(|m| *m > 0)
            .or(self.memory_limit.filter(|m| *m > 0))
            .or_else(|| {
                self.memory_guest
                    .filter(|g| *g > 0)
                    .map(|g| g.saturating_mul(100) / overcommit)
            })?;
        Some(if self.overcommit_guest_overhead {
            base
        } else {
            base.saturating_add(self.memory_overhead(cluster))
        })
    }

    /// The launcher pod's cpu request in millicores (see the module docs).
    pub fn cpu_millis(&self, cluster: &Cluster) -> i64 {
        let vcpus = self.vcpus(cluster);
        if self.dedicated_cpu {
            return vcpus * 1000;
        }
        let ratio = if cluster.cpu_allocation_ratio > 0 {
            cluster.cpu_allocation_ratio
        } else {
            DEFAULT_CPU_ALLOCATION_RATIO
        };
        // vCPUs / ratio as a quantity; the scheduler reads its MilliValue (rounded up).
        self.cpu_request_after_defaults(cluster)
            .unwrap_or_else(|| (vcpus * 1000 + ratio - 1) / ratio)
    }

    /// Whether virt-controller adds the `guest-console-log` sidecar
    /// (`isSerialConsoleLogEnabled`).
    pub fn console_log(&self, cluster: &Cluster) -> bool {
        !self.no_serial_console
            && self
                .log_serial_console
                .unwrap_or(!cluster.serial_console_log_disabled)
    }

    /// The `guest-console-log` sidecar's (memory bytes, cpu millicores) requests, (0, 0)
    /// without it (`resourcesForSerialConsoleLogContainer`).
    pub fn console_log_requests(&self, cluster: &Cluster) -> (i64, i64) {
        if !self.console_log(cluster) {
            return (0, 0);
        }
        if self.dedicated_cpu {
            let (m, c) = cluster.console_log_limits;
            (m.unwrap_or(60_000_000), c.unwrap_or(15))
        } else {
            let (m, c) = cluster.console_log_requests;
            (m.unwrap_or(35_000_000), c.unwrap_or(5))
        }
    }
}

/// The field path of the problems virt-controller's render brings into the launcher pod
/// ([`render_problems`]): the KubeVirt CR's console-log entry.
pub const RENDER_PROBLEM_PATH: &str =
    "KubeVirt CR spec.configuration.supportContainerResources[type=guest-console-log]";

/// What makes the API server refuse the launcher pod virt-controller renders for a VMI of
/// `shape` under `cluster` (virt-controller then records `FailedCreate`: "Pod … is
/// invalid: spec.initContainers[0].resources.requests: … must be less than or equal to …
/// limit"): the `guest-console-log` sidecar's request above its limit, when the CR sets a
/// request over the default limit (60M, 15m) or over its own limit
/// (`resourcesForSerialConsoleLogContainer`; with dedicated CPUs requests equal limits).
pub fn render_problems(shape: &VmiShape, cluster: &Cluster) -> Vec<SpecProblem> {
    if !shape.console_log(cluster) || shape.dedicated_cpu {
        return Vec::new();
    }
    let (req, lim) = (cluster.console_log_requests, cluster.console_log_limits);
    let mem = |b: i64| {
        if b % 1_000_000 == 0 {
            format!("{}M", b / 1_000_000)
        } else {
            b.to_string()
        }
    };
    let mut out = Vec::new();
    for (resource, r, l, show) in [
        (
            "memory",
            req.0.unwrap_or(35_000_000),
            lim.0.unwrap_or(60_000_000),
            &mem as &dyn Fn(i64) -> String,
        ),
        ("cpu", req.1.unwrap_or(5), lim.1.unwrap_or(15), &|m: i64| {
            format!("{m}m")
        }),
    ] {
        if r > l {
            out.push(SpecProblem::RequestAboveLimit {
                path: RENDER_PROBLEM_PATH.into(),
                resource: resource.into(),
                requested: show(r),
                limit: show(l),
            });
        }
    }
    out
}

/// `vmi` (a VMI or a VM's template read as a pod) as virt-controller renders its
/// virt-launcher pod under the CR's settings `cluster`: the nodeSelector, extended
/// resources, memory, cpu and ephemeral-storage of the module docs added; the kind, name
/// and the VMI's own fields (sources named by the VMI's device fields) kept, so causes and
/// fixes still name what the user writes.
pub fn render(vmi: &PodInfo, shape: &VmiShape, cluster: &Cluster) -> PodInfo {
    let mut p = vmi.clone();
    p.node_selector = node_selector(vmi, shape, cluster);
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
    let (log_mem, log_cpu) = shape.console_log_requests(cluster);
    if let Some(m) = shape.memory(cluster) {
        other.insert("memory".into(), m.saturating_add(log_mem));
    }
    other.insert(
        "cpu".into(),
        shape.cpu_millis(cluster).saturating_add(log_cpu),
    );
    // After the VMI's own problems (virt-api refuses those first).
    p.spec_problems.extend(render_problems(shape, cluster));
    p
}

/// The launcher pod's nodeSelector: `kubevirt.io/schedulable: "true"`, the architecture
/// ([`Cluster::architecture`]), the machine type when stated, the CR's `nodeSelectors`,
/// then the VMI's own (which win on the same key).
pub fn node_selector(
    vmi: &PodInfo,
    shape: &VmiShape,
    cluster: &Cluster,
) -> BTreeMap<String, String> {
    let mut selector: BTreeMap<String, String> = BTreeMap::new();
    selector.insert(SCHEDULABLE_LABEL.into(), "true".into());
    selector.insert(
        ARCH_LABEL.into(),
        cluster.architecture(shape.architecture.as_deref()),
    );
    selector.extend(cluster.node_selectors.clone());
    selector.extend(vmi.node_selector.clone());
    if let Some(m) = &shape.machine_type {
        selector.insert(format!("{MACHINE_TYPE_PREFIX}{m}"), "true".into());
    }
    selector
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
        let p = render(&vmi, &shape, &Cluster::default());
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
            &Cluster {
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

    fn gpu_vmi() -> PodInfo {
        PodInfo {
            name: "vm".into(),
            namespace: "ns".into(),
            requests: Arc::new(BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 1)])),
            ..Default::default()
        }
    }

    #[test]
    fn memory_overcommit_scales_the_guest_memory_only_without_a_request() {
        // virt-controller's WithMemoryRequests: 4Gi of guest memory at 150 % overcommit
        // asks 4Gi × 100 / 150 = 2,863,311,530 bytes (integer division), then the overhead:
        // 220Mi + 8Mi (1 vCPU) + 8Mi (IO thread) + 32Mi (video), no page tables without a
        // request, no VFIO; and the console-log sidecar's 35M.
        let shape = VmiShape {
            memory_guest: Some(4 << 30),
            graphics: true,
            ..Default::default()
        };
        let overcommit = Cluster {
            memory_overcommit: 150,
            ..Cluster::default()
        };
        let p = render(&gpu_vmi(), &shape, &overcommit);
        assert_eq!(
            p.other_requests["memory"],
            2_863_311_530 + 268 * MI + 35_000_000
        );
        // At the default 100 %: the guest memory itself.
        let p = render(&gpu_vmi(), &shape, &Cluster::default());
        assert_eq!(p.other_requests["memory"], (4096 + 268) * MI + 35_000_000);
        // A memory request is taken as it is, whatever the overcommit.
        let requested = VmiShape {
            memory_request: Some(4 << 30),
            ..shape.clone()
        };
        // Page tables: 4,294,968 kB × 1000 / 512 = 8,388,609 bytes.
        assert_eq!(
            requested.memory(&overcommit),
            Some((4 << 30) + 8_388_609 + 268 * MI)
        );
        // A memory limit without a request stands for the request.
        let limited = VmiShape {
            memory_limit: Some(2 << 30),
            ..shape
        };
        assert_eq!(limited.memory(&overcommit), Some((2 << 30) + 268 * MI));
    }

    #[test]
    fn cpu_allocation_ratio_cpu_request_and_the_default_topology() {
        let two = VmiShape {
            vcpus: Some(2),
            ..Default::default()
        };
        // 2 vCPUs / 10 = 200m; / 4 = 500m; / 3 = 666.67m, read rounded up: 667m.
        assert_eq!(two.cpu_millis(&Cluster::default()), 200);
        let ratio = |r| Cluster {
            cpu_allocation_ratio: r,
            ..Cluster::default()
        };
        assert_eq!(two.cpu_millis(&ratio(4)), 500);
        assert_eq!(two.cpu_millis(&ratio(3)), 667);
        // An invalid ratio (≤ 0) leaves KubeVirt's default.
        assert_eq!(two.cpu_millis(&ratio(0)), 200);
        // The CR's cpuRequest (not the default 100m) becomes the VMI's cpu request, and
        // virt-api's default topology takes its vCPUs from it (2500m → 3 sockets).
        let cr = Cluster {
            cpu_request: Some(2500),
            ..Cluster::default()
        };
        let none = VmiShape::default();
        assert_eq!(none.cpu_millis(&cr), 2500);
        assert_eq!(none.vcpus(&cr), 3);
        assert_eq!(none.vcpus(&Cluster::default()), 1);
        // A cpu limit alone: the request and the vCPUs.
        let limited = VmiShape {
            cpu_limit: Some(4000),
            ..Default::default()
        };
        assert_eq!(limited.cpu_millis(&cr), 4000);
        assert_eq!(limited.vcpus(&cr), 4);
        // The overhead counts 8Mi per vCPU: 3 vCPUs.
        assert_eq!(none.memory_overhead(&cr), (220 + 3 * 8 + 8) * MI);
        // Dedicated CPUs: the vCPUs themselves; the CR's cpuRequest is not applied.
        let pinned = VmiShape {
            vcpus: Some(2),
            dedicated_cpu: true,
            ..Default::default()
        };
        assert_eq!(pinned.cpu_millis(&cr), 2000);
    }

    #[test]
    fn the_overhead_ratio_arm64_console_log_settings_and_node_selectors() {
        // A 128Mi request: page tables 134,218 kB × 1000 / 512 = 262,144 bytes; with
        // 220Mi + 8Mi + 8Mi + 32Mi the overhead is 281,280,512 bytes; × 1.5 in kilo units
        // (281,281 kB rounded up, + trunc(281,281 × 0.5) = 140,640 kB): 421,920,512.
        let shape = VmiShape {
            memory_request: Some(128 * MI),
            graphics: true,
            pod_interface: true,
            ..Default::default()
        };
        assert_eq!(shape.memory_overhead(&Cluster::default()), 281_280_512);
        let ratio = Cluster {
            overhead_ratio: Some("1.5".into()),
            ..Cluster::default()
        };
        assert_eq!(shape.memory_overhead(&ratio), 421_920_512);
        // The CR's default architecture arm64: the selector and 128Mi of UEFI flash.
        let arm = Cluster {
            default_architecture: Some("arm64".into()),
            node_selectors: BTreeMap::from([
                ("zone".to_string(), "a".to_string()),
                (ARCH_LABEL.to_string(), "arm64".to_string()),
            ]),
            console_log_requests: (Some(100_000_000), Some(20)),
            ..Cluster::default()
        };
        assert_eq!(shape.memory_overhead(&arm), 281_280_512 + 128 * MI);
        let mut vmi = gpu_vmi();
        vmi.node_selector.insert("zone".into(), "b".into());
        let p = render(&vmi, &shape, &arm);
        assert_eq!(p.node_selector[ARCH_LABEL], "arm64");
        // The VMI's own key wins over the CR's.
        assert_eq!(p.node_selector["zone"], "b");
        // The console-log sidecar's requests from supportContainerResources: 100M, 20m.
        assert_eq!(
            p.other_requests["memory"],
            128 * MI + 281_280_512 + 128 * MI + 100_000_000
        );
        assert_eq!(p.other_requests["cpu"], 100 + 20);
        // Disabled in the CR: no sidecar; a VMI's logSerialConsole: true brings it back.
        let off = Cluster {
            serial_console_log_disabled: true,
            ..Cluster::default()
        };
        assert_eq!(shape.console_log_requests(&off), (0, 0));
        let on = VmiShape {
            log_serial_console: Some(true),
            ..shape.clone()
        };
        assert_eq!(on.console_log_requests(&off), (35_000_000, 5));
        // Dedicated CPUs: the sidecar asks its limits (60M, 15m by default).
        let pinned = VmiShape {
            dedicated_cpu: true,
            ..shape
        };
        assert_eq!(
            pinned.console_log_requests(&Cluster::default()),
            (60_000_000, 15)
        );
    }

    #[test]
    fn a_console_log_request_above_its_limit_makes_the_launcher_invalid() {
        // Observed on the local control plane: supportContainerResources asking 100M and
        // 50m for guest-console-log, limits left at 60M and 15m: "Pod … is invalid:
        // spec.initContainers[0].resources.requests: … must be less than or equal to memory
        // limit of 60M" (and of cpu 15m).
        let shape = VmiShape::default();
        let over = Cluster {
            console_log_requests: (Some(100_000_000), Some(50)),
            ..Cluster::default()
        };
        let p = render(&gpu_vmi(), &shape, &over);
        assert_eq!(
            p.spec_problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                format!(
                    "{RENDER_PROBLEM_PATH}: memory requests \"100M\" > limits \"60M\": the API server refuses the pod ({RENDER_PROBLEM_PATH}.resources.requests[memory]: must be less than or equal to memory limit)"
                ),
                format!(
                    "{RENDER_PROBLEM_PATH}: cpu requests \"50m\" > limits \"15m\": the API server refuses the pod ({RENDER_PROBLEM_PATH}.resources.requests[cpu]: must be less than or equal to cpu limit)"
                ),
            ]
        );
        // Within the limits, with the limits raised, without the sidecar, or with
        // dedicated CPUs (requests = limits): a valid pod.
        let fine = |c: Cluster, s: &VmiShape| render_problems(s, &c).is_empty();
        assert!(fine(
            Cluster {
                console_log_requests: (Some(20_000_000), Some(1)),
                ..Cluster::default()
            },
            &shape
        ));
        assert!(fine(
            Cluster {
                console_log_limits: (Some(200_000_000), Some(100)),
                ..over.clone()
            },
            &shape
        ));
        assert!(fine(
            Cluster {
                serial_console_log_disabled: true,
                ..over.clone()
            },
            &shape
        ));
        let pinned = VmiShape {
            dedicated_cpu: true,
            ..Default::default()
        };
        assert!(fine(over, &pinned));
    }
}
