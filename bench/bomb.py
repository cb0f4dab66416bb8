#!/usr/bin/env python3
"""Decompression bombs against gpuwl's readers (issue 50): time and peak memory.

Writes, under OUT (default /tmp/gpuwl-bomb):
  pods-<N>.tgz      a must-gather bundle whose gpu_operand_pods.yaml holds N minimal operand
                    pods (~150 bytes each, the issue's bomb: 1,000,000 pods are ~3 MB
                    gzipped);
  whole-<M>.tgz     the same with M whole pods as `kubectl get pods -oyaml` prints them
                    (~2.4 KB each: env, volumes, statuses), for the memory per 100k pods;
  snap-<N>.tgz      a `gpuwl snapshot` file whose pods.json holds N pods;
  zeros.tgz         a bundle whose log member inflates to 16 GiB of one byte.
and runs, for each, `gpuwl triage` / `gpuwl check --snapshot` with the default limits and
with the limit raised past the input, printing the exit status, the wall time, the peak
RSS (the child's ru_maxrss) and the first line of stderr.

  python3 bench/bomb.py [--gpuwl target/release/gpuwl] [--pods 1000000] [--out DIR]

Figures and the machine they came from: BENCHMARKS.md, "Reader limits".
"""

import argparse
import io
import os
import resource
import subprocess
import sys
import tarfile
import time

POD = """- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2025-12-01T10:00:00Z"
    generateName: nvidia-device-plugin-daemonset-
    labels:
      app: nvidia-device-plugin-daemonset
      app.kubernetes.io/managed-by: gpu-operator
      controller-revision-hash: 7c5d9b8f4
      helm.sh/chart: gpu-operator-v25.3.4
      pod-template-generation: "1"
    name: nvidia-device-plugin-daemonset-{i:07d}
    namespace: gpu-operator
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: DaemonSet
      name: nvidia-device-plugin-daemonset
      uid: 0b6e2f6a-1d7e-4f0e-9d5c-{i:012d}
    resourceVersion: "{i}"
    uid: 5a1f3c2e-0000-4000-8000-{i:012d}
  spec:
    containers:
    - args:
      - --fail-on-init-error=false
      env:
      - name: PASS_DEVICE_SPECS
        value: "true"
      - name: DEVICE_LIST_STRATEGY
        value: envvar
      - name: NODE_NAME
        valueFrom:
          fieldRef:
            apiVersion: v1
            fieldPath: spec.nodeName
      image: nvcr.io/nvidia/k8s-device-plugin:v0.17.4
      imagePullPolicy: IfNotPresent
      name: nvidia-device-plugin
      resources: {{}}
      securityContext:
        privileged: true
      volumeMounts:
      - mountPath: /var/lib/kubelet/device-plugins
        name: device-plugin
    nodeName: gpu-node-{n:05d}
    nodeSelector:
      nvidia.com/gpu.deploy.device-plugin: "true"
    priorityClassName: system-node-critical
    tolerations:
    - effect: NoSchedule
      key: nvidia.com/gpu
      operator: Exists
    volumes:
    - hostPath:
        path: /var/lib/kubelet/device-plugins
        type: ""
      name: device-plugin
  status:
    conditions:
    - lastTransitionTime: "2025-12-01T10:00:09Z"
      status: "True"
      type: Ready
    containerStatuses:
    - containerID: containerd://{i:064x}
      image: nvcr.io/nvidia/k8s-device-plugin:v0.17.4
      name: nvidia-device-plugin
      ready: true
      restartCount: 0
      started: true
      state:
        running:
          startedAt: "2025-12-01T10:00:08Z"
    hostIP: 10.0.0.1
    phase: Running
    podIP: 10.244.0.1
    qosClass: BestEffort
"""

MINIMAL = "- {{kind: Pod, metadata: {{name: nvidia-device-plugin-{i:07d}, namespace: gpu-operator}}, spec: {{nodeName: gpu-node-{n:05d}}}, status: {{phase: Running}}}}\n"

POD_JSON = (
    '{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p-{i:07d}","namespace":"ns-{n}",'
    '"uid":"5a1f3c2e-0000-4000-8000-{i:012d}","labels":{{"app":"train","team":"ml"}}}},'
    '"spec":{{"nodeName":"gpu-node-{n:05d}","schedulerName":"default-scheduler","containers":[{{"name":"main",'
    '"image":"nvcr.io/nvidia/pytorch:24.05-py3","resources":{{"requests":{{"cpu":"4","memory":"16Gi",'
    '"nvidia.com/gpu":"1"}},"limits":{{"nvidia.com/gpu":"1"}}}}}}]}},'
    '"status":{{"phase":"Running","conditions":[{{"type":"PodScheduled","status":"True"}}]}}}}'
)


class Generated(io.RawIOBase):
    """A read-only stream of the strings `gen` yields, encoded."""

    def __init__(self, gen):
        self.gen = gen
        self.buf = b""

    def readable(self):
        return True

    def read(self, n=-1):
        while n < 0 or len(self.buf) < n:
            try:
                self.buf += next(self.gen).encode()
            except StopIteration:
                break
        if n < 0:
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[:n], self.buf[n:]
        return out


