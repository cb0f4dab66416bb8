//! One JSON or YAML document (a manifest, a CR, a List) parsed into a `serde_json::Value`
//! that rejects repeated keys, and the field getters that name the field in their errors.
//! Used by the pod and custom-resource readers; node dumps stream instead ([`super::dump`]).

use std::fmt;

use serde_json::Value;

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
            .map_err(|e| err(e.to_string())),
        Some(_) => {
            let mut opts = serde_saphyr::Options::default();
            opts.with_snippet = false;
            serde_saphyr::from_str_with_options::<Strict>(body, opts)
                .map(|s| s.0)
                .map_err(|e| err(crate::input::dump::yaml_msg(&e, expecting)))
        }
    }
}

/// The largest manifest or dump read into memory whole (pods, CRs): 4 GiB.
pub const MAX_DOCUMENT: u64 = 4 << 30;

/// Reads a whole document from `path` (`-`: stdin), failing early on input that cannot be
/// JSON or YAML text: a first non-blank byte that is a control character (`/dev/zero`), or
/// bytes that are not UTF-8 (with the offset), and on more than [`MAX_DOCUMENT`] bytes.
///
/// Errors: [`Error::File`] `<name>: cannot read: ...`, `<name>: not JSON or YAML text
/// (byte 0x00 at offset 0)`, `<name>: not UTF-8 at byte offset N`, `<name>: larger than
/// 4 GiB`.
pub fn read_text(path: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let name = path.display().to_string();
    let mut input: Box<dyn Read> = if name == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(path).map_err(|e| Error::read(path, e))?)
    };
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut checked = false;
    let mut valid = 0;
    loop {
        let n = input.read(&mut chunk).map_err(|e| Error::read(path, e))?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
        if !checked {
            let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
            if let Some((i, &b)) = body
                .iter()
                .enumerate()
                .find(|(_, b)| !b.is_ascii_whitespace())
            {
                if b.is_ascii_control() {
                    return Err(Error::file(
                        path,
                        format!("not JSON or YAML text (byte 0x{b:02x} at offset {i})"),
                    ));
                }
                checked = true;
            }
        }
        // UTF-8 checked as it arrives: random bytes fail within the first chunk.
        match std::str::from_utf8(&bytes[valid..]) {
            Ok(_) => valid = bytes.len(),
            Err(e) if e.error_len().is_some() => {
                return Err(Error::file(
                    path,
                    format!("not UTF-8 at byte offset {}", valid + e.valid_up_to()),
                ));
            }
            Err(e) => valid += e.valid_up_to(),
        }
        if bytes.len() as u64 > MAX_DOCUMENT {
            return Err(Error::file(path, "larger than 4 GiB"));
        }
    }
    String::from_utf8(bytes).map_err(|e| {
        Error::file(
            path,
            format!("not UTF-8 at byte offset {}", e.utf8_error().valid_up_to()),
        )
    })
}

/// A value echoed in an error, cut to 80 characters (`"abc…" (52428800 bytes)`), quoted
/// with Rust escapes so that it is one line: errors name values, they never dump them.
pub fn cut(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(MAX).collect();
    format!("{:?}… ({} bytes)", head, s.len())
}

/// Collapses whitespace runs (newlines included) to one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

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

/// The value at a dotted path (`spec.configuration.permittedHostDevices`).
pub fn get<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(v, |v, k| v.get(k))
}

/// See the module docs.
pub fn opt_str<'a>(v: &'a Value, dotted: &str) -> std::result::Result<Option<&'a str>, FieldError> {
    match get(v, dotted) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(FieldError::new(dotted, "expected a string")),
    }
}

/// See the module docs.
pub fn opt_scalar(
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
