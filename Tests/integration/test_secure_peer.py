"""The encrypted LED peer (attledtools.peers, secure=enc, pairing=,
forget_bonds=; issue 13) is right, judged by Bumble's own central.

attled's pairing and bonds are tested against this peer, so the peer itself
is proven first: a Bumble central (bumble.device, in this process) on the
world's host controller 0 reads and writes the protected characteristics,
pairs with Bumble's SMP (Just Works), encrypts again with the LTK kept in its
own key store, and meets a peer that forgot the bond.  No attled binary is
needed.

The central connects with its static random address and distributes that
address as its identity (identity_address_type RANDOM): the peer files the
bond under the identity address and looks it up under the address of the
next connection, so a central whose identity is its public address while it
connects with a random one would not be recognised (as with real devices).
"""

from __future__ import annotations

import asyncio

import pytest

from bumble import att, hci, pairing, smp
from bumble.device import Connection, Device
from bumble.transport import open_transport

NAME = "Lamp"
PEER = "C0:11:22:33:44:55"  # attledtools.peers.options.default_address(0)
CENTRAL = "F0:00:00:00:00:02"
DEADLINE_S = 15.0
ATT_INSUFFICIENT_ENCRYPTION = att.ATT_INSUFFICIENT_ENCRYPTION_ERROR
HCI_PIN_OR_KEY_MISSING = 0x06
AUTHREQ_BONDING, AUTHREQ_SC = int(smp.AuthReq.BONDING), int(smp.AuthReq.SC)  # Core Vol 3, Part H, 3.5.1


def start(world, profile: str = "pycom", opts: str = ""):
    w = world(devices=[f"{NAME}:{profile}:interval=20,init=1,2,3,secure=enc" + (f",{opts}" if opts else "")])
    return w, w.device(NAME)["handles"]


class Central:
    """A Bumble central on host controller 0 of the world (Just Works, bonding)."""

    def __init__(self, transport_spec: str, sc: bool = True):
        self.spec = transport_spec
        self.sc = sc
        self.connection: Connection | None = None
        self.security_requests: list[int] = []

    async def __aenter__(self) -> Central:
        self.transport = await open_transport(self.spec)
        self.device = Device.with_hci("central", hci.Address(CENTRAL), self.transport.source, self.transport.sink)
        self.device.pairing_config_factory = lambda connection: pairing.PairingConfig(
            sc=self.sc, mitm=False, bonding=True,
            delegate=pairing.PairingDelegate(io_capability=pairing.PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT),
            identity_address_type=pairing.PairingConfig.AddressType.RANDOM)
        # Listen on each connection before its first PDU can arrive.
        self.device.on(Device.EVENT_CONNECTION, lambda c: c.on(
            Connection.EVENT_SECURITY_REQUEST, lambda auth_req: self.security_requests.append(int(auth_req))))
        await self.device.power_on()
        return self

    async def connect(self) -> Connection:
        self.connection = await self.device.connect(
            hci.Address(PEER, hci.Address.RANDOM_DEVICE_ADDRESS), own_address_type=hci.OwnAddressType.RANDOM,
            timeout=5)
        return self.connection

    async def disconnect(self) -> None:
        assert self.connection is not None
        await self.connection.disconnect()
        self.connection = None

    async def __aexit__(self, *exc) -> None:
        if self.connection is not None:
            try:
                await asyncio.wait_for(self.connection.disconnect(), 2)
            except Exception:  # noqa: BLE001 - already gone
                pass
        await asyncio.wait_for(self.transport.close(), 2)

    async def read(self, handle: int) -> bytes:
        assert self.connection is not None
        return await self.connection.gatt_client.read_value(handle)

    async def write(self, handle: int, value: bytes, with_response: bool = True) -> None:
        assert self.connection is not None
        await self.connection.gatt_client.write_value(handle, value, with_response=with_response)

    async def bonded_keys(self):
        return await self.device.keystore.get(str(hci.Address(PEER, hci.Address.RANDOM_DEVICE_ADDRESS)))


async def att_error(coro) -> int | None:
    try:
        await coro
    except att.ATT_Error as error:
        return error.error_code
    return None


async def hci_error(coro) -> int | None:
    try:
        await coro
    except hci.HCI_Error as error:
        return error.error_code
    return None


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE_S))


async def event(w, pred, since: int = 0, timeout: float = 5.0) -> dict:
    """w.wait_event off the event loop (the central's transport keeps running)."""
    return await asyncio.to_thread(w.wait_event, pred, timeout, since)


