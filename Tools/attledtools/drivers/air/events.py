"""vworld's output: one JSON event line on stdout per event, flushed, with "t"
the seconds since start."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

START = time.monotonic()


def emit(event: dict[str, Any]) -> None:
    """Print one JSON event line on stdout, flushed."""
    line = {"event": event["event"], "t": round(time.monotonic() - START, 4)}
    line.update({k: v for k, v in event.items() if k != "event"})
    try:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
