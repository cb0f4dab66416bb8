//! The data-source flags, defined once: [`SourceArgs`], flattened into every command that
//! reads a cluster (`check`, `explain`, `inventory`, `whatif relabel` / `plan`, `kubevirt
//! check` / `generate`).
//!
//! The flags are the node dump (`--nodes FILE`, `check`'s positional FILE), `--pods`,
//! `--cluster-policy`, `--dra`, the KubeVirt/HyperConverged CR (`--kubevirt FILE`; whatif's
//! `--kubevirt-cr FILE`, its `--kubevirt` being a switch), `--snapshot` and the live
//! cluster's ([`ClusterArgs`]). Each command takes only the parts it reads: a marker type
//! per command ([`CheckSource`], …) gives its [`Spec`], and [`SourceArgs`]' hand-written
//! [`clap::Args`] defines exactly those flags (a flag the command does not read is refused
//! by clap as unknown). Names, value names, help texts and the rules between the flags
//! (what conflicts with what, what needs what) are made here from the spec, in one place:
//!
//! - the node dump conflicts with `--kubeconfig` / `--context` (it stands for the cluster);
//! - `--snapshot` conflicts with the node dump, the cluster flags and every part not taken
//!   [`Take::BesideSnapshot`];
//! - a part taken [`Take::WithNodes`] needs the node dump;
//! - under [`Live::IfConfigured`] (`explain`) every file conflicts with `--kubeconfig` /
//!   `--context`: the live cluster is only read when no node or pod dump is given.

use std::marker::PhantomData;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches};

use crate::input::gather::Request;
use crate::input::live::ClusterArgs;
use gpuwl_core::decode::limits::Limits;

/// The reader limits (`--max-input-bytes`, `--max-member-bytes`, `--max-items`), flattened
/// into [`SourceArgs`] and `gpuwl triage`'s flags; the command line sets them for the whole
/// process before anything is read ([`LimitArgs::from_leaf`], `gpuwl_core::decode::limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct LimitArgs {
    /// The most bytes read from files, stdin and archives, all together, uncompressed
    /// (a gzip bomb stops here); K, M, G (×1024) suffixes allowed
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "8G",
          help_heading = "Reader limits")]
    pub max_input_bytes: u64,
    /// The most bytes of one file, stdin or archive member, uncompressed; K, M, G suffixes
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "4G",
          help_heading = "Reader limits")]
    pub max_member_bytes: u64,
    /// The most items of one list (nodes, pods, DRA objects, a bundle's operand pods or
    /// described nodes); the default fits a 5,000-node, 150,000-pod cluster twice
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.items,
          help_heading = "Reader limits")]
    pub max_items: u64,
}

impl Default for LimitArgs {
    fn default() -> LimitArgs {
        LimitArgs {
            max_input_bytes: Limits::DEFAULT.input_bytes,
            max_member_bytes: Limits::DEFAULT.member_bytes,
            max_items: Limits::DEFAULT.items,
        }
    }
}

impl LimitArgs {
    /// The limits these flags give.
    pub fn limits(&self) -> Limits {
        Limits {
            input_bytes: self.max_input_bytes,
            member_bytes: self.max_member_bytes,
            items: self.max_items,
        }
    }

    /// The limits of the innermost subcommand of `m` (`gpuwl kubevirt check` → `check`'s
    /// matches), when it takes the limit flags; `None` for a command that reads no file.
    pub fn from_leaf(m: &ArgMatches) -> Option<Limits> {
        let mut m = m;
        while let Some((_, sub)) = m.subcommand() {
            m = sub;
        }
        let get = |id: &str| m.try_get_one::<u64>(id).ok().flatten().copied();
        Some(Limits {
            input_bytes: get("max_input_bytes")?,
            member_bytes: get("max_member_bytes")?,
            items: get("max_items")?,
        })
    }
}

