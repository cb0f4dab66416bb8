#!/usr/bin/env python3
"""Lists the calls that run up gpuwl's layers (docs/architecture.md, "Layers").

usage: python3 scripts/layers.py [--all] [REPO_ROOT]

gpuwl is two crates: crates/gpuwl-core (model, readers, analyses, output; no kube, tokio
or HTTP stack: the compiler keeps it from calling the crate above it) and the root crate
gpuwl (src/). Inside each crate every module has a rank (LAYERS below); code may use a
module of its own rank or lower. Every `crate::<module>` (or `gpuwl_core::<module>`) path
outside comments, string literals and `#[cfg(test)]` modules that names a higher-ranked
module is an upward call: printed as `NEW`, exit status 1. A key `a/b` ranks the file
`a/b.rs` and the paths `crate::a::b…` apart from the rest of `a` (the root crate's
`render/lab.rs` renders the lab's report and sits with the lab, above the core's
`render`). KNOWN lists accepted
exceptions (none: the 15 there were when the layers were written down are paid off);
`--all` prints them line by line.

It also fails on any file-level import cycle (files of one crate that name each other
through `use crate::…`, `super::…` or paths written out in code, `#[cfg(test)]` modules left
out; a file naming its own ancestor's mod.rs does not count): none is accepted. Before the
check it runs its own self-test (`self_test`: a cycle of two files is found, a child using
its parent is not one), so a broken cycle finder fails too.
"""
import os, re, sys

CORE = "crates/gpuwl-core/src"

# Rank per module, lowest first, per crate (source directory).
LAYERS = {
    CORE: {
        # text helpers, escaping, the error type and exit codes
        "text": 0, "error": 0,
        # the domain records every reader produces
        "model": 1,
        # documents (dumps, API objects, must-gather bundles) into model records
        "decode": 2,
        # pure analyses over model records
        "analysis": 3,
        # text / JSON / YAML / CSV of analysis results
        "render": 4,
    },
    "src": {
        # the core's modules, re-exported under their old paths (`crate::model::…`)
        "text": 0, "error": 0, "model": 1, "analysis": 3, "render": 4,
        # reading files, dumps and the live API into model records; certificates (rcgen)
        "files": 5, "input": 5, "pki": 5, "signals": 5,
        # the local control plane, and its report's render
        "cluster": 6, "render/cluster": 6,
        # commands' engines that write or start things, and their reports' render
        "relabel": 7, "twin": 7,
        # the exporter and admission guard
        "serve": 8,
        # the lab, and its report's render
        "lab": 9, "render/lab": 9,
        # argument parsing and `run` per command
        "cli": 10,
    },
}

# Upward calls accepted as "file -> module" (a debt to pay, not a pattern to copy): none.
KNOWN = set()


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


def rank_of(layers, parts):
    """The rank of module path `parts` (`["render", "relabel", …]`): its two-part key when
    there is one, else its top module's; `None` for a path outside the table."""
    if len(parts) > 1 and f"{parts[0]}/{parts[1]}" in layers:
        return f"{parts[0]}/{parts[1]}", layers[f"{parts[0]}/{parts[1]}"]
    if parts and parts[0] in layers:
        return parts[0], layers[parts[0]]
    return None, None


def targets(text, prefix):
    """The module paths (`[top, second]`) that `prefix::…` paths in `text` name."""
    found = set()
    for a, b in re.findall(rf"\b{prefix}::(\w+)(?:::(\w+))?", text):
        found.add((a, b))
    for group in re.findall(rf"\b{prefix}::\{{([^}}]*)\}}", text):
        for a, b in re.findall(r"(\w+)::(\w+)?", group):
            found.add((a, b))
    return found


def check(repo, crate_dir, layers, new, known):
    root = os.path.join(repo, crate_dir)
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            parts = [p for p in rel.removesuffix(".rs").split(os.sep) if p != "mod"]
            own_key, own = rank_of(layers, parts)
            if own is None:
                continue
            text = strip(open(path, encoding="utf-8").read())
            refs = [(layers, t) for t in targets(text, "crate")]
            if crate_dir != CORE:
                refs += [(LAYERS[CORE], t) for t in targets(text, "gpuwl_core")]
            for table, (a, b) in sorted(refs, key=lambda r: r[1]):
                key, rank = rank_of(table, [a] + ([b] if b else []))
                if rank is not None and rank > own:
                    line = f"{crate_dir}/{rel} -> {key}"
                    (known.add if line in KNOWN else new.append)(line)


def module_file(root, parts):
    """The file that defines module path `parts` under `root` (`a/b.rs` or `a/b/mod.rs`),
    trying the longest prefix first; `None` when none exists."""
    for n in range(len(parts), 0, -1):
        base = os.path.join(root, *parts[:n])
        for cand in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.isfile(cand):
                return os.path.relpath(cand, root)
    return None


