//! One JSON or YAML document (a manifest, a CR, a List) parsed into a `serde_json::Value`
//! that rejects repeated keys, and the field getters that name the field in their errors.
//! Used by the pod and custom-resource readers; node dumps stream instead ([`super::dump`]).

use std::fmt;

use serde_json::Value;

use crate::decode::limits;
use crate::error::{Error, FieldError, Result};

/// Parses `text` (JSON when the first non-blank byte is `{` or `[`, else YAML; a leading
/// BOM is skipped). `name` (the file) starts every error message; `expecting` says what
/// the document should be, e.g. `a KubeVirt or HyperConverged CR`.
///
/// Errors: [`Error::File`], one line: empty input, a syntax error, a repeated key.
pub fn parse(text: &str, name: &str, expecting: &str) -> Result<Value> {
    let err = |m: String| Error::file(name, m);
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    match body.bytes().find(|c| !c.is_ascii_whitespace()) {
        None => Err(err(format!("empty input: expected {expecting}"))),
        Some(b'{') | Some(b'[') => serde_json::from_str::<Strict>(body)
            .map(|s| s.0)
            .map_err(|e| err(parser_msg(e.to_string()))),
        Some(_) => {
            let mut opts = serde_saphyr::Options::default();
            opts.with_snippet = false;
            // The crate's budgets for a whole document, with the anchor cap of the
            // streamed readers ([`MAX_RECORDED_ANCHOR_EVENTS`]).
            let mut budget = serde_saphyr::Budget::default();
            budget.max_recorded_anchor_events = MAX_RECORDED_ANCHOR_EVENTS;
            opts.budget = Some(budget);
            serde_saphyr::from_str_with_options::<Strict>(body, opts)
                .map(|s| s.0)
                .map_err(|e| err(yaml_msg(&e, expecting)))
        }
    }
}

/// The most bytes one object of a streamed list (a node or pod item, or a single object
/// document) may span: 64 MiB. The API server stores at most ~1.5 MiB per object (etcd's
/// default `--max-request-bytes`), so a larger one is not an API object, and refusing it
/// bounds what a reader buffers.
pub(crate) const MAX_OBJECT: u64 = 64 << 20;

/// Reads a whole document from `path` (`-`: stdin) through a [`Guard`], at most
/// [`limits::Limits::member_bytes`] bytes (`--max-member-bytes`, 4 GiB by default).
///
/// Errors: [`Error::File`] `<name>: cannot read: ...`, or the [`Guard`]'s messages
/// (`not JSON or YAML text (byte 0x00 at offset 0)`, `not UTF-8 at byte offset N`,
/// [`limits::member_message`], [`limits::input_message`]).
pub(crate) fn read_text(path: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let mut g = Guard::new(open(path)?, u64::MAX, "");
    let mut bytes = Vec::new();
    if let Err(e) = g.read_to_end(&mut bytes) {
        return Err(match g.state.failure() {
            Some(why) => Error::file(path, why),
            None => Error::read(path, e),
        });
    }
    // The guard skips its UTF-8 check after a UTF-16/32 byte-order mark; text readers
    // need UTF-8.
    String::from_utf8(bytes).map_err(|e| {
        Error::file(
            path,
            format!("not UTF-8 at byte offset {}", e.utf8_error().valid_up_to()),
        )
    })
}

/// Opens `path` for reading (`-`: stdin), bounded by the process's reader limits
/// ([`limits::Bounded::file`]: `--max-member-bytes` for it, `--max-input-bytes` in all).
///
/// Errors: [`Error::Input`] `<path>: cannot read: <why>`.
pub fn open(path: &std::path::Path) -> Result<Box<dyn std::io::Read>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(limits::Bounded::file(std::io::stdin().lock())));
    }
    std::fs::File::open(path)
        .map(|f| Box::new(limits::Bounded::file(f)) as Box<dyn std::io::Read>)
        .map_err(|e| Error::read(path, e))
}