/// A byte count: digits with an optional `K`, `M`, `G` or `T` suffix (powers of 1024; `Ki`,
/// `KiB`, `KB` read the same).
///
/// Errors: not a count, or one that overflows 64 bits.
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches('B') {
        "" => 0,
        "K" | "KI" => 10,
        "M" | "MI" => 20,
        "G" | "GI" => 30,
        "T" | "TI" => 40,
        _ => return Err("expected a byte count such as 512M or 8G".into()),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| "expected a byte count such as 512M or 8G".to_string())?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| "too large for 64 bits".to_string())
}

/// A part of the data source a command may take as a file, beside the node dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// `--pods FILE`: a pod dump.
    Pods,
    /// `--cluster-policy FILE`: the GPU Operator's ClusterPolicy.
    ClusterPolicy,
    /// `--dra FILE`: DRA objects.
    Dra,
    /// `--kubevirt FILE`: the KubeVirt or HyperConverged CR.
    Kubevirt,
    /// The same CR as `--kubevirt-cr FILE` (`whatif` and `plan`, whose `--kubevirt` is a
    /// switch).
    KubevirtCr,
    /// `--kueue FILE`: Kueue's ResourceFlavors, ClusterQueues, LocalQueues, Workloads.
    Kueue,
}

/// How a command takes a [`Part`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Beside the node dump, or in place of what the live cluster holds.
    Plain,
    /// Only with the node dump (`inventory`'s and `whatif`'s `--pods`, `whatif`'s
    /// `--kubevirt-cr`).
    WithNodes,
    /// As [`Take::Plain`], and beside `--snapshot` too, in place of its part (`check`'s
    /// `--pods`; `kubevirt generate`'s `--kubevirt`: a snapshot keeps the list, not the CR).
    BesideSnapshot,
}

/// How the node dump is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeDump {
    /// `--nodes FILE`.
    Flag,
    /// A positional FILE (`check`).
    Positional,
}

/// When the live cluster is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// Whenever no node dump (nor snapshot file) is given; the files given replace the
    /// parts they hold.
    Always,
    /// `explain`: only when neither a node nor a pod dump is given and a cluster is
    /// configured ([`ClusterArgs::configured`]); else the files alone (no node data without
    /// a node dump). Every file conflicts with `--kubeconfig` / `--context`.
    IfConfigured,
}

/// The data-source flags of one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// How the node dump is given.
    pub(crate) nodes: NodeDump,
    /// A part the node dump is refused without (`kubevirt check`: `--kubevirt`, the list a
    /// node dump is checked against).
    pub(crate) nodes_need: Option<Part>,
    /// The parts taken, in the order of the help.
    pub(crate) parts: &'static [(Part, Take)],
    /// When the live cluster is read.
    pub live: Live,
}

impl Spec {
    /// How the command takes `part`, when it does.
    pub(crate) fn take(&self, part: Part) -> Option<Take> {
        self.parts.iter().find(|(p, _)| *p == part).map(|(_, t)| *t)
    }

    /// The file flags, as a message names them: the node dump, then the parts.
    pub fn file_flags(&self) -> Vec<&'static str> {
        let nodes = match self.nodes {
            NodeDump::Flag => "--nodes",
            NodeDump::Positional => "the node dump",
        };
        std::iter::once(nodes)
            .chain(self.parts.iter().map(|(p, _)| long(*p)))
            .collect()
    }
}

/// The flags a command takes: its marker type names its [`Spec`].
pub trait Takes {
    /// The flags.
    const SPEC: &'static Spec;
}

/// `gpuwl check`: FILE, `--cluster-policy`, `--dra`, `--pods` (also beside `--snapshot`).
#[derive(Debug, Clone, Copy)]
pub struct CheckSource;

impl Takes for CheckSource {
    const SPEC: &'static Spec = &Spec {
        nodes: NodeDump::Positional,
        nodes_need: None,
        parts: &[
            (Part::Pods, Take::BesideSnapshot),
            (Part::ClusterPolicy, Take::Plain),
            (Part::Dra, Take::Plain),
            (Part::Kueue, Take::BesideSnapshot),
        ],
        live: Live::Always,
    };
}

/// `gpuwl explain`: every part, files and the live cluster apart.
#[derive(Debug, Clone, Copy)]
pub struct ExplainSource;

