"""`attled serve` on the host, for the kernel-as-central test (harness.py).

The virtual air has two more host controllers (tcp-server:127.0.0.1:0): one
with a public address (F0:..:03), one without (00:00:00:00:00:00: serve's own
address is then a static random one it makes). When the guest asks ("serve
public|random ARGS"), the host's attled runs `attled serve -i
tcp:127.0.0.1:PORT ARGS` on that one: the LED board the guest's kernel
connects to. With --json its JSON events go into the run's Events (source
"serve"), so the guest's "expect" judges them like the peripheral's; its
stderr is kept (serve.stderr in the work directory) and can be waited on line
by line (without --json the colour changes are lines there).
"serve_stop SECS" ends it with SIGINT and wants exit 0.

Requests (one line each, answered with one line):
  serve public|random ARGS...
                         start it; "ok ADDRESS ADDRESS_TYPE" once it advertises
  serve_line SECS TEXT   "pass LINE" when a stderr line holds TEXT within SECS
  serve_stop SECS        SIGINT; "pass exit 0" if it exits 0 within SECS
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable


class Served:
    """One `attled serve` process: stdout's JSON events to add(), stderr kept."""

    def __init__(self, cmd: list[str], workdir: Path, add: Callable[[str, dict[str, Any]], None], env: dict[str, str]):
        self.cmd = cmd
        self.add = add
        self.err_lines: list[str] = []
        self.cond = threading.Condition()
        self.out_path = workdir / "serve.stdout"
        self.err_path = workdir / "serve.stderr"
        # Every run's, one after the other: the files are appended to.
        with open(workdir / "serve.cmd", "a") as f:
            f.write(" ".join(cmd) + "\n")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.readers = [threading.Thread(target=self._out, daemon=True), threading.Thread(target=self._err, daemon=True)]
        for r in self.readers:
            r.start()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        with open(self.out_path, "a") as f:
            for line in self.proc.stdout:
                f.write(line)
                f.flush()
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    self.add("serve", {**ev, "source": "serve"})

    def _err(self) -> None:
        assert self.proc.stderr is not None
        with open(self.err_path, "a") as f:
            for line in self.proc.stderr:
                f.write(line)
                f.flush()
                with self.cond:
                    self.err_lines.append(line.rstrip("\n"))
                    self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, text: str, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.err_lines:
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.readers[1].is_alive()):
                    return None
                self.cond.wait(min(left, 0.2))

    def stderr_tail(self, n: int = 6) -> str:
        with self.cond:
            return " | ".join(self.err_lines[-n:])

    def stop(self, timeout: float) -> int | None:
        """SIGINT (Ctrl-C, what ends serve normally); SIGKILL if it has not exited within timeout."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                for r in self.readers:
                    r.join(2)
                return None
        for r in self.readers:
            r.join(2)
        return self.proc.returncode


class ServeHost:
    """The ctl requests serve, serve_line and serve_stop (harness.Run.handle)."""

    def __init__(self, attled: str, workdir: Path, events, env: dict[str, str]):
        self.attled = attled
        self.workdir = workdir
        self.events = events
        self.env = env
        # public|random -> tcp:127.0.0.1:PORT of the air's serve controllers, from its ready line
        self.transports: dict[str, str] = {}
        self.served: Served | None = None

    def handle(self, cmd: str, rest: str) -> str:
        if cmd == "serve":
            kind, _, args = rest.partition(" ")
            if kind not in self.transports:
                return f"fail no host controller '{kind}' for attled serve (have: {' '.join(self.transports) or 'none'})"
            if self.served is not None:
                self.stop(5)
            mark = self.events.mark()
            words = args.split()
            self.served = Served([self.attled, "serve", "-i", self.transports[kind], *words],
                                 self.workdir, self.events.add, self.env)
            # Where it advertises: the "advertising" event with --json, else the line
            # "attled: advertise ... NAME at ADDRESS (TYPE) ...".
            address = None
            if "--json" in words:
                ev = self.events.wait({"source": "serve", "event": "advertising"}, mark, 20)
                if ev is not None:
                    address = f"{ev.get('address')} {ev.get('address_type')}"
            else:
                line = self.served.wait_line("attled: advertise", 20)
                m = re.search(r" at ([0-9A-F:]{17}) \((public|random)\)", line or "")
                if m:
                    address = f"{m.group(1)} {m.group(2)}"
            if address is None:
                code = self.served.stop(5)
                return f"fail attled serve did not advertise within 20 s (exit {code}): {self.served.stderr_tail()}"
            return f"ok {address}"
        if self.served is None:
            return "fail attled serve is not running: the guest must ask for it with 'serve' first"
        secs_s, _, text = rest.partition(" ")
        try:
            secs = float(secs_s)
        except ValueError:
            return f"fail {cmd} needs SECS first"
        if cmd == "serve_line":
            line = self.served.wait_line(text, secs)
            if line is None:
                return f"fail no stderr line '{text}' from attled serve within {secs_s} s: {self.served.stderr_tail()}"
            return f"pass {line}"
        if cmd == "serve_stop":
            code = self.stop(secs)
            if code is None:
                return f"fail attled serve did not exit within {secs_s} s of SIGINT: killed"
            if code != 0:
                return f"fail attled serve exited {code} after SIGINT: {self.served.stderr_tail()}"
            return "pass exit 0 after SIGINT"
        return f"fail unknown request {cmd}"

    def stop(self, timeout: float) -> int | None:
        if self.served is None:
            return 0
        return self.served.stop(timeout)
