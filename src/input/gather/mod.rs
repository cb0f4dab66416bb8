//! The gather step of a command: its data source — files (a node dump, `--pods`,
//! `--cluster-policy`, `--dra`, a KubeVirt/HyperConverged CR), a `gpuwl snapshot` file, or
//! the live cluster ([`ClusterArgs`]) — into one [`Gathered`] set of model records.
//!
//! A command flattens [`SourceArgs`] (the flags, defined once in [`args`], each command
//! taking the parts it reads), says which parts it needs ([`Wanted`]) and calls [`gather`]
//! (or, to judge nodes one at a time without holding them, [`stream`]) with
//! [`SourceArgs::request`]. The source is picked once:
//!
//! - a snapshot file (`--snapshot`) wins: everything comes from it
//!   ([`crate::input::snapshot_file::load`]) but the files allowed beside it (`check`'s
//!   `--pods`, `kubevirt generate`'s `--kubevirt`), which replace the part they hold;
//! - else a node dump (`--nodes`, `check`'s positional FILE): the files given, each part
//!   absent when its file is ([`PolicyStatus::not_read`], no pods, no DRA objects, no CR);
//! - else the live cluster: everything at once ([`crate::input::snapshot::read`]) when the
//!   command wants pods, else the nodes (and the CR when wanted); a file given beside it
//!   replaces the part it holds. Under [`Live::IfConfigured`] (`explain`) only when no pod
//!   dump is given either and a cluster is configured; else the files alone
//!   ([`From::WithoutNodes`]).
//!
//! Files are read first, before the snapshot, the node dump or the cluster, in one order:
//! the check that at most one of them is `-` ([`one_stdin`]), the pods, the DRA objects,
//! the ClusterPolicy, the CR; then the nodes; then the GPU Operator's operand pods from the
//! pods dump.

pub mod args;
pub mod object;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use args::{LimitArgs, Live, SourceArgs, Spec};
pub use object::{Kind, Named};

use crate::input::kubevirt::{self};
use crate::input::kueue;
use crate::input::live::{self, ClusterArgs};
use crate::input::snapshot::{self};
use crate::input::{clusterpolicy, dra, operands, pods, snapshot_file};
use gpuwl_core::decode::dump::Source;
use gpuwl_core::decode::kubevirt::{CrType, CurrentCr};
use gpuwl_core::decode::object::Object;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::dra::{DraObjects, DraSource};
use gpuwl_core::model::kueue::KueueObjects;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::operand::{self as operand_model, OperandPod, OperandsByNode};
use gpuwl_core::model::operator::PolicyStatus;
use gpuwl_core::model::pod::PodInfo;
use gpuwl_core::model::snapshot::{From, Snapshot};

/// Where the GPU Operator's operand pods come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Operands {
    /// Not read.
    #[default]
    No,
    /// From the pods dump beside a node dump only, never listed (`check` in text mode).
    BesideNodeDump,
    /// From the pods dump, else listed from the live cluster (a failed list is kept as the
    /// error, not returned).
    Yes,
}

/// The parts a command needs besides the nodes (always read).
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted {
    /// The pods. Live: the whole cluster is read at once ([`crate::input::snapshot::read`]);
    /// without it only the nodes are listed (credentials that may not list pods suffice).
    /// From a snapshot: its pods only when wanted.
    pub pods: bool,
    /// The KubeVirt/HyperConverged CR from the live cluster when no CR file is given (a
    /// snapshot's own list and a file are always taken).
    pub kubevirt: bool,
    /// Which CR to read from the live cluster (`None`: the HyperConverged CR when there is
    /// one, else the KubeVirt CR).
    pub kubevirt_kind: Option<CrType>,
    /// The GPU Operator's operand pods (never from stdin, which the pod reader has
    /// consumed, nor from a snapshot).
    pub operands: Operands,
    /// Kueue's objects from the live cluster when no `--kueue` file is given (a file is
    /// always taken).
    pub kueue: bool,
}

/// The data source a command was given: its file flags, a snapshot file, the live cluster
/// ([`SourceArgs::request`]).
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
    /// Kueue's objects (`--kueue`).
    pub kueue: Option<&'a PathBuf>,
    /// A `gpuwl snapshot` file (`--snapshot`).
    pub snapshot: Option<&'a PathBuf>,
    /// Where the live cluster is.
    pub live: &'a ClusterArgs,
    /// The command's flags: when the live cluster is read, how messages name the files.
    pub spec: &'a Spec,
    /// An object `explain` names on the live cluster: read with what explains it
    /// ([`object::read`]), from the live cluster alone (the command gives no file with it).
    pub object: Option<Named<'a>>,
}

