//! Certificates of one local cluster, made by the one generator ([`crate::pki`]: rcgen,
//! ECDSA P-256) and written as files.
//!
//! Files written into `<state>/pki/`:
//! - `ca.crt`, `ca.key`: the cluster CA (client CA of the API server, trusted by the kubeconfig);
//! - `apiserver.crt`, `apiserver.key`: serving cert for 127.0.0.1 / localhost;
//! - `admin.crt`, `admin.key`: client cert `CN=gpuwl-admin, O=system:masters`, used by the
//!   kubeconfig, kube-scheduler and kwok;
//! - `controller-manager.crt`, `controller-manager.key`: client cert
//!   `CN=system:kube-controller-manager`, the user the API server's bootstrap RBAC policy
//!   binds to the `system:kube-controller-manager` ClusterRole (kubernetes/kubernetes
//!   `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`), so kube-controller-manager
//!   runs with the permissions a kubeadm cluster gives it, not as `system:masters`;
//! - `sa.key`, `sa.pub`: service-account token signing key and its public half, shared by
//!   the API server (`--service-account-signing-key-file`, `--service-account-key-file`)
//!   and kube-controller-manager (`--service-account-private-key-file`).
//!
//! etcd's own, in the same directory ([`generate_etcd`]): etcd serves only clients that
//! present a certificate of its CA (`--client-cert-auth`), so that no local user reaches
//! the cluster's data around the API server (issue 50):
//! - `etcd-ca.crt`: a CA of etcd's own (its key is not kept), so no certificate of the
//!   cluster CA — the admin's, a kubeconfig user's, one kube-controller-manager signs for a
//!   CertificateSigningRequest — opens etcd;
//! - `etcd-server.crt`, `etcd-server.key`: etcd's serving and peer certificate for
//!   127.0.0.1 / localhost (serverAuth and clientAuth: the peer listener uses it both ways);
//! - `etcd-client.crt`, `etcd-client.key`: the client certificate of kube-apiserver
//!   (`CN=kube-apiserver-etcd-client`, as kubeadm names it) and of `gpuwl cluster status`'s
//!   health probe — the only etcd clients.
//!
//! With KubeVirt (`gpuwl cluster up --kubevirt`, [`generate_kubevirt`]), in the same
//! directory:
//! - `kubevirt-ca.crt`: a CA of KubeVirt's own, as virt-operator keeps one
//!   (`kubevirt-ca`): the webhooks' `caBundle` and the request-header CA virt-api requires;
//! - `kubevirt.crt`, `kubevirt.key`: serving certificate for 127.0.0.1 signed by it
//!   (virt-api's TLS and virt-handler client pair, virt-controller's metrics).

use std::net::IpAddr;
use std::path::Path;

use crate::pki::{self, Ca, CaScope, Leaf, Purpose};
use gpuwl_core::error::{Error, Result};

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::failed(format!("cannot write {}", path.display()), e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::failed(format!("cannot write {}", path.display()), e))
}

/// Writes a public file (a certificate), naming it in the error.
fn write_public(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|e| Error::failed(format!("cannot write {}", path.display()), e))
}

/// 127.0.0.1, the one address every serving certificate here names.
const LOOPBACK: [IpAddr; 1] = [IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)];

/// Generates every certificate and key into `dir` (created if missing), through the one
/// generator ([`crate::pki`]).
pub fn generate(dir: &Path, cluster: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failed(format!("cannot create {}", dir.display()), e))?;
    let ca = Ca::new(&format!("gpuwl-{cluster}-ca"), CaScope::Any)?;
    let server = ca.issue(&Leaf {
        common_name: "kube-apiserver",
        organization: None,
        dns_names: &[
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ],
        ips: &LOOPBACK,
        purpose: Purpose::Server,
    })?;
    let client = |common_name: &str, organization: Option<&str>| {
        ca.issue(&Leaf {
            common_name,
            organization,
            dns_names: &[],
            ips: &[],
            purpose: Purpose::Client,
        })
    };
    let admin = client("gpuwl-admin", Some("system:masters"))?;
    let kcm = client("system:kube-controller-manager", None)?;
    let (sa_key, sa_pub) = pki::key_pair()?;

    let w = |file: &str, text: &str| write_public(&dir.join(file), text);
    let p = |file: &str, text: &str| write_private(&dir.join(file), text);
    w("ca.crt", ca.cert_pem())?;
    p("ca.key", &ca.key_pem())?;
    w("apiserver.crt", &server.cert_pem)?;
    p("apiserver.key", &server.key_pem)?;
    w("admin.crt", &admin.cert_pem)?;
    p("admin.key", &admin.key_pem)?;
    w("controller-manager.crt", &kcm.cert_pem)?;
    p("controller-manager.key", &kcm.key_pem)?;
    p("sa.key", &sa_key)?;
    w("sa.pub", &sa_pub)?;
    generate_etcd(dir, cluster)
}

