"""Gateway latency (issue 12): `attled gateway` against a Bumble-and-paho reference.

Run alone (any attled binary with the gateway built in):

    .venv/bin/python -m attledtools.bench.gatewaybench --attled .build/debug/attled [-n 300] [--json figures.json]

`make bench` runs it as the "gateway" section of bench.py, on the
release binary.

Set-up: a private mosquitto broker on a free loopback port (generated
configuration, no persistence), and two virtual worlds (drivers/vworld.py), one
per gateway under test so they do not interfere, each with one pycom LED
(Lamp1). Then, both gateways running:
  - attled:     `attled gateway -i tcp:... --mqtt 127.0.0.1:PORT --name Lamp1`
                (topics attled/<node>/set);
  - reference:  gateway_reference.py, the same job with Bumble's and
                paho's own APIs (topics ref/<node>/set).

Latency: N commands per gateway (default 300), alternating attled and
reference command by command, each a distinct colour published (QoS 0, as
Home Assistant does by default) one at a time: the next is published only
after the device has shown the previous one (or a deadline passed). Measured
from just before the publish to the device's last Write Request (blue) of that
colour, both ends on time.monotonic() in this process: the device end is when
the thread reading the world's stdout receives the "write" event (the world
prints it as it handles the request). The latency therefore includes broker
hop, gateway, virtual link and the world's event pipe; the last two are the
same for both gateways. Reported: p50, p90, p99, max (ms), against the
issue's targets (p50 <= 3 ms, p99 <= 10 ms).

Burst: 200 commands published back to back (distinct colours), per gateway:
the time from the first publish until the device shows the last colour, how
many colours the device was written (coalescing: at most one write in flight,
the latest wins) and how many Write Requests that took, and a check that the
device ends (after a quiet settle) on the last colour.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paho.mqtt.client as mqtt

from attledtools import module_command
from attledtools.bench import section
from attledtools.drivers.mqttbroker import MOSQUITTO, Broker
from attledtools.drivers.worldproc import WorldProcess, free_port
from attledtools.drivers.attledproc import AttledProcess

TARGET_P50_MS, TARGET_P99_MS = 3.0, 10.0


class TimedWorld(WorldProcess):
    """A vworld whose reader thread stamps every event with time.monotonic() ("_rx")
    and folds each device's red/green/blue writes into colours: a blue write
    completes the colour (the last red and green written before it)."""

    def __init__(self, args: list[str], **kw):
        self.rgb_writes = 0  # Write events on red/green/blue
        self.shown: list[tuple[tuple[int, int, int], float]] = []  # (colour, rx time) at each blue write
        self._last = {"red": 0, "green": 0}
        super().__init__(args, **kw)

    def _on_event(self, event: dict, rx: float) -> None:
        """Stamps the event and folds red/green/blue writes (called under the lock)."""
        event["_rx"] = rx
        if event.get("event") == "write" and event.get("char") in ("red", "green", "blue"):
            self.rgb_writes += 1
            value = int(event.get("value", "00")[:2] or "0", 16)
            if event["char"] == "blue":
                self.shown.append(((self._last["red"], self._last["green"], value), rx))
            else:
                self._last[event["char"]] = value

    def wait_colour(self, rgb: tuple[int, int, int], since: int, timeout: float) -> float | None:
        """rx time of the first blue write completing `rgb` at index >= since of `shown`."""
        deadline = time.monotonic() + timeout
        i = since
        with self._cond:
            while True:
                while i < len(self.shown):
                    if self.shown[i][0] == rgb:
                        return self.shown[i][1]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return None
                self._cond.wait(left)


def stop_process(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


class Gateway:
    """One gateway under test: its world, its process, its command topic."""

    def __init__(self, label: str, world: TimedWorld, proc: subprocess.Popen, topic: str, log: Path):
        self.label, self.world, self.proc, self.topic, self.log = label, world, proc, topic, log

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc)
        self.world.stop()


def start_world() -> TimedWorld:
    port = free_port()
    world = TimedWorld(["--host", f"tcp-server:127.0.0.1:{port}", "--device", "Lamp1:pycom:interval=100"], lifetime=3600)
    ready = world.wait_ready(30)
    if not ready:
        world.stop()
        raise RuntimeError("vworld did not start")
    world.ready = ready
    return world


def node_of(world: TimedWorld) -> str:
    """attled's node id: the device address, lower case, no colons."""
    d = world.ready["devices"][0]
    address = d.get("address") or d.get("addr") or ""
    return address.split("/")[0].replace(":", "").lower()


