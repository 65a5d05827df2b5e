"""A peer's configuration: the ``NAME:PROFILE[:key=value,...]`` device spec
parsed into PeripheralOptions, and the help text of the security keys.
"""

from __future__ import annotations

import dataclasses

from bumble import att, hci

from attledtools.peers.faultspec import FAULT_KINDS, Fault
from attledtools.peers.profiles import OTHER_PROFILES, PROFILES, other_profile

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
    # readv_delay=MS: after a link ends, advertising again only after MS (a lamp
    # that reboots when it drops), instead of at once as real firmware does.
    readv_delay_ms: float = 0.0
    # faults_once=1: a fault's #N counts the requests of the device's life, not of each
    # connection, so it strikes once (a lamp that drops its first link while being set up).
    faults_once: bool = False
    name_in: str = "adv"  # "adv" (Complete Local Name) | "shortened" | "none"
    short_len: int | None = None  # with name_in=shortened: advertise name[:N]
    conn_update: bool = False
    conn_update_delay_ms: float = 0.0
    security_request: bool = False
    advertise_uuid: bool = True
    stamp: bool = False  # stamp=1: a stamp AD (sequence, send time) filled in by vworld's air (advstamp.py)
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
        "interval", "adv_cycle", "adv_delay", "readv_delay", "faults_once", "addr", "name_in", "short", "conn_update", "conn_update_delay",
        "security_request", "uuid", "stamp", "flags", "init", "notify_every", "conn_update_params", "mtu", "hash", "unsupported",
        "secure", "pairing", "forget_bonds",
        *(f"fault_{kind}" for kind in FAULT_KINDS),
    )

    @classmethod
    def parse(cls, spec: str, index: int = 0) -> PeripheralOptions:
        """Parse ``NAME:PROFILE[:key=value,...]``.

        Keys: interval=MS (default 50), adv_cycle=ON/OFF (advertise ON ms,
        silent OFF ms, repeated while not connected; ON below the interval is
        one advertisement), adv_delay=MS (first advertisement after MS),
        readv_delay=MS (advertising again MS after a link ends, not at once),
        faults_once=1 (fault_* triggers count over the device's life, not per connection),
        addr=C0:11:22:33:44:55 (static random;
        default derived from index), name_in=adv|shortened|none, short=N
        (shortened name length), conn_update=1, conn_update_delay=MS,
        security_request=1, uuid=0, stamp=1 (each advertisement carries its
        sequence number and send time, see advstamp.py), flags=auto|0|1, init=R,G,B,
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
            elif key == "readv_delay":
                opts.readv_delay_ms = float(value)
            elif key == "faults_once":
                opts.faults_once = value == "1"
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
            elif key == "stamp":
                opts.stamp = value not in ("0", "")
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
                if not opts.unsupported or any(op in (att.Opcode.ATT_EXCHANGE_MTU_REQUEST,) or not 0 < op < 0x100 for op in opts.unsupported):
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
