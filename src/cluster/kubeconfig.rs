//! The one kubeconfig writer of the local cluster: every kubeconfig gpuwl writes is a typed
//! [`Kubeconfig`] (kube's own type, the one its client reads) serialised as YAML here.
//!
//! - `<state>/kubeconfig` (the admin's: client certificate `pki/admin.crt`) and
//!   `<state>/controller-manager.kubeconfig` (`pki/controller-manager.crt`), written by
//!   `up` ([`single`] with [`Credentials::ClientCert`]);
//! - `<state>/kubevirt/<sa>.kubeconfig`, a KubeVirt ServiceAccount's bearer token
//!   ([`Credentials::Token`], `super::kubevirt::install`);
//! - the user's own kubeconfig after `--set-context` and `down` (`super::userconfig`, which
//!   reads it, changes its entries and writes it back through [`write`](fn@write)).

use crate::input::live::{self, ClusterArgs, Flavour};
use std::path::Path;

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use crate::files;
use gpuwl_core::error::{Error, Result};

/// How a kubeconfig's user authenticates.
#[derive(Debug, Clone, Copy)]
pub enum Credentials<'a> {
    /// A client certificate and its key, as files.
    ClientCert {
        /// The certificate (`client-certificate`).
        cert: &'a Path,
        /// Its key (`client-key`).
        key: &'a Path,
    },
    /// A bearer token (`token`): the file holding it must be private.
    Token(&'a str),
}

