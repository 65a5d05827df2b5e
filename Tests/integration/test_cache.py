"""The GATT and address cache (issue: speed): warm runs skip scanning and discovery,
stale caches fall back to discovery in the same connection, --no-cache bypasses it."""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_attled
from helpers import att_count


@pytest.mark.controllers
def test_warm_run_uses_cache_without_scan_or_discovery(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    cold = run_attled([*args, "--rgb", "1,0,0"], env=env)
    assert cold.returncode == 0, cold.stderr
    # Discovery, then the Database Hash by type in the same connection, so the
    # hash describes exactly the database the handles came from.
    assert "Database Hash recorded" in cold.stderr
    assert att_count(cold.stderr) == 7 and "LE Set Scan Enable" in cold.stderr
    assert os.path.exists(tmp_path / "attled" / "names")

    for i in (2, 3):  # every warm run, the first one too, checks the hash
        warm = run_attled([*args, "--rgb", f"{i},0,0"], env=env)
        assert warm.returncode == 0, warm.stderr
        assert "LE Set Scan Enable" not in warm.stderr, "warm run scanned"
        assert "at cached address" in warm.stderr
        assert "Database Hash matches" in warm.stderr
        assert "Find By Type Value" not in warm.stderr  # no discovery
        assert "Read By Type Request" not in warm.stderr  # the hash is read at its cached handle
        assert att_count(warm.stderr) == 4  # hash check + 3 writes
        w.wait_event({"event": "state", "device": "CassarTech", "rgb": [i, 0, 0]})


def test_device_without_database_hash_is_validated_by_its_declarations(world, tmp_path):
    """A device with no Generic Attribute service (no Database Hash, as many
    small devices): every warm run re-reads the characteristic declarations in
    the cached service range and compares them before writing."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom:hash=0"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    cold = run_attled([*args, "--rgb", "1,0,0"], env=env)
    assert cold.returncode == 0, cold.stderr
    assert "no Database Hash" in cold.stderr
    for i in (2, 3):
        warm = run_attled([*args, "--rgb", f"{i},0,0"], env=env)
        assert warm.returncode == 0, warm.stderr
        assert "declarations match (no Database Hash)" in warm.stderr
        assert "Find By Type Value" not in warm.stderr
        # Exchange MTU (three 128-bit declarations do not fit 23 bytes), one
        # Read By Type 0x2803 over the cached range, the three writes.
        assert att_count(warm.stderr) == 5
        w.wait_event({"event": "state", "device": "CassarTech", "rgb": [i, 0, 0]})


# (profile, command, what the device must see) for one reflash sequence.
REFLASH = [
    ("particle", ["--rgb", "10,20,30"], {"event": "state", "rgb": [10, 20, 30]}),
    ("harness", ["send", "--value", "01"], {"event": "write", "char": "command", "value": "01"}),
    ("pycom", ["--rgb", "40,50,60"], {"event": "state", "rgb": [40, 50, 60]}),
    ("particle", ["--rgb", "70,80,90"], {"event": "state", "rgb": [70, 80, 90]}),
]


@pytest.mark.controllers(rootcanal_cases=["rootcanal-database-hash"])
@pytest.mark.parametrize("hash_opt", ["", ":hash=0"], ids=["database-hash", "no-database-hash"])
def test_reflash_between_runs_is_always_noticed(world, tmp_path, hash_opt):
    """One address reflashed particle -> harness -> pycom -> particle between
    runs, with a warm cache each time: every run finds the new firmware's
    handles in the same connection and writes only to them."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    for i, (profile, command, seen) in enumerate(REFLASH):
        w = world(devices=[f"Lamp:{profile}{hash_opt}"])
        r = run_attled(["-i", w.transport(), "--name", "Lamp", *command, "--json"], env=env)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["profile"] == profile
        if i > 0:
            assert "at cached address" in r.stderr
            assert ("Database Hash changed" if not hash_opt else "declarations changed") in r.stderr
        w.wait_event({**seen, "device": "Lamp"})
        assert not w.find({"event": "rejected"}), w.format_events()
        assert len(w.find({"event": "connected"})) == 1  # one connection did it all
        w.stop()
    # The cache now holds the last firmware: a warm run trusts it after one check.
    w = world(devices=[f"Lamp:particle{hash_opt}"])
    r = run_attled(["-i", w.transport(), "--name", "Lamp", "--rgb", "1,1,1"], env=env)
    assert r.returncode == 0, r.stderr
    assert "particle handles from the cache" in r.stderr


@pytest.mark.parametrize("span,invalidates", [("0x00010005", False), ("0x0001ffff", True), ("0x00100010", True)],
                         ids=["outside-the-led-service", "everything", "inside-the-led-service"])
def test_service_changed_only_invalidates_an_overlapping_range(world, tmp_path, span, invalidates):
    """A Service Changed indication (sent before the answer to the warm run's
    hash read) is checked against the cached LED service's range: outside it,
    the cache stays and the job runs once; overlapping it, the job discovers
    again before acting. Either way the harness gets exactly one write."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=[f"H1:harness:fault_service_changed=read/{span}"])
    args = ["-i", w.transport(), "--name", "H1", "send", "--value", "01"]
    assert run_attled(args, env=env).returncode == 0  # cold: no Read Request, no fault
    m = w.mark()
    r = run_attled(args, env=env)
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "fault", "kind": "service_changed"}, since=m)
    w.wait_event({"event": "indication_confirmed"}, since=m)
    w.wait_event({"event": "disconnected"}, since=m)
    writes = w.find({"event": "write", "device": "H1"}, since=m)
    assert [x["value"] for x in writes] == ["01"], w.format_events(m)
    assert ("discovering again" in r.stderr) == invalidates, r.stderr
    assert ("cache kept" in r.stderr) == (not invalidates), r.stderr
    # The next run finds the cache valid (kept, or refreshed by the rediscovery).
    r = run_attled(args, env=env)
    assert r.returncode == 0 and "harness handles from the cache" in r.stderr, r.stderr


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


@pytest.mark.controllers
def test_particle_warm_run_has_no_requests_beyond_the_hash(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:particle"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    cold = run_attled([*args, "--rgb", "1,0,0"], env=env)
    assert cold.returncode == 0 and att_count(cold.stderr) <= 5  # discovery (3), the Database Hash, the protection probe
    run_attled([*args, "--rgb", "2,0,0"], env=env)
    warm = run_attled([*args, "--rgb", "3,0,0"], env=env)
    assert warm.returncode == 0, warm.stderr
    assert "ATT transactions: 1 (+ 3 without response)" in warm.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [3, 0, 0]})


@pytest.mark.controllers
def test_trust_cache_writes_without_any_other_request(world, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    w = world(devices=["CassarTech:pycom"])
    args = ["-i", w.transport(), "--name", "CassarTech", "--trace"]
    assert run_attled([*args, "--rgb", "1,0,0"], env=env).returncode == 0
    warm = run_attled([*args, "--rgb", "2,0,0", "--trust-cache"], env=env)
    assert warm.returncode == 0, warm.stderr
    assert att_count(warm.stderr) == 3  # the three Write Requests, nothing else
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [2, 0, 0]})
