"""The GATT Database Hash oracle (Core Vol 3 Part G 7.3), computed by Bumble.

    .venv/bin/python -m attledtools.maint.dbhash --profile pycom|particle|harness [--name NAME]
    .venv/bin/python -m attledtools.maint.dbhash --json FILE|-     (database JSON, shape below)
        [--all]  also list every attribute of the database, hashed or not

Builds the database in a Bumble ``Device``'s GATT server (never powered on)
and prints one JSON line::

  {"source": "profile:pycom" | "json:FILE", "hash": "<16 bytes hex>",
   "hash_msb_first": "<the same reversed>", "served_hash": hex | null,
   "m": "<the hashed message, hex>", "attribute_count": N,
   "hashed": [{"handle": H, "type": "2800", "value": hex | null, "bytes": hex}, ...],
   "attributes": [{"handle": H, "type": T, "value": hex, "hashed": B}, ...]   (--all)}

``hash`` is the value as a client reads it from the Database Hash
characteristic (0x2B2A), least significant octet first; ``hash_msb_first`` is
the AES-CMAC output in the spec's (big-endian) notation.  ``served_hash`` is
what the database's own Database Hash characteristic returns when read
through Bumble's server (null when the database has none); it must equal
``hash``.

Where Bumble computes it: bumble/profiles/gatt_service.py,
``GenericAttributeProfileService.get_database_hash`` (the read callback of
its Database Hash characteristic) over ``get_attribute_data`` of every
attribute of ``device.gatt_server.attributes``, in handle order::

  hash = reverse(AES-CMAC(key = 16 zero octets, m))
  m = concatenation, attribute by attribute in handle order, of
    Primary Service 0x2800, Secondary Service 0x2801, Include 0x2802,
    Characteristic 0x2803, Characteristic Extended Properties 0x2900:
        handle (2 octets LE) || type (2 octets LE) || value (as in ATT PDUs)
    CUD 0x2901, CCCD 0x2902, SCCD 0x2903, Presentation Format 0x2904,
    Aggregate Format 0x2905:
        handle (2 octets LE) || type (2 octets LE)
    anything else (characteristic values, other descriptors): nothing.

AES-CMAC takes m as a byte string in that (wire) order, first octet first.
An include declaration's value is start || end || the included service's
UUID only when it is a 16-bit one (Core Vol 3 Part G 3.2); Bumble 0.0.236
builds it with ``'<HH2s'`` (two octets of any UUID), so it is rewritten here
to the spec's form before hashing, as attledtools.peers.gattdb does.

Profile layout (``--profile``): the board's database as ``attled serve``
must present it, handle for handle.  It is Bumble's Device default (GAP and
GATT services, DeviceConfiguration defaults, no EATT) followed by the LED
service of attledtools.peers.profiles; the vworld peers present the same::

  0x0001 2800 Primary Service 1800 (GAP)
  0x0002 2803 props 02 (read)        -> 0x0003 2A00 Device Name = NAME (UTF-8)
  0x0004 2803 props 02 (read)        -> 0x0005 2A01 Appearance = 0000
  0x0006 2800 Primary Service 1801 (GATT)
  0x0007 2803 props 20 (indicate)    -> 0x0008 2A05 Service Changed
  0x0009 2902 CCCD (of Service Changed)
  0x000A 2803 props 0A (read, write) -> 0x000B 2B29 Client Supported Features = 00
  0x000C 2803 props 02 (read)        -> 0x000D 2B2A Database Hash
  0x000E 2800 Primary Service <LED service UUID, 16 octets>
  0x000F 2803 <props>                -> 0x0010 <first characteristic> ...
  (pycom/particle: red 0x0010, green 0x0012, blue 0x0014; harness: command
   0x0010, button 0x0012 + its CCCD 0x0013)

Only the types, handles and declaration values enter the hash: NAME, the
characteristic values and the attribute permissions (``--secure``) do not.

JSON input: {"services": [...]} or the list itself, in the shape of
``attled gatt --json --values`` / the gattdb peer's "gatt_database" event /
bumble_gatt_dump: services with uuid, start, end, primary, includes
[{handle, uuid, start, end}], characteristics [{uuid, declaration_handle,
value_handle, properties (names), value (hex) | absent, descriptors [{uuid,
handle, value (hex) | absent}]}].  Handles are used as given (gaps allowed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
from typing import Any

from bumble.core import UUID
from bumble.device import Device, DeviceConfiguration
from bumble.gatt import (Characteristic, CharacteristicDeclaration, Descriptor, IncludedServiceDeclaration,
                         Service, GATT_DATABASE_HASH_CHARACTERISTIC)
from bumble.profiles.gatt_service import GenericAttributeProfileService

from attledtools.peers.gattdb_model import PROPERTY_NAMES
from attledtools.peers.gattdb_server import uuid_text
from attledtools.peers.profiles import PROFILES

READWRITE = Characteristic.READABLE | Characteristic.WRITEABLE


class _Reader:
    """Stands in for a connection: get_database_hash only looks at .device."""

    def __init__(self, device: Device) -> None:
        self.device = device


def spec_include_value(service: Service) -> bytes:
    """Include declaration value, Core Vol 3 Part G 3.2: no 128-bit UUID."""
    value = struct.pack("<HH", service.handle, service.end_group_handle)
    raw = service.uuid.to_pdu_bytes()
    return value + raw if len(raw) == 2 else value


def profile_device(profile: str, name: str) -> Device:
    """The board's database (see the module docstring): Bumble's defaults + the LED service."""
    spec = PROFILES[profile]
    device = Device(config=DeviceConfiguration(name=name))
    chars = [Characteristic(c.uuid, c.properties, READWRITE, b"\x00") for c in spec.chars]
    device.add_service(Service(spec.service_uuid, chars))
    return device


def props_value(names: list[str]) -> int:
    unknown = set(names) - set(PROPERTY_NAMES)
    if unknown:
        raise ValueError(f"unknown properties {sorted(unknown)}")
    return sum(1 << PROPERTY_NAMES.index(n) for n in names)


def json_device(services: list[dict[str, Any]]) -> Device:
    """A Device whose GATT server holds exactly these attributes, at these handles."""
    device = Device(config=DeviceConfiguration(name="dbhash"))
    server = device.gatt_server
    attributes: list[Any] = []
    by_start: dict[int, Service] = {}
    for s in services:
        service = Service(UUID(s["uuid"]), [], primary=bool(s.get("primary", True)))
        service.handle, service.end_group_handle = s["start"], s["end"]
        by_start[s["start"]] = service
        attributes.append(service)
    for s in services:
        for inc in s.get("includes", []):
            target = by_start.get(inc["start"])
            if target is None:  # an include of a service not in the list: as declared
                target = Service(UUID(inc["uuid"]), [], primary=False)
                target.handle, target.end_group_handle = inc["start"], inc["end"]
            declaration = IncludedServiceDeclaration(target)
            declaration.handle = declaration.end_group_handle = inc["handle"]
            declaration.value = spec_include_value(target)
            attributes.append(declaration)
        chars = s.get("characteristics", [])
        for i, c in enumerate(chars):
            value = bytes.fromhex(c["value"]) if c.get("value") else b""
            char = Characteristic(UUID(c["uuid"]), props_value(c["properties"]), READWRITE, value)
            char.handle = c["value_handle"]
            char.end_group_handle = chars[i + 1]["declaration_handle"] - 1 if i + 1 < len(chars) else s["end"]
            declaration = CharacteristicDeclaration(char, c["value_handle"])
            declaration.handle = declaration.end_group_handle = c["declaration_handle"]
            attributes += [declaration, char]
            for d in c.get("descriptors", []):
                descriptor = Descriptor(UUID(d["uuid"]), READWRITE,
                                        bytes.fromhex(d["value"]) if d.get("value") else b"")
                descriptor.handle = descriptor.end_group_handle = d["handle"]
                attributes.append(descriptor)
    attributes.sort(key=lambda a: a.handle)
    handles = [a.handle for a in attributes]
    if len(set(handles)) != len(handles):
        raise ValueError("two attributes share a handle")
    server.attributes[:] = attributes
    server.attributes_by_handle.clear()
    device.gatt_service = None
    return device


def attribute_value(attribute) -> bytes | None:
    value = attribute.value
    return bytes(value) if isinstance(value, (bytes, bytearray)) else None


async def compute(device: Device, include_all: bool = False) -> dict[str, Any]:
    """Bumble's Database Hash of ``device``'s database, with what was hashed."""
    server = device.gatt_server
    for attribute in server.attributes:  # Bumble's include values -> the spec's
        if isinstance(attribute, IncludedServiceDeclaration):
            attribute.value = spec_include_value(attribute.service)
    reader = _Reader(device)
    gatt = GenericAttributeProfileService.__new__(GenericAttributeProfileService)  # for its methods only
    digest = gatt.get_database_hash(reader)
    hashed, listed, parts = [], [], []
    for attribute in server.attributes:
        part = GenericAttributeProfileService.get_attribute_data(attribute)
        parts.append(part)
        value = attribute_value(attribute)
        if part:
            hashed.append({"handle": attribute.handle, "type": uuid_text(attribute.type),
                           "value": value.hex() if value is not None and len(part) > 4 else None,
                           "bytes": part.hex()})
        if include_all:
            listed.append({"handle": attribute.handle, "type": uuid_text(attribute.type),
                           "value": value.hex() if value is not None else None, "hashed": bool(part)})
    served = None
    for attribute in server.attributes:
        if isinstance(attribute, Characteristic) and attribute.uuid == GATT_DATABASE_HASH_CHARACTERISTIC:
            if device.gatt_service is not None:  # Bumble's own characteristic: read it as a client would
                served = bytes(await attribute.read_value(reader)).hex()
    out: dict[str, Any] = {"hash": digest.hex(), "hash_msb_first": digest[::-1].hex(), "served_hash": served,
                           "m": b"".join(parts).hex(), "attribute_count": len(server.attributes),
                           "hashed": hashed}
    if include_all:
        out["attributes"] = listed
    return out


def load_services(text: str) -> list[dict[str, Any]]:
    data = json.loads(text)
    if isinstance(data, dict):
        data = data["services"]
    if not isinstance(data, list):
        raise ValueError("expected a list of services or an object with 'services'")
    return data


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="GATT Database Hash computed by Bumble (see the module docstring)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--profile", choices=sorted(PROFILES), help="the board's database (layout: module docstring)")
    src.add_argument("--json", help="database JSON file ('-': stdin)")
    p.add_argument("--name", default="attled", help="GAP Device Name of a --profile database (not hashed)")
    p.add_argument("--all", action="store_true", help="also list every attribute")
    args = p.parse_args(argv)
    try:
        if args.profile:
            device, source = profile_device(args.profile, args.name), f"profile:{args.profile}"
        else:
            text = sys.stdin.read() if args.json == "-" else open(args.json, encoding="utf-8").read()
            device, source = json_device(load_services(text)), f"json:{args.json}"
        out = asyncio.run(compute(device, args.all))
    except (ValueError, KeyError, OSError) as error:
        print(json.dumps({"result": "error", "error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    print(json.dumps({"source": source, **out}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