/// The files [`generate_etcd`] writes.
pub(crate) const ETCD_FILES: [&str; 5] = [
    "etcd-ca.crt",
    "etcd-server.crt",
    "etcd-server.key",
    "etcd-client.crt",
    "etcd-client.key",
];

/// Generates etcd's CA, its serving/peer certificate and the one client certificate into
/// `dir` (see the module docs), through the one generator ([`crate::pki`]). The CA's key is
/// not kept: nothing else is ever signed by it.
///
/// Errors: [`Error::Runtime`] when a file cannot be written, [`Error::Pki`] from rcgen.
pub fn generate_etcd(dir: &Path, cluster: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failed(format!("cannot create {}", dir.display()), e))?;
    let ca = Ca::new(&format!("gpuwl-{cluster}-etcd-ca"), CaScope::Any)?;
    let server = ca.issue(&Leaf {
        common_name: "etcd",
        organization: None,
        dns_names: &["localhost".to_string()],
        ips: &LOOPBACK,
        purpose: Purpose::ServerAndClient,
    })?;
    let client = ca.issue(&Leaf {
        common_name: "kube-apiserver-etcd-client",
        organization: None,
        dns_names: &[],
        ips: &[],
        purpose: Purpose::Client,
    })?;
    write_public(&dir.join("etcd-ca.crt"), ca.cert_pem())?;
    write_public(&dir.join("etcd-server.crt"), &server.cert_pem)?;
    write_private(&dir.join("etcd-server.key"), &server.key_pem)?;
    write_public(&dir.join("etcd-client.crt"), &client.cert_pem)?;
    write_private(&dir.join("etcd-client.key"), &client.key_pem)
}

/// [`generate_etcd`] when any of its files is missing (a cluster made before etcd had
/// client-certificate TLS, restarted).
///
/// Errors: as [`generate_etcd`].
pub fn ensure_etcd(dir: &Path, cluster: &str) -> Result<()> {
    if ETCD_FILES.iter().all(|f| dir.join(f).is_file()) {
        return Ok(());
    }
    generate_etcd(dir, cluster)
}

