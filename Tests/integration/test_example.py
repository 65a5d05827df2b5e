"""The library's example package (issue 11): Examples/SetColour is a package of
its own that depends on the root package by relative path and uses only the
public API (`import Attled`, no @testable).  It is built here from the checkout
and run against a virtual device, judged by the device's own events."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "Examples" / "SetColour"
SCRATCH = ROOT / ".build" / "example-setcolour"


@pytest.fixture(scope="module")
def setcolour() -> pathlib.Path:
    src = (EXAMPLE / "Sources" / "SetColour" / "main.swift").read_text()
    assert "@testable" not in src and "import Attled" in src
    assert '.package(name: "attled", path: "../..")' in (EXAMPLE / "Package.swift").read_text()
    # SwiftPM does not plan a path dependency's build again when a source file
    # is added to or removed from one of its targets: a cached scratch would
    # then compile a stale file list. Start it afresh when the list changed.
    files = "\n".join(sorted(str(f.relative_to(ROOT)) for f in (ROOT / "Sources").rglob("*") if f.is_file()))
    stamp = SCRATCH / "attled-sources.list"
    if SCRATCH.exists() and (not stamp.exists() or stamp.read_text() != files):
        shutil.rmtree(SCRATCH)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    stamp.write_text(files)
    r = subprocess.run(["swift", "build", "--package-path", str(EXAMPLE), "--scratch-path", str(SCRATCH)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    exe = SCRATCH / "debug" / "SetColour"
    assert exe.exists()
    return exe


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
