//! Reading nodes from a dump: `kubectl get nodes -o json` (kind `List`), a raw API
//! `NodeList`, a single `Node`, or the same in YAML; from a file or stdin (`-`).
//!
//! The format is detected by content: the first non-blank byte `{` means JSON (a UTF-8
//! byte-order mark is skipped), anything else YAML. Each element of `items` is reduced to a
//! [`NodeInfo`] (name, labels, taints, capacity, allocatable; everything else is skipped
//! without being stored) and handed to the caller before the next one is read, so memory
//! stays flat for any dump size. A JSON object goes through a fast path that parses each
//! element from a window of bytes with serde_json's slice reader; YAML (and JSON that is
//! not an object) goes through the streaming list reader every dump reader shares
//! ([`crate::decode::document::read_list`]) with the same element reader.
//!
//! Errors are [`Error::Input`] with one line: `<file>: [items[<i>]: ]<what>`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::decode::document::{
    self, GuardState, Input, Keep, ListSink, MAX_OBJECT, ReadError, TopObject, in_field, one_line,
    read_list_from,
};
use crate::decode::limits::Bounded;
use crate::decode::skim::{self, Skim};
use crate::error::{Error, FieldError, Result};
use crate::model::node::{NodeInfo, Taint};

/// Where a dump is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Standard input (the CLI's `-`).
    Stdin,
    /// A file.
    Path(PathBuf),
}

