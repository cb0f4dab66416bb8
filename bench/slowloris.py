#!/usr/bin/env python3
"""Idle and slow clients against `gpuwl serve`'s two listeners (issue 50), on 127.0.0.1.

Starts a local control plane (`gpuwl cluster up`), `gpuwl serve` on it with the admission
guard, then keeps IDLE connections open for DURATION seconds, spread over both listeners:
a third plain TCP to the metrics port (sends nothing), a third TCP to the admission port
that never starts TLS, a third finished TLS handshakes that then send one header byte per
second (slowloris). A connection the server closes is opened again at once, so the load
stays at IDLE all along. Meanwhile, every 0.25 s, a fresh client asks GET /healthz (plain)
and POST /validate (an AdmissionReview of a GPU pod, over TLS). Prints the latency of
those (p50, p99, max, failures), how long the server kept the hostile connections, and
serve's open file descriptors and RSS at the end.

  python3 bench/slowloris.py [--gpuwl target/release/gpuwl] [--idle 1000] [--duration 40]

Needs the control plane's binaries (`gpuwl cluster build`). Figures: BENCHMARKS.md,
"Listeners under idle and slow clients".
"""

import argparse
import json
import os
import resource
import selectors
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "0b6e2f6a-1d7e-4f0e-9d5c-000000000001",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "namespace": "default",
        "name": "train",
        "userInfo": {"username": "bench"},
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "resources": {
                            "limits": {"nvidia.com/gpu": "1"},
                            "requests": {"nvidia.com/gpu": "1"},
                        },
                    }
                ]
            },
        },
    },
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def tls_context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def healthz(port):
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    ok = data.startswith(b"HTTP/1.1 200")
    return time.monotonic() - t0, ok


def validate(port, ctx):
    body = json.dumps(REVIEW).encode()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw) as s:
            s.sendall(
                b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + b"Connection: close\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            data = b""
            while True:
                try:
                    chunk = s.recv(4096)
                except (ssl.SSLError, OSError):
                    break
                if not chunk:
                    break
                data += chunk
    ok = data.startswith(b"HTTP/1.1 200") and b'"allowed"' in data
    return time.monotonic() - t0, ok


class Hostile:
    """Keeps `n` hostile connections open; reopens each one the server closes."""

    def __init__(self, n, metrics, admission, ctx):
        self.n, self.metrics, self.admission, self.ctx = n, metrics, admission, ctx
        self.sel = selectors.DefaultSelector()
        self.opened = 0
        self.closed_after = []  # seconds each closed connection was kept by the server
        self.failed_opens = 0
        self.stop = False

    def open_one(self, kind):
        try:
            if kind == "idle":
                s = socket.create_connection(("127.0.0.1", self.metrics), timeout=5)
            elif kind == "no-tls":
                s = socket.create_connection(("127.0.0.1", self.admission), timeout=5)
            else:
                raw = socket.create_connection(("127.0.0.1", self.admission), timeout=5)
                s = self.ctx.wrap_socket(raw)
                s.sendall(b"P")
        except OSError:
            self.failed_opens += 1
            return
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, (kind, time.monotonic(), [0]))
        self.opened += 1

    def run(self):
        kinds = ["idle", "no-tls", "slow"]
        for i in range(self.n):
            self.open_one(kinds[i % 3])
        last_trickle = time.monotonic()
        while not self.stop:
            for key, _ in self.sel.select(timeout=0.2):
                kind, since, _ = key.data
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except ssl.SSLWantReadError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(s)
                    s.close()
                    self.closed_after.append(time.monotonic() - since)
                    self.open_one(kind)
            now = time.monotonic()
            if now - last_trickle >= 1.0:
                last_trickle = now
                for key in list(self.sel.get_map().values()):
                    kind, since, sent = key.data
                    if kind == "slow":
                        try:
                            key.fileobj.send(b"OST /validate HTTP/1.1\r\nX-a: b\r\n"[sent[0] % 30 : sent[0] % 30 + 1])
                            sent[0] += 1
                        except (ssl.SSLWantWriteError, OSError):
                            pass

    def open_now(self):
        return len(self.sel.get_map())


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuwl", default="target/release/gpuwl")
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=40)
    ap.add_argument("--cluster", default="gpuwl-bench-slowloris")
    ap.add_argument("--max-connections", type=int, default=None)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    gpuwl = os.path.abspath(a.gpuwl)
    subprocess.run([gpuwl, "cluster", "up", "--name", a.cluster, "-q"], check=True)
    serve = None
    try:
        kc = subprocess.run(
            [gpuwl, "cluster", "kubeconfig", "--name", a.cluster],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        metrics, admission = free_port(), free_port()
        cmd = [
            gpuwl, "serve", "--kubeconfig", kc, "--listen", f"127.0.0.1:{metrics}",
            "--admission-listen", f"127.0.0.1:{admission}",
        ]
        if a.max_connections:
            cmd += ["--max-connections", str(a.max_connections)]
        log = open("/tmp/gpuwl-slowloris-serve.log", "w")
        serve = subprocess.Popen(cmd, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while True:
            try:
                if healthz(metrics)[1]:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("serve did not answer /healthz within 60 s")
            time.sleep(0.2)
        ctx = tls_context()
        # Unloaded first.
        base_h = [healthz(metrics)[0] for _ in range(20)]
        base_v = [validate(admission, ctx)[0] for _ in range(20)]
        hostile = Hostile(a.idle, metrics, admission, ctx)
        t = threading.Thread(target=hostile.run, daemon=True)
        t.start()
        time.sleep(2)
        h, v, hf, vf = [], [], 0, 0
        end = time.monotonic() + a.duration
        open_seen = []
        while time.monotonic() < end:
            try:
                d, ok = healthz(metrics)
                h.append(d)
                hf += not ok
            except OSError:
                hf += 1
            try:
                d, ok = validate(admission, ctx)
                v.append(d)
                vf += not ok
            except OSError:
                vf += 1
            open_seen.append(hostile.open_now())
            time.sleep(0.25)
        fds = len(os.listdir(f"/proc/{serve.pid}/fd"))
        rss = int(open(f"/proc/{serve.pid}/status").read().split("VmRSS:")[1].split()[0]) / 1024
        hostile.stop = True
        t.join(timeout=5)
        kept = hostile.closed_after
        print(f"# {a.idle} hostile connections for {a.duration:.0f} s; gpuwl {gpuwl}; {os.cpu_count()} CPUs")
        print("| probe | unloaded p50 ms | loaded p50 ms | loaded p99 ms | loaded max ms | failed |")
        print("|---|---|---|---|---|---|")
        for name, base, xs, fails in [("GET /healthz", base_h, h, hf), ("POST /validate (TLS)", base_v, v, vf)]:
            print(
                f"| {name} | {statistics.median(base) * 1000:.1f} | {statistics.median(xs) * 1000:.1f} "
                f"| {pct(xs, 99) * 1000:.1f} | {max(xs) * 1000:.1f} | {fails} of {len(xs) + fails} |"
            )
        print(
            f"hostile connections open (min/median): {min(open_seen)}/{statistics.median(open_seen):.0f}; "
            f"closed by serve: {len(kept)}, kept p50 {pct(kept, 50):.1f} s, max {max(kept, default=0):.1f} s; "
            f"opens refused: {hostile.failed_opens}"
        )
        print(f"serve at the end: {fds} open files, RSS {rss:.0f} MiB")
    finally:
        if serve:
            serve.terminate()
            serve.wait(timeout=10)
        subprocess.run([gpuwl, "cluster", "down", "--name", a.cluster], capture_output=True)


if __name__ == "__main__":
    main()