impl Takes for ExplainSource {
    const SPEC: &'static Spec = &Spec {
        nodes: NodeDump::Flag,
        nodes_need: None,
        parts: &[
            (Part::Pods, Take::Plain),
            (Part::ClusterPolicy, Take::Plain),
            (Part::Dra, Take::Plain),
            (Part::Kubevirt, Take::Plain),
            (Part::Kueue, Take::Plain),
        ],
        live: Live::IfConfigured,
    };
}

/// `gpuwl inventory`: `--pods` and `--kubevirt-cr` (which judges the VMIs and VMs of the
/// pod dump) with `--nodes`, `--cluster-policy`, `--dra`; `--kueue` (also beside
/// `--snapshot`).
#[derive(Debug, Clone, Copy)]
pub struct InventorySource;

impl Takes for InventorySource {
    const SPEC: &'static Spec = &Spec {
        nodes: NodeDump::Flag,
        nodes_need: None,
        parts: &[
            (Part::Pods, Take::WithNodes),
            (Part::ClusterPolicy, Take::Plain),
            (Part::Dra, Take::Plain),
            (Part::KubevirtCr, Take::WithNodes),
            (Part::Kueue, Take::BesideSnapshot),
        ],
        live: Live::Always,
    };
}

/// `gpuwl whatif relabel` and `gpuwl plan`: `--pods` and `--kubevirt-cr` with `--nodes`,
/// `--cluster-policy`.
#[derive(Debug, Clone, Copy)]
pub struct TwinSource;

impl Takes for TwinSource {
    const SPEC: &'static Spec = &Spec {
        nodes: NodeDump::Flag,
        nodes_need: None,
        parts: &[
            (Part::Pods, Take::WithNodes),
            (Part::ClusterPolicy, Take::Plain),
            (Part::KubevirtCr, Take::WithNodes),
        ],
        live: Live::Always,
    };
}

/// `gpuwl kubevirt check`: `--nodes` (with `--kubevirt`), `--kubevirt`.
#[derive(Debug, Clone, Copy)]
pub struct KubevirtCheckSource;

impl Takes for KubevirtCheckSource {
    const SPEC: &'static Spec = &Spec {
        nodes: NodeDump::Flag,
        nodes_need: Some(Part::Kubevirt),
        parts: &[(Part::Kubevirt, Take::Plain)],
        live: Live::Always,
    };
}

/// `gpuwl kubevirt generate`: `--nodes`, `--kubevirt` (also beside `--snapshot`).
#[derive(Debug, Clone, Copy)]
pub struct KubevirtGenerateSource;

impl Takes for KubevirtGenerateSource {
    const SPEC: &'static Spec = &Spec {
        nodes: NodeDump::Flag,
        nodes_need: None,
        parts: &[(Part::Kubevirt, Take::BesideSnapshot)],
        live: Live::Always,
    };
}

/// The data source of a command: the files of the parts its marker `T` takes, a `gpuwl
/// snapshot` file, the live cluster. A part `T` does not take is always `None`.
#[derive(Debug, Clone)]
pub struct SourceArgs<T> {
    /// The node dump (`--nodes`, `check`'s positional FILE); `-` is stdin.
    pub nodes: Option<PathBuf>,
    /// `--pods`.
    pub pods: Option<PathBuf>,
    /// `--cluster-policy`.
    pub cluster_policy: Option<PathBuf>,
    /// `--dra`.
    pub dra: Option<PathBuf>,
    /// The KubeVirt/HyperConverged CR (`--kubevirt FILE`, `--kubevirt-cr`).
    pub kubevirt: Option<PathBuf>,
    /// `--kueue`.
    pub kueue: Option<PathBuf>,
    /// `--snapshot`.
    pub snapshot: Option<PathBuf>,
    /// Where the live cluster is.
    pub live: ClusterArgs,
    /// The reader limits (set for the process by the command line).
    pub limits: LimitArgs,
    takes: PhantomData<T>,
}

