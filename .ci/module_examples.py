#!/usr/bin/env python3
"""Every public module of every crate opens with a runnable example.

Walks each crate's `src/lib.rs` and, through `pub mod NAME;` declarations, every public module
file under it; a module passes when its `//!` docs hold a fenced code block rustdoc tests (no
language, `rust` or `should_panic`: compiled and run; `no_run`: compiled only, for the five
modules whose example needs a server or a key — providers, MCP client, PostgreSQL; not
`text`, `ignore`, `json`, ...). Exempt, as in
tower: a `future.rs` (the named response futures of a module's services) and an index module
whose own code is only `mod`, `pub mod`, `pub use` and attributes (its modules carry the
examples). Prints the modules that fail and exits 1; run from the workspace root.
"""

import glob
import os
import re
import sys

RUNNABLE = {"", "rust", "no_run", "should_panic", "rust,no_run", "rust,should_panic"}


def doc_lines(text):
    return [line[3:].strip() for line in text.split("\n") if line.startswith("//!")]


def has_runnable_example(text):
    fences = [line[3:].strip() for line in doc_lines(text) if line.startswith("```")]
    # Fences open and close in turn: the openings are every other one.
    return any(f in RUNNABLE for f in fences[::2])


def is_index(text):
    code = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("//"))
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code, flags=re.S)  # string literals, emptied
    code = re.sub(r"#!?\[[^\]]*\]", "", code)  # attributes
    code = re.sub(r"(pub(\(\w+\))? )?use [^;]*;", "", code)
    code = re.sub(r"(pub(\(\w+\))? )?mod \w+\s*(;|\{\s*\})", "", code)
    return not code.strip()


def module_file(directory, name):
    for path in (os.path.join(directory, name + ".rs"), os.path.join(directory, name, "mod.rs")):
        if os.path.exists(path):
            return path
    return None


def children_dir(path):
    base = os.path.basename(path)
    if base in ("lib.rs", "mod.rs"):
        return os.path.dirname(path)
    return path[: -len(".rs")]


def walk(path, failures):
    text = open(path, encoding="utf-8").read()
    exempt = os.path.basename(path) == "future.rs" or is_index(text)
    if not exempt and not has_runnable_example(text):
        failures.append(path)
    for name in re.findall(r"^\s*pub mod (\w+);", text, re.M):
        child = module_file(children_dir(path), name)
        if child:
            walk(child, failures)


def main():
    roots = ["src/lib.rs"] + sorted(glob.glob("tower-agent-*/src/lib.rs")) + ["hook-vectors/src/lib.rs"]
    failures = []
    for root in roots:
        walk(root, failures)
    if failures:
        for path in failures:
            print(f"{path}: its module docs have no runnable example", file=sys.stderr)
        sys.exit(1)
    print(f"module examples: every public module of {len(roots)} crates opens with one")


if __name__ == "__main__":
    main()
