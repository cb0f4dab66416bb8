//! The one certificate generator of gpuwl (rcgen, ECDSA P-256): a CA ([`Ca::new`]) and the
//! leaf certificates it signs ([`Ca::issue`]), plus a bare key pair ([`key_pair`]).
//!
//! Two users: the local cluster's PKI (`cluster::pki`: the cluster CA, the API server's
//! serving certificate, the admin and kube-controller-manager client certificates, the
//! ServiceAccount signing key, KubeVirt's CA and serving certificate, all written into
//! `<state>/pki/`) and the admission guard's throw-away CA and serving certificate, kept in
//! memory (`serve::tls::generate`). Nothing here writes a file; rcgen is used nowhere
//! else.
//!
//! Every leaf has the key usages `digitalSignature` and `keyEncipherment` and the extended
//! key usages of its [`Purpose`]; its subject alternative names are the DNS names given
//! (a name that parses as an IP address becomes an IP SAN, as rcgen reads it) and then the
//! IP addresses given. Every certificate is valid from [`BACKDATE`] before it is made (a
//! clock a little behind still accepts it) for [`VALIDITY`] (rcgen's default was 1975 to
//! 4096). Rotation: the local cluster makes its PKI afresh at every `gpuwl cluster up`;
//! the admission guard makes its certificate at every start of `gpuwl serve` (a guard
//! serving its own certificate must be restarted within the year; one given
//! `--admission-cert` files, e.g. from cert-manager, follows their rotation).

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use gpuwl_core::error::{Error, Result};

/// How long before it is made a certificate is valid from: 5 minutes.
pub const BACKDATE: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// How long a certificate is valid, from when it is made: 365 days.
pub const VALIDITY: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// Sets `params`' validity: from [`BACKDATE`] before now for [`VALIDITY`].
fn valid_from_now(params: &mut CertificateParams) {
    let now = std::time::SystemTime::now();
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + VALIDITY).into();
}

fn pki(e: rcgen::Error) -> Error {
    Error::Pki(Box::new(e))
}

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub(crate) struct Issued {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

/// What a CA may sign below itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaScope {
    /// Any chain (no path-length limit); key usages `keyCertSign`, `cRLSign` and
    /// `digitalSignature`: the local cluster's CA and KubeVirt's.
    Any,
    /// Leaf certificates only (path length 0); key usages `keyCertSign` and `cRLSign`: the
    /// admission guard's throw-away CA.
    LeavesOnly,
}

/// What a leaf certificate is for: its extended key usages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `serverAuth`: a serving certificate.
    Server,
    /// `clientAuth`: a client certificate (its subject is the user and group).
    Client,
    /// `serverAuth` and `clientAuth`: KubeVirt's pair, which serves and calls virt-handler.
    ServerAndClient,
}

/// A leaf certificate's subject, names and purpose.
#[derive(Debug, Clone, Copy)]
pub struct Leaf<'a> {
    /// The subject's common name (a client certificate's user).
    pub common_name: &'a str,
    /// The subject's organization (a client certificate's group), if any.
    pub organization: Option<&'a str>,
    /// DNS names, the first subject alternative names.
    pub dns_names: &'a [String],
    /// IP addresses, the subject alternative names after the DNS names.
    pub ips: &'a [IpAddr],
    /// Its extended key usages.
    pub purpose: Purpose,
}

/// A self-signed CA, kept in memory with its key to sign [`Leaf`] certificates.
pub struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

