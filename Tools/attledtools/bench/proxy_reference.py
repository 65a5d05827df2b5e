"""Reference Bluetooth proxy done the ordinary way: Bumble's host and aioesphomeapi's messages.

    .venv/bin/python -m attledtools.bench.proxy_reference --transport tcp-client:127.0.0.1:PORT --listen 127.0.0.1:6053

The baseline the bench's proxy section (proxybench.py) measures `attled
proxy` against. A minimal ESPHome native API server, plaintext only, for one
client at a time, doing what the bench's scenarios need and nothing more:

  - framing: `00`, varint length, varint type, protobuf payload; the
    messages are aioesphomeapi's own (api_pb2, a test dependency) and the
    type ids its table (core.MESSAGE_TYPE_TO_PROTO);
  - Hello, Connect, DeviceInfo (feature flags passive scan, active
    connections, remote caching, raw advertisements), list entities (none),
    ping, get time, disconnect;
  - raw advertisements: while the client is subscribed, a Bumble Device
    scans (active, no duplicate filtering) and every report the host hears
    (Bumble's Host "advertising_report" event: advertisement and scan
    response apart, as attled sends them) goes to the client in batches as
    attled batches them: at most 16 a message, or what came in the 20 ms
    after the first of a batch;
  - connections free (81), now and on every change;
  - connect (v1, v3 with or without cache): Bumble's Device.connect, then
    Exchange MTU (517 asked), answered with BluetoothDeviceConnectionResponse;
    disconnect; a link that drops is reported;
  - GATT with Bumble's client: get services (one 71 per service with its
    characteristics and descriptors, then 72), read (74), write with and
    without response (83 only after a Write Response), write descriptor
    (83), notify (84; then every notification and indication of the link as
    79, as attled does: the client writes the CCCD itself); an ATT error
    goes back as 82 with its code.

On stdout it prints JSON lines: {"event":"ready","port":..,"pid":..} once the
controller is up and the port is listening; {"event":"error",...} on failure.
Runs until SIGTERM/SIGINT or stdin closes (with --exit-on-stdin-eof).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time

from aioesphomeapi import api_pb2 as pb
from aioesphomeapi.core import MESSAGE_TYPE_TO_PROTO
from bumble import hci
from bumble.att import ATT_Error, ATT_Handle_Value_Confirmation
from bumble.core import ProtocolError
from bumble.device import Device, Peer
from bumble.transport import open_transport

from attledtools.bench import refproc
from attledtools.bench.refproc import say

TYPE_OF = {cls: t for t, cls in MESSAGE_TYPE_TO_PROTO.items()}
FEATURES = 1 | 2 | 4 | 32  # passive scan, active connections, remote caching, raw advertisements
BATCH_SIZE, BATCH_MS = 16, 20  # as attled: ProxyConfig.batchSize, batchMs
MAX_CONNECTIONS = 3
GENERIC_GATT_ERROR = 0x85  # ESP-IDF's ESP_GATT_ERROR, when there is no ATT error code
OWN_ADDRESS = "F0:00:00:00:00:03"  # static random


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def frame(msg) -> bytes:
    payload = msg.SerializeToString()
    return b"\x00" + varint(len(payload)) + varint(TYPE_OF[type(msg)]) + payload


async def read_varint(reader: asyncio.StreamReader) -> int:
    n = shift = 0
    while True:
        b = (await reader.readexactly(1))[0]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7


def api_address(address: hci.Address) -> int:
    """The API's address: AA:BB:CC:DD:EE:FF as 0xAABBCCDDEEFF."""
    return int.from_bytes(address.address_bytes, "little")


def bd_address(value: int, address_type: int) -> hci.Address:
    text = ":".join(f"{(value >> (8 * i)) & 0xFF:02X}" for i in range(5, -1, -1))
    return hci.Address(text, hci.Address.RANDOM_DEVICE_ADDRESS if address_type == 1 else hci.Address.PUBLIC_DEVICE_ADDRESS)


