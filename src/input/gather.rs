//! The gather step of a command: its data source — files (a node dump, `--pods`,
//! `--cluster-policy`, `--dra`, a KubeVirt/HyperConverged CR), a `gpuwl snapshot` file, or
//! the live cluster ([`ClusterArgs`]) — into one [`Gathered`] set of model records.
//!
//! A command says which parts it needs ([`Wanted`]) and which files and cluster it was
//! given ([`Request`], built from its own clap arguments, whose help texts stay its own);
//! [`gather`] picks the source and reads it through the one reader of each part:
//!
//! - a snapshot file (`--snapshot`) wins: everything comes from it
//!   ([`crate::input::snapshot_file::load`]; the commands declare it in conflict with the
//!   file flags);
//! - else a node dump (`--nodes`, check's positional FILE): the files given, each part
//!   absent when its file is ([`PolicyStatus::not_read`], no pods, no DRA objects, no CR);
//! - else the live cluster: everything at once ([`crate::input::snapshot::read`]) when the
//!   command wants pods, else the nodes (and the CR when wanted); a file given beside it
//!   replaces the part it holds.
//!
//! Files are read in one order: the ClusterPolicy, the CR, the nodes, the pods (and the
//! GPU Operator's operand pods from the same dump), the DRA objects; at most one of them
//! may be `-` ([`one_stdin`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::input::live::ClusterArgs;
use crate::input::snapshot::Snapshot;
use crate::model::dra::{DraObjects, DraSource};
use crate::model::kubevirt::PermittedHostDevices;
use crate::model::node::NodeInfo;
use crate::model::operand::OperandPod;
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;

/// The parts a command needs besides the nodes (always read).
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted {
    /// The pods. Live: the whole cluster is read at once ([`crate::input::snapshot::read`]);
    /// without it only the nodes are listed (credentials that may not list pods suffice).
    pub pods: bool,
    /// The KubeVirt/HyperConverged CR's `permittedHostDevices` from the live cluster when no
    /// CR file is given (a snapshot's own and a file are always taken).
    pub kubevirt: bool,
    /// The GPU Operator's operand pods: from the pods dump (not from stdin, which the pod
    /// reader has consumed), or listed beside the live read (a failed list is kept as the
    /// error, not returned).
    pub operands: bool,
    /// Read `--cluster-policy` before the check that stdin is read once (as `whatif` and
    /// `plan` always have: their errors stay the same).
    pub policy_before_stdin_check: bool,
}

/// The data source a command was given: its file flags, a snapshot file, the live cluster.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The node dump (`--nodes`; check's positional FILE); `-` is stdin.
    pub nodes: Option<&'a PathBuf>,
    /// The pod dump (`--pods`).
    pub pods: Option<&'a PathBuf>,
    /// The ClusterPolicy (`--cluster-policy`).
    pub cluster_policy: Option<&'a PathBuf>,
    /// DRA objects (`--dra`).
    pub dra: Option<&'a PathBuf>,
    /// The KubeVirt or HyperConverged CR (`--kubevirt FILE`; whatif's `--kubevirt-cr`).
    pub kubevirt: Option<&'a PathBuf>,
    /// A `gpuwl snapshot` file (`--snapshot`).
    pub snapshot: Option<&'a PathBuf>,
    /// Where the live cluster is.
    pub live: &'a ClusterArgs,
}

/// Where the records came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    /// Files: the node dump named.
    Files(PathBuf),
    /// The `gpuwl snapshot` file named.
    Snapshot(PathBuf),
    /// The live cluster.
    Cluster,
}

/// What [`gather`] read.
#[derive(Debug)]
pub struct Gathered {
    /// All nodes.
    pub nodes: Vec<NodeInfo>,
    /// All pods (empty when not wanted, or no `--pods` beside a node dump).
    pub pods: Vec<PodInfo>,
    /// The ClusterPolicy, or why there is none.
    pub policy: PolicyStatus,
    /// DRA objects and where they came from (`None`: a node dump without `--dra`).
    pub dra: Option<(DraObjects, DraSource)>,
    /// KubeVirt's `permittedHostDevices`, when read.
    pub kubevirt: Option<PermittedHostDevices>,
    /// The GPU Operator's operand pods, when wanted and there is a source for them: from
    /// the pods dump, or listed from the cluster (`Err`: why the list failed).
    pub operands: Option<Result<Vec<OperandPod>>>,
    /// Where they came from.
    pub from: From,
    /// The same, said: `snapshot FILE`, `files NODES[, PODS]`, `cluster`.
    pub origin: String,
}

