"""The GATT and address cache (issue: speed): warm runs skip scanning and discovery,
stale caches fall back to discovery in the same connection, --no-cache bypasses it."""

from __future__ import annotations

import os
import re

from conftest import run_attled


def att_count(stderr: str) -> int:
    m = re.search(r"ATT transactions: (\d+)", stderr)
    assert m, stderr
    return int(m.group(1))


def test_warm_run_uses_cache_without_scan_or_discovery(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    cold = run_attled([*args, "--rgb", "1,0,0"], env=env)
    assert cold.returncode == 0, cold.stderr
    assert att_count(cold.stderr) == 6 and "LE Set Scan Enable" in cold.stderr
    assert os.path.exists(tmp_path / "attled" / "names")

    for i, how in ((2, "Database Hash recorded"), (3, "Database Hash matches")):
        warm = run_attled([*args, "--rgb", f"{i},0,0"], env=env)
        assert warm.returncode == 0, warm.stderr
        assert "LE Set Scan Enable" not in warm.stderr, "warm run scanned"
        assert "at cached address" in warm.stderr
        assert how in warm.stderr
        assert "Find By Type Value" not in warm.stderr  # no discovery
        # The first warm run finds the Database Hash by type; later ones read its handle.
        assert ("Read By Type Request" in warm.stderr) == (i == 2)
        assert att_count(warm.stderr) == 4  # hash check + 3 writes
        w.wait_event({"event": "state", "device": "CassarTech", "rgb": [i, 0, 0]})


def test_stale_cache_after_firmware_change_falls_back_in_same_connection(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,1,1"], env=env)
    assert r.returncode == 0, r.stderr
    w.stop()
    # Same address, different GATT database (the particle firmware): the cached
    # pycom handles take Write Requests that the device refuses.
    w2 = world(devices=["CassarTech:particle"])
    r = run_attled(["-i", w2.transport(), "--name", "CassarTech", "--rgb", "7,7,7"], env=env)
    assert r.returncode == 0, r.stderr
    assert "discovering again" in r.stderr
    w2.wait_event({"event": "state", "device": "CassarTech", "rgb": [7, 7, 7]})
    assert len(w2.find({"event": "connected"})) == 1  # one connection did it all


def test_database_hash_mismatch_triggers_discovery(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    for rgb in ("1,1,1", "2,2,2"):  # cold, then warm (records the hash)
        r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", rgb], env=env)
        assert r.returncode == 0, r.stderr
    w.stop()
    w2 = world(devices=["CassarTech:particle"])
    r = run_attled(["-i", w2.transport(), "--name", "CassarTech", "--rgb", "3,4,5"], env=env)
    assert r.returncode == 0, r.stderr
    assert "Database Hash changed" in r.stderr
    w2.wait_event({"event": "state", "device": "CassarTech", "rgb": [3, 4, 5]})
    assert not w2.find({"event": "rejected"})  # nothing was written to a stale handle


def test_cached_address_gone_falls_back_to_scan(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,1,1"], env=env)
    assert r.returncode == 0, r.stderr
    w.stop()
    # The device comes back with a new address (e.g. a new static random address).
    w2 = world(devices=["CassarTech:pycom:addr=C0:99:88:77:66:55"], extra_args=["--spec-controller"])
    r = run_attled(["-i", w2.transport(), "--name", "CassarTech", "--rgb", "9,9,9"], env=env)
    assert r.returncode == 0, r.stderr
    assert "did not answer" in r.stderr and "scan" in r.stderr
    w2.wait_event({"event": "state", "device": "CassarTech", "rgb": [9, 9, 9]})


def test_no_cache_bypasses(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:particle"])
    for _ in range(2):
        r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,2,3", "--no-cache", "--trace"], env=env)
        assert r.returncode == 0, r.stderr
        assert "LE Set Scan Enable" in r.stderr and "from the cache" not in r.stderr
    assert not (tmp_path / "attled").exists()


def test_particle_warm_run_has_no_requests_beyond_the_hash(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:particle"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    cold = run_attled([*args, "--rgb", "1,0,0"], env=env)
    assert cold.returncode == 0 and att_count(cold.stderr) <= 3
    run_attled([*args, "--rgb", "2,0,0"], env=env)
    warm = run_attled([*args, "--rgb", "3,0,0"], env=env)
    assert warm.returncode == 0, warm.stderr
    assert "ATT transactions: 1 (+ 3 without response)" in warm.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [3, 0, 0]})


def test_trust_cache_writes_without_any_other_request(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    assert run_attled([*args, "--rgb", "1,0,0"], env=env).returncode == 0
    warm = run_attled([*args, "--rgb", "2,0,0", "--trust-cache"], env=env)
    assert warm.returncode == 0, warm.stderr
    assert att_count(warm.stderr) == 3  # the three Write Requests, nothing else
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [2, 0, 0]})