# -----------------------------------------------------------------------------
def test_unencrypted_access_is_refused(world):
    w, handles = start(world)

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            await central.connect()
            assert await att_error(central.read(handles["red"])) == ATT_INSUFFICIENT_ENCRYPTION
            assert await att_error(central.write(handles["green"], b"\x44")) == ATT_INSUFFICIENT_ENCRYPTION
            # Prepare Write is refused at once, not at Execute time.
            assert await att_error(central.connection.gatt_client.write_long_value(
                handles["blue"], b"\x55")) == ATT_INSUFFICIENT_ENCRYPTION
            # The GAP Device Name is not protected.
            assert await central.connection.gatt_client.read_value(0x0003) == NAME.encode()

    run(scenario())
    w.wait_event({"event": "read_rejected", "char": "red", "error": ATT_INSUFFICIENT_ENCRYPTION}, timeout=2)
    w.wait_event({"event": "rejected", "char": "green", "op": "request", "error": ATT_INSUFFICIENT_ENCRYPTION,
                  "responded": True}, timeout=2)
    w.wait_event({"event": "rejected", "char": "blue", "op": "prepare", "error": ATT_INSUFFICIENT_ENCRYPTION},
                 timeout=2)
    assert not w.find({"event": "write"}) and not w.find({"event": "read"})
    assert not w.find({"event": "pairing"}) and not w.find({"event": "encryption"})


def test_sc_pairing_then_reconnect_with_the_bond(world):
    w, handles = start(world)

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            await central.connect()
            await central.device.pair(central.connection)
            assert central.connection.is_encrypted and central.connection.sc
            assert await central.read(handles["red"]) == b"\x01"
            await central.write(handles["green"], b"\x20")
            assert await central.read(handles["green"]) == b"\x20"
            keys = await central.bonded_keys()
            assert keys is not None and keys.ltk is not None and keys.irk is not None  # SC LTK + peer identity
            mark = w.mark()
            await central.disconnect()
            await event(w, {"event": "disconnected", "device": NAME}, mark)

            # (3) A new connection: LE Enable Encryption with the stored LTK, no pairing.
            mark = w.mark()
            await central.connect()
            assert await att_error(central.read(handles["red"])) == ATT_INSUFFICIENT_ENCRYPTION
            await central.device.encrypt(central.connection)
            assert await central.read(handles["green"]) == b"\x20"
            await central.write(handles["blue"], b"\x30")
            await event(w, {"event": "state", "rgb": [1, 0x20, 0x30]}, mark)
            return mark

    mark = run(scenario())
    first = w.events[:mark]
    complete = w.find({"event": "pairing"})[0]
    assert complete == {**complete, "device": NAME, "result": "complete", "sc": True, "bonded": True,
                        "identity": CENTRAL, "irk": True}
    assert [e["source"] for e in first if e["event"] == "ltk_request"] == ["pairing"]
    assert [(e["enabled"], e["status"], e["during_pairing"]) for e in first if e["event"] == "encryption"] == [
        (True, 0, True)]
    # The second connection: the bond's key, and no pairing at all.
    again = w.events[mark:]
    assert [(e["found"], e["source"], e["ediv"], e["rand"]) for e in again if e["event"] == "ltk_request"] == [
        (True, "bond", 0, "00" * 8)]
    assert [(e["enabled"], e["status"], e["during_pairing"]) for e in again if e["event"] == "encryption"] == [
        (True, 0, False)]
    assert not [e for e in again if e["event"] in ("pairing", "smp")]


def test_legacy_only_peer_pairs_legacy_and_keeps_the_bond(world):
    w, handles = start(world, opts="pairing=legacy")

    async def scenario():
        async with Central(w.bumble_transport(), sc=True) as central:  # the central asks for SC
            await central.connect()
            await central.device.pair(central.connection)
            assert not central.connection.sc
            assert await central.read(handles["red"]) == b"\x01"
            keys = await central.bonded_keys()
            assert keys.ltk is None and keys.ltk_central is not None  # the peer's legacy LTK + EDIV/Rand
            ediv, rand = keys.ltk_central.ediv, keys.ltk_central.rand
            assert ediv != 0 and rand != bytes(8)
            mark = w.mark()
            await central.disconnect()
            await event(w, {"event": "disconnected", "device": NAME}, mark)
            mark = w.mark()
            await central.connect()
            await central.device.encrypt(central.connection)
            await central.write(handles["red"], b"\x09")
            assert await central.read(handles["red"]) == b"\x09"
            return mark, ediv, rand

    mark, ediv, rand = run(scenario())
    complete = w.wait_event({"event": "pairing", "result": "complete"}, timeout=2)
    assert (complete["sc"], complete["bonded"]) == (False, True)
    # The central's Pairing Request (received by the peer) asked for SC; the
    # peer refused it, and encryption during pairing used the STK (EDIV 0, Rand 0).
    request = w.find({"event": "smp", "code": 0x01})
    assert request and int(request[0]["pdu"][6:8], 16) & AUTHREQ_SC
    stk = [e for e in w.events[:mark] if e["event"] == "ltk_request"]
    assert [(e["source"], e["ediv"]) for e in stk] == [("pairing", 0)]
    again = [e for e in w.events[mark:] if e["event"] == "ltk_request"]
    assert [(e["found"], e["source"], e["ediv"], e["rand"]) for e in again] == [(True, "bond", ediv, rand.hex())]
    assert not [e for e in w.events[mark:] if e["event"] == "pairing"]


