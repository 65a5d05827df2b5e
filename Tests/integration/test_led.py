"""The job attled exists for: find, connect, discover, write the colour (issue: GATT)."""

from __future__ import annotations

import json
import time

import pytest

from attledtools.peers.profiles import PROFILES
from conftest import run_attled
from helpers import att_count


@pytest.mark.parametrize("host", ["tcp", "unix", "pty"])
@pytest.mark.parametrize("profile", ["pycom", "particle"])
def test_set_colour(world, host, profile):
    w = world(devices=[f"CassarTech:{profile}"], hosts=[host])
    r = run_attled(["--transport", w.transport(), "--name", "CassarTech", "--rgb", "255,0,0"])
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [255, 0, 0]})
    # The link is always torn down with reason 0x13.
    w.wait_event({"event": "disconnected", "device": "CassarTech", "reason": 0x13})
    ops = {e["op"] for e in w.find({"event": "write", "device": "CassarTech"})}
    assert ops == ({"request"} if profile == "pycom" else {"command"})
    for phase in ("scan", "connect", "discover", "write", "done"):
        assert f"attled: {phase}" in r.stderr


@pytest.mark.controllers
@pytest.mark.parametrize("profile", ["pycom", "particle"])
def test_get_returns_what_was_set(world, profile):
    w = world(devices=[f"CassarTech:{profile}"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "#12ab7f"])
    assert r.returncode == 0, r.stderr
    r = run_attled(["-i", w.transport(), "get", "--name", "CassarTech"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "18,171,127 #12ab7f"
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "get", "--json", "-q"])
    assert r.returncode == 0 and r.stderr == ""
    assert json.loads(r.stdout)["rgb"] == [18, 171, 127]


def test_initial_values_are_read(world):
    w = world(devices=["CassarTech:pycom:init=1,2,3"])
    r = run_attled(["-i", w.transport(), "get", "--name", "CassarTech"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1,2,3 #010203"


@pytest.mark.controllers
def test_harness_send_and_listen(world):
    w = world(devices=["Harness:harness"])
    for value, buttons in (("01", [1, 0]), ("03", [1, 1]), ("04", [1, 0]), ("00", [0, 0])):
        r = run_attled(["-i", w.transport(), "--name", "Harness", "send", "--value", value])
        assert r.returncode == 0, r.stderr
        w.wait_event({"event": "state", "device": "Harness", "buttons": buttons})
    assert w.find({"event": "state", "device": "Harness"})[-1]["commands"] == [1, 3, 4, 0]


@pytest.mark.controllers
def test_harness_listen_prints_notifications(world):
    w = world(devices=["Harness:harness:notify_every=50"])
    r = run_attled(["-i", w.transport(), "--name", "Harness", "listen", "--count", "3", "--json"], timeout=20)
    assert r.returncode == 0, r.stderr
    notes = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    assert len(notes) == 3
    button = PROFILES["harness"].char("button").uuid.lower()  # as attled prints it
    assert all(n["event"] == "notification" and n["uuid"] == button for n in notes)
    w.wait_event({"event": "subscribed", "device": "Harness"})


def test_harness_has_no_rgb(world):
    r = run_attled(["-i", "tcp:127.0.0.1:1", "--profile", "harness", "--rgb", "red"])
    assert r.returncode == 64 and "no RGB LED" in r.stderr


@pytest.mark.controllers
def test_gatt_dump_lists_led_service_with_properties(world):
    w = world(devices=["CassarTech:particle"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "gatt"])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    particle = PROFILES["particle"]
    assert f"service {particle.service_uuid} LED service (particle)" in out
    for c in particle.chars:  # red, green, blue
        line = [l for l in out.splitlines() if f"characteristic {c.uuid}" in l]
        assert line and line[0].endswith("[read,write-without-response]"), out
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "gatt", "--json", "-q"])
    doc = json.loads(r.stdout)
    svc = [s for s in doc["services"] if s["uuid"] == particle.service_uuid][0]
    assert [c["value_handle"] for c in svc["characteristics"]] == [
        w.device("CassarTech")["handles"][k] for k in ("red", "green", "blue")]


@pytest.mark.controllers
def test_right_device_changes_other_does_not(world):
    w = world(devices=["CassarTech:pycom", "OtherLamp:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "OtherLamp", "--rgb", "0,0,255"])
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "state", "device": "OtherLamp", "rgb": [0, 0, 255]})
    assert not w.find({"event": "write", "device": "CassarTech"})
    assert not w.find({"event": "connected", "device": "CassarTech"})


