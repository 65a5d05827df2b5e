"""The command line a bench section (gatewaybench.py, proxybench.py) has when
run alone: --attled, --json, the section's own arguments; its figures written
as JSON; exit 1 when a target failed."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Callable

from attledtools import REPO_ROOT


def main(doc: str | None, add_arguments: Callable[[argparse.ArgumentParser], None],
         run: Callable[[argparse.Namespace, dict], bool], build_hint: str = "make release") -> int:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attled", default=str(REPO_ROOT / ".build/release/attled"))
    ap.add_argument("--json", help="also write the figures here")
    add_arguments(ap)
    args = ap.parse_args()
    if not os.path.exists(args.attled):
        ap.error(f"no attled binary at {args.attled} ({build_hint})")
    figures: dict = {}
    failed = run(args, figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0 if not failed else 1
