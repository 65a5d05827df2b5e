"""gattdb: a Bumble peripheral whose GATT database is built at random from a seed.

The test peer for attled's general GATT tool (issue 14): discovery, reads and
writes of every shape that real firmware produces, with the database itself as
the ground truth.

In a world (vworld ``--device NAME:gattdb[:key=value,...]``)
-----------------------------------------------------------
    vworld --host tcp-server:127.0.0.1:0 --device Gdb:gattdb:seed=3,mtu=23

Keys of this profile: ``seed=N`` (default 1), ``last_ffff=1`` (shift the
generated services so that the database ends at handle 0xFFFF; Bumble's own
GAP and GATT services stay at 0x0001.., so there is a gap of unused handles
in between).  Every key of the LED peripherals works too (options.py):
``mtu=23`` caps the server's ATT_MTU (and the peer sends its own Exchange MTU
Request), ``interval=MS``, ``addr=..``, and the ``fault_KIND=REQ[#N]`` faults;
``fault_corrupt=prepare_write#N`` flips the last byte of the N-th Prepare
Write Response's echoed value (the queued value stays right), for testing a
client's echo check and its Execute Write (flags 0) cancel.
``notify_on_subscribe=1``: when a client writes a CCCD to enable
notifications (or indications), the peer sends the characteristic's current
value once (a Handle Value Notification, or Indication when only indications
were enabled; truncated to ATT_MTU-3 as Bumble does), after the Write Response,
and reports ``{"event": "notify", "handle": H, "value": hex, "indication": bool}``.

It advertises its name only (Complete Local Name, plus Flags when they fit).

Standalone
----------
    .venv/bin/python -m attledtools.peers.gattdb --seed N --dump [--last-ffff] [--name NAME]

prints the database JSON (below) on one line and exits, without any world.
The same options give the same database, handle for handle, as the peer in a
world (``--name`` must match the device NAME: it is the GAP Device Name).

The database
------------
* 3-6 primary services, 16-bit and 128-bit UUIDs mixed, one of them empty
  (declaration only); Bumble adds GAP (0x1800) and GATT (0x1801) first.
* 2-3 secondary services (the first one with a 128-bit UUID, the second with
  a 16-bit one), each pulled in by an include declaration in one or two
  primary services; one primary service includes both a 16-bit and a 128-bit
  one.  An include declaration of a 128-bit service carries no UUID (Core Vol
  3 Part G 3.2): a client must Read the included service's declaration.
  (Bumble itself would put the 16 bytes in the include; this module fixes
  the value after Bumble has built the database.)
* Characteristics: each of the 31 non-empty combinations of read,
  write-without-response, write, notify and indicate at least once, plus a
  few random extra ones; 16-bit and 128-bit UUIDs, one UUID used twice (in
  two services).  CCCD (0x2902) on every notify/indicate one (Bumble adds it
  last); a Characteristic User Description (0x2901, read-only text) and/or a
  vendor descriptor (128-bit UUID, 1-30 bytes, sometimes writable) on some.
  At least one service ends with a characteristic that has no descriptors.
* Values 1-400 bytes, deterministic from the seed; the first readable ones
  are 1, 22, 23, 400, 2 and 255 bytes long (around MTU 23's 22-byte reads).

Properties are enforced as real firmware does (LedPeripheral's ATT screen):
Read / Read Blob of a characteristic without read: 0x02 Read Not Permitted
(also for Read By Type); Write Request and Prepare Write without write: 0x03;
Write Command without write-without-response: dropped; writes to
declarations, CUDs and read-only vendor descriptors: 0x03.  Written values
(Write Request, Write Command, Prepare + Execute Write, up to 512 bytes) are
stored, and later reads return them.

JSON format
-----------
One object (on startup in a world it is the event ``gatt_database``, with
vworld's ``t`` and ``"device": NAME``; the standalone dump has the same keys
except ``t``)::

  {"event": "gatt_database", "device": "Gdb", "name": "Gdb", "seed": 3,
   "last_ffff": false, "attribute_count": 131, "last_handle": 131,
   "services": [
     {"uuid": "1800", "start": 1, "end": 5, "primary": true,
      "includes": [],
      "characteristics": [
        {"uuid": "2a00", "declaration_handle": 2, "value_handle": 3,
         "properties": ["read"], "value": "476462",
         "descriptors": []}, ...]},
     {"uuid": "c2b0...-...", "start": 10, "end": 14, "primary": false, ...},
     {"uuid": "b3c1", "start": 15, "end": 40, "primary": true,
      "includes": [{"handle": 16, "uuid": "c2b0...", "start": 10, "end": 14}],
      "characteristics": [
        {"uuid": "...", "declaration_handle": 17, "value_handle": 18,
         "properties": ["read", "notify"], "value": "00ff...",
         "descriptors": [{"uuid": "2901", "handle": 19, "value": "...",
                          "writable": false},
                         {"uuid": "2902", "handle": 20, "value": "0000",
                          "writable": true}]}, ...]}]}

* ``services``: every service, primary and secondary, in handle order.
* UUIDs: 16-bit ones as 4 lower-case hex digits ("2a00"), 128-bit ones in the
  canonical lower-case 8-4-4-4-12 form.
* ``includes``: the service's include declarations in handle order:
  declaration ``handle``, and the included service's ``uuid``, ``start``,
  ``end``.
* ``properties``: names of the set bits, low bit first, as attled names them:
  broadcast, read, write-without-response, write, notify, indicate,
  signed-write, extended.
* ``value``: the value as hex (in full) when the characteristic has the read
  property, else null.  Every descriptor here is readable; its ``value`` is
  its hex (a CCCD reads "0000" until a client writes it), ``writable`` says
  whether it accepts writes.
* ``last_handle``: the highest handle in use (0xFFFF = 65535 with last_ffff).

Events of the peer in a world (besides LedPeripheral's connected, att, mtu,
rejected, read_rejected, subscribed, fault ...):

  {"event": "write", "device": NAME, "handle": H, "uuid": .., "value": hex,
   "length": N, "op": "request|command|execute", "target": "characteristic|descriptor"}
  {"event": "notify", "device": NAME, "handle": H, "value": hex, "indication": bool}
      (notify_on_subscribe=1: the value sent after a CCCD write)

The parts: gattdb_model.py draws the database from the seed, gattdb_server.py
installs it on Bumble's GATT server and describes it back as JSON; this module
is the peer (check_options, GattDbPeripheral) and the standalone --dump.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from bumble import att
from bumble.device import Device
from bumble.gatt import Characteristic

from attledtools.peers.gattdb_model import Props, generate, props_names  # noqa: F401  (props_names: for the tests)
from attledtools.peers.gattdb_server import Store, describe_database, dump, install, uuid_text  # noqa: F401
from attledtools.peers.options import PeripheralOptions
from attledtools.peers.peripheral import LedPeripheral

OPTION_KEYS = ("seed", "last_ffff", "notify_on_subscribe")

# The writes reported as "write" events, by ATT opcode: Bumble's own.
WRITE_OPS = {att.Opcode.ATT_WRITE_REQUEST: "request", att.Opcode.ATT_WRITE_COMMAND: "command",
             att.Opcode.ATT_EXECUTE_WRITE_REQUEST: "execute"}


# -----------------------------------------------------------------------------
# The peripheral in a world
# -----------------------------------------------------------------------------
def check_options(opts: PeripheralOptions) -> None:
    """Validate this profile's keys (called by PeripheralOptions.parse)."""
    try:
        seed = int(opts.profile_options.get("seed", "1"), 0)
    except ValueError:
        raise ValueError(f"gattdb: seed must be an integer, not {opts.profile_options['seed']!r}") from None
    if seed < 0:
        raise ValueError("gattdb: seed must be >= 0")
    if opts.profile_options.get("last_ffff", "0") not in ("0", "1"):
        raise ValueError("gattdb: last_ffff must be 0 or 1")
    if opts.profile_options.get("notify_on_subscribe", "0") not in ("0", "1"):
        raise ValueError("gattdb: notify_on_subscribe must be 0 or 1")