impl Gathered {
    /// The records as a [`Snapshot`] (what the analyses of a whole cluster take); DRA
    /// objects not read are empty, their source `Skipped`.
    pub fn into_snapshot(self) -> Snapshot {
        let (dra, dra_source) = self.dra.unwrap_or_else(|| {
            (
                DraObjects::default(),
                DraSource::Skipped("no DRA objects given".into()),
            )
        });
        Snapshot {
            nodes: self.nodes,
            pods: self.pods,
            policy: self.policy,
            kubevirt: self.kubevirt,
            dra,
            dra_source,
        }
    }
}

/// Fails when more than one of `files` is `-`: stdin can be read only once (the second
/// reader would see it empty and report a confusing "empty input").
///
/// Errors: [`Error::Input`] naming the problem.
pub fn one_stdin(files: &[Option<&PathBuf>]) -> Result<()> {
    if files
        .iter()
        .flatten()
        .filter(|p| p.as_os_str() == "-")
        .count()
        > 1
    {
        return Err(Error::Input(
            "only one of the dump files can be `-` (stdin is read once)".into(),
        ));
    }
    Ok(())
}

/// Reads the data source of `req`: the snapshot file, else the node dump and the files
/// beside it, else the live cluster (see the module's documentation).
///
/// Errors: the readers' ([`Error::Input`] / [`Error::File`] naming the file and field),
/// more than one file being `-`, and the live cluster's ([`Error::Runtime`], ...).
pub fn gather(req: &Request, wanted: Wanted) -> Result<Gathered> {
    if let Some(snap) = req.snapshot {
        return from_snapshot(snap);
    }
    let files = [
        req.nodes,
        req.pods,
        req.cluster_policy,
        req.kubevirt,
        req.dra,
    ];
    let policy = if wanted.policy_before_stdin_check {
        let p = read_policy(req)?;
        one_stdin(&files)?;
        p
    } else {
        one_stdin(&files)?;
        read_policy(req)?
    };
    let kubevirt = req
        .kubevirt
        .map(|p| crate::input::kubevirt::read_path(p))
        .transpose()?;
    match req.nodes {
        Some(nodes_path) => from_files(req, wanted, nodes_path, policy, kubevirt),
        None => from_cluster(req, wanted, policy, kubevirt),
    }
}

/// `--cluster-policy`, when given.
fn read_policy(req: &Request) -> Result<Option<PolicyStatus>> {
    req.cluster_policy
        .map(|p| crate::input::clusterpolicy::read_path(p))
        .transpose()
}

/// `--dra`, when given, as read from the file.
fn read_dra(req: &Request) -> Result<Option<(DraObjects, DraSource)>> {
    req.dra
        .map(|f| {
            Ok((
                crate::input::dra::read_path(f)?,
                DraSource::File(f.display().to_string()),
            ))
        })
        .transpose()
}

/// Everything from a snapshot file.
///
/// Errors: as [`crate::input::snapshot_file::load`].
fn from_snapshot(snap: &Path) -> Result<Gathered> {
    let s = crate::input::snapshot_file::load(snap)?.snapshot;
    Ok(Gathered {
        nodes: s.nodes,
        pods: s.pods,
        policy: s.policy,
        dra: Some((s.dra, s.dra_source)),
        kubevirt: s.kubevirt,
        operands: None,
        from: From::Snapshot(snap.to_owned()),
        origin: format!("snapshot {}", snap.display()),
    })
}

/// The node dump and the files beside it.
fn from_files(
    req: &Request,
    wanted: Wanted,
    nodes_path: &Path,
    policy: Option<PolicyStatus>,
    kubevirt: Option<PermittedHostDevices>,
) -> Result<Gathered> {
    let nodes = crate::input::read_nodes(&crate::input::Source::from_arg(nodes_path))?;
    let pods = match req.pods {
        Some(p) => crate::input::pods::read_pods_path(p)?,
        None => Vec::new(),
    };
    let operands = match req.pods.filter(|p| p.as_os_str() != "-") {
        Some(p) if wanted.operands => Some(Ok(crate::input::operands::read_path(p)?)),
        _ => None,
    };
    let dra = read_dra(req)?;
    Ok(Gathered {
        nodes,
        pods,
        policy: policy.unwrap_or_else(PolicyStatus::not_read),
        dra,
        kubevirt,
        operands,
        from: From::Files(nodes_path.to_owned()),
        origin: format!(
            "files {}{}",
            nodes_path.display(),
            req.pods
                .map(|p| format!(", {}", p.display()))
                .unwrap_or_default()
        ),
    })
}

