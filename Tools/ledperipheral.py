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

The module is importable on its own: ``PeripheralOptions.parse()`` reads the
``NAME:PROFILE[:key=value,...]`` syntax, ``LedPeripheral(opts, emit)`` builds
the Bumble Device around a ``bumble.host.Host``, ``await p.start()`` powers it
on and advertises.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from bumble import att, hci, smp
from bumble.device import Connection, Device, DeviceConfiguration
from bumble.gatt import Characteristic, CharacteristicValue, Descriptor, Service
from bumble.host import Host

logger = logging.getLogger("ledperipheral")

Props = Characteristic.Properties

# ATT error codes used here (Core Vol 3, Part F, 3.4.1.1).
ATT_READ_NOT_PERMITTED = 0x02
ATT_WRITE_NOT_PERMITTED = 0x03
ATT_INVALID_ATTRIBUTE_VALUE_LENGTH = 0x0D

# ATT opcodes screened here.
OP_READ_REQUEST = 0x0A
OP_READ_BLOB_REQUEST = 0x0C
OP_WRITE_REQUEST = 0x12
OP_WRITE_COMMAND = 0x52
OP_SIGNED_WRITE_COMMAND = 0xD2
OP_PREPARE_WRITE_REQUEST = 0x16

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

# Harness commands: byte -> (button index, pressed)
HARNESS_COMMANDS = {1: (0, 1), 0: (0, 0), 3: (1, 1), 4: (1, 0)}


