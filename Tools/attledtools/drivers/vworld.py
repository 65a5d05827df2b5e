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

Rooms (``--range H:DEVICE=RSSI|none``, ``--range-default``, ``--rssi-noise``,
``--seed``; see ROOMS_HELP in air/rooms.py): a range matrix says at which RSSI
each host controller and each device hear each other, or that they do not.
Out of range, a host controller hears none of the device's advertising and
cannot connect to it; an established connection's PDUs are held until the
pair is back in range, or the connection ends at its supervision timeout
(Disconnection Complete reason 0x08 on both sides, the device advertises
again).  Advertising reports carry the matrix's RSSI (plus noise) instead of
Bumble's fixed -50.  Not used, everyone hears everyone at -50 as before.
Events: range {host, device, rssi} (one per --range before ready, and one per
stdin "range" command), supervision_timeout {host, device, handle,
device_handle, reason, timeout_ms}, connection_failed {host, device, handle,
reason} (a CONNECT_IND that did not reach the device); the ready line has
"ranges", "range_default" and "rssi_noise" when rooms are used.  With rooms or
without, a CONNECT_IND that reaches the device but that its controller does not
take (it no longer advertises connectable: another central's CONNECT_IND came
first, or it is connected already) fails the same way: Bumble's central reports
its connection made as it sends it, and six connection intervals later the
host gets Disconnection Complete 0x3E (Connection Failed to be Established)
and vworld prints connection_failed (device_handle null), as on real air.

Timed air (``--timed-air``, off by default; see TIMED_AIR_HELP): advertising
events at the advertising interval plus advDelay, and LL data at connection
events (at most 4 PDUs each way per event, an answer one event after the
request at the earliest).  Prints {"event":"timed_air","on":true} before
ready; the ready line has "timed_air": true.

Controller faults (``--host-fault``, see HOST_FAULT_HELP) make the host
controllers misbehave: a command answered with an error status, a command
never answered, a Hardware Error event.  With ``--stdin-commands`` vworld also
reads commands from stdin, one per line, to inject faults mid-run (a Hardware
Error, the host's transport closed) or to move a device in or out of a host
controller's range; see STDIN_HELP.

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
import logging
import os
import signal
import sys

from bumble.host import Host
from bumble.snoop import BtSnooper
from bumble.transport import open_transport
from bumble.transport.common import AsyncPipeSink

from attledtools.drivers.air.controller import DeviceController
from attledtools.drivers.air.events import emit
from attledtools.drivers.air.hostfaults import HOST_FAULT_HELP, HostFault
from attledtools.drivers.air.hostport import HostPort
from attledtools.drivers.air.link import Air
from attledtools.drivers.air.rooms import ROOMS_HELP, Rooms, parse_range, parse_rssi
from attledtools.drivers.rcworld import RootCanal
from attledtools.peers.advertising import build_advertising_data
from attledtools.peers.faultspec import FAULT_HELP
from attledtools.peers.options import SECURITY_HELP, PeripheralOptions
from attledtools.peers.peripheral import LedPeripheral, make_peripheral

logger = logging.getLogger("vworld")

STDIN_HELP = """\
stdin commands (--stdin-commands), one per line; each is answered with
{"event":"stdin_command","line":..,"ok":true|false[,"detail":..]}:
  hw_error [CODE] [HOST]       send a Hardware Error event (default code 0x01, host 0)
  close [HOST]                 close host HOST's transport: the attached client's
                               socket (tcp/unix), or the pty / transport itself
  fault FAULT                  add a --host-fault at run time (same syntax)
  range H DEVICE RSSI|none     host controller H and device DEVICE now hear each
                               other at RSSI dBm, or not at all (see Rooms);
                               printed as {"event":"range",...} first
"""

TIMED_AIR_HELP = """\
Timed air (--timed-air, Bumble's controllers only; off: everything at once):
  advertising   an advertising event every advertising interval plus advDelay,
                a random 0-10 ms per event (Vol 6 Part B 4.4.2.2.1; seeded
                with --seed).  Bumble's own timers give legacy advertising
                interval / 1000 s (0.625 ms units read as ms) and no advDelay.
  connections   LL data and control PDUs go at connection events: every
                interval from the CONNECT_IND on (a connection update takes
                effect 6 events after the event that carried it), at most 4
                LL PDUs (27 octets each) each way per event, a PDU at the
                first event after it was queued, so an answer goes one event
                after its request at the earliest.  Peripheral latency is
                ignored (the peripheral listens at every event).  A
                peripheral's LE Connection Complete carries the CONNECT_IND's
                parameters (Bumble's: 12.5 ms, 100 ms whatever they are).
Nothing is printed per PDU.
"""



# -----------------------------------------------------------------------------
# Main
# -----------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Virtual BLE world: Bumble host controllers + LED peripherals on one link.",
        epilog="Device options: interval=MS addr=C0:.. name_in=adv|shortened|none short=N\n"
        "conn_update=1 conn_update_delay=MS security_request=1 uuid=0 stamp=1 flags=auto|0|1 init=R,G,B\n"
        "notify_every=MS (harness) conn_update_params=IMIN,IMAX,LAT,TO mtu=N fault_KIND=...\n"
        "secure=enc pairing=sc|legacy forget_bonds=N (see below)\n"
        "gattdb profile: seed=N last_ffff=1 (see attledtools.peers.gattdb)\n\n"
        + FAULT_HELP + "\n" + SECURITY_HELP + "\n" + HOST_FAULT_HELP + "\n" + STDIN_HELP + "\n"
        + ROOMS_HELP + "\n" + TIMED_AIR_HELP,
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
    parser.add_argument("--scan-while-initiating", action="store_true",
                        help="host controllers list LE_States bits 22 and 23 (scanning beside a pending connect, "
                        "which Bumble's controller carries out though its own table leaves them out)")
    parser.add_argument("--reset-on-host-close", action="store_true",
                        help="when a host's socket closes, its controller drops links/scan/connect")
    parser.add_argument("--zero-host-address", action="store_true",
                        help="host controllers keep public address 00:00:00:00:00:00 (Bumble's default)")
    parser.add_argument("--zero-address-host", action="append", type=int, default=[], metavar="I",
                        help="host controller I (0-based, repeatable) alone keeps public address 00:00:00:00:00:00")
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
                        help="read fault and range commands from stdin, one per line (see below)")
    parser.add_argument("--range", action="append", default=[], metavar="H:DEVICE=RSSI|none",
                        help="host controller H (0-based) and device DEVICE hear each other at RSSI dBm, "
                        "or not at all (repeatable; see Rooms below)")
    parser.add_argument("--range-default", metavar="RSSI|none",
                        help="every host/device pair not given by --range (default -50: everyone hears everyone)")
    parser.add_argument("--rssi-noise", type=int, default=0, metavar="DB",
                        help="uniform noise in [-DB, +DB] on each advertising report's RSSI (default 0)")
    parser.add_argument("--seed", type=int, default=1, metavar="N",
                        help="seed of the RSSI noise and of --timed-air's advertising delays (default 1)")
    parser.add_argument("--timed-air", action="store_true",
                        help="advertising at its interval plus advDelay, LL data at connection events "
                        "(see Timed air below)")
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
            ("--scan-while-initiating", args.scan_while_initiating),
            ("--reset-on-host-close", args.reset_on_host_close), ("--zero-host-address", args.zero_host_address),
            ("--zero-address-host", args.zero_address_host),
            ("--peripheral-transport", args.peripheral_transport), ("--snoop", args.snoop),
            ("--host-fault", args.host_fault), ("--stdin-commands", args.stdin_commands),
            ("--range", args.range), ("--range-default", args.range_default is not None),
            ("--rssi-noise", args.rssi_noise), ("--timed-air", args.timed_air)) if on]
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
    if (args.controller == "rootcanal" or args.peripheral_transport) and any(o.stamp for o in args.device_options):
        parser.error("stamp=1: only on Bumble's air (vworld's own link stamps the advertisements)")
    # Rooms: the matrix's pairs must name a --host and a --device of this air.
    if args.peripheral_transport and (args.range or args.range_default is not None):
        parser.error("--range, --range-default: the devices must be on vworld's own air, not --peripheral-transport")
    if args.rssi_noise < 0:
        parser.error("--rssi-noise: DB must be 0 or more")
    names = [opts.name for opts in args.device_options]
    try:
        args.range_default_rssi = -50 if args.range_default is None else parse_rssi(args.range_default)
        args.ranges = [parse_range(text) for text in args.range]
    except ValueError as error:
        parser.error(str(error))
    for host, device, _ in args.ranges:
        if host >= len(args.host):
            parser.error(f"--range {host}:{device}: no host controller {host} (there are {len(args.host)})")
        if device not in names:
            parser.error(f"--range {host}:{device}: no --device named {device!r}")
        if names.count(device) > 1:
            parser.error(f"--range {host}:{device}: several devices are named {device!r}")
    return args


