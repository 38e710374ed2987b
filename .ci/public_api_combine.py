"""The public API of `tower-agent` as its users see it: the facade's own listing with the
core crate's items expanded under the paths the facade re-exports them at.

`cargo public-api` lists a crate's own items at every public path, but another crate's items
only as `pub use` lines (rustdoc JSON does not inline them). The facade re-exports the core
(`tower-agent-core`) under the same paths (`pub use tower_agent_core::{agent, ...}`, the glob
re-exports of `model` and `store`) and a few core items under other paths
(`layers::hooks::StopInput`, ...). So the listing users see is:

- every line of the core's listing, `tower_agent_core::` read as `tower_agent::` (same paths);
- every line of the facade's listing, the same, but its `pub use` lines of core items;
- for a `pub use tower_agent::PATH::NAME` of a core item at another path: the core's lines of
  that item (its declaration, fields, methods, impls) under `tower_agent::PATH::NAME`.

    python3 .ci/public_api_combine.py CORE_LISTING FACADE_LISTING \
        [CRATE_PATH=FACADE_PATH:LISTING ...] > combined

Crates the facade re-exports under another path (a store crate as `store::sqlite`) are given
as `tower_agent_sqlite::=tower_agent::store::sqlite:::LISTING`: their lines are read under
that path and counted with the core's.
"""

import re
import sys

CORE, FACADE = "tower_agent_core::", "tower_agent::"
DECL = re.compile(
    r"^(?:#\[[^\]]*\] )*pub (?:(?:async |const |unsafe )*fn|struct|enum|trait|type|const|static|union|mod|macro) "
    r"(tower_agent::[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)"
)


def subject(line):
    """The path a line is about: the item it declares, or the type of an `impl` line."""
    if line.startswith("impl"):
        rest = re.sub(r"^impl(<[^>]*(?:<[^>]*>[^>]*)*>)? ", "", line)
        rest = rest.split(" for ", 1)[1] if " for " in rest else rest
        m = re.match(r"(?:&(?:'\w+ )?(?:mut )?)?(tower_agent::[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)", rest)
        return m.group(1) if m else None
    m = re.match(r"^(?:#\[[^\]]*\] )*pub (?:(?:async |const |unsafe )*fn |struct |enum |trait |type |const |static |union |mod |macro )?(tower_agent::[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)", line)
    return m.group(1) if m else None


def main(core_path, facade_path, *others):
    maps = [(CORE, FACADE)]
    listings = [core_path]
    for spec in others:
        names, listing = spec.rsplit(":", 1)
        crate, at = names.split("=", 1)
        maps.append((crate, at))
        listings.append(listing)

    roots = {}
    for crate, at in maps[1:]:
        roots["pub mod " + crate[: -len("::")]] = "pub mod " + at[: -len("::")]

    def read(path):
        lines = []
        for l in open(path):
            l = roots.get(l.rstrip("\n"), l)
            if l.strip():
                for crate, at in maps:
                    l = l.replace(crate, at)
                lines.append(l.rstrip("\n"))
        return lines

    # Every crate's own lines; the `pub use` lines of any of them (the facade's, and a crate's
    # re-export of the core's items, as `layers::hooks::StopInput`) are expanded below.
    lines = [l for path in listings + [facade_path] for l in read(path)]
    core = [l for l in lines if not l.startswith("pub use ")]
    declared = {}
    for line in core:
        m = DECL.match(line)
        if m:
            declared.setdefault(m.group(1).rsplit("::", 1)[-1], []).append(m.group(1))
    out = set(core)
    for line in lines:
        if not line.startswith("pub use "):
            continue
        # A re-export: of the crate's own item (listed at its path already), of a core module
        # at the same path (covered by the core's lines), or of an item at another path.
        path = line[len("pub use "):]
        if "pub mod " + path in roots.values():
            continue  # a crate re-exported whole, at the path its lines are read under
        if "<<" in path:
            continue  # a glob of a core module at the same path
        name = path.rsplit("::", 1)[-1]
        targets = declared.get(name, [])
        if path in targets:
            continue  # an item at the same path
        if not targets:
            out.add(line)  # another crate's item (tower's, ...), or a crate re-exported whole
            continue
        target = min(targets, key=len)
        pat = re.compile(re.escape(target) + r"(?=$|::|<|\s|\)|,)")
        for l in core:
            s = subject(l)
            if s and (s == target or s.startswith(target + "::")):
                out.add(pat.sub(path, l, count=0) if l.startswith("impl") else l.replace(target, path, 1))
    for line in sorted(out):
        print(line)


if __name__ == "__main__":
    main(*sys.argv[1:])
