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
work with an independent host stack. The steps it shares with
bumble_gatt_central (finding, connecting, the LED service, the writes, the
JSON line) are bumble_job's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from attledtools.drivers import bumble_job
from attledtools.drivers.bumble_job import (
    EXIT_CODES, CentralJob, StageError, add_target_arguments, check_target_arguments,
)

EXIT_OTHER, EXIT_NOT_FOUND = EXIT_CODES["other"], EXIT_CODES["scan"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Bumble reference LED central")
    add_target_arguments(p, timeout=10.0)
    p.add_argument("--op", choices=("auto", "request", "command"), default="auto",
                   help="write op: auto (by properties), or force Write Request / Write Command")
    p.add_argument("--subscribe", action="store_true",
                   help="harness: subscribe to the button characteristic and report notifications")
    args = p.parse_args(argv)
    check_target_arguments(p, args)
    if args.rgb_values is None and args.command_values is None:
        p.error("give --rgb and/or --command")
    return args


class LedCentral(CentralJob):
    """Scan, connect, discover, write, disconnect: each stage timed."""

    def timeout_code(self) -> int:
        return EXIT_NOT_FOUND if self.stage == "scan" else EXIT_OTHER

    async def run(self) -> None:
        args = self.args
        device = await self.open("bumble-central", "F0:00:00:00:00:01")
        try:
            await device.power_on()
            self.lap("init")
            self.stage = "scan"
            advertisement = await self.scan()
            self.stage = "connect"
            await self.connect(advertisement)
            self.stage = "discover"
            roles, profile = await self.led_roles(advertisement)
            self.lap("discover")

            self.stage = "write"
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
            subscribe = args.subscribe and "button" in roles
            if subscribe:

                def on_notification(value: bytes) -> None:
                    notifications.append(value.hex())
                    if len(notifications) >= len(writes):
                        all_notified.set()

                await self.peer.subscribe(roles["button"], on_notification)
            await self.write_led(roles, writes, args.op)
            if subscribe:
                # Notifications follow the write responses; wait for them (bounded).
                try:
                    await asyncio.wait_for(all_notified.wait(), 2.0)
                except asyncio.TimeoutError:
                    pass
                self.report["notifications"] = notifications
            self.lap("write")

            self.stage = "disconnect"
            await self.connection.disconnect()
            self.connection = None
            self.lap("disconnect")
        except StageError:
            raise
        except Exception as error:
            raise self.fail(self.stage, f"{type(error).__name__}: {error}") from error
        finally:
            await self.close()


def main(argv=None) -> int:
    return bumble_job.run_main(lambda args: LedCentral(args, {}), parse_args, argv)


if __name__ == "__main__":
    sys.exit(main())
