"""The LED peer: LedPeripheral, a Bumble Device with an enforcing GATT server,
its state (RGB or buttons) and the events it reports.

Its parts are mixins of their own: link.py (connections), security.py
(pairing, bonds), attscreen.py (the ATT screen), faults.py (the fault
options); options.py parses its configuration, profiles.py its GATT
profiles, advertising.py its advertising data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from bumble import att, hci
from bumble.device import Connection, Device, DeviceConfiguration
from bumble.gatt import (
    GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR, Characteristic, CharacteristicValue,
    ClientCharacteristicConfigurationBits, Descriptor, Service,
)
from bumble.host import Host

from attledtools.peers.advertising import build_advertising_data
from attledtools.peers.attscreen import AttScreenMixin
from attledtools.peers.faults import FaultMixin
from attledtools.peers.faultspec import Fault
from attledtools.peers.link import LinkMixin
from attledtools.peers.options import PeripheralOptions
from attledtools.peers.profiles import HARNESS_COMMANDS, OTHER_PROFILES, PROFILES, CharSpec, ProfileSpec, other_profile
from attledtools.peers.security import ENCRYPTION_REQUIRED, SecurityMixin

Emit = Callable[[dict[str, Any]], None]


def make_peripheral(opts: PeripheralOptions, emit: Emit) -> LedPeripheral:
    """The peripheral for ``opts.profile``: a LedPeripheral, or the subclass of an OTHER_PROFILES module."""
    if opts.profile in OTHER_PROFILES:
        return other_profile(opts.profile).PERIPHERAL(opts, emit)
    return LedPeripheral(opts, emit)


class LedPeripheral(LinkMixin, SecurityMixin, AttScreenMixin, FaultMixin):
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
                error=att.ATT_INVALID_ATTRIBUTE_LENGTH_ERROR,
                responded=True,
                why=f"length {len(value)} != 1",
            )
            raise att.ATT_Error(att.ATT_INVALID_ATTRIBUTE_LENGTH_ERROR)
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
            subscribed = bool(cccd and cccd[0] & ClientCharacteristicConfigurationBits.NOTIFICATION)
            if subscribed:
                await self.device.notify_subscriber(self.connection, button, bytes([command]))
        self.emit("notify", char="button", handle=button.handle, value=f"{command:02x}",
                  subscribed=subscribed, periodic=False)
