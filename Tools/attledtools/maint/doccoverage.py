"""Doc-comment coverage of the library's public API: public types, functions
and initialisers (issue 11 asks for at least 90%), and `- Throws:` on public
throwing functions. Usage: .venv/bin/python -m attledtools.maint.doccoverage [--list] [--min PCT]"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3] / "Sources"  # Tools/attledtools/maint/ -> the repository
SKIP = {"AttledCLI", "attled", "attled-bench", "smp-selftest", "CBluetooth", "CCrypto", "CMosquitto", "CMosquittoLoader"}
DECL = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*public\s+(?:(?:final|static|override|convenience|mutating|nonisolated|indirect)\s+)*"
                  r"(class|struct|enum|protocol|func|init\??|typealias)\b")


def main() -> int:
    total = documented = 0
    throwing = throws_doc = 0
    missing = []
    for f in sorted(ROOT.rglob("*.swift")):
        if f.relative_to(ROOT).parts[0] in SKIP:
            continue
        lines = f.read_text().splitlines()
        for i, line in enumerate(lines):
            m = DECL.match(line)
            if not m:
                continue
            total += 1
            j = i - 1
            while j >= 0 and lines[j].strip().startswith("@"):
                j -= 1
            doc = []
            while j >= 0 and lines[j].strip().startswith("///"):
                doc.append(lines[j])
                j -= 1
            if doc:
                documented += 1
            else:
                missing.append(f"{f.relative_to(ROOT)}:{i + 1}: {line.strip()[:100]}")
            if m.group(1) in ("func", "init", "init?") and re.search(r"\)\s*(?:async\s+)?throws", line):
                throwing += 1
                if any("- Throws:" in d for d in doc):
                    throws_doc += 1
    pct = 100.0 * documented / max(1, total)
    print(f"public types, functions and initialisers: {documented}/{total} documented ({pct:.1f}%)")
    print(f"public throwing functions with '- Throws:': {throws_doc}/{throwing}")
    if "--list" in sys.argv:
        print("\n".join(missing))
    if "--min" in sys.argv:
        need = float(sys.argv[sys.argv.index("--min") + 1])
        return 0 if pct >= need else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
