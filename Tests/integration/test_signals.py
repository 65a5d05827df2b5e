"""Ctrl-C and SIGTERM: the link is always torn down (reason 0x13), exit codes 130/143."""

from __future__ import annotations

import signal

from conftest import Running


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