impl Source {
    /// `-` → [`Source::Stdin`], anything else a path.
    pub fn from_arg(arg: &Path) -> Source {
        if arg.as_os_str() == "-" {
            Source::Stdin
        } else {
            Source::Path(arg.to_path_buf())
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Stdin => f.write_str("<stdin>"),
            Source::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Reads every node of `source` into memory. Prefer [`for_each_node`] for large dumps.
///
/// Errors: as [`for_each_node`].
pub fn read_nodes(source: &Source) -> Result<Vec<NodeInfo>> {
    let mut v = Vec::new();
    for_each_node(source, |n| v.push(n))?;
    Ok(v)
}

/// Streams the nodes of `source` to `on_node`, in document order, and returns how many
/// there were.
///
/// Errors ([`Error::Input`], one line naming the source): unreadable path, empty input,
/// invalid JSON/YAML, a `kind` other than `Node`, `NodeList` or `List`, a list item that
/// is not a Node, a node without `metadata.name`, a label or quantity that is not a
/// scalar. `on_node` may already have been called for earlier nodes when an error is
/// returned: callers must not emit results before this returns `Ok`.
pub fn for_each_node(source: &Source, on_node: impl FnMut(NodeInfo)) -> Result<usize> {
    let reader: Box<dyn Read> = match source {
        Source::Stdin => Box::new(Bounded::file(io::stdin().lock())),
        Source::Path(p) => {
            Box::new(Bounded::file(File::open(p).map_err(|e| {
                Error::Input(format!("{}: cannot read: {e}", p.display()))
            })?))
        }
    };
    read_from(reader, &source.to_string(), on_node)
}

/// Over [`MAX_OBJECT`] bytes in one object.
const TOO_BIG: &str =
    "an object larger than 64 MiB (the API server stores at most ~1.5 MiB per object): not a node";

/// Streams the nodes of any reader; `name` is used in error messages. See
/// [`for_each_node`].
pub fn read_from(reader: impl Read, name: &str, on_node: impl FnMut(NodeInfo)) -> Result<usize> {
    read_page(reader, name, on_node).map(|(count, _)| count)
}

/// [`read_from`] that also returns the list's `metadata.continue` token (a page of the
/// API server's paginated NodeList; `None` when absent, empty, or the input is YAML or a
/// single Node). The live node list reads each page's body with it, so a node is never
/// decoded into a whole `k8s_openapi` Node (images, conditions, nodeInfo are skipped).
///
/// Errors: as [`for_each_node`].
pub fn read_page(
    reader: impl Read,
    name: &str,
    mut on_node: impl FnMut(NodeInfo),
) -> Result<(usize, Option<String>)> {
    let err = |msg: String| Error::Input(format!("{name}: {}", one_line(&msg)));
    let input = Input::start(reader, EXPECTING, TOO_BIG).map_err(|e| err(e.to_string()))?;
    let ctx = Ctx {
        item: Cell::new(None),
        guard: input.state.clone(),
    };
    let mut count = 0usize;
    // Node names are unique in a cluster; a dump naming one twice (two dumps pasted
    // together, a hand edit) would give two verdicts for one name.
    let mut names = std::collections::HashSet::new();
    let mut dup: Option<(usize, String)> = None;
    let mut cb = |n: NodeInfo| {
        if dup.is_none() && !names.insert(n.name.clone()) {
            dup = Some((count, n.name.clone()));
        }
        count += 1;
        on_node(n)
    };
    let mut next = None;
    let res = if input.first == b'{' {
        match json_object(Window::new(input.reader), &ctx, &mut cb, &mut next) {
            // A parser error after the guard stopped the input only echoes it.
            Err(_) if ctx.guard.failure().is_some() => Err(ReadError::Parse {
                item: ctx.item.get(),
                message: ctx.guard.failure().unwrap_or_default(),
            }),
            Err(ReadError::Parse {
                item: None,
                message,
            }) => Err(ReadError::Parse {
                item: ctx.item.get(),
                message,
            }),
            other => other,
        }
    } else {
        read_list_from(input, EXPECTING, NodeSink { on_node: &mut cb })
    };
    match (res, dup) {
        (Ok(()), None) => Ok((count, next.filter(|c: &String| !c.is_empty()))),
        (Ok(()), Some((i, name))) => Err(err(format!(
            "items[{i}]: duplicate node name {name:?} (node names are unique in a cluster)"
        ))),
        (Err(e), _) => Err(err(e.to_string())),
    }
}

/// A message of the JSON fast path, without the list item.
fn parse_error(message: impl Into<String>) -> ReadError {
    ReadError::Parse {
        item: None,
        message: message.into(),
    }
}

/// What a node dump should be (for messages).
const EXPECTING: &str = "one Node, NodeList or List";

/// Shared parse context: the list item being read (for error messages), and the input's
/// guard (each item may span at most [`MAX_OBJECT`] bytes).
struct Ctx {
    item: Cell<Option<usize>>,
    guard: std::rc::Rc<GuardState>,
}

impl Ctx {
    /// Item `i` starts here (`None`: the list ended).
    fn at_item(&self, i: Option<usize>) {
        self.item.set(i);
        self.guard.limit_from_here(MAX_OBJECT, TOO_BIG);
    }
}

/// A scalar kept as text: strings verbatim, numbers and booleans as their decimal text.
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Scalar, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Scalar, E> {
                Ok(Scalar(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Scalar, E> {
                Ok(Scalar(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A map of scalars (labels, quantities); a key given twice is an error (JSON allows it,
/// but which value counts would be a guess).
fn scalar_map<'de, D: Deserializer<'de>>(
    d: D,
    field: &'static str,
) -> std::result::Result<Option<BTreeMap<String, String>>, D::Error> {
    struct V(&'static str);
    impl<'de> Visitor<'de> for V {
        type Value = Option<BTreeMap<String, String>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of strings")
        }
        fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(
            self,
            d: D2,
        ) -> std::result::Result<Self::Value, D2::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut m = BTreeMap::new();
            while let Some(k) = map.next_key::<String>()? {
                let v = map
                    .next_value::<Scalar>()
                    .map_err(|e| in_field(e, &format!("{}[{k:?}]", self.0)))?;
                if m.contains_key(&k) {
                    return Err(de::Error::custom(format!(
                        "{}: duplicate key {k:?}",
                        self.0
                    )));
                }
                m.insert(k, v.0);
            }
            Ok(Some(m))
        }
    }
    d.deserialize_option(V(field))
}

fn labels_map<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<BTreeMap<String, String>>, D::Error> {
    scalar_map(d, "labels")
}

fn capacity_map<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<BTreeMap<String, String>>, D::Error> {
    scalar_map(d, "capacity")
}

fn allocatable_map<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<BTreeMap<String, String>>, D::Error> {
    scalar_map(d, "allocatable")
}

fn null_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// A struct that may only be read from a map. serde's derived structs also accept a
/// sequence (fields by position), so `"metadata": ["evil", {...}]` would read as a node
/// named `evil`; the API server (and this reader's YAML path) reject it, and so does this.
struct Obj<T>(T);

/// What an [`Obj`] is called in a type error (`a taint object`).
trait Named {
    const WHAT: &'static str;
}

impl Named for MetaSlim {
    const WHAT: &'static str = "a metadata object";
}
impl Named for SpecSlim {
    const WHAT: &'static str = "a spec object";
}
impl Named for StatusSlim {
    const WHAT: &'static str = "a status object";
}
impl Named for TaintSlim {
    const WHAT: &'static str = "a taint object";
}

impl<'de, T: Deserialize<'de> + Named> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Obj<T>, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Named> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::WHAT)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// `Option<Obj<T>>` as `Option<T>`.
fn obj<T>(o: Option<Obj<T>>) -> Option<T> {
    o.map(|Obj(t)| t)
}

#[derive(Deserialize, Default)]
#[serde(default, expecting = "a metadata object")]
struct MetaSlim {
    name: Option<String>,
    #[serde(deserialize_with = "labels_map")]
    labels: Option<BTreeMap<String, String>>,
    /// A list's page token (`ListMeta.continue`); nodes have none.
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, expecting = "a taint object")]
struct TaintSlim {
    key: Option<String>,
    value: Option<String>,
    effect: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, expecting = "a spec object")]
struct SpecSlim {
    #[serde(deserialize_with = "null_vec")]
    taints: Vec<Obj<TaintSlim>>,
    unschedulable: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default, expecting = "a status object")]
struct StatusSlim {
    #[serde(deserialize_with = "capacity_map")]
    capacity: Option<BTreeMap<String, String>>,
    #[serde(deserialize_with = "allocatable_map")]
    allocatable: Option<BTreeMap<String, String>>,
}

/// Whether a node name holds whitespace or a control character.
fn n_bad(name: &str) -> bool {
    name.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The parts of an object that may be a Node, collected in any key order.
#[derive(Default)]
struct Parts {
    kind: Option<String>,
    metadata: Option<MetaSlim>,
    spec: Option<SpecSlim>,
    status: Option<StatusSlim>,
    /// Keys read so far (to reject duplicates).
    keys: Vec<String>,
}

impl Parts {
    fn into_node<E: de::Error>(self) -> std::result::Result<NodeInfo, E> {
        let meta = self.metadata.unwrap_or_default();
        let name = match meta.name {
            Some(n) if !n.is_empty() => n,
            _ => return Err(E::custom("node without metadata.name")),
        };
        // Node names are DNS subdomains; whitespace or control characters would forge
        // or split the `MISMATCH=<node> <reason>` lines.
        if n_bad(&name) {
            return Err(E::custom(format!(
                "metadata.name {name:?} is not a node name (whitespace or control character)"
            )));
        }
        let status = self.status.unwrap_or_default();
        let spec = self.spec.unwrap_or_default();
        Ok(NodeInfo {
            name,
            labels: meta.labels.unwrap_or_default(),
            unschedulable: spec.unschedulable.unwrap_or(false),
            taints: spec
                .taints
                .into_iter()
                .map(|Obj(t)| Taint {
                    key: t.key.unwrap_or_default(),
                    value: t.value,
                    effect: t.effect.unwrap_or_default(),
                })
                .collect(),
            capacity: status.capacity.unwrap_or_default(),
            allocatable: status.allocatable,
        })
    }

    /// Handles one key of a (possibly) Node object; returns false for keys it ignores.
    fn take<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> std::result::Result<bool, A::Error> {
        if !matches!(key, "kind" | "metadata" | "spec" | "status") {
            return Ok(false);
        }
        self.seen(key)?;
        let ctx = |e: A::Error| in_field(e, key);
        match key {
            "kind" => self.kind = map.next_value::<Option<String>>().map_err(ctx)?,
            "metadata" => self.metadata = obj(map.next_value().map_err(ctx)?),
            "spec" => self.spec = obj(map.next_value().map_err(ctx)?),
            _ => self.status = obj(map.next_value().map_err(ctx)?),
        }
        Ok(true)
    }

    /// Records that `key` was read; a key given twice is an error (JSON allows it, but
    /// which value counts would be a guess: a second `metadata` could hide a node).
    fn seen<E: de::Error>(&mut self, key: &str) -> std::result::Result<(), E> {
        if self.keys.iter().any(|k| k == key) {
            return Err(E::custom(format!("duplicate key {key:?}")));
        }
        self.keys.push(key.to_owned());
        Ok(())
    }
}

/// The node reader's part of [`read_list_from`] (YAML, and JSON that does not start with
/// `{`): each element is read straight into a [`NodeInfo`] by [`ItemSeed`] and handed over.
struct NodeSink<'a, F> {
    on_node: &'a mut F,
}

impl<F: FnMut(NodeInfo)> ListSink for NodeSink<'_, F> {
    type Item = NodeInfo;
    type Seed = ItemSeed;
    type Out = ();

    fn seed(&self) -> ItemSeed {
        ItemSeed
    }

    fn top_field(&self, key: &str) -> Option<Keep> {
        matches!(key, "kind" | "metadata" | "spec" | "status").then_some(Keep::All)
    }

    fn names_kind(_: &NodeInfo) -> bool {
        // ItemSeed already refused any kind but Node.
        true
    }

    fn item(
        &mut self,
        _index: usize,
        node: NodeInfo,
        _list_kind: Option<&str>,
    ) -> std::result::Result<(), ReadError> {
        (self.on_node)(node);
        Ok(())
    }

    fn finish(self, top: TopObject) -> std::result::Result<(), ReadError> {
        if is_single_node(top.kind.as_deref(), top.saw_items)? {
            let node = ItemSeed
                .deserialize(serde_json::Value::Object(top.object))
                .map_err(|e| FieldError::object(e.to_string()))?;
            (self.on_node)(node);
        }
        Ok(())
    }
}

/// What the top-level object is, from its kind: a single Node (`true`), a NodeList or
/// List already streamed (`false`), or neither (the error).
fn is_single_node(kind: Option<&str>, saw_items: bool) -> std::result::Result<bool, FieldError> {
    let wrong = |m: String| Err(FieldError::object(m));
    match kind {
        Some("Node") if !saw_items => Ok(true),
        Some("NodeList") | Some("List") => Ok(false),
        Some("Node") => wrong(
            "kind \"Node\" with an items field: expected one Node, or a NodeList or List".into(),
        ),
        Some(k) => wrong(format!(
            "kind {} is not Node, NodeList or List",
            document::cut(k)
        )),
        None if saw_items => wrong("list without kind: expected kind NodeList or List".into()),
        None => wrong("no kind field: expected a Node, NodeList or List".into()),
    }
}

/// A growable window over a reader, from which JSON values are parsed with serde_json's
/// slice reader (several times faster than its `io::Read` reader, which goes byte by
/// byte). Memory: the window holds at most the value being parsed plus one read.
struct Window<R> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
}

/// serde_json's message without its ` at line L column C` (positions in the window mean
/// nothing to the user; the caller names the list item).
fn json_msg(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let s = match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    };
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("invalid JSON: {s}")
        }
        _ => s,
    }
}

