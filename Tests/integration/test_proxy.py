"""attled proxy: a Home Assistant Bluetooth proxy over ESPHome's native API
(issue 30), judged by the client Home Assistant runs: aioesphomeapi at Home
Assistant 2025.4's pin (Tools/requirements.txt).

Each test starts a virtual world (Bumble's controllers; Root Canal's too
where marked), `attled proxy` on it, listening on a free loopback port, and
drives it with aioesphomeapi's APIClient as Home Assistant's ESPHome
integration and bleak-esphome do: device info, raw advertisements, the
connection slots, v3 connects, the GATT services, reads, writes and
notifications, Noise.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid as uuidlib
from pathlib import Path

import pytest
from aioesphomeapi import APIClient, BluetoothProxyFeature
from aioesphomeapi.core import InvalidEncryptionKeyAPIError, RequiresEncryptionAPIError

from attledtools.peers.profiles import PROFILES
from conftest import Running, run_attled
from helpers import inject

KEY = "3xDn0hHLU2TS5tnC7nO0MdCsbqZkB3ZKQ/mSvD6nWqA="  # 32 bytes, base64, as ESPHome's api: encryption: key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def start_proxy():
    """Starts `attled proxy` on a world's controller, on a free loopback
    port: (the process, its port); every one is killed at the test's end."""
    started: list[Running] = []

    def start(w, *extra: str, home=None, port: int | None = None, mdns: bool = False) -> tuple[Running, int]:
        port = port or free_port()
        p = Running(["proxy", "-i", w.transport(), "--listen", f"127.0.0.1:{port}", *extra, *([] if mdns else ["--no-mdns"])],
                    home=home)
        started.append(p)
        p.wait_line("proxy: listening on", timeout=15)
        return p, port

    yield start
    for p in started:
        p.kill()


def run(coro, timeout: float = 30):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def client(port: int, key: str | None = None) -> APIClient:
    cli = APIClient("127.0.0.1", port, None, noise_psk=key)
    await cli.connect(login=True)
    return cli


async def heard(cli: APIClient, count: int, timeout: float = 10) -> dict[int, tuple]:
    """Raw advertisements until `count` devices were heard with data:
    address -> (rssi, type, every distinct data joined: the advertisement
    and the scan response, as Home Assistant merges them)."""
    seen: dict[int, tuple] = {}
    done = asyncio.Event()

    def on_raw(resp) -> None:
        for a in resp.advertisements:
            old = seen.get(a.address, (0, 0, b""))[2]
            data = bytes(a.data)
            seen[a.address] = (a.rssi, a.address_type, old if data in old else old + data)
        if sum(1 for v in seen.values() if v[2]) >= count:
            done.set()

    unsub = cli.subscribe_bluetooth_le_raw_advertisements(on_raw)
    await asyncio.wait_for(done.wait(), timeout)
    unsub()
    return seen


def api_address(text: str) -> int:
    return int(text.replace(":", ""), 16)


async def connect(cli: APIClient, address: int, address_type: int, cache: bool = False) -> tuple:
    info = await cli.device_info()
    state = asyncio.get_running_loop().create_future()

    def on_state(connected: bool, mtu: int, error: int) -> None:
        if not state.done():
            state.set_result((connected, mtu, error))

    await cli.bluetooth_device_connect(address, on_state, timeout=15, feature_flags=info.bluetooth_proxy_feature_flags,
                                       has_cache=cache, address_type=address_type)
    return await asyncio.wait_for(state, 15)


async def characteristic(cli: APIClient, address: int, char_uuid: str):
    services = await cli.bluetooth_gatt_get_services(address)
    for s in services.services:
        for c in s.characteristics:
            if uuidlib.UUID(c.uuid) == uuidlib.UUID(char_uuid):
                return c
    raise AssertionError(f"{char_uuid} not among {[c.uuid for s in services.services for c in s.characteristics]}")