class GattDbPeripheral(LedPeripheral):
    """LedPeripheral (advertising, connection, ATT screen, mtu, faults) with
    the seeded database in place of an LED service."""

    def __init__(self, opts: PeripheralOptions, emit) -> None:
        super().__init__(opts, emit)
        self.seed = int(opts.profile_options.get("seed", "1"), 0)
        self.last_ffff = opts.profile_options.get("last_ffff", "0") == "1"
        self.notify_on_subscribe = opts.profile_options.get("notify_on_subscribe", "0") == "1"
        self.model = generate(self.seed)
        self.store = Store(self._on_write)
        self._write_op = "request"
        self.database: dict[str, Any] = {}

    def _add_services(self, device: Device) -> None:
        install(device, self.model, self.store, self.last_ffff)

    def _screen(self, server, bearer, pdu) -> bool:
        passed = super()._screen(server, bearer, pdu)
        op = int(pdu.op_code)
        if passed and op in WRITE_OPS:
            self._write_op = WRITE_OPS[op]
        return passed

    def _on_write(self, attribute, value: bytes, target: str) -> None:
        uuid = attribute.uuid if isinstance(attribute, Characteristic) else getattr(attribute, "type", None)
        self.emit("write", handle=attribute.handle if attribute is not None else -1,
                  uuid=uuid_text(uuid) if uuid is not None else None, value=value.hex(), length=len(value),
                  op=self._write_op, target=target)

    def _on_subscription(self, bearer, characteristic, notify: bool, indicate: bool) -> None:
        super()._on_subscription(bearer, characteristic, notify, indicate)
        if self.notify_on_subscribe and (notify or indicate) and self.connection is not None:
            # A task: it runs after Bumble has sent the Write Response to the CCCD write.
            self._spawn(self._send_current(self.connection, characteristic, indication=not notify))

    async def _send_current(self, connection, characteristic, indication: bool) -> None:
        key = next((k for k, a in self.store.attribute_of.items() if a is characteristic), None)
        if key is None:
            return
        value = self.store.values[key][: connection.att_mtu - 3]
        self.emit("notify", handle=characteristic.handle, value=value.hex(), indication=indication)
        if indication:
            await self.device.indicate_subscriber(connection, characteristic, value)
        else:
            await self.device.notify_subscriber(connection, characteristic, value)

    def _first_value_handle(self) -> int:
        generated = {id(v) for v in self.store.attribute_of.values()}
        chars = [a for a in self.device.gatt_server.attributes if isinstance(a, Characteristic) and id(a) in generated]
        notifying = [c for c in chars if c.properties & Props.NOTIFY]
        return (notifying or chars)[0].handle

    async def start(self) -> None:
        assert self.device is not None
        await self.device.power_on()
        self.database = await describe_database(self.device)
        self.emit("gatt_database", name=self.opts.name, seed=self.seed, last_ffff=self.last_ffff, **self.database)
        await self.advertise()

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "name": self.opts.name,
            "profile": "gattdb",
            "address": self.opts.address,
            "interval_ms": self.opts.interval_ms,
            "adv_data": self.adv_data.hex(),
            "seed": self.seed,
            "last_ffff": self.last_ffff,
            "notify_on_subscribe": self.notify_on_subscribe,
            "attribute_count": self.database.get("attribute_count"),
            "last_handle": self.database.get("last_handle"),
        }
        if self.opts.faults:
            info["faults"] = [f"{f.kind}={f.request}#{f.nth}" + (f"/{f.arg}" if f.arg is not None else "")
                              for f in self.opts.faults]
        if self.opts.mtu:
            info["mtu"] = self.opts.mtu
        return info


PERIPHERAL = GattDbPeripheral


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Random GATT database from a seed (see the module docstring).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", action="store_true", help="print the database JSON and exit")
    parser.add_argument("--last-ffff", action="store_true", help="the database ends at handle 0xFFFF")
    parser.add_argument("--name", default="GattDb", help="device name (the GAP Device Name value)")
    parser.add_argument("--indent", type=int, default=None, help="pretty-print with this indent")
    args = parser.parse_args(argv)
    if not args.dump:
        parser.error("nothing to do: give --dump (in a world: vworld --device NAME:gattdb:seed=N)")
    print(json.dumps(asyncio.run(dump(args.seed, args.name, args.last_ffff)), indent=args.indent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
