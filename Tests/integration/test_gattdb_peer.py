"""The seeded random GATT database peer (attledtools.peers.gattdb, issue 14) is right,
judged by Bumble's own GATT client.

attled's general GATT tool is tested against this peer with the database it
reports as the ground truth, so the peer itself must be proven first: a
Bumble central (bumble.device + bumble.gatt_client, in this process) on a
second virtual controller of the same world discovers the database and reads
and writes it, and everything must equal the ``gatt_database`` event handle
for handle.  No attled binary is needed.

Two limits of Bumble's client (0.0.236) are worked around here, with
Bumble's own ATT requests:

* ``Client.discover_included_services`` decodes the UUID from the include
  declaration's value and fails on a 128-bit included service, whose
  declaration carries no UUID (Core Vol 3 Part G 3.2).  Find Included
  Services is done here as the spec's procedure (4.5.1) says: ``Read By Type
  0x2802``, then a ``Read Request`` of the included service's declaration for
  its 128-bit UUID.
* ``Client.discover_services`` stops once the next start handle would be
  0xFFFF, so it misses a primary service declared at 0xFFFF (seed 2 with
  last_ffff=1 ends with an empty service there); the one missing Read By
  Group Type Request (0xFFFF-0xFFFF) is sent here.
"""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess

import pytest

from bumble import att, hci
from bumble.core import UUID
from bumble.device import Device
from bumble.gatt import GATT_INCLUDE_ATTRIBUTE_TYPE, GATT_PRIMARY_SERVICE_ATTRIBUTE_TYPE
from bumble.gatt_client import ServiceProxy
from bumble.transport import open_transport

from attledtools import module_command
from attledtools.peers import gattdb
from helpers import GATTDB_NAME as NAME
from helpers import chars_of, start_peer

PEER = "C0:11:22:33:44:55"  # attledtools.peers.options.default_address(0)
DEADLINE_S = 20.0
ATT_READ_NOT_PERMITTED = att.ATT_READ_NOT_PERMITTED_ERROR
ATT_WRITE_NOT_PERMITTED = att.ATT_WRITE_NOT_PERMITTED_ERROR


# -----------------------------------------------------------------------------
# Helpers
# -----------------------------------------------------------------------------
def uuid_text(uuid: UUID) -> str:
    return gattdb.uuid_text(uuid)


def strip_values(db: dict) -> list[dict]:
    """The discovery part of a database: no values, no writable flags."""
    out = []
    for s in db["services"]:
        out.append({
            "uuid": s["uuid"], "start": s["start"], "end": s["end"], "primary": s["primary"],
            "includes": [{k: i[k] for k in ("handle", "uuid", "start", "end")} for i in s["includes"]],
            "characteristics": [
                {"uuid": c["uuid"], "declaration_handle": c["declaration_handle"], "value_handle": c["value_handle"],
                 "properties": c["properties"],
                 "descriptors": [{"uuid": d["uuid"], "handle": d["handle"]} for d in c["descriptors"]]}
                for c in s["characteristics"]],
        })
    return out


def ours(db: dict):
    """Characteristics of the generated services (not Bumble's GAP/GATT)."""
    return [c for s, c in chars_of(db) if s["uuid"] not in ("1800", "1801")]