def test_device_info_and_flags_and_the_same_mac_after_a_restart(world, start_proxy):
    w = world(devices=["Lamp1:pycom"])
    p, port = start_proxy(w)

    async def info():
        cli = await client(port)
        i = await cli.device_info()
        v = cli.api_version
        await cli.disconnect()
        return i, v

    i, v = run(info())
    home = p.home
    assert p.stop(timeout=10) == 0, p.stderr
    flags = BluetoothProxyFeature(i.bluetooth_proxy_feature_flags)
    for f in (BluetoothProxyFeature.PASSIVE_SCAN, BluetoothProxyFeature.ACTIVE_CONNECTIONS, BluetoothProxyFeature.REMOTE_CACHING,
              BluetoothProxyFeature.RAW_ADVERTISEMENTS):
        assert f in flags, flags
    assert (v.major, v.minor) == (1, 10)
    assert i.name == "attled-proxy" and i.esphome_version >= "2025.4"
    assert i.mac_address and i.mac_address == i.bluetooth_mac_address
    # Restarted on the same state directory: the same node for Home Assistant.
    p2, _ = start_proxy(w, home=home, port=port)
    i2, _ = run(info())
    assert p2.stop() == 0
    assert i2.mac_address == i.mac_address


@pytest.mark.controllers
def test_advertisements_of_the_three_boards(world, start_proxy):
    w = world(devices=["PyLamp:pycom", "PaLamp:particle", "Harn:harness"])
    _, port = start_proxy(w)

    async def go():
        cli = await client(port)
        seen = await heard(cli, 3)
        await cli.disconnect()
        return seen

    seen = run(go())
    for name, board in (("PyLamp", "pycom"), ("PaLamp", "particle"), ("Harn", "harness")):
        a = api_address(w.device(name)["address"])
        assert a in seen, (name, seen)
        rssi, _, data = seen[a]
        assert -127 < rssi < 20
        assert name.encode() in data, data.hex()
        assert uuidlib.UUID(PROFILES[board].service_uuid).bytes[::-1] in data, data.hex()


@pytest.mark.controllers
@pytest.mark.parametrize("cache", [False, True], ids=["without-cache", "with-cache"])
def test_connect_discover_write_the_colour_and_read_it_back(world, start_proxy, cache):
    w = world(devices=["Lamp1:pycom"])
    _, port = start_proxy(w)
    red = PROFILES["pycom"].char("red").uuid

    async def go():
        cli = await client(port)
        seen = await heard(cli, 1)
        a = api_address(w.device("Lamp1")["address"])
        connected, mtu, error = await connect(cli, a, seen[a][1], cache)
        assert connected and error == 0 and mtu >= 23
        c = await characteristic(cli, a, red)
        await cli.bluetooth_gatt_write(a, c.handle, b"\x2a", True)
        value = await cli.bluetooth_gatt_read(a, c.handle)
        with pytest.raises(Exception, match="error=1"):
            await cli.bluetooth_gatt_read(a, 0xFFF0)  # Invalid Handle, as the ATT error code
        await cli.bluetooth_device_disconnect(a)
        await cli.disconnect()
        return value

    assert run(go()) == b"\x2a"
    w.wait_event({"event": "write", "device": "Lamp1", "char": "red", "value": "2a"})


@pytest.mark.controllers
def test_harness_notifications_with_the_cccd_written_by_the_client(world, start_proxy):
    w = world(devices=["Harn:harness:notify_every=50"])
    _, port = start_proxy(w)
    button = PROFILES["harness"].char("button").uuid

    async def go():
        cli = await client(port)
        seen = await heard(cli, 1)
        a = api_address(w.device("Harn")["address"])
        assert (await connect(cli, a, seen[a][1]))[0]
        c = await characteristic(cli, a, button)
        cccd = next(d for d in c.descriptors if uuidlib.UUID(d.uuid) == uuidlib.UUID("00002902-0000-1000-8000-00805f9b34fb"))
        values: list[bytes] = []
        three = asyncio.Event()

        def on_notify(handle: int, data: bytearray) -> None:
            values.append(bytes(data))
            if len(values) >= 3:
                three.set()

        await cli.bluetooth_gatt_start_notify(a, c.handle, on_notify)
        # Remote caching: the client writes the CCCD itself, as bleak-esphome does.
        await cli.bluetooth_gatt_write_descriptor(a, cccd.handle, b"\x01\x00")
        await asyncio.wait_for(three.wait(), 10)
        await cli.disconnect()
        return values

    values = run(go())
    assert len(values) >= 3 and all(values)
    w.wait_event({"event": "subscribed", "device": "Harn"})


