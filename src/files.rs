//! Writing result files: atomically, so a reader sees the old file or the whole new one;
//! where gpuwl keeps its own files ([`state_root`], `home`). (Rendering lives in
//! [`crate::render`]; it builds text and never touches files.)

use gpuwl_core::error::{Error, Result};
use gpuwl_core::render;

/// Checks, before any work, that a result file can be written at `path`: its folder
/// exists, is a folder, and a file can be made there (one is made and removed at once);
/// `path` itself is not a folder. `what` names the flag (`-o`).
///
/// Errors: [`gpuwl_core::error::Error::Input`] naming the path and what is wrong with it.
pub fn check_writable(path: &std::path::Path, what: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let bad = |why: String| {
        Error::Input(format!(
            "{what} {}: {why}",
            render::esc(&path.display().to_string())
        ))
    };
    if path.is_dir() {
        return Err(bad("is a folder".into()));
    }
    match std::fs::metadata(dir) {
        Err(_) => {
            return Err(bad(format!(
                "the folder {} does not exist",
                render::esc(&dir.display().to_string())
            )));
        }
        Ok(m) if !m.is_dir() => {
            return Err(bad(format!(
                "{} is not a folder",
                render::esc(&dir.display().to_string())
            )));
        }
        Ok(_) => {}
    }
    tempfile::Builder::new()
        .prefix(".gpuwl-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| {
            bad(format!(
                "cannot write in the folder {} ({})",
                render::esc(&dir.display().to_string()),
                std::io::Error::from(e.kind())
            ))
        })
}

/// Writes `contents` to `path` atomically: a temporary file in the same folder is written,
/// flushed, given `mode` (Unix permission bits) and renamed over `path`, so a reader sees
/// either the old file or the whole new one, never half of it.
///
/// Errors: [`gpuwl_core::error::Error::Failed`] naming the path when the folder is missing or not writable.
pub fn write_atomic(path: &std::path::Path, contents: &[u8], mode: u32) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    // The error names `path`, never the temporary file (its kind, without the path
    // tempfile puts in its message).
    let fail = |e: std::io::Error| {
        Error::failed(
            format!("cannot write {}", path.display()),
            std::io::Error::from(e.kind()),
        )
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".gpuwl-")
        .tempfile_in(dir)
        .map_err(fail)?;
    std::io::Write::write_all(&mut tmp, contents).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))
            .map_err(fail)?;
    }
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

/// The home directory: `$HOME`, else `/tmp`.
pub(crate) fn home() -> std::path::PathBuf {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/tmp"))
}

/// Directory under which every local cluster's state lives (`gpuwl cluster`):
/// `$GPUWL_STATE_DIR`, else `$XDG_STATE_HOME/gpuwl/clusters`, else
/// `$HOME/.local/state/gpuwl/clusters`.
pub fn state_root() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("GPUWL_STATE_DIR").filter(|v| !v.is_empty()) {
        return std::path::PathBuf::from(d);
    }
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| home().join(".local").join("state"))
        .join("gpuwl")
        .join("clusters")
}
