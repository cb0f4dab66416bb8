//! The GPU Operator's must-gather bundle, as its script writes it (NVIDIA/gpu-operator,
//! `hack/must-gather.sh`): a folder, or a tarball of it (plain or gzip), read once, each
//! file bounded.
//!
//! Files read (the script's names; the tarball may put them under one folder):
//!
//! | file | what | how |
//! |---|---|---|
//! | `gpu_nodes.descr` | `kubectl describe nodes -l nvidia.com/gpu.present=true` text | line by line ([`parse_describe`]) |
//! | `cluster_policy.yaml` / `cluster_policy.missing` | the ClusterPolicy, or the mark that there is none | whole, at most [`MAX_SMALL`] |
//! | `gpu_operand_pods.yaml` | `kubectl get pods -oyaml` of the operator namespace | streamed, only the fields used kept |
//! | `gpu_operand_ds.yaml` | `kubectl get ds -oyaml` of the operator namespace | streamed, only the fields used kept |
//! | `gpu_operand_pod_<pod>.log`, `….previous.log`, `gpu_operator_pod.log` | `kubectl logs` | the last [`LOG_TAIL`] bytes only |
//! | `gpu_nodes.labels` | node names (lines without a leading `- `) | line by line |
//! | `must-gather.log` | the script's stdout | its `FATAL` lines |
//!
//! Nothing is read whole into memory but the ClusterPolicy: a 1 GB log costs
//! [`LOG_TAIL`] bytes (read from its end in a folder; streamed through in a tarball).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read, Seek};
use std::path::Path;

use serde_json::Value;

use crate::decode::clusterpolicy;
use crate::decode::document::{self, Keep, ListSink, Prune, ReadError, TopObject};
use crate::decode::limits::{self, Bounded};
use crate::decode::pods::{self, CONDITIONS, SPEC};
use crate::error::{Error, FieldError, Result};
use crate::model::node::{NodeInfo, Taint};
use crate::model::operator::PolicyStatus;
use crate::model::pod::PodInfo;
use crate::text;

/// How much of the end of each log is read: 64 KiB.
pub(crate) const LOG_TAIL: usize = 64 * 1024;

/// The largest ClusterPolicy file read (and the longest describe line kept): 16 MiB.
pub(crate) const MAX_SMALL: u64 = 16 * 1024 * 1024;

/// The longest line of describe text kept; the rest of a longer line is skipped.
const MAX_LINE: usize = 64 * 1024;

/// How many error lines of a log a report keeps (the last ones).
pub(crate) const ERROR_LINES: usize = 5;

/// The longest log line a report shows (characters, after escaping).
pub(crate) const LINE_CHARS: usize = 200;

/// One node of `gpu_nodes.descr`.
#[derive(Debug, Clone, Default)]
pub struct DescribedNode {
    /// Name, labels, taints, cordon, capacity and allocatable, as a node dump gives them.
    pub node: NodeInfo,
    /// The `Allocated resources` table's requests, per resource (quantity text).
    pub allocated: BTreeMap<String, String>,
    /// Sections kubectl always prints that this node's text lacks (`Capacity`,
    /// `Allocatable`, `Allocated resources`, `Events`: the last one missing means the text
    /// was cut short).
    pub missing: Vec<&'static str>,
}

/// The end of one log.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogTail {
    /// The log's size in bytes.
    pub bytes: u64,
    /// Not text (NUL bytes or mostly invalid UTF-8 in its end): no lines are shown.
    pub binary: bool,
    /// The last [`ERROR_LINES`] lines that look like errors (`error`, `fatal`, `fail`,
    /// `panic`, klog's `E0101` prefix), escaped and cut to [`LINE_CHARS`]; when none,
    /// the last lines.
    pub lines: Vec<String>,
    /// Whether `lines` are error lines (else the plain last lines).
    pub errors: bool,
}

/// What a report needs of one container status.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerState {
    /// Container name.
    pub name: String,
    /// `ready`.
    pub ready: bool,
    /// `restartCount`.
    pub restarts: u64,
    /// `state.waiting.reason` (e.g. `CrashLoopBackOff`) or `state.terminated.reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `lastState.terminated`: reason and exit code, e.g. `Error (exit 1)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_termination: Option<String>,
}

/// One pod of `gpu_operand_pods.yaml`.
#[derive(Debug, Clone, Default)]
pub struct OperandPod {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// The DaemonSet owning it (`metadata.ownerReferences[kind=DaemonSet].name`).
    pub daemonset: Option<String>,
    /// `metadata.labels.app`.
    pub app: Option<String>,
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// Containers and init containers.
    pub containers: Vec<ContainerState>,
    /// The pod as the analyses read it (for the GPU requests of a pending pod), when it
    /// converts and is not bound to a node nor finished (else `None`, to keep memory per
    /// pod small).
    pub info: Option<PodInfo>,
}