def start_attled(attled: str, broker: Broker, work: Path) -> Gateway:
    world = start_world()
    log = work / "attled-gateway.log"
    gw = AttledProcess(attled, ["gateway", "-i", world.ready["attled"][0], "--mqtt", f"127.0.0.1:{broker.port}",
                                "--name", "Lamp1", "--no-cache"], log=log, stdout=False, home=work / "attled-home")
    try:
        gw.wait_line("MQTT: connected", timeout=30)
        gw.wait_line("ready (", timeout=30)
    except AssertionError as e:
        gw.kill()
        world.stop()
        raise RuntimeError(f"attled gateway did not get ready: {e}") from None
    return Gateway("attled", world, gw.p, f"attled/{node_of(world)}/set", log)


def start_reference(broker: Broker, work: Path, env: dict) -> Gateway:
    world = start_world()
    log = work / "reference-gateway.log"
    port = world.ready["hosts"][0].rsplit(":", 1)[1]
    cmd = module_command("attledtools.bench.gateway_reference", "--transport", f"tcp-client:127.0.0.1:{port}",
                         "--name", "Lamp1", "--mqtt", f"127.0.0.1:{broker.port}", "--exit-on-stdin-eof")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # {"event":"ready",...} or {"event":"error",...}
    try:
        ready = json.loads(line)
    except ValueError:
        ready = {"event": "error", "error": line}
    if ready.get("event") != "ready":
        stop_process(proc)
        world.stop()
        raise RuntimeError(f"reference gateway did not get ready: {ready}\n" + log.read_text(errors="replace"))
    return Gateway("reference", world, proc, ready["topic"], log)


def command(rgb: tuple[int, int, int]) -> bytes:
    r, g, b = rgb
    return json.dumps({"state": "ON", "color": {"r": r, "g": g, "b": b}, "brightness": 255}).encode()


def colour(i: int, salt: int = 0) -> tuple[int, int, int]:
    """Distinct for i < 65536 per salt; consecutive colours differ in every channel."""
    return (((i >> 8) * 16 + salt) % 256, (i * 7 + 3) % 256, i % 256)


def percentile(vals: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(vals)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


class Publisher:
    """paho without a network thread: publish() writes to the socket at once (QoS 0),
    so the timestamp taken just before it is the publish time."""

    def __init__(self, port: int):
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"gatewaybench-{os.getpid()}")
        self.client.connect("127.0.0.1", port, keepalive=60)
        deadline = time.monotonic() + 10
        while not self.client.is_connected() and time.monotonic() < deadline:
            self.client.loop(0.05)
        if not self.client.is_connected():
            raise RuntimeError("bench publisher: no CONNACK")
        # paho leaves Nagle on: a publish sent while the broker has not yet ACKed
        # the previous one (delayed ACK, up to 40 ms) would wait for that ACK.
        self.client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def publish(self, topic: str, payload: bytes) -> float:
        t0 = time.monotonic()
        self.client.publish(topic, payload, qos=0)
        return t0

    def service(self) -> None:
        self.client.loop(0)

    def close(self) -> None:
        self.client.disconnect()


