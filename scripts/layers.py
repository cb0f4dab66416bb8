#!/usr/bin/env python3
"""Lists the calls that run up gpuwl's layers (docs/architecture.md, "Layers").

usage: python3 scripts/layers.py [--all] [SRC_DIR]

Each top-level module of src/ has a rank (LAYERS below); code may use a module of its own
rank or lower. Every `crate::<module>` path outside comments and `#[cfg(test)]` modules
that names a higher-ranked module is an upward call. Those in KNOWN (the state when this
script was written, file and target module) are printed as `known`; any other is printed
as `NEW` and makes the exit status 1, so a CI step fails on a new upward call while the
known ones are paid off. `--all` also prints the known ones line by line.
"""
import os, re, sys

# Rank per top-level module, lowest first.
LAYERS = {
    # text helpers and the error type
    "text": 0, "error": 0,
    # the domain records every reader produces
    "model": 1,
    # pure analyses over model records
    "analysis": 2,
    # text / JSON / YAML / CSV of analysis results
    "render": 3,
    # reading files, dumps and the live API into model records
    "files": 4, "input": 4,
    # the local control plane
    "cluster": 5,
    # commands' engines that write or start things
    "relabel": 6, "twin": 6, "policy": 6,
    # the exporter and admission guard
    "serve": 7,
    # the lab
    "lab": 8,
    # argument parsing and `run` per command
    "cli": 9,
}

# Upward calls present when the layering was written down (issue 39), as
# "file -> module": each is a debt to pay, not a pattern to copy.
KNOWN = set(filter(None, """
src/analysis/dra_cel.rs -> input
src/analysis/explain/live.rs -> input
src/analysis/explain/rules.rs -> input
src/analysis/explain/vm.rs -> input
src/analysis/inventory.rs -> input
src/analysis/inventory.rs -> render
src/analysis/triage.rs -> input
src/error.rs -> cluster
src/input/live.rs -> cluster
src/render/cluster.rs -> cluster
src/render/lab.rs -> lab
src/render/relabel.rs -> relabel
src/render/triage.rs -> input
src/render/whatif.rs -> twin
src/text.rs -> render
""".strip().splitlines()))


def strip(src):
    """`src` with comments, string literals and `#[cfg(test)] mod` bodies blanked."""
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+\w+\s*\{", src):
        if m.start() < i:
            continue
        out.append(src[i:m.start()])
        depth, j = 0, m.end() - 1
        while j < len(src):
            depth += (src[j] == "{") - (src[j] == "}")
            if depth == 0:
                break
            j += 1
        i = j + 1
    out.append(src[i:])
    return "".join(out)


def main():
    args = [a for a in sys.argv[1:] if a != "--all"]
    show_all = "--all" in sys.argv[1:]
    root = args[0] if args else "src"
    new, known = [], set()
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            own = rel.split(os.sep)[0].removesuffix(".rs")
            if own not in LAYERS:
                continue
            text = strip(open(path, encoding="utf-8").read())
            targets = set(re.findall(r"\bcrate::(\w+)", text))
            for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
                targets.update(re.findall(r"(\w+)::", group))
            for t in sorted(targets):
                if t in LAYERS and LAYERS[t] > LAYERS[own]:
                    key = f"src/{rel} -> {t}"
                    (known.add if key in KNOWN else new.append)(key)
    for k in sorted(known) if show_all else []:
        print("known", k)
    for k in new:
        print("NEW", k)
    gone = sorted(KNOWN - known)
    for k in gone:
        print("paid off (remove from KNOWN):", k)
    print(f"{len(known)} known upward calls, {len(new)} new")
    sys.exit(1 if new else 0)


if __name__ == "__main__":
    main()