/// One DaemonSet of `gpu_operand_ds.yaml`.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperandDaemonSet {
    /// `metadata.name`.
    pub name: String,
    /// `status.desiredNumberScheduled`.
    pub desired: u64,
    /// `status.numberReady`.
    pub ready: u64,
    /// `status.numberAvailable`.
    pub available: u64,
    /// `status.numberMisscheduled`.
    pub misscheduled: u64,
    /// `spec.template.spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
}

/// Everything read from a bundle, and what did not read.
#[derive(Debug, Default)]
pub struct Bundle {
    /// The bundle as named.
    pub source: String,
    /// Base names of the files found.
    pub files: BTreeSet<String>,
    /// `cluster_policy.yaml`, when present and readable.
    pub policy: Option<PolicyStatus>,
    /// The nodes described.
    pub nodes: Vec<DescribedNode>,
    /// Node names listed in `gpu_nodes.labels` (the nodes with an NVIDIA PCI label).
    pub labelled_nodes: BTreeSet<String>,
    /// Operand pods.
    pub pods: Vec<OperandPod>,
    /// Operand DaemonSets.
    pub daemonsets: Vec<OperandDaemonSet>,
    /// Per pod name, the end of `gpu_operand_pod_<pod>.log`.
    pub logs: BTreeMap<String, LogTail>,
    /// Per pod name, the end of `gpu_operand_pod_<pod>.previous.log`.
    pub previous_logs: BTreeMap<String, LogTail>,
    /// The end of `gpu_operator_pod.log`.
    pub operator_log: Option<LogTail>,
    /// `FATAL` lines of `must-gather.log` (the script stopped there).
    pub fatal: Vec<String>,
    /// Files that are there but did not read, one line each (`<file>: <why>`).
    pub problems: Vec<String>,
}

/// Escapes control characters and cuts `s` to [`LINE_CHARS`] characters (`…` marks a cut).
pub(crate) fn clip(s: &str) -> String {
    let e = text::esc(s.trim_end());
    if e.chars().count() <= LINE_CHARS {
        return e;
    }
    let mut out: String = e.chars().take(LINE_CHARS).collect();
    out.push('…');
    out
}

/// Reads the lines of `r` with at most [`MAX_LINE`] bytes each (the rest of a longer line
/// is skipped), calling `on_line(number, text)`; stops at the first NUL byte (binary data),
/// returning its line number.
///
/// Errors: the I/O error of `r`.
fn for_each_line(
    mut r: impl BufRead,
    mut on_line: impl FnMut(usize, &str),
) -> std::io::Result<Option<usize>> {
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        let mut cut = false;
        loop {
            let avail = r.fill_buf()?;
            if avail.is_empty() {
                break;
            }
            let (take, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            let room = MAX_LINE.saturating_sub(buf.len());
            buf.extend_from_slice(&avail[..take.min(room)]);
            cut |= take > room;
            r.consume(take);
            if done {
                break;
            }
        }
        if buf.is_empty() && !cut {
            return Ok(None);
        }
        n += 1;
        if buf.contains(&0) {
            return Ok(Some(n));
        }
        let line = String::from_utf8_lossy(&buf);
        on_line(n, line.trim_end_matches(['\n', '\r']));
    }
}

/// The section of describe text being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Other,
    Labels,
    Taints,
    Capacity,
    Allocatable,
    Allocated,
}

/// A node being read from describe text.
struct Building {
    d: DescribedNode,
    seen: BTreeSet<&'static str>,
}

impl Building {
    fn finish(mut self) -> DescribedNode {
        for s in ["Capacity", "Allocatable", "Allocated resources", "Events"] {
            if !self.seen.contains(s) {
                self.d.missing.push(s);
            }
        }
        self.d
    }
}

/// A taint as `kubectl describe` prints it: `key=value:Effect` or `key:Effect`.
fn taint(s: &str) -> Option<Taint> {
    let (kv, effect) = s.rsplit_once(':')?;
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v.to_owned())),
        None => (kv, None),
    };
    (!key.is_empty()).then(|| Taint {
        key: key.to_owned(),
        value,
        effect: effect.to_owned(),
    })
}

