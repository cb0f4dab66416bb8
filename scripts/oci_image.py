#!/usr/bin/env python3
"""A container image of gpuwl without a container daemon: one layer holding the binary and
the shared libraries `ldd` names for it (glibc's loader, libc, libm, libgcc_s, copied from
the build machine), user 65532, entrypoint gpuwl. Written as a `docker save` tarball
(manifest.json, the config, the layer uncompressed), which `crane validate --tarball`,
`crane push`, `docker load` and `podman load` read.

Usage: oci_image.py BINARY REFERENCE OUT.tar [ROOTFS_DIR]
  REFERENCE: e.g. ghcr.io/gpuwl/gpuwl:0.1.0 (the tarball's RepoTags).
  ROOTFS_DIR: also unpack the layer's files there (to run them in a chroot).
Reproducible: every time in the layer and the config is SOURCE_DATE_EPOCH's.
"""
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import datetime

# The loader as the binary's PT_INTERP names it, then each library where Debian keeps it.
def libraries(binary):
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    files = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts:
            path = parts[parts.index("=>") + 1]
            if path.startswith("/"):
                files.append(path)
        elif parts and parts[0].startswith("/"):
            files.append(parts[0])  # the loader
        elif parts and parts[0].startswith("linux-vdso"):
            continue
        elif parts:
            raise SystemExit(f"oci_image.py: ldd line not understood: {line!r}")
    return files


def main(binary, reference, out, rootfs=None):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    entries = []  # (path in the image, mode, bytes)
    entries.append(("usr/local/bin/gpuwl", 0o755, open(binary, "rb").read()))
    for lib in libraries(binary):
        entries.append((lib.lstrip("/"), 0o755, open(os.path.realpath(lib), "rb").read()))
    entries.append(("etc/passwd", 0o644, b"root:x:0:0:root:/root:/sbin/nologin\n"
                    b"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
    entries.append(("etc/group", 0o644, b"root:x:0:\nnonroot:x:65532:\n"))
    # Every parent folder, once, before its files; /tmp for serve's scratch files.
    all_dirs = set()
    for d in {os.path.dirname(p) for p, _, _ in entries} | {"tmp"}:
        parts = d.split("/")
        for i in range(1, len(parts) + 1):
            all_dirs.add("/".join(parts[:i]))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(all_dirs):
            info = tarfile.TarInfo(d + "/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755, epoch
            tar.addfile(info)
        for path, mode, data in sorted(entries):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode, epoch
            tar.addfile(info, io.BytesIO(data))
    layer = buf.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    version = reference.rsplit(":", 1)[-1]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": "65532:65532",
            "Entrypoint": ["/usr/local/bin/gpuwl"],
            "Cmd": ["serve", "--listen", "0.0.0.0:9850"],
            "ExposedPorts": {"9850/tcp": {}},
            "Env": ["PATH=/usr/local/bin"],
            "WorkingDir": "/",
            "Labels": {
                "org.opencontainers.image.title": "gpuwl",
                "org.opencontainers.image.version": version,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "scripts/oci_image.py (gpuwl, its ldd libraries)"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id.split(":")[1] + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": [reference], "Layers": [layer_name]}]
    tmp = out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((config_name, config_bytes), (layer_name, layer),
                           ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, epoch
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, out)
    if rootfs:
        with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
            tar.extractall(rootfs)
    print(f"{reference} config sha256:{config_name[:-5]} layer {diff_id} ({len(layer)} bytes)")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: oci_image.py BINARY REFERENCE OUT.tar [ROOTFS_DIR]")
    main(*sys.argv[1:])
