"""attled's general GATT tool (issue 14) against the seeded random database peer.

The peer is attledtools.peers.gattdb in a virtual world (proven against Bumble's own
GATT client in test_gattdb_peer.py); its ``gatt_database`` event is the
ground truth.  Everything here runs the real attled binary:

* ``gatt --json`` equals the database handle for handle (services primary and
  secondary, includes, characteristic declarations / value handles /
  properties / UUIDs, descriptors) at ATT_MTU 517 and 23, for several seeds,
  and with the database ending at 0xFFFF;
* ``gatt --values --json`` and ``read`` return every readable value in full
  (Read Blob beyond ATT_MTU-1, seen by the peer);
* ``write`` of long values (Prepare + Execute Write at MTU 23) reads back
  equal; a corrupted Prepare Write echo cancels (Execute Write flags 0,
  exit 6, value unchanged);
* ambiguous UUIDs and missing handles exit 5 naming what is there;
* ``--trace`` and ``--btsnoop`` show the long procedures, and tshark agrees;
* ``listen --char`` prints the notification (indication) the peer sends when
  its CCCD is written (gattdb ``notify_on_subscribe=1``).

Differences between ``attled gatt --json`` and the gattdb event, normalised
here: attled has no top-level ``seed`` / ``last_ffff`` / ``attribute_count`` /
``last_handle`` (it has ``ok``, ``command``, ``device``, timings instead); a
characteristic without the read property has no ``value`` key (gattdb: null);
descriptors have no ``writable`` flag; without ``--values`` there are no
values at all.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter

import pytest
from bumble import att

from conftest import run_attled
from helpers import GATTDB_NAME as NAME
from helpers import TSHARK, chars_of, start_peer, tshark_malformed, tshark_malformed_rows
# ATT opcodes: Bumble's own.
OP_READ_BY_TYPE = att.Opcode.ATT_READ_BY_TYPE_REQUEST
OP_READ = att.Opcode.ATT_READ_REQUEST
OP_READ_BLOB = att.Opcode.ATT_READ_BLOB_REQUEST
OP_WRITE_REQUEST = att.Opcode.ATT_WRITE_REQUEST
OP_PREPARE_WRITE = att.Opcode.ATT_PREPARE_WRITE_REQUEST
OP_EXECUTE_WRITE = att.Opcode.ATT_EXECUTE_WRITE_REQUEST
OP_READ_MULTIPLE_VARIABLE = att.Opcode.ATT_READ_MULTIPLE_VARIABLE_REQUEST
EXIT_NOT_FOUND = 5
EXIT_ATT_ERROR = 6


# -----------------------------------------------------------------------------
# Helpers
# -----------------------------------------------------------------------------
def attled(w, *args, cache=None, timeout: float = 20):
    env = {"XDG_CACHE_HOME": str(cache)} if cache is not None else None
    return run_attled([*args, "-i", w.transport(), "--name", NAME], timeout=timeout, env=env)


def ok(r) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def structure(services: list[dict], values: bool = False) -> list[dict]:
    """The comparable part of a database (gattdb event or attled JSON):
    everything discovery finds; with ``values``, also the values (a
    characteristic without read: None, whichever way it is spelt)."""
    out = []
    for s in services:
        chars = []
        for c in s["characteristics"]:
            ch = {k: c[k] for k in ("uuid", "declaration_handle", "value_handle", "properties")}
            ch["descriptors"] = [{k: d[k] for k in ("uuid", "handle")} | ({"value": d.get("value")} if values else {})
                                 for d in c["descriptors"]]
            if values:
                ch["value"] = c.get("value")
            chars.append(ch)
        out.append({
            "uuid": s["uuid"], "start": s["start"], "end": s["end"], "primary": s["primary"],
            "includes": [{k: i[k] for k in ("handle", "uuid", "start", "end")} for i in s["includes"]],
            "characteristics": chars,
        })
    return out


def first_difference(want: list[dict], got: list[dict]) -> str:
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"service #{i}:\n  peer:   {json.dumps(a)}\n  attled: {json.dumps(b)}"
    return f"{len(want)} services at the peer, {len(got)} from attled"


def readable(db: dict) -> list[dict]:
    return [c for _, c in chars_of(db) if c["value"] is not None]


def generated(db: dict) -> list[tuple[dict, dict]]:
    """(service, characteristic) of the seeded services (not Bumble's GAP/GATT)."""
    return [(s, c) for s, c in chars_of(db) if s["uuid"] not in ("1800", "1801")]


def att_events(w, op: int, since: int = 0) -> list[dict]:
    return w.find({"event": "att", "op": op}, since=since)


def handle_of_pdu(pdu_hex: str) -> int:
    return int.from_bytes(bytes.fromhex(pdu_hex)[1:3], "little")


def offset_of_pdu(pdu_hex: str) -> int:
    return int.from_bytes(bytes.fromhex(pdu_hex)[3:5], "little")


def writable_char(db: dict) -> dict:
    """A generated characteristic with read and write (Write Request) properties."""
    for _, c in generated(db):
        if "read" in c["properties"] and "write" in c["properties"]:
            return c
    raise AssertionError("the seed has no read+write characteristic")


def pattern(n: int) -> bytes:
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


# -----------------------------------------------------------------------------
# 1, 2. The whole database
# -----------------------------------------------------------------------------
DB_CASES = [
    pytest.param(1, 517, False, id="seed1-mtu517"),
    pytest.param(1, 23, False, id="seed1-mtu23"),
    pytest.param(2, 517, False, id="seed2-mtu517"),
    pytest.param(3, 23, False, id="seed3-mtu23"),
    pytest.param(7, 517, False, id="seed7-mtu517"),
    pytest.param(7, 23, False, id="seed7-mtu23"),
    pytest.param(2, 517, True, id="seed2-ffff-mtu517"),
    pytest.param(2, 23, True, id="seed2-ffff-mtu23"),
    pytest.param(3, 23, True, id="seed3-ffff-mtu23"),
]


@pytest.mark.controllers(rootcanal_cases=["seed2-ffff-mtu23", "seed1-mtu517"])
@pytest.mark.parametrize("seed,mtu,last_ffff", DB_CASES)
def test_gatt_json_equals_the_database(world, seed, mtu, last_ffff):
    w, db = start_peer(world, seed, mtu, ",last_ffff=1" if last_ffff else "")
    # The shapes this test is about must be in the database at all.
    assert any(not s["primary"] for s in db["services"])
    includes = [i for s in db["services"] for i in s["includes"]]
    assert any(len(i["uuid"]) == 36 for i in includes) and any(len(i["uuid"]) == 4 for i in includes)
    if last_ffff:
        assert db["last_handle"] == 0xFFFF and db["services"][-1]["end"] == 0xFFFF

    r = ok(attled(w, "gatt", "--json"))
    got = json.loads(r.stdout)
    assert got["ok"] is True and got["command"] == "gatt"
    want = structure(db["services"])
    have = structure(got["services"])
    assert have == want, first_difference(want, have)
    if mtu == 23:
        w.wait_event({"event": "mtu_exchanged", "mtu": 23}, timeout=1)


VALUE_CASES = [
    pytest.param(1, 23, False, id="seed1-mtu23"),
    pytest.param(3, 517, False, id="seed3-mtu517"),
    pytest.param(7, 23, True, id="seed7-ffff-mtu23"),
]


@pytest.mark.parametrize("seed,mtu,last_ffff", VALUE_CASES)
def test_gatt_values_equal_the_database(world, seed, mtu, last_ffff):
    w, db = start_peer(world, seed, mtu, ",last_ffff=1" if last_ffff else "")
    mark = w.mark()
    r = ok(attled(w, "gatt", "--values", "--json"))
    got = json.loads(r.stdout)
    want = structure(db["services"], values=True)
    have = structure(got["services"], values=True)
    assert have == want, first_difference(want, have)
    # The long values came in full; at MTU 23 that takes Read Blob.
    assert max(len(c["value"]) // 2 for c in readable(db)) >= 255
    if mtu == 23:
        blobs = att_events(w, OP_READ_BLOB, since=mark)
        long_handles = {c["value_handle"] for c in readable(db) if len(c["value"]) // 2 > mtu - 1}
        assert long_handles <= {handle_of_pdu(e["pdu"]) for e in blobs}


# -----------------------------------------------------------------------------
# 3. read
# -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed,mtu", [(3, 23), (1, 517)], ids=["seed3-mtu23", "seed1-mtu517"])
def test_read_every_value_by_handle(world, tmp_path, seed, mtu):
    w, db = start_peer(world, seed, mtu)
    cache = tmp_path / "cache"  # one cache for the runs: no scan after the first
    for c in readable(db):
        r = ok(attled(w, "read", "--char", f"0x{c['value_handle']:04x}", "--json", cache=cache))
        got = json.loads(r.stdout)
        assert (got["handle"], got["uuid"], got["value"]) == (c["value_handle"], c["uuid"], c["value"]), c
    # Descriptors by handle too (CUD text, vendor bytes, CCCD 0000).
    for _, c in generated(db)[:8]:
        for d in c["descriptors"]:
            r = ok(attled(w, "read", "--char", f"0x{d['handle']:04x}", "--json", cache=cache))
            assert json.loads(r.stdout)["value"] == d["value"], d


def test_read_by_unique_uuid(world, tmp_path):
    w, db = start_peer(world, 3, 23)
    cache = tmp_path / "cache"
    counts = Counter(c["uuid"] for _, c in chars_of(db))
    unique = [c for _, c in generated(db) if counts[c["uuid"]] == 1 and c["value"] is not None]
    picks = [c for c in unique if len(c["uuid"]) == 4][:2] + [c for c in unique if len(c["uuid"]) == 36][:2]
    picks.append(max(unique, key=lambda c: len(c["value"])))  # the longest value, by UUID
    assert len(picks) == 5
    for c in picks:
        r = ok(attled(w, "read", "--char", c["uuid"], "--json", cache=cache))
        got = json.loads(r.stdout)
        assert (got["handle"], got["value"]) == (c["value_handle"], c["value"]), c
    # Plain output: the hex value (in some spacing) on stdout.
    c = picks[0]
    r = ok(attled(w, "read", "--char", c["uuid"], cache=cache))
    assert re.sub(r"[^0-9a-f]", "", r.stdout.lower()) == c["value"]


def multi_read_picks(db: dict) -> list[dict]:
    """Five readable characteristics whose Length Value tuples fit one
    response at ATT_MTU 517, the last a long one: Bumble's server cuts it to
    251 bytes (and would send a response past the MTU if it did not fit)."""
    small = [c for _, c in generated(db) if c["value"] is not None and 1 <= len(c["value"]) // 2 <= 40][:4]
    long = next(c for _, c in generated(db) if c["value"] is not None and len(c["value"]) // 2 > 300)
    assert len(small) == 4 and sum(2 + len(c["value"]) // 2 for c in small) + 2 + 251 <= 516
    return small + [long]


@pytest.mark.controllers
def test_read_several_values_in_one_round_trip(world):
    """Issue 20: several --char are read with one Read Multiple Variable
    Length Request, in the order given. At ATT_MTU 517 the server cuts the
    400-byte value to 251 bytes; one Read Response holds it whole, so it is
    read again once (no Read Blob)."""
    w, db = start_peer(world, 3, 517)
    picks = multi_read_picks(db)
    args = [a for c in picks for a in ("--char", f"0x{c['value_handle']:04x}")]
    mark = w.mark()
    r = ok(attled(w, "read", *args, "--json"))
    got = json.loads(r.stdout)
    assert got["method"] == "read-multiple-variable"
    assert [(v["handle"], v["value"]) for v in got["values"]] == [(c["value_handle"], c["value"]) for c in picks]
    w.wait_event({"event": "disconnected"}, since=mark)
    multi = att_events(w, OP_READ_MULTIPLE_VARIABLE, since=mark)
    assert len(multi) == 1
    assert multi[0]["pdu"][2:] == "".join(c["value_handle"].to_bytes(2, "little").hex() for c in picks)
    assert [handle_of_pdu(e["pdu"]) for e in att_events(w, OP_READ, since=mark)] == [picks[-1]["value_handle"]]
    assert not att_events(w, OP_READ_BLOB, since=mark)
    # Plain output: one value per line, in order.
    r = ok(attled(w, "read", *args))
    assert r.stdout.split() == [c["value"] for c in picks]


def test_read_several_values_at_mtu_23_completes_what_did_not_fit(world):
    """At ATT_MTU 23 the server sends 20 bytes of the first (400-byte) value
    and nothing else: attled continues that one with Read Blob from offset 20
    and reads the rest on their own."""
    w, db = start_peer(world, 3, 23)
    small = [c for _, c in generated(db) if c["value"] is not None and 1 <= len(c["value"]) // 2 <= 20][:3]
    assert len(small) == 3
    long = next(c for _, c in generated(db) if c["value"] is not None and len(c["value"]) // 2 == 400)
    picks = [long] + small
    args = [a for c in picks for a in ("--char", f"0x{c['value_handle']:04x}")]
    mark = w.mark()
    got = json.loads(ok(attled(w, "read", *args, "--json")).stdout)
    assert [(v["handle"], v["value"]) for v in got["values"]] == [(c["value_handle"], c["value"]) for c in picks]
    w.wait_event({"event": "disconnected"}, since=mark)
    assert len(att_events(w, OP_READ_MULTIPLE_VARIABLE, since=mark)) == 1
    blobs = att_events(w, OP_READ_BLOB, since=mark)
    assert {handle_of_pdu(e["pdu"]) for e in blobs} == {long["value_handle"]}
    assert offset_of_pdu(blobs[0]["pdu"]) == 20
    assert [handle_of_pdu(e["pdu"]) for e in att_events(w, OP_READ, since=mark)] == [c["value_handle"] for c in small]


@pytest.mark.controllers
def test_read_several_values_falls_back_to_single_reads(world):
    """A server before ATT 5.2 answers Read Multiple Variable with Request
    Not Supported: attled reads each value on its own (the lengths are not
    known, so Read Multiple cannot be split), and still prints them all."""
    w, db = start_peer(world, 3, 517, extra=",unsupported=20")
    picks = multi_read_picks(db)
    args = [a for c in picks for a in ("--char", f"0x{c['value_handle']:04x}")]
    mark = w.mark()
    r = ok(attled(w, "read", *args, "--json"))
    got = json.loads(r.stdout)
    assert got["method"] == "read"
    assert [(v["handle"], v["value"]) for v in got["values"]] == [(c["value_handle"], c["value"]) for c in picks]
    w.wait_event({"event": "disconnected"}, since=mark)
    assert len(w.find({"event": "unsupported", "op": OP_READ_MULTIPLE_VARIABLE}, since=mark)) == 1
    assert [handle_of_pdu(e["pdu"]) for e in att_events(w, OP_READ, since=mark)] == [c["value_handle"] for c in picks]


def test_several_chars_are_only_for_read(world):
    w, _ = start_peer(world, 3, 517)
    r = attled(w, "write", "--char", "0x0010", "--char", "0x0012", "--value", "01")
    assert r.returncode == 64 and "only read takes several" in r.stderr, r.stderr


@pytest.mark.controllers
def test_read_long_value_uses_read_blob(world):
    w, db = start_peer(world, 3, 23)
    c = next(c for c in readable(db) if len(c["value"]) // 2 == 400)
    mark = w.mark()
    r = ok(attled(w, "read", "--char", f"0x{c['value_handle']:04x}", "--json"))
    assert json.loads(r.stdout)["value"] == c["value"]
    w.wait_event({"event": "disconnected"}, since=mark)
    reads = [e for e in att_events(w, OP_READ, since=mark) if handle_of_pdu(e["pdu"]) == c["value_handle"]]
    blobs = [e for e in att_events(w, OP_READ_BLOB, since=mark) if handle_of_pdu(e["pdu"]) == c["value_handle"]]
    assert len(reads) == 1
    # 400 bytes, 22 per response: a Read and 18 Read Blobs at offsets 22, 44, ... 396.
    assert [offset_of_pdu(e["pdu"]) for e in blobs] == list(range(22, 400, 22))


# -----------------------------------------------------------------------------
# 4. write
# -----------------------------------------------------------------------------
@pytest.mark.controllers(rootcanal_cases=["23-300", "517-512"])
@pytest.mark.parametrize("mtu,length", [(23, 300), (23, 21), (23, 20), (517, 300), (517, 512)])
def test_write_reads_back(world, tmp_path, mtu, length):
    w, db = start_peer(world, 3, mtu)
    c = writable_char(db)
    value = pattern(length)
    cache = tmp_path / "cache"
    mark = w.mark()
    ok(attled(w, "write", "--char", f"0x{c['value_handle']:04x}", "--value", value.hex(), cache=cache))
    event = w.wait_event({"event": "write", "handle": c["value_handle"]}, since=mark)
    assert event["value"] == value.hex() and event["length"] == length
    prepares = [e for e in att_events(w, OP_PREPARE_WRITE, since=mark)]
    executes = att_events(w, OP_EXECUTE_WRITE, since=mark)
    if length > mtu - 3:
        assert event["op"] == "execute"
        part = mtu - 5
        assert [offset_of_pdu(e["pdu"]) for e in prepares] == list(range(0, length, part))
        assert b"".join(bytes.fromhex(e["pdu"])[5:] for e in prepares) == value
        assert [e["pdu"] for e in executes] == ["1801"]
    else:
        assert event["op"] == "request"
        assert prepares == [] and executes == []
    r = ok(attled(w, "read", "--char", f"0x{c['value_handle']:04x}", "--json", cache=cache))
    assert json.loads(r.stdout)["value"] == value.hex()


def test_write_without_response(world, tmp_path):
    w, db = start_peer(world, 3, 23)
    c = next(c for _, c in generated(db)
             if "write-without-response" in c["properties"] and "read" in c["properties"])
    value = pattern(20)
    cache = tmp_path / "cache"
    mark = w.mark()
    ok(attled(w, "write", "--char", f"0x{c['value_handle']:04x}", "--value", value.hex(), "--without-response",
              cache=cache))
    event = w.wait_event({"event": "write", "handle": c["value_handle"]}, since=mark)
    assert (event["op"], event["value"]) == ("command", value.hex())
    r = ok(attled(w, "read", "--char", f"0x{c['value_handle']:04x}", "--json", cache=cache))
    assert json.loads(r.stdout)["value"] == value.hex()


# -----------------------------------------------------------------------------
# 5. Not found, ambiguous
# -----------------------------------------------------------------------------
def test_ambiguous_uuid_names_the_candidates(world, tmp_path):
    w, db = start_peer(world, 3, 23)
    counts = Counter(c["uuid"] for _, c in chars_of(db))
    dup = [u for u, n in counts.items() if n > 1]
    assert len(dup) == 1, dup  # gattdb: one UUID used twice, in two services
    pairs = [(s, c) for s, c in chars_of(db) if c["uuid"] == dup[0]]
    r = attled(w, "read", "--char", dup[0])
    assert r.returncode == EXIT_NOT_FOUND, r.stdout + r.stderr
    assert r.stdout == ""
    for s, c in pairs:
        assert f"0x{c['value_handle']:04x}" in r.stderr.lower(), r.stderr
    # write and listen resolve the same way.
    r = attled(w, "write", "--char", dup[0], "--value", "01")
    assert r.returncode == EXIT_NOT_FOUND, r.stdout + r.stderr
    assert all(f"0x{c['value_handle']:04x}" in r.stderr.lower() for _, c in pairs), r.stderr
    assert w.find({"event": "write"}) == []
    # --service narrows it to one.
    s, c = next(((s, c) for s, c in pairs if c["value"] is not None), pairs[0])
    r = attled(w, "read", "--char", dup[0], "--service", s["uuid"], "--json")
    if c["value"] is not None:
        ok(r)
        assert json.loads(r.stdout)["handle"] == c["value_handle"] and json.loads(r.stdout)["value"] == c["value"]
    else:
        assert r.returncode == EXIT_ATT_ERROR, r.stderr  # Read Not Permitted, on that one handle


def test_service_narrows_to_a_secondary_service(world):
    w, db = start_peer(world, 3, 23)
    counts = Counter(c["uuid"] for _, c in chars_of(db))
    s, c = next((s, c) for s, c in chars_of(db) if not s["primary"] and c["value"] is not None
                and counts[c["uuid"]] == 1 and sum(1 for t in db["services"] if t["uuid"] == s["uuid"]) == 1)
    r = attled(w, "read", "--char", c["uuid"], "--service", s["uuid"], "--json")
    ok(r)
    assert json.loads(r.stdout)["value"] == c["value"]


def test_missing_handle_and_uuid(world):
    w, db = start_peer(world, 3, 23)
    assert all(not (s["start"] <= 0x0FFF <= s["end"]) for s in db["services"]) and db["last_handle"] < 0x0FFF
    r = attled(w, "read", "--char", "0x0FFF")
    assert r.returncode == EXIT_NOT_FOUND, r.stdout + r.stderr
    assert r.stdout == ""
    assert "0x0fff" in r.stderr.lower() and "no attribute" in r.stderr.lower(), r.stderr
    r = attled(w, "read", "--char", "c0de")
    assert r.returncode == EXIT_NOT_FOUND, r.stdout + r.stderr
    assert "c0de" in r.stderr.lower(), r.stderr
    # 2902 names descriptors only (one per notify/indicate characteristic):
    # --char looks for characteristics, so there is none.
    r = attled(w, "read", "--char", "2902")
    assert r.returncode == EXIT_NOT_FOUND, r.stdout + r.stderr
    assert "2902" in r.stderr, r.stderr


def test_last_characteristic_at_ffff(world, tmp_path):
    """seed 3 with last_ffff: the last characteristic's value is handle 0xFFFF."""
    w, db = start_peer(world, 3, 23, ",last_ffff=1")
    c = db["services"][-1]["characteristics"][-1]
    assert c["value_handle"] == 0xFFFF and "read" in c["properties"] and "write" in c["properties"]
    assert sum(1 for _, o in chars_of(db) if o["uuid"] == c["uuid"]) == 1
    cache = tmp_path / "cache"
    r = ok(attled(w, "read", "--char", c["uuid"], "--json", cache=cache))
    assert (json.loads(r.stdout)["handle"], json.loads(r.stdout)["value"]) == (0xFFFF, c["value"])
    value = pattern(100)
    mark = w.mark()
    ok(attled(w, "write", "--char", "0xFFFF", "--value", value.hex(), cache=cache))
    assert w.wait_event({"event": "write", "handle": 0xFFFF}, since=mark)["op"] == "execute"
    r = ok(attled(w, "read", "--char", "0xffff", "--json", cache=cache))
    assert json.loads(r.stdout)["value"] == value.hex()


# -----------------------------------------------------------------------------
# 6. A corrupted Prepare Write echo
# -----------------------------------------------------------------------------
@pytest.mark.controllers
def test_corrupted_prepare_echo_cancels(world, tmp_path):
    w, db = start_peer(world, 3, 23, ",fault_corrupt=prepare_write#2")
    c = writable_char(db)
    cache = tmp_path / "cache"
    mark = w.mark()
    r = attled(w, "write", "--char", f"0x{c['value_handle']:04x}", "--value", pattern(100).hex(), cache=cache)
    assert r.returncode == EXIT_ATT_ERROR, r.stdout + r.stderr
    assert "prepare write" in r.stderr.lower(), r.stderr
    w.wait_event({"event": "fault", "kind": "corrupt", "request": "prepare_write"}, since=mark)
    w.wait_event({"event": "disconnected"}, since=mark)
    executes = att_events(w, OP_EXECUTE_WRITE, since=mark)
    assert [e["pdu"] for e in executes] == ["1800"]  # flags 0: cancel, and nothing else
    assert len(att_events(w, OP_PREPARE_WRITE, since=mark)) == 2  # stopped at the bad echo
    assert w.find({"event": "write"}, since=mark) == []
    r = ok(attled(w, "read", "--char", f"0x{c['value_handle']:04x}", "--json", cache=cache))
    assert json.loads(r.stdout)["value"] == c["value"]


# -----------------------------------------------------------------------------
# 7. --trace and --btsnoop
# -----------------------------------------------------------------------------
def trace_blocks(stderr: str, name: str) -> list[str]:
    """Each decoded packet line naming ``name``, with the 4 lines after it
    (format-agnostic).  Lines with "->" are the end-of-run summary of ATT
    transactions ("Prepare Write Request  0.74 ms -> Prepare Write Response"),
    not packets."""
    lines = stderr.splitlines()
    return ["\n".join(lines[i:i + 5]) for i, line in enumerate(lines) if name in line and "->" not in line]


def tshark_fields(cap, *fields: str) -> list[list[str]]:
    args = [TSHARK, "-r", str(cap), "-Y", "btatt", "-T", "fields"]
    for f in fields:
        args += ["-e", f]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def test_trace_and_btsnoop_show_long_procedures(world, tmp_path):
    w, db = start_peer(world, 3, 23)
    c = writable_char(db)
    long_char = next(c for c in readable(db) if len(c["value"]) // 2 == 400)
    cache = tmp_path / "cache"
    caps = {k: tmp_path / f"{k}.btsnoop" for k in ("write", "read", "gatt")}
    # Read first: the written characteristic may be the long one.
    rd = ok(attled(w, "read", "--char", f"0x{long_char['value_handle']:04x}", "--trace",
                   "--btsnoop", caps["read"], cache=cache))
    wr = ok(attled(w, "write", "--char", f"0x{c['value_handle']:04x}", "--value", pattern(300).hex(),
                   "--trace", "--btsnoop", caps["write"], cache=cache))
    gt = ok(attled(w, "gatt", "--trace", "--btsnoop", caps["gatt"], "--no-cache", "--json"))
    assert json.loads(gt.stdout)["ok"] is True

    # The trace (stderr), by content: names, handles, offsets.
    handle = f"0x{c['value_handle']:04x}"
    prepares = [b for b in trace_blocks(wr.stderr, "Prepare Write Request")]
    assert len(prepares) == 17, (len(prepares), wr.stderr[-3000:])  # 300 bytes in 18-byte parts
    assert all(handle in b.lower() for b in prepares), prepares[:2]
    assert any(re.search(r"\b288\b", b) for b in prepares), prepares[-1]  # the last offset, 17th part
    assert len(trace_blocks(wr.stderr, "Prepare Write Response")) == 17
    executes = trace_blocks(wr.stderr, "Execute Write Request")
    assert len(executes) == 1, wr.stderr[-3000:]
    assert trace_blocks(wr.stderr, "Execute Write Response")
    blobs = trace_blocks(rd.stderr, "Read Blob Request")
    assert len(blobs) == 18, (len(blobs), rd.stderr[-3000:])
    assert all(f"0x{long_char['value_handle']:04x}" in b.lower() for b in blobs)
    assert any(re.search(r"\b396\b", b) for b in blobs)  # the last offset
    assert len(trace_blocks(rd.stderr, "Read Blob Response")) == 18
    include_reads = [b for b in trace_blocks(gt.stderr, "Read By Type Request") if "2802" in b]
    assert include_reads, "no Read By Type Request for 0x2802 (Find Included Services) in the trace"

    # tshark judges the captures: nothing malformed, and the same procedures.
    for name, cap in caps.items():
        assert cap.stat().st_size > 0
        if name != "gatt":
            assert tshark_malformed(cap) == [], (name, tshark_malformed(cap))
    # tshark (4.0) calls a Read By Type Response for 0x2802 whose entries are
    # 6 bytes (an include of a 128-bit service: handles only, no UUID, as
    # Core Vol 3 Part G 3.2 says) "Malformed": its dissector wants a UUID.
    # Those frames, and only those, are let through, once the bytes are
    # checked to be a well-formed response of 6-byte entries.
    includes128 = {i["handle"] for s in db["services"] for i in s["includes"] if len(i["uuid"]) == 36}
    assert includes128
    for row in tshark_malformed_rows(caps["gatt"]):
        opcode, entry_length, l2cap_length, handles = row[1], row[2], row[3], row[4]
        assert (int(opcode, 16), int(entry_length), (int(l2cap_length) - 2) % 6) == (0x09, 6, 0), row
        assert int(handles.split(",")[0], 16) in includes128, row
    write_ops = [int(f[0], 16) for f in tshark_fields(caps["write"], "btatt.opcode")]
    assert write_ops.count(OP_PREPARE_WRITE) == 17 and write_ops.count(OP_PREPARE_WRITE + 1) == 17
    assert write_ops.count(OP_EXECUTE_WRITE) == 1 and write_ops.count(OP_EXECUTE_WRITE + 1) == 1
    execute = [f for f in tshark_fields(caps["write"], "btatt.opcode", "btatt.flags") if int(f[0], 16) == 0x18]
    assert int(execute[0][1], 16) == 0x01  # immediately write all pending values
    read_rows = tshark_fields(caps["read"], "btatt.opcode", "btatt.handle", "btatt.offset")
    blob_rows = [r for r in read_rows if int(r[0], 16) == OP_READ_BLOB]
    assert [int(r[2]) for r in blob_rows] == list(range(22, 400, 22))
    assert {int(r[1], 16) for r in blob_rows} == {long_char["value_handle"]}
    gatt_rows = tshark_fields(caps["gatt"], "btatt.opcode", "btatt.uuid16")
    assert any(int(r[0], 16) == OP_READ_BY_TYPE and r[1] and int(r[1], 16) == 0x2802 for r in gatt_rows)


# -----------------------------------------------------------------------------
# 8. listen
# -----------------------------------------------------------------------------
@pytest.mark.controllers
@pytest.mark.parametrize("kind", ["notify", "indicate"])
def test_listen_prints_the_peer_notification(world, kind):
    w, db = start_peer(world, 3, 23, ",notify_on_subscribe=1")
    if kind == "notify":
        c = next(c for _, c in generated(db) if "notify" in c["properties"] and c["value"] and len(c["value"]) > 44)
    else:
        c = next(c for _, c in generated(db)
                 if "indicate" in c["properties"] and "notify" not in c["properties"] and c["value"])
    mark = w.mark()
    r = ok(attled(w, "listen", "--char", f"0x{c['value_handle']:04x}", "--count", "1", "--json"))
    sent = w.wait_event({"event": "notify", "handle": c["value_handle"]}, since=mark)
    assert sent["indication"] is (kind == "indicate")
    assert sent["value"] == c["value"][: 2 * 20]  # ATT_MTU 23: 20 bytes
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert [(e["handle"], e["value"]) for e in lines if e.get("event") == "notification"] == \
        [(c["value_handle"], sent["value"])]
    w.wait_event({"event": "subscribed", "notify": kind == "notify", "indicate": kind == "indicate"}, since=mark)
    if kind == "indicate":
        w.wait_event({"event": "att", "op": 0x1E}, since=mark)  # attled confirmed the indication
