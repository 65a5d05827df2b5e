"""attled as the device: `attled serve` judged by independent centrals.

Each test starts a world with host controllers only (or with a Bumble test
peer to clone), runs `attled serve` on one of them and drives it from
another: Bumble's own central (its GATT client and SMP,
attledtools.drivers.bumble_gatt_central) and attled's own central.  The
Database Hash is judged by Bumble's implementation (attledtools.maint.dbhash).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import ATTLED, Running, World, own_address, run_attled
from helpers import DBHASH, gatt_central, run_tool


def serve(w: World, *args: str, host: int = 0) -> Running:
    s = Running(["serve", "-i", w.transport(host), *args])
    s.wait_line("advertise", timeout=15)
    return s


def stop(s: Running) -> str:
    code = s.stop()
    assert code == 0, s.stderr
    return s.stderr


BOARD_OPS = {"pycom": "request", "particle": "command"}


@pytest.mark.controllers
@pytest.mark.parametrize("board", ["pycom", "particle"])
def test_bumble_central_sets_and_reads_back_each_rgb_board(world, board):
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", board, "--name", "CassarTech")
    code, out = gatt_central(w, "--name", "CassarTech", "--rgb", "255,0,128", "--read-back", host=1)
    assert code == 0, out
    assert out["profile"] == board and out["ops"] == [BOARD_OPS[board]] * 3
    assert out["read_back"] == {"red": "ff", "green": "00", "blue": "80"}
    s.wait_line("serve LED 255,0,128 (#ff0080) by")
    text = stop(s)
    assert "serve connected" in text and "serve disconnected" in text


@pytest.mark.controllers
def test_bumble_central_subscribes_to_the_harness(world):
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", "harness", "--name", "Harness")
    code, out = gatt_central(w, "--name", "Harness", "--command", "1,3,0,4", "--subscribe", "--expect-notifications", "4", host=1)
    assert code == 0, out
    assert out["notifications"] == ["01", "03", "00", "04"]
    s.wait_line("serve buttons 1 released, 2 released by")
    assert "serve buttons 1 pressed, 2 pressed by" in s.stderr
    stop(s)


@pytest.mark.parametrize("board", ["pycom", "particle", "harness"])
def test_database_hash_is_bumbles(world, board):
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", board, "--name", "CassarTech")
    code, out = gatt_central(w, "--name", "CassarTech", "--dump", host=1)
    assert code == 0, out
    chars = [c for sv in out["services"] for c in sv["characteristics"]]
    served = next(c["value"] for c in chars if c["uuid"] == "2b2a")
    code, oracle = run_tool(DBHASH, "--profile", board, "--name", "CassarTech")
    assert code == 0, oracle
    assert served == oracle["hash"], (served, oracle)
    # The layout dbhash documents, handle for handle.
    assert [sv["start"] for sv in out["services"]] == [1, 6, 14]
    stop(s)


@pytest.mark.controllers
@pytest.mark.parametrize("board", ["pycom", "particle"])
def test_attled_central_drives_attled_serve(world, board):
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", board, "--name", "Lamp")
    r = run_attled(["-i", w.transport(1), "--name", "Lamp", "--rgb", "10,20,30"])
    assert r.returncode == 0, r.stderr
    s.wait_line("serve LED 10,20,30 (#0a141e) by")
    r = run_attled(["get", "-i", w.transport(1), "--name", "Lamp", "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rgb"] == [10, 20, 30]
    stop(s)


def test_attled_central_sends_to_the_served_harness(world):
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", "harness", "--name", "Harness")
    r = run_attled(["send", "-i", w.transport(1), "--name", "Harness", "--value", "03"])
    assert r.returncode == 0, r.stderr
    s.wait_line("serve buttons 1 released, 2 pressed by")
    stop(s)


def test_a_clone_serves_the_original_handle_for_handle(world, tmp_path):
    w = world(devices=["Orig:gattdb:seed=5"], hosts=["tcp", "tcp", "tcp"])
    original = w.wait_event({"event": "gatt_database", "device": "Orig"})
    r = run_attled(["gatt", "-i", w.transport(0), "--name", "Orig", "--values", "--json"], timeout=40)
    assert r.returncode == 0, r.stderr
    db = tmp_path / "orig.json"
    db.write_text(r.stdout)
    s = serve(w, "--gatt", str(db), "--name", "Copy", host=1)
    code, out = gatt_central(w, "--name", "Copy", "--dump", host=2)
    assert code == 0, out
    want = normalised(original["services"])
    for got_sv, want_sv in zip(out["services"], want):
        assert got_sv == want_sv, f"service {want_sv['uuid']} at {want_sv['start']}:\n got {json.dumps(got_sv)}\nwant {json.dumps(want_sv)}"
    assert len(out["services"]) == len(want)
    stop(s)


def normalised(services: list[dict]) -> list[dict]:
    """The peer's database in the shape the central dumps (no peer-only keys)."""
    out = []
    for sv in services:
        chars = []
        for c in sv["characteristics"]:
            c = {k: v for k, v in c.items() if k in ("uuid", "declaration_handle", "value_handle", "properties", "value", "error", "descriptors")
                 and v is not None}
            c["descriptors"] = [{k: v for k, v in d.items() if k in ("uuid", "handle", "value", "error") and v is not None}
                                for d in c["descriptors"]]
            chars.append(c)
        out.append({**{k: v for k, v in sv.items() if k != "characteristics"}, "characteristics": chars})
    return out