impl<T: Takes> SourceArgs<T> {
    /// The data source these flags name, for [`crate::input::gather::gather`].
    pub fn request(&self) -> Request<'_> {
        Request {
            nodes: self.nodes.as_ref(),
            pods: self.pods.as_ref(),
            cluster_policy: self.cluster_policy.as_ref(),
            dra: self.dra.as_ref(),
            kubevirt: self.kubevirt.as_ref(),
            kueue: self.kueue.as_ref(),
            snapshot: self.snapshot.as_ref(),
            live: &self.live,
            spec: T::SPEC,
            object: None,
        }
    }

    /// Whether any file of the data source (a dump, a CR, a snapshot file) was given.
    pub fn any_file(&self) -> bool {
        [
            &self.nodes,
            &self.pods,
            &self.cluster_policy,
            &self.dra,
            &self.kubevirt,
            &self.kueue,
            &self.snapshot,
        ]
        .iter()
        .any(|f| f.is_some())
    }
}

/// Arg ids (the cluster flags' are [`ClusterArgs`]' field names).
const NODES: &str = "nodes";
const SNAPSHOT: &str = "snapshot";
const LIVE_IDS: [&str; 2] = ["kubeconfig", "context"];

/// The arg id of `part` (both spellings of the CR are one id: `whatif`'s `--kubevirt`
/// switch is its own flag).
fn id(part: Part) -> &'static str {
    match part {
        Part::Pods => "pods",
        Part::ClusterPolicy => "cluster_policy",
        Part::Dra => "dra",
        Part::Kubevirt | Part::KubevirtCr => "kubevirt_cr",
        Part::Kueue => "kueue",
    }
}

/// The long flag of `part`, with its dashes.
fn long(part: Part) -> &'static str {
    match part {
        Part::Pods => "--pods",
        Part::ClusterPolicy => "--cluster-policy",
        Part::Dra => "--dra",
        Part::Kubevirt => "--kubevirt",
        Part::KubevirtCr => "--kubevirt-cr",
        Part::Kueue => "--kueue",
    }
}

/// What the file of `part` is (the first sentence of its help).
fn about(part: Part) -> &'static str {
    match part {
        Part::Pods => {
            "Pod dump (`kubectl get pods -A -o json|yaml`; KubeVirt VMIs and VMs in it too): the pods \
             that hold or wait for GPUs, and the GPU Operator's operand pods; `-` reads stdin"
        }
        Part::ClusterPolicy => {
            "The GPU Operator's ClusterPolicy (`kubectl get clusterpolicies -o yaml`), for the \
             workload config the operator applies to each node; `-` reads stdin"
        }
        Part::Dra => {
            "DRA objects (`kubectl get deviceclasses,resourceslices,resourceclaims -A -o \
             json|yaml`): the devices NVIDIA's DRA driver publishes, their DeviceClasses and the \
             claims on them; `-` reads stdin"
        }
        Part::Kubevirt | Part::KubevirtCr => {
            "The KubeVirt or HyperConverged CR (`kubectl get kubevirt -A -o yaml`), JSON or YAML, \
             kind detected: its permittedHostDevices; `-` reads stdin"
        }
        Part::Kueue => {
            "Kueue's objects (`kubectl get resourceflavors,clusterqueues,localqueues,workloads \
             -A -o yaml`): the quota layer, its flavors judged against the nodes; `-` reads stdin"
        }
    }
}

/// What the live cluster or a snapshot holds of `part`, as the help names it.
fn noun(part: Part) -> &'static str {
    match part {
        Part::Pods => "pods",
        Part::ClusterPolicy => "ClusterPolicy",
        Part::Dra => "DRA objects",
        Part::Kubevirt | Part::KubevirtCr => "permittedHostDevices",
        Part::Kueue => "Kueue objects",
    }
}

/// Where `part` comes from without its file (`None`: it depends on the command, whose help
/// says it).
fn without(part: Part, take: Take) -> Option<String> {
    let snapshot = match take {
        Take::BesideSnapshot => "",
        _ => ", or the snapshot's",
    };
    match part {
        Part::Pods => None,
        Part::ClusterPolicy => Some(format!(
            "the live cluster's{snapshot}; beside a node dump, inferred from the nodes' \
             gpu.deploy labels"
        )),
        Part::Dra => Some(format!(
            "listed from the live cluster when it serves resource.k8s.io/v1{snapshot}"
        )),
        Part::Kubevirt | Part::KubevirtCr => Some(format!(
            "the live cluster's (the HyperConverged CR when there is one, else the KubeVirt \
             CR){snapshot}"
        )),
        Part::Kueue => Some(format!(
            "listed from the live cluster when it serves {}{snapshot}",
            "kueue.x-k8s.io"
        )),
    }
}