class Central:
    """A Bumble central on host controller 0 of the world, connected to the peer."""

    def __init__(self, transport_spec: str):
        self.spec = transport_spec
        self.uuids_read = 0  # included services whose 128-bit UUID needed a Read Request

    async def __aenter__(self):
        self.transport = await open_transport(self.spec)
        self.device = Device.with_hci("central", hci.Address("F0:00:00:00:00:02"),
                                      self.transport.source, self.transport.sink)
        await self.device.power_on()
        self.connection = await self.device.connect(
            hci.Address(PEER, hci.Address.RANDOM_DEVICE_ADDRESS),
            own_address_type=hci.OwnAddressType.RANDOM, timeout=5)
        self.client = self.connection.gatt_client
        await self.client.request_mtu(517)
        return self

    async def __aexit__(self, *exc):
        try:
            await asyncio.wait_for(self.connection.disconnect(), 2)
        except Exception:  # noqa: BLE001 - already gone
            pass
        await asyncio.wait_for(self.transport.close(), 2)

    # -- discovery, Bumble's procedures ----------------------------------------------
    async def find_included(self, service: ServiceProxy) -> list[dict]:
        """Find Included Services (Vol 3 Part G 4.5.1) on Bumble's ATT client."""
        found = []
        start = service.handle
        while start <= service.end_group_handle:
            response = await self.client.send_request(att.ATT_Read_By_Type_Request(
                starting_handle=start, ending_handle=service.end_group_handle,
                attribute_type=GATT_INCLUDE_ATTRIBUTE_TYPE))
            if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
                assert response.error_code == att.ATT_ATTRIBUTE_NOT_FOUND_ERROR, response
                break
            for handle, value in response.attributes:
                first, last = struct.unpack_from("<HH", value)
                if len(value) == 6:
                    uuid = UUID.from_bytes(value[4:])
                else:
                    assert len(value) == 4, value.hex()  # a 128-bit UUID: read the declaration
                    uuid = UUID.from_bytes(await self.client.read_value(first))
                    self.uuids_read += 1
                    assert len(uuid.to_pdu_bytes()) == 16
                found.append({"handle": handle, "uuid": uuid_text(uuid), "start": first, "end": last})
            start = response.attributes[-1][0] + 1
        return found

    async def service_at_ffff(self) -> list[ServiceProxy]:
        """The request Bumble's discover_services leaves out: it loops while
        the next start handle is < 0xFFFF, so a primary service declared at
        0xFFFF (an empty one, the last attribute) is never asked for."""
        response = await self.client.send_request(att.ATT_Read_By_Group_Type_Request(
            starting_handle=0xFFFF, ending_handle=0xFFFF, attribute_group_type=GATT_PRIMARY_SERVICE_ATTRIBUTE_TYPE))
        if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
            assert response.error_code == att.ATT_ATTRIBUTE_NOT_FOUND_ERROR, response
            return []
        return [ServiceProxy(self.client, handle, end, UUID.from_bytes(value), True)
                for handle, end, value in response.attributes]

    async def discover(self) -> list[dict]:
        """The whole database, as Bumble's GATT client discovers it."""
        primaries = await self.client.discover_services()
        if primaries and primaries[-1].end_group_handle == 0xFFFE:
            primaries += await self.service_at_ffff()
        secondaries: dict[int, ServiceProxy] = {}
        includes: dict[int, list[dict]] = {}
        for service in primaries:
            includes[service.handle] = await self.find_included(service)
            for inc in includes[service.handle]:
                secondaries.setdefault(inc["start"], ServiceProxy(
                    self.client, inc["start"], inc["end"], UUID(inc["uuid"]), primary=False))
        for service in secondaries.values():
            includes[service.handle] = await self.find_included(service)
        out = []
        for service in sorted([*primaries, *secondaries.values()], key=lambda s: s.handle):
            chars = await self.client.discover_characteristics([], service)
            jc = []
            for i, ch in enumerate(chars):
                descriptors = await self.client.discover_descriptors(ch)
                # Bumble's proxy knows the value handle; the declaration is the
                # attribute before it: read it and check what it declares.
                declaration = await self.client.read_value(ch.handle - 1)
                props, value_handle = struct.unpack_from("<BH", declaration)
                assert (props, value_handle, UUID.from_bytes(declaration[3:])) == (ch.properties, ch.handle, ch.uuid)
                if i:
                    assert chars[i - 1].end_group_handle == ch.handle - 2  # ends just before this declaration
                jc.append({"uuid": uuid_text(ch.uuid), "declaration_handle": ch.handle - 1, "value_handle": ch.handle,
                           "properties": gattdb.props_names(int(ch.properties)),
                           "descriptors": [{"uuid": uuid_text(d.type), "handle": d.handle} for d in descriptors]})
            out.append({"uuid": uuid_text(service.uuid), "start": service.handle, "end": service.end_group_handle,
                        "primary": service in primaries, "includes": includes[service.handle],
                        "characteristics": jc})
        return out

    async def att_error(self, coro) -> int | None:
        try:
            await coro
        except att.ATT_Error as error:
            return error.error_code
        return None


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE_S))


