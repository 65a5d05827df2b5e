"""make soak-gateway: `attled gateway` under a long command stream, with the
devices and the broker restarted at random times (issue 12).

Set-up (all on loopback): mosquitto on a free port (no persistence); an "air"
vworld with one host controller for attled and one per device
(``--reset-on-host-close``: a device process that goes away takes its links
with it); each device (pycom "Lamp-P", particle "Lamp-X", harness "Harness")
in its own vworld process attached with ``--peripheral-transport``, so it can
be stopped and started again with the same address; and ``attled gateway``.

The run (seeded: ``--seed`` reproduces the command stream and the schedule):

* ``-n`` commands (default 10,000) in bursts with small random gaps, paced to
  take about ``--duration`` seconds: Home Assistant JSON light commands to the
  two lamps (full ON with colour and brightness, OFF, bare ON, brightness
  only) and, now and then, PRESS on one of the harness buttons.
* Chaos at random points of the first ~85 % of the stream: a device process
  stopped (SIGTERM or SIGKILL) and started again after a short outage, or the
  broker killed (SIGKILL, everything retained lost) and started again on the
  same port. Commands sent meanwhile may be lost: that is the point.
* After the last restart: wait until the broker, the gateway and every device
  are back (each device's availability "online" published after it), then a
  final phase in which nothing may be lost: a full command per lamp first
  (which fixes the whole state), random commands and presses, and a final
  full command per lamp. Checked: each lamp's final colour (vworld state
  event) equals the last command (colour x brightness / 255 rounded, OFF =
  black); the state messages of that phase are, in order, a subsequence of
  the expected states ending with the last (coalescing allowed, nothing
  reordered or invented); the retained state topic (read by a fresh client)
  equals the last state; every PRESS of that phase reached the harness
  (press and release bytes).
* Memory: the gateway's VmRSS every second; first/median/last/max, the slope,
  and the mean of the first third of the run after warm-up against the last
  third (fails above ``--rss-growth`` percent). Open descriptors at start
  and end.

Prints a summary, writes it as JSON with ``--json``, exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt

from attledtools import REPO_ROOT
from attledtools.drivers.attledproc import AttledProcess
from attledtools.drivers.mqttbroker import Broker, Msg, Watcher
from attledtools.drivers.worldproc import WorldProcess
from attledtools.halight import Light
from attledtools.soak.gatewayfigures import Figures, report
from attledtools.soak.gatewaymodel import DEVICES, LAMPS, PREFIX, PRESS_BYTES, random_light_command, topic
from attledtools.soak.gatewayprocs import Device, retained

ROOT = REPO_ROOT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attled", default=str(ROOT / ".build/debug/attled"))
    ap.add_argument("-n", type=int, default=10_000, help="commands in all (default 10000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=180, help="target seconds for the command stream")
    ap.add_argument("--device-restarts", type=int, default=6)
    ap.add_argument("--broker-restarts", type=int, default=3)
    ap.add_argument("--press-ratio", type=float, default=0.01, help="share of commands that are harness PRESSes")
    ap.add_argument("--final-phase", type=int, default=0,
                    help="commands after the last restart (default: 5%% of -n, at least 100)")
    ap.add_argument("--rss-growth", type=float, default=20.0, help="max %% growth, first vs last third")
    ap.add_argument("--absolute", action="store_true",
                    help="only commands carrying the whole state (sidesteps relative commands being "
                    "applied to the state before a write still in flight)")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--gateway-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for attled gateway (repeatable, e.g. --trace)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    fig = Figures(seed=args.seed)
    final_n = args.final_phase or max(100, args.n // 20)
    chaos_n = args.n - final_n - len(LAMPS) * 2

    workdir = Path(tempfile.mkdtemp(prefix="gwsoak-", dir="/tmp"))
    air = WorldProcess(["--host", "tcp-server:127.0.0.1:0"] * (1 + len(DEVICES)) + ["--reset-on-host-close"],
                       lifetime=3600)
    broker = Broker(workdir)
    devices: dict[str, Device] = {}
    gw: AttledProcess | None = None
    client: Watcher | None = None
    rss: list[tuple[float, int]] = []
    sampling = threading.Event()
    t_start = time.monotonic()

    def fail(why: str) -> None:
        fig.failures.append(why)
        print(f"gatewaysoak: FAIL: {why}", file=sys.stderr, flush=True)

    try:
        ready = air.wait_ready(30)
        if not ready:
            raise RuntimeError("air vworld did not start")
        attled_transport = ready["attled"][0]
        for i, (name, profile, address) in enumerate(DEVICES):
            spec = ready["attled"][1 + i]
            devices[name] = Device(name, profile, address, "tcp-client:" + spec[len("tcp:"):])
            devices[name].start()
        broker.start()
        client = Watcher(broker.port, topics=f"{PREFIX}/#")
        gw = AttledProcess(args.attled, ["gateway", "-i", attled_transport, "--mqtt", f"127.0.0.1:{broker.port}",
                                         *args.gateway_arg], log=workdir / "gateway.log", stdout=False,
                           home=workdir / "gwhome")

        def wait_msg(topic_: str, pred, since: int, timeout: float) -> Msg | None:
            """The message, or None at the deadline (the soak records a failure and goes on)."""
            try:
                return client.wait(topic_, pred, since, timeout)
            except AssertionError:
                return None

        def all_online(since: int, timeout: float) -> float | None:
            """Every device's availability 'online' from message index ``since``; the time of the last."""
            last = 0.0
            for name, _, _ in DEVICES:
                m = wait_msg(topic(name, "availability"), lambda m: m.text == "online", since, timeout)
                if m is None:
                    return None
                last = max(last, m.at)
            return last

        if all_online(0, 30) is None:
            raise RuntimeError("the devices did not come online")
        print(f"gatewaysoak: all three devices online after {time.monotonic() - t_start:.1f} s; "
              f"{args.n} commands, seed {args.seed}", flush=True)

        def sample() -> None:
            while not sampling.wait(1.0):
                kb = gw.rss_kb()
                if kb is not None:
                    rss.append((time.monotonic(), kb))
        sampler = threading.Thread(target=sample, daemon=True)
        rss.append((time.monotonic(), gw.rss_kb() or 0))
        fig.fds["start"] = gw.fds()
        sampler.start()

        # --- the chaos schedule: command indices (seeded) ---
        kinds = ["device"] * args.device_restarts + ["broker"] * args.broker_restarts
        rng.shuffle(kinds)
        # Each device in turn (in a shuffled order), so every one is restarted.
        victims = [n for n, _, _ in DEVICES]
        rng.shuffle(victims)
        lo, hi = int(chaos_n * 0.05), int(chaos_n * 0.85)
        points = sorted(rng.sample(range(lo, hi), len(kinds)))
        schedule = list(zip(points, kinds))
        chaos_busy = threading.Lock()
        chaos_threads: list[threading.Thread] = []
        last_restart = [0.0]

        def restart_device(name: str, kill: bool, down: float) -> None:
            with chaos_busy:
                d = devices[name]
                at = time.monotonic()
                d.stop(kill)
                time.sleep(down)
                m = client.mark()
                started = d.start()
                last_restart[0] = max(last_restart[0], started)
                on = wait_msg(topic(name, "availability"), lambda x: x.text == "online", m, 60)
                fig.device_restarts.append({"device": name, "signal": "KILL" if kill else "TERM",
                                            "at_s": round(at - t_start, 2), "down_s": round(down, 2),
                                            "reconnect_s": round(on.at - started, 3) if on else None})
                if on is None:
                    fail(f"{name} not online within 60 s of its restart")

        def restart_broker(down: float) -> None:
            with chaos_busy:
                at = time.monotonic()
                broker.kill()
                time.sleep(down)
                broker.start()
                started = time.monotonic()
                last_restart[0] = max(last_restart[0], started)
                t = gw.line_time("MQTT: connected to", started, 60)
                fig.broker_restarts.append({"at_s": round(at - t_start, 2), "down_s": round(down, 2),
                                            "reconnect_s": round(t - started, 3) if t else None})
                if t is None:
                    fail("the gateway did not reconnect to the broker within 60 s")

        # --- the command stream ---
        model = {n: Light() for n in LAMPS}
        rate = args.n / args.duration

        def send(name: str, payload: str, leaf: str) -> None:
            info = client.c.publish(topic(name, leaf), payload, qos=1)  # not waiting for its PUBACK
            fig.commands += 1
            if fig.commands % 1000 == 0:
                print(f"gatewaysoak: {fig.commands} commands, {time.monotonic() - t_start:.0f} s, "
                      f"RSS {rss[-1][1] if rss else '?'} KiB", flush=True)
            fig.per_device[name] += 1
            if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
                fig.publish_failures += 1

        def one_command(sink: list | None = None) -> None:
            if rng.random() < args.press_ratio:
                b = rng.choice([1, 2])
                send("Harness", "PRESS", f"button{b}")
                if sink is not None:
                    sink.append(b)
                return
            name = rng.choice(LAMPS)
            cmd = random_light_command(rng, absolute=args.absolute)
            model[name] = model[name].apply(cmd)
            send(name, json.dumps(cmd), "set")
            if sink is not None:
                expected[name].append(model[name])

        def stream(count: int, sink: list | None = None, on_index=None, presses_every: int = 0) -> None:
            i = 0
            while i < count:
                burst = min(count - i, rng.randint(5, 40))
                for _ in range(burst):
                    if on_index:
                        on_index(i)
                    if presses_every and i % presses_every == presses_every // 2:
                        b = rng.choice([1, 2])  # a PRESS guaranteed now and then
                        send("Harness", "PRESS", f"button{b}")
                        sink.append(b)
                    else:
                        one_command(sink)
                    i += 1
                    if rng.random() < 0.3:
                        time.sleep(rng.uniform(0, 0.004))
                time.sleep(burst / rate * rng.uniform(0.5, 1.5))
                if not client.connected:
                    # The broker is down: wait for it rather than queue thousands in paho.
                    client.wait_connected(60)

        expected: dict[str, list[Light]] = {n: [] for n in LAMPS}
        pending = list(schedule)

        def on_index(i: int) -> None:
            while pending and pending[0][0] <= i:
                _, kind = pending.pop(0)
                if kind == "device":
                    name = victims[len(fig.device_restarts_planned) % len(victims)]
                    fig.device_restarts_planned.append(name)
                    args_ = (name, rng.random() < 0.5, rng.uniform(0.3, 3.0))
                    th = threading.Thread(target=restart_device, args=args_, daemon=True)
                else:
                    th = threading.Thread(target=restart_broker, args=(rng.uniform(0.3, 3.0),), daemon=True)
                th.start()
                chaos_threads.append(th)

        t_stream = time.monotonic()
        stream(chaos_n, on_index=on_index)
        fig.commands_chaos = fig.commands
        for th in chaos_threads:
            th.join(120)
        chaos_end = time.monotonic()

        # --- after the last restart: everything back, then nothing may be lost ---
        client.wait_connected(30)
        # Each restart thread saw its device (or the gateway) back; now every
        # device's latest availability must be "online".
        deadline = time.monotonic() + 60
        while True:
            latest = {n: (client.find(topic(n, "availability")) or [Msg(0, "", b"")])[-1].text for n, _, _ in DEVICES}
            if all(v == "online" for v in latest.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not all(v == "online" for v in latest.values()):
            fail(f"not every device online again after the last restart: {latest}")
        # Settle: what was queued during the chaos is written before the final phase.
        time.sleep(2.0)
        mark = client.mark()
        marks = {n: len(d.world.events) for n, d in devices.items()}
        presses: list[int] = []
        for name in LAMPS:
            cmd = random_light_command(rng, full=True, absolute=args.absolute)
            model[name] = model[name].apply(cmd)
            expected[name].append(model[name])
            send(name, json.dumps(cmd), "set")
        stream(final_n, sink=presses, presses_every=max(10, final_n // 8))
        for name in LAMPS:
            cmd = random_light_command(rng, full=True, absolute=args.absolute)
            model[name] = model[name].apply(cmd)
            expected[name].append(model[name])
            send(name, json.dumps(cmd), "set")
        fig.commands_final_phase = fig.commands - fig.commands_chaos
        stream_end = time.monotonic()

        # --- final checks ---
        for name in LAMPS:
            want = model[name]
            d = devices[name]
            ev = d.world.wait(lambda e, n=name, w=want: e.get("event") == "state" and e.get("device") == n
                              and e.get("rgb") == w.device, 20, since=marks[name])
            time.sleep(0.3)  # anything written after it would show up as a later state event
            last_state = d.world.wait_for(lambda e, n=name: e.get("event") == "state" and e.get("device") == n,
                                          1, since=marks[name])
            got_dev = last_state.get("rgb") if last_state else None
            st = wait_msg(topic(name, "state"), lambda m, w=want: json.loads(m.payload) == w.state, mark, 10)
            states = [json.loads(m.payload) for m in client.find(topic(name, "state"), since=mark)]
            # The states published are, in order, a subsequence of the expected ones.
            exp = [x.state for x in expected[name]]
            j, ordered, unexpected = 0, True, None
            for k, s in enumerate(states):
                while j < len(exp) and exp[j] != s:
                    j += 1
                if j == len(exp):
                    ordered, unexpected = False, {"index": k, "state": s, "in_expected_at": exp.index(s) if s in exp else None}
                    break
            res = {"expected_device": want.device, "device": got_dev, "expected_state": want.state,
                   "last_state_message": states[-1] if states else None, "state_messages": len(states),
                   "commands": len(expected[name]), "in_order_subsequence": ordered}
            if unexpected:
                res["first_unexpected"] = unexpected
                res["debug"] = {"states": states, "expected": exp}
            fig.final[name] = res
            if ev is None or got_dev != want.device:
                fail(f"{name}: device shows {got_dev}, the last command asked for {want.device}")
            if st is None or not states or states[-1] != want.state:
                fail(f"{name}: last state message {states[-1] if states else None}, expected {want.state}")
            if not ordered:
                fail(f"{name}: a state message of the final phase is not one of the expected states in order")
        # The harness: every PRESS of the final phase, press and release.
        h = devices["Harness"].world
        want_bytes: dict[str, int] = {}
        for b in presses:
            for v in PRESS_BYTES[b]:
                want_bytes[v] = want_bytes.get(v, 0) + 1
        deadline = time.monotonic() + 15
        while True:
            writes = [e["value"] for e in h.events[marks["Harness"]:]
                      if e.get("event") == "write" and e.get("device") == "Harness"]
            got_bytes = {v: writes.count(v) for v in want_bytes}
            if got_bytes == want_bytes or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        fig.final["Harness"] = {"presses": len(presses), "expected_writes": want_bytes, "writes": got_bytes}
        if got_bytes != want_bytes:
            fail(f"Harness: {len(presses)} presses in the final phase; writes {got_bytes}, expected {want_bytes}")
        # The retained state topics, as a fresh client sees them.
        ret = retained(broker.port, [topic(n, "state") for n in LAMPS])
        for name in LAMPS:
            got = json.loads(ret[topic(name, "state")]) if topic(name, "state") in ret else None
            fig.final[name]["retained_state"] = got
            if got != model[name].state:
                fail(f"{name}: retained state {got}, expected {model[name].state}")

        # --- memory ---
        sampling.set()
        sampler.join(3)
        fig.fds["end"] = gw.fds()
        t_end = time.monotonic()
        fig.wall_s = round(t_end - t_start, 1)
        vals = [kb for _, kb in rss]
        warm = [(t, kb) for t, kb in rss if t >= t_stream + 15] or rss
        third = max(1, len(warm) // 3)
        first_third = statistics.mean(kb for _, kb in warm[:third])
        last_third = statistics.mean(kb for _, kb in warm[-third:])
        ts = [t - warm[0][0] for t, _ in warm]
        ks = [kb for _, kb in warm]
        slope = 0.0
        if len(ts) > 2 and statistics.pvariance(ts) > 0:
            mt, mk = statistics.mean(ts), statistics.mean(ks)
            slope = sum((t - mt) * (k - mk) for t, k in zip(ts, ks)) / sum((t - mt) ** 2 for t in ts)
        growth = 100.0 * (last_third - first_third) / first_third
        fig.rss_kb = {"samples": len(vals), "first": vals[0], "median": int(statistics.median(vals)), "last": vals[-1],
                      "max": max(vals), "min": min(vals), "first_third_mean": round(first_third),
                      "last_third_mean": round(last_third), "growth_pct": round(growth, 2),
                      "slope_kb_per_min": round(slope * 60, 1)}
        if growth > args.rss_growth:
            fail(f"RSS grew {growth:.1f} % between the first and the last third (limit {args.rss_growth} %)")
        if gw.p.poll() is not None:
            fail(f"the gateway exited ({gw.p.returncode}) during the run")
        fig.gateway_log = {k: gw.count(k) for k in (
            "MQTT: connection lost", "MQTT: connected to", "disconnected; unavailable", ": ready (",
            "write failed", "connect failed", "pressed while not connected", "warning", "setup failed",
            "controller:")}
        fig.gateway_log["lines"] = len(gw.lines)
        fig.final["stream_s"] = round(stream_end - t_stream, 1)
        fig.final["chaos_phase_s"] = round(chaos_end - t_stream, 1)
        code = gw.stop(signal.SIGTERM)
        if code != 0:
            fail(f"attled gateway exited {code} on SIGTERM")
    except Exception as e:  # noqa: BLE001
        fail(f"{type(e).__name__}: {e}")
    finally:
        sampling.set()
        # Every world's events, for the post-mortem (the work directory is kept on failure).
        for w, label in [(air, "air")] + [(w, f"{d.name}-{i}") for d in devices.values() for i, w in enumerate(d.worlds)]:
            (workdir / f"events-{label}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in w.events))
        if gw is not None:
            gw.kill()
        if client is not None:
            client.close()
        for d in devices.values():
            if d.world is not None:
                d.world.stop()
        broker.stop()
        air.stop()

    report(fig)
    if args.json:
        Path(args.json).write_text(json.dumps(fig.__dict__, indent=2) + "\n")
    if fig.failures:
        print(f"gatewaysoak: logs kept in {workdir}", file=sys.stderr)
    elif not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"gatewaysoak: logs in {workdir}")
    return 1 if fig.failures else 0


if __name__ == "__main__":
    sys.exit(main())