def add(tar, name, parts):
    """Adds a member made of the strings `parts()` yields (twice: its size, then it)."""
    size = sum(len(p.encode()) for p in parts())
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    tar.addfile(info, Generated(parts()))
    return size


def pods_bundle(path, n, template=MINIMAL):
    def pods():
        yield "apiVersion: v1\nkind: List\nitems:\n"
        for i in range(n):
            yield template.format(i=i, n=i % 5000)

    descr = "Name: gpu-node-00000\nCapacity:\n  nvidia.com/gpu: 8\nAllocatable:\n  nvidia.com/gpu: 8\nEvents: <none>\n"
    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        add(tar, "mg/gpu_nodes.descr", lambda: iter([descr]))
        return add(tar, "mg/gpu_operand_pods.yaml", pods)


def snapshot(path, n):
    meta = (
        '{"format":"gpuwl.snapshot/v1","gpuwlVersion":"bench","takenAt":"2026-12-06T00:00:00Z",'
        '"fullPods":false,"collected":{}}'
    )
    node = '{"kind":"List","items":[{"kind":"Node","metadata":{"name":"gpu-node-00000"}}]}'

    def pods():
        yield '{"kind":"List","items":['
        for i in range(n):
            yield ("," if i else "") + POD_JSON.format(i=i, n=i % 5000)
        yield "]}"

    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        add(tar, "snapshot.json", lambda: iter([meta]))
        add(tar, "nodes.json", lambda: iter([node]))
        return add(tar, "pods.json", pods)


def zeros(path, gib):
    chunk = "a" * (1 << 20)

    def log():
        for _ in range(gib << 10):
            yield chunk

    descr = "Name: gpu-node-00000\nEvents: <none>\n"
    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        add(tar, "gpu_nodes.descr", lambda: iter([descr]))
        return add(tar, "gpu_operator_pod.log", log)


def run(argv):
    """(exit status, seconds, peak RSS in MiB, first stderr line) of one run."""
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        err = os.open(ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.execv(argv[0], argv)
    _, status, usage = os.wait4(pid, 0)
    secs = time.monotonic() - t0
    with open(ERR) as f:
        first = (f.readline().strip() or "-")[:150]
    return os.waitstatus_to_exitcode(status), secs, usage.ru_maxrss / 1024, first


ERR = "/tmp/gpuwl-bomb.err"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuwl", default="target/release/gpuwl")
    ap.add_argument("--pods", type=int, default=1_000_000)
    ap.add_argument("--whole", type=int, default=100_000)
    ap.add_argument("--zeros-gib", type=int, default=16)
    ap.add_argument("--out", default="/tmp/gpuwl-bomb")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gpuwl = os.path.abspath(a.gpuwl)
    n = a.pods
    w = a.whole
    files = {
        "bundle": (os.path.join(a.out, f"pods-{n}.tgz"), pods_bundle, n),
        "bundle, whole pods": (
            os.path.join(a.out, f"whole-{w}.tgz"),
            lambda p, m: pods_bundle(p, m, POD),
            w,
        ),
        "snapshot": (os.path.join(a.out, f"snap-{n}.tgz"), snapshot, n),
    }
    print(f"# gpuwl {gpuwl}; {n} pods; {os.cpu_count()} CPUs")
    print("| input | on disk | inflated | command | exit | seconds | peak RSS MiB | stderr |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, (path, make, n) in files.items():
        t0 = time.monotonic()
        inflated = make(path, n)
        made = time.monotonic() - t0
        print(f"<!-- {path} written in {made:.0f} s -->", file=sys.stderr)
        disk = os.path.getsize(path)
        if kind.startswith("bundle"):
            cmds = [
                ["triage", path, "-o", "json"],
                ["triage", path, "-o", "json", "--max-items", str(n + 1)],
            ]
        else:
            cmds = [
                ["check", "--snapshot", path],
                ["check", "--snapshot", path, "--max-items", str(n + 1)],
            ]
        for c in cmds:
            rc, secs, rss, err = run([gpuwl] + c)
            shown = " ".join(c).replace(path, os.path.basename(path))
            print(
                f"| {n} pods ({kind}) | {disk / 1e6:.1f} MB | {inflated / 1e9:.2f} GB | `{shown}` "
                f"| {rc} | {secs:.1f} | {rss:.0f} | {err} |",
                flush=True,
            )
    path = os.path.join(a.out, "zeros.tgz")
    inflated = zeros(path, a.zeros_gib)
    disk = os.path.getsize(path)
    for c in [["triage", path], ["triage", path, "--max-member-bytes", "64G", "--max-input-bytes", "64G"]]:
        rc, secs, rss, err = run([gpuwl] + c)
        shown = " ".join(c).replace(path, "zeros.tgz")
        print(
            f"| {a.zeros_gib} GiB log | {disk / 1e6:.1f} MB | {inflated / 1e9:.2f} GB | `{shown}` "
            f"| {rc} | {secs:.1f} | {rss:.0f} | {err} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