/// Why a streamed document could not be read, without the source's name (the public
/// readers add it): the parser's or the guard's message, a list item that could not be
/// converted, or the top-level object itself.
#[derive(Debug)]
pub enum ReadError {
    /// Not readable as JSON or YAML of the right shape: empty input, bytes that cannot
    /// start text, the guard's limit, a syntax or type error. `item` is the list item being
    /// read when it happened. Shown `[items[<item>]: ]<message>`.
    Parse {
        /// The `items` index being read, if any.
        item: Option<usize>,
        /// The parser's or guard's message, one line.
        message: String,
    },
    /// A list item read whole but wrong. Shown `items[<index>][ (<who>)]: <error>`.
    Item {
        /// Its index in `items`.
        index: usize,
        /// The object it is (`ns/name`, `ResourceSlice name`), when it says.
        who: Option<String>,
        /// The wrong field.
        error: FieldError,
    },
    /// The top-level object is wrong (its kind, a single object's field).
    Object(FieldError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Parse {
                item: Some(i),
                message,
            } => write!(f, "items[{i}]: {message}"),
            ReadError::Parse {
                item: None,
                message,
            } => f.write_str(message),
            ReadError::Item {
                index,
                who: Some(who),
                error,
            } => write!(f, "items[{index}] ({who}): {error}"),
            ReadError::Item {
                index,
                who: None,
                error,
            } => write!(f, "items[{index}]: {error}"),
            ReadError::Object(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<FieldError> for ReadError {
    fn from(e: FieldError) -> ReadError {
        ReadError::Object(e)
    }
}

/// The top-level object of a streamed document once it has been read: its `kind`, the
/// fields the [`ListSink`] kept (everything but `items`), and whether it had `items`.
#[derive(Debug)]
pub(crate) struct TopObject {
    /// `kind`, when present and not null.
    pub kind: Option<String>,
    /// The kept top-level fields, `kind` included.
    pub object: serde_json::Map<String, Value>,
    /// Whether an `items` field was seen (a list).
    pub saw_items: bool,
}

/// One kind of streamed list reader (nodes, pods, DRA objects): what it keeps of the
/// top-level object, how one `items` element is read, what it does with it, and what the
/// whole document becomes. [`read_list`] drives it; the readers differ only here.
pub(crate) trait ListSink {
    /// What one list element is read into (a pruned `Value`, a typed node).
    type Item;
    /// Reads one list element; run once per element, so it is `Copy`.
    type Seed: for<'de> serde::de::DeserializeSeed<'de, Value = Self::Item> + Copy;
    /// What the document becomes.
    type Out;
    /// The seed for one element.
    fn seed(&self) -> Self::Seed;
    /// How the top-level field `key` (never `items`) is kept; `None` skips it unread.
    /// Return `Some` for `kind`, or the list's kind stays unknown.
    fn top_field(&self, key: &str) -> Option<Keep>;
    /// Whether an element names its own kind. One that does not waits (with every element
    /// after it, keeping their order) until the list's `kind` is known, which kubectl
    /// prints after `items`.
    fn names_kind(item: &Self::Item) -> bool;
    /// Takes element `index`; `list_kind` is the list's `kind` when known.
    ///
    /// Errors: the element is wrong ([`ReadError::Item`]); later elements are still parsed
    /// (so a syntax error anywhere is reported first) but no longer handed over.
    fn item(
        &mut self,
        index: usize,
        item: Self::Item,
        list_kind: Option<&str>,
    ) -> std::result::Result<(), ReadError>;
    /// Ends the document: a list is complete; a single object is converted from `top`.
    ///
    /// Errors: a wrong kind, or a single object's wrong field.
    fn finish(self, top: TopObject) -> std::result::Result<Self::Out, ReadError>;
}

/// Reads one JSON or YAML document that is a list (`items` streamed: each element read by
/// the sink's seed and handed over before the next is read, so memory follows what the
/// sink keeps, not the file) or a single object, through a [`Guard`]: bytes that cannot
/// start text fail at once and one object may span at most [`MAX_OBJECT`] bytes
/// (`too_big`: the message beyond). JSON when the first non-blank byte is `{` or `[` (a
/// BOM skipped), else YAML; `expecting` names what the document should be.
///
/// Errors: [`ReadError`], without the source's name.
pub(crate) fn read_list<L: ListSink>(
    reader: impl std::io::Read,
    expecting: &str,
    too_big: &'static str,
    sink: L,
) -> std::result::Result<L::Out, ReadError> {
    read_list_from(Input::start(reader, expecting, too_big)?, expecting, sink)
}

/// [`read_list`] on an input already started (for a reader that looks at the first byte
/// first, as the node reader does for its JSON fast path).
///
/// Errors: as [`read_list`].
pub(crate) fn read_list_from<L: ListSink, R: std::io::Read>(
    input: Input<R>,
    expecting: &str,
    mut sink: L,
) -> std::result::Result<L::Out, ReadError> {
    let item = std::cell::Cell::new(None);
    let state = input.state.clone();
    let seed = TopSeed {
        guard: &state,
        item: &item,
        too_big: input.too_big,
        expecting,
        sink: &mut sink,
    };
    let top = input.read(expecting, &item, seed)?;
    if let Some(e) = top.failed {
        return Err(e);
    }
    let kind = top.object.kind.clone();
    for (i, v) in top.pending {
        sink.item(i, v, kind.as_deref())?;
    }
    sink.finish(top.object)
}

/// A document being read: buffered through a [`Guard`] (one object at most
/// [`MAX_OBJECT`] bytes) and positioned at its first non-blank byte (a BOM skipped).
pub struct Input<R> {
    /// The guarded, buffered input.
    pub reader: std::io::BufReader<Guard<R>>,
    /// The guard's state, shared with the parser.
    pub state: std::rc::Rc<GuardState>,
    /// The first non-blank byte: `{` or `[` is JSON, anything else YAML.
    pub first: u8,
    too_big: &'static str,
}

impl<R: std::io::Read> Input<R> {
    /// Guards `reader` and finds its first non-blank byte; `too_big` is the message for an
    /// object over [`MAX_OBJECT`] bytes.
    ///
    /// Errors: [`ReadError::Parse`]: unreadable, empty (`expecting` says what should be
    /// there), bytes that cannot start text.
    pub fn start(
        reader: R,
        expecting: &str,
        too_big: &'static str,
    ) -> std::result::Result<Input<R>, ReadError> {
        use std::io::BufRead;
        let guard = Guard::new(reader, MAX_OBJECT, too_big);
        let state = guard.state.clone();
        let parse = |message: String| ReadError::Parse {
            item: None,
            message,
        };
        let mut r = std::io::BufReader::with_capacity(64 * 1024, guard);
        let first = loop {
            let buf = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(parse(
                        state.failure().unwrap_or(format!("cannot read: {e}")),
                    ));
                }
            };
            if buf.is_empty() {
                return Err(parse(format!("empty input: expected {expecting}")));
            }
            let body = buf.strip_prefix(b"\xef\xbb\xbf").unwrap_or(buf);
            match body.iter().position(|c| !c.is_ascii_whitespace()) {
                Some(i) => break body[i],
                None => {
                    let n = r.buffer().len();
                    r.consume(n);
                }
            }
        };
        if first == b'{' || first == b'[' {
            // JSON parsers do not skip a BOM.
            if r.buffer().starts_with(b"\xef\xbb\xbf") {
                r.consume(3);
            }
        }
        Ok(Input {
            reader: r,
            state,
            first,
            too_big,
        })
    }

    /// Reads the whole document with `seed` (see [`read_list`]); `item` is where the seed
    /// records the list element being read.
    fn read<T, S>(
        self,
        expecting: &str,
        item: &std::cell::Cell<Option<usize>>,
        seed: S,
    ) -> std::result::Result<T, ReadError>
    where
        S: for<'de> serde::de::DeserializeSeed<'de, Value = T>,
    {
        let state = self.state;
        let res: std::result::Result<T, String> = if self.first == b'{' || self.first == b'[' {
            let mut de = serde_json::Deserializer::from_reader(self.reader);
            (|| {
                let t = seed.deserialize(&mut de)?;
                de.end()?;
                Ok(t)
            })()
            .map_err(|e: serde_json::Error| parser_msg(e.to_string()))
        } else {
            serde_saphyr::with_deserializer_from_reader_with_options(
                self.reader,
                yaml_options(),
                |de| seed.deserialize(de),
            )
            .map_err(|e| yaml_msg(&e, expecting))
        };
        match (res, state.failure()) {
            // A parser error after the guard stopped the input only echoes it.
            (_, Some(message)) | (Err(message), None) => Err(ReadError::Parse {
                item: item.get(),
                message,
            }),
            (Ok(t), None) => Ok(t),
        }
    }
}

/// What [`TopSeed`] returns: the top-level object, the first element that was wrong, and
/// the elements still waiting for the list's kind.
struct TopRead<T> {
    object: TopObject,
    failed: Option<ReadError>,
    pending: Vec<(usize, T)>,
}

/// The top-level visitor of [`read_list`]: keeps the fields the sink asks for, streams
/// `items` through [`ItemsSeed`].
struct TopSeed<'a, L> {
    guard: &'a GuardState,
    item: &'a std::cell::Cell<Option<usize>>,
    too_big: &'static str,
    expecting: &'a str,
    sink: &'a mut L,
}

