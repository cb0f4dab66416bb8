//! The one carrier of cluster data: [`Snapshot`], what every source fills (a node dump and
//! the files beside it, a `gpuwl snapshot` file, the live cluster, a twin read back) and
//! every analysis of a whole cluster reads (`inventory`, `explain`, `check`'s pods,
//! `kubevirt`, the twin's prediction and plan). gpuwl's `input::gather` fills it from the
//! command's flags; `input::snapshot` and `input::snapshot_file` from the cluster and a
//! snapshot file.

use std::path::PathBuf;

use crate::error::Result;
use crate::model::dra::{DraObjects, DraSource};
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::kueue::KueueObjects;
use crate::model::node::NodeInfo;
use crate::model::operand::OperandPod;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;

/// Where a [`Snapshot`]'s records came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    /// Files: the node dump named (`-` is stdin).
    Files(PathBuf),
    /// Files without a node dump (`explain` with only `--pods`): no node data.
    WithoutNodes,
    /// The `gpuwl snapshot` file named.
    Snapshot(PathBuf),
    /// The live cluster (or a twin of it, read back).
    Cluster,
}

impl From {
    /// The file a record's error names: the node dump or the snapshot file; `None` for
    /// the cluster and for no node dump.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            From::Files(p) | From::Snapshot(p) => Some(p),
            From::WithoutNodes | From::Cluster => None,
        }
    }
}

/// One read of a cluster: nodes, pods, the GPU Operator's ClusterPolicy and operand pods,
/// KubeVirt's `permittedHostDevices`, DRA objects and Kueue's objects, each part absent
/// when it was not read, and where it all came from.
#[derive(Debug)]
pub struct Snapshot {
    /// All nodes (none from [`From::WithoutNodes`], nor after gpuwl's `gather::stream`,
    /// which hands them to its sink one at a time).
    pub nodes: Vec<NodeInfo>,
    /// All pods, with the VMIs and VMs that wait without a launcher pod
    /// ([`crate::decode::virt::waiting_without_launcher`]); `None` when not read (not
    /// wanted, or no `--pods` beside a node dump). [`Snapshot::pods`] reads them as a slice.
    pub pods: Option<Vec<PodInfo>>,
    /// The ClusterPolicy, or why there is none.
    pub policy: PolicyStatus,
    /// KubeVirt's `permittedHostDevices`, when read.
    pub kubevirt: Option<PermittedHostDevices>,
    /// DRA objects and where they came from; `None` when not read (a node dump without
    /// `--dra`, or the live cluster read without pods). A source that says they were not
    /// listed ([`DraSource::was_read`] false) leaves them empty.
    pub dra: Option<(DraObjects, DraSource)>,
    /// Kueue's objects: from a file, a snapshot file's `kueue.json`, or listed from a
    /// cluster that serves `kueue.x-k8s.io` (`None`: not read, or Kueue not installed).
    pub kueue: Option<KueueObjects>,
    /// The GPU Operator's operand pods, when wanted and there is a source for them: the
    /// pods dump, or the cluster's pod list (`Err`: why that list failed; the rest stands).
    pub operands: Option<Result<Vec<OperandPod>>>,
    /// Where the records came from.
    pub from: From,
    /// The same, said: `snapshot FILE`, `files NODES[, PODS]`, `no node dump`, `cluster`.
    pub origin: String,
}

impl Snapshot {
    /// A snapshot of `nodes` and `pods` (read), under `policy`, from the live cluster
    /// (`origin` `cluster`); every other part absent.
    pub fn of_cluster(nodes: Vec<NodeInfo>, pods: Vec<PodInfo>, policy: PolicyStatus) -> Snapshot {
        Snapshot {
            nodes,
            pods: Some(pods),
            policy,
            kubevirt: None,
            dra: None,
            kueue: None,
            operands: None,
            from: From::Cluster,
            origin: "cluster".into(),
        }
    }

    /// The pods, empty when not read.
    pub fn pods(&self) -> &[PodInfo] {
        self.pods.as_deref().unwrap_or_default()
    }

    /// The DRA objects when they were read ([`DraSource::was_read`]): the only ones an
    /// analysis takes.
    pub fn usable_dra(&self) -> Option<&DraObjects> {
        self.dra
            .as_ref()
            .filter(|(_, s)| s.was_read())
            .map(|(d, _)| d)
    }
}
