//! SIGINT and SIGTERM as something a long run can wait for.
//!
//! The first call of [`received`] replaces the default action of both signals (the
//! process ends at once) with a latch: from then on a signal is remembered, and every
//! [`received`], the ones started before it and after it, returns its name. Commands that
//! create something they must take down again (`whatif`'s twin, `relabel`'s steps) wait
//! on it beside their work with `tokio::select!`, clean up and exit with
//! [`gpuwl_core::error::ExitStatus::Interrupted`] (130).

use std::sync::OnceLock;
use tokio::sync::watch;

/// The latch: `None` until a signal came, then its name.
static LATCH: OnceLock<watch::Receiver<Option<&'static str>>> = OnceLock::new();

/// Installs the handlers (once, on the calling runtime) and returns the latch.
fn latch() -> watch::Receiver<Option<&'static str>> {
    LATCH
        .get_or_init(|| {
            let (tx, rx) = watch::channel(None);
            use tokio::signal::unix::{SignalKind, signal};
            match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::spawn(async move {
                        let name = tokio::select! {
                            _ = int.recv() => "SIGINT",
                            _ = term.recv() => "SIGTERM",
                        };
                        let _ = tx.send(Some(name));
                        // Later signals are latched already; keep the handlers so that
                        // they do not end the process during the clean-up.
                        loop {
                            tokio::select! {
                                _ = int.recv() => {},
                                _ = term.recv() => {},
                            }
                        }
                    });
                }
                // No handler could be installed: the default action stays, and nothing
                // is ever latched.
                _ => drop(tx),
            }
            rx
        })
        .clone()
}

/// Waits for SIGINT or SIGTERM and returns `"SIGINT"` or `"SIGTERM"`; at once when one
/// came since the first call. Never returns when the handlers could not be installed.
/// Must be called inside a tokio runtime.
pub async fn received() -> &'static str {
    let mut rx = latch();
    match rx.wait_for(|v| v.is_some()).await {
        Ok(v) => v.unwrap_or("SIGINT"),
        Err(_) => std::future::pending().await,
    }
}

/// The signal latched so far, without waiting (`None` before [`received`] was first
/// called, or when none came).
pub fn pending() -> Option<&'static str> {
    LATCH.get().and_then(|rx| *rx.borrow())
}
