//! Errors and the exit codes scripts can rely on.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success; for `check`: every labelled node agrees (`OK=<n>`) |
//! | 1 | `check` found at least one `MISMATCH=` line; `relabel` refused or a wait timed out (the node stays cordoned) |
//! | 2 | bad input or usage: unreadable/invalid file, bad flag (nothing on stdout) |
//! | 3 | environment or cluster failure: API unreachable, control plane won't start, a lab step failed |

use crate::text;
use std::process::ExitCode;

/// Exit statuses of every gpuwl command (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: success.
    Ok = 0,
    /// 1: the check found mismatches (and the like: `relabel` refused or stopped).
    Mismatch = 1,
    /// 2: bad input or usage.
    BadInput = 2,
    /// 3: cluster, control-plane or other runtime failure.
    Runtime = 3,
    /// 130: stopped by SIGINT or SIGTERM (the shell's 128 + SIGINT), after gpuwl cleaned up
    /// what it had started.
    Interrupted = 130,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

/// A boxed underlying error kept as a [`std::error::Error::source`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The name of the local control plane when `--name` is not given (`gpuwl cluster`): the
/// messages leave `--name` out for it.
pub const DEFAULT_CLUSTER_NAME: &str = "gpuwl";

/// A field of an object (a node, pod or custom resource, in a file or from the cluster)
/// that is not what it should be: `field` is its path (`spec.containers[0].resources`),
/// empty for a problem with the object as a whole (its `kind`). Shown `<field>: <problem>`.
/// Readers return it without the file or object name; [`Error::field`] adds where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path; empty for the whole object.
    pub field: String,
    /// What is wrong, one line (values already cut).
    pub problem: String,
}

impl FieldError {
    /// `field`: `problem`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// A problem with the object as a whole (no field path).
    pub fn object(problem: impl Into<String>) -> FieldError {
        FieldError::new(String::new(), problem)
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.problem)
        } else {
            write!(f, "{}: {}", self.field, self.problem)
        }
    }
}

impl std::error::Error for FieldError {}

impl From<FieldError> for String {
    /// The `<field>: <problem>` text, for readers that still build string messages.
    fn from(e: FieldError) -> String {
        e.to_string()
    }
}

