#!/usr/bin/env python3
"""CycloneDX 1.5 JSON SBOM of gpuwl's release binary, from cargo's resolver and Cargo.lock.

Usage: sbom.py TREE.txt METADATA.json Cargo.lock > gpuwl.cdx.json
  TREE.txt: `cargo tree --locked -e normal --target TARGET --prefix depth --format '{p}'`:
    the crates the release build compiles, with the features it really enables (cargo
    metadata's resolve unites dev-dependencies' features and lists ~25 crates more);
    dev- and build-dependencies left out, proc-macros kept.
  METADATA.json: `cargo metadata --locked --format-version 1` (licence, description, links).
Components: each crate with its purl, licence expression and Cargo.lock's sha256 (crates.io
crates); dependencies: the tree's edges. The timestamp
is SOURCE_DATE_EPOCH's and the serial number derives from the root and Cargo.lock, so the
same commit gives the same file.
"""
import datetime
import hashlib
import json
import os
import re
import sys
import uuid


def purl(pkg):
    return f"pkg:cargo/{pkg['name']}@{pkg['version']}"


def parse_tree(text):
    """(root, {(name, version): set of (name, version) it depends on}) from depth-prefixed
    `cargo tree` lines such as `2axum-core v0.5.6` or `3tokio v1.0.0 (*)`."""
    edges, stack, root = {}, [], None
    for line in text.splitlines():
        m = re.fullmatch(r"(\d+)(\S+) v(\S+)( .*)?", line.strip())
        if not m:
            raise ValueError(f"cargo tree line not understood: {line!r}")
        depth, node = int(m.group(1)), (m.group(2), m.group(3))
        edges.setdefault(node, set())
        del stack[depth:]
        if depth == 0:
            if root is not None:
                raise ValueError("cargo tree printed more than one root")
            root = node
        else:
            edges[stack[-1]].add(node)
        stack.append(node)
    return root, edges


def lock_checksums(text):
    """{(name, version): sha256} of Cargo.lock's [[package]] entries that have a checksum
    (tomllib where Python has it, 3.11+; else the lock file's fixed layout, line by line)."""
    try:
        import tomllib
    except ImportError:
        out = {}
        for block in text.split("[[package]]")[1:]:
            fields = dict(re.findall(r'(?m)^(name|version|checksum) = "([^"]*)"$', block))
            if "checksum" in fields:
                out[(fields["name"], fields["version"])] = fields["checksum"]
        return out
    return {
        (p["name"], p["version"]): p["checksum"]
        for p in tomllib.loads(text).get("package", [])
        if "checksum" in p
    }


def main(tree_path, metadata_path, lock_path):
    root, edges = parse_tree(open(tree_path).read())
    meta = json.load(open(metadata_path))
    lock_bytes = open(lock_path, "rb").read()
    checksums = lock_checksums(lock_bytes.decode())
    pkgs = {(p["name"], p["version"]): p for p in meta["packages"]}
    missing = sorted(f"{n}@{v}" for n, v in edges if (n, v) not in pkgs)
    if missing:
        raise ValueError(f"not in cargo metadata: {missing}")

    def component(pkg, kind):
        c = {"type": kind, "bom-ref": purl(pkg), "name": pkg["name"],
             "version": pkg["version"], "purl": purl(pkg)}
        if pkg.get("description"):
            c["description"] = pkg["description"].strip()
        if pkg.get("license"):
            c["licenses"] = [{"expression": pkg["license"]}]
        sha = checksums.get((pkg["name"], pkg["version"]))
        if sha:
            c["hashes"] = [{"alg": "SHA-256", "content": sha}]
        refs = []
        if pkg.get("repository"):
            refs.append({"type": "vcs", "url": pkg["repository"]})
        if pkg.get("source", "") and pkg["source"].startswith("registry+"):
            refs.append({"type": "distribution",
                         "url": f"https://crates.io/crates/{pkg['name']}/{pkg['version']}"})
        if refs:
            c["externalReferences"] = refs
        return c

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    rootpkg = pkgs[root]
    key = lambda node: purl(pkgs[node])
    serial = uuid.UUID(bytes=hashlib.sha256(purl(rootpkg).encode() + lock_bytes).digest()[:16],
                       version=4)
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "gpuwl scripts/sbom.py",
                                      "description": "cargo metadata + Cargo.lock"}]},
            "component": component(rootpkg, "application"),
        },
        "components": [component(pkgs[n], "library")
                       for n in sorted(set(edges) - {root}, key=key)],
        "dependencies": [
            {"ref": key(n), "dependsOn": sorted(key(d) for d in edges[n])}
            for n in sorted(edges, key=key)
        ],
    }
    json.dump(bom, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: sbom.py TREE.txt METADATA.json Cargo.lock")
    try:
        main(*sys.argv[1:])
    except ValueError as e:
        sys.exit(f"sbom.py: {e}")
