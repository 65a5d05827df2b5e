"""gattdb: a Bumble peripheral whose GATT database is built at random from a seed.

The test peer for attled's general GATT tool (issue 14): discovery, reads and
writes of every shape that real firmware produces, with the database itself as
the ground truth.

In a world (vworld ``--device NAME:gattdb[:key=value,...]``)
-----------------------------------------------------------
    vworld --host tcp-server:127.0.0.1:0 --device Gdb:gattdb:seed=3,mtu=23

Keys of this profile: ``seed=N`` (default 1), ``last_ffff=1`` (shift the
generated services so that the database ends at handle 0xFFFF; Bumble's own
GAP and GATT services stay at 0x0001.., so there is a gap of unused handles
in between).  Every key of the LED peripherals works too (options.py):
``mtu=23`` caps the server's ATT_MTU (and the peer sends its own Exchange MTU
Request), ``interval=MS``, ``addr=..``, and the ``fault_KIND=REQ[#N]`` faults;
``fault_corrupt=prepare_write#N`` flips the last byte of the N-th Prepare
Write Response's echoed value (the queued value stays right), for testing a
client's echo check and its Execute Write (flags 0) cancel.
``notify_on_subscribe=1``: when a client writes a CCCD to enable
notifications (or indications), the peer sends the characteristic's current
value once (a Handle Value Notification, or Indication when only indications
were enabled; truncated to ATT_MTU-3 as Bumble does), after the Write Response,
and reports ``{"event": "notify", "handle": H, "value": hex, "indication": bool}``.

It advertises its name only (Complete Local Name, plus Flags when they fit).

Standalone
----------
    PYTHONPATH=Tools python -m attledtools.peers.gattdb --seed N --dump [--last-ffff] [--name NAME]

prints the database JSON (below) on one line and exits, without any world.
The same options give the same database, handle for handle, as the peer in a
world (``--name`` must match the device NAME: it is the GAP Device Name).

The database
------------
* 3-6 primary services, 16-bit and 128-bit UUIDs mixed, one of them empty
  (declaration only); Bumble adds GAP (0x1800) and GATT (0x1801) first.
* 2-3 secondary services (the first one with a 128-bit UUID, the second with
  a 16-bit one), each pulled in by an include declaration in one or two
  primary services; one primary service includes both a 16-bit and a 128-bit
  one.  An include declaration of a 128-bit service carries no UUID (Core Vol
  3 Part G 3.2): a client must Read the included service's declaration.
  (Bumble itself would put the 16 bytes in the include; this module fixes
  the value after Bumble has built the database.)
* Characteristics: each of the 31 non-empty combinations of read,
  write-without-response, write, notify and indicate at least once, plus a
  few random extra ones; 16-bit and 128-bit UUIDs, one UUID used twice (in
  two services).  CCCD (0x2902) on every notify/indicate one (Bumble adds it
  last); a Characteristic User Description (0x2901, read-only text) and/or a
  vendor descriptor (128-bit UUID, 1-30 bytes, sometimes writable) on some.
  At least one service ends with a characteristic that has no descriptors.
* Values 1-400 bytes, deterministic from the seed; the first readable ones
  are 1, 22, 23, 400, 2 and 255 bytes long (around MTU 23's 22-byte reads).

Properties are enforced as real firmware does (LedPeripheral's ATT screen):
Read / Read Blob of a characteristic without read: 0x02 Read Not Permitted
(also for Read By Type); Write Request and Prepare Write without write: 0x03;
Write Command without write-without-response: dropped; writes to
declarations, CUDs and read-only vendor descriptors: 0x03.  Written values
(Write Request, Write Command, Prepare + Execute Write, up to 512 bytes) are
stored, and later reads return them.

JSON format
-----------
One object (on startup in a world it is the event ``gatt_database``, with
vworld's ``t`` and ``"device": NAME``; the standalone dump has the same keys
except ``t``)::

  {"event": "gatt_database", "device": "Gdb", "name": "Gdb", "seed": 3,
   "last_ffff": false, "attribute_count": 131, "last_handle": 131,
   "services": [
     {"uuid": "1800", "start": 1, "end": 5, "primary": true,
      "includes": [],
      "characteristics": [
        {"uuid": "2a00", "declaration_handle": 2, "value_handle": 3,
         "properties": ["read"], "value": "476462",
         "descriptors": []}, ...]},
     {"uuid": "c2b0...-...", "start": 10, "end": 14, "primary": false, ...},
     {"uuid": "b3c1", "start": 15, "end": 40, "primary": true,
      "includes": [{"handle": 16, "uuid": "c2b0...", "start": 10, "end": 14}],
      "characteristics": [
        {"uuid": "...", "declaration_handle": 17, "value_handle": 18,
         "properties": ["read", "notify"], "value": "00ff...",
         "descriptors": [{"uuid": "2901", "handle": 19, "value": "...",
                          "writable": false},
                         {"uuid": "2902", "handle": 20, "value": "0000",
                          "writable": true}]}, ...]}]}

* ``services``: every service, primary and secondary, in handle order.
* UUIDs: 16-bit ones as 4 lower-case hex digits ("2a00"), 128-bit ones in the
  canonical lower-case 8-4-4-4-12 form.
* ``includes``: the service's include declarations in handle order:
  declaration ``handle``, and the included service's ``uuid``, ``start``,
  ``end``.
* ``properties``: names of the set bits, low bit first, as attled names them:
  broadcast, read, write-without-response, write, notify, indicate,
  signed-write, extended.
* ``value``: the value as hex (in full) when the characteristic has the read
  property, else null.  Every descriptor here is readable; its ``value`` is
  its hex (a CCCD reads "0000" until a client writes it), ``writable`` says
  whether it accepts writes.
* ``last_handle``: the highest handle in use (0xFFFF = 65535 with last_ffff).

Events of the peer in a world (besides LedPeripheral's connected, att, mtu,
rejected, read_rejected, subscribed, fault ...):

  {"event": "write", "device": NAME, "handle": H, "uuid": .., "value": hex,
   "length": N, "op": "request|command|execute", "target": "characteristic|descriptor"}
  {"event": "notify", "device": NAME, "handle": H, "value": hex, "indication": bool}
      (notify_on_subscribe=1: the value sent after a CCCD write)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import struct
import sys
import uuid as uuidlib
from dataclasses import dataclass, field
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

from attledtools.peers.options import PeripheralOptions
from attledtools.peers.peripheral import LedPeripheral

Props = Characteristic.Properties

OPTION_KEYS = ("seed", "last_ffff", "notify_on_subscribe")

PROPERTY_NAMES = ["broadcast", "read", "write-without-response", "write", "notify", "indicate",
                  "signed-write", "extended"]
# The five properties combined: read, write without response, write, notify, indicate.
COMBINABLE = (Props.READ, Props.WRITE_WITHOUT_RESPONSE, Props.WRITE, Props.NOTIFY, Props.INDICATE)
ALL_COMBINATIONS = [
    Props(sum(p for i, p in enumerate(COMBINABLE) if mask & (1 << i))) for mask in range(1, 32)
]
SPECIAL_LENGTHS = (1, 22, 23, 400, 2, 255)
MAX_VALUE = 400
ATT_MAX_VALUE = 512
# The writes reported as "write" events, by ATT opcode: Bumble's own.
WRITE_OPS = {att.Opcode.ATT_WRITE_REQUEST: "request", att.Opcode.ATT_WRITE_COMMAND: "command",
             att.Opcode.ATT_EXECUTE_WRITE_REQUEST: "execute"}

UUID_CUD = "2901"
UUID_CCCD = "2902"
TYPE_PRIMARY = UUID.from_16_bits(0x2800)
TYPE_SECONDARY = UUID.from_16_bits(0x2801)


# -----------------------------------------------------------------------------
# The model, generated from the seed (plain data, no Bumble)
# -----------------------------------------------------------------------------
@dataclass
class DescModel:
    uuid: str
    value: bytes
    writable: bool


@dataclass
class CharModel:
    uuid: str
    props: Props
    value: bytes
    descriptors: list[DescModel] = field(default_factory=list)


@dataclass
class ServiceModel:
    uuid: str
    primary: bool
    chars: list[CharModel] = field(default_factory=list)
    includes: list[int] = field(default_factory=list)  # indices into the secondary list


@dataclass
class DbModel:
    seed: int
    secondaries: list[ServiceModel]
    primaries: list[ServiceModel]


def _uuid16(rng: random.Random) -> str:
    # Outside the GATT declaration/descriptor (0x28xx/0x29xx) and GAP/GATT ranges.
    return f"{rng.randrange(0xB000, 0xC000):04x}"


def _uuid128(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128)))


def props_names(props: int) -> list[str]:
    return [name for bit, name in enumerate(PROPERTY_NAMES) if props & (1 << bit)]


def generate(seed: int) -> DbModel:
    """The database for ``seed`` (see the module docstring for its shape)."""
    rng = random.Random(seed)
    n_primary = rng.randint(3, 6)
    n_secondary = rng.randint(2, 3)

    secondaries = [ServiceModel(_uuid128(rng) if i != 1 and (i == 0 or rng.random() < 0.5) else _uuid16(rng), False)
                   for i in range(n_secondary)]
    kinds = ["16", "128"] + [rng.choice(["16", "128"]) for _ in range(n_primary - 2)]
    rng.shuffle(kinds)
    primaries = [ServiceModel(_uuid16(rng) if k == "16" else _uuid128(rng), True) for k in kinds]
    empty = rng.randrange(n_primary)
    full = [i for i in range(n_primary) if i != empty]

    # Includes: one primary includes the 128-bit and the 16-bit secondary (in a
    # random order); every secondary is included at least once, some twice.
    both = rng.choice(full)
    primaries[both].includes = rng.sample([0, 1], 2)
    for s in range(2, n_secondary):
        primaries[rng.choice(full)].includes.append(s)
    for s in range(n_secondary):
        if rng.random() < 0.3:
            other = rng.choice(full)
            if s not in primaries[other].includes:
                primaries[other].includes.append(s)

    # Characteristics: every combination, plus a few; spread over the
    # secondaries (1-2 each) and the non-empty primaries (at least one each).
    combos = list(ALL_COMBINATIONS) + [rng.choice(ALL_COMBINATIONS) for _ in range(rng.randint(0, 4))]
    rng.shuffle(combos)
    holders = [secondaries[i] for i in range(n_secondary)] + [primaries[i] for i in full]
    for i, holder in enumerate(holders):
        count = rng.randint(1, 2) if not holder.primary else 1
        for _ in range(count):
            holder.chars.append(CharModel("", combos.pop(), b""))
    primary_holders = [primaries[i] for i in full]
    while combos:
        rng.choice(primary_holders).chars.append(CharModel("", combos.pop(), b""))

    chars = [c for h in holders for c in h.chars]
    for ch in chars:
        ch.uuid = _uuid16(rng) if rng.random() < 0.5 else _uuid128(rng)
        if rng.random() < 0.4:
            names = ",".join(props_names(ch.props))
            ch.descriptors.append(DescModel(UUID_CUD, f"{ch.uuid[:4]} {names}".encode(), False))
        if rng.random() < 0.3:
            ch.descriptors.append(DescModel(_uuid128(rng), rng.randbytes(rng.randint(1, 30)), rng.random() < 0.5))
        rng.shuffle(ch.descriptors)
    # One UUID used twice, in two different services.
    a, b = rng.sample(range(len(holders)), 2)
    holders[b].chars[-1].uuid = holders[a].chars[0].uuid

    # A service that ends with a characteristic without descriptors: its last
    # characteristic swaps with one that has neither notify nor indicate.
    target = rng.choice(primary_holders)
    plain = [c for c in chars if not c.props & (Props.NOTIFY | Props.INDICATE)]
    pick = rng.choice(plain)
    owner = next(h for h in holders if any(c is pick for c in h.chars))
    i_pick = next(i for i, c in enumerate(owner.chars) if c is pick)
    owner.chars[i_pick], target.chars[-1] = target.chars[-1], pick
    pick.descriptors = []

    # Values: the first readable ones take the special lengths, the rest are
    # short or up to 400 bytes.
    special = list(SPECIAL_LENGTHS)
    for ch in chars:
        if ch.props & Props.READ and special:
            length = special.pop(0)
        else:
            length = rng.randint(1, 30) if rng.random() < 0.5 else rng.randint(1, MAX_VALUE)
        ch.value = rng.randbytes(length)
    return DbModel(seed, secondaries, primaries)


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


# -----------------------------------------------------------------------------
# The peripheral in a world
# -----------------------------------------------------------------------------
def check_options(opts: PeripheralOptions) -> None:
    """Validate this profile's keys (called by PeripheralOptions.parse)."""
    try:
        seed = int(opts.profile_options.get("seed", "1"), 0)
    except ValueError:
        raise ValueError(f"gattdb: seed must be an integer, not {opts.profile_options['seed']!r}") from None
    if seed < 0:
        raise ValueError("gattdb: seed must be >= 0")
    if opts.profile_options.get("last_ffff", "0") not in ("0", "1"):
        raise ValueError("gattdb: last_ffff must be 0 or 1")
    if opts.profile_options.get("notify_on_subscribe", "0") not in ("0", "1"):
        raise ValueError("gattdb: notify_on_subscribe must be 0 or 1")


