"""A Tools/vworld.py process for the scripts (demo, bench, soak): start it,
collect its JSON events, wait for one with a deadline, stop it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WorldProcess:
    def __init__(self, args: list[str], lifetime: int = 600):
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "Tools/vworld.py"), *args, "--lifetime", str(lifetime)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events: list[dict] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()

    def wait_for(self, pred, timeout: float = 10.0, since: int = 0) -> dict | None:
        """The latest event from index `since` matching pred, waiting up to `timeout` s."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in reversed(self.events[since:]):
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.cond.wait(left)

    def wait_ready(self, timeout: float = 30.0) -> dict | None:
        return self.wait_for(lambda e: e.get("event") == "ready", timeout)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
