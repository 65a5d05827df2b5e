"""Ctrl-C and SIGTERM: the link is always torn down (reason 0x13), exit codes 130/143."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

from conftest import ATTLED


class Running:
    """attled started in the background; stderr lines collected as they come."""

    def __init__(self, args: list[str]):
        self.p = subprocess.Popen([str(ATTLED), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_line(self, text: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not any(text in l for l in self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    raise AssertionError(f"no line containing {text!r}:\n" + "\n".join(self.lines))
                self.cond.wait(min(left, 0.2))

    def finish(self, timeout: float = 10) -> int:
        try:
            code = self.p.wait(timeout)
            self.reader.join(timeout)  # stderr read to its end
            return code
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError("attled did not exit after the signal:\n" + "\n".join(self.lines))


def test_sigint_ends_listen_cleanly(world):
    w = world(devices=["Harness:harness"])
    a = Running(["-i", w.transport(), "--name", "Harness", "listen"])
    w.wait_event({"event": "subscribed", "device": "Harness"})
    a.wait_line("Ctrl-C stops")  # attled has its Write Response: it is listening
    a.p.send_signal(signal.SIGINT)
    assert a.finish() == 0, "\n".join(a.lines)
    w.wait_event({"event": "disconnected", "device": "Harness", "reason": 0x13})


def test_sigterm_during_listen_exits_143_and_disconnects(world):
    w = world(devices=["Harness:harness"])
    a = Running(["-i", w.transport(), "--name", "Harness", "listen"])
    w.wait_event({"event": "subscribed", "device": "Harness"})
    a.wait_line("Ctrl-C stops")  # attled has its Write Response: it is listening
    a.p.send_signal(signal.SIGTERM)
    assert a.finish() == 143
    assert any("interrupted by SIGTERM during listen" in l for l in a.lines), a.lines
    w.wait_event({"event": "disconnected", "device": "Harness", "reason": 0x13})


def test_sigint_during_scan_disables_scanning_exit_130(world):
    w = world(devices=["CassarTech:pycom"])
    a = Running(["-i", w.transport(), "--name", "Absent", "--rgb", "red", "--timeout", "30", "--trace"])
    a.wait_line("Scanning: Enabled")
    a.p.send_signal(signal.SIGINT)
    assert a.finish() == 130
    text = "\n".join(a.lines)
    assert "interrupted by SIGINT during scan" in text
    # Scanning was disabled after the signal.
    assert text.rindex("Scanning: Disabled") > text.index("Scanning: Enabled")


def test_sigint_while_connecting_cancels(world):
    # A device that never answers: the connect is pending when the signal arrives.
    w = world(devices=["CassarTech:pycom"], extra_args=["--spec-controller"])
    a = Running(["-i", w.transport(), "--address", "C0:DE:AD:BE:EF:02", "--rgb", "red", "--connect-timeout", "20000", "--trace"])
    a.wait_line("Command Status")  # LE Create Connection accepted
    a.wait_line("LE Create Connection (0x200d)")
    a.p.send_signal(signal.SIGINT)
    assert a.finish() == 130
    assert any("LE Create Connection Cancel" in l for l in a.lines)