/// Generates KubeVirt's CA and the serving certificate of virt-api and virt-controller for
/// 127.0.0.1 / localhost into `dir` (see the module docs for the files). The CA's key is
/// not kept: nothing else is ever signed by it.
pub fn generate_kubevirt(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failed(format!("cannot create {}", dir.display()), e))?;
    let ca = Ca::new("gpuwl-kubevirt-ca", CaScope::Any)?;
    let cert = ca.issue(&Leaf {
        common_name: "virt-api",
        organization: None,
        dns_names: &["localhost".to_string()],
        ips: &LOOPBACK,
        purpose: Purpose::ServerAndClient,
    })?;
    write_public(&dir.join("kubevirt-ca.crt"), ca.cert_pem())?;
    write_public(&dir.join("kubevirt.crt"), &cert.cert_pem)?;
    write_private(&dir.join("kubevirt.key"), &cert.key_pem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::tests::{seen, signed_by};
    use std::os::unix::fs::PermissionsExt;

    fn read(dir: &Path, f: &str) -> String {
        std::fs::read_to_string(dir.join(f)).unwrap()
    }

    fn mode(dir: &Path, f: &str) -> u32 {
        std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_cluster_pki_names_each_user_and_host_and_keeps_keys_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        generate(&dir, "golden").unwrap();
        let ca = read(&dir, "ca.crt");
        let ca_seen = seen(&ca);
        assert_eq!(ca_seen.subject, "CN=gpuwl-golden-ca");
        assert_eq!(ca_seen.ca, Some((true, None)));
        let api = seen(&read(&dir, "apiserver.crt"));
        assert_eq!(api.subject, "CN=kube-apiserver");
        assert_eq!(api.issuer, "CN=gpuwl-golden-ca");
        assert_eq!(api.ext_key_usage, ["serverAuth"]);
        assert_eq!(
            api.sans,
            [
                "DNS:localhost",
                "DNS:kubernetes",
                "DNS:kubernetes.default",
                "DNS:kubernetes.default.svc",
                "DNS:kubernetes.default.svc.cluster.local",
                "IP:127.0.0.1"
            ]
        );
        let admin = seen(&read(&dir, "admin.crt"));
        assert_eq!(admin.subject, "CN=gpuwl-admin, O=system:masters");
        assert_eq!(admin.ext_key_usage, ["clientAuth"]);
        let kcm = seen(&read(&dir, "controller-manager.crt"));
        assert_eq!(kcm.subject, "CN=system:kube-controller-manager");
        assert_eq!(kcm.ext_key_usage, ["clientAuth"]);
        for crt in ["apiserver.crt", "admin.crt", "controller-manager.crt"] {
            assert!(signed_by(&read(&dir, crt), &ca), "{crt}");
        }
        for key in [
            "ca.key",
            "apiserver.key",
            "admin.key",
            "controller-manager.key",
            "sa.key",
        ] {
            assert!(read(&dir, key).contains("BEGIN PRIVATE KEY"), "{key}");
            assert_eq!(mode(&dir, key), 0o600, "{key}");
        }
        assert!(read(&dir, "sa.pub").starts_with("-----BEGIN PUBLIC KEY-----"));
    }

    #[test]
    fn etcd_has_a_ca_of_its_own_that_signs_no_cluster_user() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        generate(&dir, "golden").unwrap();
        let etcd_ca = read(&dir, "etcd-ca.crt");
        assert_eq!(seen(&etcd_ca).subject, "CN=gpuwl-golden-etcd-ca");
        let server = read(&dir, "etcd-server.crt");
        let s = seen(&server);
        assert_eq!(s.subject, "CN=etcd");
        assert_eq!(s.sans, ["DNS:localhost", "IP:127.0.0.1"]);
        assert_eq!(s.ext_key_usage, ["serverAuth", "clientAuth"]);
        let client = read(&dir, "etcd-client.crt");
        assert_eq!(seen(&client).subject, "CN=kube-apiserver-etcd-client");
        assert_eq!(seen(&client).ext_key_usage, ["clientAuth"]);
        assert!(signed_by(&server, &etcd_ca) && signed_by(&client, &etcd_ca));
        // No certificate of the cluster CA opens etcd, and etcd's CA signs none of them.
        let ca = read(&dir, "ca.crt");
        assert!(!signed_by(&client, &ca));
        for crt in ["admin.crt", "controller-manager.crt", "apiserver.crt"] {
            assert!(!signed_by(&read(&dir, crt), &etcd_ca), "{crt}");
        }
        for key in ["etcd-server.key", "etcd-client.key"] {
            assert_eq!(mode(&dir, key), 0o600, "{key}");
        }
        assert!(!dir.join("etcd-ca.key").exists());
        // ensure_etcd keeps what is there, and makes what is missing.
        ensure_etcd(&dir, "golden").unwrap();
        assert_eq!(read(&dir, "etcd-client.crt"), client);
        std::fs::remove_file(dir.join("etcd-client.key")).unwrap();
        ensure_etcd(&dir, "golden").unwrap();
        assert_ne!(read(&dir, "etcd-client.crt"), client);
        assert!(signed_by(
            &read(&dir, "etcd-client.crt"),
            &read(&dir, "etcd-ca.crt")
        ));
    }

    #[test]
    fn kubevirt_gets_its_own_ca_and_a_serving_and_client_pair() {
        let tmp = tempfile::tempdir().unwrap();
        generate_kubevirt(tmp.path()).unwrap();
        let ca = read(tmp.path(), "kubevirt-ca.crt");
        assert_eq!(seen(&ca).subject, "CN=gpuwl-kubevirt-ca");
        let cert = read(tmp.path(), "kubevirt.crt");
        let s = seen(&cert);
        assert_eq!(s.subject, "CN=virt-api");
        assert_eq!(s.sans, ["DNS:localhost", "IP:127.0.0.1"]);
        assert_eq!(s.ext_key_usage, ["serverAuth", "clientAuth"]);
        assert!(signed_by(&cert, &ca));
        assert_eq!(mode(tmp.path(), "kubevirt.key"), 0o600);
        assert!(!tmp.path().join("kubevirt-ca.key").exists());
    }
}