/// Parses `kubectl describe node` text (one or more nodes, as kubectl prints them: each
/// starts with a `Name:` line at the left edge; top-level fields are `Key: value` at the
/// left edge, with continuation lines indented). Kept: `Labels` (`key=value` lines),
/// `Taints` (`key=value:Effect`), `Unschedulable`, `Capacity` and `Allocatable`
/// (`  name: quantity`), the `Allocated resources` table's requests. Text before the first
/// `Name:` is skipped; a node whose text lacks a section kubectl always prints gets it
/// in [`DescribedNode::missing`]. `problems` gets a line for binary data (reading stops
/// there).
///
/// Errors: the I/O error of `r`.
pub(crate) fn parse_describe(
    r: impl BufRead,
    name: &str,
    problems: &mut Vec<String>,
) -> std::io::Result<Vec<DescribedNode>> {
    let mut out = Vec::new();
    let mut cur: Option<Building> = None;
    let mut section = Section::Other;
    let mut too_many = false;
    let binary = for_each_line(r, |_, line| {
        if let Some(rest) = line.strip_prefix("Name:") {
            if too_many {
                return;
            }
            if let Some(b) = cur.take() {
                out.push(b.finish());
            }
            if limits::check_item(out.len()).is_err() {
                too_many = true;
                return;
            }
            cur = Some(Building {
                d: DescribedNode {
                    node: NodeInfo::named(rest.trim()),
                    ..Default::default()
                },
                seen: BTreeSet::new(),
            });
            section = Section::Other;
            return;
        }
        let Some(b) = cur.as_mut() else { return };
        let indented = line.starts_with([' ', '\t']);
        if !indented {
            let Some((key, value)) = line.split_once(':') else {
                section = Section::Other;
                return;
            };
            let value = value.trim();
            section = match key {
                "Labels" => Section::Labels,
                "Taints" => Section::Taints,
                "Capacity" => Section::Capacity,
                "Allocatable" => Section::Allocatable,
                "Allocated resources" => Section::Allocated,
                _ => Section::Other,
            };
            for s in ["Capacity", "Allocatable", "Allocated resources", "Events"] {
                if key == s {
                    b.seen.insert(s);
                }
            }
            match key {
                "Unschedulable" => b.d.node.unschedulable = value == "true",
                "Allocatable" => {
                    b.d.node.allocatable.get_or_insert_with(BTreeMap::new);
                }
                _ => {}
            }
            if matches!(section, Section::Labels | Section::Taints) && !value.is_empty() {
                add_item(b, section, value);
            }
            return;
        }
        let item = line.trim();
        if item.is_empty() {
            return;
        }
        match section {
            Section::Labels | Section::Taints => add_item(b, section, item),
            Section::Capacity | Section::Allocatable => {
                if let Some((k, v)) = item.split_once(':') {
                    let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
                    if section == Section::Capacity {
                        b.d.node.capacity.insert(k, v);
                    } else {
                        b.d.node
                            .allocatable
                            .get_or_insert_with(BTreeMap::new)
                            .insert(k, v);
                    }
                }
            }
            Section::Allocated => {
                let mut words = item.split_whitespace();
                if let (Some(res), Some(req)) = (words.next(), words.next())
                    && !item.starts_with('(')
                    && res != "Resource"
                    && !res.starts_with('-')
                {
                    b.d.allocated.insert(res.to_owned(), req.to_owned());
                }
            }
            Section::Other => {}
        }
    })?;
    if let Some(b) = cur.take() {
        out.push(b.finish());
    }
    if let Some(line) = binary {
        problems.push(format!(
            "{name}: binary data at line {line}: not `kubectl describe` text; read up to there"
        ));
    }
    Ok(out)
}

fn add_item(b: &mut Building, section: Section, item: &str) {
    if item == "<none>" {
        return;
    }
    match section {
        Section::Labels => {
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            b.d.node.labels.insert(k.to_owned(), v.to_owned());
        }
        Section::Taints => b.d.node.taints.extend(taint(item)),
        _ => {}
    }
}

/// Whether a log line looks like an error.
fn is_error_line(l: &str) -> bool {
    let lower = l.to_ascii_lowercase();
    let klog = {
        let b = l.as_bytes();
        b.len() > 5 && (b[0] == b'E' || b[0] == b'F') && b[1..5].iter().all(u8::is_ascii_digit)
    };
    klog || ["error", "fatal", "fail", "panic", "crashloop"]
        .iter()
        .any(|w| lower.contains(w))
}

