#!/usr/bin/env python3
"""Fills plugins/gpuwl.yaml for a release: spec.version, spec.homepage, and per platform
(linux/amd64, linux/arm64) its archive's uri and sha256. A platform of the source manifest
that is not given (an arm64 archive not built) is left out of the result, and the command
says so on stderr. Line-based on purpose (the manifest's comments and order stay), and
strict: each field must occur exactly once (per platform), the sha256 must be 64 lowercase
hex digits, every platform given must be in the manifest.

Usage: krew_manifest.py plugins/gpuwl.yaml TAG HOMEPAGE ARCH=URI=SHA256 [ARCH=URI=SHA256] > gpuwl.yaml
  e.g. amd64=https://…/gpuwl-v0.2.0-x86_64-unknown-linux-gnu.tar.gz=<sha256>
Manifest format: https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/
"""
import re
import sys

PLATFORM_START = re.compile(r"^  - selector:\s*$")


def parse_platform(arg):
    arch, sep, rest = arg.partition("=")
    uri, sep2, sha256 = rest.rpartition("=")
    if not sep or not sep2 or not arch or not uri:
        raise ValueError(f"platform {arg!r} is not ARCH=URI=SHA256")
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError(f"sha256 {sha256!r} ({arch}) is not 64 lowercase hex digits")
    return arch, uri, sha256


def set_once(body, key, value, where):
    body, n = re.subn(rf"(?m)^(\s*{key}: ).*$", lambda m: m.group(1) + value, body)
    if n != 1:
        raise ValueError(f"{key}: found {n} times in {where}, want exactly once")
    return body


def fill(text, tag, homepage, platforms):
    if not re.fullmatch(r"v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", tag):
        raise ValueError(f"tag {tag!r} is not vMAJOR.MINOR.PATCH")
    given = dict((a, (u, s)) for a, u, s in map(parse_platform, platforms))
    if not given:
        raise ValueError("no platform given")
    # The header comment speaks of placeholders: the filled manifest says what it is.
    body = re.sub(r"\A(#[^\n]*\n)+", "", text)
    lines = body.split("\n")
    starts = [i for i, l in enumerate(lines) if PLATFORM_START.match(l)]
    if not starts:
        raise ValueError("no platform (`  - selector:`) in the manifest")
    # A platform's block runs to the next one, or to the first line indented less.
    end_all = next((i for i in range(starts[-1] + 1, len(lines))
                    if lines[i].strip() and not lines[i].startswith("    ")), len(lines))
    bounds = list(zip(starts, starts[1:] + [end_all]))
    head = "\n".join(lines[:starts[0]])
    tail = "\n".join(lines[end_all:])
    head = set_once(set_once(head, "version", tag, "spec"), "homepage", homepage, "spec")
    kept, seen = [], set()
    for a, b in bounds:
        block = "\n".join(lines[a:b])
        m = re.search(r"(?m)^\s*arch: (\S+)\s*$", block)
        if not m:
            raise ValueError(f"platform at line {a + 1} has no arch")
        arch = m.group(1)
        if arch not in given:
            print(f"krew_manifest.py: no archive for {arch}: its platform is left out",
                  file=sys.stderr)
            continue
        uri, sha256 = given[arch]
        block = set_once(block, "uri", uri, f"platform {arch}")
        block = set_once(block, "sha256", f'"{sha256}"', f"platform {arch}")
        kept.append(block)
        seen.add(arch)
    missing = sorted(set(given) - seen)
    if missing:
        raise ValueError(f"platform {', '.join(missing)} is not in the manifest")
    header = (f"# krew plugin manifest for gpuwl {tag}, written by scripts/release.sh"
              " (source: plugins/gpuwl.yaml).\n")
    return header + "\n".join([head] + kept + [tail])


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit("usage: krew_manifest.py MANIFEST TAG HOMEPAGE ARCH=URI=SHA256 [ARCH=URI=SHA256]")
    try:
        sys.stdout.write(fill(open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4:]))
    except ValueError as e:
        sys.exit(f"krew_manifest.py: {e}")