/// The live cluster, with the files given replacing the parts they hold.
fn from_cluster(
    req: &Request,
    wanted: Wanted,
    policy: Option<PolicyStatus>,
    kubevirt: Option<PermittedHostDevices>,
) -> Result<Gathered> {
    let dra = read_dra(req)?;
    let (snap, operands) = req.live.block_on(|client| async move {
        if !wanted.pods {
            let nodes = crate::input::live::list_nodes(&client).await?;
            let kubevirt = match kubevirt {
                Some(k) => Some(k),
                None if wanted.kubevirt => crate::input::kubevirt::read_live(&client).await?,
                None => None,
            };
            let snap = Snapshot {
                nodes,
                pods: Vec::new(),
                policy: PolicyStatus::not_read(),
                kubevirt,
                dra: DraObjects::default(),
                dra_source: DraSource::Skipped("not read".into()),
            };
            return Ok((snap, None));
        }
        let with_kubevirt = wanted.kubevirt && kubevirt.is_none();
        let (mut snap, operands) = futures::try_join!(
            crate::input::snapshot::read(&client, with_kubevirt),
            async {
                Ok(match wanted.operands {
                    true => Some(crate::input::operands::list(&client).await),
                    false => None,
                })
            }
        )?;
        if kubevirt.is_some() {
            snap.kubevirt = kubevirt;
        }
        Ok((snap, operands))
    })?;
    let mut snap = snap;
    if let Some(p) = policy {
        snap.policy = p;
    }
    let dra = match dra {
        Some(d) => Some(d),
        None if wanted.pods => Some((snap.dra, snap.dra_source)),
        None => None,
    };
    Ok(Gathered {
        nodes: snap.nodes,
        pods: snap.pods,
        policy: snap.policy,
        dra,
        kubevirt: snap.kubevirt,
        operands,
        from: From::Cluster,
        origin: "cluster".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(live: &'a ClusterArgs, nodes: Option<&'a PathBuf>) -> Request<'a> {
        Request {
            nodes,
            pods: None,
            cluster_policy: None,
            dra: None,
            kubevirt: None,
            snapshot: None,
            live,
        }
    }

    #[test]
    fn a_node_dump_and_the_files_beside_it() {
        let live = ClusterArgs::default();
        let nodes = PathBuf::from("tests/data/dra/nodes.json");
        let pods = PathBuf::from("tests/data/dra/pods.json");
        let dra = PathBuf::from("tests/data/dra/two-gpus.json");
        let r = Request {
            pods: Some(&pods),
            dra: Some(&dra),
            ..req(&live, Some(&nodes))
        };
        let g = gather(
            &r,
            Wanted {
                pods: true,
                operands: true,
                ..Wanted::default()
            },
        )
        .unwrap();
        assert!(!g.nodes.is_empty());
        assert_eq!(g.from, From::Files(nodes.clone()));
        assert_eq!(
            g.origin,
            "files tests/data/dra/nodes.json, tests/data/dra/pods.json"
        );
        assert!(matches!(g.dra, Some((_, DraSource::File(_)))));
        assert!(matches!(g.operands, Some(Ok(_))));
        assert_eq!(g.policy.status, PolicyStatus::not_read().status);
        // Without --dra and --pods: no DRA objects, no pods, no operand pods.
        let g = gather(&req(&live, Some(&nodes)), Wanted::default()).unwrap();
        assert!(g.dra.is_none() && g.pods.is_empty() && g.operands.is_none());
    }

    #[test]
    fn stdin_once_and_the_snapshot_first() {
        let live = ClusterArgs::default();
        let stdin = PathBuf::from("-");
        let r = Request {
            pods: Some(&stdin),
            ..req(&live, Some(&stdin))
        };
        let e = gather(&r, Wanted::default()).unwrap_err().to_string();
        assert!(e.contains("stdin is read once"), "{e}");
        // A snapshot file wins over the node dump: its own error, not the stdin check.
        let snap = PathBuf::from("/nonexistent/gpuwl-snapshot.tar");
        let r = Request {
            snapshot: Some(&snap),
            ..r
        };
        let e = gather(&r, Wanted::default()).unwrap_err().to_string();
        assert!(e.contains("gpuwl-snapshot.tar"), "{e}");
    }
}
