"""A private mosquitto for the gateway's tests, benchmark and soak.

``Broker(workdir)`` writes a configuration for a free loopback port (no
persistence, so a killed broker forgets retained messages), ``start()`` runs
Debian's ``mosquitto`` and waits until it listens, ``kill()`` is SIGKILL (no
goodbye), ``stop()`` SIGTERM then SIGKILL. ``extra`` adds configuration lines
(TLS, a password file); ``nodelay`` sets ``set_tcp_nodelay``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from worldproc import free_port

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


class Broker:
    """mosquitto on 127.0.0.1:port, its log in ``workdir/mosquitto.log``."""

    def __init__(self, workdir: Path, *, port: int | None = None, anonymous: bool = True,
                 extra: str = "", nodelay: bool | None = None, log: bool = True):
        self.port = port or free_port()
        self.conf = workdir / "mosquitto.conf"
        lines = [f"listener {self.port} 127.0.0.1", f"allow_anonymous {'true' if anonymous else 'false'}",
                 "persistence false"]
        if nodelay is not None:
            lines.append(f"set_tcp_nodelay {'true' if nodelay else 'false'}")
        lines += ["log_dest stderr", "log_type error", "log_type warning", "log_type notice", "log_type information"] \
            if log else ["log_dest none"]
        self.conf.write_text("\n".join(lines) + "\n" + extra)
        self.log = workdir / "mosquitto.log"
        self.p: subprocess.Popen | None = None

    def start(self, timeout: float = 10) -> None:
        """Starts mosquitto; returns once it accepts TCP connections.
        Raises RuntimeError (with its log) when it exits or never listens."""
        with open(self.log, "ab") as log:
            self.p = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"mosquitto exited ({self.p.returncode}):\n{self.log.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mosquitto not listening on {self.port}:\n{self.log.read_text()[-4000:]}") from None
                time.sleep(0.02)  # polling for the listener

    def kill(self) -> None:
        """SIGKILL: no clean goodbye, retained messages lost (no persistence)."""
        if self.p is not None and self.p.poll() is None:
            self.p.kill()
            self.p.wait(5)

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


@dataclass
class Msg:
    """One MQTT message as a watching client received it."""

    at: float  # time.monotonic() on arrival
    topic: str
    payload: bytes
    retain: bool = False

    @property
    def text(self) -> str:
        return self.payload.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.payload)
