//! One read of what the analyses need from a live cluster into a [`Snapshot`] (the one
//! carrier of cluster data, [`gpuwl_core::model::snapshot`]).

use gpuwl_core::model::snapshot::Snapshot;

use kube::Client;

use crate::input::{clusterpolicy, dra, kubevirt, kueue, live, operands, pods, virt};
use gpuwl_core::error::Result;
use gpuwl_core::model::dra::{DraObjects, DraSource};
use gpuwl_core::model::kubevirt::PermittedHostDevices;
use gpuwl_core::model::kueue::KueueObjects;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::operator::PolicyStatus;
use gpuwl_core::model::pod::PodInfo;

/// Reads a [`Snapshot`]; the KubeVirt/HyperConverged CR when `with_kubevirt`, or when a
/// VM waits without a launcher pod (its verdict needs `permittedHostDevices`). Each
/// virt-launcher pod is marked with whether a VirtualMachine owns its VMI
/// ([`gpuwl_core::decode::virt::mark_launchers`]; unknown when VMIs cannot be listed).
///
/// VMIs and VMs are listed beside the pods, and each one that waits for a GPU with no
/// launcher pod (refused by virt-controller or virt-api, or not rendered yet:
/// [`gpuwl_core::decode::virt::waiting_without_launcher`]) is added to the pods as the VMI or VM it is, so
/// every analysis of a live read judges it beside the pods.
///
/// DRA objects are listed too; a server without `resource.k8s.io/v1`, or credentials
/// that may not list them, leave them out with the reason in `dra_source`.
///
/// Errors: [`gpuwl_core::error::Error::Runtime`] when nodes or pods cannot be listed; the
/// ClusterPolicy and the KubeVirt CR never fail the call (an absent CRD, no object or an
/// unreadable one only leaves them out).
pub async fn read(client: &Client, with_kubevirt: bool) -> Result<Snapshot> {
    let (lists, parts) = futures::join!(
        async { futures::try_join!(live::list_nodes(client), pods::list_pods(client)) },
        read_parts(client, with_kubevirt)
    );
    let (nodes, pods) = lists?;
    parts.finish(client, nodes, pods).await
}

/// [`read`], with the GPU Operator's operand pods ([`Snapshot::operands`]) found in the same pod list
/// ([`pods::list_pods_with_operands`]) with the finished ones
/// ([`operands::list_finished`]): the pods of the cluster are listed once, not once more
/// by label for the operands. The operand pods are an error of their own when the finished
/// ones cannot be listed (the snapshot stands).
///
/// Errors: as [`read`].
pub async fn read_with_operands(client: &Client, with_kubevirt: bool) -> Result<Snapshot> {
    let (lists, parts, finished) = futures::join!(
        async {
            futures::try_join!(
                live::list_nodes(client),
                pods::list_pods_with_operands(client)
            )
        },
        read_parts(client, with_kubevirt),
        operands::list_finished(client)
    );
    let (nodes, (pods, listed)) = lists?;
    let mut snapshot = parts.finish(client, nodes, pods).await?;
    snapshot.operands = Some(operands::merge(listed, finished));
    Ok(snapshot)
}

/// What a [`Snapshot`] holds besides the nodes and pods, read ([`read_parts`]) before
/// they are put together ([`Parts::finish`]): `explain pod` reads them beside the nodes
/// and chooses the pods to read from the nodes
/// ([`gpuwl_core::analysis::explain_scope::pods_to_read`]).
pub struct Parts {
    policy: PolicyStatus,
    kubevirt: Option<PermittedHostDevices>,
    dra: Result<(DraObjects, DraSource)>,
    vmis: Option<Vec<serde_json::Value>>,
    vms: Option<Vec<serde_json::Value>>,
    kueue: Option<KueueObjects>,
}

/// Reads the [`Parts`] of a snapshot, concurrently (the KubeVirt CR when `with_kubevirt`;
/// see [`read`]). Never fails: a DRA list that fails fails [`Parts::finish`].
pub async fn read_parts(client: &Client, with_kubevirt: bool) -> Parts {
    let (policy, kubevirt, dra, (vmis, vms), kueue) = futures::join!(
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
    Parts {
        policy,
        kubevirt,
        dra,
        vmis,
        vms,
        kueue,
    }
}

impl Parts {
    /// The snapshot of `nodes`, `pods` and these parts: VM launchers marked with their VM,
    /// VMIs and VMs waiting without a launcher added to the pods (and the KubeVirt CR read
    /// when one waits and it was not).
    ///
    /// Errors: [`gpuwl_core::error::Error::Runtime`] when the DRA objects could not be listed.
    pub async fn finish(
        self,
        client: &Client,
        nodes: Vec<NodeInfo>,
        mut pods: Vec<PodInfo>,
    ) -> Result<Snapshot> {
        let Parts {
            policy,
            mut kubevirt,
            dra,
            vmis,
            vms,
            kueue,
        } = self;
        // How a VM holding a GPU is stopped depends on whether a VirtualMachine owns its
        // VMI: every analysis of a live read knows it (one more list, only when a launcher
        // runs).
        if let Some(vmis) = &vmis {
            gpuwl_core::decode::virt::mark_launchers(&mut pods, &virt::vmi_owners_from(vmis));
        }
        let waiting = gpuwl_core::decode::virt::waiting_without_launcher(
            vmis.as_deref().unwrap_or_default(),
            vms.as_deref().unwrap_or_default(),
            &pods,
        );
        if !waiting.is_empty() && kubevirt.is_none() {
            kubevirt = kubevirt::read_live(client).await.ok().flatten();
        }
        pods.extend(waiting);
        Ok(Snapshot {
            kubevirt,
            dra: Some(dra?),
            kueue,
            ..Snapshot::of_cluster(nodes, pods, policy)
        })
    }
}
