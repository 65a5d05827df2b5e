"""A plain bleak client through a Bluetooth proxy, wired as Home Assistant
2025.4 wires it, printing one JSON line of what it saw.

Home Assistant's Bluetooth integration makes a habluetooth BluetoothManager
and sets it as the process's one manager; its setup puts habluetooth's
wrappers in place of bleak.BleakScanner and bleak.BleakClient, so that any
library's plain bleak calls go through the manager's scanners. Its ESPHome
integration connects aioesphomeapi's APIClient to the proxy (device info and
the entity list side by side, then the subscriptions), hands the client to
bleak-esphome's connect_scanner, registers the ESPHomeScanner it returns
with the manager, and sets the scanner up. This script does the same with no
Home Assistant around it:

- the manager has no local adapters (NoLocalAdapters, an empty
  bluetooth_adapters.BluetoothAdapters: no D-Bus, no HCI socket of this
  machine) and a BleakSlotManager that is never set up (its setup asks
  BlueZ for local slots; the proxy reports its own slots over the API);
- its _discover_service_info counts what it hears instead of matching
  integrations;
- the ESP's availability and disconnect callbacks are kept as Home
  Assistant's RuntimeEntryData keeps them (available on connect; on the
  API's end every disconnect callback runs and the device is unavailable).

Then a plain bleak job: bleak.BleakScanner with a detection callback finds
the device by its local name (or find_device_by_address with --address),
bleak.BleakClient(device) connects, write_gatt_char(CHAR, HEX,
response=True), read_gatt_char(CHAR), disconnect. Each further --write value
is one more round, connected as most Home Assistant integrations connect:
bleak-retry-connector's establish_connection with BleakClientWithServiceCache
(a v3 connect with cache, the services from bleak-esphome's cache).

    python bleak_through_proxy.py --port P [--key BASE64] --name Lamp1 \
        --char UUID --write HEX [HEX ...] [--debug]

Exit 0 and {"ok": true, "read": HEX (the first round's), "rounds": [...],
...}, or exit 1 and {"ok": false, "error": ..., and what was seen before}.
Every wait is bounded; --timeout bounds the whole job.
--debug logs aioesphomeapi, bleak-esphome and habluetooth at DEBUG to
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time

import bleak
import bleak_retry_connector
from aioesphomeapi import APIClient
from bleak.backends.device import BLEDevice
from bleak.backends.scanner import AdvertisementData
from bleak_esphome import connect_scanner
from bleak_retry_connector import BleakSlotManager
from bluetooth_adapters import AdapterDetails, BluetoothAdapters
from habluetooth import (
    BluetoothManager,
    BluetoothServiceInfoBleak,
    HaBleakClientWrapper,
    HaBleakScannerWrapper,
    set_manager,
)

CLIENT_INFO = "Home Assistant 2025.4.4"  # what Home Assistant's ESPHome integration sends as its client info
LOG = logging.getLogger("bleak_through_proxy")


class NoLocalAdapters(BluetoothAdapters):
    """No Bluetooth adapter on this machine: the proxy is the only scanner."""

    async def refresh(self) -> None:
        return None

    @property
    def adapters(self) -> dict[str, AdapterDetails]:
        return {}

    @property
    def default_adapter(self) -> str:
        return "hci0"


class ProxyOnlyManager(BluetoothManager):
    """Home Assistant's manager subclass matches each new advertisement
    against the integrations; this one counts them by address."""

    def __init__(self) -> None:
        self.discovered: dict[str, int] = {}
        super().__init__(NoLocalAdapters(), BleakSlotManager())

    def _discover_service_info(self, service_info: BluetoothServiceInfoBleak) -> None:
        self.discovered[service_info.address] = self.discovered.get(service_info.address, 0) + 1


async def find_device(args: argparse.Namespace, timeout: float) -> tuple[BLEDevice, AdvertisementData | None]:
    """A plain bleak scan: bleak.BleakScanner is habluetooth's wrapper now,
    fed by the proxy's scanner."""
    if args.address:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            device = await bleak.BleakScanner.find_device_by_address(args.address)  # the manager answers at once
            if device is not None:
                return device, None
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{args.address} not heard through the proxy in {timeout} s")
    found: asyncio.Future = asyncio.get_running_loop().create_future()

    def on_adv(device: BLEDevice, adv: AdvertisementData) -> None:
        if adv.local_name == args.name and not found.done():
            found.set_result((device, adv))

    scanner = bleak.BleakScanner(detection_callback=on_adv)
    await scanner.start()
    try:
        return await asyncio.wait_for(found, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"{args.name!r} not heard through the proxy in {timeout} s") from None
    finally:
        await scanner.stop()


async def one_round(device: BLEDevice, char_uuid: str, value: bytes, retry_connector: bool, out: dict) -> None:
    """Connect, write with a response, read back, disconnect. The first round
    is a plain bleak.BleakClient(device).connect(); later ones connect as
    most Home Assistant integrations do, through bleak-retry-connector's
    establish_connection with BleakClientWithServiceCache (the services
    cache in use: bleak-esphome asks the proxy for a v3 connect with cache,
    and takes the services from its own cache)."""
    out["how"] = "establish_connection" if retry_connector else "BleakClient"
    disconnected = asyncio.Event()
    start = time.monotonic()
    if retry_connector:
        client = await asyncio.wait_for(bleak_retry_connector.establish_connection(
            bleak_retry_connector.BleakClientWithServiceCache, device, device.name or device.address,
            disconnected_callback=lambda c: disconnected.set(), max_attempts=1), 30)
    else:
        client = bleak.BleakClient(device, disconnected_callback=lambda c: disconnected.set(), timeout=15)
        await asyncio.wait_for(client.connect(), 20)
    out["connect_ms"] = round((time.monotonic() - start) * 1000, 1)
    out["connected"] = client.is_connected
    out["mtu"] = client.mtu_size
    out["services"] = sorted(str(s.uuid) for s in client.services)
    char = client.services.get_characteristic(char_uuid)
    if char is None:
        raise RuntimeError(f"{char_uuid} not among the services' characteristics")
    out["properties"] = sorted(char.properties)
    await asyncio.wait_for(client.write_gatt_char(char_uuid, value, response=True), 10)
    out["read"] = bytes(await asyncio.wait_for(client.read_gatt_char(char_uuid), 10)).hex()
    await asyncio.wait_for(client.disconnect(), 10)
    out["disconnected"] = not client.is_connected
    out["disconnected_callback"] = disconnected.is_set()