/// Judges the end of a log: `tail` is its last bytes (at most [`LOG_TAIL`]), `bytes` its
/// size; `from_start` when `tail` is the whole log (else its first, partial line is
/// dropped).
pub(crate) fn log_tail(tail: &[u8], bytes: u64, from_start: bool) -> LogTail {
    let invalid = String::from_utf8_lossy(tail).matches('\u{fffd}').count();
    if tail.contains(&0) || invalid * 10 > tail.len().max(1) {
        return LogTail {
            bytes,
            binary: true,
            ..Default::default()
        };
    }
    let text = String::from_utf8_lossy(tail);
    let mut lines: Vec<&str> = text.lines().collect();
    if !from_start && !lines.is_empty() {
        lines.remove(0);
    }
    let errors: Vec<&str> = lines.iter().copied().filter(|l| is_error_line(l)).collect();
    let (pick, errors) = if errors.is_empty() {
        (lines, false)
    } else {
        (errors, true)
    };
    LogTail {
        bytes,
        binary: false,
        errors,
        lines: pick[pick.len().saturating_sub(ERROR_LINES)..]
            .iter()
            .map(|l| clip(l))
            .collect(),
    }
}

/// Reads the end of a stream: all of it passes, the last [`LOG_TAIL`] bytes are kept.
fn stream_tail(mut r: impl Read) -> std::io::Result<LogTail> {
    let mut keep: Vec<u8> = Vec::with_capacity(2 * LOG_TAIL);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        keep.extend_from_slice(&chunk[..n]);
        if keep.len() > 2 * LOG_TAIL {
            keep.drain(..keep.len() - LOG_TAIL);
        }
    }
    let start = keep.len().saturating_sub(LOG_TAIL);
    Ok(log_tail(&keep[start..], total, total as usize <= LOG_TAIL))
}

/// Reads the end of a file by seeking: the last [`LOG_TAIL`] bytes only.
fn file_tail(path: &Path) -> std::io::Result<LogTail> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(LOG_TAIL as u64);
    f.seek(std::io::SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity(LOG_TAIL);
    f.take(LOG_TAIL as u64).read_to_end(&mut buf)?;
    Ok(log_tail(&buf, len, start == 0))
}

/// What is kept of an operand pod.
const OPERAND_POD: Keep = Keep::Fields(&[
    ("kind", Keep::All),
    (
        "metadata",
        Keep::Fields(&[
            ("name", Keep::All),
            ("namespace", Keep::All),
            ("labels", Keep::All),
            (
                "ownerReferences",
                Keep::Each(&Keep::Fields(&[("kind", Keep::All), ("name", Keep::All)])),
            ),
        ]),
    ),
    ("spec", SPEC),
    (
        "status",
        Keep::Fields(&[
            ("phase", Keep::All),
            ("reason", Keep::All),
            ("message", Keep::All),
            ("conditions", CONDITIONS),
            ("containerStatuses", Keep::Each(&CONTAINER_STATUS)),
            ("initContainerStatuses", Keep::Each(&CONTAINER_STATUS)),
        ]),
    ),
]);

const CONTAINER_STATUS: Keep = Keep::Fields(&[
    ("name", Keep::All),
    ("ready", Keep::All),
    ("restartCount", Keep::All),
    ("state", Keep::All),
    ("lastState", Keep::All),
]);

const OPERAND_DS: Keep = Keep::Fields(&[
    ("kind", Keep::All),
    (
        "metadata",
        Keep::Fields(&[("name", Keep::All), ("namespace", Keep::All)]),
    ),
    (
        "spec",
        Keep::Fields(&[(
            "template",
            Keep::Fields(&[("spec", Keep::Fields(&[("nodeSelector", Keep::All)]))]),
        )]),
    ),
    ("status", Keep::All),
]);

/// A `kubectl get … -oyaml` List of operand pods or DaemonSets, read through the
/// streaming list reader every dump shares ([`crate::decode::document::read_list`]): each
/// item pruned to `keep` (at most 64 MiB each) and converted by `convert` as it is read,
/// so that memory follows the records kept, not the pruned objects.
struct KeptItems<T> {
    keep: Keep,
    convert: fn(&Value) -> T,
    out: Vec<T>,
}

impl<T> ListSink for KeptItems<T> {
    type Item = Value;
    type Seed = Prune;
    type Out = Vec<T>;

    fn seed(&self) -> Prune {
        Prune(self.keep)
    }

    fn top_field(&self, key: &str) -> Option<Keep> {
        (key == "kind").then_some(Keep::All)
    }

    fn names_kind(_: &Value) -> bool {
        true
    }

    fn item(
        &mut self,
        _index: usize,
        item: Value,
        _list_kind: Option<&str>,
    ) -> std::result::Result<(), ReadError> {
        self.out.push((self.convert)(&item));
        Ok(())
    }

    fn finish(self, top: TopObject) -> std::result::Result<Vec<T>, ReadError> {
        if top.saw_items || top.kind.is_some() {
            Ok(self.out)
        } else {
            Err(FieldError::object("no items: expected a List"))?
        }
    }
}

