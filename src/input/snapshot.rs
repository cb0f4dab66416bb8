//! One read of what the analyses need from a live cluster into a [`Snapshot`] (the record
//! is [`gpuwl_core::decode::snapshot`], re-exported here).

pub use gpuwl_core::decode::snapshot::*;

use kube::Client;

use crate::error::Result;
use crate::input::{clusterpolicy, dra, kubevirt, live, pods, virt};

/// Reads a [`Snapshot`]; the KubeVirt/HyperConverged CR only when `with_kubevirt`. Each
/// virt-launcher pod is marked with whether a VirtualMachine owns its VMI
/// ([`crate::input::virt::mark_launchers`]; unknown when VMIs cannot be listed).
///
/// DRA objects are listed too; a server without `resource.k8s.io/v1`, or credentials
/// that may not list them, leave them out with the reason in `dra_source`.
///
/// Errors: [`crate::error::Error::Runtime`] when nodes or pods cannot be listed; the
/// ClusterPolicy and the KubeVirt CR never fail the call (an absent CRD, no object or an
/// unreadable one only leaves them out).
pub async fn read(client: &Client, with_kubevirt: bool) -> Result<Snapshot> {
    let (lists, policy, kubevirt, dra) = futures::join!(
        async { futures::try_join!(live::list_nodes(client), pods::list_pods(client)) },
        clusterpolicy::from_cluster(client),
        async {
            if with_kubevirt {
                kubevirt::read_live(client).await.ok().flatten()
            } else {
                None
            }
        },
        dra::list(client)
    );
    let (nodes, mut pods) = lists?;
    // How a VM holding a GPU is stopped depends on whether a VirtualMachine owns its VMI:
    // every analysis of a live read knows it (one more list, only when a launcher runs).
    if pods.iter().any(|p| p.launcher_vmi().is_some())
        && let Some(owners) = virt::vmi_owners(client).await
    {
        virt::mark_launchers(&mut pods, &owners);
    }
    let (dra, dra_source) = dra?;
    Ok(Snapshot {
        nodes,
        pods,
        policy,
        kubevirt,
        dra,
        dra_source,
    })
}
