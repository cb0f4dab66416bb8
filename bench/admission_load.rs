//! Dev tool: open-loop load on `gpuwl serve`'s admission guard. Sends AdmissionReviews at a
//! fixed rate over a few keep-alive HTTPS connections (as the API server's webhook client
//! does) and reports latency percentiles, measured from each request's scheduled send time
//! (a request queued behind a slow one counts its wait: no coordinated omission).
//!
//! The reviewed objects are variants of one real Pod (`--object`, e.g. `kubectl get pod -o
//! json`): as it is, with its GPU name mistyped (`--typo FROM=TO`: a warning with a
//! did-you-mean), in turn. The peer, in the same run and on the same connections: `GET
//! /healthz` (TLS, HTTP and the server, without the review).
//!
//! ```text
//! cargo run --release --example admission_load -- --addr 127.0.0.1:PORT --ca ca.crt \
//!     --object pod.json --typo nvidia.com/GA102GL_A10=nvidia.com/GA102GL_A1 \
//!     [--rate 200] [--seconds 30] [--connections 4]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

struct Args {
    addr: String,
    ca: String,
    object: String,
    typo: Option<(String, String)>,
    rate: f64,
    seconds: f64,
    connections: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        addr: String::new(),
        ca: String::new(),
        object: String::new(),
        typo: None,
        rate: 200.0,
        seconds: 30.0,
        connections: 4,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().with_context(|| format!("{k}: a value"))?;
        match k.as_str() {
            "--addr" => a.addr = v,
            "--ca" => a.ca = v,
            "--object" => a.object = v,
            "--typo" => {
                let (f, t) = v.split_once('=').context("--typo FROM=TO")?;
                a.typo = Some((f.into(), t.into()));
            }
            "--rate" => a.rate = v.parse()?,
            "--seconds" => a.seconds = v.parse()?,
            "--connections" => a.connections = v.parse()?,
            _ => bail!("unknown argument {k}"),
        }
    }
    if a.addr.is_empty() || a.ca.is_empty() || a.object.is_empty() {
        bail!("--addr, --ca and --object are required");
    }
    Ok(a)
}

/// One request of the schedule: which body, when it was due.
struct Job {
    kind: usize,
    due: Instant,
}

/// (kind, latency, HTTP status, whether the answer carried warnings).
type Done = (usize, Duration, u16, bool);

const KINDS: [&str; 3] = [
    "review (correct pod)",
    "review (typo pod)",
    "GET /healthz (peer)",
];

fn review(uid: &str, object: &serde_json::Value) -> String {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": object["metadata"]["namespace"],
            "name": object["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": object,
            "oldObject": null,
            "dryRun": false,
        }
    })
    .to_string()
}

/// Reads what is there (tokio's `io-util` helpers are not among gpuwl's tokio features).
async fn read<S: AsyncRead + Unpin>(s: &mut S, out: &mut [u8]) -> std::io::Result<usize> {
    std::future::poll_fn(|cx| {
        let mut buf = ReadBuf::new(out);
        match Pin::new(&mut *s).poll_read(cx, &mut buf) {
            std::task::Poll::Ready(Ok(())) => std::task::Poll::Ready(Ok(buf.filled().len())),
            std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(e)),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    })
    .await
}

/// Writes all of `data` and flushes.
async fn write_all<S: AsyncWrite + Unpin>(s: &mut S, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        let n = std::future::poll_fn(|cx| Pin::new(&mut *s).poll_write(cx, data)).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        data = &data[n..];
    }
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_flush(cx)).await
}

