"""What the two Bumble centrals share (bumble_central, the reference LED central,
and bumble_gatt_central, the judge of a peripheral): one run of a central on
Bumble's host stack, from finding the peripheral to the JSON line it prints.

    add_target_arguments / check_target_arguments   --transport, --name, --uuid,
                                 --address, --rgb, --command, --timeout, --verbose
    matches(args, advertisement) does the advertisement come from the target?
    CentralJob                   the run: its stage, its report ("<stage>_ms"
                                 laps, "total_ms"), and the steps both do:
                                 open, scan, connect, led_roles (discover the
                                 LED service and its characteristics),
                                 write_led, close
    StageError, EXIT_CODES       a failure, the stage it happened in and its exit code
    report_run(job, timeout)     runs job.run() under the deadline and prints
                                 the one JSON line; returns the exit code

Exit codes (EXIT_CODES): 0 ok, 1 other, 2 not found (scan), 3 connect,
4 LED service or characteristic not found (discover), 5 write (ATT error);
bumble_gatt_central adds its own stages' codes.
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

from attledtools.peers.profiles import PROFILES, ProfileSpec

EXIT_CODES = {"ok": 0, "other": 1, "scan": 2, "connect": 3, "discover": 4, "write": 5}
ADVERTISED_128 = (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
                  AdvertisingData.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS)


class StageError(Exception):
    """A run that failed in ``stage``; ``code`` is the exit code, ``att_error`` the ATT error code if one caused it."""

    def __init__(self, stage: str, code: int, message: str, att_error: int | None = None):
        super().__init__(message)
        self.stage, self.code, self.att_error = stage, code, att_error


# -----------------------------------------------------------------------------
# The target and the colour, on the command line
# -----------------------------------------------------------------------------
def add_target_arguments(p: argparse.ArgumentParser, timeout: float) -> None:
    """The options both centrals take; ``timeout`` is the default overall deadline (s)."""
    p.add_argument("--transport", required=True, help="Bumble transport, e.g. tcp-client:127.0.0.1:PORT")
    p.add_argument("--name", help="advertised local name to look for (complete or shortened)")
    p.add_argument("--uuid", help="advertised 128-bit service UUID to look for")
    p.add_argument("--address", help="peer address to look for (e.g. C0:11:22:33:44:55)")
    p.add_argument("--rgb", help="R,G,B colour to write (pycom / particle)")
    p.add_argument("--command", help="comma-separated command bytes for the harness, e.g. 1,0")
    p.add_argument("--timeout", type=float, default=timeout, help="overall deadline in seconds")
    p.add_argument("--verbose", "-v", action="store_true")


def check_target_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors (exit 2) for the target options; sets args.rgb_values and args.command_values (or None)."""
    if not (args.name or args.uuid or args.address):
        p.error("give --name, --uuid or --address")
    args.rgb_values = [int(v) for v in args.rgb.split(",")] if args.rgb else None
    if args.rgb_values is not None and (len(args.rgb_values) != 3 or not all(0 <= v <= 255 for v in args.rgb_values)):
        p.error("--rgb must be R,G,B with values 0..255")
    args.command_values = [int(v, 0) for v in args.command.split(",")] if args.command else None


def advertised_uuids(advertisement) -> list[UUID]:
    """The 128-bit service UUIDs an advertisement lists (complete and incomplete lists)."""
    uuids: list[UUID] = []
    for ad_type in ADVERTISED_128:
        uuids += advertisement.data.get(ad_type) or []
    return uuids


def matches(args: argparse.Namespace, advertisement) -> bool:
    """Does this advertisement come from the device we look for (--address, --name, --uuid)?"""
    data = advertisement.data
    if args.address and str(advertisement.address).split("/")[0].upper() != args.address.upper():
        return False
    if args.name:
        names = [data.get(AdvertisingData.COMPLETE_LOCAL_NAME), data.get(AdvertisingData.SHORTENED_LOCAL_NAME)]
        if args.name not in [n for n in names if n]:
            return False
    if args.uuid and UUID(args.uuid) not in advertised_uuids(advertisement):
        return False
    return True


