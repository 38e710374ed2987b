"""The decision of `.ci/module-graph` (see there): reads cargo-modules' graph of the library
and the module files under `src`, and exits 1 when the top-level modules import each other in
a cycle.

usage: module_graph.py GRAPH.dot SRC_DIR [--edges]
"""
import collections
import os
import re
import sys

NODE = re.compile(r'^\s*"([^"]+)" \[label="([^|"]*)\|')
EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[label="(uses|owns)"')


def resolved_edges(graph, edges, modules):
    """The "uses" edges of cargo-modules between items of two top-level modules."""
    kinds, owner, uses, crate = {}, {}, [], None
    for line in open(graph):
        m = EDGE.match(line)
        if m:
            a, b, label = m.groups()
            if label == "owns":
                owner[b] = a
            else:
                uses.append((a, b))
            continue
        m = NODE.match(line)
        if m:
            kinds[m.group(1)] = m.group(2).split()[-1]
            crate = crate or m.group(1).split("::")[0]
    if crate is None:
        sys.exit("module-graph: cargo-modules printed no item")
    for a, b in uses:
        if kinds.get(owner.get(a, ""), "mod") in ("struct", "enum", "union"):
            continue  # a method: filed under its type, wherever its code is
        pa, pb = a.split("::"), b.split("::")
        if len(pa) < 2 or len(pb) < 2 or pa[0] != crate or pb[0] != crate:
            continue  # the crate root, or another crate
        modules.update((pa[1], pb[1]))
        if pa[1] != pb[1]:
            edges[(pa[1], pb[1])].append(f"{a} uses {b}")


def code(text):
    """The code of a file: comments, strings and `#[cfg(test)]` modules cut off."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.split(r"#\[cfg\(test\)\]\s*mod\s+\w+", text)[0]


def path_edges(src, edges, modules):
    """The `crate::NAME` paths written in the code of each top-level module's files."""
    tops = {n.removesuffix(".rs") for n in os.listdir(src)} - {"lib", "main"}
    for dirpath, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            top = os.path.relpath(path, src).split(os.sep)[0].removesuffix(".rs")
            if top not in tops:
                continue
            modules.add(top)
            for target in set(re.findall(r"\bcrate::(\w+)", code(open(path).read()))):
                if target != top and target in tops:
                    edges[(top, target)].append(f"{os.path.relpath(path, src)} names crate::{target}")


def cycles(modules, edges):
    """The strongly connected components of more than one module (Tarjan)."""
    succ = collections.defaultdict(set)
    for a, b in edges:
        succ[a].add(b)
    index, low, on, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    return found


def main():
    graph, src = sys.argv[1], sys.argv[2]
    flag = sys.argv[3] if len(sys.argv) > 3 else ""
    edges, modules = collections.defaultdict(list), set()
    resolved_edges(graph, edges, modules)
    path_edges(src, edges, modules)
    if flag == "--edges":
        for (a, b), how in sorted(edges.items()):
            print(f"{a} -> {b}: {how[0]} (+{len(how) - 1} more)")
    found = cycles(modules, edges)
    print(f"module-graph: {len(modules)} top-level modules, {len(edges)} imports between "
          f"them, {len(found)} cycle(s)")
    for scc in found:
        print(f"cycle of {len(scc)} modules: {', '.join(scc)}")
        for (a, b), how in sorted(edges.items()):
            if a in scc and b in scc:
                print(f"  {a} -> {b}: {how[0]} (+{len(how) - 1} more)")
    sys.exit(1 if found else 0)


main()
