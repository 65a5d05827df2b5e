"""attled ui driven inside tmux against the virtual devices (issue: interactive mode)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import ATTLED

TMUX = shutil.which("tmux") or "tmux"  # installed by `make test`


class Pane:
    """attled ui in a detached tmux session of a fixed size."""

    def __init__(self, args: list[str], cols: int = 80, rows: int = 24, env: str = ""):
        self.name = "attled-" + uuid.uuid4().hex[:8]
        cache = f"/tmp/{self.name}-cache"
        cmd = f"XDG_CACHE_HOME={cache} {env} {ATTLED} ui {' '.join(args)}; echo EXITED $?; sleep 60"
        subprocess.run([TMUX, "new-session", "-d", "-s", self.name, "-x", str(cols), "-y", str(rows), cmd], check=True)

    def text(self) -> str:
        return subprocess.run([TMUX, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([TMUX, "send-keys", "-t", self.name, *keys], check=True)

    def wait(self, pred, timeout: float = 10.0) -> str:
        """Polls the screen until pred(text) holds; fails with the screen on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            t = self.text()
            if pred(t):
                return t
            if time.monotonic() > deadline:
                raise AssertionError("screen never matched:\n" + t)
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([TMUX, "kill-session", "-t", self.name], capture_output=True)


def slider(text: str, name: str) -> str | None:
    m = re.search(rf"{name}\s+\[[^\]]*\]\s+(\S+)", text)
    return m.group(1) if m else None


@pytest.fixture
def pane():
    panes: list[Pane] = []
    def start(*a, **k):
        p = Pane(*a, **k)
        panes.append(p)
        return p
    yield start
    for p in panes:
        p.close()


@pytest.mark.controllers
def test_sliders_show_values_and_move_the_led(world, pane):
    w = world(devices=["CassarTech:pycom:init=10,20,30"])
    p = pane(["-i", w.transport(), "--name", "CassarTech"])
    t = p.wait(lambda t: "connected" in t and slider(t, "Red") == "10")
    assert slider(t, "Green") == "20" and slider(t, "Blue") == "30"
    assert "#0a141e" in t
    p.keys("Right")
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [11, 20, 30]})
    p.keys("b", "End")
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [11, 20, 255]})
    p.keys("g", "1", "2", "3")  # three digits commit at once
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [11, 123, 255]})
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)
    w.wait_event({"event": "disconnected", "device": "CassarTech", "reason": 0x13})


def test_burst_of_50_presses_coalesces_writes(world, pane):
    w = world(devices=["CassarTech:particle:init=0,0,0"])
    p = pane(["-i", w.transport(), "--name", "CassarTech"])
    p.wait(lambda t: "connected" in t and slider(t, "Red") == "0")
    mark = w.mark()
    p.keys(*(["Right"] * 50))
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [50, 0, 0]}, since=mark)
    p.wait(lambda t: slider(t, "Red") == "50")
    writes = w.find({"event": "write", "device": "CassarTech", "char": "red"}, since=mark)
    assert 1 <= len(writes) < 25, len(writes)
    assert writes[-1]["value"] == "32"
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)


@pytest.mark.controllers
def test_device_stopped_and_restarted_reconnects_and_reads_back(world, pane, controller):
    # attled's controller and the peripheral's controller on one air; the
    # peripheral runs in its own process, so stopping it takes the device away.
    # (On Root Canal a controller goes with its client; Bumble's needs telling.)
    air = world(hosts=["tcp", "tcp"], extra_args=["--reset-on-host-close"] if controller == "bumble" else [])
    dev = world(devices=["CassarTech:pycom:init=1,2,3"], hosts=[], controller="bumble",
                extra_args=["--peripheral-transport", air.bumble_transport(1)])
    p = pane(["-i", air.transport(0), "--name", "CassarTech"])
    p.wait(lambda t: "connected" in t and slider(t, "Blue") == "3")
    dev.stop()
    # The device it had is waited for with a connect from the Filter Accept List.
    t = p.wait(lambda t: "disabled" in t and "waiting for CassarTech to advertise (Filter Accept List)" in t, timeout=15)
    assert slider(t, "Red") == "--"
    dev2 = world(devices=["CassarTech:pycom:init=7,8,9"], hosts=[], controller="bumble",
                 extra_args=["--peripheral-transport", air.bumble_transport(1)])
    t = p.wait(lambda t: "connected" in t and slider(t, "Red") == "7", timeout=20)
    assert slider(t, "Green") == "8" and slider(t, "Blue") == "9"
    p.keys("Right")
    dev2.wait_event({"event": "state", "device": "CassarTech", "rgb": [8, 8, 9]})
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)