/// What [`gather`] read: the [`Snapshot`], and what a command reads beside it.
#[derive(Debug)]
pub struct Gathered {
    /// The records (their nodes none after [`stream`]: they went to its sink).
    pub snapshot: Snapshot,
    /// [`stream`] on the live cluster: why the pods could not be listed (it goes on without
    /// them, [`Snapshot::pods`] `None`; [`gather`] fails instead).
    pub pods_error: Option<Error>,
    /// The whole CR the snapshot's `kubevirt` was read from, when it was read by itself:
    /// from a file, or from the live cluster without pods (a snapshot, and the live read
    /// with pods, keep only the list).
    pub kubevirt_object: Option<Value>,
    /// The object named in the [`Request`] ([`Request::object`]), as read.
    pub object: Option<Object>,
}

impl Gathered {
    /// Records with nothing read beside them.
    fn of(snapshot: Snapshot) -> Gathered {
        Gathered {
            snapshot,
            pods_error: None,
            kubevirt_object: None,
            object: None,
        }
    }

    /// The operand pods, taken out, per node; `None` when not read or their list failed
    /// (an explanation goes on without them).
    pub fn operands_by_node(&mut self) -> Option<OperandsByNode> {
        self.snapshot
            .operands
            .take()
            .and_then(|o| o.ok())
            .map(operand_model::by_node)
    }

    /// The whole CR, when it was read by itself ([`Gathered::kubevirt_object`]).
    pub fn kubevirt_cr(&self) -> Option<CurrentCr> {
        match (&self.snapshot.kubevirt, &self.kubevirt_object) {
            (Some(devices), Some(object)) => Some(CurrentCr {
                devices: devices.clone(),
                object: object.clone(),
            }),
            _ => None,
        }
    }
}

/// Fails when more than one of `files` is `-`: stdin can be read only once (the second
/// reader would see it empty and report a confusing "empty input").
///
/// Errors: [`Error::Input`] naming the problem.
pub fn one_stdin(files: &[Option<&PathBuf>]) -> Result<()> {
    one_stdin_named(files, "the dump files")
}

/// [`one_stdin`], the files named `what` in the message.
fn one_stdin_named(files: &[Option<&PathBuf>], what: &str) -> Result<()> {
    if files
        .iter()
        .flatten()
        .filter(|p| p.as_os_str() == "-")
        .count()
        > 1
    {
        return Err(Error::Input(format!(
            "only one of {what} can be `-` (stdin is read once)"
        )));
    }
    Ok(())
}

/// The files of the request that are read before anything else.
#[derive(Default)]
struct Files {
    pods: Option<Vec<PodInfo>>,
    dra: Option<(DraObjects, DraSource)>,
    policy: Option<PolicyStatus>,
    cr: Option<CurrentCr>,
    kueue: Option<KueueObjects>,
}

