#!/usr/bin/env python3
"""Times the API server's pod list as a client gets it (BENCHMARKS.md, "2026-12-07 (evening)").

Compact JSON, as gpuwl and kubectl-view-allocations get it (curl's User-Agent gets pretty
JSON: kubernetes/apiserver pkg/endpoints/handlers/negotiation/negotiate.go). No decoding:
the bytes are read and counted. Prints, for the live field selector gpuwl uses, the
unpaged list (time to first byte, total), pages of 5,000 and of 500, and protobuf.

    python3 bench/list_timing.py "$(gpuwl cluster kubeconfig --name gpuwl-scale)"
"""
import base64
import os
import re
import ssl
import sys
import tempfile
import time
import urllib.request

import yaml

FS = "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"


def client(path):
    kc = yaml.safe_load(open(path))
    c, u = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
    d = tempfile.mkdtemp()

    def f(n, k):
        if k + "-data" in n:
            p = os.path.join(d, k)
            open(p, "wb").write(base64.b64decode(n[k + "-data"]))
            return p
        return n[k]

    ctx = ssl.create_default_context(cafile=f(c, "certificate-authority"))
    ctx.load_cert_chain(f(u, "client-certificate"), f(u, "client-key"))
    return c["server"], ctx


def get(server, ctx, query, accept):
    req = urllib.request.Request(server + query, headers={"Accept": accept})
    t0 = time.time()
    r = urllib.request.urlopen(req, context=ctx)
    first, body = None, []
    while True:
        b = r.read1(1 << 20)
        if not b:
            break
        if first is None:
            first = time.time() - t0
        body.append(b)
    return b"".join(body), first, time.time() - t0


def listing(server, ctx, limit, accept="application/json"):
    cont, pages, size, wall = "", 0, 0, 0.0
    while True:
        q = f"/api/v1/pods?{FS}" + (f"&limit={limit}" if limit else "") + (f"&continue={cont}" if cont else "")
        body, first, took = get(server, ctx, q, accept)
        pages, size, wall = pages + 1, size + len(body), wall + took
        m = re.search(rb'"continue":"([^"]*)"', body[:3000]) if accept == "application/json" else None
        cont = m.group(1).decode() if m else ""
        if not cont:
            return pages, size, wall, first


def main():
    server, ctx = client(sys.argv[1])
    for label, limit, accept in [
        ("unpaged, JSON", 0, "application/json"),
        ("pages of 5,000, JSON", 5000, "application/json"),
        ("pages of 500, JSON", 500, "application/json"),
        ("unpaged, protobuf", 0, "application/vnd.kubernetes.protobuf"),
    ]:
        pages, size, wall, first = listing(server, ctx, limit, accept)
        print(f"{label}: {pages} request(s), {size / 1e6:.0f} MB, {wall:.2f} s"
              + (f" (first byte after {first:.2f} s)" if pages == 1 else ""))


if __name__ == "__main__":
    main()