# -----------------------------------------------------------------------------
# Options
# -----------------------------------------------------------------------------
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
    name_in: str = "adv"  # "adv" (Complete Local Name) | "shortened" | "none"
    short_len: int | None = None  # with name_in=shortened: advertise name[:N]
    conn_update: bool = False
    conn_update_delay_ms: float = 0.0
    security_request: bool = False
    advertise_uuid: bool = True
    flags: str = "auto"  # "auto" (only if they fit) | "1" (always, error if too long) | "0"
    init: tuple[int, int, int] = (0, 0, 0)
    notify_every_ms: float = 0.0  # harness: notify the button value every MS while subscribed

    KEYS = (
        "interval", "addr", "name_in", "short", "conn_update", "conn_update_delay",
        "security_request", "uuid", "flags", "init", "notify_every",
    )

    @classmethod
    def parse(cls, spec: str, index: int = 0) -> PeripheralOptions:
        """Parse ``NAME:PROFILE[:key=value,...]``.

        Keys: interval=MS (default 50), addr=C0:11:22:33:44:55 (static random;
        default derived from index), name_in=adv|shortened|none, short=N
        (shortened name length), conn_update=1, conn_update_delay=MS,
        security_request=1, uuid=0, flags=auto|0|1, init=R,G,B,
        notify_every=MS (harness: notify the button value periodically while
        a client is subscribed).
        Options are separated by commas; ``init=R,G,B`` and ``addr=..`` are
        recognised even though they contain commas / colons.
        """
        name, sep, rest = spec.partition(":")
        if not sep or not name:
            raise ValueError(f"device spec {spec!r}: expected NAME:PROFILE[:opts]")
        profile, _, opt_text = rest.partition(":")
        if profile not in PROFILES:
            raise ValueError(f"device spec {spec!r}: unknown profile {profile!r}")
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
            elif key == "init":
                rgb = tuple(int(v) for v in value.split(","))
                if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
                    raise ValueError(f"init must be R,G,B with 0..255, not {value!r}")
                opts.init = rgb  # type: ignore[assignment]
            else:
                raise ValueError(f"device spec {spec!r}: unknown option {key!r} (known: {cls.KEYS})")
        addr = hci.Address(opts.address)
        if (addr.address_bytes[5] & 0xC0) != 0xC0:
            raise ValueError(f"address {opts.address} is not a static random address (top bits 11)")
        if opts.notify_every_ms and profile != "harness":
            raise ValueError("notify_every is only for the harness profile")
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
    if opts.advertise_uuid:
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
    * ``read_rejected`` {char, uuid, handle, error}
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
    * ``smp``           {code: int, pdu: hex}  every SMP PDU received
    """

    def __init__(self, opts: PeripheralOptions, emit: Emit) -> None:
        self.opts = opts
        self.spec = PROFILES[opts.profile]
        self._emit = emit
        self.adv_data = build_advertising_data(opts)
        self.device: Device | None = None
        self.connection: Connection | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False

        # Device state
        self.rgb = list(opts.init)
        self.buttons = [0, 0]
        self.commands: list[int] = []
        self.last_command = 0

        # Characteristics by role, and by value handle once attached
        self.chars: dict[str, Characteristic] = {}
        self._by_handle: dict[int, tuple[CharSpec, Characteristic]] = {}

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
        return info

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- construction ---------------------------------------------------------
    def attach(self, host: Host) -> Device:
        """Create the Bumble Device on ``host`` (not yet powered on)."""
        config = DeviceConfiguration(name=self.opts.name)
        config.address = hci.Address(self.opts.address)
        config.advertising_interval_min = self.opts.interval_ms
        config.advertising_interval_max = self.opts.interval_ms
        device = Device(config=config, host=host)
        self.device = device

        device.add_service(self._build_service())
        # Value handles are assigned by add_service.
        for spec in self.spec.chars:
            ch = self.chars[spec.role]
            self._by_handle[ch.handle] = (spec, ch)

        self._install_att_screen(device)
        self._install_smp_observer(device)
        self._install_signal_observer(device)
        device.on(Device.EVENT_CONNECTION, self._on_connection)
        device.on("characteristic_subscription", self._on_subscription)
        return device

    def _build_service(self) -> Service:
        chars = []
        for spec in self.spec.chars:
            value = CharacteristicValue(
                read=lambda conn, role=spec.role: self._read_value(role),
                write=lambda conn, value, role=spec.role: self._execute_write(role, value),
            )
            ch = Characteristic(
                spec.uuid,
                spec.properties,
                Characteristic.READABLE | Characteristic.WRITEABLE,
                value,
            )
            self.chars[spec.role] = ch
            chars.append(ch)
        return Service(self.spec.service_uuid, chars)

    # -- life cycle -----------------------------------------------------------
    async def start(self) -> None:
        """Power on the device and start advertising."""
        assert self.device is not None
        await self.device.power_on()
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
        self.emit(
            "connected",
            peer=str(connection.peer_address).split("/")[0],
            peer_type=int(connection.peer_address.address_type),
            handle=connection.handle,
        )
        connection.on(Connection.EVENT_DISCONNECTION, lambda reason: self._on_disconnection(connection, reason))
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

    def _on_disconnection(self, connection: Connection, reason: int) -> None:
        if self.connection is connection:
            self.connection = None
        self.emit("disconnected", reason=int(reason))
        if not self._stopping:
            # Real firmware advertises again as soon as the link is gone.
            self._spawn(self.advertise())

    async def _send_security_request(self, connection: Connection) -> None:
        assert self.device is not None
        self.device.request_pairing(connection)
        self.emit("security_request")

    async def _request_conn_update(self, connection: Connection) -> None:
        assert self.device is not None
        if self.opts.conn_update_delay_ms:
            await asyncio.sleep(self.opts.conn_update_delay_ms / 1000)
        # Same values as seen from real peripherals: 30-50 ms, latency 0, 4 s
        # (units: 1.25 ms for intervals, 10 ms for the timeout).
        manager = self.device.l2cap_channel_manager
        self.emit("conn_update", interval_min_ms=30.0, interval_max_ms=50.0, latency=0, timeout_ms=4000.0)
        try:
            result = await asyncio.wait_for(manager.update_connection_parameters(connection, 24, 40, 0, 400), 5.0)
            self.emit("conn_update_response", accepted=result == 0, result=int(result))
        except asyncio.TimeoutError:
            self.emit("conn_update_timeout")
        finally:
            # Bumble keeps the pending future forever if no answer came; clear
            # it so that the next connection can ask again.
            manager.connection_parameters_update_response = None

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

    # -- observers -------------------------------------------------------------
    def _install_smp_observer(self, device: Device) -> None:
        channels = device.l2cap_channel_manager.fixed_channels
        inner = channels[smp.SMP_CID]

        def observe(connection, pdu: bytes) -> None:
            self.emit("smp", code=pdu[0] if pdu else -1, pdu=pdu.hex())
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
            if self._screen(server, bearer, pdu):
                inner(bearer, pdu)

        # Server.on_gatt_pdu is looked up on the instance by the device's ATT
        # dispatch, so an instance attribute replaces it for this device only.
        server.on_gatt_pdu = screened

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
        return True

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
            return True
        else:
            # Service / include / characteristic declarations are read-only.
            return reject(ATT_WRITE_NOT_PERMITTED, "declaration is not writable")

        if entry is None:
            return True  # a standard characteristic (GAP/GATT service): Bumble's job

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
