"""A vworld process (attledtools.drivers.vworld) and the JSON events it prints:
start it, wait for an event with a deadline, stop it. Used by the scripts
(demo, bench, soak) and, through Tests/integration/conftest.py, by every
integration test."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable

from attledtools import REPO_ROOT, module_command

ROOT = REPO_ROOT
VWORLD = "attledtools.drivers.vworld"  # the module: module_command(VWORLD, ...)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WorldProcess:
    """vworld with ``args``; it exits by itself after ``lifetime`` seconds or when
    this process goes away (its stdin closes)."""

    def __init__(self, args: list[str], lifetime: int = 600, capture_stderr: bool = False):
        self.args = args
        self.events: list[dict] = []
        self._stderr: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(
            module_command(VWORLD, *args, "--exit-on-stdin-eof", "--lifetime", str(lifetime)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture_stderr else subprocess.DEVNULL,
            text=True, bufsize=1, cwd=str(ROOT))
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True)]
        if capture_stderr:
            self._threads.append(threading.Thread(target=self._read_stderr, daemon=True))
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            rx = time.monotonic()
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "_raw", "line": line}
            with self._cond:
                self._on_event(event, rx)
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _on_event(self, event: dict, rx: float) -> None:
        """Hook for subclasses: each event as it arrives (time.monotonic() ``rx``),
        under the lock, before it is stored."""

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    @property
    def exited(self) -> bool:
        return self._eof

    def wait(self, test: Callable[[dict], bool], timeout: float = 10.0, since: int = 0,
             latest: bool = False) -> dict | None:
        """The first (or, with ``latest``, the last) event from index ``since``
        passing ``test``, waiting up to ``timeout`` s; None on timeout or exit."""
        deadline = time.monotonic() + timeout
        index = since
        with self._cond:
            while True:
                if latest:
                    for e in reversed(self.events[since:]):
                        if test(e):
                            return e
                else:
                    while index < len(self.events):
                        if test(self.events[index]):
                            return self.events[index]
                        index += 1
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return None
                self._cond.wait(left)

    def wait_for(self, test: Callable[[dict], bool], timeout: float = 10.0, since: int = 0) -> dict | None:
        """The latest matching event (the scripts want the newest state)."""
        return self.wait(test, timeout, since, latest=True)

    def wait_ready(self, timeout: float = 30.0) -> dict | None:
        return self.wait(lambda e: e.get("event") == "ready", timeout)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        for thread in self._threads:
            thread.join(2)
        return self.proc.returncode
