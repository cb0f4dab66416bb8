//! Process-wide bounds on what the readers read, so that a small hostile file (a gzip
//! bomb, a million-item list) fails fast with one line instead of taking the machine's
//! memory: the total of uncompressed bytes read ([`Limits::input_bytes`],
//! `--max-input-bytes`), the bytes of one file or archive member
//! ([`Limits::member_bytes`], `--max-member-bytes`) and the items of one list
//! ([`Limits::items`], `--max-items`).
//!
//! The limits are set once per process by the command line ([`set`]) and read by every
//! reader ([`get`]); the defaults ([`Limits::DEFAULT`]) fit a 5,000-node cluster with room
//! (the Kubernetes scalability limits are 5,000 nodes and 150,000 pods; a 5,000-node
//! node dump is about 100 MB, a 150,000-pod dump about 1.5 GB).
//!
//! Where they are enforced: [`Bounded`] wraps every file a reader opens
//! ([`crate::decode::document::open`]) and the decompressed stream of every tar archive
//! (`--max-input-bytes` in all, `--max-member-bytes` per file); tar members are checked by
//! the size their header declares before a byte of them is read; the list readers count
//! `items` as they stream them ([`crate::decode::document`], the node reader's JSON path,
//! the must-gather describe text). A limit crossed is an error whose message names the
//! limit and its flag ([`input_message`], [`member_message`], [`items_message`]), exit 2.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The reader limits of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most uncompressed bytes the process reads from files, stdin and archives, all
    /// together (bytes). `--max-input-bytes`.
    pub input_bytes: u64,
    /// The most bytes of one file, stdin or archive member (uncompressed bytes).
    /// `--max-member-bytes`.
    pub member_bytes: u64,
    /// The most items of one list (a node, pod or DRA list, a must-gather bundle's operand
    /// pods, the nodes of its describe text). `--max-items`.
    pub items: u64,
}