/// Streams a `kubectl get … -oyaml` List, returning its items pruned to `keep` and
/// converted by `convert`.
fn read_list<T>(
    r: impl Read,
    keep: Keep,
    convert: fn(&Value) -> T,
) -> std::result::Result<Vec<T>, ReadError> {
    let sink = KeptItems {
        keep,
        convert,
        out: Vec::new(),
    };
    document::read_list(r, "a List", MAX_OBJECT_MSG, sink)
}

/// Over [`crate::decode::document::MAX_OBJECT`] in one item.
const MAX_OBJECT_MSG: &str =
    "an object larger than 64 MiB (the API server stores at most ~1.5 MiB per object)";

fn s_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

fn u_at(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or(0)
}

fn operand_pod(v: &Value) -> OperandPod {
    let containers = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| v.pointer(p).and_then(Value::as_array))
        .flatten()
        .map(|c| ContainerState {
            name: s_at(c, "/name").unwrap_or("").to_owned(),
            ready: c.get("ready").and_then(Value::as_bool).unwrap_or(false),
            restarts: u_at(c, "/restartCount"),
            reason: s_at(c, "/state/waiting/reason")
                .or(s_at(c, "/state/terminated/reason"))
                .map(clip),
            last_termination: c.pointer("/lastState/terminated").map(|t| {
                format!(
                    "{} (exit {})",
                    clip(s_at(t, "/reason").unwrap_or("terminated")),
                    t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                )
            }),
        })
        .collect();
    let ready = v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    OperandPod {
        name: s_at(v, "/metadata/name").unwrap_or("").to_owned(),
        namespace: s_at(v, "/metadata/namespace").unwrap_or("").to_owned(),
        daemonset: v
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|o| {
                o.iter()
                    .find(|r| r.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
            })
            .and_then(|r| s_at(r, "/name"))
            .map(str::to_owned),
        app: s_at(v, "/metadata/labels/app").map(str::to_owned),
        node: s_at(v, "/spec/nodeName")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        phase: s_at(v, "/status/phase").map(str::to_owned),
        ready,
        containers,
        // Kept only for a pod not bound to a node (the report explains pending pods): a
        // bound pod's whole record would cost memory per pod for nothing.
        info: pods::from_object(v)
            .ok()
            .filter(|p| p.is_unbound() && !p.is_terminal()),
    }
}

fn operand_ds(v: &Value) -> OperandDaemonSet {
    OperandDaemonSet {
        name: s_at(v, "/metadata/name").unwrap_or("").to_owned(),
        desired: u_at(v, "/status/desiredNumberScheduled"),
        ready: u_at(v, "/status/numberReady"),
        available: u_at(v, "/status/numberAvailable"),
        misscheduled: u_at(v, "/status/numberMisscheduled"),
        node_selector: v
            .pointer("/spec/template/spec/nodeSelector")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Opens a regular file of a bundle's folder without following a link: the file must be
/// the one `lstat` saw (not a symbolic link, not swapped for one since).
///
/// Errors: the I/O error, or `InvalidData` for a link.
fn open_no_follow(p: &Path) -> std::io::Result<std::fs::File> {
    let link = || std::io::Error::new(std::io::ErrorKind::InvalidData, "a link: not read");
    let before = std::fs::symlink_metadata(p)?;
    if !before.file_type().is_file() {
        return Err(link());
    }
    let f = std::fs::File::open(p)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let after = f.metadata()?;
        if (after.dev(), after.ino()) != (before.dev(), before.ino()) {
            return Err(link());
        }
    }
    Ok(f)
}

/// Why a folder entry of a bundle is not read, when it is a link: a symbolic link (it may
/// point anywhere: a kubeconfig, a key) or a regular file with other hard links (one of
/// them may be outside the bundle). `None` for a regular file read as it is.
fn link_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    if meta.file_type().is_symlink() {
        return Some("a symbolic link");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.file_type().is_file() && meta.nlink() > 1 {
            return Some("a hard link (the file has other names)");
        }
    }
    None
}

/// The note for a link skipped in a bundle (the target is never named nor read).
fn skipped_link(base: &str, kind: &str) -> String {
    format!("{base}: {kind}: skipped (only the bundle's own regular files are read)")
}