impl<R: Read> Window<R> {
    const CHUNK: usize = 256 * 1024;

    fn new(r: R) -> Self {
        Window {
            r,
            buf: Vec::with_capacity(2 * Self::CHUNK),
            pos: 0,
            eof: false,
        }
    }

    /// Reads at least `want` more bytes (or to the end), first dropping what was parsed.
    fn fill(&mut self, want: usize) -> std::result::Result<(), ReadError> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let target = self.buf.len() + want.max(Self::CHUNK);
        while self.buf.len() < target && !self.eof {
            let old = self.buf.len();
            self.buf.resize(target, 0);
            match self.r.read(&mut self.buf[old..]) {
                Ok(0) => {
                    self.buf.truncate(old);
                    self.eof = true;
                }
                Ok(n) => self.buf.truncate(old + n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.buf.truncate(old),
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(parse_error(format!("cannot read: {e}")));
                }
            }
        }
        Ok(())
    }

    /// Skips whitespace and returns the next byte without consuming it (None at the end).
    fn peek(&mut self) -> std::result::Result<Option<u8>, ReadError> {
        loop {
            while let Some(&c) = self.buf.get(self.pos) {
                if !matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
                    return Ok(Some(c));
                }
                self.pos += 1;
            }
            if self.eof {
                return Ok(None);
            }
            self.fill(0)?;
        }
    }

    /// Consumes `c` (after whitespace) or fails naming what was expected.
    fn expect(&mut self, c: u8, what: &str) -> std::result::Result<(), ReadError> {
        match self.peek()? {
            Some(x) if x == c => {
                self.pos += 1;
                Ok(())
            }
            Some(x) => Err(parse_error(format!(
                "invalid JSON: expected {what}, found {:?}",
                x as char
            ))),
            None => Err(parse_error(format!(
                "invalid JSON: EOF while parsing, expected {what}"
            ))),
        }
    }

    /// Parses one JSON value. A value cut by the end of the window is retried after
    /// reading more (at least doubling what is available, so retries cost O(n) in all);
    /// a value ending exactly at the window's end is re-read too (a number may go on).
    fn value<T: de::DeserializeOwned>(&mut self) -> std::result::Result<T, ReadError> {
        loop {
            let avail = self.buf.len() - self.pos;
            let mut it =
                serde_json::Deserializer::from_slice(&self.buf[self.pos..]).into_iter::<T>();
            let more = match it.next() {
                Some(Ok(v)) if self.eof || it.byte_offset() < avail => {
                    self.pos += it.byte_offset();
                    return Ok(v);
                }
                Some(Ok(_)) => true,
                // Was the value cut by the window's end? Ask a plain skip: nested
                // visitors wrap errors in custom messages, which hides `is_eof`.
                Some(Err(e)) => {
                    let mut probe = serde_json::Deserializer::from_slice(&self.buf[self.pos..])
                        .into_iter::<IgnoredAny>();
                    match probe.next() {
                        Some(Err(p)) if p.is_eof() && !self.eof => true,
                        None if !self.eof => true,
                        Some(Ok(_)) if probe.byte_offset() == avail && !self.eof => true,
                        // A quantity written as a number too large for a float: read it
                        // as its text, as every scalar of a label or quantity map is.
                        Some(Ok(_)) if e.to_string().contains("]: number out of range") => {
                            let end = probe.byte_offset();
                            let text = quote_huge_numbers(&self.buf[self.pos..self.pos + end]);
                            let v = serde_json::from_slice(&text)
                                .map_err(|e| parse_error(json_msg(&e)))?;
                            self.pos += end;
                            return Ok(v);
                        }
                        _ => return Err(parse_error(json_msg(&e))),
                    }
                }
                None if !self.eof => true,
                None => return Err(parse_error("invalid JSON: EOF while parsing a value")),
            };
            debug_assert!(more);
            self.fill(avail.max(Self::CHUNK))?;
        }
    }
}

