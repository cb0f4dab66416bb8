//! Connections of serve's two listeners (the metrics endpoint, plain HTTP; the admission
//! guard, HTTPS), bounded so that idle, slow or hostile clients cannot starve `/healthz`,
//! `/metrics` or `/validate`:
//!
//! - at most [`Bounds::max_connections`] connections at once (TLS handshakes included),
//!   each holding a permit from accept to close; the rest wait in the kernel's backlog.
//!   The cap stays below the process's open-file limit ([`raise_nofile`] raises the soft
//!   limit to the hard one at start; [`cap`]);
//! - a request's headers must arrive within [`Bounds::header_timeout`] of the moment the
//!   server waits for them: a new connection, or a kept-alive one between requests (so an
//!   idle connection is closed after it too: hyper's `header_read_timeout`, with a timer);
//! - a request (its body read and its answer made) within [`Bounds::body_timeout`], else
//!   `408 Request Timeout` (tower-http's `TimeoutLayer`);
//! - a write or flush that makes no progress for [`Bounds::write_timeout`] (a client that
//!   does not read its answer) closes the connection ([`Guarded`]).
//!
//! [`serve`] runs one listener's connections with these bounds (HTTP/1.1, as before).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// The default cap on concurrent connections per listener: 2,048 (a connection costs
/// about 12 KB with TLS; the API server keeps one or a few per webhook).
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;

/// The default header, body and write timeouts: 10 s each.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// File descriptors kept free of connections below the open-file limit (the API client,
/// the state files, the runtime's own).
pub(crate) const RESERVED_FILES: u64 = 128;

/// How one listener's connections are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Connections open at once, handshakes included.
    pub max_connections: usize,
    /// Time for a request's headers to arrive, from when the server waits for them
    /// (connection start or the end of the previous answer).
    pub header_timeout: Duration,
    /// Time for a request's body to be read and its answer made.
    pub body_timeout: Duration,
    /// Time a write or flush may make no progress.
    pub write_timeout: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_TIMEOUT,
            body_timeout: DEFAULT_TIMEOUT,
            write_timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Raises the soft open-file limit (`RLIMIT_NOFILE`) to the hard one and returns the soft
/// limit now in force (`u64::MAX`: unlimited or unknown).
pub fn raise_nofile() -> u64 {
    #[cfg(unix)]
    {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit only read and write the struct passed.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
                return u64::MAX;
            }
            if l.rlim_cur < l.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: l.rlim_max,
                    rlim_max: l.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    l.rlim_cur = l.rlim_max;
                }
            }
        }
        if l.rlim_cur == libc::RLIM_INFINITY {
            return u64::MAX;
        }
        l.rlim_cur
    }
    #[cfg(not(unix))]
    {
        u64::MAX
    }
}

/// The connection cap of each of `listeners` listeners: `requested`, lowered so that all of
/// them together stay [`RESERVED_FILES`] below the open-file limit `nofile`; at least 16.
pub fn cap(requested: usize, nofile: u64, listeners: usize) -> usize {
    let room = nofile.saturating_sub(RESERVED_FILES) / listeners.max(1) as u64;
    (requested as u64).min(room).max(16) as usize
}

