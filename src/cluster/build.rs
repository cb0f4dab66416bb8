//! The one Go-build pipeline ([`GoModuleBuild`]) of every component built from a pinned
//! Go module — the control plane here (`controlplane/`), the GPU Operator
//! ([`super::gpu_operator`], `controlplane/gpu-operator/`), KubeVirt ([`super::kubevirt`],
//! `controlplane/kubevirt/`), Kueue ([`super::kueue`], `controlplane/kueue/`) — and the
//! control plane's own build.
//!
//! Each module's `go.mod`, `go.sum` and thin `main` wrappers are embedded in the gpuwl
//! binary, so an installed gpuwl builds the same thing outside the repository: it writes
//! them into `<cache>/<key>/src/` and runs `go build` there. `<key>` names the pinned
//! versions plus a hash of the embedded sources and link flags, so a second build with
//! the same pins finds `<cache>/<key>/bin/` (the GPU Operator's `<cache>/<key>/dist/`)
//! and returns at once.
//!
//! `<cache>` is `$GPUWL_CACHE_DIR` when set, else `$XDG_CACHE_HOME/gpuwl/controlplane`,
//! else `$HOME/.cache/gpuwl/controlplane`.
//! `$GPUWL_CONTROLPLANE_BIN` may name a directory that already holds the five binaries
//! (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok); then nothing is built.
//!
//! kube-apiserver, kube-controller-manager and kube-scheduler are one Go program
//! (`controlplane/cmd/kube`, the upstream commands chosen by the name it is started as)
//! with three hard links: one link step instead of three, the slowest part of a warm
//! build and a good part of a cold one (BENCHMARKS.md "First result on a fresh machine").

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::cluster::go::{
    count_packages, failure_line, go_command, go_version, heartbeat, last_line,
};
use gpuwl_core::error::{Error, Result};

/// Kubernetes version of kube-apiserver, kube-controller-manager and kube-scheduler (the
/// `k8s.io/kubernetes` pin).
pub const KUBERNETES_VERSION: &str = "v1.36.3";
/// etcd server version (the `go.etcd.io/etcd/server/v3` pin, the one Kubernetes 1.36.3 uses).
pub(crate) const ETCD_VERSION: &str = "v3.6.8";
/// kwok version (the `sigs.k8s.io/kwok` pin).
pub(crate) const KWOK_VERSION: &str = "v0.8.0";

/// Names of the binaries the build produces, all in one `bin/` directory.
pub const BINARIES: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];

/// The names the one `kube` program ([`MULTI_CALL`]) is linked under.
const MULTI_CALL_NAMES: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The multi-call binary built from `./cmd/kube`.
const MULTI_CALL: &str = "kube";

/// Go packages built, in the module's namespace.
const PACKAGES: [&str; 3] = ["./cmd/etcd", "./cmd/kube", "sigs.k8s.io/kwok/cmd/kwok"];

/// The embedded module: (path relative to the module root, contents).
const SOURCES: [(&str, &str); 4] = [
    ("go.mod", include_str!("../../controlplane/go.mod")),
    ("go.sum", include_str!("../../controlplane/go.sum")),
    (
        "cmd/etcd/main.go",
        include_str!("../../controlplane/cmd/etcd/main.go"),
    ),
    (
        "cmd/kube/main.go",
        include_str!("../../controlplane/cmd/kube/main.go"),
    ),
];

/// Measured cold build on a 2-core machine, used for the estimate (BENCHMARKS.md, "First
/// result on a fresh machine": 253 s and 317 s on fresh machines on 2026-12-02, module
/// downloads included, the second sharing the cores with another build; an earlier 511 s
/// sharing them with a Rust build).
const COLD_BUILD_ESTIMATE_2_CORES: Duration = Duration::from_secs(5 * 60);

