"""vworld: a virtual Bluetooth LE world for testing attled.

One process, one Bumble LocalLink (the "air"), and on it:

* host controllers (``--host SPEC``, repeatable): Bumble virtual controllers
  served as H4 on a transport for attled (or any host) to use:
    tcp-server:127.0.0.1:PORT   attled: tcp:127.0.0.1:PORT  (PORT 0 = pick one;
                                the ready line reports the real port)
    unix-server:/path.sock      attled: unix:/path.sock
    pty:/path/link              attled: serial:/path/link   (pseudo terminal)
  One host per controller at a time: a second client connecting while one is
  attached is refused (closed at once, "host_refused" event).
* LED peripherals (``--device NAME:PROFILE[:key=value,...]``, repeatable): a
  Bumble Device with the pycom / particle / harness GATT profile on its own
  virtual controller (see attledtools.peers for the options and behaviour),
  or with profile ``gattdb``: a random GATT database built from a seed
  (``NAME:gattdb:seed=N[,mtu=23,last_ffff=1,...]``), which prints its whole
  database as a "gatt_database" event before "ready" (see gattdb.py).

With ``--controller rootcanal`` the controllers are Android's Root Canal
instead (rcworld.py): vworld starts a rootcanal process; every --host
(tcp-server only) and every --device is a client of its HCI port and gets a
controller of its own there, with a public address that Root Canal picks (the
ready line's host_addresses are null; a client that leaves frees its address
for the next). host_connected {"controller":N,"address":A} and
host_disconnected {"controller":N} follow Root Canal's log for every client
that is not one of this world's devices. Bumble-only options (host faults,
legacy reports, snoop, ...) are refused.

Alternatively ``--peripheral-transport SPEC`` attaches the (single) --device
to an external controller over a Bumble transport (e.g. tcp-client:HOST:PORT).

Everything observable is printed on stdout as JSON lines, one per event,
flushed.  Each line has "event" and "t" (seconds since start).  Main events:

  {"event":"ready","hosts":[SPEC...],"attled":[SPEC...],"devices":[{...}],...}
  {"event":"host_connected","host":I} / host_disconnected / host_refused
  {"event":"connected","device":NAME,"peer":ADDR,"peer_type":0|1,"handle":H}
  {"event":"disconnected","device":NAME,"reason":INT}
  {"event":"write","device":NAME,"char":"red|green|blue|command","uuid":..,
   "handle":INT,"value":"hex","op":"request|command|execute"}
  {"event":"rejected","device":NAME,...,"op":..,"error":INT,"responded":BOOL}
  {"event":"state","device":NAME,"profile":"pycom","rgb":[r,g,b]}
  {"event":"state","device":NAME,"profile":"harness","buttons":[b1,b2],
   "commands":[...]}
  plus advertising, att, mtu, read, read_rejected, subscribed, notify,
  conn_update, conn_update_response, conn_update_timeout, conn_params,
  l2cap_signal, security_request, smp, pairing, encryption, ltk_request,
  bonds_forgotten, write_dropped, h4_error, exit (see
  attledtools.peers.peripheral.LedPeripheral).

Controller faults (``--host-fault``, see HOST_FAULT_HELP) make the host
controllers misbehave: a command answered with an error status, a command
never answered, a Hardware Error event.  With ``--stdin-commands`` vworld also
reads commands from stdin, one per line, to inject faults mid-run (a Hardware
Error, the host's transport closed); see STDIN_HELP.

Peripheral faults (``--device NAME:PROFILE:fault_KIND=...``) are described in
attledtools.peers.faultspec.FAULT_HELP (also printed by --help).  Security options
(``secure=enc``, ``pairing=sc|legacy``, ``forget_bonds=N``; events pairing,
encryption, ltk_request, bonds_forgotten, write_dropped) are described in
attledtools.peers.options.SECURITY_HELP (also printed by --help).

SIGTERM / SIGINT end it cleanly (exit 0); with --exit-on-stdin-eof it also
ends when stdin closes; --lifetime SEC is a hard upper bound on its life.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

from bumble import core, hci, ll
from bumble.controller import Controller
from bumble.host import Host
from bumble.link import LocalLink
from bumble.snoop import BtSnooper, Snooper
from bumble.transport import open_transport
from bumble.transport.common import AsyncPipeSink, PacketParser

from attledtools.drivers.rcworld import RootCanal
from attledtools.peers.advertising import build_advertising_data
from attledtools.peers.faultspec import FAULT_HELP
from attledtools.peers.options import SECURITY_HELP, PeripheralOptions
from attledtools.peers.peripheral import LedPeripheral, make_peripheral

logger = logging.getLogger("vworld")

START = time.monotonic()


# -----------------------------------------------------------------------------
# Event output
# -----------------------------------------------------------------------------
def emit(event: dict[str, Any]) -> None:
    """Print one JSON event line on stdout, flushed."""
    line = {"event": event["event"], "t": round(time.monotonic() - START, 4)}
    line.update({k: v for k, v in event.items() if k != "event"})
    try:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass


# -----------------------------------------------------------------------------
# The air
# -----------------------------------------------------------------------------
class Air(LocalLink):
    """LocalLink whose LE ACL data carries the connection's own address.

    Stock LocalLink stamps LE ACL data with the sender controller's random
    address, so a link made with own_address_type=public (or before LE Set
    Random Address) carries no data at all.  Here the source is the address
    the sender used in that connection, as on real air.
    """

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        if transport == core.PhysicalTransport.LE:
            connection = sender_controller.le_connections.get(destination_address)
            if connection is not None:
                destination = self.find_le_controller(destination_address)
                if destination is not None:
                    source = connection.self_address
                    asyncio.get_running_loop().call_soon(
                        lambda: destination.on_link_acl_data(source, transport, data)
                    )
                return
        super().send_acl_data(sender_controller, destination_address, transport, data)


# -----------------------------------------------------------------------------
# Controller faults
# -----------------------------------------------------------------------------
HOST_FAULT_HELP = """\
Controller faults (--host-fault FAULT, repeatable; every host controller, or
only host I with I@FAULT).  OPCODE is the HCI opcode in hex (0x200d LE Create
Connection, 0x200c LE Set Scan Enable, 0x2042 LE Set Extended Scan Enable,
0x0406 Disconnect ...); #N applies the fault to the N-th such command only
(default: every one).
  reject=OPCODE[:STATUS][#N]    answer with error STATUS (default 0x0c Command
                                Disallowed): Command Status for a command
                                normally answered so, else Command Complete
                                whose only parameter is the status
  swallow=OPCODE[#N]            never answer the command (no event at all)
  hw_error=OPCODE[:CODE][#N]    answer the command normally, then send a
                                Hardware Error event (code default 0x01)
Each fault applied is reported as {"event":"host_fault","host":I,"fault":..,
"opcode":..,...}.
"""

STDIN_HELP = """\
stdin commands (--stdin-commands), one per line; each is answered with
{"event":"stdin_command","line":..,"ok":true|false[,"detail":..]}:
  hw_error [CODE] [HOST]       send a Hardware Error event (default code 0x01, host 0)
  close [HOST]                 close host HOST's transport: the attached client's
                               socket (tcp/unix), or the pty / transport itself
  fault FAULT                  add a --host-fault at run time (same syntax)
"""


class HostFault:
    """One --host-fault: kind, opcode, argument (status / code), occurrence, host."""

    KINDS = ("reject", "swallow", "hw_error")

    def __init__(self, text: str):
        self.text = text
        host_text, at, rest = text.partition("@")
        if not at:
            host_text, rest = "", text
        self.host = int(host_text) if host_text else None
        kind, eq, value = rest.partition("=")
        if not eq or kind not in self.KINDS:
            raise ValueError(f"host fault {text!r}: expected [I@]reject|swallow|hw_error=OPCODE[:ARG][#N]")
        self.kind = kind
        value, _, nth = value.partition("#")
        opcode, _, arg = value.partition(":")
        try:
            self.opcode = int(opcode, 16)
            self.arg = int(arg, 16) if arg else (0x0C if kind == "reject" else 0x01)
            self.nth = int(nth) if nth else None
        except ValueError:
            raise ValueError(f"host fault {text!r}: OPCODE and ARG are hex, #N a number") from None
        if kind == "swallow" and arg:
            raise ValueError(f"host fault {text!r}: swallow takes no argument")
        if not 0 <= self.opcode <= 0xFFFF or not 0 <= self.arg <= 0xFF:
            raise ValueError(f"host fault {text!r}: opcode or argument out of range")

    def applies(self, host: int, opcode: int, count: int) -> bool:
        return (self.host is None or self.host == host) and self.opcode == opcode and self.nth in (None, count)


# -----------------------------------------------------------------------------
# Host controllers
# -----------------------------------------------------------------------------
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
    """

    def __init__(self, name: str, link: LocalLink, public_address: str, legacy: bool, spec: bool,
                 index: int = 0, faults: list[HostFault] | None = None):
        super().__init__(name, link=link, public_address=public_address)
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
            packet = bytes([hci.HCI_EVENT_PACKET, 0x10, 0x01, code & 0xFF])
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


class SnoopTap:
    """Packet sink wrapper that records every packet into a btsnoop file."""

    def __init__(self, sink, snooper: BtSnooper, file, direction: Snooper.Direction):
        self.sink, self.snooper, self.file, self.direction = sink, snooper, file, direction

    def on_packet(self, packet: bytes) -> None:
        self.snooper.snoop(packet, self.direction)
        self.file.flush()
        self.sink.on_packet(packet)


class SingleHostServer:
    """H4 over a TCP or Unix stream server socket, one host at a time.

    Compared with Bumble's tcp-server / unix-server transports: a second client
    does not silently share the controller.  It waits (its bytes buffered) for
    up to HANDOVER_S for the current client to go away -- a host process that
    exits and a new one that connects may be seen in either order -- and is
    refused (closed, "host_refused" event) if the current client stays.  The
    H4 parser is reset for every new client (a half-sent packet from a previous
    client cannot corrupt the next one), and connects / disconnects are
    reported as host_connected / host_disconnected events.
    """

    HANDOVER_S = 0.5

    def __init__(self, index: int, on_host_gone=None):
        self.index = index
        self.parser = PacketParser()
        self.client: asyncio.Transport | None = None
        self.waiting: list = []  # protocols waiting for the current client to leave
        self.server: asyncio.AbstractServer | None = None
        self.on_host_gone = on_host_gone
        self.unix_path: str | None = None

    # TransportSource side (packets from the host go to the controller)
    def set_packet_sink(self, sink) -> None:
        self.parser.set_packet_sink(sink)

    # TransportSink side (packets from the controller go to the host)
    def on_packet(self, packet: bytes) -> None:
        if self.client is not None:
            self.client.write(packet)

    def _feed(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except core.InvalidPacketError as error:
            emit({"event": "h4_error", "host": self.index, "detail": str(error)})

    def _activate(self, protocol) -> None:
        self.client = protocol.transport
        self.parser.reset()
        emit({"event": "host_connected", "host": self.index})
        if protocol.pending:
            data, protocol.pending = bytes(protocol.pending), None
            self._feed(data)
        protocol.pending = None

    def _protocol(self):
        server = self

        class Protocol(asyncio.Protocol):
            transport: asyncio.Transport
            pending: bytearray | None = None  # bytes received while waiting

            def connection_made(self, transport):
                self.transport = transport
                if server.client is None:
                    server._activate(self)
                    return
                self.pending = bytearray()
                server.waiting.append(self)
                asyncio.get_running_loop().call_later(server.HANDOVER_S, self._refuse_if_waiting)

            def _refuse_if_waiting(self):
                if self in server.waiting:
                    server.waiting.remove(self)
                    emit({"event": "host_refused", "host": server.index})
                    self.transport.close()

            def data_received(self, data):
                if server.client is self.transport:
                    server._feed(data)
                elif self.pending is not None:
                    self.pending += data

            def connection_lost(self, exc):
                if self in server.waiting:
                    server.waiting.remove(self)
                    return
                if server.client is not self.transport:
                    return
                server.client = None
                server.parser.reset()
                emit({"event": "host_disconnected", "host": server.index})
                if server.on_host_gone:
                    server.on_host_gone()
                if server.waiting:
                    server._activate(server.waiting.pop(0))

        return Protocol()

    async def listen_tcp(self, host: str, port: int) -> int:
        self.server = await asyncio.get_running_loop().create_server(
            self._protocol, host=host, port=port, family=socket.AF_INET, reuse_address=True
        )
        return self.server.sockets[0].getsockname()[1]

    async def listen_unix(self, path: str) -> None:
        self.unix_path = path
        self.server = await asyncio.get_running_loop().create_unix_server(self._protocol, path)

    async def close(self) -> None:
        for protocol in self.waiting:
            protocol.transport.close()
        self.waiting.clear()
        if self.client is not None:
            self.client.close()
        if self.server is not None:
            self.server.close()
        if self.unix_path:
            try:
                os.unlink(self.unix_path)
            except OSError:
                pass


class HostPort:
    """One --host: a HostController plus the transport serving it."""

    def __init__(self, index: int, spec: str, args, link: LocalLink):
        self.index = index
        self.spec = spec
        self.actual_spec = spec
        self.attled_spec = ""
        self.args = args
        # Distinct non-zero public addresses, unless --zero-host-address keeps
        # Bumble's stock 00:00:00:00:00:00 ("no public address").
        self.public_address = "00:00:00:00:00:00" if args.zero_host_address else f"F0:F1:F2:F3:F4:{index + 1:02X}"
        self.controller = HostController(
            f"H{index}", link, self.public_address, legacy=args.legacy_reports, spec=args.spec_controller,
            index=index, faults=args.host_faults,
        )
        self.server: SingleHostServer | None = None
        self.transport = None  # a Bumble transport (pty and other specs)
        self.snoop_file = None

    async def open(self) -> None:
        kind, _, rest = self.spec.partition(":")
        source = sink = None
        if kind == "tcp-server":
            host, _, port = rest.rpartition(":")
            host = host or "127.0.0.1"
            self.server = SingleHostServer(self.index, self._host_gone)
            port_no = await self.server.listen_tcp("0.0.0.0" if host == "_" else host, int(port))
            self.actual_spec = f"tcp-server:{host}:{port_no}"
            self.attled_spec = f"tcp:{'127.0.0.1' if host in ('_', '0.0.0.0') else host}:{port_no}"
            source = sink = self.server
        elif kind == "unix-server":
            self.server = SingleHostServer(self.index, self._host_gone)
            await self.server.listen_unix(rest)
            self.attled_spec = f"unix:{rest}"
            source = sink = self.server
        else:
            # pty:/path (attled: serial:/path) and anything else Bumble knows.
            if kind == "pty" and os.path.islink(rest):
                os.unlink(rest)  # stale link left by a killed vworld
            self.transport = await open_transport(self.spec)
            source, sink = self.transport.source, self.transport.sink
            self.attled_spec = f"serial:{rest}" if kind == "pty" else self.spec
        controller_in, host_out = self.controller, sink
        if self.args.snoop:
            path = self.args.snoop.format(i=self.index)
            self.snoop_file = open(path, "wb")  # noqa: SIM115 - closed in close()
            snooper = BtSnooper(self.snoop_file)
            controller_in = SnoopTap(self.controller, snooper, self.snoop_file, Snooper.Direction.HOST_TO_CONTROLLER)
            host_out = SnoopTap(sink, snooper, self.snoop_file, Snooper.Direction.CONTROLLER_TO_HOST)
        source.set_packet_sink(controller_in)
        self.controller.host = host_out

    async def close_host_transport(self) -> None:
        """stdin "close": drop the attached host's socket, or close the transport itself."""
        if self.server is not None:
            if self.server.client is None:
                raise ValueError(f"host {self.index}: no client attached")
            self.server.client.close()
        elif self.transport is not None:
            await self.transport.close()
            self.transport = None
        else:
            raise ValueError(f"host {self.index}: nothing to close")

    def _host_gone(self) -> None:
        if self.args.reset_on_host_close:
            self.controller.drop_everything()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()
        if self.transport is not None:
            await self.transport.close()
        if self.snoop_file is not None:
            self.snoop_file.close()


# -----------------------------------------------------------------------------
# Main
# -----------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Virtual BLE world: Bumble host controllers + LED peripherals on one link.",
        epilog="Device options: interval=MS addr=C0:.. name_in=adv|shortened|none short=N\n"
        "conn_update=1 conn_update_delay=MS security_request=1 uuid=0 flags=auto|0|1 init=R,G,B\n"
        "notify_every=MS (harness) conn_update_params=IMIN,IMAX,LAT,TO mtu=N fault_KIND=...\n"
        "secure=enc pairing=sc|legacy forget_bonds=N (see below)\n"
        "gattdb profile: seed=N last_ffff=1 (see attledtools.peers.gattdb)\n\n"
        + FAULT_HELP + "\n" + SECURITY_HELP + "\n" + HOST_FAULT_HELP + "\n" + STDIN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", action="append", default=[], metavar="SPEC",
                        help="host controller transport: tcp-server:127.0.0.1:PORT, "
                        "unix-server:/path.sock, pty:/path/link (repeatable)")
    parser.add_argument("--device", action="append", default=[], metavar="NAME:PROFILE[:k=v,...]",
                        help="peripheral, profile pycom|particle|harness|gattdb (repeatable)")
    parser.add_argument("--legacy-reports", action="store_true",
                        help="host controllers hide extended advertising: legacy LE Advertising Reports")
    parser.add_argument("--spec-controller", action="store_true",
                        help="host controllers: real HCI_Reset, Create Connection Cancel and Disconnect")
    parser.add_argument("--reset-on-host-close", action="store_true",
                        help="when a host's socket closes, its controller drops links/scan/connect")
    parser.add_argument("--zero-host-address", action="store_true",
                        help="host controllers keep public address 00:00:00:00:00:00 (Bumble's default)")
    parser.add_argument("--controller", choices=("bumble", "rootcanal"), default="bumble",
                        help="whose controllers: Bumble's (in process, default) or Android's Root Canal "
                        "(a rootcanal process; every --host is a client of its HCI port, see rcworld.py)")
    parser.add_argument("--rootcanal-sniffer", action="store_true",
                        help="Root Canal writes a pcap per controller; its directory is in the ready line "
                        "and is kept")
    parser.add_argument("--peripheral-transport", metavar="SPEC",
                        help="attach the single --device to an external controller over this transport")
    parser.add_argument("--device-snoop", metavar="PATTERN",
                        help="write each peripheral's HCI traffic with Bumble's snooper; {i} = device index")
    parser.add_argument("--snoop", metavar="PATTERN",
                        help="write each host controller's HCI traffic to a btsnoop file; {i} = host index")
    parser.add_argument("--host-fault", action="append", default=[], metavar="[I@]FAULT",
                        help="controller fault: reject=OPCODE[:STATUS][#N], swallow=OPCODE[#N], "
                        "hw_error=OPCODE[:CODE][#N] (repeatable; see below)")
    parser.add_argument("--stdin-commands", action="store_true",
                        help="read fault commands from stdin, one per line (see below)")
    parser.add_argument("--exit-on-stdin-eof", action="store_true", help="exit when stdin is closed")
    parser.add_argument("--lifetime", type=float, default=0, metavar="SEC",
                        help="exit after SEC seconds (0 = no limit)")
    parser.add_argument("--verbose", "-v", action="count", default=0,
                        help="log to stderr (-v: info, -vv: debug incl. every HCI packet)")
    args = parser.parse_args(argv)
    if args.peripheral_transport and len(args.device) != 1:
        parser.error("--peripheral-transport needs exactly one --device")
    if not args.host and not args.device:
        parser.error("nothing to run: give --host and/or --device")
    if args.controller == "rootcanal":
        bumble_only = [flag for flag, on in (
            ("--legacy-reports", args.legacy_reports), ("--spec-controller", args.spec_controller),
            ("--reset-on-host-close", args.reset_on_host_close), ("--zero-host-address", args.zero_host_address),
            ("--peripheral-transport", args.peripheral_transport), ("--snoop", args.snoop),
            ("--host-fault", args.host_fault), ("--stdin-commands", args.stdin_commands)) if on]
        if bumble_only:
            parser.error(f"{', '.join(bumble_only)}: only with Bumble's controllers, not --controller rootcanal")
        if any(not spec.startswith("tcp-server:") for spec in args.host):
            parser.error("--controller rootcanal: hosts are clients of Root Canal's TCP port (--host tcp-server:...)")
    # Validate device specs (and their advertising data) before starting anything.
    try:
        args.host_faults = [HostFault(text) for text in args.host_fault]
        args.device_options = [PeripheralOptions.parse(spec, i) for i, spec in enumerate(args.device)]
        for opts in args.device_options:
            build_advertising_data(opts)
    except ValueError as error:
        parser.error(str(error))
    return args


async def run(args) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    hosts: list[HostPort] = []
    if args.exit_on_stdin_eof or args.stdin_commands:
        fd = sys.stdin.fileno()
        pending = bytearray()

        def on_stdin() -> None:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(fd)
                if args.exit_on_stdin_eof:
                    stop.set()
                return
            if args.stdin_commands:
                pending.extend(data)
                while b"\n" in pending:
                    line, _, rest = bytes(pending).partition(b"\n")
                    pending[:] = rest
                    text = line.decode("utf-8", "replace").strip()
                    if text:
                        loop.create_task(stdin_command(text, hosts))

        loop.add_reader(fd, on_stdin)
    if args.lifetime > 0:
        loop.call_later(args.lifetime, stop.set)

    air = Air()
    rc: RootCanal | None = None
    if args.controller == "bumble":
        hosts.extend(HostPort(i, spec, args, air) for i, spec in enumerate(args.host))
    peripherals: list[LedPeripheral] = []
    transports = []
    device_snoop_files: list = []
    try:
        for host in hosts:
            await host.open()
        if args.controller == "rootcanal":
            rc = RootCanal(sniffer=args.rootcanal_sniffer, keep=args.rootcanal_sniffer)
            device_controllers: set[int] = set()
            host_controllers: set[int] = set()

            def on_controller(index: int, address: str) -> None:
                # The controllers made while the devices attach are theirs;
                # any later client of the port is a host (attled, or a device
                # of another world attached with --peripheral-transport).
                if len(device_controllers) < len(args.device_options) and not host_controllers:
                    device_controllers.add(index)
                else:
                    host_controllers.add(index)
                    emit({"event": "host_connected", "controller": index, "address": address})

            def on_closed(index: int) -> None:
                if index in host_controllers:
                    host_controllers.discard(index)
                    emit({"event": "host_disconnected", "controller": index})

            rc.on_controller = on_controller
            rc.on_closed = on_closed
            await rc.start()
            # Each device is a client of the HCI port: a controller of its own.
            args.peripheral_transport = f"tcp-client:127.0.0.1:{rc.hci_port}"

        for opts in args.device_options:
            index = len(peripherals)
            peripheral = make_peripheral(opts, emit)
            if args.peripheral_transport:
                transport = await open_transport(args.peripheral_transport)
                transports.append(transport)
                device_host = Host(transport.source, transport.sink)
            else:
                controller = Controller(f"P{index}", link=air)
                device_host = Host(controller, AsyncPipeSink(controller))
            if args.device_snoop:
                # Bumble's own btsnoop writer on the peripheral's host: a capture
                # made by another implementation, for attled decode and tshark.
                snoop_file = open(args.device_snoop.format(i=index), "wb")  # noqa: SIM115 - closed at exit
                device_snoop_files.append(snoop_file)
                device_host.snooper = BtSnooper(snoop_file)
            peripheral.attach(device_host)
            peripherals.append(peripheral)

        # Power on and advertise, each with a deadline (on Root Canal all at
        # once: each one's initialisation costs ~45 ms per command there).
        if rc is None:
            for peripheral in peripherals:
                await asyncio.wait_for(peripheral.start(), 10.0)
        else:
            await asyncio.wait_for(asyncio.gather(*(p.start() for p in peripherals)), 20.0)

        if rc is None:
            host_info = {
                "hosts": [h.actual_spec for h in hosts],
                "attled": [h.attled_spec for h in hosts],
                "host_addresses": [h.public_address for h in hosts],
            }
        else:
            # Root Canal gives each client its own controller and public address
            # when it connects; vworld cannot know which one a host will get.
            host_info = {
                "hosts": [f"tcp-server:127.0.0.1:{rc.hci_port}" for _ in args.host],
                "attled": [f"tcp:127.0.0.1:{rc.hci_port}" for _ in args.host],
                "host_addresses": [None for _ in args.host],
                "rootcanal_dir": str(rc.workdir),
            }
        emit({
            "event": "ready",
            "pid": os.getpid(),
            "controller": args.controller,
            **host_info,
            "legacy_reports": bool(args.legacy_reports),
            "spec_controller": bool(args.spec_controller),
            "devices": [p.describe() for p in peripherals],
        })

        await stop.wait()
    finally:
        # Bounded clean-up: disconnect peripherals, close every transport.
        async def cleanup() -> None:
            for peripheral in peripherals:
                await peripheral.stop()
            for host in hosts:
                await host.close()
            for transport in transports:
                await transport.close()

        try:
            await asyncio.wait_for(cleanup(), 3.0)
        except Exception as error:  # noqa: BLE001
            logger.warning("cleanup: %s", error)
        if rc is not None:
            tail = rc.log_tail(60)
            await rc.stop()
            print(f"--- Root Canal log (tail):\n{tail}", file=sys.stderr)
        for f in device_snoop_files:
            f.close()
        emit({"event": "exit"})
    return 0


async def stdin_command(line: str, hosts: list[HostPort]) -> None:
    """One --stdin-commands line (see STDIN_HELP); answered with a stdin_command event."""
    words = line.split()
    try:
        if words[0] == "hw_error" and len(words) <= 3:
            code = int(words[1], 16) if len(words) > 1 else 0x01
            host = hosts[int(words[2]) if len(words) > 2 else 0]
            host.controller.send_hardware_error(code)
        elif words[0] == "close" and len(words) <= 2:
            await hosts[int(words[1]) if len(words) > 1 else 0].close_host_transport()
        elif words[0] == "fault" and len(words) == 2:
            fault = HostFault(words[1])
            for host in hosts:
                host.controller.faults.append(fault)
        else:
            raise ValueError("unknown command (known: hw_error [CODE] [HOST], close [HOST], fault FAULT)")
    except (ValueError, IndexError, OSError) as error:
        emit({"event": "stdin_command", "line": line, "ok": False, "detail": str(error)})
        return
    emit({"event": "stdin_command", "line": line, "ok": True})


def main(argv=None) -> int:
    args = parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return asyncio.run(run(args))
    except (ValueError, OSError) as error:
        print(f"vworld: {error}", file=sys.stderr)
        emit({"event": "error", "detail": str(error)})
        return 2


if __name__ == "__main__":
    sys.exit(main())
