//! `gpuwl explain` on the live cluster: the object and everything its explanation reads, listed at
//! once (each call with the client's timeouts), then the same analysis as on files.

use crate::analysis::explain::{self, Explanation, Inputs};
use crate::error::Result;
use crate::input::snapshot::Snapshot;
use crate::input::{self, virt};
use crate::model::dra::DraSource;
use crate::model::operand::{self, OperandsByNode};
use crate::model::pod::ObjectKind;

/// The cluster's side of a live explanation: nodes, pods (VM launchers marked with their
/// VM), KubeVirt CR, ClusterPolicy, DRA objects and the GPU Operator's operand pods.
struct Cluster {
    snapshot: Snapshot,
    operands: Option<OperandsByNode>,
}

impl Cluster {
    /// Reads it beside `object` (the object's own read, run at the same time).
    ///
    /// Errors: `object`'s; [`crate::error::Error::Runtime`] when the API cannot be reached.
    async fn read_with<T>(
        client: &kube::Client,
        object: impl std::future::Future<Output = Result<T>>,
    ) -> Result<(T, Cluster)> {
        // The snapshot marks VM launchers with their VM itself (how a holding VM is
        // stopped).
        let (object, snapshot, operands) = futures::try_join!(
            object,
            input::snapshot::read(client, true),
            // Operand pods unreadable (forbidden, timed out): explained without them.
            async {
                Ok(input::operands::list(client)
                    .await
                    .ok()
                    .map(operand::by_node))
            }
        )?;
        Ok((object, Cluster { snapshot, operands }))
    }

    fn inputs(&self) -> Inputs<'_> {
        let c = &self.snapshot;
        Inputs {
            operand_pods: self.operands.as_ref(),
            nodes: Some(&c.nodes),
            pods: Some(&c.pods),
            kubevirt: c.kubevirt.as_ref(),
            cluster_policy: c.policy.policy(),
            dra: matches!(c.dra_source, DraSource::Cluster).then_some(&c.dra),
        }
    }
}

/// Explains pod `namespace/name` on the live cluster ([`explain::explain`]).
///
/// Errors: [`crate::error::Error::Input`] when the pod does not exist;
/// [`crate::error::Error::Runtime`] when the API cannot be reached.
pub async fn from_cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Explanation> {
    let (pod, c) =
        Cluster::read_with(client, input::pods::get_pod(client, namespace, name)).await?;
    explain::explain(&pod, c.inputs())
}

/// Explains VM or VMI (`kind`) `namespace/name` with its VMI and launcher pod
/// ([`virt::read`]) on the live cluster ([`explain::vm::explain_vm`]).
///
/// Errors: [`crate::error::Error::Input`] when the object does not exist or KubeVirt is not
/// installed; [`crate::error::Error::Runtime`] when the API cannot be reached.
pub async fn from_cluster_vm(
    client: &kube::Client,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Result<Explanation> {
    let (objects, c) =
        Cluster::read_with(client, virt::read(client, kind, namespace, name)).await?;
    explain::vm::explain_vm(&objects, c.inputs())
}