@pytest.mark.controllers
def test_find_by_service_uuid_and_default_target(world):
    w = world(devices=["Plain:particle", "CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--service", PROFILES["pycom"].service_uuid, "--rgb", "green"])
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [0, 255, 0]})
    assert not w.find({"event": "write", "device": "Plain"})


def test_shortened_name_matches(world):
    w = world(devices=["CassarTech:pycom:name_in=shortened,short=6"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,1,1"])
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [1, 1, 1]})


@pytest.mark.controllers
def test_connect_by_address_without_scan(world):
    w = world(devices=["CassarTech:pycom"])
    addr = w.device("CassarTech")["address"]
    r = run_attled(["-i", w.transport(), "--address", addr, "--rgb", "9,8,7", "--trace"])
    assert r.returncode == 0, r.stderr
    assert "LE Set Scan Enable" not in r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [9, 8, 7]})


def test_profile_detected_by_discovery_without_advertised_uuid(world):
    w = world(devices=["CassarTech:particle:uuid=0"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "4,5,6"])
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [4, 5, 6]})
    assert "particle service" in r.stderr


def test_custom_rgb_description(world):
    w = world(devices=["CassarTech:particle"])
    p = PROFILES["particle"]
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--service", p.service_uuid,
                    "--red", p.char("blue").uuid, "--green", p.char("green").uuid, "--blue", p.char("red").uuid,
                    "--rgb", "10,20,30"])
    assert r.returncode == 0, r.stderr
    # red and blue swapped by the description
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [30, 20, 10]})


@pytest.mark.controllers
def test_connection_parameter_update_request_is_answered(world):
    w = world(devices=["CassarTech:pycom:conn_update=1,conn_update_delay=0"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "255,255,0", "--trace"])
    assert r.returncode == 0, r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [255, 255, 0]})
    assert "Connection Parameter Update Request (0x12)" in r.stderr
    assert "Connection Parameters accepted" in r.stderr
    w.wait_event({"event": "conn_update_response", "device": "CassarTech", "accepted": True})


def test_security_request_with_no_pair_gets_pairing_not_supported_and_run_continues(world, tmp_path):
    w = world(devices=["CassarTech:pycom:security_request=1"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "0,1,0", "--trace", "--no-pair"],
                   env={"XDG_STATE_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "SMP: Security Request (0x0b)" in r.stderr
    assert "Reason: Pairing Not Supported (0x05)" in r.stderr
    assert "Pairing Request" not in r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [0, 1, 0]})


@pytest.mark.controllers
def test_security_request_is_answered_by_pairing_and_run_continues(world, tmp_path):
    w = world(devices=["CassarTech:pycom:security_request=1"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "0,1,0", "--trace"],
                   env={"XDG_STATE_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "SMP: Security Request (0x0b)" in r.stderr
    assert "SMP: Pairing Request (0x01)" in r.stderr and "Pairing Failed" not in r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [0, 1, 0]})


@pytest.mark.controllers
def test_device_absent_exits_3_within_timeout(world):
    w = world(devices=["CassarTech:pycom"])
    t0 = time.monotonic()
    r = run_attled(["-i", w.transport(), "--name", "NoSuchLamp", "--rgb", "red", "--timeout", "1.5"])
    assert r.returncode == 3, r.stderr
    assert "no device named 'NoSuchLamp'" in r.stderr
    assert time.monotonic() - t0 < 5


def test_connect_to_absent_address_exits_4(world):
    w = world(devices=["CassarTech:pycom"], extra_args=["--spec-controller"])
    t0 = time.monotonic()
    r = run_attled(["-i", w.transport(), "--address", "C0:DE:AD:BE:EF:01", "--rgb", "red", "--connect-timeout", "700", "--trace"])
    assert r.returncode == 4, r.stderr
    assert "could not connect to C0:DE:AD:BE:EF:01" in r.stderr
    assert "LE Create Connection Cancel" in r.stderr
    # This controller ends the cancelled attempt (LE Connection Complete 0x02).
    assert "never ended the attempt" not in r.stderr
    assert time.monotonic() - t0 < 5


def test_connect_cancel_a_stock_controller_never_ends_is_named(world):
    # Stock Bumble acknowledges LE Create Connection Cancel and keeps the
    # attempt pending: the error says so (it may connect later, and refuses
    # other connects until then), same exit code.
    w = world(devices=["CassarTech:pycom"])
    assert not w.ready["spec_controller"]
    r = run_attled(["-i", w.transport(), "--address", "C0:DE:AD:BE:EF:01", "--rgb", "red", "--connect-timeout", "700"])
    assert r.returncode == 4, r.stderr
    assert "could not connect to C0:DE:AD:BE:EF:01 (random) within 700 ms, and the controller acknowledged LE Create Connection Cancel but never ended the attempt" in r.stderr, r.stderr