/// `-ldflags` for `go build`: strip symbols and stamp the real versions so `--version`
/// of every binary prints them.
pub fn ldflags() -> String {
    let k = KUBERNETES_VERSION;
    let minor = k.split('.').nth(1).unwrap_or("0");
    let major = k.trim_start_matches('v').split('.').next().unwrap_or("1");
    let mut f = vec!["-s".to_string(), "-w".to_string()];
    for pkg in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        f.push(format!("-X {pkg}.gitVersion={k}"));
        f.push(format!("-X {pkg}.gitMajor={major}"));
        f.push(format!("-X {pkg}.gitMinor={minor}"));
        f.push(format!("-X {pkg}.gitTreeState=clean"));
    }
    f.push(format!(
        "-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}"
    ));
    f.push(format!("-X sigs.k8s.io/kwok/pkg/consts.KubeVersion={k}"));
    f.push(format!(
        "-X go.etcd.io/etcd/api/v3/version.GitSHA=go-module-{}",
        ETCD_VERSION
    ));
    f.join(" ")
}

/// The cache key: pinned versions plus 12 hex digits of SHA-256 over the embedded sources
/// and link flags. Changing any pin or wrapper changes the key.
pub fn cache_key() -> String {
    let hex = sources_digest(&SOURCES, &ldflags());
    format!("k8s-{KUBERNETES_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}_{hex}")
}

/// 12 hex digits of SHA-256 over embedded module files (`(path, text)`, each
/// NUL-terminated) and link flags: the variable part of a build cache key.
pub fn sources_digest(sources: &[(&str, &str)], ldflags: &str) -> String {
    let mut h = Sha256::new();
    for (path, text) in sources {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    h.update(ldflags.as_bytes());
    let digest = h.finalize();
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Root of the build cache (see the module docs for the lookup order).
pub(crate) fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("GPUWL_CACHE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache"));
    base.join("gpuwl").join("controlplane")
}

pub(crate) use crate::files::home;

/// Directory holding the five binaries: `$GPUWL_CONTROLPLANE_BIN`, else
/// `<cache>/<key>/bin`. It may not exist yet; see [`ensure_built`].
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GPUWL_CONTROLPLANE_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    cache_root().join(cache_key()).join("bin")
}

/// kwok's default Stages (node initialize + heartbeat with lease, pod ready/complete/
/// delete), copied at build time from the pinned kwok module into `bin/`. kwokctl puts
/// the same stages into the kwok config it writes; kwok refuses to start without them.
pub const KWOK_STAGES_FILE: &str = "kwok-stages.yaml";

/// Stage files inside the kwok module, in the order kwokctl uses them.
const KWOK_STAGES: [&str; 5] = [
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
];

/// True when every binary and the kwok stages file are present in [`bin_dir`].
pub fn is_built() -> bool {
    complete(&bin_dir())
}

fn complete(dir: &Path) -> bool {
    BINARIES.iter().all(|b| dir.join(b).is_file()) && dir.join(KWOK_STAGES_FILE).is_file()
}

/// The control plane as a [`GoModuleBuild`]: the five binaries into `<cache>/<key>/bin`,
/// then the kwok stages file ([`write_kwok_stages`]) ([`finish_bin`]).
fn module() -> GoModuleBuild<'static> {
    GoModuleBuild {
        what: "the control plane",
        versions: format!(
            "Kubernetes {KUBERNETES_VERSION}, etcd {ETCD_VERSION}, kwok {KWOK_VERSION}"
        ),
        key: cache_key(),
        sources: &SOURCES,
        packages: &PACKAGES,
        ldflags: ldflags(),
        estimate_2_cores: COLD_BUILD_ESTIMATE_2_CORES,
        out: "bin",
        complete,
        finish: finish_bin,
    }
}

/// Returns the directory with the five binaries, building them first when missing.
///
/// `progress` shows a progress bar with an estimate on stderr. A cold build takes
/// minutes (see BENCHMARKS.md); a cached one returns at once.
///
/// Errors ([`Error::Runtime`], one line): `go` not on PATH, a module cannot be fetched,
/// the compile failed (the message names the build log), or the cache is not writable.
pub fn ensure_built(progress: bool) -> Result<PathBuf> {
    let dir = bin_dir();
    if complete(&dir) {
        return Ok(dir);
    }
    if std::env::var_os("GPUWL_CONTROLPLANE_BIN").is_some_and(|v| !v.is_empty()) {
        return Err(Error::Runtime(format!(
            "GPUWL_CONTROLPLANE_BIN={} lacks one of {}, {KWOK_STAGES_FILE}",
            dir.display(),
            BINARIES.join(", ")
        )));
    }
    if BINARIES.iter().all(|b| dir.join(b).is_file()) {
        // Binaries from an older gpuwl without the stages file: add it.
        let src = cache_root().join(cache_key()).join("src");
        write_module(&src, &SOURCES)?;
        write_kwok_stages(&src, &dir)?;
        return Ok(dir);
    }
    module().ensure_built(progress)
}

