"""The Swift modules the fuzz harnesses need, read from the package itself.

Prints one line per module, "Name Dep Dep ...", dependencies first: the
modules Fuzz/Sources imports and everything they depend on, as
`swift package dump-package` (on stdin) declares them. Only Swift targets
(a folder of .swift files under Sources/) are listed; the C and system
library targets are reached through -I and the loader objects. So a module
added to Package.swift never has to be added here by hand.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def swift_targets(package: dict) -> dict[str, list[str]]:
    """name -> the Swift targets it depends on, for every Swift regular target."""
    def is_swift(name: str) -> bool:
        return any((ROOT / "Sources" / name).glob("*.swift"))

    deps: dict[str, list[str]] = {}
    for t in package["targets"]:
        if t["type"] != "regular" or not is_swift(t["name"]):
            continue
        names = []
        for d in t["dependencies"]:
            ref = d.get("byName") or d.get("target") or d.get("product") or [None]
            if ref[0]:
                names.append(ref[0])
        deps[t["name"]] = names
    for name in deps:
        deps[name] = [d for d in deps[name] if d in deps]
    return deps


def imported() -> set[str]:
    found = set()
    for f in (HERE / "Sources").glob("*.swift"):
        found.update(re.findall(r"^import (\w+)", f.read_text(), re.M))
    return found


def main() -> int:
    deps = swift_targets(json.load(sys.stdin))
    wanted: set[str] = set()
    todo = [m for m in imported() if m in deps]
    while todo:
        m = todo.pop()
        if m not in wanted:
            wanted.add(m)
            todo.extend(deps[m])
    done: list[str] = []
    while len(done) < len(wanted):
        ready = sorted(m for m in wanted - set(done) if all(d in done for d in deps[m]))
        if not ready:
            print("module graph has a cycle", file=sys.stderr)
            return 1
        done.extend(ready)
    for m in done:
        print(" ".join([m, *deps[m]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
