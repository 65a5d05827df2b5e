"""make bench, section "gateway-air": the air-time model of a gateway command.

The virtual links deliver a PDU at once whatever the connection interval, so
the gateway's connection interval policy is invisible in the tests. This
section measures, with the real `attled gateway` on Root Canal (which grants
the intervals asked for and carries out connection updates), what a command
costs on real radio:

  round trips (the Write Requests the lamp received for the command)
  x the connection interval in effect when the command came (the lamp's own
    view: its "connected" and "conn_params" events)
  + the peripheral latency in effect x the interval (the lamp may sleep
    through that many events before it hears the first request)
  + any connection update the writes must wait for (none: the gateway's
    writes go out at once; the update back to the short interval takes
    effect at its instant, at least 6 events later).

Twice: on a fresh link (just connected: the one-shot parameters) and on an
idle link (after the gateway's quiet timer moved it to the idle parameters).
The target (issue 18): at most 100 ms for a pycom lamp (3 Write Requests).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from attledtools import REPO_ROOT
from attledtools.drivers.attledproc import AttledProcess
from attledtools.drivers.mqttbroker import Broker
from attledtools.drivers.worldproc import WorldProcess

TARGET_MS = 100.0
IDLE_WAIT_S = 25.0  # the gateway goes idle after 10 s quiet


def interval_at(world: WorldProcess, before: int) -> tuple[float, int]:
    """(interval ms, latency) in effect at event index ``before``: the last
    connected/conn_params event of the lamp before it."""
    interval, latency = None, 0
    for e in world.events[:before]:
        if e.get("event") in ("connected", "conn_params") and "interval_ms" in e:
            interval, latency = float(e["interval_ms"]), int(e.get("latency", 0))
    if interval is None:
        raise RuntimeError("the lamp never reported its connection interval")
    return interval, latency


def one_command(world: WorldProcess, pub, topic: str, rgb: tuple[int, int, int], label: str) -> dict:
    mark = len(world.events)
    interval, latency = interval_at(world, mark)
    pub.publish(topic, json.dumps({"state": "ON", "color": dict(zip("rgb", rgb)), "brightness": 255}).encode(), qos=0)
    want = list(rgb)
    done = world.wait(lambda e: e.get("event") == "state" and e.get("rgb") == want, timeout=10, since=mark)
    if done is None:
        raise RuntimeError(f"{label}: the lamp never showed {rgb}")
    writes = [e for e in world.events[mark:] if e.get("event") == "write" and e.get("op") == "request"]
    model = len(writes) * interval + latency * interval
    return {"link": label, "round_trips": len(writes), "interval_ms": interval, "latency": latency,
            "update_wait_ms": 0.0, "model_ms": round(model, 1), "target_ms": TARGET_MS, "ok": model <= TARGET_MS}


def run(attled: str, figures: dict) -> int:
    import paho.mqtt.client as mqtt
    work = Path(tempfile.mkdtemp(prefix="attled-air-"))
    broker = Broker(work, log=False)
    broker.start()
    world = gw = None
    failures = 0
    try:
        world = WorldProcess(["--controller", "rootcanal", "--host", "tcp-server:127.0.0.1:0",
                              "--device", "Lamp1:pycom:interval=100"], lifetime=300)
        ready = world.wait_ready(40)
        if not ready:
            raise RuntimeError("vworld (Root Canal) did not start")
        node = ready["devices"][0]["address"].replace(":", "").lower()
        gw = AttledProcess(attled, ["gateway", "-i", ready["attled"][0], "--mqtt", f"127.0.0.1:{broker.port}",
                                    "--name", "Lamp1", "--no-cache"], log=work / "gateway.log", stdout=False,
                           home=work / "home")
        gw.wait_line("MQTT: connected", timeout=30)
        gw.wait_line("ready (", timeout=30)
        pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"gatewayair-{os.getpid()}")
        pub.connect("127.0.0.1", broker.port)
        pub.loop_start()
        topic = f"attled/{node}/set"
        one_command(world, pub, topic, (9, 9, 9), "warm-up")  # not measured
        rows = [one_command(world, pub, topic, (1, 2, 3), "fresh")]
        mark = len(world.events)
        idle = world.wait(lambda e: e.get("event") == "conn_params", timeout=IDLE_WAIT_S, since=mark)
        if idle is None:
            raise RuntimeError("the gateway never moved the link to its idle parameters")
        rows.append(one_command(world, pub, topic, (4, 5, 6), "idle"))
        pub.loop_stop()
        print("gateway air-time model (Root Canal; round trips x interval in effect + latency x interval):")
        for r in rows:
            print(f"  {r['link']:<6} {r['round_trips']} round trips x {r['interval_ms']:g} ms"
                  f" + latency {r['latency']} -> {r['model_ms']:g} ms (target <= {TARGET_MS:g} ms: {'ok' if r['ok'] else 'OVER'})")
            failures += 0 if r["ok"] else 1
        figures["gateway_air"] = rows
    except (RuntimeError, AssertionError) as e:
        print(f"gateway-air: {e}", file=sys.stderr)
        failures += 1
    finally:
        if gw is not None:
            gw.kill()
        if world is not None:
            world.stop()
        broker.stop()
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attled", default=str(REPO_ROOT / ".build/debug/attled"))
    args = ap.parse_args()
    figures: dict = {}
    failures = run(args.attled, figures)
    print(json.dumps(figures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