/// Writes embedded module files (`(path, text)`) into the directory `src`.
fn write_module(src: &Path, sources: &[(&str, &str)]) -> Result<()> {
    for (rel, text) in sources {
        let p = src.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::failed(format!("cannot create {}", parent.display()), e))?;
        }
        std::fs::write(&p, text)
            .map_err(|e| Error::failed(format!("cannot write {}", p.display()), e))?;
    }
    Ok(())
}

/// One pinned Go module built by the one build pipeline ([`GoModuleBuild::ensure_built`]):
/// the control plane here, the GPU Operator in [`super::gpu_operator`], KubeVirt's
/// virt-api and virt-controller in [`super::kubevirt`]. Each component describes its build
/// with one value of this type; everything else (the cache folder, the build lock, `go mod
/// download`, the progress display, `go build`, the build log, files copied out of the
/// module, the atomic rename into place) is the pipeline's.
pub struct GoModuleBuild<'a> {
    /// What is built, for messages: `the control plane`, `the GPU Operator`, `KubeVirt`.
    pub what: &'a str,
    /// The versions, for the progress line and the `VERSIONS` file (`Kubernetes v1.36.3,
    /// etcd v3.6.8, …`).
    pub versions: String,
    /// The cache key: `<cache>/<key>/{src,<out>,build.log}`, the lock `<cache>/<key>.lock`.
    pub key: String,
    /// The embedded module files written into `<cache>/<key>/src`.
    pub sources: &'a [(&'a str, &'a str)],
    /// The packages built, all in one `go build`, into the output folder (each binary
    /// named after its package's last path element).
    pub packages: &'a [&'a str],
    /// `-ldflags`.
    pub ldflags: String,
    /// Measured cold build on 2 cores, scaled by the core count for the estimate.
    pub estimate_2_cores: Duration,
    /// The output folder inside `<cache>/<key>/`: `bin` (binaries and what runs beside
    /// them), or `dist` for the GPU Operator (its binary and its manifests).
    pub out: &'a str,
    /// Whether a finished output folder holds everything: the cache hit.
    pub complete: fn(&Path) -> bool,
    /// Writes the files besides the binaries into the unfinished output folder, given
    /// (the module folder `src`, the output folder): kwok's stages, the GPU Operator's
    /// manifests copied out of its module (`module_dir`, `copy_tree`).
    pub finish: fn(&Path, &Path) -> Result<()>,
}