impl<'de, L: ListSink> serde::de::DeserializeSeed<'de> for TopSeed<'_, L> {
    type Value = TopRead<L::Item>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, L: ListSink> serde::de::Visitor<'de> for TopSeed<'_, L> {
    type Value = TopRead<L::Item>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object ({})", self.expecting)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let mut top = TopRead {
            object: TopObject {
                kind: None,
                object: serde_json::Map::new(),
                saw_items: false,
            },
            failed: None,
            pending: Vec::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                if top.object.saw_items {
                    return Err(A::Error::custom("duplicate key \"items\""));
                }
                top.object.saw_items = true;
                map.next_value_seed(ItemsSeed {
                    guard: self.guard,
                    item: self.item,
                    too_big: self.too_big,
                    sink: &mut *self.sink,
                    top: &mut top,
                })?;
                self.item.set(None);
                self.guard.limit_from_here(MAX_OBJECT, self.too_big);
                continue;
            }
            let Some(keep) = self.sink.top_field(&key) else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            if top.object.object.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate key {key:?}")));
            }
            let v = map
                .next_value_seed(Prune(keep))
                .map_err(|e| in_field(e, &key))?;
            if key == "kind" {
                top.object.kind = match &v {
                    Value::String(s) => Some(s.clone()),
                    Value::Null => None,
                    _ => return Err(A::Error::custom("kind: expected a string")),
                };
            }
            top.object.object.insert(key, v);
        }
        Ok(top)
    }
}

/// The `items` array of [`read_list`], streamed: each element read by the sink's seed
/// (bounded to [`MAX_OBJECT`]) and handed over, or kept waiting for the list's kind.
struct ItemsSeed<'a, 'b, L: ListSink> {
    guard: &'a GuardState,
    item: &'a std::cell::Cell<Option<usize>>,
    too_big: &'static str,
    sink: &'b mut L,
    top: &'b mut TopRead<L::Item>,
}

impl<'de, L: ListSink> serde::de::DeserializeSeed<'de> for ItemsSeed<'_, '_, L> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, L: ListSink> serde::de::Visitor<'de> for ItemsSeed<'_, '_, L> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`items` to be an array")
    }

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<(), A::Error> {
        let seed = self.sink.seed();
        let mut i = 0usize;
        loop {
            self.item.set(Some(i));
            self.guard.limit_from_here(MAX_OBJECT, self.too_big);
            let Some(v) = seq.next_element_seed(seed)? else {
                break;
            };
            self.guard.check_item(i).map_err(serde::de::Error::custom)?;
            if self.top.failed.is_none() {
                let kind = self.top.object.kind.as_deref();
                if self.top.pending.is_empty() && (kind.is_some() || L::names_kind(&v)) {
                    if let Err(e) = self.sink.item(i, v, kind) {
                        self.top.failed = Some(e);
                    }
                } else {
                    self.top.pending.push((i, v));
                }
            }
            i += 1;
        }
        Ok(())
    }
}

/// What a [`Guard`] shares with the parser reading through it: the byte offset, the current
/// size limit, and why it stopped the input (if it did).
#[derive(Debug)]
pub struct GuardState {
    pos: std::cell::Cell<u64>,
    limit: std::cell::Cell<u64>,
    over: std::cell::Cell<&'static str>,
    failure: std::cell::RefCell<Option<String>>,
}

impl GuardState {
    /// Bytes read so far.
    pub fn pos(&self) -> u64 {
        self.pos.get()
    }

    /// Allows `max` more bytes from here (the start of one list item), failing with
    /// `what` beyond them.
    pub(crate) fn limit_from_here(&self, max: u64, what: &'static str) {
        self.limit.set(self.pos.get().saturating_add(max));
        self.over.set(what);
    }

    /// Checks list item `index` against `--max-items` ([`limits::check_item`]); past it
    /// the input fails with [`limits::items_message`].
    ///
    /// Errors: that message.
    pub fn check_item(&self, index: usize) -> std::result::Result<(), String> {
        limits::check_item(index).inspect_err(|m| self.record(m.clone()))
    }

    /// Records `message` as why the input failed (the first failure stays).
    fn record(&self, message: String) {
        let mut f = self.failure.borrow_mut();
        if f.is_none() {
            *f = Some(message);
        }
    }

    /// Why the guard failed the input, as a message without the file name (`not UTF-8 at
    /// byte offset 17`); `None` when it did not. A parser error that follows a guard
    /// failure is only its echo: report this instead.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }
}

/// A reader that checks bytes as they arrive, so that input which cannot be JSON or YAML
/// text fails at once instead of after being buffered: a first non-blank byte that is a
/// control character (`/dev/zero`), bytes that are not UTF-8 (`/dev/urandom`, a Latin-1
/// file; skipped after a UTF-16/32 byte-order mark, which serde-saphyr decodes), and more
/// bytes than the current limit ([`GuardState::limit_from_here`]). A failure is an
/// `io::Error` for the parser and a message in [`GuardState::failure`].
pub struct Guard<R> {
    inner: R,
    /// Shared with the parser's visitors.
    pub state: std::rc::Rc<GuardState>,
    started: bool,
    check_utf8: bool,
    /// An incomplete UTF-8 sequence at the end of the last read.
    carry: [u8; 4],
    carry_len: usize,
}

impl<R: std::io::Read> Guard<R> {
    /// Guards `inner`, allowing `max` bytes in all (`what`: the message beyond them).
    pub fn new(inner: R, max: u64, what: &'static str) -> Guard<R> {
        Guard {
            inner,
            state: std::rc::Rc::new(GuardState {
                pos: std::cell::Cell::new(0),
                limit: std::cell::Cell::new(max),
                over: std::cell::Cell::new(what),
                failure: std::cell::RefCell::new(None),
            }),
            started: false,
            check_utf8: true,
            carry: [0; 4],
            carry_len: 0,
        }
    }

