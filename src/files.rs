//! Writing result files: atomically, so a reader sees the old file or the whole new one.
//! (Rendering lives in [`crate::render`]; it builds text and never touches files.)

/// Writes `contents` to `path` atomically: a temporary file in the same folder is written,
/// flushed, given `mode` (Unix permission bits) and renamed over `path`, so a reader sees
/// either the old file or the whole new one, never half of it.
///
/// Errors: [`crate::error::Error::Failed`] naming the path when the folder is missing or not writable.
pub fn write_atomic(
    path: &std::path::Path,
    contents: &[u8],
    mode: u32,
) -> crate::error::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let fail = |e: std::io::Error| {
        crate::error::Error::failed(format!("cannot write {}", path.display()), e)
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
