//! The one health probe of the local cluster's components, every endpoint on 127.0.0.1:
//!
//! - [`accepts`]: a TCP connection on a port (a component that serves nothing to ask, or a
//!   port being waited for);
//! - [`http`](fn@http): `GET` over plain HTTP (the GPU Operator's `/healthz`);
//! - [`https_with_cert`]: `GET` over HTTPS with a client certificate (etcd's `/health`:
//!   etcd serves only clients with a certificate of its own CA);
//! - [`https`]: `GET` over HTTPS, anonymous, the component's self-signed serving certificate
//!   accepted (kube-controller-manager, kube-scheduler, kwok, virt-api, virt-controller:
//!   `/healthz`, kube-scheduler's `/metrics`);
//! - [`api`]: `GET` through a client of the API server (its `/readyz`).
//!
//! Readiness while `gpuwl cluster up` starts the components (`cluster::is_ready`), the
//! GPU Operator's and KubeVirt's starts, and `gpuwl cluster status` (`cluster::probe`) all
//! ask through these. Each waits [`TIMEOUT`] at most (plain HTTP: [`HTTP_TIMEOUT`] to
//! connect and per read; TCP: [`ACCEPT_TIMEOUT`]) and says `None` / `false` rather than an
//! error: a component that does not answer is not healthy, whatever the reason.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::input::live::{self, Flavour};
use gpuwl_core::error::{Error, Result};

/// How long an HTTPS or API server health request waits for its answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a plain-HTTP request waits to connect, and for each read.
pub(crate) const HTTP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long [`accepts`] waits for the connection.
pub(crate) const ACCEPT_TIMEOUT: Duration = Duration::from_millis(200);
/// The most of a plain-HTTP answer read (head and body).
const HTTP_MAX: u64 = 64 * 1024;

fn local(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Whether something accepts TCP connections on `127.0.0.1:<port>` within
/// [`ACCEPT_TIMEOUT`].
pub fn accepts(port: u16) -> bool {
    TcpStream::connect_timeout(&local(port), ACCEPT_TIMEOUT).is_ok()
}

/// What a plain-HTTP endpoint answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code of the status line.
    pub status: u16,
    /// The body, trimmed.
    pub body: String,
}

impl Answer {
    /// The body when the status is 200.
    pub fn ok_body(self) -> Option<String> {
        (self.status == 200).then_some(self.body)
    }

    /// Status 200 and the body `ok` (a Kubernetes or controller-runtime health path).
    pub fn is_ok(&self) -> bool {
        self.status == 200 && self.body == "ok"
    }
}

/// `GET <path>` over plain HTTP/1.0 on `127.0.0.1:<port>` (blocking, [`HTTP_TIMEOUT`] to
/// connect and per read, the first 64 KiB): the status and body, `None` without a
/// well-formed answer.
pub fn http(port: u16, path: &str) -> Option<Answer> {
    use std::io::{Read, Write};
    let mut conn = TcpStream::connect_timeout(&local(port), HTTP_TIMEOUT).ok()?;
    conn.set_read_timeout(Some(HTTP_TIMEOUT)).ok()?;
    conn.set_write_timeout(Some(HTTP_TIMEOUT)).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    conn.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    conn.take(HTTP_MAX).read_to_string(&mut text).ok()?;
    parse_answer(&text)
}

/// The status and trimmed body of an HTTP/1.x response.
fn parse_answer(text: &str) -> Option<Answer> {
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head
        .lines()
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(Answer {
        status,
        body: body.trim().to_string(),
    })
}

/// `GET <path>` on `https://127.0.0.1:<port>`, anonymous, accepting the component's
/// self-signed certificate ([`insecure_client`]): the trimmed body of a 2xx answer within
/// [`TIMEOUT`], else `None`.
pub async fn https(port: u16, path: &str) -> Option<String> {
    let c = insecure_client(port).ok()?;
    api(&c, path).await
}

/// `GET <path>` through the client `c` (the API server's admin client, or
/// [`insecure_client`]): the trimmed body of a 2xx answer within [`TIMEOUT`], else `None`.
pub async fn api(c: &kube::Client, path: &str) -> Option<String> {
    let req = http::Request::get(path).body(Vec::new()).ok()?;
    tokio::time::timeout(TIMEOUT, c.request_text(req))
        .await
        .ok()?
        .ok()
        .map(|t| t.trim().to_string())
}