/// One cluster, one user and one context joining them: what [`single`] writes.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The cluster entry's name.
    pub cluster: &'a str,
    /// The API server's URL.
    pub server: &'a str,
    /// The CA file the server's certificate is checked against.
    pub ca: &'a Path,
    /// The context's name (the current context).
    pub context: &'a str,
    /// The user entry's name.
    pub user: &'a str,
    /// How the user authenticates.
    pub credentials: Credentials<'a>,
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A kubeconfig (`apiVersion: v1`, `kind: Config`) holding `e`'s cluster, user and context,
/// the context current.
pub fn single(e: &Entry<'_>) -> Kubeconfig {
    let mut user = AuthInfo::default();
    match e.credentials {
        Credentials::ClientCert { cert, key } => {
            user.client_certificate = Some(s(cert));
            user.client_key = Some(s(key));
        }
        Credentials::Token(token) => user.token = Some(token.to_string().into()),
    }
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: e.cluster.to_string(),
            cluster: Some(Cluster {
                server: Some(e.server.to_string()),
                certificate_authority: Some(s(e.ca)),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: e.user.to_string(),
            auth_info: Some(user),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: e.context.to_string(),
            context: Some(Context {
                cluster: e.cluster.to_string(),
                user: Some(e.user.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(e.context.to_string()),
        kind: Some("Config".into()),
        api_version: Some("v1".into()),
        ..Default::default()
    }
}

/// `cfg` as YAML.
///
/// Errors: [`Error::Runtime`] when it cannot be serialised (it always can).
pub fn to_yaml(cfg: &Kubeconfig) -> Result<String> {
    serde_saphyr::to_string(cfg).map_err(|e| Error::failed("cannot write a kubeconfig", e))
}

/// Writes `cfg` to `path` atomically with permission bits `mode` (0600 for a file holding
/// a token), creating its folder when missing.
///
/// Errors: [`Error::Runtime`] naming the path when it cannot be written.
pub fn write(path: &Path, cfg: &Kubeconfig, mode: u32) -> Result<()> {
    let text = to_yaml(cfg)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::failed(format!("cannot create {}", parent.display()), e))?;
    }
    files::write_atomic(path, text.as_bytes(), mode)
}

/// A one-shot client from a kubeconfig file, using `context` or the file's current
/// context, each response awaited [`crate::input::live::DEFAULT_REQUEST_TIMEOUT`] at most
/// ([`crate::input::live::connect`]).
///
/// Errors: [`Error::Runtime`] when the file cannot be read or parsed or its certificates
/// cannot be loaded: a broken kubeconfig of gpuwl's own cluster is a runtime failure
/// (exit 3), not the user's bad input.
pub async fn client(kubeconfig: &Path, context: Option<&str>) -> Result<kube::Client> {
    let args = ClusterArgs::file(kubeconfig, context);
    match live::connect(&args, Flavour::OneShot).await {
        Ok(c) => Ok(c.client),
        Err(e) if e.is_input() => Err(Error::OwnInput(Box::new(e))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// What kube's reader makes of a written kubeconfig: the one current context's
    /// cluster (name, server, CA) and user (name, certificate, key, token).
    fn read_back(path: &Path) -> (String, Cluster, String, AuthInfo) {
        let k = Kubeconfig::read_from(path).unwrap();
        assert_eq!(k.api_version.as_deref(), Some("v1"));
        assert_eq!(k.kind.as_deref(), Some("Config"));
        let current = k.current_context.clone().unwrap();
        let ctx = k
            .contexts
            .iter()
            .find(|c| c.name == current)
            .and_then(|c| c.context.clone())
            .unwrap();
        let cluster = k
            .clusters
            .iter()
            .find(|c| c.name == ctx.cluster)
            .and_then(|c| c.cluster.clone())
            .unwrap();
        let user = ctx.user.clone().unwrap();
        let auth = k
            .auth_infos
            .iter()
            .find(|a| a.name == user)
            .and_then(|a| a.auth_info.clone())
            .unwrap();
        (format!("{}/{}", ctx.cluster, current), cluster, user, auth)
    }

    #[test]
    fn a_client_certificate_kubeconfig_reads_back_through_kube() {
        let dir = tempfile::tempdir().unwrap();
        let pki = PathBuf::from("/state/pki");
        let path = dir.path().join("controller-manager.kubeconfig");
        let cfg = single(&Entry {
            cluster: "golden",
            server: "https://127.0.0.1:6443",
            ca: &pki.join("ca.crt"),
            context: "golden",
            user: "system:kube-controller-manager",
            credentials: Credentials::ClientCert {
                cert: &pki.join("controller-manager.crt"),
                key: &pki.join("controller-manager.key"),
            },
        });
        write(&path, &cfg, 0o644).unwrap();
        let (names, cluster, user, auth) = read_back(&path);
        assert_eq!(names, "golden/golden");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/state/pki/ca.crt")
        );
        assert_eq!(user, "system:kube-controller-manager");
        assert_eq!(
            auth.client_certificate.as_deref(),
            Some("/state/pki/controller-manager.crt")
        );
        assert_eq!(
            auth.client_key.as_deref(),
            Some("/state/pki/controller-manager.key")
        );
        assert!(auth.token.is_none());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        // The YAML a Go client reads: the fields client-go names, nothing it would not.
        let text = std::fs::read_to_string(&path).unwrap();
        for field in [
            "apiVersion: v1",
            "kind: Config",
            "current-context: golden",
            "certificate-authority: /state/pki/ca.crt",
            "client-certificate: /state/pki/controller-manager.crt",
            "client-key: /state/pki/controller-manager.key",
        ] {
            assert!(text.contains(field), "{field} in\n{text}");
        }
        assert!(!text.contains("null"), "{text}");
    }

    #[test]
    fn a_token_kubeconfig_reads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join("kubevirt")
            .join("kubevirt-apiserver.kubeconfig");
        let cfg = single(&Entry {
            cluster: "local",
            server: "https://127.0.0.1:6443",
            ca: Path::new("/state/pki/ca.crt"),
            context: "default",
            user: "kubevirt-apiserver",
            credentials: Credentials::Token("eyJhbGciOi.abc-_def"),
        });
        write(&path, &cfg, 0o600).unwrap();
        let (names, _, user, auth) = read_back(&path);
        assert_eq!(names, "local/default");
        assert_eq!(user, "kubevirt-apiserver");
        assert_eq!(token(&auth).as_deref(), Some("eyJhbGciOi.abc-_def"));
        assert!(auth.client_certificate.is_none());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// The token of an [`AuthInfo`], read through its serialised form (kube keeps it as a
    /// secret only its own serialiser exposes).
    fn token(a: &AuthInfo) -> Option<String> {
        serde_json::to_value(a).unwrap()["token"]
            .as_str()
            .map(str::to_string)
    }
}

#[cfg(test)]
mod client_tests {
    use super::*;
    use crate::testing::{self, FakeApi};

    #[test]
    fn the_clusters_own_kubeconfig_broken_is_a_runtime_failure() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let dir = tempfile::tempdir().unwrap();
        let rt = testing::rt();
        let good = testing::kubeconfig(dir.path(), https.port);
        let c = rt.block_on(client(&good, None)).unwrap();
        let v = rt.block_on(c.apiserver_version()).unwrap();
        assert_eq!(v.git_version, "v1.36.3-fake");
        let bad = dir.path().join("broken");
        std::fs::write(&bad, "apiVersion: v1\nkind: Config\nclusters: {").unwrap();
        let err = rt.block_on(client(&bad, None)).err().unwrap();
        assert!(matches!(err, Error::OwnInput(_)), "{err:?}");
        assert_eq!(err.exit_status(), gpuwl_core::error::ExitStatus::Runtime);
        assert!(err.to_string().contains("broken"), "{err}");
        let err = rt.block_on(client(&good, Some("nope"))).err().unwrap();
        assert!(matches!(err, Error::OwnInput(_)), "{err:?}");
        assert!(err.to_string().contains("nope"), "{err}");
    }
}