/// How a file of the bundle is handed over: a file of a folder (seekable) or a tar member.
enum Member<'a> {
    File(&'a Path),
    Stream(&'a mut dyn Read),
}

impl Member<'_> {
    /// The member's bytes; a file of a folder is bounded by `--max-member-bytes` and counts
    /// toward `--max-input-bytes` (an archive's stream is bounded as a whole).
    fn reader(&mut self) -> std::io::Result<Box<dyn Read + '_>> {
        match self {
            Member::File(p) => Ok(Box::new(Bounded::file(open_no_follow(p)?))),
            Member::Stream(r) => Ok(Box::new(&mut **r)),
        }
    }
}

/// Reads one file of the bundle into `b` by its base name.
fn visit(b: &mut Bundle, base: &str, mut m: Member<'_>) {
    let fail = |b: &mut Bundle, why: String| b.problems.push(format!("{base}: {why}"));
    let log_of = |m: &mut Member<'_>| -> std::io::Result<LogTail> {
        match m {
            Member::File(p) => file_tail(p),
            Member::Stream(r) => stream_tail(&mut **r),
        }
    };
    match base {
        "gpu_nodes.descr" => {
            let r = match m.reader() {
                Ok(r) => r,
                Err(e) => return fail(b, e.to_string()),
            };
            let mut problems = Vec::new();
            match parse_describe(std::io::BufReader::new(r), base, &mut problems) {
                Ok(nodes) => b.nodes = nodes,
                Err(e) => fail(b, format!("cannot read: {e}")),
            }
            b.problems.extend(problems);
        }
        "gpu_nodes.labels" => {
            let r = match m.reader() {
                Ok(r) => r,
                Err(e) => return fail(b, e.to_string()),
            };
            let mut names = BTreeSet::new();
            let mut too_many = false;
            let res = for_each_line(std::io::BufReader::new(r), |_, l| {
                let l = l.trim();
                if too_many || l.is_empty() || l.starts_with('-') || l.contains('=') {
                    return;
                }
                // One name per node: a list as long as --max-items stops there.
                if limits::check_item(names.len()).is_err() {
                    too_many = true;
                    return;
                }
                names.insert(l.to_owned());
            });
            if let Err(e) = res {
                fail(b, format!("cannot read: {e}"));
            }
            b.labelled_nodes = names;
        }
        "cluster_policy.yaml" => {
            let mut text = String::new();
            let res = m
                .reader()
                .and_then(|r| r.take(MAX_SMALL + 1).read_to_string(&mut text));
            match res {
                Err(e) => fail(b, format!("cannot read: {e}")),
                Ok(n) if n as u64 > MAX_SMALL => fail(b, "larger than 16 MiB".into()),
                Ok(_) => match clusterpolicy::read_str(&text, base) {
                    Ok(p) => b.policy = Some(p),
                    Err(e) => b.problems.push(text::one_line(&e.to_string())),
                },
            }
        }
        "gpu_operand_pods.yaml" => {
            match m
                .reader()
                .map_err(|e| e.to_string())
                .and_then(|r| read_list(r, OPERAND_POD, operand_pod).map_err(|e| e.to_string()))
            {
                Ok(pods) => b.pods = pods,
                Err(e) => fail(b, text::one_line(&e)),
            }
        }
        "gpu_operand_ds.yaml" => {
            match m
                .reader()
                .map_err(|e| e.to_string())
                .and_then(|r| read_list(r, OPERAND_DS, operand_ds).map_err(|e| e.to_string()))
            {
                Ok(ds) => b.daemonsets = ds,
                Err(e) => fail(b, text::one_line(&e)),
            }
        }
        "gpu_operator_pod.log" => match log_of(&mut m) {
            Ok(t) => b.operator_log = Some(t),
            Err(e) => fail(b, format!("cannot read: {e}")),
        },
        "must-gather.log" => {
            let r = match m.reader() {
                Ok(r) => r,
                Err(e) => return fail(b, e.to_string()),
            };
            let mut fatal = Vec::new();
            let _ = for_each_line(std::io::BufReader::new(r), |_, l| {
                if l.contains("FATAL") && fatal.len() < ERROR_LINES {
                    fatal.push(clip(l));
                }
            });
            b.fatal = fatal;
        }
        _ => {
            if let Some(pod) = base
                .strip_prefix("gpu_operand_pod_")
                .and_then(|r| r.strip_suffix(".log"))
            {
                let (pod, previous) = match pod.strip_suffix(".previous") {
                    Some(p) => (p, true),
                    None => (pod, false),
                };
                match log_of(&mut m) {
                    Ok(t) if previous => {
                        b.previous_logs.insert(pod.to_owned(), t);
                    }
                    Ok(t) => {
                        b.logs.insert(pod.to_owned(), t);
                    }
                    Err(e) => fail(b, format!("cannot read: {e}")),
                }
            }
        }
    }
}