# -----------------------------------------------------------------------------
# One run
# -----------------------------------------------------------------------------
class CentralJob:
    """One run of a central: ``run()`` (the subclass's) goes through the steps
    below, setting ``stage``; every step's time goes into ``report``."""

    exit_codes = EXIT_CODES

    def __init__(self, args: argparse.Namespace, report: dict) -> None:
        self.args, self.report = args, report
        self.t0 = self.last = time.perf_counter()
        self.stage = "init"
        self.transport = None
        self.device: Device | None = None
        self.connection = None
        self.peer: Peer | None = None

    async def run(self) -> None:
        raise NotImplementedError

    def lap(self, stage: str) -> None:
        """Report the time since the last lap as ``<stage>_ms``."""
        now = time.perf_counter()
        self.report[f"{stage}_ms"] = round((now - self.last) * 1000, 2)
        self.last = now

    def fail(self, stage: str, message: str, att_error: int | None = None) -> StageError:
        return StageError(stage, self.exit_codes.get(stage, EXIT_CODES["other"]), message, att_error)

    def timeout_code(self) -> int:
        """The exit code when the overall deadline passes in the current stage."""
        return self.exit_codes.get(self.stage, EXIT_CODES["other"])

    async def open(self, name: str, address: str) -> Device:
        """The transport opened and a Device on it with static random ``address`` (not yet powered on)."""
        self.transport = await open_transport(self.args.transport)
        self.device = Device.with_hci(name, hci.Address(address), self.transport.source, self.transport.sink)
        return self.device

    async def scan(self):
        """Active scan until a connectable advertisement of the target (bounded by the overall deadline)."""
        assert self.device is not None
        found: asyncio.Future = asyncio.get_running_loop().create_future()

        def on_advertisement(advertisement) -> None:
            if not found.done() and advertisement.is_connectable and matches(self.args, advertisement):
                found.set_result(advertisement)

        self.device.on(Device.EVENT_ADVERTISEMENT, on_advertisement)
        await self.device.start_scanning(active=True, filter_duplicates=False)
        advertisement = await found
        await self.device.stop_scanning()
        self.report["address"] = str(advertisement.address).split("/")[0]
        self.report["legacy_report"] = bool(advertisement.is_legacy)
        self.lap("scan")
        return advertisement

    async def connect(self, advertisement):
        """The connection to the advertiser (own address random); StageError "connect" when it fails."""
        assert self.device is not None
        try:
            self.connection = await self.device.connect(
                advertisement.address, own_address_type=hci.OwnAddressType.RANDOM, timeout=self.args.timeout)
        except Exception as error:
            raise self.fail("connect", f"connect failed: {error}") from error
        self.lap("connect")
        return self.connection

    async def led_roles(self, advertisement) -> tuple[dict, ProfileSpec]:
        """The LED service (the advertised profile tried first, then the others)
        and its characteristics by role; report["profile"]. StageError "discover"."""
        peer = self.peer = Peer(self.connection)
        advertised = set(advertised_uuids(advertisement))
        for candidate in sorted(PROFILES.values(), key=lambda p: UUID(p.service_uuid) not in advertised):
            services = await peer.discover_service(UUID(candidate.service_uuid))
            if services:
                service, profile = services[0], candidate
                break
        else:
            raise self.fail("discover", "no LED service found")
        by_uuid = {str(c.uuid).upper(): c for c in await peer.discover_characteristics(service=service)}
        roles = {}
        for spec in profile.chars:
            if spec.uuid.upper() not in by_uuid:
                raise self.fail("discover", f"characteristic {spec.role} {spec.uuid} not found")
            roles[spec.role] = by_uuid[spec.uuid.upper()]
        self.report["profile"] = profile.name
        return roles, profile

    async def write_led(self, roles: dict, writes: list[tuple[str, int]], op: str = "auto") -> None:
        """One byte per write, in order: Write Request or Write Command by the
        characteristic's properties (``op`` "auto") or as ``op`` forces it;
        report["ops"]. StageError "write" on an ATT error."""
        assert self.peer is not None
        ops = []
        for role, value in writes:
            proxy = roles[role]
            if op == "auto":
                with_response = bool(proxy.properties & Characteristic.Properties.WRITE)
            else:
                with_response = op == "request"
            ops.append("request" if with_response else "command")
            try:
                await self.peer.write_value(proxy, bytes([value]), with_response=with_response)
            except att.ATT_Error as error:
                self.report["ops"] = ops
                raise self.fail("write", f"{role}: ATT error 0x{error.error_code:02X}", error.error_code) from error
        self.report["ops"] = ops

    async def close(self) -> None:
        """Disconnect (leaving the peripheral free to advertise again) and close
        the transport, each bounded; report["total_ms"]."""
        if self.connection is not None:
            try:
                await asyncio.wait_for(self.connection.disconnect(), 2.0)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self.transport is not None:
            try:
                await asyncio.wait_for(self.transport.close(), 2.0)
            except Exception:  # noqa: BLE001
                pass
        self.report["total_ms"] = round((time.perf_counter() - self.t0) * 1000, 2)


async def report_run(job: CentralJob, timeout: float) -> int:
    """Runs ``job`` under the overall deadline, prints its one JSON line
    ({"result": "ok", ...report} or {"result": "error", "stage", "error",
    "att_error", ...report}) and returns the exit code."""
    code = EXIT_CODES["ok"]
    try:
        await asyncio.wait_for(job.run(), timeout)
        out = {"result": "ok", **job.report}
    except StageError as error:
        code = error.code
        out = {"result": "error", "stage": error.stage, "error": str(error), "att_error": error.att_error,
               **job.report}
    except asyncio.TimeoutError:
        code = job.timeout_code()
        out = {"result": "error", "stage": job.stage, "error": f"timeout after {timeout} s", "att_error": None,
               **job.report}
    except Exception as error:  # noqa: BLE001
        code = EXIT_CODES["other"]
        out = {"result": "error", "stage": job.stage, "error": f"{type(error).__name__}: {error}", "att_error": None,
               **job.report}
    print(json.dumps(out), flush=True)
    return code


def run_main(make_job, parse_args, argv=None) -> int:
    """A Bumble central's entry point: its arguments, logging to stderr
    (DEBUG with --verbose), then the job run and reported under its timeout."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    return asyncio.run(report_run(make_job(args), args.timeout))
