"""What the bench's reference processes (gateway_reference.py,
proxy_reference.py) share: JSON event lines on stdout, the stop event
(SIGINT, SIGTERM, or stdin closed with --exit-on-stdin-eof), and the
entry point that turns an exception into an error event and exit 1."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
from typing import Awaitable, Callable


def say(**event) -> None:
    print(json.dumps(event), flush=True)


def stop_event(exit_on_stdin_eof: bool) -> asyncio.Event:
    """An event set on SIGINT or SIGTERM, or when stdin closes (the bench died)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if exit_on_stdin_eof:
        def watch_stdin() -> None:
            sys.stdin.read()
            loop.call_soon_threadsafe(stop.set)
        threading.Thread(target=watch_stdin, daemon=True).start()
    return stop


def main(run: Callable[[argparse.Namespace], Awaitable[int]], ap: argparse.ArgumentParser) -> int:
    """Parses the arguments (adding --exit-on-stdin-eof) and runs `run`;
    an exception is said as {"event": "error"} and exits 1."""
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    args = ap.parse_args()
    try:
        return asyncio.run(run(args))
    except Exception as error:  # noqa: BLE001
        say(event="error", error=f"{type(error).__name__}: {error}")
        return 1
