"""The controllers of vworld's air: the host controllers (HostController,
Bumble controllers for an external host such as attled, with legacy reports,
spec-mode fixes, controller faults and the RSSI of the rooms) and the devices'
controllers (DeviceController); both with what --timed-air changes
(AirControllerMixin)."""

from __future__ import annotations

import asyncio
import dataclasses

from bumble import hci, ll
from bumble.controller import AdvertisingSet, Controller, LegacyAdvertiser
from bumble.link import LocalLink

from attledtools.drivers.air.events import emit
from attledtools.drivers.air.hostfaults import HostFault

DEFAULT_ADV_INTERVAL = 0x0800  # 1.28 s, the spec's default advertising interval (0.625 ms units)
MIN_ADV_INTERVAL = 0x0020  # 20 ms, the least for connectable advertising


def advertising_event_s(interval: int, link) -> float:
    """Timed air: seconds to the next advertising event, the interval (0.625 ms
    units; 0 = never set: the default) plus the link's advDelay."""
    interval = max(interval or DEFAULT_ADV_INTERVAL, MIN_ADV_INTERVAL)
    return interval * 0.625e-3 + link.adv_delay()


class TimedLegacyAdvertiser(LegacyAdvertiser):
    """Legacy advertising under --timed-air: an event every advertising interval
    plus advDelay.  Bumble's own waits advertising_interval_min / 1000 s, reading
    the 0.625 ms units as ms (an interval of 50 ms, 80 units, gives 80 ms), and
    adds no advDelay."""

    def _on_timer_fired(self) -> None:
        self.send_advertising_data()
        self.timer_handle = asyncio.get_running_loop().call_later(
            advertising_event_s(self.advertising_interval_min, self.controller.link), self._on_timer_fired
        )


class TimedAdvertisingSet(AdvertisingSet):
    """An extended advertising set under --timed-air: an event every primary
    advertising interval plus advDelay (Bumble's: every interval, no advDelay)."""

    def _on_extended_advertising_timer_fired(self) -> None:
        if not self.enabled:
            return
        self.send_extended_advertising_data()
        interval = self.parameters.primary_advertising_interval_min if self.parameters else 0
        self.timer_handle = asyncio.get_running_loop().call_later(
            advertising_event_s(interval, self.controller.link), self._on_extended_advertising_timer_fired
        )


class AirControllerMixin:
    """What --timed-air changes in every controller of the air (host's and device's).

    Advertising events every interval plus advDelay (TimedLegacyAdvertiser,
    TimedAdvertisingSet).  A peripheral's LE Connection Complete carries the
    CONNECT_IND's interval, latency and supervision timeout, not Bumble's fixed
    10 / 0 / 10 (12.5 ms, 100 ms): its host sees the interval that its link's
    connection events follow.  Off (``timed=False``), Bumble's behaviour.
    """

    timed_air = False
    _connect_ind: ll.ConnectInd | None = None

    def _init_air(self, timed: bool) -> None:
        self.timed_air = timed
        if timed:
            self.le_legacy_advertiser = TimedLegacyAdvertiser(self)

    def _timed_advertising_set(self, handle: int) -> None:
        # Bumble makes the set on the first command naming it; make it ours first.
        if self.timed_air and handle not in self.advertising_sets:
            self.advertising_sets[handle] = TimedAdvertisingSet(controller=self, handle=handle)

    def on_hci_le_set_advertising_set_random_address_command(self, command):
        self._timed_advertising_set(command.advertising_handle)
        return super().on_hci_le_set_advertising_set_random_address_command(command)

    def on_hci_le_set_extended_advertising_parameters_command(self, command):
        self._timed_advertising_set(command.advertising_handle)
        return super().on_hci_le_set_extended_advertising_parameters_command(command)

    def on_le_connect_ind(self, packet: ll.ConnectInd) -> None:
        self._connect_ind = packet
        try:
            super().on_le_connect_ind(packet)
        finally:
            self._connect_ind = None

    def send_hci_packet(self, packet: hci.HCI_Packet) -> None:
        ind = self._connect_ind
        if ind is not None and self.timed_air and isinstance(packet, hci.HCI_LE_Connection_Complete_Event):
            packet = dataclasses.replace(packet, connection_interval=ind.interval, peripheral_latency=ind.latency,
                                         supervision_timeout=ind.timeout)
        super().send_hci_packet(packet)


