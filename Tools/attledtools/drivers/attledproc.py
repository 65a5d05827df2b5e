"""attled in the background, its stderr read line by line as it comes: the
integration tests (conftest.Running), the gateway soak and the gateway bench.

``AttledProcess(attled, args)`` starts it with a GATT/address cache and a bond
directory of its own under ``home`` (a new temporary directory unless given;
removed by ``finish``/``kill``); stdout is a pipe nobody reads unless
``stdout=False`` discards it; with ``log`` every stderr line is also written
to that file.
Every wait has a deadline.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path


class AttledProcess:
    def __init__(self, attled: str | Path, args: list[str], log: Path | None = None, stdout: bool = True,
                 home: Path | None = None, env: dict | None = None):
        self.home = str(home) if home is not None else tempfile.mkdtemp(prefix="attled-run-", dir="/tmp")
        env = {**os.environ, "XDG_CACHE_HOME": f"{self.home}/cache", "XDG_STATE_HOME": f"{self.home}/state", **(env or {})}
        self.args = [str(attled), *args]
        self.log = log
        self.p = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self.times: list[float] = []  # time.monotonic() of each line's arrival
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        out = open(self.log, "w") if self.log is not None else None
        try:
            for line in self.p.stderr:
                if out is not None:
                    out.write(line)
                    out.flush()
                with self.cond:
                    self.lines.append(line.rstrip("\n"))
                    self.times.append(time.monotonic())
                    self.cond.notify_all()
        finally:
            if out is not None:
                out.close()

    @property
    def stderr(self) -> str:
        with self.cond:
            return "\n".join(self.lines)

    def mark(self) -> int:
        """Index of the next stderr line (for ``since``)."""
        with self.cond:
            return len(self.lines)

    def count(self, text: str, since: int = 0) -> int:
        with self.cond:
            return sum(text in line for line in self.lines[since:])

    def wait_line(self, text, timeout: float = 10, since: int = 0, count: int = 1) -> str:
        """The ``count``-th line from index ``since`` containing ``text`` (or
        for which ``text(line)`` is true); fails at the deadline or when attled exits."""
        test = text if callable(text) else (lambda line: text in line)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = [line for line in self.lines[since:] if test(line)]
                if len(found) >= count:
                    return found[count - 1]
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    raise AssertionError(f"no{' ' + str(count) if count > 1 else ''} line containing {text!r} "
                                         f"(exit {self.p.poll()}):\n" + "\n".join(self.lines[-60:]))
                self.cond.wait(min(left, 0.2))

    def line_time(self, text: str, after: float, timeout: float) -> float | None:
        """When the first line containing ``text`` that arrived at or after
        ``after`` (time.monotonic()) arrived; None at the deadline or exit."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for t, line in zip(self.times, self.lines):
                    if t >= after and text in line:
                        return t
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    return None
                self.cond.wait(min(left, 0.2))

    def rss_kb(self) -> int | None:
        """Resident memory (VmRSS), or None once it is gone."""
        try:
            for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def fds(self) -> int | None:
        """Open file descriptors, or None once it is gone."""
        try:
            return len(os.listdir(f"/proc/{self.p.pid}/fd"))
        except OSError:
            return None

    def _exit_code(self, timeout: float, after: str) -> int:
        """Waits for the exit (SIGKILL and a failure ``timeout`` s ``after`` ...); stderr read to its end."""
        try:
            code = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
            raise AssertionError(f"attled still running {timeout} s after {after}:\n{self.stderr}") from None
        self.reader.join(5)
        return code

    def finish(self, timeout: float = 10) -> int:
        """Waits for attled to exit by itself; its exit code."""
        code = self._exit_code(timeout, "the fault")
        shutil.rmtree(self.home, ignore_errors=True)
        return code

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10) -> int:
        """Sends ``sig`` and waits for the exit; its exit code."""
        if self.p.poll() is None:
            self.p.send_signal(sig)
        return self._exit_code(timeout, f"signal {sig}")

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(5)
        self.reader.join(5)
        shutil.rmtree(self.home, ignore_errors=True)