def test_controller_refusing_a_connect_is_not_fatal(world, pane):
    # The device drops the link after the first write; the controller then
    # refuses the next LE Create Connection with Command Disallowed (as stock
    # Bumble controllers do after a cancelled attempt). The UI scans again and
    # reconnects instead of exiting.
    w = world(devices=["CassarTech:pycom:init=1,2,3,fault_disconnect_after=write#1"],
              extra_args=["--host-fault", "reject=0x200d#2"])
    p = pane(["-i", w.transport(), "--name", "CassarTech"])
    p.wait(lambda t: "connected" in t and slider(t, "Blue") == "3")
    p.keys("Right")
    w.wait_event({"event": "disconnected", "device": "CassarTech"})
    w.wait_event({"event": "host_fault"}, timeout=15)
    t = p.wait(lambda t: "connected" in t and slider(t, "Red") == "2", timeout=20)
    assert "EXITED" not in t
    p.keys("Right")
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [3, 2, 3]})
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)


def test_stock_controller_completing_a_cancelled_connect_later(world, pane):
    # The stock Bumble quirk itself, nothing injected: the device is heard
    # once and falls silent, so LE Create Connection stays pending; the UI
    # gives up after --connect-timeout and cancels, which this controller
    # acknowledges but does not do. When the device advertises again the old
    # attempt completes unasked: the UI takes that link (one connection, not
    # dropped and made again), and the sliders work.
    w = world(devices=["CassarTech:pycom:init=1,2,3,adv_delay=300,adv_cycle=20/6000"])
    assert not w.ready["spec_controller"]
    p = pane(["-i", w.transport(), "--name", "CassarTech", "--connect-timeout", "1500"])
    w.wait_event({"event": "advertising_paused"}, timeout=10)
    t = p.wait(lambda t: "connected" in t and slider(t, "Blue") == "3", timeout=25)
    assert "EXITED" not in t
    # It was heard while silent for 6 s: the first attempt was cancelled and completed later.
    first = w.find({"event": "advertising"})[0]["t"]
    connects = w.find({"event": "connected"})
    assert connects[0]["t"] > first + 5
    # That late completion is the link in use: taken, not dropped and made again.
    assert len(connects) == 1 and not w.find({"event": "disconnected"}), w.format_events()
    mark = w.mark()
    p.keys("Right")
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [2, 2, 3]}, since=mark)
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)


def test_lost_controller_is_reopened_and_the_device_found_again(world, pane):
    # The controller's transport closes under the UI (a dongle unplugged, the
    # TCP peer gone); this controller drops its links when that happens. The
    # UI reopens the transport, initialises the controller and finds the
    # device again instead of exiting.
    w = world(devices=["CassarTech:pycom:init=4,5,6"], extra_args=["--stdin-commands", "--reset-on-host-close"])
    p = pane(["-i", w.transport(), "--name", "CassarTech"])
    p.wait(lambda t: "connected" in t and slider(t, "Red") == "4")
    mark = w.mark()
    assert w.proc.stdin is not None
    w.proc.stdin.write("close\n")
    w.proc.stdin.flush()
    w.wait_event({"event": "host_disconnected"}, since=mark)
    w.wait_event({"event": "host_connected"}, since=mark, timeout=15)
    t = p.wait(lambda t: "connected" in t and slider(t, "Red") == "4" and "EXITED" not in t, timeout=20)
    p.keys("Right")
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [5, 5, 6]}, since=mark)
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)


def test_harness_buttons_send_press_and_release_in_order(world, pane):
    w = world(devices=["Harness:harness"])
    p = pane(["-i", w.transport(), "--name", "Harness"])
    p.wait(lambda t: "connected" in t and "Button 1" in t)
    p.keys("1")
    w.wait_event({"event": "state", "device": "Harness", "commands": [1]})
    w.wait_event({"event": "state", "device": "Harness", "commands": [1, 0]})
    p.keys("2")
    w.wait_event({"event": "state", "device": "Harness", "commands": [1, 0, 3, 4]})
    # The device notifies each command; the UI shows them.
    p.wait(lambda t: "Notifications: 01 00 03 04" in t)
    p.keys("q")
    p.wait(lambda t: "EXITED 0" in t)


def test_small_terminal_and_resize(world, pane):
    w = world(devices=["CassarTech:pycom:init=255,0,0"])
    p = pane(["-i", w.transport(), "--name", "CassarTech"], cols=80, rows=24)
    t = p.wait(lambda t: "connected" in t and slider(t, "Red") == "255")
    assert "disabled" not in t
    subprocess.run([TMUX, "resize-window", "-t", p.name, "-x", "50", "-y", "20"], check=True)
    # Redrawn for the new width: the slider line still holds its value (no wrap).
    t = p.wait(lambda t: slider(t, "Red") == "255" and re.search(r"Red\s+\[\S{8,22}\]", t) is not None)
    assert "Status:" in t
    p.keys("C-c")  # Ctrl-C quits too, restoring the terminal
    p.wait(lambda t: "EXITED 0" in t)


def test_ui_without_a_terminal_is_a_usage_error():
    from conftest import run_attled
    # Checked before the transport is opened (this port is closed).
    r = run_attled(["ui", "-i", "tcp:127.0.0.1:1"])
    assert r.returncode == 64 and "needs a terminal" in r.stderr
