"""The parts of bumble_gatt_central that are not about the link: ATT round-trip
counting on Bumble's GATT client, a timed long read, and the whole-database dump in the shape of
``attled gatt --json --values`` ("services", see Sources/AttledCLI/GATTTool.swift
``dump``).

Dump shape (the same keys and order as attled's, UUIDs as the gattdb peer
prints them: 16-bit "2a00", 128-bit canonical lower case)::

  [{"uuid": "1800", "start": 1, "end": 5, "primary": true,
    "includes": [{"handle": H, "uuid": U, "start": S, "end": E}, ...],
    "characteristics": [
      {"uuid": "2a00", "declaration_handle": 2, "value_handle": 3,
       "properties": ["read"], "value": "4764" | "error": "Read Not Permitted",
       "descriptors": [{"uuid": "2902", "handle": 9, "value": "0000" | "error": ..}]}]}]

As attled does, a characteristic's value is read (in full: Read, then Read
Blob while the part is ATT_MTU-1 long) only when it has the read property
(else neither "value" nor "error"); every descriptor is read.  An ATT error
is the attled name of its code (ATTErrorCode.names), not a failure.

Bumble 0.0.236's client needs two fixes, done with its own requests
(as in Tests/integration/test_gattdb_peer.py): Find Included Services is the
spec's procedure (Read By Type 0x2802, then a Read of a 128-bit included
service's declaration for its UUID), and a primary service at 0xFFFF is
asked for with one more Read By Group Type.
"""

from __future__ import annotations

import struct
import time
from collections import Counter

from bumble import att
from bumble.core import UUID
from bumble.gatt import GATT_INCLUDE_ATTRIBUTE_TYPE, GATT_PRIMARY_SERVICE_ATTRIBUTE_TYPE, Characteristic
from bumble.gatt_client import Client, ServiceProxy

from attledtools.peers.gattdb_model import props_names
from attledtools.peers.gattdb_server import uuid_text

# attled's names of ATT error codes (Sources/BLEATT/Opcodes.swift ATTErrorCode.names), by Bumble's codes.
_E = att.ErrorCode
ATT_ERROR_NAMES = {
    _E.INVALID_HANDLE: "Invalid Handle", _E.READ_NOT_PERMITTED: "Read Not Permitted",
    _E.WRITE_NOT_PERMITTED: "Write Not Permitted", _E.INVALID_PDU: "Invalid PDU",
    _E.INSUFFICIENT_AUTHENTICATION: "Insufficient Authentication", _E.REQUEST_NOT_SUPPORTED: "Request Not Supported",
    _E.INVALID_OFFSET: "Invalid Offset", _E.INSUFFICIENT_AUTHORIZATION: "Insufficient Authorization",
    _E.PREPARE_QUEUE_FULL: "Prepare Queue Full", _E.ATTRIBUTE_NOT_FOUND: "Attribute Not Found",
    _E.ATTRIBUTE_NOT_LONG: "Attribute Not Long", _E.INSUFFICIENT_ENCRYPTION_KEY_SIZE: "Encryption Key Size Too Short",
    _E.INVALID_ATTRIBUTE_LENGTH: "Invalid Attribute Value Length", _E.UNLIKELY_ERROR: "Unlikely Error",
    _E.INSUFFICIENT_ENCRYPTION: "Insufficient Encryption", _E.UNSUPPORTED_GROUP_TYPE: "Unsupported Group Type",
    _E.INSUFFICIENT_RESOURCES: "Insufficient Resources", _E.DATABASE_OUT_OF_SYNC: "Database Out Of Sync",
    _E.VALUE_NOT_ALLOWED: "Value Not Allowed", _E.WRITE_REQUEST_REJECTED: "Write Request Rejected",
    _E.CCCD_IMPROPERLY_CONFIGURED: "Client Characteristic Configuration Descriptor Improperly Configured",
    _E.PROCEDURE_ALREADY_IN_PROGRESS: "Procedure Already in Progress", _E.OUT_OF_RANGE: "Out of Range",
}


def att_error_name(code: int) -> str:
    if code in ATT_ERROR_NAMES:
        return ATT_ERROR_NAMES[code]
    return "Application Error" if 0x80 <= code <= 0x9F else "Reserved error"


class RoundTrips:
    """Counts the ATT requests of a Bumble GATT client that got a response
    (an Error Response counts: it is a round trip), by the current job.

    Installed by wrapping ``client.send_request``, through which every
    procedure of Bumble's client sends its requests (Exchange MTU too);
    commands and confirmations are not round trips and are not counted.
    """

    def __init__(self, client: Client) -> None:
        self.job = "other"
        self.counts: Counter[str] = Counter()
        self.opcodes: Counter[str] = Counter()
        inner = client.send_request

        async def counted(request):
            response = await inner(request)
            if response is not None:
                self.counts[self.job] += 1
                self.opcodes[f"{int(request.op_code):02x}"] += 1
            return response

        client.send_request = counted  # type: ignore[method-assign]

    def report(self) -> dict:
        return {"att_round_trips": dict(self.counts), "att_round_trips_total": sum(self.counts.values()),
                "att_requests_by_opcode": dict(sorted(self.opcodes.items()))}