/// Where the records are read from.
enum Choice<'a> {
    Snapshot(&'a Path),
    Files(Option<&'a Path>),
    Cluster,
}

impl Request<'_> {
    /// The source these flags pick (see the module's documentation).
    fn choice(&self) -> Choice<'_> {
        match (self.snapshot, self.nodes) {
            (Some(s), _) => Choice::Snapshot(s),
            (None, Some(n)) => Choice::Files(Some(n)),
            (None, None) => match self.spec.live {
                Live::IfConfigured if self.pods.is_some() || !self.live.configured() => {
                    Choice::Files(None)
                }
                _ => Choice::Cluster,
            },
        }
    }

    /// Checks that stdin is read once, then reads the pods, the DRA objects, the
    /// ClusterPolicy and the CR, as given.
    fn read_files(&self) -> Result<Files> {
        let files = [
            self.nodes,
            self.pods,
            self.cluster_policy,
            self.kubevirt,
            self.dra,
            self.kueue,
        ];
        // Two files: both named; more: "the dump files".
        match self.spec.file_flags().as_slice() {
            [a, b] => one_stdin_named(&files, &format!("{a} and {b}"))?,
            _ => one_stdin(&files)?,
        }
        Ok(Files {
            pods: self
                .pods
                .map(|p| gpuwl_core::decode::pods::read_pods_path(p))
                .transpose()?,
            dra: self
                .dra
                .map(|f| {
                    Ok((
                        gpuwl_core::decode::dra::read_path(f)?,
                        DraSource::File(f.display().to_string()),
                    ))
                })
                .transpose()?,
            policy: self
                .cluster_policy
                .map(|p| gpuwl_core::decode::clusterpolicy::read_path(p))
                .transpose()?,
            cr: self
                .kubevirt
                .map(|p| gpuwl_core::decode::kubevirt::read_cr_path(p))
                .transpose()?,
            kueue: self
                .kueue
                .map(|p| gpuwl_core::decode::kueue::read_path(p))
                .transpose()?,
        })
    }

    /// The operand pods of the pods dump, when wanted (`live`: beside the live cluster,
    /// where [`Operands::BesideNodeDump`] reads none). They are read in a second pass over
    /// the file, so only from a regular file: not from stdin, which the pod reader has
    /// consumed, nor from a pipe (`--pods <(kubectl get pods -A -o json)`, a FIFO), which
    /// would be empty or block.
    fn dump_operands(&self, wanted: Wanted, live: bool) -> Result<Option<Result<Vec<OperandPod>>>> {
        let want = match wanted.operands {
            Operands::No => false,
            Operands::BesideNodeDump => !live,
            Operands::Yes => true,
        };
        let read_twice =
            |p: &&PathBuf| p.as_os_str() != "-" && std::fs::metadata(p).is_ok_and(|m| m.is_file());
        match self.pods.filter(read_twice) {
            Some(p) if want => Ok(Some(Ok(gpuwl_core::decode::operands::read_path(p)?))),
            _ => Ok(None),
        }
    }

    /// Whether the operand pods are listed from the live cluster: wanted, and no pods dump.
    fn list_operands(&self, wanted: Wanted) -> bool {
        wanted.operands == Operands::Yes && self.pods.is_none()
    }
}

/// Reads the data source of `req`: the snapshot file, else the node dump and the files
/// beside it, else the live cluster (see the module's documentation).
///
/// Errors: the readers' ([`Error::Input`] / [`Error::File`] naming the file and field),
/// more than one file being `-`, and the live cluster's ([`Error::Runtime`], ...).
pub fn gather(req: &Request, wanted: Wanted) -> Result<Gathered> {
    let files = req.read_files()?;
    if let Some(named) = req.object {
        return req
            .live
            .block_on(|client| async move { object::read(&client, named).await });
    }
    match req.choice() {
        Choice::Snapshot(snap) => from_snapshot(snap, files, wanted),
        Choice::Files(nodes) => {
            let nodes = nodes
                .map(|p| gpuwl_core::decode::dump::read_nodes(&Source::from_arg(p)))
                .transpose()?;
            let mut g = from_files(req, files, nodes.unwrap_or_default());
            g.snapshot.operands = req.dump_operands(wanted, false)?;
            Ok(g)
        }
        Choice::Cluster => from_cluster(req, wanted, files),
    }
}

/// As [`gather`], the nodes handed one at a time to a sink rather than collected: `start`
/// makes the sink from what was gathered (the nodes not yet read; it may take parts out),
/// `add` gives it each node. A node dump is streamed as it is parsed and the live cluster
/// page by page, so nothing is held per node but what the sink keeps.
///
/// The live cluster is read part by part: the ClusterPolicy (the file's, else the
/// cluster's, beside a one-node list that fails fast on a dead server), the DRA objects,
/// the pods when wanted (a failed list is kept in [`Gathered::pods_error`]), then the
/// nodes, then the operand pods when wanted.
///
/// Errors: as [`gather`].
pub fn stream<S>(
    req: &Request,
    wanted: Wanted,
    start: impl FnOnce(&mut Gathered) -> S,
    mut add: impl FnMut(&mut S, NodeInfo),
) -> Result<(S, Gathered)> {
    let files = req.read_files()?;
    match req.choice() {
        Choice::Snapshot(snap) => {
            let mut g = from_snapshot(snap, files, wanted)?;
            let nodes = std::mem::take(&mut g.snapshot.nodes);
            let mut sink = start(&mut g);
            for n in nodes {
                add(&mut sink, n);
            }
            Ok((sink, g))
        }
        Choice::Files(nodes) => {
            let mut g = from_files(req, files, Vec::new());
            let mut sink = start(&mut g);
            if let Some(p) = nodes {
                gpuwl_core::decode::dump::for_each_node(&Source::from_arg(p), |n| {
                    add(&mut sink, n)
                })?;
            }
            g.snapshot.operands = req.dump_operands(wanted, false)?;
            Ok((sink, g))
        }
        Choice::Cluster => stream_cluster(req, wanted, files, start, add),
    }
}

