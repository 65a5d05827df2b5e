"""The library's example packages: Examples/SetColour (issue 11) and
Examples/Gateway (issue 20) are packages of their own that depend on the root
package by relative path and use only the public API (`import Attled`,
`import AttledGateway`, no @testable).  Each is built here from the checkout
and run against a virtual device, judged by the device's own events (and, for
the gateway, by a real mosquitto and an MQTT client watching it)."""

from __future__ import annotations

import json
import pathlib
import shutil
import signal
import subprocess
import tempfile

import pytest

from attledtools.drivers.mqttbroker import Broker, Watcher

ROOT = pathlib.Path(__file__).resolve().parents[2]


def build_example(folder: str, product: str, imports: str) -> pathlib.Path:
    """Builds Examples/<folder> from the checkout; returns its executable."""
    example = ROOT / "Examples" / folder
    scratch = ROOT / ".build" / f"example-{folder.lower()}"
    src = (example / "Sources" / product / "main.swift").read_text()
    assert "@testable" not in src and f"import {imports}" in src
    assert '.package(name: "attled", path: "../..")' in (example / "Package.swift").read_text()
    # SwiftPM does not plan a path dependency's build again when a source file
    # is added to or removed from one of its targets: a cached scratch would
    # then compile a stale file list. Start it afresh when the list changed.
    files = "\n".join(sorted(str(f.relative_to(ROOT)) for f in (ROOT / "Sources").rglob("*") if f.is_file()))
    stamp = scratch / "attled-sources.list"
    if scratch.exists() and (not stamp.exists() or stamp.read_text() != files):
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    stamp.write_text(files)
    r = subprocess.run(["swift", "build", "--package-path", str(example), "--scratch-path", str(scratch)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    exe = scratch / "debug" / product
    assert exe.exists()
    return exe


@pytest.fixture(scope="module")
def setcolour() -> pathlib.Path:
    return build_example("SetColour", "SetColour", "Attled")


@pytest.fixture(scope="module")
def lampgateway() -> pathlib.Path:
    return build_example("Gateway", "LampGateway", "AttledGateway")


def test_example_sets_the_colour(world, setcolour):
    w = world(devices=["CassarTech:particle"])
    r = subprocess.run([str(setcolour), w.transport(), "CassarTech", "12,34,56"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "set CassarTech" in r.stdout and "particle" in r.stdout
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [12, 34, 56]})
    # The example closes the stack: the link is dropped with reason 0x13.
    w.wait_event({"event": "disconnected", "device": "CassarTech", "reason": 0x13})
    assert {e["op"] for e in w.find({"event": "write", "device": "CassarTech"})} == {"command"}


def test_example_names_a_missing_device(world, setcolour):
    w = world(devices=["CassarTech:pycom"])
    r = subprocess.run([str(setcolour), w.transport(), "NoSuchLamp", "1,2,3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "no device named 'NoSuchLamp'" in r.stdout
    assert not w.find({"event": "connected"})


def test_example_gateway_sets_a_lamp_through_mosquitto(world, lampgateway):
    """Examples/Gateway: the gateway as a library, for its hard-coded lamp
    (CassarTech), driven through a real mosquitto by a watching client."""
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="exgw-", dir="/tmp"))
    broker = Broker(workdir)
    broker.start()
    mq = Watcher(broker.port)
    w = world(devices=["CassarTech:pycom:init=1,2,3", "Other:particle"])
    node = w.device("CassarTech")["address"].replace(":", "").lower()
    p = subprocess.Popen([str(lampgateway), w.transport(), f"127.0.0.1:{broker.port}"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = ""
    try:
        mq.wait_text("attled/example/availability", "online", timeout=15)
        mq.wait_text(f"attled/{node}/availability", "online", timeout=15)
        # The state read back from the lamp on connect.
        first = mq.wait(f"attled/{node}/state", timeout=10)
        assert first.json()["color"] == {"r": 1, "g": 2, "b": 3}
        cfg = mq.wait(f"homeassistant/light/attled_{node}/light/config", timeout=10).json()
        assert cfg["device"]["identifiers"] == [f"attled_{node}"]
        assert mq.wait(f"attled/{node}/holder", timeout=10).json() == {"holder": "example"}
        since = mq.mark()
        mq.publish(f"attled/{node}/set", json.dumps({"state": "ON", "color": {"r": 200, "g": 100, "b": 50}, "brightness": 255}))
        w.wait_event({"event": "state", "device": "CassarTech", "rgb": [200, 100, 50]}, timeout=10)
        state = mq.wait(f"attled/{node}/state", since=since, timeout=10).json()
        assert state["state"] == "ON" and state["color"] == {"r": 200, "g": 100, "b": 50}
        # Only the hard-coded lamp is kept.
        assert not w.find({"event": "connected", "device": "Other"})
        since = mq.mark()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=15)
        assert p.returncode == 0, out
        mq.wait_text(f"attled/{node}/availability", "offline", since=since, timeout=5)
        mq.wait_text("attled/example/availability", "offline", since=since, timeout=5)
        assert "LampGateway: stopped" in out and "gateway: CassarTech" in out, out
        w.wait_event({"event": "disconnected", "device": "CassarTech", "reason": 0x13})
    finally:
        if p.poll() is None:
            p.kill()
            out, _ = p.communicate(timeout=5)
        mq.close()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        print("--- LampGateway:\n" + out)
