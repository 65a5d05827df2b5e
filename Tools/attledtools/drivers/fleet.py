"""Several `attled gateway` processes sharing lamps over MQTT (issue 31), in a
world with rooms: the integration tests' and the soak's driver.

A Fleet starts:
  * one mosquitto (or two bridged to each other: ``bridged=True``; gateway i
    then uses broker i % 2), started and stopped here;
  * vworld with one host controller per gateway, the lamps, a range matrix
    (``ranges[(host, lamp)] = rssi | None``, default ``default_rssi``), RSSI
    noise, --stdin-commands (range changes) and --reset-on-host-close (a
    gateway that dies leaves its controller, which drops its links, as the
    kernel's user channel or a restarted gateway's HCI_Reset does);
  * the gateways, ``gateway -i tcp:... --mqtt ... --gateway-id gI``, each
    under a watchdog of its own that plays systemd: $NOTIFY_SOCKET and
    $WATCHDOG_USEC given, and the process SIGABRTed (then SIGKILLed) when no
    WATCHDOG=1 came for that long (a SIGSTOPped gateway is killed as systemd
    would kill it);
  * a watching MQTT client (paho, MQTT 5) on broker 0.

The lamps' own events are the ground truth: who each lamp is connected to
(its "connected" event's peer against the hosts' addresses), double links,
and every colour it was written. Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from attledtools import REPO_ROOT
from attledtools.drivers.attledproc import AttledProcess
from attledtools.drivers.mqttbroker import Broker, Watcher
from attledtools.drivers.worldproc import WorldProcess

ATTLED = Path(os.environ.get("ATTLED_BIN", REPO_ROOT / ".build" / "debug" / "attled"))
PREFIX = "attled"


class TimedWorld(WorldProcess):
    """vworld, each event stamped with its arrival (time.monotonic(), key "rx")."""

    def _on_event(self, event: dict, rx: float) -> None:
        event["rx"] = rx

    def command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


class Watchdog:
    """systemd's watchdog for one process: a datagram socket for $NOTIFY_SOCKET;
    when no WATCHDOG=1 came for ``usec``, SIGABRT, then SIGKILL after 1 s."""

    def __init__(self, workdir: Path, name: str, usec: int):
        self.path = str(workdir / f"notify-{name}.sock")
        self.usec = usec
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.pid: int | None = None
        self.ready = threading.Event()
        self.fired_at: float | None = None
        self.last = time.monotonic()
        self.pings = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def env(self) -> dict:
        return {"NOTIFY_SOCKET": self.path, "WATCHDOG_USEC": str(self.usec)}

    def _run(self) -> None:
        while not self.stopped:
            try:
                data = self.sock.recv(4096).decode("utf-8", "replace")
                for line in data.splitlines():
                    if line == "READY=1":
                        self.ready.set()
                    if line == "WATCHDOG=1":
                        self.pings += 1
                        self.last = time.monotonic()
            except socket.timeout:
                pass
            except OSError:
                return
            if self.pid is not None and self.ready.is_set() and self.fired_at is None \
                    and time.monotonic() - self.last > self.usec / 1e6:
                self.fired_at = time.monotonic()
                try:
                    os.kill(self.pid, signal.SIGCONT)  # as systemd: a stopped process gets the signal too
                    os.kill(self.pid, signal.SIGABRT)
                except ProcessLookupError:
                    pass
                threading.Timer(1.0, self._kill).start()

    def _kill(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        self.stopped = True
        self.thread.join(1)
        self.sock.close()


class Relay:
    """A TCP relay 127.0.0.1:port -> 127.0.0.1:target, one thread per
    direction per connection: the bridge between two brokers (or a gateway's
    way to its broker) goes through it, so a test can cut it (every
    connection closed, new ones refused: a partition), black-hole it (a
    network gone silently) and heal it."""

    def __init__(self, target: int):
        self.target = target
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self.forwarding = threading.Event()
        self.forwarding.set()
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.done = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.done:
            try:
                c, _ = self.server.accept()
            except (socket.timeout, OSError):
                continue
            if not self.open.is_set():
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def blackhole(self) -> None:
        """Bytes are dropped both ways, the connections left open: a network
        gone silently (each end notices only by its keepalive); new
        connections are refused."""
        self.forwarding.clear()
        self.open.clear()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                if self.forwarding.is_set():
                    b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.open.clear()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
                except OSError:
                    pass
            self.conns.clear()

    def heal(self) -> None:
        """New connections go through again (connections black-holed stay
        dead: their ends have given up on them by then)."""
        if not self.forwarding.is_set():
            self.cut()
        self.forwarding.set()
        self.open.set()

    def close(self) -> None:
        self.done = True
        self.cut()
        self.server.close()


class GatewayProc(AttledProcess):
    def __init__(self, args: list[str], env: dict, home: Path | None = None, log: Path | None = None):
        super().__init__(ATTLED, args, home=home, env=env, log=log)


@dataclass
class Lamp:
    name: str
    profile: str = "pycom"


@dataclass
class Fleet:
    lamps: list[Lamp]
    gateways: int = 3
    ranges: dict = field(default_factory=dict)  # (host, lamp name) -> rssi | None
    default_rssi: int | None = -50
    noise: int = 0
    seed: int = 1
    gateway_args: list[str] = field(default_factory=list)
    bridged: bool = False
    watchdog_usec: int = 3_000_000
    world_args: list[str] = field(default_factory=list)
    # Each gateway reaches its broker through a relay of its own (``net[i].cut()``:
    # the gateway's network gone, its process and controller untouched).
    relayed: bool = False

    def start(self) -> "Fleet":
        self.workdir = Path(tempfile.mkdtemp(prefix="fleet-", dir="/tmp"))
        self.brokers: list[Broker] = []
        first = Broker(self._dir("b0"))
        first.start()
        self.brokers.append(first)
        self.relay: Relay | None = None
        if self.bridged:
            # The second broker bridges every topic both ways to the first,
            # through a relay the tests can cut.
            self.relay = Relay(first.port)
            bridge = (f"connection b1-to-b0\naddress 127.0.0.1:{self.relay.port}\ntopic # both 1\n"
                      "cleansession true\nrestart_timeout 1 1\nkeepalive_interval 5\n")
            second = Broker(self._dir("b1"), extra=bridge)
            second.start()
            self.brokers.append(second)
        args = []
        for i in range(self.gateways):
            args += ["--host", "tcp-server:127.0.0.1:0"]
        for lamp in self.lamps:
            args += ["--device", f"{lamp.name}:{lamp.profile}:init=1,1,1"]
        for (h, name), rssi in self.ranges.items():
            args += ["--range", f"{h}:{name}={'none' if rssi is None else rssi}"]
        args += ["--range-default", "none" if self.default_rssi is None else str(self.default_rssi)]
        if self.noise:
            args += ["--rssi-noise", str(self.noise), "--seed", str(self.seed)]
        # --spec-controller: a cancelled LE Create Connection ends, as on real
        # controllers (Bumble's stock controller keeps it pending and refuses
        # every other connect until that device advertises; a gateway that
        # lost a race for a lamp would be stuck: test_gateway.py covers that quirk).
        args += ["--stdin-commands", "--reset-on-host-close", "--spec-controller", *self.world_args]
        self.world = TimedWorld(args, lifetime=1800)
        ready = self.world.wait_ready(30)
        if ready is None:
            raise RuntimeError("vworld never became ready:\n" + self.world.stderr)
        self.ready = ready
        self.host_addresses = [a.upper() for a in ready["host_addresses"]]
        self.addresses = {d["name"]: d["address"] for d in ready["devices"]}
        self.watcher = Watcher(self.brokers[0].port)
        self.procs: list[GatewayProc | None] = [None] * self.gateways
        self.dogs: list[Watchdog | None] = [None] * self.gateways
        for i in range(self.gateways):
            self.start_gateway(i)
        return self

    def _dir(self, name: str) -> Path:
        d = self.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def gateway_id(self, i: int) -> str:
        return f"g{i}"

    def broker_of(self, i: int) -> Broker:
        return self.brokers[i % len(self.brokers)]

    def start_gateway(self, i: int) -> GatewayProc:
        if self.dogs[i] is not None:
            self.dogs[i].close()
        dog = Watchdog(self.workdir, f"{i}-{time.monotonic_ns()}", self.watchdog_usec)
        port = self.broker_of(i).port
        if self.relayed:
            if not hasattr(self, "net"):
                self.net: dict[int, Relay] = {}
            if i not in self.net:
                self.net[i] = Relay(port)
            port = self.net[i].port
        args = ["gateway", "-i", self.ready["attled"][i], "--mqtt", f"127.0.0.1:{port}",
                "--gateway-id", self.gateway_id(i), *self.gateway_args]
        for lamp in self.lamps:
            args += ["--name", lamp.name]
        self.starts = getattr(self, "starts", 0) + 1
        p = GatewayProc(args, dog.env(), home=self._dir(f"home{i}"), log=self.workdir / f"g{i}-{self.starts}.log")
        dog.pid = p.p.pid
        self.procs[i], self.dogs[i] = p, dog
        return p

    # -- faults ---------------------------------------------------------------------
    def kill(self, i: int) -> float:
        t = time.monotonic()
        self.procs[i].p.kill()
        self.procs[i].p.wait(5)
        return t

    def sigstop(self, i: int) -> float:
        t = time.monotonic()
        self.procs[i].p.send_signal(signal.SIGSTOP)
        return t

    def set_range(self, host: int, lamp: str, rssi: int | None) -> None:
        self.world.command(f"range {host} {lamp} {'none' if rssi is None else rssi}")

    # -- the lamps' ground truth ----------------------------------------------------
    def node(self, lamp: str) -> str:
        return self.addresses[lamp].replace(":", "").lower()

    def host_of(self, peer: str) -> int | None:
        try:
            return self.host_addresses.index(peer.upper())
        except ValueError:
            return None

    def links(self, lamp: str, upto: int | None = None) -> list[int]:
        """Hosts the lamp is connected to now (by its own events)."""
        up: list[int] = []
        for e in self.world.events[:upto]:
            if e.get("device") != lamp:
                continue
            if e.get("event") == "connected":
                up.append(self.host_of(e["peer"]))
            elif e.get("event") == "disconnected" and up:
                up.pop(0)
        return up

    def double_links(self) -> int:
        """Moments a lamp had two connections at once (its own events)."""
        count: dict[str, int] = {}
        doubles = 0
        for e in self.world.events:
            d = e.get("device")
            if e.get("event") == "connected":
                count[d] = count.get(d, 0) + 1
                doubles += count[d] > 1
            elif e.get("event") == "disconnected":
                count[d] = max(0, count.get(d, 0) - 1)
        return doubles

    def holders(self) -> dict[str, int | None]:
        return {l.name: (self.links(l.name) or [None])[0] for l in self.lamps}

    def wait_holders(self, want, timeout: float = 30) -> dict:
        """Until every lamp is held and ``want(holders)`` (a dict lamp -> host index) is true,
        and each held lamp is online for Home Assistant; returns the holders."""
        deadline = time.monotonic() + timeout
        while True:
            h = self.holders()
            if all(v is not None for v in h.values()) and want(h) and all(self.online(l) for l in h):
                return h
            if time.monotonic() > deadline:
                raise AssertionError(f"holders {h}, online {[self.online(l) for l in h]}; wanted otherwise\n"
                                     + self.describe())
            time.sleep(0.05)  # polling the lamps' events and the broker's messages

    def online(self, lamp: str) -> bool:
        msgs = self.watcher.find(f"{PREFIX}/{self.node(lamp)}/availability")
        return bool(msgs) and msgs[-1].text == "online"

    def online_at(self, lamp: str, after: float, timeout: float) -> float:
        """When the lamp's availability next said online after ``after`` (monotonic)."""
        m = self.watcher.wait(f"{PREFIX}/{self.node(lamp)}/availability",
                              lambda x: x.text == "online" and x.at > after, timeout=timeout)
        return m.at

    def applied(self, lamp: str) -> list[tuple[int, int, int]]:
        """Every colour the lamp showed after a complete write (its state events)."""
        return [tuple(e["rgb"]) for e in self.world.events if e.get("event") == "state" and e.get("device") == lamp]

    def command(self, lamp: str, rgb: tuple[int, int, int]) -> float:
        t = time.monotonic()
        self.watcher.publish(f"{PREFIX}/{self.node(lamp)}/set",
                             json.dumps({"state": "ON", "color": dict(zip("rgb", rgb)), "brightness": 255}))
        return t

    def describe(self, lines: int = 60) -> str:
        out = []
        for i, p in enumerate(self.procs):
            if p is not None:
                out.append(f"--- gateway g{i}:\n" + "\n".join(p.lines[-lines:]))
        out.append("--- lamps' links: " + json.dumps({l.name: self.links(l.name) for l in self.lamps}))
        out.append(f"--- every gateway's whole log: {self.workdir}/g*.log")
        return "\n".join(out)

    def stop(self) -> None:
        for i, p in enumerate(self.procs):
            if p is not None and p.p.poll() is None:
                try:
                    p.p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
        for d in self.dogs:
            if d is not None:
                d.close()
        self.watcher.close()
        self.world.stop()
        for b in self.brokers:
            b.stop()
        if self.relay is not None:
            self.relay.close()
        for r in getattr(self, "net", {}).values():
            r.close()

    def remove(self) -> None:
        """Deletes the work directory (the logs); after stop()."""
        import shutil
        shutil.rmtree(self.workdir, ignore_errors=True)


