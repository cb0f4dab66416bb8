//! The diagnosis rules of `explain`, one small function per [`CauseCode`], tried in
//! [`RULES`] order; the first that applies gives the [`Diagnosis`].
//!
//! Each rule reads the gathered facts ([`Facts`]: the pod, its [`Explanation`](super::Explanation) without a
//! diagnosis, the nodes, the shared [`Usage`](crate::analysis::usage::Usage) table, KubeVirt's permissions) and returns
//! `None` when its situation does not hold. Counts in causes and fixes are per pool and
//! come from
//! [`Usage::pool_totals`](crate::analysis::usage::Usage::pool_totals), exactly what `inventory` prints.

use std::collections::BTreeSet;

use crate::analysis::check::dra_nodes::{DraNodes, NVIDIA_GPU_DRIVER};
use crate::analysis::diagnosis::{CauseCode, Diagnosis};
use crate::analysis::explain::{NodeFree, RequestView, dra_rules, unused};
use crate::analysis::names::{self, Relation};
use crate::analysis::placement::{self, Exclusion};
use crate::model::advertise::advertised_gpus;
use crate::model::kubevirt::{
    HostDevicesSource, PermittedHostDevices, node_owned_label, permit_entries,
};
use crate::model::launcher;
use crate::model::node::NodeInfo;
use crate::model::pod::{self, ObjectKind, PodInfo, SpecProblem, launcher_vmi_name};
use crate::model::pool::Pool;
use crate::model::resource::{self, NVIDIA_PREFIX, ResourceClass, classify};
use crate::model::workload::{ENABLE_FLAG, LABEL_KEY, WorkloadConfig};

pub use crate::analysis::explain::facts::Facts;
use crate::analysis::fit::{self, NodeFit, UNSCHEDULABLE_TAINT};
use crate::decode::document;
use crate::model::operand;
use crate::model::operator::{self, ClusterPolicy};
use crate::model::quantity::Quantity;

/// A diagnosis rule.
pub(crate) type Rule = fn(&Facts<'_>) -> Option<Diagnosis>;

/// The rules, in priority order (the order of [`CauseCode::ALL`]).
///
/// The DRA slot [`dra_rules::cannot_allocate`] answers with `excluded`,
/// `no-matching-device`, `too-large`, `counter-exhausted` or `devices-in-use` (the first
/// that holds), so the DRA filter's causes come before the extended-resource ones.
pub(crate) const RULES: [(CauseCode, Rule); 21] = [
    (CauseCode::InvalidSpec, invalid_spec),
    (CauseCode::AdmissionRejected, admission_rejected),
    (CauseCode::Scheduled, scheduled),
    (CauseCode::NoGpuRequest, no_gpu_request),
    (CauseCode::NotPermitted, not_permitted),
    (CauseCode::ClaimNotFound, dra_rules::claim_not_found),
    (CauseCode::SelectorError, dra_rules::selector_error),
    (CauseCode::NoMatchingDevice, dra_rules::cannot_allocate),
    (CauseCode::NoNodeData, no_node_data),
    (CauseCode::NodeConditions, node_conditions),
    (CauseCode::VirtHandler, virt_handler),
    (CauseCode::OperatorState, operator_state),
    (CauseCode::UnadvertisedName, unadvertised_name),
    (CauseCode::StaleOnly, stale_only),
    (CauseCode::Excluded, excluded),
    (CauseCode::NotCoLocated, not_co_located),
    (CauseCode::TooLarge, too_large),
    (CauseCode::InUse, in_use),
    (CauseCode::Insufficient, insufficient),
    (CauseCode::OtherResource, other_resource),
    (CauseCode::FitsNow, fits_now),
];

/// The first diagnosis of [`RULES`] that applies ([`fits_now`] always does).
pub(crate) fn diagnose(f: &Facts<'_>) -> Diagnosis {
    RULES
        .iter()
        .find_map(|(_, rule)| rule(f))
        .unwrap_or_else(|| Diagnosis::new(CauseCode::FitsNow, "", ""))
}

// ---- wording helpers -------------------------------------------------------------

/// ` in <field>` (and the init container's name) or nothing.
fn in_field(rv: &RequestView) -> String {
    if rv.field.is_empty() {
        String::new()
    } else {
        match rv.container.as_deref() {
            Some(c) if c.starts_with("init container ") => format!(" in {} ({c})", rv.field),
            _ => format!(" in {}", rv.field),
        }
    }
}

/// `pod`, `VMI` or `VM`.
fn what(pod: &PodInfo) -> &'static str {
    match pod.kind {
        ObjectKind::Pod => "pod",
        ObjectKind::VirtualMachineInstance => "VMI",
        ObjectKind::VirtualMachine => "VM",
    }
}

/// `ns/virt-launcher-x-abcde (VMI x)` or the pod key.
fn holder(key: &str) -> String {
    let name = key.split_once('/').map_or(key, |(_, n)| n);
    match launcher_vmi_name(name) {
        Some(vmi) => format!("{key} (VMI {vmi})"),
        None => key.to_owned(),
    }
}

/// Up to three holders, then `and N more`.
fn holders(keys: &[&str]) -> String {
    let mut v: Vec<String> = keys.iter().take(3).map(|k| holder(k)).collect();
    if keys.len() > 3 {
        v.push(format!("and {} more", keys.len() - 3));
    }
    v.join(", ")
}

/// What to stop to free a unit: plain pods are deleted or finished; a launcher pod is
/// never deleted (that kills the running VM, and a VM with `runStrategy: Always` starts a
/// new one): its VM is stopped with `virtctl stop` (kubevirt/kubevirt `pkg/virtctl/vm/`),
/// which needs a VirtualMachine; a VMI no VM owns is deleted (`kubectl delete vmi`). When
/// `pods` does not say which ([`PodInfo::vmi_owned_by_vm`]), both are given.
fn stop_what(keys: &[&str], pods: &[PodInfo]) -> String {
    let mut vms: BTreeSet<(String, String, Option<bool>)> = BTreeSet::new();
    let mut others: Vec<String> = Vec::new();
    for k in keys {
        match k
            .split_once('/')
            .and_then(|(ns, n)| launcher_vmi_name(n).map(|v| (ns.to_owned(), v.to_owned())))
        {
            Some((ns, vmi)) => {
                let owned = pods
                    .iter()
                    .find(|p| p.key() == *k)
                    .and_then(|p| p.vmi_owned_by_vm);
                vms.insert((ns, vmi, owned));
            }
            None => others.push((*k).to_owned()),
        }
    }
    let list = |v: Vec<String>| {
        let n = v.len();
        let mut s: Vec<String> = v.into_iter().take(3).collect();
        if n > 3 {
            s.push(format!("… ({n} in all)"));
        }
        s.join(", ")
    };
    let mut parts = Vec::new();
    if !others.is_empty() {
        parts.push(format!(
            "delete or finish a pod holding one ({})",
            list(others)
        ));
    }
    if !vms.is_empty() {
        // The one stop command each (model::pod::stop_command); where the owner is not
        // known, the other one is said once after them, its commands listed.
        let cmds: Vec<String> = vms
            .iter()
            .map(|(ns, vmi, owned)| {
                let stop = pod::stop_command(ns, "", Some(vmi), *owned);
                match owned {
                    Some(false) => {
                        format!("{stop} (no VirtualMachine owns it, and virtctl stop needs one)")
                    }
                    _ => stop,
                }
            })
            .collect();
        let unknown: Vec<String> = vms
            .iter()
            .filter(|(_, _, owned)| owned.is_none())
            .map(|(ns, vmi, _)| pod::stop_command(ns, "", Some(vmi), Some(false)))
            .collect();
        let instead = if unknown.is_empty() {
            String::new()
        } else {
            format!(
                "; where no VirtualMachine owns the VMI, delete the VMI instead: {}",
                list(unknown)
            )
        };
        parts.push(format!(
            "stop a VM that can wait, a lower-priority one: {} — never delete its virt-launcher pod (that kills the running VM, and runStrategy: Always starts it again){instead}",
            list(cmds)
        ));
    }
    parts.join(", or ")
}