@pytest.mark.controllers
def test_two_links_at_once_count_the_slots_down_and_back_up(world, start_proxy):
    w = world(devices=["Lamp1:pycom", "Lamp2:particle"])
    _, port = start_proxy(w, "--max-connections", "2")

    async def go():
        cli = await client(port)
        free: list[tuple[int, int]] = []
        changed = asyncio.Event()

        def on_free(f: int, limit: int, allocated=None) -> None:
            free.append((f, limit))
            changed.set()

        cli.subscribe_bluetooth_connections_free(on_free)
        seen = await heard(cli, 2)
        a1, a2 = (api_address(w.device(n)["address"]) for n in ("Lamp1", "Lamp2"))
        ok = await asyncio.gather(connect(cli, a1, seen[a1][1]), connect(cli, a2, seen[a2][1]))
        assert all(c for c, _, _ in ok), ok
        low = free[-1]
        # A third is refused at once: no slot left.
        third = await connect(cli, 0xC0FFEE000001, 1)
        await cli.bluetooth_device_disconnect(a1)
        await cli.bluetooth_device_disconnect(a2)
        deadline = time.monotonic() + 5
        while free[-1][0] != 2 and time.monotonic() < deadline:
            changed.clear()
            await asyncio.wait_for(changed.wait(), 5)
        await cli.disconnect()
        return free, low, third

    free, low, third = run(go())
    assert free[0] == (2, 2), free
    assert low == (0, 2), free
    assert third[0] is False and third[2] == 0x09, third  # Connection Limit Exceeded
    assert free[-1] == (2, 2), free


def test_noise_right_key_wrong_key_and_a_plaintext_client(world, start_proxy, tmp_path):
    w = world(devices=["Lamp1:pycom"])
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY + "\n")
    keyfile.chmod(0o600)
    p, port = start_proxy(w, "--api-key-file", str(keyfile))

    async def attempt(key):
        try:
            cli = await client(port, key)
        except Exception as e:  # noqa: BLE001 - the error type is the result
            return e
        info = await cli.device_info()
        await cli.disconnect()
        return info

    info = run(attempt(KEY))
    assert info.name == "attled-proxy", info
    start = time.monotonic()
    assert isinstance(run(attempt("A" * 43 + "=")), InvalidEncryptionKeyAPIError)
    assert isinstance(run(attempt(None)), RequiresEncryptionAPIError)
    assert time.monotonic() - start < 10, "failures are answered, not timed out"
    p.wait_line("handshake MAC failure")
    p.wait_line("bad indicator byte")


@pytest.mark.controllers
def test_the_api_client_killed_drops_its_links_within_a_second(world, start_proxy, tmp_path):
    w = world(devices=["Lamp1:pycom"])
    _, port = start_proxy(w)
    script = tmp_path / "hold.py"
    script.write_text(f"""
import asyncio
from aioesphomeapi import APIClient
async def main():
    cli = APIClient("127.0.0.1", {port}, None)
    await cli.connect(login=True)
    info = await cli.device_info()
    addr = {api_address(w.device("Lamp1")["address"])}
    up = asyncio.get_running_loop().create_future()
    await cli.bluetooth_device_connect(addr, lambda c, m, e: up.done() or up.set_result(c), timeout=15,
                                       feature_flags=info.bluetooth_proxy_feature_flags, has_cache=False, address_type=1)
    print("connected", await up, flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
""")
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "connected True"
        w.wait_event({"event": "connected", "device": "Lamp1"})
        mark = w.mark()
        killed = time.monotonic()
        holder.send_signal(signal.SIGKILL)
        ev = w.wait_event({"event": "disconnected", "device": "Lamp1"}, since=mark, timeout=5)
        elapsed = time.monotonic() - killed
        print(f"links dropped {elapsed * 1000:.0f} ms after the kill")
        assert elapsed < 1.0, ev
    finally:
        holder.kill()
        holder.wait()