impl Ca {
    /// A fresh key and a CA certificate `CN=<common_name>` self-signed with it.
    ///
    /// Errors: [`Error::Pki`] when rcgen fails.
    pub fn new(common_name: &str, scope: CaScope) -> Result<Ca> {
        let key = KeyPair::generate().map_err(pki)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
        params.distinguished_name = name(common_name, None);
        valid_from_now(&mut params);
        (params.is_ca, params.key_usages) = match scope {
            CaScope::Any => (
                IsCa::Ca(BasicConstraints::Unconstrained),
                vec![
                    KeyUsagePurpose::KeyCertSign,
                    KeyUsagePurpose::CrlSign,
                    KeyUsagePurpose::DigitalSignature,
                ],
            ),
            CaScope::LeavesOnly => (
                IsCa::Ca(BasicConstraints::Constrained(0)),
                vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
            ),
        };
        let cert = params.self_signed(&key).map_err(pki)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM (what clients trust: a kubeconfig's
    /// `certificate-authority`, a webhook's `caBundle`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key, PEM (kube-controller-manager signs CSRs with the cluster's).
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A fresh key and a certificate for `leaf` signed by this CA.
    ///
    /// Errors: [`Error::Pki`] when rcgen fails (a DNS name it cannot encode).
    pub(crate) fn issue(&self, leaf: &Leaf<'_>) -> Result<Issued> {
        let key = KeyPair::generate().map_err(pki)?;
        let mut params = CertificateParams::new(leaf.dns_names.to_vec()).map_err(pki)?;
        params
            .subject_alt_names
            .extend(leaf.ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.distinguished_name = name(leaf.common_name, leaf.organization);
        valid_from_now(&mut params);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = match leaf.purpose {
            Purpose::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Purpose::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Purpose::ServerAndClient => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        let cert = params.signed_by(&key, &self.issuer).map_err(pki)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A fresh key pair, PEM: (private key, public key). The local cluster's ServiceAccount
/// token signing key.
///
/// Errors: [`Error::Pki`] when rcgen fails.
pub fn key_pair() -> Result<(String, String)> {
    let key = KeyPair::generate().map_err(pki)?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;
    use x509_parser::pem::parse_x509_pem;

    /// The parts of a certificate the tests compare, read back with x509-parser.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) struct Seen {
        pub subject: String,
        pub issuer: String,
        pub ca: Option<(bool, Option<u32>)>,
        pub key_usage: Vec<&'static str>,
        pub ext_key_usage: Vec<&'static str>,
        pub sans: Vec<String>,
    }

    pub(crate) fn seen(pem: &str) -> Seen {
        let (_, pem) = parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let ca = cert
            .basic_constraints()
            .unwrap()
            .map(|b| (b.value.ca, b.value.path_len_constraint));
        let mut key_usage = Vec::new();
        if let Some(k) = cert.key_usage().unwrap() {
            let k = k.value;
            for (on, n) in [
                (k.digital_signature(), "digitalSignature"),
                (k.key_encipherment(), "keyEncipherment"),
                (k.key_cert_sign(), "keyCertSign"),
                (k.crl_sign(), "cRLSign"),
            ] {
                if on {
                    key_usage.push(n);
                }
            }
        }
        let mut ext_key_usage = Vec::new();
        if let Some(e) = cert.extended_key_usage().unwrap() {
            if e.value.server_auth {
                ext_key_usage.push("serverAuth");
            }
            if e.value.client_auth {
                ext_key_usage.push("clientAuth");
            }
        }
        let sans = cert
            .subject_alternative_name()
            .unwrap()
            .map(|s| {
                s.value
                    .general_names
                    .iter()
                    .map(|g| match g {
                        GeneralName::DNSName(d) => format!("DNS:{d}"),
                        GeneralName::IPAddress(b) if b.len() == 4 => {
                            format!("IP:{}", IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()))
                        }
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Seen {
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            ca,
            key_usage,
            ext_key_usage,
            sans,
        }
    }

    /// Whether `leaf`'s signature verifies with `ca`'s public key.
    pub(crate) fn signed_by(leaf: &str, ca: &str) -> bool {
        let (_, leaf) = parse_x509_pem(leaf.as_bytes()).unwrap();
        let (_, ca) = parse_x509_pem(ca.as_bytes()).unwrap();
        let leaf = leaf.parse_x509().unwrap();
        let ca = ca.parse_x509().unwrap();
        leaf.verify_signature(Some(ca.public_key())).is_ok()
    }

    /// (not before, not after) of `pem`, seconds since the epoch.
    fn validity(pem: &str) -> (i64, i64) {
        let (_, pem) = parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let v = cert.validity();
        (v.not_before.timestamp(), v.not_after.timestamp())
    }

    #[test]
    fn certificates_are_valid_from_five_minutes_ago_for_a_year() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let ca = Ca::new("gpuwl-x-ca", CaScope::LeavesOnly).unwrap();
        let leaf = ca
            .issue(&Leaf {
                common_name: "x",
                organization: None,
                dns_names: &["localhost".into()],
                ips: &[],
                purpose: Purpose::Server,
            })
            .unwrap();
        for pem in [ca.cert_pem(), leaf.cert_pem.as_str()] {
            let (from, to) = validity(pem);
            assert!(
                (from - (now - 300)).abs() <= 5,
                "not before {from}, now {now}"
            );
            assert!(
                (to - (now + 365 * 86_400)).abs() <= 5,
                "not after {to}, now {now}"
            );
        }
    }

    #[test]
    fn a_ca_of_any_scope_signs_chains_and_its_own_certificate() {
        let ca = Ca::new("gpuwl-x-ca", CaScope::Any).unwrap();
        assert_eq!(
            seen(ca.cert_pem()),
            Seen {
                subject: "CN=gpuwl-x-ca".into(),
                issuer: "CN=gpuwl-x-ca".into(),
                ca: Some((true, None)),
                key_usage: vec!["digitalSignature", "keyCertSign", "cRLSign"],
                ext_key_usage: vec![],
                sans: vec![],
            }
        );
        assert!(signed_by(ca.cert_pem(), ca.cert_pem()));
        assert!(ca.key_pem().contains("BEGIN PRIVATE KEY"));
        assert!(!format!("{ca:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_leaves_only_ca_has_path_length_zero() {
        let ca = Ca::new("gpuwl-admission-ca", CaScope::LeavesOnly).unwrap();
        let s = seen(ca.cert_pem());
        assert_eq!(s.ca, Some((true, Some(0))));
        assert_eq!(s.key_usage, ["keyCertSign", "cRLSign"]);
    }

    #[test]
    fn a_server_certificate_names_its_hosts_and_is_signed_by_the_ca() {
        let ca = Ca::new("gpuwl-x-ca", CaScope::Any).unwrap();
        let other = Ca::new("gpuwl-x-ca", CaScope::Any).unwrap();
        let dns = [
            "localhost".to_string(),
            "kubernetes.default.svc".to_string(),
        ];
        let leaf = ca
            .issue(&Leaf {
                common_name: "kube-apiserver",
                organization: None,
                dns_names: &dns,
                ips: &[IpAddr::from([127, 0, 0, 1])],
                purpose: Purpose::Server,
            })
            .unwrap();
        assert_eq!(
            seen(&leaf.cert_pem),
            Seen {
                subject: "CN=kube-apiserver".into(),
                issuer: "CN=gpuwl-x-ca".into(),
                ca: None,
                key_usage: vec!["digitalSignature", "keyEncipherment"],
                ext_key_usage: vec!["serverAuth"],
                sans: vec![
                    "DNS:localhost".into(),
                    "DNS:kubernetes.default.svc".into(),
                    "IP:127.0.0.1".into()
                ],
            }
        );
        assert!(signed_by(&leaf.cert_pem, ca.cert_pem()));
        // Same name, another key: not its signature.
        assert!(!signed_by(&leaf.cert_pem, other.cert_pem()));
        assert!(leaf.key_pem.contains("BEGIN PRIVATE KEY"));
        assert!(!format!("{leaf:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_client_certificate_carries_user_and_group() {
        let ca = Ca::new("gpuwl-x-ca", CaScope::Any).unwrap();
        let leaf = ca
            .issue(&Leaf {
                common_name: "gpuwl-admin",
                organization: Some("system:masters"),
                dns_names: &[],
                ips: &[],
                purpose: Purpose::Client,
            })
            .unwrap();
        let s = seen(&leaf.cert_pem);
        assert_eq!(s.subject, "CN=gpuwl-admin, O=system:masters");
        assert_eq!(s.ext_key_usage, ["clientAuth"]);
        assert!(s.sans.is_empty());
        let both = ca
            .issue(&Leaf {
                common_name: "virt-api",
                organization: None,
                dns_names: &["localhost".into()],
                ips: &[IpAddr::from([127, 0, 0, 1])],
                purpose: Purpose::ServerAndClient,
            })
            .unwrap();
        assert_eq!(
            seen(&both.cert_pem).ext_key_usage,
            ["serverAuth", "clientAuth"]
        );
    }

    #[test]
    fn a_key_pair_has_its_public_half() {
        let (private, public) = key_pair().unwrap();
        assert!(private.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"));
    }
}
