"""Reference MQTT-to-LED gateway done the ordinary way: Bumble's and paho's own APIs.

    .venv/bin/python -m attledtools.bench.gateway_reference --transport tcp-client:127.0.0.1:PORT --name Lamp1 --mqtt 127.0.0.1:1883

The baseline `make bench` (gatewaybench.py) measures `attled gateway`
against. It does the same job for one pycom LED and nothing more:

  - Bumble Device as central: scan for the name, connect, discover the LED
    service and its red/green/blue characteristics with Bumble's GATT client,
    read the colour back;
  - paho-mqtt (its own network thread, loop_start) subscribes to
    `<prefix>/<node>/set` (node: the device address, lower case, no colons);
  - the light is attled's (attledtools.halight, HALight.swift): the state read
    back (black: off) is published on `<prefix>/<node>/state` (retained, QoS 0)
    once ready; each Home Assistant JSON light command
    (`{"state":"ON","color":{"r":..,"g":..,"b":..},"brightness":..}`, `state`
    required) is checked as attled checks it (one it refuses is logged on
    stderr and ignored) and applied on top of the newest state; a writer task
    writes the latest wanted colour (scaled by brightness, black when OFF)
    with three Write Requests, red, green, blue: at most one write in flight,
    commands that arrive meanwhile coalesce into the next write;
  - after each write it publishes the state written (retained, QoS 0), as
    attled's gateway does.
It publishes no discovery configs or availability (attled's gateway does):
the bench measures commands, and the light's topics are the same.

On stdout it prints JSON lines: {"event":"ready","node":..,"address":..} once
connected, discovered and subscribed; {"event":"error",...} on failure.
Runs until SIGTERM/SIGINT or stdin closes (with --exit-on-stdin-eof).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import threading

import paho.mqtt.client as mqtt
from bumble import hci
from bumble.core import UUID, AdvertisingData
from bumble.device import Device, Peer
from bumble.transport import open_transport

from attledtools.bench import refproc
from attledtools.bench.refproc import say
from attledtools.halight import CommandRefused, Light, parse_command
from attledtools.peers.profiles import PROFILES


async def run(args) -> int:
    loop = asyncio.get_running_loop()
    stop = refproc.stop_event(args.exit_on_stdin_eof)

    transport = await open_transport(args.transport)
    device = Device.with_hci("gateway-reference", hci.Address("F0:00:00:00:00:02"), transport.source, transport.sink)
    await device.power_on()

    # Scan for the name, connect.
    found: asyncio.Future = loop.create_future()

    def on_advertisement(adv) -> None:
        names = (adv.data.get(AdvertisingData.COMPLETE_LOCAL_NAME), adv.data.get(AdvertisingData.SHORTENED_LOCAL_NAME))
        if not found.done() and adv.is_connectable and args.name in names:
            found.set_result(adv)

    device.on(Device.EVENT_ADVERTISEMENT, on_advertisement)
    await device.start_scanning(active=True, filter_duplicates=False)
    adv = await asyncio.wait_for(found, args.timeout)
    await device.stop_scanning()
    connection = await device.connect(adv.address, own_address_type=hci.OwnAddressType.RANDOM, timeout=args.timeout)

    # Discover the pycom LED service and its three characteristics.
    profile = PROFILES["pycom"]
    peer = Peer(connection)
    services = await peer.discover_service(UUID(profile.service_uuid))
    if not services:
        say(event="error", error="no pycom LED service")
        return 4
    characteristics = await peer.discover_characteristics(service=services[0])
    by_uuid = {str(c.uuid).upper(): c for c in characteristics}
    chars = [by_uuid[s.uuid.upper()] for s in profile.chars]  # red, green, blue
    # The state the lamp has (attled reads it back on connect).
    light = Light.read_back(tuple([bytes(await peer.read_value(c))[0] for c in chars]))

    address = str(adv.address).split("/")[0]
    node = address.replace(":", "").lower()
    command_topic, state_topic = f"{args.prefix}/{node}/set", f"{args.prefix}/{node}/state"

    # Commands arrive on paho's thread; the wanted state lives on the asyncio loop.
    # `light` is the newest state: not yet written, being written, or on the device.
    wanted = asyncio.Event()  # a command not yet written

    def apply(payload: bytes) -> None:
        nonlocal light
        try:
            cmd = parse_command(payload)
        except CommandRefused as error:
            print(f"gateway_reference: ignored a command: {error}", file=sys.stderr, flush=True)
            return
        light = light.apply(cmd)
        wanted.set()

    subscribed = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"gateway-reference-{node}")

    def on_connect(c, _u, _f, _rc, _p) -> None:
        # paho leaves Nagle on; a gateway wants its small packets out at once.
        c.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.subscribe(command_topic, qos=1)

    client.on_connect = on_connect
    client.on_subscribe = lambda _c, _u, _mid, _rc, _p: subscribed.set()
    client.on_message = lambda _c, _u, msg: loop.call_soon_threadsafe(apply, msg.payload)
    host, _, port = args.mqtt.partition(":")
    client.connect(host, int(port or 1883), keepalive=30)
    client.loop_start()
    if not await loop.run_in_executor(None, subscribed.wait, args.timeout):
        say(event="error", error="MQTT: not subscribed")
        return 1

    async def writer() -> None:
        """The latest wanted colour, one write (three Write Requests) at a time;
        then the state written is published."""
        while True:
            await wanted.wait()
            wanted.clear()
            want = light
            for char, value in zip(chars, want.device):
                await peer.write_value(char, bytes([value]), with_response=True)
            client.publish(state_topic, want.state_json(), qos=0, retain=True)

    client.publish(state_topic, light.state_json(), qos=0, retain=True)
    task = asyncio.create_task(writer())
    say(event="ready", node=node, address=address, topic=command_topic)
    await stop.wait()
    task.cancel()
    client.loop_stop()
    client.disconnect()
    try:
        await asyncio.wait_for(connection.disconnect(), 2.0)
        await asyncio.wait_for(transport.close(), 2.0)
    except Exception:  # noqa: BLE001
        pass
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transport", required=True, help="Bumble transport, e.g. tcp-client:127.0.0.1:PORT")
    ap.add_argument("--name", required=True, help="the pycom LED's advertised name")
    ap.add_argument("--mqtt", default="127.0.0.1:1883", help="broker HOST:PORT")
    ap.add_argument("--prefix", default="ref", help="topic prefix (default ref)")
    ap.add_argument("--timeout", type=float, default=15.0, help="deadline for scan, connect and subscribe")
    return refproc.main(run, ap)


if __name__ == "__main__":
    sys.exit(main())