/// Reads one HTTP/1.1 response (Content-Length framed) from `s`: (status, body).
async fn response<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
) -> anyhow::Result<(u16, String)> {
    buf.clear();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = read(s, &mut chunk).await?;
        if n == 0 {
            bail!("connection closed");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1).unwrap_or("0").parse()?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .context("no content-length")?
        .trim()
        .parse()?;
    while buf.len() < head_end + len {
        let n = read(s, &mut chunk).await?;
        if n == 0 {
            bail!("connection closed in the body");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((
        status,
        String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned(),
    ))
}

async fn connection(
    addr: String,
    tls: TlsConnector,
    bodies: Arc<Vec<String>>,
    mut jobs: mpsc::Receiver<Job>,
    done: mpsc::UnboundedSender<Done>,
) -> anyhow::Result<()> {
    let tcp = TcpStream::connect(&addr).await?;
    tcp.set_nodelay(true)?;
    let mut s = tls
        .connect(ServerName::try_from("localhost")?.to_owned(), tcp)
        .await?;
    let mut buf = Vec::new();
    while let Some(job) = jobs.recv().await {
        let req = if job.kind == 2 {
            "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n".to_owned()
        } else {
            let body = &bodies[job.kind];
            format!(
                "POST /validate?timeout=5s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        write_all(&mut s, req.as_bytes()).await?;
        let (status, text) = response(&mut s, &mut buf).await?;
        let _ = done.send((
            job.kind,
            job.due.elapsed(),
            status,
            text.contains("\"warnings\""),
        ));
    }
    Ok(())
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&a.ca)? {
        roots.add(c?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tls = TlsConnector::from(Arc::new(config));
    let object: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a.object)?)?;
    let mut typo = object.to_string();
    if let Some((from, to)) = &a.typo {
        if !typo.contains(from.as_str()) {
            bail!("{from} is not in {}", a.object);
        }
        typo = typo.replace(from.as_str(), to);
    }
    let typo: serde_json::Value = serde_json::from_str(&typo)?;
    let bodies = Arc::new(vec![
        review("bench-ok", &object),
        review("bench-typo", &typo),
    ]);

    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..a.connections {
        let (tx, rx) = mpsc::channel(10_000);
        senders.push(tx);
        tasks.push(tokio::spawn(connection(
            a.addr.clone(),
            tls.clone(),
            bodies.clone(),
            rx,
            done_tx.clone(),
        )));
    }
    drop(done_tx);
    // Warm-up: one of each on every connection (TLS handshakes, first did-you-mean).
    for tx in &senders {
        for kind in 0..3 {
            tx.send(Job {
                kind,
                due: Instant::now(),
            })
            .await?;
        }
    }
    let mut warm = 0;
    while warm < 3 * a.connections {
        done_rx
            .recv()
            .await
            .context("a connection failed in the warm-up")?;
        warm += 1;
    }

    // Reviews at --rate (correct and typo in turn), and /healthz at --rate / 4 interleaved
    // (the peer): every fifth request.
    let all_rate = a.rate * 1.25;
    let total = (all_rate * a.seconds) as usize;
    let start = Instant::now();
    let mut sent = 0usize;
    let mut reviews_sent = 0usize;
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / all_rate);
        tokio::time::sleep_until(due.into()).await;
        let kind = if i % 5 == 4 {
            2
        } else {
            reviews_sent += 1;
            reviews_sent % 2
        };
        senders[i % senders.len()].send(Job { kind, due }).await?;
        sent += 1;
    }
    drop(senders);
    let mut lat: [Vec<Duration>; 3] = Default::default();
    let mut bad = 0usize;
    let mut warned = [0usize; 3];
    while let Some((kind, took, status, warnings)) = done_rx.recv().await {
        if status != 200 {
            bad += 1;
        }
        warned[kind] += usize::from(warnings);
        lat[kind].push(took);
    }
    let wall = start.elapsed().as_secs_f64();
    for t in tasks {
        t.await??;
    }
    println!(
        "sent {sent} requests in {wall:.1} s ({:.0}/s; reviews {:.0}/s) over {} connections; non-200: {bad}",
        sent as f64 / wall,
        (lat[0].len() + lat[1].len()) as f64 / wall,
        a.connections
    );
    println!("kind\tn\twith warnings\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms");
    let mut reviews: Vec<Duration> = lat[0].iter().chain(&lat[1]).copied().collect();
    reviews.sort();
    for (k, l) in lat.iter_mut().enumerate() {
        l.sort();
        println!(
            "{}\t{}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{:.2}",
            KINDS[k],
            l.len(),
            warned[k],
            pct(l, 50.0),
            pct(l, 90.0),
            pct(l, 99.0),
            pct(l, 99.9),
            pct(l, 100.0)
        );
    }
    println!(
        "all reviews\t{}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{:.2}",
        reviews.len(),
        warned[0] + warned[1],
        pct(&reviews, 50.0),
        pct(&reviews, 90.0),
        pct(&reviews, 99.0),
        pct(&reviews, 99.9),
        pct(&reviews, 100.0)
    );
    Ok(())
}