impl GoModuleBuild<'_> {
    /// `<cache>/<key>/<out>`. It may not exist yet; see [`Self::ensure_built`].
    pub fn out_dir(&self) -> PathBuf {
        cache_root().join(&self.key).join(self.out)
    }

    /// True when [`Self::out_dir`] is complete.
    pub fn is_built(&self) -> bool {
        (self.complete)(&self.out_dir())
    }

    /// Returns [`Self::out_dir`], building it first when it is not complete: one build
    /// per cache key (a second gpuwl started meanwhile waits for the lock
    /// `<cache>/<key>.lock` and reuses the first one's build). `progress` shows a bar with
    /// an estimate on stderr (a line every 100 packages without a terminal).
    ///
    /// Errors: [`Error::Runtime`] (one line, naming the build log): Go missing or too old,
    /// a module cannot be fetched, the compile failed, the cache is not writable, or the
    /// build left the folder incomplete.
    pub fn ensure_built(&self, progress: bool) -> Result<PathBuf> {
        let out = self.out_dir();
        if (self.complete)(&out) {
            return Ok(out);
        }
        let lock = cache_root().join(format!("{}.lock", self.key));
        super::lock::build_once(
            &lock,
            || (self.complete)(&out),
            |waited| {
                if progress {
                    note!(
                        "waiting for another gpuwl building {} into the same cache ({} s so far)",
                        self.what,
                        waited.as_secs()
                    );
                }
            },
            || {
                self.build(progress)?;
                if (self.complete)(&out) {
                    Ok(())
                } else {
                    Err(Error::runtime(format!(
                        "{}'s build left {} incomplete",
                        self.what,
                        out.display()
                    )))
                }
            },
        )?;
        Ok(out)
    }

    /// Builds into `<cache>/<key>/<out>` (the caller holds the build lock): writes the
    /// embedded module, `go mod download`, one `go build -trimpath` of every package (CGO
    /// off, `-mod=readonly`) into a partial folder while the packages it compiles are
    /// counted (`go list -deps`) for the progress bar (a line every 100 packages without a
    /// terminal), then
    /// [`Self::finish`], `VERSIONS` (the versions and `go version`), and renames it to
    /// `<out>`. Returns that folder.
    fn build(&self, progress: bool) -> Result<PathBuf> {
        let what = self.what;
        let go_version = go_version(what)?;
        let key_dir = cache_root().join(&self.key);
        let src = key_dir.join("src");
        write_module(&src, self.sources)?;
        let log_path = key_dir.join("build.log");
        let mut log = std::fs::File::create(&log_path)
            .map_err(|e| Error::failed(format!("cannot write {}", log_path.display()), e))?;
        let cores = cores();
        let bar = if progress {
            indicatif::ProgressBar::new_spinner()
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.enable_steady_tick(Duration::from_millis(200));
        if progress {
            note!(
                "building {what} ({}) into {}",
                self.versions,
                key_dir.display()
            );
            let (quiet, busy) = cold_build_minutes(self.estimate_2_cores, cores);
            note!(
                "a cold build takes about {quiet}-{busy} min on {cores} cores (the low end on a quiet machine); later runs reuse the cache"
            );
        }
        // Without a terminal the bar is invisible: print a line every 100 packages instead.
        let plain = progress && !std::io::IsTerminal::is_terminal(&std::io::stderr());
        bar.set_message("fetching Go modules");

        let started = Instant::now();
        download_modules(&src, what, plain, &log_path, &mut log, &bar)?;

        bar.set_message("compiling");
        let partial = key_dir.join(format!("{}.partial-{}", self.out, std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial)
            .map_err(|e| Error::failed(format!("cannot create {}", partial.display()), e))?;
        // The package count (the bar's length) is listed beside the compile, not before it:
        // `go list -deps` loads every package (5 s of a cold control-plane build).
        let (counted, total) = std::sync::mpsc::channel();
        let doing = format!("listing {what}'s packages to compile");
        let compiled = std::thread::scope(|s| {
            s.spawn(|| counted.send(count_packages(&src, false, &doing, self.packages)));
            Compile {
                src: &src,
                log: &mut log,
                bar: &bar,
                plain,
                total,
                counted: 0,
                started,
            }
            .packages(self, cores, &partial)
        });
        bar.finish_and_clear();
        let finished = match compiled {
            Ok(()) => (self.finish)(&src, &partial),
            Err(CompileError::Run(e)) => Err(e),
            Err(CompileError::Failed { name, tail }) => Err(Error::runtime(format!(
                "building {what} ({name}) failed (log {}): {}",
                log_path.display(),
                failure_line(&tail)
            ))),
        };
        if let Err(e) = finished {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
        let versions = format!("{}\n{}\n", self.versions, go_version.trim());
        let _ = std::fs::write(partial.join("VERSIONS"), versions);
        let out = key_dir.join(self.out);
        install_partial(&partial, &out, self.complete)?;
        if progress {
            note!(
                "built {what} in {}s: {}",
                started.elapsed().as_secs(),
                out.display()
            );
        }
        Ok(out)
    }
}

/// `go mod download` of the module in `src` (`what`, for messages), its output into
/// `log`; the bar is cleared when it fails.
fn download_modules(
    src: &Path,
    what: &str,
    plain: bool,
    log_path: &Path,
    log: &mut std::fs::File,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let out = heartbeat(plain, &format!("fetching {what}'s Go modules"), || {
        go_command(src, &["mod", "download"]).output()
    })
    .map_err(|e| Error::failed("cannot run go", e))?;
    let _ = log.write_all(&out.stderr);
    if !out.status.success() {
        bar.finish_and_clear();
        return Err(Error::runtime(format!(
            "cannot fetch {what}'s Go modules (check GOPROXY / network; log {}): {}",
            log_path.display(),
            last_line(&String::from_utf8_lossy(&out.stderr))
        )));
    }
    Ok(())
}

/// Renames the finished `partial` folder to `out`. A complete `out` another build
/// finished first is as good as this one: then `partial` is dropped.
fn install_partial(partial: &Path, out: &Path, complete: fn(&Path) -> bool) -> Result<()> {
    if let Err(e) = std::fs::rename(partial, out) {
        let _ = std::fs::remove_dir_all(partial);
        if !complete(out) {
            return Err(Error::failed(
                format!("cannot move the build to {}", out.display()),
                e,
            ));
        }
    }
    Ok(())
}

/// The progress bar style of a build: `template`, `=> ` as its bar.
fn bar_style(template: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// The CPU cores a build uses (`go build -p`, the estimate): 2 when unknown.
fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// Whole minutes a cold build takes on `cores` cores, from its measured time on 2 on a
/// quiet machine (`estimate_2_cores`), rounded up: the quiet figure and twice it, the
/// range measured with other builds sharing the cores (BENCHMARKS.md: 253-317 s quiet,
/// 511 s and 8 min beside a Rust build), so the printed estimate never promises less
/// than the README says a fresh machine took.
fn cold_build_minutes(estimate_2_cores: Duration, cores: usize) -> (u64, u64) {
    let quiet = estimate_2_cores
        .mul_f64(2.0 / cores.max(1) as f64)
        .as_secs()
        .div_ceil(60);
    (quiet, quiet * 2)
}

/// Why one package of a [`GoModuleBuild`] did not build.
enum CompileError {
    /// go could not be run or waited for.
    Run(Error),
    /// It exited with an error while building binary `name`; `tail` is its last output.
    Failed {
        /// The binary.
        name: String,
        /// The last 20 lines of output.
        tail: Vec<String>,
    },
}

/// The one `go build -v` of a build, its output streamed into the build log and the
/// progress display.
struct Compile<'a> {
    /// The module directory.
    src: &'a Path,
    /// The build log.
    log: &'a mut std::fs::File,
    /// The progress bar, one step per package compiled.
    bar: &'a indicatif::ProgressBar,
    /// Without a terminal: a note every 100 packages.
    plain: bool,
    /// The package count ([`count_packages`]), sent once it is listed beside the compile.
    total: std::sync::mpsc::Receiver<u64>,
    /// The count once received, else 0.
    counted: u64,
    /// When the build started.
    started: Instant,
}

/// `-gcflags` of every build: no DWARF from the compiler. The link drops it anyway
/// (`-ldflags -w`), so the binaries are the same; a cold control-plane build spends less
/// (BENCHMARKS.md, "The first run's Go build in one invocation"). Not part of the cache
/// key, for that reason.
const GCFLAGS: &str = "all=-dwarf=false";

impl Compile<'_> {
    /// `go build -v -p <cores> -trimpath -gcflags <GCFLAGS> -ldflags <ldflags> -o <out>/
    /// <packages…>`: every binary of `b` in one invocation, so one binary's link (one
    /// core) overlaps the others' compiles, and the shared packages are planned once. A
    /// note names the binaries, and each again as its main package compiles (`building
    /// kube (2/3)`; a warm Go cache compiles none, and then the first note is all).
    fn packages(
        &mut self,
        b: &GoModuleBuild<'_>,
        cores: usize,
        out: &Path,
    ) -> std::result::Result<(), CompileError> {
        let names: Vec<&str> = b.packages.iter().map(|p| binary_name(p)).collect();
        self.bar.set_message(names.join(", "));
        if self.plain {
            // A warm Go cache has only links left, and `go build -v` names no package.
            note!(
                "building {} in one go build; each is named when its main package compiles",
                names.join(", ")
            );
        }
        let mains: Vec<String> = b
            .packages
            .iter()
            .map(|p| import_path(module_path(b.sources), p))
            .collect();
        let out_dir = format!("{}/", out.display());
        let p = cores.to_string();
        let mut args = vec![
            "build",
            "-v",
            "-p",
            &p,
            "-trimpath",
            "-gcflags",
            GCFLAGS,
            "-ldflags",
            &b.ldflags,
            "-o",
            &out_dir,
        ];
        args.extend(b.packages);
        let mut child = go_command(self.src, &args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CompileError::Run(Error::failed("cannot run go build", e)))?;
        let mut tail = Vec::new();
        let mut shown = 0;
        if let Some(err) = child.stderr.take() {
            for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                let _ = writeln!(self.log, "{line}");
                if let Some(i) = mains.iter().position(|m| *m == line) {
                    shown += 1;
                    self.binary(names[i], shown, names.len());
                }
                self.step();
                tail.push(line);
                if tail.len() > 20 {
                    tail.remove(0);
                }
            }
        }
        let status = child
            .wait()
            .map_err(|e| CompileError::Run(Error::failed("go build", e)))?;
        if status.success() {
            return Ok(());
        }
        Err(CompileError::Failed {
            name: names.join(", "),
            tail,
        })
    }

    /// A note, without a terminal, that binary `name` (the `i`th of `n` to reach its main
    /// package) compiles and links now; with one, the bar's message says it.
    fn binary(&self, name: &str, i: usize, n: usize) {
        let step = format!("{name} ({i}/{n})");
        self.bar.set_message(step.clone());
        if self.plain {
            note!(
                "building {step}; {} packages compiled, {}s elapsed",
                self.of_total(),
                self.started.elapsed().as_secs()
            );
        }
    }

    /// `N/M`: packages compiled of the count, or `N` while the count is not known yet.
    fn of_total(&self) -> String {
        match self.counted {
            0 => self.bar.position().to_string(),
            total => format!("{}/{total}", self.bar.position()),
        }
    }

    /// One package compiled: a step of the bar (its length set once the count arrives),
    /// and without a terminal a note every 100 packages.
    fn step(&mut self) {
        if self.counted == 0
            && let Ok(n) = self.total.try_recv()
        {
            self.counted = n;
            if n > 0 {
                if !self.bar.is_hidden() {
                    self.bar.set_style(bar_style(
                        "{spinner} building {msg} [{bar:30}] {pos}/{len} packages, {elapsed} elapsed, about {eta} left",
                    ));
                }
                self.bar.set_length(n);
            }
        }
        self.bar.inc(1);
        if self.plain && self.bar.position().is_multiple_of(100) {
            note!(
                "compiled {} packages in {}s",
                self.of_total(),
                self.started.elapsed().as_secs()
            );
        }
    }
}

