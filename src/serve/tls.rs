//! TLS for the admission endpoint: the API server only calls webhooks over HTTPS, and
//! verifies the serving certificate against the webhook configuration's `caBundle`.
//!
//! Either a serving certificate and key are read from PEM files (a `kubernetes.io/tls`
//! Secret mounted into the pod, e.g. made by cert-manager), or [`generate`] makes a
//! throw-away CA and a serving certificate signed by it at start (the one certificate
//! generator, [`crate::pki`]: rcgen, ECDSA P-256):
//! the CA's PEM is then what `caBundle` must hold, and `--admission-register` puts it there.
//! [`Listener`] accepts TCP connections and runs each TLS handshake in its own task (with
//! a [`HANDSHAKE_TIMEOUT`]), so a slow or hostile client never holds up the others.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::pki::{Ca, CaScope, Leaf, Purpose};
use crate::serve::conn::{self, Bounds, Guarded};
use gpuwl_core::error::{Error, Result};

/// How long a client may take to finish the TLS handshake.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A serving certificate chain and key, PEM, and the CA that signed it when generated.
#[derive(Clone)]
pub struct ServingCert {
    /// The certificate chain, PEM (leaf first).
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
    /// The CA certificate, PEM, when [`generate`] made it (the `caBundle`).
    pub ca_pem: Option<String>,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ServingCert")
            .field("generated", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// A fresh CA (`CN=gpuwl-admission-ca`, leaf certificates only) and a serving certificate
/// it signs (`CN=gpuwl-admission`) for `dns` names and `ips`, valid from 5 minutes before
/// now for 365 days ([`crate::pki::BACKDATE`], [`crate::pki::VALIDITY`]): the one
/// generator's ([`crate::pki`]). Made afresh at every start of `gpuwl serve`.
///
/// Errors: [`Error::Pki`] when rcgen fails (a name it cannot encode).
pub fn generate(dns: &[String], ips: &[IpAddr]) -> Result<ServingCert> {
    let ca = Ca::new("gpuwl-admission-ca", CaScope::LeavesOnly)?;
    let leaf = ca.issue(&Leaf {
        common_name: "gpuwl-admission",
        organization: None,
        dns_names: dns,
        ips,
        purpose: Purpose::Server,
    })?;
    Ok(ServingCert {
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
        ca_pem: Some(ca.cert_pem().to_string()),
    })
}

/// Reads a certificate chain and key from PEM files.
///
/// Errors: [`Error::Input`] naming the file: unreadable, or no certificate / key in it.
pub fn read(cert: &Path, key: &Path) -> Result<ServingCert> {
    let text = |p: &Path| {
        std::fs::read_to_string(p)
            .map_err(|e| Error::Input(format!("{}: cannot read: {e}", p.display())))
    };
    let s = ServingCert {
        cert_pem: text(cert)?,
        key_pem: text(key)?,
        ca_pem: None,
    };
    config(&s).map_err(|e| match e {
        Error::Input(m) => Error::Input(format!("{} / {}: {m}", cert.display(), key.display())),
        other => other,
    })?;
    Ok(s)
}

/// The rustls server configuration for `cert` (HTTP/1.1 only: the API server's webhook
/// client then keeps one connection alive per webhook).
///
/// Errors: [`Error::Input`] when the PEM holds no certificate or no usable key.
pub fn config(cert: &ServingCert) -> Result<Arc<rustls::ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Input(format!("certificate: not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(Error::Input("certificate: no CERTIFICATE block".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .map_err(|e| Error::Input(format!("key: no usable private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::failed("TLS", e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| Error::Input(format!("certificate and key do not fit: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A served TLS connection: TLS over a bounded TCP stream ([`conn::Guarded`]).
pub type Stream = tokio_rustls::server::TlsStream<Guarded<TcpStream>>;

/// A TLS listener for axum: TCP accepted here (at most `bounds.max_connections` at once,
/// handshakes included: [`conn::accept`]), handshakes run in their own tasks, finished
/// streams handed to the server.
pub struct Listener {
    local: SocketAddr,
    ready: mpsc::Receiver<(Stream, SocketAddr)>,
}

impl Listener {
    /// Serves TLS with `config` on the bound `tcp` listener, connections bounded by `bounds`.
    pub fn new(
        tcp: TcpListener,
        config: Arc<rustls::ServerConfig>,
        bounds: &Bounds,
    ) -> std::io::Result<Listener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        let permits = Arc::new(tokio::sync::Semaphore::new(bounds.max_connections));
        let write_timeout = bounds.write_timeout;
        tokio::spawn(async move {
            loop {
                let (stream, peer) = conn::accept(&tcp, &permits, write_timeout).await;
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Ok(Ok(tls)) =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(Listener { local, ready })
    }
}

impl axum::serve::Listener for Listener {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task ended (it does not): never yield.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_makes_a_server_config_and_names_its_hosts() {
        let c = generate(
            &["gpuwl-admission.gpuwl.svc".into(), "localhost".into()],
            &[IpAddr::from([127, 0, 0, 1])],
        )
        .unwrap();
        assert!(
            c.ca_pem
                .as_deref()
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(c.key_pem.contains("PRIVATE KEY"));
        config(&c).unwrap();
        assert!(!format!("{c:?}").contains("PRIVATE"));
        let ca = c.ca_pem.as_deref().unwrap();
        let ca_seen = crate::pki::tests::seen(ca);
        assert_eq!(ca_seen.subject, "CN=gpuwl-admission-ca");
        assert_eq!(ca_seen.ca, Some((true, Some(0))));
        let leaf = crate::pki::tests::seen(&c.cert_pem);
        assert_eq!(leaf.subject, "CN=gpuwl-admission");
        assert_eq!(
            leaf.sans,
            [
                "DNS:gpuwl-admission.gpuwl.svc",
                "DNS:localhost",
                "IP:127.0.0.1"
            ]
        );
        assert_eq!(leaf.ext_key_usage, ["serverAuth"]);
        assert!(crate::pki::tests::signed_by(&c.cert_pem, ca));
    }

    #[test]
    fn unusable_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, "not a certificate").unwrap();
        std::fs::write(&key, "nor a key").unwrap();
        let e = read(&cert, &key).unwrap_err().to_string();
        assert!(
            e.contains("tls.crt") && e.contains("no CERTIFICATE block"),
            "{e}"
        );
        let missing = read(&dir.path().join("absent.crt"), &key).unwrap_err();
        assert!(
            missing.to_string().contains("absent.crt: cannot read"),
            "{missing}"
        );
        let good = generate(&["localhost".into()], &[]).unwrap();
        std::fs::write(&cert, &good.cert_pem).unwrap();
        std::fs::write(&key, &good.key_pem).unwrap();
        read(&cert, &key).unwrap();
    }
}
