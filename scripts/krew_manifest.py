#!/usr/bin/env python3
"""Fills plugins/gpuwl.yaml for a release: spec.version, the linux/amd64 platform's uri and
sha256, spec.homepage. Line-based on purpose (the manifest's comments and order stay), and
strict: each field must occur exactly once, the sha256 must be 64 hex digits.

Usage: krew_manifest.py plugins/gpuwl.yaml TAG URI SHA256 HOMEPAGE > gpuwl.yaml
"""
import re
import sys


def fill(text, tag, uri, sha256, homepage):
    if not re.fullmatch(r"v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", tag):
        raise ValueError(f"tag {tag!r} is not vMAJOR.MINOR.PATCH")
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError(f"sha256 {sha256!r} is not 64 lowercase hex digits")
    # The header comment speaks of placeholders: the filled manifest says what it is.
    body = re.sub(r"\A(#[^\n]*\n)+", "", text)
    header = (f"# krew plugin manifest for gpuwl {tag}, written by scripts/release.sh"
              " (source: plugins/gpuwl.yaml).\n")
    for key, value in (("version", tag), ("homepage", homepage),
                       ("uri", uri), ("sha256", f'"{sha256}"')):
        body, n = re.subn(rf"(?m)^(\s*{key}: ).*$", lambda m: m.group(1) + value, body)
        if n != 1:
            raise ValueError(f"{key}: found {n} times, want exactly once")
    return header + body


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit("usage: krew_manifest.py MANIFEST TAG URI SHA256 HOMEPAGE")
    try:
        sys.stdout.write(fill(open(sys.argv[1]).read(), *sys.argv[2:]))
    except ValueError as e:
        sys.exit(f"krew_manifest.py: {e}")