async def find_included(client: Client, service: ServiceProxy) -> list[dict]:
    """Find Included Services (Core Vol 3 Part G 4.5.1) with Bumble's requests."""
    found: list[dict] = []
    start = service.handle
    while start <= service.end_group_handle:
        response = await client.send_request(att.ATT_Read_By_Type_Request(
            starting_handle=start, ending_handle=service.end_group_handle,
            attribute_type=GATT_INCLUDE_ATTRIBUTE_TYPE))
        if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
            if response.error_code != att.ATT_ATTRIBUTE_NOT_FOUND_ERROR:
                raise att.ATT_Error(error_code=response.error_code, message="Find Included Services")
            break
        for handle, value in response.attributes:
            first, last = struct.unpack_from("<HH", value)
            if len(value) == 6:
                uuid = UUID.from_bytes(value[4:])
            else:  # a 128-bit service: its UUID is in its declaration
                uuid = UUID.from_bytes(await client.read_value(first, no_long_read=True))
            found.append({"handle": handle, "uuid": uuid_text(uuid), "start": first, "end": last})
        last_handle = response.attributes[-1][0]
        if last_handle >= service.end_group_handle:
            break
        start = last_handle + 1
    return found


async def service_at_ffff(client: Client) -> list[ServiceProxy]:
    response = await client.send_request(att.ATT_Read_By_Group_Type_Request(
        starting_handle=0xFFFF, ending_handle=0xFFFF, attribute_group_type=GATT_PRIMARY_SERVICE_ATTRIBUTE_TYPE))
    if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
        return []
    return [ServiceProxy(client, handle, end, UUID.from_bytes(value), True)
            for handle, end, value in response.attributes]


async def read_result(client: Client, handle: int) -> dict:
    """{"value": hex} (read in full) or {"error": attled's name of the ATT error}."""
    try:
        return {"value": bytes(await client.read_value(handle)).hex()}
    except att.ATT_Error as error:
        return {"error": att_error_name(error.error_code)}


async def discover_database(client: Client, trips: RoundTrips | None = None, values: bool = True) -> list[dict]:
    """The whole database as attled's ``gatt --json [--values]`` prints its "services"."""
    if trips:
        trips.job = "discover"
    primaries = await client.discover_services()
    if primaries and primaries[-1].end_group_handle == 0xFFFE:
        primaries += await service_at_ffff(client)
    includes: dict[int, list[dict]] = {}
    secondaries: dict[int, ServiceProxy] = {}
    pending = list(primaries)
    while pending:  # includes of includes too
        service = pending.pop(0)
        includes[service.handle] = await find_included(client, service)
        for inc in includes[service.handle]:
            if inc["start"] not in secondaries and inc["start"] not in {p.handle for p in primaries}:
                secondaries[inc["start"]] = ServiceProxy(client, inc["start"], inc["end"], UUID(inc["uuid"]), False)
                pending.append(secondaries[inc["start"]])
    services = sorted([*primaries, *secondaries.values()], key=lambda s: s.handle)
    found = []
    for service in services:
        chars = await client.discover_characteristics([], service)
        described = []
        for ch in chars:
            descriptors = await client.discover_descriptors(ch)
            described.append((ch, descriptors))
        found.append((service, described))
    if trips:
        trips.job = "read"
    out = []
    for service, described in found:
        jc = []
        for ch, descriptors in described:
            entry: dict = {"uuid": uuid_text(ch.uuid), "declaration_handle": ch.handle - 1, "value_handle": ch.handle,
                           "properties": props_names(int(ch.properties))}
            if values and ch.properties & Characteristic.Properties.READ:
                entry.update(await read_result(client, ch.handle))
            jd = []
            for d in descriptors:
                de: dict = {"uuid": uuid_text(d.type), "handle": d.handle}
                if values:
                    de.update(await read_result(client, d.handle))
                jd.append(de)
            entry["descriptors"] = jd
            jc.append(entry)
        out.append({"uuid": uuid_text(service.uuid), "start": service.handle, "end": service.end_group_handle,
                    "primary": service.handle not in secondaries, "includes": includes[service.handle],
                    "characteristics": jc})
    return out


async def timed_long_read(client: Client, target: str, trips: RoundTrips) -> dict:
    """One long read (Read, then Read Blobs) of a characteristic value, timed.

    ``target``: a value handle ("0x0010", "16") or a characteristic UUID (the
    first one found; the services and characteristics are discovered first,
    counted as job "throughput_discover").  Raises LookupError, att.ATT_Error.
    """
    trips.job = "throughput_discover"
    try:
        handle = int(target, 0)
    except ValueError:
        await client.discover_services()
        found = []
        for service in client.services:
            found += await client.discover_characteristics([UUID(target)], service)
        if not found:
            raise LookupError(f"no characteristic {target}") from None
        handle = found[0].handle
    trips.job = "throughput"
    before = trips.counts["throughput"]
    started = time.perf_counter()
    value = await client.read_value(handle)
    seconds = time.perf_counter() - started
    return {"handle": handle, "bytes": len(value), "ms": round(seconds * 1000, 3),
            "bytes_per_s": round(len(value) / seconds, 1) if seconds > 0 else None,
            "mtu": client.mtu, "round_trips": trips.counts["throughput"] - before}