def colour(k: int) -> tuple[int, int, int]:
    """The k-th command's colour: unique for k < 65536, and r, g and b each
    differ from the (k-1)-th's, so a lamp written channel by channel (pycom)
    shows no commanded colour on its way from one to the next."""
    return (k % 256, (k // 256 + k + 1) % 256, (k // 256 + 2 * k + 2) % 256)


class CommandStream:
    """Commands at ``hz`` to every lamp, each command a colour no other command
    to that lamp has (``colour``), in a thread; ``issued`` records (lamp, rgb,
    monotonic time)."""

    def __init__(self, fleet: Fleet, hz: float = 5.0):
        self.fleet = fleet
        self.period = 1.0 / hz
        self.issued: list[tuple[str, tuple[int, int, int], float]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "CommandStream":
        self.thread.start()
        return self

    def _run(self) -> None:
        k = 0
        while not self.stop_event.is_set():
            k += 1
            for i, lamp in enumerate(self.fleet.lamps):
                rgb = colour(k + 1000 * i)
                self.issued.append((lamp.name, rgb, self.fleet.command(lamp.name, rgb)))
            self.stop_event.wait(self.period)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(2)

    def wait_last_applied(self, timeout: float = 10) -> None:
        """Until every lamp shows the last colour sent to it (bounded per lamp)."""
        for lamp in self.fleet.lamps:
            last = [rgb for name, rgb, _ in self.issued if name == lamp.name][-1]
            deadline = time.monotonic() + timeout
            while self.fleet.applied(lamp.name)[-1:] != [last] and time.monotonic() < deadline:
                time.sleep(0.05)  # polling the lamp's events for its last write

    def figures(self) -> dict:
        """Per lamp: issued, applied once, applied more than once, and whether the last one was applied."""
        out = {}
        for lamp in self.fleet.lamps:
            mine = [rgb for name, rgb, _ in self.issued if name == lamp.name]
            shown = self.fleet.applied(lamp.name)
            counts: dict = {}
            for rgb in shown:
                counts[rgb] = counts.get(rgb, 0) + 1
            applied = sum(1 for rgb in mine if counts.get(rgb, 0) >= 1)
            twice = sum(1 for rgb in mine if counts.get(rgb, 0) > 1)
            out[lamp.name] = {"issued": len(mine), "applied": applied, "applied_twice": twice,
                              "superseded": len(mine) - applied,
                              "last_applied": bool(mine) and shown[-1:] == [mine[-1]]}
        return out