/// The help of `part` as `spec` takes it: [`about`], how it stands beside the live
/// cluster and a snapshot, and where it comes from without the file.
fn part_help(spec: &Spec, part: Part, take: Take) -> String {
    let mut s = about(part).to_string();
    match (take, spec.live, part) {
        (Take::WithNodes, _, _) => return s + ". Needs --nodes",
        (_, Live::IfConfigured, Part::Pods) => {
            s.push_str(". With it, as with --nodes, the live cluster is not read")
        }
        _ => s.push_str(&format!(". Live: in place of the cluster's {}", noun(part))),
    }
    if take == Take::BesideSnapshot {
        s.push_str(&format!(
            "; with --snapshot, in place of its {}",
            noun(part)
        ));
    }
    if let Some(w) = without(part, take) {
        s.push_str(&format!(". Without it: {w}"));
    }
    s
}

/// The help of the node dump.
fn nodes_help(spec: &Spec) -> String {
    let mut s = String::from(
        "Node dump: `kubectl get nodes -o json|yaml`, a List, NodeList or one Node, in JSON or \
         YAML detected by content; `-` reads stdin. Omitted: ",
    );
    s.push_str(match spec.live {
        Live::Always => "the live cluster",
        Live::IfConfigured => {
            "without --pods either, the live cluster when a kubeconfig is there, else no node \
             data"
        }
    });
    if let Some(p) = spec.nodes_need {
        s.push_str(&format!(". Needs {}", long(p)));
    }
    s
}

