"""One ESPHome API client job against a Bluetooth proxy, as Home Assistant
runs it, printing one JSON line of what it saw.

Imports only aioesphomeapi and the standard library, so it runs in any venv
that has some aioesphomeapi: the tests run it with the pinned 29.9.0 and with
the newest (46.x) in a venv of its own (see Tests/integration/test_proxy.py).

    python esphome_client.py --port P [--key BASE64] --address C0:11:22:33:44:55 \
        --char UUID --write HEX

Connects (v3 without cache), finds the characteristic, writes HEX with a
response, reads it back, disconnects. Exit 0 and {"ok": true, ...}, or exit 1
and {"ok": false, "error": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid as uuidlib

from aioesphomeapi import APIClient


async def job(args: argparse.Namespace) -> dict:
    out: dict = {}
    cli = APIClient("127.0.0.1", args.port, None, noise_psk=args.key)
    await cli.connect(login=True)
    info = await cli.device_info()
    out["api_version"] = f"{cli.api_version.major}.{cli.api_version.minor}"
    out["name"], out["mac"], out["flags"] = info.name, info.mac_address, info.bluetooth_proxy_feature_flags
    address = int(args.address.replace(":", ""), 16)
    heard: dict[int, int] = {}
    got = asyncio.Event()

    def on_raw(resp) -> None:
        for a in resp.advertisements:
            heard[a.address] = a.address_type
            if a.address == address:
                got.set()

    states: list = []
    passive = asyncio.Event()
    if args.scanner_mode and hasattr(cli, "bluetooth_scanner_set_mode"):  # clients from 2025.5 on
        def on_scanner(s) -> None:
            states.append((int(s.state), int(s.mode)))
            if int(s.mode) == 0:
                passive.set()
        cli.subscribe_bluetooth_scanner_state(on_scanner)
    unsub = cli.subscribe_bluetooth_le_raw_advertisements(on_raw)
    await asyncio.wait_for(got.wait(), 10)
    if args.scanner_mode and hasattr(cli, "bluetooth_scanner_set_mode"):
        from aioesphomeapi import BluetoothScannerMode
        cli.bluetooth_scanner_set_mode(BluetoothScannerMode.PASSIVE)
        await asyncio.wait_for(passive.wait(), 5)
        out["scanner_states"] = states
    unsub()
    state = asyncio.get_running_loop().create_future()

    def on_state(connected: bool, mtu: int, error: int) -> None:
        if not state.done():
            state.set_result((connected, mtu, error))

    start = time.monotonic()
    await cli.bluetooth_device_connect(address, on_state, timeout=15, feature_flags=info.bluetooth_proxy_feature_flags,
                                       has_cache=False, address_type=heard[address])
    connected, mtu, error = await asyncio.wait_for(state, 15)
    out["connected"], out["mtu"], out["error"] = connected, mtu, error
    out["connect_ms"] = round((time.monotonic() - start) * 1000, 1)
    if not connected:
        raise RuntimeError(f"not connected: error {error}")
    services = await cli.bluetooth_gatt_get_services(address)
    want = uuidlib.UUID(args.char)
    handle = next(c.handle for s in services.services for c in s.characteristics if uuidlib.UUID(c.uuid) == want)
    value = bytes.fromhex(args.write)
    await cli.bluetooth_gatt_write(address, handle, value, True)
    out["read"] = (await cli.bluetooth_gatt_read(address, handle)).hex()
    await cli.bluetooth_device_disconnect(address)
    await cli.disconnect()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--key")
    p.add_argument("--address", required=True)
    p.add_argument("--char", required=True)
    p.add_argument("--write", required=True)
    p.add_argument("--scanner-mode", action="store_true", help="newer clients: set the scanner passive and wait for its state")
    p.add_argument("--timeout", type=float, default=40)
    args = p.parse_args(argv)
    try:
        out = asyncio.run(asyncio.wait_for(job(args), args.timeout))
    except Exception as e:  # noqa: BLE001 - reported as the job's result
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    print(json.dumps({"ok": True, **out}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