/// A failure that ends a command. `Display` is the one-line message printed on stderr
/// after `gpuwl: `; [`Error::exit_status`] maps each variant to one of the two failure
/// classes (input → 2, runtime → 3). Build them with the helpers ([`Error::file`],
/// [`Error::read`], [`Error::field`], [`Error::cluster`], [`Error::write`]) so the message
/// shape is the same everywhere and the underlying error stays reachable as `source()`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input that is no one file's: a flag, a name, a combination. Exit 2.
    #[error("{0}")]
    Input(String),
    /// A file that cannot be read or is not what it should be. Exit 2.
    #[error("{}: {problem}", path.display())]
    File {
        /// The file as the user named it (`-` for stdin).
        path: std::path::PathBuf,
        /// What is wrong, one line.
        problem: String,
        /// The I/O or parser error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A field of an object that is wrong. Exit 2.
    #[error("{}{source}", if origin.is_empty() { String::new() } else { format!("{origin}: ") })]
    Field {
        /// Where the object came from: the file, or `file: node <name>`.
        origin: String,
        /// The field and the problem.
        #[source]
        source: FieldError,
    },
    /// A call to the API server that failed. Exit 3.
    #[error("{}cannot {doing}: {message}", server.as_deref().map(|s| format!("{s}: ")).unwrap_or_default())]
    Cluster {
        /// The API server's address, once known.
        server: Option<String>,
        /// What gpuwl was doing, e.g. `list nodes`.
        doing: String,
        /// The problem and the way out, one line, no secrets.
        message: String,
        /// The client error.
        #[source]
        source: Option<BoxError>,
    },
    /// A call to the API server that got no answer in time. Exit 3.
    #[error("{}cannot {doing}: {}", server.as_deref().map(|s| format!("{s}: ")).unwrap_or_default(), timeout_message(*within))]
    ClusterTimeout {
        /// The API server's address, once known.
        server: Option<String>,
        /// What gpuwl was doing, e.g. `list nodes`.
        doing: String,
        /// The request timeout, once known.
        within: Option<std::time::Duration>,
        /// The client error.
        #[source]
        source: BoxError,
    },
    /// No kubeconfig given, none found and not in a pod. Exit 3.
    #[error("{}", no_kubeconfig_message(detail, running))]
    NoKubeconfig {
        /// Why kube-rs found none, one line (empty when there is nothing to add).
        detail: String,
        /// The local clusters (`gpuwl cluster`) running now: the message then gives the
        /// export line of one. Set by the command line (gpuwl's `cli::main`), which may
        /// look at the local clusters; empty where the error is made.
        running: Vec<String>,
    },
    /// Writing output (stdout, a result file) failed. Exit 3.
    #[error("cannot write {what}: {source}")]
    Write {
        /// What was being written, e.g. `the report`.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An operation outside the user's input (a file of gpuwl's own state, a process, a
    /// certificate, the async runtime) that failed with an underlying error, kept as the
    /// source. Shown `<doing>: <error>`, the error made one line. Exit 3.
    #[error("{doing}: {}", text::one_line(&source.to_string()))]
    Failed {
        /// What gpuwl was doing, e.g. `cannot write /path/cluster.json`.
        doing: String,
        /// The underlying error.
        #[source]
        source: BoxError,
    },
    /// Bad input of gpuwl's own making (the kubeconfig of its local control plane): a
    /// runtime failure, not the user's. Shown as the input error. Exit 3.
    #[error("{0}")]
    OwnInput(#[source] Box<Error>),
    /// The local control plane's certificates cannot be generated. Exit 3.
    #[error("cannot generate cluster certificates: {0}")]
    Pki(#[source] BoxError),
    /// Cluster, process or I/O failure outside the user's input, without an underlying
    /// error (a component that exits, a wait that runs out). Exit 3.
    #[error("{0}")]
    Runtime(String),
    /// SIGINT or SIGTERM arrived; what was started is cleaned up and the message says what
    /// state is left (a node cordoned, a twin deleted). Exit 130.
    #[error("{0}")]
    Interrupted(String),
}

/// The message of [`Error::NoKubeconfig`]: the way out is a running local cluster's
/// kubeconfig when one runs (`--name` unless it is the default one), else the flags.
pub(crate) fn no_kubeconfig_message(detail: &str, running: &[String]) -> String {
    const NONE: &str = "no kubeconfig found (KUBECONFIG unset, no ~/.kube/config, not in a pod)";
    let export = |name: &str| {
        if name == DEFAULT_CLUSTER_NAME {
            "export KUBECONFIG=\"$(gpuwl cluster kubeconfig)\"".to_owned()
        } else {
            format!("export KUBECONFIG=\"$(gpuwl cluster kubeconfig --name {name})\"")
        }
    };
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    };
    match running {
        [] => format!(
            "no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG (none set, no ~/.kube/config, not in a pod){detail}; or start a local cluster: gpuwl cluster up"
        ),
        [one] if one == DEFAULT_CLUSTER_NAME => {
            format!(
                "{NONE}; the local control plane is running: {}",
                export(one)
            )
        }
        [one] => format!(
            "{NONE}; the local cluster {one} is running: {}",
            export(one)
        ),
        many => {
            let pick = many
                .iter()
                .find(|n| *n == DEFAULT_CLUSTER_NAME)
                .unwrap_or(&many[0]);
            format!(
                "{NONE}; local clusters running: {}; for {pick}: {}",
                many.join(", "),
                export(pick)
            )
        }
    }
}

impl Error {
    /// [`Error::Runtime`] with `msg`: something gpuwl runs or starts failed.
    pub fn runtime(msg: impl Into<String>) -> Error {
        Error::Runtime(msg.into())
    }

    /// The exit status this error maps to (2 for input, 3 for runtime).
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Error::Input(_) | Error::File { .. } | Error::Field { .. } => ExitStatus::BadInput,
            Error::Cluster { .. }
            | Error::ClusterTimeout { .. }
            | Error::NoKubeconfig { .. }
            | Error::Write { .. }
            | Error::Failed { .. }
            | Error::Pki(_)
            | Error::OwnInput(_)
            | Error::Runtime(_) => ExitStatus::Runtime,
            Error::Interrupted(_) => ExitStatus::Interrupted,
        }
    }

    /// Whether this is bad input (exit 2).
    pub fn is_input(&self) -> bool {
        self.exit_status() == ExitStatus::BadInput
    }

    /// A file that is not what it should be: `<path>: <problem>` (the problem made one
    /// line).
    pub fn file(path: impl Into<std::path::PathBuf>, problem: impl std::fmt::Display) -> Error {
        Error::File {
            path: path.into(),
            problem: text::one_line(&problem.to_string()),
            source: None,
        }
    }

    /// A file that cannot be read: `<path>: cannot read: <io error>`, the error kept as the
    /// source.
    pub fn read(path: impl Into<std::path::PathBuf>, e: std::io::Error) -> Error {
        Error::File {
            path: path.into(),
            problem: format!("cannot read: {e}"),
            source: Some(Box::new(e)),
        }
    }

    /// A wrong field: `<origin>: <field>: <problem>`; `origin` is the file, optionally with
    /// the object (`nodes.json: node gpu-1`).
    pub fn field(origin: impl Into<String>, e: FieldError) -> Error {
        Error::Field {
            origin: origin.into(),
            source: e,
        }
    }

    /// A failed API call: `cannot <doing>: <message>`, the client error kept as the source.
    pub fn cluster(doing: &str, message: impl Into<String>, e: impl Into<BoxError>) -> Error {
        Error::Cluster {
            server: None,
            doing: doing.to_owned(),
            message: message.into(),
            source: Some(e.into()),
        }
    }

    /// An API call that got no answer in time (the timeout is added by
    /// [`Error::at_server`]).
    pub fn cluster_timeout(doing: &str, e: impl Into<BoxError>) -> Error {
        Error::ClusterTimeout {
            server: None,
            doing: doing.to_owned(),
            within: None,
            source: e.into(),
        }
    }

    /// An operation that failed with `e`: `<doing>: <e>`, `e` kept as the source.
    pub fn failed(doing: impl Into<String>, e: impl Into<BoxError>) -> Error {
        Error::Failed {
            doing: doing.into(),
            source: e.into(),
        }
    }

    /// Output that cannot be written: `cannot write <what>: <io error>`.
    pub fn write(what: &str, e: std::io::Error) -> Error {
        Error::Write {
            what: what.to_owned(),
            source: e,
        }
    }

    /// Input errors that do not yet name their file get `path` in front; others unchanged.
    pub fn in_file(self, path: &std::path::Path) -> Error {
        match self {
            Error::Input(m) => Error::File {
                path: path.to_owned(),
                problem: m,
                source: None,
            },
            Error::Field { origin, source } if origin.is_empty() => Error::Field {
                origin: path.display().to_string(),
                source,
            },
            Error::Field { origin, source } => Error::Field {
                origin: format!("{}: {origin}", path.display()),
                source,
            },
            e => e,
        }
    }

    /// Errors of a cluster call get the server's address in front (and a timeout the
    /// request timeout `within` it waited); others unchanged.
    pub fn at_server(self, address: &str, within: std::time::Duration) -> Error {
        match self {
            Error::Cluster {
                server: None,
                doing,
                message,
                source,
            } => Error::Cluster {
                server: Some(address.to_owned()),
                doing,
                message,
                source,
            },
            Error::ClusterTimeout {
                server: None,
                doing,
                within: None,
                source,
            } => Error::ClusterTimeout {
                server: Some(address.to_owned()),
                doing,
                within: Some(within),
                source,
            },
            Error::Runtime(m) => Error::Runtime(format!("{address}: {m}")),
            e => e,
        }
    }
}

