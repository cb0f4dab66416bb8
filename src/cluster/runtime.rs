//! The one bridge from gpuwl's blocking code to async work: a current-thread tokio
//! runtime ([`current_thread`]), and a closure or future run to completion on a thread of
//! its own ([`on_own_thread`], [`block_on_own_thread`]), which is safe from inside a tokio
//! runtime (a runtime cannot be blocked on from within another).

use gpuwl_core::error::{Error, Result};

/// A current-thread tokio runtime with I/O and timers on.
///
/// Errors: [`Error::Failed`] when it cannot start.
pub(crate) fn current_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::failed("cannot start the async runtime", e))
}

/// Runs `f` on a thread of its own and returns what it returns.
///
/// Errors: `f`'s, or [`Error::Runtime`] when the thread panics.
pub(crate) fn on_own_thread<T, E>(
    f: impl FnOnce() -> std::result::Result<T, E> + Send + 'static,
) -> std::result::Result<T, E>
where
    T: Send + 'static,
    E: From<Error> + Send + 'static,
{
    std::thread::spawn(f).join().map_err(|_| {
        E::from(Error::runtime(
            "internal error: a task on a thread of its own panicked",
        ))
    })?
}

/// Runs `fut` to completion on a current-thread runtime of its own thread ([`on_own_thread`]):
/// safe to call from inside a tokio runtime.
///
/// Errors: [`Error::Runtime`] when the runtime cannot start or the thread panics.
pub(crate) fn block_on_own_thread<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    on_own_thread(move || Ok(current_thread()?.block_on(fut)))
}