def test_forgotten_bond_gives_key_missing_and_pairing_again_works(world):
    w, handles = start(world, opts="forget_bonds=1")

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            await central.connect()
            await central.device.pair(central.connection)
            await event(w, {"event": "pairing", "device": NAME, "result": "complete"})
            mark = w.mark()
            await central.disconnect()
            forgotten = await event(w, {"event": "bonds_forgotten", "device": NAME}, mark)
            assert forgotten["count"] == 1
            await event(w, {"event": "disconnected", "device": NAME}, mark)

            mark = w.mark()
            await central.connect()
            assert await hci_error(central.device.encrypt(central.connection)) == HCI_PIN_OR_KEY_MISSING
            assert not central.connection.is_encrypted
            assert await att_error(central.read(handles["red"])) == ATT_INSUFFICIENT_ENCRYPTION
            await central.device.pair(central.connection)  # on the same link
            # The peer reports its side of the pairing on its own time: wait for it.
            await event(w, {"event": "pairing", "device": NAME, "result": "complete"}, mark)
            assert await central.read(handles["red"]) == b"\x01"
            # Only the first connection's end forgets: the new bond stays.
            mark2 = w.mark()
            await central.disconnect()
            await event(w, {"event": "disconnected", "device": NAME}, mark2)
            await central.connect()
            await central.device.encrypt(central.connection)
            return mark, mark2

    mark, mark2 = run(scenario())
    second = w.events[mark:mark2]
    missing = [e for e in second if e["event"] == "ltk_request"][0]
    assert (missing["found"], missing["source"]) == (False, "none")
    assert [e["result"] for e in second if e["event"] == "pairing"] == ["complete"]
    assert len(w.find({"event": "bonds_forgotten"})) == 1
    third = w.events[mark2:]
    assert [e["source"] for e in third if e["event"] == "ltk_request"] == ["bond"]


def test_write_command_unencrypted_is_dropped(world):
    w, handles = start(world, profile="particle")

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            await central.connect()
            mark = w.mark()
            await central.write(handles["red"], b"\x77", with_response=False)
            dropped = await event(w, {"event": "write_dropped", "device": NAME}, mark)
            assert dropped == {**dropped, "char": "red", "handle": handles["red"], "value": "77", "op": "command",
                               "reason": "insufficient encryption"}
            await central.device.pair(central.connection)
            assert await central.read(handles["red"]) == b"\x01"  # unchanged
            mark = w.mark()
            await central.write(handles["red"], b"\x78", with_response=False)
            await event(w, {"event": "state", "rgb": [0x78, 2, 3]}, mark)

    run(scenario())
    assert [e["value"] for e in w.find({"event": "write"})] == ["78"]
    assert not w.find({"event": "rejected"})  # a dropped command is not answered


def test_cccd_needs_encryption(world):
    w, handles = start(world, profile="harness")

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            await central.connect()
            cccd = handles["button"] + 1
            assert await att_error(central.write(cccd, b"\x01\x00")) == ATT_INSUFFICIENT_ENCRYPTION
            mark = w.mark()
            await central.write(cccd, b"\x01\x00", with_response=False)
            await event(w, {"event": "write_dropped", "handle": cccd}, mark)
            await central.device.pair(central.connection)
            await central.write(cccd, b"\x01\x00")
            await event(w, {"event": "subscribed", "char": "button", "notify": True})

    run(scenario())
    assert len(w.find({"event": "subscribed"})) == 1


@pytest.mark.parametrize("mode,auth_req", [("sc", AUTHREQ_BONDING | AUTHREQ_SC), ("legacy", AUTHREQ_BONDING)])
def test_security_request(world, mode, auth_req):
    w, handles = start(world, opts=f"security_request=1,pairing={mode}")

    async def scenario():
        async with Central(w.bumble_transport()) as central:
            await central.connect()
            sent = await event(w, {"event": "security_request", "device": NAME})
            assert sent["auth_req"] == auth_req
            # Bumble's central leaves Security Requests to the application: pair now.
            await central.device.pair(central.connection)
            assert central.security_requests == [auth_req]
            assert await central.read(handles["red"]) == b"\x01"

    run(scenario())
    complete = w.wait_event({"event": "pairing", "result": "complete"}, timeout=2)
    assert complete["sc"] == (mode == "sc")