/// The binary `go build -o <dir>/` names after package `pkg`: its last path element.
fn binary_name(pkg: &str) -> &str {
    pkg.rsplit('/').next().unwrap_or(pkg)
}

/// The module path of embedded module files (the `module` line of their `go.mod`); empty
/// when there is none.
fn module_path<'a>(sources: &[(&str, &'a str)]) -> &'a str {
    sources
        .iter()
        .find(|(path, _)| *path == "go.mod")
        .and_then(|(_, text)| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("module "))
                .map(str::trim)
        })
        .unwrap_or("")
}

/// The import path `go build -v` prints for package `pkg` of module `module`: a relative
/// `./cmd/x` is `<module>/cmd/x`, anything else is already an import path.
fn import_path(module: &str, pkg: &str) -> String {
    match pkg.strip_prefix("./") {
        Some(rel) => format!("{module}/{rel}"),
        None => pkg.to_string(),
    }
}

/// The control plane's [`GoModuleBuild::finish`]: the `kube` program hard-linked as
/// kube-apiserver, kube-controller-manager and kube-scheduler (then removed under its own
/// name), and the kwok stages file ([`write_kwok_stages`]).
///
/// Errors: [`Error::Runtime`] when a link cannot be made (a folder on a file system
/// without hard links) or the stages cannot be read or written.
fn finish_bin(src: &Path, out: &Path) -> Result<()> {
    link_multi_call(out)?;
    write_kwok_stages(src, out)
}

