"""Reference LED central done the ordinary way, with Bumble's own host stack.

    .venv/bin/python -m attledtools.drivers.bumble_central --transport tcp-client:127.0.0.1:PORT --name CassarTech --rgb 255,0,0

Scans for the name (or --uuid / --address), connects, discovers the LED
service (pycom, particle or harness) and its characteristics, writes the
colour (one byte per characteristic, Write Request or Write Command according
to the characteristic properties, or as forced by --op), disconnects, exits 0.

It prints exactly one JSON line on stdout, e.g.

  {"result": "ok", "profile": "pycom", "address": "C0:11:22:33:44:55",
   "ops": ["request", "request", "request"], "init_ms": 3.1, "scan_ms": 51.0,
   "connect_ms": 49.8, "discover_ms": 12.0, "write_ms": 6.2,
   "disconnect_ms": 1.9, "total_ms": 124.0}

or on failure {"result": "error", "stage": "scan|connect|discover|write|...",
"error": "...", "att_error": INT|null, ...times so far}.

Exit codes: 0 ok, 1 other failure, 2 not found (scan timeout), 3 connect
failed, 4 service/characteristics not found, 5 write failed (ATT error; the
code is in "att_error").

It is the baseline for benchmarks and the proof that the vworld peripherals
work with an independent host stack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time

from bumble import att, hci
from bumble.core import UUID, AdvertisingData
from bumble.device import Device, Peer
from bumble.gatt import Characteristic
from bumble.transport import open_transport

from attledtools.peers.profiles import PROFILES

EXIT_OK, EXIT_OTHER, EXIT_NOT_FOUND, EXIT_CONNECT, EXIT_DISCOVER, EXIT_WRITE = 0, 1, 2, 3, 4, 5


class StageError(Exception):
    def __init__(self, stage: str, code: int, message: str, att_error: int | None = None):
        super().__init__(message)
        self.stage, self.code, self.att_error = stage, code, att_error


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Bumble reference LED central")
    p.add_argument("--transport", required=True, help="Bumble transport, e.g. tcp-client:127.0.0.1:PORT")
    p.add_argument("--name", help="advertised local name to look for (complete or shortened)")
    p.add_argument("--uuid", help="advertised service UUID to look for")
    p.add_argument("--address", help="peer address to look for (e.g. C0:11:22:33:44:55)")
    p.add_argument("--rgb", help="R,G,B colour to write (pycom / particle)")
    p.add_argument("--command", help="comma-separated command bytes for the harness, e.g. 1,0")
    p.add_argument("--op", choices=("auto", "request", "command"), default="auto",
                   help="write op: auto (by properties), or force Write Request / Write Command")
    p.add_argument("--subscribe", action="store_true",
                   help="harness: subscribe to the button characteristic and report notifications")
    p.add_argument("--timeout", type=float, default=10.0, help="overall deadline in seconds")
    p.add_argument("--verbose", "-v", action="store_true")
    args = p.parse_args(argv)
    if not (args.name or args.uuid or args.address):
        p.error("give --name, --uuid or --address")
    if args.rgb:
        rgb = [int(v) for v in args.rgb.split(",")]
        if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
            p.error("--rgb must be R,G,B with values 0..255")
        args.rgb_values = rgb
    else:
        args.rgb_values = None
    args.command_values = [int(v, 0) for v in args.command.split(",")] if args.command else None
    if args.rgb_values is None and args.command_values is None:
        p.error("give --rgb and/or --command")
    return args


def matches(args, advertisement) -> bool:
    """Does this advertisement come from the device we look for?"""
    data = advertisement.data
    if args.address and str(advertisement.address).split("/")[0].upper() != args.address.upper():
        return False
    if args.name:
        names = [
            data.get(AdvertisingData.COMPLETE_LOCAL_NAME),
            data.get(AdvertisingData.SHORTENED_LOCAL_NAME),
        ]
        if args.name not in [n for n in names if n]:
            return False
    if args.uuid:
        wanted = UUID(args.uuid)
        uuids = []
        for ad_type in (
            AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
            AdvertisingData.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
        ):
            uuids += data.get(ad_type) or []
        if wanted not in uuids:
            return False
    return True


async def run(args, report: dict) -> None:
    marks = {"t0": time.perf_counter()}

    def lap(stage: str) -> None:
        now = time.perf_counter()
        report[f"{stage}_ms"] = round((now - marks["last"]) * 1000, 2)
        marks["last"] = now

    marks["last"] = marks["t0"]
    stage = "init"
    transport = await open_transport(args.transport)
    device = Device.with_hci("bumble-central", hci.Address("F0:00:00:00:00:01"), transport.source, transport.sink)
    connection = None
    try:
        await device.power_on()
        lap("init")

        # -- scan ------------------------------------------------------------------
        stage = "scan"
        found: asyncio.Future = asyncio.get_running_loop().create_future()

        def on_advertisement(advertisement) -> None:
            if not found.done() and advertisement.is_connectable and matches(args, advertisement):
                found.set_result(advertisement)

        device.on(Device.EVENT_ADVERTISEMENT, on_advertisement)
        await device.start_scanning(active=True, filter_duplicates=False)
        advertisement = await found
        await device.stop_scanning()
        report["address"] = str(advertisement.address).split("/")[0]
        report["legacy_report"] = bool(advertisement.is_legacy)
        lap("scan")

        # -- connect -----------------------------------------------------------------
        stage = "connect"
        try:
            connection = await device.connect(
                advertisement.address, own_address_type=hci.OwnAddressType.RANDOM, timeout=args.timeout
            )
        except Exception as error:
            raise StageError("connect", EXIT_CONNECT, f"connect failed: {error}") from error
        lap("connect")

        # -- discover ------------------------------------------------------------------
        stage = "discover"
        peer = Peer(connection)
        service = None
        profile = None
        advertised = set()
        for ad_type in (
            AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
            AdvertisingData.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
        ):
            advertised.update(advertisement.data.get(ad_type) or [])
        # Try the advertised profile first, then the others.
        candidates = sorted(PROFILES.values(), key=lambda p: UUID(p.service_uuid) not in advertised)
        for candidate in candidates:
            services = await peer.discover_service(UUID(candidate.service_uuid))
            if services:
                service, profile = services[0], candidate
                break
        if service is None:
            raise StageError("discover", EXIT_DISCOVER, "no LED service found")
        characteristics = await peer.discover_characteristics(service=service)
        by_uuid = {str(c.uuid).upper(): c for c in characteristics}
        roles = {}
        for spec in profile.chars:
            proxy = by_uuid.get(spec.uuid.upper())
            if proxy is None:
                raise StageError("discover", EXIT_DISCOVER, f"characteristic {spec.role} {spec.uuid} not found")
            roles[spec.role] = proxy
        report["profile"] = profile.name
        lap("discover")

        # -- write -----------------------------------------------------------------------
        stage = "write"
        writes: list[tuple[str, int]] = []
        if profile.is_rgb:
            if args.rgb_values is None:
                raise StageError("write", EXIT_OTHER, f"{profile.name} needs --rgb")
            writes = list(zip(("red", "green", "blue"), args.rgb_values))
        else:
            if args.command_values is None:
                raise StageError("write", EXIT_OTHER, "harness needs --command")
            writes = [("command", v) for v in args.command_values]
        notifications: list[str] = []
        all_notified = asyncio.Event()
        if args.subscribe and "button" in roles:

            def on_notification(value: bytes) -> None:
                notifications.append(value.hex())
                if len(notifications) >= len(writes):
                    all_notified.set()

            await peer.subscribe(roles["button"], on_notification)
        ops = []
        for role, value in writes:
            proxy = roles[role]
            if args.op == "auto":
                with_response = bool(proxy.properties & Characteristic.Properties.WRITE)
            else:
                with_response = args.op == "request"
            ops.append("request" if with_response else "command")
            try:
                await peer.write_value(proxy, bytes([value]), with_response=with_response)
            except att.ATT_Error as error:
                report["ops"] = ops
                raise StageError(
                    "write", EXIT_WRITE, f"{role}: ATT error 0x{error.error_code:02X}", error.error_code
                ) from error
        report["ops"] = ops
        if args.subscribe and "button" in roles:
            # Notifications follow the write responses; wait for them (bounded).
            try:
                await asyncio.wait_for(all_notified.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
            report["notifications"] = notifications
        lap("write")

        # -- disconnect --------------------------------------------------------------------
        stage = "disconnect"
        await connection.disconnect()
        connection = None
        lap("disconnect")
    except StageError:
        raise
    except Exception as error:
        code = {"scan": EXIT_NOT_FOUND, "connect": EXIT_CONNECT, "discover": EXIT_DISCOVER,
                "write": EXIT_WRITE}.get(stage, EXIT_OTHER)
        raise StageError(stage, code, f"{type(error).__name__}: {error}") from error
    finally:
        report["stage_reached"] = stage
        if connection is not None:
            # Leave the peripheral free to advertise again.
            try:
                await asyncio.wait_for(connection.disconnect(), 2.0)
            except Exception:  # noqa: BLE001
                pass
        try:
            await asyncio.wait_for(transport.close(), 2.0)
        except Exception:  # noqa: BLE001
            pass
        report["total_ms"] = round((time.perf_counter() - marks["t0"]) * 1000, 2)


async def main_async(args) -> int:
    report: dict = {}
    code = EXIT_OK
    try:
        await asyncio.wait_for(run(args, report), args.timeout)
        out = {"result": "ok", **report}
    except StageError as error:
        code = error.code
        out = {"result": "error", "stage": error.stage, "error": str(error), "att_error": error.att_error, **report}
    except asyncio.TimeoutError:
        stage = report.get("stage_reached", "?")
        code = EXIT_NOT_FOUND if stage == "scan" else EXIT_OTHER
        out = {"result": "error", "stage": stage, "error": f"timeout after {args.timeout} s",
               "att_error": None, **report}
    except Exception as error:  # noqa: BLE001
        code = EXIT_OTHER
        out = {"result": "error", "stage": "?", "error": f"{type(error).__name__}: {error}",
               "att_error": None, **report}
    out.pop("stage_reached", None)
    print(json.dumps(out), flush=True)
    return code


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
