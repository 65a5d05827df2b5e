"""Started through sudo, attled drops to the invoking user once the adapter
socket is open, and the socket keeps working (issue: hostile air)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from conftest import ATTLED, run_attled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges (CI and make test run as root)")


def test_sudo_run_drops_to_the_invoking_user_and_still_works(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "4,5,6", "--trace"],
                   env={"SUDO_UID": "65534", "SUDO_GID": "65534"})
    assert r.returncode == 0, r.stderr
    assert "dropped root privileges: now uid 65534 gid 65534" in r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [4, 5, 6]})


def test_process_really_runs_as_the_user_while_connected(world):
    w = world(devices=["Harness:harness:notify_every=40"])
    p = subprocess.Popen([str(ATTLED), "-i", w.transport(), "--name", "Harness", "listen"],
                         env={**os.environ, "SUDO_UID": "65534", "SUDO_GID": "65534", "XDG_CACHE_HOME": "/tmp/attled-nobody"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The first notification proves the socket works after the drop.
        line = p.stdout.readline()
        assert line.startswith("notification"), line
        status = open(f"/proc/{p.pid}/status").read()
        uid = [l for l in status.splitlines() if l.startswith("Uid:")][0].split()[1:]
        gid = [l for l in status.splitlines() if l.startswith("Gid:")][0].split()[1:]
        assert uid == ["65534"] * 4 and gid == ["65534"] * 4, (uid, gid)
        p.send_signal(signal.SIGINT)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
    w.wait_event({"event": "disconnected", "device": "Harness", "reason": 0x13})


def test_without_sudo_nothing_is_dropped(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,1,1", "--trace"])
    assert r.returncode == 0 and "dropped root privileges" not in r.stderr