/// Hard-links `out/kube` under each of [`MULTI_CALL_NAMES`] and removes `out/kube`.
fn link_multi_call(out: &Path) -> Result<()> {
    let program = out.join(MULTI_CALL);
    for name in MULTI_CALL_NAMES {
        let link = out.join(name);
        let _ = std::fs::remove_file(&link);
        std::fs::hard_link(&program, &link)
            .map_err(|e| Error::failed(format!("cannot link {}", link.display()), e))?;
    }
    std::fs::remove_file(&program)
        .map_err(|e| Error::failed(format!("cannot remove {}", program.display()), e))
}

/// Writes [`KWOK_STAGES_FILE`] into `out` from the pinned kwok module (downloaded): the
/// control plane's [`GoModuleBuild::finish`].
fn write_kwok_stages(src: &Path, out: &Path) -> Result<()> {
    let dir = module_dir(src, "sigs.k8s.io/kwok")?;
    let mut docs = Vec::new();
    for rel in KWOK_STAGES {
        let p = dir.join(rel);
        docs.push(
            std::fs::read_to_string(&p)
                .map_err(|e| Error::failed(format!("cannot read {}", p.display()), e))?,
        );
    }
    let p = out.join(KWOK_STAGES_FILE);
    std::fs::write(&p, docs.join("\n---\n"))
        .map_err(|e| Error::failed(format!("cannot write {}", p.display()), e))
}

