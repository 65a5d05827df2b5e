"""Bluetooth proxy (issue 30): `attled proxy` against a reference proxy on Bumble.

Run alone (a release build: the binary's size is one of the figures):

    .venv/bin/python -m attledtools.bench.proxybench --attled .build/release/attled [-n 3] [--json figures.json]

`make bench` runs it as the "proxy" section of bench.py.

Two proxies under test, each an ESPHome native API server (plaintext, on a
free loopback port) on a virtual world's host controller (drivers/vworld.py,
Bumble's controllers), driven by aioesphomeapi's APIClient in this process as
Home Assistant drives a proxy:
  - attled:     `attled proxy -i tcp:... --listen 127.0.0.1:0`;
  - reference:  proxy_reference.py, the same job written plainly with
                Bumble's host and aioesphomeapi's messages.
Each of the N runs (alternating which goes first) starts, for each proxy, a
fresh world and a fresh proxy process for each scenario:

  a. write round trip: one pycom lamp (Lamp1, advertising every 50 ms). The
     client subscribes to raw advertisements (and stays subscribed, as Home
     Assistant does), connects (v3 without cache), gets the services, writes
     10 unmeasured values, then --writes (default 200) Write Requests to the
     red characteristic one at a time, `bluetooth_gatt_write(addr, handle,
     value, True)`, each timed from the call to its return (the proxy's 83).
     The world records its host controller's HCI traffic (vworld --snoop):
     "world" is the part of each round trip spent below the proxy's HCI (the
     controller, the air and the peripheral: Write Request in, Write
     Response out). Beside it, attled's own write: --jobs (default 10)
     `attled --name Lamp1 --rgb ... --no-cache --btsnoop F` jobs per run on a
     world of their own, the "write" phase they print divided by their Write
     Requests (as bench.py's compare section reads the phases), and each
     Write Request to its Write Response in their own captures.
  b. advertisement latency: in (a)'s world, before the connect, for
     --adv-seconds (default 10): Lamp1 advertises with stamp=1
     (peers/advstamp.py: vworld's air writes a sequence number and
     time.monotonic_ns() into each advertisement as it goes on the air);
     latency is this process's time.monotonic_ns() when aioesphomeapi hands
     the client the report (its callback) minus that stamp, the same clock,
     once per advertising event (the scan response, reported beside it with
     the same stamp, is not counted twice). Both proxies batch raw
     advertisements the same way: at most 16 a message or 20 ms after the
     first of a batch, so at this rate the 20 ms window is most of it.
  c. CPU under load: --load-devices (default 20) stamped devices advertising
     every --load-interval ms (default 20: 1,000 advertising events a second
     on the air; Bumble's controller reports each as an advertisement and a
     scan response, so 2,000 reports a second). After 2 s, for
     --load-seconds (default 10): the proxy's user+sys CPU (/proc/PID/stat)
     over the window, the advertising events on the air (the stamps'
     sequence numbers) and those that reached the client, reports and
     messages received, the latency under load, and the world's own CPU
     (Python; it makes the air and may be what limits the rate).
  d. memory and size: each proxy process's peak RSS (VmHWM of
     /proc/PID/status, read as it ends: the larger of its two scenarios'
     processes) and the attled binary's size (issue 30: under 12 MB).

Bumble's virtual air delivers at once: no connection interval, no radio. The
figures are the cost of the host stack and the API path (and, in the
latency, the batch window), not what a radio adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path

from aioesphomeapi import APIClient, BluetoothProxyFeature

from attledtools import module_command
from attledtools.bench import section
from attledtools.bench.hcipath import read_btsnoop
from attledtools.drivers.attledproc import AttledProcess
from attledtools.drivers.worldproc import WorldProcess
from attledtools.peers import advstamp
from attledtools.peers.profiles import PROFILES

BINARY_LIMIT_BYTES = 12_000_000  # issue 30: the binary under 12 MB
CLK_TCK = os.sysconf("SC_CLK_TCK")
KINDS = ("attled", "reference")
ATT_WRITE_REQUEST, ATT_WRITE_RESPONSE = 0x12, 0x13
RED = PROFILES["pycom"].char("red").uuid


def percentile(vals: list[float], p: float) -> float:
    """Nearest-rank percentile (NaN for no values)."""
    if not vals:
        return float("nan")
    s = sorted(vals)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def spread(vals: list[float]) -> dict:
    return {"n": len(vals), "p50": percentile(vals, 50), "p90": percentile(vals, 90), "p99": percentile(vals, 99),
            "max": max(vals) if vals else float("nan"), "mean": statistics.fmean(vals) if vals else float("nan")}


def cpu_seconds(pid: int) -> float | None:
    """user+sys CPU of a process so far (/proc/PID/stat, fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_kib(pid: int) -> int | None:
    """VmHWM of a process (peak resident set), KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def att_write_round_trips(path: Path) -> list[float]:
    """ms from each ATT Write Request to the Write Response after it, in a capture
    (either side of the HCI: attled's own, or a vworld host controller's)."""
    try:
        packets = read_btsnoop(path)
    except (OSError, ValueError):
        return []
    out, pending = [], None
    for p in packets:
        d = p.data
        if len(d) < 10 or d[0] != 0x02 or d[7] | d[8] << 8 != 0x0004:
            continue
        if d[9] == ATT_WRITE_REQUEST:
            pending = p.t
        elif d[9] == ATT_WRITE_RESPONSE and pending is not None:
            out.append((p.t - pending) * 1000)
            pending = None
    return out


class Proxy:
    """One proxy under test on a world: its process, port and log."""

    def __init__(self, kind: str, pid: int, port: int, stop, log: Path):
        self.kind, self.pid, self.port, self._stop, self.log = kind, pid, port, stop, log
        self.peak_kib: int | None = None

    def stop(self) -> None:
        self.peak_kib = peak_rss_kib(self.pid)
        self._stop()


def start_world(devices: list[str], snoop: Path | None = None) -> tuple[WorldProcess, dict]:
    args = ["--host", "tcp-server:127.0.0.1:0", *[x for d in devices for x in ("--device", d)]]
    if snoop is not None:
        args += ["--snoop", str(snoop)]
    world = WorldProcess(args, lifetime=900)
    ready = world.wait_ready(60)
    if not ready:
        world.stop()
        raise RuntimeError("vworld did not start")
    return world, ready


def start_proxy(kind: str, attled: str, ready: dict, work: Path, tag: str, env: dict) -> Proxy:
    log = work / f"{tag}.log"
    if kind == "attled":
        p = AttledProcess(attled, ["proxy", "-i", ready["attled"][0], "--listen", "127.0.0.1:0"], log=log, stdout=False,
                          home=work / f"{tag}-home")
        try:
            line = p.wait_line("proxy: listening on", timeout=20)
        except AssertionError as e:
            p.kill()
            raise RuntimeError(f"attled proxy did not listen: {e}") from None
        port = int(re.search(r"listening on [\d.]+:(\d+)", line).group(1))

        def stop() -> None:
            try:
                p.stop(timeout=10)
            except AssertionError:
                pass
            p.kill()
        return Proxy(kind, p.p.pid, port, stop, log)
    port = ready["hosts"][0].rsplit(":", 1)[1]
    proc = subprocess.Popen(module_command("attledtools.bench.proxy_reference", "--transport", f"tcp-client:127.0.0.1:{port}",
                                           "--listen", "127.0.0.1:0", "--exit-on-stdin-eof"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    assert proc.stdout is not None
    try:
        event = json.loads(proc.stdout.readline())
    except ValueError:
        event = {"event": "error"}
    if event.get("event") != "ready":
        proc.kill()
        proc.wait(5)
        raise RuntimeError(f"reference proxy did not get ready: {event}\n" + log.read_text(errors="replace"))

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    return Proxy(kind, proc.pid, int(event["port"]), stop, log)


class Adverts:
    """The client's raw advertisements: stamps seen, latencies, counts."""

    def __init__(self):
        self.reset()
        self.address_types: dict[int, int] = {}

    def reset(self) -> None:
        self.latencies: list[float] = []
        self.seen: set[tuple[int, int]] = set()
        self.first_seq: dict[int, int] = {}
        self.last_seq: dict[int, int] = {}
        self.reports = self.messages = 0

    def on_raw(self, resp) -> None:
        now = time.monotonic_ns()
        self.messages += 1
        for a in resp.advertisements:
            self.reports += 1
            self.address_types[a.address] = a.address_type
            s = advstamp.read_stamp(bytes(a.data))
            if s is None or (a.address, s[0]) in self.seen:
                continue
            self.seen.add((a.address, s[0]))
            self.latencies.append((now - s[1]) / 1e6)
            self.first_seq.setdefault(a.address, s[0])
            self.last_seq[a.address] = max(s[0], self.last_seq.get(a.address, 0))

    def window(self) -> dict:
        """The figures of what arrived since the last reset (events on the air: the
        stamps' sequence numbers from the first to the last seen, per device)."""
        air = sum(self.last_seq[a] - self.first_seq[a] + 1 for a in self.first_seq)
        return {"events_received": len(self.seen), "events_on_air": air, "reports": self.reports,
                "messages": self.messages, "latency_ms": spread(self.latencies), "_lat": list(self.latencies)}


async def api_client(port: int) -> tuple[APIClient, int]:
    cli = APIClient("127.0.0.1", port, None)
    await asyncio.wait_for(cli.connect(login=True), 10)
    info = await cli.device_info()
    return cli, info.bluetooth_proxy_feature_flags


async def write_scenario(proxy: Proxy, lamp: int, args: argparse.Namespace) -> dict:
    """(b) then (a) on one proxy: advertisement latency, then the writes."""
    cli, flags = await api_client(proxy.port)
    try:
        need = (BluetoothProxyFeature.PASSIVE_SCAN | BluetoothProxyFeature.ACTIVE_CONNECTIONS
                | BluetoothProxyFeature.REMOTE_CACHING | BluetoothProxyFeature.RAW_ADVERTISEMENTS)
        if flags & need != need:
            raise RuntimeError(f"{proxy.kind}: feature flags {flags:#x} lack {need & ~flags:#x}")
        ads = Adverts()
        cli.subscribe_bluetooth_le_raw_advertisements(ads.on_raw)
        await asyncio.sleep(1.0)
        ads.reset()
        cpu0, t0 = cpu_seconds(proxy.pid), time.monotonic()
        await asyncio.sleep(args.adv_seconds)
        cpu1, t1 = cpu_seconds(proxy.pid), time.monotonic()
        adv = ads.window()
        adv["seconds"] = t1 - t0
        adv["proxy_cpu_pct"] = (cpu1 - cpu0) / (t1 - t0) * 100 if cpu0 is not None and cpu1 is not None else None
        if lamp not in ads.address_types:
            raise RuntimeError(f"{proxy.kind}: Lamp1 never heard")

        state = asyncio.get_running_loop().create_future()
        t_connect = time.perf_counter()
        await cli.bluetooth_device_connect(lamp, lambda c, m, e: state.done() or state.set_result((c, m, e)), timeout=20,
                                           feature_flags=flags, has_cache=False, address_type=ads.address_types[lamp])
        connected, mtu, error = await asyncio.wait_for(state, 20)
        connect_ms = (time.perf_counter() - t_connect) * 1000
        if not connected:
            raise RuntimeError(f"{proxy.kind}: connect failed, error {error:#x}")
        t_services = time.perf_counter()
        services = await cli.bluetooth_gatt_get_services(lamp)
        services_ms = (time.perf_counter() - t_services) * 1000
        handle = next(c.handle for s in services.services for c in s.characteristics
                      if uuidlib.UUID(c.uuid) == uuidlib.UUID(RED))
        for i in range(10):
            await cli.bluetooth_gatt_write(lamp, handle, bytes([i]), True, timeout=5)
        rtts = []
        failed = 0
        for i in range(args.writes):
            t = time.perf_counter()
            try:
                await cli.bluetooth_gatt_write(lamp, handle, bytes([i % 256]), True, timeout=5)
            except Exception:  # noqa: BLE001 - counted
                failed += 1
                continue
            rtts.append((time.perf_counter() - t) * 1000)
        last = bytes(await cli.bluetooth_gatt_read(lamp, handle))
        if last != bytes([(args.writes - 1) % 256]):
            failed += 1
        await cli.bluetooth_device_disconnect(lamp)
        return {"adverts": adv, "write_ms": rtts, "write_failed": failed, "connect_ms": connect_ms,
                "services_ms": services_ms, "mtu": mtu, "read_back_ok": last == bytes([(args.writes - 1) % 256])}
    finally:
        await cli.disconnect()


async def load_scenario(proxy: Proxy, world_pid: int, args: argparse.Namespace) -> dict:
    """(c): the proxy's CPU while the load world advertises."""
    cli, _ = await api_client(proxy.port)
    try:
        ads = Adverts()
        cli.subscribe_bluetooth_le_raw_advertisements(ads.on_raw)
        await asyncio.sleep(2.0)
        ads.reset()
        me = os.getpid()
        c0, w0, b0, t0 = cpu_seconds(proxy.pid), cpu_seconds(world_pid), cpu_seconds(me), time.monotonic()
        await asyncio.sleep(args.load_seconds)
        c1, w1, b1, t1 = cpu_seconds(proxy.pid), cpu_seconds(world_pid), cpu_seconds(me), time.monotonic()
        r = ads.window()
        dt = t1 - t0
        r.update(seconds=dt, proxy_cpu_s=c1 - c0, proxy_cpu_pct=(c1 - c0) / dt * 100, world_cpu_pct=(w1 - w0) / dt * 100,
                 client_cpu_pct=(b1 - b0) / dt * 100,
                 air_events_per_s=r["events_on_air"] / dt, events_per_s=r["events_received"] / dt,
                 reports_per_s=r["reports"] / dt, messages_per_s=r["messages"] / dt,
                 proxy_cpu_us_per_report=(c1 - c0) / r["reports"] * 1e6 if r["reports"] else None)
        return r
    finally:
        await cli.disconnect()


def attled_jobs(attled: str, work: Path, jobs: int, run: int, env: dict) -> dict:
    """attled's own writes: `attled --name Lamp1 --rgb` jobs on a world of their own."""
    world, ready = start_world(["Lamp1:pycom:interval=50"])
    phase_per_write, capture_rtt, failed = [], [], 0
    try:
        for j in range(jobs):
            cap = work / f"job-{run}-{j}.btsnoop"
            r = subprocess.run([attled, "--transport", ready["attled"][0], "--name", "Lamp1",
                                "--rgb", f"{j % 256},{run % 256},7", "--no-cache", "--btsnoop", str(cap)],
                               capture_output=True, text=True, timeout=30,
                               env={**env, "XDG_CACHE_HOME": str(work / f"job-cache-{run}-{j}")})
            m = re.search(r"attled: write\s+([\d.]+) ms.*Write Request x(\d+)", r.stderr)
            if r.returncode != 0 or not m:
                failed += 1
                continue
            phase_per_write.append(float(m.group(1)) / int(m.group(2)))
            capture_rtt += att_write_round_trips(cap)
    finally:
        world.stop()
    return {"phase_per_write_ms": phase_per_write, "capture_rtt_ms": capture_rtt, "failed": failed}


def one_run(kind: str, run: int, args: argparse.Namespace, work: Path, env: dict) -> dict:
    """Scenarios (a)+(b) and (c) for one proxy, each on a fresh world and proxy process."""
    out: dict = {"kind": kind, "run": run}
    snoop = work / f"{kind}-{run}-world.btsnoop"
    world, ready = start_world(["Lamp1:pycom:interval=50,uuid=0,stamp=1"], snoop=snoop)
    try:
        proxy = start_proxy(kind, args.attled, ready, work, f"{kind}-{run}-write", env)
        try:
            lamp = int(ready["devices"][0]["address"].replace(":", ""), 16)
            out.update(asyncio.run(asyncio.wait_for(write_scenario(proxy, lamp, args), args.adv_seconds + 120)))
        finally:
            proxy.stop()
        out["peak_kib_write"] = proxy.peak_kib
    finally:
        world.stop()
    out["world_write_ms"] = att_write_round_trips(snoop)[-args.writes:]  # the measured ones (warm-up first)

    devices = [f"B{i:02d}:pycom:interval={args.load_interval:g},uuid=0,stamp=1,adv_delay={i * args.load_interval / args.load_devices:.1f}"
               for i in range(args.load_devices)]
    world, ready = start_world(devices)
    try:
        proxy = start_proxy(kind, args.attled, ready, work, f"{kind}-{run}-load", env)
        try:
            out["load"] = asyncio.run(asyncio.wait_for(load_scenario(proxy, ready["pid"], args), args.load_seconds + 60))
        finally:
            proxy.stop()
        out["peak_kib_load"] = proxy.peak_kib
    finally:
        world.stop()
    return out


def fmt(v, spec: str = "8.2f") -> str:
    if v is None or v != v:
        width = int(re.match(r"\d*", spec).group() or 0)
        return f"{'-':>{width}}"
    return format(v, spec)


def run(args: argparse.Namespace, figures: dict) -> int:
    """The whole proxy section; returns the number of failures."""
    work = Path(tempfile.mkdtemp(prefix="attled-proxybench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUMBLE_")}
    env["XDG_STATE_HOME"] = str(work / "state")
    results: dict[str, list[dict]] = {k: [] for k in KINDS}
    jobs: list[dict] = []
    failures = 0
    try:
        for i in range(args.n):
            order = KINDS if i % 2 == 0 else KINDS[::-1]
            for kind in order:
                try:
                    results[kind].append(one_run(kind, i, args, work, env))
                except Exception as error:  # noqa: BLE001 - a failed run is reported and counted, the others go on
                    failures += 1
                    print(f"proxybench: {kind}, run {i + 1}: {type(error).__name__}: {error}", file=sys.stderr)
                    logs = sorted(work.glob(f"{kind}-{i}-*.log"))
                    if logs:
                        print(logs[-1].read_text(errors="replace")[-3000:], file=sys.stderr)
            jobs.append(attled_jobs(args.attled, work, args.jobs, i, env))
        failures += report(args, results, jobs, figures)
        return failures
    finally:
        if args.keep:
            print(f"proxybench: files kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(args: argparse.Namespace, results: dict[str, list[dict]], jobs: list[dict], figures: dict) -> int:
    failures = 0
    size = os.path.getsize(args.attled)
    release = "/release/" in args.attled
    load = os.getloadavg()
    print(f"\nBluetooth proxy (issue 30): attled proxy against a reference proxy on Bumble (proxy_reference.py),"
          f" {args.n} runs each, alternating; aioesphomeapi's APIClient in the bench process; attled {args.attled}"
          f" ({'release' if release else 'NOT a release build'}); load average {load[0]:.2f}, {os.cpu_count()} cores")
    print("Bumble's virtual air delivers at once (no connection interval, no radio): every figure is the cost of"
          " the host stack and the API path, not what a radio adds.\n")

    fig: dict = {"n": args.n, "attled": args.attled, "release": release, "writes_per_run": args.writes}
    # (a) writes
    print(f"a. GATT write with response through the proxy: bluetooth_gatt_write(..., True), {args.writes} per run on one"
          " link, one at a time (ms; world = the controller, air and peripheral's part, from the world's HCI capture)\n")
    print(f"{'':22} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} {'mean':>7} {'world p50':>9} {'connect':>8} {'services':>8}"
          f" {'writes':>6} {'failed':>6} {'runs':>4}")
    wr: dict = {}
    for kind in KINDS:
        rs = results[kind]
        rtt = [x for r in rs for x in r["write_ms"]]
        world = [x for r in rs for x in r["world_write_ms"]]
        failed = sum(r["write_failed"] for r in rs)  # a run that failed whole was counted by run()
        failures += failed
        s = spread(rtt)
        conn = statistics.median([r["connect_ms"] for r in rs]) if rs else float("nan")
        serv = statistics.median([r["services_ms"] for r in rs]) if rs else float("nan")
        wr[kind] = {**s, "world_p50": percentile(world, 50), "world_p99": percentile(world, 99),
                    "connect_ms_median": conn, "services_ms_median": serv, "failed": failed, "runs": len(rs),
                    "per_run": [{k: v for k, v in spread(r["write_ms"]).items() if k in ("p50", "p99", "max")}
                                | {"world_max": max(r["world_write_ms"], default=float("nan")),
                                   "slowest_at": r["write_ms"].index(max(r["write_ms"])) if r["write_ms"] else None}
                                for r in rs]}
        print(f"{kind + ' proxy':22} {fmt(s['p50'], '7.3f')} {fmt(s['p90'], '7.3f')} {fmt(s['p99'], '7.3f')}"
              f" {fmt(s['max'], '7.2f')} {fmt(s['mean'], '7.3f')} {fmt(percentile(world, 50), '9.3f')}"
              f" {fmt(conn, '8.1f')} {fmt(serv, '8.1f')} {s['n']:>6} {failed:>6} {len(rs):>4}")
    a, r = wr["attled"], wr["reference"]
    if a["n"] and r["n"]:
        print(f"{'ratio attled/reference':22} {a['p50'] / r['p50']:6.2f}x {a['p90'] / r['p90']:6.2f}x"
              f" {a['p99'] / r['p99']:6.2f}x {a['max'] / r['max']:6.2f}x {a['mean'] / r['mean']:6.2f}x")
        for kind in KINDS:
            w = wr[kind]
            print(f"  {kind}: above the world's part, p50 {w['p50'] - w['world_p50']:.3f} ms"
                  f" (the proxy, the client and two loopback TCP hops)")
    phase = [x for j in jobs for x in j["phase_per_write_ms"]]
    cap = [x for j in jobs for x in j["capture_rtt_ms"]]
    jfailed = sum(j["failed"] for j in jobs)
    failures += jfailed
    wr["attled_job"] = {"jobs": args.jobs * args.n, "failed": jfailed, "phase_per_write": spread(phase),
                        "capture_rtt": spread(cap)}
    print(f"\nattled's own write ({args.jobs} `attled --name Lamp1 --rgb ... --no-cache` jobs per run, {jfailed} failed):"
          f" the write phase per Write Request p50 {fmt(percentile(phase, 50), '.3f')} ms"
          f" (p90 {fmt(percentile(phase, 90), '.3f')}, {len(phase)} jobs); Write Request -> Response in its captures"
          f" p50 {fmt(percentile(cap, 50), '.3f')} ms, p99 {fmt(percentile(cap, 99), '.3f')} ms ({len(cap)} writes)")
    fig["write"] = wr

    # (b) advertisement latency
    print(f"\nb. advertisement latency: the device's advertising event on the air -> the client's callback, one device"
          f" every 50 ms, {args.adv_seconds:g} s per run (ms; both proxies batch: 16 a message or 20 ms after the"
          " first of a batch)\n")
    print(f"{'':22} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} {'events':>7} {'on air':>7} {'reports':>7}"
          f" {'msgs':>6} {'proxy CPU %':>11}")
    adv: dict = {}
    for kind in KINDS:
        rs = results[kind]
        s = spread([x for r in rs for x in r["adverts"]["_lat"]])
        ev = sum(r["adverts"]["events_received"] for r in rs)
        air = sum(r["adverts"]["events_on_air"] for r in rs)
        rep = sum(r["adverts"]["reports"] for r in rs)
        msgs = sum(r["adverts"]["messages"] for r in rs)
        cpu = [r["adverts"]["proxy_cpu_pct"] for r in rs if r["adverts"]["proxy_cpu_pct"] is not None]
        cpu_m = statistics.median(cpu) if cpu else None
        adv[kind] = {**s, "events_received": ev, "events_on_air": air, "reports": rep, "messages": msgs,
                     "proxy_cpu_pct_median": cpu_m,
                     "per_run": [{k: v for k, v in spread(r["adverts"]["_lat"]).items() if k in ("p50", "p99", "max")}
                                 for r in rs]}
        print(f"{kind + ' proxy':22} {fmt(s['p50'], '7.2f')} {fmt(s['p90'], '7.2f')} {fmt(s['p99'], '7.2f')}"
              f" {fmt(s['max'], '7.2f')} {ev:>7} {air:>7} {rep:>7} {msgs:>6} {fmt(cpu_m, '11.2f')}")
    fig["advert_latency"] = adv

    # (c) load
    print(f"\nc. CPU under load: {args.load_devices} devices advertising every {args.load_interval:g} ms"
          f" ({args.load_devices * 1000 / args.load_interval:.0f} advertising events/s asked), {args.load_seconds:g} s"
          " per run (medians of the runs; a report = one advertisement or scan response)\n")
    print(f"{'':22} {'air ev/s':>8} {'rcvd ev/s':>9} {'reports/s':>9} {'msgs/s':>7} {'proxy CPU %':>11}"
          f" {'us/report':>9} {'lat p50':>7} {'lat p99':>7} {'world CPU %':>11} {'client CPU %':>12}")
    ld: dict = {}
    for kind in KINDS:
        rs = [r["load"] for r in results[kind] if "load" in r]
        if not rs:
            print(f"{kind + ' proxy':22} no run")
            continue
        med = {k: statistics.median([r[k] for r in rs if r.get(k) is not None] or [float("nan")])
               for k in ("air_events_per_s", "events_per_s", "reports_per_s", "messages_per_s", "proxy_cpu_pct",
                         "proxy_cpu_us_per_report", "world_cpu_pct", "client_cpu_pct")}
        s = spread([x for r in rs for x in r["_lat"]])
        ld[kind] = {**med, "latency_ms": s, "runs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rs]}
        print(f"{kind + ' proxy':22} {med['air_events_per_s']:8.0f} {med['events_per_s']:9.0f} {med['reports_per_s']:9.0f}"
              f" {med['messages_per_s']:7.0f} {med['proxy_cpu_pct']:11.1f} {fmt(med['proxy_cpu_us_per_report'], '9.1f')}"
              f" {fmt(s['p50'], '7.2f')} {fmt(s['p99'], '7.2f')} {med['world_cpu_pct']:11.1f} {med['client_cpu_pct']:12.1f}")
    if "attled" in ld and "reference" in ld and ld["reference"]["proxy_cpu_pct"]:
        print(f"{'ratio attled/reference':22} proxy CPU x{ld['attled']['proxy_cpu_pct'] / ld['reference']['proxy_cpu_pct']:.2f},"
              f" per report x{ld['attled']['proxy_cpu_us_per_report'] / ld['reference']['proxy_cpu_us_per_report']:.2f}")
    fig["load"] = ld

    # (d) memory and size
    print("\nd. memory and size\n")
    mem: dict = {}
    for kind in KINDS:
        peaks = [max(x for x in (r.get("peak_kib_write"), r.get("peak_kib_load")) if x is not None)
                 for r in results[kind] if r.get("peak_kib_write") or r.get("peak_kib_load")]
        mem[kind] = {"peak_rss_kib_max": max(peaks) if peaks else None,
                     "peak_rss_kib_median": statistics.median(peaks) if peaks else None}
        print(f"{kind + ' proxy':22} peak RSS {fmt(max(peaks) / 1024 if peaks else None, '.1f')} MiB"
              f" (the largest of its processes; median of runs {fmt(statistics.median(peaks) / 1024 if peaks else None, '.1f')} MiB)")
    within = size < BINARY_LIMIT_BYTES
    print(f"attled binary: {size:,} bytes = {size / 1e6:.2f} MB ({size / 2**20:.2f} MiB), {args.attled}"
          f" ({'release' if release else 'NOT a release build'}): {'within' if within else 'ABOVE'} the issue's"
          f" {BINARY_LIMIT_BYTES / 1e6:g} MB")
    fig["memory"] = mem
    fig["binary"] = {"bytes": size, "limit_bytes": BINARY_LIMIT_BYTES, "within": within, "release": release}
    figures["proxy"] = fig
    return failures


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("-n", type=int, default=3, help="runs of each proxy (default 3)")
    ap.add_argument("--writes", type=int, default=200, help="timed writes per run (default 200)")
    ap.add_argument("--jobs", type=int, default=10, help="attled --rgb jobs per run for attled's own write (default 10)")
    ap.add_argument("--adv-seconds", type=float, default=10.0, help="advertisement latency window per run, s (default 10)")
    ap.add_argument("--load-devices", type=int, default=20, help="devices of the load world (default 20)")
    ap.add_argument("--load-interval", type=float, default=20.0, help="their advertising interval, ms (default 20)")
    ap.add_argument("--load-seconds", type=float, default=10.0, help="load window per run, s (default 10)")
    ap.add_argument("--keep", action="store_true", help="keep the logs and captures")


def section_args(attled: str, n: int) -> argparse.Namespace:
    """The defaults, for bench.py's proxy section."""
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args([])
    args.attled, args.n = attled, n
    return args


def main() -> int:
    return section.main(__doc__, add_arguments, run, "make release")

if __name__ == "__main__":
    sys.exit(main())