def warm_up(pub: Publisher, gw: Gateway, n: int = 10) -> None:
    """Until the gateway answers (subscription in place), then n unmeasured commands."""
    deadline = time.monotonic() + 20
    for i in range(1000):
        rgb = colour(i, salt=200)
        since = len(gw.world.shown)
        pub.publish(gw.topic, command(rgb))
        if gw.world.wait_colour(rgb, since, 1.0) is not None:
            break
        if time.monotonic() > deadline or gw.proc.poll() is not None:
            raise RuntimeError(f"{gw.label} gateway never wrote the device:\n" + gw.log.read_text(errors="replace"))
    for i in range(n):
        rgb = colour(i, salt=208)
        since = len(gw.world.shown)
        pub.publish(gw.topic, command(rgb))
        gw.world.wait_colour(rgb, since, 2.0)


def latency_run(pub: Publisher, gws: list[Gateway], n: int, timeout: float) -> dict[str, dict]:
    lat: dict[str, list[float]] = {g.label: [] for g in gws}
    missed = {g.label: 0 for g in gws}
    for i in range(n):
        rgb = colour(i)
        for g in gws:
            since = len(g.world.shown)
            t0 = pub.publish(g.topic, command(rgb))
            t1 = g.world.wait_colour(rgb, since, timeout)
            if t1 is None:
                missed[g.label] += 1
            else:
                lat[g.label].append((t1 - t0) * 1000)
            pub.service()
    out = {}
    for g in gws:
        v = lat[g.label]
        out[g.label] = ({"n": len(v), "missed": missed[g.label], "p50_ms": percentile(v, 50), "p90_ms": percentile(v, 90),
                         "p99_ms": percentile(v, 99), "max_ms": max(v), "mean_ms": statistics.fmean(v)}
                        if v else {"n": 0, "missed": missed[g.label]})
    return out


def burst_run(pub: Publisher, g: Gateway, count: int, timeout: float, settle: float = 0.5) -> dict:
    colours = [colour(i, salt=100) for i in range(count)]
    last = colours[-1]
    shown0, writes0 = len(g.world.shown), g.world.rgb_writes
    t0 = time.monotonic()
    for rgb in colours:
        pub.publish(g.topic, command(rgb))
    t_pub = time.monotonic()
    t1 = g.world.wait_colour(last, shown0, timeout)
    time.sleep(settle)  # anything written after the last colour would show here
    pub.service()
    with g.world._cond:
        shown = g.world.shown[shown0:]
        writes = g.world.rgb_writes - writes0
    final = shown[-1][0] if shown else None
    return {"commands": count, "publish_ms": (t_pub - t0) * 1000,
            "last_colour_ms": (t1 - t0) * 1000 if t1 is not None else None,
            "colours_written": len(shown), "write_requests": writes,
            "final": list(final) if final else None, "ends_on_last": final == last}