/// How long a client connects at most (never longer than the request timeout).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The message of an API call without an answer: how long gpuwl waited (`within` per
/// response, and per connection, when known) and the way out.
fn timeout_message(within: Option<std::time::Duration>) -> String {
    let waited = match within {
        Some(t) => format!(
            "no answer within {}s (connect {}s)",
            t.as_secs(),
            CONNECT_TIMEOUT.min(t).as_secs()
        ),
        None => "no answer within the request timeout".to_owned(),
    };
    format!(
        "{waited}; the server accepts connections but does not respond — a wrong address or port, or an overloaded API server (--request-timeout SECONDS to wait longer)"
    )
}

/// Convenience result for gpuwl commands.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn no_kubeconfig_names_the_local_clusters_that_run() {
        let m = |running: &[&str]| {
            no_kubeconfig_message(
                "",
                &running.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            m(&[]),
            "no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG (none set, no ~/.kube/config, not in a pod); or start a local cluster: gpuwl cluster up"
        );
        assert_eq!(
            m(&["gpuwl"]),
            "no kubeconfig found (KUBECONFIG unset, no ~/.kube/config, not in a pod); the local control plane is running: export KUBECONFIG=\"$(gpuwl cluster kubeconfig)\""
        );
        assert_eq!(
            m(&["eval"]),
            "no kubeconfig found (KUBECONFIG unset, no ~/.kube/config, not in a pod); the local cluster eval is running: export KUBECONFIG=\"$(gpuwl cluster kubeconfig --name eval)\""
        );
        assert!(
            m(&["a", "eval"]).ends_with(
                "local clusters running: a, eval; for a: export KUBECONFIG=\"$(gpuwl cluster kubeconfig --name a)\""
            ),
            "{}",
            m(&["a", "eval"])
        );
    }

    #[test]
    fn each_helper_keeps_the_message_shape_and_its_exit_class() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = Error::read("nodes.json", io);
        assert_eq!(e.to_string(), "nodes.json: cannot read: No such file");
        assert_eq!(e.exit_status(), ExitStatus::BadInput);
        assert!(e.source().is_some(), "the I/O error is kept");

        let e = Error::field(
            "pods.yaml: pod ns/a",
            FieldError::new("spec.containers", "expected a list"),
        );
        assert_eq!(
            e.to_string(),
            "pods.yaml: pod ns/a: spec.containers: expected a list"
        );
        assert!(e.is_input());
        assert_eq!(
            e.source().unwrap().to_string(),
            "spec.containers: expected a list"
        );

        let e = Error::write("the report", std::io::Error::other("No space left"));
        assert_eq!(e.to_string(), "cannot write the report: No space left");
        assert_eq!(e.exit_status(), ExitStatus::Runtime);

        let e = Error::failed(
            "cannot write /s/cluster.json",
            std::io::Error::other("No space\nleft"),
        );
        assert_eq!(e.to_string(), "cannot write /s/cluster.json: No space left");
        assert_eq!(e.exit_status(), ExitStatus::Runtime);
        assert_eq!(e.source().unwrap().to_string(), "No space\nleft");

        let e = Error::file("x.yaml", "line one\nline two");
        assert_eq!(e.to_string(), "x.yaml: line one line two");
    }

    #[test]
    fn context_is_added_once_where_it_is_missing() {
        let p = std::path::Path::new("n.json");
        assert_eq!(
            Error::Input("node a: bad".into()).in_file(p).to_string(),
            "n.json: node a: bad"
        );
        let f = Error::field("", FieldError::object("kind Pod is not ClusterPolicy")).in_file(p);
        assert_eq!(f.to_string(), "n.json: kind Pod is not ClusterPolicy");
        // A file error already names its file.
        let e = Error::file("other.json", "empty input").in_file(p);
        assert_eq!(e.to_string(), "other.json: empty input");
        let r = Error::Runtime("cannot list nodes: refused".into())
            .at_server("https://h:6443", std::time::Duration::from_secs(4));
        assert_eq!(r.to_string(), "https://h:6443: cannot list nodes: refused");
    }
}
