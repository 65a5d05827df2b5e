"""gattdb's database on a Bumble GATT server: the model installed as Bumble
services (with the values' store), and the database described back as JSON
(the format is gattdb.py's docstring)."""

from __future__ import annotations

import struct
import uuid as uuidlib
from typing import Any

from bumble import att
from bumble.core import UUID
from bumble.device import Device, DeviceConfiguration
from bumble.gatt import (
    Characteristic,
    CharacteristicDeclaration,
    CharacteristicValue,
    Descriptor,
    IncludedServiceDeclaration,
    Service,
)

from attledtools.peers.gattdb_model import DbModel, Props, ServiceModel, generate, props_names

ATT_MAX_VALUE = 512
TYPE_PRIMARY = UUID.from_16_bits(0x2800)
TYPE_SECONDARY = UUID.from_16_bits(0x2801)


# -----------------------------------------------------------------------------
# Bumble objects
# -----------------------------------------------------------------------------
class Store:
    """The current values, by model object, and what writes them."""

    def __init__(self, on_write=None):
        self.values: dict[int, bytes] = {}
        self.on_write = on_write  # (attribute, value, target) -> None
        self.attribute_of: dict[int, Any] = {}

    def value(self, model, props: int | None) -> CharacteristicValue:
        key = id(model)
        self.values[key] = model.value

        def read(_connection) -> bytes:
            if props is not None and not props & Props.READ:
                raise att.ATT_Error(att.ATT_READ_NOT_PERMITTED_ERROR)
            return self.values[key]

        def write(_connection, value: bytes) -> None:
            value = bytes(value)
            if len(value) > ATT_MAX_VALUE:
                raise att.ATT_Error(att.ATT_INVALID_ATTRIBUTE_LENGTH_ERROR)
            self.values[key] = value
            if self.on_write is not None:
                self.on_write(self.attribute_of.get(key), value, "characteristic" if props is not None else "descriptor")

        return CharacteristicValue(read=read, write=write)


def build_services(model: DbModel, store: Store) -> list[Service]:
    """Bumble Services for the model, in the order to add them: each
    secondary just before the first primary that includes it.

    They must be added in that order: a Service whose included service is not
    yet in the server makes Bumble's add_service add that service *inside*
    the including one's handle range (after its declaration), which overlaps
    the two groups."""
    secondaries: list[Service] = []

    def characteristics(svc: ServiceModel) -> list[Characteristic]:
        out = []
        for ch in svc.chars:
            descriptors = []
            for d in ch.descriptors:
                if d.writable:
                    desc = Descriptor(d.uuid, Descriptor.READABLE | Descriptor.WRITEABLE, store.value(d, None))
                    store.attribute_of[id(d)] = desc
                else:
                    desc = Descriptor(d.uuid, Descriptor.READABLE, d.value)
                descriptors.append(desc)
            char = Characteristic(ch.uuid, ch.props, Characteristic.READABLE | Characteristic.WRITEABLE,
                                  store.value(ch, int(ch.props)), descriptors)
            store.attribute_of[id(ch)] = char
            out.append(char)
        return out

    for svc in model.secondaries:
        secondaries.append(Service(svc.uuid, characteristics(svc), primary=False))
    ordered: list[Service] = []
    for svc in model.primaries:
        included = [secondaries[i] for i in svc.includes]
        ordered += [s for s in included if not any(s is o for o in ordered)]
        ordered.append(Service(svc.uuid, characteristics(svc), primary=True, included_services=included))
    return ordered


def install(device: Device, model: DbModel, store: Store, last_ffff: bool) -> None:
    """Add the model's services to ``device``; fix the include declarations;
    with ``last_ffff``, move them so that the last attribute is at 0xFFFF."""
    server = device.gatt_server
    first = len(server.attributes)
    for service in build_services(model, store):
        device.add_service(service)
    ours = server.attributes[first:]
    if last_ffff and ours:
        shift = 0xFFFF - ours[-1].handle
        for attribute in ours:
            attribute.handle += shift
            attribute.end_group_handle += shift
            if isinstance(attribute, CharacteristicDeclaration):
                attribute.value_handle += shift
                char = attribute.characteristic
                attribute.value = struct.pack("<BH", char.properties, attribute.value_handle) + char.uuid.to_pdu_bytes()
        server.attributes_by_handle.clear()
    for attribute in ours:
        if isinstance(attribute, IncludedServiceDeclaration):
            included = attribute.service
            value = struct.pack("<HH", included.handle, included.end_group_handle)
            if len(included.uuid.to_pdu_bytes()) == 2:
                value += included.uuid.to_pdu_bytes()
            attribute.value = value  # Core Vol 3 Part G 3.2: no 128-bit UUID here


def uuid_text(uuid: UUID) -> str:
    raw = uuid.to_pdu_bytes()
    if len(raw) == 2:
        return f"{struct.unpack('<H', raw)[0]:04x}"
    return str(uuidlib.UUID(bytes=raw[::-1]))


class _Reader:
    """Stands in for a connection when the database reads its own values."""

    def __init__(self, device: Device) -> None:
        self.device = device


async def describe_database(device: Device) -> dict[str, Any]:
    """The database as Bumble's server holds it (format: module docstring)."""
    # get_database_hash wants a connection with .device, read_cccd a hashable
    # bearer (with no subscription: "0000"); nothing else looks at it.
    reader = _Reader(device)
    attributes = device.gatt_server.attributes

    async def read(attribute) -> str:
        return bytes(await attribute.read_value(reader)).hex()

    services: list[dict[str, Any]] = []
    current_char: dict[str, Any] | None = None
    for attribute in attributes:
        if isinstance(attribute, Service):
            services.append({
                "uuid": uuid_text(attribute.uuid), "start": attribute.handle, "end": attribute.end_group_handle,
                "primary": attribute.type == TYPE_PRIMARY, "includes": [], "characteristics": [],
            })
            current_char = None
        elif isinstance(attribute, IncludedServiceDeclaration):
            included = attribute.service
            services[-1]["includes"].append({"handle": attribute.handle, "uuid": uuid_text(included.uuid),
                                             "start": included.handle, "end": included.end_group_handle})
        elif isinstance(attribute, CharacteristicDeclaration):
            char = attribute.characteristic
            current_char = {
                "uuid": uuid_text(char.uuid), "declaration_handle": attribute.handle,
                "value_handle": attribute.value_handle, "properties": props_names(int(char.properties)),
                "value": await read(char) if char.properties & Props.READ else None,
                "descriptors": [],
            }
            services[-1]["characteristics"].append(current_char)
        elif isinstance(attribute, Characteristic):
            continue  # the value attribute, described with its declaration
        elif isinstance(attribute, Descriptor):
            assert current_char is not None
            current_char["descriptors"].append({
                "uuid": uuid_text(attribute.type), "handle": attribute.handle, "value": await read(attribute),
                "writable": bool(attribute.permissions & Descriptor.WRITEABLE),
            })
        else:
            raise TypeError(f"unexpected attribute {attribute}")
    return {
        "attribute_count": len(attributes),
        "last_handle": attributes[-1].handle if attributes else 0,
        "services": services,
    }


async def dump(seed: int, name: str, last_ffff: bool) -> dict[str, Any]:
    """The database JSON for these options, from a Device that never powers on."""
    device = Device(config=DeviceConfiguration(name=name))
    install(device, generate(seed), Store(), last_ffff)
    return {"event": "gatt_database", "device": name, "name": name, "seed": seed, "last_ffff": last_ffff,
            **await describe_database(device)}
