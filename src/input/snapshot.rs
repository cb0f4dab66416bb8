//! One read of what the analyses need from a live cluster into a [`Snapshot`] (the record
//! is [`gpuwl_core::decode::snapshot`], re-exported here).

pub use gpuwl_core::decode::snapshot::*;

use kube::Client;

use crate::error::Result;
use crate::input::{clusterpolicy, dra, kubevirt, kueue, live, pods, virt};

/// Reads a [`Snapshot`]; the KubeVirt/HyperConverged CR when `with_kubevirt`, or when a
/// VM waits without a launcher pod (its verdict needs `permittedHostDevices`). Each
/// virt-launcher pod is marked with whether a VirtualMachine owns its VMI
/// ([`crate::input::virt::mark_launchers`]; unknown when VMIs cannot be listed).
///
/// VMIs and VMs are listed beside the pods, and each one that waits for a GPU with no
/// launcher pod (refused by virt-controller or virt-api, or not rendered yet:
/// [`virt::waiting_without_launcher`]) is added to the pods as the VMI or VM it is, so
/// every analysis of a live read judges it beside the pods.
///
/// DRA objects are listed too; a server without `resource.k8s.io/v1`, or credentials
/// that may not list them, leave them out with the reason in `dra_source`.
///
/// Errors: [`crate::error::Error::Runtime`] when nodes or pods cannot be listed; the
/// ClusterPolicy and the KubeVirt CR never fail the call (an absent CRD, no object or an
/// unreadable one only leaves them out).
pub async fn read(client: &Client, with_kubevirt: bool) -> Result<Snapshot> {
    let (lists, policy, mut kubevirt, dra, (vmis, vms), kueue) = futures::join!(
        async { futures::try_join!(live::list_nodes(client), pods::list_pods(client)) },
        clusterpolicy::from_cluster(client),
        async {
            if with_kubevirt {
                kubevirt::read_live(client).await.ok().flatten()
            } else {
                None
            }
        },
        dra::list(client),
        virt::list_vms(client),
        // Kueue's objects add the quota layer; a cluster without Kueue (or one that refuses
        // them) is read without it.
        async { kueue::list(client).await.ok().flatten() }
    );
    let (nodes, mut pods) = lists?;
    // How a VM holding a GPU is stopped depends on whether a VirtualMachine owns its VMI:
    // every analysis of a live read knows it (one more list, only when a launcher runs).
    if let Some(vmis) = &vmis {
        virt::mark_launchers(&mut pods, &virt::vmi_owners_from(vmis));
    }
    let waiting = virt::waiting_without_launcher(
        vmis.as_deref().unwrap_or_default(),
        vms.as_deref().unwrap_or_default(),
        &pods,
    );
    if !waiting.is_empty() && kubevirt.is_none() {
        kubevirt = kubevirt::read_live(client).await.ok().flatten();
    }
    pods.extend(waiting);
    let (dra, dra_source) = dra?;
    Ok(Snapshot {
        nodes,
        pods,
        policy,
        kubevirt,
        dra,
        dra_source,
        kueue,
    })
}
