//! Advisory locks between gpuwl processes on one machine: a build of one cache key, the
//! twin of one name, the lab on one cluster name. Each is an exclusive `flock(2)` on a
//! `.lock` file beside what it guards; the kernel drops it when the process exits (a
//! killed run never leaves a stale lock), and two opens of the file in one process
//! exclude each other too (flock locks belong to the open file description; `flock(2)`,
//! Linux man-pages).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuwl_core::error::{Error, Result};

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct Lock {
    file: File,
    path: PathBuf,
}

impl Lock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: flock on a descriptor this value owns.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

/// Opens (creating) `path` and tries to lock it without waiting: `Ok(None)` when another
/// holder has it.
///
/// Errors: [`Error::Runtime`] when the file cannot be created or flock fails otherwise.
pub fn try_lock(path: &Path) -> Result<Option<Lock>> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::failed(format!("cannot create {}", parent.display()), e))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::failed(format!("cannot open {}", path.display()), e))?;
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(Some(Lock {
            file,
            path: path.to_owned(),
        }));
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(Error::failed(
            format!("cannot lock {}", path.display()),
            err,
        ))
    }
}

/// Locks `path`, waiting for another holder for up to `limit`; `waiting` is called once
/// when the lock is taken (to say so), then every 15 s with the time waited.
///
/// Errors: as [`try_lock`]; [`Error::Runtime`] when `limit` passes.
pub fn lock_waiting(
    path: &Path,
    limit: Duration,
    mut waiting: impl FnMut(Duration),
) -> Result<Lock> {
    let start = Instant::now();
    let mut next_note = Duration::ZERO;
    loop {
        if let Some(l) = try_lock(path)? {
            return Ok(l);
        }
        let waited = start.elapsed();
        if waited >= limit {
            return Err(Error::Runtime(format!(
                "{} is still held by another gpuwl after {} s",
                path.display(),
                waited.as_secs()
            )));
        }
        if waited >= next_note {
            waiting(waited);
            next_note = waited + Duration::from_secs(15);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Runs `build` at most once per `lock_path` among concurrent callers: the first takes the
/// lock and builds unless `is_built` already holds; the others wait for it (`waiting` says
/// so) and then find the result built. Returns whether this call built.
///
/// Errors: the lock's; `build`'s.
pub fn build_once(
    lock_path: &Path,
    is_built: impl Fn() -> bool,
    waiting: impl FnMut(Duration),
    build: impl FnOnce() -> Result<()>,
) -> Result<bool> {
    if is_built() {
        return Ok(false);
    }
    // A cold build takes minutes on two cores: wait as long as a build may take.
    let _held = lock_waiting(lock_path, Duration::from_secs(3 * 3600), waiting)?;
    if is_built() {
        return Ok(false);
    }
    build()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn a_held_lock_excludes_a_second_holder_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let a = try_lock(&p).unwrap().expect("free");
        assert!(try_lock(&p).unwrap().is_none(), "held by a");
        drop(a);
        assert!(try_lock(&p).unwrap().is_some(), "free again");
    }

    #[test]
    fn two_builds_of_one_key_at_once_build_once() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("key.lock");
        let done = Arc::new(AtomicBool::new(false));
        let builds = Arc::new(AtomicUsize::new(0));
        let waited = Arc::new(AtomicUsize::new(0));
        let run = |done: Arc<AtomicBool>, builds: Arc<AtomicUsize>, waited: Arc<AtomicUsize>| {
            let lock = lock.clone();
            std::thread::spawn(move || {
                build_once(
                    &lock,
                    || done.load(Ordering::SeqCst),
                    |_| {
                        waited.fetch_add(1, Ordering::SeqCst);
                    },
                    || {
                        builds.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(600));
                        done.store(true, Ordering::SeqCst);
                        Ok(())
                    },
                )
                .unwrap()
            })
        };
        let a = run(done.clone(), builds.clone(), waited.clone());
        std::thread::sleep(Duration::from_millis(100));
        let b = run(done.clone(), builds.clone(), waited.clone());
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(builds.load(Ordering::SeqCst), 1, "one compile");
        assert!(ra && !rb, "the first built, the second reused it");
        assert_eq!(waited.load(Ordering::SeqCst), 1, "the second said it waits");
    }

    #[test]
    fn a_wait_has_a_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("y.lock");
        let _held = try_lock(&p).unwrap().unwrap();
        let e = lock_waiting(&p, Duration::from_millis(300), |_| {}).unwrap_err();
        assert!(e.to_string().contains("still held by another gpuwl"), "{e}");
    }
}