    fn fail(&self, msg: String) -> std::io::Error {
        self.state.record(msg.clone());
        std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
    }

    /// Checks `data` (read at offset `base`) as the continuation of what came before.
    fn check(&mut self, data: &[u8], base: u64) -> std::result::Result<(), std::io::Error> {
        if !self.started && base == 0 {
            let bom16 = [&b"\xff\xfe"[..], b"\xfe\xff", b"\0\0\xfe\xff"];
            if bom16.iter().any(|b| data.starts_with(b)) {
                self.check_utf8 = false;
            }
        }
        if !self.started {
            let body = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
            let skip = data.len() - body.len();
            if let Some((i, &b)) = body
                .iter()
                .enumerate()
                .find(|(_, b)| !b.is_ascii_whitespace())
            {
                self.started = true;
                if b.is_ascii_control() && self.check_utf8 {
                    return Err(self.fail(format!(
                        "not JSON or YAML text (byte 0x{b:02x} at offset {})",
                        base + (skip + i) as u64
                    )));
                }
            }
        }
        if !self.check_utf8 {
            return Ok(());
        }
        let mut i = 0;
        if self.carry_len > 0 {
            let start = base - self.carry_len as u64;
            let need = match self.carry[0] {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            while self.carry_len < need && i < data.len() {
                self.carry[self.carry_len] = data[i];
                self.carry_len += 1;
                i += 1;
            }
            if self.carry_len < need {
                return Ok(());
            }
            if std::str::from_utf8(&self.carry[..need]).is_err() {
                return Err(self.fail(format!("not UTF-8 at byte offset {start}")));
            }
            self.carry_len = 0;
        }
        match std::str::from_utf8(&data[i..]) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                let tail = &data[i + e.valid_up_to()..];
                self.carry[..tail.len()].copy_from_slice(tail);
                self.carry_len = tail.len();
                Ok(())
            }
            Err(e) => Err(self.fail(format!(
                "not UTF-8 at byte offset {}",
                base + (i + e.valid_up_to()) as u64
            ))),
        }
    }
}

impl<R: std::io::Read> std::io::Read for Guard<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(f) = self.state.failure() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, f));
        }
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            // A reader limit crossed below (a file's or the process's bytes) is why the
            // input stopped: the message, not the parser's echo of it.
            Err(e) => match limits::limit_of(&e) {
                Some(m) => return Err(self.fail(m.to_owned())),
                None => return Err(e),
            },
        };
        let base = self.state.pos.get();
        if n == 0 {
            if self.carry_len > 0 && self.check_utf8 {
                let at = base - self.carry_len as u64;
                return Err(self.fail(format!(
                    "not UTF-8 at byte offset {at} (the file ends inside a character)"
                )));
            }
            return Ok(0);
        }
        self.state.pos.set(base + n as u64);
        self.check(&buf[..n], base)?;
        if self.state.pos.get() > self.state.limit.get() {
            return Err(self.fail(self.state.over.get().to_owned()));
        }
        Ok(n)
    }
}

// The text helpers every reader uses, under the names the readers have always used.
pub use crate::text::{cut, one_line};

/// A JSON value whose objects may not repeat a key: serde_json's `Value` keeps the last
/// of two, so a second `spec` or `limits` would silently replace the first.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Strict, D::Error> {
        use serde::de::{self, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Strict;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON/YAML value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::Bool(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::from(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::String(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::String(v)))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> std::result::Result<Strict, E> {
                Ok(Strict(Value::Null))
            }
            fn visit_some<D2: serde::Deserializer<'de>>(
                self,
                d: D2,
            ) -> std::result::Result<Strict, D2::Error> {
                <Strict as serde::Deserialize>::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<Strict, A::Error> {
                let mut v = Vec::new();
                while let Some(Strict(x)) = s.next_element()? {
                    v.push(x);
                }
                Ok(Strict(Value::Array(v)))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Strict, A::Error> {
                let mut o = serde_json::Map::new();
                while let Some(k) = m.next_key::<String>()? {
                    let Strict(x) = m.next_value()?;
                    if o.contains_key(&k) {
                        return Err(de::Error::custom(format!("duplicate key {k:?}")));
                    }
                    o.insert(k, x);
                }
                Ok(Strict(Value::Object(o)))
            }
        }
        d.deserialize_any(V)
    }
}

/// Which parts of a JSON/YAML value a [`Prune`] keeps: everything, only the listed fields
/// of an object (each with its own rule), or each element of a list by one rule. A value of
/// another shape than its rule names (a list where an object belongs, a string where a
/// list belongs) is a type error, as serde would make it; null is accepted as absent.
#[derive(Debug, Clone, Copy)]
pub enum Keep {
    /// The whole value.
    All,
    /// An object, of which only these fields are kept; other fields are skipped unread (not
    /// stored).
    Fields(&'static [(&'static str, Keep)]),
    /// A list, each element kept by the rule.
    Each(&'static Keep),
    /// What either rule keeps (a reader's rule and what a second reader of the same items
    /// needs besides): the fields of both, each by the union of its two rules; the elements
    /// of a list by the union of both element rules. The two rules are written without a
    /// `Both` inside them (a union is made of references into constant rules).
    Both(&'static Keep, &'static Keep),
}

impl Keep {
    /// The rule for field `key` of an object kept by this rule; `None`: the field is
    /// dropped.
    pub(crate) fn field(self, key: &str) -> Option<Keep> {
        match self {
            Keep::All => Some(Keep::All),
            Keep::Fields(fields) => fields.iter().find(|(name, _)| *name == key).map(|f| f.1),
            Keep::Each(_) => None,
            Keep::Both(a, b) => Keep::union(Keep::field_ref(a, key), Keep::field_ref(b, key)),
        }
    }

    /// [`Keep::field`] of a rule written as a constant (not itself a union), as a
    /// reference into it, for [`Keep::Both`].
    fn field_ref(rule: &'static Keep, key: &str) -> Option<&'static Keep> {
        match rule {
            Keep::All => Some(&Keep::All),
            Keep::Fields(fields) => fields.iter().find(|(name, _)| *name == key).map(|f| &f.1),
            Keep::Each(_) | Keep::Both(..) => None,
        }
    }

    /// The rule for each element of a list kept by this rule; `None`: not a list.
    fn element(self) -> Option<Keep> {
        match self {
            Keep::All => Some(Keep::All),
            Keep::Each(each) => Some(*each),
            Keep::Fields(_) => None,
            Keep::Both(a, b) => {
                let each = |k: &'static Keep| match k {
                    Keep::Each(each) => Some(*each),
                    Keep::All => Some(&Keep::All),
                    _ => None,
                };
                Keep::union(each(a), each(b))
            }
        }
    }