/// Reads a must-gather bundle: a folder as `hack/must-gather.sh` leaves it, or a tarball
/// of one (plain or gzip; members may sit under one folder). Files that do not read are
/// listed in [`Bundle::problems`], not errors; a tarball cut short keeps what came before.
///
/// Errors: [`Error::File`] (exit 2) when the path is neither a folder nor a tar archive,
/// or holds none of the script's files.
pub fn read(path: &Path) -> Result<Bundle> {
    limits::take_hit();
    let mut b = Bundle {
        source: path.display().to_string(),
        ..Default::default()
    };
    let meta = std::fs::metadata(path).map_err(|e| Error::read(path, e))?;
    if meta.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| Error::read(path, e))?
            .filter_map(|e| e.ok())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let base = e.file_name().to_string_lossy().into_owned();
            // Links are never followed: `symlink_metadata` does not, and a file is opened
            // only when it is still the regular file seen here.
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if let Some(kind) = link_kind(&meta) {
                b.problems.push(skipped_link(&base, kind));
                continue;
            }
            if !meta.file_type().is_file() {
                continue;
            }
            b.files.insert(base.clone());
            visit(&mut b, &base, Member::File(&p));
            if let Some(m) = limits::take_hit() {
                return Err(Error::file(path, format!("{}: {m}", text::esc(&base))));
            }
        }
    } else {
        let reader = Bounded::archive(document::open_maybe_gzip(path)?);
        let mut archive = tar::Archive::new(reader);
        let not_tar = |e: std::io::Error| {
            Error::file(
                path,
                format!(
                    "neither a folder nor a tar archive of a must-gather bundle: {}",
                    text::one_line(&e.to_string())
                ),
            )
        };
        let entries = archive.entries().map_err(not_tar)?;
        let mut any = false;
        let mut last: Option<String> = None;
        for entry in entries {
            let mut entry = match entry {
                Ok(e) => e,
                Err(e) if limits::limit_of(&e).is_some() || !any => {
                    limits::take_hit();
                    return Err(match limits::limit_of(&e) {
                        Some(m) => Error::file(path, m.to_owned()),
                        None => not_tar(e),
                    });
                }
                Err(e) => {
                    b.problems.push(format!(
                        "the archive is cut short or damaged after {} members{}: {}",
                        b.files.len(),
                        last.as_deref()
                            .map(|l| format!(" ({l}, the last one, may be incomplete)"))
                            .unwrap_or_default(),
                        text::one_line(&e.to_string())
                    ));
                    break;
                }
            };
            any = true;
            let base = match entry.path() {
                Ok(p) => p
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                Err(_) => continue,
            };
            match entry.header().entry_type() {
                tar::EntryType::Regular | tar::EntryType::Continuous => {}
                tar::EntryType::Symlink if !base.is_empty() => {
                    b.problems.push(skipped_link(&base, "a symbolic link"));
                    continue;
                }
                tar::EntryType::Link if !base.is_empty() => {
                    b.problems
                        .push(skipped_link(&base, "a hard link to another member"));
                    continue;
                }
                _ => continue,
            }
            if base.is_empty() {
                continue;
            }
            if let Err(m) = limits::check_member(entry.size()) {
                limits::take_hit();
                return Err(Error::file(path, format!("{}: {m}", text::esc(&base))));
            }
            b.files.insert(base.clone());
            visit(&mut b, &base, Member::Stream(&mut entry));
            if let Some(m) = limits::take_hit() {
                return Err(Error::file(path, format!("{}: {m}", text::esc(&base))));
            }
            last = Some(base);
        }
    }
    const KNOWN: [&str; 6] = [
        "gpu_nodes.descr",
        "cluster_policy.yaml",
        "cluster_policy.missing",
        "gpu_operand_pods.yaml",
        "gpu_operand_ds.yaml",
        "must-gather.log",
    ];
    if !b.files.iter().any(|f| KNOWN.contains(&f.as_str())) {
        // `gpuwl snapshot`'s file (its first member is `snapshot.json`): the commands that
        // read it take it as --snapshot.
        let hint = if b.files.contains("snapshot.json") {
            format!(
                "; it is a gpuwl snapshot file, which check, inventory, explain and kubevirt read: gpuwl check --snapshot {}",
                crate::text::esc(&path.display().to_string())
            )
        } else {
            String::new()
        };
        return Err(Error::file(
            path,
            format!(
                "no file of a GPU Operator must-gather bundle (gpu_nodes.descr, cluster_policy.yaml, gpu_operand_pods.yaml, …){hint}"
            ),
        ));
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESCR: &str = "Name:               gpu-a
Roles:              <none>
Labels:             beta.kubernetes.io/arch=amd64
                    nvidia.com/gpu.present=true
                    nvidia.com/gpu.workload.config=container
Annotations:        node.alpha.kubernetes.io/ttl: 0
Taints:             nvidia.com/gpu=present:NoSchedule
                    dedicated:NoExecute
Unschedulable:      true
Capacity:
  cpu:             32
  nvidia.com/gpu:  4
Allocatable:
  cpu:             31
  nvidia.com/gpu:  4
Non-terminated Pods:          (1 in total)
  Namespace  Name  CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------  ----  ------------  ----------  ---------------  -------------  ---
  default    p1    100m (0%)     0 (0%)      0 (0%)           0 (0%)         1m
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests   Limits
  --------           --------   ------
  cpu                100m (0%)  0 (0%)
  nvidia.com/gpu     2          2
Events:              <none>


Name:               gpu-b
Labels:             <none>
Capacity:
  nvidia.com/gpu:  2
";

    #[test]
    fn describe_text_gives_labels_taints_quantities_and_allocations() {
        let mut problems = Vec::new();
        let nodes = parse_describe(DESCR.as_bytes(), "d", &mut problems).unwrap();
        assert_eq!(nodes.len(), 2);
        let a = &nodes[0];
        assert_eq!(a.node.name, "gpu-a");
        assert_eq!(
            a.node.label("nvidia.com/gpu.workload.config"),
            Some("container")
        );
        assert_eq!(a.node.labels.len(), 3);
        assert_eq!(
            a.node.taints,
            vec![
                Taint {
                    key: "nvidia.com/gpu".into(),
                    value: Some("present".into()),
                    effect: "NoSchedule".into()
                },
                Taint {
                    key: "dedicated".into(),
                    value: None,
                    effect: "NoExecute".into()
                }
            ]
        );
        assert!(a.node.unschedulable);
        assert_eq!(a.node.capacity["nvidia.com/gpu"], "4");
        assert_eq!(a.node.allocatable.as_ref().unwrap()["cpu"], "31");
        assert_eq!(a.allocated["nvidia.com/gpu"], "2");
        assert_eq!(a.allocated["cpu"], "100m");
        assert_eq!(a.allocated.len(), 2);
        assert!(a.missing.is_empty(), "{:?}", a.missing);
        // gpu-b is cut short: no Allocatable, no table, no Events.
        let b = &nodes[1];
        assert!(b.node.labels.is_empty());
        assert_eq!(b.node.allocatable, None);
        assert_eq!(
            b.missing,
            vec!["Allocatable", "Allocated resources", "Events"]
        );
        assert!(problems.is_empty());
    }

    #[test]
    fn binary_describe_text_stops_with_a_problem() {
        let mut text = DESCR.as_bytes()[..200].to_vec();
        text.extend_from_slice(b"\n\0\0\x01garbage\n");
        let mut problems = Vec::new();
        let nodes = parse_describe(text.as_slice(), "gpu_nodes.descr", &mut problems).unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("binary data at line"), "{problems:?}");
    }

    #[test]
    fn log_tails_pick_error_lines_escape_and_cut() {
        let log = format!(
            "I0101 starting\nE0101 12:00 failed to init NVML: \x1b[31mdriver\nok line\n{}\nlast\n",
            "x".repeat(500)
        );
        let t = log_tail(log.as_bytes(), log.len() as u64, true);
        assert!(t.errors);
        assert_eq!(t.lines.len(), 1);
        assert_eq!(
            t.lines[0],
            "E0101 12:00 failed to init NVML: \\u{1b}[31mdriver"
        );
        let plain = log_tail(b"a\nb\n", 4, true);
        assert!(!plain.errors);
        assert_eq!(plain.lines, vec!["a", "b"]);
        let long = log_tail(format!("{}\n", "y".repeat(500)).as_bytes(), 501, true);
        assert_eq!(long.lines[0].chars().count(), LINE_CHARS + 1);
        assert!(log_tail(b"\x7fELF\0\0\x02", 7, true).binary);
        // Mid-file: the first, partial line is dropped.
        let mid = log_tail(b"ror: half\nwhole\n", 1 << 30, false);
        assert_eq!(mid.lines, vec!["whole"]);
    }

    #[test]
    fn stream_tail_keeps_only_the_end() {
        let mut data = vec![b'a'; 3 * LOG_TAIL];
        data.extend_from_slice(b"\nfatal: the end\n");
        let t = stream_tail(data.as_slice()).unwrap();
        assert_eq!(t.bytes, data.len() as u64);
        assert_eq!(t.lines, vec!["fatal: the end"]);
    }
}
