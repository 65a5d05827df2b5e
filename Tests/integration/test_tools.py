"""Tests of the test tools themselves (vworld, the LED peers, bumble_central).

They prove, with Bumble's own host stack as an independent central, that the
virtual world behaves as the integration tests of attled assume: colours get
set over every transport, properties are enforced on the wire, legacy reports
appear when asked for, and the world ends cleanly.  attled is not involved.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from conftest import World, run_bumble_central

from attledtools.peers.profiles import PROFILES

# Expected advertising data of "CassarTech" (pycom): Complete Local Name +
# Complete List of 128-bit UUIDs = 12 + 18 = 30 bytes; Flags (3 more) do not fit.
CASSARTECH_ADV = (
    "0b09" + "CassarTech".encode().hex()
    + "1107" + "31323334353637383930313233343536"
)


def central(w: World, *args: str, host: int = 0) -> tuple[int, dict]:
    """Run the reference central against host ``host``; return (exit code, JSON line)."""
    result = run_bumble_central(["--transport", w.bumble_transport(host), "--timeout", "8", *args], timeout=15)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from bumble_central:\n{result.stdout}\n{result.stderr}"
    return result.returncode, json.loads(lines[-1])


def test_ready_line_describes_the_world(world):
    w = world(devices=["CassarTech:pycom", "Xenon:particle:init=1,2,3", "Harness:harness"], hosts=["tcp", "unix", "pty"])
    assert w.transport(0).startswith("tcp:127.0.0.1:")
    assert w.transport(1).startswith("unix:") and w.transport(1).endswith("h1.sock")
    assert w.transport(2).startswith("serial:") and w.transport(2).endswith("h2-pty")
    assert w.ready["host_addresses"] == ["F0:F1:F2:F3:F4:01", "F0:F1:F2:F3:F4:02", "F0:F1:F2:F3:F4:03"]
    pycom = w.device("CassarTech")
    assert pycom["profile"] == "pycom"
    assert pycom["address"] == "C0:11:22:33:44:55"
    assert pycom["adv_data"] == CASSARTECH_ADV
    assert pycom["handles"] == {"red": 0x10, "green": 0x12, "blue": 0x14}
    assert w.device("Xenon")["rgb"] == [1, 2, 3]
    assert w.device("Xenon")["address"] == "C0:11:22:33:44:56"
    # Short names leave room for Flags (LE General Discoverable, no BR/EDR).
    assert w.device("Xenon")["adv_data"].startswith("020106")
    assert w.device("Harness")["service"] == PROFILES["harness"].service_uuid.lower()
    assert w.stop() == 0
    assert w.find({"event": "exit"})


@pytest.mark.parametrize("profile, ops", [("pycom", ["request"] * 3), ("particle", ["command"] * 3)])
def test_central_sets_colour_over_tcp(world, profile, ops):
    w = world(devices=[f"CassarTech:{profile}"])
    code, out = central(w, "--name", "CassarTech", "--rgb", "255,0,0")
    assert code == 0, out
    assert out["result"] == "ok" and out["profile"] == profile and out["ops"] == ops
    assert out["address"] == "C0:11:22:33:44:55"

    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [255, 0, 0]})
    writes = w.find({"event": "write", "device": "CassarTech"})
    assert [(e["char"], e["value"], e["op"]) for e in writes] == [
        ("red", "ff", ops[0]), ("green", "00", ops[1]), ("blue", "00", ops[2]),
    ]
    assert [e["uuid"] for e in writes] == [c.uuid.lower() for c in PROFILES[profile].chars]
    assert not w.find({"event": "rejected"})
    # The central disconnects (0x13) and the peripheral advertises again.
    w.wait_event({"event": "disconnected", "device": "CassarTech", "reason": 0x13})
    again = w.find({"event": "advertising", "device": "CassarTech"})
    assert len(again) >= 1
    w.wait_event({"event": "advertising", "device": "CassarTech"}, since=w.events.index(again[0]) + 1)


def test_write_request_to_particle_is_refused(world):
    w = world(devices=["Xenon:particle:init=7,7,7"])
    code, out = central(w, "--name", "Xenon", "--rgb", "1,2,3", "--op", "request")
    assert code == 5, out
    assert out["result"] == "error" and out["stage"] == "write"
    assert out["att_error"] == 0x03  # Write Not Permitted, received on the wire
    rejected = w.wait_event({"event": "rejected", "device": "Xenon"})
    assert rejected["char"] == "red" and rejected["op"] == "request"
    assert rejected["error"] == 0x03 and rejected["responded"] is True
    w.wait_event({"event": "disconnected", "device": "Xenon"})
    assert not w.find({"event": "write"})
    assert not w.find({"event": "state"})


def test_write_command_to_pycom_is_dropped(world):
    w = world(devices=["CassarTech:pycom:init=5,6,7"])
    code, out = central(w, "--name", "CassarTech", "--rgb", "1,2,3", "--op", "command")
    assert code == 0, out  # commands get no response, so the central cannot tell
    w.wait_event({"event": "disconnected", "device": "CassarTech"})
    rejected = w.find({"event": "rejected", "device": "CassarTech"})
    assert [(e["char"], e["op"], e["error"], e["responded"]) for e in rejected] == [
        ("red", "command", 3, False), ("green", "command", 3, False), ("blue", "command", 3, False),
    ]
    assert not w.find({"event": "write"})


def test_harness_commands_and_notifications(world):
    w = world(devices=["Harness:harness"])
    code, out = central(w, "--name", "Harness", "--command", "1,3,0,4", "--subscribe")
    assert code == 0, out
    assert out["profile"] == "harness" and out["ops"] == ["request"] * 4
    assert out["notifications"] == ["01", "03", "00", "04"]
    w.wait_event({"event": "state", "device": "Harness", "buttons": [0, 0], "commands": [1, 3, 0, 4]})
    states = w.find({"event": "state", "device": "Harness"})
    assert [s["buttons"] for s in states] == [[1, 0], [1, 1], [0, 1], [0, 0]]
    assert w.find({"event": "subscribed", "char": "button", "notify": True})


@pytest.mark.parametrize("kind", ["unix", "pty"])
def test_central_over_unix_and_pty(world, kind):
    w = world(devices=["CassarTech:pycom"], hosts=[kind])
    code, out = central(w, "--name", "CassarTech", "--rgb", "0,128,255")
    assert code == 0, out
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [0, 128, 255]})


def test_reconnect_after_disconnect(world):
    w = world(devices=["CassarTech:pycom"])
    for rgb in ([1, 1, 1], [2, 2, 2], [3, 3, 3]):
        code, out = central(w, "--name", "CassarTech", "--rgb", ",".join(map(str, rgb)))
        assert code == 0, out
        w.wait_event({"event": "state", "device": "CassarTech", "rgb": rgb})
    assert len(w.find({"event": "connected"})) == 3
    assert len(w.find({"event": "disconnected"})) == 3


def test_legacy_reports(world):
    w = world(devices=["CassarTech:pycom"], legacy=True)
    code, out = central(w, "--name", "CassarTech", "--rgb", "9,9,9")
    assert code == 0, out
    assert out["legacy_report"] is True
    w2 = world(devices=["CassarTech:pycom"])
    code, out = central(w2, "--name", "CassarTech", "--rgb", "9,9,9")
    assert code == 0, out
    assert out["legacy_report"] is False


def test_two_hosts_two_devices(world):
    w = world(devices=["A:pycom", "B:particle"], hosts=["tcp", "tcp"])
    code_a, out_a = central(w, "--name", "A", "--rgb", "10,0,0", host=0)
    code_b, out_b = central(w, "--name", "B", "--rgb", "0,10,0", host=1)
    assert (code_a, code_b) == (0, 0), (out_a, out_b)
    w.wait_event({"event": "state", "device": "A", "rgb": [10, 0, 0]})
    w.wait_event({"event": "state", "device": "B", "rgb": [0, 10, 0]})


def test_second_host_on_one_controller_is_refused(world):
    w = world(devices=[], hosts=["tcp"])
    port = int(w.transport().rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as first:
        w.wait_event({"event": "host_connected", "host": 0})
        with socket.create_connection(("127.0.0.1", port), timeout=5) as second:
            w.wait_event({"event": "host_refused", "host": 0})
            second.settimeout(5)
            assert second.recv(16) == b""  # closed by vworld
        # The first host still owns the controller: HCI_Reset is answered.
        first.settimeout(5)
        first.sendall(bytes.fromhex("01030c00"))
        assert first.recv(16) == bytes.fromhex("040e0401030c00")
    w.wait_event({"event": "host_disconnected", "host": 0})


def test_sigterm_exits_zero(world):
    w = world(devices=["CassarTech:pycom"])
    assert w.stop() == 0


# -----------------------------------------------------------------------------
# Raw ATT checks with Bumble in-process (values the reference central never sends)
# -----------------------------------------------------------------------------
async def _raw_att(transport: str, address: str, pdus: list) -> list:
    """Connect to ``address`` through ``transport`` and send ``pdus``.

    Requests return their response PDU, commands None.  Bounded by the caller.
    """
    from bumble import hci
    from bumble.device import Device
    from bumble.transport import open_transport

    async with await open_transport(transport) as (source, sink):
        device = Device.with_hci("raw", hci.Address("F0:00:00:00:00:02"), source, sink)
        await device.power_on()
        connection = await device.connect(hci.Address(address), own_address_type=hci.OwnAddressType.RANDOM, timeout=5)
        results = []
        for pdu in pdus:
            if pdu.op_code in (0x52, 0xD2):
                await connection.gatt_client.send_command(pdu)
                results.append(None)
            else:
                results.append(await connection.gatt_client.send_request(pdu))
        await connection.disconnect()
        return results


def test_property_and_length_enforcement_on_the_wire(world):
    from bumble import att

    w = world(devices=["CassarTech:pycom", "Harness:harness"])
    pycom, harness = w.device("CassarTech"), w.device("Harness")
    red = pycom["handles"]["red"]
    button = harness["handles"]["button"]

    before = w.mark()
    results = asyncio.run(asyncio.wait_for(_raw_att(w.bumble_transport(), pycom["address"], [
        att.ATT_Write_Request(attribute_handle=red, attribute_value=b"\x01\x02"),  # too long
        att.ATT_Write_Request(attribute_handle=red, attribute_value=b""),  # too short
        att.ATT_Write_Request(attribute_handle=red - 1, attribute_value=b"\x00"),  # declaration
        att.ATT_Write_Command(attribute_handle=red, attribute_value=b"\x09\x09"),  # dropped
        att.ATT_Write_Request(attribute_handle=red, attribute_value=b"\x42"),  # fine
        att.ATT_Read_Request(attribute_handle=red),
    ]), 15))
    errors = [getattr(r, "error_code", None) for r in results]
    assert errors == [0x0D, 0x0D, 0x03, None, None, None]
    assert results[4].op_code == att.Opcode.ATT_WRITE_RESPONSE
    assert results[5].op_code == att.Opcode.ATT_READ_RESPONSE and results[5].attribute_value == b"\x42"
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [0x42, 0, 0]})
    assert len(w.find({"event": "rejected", "device": "CassarTech"})) == 4

    # Advertising again after the first link ended (counted from before it
    # began: "since the last event" raced with whatever the peers logged last).
    w.wait_event({"event": "advertising", "device": "CassarTech"}, since=before)
    results = asyncio.run(asyncio.wait_for(_raw_att(w.bumble_transport(), harness["address"], [
        att.ATT_Write_Request(attribute_handle=button, attribute_value=b"\x01"),  # READ|NOTIFY only
        att.ATT_Read_Request(attribute_handle=button),
    ]), 15))
    assert results[0].error_code == 0x03
    assert results[1].op_code == att.Opcode.ATT_READ_RESPONSE


def test_conn_update_and_security_request_options(world):
    w = world(devices=["CassarTech:pycom:conn_update=1,security_request=1"])
    code, out = central(w, "--name", "CassarTech", "--rgb", "3,2,1")
    assert code == 0, out
    # Bumble's central accepts the L2CAP Connection Parameter Update Request
    # (result 0) and its controller then reports the new parameters.
    w.wait_event({"event": "conn_update", "device": "CassarTech"})
    update = w.wait_event({"event": "conn_update_response", "device": "CassarTech"})
    assert update["accepted"] is True and update["result"] == 0
    # The request went out as an LE signalling PDU, the response came back.
    assert w.find({"event": "l2cap_signal", "device": "CassarTech", "code": 0x13})
    params = w.wait_event({"event": "conn_params", "device": "CassarTech"})
    assert 30.0 <= params["interval_ms"] <= 50.0 and params["timeout_ms"] == 4000.0
    w.wait_event({"event": "security_request", "device": "CassarTech"})
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [3, 2, 1]})


def test_advertising_options(world):
    w = world(devices=[
        "Short:pycom:short=2",
        "NoUuid:particle:uuid=0,addr=D0:00:00:00:00:01",
        "Nameless:harness:name_in=none",
    ])
    assert w.device("Short")["adv_data"] == "020106" + "0308" + b"Sh".hex() + "1107" + "31323334353637383930313233343536"
    assert w.device("NoUuid")["adv_data"] == "020106" + "0709" + b"NoUuid".hex()
    assert w.device("Nameless")["adv_data"].startswith("0201061107")
    code, out = central(w, "--name", "Sh", "--rgb", "1,0,0")
    assert code == 0 and out["profile"] == "pycom", out
    code, out = central(w, "--name", "NoUuid", "--rgb", "1,0,0")
    assert code == 0 and out["profile"] == "particle" and out["address"] == "D0:00:00:00:00:01", out
    code, out = central(w, "--uuid", PROFILES["harness"].service_uuid, "--command", "3")
    assert code == 0 and out["profile"] == "harness", out
    w.wait_event({"event": "state", "device": "Nameless", "buttons": [0, 1]})


def test_harness_periodic_notifications(world):
    """notify_every=MS: while subscribed, the harness notifies its button value."""
    from bumble import att, hci
    from bumble.device import Device, Peer
    from bumble.transport import open_transport

    w = world(devices=["Harness:harness:notify_every=20"])
    info = w.device("Harness")

    async def run() -> list[bytes]:
        received: list[bytes] = []
        async with await open_transport(w.bumble_transport()) as (source, sink):
            device = Device.with_hci("sub", hci.Address("F0:00:00:00:00:03"), source, sink)
            await device.power_on()
            connection = await device.connect(hci.Address(info["address"]), timeout=5)
            peer = Peer(connection)
            await peer.discover_service(info["service"])
            characteristics = await peer.discover_characteristics()
            button = next(c for c in characteristics if c.handle == info["handles"]["button"])
            await peer.subscribe(button, received.append)
            await connection.gatt_client.send_request(
                att.ATT_Write_Request(attribute_handle=info["handles"]["command"], attribute_value=b"\x03")
            )
            # Wait (bounded, in a thread) for three periodic notifications.
            await asyncio.to_thread(w.wait_events, {"event": "notify", "periodic": True}, 3, 5)
            await connection.disconnect()
        return received

    received = asyncio.run(asyncio.wait_for(run(), 20))
    w.wait_event({"event": "subscribed", "device": "Harness", "notify": True})
    assert b"\x03" in received and len(received) >= 3
    periodic = w.find({"event": "notify", "periodic": True})
    assert periodic[-1]["value"] == "03"
    w.wait_event({"event": "disconnected", "device": "Harness"})


def test_stamped_advertisements(world):
    """stamp=1: vworld's air writes each advertising event's sequence number and
    CLOCK_MONOTONIC time into the stamp AD (the proxy bench's latency figure)."""
    import time

    from bumble import hci
    from bumble.device import Device
    from bumble.transport import open_transport

    from attledtools.peers import advstamp

    w = world(devices=["Tick:pycom:uuid=0,stamp=1,interval=20"])
    assert w.device("Tick")["adv_data"] == "020106" + "0509" + b"Tick".hex() + advstamp.placeholder().hex()

    async def scan() -> list[tuple[int, int, int]]:
        heard: list[tuple[int, int, int]] = []
        transport = await open_transport(w.bumble_transport())
        device = Device.with_hci("scanner", hci.Address("F0:00:00:00:00:09"), transport.source, transport.sink)
        device.host.on("advertising_report", lambda r: heard.append((*advstamp.read_stamp(bytes(r.data)), time.monotonic_ns())))
        await device.power_on()
        await device.start_scanning(active=False, filter_duplicates=False)
        await asyncio.sleep(0.5)
        await device.stop_scanning()
        await transport.close()
        return heard

    heard = asyncio.run(asyncio.wait_for(scan(), 10))
    seqs = sorted({seq for seq, _, _ in heard})
    assert len(seqs) >= 10 and seqs == list(range(seqs[0], seqs[-1] + 1)), seqs
    assert all(0 <= rx - ns < 1e9 for _, ns, rx in heard), heard[:5]