def api_uuid(uuid) -> list[int]:
    """A Bumble UUID as the API's two uint64 (high, low) of its 128-bit form."""
    value = int.from_bytes(uuid.to_bytes(force_128=True), "little")
    return [value >> 64, value & 0xFFFFFFFFFFFFFFFF]


def att_error_code(error: Exception) -> int:
    if isinstance(error, (ATT_Error, ProtocolError)) and isinstance(getattr(error, "error_code", None), int):
        return error.error_code
    return GENERIC_GATT_ERROR


class Proxy:
    def __init__(self, device: Device, name: str):
        self.device = device
        self.name = name
        self.writer: asyncio.StreamWriter | None = None
        self.batch: list = []
        self.batch_timer: asyncio.TimerHandle | None = None
        self.scanning = False
        self.links: dict[int, object] = {}  # API address -> Connection
        self.peers: dict[int, Peer] = {}
        self.pending: set[int] = set()
        device.host.on("advertising_report", self.on_report)

    # -- output ---------------------------------------------------------------
    def send(self, msg) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(frame(msg))

    def send_free(self) -> None:
        used = len(self.links) + len(self.pending)
        self.send(pb.BluetoothConnectionsFreeResponse(free=MAX_CONNECTIONS - used, limit=MAX_CONNECTIONS,
                                                      allocated=list(self.links) + list(self.pending)))

    # -- advertisements -------------------------------------------------------
    def on_report(self, report) -> None:
        if self.writer is None or not self.scanning:
            return
        t = report.address.address_type
        self.batch.append(pb.BluetoothLERawAdvertisement(
            address=api_address(report.address), rssi=report.rssi,
            address_type=1 if t in (hci.Address.RANDOM_DEVICE_ADDRESS, hci.Address.RANDOM_IDENTITY_ADDRESS) else 0,
            data=bytes(report.data)))
        if len(self.batch) >= BATCH_SIZE:
            self.flush()
        elif self.batch_timer is None:
            self.batch_timer = asyncio.get_running_loop().call_later(BATCH_MS / 1000, self.flush)

    def flush(self) -> None:
        if self.batch_timer is not None:
            self.batch_timer.cancel()
            self.batch_timer = None
        if self.batch:
            self.send(pb.BluetoothLERawAdvertisementsResponse(advertisements=self.batch))
            self.batch = []

    async def start_scan(self) -> None:
        if not self.scanning:
            self.scanning = True
            await self.device.start_scanning(active=True, filter_duplicates=False)

    async def stop_scan(self) -> None:
        if self.scanning:
            self.scanning = False
            await self.device.stop_scanning()

    # -- connections ----------------------------------------------------------
    async def connect(self, req) -> None:
        address = req.address
        if address in self.links:
            c = self.links[address]
            self.send(pb.BluetoothDeviceConnectionResponse(address=address, connected=True, mtu=c.att_mtu))
            return
        if len(self.links) + len(self.pending) >= MAX_CONNECTIONS:
            self.send(pb.BluetoothDeviceConnectionResponse(address=address, connected=False, error=0x09))
            return
        self.pending.add(address)
        self.send_free()
        try:
            connection = await self.device.connect(bd_address(address, req.address_type if req.has_address_type else 1),
                                                   own_address_type=hci.OwnAddressType.RANDOM, timeout=20)
        except Exception as error:  # noqa: BLE001 - its HCI status goes to the client
            self.pending.discard(address)
            self.send(pb.BluetoothDeviceConnectionResponse(address=address, connected=False,
                                                           error=getattr(error, "error_code", 0x3E) or 0x3E))
            self.send_free()
            return
        self.pending.discard(address)
        self.links[address] = connection
        peer = self.peers[address] = Peer(connection)

        def on_disconnection(reason: int) -> None:
            if self.links.get(address) is connection:
                del self.links[address]
                self.peers.pop(address, None)
                self.send(pb.BluetoothDeviceConnectionResponse(address=address, connected=False, error=reason))
                self.send_free()

        connection.on("disconnection", on_disconnection)
        # Every notification and indication of the link goes to the client (it writes the CCCDs).
        client = connection.gatt_client

        def on_notification(pdu) -> None:
            self.send(pb.BluetoothGATTNotifyDataResponse(address=address, handle=pdu.attribute_handle,
                                                         data=bytes(pdu.attribute_value)))

        def on_indication(pdu) -> None:
            on_notification(pdu)
            client.send_confirmation(ATT_Handle_Value_Confirmation())

        client.on_att_handle_value_notification = on_notification
        client.on_att_handle_value_indication = on_indication
        try:
            await peer.request_mtu(517)
        except Exception:  # noqa: BLE001 - the default MTU then
            pass
        self.send(pb.BluetoothDeviceConnectionResponse(address=address, connected=True, mtu=connection.att_mtu))
        self.send_free()

    async def disconnect(self, address: int) -> None:
        connection = self.links.get(address)
        if connection is None:
            self.send(pb.BluetoothDeviceConnectionResponse(address=address, connected=False))
            return
        try:
            await connection.disconnect()
        except Exception:  # noqa: BLE001
            pass

    # -- GATT -----------------------------------------------------------------
    async def services(self, address: int) -> None:
        peer = self.peers.get(address)
        if peer is None:
            self.send(pb.BluetoothGATTErrorResponse(address=address, handle=0, error=GENERIC_GATT_ERROR))
            return
        for service in await peer.discover_services():
            chars = []
            for c in await peer.discover_characteristics(service=service):
                descriptors = await peer.discover_descriptors(characteristic=c)
                chars.append(pb.BluetoothGATTCharacteristic(
                    uuid=api_uuid(c.uuid), handle=c.handle, properties=int(c.properties),
                    descriptors=[pb.BluetoothGATTDescriptor(uuid=api_uuid(d.type), handle=d.handle) for d in descriptors]))
            self.send(pb.BluetoothGATTGetServicesResponse(address=address, services=[
                pb.BluetoothGATTService(uuid=api_uuid(service.uuid), handle=service.handle, characteristics=chars)]))
        self.send(pb.BluetoothGATTGetServicesDoneResponse(address=address))

    async def read(self, address: int, handle: int) -> None:
        peer = self.peers.get(address)
        try:
            if peer is None:
                raise ConnectionError("not connected")
            value = await peer.gatt_client.read_value(handle)
        except Exception as error:  # noqa: BLE001 - goes back as an ATT error code
            self.send(pb.BluetoothGATTErrorResponse(address=address, handle=handle, error=att_error_code(error)))
            return
        self.send(pb.BluetoothGATTReadResponse(address=address, handle=handle, data=bytes(value)))

    async def write(self, address: int, handle: int, data: bytes, response: bool) -> None:
        peer = self.peers.get(address)
        try:
            if peer is None:
                raise ConnectionError("not connected")
            await peer.gatt_client.write_value(handle, data, with_response=response)
        except Exception as error:  # noqa: BLE001
            self.send(pb.BluetoothGATTErrorResponse(address=address, handle=handle, error=att_error_code(error)))
            return
        if response:
            self.send(pb.BluetoothGATTWriteResponse(address=address, handle=handle))

    # -- one API client ----------------------------------------------------------
    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.writer is not None:  # one client at a time
            writer.close()
            return
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.writer = writer
        tasks: set[asyncio.Task] = set()

        def spawn(coro) -> None:
            task = asyncio.create_task(coro)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        try:
            while True:
                if (await reader.readexactly(1))[0] != 0:
                    break  # plaintext only
                length = await read_varint(reader)
                kind = await read_varint(reader)
                payload = await reader.readexactly(length)
                cls = MESSAGE_TYPE_TO_PROTO.get(kind)
                if cls is None:
                    continue
                msg = cls.FromString(payload)
                if isinstance(msg, pb.HelloRequest):
                    self.send(pb.HelloResponse(api_version_major=1, api_version_minor=10,
                                               server_info="proxy_reference (Bumble)", name=self.name))
                elif isinstance(msg, pb.ConnectRequest):
                    self.send(pb.ConnectResponse(invalid_password=False))
                elif isinstance(msg, pb.DeviceInfoRequest):
                    mac = str(self.device.random_address).split("/")[0]
                    self.send(pb.DeviceInfoResponse(name=self.name, mac_address=mac, bluetooth_mac_address=mac,
                                                    esphome_version="2025.4.0", model="proxy_reference",
                                                    manufacturer="attled bench", friendly_name=self.name,
                                                    bluetooth_proxy_feature_flags=FEATURES))
                elif isinstance(msg, pb.ListEntitiesRequest):
                    self.send(pb.ListEntitiesDoneResponse())
                elif isinstance(msg, pb.PingRequest):
                    self.send(pb.PingResponse())
                elif isinstance(msg, pb.GetTimeRequest):
                    self.send(pb.GetTimeResponse(epoch_seconds=int(time.time())))
                elif isinstance(msg, pb.DisconnectRequest):
                    self.send(pb.DisconnectResponse())
                    break
                elif isinstance(msg, pb.SubscribeBluetoothLEAdvertisementsRequest):
                    spawn(self.start_scan())
                elif isinstance(msg, pb.UnsubscribeBluetoothLEAdvertisementsRequest):
                    spawn(self.stop_scan())
                elif isinstance(msg, pb.SubscribeBluetoothConnectionsFreeRequest):
                    self.send_free()
                elif isinstance(msg, pb.BluetoothDeviceRequest):
                    t = msg.request_type
                    if t in (pb.BLUETOOTH_DEVICE_REQUEST_TYPE_CONNECT, pb.BLUETOOTH_DEVICE_REQUEST_TYPE_CONNECT_V3_WITH_CACHE,
                             pb.BLUETOOTH_DEVICE_REQUEST_TYPE_CONNECT_V3_WITHOUT_CACHE):
                        spawn(self.connect(msg))
                    elif t == pb.BLUETOOTH_DEVICE_REQUEST_TYPE_DISCONNECT:
                        spawn(self.disconnect(msg.address))
                elif isinstance(msg, pb.BluetoothGATTGetServicesRequest):
                    spawn(self.services(msg.address))
                elif isinstance(msg, (pb.BluetoothGATTReadRequest, pb.BluetoothGATTReadDescriptorRequest)):
                    spawn(self.read(msg.address, msg.handle))
                elif isinstance(msg, pb.BluetoothGATTWriteRequest):
                    spawn(self.write(msg.address, msg.handle, msg.data, msg.response))
                elif isinstance(msg, pb.BluetoothGATTWriteDescriptorRequest):
                    spawn(self.write(msg.address, msg.handle, msg.data, True))
                elif isinstance(msg, pb.BluetoothGATTNotifyRequest):
                    self.send(pb.BluetoothGATTNotifyResponse(address=msg.address, handle=msg.handle))
                # Anything else (subscriptions to states, logs, services) needs no answer.
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.writer = None
            self.batch = []
            if self.batch_timer is not None:
                self.batch_timer.cancel()
                self.batch_timer = None
            for task in list(tasks):
                task.cancel()
            writer.close()
            try:  # a client that goes away loses its links (the transport may be closing too)
                await self.stop_scan()
                for connection in list(self.links.values()):
                    await connection.disconnect()
            except Exception:  # noqa: BLE001
                pass


async def run(args) -> int:
    stop = refproc.stop_event(args.exit_on_stdin_eof)

    transport = await open_transport(args.transport)
    device = Device.with_hci("proxy-reference", hci.Address(OWN_ADDRESS), transport.source, transport.sink)
    await device.power_on()
    proxy = Proxy(device, args.name)
    host, _, port = args.listen.rpartition(":")
    server = await asyncio.start_server(proxy.serve, host, int(port))
    say(event="ready", port=server.sockets[0].getsockname()[1], pid=os.getpid())
    await stop.wait()
    server.close()
    try:
        await asyncio.wait_for(transport.close(), 2.0)
    except Exception:  # noqa: BLE001
        pass
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transport", required=True, help="Bumble transport, e.g. tcp-client:127.0.0.1:PORT")
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT of the API (port 0: any free one)")
    ap.add_argument("--name", default="proxy-reference", help="the node's name")
    return refproc.main(run, ap)


if __name__ == "__main__":
    sys.exit(main())
