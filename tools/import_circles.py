#!/usr/bin/env python3
"""The import picture of the promoter crate: which file imports which (`crate::`, `super::` and
re-exported child-module paths), and the circles among them (strongly connected components), for
files and for rooms (the crate's top-level modules). Test modules (`#[cfg(test)] mod …`, `*_tests.rs`)
are left out unless --tests.

    python3 tools/import_circles.py [SRC_DIR] [--tests] [--edges]

A heuristic reader of Rust source, not a compiler: good enough to see the layering.
"""
import os
import re
import sys

args = [a for a in sys.argv[1:] if not a.startswith('--')]
src = args[0] if args else 'src'
show_edges = '--edges' in sys.argv
with_tests = '--tests' in sys.argv

# file -> module path
files = {}
for root, _, names in os.walk(src):
    for n in names:
        if not n.endswith('.rs'):
            continue
        p = os.path.join(root, n)
        rel = os.path.relpath(p, src)[:-3].split(os.sep)
        if rel in (['lib'], ['main']):
            files[p] = () if rel == ['lib'] else ('<main>',)
        elif rel[-1] == 'mod':
            files[p] = tuple(rel[:-1])
        else:
            files[p] = tuple(rel)
# `#[path = "x.rs"] mod name;` makes that file the child `name` of the declaring module.
for p, mod in list(files.items()):
    for m in re.finditer(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;',
                         open(p).read()):
        files[os.path.normpath(os.path.join(os.path.dirname(p), m.group(1)))] = mod + (m.group(2),)
mod_to_file = {v: k for k, v in files.items()}


def strip_comments(t):
    t = re.sub(r'//[^\n]*', '', t)
    t = re.sub(r'/\*.*?\*/', '', t, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', t)


def expand(text, i):
    """The paths that start at text[i] (after `crate`/`super`), `::{a, b::{c}}` groups included."""
    out = []

    def parse(i, segs):
        segs = list(segs)
        while True:
            m = re.match(r'\s*::\s*', text[i:])
            if not m:
                out.append(segs)
                return i
            i += m.end()
            if text[i] == '{':
                i += 1
                while True:
                    i += re.match(r'\s*', text[i:]).end()
                    if text[i] == '}':
                        return i + 1
                    m3 = re.match(r'(\w+|\*)', text[i:])
                    if not m3:
                        i += 1
                        continue
                    i = parse(i + m3.end(), segs + [m3.group(1)])
                    i += re.match(r'\s*(as\s+\w+\s*)?,?', text[i:]).end()
            m3 = re.match(r'(\w+|\*)', text[i:])
            if not m3:
                out.append(segs)
                return i
            segs.append(m3.group(1))
            i += m3.end()

    parse(i, [])
    return out


def inline_mods(text):
    """(start, end, name) of the inline `mod name { … }` blocks."""
    res = []
    for m in re.finditer(r'\bmod\s+(\w+)\s*\{', text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[j], 0)
            j += 1
        res.append((m.start(), j, m.group(1)))
    return res


def resolve(segs):
    """The file of the longest module prefix of a path."""
    for k in range(len(segs), -1, -1):
        if tuple(segs[:k]) in mod_to_file:
            return mod_to_file[tuple(segs[:k])]
    return None


# A `*_tests.rs` file is a test module whatever name its `#[path]` mounts it under
# (`decide_failure_tests.rs` is `mod failure_policy`).
test_files = {p for p, mod in files.items() if (mod and (mod[-1] == 'tests' or mod[-1].endswith('_tests'))) or p.endswith('_tests.rs')}
edges = {}
for p, mod in files.items():
    text = strip_comments(open(p).read())
    mods = inline_mods(text)
    test_spans = [(s, e) for s, e, _ in mods if re.search(r'#\[cfg\(test\)\]\s*$', text[max(0, s - 40):s])]

    def skipped(pos):
        return not with_tests and any(s <= pos < e for s, e in test_spans)

    def add(t):
        if t and t != p:
            edges.setdefault(p, set()).add(t)

    children = set(re.findall(r'\bmod\s+(\w+)\s*;', text))
    for m in re.finditer(r'\buse\s+(?:self\s*::\s*)?(\w+)\s*(?=::)', text):
        if m.group(1) in children and not skipped(m.start()):
            add(resolve(list(mod) + [m.group(1)]))
    for m in re.finditer(r'\b(crate|super)\b(?=\s*::)', text):
        if skipped(m.start()):
            continue
        j = m.end()
        if m.group(1) == 'crate':
            base = ()
        else:
            cur = list(mod) + [n for s, e, n in mods if s <= m.start() < e]
            base = tuple(cur[:-1])
            while (mm := re.match(r'\s*::\s*super\b', text[j:])):
                j += mm.end()
                base = base[:-1]
        for segs in expand(text, j):
            add(resolve(list(base) + [s for s in segs if s != '*']))


def circles(graph):
    """Tarjan's strongly connected components of more than one node."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


nodes = {p for p in files if with_tests or p not in test_files}
g = {p: sorted(t for t in edges.get(p, ()) if t in nodes) for p in nodes}
if show_edges:
    for p in sorted(g):
        for t in g[p]:
            print(f'{p} -> {t}')
cyc = circles(g)
print(f'{len(nodes)} files, {sum(map(len, g.values()))} import edges, {len(cyc)} circles')
for s in cyc:
    print(f'circle of {len(s)}:')
    for p in s:
        print('   ', p, '->', ', '.join(os.path.relpath(t, src) for t in g[p] if t in s))


def room(p):
    r = os.path.relpath(p, src).split(os.sep)[0]
    return r[:-3] if r.endswith('.rs') else r


rg = {room(p): set() for p in nodes}
for p, ts in g.items():
    rg[room(p)].update(room(t) for t in ts if room(t) != room(p))
rg = {r: sorted(ts) for r, ts in rg.items()}
cyc = circles(rg)
print(f'rooms: {len(rg)}, {sum(map(len, rg.values()))} edges, {len(cyc)} circles')
for s in cyc:
    print('   room circle:', ', '.join(f"{r} -> {'/'.join(t for t in rg[r] if t in s)}" for r in s))