def imports(root, rel, text):
    """The files of this crate that file `rel` names in its `use` items: `crate::…` and
    `super::…` paths, braces expanded one level. A file naming its own ancestor's
    `mod.rs` (a child using its parent's items) is not counted: the parent declares it."""
    me = [p for p in rel.removesuffix(".rs").split(os.sep) if p != "mod"]
    parent = me[:-1] if not rel.endswith("mod.rs") else me[:-1]
    out = set()
    # Paths written out in code (`crate::a::b::f(…)`) name their module file too.
    code = re.sub(r"\buse\s+[^;]+;", "", text)
    sup = parent[:-1] if rel.endswith("mod.rs") else parent
    inline = [m.split("::")[1:] for m in re.findall(r"\bcrate(?:::\w+)+", code)]
    inline += [sup + m.split("::")[1:] for m in re.findall(r"(?<![\w:])super(?:::\w+)+", code)]
    for h in inline:
        f = module_file(root, h)
        if f is not None and f != rel:
            fparts = [p for p in f.removesuffix(".rs").split(os.sep) if p != "mod"]
            if not (f.endswith("mod.rs") and me[: len(fparts)] == fparts):
                out.add(f)
    for stmt in re.findall(r"\buse\s+([^;]+);", text):
        stmt = re.sub(r"\s+", "", stmt)
        heads = []
        m = re.match(r"^(crate|super)((?:::\w+)*)(?:::\{(.*)\})?$", stmt)
        if not m:
            continue
        base = [x for x in m.group(2).split("::") if x]
        start = [] if m.group(1) == "crate" else parent[:-1] if rel.endswith("mod.rs") else parent
        if m.group(3) is None:
            heads.append(start + base)
        else:
            for item in m.group(3).split(","):
                item = item.split("::{")[0]
                heads.append(start + base + [x for x in item.split("::") if x and x != "self"])
        for h in heads:
            f = module_file(root, h)
            if f is None or f == rel:
                continue
            fparts = [p for p in f.removesuffix(".rs").split(os.sep) if p != "mod"]
            if f.endswith("mod.rs") and me[: len(fparts)] == fparts:
                continue
            out.add(f)
    return out


def cycles(repo, crate_dir):
    """File-level import cycles of one crate (strongly connected groups of two or more
    files, `#[cfg(test)]` modules left out), each as its sorted files."""
    root = os.path.join(repo, crate_dir)
    graph = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, f), root)
                graph[rel] = imports(root, rel, strip(open(os.path.join(d, f), encoding="utf-8").read()))
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(tuple(sorted(group)))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def self_test():
    """The cycle finder on a crate written to a temporary directory: `a.rs` and `b.rs` naming
    each other (one through `use crate::…`, one through a path in code) are one cycle;
    `p/mod.rs` and its child `p/c.rs` naming each other, and `d.rs` naming `a.rs` one way,
    are none. Exits 2 when the finder says otherwise."""
    import tempfile
    files = {
        "lib.rs": "pub mod a;\npub mod b;\npub mod d;\npub mod p;\n",
        "a.rs": "use crate::b::B;\npub struct A;\n",
        "b.rs": "pub struct B;\npub fn f() { let _ = crate::a::A; }\n",
        "d.rs": "use crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::d::*;\n}\n",
        "p/mod.rs": "pub mod c;\nuse crate::p::c::C;\n",
        "p/c.rs": "use super::*;\npub struct C;\n",
    }
    with tempfile.TemporaryDirectory() as repo:
        for rel, text in files.items():
            path = os.path.join(repo, CORE, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        got = cycles(repo, CORE)
    if got != [("a.rs", "b.rs")]:
        print(f"layers.py self-test failed: cycles {got}, expected [('a.rs', 'b.rs')]")
        sys.exit(2)


def main():
    self_test()
    args = [a for a in sys.argv[1:] if a != "--all"]
    show_all = "--all" in sys.argv[1:]
    repo = args[0] if args else "."
    new, known = [], set()
    for crate_dir, layers in LAYERS.items():
        check(repo, crate_dir, layers, new, known)
    for k in sorted(known) if show_all else []:
        print("known", k)
    for k in sorted(set(new)):
        print("NEW", k)
    for k in sorted(KNOWN - known):
        print("paid off (remove from KNOWN):", k)
    print(f"{len(known)} known upward calls, {len(set(new))} new")
    found = [c for crate_dir in LAYERS for c in cycles(repo, crate_dir)]
    for c in found:
        print("import cycle:", " -> ".join(c))
    print(f"{len(found)} file-level import cycles")
    sys.exit(1 if new or found else 0)


if __name__ == "__main__":
    main()
