"""Android's Root Canal as the controller of a virtual world (vworld --controller rootcanal).

Named rcworld, not rootcanal: the name of the package it drives.

Root Canal (PyPI ``rootcanal``, pinned in requirements.txt) is a virtual
controller written in C++, independent of Bumble's. One process serves an HCI
port; every TCP client of that port (H4 framing) gets a controller of its own,
with a public address, on one shared LE air. So attled (``tcp:127.0.0.1:P``)
and each Bumble LED peripheral (``tcp-client:127.0.0.1:P``) are all clients of
the same port. It answers each HCI command after about 45 ms (see
../shared/notes/root-canal.md for what was measured).

``RootCanal`` starts the binary on free loopback ports, waits (with a deadline)
until it says it listens on the HCI port, keeps its log in a file (read from
its output pipe, so the hooks ``on_controller`` / ``on_closed`` see each client
come and go) and stops it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import tempfile
from pathlib import Path

START_TIMEOUT = 10.0  # seconds for "Listening on: P" on the HCI port
# "test_model.cc:212   3  Initialized device with address da:4c:10:de:17:03"
_INITIALISED = re.compile(r"\s(\d+)\s+Initialized device with address ([0-9a-fA-F:]{17})")
# "hci_device.cc:99   3  HCI transport closed"
_CLOSED = re.compile(r"\s(\d+)\s+HCI transport closed")


def binary() -> Path:
    """The rootcanal executable shipped in the PyPI package (ValueError if missing)."""
    try:
        from rootcanal.binaries import get_package_binary_resource_path
    except ImportError as error:
        raise ValueError("Root Canal is not installed: pip install -r Tools/requirements.txt "
                         "(rootcanal==1.10.0)") from error
    path = Path(get_package_binary_resource_path("rootcanal"))
    if not path.exists():
        raise ValueError(f"Root Canal's binary is missing at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def _free_ports(count: int) -> list[int]:
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


class RootCanal:
    """One Root Canal process. ``hci_port`` is set by ``start()``."""

    def __init__(self, sniffer: bool = False, keep: bool = False):
        self.sniffer = sniffer  # -enable_hci_sniffer: a pcap per controller in workdir
        self.keep = keep  # leave workdir (log, pcaps) in place at stop
        self.workdir = Path(tempfile.mkdtemp(prefix="rootcanal-", dir="/tmp"))
        self.log_path = self.workdir / "rootcanal.log"
        self.hci_port = 0
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None

    async def start(self) -> int:
        exe = binary()
        last_error = ""
        for _attempt in range(3):  # a free port may be taken between probe and bind
            hci_port, test_port, link_port, ble_port = _free_ports(4)
            self._listening = asyncio.Event()
            self._want = f"Listening on: {hci_port} "
            self.proc = await asyncio.create_subprocess_exec(
                str(exe), "-hci_port", str(hci_port), "-test_port", str(test_port),
                "-link_port", str(link_port), "-link_ble_port", str(ble_port),
                *(["-enable_hci_sniffer"] if self.sniffer else []),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, cwd=str(self.workdir), start_new_session=True)
            self._reader = asyncio.create_task(self._read_log(self.proc.stdout))
            try:
                await asyncio.wait_for(self._listening.wait(), START_TIMEOUT)
                self.hci_port = hci_port
                return hci_port
            except asyncio.TimeoutError:
                last_error = self.log_tail(10)
                await self.stop(remove=False)
        raise ValueError(f"Root Canal did not start listening within {START_TIMEOUT:.0f} s:\n{last_error}")

    async def _read_log(self, stream: asyncio.StreamReader) -> None:
        """Root Canal's log: kept in rootcanal.log, each line parsed for the
        moments vworld reports (a controller made for a client, its client gone)."""
        with open(self.log_path, "ab") as log:
            while True:
                try:
                    raw = await stream.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    continue  # an over-long line: skip it
                if not raw:
                    return
                log.write(raw)
                log.flush()
                line = raw.decode(errors="replace")
                if not self._listening.is_set() and self._want in line:
                    self._listening.set()
                m = _INITIALISED.search(line)
                if m:
                    self.on_controller(int(m.group(1)), m.group(2).upper())
                    continue
                m = _CLOSED.search(line)
                if m:
                    self.on_closed(int(m.group(1)))

    def on_controller(self, index: int, address: str) -> None:
        """Hook: Root Canal made controller ``index`` (public ``address``) for a new client."""

    def on_closed(self, index: int) -> None:
        """Hook: the client of controller ``index`` closed its HCI connection."""

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def stop(self, remove: bool = True) -> int | None:
        code = None
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                code = await asyncio.wait_for(self.proc.wait(), 3.0)
            except asyncio.TimeoutError:
                os.killpg(self.proc.pid, signal.SIGKILL)
                code = await self.proc.wait()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 1.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        if remove and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return code
