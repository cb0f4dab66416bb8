//! The lab's result files: atomic writes and the `bin/check-config.sh` wrapper.

use std::path::{Path, PathBuf};

use gpuwl_core::error::{Error, Result};

pub use crate::files::write_atomic;

/// Writes a text file of `lines`, each ending in `\n`, atomically with mode 0644.
///
/// Errors: as [`write_atomic`].
pub fn write_lines<S: AsRef<str>>(path: &Path, lines: &[S]) -> Result<()> {
    let mut text = String::new();
    for l in lines {
        text.push_str(l.as_ref());
        text.push('\n');
    }
    write_atomic(path, text.as_bytes(), 0o644)
}

/// Quotes `s` for a POSIX shell: `'…'` with each `'` written as `'\''`.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The text of `bin/check-config.sh`: a POSIX sh script that runs `gpuwl check` on its
/// one argument (a `kubectl get nodes -o json` dump). It calls `gpuwl_bin` (the absolute
/// path of the binary that wrote it) and falls back to `gpuwl` on PATH when that file is
/// gone. Without an argument it prints usage on stderr and exits 2; otherwise it exits with
/// `gpuwl check`'s code (0 OK, 1 MISMATCH, 2 bad input).
pub fn check_script(gpuwl_bin: &Path) -> String {
    let bin = sh_quote(&gpuwl_bin.to_string_lossy());
    format!(
        r#"#!/bin/sh
# check-config.sh — written by `gpuwl lab` (step 8).
# Judges, per node carrying the nvidia.com/gpu.workload.config label, whether the label
# value agrees with the nvidia.com/ resources the node advertises (allocatable > 0):
#   container -> nvidia.com/gpu (or a MIG / shared name); vm-vgpu -> a vGPU type such as
#   NVIDIA_A10-12Q; vm-passthrough -> a device-model name such as GA102GL_A10.
# Prints MISMATCH=<node> <reason> per disagreeing node and exits 1, else OK=<n> and 0.
set -u
if [ "$#" -ne 1 ]; then
    echo "usage: $0 <node-json-file>   (kubectl get nodes -o json output)" >&2
    exit 2
fi
GPUWL={bin}
if [ ! -x "$GPUWL" ]; then
    GPUWL=gpuwl
fi
exec "$GPUWL" check -- "$1"
"#
    )
}

/// The folders of a lab root `R`: `R/out`, `R/bin`, `R/k8s`.
#[derive(Debug, Clone)]
pub struct LabDirs {
    /// `R/out`: result files.
    pub out: PathBuf,
    /// `R/bin`: `check-config.sh`.
    pub bin: PathBuf,
    /// `R/k8s`: the Pod manifests.
    pub k8s: PathBuf,
}

impl LabDirs {
    /// The three folders under `root` (not created).
    pub fn new(root: &Path) -> Self {
        LabDirs {
            out: root.join("out"),
            bin: root.join("bin"),
            k8s: root.join("k8s"),
        }
    }

    /// Creates the three folders (and `root`) if missing.
    ///
    /// Errors: [`Error::Runtime`] naming the folder that cannot be created.
    pub fn create(&self) -> Result<()> {
        for d in [&self.out, &self.bin, &self.k8s] {
            std::fs::create_dir_all(d)
                .map_err(|e| Error::failed(format!("cannot create {}", d.display()), e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.txt");
        write_lines(&p, &["a", "b"]).unwrap();
        write_lines(&p, &["c"]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "c\n");
        write_atomic(&p, b"#!/bin/sh\n", 0o755).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        // no temporary file is left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(sh_quote("/a b/it's"), r"'/a b/it'\''s'");
    }

    #[test]
    fn script_without_argument_prints_usage_and_exits_2() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("check-config.sh");
        write_atomic(
            &p,
            check_script(Path::new("/nonexistent/gpuwl")).as_bytes(),
            0o755,
        )
        .unwrap();
        let out = std::process::Command::new(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: "));
        assert!(out.stdout.is_empty());
    }
}
