"""Helpers several integration test files share (the fixtures are in conftest.py).

attled's output:
    att_count(stderr)            the ATT transactions of a run's summary line

tshark, the outside judge of captures (installed by `make test`):
    TSHARK, MALFORMED            the binary; the display filter of a malformed packet
    tshark_malformed(cap)        the lines tshark prints for malformed packets
    tshark_malformed_rows(cap)   those packets' ATT and L2CAP fields

The test tools as processes:
    run_tool(module, *args)      run an attledtools module; (exit code, last JSON line)
    gatt_central(w, *args)       attledtools.drivers.bumble_gatt_central against world w

A world's vworld and its peers:
    inject(w, line)              one --stdin-commands line (hw_error, close, fault ...)
    GATTDB_NAME, start_peer(world, seed, mtu)   a world with the random GATT database peer
    chars_of(db)                 (service, characteristic) of a gatt_database event
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from attledtools import module_command
from conftest import REPO_ROOT, World

CENTRAL = "attledtools.drivers.bumble_gatt_central"
DBHASH = "attledtools.maint.dbhash"


# -----------------------------------------------------------------------------
# attled's output
# -----------------------------------------------------------------------------
# The summary attled prints on stderr at the end of a run with one link
# (Sources/AttledCLI/Session.swift printTiming), a line of its own:
#   "ATT transactions: 7 (+ 0 without response), MTU 517"
_ATT_SUMMARY = re.compile(r"^ATT transactions: (\d+) ", re.MULTILINE)


def att_count(stderr: str) -> int:
    """The ATT transactions (requests answered; commands not counted) on
    attled's summary line; fails the test if there is none."""
    m = _ATT_SUMMARY.search(stderr)
    if m is None:
        raise AssertionError("no ATT summary in:\n" + stderr)
    return int(m.group(1))


# -----------------------------------------------------------------------------
# tshark
# -----------------------------------------------------------------------------
TSHARK = shutil.which("tshark") or "tshark"  # installed by `make test`; missing means failing, not skipping

# tshark's verdict of a malformed or erroneous packet, except a controller's
# Command Complete with status 0x01 Unknown HCI Command: it rightly carries the
# status alone (Vol 4 Part E 7.7.14), which tshark's dissector calls malformed
# (Bumble's controller answers LE Set Data Length so, having listed it).
MALFORMED = "(_ws.malformed || _ws.expert.severity == error) && !(bthci_evt.code == 0x0e && bthci_evt.status == 0x01)"


def tshark_malformed(cap) -> list[str]:
    """tshark's summary line of every malformed packet in ``cap`` ([] when none)."""
    r = subprocess.run([TSHARK, "-r", str(cap), "-Y", MALFORMED],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if line.strip()]


def tshark_malformed_rows(cap) -> list[list[str]]:
    """Of every malformed packet: frame number, ATT opcode, ATT entry length,
    L2CAP length, ATT handles."""
    r = subprocess.run([TSHARK, "-r", str(cap), "-Y", MALFORMED,
                        "-T", "fields", "-e", "frame.number", "-e", "btatt.opcode", "-e", "btatt.length",
                        "-e", "btl2cap.length", "-e", "btatt.handle"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines() if line.strip()]


# -----------------------------------------------------------------------------
# The test tools as processes
# -----------------------------------------------------------------------------
def run_tool(module: str, *args: str, stdin: str | None = None, timeout: float = 40) -> tuple[int, dict]:
    """Run a tool module (this Python, the repository as working directory);
    return (exit code, its last JSON line). Fails the test on a timeout or no JSON."""
    try:
        r = subprocess.run(module_command(module, *args), input=stdin, capture_output=True, text=True,
                           timeout=timeout, cwd=str(REPO_ROOT))
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{module} timed out after {timeout} s: {error.stdout!r} {error.stderr!r}")
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from {module} (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.returncode, json.loads(lines[-1])


def gatt_central(w: World, *args: str, host: int = 0) -> tuple[int, dict]:
    """bumble_gatt_central on host controller ``host`` of ``w`` (15 s deadline)."""
    return run_tool(CENTRAL, "--transport", w.bumble_transport(host), "--timeout", "15", *args)


# -----------------------------------------------------------------------------
# A world's vworld and its peers
# -----------------------------------------------------------------------------
def inject(w: World, line: str) -> None:
    """One vworld --stdin-commands line (hw_error, close, fault ...)."""
    assert w.proc.stdin is not None
    w.proc.stdin.write(line + "\n")
    w.proc.stdin.flush()


GATTDB_NAME = "Gdb"  # the name the random GATT database peer advertises in these tests


def start_peer(world, seed: int, mtu: int = 517, extra: str = ""):
    """A world with the gattdb peer; returns (world, database event without ``t``)."""
    opts = f"seed={seed},interval=20" + (f",mtu={mtu}" if mtu != 517 else "") + extra
    w = world(devices=[f"{GATTDB_NAME}:gattdb:{opts}"], hosts=["tcp"])
    db = w.wait_event({"event": "gatt_database", "device": GATTDB_NAME}, timeout=5)
    return w, {k: v for k, v in db.items() if k != "t"}


def chars_of(db: dict):
    """(service, characteristic) of every characteristic of a gatt_database event."""
    for s in db["services"]:
        for c in s["characteristics"]:
            yield s, c