impl Limits {
    /// 8 GiB read in all, 4 GiB per file or member, 300,000 items per list.
    pub const DEFAULT: Limits = Limits {
        input_bytes: 8 << 30,
        member_bytes: 4 << 30,
        items: 300_000,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

static INPUT_BYTES: AtomicU64 = AtomicU64::new(Limits::DEFAULT.input_bytes);
static MEMBER_BYTES: AtomicU64 = AtomicU64::new(Limits::DEFAULT.member_bytes);
static ITEMS: AtomicU64 = AtomicU64::new(Limits::DEFAULT.items);
/// Uncompressed bytes read so far by the process, through [`Bounded`] readers.
static READ: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last limit crossed on this thread, until [`take_hit`] takes it.
    static HIT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Sets the process's limits (the command line does, once, before reading anything).
pub fn set(l: Limits) {
    INPUT_BYTES.store(l.input_bytes, Ordering::Relaxed);
    MEMBER_BYTES.store(l.member_bytes, Ordering::Relaxed);
    ITEMS.store(l.items, Ordering::Relaxed);
}

/// The process's limits ([`Limits::DEFAULT`] until [`set`]).
pub fn get() -> Limits {
    Limits {
        input_bytes: INPUT_BYTES.load(Ordering::Relaxed),
        member_bytes: MEMBER_BYTES.load(Ordering::Relaxed),
        items: ITEMS.load(Ordering::Relaxed),
    }
}

/// Uncompressed bytes the process has read through [`Bounded`] readers so far.
pub fn bytes_read() -> u64 {
    READ.load(Ordering::Relaxed)
}

/// A byte count as a person reads it: `8 GiB`, `300 MiB`, `1.5 KiB`, `17 bytes`.
pub fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{:.1} {unit}", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// The message of `--max-input-bytes` crossed at `max` bytes.
pub fn input_message(max: u64) -> String {
    format!(
        "more than {} read in all (the --max-input-bytes limit, {max}; raise it to read more)",
        human(max)
    )
}

/// The message of `--max-member-bytes` crossed at `max` bytes.
pub fn member_message(max: u64) -> String {
    format!(
        "larger than {} (the --max-member-bytes limit, {max}; raise it to read more)",
        human(max)
    )
}

/// The message of `--max-items` crossed at `max` items.
pub fn items_message(max: u64) -> String {
    format!("more than {max} items in one list (the --max-items limit; raise it to read more)")
}

/// Records `message` as the limit crossed on this thread (see [`take_hit`]) and returns it.
pub fn hit(message: String) -> String {
    HIT.with(|h| *h.borrow_mut() = Some(message.clone()));
    message
}

/// The last limit crossed on this thread since the last call, if any: a reader that turns
/// read errors into notes (the must-gather bundle's files) makes it fatal with this.
pub fn take_hit() -> Option<String> {
    HIT.with(|h| h.borrow_mut().take())
}

/// Checks that item `index` (0-based) of a list is within [`Limits::items`].
///
/// Errors: [`items_message`] (also recorded by [`hit`]).
pub fn check_item(index: usize) -> std::result::Result<(), String> {
    let max = ITEMS.load(Ordering::Relaxed);
    if index as u64 >= max {
        return Err(hit(items_message(max)));
    }
    Ok(())
}

/// Checks a declared size (a tar member's header) against [`Limits::member_bytes`].
///
/// Errors: [`member_message`] (also recorded by [`hit`]).
pub fn check_member(size: u64) -> std::result::Result<(), String> {
    let max = MEMBER_BYTES.load(Ordering::Relaxed);
    if size > max {
        return Err(hit(member_message(max)));
    }
    Ok(())
}

/// The error a [`Bounded`] reader returns past a limit: `io::ErrorKind::InvalidData` whose
/// inner error is this (see [`limit_of`]).
#[derive(Debug)]
pub struct LimitError(pub String);

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitError {}

/// The limit message an I/O error carries, when it is a [`Bounded`] reader's.
pub fn limit_of(e: &std::io::Error) -> Option<&str> {
    e.get_ref()
        .and_then(|i| i.downcast_ref::<LimitError>())
        .map(|l| l.0.as_str())
}

/// A reader that counts what passes through it against [`Limits::input_bytes`] (all
/// `Bounded` readers of the process together) and, per reader, a member limit (e.g.
/// [`Limits::member_bytes`]).
pub struct Bounded<R> {
    inner: R,
    read: u64,
    member_max: u64,
}

impl<R: std::io::Read> Bounded<R> {
    /// Wraps one file or stdin: at most [`Limits::member_bytes`] bytes of it.
    pub fn file(inner: R) -> Bounded<R> {
        Bounded {
            inner,
            read: 0,
            member_max: MEMBER_BYTES.load(Ordering::Relaxed),
        }
    }

    /// Wraps an archive's (decompressed) stream: its members are checked one by one, so
    /// only the process-wide total applies here.
    pub fn archive(inner: R) -> Bounded<R> {
        Bounded {
            inner,
            read: 0,
            member_max: u64::MAX,
        }
    }

    fn fail(message: String) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, LimitError(hit(message)))
    }
}

impl<R: std::io::Read> std::io::Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.member_max {
            return Err(Self::fail(member_message(self.member_max)));
        }
        let total = READ.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        let max = INPUT_BYTES.load(Ordering::Relaxed);
        if total > max {
            return Err(Self::fail(input_message(max)));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(8 << 30), "8 GiB");
        assert_eq!(human(3 << 19), "1.5 MiB");
        assert_eq!(human(1024), "1 KiB");
        assert_eq!(human(17), "17 bytes");
    }

    #[test]
    fn a_bounded_file_stops_past_its_member_limit_naming_the_flag() {
        let data = vec![b'x'; 100];
        let mut r = Bounded {
            inner: data.as_slice(),
            read: 0,
            member_max: 64,
        };
        let mut out = Vec::new();
        let e = r.read_to_end(&mut out).unwrap_err();
        assert_eq!(
            limit_of(&e),
            Some("larger than 64 bytes (the --max-member-bytes limit, 64; raise it to read more)")
        );
        assert_eq!(take_hit().as_deref(), limit_of(&e));
        assert_eq!(take_hit(), None);
        // Within the limit: everything, no hit.
        let mut ok = Bounded::file(data.as_slice());
        let mut out = Vec::new();
        assert_eq!(ok.read_to_end(&mut out).unwrap(), 100);
        assert_eq!(take_hit(), None);
    }

    #[test]
    fn items_and_members_past_the_defaults_are_refused() {
        assert!(check_item(299_999).is_ok());
        assert_eq!(
            check_item(300_000).unwrap_err(),
            "more than 300000 items in one list (the --max-items limit; raise it to read more)"
        );
        assert!(check_member(4 << 30).is_ok());
        assert!(
            check_member((4 << 30) + 1)
                .unwrap_err()
                .starts_with("larger than 4 GiB (the --max-member-bytes limit")
        );
        take_hit();
    }
}
