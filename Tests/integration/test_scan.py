"""attled scan and transport errors, against Bumble virtual controllers (issue: foundation)."""

from __future__ import annotations

import json
import re
import time

import pytest

from attledtools.peers.profiles import PROFILES
from conftest import run_attled

PYCOM_SERVICE = PROFILES["pycom"].service_uuid
PARTICLE_SERVICE = PROFILES["particle"].service_uuid


def scan_lines(stdout: str) -> list[str]:
    return [l for l in stdout.splitlines() if l.startswith(("+ ", "~ "))]


@pytest.mark.parametrize("host", ["tcp", "unix", "pty"])
def test_scan_finds_cassartech_with_name_and_uuid(world, host):
    w = world(devices=["CassarTech:pycom"], hosts=[host])
    r = run_attled(["scan", "--transport", w.transport(), "--timeout", "1.5"])
    assert r.returncode == 0, r.stderr
    lines = [l for l in scan_lines(r.stdout) if '"CassarTech"' in l]
    assert lines, r.stdout
    assert w.device("CassarTech")["address"] in lines[0]
    assert PYCOM_SERVICE in lines[0] and "(pycom)" in lines[0]
    # Host-side de-duplication: the device is listed once, not once per report.
    assert len([l for l in scan_lines(r.stdout) if l.startswith("+ ")]) == 1
    assert "scan: 1 device(s)" in r.stderr


def test_scan_with_legacy_reports(world):
    w = world(devices=["CassarTech:pycom"], legacy=True)
    r = run_attled(["scan", "-i", w.transport(), "--timeout", "1.5", "--trace"])
    assert r.returncode == 0, r.stderr
    assert any('"CassarTech"' in l for l in scan_lines(r.stdout)), r.stdout
    # The trace shows the controller really sent legacy reports (subevent 0x02).
    assert "LE Advertising Report (0x02)" in r.stderr
    assert "LE Extended Advertising Report (0x0d)" not in r.stderr


@pytest.mark.controllers
def test_scan_lists_two_devices_and_name_filter(world):
    w = world(devices=["CassarTech:pycom", "Xenon:particle"])
    r = run_attled(["scan", "-i", w.transport(), "--timeout", "1.5"])
    assert r.returncode == 0, r.stderr
    text = "\n".join(scan_lines(r.stdout))
    assert '"CassarTech"' in text and PYCOM_SERVICE in text
    assert '"Xenon"' in text and PARTICLE_SERVICE in text

    r = run_attled(["scan", "-i", w.transport(), "--timeout", "1.5", "--name", "Xenon"])
    assert r.returncode == 0, r.stderr
    lines = scan_lines(r.stdout)
    assert lines and all('"Xenon"' in l for l in lines), r.stdout


@pytest.mark.controllers
def test_scan_service_filter(world):
    w = world(devices=["CassarTech:pycom", "Xenon:particle"])
    r = run_attled(["scan", "-i", w.transport(), "--timeout", "1.5", "--service", PARTICLE_SERVICE])
    assert r.returncode == 0, r.stderr
    lines = scan_lines(r.stdout)
    assert lines and all(PARTICLE_SERVICE in l for l in lines), r.stdout
    assert not any("CassarTech" in l for l in lines)


@pytest.mark.controllers
def test_scan_json_lines(world):
    w = world(devices=["CassarTech:pycom:name_in=shortened,short=6"])
    r = run_attled(["scan", "-i", w.transport(), "--timeout", "1.5", "--json"])
    assert r.returncode == 0, r.stderr
    events = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    dev = [e for e in events if e["address"] == w.device("CassarTech")["address"]]
    assert dev, r.stdout
    assert dev[0]["event"] == "device"
    assert dev[0]["address_type"] == "random"
    assert dev[0]["name"] == "Cassar"  # the shortened name as advertised
    assert PYCOM_SERVICE in dev[0]["services"]
    assert isinstance(dev[0]["rssi"], int) and dev[0]["connectable"] is True


@pytest.mark.controllers
def test_scan_passive(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["scan", "-i", w.transport(), "--timeout", "1", "--passive", "--trace"])
    assert r.returncode == 0, r.stderr
    assert "Type: Passive (0x00)" in r.stderr
    assert any('"CassarTech"' in l for l in scan_lines(r.stdout))


@pytest.mark.controllers
def test_scan_stops_and_disables_scanning_on_timeout(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["scan", "-i", w.transport(), "--timeout", "0.5", "--trace"])
    assert r.returncode == 0
    enables = [l for l in r.stderr.splitlines() if l.strip().startswith("Scanning:")]
    assert enables[0].strip() == "Scanning: Enabled" and enables[-1].strip() == "Scanning: Disabled"


def test_controller_without_public_address_gets_static_random(world):
    """Bumble's stock controllers report BD_ADDR 00:00:00:00:00:00 (see notes)."""
    w = world(devices=["CassarTech:pycom"], extra_args=["--zero-host-address"])
    r = run_attled(["-i", w.transport(), "scan", "--timeout", "0.5", "--trace"])
    assert r.returncode == 0, r.stderr
    assert "Address: 00:00:00:00:00:00" in r.stderr
    line = [l for l in r.stderr.splitlines() if "(static)" in l]
    assert line, r.stderr
    assert re.search(r"own address [0-9A-F:]{17} \(random, ", r.stderr), r.stderr
    assert "Own address type: random" in r.stderr


# ---- transport errors: clear message, distinct exit code, fast ----

def _free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_tcp_port_nobody_serves_fails_fast():
    t0 = time.monotonic()
    r = run_attled(["scan", "-i", f"tcp:127.0.0.1:{_free_port()}", "--timeout", "5"])
    assert r.returncode == 69, r.stderr
    assert "connection refused" in r.stderr
    assert time.monotonic() - t0 < 3


def test_unix_socket_missing():
    r = run_attled(["scan", "-i", "unix:/tmp/attled-no-such.sock"])
    assert r.returncode == 69
    assert "no such device" in r.stderr


def test_serial_device_missing():
    r = run_attled(["scan", "-i", "serial:/dev/ttyNOPE9,115200"])
    assert r.returncode == 69
    assert "/dev/ttyNOPE9" in r.stderr


def test_no_bluetooth_in_this_kernel():
    r = run_attled(["scan", "-i", "hci0"])
    # These machines' kernels have no AF_BLUETOOTH (the VM tests cover a real one).
    assert r.returncode == 69, r.stderr
    assert "no Bluetooth support" in r.stderr and "modprobe bluetooth" in r.stderr


@pytest.mark.parametrize("spec", ["tcp:127.0.0.1", "tcp:127.0.0.1:0", "bogus:x", "serial:", "hciX", "serial:/dev/x,123"])
def test_malformed_transport_spec_is_a_usage_error(spec):
    r = run_attled(["scan", "-i", spec])
    assert r.returncode == 64, r.stderr
    assert "invalid transport" in r.stderr and "usage:" in r.stderr


def test_transport_from_environment(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["scan", "--timeout", "1"], env={"ATTLED_TRANSPORT": w.transport()})
    assert r.returncode == 0, r.stderr
    assert any('"CassarTech"' in l for l in scan_lines(r.stdout))


def test_usage_errors_exit_64():
    for args in (["--rgb", "300,0,0"], ["--bogus"], ["scan", "extra"], ["--red", "2a00"]):
        r = run_attled(args)
        assert r.returncode == 64, (args, r.stderr)
        assert "usage: attled" in r.stderr


def test_help_exits_0():
    r = run_attled(["--help"])
    assert r.returncode == 0 and "Exit codes" in r.stdout