/// [`stream`] from the live cluster (see there for the order of the reads).
fn stream_cluster<S>(
    req: &Request,
    wanted: Wanted,
    files: Files,
    start: impl FnOnce(&mut Gathered) -> S,
    mut add: impl FnMut(&mut S, NodeInfo),
) -> Result<(S, Gathered)> {
    req.live.block_on(|client| async move {
        let Files {
            pods,
            dra,
            policy,
            cr,
            kueue: kueue_file,
        } = files;
        // The ClusterPolicy read never fails (it waits up to its own timeout), so it
        // runs beside a one-node list that fails fast: a dead server costs one timeout.
        let ((), policy) = futures::try_join!(live::probe_nodes(&client), async {
            Ok(match policy {
                Some(p) => p,
                None => clusterpolicy::from_cluster(&client).await,
            })
        })?;
        let dra = match dra {
            Some(d) => d,
            None => dra::list(&client).await?,
        };
        let (pods, pods_error) = match pods {
            Some(p) => (Some(p), None),
            None if wanted.pods => match pods::list_pods(&client).await {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let snapshot = Snapshot {
            pods,
            kubevirt: cr.as_ref().map(|c| c.devices.clone()),
            dra: Some(dra),
            kueue: match kueue_file {
                Some(k) => Some(k),
                None if wanted.kueue => kueue::list(&client).await?,
                None => None,
            },
            ..Snapshot::of_cluster(Vec::new(), Vec::new(), policy)
        };
        let mut g = Gathered {
            pods_error,
            kubevirt_object: cr.map(|c| c.object),
            ..Gathered::of(snapshot)
        };
        let mut sink = start(&mut g);
        live::for_each_node(&client, |n| add(&mut sink, n)).await?;
        g.snapshot.operands = match req.list_operands(wanted) {
            true => Some(operands::list(&client).await),
            false => req.dump_operands(wanted, true)?,
        };
        Ok((sink, g))
    })
}

/// Everything from a snapshot file, but the files given beside it.
///
/// Errors: as [`crate::input::snapshot_file::load`].
fn from_snapshot(snap: &Path, files: Files, wanted: Wanted) -> Result<Gathered> {
    let s = snapshot_file::load(snap)?;
    let pods = match files.pods {
        Some(p) => Some(p),
        None => s.pods.filter(|_| wanted.pods),
    };
    let (kubevirt, kubevirt_object) = match files.cr {
        Some(c) => (Some(c.devices), Some(c.object)),
        None => (s.kubevirt, None),
    };
    let snapshot = Snapshot {
        pods,
        policy: files.policy.unwrap_or(s.policy),
        dra: files.dra.or(s.dra),
        kubevirt,
        kueue: files.kueue.or(s.kueue),
        ..s
    };
    Ok(Gathered {
        kubevirt_object,
        ..Gathered::of(snapshot)
    })
}

/// The files given, with `nodes` read from the node dump (none without one); the operand
/// pods are the caller's to read, after the nodes.
fn from_files(req: &Request, files: Files, nodes: Vec<NodeInfo>) -> Gathered {
    let (from, origin) = match req.nodes {
        Some(n) => (
            From::Files(n.clone()),
            format!(
                "files {}{}",
                n.display(),
                req.pods
                    .map(|p| format!(", {}", p.display()))
                    .unwrap_or_default()
            ),
        ),
        None => (From::WithoutNodes, "no node dump".into()),
    };
    let snapshot = Snapshot {
        nodes,
        pods: files.pods,
        policy: files.policy.unwrap_or_else(PolicyStatus::not_read),
        kubevirt: files.cr.as_ref().map(|c| c.devices.clone()),
        dra: files.dra,
        kueue: files.kueue,
        operands: None,
        from,
        origin,
    };
    Gathered {
        kubevirt_object: files.cr.map(|c| c.object),
        ..Gathered::of(snapshot)
    }
}

/// The live cluster, with the files given replacing the parts they hold.
fn from_cluster(req: &Request, wanted: Wanted, files: Files) -> Result<Gathered> {
    let Files {
        pods,
        dra,
        policy,
        cr,
        kueue: kueue_file,
    } = files;
    let list_operands = req.list_operands(wanted);
    let (mut snap, kubevirt_object) = req.live.block_on(|client| async move {
        let kueue = match kueue_file {
            Some(k) => Some(k),
            None if wanted.kueue => kueue::list(&client).await?,
            None => None,
        };
        if !wanted.pods {
            let nodes = live::list_nodes(&client).await?;
            let cr = match cr {
                Some(c) => Some(c),
                None if wanted.kubevirt => {
                    kubevirt::read_live_cr(&client, wanted.kubevirt_kind).await?
                }
                None => None,
            };
            let snap = Snapshot {
                pods: None,
                kubevirt: cr.as_ref().map(|c| c.devices.clone()),
                kueue,
                ..Snapshot::of_cluster(nodes, Vec::new(), PolicyStatus::not_read())
            };
            return Ok((snap, cr.map(|c| c.object)));
        }
        let with_kubevirt = wanted.kubevirt && cr.is_none();
        // The operand pods come from the same pod list (issue 51: listing them by label
        // read the cluster's pods again).
        let mut snap = match list_operands {
            true => snapshot::read_with_operands(&client, with_kubevirt).await?,
            false => snapshot::read(&client, with_kubevirt).await?,
        };
        let object = cr.map(|c| {
            snap.kubevirt = Some(c.devices);
            c.object
        });
        snap.kueue = kueue.or(snap.kueue);
        Ok((snap, object))
    })?;
    if snap.operands.is_none() {
        snap.operands = req.dump_operands(wanted, true)?;
    }
    if let Some(p) = policy {
        snap.policy = p;
    }
    if let Some(p) = pods {
        snap.pods = Some(p);
    }
    if let Some(d) = dra {
        snap.dra = Some(d);
    }
    Ok(Gathered {
        kubevirt_object,
        ..Gathered::of(snap)
    })
}

#[cfg(test)]
mod tests {
    use super::args::{ExplainSource, InventorySource, KubevirtCheckSource, Takes};
    use super::*;

    fn req<'a>(live: &'a ClusterArgs, nodes: Option<&'a PathBuf>) -> Request<'a> {
        Request {
            nodes,
            pods: None,
            cluster_policy: None,
            dra: None,
            kubevirt: None,
            kueue: None,
            snapshot: None,
            live,
            spec: InventorySource::SPEC,
            object: None,
        }
    }

    fn path(p: &str) -> PathBuf {
        PathBuf::from(p)
    }

    #[test]
    fn a_node_dump_and_the_files_beside_it() {
        let live = ClusterArgs::default();
        let nodes = path("tests/data/dra/nodes.json");
        let pods = path("tests/data/dra/pods.json");
        let dra = path("tests/data/dra/two-gpus.json");
        let r = Request {
            pods: Some(&pods),
            dra: Some(&dra),
            ..req(&live, Some(&nodes))
        };
        let g = gather(
            &r,
            Wanted {
                pods: true,
                operands: Operands::Yes,
                ..Wanted::default()
            },
        )
        .unwrap();
        assert!(!g.snapshot.nodes.is_empty());
        assert_eq!(g.snapshot.from, From::Files(nodes.clone()));
        assert_eq!(
            g.snapshot.origin,
            "files tests/data/dra/nodes.json, tests/data/dra/pods.json"
        );
        assert!(matches!(g.snapshot.dra, Some((_, DraSource::File(_)))));
        assert!(matches!(g.snapshot.operands, Some(Ok(_))));
        assert!(g.snapshot.pods.as_ref().is_some_and(|p| !p.is_empty()));
        assert_eq!(g.snapshot.policy.status, PolicyStatus::not_read().status);
        // Without --dra and --pods: no DRA objects, no pods, no operand pods.
        let g = gather(&req(&live, Some(&nodes)), Wanted::default()).unwrap();
        assert!(
            g.snapshot.dra.is_none() && g.snapshot.pods.is_none() && g.snapshot.operands.is_none()
        );
    }

    #[test]
    fn a_pods_dump_from_a_pipe_is_read_once() {
        // `--pods <(kubectl get pods -A -o json)`: the pod reader takes the pipe; the
        // operand pods are not read from it a second time (it would be empty, or block).
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pods.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a path in the test's own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                std::fs::write(&fifo, std::fs::read("tests/data/dra/pods.json").unwrap()).unwrap()
            })
        };
        let live = ClusterArgs::default();
        let nodes = path("tests/data/dra/nodes.json");
        let r = Request {
            pods: Some(&fifo),
            ..req(&live, Some(&nodes))
        };
        let g = gather(
            &r,
            Wanted {
                pods: true,
                operands: Operands::Yes,
                ..Wanted::default()
            },
        )
        .unwrap();
        writer.join().unwrap();
        assert!(g.snapshot.pods.as_ref().is_some_and(|p| !p.is_empty()));
        assert!(g.snapshot.operands.is_none());
    }

    #[test]
    fn stdin_once_and_the_files_first() {
        let live = ClusterArgs::default();
        let stdin = path("-");
        let r = Request {
            pods: Some(&stdin),
            ..req(&live, Some(&stdin))
        };
        let e = gather(&r, Wanted::default()).unwrap_err().to_string();
        assert_eq!(
            e,
            "only one of the dump files can be `-` (stdin is read once)"
        );
        // A command with two files names them (kubevirt check).
        let r = Request {
            kubevirt: Some(&stdin),
            spec: KubevirtCheckSource::SPEC,
            ..req(&live, Some(&stdin))
        };
        let e = gather(&r, Wanted::default()).unwrap_err().to_string();
        assert_eq!(
            e,
            "only one of --nodes and --kubevirt can be `-` (stdin is read once)"
        );
        // The files are read before the snapshot: a bad one is its error, not the snapshot's.
        let snap = path("/nonexistent/gpuwl-snapshot.tar");
        let bad = path("/nonexistent/pods.json");
        let r = Request {
            snapshot: Some(&snap),
            pods: Some(&bad),
            ..req(&live, None)
        };
        let e = gather(&r, Wanted::default()).unwrap_err().to_string();
        assert!(e.contains("pods.json"), "{e}");
        let r = Request { pods: None, ..r };
        let e = gather(&r, Wanted::default()).unwrap_err().to_string();
        assert!(e.contains("gpuwl-snapshot.tar"), "{e}");
    }

    #[test]
    fn explain_reads_the_files_alone_with_a_pod_dump() {
        // Under Live::IfConfigured a pod dump without a node dump is the files alone: no
        // node data, no cluster contacted (a kubeconfig that does not exist is not read).
        let live = ClusterArgs::file(Path::new("/nonexistent/kubeconfig"), None);
        let pods = path("tests/data/dra/pods.json");
        let r = Request {
            pods: Some(&pods),
            spec: ExplainSource::SPEC,
            ..req(&live, None)
        };
        let wanted = Wanted {
            pods: true,
            operands: Operands::Yes,
            ..Wanted::default()
        };
        let g = gather(&r, wanted).unwrap();
        assert_eq!(g.snapshot.from, From::WithoutNodes);
        assert!(g.snapshot.nodes.is_empty());
        assert!(g.snapshot.pods.is_some_and(|p| !p.is_empty()));
        assert!(matches!(g.snapshot.operands, Some(Ok(_))));
        // Under Live::Always the same flags go to the cluster (here: its kubeconfig error).
        let r = Request {
            spec: InventorySource::SPEC,
            ..r
        };
        let e = gather(&r, wanted).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/kubeconfig"), "{e}");
    }

    #[test]
    fn stream_hands_each_node_to_the_sink() {
        let live = ClusterArgs::default();
        let nodes = path("tests/data/dra/nodes.json");
        let pods = path("tests/data/dra/pods.json");
        let all = gpuwl_core::decode::dump::read_nodes(
            &gpuwl_core::decode::dump::Source::from_arg(&nodes),
        )
        .unwrap();
        let r = Request {
            pods: Some(&pods),
            ..req(&live, Some(&nodes))
        };
        // The sink is made from what was gathered beside the nodes (it may take the pods).
        let wanted = Wanted {
            operands: Operands::BesideNodeDump,
            ..Wanted::default()
        };
        let (names, g) = stream(
            &r,
            wanted,
            |g| {
                assert!(g.snapshot.nodes.is_empty());
                assert!(g.snapshot.pods.take().is_some_and(|p| !p.is_empty()));
                Vec::new()
            },
            |names: &mut Vec<String>, n| names.push(n.name),
        )
        .unwrap();
        assert_eq!(
            names,
            all.iter().map(|n| n.name.clone()).collect::<Vec<_>>()
        );
        assert!(g.snapshot.nodes.is_empty() && g.snapshot.pods.is_none());
        // Operand pods come from the dump after the nodes, beside a node dump.
        assert!(matches!(g.snapshot.operands, Some(Ok(_))));
    }
}