/// A connection's byte stream: holds its listener permit until dropped, and fails a write,
/// flush or shutdown that has made no progress for its write timeout.
pub struct Guarded<IO> {
    io: IO,
    _permit: OwnedSemaphorePermit,
    write_timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<IO> Guarded<IO> {
    /// `io`, counted by `permit` until closed.
    pub fn new(io: IO, permit: OwnedSemaphorePermit, write_timeout: Duration) -> Guarded<IO> {
        Guarded {
            io,
            _permit: permit,
            write_timeout,
            stalled: None,
        }
    }

    /// What a write-side poll gives: ready clears the stall timer; pending arms it and
    /// fails once it has run out.
    fn watch<T>(&mut self, cx: &mut Context<'_>, p: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match p {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let timeout = self.write_timeout;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client read nothing of the answer in time",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, p)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let p = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, p)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let p = Pin::new(&mut self.io).poll_shutdown(cx);
        self.watch(cx, p)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, p)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Accepts one TCP connection once a permit of `permits` is free (so at most that many
/// are open), with Nagle off. Accept errors (out of file descriptors and the like) are
/// waited out, as axum does.
pub async fn accept(
    tcp: &TcpListener,
    permits: &Arc<Semaphore>,
    write_timeout: Duration,
) -> (Guarded<TcpStream>, SocketAddr) {
    let permit = match permits.clone().acquire_owned().await {
        Ok(p) => p,
        // The semaphore is never closed.
        Err(_) => std::future::pending().await,
    };
    loop {
        match tcp.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                return (Guarded::new(stream, permit, write_timeout), peer);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A plain-HTTP listener whose connections are bounded ([`accept`]).
pub struct Plain {
    tcp: TcpListener,
    permits: Arc<Semaphore>,
    write_timeout: Duration,
}

impl Plain {
    /// `tcp` with at most `bounds.max_connections` connections open.
    pub fn new(tcp: TcpListener, bounds: &Bounds) -> Plain {
        Plain {
            tcp,
            permits: Arc::new(Semaphore::new(bounds.max_connections)),
            write_timeout: bounds.write_timeout,
        }
    }
}

impl axum::serve::Listener for Plain {
    type Io = Guarded<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        accept(&self.tcp, &self.permits, self.write_timeout).await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// Serves `router` on `listener` (HTTP/1.1) with the header and body timeouts of `bounds`
/// until `shutdown` completes; then waits at most 1 s for requests in flight.
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    bounds: Bounds,
    shutdown: impl Future<Output = ()>,
) where
    L: axum::serve::Listener,
    L::Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let router = router.layer(tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::REQUEST_TIMEOUT,
        bounds.body_timeout,
    ));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(bounds.header_timeout)
        .keep_alive(true);
    let mut conns = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(io), service);
        conns.spawn(async move {
            let _ = conn.await;
        });
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_below_the_file_limit() {
        assert_eq!(cap(2048, 1 << 20, 2), 2048);
        // The case: a file limit of 256, two listeners.
        assert_eq!(cap(2048, 256, 2), 64);
        assert_eq!(cap(2048, 100, 1), 16);
        assert_eq!(cap(2048, u64::MAX, 2), 2048);
    }

    #[test]
    fn the_soft_file_limit_is_raised_to_the_hard_one() {
        let now = raise_nofile();
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: reads the struct passed.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
        assert_eq!(l.rlim_cur, l.rlim_max);
        if l.rlim_cur != libc::RLIM_INFINITY {
            assert_eq!(now, l.rlim_cur);
        }
    }

    /// A client on a blocking socket: what it reads within `within` (`None`: the server
    /// closed the connection first, `Some(bytes)` else).
    fn read_within(s: &mut std::net::TcpStream, within: Duration) -> Option<Vec<u8>> {
        use std::io::Read;
        s.set_read_timeout(Some(within)).unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(0) => None,
            Ok(n) => Some(buf[..n].to_vec()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Some(Vec::new())
            }
            Err(_) => None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_and_slow_clients_are_closed_and_the_cap_holds() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let bounds = Bounds {
            max_connections: 4,
            header_timeout: Duration::from_millis(300),
            body_timeout: Duration::from_millis(300),
            write_timeout: Duration::from_millis(300),
        };
        let router = Router::new().route(
            "/x",
            axum::routing::post(|body: axum::body::Bytes| async move { body.len().to_string() }),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(Plain::new(tcp, &bounds), router, bounds, async {
            let _ = stopped.await;
        }));
        let client = tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let connect = || std::net::TcpStream::connect(addr).unwrap();
            // An idle connection, and one whose headers never end: closed after 300 ms.
            let mut idle = connect();
            let mut slow = connect();
            slow.write_all(b"POST /x HTTP/1.1\r\nHost: a\r\n").unwrap();
            assert_eq!(read_within(&mut idle, Duration::from_secs(3)), None);
            assert_eq!(read_within(&mut slow, Duration::from_secs(3)), None);
            // A body that never comes: 408.
            let mut body = connect();
            body.write_all(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab")
                .unwrap();
            let answer = read_within(&mut body, Duration::from_secs(3)).unwrap();
            assert!(
                answer.starts_with(b"HTTP/1.1 408"),
                "{}",
                String::from_utf8_lossy(&answer)
            );
            // Four held connections fill the cap: a fifth is not answered until one closes.
            let held: Vec<_> = (0..4).map(|_| connect()).collect();
            std::thread::sleep(Duration::from_millis(50));
            let mut fifth = connect();
            fifth
                .write_all(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            assert_eq!(
                read_within(&mut fifth, Duration::from_millis(150)),
                Some(Vec::new()),
                "answered above the cap"
            );
            drop(held);
            let answer = read_within(&mut fifth, Duration::from_secs(3)).unwrap();
            assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
            assert!(answer.ends_with(b"2"), "{answer:?}");
        });
        client.await.unwrap();
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(3), server)
            .await
            .unwrap()
            .unwrap();
    }
}