/// `GET <path>` on `https://127.0.0.1:<port>` presenting the client certificate `cert`
/// with its key `key` (PEM files; etcd's `--client-cert-auth` refuses a client without
/// one at the handshake), the server's self-signed certificate accepted: the trimmed body
/// of a 2xx answer within [`TIMEOUT`], else `None`.
pub async fn https_with_cert(
    port: u16,
    path: &str,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Option<String> {
    let url = format!("https://127.0.0.1:{port}").parse().ok()?;
    let mut cfg = kube::Config::new(url);
    cfg.accept_invalid_certs = true;
    cfg.auth_info.client_certificate = Some(cert.display().to_string());
    cfg.auth_info.client_key = Some(key.display().to_string());
    let c = live::client_from_config(cfg, Flavour::OneShot, TIMEOUT).ok()?;
    api(&c, path).await
}

/// A client for a component's own HTTPS port on 127.0.0.1 (self-signed serving
/// certificate, anonymous), each request waited [`TIMEOUT`] at most.
///
/// Errors: [`Error::Runtime`] when the client cannot be built.
pub fn insecure_client(port: u16) -> Result<kube::Client> {
    let url = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| Error::failed("bad url", e))?;
    let mut cfg = kube::Config::new(url);
    cfg.accept_invalid_certs = true;
    live::client_from_config(cfg, Flavour::OneShot, TIMEOUT)
        .map_err(|e| Error::failed(format!("cannot build a client for port {port}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A server on a free 127.0.0.1 port answering each of `answers` to one connection,
    /// in turn; returns the port and the requests it read.
    fn serve(answers: Vec<&'static str>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for a in answers {
                let (mut s, _) = l.accept().unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") {
                    let n = s.read(&mut buf).unwrap();
                    assert!(n > 0, "the request ended early");
                    request.extend_from_slice(&buf[..n]);
                }
                seen.push(String::from_utf8_lossy(&request).into_owned());
                s.write_all(a.as_bytes()).unwrap();
            }
            seen
        });
        (port, t)
    }

    #[test]
    fn a_listening_port_accepts_a_closed_one_does_not() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        assert!(accepts(l.local_addr().unwrap().port()));
        assert!(!accepts(testing::closed_port()));
    }

    #[test]
    fn plain_http_gives_the_status_and_trimmed_body() {
        let (port, t) = serve(vec![
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nok\n",
            "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"health\":\"false\"}",
            "not http at all",
        ]);
        let a = http(port, "/healthz").unwrap();
        assert_eq!(
            a,
            Answer {
                status: 200,
                body: "ok".into()
            }
        );
        assert!(a.is_ok());
        assert_eq!(a.ok_body().as_deref(), Some("ok"));
        let b = http(port, "/health").unwrap();
        assert_eq!(b.status, 503);
        assert_eq!(b.body, r#"{"health":"false"}"#);
        assert!(!b.is_ok());
        assert_eq!(b.ok_body(), None);
        assert_eq!(http(port, "/x"), None);
        let requests = t.join().unwrap();
        assert!(requests[0].starts_with("GET /healthz HTTP/1.0\r\n"));
        assert!(requests[1].starts_with("GET /health HTTP/1.0\r\n"));
        assert_eq!(http(testing::closed_port(), "/healthz"), None);
    }

    #[test]
    fn an_answer_is_ok_only_with_status_200_and_body_ok() {
        let a = |status, body: &str| Answer {
            status,
            body: body.into(),
        };
        assert!(a(200, "ok").is_ok());
        assert!(!a(200, "[-]etcd failed").is_ok());
        assert!(!a(500, "ok").is_ok());
        assert_eq!(
            parse_answer("HTTP/1.0 404 Not Found\r\n\r\n")
                .unwrap()
                .status,
            404
        );
        assert_eq!(parse_answer("HTTP/1.0 200 OK\r\n"), None);
    }

    /// An HTTPS server with a self-signed certificate (the admission guard's TLS): the
    /// probe accepts it, reads a 2xx body, and says `None` for an error status.
    #[tokio::test]
    async fn https_accepts_a_self_signed_certificate_and_reads_2xx_bodies() {
        use axum::routing::get;
        let cert = crate::serve::tls::generate(
            &["localhost".into()],
            &[std::net::IpAddr::from([127, 0, 0, 1])],
        )
        .unwrap();
        let config = crate::serve::tls::config(&cert).unwrap();
        let tcp = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let port = tcp.local_addr().unwrap().port();
        let app = axum::Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route(
                "/livez",
                get(|| async { (http::StatusCode::INTERNAL_SERVER_ERROR, "broken") }),
            );
        let listener =
            crate::serve::tls::Listener::new(tcp, config, &crate::serve::conn::Bounds::default())
                .unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        assert_eq!(https(port, "/healthz").await.as_deref(), Some("ok"));
        assert_eq!(https(port, "/livez").await, None);
    }

    #[tokio::test]
    async fn https_and_api_say_none_without_an_answer() {
        let port = testing::closed_port();
        assert_eq!(https(port, "/healthz").await, None);
        let c = insecure_client(port).unwrap();
        assert_eq!(api(&c, "/readyz").await, None);
    }
}
