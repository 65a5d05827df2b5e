"""LED peripherals for the attled test world, built on Bumble.

Three GATT profiles mimic the fixed firmware that attled must drive:

* ``pycom``    (LoPy4): red/green/blue characteristics, READ|WRITE
  (Write Request only), one byte each.
* ``particle`` (Xenon/Mesh): red/green/blue characteristics,
  READ|WRITE_WITHOUT_RESPONSE (Write Command only), one byte each.
* ``harness``  (Arduino): a READ|WRITE command characteristic taking one-byte
  commands (1/0 press/release button 1, 3/4 press/release button 2) and a
  READ|NOTIFY button characteristic (with CCCD) that notifies every accepted
  command byte.

Bumble's GATT server does not enforce characteristic properties (a Write
Request to a write-without-response-only characteristic succeeds there), so
this module screens every ATT PDU that reaches the server before Bumble sees
it, as real firmware would:

* Write Request / Prepare Write Request to a characteristic without WRITE, or
  to a declaration / read-only descriptor: ATT Error 0x03 Write Not Permitted.
* Write Command to a characteristic without WRITE_WITHOUT_RESPONSE: dropped.
* Signed Write Command without AUTHENTICATED_SIGNED_WRITES: dropped.
* A value whose length is not 1 for an LED/command characteristic: ATT Error
  0x0D Invalid Attribute Value Length (requests), dropped (commands).
* Read Request / Read Blob Request to a characteristic without READ:
  ATT Error 0x02 Read Not Permitted.

Every observable thing is reported through an ``emit(dict)`` callback (vworld
turns these into JSON lines); see ``LedPeripheral`` for the event shapes.

Fault options (``fault_*`` keys, see ``FAULT_HELP``) turn the peripheral into a
misbehaving peer for robustness tests: it can disconnect, stay silent, answer
with the wrong opcode, send truncated or oversized PDUs, unsolicited Error
Responses, notifications for undeclared handles, notification floods and
indications, ask for a 23-byte MTU and request illegal connection parameters.

Security options (``SECURITY_HELP``): ``secure=enc`` makes the LED
characteristics (and the button CCCD) need an encrypted link (Bumble's
READ/WRITE_REQUIRES_ENCRYPTION permissions: a Read or Write Request gets ATT
Error 0x0F Insufficient Encryption, a Write Command is dropped silently with
a ``write_dropped`` event); ``pairing=sc|legacy`` pairs Just Works with
bonding, LE Secure Connections or legacy only; bonds are kept in an in-memory
key store for the world's lifetime, so a central that comes back encrypts
with its stored LTK; ``forget_bonds=N`` forgets them all when the N-th
connection ends (the next encryption attempt gets status 0x06).

Profile ``gattdb`` (Tools/gattdb.py, listed in OTHER_PROFILES) is a
LedPeripheral subclass with a random GATT database built from a seed in place
of an LED service; it shares the options, the ATT screen and the faults.

The module is importable on its own: ``PeripheralOptions.parse()`` reads the
``NAME:PROFILE[:key=value,...]`` syntax, ``LedPeripheral(opts, emit)`` builds
the Bumble Device around a ``bumble.host.Host``, ``await p.start()`` powers it
on and advertises.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from bumble import att, hci, pairing, smp
from bumble.device import Connection, Device, DeviceConfiguration
from bumble.core import UUID
from bumble.gatt import (
    GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR, Characteristic, CharacteristicValue, Descriptor, Service,
)
from bumble.host import Host
from bumble.keys import MemoryKeyStore

logger = logging.getLogger("ledperipheral")

Props = Characteristic.Properties

# ATT error codes used here (Core Vol 3, Part F, 3.4.1.1): Bumble's own.
ATT_READ_NOT_PERMITTED = att.ATT_READ_NOT_PERMITTED_ERROR
ATT_WRITE_NOT_PERMITTED = att.ATT_WRITE_NOT_PERMITTED_ERROR
ATT_INVALID_ATTRIBUTE_VALUE_LENGTH = att.ATT_INVALID_ATTRIBUTE_LENGTH_ERROR
ATT_INSUFFICIENT_ENCRYPTION = att.ATT_INSUFFICIENT_ENCRYPTION_ERROR
ATT_ATTRIBUTE_NOT_FOUND = att.ATT_ATTRIBUTE_NOT_FOUND_ERROR
ATT_REQUEST_NOT_SUPPORTED = att.ATT_REQUEST_NOT_SUPPORTED_ERROR

# Attribute permissions of a characteristic / CCCD with secure=enc.
ENCRYPTION_REQUIRED = (
    att.Attribute.Permissions.READ_REQUIRES_ENCRYPTION | att.Attribute.Permissions.WRITE_REQUIRES_ENCRYPTION
)

# SMP AuthReq bits (Core Vol 3, Part H, 3.5.1).
AUTHREQ_BONDING = 0x01
AUTHREQ_SC = 0x08
SMP_PAIRING_REQUEST = 0x01

# ATT opcodes screened here: Bumble's own (att.Opcode).
_OP = att.Opcode
OP_READ_REQUEST = _OP.ATT_READ_REQUEST
OP_READ_BLOB_REQUEST = _OP.ATT_READ_BLOB_REQUEST
OP_WRITE_REQUEST = _OP.ATT_WRITE_REQUEST
OP_WRITE_COMMAND = _OP.ATT_WRITE_COMMAND
OP_SIGNED_WRITE_COMMAND = _OP.ATT_SIGNED_WRITE_COMMAND
OP_PREPARE_WRITE_REQUEST = _OP.ATT_PREPARE_WRITE_REQUEST
OP_ERROR_RESPONSE = _OP.ATT_ERROR_RESPONSE
OP_HANDLE_VALUE_NOTIFICATION = _OP.ATT_HANDLE_VALUE_NOTIFICATION
OP_HANDLE_VALUE_INDICATION = _OP.ATT_HANDLE_VALUE_INDICATION
OP_HANDLE_VALUE_CONFIRMATION = _OP.ATT_HANDLE_VALUE_CONFIRMATION
HCI_REMOTE_USER_TERMINATED = 0x13
INDICATION_TIMEOUT_S = 2.0
OVERSIZE_BUILD_MTU = 517
GATT_SERVICE_CHANGED_UUID = UUID.from_16_bits(0x2A05)

# Legacy advertising data limit (Core Vol 6, Part B, 2.3.1.1).
LEGACY_ADV_DATA_MAX = 31

# AD types (Core Supplement, Part A, 1).
AD_FLAGS = 0x01
AD_COMPLETE_128 = 0x07
AD_SHORTENED_NAME = 0x08
AD_COMPLETE_NAME = 0x09
ADV_FLAGS_VALUE = 0x06  # LE General Discoverable | BR/EDR Not Supported

Emit = Callable[[dict[str, Any]], None]


# -----------------------------------------------------------------------------
# Profile definitions
# -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CharSpec:
    """One characteristic of a profile: its role name, UUID and properties."""

    role: str  # "red" | "green" | "blue" | "command" | "button"
    uuid: str
    properties: Props


@dataclasses.dataclass(frozen=True)
class ProfileSpec:
    name: str
    service_uuid: str
    chars: tuple[CharSpec, ...]

    @property
    def is_rgb(self) -> bool:
        return self.name in ("pycom", "particle")


PROFILES: dict[str, ProfileSpec] = {
    "pycom": ProfileSpec(
        "pycom",
        "36353433-3231-3039-3837-363534333231",
        (
            CharSpec("red", "36353433-3231-3039-3837-363534336261", Props.READ | Props.WRITE),
            CharSpec("green", "36353433-3231-3039-3837-363534336262", Props.READ | Props.WRITE),
            CharSpec("blue", "36353433-3231-3039-3837-363534336263", Props.READ | Props.WRITE),
        ),
    ),
    "particle": ProfileSpec(
        "particle",
        "b4250400-fb4b-4746-b2b0-93f0e61122c6",
        (
            CharSpec(
                "red",
                "b4250401-fb4b-4746-b2b0-93f0e61122c6",
                Props.READ | Props.WRITE_WITHOUT_RESPONSE,
            ),
            CharSpec(
                "green",
                "b4250402-fb4b-4746-b2b0-93f0e61122c6",
                Props.READ | Props.WRITE_WITHOUT_RESPONSE,
            ),
            CharSpec(
                "blue",
                "b4250403-fb4b-4746-b2b0-93f0e61122c6",
                Props.READ | Props.WRITE_WITHOUT_RESPONSE,
            ),
        ),
    ),
    "harness": ProfileSpec(
        "harness",
        "19B10010-E8F2-537E-4F6C-D104768A1214",
        (
            CharSpec("command", "19B10011-E8F2-537E-4F6C-D104768A1214", Props.READ | Props.WRITE),
            CharSpec("button", "19B10012-E8F2-537E-4F6C-D104768A1214", Props.READ | Props.NOTIFY),
        ),
    ),
}

# Profiles built by other modules on the same options and LedPeripheral
# machinery: profile name -> module in Tools/.  The module provides
# OPTION_KEYS (its extra device keys), check_options(opts) (raises
# ValueError) and PERIPHERAL (a LedPeripheral subclass).
OTHER_PROFILES = {"gattdb": "gattdb"}


def other_profile(name: str):
    """The module serving a profile of OTHER_PROFILES (imported on first use)."""
    import importlib

    return importlib.import_module(OTHER_PROFILES[name])


# Harness commands: byte -> (button index, pressed)
HARNESS_COMMANDS = {1: (0, 1), 0: (0, 0), 3: (1, 1), 4: (1, 0)}


# -----------------------------------------------------------------------------
# Options
# -----------------------------------------------------------------------------
# ATT requests a fault can be triggered by: name -> opcode.
REQUEST_NAMES: dict[str, int] = {
    "mtu": _OP.ATT_EXCHANGE_MTU_REQUEST,
    "find_info": _OP.ATT_FIND_INFORMATION_REQUEST,
    "find_by_type": _OP.ATT_FIND_BY_TYPE_VALUE_REQUEST,
    "read_by_type": _OP.ATT_READ_BY_TYPE_REQUEST,
    "read": _OP.ATT_READ_REQUEST,
    "read_blob": _OP.ATT_READ_BLOB_REQUEST,
    "read_multiple": _OP.ATT_READ_MULTIPLE_REQUEST,
    "read_multiple_variable": _OP.ATT_READ_MULTIPLE_VARIABLE_REQUEST,
    "read_by_group": _OP.ATT_READ_BY_GROUP_TYPE_REQUEST,
    "write": _OP.ATT_WRITE_REQUEST,
    "prepare_write": _OP.ATT_PREPARE_WRITE_REQUEST,
    "execute_write": _OP.ATT_EXECUTE_WRITE_REQUEST,
}
REQUEST_OPCODE_NAMES = {op: name for name, op in REQUEST_NAMES.items()}
# Request opcode -> the response opcode the ATT client expects.
RESPONSE_FOR = {op: op + 1 for op in REQUEST_NAMES.values()}

FAULT_KINDS = (
    "disconnect_on", "disconnect_after", "no_answer", "wrong_opcode", "truncate", "oversize",
    "spurious_error", "stray_notify", "flood", "indicate", "corrupt", "service_changed",
)

FAULT_HELP = """\
Fault options (device keys), each fault_KIND=TRIGGER[/ARG]; several may be given.
TRIGGER is an ATT request name, optionally #N for its N-th occurrence on the
connection (default #1): mtu find_info find_by_type read_by_type read read_blob
read_multiple read_by_group write prepare_write execute_write (or a hex opcode).
  fault_disconnect_on=REQ[/REASON]    do not answer REQ: disconnect (default 0x13)
  fault_disconnect_after=REQ[/REASON] answer REQ, then disconnect at once
  fault_no_answer=REQ                 never answer REQ (the link stays up)
  fault_wrong_opcode=REQ[/OPCODE]     answer REQ with its response's opcode
                                      replaced (default Read Response 0x0b,
                                      Read By Type Response 0x09 for a read)
  fault_truncate=REQ[/N]              cut N bytes (default 1) off the response:
                                      a Read By Type Response's data then no
                                      longer divides by its length byte
  fault_oversize=REQ                  build the response for ATT_MTU 517 whatever
                                      was negotiated (list responses carry every
                                      entry; padded with whole entries / zero
                                      bytes until longer than ATT_MTU)
  fault_spurious_error=REQ[/OPCODE]   first send an Error Response naming request
                                      OPCODE (default Read Request 0x0a) that was
                                      never made, then answer REQ normally
  fault_stray_notify=REQ[/COUNT]      first send COUNT (default 3) notifications
                                      for handles not in the database
                                      (0x0000, 0xfffe, 0x1234, ...), then answer
  fault_flood=REQ[/COUNT]             first send COUNT (default 300) notifications
                                      of the first LED characteristic back to
                                      back, then answer
  fault_indicate=REQ[/HANDLE]         first send a Handle Value Indication (default:
                                      the first LED characteristic's value handle),
                                      then answer; reports indication_confirmed
                                      {ms} or indication_unconfirmed (after 2 s)
  fault_service_changed=REQ[/RANGE]   first indicate Service Changed (the GATT
                                      service's 0x2A05 value handle) for the
                                      handle range RANGE = 0xSSSSEEEE (default
                                      0x0001ffff: everything), then answer;
                                      reports indication_confirmed as above
  fault_corrupt=REQ                   flip (XOR 0xff) the last byte of the
                                      response: for prepare_write, the echoed
                                      part value no longer matches what was
                                      sent (the server still queued the right
                                      bytes)
Every fault applied is reported as {"event":"fault","kind":..,"request":..,"nth":N,...}.
Related keys: mtu=23 (ask for / allow only a 23-byte ATT_MTU),
unsupported=OP[+OP...] (hex ATT request opcodes, e.g. 20+0e: answered with
Error Response 0x06 Request Not Supported, as a server of an older ATT
version; reported as {"event":"unsupported","op":N}),
conn_update_params=IMIN,IMAX,LAT,TO (e.g. 4,2,600,5: illegal),
security_request=1 (SMP Security Request on connect).
"""

SECURITY_HELP = """\
Security options (device keys):
  secure=enc            the LED characteristics (red/green/blue, command,
                        button) and the button's CCCD need an encrypted link
                        (READ/WRITE_REQUIRES_ENCRYPTION): unencrypted, a Read
                        or Write Request gets ATT Error 0x0F Insufficient
                        Encryption ("read_rejected" / "rejected"), a Write
                        Command is dropped without a word ("write_dropped"),
                        as real firmware does.  secure=auth is refused: Just
                        Works gives no MITM protection.
  pairing=sc|legacy     how the peer pairs (always Just Works, IO capability
                        NoInputNoOutput, bonding): sc (default) LE Secure
                        Connections, legacy (Secure Connections off) legacy
                        pairing.  The peer distributes its identity (IRK and
                        static address) and, legacy, its LTK with a random
                        EDIV/Rand; it accepts the central's identity.
  forget_bonds=N        when the N-th connection ends, forget every bond: the
                        central's next LE Enable Encryption gets a negative LTK
                        reply (Encryption Change status 0x06 PIN or Key Missing)
  security_request=1    send an SMP Security Request on connect (AuthReq:
                        Bonding, plus SC with pairing=sc)
Bonds live in an in-memory key store for the world's lifetime.  Events:
pairing {result: complete, sc, bonded, identity, irk} | {result: failed, reason},
encryption {enabled, status, key_size, during_pairing}, ltk_request {found,
source: pairing|bond|none, ediv, rand}, bonds_forgotten {count}, write_dropped.
"""


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault: what (kind), on which request (op, nth), and its argument."""

    kind: str
    op: int
    nth: int = 1
    arg: int | None = None

    @classmethod
    def parse(cls, kind: str, text: str) -> Fault:
        trigger, _, arg_text = text.partition("/")
        name, _, nth_text = trigger.partition("#")
        name = name.strip().lower()
        if name in REQUEST_NAMES:
            op = REQUEST_NAMES[name]
        else:
            try:
                op = int(name, 16)
            except ValueError:
                raise ValueError(
                    f"fault_{kind}: unknown request {name!r} (known: {', '.join(REQUEST_NAMES)} or a hex opcode)"
                ) from None
            if op not in REQUEST_OPCODE_NAMES:
                raise ValueError(f"fault_{kind}: 0x{op:02x} is not an ATT request opcode")
        try:
            nth = int(nth_text) if nth_text else 1
            arg = int(arg_text, 0) if arg_text else None
        except ValueError:
            raise ValueError(f"fault_{kind}={text!r}: expected REQUEST[#N][/NUMBER]") from None
        if nth < 1:
            raise ValueError(f"fault_{kind}: #N counts from 1")
        return cls(kind, op, nth, arg)

    @property
    def request(self) -> str:
        return REQUEST_OPCODE_NAMES[self.op]


def default_address(index: int) -> str:
    """Static random address for the index-th device: C0:11:22:33:44:55+index."""
    return f"C0:11:22:33:{0x44 + (0x55 + index) // 256:02X}:{(0x55 + index) % 256:02X}"


@dataclasses.dataclass
class PeripheralOptions:
    """Configuration of one LED peripheral (see ``parse`` for the text form)."""

    name: str
    profile: str
    address: str
    interval_ms: float = 50.0
    # adv_cycle=ON/OFF: advertise ON ms, stay silent OFF ms, and again, while not
    # connected (a device heard once and gone before the central's connect).
    adv_cycle: tuple[float, float] | None = None
    adv_delay_ms: float = 0.0  # adv_delay=MS: the first advertisement only after MS (a device switched on later)
    name_in: str = "adv"  # "adv" (Complete Local Name) | "shortened" | "none"
    short_len: int | None = None  # with name_in=shortened: advertise name[:N]
    conn_update: bool = False
    conn_update_delay_ms: float = 0.0
    security_request: bool = False
    advertise_uuid: bool = True
    flags: str = "auto"  # "auto" (only if they fit) | "1" (always, error if too long) | "0"
    init: tuple[int, int, int] = (0, 0, 0)
    notify_every_ms: float = 0.0  # harness: notify the button value every MS while subscribed
    conn_update_params: tuple[int, int, int, int] | None = None  # raw units; None = 24,40,0,400
    mtu: int | None = None  # server ATT_MTU limit, and the peer's own Exchange MTU Request
    gatt_service: bool = True  # hash=0: no Generic Attribute service (no Database Hash, no Service Changed)
    secure: str = "none"  # "enc": the LED characteristics (and the CCCD) need an encrypted link
    pairing: str = "sc"  # "sc": LE Secure Connections Just Works | "legacy": legacy Just Works only
    forget_bonds: int = 0  # forget every bond when the N-th connection ends (0: never)
    unsupported: frozenset[int] = frozenset()  # ATT request opcodes answered with Request Not Supported
    faults: list[Fault] = dataclasses.field(default_factory=list)
    profile_options: dict[str, str] = dataclasses.field(default_factory=dict)  # OTHER_PROFILES keys

    KEYS = (
        "interval", "adv_cycle", "adv_delay", "addr", "name_in", "short", "conn_update", "conn_update_delay",
        "security_request", "uuid", "flags", "init", "notify_every", "conn_update_params", "mtu", "hash", "unsupported",
        "secure", "pairing", "forget_bonds",
        *(f"fault_{kind}" for kind in FAULT_KINDS),
    )

    @classmethod
    def parse(cls, spec: str, index: int = 0) -> PeripheralOptions:
        """Parse ``NAME:PROFILE[:key=value,...]``.

        Keys: interval=MS (default 50), adv_cycle=ON/OFF (advertise ON ms,
        silent OFF ms, repeated while not connected; ON below the interval is
        one advertisement), adv_delay=MS (first advertisement after MS),
        addr=C0:11:22:33:44:55 (static random;
        default derived from index), name_in=adv|shortened|none, short=N
        (shortened name length), conn_update=1, conn_update_delay=MS,
        security_request=1, uuid=0, flags=auto|0|1, init=R,G,B,
        notify_every=MS (harness: notify the button value periodically while
        a client is subscribed), conn_update_params=IMIN,IMAX,LATENCY,TIMEOUT
        (raw units: 1.25 ms, 1.25 ms, events, 10 ms; implies conn_update=1;
        any values, also illegal ones), mtu=N (23..517: the server's
        ATT_MTU limit, and the peer sends its own Exchange MTU Request with
        N as soon as connected), hash=0 (no Generic Attribute service: no
        Database Hash and no Service Changed, as on many small devices),
        fault_KIND=TRIGGER[/ARG] (see FAULT_HELP).

        Security keys (see SECURITY_HELP): secure=enc|none (enc: the LED
        characteristics' values and the button CCCD need an encrypted link;
        secure=auth is refused, Just Works cannot give MITM protection),
        pairing=sc|legacy (default sc: LE Secure Connections Just Works with
        bonding; legacy: legacy Just Works only, with bonding),
        forget_bonds=N (forget every bond when the N-th connection ends).
        Options are separated by commas; ``init=R,G,B`` and ``addr=..`` are
        recognised even though they contain commas / colons.
        """
        name, sep, rest = spec.partition(":")
        if not sep or not name:
            raise ValueError(f"device spec {spec!r}: expected NAME:PROFILE[:opts]")
        profile, _, opt_text = rest.partition(":")
        if profile not in PROFILES and profile not in OTHER_PROFILES:
            raise ValueError(f"device spec {spec!r}: unknown profile {profile!r}")
        other_keys = other_profile(profile).OPTION_KEYS if profile in OTHER_PROFILES else ()
        opts = cls(name=name, profile=profile, address=default_address(index))
        # Split options on commas, but glue value fragments (e.g. init=1,2,3)
        # back onto the previous key when the fragment has no '='.
        pairs: list[list[str]] = []
        for part in opt_text.split(",") if opt_text else []:
            if "=" in part:
                key, _, value = part.partition("=")
                pairs.append([key.strip(), value.strip()])
            elif pairs:
                pairs[-1][1] += "," + part.strip()
            else:
                raise ValueError(f"device spec {spec!r}: bad option {part!r}")
        for key, value in pairs:
            if key == "interval":
                opts.interval_ms = float(value)
            elif key == "adv_delay":
                opts.adv_delay_ms = float(value)
            elif key == "adv_cycle":
                on, _, off = value.partition("/")
                opts.adv_cycle = (float(on), float(off))
                if opts.adv_cycle[0] <= 0 or opts.adv_cycle[1] <= 0:
                    raise ValueError(f"device spec {spec!r}: adv_cycle=ON/OFF needs two positive times in ms")
            elif key == "addr":
                opts.address = value.upper()
            elif key == "name_in":
                if value not in ("adv", "shortened", "none"):
                    raise ValueError(f"name_in must be adv|shortened|none, not {value!r}")
                opts.name_in = value
            elif key == "short":
                opts.short_len = int(value)
                opts.name_in = "shortened"
            elif key == "conn_update":
                opts.conn_update = value not in ("0", "")
            elif key == "conn_update_delay":
                opts.conn_update_delay_ms = float(value)
            elif key == "security_request":
                opts.security_request = value not in ("0", "")
            elif key == "uuid":
                opts.advertise_uuid = value not in ("0", "")
            elif key == "flags":
                if value not in ("auto", "0", "1"):
                    raise ValueError(f"flags must be auto|0|1, not {value!r}")
                opts.flags = value
            elif key == "notify_every":
                opts.notify_every_ms = float(value)
                if opts.notify_every_ms < 0:
                    raise ValueError("notify_every must be >= 0")
            elif key == "conn_update_params":
                try:
                    params = tuple(int(v, 0) for v in value.split(","))
                except ValueError:
                    params = ()
                if len(params) != 4 or not all(0 <= v <= 0xFFFF for v in params):
                    raise ValueError(f"conn_update_params must be IMIN,IMAX,LATENCY,TIMEOUT (0..65535), not {value!r}")
                opts.conn_update_params = params  # type: ignore[assignment]
                opts.conn_update = True
            elif key == "hash":
                if value not in ("0", "1"):
                    raise ValueError(f"hash must be 0 or 1, not {value!r}")
                opts.gatt_service = value == "1"
            elif key == "secure":
                if value == "auth":
                    raise ValueError("secure=auth is not supported: it needs MITM protection, and this "
                                     "peer only pairs with Just Works (NoInputNoOutput); use secure=enc")
                if value not in ("enc", "none"):
                    raise ValueError(f"secure must be enc or none, not {value!r}")
                opts.secure = value
            elif key == "pairing":
                if value not in ("sc", "legacy"):
                    raise ValueError(f"pairing must be sc or legacy, not {value!r}")
                opts.pairing = value
            elif key == "forget_bonds":
                try:
                    opts.forget_bonds = int(value)
                except ValueError:
                    opts.forget_bonds = -1
                if opts.forget_bonds < 1:
                    raise ValueError(f"forget_bonds must be a connection number >= 1, not {value!r}")
            elif key == "unsupported":
                try:
                    opts.unsupported = frozenset(int(v, 16) for v in value.split("+"))
                except ValueError:
                    raise ValueError(f"unsupported must be hex ATT opcodes like 20+0e, not {value!r}") from None
                if not opts.unsupported or any(op in (0x02,) or not 0 < op < 0x100 for op in opts.unsupported):
                    raise ValueError(f"unsupported: {value!r} must name request opcodes other than Exchange MTU (02)")
            elif key == "mtu":
                opts.mtu = int(value, 0)
                if not 23 <= opts.mtu <= 517:
                    raise ValueError(f"mtu must be 23..517, not {value!r}")
            elif key.startswith("fault_") and key[len("fault_"):] in FAULT_KINDS:
                opts.faults.append(Fault.parse(key[len("fault_"):], value))
            elif key == "init":
                rgb = tuple(int(v) for v in value.split(","))
                if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
                    raise ValueError(f"init must be R,G,B with 0..255, not {value!r}")
                opts.init = rgb  # type: ignore[assignment]
            elif key in other_keys:
                opts.profile_options[key] = value
            else:
                raise ValueError(f"device spec {spec!r}: unknown option {key!r} (known: {cls.KEYS + tuple(other_keys)})")
        addr = hci.Address(opts.address)
        if (addr.address_bytes[5] & 0xC0) != 0xC0:
            raise ValueError(f"address {opts.address} is not a static random address (top bits 11)")
        if opts.notify_every_ms and profile != "harness":
            raise ValueError("notify_every is only for the harness profile")
        if profile in OTHER_PROFILES:
            if opts.secure != "none":
                raise ValueError(f"secure= is for the LED profiles, not {profile!r}")
            other_profile(profile).check_options(opts)
        return opts


def _ad(ad_type: int, data: bytes) -> bytes:
    return bytes([len(data) + 1, ad_type]) + data


def uuid128_le(text: str) -> bytes:
    """A 128-bit UUID in the little-endian byte order used on the air."""
    return uuidlib.UUID(text).bytes[::-1]


def build_advertising_data(opts: PeripheralOptions) -> bytes:
    """Legacy advertising data: [Flags] + local name + 128-bit UUID list.

    Flags are included only if everything fits in 31 bytes (flags=auto); with
    "CassarTech" and one 128-bit UUID it is 12 + 18 = 30 bytes, so no Flags.
    """
    body = b""
    if opts.name_in != "none":
        text = opts.name if opts.short_len is None else opts.name[: opts.short_len]
        ad_type = AD_COMPLETE_NAME if opts.name_in == "adv" else AD_SHORTENED_NAME
        body += _ad(ad_type, text.encode("utf-8"))
    if opts.advertise_uuid and opts.profile in PROFILES:
        body += _ad(AD_COMPLETE_128, uuid128_le(PROFILES[opts.profile].service_uuid))
    flags = _ad(AD_FLAGS, bytes([ADV_FLAGS_VALUE]))
    if opts.flags == "1" or (opts.flags == "auto" and len(flags) + len(body) <= LEGACY_ADV_DATA_MAX):
        body = flags + body
    if len(body) > LEGACY_ADV_DATA_MAX:
        raise ValueError(
            f"advertising data for {opts.name!r} is {len(body)} bytes, over the legacy "
            f"limit of {LEGACY_ADV_DATA_MAX}; shorten the name (short=N) or drop the UUID"
        )
    return body


# -----------------------------------------------------------------------------
# The peripheral
# -----------------------------------------------------------------------------
class PeerSmpSession(smp.Session):
    """Bumble's SMP session with a random EDIV/Rand for the legacy LTK.

    Bumble 0.0.236 distributes its legacy LTK with EDIV 0 and Rand 0 (its
    ltk_ediv/ltk_rand are never drawn), the values that also name the STK
    during pairing.  Real firmware draws them, so a central that stores or
    sends them wrongly must fail here too: they are drawn per session, and
    the STK is looked up by the zero EDIV/Rand of pairing-time encryption.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ltk_ediv = random.randint(1, 0xFFFF)
        self.ltk_rand = os.urandom(8)

    def get_long_term_key(self, rand: bytes, ediv: int) -> bytes | None:
        if self.sc:
            return self.ltk  # None until the DHKey Check
        if not self.completed:
            return self.stk if (rand, ediv) == (bytes(8), 0) else None
        return self.ltk if (rand, ediv) == (self.ltk_rand, self.ltk_ediv) else None


def make_peripheral(opts: PeripheralOptions, emit: Emit) -> LedPeripheral:
    """The peripheral for ``opts.profile``: a LedPeripheral, or the subclass of an OTHER_PROFILES module."""
    if opts.profile in OTHER_PROFILES:
        return other_profile(opts.profile).PERIPHERAL(opts, emit)
    return LedPeripheral(opts, emit)


class LedPeripheral:
    """One LED peripheral: a Bumble Device with an enforcing GATT server.

    Events passed to ``emit`` (each also carries ``"device": NAME``):

    * ``advertising``   {address, interval_ms, adv_data: hex}
    * ``connected``     {peer, peer_type, handle}
    * ``disconnected``  {reason}
    * ``mtu``           {mtu}
    * ``att``           {op: int, pdu: hex}  every ATT PDU addressed to the server
    * ``write``         {char, uuid, handle, value: hex, op: request|command|execute}
    * ``rejected``      {char, uuid, handle, value: hex, op, error: int, responded: bool}
    * ``read``          {char, uuid, handle, value: hex}
    * ``read_rejected`` {char, uuid, handle, error[, reason]}  error 0x02, or
                        0x0F "insufficient encryption" (secure=enc)
    * ``state``         RGB: {profile, rgb: [r,g,b]};
                        harness: {profile, buttons: [b1,b2], commands: [...]}
    * ``subscribed``    {char, notify: bool, indicate: bool}  CCCD written
    * ``notify``        {char, handle, value: hex, subscribed: bool, periodic: bool}
    * ``conn_update``   {interval_min_ms, interval_max_ms, latency, timeout_ms}
                        our L2CAP Connection Parameter Update Request was sent
    * ``conn_update_response`` {accepted: bool, result: int} the central's
                        answer (result 0 accepted, 1 rejected, -1 it sent an
                        L2CAP Command Reject instead)
    * ``conn_update_timeout`` {} no answer within 5 s
    * ``l2cap_signal``  {code: int, pdu: hex}  every LE signalling PDU received
    * ``conn_params``   {interval_ms, latency, timeout_ms} after an LE
                        Connection Update Complete
    * ``security_request`` {auth_req}  SMP Security Request sent
    * ``pairing``       {result: "complete", sc, bonded, identity, irk} (the
                        central's identity address, and whether it sent an
                        IRK) or {result: "failed", reason: SMP reason}
    * ``encryption``    {enabled, status, key_size, during_pairing} every
                        Encryption Change (status 0) or failure reported to
                        this peer's host
    * ``ltk_request``   {found, source: pairing|bond|none, ediv, rand: hex}
                        the controller's LE Long Term Key Request; found
                        false means a negative reply (the central sees
                        Encryption Change status 0x06)
    * ``bonds_forgotten`` {count}  forget_bonds=N: emitted before the N-th
                        ``disconnected``
    * ``write_dropped`` {char, uuid, handle, value, op, reason}  a Write
                        Command to a characteristic / CCCD needing encryption
                        on an unencrypted link (secure=enc), dropped silently
    * ``smp``           {code: int, pdu: hex}  every SMP PDU received
    * ``fault``         {kind, request, nth, ...}  a fault option was applied
                        (see FAULT_HELP); extra fields per kind: pdu (hex
                        sent), response (the opcode Bumble produced), length,
                        mtu, reason, handles, count, handle, named_request
    * ``indication_confirmed``   {handle, ms}  the Handle Value Confirmation came
    * ``indication_unconfirmed`` {handle, after_s | disconnected}  it did not
    * ``mtu_request``   {mtu}  our own Exchange MTU Request (mtu=N) was sent;
                        then ``mtu_exchanged`` {mtu, server_rx_mtu},
                        ``mtu_request_timeout`` or ``mtu_request_failed`` {detail}
    """

    def __init__(self, opts: PeripheralOptions, emit: Emit) -> None:
        self.opts = opts
        # OTHER_PROFILES get an empty spec: their subclass builds the services.
        self.spec = PROFILES.get(opts.profile) or ProfileSpec(opts.profile, "", ())
        self._emit = emit
        self.adv_data = build_advertising_data(opts)
        self.device: Device | None = None
        self.connection: Connection | None = None
        self._tasks: set[asyncio.Task] = set()
        self._adv_cycle_task: asyncio.Task | None = None
        self._stopping = False

        # Device state
        self.rgb = list(opts.init)
        self.buttons = [0, 0]
        self.commands: list[int] = []
        self.last_command = 0

        # Characteristics by role, and by value handle once attached
        self.chars: dict[str, Characteristic] = {}
        self._by_handle: dict[int, tuple[CharSpec, Characteristic]] = {}

        # Faults: requests seen per opcode on the current connection, the
        # response mutation armed for the request being answered, and the
        # indication waiting for its confirmation.
        self._request_counts: dict[int, int] = {}
        self._mutation: tuple[Fault, int] | None = None  # (fault, ATT_MTU to restore)
        self._indication: tuple[int, float, asyncio.TimerHandle] | None = None

        # Security: connections so far (forget_bonds counts them), and the
        # AuthReq of the central's Pairing Request on the current connection.
        self._connection_count = 0
        self._peer_auth_req: int | None = None

    # -- events ---------------------------------------------------------------
    def emit(self, event: str, **fields: Any) -> None:
        self._emit({"event": event, "device": self.opts.name, **fields})

    def emit_state(self) -> None:
        if self.spec.is_rgb:
            self.emit("state", profile=self.spec.name, rgb=list(self.rgb))
        else:
            self.emit(
                "state",
                profile=self.spec.name,
                buttons=list(self.buttons),
                commands=list(self.commands),
            )

    def describe(self) -> dict[str, Any]:
        """Summary used in vworld's ready line."""
        info: dict[str, Any] = {
            "name": self.opts.name,
            "profile": self.spec.name,
            "address": self.opts.address,
            "service": self.spec.service_uuid.lower(),
            "interval_ms": self.opts.interval_ms,
            "adv_data": self.adv_data.hex(),
            "handles": {spec.role: ch.handle for spec, ch in self._by_handle.values()},
        }
        if self.spec.is_rgb:
            info["rgb"] = list(self.rgb)
        if self.opts.faults:
            info["faults"] = [f"{f.kind}={f.request}#{f.nth}" + (f"/{f.arg}" if f.arg is not None else "")
                              for f in self.opts.faults]
        if self.opts.mtu:
            info["mtu"] = self.opts.mtu
        if self.opts.secure != "none" or self.opts.pairing != "sc" or self.opts.forget_bonds:
            info["secure"] = self.opts.secure
            info["pairing"] = self.opts.pairing
            if self.opts.forget_bonds:
                info["forget_bonds"] = self.opts.forget_bonds
        return info

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- construction ---------------------------------------------------------
    def attach(self, host: Host) -> Device:
        """Create the Bumble Device on ``host`` (not yet powered on)."""
        config = DeviceConfiguration(name=self.opts.name)
        config.address = hci.Address(self.opts.address)
        config.advertising_interval_min = self.opts.interval_ms
        config.advertising_interval_max = self.opts.interval_ms
        config.gatt_service_enabled = self.opts.gatt_service
        device = Device(config=config, host=host)
        self.device = device

        self._add_services(device)
        if self.opts.mtu:
            device.gatt_server.max_mtu = self.opts.mtu

        self._install_att_screen(device)
        self._install_security(device, host)
        self._install_smp_observer(device)
        self._install_signal_observer(device)
        device.on(Device.EVENT_CONNECTION, self._on_connection)
        device.on("characteristic_subscription", self._on_subscription)
        return device

    def _add_services(self, device: Device) -> None:
        """Add the profile's services (a subclass may add others)."""
        device.add_service(self._build_service())
        # Value handles are assigned by add_service.
        for spec in self.spec.chars:
            ch = self.chars[spec.role]
            self._by_handle[ch.handle] = (spec, ch)
        if self.opts.secure == "enc":
            # Bumble adds the CCCD itself (READABLE|WRITEABLE): protect it too.
            for attribute in device.gatt_server.attributes:
                if (isinstance(attribute, Descriptor)
                        and attribute.type == GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR
                        and self._led_service_range[0] <= attribute.handle <= self._led_service_range[1]):
                    attribute.permissions |= ENCRYPTION_REQUIRED

    def _build_service(self) -> Service:
        chars = []
        for spec in self.spec.chars:
            value = CharacteristicValue(
                read=lambda conn, role=spec.role: self._read_value(role),
                write=lambda conn, value, role=spec.role: self._execute_write(role, value),
            )
            permissions = Characteristic.READABLE | Characteristic.WRITEABLE
            if self.opts.secure == "enc":
                permissions |= ENCRYPTION_REQUIRED
            ch = Characteristic(spec.uuid, spec.properties, permissions, value)
            self.chars[spec.role] = ch
            chars.append(ch)
        service = Service(self.spec.service_uuid, chars)
        self._led_service = service
        return service

    @property
    def _led_service_range(self) -> tuple[int, int]:
        return self._led_service.handle, self._led_service.end_group_handle

    # -- life cycle -----------------------------------------------------------
    async def start(self) -> None:
        """Power on the device and start advertising."""
        assert self.device is not None
        await self.device.power_on()
        if self.opts.adv_delay_ms:
            self._spawn(self._advertise_later(self.opts.adv_delay_ms))
        else:
            await self.advertise()

    async def _advertise_later(self, ms: float) -> None:
        await asyncio.sleep(ms / 1000)
        if self.connection is None and not self._stopping:
            await self.advertise()

    async def advertise(self) -> None:
        assert self.device is not None
        # Connectable undirected, own address random (the static address set at
        # power on).  Bumble uses extended advertising commands with legacy
        # PDUs when the controller offers them.
        await self.device.start_advertising(
            own_address_type=hci.OwnAddressType.RANDOM,
            advertising_data=self.adv_data,
            scan_response_data=b"",
            advertising_interval_min=self.opts.interval_ms,
            advertising_interval_max=self.opts.interval_ms,
        )
        self.emit(
            "advertising",
            address=self.opts.address,
            interval_ms=self.opts.interval_ms,
            adv_data=self.adv_data.hex(),
        )
        if self.opts.adv_cycle is not None:
            # One cycle at a time: advertising started again (after a link) restarts it.
            if self._adv_cycle_task is not None:
                self._adv_cycle_task.cancel()
            self._adv_cycle_task = self._spawn(self._pause_advertising(*self.opts.adv_cycle))

    async def _pause_advertising(self, on_ms: float, off_ms: float) -> None:
        """adv_cycle: silent after ON ms, advertising again after OFF ms (unless connected)."""
        assert self.device is not None
        await asyncio.sleep(on_ms / 1000)
        if self.connection is not None or self._stopping:
            return
        await self.device.stop_advertising()
        self.emit("advertising_paused", ms=off_ms)
        await asyncio.sleep(off_ms / 1000)
        self._adv_cycle_task = None  # advertise() starts the next cycle
        if self.connection is None and not self._stopping:
            await self.advertise()

    async def stop(self) -> None:
        """Disconnect (if connected) so that the central sees a clean end."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        if self.connection is not None:
            try:
                await asyncio.wait_for(
                    self.connection.disconnect(hci.HCI_REMOTE_USER_TERMINATED_CONNECTION_ERROR),
                    1.0,
                )
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass

    # -- connection handling --------------------------------------------------
    def _on_connection(self, connection: Connection) -> None:
        self.connection = connection
        self._request_counts.clear()
        self._mutation = None
        self._connection_count += 1
        self._peer_auth_req = None
        self.emit(
            "connected",
            peer=str(connection.peer_address).split("/")[0],
            peer_type=int(connection.peer_address.address_type),
            handle=connection.handle,
            interval_ms=connection.parameters.connection_interval,
            latency=connection.parameters.peripheral_latency,
        )
        connection.on(Connection.EVENT_DISCONNECTION, lambda reason: self._on_disconnection(connection, reason))
        self._watch_security(connection)
        connection.on(
            Connection.EVENT_CONNECTION_ATT_MTU_UPDATE,
            lambda *_: self.emit("mtu", mtu=connection.att_mtu),
        )
        connection.on(
            Connection.EVENT_CONNECTION_PARAMETERS_UPDATE,
            lambda *_: self.emit(
                "conn_params",
                interval_ms=connection.parameters.connection_interval,
                latency=connection.parameters.peripheral_latency,
                timeout_ms=connection.parameters.supervision_timeout,
            ),
        )
        if self.opts.security_request:
            self._spawn(self._send_security_request(connection))
        if self.opts.conn_update:
            self._spawn(self._request_conn_update(connection))
        if self.opts.notify_every_ms:
            self._spawn(self._notify_periodically(connection))
        if self.opts.mtu:
            self._spawn(self._request_mtu(connection))

    def _on_disconnection(self, connection: Connection, reason: int) -> None:
        if self.connection is connection:
            self.connection = None
        if self._indication is not None:
            handle, _, timer = self._indication
            timer.cancel()
            self._indication = None
            self.emit("indication_unconfirmed", handle=handle, disconnected=True)
        if self.opts.forget_bonds and self._connection_count == self.opts.forget_bonds:
            self.forget_bonds()
        self.emit("disconnected", reason=int(reason))
        if not self._stopping:
            # Real firmware advertises again as soon as the link is gone.
            self._spawn(self.advertise())

    async def _send_security_request(self, connection: Connection) -> None:
        assert self.device is not None
        self.device.request_pairing(connection)  # AuthReq from _pairing_config
        config = self._pairing_config(connection)
        auth_req = smp.AuthReq.from_booleans(bonding=config.bonding, sc=config.sc, mitm=config.mitm)
        self.emit("security_request", auth_req=int(auth_req))

    async def _request_conn_update(self, connection: Connection) -> None:
        assert self.device is not None
        if self.opts.conn_update_delay_ms:
            await asyncio.sleep(self.opts.conn_update_delay_ms / 1000)
        # Same values as seen from real peripherals: 30-50 ms, latency 0, 4 s
        # (units: 1.25 ms for intervals, 10 ms for the timeout).
        manager = self.device.l2cap_channel_manager
        imin, imax, latency, timeout = self.opts.conn_update_params or (24, 40, 0, 400)
        self.emit("conn_update", interval_min_ms=imin * 1.25, interval_max_ms=imax * 1.25, latency=latency,
                  timeout_ms=timeout * 10.0, raw=[imin, imax, latency, timeout])
        try:
            result = await asyncio.wait_for(
                manager.update_connection_parameters(connection, imin, imax, latency, timeout), 5.0
            )
            self.emit("conn_update_response", accepted=result == 0, result=int(result))
        except asyncio.TimeoutError:
            self.emit("conn_update_timeout")
        finally:
            # Bumble keeps the pending future forever if no answer came; clear
            # it so that the next connection can ask again.
            manager.connection_parameters_update_response = None

    async def _request_mtu(self, connection: Connection) -> None:
        """mtu=N: the peer's own Exchange MTU Request, sent as soon as connected.

        Sent raw and answered through a hook on the connection's GATT client, so
        that the effective ATT_MTU is applied synchronously when the response
        arrives (Bumble's client applies it a loop iteration later, which races
        with the server building its next response).
        """
        assert self.opts.mtu is not None and self.device is not None
        mtu = self.opts.mtu
        client = connection.gatt_client
        inner = client.on_gatt_pdu
        answer: asyncio.Future = asyncio.get_running_loop().create_future()

        def hook(pdu) -> None:
            op = int(pdu.op_code)
            if not answer.done() and (op == 0x03 or (op == OP_ERROR_RESPONSE and pdu.request_opcode_in_error == 0x02)):
                if op == 0x03:
                    server_rx = int(pdu.server_rx_mtu)
                    connection.att_mtu = max(23, min(mtu, server_rx))
                    answer.set_result(server_rx)
                else:
                    answer.set_exception(RuntimeError(f"Error Response 0x{int(pdu.error_code):02x}"))
                return
            inner(pdu)

        client.on_gatt_pdu = hook
        self.device.send_l2cap_pdu(connection.handle, att.ATT_CID, bytes([0x02]) + mtu.to_bytes(2, "little"))
        self.emit("mtu_request", mtu=mtu)
        try:
            server_rx = await asyncio.wait_for(answer, 5.0)
            self.emit("mtu_exchanged", mtu=connection.att_mtu, server_rx_mtu=server_rx)
        except asyncio.TimeoutError:
            self.emit("mtu_request_timeout")
        except Exception as error:  # noqa: BLE001 - an Error Response
            self.emit("mtu_request_failed", detail=str(error))

    async def _notify_periodically(self, connection: Connection) -> None:
        """harness notify_every=MS: notify the button value while subscribed."""
        assert self.device is not None
        button = self.chars["button"]
        while self.connection is connection:
            await asyncio.sleep(self.opts.notify_every_ms / 1000)
            cccd = self.device.gatt_server.subscribers.get(connection, {}).get(button.handle)
            if cccd and cccd[0] & 0x01 and self.connection is connection:
                value = bytes([self.last_command])
                try:
                    await self.device.notify_subscriber(connection, button, value)
                except Exception as error:  # noqa: BLE001 - link went away meanwhile
                    logger.info("periodic notification failed: %s", error)
                    return
                self.emit("notify", char="button", handle=button.handle, value=value.hex(),
                          subscribed=True, periodic=True)

    # -- security (SMP, bonds, LTK requests) -------------------------------------
    def _pairing_config(self, connection: Connection | None = None) -> pairing.PairingConfig:
        """Just Works (NoInputNoOutput) with bonding; SC or legacy per pairing=.

        Both sides' keys are asked for and given: the peer's IRK + identity
        (its static random address) and, legacy, its LTK/EDIV/Rand; the
        central's IRK + identity and, legacy, its LTK.
        """
        keys = (pairing.PairingDelegate.KeyDistribution.DISTRIBUTE_ENCRYPTION_KEY
                | pairing.PairingDelegate.KeyDistribution.DISTRIBUTE_IDENTITY_KEY)
        return pairing.PairingConfig(
            sc=self.opts.pairing == "sc",
            mitm=False,
            bonding=True,
            delegate=pairing.PairingDelegate(
                io_capability=pairing.PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT,
                local_initiator_key_distribution=keys,
                local_responder_key_distribution=keys,
            ),
            identity_address_type=pairing.PairingConfig.AddressType.RANDOM,
        )

    def _install_security(self, device: Device, host: Host) -> None:
        # An in-memory key store of our own (for the world's lifetime): the
        # bonds, looked up by the central's (identity) address.
        device.keystore = MemoryKeyStore()
        device.pairing_config_factory = self._pairing_config
        device.smp_session_proxy = PeerSmpSession
        # Device sets host.long_term_key_provider = device.get_long_term_key;
        # ours answers from the SMP session or the bond and reports it.
        host.long_term_key_provider = self._long_term_key

    async def _long_term_key(self, handle: int, rand: bytes, ediv: int) -> bytes | None:
        """The LE Long Term Key Request: the key, or None for a negative reply.

        Bumble's own provider answers a legacy bond with ltk_peripheral (the
        LTK the *central* distributed, or b"" when it sent none) where the
        peripheral must use the LTK it distributed itself; here a bond's
        legacy LTK is the one we gave, matched by EDIV and Rand, and an SC
        LTK is used with EDIV 0 / Rand 0 only.
        """
        assert self.device is not None and self.device.keystore is not None
        connection = self.device.lookup_connection(handle)
        ltk: bytes | None = None
        source = "none"
        if connection is not None:
            session = self.device.smp_manager.sessions.get(handle)
            if session is not None and not session.completed:
                ltk = session.get_long_term_key(rand, ediv)
                source = "pairing" if ltk else source
            if ltk is None:
                keys = await self.device.keystore.get(str(connection.peer_address))
                if keys is not None:
                    if keys.ltk is not None and (rand, ediv) == (bytes(8), 0):
                        ltk = keys.ltk.value
                    elif keys.ltk_central is not None and (keys.ltk_central.rand, keys.ltk_central.ediv) == (rand, ediv):
                        ltk = keys.ltk_central.value  # the one we distributed (Bumble's naming)
                    source = "bond" if ltk else source
        self.emit("ltk_request", found=ltk is not None, source=source, ediv=ediv, rand=rand.hex())
        return ltk

    def _during_pairing(self, connection: Connection) -> bool:
        assert self.device is not None
        session = self.device.smp_manager.sessions.get(connection.handle)
        return session is not None and not session.completed

    def _watch_security(self, connection: Connection) -> None:
        def on_encryption_change() -> None:
            self.emit("encryption", enabled=bool(connection.encryption), status=0,
                      key_size=connection.encryption_key_size, during_pairing=self._during_pairing(connection))

        def on_encryption_failure(error: int) -> None:
            self.emit("encryption", enabled=False, status=int(error), key_size=0,
                      during_pairing=self._during_pairing(connection))

        def on_pairing(keys) -> None:
            auth_req = self._peer_auth_req or 0
            bonded = bool(auth_req & AUTHREQ_BONDING)  # and ours (always bonding)
            identity = str(connection.peer_address).split("/")[0]
            fields = dict(result="complete", sc=bool(connection.sc), bonded=bonded, identity=identity,
                          irk=keys.irk is not None)
            if bonded:
                self.emit("pairing", **fields)
                return

            # Bumble stores the keys whatever the Bonding flags said; a device
            # that did not bond keeps nothing.
            async def drop() -> None:
                assert self.device is not None and self.device.keystore is not None
                await self.device.keystore.delete(str(connection.peer_address))
                self.emit("pairing", **fields)

            self._spawn(drop())

        def on_pairing_failure(reason: int) -> None:
            self.emit("pairing", result="failed", reason=int(reason))

        connection.on(Connection.EVENT_CONNECTION_ENCRYPTION_CHANGE, on_encryption_change)
        connection.on(Connection.EVENT_CONNECTION_ENCRYPTION_FAILURE, on_encryption_failure)
        connection.on(Connection.EVENT_PAIRING, on_pairing)
        connection.on(Connection.EVENT_PAIRING_FAILURE, on_pairing_failure)

    def forget_bonds(self) -> int:
        """Forget every bond now (synchronously); returns how many there were."""
        assert self.device is not None
        keystore = self.device.keystore
        assert isinstance(keystore, MemoryKeyStore)
        count = len(keystore.all_keys)
        keystore.all_keys.clear()
        self.device.address_resolver = smp.AddressResolver([])
        self.emit("bonds_forgotten", count=count)
        return count

    # -- observers -------------------------------------------------------------
    def _install_smp_observer(self, device: Device) -> None:
        channels = device.l2cap_channel_manager.fixed_channels
        inner = channels[smp.SMP_CID]

        def observe(connection, pdu: bytes) -> None:
            self.emit("smp", code=pdu[0] if pdu else -1, pdu=pdu.hex())
            if len(pdu) >= 4 and pdu[0] == SMP_PAIRING_REQUEST:
                self._peer_auth_req = pdu[3]
            inner(connection, pdu)

        channels[smp.SMP_CID] = observe

    def _install_signal_observer(self, device: Device) -> None:
        manager = device.l2cap_channel_manager
        inner = manager.on_control_frame

        def observe(connection, cid, frame) -> None:
            self.emit("l2cap_signal", code=int(frame.code), pdu=bytes(frame).hex())
            pending = manager.connection_parameters_update_response
            if frame.code == 0x01 and pending is not None and not pending.done():
                # Command Reject in place of a Connection Parameter Update Response
                pending.set_result(-1)
            inner(connection, cid, frame)

        manager.on_control_frame = observe

    def _on_subscription(self, bearer, characteristic, notify: bool, indicate: bool) -> None:
        entry = self._by_handle.get(characteristic.handle)
        role = entry[0].role if entry else str(characteristic.uuid)
        self.emit("subscribed", char=role, notify=bool(notify), indicate=bool(indicate))

    # -- ATT screening (property enforcement) -----------------------------------
    def _install_att_screen(self, device: Device) -> None:
        server = device.gatt_server
        inner = server.on_gatt_pdu  # bound method of the stock server

        def screened(bearer, pdu) -> None:
            try:
                raw = bytes(pdu)
            except Exception:  # noqa: BLE001
                raw = b""
            self.emit("att", op=int(pdu.op_code), pdu=raw.hex())
            if int(pdu.op_code) == OP_HANDLE_VALUE_CONFIRMATION and self._indication is not None:
                self._indication_confirmed()
                return
            if int(pdu.op_code) in self.opts.unsupported:
                handle = raw[1] | raw[2] << 8 if len(raw) >= 3 else 0
                server.send_gatt_pdu(bearer, bytes([OP_ERROR_RESPONSE, int(pdu.op_code)]) + handle.to_bytes(2, "little") + bytes([ATT_REQUEST_NOT_SUPPORTED]))
                self.emit("unsupported", op=int(pdu.op_code))
                return
            if not self._apply_faults(server, bearer, int(pdu.op_code)):
                return
            if self._screen(server, bearer, pdu):
                inner(bearer, pdu)

        # Server.on_gatt_pdu is looked up on the instance by the device's ATT
        # dispatch, so an instance attribute replaces it for this device only.
        server.on_gatt_pdu = screened

        # Every response goes through send_response (Bumble's handlers and
        # ours): the place where an armed fault mutates it.
        send_inner = server.send_response

        def send_response(bearer, response) -> None:
            if self._mutation is None:
                send_inner(bearer, response)
                return
            fault, saved_mtu = self._mutation
            self._mutation = None
            self._mutate_response(server, send_inner, bearer, response, fault, saved_mtu)

        server.send_response = send_response

    # -- faults -----------------------------------------------------------------
    def _emit_fault(self, fault: Fault, **fields: Any) -> None:
        self.emit("fault", kind=fault.kind, request=fault.request, nth=fault.nth, **fields)

    def _first_value_handle(self) -> int:
        return self.chars[self.spec.chars[0].role].handle

    def _apply_faults(self, server, bearer, op: int) -> bool:
        """Run the faults triggered by this request; False when it must not be answered."""
        if op not in REQUEST_OPCODE_NAMES:
            return True
        if self._mutation is not None:  # an armed mutation whose response never came
            bearer.att_mtu = self._mutation[1]
            self._mutation = None
        nth = self._request_counts[op] = self._request_counts.get(op, 0) + 1
        active = [f for f in self.opts.faults if f.op == op and f.nth == nth]
        if not active:
            return True
        # 1. What is sent before the answer (same ATT bearer, so it arrives first).
        for fault in active:
            if fault.kind == "spurious_error":
                named = fault.arg if fault.arg is not None else OP_READ_REQUEST
                raw = bytes([OP_ERROR_RESPONSE, named, 0x01, 0x00, ATT_ATTRIBUTE_NOT_FOUND])
                server.send_gatt_pdu(bearer, raw)
                self._emit_fault(fault, pdu=raw.hex(), named_request=named)
            elif fault.kind == "stray_notify":
                count = fault.arg if fault.arg is not None else 3
                handles = self._undeclared_handles(server, count)
                for handle in handles:
                    server.send_gatt_pdu(bearer, bytes([OP_HANDLE_VALUE_NOTIFICATION]) + handle.to_bytes(2, "little") + b"\xde\xad")
                self._emit_fault(fault, handles=handles)
            elif fault.kind == "flood":
                count = fault.arg if fault.arg is not None else 300
                handle = self._first_value_handle()
                prefix = bytes([OP_HANDLE_VALUE_NOTIFICATION]) + handle.to_bytes(2, "little")
                for i in range(count):
                    server.send_gatt_pdu(bearer, prefix + bytes([i & 0xFF]))
                self._emit_fault(fault, count=count, handle=handle)
            elif fault.kind in ("indicate", "service_changed"):
                if fault.kind == "indicate":
                    handle = fault.arg if fault.arg is not None else self._first_value_handle()
                    value = b"\x01"
                else:
                    handle = self._service_changed_handle(server)
                    span = fault.arg if fault.arg is not None else 0x0001FFFF
                    value = (span >> 16).to_bytes(2, "little") + (span & 0xFFFF).to_bytes(2, "little")
                raw = bytes([OP_HANDLE_VALUE_INDICATION]) + handle.to_bytes(2, "little") + value
                if self._indication is not None:
                    self._indication[2].cancel()
                timer = asyncio.get_running_loop().call_later(INDICATION_TIMEOUT_S, self._indication_unconfirmed)
                self._indication = (handle, asyncio.get_running_loop().time(), timer)
                server.send_gatt_pdu(bearer, raw)
                self._emit_fault(fault, pdu=raw.hex(), handle=handle)
        # 2. What happens to the answer.
        for fault in active:
            if fault.kind == "disconnect_on":
                reason = fault.arg if fault.arg is not None else HCI_REMOTE_USER_TERMINATED
                self._emit_fault(fault, reason=reason)
                self._disconnect(reason)
                return False
            if fault.kind == "no_answer":
                self._emit_fault(fault)
                return False
        for fault in active:
            if fault.kind in ("wrong_opcode", "truncate", "oversize", "disconnect_after", "corrupt"):
                saved_mtu = bearer.att_mtu
                if fault.kind == "oversize":
                    bearer.att_mtu = OVERSIZE_BUILD_MTU  # Bumble builds the response for this MTU
                self._mutation = (fault, saved_mtu)
                break
        return True

    def _service_changed_handle(self, server) -> int:
        """The value handle of the Service Changed characteristic (0x2A05)."""
        for attribute in server.attributes:
            if isinstance(attribute, Characteristic) and attribute.uuid == GATT_SERVICE_CHANGED_UUID:
                return attribute.handle
            if getattr(attribute, "type", None) == GATT_SERVICE_CHANGED_UUID:
                return attribute.handle
        raise ValueError("fault_service_changed: the device has no Service Changed characteristic (hash=0?)")

    def _undeclared_handles(self, server, count: int) -> list[int]:
        handles: list[int] = []
        for handle in (0x0000, 0xFFFE, 0x1234, 0xBEEF, 0x7FFF, *range(0xF000, 0x10000)):
            if len(handles) == count:
                break
            if handle == 0 or server.get_attribute(handle) is None:
                handles.append(handle)
        return handles

    def _mutate_response(self, server, send_inner, bearer, response, fault: Fault, saved_mtu: int) -> None:
        raw = bytearray(bytes(response))
        original = raw[0] if raw else -1
        if fault.kind == "disconnect_after":
            send_inner(bearer, response)
            reason = fault.arg if fault.arg is not None else HCI_REMOTE_USER_TERMINATED
            self._emit_fault(fault, response=original, reason=reason)
            self._disconnect(reason)
            return
        if fault.kind == "wrong_opcode":
            expected = RESPONSE_FOR[fault.op]
            raw[0] = fault.arg if fault.arg is not None else (0x09 if expected == 0x0B else 0x0B)
        elif fault.kind == "truncate":
            cut = fault.arg if fault.arg is not None else 1
            raw = raw[: max(1, len(raw) - cut)]
        elif fault.kind == "oversize":
            bearer.att_mtu = saved_mtu
            raw = self._oversized(raw, saved_mtu)
        elif fault.kind == "corrupt" and len(raw) > 1:
            raw[-1] ^= 0xFF
        self._emit_fault(fault, response=original, pdu=bytes(raw).hex(), length=len(raw), mtu=saved_mtu)
        server.send_gatt_pdu(bearer, bytes(raw))

    @staticmethod
    def _oversized(raw: bytearray, mtu: int) -> bytearray:
        """Make ``raw`` longer than ``mtu`` while keeping it well formed where possible."""
        op = raw[0] if raw else 0
        entry = b"\x00"
        if op in (0x09, 0x11) and len(raw) > 2 and raw[1] and (len(raw) - 2) % raw[1] == 0:
            entry = bytes(raw[-raw[1]:])  # one more whole attribute data entry
        elif op == 0x07 and len(raw) >= 5:
            entry = bytes(raw[-4:])
        elif op == 0x05 and len(raw) >= 2:
            entry = bytes(raw[-(4 if raw[1] == 1 else 18):])
        while len(raw) <= mtu:
            raw += entry
        return raw

    def _disconnect(self, reason: int) -> None:
        connection = self.connection
        if connection is None:
            return

        async def go() -> None:
            try:
                await asyncio.wait_for(connection.disconnect(reason), 2.0)
            except Exception as error:  # noqa: BLE001 - already gone
                logger.info("fault disconnect: %s", error)

        self._spawn(go())

    def _indication_confirmed(self) -> None:
        assert self._indication is not None
        handle, t0, timer = self._indication
        timer.cancel()
        self._indication = None
        ms = (asyncio.get_running_loop().time() - t0) * 1000
        self.emit("indication_confirmed", handle=handle, ms=round(ms, 2))

    def _indication_unconfirmed(self) -> None:
        if self._indication is None:
            return
        handle = self._indication[0]
        self._indication = None
        self.emit("indication_unconfirmed", handle=handle, after_s=INDICATION_TIMEOUT_S)

    def _screen(self, server, bearer, pdu) -> bool:
        """Return True to let Bumble's server handle ``pdu`` normally."""
        op = int(pdu.op_code)
        if op in (OP_WRITE_REQUEST, OP_WRITE_COMMAND, OP_SIGNED_WRITE_COMMAND, OP_PREPARE_WRITE_REQUEST):
            return self._screen_write(server, bearer, pdu, op)
        if op in (OP_READ_REQUEST, OP_READ_BLOB_REQUEST):
            return self._screen_read(server, bearer, pdu, op)
        return True

    def _error_response(self, server, bearer, op: int, handle: int, error: int) -> None:
        server.send_response(
            bearer,
            att.ATT_Error_Response(
                request_opcode_in_error=op,
                attribute_handle_in_error=handle,
                error_code=error,
            ),
        )

    def _screen_read(self, server, bearer, pdu, op: int) -> bool:
        handle = pdu.attribute_handle
        attribute = server.get_attribute(handle)
        if isinstance(attribute, Characteristic) and not (attribute.properties & Props.READ):
            self._error_response(server, bearer, op, handle, ATT_READ_NOT_PERMITTED)
            entry = self._by_handle.get(handle)
            self.emit(
                "read_rejected",
                char=entry[0].role if entry else str(attribute.uuid),
                uuid=str(attribute.uuid).lower(),
                handle=handle,
                error=ATT_READ_NOT_PERMITTED,
            )
            return False
        if attribute is not None and self._needs_encryption(attribute, bearer, read=True):
            # Bumble's server answers this one itself (Attribute.read_value):
            # ATT Error 0x0F Insufficient Encryption.
            entry = self._by_handle.get(handle)
            self.emit(
                "read_rejected",
                char=entry[0].role if entry else type(attribute).__name__,
                uuid=str(attribute.type).lower(),
                handle=handle,
                error=ATT_INSUFFICIENT_ENCRYPTION,
                reason="insufficient encryption",
            )
        return True

    @staticmethod
    def _needs_encryption(attribute, bearer, read: bool) -> bool:
        """True if ``attribute`` needs an encrypted link for this access and the link is not."""
        flag = att.Attribute.READ_REQUIRES_ENCRYPTION if read else att.Attribute.WRITE_REQUIRES_ENCRYPTION
        if not (getattr(attribute, "permissions", 0) & flag):
            return False
        connection = getattr(bearer, "connection", bearer)  # an EATT bearer has .connection
        return not getattr(connection, "encryption", 0)

    def _screen_write(self, server, bearer, pdu, op: int) -> bool:
        handle = pdu.attribute_handle
        value = bytes(pdu.part_attribute_value if op == OP_PREPARE_WRITE_REQUEST else pdu.attribute_value)
        is_request = op in (OP_WRITE_REQUEST, OP_PREPARE_WRITE_REQUEST)
        op_name = {
            OP_WRITE_REQUEST: "request",
            OP_WRITE_COMMAND: "command",
            OP_SIGNED_WRITE_COMMAND: "signed",
            OP_PREPARE_WRITE_REQUEST: "prepare",
        }[op]
        attribute = server.get_attribute(handle)
        if attribute is None:
            return True  # Bumble answers Invalid Handle (0x01) / drops commands

        entry = self._by_handle.get(handle)
        role = entry[0].role if entry else None

        def drop_unencrypted() -> bool:
            """secure=enc, link not encrypted: a request gets 0x0F, a command is dropped."""
            if is_request:
                return reject(ATT_INSUFFICIENT_ENCRYPTION, "insufficient encryption")
            self.emit(
                "write_dropped",
                char=role or type(attribute).__name__,
                uuid=str(attribute.type).lower(),
                handle=handle,
                value=value.hex(),
                op=op_name,
                reason="insufficient encryption",
            )
            return False

        def reject(error: int, why: str) -> bool:
            if is_request:
                self._error_response(server, bearer, op, handle, error)
            self.emit(
                "rejected",
                char=role or type(attribute).__name__,
                uuid=str(attribute.type).lower(),
                handle=handle,
                value=value.hex(),
                op=op_name,
                error=error,
                responded=is_request,
                why=why,
            )
            return False

        # 1. Properties / permissions
        if isinstance(attribute, Characteristic):
            required = {
                OP_WRITE_REQUEST: Props.WRITE,
                OP_PREPARE_WRITE_REQUEST: Props.WRITE,
                OP_WRITE_COMMAND: Props.WRITE_WITHOUT_RESPONSE,
                OP_SIGNED_WRITE_COMMAND: Props.AUTHENTICATED_SIGNED_WRITES,
            }[op]
            if not (attribute.properties & required):
                return reject(ATT_WRITE_NOT_PERMITTED, f"characteristic lacks {required.name}")
        elif isinstance(attribute, Descriptor):
            if not (attribute.permissions & att.Attribute.Permissions.WRITEABLE):
                return reject(ATT_WRITE_NOT_PERMITTED, "descriptor is not writable")
            if self._needs_encryption(attribute, bearer, read=False):
                return drop_unencrypted()
            return True
        else:
            # Service / include / characteristic declarations are read-only.
            return reject(ATT_WRITE_NOT_PERMITTED, "declaration is not writable")

        if entry is None:
            return True  # a standard characteristic (GAP/GATT service): Bumble's job
        if self._needs_encryption(attribute, bearer, read=False):
            return drop_unencrypted()

        # 2. Our one-byte characteristics: handle Write Request / Command here.
        if op == OP_PREPARE_WRITE_REQUEST:
            return True  # queued by Bumble; length checked at Execute time
        if len(value) != 1:
            return reject(ATT_INVALID_ATTRIBUTE_VALUE_LENGTH, f"length {len(value)} != 1")
        if is_request:
            server.send_response(bearer, att.ATT_Write_Response())
        self._accept_write(role, value, op_name)
        return False

    # -- value callbacks ----------------------------------------------------------
    def _read_value(self, role: str) -> bytes:
        spec, ch = next((s, c) for s, c in self._by_handle.values() if s.role == role)
        if role in ("red", "green", "blue"):
            value = bytes([self.rgb[("red", "green", "blue").index(role)]])
        else:
            value = bytes([self.last_command])
        self.emit("read", char=role, uuid=spec.uuid.lower(), handle=ch.handle, value=value.hex())
        return value

    def _execute_write(self, role: str, value: bytes) -> None:
        """Write callback: only reached through Prepare/Execute Write."""
        if len(value) != 1:
            ch = self.chars[role]
            self.emit(
                "rejected",
                char=role,
                uuid=str(ch.uuid).lower(),
                handle=ch.handle,
                value=bytes(value).hex(),
                op="execute",
                error=ATT_INVALID_ATTRIBUTE_VALUE_LENGTH,
                responded=True,
                why=f"length {len(value)} != 1",
            )
            raise att.ATT_Error(ATT_INVALID_ATTRIBUTE_VALUE_LENGTH)
        self._accept_write(role, bytes(value), "execute")

    def _accept_write(self, role: str, value: bytes, op_name: str) -> None:
        ch = self.chars[role]
        spec = next(s for s in self.spec.chars if s.role == role)
        self.emit(
            "write",
            char=role,
            uuid=spec.uuid.lower(),
            handle=ch.handle,
            value=value.hex(),
            op=op_name,
        )
        if role in ("red", "green", "blue"):
            self.rgb[("red", "green", "blue").index(role)] = value[0]
            self.emit_state()
        elif role == "command":
            command = value[0]
            self.commands.append(command)
            self.last_command = command
            if command in HARNESS_COMMANDS:
                button, pressed = HARNESS_COMMANDS[command]
                self.buttons[button] = pressed
            self.emit_state()
            self._spawn(self._notify_button(command))

    async def _notify_button(self, command: int) -> None:
        assert self.device is not None
        button = self.chars["button"]
        subscribed = False
        if self.connection is not None:
            cccd = self.device.gatt_server.subscribers.get(self.connection, {}).get(button.handle)
            subscribed = bool(cccd and cccd[0] & 0x01)
            if subscribed:
                await self.device.notify_subscriber(self.connection, button, bytes([command]))
        self.emit("notify", char="button", handle=button.handle, value=f"{command:02x}",
                  subscribed=subscribed, periodic=False)
