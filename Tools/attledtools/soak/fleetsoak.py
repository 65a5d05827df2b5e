"""make soak-gateways: three `attled gateway` processes sharing six lamps in
three rooms (attledtools.drivers.fleet) for ``--duration`` seconds (default
600), commands at 5 Hz to every lamp throughout, +-8 dB of RSSI noise, two
brokers bridged (g0 and g2 on one, g1 on the other), and a fault every
``--every`` seconds, in turn:

  kill      kill -9 of a gateway holding lamps; restarted 3 s later (systemd's Restart=)
  hang      SIGSTOP of a gateway holding lamps; the watchdog (3 s) kills it; restarted
  move      a lamp carried to the room of another gateway (its ranges swapped)
  partition the bridge between the brokers cut for 8 s, then healed

With ``--faults none`` the run is steady: noise and commands only, for
the whole duration (no holder may change).

Measured, from the lamps' own events and the broker:
  * failover per fault: from the fault to the lamp's availability "online"
    published through its new holder (p50, p95, max), for every lamp the
    fault took from its holder;
  * changes of holder: all, and outside the faults' windows (must be 0);
  * double links (must be 0);
  * commands issued, applied, applied twice (must be 0), the last one applied on every lamp;
  * MQTT messages per second per gateway (each gateway's own count, logged at its clean stop);
  * Home Assistant entities per lamp (discovery config topics, and distinct payloads).

Prints a summary, writes it as JSON with ``--json``, exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import statistics
import sys
import time

from attledtools.drivers.fleet import CommandStream, Fleet, Lamp, PREFIX

LAMPS = [Lamp("Lamp1", "pycom"), Lamp("Lamp2", "particle"), Lamp("Lamp3", "pycom"),
         Lamp("Lamp4", "particle"), Lamp("Lamp5", "pycom"), Lamp("Lamp6", "particle")]
# lamp -> {gateway: rssi}: two gateways hear each lamp, the room's 25+ dB better.
ROOMS = {"Lamp1": {0: -45, 2: -78}, "Lamp2": {0: -45, 1: -75}, "Lamp3": {1: -45, 0: -75},
         "Lamp4": {1: -45, 2: -78}, "Lamp5": {2: -45, 1: -80}, "Lamp6": {2: -45, 0: -80}}


SETTLE_S = 10  # commands without faults at the end


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--every", type=float, default=20, help="seconds between faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", default="kill,hang,move,partition",
                    help="the faults' order (comma-separated); none: a steady run, noise and commands only")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rnd = random.Random(args.seed)
    rooms = {lamp: dict(g) for lamp, g in ROOMS.items()}
    ranges = {(g, lamp): r for lamp, gs in rooms.items() for g, r in gs.items()}
    f = Fleet(lamps=LAMPS, ranges=ranges, default_rssi=None, noise=8, seed=args.seed, bridged=True).start()
    failures: list[str] = []
    failover: dict[str, list[float]] = {"kill": [], "hang": [], "move": [], "partition": []}
    windows: list[tuple[float, float]] = []
    try:
        f.wait_holders(lambda h: all(h[l] == max(rooms[l], key=rooms[l].get) for l in h), timeout=60)
        start_events = len(f.world.events)
        stream = CommandStream(f, hz=5).start()
        began = time.monotonic()
        kinds = [] if args.faults == "none" else args.faults.split(",")
        n = 0
        while kinds and time.monotonic() - began < args.duration - args.every - SETTLE_S:
            time.sleep(args.every)  # the schedule's pace: steady time between faults is part of the test
            kind = kinds[n % len(kinds)]
            n += 1
            holders = f.holders()
            t = time.monotonic()
            if kind in ("kill", "hang"):
                busy = sorted({g for g in holders.values() if g is not None})
                g = rnd.choice(busy)
                taken = [l for l, h in holders.items() if h == g]
                if kind == "kill":
                    f.kill(g)
                else:
                    f.sigstop(g)
                for lamp in taken:
                    try:
                        failover[kind].append(f.online_at(lamp, t, timeout=30) - t)
                    except AssertionError:
                        failures.append(f"{kind} of g{g}: {lamp} not online again within 30 s")
                if kind == "hang":
                    deadline = time.monotonic() + 10
                    while f.procs[g].p.poll() is None and time.monotonic() < deadline:
                        time.sleep(0.05)  # the watchdog's kill
                    if f.procs[g].p.poll() is None:
                        failures.append(f"hang of g{g}: the watchdog never killed it")
                        f.kill(g)
                time.sleep(3)  # systemd's RestartSec, shortened
                f.start_gateway(g)
            elif kind == "move":
                lamp = rnd.choice([l.name for l in LAMPS])
                holder = holders[lamp]
                others = [g for g in range(3) if g != holder]
                to = rnd.choice(others)
                # The lamp now sits in room `to`: heard well there, faintly by the
                # third gateway, not at all by its holder (a holder still in range
                # keeps it: a healthy link is not taken away).
                third = next(g for g in range(3) if g not in (holder, to))
                new = {to: -45, third: -78}
                for g in range(3):
                    f.set_range(g, lamp, new.get(g))
                rooms[lamp] = new
                try:
                    failover["move"].append(f.online_at(lamp, t, timeout=30) - t)
                except AssertionError:
                    failures.append(f"move of {lamp} to g{to}: not online again within 30 s")
            else:
                f.relay.cut()
                time.sleep(8)  # the partition lasts this long
                f.relay.heal()
            windows.append((t, time.monotonic() + 3))
        # No more faults: commands go on for a while, and the last one must be on every lamp.
        steady = SETTLE_S if kinds else args.duration
        time.sleep(steady)  # steady time (after the last fault, or the whole of a steady run) is part of the run
        stream.stop()
        stream.wait_last_applied(timeout=15)
        commands = stream.figures()
        changes = [e for e in f.world.events[start_events:] if e.get("event") == "connected"]
        outside = [e for e in changes if not any(a <= e["rx"] <= b for a, b in windows)]
        doubles = f.double_links()
        # Home Assistant entities per lamp.
        entities = {}
        for lamp in LAMPS:
            node = f.node(lamp.name)
            msgs = f.watcher.find(pred=lambda m, node=node: m.topic.startswith("homeassistant/") and f"attled_{node}/" in m.topic)
            entities[lamp.name] = {"config_topics": len({m.topic for m in msgs if m.payload}),
                                   "distinct_payloads": len({(m.topic, m.payload) for m in msgs if m.payload})}
        # Each gateway's own count, from its clean stop.
        rates = {}
        for i, p in enumerate(f.procs):
            if p is not None and p.p.poll() is None:
                p.p.send_signal(signal.SIGTERM)
                p.p.wait(10)
                m = re.search(r"(\d+) MQTT messages published in (\d+) s, ([\d.]+)/s", p.stderr)
                if m:
                    rates[f"g{i}"] = {"messages": int(m.group(1)), "seconds": int(m.group(2)), "per_second": float(m.group(3))}
        summary = {
            "duration_s": args.duration, "faults": n, "fault_kinds": kinds, "seed": args.seed,
            "failover_s": {k: {"n": len(v), "p50": pct(v, 50), "p95": pct(v, 95), "max": max(v) if v else None}
                           for k, v in failover.items()},
            "holder_changes": len(changes), "holder_changes_outside_faults": len(outside),
            "outside_faults": [{"lamp": e["device"], "host": f.host_of(e["peer"]), "at_s": round(e["rx"] - began, 3)}
                               for e in outside],
            "fault_windows_s": [(round(a - began, 3), round(b - began, 3)) for a, b in windows],
            "double_links": doubles, "commands": commands,
            "commands_issued": sum(c["issued"] for c in commands.values()),
            "commands_applied": sum(c["applied"] for c in commands.values()),
            "commands_applied_twice": sum(c["applied_twice"] for c in commands.values()),
            "mqtt_per_gateway": rates, "ha_entities_per_lamp": entities,
        }
        if doubles:
            failures.append(f"{doubles} double link(s)")
        if outside:
            failures.append(f"{len(outside)} change(s) of holder outside the faults")
        for name, c in commands.items():
            if c["applied_twice"]:
                failures.append(f"{name}: {c['applied_twice']} command(s) applied twice")
            if not c["last_applied"]:
                failures.append(f"{name}: the last command is not what it shows")
        for name, e in entities.items():
            if e["distinct_payloads"] != e["config_topics"]:
                failures.append(f"{name}: discovery configs differ between gateways: {e}")
        goals = {"kill": 3.0, "hang": 15.0}
        for k, limit in goals.items():
            p95 = summary["failover_s"][k]["p95"]
            if p95 is not None and p95 > limit:
                failures.append(f"failover after {k}: p95 {p95:.2f} s > {limit} s")
        summary["failures"] = failures
        print(json.dumps(summary, indent=2))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(summary, out, indent=2)
    finally:
        if failures:
            print(f.describe(), file=sys.stderr)
        f.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