def dump(seed: int, *extra: str) -> dict:
    r = subprocess.run(module_command("attledtools.peers.gattdb", "--seed", str(seed), "--dump", "--name", NAME, *extra),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# -----------------------------------------------------------------------------
# The database itself (no world)
# -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(1, 21))
def test_database_shape(seed):
    db = run(gattdb.dump(seed, NAME, False))
    services = [s for s in db["services"] if s["uuid"] not in ("1800", "1801")]
    primaries = [s for s in services if s["primary"]]
    secondaries = [s for s in services if not s["primary"]]
    assert 3 <= len(primaries) <= 6
    assert {len(s["uuid"]) for s in primaries} == {4, 36}  # 16- and 128-bit mixed
    assert any(not s["characteristics"] and not s["includes"] for s in primaries)  # an empty service
    assert secondaries and any(len(s["uuid"]) == 36 for s in secondaries)
    included = {i["start"] for s in services for i in s["includes"]}
    assert included == {s["start"] for s in secondaries}  # every secondary is included
    assert any({len(i["uuid"]) for i in s["includes"]} == {4, 36} for s in primaries)  # mixed includes
    # Groups never overlap, and each attribute belongs to its service.
    spans = sorted((s["start"], s["end"]) for s in db["services"])
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    chars = ours(db)
    combos = {tuple(c["properties"]) for c in chars}
    assert len(combos) == 31
    uuids = [c["uuid"] for c in chars]
    assert len(set(uuids)) < len(uuids)  # one UUID used twice
    kinds = {d["uuid"] if len(d["uuid"]) == 4 else "vendor" for c in chars for d in c["descriptors"]}
    assert {"2901", "2902", "vendor"} <= kinds
    for c in chars:
        has_cccd = any(d["uuid"] == "2902" for d in c["descriptors"])
        assert has_cccd == bool({"notify", "indicate"} & set(c["properties"]))
        assert (c["value"] is not None) == ("read" in c["properties"])
        assert c["declaration_handle"] + 1 == c["value_handle"]
    assert any(s["characteristics"] and not s["characteristics"][-1]["descriptors"] for s in services)
    lengths = [len(c["value"]) // 2 for c in chars if c["value"] is not None]
    assert min(lengths) == 1 and max(lengths) == 400 and 22 in lengths and 23 in lengths
    assert db == run(gattdb.dump(seed, NAME, False))  # deterministic


def test_database_last_ffff():
    plain, moved = run(gattdb.dump(2, NAME, False)), run(gattdb.dump(2, NAME, True))
    assert moved["last_handle"] == 0xFFFF and plain["last_handle"] < 0xFFFF
    assert [s["uuid"] for s in plain["services"]] == [s["uuid"] for s in moved["services"]]
    assert moved["services"][0] == plain["services"][0]  # GAP stays at 0x0001


# -----------------------------------------------------------------------------
# Against Bumble's GATT client, in a world
# -----------------------------------------------------------------------------
CASES = [(seed, mtu, False) for seed in (1, 2, 3) for mtu in (517, 23)] + [(1, 23, True), (2, 517, True)]


@pytest.mark.parametrize("seed,mtu,last_ffff", CASES, ids=[f"seed{s}-mtu{m}{'-ffff' if f else ''}" for s, m, f in CASES])
def test_bumble_client_sees_the_reported_database(world, seed, mtu, last_ffff):
    w, db = start_peer(world, seed, mtu, ",last_ffff=1" if last_ffff else "")
    # The standalone dump is the same database.
    assert db == dump(seed, *(["--last-ffff"] if last_ffff else []))
    assert (db["last_handle"] == 0xFFFF) == last_ffff

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            assert central.client.mtu == mtu
            assert await central.discover() == strip_values(db)
            assert central.uuids_read >= 1  # a 128-bit included service, UUID read from its declaration
            for _, c in chars_of(db):
                if c["value"] is not None:
                    assert (await central.client.read_value(c["value_handle"])).hex() == c["value"], c
                else:
                    code = await central.att_error(central.client.read_value(c["value_handle"]))
                    assert code == ATT_READ_NOT_PERMITTED, c
                for d in c["descriptors"]:
                    assert (await central.client.read_value(d["handle"])).hex() == d["value"], d

    run(scenario())
    if mtu == 23:
        assert w.find({"event": "att", "op": 0x0C}), "no Read Blob at MTU 23"


@pytest.mark.parametrize("mtu", (517, 23))
def test_writes(world, mtu):
    w, db = start_peer(world, 1, mtu)
    chars = ours(db)
    rw = next(c for c in chars if {"read", "write"} <= set(c["properties"]))
    rwnr = next(c for c in chars if c["properties"] == ["read", "write-without-response"])
    read_only = next(c for c in chars if c["properties"] == ["read"])
    no_wnr = next(c for c in chars if c["properties"] == ["read", "write"])
    long_value = bytes(range(256)) + bytes(range(44))  # 300 bytes
    other = bytes(reversed(long_value))[:250]
    vendor = next(d for _, c in chars_of(db) for d in c["descriptors"] if len(d["uuid"]) == 36 and d["writable"])

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            client = central.client
            # A long write: Prepare Write + Execute Write (Write Request at MTU 517 fits).
            await client.write_value(rw["value_handle"], long_value, with_response=True)
            assert await client.read_value(rw["value_handle"]) == long_value
            # Prepare/Execute explicitly, whatever the MTU.
            await client.write_long_value(rw["value_handle"], other)
            assert await client.read_value(rw["value_handle"]) == other
            # Write Command where write-without-response is set.
            await client.write_value(rwnr["value_handle"], b"\x01\x02\x03", with_response=False)
            assert await client.read_value(rwnr["value_handle"]) == b"\x01\x02\x03"
            # Enforced properties: no write property, no write-without-response.
            code = await central.att_error(client.write_value(read_only["value_handle"], b"\x00", with_response=True))
            assert code == ATT_WRITE_NOT_PERMITTED
            code = await central.att_error(client.write_long_value(read_only["value_handle"], bytes(30)))
            assert code == ATT_WRITE_NOT_PERMITTED
            await client.write_value(no_wnr["value_handle"], b"\xee", with_response=False)  # dropped
            assert (await client.read_value(read_only["value_handle"])).hex() == read_only["value"]
            assert (await client.read_value(no_wnr["value_handle"])).hex() == no_wnr["value"]
            # A read-only descriptor (the User Description) refuses writes too.
            cud = next(d for _, c in chars_of(db) for d in c["descriptors"] if d["uuid"] == "2901")
            code = await central.att_error(client.write_value(cud["handle"], b"x", with_response=True))
            assert code == ATT_WRITE_NOT_PERMITTED
            assert (await client.read_value(cud["handle"])).hex() == cud["value"]
            # A writable vendor descriptor keeps what is written.
            await client.write_value(vendor["handle"], b"\x5a" * 40, with_response=True)
            assert await client.read_value(vendor["handle"]) == b"\x5a" * 40

    run(scenario())
    first = w.wait_event({"event": "write", "handle": rw["value_handle"]}, timeout=2)
    assert first["value"] == long_value.hex() and first["op"] == ("request" if mtu == 517 else "execute")
    w.wait_event({"event": "write", "handle": rw["value_handle"], "op": "execute", "value": other.hex()}, timeout=2)
    w.wait_event({"event": "write", "handle": rwnr["value_handle"], "op": "command"}, timeout=2)
    w.wait_event({"event": "write", "handle": vendor["handle"], "target": "descriptor"}, timeout=2)
    w.wait_event({"event": "rejected", "handle": no_wnr["value_handle"], "op": "command", "responded": False},
                 timeout=2)
    assert not w.find({"event": "write", "handle": read_only["value_handle"]})
    assert not w.find({"event": "write", "handle": no_wnr["value_handle"]})


def test_corrupted_prepare_write_echo(world):
    w, db = start_peer(world, 1, 23, ",fault_corrupt=prepare_write#1")
    rw = next(c for c in ours(db) if {"read", "write"} <= set(c["properties"]))
    handle, part = rw["value_handle"], bytes(range(1, 19))

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            client = central.client
            response = await client.send_request(att.ATT_Prepare_Write_Request(
                attribute_handle=handle, value_offset=0, part_attribute_value=part))
            assert response.op_code == att.Opcode.ATT_PREPARE_WRITE_RESPONSE
            echoed = bytes(response.part_attribute_value)
            assert (response.attribute_handle, response.value_offset) == (handle, 0)
            assert echoed[:-1] == part[:-1] and echoed[-1] == part[-1] ^ 0xFF
            # The client cancels; the value is untouched.
            response = await client.send_request(att.ATT_Execute_Write_Request(flags=0x00))
            assert response.op_code == att.Opcode.ATT_EXECUTE_WRITE_RESPONSE
            assert (await client.read_value(handle)).hex() == rw["value"]
            # Only the first Prepare Write Response is corrupted.
            response = await client.send_request(att.ATT_Prepare_Write_Request(
                attribute_handle=handle, value_offset=0, part_attribute_value=part))
            assert bytes(response.part_attribute_value) == part
            response = await client.send_request(att.ATT_Execute_Write_Request(flags=0x01))
            assert response.op_code == att.Opcode.ATT_EXECUTE_WRITE_RESPONSE
            assert await client.read_value(handle) == part

    run(scenario())
    w.wait_event({"event": "fault", "kind": "corrupt", "request": "prepare_write", "nth": 1}, timeout=2)
    writes = w.find({"event": "write", "handle": handle})
    assert [e["value"] for e in writes] == [part.hex()]


@pytest.mark.parametrize("kind", ["notify", "indicate"])
def test_notify_on_subscribe(world, kind):
    """notify_on_subscribe=1: enabling the CCCD brings the current value once
    (notification, or indication when only indications were enabled),
    truncated to ATT_MTU-3."""
    w, db = start_peer(world, 3, 23, ",notify_on_subscribe=1")
    primaries = [s for s in db["services"] if s["primary"] and s["uuid"] not in ("1800", "1801")]
    if kind == "notify":
        target = next(c for s in primaries for c in s["characteristics"]
                      if "notify" in c["properties"] and c["value"] and len(c["value"]) > 40)
    else:
        target = next(c for s in primaries for c in s["characteristics"]
                      if "indicate" in c["properties"] and "notify" not in c["properties"] and c["value"])

    async def scenario() -> bytes:
        async with Central(w.bumble_transport()) as central:
            client = central.client
            await client.discover_services()
            for service in client.services:
                await service.discover_characteristics()
            ch = next(c for s in client.services for c in s.characteristics if c.handle == target["value_handle"])
            await ch.discover_descriptors()
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            await ch.subscribe(lambda value: queue.put_nowait(bytes(value)), prefer_notify=kind == "notify")
            return await asyncio.wait_for(queue.get(), 5)

    value = run(scenario())
    assert value.hex() == target["value"][: 2 * 20]
    sent = w.wait_event({"event": "notify", "handle": target["value_handle"]}, timeout=2)
    assert (sent["value"], sent["indication"]) == (value.hex(), kind == "indicate")
    if kind == "indicate":
        w.wait_event({"event": "att", "op": 0x1E}, timeout=2)  # the client confirmed it
