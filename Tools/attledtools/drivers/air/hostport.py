"""How vworld serves a host controller to its host: one --host (HostPort) on a
TCP / Unix server that takes one host at a time (SingleHostServer), a pty or
any Bumble transport, optionally recorded to btsnoop (SnoopTap)."""

from __future__ import annotations

import asyncio
import os
import socket

from bumble import core
from bumble.link import LocalLink
from bumble.snoop import BtSnooper, Snooper
from bumble.transport import open_transport
from bumble.transport.common import PacketParser

from attledtools.drivers.air.controller import HostController
from attledtools.drivers.air.events import emit


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
        # Bumble's stock 00:00:00:00:00:00 ("no public address"), for every host
        # controller or (--zero-address-host I) for some.
        zero = args.zero_host_address or index in (getattr(args, "zero_address_host", None) or [])
        self.public_address = "00:00:00:00:00:00" if zero else f"F0:F1:F2:F3:F4:{index + 1:02X}"
        self.controller = HostController(
            f"H{index}", link, self.public_address, legacy=args.legacy_reports, spec=args.spec_controller,
            index=index, faults=args.host_faults, stock_states=not getattr(args, "scan_while_initiating", False),
            timed=getattr(args, "timed_air", False),
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