/// Where `module` (a dependency of the module in `src`, downloaded) lies in the Go module
/// cache (`go list -m -f {{.Dir}}`): a [`GoModuleBuild::finish`] copies files from there.
///
/// Errors: [`Error::Runtime`] when go cannot be run or does not know the module.
pub(crate) fn module_dir(src: &Path, module: &str) -> Result<PathBuf> {
    let o = go_command(src, &["list", "-m", "-f", "{{.Dir}}", module])
        .output()
        .map_err(|e| Error::failed("cannot run go", e))?;
    let dir = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    if !o.status.success() || dir.as_os_str().is_empty() {
        return Err(Error::runtime(format!(
            "cannot locate the {module} module: {}",
            last_line(&String::from_utf8_lossy(&o.stderr))
        )));
    }
    Ok(dir)
}

/// Copies the file or folder `from` (inside the Go module cache) to `to`, folders
/// recursively. Files in the module cache are read-only; the copies are made writable so
/// that the build cache can be removed.
///
/// Errors: [`Error::Runtime`] naming the file that cannot be read, created or copied.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let meta = std::fs::metadata(from)
        .map_err(|e| Error::failed(format!("cannot read {}", from.display()), e))?;
    if meta.is_dir() {
        std::fs::create_dir_all(to)
            .map_err(|e| Error::failed(format!("cannot create {}", to.display()), e))?;
        let entries = std::fs::read_dir(from)
            .map_err(|e| Error::failed(format!("cannot read {}", from.display()), e))?;
        for e in entries.flatten() {
            copy_tree(&e.path(), &to.join(e.file_name()))?;
        }
        return Ok(());
    }
    std::fs::copy(from, to).map_err(|e| {
        Error::failed(
            format!("cannot copy {} to {}", from.display(), to.display()),
            e,
        )
    })?;
    let mut perm = meta.permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    let _ = std::fs::set_permissions(to, perm);
    Ok(())
}