def run(args: argparse.Namespace, figures: dict) -> int:
    """The whole gateway section; returns the number of failures."""
    if not os.path.exists(MOSQUITTO):
        print(f"gatewaybench: no broker at {MOSQUITTO} (apt-get install mosquitto)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="attled-gwbench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUMBLE_")}
    broker: Broker | None = None
    pub: Publisher | None = None
    gws: list[Gateway] = []
    failures = 0
    try:
        broker = Broker(work, nodelay=not args.broker_nagle, log=False)
        broker.start()
        gws.append(start_attled(args.attled, broker, work))
        gws.append(start_reference(broker, work, env))
        pub = Publisher(broker.port)
        for g in gws:
            warm_up(pub, g)
        load = os.getloadavg()
        lat = latency_run(pub, gws, args.n, args.timeout)
        bursts = {g.label: burst_run(pub, g, args.burst, max(args.timeout, 10.0)) for g in gws}
        load_after = os.getloadavg()

        binary = "release" if "/release/" in args.attled else "NOT a release build"
        print(f"\ngateway latency (issue 12): publish -> device's blue Write Request, {args.n} commands each, "
              f"one at a time, alternating; attled {args.attled} ({binary}); broker "
              f"{'with Nagle (mosquitto default)' if args.broker_nagle else 'set_tcp_nodelay true'}; "
              f"load average {load[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cores\n")
        print(f"{'':10} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} {'mean ms':>8} {'missed':>7}")
        for g in gws:
            f = lat[g.label]
            if f["n"]:
                print(f"{g.label:10} {f['p50_ms']:8.2f} {f['p90_ms']:8.2f} {f['p99_ms']:8.2f} {f['max_ms']:8.2f}"
                      f" {f['mean_ms']:8.2f} {f['missed']:>7}")
            else:
                print(f"{g.label:10} {'-':>8} {'-':>8} {'-':>8} {'-':>8} {'-':>8} {f['missed']:>7}")
            failures += f["missed"] > 0
        a, r = lat["attled"], lat["reference"]
        if a["n"] and r["n"]:
            print(f"{'ratio':10} {a['p50_ms']/r['p50_ms']:7.2f}x {a['p90_ms']/r['p90_ms']:7.2f}x "
                  f"{a['p99_ms']/r['p99_ms']:7.2f}x {a['max_ms']/r['max_ms']:7.2f}x  (attled / reference)")
            ok50, ok99 = a["p50_ms"] <= TARGET_P50_MS, a["p99_ms"] <= TARGET_P99_MS
            print(f"attled against the targets: p50 {a['p50_ms']:.2f} ms {'<=' if ok50 else '>'} {TARGET_P50_MS:g} ms "
                  f"({'met' if ok50 else 'MISSED'}), p99 {a['p99_ms']:.2f} ms {'<=' if ok99 else '>'} {TARGET_P99_MS:g} ms "
                  f"({'met' if ok99 else 'MISSED'})")
        print(f"\nburst: {args.burst} commands published back to back\n")
        print(f"{'':10} {'publish ms':>10} {'last colour ms':>15} {'colours written':>16} {'Write Requests':>15} {'ends on last':>13}")
        for g in gws:
            b = bursts[g.label]
            lc = f"{b['last_colour_ms']:.1f}" if b["last_colour_ms"] is not None else "never"
            print(f"{g.label:10} {b['publish_ms']:10.1f} {lc:>15} {b['colours_written']:>16} {b['write_requests']:>15} "
                  f"{'yes' if b['ends_on_last'] else 'NO: ' + str(b['final']):>13}")
            failures += not b["ends_on_last"]
        figures["gateway"] = {"n": args.n, "attled": args.attled, "release": "/release/" in args.attled,
                              "broker_nagle": args.broker_nagle,
                              "loadavg_before": load, "loadavg_after": load_after,
                              "targets_ms": {"p50": TARGET_P50_MS, "p99": TARGET_P99_MS},
                              "latency": lat, "burst": bursts}
        return failures
    except RuntimeError as error:
        print(f"gatewaybench: {error}", file=sys.stderr)
        return failures + 1
    finally:
        if pub:
            pub.close()
        for g in gws:
            g.stop()
        if broker:
            broker.stop()
        if args.keep:
            print(f"gatewaybench: logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("-n", type=int, default=300, help="commands per gateway for the latency figures (default 300)")
    ap.add_argument("--burst", type=int, default=200, help="commands in the back-to-back burst (default 200)")
    ap.add_argument("--timeout", type=float, default=2.0, help="deadline per command, s (default 2)")
    ap.add_argument("--broker-nagle", action="store_true",
                    help="leave mosquitto's default set_tcp_nodelay false (see above)")
    ap.add_argument("--keep", action="store_true", help="keep the gateways' logs")


def section_args(attled: str, n: int = 300) -> argparse.Namespace:
    """The defaults, for bench.py's gateway section."""
    return argparse.Namespace(attled=attled, n=n, burst=200, timeout=2.0, broker_nagle=False, keep=False)


def main() -> int:
    return section.main(__doc__, add_arguments, run, "make release, or --attled .build/debug/attled")

if __name__ == "__main__":
    sys.exit(main())