    /// Whether the rule is for a list (else for an object).
    fn is_list(self) -> bool {
        match self {
            Keep::Each(_) => true,
            Keep::Both(a, _) => a.is_list(),
            Keep::All | Keep::Fields(_) => false,
        }
    }

    /// The union of two rules, either of which may be absent.
    fn union(a: Option<&'static Keep>, b: Option<&'static Keep>) -> Option<Keep> {
        match (a, b) {
            (Some(Keep::All), _) | (_, Some(Keep::All)) => Some(Keep::All),
            (Some(a), Some(b)) => Some(Keep::Both(a, b)),
            (Some(one), None) | (None, Some(one)) => Some(*one),
            (None, None) => None,
        }
    }
}

/// Deserializes a value into a `serde_json::Value` holding only what its [`Keep`] names,
/// so that a reader keeps a few hundred bytes of a 20 KB pod. Repeated keys among the kept
/// fields are an error (as in [`parse`]).
#[derive(Debug, Clone, Copy)]
pub struct Prune(pub Keep);

impl<'de> serde::de::DeserializeSeed<'de> for Prune {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Value, D::Error> {
        match self.0 {
            Keep::All => <Strict as serde::Deserialize>::deserialize(d).map(|s| s.0),
            Keep::Fields(_) | Keep::Each(_) | Keep::Both(..) => {
                d.deserialize_any(PruneVisitor(self.0))
            }
        }
    }
}

/// `e` prefixed with the field it arose in, so that nested fields read outermost first
/// (`spec: containers: resources: limits: number out of range`). The end of the input is
/// left alone: it is about the file, not a field (and the node reader retries on it).
pub(crate) fn in_field<E: serde::de::Error + fmt::Display>(e: E, field: &str) -> E {
    let msg = e.to_string();
    if msg.starts_with("EOF while parsing") || msg.starts_with("unexpected end of input") {
        e
    } else {
        E::custom(format!("{field}: {msg}"))
    }
}

/// Visits a value under [`Keep::Fields`], [`Keep::Each`] or [`Keep::Both`]; scalars are
/// type errors.
struct PruneVisitor(Keep);

impl<'de> serde::de::Visitor<'de> for PruneVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_list() {
            "a list"
        } else {
            "an object"
        })
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut s: A,
    ) -> std::result::Result<Value, A::Error> {
        let Some(each) = self.0.element() else {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Seq,
                &self,
            ));
        };
        let mut v = Vec::new();
        while let Some(x) = s.next_element_seed(Prune(each))? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut m: A,
    ) -> std::result::Result<Value, A::Error> {
        if self.0.is_list() {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Map,
                &self,
            ));
        }
        let mut o = serde_json::Map::new();
        while let Some(k) = m.next_key::<String>()? {
            match self.0.field(&k) {
                Some(keep) => {
                    let x = m
                        .next_value_seed(Prune(keep))
                        .map_err(|e| in_field(e, &k))?;
                    if o.contains_key(&k) {
                        return Err(serde::de::Error::custom(format!("duplicate key {k:?}")));
                    }
                    o.insert(k, x);
                }
                None => {
                    m.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(o))
    }
}

/// The value at a dotted path (`spec.configuration.permittedHostDevices`).
pub fn get<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(v, |v, k| v.get(k))
}

/// See the module docs.
pub(crate) fn opt_str<'a>(
    v: &'a Value,
    dotted: &str,
) -> std::result::Result<Option<&'a str>, FieldError> {
    match get(v, dotted) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(FieldError::new(dotted, "expected a string")),
    }
}

/// See the module docs.
pub(crate) fn opt_scalar(
    v: Option<&Value>,
    path: &str,
) -> std::result::Result<Option<String>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::Bool(b)) => Ok(Some(b.to_string())),
        Some(_) => Err(FieldError::new(path, "expected a scalar")),
    }
}

/// See the module docs.
pub fn array<'a>(v: Option<&'a Value>, path: &str) -> std::result::Result<&'a [Value], FieldError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(FieldError::new(path, "expected a list")),
    }
}

/// serde-saphyr options for a streamed document (nodes and pods). The default budgets
/// count the whole document (256 MiB input, 1M events, 250k nodes, 64 MiB of scalars): a
/// big `kubectl get nodes -o yaml` exceeds them although the streaming visitors keep memory
/// flat, so those counters are lifted; the limits that bound memory or stack (depth,
/// anchors and aliases, recorded anchor bytes) are kept, and the events an anchor may
/// record (what its aliases replay) are capped at [`MAX_RECORDED_ANCHOR_EVENTS`], below the
/// crate's 1,000,000: an alias bomb then stops in a tenth of the work, while no dump
/// kubectl writes has an anchor at all. A non-finite float (`.inf`,
/// `.nan`, `1e400`) reaches the visitors as text (`.inf`), so a quantity written that way
/// is judged as a bad quantity of its node, not a syntax error of the file.
pub(crate) fn yaml_options() -> serde_saphyr::Options {
    let mut opts = serde_saphyr::Options::default();
    opts.with_snippet = false;
    opts.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::AsString;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_reader_input_bytes = None;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    budget.max_recorded_anchor_events = MAX_RECORDED_ANCHOR_EVENTS;
    opts.budget = Some(budget);
    opts
}

/// The most YAML events one anchor may record for its aliases to replay (serde-saphyr's
/// `Budget::max_recorded_anchor_events`, 1,000,000 by default): a "billion laughs" document
/// is refused when its anchors grow past this, naming the budget.
pub(crate) const MAX_RECORDED_ANCHOR_EVENTS: usize = 100_000;

/// serde-saphyr's message without advice meant for the programmer ("set
/// DuplicateKeyPolicy in Options", "use read or read_with_options").
/// `expected` names what one document should be.
pub(crate) fn yaml_msg(e: &serde_saphyr::Error, expected: &str) -> String {
    if let serde_saphyr::Error::MultipleDocuments { .. } = e {
        return format!("several YAML documents (---): expected {expected}");
    }
    let mut s = e
        .to_string()
        .replace(", set DuplicateKeyPolicy in Options if acceptable", "");
    // An error raised in a nested value gets one location per level: keep the innermost.
    while let Some(i) = s.rfind(" at line ") {
        if !is_location(&s[i + " at line ".len()..]) || !ends_with_location(&s[..i]) {
            break;
        }
        s.truncate(i);
    }
    parser_msg(s)
}