class GattDbPeripheral(LedPeripheral):
    """LedPeripheral (advertising, connection, ATT screen, mtu, faults) with
    the seeded database in place of an LED service."""

    def __init__(self, opts: PeripheralOptions, emit) -> None:
        super().__init__(opts, emit)
        self.seed = int(opts.profile_options.get("seed", "1"), 0)
        self.last_ffff = opts.profile_options.get("last_ffff", "0") == "1"
        self.notify_on_subscribe = opts.profile_options.get("notify_on_subscribe", "0") == "1"
        self.model = generate(self.seed)
        self.store = Store(self._on_write)
        self._write_op = "request"
        self.database: dict[str, Any] = {}

    def _add_services(self, device: Device) -> None:
        install(device, self.model, self.store, self.last_ffff)

    def _screen(self, server, bearer, pdu) -> bool:
        passed = super()._screen(server, bearer, pdu)
        op = int(pdu.op_code)
        if passed and op in WRITE_OPS:
            self._write_op = WRITE_OPS[op]
        return passed

    def _on_write(self, attribute, value: bytes, target: str) -> None:
        uuid = attribute.uuid if isinstance(attribute, Characteristic) else getattr(attribute, "type", None)
        self.emit("write", handle=attribute.handle if attribute is not None else -1,
                  uuid=uuid_text(uuid) if uuid is not None else None, value=value.hex(), length=len(value),
                  op=self._write_op, target=target)

    def _on_subscription(self, bearer, characteristic, notify: bool, indicate: bool) -> None:
        super()._on_subscription(bearer, characteristic, notify, indicate)
        if self.notify_on_subscribe and (notify or indicate) and self.connection is not None:
            # A task: it runs after Bumble has sent the Write Response to the CCCD write.
            self._spawn(self._send_current(self.connection, characteristic, indication=not notify))

    async def _send_current(self, connection, characteristic, indication: bool) -> None:
        key = next((k for k, a in self.store.attribute_of.items() if a is characteristic), None)
        if key is None:
            return
        value = self.store.values[key][: connection.att_mtu - 3]
        self.emit("notify", handle=characteristic.handle, value=value.hex(), indication=indication)
        if indication:
            await self.device.indicate_subscriber(connection, characteristic, value)
        else:
            await self.device.notify_subscriber(connection, characteristic, value)

    def _first_value_handle(self) -> int:
        generated = {id(v) for v in self.store.attribute_of.values()}
        chars = [a for a in self.device.gatt_server.attributes if isinstance(a, Characteristic) and id(a) in generated]
        notifying = [c for c in chars if c.properties & Props.NOTIFY]
        return (notifying or chars)[0].handle

    async def start(self) -> None:
        assert self.device is not None
        await self.device.power_on()
        self.database = await describe_database(self.device)
        self.emit("gatt_database", name=self.opts.name, seed=self.seed, last_ffff=self.last_ffff, **self.database)
        await self.advertise()

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "name": self.opts.name,
            "profile": "gattdb",
            "address": self.opts.address,
            "interval_ms": self.opts.interval_ms,
            "adv_data": self.adv_data.hex(),
            "seed": self.seed,
            "last_ffff": self.last_ffff,
            "notify_on_subscribe": self.notify_on_subscribe,
            "attribute_count": self.database.get("attribute_count"),
            "last_handle": self.database.get("last_handle"),
        }
        if self.opts.faults:
            info["faults"] = [f"{f.kind}={f.request}#{f.nth}" + (f"/{f.arg}" if f.arg is not None else "")
                              for f in self.opts.faults]
        if self.opts.mtu:
            info["mtu"] = self.opts.mtu
        return info


PERIPHERAL = GattDbPeripheral


# -----------------------------------------------------------------------------
# Standalone dump
# -----------------------------------------------------------------------------
async def dump(seed: int, name: str, last_ffff: bool) -> dict[str, Any]:
    """The database JSON for these options, from a Device that never powers on."""
    device = Device(config=DeviceConfiguration(name=name))
    install(device, generate(seed), Store(), last_ffff)
    return {"event": "gatt_database", "device": name, "name": name, "seed": seed, "last_ffff": last_ffff,
            **await describe_database(device)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Random GATT database from a seed (see the module docstring).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", action="store_true", help="print the database JSON and exit")
    parser.add_argument("--last-ffff", action="store_true", help="the database ends at handle 0xFFFF")
    parser.add_argument("--name", default="GattDb", help="device name (the GAP Device Name value)")
    parser.add_argument("--indent", type=int, default=None, help="pretty-print with this indent")
    args = parser.parse_args(argv)
    if not args.dump:
        parser.error("nothing to do: give --dump (in a world: vworld --device NAME:gattdb:seed=N)")
    print(json.dumps(asyncio.run(dump(args.seed, args.name, args.last_ffff)), indent=args.indent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