class DeviceController(AirControllerMixin, Controller):
    """A device's controller (its LedPeripheral's): Bumble's, with --timed-air."""

    def __init__(self, name: str, link: LocalLink, timed: bool = False):
        super().__init__(name, link=link)
        self._init_air(timed)


class HostController(AirControllerMixin, Controller):
    """A Bumble controller for an external host (attled), with options.

    legacy:  hide LE Extended Advertising (and Periodic) in the LE features,
             so advertisements are reported as legacy LE Advertising Reports
             (LE Meta subevent 0x02) instead of extended ones (0x0D).
    spec:    fix some stock behaviours to what the Core spec requires:
             - HCI_Reset drops links (peer sees 0x08), scanning, advertising,
               a pending connection and the random address;
             - LE Create Connection Cancel with a pending connection: Command
               Complete 0x00 then LE Connection Complete status 0x02 (Unknown
               Connection Identifier); without one: Command Disallowed 0x0C;
             - HCI_Disconnect: the local Disconnection Complete carries 0x16
               (Connection Terminated By Local Host), unknown handle gives
               Command Status 0x02.

    rssi:    an advertising PDU comes from the air (on_air_advertising_pdu)
             with the RSSI of the rooms (rooms.py); the advertising reports
             made of it (legacy and extended, and periodic ones) carry that
             RSSI plus the noise, not Bumble's fixed -50.
    timed:   --timed-air (AirControllerMixin).

    LE_States: Bumble's table leaves out bits 22 and 23 (passive and active
    scanning combined with initiating), yet its controller goes on scanning
    and reporting beside a pending LE Create Connection (its scan and its
    pending connection are independent). Our host controllers list the
    combination they carry out, so a host can rely on it;
    ``stock_states=True`` keeps Bumble's table (the fallback's tests).
    """

    SCAN_WHILE_INITIATING = (1 << 22) | (1 << 23)

    REPORTS = (hci.HCI_LE_Advertising_Report_Event, hci.HCI_LE_Extended_Advertising_Report_Event)

    def __init__(self, name: str, link: LocalLink, public_address: str, legacy: bool, spec: bool,
                 index: int = 0, faults: list[HostFault] | None = None, stock_states: bool = False,
                 timed: bool = False):
        super().__init__(name, link=link, public_address=public_address)
        self._init_air(timed)
        self._heard_rssi: int | None = None  # RSSI of the advertising PDU being received
        if not stock_states:
            states = int.from_bytes(Controller.le_states, "little") | self.SCAN_WHILE_INITIATING
            self.le_states = states.to_bytes(8, "little")
        self.spec_mode = spec
        self.index = index
        self.faults: list[HostFault] = faults if faults is not None else []
        self.command_counts: dict[int, int] = {}
        if legacy:
            self.le_features = Controller.le_features & ~(
                hci.LeFeatureMask.LE_EXTENDED_ADVERTISING | hci.LeFeatureMask.LE_PERIODIC_ADVERTISING
            )

    # -- advertising reports with the RSSI of the rooms --------------------------------
    def on_air_advertising_pdu(self, packet: ll.AdvertisingPdu, rssi: int) -> None:
        """An advertising PDU from the air (link.py), heard at ``rssi`` dBm."""
        self._heard_rssi = rssi
        try:
            self.on_ll_advertising_pdu(packet)
        finally:
            self._heard_rssi = None

    def send_hci_packet(self, packet: hci.HCI_Packet) -> None:
        rssi = self._heard_rssi
        if rssi is not None:
            if isinstance(packet, self.REPORTS):
                # Each report its own noise: on real air, the scan response is a reception of its own.
                packet = type(packet)([dataclasses.replace(r, rssi=self._report_rssi(rssi)) for r in packet.reports])
            elif isinstance(packet, hci.HCI_LE_Periodic_Advertising_Report_Event):
                packet = dataclasses.replace(packet, rssi=self._report_rssi(rssi))
        super().send_hci_packet(packet)

    def _report_rssi(self, rssi: int) -> int:
        rooms = getattr(self.link, "rooms", None)
        return rooms.report_rssi(rssi) if rooms is not None else rssi

    # -- helpers ----------------------------------------------------------------
    def drop_everything(self, reason: int = hci.HCI_CONNECTION_TIMEOUT_ERROR) -> None:
        """Forget all state as if power-cycled; peers see their links time out."""
        for connection in list(self.le_connections.values()):
            connection.send_ll_control_pdu(ll.TerminateInd(reason))
            del self.le_connections[connection.peer_address]
        self.pending_le_connection = None
        self.le_scan_enable = False
        self.le_legacy_advertiser.stop()
        for advertising_set in self.advertising_sets.values():
            advertising_set.stop()
        self.advertising_sets.clear()
        self.random_address = hci.Address("00:00:00:00:00:00")

    # -- faults ---------------------------------------------------------------------
    def send_hardware_error(self, code: int = 0x01) -> None:
        """Send an HCI Hardware Error event (0x10) to the host."""
        if self.host is not None:
            packet = bytes([hci.HCI_EVENT_PACKET, hci.HCI_HARDWARE_ERROR_EVENT, 0x01, code & 0xFF])
            asyncio.get_running_loop().call_soon(self.host.on_packet, packet)

    def on_hci_command_packet(self, command: hci.HCI_Command) -> None:
        opcode = command.op_code
        count = self.command_counts[opcode] = self.command_counts.get(opcode, 0) + 1
        fault = next((f for f in self.faults if f.applies(self.index, opcode, count)), None)
        if fault is None:
            return super().on_hci_command_packet(command)
        report = {"event": "host_fault", "host": self.index, "fault": fault.kind,
                  "opcode": opcode, "command": command.name, "nth": count}
        if fault.kind == "swallow":
            emit(report)
            return None
        if fault.kind == "reject":
            emit({**report, "status": fault.arg})
            if isinstance(command, hci.HCI_SyncCommand):
                self.send_hci_packet(
                    hci.HCI_Command_Complete_Event(
                        num_hci_command_packets=1,
                        command_opcode=opcode,
                        return_parameters=hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode(fault.arg)),
                    )
                )
            else:
                self._send_hci_command_status(fault.arg, opcode)
            return None
        # hw_error: answer normally, then the Hardware Error event.
        super().on_hci_command_packet(command)
        emit({**report, "code": fault.arg})
        self.send_hardware_error(fault.arg)
        return None

    # -- spec-mode command overrides ------------------------------------------------
    def on_hci_reset_command(self, command):
        if self.spec_mode:
            self.drop_everything()
            self.event_mask = 0
            self.le_event_mask = 0
        return super().on_hci_reset_command(command)

    def on_hci_le_create_connection_cancel_command(self, command):
        if not self.spec_mode:
            return super().on_hci_le_create_connection_cancel_command(command)
        pending = self.pending_le_connection
        if pending is None:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        self.pending_le_connection = None
        event = hci.HCI_LE_Connection_Complete_Event(
            status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR,
            connection_handle=0,
            role=hci.Role.CENTRAL,
            peer_address_type=pending.peer_address.address_type,
            peer_address=pending.peer_address,
            connection_interval=0,
            peripheral_latency=0,
            supervision_timeout=0,
            central_clock_accuracy=0,
        )
        # The Command Complete (sent by our caller after we return) must come
        # first; one call_soon hop puts this event behind it.
        asyncio.get_running_loop().call_soon(self.send_hci_packet, event)
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_hci_disconnect_command(self, command):
        if not self.spec_mode:
            return super().on_hci_disconnect_command(command)
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None:
            if self.find_connection_by_handle(command.connection_handle) is None:
                self._send_hci_command_status(
                    hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, command.op_code
                )
                return None
            return super().on_hci_disconnect_command(command)
        self._send_hci_command_status(hci.HCI_COMMAND_STATUS_PENDING, command.op_code)
        connection.send_ll_control_pdu(ll.TerminateInd(command.reason))
        self.on_le_disconnected(connection, hci.HCI_CONNECTION_TERMINATED_BY_LOCAL_HOST_ERROR)
        return None