@pytest.mark.controllers
def test_att_error_is_named(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "send", "--char", "red", "--value", "0102"])
    assert r.returncode == 6, r.stderr
    assert "Write Request on handle 0x" in r.stderr
    assert "Invalid Attribute Value Length (0x0d)" in r.stderr
    w.wait_event({"event": "disconnected", "device": "CassarTech", "reason": 0x13})


@pytest.mark.controllers
def test_json_result(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,2,3", "--json", "--quiet"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["rgb"] == [1, 2, 3] and doc["profile"] == "pycom"
    assert doc["device"]["name"] == "CassarTech"
    assert set(doc["phases_ms"]) >= {"scan", "connect", "discover", "write"}


# Discovery (Find By Type Value, Exchange MTU for pycom's 128-bit declarations,
# Read By Type), the Database Hash read that lets warm runs trust the cache,
# then the writes (pycom: 3 Write Requests; particle: one Read to learn whether its
# characteristics need encryption, which Write Commands would not reveal, then
# Write Commands, not counted).
@pytest.mark.controllers
@pytest.mark.parametrize("profile,limit", [("pycom", 7), ("particle", 5)])
def test_cold_run_round_trips(world, profile, limit):
    w = world(devices=[f"CassarTech:{profile}"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "5,5,5", "--trace"])
    assert r.returncode == 0, r.stderr
    assert att_count(r.stderr) <= limit


# The HCI commands of a one-shot --rgb on a controller attled meets for the
# first time, then on one it has met (its description remembered per
# identity), as PROTOCOL.md lists them. Nothing else: no LE Set Data Length or
# LE Set PHY for three bytes, no description read twice, no scan restarted.
COLD_JOB = ["Reset", "Read Local Version", "Read BD_ADDR", "Read Local Supported Commands",
            "LE Read Local Supported Features", "LE Read Buffer Size", "LE Read Supported States",
            "Set Event Mask", "LE Set Event Mask", "LE Set Scan Parameters", "LE Set Scan Enable",
            "LE Create Connection", "LE Set Scan Enable", "Disconnect"]
DESCRIPTION_READS = {"Read Local Supported Commands", "LE Read Local Supported Features", "LE Read Buffer Size",
                     "LE Read Supported States"}


def test_a_cold_job_sends_only_the_commands_it_needs_as_root_canal_records_them(world, tmp_path):
    """Issue 28: a cold one-shot job's HCI commands, counted from Root Canal's
    own record (its -enable_hci_sniffer pcap, an independent witness) and
    equal to attled's own capture: 14 the first time attled meets the
    controller, 10 once its description is remembered (same state directory,
    same controller address)."""
    from pathlib import Path

    from attledtools.bench.hcipath import analyse_file
    w = world(devices=["CassarTech:pycom:interval=100"], controller="rootcanal", extra_args=["--rootcanal-sniffer"])
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    ours = []
    for i, rgb in enumerate(["1,2,3", "4,5,6"]):
        mark = w.mark()
        cap = tmp_path / f"run{i}.btsnoop"
        r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", rgb, "--btsnoop", str(cap)], env=env)
        assert r.returncode == 0, r.stderr
        w.wait_event({"event": "state", "device": "CassarTech", "rgb": [int(x) for x in rgb.split(",")]}, since=mark)
        w.hosts_gone(mark)  # the next run's controller gets this one's address (and so its identity)
        ours.append(analyse_file(cap))
    # Root Canal's pcaps: one per controller; attled's runs are those that initiated.
    pcaps = sorted(Path(w.ready["rootcanal_dir"]).glob("rootcanal_*.pcap"), key=lambda p: int(p.name.split("_")[1]))
    theirs = [hp for hp in map(analyse_file, pcaps) if any(c.opcode == 0x200D for c in hp.commands)]
    assert len(theirs) == 2, [p.name for p in pcaps]
    warm = [n for n in COLD_JOB if n not in DESCRIPTION_READS]
    for want, mine, rc in zip([COLD_JOB, warm], ours, theirs):
        assert [c.name for c in rc.commands] == want, "\n".join(rc.lines())
        assert [(c.opcode, c.params) for c in rc.commands] == [(c.opcode, c.params) for c in mine.commands]
    print(f"cold job on Root Canal: {theirs[0].sent} commands ({theirs[0].critical} on the critical path), "
          f"then {theirs[1].sent} ({theirs[1].critical})")