/// A parser's message made fit for one terminal line: escaped (it quotes the input: a key
/// or a value with controls or bidi characters) and, past 300 characters, cut in the
/// middle so that its start and its location (`at line …, column …`) stay.
pub(crate) fn parser_msg(s: String) -> String {
    const MAX: usize = 300;
    let s = crate::text::esc(&s);
    let n = s.chars().count();
    if n <= MAX {
        return s;
    }
    let head: String = s.chars().take(200).collect();
    let tail: String = s.chars().skip(n - 80).collect();
    format!("{head} … ({} characters cut) … {tail}", n - 280)
}

/// Whether `s` is `<n>, column <m>`.
fn is_location(s: &str) -> bool {
    s.split_once(", column ").is_some_and(|(l, c)| {
        !l.is_empty()
            && !c.is_empty()
            && l.bytes().all(|b| b.is_ascii_digit())
            && c.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Whether `s` ends with ` at line <n>, column <m>`.
fn ends_with_location(s: &str) -> bool {
    s.rfind(" at line ")
        .is_some_and(|i| is_location(&s[i + " at line ".len()..]))
}

/// Opens a file, through gzip when it starts with the gzip magic (`1f 8b`).
///
/// Errors: [`Error::File`] when it cannot be opened.
pub fn open_maybe_gzip(path: &std::path::Path) -> Result<Box<dyn std::io::Read>> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let mut magic = [0u8; 2];
    let n = std::io::Read::read(&mut f, &mut magic).map_err(|e| Error::read(path, e))?;
    std::io::Seek::rewind(&mut f).map_err(|e| Error::read(path, e))?;
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(f)))
    } else {
        Box::new(std::io::BufReader::new(f))
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_parsers_message_is_escaped_and_cut_around_its_location() {
        let m = parser_msg(format!(
            "invalid type: string \"{}\u{202e}\", expected a map at line 1, column 9",
            "x".repeat(4_000)
        ));
        assert!(m.chars().count() < 360, "{}", m.len());
        assert!(m.ends_with("expected a map at line 1, column 9"), "{m}");
        assert!(m.contains("characters cut"), "{m}");
        assert!(!m.contains('\u{202e}'));
        let e = parse("a: 1\na: \u{202e}\n", "d.yaml", "x")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\u{202e}'), "{e}");
    }
    use super::*;
    use std::io::Read;

    /// `parse`'s error, as shown.
    fn parse_err(text: &str) -> String {
        parse(text, "cr.yaml", "a KubeVirt CR")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parse_tells_json_from_yaml_by_the_first_byte_and_skips_a_bom() {
        let json = parse("\u{feff}  \n{\"kind\": \"KubeVirt\", \"n\": 1}", "a", "x").unwrap();
        assert_eq!(json, serde_json::json!({"kind": "KubeVirt", "n": 1}));
        let yaml = parse("\u{feff}kind: KubeVirt\nn: 1\n", "a", "x").unwrap();
        assert_eq!(yaml, json);
        // `[` is JSON too; YAML flow style that is not JSON is read as YAML.
        assert_eq!(
            parse("[1, 2]", "a", "x").unwrap(),
            serde_json::json!([1, 2])
        );
        assert_eq!(
            parse("- {a: b}", "a", "x").unwrap(),
            serde_json::json!([{"a": "b"}])
        );
    }

    #[test]
    fn parse_errors_name_the_file_and_what_was_expected() {
        assert_eq!(
            parse_err(" \n\t"),
            "cr.yaml: empty input: expected a KubeVirt CR"
        );
        assert_eq!(
            parse_err("{\"spec\": 1, \"spec\": 2}"),
            "cr.yaml: duplicate key \"spec\" at line 1 column 22"
        );
        assert_eq!(
            parse_err("spec:\n  a: 1\n  a: 2\n"),
            "cr.yaml: duplicate mapping key: a at line 3, column 3"
        );
        assert_eq!(
            parse_err("kind: A\n---\nkind: B\n"),
            "cr.yaml: several YAML documents (---): expected a KubeVirt CR"
        );
        let e = parse_err("{\"kind\": ");
        assert!(e.starts_with("cr.yaml: EOF while parsing"), "{e}");
    }

    /// A reader that hands out `chunk` bytes at a time (a UTF-8 character may be split).
    struct Chunked<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Reads `data` through a guard allowing `max` bytes, `chunk` bytes per read; the
    /// bytes read, or the guard's failure.
    fn guarded(data: &[u8], chunk: usize, max: u64) -> std::result::Result<Vec<u8>, String> {
        let mut g = Guard::new(Chunked { data, chunk }, max, "too big");
        let state = g.state.clone();
        let mut out = Vec::new();
        match g.read_to_end(&mut out) {
            Ok(_) => {
                assert_eq!(state.pos(), data.len() as u64);
                Ok(out)
            }
            Err(e) => {
                let f = state.failure().expect("a failure recorded");
                assert_eq!(e.to_string(), f);
                Err(f)
            }
        }
    }

    #[test]
    fn the_guard_stops_bytes_that_cannot_be_text_as_they_arrive() {
        let text = "kind: Ä€𝄞\n".as_bytes();
        for chunk in [1, 2, 3, 64] {
            assert_eq!(guarded(text, chunk, 100).unwrap(), text, "chunk {chunk}");
        }
        assert_eq!(
            guarded(b"\0\0\0\0", 64, 100).unwrap_err(),
            "not JSON or YAML text (byte 0x00 at offset 0)"
        );
        // Leading blanks and a BOM are skipped before the first byte is judged.
        assert_eq!(
            guarded(b"\xef\xbb\xbf \n\x01", 64, 100).unwrap_err(),
            "not JSON or YAML text (byte 0x01 at offset 5)"
        );
        // A control character later in the text is the parser's to judge.
        assert!(guarded(b"a\x01", 64, 100).is_ok());
        for chunk in [1, 3, 64] {
            assert_eq!(
                guarded(b"name: caf\xe9 au lait", chunk, 100).unwrap_err(),
                "not UTF-8 at byte offset 9",
                "chunk {chunk}"
            );
            // A character split across reads whose continuation is wrong.
            assert_eq!(
                guarded(b"ab\xe2\x82x", chunk, 100).unwrap_err(),
                "not UTF-8 at byte offset 2",
                "chunk {chunk}"
            );
        }
        assert_eq!(
            guarded(b"ab\xe2\x82", 1, 100).unwrap_err(),
            "not UTF-8 at byte offset 2 (the file ends inside a character)"
        );
        // UTF-16 text (a byte-order mark): not checked as UTF-8.
        assert!(guarded(b"\xff\xfek\0i\0", 64, 100).is_ok());
        assert_eq!(guarded(b"0123456789", 4, 9).unwrap_err(), "too big");
        assert!(guarded(b"0123456789", 4, 10).is_ok());
    }

    #[test]
    fn the_limit_counts_from_where_an_item_starts() {
        let mut g = Guard::new(&b"0123456789abcdef"[..], 6, "first");
        let state = g.state.clone();
        let mut buf = [0u8; 4];
        assert_eq!(g.read(&mut buf).unwrap(), 4);
        state.limit_from_here(8, "item too big");
        assert_eq!(g.read(&mut buf).unwrap(), 4);
        assert_eq!(g.read(&mut buf).unwrap(), 4);
        assert_eq!(g.read(&mut buf).unwrap_err().to_string(), "item too big");
        // Once failed, it stays failed.
        assert_eq!(g.read(&mut buf).unwrap_err().to_string(), "item too big");
    }

    static SPEC: [(&str, Keep); 1] = [("containers", Keep::Each(&NAME))];
    static NAME: Keep = Keep::Fields(&[("name", Keep::All)]);
    static POD: Keep = Keep::Fields(&[("kind", Keep::All), ("spec", Keep::Fields(&SPEC))]);

    fn prune(text: &str) -> std::result::Result<Value, String> {
        use serde::de::DeserializeSeed;
        let mut de = serde_json::Deserializer::from_str(text);
        Prune(POD).deserialize(&mut de).map_err(|e| e.to_string())
    }

    #[test]
    fn both_keeps_what_either_rule_keeps() {
        use serde::de::DeserializeSeed;
        static IMAGES: [(&str, Keep); 1] = [("containers", Keep::Each(&IMAGE))];
        static IMAGE: Keep = Keep::Fields(&[("image", Keep::All)]);
        static OTHER: Keep =
            Keep::Fields(&[("metadata", Keep::All), ("spec", Keep::Fields(&IMAGES))]);
        static BOTH: Keep = Keep::Both(&POD, &OTHER);
        let prune = |text: &str| {
            let mut de = serde_json::Deserializer::from_str(text);
            Prune(BOTH).deserialize(&mut de).map_err(|e| e.to_string())
        };
        assert_eq!(
            prune(
                r#"{"kind": "Pod", "metadata": {"name": "p"}, "status": {},
                    "spec": {"containers": [{"name": "c", "image": "i", "args": []}],
                             "volumes": []}}"#
            )
            .unwrap(),
            serde_json::json!({"kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}})
        );
        let e = prune(r#"{"spec": {"containers": {"name": "c"}}}"#).unwrap_err();
        assert!(
            e.starts_with("spec: containers: invalid type: map, expected a list"),
            "{e}"
        );
    }

    #[test]
    fn prune_keeps_only_the_named_fields_and_names_where_a_type_is_wrong() {
        assert_eq!(
            prune(
                r#"{"kind": "Pod", "metadata": {"name": "p", "x": [1, {"deep": true}]},
                    "spec": {"containers": [{"name": "c", "image": "i"}, {"image": "j"}],
                             "volumes": [{"name": "v"}]}}"#
            )
            .unwrap(),
            serde_json::json!({"kind": "Pod", "spec": {"containers": [{"name": "c"}, {}]}})
        );
        assert_eq!(
            prune(r#"{"spec": null}"#).unwrap(),
            serde_json::json!({"spec": null})
        );
        let e = prune(r#"{"spec": {"containers": {"name": "c"}}}"#).unwrap_err();
        assert!(
            e.starts_with("spec: containers: invalid type: map, expected a list"),
            "{e}"
        );
        let e = prune(r#"{"spec": "x"}"#).unwrap_err();
        assert!(e.starts_with("spec: invalid type: string"), "{e}");
        let e = prune(r#"{"kind": "Pod", "kind": "Node"}"#).unwrap_err();
        assert!(e.starts_with("duplicate key \"kind\""), "{e}");
        // A field skipped may repeat: it is never stored.
        assert!(prune(r#"{"status": 1, "status": 2}"#).is_ok());
        // The end of the input is the file's, not a field's.
        let e = prune(r#"{"spec": {"containers": ["#).unwrap_err();
        assert!(e.starts_with("EOF while parsing"), "{e}");
    }

    #[test]
    fn field_getters_name_the_field_they_refuse() {
        let v = serde_json::json!({"spec": {"name": "x", "n": 3, "on": true, "list": [1],
                                            "none": null, "obj": {}}});
        assert_eq!(get(&v, "spec.name"), Some(&serde_json::json!("x")));
        assert_eq!(get(&v, "spec.name.deeper"), None);
        assert_eq!(opt_str(&v, "spec.name").unwrap(), Some("x"));
        assert_eq!(opt_str(&v, "spec.none").unwrap(), None);
        assert_eq!(opt_str(&v, "spec.missing").unwrap(), None);
        assert_eq!(
            opt_str(&v, "spec.n").unwrap_err().to_string(),
            "spec.n: expected a string"
        );
        let s = |k: &str| opt_scalar(get(&v, &format!("spec.{k}")), k);
        assert_eq!(s("n").unwrap().as_deref(), Some("3"));
        assert_eq!(s("on").unwrap().as_deref(), Some("true"));
        assert_eq!(s("none").unwrap(), None);
        assert_eq!(s("obj").unwrap_err().to_string(), "obj: expected a scalar");
        assert_eq!(array(get(&v, "spec.list"), "l").unwrap().len(), 1);
        assert!(array(get(&v, "spec.missing"), "l").unwrap().is_empty());
        assert_eq!(
            array(get(&v, "spec.obj"), "spec.obj")
                .unwrap_err()
                .to_string(),
            "spec.obj: expected a list"
        );
    }

    #[test]
    fn yaml_messages_keep_the_innermost_location_only() {
        assert!(is_location("12, column 3"));
        assert!(!is_location("12, column "));
        assert!(!is_location("x, column 3"));
        assert!(ends_with_location("bad at line 1, column 2"));
        assert!(!ends_with_location("bad at line one"));
        let mut opts = serde_saphyr::Options::default();
        opts.with_snippet = false;
        let e =
            serde_saphyr::from_str_with_options::<Strict>("a:\n  b:\n    c: 1\n    c: 2\n", opts)
                .map(|_| ())
                .unwrap_err();
        // serde-saphyr's advice to the programmer goes.
        assert_eq!(
            yaml_msg(&e, "x"),
            "duplicate mapping key: c at line 4, column 5"
        );
        // An error raised in a nested value carries one location per level.
        let nested = <serde_saphyr::Error as serde::de::Error>::custom(
            "bad value at line 3, column 5 at line 2, column 3 at line 1, column 1",
        );
        assert_eq!(yaml_msg(&nested, "x"), "bad value at line 3, column 5");
        let not_a_location =
            <serde_saphyr::Error as serde::de::Error>::custom("look at line 3, see below");
        assert_eq!(yaml_msg(&not_a_location, "x"), "look at line 3, see below");
    }

    /// A sink keeping every element whole, recording the list kind each was handed with;
    /// an element named `bad` is wrong.
    #[derive(Default)]
    struct Collect {
        got: Vec<(usize, Option<String>, String)>,
    }

    impl ListSink for Collect {
        type Item = Value;
        type Seed = Prune;
        type Out = (Vec<(usize, Option<String>, String)>, Option<String>, bool);
        fn seed(&self) -> Prune {
            Prune(Keep::All)
        }
        fn top_field(&self, key: &str) -> Option<Keep> {
            (key == "kind").then_some(Keep::All)
        }
        fn names_kind(item: &Value) -> bool {
            item.get("kind").is_some()
        }
        fn item(
            &mut self,
            index: usize,
            item: Value,
            list_kind: Option<&str>,
        ) -> std::result::Result<(), ReadError> {
            let name = item["name"].as_str().unwrap_or_default().to_owned();
            if name == "bad" {
                return Err(ReadError::Item {
                    index,
                    who: Some(name),
                    error: FieldError::new("spec", "wrong"),
                });
            }
            self.got.push((index, list_kind.map(str::to_owned), name));
            Ok(())
        }
        fn finish(self, top: TopObject) -> std::result::Result<Self::Out, ReadError> {
            Ok((self.got, top.kind, top.saw_items))
        }
    }

    fn list(text: &str) -> std::result::Result<<Collect as ListSink>::Out, String> {
        read_list(
            text.as_bytes(),
            "a list",
            "item too big",
            Collect::default(),
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn list_items_wait_for_the_lists_kind_in_their_order() {
        // kubectl's YAML puts `kind: List` after the items: an element that names its own
        // kind goes at once, the rest wait and keep their order.
        let (got, kind, saw) = list(
            "items:\n- {kind: Pod, name: a}\n- {name: b}\n- {kind: Pod, name: c}\nkind: List\n",
        )
        .unwrap();
        assert_eq!(
            got,
            [
                (0, None, "a".to_string()),
                (1, Some("List".into()), "b".into()),
                (2, Some("List".into()), "c".into()),
            ]
        );
        assert_eq!((kind.as_deref(), saw), (Some("List"), true));
        let (got, _, _) = list(r#"{"kind": "PodList", "items": [{"name": "a"}]}"#).unwrap();
        assert_eq!(got, [(0, Some("PodList".to_string()), "a".to_string())]);
        // A single object: no items.
        let (got, kind, saw) = list("{\"kind\": \"Pod\"}").unwrap();
        assert!(got.is_empty());
        assert_eq!((kind.as_deref(), saw), (Some("Pod"), false));
        assert!(
            list("{\"items\": null}").unwrap().2,
            "items: null is a list"
        );
    }

    #[test]
    fn list_errors_say_which_item() {
        // A wrong element stops the handing over; the rest is still parsed, so a later
        // syntax error is what is reported.
        assert_eq!(
            list(r#"{"kind": "List", "items": [{"name": "a"}, {"name": "bad"}, {"name": "c"}]}"#)
                .unwrap_err(),
            "items[1] (bad): spec: wrong"
        );
        let e = list(r#"{"kind": "List", "items": [{"name": "bad"}, {"name": "c"]}"#).unwrap_err();
        assert!(e.starts_with("items[1]: "), "{e}");
        let e = list(r#"{"items": [], "items": []}"#).unwrap_err();
        assert!(e.starts_with("duplicate key \"items\""), "{e}");
        let e = list(r#"{"kind": 3}"#).unwrap_err();
        assert!(e.starts_with("kind: expected a string"), "{e}");
        assert_eq!(list("\n \n").unwrap_err(), "empty input: expected a list");
        assert_eq!(
            list("\u{1}x").unwrap_err(),
            "not JSON or YAML text (byte 0x01 at offset 0)"
        );
        assert_eq!(
            ReadError::Parse {
                item: None,
                message: "m".into()
            }
            .to_string(),
            "m"
        );
        assert_eq!(
            ReadError::Item {
                index: 4,
                who: None,
                error: FieldError::object("no kind")
            }
            .to_string(),
            "items[4]: no kind"
        );
    }

    #[test]
    fn whole_files_are_read_as_utf8_text_plain_or_gzipped() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("gpuwl-document-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("cr.yaml");
        std::fs::write(&plain, "kind: KubeVirt\n").unwrap();
        assert_eq!(read_text(&plain).unwrap(), "kind: KubeVirt\n");
        let latin1 = dir.join("latin1.yaml");
        std::fs::write(&latin1, b"name: caf\xe9\n").unwrap();
        assert_eq!(
            read_text(&latin1).unwrap_err().to_string(),
            format!("{}: not UTF-8 at byte offset 9", latin1.display())
        );
        let missing = dir.join("missing.yaml");
        let e = read_text(&missing).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: cannot read: ", missing.display())),
            "{e}"
        );
        let gz = dir.join("bundle.gz");
        let mut enc =
            flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
        enc.write_all(b"inside the gzip").unwrap();
        enc.finish().unwrap();
        for (path, want) in [(&gz, "inside the gzip"), (&plain, "kind: KubeVirt\n")] {
            let mut text = String::new();
            open_maybe_gzip(path)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            assert_eq!(text, want);
        }
        assert!(open_maybe_gzip(&missing).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
