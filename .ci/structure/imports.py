#!/usr/bin/env python3
"""The import graph of a crate's src (issue 29): edges file -> file from
`crate::` and `super::` paths (doc links included, test modules not).

    python3 .ci/structure/imports.py lock/src [-v] [--layers] [--check]

Prints the file and edge counts and every import circle; --layers also
every import that runs up the lock crate's layers (LAYERS below, as in
ARCHITECTURE.md); --check exits 1 if there is a circle or an import up.
"""
import os, re, sys
root = sys.argv[1]
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs') and not f.endswith('_tests.rs'):
            p = os.path.relpath(os.path.join(d, f), root)
            files[p] = open(os.path.join(d, f)).read()
def modpath(p):
    p = p[:-3]
    parts = p.split('/')
    if parts[-1] in ('mod', 'lib'): parts = parts[:-1]
    return parts
mods = {tuple(modpath(p)): p for p in files}
def resolve(parts):
    # longest prefix that is a module
    for i in range(len(parts), 0, -1):
        if tuple(parts[:i]) in mods: return mods[tuple(parts[:i])]
    return None
edges = {}
for p, src in files.items():
    # strip test modules
    src = re.split(r'#\[cfg\(test\)\]\s*mod tests', src)[0]
    me = modpath(p)
    tgt = set()
    for m in re.finditer(r'crate::((?:[a-z_0-9]+::)*[a-zA-Z_0-9]+)', src):
        r = resolve(m.group(1).split('::'))
        if r and r != p: tgt.add(r)
    for m in re.finditer(r'\bsuper::((?:[a-z_0-9]+::)*[a-zA-Z_0-9{]+)', src):
        base = me[:-1] if not p.endswith('mod.rs') else me[:-1]
        # super of a file a/b.rs is a ; super of a/mod.rs is parent of a
        base = me[:-1]
        r = resolve(base + m.group(1).split('::'))
        if r and r != p: tgt.add(r)
    # nested use crate::{a::x, b::y}
    for m in re.finditer(r'use crate::\{([^;]*)\};', src, re.S):
        for item in re.findall(r'([a-z_0-9]+)(?:::|\s*[,}]|$)', m.group(1)):
            r = resolve([item])
            if r and r != p: tgt.add(r)
    # children declared here and named by a relative path (`hold::Hold`)
    here = me if p.endswith(('mod.rs', 'lib.rs')) else me
    for child in re.findall(r'^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_0-9]+)\s*;', src, re.M):
        if re.search(r'(?<![:\w])' + child + r'::', src):
            r = resolve(here + [child])
            if r and r != p: tgt.add(r)
    edges[p] = tgt
# SCCs (Tarjan)
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in edges:
    if v not in idx: sc(v)
n = sum(len(t) for t in edges.values())
print(f"files {len(files)}, edges {n}")
cycles = 0
for comp in sccs:
    if len(comp) > 1:
        cycles += 1
        inner = sum(1 for a in comp for b in edges[a] if b in comp)
        print(f"cycle of {len(comp)} files, {inner} edges: {' '.join(sorted(comp))}")
if '-v' in sys.argv:
    for p in sorted(edges): print(p, '->', ' '.join(sorted(edges[p])))
# Layers (issue 29): an edge may only go to a lower layer, or within one
# folder-layer to a file listed before it (checked by the absence of cycles).
LAYERS = [
    ("0 base", ["error.rs", "names.rs", "scripts.rs", "background.rs", "waiters.rs", "reply.rs", "config.rs", "span.rs", "inspection.rs", "owner.rs"]),
    ("1 lease engine + hold", ["lease/"]),
    ("2 context", ["context.rs", "wake.rs", "shape.rs", "probe.rs", "section.rs"]),
    ("3 lock handle + guard", ["lock/"]),
    ("4 types", ["types/"]),
    ("5 Locks", ["locks.rs", "force.rs", "inspect.rs"]),
    ("6 over several Locks", ["redlock.rs", "redlock/"]),
]
def layer(p):
    for i, (_, pats) in enumerate(LAYERS):
        for pat in pats:
            if p == pat or (pat.endswith('/') and p.startswith(pat)):
                return i
    return None
if '--layers' in sys.argv:
    up = 0; side = []
    for a in sorted(edges):
        la = layer(a)
        if la is None: continue
        for b in sorted(edges[a]):
            lb = layer(b)
            if lb is None: continue
            if lb > la:
                up += 1; print(f"UP   {a} (L{la}) -> {b} (L{lb})")
            elif lb == la and a.split('/')[0] != b.split('/')[0]:
                side.append(f"SIDE {a} -> {b}")
            elif lb == la and a.startswith('types/') and a.split('/')[1] != b.split('/')[1]:
                side.append(f"SIDE {a} -> {b}")
    # A file outside every layer is a layer nobody placed: it fails the check.
    unplaced = [f for f in sorted(files) if layer(f) is None and f not in ('lib.rs', 'fuzzing.rs')]
    for f in unplaced:
        print("NO LAYER", f)
    print(f"imports up: {up}")
    if "-v" in sys.argv:
        for s_ in side: print(s_)
    if '--check' in sys.argv and (up or cycles or unplaced):
        sys.exit(1)

if '--check' in sys.argv and cycles:
    sys.exit(1)