/// `n1 (4 free), n2 (2 free)` or with allocatable when allocations are unknown.
fn nodes_with_free(adv: &[&NodeFree]) -> String {
    adv.iter()
        .map(|a| match a.free {
            Some(f) => format!("{} ({f} free)", a.node),
            None => format!("{} ({} allocatable)", a.node, a.allocatable),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `3 free` (or `4 allocatable` without pods) of `resource` in `pool`, inventory's numbers.
fn pool_amount(f: &Facts<'_>, pool: Pool, resource: &str) -> String {
    let t = f.usage.pool_totals(pool, resource);
    if f.usage.pods_known {
        format!("{} free", t.free())
    } else {
        format!("{} allocatable", t.allocatable)
    }
}

/// The pools of the nodes advertising `rv`, once each, in node order.
fn advertiser_pools(f: &Facts<'_>, rv: &RequestView) -> Vec<Pool> {
    let mut out: Vec<Pool> = Vec::new();
    for a in &rv.advertisers {
        if let Some(p) = f.usage.pool_of(&a.node)
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out
}

/// Whether `have` is a near miss of `want`: equal after folding case and `-`/`_`, or
/// within two edits.
fn near_miss(want: &str, have: &str) -> bool {
    want != have
        && (want.to_lowercase().replace('_', "-") == have.to_lowercase().replace('_', "-")
            || strsim::levenshtein(want, have) <= names::MAX_DISTANCE)
}

// ---- the rules -------------------------------------------------------------------

/// `scheduled`: the pod is bound to a node. When it is running on a GPU name its node no
/// longer advertises (not listed, or `"0"`: an orphaned holder, [`crate::analysis::orphans`])
/// the diagnosis says so: it keeps running, but cannot come back to that node.
pub fn scheduled(f: &Facts<'_>) -> Option<Diagnosis> {
    let n = f.pod.node_name.as_ref()?;
    let known = f.usage.pool_of(n).is_some();
    let orphaned: Vec<String> = if known && !f.pod.is_terminal() {
        f.pod
            .requests
            .keys()
            .filter(|r| classify(r).is_gpu())
            .filter_map(|r| match f.usage.cell(n, r) {
                Some(c) if c.advertised() => None,
                Some(c) if c.listed => Some(format!("{r} (listed with 0)")),
                _ => Some(format!("{r} (not listed)")),
            })
            .collect()
    } else {
        Vec::new()
    };
    if !orphaned.is_empty() {
        let vm = f.pod.is_vm() || f.pod.launcher_vmi().is_some();
        // The class of a held name the node's workload no longer serves: a relabel swapped
        // (or is swapping) the operands under the holder (holder-at-risk, as check says).
        let pool = f.usage.pool_of(n);
        let class_changed = f.pod.requests.keys().any(
            |r| matches!((classify(r).workload(), pool), (Some(w), Some(p)) if w != p.workload),
        );
        let risk = if class_changed {
            format!(
                "{n}'s workload is now {} and no longer serves this class of name: the GPU Operator replaces the operands behind it (driver, vfio-manager or vGPU manager, device plugin) under the running {}, which may lose its GPU",
                pool.map(|p| p.workload.as_str()).unwrap_or("another"),
                what(f.pod)
            )
        } else if vm {
            "the VM's device sits under a device plugin that no longer offers it: the VM may lose its GPU if the plugin does not come back, and once it restarts or migrates it cannot come back".to_owned()
        } else {
            format!(
                "it keeps running, but once it restarts or is recreated it cannot come back to {n}"
            )
        };
        return Some(Diagnosis::new(
            CauseCode::Scheduled,
            format!(
                "the {} is bound to {n} (phase {}), but {n} no longer advertises what it holds: {} — {} (the node was relabelled, or its device plugin left); {risk}",
                what(f.pod),
                f.pod.phase.as_deref().unwrap_or("unknown"),
                orphaned.join(", "),
                if vm || class_changed {
                    "a holder at risk"
                } else {
                    "an orphaned holder"
                }
            ),
            if vm {
                format!(
                    "stop or live-migrate the VM now if the relabel was meant, or put {n}'s {LABEL_KEY} label back so the operator restores the operand that serves the name; then plan its move to a node that advertises it (gpuwl inventory lists them)"
                )
            } else if class_changed {
                format!(
                    "put {n}'s {LABEL_KEY} label back if the relabel was a mistake; else let the pod finish or recreate it on a node that advertises the name (gpuwl inventory lists them)"
                )
            } else {
                format!(
                    "nothing breaks while it runs; before it restarts, make {n} advertise the name again (its {LABEL_KEY} label and the device plugin) or let it be recreated on a node that does (gpuwl inventory lists them)"
                )
            },
        ));
    }
    Some(Diagnosis::new(
        CauseCode::Scheduled,
        format!(
            "the {} is bound to {n} (phase {})",
            what(f.pod),
            f.pod.phase.as_deref().unwrap_or("unknown")
        ),
        "nothing to fix: it was scheduled",
    ))
}

/// `no-gpu-request`: no extended resource is requested and no DRA resource claim.
pub(crate) fn no_gpu_request(f: &Facts<'_>) -> Option<Diagnosis> {
    (f.e.requests.is_empty() && f.pod.resource_claims.is_empty()).then(|| {
        Diagnosis::new(
            CauseCode::NoGpuRequest,
            format!(
                "the {} requests no extended resource; its wait is not about GPUs",
                what(f.pod)
            ),
            "read the scheduler message above (cpu, memory, volumes, ports)",
        )
    })
}

/// `not-permitted`: a VMI's device name is missing from KubeVirt's `permittedHostDevices`
/// (and is not a misspelling of an advertised name, which [`unadvertised_name`] explains
/// better: renaming the request fixes both).
pub(crate) fn not_permitted(f: &Facts<'_>) -> Option<Diagnosis> {
    let kv = f.kubevirt?;
    let rv = f.e.requests.iter().find(|rv| rv.permitted == Some(false))?;
    // A name no node advertises but close to one that is (a typo): virt-controller still
    // refuses it first, without a launcher pod (its message is "not permitted", observed
    // with KubeVirt v1.7.0 on the local control plane), but the fix is the name, not the
    // list.
    if let Some(s) = rv.did_you_mean.first()
        && rv.advertisers.is_empty()
    {
        let listed = if kv.permits(&s.name) {
            "permitted and advertised"
        } else {
            "advertised (not permitted either)"
        };
        return Some(Diagnosis::new(
            CauseCode::NotPermitted,
            format!(
                "KubeVirt refuses the {}: {} (from {}) is not in {} of {} {}, so no virt-launcher pod is created and the scheduler never sees the request; no node advertises it either: {} is {listed} and is {}",
                what(f.pod),
                rv.resource,
                rv.field,
                kv.source.path(),
                match kv.source {
                    HostDevicesSource::KubeVirt => "KubeVirt",
                    HostDevicesSource::HyperConverged => "HyperConverged",
                },
                kv.object,
                s.name,
                s.why()
            ),
            rename_fix(f, rv, s),
        ));
    }
    // A container name (the container device plugin's): permitting it would let the
    // launcher be scheduled, and the VM could not start. Point to a VM name instead.
    if classify(&rv.resource) == ResourceClass::ContainerGpu {
        return Some(container_name_for_vm(f, kv, rv));
    }
    let advertised = if !f.e.nodes_known {
        String::new()
    } else if rv.advertisers.is_empty() {
        "; no node advertises it either".to_string()
    } else {
        let adv: Vec<&NodeFree> = rv.advertisers.iter().collect();
        format!(
            "; the name itself is right: {} advertised on {}",
            rv.resource,
            nodes_with_free(&adv)
        )
    };
    let list = format!(
        "{} of {} {}{}",
        kv.source.path(),
        match kv.source {
            HostDevicesSource::KubeVirt => "KubeVirt",
            HostDevicesSource::HyperConverged => "HyperConverged",
        },
        kv.object,
        if kv.present { "" } else { " (absent)" }
    );
    let entries = permit_entries(&rv.resource);
    let fix = if entries.is_empty() {
        format!(
            "add a pciHostDevices or mediatedDevices entry with resourceName {} and externalResourceProvider: true to permittedHostDevices",
            rv.resource
        )
    } else {
        format!(
            "add to permittedHostDevices ({}): {}",
            kv.source.path(),
            entries
                .iter()
                .map(|e| e.yaml_line(kv.source))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    Some(
        Diagnosis::new(
            CauseCode::NotPermitted,
            format!(
                "KubeVirt refuses the {}: {} (from {}) is not in {list}, so no virt-launcher pod is created and the scheduler never sees the request{advertised}",
                what(f.pod),
                rv.resource,
                rv.field,
            ),
            fix,
        )
        .with_evidence([format!(
            "permitted: {}",
            kv.resource_names().collect::<Vec<_>>().join(", ")
        )]),
    )
}

/// The VM names (passthrough models and vGPU types) the nodes advertise, those `kv`
/// permits first, then by name.
pub(crate) fn vm_names_advertised<'a>(
    nodes: &'a [NodeInfo],
    kv: Option<&PermittedHostDevices>,
) -> Vec<&'a str> {
    let mut names: Vec<&str> = nodes
        .iter()
        .flat_map(advertised_gpus)
        .map(|(r, _)| r)
        .filter(|r| {
            matches!(
                classify(r),
                ResourceClass::PassthroughModel | ResourceClass::VgpuType
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    names.sort_by_key(|r| !kv.is_some_and(|kv| kv.permits(r)));
    names
}

/// `not-permitted` for a VMI device asking a container GPU name (`nvidia.com/gpu`, a MIG or
/// shared name): the GPU Operator's container device plugin serves it on nodes whose GPUs
/// are bound to the NVIDIA driver, and it sets no `PCI_RESOURCE_<NAME>` /
/// `MDEV_PCI_RESOURCE_<NAME>` variable, which virt-launcher reads to find the device it
/// hands the VM (kubevirt/kubevirt v1.7.0 `docs/devel/host-devices-and-device-plugins.md`;
/// `pkg/virt-launcher/virtwrap/device/hostdevice/gpu/addresspool.go`). Permitting the name would let
/// KubeVirt render a launcher pod that is scheduled and a VM that cannot start, so the fix
/// is never to permit it: it is the passthrough model or vGPU type the nodes advertise,
/// else a relabel to `vm-passthrough` / `vm-vgpu`.
fn container_name_for_vm(f: &Facts<'_>, kv: &PermittedHostDevices, rv: &RequestView) -> Diagnosis {
    let vm_names = vm_names_advertised(f.nodes, Some(kv));
    let fix = match vm_names.as_slice() {
        [] => format!(
            "relabel a GPU node for VMs ({LABEL_KEY}=vm-passthrough or vm-vgpu; gpuwl whatif relabel NODE=vm-passthrough tries it), then request the passthrough model or vGPU type it advertises instead of {}{} (not permitting {}: a container name)",
            rv.resource,
            in_field(rv),
            rv.resource
        ),
        names => format!(
            "request {} instead of {}{}{} (not permitting {}: a container name)",
            names[0],
            rv.resource,
            in_field(rv),
            if names.len() > 1 {
                format!(" (VM names advertised: {})", names.join(", "))
            } else {
                String::new()
            },
            rv.resource
        ),
    };
    Diagnosis::new(
        CauseCode::NotPermitted,
        format!(
            "KubeVirt refuses the {}: {} (from {}) is not in {} of {} {}, so no virt-launcher pod is created; and it is a container GPU name, served by the container device plugin on nodes whose GPUs are bound to the NVIDIA driver: it hands KubeVirt no PCI_RESOURCE_/MDEV_PCI_RESOURCE_ device, so a VM cannot use it even if permitted",
            what(f.pod),
            rv.resource,
            rv.field,
            kv.source.path(),
            match kv.source {
                HostDevicesSource::KubeVirt => "KubeVirt",
                HostDevicesSource::HyperConverged => "HyperConverged",
            },
            kv.object,
        ),
        fix,
    )
}

/// `no-node-data`: without nodes nothing can be said about names.
pub(crate) fn no_node_data(f: &Facts<'_>) -> Option<Diagnosis> {
    (!f.e.nodes_known).then(|| {
        Diagnosis::new(
            CauseCode::NoNodeData,
            "no node data: which nodes advertise the requested names is unknown",
            "pass --nodes FILE (kubectl get nodes -o json) or run against the cluster",
        )
    })
}

/// `node-conditions`: every node carries a `node.kubernetes.io/*` taint (added by the API
/// server's TaintNodesByCondition, removed by the node lifecycle controller) the pod does
/// not tolerate.
pub(crate) fn node_conditions(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.allowed_nodes.is_empty() || f.nodes.is_empty() {
        return None;
    }
    let cond_taints = |n: &NodeInfo| -> Vec<String> {
        placement::exclusions(f.pod, n)
            .into_iter()
            .filter_map(|x| match x {
                Exclusion::Taint { taint } if taint.key.starts_with("node.kubernetes.io/") => {
                    Some(placement::taint_str(&taint))
                }
                _ => None,
            })
            .collect()
    };
    let per_node: Vec<Vec<String>> = f.nodes.iter().map(cond_taints).collect();
    if per_node.iter().any(Vec::is_empty) {
        return None;
    }
    let all: BTreeSet<String> = per_node.into_iter().flatten().collect();
    Some(Diagnosis::new(
        CauseCode::NodeConditions,
        format!(
            "every node carries a node-condition taint the {} does not tolerate ({}): no node is schedulable, whatever the GPU names",
            what(f.pod),
            all.into_iter().collect::<Vec<_>>().join(", ")
        ),
        "make the nodes Ready (the node lifecycle controller removes node.kubernetes.io/* taints once the condition clears); do not tolerate it away",
    ))
}

/// The node label virt-handler keeps at `true` while its heartbeat is fresh on that node
/// (kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1/types.go`, `NodeSchedulable`;
/// set by `pkg/virt-handler/heartbeat/heartbeat.go`); every launcher pod's nodeSelector
/// asks for it (`pkg/virt-controller/services/template.go`).
pub(crate) const KUBEVIRT_SCHEDULABLE: &str = "kubevirt.io/schedulable";

/// The resource virt-handler's own device plugin advertises on its node and every
/// launcher pod requests (kubevirt/kubevirt `pkg/virt-handler/device-manager/`).
pub(crate) const KVM_RESOURCE: &str = "devices.kubevirt.io/kvm";

/// Whether `r` is one of the `devices.kubevirt.io/*` names virt-handler advertises
/// (`kvm`, `tun`, `vhost-net`, …).
pub(crate) fn is_kubevirt_device(r: &str) -> bool {
    r.starts_with("devices.kubevirt.io/")
}

/// Whether virt-handler is ready on `n`, as the scheduler sees it: the node carries
/// `kubevirt.io/schedulable=true` and advertises `devices.kubevirt.io/kvm` (non-zero).
pub(crate) fn virt_handler_ready(n: &NodeInfo) -> bool {
    n.label(KUBEVIRT_SCHEDULABLE) == Some("true") && advertises(n, KVM_RESOURCE)
}

/// Whether `n`'s allocatable (else capacity) lists `r` with a whole, non-zero quantity.
fn advertises(n: &NodeInfo, r: &str) -> bool {
    n.allocatable
        .as_ref()
        .unwrap_or(&n.capacity)
        .get(r)
        .and_then(|q| Quantity::parse(q).ok())
        .and_then(|q| q.to_count().ok())
        .is_some_and(|c| c > 0)
}

/// `virt-handler`: a virt-launcher pod (it requests `devices.kubevirt.io/*` or selects
/// `kubevirt.io/schedulable`), or a VMI/VM when KubeVirt is evidently
/// installed (some node is ready for it), can run only where virt-handler is ready, and
/// none of the nodes that advertise its GPU names is: they lack `kubevirt.io/schedulable=
/// true` or `devices.kubevirt.io/kvm`, both virt-handler's. The fix is virt-handler on
/// those nodes, never another device plugin, never a hand-set label.
pub(crate) fn virt_handler(f: &Facts<'_>) -> Option<Diagnosis> {
    if f.pod.node_name.is_some() || f.nodes.is_empty() {
        return None;
    }
    // What virt-controller renders into every launcher pod (a pod merely named like one,
    // in a dump without KubeVirt, is not judged).
    let launcher = f.pod.requests.keys().any(|r| is_kubevirt_device(r))
        || f.pod.node_selector.contains_key(KUBEVIRT_SCHEDULABLE);
    if !(launcher || f.pod.is_vm() && f.nodes.iter().any(virt_handler_ready)) {
        return None;
    }
    // The nodes that advertise every other extended name the pod asks for.
    let gpu: Vec<&RequestView> =
        f.e.requests
            .iter()
            .filter(|rv| !is_kubevirt_device(&rv.resource))
            .collect();
    let relevant: Vec<&NodeInfo> = f
        .nodes
        .iter()
        .filter(|n| {
            gpu.iter()
                .all(|rv| rv.advertisers.iter().any(|a| a.node == n.name))
        })
        .collect();
    if relevant.is_empty() || relevant.iter().any(|n| virt_handler_ready(n)) {
        return None;
    }
    let ns = f
        .kubevirt
        .and_then(|k| k.object.split_once('/'))
        .map(|(ns, _)| ns)
        .filter(|ns| !ns.is_empty())
        .unwrap_or("kubevirt");
    let evidence: Vec<String> = relevant
        .iter()
        .map(|n| {
            let mut why = Vec::new();
            match n.label(KUBEVIRT_SCHEDULABLE) {
                Some("true") => {}
                Some(v) => why.push(format!("label {KUBEVIRT_SCHEDULABLE}={v}")),
                None => why.push(format!("no label {KUBEVIRT_SCHEDULABLE}")),
            }
            if !advertises(n, KVM_RESOURCE) {
                why.push(format!("does not advertise {KVM_RESOURCE}"));
            }
            format!("{}: {}", n.name, why.join(", "))
        })
        .collect();
    let names: Vec<&str> = relevant.iter().map(|n| n.name.as_str()).collect();
    let shown = if names.len() > 3 {
        format!("{} and {} more", names[..3].join(", "), names.len() - 3)
    } else {
        names.join(", ")
    };
    let what_gpu = if gpu.is_empty() {
        "no node".to_string()
    } else {
        format!(
            "none of the nodes advertising {} ({shown})",
            gpu.iter()
                .map(|rv| rv.resource.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Some(
        Diagnosis::new(
            CauseCode::VirtHandler,
            format!(
                "virt-handler is not ready on the nodes the {} needs: {what_gpu} carries {KUBEVIRT_SCHEDULABLE}=true with {KVM_RESOURCE} advertised — both come from virt-handler (its heartbeat sets the label, its device plugin the resource), and every virt-launcher pod asks for them",
                what(f.pod)
            ),
            format!(
                "get virt-handler running and Ready on {shown}: kubectl get pods -n {ns} -l kubevirt.io=virt-handler -o wide --field-selector spec.nodeName={} (its logs say why it is not Ready), and kubectl get daemonset virt-handler -n {ns} (its nodeSelector and tolerations, from the KubeVirt CR's spec.workloads, must admit the node); do not set the label by hand, and {KVM_RESOURCE} needs no other device plugin",
                names[0]
            ),
        )
        .with_evidence(evidence),
    )
}

/// The fix for a request whose name is wrong but related to an advertised one.
fn rename_fix(f: &Facts<'_>, rv: &RequestView, s: &names::Suggestion) -> String {
    let mut fix = match s.relation {
        Relation::SharingRename => format!(
            "request {} instead of {}{}, or turn renameByDefault off in the device plugin's sharing config (time-slicing/MPS) so the nodes advertise {} again",
            s.name,
            rv.resource,
            in_field(rv),
            rv.resource
        ),
        Relation::MigPartition => format!(
            "request {} instead of {}{} (the GPUs are partitioned by MIG), or change the nodes' MIG configuration (label nvidia.com/mig.config) so they advertise {}",
            s.name,
            rv.resource,
            in_field(rv),
            rv.resource
        ),
        Relation::SamePciDevice
            if resource::is_hex_fallback(s.name.strip_prefix(NVIDIA_PREFIX).unwrap_or(&s.name)) =>
        {
            format!(
                "request {} instead of {}{} (that node's sandbox device plugin is too old to know the device's name; after upgrading it the node advertises the model name instead)",
                s.name,
                rv.resource,
                in_field(rv)
            )
        }
        _ => format!(
            "request {} instead of {}{}",
            s.name,
            rv.resource,
            in_field(rv)
        ),
    };
    if f.pod.is_vm() {
        match f.kubevirt {
            Some(kv) if !kv.permits(&s.name) => {
                let entries: Vec<String> = permit_entries(&s.name)
                    .iter()
                    .map(|e| e.yaml_line(kv.source))
                    .collect();
                fix.push_str(&format!(
                    ", and permit it in permittedHostDevices ({})",
                    if entries.is_empty() {
                        format!("resourceName {}", s.name)
                    } else {
                        entries.join("; ")
                    }
                ));
            }
            Some(_) => {}
            None => fix.push_str(&format!(
                " (the same name in the KubeVirt CR's permittedHostDevices: {})",
                s.name
            )),
        }
    }
    fix
}

/// `unadvertised-name`: no node advertises a requested name (non-zero). With a related
/// advertised name, that name is the fix; else the class of the name says what would
/// advertise it.
pub(crate) fn unadvertised_name(f: &Facts<'_>) -> Option<Diagnosis> {
    let rv = f.e.requests.iter().find(|rv| {
        rv.advertisers.is_empty() && (rv.stale_nodes.is_empty() || !rv.did_you_mean.is_empty())
    })?;
    let mut cause = format!(
        "no node advertises {} (non-zero, {} nodes read)",
        rv.resource, f.e.nodes_total
    );
    if !rv.stale_nodes.is_empty() {
        cause.push_str(&format!(
            "; {} list it with 0, a stale key the kubelet keeps after its device plugin left",
            rv.stale_nodes.join(", ")
        ));
    }
    if let Some(s) = rv.did_you_mean.first() {
        let on: Vec<String> = f
            .usage
            .advertisers(&s.name)
            .map(|(n, c)| {
                let pool = f.usage.pool_of(n).map(|p| p.name()).unwrap_or_default();
                if f.usage.pods_known {
                    format!(
                        "{n} [{pool}]: {} allocatable, {} free",
                        c.allocatable,
                        c.free()
                    )
                } else {
                    format!("{n} [{pool}]: {} allocatable", c.allocatable)
                }
            })
            .collect();
        let kind = if s.relation.same_hardware() {
            "a name mismatch, not a shortage"
        } else {
            "one wrong character removes every node"
        };
        let nodes: Vec<&str> = f.usage.advertisers(&s.name).map(|(n, _)| n).collect();
        let mut pools: Vec<Pool> = Vec::new();
        for n in &nodes {
            if let Some(p) = f.usage.pool_of(n)
                && !pools.contains(&p)
            {
                pools.push(p);
            }
        }
        let amounts: Vec<String> = pools
            .iter()
            .map(|p| format!("{} in pool {}", pool_amount(f, *p, &s.name), p.name()))
            .collect();
        cause.push_str(&format!(
            "; {} is advertised on {} ({}) and is {}: {kind}",
            s.name,
            nodes.join(", "),
            amounts.join("; "),
            s.why()
        ));
        return Some(
            Diagnosis::new(CauseCode::UnadvertisedName, cause, rename_fix(f, rv, s))
                .with_evidence(on),
        );
    }
    let fix = match rv.class.workload() {
        // The operator's label only where the facts show the operator, and the device
        // plugin's toleration where that is the block (issue 35, kind 5).
        Some(w) => {
            let h = unused::advertise_hint(
                f.nodes,
                f.pods,
                f.cluster_policy,
                f.operand_pods,
                &rv.resource,
                w,
                rv.class,
            );
            if let Some(c) = h.cause {
                cause.push_str(&format!("; {c}"));
            }
            h.fix
        }
        None if is_kubevirt_device(&rv.resource) => format!(
            "{} comes from virt-handler's own device plugin, not from a plugin to deploy: get virt-handler running and Ready on the nodes (kubectl get pods -n kubevirt -l kubevirt.io=virt-handler -o wide; kubectl get daemonset virt-handler -n kubevirt)",
            rv.resource
        ),
        None => format!(
            "deploy the device plugin that advertises {}, or request a name that is advertised",
            rv.resource
        ),
    };
    Some(Diagnosis::new(CauseCode::UnadvertisedName, cause, fix))
}

/// `stale-only`: the name is listed only with a stale `0`: its device plugin left (a
/// relabelled node, a failed operand).
pub(crate) fn stale_only(f: &Facts<'_>) -> Option<Diagnosis> {
    let rv =
        f.e.requests
            .iter()
            .find(|rv| rv.advertisers.is_empty() && !rv.stale_nodes.is_empty())?;
    let labels: Vec<String> = f
        .nodes
        .iter()
        .filter(|n| rv.stale_nodes.contains(&n.name))
        .map(|n| {
            let now: Vec<String> = advertised_gpus(n)
                .into_iter()
                .map(|(r, a)| format!("{r}={a}"))
                .collect();
            format!(
                "{} (label {}; advertises {})",
                n.name,
                n.label(LABEL_KEY).unwrap_or("none"),
                if now.is_empty() {
                    "no GPU resource".to_string()
                } else {
                    now.join(", ")
                }
            )
        })
        .collect();
    Some(
        Diagnosis::new(
            CauseCode::StaleOnly,
            format!(
                "{} is listed only with 0 on {}: a stale key the kubelet keeps after the device plugin that advertised it went away (a relabelled node, or an operand that is not running)",
                rv.resource,
                rv.stale_nodes.join(", ")
            ),
            format!(
                "find why the device plugin for {} is gone on those nodes (their workload label, the GPU Operator's operand pods), or request a name that is advertised now",
                rv.resource
            ),
        )
        .with_evidence(labels),
    )
}

/// `excluded`: nodes advertise the name, but the pod's constraints exclude all of them.
/// A nodeSelector on the workload label points at the pool whose nodes carry the name; a
/// label value on those nodes that is a near miss of the selector is the thing to fix.
pub fn excluded(f: &Facts<'_>) -> Option<Diagnosis> {
    // No node, allowed or not, has as many units of a name as asked: lifting a cordon, a
    // taint or a selector serves nothing, so the cause is the size (a fix that uncordons
    // would leave the pod Pending).
    if let Some(d) = too_large_everywhere(f) {
        return Some(d);
    }
    if let Some(d) = cordoned(f) {
        return Some(d);
    }
    let rv =
        f.e.requests
            .iter()
            .find(|rv| !rv.advertisers.is_empty() && rv.advertisers.iter().all(|a| !a.allowed))?;
    let x = Excluders::of(f, rv);
    if let Some(d) = selector_near_miss(f, &x) {
        return Some(d);
    }
    if let Some(Exclusion::NodeSelector { key, want, .. }) = x.excl.first()
        && key == LABEL_KEY
    {
        return Some(workload_selector(f, &x, key, want));
    }
    Some(Diagnosis::new(
        CauseCode::Excluded,
        format!(
            "{} is advertised only in {} on {}, and the {}'s {} excludes those nodes",
            rv.resource,
            x.pool_text,
            x.names.join(", "),
            what(f.pod),
            x.excl
                .iter()
                .map(Exclusion::constraint)
                .collect::<Vec<_>>()
                .join(" and "),
        ),
        exclusion_fix(f.pod, x.excl.first(), &rv.resource, &x.nodes),
    ))
}

/// What keeps a pod off the nodes that advertise one of its names (`rv`): those nodes,
/// every distinct constraint that excludes one of them, and their pools.
struct Excluders<'a> {
    /// The request no allowed node advertises.
    rv: &'a RequestView,
    /// The nodes advertising it, in node order.
    nodes: Vec<&'a NodeInfo>,
    /// Their names.
    names: Vec<&'a str>,
    /// The constraints excluding them, each once ([`Exclusion::constraint`]), in node order.
    excl: Vec<Exclusion>,
    /// Their pools ([`advertiser_pools`]).
    pools: Vec<Pool>,
    /// `pool NAME (N free), …` of those pools.
    pool_text: String,
}

impl<'a> Excluders<'a> {
    fn of(f: &Facts<'a>, rv: &'a RequestView) -> Excluders<'a> {
        let nodes: Vec<&NodeInfo> = f
            .nodes
            .iter()
            .filter(|n| rv.advertisers.iter().any(|a| a.node == n.name))
            .collect();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let mut excl: Vec<Exclusion> = Vec::new();
        for n in &nodes {
            for x in placement::exclusions(f.pod, n) {
                if !excl.iter().any(|y| y.constraint() == x.constraint()) {
                    excl.push(x);
                }
            }
        }
        let pools = advertiser_pools(f, rv);
        let pool_text = pools
            .iter()
            .map(|p| format!("pool {} ({})", p.name(), pool_amount(f, *p, &rv.resource)))
            .collect::<Vec<_>>()
            .join(", ");
        Excluders {
            rv,
            nodes,
            names,
            excl,
            pools,
            pool_text,
        }
    }
}

/// A label on the advertising nodes that misses a nodeSelector of the pod by a typo: the
/// first such selector, diagnosed as the pod's typo or the node's.
fn selector_near_miss(f: &Facts<'_>, x: &Excluders<'_>) -> Option<Diagnosis> {
    x.excl.iter().find_map(|e| {
        let Exclusion::NodeSelector {
            key,
            want,
            have: Some(_),
        } = e
        else {
            return None;
        };
        // A value some node carries is meant, not mistyped (a pod pinned to another node
        // by name is not a typo of this node's name).
        if f.nodes.iter().any(|n| n.label(key) == Some(want.as_str())) {
            return None;
        }
        let typo: Vec<(&str, &str)> = x
            .nodes
            .iter()
            .filter_map(|n| {
                let h = n.label(key)?;
                near_miss(want, h).then_some((n.name.as_str(), h))
            })
            .collect();
        let (_, have) = typo.first()?;
        let who: Vec<&str> = typo.iter().map(|(n, _)| *n).collect();
        let invalid = key == LABEL_KEY && have.parse::<WorkloadConfig>().is_err();
        let want_valid = key != LABEL_KEY || want.parse::<WorkloadConfig>().is_ok();
        // The node's label is the one to fix only when it is the invalid side and an admin
        // sets it; else the pod's selector is.
        Some(if !(invalid && want_valid) || system_label(key) {
            pod_selector_typo(f, x.rv, &who, key, want, have, want_valid)
        } else {
            node_label_typo(f, x.rv, &who, key, want, have, invalid)
        })
    })
}

/// The pod's nodeSelector `key=want` is a near miss of the value `have` that the
/// advertising nodes `who` carry: change the selector.
fn pod_selector_typo(
    f: &Facts<'_>,
    rv: &RequestView,
    who: &[&str],
    key: &str,
    want: &str,
    have: &str,
    want_valid: bool,
) -> Diagnosis {
    let why = if key == LABEL_KEY && !want_valid {
        format!(
            " and not a valid workload config ({})",
            WorkloadConfig::ALL
                .iter()
                .map(|w| w.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else if system_label(key) {
        " (a label the kubelet, cloud provider or feature discovery sets: the node's value is the real one)".to_string()
    } else {
        String::new()
    };
    // A VMI or VM judged as its launcher ([`crate::model::launcher`]): virt-controller
    // renders the architecture selector from `spec.architecture` (amd64 when unset), so
    // the change is that field, not a nodeSelector the user never wrote.
    let rendered_arch = key == launcher::ARCH_LABEL && f.pod.is_vm() && f.pod.vmi_shape.is_some();
    let fix = if rendered_arch {
        let field = if f.pod.kind == ObjectKind::VirtualMachine {
            "spec.template.spec.architecture"
        } else {
            "spec.architecture"
        };
        format!(
            "set the {}'s {field} to {have} (virt-controller renders the virt-launcher pod's nodeSelector {key} from it, amd64 when unset; a nodeSelector {key} of the {} itself wins)",
            what(f.pod),
            what(f.pod)
        )
    } else {
        format!(
            "change the {}'s nodeSelector {key}={want} to {key}={have}",
            what(f.pod)
        )
    };
    Diagnosis::new(
        CauseCode::Excluded,
        format!(
            "{} advertises {} but carries {key}={have}; the {}'s nodeSelector {key}={want} is a near miss of it{why}",
            who.join(", "),
            rv.resource,
            what(f.pod),
        ),
        fix,
    )
}

/// The advertising nodes `who` carry `key=have`, a near miss of the pod's nodeSelector
/// `key=want` (and, when `invalid`, not a valid workload config): relabel the nodes.
fn node_label_typo(
    f: &Facts<'_>,
    rv: &RequestView,
    who: &[&str],
    key: &str,
    want: &str,
    have: &str,
    invalid: bool,
) -> Diagnosis {
    let why = if invalid {
        format!(
            " and not a valid workload config (the GPU Operator silently applies its default to such a node, here pool {})",
            f.usage
                .pool_of(who[0])
                .map(|p| p.name())
                .unwrap_or_default()
        )
    } else {
        String::new()
    };
    Diagnosis::new(
        CauseCode::Excluded,
        format!(
            "{} advertises {} but carries {key}={have}, a near miss of the nodeSelector {key}={want}{why}: the broken label, not the pod, keeps them apart",
            who.join(", "),
            rv.resource,
        ),
        format!(
            "relabel the node: kubectl label node {} {key}={want} --overwrite",
            who.join(" ")
        ),
    )
}

/// The pod's first excluding constraint is the nodeSelector `key=want` on the workload
/// label: it confines the pod to pool `want`, whose nodes advertise other names. The fix
/// points the selector at a pool that has the name, or requests what pool `want` has.
fn workload_selector(f: &Facts<'_>, x: &Excluders<'_>, key: &str, want: &str) -> Diagnosis {
    let rv = x.rv;
    // What the allowed nodes offer instead.
    let other: BTreeSet<&str> = f
        .nodes
        .iter()
        .filter(|n| f.e.allowed_nodes.contains(&n.name))
        .flat_map(|n| advertised_gpus(n).into_iter().map(|(r, _)| r))
        .collect();
    let cause = format!(
        "the nodeSelector {key}={want} confines the {} to pool {want}{}, whose nodes advertise {} — not {}; {} exists only in {} on {}. Different names are different resources: one pool cannot lend to another.",
        what(f.pod),
        unmatched_selector_note(f.nodes, key, want),
        if other.is_empty() {
            "no GPU resource".to_string()
        } else {
            other.iter().copied().collect::<Vec<_>>().join(", ")
        },
        rv.resource,
        rv.resource,
        x.pool_text,
        x.names.join(", "),
    );
    let mut fix = match selector_target_pool(f, x, key) {
        Some(p) => format!(
            "change the nodeSelector {key}={want} to {key}={} (or remove it): pool {} has {} {}",
            p.workload,
            p.name(),
            pool_amount(f, p, &rv.resource),
            rv.resource
        ),
        None => {
            // The value the advertising nodes really carry (never one no node has).
            let carried: BTreeSet<&str> = x.nodes.iter().filter_map(|n| n.label(key)).collect();
            format!(
                "remove the nodeSelector {key}={want}: the nodes advertising {} ({}) carry {}",
                rv.resource,
                x.names.join(", "),
                if carried.is_empty() {
                    format!("no {key} label")
                } else {
                    format!(
                        "{key}={}",
                        carried.iter().copied().collect::<Vec<_>>().join(" / ")
                    )
                }
            )
        }
    };
    if let Some(alt) = other
        .iter()
        .find(|r| classify(r).is_gpu() && classify(r) != classify(&rv.resource))
        .or(other.iter().next())
    {
        fix.push_str(&format!(
            "; to stay on {want}, request {alt} instead of {}",
            rv.resource
        ));
    }
    Diagnosis::new(CauseCode::Excluded, cause, fix)
}

/// ` (no node has it)` when no node carries the label `key=want` (with the near misses
/// some node carries, when there are any); empty when some node carries it.
fn unmatched_selector_note(nodes: &[NodeInfo], key: &str, want: &str) -> String {
    if nodes.iter().any(|n| n.label(key) == Some(want)) {
        return String::new();
    }
    let near: Vec<String> = nodes
        .iter()
        .filter_map(|n| {
            let h = n.label(key)?;
            near_miss(want, h).then(|| format!("{} carries {key}={h}", n.name))
        })
        .collect();
    if near.is_empty() {
        " (no node has it)".to_string()
    } else {
        format!(" (no node has it; {}, a near miss)", near.join(", "))
    }
}

/// A pool to point a nodeSelector on `key` at: one whose advertising nodes carry exactly
/// its name as their label (an unlabelled node in a pool by the ClusterPolicy default or by
/// its deploy labels matches no selector value), the one with the most free units.
fn selector_target_pool(f: &Facts<'_>, x: &Excluders<'_>, key: &str) -> Option<Pool> {
    x.pools
        .iter()
        .filter(|p| {
            x.nodes.iter().any(|n| {
                f.usage.pool_of(&n.name) == Some(**p) && n.label(key) == Some(p.workload.as_str())
            })
        })
        .max_by_key(|p| f.usage.pool_totals(**p, &x.rv.resource).free())
        .copied()
}

/// The fix for the constraint `first` that keeps a pod off `nodes`, the nodes advertising
/// `resource`: uncordon, change or remove the selector, widen the affinity, heal the node
/// or tolerate the taint.
fn exclusion_fix(
    pod: &PodInfo,
    first: Option<&Exclusion>,
    resource: &str,
    nodes: &[&NodeInfo],
) -> String {
    let names = || {
        nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match first {
        Some(Exclusion::Unschedulable) => format!(
            "finish the maintenance and uncordon: kubectl uncordon {}",
            nodes
                .iter()
                .filter(|n| n.unschedulable)
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Some(Exclusion::NodeSelector { key, want, have })
            if pod.launcher_vmi().is_some() && node_owned_label(key).is_some() =>
        {
            node_owned_fix(key, want, have.as_deref(), nodes)
        }
        Some(Exclusion::NodeSelector { key, want, have }) => match have {
            Some(h) => format!(
                "change the nodeSelector {key}={want} to {key}={h} (the value on {}) or remove it",
                names()
            ),
            None => format!(
                "remove the nodeSelector {key}={want}: no node advertising {resource} has that label"
            ),
        },
        Some(Exclusion::Affinity) => format!(
            "widen the required node affinity so that it matches {}",
            names()
        ),
        Some(Exclusion::Taint { taint }) if taint.key.starts_with("node.kubernetes.io/") => {
            format!(
                "make {} healthy: {} is set by Kubernetes for a node condition and goes away when it clears; never tolerate node.kubernetes.io/* taints",
                names(),
                taint.key
            )
        }
        Some(Exclusion::Taint { taint }) => format!(
            "add the toleration {{key: {}, operator: {}, effect: {}}}",
            taint.key,
            match &taint.value {
                Some(v) => format!("Equal, value: {v}"),
                None => "Exists".into(),
            },
            taint.effect
        ),
        None => "check the nodes' labels and taints".into(),
    }
}

/// The fix when a virt-launcher pod's nodeSelector entry is one virt-controller adds on its
/// own ([`node_owned_label`]): nobody can drop it from the pod or the VMI, so the fix is at
/// the nodes, whose label the kubelet or virt-handler writes.
fn node_owned_fix(key: &str, want: &str, have: Option<&str>, nodes: &[&NodeInfo]) -> String {
    let owner = node_owned_label(key).unwrap_or("a node component");
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let has = if names.len() == 1 { "has" } else { "have" };
    let state = match have {
        Some(h) => format!("{} {has} {key}={h}", names.join(", ")),
        None => format!("{} {has} no label {key}", names.join(", ")),
    };
    let how = match key {
        "kubernetes.io/arch" => format!(
            "a node registered by a kubelet always has it; a node object made by hand needs it: kubectl label node {} {key}={want}",
            names.join(" ")
        ),
        "kubevirt.io/schedulable" => format!(
            "check that virt-handler runs and is ready on {} (kubectl get pods -A -l kubevirt.io=virt-handler -o wide)",
            names.join(", ")
        ),
        _ => format!(
            "check virt-handler on {}, or ask the VMI for a CPU model or feature those nodes offer",
            names.join(", ")
        ),
    };
    format!(
        "virt-controller asks {key}={want} of every node for this VM's launcher pod and {state}: the label is written by {owner}, not by the VM's spec; {how}"
    )
}

/// `not-co-located`: each requested name is advertised on an allowed node, but no single
/// allowed node advertises all of them.
pub(crate) fn not_co_located(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.candidates.is_empty() {
        return None;
    }
    let per_name: Vec<String> =
        f.e.requests
            .iter()
            .map(|rv| {
                let allowed: Vec<&NodeFree> = rv.advertisers.iter().filter(|a| a.allowed).collect();
                format!("{} on {}", rv.resource, nodes_with_free(&allowed))
            })
            .collect();
    let classes: BTreeSet<ResourceClass> = f.e.requests.iter().map(|rv| rv.class).collect();
    let fix = if classes.len() > 1 {
        format!(
            "request names of one workload config only: a node runs one of container, vm-passthrough, vm-vgpu, so {} never meet on one node",
            f.e.requests
                .iter()
                .map(|rv| rv.class.describe())
                .collect::<Vec<_>>()
                .join(" and ")
        )
    } else if classes.contains(&ResourceClass::VgpuType) {
        format!(
            "ask for one vGPU type per {} (or several of the same type), or configure a node to offer all of them (its vGPU device manager config, label nvidia.com/vgpu.config)",
            what(f.pod)
        )
    } else if f.pod.is_vm() {
        "ask only for devices one node has together, or make one node advertise all of them".into()
    } else {
        "ask only for resources one node has together (several workloads if need be), or make one node advertise all of them".into()
    };
    Some(Diagnosis::new(
        CauseCode::NotCoLocated,
        format!(
            "each requested name is advertised, but on different nodes: {}; no allowed node advertises all of them together, and a {}'s devices come from one node",
            per_name.join("; "),
            what(f.pod)
        ),
        fix,
    ))
}

/// `too-large`: the request is larger than any candidate's allocatable, so no amount of
/// freeing helps (a pod's units come from one node).
pub(crate) fn too_large(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.fitting.is_empty() {
        return None;
    }
    let too_big: Vec<(&RequestView, i64)> =
        f.e.requests
            .iter()
            .filter_map(|rv| {
                let most = rv
                    .advertisers
                    .iter()
                    .filter(|a| f.e.candidates.contains(&a.node))
                    .map(|a| a.allocatable)
                    .max()?;
                (rv.units > most).then_some((rv, most))
            })
            .collect();
    if too_big.is_empty() {
        return None;
    }
    Some(too_large_diagnosis(
        f,
        &too_big,
        &format!(
            "any candidate ({}) has, even with nothing allocated",
            f.e.candidates.join(", ")
        ),
        |_| "one candidate".to_owned(),
    ))
}

/// `too-large` before any exclusion: a requested name that nodes advertise, but none with
/// as many allocatable units as asked (allowed or excluded alike); `None` otherwise.
fn too_large_everywhere(f: &Facts<'_>) -> Option<Diagnosis> {
    let too_big: Vec<(&RequestView, i64)> =
        f.e.requests
            .iter()
            .filter_map(|rv| {
                let most = rv.advertisers.iter().map(|a| a.allocatable).max()?;
                (rv.units > most).then_some((rv, most))
            })
            .collect();
    // Only where an exclusion is in play: without one the `too-large` rule says it over
    // the candidates.
    if too_big.is_empty()
        || too_big
            .iter()
            .all(|(rv, _)| rv.advertisers.iter().all(|a| a.allowed))
    {
        return None;
    }
    Some(too_large_diagnosis(
        f,
        &too_big,
        "any node advertising the name has, even with nothing allocated and every cordon, taint and selector lifted",
        |rv| {
            format!(
                "one node ({})",
                rv.advertisers
                    .iter()
                    .map(|a| a.node.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    ))
}

/// The `too-large` diagnosis of `too_big` (each request with the most allocatable units
/// one node has): `than` says which nodes were compared, `on` names them per request.
fn too_large_diagnosis(
    f: &Facts<'_>,
    too_big: &[(&RequestView, i64)],
    than: &str,
    on: impl Fn(&RequestView) -> String,
) -> Diagnosis {
    let what_: Vec<String> = too_big
        .iter()
        .map(|(rv, most)| {
            format!(
                "{} × {} asked, at most {most} allocatable on {}",
                rv.units,
                rv.resource,
                on(rv)
            )
        })
        .collect();
    let fix: Vec<String> = too_big
        .iter()
        .map(|(rv, most)| format!("at most {most} × {}", rv.resource))
        .collect();
    Diagnosis::new(
        CauseCode::TooLarge,
        format!(
            "Insufficient: the {} asks for more than {than}: {}",
            what(f.pod),
            what_.join("; ")
        ),
        format!(
            "ask for {} per {w} (a {w}'s units come from one node), or add nodes with more GPUs",
            fix.join(" and "),
            w = what(f.pod)
        ),
    )
}

/// The requests short of free units on the candidates, with the candidates' free sum.
fn short_requests<'a>(f: &'a Facts<'_>) -> Vec<(&'a RequestView, i64, Vec<&'a NodeFree>)> {
    f.e.requests
        .iter()
        .filter_map(|rv| {
            let on: Vec<&NodeFree> = rv
                .advertisers
                .iter()
                .filter(|a| f.e.candidates.contains(&a.node))
                .collect();
            let free = on
                .iter()
                .filter_map(|a| a.free)
                .fold(0i64, |s, x| s.saturating_add(x.max(0)));
            let enough = on.iter().any(|a| a.free.is_none_or(|x| x >= rv.units));
            (!enough).then_some((rv, free, on))
        })
        .collect()
}

/// `in-use`: the right name on allowed nodes, but every unit is allocated (allocatable
/// counts healthy devices, it does not drop when one is handed out).
pub(crate) fn in_use(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.fitting.is_empty() || !f.usage.pods_known {
        return None;
    }
    let short = short_requests(f);
    let (rv, free, on) = short.first()?;
    if *free > 0 {
        return None;
    }
    let held: Vec<&str> = on
        .iter()
        .flat_map(|a| a.held_by.iter().map(String::as_str))
        .collect();
    let allocatable = on.iter().fold(0i64, |s, a| s.saturating_add(a.allocatable));
    let allocated = on
        .iter()
        .fold(0i64, |s, a| s.saturating_add(a.allocated.unwrap_or(0)));
    let evidence: Vec<String> = on
        .iter()
        .map(|a| {
            format!(
                "{}: {} allocatable, {} allocated by {}, {} free",
                a.node,
                a.allocatable,
                a.allocated.unwrap_or(0),
                holders(&a.held_by.iter().map(String::as_str).collect::<Vec<_>>()),
                a.free.unwrap_or(0)
            )
        })
        .collect();
    Some(
        Diagnosis::new(
            CauseCode::InUse,
            format!(
                "the name is right and every unit is in use: {} on {} has {allocatable} allocatable, {allocated} allocated by {} pod(s), 0 free — allocatable counts devices, it does not drop when one is handed out",
                rv.resource,
                on.iter().map(|a| a.node.as_str()).collect::<Vec<_>>().join(", "),
                held.len()
            ),
            format!(
                "{}, or add a node advertising {}",
                stop_what(&held, f.pods),
                rv.resource
            ),
        )
        .with_evidence(evidence),
    )
}

/// `insufficient`: free units exist on the candidates, but fewer than requested on each.
pub fn insufficient(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.fitting.is_empty() {
        return None;
    }
    let short = short_requests(f);
    if short.is_empty() {
        return Some(Diagnosis::new(
            CauseCode::Insufficient,
            format!(
                "Insufficient: each requested name has enough free units on some candidate, but no single candidate ({}) has enough of all of them at once",
                f.e.candidates.join(", ")
            ),
            "free units on one candidate (finish pods using them; for a VM, virtctl stop a lower-priority VM, never delete a virt-launcher pod) or ask for fewer units",
        ));
    }
    let what_: Vec<String> = short
        .iter()
        .map(|(rv, _, on)| {
            format!(
                "{} × {} asked, {} (a {}'s units come from one node)",
                rv.units,
                rv.resource,
                on.iter()
                    .map(|a| format!("{} has {} free", a.node, a.free.unwrap_or(a.allocatable)))
                    .collect::<Vec<_>>()
                    .join(", "),
                what(f.pod)
            )
        })
        .collect();
    Some(Diagnosis::new(
        CauseCode::Insufficient,
        format!(
            "Insufficient: the candidates {} advertise the names but have too few free units: {}",
            f.e.candidates.join(", "),
            what_.join("; ")
        ),
        "free units on one candidate so that it alone has enough (finish pods using them there; for a VM, virtctl stop a lower-priority VM, never delete a virt-launcher pod), ask for fewer units, or add nodes of the same pool",
    ))
}

/// `fits-now`: an allowed node has the units free: the wait is elsewhere.
pub(crate) fn fits_now(f: &Facts<'_>) -> Option<Diagnosis> {
    let nodes = if f.e.schedulable.is_empty() {
        &f.e.fitting
    } else {
        &f.e.schedulable
    };
    // With resource claims, only the nodes where every claim can be allocated now.
    let nodes: Vec<String> = match f.e.dra.as_ref() {
        Some(p) if !f.e.claims.is_empty() => {
            let both: Vec<String> = nodes
                .iter()
                .filter(|n| p.fits.contains(n))
                .cloned()
                .collect();
            if both.is_empty() {
                p.fits.clone()
            } else {
                both
            }
        }
        _ => nodes.clone(),
    };
    let cause = format!(
        "{} can take the {} now{}",
        nodes.join(", "),
        what(f.pod),
        if f.e.allocations_known {
            ""
        } else {
            " (allocations unknown: pass --pods FILE)"
        }
    );
    if let Some((cause, fix)) = mps_refusal_ahead(f, &nodes, &cause) {
        return Some(Diagnosis::new(CauseCode::FitsNow, cause, fix));
    }
    Some(Diagnosis::new(
        CauseCode::FitsNow,
        cause,
        "wait for the next scheduling attempt; if it stays Pending, the scheduler message names what gpuwl does not model (host ports, volumes, inter-pod affinity, topology spread, scheduling gates)",
    ))
}

/// A pod that fits now but asks more than 1 unit of a name every fitting node shares with
/// MPS: the scheduler will bind it, then the device plugin refuses it at kubelet admission
/// (`maximum request size for shared resources is 1`; with MPS `failRequestsGreaterThanOne`
/// is always on — NVIDIA/k8s-device-plugin `README.md` "Shared Access to GPUs", issue #929;
/// configurable only from #1762 on) and the pod is Failed, never retried. Returns the
/// cause (`cause` extended) and the fix; `None` otherwise. Time-slicing refuses only with
/// `failRequestsGreaterThanOne: true`, which node labels do not show: not judged.
fn mps_refusal_ahead(f: &Facts<'_>, nodes: &[String], cause: &str) -> Option<(String, String)> {
    if f.pod.node_name.is_some() || nodes.is_empty() {
        return None;
    }
    let mps = |name: &String| {
        f.nodes
            .iter()
            .find(|n| &n.name == name)
            .is_some_and(|n| n.label("nvidia.com/gpu.sharing-strategy") == Some("mps"))
    };
    if !nodes.iter().all(mps) {
        return None;
    }
    let rv =
        f.e.requests
            .iter()
            .find(|rv| rv.units > 1 && rv.resource.starts_with(NVIDIA_PREFIX))?;
    let replicas = f
        .nodes
        .iter()
        .find(|n| n.name == nodes[0])
        .and_then(|n| n.label("nvidia.com/gpu.replicas"))
        .map(|r| format!(", {r} replicas per GPU"))
        .unwrap_or_default();
    Some((
        format!(
            "{cause}, but it will not run there: {} share{} its GPUs with MPS{replicas}, each {} unit is a replica, and the device plugin refuses a request of more than 1 at kubelet admission (failRequestsGreaterThanOne, always on for MPS): the pod asks {}, so it will be bound and then Failed, and a Failed pod is never retried",
            nodes.join(", "),
            if nodes.len() == 1 { "s" } else { "" },
            rv.resource,
            rv.units
        ),
        format!(
            "request {}: 1 (one replica){} before it is scheduled — replicas are not fractions, 2 give no more GPU than 1 — or set sharing.mps.failRequestsGreaterThanOne: false in the device plugin config knowingly (k8s-device-plugin #1762 and later)",
            rv.resource,
            in_field(rv)
        ),
    ))
}

/// The cordon part of `excluded`: no node passes every filter, and a cordoned node would
/// (only its cordon stops it): uncordoning it is the fix.
fn cordoned(f: &Facts<'_>) -> Option<Diagnosis> {
    use crate::analysis::fit::Failure;
    if !f.e.schedulable.is_empty() {
        return None;
    }
    let blocked: Vec<&str> =
        f.e.filters
            .iter()
            .filter(|x| {
                !x.all.is_empty() && x.all.iter().all(|c| {
                    matches!(c, Failure::Unschedulable)
                        || matches!(c, Failure::Taint { taint } if taint.key == UNSCHEDULABLE_TAINT)
                })
            })
            .map(|x| x.node.as_str())
            .collect();
    if blocked.is_empty() {
        return None;
    }
    let free_on = |n: &str| -> String {
        f.e.requests
            .iter()
            .filter_map(|rv| {
                let a = rv.advertisers.iter().find(|a| a.node == n)?;
                Some(format!(
                    "{} {}",
                    a.free
                        .map_or(format!("{} allocatable", a.allocatable), |x| format!(
                            "{x} free"
                        )),
                    rv.resource
                ))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let others: Vec<String> =
        f.e.requests
            .iter()
            .flat_map(|rv| {
                rv.advertisers
                    .iter()
                    .filter(|a| a.allowed)
                    .map(move |a| (rv, a))
            })
            .map(|(rv, a)| {
                format!(
                    "{} has {} {}",
                    a.node,
                    a.free
                        .map_or(format!("{} allocatable", a.allocatable), |x| format!(
                            "{x} free"
                        )),
                    rv.resource
                )
            })
            .collect();
    Some(Diagnosis::new(
        CauseCode::Excluded,
        format!(
            "{} would take the {} ({}), but {} cordoned (spec.unschedulable: kubectl cordon or a drain), and the scheduler skips cordoned nodes{}",
            blocked.join(", "),
            what(f.pod),
            blocked
                .iter()
                .map(|n| free_on(n))
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
            if blocked.len() == 1 {
                "it is"
            } else {
                "they are"
            },
            if others.is_empty() {
                String::new()
            } else {
                format!("; of the nodes it may use, {}", others.join(", "))
            }
        ),
        format!(
            "finish the maintenance and kubectl uncordon {}{}; tolerating the unschedulable taint is not a fix for an ordinary {}",
            blocked.join(" "),
            if others.is_empty() {
                String::new()
            } else {
                " (or free units on an uncordoned node)".to_string()
            },
            what(f.pod)
        ),
    ))
}

// ---- rules added for the scheduler's full filter set (issue 22) -------------------

/// `invalid-spec`: the API server refuses the manifest (kubernetes/kubernetes
/// `pkg/apis/core/validation/validation.go`, `ValidateResourceRequirements`: an extended
/// resource must have a limit, and requests equal to it when both are set; a request
/// above its limit): there is no pod for the scheduler. The first [`SpecProblem`] is the
/// cause, the others the evidence.
pub(crate) fn invalid_spec(f: &Facts<'_>) -> Option<Diagnosis> {
    if let Some(d) = host_devices_gate_off(f) {
        return Some(d);
    }
    let first = f.pod.spec_problems.first()?;
    // A launcher pod the API server would refuse (`launcher::render_problems`) is rendered
    // only for a VMI virt-controller does not refuse first (`validatePermittedHostDevices`).
    if f.pod.is_vm()
        && f.pod
            .spec_problems
            .iter()
            .all(|p| p.path() == crate::model::launcher::RENDER_PROBLEM_PATH)
        && not_permitted(f).is_some()
    {
        return None;
    }
    Some(
        Diagnosis::new(
            CauseCode::InvalidSpec,
            format!(
                "the API server refuses this {} as written, so there is nothing to schedule (nodes are not the cause): {first}",
                what(f.pod)
            ),
            spec_problem_fix(first, what(f.pod)),
        )
        .with_evidence(f.pod.spec_problems.iter().skip(1).map(ToString::to_string)),
    )
}

/// The fix for `problem` in a pod (or VMI, VM: `what`) the API server refuses.
fn spec_problem_fix(problem: &SpecProblem, what: &str) -> String {
    match problem {
        SpecProblem::RequestWithoutLimit {
            path,
            resource: r,
            requested,
        } => format!(
            "set {r}: {requested} under {path}.resources.limits (requests may then be left out: they default to the limit), then create the {what} again"
        ),
        SpecProblem::RequestDiffersFromLimit {
            path, resource: r, ..
        } => format!(
            "make {path}.resources.requests {r} equal to its limit, or leave {r} out of requests (it defaults to the limit)"
        ),
        SpecProblem::RequestAboveLimit {
            path, resource: r, ..
        } => {
            format!("lower {path}.resources.requests {r} to at most its limit, or raise the limit")
        }
    }
}

/// `invalid-spec` for a VMI or VM not yet created whose spec has `hostDevices[]` while the
/// KubeVirt CR leaves the `HostDevices` feature gate off: virt-api's admission webhook
/// denies it ("spec.HostDevices: Host Devices feature gate is not enabled in
/// kubevirt-config", kubevirt/kubevirt
/// `pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go`
/// `validateHostDevicesWithPassthroughEnabled`, v1.7.0; observed on the local control
/// plane). `gpus[]` needs no gate. An object that exists was admitted: not this cause.
fn host_devices_gate_off(f: &Facts<'_>) -> Option<Diagnosis> {
    use crate::model::pod::ObjectKind;
    let kv = f.kubevirt?;
    if kv.host_devices_gate != Some(false)
        || f.pod.kind == ObjectKind::Pod
        || f.pod.phase.as_deref().is_some_and(|p| !p.is_empty())
    {
        return None;
    }
    let field =
        f.e.requests
            .iter()
            .map(|rv| rv.field.as_str())
            .find(|field| field.contains(".hostDevices["))?;
    Some(Diagnosis::new(
        CauseCode::InvalidSpec,
        format!(
            "virt-api refuses this {} as written, so there is nothing to schedule (nodes are not the cause): {field} is a host device and KubeVirt {} does not enable the HostDevices feature gate (\"Host Devices feature gate is not enabled in kubevirt-config\")",
            what(f.pod),
            kv.object
        ),
        format!(
            "add HostDevices to spec.configuration.developerConfiguration.featureGates of KubeVirt {}, or ask for the GPU under spec.domain.devices.gpus (no gate)",
            kv.object
        ),
    ))
}

/// Reasons the kubelet gives a pod it refuses at admission (kubernetes/kubernetes
/// `pkg/kubelet/lifecycle/predicate.go`; device-manager and topology-manager errors).
fn admission_reason(reason: &str) -> bool {
    reason.starts_with("OutOf")
        || matches!(
            reason,
            "UnexpectedAdmissionError"
                | "NodeAffinity"
                | "NodeName"
                | "Taint"
                | "PodOSNotSupported"
                | "PodOSSelectorNodeLabelDoesNotMatch"
                | "InvalidNodeInfo"
                | "UnexpectedError"
                | "TopologyAffinityError"
                | "SMTAlignmentError"
                | "InitContainerRestartPolicyForbidden"
        )
}

/// `admission-rejected`: the scheduler bound the pod, then the kubelet refused it (phase
/// `Failed` with an admission reason). With a shared GPU (MPS, or time-slicing with
/// `failRequestsGreaterThanOne`) the device plugin refuses more than one replica
/// (NVIDIA/k8s-device-plugin `internal/rm/allocate.go`; #929, #1762).
pub(crate) fn admission_rejected(f: &Facts<'_>) -> Option<Diagnosis> {
    let node = f.pod.node_name.as_ref()?;
    if f.pod.phase.as_deref() != Some("Failed") {
        return None;
    }
    let reason = f.pod.status_reason.as_deref()?;
    if !admission_reason(reason) {
        return None;
    }
    let msg = f.pod.status_message.as_deref().unwrap_or("");
    let n = f.nodes.iter().find(|n| &n.name == node);
    let strategy = n.and_then(|n| n.label("nvidia.com/gpu.sharing-strategy"));
    let replicas = n.and_then(|n| n.label("nvidia.com/gpu.replicas"));
    let shared = msg.contains("maximum request size for shared resources")
        || strategy.is_some_and(|s| s != "none");
    let big = f.e.requests.iter().find(|rv| rv.units > 1);
    let mut cause = format!(
        "the {} was bound to {node}, then the kubelet refused it at admission ({reason}: \"{}\"); it is Failed, and a Failed pod is never retried",
        what(f.pod),
        {
            let one = document::one_line(msg);
            if one.chars().count() > 240 {
                format!("{}…", one.chars().take(240).collect::<String>())
            } else {
                one
            }
        }
    );
    let fix = match (shared, big) {
        (true, Some(rv)) => {
            let strat = strategy.unwrap_or("shared");
            cause.push_str(&format!(
                ". {node} shares its GPUs ({strat}{}): each {} unit is a replica of a GPU, and a pod may ask for at most 1 (failRequestsGreaterThanOne, always on for MPS); the pod asks {} — replicas are not fractions, 2 replicas give no more GPU than 1",
                replicas.map(|r| format!(", {r} replicas per GPU")).unwrap_or_default(),
                rv.resource,
                rv.units
            ));
            format!(
                "request {}: 1 (one replica){}, or set sharing.{}.failRequestsGreaterThanOne: false in the device plugin config knowingly (k8s-device-plugin #1762 and later); then delete and re-create the pod",
                rv.resource,
                in_field(rv),
                if strat == "mps" { "mps" } else { "timeSlicing" }
            )
        }
        _ => format!(
            "delete and re-create the pod once the kubelet's reason is dealt with (it names the refused request or rule on {node})"
        ),
    };
    Some(Diagnosis::new(CauseCode::AdmissionRejected, cause, fix))
}

/// What the GPU Operator's state on `node` says about advertising a name of class
/// `class` (`mig`: a MIG name): the cause, and the fix. `None` when nothing does. Reads
/// only `node`'s labels (its allocatable, when known, for the text), the ClusterPolicy
/// `policy` and, for a cluster-wide change, every node in `nodes`; the admission guard
/// asks it too ([`crate::analysis::admission::review`]), so both give one verdict.
pub(crate) fn operator_blocker(
    policy: Option<&ClusterPolicy>,
    nodes: &[NodeInfo],
    node: &NodeInfo,
    resource: &str,
    class: ResourceClass,
) -> Option<(String, String)> {
    if let Some(b) = mig_config_blocker(node, resource) {
        return Some(b);
    }
    if let Some(b) = vgpu_config_blocker(node, class) {
        return Some(b);
    }
    let want = class.workload()?;
    let label = node
        .label(LABEL_KEY)
        .and_then(|l| l.parse::<WorkloadConfig>().ok());
    if label == Some(want)
        && let Some(b) = workload_label_ignored(policy, nodes, node, want)
    {
        return Some(b);
    }
    let is_gpu_node = node.label("nvidia.com/gpu.present") == Some("true") || label.is_some();
    if !is_gpu_node {
        return None;
    }
    operands_off_blocker(policy, node).or_else(|| plugin_off_blocker(policy, node, resource, want))
}

/// A MIG name (`resource`) while `node`'s MIG manager has not applied the requested
/// layout: its state label says `failed`, `pending` or `rebooting`.
fn mig_config_blocker(node: &NodeInfo, resource: &str) -> Option<(String, String)> {
    use crate::model::operator::{MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL};
    let n = &node.name;
    let mig = resource
        .strip_prefix(NVIDIA_PREFIX)
        .is_some_and(|s| s.starts_with("mig-"));
    if !mig {
        return None;
    }
    let state = node.label(MIG_CONFIG_STATE_LABEL)?;
    let config = node.label(MIG_CONFIG_LABEL).unwrap_or("?");
    match state {
        "failed" => Some((
            format!(
                "{n} asks for MIG config {config} ({MIG_CONFIG_LABEL}) but {MIG_CONFIG_STATE_LABEL}=failed: the MIG layout was never applied, the GPUs are still whole{}",
                advertised_gpus(node)
                    .into_iter()
                    .map(|(r, a)| format!(" ({r}={a})"))
                    .next()
                    .unwrap_or_default()
            ),
            format!(
                "read the nvidia-mig-manager pod's log on {n}; a MIG mode change usually needs a GPU reset or a reboot (reboot {n}, or enable the mig-manager's reboot option) until {MIG_CONFIG_STATE_LABEL}=success — then {resource} is advertised"
            ),
        )),
        s @ ("pending" | "rebooting") => Some((
            format!(
                "{n} is applying MIG config {config}: {MIG_CONFIG_STATE_LABEL}={s}, so no MIG device is advertised yet"
            ),
            format!(
                "wait for {MIG_CONFIG_STATE_LABEL}=success on {n} (the nvidia-mig-manager log shows progress; a reboot may be pending)"
            ),
        )),
        _ => None,
    }
}

/// A vGPU type (`class`) while `node`'s vGPU device manager has not created its devices:
/// its state label says `failed` or `pending`.
fn vgpu_config_blocker(node: &NodeInfo, class: ResourceClass) -> Option<(String, String)> {
    use crate::model::operator::{VGPU_CONFIG_LABEL, VGPU_CONFIG_STATE_LABEL};
    let n = &node.name;
    if class != ResourceClass::VgpuType {
        return None;
    }
    let state @ ("failed" | "pending") = node.label(VGPU_CONFIG_STATE_LABEL)? else {
        return None;
    };
    let config = node.label(VGPU_CONFIG_LABEL).unwrap_or("?");
    Some((
        format!(
            "{n} asks for vGPU config {config} ({VGPU_CONFIG_LABEL}) but {VGPU_CONFIG_STATE_LABEL}={state}: its vGPU devices are not created, so no vGPU type is advertised"
        ),
        if state == "failed" {
            format!(
                "read the nvidia-vgpu-device-manager pod's log on {n} and check that config {config} exists for its GPU, until {VGPU_CONFIG_STATE_LABEL}=success"
            )
        } else {
            format!("wait for {VGPU_CONFIG_STATE_LABEL}=success on {n}")
        },
    ))
}

/// `node` is labelled for workload `want`, but the operator applies another one (sandbox
/// workloads off in the ClusterPolicy, or deploy labels of another set): the fix turns
/// sandbox workloads on and says what that changes. `None` when the label is applied.
fn workload_label_ignored(
    policy: Option<&ClusterPolicy>,
    nodes: &[NodeInfo],
    node: &NodeInfo,
    want: WorkloadConfig,
) -> Option<(String, String)> {
    use crate::model::operator::{DEPLOY_OPERANDS_LABEL, effective_workload};
    let n = &node.name;
    let eff = effective_workload(node, policy);
    if eff.workload == want {
        return None;
    }
    let why = match policy {
        Some(p) if !p.sandbox_enabled => format!(
            "ClusterPolicy {} has {ENABLE_FLAG}=false, so the operator ignores the label and runs {} operands",
            p.name, eff.workload
        ),
        _ => format!(
            "its gpu.deploy.* labels are the {} set: the operator does not follow the label (sandbox workloads off in the ClusterPolicy?)",
            eff.workload
        ),
    };
    let operands_off = if node.label(DEPLOY_OPERANDS_LABEL) == Some("false") {
        format!(
            ", and remove {DEPLOY_OPERANDS_LABEL}=false from {n} (kubectl label node {n} {DEPLOY_OPERANDS_LABEL}-): it keeps every operand off"
        )
    } else {
        String::new()
    };
    let what = sandbox_enable_effects(policy, nodes, node, eff.workload);
    Some((
        format!("{n} is labelled {LABEL_KEY}={want}, but {why}"),
        format!(
            "set {ENABLE_FLAG}=true in the ClusterPolicy (kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge -p '{{\"spec\":{{\"sandboxWorkloads\":{{\"enabled\":true}}}}}}') so that the label takes effect{operands_off}{what}"
        ),
    ))
}

/// `; it changes what nodes advertise: …` for turning sandbox workloads on: `node` stops
/// advertising what its `applied` operands advertise, and (when `policy` has sandbox
/// workloads off) every other node that changes, the first five named. Empty when nothing
/// changes.
fn sandbox_enable_effects(
    policy: Option<&ClusterPolicy>,
    nodes: &[NodeInfo],
    node: &NodeInfo,
    applied: WorkloadConfig,
) -> String {
    let n = &node.name;
    let changes = match policy {
        Some(p) if !p.sandbox_enabled => operator::enable_sandbox_changes(nodes, p)
            .into_iter()
            .filter(|c| c.node != *n)
            .map(|c| c.describe())
            .collect::<Vec<_>>(),
        _ => Vec::new(),
    };
    let advertised: Vec<String> = advertised_gpus(node)
        .into_iter()
        .map(|(r, a)| format!("{r}={a}"))
        .collect();
    let mut what = Vec::new();
    if !advertised.is_empty() {
        what.push(format!(
            "{n} stops advertising {} (its {applied} operands go)",
            advertised.join(", "),
        ));
    }
    if !changes.is_empty() {
        const SHOWN: usize = 5;
        let more = changes.len().saturating_sub(SHOWN);
        what.push(format!(
            "the change is cluster-wide: {}{}",
            changes[..changes.len().min(SHOWN)].join("; "),
            if more > 0 {
                format!("; and {more} more node(s)")
            } else {
                String::new()
            }
        ));
    }
    if what.is_empty() {
        String::new()
    } else {
        format!("; it changes what nodes advertise: {}", what.join("; "))
    }
}

/// A GPU node with `nvidia.com/gpu.deploy.operands=false`: the operator deploys nothing
/// there.
fn operands_off_blocker(
    policy: Option<&ClusterPolicy>,
    node: &NodeInfo,
) -> Option<(String, String)> {
    use crate::model::operator::{DEPLOY_OPERANDS_LABEL, effective_workload};
    let n = &node.name;
    if node.label(DEPLOY_OPERANDS_LABEL) != Some("false") {
        return None;
    }
    Some((
        format!(
            "{n} has {DEPLOY_OPERANDS_LABEL}=false: the GPU Operator deploys no operand there, so nothing advertises its GPUs"
        ),
        format!(
            "remove the label: kubectl label node {n} {DEPLOY_OPERANDS_LABEL}-{}",
            operator::stack_warning(node, policy, &effective_workload(node, policy))
                .map(|w| format!(" — but {w}"))
                .unwrap_or_default()
        ),
    ))
}

/// A GPU node whose device plugin is off (`nvidia.com/gpu.deploy.device-plugin=false`)
/// because NVIDIA's DRA driver serves its GPUs (it publishes devices there): a pod asking
/// a container GPU name is served from DRA only through the scheduler's
/// `DRAExtendedResource` feature gate and a DeviceClass whose `extendedResourceName` is
/// that name (kubernetes/enhancements KEP-5004); the fix is a ResourceClaim or that gate —
/// never the device plugin turned back on beside the driver, which would hand the same
/// GPUs out twice (NVIDIA/gpu-operator#1541; NVIDIA/k8s-dra-driver-gpu README: the driver
/// and the device plugin must not serve the same GPUs). `dra_devices`: per node, the
/// devices the DRA driver publishes ([`DraNodes::device_counts`]).
fn dra_served_blocker(
    node: &NodeInfo,
    resource: &str,
    class: ResourceClass,
    dra_devices: &std::collections::BTreeMap<String, usize>,
) -> Option<(String, String)> {
    let devices = *dra_devices.get(&node.name)?;
    if devices == 0
        || class.workload() != Some(WorkloadConfig::Container)
        || node.label("nvidia.com/gpu.deploy.device-plugin") != Some("false")
    {
        return None;
    }
    let n = &node.name;
    Some((
        format!(
            "{n}'s GPUs are served by NVIDIA's DRA driver ({} publishes {devices} device(s) there) \
             and its device plugin is off (nvidia.com/gpu.deploy.device-plugin=false), so nothing \
             advertises {resource}; the scheduler serves an extended resource from DRA devices \
             only with its DRAExtendedResource feature gate and a DeviceClass whose \
             extendedResourceName is {resource}",
            NVIDIA_GPU_DRIVER
        ),
        format!(
            "ask for the GPU with a ResourceClaim on the DRA driver's DeviceClass \
             (gpu.nvidia.com) instead of {resource}, or enable the DRAExtendedResource feature \
             gate on kube-apiserver and kube-scheduler with a DeviceClass whose \
             extendedResourceName is {resource}; do not turn the device plugin back on beside \
             the DRA driver: both would hand out the same GPUs (NVIDIA/gpu-operator#1541)"
        ),
    ))
}

/// A GPU node that runs workload `want` but has the label that disables the device plugin
/// for it (`nvidia.com/gpu.deploy.device-plugin` or `.sandbox-device-plugin` `=false`).
fn plugin_off_blocker(
    policy: Option<&ClusterPolicy>,
    node: &NodeInfo,
    resource: &str,
    want: WorkloadConfig,
) -> Option<(String, String)> {
    let n = &node.name;
    if operator::effective_workload(node, policy).workload != want {
        return None;
    }
    let operand = match want {
        WorkloadConfig::Container => "device-plugin",
        _ => "sandbox-device-plugin",
    };
    let key = format!("nvidia.com/gpu.deploy.{operand}");
    if node.label(&key) != Some("false") {
        return None;
    }
    Some((
        format!(
            "{n} runs {want} workloads but has {key}=false: that operand is disabled there, so {resource} is not advertised"
        ),
        format!(
            "kubectl label node {n} {key}=true --overwrite (unless another component, e.g. a DRA driver, is meant to serve its GPUs)"
        ),
    ))
}

/// The device plugin that should advertise a name of `class` on `node` and is not ready
/// there (its operand pod crash-looping, not ready or absent,
/// [`crate::model::operand::plugin_problem`]): the cause and the fix. `None` when the
/// node's applied workload is not the class's, or no operand pod was read for it.
fn plugin_blocker(
    f: &Facts<'_>,
    node: &NodeInfo,
    resource: &str,
    class: ResourceClass,
) -> Option<(String, String)> {
    let want = class.workload()?;
    let eff = operator::effective_workload(node, f.cluster_policy);
    if eff.applied() != Some(want) {
        return None;
    }
    let pods = f.operand_pods?.get(&node.name)?;
    let problem = operand::plugin_problem(pods, want)?;
    let plugin = operand::plugin_of(want);
    let pod = pods
        .iter()
        .find(|p| p.operand == plugin)
        .map(|p| p.pod.clone());
    let n = &node.name;
    // No plugin pod there, and a taint its pods do not tolerate: that is the block.
    if pod.is_none()
        && let Some(b) = unused::plugin_toleration_block(
            std::slice::from_ref(node),
            f.pods,
            f.operand_pods,
            want,
        )
    {
        return Some((b.cause(), b.fix()));
    }
    Some((
        format!(
            "the {plugin} that should advertise {resource} on {n} ({want}) is not ready: {problem}"
        ),
        match pod {
            Some(p) => {
                let (ns, name) = p.split_once('/').unwrap_or(("", &p));
                format!(
                    "read why it fails: kubectl -n {ns} describe pod {name}; kubectl -n {ns} logs {name} --previous — {resource} is advertised again once it is ready"
                )
            }
            None => format!(
                "find out why the GPU Operator runs no {plugin} pod on {n}: kubectl get daemonsets -A | grep {plugin}, and its ClusterPolicy state"
            ),
        },
    ))
}

/// `operator-state`: a requested name no node advertises, and the GPU Operator's own
/// state on a GPU node says why — first a device plugin that should advertise it and is
/// not ready (operand pods read), then a MIG or vGPU config that failed or is pending
/// (`nvidia.com/mig.config.state`, `nvidia.com/vgpu.config.state`), a workload label the
/// operator ignores because sandbox workloads are off, operands or the device plugin
/// disabled by `nvidia.com/gpu.deploy.*=false`.
pub(crate) fn operator_state(f: &Facts<'_>) -> Option<Diagnosis> {
    // Read once for every request: the devices NVIDIA's DRA driver publishes per node.
    let dra_devices = f.dra.map(DraNodes::device_counts).unwrap_or_default();
    for rv in f.e.requests.iter().filter(|rv| rv.advertisers.is_empty()) {
        // A misspelt name is the name's problem, whatever the operator's state.
        if rv.did_you_mean.first().is_some_and(|s| {
            !matches!(s.relation, Relation::MigPartition | Relation::SharingRename)
        }) {
            continue;
        }
        let class = classify(&rv.resource);
        let mut found: Vec<(String, String)> = f
            .nodes
            .iter()
            .filter_map(|n| plugin_blocker(f, n, &rv.resource, class))
            .collect();
        found.extend(f.nodes.iter().filter_map(|n| {
            dra_served_blocker(n, &rv.resource, class, &dra_devices)
                .or_else(|| operator_blocker(f.cluster_policy, f.nodes, n, &rv.resource, class))
        }));
        let Some((cause, fix)) = found.first().cloned() else {
            continue;
        };
        let mut c = format!("no node advertises {}", rv.resource);
        if !rv.stale_nodes.is_empty() {
            c.push_str(&format!(" ({} list it with 0)", rv.stale_nodes.join(", ")));
        }
        c.push_str(&format!(", and the GPU Operator's state says why: {cause}"));
        return Some(
            Diagnosis::new(CauseCode::OperatorState, c, fix)
                .with_evidence(found.into_iter().skip(1).map(|(c, _)| c)),
        );
    }
    None
}

/// `other-resource`: the GPU units are free on an allowed node that advertises them, but
/// the scheduler's NodeResourcesFit finds it short of something else (cpu, memory,
/// ephemeral-storage, hugepages, pod slots).
pub(crate) fn other_resource(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.schedulable.is_empty() || f.e.fitting.is_empty() {
        return None;
    }
    use crate::analysis::fit::{Failure, amount};
    let gpu_nodes: Vec<&NodeFit> =
        f.e.filters
            .iter()
            .filter(|x| f.e.fitting.contains(&x.node))
            .collect();
    let shortfalls: Vec<(&str, &Failure)> = gpu_nodes
        .iter()
        .flat_map(|x| x.capacity().map(move |c| (x.node.as_str(), c)))
        .collect();
    let (_, first) = shortfalls.first()?;
    let per_node: Vec<String> = gpu_nodes
        .iter()
        .map(|x| {
            let what: Vec<String> = x
                .capacity()
                .map(|c| match c {
                    Failure::TooManyPods { allowed, used } => {
                        format!("no pod slot ({used} of {allowed} pods)")
                    }
                    Failure::Insufficient {
                        resource,
                        requested,
                        allocatable,
                        used,
                    } => format!(
                        "{resource}: the {} asks {}, {} allocatable, {} requested by its pods, {} free",
                        what(f.pod),
                        amount(resource, *requested),
                        amount(resource, *allocatable),
                        amount(resource, *used),
                        amount(resource, allocatable.saturating_sub(*used).max(0))
                    ),
                    other => other.reason(),
                })
                .collect();
            format!("{} is short of {}", x.node, what.join("; "))
        })
        .collect();
    let gpus: Vec<String> =
        f.e.requests
            .iter()
            .map(|rv| format!("{} × {}", rv.units, rv.resource))
            .collect();
    let cause = format!(
        "the extended resources fit ({} free on {}), but NodeResourcesFit rejects {} for another resource: {}",
        gpus.join(", "),
        f.e.fitting.join(", "),
        if gpu_nodes.len() == 1 { "it" } else { "them" },
        per_node.join("; ")
    );
    let fix = match first {
        Failure::TooManyPods { allowed, .. } => format!(
            "free a pod slot on {} (finish or move a pod there), or raise the kubelet's maxPods (allocatable pods {allowed})",
            f.e.fitting.join(", ")
        ),
        Failure::Insufficient { resource, .. } => {
            // The largest request that fits one of the GPU nodes now, and without its pods.
            let (best_node, best) = gpu_nodes
                .iter()
                .filter_map(|x| {
                    let a = fit::allocatable(f.nodes.iter().find(|n| n.name == x.node)?);
                    let total = a.get(resource.as_str()).copied().unwrap_or(0);
                    let used = x
                        .all
                        .iter()
                        .find_map(|c| match c {
                            Failure::Insufficient {
                                resource: r, used, ..
                            } if r == resource => Some(*used),
                            _ => None,
                        })
                        .unwrap_or(0);
                    Some((x.node.as_str(), total.saturating_sub(used).max(0)))
                })
                .max_by_key(|(_, v)| *v)?;
            // A launcher pod's cpu and memory are the VMI's plus KubeVirt's overhead
            // (kubevirt/kubevirt `pkg/virt-controller/services/renderresources.go`): the
            // change is the VM's, and the bound is on what the launcher asks.
            let free_there =
                format!("the most {resource} free on a node with the GPUs: {best_node}");
            if f.pod.launcher_vmi().is_some() || f.pod.is_vm() {
                let who = if f.pod.vmi_owned_by_vm == Some(false)
                    || f.pod.kind == ObjectKind::VirtualMachineInstance
                {
                    "VMI"
                } else {
                    "VM"
                };
                format!(
                    "lower the {who}'s {resource} so that its virt-launcher pod asks at most {} ({free_there}; KubeVirt adds its overhead to the {who}'s own {resource}), or free {resource} there, or use nodes with more {resource}",
                    amount(resource, best)
                )
            } else {
                format!(
                    "lower the {resource} request to at most {} ({free_there}), or free {resource} there, or use nodes with more {resource}",
                    amount(resource, best)
                )
            }
        }
        _ => "make room on the nodes with the GPUs".into(),
    };
    Some(Diagnosis::new(CauseCode::OtherResource, cause, fix))
}

/// Whether label `key` is set by the kubelet, a cloud provider, Node Feature Discovery or
/// GPU Feature Discovery — relabelling such a node is no fix (it is reset, or it lies
/// about the node): `kubernetes.io/hostname` and the other `kubernetes.io` / `k8s.io`
/// labels, `feature.node.kubernetes.io/*`, and NVIDIA's discovered labels (all
/// `nvidia.com/` labels but the admin-set workload, MIG and vGPU configs and
/// `gpu.deploy.*`).
pub(crate) fn system_label(key: &str) -> bool {
    let domain = key.split_once('/').map(|(d, _)| d).unwrap_or("");
    let k8s = |d: &str| {
        d == "kubernetes.io"
            || d.ends_with(".kubernetes.io")
            || d == "k8s.io"
            || d.ends_with(".k8s.io")
    };
    if k8s(domain) {
        return true;
    }
    if domain == "nvidia.com" {
        let name = &key["nvidia.com/".len()..];
        return !(key == LABEL_KEY
            || name == "mig.config"
            || name == "vgpu.config"
            || name.starts_with("gpu.deploy."));
    }
    false
}

#[cfg(test)]
mod tests {
    use crate::analysis::diagnosis::CauseCode;
    use crate::analysis::explain::{Explanation, Inputs, explain};
    use crate::analysis::placement::Exclusion;
    use crate::model::dra::DraObjects;
    use crate::model::node::{NodeInfo, Taint};
    use crate::model::pod::{PodInfo, SpecProblem};

    fn fixtures() -> (Vec<NodeInfo>, Vec<PodInfo>, DraObjects) {
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            include_str!("../../../../../tests/data/dra/nodes.json").as_bytes(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let pods = crate::decode::pods::read_pods_str(
            include_str!("../../../../../tests/data/dra/pods.json"),
            "pods.json",
        )
        .unwrap();
        let dra = crate::decode::dra::read_str(
            include_str!("../../../../../tests/data/dra/two-gpus.json"),
            "two-gpus.json",
        )
        .unwrap();
        (nodes, pods, dra)
    }

    fn run(name: &str, dra: &DraObjects) -> Explanation {
        let (nodes, pods, _) = fixtures();
        let pod = pods.iter().find(|p| p.name == name).unwrap();
        explain(
            pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&pods),
                dra: Some(dra),
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn counter_exhausted_names_the_sibling_holder() {
        let (_, _, dra) = fixtures();
        let e = run("vm-vfio-2", &dra);
        assert_eq!(e.cause_code, CauseCode::CounterExhausted);
        assert_eq!(
            e.evidence,
            vec![
                "gpu.nvidia.com/gpu-node-1/gpu-vfio-0 (vfio on gpu-node-1): in use as gpu by gpu-jobs/job-gpu"
                    .to_string()
            ]
        );
        assert!(e.fix.contains("gpu-jobs/job-gpu"), "{}", e.fix);
        let alt = &e.claims[0].requests[0].alternatives[0];
        assert_eq!((alt.matching.len(), alt.free), (2, 0));
    }

    #[test]
    fn devices_in_use_when_the_matching_device_is_allocated() {
        let (_, _, dra) = fixtures();
        let e = run("want-gpu-0", &dra);
        assert_eq!(e.cause_code, CauseCode::DevicesInUse);
        assert_eq!(
            e.evidence,
            vec!["gpu.nvidia.com/gpu-node-1/gpu-0: allocated to gpu-jobs/job-gpu".to_string()]
        );
    }

    #[test]
    fn no_matching_device_for_selectors_nothing_satisfies() {
        let (_, _, dra) = fixtures();
        let e = run("two-a100", &dra);
        assert_eq!(e.cause_code, CauseCode::NoMatchingDevice);
        assert!(
            e.cause
                .contains("no device has gpu.nvidia.com/productName = 'NVIDIA A100'"),
            "{}",
            e.cause
        );
        assert!(e.fix.contains("productName == '"), "{}", e.fix);
        // A missing DeviceClass says so.
        let mut dra2 = dra.clone();
        dra2.device_classes.retain(|c| c.name != "gpu.nvidia.com");
        let e = run("want-gpu-0", &dra2);
        assert_eq!(e.cause_code, CauseCode::NoMatchingDevice);
        assert!(
            e.evidence
                .contains(&"DeviceClass gpu.nvidia.com does not exist".to_string())
        );
    }

    #[test]
    fn no_matching_device_when_constraints_exclude_the_device_nodes() {
        let (nodes, mut pods, dra) = fixtures();
        let pod = pods.iter_mut().find(|p| p.name == "vm-vfio-2").unwrap();
        pod.node_selector
            .insert("kubernetes.io/hostname".into(), "gpu-node-2".into());
        let e = explain(
            pod,
            Inputs {
                nodes: Some(&nodes),
                dra: Some(&dra),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.cause_code, CauseCode::NoMatchingDevice);
        assert!(
            e.cause.contains("all on nodes the pod's nodeSelector"),
            "{}",
            e.cause
        );
    }

    #[test]
    fn claim_not_found_for_missing_claims_and_unmade_templates() {
        let (_, _, dra) = fixtures();
        let e = run("from-template", &dra);
        assert_eq!(e.cause_code, CauseCode::ClaimNotFound);
        assert!(e.cause.contains("template one-gpu"), "{}", e.cause);
        let mut dra2 = dra.clone();
        dra2.resource_claims.retain(|c| c.name != "two-a100");
        let e = run("two-a100", &dra2);
        assert_eq!(e.cause_code, CauseCode::ClaimNotFound);
        assert!(
            e.cause
                .contains("names ResourceClaim gpu-jobs/two-a100, which does not exist"),
            "{}",
            e.cause
        );
    }

    #[test]
    fn claims_without_dra_data_are_not_no_gpu_request() {
        let (nodes, pods, _) = fixtures();
        let pod = pods.iter().find(|p| p.name == "vm-vfio-2").unwrap();
        let e = explain(
            pod,
            Inputs {
                nodes: Some(&nodes),
                ..Default::default()
            },
        )
        .unwrap();
        assert_ne!(e.cause_code, CauseCode::NoGpuRequest);
        assert!(
            e.notes.iter().any(|n| n.contains("--dra FILE")),
            "{:?}",
            e.notes
        );
    }

    fn nodes_and_pod(pod: &str) -> (Vec<NodeInfo>, PodInfo) {
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            r#"{"kind":"List","items":[
              {"kind":"Node","metadata":{"name":"gpu-node-1","labels":{"kubernetes.io/hostname":"gpu-node-1","nvidia.com/gpu.workload.config":"container"}},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110","nvidia.com/gpu":"2"}}},
              {"kind":"Node","metadata":{"name":"cpu-node-1","labels":{"kubernetes.io/hostname":"cpu-node-1"}},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"}}}]}"#
                .as_bytes(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let pod = crate::decode::pods::read_pods_str(pod, "pod.json")
            .unwrap()
            .remove(0);
        (nodes, pod)
    }

    fn explain_with(pod: &str) -> Explanation {
        let (nodes, pod) = nodes_and_pod(pod);
        explain(
            &pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&[]),
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn virt_handler_is_the_cause_for_a_launcher_only_where_it_is_not_ready() {
        // gpu-node-1 advertises nvidia.com/gpu, but no virt-handler label or kvm resource.
        let launcher = r#"{"kind":"Pod","metadata":{"name":"virt-launcher-a-x7k2p","namespace":"v"},
            "spec":{"nodeSelector":{"kubevirt.io/schedulable":"true"},"containers":[{"name":"compute",
            "resources":{"limits":{"nvidia.com/gpu":"1","devices.kubevirt.io/kvm":"1"}}}]}}"#;
        let e = explain_with(launcher);
        assert_eq!(e.cause_code, CauseCode::VirtHandler, "{}", e.cause);
        assert!(
            e.fix.contains("virt-handler") && e.fix.contains("gpu-node-1"),
            "{}",
            e.fix
        );
        assert!(!e.fix.contains("deploy the device plugin"), "{}", e.fix);
        assert_eq!(
            e.evidence,
            [
                "gpu-node-1: no label kubevirt.io/schedulable, does not advertise devices.kubevirt.io/kvm"
            ]
        );
        // A pod only named like a launcher, in a dump without KubeVirt: not judged.
        let plain = r#"{"kind":"Pod","metadata":{"name":"virt-launcher-a-x7k2p","namespace":"v"},
            "spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#;
        assert_eq!(explain_with(plain).cause_code, CauseCode::FitsNow);
    }

    #[test]
    fn a_launchers_arch_selector_is_met_at_the_node_not_dropped_from_the_pod() {
        // virt-controller adds kubernetes.io/arch to every launcher pod; a node object made
        // by hand may lack the kubelet's label.
        let (mut nodes, pod) = nodes_and_pod(
            r#"{"kind":"Pod","metadata":{"name":"virt-launcher-a-x7k2p","namespace":"v"},
            "spec":{"nodeSelector":{"kubevirt.io/schedulable":"true","kubernetes.io/arch":"amd64"},
            "containers":[{"name":"compute","resources":{"limits":{"nvidia.com/gpu":"1","devices.kubevirt.io/kvm":"1"}}}]}}"#,
        );
        let n = &mut nodes[0];
        n.labels
            .insert("kubevirt.io/schedulable".into(), "true".into());
        n.allocatable
            .get_or_insert_with(Default::default)
            .insert("devices.kubevirt.io/kvm".into(), "1k".into());
        let e = explain(
            &pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&[]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.cause_code, CauseCode::Excluded, "{}", e.cause);
        assert!(!e.fix.contains("remove"), "{}", e.fix);
        assert!(
            e.fix.contains("the node's kubelet")
                && e.fix
                    .contains("kubectl label node gpu-node-1 kubernetes.io/arch=amd64"),
            "{}",
            e.fix
        );
        assert!(
            e.remedy
                .as_ref()
                .is_none_or(|r| r.actions.iter().all(|a| !matches!(
                    a.action,
                    crate::analysis::explain::remedy::Action::NodeSelector { .. }
                ))),
            "{:?}",
            e.remedy
        );
        // A plain pod asking the same label may drop it.
        let (_, plain) = nodes_and_pod(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"v"},
            "spec":{"nodeSelector":{"kubernetes.io/arch":"amd64"},
            "containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        );
        let e = explain(
            &plain,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&[]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.cause_code, CauseCode::Excluded, "{}", e.cause);
        assert!(e.fix.contains("remove"), "{}", e.fix);
    }

    #[test]
    fn a_launchers_memory_fix_is_the_vms_with_kubevirts_overhead_said() {
        let (mut nodes, pod) = nodes_and_pod(
            r#"{"kind":"Pod","metadata":{"name":"virt-launcher-a-x7k2p","namespace":"v"},
            "spec":{"nodeSelector":{"kubevirt.io/schedulable":"true"},
            "containers":[{"name":"compute","resources":{"requests":{"memory":"40Gi"},
            "limits":{"nvidia.com/gpu":"1","devices.kubevirt.io/kvm":"1"}}}]}}"#,
        );
        let n = &mut nodes[0];
        n.labels
            .insert("kubevirt.io/schedulable".into(), "true".into());
        n.allocatable
            .get_or_insert_with(Default::default)
            .insert("devices.kubevirt.io/kvm".into(), "1k".into());
        let mut pod = pod;
        let run = |pod: &PodInfo| {
            explain(
                pod,
                Inputs {
                    nodes: Some(&nodes),
                    pods: Some(&[]),
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let e = run(&pod);
        assert_eq!(e.cause_code, CauseCode::OtherResource, "{}", e.cause);
        assert!(
            e.fix.starts_with(
                "lower the VM's memory so that its virt-launcher pod asks at most 32Gi (the most memory free on a node with the GPUs: gpu-node-1; KubeVirt adds its overhead to the VM's own memory)"
            ),
            "{}",
            e.fix
        );
        pod.vmi_owned_by_vm = Some(false);
        let e = run(&pod);
        assert!(e.fix.starts_with("lower the VMI's memory"), "{}", e.fix);
    }

    #[test]
    fn condition_taints_are_never_tolerated_and_launchers_never_deleted() {
        let (mut nodes, pod) = nodes_and_pod(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"v"},
            "spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        );
        nodes[0].taints.push(crate::model::node::Taint {
            key: "node.kubernetes.io/memory-pressure".into(),
            value: None,
            effect: "NoSchedule".into(),
        });
        let e = explain(
            &pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&[]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.cause_code, CauseCode::Excluded, "{}", e.cause);
        assert!(!e.fix.contains("toleration"), "{}", e.fix);
        assert!(
            e.fix.contains("never tolerate node.kubernetes.io/*"),
            "{}",
            e.fix
        );

        let fix = super::stop_what(&["a/train-0", "vms/virt-launcher-vm-b-q9w8e"], &[]);
        assert_eq!(
            fix,
            "delete or finish a pod holding one (a/train-0), or stop a VM that can wait, a lower-priority one: virtctl stop vm-b -n vms — never delete its virt-launcher pod (that kills the running VM, and runStrategy: Always starts it again); where no VirtualMachine owns the VMI, delete the VMI instead: kubectl delete vmi vm-b -n vms"
        );
        // Issue 54, item 7: the alternative is said once for many VMs, its commands listed.
        let fix = super::stop_what(
            &[
                "vms/virt-launcher-desk-1-aaaaa",
                "vms/virt-launcher-desk-2-bbbbb",
                "vms/virt-launcher-desk-3-ccccc",
            ],
            &[],
        );
        assert_eq!(fix.matches("no VirtualMachine owns").count(), 1, "{fix}");
        assert!(fix.starts_with("stop a VM that can wait, a lower-priority one: virtctl stop desk-1 -n vms, virtctl stop desk-2 -n vms, virtctl stop desk-3 -n vms — "), "{fix}");
        assert!(fix.ends_with("; where no VirtualMachine owns the VMI, delete the VMI instead: kubectl delete vmi desk-1 -n vms, kubectl delete vmi desk-2 -n vms, kubectl delete vmi desk-3 -n vms"), "{fix}");
        assert!(!fix.contains("virt-launcher-vm-b"), "{fix}");
        // Issue 42: virtctl stop needs a VM; a bare VMI is deleted instead.
        let launcher = |name: &str, owned| PodInfo {
            namespace: "vms".into(),
            name: name.into(),
            vmi_owned_by_vm: owned,
            ..Default::default()
        };
        let pods = [
            launcher("virt-launcher-vm-a-x1y2z", Some(false)),
            launcher("virt-launcher-vm-b-q9w8e", Some(true)),
        ];
        let fix = super::stop_what(&["vms/virt-launcher-vm-a-x1y2z"], &pods);
        assert!(fix.contains(": kubectl delete vmi vm-a -n vms (no VirtualMachine owns it, and virtctl stop needs one)"), "{fix}");
        assert!(!fix.contains("virtctl stop vm-a"), "{fix}");
        let fix = super::stop_what(&["vms/virt-launcher-vm-b-q9w8e"], &pods);
        assert!(fix.contains(": virtctl stop vm-b -n vms —"), "{fix}");
        assert!(!fix.contains("kubectl delete vmi"), "{fix}");
    }

    #[test]
    fn near_misses_are_fixed_in_the_pod_never_by_relabelling_the_hostname() {
        let e = explain_with(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":{"kubernetes.io/hostname":"gpu-node-2"},
               "containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        );
        assert_eq!(e.cause_code, CauseCode::Excluded);
        assert!(!e.fix.contains("kubectl label"), "{}", e.fix);
        assert!(
            e.fix.contains("change the pod's nodeSelector kubernetes.io/hostname=gpu-node-2 to kubernetes.io/hostname=gpu-node-1"),
            "{}",
            e.fix
        );
        // An invalid workload value in the pod is the pod's to fix.
        let e = explain_with(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":{"nvidia.com/gpu.workload.config":"Container"},
               "containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        );
        assert_eq!(e.cause_code, CauseCode::Excluded);
        assert!(!e.fix.contains("kubectl label"), "{}", e.fix);
        assert!(e.fix.contains("=container"), "{}", e.fix);
        // Pinned by name to a node that exists: not a typo.
        let e = explain_with(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":{"kubernetes.io/hostname":"cpu-node-1"},
               "containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        );
        assert!(!e.cause.contains("near miss"), "{}", e.cause);
    }

    #[test]
    fn every_blocking_cause_is_listed_primary_first() {
        // The GPU node is short of memory; the CPU node lacks the GPU.
        let e = explain_with(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
               "containers":[{"name":"c","resources":{"requests":{"memory":"40Gi"},"limits":{"nvidia.com/gpu":"1"}}}]}}"#,
        );
        assert_eq!(e.cause_code, CauseCode::OtherResource);
        assert_eq!(e.cause_codes, vec![CauseCode::OtherResource]);
        assert!(e.fix.contains("at most 32Gi"), "{}", e.fix);
        assert_eq!(
            e.predicted_message.as_deref(),
            Some("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 2 Insufficient memory.")
        );
        // Three units on a two-unit node, and too much cpu: too-large, then other-resource.
        let e = explain_with(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{
               "containers":[{"name":"c","resources":{"requests":{"cpu":"9"},"limits":{"nvidia.com/gpu":"3"}}}]}}"#,
        );
        assert_eq!(e.cause_code, CauseCode::TooLarge);
        assert_eq!(
            e.cause_codes,
            vec![CauseCode::TooLarge, CauseCode::OtherResource]
        );
    }

    #[test]
    fn operator_state_names_sandbox_workloads_off_and_disabled_operands() {
        let mut nodes = Vec::new();
        crate::decode::dump::read_from(
            r#"{"kind":"List","items":[
              {"kind":"Node","metadata":{"name":"gpu-a10-1","labels":{"nvidia.com/gpu.present":"true","nvidia.com/gpu.workload.config":"vm-passthrough"}},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110","nvidia.com/gpu":"1"}}},
              {"kind":"Node","metadata":{"name":"gpu-a10-2","labels":{"nvidia.com/gpu.present":"true","nvidia.com/gpu.workload.config":"container","nvidia.com/gpu.deploy.device-plugin":"false"}},
               "status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"}}}]}"#
                .as_bytes(),
            "nodes.json",
            |n| nodes.push(n),
        )
        .unwrap();
        let policy = crate::model::operator::ClusterPolicy {
            name: "cluster-policy".into(),
            sandbox_enabled: false,
            default_workload: crate::model::workload::WorkloadConfig::Container,
            default_workload_raw: None,
            mode: None,
            vgpu_manager_enabled: None,
            vgpu_default_config: None,
            mig_default_config: None,
            state: None,
            components: Default::default(),
        };
        let run = |pod: &str| {
            let pod = crate::decode::pods::read_pods_str(pod, "pod.json")
                .unwrap()
                .remove(0);
            explain(
                &pod,
                Inputs {
                    nodes: Some(&nodes),
                    pods: Some(&[]),
                    cluster_policy: Some(&policy),
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let e = run(
            r#"{"kind":"VirtualMachineInstance","metadata":{"name":"v"},"spec":{"domain":{"devices":{"gpus":[{"name":"g","deviceName":"nvidia.com/GA102GL_A10"}]}}}}"#,
        );
        assert_eq!(e.cause_code, CauseCode::OperatorState, "{}", e.cause);
        assert!(
            e.cause.contains("sandboxWorkloads.enabled=false"),
            "{}",
            e.cause
        );
        assert!(e.fix.contains("\"enabled\":true"), "{}", e.fix);
        // A container pod: the container node's device plugin is disabled... but the
        // vm-labelled node runs container operands and advertises nvidia.com/gpu, so the
        // pod fits there.
        let e = run(
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}}"#,
        );
        assert_eq!(e.cause_code, CauseCode::TooLarge, "{}", e.cause);
    }

    #[test]
    fn each_spec_problem_has_its_fix() {
        let path = "spec.containers[1]".to_string();
        let without = SpecProblem::RequestWithoutLimit {
            path: path.clone(),
            resource: "nvidia.com/gpu".into(),
            requested: "2".into(),
        };
        assert_eq!(
            super::spec_problem_fix(&without, "VMI"),
            "set nvidia.com/gpu: 2 under spec.containers[1].resources.limits (requests may then be left out: they default to the limit), then create the VMI again"
        );
        let differs = SpecProblem::RequestDiffersFromLimit {
            path: path.clone(),
            resource: "nvidia.com/gpu".into(),
            requested: "2".into(),
            limit: "1".into(),
            counted: 2,
        };
        assert_eq!(
            super::spec_problem_fix(&differs, "pod"),
            "make spec.containers[1].resources.requests nvidia.com/gpu equal to its limit, or leave nvidia.com/gpu out of requests (it defaults to the limit)"
        );
        let above = SpecProblem::RequestAboveLimit {
            path,
            resource: "cpu".into(),
            requested: "2".into(),
            limit: "1".into(),
        };
        assert_eq!(
            super::spec_problem_fix(&above, "pod"),
            "lower spec.containers[1].resources.requests cpu to at most its limit, or raise the limit"
        );
    }

    #[test]
    fn exclusion_fixes_name_the_nodes_and_the_constraint() {
        let mut a = NodeInfo::named("gpu-a");
        a.unschedulable = true;
        let b = NodeInfo::named("gpu-b");
        let nodes = [&a, &b];
        let (_, plain) = nodes_and_pod(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"v"},"spec":{"containers":[]}}"#,
        );
        let fix = |e: Option<&Exclusion>| super::exclusion_fix(&plain, e, "nvidia.com/gpu", &nodes);
        assert_eq!(
            fix(Some(&Exclusion::Unschedulable)),
            "finish the maintenance and uncordon: kubectl uncordon gpu-a"
        );
        let selector = |have: Option<&str>| Exclusion::NodeSelector {
            key: "pool".into(),
            want: "a".into(),
            have: have.map(str::to_string),
        };
        assert_eq!(
            fix(Some(&selector(Some("b")))),
            "change the nodeSelector pool=a to pool=b (the value on gpu-a, gpu-b) or remove it"
        );
        assert_eq!(
            fix(Some(&selector(None))),
            "remove the nodeSelector pool=a: no node advertising nvidia.com/gpu has that label"
        );
        assert_eq!(
            fix(Some(&Exclusion::Affinity)),
            "widen the required node affinity so that it matches gpu-a, gpu-b"
        );
        let taint = |key: &str, value: Option<&str>| Exclusion::Taint {
            taint: Taint {
                key: key.into(),
                value: value.map(str::to_string),
                effect: "NoSchedule".into(),
            },
        };
        assert_eq!(
            fix(Some(&taint("node.kubernetes.io/disk-pressure", None))),
            "make gpu-a, gpu-b healthy: node.kubernetes.io/disk-pressure is set by Kubernetes for a node condition and goes away when it clears; never tolerate node.kubernetes.io/* taints"
        );
        assert_eq!(
            fix(Some(&taint("nvidia.com/gpu", Some("present")))),
            "add the toleration {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}"
        );
        assert_eq!(
            fix(Some(&taint("dedicated", None))),
            "add the toleration {key: dedicated, operator: Exists, effect: NoSchedule}"
        );
        assert_eq!(fix(None), "check the nodes' labels and taints");
    }

    #[test]
    fn an_unmatched_selector_names_the_near_misses() {
        let labelled = |name: &str, value: &str| {
            let mut n = NodeInfo::named(name);
            n.labels.insert("pool".into(), value.into());
            n
        };
        let nodes = [
            labelled("n1", "vm-passthrough"),
            labelled("n2", "container"),
        ];
        let note = |want: &str| super::unmatched_selector_note(&nodes, "pool", want);
        assert_eq!(note("container"), "");
        assert_eq!(
            note("vm_passthrough"),
            " (no node has it; n1 carries pool=vm-passthrough, a near miss)"
        );
        assert_eq!(note("vm-vgpu"), " (no node has it)");
    }

    #[test]
    fn mig_and_vgpu_states_block_until_applied() {
        use crate::model::operator::{MIG_CONFIG_STATE_LABEL, VGPU_CONFIG_STATE_LABEL};
        use crate::model::resource::ResourceClass;
        let with = |key: &str, value: &str| {
            let mut n = NodeInfo::named("n1");
            n.labels.insert(key.into(), value.into());
            n
        };
        let pending = with(MIG_CONFIG_STATE_LABEL, "pending");
        let (cause, _) = super::mig_config_blocker(&pending, "nvidia.com/mig-1g.10gb").unwrap();
        assert_eq!(
            cause,
            "n1 is applying MIG config ?: nvidia.com/mig.config.state=pending, so no MIG device is advertised yet"
        );
        // Not a MIG name, or a state that blocks nothing.
        assert_eq!(super::mig_config_blocker(&pending, "nvidia.com/gpu"), None);
        let done = with(MIG_CONFIG_STATE_LABEL, "success");
        assert_eq!(
            super::mig_config_blocker(&done, "nvidia.com/mig-1g.10gb"),
            None
        );
        let failed = with(VGPU_CONFIG_STATE_LABEL, "failed");
        let (_, fix) = super::vgpu_config_blocker(&failed, ResourceClass::VgpuType).unwrap();
        assert_eq!(
            fix,
            "read the nvidia-vgpu-device-manager pod's log on n1 and check that config ? exists for its GPU, until nvidia.com/vgpu.config.state=success"
        );
        assert_eq!(
            super::vgpu_config_blocker(&failed, ResourceClass::PassthroughModel),
            None
        );
    }
}