def test_serve_json_events(world):
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", "pycom", "--name", "CassarTech", "--json")
    code, out = gatt_central(w, "--name", "CassarTech", "--rgb", "1,2,3", host=1)
    assert code == 0, out
    stop(s)
    events = [json.loads(line) for line in s.p.stdout.read().splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert "connected" in kinds and "disconnected" in kinds, kinds
    writes = [e for e in events if e["event"] == "write"]
    assert [(e["handle"], e["value"], e["op"]) for e in writes] == [(16, "01", "request"), (18, "02", "request"), (20, "03", "request")]
    states = [e["rgb"] for e in events if e["event"] == "state"]
    assert states[-1] == [1, 2, 3] and all(e["profile"] == "pycom" for e in events if e["event"] == "state")


def test_serve_usage_errors():
    for args, text in [(["serve"], "serve needs one of --profile"), (["serve", "--profile", "pycom", "--gatt", "x"], "serve needs one of"),
                       (["--rgb", "red", "--secure"], "set does not take --secure: --secure only applies to serve"),
                       (["serve", "--profile", "pycom", "--address", "C0:11:22:33:44:55"],
                        "serve does not take --address: serve has no target; its own address is --own-address")]:
        r = run_attled(args)
        assert r.returncode == 64 and text in r.stderr, (args, r.stderr)


def test_serve_gatt_file_errors_say_what_and_where(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"services": [{"uuid": "zz"}]}')
    r = run_attled(["serve", "--gatt", str(bad), "-i", "tcp:127.0.0.1:1"])
    assert r.returncode == 64, r.stderr
    assert 'services[0].uuid: "zz" is not a UUID' in r.stderr
    r = run_attled(["serve", "--gatt", str(tmp_path / "missing.json"), "-i", "tcp:127.0.0.1:1"])
    assert r.returncode == 64 and "cannot read it" in r.stderr, r.stderr


@pytest.mark.parametrize("board", ["pycom", "particle", "harness"])
def test_bumble_central_needs_the_same_round_trips_as_against_bumbles_own_board(world, board):
    """The same job (set or send, read back) against attled serve and against the
    Bumble test peer playing the same board: the same ATT requests, one by one."""
    w = world(devices=[f"Peer:{board}"], hosts=["tcp", "tcp"])
    job = ["--command", "1,0"] if board == "harness" else ["--rgb", "1,2,3", "--read-back"]
    code, peer = gatt_central(w, "--name", "Peer", *job, host=0)
    assert code == 0, peer
    s = serve(w, "--profile", board, "--name", "Served", host=1)
    code, served = gatt_central(w, "--name", "Served", *job, host=0)
    assert code == 0, served
    assert served["att_round_trips"] == peer["att_round_trips"], (served["att_round_trips"], peer["att_round_trips"])
    assert served["att_requests_by_opcode"] == peer["att_requests_by_opcode"]
    stop(s)


@pytest.mark.parametrize("mtu", [23, 517])
def test_long_read_throughput(world, tmp_path, mtu):
    """A 512-byte value read in full: Read and Read Blobs at ATT_MTU 23 (23 round
    trips), one Read at 517."""
    db = tmp_path / "long.json"
    db.write_text(json.dumps({"services": [{"uuid": "fff0", "characteristics": [
        {"uuid": "fff1", "properties": ["read"], "value": "ab" * 512, "descriptors": []}]}]}))
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--gatt", str(db), "--name", "Long")
    code, out = gatt_central(w, "--name", "Long", "--mtu", str(mtu), "--throughput", "fff1", host=1)
    assert code == 0, out
    t = out["throughput"]
    assert t["bytes"] == 512 and t["mtu"] == mtu
    assert t["round_trips"] == (1 if mtu == 517 else 1 + -(-(512 - 22) // 22)), t
    print(f"long read at MTU {mtu}: {t}")
    stop(s)


def test_two_centrals_at_once_and_the_harness_notifies_every_subscriber(world):
    """attled listening on the served harness (connected, subscribed) while
    Bumble's central writes a command: both connected at once, and the
    command is notified to attled's subscription too."""
    w = world(hosts=["tcp", "tcp", "tcp"])
    s = serve(w, "--profile", "harness", "--name", "Harness")
    listener = Running(["listen", "-i", w.transport(1), "--name", "Harness", "--count", "1", "--timeout", "20"])
    listener.wait_line("Ctrl-C stops", timeout=15)
    s.wait_line(lambda line: "subscribed to 0x0012: notify" in line)
    code, out = gatt_central(w, "--name", "Harness", "--command", "3", host=2)
    assert code == 0, out
    assert listener.finish(timeout=15) == 0, listener.stderr
    assert "03" in listener.p.stdout.read()
    text = stop(s)
    assert text.count("serve connected") == 2


def test_serve_capture_and_trace(world, tmp_path):
    """--btsnoop and --trace as in every other mode: tshark finds nothing
    malformed in the server's capture, its ATT handles are the database's,
    and the trace decodes the server's answers."""
    from helpers import TSHARK, tshark_malformed
    cap = tmp_path / "serve.btsnoop"
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", "harness", "--name", "Harness", "--btsnoop", str(cap), "--trace")
    code, out = gatt_central(w, "--name", "Harness", "--command", "1,0", "--subscribe", "--expect-notifications", "2", "--dump", host=1)
    assert code == 0, out
    text = stop(s)
    for line in ["LE Set Advertising Parameters (0x2006)", "LE Set Advertising Data (0x2008)", "Advertising: Enabled",
                 "Read By Group Type Response", "Handle Value Notification", "Write Response"]:
        assert line in text, line
    assert tshark_malformed(cap) == []
    r = subprocess.run([TSHARK, "-r", str(cap), "-Y", "btatt.opcode == 0x1b", "-T", "fields", "-e", "btatt.handle"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert {int(h, 16) for h in r.stdout.split()} == {0x0012}, r.stdout


def test_extended_advertising_on_root_canal(world):
    """--extended: the extended advertising commands (Root Canal lists them;
    Bumble's controller does not), found by attled's extended scan."""
    w = world(hosts=["tcp", "tcp"], controller="rootcanal")
    s = serve(w, "--profile", "pycom", "--name", "Wide", "--extended", "--trace")
    assert "LE Set Extended Advertising Parameters (0x2036)" in s.stderr
    assert "LE Set Extended Advertising Enable (0x2039)" in s.stderr
    r = run_attled(["-i", w.transport(1), "--name", "Wide", "--rgb", "4,5,6", "--extended"])
    assert r.returncode == 0, r.stderr
    s.wait_line("serve LED 4,5,6 (#040506) by")
    stop(s)


def serve_at(home, w: World, *args: str, host: int = 0):
    """attled serve with its state (bonds, clients' records) in ``home``, kept across runs."""
    from attledtools.drivers.attledproc import AttledProcess
    s = AttledProcess(ATTLED, ["serve", "-i", w.transport(host), *args], home=home)
    s.wait_line("advertise", timeout=15)
    return s


@pytest.mark.controllers
@pytest.mark.parametrize("mode", ["sc", "legacy"])
def test_bumble_pairs_with_secure_serve_and_reencrypts_with_the_bond(world, tmp_path, mode):
    """--secure: an unencrypted client is refused (and asked to secure the
    link); Bumble's SMP pairs with attled's responder (Just Works, bonding,
    keys both ways), and its next connection is encrypted with the bond, no
    pairing, its subscription restored."""
    w = world(hosts=["tcp", "tcp"])
    home = tmp_path / "serve-home"
    keystore = str(tmp_path / "keys.json")
    legacy = ["--legacy"] if mode == "legacy" else []
    s = serve_at(home, w, "--profile", "pycom", "--name", "Sec", "--secure")
    code, out = gatt_central(w, "--name", "Sec", "--read-back", host=1)
    assert code == 7 and out["att_error"] == 0x05, out  # Insufficient Authentication: no bond yet
    code, out = gatt_central(w, "--name", "Sec", "--pair", *legacy, "--keystore", keystore, "--rgb", "5,6,7", "--read-back", host=1)
    assert code == 0, out
    assert out["security"]["action"] == "paired" and out["security"]["bonded"] is True
    assert out["security"]["sc"] is (mode == "sc")
    assert out["read_back"] == {"red": "05", "green": "06", "blue": "07"}
    s.wait_line(f"serve paired")
    assert ("LE Secure Connections" if mode == "sc" else "legacy") in s.wait_line("serve paired")
    mark = s.mark()
    code, out = gatt_central(w, "--name", "Sec", "--pair", *legacy, "--keystore", keystore, "--read-back", host=1)
    assert code == 0, out
    assert out["security"]["action"] == "encrypted with bond", out
    assert out["read_back"] == {"red": "05", "green": "06", "blue": "07"}
    s.wait_line("encrypted with its bond", since=mark)
    assert s.count("serve paired", since=mark) == 0
    assert s.stop() == 0, s.stderr
    bonds = [p.name for p in (home / "state" / "attled").iterdir() if p.name.startswith("client-")]
    assert len(bonds) == 1 and (home / "state" / "attled" / bonds[0]).stat().st_mode & 0o777 == 0o600
    listed = run_attled(["bonds", "--json"], env={"XDG_STATE_HOME": str(home / "state")})
    assert listed.returncode == 0, listed.stderr
    clients = [b for b in json.loads(listed.stdout)["bonds"] if b["role"] == "client"]
    assert [b["identity"] for b in clients] == ["F0:00:00:00:00:01"] and clients[0]["secure_connections"] is (mode == "sc")


def test_a_bonded_client_is_told_the_database_changed(world, tmp_path):
    """Bonded with the pycom board; attled then serves the harness (another
    database) from the same state: the client's next encryption with its bond
    brings its record back and Service Changed is indicated to it."""
    w = world(hosts=["tcp", "tcp"])
    home = tmp_path / "serve-home"
    keystore = str(tmp_path / "keys.json")
    s = serve_at(home, w, "--profile", "pycom", "--name", "Sec", "--secure")
    code, out = gatt_central(w, "--name", "Sec", "--pair", "--keystore", keystore, "--service-changed", "--rgb", "1,1,1", host=1)
    assert code == 0, out
    s.wait_line("serve paired")
    s.wait_line("subscribed to 0x0008: indicate")
    assert s.stop() == 0, s.stderr
    s = serve_at(home, w, "--profile", "harness", "--name", "Sec", "--secure")
    code, out = gatt_central(w, "--name", "Sec", "--pair", "--keystore", keystore, "--command", "1", host=1)
    assert code == 0, out
    assert out["security"]["action"] == "encrypted with bond", out
    line = s.wait_line("restored from its bond")
    assert "the database changed: Service Changed indicated" in line
    # Bumble's client got it, the whole range: 0x0001-0xffff.
    assert {"handle": 8, "value": "0100ffff"} in out["indications"], out["indications"]
    assert s.stop() == 0, s.stderr


@pytest.mark.controllers
def test_serve_asks_each_central_for_its_connection_interval(world):
    """--conn-interval: once a central connected, attled serve sends it a
    Connection Parameter Update Request; Bumble's central accepts it and
    carries it out (LE Connection Update), both sides see the new interval."""
    w = world(hosts=["tcp", "tcp"])
    s = serve(w, "--profile", "pycom", "--name", "Slow", "--conn-interval", "45-50", "--json")
    code, out = gatt_central(w, "--name", "Slow", "--rgb", "1,2,3", "--await-interval", "50", host=1)
    assert code == 0, out
    assert out["connection"] == {"interval_ms": 50.0, "latency": 0, "supervision_timeout_ms": 4000.0}, out["connection"]
    text = stop(s)
    events = [json.loads(line) for line in s.p.stdout.read().splitlines() if line.startswith("{")]
    asked = [e for e in events if e["event"] == "parameters"]
    assert [(e["interval_min_ms"], e["interval_max_ms"], e["accepted"], e["error"]) for e in asked] == [(45.0, 50.0, True, None)], events
    updated = [e for e in events if e["event"] == "connection_updated"]
    assert [(e["interval_ms"], e["latency"], e["supervision_timeout_ms"]) for e in updated] == [(50.0, 0, 4000)], events


def test_serve_conn_interval_usage_errors():
    for value in ["5-10", "50-40", "30", "a-b", "30-5000"]:
        r = run_attled(["serve", "--profile", "pycom", "--conn-interval", value, "-i", "tcp:127.0.0.1:1"])
        assert r.returncode == 64 and "is not an interval range in ms like 30-50" in r.stderr, (value, r.stderr)
    r = run_attled(["--name", "X", "--rgb", "red", "--conn-interval", "30-50"])
    assert r.returncode == 64 and "set does not take --conn-interval: --conn-interval only applies to serve" in r.stderr, r.stderr


@pytest.mark.controllers
def test_attled_gatt_json_of_a_clone_equals_the_originals(world, tmp_path):
    """attled's own central on both sides of a clone: `gatt --json --values`
    of attled serve --gatt equals the same of the original, service for
    service (handles, properties, descriptors, values, errors)."""
    w = world(devices=["Orig:gattdb:seed=11"], hosts=["tcp", "tcp", "tcp"])
    w.wait_event({"event": "gatt_database", "device": "Orig"})
    r = run_attled(["gatt", "-i", w.transport(0), "--name", "Orig", "--values", "--json"], timeout=60)
    assert r.returncode == 0, r.stderr
    db = tmp_path / "orig.json"
    db.write_text(r.stdout)
    original = json.loads(r.stdout)
    s = serve(w, "--gatt", str(db), "--name", "Copy", host=1)
    r = run_attled(["gatt", "-i", w.transport(2), "--name", "Copy", "--values", "--json"], timeout=60)
    assert r.returncode == 0, r.stderr
    clone = json.loads(r.stdout)
    assert len(clone["services"]) == len(original["services"]) >= 3
    chars = [c for sv in original["services"] for c in sv["characteristics"]]
    assert any("value" in c for c in chars) and any(c["descriptors"] for c in chars), "a database worth cloning"
    for got, want in zip(clone["services"], original["services"]):
        assert got == want, f"service {want['uuid']}:\n got {json.dumps(got)}\nwant {json.dumps(want)}"
    stop(s)


@pytest.mark.controllers
def test_serve_and_a_central_on_two_controllers_share_one_state_directory(world, tmp_path, controller):
    """Issue 28: `attled serve` on one controller and `attled --rgb` on
    another, both as one user with one state directory. On Bumble's
    controllers neither has a public address (--zero-host-address), so each
    takes a static random address of its own identity (one per controller,
    the first one's lock held by serve); on Root Canal each has its public
    address. The central reaches the served lamp, not itself."""
    extra = ["--zero-host-address"] if controller == "bumble" else []
    w = world(hosts=["tcp", "tcp"], extra_args=extra)
    state = tmp_path / "state"
    s = serve_at(tmp_path, w, "--profile", "pycom", "--name", "Lamp", "--trace")
    r = run_attled(["-i", w.transport(1), "--name", "Lamp", "--rgb", "10,20,30", "--trace"],
                   env={"XDG_STATE_HOME": str(state)})
    assert r.returncode == 0, r.stderr
    s.wait_line("serve LED 10,20,30 (#0a141e) by")
    served, central = own_address(s.stderr), own_address(r.stderr)
    assert served != central
    index = (state / "attled" / "identities").read_text().splitlines()
    assert len(index) == 2 and index[0].startswith(".\t") and index[1].startswith("id-2\t"), index
    if controller == "bumble":
        assert (state / "attled" / "local-address").read_text().strip() == served
        assert (state / "attled" / "id-2" / "local-address").read_text().strip() == central
    stop(s)