def test_plaintext_beyond_loopback_and_a_readable_key_are_refused(tmp_path):
    r = run_attled(["proxy", "-i", "tcp:127.0.0.1:1", "--listen", "0.0.0.0:6053"])
    assert r.returncode == 64 and "--api-key-file" in r.stderr and "--allow-plaintext" in r.stderr, r.stderr
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY)
    keyfile.chmod(0o644)
    r = run_attled(["proxy", "-i", "tcp:127.0.0.1:1", "--api-key-file", str(keyfile)])
    assert r.returncode == 64 and "chmod 600" in r.stderr, r.stderr
    keyfile.chmod(0o600)
    keyfile.write_text("not base64 at all")
    r = run_attled(["proxy", "-i", "tcp:127.0.0.1:1", "--api-key-file", str(keyfile)])
    assert r.returncode == 64 and "head -c 32 /dev/urandom | base64" in r.stderr, r.stderr


NEWEST_PY = Path(__file__).resolve().parents[2] / ".venv-esphome-newest" / "bin" / "python"
CLIENT_JOB = Path(__file__).resolve().parents[2] / "Tools" / "attledtools" / "drivers" / "esphome_client.py"


@pytest.mark.parametrize("client_python", ["pinned", "newest"])
def test_a_client_job_with_home_assistants_pin_and_with_the_newest_client(world, start_proxy, tmp_path, client_python):
    """The same job (connect, discover, write, read back) from aioesphomeapi
    29.9.0 (Home Assistant 2025.4's pin) and from the newest (46.x, its own
    venv, made by `make test-deps`), over Noise."""
    if client_python == "newest":
        assert NEWEST_PY.exists(), f"{NEWEST_PY} is missing: make test-deps makes it"
    python = str(NEWEST_PY) if client_python == "newest" else sys.executable
    w = world(devices=["Lamp1:pycom"])
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY)
    keyfile.chmod(0o600)
    _, port = start_proxy(w, "--api-key-file", str(keyfile))
    r = subprocess.run([python, str(CLIENT_JOB), "--port", str(port), "--key", KEY, "--address", w.device("Lamp1")["address"],
                        "--char", PROFILES["pycom"].char("green").uuid, "--write", "5a", "--scanner-mode"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["connected"] and out["read"] == "5a", out
    if client_python == "newest":
        assert out["api_version"] == "1.10"
        # Scanner state (126) on subscribe, running and active; passive after its SetMode (127).
        assert out["scanner_states"][0] == [2, 1] and out["scanner_states"][-1] == [2, 0], out
    w.wait_event({"event": "write", "device": "Lamp1", "char": "green", "value": "5a"})


@pytest.mark.controllers
def test_pairing_with_a_secure_board_then_unpair(world, start_proxy):
    """Just Works through attled's SMP, judged by Bumble's: the write refused
    for want of encryption, the client pairs, the write goes through; unpair
    removes the bond and drops the link."""
    w = world(devices=["Sec:pycom:secure=enc"])
    p, port = start_proxy(w)
    red = PROFILES["pycom"].char("red").uuid

    async def go():
        cli = await client(port)
        seen = await heard(cli, 1)
        a = api_address(w.device("Sec")["address"])
        assert (await connect(cli, a, seen[a][1]))[0]
        c = await characteristic(cli, a, red)
        refused = None
        try:
            await cli.bluetooth_gatt_write(a, c.handle, b"\x11", True)
        except Exception as e:  # noqa: BLE001 - the refusal is the point
            refused = str(e)
        paired = await cli.bluetooth_device_pair(a)
        await cli.bluetooth_gatt_write(a, c.handle, b"\x22", True)
        unpaired = await cli.bluetooth_device_unpair(a)
        await cli.disconnect()
        return refused, paired, unpaired

    refused, paired, unpaired = run(go(), timeout=60)
    assert refused is not None and ("error=15" in refused or "error=5" in refused), refused
    assert paired.paired and paired.error == 0, paired
    ev = w.wait_event({"event": "pairing", "device": "Sec"})
    assert ev["result"] == "complete" and ev["bonded"] is True, ev
    w.wait_event({"event": "write", "device": "Sec", "char": "red", "value": "22"})
    assert unpaired.success, unpaired
    p.wait_line("(bond removed)")
    w.wait_event({"event": "disconnected", "device": "Sec"})


def test_trace_shows_each_api_message_beside_the_att_it_causes(world, start_proxy):
    w = world(devices=["Lamp1:pycom"])
    p, port = start_proxy(w, "--trace")
    r = subprocess.run([sys.executable, str(CLIENT_JOB), "--port", str(port), "--address", w.device("Lamp1")["address"],
                        "--char", PROFILES["pycom"].char("blue").uuid, "--write", "33"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = p.stderr.splitlines()
    api = next(i for i, line in enumerate(lines) if ">> BluetoothGATTWriteRequest (75)" in line and "response=true, data=33" in line)
    att = next(i for i, line in enumerate(lines) if i > api and "Write Request" in line)
    done = next(i for i, line in enumerate(lines) if i > att and "<< BluetoothGATTWriteResponse (83)" in line)
    assert api < att < done


@pytest.fixture(scope="module")
def avahi():
    """avahi-daemon on the system bus: the running one, else one started here
    (with a system dbus-daemon if there is none), stopped at the end."""
    started: list[int] = []
    bus_started = False
    if subprocess.run(["avahi-daemon", "--check"], capture_output=True).returncode != 0:
        if not bus_alive():
            for stale in ("/run/dbus/system_bus_socket", "/run/dbus/pid"):
                Path(stale).unlink(missing_ok=True)
            Path("/run/dbus").mkdir(parents=True, exist_ok=True)
            r = subprocess.run(["dbus-daemon", "--system", "--fork", "--print-pid"], capture_output=True, text=True, timeout=10)
            assert r.returncode == 0, r.stderr
            started.append(int(r.stdout.split()[0]))
            bus_started = True
        r = subprocess.run(["avahi-daemon", "--daemonize", "--no-drop-root", "--no-chroot"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 10
        while subprocess.run(["avahi-daemon", "--check"], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "avahi-daemon did not start"
            time.sleep(0.1)
        started.append(int(Path("/run/avahi-daemon/pid").read_text().split()[0]))
    yield
    for pid in reversed(started):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if bus_started:
        for stale in ("/run/dbus/system_bus_socket", "/run/dbus/pid"):
            Path(stale).unlink(missing_ok=True)


def bus_alive() -> bool:
    """A system dbus-daemon answers on its socket."""
    if not Path("/run/dbus/system_bus_socket").exists():
        return False
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect("/run/dbus/system_bus_socket")
            return True
        except OSError:
            return False


def browse(name: str, timeout: float = 10) -> dict:
    """The _esphomelib._tcp service `name` as python-zeroconf (what Home
    Assistant uses) resolves it: port and TXT records."""
    from zeroconf import ServiceBrowser, Zeroconf

    found: dict = {}
    zc = Zeroconf()

    class Listener:
        def add_service(self, z, kind, full):
            if full.split(".")[0] == name:
                info = z.get_service_info(kind, full, 3000)
                if info:
                    found.update(port=info.port, txt={k.decode(): (v or b"").decode() for k, v in info.properties.items()})

        def update_service(self, *args):
            pass

        def remove_service(self, *args):
            pass

    ServiceBrowser(zc, "_esphomelib._tcp.local.", Listener())
    deadline = time.monotonic() + timeout
    while not found and time.monotonic() < deadline:
        time.sleep(0.1)
    zc.close()
    return found


def test_found_over_mdns_as_home_assistant_finds_esphome_nodes(world, start_proxy, avahi, tmp_path):
    w = world(devices=["Lamp1:pycom"])
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY)
    keyfile.chmod(0o600)
    p, port = start_proxy(w, "--name", "Hall", "--api-key-file", str(keyfile), mdns=True)
    p.wait_line("announced over mDNS as hall._esphomelib._tcp.local")
    svc = browse("hall")
    assert svc and svc["port"] == port, svc
    async def mac():
        cli = await client(port, KEY)
        info = await cli.device_info()
        await cli.disconnect()
        return info.mac_address
    assert svc["txt"]["mac"] == run(mac()).replace(":", "").lower()
    assert svc["txt"]["friendly_name"] == "Hall" and svc["txt"]["version"] >= "2025.4"
    assert svc["txt"]["api_encryption"] == "Noise_NNpsk0_25519_ChaChaPoly_SHA256"


def test_without_avahi_the_log_says_to_add_it_by_host_and_port(world, monkeypatch):
    """No system bus to reach avahi-daemon through: the proxy runs, and says
    how Home Assistant adds it instead."""
    w = world(devices=["Lamp1:pycom"])
    port = free_port()
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/attled-test-bus")
    p = Running(["proxy", "-i", w.transport(), "--listen", f"127.0.0.1:{port}"])
    try:
        line = p.wait_line("not announced over mDNS", timeout=15)
        assert "cannot reach avahi-daemon" in line and f"add it in Home Assistant by host and port {port}" in line, line
        p.wait_line("proxy: listening on", timeout=15)
    finally:
        p.kill()


@pytest.mark.parametrize("garbage", [
    b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",   # a varint longer than 10 bytes
    b"\x00\xc1\xb8\x02\x01" + b"\x00" * 64,               # a frame of 40001 bytes, over the 32768 limit
    b"\x00\x04\x01\x0a\x05ab",                            # HelloRequest whose client_info says 5 bytes and has 2
    b"\x01\x00\x00",                                      # a Noise frame to a plaintext proxy
], ids=["long-varint", "oversized", "bad-protobuf", "noise-to-plaintext"])
def test_a_bad_frame_closes_that_client_and_nothing_else(world, start_proxy, garbage):
    w = world(devices=["Lamp1:pycom"])
    p, port = start_proxy(w)

    async def good():
        cli = await client(port)
        info = await cli.device_info()
        await cli.disconnect()
        return info.name

    assert run(good()) == "attled-proxy"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(garbage)
        s.settimeout(5)
        rest = b""
        while True:
            chunk = s.recv(4096)  # the proxy closes the connection: b"" within the timeout
            if not chunk:
                break
            rest += chunk
    if garbage.startswith(b"\x01"):
        assert rest.startswith(b"\x00") and b"Bad indicator byte" in rest, rest
    assert run(good()) == "attled-proxy"
    assert p.p.poll() is None, "the proxy is still running"


def test_message_vectors_are_what_the_pinned_aioesphomeapi_writes():
    """The unit tests' byte vectors (ESPHomeAPIMessageVectors.swift) are regenerated
    from the pinned aioesphomeapi's api_pb2 and compared with the committed file, so a
    new pin or a message added to the generator's list cannot leave them stale."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "attledtools.vectors.esphome_messages"],
                         cwd=root / "Tools", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    committed = (root / "Tests/BLEStackTests/ESPHomeAPIMessageVectors.swift").read_text()
    assert out.stdout.count("\n        (") >= 40, "the generator wrote fewer messages than attled declares"
    assert out.stdout == committed, (
        "Tests/BLEStackTests/ESPHomeAPIMessageVectors.swift is stale: regenerate it with "
        "`cd Tools && python -m attledtools.vectors.esphome_messages > ../Tests/BLEStackTests/ESPHomeAPIMessageVectors.swift`")


BLEAK_JOB = Path(__file__).resolve().parents[2] / "Tools" / "attledtools" / "drivers" / "bleak_through_proxy.py"


@pytest.mark.controllers
def test_a_plain_bleak_client_through_bleak_esphome_and_habluetooth(world, start_proxy, tmp_path):
    """bleak through the proxy as Home Assistant 2025.4 wires it (bleak-esphome
    2.12.0's connect_scanner registered with habluetooth 3.37.0's manager, bleak
    0.22.3; Tools/requirements.txt), over Noise: a plain BleakScanner finds
    Lamp1 by its name, a plain BleakClient connects, writes the red channel
    with a response and reads it back; then a second round connects as Home
    Assistant's integrations do, through bleak-retry-connector with the
    services cache: a v3 connect with cache, no service discovery."""
    w = world(devices=["Lamp1:pycom"])
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY)
    keyfile.chmod(0o600)
    p, port = start_proxy(w, "--api-key-file", str(keyfile), "--trace")
    red = PROFILES["pycom"].char("red").uuid
    r = subprocess.run([sys.executable, str(BLEAK_JOB), "--port", str(port), "--key", KEY, "--name", "Lamp1",
                        "--char", red, "--write", "2a", "2b", "--debug"], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr[-20000:] + p.stderr[-5000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["read"] == "2a", out
    assert out["address"] == w.device("Lamp1")["address"].upper() and out["name"] == "Lamp1", out
    assert out["connectable"] and out["source"] == out["proxy"]["bluetooth_mac"], out
    first, second = out["rounds"]
    assert first["how"] == "BleakClient" and second["how"] == "establish_connection", out
    for rnd, value in ((first, "2a"), (second, "2b")):
        assert rnd["connected"] and rnd["read"] == value and rnd["disconnected"] and rnd["disconnected_callback"], out
        assert uuidlib.UUID(PROFILES["pycom"].service_uuid) in {uuidlib.UUID(s) for s in rnd["services"]}, out
        assert "write" in rnd["properties"] and "read" in rnd["properties"], out
    w.wait_event({"event": "write", "device": "Lamp1", "char": "red", "value": "2a"})
    w.wait_event({"event": "write", "device": "Lamp1", "char": "red", "value": "2b"})
    w.wait_events({"event": "disconnected", "device": "Lamp1"}, 2)
    # What bleak-esphome asked of the proxy (--trace): a v3 connect without cache (5), a
    # disconnect (1), a v3 connect with cache (4), a disconnect; the services only once.
    trace = [line for line in p.stderr.splitlines() if ">> Bluetooth" in line]
    requests = [int(m.group(1)) for line in trace if "BluetoothDeviceRequest (68)" in line
                for m in [re.search(r"request_type=(\d+)", line)] if m]
    assert requests == [5, 1, 4, 1], trace
    assert sum("BluetoothGATTGetServicesRequest" in line for line in trace) == 1, trace


def test_a_lost_controller_is_said_reopened_and_the_client_told_its_link_dropped(world, start_proxy):
    """The controller's transport closes (a replugged dongle; vworld closes the host
    socket and resets its controller): the proxy says so, tells the API client its
    link went down, opens the controller again, and the client connects again."""
    w = world(devices=["Lamp1:pycom"], extra_args=["--stdin-commands", "--reset-on-host-close"])
    p, port = start_proxy(w)
    address = api_address(w.device("Lamp1")["address"])

    async def session():
        cli = await client(port)
        info = await cli.device_info()
        states: asyncio.Queue = asyncio.Queue()
        await cli.bluetooth_device_connect(address, lambda c, m, e: states.put_nowait((c, e)), timeout=15,
                                           feature_flags=info.bluetooth_proxy_feature_flags, has_cache=False, address_type=1)
        assert await asyncio.wait_for(states.get(), 15) == (True, 0)
        lines = p.mark()
        inject(w, "close")
        connected, error = await asyncio.wait_for(states.get(), 10)
        assert not connected and error != 0, (connected, error)
        await asyncio.to_thread(p.wait_line, "the controller closed the connection", since=lines, timeout=10)
        await asyncio.to_thread(p.wait_line, "initialised again", since=lines, timeout=15)
        again = await connect(cli, address, 1)
        assert again[0] and again[2] == 0, again
        await cli.disconnect()

    run(session(), timeout=60)