async def job(args: argparse.Namespace, out: dict) -> None:
    # The Bluetooth integration's setup (homeassistant/components/bluetooth/__init__.py: async_setup).
    manager = ProxyOnlyManager()
    set_manager(manager)
    await manager.async_setup()
    cleanups: list = []
    cli: APIClient | None = None
    try:
        if bleak.BleakScanner is not HaBleakScannerWrapper or bleak.BleakClient is not HaBleakClientWrapper:
            raise RuntimeError("habluetooth did not put its wrappers in place of bleak's classes")

        # The ESPHome integration: the API client, its connect, the device info beside the entities.
        cli = APIClient("127.0.0.1", args.port, None, client_info=CLIENT_INFO, noise_psk=args.key)
        cli.set_debug(args.debug)
        disconnect_callbacks: set = set()
        state = {"available": False, "bluetooth_device": None}

        async def on_stop(expected: bool) -> None:
            LOG.debug("API connection ended (expected=%s): running the disconnect callbacks", expected)
            state["available"] = False
            if state["bluetooth_device"] is not None:
                state["bluetooth_device"].available = False
            for callback in disconnect_callbacks.copy():
                callback()
            disconnect_callbacks.clear()

        await asyncio.wait_for(cli.connect(on_stop=on_stop, login=True), 10)
        info, (entities, services) = await asyncio.wait_for(
            asyncio.gather(cli.device_info(), cli.list_entities_services()), 10)
        api = cli.api_version
        out["api_version"] = f"{api.major}.{api.minor}"
        out["proxy"] = {"name": info.name, "mac": info.mac_address, "bluetooth_mac": info.bluetooth_mac_address,
                        "flags": info.bluetooth_proxy_feature_flags_compat(api), "entities": len(entities)}
        state["available"] = True  # RuntimeEntryData.async_on_connect
        if not info.bluetooth_proxy_feature_flags_compat(api):
            raise RuntimeError("the device says it is no Bluetooth proxy (feature flags 0)")

        # homeassistant/components/esphome/bluetooth.py: async_connect_scanner.
        client_data = connect_scanner(cli, info, state["available"])
        state["bluetooth_device"] = client_data.bluetooth_device
        client_data.disconnect_callbacks = disconnect_callbacks
        scanner = client_data.scanner
        assert scanner is not None
        cleanups.append(manager.async_register_scanner(scanner))
        cleanups.append(scanner.async_setup())
        out["source"] = scanner.source
        out["connectable"] = scanner.connectable
        # The rest of the integration's connect: the subscriptions it makes after the scanner's.
        cli.subscribe_states(lambda s: None)
        cli.subscribe_service_calls(lambda c: None)
        cli.subscribe_home_assistant_states(lambda entity_id, attribute: None)

        # The plain bleak job.
        device, adv = await find_device(args, 10)
        out["address"], out["name"] = device.address, device.name
        out["details"] = {k: v for k, v in (device.details or {}).items() if isinstance(v, (str, int))}
        if adv is not None:
            out["rssi"] = adv.rssi
        slots = client_data.bluetooth_device
        out["slots"] = [slots.ble_connections_free, slots.ble_connections_limit]
        out["rounds"] = []
        for i, hexvalue in enumerate(args.write):
            out["rounds"].append({})
            await one_round(device, args.char, bytes.fromhex(hexvalue), i > 0, out["rounds"][-1])
        out["read"] = out["rounds"][0]["read"]
        out["heard"] = len(manager.discovered)
    finally:
        for cancel in reversed(cleanups):
            cancel()
        if cli is not None:
            try:
                await asyncio.wait_for(cli.disconnect(), 5)
            except Exception as e:  # noqa: BLE001 - the job's result stands; the API's end is only logged
                LOG.debug("API disconnect: %s", e)
        manager.async_stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--key", help="the proxy's Noise key (base64), as in ESPHome's api: encryption: key")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--name", help="the device's local name, found by a plain BleakScanner")
    who.add_argument("--address", help="the device's address, found by BleakScanner.find_device_by_address")
    p.add_argument("--char", required=True, help="the characteristic's UUID")
    p.add_argument("--write", required=True, nargs="+", metavar="HEX",
                   help="hex bytes to write (with a response) and read back, one round each: the first with a plain "
                        "BleakClient, the others with bleak-retry-connector's establish_connection")
    p.add_argument("--timeout", type=float, default=60, help="bound on the whole job, in seconds")
    p.add_argument("--debug", action="store_true", help="aioesphomeapi, bleak-esphome and habluetooth at DEBUG on stderr")
    args = p.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.debug:
        for name in ("aioesphomeapi", "bleak_esphome", "habluetooth", "bleak_retry_connector", "bleak_through_proxy"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    out: dict = {}
    try:
        asyncio.run(asyncio.wait_for(job(args, out), args.timeout))
    except BaseException as e:  # noqa: BLE001 - reported as the job's result, with what was seen before it
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}", **out}), flush=True)
        return 1
    print(json.dumps({"ok": True, **out}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
