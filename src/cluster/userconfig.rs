//! The user's own kubeconfig (`$KUBECONFIG`'s first file, else `~/.kube/config`):
//! `gpuwl cluster up --set-context` merges the cluster's entries into it, and
//! `gpuwl cluster down` takes exactly those entries out again.
//!
//! The merge adds a cluster and a context named after the cluster and a user
//! `<name>-admin`, all pointing at files in the cluster's state directory, and makes the
//! context current. It records in `<state>/user-context.json` which file it changed and
//! which context was current before. [`remove`] (called by [`crate::cluster::down`])
//! deletes those three entries — only while they still point into this cluster's state
//! directory, so entries the user re-pointed elsewhere stay — and makes the previous
//! context current again when it still exists (else no context is current). Every write
//! replaces the file atomically and keeps its permissions (0600 for a new file).

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;
use serde::{Deserialize, Serialize};

use crate::files;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::render;

/// What `--set-context` changed, saved as `<state>/user-context.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The kubeconfig file that was changed.
    pub file: PathBuf,
    /// The context that was current before (`None`: none was).
    pub previous_context: Option<String>,
}

const RECORD: &str = "user-context.json";

/// The user's kubeconfig file: the first entry of `$KUBECONFIG` (unless it is `ours`, the
/// cluster's own kubeconfig), else `$HOME/.kube/config`.
pub fn target(ours: &Path) -> PathBuf {
    std::env::var_os("KUBECONFIG")
        .and_then(|v| std::env::split_paths(&v).next())
        .filter(|p| !p.as_os_str().is_empty() && p != ours)
        .unwrap_or_else(|| super::build::home().join(".kube").join("config"))
}

fn user_name(cluster: &str) -> String {
    format!("{cluster}-admin")
}

fn read(target: &Path) -> Result<Kubeconfig> {
    if target.is_file() {
        Kubeconfig::read_from(target)
            .map_err(|e| Error::failed(format!("cannot read {}", target.display()), e))
    } else {
        Ok(Kubeconfig::default())
    }
}

/// Writes `cfg` to `target` through the one kubeconfig writer ([`super::kubeconfig::write`]),
/// keeping the file's permissions (0600 for a new file).
fn write(target: &Path, cfg: &Kubeconfig) -> Result<()> {
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(target)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600)
    };
    super::kubeconfig::write(target, cfg, mode)
}

/// Checks, before a cluster is started, that `--set-context` can merge into [`target`]:
/// the file is absent or a kubeconfig that reads, and is not a folder; its folder, when it
/// exists, takes a new file.
///
/// Errors: [`Error::Input`] naming `--set-context` and the file (never its contents: a
/// kubeconfig holds credentials).
pub fn check_target(ours: &Path) -> Result<()> {
    let t = target(ours);
    let shown = render::esc(&t.display().to_string());
    if t.is_dir() {
        return Err(Error::Input(format!("--set-context: {shown} is a folder")));
    }
    if t.exists() && Kubeconfig::read_from(&t).is_err() {
        return Err(Error::Input(format!(
            "--set-context: {shown} is not a usable kubeconfig (fix it, or point $KUBECONFIG \
             at another file)"
        )));
    }
    if t.parent().is_some_and(Path::is_dir) {
        files::check_writable(&t, "--set-context")?;
    }
    Ok(())
}

/// Merges the cluster/context/user of `ours` (the cluster's kubeconfig) into [`target`],
/// makes the context `name` current and records the change in `state`. Replaces entries
/// of the same names. Returns the file changed.
///
/// Errors: [`Error::Runtime`] when either file cannot be read or parsed, or the target or
/// the record cannot be written.
pub fn merge(ours: &Path, name: &str, state: &Path) -> Result<PathBuf> {
    let target = target(ours);
    let mine = Kubeconfig::read_from(ours)
        .map_err(|e| Error::failed(format!("cannot read {}", ours.display()), e))?;
    let mut theirs = read(&target)?;
    let record_path = state.join(RECORD);
    // A second --set-context keeps the first record: the context current before gpuwl.
    let previous = match std::fs::read_to_string(&record_path)
        .ok()
        .and_then(|t| serde_json::from_str::<Record>(&t).ok())
    {
        Some(r) if r.file == target => r.previous_context,
        _ => theirs.current_context.clone().filter(|c| c != name),
    };
    let user = user_name(name);
    theirs.clusters.retain(|c| c.name != name);
    theirs.contexts.retain(|c| c.name != name);
    theirs.auth_infos.retain(|a| a.name != user);
    theirs.clusters.extend(mine.clusters);
    theirs.contexts.extend(mine.contexts);
    theirs.auth_infos.extend(mine.auth_infos);
    theirs.current_context = Some(name.to_string());
    if theirs.api_version.is_none() {
        theirs.api_version = Some("v1".into());
        theirs.kind = Some("Config".into());
    }
    let record = Record {
        file: target.clone(),
        previous_context: previous,
    };
    let json = serde_json::to_string_pretty(&record)
        .map_err(|e| Error::failed("cannot record the --set-context entries", e))?;
    files::write_atomic(&record_path, json.as_bytes(), 0o644)?;
    write(&target, &theirs)?;
    Ok(target)
}

/// Undoes [`merge`] for cluster `name` whose state directory is `state`: removes the
/// cluster, context and user it added from the recorded file, while they still point
/// into `state`, and restores the previous current context. Does nothing when `state`
/// holds no record or the file is gone. Returns the file changed, if any.
///
/// Errors: [`Error::Runtime`] when the recorded file exists but cannot be read, parsed or
/// written.
pub fn remove(name: &str, state: &Path) -> Result<Option<PathBuf>> {
    let Some(record) = std::fs::read_to_string(state.join(RECORD))
        .ok()
        .and_then(|t| serde_json::from_str::<Record>(&t).ok())
    else {
        return Ok(None);
    };
    if !record.file.is_file() {
        return Ok(None);
    }
    let mut cfg = read(&record.file)?;
    let inside = |p: Option<&String>| p.is_some_and(|p| Path::new(p).starts_with(state));
    let user = user_name(name);
    let before = (
        cfg.clusters.len(),
        cfg.contexts.len(),
        cfg.auth_infos.len(),
        cfg.current_context.clone(),
    );
    cfg.clusters.retain(|c| {
        !(c.name == name
            && inside(
                c.cluster
                    .as_ref()
                    .and_then(|c| c.certificate_authority.as_ref()),
            ))
    });
    cfg.auth_infos.retain(|a| {
        !(a.name == user
            && inside(
                a.auth_info
                    .as_ref()
                    .and_then(|a| a.client_certificate.as_ref()),
            ))
    });
    let cluster_gone = !cfg.clusters.iter().any(|c| c.name == name);
    cfg.contexts.retain(|c| {
        !(c.name == name
            && cluster_gone
            && c.context
                .as_ref()
                .is_some_and(|x| x.cluster == name && x.user.as_deref() == Some(user.as_str())))
    });
    if cfg.current_context.as_deref() == Some(name) && !cfg.contexts.iter().any(|c| c.name == name)
    {
        cfg.current_context = record
            .previous_context
            .filter(|p| cfg.contexts.iter().any(|c| &c.name == p));
    }
    let after = (
        cfg.clusters.len(),
        cfg.contexts.len(),
        cfg.auth_infos.len(),
        cfg.current_context.clone(),
    );
    if before == after {
        return Ok(None);
    }
    write(&record.file, &cfg)?;
    Ok(Some(record.file))
}
