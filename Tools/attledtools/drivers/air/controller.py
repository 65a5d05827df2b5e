"""The host controllers of vworld: Bumble controllers for an external host
(attled), with legacy reports, spec-mode fixes and controller faults."""

from __future__ import annotations

import asyncio

from bumble import hci, ll
from bumble.controller import Controller
from bumble.link import LocalLink

from attledtools.drivers.air.events import emit
from attledtools.drivers.air.hostfaults import HostFault


class HostController(Controller):
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

    LE_States: Bumble's table leaves out bits 22 and 23 (passive and active
    scanning combined with initiating), yet its controller goes on scanning
    and reporting beside a pending LE Create Connection (its scan and its
    pending connection are independent). Our host controllers list the
    combination they carry out, so a host can rely on it;
    ``stock_states=True`` keeps Bumble's table (the fallback's tests).
    """

    SCAN_WHILE_INITIATING = (1 << 22) | (1 << 23)

    def __init__(self, name: str, link: LocalLink, public_address: str, legacy: bool, spec: bool,
                 index: int = 0, faults: list[HostFault] | None = None, stock_states: bool = False):
        super().__init__(name, link=link, public_address=public_address)
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