/// The help of `--snapshot`: what it stands in place of, and what may be given beside it.
fn snapshot_help(spec: &Spec) -> String {
    let mut instead = vec![match spec.nodes {
        NodeDump::Flag => "--nodes",
        NodeDump::Positional => "the node dump",
    }];
    let mut beside = Vec::new();
    for (p, t) in spec.parts {
        match t {
            Take::BesideSnapshot => beside.push(long(*p)),
            _ => instead.push(long(*p)),
        }
    }
    let mut s = format!(
        "A `gpuwl snapshot` file in place of {} (no cluster is contacted)",
        and_list(&instead)
    );
    if !beside.is_empty() {
        s.push_str(&format!("; {} may be given with it", and_list(&beside)));
    }
    s
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A flag (or, `positional`, an argument) that takes a FILE.
fn file_arg(id: &'static str, long: Option<&'static str>, help: String) -> Arg {
    let arg = Arg::new(id)
        .value_name("FILE")
        .value_parser(clap::value_parser!(PathBuf))
        .action(ArgAction::Set)
        .help(help);
    match long {
        Some(l) => arg.long(l.trim_start_matches('-')),
        None => arg,
    }
}

impl<T: Takes> clap::Args for SourceArgs<T> {
    fn augment_args(cmd: Command) -> Command {
        let spec = T::SPEC;
        let nodes_long = match spec.nodes {
            NodeDump::Flag => Some("--nodes"),
            NodeDump::Positional => None,
        };
        let mut nodes = file_arg(NODES, nodes_long, nodes_help(spec)).conflicts_with_all(LIVE_IDS);
        if let Some(p) = spec.nodes_need {
            nodes = nodes.requires(id(p));
        }
        let mut cmd = cmd.arg(nodes);
        for &(part, take) in spec.parts {
            let mut arg = file_arg(id(part), Some(long(part)), part_help(spec, part, take));
            if take == Take::WithNodes {
                arg = arg.requires(NODES);
            }
            if spec.live == Live::IfConfigured {
                arg = arg.conflicts_with_all(LIVE_IDS);
            }
            cmd = cmd.arg(arg);
        }
        let instead = std::iter::once(NODES).chain(
            spec.parts
                .iter()
                .filter(|(_, t)| *t != Take::BesideSnapshot)
                .map(|(p, _)| id(*p)),
        );
        cmd = cmd.arg(
            file_arg(SNAPSHOT, Some("--snapshot"), snapshot_help(spec))
                .conflicts_with_all(instead.chain(LIVE_IDS)),
        );
        let cmd = <ClusterArgs as clap::Args>::augment_args(cmd);
        <LimitArgs as clap::Args>::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<T: Takes> FromArgMatches for SourceArgs<T> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let spec = T::SPEC;
        let file = |id: &str| m.get_one::<PathBuf>(id).cloned();
        let part = |p: Part| spec.take(p).and_then(|_| file(id(p)));
        Ok(SourceArgs {
            nodes: file(NODES),
            pods: part(Part::Pods),
            cluster_policy: part(Part::ClusterPolicy),
            dra: part(Part::Dra),
            kubevirt: part(Part::Kubevirt).or_else(|| part(Part::KubevirtCr)),
            kueue: part(Part::Kueue),
            snapshot: file(SNAPSHOT),
            live: ClusterArgs::from_arg_matches(m)?,
            limits: LimitArgs::from_arg_matches(m)?,
            takes: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        let new = Self::from_arg_matches(m)?;
        let keep = |old: &mut Option<PathBuf>, new: Option<PathBuf>| {
            if new.is_some() {
                *old = new;
            }
        };
        keep(&mut self.nodes, new.nodes);
        keep(&mut self.pods, new.pods);
        keep(&mut self.cluster_policy, new.cluster_policy);
        keep(&mut self.dra, new.dra);
        keep(&mut self.kubevirt, new.kubevirt);
        keep(&mut self.kueue, new.kueue);
        keep(&mut self.snapshot, new.snapshot);
        self.limits = new.limits;
        self.live.update_from_arg_matches(m)
    }
}

#[cfg(test)]
mod tests {
    use clap::Args as _;
    use clap::error::ErrorKind;

    use super::*;

    /// The command `T`'s flags make (checked by clap's debug assertions).
    fn command<T: Takes>() -> Command {
        let cmd = SourceArgs::<T>::augment_args(Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        cmd
    }

    /// `argv` parsed as `T`'s flags.
    fn parse<T: Takes>(argv: &[&str]) -> std::result::Result<SourceArgs<T>, ErrorKind> {
        let m = command::<T>()
            .try_get_matches_from(argv)
            .map_err(|e| e.kind())?;
        SourceArgs::<T>::from_arg_matches(&m).map_err(|e| e.kind())
    }

    /// How clap refuses `argv` as `T`'s flags (`None`: accepted).
    fn refused<T: Takes>(argv: &[&str]) -> Option<ErrorKind> {
        parse::<T>(argv).err()
    }

    /// Every flag a command may take.
    const FLAGS: [&str; 6] = [
        "--nodes",
        "--pods",
        "--cluster-policy",
        "--dra",
        "--kubevirt",
        "--kubevirt-cr",
    ];

    /// The flags of [`FLAGS`] that `T` accepts, alone or (when it needs it) with `--nodes`;
    /// a refused one must be unknown, never accepted and ignored.
    fn accepted<T: Takes>() -> Vec<&'static str> {
        let mut out = Vec::new();
        for flag in FLAGS {
            let parsed = match parse::<T>(&[flag, "f"]) {
                Err(ErrorKind::MissingRequiredArgument) if flag != "--nodes" => {
                    parse::<T>(&[flag, "f", "--nodes", "n"])
                }
                r => r,
            };
            match parsed {
                Ok(_) => out.push(flag),
                // kubevirt check's node dump alone: it needs --kubevirt.
                Err(ErrorKind::UnknownArgument | ErrorKind::MissingRequiredArgument) => {}
                Err(e) => panic!("{flag}: {e:?}"),
            }
        }
        out
    }

    #[test]
    fn each_command_takes_only_the_flags_it_reads() {
        assert_eq!(
            accepted::<CheckSource>(),
            ["--pods", "--cluster-policy", "--dra"]
        );
        assert_eq!(
            accepted::<ExplainSource>(),
            [
                "--nodes",
                "--pods",
                "--cluster-policy",
                "--dra",
                "--kubevirt"
            ]
        );
        assert_eq!(
            accepted::<InventorySource>(),
            [
                "--nodes",
                "--pods",
                "--cluster-policy",
                "--dra",
                "--kubevirt-cr"
            ]
        );
        assert_eq!(
            accepted::<TwinSource>(),
            ["--nodes", "--pods", "--cluster-policy", "--kubevirt-cr"]
        );
        assert_eq!(
            accepted::<KubevirtGenerateSource>(),
            ["--nodes", "--kubevirt"]
        );
        // kubevirt check's --nodes needs --kubevirt, so alone it is refused as such.
        assert_eq!(accepted::<KubevirtCheckSource>(), ["--kubevirt"]);
        assert!(parse::<KubevirtCheckSource>(&["--nodes", "n", "--kubevirt", "k"]).is_ok());
        // check's node dump is positional; nobody else takes a positional.
        let c = parse::<CheckSource>(&["nodes.json"]).unwrap();
        assert_eq!(c.nodes, Some(PathBuf::from("nodes.json")));
        assert_eq!(
            parse::<InventorySource>(&["nodes.json"]).unwrap_err(),
            ErrorKind::UnknownArgument
        );
        // Every command takes --snapshot and the cluster flags.
        let s = parse::<TwinSource>(&["--snapshot", "s.tar", "--request-timeout", "5"]).unwrap();
        assert_eq!(s.snapshot, Some(PathBuf::from("s.tar")));
        assert_eq!(s.live.request_timeout, 5);
    }

    #[test]
    fn each_file_lands_in_its_field() {
        let e = parse::<ExplainSource>(&[
            "--nodes",
            "n",
            "--pods",
            "p",
            "--cluster-policy",
            "c",
            "--dra",
            "d",
            "--kubevirt",
            "k",
        ])
        .unwrap();
        let r = e.request();
        let shown = |p: Option<&PathBuf>| p.map(|p| p.display().to_string());
        assert_eq!(
            [
                r.nodes,
                r.pods,
                r.cluster_policy,
                r.dra,
                r.kubevirt,
                r.snapshot
            ]
            .map(shown),
            [Some("n"), Some("p"), Some("c"), Some("d"), Some("k"), None]
                .map(|s| s.map(str::to_string))
        );
        assert_eq!(r.spec, ExplainSource::SPEC);
        assert!(e.any_file());
        // whatif's --kubevirt-cr is the CR file.
        let w = parse::<TwinSource>(&["--nodes", "n", "--kubevirt-cr", "k"]).unwrap();
        assert_eq!(w.kubevirt, Some(PathBuf::from("k")));
        // Nothing given: the live cluster, with the default timeout.
        let l = parse::<InventorySource>(&["--context", "prod"]).unwrap();
        assert!(!l.any_file());
        assert_eq!(l.live.context.as_deref(), Some("prod"));
        assert_eq!(l.live.request_timeout, 30);
    }

    #[test]
    fn the_rules_between_the_flags() {
        use ErrorKind::{ArgumentConflict as Conflict, MissingRequiredArgument as Missing};
        // A snapshot file stands for the node dump and the cluster, everywhere.
        assert_eq!(
            refused::<CheckSource>(&["n", "--snapshot", "s"]),
            Some(Conflict)
        );
        assert_eq!(
            refused::<KubevirtGenerateSource>(&["--snapshot", "s", "--context", "x"]),
            Some(Conflict)
        );
        // The node dump stands for the cluster.
        assert_eq!(
            refused::<InventorySource>(&["--nodes", "n", "--kubeconfig", "k"]),
            Some(Conflict)
        );
        // Beside a snapshot: check's --pods and generate's --kubevirt only.
        assert_eq!(
            refused::<CheckSource>(&["--snapshot", "s", "--pods", "p"]),
            None
        );
        assert_eq!(
            refused::<CheckSource>(&["--snapshot", "s", "--dra", "d"]),
            Some(Conflict)
        );
        assert_eq!(
            refused::<KubevirtGenerateSource>(&["--snapshot", "s", "--kubevirt", "k"]),
            None
        );
        assert_eq!(
            refused::<KubevirtCheckSource>(&["--snapshot", "s", "--kubevirt", "k"]),
            Some(Conflict)
        );
        // whatif's --kubevirt-cr was accepted and ignored beside --snapshot: now refused.
        assert_eq!(
            refused::<TwinSource>(&["--snapshot", "s", "--kubevirt-cr", "k"]),
            Some(Conflict)
        );
        // Files beside the live cluster replace its parts, but explain's files are offline.
        assert_eq!(
            refused::<InventorySource>(&["--dra", "d", "--context", "x"]),
            None
        );
        assert_eq!(
            refused::<CheckSource>(&["--pods", "p", "--context", "x"]),
            None
        );
        for flag in ["--pods", "--cluster-policy", "--dra", "--kubevirt"] {
            assert_eq!(
                refused::<ExplainSource>(&[flag, "f", "--context", "x"]),
                Some(Conflict),
                "{flag}"
            );
        }
        // What needs the node dump, and kubevirt check's node dump that needs the CR.
        assert_eq!(refused::<InventorySource>(&["--pods", "p"]), Some(Missing));
        assert_eq!(
            refused::<TwinSource>(&["--kubevirt-cr", "k"]),
            Some(Missing)
        );
        assert_eq!(
            refused::<KubevirtCheckSource>(&["--nodes", "n"]),
            Some(Missing)
        );
    }

    #[test]
    fn the_reader_limits_parse_with_units_and_default_to_the_core_s() {
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        let d = parse::<CheckSource>(&["n"]).unwrap();
        assert_eq!(d.limits.limits(), Limits::DEFAULT);
        let l = parse::<InventorySource>(&[
            "--max-items",
            "10",
            "--max-member-bytes",
            "1M",
            "--max-input-bytes",
            "2M",
        ])
        .unwrap();
        assert_eq!(
            l.limits.limits(),
            Limits {
                input_bytes: 2 << 20,
                member_bytes: 1 << 20,
                items: 10
            }
        );
        let m = command::<CheckSource>()
            .try_get_matches_from(["--max-items", "7"])
            .unwrap();
        assert_eq!(LimitArgs::from_leaf(&m).map(|l| l.items), Some(7));
        let none = Command::new("t")
            .no_binary_name(true)
            .get_matches_from(Vec::<&str>::new());
        assert_eq!(LimitArgs::from_leaf(&none), None);
    }

    #[test]
    fn the_help_is_made_from_the_spec() {
        let help = |cmd: &Command, id: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        let check = command::<CheckSource>();
        assert!(
            check.get_positionals().any(|a| a.get_id() == NODES),
            "check's node dump is positional"
        );
        assert_eq!(
            help(&check, SNAPSHOT),
            "A `gpuwl snapshot` file in place of the node dump, --cluster-policy and --dra (no \
             cluster is contacted); --pods and --kueue may be given with it"
        );
        assert!(help(&check, "pods").ends_with("; with --snapshot, in place of its pods"));
        let twin = command::<TwinSource>();
        assert_eq!(
            help(&twin, SNAPSHOT),
            "A `gpuwl snapshot` file in place of --nodes, --pods, --cluster-policy and \
             --kubevirt-cr (no cluster is contacted)"
        );
        assert!(help(&twin, "pods").ends_with(". Needs --nodes"));
        let kc = command::<KubevirtCheckSource>();
        assert!(help(&kc, NODES).ends_with("Omitted: the live cluster. Needs --kubevirt"));
        let explain = command::<ExplainSource>();
        assert!(help(&explain, "pods").contains("the live cluster is not read"));
        assert!(help(&explain, NODES).contains("when a kubeconfig is there"));
        // One text per part: the ClusterPolicy reads the same wherever it is taken as plain.
        assert_eq!(
            help(&explain, "cluster_policy"),
            help(&command::<InventorySource>(), "cluster_policy")
        );
    }
}