/// Path of one binary inside `dir`.
pub(crate) fn binary(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `go build -v` prints a main package by its import path: that is how the one build
    /// tells which binary it has reached.
    #[test]
    fn main_packages_are_known_by_the_import_path_go_prints() {
        let module = module_path(&SOURCES);
        assert_eq!(module, "gpuwl/controlplane");
        let mains: Vec<String> = PACKAGES.iter().map(|p| import_path(module, p)).collect();
        assert_eq!(
            mains,
            [
                "gpuwl/controlplane/cmd/etcd",
                "gpuwl/controlplane/cmd/kube",
                "sigs.k8s.io/kwok/cmd/kwok"
            ]
        );
        let names: Vec<&str> = PACKAGES.iter().map(|p| binary_name(p)).collect();
        assert_eq!(names, ["etcd", "kube", "kwok"]);
        assert_eq!(module_path(&[("main.go", "module x")]), "");
    }

    #[test]
    fn the_estimate_scales_by_cores_and_rounds_up() {
        let five = Duration::from_secs(5 * 60);
        assert_eq!(cold_build_minutes(five, 2), (5, 10));
        assert_eq!(cold_build_minutes(five, 4), (3, 6));
        assert_eq!(cold_build_minutes(five, 16), (1, 2));
        assert_eq!(cold_build_minutes(five, 0), (10, 20));
        assert_eq!(cold_build_minutes(Duration::from_secs(3 * 60), 1), (6, 12));
        // Issue 54, item 11: the control plane's range holds the README's 8.5 minutes.
        let (quiet, busy) = cold_build_minutes(COLD_BUILD_ESTIMATE_2_CORES, 2);
        assert!(quiet <= 8 && busy >= 9, "{quiet}-{busy}");
    }

    /// The refactors of the pipeline keep every component's cache key and output folder:
    /// the builds already in `~/.cache/gpuwl/controlplane` stay valid. A new pin or wrapper
    /// changes a key on purpose (and costs a rebuild): update the key here then.
    #[test]
    fn each_component_keeps_its_cache_key_and_output_folder() {
        let cp = module();
        assert_eq!(cp.key, "k8s-v1.36.3_etcd-v3.6.8_kwok-v0.8.0_b96538caa2c6");
        assert_eq!(cp.out_dir(), cache_root().join(&cp.key).join("bin"));
        assert_eq!(cp.out_dir(), bin_dir());
        assert_eq!(
            super::super::gpu_operator::cache_key(),
            "gpu-operator-v0.0.0-20250917190837-d73a0086a6ba_c786f909ca44"
        );
        assert_eq!(
            super::super::gpu_operator::dist_dir(),
            cache_root()
                .join(super::super::gpu_operator::cache_key())
                .join("dist")
        );
        assert_eq!(
            super::super::kubevirt::cache_key(),
            "kubevirt-v1.7.0_a2b2a3a38197"
        );
        assert_eq!(
            super::super::kubevirt::bin_dir(),
            cache_root()
                .join(super::super::kubevirt::cache_key())
                .join("bin")
        );
    }

    #[test]
    fn the_multi_call_program_is_linked_under_each_name_and_not_kept_under_its_own() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kube"), b"one program").unwrap();
        std::fs::write(dir.path().join("kube-scheduler"), b"left by an earlier try").unwrap();
        link_multi_call(dir.path()).unwrap();
        assert!(!dir.path().join("kube").exists());
        for name in MULTI_CALL_NAMES {
            assert_eq!(
                std::fs::read(dir.path().join(name)).unwrap(),
                b"one program"
            );
        }
        // Without the program (a failed compile) it says which link it could not make.
        let empty = tempfile::tempdir().unwrap();
        let e = link_multi_call(empty.path()).unwrap_err().to_string();
        assert!(
            e.contains("cannot link") && e.contains("kube-apiserver"),
            "{e}"
        );
    }

    #[test]
    fn a_finished_build_is_renamed_into_place_and_a_second_one_dropped() {
        fn has_x(d: &Path) -> bool {
            d.join("x").is_file()
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bin");
        let partial = |n: &str, file: &str| {
            let p = dir.path().join(format!("bin.partial-{n}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(file), n).unwrap();
            p
        };
        let first = partial("1", "x");
        install_partial(&first, &out, has_x).unwrap();
        assert!(!first.exists());
        assert_eq!(std::fs::read_to_string(out.join("x")).unwrap(), "1");
        // Another build finished first: its complete folder stays, this one goes.
        let second = partial("2", "x");
        install_partial(&second, &out, has_x).unwrap();
        assert!(!second.exists());
        assert_eq!(std::fs::read_to_string(out.join("x")).unwrap(), "1");
        // An incomplete folder in the way is an error, not a success.
        let third = partial("3", "x");
        let e = install_partial(&third, &out, |_| false).unwrap_err();
        assert!(e.to_string().contains("cannot move the build to"), "{e}");
        assert!(!third.exists());
    }

    #[test]
    fn files_copied_out_of_the_module_cache_become_writable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("mod");
        std::fs::create_dir_all(from.join("assets/state-a")).unwrap();
        let f = from.join("assets/state-a/0100_daemonset.yaml");
        std::fs::write(&f, "kind: DaemonSet\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
        let to = dir.path().join("out/opt");
        copy_tree(&from.join("assets"), &to).unwrap();
        let copied = to.join("state-a/0100_daemonset.yaml");
        assert_eq!(
            std::fs::read_to_string(&copied).unwrap(),
            "kind: DaemonSet\n"
        );
        assert!(!std::fs::metadata(&copied).unwrap().permissions().readonly());
        let e = copy_tree(&from.join("absent"), &to).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
