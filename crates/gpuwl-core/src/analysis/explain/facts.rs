//! What the diagnosis rules ([`super::rules`], [`super::dra_rules`]) look at: one
//! [`Facts`] per explained pod, gathered by [`super::explain`].

use crate::analysis::explain::Explanation;
use crate::analysis::usage::Usage;
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::node::NodeInfo;
use crate::model::operand::OperandsByNode;
use crate::model::operator::ClusterPolicy;
use crate::model::pod::PodInfo;

/// What the rules look at.
pub struct Facts<'a> {
    /// The pod (or VMI/VM) explained.
    pub pod: &'a PodInfo,
    /// All pods (empty when unknown): the holders of units, e.g. whether a launcher's
    /// VMI has a VirtualMachine ([`PodInfo::vmi_owned_by_vm`]).
    pub pods: &'a [PodInfo],
    /// Its explanation so far (requests, constraints, candidates; no diagnosis yet).
    pub e: &'a Explanation,
    /// All nodes (empty when unknown; see [`Explanation::nodes_known`]).
    pub nodes: &'a [NodeInfo],
    /// Per node × resource: allocatable, allocated, free.
    pub usage: &'a Usage,
    /// KubeVirt's `permittedHostDevices`, when known.
    pub kubevirt: Option<&'a PermittedHostDevices>,
    /// The GPU Operator's ClusterPolicy, when known.
    pub cluster_policy: Option<&'a ClusterPolicy>,
    /// The GPU Operator's operand pods per node, when known.
    pub operand_pods: Option<&'a OperandsByNode>,
    /// The DRA objects (ResourceSlices, DeviceClasses, claims), when read.
    pub dra: Option<&'a crate::model::dra::DraObjects>,
}
