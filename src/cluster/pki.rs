//! Certificates of one local cluster, generated with `rcgen` (ECDSA P-256).
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
//! With KubeVirt (`gpuwl cluster up --kubevirt`, [`generate_kubevirt`]), in the same
//! directory:
//! - `kubevirt-ca.crt`: a CA of KubeVirt's own, as virt-operator keeps one
//!   (`kubevirt-ca`): the webhooks' `caBundle` and the request-header CA virt-api requires;
//! - `kubevirt.crt`, `kubevirt.key`: serving certificate for 127.0.0.1 signed by it
//!   (virt-api's TLS and virt-handler client pair, virt-controller's metrics).

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::{Error, Result};

fn rt(e: rcgen::Error) -> Error {
    Error::Pki(Box::new(e))
}

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

fn name(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(o) = org {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

/// The parameters of a CA named `common_name` that signs certificates (and CRLs), with no
/// path-length limit; both [`generate`] and [`generate_kubevirt`] self-sign one.
fn ca_params(common_name: &str) -> Result<CertificateParams> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(rt)?;
    ca.distinguished_name = name(common_name, None);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca)
}

/// Writes a public file (a certificate), naming it in the error.
fn write_public(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|e| Error::failed(format!("cannot write {}", path.display()), e))
}

/// Generates every certificate and key into `dir` (created if missing).
pub fn generate(dir: &Path, cluster: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failed(format!("cannot create {}", dir.display()), e))?;

    let ca_key = KeyPair::generate().map_err(rt)?;
    let ca = ca_params(&format!("gpuwl-{cluster}-ca"))?;
    let ca_cert = ca.self_signed(&ca_key).map_err(rt)?;
    let issuer = Issuer::new(ca, &ca_key);

    let server_key = KeyPair::generate().map_err(rt)?;
    let mut server = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ])
    .map_err(rt)?;
    server
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    server.distinguished_name = name("kube-apiserver", None);
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server.signed_by(&server_key, &issuer).map_err(rt)?;

    let client = |cn: &str, org: Option<&str>| -> Result<(String, String)> {
        let key = KeyPair::generate().map_err(rt)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rt)?;
        params.distinguished_name = name(cn, org);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &issuer).map_err(rt)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (admin_cert, admin_key) = client("gpuwl-admin", Some("system:masters"))?;
    let (kcm_cert, kcm_key) = client("system:kube-controller-manager", None)?;

    let sa_key = KeyPair::generate().map_err(rt)?;

    let w = |file: &str, text: &str| write_public(&dir.join(file), text);
    w("ca.crt", &ca_cert.pem())?;
    write_private(&dir.join("ca.key"), &ca_key.serialize_pem())?;
    w("apiserver.crt", &server_cert.pem())?;
    write_private(&dir.join("apiserver.key"), &server_key.serialize_pem())?;
    w("admin.crt", &admin_cert)?;
    write_private(&dir.join("admin.key"), &admin_key)?;
    w("controller-manager.crt", &kcm_cert)?;
    write_private(&dir.join("controller-manager.key"), &kcm_key)?;
    write_private(&dir.join("sa.key"), &sa_key.serialize_pem())?;
    w("sa.pub", &sa_key.public_key_pem())?;
    Ok(())
}

/// Generates KubeVirt's CA and the serving certificate of virt-api and virt-controller for
/// 127.0.0.1 / localhost into `dir` (see the module docs for the files). The CA's key is
/// not kept: nothing else is ever signed by it.
pub fn generate_kubevirt(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failed(format!("cannot create {}", dir.display()), e))?;
    let ca_key = KeyPair::generate().map_err(rt)?;
    let ca = ca_params("gpuwl-kubevirt-ca")?;
    let ca_cert = ca.self_signed(&ca_key).map_err(rt)?;
    let issuer = Issuer::new(ca, &ca_key);
    let key = KeyPair::generate().map_err(rt)?;
    let mut server = CertificateParams::new(vec!["localhost".to_string()]).map_err(rt)?;
    server
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    server.distinguished_name = name("virt-api", None);
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = server.signed_by(&key, &issuer).map_err(rt)?;
    write_public(&dir.join("kubevirt-ca.crt"), &ca_cert.pem())?;
    write_public(&dir.join("kubevirt.crt"), &cert.pem())?;
    write_private(&dir.join("kubevirt.key"), &key.serialize_pem())
}