async def run(args) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    hosts: list[HostPort] = []
    rooms = Rooms(default=args.range_default_rssi, noise=args.rssi_noise, seed=args.seed)
    for host_index, device, rssi in args.ranges:
        rooms.set(host_index, device, rssi)  # in force before anything is on the air
    air = Air(rooms, timed=args.timed_air, seed=args.seed)
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
                        loop.create_task(stdin_command(text, hosts, air))

        loop.add_reader(fd, on_stdin)
    if args.lifetime > 0:
        loop.call_later(args.lifetime, stop.set)

    rc: RootCanal | None = None
    if args.controller == "bumble":
        hosts.extend(HostPort(i, spec, args, air) for i, spec in enumerate(args.host))
        for host in hosts:
            air.add_host(host.controller, host.index)
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
                controller = DeviceController(f"P{index}", link=air, timed=args.timed_air)
                air.add_device(controller, opts.name)
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
        rooms_info: dict = {}
        if args.ranges or args.range_default is not None or args.rssi_noise:
            for host_index, device, rssi in args.ranges:
                emit({"event": "range", "host": host_index, "device": device, "rssi": rssi})
            rooms_info = rooms.describe()
        if args.timed_air:
            emit({"event": "timed_air", "on": True})
            rooms_info["timed_air"] = True
        emit({
            "event": "ready",
            "pid": os.getpid(),
            "controller": args.controller,
            **host_info,
            "legacy_reports": bool(args.legacy_reports),
            "spec_controller": bool(args.spec_controller),
            "devices": [p.describe() for p in peripherals],
            **rooms_info,
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


async def stdin_command(line: str, hosts: list[HostPort], air: Air) -> None:
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
        elif words[0] == "range" and len(words) == 4:
            air.set_range(int(words[1]), words[2], parse_rssi(words[3]))
        else:
            raise ValueError("unknown command (known: hw_error [CODE] [HOST], close [HOST], fault FAULT, "
                             "range H DEVICE RSSI|none)")
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