impl<R: Read> Window<R> {
    /// Parses one element of `items` as a node: first through the fast path
    /// ([`skim::reduce_node`] keeps only what [`ItemSeed`] reads, and `ItemSeed` parses
    /// that), and through [`Window::value`] whenever the fast path is unsure or the reduced
    /// object fails (so every error, and every node, is what the plain parse gives).
    /// `scratch` holds the reduced object (reused between items).
    fn node_item(&mut self, scratch: &mut Vec<u8>) -> std::result::Result<Item, ReadError> {
        loop {
            match skim::reduce_node(&self.buf[self.pos..], scratch) {
                Skim::Done(n) => {
                    if let Ok(item) = serde_json::from_slice::<Item>(scratch) {
                        self.pos += n;
                        return Ok(item);
                    }
                    break;
                }
                Skim::More if !self.eof => {
                    let avail = self.buf.len() - self.pos;
                    self.fill(avail.max(Self::CHUNK))?;
                }
                Skim::More | Skim::Fallback => break,
            }
        }
        self.value()
    }
}

/// `json` with every number outside strings that overflows an `f64` (`1e400`) turned
/// into a string of its text; everything else byte for byte.
fn quote_huge_numbers(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 16);
    let mut i = 0;
    let mut in_str = false;
    while i < json.len() {
        let c = json[i];
        if in_str {
            out.push(c);
            match c {
                b'\\' if i + 1 < json.len() => {
                    out.push(json[i + 1]);
                    i += 1;
                }
                b'"' => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_str = true;
        } else if c == b'-' || c.is_ascii_digit() {
            let end = i + json[i..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
                .count();
            let tok = std::str::from_utf8(&json[i..end]).unwrap_or("");
            if tok.parse::<f64>().is_ok_and(f64::is_infinite) {
                out.push(b'"');
                out.extend_from_slice(&json[i..end]);
                out.push(b'"');
            } else {
                out.extend_from_slice(&json[i..end]);
            }
            i = end;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// One list item as a standalone value (for [`Window::value`]).
struct Item(NodeInfo);

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Item, D::Error> {
        ItemSeed.deserialize(d).map(Item)
    }
}

/// The JSON fast path for a top-level object: the same rules as [`NodeSink`], with each
/// element of `items` parsed on its own from the [`Window`].
///
/// Errors: [`ReadError::Parse`] without the list item (the caller adds it from `ctx`),
/// or [`ReadError::Object`] for the top-level object.
fn json_object<R: Read>(
    mut w: Window<R>,
    ctx: &Ctx,
    on_node: &mut impl FnMut(NodeInfo),
    next: &mut Option<String>,
) -> std::result::Result<(), ReadError> {
    w.expect(b'{', "`{`")?;
    let mut parts = Parts::default();
    let mut scratch = Vec::new();
    let mut saw_items = false;
    if w.peek()? == Some(b'}') {
        w.pos += 1;
    } else {
        loop {
            if w.peek()? != Some(b'"') {
                return Err(parse_error("invalid JSON: key must be a string"));
            }
            let key: String = w.value()?;
            w.expect(b':', "`:`")?;
            if matches!(
                key.as_str(),
                "items" | "kind" | "metadata" | "spec" | "status"
            ) {
                parts
                    .seen::<serde_json::Error>(&key)
                    .map_err(|e| parse_error(e.to_string()))?;
            }
            let field = |e: ReadError| parse_error(format!("{key}: {e}"));
            match key.as_str() {
                "items" => {
                    saw_items = true;
                    if w.peek()? == Some(b'[') {
                        w.pos += 1;
                        let mut i = 0usize;
                        if w.peek()? == Some(b']') {
                            w.pos += 1;
                        } else {
                            loop {
                                ctx.at_item(Some(i));
                                ctx.guard.check_item(i).map_err(parse_error)?;
                                let Item(node) = w.node_item(&mut scratch)?;
                                on_node(node);
                                i += 1;
                                match w.peek()? {
                                    Some(b',') => w.pos += 1,
                                    Some(b']') => {
                                        w.pos += 1;
                                        break;
                                    }
                                    _ => {
                                        ctx.item.set(Some(i));
                                        return Err(parse_error(
                                            "invalid JSON: expected `,` or `]` after an item",
                                        ));
                                    }
                                }
                            }
                        }
                        ctx.at_item(None);
                    } else {
                        // null is an empty list; anything else is the usual type error
                        let _: Option<Vec<Item>> = w.value()?;
                    }
                }
                "kind" => parts.kind = w.value().map_err(field)?,
                "metadata" => parts.metadata = obj(w.value().map_err(field)?),
                "spec" => parts.spec = obj(w.value().map_err(field)?),
                "status" => parts.status = obj(w.value().map_err(field)?),
                _ => {
                    let _: IgnoredAny = w.value()?;
                }
            }
            match w.peek()? {
                Some(b',') => w.pos += 1,
                Some(b'}') => {
                    w.pos += 1;
                    break;
                }
                _ => return Err(parse_error("invalid JSON: expected `,` or `}`")),
            }
        }
    }
    if w.peek()?.is_some() {
        return Err(parse_error("invalid JSON: trailing characters"));
    }
    if saw_items {
        *next = parts.metadata.as_mut().and_then(|m| m.continue_.take());
    }
    if is_single_node(parts.kind.as_deref(), saw_items)? {
        on_node(
            parts
                .into_node::<serde_json::Error>()
                .map_err(|e| FieldError::object(e.to_string()))?,
        );
    }
    Ok(())
}

/// One list item, which must be a Node (`kind` absent, as in a raw NodeList, or `Node`).
#[derive(Clone, Copy)]
struct ItemSeed;

impl<'de> DeserializeSeed<'de> for ItemSeed {
    type Value = NodeInfo;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<NodeInfo, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ItemSeed {
    type Value = NodeInfo;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Node object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<NodeInfo, A::Error> {
        let mut parts = Parts::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "kind" {
                parts.seen(&key)?;
                let kind = map.next_value::<Option<String>>()?;
                if let Some(k) = kind.as_deref().filter(|k| *k != "Node") {
                    return Err(de::Error::custom(format!(
                        "kind {} is not a Node",
                        document::cut(k)
                    )));
                }
                parts.kind = kind;
            } else if !parts.take(&key, &mut map)? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        parts.into_node()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Result<Vec<NodeInfo>> {
        let mut v = Vec::new();
        read_from(s.as_bytes(), "t", |n| v.push(n))?;
        Ok(v)
    }

    #[test]
    fn json_list_any_key_order() {
        let s = r#"{"items":[{"status":{"allocatable":{"nvidia.com/gpu":"4"},"capacity":{"nvidia.com/gpu":4}},
            "metadata":{"name":"a","labels":{"x":"y","n":1,"b":true},"annotations":{"big":"..."}},
            "spec":{"taints":[{"key":"k","effect":"NoSchedule"}]},"kind":"Node"}],
            "kind":"List","apiVersion":"v1","metadata":{"resourceVersion":""}}"#;
        let v = read(s).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].name, "a");
        assert_eq!(v[0].labels["n"], "1");
        assert_eq!(v[0].labels["b"], "true");
        assert_eq!(v[0].capacity["nvidia.com/gpu"], "4");
        assert_eq!(v[0].allocatable.as_ref().unwrap()["nvidia.com/gpu"], "4");
        assert_eq!(v[0].taints[0].key, "k");
        assert_eq!(v[0].taints[0].value, None);
    }

    /// A node as kubectl prints it, with every kind of value in the parts the reader skips.
    const FULL_NODE: &str = r#"{
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "q": "a\"b\\c\u00e9"},
            "labels": {"nvidia.com/gpu.present": "true", "n": 2, "b": false, "é": "ü"},
            "managedFields": [{"fieldsV1": {"f:x": {".": {}, "y": [1, -2.5e-3, 0, null, true]}}}],
            "name": "gpu-1",
            "resourceVersion": "12"
        },
        "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}], "unschedulable": true},
        "status": {
            "addresses": [{"address": "10.0.0.1", "type": "InternalIP"}],
            "allocatable": {"nvidia.com/gpu": "8", "cpu": 64},
            "capacity": {"nvidia.com/gpu": "8", "memory": "1Ti"},
            "conditions": [],
            "images": [{"names": ["r/a@sha256:00", "r/a:1"], "sizeBytes": 123456789}, {"names": []}],
            "nodeInfo": {"kernelVersion": "6.1", "x": {}}
        }
    }"#;

    #[test]
    fn the_fast_path_reads_each_node_as_the_plain_parse_does() {
        let Item(plain) = serde_json::from_str(FULL_NODE).unwrap();
        assert_eq!(plain.name, "gpu-1");
        assert_eq!(plain.labels["é"], "ü");
        assert_eq!(plain.taints.len(), 2);
        let list = format!(
            r#"{{"kind":"List","items":[{FULL_NODE}, {}]}}"#,
            FULL_NODE.replace("gpu-1", "gpu-2")
        );
        let v = read(&list).unwrap();
        assert_eq!(v[0], plain);
        assert_eq!(
            v[1],
            NodeInfo {
                name: "gpu-2".into(),
                ..plain
            }
        );
    }

    #[test]
    fn an_error_in_a_skipped_part_is_still_the_plain_parses_error() {
        for (bad, want) in [
            (r#""sizeBytes": 123456789}"#, r#""sizeBytes": 12x}"#),
            (r#""kernelVersion": "6.1""#, r#""kernelVersion": "6.1",}"#),
            (r#""name": "gpu-1""#, r#""name": "gpu-1", "name": "again""#),
        ] {
            let node = FULL_NODE.replace(bad, want);
            assert_ne!(node, FULL_NODE);
            let list = format!(r#"{{"kind":"List","items":[{node}]}}"#);
            let fast = read(&list).unwrap_err().to_string();
            let Err(plain) = serde_json::from_str::<Item>(&node) else {
                panic!("{node} parsed")
            };
            assert!(fast.starts_with("t: items[0]: "), "{fast}");
            assert!(fast.contains(&json_msg(&plain)), "{fast} / {plain}");
        }
    }

    #[test]
    fn single_node_json_and_yaml() {
        let j = read(r#"{"kind":"Node","metadata":{"name":"n1"}}"#).unwrap();
        assert_eq!(j[0].name, "n1");
        assert_eq!(j[0].allocatable, None);
        let y = read("kind: Node\nmetadata:\n  name: n2\n  labels:\n    a: b\nstatus:\n  capacity:\n    nvidia.com/gpu: 2\n").unwrap();
        assert_eq!(y[0].name, "n2");
        assert_eq!(y[0].capacity["nvidia.com/gpu"], "2");
        let yl = read("apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n- metadata: {name: b}\n").unwrap();
        assert_eq!(
            yl.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn a_page_of_the_api_servers_nodelist_gives_its_continue_token() {
        // As kube-apiserver writes a page: list metadata first, then the items.
        let page = r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"812","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ","remainingItemCount":3},
            "items":[{"metadata":{"name":"a","resourceVersion":"5"},"status":{"images":[{"names":["x"]}],"capacity":{"nvidia.com/gpu":"8"}}},{"metadata":{"name":"b"}}]}"#;
        let mut names = vec![];
        let (n, next) = read_page(page.as_bytes(), "t", |n| names.push(n.name)).unwrap();
        assert_eq!((n, names), (2, vec!["a".to_string(), "b".to_string()]));
        assert_eq!(next.as_deref(), Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"));
        // The last page has an empty token (or none); a node's own metadata has none.
        let last = r#"{"kind":"NodeList","metadata":{"resourceVersion":"812","continue":""},"items":[{"metadata":{"name":"c"}}]}"#;
        assert_eq!(read_page(last.as_bytes(), "t", |_| {}).unwrap(), (1, None));
        let node = r#"{"kind":"Node","metadata":{"name":"n","continue":"not-a-list"}}"#;
        assert_eq!(read_page(node.as_bytes(), "t", |_| {}).unwrap(), (1, None));
    }

    #[test]
    fn raw_nodelist_items_without_kind() {
        let v = read(r#"{"kind":"NodeList","items":[{"metadata":{"name":"a"}}]}"#).unwrap();
        assert_eq!(v[0].name, "a");
        assert!(
            read(r#"{"kind":"NodeList","items":null}"#)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn bad_inputs_are_one_line_errors() {
        for (s, want) in [
            ("", "empty input"),
            ("  \n\t ", "empty input"),
            ("{ this is not json", "t: "),
            (
                r#"{"kind":"PodList","items":[{"kind":"Pod","metadata":{"name":"p"}}]}"#,
                "items[0]: kind \"Pod\" is not a Node",
            ),
            (
                r#"{"kind":"PodList","items":[]}"#,
                "kind \"PodList\" is not Node",
            ),
            (r#"{"kind":"Pod","metadata":{"name":"p"}}"#, "kind \"Pod\""),
            (r#"{"metadata":{"name":"p"}}"#, "no kind"),
            (
                r#"{"kind":"List","items":[{"kind":"Node","metadata":{}}]}"#,
                "items[0]: node without metadata.name",
            ),
            (
                r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"a"},"status":{"capacity":{"x":{}}}}]}"#,
                "items[0]:",
            ),
            (r#"[1,2]"#, "t: "),
            (
                "{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}} trailing",
                "t: ",
            ),
            ("- a\n- b\n", "t: "),
            ("just a string", "t: "),
            ("a: [unclosed\n", "t: "),
        ] {
            let e = read(s).unwrap_err();
            let m = e.to_string();
            assert!(e.is_input(), "{s}");
            assert!(m.starts_with("t: "), "{m}");
            assert!(m.contains(want), "{s:?} → {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn bom_is_skipped() {
        let v = read("\u{feff}{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}").unwrap();
        assert_eq!(v[0].name, "a");
    }
}
